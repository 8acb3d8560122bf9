#include "runtime/ref_indexing.h"

#include <fmt/format.h>

#include "refjit/ir/error.h"
#include "refjit/ir/indexing.h"
#include "runtime/flat_index.h"

namespace refjit {

namespace {

// How one ref dim is addressed.
struct DimAccess {
  enum class Kind { fixed, positions, array } kind = Kind::positions;
  int64_t fixed = 0;               // fixed: the single position
  std::vector<int64_t> positions;  // positions: the positions taken, in order (a slice)
  const Array* array = nullptr;    // array: the index array
};

}  // namespace

IndexedRegion resolve_indexer(const Shape& ref_shape, const Indexer& indexer,
                              std::span<const Array> dynamic, std::string_view where) {
  // The indexed shape, and where the index-array dims land in it, come from the function the
  // type rules use, so the interpreter and the static types cannot disagree. It also rejects
  // static out-of-range indexers (RefError E12) and malformed indexers (TypeError).
  std::vector<Type> dynamic_types;
  for (const Array& a : dynamic) dynamic_types.push_back(a.type());
  IndexedLayout layout;
  try {
    layout = indexed_layout(ArrayType{DType::f32, ref_shape}, indexer, dynamic_types);
  } catch (const RefError& e) {
    throw RefError(e.code(), fmt::format("{}: {}", where, e.what()));
  } catch (const TypeError& e) {
    throw TypeError(fmt::format("{}: {}", where, e.what()));
  }

  const int rank = static_cast<int>(ref_shape.size());
  std::vector<DimAccess> access(rank);
  size_t next_dynamic = 0;
  for (int d = 0; d < rank; ++d) {
    const int64_t n = ref_shape[d];
    DimAccess& acc = access[d];
    if (d >= static_cast<int>(indexer.dims.size())) {
      for (int64_t k = 0; k < n; ++k) acc.positions.push_back(k);
      continue;
    }
    const IndexerDim& id = indexer.dims[d];
    switch (id.kind) {
      case IndexerDim::Kind::slice: {
        const int64_t extent = id.size == 0 ? 0 : (id.size - 1) * id.stride + 1;
        int64_t start = id.start;
        if (id.dynamic) start = clamp_index(dynamic[next_dynamic++].as_int(0), 0, n - extent);
        for (int64_t k = 0; k < id.size; ++k) acc.positions.push_back(start + k * id.stride);
        break;
      }
      case IndexerDim::Kind::index:
        acc.kind = DimAccess::Kind::fixed;
        acc.fixed =
            id.dynamic ? clamp_index(dynamic[next_dynamic++].as_int(0), 0, n - 1) : id.start;
        break;
      case IndexerDim::Kind::index_array:
        acc.kind = DimAccess::Kind::array;
        acc.array = &dynamic[next_dynamic++];
        break;
    }
  }

  // Output dim k maps to: broadcast dim (k - array_position) inside the index-array block,
  // else the next ref dim addressed by positions.
  const Shape& bshape = layout.array_shape;
  const int bfirst = layout.array_position;
  const int blast = bfirst < 0 ? -1 : bfirst + static_cast<int>(bshape.size());
  std::vector<int> out_pos_of_dim(rank, -1);
  int k = 0;
  for (int d = 0; d < rank; ++d) {
    if (access[d].kind != DimAccess::Kind::positions) continue;
    if (k == bfirst) k = blast;
    out_pos_of_dim[d] = k++;
  }

  IndexedRegion r;
  r.shape = layout.shape;
  const std::vector<int64_t> strides = row_major_strides(ref_shape);
  r.offsets.reserve(static_cast<size_t>(num_elements(r.shape)));
  for_each_index(r.shape, [&](const std::vector<int64_t>& o) {
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) {
      const DimAccess& acc = access[d];
      int64_t p = 0;
      switch (acc.kind) {
        case DimAccess::Kind::fixed: p = acc.fixed; break;
        case DimAccess::Kind::positions: p = acc.positions[o[out_pos_of_dim[d]]]; break;
        case DimAccess::Kind::array: {
          // The array's element at the broadcast index (trailing dims aligned, 1 stretches).
          const Array& a = *acc.array;
          const int lead = static_cast<int>(bshape.size()) - a.rank();
          int64_t flat = 0, stride = 1;
          for (int j = a.rank() - 1; j >= 0; --j) {
            if (a.shape()[j] != 1) flat += o[bfirst + lead + j] * stride;
            stride *= a.shape()[j];
          }
          p = clamp_index(a.as_int(flat), 0, ref_shape[d] - 1);
          break;
        }
      }
      off += p * strides[d];
    }
    r.offsets.push_back(off);
  });
  return r;
}

}  // namespace refjit
