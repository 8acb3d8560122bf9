// Differential checks over random programs (docs/testing.md "Random programs"): text round
// trip, interpreter, interpreter vs native backend, JVP vs finite differences, and the
// transpose identity. Used by `randgen_tests randtest` (scripts/randtest.sh) and the gtests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace refjit::randgen {

struct CheckOptions {
  bool native = true;  // interpreter == compile_native
  int native_opt_level = 1;
  bool autodiff = true;  // JVP vs finite differences, transpose identity (f64 programs)
};

// One disagreement: which check, on which program, and what differed.
struct Mismatch {
  uint64_t seed = 0;
  std::string check;    // "roundtrip/f32", "native/f64", "jvp/f64", "transpose/f64-nocontrol"...
  std::string program;  // the jaxpr text
  std::string detail;
};

struct Tally {
  int programs = 0;
  std::map<std::string, int> ran;      // per check: programs it ran on
  std::map<std::string, int> skipped;  // per check: programs a layer declined (refjit::Error)
  std::map<std::string, std::string> first_skip_reason;
  std::vector<Mismatch> mismatches;
  // Per decision primitive (docs/primitives.md "Decisions"): how many decided programs hold
  // one, so a run shows which decisions its `decided` checks covered.
  std::map<std::string, int> decided_with;
  // The same for the transposed programs of the `transpose` check (a transpose rule's own
  // decisions: shift_add, get_flat_run, swap_flat_run).
  std::map<std::string, int> transposed_with;
};

// Tolerances, relative with the same absolute floor: |got - want| <= tol * (1 + |want|).
inline constexpr double kNativeTolF32 = 1e-5;  // transcendentals in libm vs the interpreter
inline constexpr double kNativeTolF64 = 1e-9;
inline constexpr double kJvpTol = 1e-5;        // central differences in f64, step 1e-6
inline constexpr double kTransposeTol = 1e-9;  // <ct, J t> = <J^T ct, t> in f64

// Generates the programs of `seed` (f32; f64; f64 without scan/cond) and runs every enabled
// check on them: autodiff on the f64 ones, native on the first two.
void check_seed(uint64_t seed, const CheckOptions& options, Tally& tally);

}  // namespace refjit::randgen
