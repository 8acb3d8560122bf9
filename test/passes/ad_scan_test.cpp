// Reverse mode through scan: linearize splits the JVP scan into a primal and a linear scan,
// transpose runs the body backwards with the carry cotangent held in one ref (O(slice) per
// step for slice reads/updates), ref consts/xs passed by reference.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "ir/window_params.h"
#include "passes/ad/vjp.h"
#include "passes/batching/vmap.h"
#include "passes/emitter.h"
#include "test/passes/ad_check.h"
#include "test/passes/scan_test_util.h"

namespace refjit {
namespace {

using namespace refjit::testing;

// --------------------------------------------------------------- values: consts, carry, xs

TEST(ScanAd, CarryConstAndXsThroughSinAndMul) {
  // carry (p, q): p' = sin(p) * w + x, q' = q * x + p; ys = p' * q.
  JaxprPtr b = body(R"({ lambda ; w:f64[] p:f64[] q:f64[] x:f64[]. let
      s:f64[] = sin p
      a:f64[] = mul s w
      p2:f64[] = add a x
      m:f64[] = mul q x
      q2:f64[] = add m p
      y:f64[] = mul p2 q
    in (p2, q2, y) })");
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse);
    check_ad(AdCase{scan_of({kF64, kF64, kF64, f64v(4)}, b, 4, 1, 2, reverse)});
  }
}

TEST(ScanAd, ArrayCarryWithClosedOverMatrix) {
  // h' = tanh(W @ h + x): a small RNN.
  JaxprPtr b = body(R"({ lambda ; W:f64[3,3] h:f64[3] x:f64[3]. let
      a:f64[3] = dot_general[dimension_numbers=(([1], [0]), ([], []))] W h
      c:f64[3] = add a x
      h2:f64[3] = tanh c
    in (h2, h2) })");
  check_ad(AdCase{scan_of({f64m(3, 3), f64v(3), f64m(5, 3)}, b, 5, 1, 1)});
}

TEST(ScanAd, FixpointCarryWhoseTangentStartsAsZero) {
  JaxprPtr b = body(R"({ lambda ; w:f64[] p:f64[] q:f64[] x:f64[]. let
      a:f64[] = mul p x
      p2:f64[] = mul a w
      q2:f64[] = add q p
      y:f64[] = sin p2
    in (p2, q2, y) })");
  AdCase c{scan_of({kF64, kF64, kF64, f64v(4)}, b, 4, 1, 2)};
  c.fixed = {{2, f64(0.5)}};  // q's init is not differentiated; its tangent becomes nonzero
  check_ad(c);
}

TEST(ScanAd, PerStepResidualsAreOnlyWhatTheLinearBodyReads) {
  // y = sin(x) * c: the linear body needs cos(x) (stacked) and c (a const, not stacked);
  // the carry p' = p + x is linear and needs nothing.
  JaxprPtr b = body(R"({ lambda ; c:f64[] p:f64[3] x:f64[3]. let
      s:f64[3] = sin x
      y:f64[3] = mul s c
      p2:f64[3] = add p x
    in (p2, y) })");
  Jaxpr f = scan_of({kF64, f64v(3), f64m(6, 3)}, b, 6, 1, 1);
  AdCase ac{f};
  ac.fixed = {{0, f64(1.5)}};
  check_ad(ac);
  Linearized l = linearize_jaxpr(f, {false, true, true});
  // One residual: cos x stacked [6,3], and the const c.
  std::vector<Type> res;
  for (int k = 0; k < l.num_residuals; ++k) res.push_back(l.linear.type_of(l.linear.invars[k]));
  EXPECT_EQ(res.size(), 2u) << print_jaxpr(l.linear);
  for (const Type& t : res) EXPECT_TRUE(t.array == f64m(6, 3) || t.array == kF64) << t.str();
  std::vector<const Eqn*> scans;
  collect_scans(l.linear, scans);
  ASSERT_EQ(scans.size(), 1u);
  EXPECT_EQ(count_prim(print_jaxpr(scan_body(*scans[0])), "sin"), 0);
  EXPECT_EQ(count_prim(print_jaxpr(scan_body(*scans[0])), "cos"), 0);
}

