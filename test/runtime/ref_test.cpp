#include "eval_test_util.h"

namespace refjit {
namespace {

using namespace refjit::test;

IndexerDim static_slice(int64_t start, int64_t size, int64_t stride = 1) {
  return IndexerDim{IndexerDim::Kind::slice, start, size, stride, false};
}
IndexerDim dynamic_slice(int64_t size) {
  return IndexerDim{IndexerDim::Kind::slice, 0, size, 1, true};
}
IndexerDim static_index(int64_t i) { return IndexerDim{IndexerDim::Kind::index, i, 0, 1, false}; }
IndexerDim dynamic_index() { return IndexerDim{IndexerDim::Kind::index, 0, 0, 1, true}; }
IndexerDim index_array() { return IndexerDim{IndexerDim::Kind::index_array, 0, 0, 1, true}; }

RefBufferPtr make_ref(const Array& a) { return std::make_shared<RefBuffer>(a); }

// Runs `get` on a ref argument with the given indexer and dynamic operands.
Array get(const RefBufferPtr& ref, Indexer idx, const std::vector<Array>& dyn, Shape out) {
  JaxprBuilder b;
  std::vector<Atom> ins{b.add_invar(Type::ref(ref->type()))};
  std::vector<RtValue> args{ref};
  for (const Array& d : dyn) {
    ins.push_back(b.add_invar(d.type()));
    args.push_back(d);
  }
  Var o = emit1(b, Prim::get, ins, {{"indexer", idx}}, at(ref->type().dtype, out));
  b.set_outvars({o});
  return as_array(interpret(b.finish(), args)[0]);
}

// Runs swap (returns the old value) or addupdate (returns nothing) on a ref argument.
std::vector<RtValue> write(Prim p, const RefBufferPtr& ref, const Array& value, Indexer idx,
                           const std::vector<Array>& dyn) {
  JaxprBuilder b;
  Var r = b.add_invar(Type::ref(ref->type()));
  Var v = b.add_invar(value.type());
  std::vector<Atom> ins{r, v};
  std::vector<RtValue> args{ref, value};
  for (const Array& d : dyn) {
    ins.push_back(b.add_invar(d.type()));
    args.push_back(d);
  }
  std::vector<Type> outs;
  if (p == Prim::swap) outs.push_back(value.type());
  std::vector<Var> os = emit(b, p, ins, {{"indexer", idx}}, outs);
  b.set_outvars(std::vector<Atom>(os.begin(), os.end()));
  return interpret(b.finish(), args);
}

Array grid() { return arr<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4}); }

TEST(RefGet, WholeRefReturnsACopy) {
  RefBufferPtr r = make_ref(grid());
  Array g = get(r, Indexer{}, {}, {3, 4});
  EXPECT_EQ(g, grid());
  EXPECT_NE(g.data(), r->value().data());
}

