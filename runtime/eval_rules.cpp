#include "runtime/eval_rules.h"

#include <fmt/format.h>

#include <span>
#include <type_traits>

#include "refjit/ir/error.h"
#include "runtime/dtype_dispatch.h"
#include "runtime/flat_index.h"

namespace refjit {

const Type& EvalContext::out_type(const Eqn& e, size_t i) const {
  if (i >= e.outs.size())
    eval_fail(
        e, fmt::format("the eqn declares {} outputs, the rule needs output {}", e.outs.size(), i));
  return jaxpr_.type_of(e.outs[i]);
}

const EvalRuleTable& eval_rules() {
  static const EvalRuleTable table = [] {
    EvalRuleTable t;
    register_elementwise_eval_rules(t);
    register_shape_eval_rules(t);
    register_reduce_eval_rules(t);
    register_window_eval_rules(t);
    register_ref_eval_rules(t);
    register_structured_eval_rules(t);
    register_collective_eval_rules(t);
    register_host_eval_rules(t);
    register_linalg_eval_rules(t);
    return t;
  }();
  return table;
}

void eval_fail(const Eqn& e, const std::string& message) {
  throw Error(fmt::format("{}: {}", prim_name(e.prim), message));
}

void expect_operands(const Eqn& e, std::span<const RtValue> ins, size_t n, bool at_least) {
  if (ins.size() == n || (at_least && ins.size() > n)) return;
  eval_fail(
      e, fmt::format("expected {}{} operands, got {}", at_least ? "at least " : "", n, ins.size()));
}

const Array& array_in(const Eqn& e, std::span<const RtValue> ins, size_t i) {
  if (i >= ins.size()) eval_fail(e, fmt::format("missing operand {}", i));
  if (const Array* a = std::get_if<Array>(&ins[i])) return *a;
  eval_fail(e, fmt::format("operand {} must be an array, got a ref of type {}; read it with "
                           "`get` first",
                           i, std::get<RefBufferPtr>(ins[i])->type().str()));
}

const RefBufferPtr& ref_in(const Eqn& e, std::span<const RtValue> ins, size_t i) {
  if (i >= ins.size()) eval_fail(e, fmt::format("missing operand {}", i));
  const RefBufferPtr* r = std::get_if<RefBufferPtr>(&ins[i]);
  if (!r || !*r)
    eval_fail(e, fmt::format("operand {} must be a ref, got an array{}", i,
                             r ? "" : " of type " + std::get<Array>(ins[i]).type().str()));
  if ((*r)->frozen())
    throw RefError("E12", fmt::format("{}: operand {} is a ref of type {} that was already "
                                      "frozen; a ref may not be used after `freeze`",
                                      prim_name(e.prim), i, (*r)->type().str()));
  return *r;
}

int64_t int_scalar_in(const Eqn& e, std::span<const RtValue> ins, size_t i) {
  const Array& a = array_in(e, ins, i);
  if (a.rank() != 0 || is_float(a.dtype()))
    eval_fail(e, fmt::format("operand {} must be an integer scalar, got {}", i, a.type().str()));
  return a.as_int(0);
}

void bad_dtype(const Eqn& e, size_t i, DType got, std::string_view allowed) {
  eval_fail(e, fmt::format("operand {} has dtype {}; {} accepts {}", i, long_name(got),
                           prim_name(e.prim), allowed));
}

std::vector<int64_t> clamped_starts(const Eqn& e, std::span<const RtValue> ins, size_t first,
                                    const Shape& shape, const Shape& size) {
  if (ins.size() != first + shape.size())
    eval_fail(e, fmt::format("expected {} start index operands (one per dim), got {}", shape.size(),
                             ins.size() > first ? ins.size() - first : 0));
  std::vector<int64_t> starts;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (size[i] < 0 || size[i] > shape[i])
      eval_fail(e, fmt::format("window size {} exceeds dim {} of size {}", size[i], i, shape[i]));
    starts.push_back(clamp_index(int_scalar_in(e, ins, first + i), 0, shape[i] - size[i]));
  }
  return starts;
}

Array run_indices(const Eqn& e, const Array& start, int64_t n) {
  if (start.rank() != 0 || !is_int(start.dtype()))
    eval_fail(e, fmt::format("the run's first index must be an integer scalar, got {}",
                             start.type().str()));
  Array idx(ArrayType{start.dtype(), {n}});
  visit_dtype(start.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsInt<T>) {
      using U = std::make_unsigned_t<T>;
      const U first = static_cast<U>(start.values<T>()[0]);
      std::span<T> out = idx.mutable_values<T>();
      for (int64_t k = 0; k < n; ++k)
        out[static_cast<size_t>(k)] = static_cast<T>(static_cast<U>(first + static_cast<U>(k)));
    }
  });
  return idx;
}

}  // namespace refjit
