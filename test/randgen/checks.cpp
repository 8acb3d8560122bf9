#include "test/randgen/checks.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include "backend/native.h"
#include "driver/pipeline.h"
#include "ir/sub_jaxprs.h"
#include "passes/ad/jvp.h"
#include "passes/ad/linearize.h"
#include "passes/ad/transpose.h"
#include "passes/batching/vmap.h"
#include "passes/discharge.h"
#include "passes/simplify/dead_regions.h"
#include "passes/simplify/range_simplify.h"
#include "passes/simplify/trim_rows.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"
#include "runtime/interpreter.h"
#include "test/randgen/randgen.h"

namespace refjit::randgen {

namespace {

// Thrown by a check to report a mismatch; refjit::Error from a layer is reported too.
struct Disagreement {
  std::string detail;
};
// Thrown by a check when a layer declines the program in a documented way.
struct Declined {
  std::string reason;
};

Array value_of(const RtValue& v) {
  if (const RefBufferPtr* p = std::get_if<RefBufferPtr>(&v)) return (*p)->value();
  return std::get<Array>(v);
}

// The outputs, then the final value of every ref argument.
std::vector<Array> observed(const Jaxpr& f, const std::vector<RtValue>& outs,
                            const std::vector<RtValue>& args) {
  std::vector<Array> r;
  for (const RtValue& o : outs) r.push_back(value_of(o));
  for (size_t i = 0; i < f.invars.size(); ++i)
    if (f.type_of(f.invars[i]).is_ref) r.push_back(value_of(args[f.constvars.size() + i]));
  return r;
}

std::vector<Array> run_observed(const Jaxpr& f, const std::vector<RtValue>& args) {
  std::vector<RtValue> a = copy_args(args);
  std::vector<RtValue> outs = interpret(f, a);
  return observed(f, outs, a);
}

bool close(double got, double want, double tol) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::abs(got - want) <= tol * (1 + std::abs(want));
}

// Compares two lists of arrays: exact types, values within `tol` (floats) or exact.
void expect_close(const std::vector<Array>& got, const std::vector<Array>& want, double tol,
                  const std::string& what) {
  if (got.size() != want.size())
    throw Disagreement{fmt::format("{}: {} values, expected {}", what, got.size(), want.size())};
  for (size_t k = 0; k < got.size(); ++k) {
    if (got[k].type() != want[k].type())
      throw Disagreement{fmt::format("{} {}: type {}, expected {}", what, k, got[k].type().str(),
                                     want[k].type().str())};
    const bool exact = !is_float(want[k].dtype()) || tol == 0;
    for (int64_t e = 0; e < want[k].size(); ++e) {
      double g = got[k].as_double(e), w = want[k].as_double(e);
      if (exact ? !(g == w || (std::isnan(g) && std::isnan(w))) : !close(g, w, tol))
        throw Disagreement{
            fmt::format("{} {} element {}: got {} expected {} (|diff| {:.3g})\n"
                        "  got      {}\n  expected {}",
                        what, k, e, g, w, std::abs(g - w), got[k].str(), want[k].str())};
    }
  }
}

Array random_like(std::mt19937_64& rng, const ArrayType& t) {
  Array a(t);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < a.size(); ++i) a.set_from_double(i, u(rng));
  return a;
}
double dot(const Array& a, const Array& b) {
  double s = 0;
  for (int64_t i = 0; i < a.size(); ++i) s += a.as_double(i) * b.as_double(i);
  return s;
}
Array axpy(const Array& x, double s, const Array& t) {
  Array r = x.clone();
  for (int64_t i = 0; i < r.size(); ++i) r.set_from_double(i, x.as_double(i) + s * t.as_double(i));
  return r;
}
RtValue as_arg(const Array& a, bool ref) {
  if (ref) return std::make_shared<RefBuffer>(a);
  return a;
}

