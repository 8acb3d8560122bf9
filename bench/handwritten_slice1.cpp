#include "bench/handwritten_slice1.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "refjit/ir/error.h"

namespace refjit::bench {

double NumpyLegacyRandom::random() {
  const uint32_t a = mt_() >> 5;
  const uint32_t b = mt_() >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

int32_t NumpyLegacyRandom::randint(int32_t low, int32_t high) {
  const uint32_t range = static_cast<uint32_t>(high) - static_cast<uint32_t>(low) - 1u;
  if (range == 0) return low;
  uint32_t mask = range;
  for (int shift : {1, 2, 4, 8, 16}) mask |= mask >> shift;
  uint32_t draw;
  do {
    draw = mt_() & mask;
  } while (draw > range);
  return static_cast<int32_t>(static_cast<uint32_t>(low) + draw);
}

std::vector<float> NumpyLegacyRandom::random_f32(int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (float& x : out) x = static_cast<float>(random());
  return out;
}

std::vector<int32_t> NumpyLegacyRandom::randint_i32(int32_t low, int32_t high, int64_t n) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& x : out) x = randint(low, high);
  return out;
}

namespace {

std::vector<int32_t> interleave(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out;
  out.reserve(a.size() * 2);
  for (size_t t = 0; t < a.size(); ++t) {
    out.push_back(a[t]);
    out.push_back(b.empty() ? 0 : b[t]);
  }
  return out;
}

// Splits an n x 2 array into its two columns.
std::pair<std::vector<int32_t>, std::vector<int32_t>> columns(const std::vector<int32_t>& x) {
  std::pair<std::vector<int32_t>, std::vector<int32_t>> out;
  for (size_t t = 0; t + 1 < x.size(); t += 2) {
    out.first.push_back(x[t]);
    out.second.push_back(x[t + 1]);
  }
  return out;
}

}  // namespace

std::vector<int32_t> ShiftProgram::row_indices() const {
  return interleave(insert_rows, delete_rows);
}
std::vector<int32_t> ShiftProgram::col_indices() const {
  return interleave(insert_cols, delete_cols);
}

ShiftProgram make_loss_fn_program(const SeedSizes& s, uint32_t seed) {
  ShiftProgram p;
  p.state_rows = s.n_rows * s.n_row_repeats;
  p.state_cols = 2 * s.n_cols;
  p.n_cols = s.n_cols;
  p.loss_rows = s.n_rows;
  p.loss_cols = s.n_cols;
  p.init_state.assign(static_cast<size_t>(p.state_rows * p.state_cols), 0.0f);
  // The seed's dict literal draws in this order.
  NumpyLegacyRandom rng(seed);
  p.target_state = rng.random_f32(s.n_rows * s.n_cols);
  auto rows = rng.randint_i32(0, static_cast<int32_t>(s.n_rows), s.n_steps * 2);
  auto cols = rng.randint_i32(0, static_cast<int32_t>(s.n_cols), s.n_steps * 2);
  p.insert_values = rng.random_f32(s.n_steps);
  std::tie(p.insert_rows, p.delete_rows) = columns(rows);
  std::tie(p.insert_cols, p.delete_cols) = columns(cols);
  return p;
}

ShiftProgram make_insert_program(const SeedSizes& s, uint32_t seed) {
  ShiftProgram p;
  p.state_rows = s.n_rows;
  p.state_cols = 2 * s.n_cols + 1;
  p.n_cols = s.n_cols;
  p.loss_rows = s.n_rows;
  p.loss_cols = s.n_cols;
  p.init_state.assign(static_cast<size_t>(p.state_rows * p.state_cols), 0.0f);
  NumpyLegacyRandom rng(seed);
  p.target_state = rng.random_f32(s.n_rows * s.n_cols);
  p.insert_rows = rng.randint_i32(0, static_cast<int32_t>(s.n_rows), s.n_steps);
  p.insert_cols = rng.randint_i32(0, static_cast<int32_t>(s.n_cols), s.n_steps);
  p.insert_values = rng.random_f32(s.n_steps);
  return p;
}

