// Reverse mode through scans whose carry is written by `scatter` / `scatter-add`, also on a
// flattened view of the carry (reshape -> scatter -> reshape, the seed's x.at[row, cols].set):
// gradients are exact (check_ad, also with out-of-range and duplicate indices), and the
// transposed body works on the carry cotangent ref R in place: nothing carry-sized per step.
#include <gtest/gtest.h>

#include <memory>

#include "passes/ad/vjp.h"
#include "passes/emitter.h"
#include "test/passes/ad_check.h"

namespace refjit {
namespace {

using namespace refjit::testing;

JaxprPtr body(const std::string& text) { return std::make_shared<const Jaxpr>(parse(text)); }

Params scan_params(JaxprPtr b, int64_t length, int64_t nc, int64_t ncar) {
  return Params{{"jaxpr", std::move(b)}, {"length", length},         {"reverse", false},
                {"num_consts", nc},      {"num_carry", ncar},        {"linear", NoneParam{}},
                {"unroll", int64_t{1}},  {"_split_transpose", false}};
}

ArrayType f64t(Shape s) { return ArrayType{DType::f64, std::move(s)}; }
ArrayType i32t(Shape s) { return ArrayType{DType::i32, std::move(s)}; }

Array i32a(std::vector<int32_t> v, Shape shape) {
  return Array::from_vector<int32_t>(std::move(v), std::move(shape));
}

// out = sum(scan(body, init, xs...).carry ** 2): every carry entry's cotangent is non-zero.
Jaxpr carry_loss(const char* text, const ArrayType& carry, const std::vector<ArrayType>& xs,
                 int64_t steps) {
  JaxprBuilder b;
  std::vector<Atom> ins{b.add_invar(carry)};
  for (const ArrayType& t : xs) ins.push_back(b.add_invar(t));
  std::vector<Var> outs = b.add_eqn(Prim::scan, ins, scan_params(body(text), steps, 0, 1));
  Emitter e(b);
  IntList all(carry.shape.size());
  for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
  b.set_outvars({e.reduce_sum(e.mul(outs[0], outs[0]), all)});
  return b.finish();
}

// Carry f64[3,4] written through its flattened view: c.flat[idx] = u (or += u), then a read
// of the result so a pending contribution meets the alias.
const char* kFlatScatterBody = R"({ lambda ; c:f64[3,4] i:i32[2] u:f64[2]. let
      f:f64[12] = reshape[dimensions=None new_sizes=(12,)] c
      s:f64[12] = scatter[axis=0] f i u
      c1:f64[3,4] = reshape[dimensions=None new_sizes=(3, 4)] s
      c2:f64[3,4] = mul c1 1.5:f64[]
    in (c2,) })";

const char* kFlatScatterAddBody = R"({ lambda ; c:f64[3,4] i:i32[2] u:f64[2]. let
      f:f64[12] = reshape[dimensions=None new_sizes=(12,)] c
      s:f64[12] = scatter-add[axis=0] f i u
      c1:f64[3,4] = reshape[dimensions=None new_sizes=(3, 4)] s
      c2:f64[3,4] = mul c1 1.5:f64[]
    in (c2,) })";

// The same without the mul: the scatter's result IS the carry-out (R aliased end to end), and
// a read of the old carry (dynamic_slice) is added into the update.
const char* kFlatScatterSparseBody = R"({ lambda ; c:f64[3,4] i:i32[2] u:f64[2]. let
      r:f64[1,2] = dynamic_slice[slice_sizes=(1, 2)] c 1:i32[] 1:i32[]
      r1:f64[2] = reshape[dimensions=None new_sizes=(2,)] r
      v:f64[2] = mul u r1
      f:f64[12] = reshape[dimensions=None new_sizes=(12,)] c
      s:f64[12] = scatter[axis=0] f i v
      c1:f64[3,4] = reshape[dimensions=None new_sizes=(3, 4)] s
    in (c1,) })";

const char* kFlatScatterAddSparseBody = R"({ lambda ; c:f64[3,4] i:i32[2] u:f64[2]. let
      r:f64[1,2] = dynamic_slice[slice_sizes=(1, 2)] c 1:i32[] 1:i32[]
      r1:f64[2] = reshape[dimensions=None new_sizes=(2,)] r
      v:f64[2] = mul u r1
      f:f64[12] = reshape[dimensions=None new_sizes=(12,)] c
      s:f64[12] = scatter-add[axis=0] f i v
      c1:f64[3,4] = reshape[dimensions=None new_sizes=(3, 4)] s
    in (c1,) })";

