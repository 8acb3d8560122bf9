// make_jaxpr / jit tracing: the seed programs print as JAX prints them.
#include <gtest/gtest.h>

#include "refjit/refjit.h"

namespace refjit {
namespace {

// The seed's pure2: ref = new_ref(x); ref[...] = ref[...] + ref[...]; return ref[...].
Value pure2(Value x) {
  Ref ref = new_ref(x);
  ref[ellipsis] = ref[ellipsis] + ref[ellipsis];
  return ref[ellipsis];
}

TEST(Tracing, Pure2PrintsNewRefGetAddSetGet) {
  std::string text = make_jaxpr(pure2)(3.0f).str();
  EXPECT_EQ(text,
            "{ lambda ; a:f32[]. let\n"
            "    b:Ref{f32[]} = new_ref a\n"
            "    c:f32[] <- b[...]\n"
            "    d:f32[] <- b[...]\n"
            "    e:f32[] = add c d\n"
            "    b[...] <- e\n"
            "    f:f32[] <- b[...]\n"
            "  in (f,) }");
}

TEST(Tracing, Pure2EvaluatesEagerlyAndUnderJit) {
  EXPECT_EQ(pure2(3.0f).array(), Array::scalar(6.0f));
  auto jitted = jit(pure2, "pure2");
  EXPECT_EQ(jitted(3.0f).array(), Array::scalar(6.0f));
  EXPECT_EQ(jitted(-1.5f).array(), Array::scalar(-3.0f));
}

Value take_fn(Value x, Value i) { return x[i]; }

TEST(Tracing, TakeWithTracedIndexPrintsWrapAndDynamicSlice) {
  Value x = arange(10, DType::f32);
  std::string text = make_jaxpr(take_fn)(x, 3).str();
  EXPECT_EQ(text,
            "{ lambda ; a:f32[10] b:i32[]. let\n"
            "    c:bool[] = lt b 0:i32[]\n"
            "    d:i32[] = add b 10:i32[]\n"
            "    e:i32[] = select_n c b d\n"
            "    f:f32[1] = dynamic_slice[slice_sizes=(1,)] a e\n"
            "    g:f32[] = squeeze[dimensions=(0,)] f\n"
            "  in (g,) }");
}

TEST(Tracing, TakeEvaluatesWithNegativeWrapAndClamping) {
  Value x = arange(10, DType::f32);
  auto take = jit(take_fn, "take");
  EXPECT_EQ(take(x, 3).array(), Array::scalar(3.0f));
  EXPECT_EQ(take(x, -1).array(), Array::scalar(9.0f));
  // Out of range: dynamic_slice clamps the start into [0, 9].
  EXPECT_EQ(take(x, 25).array(), Array::scalar(9.0f));
  EXPECT_EQ(take(x, -30).array(), Array::scalar(0.0f));
  EXPECT_EQ(take_fn(x, 7).array(), Array::scalar(7.0f));
}

TEST(Tracing, StaticIntIndexIsSliceAndSqueeze) {
  Value x = arange(5, DType::f32);
  std::string text = make_jaxpr([](Value v) { return v[2]; })(x).str();
  EXPECT_EQ(text,
            "{ lambda ; a:f32[5]. let\n"
            "    b:f32[1] = slice[limit_indices=(3,) start_indices=(2,) strides=None] a\n"
            "    c:f32[] = squeeze[dimensions=(0,)] b\n"
            "  in (c,) }");
  EXPECT_EQ(x[-2].array(), Array::scalar(3.0f));
}

TEST(Tracing, ClosedOverArrayAndRefBecomeConstvars) {
  Value w = array<float>({1, 2, 3});
  Ref acc = new_ref(zeros({3}));
  ClosedJaxpr j = make_jaxpr([&](Value x) {
    acc += x * w;
    return x + 1.0f;
  })(zeros({3}));
  EXPECT_EQ(j.str(),
            "{ lambda a:f32[3] b:Ref{f32[3]}; c:f32[3]. let\n"
            "    d:f32[3] = mul c a\n"
            "    b[...] += d\n"
            "    e:f32[3] = add c 1.0:f32[]\n"
            "  in (e,) }");
  ASSERT_EQ(j.consts.size(), 2u);
  EXPECT_TRUE(std::get<Ref>(j.consts[1]).same_as(acc));
  // Calling the closed jaxpr binds the consts: acc is updated in place.
  std::vector<Operand> outs = j.call(std::vector<Operand>{Value(array<float>({1, 1, 1}))});
  EXPECT_EQ(std::get<Value>(outs.at(0)).array(), Array::from_vector<float>({2, 2, 2}, {3}));
  EXPECT_EQ(acc.value(), Array::from_vector<float>({1, 2, 3}, {3}));
}

TEST(Tracing, ClosedOverScalarBecomesLiteral) {
  Value s = 2.5f;
  std::string text = make_jaxpr([&](Value x) { return x * s; })(1.0f).str();
  EXPECT_EQ(text,
            "{ lambda ; a:f32[]. let\n"
            "    b:f32[] = mul a 2.5:f32[]\n"
            "  in (b,) }");
}

TEST(Tracing, NestedJitPrintsNamedSubJaxpr) {
  auto inner = jit([](Value x) { return sin(x) * 2.0f; }, "inner");
  std::string text = make_jaxpr([&](Value x) { return inner(x) + 1.0f; })(0.5f).str();
  EXPECT_EQ(text,
            "{ lambda ; a:f32[]. let\n"
            "    b:f32[] = jit[\n"
            "      name=inner\n"
            "      jaxpr={ lambda ; c:f32[]. let\n"
            "          d:f32[] = sin c\n"
            "          e:f32[] = mul d 2.0:f32[]\n"
            "        in (e,) }\n"
            "    ] a\n"
            "    f:f32[] = add b 1.0:f32[]\n"
            "  in (f,) }");
}

TEST(Tracing, NestedJitCapturingOuterTracerPassesItAsLeadingOperand) {
  ClosedJaxpr j = make_jaxpr([](Value x, Value y) {
    auto inner = jit([&](Value z) { return z * x; }, "scale");
    return inner(y);
  })(1.0f, 2.0f);
  EXPECT_EQ(j.str(),
            "{ lambda ; a:f32[] b:f32[]. let\n"
            "    c:f32[] = jit[\n"
            "      name=scale\n"
            "      jaxpr={ lambda ; d:f32[] e:f32[]. let\n"
            "          f:f32[] = mul e d\n"
            "        in (f,) }\n"
            "    ] a b\n"
            "  in (c,) }");
  EXPECT_EQ(std::get<Value>(j.call(std::vector<Operand>{Value(3.0f), Value(4.0f)}).at(0)).array(),
            Array::scalar(12.0f));
}

TEST(Tracing, TupleAndVectorOutputsAndVoid) {
  auto f = jit([](Value a, Value b) { return std::make_tuple(a + b, a * b); });
  auto [s, p] = f(2.0f, 5.0f);
  EXPECT_EQ(s.array(), Array::scalar(7.0f));
  EXPECT_EQ(p.array(), Array::scalar(10.0f));
  auto g = jit([](std::vector<Value> xs) {
    std::vector<Value> ys;
    for (const Value& x : xs) ys.push_back(x * 2);
    return ys;
  });
  std::vector<Value> ys = g(std::vector<Value>{Value(1), Value(2), Value(3)});
  ASSERT_EQ(ys.size(), 3u);
  EXPECT_EQ(ys[2].array(), Array::scalar<int32_t>(6));
  Ref r = new_ref(Value(0));
  auto h = jit([](Ref r, Value v) { r.set(v); });
  h(r, 41);
  EXPECT_EQ(r.value(), Array::scalar<int32_t>(41));
}

TEST(Tracing, TracedValueHasTypeButNoContents) {
  EXPECT_THROW(make_jaxpr([](Value x) {
                 (void)x.array();
                 return x;
               })(1.0f),
               Error);
}

TEST(Tracing, EscapedTracerIsAnError) {
  Value leaked;
  make_jaxpr([&](Value x) {
    leaked = x * 2;
    return x;
  })(1.0f);
  try {
    (void)(leaked + 1.0f);
    FAIL() << "expected an escaped-tracer error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("escaped tracer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace refjit

namespace refjit {
namespace {

TEST(Tracing, TupleArgumentsFlattenInOrder) {
  auto f = jit([](std::tuple<Value, Ref> pair, Value s) {
    auto [x, r] = pair;
    r.add(x * s);
    return x + s;
  });
  Ref r = new_ref(zeros({2}));
  Value y = f(std::make_tuple(Value(array<float>({1, 2})), r), 3.0f);
  EXPECT_EQ(y.array(), Array::from_vector<float>({4, 5}, {2}));
  EXPECT_EQ(r.value(), Array::from_vector<float>({3, 6}, {2}));
  EXPECT_EQ(make_jaxpr(f)(std::make_tuple(Value(array<float>({1, 2})), r), 3.0f).str(),
            "{ lambda ; a:f32[2] b:Ref{f32[2]} c:f32[]. let\n"
            "    d:f32[2] = jit[\n"
            "      name=jit\n"
            "      jaxpr={ lambda ; e:f32[2] f:Ref{f32[2]} g:f32[]. let\n"
            "          h:f32[2] = mul e g\n"
            "          f[...] += h\n"
            "          i:f32[2] = add e g\n"
            "        in (i,) }\n"
            "    ] a b c\n"
            "  in (d,) }");
}

TEST(Tracing, JitClosingOverConcreteRefUpdatesItEachCall) {
  Ref counter = new_ref(Value(0));
  auto tick = jit([&](Value by) {
    counter += by;
    return counter.get();
  });
  EXPECT_EQ(tick(2).array(), Array::scalar<int32_t>(2));
  EXPECT_EQ(tick(3).array(), Array::scalar<int32_t>(5));
  EXPECT_EQ(counter.value(), Array::scalar<int32_t>(5));
  EXPECT_EQ(tick.trace_count(), 1);
}

TEST(Tracing, JitInsideTraceDoesNotCacheOuterTracers) {
  int traces = 0;
  ClosedJaxpr j = make_jaxpr([&](Value x) {
    auto inner = jit([&](Value y) { return y + x; });
    Value a = inner(x);
    Value b = inner(a);
    traces = inner.trace_count();
    return b;
  })(1.0f);
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(std::get<Value>(j.call(std::vector<Operand>{Value(2.0f)}).at(0)).array(),
            Array::scalar(6.0f));
}

}  // namespace
}  // namespace refjit
