#include "test/randgen/randgen.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <utility>

#include "refjit/ir/builder.h"
#include "refjit/ir/error.h"
#include "refjit/ir/verifier.h"

namespace refjit::randgen {

namespace {

// The values one jaxpr (top level or a scan/cond body) can use, by kind.
struct Scope {
  JaxprBuilder b;
  std::vector<Var> floats;      // float arrays of the program's float dtype
  std::vector<Var> ints;        // i32 scalars (indices)
  std::vector<Var> int_arrays;  // i32 arrays (integer math, gather/scatter indices)
  std::vector<Var> refs;        // refs usable here
  std::vector<Var> local_refs;  // refs created here by new_ref (may be frozen at the end)
  int depth = 0;
};

class Generator {
 public:
  Generator(uint64_t seed, const GenOptions& o) : rng_(seed), o_(o), f_(o.float_dtype) {}

  Program run() {
    Scope top;
    const int n_floats = uniform(1, 3);
    for (int i = 0; i < n_floats; ++i)
      top.floats.push_back(top.b.add_invar(ArrayType{f_, random_shape(3)}));
    const int n_ints = uniform(0, 2);
    for (int i = 0; i < n_ints; ++i) top.ints.push_back(top.b.add_invar(ArrayType{DType::i32, {}}));
    if (o_.refs && coin(0.4))
      top.refs.push_back(top.b.add_invar(Type::ref(ArrayType{f_, random_shape(2)})));
    const int steps = uniform(3, std::max(3, o_.max_eqns));
    for (int i = 0; i < steps; ++i) step(top);

    std::vector<Atom> outs;
    // A local ref may be frozen into an output (then it is not used any more).
    if (!top.local_refs.empty() && coin(0.5)) {
      Var r = pick(top.local_refs);
      outs.push_back(emit(top, Prim::freeze, {r}));
    }
    // The last value, then up to 3 other leaves (values no eqn reads), so that most of the
    // generated work is live and observed.
    const Var last = top.floats.back();
    outs.push_back(last);
    std::vector<Var> leaves = unread_floats(top);
    std::shuffle(leaves.begin(), leaves.end(), rng_);
    for (size_t i = 0; i < leaves.size() && outs.size() < 4; ++i)
      if (leaves[i] != last) outs.push_back(leaves[i]);
    top.b.set_outvars(outs);

    Program p;
    p.jaxpr = top.b.finish();
    verify(p.jaxpr);
    for (Var v : p.jaxpr.invars) p.args.push_back(random_value(p.jaxpr.type_of(v)));
    return p;
  }

 private:
  std::vector<Var> unread_floats(const Scope& s) const {
    std::vector<bool> read(s.b.jaxpr().vars.size(), false);
    for (const Eqn& e : s.b.jaxpr().eqns)
      for (const Atom& a : e.ins)
        if (is_var(a)) read[as_var(a).id] = true;
    std::vector<Var> r;
    for (Var v : s.floats)
      if (!read[v.id]) r.push_back(v);
    return r;
  }

  // ---- randomness
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  bool coin(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng_)];
  }
  Shape random_shape(int max_rank) {
    Shape s(uniform(0, max_rank));
    for (int64_t& d : s) d = uniform(1, 4);
    return s;
  }
  RtValue random_value(const Type& t) {
    Array a(t.array);
    for (int64_t i = 0; i < a.size(); ++i)
      a.set_from_double(i, is_float(t.dtype()) ? real(-1, 1) : uniform(-2, 6));
    if (t.is_ref) return std::make_shared<RefBuffer>(a);
    return a;
  }

  // ---- building blocks
  Var emit(Scope& s, Prim p, std::vector<Atom> ins, Params params = {}) {
    return s.b.add_eqn1(p, std::move(ins), std::move(params));
  }
  Var emit_float(Scope& s, Prim p, std::vector<Atom> ins, Params params = {}) {
    Var v = emit(s, p, std::move(ins), std::move(params));
    s.floats.push_back(v);
    return v;
  }
  const Shape& shape_of(const Scope& s, Var v) const { return s.b.jaxpr().type_of(v).shape(); }
  Literal flit(double v) const { return Literal::of(f_, v); }
  static Literal ilit(int64_t v) { return Literal::of_int(DType::i32, v); }
  // x*x + 0.5: the domain-safe operand of log, sqrt, rsqrt, pow and divisors; smooth, so
  // finite differences stay accurate.
  Var positive(Scope& s, Var x) {
    return emit(s, Prim::add, {emit(s, Prim::mul, {x, x}), flit(0.5)});
  }
  Var same_shape_float(Scope& s, Var x) {
    std::vector<Var> same;
    for (Var v : s.floats)
      if (shape_of(s, v) == shape_of(s, x)) same.push_back(v);
    return pick(same);  // contains x itself
  }
  // An i32 scalar index: an index input (maybe shifted) or a literal, often out of range.
  Atom index(Scope& s) {
    if (!s.ints.empty() && coin(0.7)) {
      Var v = pick(s.ints);
      if (!coin(0.3)) return v;
      Var w = emit(s, Prim::add, {v, ilit(uniform(-2, 3))});
      s.ints.push_back(w);
      return w;
    }
    return ilit(uniform(-2, 6));
  }
  // Some value of type `t` computed from `v`: v itself, a reshape, or sum(v) broadcast.
  Var coerce(Scope& s, Var v, const ArrayType& t) {
    const ArrayType& vt = s.b.jaxpr().type_of(v).array;
    if (vt == t) return v;
    if (vt.num_elements() == t.num_elements())
      return emit(s, Prim::reshape, {v}, {{"dimensions", NoneParam{}}, {"new_sizes", t.shape}});
    Var r = v;
    if (vt.rank() > 0) {
      IntList axes(vt.rank());
      std::iota(axes.begin(), axes.end(), 0);
      r = emit(s, Prim::reduce_sum, {v}, {{"axes", axes}});
    }
    if (t.rank() == 0) return r;
    return emit(
        s, Prim::broadcast_in_dim, {r},
        {{"broadcast_dimensions", IntList{}}, {"shape", t.shape}, {"sharding", NoneParam{}}});
  }