void check_roundtrip(const Program& p) {
  const std::string text = print_jaxpr(p.jaxpr);
  Jaxpr again = parse_jaxpr(text, "<printed>");
  verify(again);
  const std::string text2 = print_jaxpr(again);
  if (text2 != text) throw Disagreement{"print(parse(print(p))) differs:\n" + text2};
  expect_close(run_observed(again, p.args), run_observed(p.jaxpr, p.args), 0,
               "parsed program output");
}

// Native code through the whole pipeline (driver/pipeline.h), as `refjit run` compiles it.
void check_native(const Program& p, const CheckOptions& o, double tol) {
  std::optional<CompiledFunction> fn;
  try {
    PipelineOptions po;
    po.compile.opt_level = o.native_opt_level;
    po.verify_each = true;
    fn.emplace(compile_program(p.jaxpr, po));
  } catch (const Error& e) {
    // A pass that breaks the program is a finding; a primitive the backend lacks is not.
    if (std::string(e.what()).find("does not verify after pass") != std::string::npos)
      throw Disagreement{e.what()};
    throw Declined{e.what()};
  }
  std::vector<RtValue> a = copy_args(p.args);
  std::vector<RtValue> outs = (*fn)(a);
  expect_close(observed(p.jaxpr, outs, a), run_observed(p.jaxpr, p.args), tol,
               "native vs interpreter, value");
}

// The program as the pipeline leaves it for the backend (every jaxpr pass, the decisions
// written as IR among them: dot_accumulate, im2col_dot, fused, product_epilogue, row_loop) runs on
// the interpreter and computes what the original does: the oracle checks the decisions, not only
// the code made of them. The decision primitives (docs/primitives.md "Decisions") anywhere in `j`,
// bodies included.
void note_decisions(const Jaxpr& j, std::set<std::string>& found) {
  for (const Eqn& e : j.eqns) {
    switch (e.prim) {
      case Prim::im2col_dot:
      case Prim::im2col_tdot:
      case Prim::dot_accumulate:
      case Prim::concat_windows:
      case Prim::move_windows:
      case Prim::gather_run:
      case Prim::scatter_run:
      case Prim::get_flat_run:
      case Prim::swap_flat_run:
      case Prim::fused:
      case Prim::product_epilogue:
      case Prim::row_loop:
      case Prim::shift_add: found.insert(std::string(prim_name(e.prim))); break;
      default: break;
    }
    for_each_sub_jaxpr(e, [&](const Jaxpr& body) { note_decisions(body, found); });
  }
}

void check_decided(const Program& p, double tol, std::set<std::string>& decisions) {
  Jaxpr decided;
  try {
    PipelineOptions po;
    po.verify_each = true;
    decided = plan_program(p.jaxpr, po).jaxpr;
    note_decisions(decided, decisions);
  } catch (const Error& e) {
    if (std::string(e.what()).find("does not verify after pass") != std::string::npos)
      throw Disagreement{e.what()};
    throw Declined{e.what()};
  }
  std::vector<RtValue> a = copy_args(p.args);
  std::vector<RtValue> outs = interpret(decided, a);
  expect_close(observed(p.jaxpr, outs, a), run_observed(p.jaxpr, p.args), tol,
               "decided program vs original on the interpreter, value");
}

// The buffer-assigned program computes what the same program with every value in its own
// buffer computes (both native, so only the plan differs).
void check_buffers(const Program& p, const CheckOptions& o, double tol) {
  std::optional<CompiledFunction> planned, naive;
  try {
    PipelineOptions po;
    po.compile.opt_level = o.native_opt_level;
    planned.emplace(compile_program(p.jaxpr, po));
    po.naive_buffers = true;
    naive.emplace(compile_program(p.jaxpr, po));
  } catch (const Error& e) {
    throw Declined{e.what()};
  }
  std::vector<RtValue> a = copy_args(p.args), b = copy_args(p.args);
  std::vector<RtValue> outs_planned = (*planned)(a);
  std::vector<RtValue> outs_naive = (*naive)(b);
  expect_close(observed(p.jaxpr, outs_planned, a), observed(p.jaxpr, outs_naive, b), tol,
               "buffer-assigned vs every value in its own buffer, value");
}

