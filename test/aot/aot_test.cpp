// Objects written by refjit::compile_to_object, linked with the system C compiler and
// called through their plain C entry points, must compute what the JIT (compile_native)
// and the interpreter (on grad_jaxpr / vjp_jaxpr / jvp_jaxpr) compute.
#include <cctype>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "aot/aot_util.h"
#include "backend/native.h"
#include "passes/ad/jvp.h"
#include "passes/ad/vjp.h"
#include "refjit/ir/error.h"

namespace refjit::aot_testing {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(rng));
  return v;
}

Array f32(const std::vector<float>& v, Shape s) { return Array::from_vector<float>(v, s); }
Array i32(const std::vector<int32_t>& v, Shape s) { return Array::from_vector<int32_t>(v, s); }

std::vector<float> floats(const Array& a) {
  auto s = a.values<float>();
  return {s.begin(), s.end()};
}

AotOptions named(const std::string& name, AotMode mode = AotMode::function) {
  AotOptions o;
  o.name = name;
  o.mode = mode;
  return o;
}

constexpr const char* kElementwise = R"(
{ lambda ; x:f32[5] y:f32[5] s:f32[] flag:bool[]. let
    a:f32[5] = mul x y
    b:f32[5] = sin a
    c:f32[5] = add b s
    n:f32[5] = neg c
    d:f32[5] = select_n flag n c
    m:f32[] = reduce_max[axes=(0,)] d
  in (d, m) })";

void check_elementwise(const std::string& cpu) {
  Jaxpr j = parse_jaxpr(kElementwise);
  AotOptions o = named("ew_" + std::string(cpu == "x86-64-v3" ? "v3" : cpu));
  o.cpu = cpu;
  AotLibrary lib(j, o);
  using Fn = int (*)(const float*, const float*, float, bool, float*, float*);
  auto fn = lib.get<Fn>(o.name);
  ASSERT_NE(fn, nullptr);
  std::vector<float> x = random_floats(5, 1), y = random_floats(5, 2);
  CompiledFunction jit = compile_native(j);
  for (bool flag : {false, true}) {
    float s = 0.25f;
    std::vector<float> d(5, -99.0f);
    float m = -99.0f;
    ASSERT_EQ(fn(x.data(), y.data(), s, flag, d.data(), &m), 0);
    std::vector<RtValue> want =
        jit({f32(x, {5}), f32(y, {5}), Array::scalar<float>(s), Array::scalar<bool>(flag)});
    expect_floats_near(d, floats(arr(want[0])), 1e-6, "d");
    EXPECT_NEAR(m, arr(want[1]).values<float>()[0], 1e-6);
    // select_n picks the second case (c) for true, the first (n = -c) for false.
    EXPECT_NEAR(d[0], (flag ? 1 : -1) * (std::sin(x[0] * y[0]) + s), 1e-5);
  }
}

TEST(AotObject, ElementwiseProgramMatchesTheJitOnTheHostCpu) { check_elementwise("host"); }
TEST(AotObject, ElementwiseProgramMatchesTheJitForTheGenericCpu) { check_elementwise("generic"); }
TEST(AotObject, ElementwiseProgramMatchesTheJitForANamedCpu) { check_elementwise("x86-64-v3"); }

TEST(AotObject, DotGeneralMatchesTheJit) {
  Jaxpr j = parse_jaxpr(R"(
{ lambda ; a:f32[2,3] b:f32[3,4]. let
    e:f32[2,4] = dot_general[dimension_numbers=(([1], [0]), ([], [])) precision=None preferred_element_type=float32] a b
  in (e,) })");
  AotLibrary lib(j, named("dot"));
  auto fn = lib.get<int (*)(const float*, const float*, float*)>("dot");
  ASSERT_NE(fn, nullptr);
  std::vector<float> a = random_floats(6, 3), b = random_floats(12, 4), e(8);
  ASSERT_EQ(fn(a.data(), b.data(), e.data()), 0);
  std::vector<RtValue> want = compile_native(j)({f32(a, {2, 3}), f32(b, {3, 4})});
  expect_floats_near(e, floats(arr(want[0])), 1e-6, "e");
  double e12 = 0;  // row 1, column 2 by hand
  for (int k = 0; k < 3; ++k) e12 += double(a[3 + k]) * b[k * 4 + 2];
  EXPECT_NEAR(e[1 * 4 + 2], e12, 1e-5);
}