TEST(RefGet, StaticStridedSliceAndTrailingWholeDims) {
  RefBufferPtr r = make_ref(grid());
  EXPECT_EQ(values<int32_t>(get(r, Indexer{{static_slice(0, 2, 2)}}, {}, {2, 4})),
            (std::vector<int32_t>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(
      values<int32_t>(get(r, Indexer{{static_slice(1, 2), static_slice(1, 2, 2)}}, {}, {2, 2})),
      (std::vector<int32_t>{5, 7, 9, 11}));
}

TEST(RefGet, DynamicSliceStartClamps) {
  RefBufferPtr r = make_ref(vec<float>({0, 1, 2, 3, 4}));
  auto at_start = [&](int32_t s) {
    return values<float>(get(r, Indexer{{dynamic_slice(2)}}, {Array::scalar<int32_t>(s)}, {2}));
  };
  EXPECT_EQ(at_start(2), (std::vector<float>{2, 3}));
  EXPECT_EQ(at_start(9), (std::vector<float>{3, 4}));
  EXPECT_EQ(at_start(-5), (std::vector<float>{0, 1}));
}

TEST(RefGet, StaticAndDynamicIntegerIndicesDropTheDim) {
  RefBufferPtr r = make_ref(grid());
  EXPECT_EQ(values<int32_t>(get(r, Indexer{{static_index(2)}}, {}, {4})),
            (std::vector<int32_t>{8, 9, 10, 11}));
  EXPECT_EQ(values<int32_t>(get(r, Indexer{{static_slice(0, 3), static_index(1)}}, {}, {3})),
            (std::vector<int32_t>{1, 5, 9}));
  // Dynamic index clamps into [0, dim-1].
  EXPECT_EQ(values<int32_t>(get(r, Indexer{{dynamic_index(), dynamic_index()}},
                                {Array::scalar<int32_t>(7), Array::scalar<int64_t>(-2)}, {})),
            (std::vector<int32_t>{8}));
}

TEST(RefGet, IndexArrayDimsStayInPlaceWhenAdjacent) {
  RefBufferPtr r = make_ref(grid());
  // r[:, [3, 0]] -> shape [3, 2]
  EXPECT_EQ(values<int32_t>(get(r, Indexer{{static_slice(0, 3), index_array()}},
                                {vec<int32_t>({3, 0})}, {3, 2})),
            (std::vector<int32_t>{3, 0, 7, 4, 11, 8}));
  // r[[[2], [0]], [1, 3]]: arrays broadcast to [2, 2].
  EXPECT_EQ(values<int32_t>(get(r, Indexer{{index_array(), index_array()}},
                                {arr<int32_t>({2, 0}, {2, 1}), vec<int64_t>({1, 3})}, {2, 2})),
            (std::vector<int32_t>{9, 11, 1, 3}));
}

TEST(RefGet, NonAdjacentIndexArraysGoFirst) {
  RefBufferPtr r = make_ref(arr<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2}));
  // r[[1, 0], :, [0, 1]] -> index dims first: shape [2, 3]; out[k][j] = r[a[k]][j][b[k]].
  EXPECT_EQ(values<int32_t>(get(r, Indexer{{index_array(), static_slice(0, 3), index_array()}},
                                {vec<int32_t>({1, 0}), vec<int32_t>({0, 1})}, {2, 3})),
            (std::vector<int32_t>{6, 8, 10, 1, 3, 5}));
}

TEST(RefGet, IndexArrayEntriesClamp) {
  RefBufferPtr r = make_ref(vec<int64_t>({10, 20, 30}));
  EXPECT_EQ(values<int64_t>(get(r, Indexer{{index_array()}}, {vec<int32_t>({-1, 5, 1})}, {3})),
            (std::vector<int64_t>{10, 30, 20}));
}

TEST(RefGet, StaticOutOfRangeIndexerIsE12) {
  RefBufferPtr r = make_ref(grid());
  try {
    get(r, Indexer{{static_index(3)}}, {}, {4});
    FAIL() << "expected RefError";
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), "E12");
  }
  EXPECT_THROW(get(r, Indexer{{static_slice(2, 2)}}, {}, {2, 4}), RefError);
}

TEST(RefSwap, ReturnsOldContentsAndWritesInPlace) {
  RefBufferPtr r = make_ref(grid());
  const std::byte* storage = r->value().data();
  std::vector<RtValue> out =
      write(Prim::swap, r, vec<int32_t>({-1, -2, -3}),
            Indexer{{static_slice(0, 3), dynamic_index()}}, {Array::scalar<int32_t>(2)});
  EXPECT_EQ(values<int32_t>(as_array(out[0])), (std::vector<int32_t>{2, 6, 10}));
  EXPECT_EQ(values<int32_t>(r->value()),
            (std::vector<int32_t>{0, 1, -1, 3, 4, 5, -2, 7, 8, 9, -3, 11}));
  EXPECT_EQ(r->value().data(), storage);
}

