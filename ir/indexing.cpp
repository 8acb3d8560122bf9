#include "refjit/ir/indexing.h"

#include <fmt/format.h>

#include <algorithm>

#include "refjit/ir/error.h"

namespace refjit {

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t k = 0; k < rank; ++k) {
    // k counts from the trailing end.
    int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1)
      throw TypeError(fmt::format("index arrays of shapes [{}] and [{}] do not broadcast together",
                                  shape_text(a), shape_text(b)));
    out[rank - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

namespace {

void check_dynamic_scalar(const Type& t, size_t dim, std::string_view what) {
  if (t.is_ref || !is_int(t.dtype()) || !t.array.is_scalar())
    throw TypeError(fmt::format(
        "the dynamic {} of indexer dim {} has type {}; it must be an integer scalar (i32[] or "
        "i64[])",
        what, dim, t.str()));
}

}  // namespace

IndexedLayout indexed_layout(const ArrayType& ref_inner, const Indexer& idx,
                             std::span<const Type> dynamic_operand_types) {
  if (idx.dims.size() > ref_inner.shape.size())
    throw TypeError(fmt::format("the indexer has {} dims but the ref holds {} of rank {}",
                                idx.dims.size(), ref_inner.str(), ref_inner.rank()));
  size_t num_dynamic = static_cast<size_t>(idx.num_dynamic());
  if (dynamic_operand_types.size() != num_dynamic)
    throw TypeError(fmt::format("the indexer has {} dynamic parts but {} index operands were given",
                                num_dynamic, dynamic_operand_types.size()));

  IndexedLayout layout;
  // Index arrays: where the first and last stand in the indexer, and how many there are.
  int first_array = -1;
  int last_array = -1;
  int num_arrays = 0;
  int slices_before_first = 0;  // output dims produced before the first index array
  size_t next_operand = 0;
  for (size_t k = 0; k < idx.dims.size(); ++k) {
    const IndexerDim& d = idx.dims[k];
    int64_t dim = ref_inner.shape[k];
    switch (d.kind) {
      case IndexerDim::Kind::slice: {
        if (d.size < 0 || d.stride < 1)
          throw TypeError(fmt::format(
              "indexer dim {}: a slice needs size >= 0 and stride >= 1, got size {} stride {}", k,
              d.size, d.stride));
        int64_t extent = d.size == 0 ? 0 : (d.size - 1) * d.stride + 1;
        if (d.dynamic) {
          check_dynamic_scalar(dynamic_operand_types[next_operand++], k, "slice start");
          if (extent > dim)
            throw RefError("E12", fmt::format("Out-of-bounds slice: indexer dim {} takes {} "
                                              "elements but the ref ({}) has only {} there",
                                              k, extent, ref_inner.str(), dim));
        } else if (d.start < 0 || d.start + extent > dim) {
          throw RefError("E12", fmt::format("Out-of-bounds slice: indexer dim {} covers [{}, {}) "
                                            "but the ref ({}) has size {} there",
                                            k, d.start, d.start + extent, ref_inner.str(), dim));
        }
        layout.shape.push_back(d.size);
        if (first_array < 0) ++slices_before_first;
        break;
      }
      case IndexerDim::Kind::index: {
        if (d.dynamic) {
          check_dynamic_scalar(dynamic_operand_types[next_operand++], k, "index");
          if (dim == 0)
            throw RefError("E12", fmt::format("Out-of-bounds index: indexer dim {} indexes a dim "
                                              "of size 0 of the ref ({})",
                                              k, ref_inner.str()));
        } else if (d.start < 0 || d.start >= dim) {
          throw RefError("E12", fmt::format("Out-of-bounds index: index {} at indexer dim {} is "
                                            "outside [0, {}) for the ref ({})",
                                            d.start, k, dim, ref_inner.str()));
        }
        break;
      }
      case IndexerDim::Kind::index_array: {
        if (!d.dynamic)
          throw TypeError(
              fmt::format("indexer dim {} is an index array but is not marked "
                          "dynamic; index arrays are always operands",
                          k));
        const Type& t = dynamic_operand_types[next_operand++];
        if (t.is_ref || !is_int(t.dtype()))
          throw TypeError(
              fmt::format("the index array of indexer dim {} has type {}; it must be "
                          "an integer array",
                          k, t.str()));
        if (dim == 0 && t.array.num_elements() > 0)
          throw RefError("E12", fmt::format("Out-of-bounds index: indexer dim {} indexes a dim "
                                            "of size 0 of the ref ({})",
                                            k, ref_inner.str()));
        layout.array_shape = broadcast_shapes(layout.array_shape, t.shape());
        if (first_array < 0) first_array = static_cast<int>(k);
        last_array = static_cast<int>(k);
        ++num_arrays;
        break;
      }
    }
  }
  for (size_t k = idx.dims.size(); k < ref_inner.shape.size(); ++k)
    layout.shape.push_back(ref_inner.shape[k]);
  if (num_arrays > 0) {
    bool adjacent = last_array - first_array + 1 == num_arrays;
    layout.array_position = adjacent ? slices_before_first : 0;
    layout.shape.insert(layout.shape.begin() + layout.array_position, layout.array_shape.begin(),
                        layout.array_shape.end());
  }
  return layout;
}

Shape indexed_shape(const ArrayType& ref_inner, const Indexer& idx,
                    std::span<const Type> dynamic_operand_types) {
  return indexed_layout(ref_inner, idx, dynamic_operand_types).shape;
}

}  // namespace refjit
