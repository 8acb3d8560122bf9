#include "passes/dead_regions.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>

#include "passes/buffer_rules.h"
#include "passes/jaxpr_util.h"
#include "passes/trim_rows.h"

namespace refjit {
namespace {

// A static slice with unit strides: it reads one box of its operand.
bool is_box_slice(const Eqn& e) {
  if (e.prim != Prim::slice || e.ins.size() != 1 || e.outs.size() != 1) return false;
  const ParamValue* s = e.params.find("strides");
  if (!s || std::holds_alternative<NoneParam>(*s)) return true;
  const IntList* strides = std::get_if<IntList>(s);
  return strides && std::all_of(strides->begin(), strides->end(), [](int64_t v) { return v == 1; });
}

Params box_slice_params(const Shape& lo, const Shape& hi) {
  return Params{
      {"start_indices", IntList(lo)}, {"limit_indices", IntList(hi)}, {"strides", NoneParam{}}};
}

class ValueShrinker {
 public:
  explicit ValueShrinker(Jaxpr& j) : j_(j) {}

  int run() {
    int changes = 0;
    for (Eqn& e : j_.eqns)
      changes += rewrite_body(e, [](Jaxpr& body) { return ValueShrinker(body).run(); });
    index_readers();
    before_.assign(j_.eqns.size(), {});
    dropped_.assign(j_.eqns.size(), false);
    int here = 0;
    for (size_t i = j_.eqns.size(); i-- > 0;) here += shrink(i);
    if (here > 0) place();
    return changes + here;
  }

 private:
  // A read of a var: eqn `eqn` of the jaxpr, or (pending) slice `slot` of those this pass
  // places before eqn `eqn`.
  struct Reader {
    bool pending;
    size_t eqn;
    size_t slot;
  };

  void index_readers() {
    readers_.assign(j_.vars.size(), {});
    returned_.assign(j_.vars.size(), false);
    for (size_t i = 0; i < j_.eqns.size(); ++i)
      for (const Atom& a : j_.eqns[i].ins)
        if (is_var(a)) readers_[as_var(a).id].push_back(Reader{false, i, 0});
    for (const Atom& a : j_.outvars)
      if (is_var(a)) returned_[as_var(a).id] = true;
  }

  Eqn& reader_eqn(const Reader& r) { return r.pending ? before_[r.eqn][r.slot] : j_.eqns[r.eqn]; }

  // Computed element by element from operands of its shape (or scalars), or a broadcast.
  bool shrinkable(const Eqn& e) const {
    if (e.outs.size() != 1 || e.ins.empty()) return false;
    const Type t = j_.type_of(e.outs[0]);
    if (t.is_ref || t.array.rank() == 0) return false;
    if (e.prim == Prim::broadcast_in_dim) return e.ins.size() == 1;
    if (buffer_behaviour(e.prim) != BufferBehaviour::elementwise || prim_info(e.prim).communicates)
      return false;
    for (const Atom& a : e.ins) {
      if (!is_var(a)) continue;
      const Type at = j_.type_of(as_var(a));
      if (at.is_ref || (at.array.rank() != 0 && at.array.shape != t.array.shape)) return false;
    }
    return true;
  }

  // Eqn i computed over the box its readers reach, when that is smaller than its result.
  int shrink(size_t i) {
    Eqn& e = j_.eqns[i];
    if (!shrinkable(e)) return 0;
    const Var v = e.outs[0];
    const Shape shape = j_.type_of(v).array.shape;
    if (returned_[v.id] || readers_[v.id].empty()) return 0;
    const size_t rank = shape.size();
    Shape lo(rank, std::numeric_limits<int64_t>::max()), hi(rank, 0);
    for (const Reader& r : readers_[v.id]) {
      const Eqn& s = reader_eqn(r);
      if (!is_box_slice(s)) return 0;
      const IntList& start = s.params.get<IntList>("start_indices");
      const IntList& limit = s.params.get<IntList>("limit_indices");
      for (size_t d = 0; d < rank; ++d) {
        lo[d] = std::min(lo[d], start.at(d));
        hi[d] = std::max(hi[d], limit.at(d));
      }
    }
    Shape box(rank);
    bool smaller = false;
    for (size_t d = 0; d < rank; ++d) {
      box[d] = hi[d] - lo[d];
      smaller |= box[d] < shape[d];
    }
    if (!smaller) return 0;

    if (e.prim == Prim::broadcast_in_dim)
      shrink_broadcast(i, lo, hi, box);
    else
      shrink_elementwise(i, lo, hi);
    j_.vars.at(v.id).type.array.shape = box;
    // Each reader now slices the box; one that takes all of it is the value itself.
    for (const Reader& r : readers_[v.id]) {
      Eqn& s = reader_eqn(r);
      IntList start = s.params.get<IntList>("start_indices");
      IntList limit = s.params.get<IntList>("limit_indices");
      bool whole = true;
      for (size_t d = 0; d < rank; ++d) {
        start[d] -= lo[d];
        limit[d] -= lo[d];
        whole &= start[d] == 0 && limit[d] == box[d];
      }
      if (whole) {
        subst_.set(s.outs[0], v);
        if (r.pending)
          dropped_pending_.insert({r.eqn, r.slot});
        else
          dropped_[r.eqn] = true;
      } else {
        s.params = box_slice_params(start, limit);
      }
    }
    return 1;
  }

