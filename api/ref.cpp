// refjit::Ref: indexers built from C++ and the ref primitives (get, swap, addupdate, ...).
#include "refjit/ref.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <ostream>

#include "api/node.h"
#include "refjit/ir/error.h"
#include "refjit/ir/indexing.h"
#include "refjit/ops.h"
#include "refjit/trace.h"

namespace refjit {

namespace {

// The Indexer param and its dynamic operands for `idx` applied to a ref of type `t`.
struct BuiltIndexer {
  Indexer indexer;
  std::vector<Operand> dynamic;
};

Value as_index_value(const Value& v) {
  if (v.is_weak()) return Value::scalar(DType::i32, v.item());
  if (!is_int(v.dtype()))
    throw TypeError(fmt::format("a ref index must have an integer dtype, got {}", v.type().str()));
  return v;
}

BuiltIndexer build_indexer(const ArrayType& t, const Indices& idx) {
  BuiltIndexer b;
  int explicit_dims = 0;
  int ellipses = 0;
  for (const Index& i : idx) {
    if (std::holds_alternative<Ellipsis>(i.get()))
      ++ellipses;
    else
      ++explicit_dims;
  }
  if (ellipses > 1) throw TypeError("an indexer may contain at most one ellipsis");
  if (explicit_dims > t.rank())
    throw TypeError(
        fmt::format("too many indices ({}) for a ref of type Ref{{{}}}", explicit_dims, t.str()));
  // A lone ellipsis, or one at the end, means whole dims: no entries, as JAX's `r[...]`.
  int dim = 0;
  for (size_t k = 0; k < idx.size(); ++k) {
    const auto& v = idx[k].get();
    if (std::holds_alternative<Ellipsis>(v)) {
      if (k + 1 == idx.size()) break;
      for (int n = t.rank() - explicit_dims; n > 0; --n, ++dim)
        b.indexer.dims.push_back(IndexerDim{IndexerDim::Kind::slice, 0, t.shape[dim], 1, false});
      continue;
    }
    int64_t size = t.shape[dim];
    IndexerDim d;
    if (const int64_t* i = std::get_if<int64_t>(&v)) {
      int64_t j = *i < 0 ? *i + size : *i;
      if (j < 0 || j >= size)
        throw RefError("E12", fmt::format("index {} is out of bounds for dim {} of size {} of "
                                          "Ref{{{}}}",
                                          *i, dim, size, t.str()));
      d = IndexerDim{IndexerDim::Kind::index, j, 0, 1, false};
    } else if (const Value* iv = std::get_if<Value>(&v)) {
      Value i = as_index_value(*iv);
      d.kind = i.rank() == 0 ? IndexerDim::Kind::index : IndexerDim::Kind::index_array;
      d.dynamic = true;
      b.dynamic.push_back(i);
    } else if (const Slice* s = std::get_if<Slice>(&v)) {
      auto bound = [size](int64_t x) { return std::clamp<int64_t>(x < 0 ? x + size : x, 0, size); };
      const int64_t start = bound(s->start), stop = bound(s->stop);
      const int64_t step = s->step >= 1 ? s->step : 1;  // a bad step is refused below (E12)
      const int64_t n = stop > start ? (stop - start + step - 1) / step : 0;
      d = IndexerDim{IndexerDim::Kind::slice, start, n, s->step, false};
    } else if (const DSlice* s = std::get_if<DSlice>(&v)) {
      d = IndexerDim{IndexerDim::Kind::slice, 0, s->size, 1, true};
      b.dynamic.push_back(as_index_value(s->start));
    } else {  // All
      d = IndexerDim{IndexerDim::Kind::slice, 0, size, 1, false};
    }
    b.indexer.dims.push_back(std::move(d));
    ++dim;
  }
  return b;
}

// A C++ scalar written into a ref takes the ref's dtype; a scalar written into a
// non-scalar selection is broadcast to it (as `r[...] += 1.0` does in JAX).
Value fit_value(const Value& v, const ArrayType& ref_type, const BuiltIndexer& b) {
  Value x = v;
  DType d = ref_type.dtype;
  if (x.is_weak() && x.dtype() != d) {
    if (is_float(x.dtype()) && !is_float(d))
      throw RefError("E12", fmt::format("cannot write the float {} into a ref of dtype {}; "
                                        "convert it explicitly with convert()",
                                        x.item(), long_name(d)));
    x = Value::scalar(d, x.item());
  }
  if (x.rank() == 0) {
    Shape target = indexed_shape(ref_type, b.indexer, types_of(b.dynamic));
    if (!target.empty()) x = broadcast_in_dim(x, target, {});
  }
  return x;
}

}  // namespace

Ref::Ref(detail::NodePtr node) : node_(std::move(node)) {
  if (!node_ || !node_->type.is_ref) throw Error("internal: a Ref must wrap a ref node");
}

const ArrayType& Ref::type() const { return node_->type.array; }
RefKind Ref::kind() const { return node_->type.ref_kind; }
bool Ref::is_concrete() const { return node_->concrete(); }

bool Ref::same_as(const Ref& other) const {
  const auto& a = *node_;
  const auto& b = *other.node_;
  if (a.concrete() != b.concrete()) return false;
  if (a.concrete()) return a.buffer == b.buffer;
  return a.trace_id == b.trace_id && a.var == b.var;
}

RefView Ref::operator[](Index idx) const { return RefView(*this, Indices{std::move(idx)}); }

Value Ref::get_at(const Indices& idx) const {
  BuiltIndexer b = build_indexer(type(), idx);
  std::vector<Operand> ins{*this};
  ins.insert(ins.end(), b.dynamic.begin(), b.dynamic.end());
  return bind_prim1(Prim::get, ins, {{"indexer", b.indexer}});
}

void Ref::set_at(const Indices& idx, const Value& v) const {
  BuiltIndexer b = build_indexer(type(), idx);
  std::vector<Operand> ins{*this, fit_value(v, type(), b)};
  ins.insert(ins.end(), b.dynamic.begin(), b.dynamic.end());
  bind_prim(Prim::swap, ins, {{"indexer", b.indexer}}, /*drop_outputs=*/true);
}

Value Ref::swap_at(const Indices& idx, const Value& v) const {
  BuiltIndexer b = build_indexer(type(), idx);
  std::vector<Operand> ins{*this, fit_value(v, type(), b)};
  ins.insert(ins.end(), b.dynamic.begin(), b.dynamic.end());
  return bind_prim1(Prim::swap, ins, {{"indexer", b.indexer}});
}

void Ref::add_at(const Indices& idx, const Value& v) const {
  BuiltIndexer b = build_indexer(type(), idx);
  std::vector<Operand> ins{*this, fit_value(v, type(), b)};
  ins.insert(ins.end(), b.dynamic.begin(), b.dynamic.end());
  bind_prim(Prim::addupdate, ins, {{"indexer", b.indexer}});
}

Array Ref::value() const {
  if (!is_concrete())
    throw Error(
        fmt::format("value(): this Ref{{{}}} is traced and has no contents yet; read "
                    "it with get() inside the traced function",
                    type().str()));
  if (node_->buffer->frozen())
    throw RefError("E12", fmt::format("value(): this Ref{{{}}} was frozen; use the Value "
                                      "freeze() returned",
                                      type().str()));
  return node_->buffer->value().clone();
}

std::string Ref::str() const {
  if (!is_concrete()) return fmt::format("Traced<Ref{{{}}}>", type().str());
  if (node_->buffer->frozen()) return fmt::format("Ref(<frozen>, dtype={})", long_name(dtype()));
  return fmt::format("Ref({}, dtype={})", node_->buffer->value().str(), long_name(dtype()));
}

std::string to_string(const Ref& r) { return r.str(); }
std::ostream& operator<<(std::ostream& os, const Ref& r) { return os << r.str(); }

Ref new_ref(const Value& init, RefKind kind) {
  // A C++ floating-point scalar (weakly typed, like a Python float) makes a float32 ref, as
  // jax.new_ref(0.0) does; a ref's dtype is fixed from then on.
  if (init.is_weak() && init.dtype() == DType::f64)
    return new_ref(init.is_concrete() && init.rank() == 0 ? Value::scalar(DType::f32, init.item())
                                                          : convert(init, DType::f32),
                   kind);
  Params params;
  if (kind != RefKind::plain) params.set("kind", std::string(ref_kind_name(kind)));
  std::vector<Operand> outs = bind_prim(Prim::new_ref, std::vector<Operand>{init}, params);
  return std::get<Ref>(outs.at(0));
}

Value freeze(const Ref& r) { return bind_prim1(Prim::freeze, std::vector<Operand>{r}); }

namespace {

// x.at(idx...) as JAX indexes when the entries are integer indices on consecutive dims (at
// least one a Value: a scalar or an index array) and every other dim is whole, or sliced
// beside index arrays: a gather or scatter whose one index addresses those dims together
// (`dims`). As in JAX, a negative index counts from the end; then a read clamps each index
// into its dim, and an update whose index is out of range is dropped (a ref would clamp it).
// nullopt for any other indexer, which goes through a ref.
struct AdvancedIndex {
  int64_t axis = 0;
  int64_t dims = 0;
  Shape batch;               // the indices broadcast together (NumPy's rule)
  std::vector<Value> index;  // per indexed dim: wrapped; a scalar, or broadcast to `batch`
  DType dtype = DType::i32;
  // With slices beside index arrays (x.at(idx, slice(0, 2))): whole rows are gathered or
  // scattered, and this indexer picks the slices within them. Empty when every other dim is
  // whole.
  Indices within_rows;

