// Eqn parameters: static attributes of a primitive application, possibly sub-jaxprs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "refjit/ir/dtype.h"
#include "refjit/ir/type.h"

namespace refjit {

struct Jaxpr;
using JaxprPtr = std::shared_ptr<const Jaxpr>;

// How a ref op (get/swap/addupdate) addresses its ref, one entry per leading dim of the
// ref; dims past the last entry are taken whole. No entries means the whole ref: `r[...]`.
// Dynamic parts (slice starts, integer indices, index arrays) are extra eqn operands, in
// dim order, after the ref (get) or after the ref and the value (swap, addupdate).
struct IndexerDim {
  enum class Kind : uint8_t {
    slice,        // start:start+size:stride, dim kept; start static or dynamic
    index,        // a single integer index, dim dropped; static or dynamic
    index_array,  // an integer array operand (NumPy advanced indexing)
  };
  Kind kind = Kind::slice;
  int64_t start = 0;     // static start (slice) or static index (index)
  int64_t size = 0;      // slice: number of elements taken
  int64_t stride = 1;    // slice: static stride (only for static starts)
  bool dynamic = false;  // start/index comes from an operand (always true for index_array)

  bool operator==(const IndexerDim&) const = default;
};

struct Indexer {
  std::vector<IndexerDim> dims;

  bool is_whole() const { return dims.empty(); }
  int num_dynamic() const {
    int n = 0;
    for (const auto& d : dims) n += d.dynamic ? 1 : 0;
    return n;
  }
  bool operator==(const Indexer&) const = default;
};

// dot_general's dimension_numbers: (([lhs_contract], [rhs_contract]), ([lhs_batch], [rhs_batch])).
struct DotDims {
  std::vector<int64_t> lhs_contract, rhs_contract, lhs_batch, rhs_batch;
  bool operator==(const DotDims&) const = default;
};

// The dims of a rank-`rank` operand that are neither in `contract` nor in `batch`, in order.
std::vector<int64_t> free_dims(int64_t rank, const std::vector<int64_t>& contract,
                               const std::vector<int64_t>& batch);

// Python's None.
struct NoneParam {
  bool operator==(const NoneParam&) const = default;
};

using IntList = std::vector<int64_t>;
using IntListList = std::vector<std::vector<int64_t>>;  // pad's padding_config
using JaxprList = std::vector<JaxprPtr>;                // cond's branches

using ParamValue = std::variant<NoneParam, bool, int64_t, double, std::string, DType, IntList,
                                IntListList, DotDims, Indexer, JaxprPtr, JaxprList>;

// Parameters of one eqn, kept sorted by name (the order JAX prints them in).
class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<std::string, ParamValue>> init);

  void set(std::string name, ParamValue value);
  bool has(std::string_view name) const;
  const ParamValue* find(std::string_view name) const;
  void erase(std::string_view name);

  // Typed access; throws refjit::Error naming the param when missing or of another kind.
  template <class T>
  const T& get(std::string_view name) const;
  template <class T>
  T get_or(std::string_view name, T fallback) const {
    const ParamValue* v = find(name);
    if (!v) return fallback;
    if (const T* t = std::get_if<T>(v)) return *t;
    return fallback;
  }

  const std::vector<std::pair<std::string, ParamValue>>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

 private:
  [[noreturn]] static void throw_bad(std::string_view name, bool missing);
  std::vector<std::pair<std::string, ParamValue>> entries_;
};

template <class T>
const T& Params::get(std::string_view name) const {
  const ParamValue* v = find(name);
  if (!v) throw_bad(name, true);
  const T* t = std::get_if<T>(v);
  if (!t) throw_bad(name, false);
  return *t;
}

// new_ref's `kind` param: absent or "None" is the plain kind. Throws TypeError naming an
// unknown kind.
RefKind ref_kind_param(const Params& params);

}  // namespace refjit
