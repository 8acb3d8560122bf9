#include <cmath>

#include "eval_test_util.h"

namespace refjit {
namespace {

using namespace refjit::test;

const ArrayType kI32 = at(DType::i32);
const ArrayType kF32 = at(DType::f32);

JaxprPtr share(JaxprBuilder& b) { return std::make_shared<const Jaxpr>(b.finish()); }

Params scan_params(JaxprPtr body, int64_t length, bool reverse, int64_t num_consts,
                   int64_t num_carry) {
  return Params{{"jaxpr", std::move(body)}, {"length", length},         {"reverse", reverse},
                {"num_consts", num_consts}, {"num_carry", num_carry},   {"linear", NoneParam{}},
                {"unroll", int64_t{1}},     {"_split_transpose", false}};
}

// carry' = carry * 10 + x; y = carry'.
JaxprPtr digits_body() {
  JaxprBuilder b;
  Var c = b.add_invar(kI32);
  Var x = b.add_invar(kI32);
  Var t = emit1(b, Prim::mul, {c, Literal::of_int(DType::i32, 10)}, {}, kI32);
  Var n = emit1(b, Prim::add, {t, x}, {}, kI32);
  b.set_outvars({n, n});
  return share(b);
}

std::vector<RtValue> run_digits(bool reverse) {
  JaxprBuilder b;
  Var init = b.add_invar(kI32);
  Var xs = b.add_invar(at(DType::i32, {3}));
  std::vector<Var> o = emit(b, Prim::scan, {init, xs}, scan_params(digits_body(), 3, reverse, 0, 1),
                            {kI32, at(DType::i32, {3})});
  b.set_outvars({o[0], o[1]});
  return interpret(b.finish(), {Array::scalar<int32_t>(0), vec<int32_t>({1, 2, 3})});
}

TEST(Scan, CarryAndStackedOutputs) {
  std::vector<RtValue> out = run_digits(false);
  EXPECT_EQ(values<int32_t>(as_array(out[0])), (std::vector<int32_t>{123}));
  EXPECT_EQ(values<int32_t>(as_array(out[1])), (std::vector<int32_t>{1, 12, 123}));
}

TEST(Scan, ReverseWalksRowsBackwardsAndStacksAtTheSameRow) {
  std::vector<RtValue> out = run_digits(true);
  EXPECT_EQ(values<int32_t>(as_array(out[0])), (std::vector<int32_t>{321}));
  EXPECT_EQ(values<int32_t>(as_array(out[1])), (std::vector<int32_t>{321, 32, 3}));
}

TEST(Scan, ClosedOverRefConstIsUpdatedEveryIteration) {
  // body(ref, x): ref[...] += x; y = ref[...]  -> running sums.
  JaxprBuilder body;
  Var r = body.add_invar(Type::ref(kF32));
  Var x = body.add_invar(kF32);
  emit(body, Prim::addupdate, {r, x}, {{"indexer", Indexer{}}}, {});
  Var y = emit1(body, Prim::get, {r}, {{"indexer", Indexer{}}}, kF32);
  body.set_outvars({y});

  JaxprBuilder b;
  Var ref = b.add_invar(Type::ref(kF32));
  Var xs = b.add_invar(at(DType::f32, {4}));
  Var ys = emit1(b, Prim::scan, {ref, xs}, scan_params(share(body), 4, false, 1, 0),
                 at(DType::f32, {4}));
  b.set_outvars({ys});
  auto buf = std::make_shared<RefBuffer>(Array::scalar<float>(100));
  const std::byte* storage = buf->value().data();
  std::vector<RtValue> out = interpret(b.finish(), {buf, vec<float>({1, 2, 3, 4})});
  EXPECT_EQ(values<float>(as_array(out[0])), (std::vector<float>{101, 103, 106, 110}));
  EXPECT_EQ(values<float>(buf->value()), (std::vector<float>{110}));
  EXPECT_EQ(buf->value().data(), storage);
}

TEST(Scan, ScannedOverRefSeesAndWritesItsRow) {
  // body(row: Ref{i32[2]}): old = swap(row[...], 2 * row[...]); y = old[1].
  const ArrayType row_t = at(DType::i32, {2});
  JaxprBuilder body;
  Var row = body.add_invar(Type::ref(row_t));
  Var v = emit1(body, Prim::get, {row}, {{"indexer", Indexer{}}}, row_t);
  Var d = emit1(body, Prim::mul, {v, Literal::of_int(DType::i32, 2)}, {}, row_t);
  Var old = emit1(body, Prim::swap, {row, d}, {{"indexer", Indexer{}}}, row_t);
  Var y =
      emit1(body, Prim::slice, {old},
            {{"start_indices", IntList{1}}, {"limit_indices", IntList{2}}}, at(DType::i32, {1}));
  body.set_outvars({y});
  JaxprPtr body_jaxpr = share(body);

  for (bool reverse : {false, true}) {
    JaxprBuilder b;
    Var ref = b.add_invar(Type::ref(at(DType::i32, {3, 2})));
    Var ys = emit1(b, Prim::scan, {ref}, scan_params(body_jaxpr, 3, reverse, 0, 0),
                   at(DType::i32, {3, 1}));
    b.set_outvars({ys});
    auto buf = std::make_shared<RefBuffer>(arr<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2}));
    const std::byte* storage = buf->value().data();
    std::vector<RtValue> out = interpret(b.finish(), {buf});
    EXPECT_EQ(values<int32_t>(as_array(out[0])), (std::vector<int32_t>{2, 4, 6}));
    EXPECT_EQ(values<int32_t>(buf->value()), (std::vector<int32_t>{2, 4, 6, 8, 10, 12}));
    EXPECT_EQ(buf->value().data(), storage);
  }
}

