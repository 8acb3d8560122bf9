// Cumulative ops and multiplicative/logical reductions, read as scans, and the generic
// window reduction as a fold of slices (rewrites.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "import/jax/rewrite_support.h"

namespace refjit::text {

namespace {

// ---- cumulative ops and reductions as scans --------------------------------------------
//
// cumsum, cumprod, cummax, cummin, cumlogsumexp and reduce_prod / reduce_and / reduce_or are
// a fold along one axis. refjit writes each as a scan over that axis whose carry is the running
// value, starting from the first element: the scan's JVP, linearize and transpose rules then
// give exact derivatives (a product with zeros included) and the carry is updated in place.

// The combining step of a fold: c' = combine(c, x).
using Combine = std::function<Atom(Emit&, Atom c, Atom x)>;

Combine binary_step(Prim p) {
  return [p](Emit& e, Atom c, Atom x) { return e.op(p, {c, x}); };
}

// log(exp(c) + exp(x)) = max(c, x) + log1p(exp(-|c - x|)).
Atom logaddexp(Emit& e, Atom c, Atom x) {
  DType d = e.type(c).dtype;
  Atom m = e.op(Prim::max, {c, x});
  Atom gap = e.op(Prim::neg, {e.op(Prim::abs, {e.op(Prim::sub, {c, x})})});
  Atom r = e.op(Prim::add, {m, e.op(Prim::log1p, {e.op(Prim::exp, {gap})})});
  // Both -inf: the sum is -inf (the formula would give NaN).
  Atom both_neg_inf = e.op(Prim::eq, {m, e.scalar(d, -std::numeric_limits<double>::infinity())});
  return e.op(Prim::select_n, {both_neg_inf, r, m});
}

struct Fold {
  Atom last;                // the fold of every element (shape: x without the axis)
  std::optional<Atom> all;  // every prefix (x's shape), when asked for
};

// Folds x (n >= 1 along `axis`) with `combine`, front to back or back to front.
Fold fold_axis(Emit& e, const Atom& x, int64_t axis, bool reverse, bool prefixes,
               const Combine& combine) {
  const ArrayType xt = e.type(x);
  const int64_t n = xt.shape[axis];
  IntList perm{axis};
  for (int64_t k = 0; k < xt.rank(); ++k)
    if (k != axis) perm.push_back(k);
  Atom front = e.transpose(x, perm);
  const Shape& fs = e.type(front).shape;
  Shape rest(fs.begin() + 1, fs.end());
  auto rows = [&](int64_t from, int64_t to) {
    IntList start(fs.size(), 0), limit(fs.begin(), fs.end());
    start[0] = from;
    limit[0] = to;
    return e.slice(front, start, limit);
  };
  const int64_t first = reverse ? n - 1 : 0;
  Atom init = e.op(Prim::squeeze, {rows(first, first + 1)}, Params{{"dimensions", IntList{0}}});
  if (n == 1) {
    Fold f{init, std::nullopt};
    if (prefixes) f.all = x;
    return f;
  }
  Atom xs = reverse ? rows(0, n - 1) : rows(1, n);

  JaxprBuilder body;
  ArrayType row{xt.dtype, rest};
  Var c = body.add_invar(row);
  Var xi = body.add_invar(row);
  Emit be{body};
  Atom y = combine(be, c, xi);
  if (!is_var(y)) y = be.op(Prim::copy, {y});
  std::vector<Atom> body_outs{y};
  if (prefixes) body_outs.push_back(y);
  body.set_outvars(body_outs);
  std::vector<Var> outs =
      e.b.add_eqn(Prim::scan, {init, xs},
                  scan_params(std::make_shared<const Jaxpr>(body.finish()), n - 1, 1, reverse));
  Fold f{outs[0], std::nullopt};
  if (prefixes) {
    Atom head = e.op(Prim::expand_dims, {init}, Params{{"dimensions", IntList{0}}});
    std::vector<Atom> parts =
        reverse ? std::vector<Atom>{outs[1], head} : std::vector<Atom>{head, outs[1]};
    Atom all = e.op(Prim::concatenate, parts, Params{{"dimension", int64_t{0}}});
    IntList inverse(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) inverse[perm[k]] = static_cast<int64_t>(k);
    f.all = e.transpose(all, inverse);
  }
  return f;
}

// cumsum / cumprod / cummax / cummin / cumlogsumexp [axis reverse] x
JaxRewrite cumulative(std::string_view name, Combine combine) {
  return {name,
          {{"axis", K::integer}, {"reverse", K::boolean}},
          {},
          [name, combine](RewriteArgs& a) -> std::vector<Atom> {
            expect_operands(a, name, 1);
            const ArrayType x = array_of(a, name, 0);
            int64_t axis = a.params.get<int64_t>("axis");
            if (axis < 0 || axis >= x.rank())
              fail(name, fmt::format("axis {} is out of range for {}", axis, x.str()));
            if (x.shape[axis] == 0) return {a.ins[0]};
            Emit e{a.b};
            return {*fold_axis(e, a.ins[0], axis, a.params.get_or<bool>("reverse", false), true,
                               combine)
                         .all};
          }};
}

// x folded with `combine` over `axes`: the reduced axes are moved to the front and
// flattened, then folded; `unit` is the result of an empty reduction.
Atom fold_over(Emit& e, std::string_view name, Atom x_atom, const IntList& axes, Prim combine,
               double unit) {
  const ArrayType x = e.type(x_atom);
  for (int64_t ax : axes)
    if (ax < 0 || ax >= x.rank())
      fail(name, fmt::format("axis {} is out of range for {}", ax, x.str()));
  if (axes.empty()) return x_atom;
  IntList perm = front_permutation(x, axes);
  Shape flat{1}, rest;
  for (int64_t ax : axes) flat[0] *= x.shape[ax];
  for (size_t k = axes.size(); k < perm.size(); ++k) {
    flat.push_back(x.shape[perm[k]]);
    rest.push_back(x.shape[perm[k]]);
  }
  if (flat[0] == 0) return e.broadcast(e.scalar(x.dtype, unit), rest, {});
  Atom xf = e.reshape(e.transpose(x_atom, perm), flat);
  return fold_axis(e, xf, 0, false, false, binary_step(combine)).last;
}

// reduce_prod / reduce_and / reduce_or [axes] x.
JaxRewrite reduction(std::string_view name, Prim combine, double unit) {
  return {
      name, {{"axes", K::ints}}, {}, [name, combine, unit](RewriteArgs& a) -> std::vector<Atom> {
        expect_operands(a, name, 1);
        Emit e{a.b};
        return {fold_over(e, name, a.ins[0], a.params.get<IntList>("axes"), combine, unit)};
      }};
}

// n, for the operands x_1 .. x_n init_1 .. init_n of JAX's variadic reductions.
size_t operands_with_inits(const RewriteArgs& a, std::string_view name) {
  const size_t n = a.ins.size() / 2;
  if (a.ins.size() % 2 != 0 || n == 0)
    fail(name,
         fmt::format("expects operands then as many init values, found {} operands", a.ins.size()));
  return n;
}

// reduce[dimensions jaxpr] x_1 .. x_n init_1 .. init_n: JAX's variadic reduce, read where each
// output k of the body combines its own accumulator and element with one monoid,
// out_k = op(acc_k, x_k) with op add, mul, max, min, and or or (lax.reduce of tuples of those,
// jnp's reductions with initial values). Each operand then reduces on its own, and the result
// is combined once with its init (init is the identity in what JAX prints for a monoid;
// otherwise it counts once, as in XLA's reduce). Other bodies (argmax-like comparisons of
// pairs) are refused, naming what refjit reads.
std::vector<Atom> reduce(RewriteArgs& a) {
  constexpr std::string_view name = "reduce";
  const size_t n = operands_with_inits(a, name);
  const Jaxpr& body = *a.params.get<JaxprPtr>("jaxpr");
  auto refuse = [&](const std::string& why) {
    fail(name, fmt::format("{}; refjit reads reduce when each result combines its own "
                           "accumulator and element with add, mul, max, min, and or or",
                           why));
  };
  if (body.invars.size() != 2 * n || body.outvars.size() != n || body.eqns.size() != n)
    refuse("the body is not one monoid per operand");
  const IntList& axes = a.params.get<IntList>("dimensions");
  Emit e{a.b};
  std::vector<Atom> outs;
  for (size_t k = 0; k < n; ++k) {
    const Atom& out = body.outvars[k];
    const Eqn* eqn = nullptr;
    for (const Eqn& q : body.eqns)
      if (is_var(out) && q.outs.size() == 1 && q.outs[0] == as_var(out)) eqn = &q;
    const bool acc_x = eqn && eqn->ins.size() == 2 && eqn->ins[0] == Atom(body.invars[k]) &&
                       eqn->ins[1] == Atom(body.invars[n + k]);
    const bool x_acc = eqn && eqn->ins.size() == 2 && eqn->ins[1] == Atom(body.invars[k]) &&
                       eqn->ins[0] == Atom(body.invars[n + k]);
    if (!acc_x && !x_acc)
      refuse(fmt::format("result {0} is not op(accumulator {0}, element {0})", k));
    Atom reduced;
    const Params by_axes{{"axes", axes}};
    switch (eqn->prim) {
      case Prim::add: reduced = e.op(Prim::reduce_sum, {a.ins[k]}, by_axes); break;
      case Prim::max: reduced = e.op(Prim::reduce_max, {a.ins[k]}, by_axes); break;
      case Prim::min: reduced = e.op(Prim::reduce_min, {a.ins[k]}, by_axes); break;
      case Prim::mul: reduced = fold_over(e, name, a.ins[k], axes, Prim::mul, 1.0); break;
      case Prim::and_: reduced = fold_over(e, name, a.ins[k], axes, Prim::and_, 1.0); break;
      case Prim::or_: reduced = fold_over(e, name, a.ins[k], axes, Prim::or_, 0.0); break;
      default: refuse(fmt::format("result {} combines with `{}`", k, prim_name(eqn->prim)));
    }
    outs.push_back(e.op(eqn->prim, {reduced, a.ins[n + k]}));
  }
  return outs;
}

// The scalar jaxpr `body` applied elementwise to arrays of `shape`: each eqn again on the
// arrays (its literals broadcast). Only elementwise bodies lift; the type rule of anything else
// fails, and the caller names it.
std::vector<Atom> apply_elementwise(Emit& e, const Jaxpr& body, const std::vector<Atom>& ins,
                                    const Shape& shape) {
  std::vector<std::optional<Atom>> value(body.vars.size());
  for (size_t k = 0; k < body.invars.size(); ++k) value[body.invars[k].id] = ins[k];
  auto get = [&](const Atom& a) -> Atom {
    if (is_var(a)) return *value[as_var(a).id];
    return e.broadcast(a, shape, {});
  };
  for (const Eqn& q : body.eqns) {
    for (const Atom& in : q.ins)
      if (is_var(in) && body.info(as_var(in)).type.array.rank() != 0)
        fail("reduce_window", "its jaxpr computes on arrays; refjit reads scalar bodies");
    std::vector<Atom> args;
    for (const Atom& in : q.ins) args.push_back(get(in));
    std::vector<Var> outs = e.b.add_eqn(q.prim, std::move(args), q.params);
    for (size_t k = 0; k < outs.size(); ++k) value[q.outs[k].id] = outs[k];
  }
  std::vector<Atom> outs;
  for (const Atom& o : body.outvars) outs.push_back(get(o));
  return outs;
}

// reduce_window[jaxpr consts window_dimensions window_strides padding base_dilation
// window_dilation] x_1 .. x_n init_1 .. init_n: JAX's generic window reduction (lax.reduce_window
// with a Python function). Each operand is padded with its init (interior padding for the base
// dilation), and the body folds, from the inits, one strided slice per window offset into the
// result: out = body(... body(init, slice_0) ..., slice_last), elementwise. The window sums
// and maxima JAX prints as reduce_window_sum / _max have their own primitives.
std::vector<Atom> reduce_window(RewriteArgs& a) {
  constexpr std::string_view name = "reduce_window";
  const size_t n = operands_with_inits(a, name);
  if (a.params.get<std::string>("consts") != "()")
    fail(name, "a jaxpr with captured constants (consts) is not supported");
  const Jaxpr& body = *a.params.get<JaxprPtr>("jaxpr");
  if (body.invars.size() != 2 * n || body.outvars.size() != n)
    fail(name, fmt::format("its jaxpr takes {} and returns {} values; {} operands need {} and {}",
                           body.invars.size(), body.outvars.size(), n, 2 * n, n));
  const IntList& window = a.params.get<IntList>("window_dimensions");
  const IntList& strides = a.params.get<IntList>("window_strides");
  const IntListList& padding = a.params.get<IntListList>("padding");
  const IntList& base = a.params.get<IntList>("base_dilation");
  const IntList& dilation = a.params.get<IntList>("window_dilation");
  const ArrayType x0 = array_of(a, name, 0);
  const size_t rank = static_cast<size_t>(x0.rank());
  if (window.size() != rank || strides.size() != rank || padding.size() != rank ||
      base.size() != rank || dilation.size() != rank)
    fail(name, fmt::format("window params must have one entry per dim of {}", x0.str()));
  Shape out_shape;
  IntListList pad_config;
  int64_t offsets = 1;
  for (size_t d = 0; d < rank; ++d) {
    if (padding[d].size() != 2 || window[d] < 1 || strides[d] < 1 || base[d] < 1 || dilation[d] < 1)
      fail(name, fmt::format("dim {}: window, strides and dilations must be positive and "
                             "padding a (low, high) pair",
                             d));
    const int64_t dilated = x0.shape[d] == 0 ? 0 : (x0.shape[d] - 1) * base[d] + 1;
    const int64_t padded = dilated + padding[d][0] + padding[d][1];
    const int64_t extent = (window[d] - 1) * dilation[d] + 1;
    out_shape.push_back(padded < extent ? 0 : (padded - extent) / strides[d] + 1);
    pad_config.push_back({padding[d][0], padding[d][1], base[d] - 1});
    offsets *= window[d];
  }
  constexpr int64_t kMaxOffsets = 4096;
  if (offsets > kMaxOffsets)
    fail(name, fmt::format("a window of {} elements; refjit unrolls generic window reductions "
                           "up to {} (window sums and maxima have no limit)",
                           offsets, kMaxOffsets));
  Emit e{a.b};
  std::vector<Atom> padded, acc;
  for (size_t k = 0; k < n; ++k) {
    const ArrayType xt = array_of(a, name, k);
    if (xt.shape != x0.shape)
      fail(name, fmt::format("operand {} has type {}; every operand needs operand 0's shape {}", k,
                             xt.str(), x0.str()));
    padded.push_back(
        e.op(Prim::pad, {a.ins[k], a.ins[n + k]}, Params{{"padding_config", pad_config}}));
    acc.push_back(e.broadcast(a.ins[n + k], out_shape, {}));
  }
  if (std::find(out_shape.begin(), out_shape.end(), 0) != out_shape.end()) return acc;
  IntList offset(rank, 0);
  for (int64_t step = 0; step < offsets; ++step) {
    IntList start, limit;
    for (size_t d = 0; d < rank; ++d) {
      start.push_back(offset[d] * dilation[d]);
      limit.push_back(start.back() + (out_shape[d] - 1) * strides[d] + 1);
    }
    std::vector<Atom> args = acc;
    for (size_t k = 0; k < n; ++k)
      args.push_back(
          e.op(Prim::slice, {padded[k]},
               Params{{"limit_indices", limit}, {"start_indices", start}, {"strides", strides}}));
    acc = apply_elementwise(e, body, args, out_shape);
    for (size_t d = rank; d-- > 0;) {  // the next offset, last dim fastest
      if (++offset[d] < window[d]) break;
      offset[d] = 0;
    }
  }
  return acc;
}

}  // namespace

// The largest (smallest) real part m_re, then the largest (smallest) imaginary part among the
// elements with that real part: exact, from refjit's real reductions, and held constant. The
// derivative comes from a term that is +0 in value: c = sum over the winners of
// (stop_gradient(x) - x), divided by their count; out = m - c has m's value (signed zeros
// included: m - (+0) is m) and the tangent sum(dx over winners) / count, JAX's rule.
std::vector<Atom> complex_extremum(RewriteArgs& a, bool max) {
  const std::string_view name = max ? "reduce_max" : "reduce_min";
  expect_operands(a, name, 1);
  const ArrayType x = array_of(a, name, 0);
  const IntList& axes = a.params.get<IntList>("axes");
  const DType part = x.dtype == DType::c64 ? DType::f32 : DType::f64;
  IntList kept_dims;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (!contains(axes, d)) kept_dims.push_back(d);
  Emit e{a.b};
  const Prim reduce = max ? Prim::reduce_max : Prim::reduce_min;
  const Params by_axes{{"axes", axes}};
  auto back = [&](const Atom& r) { return e.broadcast(r, x.shape, kept_dims); };
  const Atom re = e.op(Prim::real, {a.ins[0]}), im = e.op(Prim::imag, {a.ins[0]});
  const Atom m_re = e.op(reduce, {re}, by_axes);
  const Atom on_re = e.op(Prim::eq, {re, back(m_re)});
  const double worst = max ? -INFINITY : INFINITY;
  const Atom m_im =
      e.op(reduce,
           {e.op(Prim::select_n, {on_re, e.broadcast(Literal::of(part, worst), x.shape, {}), im})},
           by_axes);
  const Atom winners = e.op(Prim::and_, {on_re, e.op(Prim::eq, {im, back(m_im)})});
  const Atom zero = e.broadcast(Literal::of(x.dtype, 0.0), x.shape, {});
  const Atom held = e.op(Prim::sub, {e.op(Prim::stop_gradient, {a.ins[0]}), a.ins[0]});
  const Atom count = e.op(Prim::reduce_sum,
                          {e.op(Prim::convert_element_type, {winners},
                                Params{{"new_dtype", x.dtype}, {"weak_type", false}})},
                          by_axes);
  const Atom carried =
      e.op(Prim::div,
           {e.op(Prim::reduce_sum, {e.op(Prim::select_n, {winners, zero, held})}, by_axes), count});
  const Atom m = e.op(Prim::stop_gradient, {e.op(Prim::complex, {m_re, m_im})});
  return {e.op(Prim::sub, {m, carried})};
}

void add_fold_rewrites(std::vector<JaxRewrite>& table) {
  table.push_back(cumulative("cumsum", binary_step(Prim::add)));
  table.push_back(cumulative("cumprod", binary_step(Prim::mul)));
  table.push_back(cumulative("cummax", binary_step(Prim::max)));
  table.push_back(cumulative("cummin", binary_step(Prim::min)));
  table.push_back(cumulative("cumlogsumexp", logaddexp));
  table.push_back(reduction("reduce_prod", Prim::mul, 1.0));
  table.push_back(reduction("reduce_and", Prim::and_, 1.0));
  table.push_back(reduction("reduce_or", Prim::or_, 0.0));
  table.push_back(reduction("reduce_xor", Prim::xor_, 0.0));
  table.push_back(
      {"reduce", {{"dimensions", K::ints}, {"jaxpr", K::jaxpr}}, {"computation"}, reduce});
  table.push_back({"reduce_window",
                   {{"jaxpr", K::jaxpr},
                    {"consts", K::raw_text},
                    {"window_dimensions", K::ints},
                    {"window_strides", K::ints},
                    {"padding", K::int_lists},
                    {"base_dilation", K::ints},
                    {"window_dilation", K::ints}},
                   {},
                   reduce_window});
}

}  // namespace refjit::text
