// The trace stack, lifting, bind_prim/bind_jaxpr and trace_function (refjit/trace.h).
#include "refjit/trace.h"

#include <fmt/format.h>

#include <atomic>
#include <ostream>

#include "api/trace_state.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"

namespace refjit {

namespace detail {

namespace {

thread_local std::vector<Trace*> trace_stack;
std::atomic<uint64_t> next_trace_id{1};

[[noreturn]] void throw_escaped(const Type& type) {
  throw Error(fmt::format(
      "a traced {} is used after the function that produced it finished tracing (an escaped "
      "tracer); return it from the traced function instead of storing it outside",
      type.str()));
}

[[noreturn]] void throw_frozen(const Type& type) {
  throw RefError("E12", fmt::format("a {} is used after freeze(); a frozen ref may not be read "
                                    "or written: keep the Value freeze() returned, or create a "
                                    "new ref with new_ref()",
                                    type.str()));
}

Literal literal_of(const Array& a) {
  if (is_complex(a.dtype())) {
    const std::complex<double> z = a.as_complex(0);
    return Literal::of_complex(a.dtype(), z.real(), z.imag());
  }
  if (is_float(a.dtype())) return Literal::of_float(a.dtype(), a.as_double(0));
  if (is_bool(a.dtype())) return Literal::of_bool(a.as_int(0) != 0);
  return Literal::of_int(a.dtype(), a.as_int(0));
}

}  // namespace

Trace::Trace(std::string name) : id_(next_trace_id++), name_(std::move(name)) {}

Operand Trace::add_invar(const Type& type) { return wrap(builder_.add_invar(type)); }

Operand Trace::wrap(Var v) const {
  const Type& t = builder_.jaxpr().type_of(v);
  NodePtr n = traced_node(t, id_, v);
  if (t.is_ref) return NodeAccess::ref(std::move(n));
  return NodeAccess::value(std::move(n));
}

Atom Trace::lift(const Operand& x) {
  const Node& n = *node_of(x);
  if (n.trace_id == id_) {
    if (n.type.is_ref && is_frozen(n.var)) throw_frozen(n.type);
    return n.var;
  }
  CaptureKey key;
  if (n.concrete()) {
    if (n.type.is_ref) {
      if (n.buffer->frozen()) throw_frozen(n.type);
      key = {n.buffer.get(), 0, 0};
    } else {
      check_not_donated(n);
      if (n.array.rank() == 0) return literal_of(n.array);
      key = {&n, 0, 0};
    }
  } else {
    Trace* owner = find_trace(n.trace_id);
    if (!owner) throw_escaped(n.type);
    if (n.type.is_ref && owner->is_frozen(n.var)) throw_frozen(n.type);
    key = {nullptr, n.trace_id, n.var.id};
  }
  auto it = capture_index_.find(key);
  if (it != capture_index_.end()) return it->second;
  Var v = builder_.add_constvar(n.type);
  capture_index_.emplace(key, v);
  captured_.push_back(x);
  return v;
}

Trace* current_trace() { return trace_stack.empty() ? nullptr : trace_stack.back(); }

Trace* find_trace(uint64_t id) {
  for (Trace* t : trace_stack)
    if (t->id() == id) return t;
  return nullptr;
}

TraceScope::TraceScope(Trace& t) { trace_stack.push_back(&t); }
TraceScope::~TraceScope() { trace_stack.pop_back(); }

RtValue to_runtime(const Operand& x, std::string_view what) {
  const Node& n = *node_of(x);
  if (!n.concrete()) {
    if (!find_trace(n.trace_id)) throw_escaped(n.type);
    throw Error(fmt::format("{}: a traced {} reached eager evaluation; this is a refjit bug", what,
                            n.type.str()));
  }
  if (n.type.is_ref) {
    if (n.buffer->frozen()) throw_frozen(n.type);
    return n.buffer;
  }
  check_not_donated(n);
  return n.array;
}

void check_not_donated(const Node& n) {
  if (!n.donated_to.empty())
    throw Error(
        fmt::format("this {} was donated to jit function `{}` (donate_argnums) and its "
                    "array now belongs to that call's result; use the result, or do "
                    "not donate a value you still need",
                    n.type.str(), n.donated_to));
}

RtValue take_donated(const Operand& x, std::string_view fn) {
  const Node& n = *node_of(x);
  if (n.type.is_ref)
    throw Error(
        fmt::format("jit function `{}`: a donated argument is a {}; refs are updated in "
                    "place already, donate only arrays",
                    fn, n.type.str()));
  RtValue v = to_runtime(x, fn);
  n.array = Array();  // the result may now own the storage alone
  n.donated_to = std::string(fn);
  return v;
}

Operand from_runtime(RtValue v) {
  if (auto* b = std::get_if<RefBufferPtr>(&v))
    return NodeAccess::ref(concrete_ref_node(std::move(*b)));
  return NodeAccess::value(concrete_array_node(std::move(std::get<Array>(v))));
}

}  // namespace detail

using detail::current_trace;
using detail::Trace;

Type type_of(const Operand& x) { return detail::node_of(x)->type; }

std::vector<Type> types_of(std::span<const Operand> xs) {
  std::vector<Type> ts;
  ts.reserve(xs.size());
  for (const Operand& x : xs) ts.push_back(type_of(x));
  return ts;
}

bool is_tracing() { return current_trace() != nullptr; }

std::vector<Operand> bind_prim(Prim prim, std::span<const Operand> ins, Params params,
                               bool drop_outputs) {
  Trace* t = current_trace();
  if (t) {
    std::vector<Atom> atoms;
    atoms.reserve(ins.size());
    for (const Operand& x : ins) atoms.push_back(t->lift(x));
    std::vector<Var> outs = t->builder().add_eqn(prim, std::move(atoms), std::move(params));
    if (prim == Prim::freeze) t->mark_frozen(as_var(t->lift(ins[0])));
    std::vector<Operand> result;
    for (Var v : outs) {
      if (drop_outputs) t->builder().jaxpr().vars.at(v.id).dropped = true;
      result.push_back(t->wrap(v));
    }
    return result;
  }
  // Eager: a one-eqn jaxpr whose invars are the operands.
  JaxprBuilder b;
  std::vector<Atom> atoms;
  std::vector<RtValue> args;
  for (const Operand& x : ins) {
    args.push_back(detail::to_runtime(x, prim_name(prim)));
    atoms.push_back(b.add_invar(type_of(x)));
  }
  std::vector<Var> outs = b.add_eqn(prim, std::move(atoms), std::move(params));
  b.set_outvars(std::vector<Atom>(outs.begin(), outs.end()));
  Jaxpr j = b.finish();
  std::vector<RtValue> results = detail::execute(j, args);
  if (prim == Prim::freeze) std::get<RefBufferPtr>(args[0])->mark_frozen();
  std::vector<Operand> out;
  for (RtValue& r : results) out.push_back(detail::from_runtime(std::move(r)));
  return out;
}

Value bind_prim1(Prim prim, std::span<const Operand> ins, Params params) {
  std::vector<Operand> outs = bind_prim(prim, ins, std::move(params));
  if (outs.size() != 1 || !std::holds_alternative<Value>(outs[0]))
    throw Error(fmt::format("{} does not have exactly one array output", prim_name(prim)));
  return std::get<Value>(outs[0]);
}

namespace {

bool same_ref(const Operand& a, const Operand& b) {
  const auto* ra = std::get_if<Ref>(&a);
  const auto* rb = std::get_if<Ref>(&b);
  return ra && rb && ra->same_as(*rb);
}

}  // namespace

void check_ref_aliasing(std::span<const Operand> args, std::span<const Operand> captured,
                        std::string_view what) {
  for (size_t i = 0; i < args.size(); ++i) {
    for (size_t j = i + 1; j < args.size(); ++j) {
      if (same_ref(args[i], args[j]))
        throw RefError("E7",
                       fmt::format("{}: the same {} is passed as argument {} and as argument {}; a "
                                   "ref may be passed only once (refs passed to one call must not "
                                   "alias). Pass it once and use that parameter in both places",
                                   what, type_of(args[i]).str(), i, j));
    }
    for (const Operand& c : captured) {
      if (same_ref(args[i], c))
        throw RefError(
            "E8", fmt::format("{}: the {} passed as argument {} is also closed over by the "
                              "function; a ref may be either captured or passed, not both. Use "
                              "the parameter inside the function instead of the captured ref",
                              what, type_of(args[i]).str(), i));
    }
  }
}

TracedFunction trace_function(const TraceBody& f, std::span<const Type> in_types,
                              std::string_view name) {
  Trace t{std::string(name)};
  std::vector<Operand> outs;
  std::vector<Operand> args;
  {
    detail::TraceScope scope(t);
    for (const Type& ty : in_types) args.push_back(t.add_invar(ty));
    outs = f(args);
    std::vector<Atom> out_atoms;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (const Ref* r = std::get_if<Ref>(&outs[k])) {
        std::string origin = "a ref created inside the function by new_ref";
        for (size_t a = 0; a < args.size(); ++a)
          if (const Ref* ar = std::get_if<Ref>(&args[a]); ar && ar->same_as(*r))
            origin = fmt::format("the ref passed as argument {}", a);
        if (!detail::node_of(*r)->concrete() && detail::node_of(*r)->trace_id != t.id())
          origin = "a ref closed over from an enclosing function";
        else if (detail::node_of(*r)->concrete())
          origin = "a ref closed over by the function";
        throw RefError("E9", fmt::format("traced function `{}` returns a {} at output {} ({}); "
                                         "refs cannot be returned from jit, scan, cond or loop "
                                         "bodies. Return its contents instead (r.get(), or "
                                         "freeze(r) for a ref created inside)",
                                         name, detail::node_of(*r)->type.str(), k, origin));
      }
      out_atoms.push_back(t.lift(outs[k]));
    }
    t.builder().set_outvars(std::move(out_atoms));
  }
  TracedFunction result;
  result.consts = t.captured();
  result.jaxpr = std::make_shared<const Jaxpr>(t.builder().finish());
  return result;
}