TEST(AotObject, ScanWithACarryMatchesTheJit) {
  Jaxpr j = parse_jaxpr(R"(
{ lambda ; x:f32[8] k:i32[6]. let
    y:f32[8] ys:f32[6] = scan[jaxpr={ lambda ; c:f32[8] i:i32[]. let
        v:f32[1] = dynamic_slice[slice_sizes=(1,)] c i
        w:f32[1] = mul v 2.0:f32[]
        n:f32[8] = dynamic_update_slice c w i
        s:f32[] = reduce_sum[axes=(0,)] n
      in (n, s) } length=6 linear=(False, False) num_carry=1 num_consts=0 reverse=False unroll=1 _split_transpose=False] x k
  in (y, ys) })");
  AotLibrary lib(j, named("scan_carry"));
  auto fn = lib.get<int (*)(const float*, const int32_t*, float*, float*)>("scan_carry");
  ASSERT_NE(fn, nullptr);
  std::vector<float> x = random_floats(8, 5), y(8), ys(6);
  std::vector<int32_t> k = {0, 3, 3, 7, 9, 1};  // 9 clamps to 7
  const std::vector<float> x_before = x;
  ASSERT_EQ(fn(x.data(), k.data(), y.data(), ys.data()), 0);
  EXPECT_EQ(x, x_before) << "a non-ref input was modified";
  std::vector<RtValue> want = compile_native(j)({f32(x, {8}), i32(k, {6})});
  expect_floats_near(y, floats(arr(want[0])), 1e-6, "y");
  expect_floats_near(ys, floats(arr(want[1])), 1e-6, "ys");
  EXPECT_FLOAT_EQ(y[3], x[3] * 4);  // doubled twice
  EXPECT_FLOAT_EQ(y[7], x[7] * 4);  // 7 and the clamped 9
}

TEST(AotObject, RefArgumentsAreUpdatedInPlaceLikeTheJit) {
  Jaxpr j = parse_jaxpr(R"(
{ lambda total:Ref{f32[]}; x:f32[3] acc:Ref{f32[3]} count:Ref{i32[]}. let
    acc[...] += x
    c:i32[] <- count[...]
    d:i32[] = add c 1:i32[]
    count[...] <- d
    s:f32[] = reduce_sum[axes=(0,)] x
    total[...] += s
  in (s,) })");
  AotLibrary lib(j, named("refs"));
  auto fn = lib.get<int (*)(float*, const float*, float*, int32_t*, float*)>("refs");
  ASSERT_NE(fn, nullptr);
  float total = 100;
  std::vector<float> x = {1, 2, 3.5f}, acc = {10, 20, 30};
  int32_t count = 7;
  float s = 0;
  ASSERT_EQ(fn(&total, x.data(), acc.data(), &count, &s), 0);
  ASSERT_EQ(fn(&total, x.data(), acc.data(), &count, &s), 0);  // twice: effects accumulate

  std::vector<RtValue> args = {ref_of(Array::scalar<float>(100)), f32({1, 2, 3.5f}, {3}),
                               ref_of(f32({10, 20, 30}, {3})), ref_of(Array::scalar<int32_t>(7))};
  CompiledFunction jit = compile_native(j);
  jit(args);
  std::vector<RtValue> want = jit(args);
  EXPECT_FLOAT_EQ(s, arr(want[0]).values<float>()[0]);
  EXPECT_FLOAT_EQ(total, ref_value(args[0]).values<float>()[0]);
  expect_floats_near(acc, floats(ref_value(args[2])), 0, "acc");
  EXPECT_EQ(count, ref_value(args[3]).values<int32_t>()[0]);
  EXPECT_EQ(count, 9);
  EXPECT_FLOAT_EQ(total, 113);
}