// The pipeline's dead regions (passes/simplify/dead_regions.h: sliced values, row trimming) and
// range simplification (passes/simplify/range_simplify.h), with the program's integer array/scalar
// inputs taken as constants of known range (as jit does with closed-over constants): when they
// change the program, it computes exactly what the original does.
void check_specialise(const Program& p) {
  Jaxpr j = p.jaxpr;
  j.constvars.clear();
  j.invars.clear();
  std::vector<RtValue> consts, rest;
  std::vector<std::optional<IntRange>> ranges;
  for (size_t i = 0; i < p.jaxpr.invars.size(); ++i) {
    const Var v = p.jaxpr.invars[i];
    const Type& t = p.jaxpr.type_of(v);
    const Array* a = std::get_if<Array>(&p.args[i]);
    if (t.is_ref || !is_int(t.array.dtype) || !a || a->size() == 0) {
      j.invars.push_back(v);
      rest.push_back(p.args[i]);
      continue;
    }
    j.constvars.push_back(v);
    consts.push_back(p.args[i]);
    ranges.push_back(element_range(*a));
  }
  int shrunk = 0, trimmed = 0, simplified = 0;
  Jaxpr t = shrink_sliced_values(j, &shrunk);
  t = trim_untouched_rows(t, ranges, &trimmed);
  t = simplify_with_ranges(t, ranges, &simplified);
  if (shrunk == 0 && trimmed == 0 && simplified == 0) return;
  verify(t);
  std::vector<RtValue> args = consts;
  args.insert(args.end(), rest.begin(), rest.end());
  expect_close(run_observed(t, args), run_observed(j, args), 0, "specialised vs original, value");
}

// Whether any binder of `j` or of its sub-jaxprs has a Ref type.
bool mentions_refs(const Jaxpr& j) {
  for (const VarInfo& v : j.vars)
    if (v.type.is_ref) return true;
  for (const Eqn& e : j.eqns)
    for (const auto& [key, value] : e.params.entries()) {
      if (const auto* sub = std::get_if<JaxprPtr>(&value); sub && mentions_refs(**sub)) return true;
      if (const auto* subs = std::get_if<JaxprList>(&value))
        for (const JaxprPtr& s : *subs)
          if (mentions_refs(*s)) return true;
    }
  return false;
}

// The program with its refs discharged into values (passes/discharge.h) returns what the
// original returns, then what the original leaves in its ref arguments, exactly.
void check_discharge(const Program& p) {
  if (!mentions_refs(p.jaxpr)) return;
  Jaxpr d = discharge_state(p.jaxpr);
  verify(d);
  if (mentions_refs(d)) throw Disagreement{"the discharged program still has refs"};
  std::vector<RtValue> args;
  for (const RtValue& a : p.args) args.push_back(value_of(a));
  std::vector<Array> got;
  for (const RtValue& o : interpret(d, args)) got.push_back(value_of(o));
  expect_close(got, run_observed(p.jaxpr, p.args), 0, "discharged vs original, value");
}

// B examples of type t stacked along a new leading dim, and row b back.
Array stack(const std::vector<Array>& rows) {
  ArrayType t = rows.at(0).type();
  t.shape.insert(t.shape.begin(), static_cast<int64_t>(rows.size()));
  Array out(t);
  for (size_t b = 0; b < rows.size(); ++b)
    std::memcpy(out.mutable_data() + b * rows[b].byte_size(), rows[b].data(),
                static_cast<size_t>(rows[b].byte_size()));
  return out;
}
Array row(const Array& a, int64_t b) {
  ArrayType t{a.dtype(), Shape(a.shape().begin() + 1, a.shape().end())};
  return Array(t, a.data() + b * t.byte_size());
}

