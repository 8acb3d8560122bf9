// Internal helpers of the LAPACK kernels (lapack.cpp, factorizations.cpp): 32-bit sizes,
// row-major <-> column-major copies, NaN fills and workspace sizes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "runtime/kernels/gemm.h"  // RefjitMemRefHead

namespace refjit::kernels::lapack_support {

// LAPACK counts in 32-bit ints.
inline int lapack_int(int64_t v) {
  if (v > std::numeric_limits<int>::max()) throw std::length_error("matrix too large for LAPACK");
  return static_cast<int>(v);
}

// Row-major rows x cols `src` into column-major `dst` (its leading dimension `rows`), and back.
template <class T>
void to_column_major(const T* src, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i + j * rows] = src[i * cols + j];
}
template <class T>
void from_column_major(const T* src, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i + j * rows];
}

template <class T>
void fill_nan(T* p, int64_t count) {
  std::fill(p, p + count, std::numeric_limits<T>::quiet_NaN());
}

// A workspace size LAPACK reported (as a float in work[0]).
template <class T>
int workspace_size(T reported) {
  return std::max(1, static_cast<int>(reported));
}

// The data of a contiguous memref passed by generated code.
template <class T>
T* data_of(const RefjitMemRefHead* m) {
  return static_cast<T*>(m->aligned) + m->offset;
}

}  // namespace refjit::kernels::lapack_support
