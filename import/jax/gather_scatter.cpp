// JAX's general gather and scatter, read as refjit's one-axis gather/scatter (rewrites.h).
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

// ---- gather and scatter -----------------------------------------------------------------
//
// JAX prints `x[idx]`, `take`, `take_along_axis` and `.at[...]` updates as XLA's general
// gather / scatter. refjit reads the ones that index whole elements: every indexed operand dim
// is collapsed (a slice of size 1) and every other dim is taken whole. Such a gather is NumPy
// advanced indexing on the indexed dims, which refjit computes with its one-axis gather:
//   1. operand batching dims become one more index column (an iota over the batch);
//   2. with several index columns, the indexed dims move to the front and the columns combine
//      into one linear (row-major) index over them, which the op's `dims` param names;
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

// FILL_OR_DROP: fill_value (or the dtype's default) wherever `ok` (over the result's batch
// dims, at `batch_pos`) is false.
Atom fill_where_invalid(Emit& e, const Params& params, const Atom& out, const Atom& ok,
                        const IntList& batch_pos) {
  const ArrayType t = e.type(out);
  double fill = params.get_or<double>("fill_value", default_fill(t.dtype));
  Atom filled = e.broadcast(e.scalar(t.dtype, fill), t.shape, {});
  return e.op(Prim::select_n, {e.broadcast(ok, t.shape, batch_pos), filled, out});
}

std::vector<Atom> gather_whole(RewriteArgs& a) {
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
    for (size_t k = ic.dims.size(); k < perm.size(); ++k) rest.push_back(perm[k]);
    axis = 0;
    g = e.op(Prim::gather, {e.transpose(a.ins[0], perm), linear_index(e, x, ic)},
             Params{{"axis", int64_t{0}}, {"dims", static_cast<int64_t>(ic.dims.size())}});
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
    out = fill_where_invalid(e, a.params, out, all_of(e, ic.valid), batch_pos);
  }
  return {out};
}

// A scatter's operand, updates, dimension numbers (ScatterDimensionNumbers' fields in order)
// and mode.
struct ScatterOperands {
  ArrayType x, u;
  IntListList dn;
  Mode mode;
};
ScatterOperands scatter_operands(const RewriteArgs& a, std::string_view prim) {
  expect_operands(a, prim, 3);
  return {array_of(a, prim, 0), array_of(a, prim, 2),
          a.params.get<IntListList>("dimension_numbers"), mode_of(a.params, prim)};
}