// The scatter's result is the carry-out and the update does not depend on the carry.
const char* kFlatScatterPlainBody = R"({ lambda ; c:f64[3,4] i:i32[2] u:f64[2]. let
      f:f64[12] = reshape[dimensions=None new_sizes=(12,)] c
      s:f64[12] = scatter[axis=0] f i u
      c1:f64[3,4] = reshape[dimensions=None new_sizes=(3, 4)] s
    in (c1,) })";

// Scatter on axis 1 of the carry itself (no view): indexer [:, idx] on R.
const char* kAxis1ScatterBody = R"({ lambda ; c:f64[3,4] i:i32[2] u:f64[3,2]. let
      s:f64[3,4] = scatter[axis=1] c i u
    in (s,) })";

// A rank-2 view ([2,6]) of the carry: the view cannot translate the access and copies R
// into its own buffer first (dense, still correct).
const char* kRank2ViewScatterBody = R"({ lambda ; c:f64[3,4] i:i32[2] u:f64[2,2]. let
      f:f64[2,6] = reshape[dimensions=None new_sizes=(2, 6)] c
      s:f64[2,6] = scatter[axis=1] f i u
      c1:f64[3,4] = reshape[dimensions=None new_sizes=(3, 4)] s
    in (c1,) })";

constexpr int64_t kSteps = 4;

AdCase flat_case(const char* text, Array idx, const ArrayType& ut = f64t({kSteps, 2})) {
  AdCase c{carry_loss(text, f64t({3, 4}), {i32t(idx.shape()), ut}, kSteps)};
  c.fixed = {{1, std::move(idx)}};
  return c;
}

TEST(ScatterSparseAd, FlatScatterWithUniqueInRangeIndices) {
  for (const char* text : {kFlatScatterBody, kFlatScatterSparseBody}) {
    check_ad(flat_case(text, i32a({0, 11, 5, 6, 3, 4, 10, 1}, {kSteps, 2})));
  }
}

TEST(ScatterSparseAd, FlatScatterDropsOutOfRangeUpdates) {
  // -1 and 12, 40 are dropped (no cotangent for their updates, the clamped entries 0 and 11
  // keep theirs); 0 / -5 and 11 / 12 in one step name the same clamped entry as a kept one.
  for (const char* text : {kFlatScatterBody, kFlatScatterSparseBody}) {
    check_ad(flat_case(text, i32a({-1, 12, 0, -5, 11, 40, 7, 12}, {kSteps, 2})));
  }
}

TEST(ScatterSparseAd, FlatScatterAddWithOutOfRangeAndDuplicateIndices) {
  for (const char* text : {kFlatScatterAddBody, kFlatScatterAddSparseBody}) {
    check_ad(flat_case(text, i32a({3, 3, -1, 0, 11, 12, 5, 6}, {kSteps, 2})));
  }
}

TEST(ScatterSparseAd, DuplicateScatterIndicesGiveExactCotangents) {
  // The carry's gradient: a doubly written entry is zeroed, and an out-of-range index
  // clamping onto a written entry (-3 -> 0, 14 -> 11) leaves it zero. The updates': only the
  // last update to an entry gets its cotangent (checked with and without them differentiated).
  for (const char* text : {kFlatScatterBody, kFlatScatterPlainBody}) {
    AdCase c = flat_case(text, i32a({2, 2, 0, -3, 9, 9, 11, 14}, {kSteps, 2}));
    check_ad(c);
    std::mt19937 rng(7);
    c.fixed[2] = random_array(rng, f64t({kSteps, 2}));
    check_ad(c);
  }
}

TEST(ScatterSparseAd, ScatterOnAnAxisOfTheCarry) {
  AdCase c{carry_loss(kAxis1ScatterBody, f64t({3, 4}), {i32t({kSteps, 2}), f64t({kSteps, 3, 2})},
                      kSteps)};
  c.fixed = {{1, i32a({0, 3, 4, 1, -1, 2, 3, 0}, {kSteps, 2})}};
  check_ad(c);
}

TEST(ScatterSparseAd, RankTwoViewFallsBackToACopyAndStaysCorrect) {
  AdCase c{carry_loss(kRank2ViewScatterBody, f64t({3, 4}),
                      {i32t({kSteps, 2}), f64t({kSteps, 2, 2})}, kSteps)};
  c.fixed = {{1, i32a({0, 5, 6, 1, -1, 2, 3, 0}, {kSteps, 2})}};
  check_ad(c);
}

TEST(ScatterSparseAd, ScatterTransposeOutsideALoop) {
  // Top level: the result's accumulator is a plain value; dense rule with the drop mask.
  Jaxpr f = parse(R"({ lambda ; x:f64[5] i:i32[3] u:f64[3]. let
      s:f64[5] = scatter[axis=0] x i u
      t:f64[5] = scatter-add[axis=0] s i u
      o:f64[5] = mul t t
    in (o,) })");
  AdCase c{f};
  c.fixed = {{1, i32a({4, -2, 1}, {3})}};
  check_ad(c);
}

