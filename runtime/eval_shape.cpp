// Eval rules of the shape and data-movement primitives. They are dtype independent: each
// computes, for every output element, the flat offset of the input element it copies.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include "ir/window_params.h"
#include "refjit/ir/error.h"
#include "runtime/dtype_dispatch.h"
#include "runtime/eval_rules.h"
#include "runtime/flat_index.h"

namespace refjit {

namespace {

std::string shape_str(const Shape& s) { return "[" + shape_text(s) + "]"; }

std::vector<RtValue> eval_broadcast_in_dim(const EvalContext&, const Eqn& e,
                                           std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  const IntList& shape = e.params.get<IntList>("shape");
  const IntList& bd = e.params.get<IntList>("broadcast_dimensions");
  if (static_cast<int>(bd.size()) != x.rank())
    eval_fail(e, fmt::format("broadcast_dimensions has {} entries for an operand of rank {}",
                             bd.size(), x.rank()));
  for (int i = 0; i < x.rank(); ++i) {
    if (bd[i] < 0 || bd[i] >= static_cast<int64_t>(shape.size()) ||
        (x.shape()[i] != 1 && x.shape()[i] != shape[bd[i]]))
      eval_fail(e, fmt::format("operand dim {} (size {}) cannot broadcast to output dim {} of {}",
                               i, x.shape()[i], bd[i], shape_str(shape)));
  }
  std::vector<int64_t> xs = row_major_strides(x.shape());
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(num_elements(shape)));
  for_each_index(shape, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (int i = 0; i < x.rank(); ++i)
      if (x.shape()[i] != 1) off += idx[bd[i]] * xs[i];
    offsets.push_back(off);
  });
  return {take_elements(x, shape, offsets)};
}

Array reshaped_copy(const Eqn& e, const Array& x, Shape shape) {
  if (num_elements(shape) != x.size())
    eval_fail(e, fmt::format("cannot reshape {} ({} elements) to {}", x.type().str(), x.size(),
                             shape_str(shape)));
  return x.clone().reshaped(std::move(shape));
}

std::vector<RtValue> eval_reshape(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  return {reshaped_copy(e, array_in(e, ins, 0), e.params.get<IntList>("new_sizes"))};
}

std::vector<RtValue> eval_squeeze(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  const IntList& dims = e.params.get<IntList>("dimensions");
  std::vector<bool> drop(x.rank(), false);
  for (int64_t d : dims) {
    int64_t dd = d < 0 ? d + x.rank() : d;
    if (dd < 0 || dd >= x.rank() || x.shape()[dd] != 1)
      eval_fail(e,
                fmt::format("dimension {} of {} is not a dimension of size 1", d, x.type().str()));
    drop[dd] = true;
  }
  Shape out;
  for (int i = 0; i < x.rank(); ++i)
    if (!drop[i]) out.push_back(x.shape()[i]);
  return {reshaped_copy(e, x, out)};
}

std::vector<RtValue> eval_expand_dims(const EvalContext&, const Eqn& e,
                                      std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  const IntList& dims = e.params.get<IntList>("dimensions");
  const int out_rank = x.rank() + static_cast<int>(dims.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t d : dims) {
    int64_t dd = d < 0 ? d + out_rank : d;
    if (dd < 0 || dd >= out_rank || inserted[dd])
      eval_fail(e, fmt::format("dimensions entry {} is out of range or repeated for an output "
                               "of rank {}",
                               d, out_rank));
    inserted[dd] = true;
  }
  Shape out;
  int k = 0;
  for (int i = 0; i < out_rank; ++i) out.push_back(inserted[i] ? 1 : x.shape()[k++]);
  return {reshaped_copy(e, x, out)};
}

std::vector<RtValue> eval_transpose(const EvalContext&, const Eqn& e,
                                    std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  const IntList& perm = e.params.get<IntList>("permutation");
  std::vector<bool> seen(x.rank(), false);
  if (static_cast<int>(perm.size()) != x.rank())
    eval_fail(e, fmt::format("permutation has {} entries for rank {}", perm.size(), x.rank()));
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.rank() || seen[p])
      eval_fail(e, fmt::format("permutation ({}) is not a permutation of 0..{}",
                               fmt::join(perm, ", "), x.rank() - 1));
    seen[p] = true;
    out.push_back(x.shape()[p]);
  }
  std::vector<int64_t> xs = row_major_strides(x.shape());
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(x.size()));
  for_each_index(out, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t i = 0; i < perm.size(); ++i) off += idx[i] * xs[perm[i]];
    offsets.push_back(off);
  });
  return {take_elements(x, out, offsets)};
}

