#include "passes/simplify/range_simplify.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "ir/window_params.h"
#include "passes/jaxpr_util.h"
#include "passes/pattern_rewriter.h"
#include "passes/plain_decisions.h"
#include "passes/simplify/canonicalize.h"
#include "passes/simplify/inline.h"
#include "passes/simplify/unit_run.h"
#include "refjit/ir/use_def.h"

namespace refjit {
namespace {

class Simplifier {
 public:
  Simplifier(Jaxpr& j, IntRanges r) : j_(j), r_(std::move(r)) {}

  // How many rewrites made windows.
  int windows() const { return windows_; }

  // Returns the number of rewrites; windows() of them made windows.
  int run() {
    for (size_t i = 0; i < j_.eqns.size(); ++i) {
      Eqn& e = j_.eqns[i];
      for (Atom& a : e.ins) a = subst_(a);
      if (e.prim == Prim::scan) {
        simplify_scan_body(e);
        continue;
      }
      fold(e);
    }
    for (Atom& a : j_.outvars) a = subst_(a);
    rewrite_index_runs();
    remove_unread_pure_eqns(j_);
    return changes_;
  }

 private:
  std::optional<bool> known(const Atom& a) const {
    if (const Literal* l = std::get_if<Literal>(&a))
      return l->dtype == DType::bool_ ? std::optional<bool>(l->i != 0) : std::nullopt;
    auto it = known_.find(as_var(a).id);
    return it == known_.end() ? std::nullopt : std::optional<bool>(it->second);
  }

  // `out` is `x` (same type): later reads of `out` read `x`.
  bool forward(Var out, const Atom& x) {
    if (j_.type_of(x) != j_.type_of(out)) return false;
    subst_.set(out, x);
    ++changes_;
    return true;
  }

  // `e`'s single result is the constant `b` everywhere.
  void make_constant(Eqn& e, bool b) {
    const Var out = e.outs.at(0);
    known_[out.id] = b;
    const ArrayType t = j_.type_of(out).array;
    if (t.shape.empty()) return;  // a scalar comparison costs nothing; readers use `known_`
    e = Eqn{Prim::broadcast_in_dim,
            Params{{"shape", IntList(t.shape)},
                   {"broadcast_dimensions", IntList{}},
                   {"sharding", NoneParam{}}},
            {Literal::of_bool(b)},
            {out}};
    ++changes_;
  }

  void fold(Eqn& e) {
    if (e.outs.size() != 1) return;
    const Var out = e.outs[0];
    switch (e.prim) {
      case Prim::lt:
      case Prim::le:
      case Prim::gt:
      case Prim::ge:
      case Prim::eq:
      case Prim::ne: {
        auto a = range_of(r_, e.ins.at(0)), b = range_of(r_, e.ins.at(1));
        if (!a || !b) return;
        if (std::optional<bool> v = decide_comparison(e.prim, *a, *b)) make_constant(e, *v);
        return;
      }
      case Prim::and_:
      case Prim::or_: {
        if (j_.type_of(out).array.dtype != DType::bool_) return;
        const bool absorbing = e.prim == Prim::or_;  // x or true = true; x and false = false
        std::optional<bool> ka = known(e.ins.at(0)), kb = known(e.ins.at(1));
        if (ka == absorbing || kb == absorbing) return make_constant(e, absorbing);
        if (ka && kb) return make_constant(e, *ka && *kb);
        if (ka == !absorbing) forward(out, e.ins[1]);
        if (kb == !absorbing) forward(out, e.ins[0]);
        return;
      }
      case Prim::not_:
        if (std::optional<bool> k = known(e.ins.at(0))) make_constant(e, !*k);
        return;
      case Prim::select_n: {
        if (e.ins.size() != 3 || j_.type_of(e.ins[0]).array.dtype != DType::bool_) return;
        if (std::optional<bool> k = known(e.ins[0])) forward(out, e.ins[*k ? 2 : 1]);
        return;
      }
      case Prim::max:
      case Prim::min: {
        auto a = range_of(r_, e.ins.at(0)), b = range_of(r_, e.ins.at(1));
        if (!a || !b) return;
        const bool is_max = e.prim == Prim::max;
        if (is_max ? a->lo >= b->hi : a->hi <= b->lo)
          forward(out, e.ins[0]);
        else if (is_max ? b->lo >= a->hi : b->hi <= a->lo)
          forward(out, e.ins[1]);
        return;
      }
      default: return;
    }
  }

