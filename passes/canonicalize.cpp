#include "passes/canonicalize.h"

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "passes/dce.h"
#include "passes/jaxpr_util.h"
#include "passes/window_sums.h"

namespace refjit {
namespace {

bool is_rank0(const Jaxpr& j, const Atom& a) { return j.type_of(a).array.rank() == 0; }

IntList broadcast_dims_of(const Eqn& e) {
  return e.params.get_or<IntList>("broadcast_dimensions", {});
}

// Whether a slice eqn takes every element along its range (no strides other than 1).
bool unit_strides(const Eqn& e) {
  const ParamValue* s = e.params.find("strides");
  if (!s || std::holds_alternative<NoneParam>(*s)) return true;
  const IntList* l = std::get_if<IntList>(s);
  if (!l) return false;
  for (int64_t k : *l)
    if (k != 1) return false;
  return true;
}

class Canonicalizer {
 public:
  explicit Canonicalizer(Jaxpr& j) : j_(j) {}

  int run() {
    changes_ += sum_window_accumulations(j_);
    std::vector<Eqn> in = std::move(j_.eqns);
    j_.eqns.clear();
    j_.eqns.reserve(in.size());
    for (Eqn& e : in) {
      for (Atom& a : e.ins) a = subst_(a);
      rewrite_bodies(e);
      compose_broadcasts(e);
      sum_over_unit_dims(e);
      if (does_nothing(e) || slice_of_concatenate(e) || reshape_of_broadcast(e) ||
          reshape_of_reshape(e) || scalar_arithmetic(e) || sum_of_broadcast_scalar(e) ||
          repeats_an_earlier_eqn(e))
        continue;
      push(std::move(e));
    }
    for (Atom& a : j_.outvars) a = subst_(a);
    return changes_;
  }

 private:
  const Eqn* def(const Atom& a) const {
    if (!is_var(a)) return nullptr;
    auto it = defs_.find(as_var(a).id);
    return it == defs_.end() ? nullptr : &j_.eqns[it->second];
  }

  void push(Eqn e) {
    for (Var o : e.outs) defs_[o.id] = j_.eqns.size();
    if (reusable(e)) computed_[computation_key(e)].push_back(j_.eqns.size());
    j_.eqns.push_back(std::move(e));
  }

  // Whether another eqn computing the same may take this one's results instead: no effects,
  // no refs, no sub-jaxprs, no communication (every rank must run the same collectives) and no
  // host call.
  bool reusable(const Eqn& e) const {
    const PrimInfo& info = prim_info(e.prim);
    if (info.effect != RefEffect::none || info.has_subjaxprs || info.communicates ||
        info.host_effect || e.outs.empty())
      return false;
    return !touches_refs(j_, e);
  }

  // Groups eqns that may compute the same (primitive and operand vars; params are compared
  // when a candidate is found).
  static std::string computation_key(const Eqn& e) {
    std::string key = std::to_string(static_cast<int>(e.prim));
    for (const Atom& a : e.ins)
      key += is_var(a) ? "," + std::to_string(as_var(a).id) : std::string(",lit");
    return key;
  }

  // Common subexpressions: an eqn computing what an earlier one computed (same primitive,
  // operands and params) is dropped, and its results are the earlier one's.
  bool repeats_an_earlier_eqn(const Eqn& e) {
    if (!reusable(e)) return false;
    auto it = computed_.find(computation_key(e));
    if (it == computed_.end()) return false;
    for (size_t k : it->second) {
      const Eqn& earlier = j_.eqns[k];
      if (earlier.prim != e.prim || earlier.ins != e.ins || earlier.outs.size() != e.outs.size() ||
          earlier.params.entries() != e.params.entries())
        continue;
      for (size_t i = 0; i < e.outs.size(); ++i)
        if (j_.type_of(earlier.outs[i]) != j_.type_of(e.outs[i])) return false;
      for (size_t i = 0; i < e.outs.size(); ++i) subst_.set(e.outs[i], earlier.outs[i]);
      ++changes_;
      return true;
    }
    return false;
  }

  // The eqn is dropped: its single result is `x` from now on.
  bool forward(const Eqn& e, const Atom& x) {
    if (j_.type_of(x) != j_.type_of(e.outs[0])) return false;
    subst_.set(e.outs[0], x);
    ++changes_;
    return true;
  }

  // Whether `a` is the literal one, or a broadcast of it.
  bool is_one(const Atom& a) const {
    if (const Literal* l = std::get_if<Literal>(&a)) return l->equals(1.0);
    const Eqn* b = def(a);
    return b && b->prim == Prim::broadcast_in_dim && b->ins.size() == 1 && is_one(b->ins[0]);
  }

