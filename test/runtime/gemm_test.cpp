// The runtime's matrix product (runtime/kernels/gemm.h) against a plain triple loop, over
// shapes that hit every edge of its blocking, every operand layout, batches, matrix-vector
// products, and the threaded split.
#include "runtime/kernels/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>
#include <vector>

#include "runtime/kernels/thread_pool.h"

namespace refjit::kernels {
namespace {

// Operand storage and its strides: row-major or column-major (transposed) per matrix.
template <class T>
struct Operand {
  std::vector<T> data;
  Matrices<const T> view;
};

template <class T>
Operand<T> make_operand(int64_t batch, int64_t rows, int64_t cols, bool transposed,
                        std::mt19937& rng) {
  Operand<T> o;
  o.data.resize(static_cast<size_t>(batch * rows * cols));
  std::uniform_real_distribution<double> dist(-1, 1);
  for (T& v : o.data) v = static_cast<T>(dist(rng));
  const int64_t rs = transposed ? 1 : cols, cs = transposed ? rows : 1;
  o.view = {o.data.data(), rows * cols, rs, cs};
  return o;
}

template <class T>
T at(Matrices<const T> m, int64_t q, int64_t i, int64_t j) {
  return m.data[q * m.batch_stride + i * m.row_stride + j * m.col_stride];
}

// Checks gemm against a double-precision loop: each element within a few ulps per product.
template <class T>
void check(GemmShape s, bool a_t, bool b_t, uint32_t seed) {
  std::mt19937 rng(seed);
  Operand<T> a = make_operand<T>(s.batch, s.m, s.k, a_t, rng);
  Operand<T> b = make_operand<T>(s.batch, s.k, s.n, b_t, rng);
  std::vector<T> c(static_cast<size_t>(s.batch * s.m * s.n), T(123));
  gemm(s, a.view, b.view, Matrices<T>{c.data(), s.m * s.n, s.n, 1});
  const double eps = std::is_same_v<T, float> ? 1e-6 : 1e-15;
  for (int64_t q = 0; q < s.batch; ++q)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double want = 0, scale = 0;
        for (int64_t p = 0; p < s.k; ++p) {
          double prod = double(at(a.view, q, i, p)) * double(at(b.view, q, p, j));
          want += prod;
          scale += std::abs(prod);
        }
        const double got = c[static_cast<size_t>((q * s.m + i) * s.n + j)];
        ASSERT_NEAR(got, want, 4 * eps * (scale + 1))
            << "batch " << q << " (" << i << ", " << j << ") of " << s.batch << "x" << s.m << "x"
            << s.n << "x" << s.k << " a_t=" << a_t << " b_t=" << b_t;
      }
}

TEST(Gemm, EdgesOfTheBlockingInEveryLayout) {
  // Sizes around the micro-tile (6 or 4 rows, 8..32 columns), the depth block (256) and the
  // row block (144).
  const int64_t sizes[] = {1, 2, 5, 7, 17, 33, 145, 257};
  uint32_t seed = 1;
  for (int64_t m : sizes)
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{31}, int64_t{65}})
      for (int64_t k : {int64_t{1}, int64_t{9}, int64_t{300}})
        for (int layout = 0; layout < 4; ++layout) {
          check<float>({1, m, n, k}, layout & 1, layout & 2, seed++);
          if (HasFatalFailure()) return;
        }
}

// Packing a row-major A or a column-major B is a transpose, done in 16 x 16 register blocks
// where it can: depths around multiples of 16, ragged panels of rows and columns, and enough
// columns (> 5 panels) that A is packed rather than read in place.
TEST(Gemm, TransposingPacksAtEveryEdge) {
  uint32_t seed = 100;
  for (int64_t k : {int64_t{15}, int64_t{16}, int64_t{37}, int64_t{200}})
    for (int64_t m : {int64_t{13}, int64_t{45}})
      for (int layout = 0; layout < 4; ++layout) {
        check<float>({1, m, 200, k}, layout & 1, layout & 2, seed++);
        if (HasFatalFailure()) return;
      }
}

