#include "passes/ad/window_shift.h"

#include <algorithm>
#include <optional>

#include "ir/window_params.h"

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
  if (e->prim == Prim::reshape) {
    const ParamValue* d = e->params.find("dimensions");
    return !d || std::holds_alternative<NoneParam>(*d);
  }
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

// The window dynamic_slice(x, j) that `piece` is (maybe reshaped), if its run is contiguous in
// x and has the piece's length.
const Eqn* moved_window(LinearProgram& lin, const Atom& x, const Piece& piece,
                        const Shape& x_shape) {
  const Eqn* def = source_of(lin, piece.value);
  if (!def || def->prim != Prim::dynamic_slice || def->ins.empty() || !(def->ins[0] == x) ||
      def->ins.size() != 1 + x_shape.size())
    return nullptr;
  const IntList& sizes = def->params.get<IntList>("slice_sizes");
  int64_t length = 1;
  for (int64_t s : sizes) length *= s;
  return length == piece.length && contiguous_run(sizes, x_shape) ? def : nullptr;
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
  const size_t rank = xt.shape.size();
  if (rank == 0 || ut.size() != rank || !contiguous_run(IntList(ut), xt.shape)) return false;

  // The update's pieces: the operands of the concatenation it is (maybe reshaped), each a run
  // of the window when the concatenation has size 1 before its dim; else the update itself.
  std::vector<Atom> parts{a.eqn.ins[1]};
  size_t dim = 0;
  Shape joined = ut;
  if (const Eqn* cat = source_of(*lin, a.eqn.ins[1]); cat && cat->prim == Prim::concatenate) {
    parts = cat->ins;
    dim = static_cast<size_t>(cat->params.get<int64_t>("dimension"));
    const Accum* joined_acc = lin->accumulator(cat->outs[0]);
    if (!joined_acc) return false;
    joined = joined_acc->type().shape;
  }
  if (dim >= joined.size() || std::any_of(joined.begin(), joined.begin() + static_cast<long>(dim),
                                          [](int64_t s) { return s != 1; }))
    return false;
  int64_t inner = 1;
  for (size_t d = dim + 1; d < joined.size(); ++d) inner *= joined[d];
  std::vector<Piece> pieces;
  std::optional<size_t> moved;
  const Eqn* window = nullptr;
  int64_t at = 0;
  for (const Atom& p : parts) {
    const Accum* acc = lin->accumulator(p);
    Piece piece{p, acc ? acc->type().shape : e.array_type_of(lin->value(p)).shape, at, 0};
    if (piece.shape.size() != joined.size()) return false;
    piece.length = piece.shape[dim] * inner;
    at += piece.length;
    if (!moved && acc && (window = moved_window(*lin, x, piece, xt.shape))) moved = pieces.size();
    pieces.push_back(std::move(piece));
  }
  if (!moved) return false;
  // Where the moved piece came from: non-linear start indices, one per dim.
  const IntList& from_sizes = window->params.get<IntList>("slice_sizes");
  std::vector<Atom> from;
  for (size_t k = 1; k < window->ins.size(); ++k) {
    if (lin->accumulator(window->ins[k])) return false;
    from.push_back(lin->value(window->ins[k]));
  }
  const Atom r = out.buffer(e);
  if (!out.holds_in(r)) return false;  // a reshaped view of another value's ref

  IntList side_offsets, side_lengths;
  std::vector<size_t> sided;  // the pieces whose parts are side results, in order
  for (size_t k = 0; k < pieces.size(); ++k) {
    const Accum* acc = lin->accumulator(pieces[k].value);
    if (k == *moved || !acc || !acc->wanted()) continue;
    side_offsets.push_back(pieces[k].start);
    side_lengths.push_back(pieces[k].length);
    sided.push_back(k);
  }
  Params params;
  params.set("write_sizes", IntList(ut));
  params.set("add_sizes", from_sizes);
  params.set("offset", pieces[*moved].start);
  params.set("side_offsets", side_offsets);
  params.set("side_lengths", side_lengths);
  std::vector<Atom> ins{r, Literal::of(xt.dtype, 0.0)};
  const std::vector<Atom> to = a.dyn(2);
  ins.insert(ins.end(), to.begin(), to.end());
  ins.insert(ins.end(), from.begin(), from.end());
  const std::vector<Var> sides = e.emit(Prim::shift_add, std::move(ins), std::move(params));
  x_acc.alias_of(e, out);
  for (size_t k = 0; k < sided.size(); ++k)
    lin->accumulator(pieces[sided[k]].value)->add(e, e.reshape(sides[k], pieces[sided[k]].shape));
  return true;
}

}  // namespace refjit
