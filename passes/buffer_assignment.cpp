// Buffer assignment (docs/buffers.md): one forward walk per jaxpr deciding, eqn by eqn, which
// buffer each result lives in, with liveness counted per buffer. Sub-jaxprs are assigned
// when their eqn is reached, with binder buffers that stand for the parent's buffers.
#include "passes/buffer_assignment.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "passes/buffer_names.h"
#include "passes/buffer_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

std::string_view origin_name(BufferOrigin o) {
  switch (o) {
    case BufferOrigin::input: return "input";
    case BufferOrigin::constant: return "const";
    case BufferOrigin::internal: return "internal";
    case BufferOrigin::ref: return "ref";
    case BufferOrigin::carry: return "carry";
    case BufferOrigin::scan_const: return "scan-const";
    case BufferOrigin::x_row: return "x-row";
    case BufferOrigin::y_row: return "y-row";
    case BufferOrigin::operand: return "operand";
    case BufferOrigin::result: return "result";
    case BufferOrigin::temp: return "temp";
  }
  return "?";
}

const JaxprBuffers& BufferAssignment::of(const Jaxpr& j) const {
  for (const JaxprBuffers& p : jaxprs)
    if (p.jaxpr == &j) return p;
  throw Error("buffer plan: the jaxpr asked for is not part of the assigned program");
}

std::vector<const Copy*> BufferAssignment::all_copies() const {
  std::vector<const Copy*> v;
  for (const JaxprBuffers& p : jaxprs) {
    for (const EqnBuffers& e : p.eqns)
      for (const Copy& c : e.copies) v.push_back(&c);
    for (const Copy& c : p.end_copies) v.push_back(&c);
  }
  return v;
}

CopyStats BufferAssignment::stats() const {
  CopyStats s;
  for (const Copy* c : all_copies()) {
    switch (c->kind) {
      case CopyKind::whole:
        if (c->in_loop) {
          ++s.whole_in_loop;
          s.whole_in_loop_bytes += c->bytes;
        } else {
          ++s.whole_outside;
          s.whole_outside_bytes += c->bytes;
        }
        break;
      case CopyKind::read:
        ++s.read;
        s.read_bytes += c->bytes;
        break;
      case CopyKind::fill: ++s.fill; break;
    }
  }
  return s;
}

namespace {

enum class JaxprKind { top, scan_body, cond_branch, call_body };

// How a jaxpr is entered: its binder buffers and where its outputs go.
struct Entry {
  JaxprKind kind = JaxprKind::top;
  int parent = -1, parent_eqn = -1;
  std::string where = "top level";
  bool in_loop = false;
  std::vector<Buffer> binders;        // one per constvar, then per invar
  int num_consts = 0, num_carry = 0;  // scan body
  std::vector<int> out_outer;         // scan: stacked ys buffers; cond: result buffers
};

class JaxprAssigner;

class Assigner {
 public:
  Assigner(const BufferOptions& o, const Jaxpr& top) : options(o), names(top) {}
  const BufferOptions& options;
  BufferNames names;  // the names print_jaxpr gives, for messages
  BufferAssignment out;
  std::vector<std::vector<int>> merged;  // by plan: merged_into per buffer
  int assign(const Jaxpr& j, Entry entry);
};

bool is_dropped(const Jaxpr& j, Var v) { return j.info(v).dropped; }

// A sub-jaxpr's binders in the order the eqn's operands bind them: constvars, then invars.
std::vector<Var> body_binders(const Jaxpr& j) {
  std::vector<Var> v = j.constvars;
  v.insert(v.end(), j.invars.begin(), j.invars.end());
  return v;
}

class JaxprAssigner {
 public:
  JaxprAssigner(Assigner& a, const Jaxpr& j, Entry entry, int self)
      : a_(a), j_(j), entry_(std::move(entry)), self_(self) {}

  // Walks the eqns until an attempt goes through. An attempt stops early when a whole get
  // that lent its value the ref's buffer turns out to need a copy after all (a later write
  // would clobber the value): that get is marked, and the walk starts again. Each restart
  // marks one more get, so there are at most as many attempts as whole gets.
  JaxprBuffers run() {
    for (;;) {
      reset();
      walk();
      if (!restart_) break;
      a_.out.jaxprs.resize(self_ + 1);  // drop the sub-plans of the abandoned attempt
    }
    finish_outputs();
    return std::move(p_);
  }

 private:
  Assigner& a_;
  const Jaxpr& j_;
  Entry entry_;
  int self_;
  JaxprBuffers p_;
  size_t n_ = 0;
  std::vector<int> last_use_;  // by var: last eqn reading it; n_ for outvars; -1 never
  std::vector<std::vector<uint32_t>> members_;  // by buffer: the vars in it, in id order
  bool restart_ = false;                        // the attempt is abandoned (run())
  std::vector<int> def_;                        // by var: defining eqn; -1 for binders
  std::vector<std::vector<std::pair<int, bool>>> ref_access_;  // by ref var: (eqn, overwrite)
  std::vector<int> origin_get_;   // by var: the whole get whose buffer it shares, or -1
  std::set<int> copy_gets_;       // whole gets that copy (survives restarts)
  std::vector<int> merged_into_;  // by buffer

