// fuzz_interpret: jaxpr text -> parse -> verify -> interpret on deterministic arguments.
// Jaxprs whose estimated work exceeds a budget are skipped so no input can hang. refjit::Error
// from the interpreter is accepted (it names a runtime condition such as a frozen ref); a
// crash, a sanitizer report, a non-refjit exception, an output whose type differs from the
// declared one, or two runs on equal arguments that disagree, is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"
#include "runtime/interpreter.h"

using namespace refjit;

namespace {
constexpr int64_t kBudget = 1 << 20;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Jaxpr jaxpr;
  try {
    jaxpr = parse_jaxpr(input, "fuzz");
    verify(jaxpr);
  } catch (const Error&) {
    return 0;
  }
  if (!fuzz::within_budget(jaxpr, kBudget)) return 0;
  const uint64_t salt = fuzz::hash_bytes(data, size) % 1024;
  const std::vector<RtValue> args = fuzz::make_args(jaxpr, salt);
  std::vector<RtValue> first;
  try {
    first = interpret(jaxpr, fuzz::copy_values(args));
  } catch (const Error&) {
    return 0;
  }
  const std::vector<Type> out_types = jaxpr.out_types();
  if (first.size() != out_types.size())
    fuzz::fail("interpret returned the wrong number of outputs", "", input);
  for (size_t i = 0; i < first.size(); ++i) {
    const Array* a = std::get_if<Array>(&first[i]);
    if (!a || a->type() != out_types[i].array)
      fuzz::fail("interpret output has the wrong type",
                 "output " + std::to_string(i) + " declared " + out_types[i].str(), input);
  }
  std::vector<RtValue> second;
  try {
    second = interpret(jaxpr, fuzz::copy_values(args));
  } catch (const Error& e) {
    fuzz::fail("second interpretation threw but the first did not", e.what(), input);
  }
  for (size_t i = 0; i < first.size(); ++i)
    if (!(std::get<Array>(first[i]) == std::get<Array>(second[i])))
      fuzz::fail("interpretation is not deterministic", "output " + std::to_string(i), input);
  return 0;
}
