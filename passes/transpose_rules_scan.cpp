// Transpose of `scan` (REFS.md 4.2-4.3, DESIGN.md "Sparse cotangents never go dense"), and
// the aliasing transpose of `dynamic_update_slice` it relies on.
//
// The transposed scan runs with reverse = !reverse and has NO carries:
//  * each carry's cotangent lives in one internal ref R for the whole loop (created once
//    before it from the carry's final cotangent, or the output accumulator's buffer taken
//    over as is); the body's carry-out cotangent is held in R on entry and R holds the
//    carry-in cotangent on exit (transpose_jaxpr_holding), so a step whose body reads and
//    updates slices of the carry costs O(slice): slice swaps and slice addupdates on R;
//  * linear consts (user gradient refs, tangent refs, value accumulators) are passed in as
//    ref consts and updated in place every iteration (a value accumulator gets an internal
//    ref made once, outside the loop, never a dense loop carry);
//  * linear xs whose accumulator is a ref (a scanned tangent ref, a user's gradient ref) are
//    scanned refs; value xs cotangents are the transposed scan's stacked ys;
//  * DontWant inputs do no work; non-linear operands (residuals) are passed as they are.
#include <fmt/format.h>

#include <memory>
#include <unordered_set>
#include <utility>

#include "passes/transpose.h"
#include "passes/transpose_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

Indexer dynamic_slice_indexer(const Shape& sizes) {
  Indexer ix;
  for (int64_t s : sizes) ix.dims.push_back(IndexerDim{IndexerDim::Kind::slice, 0, s, 1, true});
  return ix;
}

// c_out = dynamic_update_slice(c, u, idx). The cotangent of c is c_out's except on the
// updated slice, which is u's. When c_out's sum lives in a ref it can hand over and c's
// accumulator holds nothing but sparse contributions (reads of c, however placed), the
// slice is swapped out (u's cotangent, zeros left behind) and c's accumulator BECOMES the
// ref, its pending contributions added in place: O(slice), no copy. If c already received a
// dense contribution (e.g. c is also used whole), the ref's contents are added into it:
// dense, but correct. A value sum takes the dense path (dynamic_update_slice of zeros).
void dynamic_update_slice_transpose(Emitter& e, TransposeArgs& a) {
  Accum& out = *a.out_acc[0];
  if (out.is_empty()) return;
  const std::vector<Atom> idx = a.dyn(2);
  const ArrayType ut = a.acc[1] ? a.acc[1]->type() : e.array_type_of(a.val[1]);
  const Indexer ix = dynamic_slice_indexer(ut.shape);
  if (out.can_hand_over()) {
    if (a.wants(0)) {
      Atom cu = out.swap_out(e, e.zeros(ut), ix, idx);
      if (a.wants(1)) a.acc[1]->add(e, cu);
      if (a.acc[0]->can_alias())
        a.acc[0]->alias_of(e, out);
      else
        a.acc[0]->add(e, out.freeze(e));  // c read after the update: dense fallback
    } else if (a.wants(1)) {
      a.acc[1]->add(e, out.read_at(e, ix, idx));
    }
    return;
  }
  MaybeAtom ct = out.freeze(e);
  if (!ct) return;
  if (a.wants(0)) {
    std::vector<Atom> ins{*ct, e.zeros(ut)};
    ins.insert(ins.end(), idx.begin(), idx.end());
    a.acc[0]->add(e, e.emit1(Prim::dynamic_update_slice, ins));
  }
  if (a.wants(1)) {
    std::vector<Atom> ins{*ct};
    ins.insert(ins.end(), idx.begin(), idx.end());
    a.acc[1]->add(e, e.emit1(Prim::dynamic_slice, ins, Params{{"slice_sizes", IntList(ut.shape)}}));
  }
}