  // ------------------------------------------------------------ setup

  void reset() {
    restart_ = false;
    n_ = j_.eqns.size();
    size_t nv = j_.vars.size();
    p_ = JaxprBuffers{};
    p_.jaxpr = &j_;
    p_.parent = entry_.parent;
    p_.parent_eqn = entry_.parent_eqn;
    p_.where = entry_.where;
    p_.in_loop = entry_.in_loop;
    p_.buffer_of_var.assign(nv, -1);
    p_.eqns.assign(n_, EqnBuffers{});
    merged_into_.clear();
    members_.clear();
    last_use_.assign(nv, -1);
    def_.assign(nv, -1);
    ref_access_.assign(nv, {});
    origin_get_.assign(nv, -1);
    for (size_t i = 0; i < n_; ++i) {
      const Eqn& e = j_.eqns[i];
      for (Var v : e.outs) def_[v.id] = static_cast<int>(i);
      for (size_t k = 0; k < e.ins.size(); ++k) {
        if (!is_var(e.ins[k])) continue;
        Var v = as_var(e.ins[k]);
        last_use_[v.id] = static_cast<int>(i);
        if (j_.type_of(v).is_ref &&
            (ref_access_[v.id].empty() || ref_access_[v.id].back().first != static_cast<int>(i)))
          ref_access_[v.id].push_back({static_cast<int>(i), is_whole_overwrite(e, k)});
      }
    }
    for (const Atom& a : j_.outvars)
      if (is_var(a)) last_use_[as_var(a).id] = static_cast<int>(n_);
    std::vector<Var> binders = body_binders(j_);
    for (size_t k = 0; k < binders.size() && k < entry_.binders.size(); ++k)
      set(binders[k], add_buffer(entry_.binders[k]));
  }

  // `r[...] <- y` with the old value unused: the ref's contents are not read.
  bool is_whole_overwrite(const Eqn& e, size_t operand) const {
    if (e.prim != Prim::swap || operand != 0) return false;
    const Indexer* idx = indexer(e);
    if (idx && !idx->is_whole()) return false;
    Var old = e.outs.at(0);
    return is_dropped(j_, old) || last_use_of(old) < 0;
  }
  int last_use_of(Var v) const {
    // During reset the outs' uses are not all known yet; scan forward instead.
    for (size_t i = n_; i-- > 0;)
      for (const Atom& a : j_.eqns[i].ins)
        if (is_var(a) && as_var(a) == v) return static_cast<int>(i);
    for (const Atom& a : j_.outvars)
      if (is_var(a) && as_var(a) == v) return static_cast<int>(n_);
    return -1;
  }
  static const Indexer* indexer(const Eqn& e) {
    const ParamValue* pv = e.params.find("indexer");
    return pv ? std::get_if<Indexer>(pv) : nullptr;
  }
  static bool whole_indexer(const Eqn& e) {
    const Indexer* idx = indexer(e);
    return !idx || idx->is_whole();
  }

  int add_buffer(Buffer b) {
    p_.buffers.push_back(std::move(b));
    merged_into_.push_back(-1);
    members_.emplace_back();
    return static_cast<int>(p_.buffers.size()) - 1;
  }
  int fresh(const ArrayType& t, BufferOrigin origin, int index) {
    Buffer b;
    b.type = t;
    b.bytes = t.byte_size();
    b.origin = origin;
    b.index = index;
    b.writable = true;
    return add_buffer(std::move(b));
  }

  // ------------------------------------------------------------ liveness

  int buf(const Atom& a) const { return is_var(a) ? p_.buffer_of_var[as_var(a).id] : -1; }

  bool ref_content_live_after(Var r, int i) const {
    for (const auto& [eqn, overwrite] : ref_access_[r.id])
      if (eqn > i) return !overwrite;
    return def_[r.id] < 0;  // a binder's contents are seen by whoever passed the ref in
  }

  // Whether some value (or ref) in buffer `b` still needs the contents it has after eqn i.
  bool live_after(int b, int i) const {
    for (uint32_t v : members_[b]) {
      if (def_[v] > i) continue;
      Var var{v};
      if (j_.type_of(var).is_ref ? ref_content_live_after(var, i) : last_use_[v] > i) return true;
    }
    return false;
  }

  // The first value in `b` live after eqn i, for messages.
  std::optional<Var> live_value(int b, int i) const {
    for (uint32_t v : members_[b]) {
      Var var{v};
      if (def_[v] <= i && !j_.type_of(var).is_ref && last_use_[v] > i) return var;
    }
    return std::nullopt;
  }

  std::string name(Var v) const { return a_.names.use(self_, v); }
  std::string use_text(int last) const {
    return last >= static_cast<int>(n_)
               ? std::string("an output")
               : fmt::format("eqn {} (`{}`)", last, prim_name(j_.eqns[last].prim));
  }

