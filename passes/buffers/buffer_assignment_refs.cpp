// Buffer assignment (buffer_assigner.h): ref eqns and merging a fresh buffer into its destination.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "passes/buffers/buffer_assigner.h"
#include "passes/buffers/buffer_rules.h"
#include "refjit/ir/error.h"

namespace refjit::buffers {

bool JaxprAssigner::before_ref_write(Var r, int i, std::optional<Var> keep, bool operands_live) {
  int R = p_.buffer_of_var[r.id];
  for (uint32_t v : members_[R]) {
    Var var{v};
    if (def_[v] >= i || j_.type_of(var).is_ref) continue;
    if (keep && *keep == var) continue;
    if (last_use_[v] < i || (last_use_[v] == i && !operands_live)) continue;
    int g = origin_get_[v];
    if (g < 0 || copy_gets_.count(g))
      throw Error(
          fmt::format("buffer assignment: internal error: value #{} shares the buffer "
                      "of a ref written at eqn {}",
                      v, i));
    copy_gets_.insert(g);
    restart_ = true;
    return false;
  }
  return true;
}

bool JaxprAssigner::try_merge(int y, int d, int until, std::optional<Var> ref) {
  const Buffer& Y = p_.buffers[y];
  if (y == d || merged_into_[y] >= 0 || Y.home >= 0) return false;
  if (Y.origin != BufferOrigin::internal || Y.bytes != p_.buffers[d].bytes) return false;
  int created = Y.index;
  for (uint32_t v : members_[y])
    if (!j_.type_of(Var{v}).is_ref && last_use_[v] > until) return false;
  // y's value would sit in d from `created` to `until`: nothing else in d may be live in
  // that span (a value made before and read after `created`, or made in between, would
  // overwrite it or be overwritten), and no ref in d may be made in between (new_ref fills
  // the buffer). Random program 1128: a ref's initial value, made after y, lost y's write.
  for (uint32_t v : members_[d]) {
    const bool is_ref = j_.type_of(Var{v}).is_ref;
    if (!is_ref && def_[v] < until && last_use_[v] >= created) return false;
    if (is_ref && def_[v] >= created && def_[v] < until) return false;
  }
  if (ref)
    for (const auto& [eqn, overwrite] : ref_access_[ref->id])
      if (eqn >= created && eqn < until) return false;
  const std::vector<uint32_t> moved = members_[y];  // set() edits members_[y]
  for (uint32_t v : moved) set(Var{v}, d);
  merged_into_[y] = d;
  return true;
}

void JaxprAssigner::ref_op(const Eqn& e, size_t i) {
  EqnBuffers& E = p_.eqns[i];
  int ii = static_cast<int>(i);
  switch (e.prim) {
    case Prim::new_ref: {
      Var r = e.outs.at(0);
      const ArrayType& t = j_.type_of(r).array;
      int b = buf(e.ins.at(0));
      // Taking over the initial value's buffer is an alias of nothing else only when that
      // buffer is no other ref's (a whole read of a ref is a view of it): two refs sharing
      // one buffer would each see the other's writes.
      bool another_refs = false;
      if (b >= 0)
        for (uint32_t v : members_[b]) another_refs |= j_.type_of(Var{v}).is_ref;
      if (b >= 0 && p_.buffers[b].writable && !another_refs && !live_after(b, ii)) {
        set(r, b);
        E.action = EqnAction::move;
        E.in_place[0] = 0;
        return;
      }
      int d = fresh(t, BufferOrigin::ref, ii);
      set(r, d);
      if (b < 0) {
        E.copies.push_back(make_copy(CopyKind::fill, -1, d, t.byte_size(), ii, std::nullopt,
                                     "initial value is a literal"));
      } else {
        Var x = as_var(e.ins[0]);
        E.copies.push_back(make_copy(CopyKind::whole, b, d, t.byte_size(), ii, x,
                                     fmt::format("initial value `{}` cannot be taken over: {}",
                                                 name(x), why_not_writable(b, ii))));
      }
      return;
    }
    case Prim::get: {
      Var r = as_var(e.ins.at(0));
      Var out = e.outs.at(0);
      const ArrayType& t = j_.type_of(out).array;
      int R = buf(r);
      if (whole_indexer(e) && !copy_gets_.count(ii)) {
        set(out, R);
        origin_get_[out.id] = ii;
        E.action = EqnAction::view;
        E.in_place[0] = 0;
        return;
      }
      int d = fresh(t, BufferOrigin::internal, ii);
      set(out, d);
      if (whole_indexer(e))
        E.copies.push_back(
            make_copy(CopyKind::whole, R, d, t.byte_size(), ii, r,
                      fmt::format("ref `{}` is written while the value read from it is still live",
                                  name(r))));
      else
        E.copies.push_back(
            make_copy(CopyKind::read, R, d, t.byte_size(), ii, r, "indexed read of a ref"));
      return;
    }
    case Prim::swap: return swap(e, i);
    case Prim::addupdate:
    case Prim::dot_accumulate: {
      // dot_accumulate's kernel reads the operands while it writes the ref: an operand still in
      // the ref's buffer (a value read from it without a copy) gets a copy of its own.
      const bool operands_live = e.prim == Prim::dot_accumulate;
      if (!before_ref_write(as_var(e.ins.at(0)), ii, std::nullopt, operands_live)) return;
      E.action = EqnAction::in_place;
      return;
    }
    case Prim::shift_add: {
      // The ref is shifted in place; the runs read out of it first have buffers of their own.
      Var r = as_var(e.ins.at(0));
      for (Var v : e.outs) set(v, fresh(j_.type_of(v).array, BufferOrigin::internal, ii));
      if (!before_ref_write(r, ii)) return;
      E.action = EqnAction::in_place;
      return;
    }
    case Prim::get_flat_run: {
      Var r = as_var(e.ins.at(0));
      const ArrayType& t = j_.type_of(e.outs.at(0)).array;
      int d = fresh(t, BufferOrigin::internal, ii);
      set(e.outs[0], d);
      E.copies.push_back(
          make_copy(CopyKind::read, buf(r), d, t.byte_size(), ii, r, "run read out of a ref"));
      return;
    }
    case Prim::swap_flat_run: {
      // The old run is copied out (when anyone reads it), then the ref written in place.
      Var r = as_var(e.ins.at(0));
      Var old = e.outs.at(0);
      const ArrayType& t = j_.type_of(old).array;
      if (!is_dropped(j_, old) && last_use_[old.id] >= 0) {
        int d = fresh(t, BufferOrigin::internal, ii);
        set(old, d);
        E.copies.push_back(make_copy(CopyKind::read, buf(r), d, t.byte_size(), ii, r,
                                     "swap returns the old contents of the run"));
      }
      if (!before_ref_write(r, ii)) return;
      E.action = EqnAction::in_place;
      return;
    }
    case Prim::freeze: {
      Var r = as_var(e.ins.at(0));
      set(e.outs.at(0), buf(r));
      E.action = EqnAction::view;
      E.in_place[0] = 0;
      return;
    }
    default: return all_fresh(e, i);
  }
}

void JaxprAssigner::swap(const Eqn& e, size_t i) {
  EqnBuffers& E = p_.eqns[i];
  int ii = static_cast<int>(i);
  Var r = as_var(e.ins.at(0));
  int R = buf(r);
  Var old = e.outs.at(0);
  const ArrayType& ot = j_.type_of(old).array;
  bool old_used = !is_dropped(j_, old) && last_use_[old.id] >= 0;
  const Atom& y = e.ins.at(1);
  if (old_used) {
    int d = fresh(ot, BufferOrigin::internal, ii);
    set(old, d);
    bool whole = whole_indexer(e);
    E.copies.push_back(make_copy(whole ? CopyKind::whole : CopyKind::read, R, d, ot.byte_size(), ii,
                                 r,
                                 whole ? "swap returns the ref's old contents"
                                       : "swap returns the old contents of the region"));
  }
  if (!whole_indexer(e)) {
    if (!before_ref_write(r, ii)) return;
    E.action = EqnAction::in_place;
    return;
  }
  int yb = buf(y);
  if (yb >= 0 && yb != R && !old_used) try_merge(yb, R, ii, r);
  yb = buf(y);
  if (yb >= 0 && yb == R) {
    if (!before_ref_write(r, ii, as_var(y))) return;
    E.action = EqnAction::no_op;
    return;
  }
  if (!before_ref_write(r, ii)) return;
  E.action = EqnAction::in_place;
  if (yb < 0) {
    E.copies.push_back(
        make_copy(CopyKind::fill, -1, R, ot.byte_size(), ii, std::nullopt, "literal written"));
  } else {
    Var yv = as_var(y);
    E.copies.push_back(make_copy(
        CopyKind::whole, yb, R, ot.byte_size(), ii, yv,
        fmt::format("`{}` is written whole into ref `{}` but was not computed in its buffer "
                    "(the ref's contents or `{}` are still needed)",
                    name(yv), name(r), name(yv))));
  }
}

}  // namespace refjit::buffers
