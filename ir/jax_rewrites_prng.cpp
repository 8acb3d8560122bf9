// JAX's PRNG primitives, read as threefry2x32 on u32[..., 2] key words (jax_rewrites.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "ir/jax_rewrite_support.h"

namespace refjit::text {

namespace {

// ---- PRNG: threefry keys as u32[..., 2] -------------------------------------------------
//
// The parser reads a `key<fry>[s]` binder as u32[s..., 2], the key's two words. The random_*
// primitives then become threefry2x32 hashes written with integer primitives (add, xor,
// shifts), computing JAX's bits exactly (its default "partitionable" threefry).

// One word of a scalar key u32[2]: u32[].
Atom key_word(Emit& e, const Atom& key, int64_t w) {
  return e.op(Prim::squeeze, {e.slice(key, {w}, {w + 1})}, Params{{"dimensions", IntList{0}}});
}

Atom u32(Emit& e, uint32_t v) { return Literal::of_int(DType::u32, v); }

Atom rotate_left(Emit& e, const Atom& x, uint32_t r) {
  return e.op(Prim::or_, {e.op(Prim::shift_left, {x, u32(e, r)}),
                          e.op(Prim::shift_right_logical, {x, u32(e, 32 - r)})});
}

// The Threefry-2x32 hash (20 rounds) of the counter pairs (x1, x2) under key (k1, k2), as JAX's
// threefry2x32 primitive computes it.
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

// The counters of `shape`: each element's row-major index as a uint64, split into its high
// and low words (JAX's iota_2x32_shape).
std::pair<Atom, Atom> counters(Emit& e, std::string_view prim, const IntList& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n > (int64_t{1} << 32))
    fail(prim, "more than 2^32 random values in one call are not supported");
  Shape s(shape.begin(), shape.end());
  Atom lo = e.reshape(
      e.op(Prim::iota, {},
           Params{{"dimension", int64_t{0}}, {"dtype", DType::u32}, {"shape", IntList{n}}}),
      s);
  Atom hi = e.broadcast(u32(e, 0), s, {});
  return {hi, lo};
}

ArrayType scalar_key(const RewriteArgs& a, std::string_view prim) {
  ArrayType k = array_of(a, prim, 0);
  if (k.dtype != DType::u32 || k.shape != Shape{2})
    fail(prim, fmt::format("operand 0 has type {}; expected one threefry key (key<fry>[] or "
                           "u32[2]); batched keys are not supported",
                           k.str()));
  return k;
}

// The hash of the counters of `shape` under the one key operand: what random_bits and
// random_split draw from.
std::pair<Atom, Atom> hashed_counters(RewriteArgs& a, Emit& e, std::string_view prim,
                                      const IntList& shape) {
  expect_operands(a, prim, 1);
  scalar_key(a, prim);
  auto [hi, lo] = counters(e, prim, shape);
  return threefry2x32(e, key_word(e, a.ins[0], 0), key_word(e, a.ins[0], 1), hi, lo);
}

std::vector<Atom> random_bits(RewriteArgs& a) {
  constexpr std::string_view prim = "random_bits";
  int64_t width = a.params.get<int64_t>("bit_width");
  const IntList& shape = a.params.get<IntList>("shape");
  Emit e{a.b};
  auto [b1, b2] = hashed_counters(a, e, prim, shape);
  auto convert = [&](Atom x, DType d) {
    return e.op(Prim::convert_element_type, {x}, Params{{"new_dtype", d}, {"weak_type", false}});
  };
  switch (width) {
    case 32: return {e.op(Prim::xor_, {b1, b2})};
    case 8: return {convert(e.op(Prim::xor_, {b1, b2}), DType::u8)};
    case 16: return {convert(e.op(Prim::xor_, {b1, b2}), DType::u16)};
    case 64: {
      Atom h = e.op(Prim::shift_left, {convert(b1, DType::u64), Literal::of_int(DType::u64, 32)});
      return {e.op(Prim::or_, {h, convert(b2, DType::u64)})};
    }
    default: fail(prim, fmt::format("bit_width={} is not 8, 16, 32 or 64", width));
  }
}

// random_split[shape] key: a new key per element, the hash of its counter (JAX's fold-like split).
std::vector<Atom> random_split(RewriteArgs& a) {
  const IntList& shape = a.params.get<IntList>("shape");
  Emit e{a.b};
  auto [b1, b2] = hashed_counters(a, e, "random_split", shape);
  int64_t rank = static_cast<int64_t>(shape.size());
  Atom w1 = e.op(Prim::expand_dims, {b1}, Params{{"dimensions", IntList{rank}}});
  Atom w2 = e.op(Prim::expand_dims, {b2}, Params{{"dimensions", IntList{rank}}});
  return {e.op(Prim::concatenate, {w1, w2}, Params{{"dimension", rank}})};
}

// The key of an integer seed: its high and low 32-bit words (JAX's threefry_seed).
Atom seed_key(Emit& e, const Atom& seed) {
  DType d = e.type(seed).dtype;
  auto convert = [&](Atom x) {
    return e.op(Prim::convert_element_type, {x},
                Params{{"new_dtype", DType::u32}, {"weak_type", false}});
  };
  // A shift by the bit width or more gives 0 (so a 32-bit seed has a zero high word).
  Atom high = convert(e.op(Prim::shift_right_logical, {seed, Literal::of_int(d, 32)}));
  Atom low = convert(seed);
  Params one{{"dimensions", IntList{0}}};
  return e.op(Prim::concatenate,
              {e.op(Prim::expand_dims, {high}, one), e.op(Prim::expand_dims, {low}, one)},
              Params{{"dimension", int64_t{0}}});
}

std::vector<Atom> random_seed(RewriteArgs& a) {
  expect_operands(a, "random_seed", 1);
  const ArrayType& s = array_of(a, "random_seed", 0);
  if (!is_int(s.dtype) || !s.is_scalar())
    fail("random_seed", fmt::format("the seed has type {}; expected an integer scalar", s.str()));
  Emit e{a.b};
  return {seed_key(e, a.ins[0])};
}

// random_fold_in key data: the hash of data's seed key under key (JAX's threefry_fold_in).
std::vector<Atom> random_fold_in(RewriteArgs& a) {
  constexpr std::string_view prim = "random_fold_in";
  expect_operands(a, prim, 2);
  scalar_key(a, prim);
  Emit e{a.b};
  Atom data = a.ins[1];
  if (e.type(data).dtype != DType::u32)
    data = e.op(Prim::convert_element_type, {data},
                Params{{"new_dtype", DType::u32}, {"weak_type", false}});
  Atom count = seed_key(e, data);
  auto [b1, b2] = threefry2x32(e, key_word(e, a.ins[0], 0), key_word(e, a.ins[0], 1),
                               e.slice(count, {0}, {1}), e.slice(count, {1}, {2}));
  return {e.op(Prim::concatenate, {b1, b2}, Params{{"dimension", int64_t{0}}})};
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

// random_wrap / random_unwrap / random_clone: the key's words are the key.
std::vector<Atom> same_words(RewriteArgs& a) {
  if (a.ins.size() != 1) fail("random_wrap", "expects one operand");
  const ArrayType& k = array_of(a, "random_wrap", 0);
  if (k.dtype != DType::u32 || k.shape.empty() || k.shape.back() != 2)
    fail("random_wrap",
         fmt::format("operand has type {}; threefry key words are u32[..., 2]", k.str()));
  return {a.ins[0]};
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
