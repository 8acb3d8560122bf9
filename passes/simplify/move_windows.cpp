#include "passes/simplify/move_windows.h"

#include <algorithm>

namespace refjit {

namespace {

// Whether `slice`, a piece of the update of `updated`, may be read from its source at the
// update instead (passes/simplify/move_windows.h).
bool movable(const Eqn& slice, const Atom& updated, Rewriter& r) {
  if (slice.prim != Prim::dynamic_slice || slice.ins.empty() || slice.outs.size() != 1 ||
      !is_var(slice.ins[0]))
    return false;
  const Atom& source = slice.ins[0];
  if (r.type_of(source).is_ref || r.type_of(slice.outs[0]).is_ref) return false;
  const Shape& window = r.array_type(slice.outs[0]).shape;
  if (window.empty() ||
      !std::all_of(window.begin(), window.end() - 1, [](int64_t n) { return n == 1; }))
    return false;
  if (source == updated) return true;
  for (const Eqn& between : r.kept_after(slice))
    if (between.prim != Prim::slice && between.prim != Prim::dynamic_slice &&
        std::find(between.ins.begin(), between.ins.end(), source) != between.ins.end())
      return false;
  return true;
}

Rewritten update_of_slices(Eqn& update, Rewriter& r) {
  if (update.ins.size() < 2 || update.outs.size() != 1 || r.type_of(update.outs[0]).is_ref)
    return Rewritten::no;
  const Atom& x = update.ins[0];
  const Atom& u = update.ins[1];
  const size_t rank = static_cast<size_t>(r.array_type(x).rank());
  if (rank == 0 || update.ins.size() != 2 + rank || !is_var(u) || r.use_count(u) != 1)
    return Rewritten::no;
  const Eqn* def = r.def(u);
  if (!def) return Rewritten::no;
  std::vector<Atom> pieces;
  int64_t dimension = 0;
  if (def->prim == Prim::dynamic_slice) {
    pieces = {u};
  } else if (def->prim == Prim::concatenate) {
    pieces = def->ins;
    dimension = def->params.get<int64_t>("dimension");
  } else {
    return Rewritten::no;
  }
  std::vector<Atom> operands = {x};
  operands.insert(operands.end(), update.ins.begin() + 2, update.ins.end());
  IntListList sizes;
  int folded = 0, from_x = 0;
  for (const Atom& piece : pieces) {
    const Eqn* slice = r.def(piece);
    if (is_var(piece) && r.use_count(piece) == 1 && slice && slice->ins.size() == 1 + rank &&
        movable(*slice, x, r)) {
      operands.insert(operands.end(), slice->ins.begin(), slice->ins.end());
      sizes.push_back(slice->params.get<IntList>("slice_sizes"));
      ++folded;
      from_x += slice->ins[0] == x;
      continue;
    }
    // A piece kept as a value: the window of all of it.
    operands.push_back(piece);
    operands.insert(operands.end(), rank, Atom(Literal::of_int(DType::i32, 0)));
    const Shape& shape = r.array_type(piece).shape;
    sizes.emplace_back(shape.begin(), shape.end());
  }
  if (folded == 0 || from_x > 1) return Rewritten::no;
  Params params;
  params.set("dimension", dimension);
  params.set("slice_sizes", std::move(sizes));
  r.emit(Eqn{Prim::move_windows, std::move(params), std::move(operands), update.outs});
  return Rewritten::replaced;  // the slices and the concatenate, unread now, are pruned
}

const RewritePattern kPatterns[] = {
    {"update-of-slices", Prim::dynamic_update_slice, update_of_slices},
};

}  // namespace

std::span<const RewritePattern> move_windows_patterns() { return kPatterns; }

}  // namespace refjit