  // ---- integers, logic, more shape ops

  // An i32 array of the shape of a float value: floor(4 tanh x) converted (piecewise constant, so
  // derivatives and finite differences are both zero), or an existing int array.
  Var int_array(Scope& s) {
    if (!s.int_arrays.empty() && coin(0.5)) return pick(s.int_arrays);
    Var x = pick(s.floats);
    Var t = coin(0.8) ? emit(s, Prim::tanh, {x}) : x;  // mostly in [-4, 4]
    Var f = emit(s, Prim::floor, {emit(s, Prim::mul, {t, flit(4.0)})});
    Var k =
        emit(s, Prim::convert_element_type, {f}, {{"new_dtype", DType::i32}, {"weak_type", false}});
    s.int_arrays.push_back(k);
    return k;
  }
  // Back to a float. In differentiable programs squashed by tanh(x/100): a huge constant
  // (from INT_MIN) added to a float would drown finite differences in rounding noise.
  Var to_float(Scope& s, Var k) {
    Var f = emit(s, Prim::convert_element_type, {k}, {{"new_dtype", f_}, {"weak_type", false}});
    if (o_.differentiable) f = emit(s, Prim::tanh, {emit(s, Prim::mul, {f, flit(0.01)})});
    s.floats.push_back(f);
    return f;
  }

  void int_math(Scope& s) {
    Var k = int_array(s);
    const Shape shape = shape_of(s, k);
    std::vector<Var> same;
    for (Var v : s.int_arrays)
      if (shape_of(s, v) == shape) same.push_back(v);
    Var r;
    if (coin(0.3)) {
      static const Prim un[] = {Prim::neg, Prim::abs, Prim::sign, Prim::not_, Prim::copy};
      r = coin(0.2) ? emit(s, Prim::integer_pow, {k}, {{"y", int64_t{uniform(0, 3)}}})
                    : emit(s, un[uniform(0, std::size(un) - 1)], {k});
    } else {
      static const Prim bin[] = {Prim::add, Prim::sub, Prim::mul,  Prim::div,
                                 Prim::max, Prim::min, Prim::and_, Prim::or_};
      const Prim p = bin[uniform(0, std::size(bin) - 1)];
      // Literals include 0 (x/0 = -1), -1 and INT_MIN (INT_MIN / -1 = INT_MIN).
      static const int64_t lits[] = {0, 1, -1, 2, 3, -7, -2147483648LL};
      Atom y = coin(0.4) ? Atom(ilit(lits[uniform(0, std::size(lits) - 1)])) : Atom(pick(same));
      r = coin(0.2) && !is_var(y) ? emit(s, p, {y, k}) : emit(s, p, {k, y});
    }
    s.int_arrays.push_back(r);
    if (coin(0.3) && !shape.empty()) {
      IntList axes{uniform(0, static_cast<int>(shape.size()) - 1)};
      Var red = emit(s, coin(0.5) ? Prim::reduce_sum : Prim::reduce_max, {r}, {{"axes", axes}});
      s.int_arrays.push_back(red);
      r = red;
    }
    to_float(s, r);
  }

  void logic(Scope& s) {  // comparisons combined with and/or/not, then a bool-predicated select
    Var x = pick(s.floats);
    Var y = same_shape_float(s, x);
    Var p = emit(s, Prim::lt, {x, flit(real(-0.5, 0.5))});
    Var q = emit(s, coin(0.5) ? Prim::ge : Prim::ne, {y, x});
    Var r = emit(s, coin(0.5) ? Prim::and_ : Prim::or_, {p, q});
    if (coin(0.3)) r = emit(s, Prim::not_, {r});
    emit_float(s, Prim::select_n, {r, x, y});
  }

  void concatenate(Scope& s) {
    Var x = pick(s.floats);
    const Shape xs = shape_of(s, x);
    if (xs.empty()) return unary(s);
    const int64_t dim = uniform(0, xs.size() - 1);
    std::vector<Atom> ins{x};
    for (Var v : s.floats) {
      const Shape& vs = shape_of(s, v);
      if (vs.size() != xs.size() || ins.size() >= 3) continue;
      bool ok = true;
      for (size_t d = 0; d < xs.size(); ++d) ok &= d == static_cast<size_t>(dim) || vs[d] == xs[d];
      if (ok && coin(0.6)) ins.push_back(v);
    }
    emit_float(s, Prim::concatenate, ins, {{"dimension", dim}});
  }

  void pad(Scope& s) {
    Var x = pick(s.floats);
    IntListList config;
    for (int64_t d : shape_of(s, x)) {
      int64_t interior = uniform(0, 1);
      int64_t full = d + (d - 1) * interior;
      int64_t lo = uniform(-1, 2), hi = uniform(-1, 2);
      while (full + lo + hi < 1) ++hi;  // keep at least one element
      config.push_back({lo, hi, interior});
    }
    Atom value =
        coin(0.5) ? Atom(flit(real(-1, 1))) : Atom(coerce(s, pick(s.floats), ArrayType{f_, {}}));
    emit_float(s, Prim::pad, {x, value}, {{"padding_config", config}});
  }

