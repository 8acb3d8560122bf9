#include "passes/discharge.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "ir/loop_params.h"
#include "passes/emitter.h"
#include "passes/jaxpr_util.h"
#include "passes/plain_decisions.h"
#include "refjit/ir/builder.h"
#include "refjit/ir/error.h"
#include "refjit/ir/indexing.h"

namespace refjit {

namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw Error(fmt::format("discharge_state: {}", what));
}

Type value_type(const Type& t) { return Type(t.array); }

// Emitter over the discharged program's builder, with the clamp ref indexing applies.
struct Ops : Emitter {
  explicit Ops(JaxprBuilder& b) : Emitter(b) {}
  Atom clamp(const Atom& i, int64_t hi) {
    DType d = array_type_of(i).dtype;
    return emit1(Prim::min, {emit1(Prim::max, {i, Literal::of_int(d, 0)}), Literal::of_int(d, hi)});
  }
};

// A ref op's indexer with its dynamic operands, resolved against the ref's shape.
struct Access {
  ArrayType ref;
  const Indexer& ix;
  std::vector<Atom> dyn;  // discharged atoms, one per dynamic IndexerDim
  IndexedLayout layout;
  std::optional<Atom> flat_positions;  // computed once, for a read and a write alike

  bool whole() const { return ix.is_whole(); }
  // Only slices of stride 1 and single indices: a (dynamic) slice of the value.
  bool is_window() const {
    return std::all_of(ix.dims.begin(), ix.dims.end(), [](const IndexerDim& d) {
      return d.kind == IndexerDim::Kind::index ||
             (d.kind == IndexerDim::Kind::slice && (d.stride == 1 || d.size <= 1));
    });
  }
};

// ---- windows: slices and single indices --------------------------------------------------

struct Window {
  std::vector<Atom> starts;  // one per ref dim
  Shape sizes;               // one per ref dim (1 for an index)
  bool dynamic = false;
};

Window window_of(const Access& a) {
  Window w;
  size_t next = 0;
  for (int d = 0; d < a.ref.rank(); ++d) {
    if (d >= static_cast<int>(a.ix.dims.size())) {
      w.starts.push_back(Literal::of_int(DType::i32, 0));
      w.sizes.push_back(a.ref.shape[d]);
      continue;
    }
    const IndexerDim& id = a.ix.dims[d];
    // dynamic_slice and dynamic_update_slice clamp a start into [0, n - size], exactly as a
    // ref's dynamic slice start and dynamic index clamp.
    w.starts.push_back(id.dynamic ? a.dyn.at(next++) : Literal::of_int(DType::i32, id.start));
    w.sizes.push_back(id.kind == IndexerDim::Kind::index ? 1 : id.size);
    w.dynamic = w.dynamic || id.dynamic;
  }
  return w;
}

Atom read_window(Ops& o, const Atom& cur, const Access& a) {
  Window w = window_of(a);
  Atom part;
  if (w.dynamic) {
    std::vector<Atom> ins{cur};
    ins.insert(ins.end(), w.starts.begin(), w.starts.end());
    part = o.emit1(Prim::dynamic_slice, ins, Params{{"slice_sizes", IntList(w.sizes)}});
  } else {
    IntList start, limit;
    for (size_t d = 0; d < w.sizes.size(); ++d) {
      int64_t s = std::get<Literal>(w.starts[d]).i;
      start.push_back(s);
      limit.push_back(s + w.sizes[d]);
    }
    part = o.emit1(
        Prim::slice, {cur},
        Params{{"limit_indices", limit}, {"start_indices", start}, {"strides", NoneParam{}}});
  }
  return o.reshape(part, a.layout.shape);
}

Atom write_window(Ops& o, const Atom& cur, const Access& a, const Atom& v) {
  Window w = window_of(a);
  std::vector<Atom> ins{cur, o.reshape(v, w.sizes)};
  ins.insert(ins.end(), w.starts.begin(), w.starts.end());
  return o.emit1(Prim::dynamic_update_slice, ins);
}

// ---- anything else: a flat index per addressed element -----------------------------------

