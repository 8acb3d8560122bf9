// Reverse mode through scan bodies holding a custom_vjp_call or a cond: the body's JVP is
// computed in linearize mode, so custom_vjp keeps its bwd rule (applied per step by the
// transposed scan with the stacked residuals of fwd) and cond is split per branch (index and
// per-branch residuals stacked, the transposed scan choosing the branch's transpose).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "passes/ad/vjp.h"
#include "passes/emitter.h"
#include "test/passes/ad_check.h"
#include "test/passes/scan_test_util.h"

namespace refjit {
namespace {

using namespace refjit::testing;

const Eqn& only_scan(const Jaxpr& j) {
  std::vector<const Eqn*> s;
  collect_scans(j, s);
  EXPECT_EQ(s.size(), 1u) << print_jaxpr(j);
  return *s.at(0);
}

Params custom_params(JaxprPtr call, JaxprPtr fwd, JaxprPtr bwd, int64_t num_res) {
  return Params{{"call_jaxpr", std::move(call)},
                {"fwd_jaxpr", std::move(fwd)},
                {"bwd_jaxpr", std::move(bwd)},
                {"num_res", num_res}};
}

// sin with a custom VJP: fwd saves cos a; bwd multiplies the cotangent by `scale` * cos a
// (scale 1 is the true derivative).
Params custom_sin(double scale = 1.0) {
  std::string bwd = scale == 1.0 ? "{ lambda ; c:f64[3] g:f64[3]. let b:f64[3] = mul c g in (b,) }"
                                 : fmt::format(
                                       "{{ lambda ; c:f64[3] g:f64[3]. let a:f64[3] = mul c g; "
                                       "b:f64[3] = mul a {}:f64[] in (b,) }}",
                                       scale);
  return custom_params(
      body("{ lambda ; a:f64[3]. let b:f64[3] = sin a in (b,) }"),
      body("{ lambda ; a:f64[3]. let b:f64[3] = sin a; c:f64[3] = cos a in (b, c) }"), body(bwd),
      1);
}

// carry p' = custom_sin(p * w) + x; ys = p' * w.
Jaxpr custom_sin_scan(Params custom, bool reverse = false) {
  JaxprBuilder bb;
  Var w = bb.add_invar(kF64);
  Var p = bb.add_invar(f64v(3));
  Var x = bb.add_invar(f64v(3));
  Emitter e(bb);
  Atom a = e.mul(p, e.broadcast_to(w, {3}));
  Atom s = bb.add_eqn(Prim::custom_vjp_call, {a}, std::move(custom))[0];
  Atom p2 = e.emit1(Prim::add, {s, x});
  Atom y = e.mul(p2, e.broadcast_to(w, {3}));
  bb.set_outvars({p2, y});
  return scan_of({kF64, f64v(3), f64m(4, 3)}, std::make_shared<const Jaxpr>(bb.finish()), 4, 1, 1,
                 reverse);
}

// ------------------------------------------------------------------ custom_vjp in a scan

TEST(ScanCustomVjpAd, CorrectBwdPassesCheckAdInBothDirections) {
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse);
    check_ad(AdCase{custom_sin_scan(custom_sin(), reverse)});
  }
}

TEST(ScanCustomVjpAd, FwdResidualsAreStackedAndTheLinearBodyKeepsTheCall) {
  Jaxpr f = custom_sin_scan(custom_sin());
  Linearized l = linearize_jaxpr(f, {true, true, true});
  const Eqn& ls = only_scan(l.linear);
  const std::string lb = print_jaxpr(scan_body(ls));
  EXPECT_EQ(count_prim(lb, "custom_vjp_call"), 1) << lb;
  EXPECT_EQ(count_prim(lb, "sin"), 0) << lb;
  EXPECT_EQ(count_prim(lb, "cos"), 0) << lb;
  // The primal scan runs fwd (sin and cos) once per step, and stacks cos a as a residual.
  const std::string pb = print_jaxpr(scan_body(only_scan(l.primal)));
  EXPECT_EQ(count_prim(pb, "cos"), 1) << pb;
  EXPECT_EQ(count_prim(pb, "custom_vjp_call"), 0) << pb;
  bool stacked_cos = false;
  for (int k = 0; k < l.num_residuals; ++k)
    stacked_cos |= l.linear.type_of(l.linear.invars[k]).array == f64m(4, 3);
  EXPECT_TRUE(stacked_cos) << print_jaxpr(l.linear);
}