// ------------------------------------------------------------ the seed's scatter bodies

// bench/seed_programs.h part 1 at N_ROWS=4, N_COLS=3 (carry f64[4,6]), one step:
// insert_fn(mode) then delete_fn; x.at[row, cols].set(values) is a scatter on the flattened
// carry at row * 6 + cols.
const char* kSeedScatter =
    R"({ lambda ; c:f64[4,6] row:i32[] col:i32[] drow:i32[] dcol:i32[] v:f64[]. let
      ar:i32[4] = iota[dimension=0 dtype=int32 shape=(4,) sharding=None]
      cs:i32[4] = add col ar
      vv:f64[1] = reshape[dimensions=None new_sizes=(1,)] v
      sl:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c row col
      sl1:f64[3] = reshape[dimensions=None new_sizes=(3,)] sl
      vals:f64[4] = concatenate[dimension=0] vv sl1
      f:f64[24] = reshape[dimensions=None new_sizes=(24,)] c
      r6:i32[] = mul row 6:i32[]
      fi:i32[4] = add r6 cs
      s:f64[24] = scatter[axis=0] f fi vals
      c1:f64[4,6] = reshape[dimensions=None new_sizes=(4, 6)] s
      dc1:i32[] = add dcol 1:i32[]
      u:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c1 drow dc1
      c2:f64[4,6] = dynamic_update_slice c1 u drow dcol
    in (c2,) })";

const char* kSeedCombo1 =
    R"({ lambda ; c:f64[4,6] row:i32[] col:i32[] drow:i32[] dcol:i32[] v:f64[]. let
      sl:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c row col
      col1:i32[] = add col 1:i32[]
      c1:f64[4,6] = dynamic_update_slice c sl row col1
      ar:i32[1] = iota[dimension=0 dtype=int32 shape=(1,) sharding=None]
      cs:i32[1] = add col ar
      vv:f64[1] = reshape[dimensions=None new_sizes=(1,)] v
      f:f64[24] = reshape[dimensions=None new_sizes=(24,)] c1
      r6:i32[] = mul row 6:i32[]
      fi:i32[1] = add r6 cs
      s:f64[24] = scatter[axis=0] f fi vv
      c3:f64[4,6] = reshape[dimensions=None new_sizes=(4, 6)] s
      dc1:i32[] = add dcol 1:i32[]
      u:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c3 drow dc1
      c4:f64[4,6] = dynamic_update_slice c3 u drow dcol
    in (c4,) })";

const char* kSeedCombo2 =
    R"({ lambda ; c:f64[4,6] row:i32[] col:i32[] drow:i32[] dcol:i32[] v:f64[]. let
      col1:i32[] = add col 1:i32[]
      col2:i32[] = add col 2:i32[]
      sl:f64[1,2] = dynamic_slice[slice_sizes=(1, 2)] c row col1
      c1:f64[4,6] = dynamic_update_slice c sl row col2
      el:f64[1,1] = dynamic_slice[slice_sizes=(1, 1)] c1 row col
      el1:f64[] = reshape[dimensions=None new_sizes=()] el
      e1:f64[1] = reshape[dimensions=None new_sizes=(1,)] el1
      vv:f64[1] = reshape[dimensions=None new_sizes=(1,)] v
      vals:f64[2] = concatenate[dimension=0] vv e1
      ar:i32[2] = iota[dimension=0 dtype=int32 shape=(2,) sharding=None]
      cs:i32[2] = add col ar
      f:f64[24] = reshape[dimensions=None new_sizes=(24,)] c1
      r6:i32[] = mul row 6:i32[]
      fi:i32[2] = add r6 cs
      s:f64[24] = scatter[axis=0] f fi vals
      c3:f64[4,6] = reshape[dimensions=None new_sizes=(4, 6)] s
      dc1:i32[] = add dcol 1:i32[]
      u:f64[1,3] = dynamic_slice[slice_sizes=(1, 3)] c3 drow dc1
      c4:f64[4,6] = dynamic_update_slice c3 u drow dcol
    in (c4,) })";

constexpr int64_t kSeedSteps = 6;