// --------------------------------------------------------------- refs in the body

TEST(ScanAd, BodyAccumulatesIntoAClosedOverRef) {
  // foreach-style: r[...] += x * w; y = cos(x * w).
  JaxprPtr b = body(R"({ lambda ; r:Ref{f64[]} w:f64[] x:f64[]. let
      a:f64[] = mul x w
      r[...] += a
      y:f64[] = cos a
    in (y,) })");
  check_ad(AdCase{scan_of({Type::ref(kF64), kF64, f64v(3)}, b, 3, 2, 0)});
}

TEST(ScanAd, BodyReadsAndWritesAClosedOverRefAtAnIndex) {
  // r[i] <- sin(r[i]) * x, with i from xs; the read value is a stacked residual.
  JaxprPtr b = body(R"({ lambda ; r:Ref{f64[4]} i:i32[] x:f64[]. let
      a:f64[] <- r[i]
      s:f64[] = sin a
      c:f64[] = mul s x
      r[i] <- c
      y:f64[] = mul a a
    in (y,) })");
  Jaxpr f = scan_of({Type::ref(f64v(4)), i32v(5), f64v(5)}, b, 5, 1, 0);
  AdCase c{f};
  c.fixed = {{1, i32s({0, 2, 2, 3, 0})}};
  check_ad(c);
  // The primal ref is read in the primal scan only.
  Linearized l = linearize_jaxpr(f, {true, false, true});
  for (int k = 0; k < l.num_residuals; ++k)
    EXPECT_FALSE(l.linear.type_of(l.linear.invars[k]).is_ref);
  EXPECT_TRUE(l.ref_residuals.empty());
}

TEST(ScanAd, ReadOnlyClosedOverRefIsNotHoisted) {
  // y = r[i] * x with a plumbing (not differentiated) ref r that the body also bumps.
  JaxprPtr b = body(R"({ lambda ; r:Ref{f64[3]} i:i32[] x:f64[]. let
      a:f64[] <- r[i]
      y:f64[] = mul a x
      r[i] += 1.0:f64[]
    in (y,) })");
  Jaxpr f = scan_of({Type::ref(f64v(3)), i32v(4), f64v(4)}, b, 4, 1, 0);
  AdCase c{f};
  c.fixed = {{0, f64s({0.5, 1.0, -2.0}, {3})}, {1, i32s({1, 1, 0, 1})}};
  check_ad(c);
  Linearized l = linearize_jaxpr(f, {false, false, true});
  // The read values (different each step: r changes) are one stacked residual [4].
  ASSERT_EQ(l.num_residuals, 1);
  EXPECT_EQ(l.linear.type_of(l.linear.invars[0]).array, f64v(4));
  EXPECT_TRUE(l.ref_residuals.empty());
}

TEST(ScanAd, ScannedOverRefRows) {
  // xs is a ref f64[4,2]: iteration i sees row i; row <- row * w + p; carry p' = p + row[0].
  JaxprPtr b = body(R"({ lambda ; w:f64[] p:f64[] r:Ref{f64[2]}. let
      a:f64[2] <- r[...]
      c:f64[2] = mul a w
      d:f64[2] = add c p
      r[...] <- d
      e:f64[] <- r[0]
      p2:f64[] = add p e
    in (p2,) })");
  check_ad(AdCase{scan_of({kF64, kF64, Type::ref(f64m(4, 2))}, b, 4, 1, 1)});
}

TEST(ScanAd, InternalRefInTheBody) {
  // An accumulator ref made per step: acc = new_ref 0; acc += x*p; acc += sin x; p' = acc.
  JaxprPtr b = body(R"({ lambda ; p:f64[] x:f64[]. let
      acc:Ref{f64[]} = new_ref 0.0:f64[]
      a:f64[] = mul x p
      acc[...] += a
      s:f64[] = sin x
      acc[...] += s
      p2:f64[] = freeze acc
    in (p2, a) })");
  check_ad(AdCase{scan_of({kF64, f64v(3)}, b, 3, 0, 1)});
}

