// Helpers for the native backend's differential tests: build small jaxprs, make inputs,
// run both the interpreter and the JIT, compare.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <random>

#include "backend/fusion.h"
#include "backend/native.h"
#include "backend/product_epilogues.h"
#include "backend/row_loops.h"
#include "refjit/compilation_cache.h"
#include "refjit/ir/builder.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"

namespace refjit::testing {

inline ArrayType at(DType d, Shape s) { return ArrayType{d, std::move(s)}; }

// Deterministic pseudo-random contents: small ints, floats in [-3, 3], bools.
inline Array random_array(const ArrayType& t, uint32_t seed) {
  std::mt19937 rng(seed);
  Array a(t);
  for (int64_t i = 0; i < a.size(); ++i) {
    switch (t.dtype) {
      case DType::f32:
      case DType::f64:
        a.set_from_double(i, std::uniform_real_distribution<double>(-3, 3)(rng));
        break;
      case DType::c64:
      case DType::c128: {
        std::uniform_real_distribution<double> u(-3, 3);
        const double re = u(rng);
        a.set_from_complex(i, {re, u(rng)});
        break;
      }
      case DType::bool_: a.set_from_double(i, rng() & 1); break;
      default:  // ints; unsigned ones get 0..9
        a.set_from_double(
            i, std::uniform_int_distribution<int>(is_unsigned(t.dtype) ? 0 : -9, 9)(rng));
        break;
    }
  }
  return a;
}

inline const Array& as_array(const RtValue& v) { return std::get<Array>(v); }

// Exact for ints/bools; relative tolerance `rtol` for floats and for both parts of complex
// numbers (NaNs must match).
inline void expect_close(const Array& got, const Array& want, double rtol,
                         const std::string& what) {
  ASSERT_EQ(got.type(), want.type()) << what;
  auto near = [&](double g, double w, double scale, int64_t i, const char* part) {
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << what << " element " << i << part;
    } else if (std::isinf(w)) {
      EXPECT_EQ(g, w) << what << " element " << i << part;
    } else {
      EXPECT_NEAR(g, w, rtol * std::max(1.0, scale)) << what << " element " << i << part;
    }
  };
  for (int64_t i = 0; i < got.size(); ++i) {
    if (is_complex(got.dtype())) {
      std::complex<double> g = got.as_complex(i), w = want.as_complex(i);
      near(g.real(), w.real(), std::abs(w), i, " (real part)");
      near(g.imag(), w.imag(), std::abs(w), i, " (imaginary part)");
    } else if (is_float(got.dtype())) {
      near(got.as_double(i), want.as_double(i), std::abs(want.as_double(i)), i, "");
    } else {
      EXPECT_EQ(got.as_int(i), want.as_int(i)) << what << " element " << i;
    }
  }
}

inline std::vector<RtValue> deep_copy(const std::vector<RtValue>& vs) {
  std::vector<RtValue> out;
  for (const RtValue& v : vs) {
    if (auto* a = std::get_if<Array>(&v))
      out.emplace_back(a->clone());
    else
      out.emplace_back(std::make_shared<RefBuffer>(std::get<RefBufferPtr>(v)->value()));
  }
  return out;
}

// `j` with its elementwise chains made fused eqns, its products with an elementwise consumer
// product_epilogue eqns and its loops over shared rows row_loop eqns, as the pipeline's
// `fusion`, `product-epilogues` and `row-loops` passes make them (compile_native lowers the
// program it is given; it decides no fusion of its own).
inline Jaxpr with_fusion(const Jaxpr& j) {
  const Jaxpr fused = fuse_product_epilogues(fuse_elementwise(j, BufferOptions{}), BufferOptions{});
  return make_row_loops(fused, BufferOptions{});
}

// Runs `j` through the interpreter and the JIT (of with_fusion(j), or of j itself when `opts` bring
// a buffer plan made for it) on copies of `args`; compares outputs and the final contents of ref
// arguments.
inline void expect_matches_interpreter(const Jaxpr& j, const std::vector<RtValue>& args,
                                       double rtol = 1e-6, const CompileOptions& opts = {}) {
  std::vector<RtValue> a1 = deep_copy(args), a2 = deep_copy(args);
  std::vector<RtValue> want = interpret(j, a1);
  CompiledFunction f = compile_native(opts.plan.empty() ? with_fusion(j) : j, opts);
  std::vector<RtValue> got = f(a2);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    expect_close(as_array(got[i]), as_array(want[i]), rtol, "output " + std::to_string(i));
  for (size_t i = 0; i < args.size(); ++i)
    if (auto* r = std::get_if<RefBufferPtr>(&a2[i]))
      expect_close((*r)->value(), std::get<RefBufferPtr>(a1[i])->value(), rtol,
                   "ref argument " + std::to_string(i));
}