  // Reads operand `slot` of eqn i through a new slice [lo, hi) placed before it (one slice
  // per operand var).
  Atom slice_operand(size_t i, const Var a, const Shape& lo, const Shape& hi) {
    Shape sizes(lo.size());
    for (size_t d = 0; d < lo.size(); ++d) sizes[d] = hi[d] - lo[d];
    const Var s = j_.new_var(Type(ArrayType{j_.type_of(a).array.dtype, sizes}));
    before_[i].push_back(Eqn{Prim::slice, box_slice_params(lo, hi), {a}, {s}});
    const size_t slot = before_[i].size() - 1;
    // Eqn i no longer reads `a`; its slice does.
    std::vector<Reader>& rs = readers_[a.id];
    rs.erase(std::remove_if(rs.begin(), rs.end(),
                            [&](const Reader& r) { return !r.pending && r.eqn == i; }),
             rs.end());
    rs.push_back(Reader{true, i, slot});
    readers_.resize(j_.vars.size());
    returned_.resize(j_.vars.size(), false);
    return s;
  }

  void shrink_elementwise(size_t i, const Shape& lo, const Shape& hi) {
    std::unordered_map<uint32_t, Atom> sliced;  // operand var -> its slice
    for (size_t p = 0; p < j_.eqns[i].ins.size(); ++p) {
      const Atom a = j_.eqns[i].ins[p];
      if (!is_var(a) || j_.type_of(as_var(a)).array.rank() == 0) continue;
      auto it = sliced.find(as_var(a).id);
      if (it == sliced.end())
        it = sliced.emplace(as_var(a).id, slice_operand(i, as_var(a), lo, hi)).first;
      j_.eqns[i].ins[p] = it->second;
    }
  }

  // The operand is sliced along the dims it gives the result whole; a dim it broadcasts
  // (size 1 against a larger result dim) stays as it is.
  void shrink_broadcast(size_t i, const Shape& lo, const Shape& hi, const Shape& box) {
    Eqn& e = j_.eqns[i];
    e.params.set("shape", IntList(box));
    const Atom x = e.ins[0];
    if (!is_var(x)) return;
    // Copies: slice_operand adds vars.
    const Shape xs = j_.type_of(as_var(x)).array.shape;
    const IntList dims = e.params.get<IntList>("broadcast_dimensions");
    const Shape out = j_.type_of(e.outs[0]).array.shape;
    Shape xlo(xs.size(), 0), xhi = xs;
    bool any = false;
    for (size_t k = 0; k < xs.size() && k < dims.size(); ++k) {
      const auto d = static_cast<size_t>(dims[k]);
      if (xs[k] != out.at(d)) continue;
      xlo[k] = lo[d];
      xhi[k] = hi[d];
      any |= xlo[k] != 0 || xhi[k] != xs[k];
    }
    if (any) j_.eqns[i].ins[0] = slice_operand(i, as_var(x), xlo, xhi);
  }

  // Puts the operand slices before their eqns and drops the slices that took everything.
  void place() {
    std::vector<Eqn> eqns;
    for (size_t i = 0; i < j_.eqns.size(); ++i) {
      for (size_t k = 0; k < before_[i].size(); ++k)
        if (!dropped_pending_.count({i, k})) eqns.push_back(std::move(before_[i][k]));
      if (!dropped_[i]) eqns.push_back(std::move(j_.eqns[i]));
    }
    for (Eqn& e : eqns)
      for (Atom& a : e.ins) a = subst_(a);
    for (Atom& a : j_.outvars) a = subst_(a);
    j_.eqns = std::move(eqns);
  }

  Jaxpr& j_;
  std::vector<std::vector<Reader>> readers_;  // by var id
  std::vector<bool> returned_;                // by var id
  std::vector<std::vector<Eqn>> before_;      // slices to place before each eqn
  std::vector<bool> dropped_;                 // eqns (reader slices) that took everything
  std::set<std::pair<size_t, size_t>> dropped_pending_;  // (eqn, slot) of dropped slices
  Substitution subst_;
};

}  // namespace

Jaxpr shrink_sliced_values(const Jaxpr& jaxpr, int* changes) {
  return rewritten_copy(
      jaxpr, [](Jaxpr& j) { return ValueShrinker(j).run(); }, changes);
}

Jaxpr eliminate_dead_regions(const Jaxpr& jaxpr,
                             const std::vector<std::optional<IntRange>>& const_ranges) {
  return trim_untouched_rows(shrink_sliced_values(jaxpr), const_ranges);
}

}  // namespace refjit
