#include "refjit/ir/verifier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "ir/type_test_util.h"
#include "refjit/ir/builder.h"
#include "refjit/ir/text.h"

namespace refjit {
namespace {

using ::testing::HasSubstr;
using namespace refjit::testing;

// { lambda ; a:f32[3] b:Ref{f32[3]}. let c = get b; d = add a c; _ = swap b d in (d,) }
Jaxpr valid_program() {
  JaxprBuilder b;
  Var a = b.add_invar(f32({3}));
  Var r = b.add_invar(ref_f32({3}));
  Var c = b.add_eqn1(Prim::get, {r});
  Var d = b.add_eqn1(Prim::add, {a, c});
  b.add_eqn(Prim::swap, {r, d});
  b.set_outvars({d});
  return b.finish();
}

TEST(Verifier, AcceptsAWellTypedProgram) { EXPECT_NO_THROW(verify(valid_program())); }

TEST(Verifier, AcceptsLiteralOperandsAndOutputs) {
  JaxprBuilder b;
  Var a = b.add_invar(f32({}));
  Var c = b.add_eqn1(Prim::mul, {a, Literal::of_float(DType::f32, 2.0)});
  b.set_outvars({c, Literal::of_int(DType::i32, 1)});
  EXPECT_NO_THROW(verify(b.finish()));
}

TEST(Verifier, RejectsAnOutputTypeThatDisagreesWithTheRule) {
  Jaxpr j = valid_program();
  j.vars[j.eqns[1].outs[0].id].type = f32({4});
  EXPECT_THAT(type_error([&] { verify(j); }),
              HasSubstr("eqn 1 (add) output 0 is declared f32[4] but the type rule gives f32[3]"));
}

TEST(Verifier, RejectsAWrongNumberOfOutputs) {
  Jaxpr j = valid_program();
  j.eqns[2].outs.clear();  // swap gives one output
  EXPECT_THAT(type_error([&] { verify(j); }),
              HasSubstr("eqn 2 (swap) has 0 outputs but the primitive gives 1"));
}

TEST(Verifier, ReportsTypeRuleErrorsWithTheEqn) {
  JaxprBuilder b;
  Var a = b.add_invar(f32({3}));
  Var x = b.add_invar(f32({4}));
  Var out = b.new_var(f32({3}));
  b.add_eqn_with_outs(Prim::add, {a, x}, {}, {out});
  b.set_outvars({out});
  EXPECT_THAT(type_error([&] { verify(b.finish()); }),
              HasSubstr("eqn 0 (add): operand 1 has type f32[4] but operand 0 has type f32[3]"));
}

TEST(Verifier, ReportsRefRuleErrorsWithTheirCode) {
  JaxprBuilder b;
  Var a = b.add_invar(f32({3}));
  Var out = b.new_var(f32({3}));
  b.add_eqn_with_outs(Prim::get, {a}, {}, {out});
  b.set_outvars({out});
  EXPECT_THAT(ref_error([&] { verify(b.finish()); }),
              HasSubstr("E12: eqn 0 (get): operand 0 has type f32[3] but a ref is needed"));
}

TEST(Verifier, RejectsUseBeforeBinding) {
  JaxprBuilder b;
  Var a = b.add_invar(f32({}));
  Var later = b.new_var(f32({}));
  Var c = b.new_var(f32({}));
  b.add_eqn_with_outs(Prim::neg, {later}, {}, {c});
  b.add_eqn_with_outs(Prim::neg, {a}, {}, {later});
  b.set_outvars({c});
  EXPECT_THAT(type_error([&] { verify(b.finish()); }),
              HasSubstr("eqn 0 (neg) operand 0 uses variable #1 (f32[]) before it is bound"));
}

TEST(Verifier, RejectsAnUnboundOutvar) {
  JaxprBuilder b;
  b.add_invar(f32({}));
  Var ghost = b.new_var(f32({}));
  b.set_outvars({ghost});
  EXPECT_THAT(type_error([&] { verify(b.finish()); }),
              HasSubstr("output 0 uses variable #1 (f32[]) before it is bound"));
}

TEST(Verifier, RejectsBindingTwice) {
  JaxprBuilder b;
  Var a = b.add_invar(f32({}));
  b.add_eqn_with_outs(Prim::neg, {a}, {}, {a});
  b.set_outvars({a});
  EXPECT_THAT(type_error([&] { verify(b.finish()); }),
              HasSubstr("eqn 0 (neg) output 0 binds variable #0 (f32[]) a second time"));
}

TEST(Verifier, RejectsAVariableOutsideTheTable) {
  JaxprBuilder b;
  b.add_invar(f32({}));
  b.set_outvars({Var{7}});
  EXPECT_THAT(type_error([&] { verify(b.finish()); }),
              HasSubstr("output 0 refers to variable #7 but the jaxpr has only 1 variables"));
}

TEST(Verifier, RejectsReturningARef) {
  JaxprBuilder b;
  Var a = b.add_invar(f32({2}));
  Var r = b.add_eqn1(Prim::new_ref, {a});
  b.set_outvars({r});
  EXPECT_THAT(ref_error([&] { verify(b.finish()); }),
              HasSubstr("E9: output 0 has type Ref{f32[2]} (created by eqn 0 (new_ref)); a jaxpr "
                        "cannot return a ref"));
}

TEST(Verifier, VerifiesSubJaxprsRecursively) {
  // The jit body uses its own variable #0 before binding it.
  JaxprBuilder body;
  Var x = body.add_invar(f32({}));
  Var y = body.new_var(f32({}));
  Var z = body.new_var(f32({}));
  body.add_eqn_with_outs(Prim::neg, {z}, {}, {y});
  body.add_eqn_with_outs(Prim::neg, {x}, {}, {z});
  body.set_outvars({y});
  JaxprBuilder outer;
  Var a = outer.add_invar(f32({}));
  Var out = outer.new_var(f32({}));
  outer.add_eqn_with_outs(
      Prim::jit, {a},
      {{"jaxpr", std::make_shared<Jaxpr>(body.finish())}, {"name", std::string("inner")}}, {out});
  outer.set_outvars({out});
  EXPECT_THAT(type_error([&] { verify(outer.finish()); }),
              HasSubstr("eqn 0 (jit), param 'jaxpr': eqn 0 (neg) operand 0 uses variable #2 "
                        "(f32[]) before it is bound"));
}

TEST(Verifier, SubJaxprsSeeOnlyTheirOwnBinders) {
  // The body refers to a var id that exists only in the outer table: out of its own range.
  JaxprBuilder body;
  body.add_invar(f32({}));
  body.set_outvars({Var{3}});
  JaxprBuilder outer;
  Var a = outer.add_invar(f32({}));
  Var b1 = outer.add_eqn1(Prim::neg, {a});
  Var b2 = outer.add_eqn1(Prim::neg, {b1});
  Var b3 = outer.add_eqn1(Prim::neg, {b2});
  (void)b3;
  Var out = outer.new_var(f32({}));
  outer.add_eqn_with_outs(Prim::jit, {a}, {{"jaxpr", std::make_shared<Jaxpr>(body.finish())}},
                          {out});
  outer.set_outvars({out});
  EXPECT_THAT(type_error([&] { verify(outer.finish()); }),
              HasSubstr("eqn 3 (jit), param 'jaxpr': output 0 refers to variable #3 but the "
                        "jaxpr has only 1 variables"));
}

TEST(Verifier, NamesTheBranchOfACond) {
  JaxprBuilder ok;
  Var x = ok.add_invar(f32({}));
  ok.set_outvars({ok.add_eqn1(Prim::neg, {x})});
  JaxprBuilder bad;
  Var y = bad.add_invar(f32({}));
  Var r = bad.add_eqn1(Prim::new_ref, {y});
  bad.set_outvars({r});
  JaxprBuilder outer;
  Var i = outer.add_invar(i32({}));
  Var a = outer.add_invar(f32({}));
  Var out = outer.new_var(f32({}));
  outer.add_eqn_with_outs(Prim::cond, {i, a},
                          {{"branches", JaxprList{std::make_shared<Jaxpr>(ok.finish()),
                                                  std::make_shared<Jaxpr>(bad.finish())}}},
                          {out});
  outer.set_outvars({out});
  EXPECT_THAT(ref_error([&] { verify(outer.finish()); }),
              HasSubstr("E9: eqn 0 (cond), param 'branches' [1]: output 0 has type Ref{f32[]} "
                        "(created by eqn 0 (new_ref))"));
}

TEST(Verifier, AcceptsAScanWithAClosedOverRef) {
  // for i in range(3): acc[...] += xs[i]
  JaxprBuilder body;
  Var acc = body.add_invar(ref_f32({}));
  Var x = body.add_invar(f32({}));
  body.add_eqn(Prim::addupdate, {acc, x});
  body.set_outvars({});
  JaxprBuilder outer;
  Var xs = outer.add_invar(f32({3}));
  Var zero = outer.add_eqn1(Prim::copy, {Literal::of_float(DType::f32, 0.0)});
  Var r = outer.add_eqn1(Prim::new_ref, {zero});
  outer.add_eqn(Prim::scan, {r, xs},
                {{"jaxpr", std::make_shared<Jaxpr>(body.finish())},
                 {"length", int64_t{3}},
                 {"reverse", false},
                 {"num_consts", int64_t{1}},
                 {"num_carry", int64_t{0}},
                 {"linear", NoneParam{}},
                 {"unroll", int64_t{1}},
                 {"_split_transpose", false}});
  Var total = outer.add_eqn1(Prim::freeze, {r});
  outer.set_outvars({total});
  EXPECT_NO_THROW(verify(outer.finish()));
}

TEST(Verifier, RejectsUsingARefAfterFreeze) {
  JaxprBuilder b;
  Var a = b.add_invar(f32({2}));
  Var r = b.add_eqn1(Prim::new_ref, {a});
  Var frozen = b.add_eqn1(Prim::freeze, {r});
  Var again = b.add_eqn1(Prim::get, {r});
  b.set_outvars({frozen, again});
  EXPECT_THAT(ref_error([&] { verify(b.finish()); }),
              HasSubstr("E12: eqn 2 (get) operand 0 uses ref #1 (Ref{f32[2]}) after eqn 1 froze "
                        "or freed it"));
}

TEST(Verifier, RejectsAReadAfterJaxsFreeRefAndADoubleFree) {
  // JAX's free_ref ends the ref (jax/_src/core.py): refjit reads it as a freeze nobody reads.
  auto error = [](const std::string& text) { return ref_error([&] { parse_jaxpr(text); }); };
  EXPECT_THAT(error("{ lambda ; a:f32[]. let\n"
                    "    b:Ref{f32[]} = new_ref[kind=None memory_space=None] a\n"
                    "    free_ref b\n"
                    "    c:f32[] <- b[...]\n"
                    "  in (c,) }"),
              HasSubstr("froze or freed it"));
  EXPECT_THAT(error("{ lambda ; . let\n"
                    "    b:Ref{f32[]} = empty_ref[memory_space=None ty=float32[]] \n"
                    "    free_ref b\n"
                    "    free_ref b\n"
                    "  in () }"),
              HasSubstr("froze or freed it"));
}

TEST(Verifier, AcceptsACustomVjpFwdPassingItsRefArgumentOn) {
  JaxprBuilder pb;
  pb.add_invar(ref_f32({}));
  Var px = pb.add_invar(f32({}));
  pb.set_outvars({pb.add_eqn1(Prim::sin, {px})});
  JaxprBuilder fb;
  Var fr = fb.add_invar(ref_f32({}));
  Var fx = fb.add_invar(f32({}));
  fb.set_outvars({fb.add_eqn1(Prim::sin, {fx}), fr});
  JaxprBuilder bb;
  bb.add_invar(ref_f32({}));
  Var g = bb.add_invar(f32({}));
  bb.set_outvars({Literal::of_float(DType::f32, 0.0), g});
  JaxprBuilder outer;
  Var x = outer.add_invar(f32({}));
  Var r = outer.add_eqn1(Prim::new_ref, {x});
  Var y = outer.add_eqn1(Prim::custom_vjp_call, {r, x},
                         {{"call_jaxpr", std::make_shared<Jaxpr>(pb.finish())},
                          {"fwd_jaxpr", std::make_shared<Jaxpr>(fb.finish())},
                          {"bwd_jaxpr", std::make_shared<Jaxpr>(bb.finish())},
                          {"num_res", int64_t{1}}});
  outer.set_outvars({y});
  EXPECT_NO_THROW(verify(outer.finish()));
}

TEST(Verifier, NamesVariablesByTheirParsedName) {
  Jaxpr j;
  Var a = j.new_var(f32({}), false, "a");
  Var r = j.new_var(ref_f32({}), false, "r");
  j.invars = {a, r};
  j.outvars = {r};
  EXPECT_THAT(ref_error([&] { verify(j); }),
              HasSubstr("E9: output 0 has type Ref{f32[]} (it is input 1)"));
  j.outvars = {Var{2}};
  j.new_var(f32({}), false, "late");
  EXPECT_THAT(type_error([&] { verify(j); }),
              HasSubstr("output 0 uses variable `late` (f32[]) before it is bound"));
}

}  // namespace
}  // namespace refjit