// `parts` joined along `dim` (same dtype, same shape but along dim).
Array concatenated(const Eqn& e, std::span<const Array* const> parts, int64_t dim) {
  const Array& x0 = *parts[0];
  if (dim < 0 || dim >= x0.rank())
    eval_fail(e, fmt::format("dimension {} is out of range for rank {}", dim, x0.rank()));
  Shape out = x0.shape();
  out[dim] = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const Array& x = *parts[k];
    Shape a = x.shape(), b = x0.shape();
    if (x.rank() == x0.rank()) a[dim] = b[dim] = 0;
    if (x.dtype() != x0.dtype() || a != b)
      eval_fail(e, fmt::format("operand {} has type {}, incompatible with operand 0's {} along "
                               "dimension {}",
                               k, x.type().str(), x0.type().str(), dim));
    out[dim] += x.shape()[dim];
  }
  Array result(ArrayType{x0.dtype(), out});
  std::vector<int64_t> os = row_major_strides(out);
  int64_t base = 0;
  for (const Array* part : parts) {
    const Array& x = *part;
    std::vector<int64_t> offsets;
    offsets.reserve(static_cast<size_t>(x.size()));
    for_each_index(x.shape(), [&](const std::vector<int64_t>& idx) {
      int64_t off = base * os[dim];
      for (int i = 0; i < x.rank(); ++i) off += idx[i] * os[i];
      offsets.push_back(off);
    });
    put_elements(result, offsets, x);
    base += x.shape()[dim];
  }
  return result;
}

std::vector<RtValue> eval_concatenate(const EvalContext&, const Eqn& e,
                                      std::span<const RtValue> ins) {
  expect_operands(e, ins, 1, true);
  std::vector<const Array*> parts;
  for (size_t k = 0; k < ins.size(); ++k) parts.push_back(&array_in(e, ins, k));
  return {concatenated(e, parts, e.params.get<int64_t>("dimension"))};
}

std::vector<RtValue> eval_pad(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& x = array_in(e, ins, 0);
  const Array& v = array_in(e, ins, 1);
  if (v.rank() != 0 || v.dtype() != x.dtype())
    eval_fail(e, fmt::format("padding_value must be a {} scalar, got {}", short_name(x.dtype()),
                             v.type().str()));
  const IntListList& cfg = e.params.get<IntListList>("padding_config");
  if (static_cast<int>(cfg.size()) != x.rank())
    eval_fail(e, fmt::format("padding_config has {} entries for rank {}", cfg.size(), x.rank()));
  Shape out;
  for (int i = 0; i < x.rank(); ++i) {
    if (cfg[i].size() != 3 || cfg[i][2] < 0)
      eval_fail(e, fmt::format("padding_config entry {} must be (lo, hi, interior>=0)", i));
    int64_t s = x.shape()[i];
    int64_t n = cfg[i][0] + cfg[i][1] + s + std::max<int64_t>(s - 1, 0) * cfg[i][2];
    if (n < 0) eval_fail(e, fmt::format("padding_config entry {} gives a negative size {}", i, n));
    out.push_back(n);
  }
  // Fill with the padding value, then write each input element that lands inside.
  std::vector<int64_t> zeros(static_cast<size_t>(num_elements(out)), 0);
  Array result = take_elements(v, out, zeros);
  std::vector<int64_t> os = row_major_strides(out);
  std::vector<int64_t> dst, src;
  int64_t flat = 0;
  for_each_index(x.shape(), [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    bool inside = true;
    for (int i = 0; i < x.rank() && inside; ++i) {
      int64_t p = cfg[i][0] + idx[i] * (cfg[i][2] + 1);
      inside = p >= 0 && p < out[i];
      off += p * os[i];
    }
    if (inside) {
      dst.push_back(off);
      src.push_back(flat);
    }
    ++flat;
  });
  put_elements(result, dst, take_elements(x, {static_cast<int64_t>(src.size())}, src));
  return {result};
}