// vmap (passes/batching/vmap.h) over a batch of 3: the batched program's outputs and final ref
// values are, row by row, what the program computes on each example alone. Float arguments (and
// every ref, so no example writes a ref another one reads) are batched with a different
// example per row; the rest are batched at random, with equal rows, or left unbatched.
void check_vmap(const Program& p, std::mt19937_64& rng) {
  constexpr int64_t kBatch = 3;
  const Jaxpr& j = p.jaxpr;
  if (!j.constvars.empty()) return;
  std::vector<bool> batched;
  std::vector<std::vector<Array>> examples;  // per invar: its B rows
  for (size_t k = 0; k < j.invars.size(); ++k) {
    const Type& t = j.type_of(j.invars[k]);
    const Array& a = value_of(p.args[k]);
    const bool differ = is_float(t.dtype());
    batched.push_back(t.is_ref || differ || rng() % 2 == 0);
    std::vector<Array> rows{a};
    for (int64_t b = 1; b < kBatch; ++b) rows.push_back(differ ? random_like(rng, a.type()) : a);
    examples.push_back(std::move(rows));
  }
  BatchedJaxpr v;
  try {
    v = vmap_jaxpr(j, batched, kBatch);
  } catch (const RefError& e) {
    if (e.code() == "E11") throw Declined{e.what()};
    throw;
  }
  verify(v.jaxpr);
  std::vector<RtValue> args;
  for (size_t k = 0; k < j.invars.size(); ++k)
    args.push_back(
        as_arg(batched[k] ? stack(examples[k]) : examples[k][0], j.type_of(j.invars[k]).is_ref));
  std::vector<Array> got = run_observed(v.jaxpr, args);
  for (int64_t b = 0; b < kBatch; ++b) {
    std::vector<RtValue> one;
    for (size_t k = 0; k < j.invars.size(); ++k)
      one.push_back(as_arg(examples[k][static_cast<size_t>(b)], j.type_of(j.invars[k]).is_ref));
    std::vector<Array> want = run_observed(j, one);
    std::vector<Array> got_b;
    for (size_t k = 0; k < got.size(); ++k) {
      const bool out_batched = k < v.out_batched.size() ? v.out_batched[k] : true;  // refs
      got_b.push_back(out_batched ? row(got[k], b) : got[k]);
    }
    expect_close(got_b, want, 0, fmt::format("vmap example {}, value", b));
  }
}

struct AdSetup {
  std::vector<bool> diff;
  std::vector<bool> is_ref;     // per invar
  std::vector<Array> tangents;  // per differentiated input
};

AdSetup ad_setup(const Program& p, std::mt19937_64& rng) {
  AdSetup s;
  for (Var v : p.jaxpr.invars) {
    const Type& t = p.jaxpr.type_of(v);
    s.diff.push_back(is_float(t.dtype()));
    s.is_ref.push_back(t.is_ref);
    if (s.diff.back()) s.tangents.push_back(random_like(rng, t.array));
  }
  return s;
}
// Primal args followed by one tangent per differentiated input (fresh refs for ref inputs).
std::vector<RtValue> with_tangents(std::vector<RtValue> args, const AdSetup& s) {
  for (size_t i = 0, k = 0; i < s.diff.size(); ++i)
    if (s.diff[i]) args.push_back(as_arg(s.tangents[k++], s.is_ref[i]));
  return args;
}
// Tangent outputs (after `skip` primal outputs), then the final values of the tangent refs.
std::vector<Array> tangent_observed(const std::vector<RtValue>& outs, size_t skip,
                                    const std::vector<RtValue>& args, size_t first_tangent,
                                    const AdSetup& s) {
  std::vector<Array> r;
  for (size_t i = skip; i < outs.size(); ++i) r.push_back(value_of(outs[i]));
  for (size_t i = 0, k = first_tangent; i < s.diff.size(); ++i) {
    if (!s.diff[i]) continue;
    if (s.is_ref[i]) r.push_back(value_of(args[k]));
    ++k;
  }
  return r;
}

