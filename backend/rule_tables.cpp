#include "backend/rule_tables.h"

#include <fmt/format.h>

#include <mutex>

#include "backend/native.h"
#include "passes/ad/jvp_rules.h"
#include "passes/ad/linearize_rules.h"
#include "passes/ad/transpose_rules.h"
#include "refjit/ir/error.h"
#include "runtime/eval_rules.h"

namespace refjit {

PrimRules rules_of(Prim p) {
  PrimRules r{p};
  r.type = prim_info(p).type_rule != nullptr;
  r.eval = eval_rules().find(p) != nullptr;
  r.jvp = jvp_rules().find(p) != nullptr;
  r.transpose = transpose_rules().find(p) != nullptr;
  r.linearize = linearize_jvp_rules().find(p) != nullptr || partial_eval_rules().find(p) != nullptr;
  r.lower = has_native_lowering(p);
  return r;
}

std::vector<std::string> rule_table_problems() {
  std::vector<std::string> problems;
  auto expect = [&](Prim p, bool has, bool want, std::string_view rule, std::string_view why) {
    if (has == want) return;
    problems.push_back(fmt::format("{}: {} {} rule ({})", prim_name(p),
                                   want ? "has no" : "has an unexpected", rule, why));
  };
  for (int i = 0; i < kNumPrims; ++i) {
    const Prim p = static_cast<Prim>(i);
    const PrimRules r = rules_of(p);
    const AdRules ad = prim_info(p).ad_rules;
    const char* declared = ad == AdRules::linear ? "declared linear"
                           : ad == AdRules::jvp  ? "declared jvp"
                                                 : "declared no_ad";
    expect(p, r.type, true, "type", "every primitive has one");
    expect(p, r.eval, true, "interpreter", "every primitive has one");
    expect(p, r.lower, true, "lowering", "every primitive has one");
    expect(p, r.jvp, ad != AdRules::no_ad, "JVP", declared);
    expect(p, r.transpose, ad == AdRules::linear, "transpose", declared);
    // linearize falls back to the JVP rule; its own rule refines a primitive that has one.
    if (!r.jvp) expect(p, r.linearize, false, "linearize", "it has no JVP rule to refine");
  }
  return problems;
}

void check_rule_tables() {
  static std::once_flag once;
  static std::vector<std::string> problems;
  std::call_once(once, [] { problems = rule_table_problems(); });
  if (problems.empty()) return;
  std::string text;
  for (const std::string& p : problems) text += "\n  " + p;
  throw Error("internal error: the rule tables disagree with primitives.def:" + text);
}

}  // namespace refjit