TEST(RefSwap, WholeRefWithIndexArrayAndWrongShapeIsE12) {
  RefBufferPtr r = make_ref(vec<double>({1, 2, 3}));
  std::vector<RtValue> out =
      write(Prim::swap, r, vec<double>({9, 8}), Indexer{{index_array()}}, {vec<int32_t>({2, 0})});
  EXPECT_EQ(values<double>(as_array(out[0])), (std::vector<double>{3, 1}));
  EXPECT_EQ(values<double>(r->value()), (std::vector<double>{8, 2, 9}));
  EXPECT_THROW(write(Prim::swap, r, vec<double>({1, 2}), Indexer{}, {}), RefError);
}

TEST(RefAddupdate, AddsInPlaceAndIndexArrayDuplicatesAccumulate) {
  RefBufferPtr r = make_ref(vec<float>({1, 1, 1, 1}));
  const std::byte* storage = r->value().data();
  EXPECT_TRUE(write(Prim::addupdate, r, vec<float>({1, 2, 3}), Indexer{{index_array()}},
                    {vec<int32_t>({3, 0, 3})})
                  .empty());
  EXPECT_EQ(values<float>(r->value()), (std::vector<float>{3, 1, 1, 5}));
  write(Prim::addupdate, r, vec<float>({10, 20}), Indexer{{dynamic_slice(2)}},
        {Array::scalar<int32_t>(1)});
  EXPECT_EQ(values<float>(r->value()), (std::vector<float>{3, 11, 21, 5}));
  write(Prim::addupdate, r, Array::scalar<float>(0.5f), Indexer{{static_index(0)}}, {});
  EXPECT_EQ(values<float>(r->value()), (std::vector<float>{3.5f, 11, 21, 5}));
  EXPECT_EQ(r->value().data(), storage);
}

TEST(RefLifecycle, NewRefCopiesAndFreezeEndsTheRef) {
  // { lambda ; a:i32[2]. let b = new_ref a; b[...] += a; c = freeze b; d = get b in (c, d) }
  JaxprBuilder b;
  Var a = b.add_invar(at(DType::i32, {2}));
  Var r = emit1(b, Prim::new_ref, {a}, {}, Type::ref(at(DType::i32, {2})));
  emit(b, Prim::addupdate, {r, a}, {{"indexer", Indexer{}}}, {});
  Var c = emit1(b, Prim::freeze, {r}, {}, at(DType::i32, {2}));
  b.set_outvars({c, a});
  Jaxpr ok = b.jaxpr();
  std::vector<RtValue> out = interpret(ok, {vec<int32_t>({3, 4})});
  EXPECT_EQ(values<int32_t>(as_array(out[0])), (std::vector<int32_t>{6, 8}));
  EXPECT_EQ(values<int32_t>(as_array(out[1])), (std::vector<int32_t>{3, 4}));  // a not aliased

  Var d = emit1(b, Prim::get, {r}, {{"indexer", Indexer{}}}, at(DType::i32, {2}));
  b.set_outvars({d});
  try {
    interpret(b.finish(), {vec<int32_t>({3, 4})});
    FAIL() << "expected RefError E12";
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), "E12");
    EXPECT_NE(std::string(e.what()).find("frozen"), std::string::npos);
  }
}

TEST(RefLifecycle, FreezingAnArgumentRefMarksTheCallersBuffer) {
  JaxprBuilder b;
  Var r = b.add_invar(Type::ref(at(DType::i32, {1})));
  Var v = emit1(b, Prim::freeze, {r}, {}, at(DType::i32, {1}));
  b.set_outvars({v});
  auto buf = make_ref(vec<int32_t>({4}));
  EXPECT_EQ(as_array(interpret(b.finish(), {buf})[0]), vec<int32_t>({4}));
  EXPECT_TRUE(buf->frozen());
}

TEST(RefLifecycle, FrozenArgumentRefIsRejected) {
  RefBufferPtr r = make_ref(vec<int32_t>({1}));
  r->mark_frozen();
  EXPECT_THROW(get(r, Indexer{}, {}, {1}), RefError);
}

}  // namespace
}  // namespace refjit
