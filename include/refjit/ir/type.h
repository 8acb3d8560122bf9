// Static types of IR values: arrays (f32[3,4]) and refs to arrays (Ref{f32[3,4]}).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "refjit/ir/dtype.h"

namespace refjit {

using Shape = std::vector<int64_t>;

int64_t num_elements(const Shape& shape);
// "3,4" (no brackets); "" for a scalar.
std::string shape_text(const Shape& shape);

struct ArrayType {
  DType dtype = DType::f32;
  Shape shape;

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t num_elements() const { return refjit::num_elements(shape); }
  int64_t byte_size() const { return num_elements() * refjit::byte_size(dtype); }
  bool is_scalar() const { return shape.empty(); }
  bool operator==(const ArrayType&) const = default;

  std::string str() const;       // f32[3,4]
  std::string long_str() const;  // float32[3,4], for error messages
};

// JAX's ref kinds (`new_ref(x, kind=...)`): how a ref's effects behave under autodiff.
enum class RefKind : uint8_t {
  plain,             // a differentiable ref: it has a tangent when its contents do
  no_grad_no_remat,  // never differentiated: writes of differentiated values drop their
                     // tangents, reads are constants; its effects run once (never replayed)
};
std::string_view ref_kind_name(RefKind k);  // "plain", "no_grad_no_remat"
// JAX's spelling: "no_grad_no_remat"; "None" (and "plain") are the plain kind.
std::optional<RefKind> parse_ref_kind(std::string_view name);

// A value's type: an array, or a ref (mutable buffer) holding an array.
struct Type {
  ArrayType array;
  bool is_ref = false;
  RefKind ref_kind = RefKind::plain;  // for a ref

  Type() = default;
  Type(ArrayType a) : array(std::move(a)) {}  // NOLINT: arrays convert implicitly
  static Type ref(ArrayType inner, RefKind kind = RefKind::plain) {
    Type t(std::move(inner));
    t.is_ref = true;
    t.ref_kind = kind;
    return t;
  }

  DType dtype() const { return array.dtype; }
  const Shape& shape() const { return array.shape; }
  // The kind is not part of type equality (as in JAX): a plain and a no_grad_no_remat ref of
  // the same array type can be passed where either is expected; the kind travels with the ref.
  bool operator==(const Type& o) const { return array == o.array && is_ref == o.is_ref; }

  // f32[3], Ref{f32[3]}, or Ref{f32[3], no_grad_no_remat} (JAX prints no kind in types).
  std::string str() const;
  std::string long_str() const;  // float32[3] or Ref{float32[3]}
};

}  // namespace refjit
