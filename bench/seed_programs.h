// The programs of the seed "Grad is very slow in combination with slice update + scan"
// (/work/shared/seeds/grad-scan-slice-update-slow.txt), written with refjit's C++ API the
// way the Python writes them: value carries updated with dynamic_slice /
// dynamic_update_slice / concatenate / scatter inside a scan. Tests and benchmarks share
// them; each function works eagerly, under make_jaxpr/jit, and under jvp/vjp/grad.
//
//   Part 1: loss_fn(w, mode, inputs, sizes) with the insert modes slice1, slice2, scatter,
//           combo1, combo2, and delete_fn.
//   Part 2: loss over simple_insert and the custom_vjp versions bad_insert, slow_insert,
//           fast_insert.
//   Part 3: slow_pop and fast_pop scanned with pop_scan.
//
// Inputs are drawn from SplitMix64 (below) seeded with `seed` (42 by default, as the seed's
// np.random.seed(42)), in the order the Python draws them. Uniform floats are the top 24
// bits of a draw times 2^-24 (in [0, 1)); integers in [lo, hi) are lo + (top 32 bits *
// (hi - lo)) >> 32. The values differ from NumPy's; the structure is the same.
//
// Mirroring notes: `x[row, col]` is element() (a 1x1 dynamic_slice), `x.at[row, col].set(v)`
// is set_element() (a 1x1 dynamic_update_slice), and `x.at[row, cols].set(values)` with an
// index vector is set_row_elements(), the same x.at(row, cols).set(values): a scatter whose
// one index, row * width + cols, addresses both dims (all in range here, as in the seed).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "refjit/refjit.h"

namespace refjit::seeds {

// ---------------------------------------------------------------------------------------
// Deterministic inputs.

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * 0x1p-24f; }
  int32_t randint(int32_t lo, int32_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo);
    return lo + static_cast<int32_t>(((next() >> 32) * span) >> 32);
  }

 private:
  uint64_t state_;
};

inline Value random_uniform(SplitMix64& rng, const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(num_elements(shape)));
  for (float& x : v) x = rng.uniform();
  return array<float>(v, shape);
}

inline Value random_int(SplitMix64& rng, const Shape& shape, int64_t lo, int64_t hi) {
  std::vector<int32_t> v(static_cast<size_t>(num_elements(shape)));
  for (int32_t& x : v) x = rng.randint(static_cast<int32_t>(lo), static_cast<int32_t>(hi));
  return array<int32_t>(v, shape);
}

// ---------------------------------------------------------------------------------------
// Indexing helpers for 2-D arrays with integer scalar (possibly traced) indices.

// x[row, col]
inline Value element(const Value& x, const Value& row, const Value& col) {
  return reshape(dynamic_slice(x, {row, col}, {1, 1}), {});
}

// x.at[row, col].set(v)
inline Value set_element(const Value& x, const Value& row, const Value& col, const Value& v) {
  return dynamic_update_slice(x, broadcast_in_dim(v, {1, 1}, {}), {row, col});
}

// x.at[row, cols].set(values): cols an i32[k] vector, values a [k] vector.
inline Value set_row_elements(const Value& x, const Value& row, const Value& cols,
                              const Value& values) {
  return x.at(row, cols).set(values);
}

// col + np.arange(n, dtype=np.int32)
inline Value cols_from(const Value& col, int64_t n) { return col + arange(n); }

// mean((target - state) ** 2)
inline Value mean_squared_error(const Value& target, const Value& state) {
  Value d = integer_pow(target - state, 2);
  return reduce_sum(d) / static_cast<float>(d.size());
}

// ---------------------------------------------------------------------------------------
// Part 1: insert and delete in the rows of a [n_rows * n_row_repeats, 2 * n_cols] carry.

struct Part1Sizes {
  int64_t n_steps = 1000;
  int64_t n_rows = 100;
  int64_t n_cols = 500;
  int64_t n_row_repeats = 1;  // the seed measures 1 and 10
};

enum class InsertMode { slice1, slice2, scatter, combo1, combo2 };
inline constexpr std::array<InsertMode, 5> kInsertModes = {InsertMode::slice1, InsertMode::slice2,
                                                           InsertMode::scatter, InsertMode::combo1,
                                                           InsertMode::combo2};

inline const char* mode_name(InsertMode m) {
  switch (m) {
    case InsertMode::slice1: return "slice1";
    case InsertMode::slice2: return "slice2";
    case InsertMode::scatter: return "scatter";
    case InsertMode::combo1: return "combo1";
    case InsertMode::combo2: return "combo2";
  }
  return "?";
}