  // Why buffer `b` cannot be overwritten at eqn i.
  std::string why_not_writable(int b, int i) const {
    const Buffer& B = p_.buffers[b];
    if (!B.writable) {
      switch (B.origin) {
        case BufferOrigin::input:
          return fmt::format("it is input {}, which is not donated", B.index);
        case BufferOrigin::constant: return fmt::format("it is constant {}", B.index);
        case BufferOrigin::scan_const:
          return fmt::format("it is scan const {}, read by every iteration", B.index);
        case BufferOrigin::x_row: return fmt::format("it is a row of scanned input {}", B.index);
        case BufferOrigin::operand:
          return fmt::format("it is operand {} of the enclosing eqn, still needed outside",
                             B.index);
        default: return "its buffer is not writable";
      }
    }
    if (std::optional<Var> v = live_value(b, i))
      return fmt::format("`{}` shares its buffer and is still used by {}", name(*v),
                         use_text(last_use_[v->id]));
    return "its buffer's contents are still needed afterwards (a ref read later)";
  }

  Copy make_copy(CopyKind kind, int src, int dst, int64_t bytes, int eqn, std::optional<Var> v,
                 std::string why) const {
    Copy c;
    c.kind = kind;
    c.src = src;
    c.dst = dst;
    c.bytes = bytes;
    c.in_loop = entry_.in_loop;
    c.eqn = eqn;
    c.value = v;
    c.why = std::move(why);
    return c;
  }

  // ------------------------------------------------------------ refs