  // Eqns whose result is their operand: a slice of everything, a sum over no axes, a product
  // with one (differentiation multiplies cotangents by ones), a pad by nothing. `forward`
  // checks the types.
  bool does_nothing(const Eqn& e) {
    if (e.outs.size() != 1 || e.ins.empty() || !is_var(e.ins[0])) return false;
    switch (e.prim) {
      case Prim::slice: {
        const Shape& s = j_.type_of(e.ins[0]).array.shape;
        const IntList& start = e.params.get<IntList>("start_indices");
        const IntList& limit = e.params.get<IntList>("limit_indices");
        if (!unit_strides(e) || start.size() != s.size() || limit.size() != s.size()) return false;
        for (size_t k = 0; k < s.size(); ++k)
          if (start[k] != 0 || limit[k] != s[k]) return false;
        return forward(e, e.ins[0]);
      }
      case Prim::reduce_sum: return e.params.get<IntList>("axes").empty() && forward(e, e.ins[0]);
      case Prim::pad:
        for (const IntList& c : e.params.get<IntListList>("padding_config"))
          for (int64_t k : c)
            if (k != 0) return false;
        return forward(e, e.ins[0]);
      case Prim::mul:
        if (e.ins.size() != 2) return false;
        if (is_one(e.ins[1]) && forward(e, e.ins[0])) return true;
        return is_var(e.ins[1]) && is_one(e.ins[0]) && forward(e, e.ins[1]);
      default: return false;
    }
  }

  bool slice_of_concatenate(Eqn& e) {
    if (e.prim != Prim::slice || e.outs.size() != 1 || !unit_strides(e)) return false;
    const Eqn* c = def(e.ins.at(0));
    if (!c || c->prim != Prim::concatenate) return false;
    const auto d = static_cast<size_t>(c->params.get<int64_t>("dimension"));
    IntList start = e.params.get<IntList>("start_indices");
    IntList limit = e.params.get<IntList>("limit_indices");
    if (d >= start.size() || d >= limit.size()) return false;
    int64_t offset = 0;
    for (const Atom& operand : c->ins) {
      const Shape& s = j_.type_of(operand).array.shape;
      const int64_t n = s.at(d);
      if (start[d] >= offset && limit[d] <= offset + n) {
        start[d] -= offset;
        limit[d] -= offset;
        bool whole = true;
        for (size_t k = 0; k < s.size(); ++k) whole &= start[k] == 0 && limit[k] == s[k];
        if (whole) return forward(e, operand);
        e.ins[0] = operand;
        e.params.set("start_indices", start);
        e.params.set("limit_indices", limit);
        ++changes_;
        push(std::move(e));
        return true;
      }
      offset += n;
    }
    return false;
  }

  static bool plain_reshape(const Eqn& e) {
    return e.prim == Prim::reshape && e.ins.size() == 1 &&
           (!e.params.find("dimensions") ||
            std::holds_alternative<NoneParam>(*e.params.find("dimensions")));
  }

  static Eqn reshape_eqn(const Atom& x, Var out, const Shape& shape) {
    return Eqn{Prim::reshape,
               Params{{"dimensions", NoneParam{}}, {"new_sizes", IntList(shape)}},
               {x},
               {out}};
  }

  // A sum over dims of size 1 adds nothing: it is a reshape (a gradient sums a [1, n]
  // cotangent over its first dim).
  void sum_over_unit_dims(Eqn& e) {
    if (e.prim != Prim::reduce_sum || e.ins.size() != 1 || e.outs.size() != 1) return;
    const Shape& x = j_.type_of(e.ins[0]).array.shape;
    const IntList& axes = e.params.get<IntList>("axes");
    if (axes.empty()) return;  // does_nothing forwards it
    for (int64_t a : axes)
      if (a < 0 || static_cast<size_t>(a) >= x.size() || x[static_cast<size_t>(a)] != 1) return;
    e = reshape_eqn(e.ins[0], e.outs[0], j_.type_of(e.outs[0]).array.shape);
    ++changes_;
  }

  // A reshape of a reshape reshapes the first one's operand (or is it).
  bool reshape_of_reshape(const Eqn& e) {
    if (!plain_reshape(e)) return false;
    const Eqn* inner = def(e.ins[0]);
    if (!inner || !plain_reshape(*inner) || j_.type_of(inner->ins[0]).is_ref) return false;
    if (forward(e, inner->ins[0])) return true;  // back to the operand's shape
    Eqn direct = reshape_eqn(inner->ins[0], e.outs[0], j_.type_of(e.outs[0]).array.shape);
    if (!repeats_an_earlier_eqn(direct)) push(std::move(direct));
    ++changes_;
    return true;
  }