// A pass's output `decided` against its input `original`: native code of `decided` and the
// interpreter on it, each against the interpreter on `original`. Outputs within `rtol`
// natively (a sum may round differently) and exactly on the interpreter; the final contents
// of ref arguments exactly on both.
inline void expect_decided_matches(const Jaxpr& original, const Jaxpr& decided,
                                   const std::vector<RtValue>& args, double rtol) {
  std::vector<RtValue> a1 = deep_copy(args), a2 = deep_copy(args), a3 = deep_copy(args);
  const std::vector<RtValue> want = interpret(original, a1);
  const std::vector<RtValue> interpreted = interpret(decided, a2);
  const std::vector<RtValue> got = compile_native(with_fusion(decided))(a3);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string what = "output " + std::to_string(i);
    expect_close(as_array(interpreted[i]), as_array(want[i]), 0, "interpreted, " + what);
    expect_close(as_array(got[i]), as_array(want[i]), rtol, "native, " + what);
  }
  for (size_t i = 0; i < args.size(); ++i)
    if (auto* r = std::get_if<RefBufferPtr>(&a1[i])) {
      const std::string what = "ref argument " + std::to_string(i);
      expect_close(std::get<RefBufferPtr>(a2[i])->value(), (*r)->value(), 0,
                   "interpreted, " + what);
      expect_close(std::get<RefBufferPtr>(a3[i])->value(), (*r)->value(), 0, "native, " + what);
    }
}

// Parses `text`, then expect_matches_interpreter.
inline void check_text(const std::string& text, const std::vector<RtValue>& args,
                       double rtol = 1e-6, const CompileOptions& opts = {}) {
  SCOPED_TRACE(text);
  expect_matches_interpreter(parse_jaxpr(text), args, rtol, opts);
}

// Code on the runtime's threads, serial loops, and code that calls no runtime (`refjit
// compile` objects): the three must give the same bits.
inline const CompileOptions kThreads{};
inline const CompileOptions kSerial{.parallel_loops = false};
inline const CompileOptions kStandAlone{.runtime_kernels = false};

inline void expect_same_bits(const Array& a, const Array& b, const std::string& what) {
  ASSERT_EQ(a.type(), b.type()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<size_t>(a.type().byte_size())), 0)
      << what << " differs";
}

// Runs `j` with threads, serially and stand-alone (same bits) and on the interpreter (close).
inline void check_everywhere(const Jaxpr& j, const std::vector<RtValue>& args, double rtol) {
  std::vector<RtValue> want_args = deep_copy(args);
  const std::vector<RtValue> want = interpret(j, want_args);
  std::vector<std::vector<RtValue>> runs;
  for (const CompileOptions* o : {&kThreads, &kSerial, &kStandAlone}) {
    std::vector<RtValue> a = deep_copy(args);
    runs.push_back(compile_native(with_fusion(j), *o)(a));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string what = "output " + std::to_string(i);
    expect_close(as_array(runs[0][i]), as_array(want[i]), rtol, what + " vs the interpreter");
    expect_same_bits(as_array(runs[0][i]), as_array(runs[1][i]), what + " threads vs serial");
    expect_same_bits(as_array(runs[0][i]), as_array(runs[2][i]), what + " threads vs stand-alone");
  }
}

inline RtValue ref_of(Array a) { return std::make_shared<RefBuffer>(std::move(a)); }

// How often `what` occurs in `text` (checks on emitted MLIR, LLVM IR and assembly).
inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Turns the on-disk compilation cache off for the life of a test that looks at what LLVM did
// (its timings, levels, pieces): a hit from an earlier run would skip LLVM.
class WithoutCompilationCache {
 public:
  WithoutCompilationCache() : previous_(compilation_cache_dir()) { set_compilation_cache_dir(""); }
  ~WithoutCompilationCache() { set_compilation_cache_dir(previous_); }
  WithoutCompilationCache(const WithoutCompilationCache&) = delete;
  WithoutCompilationCache& operator=(const WithoutCompilationCache&) = delete;

 private:
  std::string previous_;
};

}  // namespace refjit::testing
