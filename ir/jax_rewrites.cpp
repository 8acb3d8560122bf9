#include "ir/jax_rewrites.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "refjit/ir/error.h"

namespace refjit::text {

namespace {

using K = ParamKind;

[[noreturn]] void fail(std::string_view prim, const std::string& message) {
  throw TypeError(fmt::format("{}: {}", prim, message));
}

void expect_operands(const RewriteArgs& a, std::string_view prim, size_t n) {
  if (a.ins.size() != n)
    fail(prim, fmt::format("expects {} operand(s), found {}", n, a.ins.size()));
}

ArrayType array_of(const RewriteArgs& a, std::string_view prim, size_t k) {
  Type t = a.b.type_of(a.ins.at(k));
  if (t.is_ref) fail(prim, fmt::format("operand {} is a ref; expected an array", k));
  return t.array;
}

const ParamValue kNone = NoneParam{};

IntList iota_list(int64_t n, int64_t from = 0) {
  IntList v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// ---- small emitters ---------------------------------------------------------------------

struct Emit {
  JaxprBuilder& b;

  ArrayType type(const Atom& x) const { return b.type_of(x).array; }
  Atom op(Prim p, std::vector<Atom> ins, Params params = {}) {
    return b.add_eqn1(p, std::move(ins), std::move(params));
  }
  Atom reshape(const Atom& x, const Shape& to) {
    if (type(x).shape == to) return x;
    return op(Prim::reshape, {x},
              Params{{"dimensions", NoneParam{}}, {"new_sizes", IntList(to.begin(), to.end())}});
  }
  Atom transpose(const Atom& x, const IntList& perm) {
    if (perm == iota_list(static_cast<int64_t>(perm.size()))) return x;
    return op(Prim::transpose, {x}, Params{{"permutation", perm}});
  }
  Atom broadcast(const Atom& x, const Shape& shape, const IntList& dims) {
    if (type(x).shape == shape) return x;
    return op(
        Prim::broadcast_in_dim, {x},
        Params{{"broadcast_dimensions", dims}, {"shape", IntList(shape.begin(), shape.end())}});
  }
  Atom slice(const Atom& x, const IntList& start, const IntList& limit) {
    return op(Prim::slice, {x},
              Params{{"limit_indices", limit}, {"start_indices", start}, {"strides", NoneParam{}}});
  }
  Atom scalar(DType d, double v) const { return Literal::of(d, v); }
};

// ---- simple rewrites --------------------------------------------------------------------

std::vector<Atom> square(RewriteArgs& a) {
  expect_operands(a, "square", 1);
  Emit e{a.b};
  return {e.op(Prim::integer_pow, {a.ins[0]}, Params{{"y", int64_t{2}}})};
}

// clamp lo x hi = min(max(x, lo), hi); lo and hi are scalars or x's shape.
std::vector<Atom> clamp(RewriteArgs& a) {
  expect_operands(a, "clamp", 3);
  Emit e{a.b};
  return {e.op(Prim::min, {e.op(Prim::max, {a.ins[1], a.ins[0]}), a.ins[2]})};
}

// split[axis sizes] x: consecutive slices along axis.
std::vector<Atom> split(RewriteArgs& a) {
  expect_operands(a, "split", 1);
  const ArrayType x = array_of(a, "split", 0);
  int64_t axis = a.params.get<int64_t>("axis");
  const IntList& sizes = a.params.get<IntList>("sizes");
  if (axis < 0 || axis >= x.rank())
    fail("split", fmt::format("axis {} is out of range for {}", axis, x.str()));
  int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  if (total != x.shape[axis])
    fail("split", fmt::format("sizes {} add up to {} but dimension {} of {} is {}",
                              fmt::join(sizes, ", "), total, axis, x.str(), x.shape[axis]));
  Emit e{a.b};
  std::vector<Atom> outs;
  int64_t at = 0;
  for (int64_t n : sizes) {
    if (n < 0) fail("split", "sizes must be >= 0");
    IntList start(x.rank(), 0), limit(x.shape.begin(), x.shape.end());
    start[axis] = at;
    limit[axis] = at + n;
    outs.push_back(e.slice(a.ins[0], start, limit));
    at += n;
  }
  return outs;
}

// stack[axis] x0 x1 ...: each gets a new dim of size 1 at axis, then they are concatenated.
std::vector<Atom> stack(RewriteArgs& a) {
  if (a.ins.empty()) fail("stack", "expects at least one operand");
  int64_t axis = a.params.get<int64_t>("axis");
  Emit e{a.b};
  std::vector<Atom> parts;
  for (size_t k = 0; k < a.ins.size(); ++k) {
    const ArrayType x = array_of(a, "stack", k);
    if (axis < 0 || axis > x.rank())
      fail("stack", fmt::format("axis {} is out of range for {}", axis, x.str()));
    parts.push_back(e.op(Prim::expand_dims, {a.ins[k]}, Params{{"dimensions", IntList{axis}}}));
  }
  if (parts.size() == 1) return parts;
  return {e.op(Prim::concatenate, parts, Params{{"dimension", axis}})};
}

// rev[dimensions] x: each listed dim reversed, as a gather with the indices n-1, ..., 0 (so its
// transpose is a sparse scatter-add, like any gather's).
std::vector<Atom> rev(RewriteArgs& a) {
  expect_operands(a, "rev", 1);
  const ArrayType x = array_of(a, "rev", 0);
  Emit e{a.b};
  Atom out = a.ins[0];
  for (int64_t d : a.params.get<IntList>("dimensions")) {
    if (d < 0 || d >= x.rank())
      fail("rev", fmt::format("dimension {} is out of range for {}", d, x.str()));
    int64_t n = x.shape[d];
    if (n <= 1) continue;
    Atom up = e.op(Prim::iota, {},
                   Params{{"dimension", int64_t{0}}, {"dtype", DType::i32}, {"shape", IntList{n}}});
    Atom down = e.op(Prim::sub, {e.scalar(DType::i32, static_cast<double>(n - 1)), up});
    out = e.op(Prim::gather, {out, down}, Params{{"axis", d}});
  }
  return {out};
}

// unstack[axis] x: one array per index along axis, without that dim.
std::vector<Atom> unstack(RewriteArgs& a) {
  expect_operands(a, "unstack", 1);
  const ArrayType x = array_of(a, "unstack", 0);
  int64_t axis = a.params.get<int64_t>("axis");
  if (axis < 0 || axis >= x.rank())
    fail("unstack", fmt::format("axis {} is out of range for {}", axis, x.str()));
  Emit e{a.b};
  std::vector<Atom> outs;
  for (int64_t i = 0; i < x.shape[axis]; ++i) {
    IntList start(x.rank(), 0), limit(x.shape.begin(), x.shape.end());
    start[axis] = i;
    limit[axis] = i + 1;
    outs.push_back(e.op(Prim::squeeze, {e.slice(a.ins[0], start, limit)},
                        Params{{"dimensions", IntList{axis}}}));
  }
  return outs;
}

// reshape[dimensions=(...) new_sizes]: JAX's reshape may transpose first; refjit's IR keeps
// the transpose a separate eqn.
std::vector<Atom> reshape(RewriteArgs& a) {
  expect_operands(a, "reshape", 1);
  Emit e{a.b};
  Atom x = a.ins[0];
  if (const auto* dims =
          std::get_if<IntList>(a.params.find("dimensions") ? a.params.find("dimensions") : &kNone))
    x = e.transpose(x, *dims);
  const IntList& sizes = a.params.get<IntList>("new_sizes");
  return {e.op(Prim::reshape, {x}, Params{{"dimensions", NoneParam{}}, {"new_sizes", sizes}})};
}

// argmin[axes index_dtype] x = argmax of x with its order reversed: -x for floats (a NaN stays
// NaN, which both count as the extreme), bitwise not for ints and bools (no overflow at the
// minimum), so the first minimal index wins as in JAX.
std::vector<Atom> argmin(RewriteArgs& a) {
  expect_operands(a, "argmin", 1);
  const ArrayType x = array_of(a, "argmin", 0);
  Emit e{a.b};
  Atom flipped = e.op(is_float(x.dtype) ? Prim::neg : Prim::not_, {a.ins[0]});
  return {e.op(Prim::argmax, {flipped},
               Params{{"axes", a.params.get<IntList>("axes")},
                      {"index_dtype", a.params.get<DType>("index_dtype")}})};
}

// top_k[axis k] x: the k largest along `axis` and their indices, largest first (ties: the lower
// index first). A stable ascending sort of x's order reversed (-x for floats, bitwise not for
// ints), carrying an iota; then the first k of each lane.
std::vector<Atom> top_k(RewriteArgs& a) {
  expect_operands(a, "top_k", 1);
  const ArrayType x = array_of(a, "top_k", 0);
  int64_t axis = a.params.get_or<int64_t>("axis", x.rank() - 1);
  int64_t k = a.params.get<int64_t>("k");
  if (axis < 0 || axis >= x.rank())
    fail("top_k", fmt::format("axis {} is out of range for {}", axis, x.str()));
  if (k < 0 || k > x.shape[axis])
    fail("top_k",
         fmt::format("k={} is more than the {} elements along axis {}", k, x.shape[axis], axis));
  Emit e{a.b};
  Prim flip = is_float(x.dtype) ? Prim::neg : Prim::not_;
  Atom keys = e.op(flip, {a.ins[0]});
  Atom iota = e.op(Prim::iota, {},
                   Params{{"dimension", axis},
                          {"dtype", DType::i32},
                          {"shape", IntList(x.shape.begin(), x.shape.end())}});
  std::vector<Var> sorted =
      a.b.add_eqn(Prim::sort, {keys, iota},
                  Params{{"dimension", axis}, {"is_stable", true}, {"num_keys", int64_t{1}}});
  IntList start(x.rank(), 0), limit(x.shape.begin(), x.shape.end());
  limit[axis] = k;
  return {e.op(flip, {e.slice(sorted[0], start, limit)}), e.slice(sorted[1], start, limit)};
}

// empty / empty2: an array whose contents do not matter (JAX uses it for the residuals a
// cond branch does not compute). refjit fills it with zeros, so programs stay deterministic.
std::vector<Atom> empty(RewriteArgs& a) {
  if (!a.ins.empty()) fail("empty", "takes no operands");
  if (a.out_types.size() != 1 || a.out_types[0].is_ref) fail("empty", "binds exactly one array");
  const ArrayType& t = a.out_types[0].array;
  Emit e{a.b};
  return {e.op(Prim::broadcast_in_dim, {e.scalar(t.dtype, 0.0)},
               Params{{"broadcast_dimensions", IntList{}},
                      {"shape", IntList(t.shape.begin(), t.shape.end())}})};
}

// empty_ref: a new ref whose contents do not matter until written; refjit zero-fills it
// (deterministic, like empty). free_ref: the ref's storage is released when nothing uses it,
// so the eqn itself has nothing to do.
std::vector<Atom> empty_ref(RewriteArgs& a) {
  if (!a.ins.empty()) fail("empty_ref", "takes no operands");
  if (a.out_types.size() != 1 || !a.out_types[0].is_ref)
    fail("empty_ref", "binds exactly one ref, written r:Ref{f32[3]}");
  const ArrayType& t = a.out_types[0].array;
  Emit e{a.b};
  Atom zeros = e.op(Prim::broadcast_in_dim, {e.scalar(t.dtype, 0.0)},
                    Params{{"broadcast_dimensions", IntList{}},
                           {"shape", IntList(t.shape.begin(), t.shape.end())}});
  return {e.op(Prim::new_ref, {zeros})};
}

std::vector<Atom> free_ref(RewriteArgs& a) {
  if (a.ins.size() != 1 || !a.b.type_of(a.ins[0]).is_ref) fail("free_ref", "takes one ref");
  if (!a.out_types.empty()) fail("free_ref", "binds no values");
  return {};
}

// custom_jvp_call: the JVP rule is a Python function, printed by name only, so refjit runs
// and differentiates call_jaxpr itself (a jit of it). For the functions jax.nn defines this
// way (relu, silu, logsumexp, ...) that gives JAX's derivative except at kinks.
std::vector<Atom> call_as_jit(RewriteArgs& a, std::string_view prim) {
  const JaxprPtr& body = a.params.get<JaxprPtr>("call_jaxpr");
  if (!body) fail(prim, "call_jaxpr is None");
  if (!body->constvars.empty()) fail(prim, "a call_jaxpr with constvars cannot be called");
  Params p{{"jaxpr", body}, {"name", a.params.get_or<std::string>("name", std::string(prim))}};
  std::vector<Var> outs = a.b.add_eqn(Prim::jit, a.ins, std::move(p));
  return {outs.begin(), outs.end()};
}

std::vector<Atom> custom_jvp_call(RewriteArgs& a) { return call_as_jit(a, "custom_jvp_call"); }

// custom_vjp_call as JAX prints it: `fwd=f bwd=g` name Python functions whose bodies are not in
// the text. refjit runs call_jaxpr (the primal, exact) and differentiates call_jaxpr itself:
// the gradient is the primal's true derivative, not the custom rule's. refjit's own
// custom_vjp_call (fwd_jaxpr / bwd_jaxpr in the text) keeps its rules.
std::vector<Atom> custom_vjp_call(RewriteArgs& a) { return call_as_jit(a, "custom_vjp_call"); }

// ---- gather and scatter -----------------------------------------------------------------
//
// JAX prints `x[idx]`, `take`, `take_along_axis` and `.at[...]` updates as XLA's general
// gather / scatter. refjit reads the ones that index whole elements: every indexed operand dim
// is collapsed (a slice of size 1) and every other dim is taken whole. Such a gather is NumPy
// advanced indexing on the indexed dims, which refjit computes with its one-axis gather:
//   1. operand batching dims become one more index column (an iota over the batch);
//   2. with several index columns, the indexed dims move to the front and are flattened into
//      one, and the columns combine into one linear index;
//   3. refjit's gather / scatter runs on that axis; the result's dims are then put where the
//      dimension numbers place them.
// Out-of-range indices follow the mode: CLIP and PROMISE_IN_BOUNDS clamp (a gather) or drop
// (a scatter, except CLIP, which clamps), FILL_OR_DROP gives fill_value (a gather) or drops (a
// scatter). Windowed gathers (slices longer than 1 on an indexed dim) are not read.

enum class Mode { clip, fill_or_drop, promise_in_bounds };

Mode mode_of(const Params& p, std::string_view prim) {
  std::string m = p.get_or<std::string>("mode", "GatherScatterMode.FILL_OR_DROP");
  if (auto dot = m.rfind('.'); dot != std::string::npos) m = m.substr(dot + 1);
  if (m == "CLIP") return Mode::clip;
  if (m == "FILL_OR_DROP") return Mode::fill_or_drop;
  if (m == "PROMISE_IN_BOUNDS" || m == "ONE_HOT") return Mode::promise_in_bounds;
  fail(prim, fmt::format("unknown mode '{}' (expected GatherScatterMode.CLIP, FILL_OR_DROP or "
                         "PROMISE_IN_BOUNDS)",
                         m));
}

bool contains(const IntList& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// The indexed dims of the operand and one index column for each, with shape `batch`.
struct IndexColumns {
  IntList dims;             // operand dims, in column order
  std::vector<Atom> cols;   // integer arrays of shape `batch`
  std::vector<Atom> valid;  // bool arrays: the column is in range (before clamping)
  Shape batch;              // the indices' batch shape (all dims but the last)
};

IndexColumns index_columns(Emit& e, std::string_view prim, const ArrayType& x, const Atom& idx,
                           const IntList& index_map, const IntList& operand_batching,
                           const IntList& indices_batching, bool clamp, bool need_valid) {
  const ArrayType it = e.type(idx);
  if (!is_int(it.dtype))
    fail(prim, fmt::format("indices have type {}; expected integers", it.str()));
  if (it.rank() < 1) fail(prim, "indices must have at least one dimension (the index vector)");
  IndexColumns ic;
  ic.batch.assign(it.shape.begin(), it.shape.end() - 1);
  const int64_t nb = static_cast<int64_t>(ic.batch.size());
  if (it.shape.back() != static_cast<int64_t>(index_map.size()))
    fail(prim, fmt::format("the index vector has {} entries but {} operand dims are indexed",
                           it.shape.back(), index_map.size()));
  if (operand_batching.size() != indices_batching.size())
    fail(prim, "operand and indices batching dims differ in number");
  DType d = it.dtype;
  for (size_t c = 0; c < index_map.size(); ++c) {
    int64_t dim = index_map[c];
    if (dim < 0 || dim >= x.rank()) fail(prim, fmt::format("indexed dim {} is out of range", dim));
    IntList start(it.rank(), 0), limit(it.shape.begin(), it.shape.end());
    start.back() = static_cast<int64_t>(c);
    limit.back() = static_cast<int64_t>(c) + 1;
    Atom col = e.reshape(e.slice(idx, start, limit), ic.batch);
    Atom hi = e.scalar(d, static_cast<double>(x.shape[dim] - 1));
    if (need_valid)
      ic.valid.push_back(
          e.op(Prim::and_, {e.op(Prim::ge, {col, e.scalar(d, 0)}), e.op(Prim::le, {col, hi})}));
    if (clamp) col = e.op(Prim::min, {e.op(Prim::max, {col, e.scalar(d, 0)}), hi});
    ic.dims.push_back(dim);
    ic.cols.push_back(col);
  }
  for (size_t k = 0; k < operand_batching.size(); ++k) {
    int64_t ib = indices_batching[k];
    if (ib < 0 || ib >= nb) fail(prim, fmt::format("indices batching dim {} is out of range", ib));
    ic.dims.push_back(operand_batching[k]);
    ic.cols.push_back(e.op(Prim::iota, {},
                           Params{{"dimension", ib},
                                  {"dtype", d},
                                  {"shape", IntList(ic.batch.begin(), ic.batch.end())}}));
  }
  return ic;
}

// The operand with the indexed dims moved to the front and flattened into one; returns the
// permutation used.
IntList front_permutation(const ArrayType& x, const IntList& dims) {
  IntList perm = dims;
  for (int64_t k = 0; k < x.rank(); ++k)
    if (!contains(dims, k)) perm.push_back(k);
  return perm;
}

// One linear index over the indexed dims (row-major in column order).
Atom linear_index(Emit& e, const ArrayType& x, const IndexColumns& ic) {
  Atom lin = ic.cols.back();
  int64_t stride = x.shape[ic.dims.back()];
  DType d = e.type(lin).dtype;
  for (size_t c = ic.cols.size() - 1; c-- > 0;) {
    lin = e.op(Prim::add,
               {lin, e.op(Prim::mul, {ic.cols[c], e.scalar(d, static_cast<double>(stride))})});
    stride *= x.shape[ic.dims[c]];
  }
  return lin;
}

Atom all_of(Emit& e, const std::vector<Atom>& bools) {
  Atom r = bools.front();
  for (size_t k = 1; k < bools.size(); ++k) r = e.op(Prim::and_, {r, bools[k]});
  return r;
}

double default_fill(DType d) {
  if (is_float(d)) return std::numeric_limits<double>::quiet_NaN();
  if (d == DType::i32) return std::numeric_limits<int32_t>::min();
  if (d == DType::i64) return static_cast<double>(std::numeric_limits<int64_t>::min());
  return 1.0;  // bool: True
}

void check_whole_elements(std::string_view prim, const ArrayType& x, const IntList& indexed,
                          const IntList& slice_sizes) {
  if (static_cast<int64_t>(slice_sizes.size()) != x.rank())
    fail(prim, fmt::format("slice_sizes has {} entries for an operand of rank {}",
                           slice_sizes.size(), x.rank()));
  for (int64_t k = 0; k < x.rank(); ++k) {
    int64_t want = contains(indexed, k) ? 1 : x.shape[k];
    if (slice_sizes[k] != want)
      fail(prim, fmt::format("slice_sizes {} take a window of {} along dim {}; refjit reads "
                             "gathers of whole elements (size 1 on indexed dims, the full "
                             "dimension elsewhere); use dynamic_slice for windows",
                             fmt::join(slice_sizes, ", "), slice_sizes[k], k));
  }
}

// Every indexed dim must be one the result drops (collapsed for a gather, inserted for a
// scatter) or a batching dim: refjit reads accesses of whole elements only.
void check_indexed_dims_dropped(std::string_view prim, const IntList& indexed,
                                const IntList& dropped, const IntList& batching,
                                std::string_view what) {
  for (int64_t d : indexed)
    if (!contains(dropped, d) && !contains(batching, d))
      fail(prim, fmt::format("indexed dim {} is not {}", d, what));
}

std::vector<Atom> gather(RewriteArgs& a) {
  constexpr std::string_view prim = "gather";
  expect_operands(a, prim, 2);
  const ArrayType x = array_of(a, prim, 0);
  const IntListList& dn = a.params.get<IntListList>("dimension_numbers");
  const IntList &offset_dims = dn[0], &collapsed = dn[1], &index_map = dn[2],
                &operand_batching = dn[3], &indices_batching = dn[4];
  Mode mode = mode_of(a.params, prim);
  Emit e{a.b};
  IndexColumns ic = index_columns(e, prim, x, a.ins[1], index_map, operand_batching,
                                  indices_batching, true, mode == Mode::fill_or_drop);
  check_indexed_dims_dropped(prim, ic.dims, collapsed, operand_batching,
                             "collapsed; refjit reads gathers of whole elements (x[idx], take, "
                             "take_along_axis); write a window as dynamic_slice");
  check_whole_elements(prim, x, ic.dims, a.params.get<IntList>("slice_sizes"));

  // refjit's gather on one axis: result = x's front dims + batch + x's back dims.
  const int64_t nb = static_cast<int64_t>(ic.batch.size());
  Atom g;
  IntList rest;  // x's dims kept whole, in order (the offset dims)
  int64_t axis;
  if (ic.cols.size() == 1) {
    axis = ic.dims[0];
    g = e.op(Prim::gather, {a.ins[0], ic.cols[0]}, Params{{"axis", axis}});
    for (int64_t k = 0; k < x.rank(); ++k)
      if (k != axis) rest.push_back(k);
  } else {
    IntList perm = front_permutation(x, ic.dims);
    Shape flat{1};
    for (int64_t d : ic.dims) flat[0] *= x.shape[d];
    for (size_t k = ic.dims.size(); k < perm.size(); ++k) {
      flat.push_back(x.shape[perm[k]]);
      rest.push_back(perm[k]);
    }
    Atom xf = e.reshape(e.transpose(a.ins[0], perm), flat);
    axis = 0;
    g = e.op(Prim::gather, {xf, linear_index(e, x, ic)}, Params{{"axis", int64_t{0}}});
  }
  // Dims of g: rest[0:axis], batch, rest[axis:]. JAX's result: offset dims (rest, in order) at
  // `offset_dims`, batch dims (in order) elsewhere.
  const int64_t out_rank = nb + static_cast<int64_t>(rest.size());
  if (static_cast<int64_t>(offset_dims.size()) != static_cast<int64_t>(rest.size()))
    fail(prim, fmt::format("offset_dims has {} entries but {} operand dims are kept whole",
                           offset_dims.size(), rest.size()));
  IntList perm(out_rank), batch_pos;
  int64_t next_batch = 0, next_rest = 0;
  for (int64_t p = 0; p < out_rank; ++p) {
    if (contains(offset_dims, p)) {
      int64_t r = next_rest++;
      perm[p] = r < axis ? r : r + nb;
    } else {
      batch_pos.push_back(p);
      perm[p] = axis + next_batch++;
    }
  }
  Atom out = e.transpose(g, perm);
  if (mode == Mode::fill_or_drop) {
    double fill = a.params.get_or<double>("fill_value", default_fill(x.dtype));
    const Shape& os = e.type(out).shape;
    Atom ok = e.broadcast(all_of(e, ic.valid), os, batch_pos);
    Atom filled = e.broadcast(e.scalar(x.dtype, fill), os, {});
    out = e.op(Prim::select_n, {ok, filled, out});
  }
  return {out};
}

// scatter, scatter-add: x with updates written (added) at the indexed elements.
std::vector<Atom> scatter_like(RewriteArgs& a, std::string_view prim, Prim refjit_prim) {
  expect_operands(a, prim, 3);
  const ArrayType x = array_of(a, prim, 0);
  const ArrayType u = array_of(a, prim, 2);
  const IntListList& dn = a.params.get<IntListList>("dimension_numbers");
  const IntList &window_dims = dn[0], &inserted = dn[1], &index_map = dn[2],
                &operand_batching = dn[3], &indices_batching = dn[4];
  Mode mode = mode_of(a.params, prim);
  Emit e{a.b};
  IndexColumns ic = index_columns(e, prim, x, a.ins[1], index_map, operand_batching,
                                  indices_batching, mode == Mode::clip, mode != Mode::clip);
  check_indexed_dims_dropped(prim, ic.dims, inserted, operand_batching,
                             "an inserted window dim; refjit reads scatters of whole elements "
                             "(x.at[idx]); write a window as dynamic_update_slice");
  IntList perm = front_permutation(x, ic.dims);
  IntList rest(perm.begin() + static_cast<int64_t>(ic.dims.size()), perm.end());
  const int64_t nb = static_cast<int64_t>(ic.batch.size());
  if (static_cast<int64_t>(window_dims.size()) != static_cast<int64_t>(rest.size()) ||
      u.rank() != nb + static_cast<int64_t>(rest.size()))
    fail(prim, fmt::format("updates {} do not match the indices' batch shape and the operand's "
                           "whole dims",
                           u.str()));
  for (size_t k = 0; k < rest.size(); ++k)
    if (u.shape[window_dims[k]] != x.shape[rest[k]])
      fail(prim, fmt::format("update window dim {} has size {} but operand dim {} has {}; refjit "
                             "reads scatters of whole elements",
                             window_dims[k], u.shape[window_dims[k]], rest[k], x.shape[rest[k]]));
  // Updates in refjit's order: batch dims, then the window dims.
  IntList uperm;
  for (int64_t p = 0; p < u.rank(); ++p)
    if (!contains(window_dims, p)) uperm.push_back(p);
  for (int64_t w : window_dims) uperm.push_back(w);
  Atom uu = e.transpose(a.ins[2], uperm);

  Atom lin;
  int64_t n = 1;
  for (int64_t d : ic.dims) n *= x.shape[d];
  lin = ic.cols.size() == 1 ? ic.cols[0] : linear_index(e, x, ic);
  if (mode != Mode::clip) {
    // Dropped: a linear index past the end, which refjit's scatter drops.
    DType d = e.type(lin).dtype;
    Atom past = e.broadcast(e.scalar(d, static_cast<double>(n)), ic.batch, {});
    lin = e.op(Prim::select_n, {all_of(e, ic.valid), past, lin});
  }
  Params p{{"axis", int64_t{0}}};
  if (refjit_prim == Prim::scatter)
    p.set("unique_indices", a.params.get_or<bool>("unique_indices", false));
  if (ic.cols.size() == 1) {
    int64_t axis = ic.dims[0];
    // refjit's updates: x's dims before axis, batch, x's dims after axis.
    IntList uperm2;
    for (int64_t k = 0; k < axis; ++k) uperm2.push_back(nb + k);
    for (int64_t k = 0; k < nb; ++k) uperm2.push_back(k);
    for (int64_t k = axis; k < static_cast<int64_t>(rest.size()); ++k) uperm2.push_back(nb + k);
    p.set("axis", axis);
    return {e.op(refjit_prim, {a.ins[0], lin, e.transpose(uu, uperm2)}, std::move(p))};
  }
  Shape flat{n};
  for (int64_t r : rest) flat.push_back(x.shape[r]);
  Atom xf = e.reshape(e.transpose(a.ins[0], perm), flat);
  Atom out = e.op(refjit_prim, {xf, lin, uu}, std::move(p));
  Shape front;
  for (int64_t k : perm) front.push_back(x.shape[k]);
  IntList inverse(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inverse[perm[k]] = static_cast<int64_t>(k);
  return {e.transpose(e.reshape(out, front), inverse)};
}

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
  Params p{{"jaxpr", std::make_shared<const Jaxpr>(body.finish())},
           {"length", n - 1},
           {"reverse", reverse},
           {"num_consts", int64_t{0}},
           {"num_carry", int64_t{1}},
           {"linear", NoneParam{}},
           {"unroll", int64_t{1}},
           {"_split_transpose", false}};
  std::vector<Var> outs = e.b.add_eqn(Prim::scan, {init, xs}, std::move(p));
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

// reduce_prod / reduce_and / reduce_or [axes] x: the reduced axes are moved to the front and
// flattened, then folded; `unit` is the result of an empty reduction.
JaxRewrite reduction(std::string_view name, Prim combine, double unit) {
  return {
      name, {{"axes", K::ints}}, {}, [name, combine, unit](RewriteArgs& a) -> std::vector<Atom> {
        expect_operands(a, name, 1);
        const ArrayType x = array_of(a, name, 0);
        IntList axes = a.params.get<IntList>("axes");
        for (int64_t ax : axes)
          if (ax < 0 || ax >= x.rank())
            fail(name, fmt::format("axis {} is out of range for {}", ax, x.str()));
        Emit e{a.b};
        if (axes.empty()) return {a.ins[0]};
        IntList perm = front_permutation(x, axes);
        Shape flat{1}, rest;
        for (int64_t ax : axes) flat[0] *= x.shape[ax];
        for (size_t k = axes.size(); k < perm.size(); ++k) {
          flat.push_back(x.shape[perm[k]]);
          rest.push_back(x.shape[perm[k]]);
        }
        if (flat[0] == 0) return {e.broadcast(e.scalar(x.dtype, unit), rest, {})};
        Atom xf = e.reshape(e.transpose(a.ins[0], perm), flat);
        return {fold_axis(e, xf, 0, false, false, binary_step(combine)).last};
      }};
}

// ---- PRNG: threefry keys as u32[..., 2] -------------------------------------------------
//
// The parser reads a `key<fry>[s]` binder as u32[s..., 2], the key's two words. The random_*
// primitives then become threefry2x32 hashes written with integer primitives (add, xor,
// shifts), computing JAX's bits exactly (its default "partitionable" threefry).

// One word of a scalar key u32[2]: u32[].
Atom key_word(Emit& e, const Atom& key, int64_t w) {
  return e.op(Prim::squeeze, {e.slice(key, {w}, {w + 1})}, Params{{"dimensions", IntList{0}}});
}

Atom u32(Emit& e, uint32_t v) { return Literal::of_int(DType::u32, v); }

Atom rotate_left(Emit& e, const Atom& x, uint32_t r) {
  return e.op(Prim::or_, {e.op(Prim::shift_left, {x, u32(e, r)}),
                          e.op(Prim::shift_right_logical, {x, u32(e, 32 - r)})});
}

// The Threefry-2x32 hash (20 rounds) of the counter pairs (x1, x2) under key (k1, k2), as JAX's
// threefry2x32 primitive computes it.
std::pair<Atom, Atom> threefry2x32(Emit& e, Atom k1, Atom k2, Atom x1, Atom x2) {
  const uint32_t rotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  Atom ks[3] = {k1, k2, e.op(Prim::xor_, {e.op(Prim::xor_, {k1, k2}), u32(e, 0x1BD11BDA)})};
  Atom x[2] = {e.op(Prim::add, {x1, ks[0]}), e.op(Prim::add, {x2, ks[1]})};
  for (int block = 0; block < 5; ++block) {
    for (uint32_t r : rotations[block % 2]) {
      x[0] = e.op(Prim::add, {x[0], x[1]});
      x[1] = e.op(Prim::xor_, {x[0], rotate_left(e, x[1], r)});
    }
    x[0] = e.op(Prim::add, {x[0], ks[(block + 1) % 3]});
    x[1] = e.op(Prim::add, {e.op(Prim::add, {x[1], ks[(block + 2) % 3]}),
                            u32(e, static_cast<uint32_t>(block + 1))});
  }
  return {x[0], x[1]};
}

// The counters of `shape`: each element's row-major index as a uint64, split into its high
// and low words (JAX's iota_2x32_shape).
std::pair<Atom, Atom> counters(Emit& e, std::string_view prim, const IntList& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n > (int64_t{1} << 32))
    fail(prim, "more than 2^32 random values in one call are not supported");
  Shape s(shape.begin(), shape.end());
  Atom lo = e.reshape(
      e.op(Prim::iota, {},
           Params{{"dimension", int64_t{0}}, {"dtype", DType::u32}, {"shape", IntList{n}}}),
      s);
  Atom hi = e.broadcast(u32(e, 0), s, {});
  return {hi, lo};
}

ArrayType scalar_key(const RewriteArgs& a, std::string_view prim) {
  ArrayType k = array_of(a, prim, 0);
  if (k.dtype != DType::u32 || k.shape != Shape{2})
    fail(prim, fmt::format("operand 0 has type {}; expected one threefry key (key<fry>[] or "
                           "u32[2]); batched keys are not supported",
                           k.str()));
  return k;
}

// The hash of the counters of `shape` under the one key operand: what random_bits and
// random_split draw from.
std::pair<Atom, Atom> hashed_counters(RewriteArgs& a, Emit& e, std::string_view prim,
                                      const IntList& shape) {
  expect_operands(a, prim, 1);
  scalar_key(a, prim);
  auto [hi, lo] = counters(e, prim, shape);
  return threefry2x32(e, key_word(e, a.ins[0], 0), key_word(e, a.ins[0], 1), hi, lo);
}

std::vector<Atom> random_bits(RewriteArgs& a) {
  constexpr std::string_view prim = "random_bits";
  int64_t width = a.params.get<int64_t>("bit_width");
  const IntList& shape = a.params.get<IntList>("shape");
  Emit e{a.b};
  auto [b1, b2] = hashed_counters(a, e, prim, shape);
  auto convert = [&](Atom x, DType d) {
    return e.op(Prim::convert_element_type, {x}, Params{{"new_dtype", d}, {"weak_type", false}});
  };
  switch (width) {
    case 32: return {e.op(Prim::xor_, {b1, b2})};
    case 8: return {convert(e.op(Prim::xor_, {b1, b2}), DType::u8)};
    case 16: return {convert(e.op(Prim::xor_, {b1, b2}), DType::u16)};
    case 64: {
      Atom h = e.op(Prim::shift_left, {convert(b1, DType::u64), Literal::of_int(DType::u64, 32)});
      return {e.op(Prim::or_, {h, convert(b2, DType::u64)})};
    }
    default: fail(prim, fmt::format("bit_width={} is not 8, 16, 32 or 64", width));
  }
}

// random_split[shape] key: a new key per element, the hash of its counter (JAX's fold-like split).
std::vector<Atom> random_split(RewriteArgs& a) {
  const IntList& shape = a.params.get<IntList>("shape");
  Emit e{a.b};
  auto [b1, b2] = hashed_counters(a, e, "random_split", shape);
  int64_t rank = static_cast<int64_t>(shape.size());
  Atom w1 = e.op(Prim::expand_dims, {b1}, Params{{"dimensions", IntList{rank}}});
  Atom w2 = e.op(Prim::expand_dims, {b2}, Params{{"dimensions", IntList{rank}}});
  return {e.op(Prim::concatenate, {w1, w2}, Params{{"dimension", rank}})};
}

// The key of an integer seed: its high and low 32-bit words (JAX's threefry_seed).
Atom seed_key(Emit& e, const Atom& seed) {
  DType d = e.type(seed).dtype;
  auto convert = [&](Atom x) {
    return e.op(Prim::convert_element_type, {x},
                Params{{"new_dtype", DType::u32}, {"weak_type", false}});
  };
  // A shift by the bit width or more gives 0 (so a 32-bit seed has a zero high word).
  Atom high = convert(e.op(Prim::shift_right_logical, {seed, Literal::of_int(d, 32)}));
  Atom low = convert(seed);
  Params one{{"dimensions", IntList{0}}};
  return e.op(Prim::concatenate,
              {e.op(Prim::expand_dims, {high}, one), e.op(Prim::expand_dims, {low}, one)},
              Params{{"dimension", int64_t{0}}});
}

std::vector<Atom> random_seed(RewriteArgs& a) {
  expect_operands(a, "random_seed", 1);
  const ArrayType& s = array_of(a, "random_seed", 0);
  if (!is_int(s.dtype) || !s.is_scalar())
    fail("random_seed", fmt::format("the seed has type {}; expected an integer scalar", s.str()));
  Emit e{a.b};
  return {seed_key(e, a.ins[0])};
}

// random_fold_in key data: the hash of data's seed key under key (JAX's threefry_fold_in).
std::vector<Atom> random_fold_in(RewriteArgs& a) {
  constexpr std::string_view prim = "random_fold_in";
  expect_operands(a, prim, 2);
  scalar_key(a, prim);
  Emit e{a.b};
  Atom data = a.ins[1];
  if (e.type(data).dtype != DType::u32)
    data = e.op(Prim::convert_element_type, {data},
                Params{{"new_dtype", DType::u32}, {"weak_type", false}});
  Atom count = seed_key(e, data);
  auto [b1, b2] = threefry2x32(e, key_word(e, a.ins[0], 0), key_word(e, a.ins[0], 1),
                               e.slice(count, {0}, {1}), e.slice(count, {1}, {2}));
  return {e.op(Prim::concatenate, {b1, b2}, Params{{"dimension", int64_t{0}}})};
}

// threefry2x32 k1 k2 x1 x2, the hash itself.
std::vector<Atom> threefry(RewriteArgs& a) {
  expect_operands(a, "threefry2x32", 4);
  for (size_t k = 0; k < 4; ++k)
    if (array_of(a, "threefry2x32", k).dtype != DType::u32)
      fail("threefry2x32", fmt::format("operand {} is not uint32", k));
  Emit e{a.b};
  auto [y1, y2] = threefry2x32(e, a.ins[0], a.ins[1], a.ins[2], a.ins[3]);
  return {y1, y2};
}

// random_wrap / random_unwrap / random_clone: the key's words are the key.
std::vector<Atom> same_words(RewriteArgs& a) {
  if (a.ins.size() != 1) fail("random_wrap", "expects one operand");
  const ArrayType& k = array_of(a, "random_wrap", 0);
  if (k.dtype != DType::u32 || k.shape.empty() || k.shape.back() != 2)
    fail("random_wrap",
         fmt::format("operand has type {}; threefry key words are u32[..., 2]", k.str()));
  return {a.ins[0]};
}

const std::vector<std::string_view> kGatherIgnored = {"indices_are_sorted", "unique_indices"};
const std::vector<std::string_view> kScatterIgnored = {"indices_are_sorted", "update_consts",
                                                       "update_jaxpr"};

std::vector<JaxRewrite> make_rewrites() {
  std::vector<JaxRewrite> r;
  r.push_back({"square", {}, {}, square});
  r.push_back(cumulative("cumsum", binary_step(Prim::add)));
  r.push_back(cumulative("cumprod", binary_step(Prim::mul)));
  r.push_back(cumulative("cummax", binary_step(Prim::max)));
  r.push_back(cumulative("cummin", binary_step(Prim::min)));
  r.push_back(cumulative("cumlogsumexp", logaddexp));
  r.push_back(reduction("reduce_prod", Prim::mul, 1.0));
  r.push_back(reduction("reduce_and", Prim::and_, 1.0));
  r.push_back(reduction("reduce_or", Prim::or_, 0.0));
  r.push_back(reduction("reduce_xor", Prim::xor_, 0.0));
  r.push_back({"clamp", {}, {}, clamp});
  r.push_back({"split", {{"axis", K::integer}, {"sizes", K::ints}}, {}, split});
  r.push_back({"stack", {{"axis", K::integer}}, {}, stack});
  r.push_back({"unstack", {{"axis", K::integer}}, {}, unstack});
  r.push_back({"rev", {{"dimensions", K::ints}}, {}, rev});
  r.push_back({"top_k", {{"axis", K::integer}, {"k", K::integer}}, {}, top_k});
  r.push_back({"random_bits", {{"bit_width", K::integer}, {"shape", K::ints}}, {}, random_bits});
  r.push_back({"random_split", {{"shape", K::ints}}, {}, random_split});
  r.push_back({"random_fold_in", {}, {}, random_fold_in});
  r.push_back({"random_seed", {}, {"impl"}, random_seed});
  r.push_back({"random_wrap", {}, {"impl"}, same_words});
  r.push_back({"random_unwrap", {}, {}, same_words});
  r.push_back({"random_clone", {}, {}, same_words});
  r.push_back({"threefry2x32", {}, {}, threefry});
  r.push_back({"argmin", {{"axes", K::ints}, {"index_dtype", K::dtype}}, {}, argmin});
  r.push_back({"reshape", {{"dimensions", K::ints_or_none}, {"new_sizes", K::ints}}, {}, reshape});
  r.push_back({"empty", {}, {"dtype", "memory_space"}, empty});
  r.push_back({"empty_ref", {}, {"memory_space", "ty"}, empty_ref});
  r.push_back({"free_ref", {}, {}, free_ref});
  r.push_back({"empty2", {}, {"dtype", "memory_space"}, empty});
  r.push_back({"custom_jvp_call",
               {{"call_jaxpr", K::jaxpr}, {"name", K::name}},
               {"jvp", "jvp_jaxpr_fun", "jvp_jaxpr_thunk", "num_consts", "symbolic_zeros"},
               custom_jvp_call});
  r.push_back({"custom_vjp_call",
               {{"call_jaxpr", K::jaxpr}, {"name", K::name}},
               {"fwd", "bwd", "num_consts", "out_trees", "symbolic_zeros"},
               custom_vjp_call});
  r.push_back({"gather",
               {{"dimension_numbers", K::gather_dims},
                {"fill_value", K::number_or_none},
                {"mode", K::word_or_none},
                {"slice_sizes", K::ints}},
               kGatherIgnored,
               gather});
  std::vector<ParamSpec> scatter_params = {{"dimension_numbers", K::scatter_dims},
                                           {"mode", K::word_or_none},
                                           {"unique_indices", K::boolean}};
  r.push_back({"scatter", scatter_params, kScatterIgnored,
               [](RewriteArgs& a) { return scatter_like(a, "scatter", Prim::scatter); }});
  r.push_back({"scatter-add", scatter_params, kScatterIgnored,
               [](RewriteArgs& a) { return scatter_like(a, "scatter-add", Prim::scatter_add); }});
  r.push_back({"scatter-mul", scatter_params, kScatterIgnored,
               [](RewriteArgs& a) { return scatter_like(a, "scatter-mul", Prim::scatter_mul); }});
  r.push_back({"scatter-min", scatter_params, kScatterIgnored,
               [](RewriteArgs& a) { return scatter_like(a, "scatter-min", Prim::scatter_min); }});
  r.push_back({"scatter-max", scatter_params, kScatterIgnored,
               [](RewriteArgs& a) { return scatter_like(a, "scatter-max", Prim::scatter_max); }});
  return r;
}

}  // namespace

const JaxRewrite* find_jax_rewrite(std::string_view name) {
  static const std::vector<JaxRewrite> rewrites = make_rewrites();
  for (const JaxRewrite& r : rewrites)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace refjit::text