struct Part1Inputs {
  Value init_state;     // f32[n_rows * n_row_repeats, 2 * n_cols], zeros
  Value target_state;   // f32[n_rows, n_cols], uniform
  Value row_indices;    // i32[n_steps, 2] in [0, n_rows): (insert_row, delete_row)
  Value col_indices;    // i32[n_steps, 2] in [0, n_cols): (insert_col, delete_col)
  Value insert_values;  // f32[n_steps], uniform
};

inline Part1Inputs make_part1_inputs(const Part1Sizes& s, uint64_t seed = 42) {
  SplitMix64 rng(seed);
  Part1Inputs in;
  in.init_state = zeros({s.n_rows * s.n_row_repeats, s.n_cols * 2});
  in.target_state = random_uniform(rng, {s.n_rows, s.n_cols});
  in.row_indices = random_int(rng, {s.n_steps, 2}, 0, s.n_rows);
  in.col_indices = random_int(rng, {s.n_steps, 2}, 0, s.n_cols);
  in.insert_values = random_uniform(rng, {s.n_steps});
  return in;
}

// Shifts state[row, col:col+n_cols] right by one and writes value at [row, col].
inline Value insert_fn(const Value& state_in, const Value& row, const Value& col,
                       const Value& value, InsertMode mode, int64_t n_cols) {
  Value state = state_in;
  switch (mode) {
    case InsertMode::slice1: {
      Value update = concatenate(
          {broadcast_in_dim(value, {1, 1}, {}), dynamic_slice(state, {row, col}, {1, n_cols})}, 1);
      return dynamic_update_slice(state, update, {row, col});
    }
    case InsertMode::slice2: {
      Value update = dynamic_slice(state, {row, col}, {1, n_cols});
      state = dynamic_update_slice(state, update, {row, col + 1});
      return set_element(state, row, col, value);
    }
    case InsertMode::scatter: {
      Value indices = cols_from(col, n_cols + 1);
      Value values = concatenate(
          {reshape(value, {1}), reshape(dynamic_slice(state, {row, col}, {1, n_cols}), {n_cols})},
          0);
      return set_row_elements(state, row, indices, values);
    }
    case InsertMode::combo1: {
      Value update = dynamic_slice(state, {row, col}, {1, n_cols});
      state = dynamic_update_slice(state, update, {row, col + 1});
      Value indices = cols_from(col, 1);
      Value values = reshape(value, {1});
      return set_row_elements(state, row, indices, values);
    }
    case InsertMode::combo2: {
      Value update = dynamic_slice(state, {row, col + 1}, {1, n_cols - 1});
      state = dynamic_update_slice(state, update, {row, col + 2});
      Value indices = cols_from(col, 2);
      Value values = concatenate({reshape(value, {1}), reshape(element(state, row, col), {1})}, 0);
      return set_row_elements(state, row, indices, values);
    }
  }
  throw std::invalid_argument("insert_fn: unknown mode");
}

// Shifts state[row, col+1:col+1+n_cols] left by one.
inline Value delete_fn(const Value& state, const Value& row, const Value& col, int64_t n_cols) {
  Value update = dynamic_slice(state, {row, col + 1}, {1, n_cols});
  return dynamic_update_slice(state, update, {row, col});
}

// One scan step: inputs = ((insert_row, delete_row), (insert_col, delete_col), value).
inline Value update_fn(const Value& state, const Value& rows, const Value& cols, const Value& value,
                       InsertMode mode, int64_t n_cols) {
  Value s = insert_fn(state, rows[0], cols[0], value, mode, n_cols);
  return delete_fn(s, rows[1], cols[1], n_cols);
}

// The carry after the scan: lax.scan(update_fn, init_state, (rows, cols, values ** w)).
inline Value part1_final_state(const Value& w, InsertMode mode, const Part1Inputs& in,
                               const Part1Sizes& s) {
  auto [state, ys] = scan(
      [&](const Value& state, const std::tuple<Value, Value, Value>& x) {
        const auto& [rows, cols, value] = x;
        return std::pair{update_fn(state, rows, cols, value, mode, s.n_cols), std::tuple{}};
      },
      in.init_state, std::tuple{in.row_indices, in.col_indices, pow(in.insert_values, w)});
  return state;
}

// ((target_state - state[:N_ROWS, :N_COLS]) ** 2).mean()
inline Value loss_fn(const Value& w, InsertMode mode, const Part1Inputs& in, const Part1Sizes& s) {
  Value state = part1_final_state(w, mode, in, s);
  return mean_squared_error(in.target_state, slice(state, {0, 0}, {s.n_rows, s.n_cols}));
}

