// The text of a buffer plan (`refjit dump --emit=buffers`, format in docs/buffers.md) and the
// value names it uses.
#include <fmt/format.h>

#include "passes/buffers/buffer_assignment.h"
#include "passes/buffers/buffer_names.h"

namespace refjit {

namespace {

// a, ..., z, ba, ..., zz, baa, ...: the printer's scheme (digits base 26, 'a' is zero).
std::string alphabetic(uint64_t n) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('a' + n % 26));
    n /= 26;
  } while (n > 0);
  return s;
}

}  // namespace

BufferNames::BufferNames(const Jaxpr& top) { name_jaxpr(0, top); }

void BufferNames::bind(int plan, const Jaxpr& j, Var v) {
  if (v.id >= j.vars.size() || j.vars[v.id].dropped) return;
  if (plan < 0) {
    ++counter_;
    return;
  }
  std::string& n = names_[plan][v.id];
  if (n.empty()) n = alphabetic(counter_++);
}

namespace {
// Whether the sub-jaxpr in param `param` of `e` runs (and so has a plan).
bool executed(const Eqn& e, const std::string& param) {
  switch (e.prim) {
    case Prim::scan:
    case Prim::jit: return param == "jaxpr";
    case Prim::cond: return param == "branches";
    case Prim::while_: return param == "body_jaxpr";
    case Prim::custom_vjp_call: return param == "call_jaxpr";
    case Prim::linear_solve: return param == "solve_jaxpr";
    default: return false;
  }
}
}  // namespace

// Binders in the printer's order: constvars, invars, then per eqn its outs followed by the
// sub-jaxprs of its params (sorted by name, as printed).
void BufferNames::name_jaxpr(int plan, const Jaxpr& j) {
  if (plan >= 0) {
    if (jaxpr_.size() <= static_cast<size_t>(plan)) {
      jaxpr_.resize(plan + 1, nullptr);
      names_.resize(plan + 1);
    }
    jaxpr_[plan] = &j;
    names_[plan].assign(j.vars.size(), std::string());
  }
  for (Var v : j.constvars) bind(plan, j, v);
  for (Var v : j.invars) bind(plan, j, v);
  for (const Eqn& e : j.eqns) {
    for (Var v : e.outs) bind(plan, j, v);
    for (const auto& [name, value] : e.params.entries()) {
      auto visit = [&](const JaxprPtr& s) {
        if (!s) return;
        name_jaxpr(plan >= 0 && executed(e, name) ? static_cast<int>(jaxpr_.size()) : -1, *s);
      };
      if (const JaxprPtr* sub = std::get_if<JaxprPtr>(&value)) visit(*sub);
      if (const JaxprList* list = std::get_if<JaxprList>(&value))
        for (const JaxprPtr& s : *list) visit(s);
    }
  }
}

std::string BufferNames::use(int plan, Var v) const {
  const Jaxpr* j = plan >= 0 && static_cast<size_t>(plan) < jaxpr_.size() ? jaxpr_[plan] : nullptr;
  if (!j || v.id >= j->vars.size()) return "<bad var>";
  if (j->vars[v.id].dropped) return "_";
  const std::string& n = names_[plan][v.id];
  return n.empty() ? fmt::format("#{}", v.id) : n;
}

std::string BufferNames::binder(int plan, Var v) const {
  const Jaxpr* j = plan >= 0 && static_cast<size_t>(plan) < jaxpr_.size() ? jaxpr_[plan] : nullptr;
  if (!j || v.id >= j->vars.size()) return use(plan, v);
  return use(plan, v) + ":" + j->vars[v.id].type.str();
}

std::string BufferNames::eqn(int plan, const Eqn& e, bool typed) const {
  std::string s;
  for (Var v : e.outs) s += (s.empty() ? "" : " ") + (typed ? binder(plan, v) : use(plan, v));
  if (!s.empty()) s += " = ";
  s += prim_name(e.prim);
  for (const Atom& a : e.ins) s += " " + atom(plan, a);
  return s;
}

std::string BufferNames::atom(int plan, const Atom& a) const {
  if (is_var(a)) return use(plan, as_var(a));
  return std::get<Literal>(a).str();
}