TEST(ScanAd, MixedAccumulatorKindsGiveThePlainValueGradients) {
  // consts w (value), carry p, xs x; backward with every combination of value / ref /
  // dont_want per input must give the same numbers as value accumulators.
  JaxprPtr b = body(R"({ lambda ; w:f64[2] p:f64[2] x:f64[2]. let
      a:f64[2] = mul p w
      s:f64[2] = sin x
      p2:f64[2] = add a s
      y:f64[2] = mul p2 x
    in (p2, y) })");
  Jaxpr f = scan_of({f64v(2), f64v(2), f64m(3, 2)}, b, 3, 1, 1);
  const std::vector<bool> diff{true, true, true};
  Linearized l = linearize_jaxpr(f, diff);
  std::mt19937 rng(7);
  std::vector<RtValue> args{random_array(rng, f64v(2)), random_array(rng, f64v(2)),
                            random_array(rng, f64m(3, 2))};
  std::vector<RtValue> pouts = run(l.primal, args);
  std::vector<RtValue> res(pouts.begin() + 2, pouts.end());
  Array ct_p = random_array(rng, f64v(2)), ct_y = random_array(rng, f64m(3, 2));
  const std::vector<ArrayType> in_types{f64v(2), f64v(2), f64m(3, 2)};
  auto grads = [&](const std::vector<AccumKind>& kinds) {
    Jaxpr bwd = transpose_jaxpr(l.linear, l.num_nonlinear(), kinds);
    verify(bwd);
    std::vector<RtValue> bargs = res;
    std::vector<RefBufferPtr> refs(3);
    for (size_t k = 0; k < 3; ++k)
      if (kinds[k] == AccumKind::ref) {
        refs[k] = ref_of(Array(in_types[k]));
        bargs.push_back(refs[k]);
      }
    bargs.push_back(ct_p);
    bargs.push_back(ct_y);
    std::vector<RtValue> outs = run(bwd, bargs);
    std::vector<std::optional<Array>> g(3);
    size_t vi = 0;
    for (size_t k = 0; k < 3; ++k) {
      if (kinds[k] == AccumKind::value) g[k] = arr(outs.at(vi++));
      if (kinds[k] == AccumKind::ref) g[k] = refs[k]->value();
    }
    EXPECT_EQ(vi, outs.size());
    return g;
  };
  auto base = grads({AccumKind::value, AccumKind::value, AccumKind::value});
  const AccumKind all[] = {AccumKind::value, AccumKind::ref, AccumKind::dont_want};
  for (AccumKind k0 : all)
    for (AccumKind k1 : all)
      for (AccumKind k2 : all) {
        auto g = grads({k0, k1, k2});
        for (size_t k = 0; k < 3; ++k) {
          if (!g[k]) continue;
          SCOPED_TRACE(::testing::Message() << int(k0) << int(k1) << int(k2) << " input " << k);
          for (int64_t e = 0; e < base[k]->size(); ++e)
            EXPECT_NEAR(g[k]->as_double(e), base[k]->as_double(e), 1e-12);
        }
      }
}

// --------------------------------------------------------------- the seed (jax#17640)

constexpr int64_t kRows = 4, kCols = 3, kWidth = 2 * kCols + 1, kSteps = 6;

// simple_insert / slice1: carry f64[R, 2C+1]; insert v at (row, col), shifting the row's
// next C entries right by one.
const char* kInsertBody = R"({ lambda ; c:f64[4,7] row:i32[] col:i32[] v:f64[]. let
      sl:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c row col
      vb:f64[1,1] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 1) sharding=None] v
      u:f64[1,4] = concatenate[dimension=1] vb sl
      c2:f64[4,7] = dynamic_update_slice c u row col
    in (c2,) })";

// slow_pop: the value at (row, col) is read BEFORE the row is shifted left over it.
const char* kPopBody = R"({ lambda ; c:f64[4,7] row:i32[] col:i32[]. let
      v1:f64[1,1] = dynamic_slice[slice_sizes=(1, 1)] c row col
      v:f64[] = squeeze[dimensions=(0, 1)] v1
      col1:i32[] = add col 1:i32[]
      u:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c row col1
      c2:f64[4,7] = dynamic_update_slice c u row col
    in (c2, v) })";