TEST(AotObject, SeedTakeProgramAddsIntoItsRefLikeTheJit) {
  Jaxpr j = parse_jaxpr(read_text(test_root() / "lit" / "Inputs" / "take_vjp.jaxpr"));
  AotLibrary lib(j, named("take"));
  auto fn = lib.get<int (*)(const float*, float*)>("take");
  ASSERT_NE(fn, nullptr);
  std::vector<float> a = random_floats(10, 6), b = random_floats(10, 7);
  std::vector<RtValue> args = {f32(a, {10}), ref_of(f32(b, {10}))};
  compile_native(j)(args);
  ASSERT_EQ(fn(a.data(), b.data()), 0);
  expect_floats_near(b, floats(ref_value(args[1])), 0, "b");
  EXPECT_EQ(b[3], random_floats(10, 7)[3] + 1.0f);
}

TEST(AotObject, NullPointerArgumentsAreRefusedWithoutWriting) {
  Jaxpr j = parse_jaxpr(kElementwise);
  AotLibrary lib(j, named("ew_null"));
  auto fn = lib.get<int (*)(const float*, const float*, float, bool, float*, float*)>("ew_null");
  ASSERT_NE(fn, nullptr);
  std::vector<float> x(5, 1), d(5, -7);
  float m = -7;
  EXPECT_EQ(fn(x.data(), nullptr, 0, false, d.data(), &m), 2);
  EXPECT_EQ(fn(x.data(), x.data(), 0, false, d.data(), nullptr), 2);
  EXPECT_EQ(d, std::vector<float>(5, -7));
  EXPECT_EQ(m, -7);
}

// ---- Autodiff entry points ---------------------------------------------------------------

Jaxpr seed_loss() {
  return parse_jaxpr(
      read_text(test_root().parent_path() / "examples" / "aot" / "loss_slice1.jaxpr"));
}

struct SeedInputs {
  float w = 2.0f;
  std::vector<float> init = std::vector<float>(24, 0.0f);
  std::vector<float> target = random_floats(12, 11, 0, 1);
  std::vector<int32_t> rows = {0, 1, 1, 2, 2, 0, 0, 0, 1, 1, 2, 2};
  std::vector<int32_t> cols = {0, 3, 1, 0, 2, 1, 3, 2, 0, 0, 1, 3};
  std::vector<float> vals = random_floats(6, 12, 0.1, 1);

  std::vector<RtValue> args() const {
    return {Array::scalar<float>(w), f32(init, {3, 8}), f32(target, {3, 4}),
            i32(rows, {6, 2}),       i32(cols, {6, 2}), f32(vals, {6})};
  }
};

TEST(AotVjp, SeedLossForwardAndBackwardMatchTheInterpretedGradient) {
  Jaxpr f = seed_loss();
  AotOptions o = named("loss", AotMode::vjp);
  o.accum = {AotAccum::value,     AotAccum::dont_want, AotAccum::dont_want,
             AotAccum::dont_want, AotAccum::dont_want, AotAccum::dont_want};
  AotLibrary lib(f, o);
  ASSERT_EQ(lib.artifact().symbols, (std::vector<std::string>{"loss_fwd", "loss_bwd"}));
  ASSERT_GT(lib.artifact().residual_bytes, 0);
  using Fwd = int (*)(float, const float*, const float*, const int32_t*, const int32_t*,
                      const float*, float*, void*);
  using Bwd = int (*)(const void*, float, float*);
  auto fwd = lib.get<Fwd>("loss_fwd");
  auto bwd = lib.get<Bwd>("loss_bwd");
  ASSERT_TRUE(fwd && bwd);

  SeedInputs in;
  std::vector<RtValue> want = interpret(grad_jaxpr(f, {0}), in.args());
  float want_loss = arr(want[0]).values<float>()[0];
  float want_grad = arr(want[1]).values<float>()[0];
  ASSERT_NE(want_grad, 0.0f);

  std::vector<std::byte> res(static_cast<size_t>(lib.artifact().residual_bytes) + 64);
  void* res_ptr = res.data();
  float loss = 0;
  ASSERT_EQ(fwd(in.w, in.init.data(), in.target.data(), in.rows.data(), in.cols.data(),
                in.vals.data(), &loss, res_ptr),
            0);
  EXPECT_NEAR(loss, want_loss, 1e-5 * std::abs(want_loss));
  const std::vector<std::byte> res_after_fwd = res;

  float g1 = 0, g2 = 0, g3 = 0;
  ASSERT_EQ(bwd(res_ptr, 1.0f, &g1), 0);
  EXPECT_NEAR(g1, want_grad, 1e-4 * std::abs(want_grad));
  ASSERT_EQ(bwd(res_ptr, 2.5f, &g2), 0);  // another cotangent, same residuals
  EXPECT_NEAR(g2, 2.5f * want_grad, 1e-4 * std::abs(want_grad));
  ASSERT_EQ(bwd(res_ptr, 1.0f, &g3), 0);
  EXPECT_EQ(g3, g1);
  EXPECT_TRUE(res == res_after_fwd) << "the backward modified the residuals";
}

