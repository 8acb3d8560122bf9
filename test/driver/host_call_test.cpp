// Host calls (debug_callback, runtime/host_callbacks.h): native code and the interpreter call
// the handler with the same values in the same order; every pass keeps them; a failure in
// the handler reaches the caller once the code returns.
#include <fmt/format.h>

#include "backend/test_util.h"
#include "driver/pipeline.h"
#include "passes/simplify/dce.h"
#include "runtime/host_callbacks.h"
#include "runtime/interpreter.h"

namespace refjit {
namespace {

using testing::as_array;

struct Call {
  int64_t callback;
  std::vector<Array> args;
};

// Installs a handler recording every call for the test's lifetime.
class Recording {
 public:
  Recording() {
    set_host_call_handler([this](int64_t n, std::vector<Array> args) {
      if (n == fail_on_) throw Error(fmt::format("handler refused {}", n));
      calls.push_back({n, std::move(args)});
    });
  }
  ~Recording() { set_host_call_handler(nullptr); }
  void fail_on(int64_t n) { fail_on_ = n; }
  std::vector<Call> calls;

 private:
  int64_t fail_on_ = -1;
};

Array f32s(std::vector<float> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return Array::from_vector<float>(v, s);
}

// A scan calling host function 1 with its carry each step, and host function 2 with a
// column of a matrix (a strided view), an integer and a bool; nothing reads the scan's carry.
constexpr const char* kProgram = R"({ lambda ; a:f32[3] m:f32[2,3] k:i32[]. let
    _:f32[] = scan[
      jaxpr={ lambda ; c:f32[] x:f32[]. let
          debug_callback[callback=1] c
          d:f32[] = add c x
        in (d,) }
      length=3
      linear=(False, False)
      num_carry=1
      num_consts=0
      reverse=False
    ] 0.0:f32[] a
    e:f32[2,1] = slice[limit_indices=(2, 2) start_indices=(0, 1) strides=None] m
    f:bool[] = gt k 2:i32[]
    debug_callback[callback=2] e k f
    g:f32[3] = mul a 2.0:f32[]
  in (g,) })";

std::vector<RtValue> program_args() {
  return {f32s({1, 2, 3}), Array::from_vector<float>({0, 1, 2, 3, 4, 5}, Shape{2, 3}),
          Array::scalar<int32_t>(5)};
}

void expect_same_calls(const std::vector<Call>& got, const std::vector<Call>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].callback, want[i].callback) << "call " << i;
    ASSERT_EQ(got[i].args.size(), want[i].args.size()) << "call " << i;
    for (size_t k = 0; k < got[i].args.size(); ++k)
      EXPECT_EQ(got[i].args[k], want[i].args[k]) << "call " << i << " operand " << k;
  }
}

TEST(HostCalls, NativeCodeCallsTheHandlerAsTheInterpreterDoes) {
  const Jaxpr j = parse_jaxpr(kProgram);
  Recording interpreted;
  interpret(j, program_args());
  std::vector<Call> want = std::move(interpreted.calls);
  ASSERT_EQ(want.size(), 4u);
  for (int s = 0; s < 3; ++s)
    EXPECT_EQ(want[s].args[0], Array::scalar<float>(float(s * (s + 1) / 2)));
  EXPECT_EQ(want[3].callback, 2);
  EXPECT_EQ(want[3].args[0], Array::from_vector<float>({1, 4}, Shape{2, 1}));
  EXPECT_EQ(want[3].args[1], Array::scalar<int32_t>(5));
  EXPECT_EQ(want[3].args[2].type(), (ArrayType{DType::bool_, {}}));
  EXPECT_EQ(want[3].args[2].data()[0], std::byte{1});

  Recording native;
  const PipelineOptions options;
  CompiledFunction f = compile_planned(plan_program(j, options), options);
  std::vector<RtValue> out = f(program_args());
  EXPECT_EQ(as_array(out[0]), f32s({2, 4, 6}));
  expect_same_calls(native.calls, want);
}

TEST(HostCalls, DeadCodeRemovalKeepsThemAndTheLoopsHoldingThem) {
  const Jaxpr j = parse_jaxpr(kProgram);
  const std::string kept = print_jaxpr(dce(j));
  EXPECT_EQ(testing::count(kept, "debug_callback"), 2u) << kept;
  EXPECT_EQ(testing::count(kept, "scan["), 1u) << kept;
  const std::string planned = print_jaxpr(plan_program(j, PipelineOptions{}).jaxpr);
  EXPECT_EQ(testing::count(planned, "debug_callback"), 2u) << planned;
}

TEST(HostCalls, AFailureReachesTheCallerAndStopsTheRunsLaterCalls) {
  const Jaxpr j = parse_jaxpr(kProgram);
  Recording r;
  r.fail_on(1);
  const PipelineOptions options;
  CompiledFunction f = compile_planned(plan_program(j, options), options);
  EXPECT_THROW(
      {
        try {
          f(program_args());
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("handler refused 1"), std::string::npos);
          throw;
        }
      },
      Error);
  EXPECT_TRUE(r.calls.empty());  // the call to 2 after the failed one was not made
  r.fail_on(-1);
  f(program_args());  // the failure was the last run's only
  EXPECT_EQ(r.calls.size(), 4u);
}

TEST(HostCalls, WithoutAHandlerTheCallFailsNamingIt) {
  const Jaxpr j = parse_jaxpr("{ lambda ; a:f32[]. let debug_callback[callback=7] a in (a,) }");
  try {
    interpret(j, {Array::scalar<float>(1)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("host function 7"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace refjit
