#include "passes/simplify/canonicalize.h"

#include <optional>
#include <utility>
#include <vector>

#include "ir/loop_params.h"
#include "passes/jaxpr_util.h"
#include "passes/pattern_rewriter.h"
#include "passes/simplify/dce.h"
#include "passes/simplify/window_sums.h"
#include "refjit/ir/use_def.h"

namespace refjit {
namespace {

bool is_rank0(const Rewriter& r, const Atom& a) { return r.array_type(a).rank() == 0; }

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

// The eqn's single result reads as `x` from now on (when the types agree).
Rewritten forward(const Eqn& e, const Atom& x, Rewriter& r) {
  return e.outs.size() == 1 && r.replace(e.outs[0], x) ? Rewritten::replaced : Rewritten::no;
}

// Whether `a` is the literal one, or a broadcast of it.
bool is_one(const Atom& a, const Rewriter& r) {
  if (const Literal* l = std::get_if<Literal>(&a)) return l->equals(1.0);
  const Eqn* b = r.def(a);
  return b && b->prim == Prim::broadcast_in_dim && b->ins.size() == 1 && is_one(b->ins[0], r);
}

// `out` = scalar `s` broadcast to out's shape.
Eqn broadcast_scalar(Var s, Var out, const Rewriter& r) {
  return Eqn{Prim::broadcast_in_dim,
             Params{{"shape", IntList(r.array_type(out).shape)},
                    {"broadcast_dimensions", IntList{}},
                    {"sharding", NoneParam{}}},
             {s},
             {out}};
}

// --- Eqns whose result is their operand --------------------------------------------------

// A slice from the start to the end of every dim.
Rewritten slice_of_everything(Eqn& e, Rewriter& r) {
  if (e.outs.size() != 1 || e.ins.empty() || !is_var(e.ins[0]) || !unit_strides(e))
    return Rewritten::no;
  const Shape& s = r.array_type(e.ins[0]).shape;
  const IntList& start = e.params.get<IntList>("start_indices");
  const IntList& limit = e.params.get<IntList>("limit_indices");
  if (start.size() != s.size() || limit.size() != s.size()) return Rewritten::no;
  for (size_t k = 0; k < s.size(); ++k)
    if (start[k] != 0 || limit[k] != s[k]) return Rewritten::no;
  return forward(e, e.ins[0], r);
}

Rewritten sum_over_no_axes(Eqn& e, Rewriter& r) {
  if (e.ins.size() != 1 || !is_var(e.ins[0]) || !e.params.get<IntList>("axes").empty())
    return Rewritten::no;
  return forward(e, e.ins[0], r);
}

Rewritten pad_by_nothing(Eqn& e, Rewriter& r) {
  if (e.ins.empty() || !is_var(e.ins[0])) return Rewritten::no;
  for (const IntList& c : e.params.get<IntListList>("padding_config"))
    for (int64_t k : c)
      if (k != 0) return Rewritten::no;
  return forward(e, e.ins[0], r);
}

// x * 1, or x times a broadcast one (reverse mode multiplies cotangents by ones).
Rewritten mul_by_one(Eqn& e, Rewriter& r) {
  if (e.ins.size() != 2) return Rewritten::no;
  if (is_var(e.ins[0]) && is_one(e.ins[1], r) && forward(e, e.ins[0], r) == Rewritten::replaced)
    return Rewritten::replaced;
  if (is_var(e.ins[1]) && is_one(e.ins[0], r)) return forward(e, e.ins[1], r);
  return Rewritten::no;
}

// --- Detours -------------------------------------------------------------------------------

// A slice of a concatenate that falls within one operand slices that operand (or is it).
Rewritten slice_of_concatenate(Eqn& e, Rewriter& r) {
  if (e.outs.size() != 1 || !unit_strides(e)) return Rewritten::no;
  const Eqn* c = r.def(e.ins.at(0));
  if (!c || c->prim != Prim::concatenate) return Rewritten::no;
  const auto d = static_cast<size_t>(c->params.get<int64_t>("dimension"));
  IntList start = e.params.get<IntList>("start_indices");
  IntList limit = e.params.get<IntList>("limit_indices");
  if (d >= start.size() || d >= limit.size()) return Rewritten::no;
  int64_t offset = 0;
  for (const Atom& operand : c->ins) {
    const int64_t n = r.array_type(operand).shape.at(d);
    if (start[d] >= offset && limit[d] <= offset + n) {
      start[d] -= offset;
      limit[d] -= offset;
      e.ins[0] = operand;  // slice_of_everything takes it from here when it is the whole
      e.params.set("start_indices", start);
      e.params.set("limit_indices", limit);
      return Rewritten::in_place;
    }
    offset += n;
  }
  return Rewritten::no;
}

// A sum over dims of size 1 adds nothing: it is a reshape (a gradient sums a [1, n] cotangent
// over its first dim).
Rewritten sum_over_unit_dims(Eqn& e, Rewriter& r) {
  if (e.ins.size() != 1 || e.outs.size() != 1) return Rewritten::no;
  const Shape& x = r.array_type(e.ins[0]).shape;
  const IntList& axes = e.params.get<IntList>("axes");
  if (axes.empty()) return Rewritten::no;  // sum_over_no_axes forwards it
  for (int64_t a : axes)
    if (a < 0 || static_cast<size_t>(a) >= x.size() || x[static_cast<size_t>(a)] != 1)
      return Rewritten::no;
  e.prim = Prim::reshape;
  e.params =
      Params{{"dimensions", NoneParam{}}, {"new_sizes", IntList(r.array_type(e.outs[0]).shape)}};
  return Rewritten::in_place;
}

// A reshape of a reshape reshapes the first one's operand (or is it).
Rewritten reshape_of_reshape(Eqn& e, Rewriter& r) {
  if (!is_row_major_reshape(e)) return Rewritten::no;
  const Eqn* inner = r.def(e.ins[0]);
  if (!inner || !is_row_major_reshape(*inner) || r.type_of(inner->ins[0]).is_ref)
    return Rewritten::no;
  if (forward(e, inner->ins[0], r) == Rewritten::replaced) return Rewritten::replaced;
  e.ins[0] = inner->ins[0];
  return Rewritten::in_place;
}

// A reshape (or squeeze) of a broadcast that only drops or inserts size-1 dims is a broadcast
// of the same operand (or the operand itself, when that is what it gives back).
Rewritten reshape_of_broadcast(Eqn& e, Rewriter& r) {
  if (!is_row_major_reshape(e) && e.prim != Prim::squeeze) return Rewritten::no;
  const Eqn* b = r.def(e.ins.at(0));
  if (!b || b->prim != Prim::broadcast_in_dim || b->ins.size() != 1) return Rewritten::no;
  const Shape& x = r.array_type(b->outs[0]).shape;
  const Shape& y = r.array_type(b->ins[0]).shape;
  const Shape& out = r.array_type(e.outs[0]).shape;
  const IntList dims = broadcast_dims_of(*b);
  if (dims.size() != y.size()) return Rewritten::no;
  // x's dims of size > 1 in order, and where each lands in the result.
  std::vector<int64_t> landing(x.size(), -1);
  size_t next = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    if (x[k] == 1) continue;
    while (next < out.size() && out[next] == 1) ++next;
    if (next == out.size() || out[next] != x[k]) return Rewritten::no;
    landing[k] = static_cast<int64_t>(next++);
  }
  while (next < out.size() && out[next] == 1) ++next;
  if (next != out.size()) return Rewritten::no;
  // The operand's dims through both: each must land on a dim of the result.
  IntList out_dims;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || static_cast<size_t>(dims[i]) >= x.size()) return Rewritten::no;
    const int64_t to = landing[static_cast<size_t>(dims[i])];
    if (to < 0) {
      // The broadcast only inserted size-1 dims.
      return out == y ? forward(e, b->ins[0], r) : Rewritten::no;
    }
    out_dims.push_back(to);
  }
  bool identity = out == y;
  for (size_t i = 0; i < out_dims.size(); ++i) identity &= out_dims[i] == static_cast<int64_t>(i);
  if (identity) return forward(e, b->ins[0], r);
  const Atom operand = b->ins[0];
  e = Eqn{Prim::broadcast_in_dim,
          Params{{"shape", IntList(out)}, {"broadcast_dimensions", out_dims}},
          {operand},
          {e.outs[0]}};
  return Rewritten::in_place;
}

