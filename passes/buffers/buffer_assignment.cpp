// Buffer assignment (docs/buffers.md): one forward walk per jaxpr deciding, eqn by eqn, which
// buffer each result lives in, with liveness counted per buffer. Sub-jaxprs are assigned
// when their eqn is reached, with binder buffers that stand for the parent's buffers.
#include "passes/buffers/buffer_assignment.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "ir/fused_body.h"
#include "ir/window_params.h"
#include "passes/buffers/buffer_assigner.h"
#include "passes/buffers/buffer_rules.h"
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

namespace buffers {

JaxprBuffers JaxprAssigner::run() {
  for (;;) {
    reset();
    walk();
    if (!restart_) break;
    a_.out.jaxprs.resize(self_ + 1);  // drop the sub-plans of the abandoned attempt
  }
  finish_outputs();
  return std::move(p_);
}

void JaxprAssigner::reset() {
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

bool JaxprAssigner::is_whole_overwrite(const Eqn& e, size_t operand) const {
  if (e.prim != Prim::swap || operand != 0) return false;
  const Indexer* idx = indexer(e);
  if (idx && !idx->is_whole()) return false;
  Var old = e.outs.at(0);
  return is_dropped(j_, old) || last_use_of(old) < 0;
}

int JaxprAssigner::last_use_of(Var v) const {
  // During reset the outs' uses are not all known yet; scan forward instead.
  for (size_t i = n_; i-- > 0;)
    for (const Atom& a : j_.eqns[i].ins)
      if (is_var(a) && as_var(a) == v) return static_cast<int>(i);
  for (const Atom& a : j_.outvars)
    if (is_var(a) && as_var(a) == v) return static_cast<int>(n_);
  return -1;
}

const Indexer* JaxprAssigner::indexer(const Eqn& e) {
  const ParamValue* pv = e.params.find("indexer");
  return pv ? std::get_if<Indexer>(pv) : nullptr;
}

bool JaxprAssigner::whole_indexer(const Eqn& e) {
  const Indexer* idx = indexer(e);
  return !idx || idx->is_whole();
}

int JaxprAssigner::add_buffer(Buffer b) {
  p_.buffers.push_back(std::move(b));
  merged_into_.push_back(-1);
  members_.emplace_back();
  return static_cast<int>(p_.buffers.size()) - 1;
}

int JaxprAssigner::fresh(const ArrayType& t, BufferOrigin origin, int index) {
  return add_buffer(Buffer{
      .type = t, .bytes = t.byte_size(), .origin = origin, .index = index, .writable = true});
}

bool JaxprAssigner::ref_content_live_after(Var r, int i) const {
  for (const auto& [eqn, overwrite] : ref_access_[r.id])
    if (eqn > i) return !overwrite;
  return def_[r.id] < 0;  // a binder's contents are seen by whoever passed the ref in
}

bool JaxprAssigner::live_after(int b, int i) const {
  for (uint32_t v : members_[b]) {
    if (def_[v] > i) continue;
    Var var{v};
    if (j_.type_of(var).is_ref ? ref_content_live_after(var, i) : last_use_[v] > i) return true;
  }
  return false;
}

std::optional<Var> JaxprAssigner::live_value(int b, int i) const {
  for (uint32_t v : members_[b]) {
    Var var{v};
    if (def_[v] <= i && !j_.type_of(var).is_ref && last_use_[v] > i) return var;
  }
  return std::nullopt;
}

std::string JaxprAssigner::use_text(int last) const {
  return last >= static_cast<int>(n_)
             ? std::string("an output")
             : fmt::format("eqn {} (`{}`)", last, prim_name(j_.eqns[last].prim));
}

std::string JaxprAssigner::why_not_writable(int b, int i) const {
  const Buffer& B = p_.buffers[b];
  if (!B.writable) {
    switch (B.origin) {
      case BufferOrigin::input: return fmt::format("it is input {}, which is not donated", B.index);
      case BufferOrigin::constant: return fmt::format("it is constant {}", B.index);
      case BufferOrigin::scan_const:
        return fmt::format("it is scan const {}, read by every iteration", B.index);
      case BufferOrigin::x_row: return fmt::format("it is a row of scanned input {}", B.index);
      case BufferOrigin::operand:
        return fmt::format("it is operand {} of the enclosing eqn, still needed outside", B.index);
      default: return "its buffer is not writable";
    }
  }
  if (std::optional<Var> v = live_value(b, i))
    return fmt::format("`{}` shares its buffer and is still used by {}", name(*v),
                       use_text(last_use_[v->id]));
  return "its buffer's contents are still needed afterwards (a ref read later)";
}

Copy JaxprAssigner::make_copy(CopyKind kind, int src, int dst, int64_t bytes, int eqn,
                              std::optional<Var> v, std::string why) const {
  return Copy{.kind = kind,
              .src = src,
              .dst = dst,
              .bytes = bytes,
              .in_loop = entry_.in_loop,
              .eqn = eqn,
              .value = v,
              .why = std::move(why)};
}

void JaxprAssigner::walk() {
  for (size_t i = 0; i < n_; ++i) {
    const Eqn& e = j_.eqns[i];
    p_.eqns[i].in_place.assign(e.outs.size(), -1);
    switch (buffer_behaviour(e.prim)) {
      case BufferBehaviour::fresh: all_fresh(e, i); break;
      case BufferBehaviour::elementwise: elementwise(e, i); break;
      case BufferBehaviour::fused: elementwise(e, i); break;
      case BufferBehaviour::view: view(e, i); break;
      case BufferBehaviour::read: read(e, i); break;
      case BufferBehaviour::update: update(e, i); break;
      case BufferBehaviour::ref_op: ref_op(e, i); break;
      case BufferBehaviour::structured: structured(e, i); break;
    }
    if (restart_) return;
  }
}

void JaxprAssigner::set(Var v, int b) {
  int& slot = p_.buffer_of_var[v.id];
  if (slot == b) return;
  if (slot >= 0) std::erase(members_[slot], v.id);
  slot = b;
  if (b < 0) return;
  std::vector<uint32_t>& m = members_[b];
  m.insert(std::lower_bound(m.begin(), m.end(), v.id), v.id);
}

void JaxprAssigner::all_fresh(const Eqn& e, size_t i) {
  for (Var v : e.outs) set(v, fresh(j_.type_of(v).array, BufferOrigin::internal, i));
}

void JaxprAssigner::elementwise(const Eqn& e, size_t i) {
  Var out = e.outs.at(0);
  const Type& t = j_.type_of(out);
  // A fused eqn's body may read an operand at other indices than the one it stores (a view, a
  // broadcast, a reduction's operand): only one read at the result's own index is overwritten.
  const Jaxpr* fused_body = e.prim == Prim::fused ? e.params.get<JaxprPtr>("jaxpr").get() : nullptr;
  for (size_t k = 0; k < e.ins.size(); ++k) {
    int b = buf(e.ins[k]);
    if (b < 0 || j_.type_of(e.ins[k]) != t || !p_.buffers[b].writable ||
        live_after(b, static_cast<int>(i)))
      continue;
    // (Every operand sharing b must be read at the result's index too.)
    bool at_own_index = true;
    for (size_t m = 0; m < e.ins.size() && fused_body; ++m)
      if (buf(e.ins[m]) == b) at_own_index &= read_at_result_index(*fused_body, m);
    if (!at_own_index) continue;
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

void JaxprAssigner::view(const Eqn& e, size_t i) {
  int b = buf(e.ins.at(0));
  if (b < 0) return all_fresh(e, i);
  Var out = e.outs.at(0);
  set(out, b);
  origin_get_[out.id] = origin_get_[as_var(e.ins[0]).id];
  p_.eqns[i].action = EqnAction::view;
  p_.eqns[i].in_place[0] = 0;
}

void JaxprAssigner::read(const Eqn& e, size_t i) {
  Var out = e.outs.at(0);
  const ArrayType& t = j_.type_of(out).array;
  int d = fresh(t, BufferOrigin::internal, i);
  set(out, d);
  int s = buf(e.ins.at(0));
  if (s >= 0)
    p_.eqns[i].copies.push_back(make_copy(CopyKind::read, s, d, t.byte_size(), i, as_var(e.ins[0]),
                                          "read into a buffer of its own"));
}

bool JaxprAssigner::reads_updated_buffer(const Eqn& e, int b) const {
  if (e.prim != Prim::move_windows) {
    for (size_t m = 1; m < e.ins.size(); ++m)
      if (buf(e.ins[m]) == b) return true;
    return false;
  }
  // move_windows moves the one window read from the destination first, with memmove (which
  // allows the overlap), then writes the others: that window must be one contiguous run, and
  // no other operand may be read from the destination.
  const MoveWindowsParams p = MoveWindowsParams::of(e);
  int windows_in_b = 0;
  for (size_t m = 1; m < e.ins.size(); ++m) {
    if (buf(e.ins[m]) != b) continue;
    const std::optional<size_t> k = p.window_of_source(m);
    if (!k || !p.contiguous_run(*k)) return true;
    ++windows_in_b;
  }
  return windows_in_b > 1;
}

void JaxprAssigner::update(const Eqn& e, size_t i) {
  Var out = e.outs.at(0);
  const ArrayType& t = j_.type_of(out).array;
  int b = buf(e.ins.at(0));
  int ii = static_cast<int>(i);
  if (b >= 0 && p_.buffers[b].writable && !live_after(b, ii)) {
    if (!reads_updated_buffer(e, b)) {
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
  std::string why =
      !p_.buffers[b].writable || live_after(b, ii)
          ? fmt::format("operand `{}` cannot be overwritten: {}", name(x), why_not_writable(b, ii))
          : fmt::format("operand `{}` is also read by this eqn", name(x));
  p_.eqns[i].copies.push_back(make_copy(CopyKind::whole, b, d, t.byte_size(), i, x, why));
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

namespace {

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

void check_no_copies_in_loops(const BufferNames& names, const BufferAssignment& out) {
  for (size_t pi = 0; pi < out.jaxprs.size(); ++pi) {
    const JaxprBuffers& p = out.jaxprs[pi];
    auto fail = [&](const Copy& c) {
      std::string value = c.value ? names.use(static_cast<int>(pi), *c.value) : "a literal";
      std::string at =
          c.eqn >= 0
              ? fmt::format("eqn {} (`{}`) `{}`", c.eqn, prim_name(p.jaxpr->eqns[c.eqn].prim),
                            names.eqn(static_cast<int>(pi), p.jaxpr->eqns[c.eqn], /*typed=*/true))
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

}  // namespace buffers

BufferAssignment assign_buffers(const Jaxpr& jaxpr, const BufferOptions& options) {
  buffers::Assigner a(options, jaxpr);
  buffers::Entry top;
  size_t nconst = jaxpr.constvars.size();
  for (size_t k = 0; k < nconst + jaxpr.invars.size(); ++k) {
    bool is_const = k < nconst;
    Var v = is_const ? jaxpr.constvars[k] : jaxpr.invars[k - nconst];
    const Type t = jaxpr.type_of(v);
    const size_t index = is_const ? k : k - nconst;
    const bool donated = !is_const && index < options.donated.size() && options.donated[index];
    top.binders.push_back(Buffer{.type = t.array,
                                 .bytes = t.array.byte_size(),
                                 .origin = is_const ? BufferOrigin::constant : BufferOrigin::input,
                                 .index = static_cast<int>(index),
                                 .writable = t.is_ref || donated});
  }
  a.assign(jaxpr, std::move(top));
  std::vector<std::vector<int>>& merged = a.merged;
  merged.resize(a.out.jaxprs.size());
  for (size_t p = 0; p < merged.size(); ++p) merged[p].resize(a.out.jaxprs[p].buffers.size(), -1);
  buffers::compact(a.out, merged);
  if (options.fail_on_copy) buffers::check_no_copies_in_loops(a.names, a.out);
  return std::move(a.out);
}

}  // namespace refjit
