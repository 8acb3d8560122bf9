// Helpers of the decomposition tests (decompositions_test.cpp, factorizations_test.cpp): f64
// test matrices and comparisons.
#pragma once

#include <gtest/gtest.h>

#include "refjit/refjit.h"

namespace refjit::matrix_test {

// A full-rank matrix (sin of a linear ramp would have rank 2): sin(scale * k^2 + 0.3) over the
// elements k.
inline Value ramp(const Ints& shape, double scale) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Value k = convert(arange(n), DType::f64);
  return reshape(sin(k * k * scale + 0.3), shape);
}

inline Value identity(int64_t n) {
  Value i = arange(n);
  return convert(eq(broadcast_in_dim(i, {n, n}, {0}), broadcast_in_dim(i, {n, n}, {1})),
                 DType::f64);
}

inline void expect_near(const Value& got, const Value& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape());
  Array g = got.array(), w = want.array();
  for (int64_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g.as_double(i), w.as_double(i), tol) << "element " << i;
}

inline void expect_same_bits(const Value& a, const Value& b) { EXPECT_EQ(a.array(), b.array()); }

}  // namespace refjit::matrix_test
