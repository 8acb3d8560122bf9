#include "passes/ad/last_write_mask.h"

#include <algorithm>

namespace refjit {

namespace {

// keep[i] = no j > i with flat[j] == flat[i]: a [K, K] comparison.
Atom pairwise(Emitter& e, Atom flat, int64_t k) {
  const Shape sq{k, k};
  Atom same =
      e.emit1(Prim::eq, {e.broadcast_in_dim(flat, sq, {0}), e.broadcast_in_dim(flat, sq, {1})});
  Atom later = e.emit1(Prim::gt, {e.iota(sq, 1), e.iota(sq, 0)});
  Atom overwritten = e.convert(e.emit1(Prim::and_, {same, later}), DType::i32);
  Atom any = e.emit1(Prim::reduce_max, {overwritten}, Params{{"axes", IntList{1}}});
  return e.emit1(Prim::eq, {any, e.scalar(DType::i32, 0.0)});
}

// keep[i] = (scatter of 0..K-1 at flat, last wins)[flat[i]] == i.
Atom through_scratch(Emitter& e, Atom flat, int64_t k, int64_t range) {
  Atom pos = e.iota({k}, 0);
  Atom scratch = e.full(ArrayType{DType::i32, {range}}, -1.0);
  Atom winners = e.emit1(Prim::scatter, {scratch, flat, pos}, Params{{"axis", int64_t{0}}});
  Atom back = e.emit1(Prim::gather, {winners, flat}, Params{{"axis", int64_t{0}}});
  return e.emit1(Prim::eq, {back, pos});
}

}  // namespace

Atom last_write_mask(Emitter& e, Atom keys, int64_t range) {
  const ArrayType kt = e.array_type_of(keys);
  const int64_t k = kt.num_elements();
  // One key cannot be overwritten; with range 0 every key is out of range (callers mask).
  if (k <= 1 || range <= 0) return e.full(ArrayType{DType::bool_, kt.shape}, 1.0);
  Atom flat = e.reshape(keys, {k});
  Atom keep = k * k <= std::max(kPairwiseLimit, range) ? pairwise(e, flat, k)
                                                       : through_scratch(e, flat, k, range);
  return e.reshape(keep, kt.shape);
}

}  // namespace refjit