// A broadcast of a broadcast reads the inner one's operand directly: JAX spells `x @ w + b`
// as b broadcast to [1, n], then (implicitly) to [m, n]; one broadcast of b leaves no [1, n]
// array between the product and its consumer (and lets them fuse, fusion.h).
Rewritten broadcast_of_broadcast(Eqn& e, Rewriter& r) {
  if (e.ins.size() != 1) return Rewritten::no;
  const Eqn* inner = r.def(e.ins[0]);
  if (!inner || inner->prim != Prim::broadcast_in_dim || inner->ins.size() != 1 ||
      r.type_of(inner->ins[0]).is_ref)
    return Rewritten::no;
  const IntList outer_dims = broadcast_dims_of(e), inner_dims = broadcast_dims_of(*inner);
  const size_t mid_rank = static_cast<size_t>(r.array_type(inner->outs[0]).rank());
  if (outer_dims.size() != mid_rank) return Rewritten::no;
  IntList dims;
  for (int64_t d : inner_dims) {
    if (d < 0 || static_cast<size_t>(d) >= mid_rank) return Rewritten::no;
    dims.push_back(outer_dims[static_cast<size_t>(d)]);
  }
  e.ins[0] = inner->ins[0];
  e.params.set("broadcast_dimensions", dims);
  return Rewritten::in_place;
}