// delete_fn: shift left without reading the deleted value.
const char* kDeleteBody = R"({ lambda ; c:f64[4,7] row:i32[] col:i32[]. let
      col1:i32[] = add col 1:i32[]
      u:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c row col1
      c2:f64[4,7] = dynamic_update_slice c u row col
    in (c2,) })";

// loss(w) = sum((target - scan(insert, init, rows, cols, vals**w)[:, :C])**2).
Jaxpr insert_loss() {
  return seed_insert_loss(body(kInsertBody), kRows, kCols, kSteps, /*mean=*/false);
}

std::vector<RtValue> seed_args(double w, std::mt19937& rng) {
  return {f64(w),
          random_array(rng, f64m(kRows, kWidth)),
          random_array(rng, f64m(kRows, kCols)),
          i32s({0, 2, 0, 3, 2, 0}),
          i32s({1, 0, 2, 1, 1, 0}),
          random_array(rng, f64v(kSteps), 0.2, 1.0)};
}

TEST(ScanAd, SeedInsertGradMatchesCentralDifferences) {
  Jaxpr f = insert_loss();
  Jaxpr g = grad_jaxpr(f, {0, 1});
  verify(g);
  std::mt19937 rng(3);
  std::vector<RtValue> args = seed_args(2.0, rng);
  std::vector<RtValue> out = run(g, args);
  ASSERT_EQ(out.size(), 3u);
  const double h = 1e-6;
  auto loss_at = [&](std::vector<RtValue> a) { return arr(run(f, a)[0]).as_double(0); };
  {
    std::vector<RtValue> p = args, m = args;
    p[0] = f64(2.0 + h);
    m[0] = f64(2.0 - h);
    double fd = (loss_at(p) - loss_at(m)) / (2 * h);
    EXPECT_NEAR(arr(out[1]).as_double(0), fd, 1e-7 * (1 + std::abs(fd)));
    EXPECT_NE(arr(out[1]).as_double(0), 0.0);
  }
  const Array init = arr(args[1]);
  for (int64_t k = 0; k < init.size(); ++k) {
    std::vector<RtValue> p = args, m = args;
    Array ip = init.clone(), im = init.clone();
    ip.set_from_double(k, init.as_double(k) + h);
    im.set_from_double(k, init.as_double(k) - h);
    p[1] = ip;
    m[1] = im;
    double fd = (loss_at(p) - loss_at(m)) / (2 * h);
    EXPECT_NEAR(arr(out[2]).as_double(k), fd, 1e-7 * (1 + std::abs(fd))) << "init entry " << k;
  }
}

// The structural promise: inside the transposed loop nothing is carry-sized.
void expect_loop_is_slice_sized(const Jaxpr& bwd, const Shape& carry) {
  std::vector<const Eqn*> scans;
  collect_scans(bwd, scans);
  ASSERT_EQ(scans.size(), 1u) << print_jaxpr(bwd);
  const Eqn& s = *scans[0];
  EXPECT_EQ(s.params.get<int64_t>("num_carry"), 0) << "the carry cotangent is a ref const";
  const Jaxpr& tb = scan_body(s);
  const std::string text = print_jaxpr(tb);
  int ref_updates = 0;
  for (const Eqn& q : tb.eqns) {
    for (Var o : q.outs)
      EXPECT_NE(tb.type_of(o).array.shape, carry)
          << "a carry-sized value in the transposed body: `" << prim_name(q.prim) << "`\n"
          << text;
    if (q.prim == Prim::shift_add) {
      // A window moved inside the cotangent ref (passes/ad/window_shift.h): a slice-sized run
      // swapped out and added back, as one eqn.
      ref_updates += 2;
      EXPECT_NE(Shape(ShiftAddParams::of(q).write_sizes->begin(),
                      ShiftAddParams::of(q).write_sizes->end()),
                carry)
          << text;
    }
    if (q.prim == Prim::swap || q.prim == Prim::addupdate) {
      ++ref_updates;
      // A slice-sized value moved in or out of the cotangent ref.
      EXPECT_NE(tb.type_of(q.ins[1]).array.shape, carry) << text;
      EXPECT_FALSE(q.params.get<Indexer>("indexer").is_whole()) << text;
    }
    EXPECT_NE(q.prim, Prim::dynamic_update_slice) << text;
    EXPECT_NE(q.prim, Prim::freeze) << text;
    EXPECT_NE(q.prim, Prim::new_ref) << text;
  }
  EXPECT_GE(ref_updates, 2) << text;
}

