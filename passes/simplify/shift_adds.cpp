#include "passes/simplify/shift_adds.h"

#include <algorithm>
#include <optional>

#include "ir/window_params.h"
#include "passes/jaxpr_util.h"
#include "passes/pattern_rewriter.h"
#include "refjit/ir/use_def.h"

namespace refjit {

namespace {

const Indexer& indexer_of(const Eqn& e) {
  static const Indexer whole;
  const ParamValue* pv = e.params.find("indexer");
  const Indexer* idx = pv ? std::get_if<Indexer>(pv) : nullptr;
  return idx ? *idx : whole;
}

// The window a swap's or addupdate's indexer takes of a ref of `shape`, as dynamic_slice takes
// one: per dim a start (the eqn's index operand, or a literal for a static start) and a size.
struct Window {
  std::vector<Atom> starts;
  IntList sizes;
  int64_t length = 1;
};

// The window of `e` if it is one contiguous row-major run; its dynamic starts are its operands
// from `first_dynamic` on, in dim order (after the ref and, for swap and addupdate, the value).
std::optional<Window> contiguous_window(const Eqn& e, const Shape& shape, size_t first_dynamic) {
  const Indexer& idx = indexer_of(e);
  if (idx.dims.size() > shape.size()) return std::nullopt;
  Window w;
  size_t k = first_dynamic;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d >= idx.dims.size()) {
      w.starts.emplace_back(Literal::of_int(DType::i32, 0));
      w.sizes.push_back(shape[d]);
      continue;
    }
    const IndexerDim& id = idx.dims[d];
    if (id.kind == IndexerDim::Kind::index_array) return std::nullopt;
    const int64_t size = id.kind == IndexerDim::Kind::index ? 1 : id.size;
    if (id.kind == IndexerDim::Kind::slice && id.stride != 1) return std::nullopt;
    if (size < 0 || size > shape[d]) return std::nullopt;
    w.sizes.push_back(size);
    if (id.dynamic) {
      if (k >= e.ins.size()) return std::nullopt;
      w.starts.push_back(e.ins[k++]);
    } else {
      if (id.start < 0 || id.start > shape[d] - size) return std::nullopt;
      w.starts.emplace_back(Literal::of_int(DType::i32, id.start));
    }
  }
  if (k != e.ins.size() || !contiguous_run(w.sizes, shape)) return std::nullopt;
  for (int64_t s : w.sizes) w.length *= s;
  return w;
}

// A static slice of one run of v (every dim but the last of size 1 and taken whole, stride 1):
// the run's offset and length in v's elements.
bool run_slice(const Jaxpr& j, const Eqn& e, Var v, int64_t& offset, int64_t& length) {
  if (e.prim != Prim::slice || e.ins.size() != 1 || e.outs.size() != 1 || !(e.ins[0] == Atom(v)))
    return false;
  const Shape& vs = j.type_of(v).array.shape;
  if (vs.empty()) return false;
  const IntList& start = e.params.get<IntList>("start_indices");
  const IntList& limit = e.params.get<IntList>("limit_indices");
  const IntList strides = e.params.get_or<IntList>("strides", IntList(vs.size(), 1));
  if (start.size() != vs.size() || limit.size() != vs.size() || strides.size() != vs.size())
    return false;
  for (size_t d = 0; d < vs.size(); ++d) {
    if (strides[d] != 1) return false;
    if (d + 1 < vs.size() && (vs[d] != 1 || limit[d] - start[d] != 1)) return false;
  }
  offset = start.back();
  length = limit.back() - start.back();
  return true;
}

bool plain_reshape(const Eqn& e) {
  const ParamValue* d = e.params.find("dimensions");
  return e.prim == Prim::reshape && e.ins.size() == 1 && e.outs.size() == 1 &&
         (!d || std::holds_alternative<NoneParam>(*d));
}

// One shift found at the eqn reading the run out: what replaces it and which eqns go.
struct Shift {
  size_t add = 0;
  std::vector<size_t> dropped;  // the chain, the addupdate, the zero broadcast
  std::vector<size_t> sides;    // side slices, replaced by results of the shift_add
  Eqn eqn;                      // the shift_add, placed at the swap
};

