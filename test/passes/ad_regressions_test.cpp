// Regression tests for the transposition bugs the random-program tester found
// (docs/testing.md "Known mismatches", fuzz/corpus/transforms/known_mismatch_*.jaxpr): each
// reproducer passes check_ad (JVP vs finite differences, linearize vs JVP, the transpose
// identity for every accumulator kind), and the documented gradient is checked exactly.
#include <gtest/gtest.h>

#include <cmath>

#include "passes/ad/vjp.h"
#include "test/passes/ad_check.h"

namespace refjit {
namespace {

using namespace refjit::testing;

Array i32a(std::vector<int32_t> v, Shape shape) {
  return Array::from_vector<int32_t>(std::move(v), std::move(shape));
}

// J^T ct for the float invars of f (value accumulators), at `args`.
std::vector<Array> pullback(const Jaxpr& f, const std::vector<RtValue>& args,
                            const std::vector<Array>& cts) {
  std::vector<bool> diff;
  std::vector<AccumKind> kinds;
  for (Var v : f.invars) {
    diff.push_back(is_float(f.type_of(v).dtype()) && !f.type_of(v).is_ref);
    if (diff.back()) kinds.push_back(AccumKind::value);
  }
  VjpJaxprs v = vjp_jaxpr(f, diff, kinds);
  verify(v.backward);
  std::vector<RtValue> outs = run(v.forward, args);
  std::vector<RtValue> bargs(outs.begin() + static_cast<long>(f.outvars.size()), outs.end());
  for (const Array& ct : cts) bargs.push_back(ct);
  std::vector<Array> r;
  for (const RtValue& g : run(v.backward, bargs)) r.push_back(arr(g));
  return r;
}

// How many `scatter`s into an int array (last_write_mask's scratch) the backward pass of f
// has (all float inputs differentiated, value accumulators).
int int_scatters_in_backward(const Jaxpr& f) {
  std::vector<bool> diff;
  std::vector<AccumKind> kinds;
  for (Var v : f.invars) {
    diff.push_back(is_float(f.type_of(v).dtype()));
    if (diff.back()) kinds.push_back(AccumKind::value);
  }
  const Jaxpr bwd = vjp_jaxpr(f, diff, kinds).backward;
  int n = 0;
  for (const Eqn& q : bwd.eqns)
    if (q.prim == Prim::scatter && bwd.type_of(q.outs[0]).dtype() == DType::i32) ++n;
  return n;
}

// ------------------------------------------------- scatter(-add) with out-of-range indices

const char* kScatterAddOutOfRange = R"({ lambda ; a:f64[3] h:i32[3]. let
    j:f64[3] = sin a
    k:f64[3] = scatter-add[axis=0] a h j
  in (k,) })";

TEST(AdRegressions, ScatterAddDropsTheCotangentOfOutOfRangeUpdates) {
  const Jaxpr f = parse(kScatterAddOutOfRange);
  AdCase c{f};
  c.fixed = {{1, i32a({-1, 1, 5}, {3})}};
  check_ad(c);
  // J = diag(1, 1 + cos 2, 1): the updates at -1 and 5 are dropped.
  const std::vector<Array> g =
      pullback(f, {f64s({1, 2, 3}, {3}), i32a({-1, 1, 5}, {3})}, {f64s({1, 1, 1}, {3})});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(values(g[0]), (std::vector<double>{1.0, 1.0 + std::cos(2.0), 1.0}));
}

TEST(AdRegressions, ScatterDropsTheCotangentOfOutOfRangeUpdates) {
  AdCase c{parse(R"({ lambda ; a:f64[3] h:i32[3]. let
      j:f64[3] = sin a
      k:f64[3] = scatter[axis=0] a h j
    in (k,) })")};
  c.fixed = {{1, i32a({-1, 1, 5}, {3})}};
  check_ad(c);
  c.fixed = {{1, i32a({3, -4, 0}, {3})}};
  check_ad(c);
}

// ------------------------------------------------------- duplicate indices: last write wins

const char* kSwapIndexArray = R"({ lambda ; a:f64[3] o:i32[2]. let
    d:Ref{f64[3]} = new_ref a
    p:f64[2] <- d[o]
    q:f64[2] = sin p
    r:f64[2], d[o] <- d[o], q
    e:f64[3] = freeze d
  in (e,) })";