  // `idx`: one entry per dim (one_entry_per_dim).
  static std::optional<AdvancedIndex> of(const ArrayType& t, const Indices& idx) {
    AdvancedIndex a;
    std::vector<Value> given;
    int64_t axis = -1;
    bool dynamic = false, after = false, whole = true, arrays = false;
    for (size_t k = 0; k < idx.size(); ++k) {
      const auto& e = idx[k].get();
      const int64_t* i = std::get_if<int64_t>(&e);
      const Value* iv = std::get_if<Value>(&e);
      if (!i && !iv) {  // a dim the indices leave to the slice (or ds) there
        whole &= std::holds_alternative<All>(e);
        a.within_rows.push_back(idx[k]);
        after = axis >= 0;
        continue;
      }
      if (after) return std::nullopt;
      if (axis < 0) axis = static_cast<int64_t>(k);
      given.push_back(iv ? as_index_value(*iv) : Value::scalar(DType::i32, double(*i)));
      dynamic |= iv != nullptr;
      arrays |= iv != nullptr && iv->rank() > 0;
    }
    a.axis = axis;
    a.dims = static_cast<int64_t>(given.size());
    // Scalar indices beside slices take the ref path (wrap_scalar_indices): no row copy.
    if (!dynamic || axis + a.dims > t.rank() || (!whole && !arrays)) return std::nullopt;
    for (const Value& i : given)
      for (int d = 0; d < i.rank(); ++d) {
        const size_t from_end = static_cast<size_t>(i.rank() - d);
        if (a.batch.size() < from_end)
          a.batch.insert(a.batch.begin(), from_end - a.batch.size(), 1);
        int64_t& b = a.batch[a.batch.size() - from_end];
        if (b != i.shape()[d] && b != 1 && i.shape()[d] != 1)
          throw TypeError(
              fmt::format("x.at(...): index arrays of shapes ({}) and ({}) do not "
                          "broadcast together",
                          shape_text(a.batch), shape_text(i.shape())));
        b = std::max(b, i.shape()[d]);
      }
    // i32 unless the positions or an index need more (a u32 or i64 index converted to i32
    // could wrap into range).
    const bool narrow = std::all_of(given.begin(), given.end(), [](const Value& i) {
      return i.dtype() == DType::i32 || i.dtype() == DType::i16 || i.dtype() == DType::i8 ||
             i.dtype() == DType::u8 || i.dtype() == DType::u16;
    });
    a.dtype = narrow && a.positions(t) < (int64_t{1} << 31) ? DType::i32 : DType::i64;
    if (whole) {
      a.within_rows.clear();
    } else {  // the slices apply to the gathered rows, whose batch dims stand at `axis`
      a.within_rows.insert(a.within_rows.begin() + axis, a.batch.size(), Index(All{}));
    }
    for (int64_t d = 0; d < a.dims; ++d) {
      // A scalar index stays one (the arithmetic broadcasts it), so `row * w + cols` keeps
      // the form in which it reads as a run (passes/simplify/unit_run.h).
      Value i = given[d].rank() == 0 ? given[d] : broadcast_to(given[d], a.batch);
      if (i.dtype() != a.dtype) i = convert(i, a.dtype);
      a.index.push_back(where(i < a.scalar(0), i + a.scalar(a.size(t, d)), i));
    }
    return a;
  }