// JVP tangents (outputs, then final tangent refs), checked against central differences.
std::vector<Array> check_jvp(const Program& p, const AdSetup& s) {
  const Jaxpr& f = p.jaxpr;
  Jaxpr jvp = jvp_jaxpr(f, s.diff);
  verify(jvp);
  std::vector<RtValue> jargs = with_tangents(copy_args(p.args), s);
  std::vector<RtValue> jouts = interpret(jvp, jargs);
  const size_t n_out = f.outvars.size();
  if (jouts.size() != 2 * n_out)
    throw Disagreement{fmt::format("jvp returned {} values for {} outputs", jouts.size(), n_out)};
  const std::vector<Array> base = run_observed(f, p.args);
  std::vector<Array> primal_outs;
  for (size_t i = 0; i < n_out; ++i) primal_outs.push_back(value_of(jouts[i]));
  expect_close(primal_outs, std::vector<Array>(base.begin(), base.begin() + n_out), 0,
               "jvp primal output");
  std::vector<Array> tangents = tangent_observed(jouts, n_out, jargs, p.args.size(), s);

  const double h = 1e-6;
  auto shifted = [&](double step) {
    std::vector<RtValue> a = copy_args(p.args);
    for (size_t i = 0, k = 0; i < s.diff.size(); ++i)
      if (s.diff[i]) a[i] = as_arg(axpy(value_of(a[i]), step, s.tangents[k++]), s.is_ref[i]);
    return run_observed(f, a);
  };
  const std::vector<Array> plus = shifted(h), minus = shifted(-h);
  // The same with step 2h: where the two estimates disagree, a step of floor/round/select/
  // an index lies within [x-2h, x+2h] and the entry is not compared (not smooth there).
  const std::vector<Array> plus2 = shifted(2 * h), minus2 = shifted(-2 * h);
  // base = outputs then every ref input; tangents = outputs then differentiated ref inputs.
  std::vector<Array> fd;
  for (size_t b = 0, r = 0; b < base.size(); ++b) {
    if (b >= n_out) {
      size_t input = 0, seen = 0;
      for (; input < s.is_ref.size(); ++input)
        if (s.is_ref[input] && seen++ == r) break;
      ++r;
      if (!s.diff[input]) continue;
    }
    Array d(base[b].type());
    for (int64_t e = 0; e < d.size(); ++e) {
      const double fd1 = (plus[b].as_double(e) - minus[b].as_double(e)) / (2 * h);
      const double fd2 = (plus2[b].as_double(e) - minus2[b].as_double(e)) / (4 * h);
      const size_t t = fd.size();
      // Not smooth here, or the estimate is not finite (inf - inf near an overflow or a
      // pole says nothing about the derivative): compare the JVP with itself.
      const bool usable = std::isfinite(fd1) && std::isfinite(fd2) && close(fd1, fd2, kJvpTol);
      d.set_from_double(e, usable ? fd1 : tangents.at(t).as_double(e));
    }
    fd.push_back(d);
  }
  expect_close(tangents, fd, kJvpTol, "jvp tangent vs finite differences");
  return tangents;
}