TEST(AdRegressions, SwapThroughDuplicateIndicesGivesTheCotangentToTheLastWriteOnly) {
  const Jaxpr f = parse(kSwapIndexArray);
  for (const Array& o :
       {i32a({1, 1}, {2}), i32a({2, 0}, {2}), i32a({0, 7}, {2}), i32a({-3, 0}, {2})}) {
    AdCase c{f};
    c.fixed = {{1, o}};
    check_ad(c);
  }
  // e = a with e[1] = sin(a[1]) (written twice): de/da = diag(1, cos 2, 1) at a = [1, 2, 3].
  const std::vector<Array> g =
      pullback(f, {f64s({1, 2, 3}, {3}), i32a({1, 1}, {2})}, {f64s({1, 1, 1}, {3})});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(values(g[0]), (std::vector<double>{1.0, std::cos(2.0), 1.0}));
}

TEST(AdRegressions, SwapReturningTheOldValuesSumsTheirCotangentsOverDuplicates) {
  // Both copies of the duplicated index return the old d[1]; their cotangents add up, and
  // only the last written value reaches the final contents.
  const Jaxpr f = parse(R"({ lambda ; a:f64[3] u:f64[3] o:i32[3]. let
      d:Ref{f64[3]} = new_ref a
      r:f64[3], d[o] <- d[o], u
      s:f64[3] = mul r r
      e:f64[3] = freeze d
    in (e, s) })");
  for (const Array& o : {i32a({1, 1, 1}, {3}), i32a({2, 0, 2}, {3}), i32a({0, 5, -1}, {3})}) {
    AdCase c{f};
    c.fixed = {{2, o}};
    check_ad(c);
  }
  const std::vector<Array> g =
      pullback(f, {f64s({1, 2, 3}, {3}), f64s({4, 5, 6}, {3}), i32a({1, 1, 2}, {3})},
               {f64s({1, 1, 1}, {3}), f64s({1, 1, 1}, {3})});
  ASSERT_EQ(g.size(), 2u);
  // e = [a0, u1, u2]; s = [a1^2, a1^2, a2^2].
  EXPECT_EQ(values(g[0]), (std::vector<double>{1.0, 8.0, 6.0}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{0.0, 1.0, 1.0}));
}

TEST(AdRegressions, SwapThroughTwoIndexArraysWithDuplicatePairs) {
  // Index arrays on two dims broadcast together: (i, j) pairs (0,1), (2,1), (0,1), (1,0) —
  // the first pair is overwritten by the third; a slice dim follows.
  AdCase c{parse(R"({ lambda ; a:f64[3,2,2] u:f64[4,2] i:i32[4] j:i32[4]. let
      d:Ref{f64[3,2,2]} = new_ref a
      r:f64[4,2], d[i, j, :] <- d[i, j, :], u
      s:f64[4,2] = sin r
      e:f64[3,2,2] = freeze d
    in (e, s) })")};
  c.fixed = {{2, i32a({0, 2, 0, 1}, {4})}, {3, i32a({1, 1, 1, 0}, {4})}};
  check_ad(c);
  c.fixed = {{2, i32a({0, 9, 2, 1}, {4})}, {3, i32a({1, 1, 1, -2}, {4})}};  // clamping
  check_ad(c);
}

const char* kScatterDuplicates = R"({ lambda ; a:f64[3] h:i32[2]. let
    g:f64[2] = gather[axis=0] a h
    j:f64[2] = sin g
    k:f64[3] = scatter[axis=0] a h j
  in (k,) })";

TEST(AdRegressions, ScatterWithDuplicateIndicesGivesTheCotangentToTheLastUpdateOnly) {
  const Jaxpr f = parse(kScatterDuplicates);
  for (const Array& h :
       {i32a({1, 1}, {2}), i32a({0, 2}, {2}), i32a({2, 5}, {2}), i32a({-1, 0}, {2})}) {
    AdCase c{f};
    c.fixed = {{1, h}};
    check_ad(c);
  }
  const std::vector<Array> g =
      pullback(f, {f64s({1, 2, 3}, {3}), i32a({1, 1}, {2})}, {f64s({1, 1, 1}, {3})});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(values(g[0]), (std::vector<double>{1.0, std::cos(2.0), 1.0}));
  EXPECT_EQ(int_scatters_in_backward(f), 0) << "two indices are compared pairwise";
}