Jaxpr consts_to_invars(const Jaxpr& jaxpr) {
  Jaxpr j = jaxpr;
  j.invars.insert(j.invars.begin(), j.constvars.begin(), j.constvars.end());
  j.constvars.clear();
  return j;
}

std::vector<Operand> bind_jaxpr(std::string_view name, const TracedFunction& fn,
                                std::span<const Operand> args) {
  check_ref_aliasing(args, fn.consts, fmt::format("jit function `{}`", name));
  if (args.size() != fn.jaxpr->invars.size())
    throw Error(fmt::format("jit function `{}` takes {} arguments but {} were given", name,
                            fn.jaxpr->invars.size(), args.size()));
  std::vector<Operand> operands = fn.consts;
  operands.insert(operands.end(), args.begin(), args.end());
  if (!current_trace()) {
    std::vector<RtValue> rt;
    for (const Operand& x : operands) rt.push_back(detail::to_runtime(x, name));
    std::vector<RtValue> results = detail::execute(*fn.jaxpr, rt);
    std::vector<Operand> out;
    for (RtValue& r : results) out.push_back(detail::from_runtime(std::move(r)));
    return out;
  }
  auto body = std::make_shared<const Jaxpr>(consts_to_invars(*fn.jaxpr));
  return bind_prim(Prim::jit, operands,
                   Params{{"name", std::string(name)}, {"jaxpr", JaxprPtr(body)}});
}

std::string ClosedJaxpr::str() const { return print_jaxpr(*jaxpr); }

std::vector<Operand> ClosedJaxpr::call(std::span<const Operand> args) const {
  return bind_jaxpr("jit", TracedFunction{jaxpr, consts}, args);
}

std::ostream& operator<<(std::ostream& os, const ClosedJaxpr& j) { return os << j.str(); }

}  // namespace refjit
