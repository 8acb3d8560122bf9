#include "passes/simplify/hoist_accumulations.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "ir/loop_params.h"
#include "passes/jaxpr_util.h"
#include "refjit/ir/use_def.h"

namespace refjit {

namespace {

// Bounds of the rewrite (see the header): the stacked values of one accumulation, in elements.
constexpr int64_t kMaxStackedElements = int64_t{1} << 22;

// One accumulation of a scan body that can move after the scan.
struct Hoistable {
  size_t product;     // body eqn: the dot_general
  size_t accumulate;  // body eqn: ref[...] += the product
  size_t ref;         // body invar (a const) that is accumulated
  size_t xs;          // index among the scan's xs of the product's row operand
  bool row_on_left;   // whether that row is the product's lhs
  Var step_value;     // the product's other operand, stacked as a new ys
};

class Hoister {
 public:
  explicit Hoister(Jaxpr& j) : j_(j) {}

  int run() {
    std::vector<Eqn> out;
    out.reserve(j_.eqns.size());
    for (Eqn& e : j_.eqns) {
      changes_ += rewrite_body(e, [](Jaxpr& body) { return Hoister(body).run(); });
      std::vector<Eqn> after;
      if (e.prim == Prim::scan) hoist_from_scan(e, after);
      out.push_back(std::move(e));
      for (Eqn& a : after) out.push_back(std::move(a));
    }
    j_.eqns = std::move(out);
    return changes_;
  }

 private:
  // Finds the body's hoistable accumulations, rewrites the body and the scan, and appends the
  // products that replace them to `after`.
  void hoist_from_scan(Eqn& scan, std::vector<Eqn>& after) {
    const ScanParams scan_params = ScanParams::of(scan);
    const JaxprPtr& body_ptr = scan.params.get<JaxprPtr>("jaxpr");  // shared with the rewrite
    const auto num_consts = scan_params.num_consts;
    const auto num_carry = scan_params.num_carry;
    const int64_t length = scan_params.length;
    const Jaxpr& body = *body_ptr;
    if (body.invars.size() != scan.ins.size() || !body.constvars.empty()) return;

    std::vector<Hoistable> found = find_hoistable(body, num_consts, num_carry, length);
    if (found.empty()) return;

    Jaxpr rewritten = body;
    std::vector<bool> drop(body.eqns.size(), false);
    std::vector<std::pair<Var, Var>> stacked_of;  // step value -> its stacked output
    for (const Hoistable& h : found) {
      drop[h.product] = drop[h.accumulate] = true;
      // The stacked values, one row per step, as a new output of the scan (once per value).
      std::optional<Var> known;
      for (const auto& [value, stack] : stacked_of)
        if (value == h.step_value) known = stack;
      if (!known) {
        const ArrayType row = body.type_of(h.step_value).array;
        Shape stacked_shape{length};
        stacked_shape.insert(stacked_shape.end(), row.shape.begin(), row.shape.end());
        known = j_.new_var(Type(ArrayType{row.dtype, stacked_shape}));
        rewritten.outvars.push_back(h.step_value);
        scan.outs.push_back(*known);
        stacked_of.emplace_back(h.step_value, *known);
      }
      const Var stacked = *known;

      // The product over the steps: the step dim contracted with the rows' dims.
      const Eqn& product = body.eqns[h.product];
      const DotDims& dn = product.params.get<DotDims>("dimension_numbers");
      auto shifted = [](const IntList& dims) {
        IntList out{0};
        for (int64_t d : dims) out.push_back(d + 1);
        return out;
      };
      DotDims total{shifted(dn.lhs_contract), shifted(dn.rhs_contract), {}, {}};
      const Atom rows = scan.ins[num_consts + num_carry + h.xs];
      Eqn sum = product;
      sum.params.set("dimension_numbers", total);
      sum.ins = h.row_on_left ? std::vector<Atom>{rows, stacked} : std::vector<Atom>{stacked, rows};
      const Var summed = j_.new_var(Type(body.type_of(product.outs[0]).array));
      sum.outs = {summed};
      after.push_back(std::move(sum));
      Eqn add = body.eqns[h.accumulate];
      add.ins = {scan.ins[h.ref], summed};
      after.push_back(std::move(add));
      ++changes_;
    }
    std::vector<Eqn> kept;
    for (size_t i = 0; i < body.eqns.size(); ++i)
      if (!drop[i]) kept.push_back(body.eqns[i]);
    rewritten.eqns = std::move(kept);
    scan.params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(rewritten)));
  }

