// Elementwise fusion: the grouping on the Jaxpr, the single loop nest in the MLIR, the
// vector code LLVM makes of it, and numerics against the interpreter.
#include "backend/fusion.h"

#include <cmath>

#include "refjit/ir/verifier.h"
#include "test_util.h"

namespace refjit::testing {
namespace {

const char* kChain = R"({ lambda ; x:f32[256] y:f32[256]. let
    a:f32[256] = mul x y
    b:f32[256] = add a 2.0:f32[]
    c:f32[256] = exp b
    d:f32[256] = max c x
  in (d,) })";

TEST(FusionPlan, ChainBecomesOneGroupRootedAtTheLastEqn) {
  FusionPlan p = plan_fusion(parse_jaxpr(kChain));
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0], (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_TRUE(p.is_root(3));
  EXPECT_FALSE(p.is_root(1));
}

// a is returned: its own eqn. c is read by a reduction (which roots a group of c's shape) and
// by the returned e: the multiply is cheap, so both groups compute it (duplicated); sin is not,
// so b, read by both copies, is stored once.
const char* kDuplicatedMultiply = R"({ lambda ; x:f32[8]. let
    a:f32[8] = neg x
    b:f32[8] = sin a
    c:f32[8] = mul b b
    d:f32[] = reduce_sum[axes=(0,)] c
    e:f32[8] = add c 1.0:f32[]
  in (a, d, e) })";

TEST(FusionPlan, ValueUsedOutsideTheChainOrReturnedEndsAGroup) {
  Jaxpr j = parse_jaxpr(kDuplicatedMultiply);
  FusionPlan p = plan_fusion(j);
  EXPECT_EQ(p.group_of[0], -1);
  EXPECT_EQ(p.group_of[1], -1);
  EXPECT_EQ(p.group_of[2], FusionPlan::kDuplicated);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0], (std::vector<size_t>{2, 3}));
  EXPECT_EQ(p.groups[1], (std::vector<size_t>{2, 4}));
  EXPECT_TRUE(p.is_root(3));
  EXPECT_TRUE(p.is_root(4));
  // The duplicated eqn is not lowered on its own, and the numbers are the interpreter's.
  expect_matches_interpreter(j, {random_array(at(DType::f32, {8}), 4)});
}

// The rewrite of those groups (the pipeline's `fusion` pass): each becomes a fused eqn at its
// root, whose body holds its members renamed, its invars the values it reads from outside
// (each once); the duplicated multiply is in both bodies, and the eqns around keep their vars.
TEST(FuseElementwise, EachGroupBecomesAFusedEqnAtItsRoot) {
  Jaxpr j = parse_jaxpr(kDuplicatedMultiply);
  const Jaxpr f = fuse_elementwise(j, nullptr);
  ASSERT_EQ(f.eqns.size(), 4u);
  EXPECT_EQ(f.eqns[0].prim, Prim::neg);
  EXPECT_EQ(f.eqns[1].prim, Prim::sin);
  for (size_t k : {2u, 3u}) {
    const Eqn& e = f.eqns[k];
    ASSERT_EQ(e.prim, Prim::fused);
    EXPECT_EQ(e.outs, j.eqns[k + 1].outs);  // the root's own var
    ASSERT_EQ(e.ins.size(), 1u);            // b, read twice by the multiply
    EXPECT_EQ(e.ins[0], Atom(j.eqns[1].outs[0]));
    const Jaxpr& body = *e.params.get<JaxprPtr>("jaxpr");
    ASSERT_EQ(body.eqns.size(), 2u);
    EXPECT_EQ(body.eqns[0].prim, Prim::mul);
    EXPECT_EQ(body.eqns[0].ins, (std::vector<Atom>{body.invars[0], body.invars[0]}));
    EXPECT_EQ(body.eqns[1].prim, k == 2 ? Prim::reduce_sum : Prim::add);
  }
  verify(f);
  expect_decided_matches(j, f, {random_array(at(DType::f32, {8}), 4)}, 1e-6);
}

