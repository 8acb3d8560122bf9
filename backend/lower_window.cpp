// Lowering of the windowed reductions (docs/primitives.md "Windows"; geometry:
// refjit/ir/window.h): one loop over each window's positions (flattened; straight-line code
// for small windows), inside a loop nest over the windows. A position on padding or a dilation hole
// reads as the reduction's identity; the selecting ops keep a window's first element that is not
// beaten, as the interpreter (runtime/eval_window.cpp) does.
#include <functional>
#include <optional>

#include "backend/lowering.h"
#include "refjit/ir/window.h"

namespace refjit::backend {
namespace {

// One window position: the operand index per dim (clamped into range, so always loadable)
// and whether it holds an operand element.
struct Position {
  std::vector<Value> at;
  Value valid;  // i1
};

// Position `k` (an index in [0, prod(w.dims))) of the window at output index `o`. With
// `known_k` (k as a number: the window's loop unrolled), a dim along which this position lies
// inside the operand for every window (no padding or dilation reaches it) is indexed without a
// check or a clamp, so a loop along it reads memory in a straight line and vectorises.
Position position(LowerCtx& c, const Window& w, const Shape& in, const Shape& out, Ivs o, Value k,
                  std::optional<int64_t> known_k = std::nullopt) {
  auto& b = c.b;
  Position p;
  p.valid = b.create<arith::ConstantIntOp>(c.loc, 1, 1);
  int64_t inner = 1;
  std::vector<int64_t> inner_of(static_cast<size_t>(w.rank()));
  for (int d = w.rank() - 1; d >= 0; --d) {
    inner_of[d] = inner;
    inner *= w.dims[d];
  }
  for (int d = 0; d < w.rank(); ++d) {
    if (known_k && w.base_dilation[d] == 1) {
      const int64_t off = *known_k / inner_of[d] % w.dims[d];
      const int64_t first = off * w.window_dilation[d] - w.padding[d].first;
      const int64_t last = (out[d] - 1) * w.strides[d] + first;
      if (out[d] > 0 && first >= 0 && last < in[d]) {
        p.at.push_back(c.affine_index(o[d], w.strides[d], first));
        continue;
      }
    }
    // Offset within the window along d, then the coordinate in the dilated, padded operand.
    Value off = b.create<arith::RemUIOp>(
        c.loc, b.create<arith::DivUIOp>(c.loc, k, c.index(inner_of[d])), c.index(w.dims[d]));
    Value q =
        b.create<arith::AddIOp>(c.loc, b.create<arith::MulIOp>(c.loc, o[d], c.index(w.strides[d])),
                                b.create<arith::MulIOp>(c.loc, off, c.index(w.window_dilation[d])));
    q = b.create<arith::SubIOp>(c.loc, q, c.index(w.padding[d].first));
    Value ok = b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::sge, q, c.index(0));
    Value i = q;
    if (w.base_dilation[d] != 1) {
      Value bd = c.index(w.base_dilation[d]);
      Value on_element = b.create<arith::CmpIOp>(
          c.loc, arith::CmpIPredicate::eq, b.create<arith::RemSIOp>(c.loc, q, bd), c.index(0));
      ok = b.create<arith::AndIOp>(c.loc, ok, on_element);
      i = b.create<arith::DivSIOp>(c.loc, q, bd);
    }
    ok = b.create<arith::AndIOp>(
        c.loc, ok, b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::slt, i, c.index(in[d])));
    p.valid = b.create<arith::AndIOp>(c.loc, p.valid, ok);
    Value lo = c.index(0), hi = c.index(std::max<int64_t>(in[d] - 1, 0));
    p.at.push_back(b.create<arith::MinSIOp>(c.loc, b.create<arith::MaxSIOp>(c.loc, i, lo), hi));
  }
  return p;
}

// Windows of at most this many positions are reduced by straight-line code.
constexpr int64_t kUnrolledWindow = 16;

// Whether v is the constant true (the position needs no check).
bool is_constant_true(Value v) {
  auto k = v.getDefiningOp<arith::ConstantIntOp>();
  return k && k.value() == 1;
}

using Carried = std::vector<Value>;
using PositionStep = std::function<Carried(const Carried&, Value, std::optional<int64_t>)>;

// Folds a window's positions into `init`, in order: step(carried, k, known_k) for every k.
// Windows of at most kUnrolledWindow positions become straight-line code (known_k is then k
// as a number): the innermost loop is the output's last dim, which the vectoriser takes (a
// 2x2 max-pool over NHWC ran a 4-trip loop per element, one float at a time).
Carried over_positions(LowerCtx& c, const Window& w, Carried init, const PositionStep& step) {
  if (num_elements(w.dims) > kUnrolledWindow)
    return c.loop_with_carry(num_elements(w.dims), init, [&](Value k, const Carried& cur) {
      return step(cur, k, std::nullopt);
    });
  for (int64_t k = 0; k < num_elements(w.dims); ++k) init = step(init, c.index(k), k);
  return init;
}

// Whether `v` replaces `best`: !(best >= v) for ge, !(best <= v) for le (NaN replaces).
Value replaces(LowerCtx& c, DType d, bool ge, Value best, Value v) {
  if (is_float(d))
    return c.b.create<arith::CmpFOp>(
        c.loc, ge ? arith::CmpFPredicate::ULT : arith::CmpFPredicate::UGT, best, v);
  const bool u = is_unsigned(d);
  return c.b.create<arith::CmpIOp>(c.loc,
                                   ge ? (u ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt)
                                      : (u ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt),
                                   best, v);
}

