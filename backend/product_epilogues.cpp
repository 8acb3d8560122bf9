#include "backend/product_epilogues.h"

#include <algorithm>
#include <optional>

#include "backend/decision_bodies.h"
#include "backend/fusion.h"
#include "refjit/ir/use_def.h"

namespace refjit {

namespace {

// Whether every read of `p` by eqn `c` is an operand of an elementwise eqn computed at the
// product's own index: `c` itself, or, for a fused eqn, the body eqns reading p's invar.
bool reads_at_product_index(const Jaxpr& j, const Eqn& c, Var p) {
  auto elementwise = [](const Jaxpr& in, const Eqn& e) {
    return has_elementwise_lowering(e.prim) && e.prim != Prim::broadcast_in_dim &&
           !is_view_eqn(in, e);
  };
  if (c.prim != Prim::fused) return elementwise(j, c) && fusible(j, c);
  const Jaxpr& body = *c.params.get<JaxprPtr>("jaxpr");
  if (reduction_root(body, body.eqns.back())) return false;
  for (size_t k = 0; k < c.ins.size(); ++k) {
    if (!is_var(c.ins[k]) || as_var(c.ins[k]) != p) continue;
    for (const Eqn& e : body.eqns)
      for (const Atom& a : e.ins)
        if (is_var(a) && as_var(a) == body.invars[k] && !elementwise(body, e)) return false;
  }
  return true;
}

// The consumer eqn of product eqn `i` when the two may become one product_epilogue eqn
// (product_epilogues.h), under `buffers` (the assignment's plan of `j`).
std::optional<size_t> epilogue_of(const Jaxpr& j, const JaxprBuffers& buffers,
                                  const UseDef& use_def, std::vector<std::vector<int>>& writes,
                                  size_t i) {
  const Eqn& dot = j.eqns[i];
  if ((dot.prim != Prim::dot_general && dot.prim != Prim::im2col_dot) || dot.outs.size() != 1)
    return std::nullopt;
  const Var p = dot.outs[0];
  const Type pt = j.type_of(p);
  const std::vector<int32_t> readers = use_def.readers(p);
  // Read by eqns only (not returned), by one consumer.
  if (pt.is_ref || !is_float(pt.array.dtype) || readers.empty() || use_def.is_output(p))
    return std::nullopt;
  const size_t root = static_cast<size_t>(readers.front());
  const Eqn& consumer = j.eqns[root];
  if (root <= i || consumer.outs.size() != 1 || j.type_of(consumer.outs[0]) != pt ||
      !reads_at_product_index(j, consumer, p))
    return std::nullopt;
  for (int32_t r : readers)
    if (static_cast<size_t>(r) != root) return std::nullopt;
  std::vector<int> consumer_reads;  // buffers of the values the consumer reads
  for (const Atom& a : consumer.ins)
    if (is_var(a)) consumer_reads.push_back(buffer_of(buffers, a));
  // The other eqns between the product and the consumer keep their place, after the consumer
  // now: it must not read their results, and they must not write what it reads.
  if (writes.empty()) writes = written_buffers(j, buffers);
  for (size_t k = i + 1; k < root; ++k) {
    const Eqn& other = j.eqns[k];
    if (prim_info(other.prim).has_subjaxprs && other.prim != Prim::fused) return std::nullopt;
    for (Var o : other.outs)
      for (int32_t r : use_def.readers(o))
        if (static_cast<size_t>(r) == root) return std::nullopt;
    for (int w : writes[k])
      if (w >= 0 &&
          std::find(consumer_reads.begin(), consumer_reads.end(), w) != consumer_reads.end())
        return std::nullopt;
  }
  return root;
}

}  // namespace

Jaxpr fuse_product_epilogues(const Jaxpr& program, const BufferAssignment* assignment) {
  return rewrite_every_jaxpr(program, assignment, [](const Jaxpr& j, const JaxprBuffers* plan) {
    if (!plan || plan->eqns.size() != j.eqns.size()) return j;
    const UseDef use_def(j);
    std::vector<std::vector<int>> writes;
    std::vector<bool> taken(j.eqns.size(), false);  // consumers computed with their product
    Jaxpr out = j;
    out.eqns.clear();
    for (size_t i = 0; i < j.eqns.size(); ++i) {
      if (taken[i]) continue;
      const std::optional<size_t> consumer = epilogue_of(j, *plan, use_def, writes, i);
      if (consumer && !taken[*consumer]) {
        taken[*consumer] = true;
        out.eqns.push_back(eqn_with_body(Prim::product_epilogue, j, {i, *consumer}));
      } else {
        out.eqns.push_back(j.eqns[i]);
      }
    }
    return out;
  });
}

Jaxpr fuse_product_epilogues(const Jaxpr& program, const BufferOptions& options) {
  const BufferAssignment provisional = assign_buffers(program, options);
  return fuse_product_epilogues(program, &provisional);
}

}  // namespace refjit
