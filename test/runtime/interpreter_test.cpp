#include <string>

#include "eval_test_util.h"

namespace refjit {
namespace {

using namespace refjit::test;

// { lambda c:f32[2]; a:f32[2] r:Ref{i32[]}. let b = add c a in (b,) }
Jaxpr sample() {
  JaxprBuilder b;
  Var c = b.add_constvar(at(DType::f32, {2}));
  Var a = b.add_invar(at(DType::f32, {2}));
  b.add_invar(Type::ref(at(DType::i32)));
  Var o = emit1(b, Prim::add, {c, a}, {}, at(DType::f32, {2}));
  b.set_outvars({o, Literal::of_int(DType::i64, 5)});
  return b.finish();
}

std::string error_of(const std::vector<RtValue>& args) {
  try {
    interpret(sample(), args);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Interpret, ConstsThenArgsAndLiteralOutputs) {
  auto ref = std::make_shared<RefBuffer>(Array::scalar<int32_t>(0));
  std::vector<RtValue> out = interpret(sample(), {vec<float>({1, 2}), vec<float>({10, 20}), ref});
  EXPECT_EQ(as_array(out[0]), vec<float>({11, 22}));
  EXPECT_EQ(as_array(out[1]), Array::scalar<int64_t>(5));
}

TEST(Interpret, WrongArgumentCountIsAnError) {
  std::string msg = error_of({vec<float>({1, 2})});
  EXPECT_NE(msg.find("expected 3 values"), std::string::npos) << msg;
  EXPECT_NE(msg.find("got 1"), std::string::npos) << msg;
}

TEST(Interpret, WrongArgumentTypeNamesPositionAndTypes) {
  auto ref = std::make_shared<RefBuffer>(Array::scalar<int32_t>(0));
  std::string msg = error_of({vec<float>({1, 2}), vec<double>({1, 2}), ref});
  EXPECT_NE(msg.find("argument 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected f32[2], got f64[2]"), std::string::npos) << msg;

  msg = error_of({vec<float>({1, 2}), vec<float>({1, 2}), Array::scalar<int32_t>(0)});
  EXPECT_NE(msg.find("argument 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected Ref{i32[]}, got i32[]"), std::string::npos) << msg;

  msg = error_of({ref, vec<float>({1, 2}), ref});
  EXPECT_NE(msg.find("constant 0"), std::string::npos) << msg;
}

TEST(Interpret, DeclaredOutputTypeMismatchIsReported) {
  JaxprBuilder b;
  Var a = b.add_invar(at(DType::f32, {2}));
  Var o = emit1(b, Prim::neg, {a}, {}, at(DType::f32, {3}));
  b.set_outvars({o});
  EXPECT_THROW(interpret(b.finish(), {vec<float>({1, 2})}), Error);
}

}  // namespace
}  // namespace refjit

#include "runtime/eval_rules.h"

namespace refjit {
namespace {

TEST(EvalRules, EveryPrimitiveHasAnEvalRule) {
  for (int i = 0; i < kNumPrims; ++i)
    EXPECT_NE(eval_rules().find(static_cast<Prim>(i)), nullptr) << prim_name(static_cast<Prim>(i));
}

TEST(Interpret, RuleErrorsNameTheEqn) {
  JaxprBuilder b;
  Var a = b.add_invar(test::at(DType::i32, {2}));
  Var o = test::emit1(b, Prim::exp, {a}, {}, test::at(DType::i32, {2}));
  b.set_outvars({o});
  try {
    interpret(b.finish(), {test::vec<int32_t>({1, 2})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("eqn 0 (exp): ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace refjit