TEST(ScanCustomVjpAd, ReverseModeAppliesTheBwdRuleAsWrittenAtEveryStep) {
  // bwd scales by 3: the gradient of the final carry w.r.t. the initial carry is
  // prod_k 3 cos(a_k) * w (per entry), not the true derivative.
  Jaxpr f = custom_sin_scan(custom_sin(3.0));
  JaxprBuilder b;
  Var w = b.add_invar(kF64);
  Var p0 = b.add_invar(f64v(3));
  Var xs = b.add_invar(f64m(4, 3));
  std::vector<Var> o =
      b.add_eqn(Prim::jit, {w, p0, xs},
                Params{{"name", std::string("f")}, {"jaxpr", std::make_shared<const Jaxpr>(f)}});
  Emitter e(b);
  b.set_outvars({e.reduce_sum(o[0], {0})});
  Jaxpr loss = b.finish();
  Jaxpr g = grad_jaxpr(loss, {1});
  verify(g);
  std::mt19937 rng(11);
  const double wv = 0.7;
  Array p = random_array(rng, f64v(3)), x = random_array(rng, f64m(4, 3));
  std::vector<RtValue> out = run(g, {f64(wv), p, x});
  for (int64_t j = 0; j < 3; ++j) {
    double pj = p.as_double(j), want = 1.0;
    for (int64_t k = 0; k < 4; ++k) {
      const double a = pj * wv;
      want *= 3 * std::cos(a) * wv;
      pj = std::sin(a) + x.as_double(k * 3 + j);
    }
    EXPECT_NEAR(arr(out[1]).as_double(j), want, 1e-12 * (1 + std::abs(want))) << j;
  }
}

TEST(ScanCustomVjpAd, CustomVjpInANestedScanBody) {
  // outer carry p; inner scan over 2 steps of p' = custom_sin(p * w) + x.
  Jaxpr inner = custom_sin_scan(custom_sin());
  JaxprBuilder ob;
  Var w = ob.add_invar(kF64);
  Var p = ob.add_invar(f64v(3));
  Var xs = ob.add_invar(f64m(4, 3));
  std::vector<Var> r = ob.add_eqn(
      Prim::jit, {w, p, xs},
      Params{{"name", std::string("inner")}, {"jaxpr", std::make_shared<const Jaxpr>(inner)}});
  ob.set_outvars({r[0], r[1]});
  Jaxpr f = scan_of({kF64, f64v(3), ArrayType{DType::f64, {2, 4, 3}}},
                    std::make_shared<const Jaxpr>(ob.finish()), 2, 1, 1);
  check_ad(AdCase{f});
}

TEST(ScanCustomVjpAd, BwdThatCannotBeTransposedLeavesReverseModeIntact) {
  // A bwd that is not linear in its cotangent (the user's rule, however odd): reverse mode
  // still runs it as written; the staged eqn's forward map falls back to zeros.
  Params custom = custom_params(
      body("{ lambda ; a:f64[3]. let b:f64[3] = sin a in (b,) }"),
      body("{ lambda ; a:f64[3]. let b:f64[3] = sin a; c:f64[3] = cos a in (b, c) }"),
      body("{ lambda ; c:f64[3] g:f64[3]. let a:f64[3] = mul g g; b:f64[3] = mul c a in (b,) }"),
      1);
  Jaxpr f = custom_sin_scan(std::move(custom));
  VjpJaxprs v = vjp_jaxpr(f, {false, true, false}, {AccumKind::value});
  verify(v.backward);
  std::mt19937 rng(2);
  const double wv = 1.0;
  Array p = random_array(rng, f64v(3)), x = random_array(rng, f64m(4, 3));
  std::vector<RtValue> fo = run(v.forward, {f64(wv), p, x});
  std::vector<RtValue> bargs(fo.begin() + 2, fo.end());
  Array ct_p = random_array(rng, f64v(3));
  bargs.push_back(ct_p);
  bargs.push_back(Array(f64m(4, 3)));  // no cotangent for ys
  Array got = arr(run(v.backward, bargs).at(0));
  for (int64_t j = 0; j < 3; ++j) {
    std::vector<double> a(4);
    double pj = p.as_double(j);
    for (int64_t k = 0; k < 4; ++k) {
      a[k] = pj * wv;
      pj = std::sin(a[k]) + x.as_double(k * 3 + j);
    }
    double g = ct_p.as_double(j);
    for (int64_t k = 3; k >= 0; --k) g = std::cos(a[k]) * g * g * wv;
    EXPECT_NEAR(got.as_double(j), g, 1e-12 * (1 + std::abs(g))) << j;
  }
}

