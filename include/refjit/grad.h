// What vjp's backward pass takes and returns per argument: with_refs entries (GradValue,
// DontWant, or a Ref to add the gradient into) and Grad results (a Value, GradRef or
// DidntWant). refjit/autodiff.h has the transformations.
#pragma once

#include <iosfwd>
#include <string>
#include <variant>

#include "refjit/array.h"
#include "refjit/ref.h"
#include "refjit/value.h"

namespace refjit {

// with_refs entries (one per argument of the differentiated function):
// return this argument's gradient as a value (the default for array arguments).
struct GradValue {
  bool operator==(const GradValue&) const = default;
};
// Don't compute this argument's gradient at all.
struct DontWant {
  bool operator==(const DontWant&) const = default;
};
// ...or a Ref: add this argument's gradient into the ref in place.
using GradEntry = std::variant<GradValue, DontWant, Ref>;

// Result placeholders: the gradient went into the bound ref / was not computed.
struct GradRef {
  bool operator==(const GradRef&) const = default;
};
struct DidntWant {
  bool operator==(const DidntWant&) const = default;
};
std::ostream& operator<<(std::ostream& os, const GradRef&);
std::ostream& operator<<(std::ostream& os, const DidntWant&);

// One slot of a VJP result: the gradient as a Value, or a placeholder.
class Grad {
 public:
  Grad() : v_(DidntWant{}) {}
  Grad(Value v) : v_(std::move(v)) {}  // NOLINT: a gradient value is a Grad
  Grad(GradRef r) : v_(r) {}           // NOLINT
  Grad(DidntWant d) : v_(d) {}         // NOLINT

  bool is_value() const { return std::holds_alternative<Value>(v_); }
  bool is_grad_ref() const { return std::holds_alternative<GradRef>(v_); }
  bool is_didnt_want() const { return std::holds_alternative<DidntWant>(v_); }
  // The gradient value; throws refjit::Error naming what the slot holds instead.
  const Value& value() const;
  // The gradient value's contents (value().array()).
  Array array() const { return value().array(); }
  const std::variant<Value, GradRef, DidntWant>& get() const { return v_; }
  // "0.5403023", "GradRef()" or "DidntWant()".
  std::string str() const;

 private:
  std::variant<Value, GradRef, DidntWant> v_;
};
std::ostream& operator<<(std::ostream& os, const Grad& g);

}  // namespace refjit
