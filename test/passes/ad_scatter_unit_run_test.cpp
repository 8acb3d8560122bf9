// Reverse mode through a scan whose carry is written by a scatter at a contiguous run of
// indices (`row * w + col + iota(k)`, the seed's x.at[row, cols].set): the index math is
// recomputed in the linear scan from the xs (passes/ad/linearize_scan.cpp, no stacked index
// residual), which keeps the run visible to the scatter's transpose, whose "an out-of-range
// index clamps onto a written entry" tests become scalar (passes/ad/transpose_rules_scatter.cpp,
// no reduction). Gradients stay exact: checked against central differences with runs partly
// or wholly out of range, clamping onto written entries, and wrapping past INT_MAX.
#include <gtest/gtest.h>

#include <climits>
#include <memory>

#include "passes/ad/vjp.h"
#include "passes/emitter.h"
#include "test/passes/ad_check.h"

namespace refjit {
namespace {

using namespace refjit::testing;

constexpr int64_t kSteps = 5;

ArrayType f64t(Shape s) { return ArrayType{DType::f64, std::move(s)}; }
ArrayType i32t(Shape s) { return ArrayType{DType::i32, std::move(s)}; }

// Carry f64[3,4]; per step c.flat[row * 4 + col + iota(3)] = u * (old c[0, 0:3]). The
// scatter's result is the carry-out, so the transposed body zeroes R in place (the rule's
// hand-over path, where the clamped out-of-range writes must agree with the zeroed ones).
const char* kRunScatterBody = R"({ lambda ; c:f64[3,4] row:i32[] col:i32[] u:f64[3]. let
      q:i32[3] = iota[dimension=0 dtype=int32 shape=(3,) sharding=None]
      cs:i32[3] = add col q
      r4:i32[] = mul row 4:i32[]
      fi:i32[3] = add r4 cs
      sl:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c 0:i32[] 0:i32[]
      s1:f64[3] = reshape[dimensions=None new_sizes=(3,)] sl
      v:f64[3] = mul u s1
      f:f64[12] = reshape[dimensions=None new_sizes=(12,)] c
      s:f64[12] = scatter[axis=0 unique_indices=True] f fi v
      c1:f64[3,4] = reshape[dimensions=None new_sizes=(3, 4)] s
    in (c1,) })";

Jaxpr run_loss() {
  JaxprBuilder b;
  std::vector<Atom> ins{b.add_invar(f64t({3, 4})), b.add_invar(i32t({kSteps})),
                        b.add_invar(i32t({kSteps})), b.add_invar(f64t({kSteps, 3}))};
  Params p{{"jaxpr", std::make_shared<const Jaxpr>(parse(kRunScatterBody))},
           {"length", kSteps},
           {"reverse", false},
           {"num_consts", int64_t{0}},
           {"num_carry", int64_t{1}},
           {"linear", NoneParam{}},
           {"unroll", int64_t{1}},
           {"_split_transpose", false}};
  std::vector<Var> outs = b.add_eqn(Prim::scan, ins, p);
  Emitter e(b);
  b.set_outvars({e.reduce_sum(e.mul(outs[0], outs[0]), {0, 1})});
  return b.finish();
}

AdCase run_case(std::vector<int32_t> rows, std::vector<int32_t> cols) {
  AdCase c{run_loss()};
  c.fixed = {{1, Array::from_vector<int32_t>(std::move(rows), {kSteps})},
             {2, Array::from_vector<int32_t>(std::move(cols), {kSteps})}};
  return c;
}

TEST(ScatterUnitRunAd, InRangeRunsGiveExactGradients) {
  check_ad(run_case({0, 1, 2, 1, 0}, {0, 1, 0, 0, 1}));
}

TEST(ScatterUnitRunAd, RunsCrossingRowsGiveExactGradients) {
  check_ad(run_case({0, 1, 1, 0, 2}, {2, 3, 2, 3, 1}));
}

TEST(ScatterUnitRunAd, PartlyOutOfRangeRunsClampingOntoWrittenEntriesGiveExactGradients) {
  // row 0, col -1: indices -1, 0, 1 (the dropped -1 clamps onto the written 0); row 2,
  // col 2: 10, 11, 12 (12 clamps onto the written 11); col -2: -2, -1, 0.
  check_ad(run_case({0, 2, 0, 2, 0}, {-1, 2, -2, 3, -1}));
}

TEST(ScatterUnitRunAd, WhollyOutOfRangeAndWrappingRunsGiveExactGradients) {
  // Entirely below / above, and INT_MAX - 1 + iota wrapping to INT_MIN (all dropped).
  check_ad(run_case({-1, 3, 0, 0, 1}, {0, 0, INT_MAX - 1, -5, 1}));
}

const Jaxpr& backward_scan_body(const Jaxpr& j, const Eqn** scan = nullptr) {
  for (const Eqn& e : j.eqns)
    if (e.prim == Prim::scan) {
      if (scan) *scan = &e;
      return *e.params.get<JaxprPtr>("jaxpr");
    }
  throw Error("no scan in the backward jaxpr");
}

TEST(ScatterUnitRunAd, IndexRunIsRecomputedNotStackedAndNeedsNoReduction) {
  Jaxpr f = run_loss();
  VjpJaxprs v = vjp_jaxpr(f, {true, false, false, true}, {AccumKind::value, AccumKind::value});
  verify(v.forward);
  verify(v.backward);
  const Eqn* scan = nullptr;
  const Jaxpr& tb = backward_scan_body(v.backward, &scan);
  const std::string txt = print_jaxpr(v.backward);
  // No residual of the index's shape per step (i32[kSteps, 3]) reaches the backward loop.
  for (const Atom& a : scan->ins) {
    const Type t = v.backward.type_of(a);
    EXPECT_FALSE(!t.is_ref && t.array.dtype == DType::i32 && t.array.rank() == 2) << txt;
  }
  bool has_iota = false;
  for (const Eqn& q : tb.eqns) {
    EXPECT_NE(q.prim, Prim::reduce_max) << txt;
    has_iota |= q.prim == Prim::iota;
  }
  EXPECT_TRUE(has_iota) << txt;
}

}  // namespace
}  // namespace refjit