// ------------------------------------------------------------- plumbing refs in a scan

// stash(r, x) = x; fwd saves the ref r; bwd writes (or adds) the cotangent into r.
Params stash_grads(const ArrayType& rt, bool accumulate) {
  JaxprBuilder fb;
  Var fr = fb.add_invar(Type::ref(rt));
  Var fx = fb.add_invar(kF64);
  fb.set_outvars({fx, fr});
  const std::string op = accumulate ? "+=" : "<-";
  return custom_params(
      body(fmt::format("{{ lambda ; r:Ref{{{}}} x:f64[]. let in (x,) }}", rt.str())),
      std::make_shared<const Jaxpr>(fb.finish()),
      body(fmt::format("{{ lambda ; r:Ref{{{}}} g:f64[]. let r[...] {} g in (0.0:{}, g) }}",
                       rt.str(), op, rt.str())),
      1);
}

// p' = stash(r, p) * x over xs; loss = final p. The cotangent of stash's output at step k is
// prod_{j >= k} x_j. A const ref r: bwd adds into it (the sum over the steps); a scanned ref
// (row k is step k's view): bwd writes into the row.
Jaxpr stash_scan(bool scanned_ref, int64_t n) {
  JaxprBuilder bb;
  Var p = bb.add_invar(kF64);  // binders reordered below for the const case
  Var r = bb.add_invar(Type::ref(kF64));
  Var x = bb.add_invar(kF64);
  Var s = bb.add_eqn1(Prim::custom_vjp_call, {r, p}, stash_grads(kF64, !scanned_ref));
  bb.set_outvars({bb.add_eqn1(Prim::mul, {s, x})});
  Jaxpr b = bb.finish();
  if (!scanned_ref) b.invars = {r, p, x};  // const, carry, xs
  JaxprBuilder jb;
  Var ref = jb.add_invar(Type::ref(scanned_ref ? f64v(n) : kF64));
  Var p0 = jb.add_invar(kF64);
  Var xs = jb.add_invar(f64v(n));
  std::vector<Atom> ins =
      scanned_ref ? std::vector<Atom>{p0, ref, xs} : std::vector<Atom>{ref, p0, xs};
  std::vector<Var> o = jb.add_eqn(
      Prim::scan, ins,
      scan_params(std::make_shared<const Jaxpr>(std::move(b)), n, scanned_ref ? 0 : 1, 1));
  jb.set_outvars({o[0]});
  return jb.finish();
}

TEST(ScanCustomVjpAd, PlumbingRefConstIsSharedWithTheBwdOfEveryStep) {
  const int64_t n = 4;
  Jaxpr f = stash_scan(false, n);
  Linearized l = linearize_jaxpr(f, {false, true, false});
  EXPECT_EQ(l.ref_residuals, std::vector<int>{0});
  EXPECT_EQ(count_prim(print_jaxpr(l.primal), "+="), 0) << "only the backward pass writes r";
  Jaxpr g = grad_jaxpr(f, {1});
  verify(g);
  const std::vector<double> x{0.5, -1.5, 2.0, 0.25};
  RefBufferPtr r = ref_of(f64(10.0));
  std::vector<RtValue> out = run(g, {r, f64(1.25), f64s(x, {n})});
  double prod = 1, sum = 0;
  for (int64_t k = n - 1; k >= 0; --k) {
    prod *= x[k];
    sum += prod;
  }
  EXPECT_DOUBLE_EQ(arr(out[0]).as_double(0), 1.25 * prod);
  EXPECT_DOUBLE_EQ(arr(out[1]).as_double(0), prod);
  EXPECT_DOUBLE_EQ(r->value().as_double(0), 10.0 + sum);
}

TEST(ScanCustomVjpAd, PlumbingScannedRefGetsEachStepsCotangentInItsRow) {
  const int64_t n = 4;
  Jaxpr f = stash_scan(true, n);
  Jaxpr g = grad_jaxpr(f, {1});
  verify(g);
  const std::vector<double> x{0.5, -1.5, 2.0, 0.25};
  RefBufferPtr r = ref_of(f64s({9, 9, 9, 9}, {n}));
  std::vector<RtValue> out = run(g, {r, f64(1.25), f64s(x, {n})});
  double prod = 1;
  std::vector<double> want(n);
  for (int64_t k = n - 1; k >= 0; --k) want[k] = prod *= x[k];
  EXPECT_DOUBLE_EQ(arr(out[1]).as_double(0), prod);
  EXPECT_EQ(values(r->value()), want);
}

