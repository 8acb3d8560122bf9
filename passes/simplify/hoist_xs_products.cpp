#include "passes/simplify/hoist_xs_products.h"

#include <memory>
#include <utility>
#include <vector>

#include "ir/loop_params.h"
#include "passes/jaxpr_util.h"

namespace refjit {

namespace {

// Bounds of the rewrite (see the header).
constexpr int64_t kMaxStackedElements = int64_t{1} << 22;
constexpr int64_t kMaxGrowth = 16;

class Hoister {
 public:
  explicit Hoister(Jaxpr& j) : j_(j) {}

  int run() {
    std::vector<Eqn> out;
    out.reserve(j_.eqns.size());
    for (Eqn& e : j_.eqns) {
      changes_ += rewrite_body(e, [](Jaxpr& body) { return Hoister(body).run(); });
      if (e.prim == Prim::scan) hoist_from_scan(e, out);
      out.push_back(std::move(e));
    }
    j_.eqns = std::move(out);
    return changes_;
  }

 private:
  // Moves the body's hoistable products out of `scan`, appending their stacked versions to
  // `before` (the eqns that precede the scan).
  void hoist_from_scan(Eqn& scan, std::vector<Eqn>& before) {
    const ScanParams scan_params = ScanParams::of(scan);
    const auto num_consts = scan_params.num_consts;
    const auto num_carry = scan_params.num_carry;
    const int64_t length = scan_params.length;
    const Jaxpr& body = *scan_params.body;
    if (body.invars.size() != scan.ins.size() || !body.constvars.empty() || length < 2) return;

    // Per body invar: its position among the invars (consts, carry, xs).
    std::vector<int32_t> position(body.vars.size(), -1);
    for (size_t p = 0; p < body.invars.size(); ++p)
      position[body.invars[p].id] = static_cast<int32_t>(p);
    auto is_xs = [&](const Atom& a) {
      return is_var(a) && position[as_var(a).id] >= static_cast<int32_t>(num_consts + num_carry);
    };
    auto is_const = [&](const Atom& a) {
      return is_var(a) && position[as_var(a).id] >= 0 &&
             position[as_var(a).id] < static_cast<int32_t>(num_consts);
    };

    Jaxpr rewritten = body;
    std::vector<Eqn> kept;
    int hoisted = 0;
    for (const Eqn& e : body.eqns) {
      if (!hoistable(body, e, length, is_xs, is_const)) {
        kept.push_back(e);
        continue;
      }
      // us = dot_general(xs, W): xs's dims shift by one for the leading step dim.
      const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
      DotDims stacked_dn = dn;
      for (int64_t& d : stacked_dn.lhs_contract) ++d;
      const ArrayType step = body.type_of(e.outs[0]).array;
      Shape stacked_shape{length};
      stacked_shape.insert(stacked_shape.end(), step.shape.begin(), step.shape.end());
      Eqn product = e;
      product.params.set("dimension_numbers", stacked_dn);
      product.ins = {scan.ins[static_cast<size_t>(position[as_var(e.ins[0]).id])],
                     scan.ins[static_cast<size_t>(position[as_var(e.ins[1]).id])]};
      // Two scans over the same xs with the same weights (a model applied twice) share one.
      Var stacked;
      bool known = false;
      for (const Eqn& earlier : hoisted_)
        if (earlier.ins == product.ins && earlier.params.entries() == product.params.entries()) {
          stacked = earlier.outs[0];
          known = true;
        }
      if (!known) {
        stacked = j_.new_var(Type(ArrayType{step.dtype, stacked_shape}));
        product.outs = {stacked};
        hoisted_.push_back(product);
        before.push_back(std::move(product));
      }
      // The body reads its step's product as one more xs.
      rewritten.invars.push_back(e.outs[0]);
      scan.ins.push_back(stacked);
      ++hoisted;
    }
    if (hoisted == 0) return;
    rewritten.eqns = std::move(kept);
    // Per-operand flags sized to the operands grow with them.
    if (const ParamValue* linear = scan.params.find("linear"))
      if (const auto* flags = std::get_if<IntList>(linear); flags && !flags->empty()) {
        IntList grown = *flags;
        grown.resize(scan.ins.size(), 0);
        scan.params.set("linear", grown);
      }
    scan.params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(rewritten)));
    changes_ += hoisted;
  }

  // dot_general(x_t, W) with x_t an xs row and W a const, no batch dims, within the bounds.
  template <class IsXs, class IsConst>
  static bool hoistable(const Jaxpr& body, const Eqn& e, int64_t length, IsXs is_xs,
                        IsConst is_const) {
    if (e.prim != Prim::dot_general || e.ins.size() != 2 || e.outs.size() != 1) return false;
    if (!is_xs(e.ins[0]) || !is_const(e.ins[1])) return false;
    if (body.type_of(e.ins[0]).is_ref || body.type_of(e.ins[1]).is_ref) return false;
    const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
    if (!dn.lhs_batch.empty() || !dn.rhs_batch.empty()) return false;
    const int64_t row = body.type_of(e.ins[0]).array.num_elements();
    const int64_t product = body.type_of(e.outs[0]).array.num_elements();
    return product * length <= kMaxStackedElements &&
           product <= kMaxGrowth * std::max<int64_t>(row, 1);
  }

  Jaxpr& j_;
  std::vector<Eqn> hoisted_;  // the stacked products emitted into j_ so far
  int changes_ = 0;
};

}  // namespace

Jaxpr hoist_xs_products(const Jaxpr& jaxpr, int* changes) {
  return rewritten_copy(
      jaxpr, [](Jaxpr& j) { return Hoister(j).run(); }, changes);
}

}  // namespace refjit
