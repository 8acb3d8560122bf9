// The autodiff API's error conditions (REFS.md section 3): each names the argument and says
// how to fix it.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "refjit/refjit.h"

namespace refjit {
namespace {

std::string ref_error(const std::function<void()>& f, const std::string& code) {
  try {
    f();
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected RefError " << code << ", got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected RefError " << code;
  return "";
}

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

auto square_ref = [](Ref x_ref) { return integer_pow(x_ref.get(), 2); };

TEST(AutodiffErrors, ApplyingTheVjpOfARefArgumentWithoutWithRefsIsE4) {
  auto [y, f_vjp] = vjp(square_ref, new_ref(2.0f));
  std::string msg = ref_error([&] { f_vjp(1.0); }, "E4");
  EXPECT_TRUE(has(msg, "argument 0")) << msg;
  EXPECT_TRUE(has(msg, "Ref{float32[]}")) << msg;
  EXPECT_TRUE(has(msg, "with_refs(grad_ref)")) << msg;
  EXPECT_TRUE(has(msg, "DontWant")) << msg;
}

TEST(AutodiffErrors, DontWantForARefArgumentIsAccepted) {
  auto [y, f_vjp] = vjp(square_ref, new_ref(2.0f));
  auto [slot] = f_vjp.with_refs(DontWant{})(1.0);
  EXPECT_TRUE(slot.is_didnt_want());
}

TEST(AutodiffErrors, GradWithRespectToARefIsE2) {
  auto f = [](Value x, Ref r) { return x * r.get(); };
  std::string msg = ref_error([&] { grad(f, 1)(2.0f, new_ref(3.0f)); }, "E2");
  EXPECT_TRUE(has(msg, "argument 1")) << msg;
  EXPECT_TRUE(has(msg, "with_refs")) << msg;
  // The same ref as a non-differentiated argument is plumbing: fine.
  EXPECT_EQ(grad(f)(2.0f, new_ref(3.0f)).item(), 3.0);
}

TEST(AutodiffErrors, WithRefsWithTheWrongNumberOfEntriesListsThePositionsE3) {
  auto [y, f_vjp] = vjp([](Value a, Value b, Value c) { return a * b * c; }, 1.0f, 2.0f, 3.0f);
  std::string msg = ref_error([&] { f_vjp.with_refs(GradValue{}); }, "E3");
  EXPECT_TRUE(has(msg, "argument 1 (float32[]) has no entry")) << msg;
  EXPECT_TRUE(has(msg, "argument 2 (float32[]) has no entry")) << msg;
  msg =
      ref_error([&] { f_vjp.with_refs(GradValue{}, GradValue{}, GradValue{}, DontWant{}); }, "E3");
  EXPECT_TRUE(has(msg, "entry 3 (DontWant) has no argument")) << msg;
}

TEST(AutodiffErrors, GradValueForARefArgumentIsE5) {
  auto [y, f_vjp] = vjp(square_ref, new_ref(2.0f));
  std::string msg = ref_error([&] { f_vjp.with_refs(GradValue{}); }, "E5");
  EXPECT_TRUE(has(msg, "entry 0")) << msg;
  EXPECT_TRUE(has(msg, "DontWant")) << msg;
}

TEST(AutodiffErrors, GradientRefOfTheWrongTypeIsE6) {
  auto [y, f_vjp] = vjp([](Value x) { return reduce_sum(x); }, zeros({3}));
  std::string msg = ref_error([&] { f_vjp.with_refs(new_ref(zeros({4}))); }, "E6");
  EXPECT_TRUE(has(msg, "Ref{float32[3]}")) << msg;
  EXPECT_TRUE(has(msg, "Ref{float32[4]}")) << msg;
  msg = ref_error([&] { f_vjp.with_refs(new_ref(zeros({3}, DType::f64))); }, "E6");
  EXPECT_TRUE(has(msg, "float64")) << msg;
}

TEST(AutodiffErrors, CotangentOfTheWrongTypeIsE6) {
  auto [y, f_vjp] = vjp([](Value x) { return sin(x); }, zeros({3}));
  std::string msg = ref_error([&] { f_vjp(ones({4})); }, "E6");
  EXPECT_TRUE(has(msg, "output 0")) << msg;
  EXPECT_TRUE(has(msg, "float32[4]")) << msg;
  ref_error([&] { f_vjp(ones({3}), ones({3})); }, "E6");
}

TEST(AutodiffErrors, TheSameGradientRefTwiceIsE7) {
  auto [y, f_vjp] = vjp([](Value a, Value b) { return a * b; }, 1.0f, 2.0f);
  Ref g = new_ref(0.0f);
  std::string msg = ref_error([&] { f_vjp.with_refs(g, g); }, "E7");
  EXPECT_TRUE(has(msg, "argument 0 and for argument 1")) << msg;
}

TEST(AutodiffErrors, WritingADifferentiatedValueIntoAPlumbingRefIsE1) {
  auto err6 = [](Value x, Ref some_plumbing_ref) {
    Value y = x + x;
    some_plumbing_ref[ellipsis] += y;
    return y;
  };
  auto foo = [](Value x, Ref some_plumbing_ref) {
    Value y = x + x;
    some_plumbing_ref[ellipsis] += stop_gradient(y);
    return y;
  };
  Ref r = new_ref(0.0f);
  std::string msg = ref_error([&] { grad(err6)(1.0f, r); }, "E1");
  EXPECT_TRUE(has(msg, "stop_gradient")) << msg;
  EXPECT_EQ(grad(foo)(1.0f, r).item(), 2.0);
  EXPECT_EQ(r.value(), Array::scalar(2.0f));  // foo's forward pass wrote 1 + 1
}

TEST(AutodiffErrors, CustomVjpFwdReturningARefNotAnArgumentIsE10) {
  auto bad = custom_vjp([](Value x) { return x; },
                        [](Value x) {
                          return std::tuple{x, new_ref(x)};
                        },
                        [](Ref, Value g) { return g; }, "bad");
  std::string msg = ref_error([&] { bad(1.0f); }, "E10");
  EXPECT_TRUE(has(msg, "not one of its arguments")) << msg;
}

TEST(AutodiffErrors, CustomVjpPrimalReturningARefIsE10) {
  auto bad = custom_vjp([](Ref r) { return r; }, [](Ref r) { return r; }, [](Value g) { return g; },
                        "bad");
  std::string msg = ref_error([&] { bad(new_ref(1.0f)); }, "E10");
  EXPECT_TRUE(has(msg, "output 0")) << msg;
}

TEST(AutodiffErrors, CustomVjpWithTheSameRefTwiceIsE7) {
  auto two = custom_vjp([](Ref a, Ref b) { return a.get() + b.get(); },
                        [](Ref a, Ref b) { return a.get() + b.get(); },
                        [](Value g) {
                          return std::tuple{g, g};
                        },
                        "two");
  Ref r = new_ref(1.0f);
  ref_error([&] { two(r, r); }, "E7");
}

TEST(AutodiffErrors, AGradSlotHoldingAPlaceholderSaysWhy) {
  auto [y, f_vjp] = vjp([](Value x) { return sin(x); }, 1.0f);
  auto [slot] = f_vjp.with_refs(DontWant{})(1.0);
  try {
    slot.value();
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "DidntWant()")) << e.what();
  }
}

}  // namespace
}  // namespace refjit