TEST(AotVjp, RefAccumulatorsAddIntoTheCallersArraysAndValuesAreOverwritten) {
  Jaxpr f = parse_jaxpr(R"(
{ lambda ; x:f32[3] y:f32[3] r:Ref{f32[3]}. let
    v:f32[3] <- r[...]
    s:f32[3] = sin x
    a:f32[3] = mul s y
    b:f32[3] = mul a v
    t:f32[] = reduce_sum[axes=(0,)] b
  in (t,) })");
  AotOptions o = named("sinmul", AotMode::vjp);
  o.accum = {AotAccum::ref, AotAccum::value, AotAccum::ref};
  AotLibrary lib(f, o);
  using Fwd = int (*)(const float*, const float*, float*, float*, void*);
  using Bwd = int (*)(const void*, float, float*, float*, float*);
  auto fwd = lib.get<Fwd>("sinmul_fwd");
  auto bwd = lib.get<Bwd>("sinmul_bwd");
  ASSERT_TRUE(fwd && bwd);
  std::vector<float> x = random_floats(3, 21), y = random_floats(3, 22), r = random_floats(3, 23);

  // The oracle: the same vjp programs on the interpreter.
  VjpJaxprs v =
      vjp_jaxpr(f, {true, true, true}, {AccumKind::ref, AccumKind::value, AccumKind::ref});
  ASSERT_TRUE(v.ref_residuals.empty());
  std::vector<RtValue> fwd_out =
      interpret(v.forward, {f32(x, {3}), f32(y, {3}), ref_of(f32(r, {3}))});
  std::vector<float> gx0 = {1, 2, 3}, gr0 = {-1, 0, 1};
  std::vector<RtValue> bwd_args(fwd_out.begin() + 1, fwd_out.end());
  RtValue gx_ref = ref_of(f32(gx0, {3})), gr_ref = ref_of(f32(gr0, {3}));
  bwd_args.push_back(gx_ref);
  bwd_args.push_back(gr_ref);
  bwd_args.push_back(Array::scalar<float>(0.5f));
  std::vector<RtValue> grads = interpret(v.backward, bwd_args);

  std::vector<std::byte> res(static_cast<size_t>(lib.artifact().residual_bytes) + 64);
  float t = 0;
  ASSERT_EQ(fwd(x.data(), y.data(), r.data(), &t, res.data()), 0);
  EXPECT_NEAR(t, arr(fwd_out[0]).values<float>()[0], 1e-6);
  std::vector<float> gx = gx0, gr = gr0, gy(3, -99);
  ASSERT_EQ(bwd(res.data(), 0.5f, gx.data(), gy.data(), gr.data()), 0);
  expect_floats_near(gx, floats(ref_value(gx_ref)), 1e-6, "grad x (+=)");
  expect_floats_near(gy, floats(arr(grads.at(0))), 1e-6, "grad y");
  expect_floats_near(gr, floats(ref_value(gr_ref)), 1e-6, "grad r (+=)");
  // By hand: d t / d x = cos(x) * y * r, added to the initial contents.
  EXPECT_NEAR(gx[1], gx0[1] + 0.5 * std::cos(x[1]) * y[1] * r[1], 1e-5);
  // A second call adds again into the ref accumulators and overwrites the value one.
  std::vector<float> gx_first = gx, gy_first = gy;
  ASSERT_EQ(bwd(res.data(), 0.5f, gx.data(), gy.data(), gr.data()), 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(gx[i] - gx_first[i], gx_first[i] - gx0[i], 1e-5);
    EXPECT_EQ(gy[i], gy_first[i]);
  }
}

