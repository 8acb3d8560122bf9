#include "passes/ad/window_shift.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <span>

#include "ir/window_params.h"
#include "passes/jaxpr_util.h"

namespace refjit {

namespace {

// One operand of the update's concatenation (or the update itself): its place in the window's
// flat run.
struct Piece {
  Atom value;  // an atom of the linear jaxpr
  Shape shape;
  int64_t start = 0;
  int64_t length = 0;
};

// Whether `e` (an eqn of `lin`) keeps its operand's flat run as it is: a row-major reshape, or
// a broadcast that only adds dims of size 1 (how a scalar becomes a one-element piece).
bool keeps_flat_run(LinearProgram& lin, const Eqn* e) {
  if (!e || e->ins.size() != 1 || e->outs.size() != 1) return false;
  if (e->prim == Prim::reshape) return is_row_major_reshape(*e);
  if (e->prim != Prim::broadcast_in_dim) return false;
  const Accum* in = lin.accumulator(e->ins[0]);
  const Accum* out = lin.accumulator(e->outs[0]);
  if (!in || !out) return false;
  const IntList& dims = e->params.get<IntList>("broadcast_dimensions");
  const Shape& from = in->type().shape;
  const Shape& to = out->type().shape;
  if (dims.size() != from.size() || !std::is_sorted(dims.begin(), dims.end())) return false;
  for (size_t k = 0; k < dims.size(); ++k)
    if (to.at(static_cast<size_t>(dims[k])) != from[k]) return false;
  return num_elements(from) == num_elements(to);
}

// The eqn making `a`, looked through eqns that keep a value's flat run.
const Eqn* source_of(LinearProgram& lin, const Atom& a) {
  const Eqn* def = lin.definition(a);
  for (int depth = 0; depth < 8 && keeps_flat_run(lin, def); ++depth)
    def = lin.definition(def->ins[0]);
  return def;
}

// A window of a ref or array: per dim its start (as the transposed program holds it) and size.
struct Window {
  std::vector<Atom> starts;
  IntList sizes;
  int64_t length = 1;
};

// The window a ref access's indexer takes of a ref of `shape`, if it is one contiguous
// row-major run; `dyn`: the access's dynamic operands as the transposed program holds them.
std::optional<Window> window_of_access(const Indexer& ix, std::span<const Atom> dyn,
                                       const Shape& shape) {
  if (ix.dims.size() > shape.size()) return std::nullopt;
  Window w;
  size_t k = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d >= ix.dims.size()) {
      w.starts.emplace_back(Literal::of_int(DType::i32, 0));
      w.sizes.push_back(shape[d]);
      continue;
    }
    const IndexerDim& id = ix.dims[d];
    if (id.kind == IndexerDim::Kind::index_array) return std::nullopt;
    if (id.kind == IndexerDim::Kind::slice && id.stride != 1) return std::nullopt;
    const int64_t size = id.kind == IndexerDim::Kind::index ? 1 : id.size;
    if (size < 0 || size > shape[d]) return std::nullopt;
    w.sizes.push_back(size);
    if (id.dynamic) {
      if (k >= dyn.size()) return std::nullopt;
      w.starts.push_back(dyn[k++]);
    } else {
      if (id.start < 0 || id.start > shape[d] - size) return std::nullopt;
      w.starts.emplace_back(Literal::of_int(DType::i32, id.start));
    }
  }
  if (k != dyn.size() || !contiguous_run(w.sizes, shape)) return std::nullopt;
  for (int64_t s : w.sizes) w.length *= s;
  return w;
}

// The non-linear operands of `e` from `first` on, as the transposed program holds them.
std::optional<std::vector<Atom>> index_values(LinearProgram& lin, const Eqn& e, size_t first) {
  std::vector<Atom> values;
  for (size_t k = first; k < e.ins.size(); ++k) {
    if (lin.accumulator(e.ins[k])) return std::nullopt;
    values.push_back(lin.value(e.ins[k]));
  }
  return values;
}

