// scan / foreach / fori_loop / while_loop / cond / switch_ through the C++ API (refjit/loops.h):
// eager runs, staged eqns, refs closed over, scanned over and created inside, and the ref errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "refjit/refjit.h"

namespace refjit {
namespace {

// EXPECT that `text` contains `part`.
#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

std::string ref_error(const std::function<void()>& f, const std::string& code) {
  try {
    f();
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected RefError " << code;
  return "";
}

Array f32s(std::vector<float> v, Shape s) { return Array::from_vector<float>(v, std::move(s)); }
Array f32s(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return f32s(std::move(v), {n});
}
Array i32s(std::vector<int32_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Array::from_vector<int32_t>(v, {n});
}

// The seed (autodiff-with-refs.txt, "foreach"): r = 45, ys = [0 2 ... 18].
TEST(Foreach, SeedSumsIntoClosedOverRefAndStacksOutputs) {
  Ref r = new_ref(0);
  Value xs = arange(10);
  Value ys = foreach (xs)([&](Value x) {
    r[ellipsis] += x;
    return x * 2;
  });
  EXPECT_EQ(r.str(), "Ref(45, dtype=int32)");
  EXPECT_EQ(ys.array(), i32s({0, 2, 4, 6, 8, 10, 12, 14, 16, 18}));
}

TEST(Foreach, ReadsAndWritesRefsAtNonSequentialIndices) {
  // out[perm[i]] = 10 * src[perm[i]] + i: a gather/scatter loop written with refs.
  Ref src = new_ref(array<float>({1, 2, 3, 4}));
  Ref out = new_ref(zeros({4}));
  Value perm = array<int32_t>({2, 0, 3, 1});
  Value idx = arange(4);
  foreach (perm, idx)
    ([&](Value p, Value i) { out[p] = src.get(p) * 10.0f + convert(i, DType::f32); });
  EXPECT_EQ(out.value(), f32s({11, 23, 30, 42}));
}

TEST(Foreach, VoidBodyAndScannedOverRefRowViews) {
  Ref m = new_ref(zeros({3, 2}));
  Value xs = array<float>({1, 2, 3});
  foreach (xs, m)
    ([](Value x, Ref row) {
      row[0] = x;
      row[1] += x * x;
    });
  EXPECT_EQ(m.value(), f32s({1, 1, 2, 4, 3, 9}, {3, 2}));
}

TEST(Foreach, RunsUnderNativeJitAndUpdatesTheClosedOverRef) {
  Ref r = new_ref(0);
  auto f = jit(
      [&](Value xs) {
        return foreach (xs)([&](Value x) {
          r[ellipsis] += x;
          return x * 2;
        });
      },
      JitOptions{.backend = Backend::native, .tier = Tier::fast, .name = "seed_foreach"});
  EXPECT_EQ(f(arange(10)).array(), i32s({0, 2, 4, 6, 8, 10, 12, 14, 16, 18}));
  EXPECT_EQ(r.value(), Array::scalar(int32_t{45}));
}

TEST(Scan, CarryAndStackedOutputsEagerly) {
  Value xs = array<float>({1, 2, 3, 4});
  auto [total, partial] = scan([](Value c, Value x) { return std::pair{c + x, c * x}; }, 0.0f, xs);
  EXPECT_EQ(total.array(), Array::scalar(10.0f));
  EXPECT_EQ(partial.array(), f32s({0, 2, 9, 24}));
}

TEST(Scan, ReverseRunsFromTheLastRowAndKeepsYsAligned) {
  Value xs = array<float>({1, 2, 3, 4});
  auto [total, partial] = scan(
      [](Value c, Value x) {
        return std::pair{c + x, c};
      },
      0.0f, xs, {.length = std::nullopt, .reverse = true, .unroll = 1});
  EXPECT_EQ(total.array(), Array::scalar(10.0f));
  EXPECT_EQ(partial.array(), f32s({9, 7, 4, 0}));
}

TEST(Scan, TupleAndVectorCarriesAndMultipleXs) {
  Value a = array<float>({1, 2, 3});
  Value b = array<int32_t>({10, 20, 30});
  auto [carry, ys] = scan(
      [](const std::tuple<Value, Value>& c, const std::tuple<Value, Value>& x) {
        auto [s, n] = c;
        auto [xa, xb] = x;
        return std::pair{std::tuple{s + xa, n + xb}, std::vector<Value>{xa * 2.0f, xb + 1}};
      },
      std::tuple{Value(0.0f), Value(0)}, std::tuple{a, b});
  EXPECT_EQ(std::get<0>(carry).array(), Array::scalar(6.0f));
  EXPECT_EQ(std::get<1>(carry).array(), Array::scalar(int32_t{60}));
  ASSERT_EQ(ys.size(), 2u);
  EXPECT_EQ(ys[0].array(), f32s({2, 4, 6}));
  EXPECT_EQ(ys[1].array(), i32s({11, 21, 31}));

  auto [v, none] = scan(
      [](const std::vector<Value>& c, std::tuple<>) {
        return std::pair{std::vector<Value>{c[1], c[0] + c[1]}, std::tuple{}};
      },
      std::vector<Value>{Value(0), Value(1)}, std::tuple{},
      {.length = 10, .reverse = false, .unroll = 1});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].item(), 55);
  EXPECT_EQ(v[1].item(), 89);
}

TEST(Scan, WeakScalarInitTakesTheDtypeTheBodyReturns) {
  Value xs = array<double>({0.5, 0.25});
  auto [c, ys] = scan([](Value c, Value x) { return std::pair{x * 2.0, c}; }, 0, xs);
  EXPECT_EQ(c.dtype(), DType::f64);
  EXPECT_EQ(c.item(), 0.5);
  EXPECT_EQ(ys.array(), Array::from_vector<double>({0, 1}, {2}));
}

TEST(Scan, BodyTypeErrorOnAWeakInitSaysHowToTypeIt) {
  Value xs = array<double>({0.5, 0.25});
  try {
    scan([](Value c, Value x) { return std::pair{c + x, std::tuple{}}; }, 0, xs);
    ADD_FAILURE() << "expected TypeError";
  } catch (const TypeError& e) {
    EXPECT_CONTAINS(e.what(), "initial carry leaf 0 is a C++ scalar, traced as a int32[]");
  }
}

TEST(Scan, CarryChangingTypeIsATypeError) {
  Value xs = array<float>({1, 2});
  try {
    scan([](Value c, Value x) { return std::pair{broadcast_to(c, {2}), x}; }, Value(zeros({})), xs);
    ADD_FAILURE() << "expected TypeError";
  } catch (const TypeError& e) {
    EXPECT_CONTAINS(std::string(e.what()), ("carry leaf 0 as a float32[2]"));
  }
}

TEST(Scan, LengthMustMatchXsAndIsNeededWithoutXs) {
  EXPECT_THROW(scan(
                   [](Value c, Value x) {
                     return std::pair{c, x};
                   },
                   0.0f, zeros({3}), {.length = 4, .reverse = false, .unroll = 1}),
               TypeError);
  EXPECT_THROW(scan(
                   [](Value c, std::tuple<>) {
                     return std::pair{c, std::tuple{}};
                   },
                   0.0f, std::tuple{}),
               Error);
}

TEST(Scan, ClosedOverRefEffectsRunOncePerIterationInOrder) {
  // Each iteration appends its x at position `n` and bumps n: order is visible.
  Ref log = new_ref(zeros({4}));
  Ref n = new_ref(0);
  Value xs = array<float>({5, 6, 7, 8});
  auto [c, ys] = scan(
      [&](Value c, Value x) {
        Value i = n.get();
        log[i] = x + c;
        n += Value(1);
        return std::pair{c + 1.0f, i};
      },
      0.0f, xs, {.length = std::nullopt, .reverse = true, .unroll = 1});
  EXPECT_EQ(n.value(), Array::scalar(int32_t{4}));
  EXPECT_EQ(log.value(), f32s({8, 8, 8, 8}));
  EXPECT_EQ(ys.array(), i32s({3, 2, 1, 0}));
}

TEST(Scan, ScannedOverRefWritesLandInTheirRows) {
  Ref m = new_ref(array<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
  auto [sum, row_sums] = scan(
      [](Value c, Ref row) {
        Value v = row.get();
        row.set(v * 2.0f);
        Value s = reduce_sum(v);
        return std::pair{c + s, s};
      },
      0.0f, m);
  EXPECT_EQ(sum.array(), Array::scalar(21.0f));
  EXPECT_EQ(row_sums.array(), f32s({3, 7, 11}));
  EXPECT_EQ(m.value(), f32s({2, 4, 6, 8, 10, 12}, {3, 2}));
}

TEST(Scan, InternalRefsLiveForOneIteration) {
  Value xs = array<float>({1, 2, 3});
  auto [c, ys] = scan(
      [](Value c, Value x) {
        Ref acc = new_ref(c);  // fresh each iteration, from the carry
        acc += x;
        acc += x;
        Value out = freeze(acc);
        return std::pair{out, out * 10.0f};
      },
      0.0f, xs);
  EXPECT_EQ(c.array(), Array::scalar(12.0f));
  EXPECT_EQ(ys.array(), f32s({20, 60, 120}));
}

TEST(Scan, NestedScanClosesOverOuterRefAndCarry) {
  Ref total = new_ref(0.0f);
  Value xs = array<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto [c, ys] = scan(
      [&](Value c, Value row) {
        Value inner = foreach (row)([&](Value x) {
          total += x * c;
          return x + c;
        });
        return std::pair{c + 1.0f, inner};
      },
      1.0f, xs);
  EXPECT_EQ(total.value(), Array::scalar(1.0f * 6 + 2.0f * 15));
  EXPECT_EQ(ys.array(), f32s({2, 3, 4, 6, 7, 8}, {2, 3}));
}

TEST(Scan, StagedInsideMakeJaxprPrintsOneScanEqn) {
  Ref r = new_ref(zeros({}));
  auto f = [&](Value init, Value xs) {
    auto [c, ys] = scan(
        [&](Value c, Value x) {
          r += x;
          return std::pair{c * x, c};
        },
        init, xs, {.length = std::nullopt, .reverse = true, .unroll = 1});
    return std::pair{c, ys};
  };
  std::string text = make_jaxpr(f)(1.0f, zeros({5})).str();
  EXPECT_EQ(text,
            "{ lambda a:Ref{f32[]}; b:f32[] c:f32[5]. let\n"
            "    d:f32[] e:f32[5] = scan[\n"
            "      _split_transpose=False\n"
            "      jaxpr={ lambda ; f:Ref{f32[]} g:f32[] h:f32[]. let\n"
            "          f[...] += h\n"
            "          i:f32[] = mul g h\n"
            "        in (i, g) }\n"
            "      length=5\n"
            "      linear=(False, False, False)\n"
            "      num_carry=1\n"
            "      num_consts=1\n"
            "      reverse=True\n"
            "      unroll=1\n"
            "    ] a b c\n"
            "  in (d, e) }");
}

TEST(Scan, InsideJitMatchesEagerAndUpdatesRefs) {
  auto cumsum = jit(
      [](Value xs, Ref seen) {
        auto [c, ys] = scan(
            [&](Value c, Value x) {
              seen += Value(1);
              return std::pair{c + x, c + x};
            },
            0.0f, xs);
        return ys;
      },
      JitOptions{.backend = Backend::interpreter, .tier = Tier::adaptive, .name = "cumsum"});
  Ref seen = new_ref(0);
  Value ys = cumsum(array<float>({1, 2, 3}), seen);
  EXPECT_EQ(ys.array(), f32s({1, 3, 6}));
  EXPECT_EQ(seen.value(), Array::scalar(int32_t{3}));
}

TEST(Scan, DifferentiatesInForwardAndReverseMode) {
  // f(w) = prod_k (w * x_k) = w^4 * 24 over xs = [1, 2, 3, 4]: f'(2) = 4 * 8 * 24.
  auto f = [](Value w) {
    auto [c, ys] = scan(
        [&](Value c, Value x) {
          return std::pair{c * w * x, std::tuple{}};
        },
        1.0f, array<float>({1, 2, 3, 4}));
    return c;
  };
  auto [y, y_dot] = jvp(f, std::tuple{Value(2.0f)}, std::tuple{Value(1.0f)});
  EXPECT_EQ(y.item(), 384.0);
  EXPECT_EQ(y_dot.item(), 768.0);
  EXPECT_EQ(grad(f)(2.0f).item(), 768.0);
}

// The seed's microbatch recipe (autodiff-with-refs.txt): an outer scan whose body runs a
// vjp and accumulates each microbatch's gradient into one closed-over ref with with_refs.
TEST(Scan, MicrobatchGradientAccumulationIntoAClosedOverRef) {
  constexpr int64_t kLayers = 3, kMubatches = 5, kMubatchSize = 7;
  auto mubatch_loss = [](Value Ws, Value xs) {
    auto [act, none] = scan(
        [](Value x, Value W) {
          return std::pair{dot(x, W), std::tuple{}};
        },
        xs, Ws);
    return reduce_sum(act) / static_cast<float>(act.size());
  };
  Value Ws = reshape(arange(kLayers * 16, DType::f32), {kLayers, 4, 4}) / 40.0f;
  Value xs_batch =
      reshape(arange(kMubatches * kMubatchSize * 4, DType::f32), {kMubatches * kMubatchSize, 4}) /
      100.0f;
  Value xs_mubatches = reshape(xs_batch, {kMubatches, kMubatchSize, 4});

  Ref grad_acc = new_ref(zeros_like(Ws));
  auto [unit, losses] = scan(
      [&](std::tuple<>, Value xs) {
        auto [loss, f_vjp] = vjp([&](Value W) { return mubatch_loss(W, xs); }, Ws);
        f_vjp.with_refs(grad_acc)(ones_like(loss));  // accumulate in place
        return std::pair{std::tuple{}, loss};
      },
      std::tuple{}, xs_mubatches);
  Value grads = freeze(grad_acc);

  Value expected = grad([&](Value W) {
    Value total = zeros({});
    for (int64_t k = 0; k < kMubatches; ++k) total = total + mubatch_loss(W, xs_mubatches[k]);
    return total;
  })(Ws);
  Array got = grads.array(), want = expected.array();
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t k = 0; k < got.size(); ++k)
    EXPECT_NEAR(got.as_double(k), want.as_double(k), 1e-4 * (1 + std::abs(want.as_double(k))));
  for (int64_t k = 0; k < kMubatches; ++k)
    EXPECT_NEAR(losses.array().as_double(k), mubatch_loss(Ws, xs_mubatches[k]).item(), 1e-5);
}

// foreach reading a ref at permuted indices: reverse mode accumulates into the gradient ref.
TEST(Foreach, VjpOfNonSequentialReadsAccumulatesIntoTheGradientRef) {
  Value perm = array<int32_t>({2, 0, 2, 3});
  auto f = [&](Ref x) {
    Value ys = foreach (perm)([&](Value p) {
      Value v = x.get(p);
      return v * v;
    });
    return reduce_sum(ys);
  };
  Ref x = new_ref(array<float>({1, 2, 3, 4}));
  auto [y, f_vjp] = vjp(f, x);
  EXPECT_EQ(y.item(), 9 + 1 + 9 + 16);
  Ref g = new_ref(zeros({4}));
  f_vjp.with_refs(g)(1.0f);
  EXPECT_EQ(g.value(), f32s({2, 0, 12, 8}));
}

TEST(ForiLoop, SumsTheIndexAndStagesAScan) {
  Value s = fori_loop(
      2, 6, [](Value i, Value acc) { return acc + i; }, 0);
  EXPECT_EQ(s.item(), 2 + 3 + 4 + 5);
  Value empty = fori_loop(
      3, 3, [](Value i, Value acc) { return acc + i; }, 7);
  EXPECT_EQ(empty.item(), 7);
  Ref r = new_ref(zeros({5}));
  fori_loop(
      0, 5,
      [&](Value i, Value c) {
        r[i] = c;
        return c * 2.0f;
      },
      1.0f);
  EXPECT_EQ(r.value(), f32s({1, 2, 4, 8, 16}));
  std::string text = make_jaxpr([](Value x) {
                       return fori_loop(
                           0, 3, [](Value, Value c) { return c * c; }, x);
                     })(2.0f)
                         .str();
  EXPECT_CONTAINS(text, ("length=3"));
  EXPECT_CONTAINS(text, ("num_carry=2"));
}

TEST(Scan, NothingSpellsNoCarryNoXsAndNoY) {
  Ref r = new_ref(0.0);
  auto [c, ys] = scan(
      [&](std::tuple<>, Value x) {
        r[ellipsis] += x;
        return std::pair{nothing, nothing};
      },
      nothing, array<float>({1, 2, 3}, {3}));
  static_assert(std::is_same_v<decltype(c), std::tuple<>>);
  EXPECT_EQ(r.value(), Array::scalar<float>(6));
  auto [n, counts] = scan(
      [](Value k, std::tuple<>) {
        return std::pair{k + 1, k};
      },
      0, nothing, {.length = 4});
  EXPECT_EQ(n.item(), 4);
  EXPECT_EQ(counts.array(), Array::from_vector<int32_t>({0, 1, 2, 3}, {4}));
}

// lax.while_loop: the trip count depends on traced values. x doubles while below 10.
TEST(WhileLoop, RunsEagerlyNativeAndOnTheInterpreter) {
  auto doubling = [](Value x) {
    return while_loop([](Value v) { return v < 10.0f; }, [](Value v) { return v * 2.0f; }, x);
  };
  EXPECT_EQ(doubling(1.5f).item(), 12.0);
  EXPECT_EQ(doubling(11.0f).item(), 11.0);  // the condition fails at once: no iteration
  for (Backend backend : {Backend::native, Backend::interpreter}) {
    auto f = jit(doubling, JitOptions{.backend = backend, .tier = Tier::fast, .name = "doubling"});
    EXPECT_EQ(f(1.5f).item(), 12.0);
    EXPECT_EQ(f(0.3f).item(), 0.3f * 64);
  }
  std::string text = make_jaxpr(doubling)(1.0f).str();
  EXPECT_CONTAINS(text, "while[");
  EXPECT_CONTAINS(text, "cond_nconsts=0");
  EXPECT_EQ(print_jaxpr(parse_jaxpr(text)), text);  // prints as it parses
}

TEST(WhileLoop, CarriesTuplesAndReadsAndWritesClosedOverRefs) {
  Ref steps = new_ref(0);
  Ref limit = new_ref(20.0f);
  auto f = [&](Value x) {
    auto [v, n] =
        while_loop([&](const std::tuple<Value, Value>& c) { return std::get<0>(c) < limit.get(); },
                   [&](const std::tuple<Value, Value>& c) {
                     steps[ellipsis] += 1;
                     return std::tuple<Value, Value>{std::get<0>(c) * 3.0f, std::get<1>(c) + 1};
                   },
                   std::tuple<Value, Value>{x, Value::scalar(DType::i32, 0)});
    return v + convert(n, DType::f32);
  };
  EXPECT_EQ(f(1.0f).item(), 27 + 3);
  EXPECT_EQ(steps.value(), Array::scalar<int32_t>(3));
  auto g = jit(f, JitOptions{.backend = Backend::native, .tier = Tier::fast, .name = "while_refs"});
  EXPECT_EQ(g(2.0f).item(), 54 + 3);
  EXPECT_EQ(steps.value(), Array::scalar<int32_t>(6));
}

TEST(WhileLoop, ForwardModeMatchesFiniteDifferencesAndReverseModeIsRefused) {
  // y = x s^k, k the trip count (x s^j < 10): dy/dx = s^k, dy/ds = k x s^(k-1).
  auto f = [](Value x, Value s) {
    return while_loop([](Value v) { return v < 10.0f; }, [&](Value v) { return v * s; }, x);
  };
  auto [y, y_dot] =
      jvp(f, std::tuple{Value(1.5f), Value(2.0f)}, std::tuple{Value(1.0f), Value(0.0f)});
  EXPECT_EQ(y.item(), 12.0);
  EXPECT_EQ(y_dot.item(), 8.0);
  const float eps = 1e-3f;
  auto [ys, ys_dot] =
      jvp(f, std::tuple{Value(1.5f), Value(2.0f)}, std::tuple{Value(0.0f), Value(1.0f)});
  const double fd = (f(1.5f, 2.0f + eps).item() - f(1.5f, 2.0f - eps).item()) / (2 * eps);
  EXPECT_NEAR(ys_dot.item(), 18.0, 1e-4);
  EXPECT_NEAR(fd, 18.0, 2e-2);
  try {
    (void)grad([&](Value x) { return f(x, Value(2.0f)); })(1.5f);
    ADD_FAILURE() << "reverse mode through a while loop must be refused";
  } catch (const ReverseModeError& e) {
    EXPECT_CONTAINS(e.what(), "while loop");
    EXPECT_CONTAINS(e.what(), "scan or fori_loop");
  }
}

TEST(WhileLoop, LinearizeRunsThePrimalLoopNowAndTheTangentLoopLater) {
  // As JAX's partial evaluation of while: the linear part recomputes the primal carry along
  // with the tangent, so f_lin is J t for any t, without a tape.
  auto f = [](Value x, Value s) {
    return while_loop([](Value v) { return v < 10.0f; }, [&](Value v) { return v * s; }, x);
  };
  auto [y, f_lin] = linearize(f, Value(1.5f), Value(2.0f));
  EXPECT_EQ(y.item(), 12.0);
  EXPECT_EQ(f_lin(Value(1.0f), Value(0.0f)).item(), 8.0);
  EXPECT_NEAR(f_lin(Value(0.0f), Value(1.0f)).item(), 18.0, 1e-4);
  EXPECT_NEAR(f_lin(Value(2.0f), Value(1.0f)).item(), 34.0, 1e-4);
}

TEST(WhileLoop, ADeadLoopDoesNotStopReverseMode) {
  // JAX's fori_loop with traced bounds, its result unused: the gradient never meets it.
  auto f = [](Value x) {
    (void)while_loop([](Value v) { return v < 3.0f; }, [](Value v) { return v + 1.0f; }, x);
    return x * x;
  };
  EXPECT_EQ(grad(f)(1.5f).item(), 3.0);
}

TEST(WhileLoop, TheConditionMustBeABoolScalarAndTheCarryKeepsItsType) {
  auto bad_cond = [](Value x) {
    return while_loop([](Value v) { return v; }, [](Value v) { return v * 2.0f; }, x);
  };
  try {
    (void)bad_cond(1.0f);
    ADD_FAILURE() << "expected a TypeError";
  } catch (const TypeError& e) {
    EXPECT_CONTAINS(e.what(), "while_loop: the condition must return one bool scalar, it returns");
  }
  auto bad_body = [](Value x) {
    return while_loop([](Value v) { return reduce_sum(v) < 1.0f; },
                      [](Value v) { return convert(v, DType::f64); }, x);
  };
  EXPECT_THROW((void)bad_body(zeros({2})), TypeError);
  Ref r = new_ref(zeros({2}));
  ref_error([&] { (void)while_loop([](Ref) { return Value(true); }, [](Ref q) { return q; }, r); },
            "E9");
}

TEST(Cond, PicksTheBranchEagerlyAndWritesRefs) {
  Ref r = new_ref(zeros({2}));
  auto f = [&](Value p, Value x) {
    return cond(
        p,
        [&](Value x) {
          r[0] += x;
          return x * 2.0f;
        },
        [&](Value x) {
          r[1] += x;
          return -x;
        },
        x);
  };
  EXPECT_EQ(f(true, 3.0f).item(), 6.0);
  EXPECT_EQ(f(false, 5.0f).item(), -5.0);
  EXPECT_EQ(f(Value(7), 1.0f).item(), 2.0);  // nonzero integer: true
  EXPECT_EQ(r.value(), f32s({4, 5}));
}

TEST(Cond, RefOperandIsPassedByReference) {
  Ref r = new_ref(array<float>({1, 2, 3}));
  auto bump = [](Value p, Ref r) {
    cond(
        p, [](Ref r) { r[ellipsis] += Value(1.0f); }, [](Ref r) { r.set(zeros({3})); }, r);
  };
  bump(true, r);
  EXPECT_EQ(r.value(), f32s({2, 3, 4}));
  bump(false, r);
  EXPECT_EQ(r.value(), f32s({0, 0, 0}));
}

TEST(Cond, StagedWithTheUnionOfBothBranchesCaptures) {
  Ref a = new_ref(zeros({}));
  Ref b = new_ref(zeros({}));
  std::string text = make_jaxpr([&](Value p, Value x) {
                       return cond(
                           p,
                           [&](Value x) {
                             a += x;
                             return x;
                           },
                           [&](Value x) {
                             b += x;
                             return 0;  // a C++ scalar takes the other branch's f32
                           },
                           x);
                     })(true, 1.0f)
                         .str();
  EXPECT_EQ(text,
            "{ lambda a:Ref{f32[]} b:Ref{f32[]}; c:bool[] d:f32[]. let\n"
            "    e:f32[] = cond[\n"
            "      branches=(\n"
            "        { lambda ; f:Ref{f32[]} g:Ref{f32[]} h:f32[]. let\n"
            "            f[...] += h\n"
            "          in (0.0:f32[],) }\n"
            "        { lambda ; i:Ref{f32[]} j:Ref{f32[]} k:f32[]. let\n"
            "            j[...] += k\n"
            "          in (k,) }\n"
            "      )\n"
            "    ] c a b d\n"
            "  in (e,) }");
}

TEST(Cond, DifferentiatesThroughTheTakenBranch) {
  auto f = [](Value x) {
    return cond(
        x > 0.0f, [](Value x) { return x * x * x; }, [](Value x) { return sin(x); }, x);
  };
  auto [y, y_dot] = jvp(f, std::tuple{Value(2.0f)}, std::tuple{Value(1.0f)});
  EXPECT_EQ(y.item(), 8.0);
  EXPECT_EQ(y_dot.item(), 12.0);
  EXPECT_EQ(grad(f)(2.0f).item(), 12.0);
  EXPECT_EQ(grad(f)(-1.0f).item(), std::cos(-1.0f));
}

TEST(Cond, SwitchClampsTheIndex) {
  auto f = [](Value i) {
    return switch_(i,
                   std::tuple{[](Value x) { return x + 1.0f; }, [](Value x) { return x * 10.0f; },
                              [](Value x) { return -x; }},
                   2.0f);
  };
  EXPECT_EQ(f(0).item(), 3.0);
  EXPECT_EQ(f(1).item(), 20.0);
  EXPECT_EQ(f(2).item(), -2.0);
  EXPECT_EQ(f(9).item(), -2.0);
  EXPECT_EQ(f(-4).item(), 3.0);
}

TEST(Cond, FloatPredicateIsATypeError) {
  EXPECT_THROW(cond(
                   Value(1.0f), [](Value x) { return x; }, [](Value x) { return x; }, 1.0f),
               TypeError);
}

TEST(LoopErrors, RefAsCarryIsE9) {
  Ref r = new_ref(zeros({}));
  std::string msg = ref_error(
      [&] {
        scan([](Ref c, Value x) { return std::pair{c, x}; }, r, zeros({2}));
      },
      "E9");
  EXPECT_CONTAINS(msg, ("carry leaf 0 of the initial carry is a Ref{float32[]}"));
}

// JAX's order: aliasing (E7, E8) is reported before "a ref cannot be a carry" (E9).
TEST(LoopErrors, AliasingOfARefCarryIsReportedBeforeE9) {
  Ref r = new_ref(zeros({2}));
  std::string msg = ref_error(
      [&] {
        scan([](Ref c, Ref x) { return std::pair{c, x.get()}; }, r, r, {.length = 2});
      },
      "E7");
  EXPECT_CONTAINS(msg, "passed as argument 0 and as argument 1");
  msg = ref_error(
      [&] {
        scan(
            [&](Ref c, Value x) {
              r[ellipsis] += x;
              return std::pair{c, x};
            },
            r, zeros({2, 2}));
      },
      "E8");
  EXPECT_CONTAINS(msg, "also closed over");
}

TEST(LoopErrors, ReturningARefFromABodyIsE9NamingItsOrigin) {
  Ref r = new_ref(zeros({}));
  Ref m = new_ref(zeros({2, 3}));
  std::string closed = ref_error(
      [&] {
        foreach (zeros({2})) ([&](Value) { return r; });
      },
      "E9");
  EXPECT_CONTAINS(closed, ("as its y output 0 (a ref the body closes over)"));
  std::string row = ref_error(
      [&] {
        scan([](Value c, Ref row) { return std::pair{c, row}; }, 0.0f, m);
      },
      "E9");
  EXPECT_CONTAINS(row, ("Ref{float32[3]} as its y output 0 (the row view of the ref "
                        "scanned over as xs leaf 0)"));
  std::string inner = ref_error(
      [&] {
        foreach (zeros({2})) ([&](Value x) { return new_ref(x); });
      },
      "E9");
  EXPECT_CONTAINS(inner, ("created inside the body with new_ref"));
  std::string branch = ref_error(
      [&] {
        cond(
            true, [](Ref q) { return q; }, [](Ref q) { return q; }, r);
      },
      "E9");
  EXPECT_CONTAINS(branch, ("the ref passed as operand 0"));
}

TEST(LoopErrors, SameRefTwiceIsE7AndClosedOverAndPassedIsE8) {
  Ref m = new_ref(zeros({2, 3}));
  std::string twice = ref_error(
      [&] {
        foreach (m, m) ([](Ref, Ref) {});
      },
      "E7");
  EXPECT_CONTAINS(twice, ("argument 0 and as argument 1"));
  std::string both = ref_error(
      [&] {
        foreach (m) ([&](Ref row) { m[0] = row.get(); });
      },
      "E8");
  EXPECT_CONTAINS(both, ("also closed over"));
  std::string cond_both = ref_error(
      [&] {
        cond(
            true, [&](Ref q) { m[0] += q.get(0); }, [](Ref) {}, m);
      },
      "E8");
  EXPECT_CONTAINS(cond_both, ("cond"));
  ref_error(
      [&] {
        cond(
            true, [](Ref, Ref) {}, [](Ref, Ref) {}, m, m);
      },
      "E7");
}

}  // namespace
}  // namespace refjit