void check_transpose(const Program& p, const AdSetup& s, const std::vector<Array>& jvp_tangents,
                     std::mt19937_64& rng, std::set<std::string>& decisions) {
  const Jaxpr& f = p.jaxpr;
  Linearized lin;
  try {
    lin = linearize_jaxpr(f, s.diff);
  } catch (const RefError&) {
    throw;
  } catch (const Error& e) {
    throw Declined{e.what()};  // documented: cond/scan on the differentiated path
  }
  verify(lin.primal);
  verify(lin.linear);
  const size_t n_out = f.outvars.size();
  std::vector<RtValue> pouts = interpret(lin.primal, copy_args(p.args));
  if (pouts.size() != n_out + lin.num_residuals)
    throw Disagreement{"linearize primal: wrong number of outputs"};
  std::vector<RtValue> residuals(pouts.begin() + n_out, pouts.end());
  std::vector<RtValue> largs = with_tangents(residuals, s);
  std::vector<RtValue> louts = interpret(lin.linear, largs);
  std::vector<Array> lin_t = tangent_observed(louts, 0, largs, residuals.size(), s);
  expect_close(lin_t, jvp_tangents, kTransposeTol, "linearize tangent vs jvp tangent");

  std::vector<AccumKind> kinds;
  std::vector<Array> prefill;  // per differentiated input (used by ref inputs)
  std::vector<RefBufferPtr> accs;
  std::vector<RtValue> bargs = residuals;
  for (size_t i = 0, k = 0; i < s.diff.size(); ++i) {
    if (!s.diff[i]) continue;
    kinds.push_back(s.is_ref[i] ? AccumKind::ref : AccumKind::value);
    prefill.push_back(random_like(rng, s.tangents[k].type()));
    accs.push_back(s.is_ref[i] ? std::make_shared<RefBuffer>(prefill.back()) : nullptr);
    if (s.is_ref[i]) bargs.push_back(accs.back());
    ++k;
  }
  std::vector<Array> cts;
  for (size_t i = 0; i < n_out; ++i) cts.push_back(random_like(rng, lin_t[i].type()));
  for (const Array& ct : cts) bargs.push_back(ct);
  Jaxpr bwd = transpose_jaxpr(lin.linear, lin.num_residuals, kinds);
  verify(bwd);
  note_decisions(bwd, decisions);  // the transposes' own (shift_add)
  std::vector<RtValue> bouts = interpret(bwd, bargs);
  // <ct, J t> + <P, final tangent refs> = <J^T (ct, P), t>
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < n_out; ++i) lhs += dot(cts[i], lin_t[i]);
  size_t value_out = 0, ref_seen = 0;
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k] == AccumKind::ref) {
      lhs += dot(prefill[k], lin_t[n_out + ref_seen++]);
      rhs += dot(accs[k]->value(), s.tangents[k]);
    } else {
      if (value_out >= bouts.size()) throw Disagreement{"transpose: too few cotangent outputs"};
      const Array g = value_of(bouts[value_out++]);
      if (g.type() != s.tangents[k].type())
        throw Disagreement{fmt::format("transpose: cotangent {} has type {}, expected {}", k,
                                       g.type().str(), s.tangents[k].type().str())};
      rhs += dot(g, s.tangents[k]);
    }
  }
  if (!close(rhs, lhs, kTransposeTol))
    throw Disagreement{fmt::format("<ct, J t> = {} but <J^T ct, t> = {}", lhs, rhs)};

  // Accumulator kinds mixed per array input (value, a ref pre-filled with P, DontWant) give
  // the same cotangents as all-value accumulators: value -> the same value, ref -> P + it,
  // DontWant -> no output.
  std::vector<Array> baseline;  // per differentiated input; empty Array for ref inputs
  value_out = 0;
  for (size_t k = 0; k < kinds.size(); ++k)
    baseline.push_back(kinds[k] == AccumKind::value ? value_of(bouts[value_out++]) : Array());
  std::vector<AccumKind> mixed = kinds;
  std::vector<RtValue> margs = residuals;
  std::vector<RefBufferPtr> maccs(kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k] == AccumKind::value)
      mixed[k] = std::array{AccumKind::value, AccumKind::ref, AccumKind::dont_want}[rng() % 3];
    if (mixed[k] == AccumKind::ref) {
      maccs[k] = std::make_shared<RefBuffer>(prefill[k]);
      margs.push_back(maccs[k]);
    }
  }
  for (const Array& ct : cts) margs.push_back(ct);
  Jaxpr mixed_bwd = transpose_jaxpr(lin.linear, lin.num_residuals, mixed);
  verify(mixed_bwd);
  std::vector<RtValue> mouts = interpret(mixed_bwd, margs);
  size_t mixed_out = 0;
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k] != AccumKind::value) continue;
    if (mixed[k] == AccumKind::value) {
      if (mixed_out >= mouts.size()) throw Disagreement{"mixed kinds: too few cotangent outputs"};
      expect_close({value_of(mouts[mixed_out++])}, {baseline[k]}, kTransposeTol,
                   "mixed accumulator kinds, value cotangent");
    } else if (mixed[k] == AccumKind::ref) {
      expect_close({maccs[k]->value()}, {axpy(prefill[k], 1.0, baseline[k])}, kTransposeTol,
                   "mixed accumulator kinds, ref accumulator (P + cotangent)");
    }
  }
  if (mixed_out != mouts.size()) throw Disagreement{"mixed kinds: extra cotangent outputs"};
}