// partial(loss_fn, mode=mode, **inputs): a function of w alone (for jit / grad / jvp).
inline auto make_loss(InsertMode mode, Part1Inputs in, Part1Sizes s) {
  return [mode, in = std::move(in), s](Value w) { return loss_fn(w, mode, in, s); };
}

// ---------------------------------------------------------------------------------------
// Part 2: one insert per step into a [n_rows, 2 * n_cols + 1] carry, with custom VJPs.

struct Part2Sizes {
  int64_t n_steps = 1000;
  int64_t n_rows = 100;
  int64_t n_cols = 500;
};

enum class InsertFn { simple_insert, bad_insert, slow_insert, fast_insert };
inline constexpr std::array<InsertFn, 4> kInsertFns = {
    InsertFn::simple_insert, InsertFn::bad_insert, InsertFn::slow_insert, InsertFn::fast_insert};

inline const char* fn_name(InsertFn f) {
  switch (f) {
    case InsertFn::simple_insert: return "simple_insert";
    case InsertFn::bad_insert: return "bad_insert";
    case InsertFn::slow_insert: return "slow_insert";
    case InsertFn::fast_insert: return "fast_insert";
  }
  return "?";
}

struct Part2Inputs {
  Value init_state;    // f32[n_rows, 2 * n_cols + 1], zeros
  Value target_state;  // f32[n_rows, n_cols], uniform
  Value rows;          // i32[n_steps] in [0, n_rows)
  Value cols;          // i32[n_steps] in [0, n_cols)
  Value values;        // f32[n_steps], uniform
};

inline Part2Inputs make_part2_inputs(const Part2Sizes& s, uint64_t seed = 42) {
  SplitMix64 rng(seed);
  Part2Inputs in;
  in.init_state = zeros({s.n_rows, s.n_cols * 2 + 1});
  in.target_state = random_uniform(rng, {s.n_rows, s.n_cols});
  in.rows = random_int(rng, {s.n_steps}, 0, s.n_rows);
  in.cols = random_int(rng, {s.n_steps}, 0, s.n_cols);
  in.values = random_uniform(rng, {s.n_steps});
  return in;
}

inline Value simple_insert(const Value& carry, const Value& row, const Value& col,
                           const Value& value, int64_t n_cols) {
  Value update = concatenate(
      {broadcast_in_dim(value, {1, 1}, {}), dynamic_slice(carry, {row, col}, {1, n_cols})}, 1);
  return dynamic_update_slice(carry, update, {row, col});
}

// The custom_vjp functions take (carry, row, col, value); their fwd saves (row, col).
inline auto bad_insert(int64_t n_cols) {
  return custom_vjp(
      [n_cols](Value carry, Value row, Value col, Value value) {
        return simple_insert(carry, row, col, value, n_cols);
      },
      [n_cols](Value carry, Value row, Value col, Value value) {
        return std::tuple{simple_insert(carry, row, col, value, n_cols), row, col};
      },
      [](Value row, Value col, Value ct_out) {
        return std::tuple{ct_out, std::nullopt, std::nullopt, element(ct_out, row, col)};
      },
      "bad_insert");
}

inline auto slow_insert(int64_t n_cols) {
  return custom_vjp([n_cols](Value carry, Value row, Value col,
                             Value value) { return simple_insert(carry, row, col, value, n_cols); },
                    [n_cols](Value carry, Value row, Value col, Value value) {
                      return std::tuple{simple_insert(carry, row, col, value, n_cols), row, col};
                    },
                    [n_cols](Value row, Value col, Value ct_out) {
                      Value ct_value = copy(element(ct_out, row, col));
                      Value update = dynamic_slice(ct_out, {row, col + 1}, {1, n_cols});
                      ct_out = dynamic_update_slice(ct_out, update, {row, col});
                      ct_out = set_element(ct_out, row, col + n_cols, 0.0f);
                      return std::tuple{ct_out, std::nullopt, std::nullopt, ct_value};
                    },
                    "slow_insert");
}

inline auto fast_insert(int64_t n_cols) {
  return custom_vjp(
      [n_cols](Value carry, Value row, Value col, Value value) {
        return simple_insert(carry, row, col, value, n_cols);
      },
      [n_cols](Value carry, Value row, Value col, Value value) {
        return std::tuple{simple_insert(carry, row, col, value, n_cols), row, col};
      },
      [n_cols](Value row, Value col, Value ct_out) {
        Value last(static_cast<int32_t>(ct_out.shape()[1] - 1));  // ct_out[row, -1]
        ct_out = set_element(ct_out, row, last, element(ct_out, row, col));
        Value update = dynamic_slice(ct_out, {row, col + 1}, {1, n_cols});
        ct_out = dynamic_update_slice(ct_out, update, {row, col});
        ct_out = set_element(ct_out, row, col + n_cols, 0.0f);
        return std::tuple{ct_out, std::nullopt, std::nullopt, element(ct_out, row, last)};
      },
      "fast_insert");
}