// scatter, scatter-add: x with updates written (added) at the indexed elements.
std::vector<Atom> scatter_whole(RewriteArgs& a, std::string_view prim, Prim refjit_prim) {
  const ScatterOperands s = scatter_operands(a, prim);
  const ArrayType &x = s.x, &u = s.u;
  const IntList &window_dims = s.dn[0], &inserted = s.dn[1], &index_map = s.dn[2],
                &operand_batching = s.dn[3], &indices_batching = s.dn[4];
  const Mode mode = s.mode;
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
      fail(prim, fmt::format("update window dim {} has size {} but operand dim {} has {}; a "
                             "window shorter than a dim no index moves is not supported (index "
                             "that dim too, or scatter into a slice of the operand)",
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
  p.set("dims", static_cast<int64_t>(ic.dims.size()));
  Atom out = e.op(refjit_prim, {e.transpose(a.ins[0], perm), lin, uu}, std::move(p));
  IntList inverse(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inverse[perm[k]] = static_cast<int64_t>(k);
  return {e.transpose(out, inverse)};
}

// ---- windows -----------------------------------------------------------------------------
//
// A window of one element along an indexed dim (what `vmap` of a dynamic_slice or
// dynamic_update_slice with an unbatched start prints) is that element: the dim is read as
// collapsed (gather) or inserted (scatter), and the result or the updates get or lose the
// size-1 dim it leaves. Out-of-range starts then follow the whole-element rules, which agree
// with the window's for a window of one.

// The positions in `window_positions` (one per operand dim in `window_operand_dims`, in order)
// of the operand dims in `unit`, and the other positions renumbered as if those were gone.
struct UnitWindows {
  IntList removed;    // positions dropped, ascending
  IntList remaining;  // the other positions, renumbered
};
UnitWindows split_unit_windows(const IntList& window_positions, const IntList& window_operand_dims,
                               const IntList& unit) {
  UnitWindows u;
  for (size_t j = 0; j < window_positions.size(); ++j)
    if (contains(unit, window_operand_dims[j])) u.removed.push_back(window_positions[j]);
  std::sort(u.removed.begin(), u.removed.end());
  for (size_t j = 0; j < window_positions.size(); ++j) {
    if (contains(unit, window_operand_dims[j])) continue;
    const int64_t q = window_positions[j];
    u.remaining.push_back(
        q - (std::lower_bound(u.removed.begin(), u.removed.end(), q) - u.removed.begin()));
  }
  return u;
}

// A slice of w > 1 elements along an indexed operand dim starting at `start` is the w
// elements start, start+1, ...: one more batch dim of the indices, whose column is
// start + iota. The dim then counts as collapsed (gather) or inserted (scatter), and the rest
// of the rewrite reads whole elements. Starts follow XLA: a gather clamps them so the window
// fits (FILL_OR_DROP fills the windows that do not); a scatter clamps them (CLIP) or drops
// the whole window (otherwise).

struct WindowedIndices {
  Atom idx;                // batch ++ window dims ++ [index vector]
  IntList dims;            // the windowed operand dims, in index-vector order
  std::optional<Atom> ok;  // shape batch: every window fits (only when asked for)
};

// `sizes[k]`: the window along operand dim k (1 where none).
WindowedIndices window_to_batch(Emit& e, std::string_view prim, const ArrayType& x, const Atom& idx,
                                const IntList& index_map, const IntList& sizes, bool clamp,
                                bool want_ok) {
  const ArrayType it = e.type(idx);
  if (!is_int(it.dtype))
    fail(prim, fmt::format("indices have type {}; expected integers", it.str()));
  if (it.rank() < 1 || it.shape.back() != static_cast<int64_t>(index_map.size()))
    fail(prim, fmt::format("indices {} do not end in an index vector of {} entries", it.str(),
                           index_map.size()));
  check_dim_list(prim, "start_index_map", index_map, "the operand", x.rank());
  const Shape batch(it.shape.begin(), it.shape.end() - 1);
  const int64_t nb = static_cast<int64_t>(batch.size());
  WindowedIndices w;
  Shape full = batch;
  for (int64_t k : index_map)
    if (sizes[k] > 1) {
      if (sizes[k] > x.shape[k])
        fail(prim, fmt::format("a window of {} along dim {} is longer than the dim ({})", sizes[k],
                               k, x.shape[k]));
      w.dims.push_back(k);
      full.push_back(sizes[k]);
    }
  DType d = it.dtype;
  IntList batch_dims(static_cast<size_t>(nb));
  std::iota(batch_dims.begin(), batch_dims.end(), int64_t{0});
  std::vector<Atom> cols, oks;
  int64_t next_window = 0;
  for (size_t c = 0; c < index_map.size(); ++c) {
    const int64_t k = index_map[c];
    IntList start(it.rank(), 0), limit(it.shape.begin(), it.shape.end());
    start.back() = static_cast<int64_t>(c);
    limit.back() = static_cast<int64_t>(c) + 1;
    Atom col = e.reshape(e.slice(idx, start, limit), batch);
    if (sizes[k] > 1) {
      Atom last = e.scalar(d, static_cast<double>(x.shape[k] - sizes[k]));  // the last start
      Atom fits =
          e.op(Prim::and_, {e.op(Prim::ge, {col, e.scalar(d, 0)}), e.op(Prim::le, {col, last})});
      if (want_ok) oks.push_back(fits);
      if (clamp) {
        col = e.op(Prim::min, {e.op(Prim::max, {col, e.scalar(d, 0)}), last});
      } else {  // a start past the end, so every element of the window is dropped
        Atom past = e.broadcast(e.scalar(d, static_cast<double>(x.shape[k])), batch, {});
        col = e.op(Prim::select_n, {fits, past, col});
      }
      Atom along = e.op(Prim::iota, {},
                        Params{{"dimension", nb + next_window++},
                               {"dtype", d},
                               {"shape", IntList(full.begin(), full.end())}});
      col = e.op(Prim::add, {e.broadcast(col, full, batch_dims), along});
    } else {
      col = e.broadcast(col, full, batch_dims);
    }
    cols.push_back(e.op(Prim::expand_dims, {col},
                        Params{{"dimensions", IntList{static_cast<int64_t>(full.size())}}}));
  }
  w.idx = cols.size() == 1 ? cols[0]
                           : e.op(Prim::concatenate, cols,
                                  Params{{"dimension", static_cast<int64_t>(full.size())}});
  if (want_ok && !oks.empty()) w.ok = all_of(e, oks);
  return w;
}

std::vector<Atom> gather(RewriteArgs& a) {
  constexpr std::string_view prim = "gather";
  expect_operands(a, prim, 2);
  const ArrayType x = array_of(a, prim, 0);
  const IntListList& dn = a.params.get<IntListList>("dimension_numbers");
  const IntList &offset_dims = dn[0], &collapsed = dn[1], &index_map = dn[2],
                &operand_batching = dn[3];
  IntList sizes = a.params.get<IntList>("slice_sizes");
  if (static_cast<int64_t>(sizes.size()) != x.rank())
    fail(prim, fmt::format("slice_sizes has {} entries for an operand of rank {}", sizes.size(),
                           x.rank()));
  IntList unit;  // indexed dims with a window of one element
  for (int64_t k : index_map)
    if (k >= 0 && k < x.rank() && sizes[k] == 1 && !contains(collapsed, k) &&
        !contains(operand_batching, k))
      unit.push_back(k);
  if (!unit.empty()) {
    IntList sliced;  // the operand dims offset_dims places, in order
    for (int64_t k = 0; k < x.rank(); ++k)
      if (!contains(collapsed, k) && !contains(operand_batching, k)) sliced.push_back(k);
    if (sliced.size() != offset_dims.size())
      fail(prim, fmt::format("offset_dims has {} entries but {} operand dims are sliced",
                             offset_dims.size(), sliced.size()));
    UnitWindows uw = split_unit_windows(offset_dims, sliced, unit);
    IntList more_collapsed = collapsed;
    more_collapsed.insert(more_collapsed.end(), unit.begin(), unit.end());
    std::sort(more_collapsed.begin(), more_collapsed.end());
    Params p = a.params;
    p.set("dimension_numbers",
          IntListList{uw.remaining, more_collapsed, index_map, operand_batching, dn[4]});
    RewriteArgs inner{a.b, a.ins, p, a.out_types};
    Emit e{a.b};
    return {e.op(Prim::expand_dims, {gather(inner).at(0)}, Params{{"dimensions", uw.removed}})};
  }
  bool windowed = false;
  for (int64_t k : index_map)
    windowed = windowed || (k >= 0 && k < x.rank() && sizes[k] > 1 && !contains(collapsed, k));

  // A window shorter than a dim no index moves covers that dim's first elements (its start
  // is 0): the operand is sliced to them first.
  Emit e{a.b};
  Mode mode = mode_of(a.params, prim);
  Atom xs = a.ins[0];
  IntList start(x.rank(), 0), limit(x.shape.begin(), x.shape.end());
  bool partial = false;
  for (int64_t k = 0; k < x.rank(); ++k)
    if (!contains(index_map, k) && !contains(operand_batching, k) && sizes[k] != x.shape[k]) {
      if (sizes[k] < 0 || sizes[k] > x.shape[k])
        fail(prim, fmt::format("slice size {} along dim {} does not fit the dim ({})", sizes[k], k,
                               x.shape[k]));
      limit[k] = sizes[k];  // a dim no index moves: its window starts at 0
      partial = true;
    }
  if (partial) xs = e.slice(xs, start, limit);
  if (!windowed) {
    RewriteArgs whole{a.b, {xs, a.ins[1]}, a.params, a.out_types};
    return gather_whole(whole);
  }
  const ArrayType xt = e.type(xs);
  WindowedIndices w =
      window_to_batch(e, prim, xt, a.ins[1], index_map, sizes, true, mode == Mode::fill_or_drop);
  const int64_t nb = e.type(a.ins[1]).rank() - 1;
  const int64_t nw = static_cast<int64_t>(w.dims.size());
  IntList kept;  // operand dims that stay whole, in order
  for (int64_t k = 0; k < x.rank(); ++k)
    if (!contains(collapsed, k) && !contains(operand_batching, k) && !contains(w.dims, k))
      kept.push_back(k);
  IntList inner_offsets;
  for (size_t r = 0; r < kept.size(); ++r)
    inner_offsets.push_back(nb + nw + static_cast<int64_t>(r));
  IntList inner_collapsed = collapsed;
  inner_collapsed.insert(inner_collapsed.end(), w.dims.begin(), w.dims.end());
  IntList inner_sizes = sizes;
  for (int64_t k : w.dims) inner_sizes[k] = 1;
  for (int64_t k = 0; k < x.rank(); ++k)
    if (contains(kept, k)) inner_sizes[k] = xt.shape[k];
  Params p = a.params;
  p.set("dimension_numbers",
        IntListList{inner_offsets, inner_collapsed, index_map, operand_batching, dn[4]});
  p.set("slice_sizes", inner_sizes);
  RewriteArgs inner{a.b, {xs, w.idx}, p, a.out_types};
  Atom g = gather_whole(inner).at(0);

  // JAX's layout: the window and kept dims, in operand order, at offset_dims; batch elsewhere.
  IntList window_or_kept;
  for (int64_t k = 0; k < x.rank(); ++k)
    if (contains(w.dims, k) || contains(kept, k)) window_or_kept.push_back(k);
  const int64_t out_rank = nb + static_cast<int64_t>(window_or_kept.size());
  if (offset_dims.size() != window_or_kept.size())
    fail(prim, fmt::format("offset_dims has {} entries but {} operand dims are sliced",
                           offset_dims.size(), window_or_kept.size()));
  check_dim_list(prim, "offset_dims", offset_dims, "the result", out_rank);
  IntList perm(static_cast<size_t>(out_rank)), batch_pos;
  int64_t next_batch = 0, next_offset = 0;
  for (int64_t q = 0; q < out_rank; ++q) {
    if (!contains(offset_dims, q)) {
      batch_pos.push_back(q);
      perm[q] = next_batch++;
      continue;
    }
    int64_t k = window_or_kept[next_offset++];
    auto wi = std::find(w.dims.begin(), w.dims.end(), k) - w.dims.begin();
    perm[q] = contains(w.dims, k)
                  ? nb + wi
                  : nb + nw + (std::find(kept.begin(), kept.end(), k) - kept.begin());
  }
  Atom out = e.transpose(g, perm);
  if (w.ok) {
    out = fill_where_invalid(e, a.params, out, *w.ok, batch_pos);
  }
  return {out};
}

std::vector<Atom> scatter_like(RewriteArgs& a, std::string_view prim, Prim refjit_prim) {
  const ScatterOperands s = scatter_operands(a, prim);
  const ArrayType &x = s.x, &u = s.u;
  const IntListList& dn = s.dn;
  const IntList &window_dims = dn[0], &inserted = dn[1], &index_map = dn[2],
                &operand_batching = dn[3];
  // The operand dims the update windows span, in order, and each one's window size.
  IntList spanned;
  for (int64_t k = 0; k < x.rank(); ++k)
    if (!contains(inserted, k) && !contains(operand_batching, k)) spanned.push_back(k);
  if (spanned.size() != window_dims.size()) return scatter_whole(a, prim, refjit_prim);
  check_dim_list(prim, "update_window_dims", window_dims, "the updates array", u.rank());
  IntList unit;  // indexed dims with a window of one element
  for (size_t j = 0; j < spanned.size(); ++j)
    if (contains(index_map, spanned[j]) && u.shape[window_dims[j]] == 1) unit.push_back(spanned[j]);
  if (!unit.empty()) {
    UnitWindows uw = split_unit_windows(window_dims, spanned, unit);
    Shape u_shape;
    for (int64_t q = 0; q < u.rank(); ++q)
      if (!contains(uw.removed, q)) u_shape.push_back(u.shape[q]);
    IntList more_inserted = inserted;
    more_inserted.insert(more_inserted.end(), unit.begin(), unit.end());
    std::sort(more_inserted.begin(), more_inserted.end());
    Params p = a.params;
    p.set("dimension_numbers",
          IntListList{uw.remaining, more_inserted, index_map, operand_batching, dn[4]});
    Emit e{a.b};
    RewriteArgs inner{a.b, {a.ins[0], a.ins[1], e.reshape(a.ins[2], u_shape)}, p, a.out_types};
    return scatter_like(inner, prim, refjit_prim);
  }
  // A window shorter than a dim no index moves covers that dim's first elements (its start
  // is 0): the scatter runs on that slice of the operand, which is then written back.
  IntList start(static_cast<size_t>(x.rank()), 0), limit(x.shape.begin(), x.shape.end());
  bool partial = false;
  for (size_t j = 0; j < spanned.size(); ++j) {
    const int64_t k = spanned[j], size = u.shape[window_dims[j]];
    if (contains(index_map, k) || size == x.shape[k]) continue;
    if (size < 0 || size > x.shape[k])
      fail(prim, fmt::format("update window dim {} has size {}, which does not fit operand dim "
                             "{} ({})",
                             window_dims[j], size, k, x.shape[k]));
    limit[k] = size;
    partial = true;
  }
  if (partial) {
    Emit e{a.b};
    RewriteArgs part{
        a.b, {e.slice(a.ins[0], start, limit), a.ins[1], a.ins[2]}, a.params, a.out_types};
    std::vector<Atom> ins{a.ins[0], scatter_like(part, prim, refjit_prim).at(0)};
    for (int64_t k = 0; k < x.rank(); ++k) ins.push_back(e.scalar(DType::i32, 0));
    return {e.op(Prim::dynamic_update_slice, ins)};
  }
  IntList sizes(static_cast<size_t>(x.rank()), 1);
  bool windowed = false;
  for (size_t j = 0; j < spanned.size(); ++j) {
    sizes[spanned[j]] = u.shape[window_dims[j]];
    windowed = windowed || (contains(index_map, spanned[j]) && sizes[spanned[j]] > 1);
  }
  if (!windowed) return scatter_whole(a, prim, refjit_prim);

  Emit e{a.b};
  WindowedIndices w =
      window_to_batch(e, prim, x, a.ins[1], index_map, sizes, s.mode == Mode::clip, false);
  // Updates: their batch dims, the windows (as batch dims, in w.dims order), the rest.
  IntList uperm, rest_windows, inner_inserted = inserted;
  for (int64_t q = 0; q < u.rank(); ++q)
    if (!contains(window_dims, q)) uperm.push_back(q);
  const int64_t nb = static_cast<int64_t>(uperm.size());
  for (int64_t k : w.dims) {
    size_t j = static_cast<size_t>(std::find(spanned.begin(), spanned.end(), k) - spanned.begin());
    uperm.push_back(window_dims[j]);
    inner_inserted.push_back(k);
  }
  for (size_t j = 0; j < spanned.size(); ++j)
    if (!contains(w.dims, spanned[j])) uperm.push_back(window_dims[j]);
  IntList inner_windows;
  for (int64_t q = nb + static_cast<int64_t>(w.dims.size()); q < u.rank(); ++q)
    inner_windows.push_back(q);
  Params p = a.params;
  p.set("dimension_numbers",
        IntListList{inner_windows, inner_inserted, index_map, operand_batching, dn[4]});
  RewriteArgs inner{a.b, {a.ins[0], w.idx, e.transpose(a.ins[2], uperm)}, p, a.out_types};
  return scatter_whole(inner, prim, refjit_prim);
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
