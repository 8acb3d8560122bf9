// The one recogniser of index runs (passes/simplify/unit_run.h): iota plus or minus scalars,
// whether the scalars are rank-0 operands or broadcasts of them, and nothing else.
#include "passes/simplify/unit_run.h"

#include <gtest/gtest.h>

#include "refjit/ir/text.h"

namespace refjit {
namespace {

// The run named `r` in `text`'s top-level eqns.
std::optional<UnitRun> run_named(const Jaxpr& j, const std::string& name) {
  for (const Eqn& e : j.eqns)
    for (Var v : e.outs)
      if (j.info(v).name == name) return as_unit_run(j, Atom(v));
  ADD_FAILURE() << "no value named " << name;
  return std::nullopt;
}

TEST(UnitRun, IotaPlusAndMinusScalarsInEitherSpelling) {
  const Jaxpr j = parse_jaxpr(R"({ lambda ; r:i32[] c:i32[]. let
      i:i32[4] = iota[dimension=0 dtype=int32 shape=(4,) sharding=None]
      w:i32[] = mul r 8:i32[]
      a:i32[4] = add w i
      b:i32[4] = broadcast_in_dim[broadcast_dimensions=() shape=(4,) sharding=None] c
      s:i32[4] = add a b
      t:i32[4] = sub s 1:i32[]
      neg:i32[4] = sub c i
      twice:i32[4] = add i i
      back:i32[4] = sub twice i
    in (t, neg, back) })");
  std::optional<UnitRun> t = run_named(j, "t");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->length, 4);
  ASSERT_EQ(t->terms.size(), 3u);  // w, c (through its broadcast), 1 subtracted
  EXPECT_FALSE(t->terms[0].negated);
  EXPECT_FALSE(t->terms[1].negated);
  EXPECT_TRUE(t->terms[2].negated);
  EXPECT_EQ(j.info(as_var(t->terms[1].scalar)).name, "c");
  EXPECT_FALSE(run_named(j, "neg")) << "c - iota runs downwards";
  EXPECT_FALSE(run_named(j, "twice")) << "iota + iota steps by 2";
  EXPECT_TRUE(run_named(j, "back")) << "2 iota - iota is iota";
}

TEST(UnitRun, InvarsAndOtherVectorsAreNotKnownRuns) {
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:i32[4] f:f32[4]. let
      y:i32[4] = add x 1:i32[]
      i:i32[2,2] = iota[dimension=0 dtype=int32 shape=(2, 2) sharding=None]
    in (y, i) })");
  EXPECT_FALSE(as_unit_run(j, Atom(j.invars[0])));
  EXPECT_FALSE(run_named(j, "y"));
  EXPECT_FALSE(run_named(j, "i"));
}

}  // namespace
}  // namespace refjit
