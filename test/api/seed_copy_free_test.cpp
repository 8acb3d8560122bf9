// --fail-on-copy on every seed program: the buffer plan of each program of
// grad-scan-slice-update-slow (forward and gradient, at the seed's sizes) has no whole-buffer
// copy inside a loop. This is the guarantee `refjit dump --fail-on-copy` gives users.
#include <gtest/gtest.h>

#include "bench/seed_programs.h"
#include "passes/buffers/buffer_assignment.h"
#include "refjit/refjit.h"

namespace refjit {
namespace {

using namespace refjit::seeds;

// Plans `j` with fail_on_copy; returns the copy statistics (the plan throws on a copy in a loop).
CopyStats plan_without_copies_in_loops(const ClosedJaxpr& j) {
  BufferOptions options;
  options.fail_on_copy = true;
  return assign_buffers(*j.jaxpr, options).stats();
}

class SeedPart1 : public ::testing::TestWithParam<InsertMode> {};

TEST_P(SeedPart1, ForwardAndGradHaveNoWholeCopyInTheLoop) {
  for (int64_t repeats : {1, 10}) {
    Part1Sizes sizes;
    sizes.n_row_repeats = repeats;
    auto loss = make_loss(GetParam(), make_part1_inputs(sizes), sizes);
    Value w(2.0f);
    EXPECT_EQ(plan_without_copies_in_loops(make_jaxpr(loss)(w)).whole_in_loop, 0);
    EXPECT_EQ(plan_without_copies_in_loops(make_jaxpr(grad(loss))(w)).whole_in_loop, 0)
        << mode_name(GetParam()) << " R=" << repeats;
  }
}

INSTANTIATE_TEST_SUITE_P(AllInsertModes, SeedPart1, ::testing::ValuesIn(kInsertModes),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

class SeedPart2 : public ::testing::TestWithParam<InsertFn> {};

TEST_P(SeedPart2, ForwardAndGradHaveNoWholeCopyInTheLoop) {
  Part2Sizes sizes;
  auto loss = make_part2_loss(GetParam(), make_part2_inputs(sizes), sizes);
  Value w(2.0f);
  EXPECT_EQ(plan_without_copies_in_loops(make_jaxpr(loss)(w)).whole_in_loop, 0);
  EXPECT_EQ(plan_without_copies_in_loops(make_jaxpr(grad(loss))(w)).whole_in_loop, 0)
      << fn_name(GetParam());
}

INSTANTIATE_TEST_SUITE_P(AllInsertFns, SeedPart2, ::testing::ValuesIn(kInsertFns),
                         [](const auto& info) { return std::string(fn_name(info.param)); });

TEST(SeedPart3, SlowPopAndFastPopHaveNoWholeCopyInTheLoop) {
  Part3Sizes sizes;
  Part3Inputs in = make_part3_inputs(sizes);
  for (PopFn fn : {PopFn::slow_pop, PopFn::fast_pop}) {
    auto pops = [&](Value state) {
      auto [final_state, values] = pop_scan(fn, state, in.rows, in.cols, sizes.n_cols);
      return std::make_tuple(final_state, values);
    };
    EXPECT_EQ(plan_without_copies_in_loops(make_jaxpr(pops)(in.init_state)).whole_in_loop, 0);
  }
}

}  // namespace
}  // namespace refjit