// Residuals of mixed widths (an f32 scalar followed by f64 values) need padding: the
// header's layout check must accept the layout the object assumes, and values must arrive.
TEST(AotVjp, MixedWidthResidualsArePaddedLikeACStruct) {
  Jaxpr f = parse_jaxpr(R"(
{ lambda ; x:f32[] y:f64[3]. let
    s:f32[] = sin x
    sd:f64[] = convert_element_type[new_dtype=float64 weak_type=False] s
    p:f64[3] = mul y sd
    q:f64[3] = sin p
    t:f64[] = reduce_sum[axes=(0,)] q
  in (t,) })");
  AotLibrary lib(f, named("mixedw", AotMode::vjp));
  const std::string& h = lib.artifact().header;
  EXPECT_NE(h.find("float r0;"), std::string::npos) << h;
  EXPECT_NE(h.find("offsetof(mixedw_residuals, r1) == 8"), std::string::npos) << h;
  auto [rc, out] = run_command("cc -std=c99 -Wall -Werror -pedantic -fsyntax-only -x c " +
                               lib.header().string() + " 2>&1");
  EXPECT_EQ(rc, 0) << out;

  using Fwd = int (*)(float, const double*, double*, void*);
  using Bwd = int (*)(const void*, double, float*, double*);
  auto fwd = lib.get<Fwd>("mixedw_fwd");
  auto bwd = lib.get<Bwd>("mixedw_bwd");
  ASSERT_TRUE(fwd && bwd);
  std::vector<double> y = {0.5, -1.5, 2.0}, gy(3);
  std::vector<std::byte> res(static_cast<size_t>(lib.artifact().residual_bytes));
  double t = 0;
  float gx = 0;
  ASSERT_EQ(fwd(0.7f, y.data(), &t, res.data()), 0);
  ASSERT_EQ(bwd(res.data(), 1.0, &gx, gy.data()), 0);
  std::vector<RtValue> want = interpret(
      grad_jaxpr(f, {0, 1}), {Array::scalar<float>(0.7f), Array::from_vector<double>(y, {3})});
  EXPECT_NEAR(t, arr(want[0]).as_double(0), 1e-12);
  EXPECT_NEAR(gx, arr(want[1]).as_double(0), 1e-6);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(gy[i], arr(want[2]).as_double(i), 1e-12);
}

// A linear program's backward needs nothing from the forward: the struct still exists
// (C has no empty structs) and the pair still works.
TEST(AotVjp, LinearProgramGetsAPlaceholderResidualStruct) {
  Jaxpr f = parse_jaxpr(R"(
{ lambda ; x:f32[4]. let
    y:f32[4] = mul x 3.0:f32[]
    t:f32[] = reduce_sum[axes=(0,)] y
  in (t,) })");
  AotOptions o = named("lin", AotMode::vjp);
  o.opt_level = 0;  // the unoptimised pipeline works too
  AotLibrary lib(f, o);
  EXPECT_NE(lib.artifact().header.find("char unused_;"), std::string::npos);
  auto fwd = lib.get<int (*)(const float*, float*, void*)>("lin_fwd");
  auto bwd = lib.get<int (*)(const void*, float, float*)>("lin_bwd");
  ASSERT_TRUE(fwd && bwd);
  std::vector<float> x = {1, 2, 3, 4}, g(4);
  std::vector<std::byte> res(static_cast<size_t>(lib.artifact().residual_bytes));
  float t = 0;
  ASSERT_EQ(fwd(x.data(), &t, res.data()), 0);
  EXPECT_EQ(t, 30.0f);
  ASSERT_EQ(bwd(res.data(), 2.0f, g.data()), 0);
  EXPECT_EQ(g, std::vector<float>(4, 6.0f));
}