  void squeeze_expand(Scope& s) {
    Var x = pick(s.floats);
    const Shape xs = shape_of(s, x);
    IntList ones;
    for (size_t d = 0; d < xs.size(); ++d)
      if (xs[d] == 1) ones.push_back(d);
    if (!ones.empty() && coin(0.5)) {
      emit_float(s, Prim::squeeze, {x}, {{"dimensions", IntList{pick(ones)}}});
      return;
    }
    if (xs.size() >= 4) return unary(s);
    emit_float(s, Prim::expand_dims, {x}, {{"dimensions", IntList{uniform(0, xs.size())}}});
  }

  void iota(Scope& s) {  // iota of some value's shape, mixed into it
    Var x = pick(s.floats);
    const Shape xs = shape_of(s, x);
    if (xs.empty()) return unary(s);
    Var i = emit(s, Prim::iota, {},
                 {{"dimension", int64_t{uniform(0, xs.size() - 1)}},
                  {"dtype", DType::i32},
                  {"shape", xs},
                  {"sharding", NoneParam{}}});
    Var f = emit(s, Prim::convert_element_type, {i}, {{"new_dtype", f_}, {"weak_type", false}});
    emit_float(s, Prim::mul, {x, f});
  }

  // The two terms of an index run `start + iota(n)`: iota(n) and a start index broadcast to [n].
  std::pair<Var, Var> iota_and_start(Scope& s, int64_t n) {
    Var i = emit(s, Prim::iota, {},
                 {{"dimension", int64_t{0}},
                  {"dtype", DType::i32},
                  {"shape", IntList{n}},
                  {"sharding", NoneParam{}}});
    Var start = emit(
        s, Prim::broadcast_in_dim, {index(s)},
        {{"broadcast_dimensions", IntList{}}, {"shape", IntList{n}}, {"sharding", NoneParam{}}});
    return {i, start};
  }

  void gather_scatter(Scope& s) {
    Var x = pick(s.floats);
    const Shape xs = shape_of(s, x);
    if (xs.empty()) return unary(s);
    const int64_t axis = uniform(0, xs.size() - 1);
    // Sometimes the indices address the axis and the next dim as one (dims=2, JAX's x.at[i, j]).
    const bool two = axis + 1 < static_cast<int64_t>(xs.size()) && coin(0.3);
    const int64_t extent = xs[static_cast<size_t>(axis)] * (two ? xs[axis + 1] : 1);
    Params params{{"axis", axis}};
    if (two) params.set("dims", int64_t{2});
    // Any shape, values in about [-4, 4]: clamp (gather) or drop (scatter); or (the programs
    // index-runs rewrites) a run `start + iota(n)` of up to one more than the dims hold.
    Var idx;
    if (coin(0.4)) {
      const int64_t n = uniform(1, extent + 1);
      const auto [i, start] = iota_and_start(s, n);
      idx = coin(0.5) ? emit(s, Prim::add, {start, i}) : emit(s, Prim::add, {i, start});
    } else {
      idx = int_array(s);
    }
    if (shape_of(s, idx).size() + xs.size() > 5) return unary(s);
    Var g = emit_float(s, Prim::gather, {x, idx}, params);
    if (coin(0.5)) return;
    Var u = emit(s, Prim::sin, {g});
    emit_float(s, coin(0.6) ? Prim::scatter_add : Prim::scatter, {same_shape_float(s, x), idx, u},
               params);
  }

  void jit(Scope& s) {  // a nested jit over a few values (and maybe a ref)
    std::vector<Atom> ins;
    std::vector<Type> types;
    const int n = uniform(1, 2);
    for (int i = 0; i < n; ++i) {
      Var v = pick(s.floats);
      ins.push_back(v);
      types.push_back(s.b.jaxpr().type_of(v));
    }
    if (o_.refs && !s.refs.empty() && coin(0.4)) {
      Var r = pick(s.refs);
      ins.push_back(r);
      types.push_back(s.b.jaxpr().type_of(r));
    }
    Scope b = body_scope(s, types);
    body_steps(b);
    std::vector<Var> leaves = unread_floats(b);
    std::vector<Atom> outs{b.floats.back()};
    if (!leaves.empty() && coin(0.5)) outs.push_back(pick(leaves));
    b.b.set_outvars(outs);
    auto body = std::make_shared<const Jaxpr>(b.b.finish());
    for (Var v :
         s.b.add_eqn(Prim::jit, ins, {{"jaxpr", JaxprPtr(body)}, {"name", std::string("f")}}))
      s.floats.push_back(v);
  }

  // ---- one generation step: appends a few eqns
  void step(Scope& s) {
    using StepFn = void (Generator::*)(Scope&);
    struct Choice {
      StepFn fn;
      int weight;
      bool needs_refs, needs_control;
    };
    static const Choice choices[] = {
        {&Generator::unary, 10, false, false},
        {&Generator::binary, 10, false, false},
        {&Generator::select, 4, false, false},
        {&Generator::broadcast, 3, false, false},
        {&Generator::reshape, 3, false, false},
        {&Generator::transpose, 3, false, false},
        {&Generator::slice, 3, false, false},
        {&Generator::dynamic_slice, 3, false, false},
        {&Generator::dynamic_update, 3, false, false},
        {&Generator::reduce, 4, false, false},
        {&Generator::dot, 3, false, false},
        {&Generator::convert, 2, false, false},
        {&Generator::new_ref, 3, true, false},
        {&Generator::ref_op, 7, true, false},
        {&Generator::scan, 3, false, true},
        {&Generator::cond, 3, false, true},
        {&Generator::int_math, 4, false, false},
        {&Generator::concatenate, 2, false, false},
        {&Generator::pad, 2, false, false},
        {&Generator::squeeze_expand, 2, false, false},
        {&Generator::iota, 1, false, false},
        {&Generator::gather_scatter, 3, false, false},
        {&Generator::logic, 2, false, false},
        {&Generator::jit, 2, false, true},
    };
    int total = 0;
    for (const Choice& c : choices)
      if ((!c.needs_refs || o_.refs) &&
          (!c.needs_control || (o_.control && s.depth < o_.max_depth)))
        total += c.weight;
    int r = uniform(0, total - 1);
    for (const Choice& c : choices) {
      if ((c.needs_refs && !o_.refs) ||
          (c.needs_control && (!o_.control || s.depth >= o_.max_depth)))
        continue;
      if (r < c.weight) return (this->*c.fn)(s);
      r -= c.weight;
    }
  }

