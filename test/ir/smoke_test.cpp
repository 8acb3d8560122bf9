#include <gtest/gtest.h>

#include "refjit/ir/builder.h"

namespace refjit {
namespace {

TEST(TypeText, ArraysAndRefsPrintLikeJax) {
  EXPECT_EQ(Type(ArrayType{DType::f32, {3, 4}}).str(), "f32[3,4]");
  EXPECT_EQ(Type::ref(ArrayType{DType::f32, {10}}).str(), "Ref{f32[10]}");
  EXPECT_EQ(Type::ref(ArrayType{DType::i32, {}}).long_str(), "Ref{int32[]}");
}

TEST(LiteralText, ScalarsCarryTheirType) {
  EXPECT_EQ(Literal::of_int(DType::i32, 3).str(), "3:i32[]");
  EXPECT_EQ(Literal::of_float(DType::f32, 2.0).str(), "2.0:f32[]");
  EXPECT_EQ(Literal::of_bool(true).str(), "True:bool[]");
}

}  // namespace
}  // namespace refjit
