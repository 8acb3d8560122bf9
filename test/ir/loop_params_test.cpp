// The typed views of the loop primitives' params (ir/loop_params.h).
#include "ir/loop_params.h"

#include <gtest/gtest.h>

#include "refjit/ir/error.h"
#include "refjit/ir/text.h"

namespace refjit {
namespace {

TEST(LoopParams, ScanSplitsItsOperands) {
  const Jaxpr j = parse_jaxpr(R"({ lambda ; w:f32[] x:f32[] xs:f32[4] ys:f32[4]. let
    c:f32[] d:f32[4] = scan[length=4 num_consts=1 num_carry=1 reverse=True linear=None
      unroll=2 jaxpr={ lambda ; k:f32[] acc:f32[] v:f32[] u:f32[]. let
        s:f32[] = mul k v
        t:f32[] = add acc s
        o:f32[] = add t u
      in (t, o) }] w x xs ys
  in (c, d) })");
  const Eqn& e = j.eqns[0];
  const ScanParams p = ScanParams::of(e);
  EXPECT_EQ(p.length, 4);
  EXPECT_EQ(p.num_consts, 1u);
  EXPECT_EQ(p.num_carry, 1u);
  EXPECT_TRUE(p.reverse);
  EXPECT_EQ(p.unroll, 2);
  EXPECT_EQ(p.body, e.params.get<JaxprPtr>("jaxpr").get());
  ASSERT_EQ(p.consts(e).size(), 1u);
  EXPECT_EQ(p.consts(e)[0], Atom(j.invars[0]));
  ASSERT_EQ(p.carries(e).size(), 1u);
  EXPECT_EQ(p.carries(e)[0], Atom(j.invars[1]));
  ASSERT_EQ(p.xs(e).size(), 2u);
  EXPECT_EQ(p.xs(e)[1], Atom(j.invars[3]));
  EXPECT_EQ(p.first_xs(), 2u);
}

TEST(LoopParams, WhileSplitsItsOperands) {
  const Jaxpr j = parse_jaxpr(R"({ lambda ; n:i32[] a:f32[] x:f32[]. let
    r:f32[] = while[cond_nconsts=1 body_nconsts=1
      cond_jaxpr={ lambda ; m:i32[] y:f32[]. let
        q:f32[] = convert_element_type[new_dtype=float32 weak_type=False] m
        b:bool[] = lt y q
      in (b,) }
      body_jaxpr={ lambda ; s:f32[] y:f32[]. let
        z:f32[] = add y s
      in (z,) }] n a x
  in (r,) })");
  const Eqn& e = j.eqns[0];
  const WhileParams p = WhileParams::of(e);
  EXPECT_EQ(p.cond_nconsts, 1u);
  EXPECT_EQ(p.body_nconsts, 1u);
  EXPECT_EQ(p.cond, e.params.get<JaxprPtr>("cond_jaxpr").get());
  EXPECT_EQ(p.body, e.params.get<JaxprPtr>("body_jaxpr").get());
  EXPECT_EQ(p.cond_consts(e)[0], Atom(j.invars[0]));
  EXPECT_EQ(p.body_consts(e)[0], Atom(j.invars[1]));
  ASSERT_EQ(p.carries(e).size(), 1u);
  EXPECT_EQ(p.carries(e)[0], Atom(j.invars[2]));
}

TEST(LoopParams, MalformedEqnsAreErrorsNamingTheParam) {
  Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[] xs:f32[4]. let
    c:f32[] = scan[length=4 num_consts=0 num_carry=1 reverse=False linear=None unroll=1
      jaxpr={ lambda ; acc:f32[] v:f32[]. let
        s:f32[] = add acc v
      in (s,) }] x xs
  in (c,) })");
  Eqn e = j.eqns[0];
  EXPECT_THROW(WhileParams::of(e), Error);  // not a while
  e.params.set("num_carry", int64_t{3});
  try {
    ScanParams::of(e);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("num_carry=3"), std::string::npos) << err.what();
  }
  e.params.set("num_carry", int64_t{-1});
  try {
    ScanParams::of(e);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("'num_carry' is negative"), std::string::npos)
        << err.what();
  }
}

}  // namespace
}  // namespace refjit
