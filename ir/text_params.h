// Internal: what the jaxpr text format knows about each primitive's params (docs/ir.md):
// which params a primitive takes and the kind of value each holds, and which params JAX
// prints that refjit accepts and drops. Shared by the printer and the parser so that
// print(parse(s)) == s.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "refjit/ir/primitive.h"

namespace refjit::text {

// The kind of value a param holds in text (and in Params).
enum class ParamKind : uint8_t {
  integer,        // int64_t: 3
  boolean,        // bool: True
  ints,           // IntList: (1, 2)
  ints_or_none,   // IntList or NoneParam
  bools_or_none,  // IntList of 0/1 printed (False, True), or NoneParam (scan's linear)
  int_lists,      // IntListList: ((0, 0, 0), (1, 2, 0))
  dtype,          // DType, long name: int32
  dtype_or_none,  // DType or NoneParam
  name,           // std::string, one word: take, <lambda>
  word_or_none,   // std::string or NoneParam (a gather's mode)
  precision,      // std::string or NoneParam: DEFAULT, Precision.HIGHEST, or a pair of them,
                  // (Precision.HIGH, Precision.DEFAULT), kept as written
  dot_dims,       // DotDims: (([1], [0]), ([], []))
  jaxpr,          // JaxprPtr
  jaxprs,         // JaxprList
  indexer,        // Indexer (ref primitives; written in brackets, never as a param)
  // Read only by JAX rewrites (import/jax/rewrites.h):
  number_or_none,  // double or NoneParam: a gather's fill_value
  gather_dims,     // IntListList, GatherDimensionNumbers(...)'s fields in kGatherDimsFields order
  scatter_dims,    // IntListList, ScatterDimensionNumbers(...)'s fields in kScatterDimsFields order
  conv_dims,       // IntListList, ConvDimensionNumbers(...)'s fields in kConvDimsFields order
  raw_text,        // std::string: any value, as written (remat2's policy)
  linear_solve_jaxprs,  // JaxprList, _LinearSolveTuple(matvec=..., ...)'s fields in
                        // kLinearSolveFields order; nullptr for a field printed None
  linear_solve_counts,  // IntList, _LinearSolveTuple(matvec=1, ...) in kLinearSolveFields order
};

inline constexpr std::string_view kGatherDimsFields[] = {"offset_dims", "collapsed_slice_dims",
                                                         "start_index_map", "operand_batching_dims",
                                                         "start_indices_batching_dims"};
inline constexpr std::string_view kScatterDimsFields[] = {
    "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
    "operand_batching_dims", "scatter_indices_batching_dims"};

// custom_linear_solve's params `jaxprs` and `const_lengths`.
inline constexpr std::string_view kLinearSolveFields[] = {"matvec", "vecmat", "solve",
                                                          "transpose_solve"};

inline constexpr std::string_view kConvDimsFields[] = {"lhs_spec", "rhs_spec", "out_spec"};

struct ParamSpec {
  std::string_view name;
  ParamKind kind;
};

// The params `p` takes; empty for primitives without params.
const std::vector<ParamSpec>& param_specs(Prim p);
// The spec of param `name` of `p`, or nullptr when `p` has no such param.
const ParamSpec* find_param_spec(Prim p, std::string_view name);

// Params JAX prints that refjit does not use (sharding, jit's donated_invars, new_ref's
// kind, ...): the parser accepts and drops them, the printer never prints them.
bool is_ignored_param(Prim p, std::string_view name);

}  // namespace refjit::text