// Products at most one vector wide (a convolution's 16 output channels) run on a narrow
// micro-tile of one vector's columns and 28 (AVX-512) or 12 rows: panels of rows whole, ragged
// at every size the ragged-panel kernels take, past the row block (168), threaded, and in
// both precisions.
TEST(Gemm, NarrowProductsAtEveryRowEdge) {
  uint32_t seed = 200;
  for (int64_t m : {int64_t{11}, int64_t{12}, int64_t{13}, int64_t{27}, int64_t{28}, int64_t{29},
                    int64_t{57}, int64_t{169}, int64_t{1500}})
    for (int64_t n : {int64_t{2}, int64_t{5}, int64_t{8}, int64_t{16}})
      for (int64_t k : {int64_t{9}, int64_t{72}, int64_t{300}})
        for (int layout = 0; layout < 4; ++layout) {
          check<float>({1, m, n, k}, layout & 1, layout & 2, seed++);
          if (n <= 8) check<double>({2, m, n, k}, layout & 1, layout & 2, seed++);
          if (HasFatalFailure()) return;
        }
}

// Packed rows that end in MR + 1 or MR + 2 rows (15 or 16 with AVX-512's 14-row tile) run
// as two halves of at most 8 rows each: at the end of the first and of a later row block
// (168 rows), in every layout, both precisions, and added to what C holds.
TEST(Gemm, LastRowsInTwoHalves) {
  uint32_t seed = 400;
  for (int64_t m : {int64_t{15}, int64_t{16}, int64_t{17}, int64_t{29}, int64_t{30}, int64_t{183},
                    int64_t{184}})
    for (int64_t n : {int64_t{31}, int64_t{200}})
      for (int64_t k : {int64_t{9}, int64_t{300}})
        for (int layout = 0; layout < 4; ++layout) {
          check<float>({1, m, n, k}, layout & 1, layout & 2, seed++);
          check<double>({1, m, n, k}, layout & 1, layout & 2, seed++);
          if (HasFatalFailure()) return;
        }
  for (int64_t m : {int64_t{15}, int64_t{16}}) {
    std::mt19937 rng(static_cast<uint32_t>(m));
    const GemmShape s{1, m, 200, 300};
    Operand<float> a = make_operand<float>(1, m, s.k, false, rng);
    Operand<float> b = make_operand<float>(1, s.k, s.n, false, rng);
    std::vector<float> c0(static_cast<size_t>(m * s.n));
    for (float& v : c0) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    std::vector<float> product(c0.size()), sum = c0;
    gemm(s, a.view, b.view, {product.data(), 0, s.n, 1});
    gemm(s, a.view, b.view, {sum.data(), 0, s.n, 1}, /*accumulate=*/true);
    for (size_t i = 0; i < sum.size(); ++i)
      ASSERT_NEAR(sum[i], c0[i] + product[i], 1e-4) << "element " << i << " of " << m << " rows";
  }
}

// A row-major B whose rows are a multiple of 1 KiB apart is read in place by at most 64 rows
// and packed beyond (its rows share a few L1 sets): both sides of that line, alone and split
// over threads, in both precisions, and a B 1 KiB wide with a ragged last panel of columns.
TEST(Gemm, RowMajorBWithRowsThatShareCacheSets) {
  uint32_t seed = 300;
  for (int64_t m : {int64_t{7}, int64_t{64}, int64_t{65}, int64_t{200}}) {
    check<float>({1, m, 256, 300}, false, false, seed++);
    check<float>({1, m, 512, 40}, true, false, seed++);
    check<double>({1, m, 128, 70}, false, false, seed++);
    check<float>({1, m, 250, 37}, false, false, seed++);  // rows 1000 bytes apart: in place
    if (HasFatalFailure()) return;
  }
}

TEST(Gemm, DoublePrecision) {
  for (int layout = 0; layout < 4; ++layout) {
    check<double>({1, 37, 29, 270}, layout & 1, layout & 2, 7);
    check<double>({2, 150, 70, 40}, layout & 1, layout & 2, 8);
    check<double>({1, 1, 70, 40}, layout & 1, layout & 2, 9);
  }
}

TEST(Gemm, BatchesAndThreadedSplits) {
  check<float>({3, 40, 50, 60}, false, false, 11);
  check<float>({5, 64, 64, 64}, true, false, 12);
  check<float>({1, 300, 200, 100}, false, true, 13);  // large enough to run threaded
  check<float>({1, 20, 900, 300}, false, false, 14);  // split over columns
  check<float>({1, 900, 12, 300}, true, true, 15);    // split over rows
  check<float>({2, 1, 3000, 700}, false, false, 16);  // vector-matrix
  check<float>({2, 3000, 1, 700}, true, false, 17);   // matrix-vector
}