  static std::vector<Hoistable> find_hoistable(const Jaxpr& body, size_t num_consts,
                                               size_t num_carry, int64_t length) {
    const size_t n = body.vars.size();
    const UseDef use_def(body);

    // Per body invar: its position among the invars (consts, carry, xs).
    std::vector<int32_t> invar_position(n, -1);
    for (size_t p = 0; p < body.invars.size(); ++p)
      invar_position[body.invars[p].id] = static_cast<int32_t>(p);

    // A const ref qualifies when every eqn that names it adds to the whole of it.
    std::vector<bool> named_otherwise(n, false);
    for (const Eqn& e : body.eqns)
      for (size_t k = 0; k < e.ins.size(); ++k)
        if (is_var(e.ins[k]) &&
            (e.prim != Prim::addupdate || k != 0 || !e.params.get<Indexer>("indexer").is_whole()))
          named_otherwise[as_var(e.ins[k]).id] = true;
    auto only_accumulated = [&](Var ref) {
      return !named_otherwise[ref.id] && use_def.use_count(ref) < 2 && !use_def.is_output(ref);
    };

    std::vector<Hoistable> found;
    for (size_t i = 0; i < body.eqns.size(); ++i) {
      const Eqn& acc = body.eqns[i];
      if (acc.prim != Prim::addupdate || acc.ins.size() != 2 || !is_var(acc.ins[0]) ||
          !is_var(acc.ins[1]) || !acc.params.get<Indexer>("indexer").is_whole())
        continue;
      const Var ref = as_var(acc.ins[0]);
      const int32_t ref_pos = invar_position[ref.id];
      if (ref_pos < 0 || static_cast<size_t>(ref_pos) >= num_consts || !only_accumulated(ref))
        continue;
      const Var value = as_var(acc.ins[1]);
      const int64_t d = use_def.def_index(value);
      if (d < 0 || !use_def.read_once(value)) continue;
      const Eqn& product = body.eqns[static_cast<size_t>(d)];
      if (product.prim != Prim::dot_general || product.ins.size() != 2) continue;
      const DotDims& dn = product.params.get<DotDims>("dimension_numbers");
      if (!dn.lhs_batch.empty() || !dn.rhs_batch.empty()) continue;
      std::optional<Hoistable> h;
      for (int side = 0; side < 2 && !h; ++side) {
        const Atom& row = product.ins[static_cast<size_t>(side)];
        const Atom& other = product.ins[static_cast<size_t>(1 - side)];
        if (!is_var(row) || !is_var(other) || body.type_of(row).is_ref) continue;
        const int32_t pos = invar_position[as_var(row).id];
        if (pos < 0 || static_cast<size_t>(pos) < num_consts + num_carry) continue;
        h = Hoistable{static_cast<size_t>(d),
                      i,
                      static_cast<size_t>(ref_pos),
                      static_cast<size_t>(pos) - num_consts - num_carry,
                      side == 0,
                      as_var(other)};
      }
      if (!h) continue;
      // Worth it: the stacked values stay small and each step's product is at least as large
      // as the value it stacks.
      const int64_t stacked = body.type_of(h->step_value).array.num_elements();
      const int64_t product_size = body.type_of(value).array.num_elements();
      if (stacked * length > kMaxStackedElements || product_size < stacked) continue;
      found.push_back(*h);
    }
    return found;
  }

  Jaxpr& j_;
  int changes_ = 0;
};

}  // namespace

Jaxpr hoist_accumulations(const Jaxpr& jaxpr, int* changes) {
  return rewritten_copy(
      jaxpr, [](Jaxpr& j) { return Hoister(j).run(); }, changes);
}

}  // namespace refjit