TEST(AdRegressions, ScatterWithDuplicatesOnAnInnerAxisAndTwoDimIndices) {
  AdCase c{parse(R"({ lambda ; a:f64[2,4] u:f64[2,2,3] h:i32[2,3]. let
      k:f64[2,4] = scatter[axis=1] a h u
      m:f64[2,4] = mul k k
    in (m,) })")};
  c.fixed = {{2, i32a({3, 1, 3, 0, 1, 9}, {2, 3})}};
  check_ad(c);
  c.fixed = {{2, i32a({2, 2, 2, 2, 2, 2}, {2, 3})}};
  check_ad(c);
}

TEST(AdRegressions, ScatterWithManyDuplicateIndicesUsesTheScratchMask) {
  // 40 indices into an axis of 5: more than the pairwise mask's limit (see
  // passes/ad/last_write_mask.h), so the mask goes through an int scratch of the axis's size.
  std::vector<int32_t> h;
  for (int k = 0; k < 40; ++k) h.push_back((k * 7) % 9 - 2);  // in [-2, 6]: duplicates, drops
  AdCase c{parse(R"({ lambda ; a:f64[5] u:f64[40] h:i32[40]. let
      k:f64[5] = scatter[axis=0] a h u
      m:f64[5] = sin k
    in (m,) })")};
  c.fixed = {{2, i32a(h, {40})}};
  check_ad(c);
  EXPECT_EQ(int_scatters_in_backward(c.f), 1);
}

TEST(AdRegressions, UniqueIndicesScatterSkipsTheLastWriteMask) {
  // The same 40 indices without repeats, promised unique as JAX's unique_indices=True: the
  // backward pass has no mask scratch and the gradient is still exact.
  std::vector<int32_t> h;
  for (int k = 0; k < 40; ++k) h.push_back(k < 3 ? k : 100 + k);  // 3 in range, the rest dropped
  AdCase c{parse(R"({ lambda ; a:f64[5] u:f64[40] h:i32[40]. let
      k:f64[5] = scatter[axis=0 unique_indices=True] a h u
      m:f64[5] = sin k
    in (m,) })")};
  c.fixed = {{2, i32a(h, {40})}};
  check_ad(c);
  EXPECT_EQ(int_scatters_in_backward(c.f), 0);
}

// ---------------------------------------------- one array as two operands of a scan

const char* kScanConstAndXs = R"({ lambda ; a:f64[2] b:f64[]. let
    d:f64[] = scan[
      _split_transpose=False
      jaxpr={ lambda ; e:f64[2] g:f64[] h:f64[]. let
          i:f64[] = reduce_sum[axes=(0,)] e
          bd:f64[] = mul g i
        in (bd,) }
      length=2
      linear=(False, False, False)
      num_carry=1
      num_consts=1
      reverse=False
      unroll=1
    ] a b a
  in (d,) })";

TEST(AdRegressions, ScanWithOneArrayAsConstAndXsGetsBothCotangents) {
  const Jaxpr f = parse(kScanConstAndXs);
  check_ad(AdCase{f});
  // d = b * s^2 with s = a0 + a1 (the const's sum, once per step; the xs are unused):
  // dd/da = [2 b s, 2 b s] and dd/db = s^2, at a = [0.3, 0.7], b = 0.5: [1, 1] and 1.
  const std::vector<Array> g = pullback(f, {f64s({0.3, 0.7}, {2}), f64(0.5)}, {f64(1.0)});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_NEAR(g[0].as_double(0), 1.0, 1e-15);
  EXPECT_NEAR(g[0].as_double(1), 1.0, 1e-15);
  EXPECT_NEAR(g[1].as_double(0), 1.0, 1e-15);
}