// loss(w, init) = sum((target - scan(body, init, rows, cols, drows, dcols, vals**w)[:, :3])**2)
Jaxpr seed_loss(const char* text) {
  JaxprBuilder b;
  Var w = b.add_invar(f64t({}));
  Var init = b.add_invar(f64t({4, 6}));
  Var target = b.add_invar(f64t({4, 3}));
  std::vector<Atom> ins{init};
  for (int k = 0; k < 4; ++k) ins.push_back(b.add_invar(i32t({kSeedSteps})));
  Var vals = b.add_invar(f64t({kSeedSteps}));
  Emitter e(b);
  ins.push_back(e.emit1(Prim::pow, {vals, e.broadcast_to(w, {kSeedSteps})}));
  std::vector<Var> outs = b.add_eqn(Prim::scan, ins, scan_params(body(text), kSeedSteps, 0, 1));
  Atom head = e.emit1(Prim::slice, {outs[0]},
                      Params{{"start_indices", IntList{0, 0}},
                             {"limit_indices", IntList{4, 3}},
                             {"strides", NoneParam{}}});
  Atom d = e.sub(target, head);
  b.set_outvars({e.reduce_sum(e.mul(d, d), {0, 1})});
  return b.finish();
}

AdCase seed_case(const char* text) {
  AdCase c{seed_loss(text)};
  c.fixed = {{3, i32a({0, 2, 3, 1, 2, 0}, {kSeedSteps})},
             {4, i32a({1, 0, 2, 2, 1, 0}, {kSeedSteps})},
             {5, i32a({2, 0, 1, 3, 2, 1}, {kSeedSteps})},
             {6, i32a({0, 2, 1, 0, 2, 1}, {kSeedSteps})}};
  c.lo = 0.2;  // vals ** w needs positive vals
  return c;
}

const Jaxpr& only_scan_body(const Jaxpr& j) {
  const Eqn* s = nullptr;
  for (const Eqn& e : j.eqns)
    if (e.prim == Prim::scan) {
      EXPECT_EQ(s, nullptr) << "more than one scan";
      s = &e;
    }
  if (!s) throw Error("no scan in the backward jaxpr");
  EXPECT_EQ(s->params.get<int64_t>("num_carry"), 0);
  return *s->params.get<JaxprPtr>("jaxpr");
}

TEST(ScatterSparseAd, SeedScatterModesGradsMatchCentralDifferences) {
  for (const char* text : {kSeedScatter, kSeedCombo1, kSeedCombo2}) check_ad(seed_case(text));
}

// The transposed loop of the seed's scatter, combo1 and combo2 bodies: every value and every
// ref access is index- or slice-sized (no reshape of R, no freeze/new_ref, no whole access):
// the flattened scatter, whose index is a unit run, reads and zeroes R[row, cols] as one flat
// run of R (get_flat_run, swap_flat_run), and no split of the index is computed; its entries
// are distinct, so no last-write mask is built either.
TEST(ScatterSparseAd, SeedScatterModesBackwardLoopIsSliceSized) {
  for (const char* text : {kSeedScatter, kSeedCombo1, kSeedCombo2}) {
    Jaxpr f = seed_loss(text);
    std::vector<bool> diff{true, true, false, false, false, false, false, false};
    VjpJaxprs v = vjp_jaxpr(f, diff, {AccumKind::value, AccumKind::value});
    verify(v.backward);
    const Jaxpr& tb = only_scan_body(v.backward);
    const std::string txt = print_jaxpr(tb);
    int scatter_swaps = 0;
    for (const Eqn& q : tb.eqns) {
      for (Var o : q.outs)
        EXPECT_LT(tb.type_of(o).array.num_elements(), 24)
            << "carry-sized `" << prim_name(q.prim) << "` in the transposed body\n"
            << txt;
      if (q.prim == Prim::reshape)  // only of index- or slice-sized cotangents
        EXPECT_LT(tb.type_of(q.ins[0]).array.num_elements(), 24) << txt;
      EXPECT_NE(q.prim, Prim::freeze) << txt;
      EXPECT_NE(q.prim, Prim::new_ref) << txt;
      EXPECT_NE(q.prim, Prim::scatter) << txt;
      EXPECT_NE(q.prim, Prim::dynamic_update_slice) << txt;
      EXPECT_NE(q.prim, Prim::div) << "the run's index is split\n" << txt;
      EXPECT_NE(q.prim, Prim::reduce_max) << "a last-write mask for distinct indices\n" << txt;
      if (q.prim == Prim::get || q.prim == Prim::swap || q.prim == Prim::addupdate)
        EXPECT_FALSE(q.params.get<Indexer>("indexer").is_whole()) << txt;
      if (q.prim == Prim::swap_flat_run) ++scatter_swaps;
    }
    EXPECT_EQ(scatter_swaps, 1) << "the scattered entries are zeroed by one swap\n" << txt;
  }
}

}  // namespace
}  // namespace refjit
