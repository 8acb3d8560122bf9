// Internal to the JAX rewrites (import/jax/*.cpp): argument checks and the small
// emitters every rewrite uses.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "import/jax/rewrites.h"
#include "refjit/ir/error.h"

namespace refjit::text {

// Short for the param kinds the rewrite tables list.
using K = ParamKind;

[[noreturn]] inline void fail(std::string_view prim, const std::string& message) {
  throw TypeError(fmt::format("{}: {}", prim, message));
}

inline void expect_operands(const RewriteArgs& a, std::string_view prim, size_t n) {
  if (a.ins.size() != n)
    fail(prim, fmt::format("expects {} operand(s), found {}", n, a.ins.size()));
}

inline ArrayType array_of(const RewriteArgs& a, std::string_view prim, size_t k) {
  Type t = a.b.type_of(a.ins.at(k));
  if (t.is_ref) fail(prim, fmt::format("operand {} is a ref; expected an array", k));
  return t.array;
}

inline const ParamValue kNone = NoneParam{};

inline IntList iota_list(int64_t n, int64_t from = 0) {
  IntList v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// ---- small emitters ---------------------------------------------------------------------

struct Emit {
  JaxprBuilder& b;

  ArrayType type(const Atom& x) const { return b.type_of(x).array; }
  Atom op(Prim p, std::vector<Atom> ins, Params params = {}) {
    return b.add_eqn1(p, std::move(ins), std::move(params));
  }
  Atom reshape(const Atom& x, const Shape& to) {
    if (type(x).shape == to) return x;
    return op(Prim::reshape, {x},
              Params{{"dimensions", NoneParam{}}, {"new_sizes", IntList(to.begin(), to.end())}});
  }
  Atom transpose(const Atom& x, const IntList& perm) {
    if (perm == iota_list(static_cast<int64_t>(perm.size()))) return x;
    return op(Prim::transpose, {x}, Params{{"permutation", perm}});
  }
  Atom broadcast(const Atom& x, const Shape& shape, const IntList& dims) {
    if (type(x).shape == shape) return x;
    return op(
        Prim::broadcast_in_dim, {x},
        Params{{"broadcast_dimensions", dims}, {"shape", IntList(shape.begin(), shape.end())}});
  }
  Atom slice(const Atom& x, const IntList& start, const IntList& limit) {
    return op(Prim::slice, {x},
              Params{{"limit_indices", limit}, {"start_indices", start}, {"strides", NoneParam{}}});
  }
  Atom scalar(DType d, double v) const { return Literal::of(d, v); }
};

inline bool contains(const IntList& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The operand with the indexed dims moved to the front and flattened into one; returns the
// permutation used.
inline IntList front_permutation(const ArrayType& x, const IntList& dims) {
  IntList perm = dims;
  for (int64_t k = 0; k < x.rank(); ++k)
    if (!contains(dims, k)) perm.push_back(k);
  return perm;
}

// The params of a scan of `body` over `length` steps with no consts and `num_carry` carries
// (the rewrites that fold or map with a scan).
inline Params scan_params(JaxprPtr body, int64_t length, int64_t num_carry, bool reverse) {
  return Params{{"jaxpr", std::move(body)}, {"length", length},         {"reverse", reverse},
                {"num_consts", int64_t{0}}, {"num_carry", num_carry},   {"linear", NoneParam{}},
                {"unroll", int64_t{1}},     {"_split_transpose", false}};
}

// JAX's threefry draws on keys u32[batch..., 2] (prng.cpp): random_bits of
// `width` bits and `shape` per key, and `shape` new keys per key.
Atom prng_random_bits(Emit& e, const Atom& key, int64_t width, const IntList& shape);
Atom prng_split(Emit& e, const Atom& key, const IntList& shape);

// Each family of rewrites adds its entries to the table (rewrites.cpp builds it).
void add_gather_scatter_rewrites(std::vector<JaxRewrite>& table);
void add_fold_rewrites(std::vector<JaxRewrite>& table);
void add_prng_rewrites(std::vector<JaxRewrite>& table);
void add_conv_rewrites(std::vector<JaxRewrite>& table);
void add_collective_rewrites(std::vector<JaxRewrite>& table);
void add_shard_map_rewrites(std::vector<JaxRewrite>& table);
void add_gamma_rewrites(std::vector<JaxRewrite>& table);
void add_linalg_rewrites(std::vector<JaxRewrite>& table);

}  // namespace refjit::text