TEST(ScanAd, SeedInsertBackwardLoopIsSliceSized) {
  Jaxpr f = insert_loss();
  VjpJaxprs v =
      vjp_jaxpr(f, {true, true, false, false, false, false}, {AccumKind::value, AccumKind::value});
  verify(v.backward);
  expect_loop_is_slice_sized(v.backward, {kRows, kWidth});
  const Jaxpr& tb = scan_body(*[&] {
    std::vector<const Eqn*> s;
    collect_scans(v.backward, s);
    return s[0];
  }());
  // Per step: the updated slice swapped out of the cotangent ref and the read slice added back
  // into it, as the one shift_add the transpose of the move writes (passes/ad/window_shift.h).
  EXPECT_EQ(count_prim(print_jaxpr(tb), "shift_add"), 1) << print_jaxpr(tb);
  EXPECT_EQ(count_prim(print_jaxpr(tb), "swap") + count_prim(print_jaxpr(tb), "<-"), 0)
      << print_jaxpr(tb);
  // Residuals: the stacked values' factor (v**w log v ...) is outside the loop; the loop's
  // residuals are the rows and cols themselves (xs, not stacked copies), never the carry.
  for (int k = 0; k < v.num_residuals; ++k) {
    const ArrayType t = v.backward.type_of(v.backward.invars[k]).array;
    EXPECT_NE(t.shape, (Shape{kSteps, kRows, kWidth})) << "the carry was saved per step";
  }
  Linearized l = linearize_jaxpr(f, {true, true, false, false, false, false});
  std::vector<const Eqn*> ls;
  collect_scans(l.linear, ls);
  ASSERT_EQ(ls.size(), 1u);
  for (const Atom& a : ls[0]->ins) {
    const ArrayType t = l.linear.type_of(a).array;
    EXPECT_TRUE(t.shape != (Shape{kSteps, kRows, kWidth})) << print_jaxpr(l.linear);
  }
  // The linear scan's non-linear operands are exactly rows and cols (i32[6] each).
  int int_operands = 0;
  for (const Atom& a : ls[0]->ins) int_operands += l.linear.type_of(a).array.dtype == DType::i32;
  EXPECT_EQ(int_operands, 2);
}

TEST(ScanAd, SeedInsertGradWithRefAccumulatorAddsIntoIt) {
  Jaxpr f = insert_loss();
  VjpJaxprs v =
      vjp_jaxpr(f, {true, true, false, false, false, false}, {AccumKind::value, AccumKind::ref});
  verify(v.backward);
  expect_loop_is_slice_sized(v.backward, {kRows, kWidth});
  VjpJaxprs base =
      vjp_jaxpr(f, {true, true, false, false, false, false}, {AccumKind::value, AccumKind::value});
  std::mt19937 rng(5);
  std::vector<RtValue> args = seed_args(1.5, rng);
  std::vector<RtValue> fo = run(v.forward, args);
  std::vector<RtValue> res(fo.begin() + 1, fo.end());
  Array P = random_array(rng, f64m(kRows, kWidth));
  RefBufferPtr acc = ref_of(P);
  std::vector<RtValue> bargs = res;
  bargs.push_back(acc);
  bargs.push_back(f64(1.0));
  std::vector<RtValue> g = run(v.backward, bargs);
  std::vector<RtValue> b2 = res;
  b2.push_back(f64(1.0));
  std::vector<RtValue> gb = run(base.backward, b2);
  EXPECT_DOUBLE_EQ(arr(g[0]).as_double(0), arr(gb[0]).as_double(0));
  for (int64_t k = 0; k < P.size(); ++k)
    EXPECT_NEAR(acc->value().as_double(k), P.as_double(k) + arr(gb[1]).as_double(k), 1e-12);
}