TEST(ScanCustomVjpAd, RefCreatedInTheBodyCannotBeSharedWithTheBackwardPass) {
  JaxprBuilder bb;
  Var p = bb.add_invar(kF64);
  Var r = bb.add_eqn1(Prim::new_ref, {Literal::of(DType::f64, 0.0)});
  Var s = bb.add_eqn1(Prim::custom_vjp_call, {r, p}, stash_grads(kF64, true));
  bb.set_outvars({s});
  Jaxpr f = scan_of({kF64}, std::make_shared<const Jaxpr>(bb.finish()), 3, 0, 1);
  try {
    linearize_jaxpr(f, {true});
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("ref created inside the body"), std::string::npos)
        << err.what();
  }
}

// --------------------------------------------------------------------- cond in a scan

// carry p:f64[3], xs (i, x): branch 0 sin(p) * w, branch 1 p * x + w, branch 2 custom_sin(p).
Jaxpr cond_scan(bool index_from_carry) {
  JaxprList branches{body(R"({ lambda ; w:f64[] p:f64[3] x:f64[3]. let
          s:f64[3] = sin p
          y:f64[3] = mul s w
        in (y,) })"),
                     body(R"({ lambda ; w:f64[] p:f64[3] x:f64[3]. let
          a:f64[3] = mul p x
          y:f64[3] = add a w
        in (y,) })"),
                     [] {
                       JaxprBuilder b;
                       b.add_invar(kF64);
                       Var p = b.add_invar(f64v(3));
                       b.add_invar(f64v(3));
                       b.set_outvars({b.add_eqn1(Prim::custom_vjp_call, {p}, custom_sin())});
                       return std::make_shared<const Jaxpr>(b.finish());
                     }()};
  JaxprBuilder bb;
  Var w = bb.add_invar(kF64);
  Var p = bb.add_invar(f64v(3));
  Var i = bb.add_invar(kI32);
  Var x = bb.add_invar(f64v(3));
  Emitter e(bb);
  Atom idx = i;
  if (index_from_carry) {
    // (p[0] > 0) + i: the index depends on the primal carry, computed per step.
    Atom p0 = e.emit1(Prim::slice, {p},
                      Params{{"start_indices", IntList{0}},
                             {"limit_indices", IntList{1}},
                             {"strides", NoneParam{}}});
    Atom pos = e.emit1(Prim::gt, {p0, e.zeros(f64v(1))});
    Atom pi = e.convert(e.emit1(Prim::reshape, {pos},
                                Params{{"new_sizes", IntList{}}, {"dimensions", NoneParam{}}}),
                        DType::i32);
    idx = e.emit1(Prim::add, {pi, i});
  }
  Var q = bb.add_eqn1(Prim::cond, {idx, w, p, x}, Params{{"branches", branches}});
  bb.set_outvars({q, e.mul(q, x)});
  return scan_of({kF64, f64v(3), i32v(6), f64m(6, 3)}, std::make_shared<const Jaxpr>(bb.finish()),
                 6, 1, 1);
}

TEST(ScanCondAd, EveryBranchIsLinearizedAndTransposedPerStep) {
  for (bool from_carry : {false, true}) {
    SCOPED_TRACE(from_carry);
    AdCase c{cond_scan(from_carry)};
    c.fixed = {{2, i32s({0, 1, 2, 2, 0, 1})}};
    check_ad(c);
  }
}

