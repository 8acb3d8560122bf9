// Differential tests (native vs interpreter) of refs and structured primitives, plus the
// calling convention (in-place ref updates, argument checking) and the emit functions.
#include <fmt/format.h>

#include "test_util.h"

namespace refjit {
namespace {

using testing::at;
using testing::check_text;
using testing::random_array;
using testing::ref_of;

Array f32s(std::vector<float> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return Array::from_vector<float>(v, s);
}

TEST(NativeRefs, RefArgumentIsUpdatedInPlaceAtTheSameAddress) {
  Jaxpr j = parse_jaxpr(
      "{ lambda ; a:Ref{f32[4]} b:f32[4]. let a[...] += b; c:f32[4] <- a[...] in (c,) }");
  CompiledFunction f = compile_native(j);
  auto buf = std::make_shared<RefBuffer>(f32s({1, 2, 3, 4}));
  const std::byte* storage = buf->value().data();
  auto out = f({buf, f32s({10, 20, 30, 40})});
  EXPECT_EQ(buf->value().data(), storage);
  EXPECT_EQ(buf->value(), f32s({11, 22, 33, 44}));
  EXPECT_EQ(testing::as_array(out[0]), f32s({11, 22, 33, 44}));
  f({buf, f32s({1, 1, 1, 1})});  // a second call sees the first call's update
  EXPECT_EQ(buf->value(), f32s({12, 23, 34, 45}));
  EXPECT_EQ(buf->value().data(), storage);
}

TEST(NativeRefs, StaticDynamicAndIndexArrayIndexersMatchInterpreter) {
  const char* text = R"({ lambda ; a:Ref{f32[4,10]} b:i32[] c:i32[] d:i32[5] e:f32[3]. let
    f:f32[4,10] <- a[...]
    g:f32[2,10] <- a[1:3,:]
    h:f32[4,8] <- a[:,2:]
    j:f32[5] <- a[1,::2]
    k:f32[4,3] <- a[:,1:7:2]
    l:f32[3] <- a[b,c:c+3]
    m:f32[5,10] <- a[d]
    o:f32[3], a[3,4:7] <- a[3,4:7], e
    a[b,c:c+3] <- e
    a[0,:3] += e
    p:f32[] <- a[b,c]
    q:f32[1,10] <- a[b:b+1]
  in (f, g, h, j, k, l, m, o, p, q) })";
  Array d = Array::from_vector<int32_t>({3, 0, -2, 9, 1}, {5});
  for (auto [b, c] : {std::pair{1, 2}, {-5, 20}, {3, 7}, {9, -1}})
    check_text(text, {ref_of(random_array(at(DType::f32, {4, 10}), 1)), Array::scalar<int32_t>(b),
                      Array::scalar<int32_t>(c), d, random_array(at(DType::f32, {3}), 2)});
}

TEST(NativeRefs, AddupdateWithRepeatedIndexArrayAccumulates) {
  check_text(
      "{ lambda ; a:Ref{i32[5,2]} i:i32[4] u:i32[4,2]. let a[i] += u in () }",
      {ref_of(random_array(at(DType::i32, {5, 2}), 1)),
       Array::from_vector<int32_t>({1, 1, 4, 1}, {4}), random_array(at(DType::i32, {4, 2}), 2)});
}

TEST(NativeRefs, NewRefSwapFreeze) {
  check_text(
      "{ lambda ; a:f64[3] v:f64[3]. let r:Ref{f64[3]} = new_ref a; "
      "o:f64[3], r[...] <- r[...], v; r[...] += a; s:f64[3] = freeze r in (o, s) }",
      {random_array(at(DType::f64, {3}), 1), random_array(at(DType::f64, {3}), 2)});
  check_text("{ lambda ; a:bool[2]. let r:Ref{bool[2]} = new_ref a; s:bool[2] = freeze r in (s,) }",
             {Array::from_vector<bool>({true, false}, {2})});
}

TEST(NativeControl, ScanWithClosedOverRefAndDynamicUpdateSliceCarry) {
  const char* text = R"({ lambda ; a:Ref{f32[]} b:f32[5] xs:f32[5]. let
    is:i32[5] = iota[dimension=0 dtype=int32 shape=(5,) sharding=None]
    c:f32[5] ys:f32[5] = scan[
      _split_transpose=False
      jaxpr={ lambda ; r:Ref{f32[]} buf:f32[5] i:i32[] x:f32[]. let
          r[...] += x
          u:f32[1] = broadcast_in_dim[broadcast_dimensions=() shape=(1,) sharding=None] x
          nb:f32[5] = dynamic_update_slice buf u i
          t:f32[] <- r[...]
          y:f32[] = mul t 2.0:f32[]
        in (nb, y) }
      length=5
      linear=(False, False, False, False)
      num_carry=1
      num_consts=1
      reverse=REV
      unroll=1
    ] a b is xs
  in (c, ys) })";
  for (const char* rev : {"False", "True"}) {
    std::string t = text;
    t.replace(t.find("REV"), 3, rev);
    check_text(t, {ref_of(Array::scalar<float>(0.5f)), random_array(at(DType::f32, {5}), 1),
                   random_array(at(DType::f32, {5}), 2)});
  }
}