namespace {

void check_segments(const ShiftProgram& p, const std::vector<int32_t>& rows,
                    const std::vector<int32_t>& cols, const char* what) {
  if (rows.size() != p.insert_values.size() || cols.size() != p.insert_values.size())
    throw Error(
        fmt::format("HandwrittenSlice1: {} rows/cols have {}/{} entries but there are {} "
                    "steps; give one row and one col per step",
                    what, rows.size(), cols.size(), p.insert_values.size()));
  for (size_t t = 0; t < rows.size(); ++t) {
    // The segment and the element past it must lie inside the row (no clamping here).
    if (rows[t] < 0 || rows[t] >= p.state_rows || cols[t] < 0 || cols[t] + p.n_cols >= p.state_cols)
      throw Error(
          fmt::format("HandwrittenSlice1: {} of step {} at (row {}, col {}) leaves the "
                      "{}x{} state (segment length {}); use 0 <= row < {} and "
                      "0 <= col < {}",
                      what, t, rows[t], cols[t], p.state_rows, p.state_cols, p.n_cols, p.state_rows,
                      p.state_cols - p.n_cols));
  }
}

}  // namespace

HandwrittenSlice1::HandwrittenSlice1(ShiftProgram program) : p_(std::move(program)) {
  const auto cells = static_cast<size_t>(p_.state_rows * p_.state_cols);
  if (p_.init_state.size() != cells)
    throw Error(fmt::format("HandwrittenSlice1: init_state has {} elements, expected {}x{}",
                            p_.init_state.size(), p_.state_rows, p_.state_cols));
  if (p_.loss_rows > p_.state_rows || p_.loss_cols > p_.state_cols ||
      p_.target_state.size() != static_cast<size_t>(p_.loss_rows * p_.loss_cols))
    throw Error(fmt::format("HandwrittenSlice1: target_state must be {}x{} and inside the state",
                            p_.loss_rows, p_.loss_cols));
  check_segments(p_, p_.insert_rows, p_.insert_cols, "insert");
  if (p_.has_delete()) check_segments(p_, p_.delete_rows, p_.delete_cols, "delete");
  state_ = p_.init_state;
  cotangent_.assign(cells, 0.0f);
  values_.assign(p_.insert_values.size(), 0.0f);
  ct_values_.assign(p_.insert_values.size(), 0.0f);
  dirty_.assign(static_cast<size_t>(p_.state_rows), 0);
  dirty_rows_.reserve(static_cast<size_t>(p_.state_rows));
}

void HandwrittenSlice1::mark_dirty(int32_t row) {
  if (!dirty_[static_cast<size_t>(row)]) {
    dirty_[static_cast<size_t>(row)] = 1;
    dirty_rows_.push_back(row);
  }
}

void HandwrittenSlice1::run_forward(float w) {
  const int64_t n = p_.n_cols;
  const size_t seg_bytes = static_cast<size_t>(n) * sizeof(float);
  for (int64_t t = 0; t < p_.n_steps(); ++t) {
    const auto ts = static_cast<size_t>(t);
    const float v = std::pow(p_.insert_values[ts], w);
    values_[ts] = v;
    float* ins = state_.data() + p_.insert_rows[ts] * p_.state_cols + p_.insert_cols[ts];
    std::memmove(ins + 1, ins, seg_bytes);  // shift right; ins[n] is overwritten
    ins[0] = v;
    mark_dirty(p_.insert_rows[ts]);
    if (p_.has_delete()) {
      float* del = state_.data() + p_.delete_rows[ts] * p_.state_cols + p_.delete_cols[ts];
      std::memmove(del, del + 1, seg_bytes);  // shift left; del[n] keeps its value
      mark_dirty(p_.delete_rows[ts]);
    }
  }
}