inline Value apply_insert(InsertFn fn, const Value& carry, const Value& row, const Value& col,
                          const Value& value, int64_t n_cols) {
  switch (fn) {
    case InsertFn::simple_insert: return simple_insert(carry, row, col, value, n_cols);
    case InsertFn::bad_insert: return bad_insert(n_cols)(carry, row, col, value);
    case InsertFn::slow_insert: return slow_insert(n_cols)(carry, row, col, value);
    case InsertFn::fast_insert: return fast_insert(n_cols)(carry, row, col, value);
  }
  throw std::invalid_argument("apply_insert: unknown function");
}

inline Value part2_final_state(const Value& w, InsertFn fn, const Part2Inputs& in,
                               const Part2Sizes& s) {
  auto [state, ys] = scan(
      [&](const Value& carry, const std::tuple<Value, Value, Value>& x) {
        const auto& [row, col, value] = x;
        return std::pair{apply_insert(fn, carry, row, col, value, s.n_cols), std::tuple{}};
      },
      in.init_state, std::tuple{in.rows, in.cols, pow(in.values, w)});
  return state;
}

// ((target_state - state[:, :N_COLS]) ** 2).mean()
inline Value part2_loss(const Value& w, InsertFn fn, const Part2Inputs& in, const Part2Sizes& s) {
  Value state = part2_final_state(w, fn, in, s);
  return mean_squared_error(in.target_state, slice(state, {0, 0}, {s.n_rows, s.n_cols}));
}

inline auto make_part2_loss(InsertFn fn, Part2Inputs in, Part2Sizes s) {
  return [fn, in = std::move(in), s](Value w) { return part2_loss(w, fn, in, s); };
}

// ---------------------------------------------------------------------------------------
// Part 3: pop an element per step, shifting the rest of the row left.

using Part3Sizes = Part2Sizes;

struct Part3Inputs {
  Value init_state;  // f32[n_rows, 2 * n_cols + 1], uniform
  Value rows;        // i32[n_steps] in [0, n_rows)
  Value cols;        // i32[n_steps] in [0, n_cols)
};

inline Part3Inputs make_part3_inputs(const Part3Sizes& s, uint64_t seed = 42) {
  SplitMix64 rng(seed);
  Part3Inputs in;
  in.init_state = random_uniform(rng, {s.n_rows, s.n_cols * 2 + 1});
  in.rows = random_int(rng, {s.n_steps}, 0, s.n_rows);
  in.cols = random_int(rng, {s.n_steps}, 0, s.n_cols);
  return in;
}

enum class PopFn { slow_pop, fast_pop };

// Reads carry[row, col] first, then shifts.
inline std::pair<Value, Value> slow_pop(const Value& carry_in, const Value& row, const Value& col,
                                        int64_t n_cols) {
  Value value = copy(element(carry_in, row, col));
  Value update = dynamic_slice(carry_in, {row, col + 1}, {1, n_cols});
  Value carry = dynamic_update_slice(carry_in, update, {row, col});
  return {carry, value};
}

// Stashes carry[row, col] in the last column, shifts, and reads it back from the new carry.
inline std::pair<Value, Value> fast_pop(const Value& carry_in, const Value& row, const Value& col,
                                        int64_t n_cols) {
  Value last(static_cast<int32_t>(carry_in.shape()[1] - 1));
  Value carry = set_element(carry_in, row, last, element(carry_in, row, col));
  Value update = dynamic_slice(carry, {row, col + 1}, {1, n_cols});
  carry = dynamic_update_slice(carry, update, {row, col});
  return {carry, element(carry, row, last)};
}

// lax.scan(fn, init_state, (rows, cols)) -> (state, popped values).
inline std::pair<Value, Value> pop_scan(PopFn fn, const Value& init_state, const Value& rows,
                                        const Value& cols, int64_t n_cols) {
  return scan(
      [&](const Value& carry, const std::tuple<Value, Value>& x) {
        const auto& [row, col] = x;
        return fn == PopFn::slow_pop ? slow_pop(carry, row, col, n_cols)
                                     : fast_pop(carry, row, col, n_cols);
      },
      init_state, std::tuple{rows, cols});
}

}  // namespace refjit::seeds
