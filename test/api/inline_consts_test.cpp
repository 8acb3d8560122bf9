// jit folds closed-over all-zero arrays and integer runs into the compiled program
// (passes/simplify/inline_consts.h): results are unchanged, the folded array is no longer passed,
// and functions closing over different zero arrays of one shape share compiled code while other
// arrays are passed.
#include "passes/simplify/inline_consts.h"

#include <gtest/gtest.h>

#include "driver/pipeline.h"
#include "refjit/ir/text.h"
#include "refjit/refjit.h"
#include "runtime/interpreter.h"

namespace refjit {
namespace {

constexpr ConstFold kKeep{};
constexpr ConstFold kZeros{ConstFold::Kind::zeros};

JitOptions native_fast(const char* name) {
  return JitOptions{.backend = Backend::native, .tier = Tier::fast, .name = name};
}

TEST(InlineZeroConsts, AZeroConstvarBecomesABroadcastOfZero) {
  Jaxpr j = parse_jaxpr(R"({ lambda a:f32[3] b:i32[2]; x:f32[3]. let
    y:f32[3] = add a x
  in (y, b) })");
  Jaxpr k = inline_known_consts(j, {kZeros, kKeep});
  EXPECT_EQ(print_jaxpr(k), print_jaxpr(parse_jaxpr(R"({ lambda b:i32[2]; x:f32[3]. let
    a:f32[3] = broadcast_in_dim[broadcast_dimensions=() shape=(3,) sharding=None] 0.0:f32[]
    y:f32[3] = add a x
  in (y, b) })")));
  std::vector<RtValue> out = interpret(
      k, {Array::from_vector<int32_t>({4, 5}, {2}), Array::from_vector<float>({1, 2, 3}, {3})});
  EXPECT_EQ(std::get<Array>(out.at(0)), Array::from_vector<float>({1, 2, 3}, {3}));
}

TEST(InlineConsts, AnIntegerRunBecomesAnIotaPlusItsStart) {
  Jaxpr j = parse_jaxpr(R"({ lambda a:i32[4] b:i64[3]; x:i32[4]. let
    y:i32[4] = add a x
  in (y, b) })");
  Jaxpr k = inline_known_consts(
      j, {ConstFold{ConstFold::Kind::run, 5}, ConstFold{ConstFold::Kind::run, 0}});
  EXPECT_TRUE(k.constvars.empty());
  EXPECT_EQ(print_jaxpr(k), print_jaxpr(parse_jaxpr(R"({ lambda ; x:i32[4]. let
    c:i32[4] = iota[dimension=0 dtype=int32 shape=(4,)]
    a:i32[4] = add c 5:i32[]
    b:i64[3] = iota[dimension=0 dtype=int64 shape=(3,)]
    y:i32[4] = add a x
  in (y, b) })")));
  std::vector<RtValue> out = interpret(k, {Array::from_vector<int32_t>({1, 1, 1, 1}, {4})});
  EXPECT_EQ(std::get<Array>(out.at(0)), Array::from_vector<int32_t>({6, 7, 8, 9}, {4}));
  EXPECT_EQ(std::get<Array>(out.at(1)), Array::from_vector<int64_t>({0, 1, 2}, {3}));
}

// How autodiff is given the folds (windows_before_autodiff): the program takes the same
// constants, and its readers read the folded values.
TEST(InlineConsts, KeptBindersStayUnreadAndReadersReadTheFoldedValues) {
  Jaxpr j = parse_jaxpr(R"({ lambda a:i32[4] b:f32[2] c:i32[2]; x:i32[4]. let
    y:i32[4] = add a x
  in (y, b, c) })");
  Jaxpr k = inline_known_consts(j, {ConstFold{ConstFold::Kind::run, 5}, kZeros, kKeep},
                                /*keep_binders=*/true);
  EXPECT_EQ(print_jaxpr(k),
            print_jaxpr(parse_jaxpr(R"({ lambda a:i32[4] b:f32[2] c:i32[2]; x:i32[4]. let
    d:i32[4] = iota[dimension=0 dtype=int32 shape=(4,)]
    e:i32[4] = add d 5:i32[]
    f:f32[2] = broadcast_in_dim[broadcast_dimensions=() shape=(2,) sharding=None] 0.0:f32[]
    y:i32[4] = add e x
  in (y, f, c) })")));
  std::vector<RtValue> out = interpret(
      k,
      {Array::from_vector<int32_t>({9, 9, 9, 9}, {4}), Array::from_vector<float>({3, 4}, {2}),
       Array::from_vector<int32_t>({1, 2}, {2}), Array::from_vector<int32_t>({1, 1, 1, 1}, {4})});
  EXPECT_EQ(std::get<Array>(out.at(0)), Array::from_vector<int32_t>({6, 7, 8, 9}, {4}));
  EXPECT_EQ(std::get<Array>(out.at(1)), Array::from_vector<float>({0, 0}, {2}));
}

TEST(InlineConsts, KnownConstsTellZerosRunsAndNeither) {
  KnownConsts k = KnownConsts::of(
      {Array::from_vector<int32_t>({3, 4, 5}, {3}), Array::from_vector<int32_t>({3, 5, 6}, {3}),
       Array::from_vector<float>({0, 0}, {2}), Array::from_vector<int32_t>({7}, {1})});
  ASSERT_EQ(k.fold.size(), 4u);
  EXPECT_EQ(k.fold[0].kind, ConstFold::Kind::run);
  EXPECT_EQ(k.fold[0].run_start, 3);
  EXPECT_EQ(k.fold[1].kind, ConstFold::Kind::keep);
  EXPECT_EQ(k.fold[2].kind, ConstFold::Kind::zeros);
  EXPECT_EQ(k.fold[3].kind, ConstFold::Kind::keep);  // one element: nothing to gain
}

TEST(InlineZeroConsts, RefConstvarsAreKept) {
  Jaxpr j = parse_jaxpr(R"({ lambda r:Ref{f32[3]}; . let
    y:f32[3] <- r[...]
  in (y,) })");
  EXPECT_EQ(inline_known_consts(j, {kZeros}).constvars.size(), 1u);
  EXPECT_THROW(inline_known_consts(j, {}), Error);
}

TEST(JitZeroConsts, ClosedOverZerosGiveTheSameResultsAsTheInterpreter) {
  Value z = zeros({2, 3});
  Value o = ones({2, 3});
  auto f = [&](Value x) { return (x + z) * o - z; };
  Value x = array<float>({1, -2, 3, -4, 5, -0.0f}, {2, 3});
  Value native = jit(f, native_fast("zeros_native"))(x);
  Value interp = jit(f, {.backend = Backend::interpreter, .name = "zeros_interp"})(x);
  EXPECT_EQ(native.array(), interp.array());
  EXPECT_EQ(native.array(), Array::from_vector<float>({1, -2, 3, -4, 5, 0.0f}, {2, 3}));
}

TEST(JitZeroConsts, FunctionsClosingOverDifferentZeroArraysShareCode) {
  clear_compile_cache();
  Value z1 = zeros({5});
  Value z2 = zeros({5});
  Value t = array<float>({0, 0, 0, 0, 1}, {5});  // not all zero: passed as an argument
  auto f1 = jit([&](Value x) { return x + z1; }, native_fast("f1"));
  auto f2 = jit([&](Value x) { return x + z2; }, native_fast("f2"));
  auto f3 = jit([&](Value x) { return x + t; }, native_fast("f3"));
  Value x = array<float>({1, 2, 3, 4, 5}, {5});
  EXPECT_EQ(f1(x).array(), x.array());
  EXPECT_EQ(f2(x).array(), x.array());
  EXPECT_EQ(f3(x).array(), Array::from_vector<float>({1, 2, 3, 4, 6}, {5}));
  EXPECT_EQ(compile_cache_size(), 2);  // f1 and f2 share one entry; f3 has its own
}

TEST(JitZeroConsts, AZeroScanCarryInitialStateIsFolded) {
  // The seed's pattern: a scan carry starting from a closed-over zeros array, updated in place.
  Value init = zeros({4, 6});
  Value rows = array<int32_t>({0, 3, 1, 3}, {4});
  Value vals = array<float>({1, 2, 3, 4}, {4});
  auto f = [&](Value w) {
    auto [state, ys] = scan(
        [&](const Value& s, const std::tuple<Value, Value>& x) {
          const auto& [r, v] = x;
          Value row = dynamic_slice(s, {r, Value(int32_t{0})}, {1, 6});
          return std::pair{dynamic_update_slice(s, row + v * w, {r, Value(int32_t{0})}),
                           std::tuple{}};
        },
        init, std::tuple{rows, vals});
    return reduce_sum(state * state);
  };
  Value w(0.5f);
  EXPECT_EQ(jit(f, native_fast("zero_scan"))(w).item(),
            jit(f, {.backend = Backend::interpreter, .name = "zero_scan_i"})(w).item());
  EXPECT_EQ(jit(grad(f), native_fast("zero_scan_grad"))(w).item(),
            jit(grad(f), {.backend = Backend::interpreter, .name = "zero_scan_grad_i"})(w).item());
}

}  // namespace
}  // namespace refjit