TEST(AdRegressions, ScanWithOneArrayInEveryOperandRole) {
  // The reduced seed 820 program: one array as const, as both carries and as xs (after
  // inlining the jit), and the xs actually read by the body.
  check_ad(AdCase{parse(R"({ lambda ; b:f64[4,1,1]. let
      o:f64[4,1,1] u:f64[4,4,1,1] = jit[
        name=f
        jaxpr={ lambda ; p:f64[4,1,1] q:f64[4,1,1]. let
            r:f64[4,1,1] = add 0.625:f64[] p
            s:f64[4,1,1] t:f64[4,1,1] w:f64[4,4,1,1] = scan[
              _split_transpose=False
              jaxpr={ lambda ; v:f64[4,1,1] x:f64[4,1,1] y:f64[4,1,1] z:f64[1,1]. let
                  ea:f64[4,1,1] = sin y
                  eb:f64[1,1,1] = slice[limit_indices=(3, 1, 1) start_indices=(1, 0, 0) strides=(2, 1, 1)] y
                  eg:f64[] = reduce_sum[axes=(0, 1, 2)] eb
                  ez:f64[] = reduce_sum[axes=(0, 1)] z
                  eh:f64[] = mul eg ez
                  ei:f64[4,1,1] = mul x eh
                  ej:f64[4,1,1] = tanh ei
                  ek:f64[4,1,1] = mul y v
                  el:f64[4,1,1] = tanh ek
                in (ej, el, ea) }
              length=4
              linear=(False, False, False, False)
              num_carry=2
              num_consts=1
              reverse=False
              unroll=1
            ] p r r q
          in (t, w) }
      ] b b
    in (o, u) })")});
}

TEST(AdRegressions, ScanWithOneArrayAsTwoXsAndAsTwoConsts) {
  check_ad(AdCase{parse(R"({ lambda ; a:f64[3] c:f64[]. let
      d:f64[] e:f64[3] = scan[
        _split_transpose=False
        jaxpr={ lambda ; k:f64[3] l:f64[3] g:f64[] h:f64[] i:f64[]. let
            m:f64[] = reduce_sum[axes=(0,)] k
            n:f64[3] = mul k l
            p:f64[] = reduce_sum[axes=(0,)] n
            q:f64[] = mul h i
            r:f64[] = mul g q
            s:f64[] = add r p
            t:f64[] = add s m
          in (t, q) }
        length=3
        linear=(False, False, False, False, False)
        num_carry=1
        num_consts=2
        reverse=False
        unroll=1
      ] a a c a a
    in (d, e) })")});
}

// ------------------------------------- a [1] view of a scalar cotangent read through indices

// Seed 5068, reduced: r = squeeze(n) feeds a scan's scalar carry, so n's accumulator takes
// over the carry cotangent's scalar ref as a reshaped f64[1] view; the gathers of n then add
// through an index array, which a rank-0 buffer cannot take (it used to emit an addupdate
// of f64[3] into the Ref{f64[]}). Both orders: the later gather's contribution is pending
// when the view is made, the earlier one is added into the view.
const char* kGatherOfSqueezedScalarCarry = R"({ lambda ; a:f64[1] i:i32[3]. let
    n:f64[1] = sin a
    g:f64[3] = gather[axis=0] n i
    r:f64[] = squeeze[dimensions=(0,)] n
    s:f64[] = scan[
      _split_transpose=False
      jaxpr={ lambda ; c:f64[]. let
          d:f64[] = mul c c
        in (d,) }
      length=2
      linear=(False,)
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] r
    h:f64[3] = gather[axis=0] n i
  in (s, g, h) })";

TEST(AdRegressions, GatherFromTheReshapedViewOfAScalarCarryCotangent) {
  const Jaxpr f = parse(kGatherOfSqueezedScalarCarry);
  AdCase c{f};
  c.fixed = {{1, i32a({0, 5, -2}, {3})}};  // all clamp to entry 0
  check_ad(c);
  // s = sin^4 a0, g = h = [sin a0] * 3: ds/da0 = 4 sin^3 a0 cos a0, each gather 3 cos a0.
  const double a0 = 0.4;
  const std::vector<Array> grad = pullback(f, {f64s({a0}, {1}), i32a({0, 5, -2}, {3})},
                                           {f64(1.0), f64s({1, 1, 1}, {3}), f64s({1, 1, 1}, {3})});
  ASSERT_EQ(grad.size(), 1u);
  const double sa = std::sin(a0), ca = std::cos(a0);
  EXPECT_NEAR(grad[0].as_double(0), 4 * sa * sa * sa * ca + 6 * ca, 1e-14);
}

}  // namespace
}  // namespace refjit
