// The collectives of refjit/collectives.h: one eqn each.
#include "refjit/collectives.h"

#include "refjit/trace.h"
#include "runtime/collectives.h"

namespace refjit {

Value psum(const Value& x, const std::string& axis) {
  return bind_prim1(Prim::psum, std::vector<Operand>{x}, Params{{"axis_name", axis}});
}

void psum(const Ref& r, const std::string& axis) { r.set(psum(r.get(), axis)); }

Value all_gather(const Value& x, const std::string& axis) {
  return bind_prim1(Prim::all_gather, std::vector<Operand>{x},
                    Params{{"axis_name", axis}, {"axis_size", int64_t{axis_size(axis)}}});
}

Value broadcast_from(const Value& x, const std::string& axis, int root) {
  return bind_prim1(Prim::broadcast_from, std::vector<Operand>{x},
                    Params{{"axis_name", axis}, {"root", int64_t{root}}});
}

Value axis_index(const std::string& axis) {
  return bind_prim1(Prim::axis_index, std::vector<Operand>{}, Params{{"axis_name", axis}});
}

int axis_size(const std::string& axis) { return group_of(axis)->size(); }

}  // namespace refjit