  // Eqn i writes ref `r`: every value sharing r's buffer must be dead by then (or be the value
  // written, `keep`); otherwise the whole get that lent it the buffer copies instead. A
  // structured eqn (scan, cond, jit) reads its operands while its body writes the ref, so
  // there an operand last used by eqn i itself still counts as live (`operands_live`).
  // Returns false when the attempt is abandoned (restart_): the caller returns at once.
  [[nodiscard]] bool before_ref_write(Var r, int i, std::optional<Var> keep = std::nullopt,
                                      bool operands_live = false) {
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

  // Merges fresh buffer `y` into `d` (destination passing) when d's contents are dead from
  // y's creation on and nobody else needs y after eqn `until`.
  bool try_merge(int y, int d, int until, std::optional<Var> ref) {
    const Buffer& Y = p_.buffers[y];
    if (y == d || merged_into_[y] >= 0 || Y.home >= 0) return false;
    if (Y.origin != BufferOrigin::internal || Y.bytes != p_.buffers[d].bytes) return false;
    int created = Y.index;
    for (uint32_t v : members_[y])
      if (!j_.type_of(Var{v}).is_ref && last_use_[v] > until) return false;
    for (uint32_t v : members_[d])
      if (!j_.type_of(Var{v}).is_ref && def_[v] < created && last_use_[v] >= created) return false;
    if (ref)
      for (const auto& [eqn, overwrite] : ref_access_[ref->id])
        if (eqn >= created && eqn < until) return false;
    const std::vector<uint32_t> moved = members_[y];  // set() edits members_[y]
    for (uint32_t v : moved) set(Var{v}, d);
    merged_into_[y] = d;
    return true;
  }

  // ------------------------------------------------------------ the walk

  void walk() {
    for (size_t i = 0; i < n_; ++i) {
      const Eqn& e = j_.eqns[i];
      p_.eqns[i].in_place.assign(e.outs.size(), -1);
      switch (buffer_behaviour(e.prim)) {
        case BufferBehaviour::fresh: all_fresh(e, i); break;
        case BufferBehaviour::elementwise: elementwise(e, i); break;
        case BufferBehaviour::view: view(e, i); break;
        case BufferBehaviour::read: read(e, i); break;
        case BufferBehaviour::update: update(e, i); break;
        case BufferBehaviour::ref_op: ref_op(e, i); break;
        case BufferBehaviour::structured: structured(e, i); break;
      }
      if (restart_) return;
    }
  }

  // Puts `v` in buffer `b` (out of the one it was in), keeping each buffer's members in var
  // order, so liveness questions about a buffer look at its own values only.
  void set(Var v, int b) {
    int& slot = p_.buffer_of_var[v.id];
    if (slot == b) return;
    if (slot >= 0) std::erase(members_[slot], v.id);
    slot = b;
    if (b < 0) return;
    std::vector<uint32_t>& m = members_[b];
    m.insert(std::lower_bound(m.begin(), m.end(), v.id), v.id);
  }

  void all_fresh(const Eqn& e, size_t i) {
    for (Var v : e.outs) set(v, fresh(j_.type_of(v).array, BufferOrigin::internal, i));
  }

  void elementwise(const Eqn& e, size_t i) {
    Var out = e.outs.at(0);
    const Type& t = j_.type_of(out);
    for (size_t k = 0; k < e.ins.size(); ++k) {
      int b = buf(e.ins[k]);
      if (b < 0 || j_.type_of(e.ins[k]) != t || !p_.buffers[b].writable ||
          live_after(b, static_cast<int>(i)))
        continue;
      bool others_same = true;  // another operand in b must read the very same elements
      for (size_t m = 0; m < e.ins.size(); ++m)
        if (m != k && buf(e.ins[m]) == b && !(e.ins[m] == e.ins[k])) others_same = false;
      if (!others_same) continue;
      set(out, b);
      origin_get_[out.id] = origin_get_[as_var(e.ins[k]).id];
      p_.eqns[i].action = EqnAction::in_place;
      p_.eqns[i].in_place[0] = static_cast<int>(k);
      return;
    }
    all_fresh(e, i);
  }

  void view(const Eqn& e, size_t i) {
    int b = buf(e.ins.at(0));
    if (b < 0) return all_fresh(e, i);
    Var out = e.outs.at(0);
    set(out, b);
    origin_get_[out.id] = origin_get_[as_var(e.ins[0]).id];
    p_.eqns[i].action = EqnAction::view;
    p_.eqns[i].in_place[0] = 0;
  }

  void read(const Eqn& e, size_t i) {
    Var out = e.outs.at(0);
    const ArrayType& t = j_.type_of(out).array;
    int d = fresh(t, BufferOrigin::internal, i);
    set(out, d);
    int s = buf(e.ins.at(0));
    if (s >= 0)
      p_.eqns[i].copies.push_back(make_copy(CopyKind::read, s, d, t.byte_size(), i,
                                            as_var(e.ins[0]), "read into a buffer of its own"));
  }

  void update(const Eqn& e, size_t i) {
    Var out = e.outs.at(0);
    const ArrayType& t = j_.type_of(out).array;
    int b = buf(e.ins.at(0));
    int ii = static_cast<int>(i);
    if (b >= 0 && p_.buffers[b].writable && !live_after(b, ii)) {
      bool reads_b = false;  // the update or indices must not be read from the buffer
      for (size_t m = 1; m < e.ins.size(); ++m) reads_b |= buf(e.ins[m]) == b;
      if (!reads_b) {
        set(out, b);
        origin_get_[out.id] = origin_get_[as_var(e.ins[0]).id];
        p_.eqns[i].action = EqnAction::in_place;
        p_.eqns[i].in_place[0] = 0;
        return;
      }
    }
    int d = fresh(t, BufferOrigin::internal, i);
    set(out, d);
    if (b < 0) {
      p_.eqns[i].copies.push_back(
          make_copy(CopyKind::fill, -1, d, t.byte_size(), i, std::nullopt, "literal operand"));
      return;
    }
    Var x = as_var(e.ins[0]);
    std::string why = !p_.buffers[b].writable || live_after(b, ii)
                          ? fmt::format("operand `{}` cannot be overwritten: {}", name(x),
                                        why_not_writable(b, ii))
                          : fmt::format("operand `{}` is also read by this eqn", name(x));
    p_.eqns[i].copies.push_back(make_copy(CopyKind::whole, b, d, t.byte_size(), i, x, why));
  }

  // ------------------------------------------------------------ refs

  void ref_op(const Eqn& e, size_t i) {
    EqnBuffers& E = p_.eqns[i];
    int ii = static_cast<int>(i);
    switch (e.prim) {
      case Prim::new_ref: {
        Var r = e.outs.at(0);
        const ArrayType& t = j_.type_of(r).array;
        int b = buf(e.ins.at(0));
        if (b >= 0 && p_.buffers[b].writable && !live_after(b, ii)) {
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
          E.copies.push_back(make_copy(
              CopyKind::whole, R, d, t.byte_size(), ii, r,
              fmt::format("ref `{}` is written while the value read from it is still live",
                          name(r))));
        else
          E.copies.push_back(
              make_copy(CopyKind::read, R, d, t.byte_size(), ii, r, "indexed read of a ref"));
        return;
      }
      case Prim::swap: return swap(e, i);
      case Prim::addupdate: {
        Var r = as_var(e.ins.at(0));
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

  void swap(const Eqn& e, size_t i) {
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
      E.copies.push_back(make_copy(whole ? CopyKind::whole : CopyKind::read, R, d, ot.byte_size(),
                                   ii, r,
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

  // ------------------------------------------------------------ structured eqns

  Buffer binder(BufferOrigin origin, int index, const Atom& operand, bool writable) const {
    Buffer b;
    Type t = j_.type_of(operand);
    b.type = t.array;
    b.bytes = t.array.byte_size();
    b.origin = origin;
    b.index = index;
    b.outer = buf(operand);
    b.writable = writable || t.is_ref;
    return b;
  }

  // Whether operand k of eqn i may be handed over for overwriting: its buffer is writable, dead
  // after eqn i, and no other operand of the eqn is in it.
  bool can_hand_over(const Eqn& e, size_t k, int i) const {
    int b = buf(e.ins[k]);
    if (b < 0 || !p_.buffers[b].writable || j_.type_of(e.ins[k]).is_ref || live_after(b, i))
      return false;
    for (size_t m = 0; m < e.ins.size(); ++m)
      if (m != k && buf(e.ins[m]) == b) return false;
    return true;
  }

  // Refs the sub-jaxpr writes or accumulates into count as writes at eqn i. False when the
  // attempt is abandoned (before_ref_write).
  [[nodiscard]] bool sub_ref_writes(const Eqn& e, int i, const Jaxpr& body, size_t first_operand) {
    std::vector<RefEffects> fx = compute_effects(body);
    for (size_t k = 0; k < fx.size() && first_operand + k < e.ins.size(); ++k)
      if ((fx[k].written || fx[k].accumulated) && is_var(e.ins[first_operand + k]) &&
          j_.type_of(e.ins[first_operand + k]).is_ref &&
          !before_ref_write(as_var(e.ins[first_operand + k]), i, std::nullopt,
                            /*operands_live=*/true))
        return false;
    return true;
  }

  std::string sub_where(const Eqn& e, size_t i, const std::string& what) const {
    return fmt::format("{} of eqn {} ({}) of {}", what, i, prim_name(e.prim), entry_.where);
  }

  void structured(const Eqn& e, size_t i) {
    p_.eqns[i].action = EqnAction::structured;
    switch (e.prim) {
      case Prim::scan: return scan(e, i);
      case Prim::cond: return cond(e, i);
      case Prim::jit: return call(e, i, "jaxpr");
      case Prim::custom_vjp_call: return call(e, i, "call_jaxpr");
      default: return all_fresh(e, i);
    }
  }

  void scan(const Eqn& e, size_t i) {
    const Jaxpr& body = *e.params.get<JaxprPtr>("jaxpr");
    size_t nc = static_cast<size_t>(e.params.get<int64_t>("num_consts"));
    size_t nk = static_cast<size_t>(e.params.get<int64_t>("num_carry"));
    int ii = static_cast<int>(i);
    EqnBuffers& E = p_.eqns[i];
    if (!sub_ref_writes(e, ii, body, 0)) return;
    std::set<int> taken;
    for (size_t k = 0; k < nk && k < e.outs.size(); ++k) {
      Var res = e.outs[k];
      const ArrayType& t = j_.type_of(res).array;
      size_t op = nc + k;
      int b = buf(e.ins.at(op));
      if (can_hand_over(e, op, ii) && !taken.count(b)) {
        taken.insert(b);
        set(res, b);
        origin_get_[res.id] = origin_get_[as_var(e.ins[op]).id];
        E.in_place[k] = static_cast<int>(op);
        continue;
      }
      int d = fresh(t, BufferOrigin::internal, ii);
      set(res, d);
      if (b < 0) {
        E.copies.push_back(make_copy(CopyKind::fill, -1, d, t.byte_size(), ii, std::nullopt,
                                     fmt::format("carry {} starts from a literal", k)));
      } else {
        Var x = as_var(e.ins[op]);
        E.copies.push_back(
            make_copy(CopyKind::whole, b, d, t.byte_size(), ii, x,
                      fmt::format("initial carry {} `{}` cannot become the loop's carry buffer: {}",
                                  k, name(x),
                                  p_.buffers[b].writable && !live_after(b, ii)
                                      ? std::string("another operand of the scan shares its buffer")
                                      : why_not_writable(b, ii))));
      }
    }
    for (size_t k = nk; k < e.outs.size(); ++k)
      set(e.outs[k], fresh(j_.type_of(e.outs[k]).array, BufferOrigin::internal, ii));

    Entry sub;
    sub.kind = JaxprKind::scan_body;
    sub.parent = self_;
    sub.parent_eqn = ii;
    sub.where = sub_where(e, i, "body");
    sub.in_loop = true;
    sub.num_consts = static_cast<int>(nc);
    sub.num_carry = static_cast<int>(nk);
    for (size_t k = 0; k < e.ins.size(); ++k) {
      if (k < nc) {
        sub.binders.push_back(binder(BufferOrigin::scan_const, k, e.ins[k], false));
      } else if (k < nc + nk) {
        Buffer c = binder(BufferOrigin::carry, k - nc, e.ins[k], true);
        c.outer = buf(e.outs[k - nc]);
        sub.binders.push_back(c);
      } else {
        size_t x = k - nc - nk;
        Type bt = body.type_of(body_binders(body).at(k));
        Buffer row = binder(BufferOrigin::x_row, x, e.ins[k], false);
        row.type = bt.array;
        row.bytes = bt.array.byte_size();
        sub.binders.push_back(row);
      }
    }
    for (size_t k = nk; k < e.outs.size(); ++k) sub.out_outer.push_back(buf(e.outs[k]));
    E.sub_plans.push_back(a_.assign(body, std::move(sub)));
  }

  void cond(const Eqn& e, size_t i) {
    const JaxprList& branches = e.params.get<JaxprList>("branches");
    int ii = static_cast<int>(i);
    for (const JaxprPtr& br : branches)
      if (!sub_ref_writes(e, ii, *br, 1)) return;
    all_fresh(e, i);
    p_.eqns[i].action = EqnAction::structured;
    for (size_t b = 0; b < branches.size(); ++b) {
      Entry sub;
      sub.kind = JaxprKind::cond_branch;
      sub.parent = self_;
      sub.parent_eqn = ii;
      sub.where = sub_where(e, i, fmt::format("branch {}", b));
      sub.in_loop = entry_.in_loop;
      for (size_t k = 1; k < e.ins.size(); ++k)
        sub.binders.push_back(binder(BufferOrigin::operand, k, e.ins[k], false));
      for (Var v : e.outs) sub.out_outer.push_back(buf(v));
      int plan = a_.assign(*branches[b], std::move(sub));
      p_.eqns[i].sub_plans.push_back(plan);
    }
  }

  void call(const Eqn& e, size_t i, const char* param) {
    const Jaxpr& body = *e.params.get<JaxprPtr>(param);
    int ii = static_cast<int>(i);
    if (!sub_ref_writes(e, ii, body, 0)) return;
    Entry sub;
    sub.kind = JaxprKind::call_body;
    sub.parent = self_;
    sub.parent_eqn = ii;
    sub.where = sub_where(e, i, "body");
    sub.in_loop = entry_.in_loop;
    for (size_t k = 0; k < e.ins.size(); ++k)
      sub.binders.push_back(binder(BufferOrigin::operand, k, e.ins[k], can_hand_over(e, k, ii)));
    int plan = a_.assign(body, std::move(sub));
    p_.eqns[i].sub_plans.push_back(plan);
    // Results: an operand's buffer when the body returns (an update of) its binder, else a
    // fresh buffer here that the body computes into.
    JaxprBuffers& bp = a_.out.jaxprs.at(plan);
    std::vector<int> outer_of_body(bp.buffers.size(), -1);
    for (size_t k = 0; k < e.outs.size() && k < body.outvars.size(); ++k) {
      Var res = e.outs[k];
      int bb = is_var(body.outvars[k]) ? bp.buffer_of_var[as_var(body.outvars[k]).id] : -1;
      if (bb >= 0 && bp.buffers[bb].origin == BufferOrigin::operand && bp.buffers[bb].outer >= 0 &&
          !j_.type_of(e.ins.at(bp.buffers[bb].index)).is_ref) {
        int op = bp.buffers[bb].index;
        set(res, bp.buffers[bb].outer);
        if (is_var(e.ins[op])) origin_get_[res.id] = origin_get_[as_var(e.ins[op]).id];
        p_.eqns[i].in_place[k] = op;
        continue;
      }
      if (bb >= 0 && outer_of_body[bb] >= 0) {
        set(res, outer_of_body[bb]);
        continue;
      }
      int d = fresh(j_.type_of(res).array, BufferOrigin::internal, ii);
      set(res, d);
      if (bb >= 0 && bp.buffers[bb].home == static_cast<int>(k)) {
        bp.buffers[bb].outer = d;
        outer_of_body[bb] = d;
        continue;
      }
      // The body copies the value into a result buffer that is this eqn's result.
      const ArrayType& t = j_.type_of(res).array;
      Buffer rb;
      rb.type = t;
      rb.bytes = t.byte_size();
      rb.origin = BufferOrigin::result;
      rb.index = static_cast<int>(k);
      rb.outer = d;
      bp.buffers.push_back(rb);
      int dst = static_cast<int>(bp.buffers.size()) - 1;
      Copy c = make_copy(bb < 0 ? CopyKind::fill : CopyKind::whole, bb, dst, t.byte_size(), -1,
                         std::nullopt, fmt::format("result {} of the body", k));
      if (bb >= 0) {
        c.value = as_var(body.outvars[k]);
        c.why =
            fmt::format("result {}: the body's value is in a buffer that cannot be the result", k);
      }
      bp.end_copies.push_back(std::move(c));
    }
  }

  // ------------------------------------------------------------ outputs

  int result_buffer(BufferOrigin origin, int k, const ArrayType& t, int outer) {
    for (size_t b = 0; b < p_.buffers.size(); ++b)
      if (p_.buffers[b].origin == origin && p_.buffers[b].index == k) return static_cast<int>(b);
    int d = fresh(t, origin, k);
    p_.buffers[d].writable = false;
    p_.buffers[d].outer = outer;
    return d;
  }

  void finish_outputs() {
    switch (entry_.kind) {
      case JaxprKind::scan_body: return finish_scan_body();
      case JaxprKind::call_body: return finish_homes(false, false);
      case JaxprKind::cond_branch: return finish_homes(true, false);
      case JaxprKind::top: return finish_homes(true, true);
    }
  }

  // Top level / cond branch / call body: an internal buffer becomes the home of the output
  // it holds; anything else is copied into the home (top level: a donated input is returned
  // in place).
  void finish_homes(bool copy_others, bool donated_alias) {
    for (size_t k = 0; k < j_.outvars.size(); ++k) {
      const Atom& a = j_.outvars[k];
      ArrayType t = j_.type_of(a).array;
      int b = buf(a);
      if (b >= 0) {
        Buffer& B = p_.buffers[b];
        bool own = B.origin == BufferOrigin::internal || B.origin == BufferOrigin::ref;
        // Only a donated input may become an output (a ref is writable but the caller's).
        bool alias = donated_alias && B.origin == BufferOrigin::input && B.writable &&
                     static_cast<size_t>(B.index) < a_.options.donated.size() &&
                     a_.options.donated[B.index];
        if (B.home < 0 && (own || alias)) {
          B.home = static_cast<int>(k);
          if (!entry_.out_outer.empty()) B.outer = entry_.out_outer.at(k);
          continue;
        }
      }
      if (!copy_others) continue;  // call bodies: the caller maps the result
      int outer = entry_.out_outer.empty() ? -1 : entry_.out_outer.at(k);
      int d = result_buffer(BufferOrigin::result, static_cast<int>(k), t, outer);
      if (b < 0) {
        p_.end_copies.push_back(make_copy(CopyKind::fill, -1, d, t.byte_size(), -1, std::nullopt,
                                          fmt::format("output {} is a literal", k)));
        continue;
      }
      Var v = as_var(a);
      const Buffer& B = p_.buffers[b];
      std::string why =
          B.home >= 0
              ? fmt::format("its buffer already holds output {}", B.home)
              : fmt::format("`{}` lives in {} buffer {} {}, which cannot be the output", name(v),
                            origin_name(B.origin), B.index, B.writable ? "" : "(not writable)");
      p_.end_copies.push_back(make_copy(CopyKind::whole, b, d, t.byte_size(), -1, v,
                                        fmt::format("output {}: {}", k, why)));
    }
  }

  void finish_scan_body() {
    int nc = entry_.num_consts, nk = entry_.num_carry;
    int end = static_cast<int>(n_);
    std::vector<int> carry_buf(nk);
    std::vector<Var> binders = body_binders(j_);
    for (int k = 0; k < nk; ++k) carry_buf[k] = p_.buffer_of_var[binders.at(nc + k).id];
    std::vector<Copy> ys, stage, carries;
    for (size_t k = nk; k < j_.outvars.size(); ++k) {
      const Atom& a = j_.outvars[k];
      ArrayType t = j_.type_of(a).array;
      int y = static_cast<int>(k) - nk;
      int outer = y < static_cast<int>(entry_.out_outer.size()) ? entry_.out_outer[y] : -1;
      int d = result_buffer(BufferOrigin::y_row, y, t, outer);
      int b = buf(a);
      if (b < 0)
        ys.push_back(make_copy(CopyKind::fill, -1, d, t.byte_size(), -1, std::nullopt,
                               fmt::format("y {} is a literal", y)));
      else
        ys.push_back(make_copy(CopyKind::read, b, d, t.byte_size(), -1, as_var(a),
                               fmt::format("y {} into row t of the stacked output", y)));
    }
    for (int k = 0; k < nk; ++k) {
      const Atom& a = j_.outvars.at(k);
      ArrayType t = j_.type_of(a).array;
      int C = carry_buf[k];
      int b = buf(a);
      if (b == C) continue;
      if (b < 0) {
        carries.push_back(make_copy(CopyKind::fill, -1, C, t.byte_size(), -1, std::nullopt,
                                    fmt::format("carry-out {} is a literal", k)));
        continue;
      }
      if (try_merge(b, C, end, std::nullopt)) continue;
      Var v = as_var(a);
      const Buffer& B = p_.buffers[b];
      std::string why;
      if (B.origin == BufferOrigin::internal) {
        std::optional<Var> blocker = live_value(C, B.index - 1);
        why = fmt::format(
            "carry-out {} `{}` is a fresh value made by eqn {} (`{}`) while the carry buffer's "
            "old contents{} are still live, so it cannot be computed in the carry buffer",
            k, name(v), B.index, prim_name(j_.eqns.at(B.index).prim),
            blocker ? fmt::format(" (`{}`, used by {})", name(*blocker),
                                  use_text(last_use_[blocker->id]))
                    : std::string());
      } else {
        why = fmt::format("carry-out {} `{}` lives in {} buffer {}, not in the carry buffer", k,
                          name(v), origin_name(B.origin), B.index);
      }
      Copy c = make_copy(CopyKind::whole, b, C, t.byte_size(), -1, v, why);
      if (B.origin == BufferOrigin::carry) {  // permuted carries: stage through a temp
        int tmp = fresh(t, BufferOrigin::temp, k);
        stage.push_back(make_copy(CopyKind::whole, b, tmp, t.byte_size(), -1, v,
                                  fmt::format("staging carry-out {} (another carry's buffer)", k)));
        c.src = tmp;
      }
      carries.push_back(std::move(c));
    }
    for (auto* list : {&ys, &stage, &carries})
      p_.end_copies.insert(p_.end_copies.end(), list->begin(), list->end());
  }

  friend class Assigner;
};

// Renumbers the buffers of every plan without the merged ones.
void compact(BufferAssignment& out, const std::vector<std::vector<int>>& merged) {
  std::vector<std::vector<int>> remap(out.jaxprs.size());
  for (size_t p = 0; p < out.jaxprs.size(); ++p) {
    JaxprBuffers& P = out.jaxprs[p];
    auto resolve = [&](int b) {
      while (b >= 0 && merged[p][b] >= 0) b = merged[p][b];
      return b;
    };
    std::vector<int>& m = remap[p];
    m.assign(P.buffers.size(), -1);
    std::vector<Buffer> kept;
    for (size_t b = 0; b < P.buffers.size(); ++b)
      if (merged[p][b] < 0) {
        m[b] = static_cast<int>(kept.size());
        kept.push_back(P.buffers[b]);
      }
    for (size_t b = 0; b < P.buffers.size(); ++b) m[b] = m[resolve(static_cast<int>(b))];
    P.buffers = std::move(kept);
    auto fix = [&](int& b) {
      if (b >= 0) b = m[b];
    };
    for (int& b : P.buffer_of_var) fix(b);
    for (EqnBuffers& e : P.eqns)
      for (Copy& c : e.copies) fix(c.src), fix(c.dst);
    for (Copy& c : P.end_copies) fix(c.src), fix(c.dst);
  }
  for (JaxprBuffers& P : out.jaxprs)
    if (P.parent >= 0)
      for (Buffer& b : P.buffers)
        if (b.outer >= 0) b.outer = remap[P.parent][b.outer];
}

int Assigner::assign(const Jaxpr& j, Entry entry) {
  int self = static_cast<int>(out.jaxprs.size());
  out.jaxprs.emplace_back();
  JaxprAssigner ja(*this, j, std::move(entry), self);
  JaxprBuffers plan = ja.run();
  out.jaxprs.at(self) = std::move(plan);
  if (merged.size() <= static_cast<size_t>(self)) merged.resize(self + 1);
  merged[self] = ja.merged_into_;
  return self;
}

std::string eqn_text(const JaxprBuffers& p, int eqn, const BufferNames& names, int plan_index) {
  const Eqn& e = p.jaxpr->eqns.at(eqn);
  std::string s;
  for (Var v : e.outs) s += (s.empty() ? "" : " ") + names.binder(plan_index, v);
  if (!s.empty()) s += " = ";
  s += prim_name(e.prim);
  for (const Atom& a : e.ins) s += " " + names.atom(plan_index, a);
  return s;
}

void check_no_copies_in_loops(const BufferNames& names, const BufferAssignment& out) {
  for (size_t pi = 0; pi < out.jaxprs.size(); ++pi) {
    const JaxprBuffers& p = out.jaxprs[pi];
    auto fail = [&](const Copy& c) {
      std::string value = c.value ? names.use(static_cast<int>(pi), *c.value) : "a literal";
      std::string at = c.eqn >= 0 ? fmt::format("eqn {} (`{}`) `{}`", c.eqn,
                                                prim_name(p.jaxpr->eqns[c.eqn].prim),
                                                eqn_text(p, c.eqn, names, static_cast<int>(pi)))
                                  : std::string("the end of the iteration");
      throw Error(fmt::format(
          "buffer assignment: a whole-buffer copy of {} bytes of `{}` would run in every loop "
          "iteration, at {} in the {}: {}. Rewrite the loop so the value is updated in place "
          "(read what you need before the update, return the updated carry), or drop "
          "fail_on_copy to accept the copy",
          c.bytes, value, at, p.where, c.why));
    };
    for (const EqnBuffers& e : p.eqns)
      for (const Copy& c : e.copies)
        if (c.kind == CopyKind::whole && c.in_loop) fail(c);
    for (const Copy& c : p.end_copies)
      if (c.kind == CopyKind::whole && c.in_loop) fail(c);
  }
}

}  // namespace

BufferAssignment assign_buffers(const Jaxpr& jaxpr, const BufferOptions& options) {
  Assigner a(options, jaxpr);
  Entry top;
  size_t nconst = jaxpr.constvars.size();
  for (size_t k = 0; k < nconst + jaxpr.invars.size(); ++k) {
    bool is_const = k < nconst;
    Var v = is_const ? jaxpr.constvars[k] : jaxpr.invars[k - nconst];
    Type t = jaxpr.type_of(v);
    Buffer b;
    b.type = t.array;
    b.bytes = t.array.byte_size();
    b.origin = is_const ? BufferOrigin::constant : BufferOrigin::input;
    b.index = static_cast<int>(is_const ? k : k - nconst);
    bool donated = !is_const && static_cast<size_t>(b.index) < options.donated.size() &&
                   options.donated[b.index];
    b.writable = t.is_ref || donated;
    top.binders.push_back(b);
  }
  a.assign(jaxpr, std::move(top));
  std::vector<std::vector<int>>& merged = a.merged;
  merged.resize(a.out.jaxprs.size());
  for (size_t p = 0; p < merged.size(); ++p) merged[p].resize(a.out.jaxprs[p].buffers.size(), -1);
  compact(a.out, merged);
  if (options.fail_on_copy) check_no_copies_in_loops(a.names, a.out);
  return std::move(a.out);
}

}  // namespace refjit
