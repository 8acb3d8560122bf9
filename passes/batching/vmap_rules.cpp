// Batching rules for primitives without sub-jaxprs (passes/batching/vmap_rules.h). The batch dim is
// always dim 0: a rule shifts the dims its params name by one, and returns nullopt for the
// combinations it leaves to the per-example scan.
#include "passes/batching/vmap_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "ir/window_params.h"
#include "refjit/ir/error.h"
#include "refjit/ir/indexing.h"
#include "refjit/ir/window.h"

namespace refjit {

Atom BatchCtx::batched(const BVal& v) {
  if (v.batched) return v.atom;
  const ArrayType t = e.array_type_of(v.atom);
  Shape shape{size};
  shape.insert(shape.end(), t.shape.begin(), t.shape.end());
  IntList dims(t.shape.size());
  std::iota(dims.begin(), dims.end(), 1);
  return e.broadcast_in_dim(v.atom, shape, dims);
}

Atom BatchCtx::to_front(const Atom& x, int from) {
  if (from == 0) return x;
  const int rank = e.array_type_of(x).rank();
  IntList perm{from};
  for (int d = 0; d < rank; ++d)
    if (d != from) perm.push_back(d);
  return e.emit1(Prim::transpose, {x}, Params{{"permutation", perm}});
}

Atom BatchCtx::from_front(const Atom& x, int to) {
  if (to == 0) return x;
  const int rank = e.array_type_of(x).rank();
  IntList perm;
  for (int d = 1; d < rank; ++d) {
    perm.push_back(d);
    if (d == to) perm.push_back(0);
  }
  return e.emit1(Prim::transpose, {x}, Params{{"permutation", perm}});
}

std::vector<BVal> BatchCtx::emit_batched(const Eqn& eqn, std::vector<Atom> ins, Params params) {
  std::vector<BVal> out;
  for (Var v : e.emit(eqn.prim, std::move(ins), std::move(params))) out.push_back({v, true});
  return out;
}

namespace {

using Outs = std::optional<std::vector<BVal>>;

IntList shifted(const IntList& dims, int64_t by = 1) {
  IntList r;
  for (int64_t d : dims) r.push_back(d + by);
  return r;
}

IntList with_front(int64_t first, const IntList& rest) {
  IntList r{first};
  r.insert(r.end(), rest.begin(), rest.end());
  return r;
}

bool any_batched(const std::vector<BVal>& ins, size_t from = 0) {
  for (size_t k = from; k < ins.size(); ++k)
    if (ins[k].batched) return true;
  return false;
}

// ---- elementwise ----------------------------------------------------------------------------

// Operands have the result's per-example shape or are scalars: a batched scalar is broadcast
// to the batched result, an unbatched array to the batch; an unbatched scalar stays.
Outs elementwise(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  const Shape& shape = c.src.type_of(e.outs.at(0)).shape();
  Shape full{c.size};
  full.insert(full.end(), shape.begin(), shape.end());
  std::vector<Atom> args;
  for (const BVal& v : ins) {
    const ArrayType t = c.e.array_type_of(v.atom);
    const bool select_case = e.prim == Prim::select_n && !args.empty();  // cases: one type
    if (select_case)
      args.push_back(c.batched(v));
    else if (v.batched && t.rank() == 1 && !shape.empty())
      args.push_back(c.e.broadcast_in_dim(v.atom, full, {0}));
    else if (!v.batched && t.rank() > 0)
      args.push_back(c.batched(v));
    else
      args.push_back(v.atom);
  }
  return c.emit_batched(e, std::move(args), e.params);
}

// ---- shapes ---------------------------------------------------------------------------------

Outs broadcast_in_dim(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  Params p = e.params;
  p.set("shape", with_front(c.size, e.params.get<IntList>("shape")));
  p.set("broadcast_dimensions",
        with_front(0, shifted(e.params.get<IntList>("broadcast_dimensions"))));
  return c.emit_batched(e, {ins[0].atom}, std::move(p));
}

Outs reshape(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  Params p = e.params;
  p.set("new_sizes", with_front(c.size, e.params.get<IntList>("new_sizes")));
  return c.emit_batched(e, {ins[0].atom}, std::move(p));
}

Outs shift_param(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins, std::string_view name) {
  Params p = e.params;
  p.set(std::string(name), shifted(e.params.get<IntList>(name)));
  return c.emit_batched(e, {ins[0].atom}, std::move(p));
}

Outs transpose(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  Params p = e.params;
  p.set("permutation", with_front(0, shifted(e.params.get<IntList>("permutation"))));
  return c.emit_batched(e, {ins[0].atom}, std::move(p));
}

Outs slice(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  Params p = e.params;
  p.set("start_indices", with_front(0, e.params.get<IntList>("start_indices")));
  p.set("limit_indices", with_front(c.size, e.params.get<IntList>("limit_indices")));
  if (const auto* s = std::get_if<IntList>(e.params.find("strides")))
    p.set("strides", with_front(1, *s));
  return c.emit_batched(e, {ins[0].atom}, std::move(p));
}

Outs pad(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  if (ins[1].batched) return std::nullopt;
  IntListList config{{0, 0, 0}};
  for (const auto& d : e.params.get<IntListList>("padding_config")) config.push_back(d);
  Params p = e.params;
  p.set("padding_config", config);
  return c.emit_batched(e, {ins[0].atom, ins[1].atom}, std::move(p));
}

// Every operand batched; the eqn's `dimension` shifts past the batch dim (concatenate, sort).
Outs along_dimension(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  std::vector<Atom> args;
  for (const BVal& v : ins) args.push_back(c.batched(v));
  Params p = e.params;
  p.set("dimension", e.params.get<int64_t>("dimension") + 1);
  return c.emit_batched(e, std::move(args), std::move(p));
}

// dynamic_slice / dynamic_update_slice with unbatched starts: the batch dim starts at 0.
Outs dynamic_slice(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  if (any_batched(ins, 1)) return std::nullopt;
  std::vector<Atom> args{ins[0].atom, Literal::of_int(DType::i32, 0)};
  for (size_t k = 1; k < ins.size(); ++k) args.push_back(ins[k].atom);
  Params p = e.params;
  p.set("slice_sizes", with_front(c.size, e.params.get<IntList>("slice_sizes")));
  return c.emit_batched(e, std::move(args), std::move(p));
}

Outs dynamic_update_slice(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  if (any_batched(ins, 2)) return std::nullopt;
  std::vector<Atom> args{c.batched(ins[0]), c.batched(ins[1]), Literal::of_int(DType::i32, 0)};
  for (size_t k = 2; k < ins.size(); ++k) args.push_back(ins[k].atom);
  return c.emit_batched(e, std::move(args), e.params);
}

// With the indices batched: with the operand's batch dim moved next to the indexed dims (to
// `axis`), example b's index i is position b * N + i of dims axis .. axis + dims (N: the
// positions one example's indices address), so one gather or scatter over them (`dims` + 1)
// does every example. An index out of range must not reach a neighbouring example: a
// gather's is clamped into [0, N) first, a scatter's is sent past the end (dropped). nullopt
// for positions past the index dtype.
std::optional<Atom> example_positions(BatchCtx& c, const Eqn& e, const Atom& idx, bool clamp) {
  const ArrayType x = c.src.type_of(e.ins[0]).array;
  const auto indexed = x.shape.begin() + e.params.get<int64_t>("axis");
  const int64_t n = num_elements(Shape(indexed, indexed + indexed_dims(e.params)));
  const ArrayType it = c.e.array_type_of(idx);
  if (c.size * n >= (int64_t{1} << (it.dtype == DType::i64 ? 62 : 31))) return std::nullopt;
  auto lit = [&](int64_t v) { return c.e.scalar(it.dtype, static_cast<double>(v)); };
  const Atom base = c.e.emit1(Prim::mul, {c.e.iota(it.shape, 0, it.dtype), lit(n)});
  if (clamp)
    return c.e.emit1(
        Prim::add, {base, c.e.emit1(Prim::min, {c.e.emit1(Prim::max, {idx, lit(0)}), lit(n - 1)})});
  const Atom in_range = c.e.emit1(
      Prim::and_, {c.e.emit1(Prim::ge, {idx, lit(0)}), c.e.emit1(Prim::lt, {idx, lit(n)})});
  return c.e.select(
      in_range, {c.e.broadcast_to(lit(c.size * n), it.shape), c.e.emit1(Prim::add, {base, idx})});
}

Params over_examples(const Eqn& e) {
  Params p = e.params;
  p.set("dims", indexed_dims(e.params) + 1);
  return p;
}

// gather[axis] x idx: a batched operand shifts the axis; batched indices put the batch dim at
// `axis` of the result, which is then moved to the front; both batched, example_positions.
Outs gather(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  const int64_t axis = e.params.get<int64_t>("axis");
  if (ins[0].batched && ins[1].batched) {
    std::optional<Atom> at = example_positions(c, e, ins[1].atom, /*clamp=*/true);
    if (!at) return std::nullopt;
    const Atom x = c.from_front(ins[0].atom, static_cast<int>(axis));
    const Atom out = c.e.emit1(Prim::gather, {x, *at}, over_examples(e));
    return std::vector<BVal>{{c.to_front(out, static_cast<int>(axis)), true}};
  }
  if (ins[0].batched) {
    Params p = e.params;
    p.set("axis", axis + 1);
    return c.emit_batched(e, {ins[0].atom, ins[1].atom}, std::move(p));
  }
  Atom out = c.e.emit1(Prim::gather, {ins[0].atom, ins[1].atom}, e.params);
  return std::vector<BVal>{{c.to_front(out, static_cast<int>(axis)), true}};
}

// The scatters: operand and updates get the batch dim; batched indices, example_positions
// (operand and updates with their batch dims at `axis`, the result's moved back).
Outs scatter(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  if (ins[1].batched) {
    std::optional<Atom> at = example_positions(c, e, ins[1].atom, /*clamp=*/false);
    if (!at) return std::nullopt;
    const int axis = static_cast<int>(e.params.get<int64_t>("axis"));
    const Atom out = c.e.emit1(
        e.prim, {c.from_front(c.batched(ins[0]), axis), *at, c.from_front(c.batched(ins[2]), axis)},
        over_examples(e));
    return std::vector<BVal>{{c.to_front(out, axis), true}};
  }
  Params p = e.params;
  p.set("axis", e.params.get<int64_t>("axis") + 1);
  return c.emit_batched(e, {c.batched(ins[0]), ins[1].atom, c.batched(ins[2])}, std::move(p));
}

// Every operand batched, the params unchanged: the decompositions take leading dims as a batch
// already (both operands of a triangular solve carry the same batch dims), and a ref made inside
// the batched function is always batched (from an unbatched value too, as in JAX: one ref per
// example, so each may later be written with its example's value).
Outs batch_all(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  std::vector<Atom> batched;
  for (const BVal& v : ins) batched.push_back(c.batched(v));
  return c.emit_batched(e, batched, e.params);
}

// ---- reductions and products ----------------------------------------------------------------

Outs reduce(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  return shift_param(c, e, ins, "axes");
}

Outs dot_general(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  DotDims d = e.params.get<DotDims>("dimension_numbers");
  const size_t nbatch = d.lhs_batch.size();
  Params p = e.params;
  if (ins[0].batched && ins[1].batched) {
    d = DotDims{shifted(d.lhs_contract), shifted(d.rhs_contract),
                with_front(0, shifted(d.lhs_batch)), with_front(0, shifted(d.rhs_batch))};
    p.set("dimension_numbers", d);
    return c.emit_batched(e, {ins[0].atom, ins[1].atom}, std::move(p));
  }
  int at = 0;  // where the batch dim lands among the result's dims
  if (ins[0].batched) {
    d = DotDims{shifted(d.lhs_contract), d.rhs_contract, shifted(d.lhs_batch), d.rhs_batch};
    at = static_cast<int>(nbatch);
  } else {
    const int lhs_rank = c.e.array_type_of(ins[0].atom).rank();
    const int lhs_free = lhs_rank - static_cast<int>(d.lhs_contract.size() + nbatch);
    d = DotDims{d.lhs_contract, shifted(d.rhs_contract), d.lhs_batch, shifted(d.rhs_batch)};
    at = static_cast<int>(nbatch) + lhs_free;
  }
  p.set("dimension_numbers", d);
  Atom out = c.e.emit1(Prim::dot_general, {ins[0].atom, ins[1].atom}, std::move(p));
  return std::vector<BVal>{{c.to_front(out, at), true}};
}

// ---- refs -----------------------------------------------------------------------------------

Outs pass_through(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  return c.emit_batched(e, {ins[0].atom}, e.params);
}

// A batched ref's indexer gains a leading whole slice over the batch. Where the batch dim
// lands in the indexed value: dim 0, unless index arrays that are not adjacent move their
// block to the front.
struct BatchedIndexer {
  Indexer ix;
  int batch_at = 0;
};

BatchedIndexer batched_indexer(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins,
                               size_t first_dynamic) {
  const Indexer& ix = e.params.get<Indexer>("indexer");
  BatchedIndexer b;
  if (ix.is_whole()) return b;  // r[...] stays r[...] (the batch dim is taken whole)
  IndexerDim whole;
  whole.kind = IndexerDim::Kind::slice;
  whole.size = c.size;
  b.ix.dims.push_back(whole);
  b.ix.dims.insert(b.ix.dims.end(), ix.dims.begin(), ix.dims.end());
  std::vector<Type> dyn;
  for (size_t k = first_dynamic; k < ins.size(); ++k) dyn.push_back(c.e.type_of(ins[k].atom));
  const ArrayType ref = c.e.type_of(ins[0].atom).array;
  const IndexedLayout layout = indexed_layout(ref, b.ix, dyn);
  if (layout.array_position == 0) b.batch_at = static_cast<int>(layout.array_shape.size());
  return b;
}

[[noreturn]] void unbatched_ref_write(BatchCtx& c, bool value_batched) {
  throw RefError("E11",
                 fmt::format("vmap: {} writes {} into a ref that is not batched; the ref holds one "
                             "value for the whole batch. Create the ref inside the vmapped "
                             "function, or pass it batched (an argument with in_axes 0)",
                             c.where, value_batched ? "a batched value" : "at a batched index"));
}

Outs get(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  if (!ins[0].batched || any_batched(ins, 1)) return std::nullopt;
  BatchedIndexer b = batched_indexer(c, e, ins, 1);
  std::vector<Atom> args;
  for (const BVal& v : ins) args.push_back(v.atom);
  Atom out = c.e.emit1(Prim::get, std::move(args), Params{{"indexer", b.ix}});
  return std::vector<BVal>{{c.to_front(out, b.batch_at), true}};
}

// swap / addupdate: the value is written with its batch dim where the indexer puts it.
Outs write(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  if (!ins[0].batched) {
    if (any_batched(ins, 1)) unbatched_ref_write(c, ins[1].batched);
    return std::nullopt;  // unreachable: some operand is batched
  }
  if (any_batched(ins, 2)) return std::nullopt;
  BatchedIndexer b = batched_indexer(c, e, ins, 2);
  Atom value = c.batched(ins[1]);
  if (b.batch_at != 0) {  // the value's dim 0 goes to where the indexed layout has the batch
    const int rank = c.e.array_type_of(value).rank();
    IntList perm;
    for (int d = 1; d <= b.batch_at; ++d) perm.push_back(d);
    perm.push_back(0);
    for (int d = b.batch_at + 1; d < rank; ++d) perm.push_back(d);
    value = c.e.emit1(Prim::transpose, {value}, Params{{"permutation", perm}});
  }
  std::vector<Atom> args{ins[0].atom, value};
  for (size_t k = 2; k < ins.size(); ++k) args.push_back(ins[k].atom);
  std::vector<Var> outs = c.e.emit(e.prim, std::move(args), Params{{"indexer", b.ix}});
  if (outs.empty()) return std::vector<BVal>{};
  return std::vector<BVal>{{c.to_front(outs[0], b.batch_at), true}};
}

// Windowed reductions: the batch dim gets windows of size 1, so each stays in its example.
Outs window(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  std::vector<Atom> args;
  for (const BVal& v : ins) args.push_back(c.batched(v));
  const bool dilations = e.params.find("base_dilation") != nullptr;
  Params p = Window::of(e.params).with_leading_dim().params(dilations);
  if (const ParamValue* s = e.params.find("select_prim")) p.set("select_prim", *s);
  return c.emit_batched(e, std::move(args), std::move(p));
}

BatchRuleTable make_rules() {
  BatchRuleTable t;
  for (int k = 0; k < kNumPrims; ++k)
    if (prim_info(static_cast<Prim>(k)).elementwise) t.set(static_cast<Prim>(k), elementwise);
  t.set(Prim::broadcast_in_dim, broadcast_in_dim);
  t.set(Prim::reshape, reshape);
  for (Prim p : {Prim::squeeze, Prim::expand_dims})
    t.set(p, [](BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
      return shift_param(c, e, ins, "dimensions");
    });
  t.set(Prim::transpose, transpose);
  t.set(Prim::concatenate, along_dimension);
  t.set(Prim::pad, pad);
  t.set(Prim::slice, slice);
  t.set(Prim::dynamic_slice, dynamic_slice);
  t.set(Prim::dynamic_update_slice, dynamic_update_slice);
  t.set(Prim::gather, gather);
  for (Prim p :
       {Prim::scatter, Prim::scatter_add, Prim::scatter_mul, Prim::scatter_min, Prim::scatter_max})
    t.set(p, scatter);
  t.set(Prim::sort, along_dimension);
  for (Prim p : {Prim::eigh, Prim::svd, Prim::eig, Prim::cholesky, Prim::lu, Prim::qr,
                 Prim::triangular_solve, Prim::tridiagonal_solve, Prim::new_ref})
    t.set(p, batch_all);
  for (Prim p : {Prim::reduce_sum, Prim::reduce_max, Prim::reduce_min, Prim::argmax})
    t.set(p, reduce);
  t.set(Prim::dot_general, dot_general);
  for (Prim p : {Prim::reduce_window_sum, Prim::reduce_window_max, Prim::reduce_window_min,
                 Prim::select_and_gather_add, Prim::select_and_scatter_add})
    t.set(p, window);
  t.set(Prim::freeze, pass_through);
  t.set(Prim::get, get);
  t.set(Prim::swap, write);
  t.set(Prim::addupdate, write);
  register_control_batch_rules(t);
  return t;
}

}  // namespace

const BatchRuleTable& batch_rules() {
  static const BatchRuleTable t = make_rules();
  return t;
}

}  // namespace refjit
