// Autodiff of the ref primitives (REFS.md 2.1-2.5): internal refs, differentiated Ref
// arguments, plumbing refs and error E1.
#include <gtest/gtest.h>

#include "passes/ad/linearize.h"
#include "passes/ad/transpose.h"
#include "passes/ad/vjp.h"
#include "refjit/ir/error.h"
#include "test/passes/ad_check.h"

namespace refjit {
namespace {

using namespace refjit::testing;

AdCase Case(const std::string& text, std::map<size_t, Array> fixed = {}) {
  AdCase c{parse(text)};
  c.fixed = std::move(fixed);
  return c;
}

Array i32s(std::vector<int32_t> v, Shape s) { return Array::from_vector<int32_t>(v, s); }

TEST(RefAd, InternalRefWithWholeReadsAndWrites) {
  check_ad(Case(R"({ lambda ; a:f64[3] b:f64[3]. let
    r:Ref{f64[3]} = new_ref a
    c:f64[3] <- r[...]
    d:f64[3] = mul c b
    e:f64[3], r[...] <- r[...], d
    r[...] += e
    f:f64[3] = freeze r
    g:f64[3] = sin f
  in (g, e) })"));
}

TEST(RefAd, InternalRefWithSlicesIndicesAndIndexArrays) {
  check_ad(Case(R"({ lambda ; a:f64[6,2] b:f64[2,2] i:i32[] j:i32[3]. let
    r:Ref{f64[6,2]} = new_ref a
    c:f64[2,2] <- r[i:i+2]
    d:f64[2,2] = mul c b
    r[1:5:2] <- d
    e:f64[3,2] <- r[j]
    r[j] += e
    f:f64[2] <- r[3]
    g:f64[2] = cos f
    r[0] += g
    h:f64[6,2] = freeze r
  in (h,) })",
                {{2, i32(2)}, {3, i32s({5, 0, 5}, {3})}}));
}

// A run of a ref read and written back one column over after a copy of its first element (an
// insert in place): the transpose of the write is one shift_add on the ref's cotangent that also
// does the read's transpose (passes/ad/window_shift.h). Derivatives against central
// differences and the transpose identity, on windows that overlap, clamp, or sit in other rows.
const char* kRefInsert = R"({ lambda ; a:f64[3,8] w:f64[4] b:i32[] c:i32[] d:i32[] e:i32[]. let
    r:Ref{f64[3,8]} = new_ref a
    v:f64[4] <- r[b,c:c+4]
    f:f64[1] = slice[limit_indices=(1,) start_indices=(0,) strides=None] v
    u:f64[5] = concatenate[dimension=0] f v
    _:f64[5], r[d,e:e+5] <- r[d,e:e+5], u
    g:f64[4] <- r[d,e:e+4]
    h:f64[4] = mul g w
    r[b,c:c+4] += h
    x:f64[3,8] = freeze r
  in (x,) })";

TEST(RefAd, AReadRunWrittenBackIsOneShiftOfTheCotangent) {
  const Jaxpr f = parse(kRefInsert);
  const Linearized l = linearize_jaxpr(f, {true, true, false, false, false, false});
  const Jaxpr t = transpose_jaxpr(l.linear, l.num_residuals, {AccumKind::value, AccumKind::value});
  EXPECT_EQ(count_prim(print_jaxpr(t), "shift_add"), 1) << print_jaxpr(t);
  for (auto [b, c, d, e] : std::vector<std::array<int32_t, 4>>{
           {1, 2, 1, 3}, {1, 2, 1, 2}, {2, 5, 2, 1}, {0, 1, 2, 0}, {1, -3, 1, 9}}) {
    SCOPED_TRACE(::testing::Message() << "b=" << b << " c=" << c << " d=" << d << " e=" << e);
    check_ad(Case(kRefInsert, {{2, i32(b)}, {3, i32(c)}, {4, i32(d)}, {5, i32(e)}}));
  }
}

TEST(RefAd, AReadRunWrittenBackAfterAnotherAccessIsNotAShift) {
  // The ref is read between the run's read and its write: the read's transpose cannot move to
  // the write, so the general path (a swap, then an addupdate) is taken, with the same
  // derivatives.
  std::string text = kRefInsert;
  text.insert(text.find("    u:f64[5]"), "    q:f64[3,8] <- r[...]\n");
  text.replace(text.find("in (x,)"), 7, "in (x, q)");
  const Jaxpr f = parse(text);
  const Linearized l = linearize_jaxpr(f, {true, true, false, false, false, false});
  const Jaxpr t = transpose_jaxpr(l.linear, l.num_residuals, {AccumKind::value, AccumKind::value});
  EXPECT_EQ(count_prim(print_jaxpr(t), "shift_add"), 0) << print_jaxpr(t);
  check_ad(Case(text, {{2, i32(1)}, {3, i32(2)}, {4, i32(1)}, {5, i32(3)}}));
}

TEST(RefAd, ZeroInitializedInternalRefStillGetsATangentRef) {
  // new_ref of a constant: its tangent ref starts at zero and receives x's tangent.
  check_ad(Case(R"({ lambda ; a:f64[]. let
    b:f64[] = mul a a
    r:Ref{f64[]} = new_ref 0.0:f64[]
    r[...] <- b
    c:f64[] <- r[...]
    r[...] += c
    d:f64[] = freeze r
  in (d,) })"));
}