Jaxpr pop_program(const char* text, bool with_ys) {
  JaxprBuilder b;
  Var init = b.add_invar(f64m(kRows, kWidth));
  Var rows = b.add_invar(i32v(kSteps));
  Var cols = b.add_invar(i32v(kSteps));
  std::vector<Var> outs =
      b.add_eqn(Prim::scan, {init, rows, cols}, scan_params(body(text), kSteps, 0, 1));
  Emitter e(b);
  Atom s = e.reduce_sum(e.mul(outs[0], outs[0]), {0, 1});
  if (with_ys) s = e.add(s, e.reduce_sum(e.mul(outs[1], outs[1]), {0}));
  b.set_outvars({s});
  return b.finish();
}

TEST(ScanAd, SeedSlowPopAndDeleteGradsAreCorrectAndSliceSized) {
  for (bool pop : {true, false}) {
    SCOPED_TRACE(pop ? "slow_pop" : "delete");
    Jaxpr f = pop_program(pop ? kPopBody : kDeleteBody, pop);
    AdCase c{f};
    c.fixed = {{1, i32s({0, 2, 0, 3, 2, 0})}, {2, i32s({1, 0, 2, 1, 4, 3})}};
    c.fd_tol = 1e-6;
    check_ad(c);
    VjpJaxprs v = vjp_jaxpr(f, {true, false, false}, {AccumKind::value});
    expect_loop_is_slice_sized(v.backward, {kRows, kWidth});
    // Reverse mode needs no per-step residual but the one index it computes (col + 1).
    Linearized l = linearize_jaxpr(f, {true, false, false});
    for (int k = 0; k < l.num_residuals; ++k) {
      const ArrayType t = l.linear.type_of(l.linear.invars[k]).array;
      EXPECT_TRUE(t.dtype == DType::i32 || t.rank() <= 2) << t.str();
      EXPECT_NE(t.shape, (Shape{kSteps, kRows, kWidth}));
    }
  }
}

// The gradient of the delete loop holds the shift_add its transpose writes
// (passes/ad/window_shift.h). Differentiated again (forward over reverse, and reverse over
// reverse through check_ad's transpose identity) and batched, it is read as the plain eqns the
// shift_add stands for (passes/plain_decisions.h): every derivative of the gradient agrees
// with central differences, and the batched gradient with the gradient of each example.
TEST(ScanAd, SeedDeleteGradientWithItsShiftIsDifferentiatedAndBatchedAgain) {
  const Jaxpr f = pop_program(kDeleteBody, false);
  const Jaxpr g = grad_jaxpr(f, {0});
  verify(g);
  ASSERT_GE(count_prim(print_jaxpr(g), "shift_add"), 1) << print_jaxpr(g);
  AdCase c{g};
  c.fixed = {{1, i32s({0, 2, 0, 3, 2, 0})}, {2, i32s({1, 0, 2, 1, 4, 3})}};
  c.fd_tol = 1e-6;
  check_ad(c);

  constexpr int64_t kBatch = 3;
  const BatchedJaxpr vg = vmap_jaxpr(g, {true, false, false}, kBatch);
  std::mt19937 rng(11);
  const Array inits = random_array(rng, ArrayType{DType::f64, {kBatch, kRows, kWidth}});
  const RtValue rows = i32s({0, 2, 0, 3, 2, 0}), cols = i32s({1, 0, 2, 1, 4, 3});
  const std::vector<RtValue> batched = run(vg.jaxpr, {inits, rows, cols});
  ASSERT_EQ(batched.size(), 2u);
  const int64_t per = kRows * kWidth;
  for (int64_t b = 0; b < kBatch; ++b) {
    Array init = random_array(rng, f64m(kRows, kWidth));
    for (int64_t k = 0; k < per; ++k) init.set_from_double(k, inits.as_double(b * per + k));
    const std::vector<RtValue> one = run(g, {init, rows, cols});
    EXPECT_EQ(arr(batched[0]).as_double(b), arr(one[0]).as_double(0)) << "example " << b;
    for (int64_t k = 0; k < per; ++k)
      ASSERT_EQ(arr(batched[1]).as_double(b * per + k), arr(one[1]).as_double(k))
          << "example " << b << " entry " << k;
  }
}

