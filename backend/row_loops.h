// Row loops: consecutive fused groups and reductions that each compute row i of their result
// from row i of the others' results run as ONE loop over the rows, every item computing its
// row in turn, instead of one pass over memory per item. MLIR-free.
//
// A layer norm reads each row three times (its mean, its variance, the normalised row); a
// softmax twice or three times. Separately, each of those passes streams the whole operand
// from memory; in one row loop, a row is read from memory once and then from the cache. This
// is XLA's loop fusion across reductions, restricted to what stays row-local.
//
// An item is a `fused` eqn (fusion.h) or an eqn lowered on its own that is elementwise or a
// reduction, with R = the first dim of its result (of the operand, for a full reduction; a
// fused eqn's body root decides which):
//  - a result of rank >= 1 whose first dim is R, computed element by element; or
//  - a reduction of every dim but the first (a row's sum, max or min), result [R]; or
//  - a full reduction: each row's partial result is stored, and the partials are combined in
//    row order after the loop (so the bits depend only on the shape); or
//  - a reduction over dim 0 alone (column sums, a bias's gradient): the rows of a block are
//    folded into the block's partial result, and the partials combined in block order after
//    the loop (RowLoop::block_rows); or
//  - a float matrix-vector product [R, K] . [K]: row i's dot product, in registers.
// Items with a view (slice or pad) are not taken. Between the first item and the last, every
// eqn is an item of the loop or one of its passengers (below).
// An item reads a value another item of the loop computes only at the row it computes
// (elementwise at the same index, or a broadcast mapping dim 0 to dim 0), never the result of
// a reduction finished after the loop. Buffers: a buffer an item writes is read by the loop's items
// only at the row being computed, as rows of the same byte size (in place is fine, another row is
// not). An eqn between two items that the loop cannot take but that reads nothing the loop computes
// and writes no buffer its items read or write (a broadcast of a bias to [1, n]) runs before
// the loop, as its passenger, instead of splitting it. So does a view (a reshape) of a result
// the loop computes that keeps its rows ([R] as [R, 1]): it only names the same bytes.
// A loop has two or more items that share data (one reads another's result, or two read one
// operand row by row), and rows of at most kMaxRowElements elements, so a row stays in cache.
// Reading a matrix-vector product's result does not count as sharing (a product alone runs
// faster as a kernel call); reading its matrix does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "passes/buffers/buffer_assignment.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// How a row-loop item uses row i.
enum class RowItemKind {
  rows,     // computes row i of its result
  partial,  // a full reduction: row i's partial result, combined after the loop
  columns,  // a reduction over dim 0 (column sums): row i folded into its block's partial
  matvec,   // dot_general [R, K] . [K]: row i's dot product
};

struct RowItem {
  RowItemKind kind = RowItemKind::rows;
  size_t eqn = 0;  // a fused eqn, or an elementwise eqn, a reduction or a product alone
};

// Whether an item of this kind finishes its result after the loop, from partials made in it.
inline bool finished_after_loop(RowItemKind kind) {
  return kind == RowItemKind::partial || kind == RowItemKind::columns;
}

// Whether `p` is a reduction a row loop may take (sum, max, min).
inline bool is_row_reduction(Prim p) {
  return p == Prim::reduce_sum || p == Prim::reduce_max || p == Prim::reduce_min;
}

struct RowLoop {
  int64_t rows = 0;
  // Rows per block: the loop runs over blocks (on the threads), each over its rows in order.
  // Column sums keep a partial per block, combined in block order after the loop; the blocks
  // depend only on the shape, so the bits do not depend on the thread count. 1 without them.
  int64_t block_rows = 1;
  std::vector<RowItem> items;  // in program order of the roots
  // Eqns between the items lowered by their own rules before the loop, in program order.
  std::vector<size_t> passengers;
  int64_t blocks() const { return (rows + block_rows - 1) / block_rows; }
};

struct RowLoopPlan {
  std::vector<RowLoop> loops;  // in program order
};

// The largest row (elements of an item's result or operand per row) a loop takes.
constexpr int64_t kMaxRowElements = int64_t{1} << 15;
// Blocks a loop with column sums is cut into (fewer when there are fewer rows).
constexpr int64_t kRowBlocks = 32;

// The row loops of the top-level eqns of `jaxpr` under `buffers` (none without a buffer plan).
RowLoopPlan plan_row_loops(const Jaxpr& jaxpr, const JaxprBuffers* buffers);

// Whether `e` is a view a loop may take as a passenger of a row result it computes ([R] as
// [R, 1]): a reshape, squeeze or expand_dims.
bool is_row_view(const Eqn& e);

// As IR: the pipeline's `row-loops` pass writes each loop plan_row_loops finds, in `program`
// and in every jaxpr it holds, as one `row_loop` eqn (primitives.def) whose body holds its
// items and the views of row results they read, in program order, at its first item's
// position; the other passengers run before it, and a view of a row result read after the loop
// is made again there. Its results are the items' values read after it. Planned under
// `assignment`, a buffer assignment of `program` (nullptr: none, and no loop is made); the
// program is assigned buffers again afterwards, the row_loop's results buffers of their own.
Jaxpr make_row_loops(const Jaxpr& program, const BufferAssignment* assignment);
// The same with an assignment made with `options` first (what the pipeline runs).
Jaxpr make_row_loops(const Jaxpr& program, const BufferOptions& options);

// The loop a row_loop eqn's body describes: its items (every body eqn but the row views, which
// are its passengers), their kinds, its rows and blocks. Throws Error naming an eqn that is no
// item of a loop over the others' rows.
RowLoop row_loop_of_body(const Jaxpr& body);

}  // namespace refjit