TEST(Scan, XsWithWrongLeadingDimIsAnError) {
  JaxprBuilder b;
  Var init = b.add_invar(kI32);
  Var xs = b.add_invar(at(DType::i32, {2}));
  std::vector<Var> o = emit(b, Prim::scan, {init, xs}, scan_params(digits_body(), 3, false, 0, 1),
                            {kI32, at(DType::i32, {3})});
  b.set_outvars({o[0]});
  EXPECT_THROW(interpret(b.finish(), {Array::scalar<int32_t>(0), vec<int32_t>({1, 2})}), Error);
}

// cond with branches returning x + k for k = 0, 1, 2 and writing k into a ref operand.
std::vector<RtValue> run_cond(const Array& index) {
  JaxprList branches;
  for (int k = 0; k < 3; ++k) {
    JaxprBuilder br;
    Var r = br.add_invar(Type::ref(kI32));
    Var x = br.add_invar(kI32);
    emit(br, Prim::swap, {r, Literal::of_int(DType::i32, k)}, {{"indexer", Indexer{}}}, {kI32});
    Var y = emit1(br, Prim::add, {x, Literal::of_int(DType::i32, k)}, {}, kI32);
    br.set_outvars({y});
    branches.push_back(share(br));
  }
  JaxprBuilder b;
  Var i = b.add_invar(index.type());
  Var r = b.add_invar(Type::ref(kI32));
  Var x = b.add_invar(kI32);
  Var y = emit1(b, Prim::cond, {i, r, x}, {{"branches", branches}}, kI32);
  b.set_outvars({y});
  auto buf = std::make_shared<RefBuffer>(Array::scalar<int32_t>(-1));
  std::vector<RtValue> out = interpret(b.finish(), {index, buf, Array::scalar<int32_t>(10)});
  out.push_back(buf->value());
  return out;
}

TEST(Cond, IndexPicksBranchClampedAndRefWritesAreVisible) {
  auto result = [](const Array& i) {
    std::vector<RtValue> out = run_cond(i);
    return std::pair{as_array(out[0]).as_int(0), as_array(out[1]).as_int(0)};
  };
  EXPECT_EQ(result(Array::scalar<int32_t>(1)), (std::pair<int64_t, int64_t>{11, 1}));
  EXPECT_EQ(result(Array::scalar<int32_t>(7)), (std::pair<int64_t, int64_t>{12, 2}));
  EXPECT_EQ(result(Array::scalar<int32_t>(-3)), (std::pair<int64_t, int64_t>{10, 0}));
}

TEST(Cond, BoolFalseIsBranchZero) {
  EXPECT_EQ(as_array(run_cond(Array::scalar<bool>(false))[0]).as_int(0), 10);
  EXPECT_EQ(as_array(run_cond(Array::scalar<bool>(true))[0]).as_int(0), 11);
}

TEST(Jit, RefOperandIsPassedByReference) {
  JaxprBuilder inner;
  Var r = inner.add_invar(Type::ref(at(DType::f64, {2})));
  Var x = inner.add_invar(at(DType::f64, {2}));
  emit(inner, Prim::addupdate, {r, x}, {{"indexer", Indexer{}}}, {});
  Var s = emit1(inner, Prim::mul, {x, x}, {}, at(DType::f64, {2}));
  inner.set_outvars({s});

  JaxprBuilder b;
  Var ref = b.add_invar(Type::ref(at(DType::f64, {2})));
  Var a = b.add_invar(at(DType::f64, {2}));
  Var o = emit1(b, Prim::jit, {ref, a}, {{"name", std::string("f")}, {"jaxpr", share(inner)}},
                at(DType::f64, {2}));
  b.set_outvars({o});
  auto buf = std::make_shared<RefBuffer>(vec<double>({1, 1}));
  const std::byte* storage = buf->value().data();
  std::vector<RtValue> out = interpret(b.finish(), {buf, vec<double>({2, 3})});
  EXPECT_EQ(values<double>(as_array(out[0])), (std::vector<double>{4, 9}));
  EXPECT_EQ(values<double>(buf->value()), (std::vector<double>{3, 4}));
  EXPECT_EQ(buf->value().data(), storage);
}

TEST(CustomVjpCall, EvaluatesThePrimal) {
  JaxprBuilder primal;
  Var x = primal.add_invar(kF32);
  Var y = emit1(primal, Prim::sin, {x}, {}, kF32);
  primal.set_outvars({y});
  JaxprBuilder b;
  Var a = b.add_invar(kF32);
  Var o = emit1(b, Prim::custom_vjp_call, {a},
                {{"call_jaxpr", share(primal)}, {"num_res", int64_t{0}}}, kF32);
  b.set_outvars({o});
  std::vector<RtValue> out = interpret(b.finish(), {Array::scalar<float>(0.5f)});
  EXPECT_EQ(as_array(out[0]).values<float>()[0], std::sin(0.5f));
}

}  // namespace
}  // namespace refjit
