// Internal: the thread-local stack of traces behind refjit/trace.h.
//
// A Trace wraps the JaxprBuilder of one function being traced. Ops applied while it is the
// innermost trace append eqns to it; operands that belong elsewhere are lifted first:
//  * a concrete scalar array becomes a Literal (as JAX inlines scalar constants);
//  * another concrete array, a concrete ref, or a variable of an enclosing trace becomes a
//    constvar of this trace ("captured"), once per distinct operand;
//  * a variable of a trace that has ended is an escaped tracer: an error.
#pragma once

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "api/execute.h"
#include "api/node.h"
#include "refjit/ir/builder.h"
#include "refjit/trace.h"
#include "runtime/interpreter.h"

namespace refjit::detail {

class Trace {
 public:
  explicit Trace(std::string name);
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  JaxprBuilder& builder() { return builder_; }

  // A fresh invar of this trace, as an Operand (a Ref for a ref type).
  Operand add_invar(const Type& type);
  // An operand as an atom of this trace (see the file comment).
  Atom lift(const Operand& x);

  // The operands captured so far, one per constvar in order.
  const std::vector<Operand>& captured() const { return captured_; }

  // Wraps a variable of this trace as a Value or Ref.
  Operand wrap(Var v) const;

  void mark_frozen(Var v) { frozen_.insert(v.id); }
  bool is_frozen(Var v) const { return frozen_.count(v.id) != 0; }

 private:
  using CaptureKey = std::tuple<const void*, uint64_t, uint32_t>;
  uint64_t id_;
  std::string name_;
  JaxprBuilder builder_;
  std::vector<Operand> captured_;
  std::map<CaptureKey, Var> capture_index_;
  std::set<uint32_t> frozen_;
};

// The innermost trace of this thread, or nullptr outside any trace.
Trace* current_trace();
// The live trace with this id, or nullptr if it has ended.
Trace* find_trace(uint64_t id);

// Pushes a trace for its lifetime.
class TraceScope {
 public:
  explicit TraceScope(Trace& t);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
};

// Operand <-> runtime value, for concrete operands (throws for traced ones, naming `what`).
RtValue to_runtime(const Operand& x, std::string_view what);
Operand from_runtime(RtValue v);
// A donated argument of jit function `fn` (JitOptions::donate_argnums): its array, moved out
// of the Value, which from now on refuses every use. Throws for a ref or a traced value.
RtValue take_donated(const Operand& x, std::string_view fn);

}  // namespace refjit::detail