// Bodies of scans (and of every other eqn holding a jaxpr) are fused too.
TEST(FuseElementwise, ScanBodiesAreFused) {
  Jaxpr j = parse_jaxpr(R"({ lambda ; c0:f32[8] xs:f32[5,8]. let
    c:f32[8] = scan[length=5 num_consts=0 num_carry=1 reverse=False linear=(False, False)
      unroll=1 jaxpr={ lambda ; h:f32[8] x:f32[8]. let
        a:f32[8] = mul h x
        b:f32[8] = tanh a
      in (b,) }] c0 xs
  in (c,) })");
  const Jaxpr f = fuse_elementwise(j, BufferOptions{});
  const Jaxpr& body = *f.eqns.at(0).params.get<JaxprPtr>("jaxpr");
  ASSERT_EQ(body.eqns.size(), 1u);
  EXPECT_EQ(body.eqns[0].prim, Prim::fused);
  expect_decided_matches(
      j, f, {random_array(at(DType::f32, {8}), 5), random_array(at(DType::f32, {5, 8}), 6)}, 1e-6);
}

TEST(FusionPlan, DifferentShapesAreNotFused) {
  // A scalar computed once feeds a vector op: broadcasting it per element is fine, but
  // computing the scalar chain per element is not, so it stays separate.
  Jaxpr j = parse_jaxpr(R"({ lambda ; s:f32[] x:f32[8]. let
    a:f32[] = exp s
    b:f32[8] = mul x a
    c:f32[8] = add b 1.0:f32[]
  in (c,) })");
  FusionPlan p = plan_fusion(j);
  EXPECT_EQ(p.group_of[0], -1);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0], (std::vector<size_t>{1, 2}));
}

TEST(NativeFusion, ChainIsOneLoopNestWithNoIntermediateBuffers) {
  std::string mlir = emit_mlir(with_fusion(parse_jaxpr(kChain)));
  EXPECT_EQ(count(mlir, "scf.for"), 1u) << mlir;
  EXPECT_EQ(count(mlir, "memref.store"), 1u) << mlir;
  EXPECT_EQ(count(mlir, "memref.alloc"), 0u) << mlir;
  EXPECT_EQ(count(mlir, "memref.view"), 0u) << mlir;
}

TEST(NativeFusion, FusedChainsMatchTheInterpreter) {
  Array x = random_array(at(DType::f32, {7, 5}), 1), y = random_array(at(DType::f32, {7, 5}), 2);
  Array s = random_array(at(DType::f32, {}), 3);
  // Diamond (b used twice), compare + select, convert, scalar broadcast, integer_pow.
  check_text(R"({ lambda ; x:f32[7,5] y:f32[7,5] s:f32[]. let
    a:f32[7,5] = sub x y
    b:f32[7,5] = mul a s
    c:bool[7,5] = gt b 0.5:f32[]
    d:f32[7,5] = integer_pow[y=3] b
    e:f32[7,5] = select_n c b d
    f:i32[7,5] = convert_element_type[new_dtype=int32 weak_type=False] e
    g:i32[7,5] = mul f 3:i32[]
    h:f32[7,5] = convert_element_type[new_dtype=float32 weak_type=False] g
    i:f32[7,5] = add h a
  in (i, c) })",
             {x, y, s});
}

TEST(NativeFusion, FusedLoopIsVectorisedOnTheHost) {
  std::string asm_text = emit_asm(parse_jaxpr(R"({ lambda ; x:f32[4096] y:f32[4096]. let
    a:f32[4096] = mul x y
    b:f32[4096] = add a 2.0:f32[]
    c:f32[4096] = max b x
  in (c,) })"));
  bool wide = count(asm_text, "%ymm") + count(asm_text, "%zmm") > 0;
  bool packed = count(asm_text, "vmulps") > 0 && count(asm_text, "vmaxps") > 0;
  EXPECT_TRUE(wide && packed) << asm_text;
}

}  // namespace
}  // namespace refjit::testing