TEST(ScanCondAd, IndexAndPerBranchResidualsAreStackedAndUntakenOnesZeroFilled) {
  Jaxpr f = cond_scan(false);
  Linearized l = linearize_jaxpr(f, {true, true, false, true});
  const Eqn& ls = only_scan(l.linear);
  const std::string lb = print_jaxpr(scan_body(ls));
  EXPECT_EQ(count_prim(lb, "cond"), 1) << lb;
  EXPECT_EQ(count_prim(lb, "sin"), 0) << lb;
  EXPECT_EQ(count_prim(lb, "cos"), 0) << lb;
  // Residuals: the index xs (passed as is), cos p and sin p of branch 0 and cos p of
  // branch 2 stacked [6, 3], x (xs, as is) for branch 1.
  std::vector<RtValue> args{f64(0.5), f64s({0.1, 0.2, 0.3}, {3}), i32s({0, 1, 2, 2, 0, 1}),
                            f64s(std::vector<double>(18, 0.5), {6, 3})};
  std::vector<RtValue> po = run(l.primal, args);
  int stacked = 0;
  for (int k = 0; k < l.num_residuals; ++k) {
    const Array res = arr(po.at(2 + k));
    if (res.shape() != Shape{6, 3}) continue;
    ++stacked;
  }
  EXPECT_GE(stacked, 2) << print_jaxpr(l.linear);
  // A residual of branch 0 (cos p) is zero at the steps that took another branch.
  bool zero_filled = false;
  for (int k = 0; k < l.num_residuals; ++k) {
    const Array res = arr(po.at(2 + k));
    if (res.shape() != Shape{6, 3}) continue;
    bool nonzero_at_0 = res.as_double(0) != 0, zero_at_1 = true;
    for (int j = 3; j < 6; ++j) zero_at_1 &= res.as_double(j) == 0;
    zero_filled |= nonzero_at_0 && zero_at_1;
  }
  EXPECT_TRUE(zero_filled);
  // The transposed scan selects the branch's transpose with one cond per step.
  VjpJaxprs v = vjp_jaxpr(f, {true, true, false, true},
                          {AccumKind::value, AccumKind::value, AccumKind::value});
  verify(v.backward);
  const Eqn& ts = only_scan(v.backward);
  EXPECT_EQ(ts.params.get<int64_t>("num_carry"), 0);
  EXPECT_EQ(count_prim(print_jaxpr(scan_body(ts)), "cond"), 1) << print_jaxpr(scan_body(ts));
}

TEST(ScanCondAd, BranchesReadingAndWritingADifferentiatedRefConst) {
  // Branch 0 reads r and rewrites it (r = r * sin p), branch 1 adds p * p into it; the
  // carry is the branch's output.
  JaxprList branches{body(R"({ lambda ; r:Ref{f64[3]} p:f64[3]. let
                         c:f64[3] <- r[...]
                         d:f64[3] = sin p
                         e:f64[3] = mul c d
                         r[...] <- e
                       in (d,) })"),
                     body(R"({ lambda ; r:Ref{f64[3]} p:f64[3]. let
                         a:f64[3] = mul p p
                         r[...] += a
                         b:f64[3] = mul a p
                       in (b,) })")};
  JaxprBuilder bb;
  Var r = bb.add_invar(Type::ref(f64v(3)));
  Var p = bb.add_invar(f64v(3));
  Var i = bb.add_invar(kI32);
  Var q = bb.add_eqn1(Prim::cond, {i, r, p}, Params{{"branches", branches}});
  bb.set_outvars({q});
  Jaxpr f = scan_of({Type::ref(f64v(3)), f64v(3), i32v(5)},
                    std::make_shared<const Jaxpr>(bb.finish()), 5, 1, 1);
  AdCase c{f};
  c.fixed = {{2, i32s({0, 1, 1, 0, 1})}};
  check_ad(c);
}

// ------------------------------------------------------- the seed's inserts (jax#17640)

constexpr int64_t kRows = 4, kCols = 3, kWidth = 2 * kCols + 1, kSteps = 8;

const char* kSimpleInsert = R"({ lambda ; c:f64[4,7] row:i32[] col:i32[] v:f64[]. let
      sl:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c row col
      vb:f64[1,1] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 1) sharding=None] v
      u:f64[1,4] = concatenate[dimension=1] vb sl
      c2:f64[4,7] = dynamic_update_slice c u row col
    in (c2,) })";

const char* kInsertFwd = R"({ lambda ; c:f64[4,7] row:i32[] col:i32[] v:f64[]. let
      sl:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c row col
      vb:f64[1,1] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 1) sharding=None] v
      u:f64[1,4] = concatenate[dimension=1] vb sl
      c2:f64[4,7] = dynamic_update_slice c u row col
    in (c2, row, col) })";

// return ct_out, (0, 0, ct_out[row, col])
const char* kBadBwd = R"({ lambda ; row:i32[] col:i32[] g:f64[4,7]. let
      e:f64[1,1] = dynamic_slice[slice_sizes=(1, 1)] g row col
      cv:f64[] = squeeze[dimensions=(0, 1)] e
    in (g, 0:i32[], 0:i32[], cv) })";

