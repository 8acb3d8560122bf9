// JAX's PRNG primitives, read as threefry2x32 on u32[..., 2] key words (rewrites.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "import/jax/rewrite_support.h"

namespace refjit::text {

namespace {

// ---- PRNG: threefry keys as u32[..., 2] -------------------------------------------------
//
// The parser reads a `key<fry>[s]` binder as u32[s..., 2], the key's two words. The random_*
// primitives then become threefry2x32 hashes written with integer primitives (add, xor,
// shifts), computing JAX's bits exactly (its default "partitionable" threefry). A batch of
// keys (key<fry>[4], from `vmap` over split keys) hashes each key's counters on its own, as
// JAX's batching rules do: the batch dimensions come first in every result.

Atom u32(Emit& e, uint32_t v) { return Literal::of_int(DType::u32, v); }

Atom rotate_left(Emit& e, const Atom& x, uint32_t r) {
  return e.op(Prim::or_, {e.op(Prim::shift_left, {x, u32(e, r)}),
                          e.op(Prim::shift_right_logical, {x, u32(e, 32 - r)})});
}

// The Threefry-2x32 hash (20 rounds) of the counter pairs (x1, x2) under key (k1, k2), as JAX's
// threefry2x32 primitive computes it. All four have one shape (or are scalars).
std::pair<Atom, Atom> threefry2x32(Emit& e, Atom k1, Atom k2, Atom x1, Atom x2) {
  const uint32_t rotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  Atom ks[3] = {k1, k2, e.op(Prim::xor_, {e.op(Prim::xor_, {k1, k2}), u32(e, 0x1BD11BDA)})};
  Atom x[2] = {e.op(Prim::add, {x1, ks[0]}), e.op(Prim::add, {x2, ks[1]})};
  for (int block = 0; block < 5; ++block) {
    for (uint32_t r : rotations[block % 2]) {
      x[0] = e.op(Prim::add, {x[0], x[1]});
      x[1] = e.op(Prim::xor_, {x[0], rotate_left(e, x[1], r)});
    }
    x[0] = e.op(Prim::add, {x[0], ks[(block + 1) % 3]});
    x[1] = e.op(Prim::add, {e.op(Prim::add, {x[1], ks[(block + 2) % 3]}),
                            u32(e, static_cast<uint32_t>(block + 1))});
  }
  return {x[0], x[1]};
}

// The batch shape of key operand `k`: its type without the trailing word dimension.
Shape key_batch_shape(const RewriteArgs& a, std::string_view prim, size_t k) {
  ArrayType t = array_of(a, prim, k);
  if (t.dtype != DType::u32 || t.shape.empty() || t.shape.back() != 2)
    fail(prim, fmt::format("operand {} has type {}; expected threefry keys (key<fry>[...] or "
                           "u32[..., 2])",
                           k, t.str()));
  return Shape(t.shape.begin(), t.shape.end() - 1);
}

// Word w of every key in `key` (u32[B..., 2]): u32[B...].
Atom key_word(Emit& e, const Atom& key, int64_t w) {
  const Shape& s = e.type(key).shape;
  int64_t last = static_cast<int64_t>(s.size()) - 1;
  IntList start(s.size(), 0), limit(s.begin(), s.end());
  start[last] = w;
  limit[last] = w + 1;
  return e.op(Prim::squeeze, {e.slice(key, start, limit)}, Params{{"dimensions", IntList{last}}});
}

// The two halves of [key, word] along a new last axis: u32[S..., 2].
Atom stack_words(Emit& e, const Atom& w1, const Atom& w2) {
  int64_t rank = static_cast<int64_t>(e.type(w1).shape.size());
  Params last{{"dimensions", IntList{rank}}};
  return e.op(Prim::concatenate,
              {e.op(Prim::expand_dims, {w1}, last), e.op(Prim::expand_dims, {w2}, last)},
              Params{{"dimension", rank}});
}

// `x` (of shape `batch`, or a scalar) broadcast to batch ++ rest.
Atom broadcast_batch(Emit& e, const Atom& x, const Shape& batch, const Shape& rest) {
  Shape full = batch;
  full.insert(full.end(), rest.begin(), rest.end());
  IntList dims;
  if (!e.type(x).shape.empty())
    for (int64_t d = 0; d < static_cast<int64_t>(batch.size()); ++d) dims.push_back(d);
  return e.broadcast(x, full, dims);
}

// The hash, under each key of `key` (u32[batch..., 2]), of the counters of `shape`: each
// element's row-major index as a uint64 split into its high and low words (JAX's
// iota_2x32_shape). Results have shape batch ++ shape.
std::pair<Atom, Atom> hashed_counters(Emit& e, std::string_view prim, const Atom& key,
                                      const IntList& shape) {
  const Shape& ks = e.type(key).shape;
  const Shape batch(ks.begin(), ks.end() - 1);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n > (int64_t{1} << 32))
    fail(prim, "more than 2^32 random values per key in one call are not supported");
  Shape s(shape.begin(), shape.end());
  Atom lo = e.reshape(
      e.op(Prim::iota, {},
           Params{{"dimension", int64_t{0}}, {"dtype", DType::u32}, {"shape", IntList{n}}}),
      s);
  Atom k1 = key_word(e, key, 0), k2 = key_word(e, key, 1);
  if (!batch.empty()) {
    k1 = broadcast_batch(e, k1, batch, s);
    k2 = broadcast_batch(e, k2, batch, s);
    IntList dims;
    for (size_t d = 0; d < s.size(); ++d) dims.push_back(static_cast<int64_t>(batch.size() + d));
    lo = e.broadcast(lo, e.type(k1).shape, dims);
  }
  Atom hi = e.broadcast(u32(e, 0), e.type(lo).shape, {});
  return threefry2x32(e, k1, k2, hi, lo);
}

}  // namespace