// C += A B adds the product to what C holds, on every path (blocked, shallow, matrix-vector).
// Matrix-vector rows are summed four at a time (shared lane-sum shuffles) and the last ones
// alone, in the same order: a row has the same bits in a group as computed by itself.
template <class T>
void expect_rows_alone_match_the_whole(int64_t m, int64_t k) {
  std::mt19937 rng(static_cast<uint32_t>(m * 1000 + k));
  Operand<T> a = make_operand<T>(1, m, k, false, rng);
  Operand<T> x = make_operand<T>(1, k, 1, false, rng);
  std::vector<T> whole(static_cast<size_t>(m)), alone(whole.size());
  gemm({1, m, 1, k}, a.view, x.view, {whole.data(), 0, 1, 1});
  for (int64_t i = 0; i < m; ++i) {
    Matrices<const T> row = a.view;
    row.data += i * k;
    gemm({1, 1, 1, k}, row, x.view, {alone.data() + i, 0, 1, 1});
  }
  EXPECT_EQ(whole, alone) << m << " x " << k;
  const double tolerance = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  for (int64_t i = 0; i < m; ++i) {  // and the sums are right
    double want = 0;
    for (int64_t p = 0; p < k; ++p) want += double(a.data[i * k + p]) * double(x.data[p]);
    EXPECT_NEAR(whole[i], want, tolerance) << "row " << i;
  }
}

TEST(Gemm, MatrixVectorRowsHaveTheSameBitsAloneOrGrouped) {
  for (int64_t m : {int64_t{4}, int64_t{7}, int64_t{130}})
    for (int64_t k : {int64_t{5}, int64_t{16}, int64_t{128}, int64_t{133}}) {
      expect_rows_alone_match_the_whole<float>(m, k);
      expect_rows_alone_match_the_whole<double>(m, k);
    }
}

TEST(Gemm, AccumulateAddsTheProduct) {
  for (GemmShape s : {GemmShape{1, 40, 70, 300}, GemmShape{2, 33, 65, 1}, GemmShape{1, 1, 90, 50},
                      GemmShape{1, 90, 1, 50}, GemmShape{1, 5, 7, 0}}) {
    std::mt19937 rng(5);
    Operand<float> a = make_operand<float>(s.batch, s.m, s.k, false, rng);
    Operand<float> b = make_operand<float>(s.batch, s.k, s.n, false, rng);
    std::vector<float> c0(static_cast<size_t>(s.batch * s.m * s.n));
    for (float& v : c0) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    std::vector<float> product(c0.size()), sum = c0;
    gemm(s, a.view, b.view, {product.data(), s.m * s.n, s.n, 1});
    gemm(s, a.view, b.view, {sum.data(), s.m * s.n, s.n, 1}, /*accumulate=*/true);
    for (size_t i = 0; i < sum.size(); ++i)
      ASSERT_NEAR(sum[i], c0[i] + product[i], 1e-4)
          << "element " << i << " of " << s.m << "x" << s.n << "x" << s.k;
  }
}

TEST(Gemm, ZeroDepthClearsTheResult) {
  std::vector<float> c(6, 5.0f);
  float unused = 0;
  gemm({1, 2, 3, 0}, {&unused, 0, 0, 0}, {&unused, 0, 0, 0}, {c.data(), 6, 3, 1});
  for (float v : c) EXPECT_EQ(v, 0.0f);
}

// Each element sums its products in the same order however the work is split, so a product
// computed at once (threaded) equals, bit for bit, the same product computed in row blocks
// small enough to run on one thread.
// With 32 columns the whole product reads A's rows in place while the 8-row blocks pack them.
TEST(Gemm, ThreadedResultIsBitwiseTheSerialOne) {
  for (int64_t n : {int64_t{512}, int64_t{32}}) {
    const int64_t m = n == 32 ? 1008 : 96, k = 400;
    std::mt19937 rng(3);
    Operand<float> a = make_operand<float>(1, m, k, false, rng);
    Operand<float> b = make_operand<float>(1, k, n, false, rng);
    std::vector<float> whole(static_cast<size_t>(m * n)), blocks(whole.size());
    gemm({1, m, n, k}, a.view, b.view, {whole.data(), 0, n, 1});
    for (int64_t i0 = 0; i0 < m; i0 += 8) {
      Matrices<const float> rows = a.view;
      rows.data += i0 * k;
      gemm({1, 8, n, k}, rows, b.view, {blocks.data() + i0 * n, 0, n, 1});
    }
    EXPECT_EQ(whole, blocks) << n << " columns";
  }
}

