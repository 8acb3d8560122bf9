// refjit::Value: an array value, either concrete (holds an Array) or traced (a variable of
// the jaxpr being traced). Every op on Values either runs eagerly (outside any trace) or
// appends an eqn to the innermost trace, exactly as JAX's tracers do.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "refjit/array.h"
#include "refjit/ir/dtype.h"
#include "refjit/ir/type.h"

namespace refjit {

class ValueAt;       // refjit/ref.h
struct OperandNode;  // the state behind a Value or a Ref, defined inside the library

// A C++ arithmetic type usable as a refjit scalar.
template <class T>
concept Scalar = std::is_arithmetic_v<T>;

class Value {
 public:
  // f32[] holding 0.
  Value();
  // A weakly typed scalar: combined with an array it takes the array's dtype, as Python
  // scalars do in JAX (x * 2 keeps x's dtype). On its own it has the dtype of
  // scalar_dtype<T>() (refjit/ir/dtype.h).
  template <Scalar T>
  Value(T x)  // NOLINT: scalars convert implicitly, as in JAX
      : Value(scalar_node(scalar_dtype<T>(), static_cast<double>(x), static_cast<int64_t>(x))) {}
  Value(Array a);  // NOLINT: arrays convert implicitly

  // A strongly typed scalar of the given dtype.
  static Value scalar(DType dtype, double v);

  const ArrayType& type() const;
  const Shape& shape() const { return type().shape; }
  DType dtype() const { return type().dtype; }
  int rank() const { return type().rank(); }
  int64_t size() const { return type().num_elements(); }

  bool is_concrete() const;
  bool is_traced() const { return !is_concrete(); }
  // True for a Value made from a C++ scalar (weak type).
  bool is_weak() const;
  // The concrete contents; throws refjit::Error for a traced value.
  Array array() const;
  // Element 0 of a concrete value, converted to double (handy for scalars).
  double item() const;

  // x[i]: indexes the leading dim. A static int is a slice + squeeze; a Value index
  // (an integer scalar, possibly traced) wraps negatives and clamps, via dynamic_slice.
  template <Scalar T>
  requires std::is_integral_v<T> Value operator[](T i) const {
    return index_static(static_cast<int64_t>(i));
  }
  Value operator[](const Value& i) const;
  // x.at(idx...), JAX's x.at[idx]: .get() reads, .set(v) and .add(v) return an updated copy,
  // with the indexers refs take (ints, integer Values and index arrays, slice(start, stop),
  // ds(start, size), all, ellipsis; refjit/ref.h):
  //   Value y = x.at(i, slice(0, 2)).get();     // x[i, 0:2]
  //   Value z = x.at(idx).add(g);                // x.at[idx].add(g)
  template <class... I>
  ValueAt at(const I&... idx) const;

  // "[1.0, 2.0]" for a concrete value, "Traced<f32[2]>" for a traced one.
  std::string str() const;

 private:
  friend struct NodeAccess;  // the library's way to the node (api/node.h)
  explicit Value(std::shared_ptr<const OperandNode> node);
  static std::shared_ptr<const OperandNode> scalar_node(DType d, double f, int64_t i);
  Value index_static(int64_t i) const;
  std::shared_ptr<const OperandNode> node_;
};

std::string to_string(const Value& v);
std::ostream& operator<<(std::ostream& os, const Value& v);

// Arithmetic, elementwise. Both operands have the same shape, or one is a scalar.
Value operator+(const Value& a, const Value& b);
Value operator-(const Value& a, const Value& b);
Value operator*(const Value& a, const Value& b);
Value operator/(const Value& a, const Value& b);
Value operator-(const Value& a);
Value& operator+=(Value& a, const Value& b);
Value& operator-=(Value& a, const Value& b);
Value& operator*=(Value& a, const Value& b);
Value& operator/=(Value& a, const Value& b);
// Comparisons give bool Values. (== and != are the named eq/ne in ops.h, so that Value
// equality is never mistaken for a C++ bool.)
Value operator<(const Value& a, const Value& b);
Value operator<=(const Value& a, const Value& b);
Value operator>(const Value& a, const Value& b);
Value operator>=(const Value& a, const Value& b);
// Logical for bool, bitwise for ints.
Value operator&(const Value& a, const Value& b);
Value operator|(const Value& a, const Value& b);
Value operator!(const Value& a);

}  // namespace refjit