TEST(RefAd, DifferentiatedRefArgumentsReadAndWritten) {
  check_ad(Case(R"({ lambda ; r:Ref{f64[4]} x:f64[2] i:i32[]. let
    a:f64[2] <- r[i:i+2]
    b:f64[2] = mul a x
    c:f64[2], r[1:3] <- r[1:3], b
    o:f64[4] = broadcast_in_dim[broadcast_dimensions=() shape=(4,) sharding=None] 1.0:f64[]
    r[...] += o
    d:f64[] = reduce_sum[axes=(0,)] c
  in (d,) })",
                {{2, i32(1)}}));
}

TEST(RefAd, PlumbingRefReceivesStopGradientValues) {
  // foo(x, plumbing): y = x + x; plumbing[...] += stop_gradient(y); return y
  Jaxpr f = parse(R"({ lambda ; x:f32[] p:Ref{f32[]}. let
    y:f32[] = add x x
    s:f32[] = stop_gradient y
    p[...] += s
  in (y,) })");
  Jaxpr g = grad_jaxpr(f, {0});
  RefBufferPtr p = ref_of(f32(1.0f));
  auto out = run(g, {f32(3.0f), p});
  EXPECT_EQ(arr(out[1]).as_double(0), 2.0);
  EXPECT_EQ(p->value().as_double(0), 7.0);  // the forward ran once
}

TEST(RefAd, WritingDifferentiatedValueIntoPlumbingRefIsE1) {
  // err6(x, plumbing): y = x + x; plumbing[...] += y
  Jaxpr f = parse(R"({ lambda ; x:f32[] p:Ref{f32[]}. let
    y:f32[] = add x x
    p[...] += y
  in (y,) })");
  try {
    jvp_jaxpr(f, {true, false});
    FAIL() << "expected E1";
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), "E1");
    const std::string m = e.what();
    EXPECT_NE(m.find("eqn 1 (`addupdate`)"), std::string::npos) << m;
    EXPECT_NE(m.find("ref argument"), std::string::npos) << m;
    EXPECT_NE(m.find("position 1"), std::string::npos) << m;
    EXPECT_NE(m.find("stop_gradient"), std::string::npos) << m;
    EXPECT_NE(m.find("differentiated argument"), std::string::npos) << m;
  }
  EXPECT_THROW(grad_jaxpr(f, {0}), RefError);
  // Differentiating w.r.t. the ref too makes it fine.
  EXPECT_NO_THROW(jvp_jaxpr(f, {true, true}));
}

TEST(RefAd, SwapIntoClosedOverRefIsE1) {
  Jaxpr f = parse(R"({ lambda c:Ref{f32[]}; x:f32[]. let
    y:f32[] = sin x
    c[...] <- y
  in (y,) })");
  try {
    jvp_jaxpr(f, {true});
    FAIL() << "expected E1";
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), "E1");
    EXPECT_NE(std::string(e.what()).find("closed-over ref"), std::string::npos) << e.what();
  }
}

TEST(RefAd, GradWithRespectToRefArgumentIsE2) {
  Jaxpr f = parse(R"({ lambda ; r:Ref{f32[]}. let a:f32[] <- r[...] in (a,) })");
  try {
    grad_jaxpr(f, {0});
    FAIL() << "expected E2";
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), "E2");
    EXPECT_NE(std::string(e.what()).find("with_refs"), std::string::npos);
  }
}

TEST(RefAd, ValueAccumulatorForRefArgumentIsE5) {
  Jaxpr f = parse(R"({ lambda ; r:Ref{f32[]}. let a:f32[] <- r[...] in (a,) })");
  try {
    vjp_jaxpr(f, {true}, {AccumKind::value});
    FAIL() << "expected E5";
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), "E5");
  }
}

TEST(RefAd, DontWantOnRefArgumentStillPropagatesThroughTheRef) {
  // r[...] = y * 2; return r[...]: y's gradient flows through the ref even if r's is unwanted.
  Jaxpr f = parse(R"({ lambda ; r:Ref{f32[]} y:f32[]. let
    a:f32[] = mul y 2.0:f32[]
    r[...] <- a
    b:f32[] <- r[...]
  in (b,) })");
  VjpJaxprs v = vjp_jaxpr(f, {true, true}, {AccumKind::dont_want, AccumKind::value});
  auto fwd = run(v.forward, {ref_of(f32(5.0f)), f32(1.0f)});
  std::vector<RtValue> args(fwd.begin() + 1, fwd.end());
  args.push_back(f32(1.0f));
  auto out = run(v.backward, args);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(arr(out[0]).as_double(0), 2.0);
}

TEST(RefAd, LinearizeSavesReadValuesNotRefs) {
  // Reads of the primal ref happen in the forward pass: the residual is cos of the read value.
  Jaxpr f = parse(R"({ lambda ; r:Ref{f32[8]} i:i32[]. let
    a:f32[2] <- r[i:i+2]
    b:f32[2] = sin a
    r[i:i+2] <- b
  in () })");
  Linearized l = linearize_jaxpr(f, {true, false});
  for (int k = 0; k < l.num_residuals; ++k)
    EXPECT_FALSE(l.linear.type_of(l.linear.invars[k]).is_ref);
  const std::string primal = print_jaxpr(l.primal), linear = print_jaxpr(l.linear);
  EXPECT_EQ(count_prim(primal, "sin"), 1) << primal;
  EXPECT_EQ(count_prim(linear, "sin") + count_prim(linear, "cos"), 0) << linear;
  EXPECT_EQ(l.linear.type_of(l.linear.invars.back()).str(), "Ref{f32[8]}");
}

}  // namespace
}  // namespace refjit