// ct_value = ct_out[row, col].copy(); shift ct_out[row, col+1:col+1+C] left; zero col+C.
const char* kSlowBwd = R"({ lambda ; row:i32[] col:i32[] g:f64[4,7]. let
      e:f64[1,1] = dynamic_slice[slice_sizes=(1, 1)] g row col
      e2:f64[] = squeeze[dimensions=(0, 1)] e
      cv:f64[] = copy e2
      col1:i32[] = add col 1:i32[]
      u:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] g row col1
      g2:f64[4,7] = dynamic_update_slice g u row col
      colc:i32[] = add col 3:i32[]
      z:f64[1,1] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 1) sharding=None] 0.0:f64[]
      g3:f64[4,7] = dynamic_update_slice g2 z row colc
    in (g3, 0:i32[], 0:i32[], cv) })";

// ct_out[row, -1] = ct_out[row, col]; shift left; zero col+C; ct_value = ct_out[row, -1].
const char* kFastBwd = R"({ lambda ; row:i32[] col:i32[] g:f64[4,7]. let
      e:f64[1,1] = dynamic_slice[slice_sizes=(1, 1)] g row col
      g1:f64[4,7] = dynamic_update_slice g e row 6:i32[]
      col1:i32[] = add col 1:i32[]
      u:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] g1 row col1
      g2:f64[4,7] = dynamic_update_slice g1 u row col
      colc:i32[] = add col 3:i32[]
      z:f64[1,1] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 1) sharding=None] 0.0:f64[]
      g3:f64[4,7] = dynamic_update_slice g2 z row colc
      e2:f64[1,1] = dynamic_slice[slice_sizes=(1, 1)] g3 row 6:i32[]
      cv:f64[] = squeeze[dimensions=(0, 1)] e2
    in (g3, 0:i32[], 0:i32[], cv) })";

enum class Insert { simple, bad, slow, fast };

JaxprPtr insert_body(Insert which) {
  if (which == Insert::simple) return body(kSimpleInsert);
  const char* bwd = which == Insert::bad ? kBadBwd : (which == Insert::slow ? kSlowBwd : kFastBwd);
  JaxprBuilder b;
  Var c = b.add_invar(f64m(kRows, kWidth));
  Var row = b.add_invar(kI32);
  Var col = b.add_invar(kI32);
  Var v = b.add_invar(kF64);
  b.set_outvars({b.add_eqn1(Prim::custom_vjp_call, {c, row, col, v},
                            custom_params(body(kSimpleInsert), body(kInsertFwd), body(bwd), 2))});
  return std::make_shared<const Jaxpr>(b.finish());
}

// loss(w, init) = mean((target - scan(insert, init, (rows, cols, vals**w)).carry[:, :C])**2)
Jaxpr insert_loss(Insert which) {
  return seed_insert_loss(insert_body(which), kRows, kCols, kSteps, /*mean=*/true);
}

std::vector<RtValue> seed_args(double w) {
  std::mt19937 rng(17);
  return {f64(w),
          random_array(rng, f64m(kRows, kWidth)),
          random_array(rng, f64m(kRows, kCols)),
          i32s({0, 2, 0, 3, 2, 0, 1, 0}),  // rows repeat
          i32s({1, 0, 2, 1, 1, 0, 2, 2}),
          random_array(rng, f64v(kSteps), 0.2, 1.0)};
}

double grad_w(Insert which, const std::vector<RtValue>& args) {
  Jaxpr g = grad_jaxpr(insert_loss(which), {0});
  verify(g);
  return arr(run(g, args).at(1)).as_double(0);
}

TEST(ScanSeedInsertAd, CustomVjpInsertsGiveSimpleInsertsGradient) {
  std::vector<RtValue> args = seed_args(2.0);
  Jaxpr f = insert_loss(Insert::simple);
  const double h = 1e-6;
  std::vector<RtValue> p = args, m = args;
  p[0] = f64(2.0 + h);
  m[0] = f64(2.0 - h);
  const double fd = (arr(run(f, p)[0]).as_double(0) - arr(run(f, m)[0]).as_double(0)) / (2 * h);
  const double simple = grad_w(Insert::simple, args);
  EXPECT_NEAR(simple, fd, 1e-7 * (1 + std::abs(fd)));
  ASSERT_GT(std::abs(simple), 1e-3);
  EXPECT_NEAR(grad_w(Insert::slow, args), simple, 1e-12);
  EXPECT_NEAR(grad_w(Insert::fast, args), simple, 1e-12);
  // bad_insert passes the carry's cotangent through unshifted: wrong once rows repeat.
  EXPECT_GT(std::abs(grad_w(Insert::bad, args) - simple), 0.05 * std::abs(simple));
}