// The pieces of the update `u` (of shape `ut`, written over a window that is one run): the
// operands of the concatenation it is (maybe reshaped), each a run of the window when the
// concatenation has size 1 before its dim; else `u` itself.
std::optional<std::vector<Piece>> pieces_of(Emitter& e, LinearProgram& lin, const Atom& u,
                                            const Shape& ut) {
  std::vector<Atom> parts{u};
  size_t dim = 0;
  Shape joined = ut;
  if (const Eqn* cat = source_of(lin, u); cat && cat->prim == Prim::concatenate) {
    parts = cat->ins;
    dim = static_cast<size_t>(cat->params.get<int64_t>("dimension"));
    const Accum* joined_acc = lin.accumulator(cat->outs[0]);
    if (!joined_acc) return std::nullopt;
    joined = joined_acc->type().shape;
  }
  if (joined.empty()) return std::vector<Piece>{Piece{u, joined, 0, 1}};
  if (dim >= joined.size() || std::any_of(joined.begin(), joined.begin() + static_cast<long>(dim),
                                          [](int64_t s) { return s != 1; }))
    return std::nullopt;
  int64_t inner = 1;
  for (size_t d = dim + 1; d < joined.size(); ++d) inner *= joined[d];
  std::vector<Piece> pieces;
  int64_t at = 0;
  for (const Atom& p : parts) {
    const Accum* acc = lin.accumulator(p);
    Piece piece{p, acc ? acc->type().shape : e.array_type_of(lin.value(p)).shape, at, 0};
    if (piece.shape.size() != joined.size()) return std::nullopt;
    piece.length = piece.shape[dim] * inner;
    at += piece.length;
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

// On `ref` (holding a cotangent of dtype `dt`): reads the run `write`, returns the other
// pieces' parts of it to their accumulators, writes zeros over it, and adds the moved piece's
// part at `add`.
void emit_shift(Emitter& e, LinearProgram& lin, const Atom& ref, DType dt, const Window& write,
                const Window& add, const std::vector<Piece>& pieces, size_t moved) {
  IntList side_offsets, side_lengths;
  std::vector<size_t> sided;  // the pieces whose parts are side results, in order
  for (size_t k = 0; k < pieces.size(); ++k) {
    const Accum* acc = lin.accumulator(pieces[k].value);
    if (k == moved || !acc || !acc->wanted()) continue;
    side_offsets.push_back(pieces[k].start);
    side_lengths.push_back(pieces[k].length);
    sided.push_back(k);
  }
  Params params;
  params.set("write_sizes", write.sizes);
  params.set("add_sizes", add.sizes);
  params.set("offset", pieces[moved].start);
  params.set("side_offsets", side_offsets);
  params.set("side_lengths", side_lengths);
  std::vector<Atom> ins{ref, Literal::of(dt, 0.0)};
  ins.insert(ins.end(), write.starts.begin(), write.starts.end());
  ins.insert(ins.end(), add.starts.begin(), add.starts.end());
  const std::vector<Var> sides = e.emit(Prim::shift_add, std::move(ins), std::move(params));
  for (size_t k = 0; k < sided.size(); ++k) {
    const Piece& p = pieces[sided[k]];
    lin.accumulator(p.value)->add(e, e.reshape(sides[k], p.shape));
  }
}

bool wanted(LinearProgram& lin, const Atom& a) {
  const Accum* acc = lin.accumulator(a);
  return acc && acc->wanted();
}

// Whether an eqn of `eqns` strictly between positions `from` and `to` names `ref`.
bool named_between(std::span<const Eqn> eqns, size_t from, size_t to, const Atom& ref) {
  for (size_t k = from + 1; k < to; ++k)
    if (std::find(eqns[k].ins.begin(), eqns[k].ins.end(), ref) != eqns[k].ins.end()) return true;
  return false;
}

}  // namespace

bool transpose_window_shift(Emitter& e, TransposeArgs& a) {
  LinearProgram* lin = a.program;
  if (!lin || a.eqn.ins.size() < 2 || !a.linear(1) || !a.wants(0)) return false;
  Accum& out = *a.out_acc[0];
  Accum& x_acc = *a.acc[0];
  if (!out.can_hand_over() || !x_acc.can_alias()) return false;
  const Atom& x = a.eqn.ins[0];
  const ArrayType xt = out.type();
  const Shape& ut = a.acc[1]->type().shape;
  if (!is_float(xt.dtype) || xt.shape.empty() || ut.size() != xt.shape.size() ||
      !contiguous_run(IntList(ut), xt.shape))
    return false;
  const std::optional<std::vector<Piece>> pieces = pieces_of(e, *lin, a.eqn.ins[1], ut);
  if (!pieces) return false;
  // The moved piece: a window dynamic_slice(x, j) (maybe reshaped) that is one run of x.
  for (size_t k = 0; k < pieces->size(); ++k) {
    const Piece& p = (*pieces)[k];
    const Eqn* slice = source_of(*lin, p.value);
    if (!wanted(*lin, p.value) || !slice || slice->prim != Prim::dynamic_slice ||
        slice->ins.empty() || !(slice->ins[0] == x))
      continue;
    const std::optional<std::vector<Atom>> from = index_values(*lin, *slice, 1);
    const IntList& sizes = slice->params.get<IntList>("slice_sizes");
    if (!from || from->size() != xt.shape.size() || !contiguous_run(sizes, xt.shape)) continue;
    Window add{*from, sizes, 1};
    for (int64_t s : sizes) add.length *= s;
    if (add.length != p.length) continue;
    const Atom r = out.buffer(e);
    if (!out.holds_in(r)) return false;  // a reshaped view of another value's ref
    emit_shift(e, *lin, r, xt.dtype, Window{a.dyn(2), IntList(ut), num_elements(ut)}, add, *pieces,
               k);
    x_acc.alias_of(e, out);  // x's cotangent is y's, in the same ref, from now on
    return true;
  }
  return false;
}

bool transpose_ref_shift(Emitter& e, TransposeArgs& a) {
  LinearProgram* lin = a.program;
  // The swapped-out old value must have no cotangent: zeros are written, as shift_add writes.
  if (!lin || a.eqn.ins.size() < 2 || !a.linear(0) || !a.linear(1) || a.ct.empty() || a.ct[0])
    return false;
  Accum& r = *a.acc[0];
  if (!r.has_buffer()) return false;
  const Atom& ref = a.eqn.ins[0];
  const ArrayType rt = r.type();
  if (!is_float(rt.dtype)) return false;  // complex cotangents take the general path
  const std::optional<Window> write =
      window_of_access(a.eqn.params.get<Indexer>("indexer"), a.dyn(2), rt.shape);
  const Shape& ut = a.acc[1]->type().shape;
  if (!write || num_elements(ut) != write->length) return false;
  const std::optional<std::vector<Piece>> pieces = pieces_of(e, *lin, a.eqn.ins[1], ut);
  if (!pieces) return false;
  const std::span<const Eqn> eqns = lin->eqns();
  // The rule's eqn is one of the linear jaxpr's (a rule handed a made-up eqn takes no shift).
  const auto is_ours = [&](const Eqn* q) {
    return !eqns.empty() && std::less_equal<const Eqn*>()(eqns.data(), q) &&
           std::less<const Eqn*>()(q, eqns.data() + eqns.size());
  };
  if (!is_ours(&a.eqn)) return false;
  const size_t here = static_cast<size_t>(&a.eqn - eqns.data());
  // The moved piece: a read of the same ref (maybe reshaped), its run contiguous, with nothing
  // naming the ref between the read and this write (so the add can move to the write).
  for (size_t k = 0; k < pieces->size(); ++k) {
    const Piece& p = (*pieces)[k];
    const Eqn* get = source_of(*lin, p.value);
    if (!wanted(*lin, p.value) || !get || get->prim != Prim::get || get->ins.empty() ||
        !(get->ins[0] == ref))
      continue;
    if (!is_ours(get)) continue;
    const size_t at = static_cast<size_t>(get - eqns.data());
    const std::optional<std::vector<Atom>> dyn = index_values(*lin, *get, 1);
    if (!dyn || at >= here || named_between(eqns, at, here, ref)) continue;
    const std::optional<Window> add =
        window_of_access(get->params.get<Indexer>("indexer"), *dyn, rt.shape);
    if (!add || add->length != p.length) continue;
    const Atom buffer = r.buffer(e);
    if (!r.holds_in(buffer)) return false;
    emit_shift(e, *lin, buffer, rt.dtype, *write, *add, *pieces, k);
    return true;
  }
  return false;
}

}  // namespace refjit
