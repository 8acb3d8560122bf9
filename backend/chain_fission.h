// Loop fission for chains of transcendental functions. An element loop computing, say,
// tanh(2 exp(-x^2) + log1p(x^2)) per element runs each function's polynomial after the other's:
// one iteration is a long chain of dependent instructions (a few hundred cycles of latency for
// eight lanes), and the CPU's reorder window holds only one or two iterations of that much
// code, so the loop runs at the chain's latency, not at the core's throughput: on a Zen 3
// core the fused loop took 3.1 ns per element where the three functions in loops of their own
// took 1.8 ns together, memory traffic included.
//
// split_transcendental_chains cuts such a loop into tiles of kChainTile iterations and each
// tile into one loop per stage of the chain: the first stage computes the chain's first
// functions for the whole tile into small stack buffers (L1-resident), the next reads them
// back. Each stage's loop has a short chain and several iterations in flight. The values are
// the same, computed by the same operations; only a reduction the loop carries (a sum over
// the elements) is added in tiles, which changes how LLVM's vectorised sum groups its terms.
//
// A loop qualifies when it is innermost (no op in it has a region), has step 1, holds only
// loads, stores and side-effect-free ops, and its deepest chain of transcendental functions
// (math exp, log, log1p, tanh, erf, ... before their polynomial expansion, and the marked
// ones below) is two or more long. The first stage may not read the loop's carried values nor load
// from a memref the loop stores into (its loads move ahead of the stage's stores). "A memref" is an
// SSA value: two views of one buffer are not told apart, which is sound because no lowering makes
// an element loop read what another of its iterations writes (a recurrence carries its value or
// reads through the stored memref itself, and is left whole). Run after the outlining of
// parallel loops (parallel_loops.h), so the buffers are allocated in the function that runs
// the loop, on each thread's own stack.
#pragma once

#include <cstdint>

namespace mlir {
class ModuleOp;
class Operation;
}  // namespace mlir

namespace refjit::backend {

// Iterations per tile: a few buffers of this many elements stay in the L1 cache.
inline constexpr int64_t kChainTile = 256;

// Splits every qualifying loop of `module`.
void split_transcendental_chains(mlir::ModuleOp module);

// A transcendental function the lowering expands into plain arithmetic itself (refjit's f32
// sin and cos) is a stage too: its last operation carries a mark, which counts it as the math
// dialect's functions count. clear_transcendental_marks removes the marks (the lowering calls
// it whether or not it splits, so no printed MLIR shows them).
void mark_transcendental(mlir::Operation* op);
void clear_transcendental_marks(mlir::ModuleOp module);

}  // namespace refjit::backend
