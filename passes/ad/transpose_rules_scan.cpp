// Transpose of `scan` (REFS.md 4.2-4.3, DESIGN.md "Sparse cotangents never go dense"). It
// relies on the aliasing transposes of dynamic_update_slice, scatter and the reshapes
// (transpose_rules_scatter.cpp).
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

#include "ir/loop_params.h"
#include "passes/ad/transpose.h"
#include "passes/ad/transpose_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

void scan_transpose(Emitter& e, TransposeArgs& a) {
  const Params& p = a.eqn.params;
  const ScanParams scan = ScanParams::of(a.eqn);
  const Jaxpr& body = *scan.body;
  const size_t nc = scan.num_consts;
  const size_t ncar = scan.num_carry;
  const bool reverse = scan.reverse;
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
}

}  // namespace refjit
