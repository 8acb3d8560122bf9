// The hand-written forward and adjoint of the seed's slice1 program (bench/handwritten_slice1)
// against a direct transcription of the seed's Python and central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

// bench/ is not part of librefjit and is not built in every preset (asan turns it off), so
// this test compiles the hand-written implementation into itself.
#include "bench/handwritten_slice1.cpp"
#include "bench/handwritten_slice1.h"
#include "refjit/ir/error.h"

namespace refjit::bench {
namespace {

// The seed's loss, transcribed literally (slices copied out, then written back) in precision
// T, on given values (values = insert_values**w).
template <class T>
T naive_loss(const ShiftProgram& p, const std::vector<T>& values,
             std::vector<T>* final_state = nullptr) {
  std::vector<T> state(p.init_state.begin(), p.init_state.end());
  const int64_t n = p.n_cols;
  auto at = [&](int64_t r, int64_t c) -> T& {
    return state[static_cast<size_t>(r * p.state_cols + c)];
  };
  for (int64_t t = 0; t < p.n_steps(); ++t) {
    const auto ts = static_cast<size_t>(t);
    {
      const int64_t row = p.insert_rows[ts], col = p.insert_cols[ts];
      std::vector<T> update{values[ts]};
      for (int64_t k = 0; k < n; ++k) update.push_back(at(row, col + k));
      for (int64_t k = 0; k <= n; ++k) at(row, col + k) = update[static_cast<size_t>(k)];
    }
    if (p.has_delete()) {
      const int64_t row = p.delete_rows[ts], col = p.delete_cols[ts];
      std::vector<T> update;
      for (int64_t k = 0; k < n; ++k) update.push_back(at(row, col + 1 + k));
      for (int64_t k = 0; k < n; ++k) at(row, col + k) = update[static_cast<size_t>(k)];
    }
  }
  T sum = 0;
  for (int64_t r = 0; r < p.loss_rows; ++r)
    for (int64_t c = 0; c < p.loss_cols; ++c) {
      const T d =
          static_cast<T>(p.target_state[static_cast<size_t>(r * p.loss_cols + c)]) - at(r, c);
      sum += d * d;
    }
  if (final_state) *final_state = state;
  return sum / static_cast<T>(p.loss_rows * p.loss_cols);
}

std::vector<double> values_f64(const ShiftProgram& p, double w) {
  std::vector<double> v;
  for (float x : p.insert_values) v.push_back(std::pow(static_cast<double>(x), w));
  return v;
}

// d loss / d w by central differences on the f64 transcription.
double finite_difference_grad(const ShiftProgram& p, double w, double h = 1e-4) {
  return (naive_loss(p, values_f64(p, w + h)) - naive_loss(p, values_f64(p, w - h))) / (2 * h);
}

SeedSizes small(int64_t repeats) {
  return SeedSizes{.n_steps = 60, .n_rows = 4, .n_cols = 6, .n_row_repeats = repeats};
}

TEST(NumpyLegacyRandom, ReproducesNumpySeed42Streams) {
  NumpyLegacyRandom u(42);  // np.random.seed(42); np.random.random(3)
  EXPECT_DOUBLE_EQ(u.random(), 0.3745401188473625);
  EXPECT_DOUBLE_EQ(u.random(), 0.9507143064099162);
  EXPECT_DOUBLE_EQ(u.random(), 0.7319939418114051);
  NumpyLegacyRandom i(42);  // np.random.seed(42); np.random.randint(0, 100, 5)
  EXPECT_EQ(i.randint_i32(0, 100, 5), (std::vector<int32_t>{51, 92, 14, 71, 60}));
}

TEST(SeedData, LossFnProgramHasTheSeedsShapesAndRanges) {
  ShiftProgram p = make_loss_fn_program(SeedSizes{.n_row_repeats = 10});
  EXPECT_EQ(p.state_rows, 1000);
  EXPECT_EQ(p.state_cols, 1000);
  EXPECT_EQ(p.target_state.size(), 100u * 500u);
  EXPECT_EQ(p.row_indices().size(), 2000u);
  EXPECT_EQ(p.insert_rows[0], p.row_indices()[0]);
  EXPECT_EQ(p.delete_rows[0], p.row_indices()[1]);
  for (size_t t = 0; t < 1000; ++t) {
    EXPECT_LT(p.insert_rows[t], 100);
    EXPECT_LT(p.delete_cols[t], 500);
  }
  // The first target element is the seed's first np.random.random(), rounded to f32.
  EXPECT_EQ(p.target_state[0], static_cast<float>(0.3745401188473625));
}

TEST(HandwrittenSlice1, FinalStateEqualsTheLiteralTranscription) {
  for (int64_t repeats : {1, 3}) {
    ShiftProgram p = make_loss_fn_program(small(repeats), 7);
    HandwrittenSlice1 hw(p);
    std::vector<float> values;
    for (float x : p.insert_values) values.push_back(std::pow(x, 1.5f));
    std::vector<float> expected;
    const float loss = naive_loss<float>(p, values, &expected);
    EXPECT_EQ(hw.final_state(1.5f), expected) << "repeats " << repeats;
    EXPECT_FLOAT_EQ(hw.forward(1.5f), loss);
  }
}

TEST(HandwrittenSlice1, RepeatedCallsStartFromTheInitialState) {
  HandwrittenSlice1 hw(make_loss_fn_program(small(2), 3));
  const float loss = hw.forward(2.0f);
  const LossAndGrad first = hw.value_and_grad(2.0f);
  const LossAndGrad second = hw.value_and_grad(2.0f);
  EXPECT_EQ(first.loss, loss);
  EXPECT_EQ(second.loss, first.loss);
  EXPECT_EQ(second.grad, first.grad);
  EXPECT_EQ(hw.forward(2.0f), loss);
}

TEST(HandwrittenSlice1, GradMatchesFiniteDifferencesAtSmallSizes) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    for (int64_t repeats : {1, 2}) {
      ShiftProgram p = make_loss_fn_program(small(repeats), seed);
      HandwrittenSlice1 hw(p);
      for (float w : {0.5f, 2.0f, 3.0f}) {
        const double fd = finite_difference_grad(p, w);
        const LossAndGrad g = hw.value_and_grad(w);
        EXPECT_NEAR(g.grad, fd, 1e-5 * std::abs(fd) + 1e-7)
            << "seed " << seed << " repeats " << repeats << " w " << w;
        EXPECT_NEAR(g.loss, naive_loss(p, values_f64(p, w)), 1e-6);
      }
    }
  }
}

