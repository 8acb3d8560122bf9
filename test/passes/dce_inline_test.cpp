// dce and inline_jit.
#include <gtest/gtest.h>

#include <memory>

#include "passes/simplify/dce.h"
#include "passes/simplify/inline.h"
#include "test/passes/ad_test_util.h"

namespace refjit {
namespace {

using namespace refjit::testing;

TEST(Dce, RemovesUnusedPureEqnsAndUnusedOutputs) {
  Jaxpr f = parse(R"({ lambda ; a:f32[] b:f32[]. let
    c:f32[] = sin a
    d:f32[] = cos b
    e:f32[] = mul c c
  in (e, d) })");
  Jaxpr all = dce(f);
  EXPECT_EQ(all.eqns.size(), 3u);
  Jaxpr first = dce(f, {true, false});
  verify(first);
  EXPECT_EQ(first.eqns.size(), 2u);
  EXPECT_EQ(first.outvars.size(), 1u);
  EXPECT_EQ(first.invars.size(), 2u);  // inputs are kept
  auto out = run(first, {f32(1.0f), f32(2.0f)});
  EXPECT_EQ(arr(out[0]).as_double(0), static_cast<double>(std::sin(1.0f) * std::sin(1.0f)));
}

TEST(Dce, KeepsEffectsOnArgumentAndClosedOverRefs) {
  Jaxpr f = parse(R"({ lambda c:Ref{f32[]}; r:Ref{f32[]} a:f32[]. let
    b:f32[] = sin a
    r[...] += b
    d:f32[] <- c[...]
    e:f32[] = cos d
    c[...] <- e
    g:f32[] = exp a
  in () })");
  Jaxpr d = dce(f);
  EXPECT_EQ(d.eqns.size(), 5u) << print_jaxpr(d);  // only `exp` goes
  EXPECT_EQ(count_prim(print_jaxpr(d), "exp"), 0);
}

TEST(Dce, DropsEffectsOnInternalRefsNeverReadAgain) {
  Jaxpr f = parse(R"({ lambda ; a:f32[]. let
    r:Ref{f32[]} = new_ref a
    b:f32[] = sin a
    r[...] += b
    s:Ref{f32[]} = new_ref a
    s[...] += b
    c:f32[] = freeze s
  in (c,) })");
  Jaxpr d = dce(f);
  verify(d);
  // r is written but never read: its new_ref and addupdate go; s is read by freeze.
  EXPECT_EQ(d.eqns.size(), 4u) << print_jaxpr(d);
  EXPECT_EQ(count_prim(print_jaxpr(d), "new_ref"), 1);
  auto out = run(d, {f32(1.0f)});
  EXPECT_EQ(arr(out[0]).as_double(0), static_cast<double>(1.0f + std::sin(1.0f)));
}

TEST(Dce, WriteBeforeALaterReadOfAnInternalRefIsKept) {
  Jaxpr f = parse(R"({ lambda ; a:f32[]. let
    r:Ref{f32[]} = new_ref 0.0:f32[]
    r[...] <- a
    b:f32[] <- r[...]
  in (b,) })");
  EXPECT_EQ(dce(f).eqns.size(), 3u);
}

TEST(Dce, PrunesJitBodyOutputsButKeepsItsRefEffects) {
  JaxprBuilder b;
  Var r = b.add_invar(Type::ref(ArrayType{DType::f32, {}}));
  Var a = b.add_invar(ArrayType{DType::f32, {}});
  Jaxpr body = parse(R"({ lambda ; r:Ref{f32[]} a:f32[]. let
    s:f32[] = sin a
    r[...] += s
    c:f32[] = cos a
  in (s, c) })");
  std::vector<Var> outs =
      b.add_eqn(Prim::jit, {r, a},
                Params{{"name", std::string("g")}, {"jaxpr", std::make_shared<const Jaxpr>(body)}});
  b.set_outvars({outs[0]});
  Jaxpr d = dce(b.finish());
  verify(d);
  ASSERT_EQ(d.eqns.size(), 1u);
  const Jaxpr& inner = *d.eqns[0].params.get<JaxprPtr>("jaxpr");
  EXPECT_EQ(inner.outvars.size(), 1u);
  EXPECT_EQ(inner.eqns.size(), 2u);  // cos is gone, the addupdate stays
  // A jit whose outputs are all unused is kept for its effect on the ref argument.
  Jaxpr none = dce(d, {false});
  ASSERT_EQ(none.eqns.size(), 1u);
  EXPECT_EQ(none.eqns[0].params.get<JaxprPtr>("jaxpr")->eqns.size(), 2u);
}