// The run is read out by eqn `s`: a swap of zeros, or a get followed by a swap of zeros over the
// same window whose old value nobody reads, with nothing naming the ref in between (how the
// transpose of a read and a zeroing comes out).
std::optional<Shift> shift_at(Jaxpr& j, const UseDef& ud, size_t s) {
  const Eqn& read = j.eqns[s];
  const bool get = read.prim == Prim::get;
  if ((!get && read.prim != Prim::swap) || read.ins.empty() || read.outs.size() != 1 ||
      !is_var(read.ins[0]))
    return std::nullopt;
  const Var ref = as_var(read.ins[0]);
  const Type rt = j.type_of(ref);
  if (!rt.is_ref || rt.array.dtype == DType::bool_) return std::nullopt;
  const Shape& shape = rt.array.shape;
  const std::optional<Window> w1 = contiguous_window(read, shape, get ? 1 : 2);
  if (!w1) return std::nullopt;
  auto names_ref = [&](const Eqn& e) {
    return std::find(e.ins.begin(), e.ins.end(), Atom(ref)) != e.ins.end();
  };
  Shift shift;
  size_t zeroing = s;  // the swap writing the zeros
  if (get) {
    zeroing = s + 1;
    while (zeroing < j.eqns.size() && !names_ref(j.eqns[zeroing])) ++zeroing;
    if (zeroing == j.eqns.size()) return std::nullopt;
    const Eqn& z = j.eqns[zeroing];
    if (z.prim != Prim::swap || z.outs.size() > 1 ||
        (z.outs.size() == 1 && (ud.use_count(z.outs[0]) != 0 || ud.is_output(z.outs[0]))) ||
        z.ins.size() != read.ins.size() + 1 || !(indexer_of(z) == indexer_of(read)) ||
        !std::equal(read.ins.begin() + 1, read.ins.end(), z.ins.begin() + 2))
      return std::nullopt;
    shift.dropped.push_back(zeroing);
  }
  const Eqn& sw = j.eqns[zeroing];
  if (sw.ins.size() < 2) return std::nullopt;
  // The value written: a zero literal, or a broadcast of one.
  const Literal* zero = std::get_if<Literal>(&sw.ins[1]);
  if (!zero) {
    const int64_t z = ud.def_index(as_var(sw.ins[1]));
    if (z < 0) return std::nullopt;
    const Eqn& b = j.eqns[z];
    if (b.prim != Prim::broadcast_in_dim || b.ins.size() != 1) return std::nullopt;
    zero = std::get_if<Literal>(&b.ins[0]);
    if (ud.read_once(as_var(sw.ins[1]))) shift.dropped.push_back(static_cast<size_t>(z));
  }
  if (!zero || !zero->equals(0.0) || zero->dtype != rt.array.dtype) return std::nullopt;
  // v: read by one chain ending in an addupdate of the same ref, else only by side slices.
  const Var v = read.outs[0];
  if (ud.is_output(v)) return std::nullopt;
  const std::vector<int32_t> readers = ud.readers(v);
  auto only_reader = [&](Var x) -> int64_t { return ud.read_once(x) ? ud.readers(x).front() : -1; };
  std::optional<Window> w2;
  int64_t offset = 0;
  int32_t main_reader = -1;
  std::vector<size_t> chain;
  for (int32_t q : readers) {
    chain.clear();
    Var x = v;
    int64_t step = q, off = 0, len = w1->length;
    if (run_slice(j, j.eqns[q], v, off, len)) {
      chain.push_back(q);
      x = j.eqns[q].outs[0];
      step = only_reader(x);
    } else {
      off = 0;
      len = w1->length;
    }
    if (step >= 0 && plain_reshape(j.eqns[step]) && j.eqns[step].ins[0] == Atom(x)) {
      chain.push_back(static_cast<size_t>(step));
      x = j.eqns[step].outs[0];
      step = only_reader(x);
    }
    if (step < 0) continue;
    const Eqn& add = j.eqns[step];
    if (add.prim != Prim::addupdate || add.ins.size() < 2 || !(add.ins[0] == Atom(ref)) ||
        !(add.ins[1] == Atom(x)))
      continue;
    w2 = contiguous_window(add, shape, 2);
    if (!w2 || w2->length != len) continue;
    shift.add = static_cast<size_t>(step);
    offset = off;
    main_reader = q;
    break;
  }
  if (main_reader < 0) return std::nullopt;
  // Side slices: runs of v between the swap and the addupdate, each reading v once.
  IntList side_offsets, side_lengths;
  for (int32_t q : readers) {
    if (q == main_reader) continue;
    int64_t off = 0, len = 0;
    if (!run_slice(j, j.eqns[q], v, off, len) || static_cast<size_t>(q) >= shift.add ||
        std::count(readers.begin(), readers.end(), q) != 1)
      return std::nullopt;
    shift.sides.push_back(q);
    side_offsets.push_back(off);
    side_lengths.push_back(len);
  }
  // Nothing else between the swap and the addupdate touches the ref.
  for (size_t k = s + 1; k < shift.add; ++k) {
    if (k == zeroing || std::count(chain.begin(), chain.end(), k) ||
        std::count(shift.sides.begin(), shift.sides.end(), k))
      continue;
    if (names_ref(j.eqns[k])) return std::nullopt;
  }
  // The addupdate's starts must exist at the swap.
  for (const Atom& a : w2->starts)
    if (is_var(a) && ud.def_index(as_var(a)) > static_cast<int64_t>(s)) return std::nullopt;
  shift.dropped.insert(shift.dropped.end(), chain.begin(), chain.end());
  shift.dropped.push_back(shift.add);
  // The shift_add: its results are the side runs, flat.
  Eqn& e = shift.eqn;
  e.prim = Prim::shift_add;
  e.params.set("write_sizes", w1->sizes);
  e.params.set("add_sizes", w2->sizes);
  e.params.set("offset", offset);
  e.params.set("side_offsets", side_offsets);
  e.params.set("side_lengths", side_lengths);
  e.ins = {Atom(ref), Atom(*zero)};
  e.ins.insert(e.ins.end(), w1->starts.begin(), w1->starts.end());
  e.ins.insert(e.ins.end(), w2->starts.begin(), w2->starts.end());
  for (int64_t len : side_lengths)
    e.outs.push_back(j.new_var(Type(ArrayType{rt.array.dtype, {len}})));
  return shift;
}