// The static window (start, limit, strides) of x.
Array window_of(const Eqn& e, const Array& x, const IntList& start, const IntList& limit,
                const IntList& strides) {
  if (static_cast<int>(start.size()) != x.rank() || static_cast<int>(limit.size()) != x.rank() ||
      static_cast<int>(strides.size()) != x.rank())
    eval_fail(e, fmt::format("start_indices/limit_indices/strides need {} entries each", x.rank()));
  Shape out;
  for (int i = 0; i < x.rank(); ++i) {
    if (start[i] < 0 || limit[i] > x.shape()[i] || start[i] > limit[i] || strides[i] < 1)
      eval_fail(e, fmt::format("slice {}:{}:{} is out of range for dim {} of size {}", start[i],
                               limit[i], strides[i], i, x.shape()[i]));
    out.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  }
  std::vector<int64_t> xs = row_major_strides(x.shape());
  std::vector<int64_t> offsets;
  for_each_index(out, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (int i = 0; i < x.rank(); ++i) off += (start[i] + idx[i] * strides[i]) * xs[i];
    offsets.push_back(off);
  });
  return take_elements(x, out, offsets);
}

std::vector<RtValue> eval_slice(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  return {window_of(e, x, e.params.get<IntList>("start_indices"),
                    e.params.get<IntList>("limit_indices"),
                    e.params.get_or<IntList>("strides", IntList(x.rank(), 1)))};
}

// Each operand's window, concatenated as concatenate does.
std::vector<RtValue> eval_concat_windows(const EvalContext&, const Eqn& e,
                                         std::span<const RtValue> ins) {
  expect_operands(e, ins, 1, true);
  const auto& starts = e.params.get<IntListList>("start_indices");
  const auto& limits = e.params.get<IntListList>("limit_indices");
  const auto& strides = e.params.get<IntListList>("strides");
  if (starts.size() != ins.size() || limits.size() != ins.size() || strides.size() != ins.size())
    eval_fail(e, "start_indices, limit_indices and strides need one entry per operand");
  std::vector<Array> windows;
  for (size_t k = 0; k < ins.size(); ++k)
    windows.push_back(window_of(e, array_in(e, ins, k), starts[k], limits[k], strides[k]));
  std::vector<const Array*> parts;
  for (const Array& w : windows) parts.push_back(&w);
  return {concatenated(e, parts, e.params.get<int64_t>("dimension"))};
}

std::vector<RtValue> eval_dynamic_slice(const EvalContext&, const Eqn& e,
                                        std::span<const RtValue> ins) {
  const Array& x = array_in(e, ins, 0);
  const IntList& sizes = e.params.get<IntList>("slice_sizes");
  if (static_cast<int>(sizes.size()) != x.rank())
    eval_fail(e, fmt::format("slice_sizes has {} entries for rank {}", sizes.size(), x.rank()));
  std::vector<int64_t> starts = clamped_starts(e, ins, 1, x.shape(), sizes);
  return {take_elements(x, sizes, window_offsets(x.shape(), starts, sizes))};
}

std::vector<RtValue> eval_dynamic_update_slice(const EvalContext&, const Eqn& e,
                                               std::span<const RtValue> ins) {
  const Array& x = array_in(e, ins, 0);
  const Array& u = array_in(e, ins, 1);
  if (u.dtype() != x.dtype() || u.rank() != x.rank())
    eval_fail(e, fmt::format("update {} does not match operand {} in dtype and rank",
                             u.type().str(), x.type().str()));
  std::vector<int64_t> starts = clamped_starts(e, ins, 2, x.shape(), u.shape());
  Array out = x.clone();
  put_elements(out, window_offsets(x.shape(), starts, u.shape()), u);
  return {out};
}

