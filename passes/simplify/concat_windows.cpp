#include "passes/simplify/concat_windows.h"

#include <algorithm>

namespace refjit {

namespace {

// Whether the slice `slice` (defining a piece of the concatenate being rewritten) may be read
// from its operand at the concatenate instead (passes/simplify/concat_windows.h).
bool foldable(const Eqn& slice, Rewriter& r) {
  if (slice.prim != Prim::slice || slice.ins.size() != 1 || slice.outs.size() != 1 ||
      !is_var(slice.ins[0]))
    return false;
  const Atom& x = slice.ins[0];
  if (r.type_of(x).is_ref) return false;
  for (const Eqn& between : r.kept_after(slice))
    if (between.prim != Prim::slice &&
        std::find(between.ins.begin(), between.ins.end(), x) != between.ins.end())
      return false;
  return true;
}

Rewritten concatenate_of_slices(Eqn& concat, Rewriter& r) {
  if (concat.outs.size() != 1 || concat.ins.empty()) return Rewritten::no;
  const IntList full_stride(static_cast<size_t>(r.array_type(concat.outs[0]).rank()), 1);
  IntListList starts, limits, strides;
  std::vector<Atom> operands;
  bool any = false;
  for (const Atom& piece : concat.ins) {
    const Eqn* slice = r.def(piece);
    if (is_var(piece) && r.use_count(piece) == 1 && slice && foldable(*slice, r)) {
      starts.push_back(slice->params.get<IntList>("start_indices"));
      limits.push_back(slice->params.get<IntList>("limit_indices"));
      strides.push_back(slice->params.get_or<IntList>("strides", full_stride));
      operands.push_back(slice->ins[0]);
      any = true;
      continue;
    }
    const Shape& shape = r.array_type(piece).shape;
    starts.emplace_back(shape.size(), 0);
    limits.emplace_back(shape.begin(), shape.end());
    strides.push_back(full_stride);
    operands.push_back(piece);
  }
  if (!any) return Rewritten::no;
  Params params;
  params.set("dimension", concat.params.get<int64_t>("dimension"));
  params.set("limit_indices", std::move(limits));
  params.set("start_indices", std::move(starts));
  params.set("strides", std::move(strides));
  r.emit(Eqn{Prim::concat_windows, std::move(params), std::move(operands), concat.outs});
  return Rewritten::replaced;  // the slices, unread now, are pruned
}

const RewritePattern kPatterns[] = {
    {"concatenate-of-slices", Prim::concatenate, concatenate_of_slices},
};

}  // namespace

std::span<const RewritePattern> concat_windows_patterns() { return kPatterns; }

}  // namespace refjit
