// JVP rules of the ref primitives (REFS.md 2.1): a ref's tangent is a ref, and every ref op
// on a differentiated ref is mirrored on its tangent ref.
#include <fmt/format.h>

#include "passes/ad/jvp_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

using Tangents = std::vector<MaybeAtom>;

// Dynamic indexer operands of a ref op, starting at operand `first`.
std::vector<Atom> dyn_operands(const JvpArgs& a, size_t first) {
  return std::vector<Atom>(a.primals.begin() + static_cast<long>(first), a.primals.end());
}

[[noreturn]] void throw_e1(const JvpCtx& c) {
  throw RefError("E1",
                 fmt::format("{}: a differentiated value is written into {}, which is not "
                             "differentiated (it has no tangent, so the value's derivative "
                             "would be lost). Wrap the value in stop_gradient if it should not "
                             "be differentiated, or make the ref a differentiated argument.",
                             c.where, c.ref_name));
}

// A no_grad_no_remat ref never has a tangent, and writing a differentiated value into it is
// allowed (the tangent is dropped, as JAX does).
bool no_grad(const JvpCtx& c, const Atom& ref) {
  return c.p.type_of(ref).ref_kind == RefKind::no_grad_no_remat;
}

}  // namespace

void register_ref_jvp_rules(JvpRuleTable& t) {
  t.set(Prim::new_ref, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          const ArrayType ty = c.p.array_type_of(a.primals[0]);
          if (!is_inexact(ty.dtype) || ref_kind_param(a.eqn.params) == RefKind::no_grad_no_remat)
            return {std::nullopt};
          return {Atom(c.t.new_ref(instantiate(c.t, a.tangents[0], ty)))};
        }});
  t.set(
      Prim::get, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
        if (!a.tangents[0]) return {std::nullopt};
        return {c.t.get(*a.tangents[0], a.eqn.params.get<Indexer>("indexer"), dyn_operands(a, 1))};
      }});
  t.set(Prim::swap, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          const MaybeAtom& r_dot = a.tangents[0];
          const MaybeAtom& x_dot = a.tangents[1];
          if (!r_dot) {
            if (x_dot && !no_grad(c, a.primals[0])) throw_e1(c);
            return {std::nullopt};
          }
          // Writing a constant writes zeros into the tangent ref.
          Atom x = instantiate(c.t, x_dot, c.p.array_type_of(a.primals[1]));
          return {c.t.swap(*r_dot, x, a.eqn.params.get<Indexer>("indexer"), dyn_operands(a, 2))};
        }});
  t.set(Prim::addupdate, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          const MaybeAtom& r_dot = a.tangents[0];
          const MaybeAtom& x_dot = a.tangents[1];
          if (!r_dot) {
            if (x_dot && !no_grad(c, a.primals[0])) throw_e1(c);
            return {};
          }
          // Adding a constant leaves the tangent unchanged: nothing to emit.
          if (x_dot)
            c.t.addupdate(*r_dot, *x_dot, a.eqn.params.get<Indexer>("indexer"), dyn_operands(a, 2));
          return {};
        }});
  t.set(Prim::freeze, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          if (!a.tangents[0]) return {std::nullopt};
          return {c.t.freeze(*a.tangents[0])};
        }});
}

}  // namespace refjit