TEST(AotGrad, GradientEntryMatchesTheInterpretedGradJaxpr) {
  Jaxpr f = parse_jaxpr(R"(
{ lambda ; x:f32[] y:f32[] n:i32[]. let
    a:f32[] = mul x y
    b:f32[] = sin x
    c:f32[] = add a b
  in (c,) })");
  AotLibrary lib(f, named("g", AotMode::grad));
  auto fn = lib.get<int (*)(float, float, int32_t, float*, float*, float*)>("g");
  ASSERT_NE(fn, nullptr);
  float out = 0, gx = 0, gy = 0;
  ASSERT_EQ(fn(2, 3, 5, &out, &gx, &gy), 0);
  std::vector<RtValue> want =
      interpret(grad_jaxpr(f, {0, 1}),
                {Array::scalar<float>(2), Array::scalar<float>(3), Array::scalar<int32_t>(5)});
  EXPECT_FLOAT_EQ(out, arr(want[0]).values<float>()[0]);
  EXPECT_FLOAT_EQ(gx, arr(want[1]).values<float>()[0]);
  EXPECT_FLOAT_EQ(gy, arr(want[2]).values<float>()[0]);
  EXPECT_NEAR(gx, 3 + std::cos(2.0), 1e-6);
}

TEST(AotGrad, WrtSelectsAndOrdersTheGradients) {
  Jaxpr f = seed_loss();
  AotOptions o = named("loss_grad", AotMode::grad);
  o.wrt = {0};
  AotLibrary lib(f, o);
  using Fn = int (*)(float, const float*, const float*, const int32_t*, const int32_t*,
                     const float*, float*, float*);
  auto fn = lib.get<Fn>("loss_grad");
  ASSERT_NE(fn, nullptr);
  SeedInputs in;
  float loss = 0, gw = 0;
  ASSERT_EQ(fn(in.w, in.init.data(), in.target.data(), in.rows.data(), in.cols.data(),
               in.vals.data(), &loss, &gw),
            0);
  std::vector<RtValue> want = interpret(grad_jaxpr(f, {0}), in.args());
  EXPECT_NEAR(gw, arr(want[1]).values<float>()[0], 1e-4 * std::abs(arr(want[1]).as_double(0)));
}

TEST(AotJvp, JvpEntryMatchesTheInterpretedJvpJaxpr) {
  Jaxpr f = parse_jaxpr(R"(
{ lambda ; x:f32[4] y:f32[4] k:i32[]. let
    s:f32[4] = sin x
    a:f32[4] = mul s y
    t:f32[] = reduce_sum[axes=(0,)] a
  in (a, t) })");
  AotLibrary lib(f, named("jv", AotMode::jvp));
  using Fn = int (*)(const float*, const float*, int32_t, const float*, const float*, float*,
                     float*, float*, float*);
  auto fn = lib.get<Fn>("jv");
  ASSERT_NE(fn, nullptr);
  std::vector<float> x = random_floats(4, 31), y = random_floats(4, 32), tx = random_floats(4, 33),
                     ty = random_floats(4, 34);
  std::vector<float> a(4), ta(4);
  float t = 0, tt = 0;
  ASSERT_EQ(fn(x.data(), y.data(), 3, tx.data(), ty.data(), a.data(), &t, ta.data(), &tt), 0);
  std::vector<RtValue> want =
      interpret(jvp_jaxpr(f, {true, true, false}),
                {f32(x, {4}), f32(y, {4}), Array::scalar<int32_t>(3), f32(tx, {4}), f32(ty, {4})});
  expect_floats_near(a, floats(arr(want[0])), 1e-6, "a");
  EXPECT_NEAR(t, arr(want[1]).as_double(0), 1e-5);
  expect_floats_near(ta, floats(arr(want[2])), 1e-6, "tangent a");
  EXPECT_NEAR(tt, arr(want[3]).as_double(0), 1e-5);
  EXPECT_NEAR(ta[2], std::cos(x[2]) * tx[2] * y[2] + std::sin(x[2]) * ty[2], 1e-5);
}

// ---- The object and the header as a C toolchain sees them --------------------------------

// Symbols libc and libm provide that generated code may call.
const std::set<std::string> kLibcLibm = {
    "malloc",     "free",      "memcpy",     "memmove",  "memset", "abort", "sinf",   "cosf",
    "tanf",       "expf",      "logf",       "powf",     "sqrtf",  "tanhf", "expm1f", "log1pf",
    "sin",        "cos",       "tan",        "exp",      "log",    "pow",   "sqrt",   "tanh",
    "expm1",      "log1p",     "floorf",     "ceilf",    "roundf", "floor", "ceil",   "round",
    "fmodf",      "fmod",      "exp2f",      "exp2",     "log2f",  "log2",  "log10f", "log10",
    "fabsf",      "fabs",      "rintf",      "rint",     "atan2f", "atan2", "erff",   "erf",
    "roundevenf", "roundeven", "nearbyintf", "nearbyint"};

