// refjit::Ref: a mutable array (JAX's array ref). Concrete refs own host storage that every
// holder sees; traced refs are Ref-typed variables of the jaxpr being traced. Reads and
// writes are the get/swap/addupdate primitives, addressed with indexers built from C++:
//
//   Ref r = new_ref(x);            // jax.new_ref(x)
//   Value v = r.get();             // r[...]
//   Value w = r[ellipsis];         // r[...] as well
//   r.set(v * 2);                  // r[...] = v * 2
//   r.set(i, v);                   // r[i] = v          (i: int or integer Value)
//   r.get(slice(2, 5), all);       // r[2:5, :]  (Python's start:stop, as lax.slice's limits)
//   r.get(ds(i, 4));               // r[pl.ds(i, 4)]: dynamic start, static size
//   r[i] += g;                     // one addupdate eqn: r.addupdate(g, i)
//   Value old = r.swap(v);         // swap, keeping the old contents
//   Value final = freeze(r);       // jax.freeze: r may not be used afterwards
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "refjit/value.h"

namespace refjit {

// A static slice, keeping the dim: Python's start:stop:step, resolved against the dim's size
// as Python and NumPy do (negative bounds count from the end; bounds past either end are
// clipped, so r[1:99] of 3 rows is r[1:3]).
struct Slice {
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
};
// Python's r[start:stop:step] (stop excluded; step >= 1, else E12), the convention of every
// range in the API (slice(x, start_indices, limit_indices) on values too). ds(i, size) is the
// one spelled by size, as Pallas's pl.ds.
inline Slice slice(int64_t start, int64_t stop, int64_t step = 1) {
  return Slice{start, stop, step};
}
// A slice with a dynamic start (clamped into range like dynamic_slice) and a static size.
struct DSlice {
  Value start;
  int64_t size = 0;
};
inline DSlice ds(Value start, int64_t size) { return DSlice{std::move(start), size}; }
// A whole dim (Python's `:`).
struct All {};
inline constexpr All all{};
inline constexpr All _{};
// Python's `...`: as many whole dims as needed.
struct Ellipsis {};
inline constexpr Ellipsis ellipsis{};

// One entry of an indexer: a static int, an integer Value (a scalar index, or an index
// array), a static slice, a dynamic slice, a whole dim or `...`.
class Index {
 public:
  using Variant = std::variant<int64_t, Value, Slice, DSlice, All, Ellipsis>;
  template <Scalar T>
  requires std::is_integral_v<T> Index(T i) : v_(static_cast<int64_t>(i)) {}  // NOLINT
  Index(Value i) : v_(std::move(i)) {}                                        // NOLINT
  Index(Slice s) : v_(s) {}                                                   // NOLINT
  Index(DSlice s) : v_(std::move(s)) {}                                       // NOLINT
  Index(All a) : v_(a) {}                                                     // NOLINT
  Index(Ellipsis e) : v_(e) {}                                                // NOLINT
  const Variant& get() const { return v_; }

 private:
  Variant v_;
};
using Indices = std::vector<Index>;

class RefView;

class Ref {
 public:
  const ArrayType& type() const;  // the inner array type: Ref{f32[3]} -> f32[3]
  RefKind kind() const;           // new_ref's kind
  const Shape& shape() const { return type().shape; }
  DType dtype() const { return type().dtype; }
  int rank() const { return type().rank(); }
  bool is_concrete() const;
  bool is_traced() const { return !is_concrete(); }

  // Reads: get() is r[...]; get(i, slice(...), ...) indexes leading dims.
  template <class... I>
  Value get(const I&... idx) const {
    return get_at(Indices{Index(idx)...});
  }
  // Writes (a swap whose old value is dropped): set(v) is r[...] = v; set(idx..., v).
  template <class... A>
  void set(const A&... args) const {
    static_assert(sizeof...(A) >= 1, "set needs a value");
    auto t = std::forward_as_tuple(args...);
    set_at(indices_of(t, std::make_index_sequence<sizeof...(A) - 1>{}),
           Value(std::get<sizeof...(A) - 1>(t)));
  }
  // swap(idx..., v): writes v, returns the old contents.
  template <class... A>
  Value swap(const A&... args) const {
    static_assert(sizeof...(A) >= 1, "swap needs a value");
    auto t = std::forward_as_tuple(args...);
    return swap_at(indices_of(t, std::make_index_sequence<sizeof...(A) - 1>{}),
                   Value(std::get<sizeof...(A) - 1>(t)));
  }
  // add(idx..., v): r[idx] += v as ONE addupdate eqn (JAX's ref.addupdate).
  template <class... A>
  void add(const A&... args) const {
    static_assert(sizeof...(A) >= 1, "add needs a value");
    auto t = std::forward_as_tuple(args...);
    add_at(indices_of(t, std::make_index_sequence<sizeof...(A) - 1>{}),
           Value(std::get<sizeof...(A) - 1>(t)));
  }
  const Ref& operator+=(const Value& v) const {
    add_at({}, v);
    return *this;
  }

