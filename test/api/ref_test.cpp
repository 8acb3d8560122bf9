// Refs through the C++ API: indexers, in-place updates, printing, and the ref errors.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "api/node.h"
#include "refjit/refjit.h"

namespace refjit {
namespace {

std::string message_of(const std::function<void()>& f, const std::string& code) {
  try {
    f();
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected RefError " << code;
  return "";
}

TEST(Refs, EagerReadWriteAndAddUpdate) {
  Ref r = new_ref(array<float>({1, 2, 3, 4}));
  EXPECT_EQ(r.get(1).array(), Array::scalar(2.0f));
  r.set(2, 10.0f);
  r.add(0, 5);
  r[3] += 1.5f;
  EXPECT_EQ(r.value(), Array::from_vector<float>({6, 2, 10, 5.5f}, {4}));
  EXPECT_EQ(r.get(slice(1, 3)).array(), Array::from_vector<float>({2, 10}, {2}));
  Value old = r.swap(zeros({4}));
  EXPECT_EQ(old.array(), Array::from_vector<float>({6, 2, 10, 5.5f}, {4}));
  EXPECT_EQ(r.value(), Array::from_vector<float>({0, 0, 0, 0}, {4}));
}

TEST(Refs, DynamicSliceIndexerAndIndexArray) {
  Ref r = new_ref(arange(6, DType::f32));
  EXPECT_EQ(r.get(ds(Value(2), 3)).array(), Array::from_vector<float>({2, 3, 4}, {3}));
  Value idx = array<int32_t>({0, 5, 0});
  EXPECT_EQ(r.get(idx).array(), Array::from_vector<float>({0, 5, 0}, {3}));
  r.add(idx, ones({3}));
  EXPECT_EQ(r.value(), Array::from_vector<float>({2, 1, 2, 3, 4, 6}, {6}));
}

TEST(Refs, TwoDimIndexersPrintAsJax) {
  Ref r = new_ref(zeros({3, 4}));
  std::string text = make_jaxpr([&](Value i, Value v) {
                       Value row = r.get(i, all);
                       r.set(all, 0, v);
                       r.add(ds(i, 2), slice(1, 3), ones({2, 2}));
                       return row;
                     })(1, zeros({3}))
                         .str();
  EXPECT_EQ(text,
            "{ lambda a:Ref{f32[3,4]}; b:i32[] c:f32[3]. let\n"
            "    d:f32[4] <- a[b,:]\n"
            "    a[:,0] <- c\n"
            "    e:f32[2,2] = broadcast_in_dim 1.0:f32[]\n"
            "    a[b:b+2,1:3] += e\n"
            "  in (d,) }");
}

TEST(Refs, JitUpdatesRefArgumentInPlace) {
  Ref r = new_ref(array<float>({1, 2, 3}));
  const RefBuffer* buffer = detail::node_of(r)->buffer.get();
  const std::byte* storage = buffer->value().data();
  auto bump = jit([](Ref x, Value by) { x.add(by); }, "bump");
  bump(r, 2.0f);
  bump(r, 2.0f);
  EXPECT_EQ(r.value(), Array::from_vector<float>({5, 6, 7}, {3}));
  EXPECT_EQ(bump.trace_count(), 1);
  EXPECT_EQ(detail::node_of(r)->buffer.get(), buffer);
  EXPECT_EQ(detail::node_of(r)->buffer->value().data(), storage);
}

TEST(Refs, ToStringLooksLikeJax) {
  Ref r = new_ref(Value(0.5f));
  EXPECT_EQ(to_string(r), "Ref(0.5, dtype=float32)");
  Ref n = new_ref(Value(45));
  EXPECT_EQ(n.str(), "Ref(45, dtype=int32)");
}

TEST(Refs, FreezeThenUseIsE12) {
  Ref r = new_ref(Value(3.0f));
  Value v = freeze(r);
  EXPECT_EQ(v.array(), Array::scalar(3.0f));
  std::string msg = message_of([&] { (void)r.get(); }, "E12");
  EXPECT_NE(msg.find("after freeze"), std::string::npos) << msg;
  message_of(
      [] {
        make_jaxpr([](Value x) {
          Ref q = new_ref(x);
          Value y = freeze(q);
          q.set(y);
          return y;
        })(1.0f);
      },
      "E12");
}

TEST(Refs, SameRefTwiceToJitIsE7) {
  Ref r = new_ref(zeros({2}));
  auto f = jit([](Ref a, Value x, Ref b) { a.add(b.get() + x); }, "f");
  std::string msg = message_of([&] { f(r, 1.0f, r); }, "E7");
  EXPECT_NE(msg.find("argument 0 and as argument 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("`f`"), std::string::npos) << msg;
}

TEST(Refs, RefClosedOverAndPassedIsE8) {
  Ref r = new_ref(zeros({2}));
  auto f = jit([&](Ref a) { a.add(r.get()); }, "g");
  std::string msg = message_of([&] { f(r); }, "E8");
  EXPECT_NE(msg.find("argument 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("closed over"), std::string::npos) << msg;
}

TEST(Refs, ReturningRefIsE9) {
  std::string msg = message_of([] { make_jaxpr([](Value x) { return new_ref(x); })(1.0f); }, "E9");
  EXPECT_NE(msg.find("created inside"), std::string::npos) << msg;
  Ref r = new_ref(zeros({2}));
  msg = message_of([&] { jit([](Ref a) { return a; }, "ident")(r); }, "E9");
  EXPECT_NE(msg.find("argument 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("`ident`"), std::string::npos) << msg;
}

// As jax.new_ref(0.0) with JAX's weak types: a C++ double gives a float32 ref, which a
// float32 value can then be added into.
TEST(Refs, AFloatLiteralMakesAFloat32Ref) {
  Ref r = new_ref(0.0);
  EXPECT_EQ(r.dtype(), DType::f32);
  EXPECT_EQ(new_ref(0).dtype(), DType::i32);
  std::string text = make_jaxpr([](Value x) {
                       Ref a = new_ref(0.0);
                       a[ellipsis] += x;
                       return a.get();
                     })(2.0f)
                         .str();
  EXPECT_NE(text.find("b:Ref{f32[]} = new_ref 0.0:f32[]"), std::string::npos) << text;
  EXPECT_EQ(new_ref(Value::scalar(DType::f64, 1.0)).dtype(), DType::f64);  // asked for: kept
}

// x.at(...), JAX's x.at[...]: reads and functional updates with a ref's indexers.
TEST(ValueAt, ReadsAndUpdatesLikeJaxAtWithoutTouchingX) {
  Value x = array<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  EXPECT_EQ(x.at(1, slice(0, 2)).get().array(), Array::from_vector<float>({3, 4}, {2}));
  EXPECT_EQ(x.at(all, 2).get().array(), Array::from_vector<float>({2, 5}, {2}));
  Value rows = array<int32_t>({1, 0, 1}, {3});
  EXPECT_EQ(x.at(rows, 0).get().array(), Array::from_vector<float>({3, 0, 3}, {3}));
  EXPECT_EQ(x.at(0, ds(Value::scalar(DType::i32, 1), 2)).set(9.0f).array(),
            Array::from_vector<float>({0, 9, 9, 3, 4, 5}, {2, 3}));
  // Repeated indices add up, as in x.at[idx].add(v).
  Value cols = array<int32_t>({2, 2, 0}, {3});
  EXPECT_EQ(x.at(1, cols).add(array<float>({1, 10, 100}, {3})).array(),
            Array::from_vector<float>({0, 1, 2, 103, 4, 16}, {2, 3}));
  EXPECT_EQ(x.array(), Array::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}));  // unchanged
}

// With integer indices (one a Value) on consecutive dims, x.at(...) is JAX's gather / scatter
// (one index over those dims, `dims`), with JAX's numbers for out-of-range indices: negative
// ones count from the end, then a read clamps and an update is dropped. Expected values
// printed by JAX 0.10.2 for the same calls.
TEST(ValueAt, IndexArraysWrapNegativesClampReadsAndDropUpdatesAsJaxDoes) {
  Value x = array<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Value r = array<int32_t>({1, 0, 1, -1}, {4}), c = array<int32_t>({2, -1, 3, 0}, {4});
  Value u = array<float>({10, 20, 30, 40}, {4});
  EXPECT_EQ(x.at(r, c).set(u).array(), Array::from_vector<float>({0, 1, 20, 40, 4, 10}, {2, 3}));
  EXPECT_EQ(x.at(r, c).add(u).array(), Array::from_vector<float>({0, 1, 22, 43, 4, 15}, {2, 3}));
  EXPECT_EQ(x.at(r, c).get().array(), Array::from_vector<float>({5, 2, 5, 3}, {4}));
  const Value five = Value::scalar(DType::i32, 5), minus_one = Value::scalar(DType::i32, -1);
  EXPECT_EQ(x.at(five).set(7.0f).array(), x.array());
  // An int64 index past 2^32 is out of range too (not wrapped into range by a narrowing).
  EXPECT_EQ(x.at(Value::scalar(DType::i64, 4294967297.0)).set(7.0f).array(), x.array());
  EXPECT_EQ(x.at(minus_one).set(7.0f).array(),
            Array::from_vector<float>({0, 1, 2, 7, 7, 7}, {2, 3}));
  EXPECT_EQ(x.at(minus_one, minus_one).get().item(), 5.0);
  EXPECT_EQ(x.at(Value::scalar(DType::i32, -5)).get().array(),
            Array::from_vector<float>({0, 1, 2}, {3}));
  // A scalar index beside a slice (a ref write underneath) follows the same rules.
  for (const Value& i : {five, minus_one}) {
    const bool in_range = i.item() < 0;
    EXPECT_EQ(x.at(i, slice(0, 2)).set(9.0f).array(),
              in_range ? Array::from_vector<float>({0, 1, 2, 9, 9, 5}, {2, 3}) : x.array());
    EXPECT_EQ(x.at(i, slice(1, 3)).add(array<float>({10, 20}, {2})).array(),
              in_range ? Array::from_vector<float>({0, 1, 2, 3, 14, 25}, {2, 3}) : x.array());
    EXPECT_EQ(x.at(i, slice(0, 2)).get().array(), Array::from_vector<float>({3, 4}, {2}));
  }
  // So does a static one out of range (where a ref's indexer refuses it).
  EXPECT_EQ(x.at(5, slice(0, 2)).get().array(), Array::from_vector<float>({3, 4}, {2}));
  EXPECT_EQ(x.at(-3, slice(0, 2)).get().array(), Array::from_vector<float>({0, 1}, {2}));
  EXPECT_EQ(x.at(5, slice(0, 2)).set(9.0f).array(), x.array());
  EXPECT_EQ(x.at(-3, slice(1, 3)).add(10.0f).array(), x.array());
  // An index array beside a slice: whole rows gathered, or scattered back with the update
  // dropped where the index is out of range; a repeated index keeps its last update (set) or
  // adds up (add).
  {
    Value y = convert(reshape(arange(12), {3, 4}), DType::f32);
    Value rows = array<int32_t>({2, 0, 5, -1, 1}, {5});
    Value w = convert(reshape(arange(10), {5, 2}), DType::f32) * 10.0f + 100.0f;
    EXPECT_EQ(y.at(rows, slice(1, 3)).set(w).array(),
              Array::from_vector<float>({0, 120, 130, 3, 4, 180, 190, 7, 8, 160, 170, 11}, {3, 4}));
    EXPECT_EQ(y.at(rows, slice(1, 3)).add(w).array(),
              Array::from_vector<float>({0, 121, 132, 3, 4, 185, 196, 7, 8, 269, 290, 11}, {3, 4}));
    EXPECT_EQ(y.at(rows, slice(1, 3)).get().array(),
              Array::from_vector<float>({9, 10, 1, 2, 9, 10, 9, 10, 5, 6}, {5, 2}));
    EXPECT_EQ(y.at(slice(1, 3), rows).get().shape(), (Shape{2, 5}));
  }
  // Behind a whole dim; a repeated index keeps the last update.
  EXPECT_EQ(x.at(all, array<int32_t>({0, 3, -3}, {3}))
                .set(array<float>({1, 2, 3, 4, 5, 6}, {2, 3}))
                .array(),
            Array::from_vector<float>({3, 1, 2, 6, 4, 5}, {2, 3}));
  // Index arrays on dims that are not next to each other: the index dims come first, as in
  // NumPy, and an ellipsis stands for whole dims wherever it is.
  {
    Value z = convert(reshape(arange(24), {2, 3, 4}), DType::f32);
    Value i = array<int32_t>({1, 0, -1}, {3}), j = array<int32_t>({3, 7, -2}, {3});
    Value u3 = convert(reshape(arange(9), {3, 3}), DType::f32) * 10.0f + 100.0f;
    Value u2 = convert(reshape(arange(6), {3, 2}), DType::f32) * 10.0f + 100.0f;
    auto with = [&](std::vector<std::pair<int, float>> changed) {
      std::vector<float> v(24);
      for (int k = 0; k < 24; ++k) v[k] = float(k);
      for (auto [at, value] : changed) v[at] = value;
      return Array::from_vector<float>(v, {2, 3, 4});
    };
    EXPECT_EQ(z.at(i, all, j).get().array(),
              Array::from_vector<float>({15, 19, 23, 3, 7, 11, 14, 18, 22}, {3, 3}));
    EXPECT_EQ(z.at(i, all, j).set(u3).array(),
              with({{14, 160}, {15, 100}, {18, 170}, {19, 110}, {22, 180}, {23, 120}}));
    EXPECT_EQ(z.at(i, ellipsis, j).add(u3).array(),
              with({{14, 174}, {15, 115}, {18, 188}, {19, 129}, {22, 202}, {23, 143}}));
    EXPECT_EQ(z.at(0, all, j).get().array(),
              Array::from_vector<float>({3, 7, 11, 3, 7, 11, 2, 6, 10}, {3, 3}));
    EXPECT_EQ(z.at(0, all, j).set(u3).array(),
              with({{2, 160}, {3, 100}, {6, 170}, {7, 110}, {10, 180}, {11, 120}}));
    EXPECT_EQ(z.at(i, slice(1, 3), j).get().array(),
              Array::from_vector<float>({19, 23, 7, 11, 18, 22}, {3, 2}));
    EXPECT_EQ(z.at(i, slice(1, 3), j).set(u2).array(),
              with({{18, 140}, {19, 100}, {22, 150}, {23, 110}}));
    EXPECT_EQ(z.at(i, slice(1, 3), j).add(u2).array(),
              with({{18, 158}, {19, 119}, {22, 172}, {23, 133}}));
    EXPECT_EQ(z.at(ellipsis, i).get().array(), z.at(all, all, i).get().array());
    // A static index out of range: a read clamps it, an update is dropped (JAX 0.10.2).
    Value j2 = array<int32_t>({3, 1}, {2});
    EXPECT_EQ(z.at(5, all, j2).get().array(),
              Array::from_vector<float>({15, 19, 23, 13, 17, 21}, {2, 3}));
    EXPECT_EQ(z.at(-3, all, j2).get().array(),
              Array::from_vector<float>({3, 7, 11, 1, 5, 9}, {2, 3}));
    EXPECT_EQ(z.at(5, all, j2).set(100.0f).array(), z.array());
    EXPECT_EQ(z.at(2, j2).add(100.0f).array(), z.array());
    auto error_of = [](const std::function<void()>& f) -> std::string {
      try {
        f();
      } catch (const TypeError& e) {
        return e.what();
      }
      return "no error";
    };
    EXPECT_EQ(error_of([&] { (void)z.at(i, 0, 0, 0).get(); }),
              "x.at(...): 4 indices for a value of type f32[2,3,4] (3 dims)");
    EXPECT_EQ(error_of([&] { (void)z.at(ellipsis, i, ellipsis).set(1.0f); }),
              "x.at(...): an indexer may contain at most one ellipsis");
    auto g = grad([&](Value u) { return reduce_sum(integer_pow(z.at(i, all, j).set(u), 2)); });
    EXPECT_EQ(g(u3).array(), (u3 * array<float>({2, 2, 2, 0, 0, 0, 2, 2, 2}, {3, 3})).array());
  }
  // Compiled, and differentiated: d/du sum(x.at[r, c].set(u)^2) is 2u where u lands.
  auto f = [&](Value u) { return reduce_sum(integer_pow(x.at(r, c).set(u), 2)); };
  EXPECT_EQ(grad(f)(u).array(), Array::from_vector<float>({20, 40, 0, 80}, {4}));
  auto native = jit(f, JitOptions{.backend = Backend::native, .tier = Tier::fast, .name = "at2"});
  EXPECT_EQ(native(u).item(), f(u).item());
}

TEST(ValueAt, DifferentiatesAndCompilesAsRefs) {
  // f(x, u) = sum(x.at[1].add(u)^2): df/dx = 2 y, df/du = 2 y[1], with y the updated x.
  auto f = [](Value x, Value u) {
    Value y = x.at(1).add(u);
    return reduce_sum(y * y);
  };
  Value x = array<float>({1, 2, 3, 4}, {2, 2});
  Value u = array<float>({0.5f, -1}, {2});
  auto [gx, gu] = std::pair{grad(f, 0)(x, u), grad(f, 1)(x, u)};
  EXPECT_EQ(gx.array(), Array::from_vector<float>({2, 4, 7, 6}, {2, 2}));
  EXPECT_EQ(gu.array(), Array::from_vector<float>({7, 6}, {2}));
  auto native = jit(f, JitOptions{.backend = Backend::native, .tier = Tier::fast, .name = "at"});
  EXPECT_EQ(native(x, u).item(), 1 + 4 + 3.5 * 3.5 + 3 * 3);
}

// As JAX: writing a value whose tangent is a symbolic zero into a ref that has a tangent ref
// zeroes the tangent ref there (it is not left holding the old tangent).
TEST(Refs, JvpOfAWriteWithAZeroTangentZeroesTheTangentRef) {
  auto g = [](Value x, Ref r) {
    r.set(0, Value(5.0f));  // a constant: zero tangent
    return r.get() * x;
  };
  Ref r = new_ref(array<float>({1, 2}, {2}));
  Ref r_dot = new_ref(array<float>({7, 7}, {2}));
  auto [y, y_dot] = jvp(g, std::tuple{Value(3.0f), r}, std::tuple{Value(1.0f), r_dot});
  EXPECT_EQ(y.array(), Array::from_vector<float>({15, 6}, {2}));
  EXPECT_EQ(r_dot.value(), Array::from_vector<float>({0, 7}, {2}));
  // d(r x) = r_dot x + r x_dot, with r_dot[0] = 0 after the write: [0 + 5, 21 + 2].
  EXPECT_EQ(y_dot.array(), Array::from_vector<float>({5, 23}, {2}));
}

TEST(Refs, EmptyRefIsScratchStartingAtZeros) {
  Ref r = empty_ref(ArrayType{DType::f32, {3}});
  EXPECT_EQ(r.value(), Array::from_vector<float>({0, 0, 0}, {3}));
  // Scratch inside a function: written, then read; under jit on both backends and under grad
  // (d/dx sum(scratch) with scratch = x * x is 2x).
  auto f = [](Value x) {
    Ref scratch = empty_ref(ArrayType{DType::f32, {3}});
    scratch[ellipsis] = x * x;
    Value total = reduce_sum(freeze(scratch));
    return total;
  };
  Value x = array<float>({1, -2, 3}, {3});
  for (Backend backend : {Backend::native, Backend::interpreter}) {
    auto g = jit(f, JitOptions{.backend = backend, .tier = Tier::fast, .name = "scratch"});
    EXPECT_EQ(g(x).item(), 14.0);
  }
  EXPECT_EQ(grad(f)(x).array(), Array::from_vector<float>({2, -4, 6}, {3}));
  EXPECT_NE(make_jaxpr(f)(x).str().find("new_ref"), std::string::npos);
}

TEST(Refs, UsingARefAfterFreeRefIsE12) {
  Ref r = new_ref(zeros({2}));
  free_ref(r);
  message_of([&] { (void)r.get(); }, "E12");
  std::string msg = message_of(
      [] {
        make_jaxpr([](Value x) {
          Ref s = new_ref(x);
          free_ref(s);
          s[ellipsis] = x;
          return x;
        })(1.0f);
      },
      "E12");
  EXPECT_NE(msg.find("freeze"), std::string::npos) << msg;
}

}  // namespace
}  // namespace refjit
