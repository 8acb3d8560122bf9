// JAX's general gather and scatter, read as refjit's one-axis gather/scatter (jax_rewrites.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "ir/jax_rewrite_support.h"

namespace refjit::text {

namespace {

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

// Every entry of `dims` names a distinct dim of a rank-`rank` array (dimension numbers come
// from the text, so nothing about them can be assumed).
void check_dim_list(std::string_view prim, std::string_view what, const IntList& dims,
                    std::string_view array, int64_t rank) {
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] < 0 || dims[k] >= rank)
      fail(prim, fmt::format("{} ({}) names dim {}, but {} has rank {}", what,
                             fmt::join(dims, ", "), dims[k], array, rank));
    for (size_t j = 0; j < k; ++j)
      if (dims[j] == dims[k])
        fail(prim, fmt::format("{} ({}) names dim {} twice", what, fmt::join(dims, ", "), dims[k]));
  }
}

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
  IntList indexed = index_map;
  indexed.insert(indexed.end(), operand_batching.begin(), operand_batching.end());
  if (indexed.empty()) fail(prim, "no operand dim is indexed (start_index_map is empty)");
  check_dim_list(prim, "the indexed and batching operand dims", indexed, "the operand", x.rank());
  check_dim_list(prim, "the indices batching dims", indices_batching, "the indices' batch shape",
                 nb);
  DType d = it.dtype;
  for (size_t c = 0; c < index_map.size(); ++c) {
    int64_t dim = index_map[c];
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
    ic.dims.push_back(operand_batching[k]);
    ic.cols.push_back(e.op(Prim::iota, {},
                           Params{{"dimension", ib},
                                  {"dtype", d},
                                  {"shape", IntList(ic.batch.begin(), ic.batch.end())}}));
  }
  return ic;
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
  check_dim_list(prim, "offset_dims", offset_dims, "the result", out_rank);
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
  check_dim_list(prim, "update_window_dims", window_dims, "the updates array", u.rank());
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

const std::vector<std::string_view> kGatherIgnored = {"indices_are_sorted", "unique_indices"};
const std::vector<std::string_view> kScatterIgnored = {"indices_are_sorted", "update_consts",
                                                       "update_jaxpr"};

}  // namespace

void add_gather_scatter_rewrites(std::vector<JaxRewrite>& table) {
  table.push_back({"gather",
                   {{"dimension_numbers", K::gather_dims},
                    {"fill_value", K::number_or_none},
                    {"mode", K::word_or_none},
                    {"slice_sizes", K::ints}},
                   kGatherIgnored,
                   gather});
  std::vector<ParamSpec> scatter_params = {{"dimension_numbers", K::scatter_dims},
                                           {"mode", K::word_or_none},
                                           {"unique_indices", K::boolean}};
  table.push_back({"scatter", scatter_params, kScatterIgnored,
                   [](RewriteArgs& a) { return scatter_like(a, "scatter", Prim::scatter); }});
  table.push_back({"scatter-add", scatter_params, kScatterIgnored, [](RewriteArgs& a) {
                     return scatter_like(a, "scatter-add", Prim::scatter_add);
                   }});
  table.push_back({"scatter-mul", scatter_params, kScatterIgnored, [](RewriteArgs& a) {
                     return scatter_like(a, "scatter-mul", Prim::scatter_mul);
                   }});
  table.push_back({"scatter-min", scatter_params, kScatterIgnored, [](RewriteArgs& a) {
                     return scatter_like(a, "scatter-min", Prim::scatter_min);
                   }});
  table.push_back({"scatter-max", scatter_params, kScatterIgnored, [](RewriteArgs& a) {
                     return scatter_like(a, "scatter-max", Prim::scatter_max);
                   }});
}

}  // namespace refjit::text