// Each window as dynamic_slice takes it, the windows concatenated as concatenate does, then
// written into x as dynamic_update_slice writes its update.
std::vector<RtValue> eval_move_windows(const EvalContext&, const Eqn& e,
                                       std::span<const RtValue> ins) {
  const MoveWindowsParams p = MoveWindowsParams::of(e);
  expect_operands(e, ins, MoveWindowsParams::operand_count(p.rank, p.num_windows()));
  std::vector<Array> windows;
  for (size_t k = 0; k < p.num_windows(); ++k) {
    const size_t s = p.source_operand(k);
    const Array& src = array_in(e, ins, s);
    const std::vector<int64_t> starts =
        clamped_starts(e, ins.first(s + 1 + p.rank), s + 1, src.shape(), p.sizes(k));
    windows.push_back(
        take_elements(src, p.sizes(k), window_offsets(src.shape(), starts, p.sizes(k))));
  }
  std::vector<const Array*> parts;
  for (const Array& w : windows) parts.push_back(&w);
  const Array update = concatenated(e, parts, p.dimension);
  const Array& x = array_in(e, ins, 0);
  const std::vector<int64_t> starts =
      clamped_starts(e, ins.first(1 + p.rank), 1, x.shape(), update.shape());
  Array out = x.clone();
  put_elements(out, window_offsets(x.shape(), starts, update.shape()), update);
  return {out};
}

std::vector<RtValue> eval_iota(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 0);
  DType d = e.params.get<DType>("dtype");
  const IntList& shape = e.params.get<IntList>("shape");
  int64_t dim = e.params.get<int64_t>("dimension");
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size()))
    eval_fail(e, fmt::format("dimension {} is out of range for shape {}", dim, shape_str(shape)));
  Array out(ArrayType{d, shape});
  int64_t flat = 0;
  for_each_index(shape, [&](const std::vector<int64_t>& idx) {
    out.set_from_double(flat++, static_cast<double>(idx[dim]));
  });
  return {out};
}

// gather/scatter: the output (or update) shape s[:axis] + k + s[axis+dims:], and for each of
// its elements the flat offset into x, or -1 when the index is out of range and `clamp` is
// false. An index names an element of the row-major flattening of dims [axis, axis+dims).
struct AxisIndexing {
  Shape shape;
  std::vector<int64_t> offsets;
};

AxisIndexing axis_indexing(const Eqn& e, const Array& x, const Array& idx, bool clamp) {
  const int64_t axis = e.params.get<int64_t>("axis");
  const int64_t dims = indexed_dims(e.params);
  if (axis < 0 || dims < 1 || axis + dims > x.rank())
    eval_fail(e,
              fmt::format("axis {} and dims {} do not fit operand {}", axis, dims, x.type().str()));
  if (!is_int(idx.dtype()))
    eval_fail(e, fmt::format("indices must be int32 or int64, got {}", idx.type().str()));
  AxisIndexing r;
  r.shape.assign(x.shape().begin(), x.shape().begin() + axis);
  r.shape.insert(r.shape.end(), idx.shape().begin(), idx.shape().end());
  r.shape.insert(r.shape.end(), x.shape().begin() + axis + dims, x.shape().end());
  const std::vector<int64_t> xs = row_major_strides(x.shape());
  const std::vector<int64_t> is = row_major_strides(idx.shape());
  int64_t n = 1;
  for (int64_t d = axis; d < axis + dims; ++d) n *= x.shape()[d];
  const int64_t last = axis + dims - 1;  // the indexed block's stride is its last dim's
  const int k = idx.rank();
  for_each_index(r.shape, [&](const std::vector<int64_t>& o) {
    int64_t iflat = 0;
    for (int j = 0; j < k; ++j) iflat += o[axis + j] * is[j];
    int64_t i = idx.as_int(iflat);
    if (clamp) {
      if (n == 0) eval_fail(e, fmt::format("cannot gather from axis {} of size 0", axis));
      i = clamp_index(i, 0, n - 1);
    } else if (i < 0 || i >= n) {
      r.offsets.push_back(-1);
      return;
    }
    int64_t off = i * xs[last];
    for (int64_t d = 0; d < axis; ++d) off += o[d] * xs[d];
    for (int64_t d = axis + dims; d < x.rank(); ++d) off += o[d - dims + k] * xs[d];
    r.offsets.push_back(off);
  });
  return r;
}

// sort: every lane along `dimension` is ordered by the first num_keys operands
// (lexicographically, stable); the other operands follow the same permutation. Floats use
// JAX's total order: -0.0 equals 0.0, NaNs are equal to each other and after everything.
bool sort_less(const Array& k, int64_t a, int64_t b) {
  if (is_float(k.dtype())) {
    double x = k.as_double(a), y = k.as_double(b);
    return (!std::isnan(x) && std::isnan(y)) || x < y;
  }
  return k.as_int(a) < k.as_int(b);
}