  void simplify_scan_body(Eqn& e) {
    Jaxpr body = *e.params.get<JaxprPtr>("jaxpr");
    Simplifier inner(body, scan_body_int_ranges(e, r_));
    if (inner.run() == 0) return;
    changes_ += inner.changes_;
    windows_ += inner.windows_;
    e.params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(body)));
  }

  // Defining eqn of var `a` (nullptr for a var made by this rewrite), while
  // rewrite_index_runs runs: the eqns do not move until it ends.
  const Eqn* def(const Atom& a) const { return defs_->def(a); }

  static bool is_literal_int(const Atom& a, int64_t v) {
    const Literal* l = std::get_if<Literal>(&a);
    return l && is_int(l->dtype) && l->i == v;
  }

  // x for `a` = mul(x, v) or mul(v, x).
  std::optional<Atom> times(const Atom& a, int64_t v) const {
    const Eqn* m = def(a);
    if (!m || m->prim != Prim::mul || m->ins.size() != 2) return std::nullopt;
    if (is_literal_int(m->ins[1], v)) return m->ins[0];
    if (is_literal_int(m->ins[0], v)) return m->ins[1];
    return std::nullopt;
  }

  // (r, c) if the scalars `terms` add up to W*r + c with r in [0, rows-1] and c in [0, W-n].
  std::optional<std::pair<Atom, Atom>> row_and_column(const std::vector<UnitRun::Term>& terms,
                                                      int64_t n, int64_t rows,
                                                      int64_t width) const {
    // One scalar is W*r; at most one more is c; none is subtracted.
    std::optional<Atom> r, c;
    for (const UnitRun::Term& term : terms) {
      if (term.negated) return std::nullopt;
      const Atom& s = term.scalar;
      std::optional<Atom> x = times(s, width);
      if (x && !r)
        r = x;
      else if (!c)
        c = s;
      else
        return std::nullopt;
    }
    if (!r) return std::nullopt;
    const Atom col0 = c ? *c : Atom(Literal::of_int(j_.type_of(*r).array.dtype, 0));
    auto rr = range_of(r_, *r), cr = range_of(r_, col0);
    if (!rr || !cr || rr->lo < 0 || rr->hi > rows - 1 || cr->lo < 0 || cr->hi > width - n)
      return std::nullopt;
    return std::pair{*r, col0};
  }

  Var emit(std::vector<Eqn>& out, Prim p, Params params, std::vector<Atom> ins, ArrayType t) {
    const Var v = j_.new_var(Type(std::move(t)));
    out.push_back(Eqn{p, std::move(params), std::move(ins), {v}});
    return v;
  }

  Var reshaped(std::vector<Eqn>& out, const Atom& x, Shape shape) {
    ArrayType t{j_.type_of(x).array.dtype, shape};
    return emit(out, Prim::reshape,
                Params{{"new_sizes", IntList(shape)}, {"dimensions", NoneParam{}}}, {x}, t);
  }

