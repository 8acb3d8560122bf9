// What the LAPACK kernels (lapack.h, factorizations.h) share: the element type codes of their
// entries and the real type of an element type, and, for their implementations, 32-bit
// sizes, row-major <-> column-major copies, NaN fills and workspace sizes.
#pragma once

#include <algorithm>
#include <complex>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "runtime/kernels/gemm.h"  // RefjitMemRefHead

namespace refjit::kernels {

// The element types of the LAPACK entries generated code calls: one code per type, passed as
// the entries' first argument (backend/lower_linalg.cpp).
enum class LapackType : int64_t { f32 = 0, f64 = 1, c64 = 2, c128 = 3 };

}  // namespace refjit::kernels

namespace refjit::kernels::lapack_support {

template <class T>
struct RealOf {
  using type = T;
};
template <class T>
struct RealOf<std::complex<T>> {
  using type = T;
};
// The real type of T (float for std::complex<float>): eigenvalues, singular values.
template <class T>
using Real = typename RealOf<T>::type;

template <class T>
inline constexpr bool is_complex_v = !std::is_same_v<T, Real<T>>;

// The complex type with T's precision (std::complex<float> for float): eig's results.
template <class T>
using Complex = std::complex<Real<T>>;

// Calls f(T{}) for the element type `code` names.
template <class F>
void with_lapack_type(int64_t code, F&& f) {
  switch (static_cast<LapackType>(code)) {
    case LapackType::f32: return f(float{});
    case LapackType::f64: return f(double{});
    case LapackType::c64: return f(std::complex<float>{});
    case LapackType::c128: return f(std::complex<double>{});
  }
  throw std::invalid_argument("LAPACK entry called with an unknown element type");
}

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
  const Real<T> nan = std::numeric_limits<Real<T>>::quiet_NaN();
  if constexpr (is_complex_v<T>)
    std::fill(p, p + count, T(nan, nan));
  else
    std::fill(p, p + count, nan);
}

// A workspace size LAPACK reported (as a number of the element type in work[0]).
template <class T>
int workspace_size(T reported) {
  return std::max(1, static_cast<int>(std::real(reported)));
}

// The data of a contiguous memref passed by generated code.
template <class T>
T* data_of(const RefjitMemRefHead* m) {
  return static_cast<T*>(m->aligned) + m->offset;
}

}  // namespace refjit::kernels::lapack_support
