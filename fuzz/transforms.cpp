// fuzz_transforms: jaxpr text -> parse -> verify -> interpret, then jvp, linearize and
// transpose of it, each result verified and interpreted. refjit::Error from a pass is
// accepted (E1, a construct a pass does not support yet); a pass result that fails the
// verifier, a transformed program that the interpreter rejects although the original ran,
// JVP/linearize primal outputs that differ from the original's, a crash, a sanitizer report
// or a non-refjit exception is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "ir/sub_jaxprs.h"
#include "passes/ad/jvp.h"
#include "passes/ad/linearize.h"
#include "passes/ad/transpose.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"
#include "runtime/interpreter.h"

using namespace refjit;

namespace {

constexpr int64_t kBudget = 1 << 18;

struct Case {
  std::string_view input;
  const Jaxpr& f;
  std::vector<RtValue> args;
  std::vector<RtValue> outs;  // f's outputs on args
  std::vector<bool> diff;     // per invar
  uint64_t salt;
};

void verify_or_fail(const Jaxpr& j, std::string_view pass, const Case& c) {
  try {
    verify(j);
  } catch (const Error& e) {
    fuzz::fail(std::string(pass) + " produced a jaxpr that does not verify",
               std::string(e.what()) + "\n" + print_jaxpr(j), c.input);
  }
}

std::vector<RtValue> run_or_fail(const Jaxpr& j, const std::vector<RtValue>& args,
                                 std::string_view pass, const Case& c) {
  try {
    return interpret(j, args);
  } catch (const Error& e) {
    fuzz::fail(std::string(pass) + " result fails in the interpreter but the original ran",
               std::string(e.what()) + "\n" + print_jaxpr(j), c.input);
  }
}

// Whether `j` holds a custom_vjp_call at any depth. Differentiated, its primal outputs are its
// fwd_jaxpr's (as in JAX), which a text may make differ from its call_jaxpr's.
bool has_custom_vjp(const Jaxpr& j) {
  return std::any_of(j.eqns.begin(), j.eqns.end(), [](const Eqn& e) {
    return e.prim == Prim::custom_vjp_call || any_sub_jaxpr(e, has_custom_vjp);
  });
}

void expect_primal_outs(const std::vector<RtValue>& got, std::string_view pass, const Case& c) {
  if (has_custom_vjp(c.f)) return;
  if (got.size() < c.outs.size()) fuzz::fail(std::string(pass) + ": too few outputs", "", c.input);
  for (size_t i = 0; i < c.outs.size(); ++i)
    if (!(std::get<Array>(got[i]) == std::get<Array>(c.outs[i])))
      fuzz::fail(std::string(pass) + ": primal output differs from the original",
                 "output " + std::to_string(i), c.input);
}

// Tangents (or cotangent accumulators) for the differentiated inputs, in order.
std::vector<RtValue> tangents(const Case& c, uint64_t salt) {
  std::vector<RtValue> t;
  for (size_t i = 0; i < c.f.invars.size(); ++i)
    if (c.diff[i]) t.push_back(fuzz::make_value(c.f.type_of(c.f.invars[i]), salt + 77 * i));
  return t;
}

void check_jvp(const Case& c) {
  Jaxpr jvp;
  try {
    jvp = jvp_jaxpr(c.f, c.diff);
  } catch (const Error&) {
    return;
  }
  verify_or_fail(jvp, "jvp_jaxpr", c);
  std::vector<RtValue> args = fuzz::copy_values(c.args);
  for (RtValue& t : tangents(c, c.salt)) args.push_back(std::move(t));
  std::vector<RtValue> outs = run_or_fail(jvp, args, "jvp_jaxpr", c);
  if (outs.size() != 2 * c.outs.size())
    fuzz::fail("jvp_jaxpr: expected primal outs then one tangent per output", "", c.input);
  expect_primal_outs(outs, "jvp_jaxpr", c);
}

void check_linearize_transpose(const Case& c) {
  Linearized lin;
  try {
    lin = linearize_jaxpr(c.f, c.diff);
  } catch (const Error&) {
    return;
  }
  verify_or_fail(lin.primal, "linearize_jaxpr (primal)", c);
  verify_or_fail(lin.linear, "linearize_jaxpr (linear)", c);
  std::vector<RtValue> pouts = run_or_fail(lin.primal, fuzz::copy_values(c.args), "linearize", c);
  expect_primal_outs(pouts, "linearize_jaxpr (primal)", c);
  if (pouts.size() != c.outs.size() + static_cast<size_t>(lin.num_residuals))
    fuzz::fail("linearize_jaxpr: primal output count != outputs + residuals", "", c.input);
  std::vector<RtValue> residuals(pouts.begin() + c.outs.size(), pouts.end());
  std::vector<RtValue> largs = residuals;
  for (RtValue& t : tangents(c, c.salt + 5)) largs.push_back(std::move(t));
  run_or_fail(lin.linear, largs, "linearize_jaxpr (linear)", c);

  std::vector<AccumKind> kinds;
  std::vector<RtValue> bargs = residuals;
  for (size_t i = 0, k = 0; i < c.f.invars.size(); ++i) {
    if (!c.diff[i]) continue;
    const Type& t = c.f.type_of(c.f.invars[i]);
    const bool as_ref = t.is_ref || ((c.salt >> (k++ % 32)) & 1);
    kinds.push_back(as_ref ? AccumKind::ref : AccumKind::value);
    if (as_ref) bargs.push_back(fuzz::make_value(Type::ref(t.array), c.salt + 9 * i));
  }
  Jaxpr bwd;
  try {
    bwd = transpose_jaxpr(lin.linear, lin.num_residuals, kinds);
  } catch (const Error&) {
    return;
  }
  verify_or_fail(bwd, "transpose_jaxpr", c);
  for (size_t i = 0; i < c.outs.size(); ++i)
    bargs.push_back(fuzz::make_value(Type(std::get<Array>(c.outs[i]).type()), c.salt + 31 * i));
  run_or_fail(bwd, bargs, "transpose_jaxpr", c);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Jaxpr f;
  try {
    f = parse_jaxpr(input, "fuzz");
    verify(f);
  } catch (const Error&) {
    return 0;
  }
  if (!fuzz::within_budget(f, kBudget)) return 0;
  const uint64_t salt = fuzz::hash_bytes(data, size);
  Case c{input, f, fuzz::make_args(f, salt % 1024), {}, {}, salt};
  try {
    c.outs = interpret(f, fuzz::copy_values(c.args));
  } catch (const Error&) {
    return 0;
  }
  // Differentiate every float input, except the ones a hash bit switches off.
  for (size_t i = 0; i < f.invars.size(); ++i)
    c.diff.push_back(is_float(f.type_of(f.invars[i]).dtype()) && ((salt >> (i % 48 + 8)) & 3));
  check_jvp(c);
  check_linearize_transpose(c);
  return 0;
}