// For each element of the indexed shape, the row-major position in the ref it addresses
// (clamped as ref indexing clamps): an integer array of the indexed shape.
Atom flat_positions(Ops& o, Access& a) {
  if (a.flat_positions) return *a.flat_positions;
  const Shape& out = a.layout.shape;
  const Shape& bshape = a.layout.array_shape;
  const int bfirst = a.layout.array_position;
  const int blast = bfirst < 0 ? -1 : bfirst + static_cast<int>(bshape.size());
  const DType it = a.ref.num_elements() > (int64_t{1} << 30) ? DType::i64 : DType::i32;
  std::optional<Atom> flat;
  int64_t offset = 0;  // the static part of every position
  auto add_term = [&](Atom term, int64_t stride, const IntList& dims) {
    if (stride != 1) term = o.emit1(Prim::mul, {term, Literal::of_int(it, stride)});
    term = o.broadcast_in_dim(term, out, dims);
    flat = flat ? o.emit1(Prim::add, {*flat, term}) : term;
  };
  int64_t stride = a.ref.num_elements();
  int k = 0;  // the next output dim a dim addressed by a slice lands on
  size_t next = 0;
  for (int d = 0; d < a.ref.rank(); ++d) {
    const int64_t n = a.ref.shape[d];
    stride /= std::max<int64_t>(n, 1);
    const IndexerDim* id = d < static_cast<int>(a.ix.dims.size()) ? &a.ix.dims[d] : nullptr;
    if (id && id->kind == IndexerDim::Kind::index) {
      if (id->dynamic)
        add_term(o.clamp(o.convert(a.dyn.at(next++), it), n - 1), stride, {});
      else
        offset += id->start * stride;
    } else if (id && id->kind == IndexerDim::Kind::index_array) {
      Atom arr = o.clamp(o.convert(a.dyn.at(next++), it), n - 1);
      IntList dims;  // NumPy broadcasting inside the block: trailing dims aligned
      for (int j = 0; j < o.array_type_of(arr).rank(); ++j)
        dims.push_back(blast - o.array_type_of(arr).rank() + j);
      add_term(arr, stride, dims);
    } else {
      if (k == bfirst) k = blast;
      const int64_t size = id ? id->size : n, step = id ? id->stride : 1;
      if (id && id->dynamic) {
        const int64_t extent = size == 0 ? 0 : (size - 1) * step + 1;
        add_term(o.clamp(o.convert(a.dyn.at(next++), it), n - extent), stride, {});
      } else if (id) {
        offset += id->start * stride;
      }
      Atom run = o.iota(Shape{size}, 0, it);
      add_term(run, step * stride, {k++});
    }
  }
  if (!flat) flat = o.broadcast_in_dim(Literal::of_int(it, 0), out, {});
  if (offset != 0) flat = o.emit1(Prim::add, {*flat, Literal::of_int(it, offset)});
  a.flat_positions = *flat;
  return *flat;
}

Atom read_general(Ops& o, const Atom& cur, Access& a) {
  Atom flat = o.reshape(cur, Shape{a.ref.num_elements()});
  return o.emit1(Prim::gather, {flat, flat_positions(o, a)}, Params{{"axis", int64_t{0}}});
}

// scatter (a write; for repeated positions the last wins, as for a ref) or scatter-add (an
// accumulation; repeated positions add up, as for a ref).
Atom write_general(Ops& o, Prim scatter, const Atom& cur, Access& a, const Atom& v) {
  Atom flat = o.reshape(cur, Shape{a.ref.num_elements()});
  Params p{{"axis", int64_t{0}}};
  if (scatter == Prim::scatter) p.set("unique_indices", false);
  return o.reshape(o.emit1(scatter, {flat, flat_positions(o, a), v}, std::move(p)), a.ref.shape);
}

Atom read(Ops& o, const Atom& cur, Access& a) {
  if (a.whole()) return cur;
  return a.is_window() ? read_window(o, cur, a) : read_general(o, cur, a);
}

// ---- the discharge of one jaxpr ----------------------------------------------------------

class Discharger {
 public:
  explicit Discharger(JaxprBuilder& b) : o_(b) {}

  // The discharged atom of `a`: a ref's current value.
  Atom at(const Atom& a) const { return subst_(a); }
  void bind(Var v, Atom a) { subst_.set(v, std::move(a)); }
  std::vector<Atom> at(std::span<const Atom> as) const {
    std::vector<Atom> r;
    for (const Atom& a : as) r.push_back(at(a));
    return r;
  }

