#include "passes/simplify/dead_regions.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "passes/jaxpr_util.h"
#include "passes/simplify/trim_rows.h"

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

// Elements [lo, hi) along each dim of an array.
struct Box {
  Shape lo, hi;
  Shape sizes() const {
    Shape s(lo.size());
    for (size_t d = 0; d < lo.size(); ++d) s[d] = hi[d] - lo[d];
    return s;
  }
  auto operator<=>(const Box&) const = default;
};

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

  Shape shape_of(const Atom& a) const { return j_.type_of(as_var(a)).array.shape; }

  // For each operand of eqn `e`, the box of it that the box `out` of e's result is computed
  // from (nullopt: the operand is read as it is: a literal, a scalar, or all of it); nullopt
  // when e is not an eqn this pass shrinks: elementwise, broadcast_in_dim, transpose, a
  // reduction, dot_general.
  std::optional<std::vector<std::optional<Box>>> operand_boxes(const Eqn& e, const Box& out) const {
    if (e.outs.size() != 1 || e.ins.empty()) return std::nullopt;
    const Type t = j_.type_of(e.outs[0]);
    if (t.is_ref || t.array.rank() == 0) return std::nullopt;
    for (const Atom& a : e.ins)
      if (is_var(a) && j_.type_of(as_var(a)).is_ref) return std::nullopt;
    std::vector<std::optional<Box>> boxes(e.ins.size());
    auto whole = [&](size_t k) {
      const Shape s = shape_of(e.ins[k]);
      return Box{Shape(s.size(), 0), s};
    };
    // Result dim d of the box is operand dim `from` of the operand's box `b`.
    auto take = [&](Box& b, size_t from, size_t d) {
      b.lo[from] = out.lo[d];
      b.hi[from] = out.hi[d];
    };
    if (prim_info(e.prim).elementwise) {
      for (size_t k = 0; k < e.ins.size(); ++k) {
        if (!is_var(e.ins[k]) || shape_of(e.ins[k]).empty()) continue;
        if (shape_of(e.ins[k]) != t.array.shape) return std::nullopt;
        boxes[k] = out;
      }
    } else if (e.prim == Prim::broadcast_in_dim) {
      if (e.ins.size() != 1 || !is_var(e.ins[0])) return boxes;
      // Only along the dims the operand gives whole; a broadcast one (size 1) stays.
      Box b = whole(0);
      const IntList& dims = e.params.get<IntList>("broadcast_dimensions");
      for (size_t k = 0; k < dims.size(); ++k)
        if (b.hi[k] == t.array.shape.at(static_cast<size_t>(dims[k])))
          take(b, k, static_cast<size_t>(dims[k]));
      boxes[0] = b;
    } else if (e.prim == Prim::transpose) {
      Box b = whole(0);
      const IntList& perm = e.params.get<IntList>("permutation");
      for (size_t d = 0; d < perm.size(); ++d) take(b, static_cast<size_t>(perm[d]), d);
      boxes[0] = b;
    } else if (e.prim == Prim::reduce_sum || e.prim == Prim::reduce_max ||
               e.prim == Prim::reduce_min || e.prim == Prim::argmax) {
      // The reduced axes whole; the kept ones, in order, are the result's dims.
      Box b = whole(0);
      const IntList& axes = e.params.get<IntList>("axes");
      size_t d = 0;
      for (size_t k = 0; k < b.lo.size(); ++k)
        if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(k)) == axes.end())
          take(b, k, d++);
      boxes[0] = b;
    } else if (e.prim == Prim::dot_general) {
      // The result's dims: the batch dims, then lhs's free dims, then rhs's.
      const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
      Box l = whole(0), r = whole(1);
      size_t d = 0;
      for (size_t k = 0; k < dn.lhs_batch.size(); ++k, ++d) {
        take(l, static_cast<size_t>(dn.lhs_batch[k]), d);
        take(r, static_cast<size_t>(dn.rhs_batch[k]), d);
      }
      for (int64_t k : free_dims(static_cast<int64_t>(l.lo.size()), dn.lhs_contract, dn.lhs_batch))
        take(l, static_cast<size_t>(k), d++);
      for (int64_t k : free_dims(static_cast<int64_t>(r.lo.size()), dn.rhs_contract, dn.rhs_batch))
        take(r, static_cast<size_t>(k), d++);
      boxes[0] = l;
      boxes[1] = r;
    } else {
      return std::nullopt;
    }
    for (size_t k = 0; k < boxes.size(); ++k)
      if (boxes[k] && *boxes[k] == whole(k)) boxes[k].reset();
    return boxes;
  }

  // Eqn i computed over the box its readers reach, when that is smaller than its result.
  int shrink(size_t i) {
    Eqn& e = j_.eqns[i];
    if (e.outs.size() != 1) return 0;
    const Var v = e.outs[0];
    const Shape shape = j_.type_of(v).array.shape;
    if (returned_[v.id] || readers_[v.id].empty() || shape.empty()) return 0;
    const size_t rank = shape.size();
    Box out{Shape(rank, std::numeric_limits<int64_t>::max()), Shape(rank, 0)};
    for (const Reader& r : readers_[v.id]) {
      const Eqn& s = reader_eqn(r);
      if (!is_box_slice(s)) return 0;
      const IntList& start = s.params.get<IntList>("start_indices");
      const IntList& limit = s.params.get<IntList>("limit_indices");
      for (size_t d = 0; d < rank; ++d) {
        out.lo[d] = std::min(out.lo[d], start.at(d));
        out.hi[d] = std::max(out.hi[d], limit.at(d));
      }
    }
    const Shape box = out.sizes();
    if (box == shape) return 0;
    std::optional<std::vector<std::optional<Box>>> boxes = operand_boxes(e, out);
    if (!boxes) return 0;

    std::map<std::pair<uint32_t, Box>, Atom> sliced;  // (operand, box) -> its slice
    for (size_t k = 0; k < boxes->size(); ++k) {
      if (!(*boxes)[k]) continue;
      const Var a = as_var(j_.eqns[i].ins[k]);
      auto it = sliced.find({a.id, *(*boxes)[k]});
      if (it == sliced.end())
        it = sliced.emplace(std::pair{a.id, *(*boxes)[k]}, slice_operand(i, a, *(*boxes)[k])).first;
      else
        forget_read(a, i);
      j_.eqns[i].ins[k] = it->second;
    }
    if (e.prim == Prim::broadcast_in_dim) j_.eqns[i].params.set("shape", IntList(box));
    j_.vars.at(v.id).type.array.shape = box;
    // Each reader now slices the box; one that takes all of it is the value itself.
    for (const Reader& r : readers_[v.id]) {
      Eqn& s = reader_eqn(r);
      IntList start = s.params.get<IntList>("start_indices");
      IntList limit = s.params.get<IntList>("limit_indices");
      bool whole = true;
      for (size_t d = 0; d < rank; ++d) {
        start[d] -= out.lo[d];
        limit[d] -= out.lo[d];
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

  // One read of `a` by eqn i is gone.
  void forget_read(Var a, size_t i) {
    std::vector<Reader>& rs = readers_[a.id];
    auto it = std::find_if(rs.begin(), rs.end(),
                           [&](const Reader& r) { return !r.pending && r.eqn == i; });
    if (it != rs.end()) rs.erase(it);
  }

  // A slice of `a` to box `b`, placed before eqn i, which reads it instead of `a`.
  Atom slice_operand(size_t i, const Var a, const Box& b) {
    const Var s = j_.new_var(Type(ArrayType{j_.type_of(a).array.dtype, b.sizes()}));
    before_[i].push_back(Eqn{Prim::slice, box_slice_params(b.lo, b.hi), {a}, {s}});
    forget_read(a, i);
    readers_[a.id].push_back(Reader{true, i, before_[i].size() - 1});
    readers_.resize(j_.vars.size());
    returned_.resize(j_.vars.size(), false);
    return s;
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
