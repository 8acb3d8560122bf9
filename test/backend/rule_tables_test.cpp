// Every rule table agrees with primitives.def: each primitive has a type rule, an interpreter
// rule and a lowering, and exactly the JVP / transpose rules its AD column declares.
#include "backend/rule_tables.h"

#include <gtest/gtest.h>

#include "passes/buffers/buffer_rules.h"

namespace refjit {
namespace {

TEST(RuleTables, EveryPrimitiveHasTheRulesPrimitivesDefDeclares) {
  std::vector<std::string> problems = rule_table_problems();
  std::string text;
  for (const std::string& p : problems) text += p + "\n";
  EXPECT_TRUE(problems.empty()) << text;
  EXPECT_NO_THROW(check_rule_tables());
}

TEST(RuleTables, TheAdColumnIsWhatTheTablesHold) {
  // One of each kind, so a column shifted by one line would show.
  EXPECT_EQ(prim_info(Prim::add).ad_rules, AdRules::linear);
  EXPECT_TRUE(rules_of(Prim::add).transpose);
  EXPECT_EQ(prim_info(Prim::exp).ad_rules, AdRules::jvp);
  EXPECT_TRUE(rules_of(Prim::exp).jvp);
  EXPECT_FALSE(rules_of(Prim::exp).transpose);
  EXPECT_EQ(prim_info(Prim::axis_index).ad_rules, AdRules::no_ad);
  EXPECT_FALSE(rules_of(Prim::axis_index).jvp);
}

TEST(RuleTables, LinearizeHasRulesOfItsOwnOnlyWhereTheJvpFallbackIsNotEnough) {
  // passes/ad/linearize_rules.h: cond, while and custom_vjp_call replace their JVP rule while
  // linearizing; scan and jit are split (or refused) by partial evaluation. Every other
  // primitive goes through its JVP rule.
  for (Prim p : {Prim::cond, Prim::while_, Prim::custom_vjp_call, Prim::scan, Prim::jit}) {
    EXPECT_TRUE(rules_of(p).linearize) << prim_name(p);
    EXPECT_TRUE(rules_of(p).jvp) << prim_name(p);
  }
  for (Prim p : {Prim::sin, Prim::dot_general, Prim::swap, Prim::linear_solve})
    EXPECT_FALSE(rules_of(p).linearize) << prim_name(p);
}

TEST(RuleTables, ElementwisePrimitivesAreKnownAsSuchWithoutALineElsewhere) {
  // primitives.def's elementwise kind: vmap batches them as they are, buffer assignment lets them
  // overwrite a dead operand of the result's type (identities are views of it instead).
  for (Prim p : {Prim::neg, Prim::tanh, Prim::convert_element_type, Prim::lt, Prim::select_n}) {
    EXPECT_TRUE(prim_info(p).elementwise) << prim_name(p);
    EXPECT_EQ(buffer_behaviour(p), BufferBehaviour::elementwise) << prim_name(p);
  }
  EXPECT_EQ(buffer_behaviour(Prim::copy), BufferBehaviour::view);
  for (Prim p : {Prim::broadcast_in_dim, Prim::reduce_sum, Prim::dot_general, Prim::psum})
    EXPECT_FALSE(prim_info(p).elementwise) << prim_name(p);
}

}  // namespace
}  // namespace refjit
