// refjit::Value and its operators.
#include "refjit/value.h"

#include <fmt/format.h>

#include <cstring>
#include <ostream>

#include "api/node.h"
#include "refjit/ir/error.h"
#include "refjit/ops.h"

namespace refjit {

using detail::Node;
using detail::NodePtr;

Value::Value() : Value(Array()) {}
Value::Value(Array a) : node_(detail::concrete_array_node(std::move(a))) {}
Value::Value(NodePtr node) : node_(std::move(node)) {
  if (!node_ || node_->type.is_ref)
    throw Error("internal: a Value must wrap an array node (got a ref or nothing)");
}

NodePtr Value::scalar_node(DType d, double f, int64_t i) {
  Array a(ArrayType{d, {}});
  if (is_inexact(d)) {
    a.set_from_double(0, f);
  } else if (d == DType::bool_) {
    a.set_from_double(0, i != 0 ? 1.0 : 0.0);
  } else {
    // The integer's low bits, as the dtype holds it (little-endian, like every CPU here).
    std::memcpy(a.mutable_data(), &i, static_cast<size_t>(byte_size(d)));
  }
  return detail::concrete_array_node(std::move(a), /*weak=*/true);
}

Value Value::scalar(DType dtype, double v) { return Value(Array::full(ArrayType{dtype, {}}, v)); }

const ArrayType& Value::type() const { return node_->type.array; }
bool Value::is_concrete() const { return node_->concrete(); }
bool Value::is_weak() const { return node_->weak; }

Array Value::array() const {
  if (!is_concrete())
    throw Error(
        fmt::format("array(): this {} is traced (an abstract value inside jit or "
                    "make_jaxpr) and has no contents yet; return it from the traced "
                    "function to get a concrete result",
                    type().str()));
  detail::check_not_donated(*node_);
  return node_->array;
}

double Value::item() const { return array().as_double(0); }

std::string Value::str() const {
  if (is_concrete() && !node_->donated_to.empty())
    return fmt::format("<{} donated to jit function `{}`>", type().str(), node_->donated_to);
  if (is_concrete()) return node_->array.str();
  return fmt::format("Traced<{}>", type().str());
}

std::string to_string(const Value& v) { return v.str(); }
std::ostream& operator<<(std::ostream& os, const Value& v) { return os << v.str(); }

Value Value::index_static(int64_t i) const {
  if (rank() == 0)
    throw TypeError(fmt::format("cannot index the scalar {} with [{}]", type().str(), i));
  int64_t dim = shape()[0];
  int64_t j = i < 0 ? i + dim : i;
  if (j < 0 || j >= dim)
    throw TypeError(
        fmt::format("index {} is out of bounds for dim 0 of size {} of {}", i, dim, type().str()));
  Ints start(rank(), 0), limit = shape();
  start[0] = j;
  limit[0] = j + 1;
  return squeeze(slice(*this, start, limit), {0});
}

Value Value::operator[](const Value& i) const {
  if (rank() == 0) throw TypeError(fmt::format("cannot index the scalar {}", type().str()));
  if (i.rank() != 0 || !is_int(i.dtype()))
    throw TypeError(
        fmt::format("an index must be an integer scalar, got {} (use gather for "
                    "index arrays)",
                    i.type().str()));
  // Negative indices count from the end (as in NumPy); dynamic_slice then clamps.
  // (Sequenced: the eqns appear in this order, as JAX prints them.)
  Value negative = lt(i, 0);
  Value wrapped = i + shape()[0];
  Value start = select_n(negative, {i, wrapped});
  std::vector<Value> starts{start};
  for (int d = 1; d < rank(); ++d) starts.push_back(Value::scalar(i.dtype(), 0));
  Ints sizes = shape();
  sizes[0] = 1;
  return squeeze(dynamic_slice(*this, starts, sizes), {0});
}

Value operator+(const Value& a, const Value& b) { return add(a, b); }
Value operator-(const Value& a, const Value& b) { return sub(a, b); }
Value operator*(const Value& a, const Value& b) { return mul(a, b); }
Value operator/(const Value& a, const Value& b) { return div(a, b); }
Value operator-(const Value& a) { return neg(a); }
Value& operator+=(Value& a, const Value& b) { return a = add(a, b); }
Value& operator-=(Value& a, const Value& b) { return a = sub(a, b); }
Value& operator*=(Value& a, const Value& b) { return a = mul(a, b); }
Value& operator/=(Value& a, const Value& b) { return a = div(a, b); }
Value operator<(const Value& a, const Value& b) { return lt(a, b); }
Value operator<=(const Value& a, const Value& b) { return le(a, b); }
Value operator>(const Value& a, const Value& b) { return gt(a, b); }
Value operator>=(const Value& a, const Value& b) { return ge(a, b); }
Value operator&(const Value& a, const Value& b) { return logical_and(a, b); }
Value operator|(const Value& a, const Value& b) { return logical_or(a, b); }
Value operator!(const Value& a) { return logical_not(a); }

}  // namespace refjit
