// jit's specialisation on the seed's programs: with N_ROW_REPEATS > 1 only the first N_ROWS
// rows of the state are ever indexed, so the forward scan's carry and the gradient's cotangent
// ref are trimmed to them (passes/simplify/trim_rows.h); the scatter modes' index runs are windows
// before autodiff (passes/simplify/range_simplify.h), so their gradients have no index arithmetic
// on a flattened cotangent. The specialised programs compute exactly what the originals do
// (interpreter) and what jit computes natively.
#include <gtest/gtest.h>

#include <regex>

#include "bench/seed_programs.h"
#include "passes/simplify/range_simplify.h"
#include "passes/simplify/trim_rows.h"
#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"
#include "refjit/refjit.h"
#include "runtime/interpreter.h"

namespace refjit {
namespace {

using namespace refjit::seeds;

// The ranges jit passes: min and max of every integer constant.
std::vector<std::optional<IntRange>> const_ranges(const ClosedJaxpr& j) {
  std::vector<std::optional<IntRange>> out;
  for (const Operand& c : j.consts) out.push_back(element_range(std::get<Value>(c).array()));
  return out;
}

std::vector<RtValue> runtime_args(const ClosedJaxpr& j, float w) {
  std::vector<RtValue> args;
  for (const Operand& c : j.consts) args.push_back(std::get<Value>(c).array());
  args.push_back(Array::scalar(w));
  return args;
}

class SeedTrimRows : public ::testing::TestWithParam<InsertMode> {};

TEST_P(SeedTrimRows, ForwardAndGradAreTrimmedToTheIndexedRowsWithIdenticalResults) {
  Part1Sizes sizes{.n_steps = 40, .n_rows = 6, .n_cols = 8, .n_row_repeats = 4};
  auto loss = make_loss(GetParam(), make_part1_inputs(sizes), sizes);
  Value w(2.0f);
  for (bool with_grad : {false, true}) {
    SCOPED_TRACE(with_grad ? "grad" : "forward");
    ClosedJaxpr j = with_grad ? make_jaxpr(grad(loss))(w) : make_jaxpr(loss)(w);
    // Every mode's scatter writes a run inside one row: grad differentiates windows.
    const std::string traced = print_jaxpr(*j.jaxpr);
    if (with_grad) {
      EXPECT_EQ(traced.find("scatter"), std::string::npos) << traced;
      EXPECT_EQ(traced.find("gather"), std::string::npos) << traced;
    }
    int trimmed = 0, simplified = 0;
    Jaxpr t = trim_untouched_rows(*j.jaxpr, const_ranges(j), &trimmed);
    verify(t);
    t = simplify_with_ranges(t, const_ranges(j), &simplified);
    verify(t);
    // The scatter modes' gradients read and zero their run of the cotangent as a window.
    if (with_grad && GetParam() != InsertMode::slice1 && GetParam() != InsertMode::slice2)
      EXPECT_FALSE(std::regex_search(print_jaxpr(t), std::regex(R"(i32\[\d+\] = div)")))
          << print_jaxpr(t);
    // The scan carry; with grad also the cotangent ref.
    EXPECT_EQ(trimmed, with_grad ? 2 : 1);
    const std::vector<RtValue> args = runtime_args(j, 2.0f);
    std::vector<RtValue> want = interpret(*j.jaxpr, args);
    std::vector<RtValue> got = interpret(t, args);
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(std::get<Array>(want[0]), std::get<Array>(got[0]));
    // jit (which trims) agrees with the interpreter bit for bit.
    Value native = with_grad ? jit(grad(loss), {.backend = Backend::native, .name = "g"})(w)
                             : jit(loss, {.backend = Backend::native, .name = "f"})(w);
    EXPECT_EQ(native.array(), std::get<Array>(want[0]));
  }
}

INSTANTIATE_TEST_SUITE_P(AllInsertModes, SeedTrimRows, ::testing::ValuesIn(kInsertModes),
                         [](const auto& info) { return std::string(mode_name(info.param)); });

}  // namespace
}  // namespace refjit