  void run(const Jaxpr& j) {
    for (size_t k = 0; k < j.eqns.size(); ++k) {
      try {
        eqn(j, j.eqns[k]);
      } catch (const Error& e) {
        std::string what = e.what();
        if (what.rfind("discharge_state", 0) == 0) throw;
        refuse(fmt::format("{}: {}", describe_eqn(j.eqns[k], k), what));
      }
    }
  }

 private:
  Ops o_;
  Substitution subst_;

  void eqn(const Jaxpr& j, const Eqn& e) {
    switch (e.prim) {
      case Prim::new_ref:
      case Prim::freeze: bind(e.outs[0], at(e.ins[0])); return;
      case Prim::get: {
        Access a = access(j, e, 1);
        bind(e.outs[0], read(o_, at(e.ins[0]), a));
        return;
      }
      case Prim::swap:
      case Prim::addupdate: {
        Access a = access(j, e, 2);
        const Atom cur = at(e.ins[0]), v = at(e.ins[1]);
        Atom next;
        if (e.prim == Prim::swap) {
          bind(e.outs[0], read(o_, cur, a));
          next = a.whole()       ? v
                 : a.is_window() ? write_window(o_, cur, a, v)
                                 : write_general(o_, Prim::scatter, cur, a, v);
        } else {
          next = a.whole() ? o_.emit1(Prim::add, {cur, v})
                 : a.is_window()
                     ? write_window(o_, cur, a, o_.emit1(Prim::add, {read(o_, cur, a), v}))
                     : write_general(o_, Prim::scatter_add, cur, a, v);
        }
        bind(as_var(e.ins[0]), next);
        return;
      }
      case Prim::jit: call(j, e); return;
      case Prim::scan: scan(j, e); return;
      case Prim::cond: call(j, e); return;
      case Prim::while_: while_loop(j, e); return;
      default: break;
    }
    if (touches_refs(j, e))
      refuse(fmt::format("`{}` with ref operands cannot be discharged", prim_name(e.prim)));
    // Anything else is copied; sub-jaxprs (custom_vjp_call's) may hold refs of their own.
    Params params = e.params;
    for (const auto& [key, value] : e.params.entries())
      if (const auto* sub = std::get_if<JaxprPtr>(&value))
        params.set(key, std::make_shared<const Jaxpr>(discharge_state(**sub)));
    std::vector<Var> outs = o_.emit(e.prim, at(e.ins), std::move(params));
    for (size_t k = 0; k < outs.size(); ++k) bind(e.outs[k], outs[k]);
  }

  Access access(const Jaxpr& j, const Eqn& e, size_t first_dynamic) {
    const Indexer& ix = e.params.get<Indexer>("indexer");
    const ArrayType ref = j.type_of(e.ins[0]).array;
    std::vector<Atom> dyn;
    std::vector<Type> dyn_types;
    for (size_t k = first_dynamic; k < e.ins.size(); ++k) {
      dyn.push_back(at(e.ins[k]));
      dyn_types.push_back(j.type_of(e.ins[k]));
    }
    return Access{ref, ix, std::move(dyn), indexed_layout(ref, ix, dyn_types)};
  }

  // The operand positions of `e` that hold refs.
  static std::vector<size_t> ref_operands(const Jaxpr& j, const Eqn& e) {
    std::vector<size_t> r;
    for (size_t k = 0; k < e.ins.size(); ++k)
      if (is_var(e.ins[k]) && j.type_of(e.ins[k]).is_ref) r.push_back(k);
    return r;
  }

  // jit and cond: the body (every branch) discharged takes the refs' values and returns their
  // final values after its outputs.
  void call(const Jaxpr& j, const Eqn& e) {
    Params params = e.params;
    if (e.prim == Prim::jit) {
      params.set("jaxpr", std::make_shared<const Jaxpr>(discharge_state(jit_body(e))));
    } else {
      JaxprList branches;
      for (const JaxprPtr& br : e.params.get<JaxprList>("branches"))
        branches.push_back(std::make_shared<const Jaxpr>(discharge_state(*br)));
      params.set("branches", branches);
    }
    std::vector<Var> outs = o_.emit(e.prim, at(e.ins), std::move(params));
    for (size_t k = 0; k < e.outs.size(); ++k) bind(e.outs[k], outs[k]);
    size_t next = e.outs.size();
    for (size_t k : ref_operands(j, e)) bind(as_var(e.ins[k]), outs[next++]);
  }