  void unary(Scope& s) {
    Var x = pick(s.floats);
    static const Prim plain[] = {Prim::neg,      Prim::sin,  Prim::cos,          Prim::tanh,
                                 Prim::logistic, Prim::abs,  Prim::sign,         Prim::floor,
                                 Prim::ceil,     Prim::copy, Prim::stop_gradient};
    switch (uniform(0, 6)) {
      case 0:
      case 1: {
        Prim p = plain[uniform(0, std::size(plain) - 1)];
        if (p == Prim::stop_gradient && o_.differentiable) p = Prim::copy;
        emit_float(s, p, {x});
        return;
      }
      case 2: {  // exp/expm1/tan of tanh x: bounded arguments
        static const Prim p[] = {Prim::exp, Prim::expm1, Prim::tan};
        emit_float(s, p[uniform(0, 2)], {emit(s, Prim::tanh, {x})});
        return;
      }
      case 3: {
        static const Prim p[] = {Prim::log, Prim::log1p, Prim::sqrt, Prim::rsqrt};
        emit_float(s, p[uniform(0, 3)], {positive(s, x)});
        return;
      }
      case 4: {
        int64_t y = uniform(-2, 3);
        emit_float(s, Prim::integer_pow, {y < 0 ? positive(s, x) : x}, {{"y", y}});
        return;
      }
      case 5:
        emit_float(s, Prim::round, {x}, {{"rounding_method", int64_t{uniform(0, 1)}}});
        return;
      default: emit_float(s, Prim::sin, {x}); return;
    }
  }

  void binary(Scope& s) {
    Var x = pick(s.floats);
    Atom y = coin(0.25) ? Atom(flit(real(-2, 2))) : Atom(same_shape_float(s, x));
    static const Prim ops[] = {Prim::add, Prim::sub, Prim::mul, Prim::div,
                               Prim::max, Prim::min, Prim::pow, Prim::add_any};
    Prim p = ops[uniform(0, std::size(ops) - 1)];
    Atom a = x;
    if (p == Prim::div && is_var(y)) y = positive(s, as_var(y));
    if (p == Prim::div && !is_var(y)) y = flit(real(0.5, 2));
    if (p == Prim::pow) {
      a = positive(s, x);
      if (is_var(y)) y = emit(s, Prim::tanh, {as_var(y)});
    }
    if (!is_var(y) && coin(0.3) && p != Prim::pow && p != Prim::div) std::swap(a, y);
    emit_float(s, p, {a, y});
  }

  void select(Scope& s) {
    Var x = pick(s.floats);
    if (!s.ints.empty() && coin(0.4)) {  // i32 predicate, scalar, 1-3 cases, clamps
      std::vector<Atom> ins{pick(s.ints)};
      const int n = uniform(1, 3);
      for (int i = 0; i < n; ++i) ins.push_back(same_shape_float(s, x));
      emit_float(s, Prim::select_n, ins);
      return;
    }
    Var y = same_shape_float(s, x);
    static const Prim cmp[] = {Prim::lt, Prim::le, Prim::gt, Prim::ge, Prim::eq, Prim::ne};
    Atom rhs = coin(0.3) ? Atom(flit(real(-1, 1))) : Atom(y);
    Var p = emit(s, cmp[uniform(0, 5)], {x, rhs});
    emit_float(s, Prim::select_n, {p, x, same_shape_float(s, x)});
  }

  void broadcast(Scope& s) {
    Var x = pick(s.floats);
    const Shape& xs = shape_of(s, x);
    const int out_rank = std::min<int>(4, xs.size() + uniform(1, 2));
    if (static_cast<int>(xs.size()) >= out_rank) return unary(s);
    std::vector<int64_t> positions(out_rank);
    std::iota(positions.begin(), positions.end(), 0);
    std::shuffle(positions.begin(), positions.end(), rng_);
    positions.resize(xs.size());
    std::sort(positions.begin(), positions.end());
    Shape out(out_rank);
    for (int64_t& d : out) d = uniform(1, 3);
    for (size_t i = 0; i < xs.size(); ++i)
      out[positions[i]] = xs[i] == 1 && coin(0.5) ? uniform(1, 3) : xs[i];
    emit_float(
        s, Prim::broadcast_in_dim, {x},
        {{"broadcast_dimensions", IntList(positions)}, {"shape", out}, {"sharding", NoneParam{}}});
  }

  void reshape(Scope& s) {
    Var x = pick(s.floats);
    int64_t n = 1;
    for (int64_t d : shape_of(s, x)) n *= d;
    std::vector<int64_t> factors;
    for (int64_t p = 2, m = n; m > 1;) {
      if (m % p == 0) {
        factors.push_back(p);
        m /= p;
      } else {
        ++p;
      }
    }
    std::shuffle(factors.begin(), factors.end(), rng_);
    Shape out(uniform(0, 3), 1);
    if (out.empty() && n != 1) out.push_back(1);
    for (int64_t f : factors) out[uniform(0, out.size() - 1)] *= f;
    emit_float(s, Prim::reshape, {x}, {{"dimensions", NoneParam{}}, {"new_sizes", IntList(out)}});
  }

