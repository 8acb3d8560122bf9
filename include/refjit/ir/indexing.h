// The shape a ref indexer selects (docs/primitives.md "Refs"), shared by the type rules, the
// interpreter, the tracer and the printer.
#pragma once

#include <span>

#include "refjit/ir/params.h"
#include "refjit/ir/type.h"

namespace refjit {

// Where an indexer's selection lands in the indexed value.
struct IndexedLayout {
  Shape shape;  // the indexed shape v
  // The shapes of the index arrays broadcast together (NumPy) to `array_shape`, which sits in
  // `shape` starting at dim `array_position`: where the first index array stands if all index
  // arrays are adjacent in the indexer, else at the front. -1 when there is no index array.
  // Unlike NumPy, a scalar integer index between index arrays does not count as one
  // (docs/primitives.md "Refs"): it just drops its dim.
  Shape array_shape;
  int array_position = -1;
};

// `dynamic_operand_types` are the types of the eqn's dynamic indexer operands, one per
// dynamic IndexerDim in dim order. Throws RefError "E12" for static out-of-range indexers and
// TypeError for malformed indexers (too many dims, wrong operand count or types).
IndexedLayout indexed_layout(const ArrayType& ref_inner, const Indexer& idx,
                             std::span<const Type> dynamic_operand_types);

// indexed_layout(...).shape.
Shape indexed_shape(const ArrayType& ref_inner, const Indexer& idx,
                    std::span<const Type> dynamic_operand_types);

// NumPy broadcasting of shapes (trailing dims aligned, a 1 stretches). Throws
// TypeError naming both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace refjit