void expect_only_libc_libm(const fs::path& object) {
  auto [rc, out] = run_command("nm -u --format=just-symbols " + object.string());
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  std::string sym;
  while (lines >> sym) EXPECT_TRUE(kLibcLibm.count(sym)) << "undefined symbol " << sym;
}

TEST(AotToolchain, ObjectsNeedNothingButLibcAndLibm) {
  Jaxpr f = seed_loss();
  AotOptions o = named("loss_nm", AotMode::vjp);
  AotLibrary vjp(f, o);
  expect_only_libc_libm(vjp.object());
  AotLibrary refs(parse_jaxpr(read_text(test_root() / "lit" / "Inputs" / "take_vjp.jaxpr")),
                  named("take_nm"));
  expect_only_libc_libm(refs.object());
  // Only the entry points are exported.
  auto [rc, out] =
      run_command("nm -g --defined-only --format=just-symbols " + vjp.object().string());
  EXPECT_EQ(out, "loss_nm_bwd\nloss_nm_fwd\n");
}

TEST(AotToolchain, HeaderCompilesAsStrictC99AndMatchesTheObjectsLayout) {
  Jaxpr f = parse_jaxpr(R"(
{ lambda ; x:f32[3] b:bool[2] n:i64[] r:Ref{f64[2,2]}. let
    s:f32[3] = sin x
    t:f32[] = reduce_sum[axes=(0,)] s
    c:f64[2,2] <- r[...]
    d:f64[2,2] = mul c c
    r[...] <- d
  in (t, b, n) })");
  AotLibrary lib(f, named("mixed", AotMode::vjp));
  // The declarations with line breaks and indentation collapsed to single spaces.
  std::string h;
  for (char ch : lib.artifact().header)
    if (!(std::isspace(static_cast<unsigned char>(ch)) && !h.empty() && h.back() == ' '))
      h += std::isspace(static_cast<unsigned char>(ch)) ? ' ' : ch;
  EXPECT_NE(h.find("int mixed_fwd(const float* x, const bool* b, int64_t n, double* r, "
                   "float* out0, bool* out1, int64_t* out2, mixed_residuals* res);"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("int mixed_bwd(const mixed_residuals* res, float ct_out0, const bool* "
                   "ct_out1, int64_t ct_out2, float* grad_x);"),
            std::string::npos)
      << h;
  auto [rc, out] = run_command("cc -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c " +
                               lib.header().string() + " 2>&1");
  EXPECT_EQ(rc, 0) << out << "\n" << h;
  // And from C++ (extern "C").
  auto [rc2, out2] = run_command("c++ -std=c++17 -Wall -Werror -fsyntax-only -x c++ " +
                                 lib.header().string() + " 2>&1");
  EXPECT_EQ(rc2, 0) << out2;
}

TEST(AotErrors, BadNamesCpusAndAccumulatorsAreReported) {
  Jaxpr f = parse_jaxpr(kElementwise);
  EXPECT_THROW(compile_to_object(f, named("int")), Error);
  EXPECT_THROW(compile_to_object(f, named("3d")), Error);
  AotOptions cpu = named("ok");
  cpu.cpu = "no-such-cpu";
  try {
    compile_to_object(f, cpu);
    ADD_FAILURE() << "an unknown CPU was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown CPU 'no-such-cpu'"), std::string::npos);
  }
  AotOptions few = named("ok", AotMode::vjp);
  few.accum = {AotAccum::value};
  Jaxpr g = parse_jaxpr(R"({ lambda ; x:f32[] r:Ref{f32[]}. let
      y:f32[] = sin x
    in (y,) })");
  EXPECT_THROW(compile_to_object(g, few), Error);
  AotOptions ref_value_accum = named("ok", AotMode::vjp);
  ref_value_accum.accum = {AotAccum::value, AotAccum::value};
  EXPECT_THROW(compile_to_object(g, ref_value_accum), RefError);
}

}  // namespace
}  // namespace refjit::aot_testing