  // A reshape of a broadcast that only drops or inserts size-1 dims is a broadcast of the same
  // operand (or the operand itself, when that is what it gives back).
  bool reshape_of_broadcast(const Eqn& e) {
    if (!plain_reshape(e) && e.prim != Prim::squeeze) return false;
    const Eqn* b = def(e.ins.at(0));
    if (!b || b->prim != Prim::broadcast_in_dim || b->ins.size() != 1) return false;
    const Shape& x = j_.type_of(b->outs[0]).array.shape;
    const Shape& y = j_.type_of(b->ins[0]).array.shape;
    const Shape& out = j_.type_of(e.outs[0]).array.shape;
    const IntList dims = broadcast_dims_of(*b);
    if (dims.size() != y.size()) return false;
    // x's dims of size > 1 in order, and where each lands in the result.
    std::vector<int64_t> landing(x.size(), -1);
    size_t next = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      if (x[k] == 1) continue;
      while (next < out.size() && out[next] == 1) ++next;
      if (next == out.size() || out[next] != x[k]) return false;
      landing[k] = static_cast<int64_t>(next++);
    }
    while (next < out.size() && out[next] == 1) ++next;
    if (next != out.size()) return false;
    // The operand's dims through both: each must land on a dim of the result.
    IntList out_dims;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 0 || static_cast<size_t>(dims[i]) >= x.size()) return false;
      const int64_t to = landing[static_cast<size_t>(dims[i])];
      if (to < 0) {
        if (out == y) return forward(e, b->ins[0]);  // the broadcast only inserted size-1 dims
        return false;
      }
      out_dims.push_back(to);
    }
    bool identity = out == y;
    for (size_t i = 0; i < out_dims.size(); ++i) identity &= out_dims[i] == static_cast<int64_t>(i);
    if (identity) return forward(e, b->ins[0]);
    Eqn broadcast{Prim::broadcast_in_dim,
                  Params{{"shape", IntList(out)}, {"broadcast_dimensions", out_dims}},
                  {b->ins[0]},
                  {e.outs[0]}};
    if (!repeats_an_earlier_eqn(broadcast)) push(std::move(broadcast));
    ++changes_;
    return true;
  }

  // A broadcast of a broadcast reads the inner one's operand directly: JAX spells `x @ w + b`
  // as b broadcast to [1, n], then (implicitly) to [m, n]; one broadcast of b leaves no [1, n]
  // array between the product and its consumer (and lets them fuse, fusion.h).
  void compose_broadcasts(Eqn& e) {
    if (e.prim != Prim::broadcast_in_dim || e.ins.size() != 1) return;
    const Eqn* inner = def(e.ins[0]);
    if (!inner || inner->prim != Prim::broadcast_in_dim || inner->ins.size() != 1 ||
        j_.type_of(inner->ins[0]).is_ref)
      return;
    const IntList outer_dims = broadcast_dims_of(e), inner_dims = broadcast_dims_of(*inner);
    const size_t mid_rank = static_cast<size_t>(j_.type_of(inner->outs[0]).array.rank());
    if (outer_dims.size() != mid_rank) return;
    IntList dims;
    for (int64_t d : inner_dims) {
      if (d < 0 || static_cast<size_t>(d) >= mid_rank) return;
      dims.push_back(outer_dims[static_cast<size_t>(d)]);
    }
    e.ins[0] = inner->ins[0];
    e.params.set("broadcast_dimensions", dims);
    ++changes_;
  }

  // The scalar an operand stands for: a rank-0 atom, or the operand of its broadcast.
  std::optional<Atom> scalar_of(const Atom& a, bool& broadcast) const {
    if (is_rank0(j_, a)) return a;
    const Eqn* b = def(a);
    if (b && b->prim == Prim::broadcast_in_dim && b->ins.size() == 1 && is_rank0(j_, b->ins[0])) {
      broadcast = true;
      return b->ins[0];
    }
    return std::nullopt;
  }

  bool scalar_arithmetic(Eqn& e) {
    if ((e.prim != Prim::add && e.prim != Prim::sub && e.prim != Prim::mul) || e.outs.size() != 1 ||
        e.ins.size() != 2)
      return false;
    const ArrayType t = j_.type_of(e.outs[0]).array;
    if (t.rank() == 0) return false;
    bool broadcast = false;
    std::optional<Atom> a = scalar_of(e.ins[0], broadcast), b = scalar_of(e.ins[1], broadcast);
    if (!a || !b || !broadcast) return false;
    const Var s = j_.new_var(Type(ArrayType{t.dtype, {}}));
    push(Eqn{e.prim, e.params, {*a, *b}, {s}});
    push_broadcast(s, e.outs[0]);
    ++changes_;
    return true;
  }

  // `out` = scalar `s` broadcast to out's shape.
  void push_broadcast(Var s, Var out) {
    push(Eqn{Prim::broadcast_in_dim,
             Params{{"shape", IntList(j_.type_of(out).array.shape)},
                    {"broadcast_dimensions", IntList{}},
                    {"sharding", NoneParam{}}},
             {s},
             {out}});
  }

  // A sum of a broadcast scalar is the scalar times the count of elements summed into each
  // result (the gradient of a bias added over a batch sums a cotangent of ones). Integers wrap
  // the same either way; a float count must be exact (at most 2^24) and only f32 and f64 are
  // taken (a sum in a narrower float rounds at every step).
  bool sum_of_broadcast_scalar(const Eqn& e) {
    if (e.prim != Prim::reduce_sum || e.outs.size() != 1 || e.ins.size() != 1) return false;
    const Eqn* b = def(e.ins[0]);
    if (!b || b->prim != Prim::broadcast_in_dim || b->ins.size() != 1 || !is_rank0(j_, b->ins[0]))
      return false;
    const ArrayType t = j_.type_of(e.outs[0]).array;
    const ArrayType xt = j_.type_of(e.ins[0]).array;
    const DType d = t.dtype;
    const bool exact_float = d == DType::f32 || d == DType::f64;
    if (t.num_elements() == 0 || (!exact_float && !is_int(d))) return false;
    const int64_t count = xt.num_elements() / t.num_elements();
    if (exact_float && count > (int64_t{1} << 24)) return false;
    const Literal n =
        exact_float ? Literal::of_float(d, static_cast<double>(count)) : Literal::of_int(d, count);
    if (t.rank() == 0) {
      push(Eqn{Prim::mul, {}, {b->ins[0], n}, {e.outs[0]}});
    } else {
      const Var s = j_.new_var(Type(ArrayType{d, {}}));
      push(Eqn{Prim::mul, {}, {b->ins[0], n}, {s}});
      push_broadcast(s, e.outs[0]);
    }
    ++changes_;
    return true;
  }

  // Sub-jaxprs are canonicalised too; scan consts computed from nothing move into the body.
  void rewrite_bodies(Eqn& e) {
    if (e.prim == Prim::scan) {
      Jaxpr body = *e.params.get<JaxprPtr>("jaxpr");
      if (const int n = sink_nullary_consts(e, body); n > 0) {
        e.params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(body)));
        changes_ += n;
      }
    }
    changes_ += rewrite_body(e, [](Jaxpr& body) { return Canonicalizer(body).run(); });
  }

  int sink_nullary_consts(const Eqn& scan, Jaxpr& body) const {
    const auto num_consts = static_cast<size_t>(scan.params.get<int64_t>("num_consts"));
    std::vector<Eqn> moved;
    for (size_t p = 0; p < num_consts && p < scan.ins.size() && p < body.invars.size(); ++p) {
      const Eqn* d = def(scan.ins[p]);
      if (!d || d->outs.size() != 1 || (d->prim != Prim::iota && d->prim != Prim::broadcast_in_dim))
        continue;
      bool nullary = true;
      for (const Atom& a : d->ins) nullary &= !is_var(a);
      if (!nullary) continue;
      const Var inner = body.invars[p];
      body.invars[p] = body.new_var(body.type_of(inner));  // the operand, now unused
      moved.push_back(Eqn{d->prim, d->params, d->ins, {inner}});
    }
    body.eqns.insert(body.eqns.begin(), moved.begin(), moved.end());
    return static_cast<int>(moved.size());
  }

  Jaxpr& j_;
  Substitution subst_;
  std::unordered_map<uint32_t, size_t> defs_;
  std::unordered_map<std::string, std::vector<size_t>> computed_;  // computation_key -> eqns
  int changes_ = 0;
};

}  // namespace

Jaxpr canonicalize(const Jaxpr& jaxpr, int* changes) {
  int n = 0;
  Jaxpr out = rewritten_copy(
      jaxpr, [](Jaxpr& j) { return Canonicalizer(j).run(); }, &n);
  if (changes) *changes = n;
  return n > 0 ? dce(out) : out;
}

}  // namespace refjit