  // scan: each ref among the consts becomes a leading carry; a ref scanned over (among the
  // xs: each step sees one row) becomes plain xs, and its rows' final values extra ys.
  void scan(const Jaxpr& j, const Eqn& e) {
    const ScanParams scan_params = ScanParams::of(e);
    const Jaxpr& body = *scan_params.body;
    const auto nconsts = scan_params.num_consts;
    const auto ncarry = scan_params.num_carry;
    std::vector<size_t> const_refs, xs_refs;
    for (size_t k : ref_operands(j, e)) {
      if (k >= nconsts && k < nconsts + ncarry) refuse("a scan with a ref among its carries");
      (k < nconsts ? const_refs : xs_refs).push_back(k);
    }
    const Jaxpr dbody = discharge_state(body);
    const size_t nys = body.outvars.size() - ncarry;

    // New operand order: plain consts, the const refs' values, the carry, the xs.
    std::vector<size_t> order;
    for (size_t k = 0; k < nconsts; ++k)
      if (!std::count(const_refs.begin(), const_refs.end(), k)) order.push_back(k);
    order.insert(order.end(), const_refs.begin(), const_refs.end());
    for (size_t k = nconsts; k < e.ins.size(); ++k) order.push_back(k);

    JaxprBuilder wb;
    std::vector<Atom> args(e.ins.size());
    for (size_t k : order) args[k] = wb.add_invar(dbody.type_of(dbody.invars[k]));
    std::vector<Atom> outs = inline_call(wb, dbody, args);
    // dbody returns carry, ys, then the refs' final values (const refs first, as they come in
    // operand order); the scan wants the const refs' values first and the xs refs' rows last.
    auto at_out = [&](size_t k) { return outs.begin() + static_cast<long>(k); };
    const size_t fin = ncarry + nys;
    std::vector<Atom> wouts(at_out(fin), at_out(fin + const_refs.size()));
    wouts.insert(wouts.end(), at_out(0), at_out(fin));
    wouts.insert(wouts.end(), at_out(fin + const_refs.size()), outs.end());
    wb.set_outvars(std::move(wouts));

    std::vector<Atom> ins;
    for (size_t k : order) ins.push_back(at(e.ins[k]));
    Params params = e.params;
    params.set("jaxpr", std::make_shared<const Jaxpr>(wb.finish()));
    params.set("num_consts", static_cast<int64_t>(nconsts - const_refs.size()));
    params.set("num_carry", static_cast<int64_t>(ncarry + const_refs.size()));
    if (const auto* linear =
            e.params.find("linear") ? std::get_if<IntList>(e.params.find("linear")) : nullptr) {
      IntList reordered;
      for (size_t k : order) reordered.push_back(linear->at(k));
      params.set("linear", reordered);
    }
    std::vector<Var> res = o_.emit(Prim::scan, std::move(ins), std::move(params));
    const size_t nc = const_refs.size();
    for (size_t k = 0; k < nc; ++k) bind(as_var(e.ins[const_refs[k]]), res[k]);
    for (size_t k = 0; k < e.outs.size(); ++k) bind(e.outs[k], res[nc + k]);
    for (size_t k = 0; k < xs_refs.size(); ++k)
      bind(as_var(e.ins[xs_refs[k]]), res[nc + e.outs.size() + k]);
  }