TEST(ScanAd, CarryReadsPlacedAfterTheUpdateStaySliceSized) {
  // c2 = dus(c, u); y = c2[row, 0] read after the update, and c[row, 3] read after it too:
  // the carry-in's accumulator already holds a (pending, sparse) contribution when the
  // update is transposed; it is added into the aliased ref, still O(slice).
  JaxprPtr b = body(R"({ lambda ; c:f64[3,4] row:i32[] x:f64[]. let
      a:f64[1,2] = dynamic_slice[slice_sizes=(1, 2)] c row 1:i32[]
      s:f64[1,2] = sin a
      xb:f64[1,2] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 2) sharding=None] x
      u:f64[1,2] = mul s xb
      c2:f64[3,4] = dynamic_update_slice c u row 0:i32[]
      r:f64[1,1] = dynamic_slice[slice_sizes=(1, 1)] c2 row 0:i32[]
      y:f64[] = squeeze[dimensions=(0, 1)] r
      q:f64[1,1] = dynamic_slice[slice_sizes=(1, 1)] c row 3:i32[]
      z:f64[] = squeeze[dimensions=(0, 1)] q
      w:f64[] = mul y z
    in (c2, w) })");
  AdCase c{scan_of({f64m(3, 4), i32v(4), f64v(4)}, b, 4, 0, 1)};
  c.fixed = {{1, i32s({0, 2, 2, 1})}};
  check_ad(c);
  VjpJaxprs v = vjp_jaxpr(c.f, {true, false, true}, {AccumKind::value, AccumKind::value});
  expect_loop_is_slice_sized(v.backward, {3, 4});
}

TEST(ScanAd, CarryUsedWholeAndUpdatedFallsBackDensely) {
  // y = sum(c * c) uses the whole carry: its cotangent is dense anyway; the update's rule
  // adds the held ref's contents into it (correct, O(carry) per step).
  JaxprPtr b = body(R"({ lambda ; c:f64[3,4] row:i32[] x:f64[]. let
      sq:f64[3,4] = mul c c
      y:f64[] = reduce_sum[axes=(0, 1)] sq
      xb:f64[1,4] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 4) sharding=None] x
      a:f64[1,4] = dynamic_slice[slice_sizes=(1, 4)] c row 0:i32[]
      u:f64[1,4] = mul a xb
      c2:f64[3,4] = dynamic_update_slice c u row 0:i32[]
    in (c2, y) })");
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse);
    AdCase r{scan_of({f64m(3, 4), i32v(4), f64v(4)}, b, 4, 0, 1, reverse)};
    r.fixed = {{1, i32s({0, 2, 2, 1})}};
    check_ad(r, 2);
  }
}

TEST(ScanAd, PassThroughAndSwappedCarries) {
  // (a, b, k) -> (b, a * x, k): carries exchanged, k returned unchanged.
  JaxprPtr b = body(R"({ lambda ; a:f64[2] b:f64[2] k:f64[2] x:f64[]. let
      m:f64[2] = mul a x
      y:f64[2] = add k b
    in (b, m, k, y) })");
  check_ad(AdCase{scan_of({f64v(2), f64v(2), f64v(2), f64v(5)}, b, 5, 0, 3)});
  check_ad(AdCase{scan_of({f64v(2), f64v(2), f64v(2), f64v(5)}, b, 5, 0, 3, true)});
}

TEST(ScanAd, SeedSlice2TwoUpdatesPerStepStaySliceSized) {
  // slice2: shift right by one with a dynamic_update_slice at col + 1, then set (row, col)
  // to the value with a second one; reverse scan for good measure.
  JaxprPtr b = body(R"({ lambda ; c:f64[4,7] row:i32[] col:i32[] v:f64[]. let
      u:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c row col
      col1:i32[] = add col 1:i32[]
      c1:f64[4,7] = dynamic_update_slice c u row col1
      vb:f64[1,1] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 1) sharding=None] v
      c2:f64[4,7] = dynamic_update_slice c1 vb row col
    in (c2,) })");
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse);
    Jaxpr f = scan_of({f64m(kRows, kWidth), i32v(kSteps), i32v(kSteps), f64v(kSteps)}, b, kSteps, 0,
                      1, reverse);
    AdCase c{f};
    c.fixed = {{1, i32s({0, 2, 0, 3, 2, 0})}, {2, i32s({1, 0, 2, 1, 3, 0})}};
    check_ad(c);
    VjpJaxprs v = vjp_jaxpr(f, {true, false, false, true}, {AccumKind::value, AccumKind::value});
    expect_loop_is_slice_sized(v.backward, {kRows, kWidth});
  }
}