int shift_adds_in(Jaxpr& j) {
  int changes = 0;
  for (Eqn& e : j.eqns) changes += rewrite_body(e, shift_adds_in);
  const UseDef ud(j);
  const size_t n = j.eqns.size();
  std::vector<bool> drop(n, false);
  std::vector<std::optional<Eqn>> replacement(n);
  for (size_t s = 0; s < n; ++s) {
    if (drop[s]) continue;
    std::optional<Shift> shift = shift_at(j, ud, s);
    if (!shift) continue;
    for (size_t k : shift->dropped) drop[k] = true;
    // Each side slice becomes a reshape of its flat run (a view: no copy).
    for (size_t k = 0; k < shift->sides.size(); ++k) {
      const Eqn& side = j.eqns[shift->sides[k]];
      Params params{{"dimensions", NoneParam{}},
                    {"new_sizes", IntList(j.type_of(side.outs[0]).array.shape)}};
      replacement[shift->sides[k]] =
          Eqn{Prim::reshape, std::move(params), {shift->eqn.outs[k]}, side.outs};
    }
    replacement[s] = std::move(shift->eqn);
    ++changes;
  }
  if (std::none_of(replacement.begin(), replacement.end(), [](const auto& r) { return r; }))
    return changes;
  std::vector<Eqn> eqns;
  for (size_t k = 0; k < n; ++k) {
    if (replacement[k])
      eqns.push_back(std::move(*replacement[k]));
    else if (!drop[k])
      eqns.push_back(std::move(j.eqns[k]));
  }
  j.eqns = std::move(eqns);
  remove_unread_pure_eqns(j);  // a zero broadcast another swap read, now read by none
  return changes;
}

}  // namespace

Jaxpr shift_adds(const Jaxpr& jaxpr, int* changes) {
  return rewritten_copy(jaxpr, shift_adds_in, changes);
}

}  // namespace refjit
