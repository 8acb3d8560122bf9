// Row-major index arithmetic and dtype-independent element copies, shared by the data
// movement rules (shape family, gather/scatter) and by ref indexing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "refjit/array.h"

namespace refjit {

// Element strides of a row-major array of `shape`.
std::vector<int64_t> row_major_strides(const Shape& shape);

// Calls f(index) for every multi-index of `shape`, in row-major order.
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  int64_t n = num_elements(shape);
  if (n == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(static_cast<const std::vector<int64_t>&>(idx));
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// out[i] = src[offsets[i]]: an array of type {src.dtype(), shape} built from flat offsets.
Array take_elements(const Array& src, Shape shape, std::span<const int64_t> offsets);
// dst[offsets[i]] = src[i] for every i, in order (so a later duplicate wins).
void put_elements(Array& dst, std::span<const int64_t> offsets, const Array& src);
// dst[offsets[i]] += src[i] for every i (duplicates accumulate). dst/src have one number dtype.
void add_elements(Array& dst, std::span<const int64_t> offsets, const Array& src);

// Flat offsets, in `window` row-major order, of the window at `starts` in an array of `shape`.
std::vector<int64_t> window_offsets(const Shape& shape, const std::vector<int64_t>& starts,
                                    const Shape& window);

// Clamps v into [lo, hi] (hi < lo gives lo), as XLA clamps dynamic starts.
inline int64_t clamp_index(int64_t v, int64_t lo, int64_t hi) {
  if (hi < lo) return lo;
  return v < lo ? lo : (v > hi ? hi : v);
}

}  // namespace refjit
