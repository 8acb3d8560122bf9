// Names of the values of a buffer-assigned program, as print_jaxpr gives them (a, b, ...,
// counted on through nested jaxprs), so `--emit=buffers` reads next to `--emit=jaxpr`.
// Internal to the buffer-assignment pass and its printer.
#pragma once

#include <string>
#include <vector>

#include "passes/buffers/buffer_assignment.h"

namespace refjit {

class BufferNames {
 public:
  // Plans are numbered as assign_buffers numbers them: the executed jaxprs (top level, scan
  // and jit bodies, cond branches, custom_vjp_call's call_jaxpr) in pre-order.
  explicit BufferNames(const Jaxpr& top);
  // The name of `v` in plan `plan` ("_" for a dropped binder).
  std::string use(int plan, Var v) const;
  std::string binder(int plan, Var v) const;  // name:type
  std::string atom(int plan, const Atom& a) const;
  // "e = mul c d" (params left out; `typed`: "e:f32[4] = mul c d"); "b[...] += c" style ref
  // eqns print as their primitive: "addupdate b c".
  std::string eqn(int plan, const Eqn& e, bool typed = false) const;

 private:
  void name_jaxpr(int plan, const Jaxpr& j);  // plan -1: only advance the counter
  void bind(int plan, const Jaxpr& j, Var v);

  std::vector<const Jaxpr*> jaxpr_;              // by plan
  std::vector<std::vector<std::string>> names_;  // by plan, by var id
  uint64_t counter_ = 0;
};

}  // namespace refjit
