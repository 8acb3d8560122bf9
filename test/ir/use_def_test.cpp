// The use/def view (refjit/ir/use_def.h): definitions, uses in program order, outputs.
#include "refjit/ir/use_def.h"

#include <gtest/gtest.h>

#include "refjit/ir/text.h"

namespace refjit {
namespace {

TEST(UseDef, DefinitionsAndUsesInProgramOrder) {
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[3] y:f32[3]. let
    a:f32[3] = add x y
    b:f32[3] = mul a a
    c:f32[3] = sin x
  in (b, a, 2.0:f32[]) })");
  const UseDef ud(j);
  const Var x = j.invars[0], y = j.invars[1];
  const Var a = j.eqns[0].outs[0], b = j.eqns[1].outs[0], c = j.eqns[2].outs[0];

  EXPECT_EQ(ud.def(Atom(x)), nullptr);  // a binder
  EXPECT_EQ(ud.def_index(x), -1);
  EXPECT_EQ(ud.def(Atom(a)), &j.eqns[0]);
  EXPECT_EQ(ud.def_index(b), 1);
  EXPECT_EQ(ud.def(j.outvars[2]), nullptr);  // a literal

  // x: operand 0 of eqn 0, operand 0 of eqn 2.
  ASSERT_EQ(ud.use_count(x), 2u);
  EXPECT_EQ(ud.uses(x)[0].eqn, 0u);
  EXPECT_EQ(ud.uses(x)[1].eqn, 2u);
  EXPECT_EQ(ud.uses(y)[0].operand, 1u);
  // a: twice by eqn 1, then as output 1.
  ASSERT_EQ(ud.use_count(a), 3u);
  EXPECT_EQ(ud.uses(a)[0].operand, 0u);
  EXPECT_EQ(ud.uses(a)[1].operand, 1u);
  EXPECT_TRUE(ud.uses(a)[2].is_output());
  EXPECT_EQ(ud.uses(a)[2].operand, 1u);
  EXPECT_TRUE(ud.is_output(a));
  EXPECT_TRUE(ud.is_output(b));
  EXPECT_FALSE(ud.is_output(x));
  EXPECT_EQ(ud.use_count(c), 0u);  // computed, never read
  EXPECT_FALSE(ud.is_output(c));

  // readers: eqns only, once per operand read; read_once: one read by an eqn, not returned.
  EXPECT_EQ(ud.readers(a), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(ud.readers(x), (std::vector<int32_t>{0, 2}));
  EXPECT_TRUE(ud.readers(b).empty());
  EXPECT_TRUE(ud.read_once(y));
  EXPECT_FALSE(ud.read_once(x));  // twice
  EXPECT_FALSE(ud.read_once(b));  // returned only
  EXPECT_FALSE(ud.read_once(c));  // never
}

TEST(UseDef, SubJaxprsKeepTheirOwnVariables) {
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[] xs:f32[4]. let
    c:f32[] = scan[length=4 num_consts=0 num_carry=1 reverse=False linear=(False, False)
      unroll=1 jaxpr={ lambda ; acc:f32[] v:f32[]. let
        s:f32[] = add acc v
      in (s,) }] x xs
  in (c,) })");
  const UseDef ud(j);
  // One level: x and xs are read by the scan eqn; the body's reads are not the outer ones.
  EXPECT_EQ(ud.use_count(j.invars[0]), 1u);
  EXPECT_EQ(ud.use_count(j.invars[1]), 1u);
  EXPECT_EQ(ud.uses(j.invars[1])[0].operand, 1u);
  EXPECT_TRUE(ud.is_output(j.eqns[0].outs[0]));
}

}  // namespace
}  // namespace refjit
