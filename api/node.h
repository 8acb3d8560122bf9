// The state behind a Value or a Ref: concrete contents, or a variable of a live trace.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "refjit/array.h"
#include "refjit/ir/jaxpr.h"
#include "refjit/ref.h"
#include "refjit/value.h"

namespace refjit {

struct OperandNode {
  Type type;          // array type, or Type::ref(inner) for a ref
  bool weak = false;  // a C++ scalar: takes the dtype of the array it meets
  // Concrete array contents (trace_id == 0, !type.is_ref). Mutable only for donation
  // (take_donated moves it out of the otherwise immutable node).
  mutable Array array;
  RefBufferPtr buffer;    // concrete ref storage (trace_id == 0, type.is_ref)
  uint64_t trace_id = 0;  // nonzero: a variable of that trace
  Var var;
  // Non-empty: the array was donated to this jit function (JitOptions::donate_argnums) and
  // now belongs to that call's results; `array` is empty and every use is an error.
  mutable std::string donated_to;

  bool concrete() const { return trace_id == 0; }
};

// The library's access to the node of a Value or Ref, which the public classes keep private.
struct NodeAccess {
  static const std::shared_ptr<const OperandNode>& node(const Value& v) { return v.node_; }
  static const std::shared_ptr<const OperandNode>& node(const Ref& r) { return r.node_; }
  static Value value(std::shared_ptr<const OperandNode> n) { return Value(std::move(n)); }
  static Ref ref(std::shared_ptr<const OperandNode> n) { return Ref(std::move(n)); }
};

namespace detail {

using Node = OperandNode;
using NodePtr = std::shared_ptr<const OperandNode>;

inline const NodePtr& node_of(const Value& v) { return NodeAccess::node(v); }
inline const NodePtr& node_of(const Ref& r) { return NodeAccess::node(r); }
inline const NodePtr& node_of(const std::variant<Value, Ref>& x) {
  return std::visit([](const auto& v) -> const NodePtr& { return NodeAccess::node(v); }, x);
}

// Throws if `n`'s array was donated to a jit call (JitOptions::donate_argnums).
void check_not_donated(const Node& n);

inline NodePtr concrete_array_node(Array a, bool weak = false) {
  auto n = std::make_shared<Node>();
  n->type = Type(a.type());
  n->weak = weak;
  n->array = std::move(a);
  return n;
}

inline NodePtr concrete_ref_node(RefBufferPtr buffer) {
  auto n = std::make_shared<Node>();
  n->type = Type::ref(buffer->type(), buffer->kind());
  n->buffer = std::move(buffer);
  return n;
}

inline NodePtr traced_node(Type type, uint64_t trace_id, Var var) {
  auto n = std::make_shared<Node>();
  n->type = std::move(type);
  n->trace_id = trace_id;
  n->var = var;
  return n;
}

}  // namespace detail

}  // namespace refjit