// While a pool thread runs slower than the others, products split into more parts per thread
// (tasks_per_thread()); the parts are row or column blocks of other sizes, and every element
// keeps its order of sums: the bits do not change. Shapes split over rows and over columns,
// in every operand layout, with two and three parts per thread (three leaves uneven parts).
TEST(Gemm, FinerSplitsGiveTheSameBits) {
  for (GemmShape s : {GemmShape{1, 300, 200, 100}, GemmShape{1, 20, 900, 300},
                      GemmShape{1, 900, 12, 300}, GemmShape{1, 517, 389, 261}})
    for (bool a_t : {false, true})
      for (bool b_t : {false, true}) {
        std::mt19937 rng(static_cast<uint32_t>(s.m + s.n));
        Operand<float> a = make_operand<float>(1, s.m, s.k, a_t, rng);
        Operand<float> b = make_operand<float>(1, s.k, s.n, b_t, rng);
        auto product = [&](int parts_per_thread) {
          ScopedTasksPerThread parts(parts_per_thread);
          std::vector<float> c(static_cast<size_t>(s.m * s.n));
          gemm(s, a.view, b.view, {c.data(), 0, s.n, 1});
          return c;
        };
        const std::vector<float> one_part = product(1);
        for (int parts : {2, 3})
          EXPECT_EQ(one_part, product(parts)) << parts << " parts per thread, " << s.m << "x" << s.n
                                              << "x" << s.k << " a_t=" << a_t << " b_t=" << b_t;
      }
}

// What an epilogue saw: how often each row was passed, and the row's values at that moment.
struct SeenRows {
  std::mutex mutex;
  const float* c = nullptr;
  int64_t n = 0;
  std::vector<int> calls;
  std::vector<float> values;

  static void record(void* ctx, int64_t lo, int64_t hi) {
    auto* self = static_cast<SeenRows*>(ctx);
    std::lock_guard<std::mutex> lock(self->mutex);
    for (int64_t r = lo; r < hi; ++r) {
      self->calls.at(static_cast<size_t>(r)) += 1;
      std::copy(self->c + r * self->n, self->c + (r + 1) * self->n,
                self->values.begin() + r * self->n);
    }
  }
};

// Every row reaches the epilogue exactly once, and only when final: the values it saw are the
// product's. Shapes for every path: blocks of rows split over threads, several row and
// column blocks (also within a thread), columns split over threads, whole matrices of a batch per
// thread, matrix-vector both ways, the shallow kernel, zero depth.
TEST(Gemm, EpilogueSeesEveryRowOnceWhenItIsFinal) {
  const GemmShape shapes[] = {{1, 400, 64, 300},  {1, 30, 1600, 200}, {1, 20, 1024, 300},
                              {4, 50, 70, 200},   {1, 500, 1, 300},   {3, 1, 500, 300},
                              {2, 300, 100, 3},   {1, 5, 7, 0},       {1, 37, 45, 29},
                              {1, 1600, 1600, 10}};
  uint32_t seed = 5;
  for (const GemmShape& s : shapes) {
    SCOPED_TRACE(testing::Message() << s.batch << "x" << s.m << "x" << s.n << "x" << s.k);
    std::mt19937 rng(seed++);
    Operand<float> a = make_operand<float>(s.batch, s.m, s.k, false, rng);
    Operand<float> b = make_operand<float>(s.batch, s.k, s.n, false, rng);
    std::vector<float> c(static_cast<size_t>(s.batch * s.m * s.n), 7.0f);
    SeenRows seen;
    seen.c = c.data();
    seen.n = s.n;
    seen.calls.assign(static_cast<size_t>(s.batch * s.m), 0);
    seen.values.assign(c.size(), -1.0f);
    gemm(s, a.view, b.view, {c.data(), s.m * s.n, s.n, 1}, false, {&SeenRows::record, &seen});
    for (int calls : seen.calls) ASSERT_EQ(calls, 1);
    EXPECT_EQ(seen.values, c);
    std::vector<float> plain(c.size());
    gemm(s, a.view, b.view, {plain.data(), s.m * s.n, s.n, 1});
    EXPECT_EQ(plain, c);
  }
}

TEST(ThreadPool, RunsEveryTaskOnce) {
  std::vector<int> hits(1000, 0);
  parallel_for(1000, [&](int64_t i) { hits[static_cast<size_t>(i)] += 1; });
  for (int h : hits) EXPECT_EQ(h, 1);
  // Nested calls run serially inside the task instead of deadlocking.
  std::vector<int> nested(16, 0);
  parallel_for(4, [&](int64_t i) {
    parallel_for(4, [&](int64_t j) { nested[static_cast<size_t>(i * 4 + j)] += 1; });
  });
  for (int h : nested) EXPECT_EQ(h, 1);
}

}  // namespace
}  // namespace refjit::kernels