TEST(NativeControl, ScanSwappingCarriesAndScanningOverARef) {
  check_text(R"({ lambda ; a:i32[2] b:i32[2]. let
    c:i32[2] d:i32[2] = scan[_split_transpose=False
      jaxpr={ lambda ; p:i32[2] q:i32[2]. let  in (q, p) }
      length=3 linear=(False, False) num_carry=2 num_consts=0 reverse=False unroll=1] a b
  in (c, d) })",
             {Array::from_vector<int32_t>({1, 2}, {2}), Array::from_vector<int32_t>({3, 4}, {2})});
  check_text(R"({ lambda ; a:Ref{f32[4,3]} s:f32[]. let
    ys:f32[4] = scan[_split_transpose=False
      jaxpr={ lambda ; c:f32[] row:Ref{f32[3]}. let
          cc:f32[2] = broadcast_in_dim[broadcast_dimensions=() shape=(2,) sharding=None] c
          row[1:3] += cc
          v:f32[3] <- row[...]
          y:f32[] = reduce_sum[axes=(0,)] v
        in (y,) }
      length=4 linear=(False, False) num_carry=0 num_consts=1 reverse=False unroll=1] s a
  in (ys,) })",
             {ref_of(random_array(at(DType::f32, {4, 3}), 1)), Array::scalar<float>(1.5f)});
}

TEST(NativeControl, NestedJitWithConstRefs) {
  const char* text = R"({ lambda a:f32[10] b:Ref{f32[10]}; . let
    _:f32[] c:i32[] = jit[
      name=take
      jaxpr={ lambda ; d:f32[10] e:i32[]. let
          f:bool[] = lt e 0:i32[]
          h:i32[] = add e 10:i32[]
          i:i32[] = select_n f e h
          j:f32[1] = dynamic_slice[slice_sizes=(1,)] d i
          _:f32[] = squeeze[dimensions=(0,)] j
        in (_, i) }
    ] a -3:i32[]
    jit[
      name=outer
      jaxpr={ lambda ; k:i32[] l:Ref{f32[10]} m:f32[]. let
          jit[
            name=inner
            jaxpr={ lambda ; k2:i32[] l2:Ref{f32[10]} m2:f32[]. let
                n:f32[1] = broadcast_in_dim[broadcast_dimensions=() shape=(1,) sharding=None] m2
                l2[k2:k2+1] += n
              in () }
          ] k l m
        in () }
    ] c b 1.0:f32[]
  in (c,) })";
  check_text(
      text, {random_array(at(DType::f32, {10}), 1), ref_of(random_array(at(DType::f32, {10}), 2))});
}

TEST(NativeControl, CondClampsIndexAndAcceptsBool) {
  const char* text = R"({ lambda ; a:i32[] b:f32[3] r:Ref{f32[3]}. let
    c:f32[3] = cond[
      branches=(
        { lambda ; d:f32[3] r1:Ref{f32[3]}. let e:f32[3] = sin d in (e,) }
        { lambda ; f:f32[3] r2:Ref{f32[3]}. let r2[...] += f in (f,) }
        { lambda ; g:f32[3] r3:Ref{f32[3]}. let h:f32[3] = mul g 3.0:f32[] in (h,) }
      )
    ] a b r
  in (c,) })";
  for (int i : {-4, 0, 1, 2, 7})
    check_text(text, {Array::scalar<int32_t>(i), random_array(at(DType::f32, {3}), 1),
                      ref_of(random_array(at(DType::f32, {3}), 2))});
  const char* btext = R"({ lambda ; a:bool[] b:f32[3]. let
    c:f32[3] = cond[
      branches=(
        { lambda ; d:f32[3]. let e:f32[3] = sin d in (e,) }
        { lambda ; f:f32[3]. let  in (f,) }
      )
    ] a b
  in (c,) })";
  for (bool p : {false, true})
    check_text(btext, {Array::scalar<bool>(p), random_array(at(DType::f32, {3}), 1)});
}

