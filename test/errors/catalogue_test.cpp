// The bad-input catalogue: one test per class of wrong use of refjit (REFS.md section 3, the
// jaxpr text format, the entry points' argument checks, out-of-range dynamic indices). Each
// asserts the exact error type (and RefError code), that the message names what was wrong
// and where, and -- by running at all -- that nothing crashes.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include "backend/native.h"
#include "refjit/ir/text.h"
#include "refjit/refjit.h"
#include "runtime/interpreter.h"

namespace refjit {
namespace {

// Runs `f`, which must throw exactly an `E` (not a subclass); returns what().
template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    EXPECT_EQ(typeid(e), typeid(E))
        << "expected a " << typeid(E).name() << ", got " << typeid(e).name() << ": " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a " << typeid(E).name() << ", nothing was thrown";
  return "";
}

// Runs `f`, which must throw a RefError with `code`; returns what().
std::string ref_error(const std::function<void()>& f, const std::string& code) {
  try {
    f();
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected RefError " << code << ", got " << typeid(e).name() << ": "
                  << e.what();
    return "";
  }
  ADD_FAILURE() << "expected RefError " << code << ", nothing was thrown";
  return "";
}

#define EXPECT_MENTIONS(msg, part) \
  EXPECT_NE((msg).find(part), std::string::npos) << "missing \"" << (part) << "\" in: " << (msg)

// ---- E1..E10, E12 through the C++ API --------------------------------------------------

TEST(RefErrorCatalogue, E1DifferentiatedValueWrittenIntoAPlumbingRef) {
  auto err6 = [](Value x, Ref plumbing) {
    Value y = x + x;
    plumbing[ellipsis] += y;
    return y;
  };
  Ref r = new_ref(0.0f);
  std::string msg = ref_error([&] { grad(err6)(1.0f, r); }, "E1");
  EXPECT_MENTIONS(msg, "addupdate");
  EXPECT_MENTIONS(msg, "stop_gradient");
}

TEST(RefErrorCatalogue, E1DifferentiatedValueWrittenIntoAClosedOverRef) {
  Ref r = new_ref(0.0f);
  auto f = [&](Value x) {
    r.set(x * 2);
    return x * 3;
  };
  std::string msg = ref_error([&] { grad(f)(1.0f); }, "E1");
  EXPECT_MENTIONS(msg, "swap");
  EXPECT_MENTIONS(msg, "stop_gradient");
}

TEST(RefErrorCatalogue, E2GradWithRespectToARefArgument) {
  auto f = [](Value x, Ref r) { return x * r.get(); };
  std::string msg = ref_error([&] { grad(f, 1)(2.0f, new_ref(3.0f)); }, "E2");
  EXPECT_MENTIONS(msg, "argument 1");
  EXPECT_MENTIONS(msg, "vjp");
  EXPECT_MENTIONS(msg, "with_refs");
}

TEST(RefErrorCatalogue, E3WithRefsWithTheWrongNumberOfEntries) {
  auto [y, f_vjp] = vjp([](Value a, Value b) { return a * b; }, 1.0f, 2.0f);
  std::string msg = ref_error([&] { f_vjp.with_refs(GradValue{}); }, "E3");
  EXPECT_MENTIONS(msg, "argument 1");
  EXPECT_MENTIONS(msg, "has no entry");
  msg = ref_error([&] { f_vjp.with_refs(GradValue{}, GradValue{}, DontWant{}); }, "E3");
  EXPECT_MENTIONS(msg, "entry 2");
  EXPECT_MENTIONS(msg, "has no argument");
}

TEST(RefErrorCatalogue, E4VjpAppliedWithoutAGradientRefForARefArgument) {
  auto [y, f_vjp] = vjp([](Value x, Ref r) { return x * r.get(); }, 2.0f, new_ref(3.0f));
  std::string msg = ref_error([&] { f_vjp(1.0f); }, "E4");
  EXPECT_MENTIONS(msg, "argument 1");
  EXPECT_MENTIONS(msg, "Ref{float32[]}");
  EXPECT_MENTIONS(msg, "with_refs");
  EXPECT_MENTIONS(msg, "DontWant");
}

TEST(RefErrorCatalogue, E5GradValueForARefArgument) {
  auto [y, f_vjp] = vjp([](Value x, Ref r) { return x * r.get(); }, 2.0f, new_ref(3.0f));
  std::string msg = ref_error([&] { f_vjp.with_refs(GradValue{}, GradValue{}); }, "E5");
  EXPECT_MENTIONS(msg, "entry 1");
  EXPECT_MENTIONS(msg, "GradValue");
}

TEST(RefErrorCatalogue, E6GradientRefOfTheWrongShapeOrDtype) {
  auto [y, f_vjp] = vjp([](Value x) { return reduce_sum(x); }, zeros({3}));
  std::string msg = ref_error([&] { f_vjp.with_refs(new_ref(zeros({2, 2}))); }, "E6");
  EXPECT_MENTIONS(msg, "Ref{float32[3]}");
  EXPECT_MENTIONS(msg, "Ref{float32[2,2]}");
  msg = ref_error([&] { f_vjp.with_refs(new_ref(zeros({3}, DType::f64))); }, "E6");
  EXPECT_MENTIONS(msg, "float64[3]");
  EXPECT_MENTIONS(msg, "float32[3]");
}

TEST(RefErrorCatalogue, E6CotangentOfTheWrongType) {
  auto [y, f_vjp] = vjp([](Value x) { return sin(x); }, zeros({3}));
  std::string msg = ref_error([&] { f_vjp(ones({4})); }, "E6");
  EXPECT_MENTIONS(msg, "output 0");
  EXPECT_MENTIONS(msg, "float32[4]");
  EXPECT_MENTIONS(msg, "float32[3]");
  msg = ref_error([&] { f_vjp(ones({3}, DType::f64)); }, "E6");
  EXPECT_MENTIONS(msg, "float64[3]");
}

TEST(RefErrorCatalogue, E7SameRefTwiceToJit) {
  Ref r = new_ref(zeros({2}));
  auto f = jit([](Ref a, Ref b) { a.add(b.get()); }, "twice");
  std::string msg = ref_error([&] { f(r, r); }, "E7");
  EXPECT_MENTIONS(msg, "argument 0");
  EXPECT_MENTIONS(msg, "argument 1");
  EXPECT_MENTIONS(msg, "`twice`");
}

TEST(RefErrorCatalogue, E7SameRefTwiceToScan) {
  Ref m = new_ref(zeros({2, 3}));
  std::string msg = ref_error(
      [&] {
        scan(
            [](Value c, std::tuple<Ref, Ref>) {
              return std::pair{c, std::tuple{}};
            },
            0.0f, std::tuple{m, m});
      },
      "E7");
  EXPECT_MENTIONS(msg, "scan");
  EXPECT_MENTIONS(msg, "0");
  EXPECT_MENTIONS(msg, "1");
}

TEST(RefErrorCatalogue, E7SameRefTwiceToCond) {
  Ref m = new_ref(zeros({2}));
  std::string msg = ref_error(
      [&] {
        cond(
            true, [](Ref, Ref) {}, [](Ref, Ref) {}, m, m);
      },
      "E7");
  EXPECT_MENTIONS(msg, "cond");
  EXPECT_MENTIONS(msg, "argument 0 and as argument 1");
}

TEST(RefErrorCatalogue, E7SameRefTwiceToCustomVjp) {
  auto two = custom_vjp([](Ref a, Ref b) { return a.get() + b.get(); },
                        [](Ref a, Ref b) { return a.get() + b.get(); },
                        [](Value g) {
                          return std::tuple{g, g};
                        },
                        "two");
  Ref r = new_ref(1.0f);
  std::string msg = ref_error([&] { two(r, r); }, "E7");
  EXPECT_MENTIONS(msg, "`two`");
  EXPECT_MENTIONS(msg, "argument 0");
  EXPECT_MENTIONS(msg, "argument 1");
}

TEST(RefErrorCatalogue, E8RefClosedOverAndPassedToJit) {
  Ref r = new_ref(zeros({2}));
  auto f = jit([&](Ref a) { a.add(r.get()); }, "both");
  std::string msg = ref_error([&] { f(r); }, "E8");
  EXPECT_MENTIONS(msg, "argument 0");
  EXPECT_MENTIONS(msg, "closed over");
  EXPECT_MENTIONS(msg, "`both`");
}

TEST(RefErrorCatalogue, E8RefClosedOverAndScannedOver) {
  Ref m = new_ref(zeros({2, 3}));
  std::string msg = ref_error(
      [&] {
        scan(
            [&](Value c, Ref row) {
              m[0] = row.get();
              return std::pair{c, std::tuple{}};
            },
            0.0f, m);
      },
      "E8");
  EXPECT_MENTIONS(msg, "closed over");
}

TEST(RefErrorCatalogue, E9RefReturnedFromJit) {
  Ref r = new_ref(zeros({2}));
  std::string msg = ref_error([&] { jit([](Ref a) { return a; }, "ident")(r); }, "E9");
  EXPECT_MENTIONS(msg, "`ident`");
  EXPECT_MENTIONS(msg, "argument 0");
}

TEST(RefErrorCatalogue, E9RefReturnedFromAScanBody) {
  std::string msg = ref_error(
      [&] {
        scan([](Value c, Value x) { return std::pair{c, new_ref(x)}; }, 0.0f, zeros({2}));
      },
      "E9");
  EXPECT_MENTIONS(msg, "y output 0");
  EXPECT_MENTIONS(msg, "created inside the body with new_ref");
}

TEST(RefErrorCatalogue, E9RefReturnedFromACondBranch) {
  Ref r = new_ref(zeros({}));
  std::string msg = ref_error(
      [&] {
        cond(
            true, [](Ref q) { return q; }, [](Ref q) { return q; }, r);
      },
      "E9");
  EXPECT_MENTIONS(msg, "cond");
  EXPECT_MENTIONS(msg, "operand 0");
}

TEST(RefErrorCatalogue, E9RefAsAScanCarry) {
  Ref r = new_ref(zeros({}));
  std::string msg = ref_error(
      [&] {
        scan([](Ref c, Value x) { return std::pair{c, x}; }, r, zeros({2}));
      },
      "E9");
  EXPECT_MENTIONS(msg, "carry leaf 0");
  EXPECT_MENTIONS(msg, "Ref{float32[]}");
}

TEST(RefErrorCatalogue, E10CustomVjpFwdReturningAForeignRef) {
  auto bad = custom_vjp([](Value x) { return x; },
                        [](Value x) {
                          return std::tuple{x, new_ref(x)};
                        },
                        [](Ref, Value g) { return g; }, "bad_fwd");
  std::string msg = ref_error([&] { bad(1.0f); }, "E10");
  EXPECT_MENTIONS(msg, "bad_fwd");
  EXPECT_MENTIONS(msg, "not one of its arguments");
}

TEST(RefErrorCatalogue, E10CustomVjpPrimalReturningARef) {
  auto bad = custom_vjp([](Ref r) { return r; }, [](Ref r) { return r; }, [](Value g) { return g; },
                        "bad_primal");
  std::string msg = ref_error([&] { bad(new_ref(1.0f)); }, "E10");
  EXPECT_MENTIONS(msg, "bad_primal");
  EXPECT_MENTIONS(msg, "output 0");
}

TEST(RefErrorCatalogue, E12UseAfterFreeze) {
  Ref r = new_ref(Value(3.0f));
  EXPECT_EQ(freeze(r).array(), Array::scalar(3.0f));
  std::string msg = ref_error([&] { (void)r.get(); }, "E12");
  EXPECT_MENTIONS(msg, "after freeze");
  msg = ref_error([&] { r.set(1.0f); }, "E12");
  EXPECT_MENTIONS(msg, "after freeze");
  // Inside a trace the use after freeze is found as the eqn is staged.
  msg = ref_error(
      [] {
        make_jaxpr([](Value x) {
          Ref q = new_ref(x);
          Value y = freeze(q);
          q.set(y);
          return y;
        })(1.0f);
      },
      "E12");
  EXPECT_MENTIONS(msg, "freeze");
}

TEST(RefErrorCatalogue, E12SwapWithTheWrongShapeOrDtype) {
  Ref r = new_ref(zeros({3}));
  std::string msg = ref_error([&] { r.swap(ones({4})); }, "E12");
  EXPECT_MENTIONS(msg, "swap: operand 1 has type f32[4]");
  EXPECT_MENTIONS(msg, "selects f32[3]");
  msg = ref_error([&] { r.swap(ones({3}, DType::f64)); }, "E12");
  EXPECT_MENTIONS(msg, "swap: operand 1 has type f64[3]");
  EXPECT_MENTIONS(msg, "Ref{f32[3]}");
  msg = ref_error([&] { r.add(ones({2})); }, "E12");
  EXPECT_MENTIONS(msg, "addupdate");
  EXPECT_EQ(r.value(), Array(ArrayType{DType::f32, {3}}));  // nothing was written
}

TEST(RefErrorCatalogue, E12OutOfBoundsStaticIndexer) {
  Ref r = new_ref(zeros({4, 2}));
  std::string msg = ref_error([&] { (void)r.get(4); }, "E12");
  EXPECT_MENTIONS(msg, "4");
  EXPECT_MENTIONS(msg, "out of bounds");
  // A slice's bounds are clipped as Python's are (r[3:5] of 4 rows is r[3:4]); an index is not.
  EXPECT_EQ(r.get(slice(3, 5)).shape(), (Shape{1, 2}));
  EXPECT_EQ(r.get(slice(-1, 99)).shape(), (Shape{1, 2}));
  msg = ref_error([&] { (void)r.get(-5); }, "E12");
  EXPECT_MENTIONS(msg, "dim 0");
  // The same indexer in jaxpr text is found by the type rule.
  msg = ref_error(
      [] { parse_jaxpr("{ lambda ; a:Ref{f32[4]}. let b:f32[] <- a[7] in (b,) }", "oob.jaxpr"); },
      "E12");
  EXPECT_MENTIONS(msg, "Out-of-bounds index");
  EXPECT_MENTIONS(msg, "get");
}

TEST(RefErrorCatalogue, E12NonRefWhereARefIsNeeded) {
  std::string msg = ref_error(
      [] { parse_jaxpr("{ lambda ; a:f32[]. let b:f32[] = freeze a in (b,) }", "noref.jaxpr"); },
      "E12");
  EXPECT_MENTIONS(msg, "freeze");
  EXPECT_MENTIONS(msg, "operand 0 has type f32[]");
  EXPECT_MENTIONS(msg, "a ref is needed");
  // Indexing syntax on a non-ref is already a parse error, at the indexed variable.
  msg = error_of<ParseError>(
      [] { parse_jaxpr("{ lambda ; a:f32[4]. let b:f32[4] <- a[...] in (b,) }", "noref.jaxpr"); });
  EXPECT_MENTIONS(msg, "noref.jaxpr:1:38:");
  EXPECT_MENTIONS(msg, "'a' has type f32[4], not a Ref");
}

TEST(RefErrorCatalogue, E12FloatWrittenIntoAnIntRef) {
  Ref r = new_ref(zeros({3}, DType::i32));
  std::string msg = ref_error([&] { r.set(1.5f); }, "E12");
  EXPECT_MENTIONS(msg, "int32");
  msg = ref_error([&] { r.set(ones({3})); }, "E12");
  EXPECT_MENTIONS(msg, "swap: operand 1 has type f32[3]");
  EXPECT_MENTIONS(msg, "Ref{i32[3]}");
  EXPECT_EQ(r.value(), Array(ArrayType{DType::i32, {3}}));
}

// ---- Malformed jaxpr text: ParseError "FILE:LINE:COL: error: ..." --------------------

struct BadText {
  const char* what;
  const char* text;
  int line;
  int col;
  const char* mentions;
};

class MalformedJaxpr : public ::testing::TestWithParam<BadText> {};

TEST_P(MalformedJaxpr, IsAParseErrorAtTheRightPlace) {
  const BadText& c = GetParam();
  try {
    parse_jaxpr(c.text, "bad.jaxpr");
    FAIL() << c.what << ": parsed";
  } catch (const ParseError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.file(), "bad.jaxpr");
    EXPECT_EQ(e.line(), c.line) << msg;
    EXPECT_EQ(e.col(), c.col) << msg;
    std::string prefix =
        "bad.jaxpr:" + std::to_string(c.line) + ":" + std::to_string(c.col) + ": error: ";
    EXPECT_EQ(msg.rfind(prefix, 0), 0u) << msg;
    EXPECT_MENTIONS(msg, c.mentions);
  } catch (const std::exception& e) {
    FAIL() << c.what << ": expected ParseError, got " << typeid(e).name() << ": " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Catalogue, MalformedJaxpr,
    ::testing::Values(
        BadText{"UnknownPrimitive",
                "{ lambda ; a:f32[]. let\n    b:f32[] = frobnicate a\n  in (b,) }", 2, 15,
                "frobnicate"},
        BadText{"UndefinedVariable", "{ lambda ; a:f32[]. let\n    b:f32[] = sin z\n  in (b,) }", 2,
                19, "undefined variable 'z'"},
        BadText{"UnknownDtype", "{ lambda ; a:f17[]. let  in (a,) }", 1, 14, "f17"},
        BadText{"MissingLetBody", "{ lambda ; a:f32[]. in (a,) }", 1, 21, "let"},
        BadText{"UnterminatedJaxpr", "{ lambda ; a:f32[]. let\n    b:f32[] = sin a\n", 3, 1, "in"},
        BadText{"BadParamValue",
                "{ lambda ; a:f32[3]. let\n    b:f32[] = reduce_sum[axes=(zero,)] a\n  in (b,) }",
                2, 32, "axes"},
        BadText{"RedefinedVariable", "{ lambda ; a:f32[]. let\n    a:f32[] = sin a\n  in (a,) }", 2,
                5, "a"},
        BadText{"TrailingText", "{ lambda ; a:f32[]. let  in (a,) } extra", 1, 36, "extra"}),
    [](const ::testing::TestParamInfo<BadText>& info) { return std::string(info.param.what); });

TEST(MalformedJaxprTypes, AWrongResultAnnotationNamesTheEqnAndBothTypes) {
  std::string msg = error_of<TypeError>([] {
    parse_jaxpr("{ lambda ; a:f32[3]. let\n    b:f32[4] = sin a\n  in (b,) }", "t.jaxpr");
  });
  EXPECT_MENTIONS(msg, "sin");
  EXPECT_MENTIONS(msg, "f32[4]");
  EXPECT_MENTIONS(msg, "f32[3]");
}

// ---- Wrong arguments to interpret, CompiledFunction and jit ---------------------------

constexpr const char* kAxpy =
    "{ lambda ; a:f32[3] b:f32[3] r:Ref{f32[3]}. let\n"
    "    c:f32[3] = mul a b\n"
    "    r[...] += c\n"
    "  in (c,) }";

std::vector<RtValue> axpy_args() {
  return {Array::from_vector<float>({1, 2, 3}, {3}), Array::from_vector<float>({4, 5, 6}, {3}),
          std::make_shared<RefBuffer>(Array::from_vector<float>({0, 0, 0}, {3}))};
}

// Each wrong argument list, with a phrase its message must contain.
struct WrongArgs {
  std::vector<RtValue> args;
  std::vector<std::string> mentions;
};

std::vector<WrongArgs> wrong_axpy_args() {
  std::vector<WrongArgs> cases;
  {  // too few
    auto a = axpy_args();
    a.pop_back();
    cases.push_back({a, {"3", "2"}});
  }
  {  // too many
    auto a = axpy_args();
    a.push_back(Array::scalar(1.0f));
    cases.push_back({a, {"3", "4"}});
  }
  {  // wrong shape
    auto a = axpy_args();
    a[1] = Array::from_vector<float>({1, 2}, {2});
    cases.push_back({a, {"argument 1", "f32[2]"}});
  }
  {  // wrong dtype
    auto a = axpy_args();
    a[0] = Array::from_vector<int32_t>({1, 2, 3}, {3});
    cases.push_back({a, {"argument 0", "i32[3]"}});
  }
  {  // array where a ref is expected
    auto a = axpy_args();
    a[2] = Array::from_vector<float>({0, 0, 0}, {3});
    cases.push_back({a, {"argument 2", "Ref{f32[3]}"}});
  }
  {  // ref where an array is expected
    auto a = axpy_args();
    a[0] = std::make_shared<RefBuffer>(Array::from_vector<float>({1, 2, 3}, {3}));
    cases.push_back({a, {"argument 0", "Ref{f32[3]}"}});
  }
  {  // ref of the wrong type
    auto a = axpy_args();
    a[2] = std::make_shared<RefBuffer>(Array::from_vector<double>({0, 0, 0}, {3}));
    cases.push_back({a, {"argument 2", "f64[3]"}});
  }
  return cases;
}

TEST(WrongArguments, InterpretNamesTheArgumentAndLeavesRefsUntouched) {
  Jaxpr j = parse_jaxpr(kAxpy, "axpy.jaxpr");
  for (WrongArgs& c : wrong_axpy_args()) {
    std::string msg = error_of<Error>([&] { interpret(j, c.args); });
    for (const std::string& m : c.mentions) EXPECT_MENTIONS(msg, m);
    if (c.args.size() > 2)
      if (auto* r = std::get_if<RefBufferPtr>(&c.args[2]))
        EXPECT_EQ((*r)->value().as_double(0), 0.0) << "a rejected call wrote its ref: " << msg;
  }
  // The right arguments still work.
  std::vector<RtValue> ok = axpy_args();
  std::vector<RtValue> out = interpret(j, ok);
  EXPECT_EQ(std::get<Array>(out[0]), Array::from_vector<float>({4, 10, 18}, {3}));
  EXPECT_EQ(std::get<RefBufferPtr>(ok[2])->value(), Array::from_vector<float>({4, 10, 18}, {3}));
}

TEST(WrongArguments, CompiledFunctionNamesTheArgument) {
  Jaxpr j = parse_jaxpr(kAxpy, "axpy.jaxpr");
  CompiledFunction f = compile_native(j, CompileOptions{.opt_level = 0});
  for (WrongArgs& c : wrong_axpy_args()) {
    std::string msg = error_of<Error>([&] { f(c.args); });
    for (const std::string& m : c.mentions) EXPECT_MENTIONS(msg, m);
  }
  std::vector<RtValue> ok = axpy_args();
  std::vector<RtValue> out = f(ok);
  EXPECT_EQ(std::get<Array>(out[0]), Array::from_vector<float>({4, 10, 18}, {3}));
  EXPECT_EQ(std::get<RefBufferPtr>(ok[2])->value(), Array::from_vector<float>({4, 10, 18}, {3}));
}

TEST(WrongArguments, AFrozenRefArgumentIsE12OnBothBackends) {
  Jaxpr j = parse_jaxpr(kAxpy, "axpy.jaxpr");
  std::vector<RtValue> args = axpy_args();
  std::get<RefBufferPtr>(args[2])->mark_frozen();
  std::string msg = ref_error([&] { interpret(j, args); }, "E12");
  EXPECT_MENTIONS(msg, "value 2");
  EXPECT_MENTIONS(msg, "frozen");
  CompiledFunction f = compile_native(j, CompileOptions{.opt_level = 0});
  msg = ref_error([&] { f(args); }, "E12");
  EXPECT_MENTIONS(msg, "argument 2");
  EXPECT_MENTIONS(msg, "frozen");
  EXPECT_EQ(std::get<RefBufferPtr>(args[2])->value().as_double(0), 0.0);
}

// r += s: passing one ref as both would make the read and the update interfere.
const char* kAddsOneRefIntoAnother =
    "{ lambda ; r:Ref{f32[2]} s:Ref{f32[2]}. let\n"
    "    a:f32[2] <- s[...]\n"
    "    r[...] += a\n"
    "  in () }";

TEST(WrongArguments, TheSameRefTwiceToACompiledFunctionIsE7) {
  Jaxpr j = parse_jaxpr(kAddsOneRefIntoAnother, "alias.jaxpr");
  CompiledFunction f = compile_native(j, CompileOptions{.opt_level = 0});
  auto r = std::make_shared<RefBuffer>(Array::from_vector<float>({1, 2}, {2}));
  std::string msg = ref_error([&] { f({r, r}); }, "E7");
  EXPECT_MENTIONS(msg, "argument 0 and as argument 1");
  EXPECT_EQ(r->value(), Array::from_vector<float>({1, 2}, {2}));
}

TEST(WrongArguments, TheSameRefTwiceToTheInterpreterIsE7) {
  Jaxpr j = parse_jaxpr(kAddsOneRefIntoAnother, "alias.jaxpr");
  auto r = std::make_shared<RefBuffer>(Array::from_vector<float>({1, 2}, {2}));
  std::string msg = ref_error([&] { interpret(j, {r, r}); }, "E7");
  EXPECT_MENTIONS(msg, "value 0 and as value 1");
  EXPECT_EQ(r->value(), Array::from_vector<float>({1, 2}, {2}));
  // Two distinct refs are fine.
  auto s = std::make_shared<RefBuffer>(Array::from_vector<float>({10, 20}, {2}));
  interpret(j, {r, s});
  EXPECT_EQ(r->value(), Array::from_vector<float>({11, 22}, {2}));
}

TEST(WrongArguments, JitFunctionWithMismatchedShapesIsATypeErrorNamingThePrimitive) {
  auto add = jit([](Value a, Value b) { return a + b; }, "add2");
  EXPECT_EQ(add(ones({3}), ones({3})).array(), Array::full(ArrayType{DType::f32, {3}}, 2.0));
  std::string msg = error_of<TypeError>([&] { add(ones({3}), ones({4})); });
  EXPECT_MENTIONS(msg, "add");
  EXPECT_MENTIONS(msg, "f32[3]");
  EXPECT_MENTIONS(msg, "f32[4]");
}

TEST(WrongArguments, JitFunctionWithMismatchedDtypesIsATypeError) {
  auto add = jit([](Value a, Value b) { return a + b; }, "add2");
  std::string msg = error_of<TypeError>([&] { add(ones({3}), ones({3}, DType::f64)); });
  EXPECT_MENTIONS(msg, "add");
  EXPECT_MENTIONS(msg, "f32[3]");
  EXPECT_MENTIONS(msg, "f64[3]");
}

TEST(WrongArguments, JitFunctionWithAVectorOfTheWrongLengthSaysSo) {
  auto first_plus_second = jit(
      [](std::vector<Value> xs) {
        if (xs.size() != 2) throw Error("first_plus_second: needs 2 values");
        return xs[0] + xs[1];
      },
      "fps");
  EXPECT_EQ(first_plus_second(std::vector<Value>{1.0f, 2.0f}).item(), 3.0);
  std::string msg = error_of<Error>([&] { first_plus_second(std::vector<Value>{Value(1.0f)}); });
  EXPECT_MENTIONS(msg, "needs 2 values");
  // The failed trace left nothing behind: the right call still works.
  EXPECT_EQ(first_plus_second(std::vector<Value>{4.0f, 2.0f}).item(), 6.0);
}

TEST(WrongArguments, JitFunctionWritingAFloatIntoAnIntRefIsE12) {
  auto write = jit([](Ref r, Value v) { r.set(v); }, "write");
  Ref r = new_ref(zeros({3}, DType::i32));
  std::string msg = ref_error([&] { write(r, ones({3})); }, "E12");
  EXPECT_MENTIONS(msg, "swap: operand 1 has type f32[3]");
  EXPECT_MENTIONS(msg, "Ref{i32[3]}");
  EXPECT_EQ(r.value(), Array(ArrayType{DType::i32, {3}}));
}

// ---- Out-of-range DYNAMIC indices: clamp (dynamic_slice, dynamic_update_slice, gather,
// ref indexers) or drop (scatter); the interpreter and the native backend agree. ---------

// Runs `text` on both backends and checks each output (and each ref argument's final
// contents, appended after the outputs) equals `want`.
void expect_both_backends(const std::string& text, const std::vector<RtValue>& args,
                          const std::vector<Array>& want) {
  Jaxpr j = parse_jaxpr(text, "dyn.jaxpr");
  auto copy = [&] {
    std::vector<RtValue> c;
    for (const RtValue& v : args) {
      if (auto* a = std::get_if<Array>(&v))
        c.emplace_back(a->clone());
      else
        c.emplace_back(std::make_shared<RefBuffer>(std::get<RefBufferPtr>(v)->value().clone()));
    }
    return c;
  };
  auto results = [&](std::vector<RtValue> outs, const std::vector<RtValue>& in) {
    std::vector<Array> r;
    for (RtValue& v : outs) r.push_back(std::get<Array>(v));
    for (const RtValue& v : in)
      if (auto* p = std::get_if<RefBufferPtr>(&v)) r.push_back((*p)->value());
    return r;
  };
  std::vector<RtValue> a1 = copy(), a2 = copy();
  std::vector<Array> interp = results(interpret(j, a1), a1);
  CompiledFunction f = compile_native(j, CompileOptions{.opt_level = 1});
  std::vector<Array> native = results(f(a2), a2);
  ASSERT_EQ(interp.size(), want.size());
  ASSERT_EQ(native.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(interp[i], want[i]) << "interpreter, result " << i;
    EXPECT_EQ(native[i], want[i]) << "native, result " << i;
  }
}

Array f32v(std::vector<float> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return Array::from_vector<float>(v, {n});
}
Array i32v(std::vector<int32_t> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return Array::from_vector<int32_t>(v, {n});
}
Array i32s(int32_t v) { return Array::scalar<int32_t>(v); }

TEST(OutOfRangeDynamicIndices, DynamicSliceClampsStartIntoRange) {
  const std::string text =
      "{ lambda ; a:f32[6] i:i32[]. let b:f32[3] = dynamic_slice[slice_sizes=(3,)] a i "
      "in (b,) }";
  Array a = f32v({0, 1, 2, 3, 4, 5});
  expect_both_backends(text, {a, i32s(5)}, {f32v({3, 4, 5})});
  expect_both_backends(text, {a, i32s(100)}, {f32v({3, 4, 5})});
  expect_both_backends(text, {a, i32s(-2)}, {f32v({0, 1, 2})});
  expect_both_backends(text, {a, i32s(INT32_MIN)}, {f32v({0, 1, 2})});
}

TEST(OutOfRangeDynamicIndices, DynamicUpdateSliceClampsStartIntoRange) {
  const std::string text =
      "{ lambda ; a:f32[5] u:f32[2] i:i32[]. let b:f32[5] = dynamic_update_slice a u i "
      "in (b,) }";
  Array a = f32v({0, 0, 0, 0, 0}), u = f32v({7, 8});
  expect_both_backends(text, {a, u, i32s(4)}, {f32v({0, 0, 0, 7, 8})});
  expect_both_backends(text, {a, u, i32s(INT32_MAX)}, {f32v({0, 0, 0, 7, 8})});
  expect_both_backends(text, {a, u, i32s(-3)}, {f32v({7, 8, 0, 0, 0})});
}

TEST(OutOfRangeDynamicIndices, GatherClampsEachIndex) {
  const std::string text =
      "{ lambda ; a:f32[3] i:i32[4]. let b:f32[4] = gather[axis=0] a i in (b,) }";
  expect_both_backends(text, {f32v({10, 20, 30}), i32v({-1, 5, 1, INT32_MIN})},
                       {f32v({10, 30, 20, 10})});
}

TEST(OutOfRangeDynamicIndices, ScatterDropsOutOfRangeUpdates) {
  const std::string text =
      "{ lambda ; a:f32[3] i:i32[4] u:f32[4]. let b:f32[3] = scatter[axis=0] a i u in (b,) }";
  expect_both_backends(text, {f32v({1, 2, 3}), i32v({-1, 5, 1, 3}), f32v({7, 8, 9, 6})},
                       {f32v({1, 9, 3})});
  const std::string add =
      "{ lambda ; a:f32[3] i:i32[4] u:f32[4]. let b:f32[3] = scatter-add[axis=0] a i u "
      "in (b,) }";
  expect_both_backends(add, {f32v({1, 2, 3}), i32v({-1, 5, 1, 3}), f32v({7, 8, 9, 6})},
                       {f32v({1, 11, 3})});
}

TEST(OutOfRangeDynamicIndices, RefIndexersWithDynamicStartsClamp) {
  // A dynamic slice start clamps into [0, 5-2]; a dynamic index into [0, 4].
  const std::string text =
      "{ lambda ; r:Ref{f32[5]} i:i32[] j:i32[]. let\n"
      "    b:f32[2] <- r[i:i+2]\n"
      "    c:f32[] <- r[j]\n"
      "    r[j:j+2] += b\n"
      "  in (b, c) }";
  auto ref = [] { return std::make_shared<RefBuffer>(f32v({1, 2, 3, 4, 5})); };
  // i = 9 -> start 3 reads [4, 5]; j = -4 -> index 0 reads 1, then r[0:2] += [4, 5].
  expect_both_backends(text, {ref(), i32s(9), i32s(-4)},
                       {f32v({4, 5}), Array::scalar(1.0f), f32v({5, 7, 3, 4, 5})});
  // i = -1 -> start 0 reads [1, 2]; j = 7 -> index 4 reads 5, r[3:5] += [1, 2].
  expect_both_backends(text, {ref(), i32s(-1), i32s(7)},
                       {f32v({1, 2}), Array::scalar(5.0f), f32v({1, 2, 3, 5, 7})});
}

TEST(OutOfRangeDynamicIndices, JitIndexingWithAValueClampsOnBothBackends) {
  auto at = [](Value x, Value i) { return x[i]; };
  Value x = arange(4, DType::f32);
  for (Backend b : {Backend::interpreter, Backend::native}) {
    auto f = jit(at, JitOptions{.backend = b, .name = "at"});
    EXPECT_EQ(f(x, 10).item(), 3.0);
    EXPECT_EQ(f(x, -1).item(), 3.0);  // negative indices wrap, as in NumPy
    EXPECT_EQ(f(x, -100).item(), 0.0);
  }
}

}  // namespace
}  // namespace refjit
