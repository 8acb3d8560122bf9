// Emitter: appends eqns to a JaxprBuilder with a small vocabulary of helpers, used by every
// pass that generates code (jvp and transpose rules). It can tag each emitted eqn as primal
// or tangent work, which linearize uses to split the JVP into its primal and linear parts.
#pragma once

#include <optional>
#include <unordered_set>
#include <vector>

#include "refjit/ir/builder.h"

namespace refjit {

class Emitter {
 public:
  // `tags`, when given, gets one entry per emitted eqn: `tangent` for this emitter.
  Emitter(JaxprBuilder& b, std::vector<bool>* tags = nullptr, bool tangent = false)
      : b_(&b), tags_(tags), tangent_(tangent) {}

  // Tracks which vars depend on tangent inputs: a tangent emitter adds the outputs of each
  // eqn reading a var in `linear` (and of every new_ref, a tangent ref) to it.
  void track_linear(std::unordered_set<uint32_t>* linear) { linear_ = linear; }

  JaxprBuilder& builder() const { return *b_; }
  Type type_of(const Atom& a) const { return b_->type_of(a); }
  ArrayType array_type_of(const Atom& a) const { return b_->type_of(a).array; }

  // Generic emission (types inferred by the primitive's type rule).
  std::vector<Var> emit(Prim p, std::vector<Atom> ins, Params params = {});
  Atom emit1(Prim p, std::vector<Atom> ins, Params params = {});
  // Copies `eqn` of `src` with new operands; outputs are fresh vars of its outputs' types in
  // `src` (no inference).
  std::vector<Var> copy_eqn(const Jaxpr& src, const Eqn& eqn, std::vector<Atom> ins);

  // Appends `callee`'s eqns bound to `args` (constvars then invars); returns its outvars.
  std::vector<Atom> inline_jaxpr(const Jaxpr& callee, const std::vector<Atom>& args);

  // Constants.
  Atom scalar(DType d, double v) const { return Literal::of(d, v); }
  Atom full(const ArrayType& t, double v);
  Atom zeros(const ArrayType& t) { return full(t, 0.0); }

  // Elementwise (binary ops accept a scalar on either side).
  Atom neg(Atom x) { return emit1(Prim::neg, {x}); }
  Atom add(Atom x, Atom y) { return emit1(Prim::add_any, {x, y}); }
  Atom sub(Atom x, Atom y) { return emit1(Prim::sub, {x, y}); }
  Atom mul(Atom x, Atom y) { return emit1(Prim::mul, {x, y}); }
  Atom div(Atom x, Atom y) { return emit1(Prim::div, {x, y}); }
  Atom unary(Prim p, Atom x) { return emit1(p, {x}); }
  Atom convert(Atom x, DType d);
  Atom select(Atom pred, std::vector<Atom> cases);

  // Shapes.
  Atom broadcast_to(Atom x, const Shape& shape);  // scalar or equal-shape x
  // x's dim k becomes dim dims[k] of `shape` (x itself when it already has that shape).
  Atom broadcast_in_dim(Atom x, const Shape& shape, const IntList& dims);
  Atom reshape(Atom x, const Shape& shape);  // x itself when it already has that shape
  Atom iota(const Shape& shape, int64_t dimension, DType dtype = DType::i32);
  Atom reduce_sum(Atom x, std::vector<int64_t> axes);
  // Sums `x` down to `shape` (the inverse of broadcasting a scalar): used by transposes.
  Atom sum_to(Atom x, const Shape& shape);

  // Refs.
  Var new_ref(Atom init);
  Atom get(Atom ref, const Indexer& idx, const std::vector<Atom>& dyn);
  Atom swap(Atom ref, Atom val, const Indexer& idx, const std::vector<Atom>& dyn);
  void addupdate(Atom ref, Atom val, const Indexer& idx, const std::vector<Atom>& dyn);
  Atom freeze(Atom ref);

 private:
  void tag(size_t n_before);
  JaxprBuilder* b_;
  std::vector<bool>* tags_;
  bool tangent_;
  std::unordered_set<uint32_t>* linear_ = nullptr;
};

// A tangent or cotangent that may be a symbolic zero (nullopt).
using MaybeAtom = std::optional<Atom>;

}  // namespace refjit
