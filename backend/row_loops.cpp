#include "backend/row_loops.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "backend/decision_bodies.h"
#include "backend/fusion.h"
#include "refjit/ir/error.h"
#include "refjit/ir/use_def.h"

namespace refjit {

namespace {

// Bytes of one row (everything but dim 0) of `t`.
int64_t row_bytes(const ArrayType& t) {
  return t.rank() == 0 || t.shape[0] == 0 ? 0 : t.byte_size() / t.shape[0];
}

// What one candidate item does to memory, row by row.
struct ItemAccess {
  int64_t rows = 0;
  int64_t row_elements = 0;  // of the item's loops (its result, or its operand)
  RowItemKind kind = RowItemKind::rows;
  size_t eqn = 0;
  std::vector<uint32_t> row_reads;    // vars read at the row being computed (outside the item)
  std::vector<uint32_t> whole_reads;  // vars read at other rows, or scalars
};

// dot_general [R, K] . [K] -> [R] contracting K, of one float dtype throughout.
bool is_matvec(const Jaxpr& j, const Eqn& e) {
  if (e.ins.size() != 2 || e.outs.size() != 1 || !is_var(e.ins[0]) || !is_var(e.ins[1]))
    return false;
  const ArrayType lt = j.type_of(e.ins[0]).array, ht = j.type_of(e.ins[1]).array;
  const ArrayType rt = j.type_of(e.outs[0]).array;
  const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
  return (rt.dtype == DType::f32 || rt.dtype == DType::f64) && lt.dtype == rt.dtype &&
         ht.dtype == rt.dtype && lt.rank() == 2 && ht.rank() == 1 &&
         dn.lhs_contract == std::vector<int64_t>{1} && dn.rhs_contract == std::vector<int64_t>{0} &&
         dn.lhs_batch.empty() && dn.rhs_batch.empty() && !j.type_of(e.ins[0]).is_ref &&
         !j.type_of(e.ins[1]).is_ref;
}

// The item eqn `i` makes (a fused eqn: its body's members), or nullopt if it is none
// (row_loops.h lists what is).
std::optional<ItemAccess> item_access(const Jaxpr& j, size_t i) {
  const Eqn& top = j.eqns[i];
  const bool fused = top.prim == Prim::fused;
  // The eqns computing the item's elements and the jaxpr they are in: a fused eqn's body (whose
  // invar k is operand k of the eqn), or the eqn alone.
  const Jaxpr& in = fused ? *top.params.get<JaxprPtr>("jaxpr") : j;
  std::vector<size_t> eqns;
  if (fused)
    for (size_t k = 0; k < in.eqns.size(); ++k) eqns.push_back(k);
  else
    eqns.push_back(i);
  auto outside = [&](Var v) -> uint32_t {
    if (!fused) return v.id;
    const auto at = std::find(in.invars.begin(), in.invars.end(), v);
    return as_var(top.ins.at(static_cast<size_t>(at - in.invars.begin()))).id;
  };
  const Eqn& root = in.eqns[eqns.back()];
  if (root.outs.size() != 1 || in.type_of(root.outs[0]).is_ref) return std::nullopt;
  ItemAccess item;
  const ArrayType rt = in.type_of(root.outs[0]).array;
  ArrayType loops = rt;  // the index space the members live in
  if (is_row_reduction(root.prim)) {
    if (!reduction_root(in, root)) return std::nullopt;
    const ArrayType xt = in.type_of(as_var(root.ins[0])).array;
    IntList axes = root.params.get<IntList>("axes");
    std::sort(axes.begin(), axes.end());
    if (rt.rank() == 0 && xt.rank() >= 1) {
      item.kind = RowItemKind::partial;
    } else if (xt.rank() >= 2 && axes == IntList{0}) {
      item.kind = RowItemKind::columns;
    } else {
      // Every dim but the first: a result [R].
      if (rt.rank() != 1 || xt.rank() < 2 || static_cast<int64_t>(axes.size()) != xt.rank() - 1)
        return std::nullopt;
      for (size_t k = 0; k < axes.size(); ++k)
        if (axes[k] != static_cast<int64_t>(k) + 1) return std::nullopt;
    }
    loops = xt;
  } else if (root.prim == Prim::dot_general) {
    if (fused || !is_matvec(j, root)) return std::nullopt;
    item.kind = RowItemKind::matvec;
    loops = j.type_of(root.ins[0]).array;
  } else if (!fused && (!fusible(j, root) || is_view_eqn(j, root))) {
    return std::nullopt;
  }
  if (loops.rank() < 1 || loops.shape[0] < 2) return std::nullopt;
  item.rows = loops.shape[0];
  item.row_elements = loops.num_elements() / item.rows;
  std::vector<bool> member(in.vars.size(), false);
  for (size_t k : eqns) member[in.eqns[k].outs.at(0).id] = true;
  for (size_t k : eqns) {
    const Eqn& e = in.eqns[k];
    if (is_view_eqn(in, e)) return std::nullopt;
    // Reads whose dim 0 is the loop's: a reduction's operand, a matrix-vector product's matrix.
    const bool by_rows =
        k == eqns.back() && (is_row_reduction(e.prim) || item.kind == RowItemKind::matvec);
    const ArrayType et = in.type_of(e.outs[0]).array;
    for (const Atom& a : e.ins) {
      if (!is_var(a) || member[as_var(a).id]) continue;
      const ArrayType t = in.type_of(as_var(a)).array;
      bool row_local = false;
      if (t.rank() >= 1 && t.shape[0] == item.rows) {
        if (by_rows) {
          row_local = &a == &e.ins[0];
        } else if (e.prim == Prim::broadcast_in_dim) {
          const IntList& dims = e.params.get<IntList>("broadcast_dimensions");
          row_local = !dims.empty() && dims[0] == 0 && et.rank() >= 1 && et.shape[0] == item.rows;
        } else {
          row_local = t.shape == et.shape;
        }
      }
      (row_local ? item.row_reads : item.whole_reads).push_back(outside(as_var(a)));
    }
  }
  item.eqn = i;
  return item;
}

// The loop being built, with what its items read and write.
struct OpenLoop {
  RowLoop loop;
  std::vector<uint32_t> computed;  // vars its items compute (in the loop)
  std::vector<uint32_t> after;     // results of its reductions finished after the loop
  std::set<int> written;           // buffers its items write in the loop
  std::set<int> whole_read;        // buffers its items read at other rows
  std::set<int> written_after;     // buffers its reductions write after it
  std::vector<std::pair<int, int64_t>> row_read;  // (buffer, row bytes) read row by row
  std::vector<uint32_t> row_read_vars;
  std::vector<uint32_t> products;  // results of its matrix-vector products
  std::vector<size_t> passengers;
  int64_t max_row_elements = 0;
};

bool contains(const std::vector<uint32_t>& v, uint32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Adds `item` to `open` if the loop may compute it (row_loops.h); false leaves `open` as it was.
bool try_add(const Jaxpr& j, const JaxprBuffers& p, OpenLoop& open, const ItemAccess& item) {
  if (!open.loop.items.empty() && item.rows != open.loop.rows) return false;
  auto buf = [&](uint32_t id) { return buffer_of(p, Atom(Var{id})); };
  for (uint32_t v : item.whole_reads) {
    if (contains(open.computed, v) || contains(open.after, v)) return false;
    if (open.written.count(buf(v))) return false;
  }
  for (uint32_t v : item.row_reads) {
    if (contains(open.after, v)) return false;
    const int b = buf(v);
    if (b >= 0 && open.written.count(b) && !contains(open.computed, v)) {
      // Another value living in a buffer the loop writes: only the same rows.
      const ArrayType t = j.type_of(Var{v}).array;
      for (uint32_t w : open.computed)
        if (buf(w) == b && row_bytes(j.type_of(Var{w}).array) != row_bytes(t)) return false;
    }
  }
  const Var out = j.eqns[item.eqn].outs[0];
  const int w = buf(out.id);
  const bool after = finished_after_loop(item.kind);
  if (after && w >= 0) {
    if (open.written.count(w) || open.whole_read.count(w)) return false;
    for (const auto& [b, bytes] : open.row_read)
      if (b == w) return false;
    for (uint32_t v : item.row_reads)
      if (buf(v) == w) return false;
  }
  if (!after && w >= 0) {
    if (open.whole_read.count(w) || open.written_after.count(w)) return false;
    for (uint32_t v : item.whole_reads)
      if (buf(v) == w) return false;
    const int64_t rb = row_bytes(j.type_of(out).array);
    for (const auto& [b, bytes] : open.row_read)
      if (b == w && bytes != rb) return false;
    for (uint32_t v : item.row_reads)
      if (buf(v) == w && row_bytes(j.type_of(Var{v}).array) != rb) return false;
  }
  // Taken.
  if (open.loop.items.empty()) open.loop.rows = item.rows;
  open.loop.items.push_back(RowItem{item.kind, item.eqn});
  (after ? open.after : open.computed).push_back(out.id);
  if (w >= 0) (after ? open.written_after : open.written).insert(w);
  for (uint32_t v : item.whole_reads)
    if (buf(v) >= 0) open.whole_read.insert(buf(v));
  std::vector<uint32_t> mine;  // each var once per item
  for (uint32_t v : item.row_reads) {
    open.row_read.emplace_back(buf(v), row_bytes(j.type_of(Var{v}).array));
    if (!contains(mine, v)) mine.push_back(v);
  }
  open.row_read_vars.insert(open.row_read_vars.end(), mine.begin(), mine.end());
  if (item.kind == RowItemKind::matvec) open.products.push_back(out.id);
  open.max_row_elements = std::max(open.max_row_elements, item.row_elements);
  return true;
}

// Whether eqn `i`, which the loop cannot take, may run before it instead of among its items
// (row_loops.h, passengers): a plain eqn that reads nothing the loop computes and writes no
// buffer the loop's items read or write.
bool try_carry(const Jaxpr& j, const JaxprBuffers& p, OpenLoop& open, size_t i) {
  const Eqn& e = j.eqns[i];
  const EqnBuffers& eb = p.eqns[i];
  const PrimInfo& info = prim_info(e.prim);
  // (A fused eqn's body is no program of its own: its operands are all it reads.)
  if (open.loop.items.empty() || (info.has_subjaxprs && e.prim != Prim::fused) ||
      info.communicates || info.host_effect || info.effect != RefEffect::none ||
      !eb.copies.empty() || !eb.handed_over.empty())
    return false;
  if (eb.action == EqnAction::view && is_row_view(e) && is_var(e.ins[0]) &&
      contains(open.computed, as_var(e.ins[0]).id)) {
    // A view of a row the loop computes ([R] as [R, 1]): the same rows, the same bytes each.
    const ArrayType xt = j.type_of(as_var(e.ins[0])).array;
    const ArrayType rt = j.type_of(e.outs[0]).array;
    if (xt.rank() < 1 || rt.rank() < 1 || xt.shape[0] != open.loop.rows ||
        rt.shape[0] != open.loop.rows || xt.byte_size() != rt.byte_size())
      return false;
    open.computed.push_back(e.outs[0].id);
    open.passengers.push_back(i);
    return true;
  }
  if (eb.action != EqnAction::fresh && eb.action != EqnAction::in_place &&
      eb.action != EqnAction::view)
    return false;
  for (const Atom& a : e.ins) {
    if (!is_var(a)) continue;
    const uint32_t v = as_var(a).id;
    if (j.type_of(as_var(a)).is_ref || contains(open.computed, v) || contains(open.after, v))
      return false;
  }
  for (Var o : e.outs) {
    if (j.type_of(o).is_ref) return false;
    const int w = buffer_of(p, o);
    if (w < 0 || eb.action == EqnAction::view) continue;  // a view writes nothing
    if (open.written.count(w) || open.whole_read.count(w) || open.written_after.count(w))
      return false;
    for (const auto& [b, bytes] : open.row_read)
      if (b == w) return false;
  }
  open.passengers.push_back(i);
  return true;
}

// Whether the loop is worth it: two or more items, one reading another's result or two reading
// the same value row by row, rows that fit in cache, and some row longer than one element.
// Over vectors only, each row is one element: the loop would be every item's elements
// interleaved in one scalar pass, a full reduction's partials one per element summed one by
// one after it (not vectorised), where the items' own loops vectorise and sum in blocks (the
// gradient of sum(tanh(f(x))) over 1M floats: 5.0 ms in a row loop, 2.5 ms without, one
// thread).
bool worth_a_loop(const OpenLoop& open) {
  if (open.loop.items.size() < 2 || open.max_row_elements > kMaxRowElements ||
      open.max_row_elements <= 1)
    return false;
  std::vector<uint32_t> seen;
  for (uint32_t v : open.row_read_vars) {
    // (A product alone is faster as a kernel call than as rows summed in a loop: reading its
    // result row by row is not reason enough.)
    if ((contains(open.computed, v) && !contains(open.products, v)) || contains(seen, v))
      return true;
    seen.push_back(v);
  }
  return false;
}

}  // namespace

bool is_row_view(const Eqn& e) {
  return (e.prim == Prim::reshape || e.prim == Prim::squeeze || e.prim == Prim::expand_dims) &&
         e.ins.size() == 1 && e.outs.size() == 1;
}

RowLoopPlan plan_row_loops(const Jaxpr& j, const JaxprBuffers* buffers) {
  const size_t n = j.eqns.size();
  RowLoopPlan plan;
  if (!buffers || buffers->eqns.size() != n) return plan;
  const JaxprBuffers& p = *buffers;
  OpenLoop open;
  auto close = [&] {
    if (worth_a_loop(open)) {
      open.loop.passengers = std::move(open.passengers);
      for (const RowItem& item : open.loop.items)
        if (item.kind == RowItemKind::columns)
          open.loop.block_rows = (open.loop.rows + kRowBlocks - 1) / kRowBlocks;
      plan.loops.push_back(std::move(open.loop));
    }
    open = OpenLoop{};
  };
  for (size_t i = 0; i < n; ++i) {
    std::optional<ItemAccess> item;
    const EqnBuffers& eb = p.eqns[i];
    const bool plain =
        eb.copies.empty() && (eb.action == EqnAction::fresh || eb.action == EqnAction::in_place);
    if (plain) item = item_access(j, i);
    if (!item) {
      if (!try_carry(j, p, open, i)) close();
      continue;
    }
    // An item of other rows, or one the loop cannot take, may still run before it.
    if (try_add(j, p, open, *item) || try_carry(j, p, open, i)) continue;
    close();
    try_add(j, p, open, *item);
  }
  close();
  return plan;
}

RowLoop row_loop_of_body(const Jaxpr& body) {
  RowLoop loop;
  for (size_t k = 0; k < body.eqns.size(); ++k) {
    const Eqn& e = body.eqns[k];
    if (is_row_view(e)) {
      loop.passengers.push_back(k);
      continue;
    }
    const std::optional<ItemAccess> item = item_access(body, k);
    if (!item || (loop.rows != 0 && item->rows != loop.rows))
      throw Error(fmt::format(
          "row_loop: eqn {} of its body ({}) is no row of a loop over the rows of the others", k,
          prim_name(e.prim)));
    loop.rows = item->rows;
    loop.items.push_back(RowItem{item->kind, k});
    if (item->kind == RowItemKind::columns)
      loop.block_rows = (loop.rows + kRowBlocks - 1) / kRowBlocks;
  }
  if (loop.items.empty()) throw Error("row_loop: its body computes no row");
  return loop;
}

namespace {

// The row_loop eqns replacing the loops of `plan` in `j` (row_loops.h, "As IR").
Jaxpr with_row_loops(const Jaxpr& j, const RowLoopPlan& plan) {
  if (plan.loops.empty()) return j;
  const size_t n = j.eqns.size();
  std::vector<int32_t> loop_of(n, -1);  // items and passengers
  for (size_t l = 0; l < plan.loops.size(); ++l) {
    for (const RowItem& item : plan.loops[l].items) loop_of[item.eqn] = static_cast<int32_t>(l);
    for (size_t k : plan.loops[l].passengers) loop_of[k] = static_cast<int32_t>(l);
  }
  const UseDef use_def(j);
  Jaxpr out = j;
  out.eqns.clear();
  std::vector<Eqn> after;  // views of loop results read outside, emitted after their loop
  for (size_t i = 0; i < n; ++i) {
    const int32_t l = loop_of[i];
    if (l < 0) {
      out.eqns.push_back(j.eqns[i]);
      continue;
    }
    const RowLoop& loop = plan.loops[static_cast<size_t>(l)];
    if (i != loop.items.front().eqn) continue;  // emitted with the loop's first item
    // The loop's eqns in program order; a passenger reading what the loop computes (a view of
    // a row result) is in its body, the others run before it.
    std::vector<size_t> body;
    std::vector<bool> in_body(j.vars.size(), false);
    size_t covered = 0;
    for (size_t k = i; k < n && (loop_of[k] == l); ++k, ++covered) {
      const Eqn& e = j.eqns[k];
      const bool item = std::any_of(loop.items.begin(), loop.items.end(),
                                    [&](const RowItem& it) { return it.eqn == k; });
      const bool inside =
          item || (is_row_view(e) && is_var(e.ins[0]) && in_body[as_var(e.ins[0]).id]);
      if (!inside) {
        out.eqns.push_back(e);
        continue;
      }
      body.push_back(k);
      for (Var o : e.outs) in_body[o.id] = true;
    }
    if (covered != loop.items.size() + loop.passengers.size())
      throw Error("internal error: a row loop's eqns are not one run of eqns");
    // Its results: the items' values read after it. A view inside read after it is made again
    // there, from the item's result.
    std::vector<Var> results;
    auto read_outside = [&](Var v) {
      for (const UseDef::Use& u : use_def.uses(v))
        if (u.is_output() || loop_of[u.eqn] != l) return true;
      return false;
    };
    std::vector<int64_t> view_of(j.vars.size(), -1);  // the body view defining a var
    for (size_t k : body)
      if (is_row_view(j.eqns[k])) view_of[j.eqns[k].outs[0].id] = static_cast<int64_t>(k);
    std::vector<size_t> made_again;  // views made again after the loop
    auto add_result = [&](Var v) {
      if (std::find(results.begin(), results.end(), v) == results.end()) results.push_back(v);
    };
    for (size_t k : body) {
      const Eqn& e = j.eqns[k];
      if (!read_outside(e.outs[0])) continue;
      if (!is_row_view(e)) {
        add_result(e.outs[0]);
        continue;
      }
      // The view (and the views it is made of) again after the loop, from the item's result.
      Var from = e.outs[0];
      while (view_of[from.id] >= 0) {
        const size_t v = static_cast<size_t>(view_of[from.id]);
        if (std::find(made_again.begin(), made_again.end(), v) == made_again.end())
          made_again.push_back(v);
        from = as_var(j.eqns[v].ins[0]);
      }
      add_result(from);
    }
    std::sort(made_again.begin(), made_again.end());
    for (size_t v : made_again) after.push_back(j.eqns[v]);
    if (results.empty()) {  // nothing reads what it computes: no loop (its eqns as they were)
      for (size_t k : body) out.eqns.push_back(j.eqns[k]);
    } else {
      out.eqns.push_back(eqn_with_body(Prim::row_loop, j, body, results));
    }
    for (Eqn& e : after) out.eqns.push_back(std::move(e));
    after.clear();
  }
  return out;
}

}  // namespace

Jaxpr make_row_loops(const Jaxpr& program, const BufferAssignment* assignment) {
  return rewrite_every_jaxpr(program, assignment, [](const Jaxpr& j, const JaxprBuffers* plan) {
    return with_row_loops(j, plan_row_loops(j, plan));
  });
}

Jaxpr make_row_loops(const Jaxpr& program, const BufferOptions& options) {
  const BufferAssignment provisional = assign_buffers(program, options);
  return make_row_loops(program, &provisional);
}

}  // namespace refjit
