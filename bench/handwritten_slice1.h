// The physical limit of the seed "grad-scan-slice-update-slow": loss_fn in mode slice1 with
// delete_fn (and the insert-only `loss` of the seed's second program), forward and adjoint
// written by hand in plain C++, plus the seed's input data reproduced bit for bit.
//
// One step of the seed's scan, on a row segment of length n_cols starting at (row, col):
//   insert: state[row, col+1 : col+n_cols+1] = state[row, col : col+n_cols]; state[row, col] = v
//   delete: state[row, col : col+n_cols] = state[row, col+1 : col+n_cols+1]
// and the loss is mean((target - state[:loss_rows, :loss_cols])**2), v_t = insert_values[t]**w.
//
// The adjoint is O(n_cols) per step whatever the size of the state: a step is linear in the
// state and the value, with a Jacobian that depends only on the (row, col) indices, so the
// reverse pass needs no primal state at all (nothing is stored per step; the reversible
// "save the overwritten element" trick is not even needed). It shifts the cotangent row
// segment back: insert^T reads the value's cotangent at col, shifts left and zeroes the
// element the forward overwrote; delete^T shifts right, zeroes col and adds the cotangent of
// the element delete left in place. All buffers are allocated once; a call touches only the
// rows the steps touch (dirty-row tracking resets them), never the whole state.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace refjit::bench {

// numpy's legacy global generator (np.random.seed / random / randint with dtype int32), so
// that the benchmark runs on exactly the seed's data and can be compared to JAX's printed
// gradients. np.random.seed(s) is MT19937's init_genrand(s), the same as std::mt19937(s).
class NumpyLegacyRandom {
 public:
  explicit NumpyLegacyRandom(uint32_t seed) : mt_(seed) {}
  // np.random.random(): 53 random bits from two 32-bit draws.
  double random();
  // np.random.randint(low, high, dtype=np.int32): masked rejection sampling in [low, high).
  int32_t randint(int32_t low, int32_t high);
  // n draws of random(), rounded to float32 as `.astype(np.float32)` does.
  std::vector<float> random_f32(int64_t n);
  std::vector<int32_t> randint_i32(int32_t low, int32_t high, int64_t n);

 private:
  std::mt19937 mt_;
};

// The seed's sizes: N_STEPS, N_ROWS, N_COLS, N_ROW_REPEATS.
struct SeedSizes {
  int64_t n_steps = 1000;
  int64_t n_rows = 100;
  int64_t n_cols = 500;
  int64_t n_row_repeats = 1;
};

// A scan of shifting inserts (and optionally deletes) with its data, row-major f32 buffers.
struct ShiftProgram {
  int64_t state_rows = 0;
  int64_t state_cols = 0;
  int64_t n_cols = 0;     // the length of the shifted segment
  int64_t loss_rows = 0;  // the loss compares state[:loss_rows, :loss_cols] with target
  int64_t loss_cols = 0;
  std::vector<float> init_state;     // state_rows x state_cols
  std::vector<float> target_state;   // loss_rows x loss_cols
  std::vector<int32_t> insert_rows;  // n_steps each
  std::vector<int32_t> insert_cols;
  std::vector<int32_t> delete_rows;  // empty: the steps only insert
  std::vector<int32_t> delete_cols;
  std::vector<float> insert_values;  // raised to the power w

  int64_t n_steps() const { return static_cast<int64_t>(insert_values.size()); }
  bool has_delete() const { return !delete_rows.empty(); }
  // The seed's row_indices / col_indices layout (n_steps x 2: insert, delete).
  std::vector<int32_t> row_indices() const;
  std::vector<int32_t> col_indices() const;
};

// The seed's first program: init_state = zeros (n_rows * n_row_repeats, 2 * n_cols),
// target_state, row_indices, col_indices, insert_values drawn after np.random.seed(seed).
ShiftProgram make_loss_fn_program(const SeedSizes& sizes, uint32_t seed = 42);
// The seed's second program (simple/bad/slow/fast_insert): inserts only, state
// zeros (n_rows, 2 * n_cols + 1), target, rows, cols, values drawn after np.random.seed(seed).
ShiftProgram make_insert_program(const SeedSizes& sizes, uint32_t seed = 42);

struct LossAndGrad {
  float loss = 0;
  float grad = 0;  // d loss / d w
};

class HandwrittenSlice1 {
 public:
  // Checks the indices (every segment must lie inside the state: 0 <= col < state_cols -
  // n_cols, 0 <= row < state_rows) and allocates every buffer.
  explicit HandwrittenSlice1(ShiftProgram program);

  // The loss at w (the state buffer is restored to init_state afterwards).
  float forward(float w);
  // The loss and its derivative in w: the forward, then the reverse pass.
  LossAndGrad value_and_grad(float w);
  // The final state of the forward at w (a copy), for checking against other implementations.
  std::vector<float> final_state(float w);
  // d loss / d values[t] of the most recent value_and_grad (values = insert_values**w).
  const std::vector<float>& value_cotangents() const { return ct_values_; }

  const ShiftProgram& program() const { return p_; }

 private:
  void run_forward(float w);
  float loss_and_seed_cotangent(bool seed_cotangent);
  void restore_state();
  void clear_cotangent();
  void mark_dirty(int32_t row);

  ShiftProgram p_;
  std::vector<float> state_;      // the scan's carry, starts as init_state
  std::vector<float> cotangent_;  // the reverse pass's carry, all zeros between calls
  std::vector<float> values_;     // insert_values**w
  std::vector<float> ct_values_;
  std::vector<char> dirty_;  // per state row: written by the current call
  std::vector<int32_t> dirty_rows_;
};

}  // namespace refjit::bench
