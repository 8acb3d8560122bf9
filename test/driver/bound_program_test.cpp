// BoundProgram (driver/bound_program.h): a program planned for its constants' values, as jit,
// `refjit run` and the Python module compile it. Constants the values let the pipeline fold
// (all-zero arrays, integer runs) are no longer taken by the code; the rest are passed ahead
// of the arguments, and the code computes what the interpreter computes on the program as
// written with every constant.
#include "driver/bound_program.h"

#include <gtest/gtest.h>

#include "backend/test_util.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"
#include "runtime/interpreter.h"

namespace refjit {
namespace {

using testing::as_array;

// (x + z) * w + r, with z all zeros and r the run 3, 4, 5, 6 in the tests below.
const char* kProgram = R"({ lambda z:f32[4] r:i32[4] w:f32[4]; x:f32[4]. let
    a:f32[4] = add x z
    c:f32[4] = convert_element_type[new_dtype=float32 weak_type=False] r
    b:f32[4] = mul a w
    d:f32[4] = add b c
  in (d,) })";

Array f32s(const std::vector<float>& v) { return Array::from_vector(v, {4}); }
Array i32s(const std::vector<int32_t>& v) { return Array::from_vector(v, {4}); }

TEST(BoundProgram, FoldedConstantsAreNotPassedAndTheCodeAgreesWithTheInterpreter) {
  const Jaxpr program = parse_jaxpr(kProgram);
  const std::vector<RtValue> consts = {f32s({0, 0, 0, 0}), i32s({3, 4, 5, 6}), f32s({1, 2, 3, 4})};
  const BoundProgram bound(program, consts, PipelineOptions{});
  // The zeros and the integer run are folded in; only w is still an input of the code.
  EXPECT_FALSE(bound.takes_const(0));
  EXPECT_FALSE(bound.takes_const(1));
  EXPECT_TRUE(bound.takes_const(2));
  EXPECT_EQ(bound.planned().jaxpr.constvars.size(), 1u);
  const std::vector<RtValue> kept = bound.kept_consts(consts);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(as_array(kept[0]), f32s({1, 2, 3, 4}));

  std::vector<RtValue> all = consts;
  all.push_back(f32s({1, 1, 1, 1}));
  const std::vector<RtValue> want = interpret(program, all);
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(as_array(want[0]), f32s({4, 6, 8, 10}));
  ASSERT_EQ(bound.inputs(all).size(), 2u);
  // Both of jit's tiers, and the options' own level.
  for (std::optional<int> level :
       {std::optional<int>{}, std::optional<int>{0}, std::optional<int>{3}}) {
    const CompiledFunction code = bound.compile(level);
    const std::vector<RtValue> got = code(bound.inputs(all));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(as_array(got[0]), as_array(want[0])) << "opt level " << level.value_or(-1);
  }
}

TEST(BoundProgram, ConstantsThatTellNothingAreAllPassed) {
  const Jaxpr program = parse_jaxpr(kProgram);
  const std::vector<RtValue> consts = {f32s({0.5f, 0, 0, 0}), i32s({3, 9, 5, 6}),
                                       f32s({1, 2, 3, 4})};
  const BoundProgram bound(program, consts, PipelineOptions{});
  for (size_t k = 0; k < consts.size(); ++k) EXPECT_TRUE(bound.takes_const(k)) << k;
  std::vector<RtValue> all = consts;
  all.push_back(f32s({1, 1, 1, 1}));
  const std::vector<RtValue> got = bound.compile()(bound.inputs(all));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(as_array(got[0]), f32s({4.5f, 11, 8, 10}));
}

TEST(BoundProgram, AWrongNumberOfValuesIsRefusedByCount) {
  const Jaxpr program = parse_jaxpr(kProgram);
  try {
    (void)BoundProgram(program, {f32s({0, 0, 0, 0})}, PipelineOptions{});
    FAIL() << "one value for three constvars was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "1 constant value(s) given for a program with 3 constvar(s)");
  }
  const BoundProgram bound(program, {f32s({1, 1, 1, 1}), i32s({1, 1, 1, 1}), f32s({1, 1, 1, 1})},
                           PipelineOptions{});
  try {
    (void)bound.inputs({f32s({1, 1, 1, 1})});
    FAIL() << "one input for three constvars was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "1 input(s) given for a program with 3 constvar(s)");
  }
}

}  // namespace
}  // namespace refjit