// The scalar an operand stands for: a rank-0 atom, or the operand of its broadcast.
std::optional<Atom> scalar_of(const Atom& a, bool& broadcast, const Rewriter& r) {
  if (is_rank0(r, a)) return a;
  const Eqn* b = r.def(a);
  if (b && b->prim == Prim::broadcast_in_dim && b->ins.size() == 1 && is_rank0(r, b->ins[0])) {
    broadcast = true;
    return b->ins[0];
  }
  return std::nullopt;
}

// An add / sub / mul of broadcast scalars (and scalars) is the broadcast of the scalar result
// (`row * 1000` where row is a broadcast row index), so that index vectors read as "one iota
// plus scalars" (unit_run.h).
Rewritten arithmetic_of_broadcast_scalars(Eqn& e, Rewriter& r) {
  if (e.outs.size() != 1 || e.ins.size() != 2) return Rewritten::no;
  const ArrayType t = r.array_type(e.outs[0]);
  if (t.rank() == 0) return Rewritten::no;
  bool broadcast = false;
  std::optional<Atom> a = scalar_of(e.ins[0], broadcast, r);
  std::optional<Atom> b = scalar_of(e.ins[1], broadcast, r);
  if (!a || !b || !broadcast) return Rewritten::no;
  const Var s = r.new_var(Type(ArrayType{t.dtype, {}}));
  r.emit(Eqn{e.prim, e.params, {*a, *b}, {s}});
  r.emit(broadcast_scalar(s, e.outs[0], r));
  return Rewritten::replaced;
}

// A sum of a broadcast scalar is the scalar times the count of elements summed into each
// result (the gradient of a bias added over a batch sums a cotangent of ones). Integers wrap
// the same either way; a float count must be exact (at most 2^24) and only f32 and f64 are
// taken (a sum in a narrower float rounds at every step).
Rewritten sum_of_broadcast_scalar(Eqn& e, Rewriter& r) {
  if (e.outs.size() != 1 || e.ins.size() != 1) return Rewritten::no;
  const Eqn* b = r.def(e.ins[0]);
  if (!b || b->prim != Prim::broadcast_in_dim || b->ins.size() != 1 || !is_rank0(r, b->ins[0]))
    return Rewritten::no;
  const ArrayType t = r.array_type(e.outs[0]);
  const ArrayType xt = r.array_type(e.ins[0]);
  const DType d = t.dtype;
  const bool exact_float = d == DType::f32 || d == DType::f64;
  if (t.num_elements() == 0 || (!exact_float && !is_int(d))) return Rewritten::no;
  const int64_t count = xt.num_elements() / t.num_elements();
  if (exact_float && count > (int64_t{1} << 24)) return Rewritten::no;
  const Literal n =
      exact_float ? Literal::of_float(d, static_cast<double>(count)) : Literal::of_int(d, count);
  const Atom scalar = b->ins[0];
  if (t.rank() == 0) {
    r.emit(Eqn{Prim::mul, {}, {scalar, n}, {e.outs[0]}});
  } else {
    const Var s = r.new_var(Type(ArrayType{d, {}}));
    r.emit(Eqn{Prim::mul, {}, {scalar, n}, {s}});
    r.emit(broadcast_scalar(s, e.outs[0], r));
  }
  return Rewritten::replaced;
}