TEST(HandwrittenSlice1, ValueCotangentsMatchFiniteDifferencesPerStep) {
  ShiftProgram p = make_loss_fn_program(small(1), 11);
  HandwrittenSlice1 hw(p);
  hw.value_and_grad(2.0f);
  const std::vector<float> ct = hw.value_cotangents();
  std::vector<double> values = values_f64(p, 2.0);
  int nonzero = 0;
  for (size_t t = 0; t < values.size(); ++t) {
    const double h = 1e-4;
    std::vector<double> up = values, down = values;
    up[t] += h;
    down[t] -= h;
    const double fd = (naive_loss(p, up) - naive_loss(p, down)) / (2 * h);
    EXPECT_NEAR(ct[t], fd, 1e-6) << "step " << t;
    nonzero += fd != 0.0;
  }
  // Some values survive to the compared region, some are shifted out or deleted.
  EXPECT_GT(nonzero, 0);
  EXPECT_LT(nonzero, static_cast<int>(values.size()));
}

TEST(HandwrittenSlice1, InsertOnlyProgramGradMatchesFiniteDifferences) {
  ShiftProgram p = make_insert_program(small(1), 5);
  HandwrittenSlice1 hw(p);
  const double fd = finite_difference_grad(p, 2.0);
  EXPECT_NEAR(hw.value_and_grad(2.0f).grad, fd, 1e-5 * std::abs(fd) + 1e-7);
}

// Seed sizes: N_STEPS=1000, N_ROWS=100, N_COLS=500, N_ROW_REPEATS in {1, 10}.
TEST(HandwrittenSlice1, GradAtSeedSizesMatchesFiniteDifferencesAndJax) {
  float grads[2];
  int k = 0;
  for (int64_t repeats : {1, 10}) {
    ShiftProgram p = make_loss_fn_program(SeedSizes{.n_row_repeats = repeats});
    HandwrittenSlice1 hw(p);
    const LossAndGrad g = hw.value_and_grad(2.0f);
    const double fd = finite_difference_grad(p, 2.0);
    EXPECT_NEAR(g.grad, fd, 1e-4 * std::abs(fd)) << "repeats " << repeats;
    EXPECT_NEAR(g.loss, naive_loss(p, values_f64(p, 2.0)), 1e-6);
    // The seed prints g=Array(0.00051642, dtype=float32) for both N_ROW_REPEATS.
    EXPECT_NEAR(g.grad, 0.00051642, 1e-8) << "repeats " << repeats;
    grads[k++] = g.grad;
  }
  EXPECT_EQ(grads[0], grads[1]);  // the extra rows are never touched
}

TEST(HandwrittenSlice1, InsertOnlyGradAtSeedSizesMatchesJax) {
  ShiftProgram p = make_insert_program(SeedSizes{});
  HandwrittenSlice1 hw(p);
  const LossAndGrad g = hw.value_and_grad(2.0f);
  EXPECT_NEAR(g.grad, finite_difference_grad(p, 2.0), 1e-4 * std::abs(g.grad));
  // The seed's second program prints g_true=Array(0.00052476, dtype=float32).
  EXPECT_NEAR(g.grad, 0.00052476, 1e-8);
}

TEST(HandwrittenSlice1, RejectsASegmentOutsideTheState) {
  ShiftProgram p = make_loss_fn_program(small(1), 1);
  p.insert_cols[3] = static_cast<int32_t>(p.n_cols);  // col + n_cols is past the last column
  EXPECT_THROW(HandwrittenSlice1{p}, Error);
  p = make_loss_fn_program(small(1), 1);
  p.delete_rows[0] = -1;
  EXPECT_THROW(HandwrittenSlice1{p}, Error);
}

}  // namespace
}  // namespace refjit::bench
