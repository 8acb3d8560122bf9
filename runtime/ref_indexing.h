// The one place that turns a ref Indexer (params.h) plus its dynamic operands into the set of
// ref elements it addresses. get, swap and addupdate all use it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "refjit/array.h"
#include "refjit/ir/params.h"

namespace refjit {

// The elements an indexer addresses: the indexed shape v, and for every element of v (in
// row-major order) its flat offset in the ref. Index arrays may repeat offsets.
struct IndexedRegion {
  Shape shape;
  std::vector<int64_t> offsets;
};

// Resolves `indexer` on a ref of `ref_shape`. `dynamic` holds one array per dynamic
// IndexerDim, in dim order: an integer scalar for a slice start or an index, an integer array
// for an index array. Dynamic slice starts clamp into [0, dim - extent], dynamic indices and
// index array entries into [0, dim - 1] (XLA). A static indexer out of range throws RefError
// E12; a malformed indexer (too many dims, wrong dynamic operand count or dtypes) throws
// TypeError; `where` names the eqn in the message.
//
// The indexed shape is refjit::indexed_layout's (include/refjit/ir/indexing.h, shared with the
// type rules): a slice keeps its dim (its size), an index drops it, index arrays broadcast
// together (NumPy) and their dims go where the first index array stands if all index arrays
// are adjacent in the indexer, else first; trailing ref dims are taken whole.
IndexedRegion resolve_indexer(const Shape& ref_shape, const Indexer& indexer,
                              std::span<const Array> dynamic, std::string_view where);

}  // namespace refjit