  void transpose(Scope& s) {
    Var x = pick(s.floats);
    IntList perm(shape_of(s, x).size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    emit_float(s, Prim::transpose, {x}, {{"permutation", perm}});
  }

  void slice(Scope& s) {
    Var x = pick(s.floats);
    const Shape xs = shape_of(s, x);
    IntList start, limit, strides;
    bool strided = coin(0.4);
    for (int64_t d : xs) {
      int64_t a = uniform(0, d - 1);
      start.push_back(a);
      limit.push_back(uniform(a + 1, d));
      strides.push_back(strided ? uniform(1, 2) : 1);
    }
    Params params{{"limit_indices", limit}, {"start_indices", start}};
    params.set("strides", strided ? ParamValue(strides) : ParamValue(NoneParam{}));
    emit_float(s, Prim::slice, {x}, params);
  }

  std::vector<Atom> indices(Scope& s, size_t rank) {
    std::vector<Atom> r;
    for (size_t i = 0; i < rank; ++i) r.push_back(index(s));
    return r;
  }

  void dynamic_slice(Scope& s) {
    Var x = pick(s.floats);
    const Shape xs = shape_of(s, x);
    IntList sizes;
    for (int64_t d : xs) sizes.push_back(uniform(1, d));
    std::vector<Atom> ins{x};
    for (Atom& a : indices(s, xs.size())) ins.push_back(a);
    emit_float(s, Prim::dynamic_slice, ins, {{"slice_sizes", sizes}});
  }

  // x with a window written at dynamic starts. The update is sin of a window of an array of
  // x's shape, or (the programs move-windows rewrites) a window of one row run moved as it is,
  // taken from x itself half of the time, maybe beside a one-element piece along the last dim
  // (an insert shifting the run by one).
  void dynamic_update(Scope& s) {
    Var x = pick(s.floats);
    const Shape xs = shape_of(s, x);
    const bool moved = !xs.empty() && coin(0.5);
    const bool insert = moved && xs.back() > 1 && coin(0.5);
    IntList sizes;
    for (int64_t d : xs) sizes.push_back(moved ? 1 : uniform(1, d));
    if (moved) sizes.back() = uniform(1, xs.back() - (insert ? 1 : 0));
    std::vector<Atom> ds_ins{moved && coin(0.5) ? x : same_shape_float(s, x)};
    for (Atom& a : indices(s, xs.size())) ds_ins.push_back(a);
    Var u = emit(s, Prim::dynamic_slice, ds_ins, {{"slice_sizes", sizes}});
    if (!moved) u = emit(s, Prim::sin, {u});
    if (insert) {
      std::vector<Atom> one_ins{same_shape_float(s, x)};
      for (Atom& a : indices(s, xs.size())) one_ins.push_back(a);
      Var one = emit(s, Prim::dynamic_slice, one_ins, {{"slice_sizes", IntList(xs.size(), 1)}});
      one = emit(s, Prim::sin, {one});
      const bool before = coin(0.5);
      u = emit(s, Prim::concatenate, {before ? one : u, before ? u : one},
               {{"dimension", static_cast<int64_t>(xs.size() - 1)}});
    }
    std::vector<Atom> ins{x, u};
    for (Atom& a : indices(s, xs.size())) ins.push_back(a);
    emit_float(s, Prim::dynamic_update_slice, ins);
  }

  void reduce(Scope& s) {
    Var x = pick(s.floats);
    const int rank = shape_of(s, x).size();
    if (rank == 0) return unary(s);
    IntList axes;
    for (int i = 0; i < rank; ++i)
      if (coin(0.5)) axes.push_back(i);
    if (axes.empty()) axes.push_back(uniform(0, rank - 1));
    if (coin(0.15)) {  // argmax over one axis, converted back to float
      Var a = emit(s, Prim::argmax, {x}, {{"axes", IntList{axes[0]}}, {"index_dtype", DType::i32}});
      emit_float(s, Prim::convert_element_type, {a}, {{"new_dtype", f_}, {"weak_type", false}});
      return;
    }
    static const Prim ops[] = {Prim::reduce_sum, Prim::reduce_max, Prim::reduce_min};
    emit_float(s, ops[uniform(0, 2)], {x}, {{"axes", axes}});
  }

  void dot(Scope& s) {
    // Any pair (x, y) with a dim of equal size to contract, optionally another for a batch dim.
    struct Candidate {
      Var x, y;
      DotDims dims;
    };
    std::vector<Candidate> found;
    for (Var x : s.floats)
      for (Var y : s.floats) {
        const Shape &xs = shape_of(s, x), &ys = shape_of(s, y);
        for (size_t i = 0; i < xs.size(); ++i)
          for (size_t j = 0; j < ys.size(); ++j) {
            if (xs[i] != ys[j]) continue;
            DotDims d{{int64_t(i)}, {int64_t(j)}, {}, {}};
            for (size_t bi = 0; bi < xs.size(); ++bi)
              for (size_t bj = 0; bj < ys.size(); ++bj)
                if (bi != i && bj != j && xs[bi] == ys[bj] && d.lhs_batch.empty() && coin(0.5)) {
                  d.lhs_batch = {int64_t(bi)};
                  d.rhs_batch = {int64_t(bj)};
                }
            if (xs.size() + ys.size() - 2 - d.lhs_batch.size() <= 4) found.push_back({x, y, d});
          }
      }
    if (found.empty()) return binary(s);
    const Candidate& c = pick(found);
    emit_float(s, Prim::dot_general, {c.x, c.y},
               {{"dimension_numbers", c.dims},
                {"precision", NoneParam{}},
                {"preferred_element_type", f_}});
  }

  void convert(Scope& s) {  // through the other float dtype (or i32: truncation) and back
    Var x = pick(s.floats);
    DType mid = coin(0.7) ? (f_ == DType::f32 ? DType::f64 : DType::f32) : DType::i32;
    if (o_.differentiable && mid == DType::f32) mid = DType::f64;
    Var m = emit(s, Prim::convert_element_type, {x}, {{"new_dtype", mid}, {"weak_type", false}});
    emit_float(s, Prim::convert_element_type, {m}, {{"new_dtype", f_}, {"weak_type", false}});
  }

  void new_ref(Scope& s) {
    Var r = emit(s, Prim::new_ref, {pick(s.floats)});
    s.refs.push_back(r);
    s.local_refs.push_back(r);
  }

  // A random indexer for a ref of shape `shape`; `dyn` receives its dynamic operands.
  Indexer random_indexer(Scope& s, const Shape& shape, std::vector<Atom>& dyn) {
    Indexer idx;
    if (coin(0.25)) return idx;  // whole ref
    const int n = uniform(shape.empty() ? 0 : 1, shape.size());
    bool has_array = false;
    for (int i = 0; i < n; ++i) {
      const int64_t d = shape[i];
      IndexerDim dim;
      switch (uniform(0, 4)) {
        case 4:  // an index array (NumPy advanced indexing; at most one), clamps
          if (!s.floats.empty() && !has_array) {
            has_array = true;
            dim.kind = IndexerDim::Kind::index_array;
            dim.dynamic = true;
            Var k = int_array(s);
            if (shape_of(s, k).size() <= 2) {
              dyn.push_back(k);
              break;
            }
          }
          [[fallthrough]];
        case 0: {  // static slice, stride 1 or 2
          dim = IndexerDim{};
          dim.kind = IndexerDim::Kind::slice;
          dim.start = uniform(0, d - 1);
          dim.stride = coin(0.3) ? 2 : 1;
          const int64_t max_size = (d - dim.start + dim.stride - 1) / dim.stride;
          dim.size = uniform(1, max_size);
          break;
        }
        case 1:
          dim.kind = IndexerDim::Kind::index;
          dim.start = uniform(0, d - 1);
          break;
        case 2:  // dynamic slice start: clamps
          dim.kind = IndexerDim::Kind::slice;
          dim.size = uniform(1, d);
          dim.dynamic = true;
          dyn.push_back(index(s));
          break;
        default:  // dynamic integer index: clamps
          dim.kind = IndexerDim::Kind::index;
          dim.dynamic = true;
          dyn.push_back(index(s));
          break;
      }
      idx.dims.push_back(dim);
    }
    return idx;
  }
  // The same indexer with fresh dynamic operands (same selected shape, other place).
  // Index arrays are kept (their shape is part of the selected shape).
  void redraw_dynamic(Scope& s, const Indexer& idx, std::vector<Atom>& dyn) {
    size_t k = 0;
    for (const IndexerDim& d : idx.dims) {
      if (!d.dynamic) continue;
      if (d.kind != IndexerDim::Kind::index_array) dyn[k] = index(s);
      ++k;
    }
  }

  void ref_op(Scope& s) {
    if (s.refs.empty()) return new_ref(s);
    Var r = pick(s.refs);
    const Shape shape = s.b.jaxpr().type_of(r).shape();
    std::vector<Atom> dyn;
    Indexer idx = random_indexer(s, shape, dyn);
    std::vector<Atom> get_ins{r};
    get_ins.insert(get_ins.end(), dyn.begin(), dyn.end());
    Var g = emit_float(s, Prim::get, get_ins, {{"indexer", idx}});
    const int kind = uniform(0, 4);
    if (kind == 0) return;  // just a read
    if (kind == 3 && !shape.empty()) return shift(s, r, shape);
    if (kind == 4 && !shape.empty()) return flat_run_access(s, r, shape);
    // A new value of the indexed shape: f(read) or read * other.
    Var u = coin(0.5) ? emit(s, Prim::sin, {g}) : emit(s, Prim::mul, {g, same_shape_float(s, g)});
    if (coin(0.5)) redraw_dynamic(s, idx, dyn);
    std::vector<Atom> ins{r, u};
    ins.insert(ins.end(), dyn.begin(), dyn.end());
    if (kind == 1)
      emit_float(s, Prim::swap, ins, {{"indexer", idx}});
    else
      s.b.add_eqn(Prim::addupdate, ins, {{"indexer", idx}});
  }

  // A flattened ref read as one run (get_flat_run[bound length] r start), then maybe written
  // with f(read) at the same place (swap_flat_run): the decisions the transpose of a scatter on
  // a flattened carry writes, here in a forward program, so every transform reads their plain
  // form (passes/plain_decisions.h). The bound is the ref's last element, or beyond it (a
  // trimmed ref); the run may start below 0 or end past the bound.
  void flat_run_access(Scope& s, Var r, const Shape& shape) {
    int64_t total = 1;
    for (int64_t d : shape) total *= d;
    const int64_t n = uniform(1, total + 2);
    Params params{{"bound", total - 1 + (coin(0.3) ? uniform(1, 9) : 0)}, {"length", n}};
    Var g = emit_float(s, Prim::get_flat_run, {r, index(s)}, params);
    if (coin(0.5)) return;
    emit_float(s, Prim::swap_flat_run, {r, index(s), emit(s, Prim::sin, {g})}, params);
  }

  // A row segment moved inside a ref, as the seed's inserts and deletes move one: a run of r
  // read, maybe joined after a one-element value (an insert), written back over another run
  // whose old value nobody reads. Its transpose is one shift_add on the ref's cotangent
  // (passes/ad/window_shift.h), which the transpose check runs.
  void shift(Scope& s, Var r, const Shape& shape) {
    const int64_t m = uniform(1, shape.back());
    auto run_indexer = [&](int64_t size, std::vector<Atom>& dyn) {
      Indexer idx;
      for (size_t d = 0; d + 1 < shape.size(); ++d) {
        idx.dims.push_back(IndexerDim{IndexerDim::Kind::index, 0, 0, 1, true});
        dyn.push_back(index(s));
      }
      idx.dims.push_back(IndexerDim{IndexerDim::Kind::slice, 0, size, 1, true});
      dyn.push_back(index(s));
      return idx;
    };
    const bool insert = m > 1 && coin(0.5);
    const int64_t length = insert ? m - 1 : m;
    std::vector<Atom> read_dyn, write_dyn;
    const Indexer read = run_indexer(length, read_dyn);
    const Indexer write = run_indexer(m, write_dyn);
    std::vector<Atom> get_ins{r};
    get_ins.insert(get_ins.end(), read_dyn.begin(), read_dyn.end());
    Var moved = emit_float(s, Prim::get, get_ins, {{"indexer", read}});
    if (insert) {
      Var first = coerce(s, pick(s.floats), ArrayType{f_, {1}});
      moved = emit(s, Prim::concatenate, {first, moved}, {{"dimension", int64_t{0}}});
    }
    std::vector<Atom> swap_ins{r, moved};
    swap_ins.insert(swap_ins.end(), write_dyn.begin(), write_dyn.end());
    s.b.add_eqn(Prim::swap, swap_ins, {{"indexer", write}});
  }

  // A body scope whose invars have `types`; floats/refs/ints among them go to the pools.
  Scope body_scope(const Scope& parent, const std::vector<Type>& types) {
    Scope b;
    b.depth = parent.depth + 1;
    for (const Type& t : types) {
      Var v = b.b.add_invar(t);
      if (t.is_ref)
        b.refs.push_back(v);
      else if (t.dtype() == DType::i32)
        b.ints.push_back(v);
      else
        b.floats.push_back(v);
    }
    return b;
  }
  void body_steps(Scope& b) {
    const int n = uniform(1, 4);
    for (int i = 0; i < n; ++i) step(b);
  }
  // A value of type t in the body, mixed with `base` when given (carries).
  Var body_output(Scope& b, const ArrayType& t, std::optional<Var> base) {
    std::vector<Var> leaves = unread_floats(b);
    Var v = coerce(b, pick(leaves.empty() ? b.floats : leaves), t);
    if (!base) return v;
    const int kind = uniform(0, 2);
    if (kind == 2 && t.rank() > 0 && t.num_elements() > 0) return flat_scatter(b, *base, v, t);
    return kind == 0 ? emit(b, Prim::sin, {emit(b, Prim::add, {*base, v})})
                     : emit(b, Prim::tanh, {emit(b, Prim::mul, {*base, v})});
  }

  // `base` with a run of its flattened entries set from `v`, as the seed's x.at[row, cols].set
  // writes a carry: reshape(scatter(reshape(base, [n]), start + iota(k), f(v)), shape), or the
  // same with a dynamic_update_slice at `start`. The run may cross a row's end or the array's.
  // The carry's cotangent then stays in a ref across the transposed loop, and the transpose
  // reads and zeroes the run there with get_flat_run / swap_flat_run
  // (passes/ad/cotangent_ref.h), which the transpose check runs.
  Var flat_scatter(Scope& b, Var base, Var v, const ArrayType& t) {
    const int64_t n = t.num_elements();
    const int64_t k = uniform(1, std::min<int64_t>(n, 6));
    Var flat =
        emit(b, Prim::reshape, {base}, {{"dimensions", NoneParam{}}, {"new_sizes", IntList{n}}});
    const auto [q, start] = iota_and_start(b, k);
    Var idx = emit(b, Prim::add, {start, q});
    // v has base's shape: its first k entries, flattened.
    Var v_flat =
        emit(b, Prim::reshape, {v}, {{"dimensions", NoneParam{}}, {"new_sizes", IntList{n}}});
    Var u = emit(b, Prim::sin,
                 {emit(b, Prim::slice, {v_flat},
                       {{"start_indices", IntList{0}},
                        {"limit_indices", IntList{k}},
                        {"strides", NoneParam{}}})});
    Var set;
    if (coin(0.3)) {
      // The same run as a window: dynamic_update_slice clamps the start so that it fits.
      // `start` broadcasts this scalar.
      const std::vector<Eqn>& eqns = b.b.jaxpr().eqns;
      const auto def = std::find_if(eqns.rbegin(), eqns.rend(),
                                    [&](const Eqn& e) { return e.outs.at(0) == start; });
      set = emit(b, Prim::dynamic_update_slice, {flat, u, def->ins.at(0)});
    } else {
      Params params{{"axis", int64_t{0}}};
      if (coin(0.5)) params.set("unique_indices", true);  // a run's entries are distinct
      if (t.rank() > 1 && coin(0.4)) {
        // The index addressing every dim of base itself, as JAX's x.at[r, cols] is read.
        params.set("dims", static_cast<int64_t>(t.rank()));
        return emit(b, Prim::scatter, {base, idx, u}, params);
      }
      set = emit(b, Prim::scatter, {flat, idx, u}, params);
    }
    return emit(b, Prim::reshape, {set}, {{"dimensions", NoneParam{}}, {"new_sizes", t.shape}});
  }

  void scan(Scope& s) {
    std::vector<Atom> ins;
    std::vector<Type> body_in;
    const Jaxpr& j = s.b.jaxpr();
    // consts: maybe a closed-over ref, maybe a float, maybe an index
    if (o_.refs && !s.refs.empty() && coin(0.5)) {
      Var r = pick(s.refs);
      ins.push_back(r);
      body_in.push_back(j.type_of(r));
    }
    if (coin(0.5)) {
      Var c = pick(s.floats);
      ins.push_back(c);
      body_in.push_back(j.type_of(c));
    }
    if (!s.ints.empty() && coin(0.3)) {
      Var i = pick(s.ints);
      ins.push_back(i);
      body_in.push_back(j.type_of(i));
    }
    const int64_t num_consts = ins.size();
    const int num_carry = uniform(1, 2);
    std::vector<ArrayType> carry_types;
    for (int i = 0; i < num_carry; ++i) {
      Var c = pick(s.floats);
      ins.push_back(c);
      body_in.push_back(j.type_of(c));
      carry_types.push_back(j.type_of(c).array);
    }
    // xs: float arrays with a common leading dim, maybe a ref scanned over
    int64_t length = uniform(1, 4);
    std::vector<Var> leading;
    for (Var v : s.floats)
      if (!j.type_of(v).shape().empty()) leading.push_back(v);
    if (!leading.empty() && coin(0.7)) {
      length = j.type_of(pick(leading)).shape()[0];
      for (Var v : s.floats)
        if (!j.type_of(v).shape().empty() && j.type_of(v).shape()[0] == length && coin(0.5)) {
          ins.push_back(v);
          Shape row(j.type_of(v).shape().begin() + 1, j.type_of(v).shape().end());
          body_in.push_back(ArrayType{f_, row});
        }
      for (Var r : s.refs)
        if (std::find(ins.begin(), ins.end(), Atom(r)) == ins.end() &&
            !j.type_of(r).shape().empty() && j.type_of(r).shape()[0] == length && coin(0.3)) {
          ins.push_back(r);
          Shape row(j.type_of(r).shape().begin() + 1, j.type_of(r).shape().end());
          body_in.push_back(Type::ref(ArrayType{f_, row}));
        }
    }
    Scope b = body_scope(s, body_in);
    body_steps(b);
    std::vector<Atom> outs;
    for (int i = 0; i < num_carry; ++i)
      outs.push_back(body_output(b, carry_types[i], b.b.jaxpr().invars[num_consts + i]));
    const int num_ys = uniform(0, 2);
    std::vector<Var> leaves = unread_floats(b);
    for (int i = 0; i < num_ys; ++i) outs.push_back(pick(leaves.empty() ? b.floats : leaves));
    b.b.set_outvars(outs);
    auto body = std::make_shared<const Jaxpr>(b.b.finish());
    Params params{{"_split_transpose", false},
                  {"jaxpr", JaxprPtr(body)},
                  {"length", length},
                  {"linear", IntList(ins.size(), 0)},
                  {"num_carry", int64_t{num_carry}},
                  {"num_consts", num_consts},
                  {"reverse", coin(0.3)},
                  {"unroll", int64_t{1}}};
    for (Var v : s.b.add_eqn(Prim::scan, ins, params)) s.floats.push_back(v);
  }

  void cond(Scope& s) {
    const Jaxpr& j = s.b.jaxpr();
    Atom idx;
    int branches = 2;
    if (coin(0.5)) {  // bool predicate
      Var x = pick(s.floats);
      Var r = coerce(s, x, ArrayType{f_, {}});
      idx = emit(s, Prim::lt, {r, flit(0.0)});
    } else {  // i32 index, may be out of range: clamps
      idx = index(s);
      branches = uniform(1, 3);
    }
    std::vector<Atom> ins{idx};
    std::vector<Type> types;
    const int n_ops = uniform(1, 3);
    for (int i = 0; i < n_ops; ++i) {
      Var v = pick(s.floats);
      ins.push_back(v);
      types.push_back(j.type_of(v));
    }
    if (o_.refs && !s.refs.empty() && coin(0.4)) {
      Var r = pick(s.refs);
      ins.push_back(r);
      types.push_back(j.type_of(r));
    }
    std::vector<ArrayType> out_types;
    const int n_outs = uniform(1, 2);
    for (int i = 0; i < n_outs; ++i) out_types.push_back(pick(types).array);
    JaxprList list;
    for (int k = 0; k < branches; ++k) {
      Scope b = body_scope(s, types);
      body_steps(b);
      std::vector<Atom> outs;
      for (const ArrayType& t : out_types) outs.push_back(body_output(b, t, std::nullopt));
      b.b.set_outvars(outs);
      list.push_back(std::make_shared<const Jaxpr>(b.b.finish()));
    }
    for (Var v : s.b.add_eqn(Prim::cond, ins, {{"branches", list}})) s.floats.push_back(v);
  }

  std::mt19937_64 rng_;
  GenOptions o_;
  DType f_;
};

}  // namespace

Program generate(uint64_t seed, const GenOptions& options) {
  return Generator(seed, options).run();
}

std::vector<RtValue> copy_args(const std::vector<RtValue>& args) {
  std::vector<RtValue> r;
  for (const RtValue& v : args) {
    if (const RefBufferPtr* p = std::get_if<RefBufferPtr>(&v))
      r.push_back(std::make_shared<RefBuffer>((*p)->value()));
    else
      r.push_back(v);
  }
  return r;
}

}  // namespace refjit::randgen
