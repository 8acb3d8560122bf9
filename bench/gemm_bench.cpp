// refjit_bench_gemm: the runtime's matrix product (runtime/kernels/gemm.h) against OpenBLAS's
// sgemm/dgemm on the same machine in the same run, single-threaded and on all cores.
// OpenBLAS is loaded with dlopen (Debian's libopenblas0-pthread), so nothing links against
// it; without it only refjit's numbers print.
//
//   refjit_bench_gemm [--runs N] [--threads all|1] [--shape M,K,N]
//
// Prints one row per size and layout: GFLOP/s of each and refjit / OpenBLAS. With --shape, one
// row: an M x K by K x N product of row-major matrices (an MLP layer's `x @ w`).
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;
using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                       float, float*, int);
using SetThreads = void (*)(int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

struct OpenBlas {
  Sgemm sgemm = nullptr;
  SetThreads set_threads = nullptr;
};

OpenBlas load_openblas() {
  OpenBlas ob;
  void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) return ob;
  ob.sgemm = reinterpret_cast<Sgemm>(dlsym(h, "cblas_sgemm"));
  ob.set_threads = reinterpret_cast<SetThreads>(dlsym(h, "openblas_set_num_threads"));
  return ob;
}

// Median seconds of `runs` calls of f after one warm-up call.
template <class F>
double median_seconds(int runs, F&& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    auto start = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 11;
  bool single = false;
  long shape_m = 0, shape_k = 0, shape_n = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(3, std::atoi(argv[++i]));
    } else if (a == "--threads" && i + 1 < argc) {
      single = std::string(argv[++i]) == "1";
    } else if (a == "--shape" && i + 1 < argc &&
               std::sscanf(argv[++i], "%ld,%ld,%ld", &shape_m, &shape_k, &shape_n) == 3 &&
               shape_m > 0 && shape_k > 0 && shape_n > 0 && shape_m * shape_k <= 1 << 22 &&
               shape_k * shape_n <= 1 << 22 && shape_m * shape_n <= 1 << 22) {
    } else {
      fmt::print(stderr,
                 "usage: refjit_bench_gemm [--runs N] [--threads all|1] [--shape M,K,N]\n"
                 "  (--shape: positive sizes, each matrix at most 4M elements)\n");
      return 2;
    }
  }
  // REFJIT_NUM_THREADS is read when the pool starts; set it before the first product.
  if (single) setenv("REFJIT_NUM_THREADS", "1", 1);
  OpenBlas ob = load_openblas();
  const int threads = refjit::kernels::thread_count();
  if (ob.set_threads) ob.set_threads(threads);
  fmt::print("refjit gemm ({}), {} thread(s); OpenBLAS {}\n", refjit::kernels::gemm_isa(), threads,
             ob.sgemm ? "loaded" : "not found (apt-get install libopenblas0-pthread)");
  fmt::print("{:>12} {:>6} {:>14} {:>16} {:>8}\n", "n or MxKxN", "layout", "refjit GFLOP/s",
             "OpenBLAS GFLOP/s", "ratio");

  // All of refjit's products first, then all of OpenBLAS's: interleaved, OpenBLAS's threads
  // (which spin after a call) took refjit's second core, and refjit's two-thread 256^3 NN
  // product measured 13 GFLOP/s instead of 160.
  // A row is an m x k by k x n product; layout bit 0: A stored transposed, bit 1: B.
  struct Row {
    int m, k, n, layout;
    double ours = 0, theirs = 0;
  };
  std::vector<Row> rows;
  if (shape_m > 0)
    rows.push_back({int(shape_m), int(shape_k), int(shape_n), 0});
  else
    for (int n : {256, 512, 1024})
      for (int layout = 0; layout < 4; ++layout) rows.push_back({n, n, n, layout});
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  const size_t largest = size_t{1} << 22;
  std::vector<float> a(largest), b(largest), c(largest);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  for (bool openblas : {false, true}) {
    if (openblas && !ob.sgemm) break;
    for (Row& r : rows) {
      const int m = r.m, k = r.k, n = r.n;
      const bool at = r.layout & 1, bt = r.layout & 2;
      const int lda = at ? m : k, ldb = bt ? k : n;
      if (!openblas) {
        // A stored transposed: element (i, p) at a[p * m + i].
        refjit::kernels::Matrices<const float> av{a.data(), 0, at ? 1 : lda, at ? lda : 1};
        refjit::kernels::Matrices<const float> bv{b.data(), 0, bt ? 1 : ldb, bt ? ldb : 1};
        r.ours = median_seconds(runs, [&] {
          refjit::kernels::gemm({1, m, n, k}, av, bv, {c.data(), 0, n, 1});
        });
      } else {
        r.theirs = median_seconds(runs, [&] {
          ob.sgemm(kRowMajor, at ? kTrans : kNoTrans, bt ? kTrans : kNoTrans, m, n, k, 1.0f,
                   a.data(), lda, b.data(), ldb, 0.0f, c.data(), n);
        });
      }
    }
  }
  for (const Row& r : rows) {
    const double flops = 2.0 * r.m * r.k * r.n;
    const char* names[] = {"NN", "TN", "NT", "TT"};
    const std::string theirs = r.theirs > 0 ? fmt::format("{:.1f}", flops / r.theirs * 1e-9) : "-";
    const std::string ratio = r.theirs > 0 ? fmt::format("{:.2f}", r.theirs / r.ours) : "-";
    const std::string size =
        r.m == r.n && r.k == r.n ? fmt::format("{}", r.n) : fmt::format("{}x{}x{}", r.m, r.k, r.n);
    fmt::print("{:>12} {:>6} {:>14.1f} {:>16} {:>8}\n", size, names[r.layout],
               flops / r.ours * 1e-9, theirs, ratio);
  }
  return 0;
}
