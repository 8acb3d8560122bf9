#include "compiler/backend/fusion.h"

#include <algorithm>

#include "passes/simplify/unit_run.h"
#include "refjit/ir/use_def.h"

namespace refjit {

// A static slice, or a pad without interior padding: each element of its result is one
// element of its operand (or the padding value), at an index computed from its own.
bool is_view(const Jaxpr& j, const Eqn& e) {
  if (e.outs.size() != 1 || e.ins.empty() || !is_var(e.ins[0]) || j.type_of(e.outs[0]).is_ref ||
      j.type_of(as_var(e.ins[0])).is_ref)
    return false;
  if (e.prim == Prim::slice) return e.ins.size() == 1;
  if (e.prim != Prim::pad || e.ins.size() != 2 || j.type_of(e.ins[1]).array.rank() != 0 ||
      j.type_of(e.ins[1]).is_ref)
    return false;
  for (const IntList& c : e.params.get<IntListList>("padding_config"))
    if (c.size() != 3 || c[2] != 0) return false;
  return true;
}

// Elementwise with operands of the result's shape or rank 0, a broadcast_in_dim (each
// element of its result is one load of its operand), or a view.
bool fusible(const Jaxpr& j, const Eqn& e) {
  if (is_view(j, e)) return true;
  if (e.prim == Prim::broadcast_in_dim)
    return e.ins.size() == 1 && e.outs.size() == 1 && !j.type_of(e.outs[0]).is_ref &&
           (!is_var(e.ins[0]) || !j.type_of(as_var(e.ins[0])).is_ref);
  if (e.outs.size() != 1 || e.ins.empty() || !has_elementwise_lowering(e.prim)) return false;
  const Type rt = j.type_of(e.outs[0]);
  if (rt.is_ref) return false;
  for (const Atom& a : e.ins) {
    Type t = is_var(a) ? j.type_of(as_var(a)) : Type(std::get<Literal>(a).type());
    if (t.is_ref) return false;
    if (t.array.rank() != 0 && t.array.shape != rt.array.shape) return false;
  }
  return true;
}

// A reduction whose operand a group may compute element by element inside its loops, so
// that `sum(f(x))` keeps no array of f(x).
bool reduction_root(const Jaxpr& j, const Eqn& e) {
  const bool reduction =
      e.prim == Prim::reduce_sum || e.prim == Prim::reduce_max || e.prim == Prim::reduce_min;
  return reduction && e.ins.size() == 1 && e.outs.size() == 1 && is_var(e.ins[0]) &&
         !j.type_of(as_var(e.ins[0])).is_ref;
}

int buffer_of(const JaxprBuffers& p, const Atom& a) {
  return is_var(a) && as_var(a).id < p.buffer_of_var.size() ? p.buffer_of_var[as_var(a).id] : -1;
}

namespace {

// Cheap enough to compute once per reader rather than store and read back.
bool duplicable(Prim p) {
  switch (p) {
    case Prim::add:
    case Prim::sub:
    case Prim::mul:
    case Prim::neg:
    case Prim::max:
    case Prim::min:
    case Prim::broadcast_in_dim:
    case Prim::convert_element_type: return true;
    default: return false;
  }
}

// Per eqn, the buffers whose contents it (over)writes under the assignment `p`.
std::vector<std::vector<int>> written_buffers(const Jaxpr& j, const JaxprBuffers& p) {
  std::vector<std::vector<int>> w(j.eqns.size());
  auto buf = [&](const Atom& a) { return buffer_of(p, a); };
  for (size_t i = 0; i < j.eqns.size() && i < p.eqns.size(); ++i) {
    const Eqn& e = j.eqns[i];
    EqnAction act = p.eqns[i].action;
    if (act == EqnAction::view || act == EqnAction::move || act == EqnAction::no_op) continue;
    for (Var v : e.outs)
      if (int b = buf(v); b >= 0) w[i].push_back(b);
    // A call body may update the operands handed over to it (random program 6334: an
    // elementwise chain fused past a call read an operand the call had overwritten).
    for (int b : p.eqns[i].handed_over) w[i].push_back(b);
    // Ref writes: swap / addupdate, and whatever a sub-jaxpr does with a ref operand.
    for (const Atom& a : e.ins)
      if (is_var(a) && j.type_of(as_var(a)).is_ref)
        if (int b = buf(a); b >= 0) w[i].push_back(b);
  }
  return w;
}

}  // namespace

FusionPlan plan_fusion(const Jaxpr& j, const JaxprBuffers* buffers) {
  const size_t n = j.eqns.size();
  FusionPlan plan;
  plan.group_of.assign(n, -1);
  // consumers[var id] = indices of the eqns reading it (with repeats); returned vars are
  // never fused away.
  std::vector<std::vector<size_t>> consumers(j.vars.size());
  std::vector<bool> returned(j.vars.size(), false);
  for (size_t i = 0; i < n; ++i)
    for (const Atom& a : j.eqns[i].ins)
      if (is_var(a)) consumers[as_var(a).id].push_back(i);
  for (const Atom& a : j.outvars)
    if (is_var(a)) returned[as_var(a).id] = true;

  std::vector<std::vector<int>> writes;
  if (buffers) writes = written_buffers(j, *buffers);
  // Whether an eqn between i and the group's root, outside the group, overwrites the buffer
  // of one of eqn i's operands (then i must run at its own position).
  auto operands_clobbered = [&](size_t i, int32_t group, size_t root) {
    if (!buffers) return false;
    for (const Atom& a : j.eqns[i].ins) {
      if (!is_var(a) || as_var(a).id >= buffers->buffer_of_var.size()) continue;
      int b = buffers->buffer_of_var[as_var(a).id];
      if (b < 0) continue;
      for (size_t k = i + 1; k < root; ++k)
        if (plan.group_of[k] != group &&
            std::find(writes[k].begin(), writes[k].end(), b) != writes[k].end())
          return true;
    }
    return false;
  };

  std::vector<bool> from_swap(j.vars.size(), false);
  for (const Eqn& e : j.eqns)
    if (e.prim == Prim::swap)
      for (Var v : e.outs) from_swap[v.id] = true;
  auto swapped_out = [&](const Atom& a) { return is_var(a) && from_swap[as_var(a).id]; };

  // Walk backwards so every consumer is placed before its producers.
  std::vector<std::vector<size_t>> groups;  // in reverse program order while building
  std::vector<Shape> group_shape;
  std::vector<std::vector<int32_t>> dup_groups(n);  // the groups a duplicated eqn is in
  for (size_t i = n; i-- > 0;) {
    const Eqn& e = j.eqns[i];
    if (reduction_root(j, e)) {  // roots a group of its operand's shape
      plan.group_of[i] = static_cast<int32_t>(groups.size());
      groups.push_back({i});
      group_shape.push_back(j.type_of(as_var(e.ins[0])).array.shape);
      continue;
    }
    if (!fusible(j, e)) continue;
    Var out = e.outs[0];
    const Shape& shape = j.type_of(out).array.shape;
    // The groups reading the result (a duplicated reader counts each group it is in), if
    // every reader is in a group of this shape that may compute it.
    std::vector<int32_t> readers;
    bool all = !returned[out.id] && !consumers[out.id].empty();
    // A view is evaluated at the index its reader asks for, so it may have another shape
    // when only views read it; anything else is evaluated at the root's index and may feed
    // no view (`pad(exp(x))` stores exp(x)).
    const bool view = is_view(j, e);
    bool read_by_view = false, read_by_other = false;
    for (size_t k : consumers[out.id])
      (is_view(j, j.eqns[k]) ? read_by_view : read_by_other) = true;
    if (read_by_view && !view) all = false;
    for (size_t k : consumers[out.id]) {
      std::vector<int32_t> of_reader;
      if (plan.group_of[k] >= 0)
        of_reader = {plan.group_of[k]};
      else if (plan.group_of[k] == FusionPlan::kDuplicated)
        of_reader = dup_groups[k];
      else
        all = false;
      for (int32_t g : of_reader)
        if (std::find(readers.begin(), readers.end(), g) == readers.end()) readers.push_back(g);
    }
    for (int32_t g : readers)
      all = all && (group_shape[g] == shape || (view && !read_by_other)) &&
            !operands_clobbered(i, g, groups[g].front());
    int32_t target = all && readers.size() == 1 ? readers[0] : -1;
    // A view roots no group: one alone is a copy, which its own rule (or the plans that read
    // slices in place: move_windows, concat_windows) does as well. Nor does one join that
    // reads the value a swap took out of a ref: a cotangent shift (below) reads those slices
    // from the ref's window and never stores the value.
    if (view && (target < 0 || swapped_out(e.ins[0]))) continue;
    if (all && readers.size() > 1 && duplicable(e.prim)) {
      for (int32_t g : readers) groups[g].push_back(i);
      plan.group_of[i] = FusionPlan::kDuplicated;
      dup_groups[i] = readers;
      continue;
    }
    if (target < 0) {
      target = static_cast<int32_t>(groups.size());
      groups.emplace_back();
      group_shape.push_back(shape);
    }
    plan.group_of[i] = target;
    groups[target].push_back(i);
  }

  // A reduction reads its operand's elements after it has stored some results: its result
  // must not live in the buffer of a member's operand.
  if (buffers)
    for (std::vector<size_t>& g : groups) {
      const Eqn& root = j.eqns[g.front()];
      if (g.size() < 2 || !reduction_root(j, root)) continue;
      const int out = buffer_of(*buffers, root.outs[0]);
      bool shared = false;
      for (size_t k = 1; k < g.size(); ++k)
        for (const Atom& a : j.eqns[g[k]].ins)
          shared = shared || (out >= 0 && buffer_of(*buffers, a) == out);
      if (!shared) continue;
      // (A duplicate is then stored by its own rule too; other groups still compute it.)
      for (size_t k = 1; k < g.size(); ++k) plan.group_of[g[k]] = -1;
      g.resize(1);
    }

  // The root's store of an element may come before a view's load of another element of the
  // same buffer: a group whose root writes a buffer a view reads keeps no views (they are
  // stored by their own rules, and the group reads them back).
  if (buffers)
    for (std::vector<size_t>& g : groups) {
      if (g.size() < 2) continue;
      const int out = buffer_of(*buffers, j.eqns[g.front()].outs[0]);
      bool clash = false;
      for (size_t k = 1; k < g.size(); ++k)
        clash = clash || (out >= 0 && is_view(j, j.eqns[g[k]]) &&
                          buffer_of(*buffers, j.eqns[g[k]].ins[0]) == out);
      if (!clash) continue;
      std::vector<size_t> kept{g.front()};
      for (size_t k = 1; k < g.size(); ++k) {
        if (is_view(j, j.eqns[g[k]]))
          plan.group_of[g[k]] = -1;
        else
          kept.push_back(g[k]);
      }
      g = std::move(kept);
    }

  // Keep groups of two or more, renumbered in program order of their roots.
  std::vector<int32_t> renumber(groups.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    int32_t g = plan.group_of[i];
    if (g < 0) continue;
    if (groups[g].size() < 2) {
      plan.group_of[i] = -1;
      continue;
    }
    if (groups[g].front() == i) {  // the root (built first, largest index)
      renumber[g] = static_cast<int32_t>(plan.groups.size());
      plan.groups.emplace_back(groups[g].rbegin(), groups[g].rend());
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (plan.group_of[i] >= 0) plan.group_of[i] = renumber[plan.group_of[i]];
  return plan;
}

}  // namespace refjit

namespace refjit {

bool contiguous_window(const Indexer& idx, const Shape& ref_shape, int64_t& size) {
  const size_t rank = ref_shape.size();
  if (idx.dims.size() > rank) return false;
  // Per dim: the number of elements taken, and whether the dim is taken whole.
  std::vector<int64_t> taken(rank);
  std::vector<bool> whole(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (d >= idx.dims.size()) {
      taken[d] = ref_shape[d];
      whole[d] = true;
      continue;
    }
    const IndexerDim& id = idx.dims[d];
    if (id.kind == IndexerDim::Kind::index_array) return false;
    if (id.kind == IndexerDim::Kind::index) {
      taken[d] = 1;
    } else {
      if (id.stride != 1 || id.size < 0 || id.size > ref_shape[d]) return false;
      taken[d] = id.size;
    }
    whole[d] = taken[d] == ref_shape[d];
  }
  size_t k = 0;
  while (k < rank && taken[k] == 1) ++k;
  for (size_t d = k + 1; d < rank; ++d)
    if (!whole[d]) return false;
  size = 1;
  for (int64_t t : taken) size *= t;
  return true;
}

CotangentShiftPlan plan_cotangent_shifts(const Jaxpr& j, const JaxprBuffers* buffers,
                                         const FusionPlan& fusion) {
  const size_t n = j.eqns.size();
  CotangentShiftPlan plan;
  plan.folded_into.assign(n, -1);
  plan.shift_of.assign(n, -1);
  plan.side_of.assign(n, -1);
  if (!buffers || buffers->eqns.size() != n) return plan;
  const JaxprBuffers& p = *buffers;
  auto buf = [&](const Atom& a) { return buffer_of(p, a); };
  const UseDef use_def(j);
  const std::vector<std::vector<int>> writes = written_buffers(j, p);
  // An eqn lowered on its own (the copies the plan lists for these eqns are their own reads).
  auto plain = [&](size_t i) { return fusion.lowered_alone(i) && plan.folded_into[i] < 0; };
  // The single reader of `v`, if `v` is read once (and not returned).
  auto only_reader = [&](Var v) -> int32_t {
    return use_def.read_once(v) ? use_def.readers(v).front() : -1;
  };
  auto is_zero = [](const Literal& l) { return l.equals(0.0); };

  for (size_t s = 0; s < n; ++s) {
    const Eqn& sw = j.eqns[s];
    if (sw.prim != Prim::swap || sw.ins.size() < 2 || sw.outs.size() != 1 || !plain(s)) continue;
    if (!is_var(sw.ins[0])) continue;
    const Var ref = as_var(sw.ins[0]);
    const Type rt = j.type_of(ref);
    if (!rt.is_ref || rt.array.dtype == DType::bool_) continue;
    const int ref_buf = buf(ref);
    if (ref_buf < 0) continue;
    const ParamValue* pv = sw.params.find("indexer");
    const Indexer whole;
    const Indexer& idx1 = pv && std::get_if<Indexer>(pv) ? *std::get_if<Indexer>(pv) : whole;
    int64_t m = 0;
    if (!contiguous_window(idx1, rt.array.shape, m)) continue;
    // The written value: zeros.
    CotangentShift cs;
    cs.swap = static_cast<int32_t>(s);
    if (const Literal* lit = std::get_if<Literal>(&sw.ins[1])) {
      if (!is_zero(*lit)) continue;
      cs.zero = *lit;
    } else {
      const auto z = static_cast<int32_t>(use_def.def_index(as_var(sw.ins[1])));
      if (z < 0 || j.eqns[z].prim != Prim::broadcast_in_dim || j.eqns[z].ins.size() != 1) continue;
      const Literal* l = std::get_if<Literal>(&j.eqns[z].ins[0]);
      if (!l || !is_zero(*l)) continue;
      cs.zero = *l;
      if (only_reader(as_var(sw.ins[1])) == cs.swap && plain(static_cast<size_t>(z))) cs.zeros = z;
    }
    if (cs.zero.dtype != rt.array.dtype) continue;
    // The old value v: read by one addupdate of R, directly or through a static slice of a
    // run of v, and otherwise only by side slices (static slices of runs of v).
    const Var v = sw.outs[0];
    const std::vector<int32_t> v_readers = use_def.readers(v);
    if (v_readers.empty() || use_def.is_output(v)) continue;
    const Shape& vs = j.type_of(v).array.shape;
    // Whether eqn q is a static slice of one run of v's last dim: its offset and length.
    auto run_slice = [&](int32_t q, int64_t& offset, int64_t& length) {
      const Eqn& sl = j.eqns[q];
      if (sl.prim != Prim::slice || sl.outs.size() != 1 || vs.empty() || !plain(q)) return false;
      const IntList& start = sl.params.get<IntList>("start_indices");
      const IntList& limit = sl.params.get<IntList>("limit_indices");
      IntList strides = sl.params.get_or<IntList>("strides", IntList(vs.size(), 1));
      if (start.size() != vs.size() || limit.size() != vs.size() || strides.size() != vs.size())
        return false;
      for (size_t d = 0; d < vs.size(); ++d) {
        if (strides[d] != 1) return false;
        if (d + 1 < vs.size() && vs[d] != 1) return false;  // a run of the last dim only
      }
      offset = start.back();
      length = limit.back() - start.back();
      return true;
    };
    // Whether eqn q is `R[w2] += x` with a contiguous window of `length` elements.
    auto adds_to_ref = [&](int32_t q, Var x, int64_t length) {
      if (q < 0 || !plain(static_cast<size_t>(q))) return false;
      const Eqn& add = j.eqns[q];
      if (add.prim != Prim::addupdate || add.ins.size() < 2 || !is_var(add.ins[0]) ||
          as_var(add.ins[0]) != ref || !is_var(add.ins[1]) || as_var(add.ins[1]) != x)
        return false;
      const ParamValue* pv2 = add.params.find("indexer");
      const Indexer& idx2 = pv2 && std::get_if<Indexer>(pv2) ? *std::get_if<Indexer>(pv2) : whole;
      int64_t l2 = 0;
      return contiguous_window(idx2, rt.array.shape, l2) && l2 == length;
    };
    // The chain from v to the addupdate: [static slice of a run] [reshape] addupdate.
    auto is_plain_reshape = [&](int32_t q) {
      if (q < 0 || !plain(static_cast<size_t>(q))) return false;
      const Eqn& e = j.eqns[q];
      const ParamValue* d = e.params.find("dimensions");
      return e.prim == Prim::reshape && e.outs.size() == 1 &&
             (!d || std::holds_alternative<NoneParam>(*d));
    };
    int32_t r = -1;
    int32_t main_reader = -1;
    for (int32_t q : v_readers) {
      int64_t off = 0, len = m;
      int32_t slice = -1, reshape = -1, step = q;
      Var x = v;
      if (run_slice(q, off, len)) {
        slice = q;
        x = j.eqns[q].outs[0];
        step = only_reader(x);
      } else {
        off = 0;
        len = m;
      }
      if (is_plain_reshape(step)) {
        reshape = step;
        x = j.eqns[step].outs[0];
        step = only_reader(x);
      }
      if (!adds_to_ref(step, x, len)) continue;
      r = step;
      cs.slice = slice;
      cs.reshape = reshape;
      cs.offset = off;
      cs.length = len;
      main_reader = q;
      break;
    }
    if (r < 0) continue;
    bool sides_ok = true;
    for (int32_t q : v_readers) {
      if (q == main_reader) continue;
      int64_t off = 0, len = 0;
      // Read from R's window at its own position: R must still hold v there.
      if (!run_slice(q, off, len) || q <= cs.swap || q >= r ||
          std::count(v_readers.begin(), v_readers.end(), q) != 1) {
        sides_ok = false;
        break;
      }
      cs.side_slices.push_back(q);
    }
    if (!sides_ok) continue;
    // Nothing in between touches R, or overwrites the swap's start operands.
    bool ok = true;
    for (size_t k = s + 1; k < static_cast<size_t>(r) && ok; ++k) {
      if (static_cast<int32_t>(k) == cs.slice || static_cast<int32_t>(k) == cs.reshape) continue;
      if (std::count(cs.side_slices.begin(), cs.side_slices.end(), static_cast<int32_t>(k)))
        continue;
      for (const Atom& a : j.eqns[k].ins)
        if (buf(a) == ref_buf) ok = false;
      for (int b : writes[k]) {
        if (b == ref_buf) ok = false;
        for (size_t q = 2; q < sw.ins.size(); ++q)
          if (b == buf(sw.ins[q])) ok = false;
      }
    }
    if (!ok) continue;
    plan.shift_of[r] = static_cast<int32_t>(plan.shifts.size());
    plan.folded_into[s] = r;
    if (cs.slice >= 0) plan.folded_into[cs.slice] = r;
    if (cs.reshape >= 0) plan.folded_into[cs.reshape] = r;
    if (cs.zeros >= 0) plan.folded_into[cs.zeros] = r;
    for (int32_t q : cs.side_slices) plan.side_of[q] = static_cast<int32_t>(plan.shifts.size());
    plan.shifts.push_back(cs);
  }
  return plan;
}

namespace {

// Entry i of a per-eqn plan table, or -1 where the plan has none (a plan made without a buffer
// assignment may leave its tables empty).
int32_t entry(const std::vector<int32_t>& table, size_t i) {
  return i < table.size() ? table[i] : -1;
}

}  // namespace

bool folded_into_nothing(const LoweringDecisions& d, size_t i) {
  for (const std::vector<int32_t>* t :
       {&d.shifts.folded_into, &d.shifts.side_of, &d.shifts.shift_of, &d.epilogues.root_of_dot,
        &d.epilogues.dot_of_root})
    if (entry(*t, i) >= 0) return false;
  return true;
}

bool lowered_by_itself(const LoweringDecisions& d, size_t i) {
  return folded_into_nothing(d, i) && d.fusion.lowered_alone(i);
}

namespace {

EpiloguePlan plan_epilogues(const Jaxpr& j, const JaxprBuffers* buffers,
                            const LoweringDecisions& d) {
  const size_t n = j.eqns.size();
  EpiloguePlan plan;
  plan.root_of_dot.assign(n, -1);
  plan.dot_of_root.assign(n, -1);
  if (!buffers || buffers->eqns.size() != n) return plan;
  const FusionPlan& fusion = d.fusion;
  const UseDef use_def(j);
  auto buf = [&](const Atom& a) { return buffer_of(*buffers, a); };
  std::vector<std::vector<int>> writes;
  for (size_t i = 0; i < n; ++i) {
    const Eqn& dot = j.eqns[i];
    if ((dot.prim != Prim::dot_general && dot.prim != Prim::im2col_dot) || dot.outs.size() != 1 ||
        !lowered_by_itself(d, i))
      continue;
    const Var p = dot.outs[0];
    const Type pt = j.type_of(p);
    const std::vector<int32_t> readers = use_def.readers(p);
    // Read by eqns only (not returned), by one consumer.
    if (pt.is_ref || !is_float(pt.array.dtype) || readers.empty() || use_def.is_output(p)) continue;
    const size_t first = static_cast<size_t>(readers.front());
    const int32_t group = fusion.group_of[first];
    size_t root = first;
    if (group >= 0)
      root = fusion.groups[group].back();
    else if (group != -1 || !lowered_by_itself(d, first) || !fusible(j, j.eqns[first]))
      continue;
    const Eqn& last = j.eqns[root];
    if (reduction_root(j, last) || last.outs.size() != 1 || j.type_of(last.outs[0]) != pt ||
        root <= i)
      continue;
    bool ok = true;
    for (int32_t r : readers) {
      const Eqn& reader = j.eqns[r];
      ok &= (group >= 0 ? fusion.group_of[r] == group : static_cast<size_t>(r) == root) &&
            has_elementwise_lowering(reader.prim) && reader.prim != Prim::broadcast_in_dim &&
            !is_view(j, reader);
    }
    const std::vector<size_t> members =
        group >= 0 ? fusion.groups[group] : std::vector<size_t>{root};
    auto is_member = [&](size_t k) {
      return std::find(members.begin(), members.end(), k) != members.end();
    };
    const int out = buf(last.outs[0]);
    if (!ok || out < 0 || out == buf(dot.ins[0]) || out == buf(dot.ins[1])) continue;
    std::vector<int> group_reads;  // buffers of the values the consumer reads
    for (size_t k : members)
      for (const Atom& a : j.eqns[k].ins) {
        if (!is_var(a)) continue;
        if (buf(a) == out && j.type_of(a).array.shape != pt.array.shape) ok = false;
        group_reads.push_back(buf(a));
      }
    // The other eqns between the product and the root keep their place, after the consumer
    // now: it must not read their results or what they write, and they must not read or write
    // the buffer it writes. (Eqns with bodies are not looked into: they stop it.)
    if (writes.empty()) writes = written_buffers(j, *buffers);
    for (size_t k = i + 1; k < root && ok; ++k) {
      if (is_member(k)) continue;
      const Eqn& other = j.eqns[k];
      if (prim_info(other.prim).has_subjaxprs) ok = false;
      for (Var o : other.outs)
        for (int32_t r : use_def.readers(o)) ok &= !is_member(static_cast<size_t>(r));
      for (int w : writes[k])
        ok &= w != out && std::find(group_reads.begin(), group_reads.end(), w) == group_reads.end();
      for (const Atom& a : other.ins) ok &= buf(a) != out;
    }
    if (!ok) continue;
    plan.root_of_dot[i] = static_cast<int32_t>(root);
    plan.dot_of_root[root] = static_cast<int32_t>(i);
  }
  return plan;
}

}  // namespace

std::vector<size_t> LoweringDecisions::epilogue_members(size_t root) const {
  if (fusion.group_of.at(root) >= 0) return fusion.groups[fusion.group_of[root]];
  return {root};
}

LoweringDecisions decide_lowering(const Jaxpr& jaxpr, const JaxprBuffers* buffers) {
  LoweringDecisions d;
  d.fusion = plan_fusion(jaxpr, buffers);
  d.shifts = plan_cotangent_shifts(jaxpr, buffers, d.fusion);
  d.epilogues = plan_epilogues(jaxpr, buffers, d);
  d.index_run.resize(jaxpr.eqns.size());
  for (size_t i = 0; i < jaxpr.eqns.size(); ++i)
    d.index_run[i] = indexes_with_run(jaxpr, jaxpr.eqns[i]);
  d.row_loops = plan_row_loops(jaxpr, buffers, d);
  return d;
}

std::vector<LoweringDecisions> decide_lowering(const BufferAssignment& assignment) {
  std::vector<LoweringDecisions> all;
  all.reserve(assignment.jaxprs.size());
  for (const JaxprBuffers& p : assignment.jaxprs) all.push_back(decide_lowering(*p.jaxpr, &p));
  return all;
}

}  // namespace refjit