// Runs `body`, recording a run, a skip or a mismatch for `name`.
template <class Body>
bool run_check(Tally& t, uint64_t seed, const std::string& name, const Program& p, Body body) {
  ++t.ran[name];
  std::string detail;
  try {
    body();
    return true;
  } catch (const Declined& d) {
    if (t.skipped[name]++ == 0) t.first_skip_reason[name] = d.reason;
    return false;
  } catch (const Disagreement& d) {
    detail = d.detail;
  } catch (const Error& e) {
    detail = std::string("refjit::Error: ") + e.what();
  } catch (const std::exception& e) {
    detail = std::string("std::exception: ") + e.what();
  }
  t.mismatches.push_back({seed, name, print_jaxpr(p.jaxpr), detail});
  return false;
}

}  // namespace

void check_seed(uint64_t seed, const CheckOptions& options, Tally& tally) {
  ++tally.programs;
  // f32 and f64 programs, and an f64 one without scan/cond (linearize declines those) so the
  // transpose identity is checked on every seed.
  struct Variant {
    DType dtype;
    bool control;
    const char* suffix;
  };
  for (const Variant& v : {Variant{DType::f32, true, "/f32"}, Variant{DType::f64, true, "/f64"},
                           Variant{DType::f64, false, "/f64-nocontrol"}}) {
    const DType dt = v.dtype;
    const std::string suffix = v.suffix;
    GenOptions g;
    g.float_dtype = dt;
    g.control = v.control;
    g.max_eqns = 6 + static_cast<int>(seed % 23);  // small and large programs
    g.differentiable = dt == DType::f64;
    Program p;
    try {
      p = generate(seed, g);
    } catch (const std::exception& e) {
      tally.mismatches.push_back({seed, "generate" + suffix, "", e.what()});
      continue;
    }
    run_check(tally, seed, "roundtrip" + suffix, p, [&] { check_roundtrip(p); });
    if (!run_check(tally, seed, "interpret" + suffix, p, [&] { run_observed(p.jaxpr, p.args); }))
      continue;
    run_check(tally, seed, "specialise" + suffix, p, [&] { check_specialise(p); });
    run_check(tally, seed, "discharge" + suffix, p, [&] { check_discharge(p); });
    run_check(tally, seed, "vmap" + suffix, p, [&] {
      std::mt19937_64 rng(seed ^ 0xba7c4);
      check_vmap(p, rng);
    });
    if (options.native && v.control)
      run_check(tally, seed, "native" + suffix, p, [&] {
        check_native(p, options, dt == DType::f32 ? kNativeTolF32 : kNativeTolF64);
      });
    if (v.control) {
      std::set<std::string> decisions;
      run_check(tally, seed, "decided" + suffix, p, [&] {
        check_decided(p, dt == DType::f32 ? kNativeTolF32 : kNativeTolF64, decisions);
      });
      for (const std::string& d : decisions) ++tally.decided_with[d + suffix];
    }
    if (options.native && v.control)
      run_check(tally, seed, "buffers" + suffix, p, [&] {
        check_buffers(p, options, dt == DType::f32 ? kNativeTolF32 : kNativeTolF64);
      });
    if (options.autodiff && dt == DType::f64) {
      std::mt19937_64 rng(seed ^ 0x5eed);
      const AdSetup s = ad_setup(p, rng);
      std::vector<Array> tangents;
      std::set<std::string> decisions;
      if (run_check(tally, seed, "jvp" + suffix, p, [&] { tangents = check_jvp(p, s); }))
        run_check(tally, seed, "transpose" + suffix, p,
                  [&] { check_transpose(p, s, tangents, rng, decisions); });
      for (const std::string& d : decisions) ++tally.transposed_with[d + suffix];
    }
  }
}

}  // namespace refjit::randgen