  Value scalar(int64_t v) const { return Value::scalar(dtype, static_cast<double>(v)); }
  int64_t size(const ArrayType& t, int64_t d) const { return t.shape[axis + d]; }
  int64_t positions(const ArrayType& t) const {
    int64_t n = 1;
    for (int64_t d = 0; d < dims; ++d) n *= size(t, d);
    return n;
  }
  // The row-major position of the in-range indices `at` among the indexed dims' elements.
  Value linear(const ArrayType& t, const std::vector<Value>& at) const {
    Value p = at[0];
    for (int64_t d = 1; d < dims; ++d) p = p * scalar(size(t, d)) + at[d];
    return p;
  }
  AdvancedIndex& whole_rows() {
    within_rows.clear();
    return *this;
  }
  // s[:axis] + batch + s[axis+dims:]: what the gather gives and an update writes.
  Shape selected(const ArrayType& t) const {
    Shape s(t.shape.begin(), t.shape.begin() + axis);
    s.insert(s.end(), batch.begin(), batch.end());
    s.insert(s.end(), t.shape.begin() + axis + dims, t.shape.end());
    return s;
  }
};

Value jax_get(const Value& x, const AdvancedIndex& a) {
  std::vector<Value> clamped;
  for (int64_t d = 0; d < a.dims; ++d)
    clamped.push_back(min(max(a.index[d], a.scalar(0)), a.scalar(a.size(x.type(), d) - 1)));
  const Value rows = gather(x, broadcast_to(a.linear(x.type(), clamped), a.batch), a.axis, a.dims);
  return a.within_rows.empty() ? rows : ValueAt(rows, a.within_rows).get();
}

std::optional<Value> jax_update(const Value& x, const Indices& idx, const Value& v, Prim how) {
  const ArrayType& t = x.type();
  std::optional<AdvancedIndex> a = AdvancedIndex::of(t, idx);
  if (!a) return std::nullopt;
  Value u;
  if (a->within_rows.empty()) {
    // The update's shape, static indices taken as Values: one out of range drops the update
    // (below), where a ref's indexer would refuse it.
    Indices as_values = idx;
    for (Index& e : as_values)
      if (const int64_t* i = std::get_if<int64_t>(&e.get()))
        e = Index(Value::scalar(DType::i32, static_cast<double>(*i)));
    u = fit_value(v, t, build_indexer(t, as_values));
    if (u.shape() != a->selected(t)) return std::nullopt;
  } else {
    // The rows with their slices written: whole rows set back (a duplicate index's last
    // wins, as per element), or the difference added.
    const Value rows = how == Prim::scatter
                           ? jax_get(x, AdvancedIndex{*a}.whole_rows())
                           : broadcast_to(Value::scalar(t.dtype, 0), a->selected(t));
    u = ValueAt(rows, a->within_rows).set(v);
  }
  std::optional<Value> valid;
  for (int64_t d = 0; d < a->dims; ++d) {
    Value ok = logical_and(ge(a->index[d], a->scalar(0)), a->index[d] < a->scalar(a->size(t, d)));
    valid = valid ? logical_and(*valid, ok) : ok;
  }
  const Value past_end = broadcast_to(a->scalar(a->positions(t)), a->batch);
  const Value at = where(broadcast_to(*valid, a->batch),
                         broadcast_to(a->linear(t, a->index), a->batch), past_end);
  return how == Prim::scatter ? scatter(x, at, u, a->axis, false, a->dims)
                              : scatter_add(x, at, u, a->axis, a->dims);
}

// The other indexers go through a ref, which clamps a scalar Value index. As JAX does, such
// an index (beside slices: x.at(i, slice(0, 2))) first counts from the end when negative, and
// an update with one out of range is dropped: the old contents are written back, or nothing
// added. A static index out of range is taken as a Value, so it follows the same rules (the
// ref's indexer would refuse it).
struct ScalarIndices {
  Indices idx;                 // the indexer with each scalar Value index wrapped
  std::optional<Value> valid;  // all of them in range; none when there are none
};

ScalarIndices wrap_scalar_indices(const ArrayType& t, const Indices& idx) {
  ScalarIndices s{idx, std::nullopt};
  int64_t dim = 0;
  for (Index& entry : s.idx) {
    const int64_t* k = std::get_if<int64_t>(&entry.get());
    if (k && dim < t.rank() && (*k >= t.shape[dim] || *k < -t.shape[dim]))
      entry = Index(Value::scalar(DType::i32, static_cast<double>(*k)));
    const Value* v = std::get_if<Value>(&entry.get());
    if (v && v->rank() == 0 && dim < t.rank()) {
      const Value i = as_index_value(*v);
      const Value n = Value::scalar(i.dtype(), static_cast<double>(t.shape[dim]));
      const Value zero = Value::scalar(i.dtype(), 0);
      const Value wrapped = where(i < zero, i + n, i);
      const Value ok = logical_and(ge(wrapped, zero), wrapped < n);
      s.valid = s.valid ? logical_and(*s.valid, ok) : ok;
      entry = Index(wrapped);
    }
    ++dim;
  }
  return s;
}

// The indexer with its ellipsis written out and whole dims added at the end: one entry per
// dim of t.
Indices one_entry_per_dim(const ArrayType& t, const Indices& idx) {
  int64_t ellipses = 0;
  for (const Index& i : idx) ellipses += std::holds_alternative<Ellipsis>(i.get()) ? 1 : 0;
  const int64_t explicit_dims = std::ssize(idx) - ellipses;
  if (ellipses > 1) throw TypeError("x.at(...): an indexer may contain at most one ellipsis");
  if (explicit_dims > t.rank())
    throw TypeError(fmt::format("x.at(...): {} indices for a value of type {} ({} dims)",
                                explicit_dims, t.str(), t.rank()));
  Indices expanded;
  for (const Index& i : idx)
    if (std::holds_alternative<Ellipsis>(i.get()))
      expanded.insert(expanded.end(), t.rank() - explicit_dims, Index(All{}));
    else
      expanded.push_back(i);
  expanded.resize(t.rank(), Index(All{}));
  return expanded;
}

// Integer indices on dims that are not next to each other, at least one an index array
// (x.at(i, all, j)): NumPy puts the broadcast index dims first, then the other dims, which is
// what indexing x with those dims moved to the front gives. `perm`: x's dims in that order;
// `idx`: the indexer in that order.
struct IndexedInFront {
  Ints perm;
  Indices idx;
};

std::optional<IndexedInFront> indexed_dims_in_front(const Indices& idx) {
  IndexedInFront front;
  Ints rest;
  Indices rest_idx;
  bool arrays = false;
  for (size_t d = 0; d < idx.size(); ++d) {
    const auto& e = idx[d].get();
    const Value* v = std::get_if<Value>(&e);
    if (v || std::holds_alternative<int64_t>(e)) {
      front.perm.push_back(static_cast<int64_t>(d));
      front.idx.push_back(idx[d]);
      arrays |= v && v->rank() > 0;
    } else {
      rest.push_back(static_cast<int64_t>(d));
      rest_idx.push_back(idx[d]);
    }
  }
  if (!arrays || front.perm.back() - front.perm.front() + 1 == std::ssize(front.perm))
    return std::nullopt;
  front.perm.insert(front.perm.end(), rest.begin(), rest.end());
  front.idx.insert(front.idx.end(), rest_idx.begin(), rest_idx.end());
  return front;
}

// x with its dims moved back from `perm`'s order.
Value moved_back(const Value& x, const Ints& perm) {
  Ints inverse(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inverse[perm[k]] = static_cast<int64_t>(k);
  return transpose(x, inverse);
}

}  // namespace

Value ValueAt::get() const {
  const Indices idx = one_entry_per_dim(x_.type(), idx_);
  if (std::optional<IndexedInFront> f = indexed_dims_in_front(idx))
    return ValueAt(transpose(x_, f->perm), f->idx).get();
  if (std::optional<AdvancedIndex> a = AdvancedIndex::of(x_.type(), idx)) return jax_get(x_, *a);
  return new_ref(x_).get_at(wrap_scalar_indices(x_.type(), idx).idx);
}

Value ValueAt::set(const Value& v) const {
  const Indices idx = one_entry_per_dim(x_.type(), idx_);
  if (std::optional<IndexedInFront> f = indexed_dims_in_front(idx))
    return moved_back(ValueAt(transpose(x_, f->perm), f->idx).set(v), f->perm);
  if (std::optional<Value> y = jax_update(x_, idx, v, Prim::scatter)) return *y;
  const ScalarIndices s = wrap_scalar_indices(x_.type(), idx);
  Ref r = new_ref(x_);
  Value u = fit_value(v, x_.type(), build_indexer(x_.type(), s.idx));
  if (s.valid) u = where(broadcast_to(*s.valid, u.shape()), u, r.get_at(s.idx));
  r.set_at(s.idx, u);
  return freeze(r);
}

Value ValueAt::add(const Value& v) const {
  const Indices idx = one_entry_per_dim(x_.type(), idx_);
  if (std::optional<IndexedInFront> f = indexed_dims_in_front(idx))
    return moved_back(ValueAt(transpose(x_, f->perm), f->idx).add(v), f->perm);
  if (std::optional<Value> y = jax_update(x_, idx, v, Prim::scatter_add)) return *y;
  const ScalarIndices s = wrap_scalar_indices(x_.type(), idx);
  Ref r = new_ref(x_);
  Value u = fit_value(v, x_.type(), build_indexer(x_.type(), s.idx));
  if (s.valid) u = where(broadcast_to(*s.valid, u.shape()), u, zeros_like(u));
  r.add_at(s.idx, u);
  return freeze(r);
}

Ref empty_ref(const ArrayType& type) {
  return new_ref(broadcast_to(Value::scalar(type.dtype, 0.0), type.shape));
}

// Freezing is the IR's "no use after this point": the value it returns is dropped, and the
// eqn with it when nothing else needs it (dce keeps no freeze whose result is unread).
void free_ref(const Ref& r) { (void)freeze(r); }

}  // namespace refjit