  // The 1-D update `u` (n elements) as a [1, n] row. A concatenate of flattened rows and
  // scalars is rebuilt as a concatenate of the rows themselves (so move-windows sees its
  // dynamic_slice pieces); anything else is reshaped.
  Atom as_row(const Atom& u, int64_t n, std::vector<Eqn>& out) {
    const DType dt = j_.type_of(u).array.dtype;
    const Eqn* cat = def(u);
    if (!cat || cat->prim != Prim::concatenate || cat->params.get<int64_t>("dimension") != 0)
      return reshaped(out, u, {1, n});
    std::vector<Atom> pieces;
    for (const Atom& piece : cat->ins) {
      const int64_t len = j_.type_of(piece).array.shape.at(0);
      const Eqn* rs = def(piece);
      const Shape src =
          rs && is_row_major_reshape(*rs) ? j_.type_of(rs->ins[0]).array.shape : Shape{-1};
      if (src == Shape{1, len}) {
        pieces.push_back(rs->ins[0]);
      } else if (src.empty()) {
        pieces.push_back(emit(out, Prim::broadcast_in_dim,
                              Params{{"shape", IntList{1, 1}},
                                     {"broadcast_dimensions", IntList{}},
                                     {"sharding", NoneParam{}}},
                              {rs->ins[0]}, ArrayType{dt, {1, 1}}));
      } else {
        pieces.push_back(reshaped(out, piece, {1, len}));
      }
    }
    return emit(out, Prim::concatenate, Params{{"dimension", int64_t{1}}}, pieces,
                ArrayType{dt, {1, n}});
  }

  // The eqns to insert before each eqn (filled by a rewrite), then put in place.
  void insert_before(std::vector<std::vector<Eqn>>& before) {
    std::vector<Eqn> eqns;
    for (size_t i = 0; i < j_.eqns.size(); ++i) {
      for (Eqn& e : before[i]) eqns.push_back(std::move(e));
      eqns.push_back(std::move(j_.eqns[i]));
    }
    j_.eqns = std::move(eqns);
    for (Eqn& e : j_.eqns)
      for (Atom& a : e.ins) a = subst_(a);
    for (Atom& a : j_.outvars) a = subst_(a);
    r_.resize(j_.vars.size());
  }

  // The sum of `terms` (scalars of dtype `dt`), emitted into `out`.
  Atom emit_sum(std::vector<Eqn>& out, const std::vector<UnitRun::Term>& terms, DType dt) {
    return sum_of_terms(terms, dt, [&](Prim p, std::vector<Atom> ins) -> Atom {
      return emit(out, p, {}, std::move(ins), ArrayType{dt, {}});
    });
  }