TEST(ScanAd, JitInsideTheBodyIsInlinedForReverseMode) {
  // The seed's bodies call jitted functions: the JVP of the jit is split like the rest.
  JaxprPtr inner = body(R"({ lambda ; c:f64[4,7] row:i32[] col:i32[]. let
      col1:i32[] = add col 1:i32[]
      u:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c row col1
      s:f64[1,3] = sin u
      c2:f64[4,7] = dynamic_update_slice c s row col
    in (c2,) })");
  JaxprBuilder bb;
  Var c = bb.add_invar(f64m(kRows, kWidth));
  Var row = bb.add_invar(ArrayType{DType::i32, {}});
  Var col = bb.add_invar(ArrayType{DType::i32, {}});
  std::vector<Var> o = bb.add_eqn(Prim::jit, {c, row, col},
                                  Params{{"name", std::string("delete_fn")}, {"jaxpr", inner}});
  bb.set_outvars({o[0]});
  JaxprPtr b = std::make_shared<const Jaxpr>(bb.finish());
  Jaxpr f = scan_of({f64m(kRows, kWidth), i32v(kSteps), i32v(kSteps)}, b, kSteps, 0, 1);
  AdCase ac{f};
  ac.fixed = {{1, i32s({0, 2, 0, 3, 2, 0})}, {2, i32s({1, 0, 2, 1, 3, 0})}};
  check_ad(ac);
  VjpJaxprs v = vjp_jaxpr(f, {true, false, false}, {AccumKind::value});
  expect_loop_is_slice_sized(v.backward, {kRows, kWidth});
}

TEST(ScanAd, NestedScanIsSplitRecursively) {
  // outer carry p (f64[2]) over xs x (f64[3]); inner scan over x's entries: q' = sin(q) * e.
  JaxprPtr inner = body(R"({ lambda ; q:f64[2] e:f64[]. let
      s:f64[2] = sin q
      q2:f64[2] = mul s e
    in (q2, s) })");
  JaxprBuilder bb;
  Var p = bb.add_invar(f64v(2));
  Var x = bb.add_invar(f64v(3));
  std::vector<Var> o = bb.add_eqn(Prim::scan, {p, x}, scan_params(inner, 3, 0, 1));
  Emitter e(bb);
  Atom y = e.reduce_sum(o[1], {0, 1});
  bb.set_outvars({o[0], y});
  JaxprPtr b = std::make_shared<const Jaxpr>(bb.finish());
  Jaxpr f = scan_of({f64v(2), f64m(4, 3)}, b, 4, 0, 1);
  check_ad(AdCase{f});
  Linearized l = linearize_jaxpr(f, {true, true});
  std::vector<const Eqn*> scans;
  collect_scans(l.linear, scans);
  EXPECT_EQ(scans.size(), 2u);
  EXPECT_EQ(count_prim(print_jaxpr(l.linear), "sin"), 0) << print_jaxpr(l.linear);
}

TEST(ScanAd, ScatterUpdateOfTheCarryTakesTheDenseRuleCorrectly) {
  // The seed's "scatter" mode: read entries with gather, write them back scaled with
  // scatter (unique indices per step). No aliasing for scatter yet: correct, dense.
  JaxprPtr b = body(R"({ lambda ; c:f64[7] idx:i32[2] v:f64[2]. let
      a:f64[2] = gather[axis=0] c idx
      u:f64[2] = mul a v
      c2:f64[7] = scatter[axis=0] c idx u
    in (c2,) })");
  Jaxpr f = scan_of({f64v(7), ArrayType{DType::i32, {5, 2}}, f64m(5, 2)}, b, 5, 0, 1);
  AdCase c{f};
  c.fixed = {{1, Array::from_vector<int32_t>({0, 1, 3, 2, 6, 0, 1, 2, 5, 4}, {5, 2})}};
  check_ad(c);
}

}  // namespace
}  // namespace refjit