  // r[idx]: a view to read (converts to Value), assign (set) or += (addupdate).
  RefView operator[](Index idx) const;

  Value get_at(const Indices& idx) const;
  void set_at(const Indices& idx, const Value& v) const;
  Value swap_at(const Indices& idx, const Value& v) const;
  void add_at(const Indices& idx, const Value& v) const;

  // The current contents of a concrete ref (a copy). Throws for a traced or frozen ref.
  Array value() const;
  // "Ref(0.5403023, dtype=float32)" for a concrete ref, "Traced<Ref{f32[]}>" otherwise.
  std::string str() const;

  // True if both name the same ref (the same storage, or the same traced variable).
  bool same_as(const Ref& other) const;

 private:
  friend struct NodeAccess;  // the library's way to the node (api/node.h)
  explicit Ref(std::shared_ptr<const OperandNode> node);
  template <class Tuple, size_t... K>
  static Indices indices_of(const Tuple& t, std::index_sequence<K...>) {
    return Indices{Index(std::get<K>(t))...};
  }
  std::shared_ptr<const OperandNode> node_;
};

// A ref indexed by one entry; r[ellipsis] is the whole ref.
class RefView {
 public:
  RefView(Ref ref, Indices idx) : ref_(std::move(ref)), idx_(std::move(idx)) {}
  Value get() const { return ref_.get_at(idx_); }
  operator Value() const { return get(); }  // NOLINT: reading a view gives its value
  const RefView& operator=(const Value& v) const {
    ref_.set_at(idx_, v);
    return *this;
  }
  const RefView& operator=(const RefView& other) const { return *this = other.get(); }
  const RefView& operator+=(const Value& v) const {
    ref_.add_at(idx_, v);
    return *this;
  }
  Value swap(const Value& v) const { return ref_.swap_at(idx_, v); }

 private:
  Ref ref_;
  Indices idx_;
};

// What x.at(idx...) returns (JAX's x.at[idx]): the functional reads and updates of a Value,
// spelled with a ref's indexers. Integer indices on consecutive dims (one at least a Value),
// the other dims whole or, beside index arrays, sliced, are JAX's gather / scatter: negative
// indices count from the end, a read clamps, an out-of-range update is dropped. Any other
// indexer goes through a ref
// holding x (new_ref, then get, or set / add and freeze), whose rules, derivatives and
// in-place buffers it takes; a scalar Value index there follows the same rules. Compiled,
// the update happens in x's buffer when x is not used afterwards.
class ValueAt {
 public:
  ValueAt(Value x, Indices idx) : x_(std::move(x)), idx_(std::move(idx)) {}
  Value get() const;                // x[idx]
  Value set(const Value& v) const;  // x.at[idx].set(v)
  Value add(const Value& v) const;  // x.at[idx].add(v): repeated indices add up

 private:
  Value x_;
  Indices idx_;
};

template <class... I>
ValueAt Value::at(const I&... idx) const {
  return ValueAt(*this, Indices{Index(idx)...});
}

// jax.new_ref(x): a fresh ref holding a copy of x. A C++ double (weakly typed, as a Python
// float) gives a float32 ref, as jax.new_ref(0.0) does; an int gives an int32 one.
// jax.new_ref(x, kind="no_grad_no_remat") is new_ref(x, RefKind::no_grad_no_remat): a ref that
// autodiff leaves alone (statistics, counters, logs written from differentiated code).
Ref new_ref(const Value& init, RefKind kind = RefKind::plain);
// jax.freeze(r): the final contents; using r afterwards is an error (E12).
Value freeze(const Ref& r);
// JAX's empty_ref(type): a fresh ref whose initial contents the program must not rely on
// (scratch space, written before it is read). refjit gives it zeros, so a read before the
// first write is deterministic; it is new_ref of a zero broadcast (no array is copied).
Ref empty_ref(const ArrayType& type);
// JAX's free_ref(r): the program is done with r; using it afterwards is an error (E12, as after
// freeze). Its storage goes when nothing refers to it.
void free_ref(const Ref& r);

std::string to_string(const Ref& r);
std::ostream& operator<<(std::ostream& os, const Ref& r);

}  // namespace refjit