// A scan const computed from nothing (an iota, a broadcast literal) is computed inside the
// body instead, where the body's index arithmetic can see it. The operand stays (unread in the
// body) for dce to remove.
Rewritten scan_consts_from_nothing(Eqn& scan, Rewriter& r) {
  const ScanParams scan_params = ScanParams::of(scan);
  const auto num_consts = scan_params.num_consts;
  Jaxpr body = *scan_params.body;
  const UseDef body_uses(body);
  std::vector<Eqn> moved;
  for (size_t p = 0; p < num_consts && p < scan.ins.size() && p < body.invars.size(); ++p) {
    if (body_uses.use_count(body.invars[p]) == 0) continue;  // moved already, or never read
    const Eqn* d = r.def(scan.ins[p]);
    if (!d || d->outs.size() != 1 || (d->prim != Prim::iota && d->prim != Prim::broadcast_in_dim))
      continue;
    bool nullary = true;
    for (const Atom& a : d->ins) nullary &= !is_var(a);
    if (!nullary) continue;
    const Var inner = body.invars[p];
    body.invars[p] = body.new_var(body.type_of(inner));  // the operand, now unused
    moved.push_back(Eqn{d->prim, d->params, d->ins, {inner}});
  }
  if (moved.empty()) return Rewritten::no;
  body.eqns.insert(body.eqns.begin(), moved.begin(), moved.end());
  scan.params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(body)));
  return Rewritten::in_place;
}

// An eqn that computes what an earlier one computed (same primitive, operands and params;
// a pure eqn) takes the earlier one's results: differentiation computes `sin x` once for the
// value and again for the derivative of `cos x`.
Rewritten same_computation(Eqn& e, Rewriter& r) {
  const Eqn* earlier = r.earlier_equal(e);
  if (!earlier) return Rewritten::no;
  const std::vector<Var> results = earlier->outs;
  for (size_t i = 0; i < e.outs.size(); ++i) r.replace(e.outs[i], results[i]);
  return Rewritten::replaced;
}

// In the order they are tried on an eqn of their primitive.
const RewritePattern kPatterns[] = {
    {"broadcast-of-broadcast", Prim::broadcast_in_dim, broadcast_of_broadcast},
    {"sum-over-no-axes", Prim::reduce_sum, sum_over_no_axes},
    {"sum-over-unit-dims", Prim::reduce_sum, sum_over_unit_dims},
    {"sum-of-broadcast-scalar", Prim::reduce_sum, sum_of_broadcast_scalar},
    {"slice-of-everything", Prim::slice, slice_of_everything},
    {"slice-of-concatenate", Prim::slice, slice_of_concatenate},
    {"pad-by-nothing", Prim::pad, pad_by_nothing},
    {"mul-by-one", Prim::mul, mul_by_one},
    {"reshape-of-broadcast", Prim::reshape, reshape_of_broadcast},
    {"reshape-of-broadcast", Prim::squeeze, reshape_of_broadcast},
    {"reshape-of-reshape", Prim::reshape, reshape_of_reshape},
    {"arithmetic-of-broadcast-scalars", Prim::add, arithmetic_of_broadcast_scalars},
    {"arithmetic-of-broadcast-scalars", Prim::sub, arithmetic_of_broadcast_scalars},
    {"arithmetic-of-broadcast-scalars", Prim::mul, arithmetic_of_broadcast_scalars},
    {"scan-consts-from-nothing", Prim::scan, scan_consts_from_nothing},
    {"same-computation", std::nullopt, same_computation},
};

// sum_window_accumulations at every level: the jaxpr, and every body inside it.
int sum_windows_everywhere(Jaxpr& j) {
  int n = sum_window_accumulations(j);
  for (Eqn& e : j.eqns) n += rewrite_body(e, sum_windows_everywhere);
  return n;
}

}  // namespace

std::span<const RewritePattern> canonicalize_patterns() { return kPatterns; }

Jaxpr canonicalize(const Jaxpr& jaxpr, RewriteStats* stats) {
  RewriteStats local;
  RewriteStats& s = stats ? *stats : local;
  int n = 0;
  Jaxpr out = rewritten_copy(
      jaxpr,
      [&](Jaxpr& j) {
        const int windows = sum_windows_everywhere(j);
        for (int k = 0; k < windows; ++k) s.add("window-sums");
        return windows + apply_patterns(j, kPatterns, &s);
      },
      &n);
  return n > 0 ? dce(out) : out;
}

}  // namespace refjit