float HandwrittenSlice1::loss_and_seed_cotangent(bool seed_cotangent) {
  const double count = static_cast<double>(p_.loss_rows * p_.loss_cols);
  const float scale = static_cast<float>(2.0 / count);
  double sum = 0;
  for (int64_t r = 0; r < p_.loss_rows; ++r) {
    const float* s = state_.data() + r * p_.state_cols;
    const float* target = p_.target_state.data() + r * p_.loss_cols;
    float* ct = cotangent_.data() + r * p_.state_cols;
    for (int64_t c = 0; c < p_.loss_cols; ++c) {
      const float diff = target[c] - s[c];
      sum += static_cast<double>(diff) * diff;
      if (seed_cotangent) ct[c] = -scale * diff;
    }
  }
  return static_cast<float>(sum / count);
}

void HandwrittenSlice1::restore_state() {
  const auto row_bytes = static_cast<size_t>(p_.state_cols) * sizeof(float);
  for (int32_t r : dirty_rows_)
    std::memcpy(state_.data() + r * p_.state_cols, p_.init_state.data() + r * p_.state_cols,
                row_bytes);
}

void HandwrittenSlice1::clear_cotangent() {
  const auto row_bytes = static_cast<size_t>(p_.state_cols) * sizeof(float);
  for (int64_t r = 0; r < p_.loss_rows; ++r)
    std::memset(cotangent_.data() + r * p_.state_cols, 0, row_bytes);
  for (int32_t r : dirty_rows_) std::memset(cotangent_.data() + r * p_.state_cols, 0, row_bytes);
}

float HandwrittenSlice1::forward(float w) {
  run_forward(w);
  const float loss = loss_and_seed_cotangent(false);
  restore_state();
  for (int32_t r : dirty_rows_) dirty_[static_cast<size_t>(r)] = 0;
  dirty_rows_.clear();
  return loss;
}

std::vector<float> HandwrittenSlice1::final_state(float w) {
  run_forward(w);
  std::vector<float> out = state_;
  restore_state();
  for (int32_t r : dirty_rows_) dirty_[static_cast<size_t>(r)] = 0;
  dirty_rows_.clear();
  return out;
}

LossAndGrad HandwrittenSlice1::value_and_grad(float w) {
  run_forward(w);
  LossAndGrad out;
  out.loss = loss_and_seed_cotangent(true);
  restore_state();
  const int64_t n = p_.n_cols;
  const size_t seg_bytes = static_cast<size_t>(n) * sizeof(float);
  double grad = 0;
  for (int64_t t = p_.n_steps() - 1; t >= 0; --t) {
    const auto ts = static_cast<size_t>(t);
    if (p_.has_delete()) {
      // delete^T: the cotangent of new[col+k] flows to old[col+k+1]; old[col] was dropped;
      // new[col+n] is old[col+n] left in place.
      float* del = cotangent_.data() + p_.delete_rows[ts] * p_.state_cols + p_.delete_cols[ts];
      const float kept = del[n];
      std::memmove(del + 1, del, seg_bytes);
      del[0] = 0.0f;
      del[n] += kept;
    }
    // insert^T: new[col] is the value; new[col+k+1] came from old[col+k]; old[col+n] was
    // overwritten.
    float* ins = cotangent_.data() + p_.insert_rows[ts] * p_.state_cols + p_.insert_cols[ts];
    const float ct_value = ins[0];
    std::memmove(ins, ins + 1, seg_bytes);
    ins[n] = 0.0f;
    ct_values_[ts] = ct_value;
    // d values[t] / d w = insert_values[t]**w * log(insert_values[t]) (0 at x = 0, as JAX).
    const float x = p_.insert_values[ts];
    if (x != 0.0f) grad += static_cast<double>(ct_value) * values_[ts] * std::log(x);
  }
  out.grad = static_cast<float>(grad);
  clear_cotangent();
  for (int32_t r : dirty_rows_) dirty_[static_cast<size_t>(r)] = 0;
  dirty_rows_.clear();
  return out;
}

}  // namespace refjit::bench