void lower_reduce_window(LowerCtx& c, const Eqn& e, Reducer r) {
  const ArrayType xt = c.type_of(e.ins[0]).array;
  const ArrayType rt = c.type_of(e.outs[0]).array;
  const DType d = rt.dtype;
  const Window w = Window::of(e.params);
  Value dst = c.result_buffer(e.outs[0]);
  c.parallel_loop_nest(rt.shape, [&](Ivs o) {
    Value init = reducer_identity(c, d, r);
    const Value acc = over_positions(
        c, w, {init}, [&](const Carried& cur, Value k, std::optional<int64_t> known_k) -> Carried {
          Position p = position(c, w, xt.shape, rt.shape, o, k, known_k);
          Value v = c.load(e.ins[0], p.at);
          if (!is_constant_true(p.valid)) v = c.b.create<arith::SelectOp>(c.loc, p.valid, v, init);
          return {combine(c, d, r, cur[0], v)};  // NaN propagates, as in the interpreter
        })[0];
    c.store(acc, dst, d, o);
  });
}

// select_and_gather_add t x: per window, t at x's selected element. The carried best starts
// as the identity with tangent 0 (XLA's reduce-window init), so a window whose elements never
// beat it gives 0.
void lower_select_and_gather_add(LowerCtx& c, const Eqn& e) {
  const ArrayType xt = c.type_of(e.ins[1]).array;
  const ArrayType rt = c.type_of(e.outs[0]).array;
  const bool ge = e.params.get<std::string>("select_prim") == "ge";
  const Window w = Window::of(e.params);
  Value dst = c.result_buffer(e.outs[0]);
  c.parallel_loop_nest(rt.shape, [&](Ivs o) {
    Value none = reducer_identity(c, xt.dtype, ge ? Reducer::max : Reducer::min);
    std::vector<Value> init{none, c.constant(rt.dtype, 0)};
    auto best = over_positions(
        c, w, init, [&](const Carried& cur, Value k, std::optional<int64_t> known_k) -> Carried {
          Position p = position(c, w, xt.shape, rt.shape, o, k, known_k);
          Value v = c.load(e.ins[1], p.at), t = c.load(e.ins[0], p.at);
          if (!is_constant_true(p.valid)) {
            v = c.b.create<arith::SelectOp>(c.loc, p.valid, v, none);
            t = c.b.create<arith::SelectOp>(c.loc, p.valid, t, init[1]);
          }
          Value take = replaces(c, xt.dtype, ge, cur[0], v);
          return {c.b.create<arith::SelectOp>(c.loc, take, v, cur[0]),
                  c.b.create<arith::SelectOp>(c.loc, take, t, cur[1])};
        });
    c.store(best[1], dst, rt.dtype, o);
  });
}

// select_and_scatter_add s x: zeros, then per window (in order: windows may select the same
// element) s added at x's selected element. The first position is selected to begin with
// (XLA's SelectAndScatter); padding selected adds nothing.
void lower_select_and_scatter_add(LowerCtx& c, const Eqn& e) {
  const ArrayType st = c.type_of(e.ins[0]).array;
  const ArrayType xt = c.type_of(e.ins[1]).array;
  const DType d = st.dtype;
  const bool ge = e.params.get<std::string>("select_prim") == "ge";
  const Window w = Window::of(e.params);
  Value dst = c.result_buffer(e.outs[0]);
  c.fill(dst, ArrayType{d, xt.shape}, c.constant(d, 0));
  auto& b = c.b;
  c.loop_nest(st.shape, [&](Ivs o) {
    Value none = reducer_identity(c, xt.dtype, ge ? Reducer::max : Reducer::min);
    auto read = [&](const Position& p) {
      return Value(b.create<arith::SelectOp>(c.loc, p.valid, c.load(e.ins[1], p.at), none));
    };
    Position first = position(c, w, xt.shape, st.shape, o, c.index(0));
    std::vector<Value> init{read(first), first.valid};
    init.insert(init.end(), first.at.begin(), first.at.end());
    auto best =
        c.loop_with_carry(num_elements(w.dims), init, [&](Value k, const std::vector<Value>& cur) {
          Position p = position(c, w, xt.shape, st.shape, o, k);
          Value take = replaces(c, xt.dtype, ge, cur[0], read(p));
          std::vector<Value> next{b.create<arith::SelectOp>(c.loc, take, read(p), cur[0]),
                                  b.create<arith::SelectOp>(c.loc, take, p.valid, cur[1])};
          for (size_t q = 0; q < p.at.size(); ++q)
            next.push_back(b.create<arith::SelectOp>(c.loc, take, p.at[q], cur[2 + q]));
          return next;
        });
    std::vector<Value> at(best.begin() + 2, best.end());
    c.if_then(best[1], [&] {  // the selected position holds an operand element
      c.store(c.add(d, c.load_mem(dst, d, at), c.load(e.ins[0], o)), dst, d, at);
    });
  });
}

}  // namespace

void register_window_lowerings(LowerTable& t) {
  t.set(Prim::reduce_window_sum,
        [](LowerCtx& c, const Eqn& e) { lower_reduce_window(c, e, Reducer::sum); });
  t.set(Prim::reduce_window_max,
        [](LowerCtx& c, const Eqn& e) { lower_reduce_window(c, e, Reducer::max); });
  t.set(Prim::reduce_window_min,
        [](LowerCtx& c, const Eqn& e) { lower_reduce_window(c, e, Reducer::min); });
  t.set(Prim::select_and_gather_add, &lower_select_and_gather_add);
  t.set(Prim::select_and_scatter_add, &lower_select_and_scatter_add);
}

}  // namespace refjit::backend