std::vector<RtValue> eval_sort(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1, true);
  const Array& x0 = array_in(e, ins, 0);
  const int64_t dim = e.params.get<int64_t>("dimension");
  const size_t num_keys = static_cast<size_t>(e.params.get<int64_t>("num_keys"));
  if (dim < 0 || dim >= x0.rank()) eval_fail(e, fmt::format("dimension {} is out of range", dim));
  std::vector<const Array*> xs;
  for (size_t k = 0; k < ins.size(); ++k) {
    xs.push_back(&array_in(e, ins, k));
    if (xs.back()->shape() != x0.shape()) eval_fail(e, "operands differ in shape");
  }
  if (num_keys < 1 || num_keys > xs.size()) eval_fail(e, "num_keys is out of range");
  const Shape& shape = x0.shape();
  const int64_t n = shape[dim];
  const int64_t stride = row_major_strides(shape)[dim];
  Shape lanes = shape;
  lanes[dim] = 1;
  std::vector<int64_t> src;  // source offset of each result element
  src.resize(static_cast<size_t>(x0.size()));
  std::vector<int64_t> order(static_cast<size_t>(n));
  const std::vector<int64_t> strides = row_major_strides(shape);
  for_each_index(lanes, [&](const std::vector<int64_t>& o) {
    int64_t base = 0;
    for (size_t d = 0; d < o.size(); ++d) base += o[d] * strides[d];
    for (int64_t i = 0; i < n; ++i) order[i] = base + i * stride;
    // Stable: equal keys keep their order (offsets grow along the lane).
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      for (size_t k = 0; k < num_keys; ++k) {
        if (sort_less(*xs[k], a, b)) return true;
        if (sort_less(*xs[k], b, a)) return false;
      }
      return a < b;
    });
    for (int64_t i = 0; i < n; ++i) src[base + i * stride] = order[i];
  });
  std::vector<RtValue> out;
  for (const Array* x : xs) out.push_back(take_elements(*x, shape, src));
  return out;
}

std::vector<RtValue> eval_gather(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& x = array_in(e, ins, 0);
  AxisIndexing g = axis_indexing(e, x, array_in(e, ins, 1), /*clamp=*/true);
  return {take_elements(x, g.shape, g.offsets)};
}

// How a scatter combines an update with the element it lands on.
enum class ScatterCombine { set, add, mul, min, max };

// dst[offsets[i]] = combine(dst[offsets[i]], src[i]), in order (duplicates compose).
void combine_elements(Array& dst, std::span<const int64_t> offsets, const Array& src,
                      ScatterCombine how) {
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsNumber<T>) {
      auto d = dst.mutable_values<T>();
      auto s = src.values<T>();
      for (size_t i = 0; i < offsets.size(); ++i) {
        T& o = d[offsets[i]];
        T u = s[i];
        if constexpr (kIsFloat<T>)
          if ((how == ScatterCombine::min || how == ScatterCombine::max) &&
              (std::isnan(o) || std::isnan(u))) {
            o = std::numeric_limits<T>::quiet_NaN();
            continue;
          }
        if (how == ScatterCombine::mul) {
          if constexpr (kIsInt<T>)  // wraps
            o = static_cast<T>(static_cast<uint64_t>(o) * static_cast<uint64_t>(u));
          else
            o = o * u;
        } else if (how == ScatterCombine::min)
          o = u < o ? u : o;
        else
          o = u > o ? u : o;
      }
    } else if constexpr (kIsComplex<T>) {
      if (how != ScatterCombine::mul)
        throw Error(fmt::format("a scatter that compares needs a real numeric dtype, not {}",
                                long_name(dst.dtype())));
      auto d = dst.mutable_values<T>();
      auto s = src.values<T>();
      for (size_t i = 0; i < offsets.size(); ++i) d[offsets[i]] = d[offsets[i]] * s[i];
    } else {
      throw Error(
          fmt::format("a scatter that multiplies or compares needs a real numeric "
                      "dtype, not {}",
                      long_name(dst.dtype())));
    }
  });
}