Atom prng_random_bits(Emit& e, const Atom& key, int64_t width, const IntList& shape) {
  constexpr std::string_view prim = "random_bits";
  auto [b1, b2] = hashed_counters(e, prim, key, shape);
  auto convert = [&](Atom x, DType d) {
    return e.op(Prim::convert_element_type, {x}, Params{{"new_dtype", d}, {"weak_type", false}});
  };
  switch (width) {
    case 32: return e.op(Prim::xor_, {b1, b2});
    case 8: return convert(e.op(Prim::xor_, {b1, b2}), DType::u8);
    case 16: return convert(e.op(Prim::xor_, {b1, b2}), DType::u16);
    case 64: {
      Atom h = e.op(Prim::shift_left, {convert(b1, DType::u64), Literal::of_int(DType::u64, 32)});
      return e.op(Prim::or_, {h, convert(b2, DType::u64)});
    }
    default: fail(prim, fmt::format("bit_width={} is not 8, 16, 32 or 64", width));
  }
}

Atom prng_split(Emit& e, const Atom& key, const IntList& shape) {
  auto [b1, b2] = hashed_counters(e, "random_split", key, shape);
  return stack_words(e, b1, b2);
}

namespace {

std::vector<Atom> random_bits(RewriteArgs& a) {
  expect_operands(a, "random_bits", 1);
  key_batch_shape(a, "random_bits", 0);
  Emit e{a.b};
  return {prng_random_bits(e, a.ins[0], a.params.get<int64_t>("bit_width"),
                           a.params.get<IntList>("shape"))};
}

// random_split[shape] key: a new key per element, the hash of its counter (JAX's fold-like split).
std::vector<Atom> random_split(RewriteArgs& a) {
  expect_operands(a, "random_split", 1);
  key_batch_shape(a, "random_split", 0);
  Emit e{a.b};
  return {prng_split(e, a.ins[0], a.params.get<IntList>("shape"))};
}

// The high and low 32-bit words of integer seeds (JAX's threefry_seed), each of the seeds'
// shape.
std::pair<Atom, Atom> seed_words(Emit& e, const Atom& seed) {
  DType d = e.type(seed).dtype;
  auto convert = [&](Atom x) {
    return e.op(Prim::convert_element_type, {x},
                Params{{"new_dtype", DType::u32}, {"weak_type", false}});
  };
  // A shift by the bit width or more gives 0 (so a 32-bit seed has a zero high word).
  Atom high = convert(e.op(Prim::shift_right_logical, {seed, Literal::of_int(d, 32)}));
  return {high, convert(seed)};
}

std::vector<Atom> random_seed(RewriteArgs& a) {
  expect_operands(a, "random_seed", 1);
  const ArrayType& s = array_of(a, "random_seed", 0);
  if (!is_int(s.dtype))
    fail("random_seed", fmt::format("the seed has type {}; expected integers", s.str()));
  Emit e{a.b};
  auto [high, low] = seed_words(e, a.ins[0]);
  return {stack_words(e, high, low)};
}

// random_fold_in key data: the hash of data's seed words under key (JAX's threefry_fold_in),
// key by key for a batch of keys (data then has the batch's shape, or is a scalar).
std::vector<Atom> random_fold_in(RewriteArgs& a) {
  constexpr std::string_view prim = "random_fold_in";
  expect_operands(a, prim, 2);
  Shape batch = key_batch_shape(a, prim, 0);
  const ArrayType& data_type = array_of(a, prim, 1);
  if (!data_type.is_scalar() && data_type.shape != batch)
    fail(prim, fmt::format("the data has type {}; expected a scalar or one value per key ({})",
                           data_type.str(), fmt::join(batch, ",")));
  Emit e{a.b};
  Atom data = a.ins[1];
  if (data_type.dtype != DType::u32)
    data = e.op(Prim::convert_element_type, {data},
                Params{{"new_dtype", DType::u32}, {"weak_type", false}});
  auto [x1, x2] = seed_words(e, data);
  Shape none;
  if (!batch.empty() && data_type.is_scalar()) {
    x1 = broadcast_batch(e, x1, batch, none);
    x2 = broadcast_batch(e, x2, batch, none);
  }
  auto [y1, y2] = threefry2x32(e, key_word(e, a.ins[0], 0), key_word(e, a.ins[0], 1), x1, x2);
  return {stack_words(e, y1, y2)};
}

// threefry2x32 k1 k2 x1 x2, the hash itself.
std::vector<Atom> threefry(RewriteArgs& a) {
  expect_operands(a, "threefry2x32", 4);
  for (size_t k = 0; k < 4; ++k)
    if (array_of(a, "threefry2x32", k).dtype != DType::u32)
      fail("threefry2x32", fmt::format("operand {} is not uint32", k));
  Emit e{a.b};
  auto [y1, y2] = threefry2x32(e, a.ins[0], a.ins[1], a.ins[2], a.ins[3]);
  return {y1, y2};
}

// random_wrap / random_unwrap / random_clone: the key's words are the key. The result is a
// copy, a variable of its own: the parser lays out eqns on key-typed variables (slices of
// key<fry>[2] take the word dimension too), and the unwrapped words are not keys.
std::vector<Atom> same_words(RewriteArgs& a) {
  if (a.ins.size() != 1) fail("random_wrap", "expects one operand");
  const ArrayType& k = array_of(a, "random_wrap", 0);
  if (k.dtype != DType::u32 || k.shape.empty() || k.shape.back() != 2)
    fail("random_wrap",
         fmt::format("operand has type {}; threefry key words are u32[..., 2]", k.str()));
  Emit e{a.b};
  return {e.op(Prim::copy, {a.ins[0]})};
}

}  // namespace

void add_prng_rewrites(std::vector<JaxRewrite>& table) {
  table.push_back(
      {"random_bits", {{"bit_width", K::integer}, {"shape", K::ints}}, {}, random_bits});
  table.push_back({"random_split", {{"shape", K::ints}}, {}, random_split});
  table.push_back({"random_fold_in", {}, {}, random_fold_in});
  table.push_back({"random_seed", {}, {"impl"}, random_seed});
  table.push_back({"random_wrap", {}, {"impl"}, same_words});
  table.push_back({"random_unwrap", {}, {}, same_words});
  table.push_back({"random_clone", {}, {}, same_words});
  table.push_back({"threefry2x32", {}, {}, threefry});
}

}  // namespace refjit::text
