// The collectives across processes (refjit/collectives.h over refjit/distributed.h), run by
// ctest under `mpirun -np 1` and `-np 2`: values, eager against native code, AD through the
// collectives, and ranks that disagree failing on every rank instead of hanging. Every rank
// runs every test; a failure on any rank fails the run.
#include "refjit/distributed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "distributed/sum_algorithm.h"
#include "driver/pipeline.h"
#include "refjit/refjit.h"
#include "runtime/background_sums.h"

namespace refjit {
namespace {

int my_rank() { return distributed::rank(); }
int num_ranks() { return distributed::size(); }

// Rank r's data: [1, 2, ..., n] * (r + 1) / 4 (exact in f32).
std::vector<double> rank_values(int n, int r) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back((i + 1) * (r + 1) * 0.25);
  return v;
}
Value rank_data(int n, int r) {
  return convert(arange(n) + 1, DType::f32) * (static_cast<float>(r + 1) * 0.25f);
}

void expect_values(const Value& got, const std::vector<double>& want) {
  ASSERT_EQ(got.array().size(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_DOUBLE_EQ(got.array().as_double(static_cast<int64_t>(i)), want[i]) << "element " << i;
}

TEST(Distributed, PsumAllGatherBroadcastAndAxisIndex) {
  const int p = num_ranks();
  std::vector<double> sum(5, 0.0);
  for (int r = 0; r < p; ++r)
    for (int i = 0; i < 5; ++i)
      sum[static_cast<size_t>(i)] += rank_values(5, r)[static_cast<size_t>(i)];
  auto f = [p](const Value& v) {
    return std::tuple{psum(v, "data"), all_gather(v, "data"), broadcast_from(v, "data", p - 1),
                      axis_index("data")};
  };
  for (bool native : {false, true}) {
    SCOPED_TRACE(native ? "native" : "eager");
    const Value x = rank_data(5, my_rank());
    auto [s, g, b, i] = native ? jit(f, "collectives")(x) : f(x);
    expect_values(s, sum);
    ASSERT_EQ(g.shape(), (Shape{p, 5}));
    for (int r = 0; r < p; ++r) expect_values(g[r], rank_values(5, r));
    expect_values(b, rank_values(5, p - 1));
    EXPECT_EQ(i.item(), my_rank());
    EXPECT_EQ(axis_size("data"), p);
  }
}

// The order psum adds `count` elements of `bytes_each` in on this many ranks.
distributed::SumAlgorithm sum_order(int64_t count, int64_t bytes_each) {
  return distributed::sum_algorithm(count * bytes_each, num_ranks());
}

TEST(Distributed, ThePsumOfFloatsHasTheSameBitsOnEveryRank) {
  // Values whose sum rounds differently in different orders, 7 of them (segments of unequal
  // sizes for 2 and 3 ranks): every rank's result, gathered, is bit-for-bit the same, and it
  // is the sum in the order of the algorithm psum chose (rank order, or the tree's).
  const int p = num_ranks(), r = my_rank();
  auto value = [](int rank, int i) {
    return static_cast<float>(std::sin(1.0 + rank * 7 + i) * std::pow(10.0, (rank + i) % 5));
  };
  std::vector<float> mine;
  for (int i = 0; i < 7; ++i) mine.push_back(value(r, i));
  const Value x(Array::from_vector<float>(mine, {7}));
  for (bool native : {false, true}) {
    SCOPED_TRACE(native ? "native" : "eager");
    auto f = [](const Value& v) { return all_gather(psum(v, "data"), "data"); };
    const Value rows = native ? jit(f, "sum_then_gather")(x) : f(x);
    for (int i = 0; i < 7; ++i) {
      std::vector<float> each;
      for (int q = 0; q < p; ++q) each.push_back(value(q, i));
      const float want =
          distributed::ordered_sum(sum_order(7, 4), each, [](float a, float b) { return a + b; });
      for (int q = 0; q < p; ++q)
        EXPECT_EQ(rows.array().values<float>()[static_cast<size_t>(q * 7 + i)], want)
            << "rank " << q << " element " << i;
    }
  }
}

TEST(Distributed, PsumOfSixteenBitFloatsRoundsEachAdd) {
  // float16 and bfloat16: the running sum rounds to the format after each addition, in the
  // algorithm's order, on every rank and in native code alike.
  const int p = num_ranks(), r = my_rank();
  auto value = [](int rank, int i) { return static_cast<float>(0.1 * (i + 1) + 0.37 * rank); };
  for (DType d : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(short_name(d));
    Array mine(ArrayType{d, {4}});
    for (int i = 0; i < 4; ++i) mine.set_from_double(i, value(r, i));
    const Value x(mine);
    for (bool native : {false, true}) {
      SCOPED_TRACE(native ? "native" : "eager");
      auto f = [](const Value& v) { return psum(v, "data"); };
      const Value s = native ? jit(f, "half_psum")(x) : f(x);
      // One addition rounded to the format, as the runtime adds.
      auto rounded = [d](double x) {
        Array a(ArrayType{d, {}});
        a.set_from_double(0, x);
        return a.as_double(0);
      };
      for (int i = 0; i < 4; ++i) {
        std::vector<double> each;
        for (int q = 0; q < p; ++q) each.push_back(rounded(value(q, i)));
        const double want = distributed::ordered_sum(
            sum_order(4, 2), each, [&](double a, double b) { return rounded(a + b); });
        EXPECT_EQ(s.array().as_double(i), want) << "element " << i;
      }
    }
  }
}

TEST(Distributed, PsumOfARefSumsItsContents) {
  std::vector<double> sum(6, 0.0);
  for (int r = 0; r < num_ranks(); ++r)
    for (int i = 0; i < 6; ++i)
      sum[static_cast<size_t>(i)] += rank_values(6, r)[static_cast<size_t>(i)];
  for (bool native : {false, true}) {
    SCOPED_TRACE(native ? "native" : "eager");
    Ref g = new_ref(rank_data(6, my_rank()));
    auto step = [](const Ref& acc) { psum(acc, "grads"); };
    if (native)
      jit(step, "allreduce")(g);
    else
      step(g);
    expect_values(Value(g.value()), sum);
  }
}

TEST(Distributed, GradientsThroughTheCollectives) {
  // The loss of rank r depends on every rank's x; each rank's gradient is that of the sum of
  // all ranks' losses with respect to its own x (psum is its own transpose).
  const int p = num_ranks(), r = my_rank();
  const Value x = rank_data(4, r);
  auto psum_loss = [](const Value& v) { return reduce_sum(psum(v * v, "data")); };
  auto gather_loss = [](const Value& v) {
    Value weights = convert(iota(DType::i32, {axis_size("data"), 4}, 0) + 1, DType::f32);
    return reduce_sum(all_gather(v, "data") * weights);
  };
  auto bcast_loss = [](const Value& v) { return reduce_sum(broadcast_from(v, "data", 0) * 3.0f); };
  for (bool native : {false, true}) {
    SCOPED_TRACE(native ? "native" : "eager");
    auto g1 = native ? jit(grad(psum_loss), "g1")(x) : grad(psum_loss)(x);
    auto g2 = native ? jit(grad(gather_loss), "g2")(x) : grad(gather_loss)(x);
    auto g3 = native ? jit(grad(bcast_loss), "g3")(x) : grad(bcast_loss)(x);
    std::vector<double> w1, w2, w3;
    for (double v : rank_values(4, r)) w1.push_back(2 * v * p);
    for (int i = 0; i < 4; ++i) w2.push_back(static_cast<double>(p) * (r + 1));
    for (int i = 0; i < 4; ++i) w3.push_back(r == 0 ? 3.0 * p : 0.0);
    expect_values(g1, w1);
    expect_values(g2, w2);
    expect_values(g3, w3);
  }
}

TEST(Distributed, SumsStartedEarlyAndBucketedGiveThePsumsValues) {
  // Native code starts each psum where its operand is ready, several in one bucket, and waits
  // where the result is first read (the overlap-sums pass); the f64 sum and the sum after the
  // all_gather are buckets of their own. The values are small integers, so every order of
  // addition gives the same exact sums, which eager (in line, one psum at a time) also gives.
  const int p = num_ranks(), r = my_rank();
  auto f = [](const Value& x, const Value& w, const Value& y) {
    Value a = psum(sin(x) * 0.0f + x, "data");       // 1-D, ready first
    Value b = psum(w * 2.0f, "data");                // 2-D, ready next
    Value c = psum(reduce_sum(x), "data");           // a scalar
    Value d = psum(convert(y, DType::f64), "data");  // another dtype: a bucket of its own
    Value g = all_gather(a, "data");                 // a collective: nothing moves across it
    Value e = psum(reduce_sum(g) + c, "data");
    return std::tuple{a * 1.0f + b[0], b, e, d};
  };
  const Value x = rank_data(3, r), w = reshape(rank_data(6, r), {2, 3}), y = rank_data(2, r);
  std::string decided;
  std::mutex mu;
  PipelineWatch watch([&](const PassReport& report) {
    if (report.pass != "overlap-sums") return;
    std::lock_guard lock(mu);
    decided = report.text();
  });
  auto [a1, b1, e1, d1] = jit(f, "overlapped")(x, w, y);
  auto [a0, b0, e0, d0] = f(x, w, y);
  auto elements = [](const Value& v) {
    std::vector<double> out;
    for (int64_t i = 0; i < v.array().size(); ++i) out.push_back(v.array().as_double(i));
    return out;
  };
  EXPECT_EQ(elements(a1), elements(a0));
  EXPECT_EQ(elements(b1), elements(b0));
  EXPECT_EQ(elements(e1), elements(e0));
  EXPECT_EQ(elements(d1), elements(d0));
  // Rank q's x is [1, 2, 3] (q + 1) / 4: a is x summed over the ranks; the all_gather of a
  // sums to p sum(a), c is sum(a), and e sums p sum(a) + sum(a) over the p ranks.
  const double ranks = p * (p + 1) / 2.0 * 0.25;
  expect_values(a0 - b0[0], {1 * ranks, 2 * ranks, 3 * ranks});
  EXPECT_DOUBLE_EQ(e0.item(), p * (p + 1) * 6 * ranks);
  // The decided program: three starts and three waits (the first bucket holds a, b and c).
  auto count = [&](std::string_view what) {
    int n = 0;
    for (size_t at = decided.find(what); at != std::string::npos; at = decided.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("= psum_start["), 3) << decided;
  EXPECT_EQ(count("= psum_wait["), 3) << decided;
  EXPECT_EQ(count("= concatenate["), 1) << decided;
  EXPECT_EQ(count("= psum["), 0) << decided;
}

TEST(Distributed, TheCommunicationThreadSumsWhileTheCallerComputes) {
  // With REFJIT_BACKGROUND_SUMS=1 (ctest's distributed_np2_thread) the started sums run on the
  // communication thread: a sum started before a long computation it does not feed is begun
  // there before the caller reaches its wait. The values are the psum's either way.
  const char* forced = std::getenv("REFJIT_BACKGROUND_SUMS");
  if (num_ranks() < 2 || !forced || std::string(forced) != "1")
    GTEST_SKIP() << "needs two processes and REFJIT_BACKGROUND_SUMS=1";
  auto f = [](const Value& g, const Value& work) {
    Value s = psum(g, "data");
    Value busy = reduce_sum(sin(work) * cos(work));  // milliseconds, independent of s
    return std::tuple{s, busy};
  };
  const Value g = rank_data(1000, my_rank());
  const Value work = convert(arange(1 << 22), DType::f32);
  const int64_t before = sums_run_on_communication_thread();
  auto [s, busy] = jit(f, "thread_sum")(g, work);
  std::vector<double> want(1000, 0.0);
  for (int r = 0; r < num_ranks(); ++r)
    for (int i = 0; i < 1000; ++i)
      want[static_cast<size_t>(i)] += rank_values(1000, r)[static_cast<size_t>(i)];
  expect_values(s, want);
  EXPECT_GT(sums_run_on_communication_thread(), before);
}

TEST(Distributed, RanksThatDisagreeFailOnEveryRank) {
  if (num_ranks() < 2) GTEST_SKIP() << "needs two processes";
  // Rank 0 passes 3 elements, the others 4: every rank gets the error, none waits forever,
  // and the next collective (with agreeing shapes) works.
  const int n = my_rank() == 0 ? 3 : 4;
  auto f = [](const Value& v) { return psum(v, "data"); };
  for (bool native : {false, true}) {
    SCOPED_TRACE(native ? "native" : "eager");
    try {
      Value s = native ? jit(f, "mismatch")(rank_data(n, my_rank())) : f(rank_data(n, my_rank()));
      ADD_FAILURE() << "expected an error, got " << s.str();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("disagree on the shape"), std::string::npos) << e.what();
    }
    Value ok = f(rank_data(2, 0));
    expect_values(ok, {0.25 * num_ranks(), 0.5 * num_ranks()});
  }
}

}  // namespace
}  // namespace refjit

int main(int argc, char** argv) {
  refjit::distributed::Session mpi(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
