// Element loops chaining transcendental functions split into tiles and stages
// (backend/chain_fission.h): which loops are split, into how many stages, and that
// the split code computes what the interpreter and the unsplit code compute, on threads,
// serially and stand-alone, for lengths that are and are not multiples of the tile.
#include "backend/chain_fission.h"

#include <fmt/format.h>

#include "test_util.h"

namespace refjit::testing {
namespace {

const CompileOptions kWhole{.chain_fission = false};

// Stage buffers in the emitted MLIR: one per value a later stage reads back.
size_t stage_buffers(const Jaxpr& j, const CompileOptions& o = {}) {
  return count(emit_mlir(with_fusion(j), o), "memref.alloca()");
}

Jaxpr unary_chain(const std::string& shape, const std::vector<std::string>& fns, bool summed) {
  std::string body;
  std::string last = "x";
  for (size_t k = 0; k < fns.size(); ++k) {
    const std::string v = fmt::format("v{}", k);
    body += fmt::format("    {}:f32{} = {} {}\n", v, shape, fns[k], last);
    last = v;
  }
  if (summed) {
    const auto rank = std::count(shape.begin(), shape.end(), ',') + 1;
    std::string axes = "(";
    for (int d = 0; d < rank; ++d) axes += fmt::format("{}, ", d);
    axes.resize(axes.size() - 2);
    axes += rank == 1 ? ",)" : ")";
    body += fmt::format("    s:f32[] = reduce_sum[axes={}] {}\n", axes, last);
    last = "s";
  }
  return parse_jaxpr(fmt::format("{{ lambda ; x:f32{}. let\n{}  in ({},) }}", shape, body, last));
}

TEST(ChainFission, SplitsOneLoopPerStageOfTheDeepestChain) {
  EXPECT_EQ(stage_buffers(unary_chain("[1000]", {"exp"}, false)), 0u);
  EXPECT_EQ(stage_buffers(unary_chain("[1000]", {"exp", "sqrt", "neg"}, false)), 0u);
  // exp, then tanh: one buffer carries exp's values to tanh's loop.
  EXPECT_EQ(stage_buffers(unary_chain("[1000]", {"exp", "tanh"}, false)), 1u);
  // Three stages, two buffers; cheap ops in between do not count as stages.
  EXPECT_EQ(stage_buffers(unary_chain("[1000]", {"exp", "neg", "tanh", "log1p"}, true)), 2u);
  EXPECT_EQ(stage_buffers(unary_chain("[1000]", {"exp", "tanh"}, false), kWhole), 0u);
  // refjit's own f32 sin and cos (a polynomial the lowering writes, not a math op) are stages.
  EXPECT_EQ(stage_buffers(unary_chain("[1000]", {"exp", "sin"}, false)), 1u);
  EXPECT_EQ(stage_buffers(unary_chain("[1000]", {"sin", "cos", "exp"}, true)), 2u);
  EXPECT_EQ(stage_buffers(unary_chain("[1000]", {"sin", "neg"}, false)), 0u);
  // With libm's sin (exact math) the loop calls a function and stays whole.
  EXPECT_EQ(stage_buffers(unary_chain("[1000]", {"exp", "sin"}, false), {.exact_math = true}), 0u);

  // The peer benchmark's chain: exp and log1p (one stage, two buffers), then tanh, summed.
  const Jaxpr chain = parse_jaxpr(R"({ lambda ; a:f32[5000]. let
    b:f32[5000] = neg a
    c:f32[5000] = mul b a
    d:f32[5000] = exp c
    e:f32[5000] = mul d 2.0:f32[]
    f:f32[5000] = mul a a
    g:f32[5000] = log1p f
    h:f32[5000] = add e g
    i:f32[5000] = tanh h
    j:f32[] = reduce_sum[axes=(0,)] i
  in (j,) })");
  const std::string mlir = emit_mlir(with_fusion(chain));
  EXPECT_EQ(count(mlir, "memref.alloca()"), 2u);
  EXPECT_EQ(count(mlir, fmt::format("memref.alloca() : memref<{}xf32>", backend::kChainTile)), 2u);
  EXPECT_EQ(count(mlir, "math.exp"), 1u) << mlir;
  EXPECT_EQ(count(mlir, "math.tanh"), 1u) << mlir;
}

TEST(ChainFission, LeavesLoopsWhoseFirstStageCannotRunAhead) {
  // The chain's input is also the loop's output (a ref updated in place): its loads would
  // move ahead of the stores of the same tile.
  const Jaxpr in_place = parse_jaxpr(R"({ lambda ; r:Ref{f32[1000]}. let
    x:f32[1000] <- r[...]
    y:f32[1000] = exp x
    z:f32[1000] = tanh y
    r[...] <- z
  in () })");
  EXPECT_EQ(stage_buffers(in_place), 0u);
  Array x = random_array(at(DType::f32, {1000}), 5);
  expect_matches_interpreter(in_place, {ref_of(x)}, 1e-6);
}

TEST(ChainFission, SplitLoopsComputeWhatTheInterpreterAndTheWholeLoopCompute) {
  for (const char* shape : {"[100]", "[256]", "[1000]", "[37,300]", "[200003]"}) {
    for (bool summed : {false, true}) {
      const Jaxpr j = unary_chain(shape, {"exp", "tanh", "sin", "log1p", "cos"}, summed);
      SCOPED_TRACE(print_jaxpr(j));
      EXPECT_GE(stage_buffers(j), 2u);
      const Shape s = j.type_of(j.invars[0]).array.shape;
      const Array x = random_array(at(DType::f32, s), 7);
      // A sum of 200,003 positive terms added one by one in f32 (the interpreter) is off by
      // about 1e-3 of itself; the compiled code sums blocks, split or whole.
      check_everywhere(j, {x}, summed ? 2e-3 : 1e-5);
      std::vector<RtValue> a1{x}, a2{x};
      const Array split = as_array(compile_native(with_fusion(j))(a1)[0]);
      const Array whole = as_array(compile_native(with_fusion(j), kWhole)(a2)[0]);
      if (summed)
        expect_close(split, whole, 1e-5, "split vs whole");
      else  // the same operations per element: the same bits
        expect_same_bits(split, whole, "split vs whole");
    }
  }
}

TEST(ChainFission, TwoInputsAndValuesReadByLaterStages) {
  // d = exp(x) is read by tanh's stage and by the final product: it crosses in a buffer; y
  // is loaded again by the later stage.
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[3000] y:f32[3000]. let
    d:f32[3000] = exp x
    e:f32[3000] = mul d y
    t:f32[3000] = tanh e
    u:f32[3000] = mul t d
    w:f32[3000] = add u y
  in (w,) })");
  EXPECT_EQ(stage_buffers(j), 1u);
  check_everywhere(
      j, {random_array(at(DType::f32, {3000}), 8), random_array(at(DType::f32, {3000}), 9)}, 1e-6);
}

}  // namespace
}  // namespace refjit::testing
