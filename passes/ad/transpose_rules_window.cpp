// Transpose rules of the windowed reductions (docs/primitives.md "Windows"), JAX's.
#include <fmt/format.h>

#include <limits>

#include "passes/ad/transpose_rules.h"
#include "refjit/ir/error.h"
#include "refjit/ir/window.h"

namespace refjit {

namespace {

// A window sum's transpose: every operand element receives the cotangents of the windows it
// is in. The cotangent, spread out by the strides and padded by the window's reach, summed
// over windows of the same size (the window sum of a convolution's input gradient).
Atom window_sum_transpose(Emitter& e, Atom ct, const Window& w, const Shape& in) {
  const Shape out = e.array_type_of(ct).shape;
  IntListList config;
  for (int d = 0; d < w.rank(); ++d) {
    const int64_t dilated_in = in[d] == 0 ? 0 : (in[d] - 1) * w.base_dilation[d] + 1;
    const int64_t span = (w.dims[d] - 1) * w.window_dilation[d] + 1;
    const int64_t dilated_out = out[d] == 0 ? 0 : (out[d] - 1) * w.strides[d] + 1;
    const int64_t before = span - w.padding[d].first - 1;
    const int64_t after = dilated_in + span - 1 - dilated_out - before;
    config.push_back({before, after, w.strides[d] - 1});
  }
  const DType d = e.array_type_of(ct).dtype;
  Atom padded = e.emit1(Prim::pad, {ct, e.scalar(d, 0.0)}, Params{{"padding_config", config}});
  Window back;
  back.dims = w.dims;
  back.strides = w.base_dilation;
  back.padding.assign(static_cast<size_t>(w.rank()), {0, 0});
  back.base_dilation = IntList(static_cast<size_t>(w.rank()), 1);
  back.window_dilation = w.window_dilation;
  return e.emit1(Prim::reduce_window_sum, {padded}, back.params());
}

}  // namespace

void register_window_transpose_rules(TransposeRuleTable& t) {
  t.set(Prim::reduce_window_sum, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0)) return;
    a.acc[0]->add(
        e, window_sum_transpose(e, a.ct0(), Window::of(a.eqn.params), a.acc[0]->type().shape));
  });
  // select_and_gather_add t x -> select_and_scatter_add ct x (with base dilation, x padded
  // between its elements by the selection's identity, and the result strided back).
  t.set(Prim::select_and_gather_add, [](Emitter& e, TransposeArgs& a) {
    if (a.linear(1)) throw Error("transpose: `select_and_gather_add` is not linear in operand 1");
    if (!a.wants(0)) return;
    const Window w = Window::of(a.eqn.params);
    for (int64_t d : w.window_dilation)
      if (d != 1)
        throw Error(
            "reverse mode through select_and_gather_add with window dilation (the gradient of "
            "a max or min pool's forward-mode derivative) is not supported, as in JAX");
    const std::string& select = a.eqn.params.get<std::string>("select_prim");
    Atom x = a.val[1];
    const ArrayType xt = e.array_type_of(x);
    bool dilated = false;
    IntListList holes;
    for (int64_t b : w.base_dilation) {
      dilated |= b != 1;
      holes.push_back({0, 0, b - 1});
    }
    if (dilated) {
      const double identity = select == "ge" ? -std::numeric_limits<double>::infinity()
                                             : std::numeric_limits<double>::infinity();
      x = e.emit1(Prim::pad, {x, e.scalar(xt.dtype, identity)}, Params{{"padding_config", holes}});
    }
    Params p = w.params(/*with_dilations=*/false);
    p.set("select_prim", select);
    Atom r = e.emit1(Prim::select_and_scatter_add, {a.ct0(), x}, std::move(p));
    if (dilated) {
      IntList start(xt.shape.size(), 0), limit;
      for (int64_t s : e.array_type_of(r).shape) limit.push_back(s);
      r = e.emit1(
          Prim::slice, {r},
          Params{{"limit_indices", limit}, {"start_indices", start}, {"strides", w.base_dilation}});
    }
    a.acc[0]->add(e, r);
  });
  // select_and_scatter_add s x -> select_and_gather_add ct x.
  t.set(Prim::select_and_scatter_add, [](Emitter& e, TransposeArgs& a) {
    if (a.linear(1)) throw Error("transpose: `select_and_scatter_add` is not linear in operand 1");
    if (!a.wants(0)) return;
    Params p = Window::of(a.eqn.params).params();
    p.set("select_prim", a.eqn.params.get<std::string>("select_prim"));
    a.acc[0]->add(e, e.emit1(Prim::select_and_gather_add, {a.ct0(), a.val[1]}, std::move(p)));
  });
}

}  // namespace refjit
