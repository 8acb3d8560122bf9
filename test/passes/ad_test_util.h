// Test helpers for the autodiff passes: parsing, running on the interpreter, random inputs,
// finite differences and inner products.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "refjit/array.h"
#include "refjit/ir/builder.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"
#include "runtime/interpreter.h"

namespace refjit::testing {

inline Jaxpr parse(const std::string& text) { return parse_jaxpr(text, "<test>"); }

inline Array arr(const RtValue& v) { return std::get<Array>(v); }

inline Array f64s(std::vector<double> v, Shape shape) {
  return Array::from_vector<double>(v, std::move(shape));
}
inline Array f64(double v) { return Array::scalar<double>(v); }
inline Array f32(float v) { return Array::scalar<float>(v); }
inline Array i32(int32_t v) { return Array::scalar<int32_t>(v); }

inline RefBufferPtr ref_of(const Array& a) { return std::make_shared<RefBuffer>(a); }

inline std::vector<RtValue> run(const Jaxpr& j, std::vector<RtValue> args) {
  return interpret(j, args);
}

// Uniform values in [lo, hi) of the given float type (both parts of a complex one).
inline Array random_array(std::mt19937& rng, const ArrayType& t, double lo = -1.0,
                          double hi = 1.0) {
  std::uniform_real_distribution<double> d(lo, hi);
  Array a(t);
  for (int64_t i = 0; i < a.size(); ++i) {
    const double re = d(rng);
    a.set_from_complex(i, {re, is_complex(t.dtype) ? d(rng) : 0.0});
  }
  return a;
}

// The same from a fresh generator seeded with `seed`.
inline Array random_array(const ArrayType& t, uint32_t seed) {
  std::mt19937 rng(seed);
  return random_array(rng, t);
}

// The real part of sum(a * b): the pairing a transpose preserves (JAX's, unconjugated for
// complex numbers).
inline double dot(const Array& a, const Array& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double s = 0;
  for (int64_t i = 0; i < a.size(); ++i) s += (a.as_complex(i) * b.as_complex(i)).real();
  return s;
}

// a + s * b, elementwise (a float or complex array).
inline Array axpy(const Array& a, double s, const Array& b) {
  Array r = a.clone();
  for (int64_t i = 0; i < a.size(); ++i)
    r.set_from_complex(i, a.as_complex(i) + s * b.as_complex(i));
  return r;
}

inline std::vector<double> values(const Array& a) {
  std::vector<double> r;
  for (int64_t i = 0; i < a.size(); ++i) r.push_back(a.as_double(i));
  return r;
}

// How many eqns of primitive `name` the printed jaxpr has (whole-word match).
inline int count_prim(const std::string& text, const std::string& name) {
  int n = 0;
  for (size_t p = text.find(name); p != std::string::npos; p = text.find(name, p + 1)) {
    bool left = p == 0 || !(isalnum(text[p - 1]) || text[p - 1] == '_');
    size_t e = p + name.size();
    bool right = e >= text.size() || !(isalnum(text[e]) || text[e] == '_' || text[e] == '-');
    n += left && right;
  }
  return n;
}

}  // namespace refjit::testing
