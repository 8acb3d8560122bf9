// Eval rules of jit, scan, cond, custom_vjp_call and linear_solve. Ref operands are passed to the
// sub-jaxpr by reference (the same RefBuffer), so writes inside are visible to the caller.
#include <fmt/format.h>

#include <memory>

#include "ir/loop_params.h"
#include "refjit/ir/error.h"
#include "runtime/eval_rules.h"
#include "runtime/flat_index.h"

namespace refjit {

namespace {

const Jaxpr& sub_jaxpr(const Eqn& e, std::string_view param) {
  const JaxprPtr& j = e.params.get<JaxprPtr>(param);
  if (!j) eval_fail(e, fmt::format("param '{}' holds no jaxpr", param));
  return *j;
}

std::vector<RtValue> eval_call(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins,
                               std::string_view param, std::string_view role) {
  return cx.call(e, sub_jaxpr(e, param), std::vector<RtValue>(ins.begin(), ins.end()), role);
}

std::vector<RtValue> eval_jit(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  return eval_call(cx, e, ins, "jaxpr", "jit body");
}

// fused: its body, run as written (native code computes it in one loop nest).
std::vector<RtValue> eval_fused(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  return eval_call(cx, e, ins, "jaxpr", "fused body");
}

// product_epilogue: its body, the product then its consumer.
std::vector<RtValue> eval_product_epilogue(const EvalContext& cx, const Eqn& e,
                                           std::span<const RtValue> ins) {
  return eval_call(cx, e, ins, "jaxpr", "product_epilogue body");
}

// row_loop: its body, eqn by eqn (native code interleaves them row by row).
std::vector<RtValue> eval_row_loop(const EvalContext& cx, const Eqn& e,
                                   std::span<const RtValue> ins) {
  return eval_call(cx, e, ins, "jaxpr", "row_loop body");
}

std::vector<RtValue> eval_custom_vjp_call(const EvalContext& cx, const Eqn& e,
                                          std::span<const RtValue> ins) {
  refuse_unknown_forward_map(e);
  return eval_call(cx, e, ins, "call_jaxpr", "custom_vjp primal");
}

// linear_solve: the solve, on every operand (consts, then the right-hand sides).
std::vector<RtValue> eval_linear_solve(const EvalContext& cx, const Eqn& e,
                                       std::span<const RtValue> ins) {
  return eval_call(cx, e, ins, "solve_jaxpr", "linear_solve's solve");
}

std::vector<RtValue> eval_cond(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1, true);
  const JaxprList& branches = e.params.get<JaxprList>("branches");
  if (branches.empty()) eval_fail(e, "needs at least one branch");
  const int64_t n = static_cast<int64_t>(branches.size());
  const int64_t which = clamp_index(int_scalar_in(e, ins, 0), 0, n - 1);  // bool false = 0
  if (!branches[which]) eval_fail(e, fmt::format("branch {} holds no jaxpr", which));
  return cx.call(e, *branches[which], std::vector<RtValue>(ins.begin() + 1, ins.end()),
                 fmt::format("cond branch {}", which));
}

// while: runs body_jaxpr on (body consts, carry) as long as cond_jaxpr on (cond consts, carry)
// is true. Refs among the consts are passed by reference to both.
std::vector<RtValue> eval_while(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  const Jaxpr& cond = sub_jaxpr(e, "cond_jaxpr");
  const Jaxpr& body = sub_jaxpr(e, "body_jaxpr");
  const WhileParams while_params = WhileParams::of(e);
  const int64_t nc = static_cast<int64_t>(while_params.cond_nconsts);
  const int64_t nb = static_cast<int64_t>(while_params.body_nconsts);
  if (nc < 0 || nb < 0 || nc + nb > static_cast<int64_t>(ins.size()))
    eval_fail(e, fmt::format("cond_nconsts={} body_nconsts={} do not fit {} operands", nc, nb,
                             ins.size()));
  std::vector<RtValue> carry(ins.begin() + nc + nb, ins.end());
  for (;;) {
    std::vector<RtValue> cargs(ins.begin(), ins.begin() + nc);
    cargs.insert(cargs.end(), carry.begin(), carry.end());
    std::vector<RtValue> pred = cx.call(e, cond, cargs, "while condition");
    if (pred.size() != 1) eval_fail(e, "the condition must return one value");
    if (!int_scalar_in(e, pred, 0)) return carry;
    std::vector<RtValue> bargs(ins.begin() + nc, ins.begin() + nc + nb);
    bargs.insert(bargs.end(), carry.begin(), carry.end());
    carry = cx.call(e, body, bargs, "while body");
  }
}

// Row `i` of a stacked array (leading dim dropped), and the offsets of that row.
std::vector<int64_t> row_offsets(const Shape& shape, int64_t i) {
  const int64_t row = shape.empty() ? 0 : num_elements(shape) / std::max<int64_t>(shape[0], 1);
  std::vector<int64_t> off(static_cast<size_t>(row));
  for (int64_t k = 0; k < row; ++k) off[k] = i * row + k;
  return off;
}

Shape row_shape(const Shape& shape) { return Shape(shape.begin() + 1, shape.end()); }

// scan: consts, carry, xs -> carry, ys. A ref among xs is scanned over: iteration i runs the
// body on a temporary ref holding row i, copied back into the parent ref afterwards.
std::vector<RtValue> eval_scan(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  const Jaxpr& body = sub_jaxpr(e, "jaxpr");
  const ScanParams scan_params = ScanParams::of(e);
  const int64_t length = scan_params.length;
  const bool reverse = scan_params.reverse;
  const int64_t num_consts = static_cast<int64_t>(scan_params.num_consts);
  const int64_t num_carry = static_cast<int64_t>(scan_params.num_carry);
  const int64_t n_in = static_cast<int64_t>(ins.size());
  if (length < 0 || num_consts < 0 || num_carry < 0 || num_consts + num_carry > n_in)
    eval_fail(e, fmt::format("length={} num_consts={} num_carry={} do not fit {} operands", length,
                             num_consts, num_carry, n_in));
  const int64_t num_xs = n_in - num_consts - num_carry;
  const std::vector<Type> body_outs = body.out_types();
  if (static_cast<int64_t>(body_outs.size()) < num_carry)
    eval_fail(e, fmt::format("the body returns {} values, fewer than num_carry={}",
                             body_outs.size(), num_carry));

  std::vector<RtValue> carry(ins.begin() + num_consts, ins.begin() + num_consts + num_carry);
  for (int64_t k = 0; k < num_carry; ++k)
    if (std::holds_alternative<RefBufferPtr>(carry[k]))
      throw RefError("E9", fmt::format("scan: carry {} is a ref; refs cannot be scan carries, "
                                       "close over the ref or scan over it in xs instead",
                                       k));
  for (int64_t k = 0; k < num_xs; ++k) {
    const RtValue& x = ins[num_consts + num_carry + k];
    const Shape& s = std::holds_alternative<Array>(x) ? std::get<Array>(x).shape()
                                                      : std::get<RefBufferPtr>(x)->type().shape;
    if (s.empty() || s[0] != length)
      eval_fail(e, fmt::format("xs {} has shape [{}], its leading dim must be length={}", k,
                               shape_text(s), length));
    if (std::holds_alternative<RefBufferPtr>(x))
      ref_in(e, ins, static_cast<size_t>(num_consts + num_carry + k));  // E12 if frozen
  }

  std::vector<Array> ys;
  for (size_t k = static_cast<size_t>(num_carry); k < body_outs.size(); ++k) {
    if (body_outs[k].is_ref)
      throw RefError("E9", fmt::format("scan: the body returns a ref as output {}; refs cannot "
                                       "be returned from a scan body",
                                       k));
    Shape s{length};
    s.insert(s.end(), body_outs[k].shape().begin(), body_outs[k].shape().end());
    ys.emplace_back(ArrayType{body_outs[k].dtype(), s});
  }

  for (int64_t it = 0; it < length; ++it) {
    const int64_t i = reverse ? length - 1 - it : it;
    std::vector<RtValue> args(ins.begin(), ins.begin() + num_consts);
    args.insert(args.end(), carry.begin(), carry.end());
    std::vector<std::pair<RefBufferPtr, RefBufferPtr>> row_refs;  // (parent, row)
    for (int64_t k = 0; k < num_xs; ++k) {
      const RtValue& x = ins[num_consts + num_carry + k];
      if (const Array* a = std::get_if<Array>(&x)) {
        args.push_back(take_elements(*a, row_shape(a->shape()), row_offsets(a->shape(), i)));
      } else {
        const RefBufferPtr& parent = std::get<RefBufferPtr>(x);
        const Shape& s = parent->type().shape;
        auto row = std::make_shared<RefBuffer>(
            take_elements(parent->value(), row_shape(s), row_offsets(s, i)), parent->kind());
        row_refs.emplace_back(parent, row);
        args.push_back(row);
      }
    }
    std::vector<RtValue> outs = cx.call(e, body, args, fmt::format("scan body, iteration {}", i));
    for (const auto& [parent, row] : row_refs)
      put_elements(parent->value(), row_offsets(parent->type().shape, i), row->value());
    for (int64_t k = 0; k < num_carry; ++k) carry[k] = std::move(outs[k]);
    for (size_t k = 0; k < ys.size(); ++k) {
      const Array& y = std::get<Array>(outs[num_carry + k]);
      put_elements(ys[k], row_offsets(ys[k].shape(), i), y);
    }
  }
  std::vector<RtValue> result = std::move(carry);
  for (Array& y : ys) result.push_back(std::move(y));
  return result;
}

}  // namespace

void register_structured_eval_rules(EvalRuleTable& t) {
  t.set(Prim::jit, &eval_jit);
  t.set(Prim::fused, &eval_fused);
  t.set(Prim::product_epilogue, &eval_product_epilogue);
  t.set(Prim::row_loop, &eval_row_loop);
  t.set(Prim::scan, &eval_scan);
  t.set(Prim::cond, &eval_cond);
  t.set(Prim::while_, &eval_while);
  t.set(Prim::custom_vjp_call, &eval_custom_vjp_call);
  t.set(Prim::linear_solve, &eval_linear_solve);
}

}  // namespace refjit