TEST(ScanSeedInsertAd, SlowInsertPassesCheckAd) {
  // slow_insert's bwd is the exact transpose of the insert: the full check (JVP against
  // differences, linear part against the JVP, transpose identity for every accumulator).
  AdCase c{insert_loss(Insert::slow)};
  std::vector<RtValue> args = seed_args(1.5);
  c.fixed = {
      {0, f64(1.5)}, {2, arr(args[2])}, {3, arr(args[3])}, {4, arr(args[4])}, {5, arr(args[5])}};
  check_ad(c);
}

TEST(ScanSeedInsertAd, BadInsertIsTheTransposeOfItsOwnRule) {
  // The linear part of a custom_vjp_call is bwd's transpose, so the linear jaxpr and the
  // backward pass agree with each other (but not with the true derivative).
  Jaxpr f = insert_loss(Insert::bad);
  std::vector<RtValue> args = seed_args(2.0);
  Linearized l = linearize_jaxpr(f, {true, true, false, false, false, false});
  std::vector<RtValue> po = run(l.primal, args);
  std::vector<RtValue> res(po.begin() + 1, po.end());
  std::mt19937 rng(4);
  Array ti = random_array(rng, f64m(kRows, kWidth));
  std::vector<RtValue> la = res;
  la.push_back(f64(1.0));
  la.push_back(ti);
  const double jt = arr(run(l.linear, la)[0]).as_double(0);
  Jaxpr bwd = transpose_jaxpr(l.linear, l.num_nonlinear(), {AccumKind::value, AccumKind::value});
  std::vector<RtValue> ba = res;
  ba.push_back(f64(1.0));
  std::vector<RtValue> bo = run(bwd, ba);
  EXPECT_NEAR(arr(bo[0]).as_double(0) + dot(arr(bo[1]), ti), jt, 1e-12 * (1 + std::abs(jt)));
}

TEST(ScanSeedInsertAd, FastInsertsTransposedBodyIsTheBwdRuleOnTheCarryCotangentRef) {
  Jaxpr f = insert_loss(Insert::fast);
  VjpJaxprs v = vjp_jaxpr(f, {true, false, false, false, false, false}, {AccumKind::value});
  verify(v.backward);
  const Eqn& ts = only_scan(v.backward);
  EXPECT_EQ(ts.params.get<int64_t>("num_carry"), 0) << "the carry cotangent is a ref const";
  const Jaxpr& tb = scan_body(ts);
  const std::string text = print_jaxpr(tb);
  const Shape carry{kRows, kWidth};
  int carry_sized = 0, whole_reads = 0, whole_writes = 0;
  for (const Eqn& q : tb.eqns) {
    // No dense add of the carry cotangent, no zeros or fresh buffers of the carry's shape.
    EXPECT_NE(q.prim, Prim::add_any) << text;
    EXPECT_NE(q.prim, Prim::new_ref) << text;
    EXPECT_NE(q.prim, Prim::freeze) << text;
    if (q.prim != Prim::swap)
      for (Var o : q.outs) carry_sized += tb.type_of(o).array.shape == carry;
    if (q.prim == Prim::get && q.params.get<Indexer>("indexer").is_whole()) ++whole_reads;
    if (q.prim == Prim::swap && q.params.get<Indexer>("indexer").is_whole()) ++whole_writes;
  }
  // ct_out read from R once, the rule's three updates, the result stored into R once.
  EXPECT_EQ(whole_reads, 1) << text;
  EXPECT_EQ(whole_writes, 1) << text;
  EXPECT_EQ(count_prim(text, "dynamic_update_slice"), 3) << text;
  EXPECT_EQ(carry_sized, 1 + 3) << text;  // the get and the rule's three updates
  // Residuals of the loop: rows and cols themselves (fwd returns them), nothing stacked.
  for (const Atom& a : ts.ins)
    EXPECT_NE(v.backward.type_of(a).array.shape, (Shape{kSteps, kRows, kWidth}));
}

}  // namespace
}  // namespace refjit