  // while: the refs of the condition's and the body's consts become leading carries.
  void while_loop(const Jaxpr& j, const Eqn& e) {
    const WhileParams while_params = WhileParams::of(e);
    const Jaxpr& cond = *while_params.cond;
    const Jaxpr& body = *while_params.body;
    const auto ncc = while_params.cond_nconsts;
    const auto nbc = while_params.body_nconsts;
    const size_t ncarry = e.ins.size() - ncc - nbc;

    std::vector<Var> refs;  // distinct refs, in operand order
    auto ref_slot = [&](const Atom& a) -> int {
      if (!is_var(a) || !j.type_of(a).is_ref) return -1;
      auto it = std::find(refs.begin(), refs.end(), as_var(a));
      if (it == refs.end()) {
        refs.push_back(as_var(a));
        return static_cast<int>(refs.size()) - 1;
      }
      return static_cast<int>(it - refs.begin());
    };
    std::vector<int> slot(e.ins.size(), -1);
    for (size_t k = 0; k < ncc + nbc; ++k) slot[k] = ref_slot(e.ins[k]);
    for (const RefEffects& fx : compute_effects(cond))
      if (fx.written || fx.accumulated) refuse("a while condition that writes a ref");

    const Jaxpr dcond = discharge_state(cond), dbody = discharge_state(body);
    // Each new sub-jaxpr: plain consts, then the refs' values, then the carry.
    auto rebuild = [&](const Jaxpr& dsub, size_t first, size_t nconsts, bool is_body) {
      JaxprBuilder wb;
      std::vector<Atom> plain;
      for (size_t k = first; k < first + nconsts; ++k)
        if (slot[k] < 0) plain.push_back(wb.add_invar(dsub.type_of(dsub.invars[k - first])));
      std::vector<Atom> ref_vals;
      for (Var r : refs) ref_vals.push_back(wb.add_invar(value_type(j.type_of(r))));
      std::vector<Atom> carry;
      for (size_t k = 0; k < ncarry; ++k)
        carry.push_back(wb.add_invar(dsub.type_of(dsub.invars[nconsts + k])));
      std::vector<Atom> args;
      size_t p = 0;
      for (size_t k = first; k < first + nconsts; ++k)
        args.push_back(slot[k] < 0 ? plain[p++] : ref_vals[static_cast<size_t>(slot[k])]);
      args.insert(args.end(), carry.begin(), carry.end());
      std::vector<Atom> outs = inline_call(wb, dsub, args);
      if (!is_body) {
        wb.set_outvars({outs[0]});
      } else {
        // Each ref's next value: the body's final value where the body has it, else unchanged.
        std::vector<Atom> next = ref_vals;
        size_t fin = ncarry;
        for (size_t k = first; k < first + nconsts; ++k)
          if (slot[k] >= 0) next[static_cast<size_t>(slot[k])] = outs[fin++];
        next.insert(next.end(), outs.begin(), outs.begin() + static_cast<long>(ncarry));
        wb.set_outvars(std::move(next));
      }
      return std::make_shared<const Jaxpr>(wb.finish());
    };

    std::vector<Atom> ins;
    for (size_t k = 0; k < ncc; ++k)
      if (slot[k] < 0) ins.push_back(at(e.ins[k]));
    size_t plain_cc = ins.size();
    for (size_t k = ncc; k < ncc + nbc; ++k)
      if (slot[k] < 0) ins.push_back(at(e.ins[k]));
    size_t plain_bc = ins.size() - plain_cc;
    for (Var r : refs) ins.push_back(at(r));
    for (size_t k = ncc + nbc; k < e.ins.size(); ++k) ins.push_back(at(e.ins[k]));
    Params params = e.params;
    params.set("cond_jaxpr", rebuild(dcond, 0, ncc, false));
    params.set("body_jaxpr", rebuild(dbody, ncc, nbc, true));
    params.set("cond_nconsts", static_cast<int64_t>(plain_cc));
    params.set("body_nconsts", static_cast<int64_t>(plain_bc));
    std::vector<Var> res = o_.emit(Prim::while_, std::move(ins), std::move(params));
    for (size_t k = 0; k < refs.size(); ++k) bind(refs[k], res[k]);
    for (size_t k = 0; k < e.outs.size(); ++k) bind(e.outs[k], res[refs.size() + k]);
  }
};

}  // namespace

Jaxpr discharge_state(const Jaxpr& jaxpr_in) {
  std::optional<Jaxpr> plain;  // a derived program's decisions, written out
  const Jaxpr& jaxpr = plain_decisions(jaxpr_in, plain);
  JaxprBuilder b;
  Discharger d(b);
  for (Var v : jaxpr.constvars)
    d.bind(v, b.add_constvar(value_type(jaxpr.type_of(v)), jaxpr.info(v).name));
  for (Var v : jaxpr.invars)
    d.bind(v, b.add_invar(value_type(jaxpr.type_of(v)), jaxpr.info(v).name));
  d.run(jaxpr);
  std::vector<Atom> outs;
  for (const Atom& a : jaxpr.outvars) {
    if (is_var(a) && jaxpr.type_of(a).is_ref) refuse("a jaxpr that returns a ref");
    outs.push_back(d.at(a));
  }
  for (const std::vector<Var>* binders : {&jaxpr.constvars, &jaxpr.invars})
    for (Var v : *binders)
      if (jaxpr.type_of(v).is_ref) outs.push_back(d.at(v));
  b.set_outvars(std::move(outs));
  return b.finish();
}

}  // namespace refjit