  // A gather or scatter whose index vector is a unit run (passes/simplify/unit_run.h) lying inside
  // what it indexes reads or writes one contiguous window: it becomes a dynamic_slice or a
  // dynamic_update_slice at the run's first index (the sum of the run's scalar terms). Exact:
  // every index is in range, so the gather's clamping and the scatter's dropping never apply,
  // and no two updates land on one element. Indexing two dims [D, W] (`dims=2`, JAX's
  // `x.at[r, c:c+n]`), the run is W*r + c + iota(n) with ranges putting it inside row r:
  // the window is [1, n] at (r, c).
  void rewrite_index_runs() {
    defs_.emplace(j_);
    std::vector<std::vector<Eqn>> before(j_.eqns.size());
    bool any = false;
    for (size_t i = 0; i < j_.eqns.size(); ++i) {
      const Eqn& e = j_.eqns[i];
      const bool gather = e.prim == Prim::gather;
      if ((!gather && e.prim != Prim::scatter) || e.outs.size() != 1 ||
          e.ins.size() != (gather ? 2u : 3u))
        continue;
      const ArrayType x = j_.type_of(e.ins[0]).array;
      const int64_t axis = e.params.get_or<int64_t>("axis", -1), dims = indexed_dims(e.params);
      if (axis < 0 || dims > 2 || axis + dims > x.rank()) continue;
      // A scalar index is a run of one.
      std::optional<UnitRun> run =
          j_.type_of(e.ins[1]).array.rank() == 0
              ? std::optional<UnitRun>(UnitRun{1, scalar_sum_terms(j_, e.ins[1])})
              : as_unit_run(j_, e.ins[1]);
      std::optional<IntRange> range = range_of(r_, e.ins[1]);
      const int64_t extent = dims == 1 ? x.shape[axis] : x.shape[axis] * x.shape[axis + 1];
      if (!run || run->length < 1 || !range || range->lo < 0 || range->hi > extent - 1) continue;
      std::optional<std::pair<Atom, Atom>> rc;
      if (dims == 2) rc = row_and_column(run->terms, run->length, x.shape[axis], x.shape[axis + 1]);
      // A run crossing rows is a window of the two dims flattened into one.
      Atom operand = e.ins[0];
      const bool flattened = dims == 2 && !rc;
      if (flattened) {
        Shape flat = x.shape;
        flat[axis] = extent;
        flat.erase(flat.begin() + axis + 1);
        operand = reshaped(before[i], operand, flat);
      }
      const ArrayType xo = j_.type_of(operand).array;
      const DType dt = j_.type_of(e.ins[1]).array.dtype;
      std::vector<Atom> starts(static_cast<size_t>(xo.rank()), Literal::of_int(dt, 0));
      Shape window = xo.shape;
      if (rc) {
        starts[axis] = rc->first;
        starts[axis + 1] = rc->second;
        window[axis] = 1;
        window[axis + 1] = run->length;
      } else {
        starts[axis] = emit_sum(before[i], run->terms, dt);
        window[axis] = run->length;
      }
      const Var out = e.outs[0];
      const ArrayType t = j_.type_of(out).array;
      Var replacement;
      if (gather) {
        std::vector<Atom> ins{operand};
        ins.insert(ins.end(), starts.begin(), starts.end());
        replacement = emit(before[i], Prim::dynamic_slice,
                           Params{{"slice_sizes", IntList(window.begin(), window.end())}}, ins,
                           ArrayType{t.dtype, window});
        if (window != t.shape) replacement = reshaped(before[i], replacement, t.shape);
      } else {
        Atom u = e.ins[2];
        if (rc && x.rank() == 2 && j_.type_of(u).array.rank() == 1)
          u = as_row(u, run->length, before[i]);
        else if (j_.type_of(u).array.shape != window)
          u = reshaped(before[i], u, window);
        std::vector<Atom> ins{operand, u};
        ins.insert(ins.end(), starts.begin(), starts.end());
        replacement = emit(before[i], Prim::dynamic_update_slice, {}, ins, xo);
        if (flattened) replacement = reshaped(before[i], replacement, t.shape);
      }
      subst_.set(out, replacement);
      any = true;
      ++changes_;
      ++windows_;
    }
    defs_.reset();
    if (any) insert_before(before);
  }

  Jaxpr& j_;
  IntRanges r_;
  Substitution subst_;
  std::unordered_map<uint32_t, bool> known_;
  std::optional<UseDef> defs_;  // during rewrite_index_runs
  int changes_ = 0;
  int windows_ = 0;
};

}  // namespace

Jaxpr simplify_with_ranges(const Jaxpr& jaxpr,
                           const std::vector<std::optional<IntRange>>& const_ranges, int* changes) {
  Jaxpr j = has_jit_eqn(jaxpr) ? inline_jit(jaxpr) : jaxpr;
  IntRanges r = int_ranges_from_consts(j, const_ranges);
  const int n = Simplifier(j, std::move(r)).run();
  if (changes) *changes = n;
  return one_dim_indexing(n > 0 ? j : jaxpr);
}

Jaxpr windows_before_autodiff(const Jaxpr& jaxpr,
                              const std::vector<std::optional<IntRange>>& const_ranges,
                              const std::vector<ConstFold>& const_folds, int* changes) {
  // The constants' runs read as iotas and JAX's index matrices (x.at[i, j + arange(n)]) as
  // one iota plus scalars only once folded in and in canonical form.
  Jaxpr j = canonicalize(
      const_folds.empty() ? jaxpr : inline_known_consts(jaxpr, const_folds, /*keep_binders=*/true));
  Simplifier s(j, int_ranges_from_consts(j, const_ranges));
  s.run();
  if (changes) *changes = s.windows();
  return s.windows() > 0 ? std::move(j) : jaxpr;
}

}  // namespace refjit
