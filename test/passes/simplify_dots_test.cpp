// Pass simplify-dots (passes/simplify/simplify_dots.h): which products it rewrites, and that the
// rewritten program computes what the original does (both run on the interpreter).
#include "passes/simplify/simplify_dots.h"

#include <gtest/gtest.h>

#include <random>

#include "passes/simplify/dce.h"
#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"
#include "runtime/interpreter.h"

namespace refjit {
namespace {

int count(const Jaxpr& j, Prim p) {
  int n = 0;
  for (const Eqn& e : j.eqns) n += e.prim == p;
  return n;
}

Array random_array(const ArrayType& t, uint32_t seed) {
  std::mt19937 rng(seed);
  Array a(t);
  for (int64_t i = 0; i < a.size(); ++i)
    a.set_from_double(i, std::uniform_real_distribution<double>(-2, 2)(rng));
  return a;
}

// Rewrites `text`, expects `changes` rewrites, and compares both programs' outputs.
Jaxpr check(const std::string& text, int changes) {
  const Jaxpr j = parse_jaxpr(text);
  RewriteStats stats;
  const Jaxpr s = dce(with_patterns(j, simplify_dots_patterns(), &stats));
  EXPECT_EQ(stats.total(), changes) << print_jaxpr(s);
  verify(s);
  std::vector<RtValue> args;
  uint32_t seed = 1;
  for (Var v : j.invars) args.emplace_back(random_array(j.type_of(v).array, seed++));
  std::vector<RtValue> want = interpret(j, args), got = interpret(s, args);
  for (size_t i = 0; i < want.size(); ++i) {
    const Array& w = std::get<Array>(want[i]);
    const Array& g = std::get<Array>(got[i]);
    EXPECT_EQ(w.type(), g.type());
    for (int64_t k = 0; k < w.size(); ++k)
      EXPECT_NEAR(g.as_double(k), w.as_double(k), 1e-4 * (1 + std::abs(w.as_double(k))));
  }
  return s;
}

TEST(SimplifyDots, TransposeOfABatchedProductSwapsItsOperands) {
  Jaxpr s = check(R"({ lambda ; x:f32[2,3,4] y:f32[2,4,5]. let
    c:f32[2,3,5] = dot_general[dimension_numbers=(([2], [1]), ([0], [0]))] x y
    d:f32[2,5,3] = transpose[permutation=(0, 2, 1)] c
  in (d,) })",
                  1);
  EXPECT_EQ(count(s, Prim::transpose), 0);
  EXPECT_EQ(count(s, Prim::dot_general), 1);
}

TEST(SimplifyDots, OtherPermutationsAndSharedProductsStay) {
  check(R"({ lambda ; x:f32[2,3,4] y:f32[2,4,5]. let
    c:f32[2,3,5] = dot_general[dimension_numbers=(([2], [1]), ([0], [0]))] x y
    d:f32[3,2,5] = transpose[permutation=(1, 0, 2)] c
  in (d,) })",
        0);
  check(R"({ lambda ; x:f32[3,4] y:f32[4,5]. let
    c:f32[3,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x y
    d:f32[5,3] = transpose[permutation=(1, 0)] c
  in (c, d) })",
        0);
}

TEST(SimplifyDots, ProductWithABroadcastScalarIsASum) {
  // The scalar on the left, with a batch dim; then on the right.
  Jaxpr left = check(R"({ lambda ; s:f32[] y:f32[2,4,5]. let
    e:f32[2,3,4] = broadcast_in_dim[broadcast_dimensions=() shape=(2, 3, 4)] s
    c:f32[2,3,5] = dot_general[dimension_numbers=(([2], [1]), ([0], [0]))] e y
  in (c,) })",
                     1);
  EXPECT_EQ(count(left, Prim::dot_general), 0);
  EXPECT_EQ(count(left, Prim::reduce_sum), 1);
  check(R"({ lambda ; s:f32[] y:f32[2,3,4]. let
    e:f32[2,4,5] = broadcast_in_dim[broadcast_dimensions=() shape=(2, 4, 5)] s
    c:f32[2,3,5] = dot_general[dimension_numbers=(([2], [1]), ([0], [0]))] y e
  in (c,) })",
        1);
  // Two contracted dims, and a literal scalar.
  check(R"({ lambda ; y:f32[3,4,6]. let
    e:f32[7,3,4] = broadcast_in_dim[broadcast_dimensions=() shape=(7, 3, 4)] 0.5:f32[]
    c:f32[7,6] = dot_general[dimension_numbers=(([1, 2], [0, 1]), ([], []))] e y
  in (c,) })",
        1);
}

TEST(SimplifyDots, RewritesInsideScanBodies) {
  // The reverse scan of an RNN's gradient: outer products, transposed.
  check(R"({ lambda ; w:f32[4,4] xs:f32[6,1,4]. let
    a:f32[4,4] = scan[length=6 num_consts=0 num_carry=1 reverse=False linear=(False, False)
      unroll=1 jaxpr={ lambda ; acc:f32[4,4] x:f32[1,4]. let
        n:f32[4,4] = dot_general[dimension_numbers=(([0], [0]), ([], []))] x x
        t:f32[4,4] = transpose[permutation=(1, 0)] n
        s:f32[4,4] = add acc t
      in (s,) }] w xs
  in (a,) })",
        1);
}

}  // namespace
}  // namespace refjit