// Inside a scan's body and a cond's branches, unread pure eqns go; the signatures, the values
// and the effects on the body's refs stay.
TEST(Dce, PrunesScanBodiesAndCondBranches) {
  Jaxpr f = parse(R"({ lambda ; r:Ref{f32[]} a:f32[] xs:f32[3] p:i32[]. let
    c:f32[] ys:f32[3] = scan[length=3 num_consts=1 num_carry=1 reverse=False
      linear=(False, False, False) unroll=1 jaxpr={ lambda ; q:Ref{f32[]} h:f32[] x:f32[]. let
        dead:f32[] = sin x
        n:f32[] = mul h x
        q[...] += x
      in (n, n) }] r a xs
    d:f32[] = cond[branches=(
      { lambda ; u:f32[]. let w:f32[] = exp u v:f32[] = neg u in (v,) }
      { lambda ; u:f32[]. let v:f32[] = cos u in (v,) })] p c
  in (d, ys) })");
  Jaxpr pruned = dce(f);
  verify(pruned);
  const Jaxpr& body = *pruned.eqns[0].params.get<JaxprPtr>("jaxpr");
  ASSERT_EQ(body.eqns.size(), 2u);
  EXPECT_EQ(body.eqns[0].prim, Prim::mul);
  EXPECT_EQ(body.eqns[1].prim, Prim::addupdate);
  const JaxprList& branches = pruned.eqns[1].params.get<JaxprList>("branches");
  EXPECT_EQ(branches.at(0)->eqns.size(), 1u);
  EXPECT_EQ(branches.at(0)->eqns[0].prim, Prim::neg);
  auto args = [] {
    return std::vector<RtValue>{ref_of(f32(0.5f)), f32(2.0f),
                                Array::from_vector<float>({1.0f, 2.0f, 3.0f}, {3}), i32(0)};
  };
  std::vector<RtValue> a1 = args(), a2 = args();
  std::vector<RtValue> want = run(f, a1), got = run(pruned, a2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(arr(got[0]).as_double(0), arr(want[0]).as_double(0));
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(arr(got[1]).as_double(i), arr(want[1]).as_double(i));
  EXPECT_EQ(std::get<RefBufferPtr>(a2[0])->value().as_double(0), 6.5);
}

TEST(Dce, DropsScanCarriesAndOutputsNobodyReads) {
  // Carry `h` is only recomputed from itself and its final value is unused; carry `k` feeds
  // the ys output `n` nobody reads, so it goes too once `n` is gone. Carry `m` is read.
  Jaxpr f = parse(R"({ lambda ; a:f32[] xs:f32[3]. let
    hf:f32[] kf:f32[] mf:f32[] n:f32[3] o:f32[3] = scan[length=3 num_consts=0 num_carry=3
      reverse=False linear=(False, False, False, False) unroll=1
      jaxpr={ lambda ; h:f32[] k:f32[] m:f32[] x:f32[]. let
        h2:f32[] = sin h
        k2:f32[] = add k x
        m2:f32[] = mul m x
      in (h2, k2, m2, k2, m2) }] a a a xs
  in (mf, o) })");
  Jaxpr pruned = dce(f);
  verify(pruned);
  const Eqn& scan = pruned.eqns.at(0);
  EXPECT_EQ(scan.params.get<int64_t>("num_carry"), 1);
  EXPECT_EQ(scan.ins.size(), 2u);
  EXPECT_EQ(scan.outs.size(), 2u);
  EXPECT_EQ(scan.params.get<IntList>("linear").size(), 2u);
  const Jaxpr& body = *scan.params.get<JaxprPtr>("jaxpr");
  ASSERT_EQ(body.eqns.size(), 1u) << print_jaxpr(pruned);
  EXPECT_EQ(body.eqns[0].prim, Prim::mul);
  const std::vector<RtValue> args = {f32(2.0f), Array::from_vector<float>({1.0f, 2.0f, 3.0f}, {3})};
  std::vector<RtValue> want = run(f, args), got = run(pruned, args);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(arr(got[0]).as_double(0), 12.0);
  EXPECT_EQ(arr(got[0]).as_double(0), arr(want[0]).as_double(0));
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(arr(got[1]).as_double(i), arr(want[1]).as_double(i));
}

TEST(Inline, NestedJitsBecomeFlatEqns) {
  Jaxpr inner = parse("{ lambda ; x:f32[]. let y:f32[] = sin x in (y,) }");
  JaxprBuilder mid;
  Var m = mid.add_invar(ArrayType{DType::f32, {}});
  Var m1 = mid.add_eqn1(
      Prim::jit, {m},
      Params{{"name", std::string("inner")}, {"jaxpr", std::make_shared<const Jaxpr>(inner)}});
  Var m2 = mid.add_eqn1(Prim::mul, {m1, m});
  mid.set_outvars({m2});
  JaxprBuilder outer;
  Var a = outer.add_invar(ArrayType{DType::f32, {}});
  Var o = outer.add_eqn1(
      Prim::jit, {a},
      Params{{"name", std::string("mid")}, {"jaxpr", std::make_shared<const Jaxpr>(mid.finish())}});
  outer.set_outvars({o});
  Jaxpr f = outer.finish();
  Jaxpr flat = inline_jit(f);
  verify(flat);
  ASSERT_EQ(flat.eqns.size(), 2u);
  EXPECT_EQ(flat.eqns[0].prim, Prim::sin);
  EXPECT_EQ(flat.eqns[1].prim, Prim::mul);
  EXPECT_EQ(arr(run(flat, {f32(0.5f)})[0]), arr(run(f, {f32(0.5f)})[0]));
}

}  // namespace
}  // namespace refjit