TEST(NativeControl, CustomVjpCallRunsItsPrimal) {
  JaxprBuilder primal;
  Var x = primal.add_invar(at(DType::f32, {3}));
  Var y = primal.new_var(at(DType::f32, {3}));
  primal.add_eqn_with_outs(Prim::sin, {x}, {}, {y});
  primal.set_outvars({y});
  JaxprBuilder b;
  Var a = b.add_invar(at(DType::f32, {3}));
  Var o = b.new_var(at(DType::f32, {3}));
  b.add_eqn_with_outs(
      Prim::custom_vjp_call, {a},
      {{"call_jaxpr", std::make_shared<const Jaxpr>(primal.finish())}, {"num_res", int64_t{0}}},
      {o});
  b.set_outvars({o});
  testing::expect_matches_interpreter(b.finish(), {random_array(at(DType::f32, {3}), 4)});
}

TEST(NativeApi, OutputsReturnedTwiceAndInputsPassedThrough) {
  check_text("{ lambda ; a:f32[2] b:f32[2]. let c:f32[2] = add a b in (c, c, a, 2.0:f32[]) }",
             {f32s({1, 2}), f32s({3, 4})});
}

TEST(NativeApi, WrongArgumentsThrowNamingThePosition) {
  CompiledFunction f =
      compile_native(parse_jaxpr("{ lambda ; a:f32[2] r:Ref{f32[2]}. let r[...] += a in () }"));
  EXPECT_THROW(f({f32s({1, 2})}), Error);
  EXPECT_THROW(f({f32s({1, 2}), f32s({1, 2})}), Error);  // array where a ref is expected
  EXPECT_THROW(f({f32s({1, 2, 3}), ref_of(f32s({1, 2}))}), Error);
  try {
    f({Array::from_vector<int32_t>({1, 2}, {2}), ref_of(f32s({1, 2}))});
    FAIL() << "expected a type error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("argument 0"), std::string::npos) << e.what();
  }
}

TEST(NativeApi, MalformedJaxprsThrowInsteadOfCrashing) {
  {  // argmax over two axes has no meaning
    JaxprBuilder b;
    Var x = b.add_invar(at(DType::f32, {2, 3}));
    Var o = b.new_var(at(DType::i32, {}));
    b.add_eqn_with_outs(Prim::argmax, {x}, {{"axes", IntList{0, 1}}, {"index_dtype", DType::i32}},
                        {o});
    b.set_outvars({o});
    EXPECT_THROW(compile_native(b.finish()), Error);
  }
  {  // a ref may not be returned
    JaxprBuilder b;
    Var r = b.add_invar(Type::ref(at(DType::f32, {2})));
    b.set_outvars({r});
    EXPECT_THROW(compile_native(b.finish()), Error);
  }
  {  // a variable read before any eqn defines it
    JaxprBuilder b;
    Var x = b.add_invar(at(DType::f32, {2}));
    Var ghost = b.new_var(at(DType::f32, {2}));
    Var o = b.new_var(at(DType::f32, {2}));
    b.add_eqn_with_outs(Prim::add, {x, ghost}, {}, {o});
    b.set_outvars({o});
    EXPECT_THROW(compile_native(b.finish()), Error);
  }
}

TEST(NativeApi, FastTierAndEmittersWork) {
  Jaxpr j = parse_jaxpr(
      "{ lambda ; a:f32[64] b:f32[64]. let c:f32[64] = mul a b; "
      "d:f32[64] = add c 2.0:f32[] in (d,) }");
  CompileOptions o0;
  o0.opt_level = 0;
  testing::expect_matches_interpreter(
      j, {random_array(at(DType::f32, {64}), 1), random_array(at(DType::f32, {64}), 2)}, 1e-6, o0);
  const testing::WithoutCompilationCache fresh_compiles;
  CompiledFunction f = compile_native(j, o0);
  EXPECT_GT(f.timings().lower_ms, 0);
  EXPECT_GT(f.timings().codegen_ms + f.timings().llvm_opt_ms, 0);
  // Each tier's code generator runs at its own level (mlir::ExecutionEngine, used before,
  // ran the optimising one for both).
  EXPECT_EQ(f.timings().codegen_level, 0);
  EXPECT_EQ(compile_native(j, CompileOptions{.opt_level = 3}).timings().codegen_level, 3);
  std::string mlir = emit_mlir(j);
  EXPECT_NE(mlir.find("scf.for"), std::string::npos);
  EXPECT_NE(mlir.find("memref<64xf32>"), std::string::npos);
  std::string ir = emit_llvm_ir(j);
  EXPECT_NE(ir.find("define void @_mlir_ciface_refjit_main"), std::string::npos);
  EXPECT_NE(ir.find("fadd"), std::string::npos);
  std::string s = emit_asm(j);
  EXPECT_NE(s.find("refjit_main"), std::string::npos);
  CompileOptions approx;
  approx.exact_math = false;
  testing::expect_matches_interpreter(
      parse_jaxpr("{ lambda ; a:f32[16]. let b:f32[16] = exp a in (b,) }"),
      {random_array(at(DType::f32, {16}), 3)}, 1e-5, approx);
}

}  // namespace
}  // namespace refjit