void scan_transpose(Emitter& e, TransposeArgs& a) {
  const Params& p = a.eqn.params;
  const Jaxpr& body = *p.get<JaxprPtr>("jaxpr");
  const size_t nc = static_cast<size_t>(p.get<int64_t>("num_consts"));
  const size_t ncar = static_cast<size_t>(p.get<int64_t>("num_carry"));
  const bool reverse = p.get<bool>("reverse");
  const size_t n = a.acc.size(), ny = a.out_acc.size() - ncar;
  if (body.invars.size() != n || body.outvars.size() != a.out_acc.size())
    throw Error("transpose: scan body binders do not match the scan's operands");

  // One array accumulator feeding several linear operands (one array passed as a const and
  // as an xs, or as two carries): every operand after the first gets its own accumulator
  // for the loop, added into the shared one after it. Otherwise one buffer (an internal ref
  // or the user's gradient ref) would be passed twice, e.g. as a ref const and as a scanned
  // ref, and the scanned row's write-back would undo the const's updates. The cotangents of
  // Ref-typed operands stay shared: the forward scan saw the same aliasing ref twice.
  std::vector<std::pair<Accum*, std::unique_ptr<Accum>>> split;
  {
    std::unordered_set<const Accum*> seen;
    for (size_t i = 0; i < n; ++i) {
      Accum* acc = a.acc[i];
      if (!acc || acc->is_ref_value() || seen.insert(acc).second) continue;
      auto own = std::make_unique<Accum>(acc->wanted() ? Accum::value(acc->type())
                                                       : Accum::dont_want(acc->type()));
      a.acc[i] = own.get();
      split.emplace_back(acc, std::move(own));
    }
  }

  // Body binders reordered [residual consts, residual xs, linear consts, carries, linear xs].
  std::vector<size_t> res_c, res_x, lin_c, lin_x;
  for (size_t i = 0; i < nc; ++i) (a.linear(i) ? lin_c : res_c).push_back(i);
  for (size_t i = nc + ncar; i < n; ++i) (a.linear(i) ? lin_x : res_x).push_back(i);
  Jaxpr b = body;
  b.invars.clear();
  for (auto* group : {&res_c, &res_x, &lin_c})
    for (size_t i : *group) b.invars.push_back(body.invars[i]);
  for (size_t i = nc; i < nc + ncar; ++i) b.invars.push_back(body.invars[i]);
  for (size_t i : lin_x) b.invars.push_back(body.invars[i]);

  std::vector<AccumKind> kinds;
  std::vector<Atom> ref_consts, carry_refs, ref_xs;
  for (size_t i : lin_c) {
    Accum& acc = *a.acc[i];
    if (acc.is_ref_like() || acc.wanted()) {
      kinds.push_back(AccumKind::ref);
      ref_consts.push_back(acc.buffer(e));  // one internal ref for a value accumulator
    } else {
      kinds.push_back(AccumKind::dont_want);
    }
  }
  std::vector<int> held(a.out_acc.size(), -1);
  for (size_t c = 0; c < ncar; ++c) {
    held[c] = static_cast<int>(kinds.size());
    kinds.push_back(AccumKind::ref);
    carry_refs.push_back(a.out_acc[c]->take_buffer(e));  // R: the carry's final cotangent
  }
  std::vector<size_t> value_xs;
  for (size_t i : lin_x) {
    Accum& acc = *a.acc[i];
    if (acc.is_ref_like() || acc.has_buffer()) {
      kinds.push_back(AccumKind::ref);
      ref_xs.push_back(acc.buffer(e));  // scanned: iteration i adds into row i
    } else if (acc.wanted()) {
      kinds.push_back(AccumKind::value);
      value_xs.push_back(i);
    } else {
      kinds.push_back(AccumKind::dont_want);
    }
  }
  const int nn = static_cast<int>(res_c.size() + res_x.size());
  Jaxpr tb = transpose_jaxpr_holding(b, nn, kinds, held);

  // tb binds [res consts, res xs, const refs, carry refs, xs refs, ct ys]; scan wants
  // [res consts, const refs, carry refs | res xs, xs refs, ct ys].
  {
    std::vector<Var> iv = tb.invars;
    const size_t nrc = res_c.size(), nrx = res_x.size();
    const size_t nref = ref_consts.size() + carry_refs.size();
    std::vector<Var> r(iv.begin(), iv.begin() + static_cast<long>(nrc));
    r.insert(r.end(), iv.begin() + static_cast<long>(nrc + nrx),
             iv.begin() + static_cast<long>(nrc + nrx + nref));
    r.insert(r.end(), iv.begin() + static_cast<long>(nrc),
             iv.begin() + static_cast<long>(nrc + nrx));
    r.insert(r.end(), iv.begin() + static_cast<long>(nrc + nrx + nref), iv.end());
    tb.invars = std::move(r);
  }
  std::vector<Atom> ins;
  for (size_t i : res_c) ins.push_back(a.val[i]);
  ins.insert(ins.end(), ref_consts.begin(), ref_consts.end());
  ins.insert(ins.end(), carry_refs.begin(), carry_refs.end());
  for (size_t i : res_x) ins.push_back(a.val[i]);
  ins.insert(ins.end(), ref_xs.begin(), ref_xs.end());
  for (size_t k = 0; k < ny; ++k) {
    Accum& acc = *a.out_acc[ncar + k];
    MaybeAtom ct = acc.freeze(e);
    ins.push_back(ct ? *ct : e.zeros(acc.type()));
  }
  const int64_t num_consts =
      static_cast<int64_t>(res_c.size() + ref_consts.size() + carry_refs.size());
  Params tp = p;
  tp.set("jaxpr", std::make_shared<const Jaxpr>(std::move(tb)));
  tp.set("reverse", !reverse);
  tp.set("num_consts", num_consts);
  tp.set("num_carry", int64_t{0});
  tp.set("linear", NoneParam{});
  std::vector<Var> outs = e.emit(Prim::scan, ins, std::move(tp));
  if (outs.size() != value_xs.size())
    throw Error(fmt::format("internal: transposed scan returns {} cotangents for {} xs",
                            outs.size(), value_xs.size()));
  for (size_t k = 0; k < value_xs.size(); ++k) a.acc[value_xs[k]]->add(e, Atom(outs[k]));
  // The carry inits' cotangents are R's final contents: adopted without a copy when the
  // init's accumulator is still empty.
  for (size_t c = 0; c < ncar; ++c) {
    if (!a.wants(nc + c)) continue;
    Accum& init = *a.acc[nc + c];
    if (init.can_alias())
      init.adopt(e, carry_refs[c]);
    else
      init.add(e, e.freeze(carry_refs[c]));
  }
  for (auto& [shared, own] : split)
    if (shared->wanted()) shared->add(e, own->freeze(e));
}

}  // namespace

void register_scan_transpose_rules(TransposeRuleTable& t, LazyCotangentTable& lazy) {
  t.set(Prim::scan, scan_transpose);
  lazy.set(Prim::scan, true);
  // Overrides the dense rule of transpose_rules_shape.cpp with the aliasing one.
  t.set(Prim::dynamic_update_slice, dynamic_update_slice_transpose);
  lazy.set(Prim::dynamic_update_slice, true);
}

}  // namespace refjit