namespace {

std::string buffer_text(const JaxprBuffers& p, const Buffer& b) {
  std::string outer = b.outer >= 0 ? fmt::format(" = outer b{}", b.outer) : std::string();
  std::string s;
  switch (b.origin) {
    case BufferOrigin::input: s = fmt::format("input {}", b.index); break;
    case BufferOrigin::constant: s = fmt::format("const {}", b.index); break;
    case BufferOrigin::internal:
      s = fmt::format("eqn {} ({})", b.index, prim_name(p.jaxpr->eqns.at(b.index).prim));
      break;
    case BufferOrigin::ref: s = fmt::format("new_ref at eqn {}", b.index); break;
    default:
      s = fmt::format("{} {}{}", origin_name(b.origin), b.index,
                      b.outer >= 0 ? outer : std::string(" (a literal)"));
      outer.clear();
  }
  if (b.home >= 0) {
    if (p.parent < 0)
      s += b.origin == BufferOrigin::input ? fmt::format(", returned as output {}", b.home)
                                           : fmt::format(", is output {}", b.home);
    else
      s += fmt::format(", is result {} of the eqn{}", b.home, outer);
  }
  if (b.origin == BufferOrigin::input || b.origin == BufferOrigin::constant)
    s += b.writable ? ", writable" : ", read-only";
  return s;
}

std::string copy_text(const BufferNames& names, int plan, const Copy& c) {
  const char* kind = c.kind == CopyKind::whole  ? "whole"
                     : c.kind == CopyKind::read ? "read"
                                                : "fill";
  std::string src = c.src >= 0 ? fmt::format("b{}", c.src) : std::string("literal");
  std::string value = c.value ? fmt::format(", of `{}`", names.use(plan, *c.value)) : std::string();
  return fmt::format("{} {} -> b{}, {} bytes, {}{}: {}", kind, src, c.dst, c.bytes,
                     c.in_loop ? "in loop" : "outside loops", value, c.why);
}

std::string eqn_action_text(const BufferNames& names, int plan, const JaxprBuffers& p,
                            const EqnBuffers& eb, const Eqn& e) {
  auto opbuf = [&](int k) {
    int b = is_var(e.ins.at(k)) ? p.buffer_of_var[as_var(e.ins[k]).id] : -1;
    return b >= 0 ? fmt::format("b{}", b) : std::string("literal");
  };
  switch (eb.action) {
    case EqnAction::fresh: return "fresh";
    case EqnAction::view: return fmt::format("view of operand 0 ({})", opbuf(0));
    case EqnAction::move: return fmt::format("move: takes operand 0's buffer ({})", opbuf(0));
    case EqnAction::no_op:
      return fmt::format("no-op: `{}` is already in ref `{}`'s buffer ({})",
                         names.atom(plan, e.ins.at(1)), names.atom(plan, e.ins.at(0)), opbuf(0));
    case EqnAction::in_place:
      if (!eb.in_place.empty() && eb.in_place[0] >= 0)
        return fmt::format("in place on operand {} ({})", eb.in_place[0], opbuf(eb.in_place[0]));
      return fmt::format("in place on ref `{}` ({})", names.atom(plan, e.ins.at(0)), opbuf(0));
    case EqnAction::structured: {
      std::string s = "structured";
      for (size_t k = 0; k < eb.in_place.size(); ++k)
        if (eb.in_place[k] >= 0)
          s += fmt::format("; result {} in operand {}'s buffer ({})", k, eb.in_place[k],
                           opbuf(eb.in_place[k]));
      for (int sp : eb.sub_plans) s += fmt::format("; plan {}", sp);
      return s;
    }
  }
  return "?";
}

}  // namespace

std::string print_buffer_plan(const Jaxpr& jaxpr, const BufferAssignment& plan) {
  BufferNames names(jaxpr);
  std::string out;
  for (size_t pi = 0; pi < plan.jaxprs.size(); ++pi) {
    const JaxprBuffers& p = plan.jaxprs[pi];
    int ip = static_cast<int>(pi);
    out +=
        fmt::format("plan {}: {} ({})\n", pi, p.where, p.in_loop ? "in a loop" : "outside loops");
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const Buffer& B = p.buffers[b];
      out += fmt::format("  buffer b{} {} {} bytes: {}\n", b, B.type.str(), B.bytes,
                         buffer_text(p, B));
    }
    const Jaxpr& j = *p.jaxpr;
    auto value_line = [&](Var v) {
      if (j.vars[v.id].dropped) return;
      int b = p.buffer_of_var[v.id];
      out += fmt::format("  value {} {}\n", names.binder(ip, v),
                         b >= 0 ? fmt::format("b{}", b) : std::string("-"));
    };
    for (Var v : j.constvars) value_line(v);
    for (Var v : j.invars) value_line(v);
    for (const Eqn& e : j.eqns)
      for (Var v : e.outs) value_line(v);
    for (size_t i = 0; i < j.eqns.size() && i < p.eqns.size(); ++i) {
      const EqnBuffers& eb = p.eqns[i];
      out += fmt::format("  eqn {} {}: {}\n", i, prim_name(j.eqns[i].prim),
                         eqn_action_text(names, ip, p, eb, j.eqns[i]));
      for (const Copy& c : eb.copies) out += "    copy " + copy_text(names, ip, c) + "\n";
    }
    for (const Copy& c : p.end_copies) out += "  end copy " + copy_text(names, ip, c) + "\n";
  }
  CopyStats s = plan.stats();
  out += fmt::format(
      "copies: {} whole in loops ({} bytes per iteration), {} whole outside loops ({} bytes), "
      "{} reads ({} bytes), {} fills\n",
      s.whole_in_loop, s.whole_in_loop_bytes, s.whole_outside, s.whole_outside_bytes, s.read,
      s.read_bytes, s.fill);
  return out;
}

}  // namespace refjit