// x with u's elements combined in at the indices idx names along the eqn's axis.
Array scatter_into(const Eqn& e, const Array& x, const Array& idx, const Array& u,
                   ScatterCombine how) {
  AxisIndexing s = axis_indexing(e, x, idx, /*clamp=*/false);
  if (u.dtype() != x.dtype() || u.shape() != s.shape)
    eval_fail(e, fmt::format("updates have type {}, expected {}[{}]", u.type().str(),
                             short_name(x.dtype()), shape_text(s.shape)));
  // Out-of-range updates are dropped (XLA).
  std::vector<int64_t> dst, src;
  for (size_t i = 0; i < s.offsets.size(); ++i) {
    if (s.offsets[i] < 0) continue;
    dst.push_back(s.offsets[i]);
    src.push_back(static_cast<int64_t>(i));
  }
  Array kept = take_elements(u, {static_cast<int64_t>(src.size())}, src);
  Array out = x.clone();
  if (how == ScatterCombine::add)
    add_elements(out, dst, kept);
  else if (how == ScatterCombine::set)
    put_elements(out, dst, kept);
  else
    combine_elements(out, dst, kept, how);
  return out;
}

template <ScatterCombine kHow>
std::vector<RtValue> eval_scatter(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 3);
  return {scatter_into(e, array_in(e, ins, 0), array_in(e, ins, 1), array_in(e, ins, 2), kHow)};
}

std::vector<RtValue> eval_gather_run(const EvalContext&, const Eqn& e,
                                     std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& x = array_in(e, ins, 0);
  const Array idx = run_indices(e, array_in(e, ins, 1), e.params.get<int64_t>("length"));
  AxisIndexing g = axis_indexing(e, x, idx, /*clamp=*/true);
  return {take_elements(x, g.shape, g.offsets)};
}

std::vector<RtValue> eval_scatter_run(const EvalContext&, const Eqn& e,
                                      std::span<const RtValue> ins) {
  expect_operands(e, ins, 3);
  const Array& x = array_in(e, ins, 0);
  const Array& u = array_in(e, ins, 2);
  const int64_t axis = e.params.get<int64_t>("axis");
  if (axis < 0 || axis >= u.rank())
    eval_fail(e, fmt::format("axis {} is out of range for the updates {}", axis, u.type().str()));
  const std::string& combine = e.params.get<std::string>("combine");
  const std::optional<Prim> scatter = scatter_of_combine(combine);
  if (!scatter)
    eval_fail(e, fmt::format("combine '{}' is none of set, add, mul, min, max", combine));
  const ScatterCombine how = *scatter == Prim::scatter       ? ScatterCombine::set
                             : *scatter == Prim::scatter_add ? ScatterCombine::add
                             : *scatter == Prim::scatter_mul ? ScatterCombine::mul
                             : *scatter == Prim::scatter_min ? ScatterCombine::min
                                                             : ScatterCombine::max;
  const Array idx = run_indices(e, array_in(e, ins, 1), u.shape()[static_cast<size_t>(axis)]);
  return {scatter_into(e, x, idx, u, how)};
}

}  // namespace

void register_shape_eval_rules(EvalRuleTable& t) {
  t.set(Prim::broadcast_in_dim, &eval_broadcast_in_dim);
  t.set(Prim::reshape, &eval_reshape);
  t.set(Prim::squeeze, &eval_squeeze);
  t.set(Prim::expand_dims, &eval_expand_dims);
  t.set(Prim::transpose, &eval_transpose);
  t.set(Prim::concatenate, &eval_concatenate);
  t.set(Prim::pad, &eval_pad);
  t.set(Prim::slice, &eval_slice);
  t.set(Prim::concat_windows, &eval_concat_windows);
  t.set(Prim::dynamic_slice, &eval_dynamic_slice);
  t.set(Prim::dynamic_update_slice, &eval_dynamic_update_slice);
  t.set(Prim::move_windows, &eval_move_windows);
  t.set(Prim::iota, &eval_iota);
  t.set(Prim::gather, &eval_gather);
  t.set(Prim::gather_run, &eval_gather_run);
  t.set(Prim::sort, &eval_sort);
  t.set(Prim::scatter, &eval_scatter<ScatterCombine::set>);
  t.set(Prim::scatter_add, &eval_scatter<ScatterCombine::add>);
  t.set(Prim::scatter_mul, &eval_scatter<ScatterCombine::mul>);
  t.set(Prim::scatter_min, &eval_scatter<ScatterCombine::min>);
  t.set(Prim::scatter_max, &eval_scatter<ScatterCombine::max>);
  t.set(Prim::scatter_run, &eval_scatter_run);
}

}  // namespace refjit
