// The loops of `fused` eqns (fusion.h): a loop nest computing its body's eqns per element in
// registers, its rows, and a matrix-product epilogue's row loop; views evaluated where they
// are read. Part of LowerCtx (lowering.h).
#include "backend/fusion.h"
#include "backend/lowering.h"
#include "backend/mlir_pch.h"
#include "backend/parallel_loops.h"

namespace refjit::backend {

void LowerCtx::lower_fused(const Eqn& e) {
  const Value dst = result_buffer(e.outs.at(0));
  in_fused_body(e, dst, [&](const Jaxpr& body, const std::vector<size_t>& members) {
    lower_fused_group(body, members, dst);
  });
}

void LowerCtx::lower_product_epilogue(const Eqn& e) {
  const Value dst = result_buffer(e.outs.at(0));
  in_fused_body(e, dst, [&](const Jaxpr& body, const std::vector<size_t>&) {
    frames_.back().eqn = 0;
    if (body.eqns[0].prim == Prim::im2col_dot)
      lower_im2col_with_epilogue(*this, body, 0, 1);
    else
      lower_product_with_epilogue(*this, body, 0, 1);
  });
}

void LowerCtx::in_fused_body(const Eqn& e, Value dst,
                             const std::function<void(const Jaxpr&, const std::vector<size_t>&)>& f,
                             bool with_operands) {
  const Jaxpr& body = *e.params.get<JaxprPtr>("jaxpr");
  std::vector<Value> operands;
  if (with_operands)
    for (const Atom& a : e.ins) operands.push_back(buffer(a));
  push_frame(body, /*top_level=*/false);
  for (size_t k = 0; k < operands.size(); ++k) bind_var(body.invars[k], operands[k]);
  frames_.back().result_into = {{as_var(body.outvars.at(0)).id, dst}};
  if (e.prim == Prim::product_epilogue)
    frames_.back().result_into.emplace_back(body.eqns.at(0).outs.at(0).id, dst);
  std::vector<size_t> members(body.eqns.size());
  for (size_t k = 0; k < members.size(); ++k) members[k] = k;
  f(body, members);
  pop_frame();
}

void LowerCtx::lower_fused_group(const Jaxpr& j, const std::vector<size_t>& group, Value dst) {
  const Eqn& root = j.eqns[group.back()];
  if (is_row_reduction(root.prim)) {  // its rule's loops evaluate the members
    const LowerRule* rule = lower_table().find(root.prim);
    if (!rule) fail_eqn(root, "roots a fusion group but has no lowering");
    fused_operand_ = FusedOperand{as_var(root.ins[0]).id, &j,
                                  std::vector<size_t>(group.begin(), group.end() - 1)};
    (*rule)(*this, root);
    fused_operand_.reset();
    return;
  }
  ArrayType rt = j.type_of(root.outs[0]).array;
  const std::vector<bool> member = group_members(j, group);
  load_outside_scalars(j, group, member, rt);
  if (rt.rank() < 2) {
    const auto interior = rt.rank() == 1 ? pad_interior(j, group, rt.shape[0]) : std::nullopt;
    if (!interior) {
      parallel_loop_nest(rt.shape,
                         [&](Ivs ivs) { store(fused_element(j, group, ivs), dst, rt.dtype, ivs); });
    } else {
      split_at_interior(rt.shape[0], interior, /*parallel=*/true,
                        [&](Value i) { store(fused_element(j, group, {i}), dst, rt.dtype, {i}); });
    }
    outside_scalar_.clear();
    return;
  }
  const Shape outer(rt.shape.begin(), rt.shape.end() - 1);
  mlir::Operation* rows = loop_nest(
      outer, [&](Ivs outer_ivs) { lower_fused_row(j, group, member, outer_ivs, dst, rt); });
  mark_parallel(rows, outer[0], num_elements(rt.shape) / std::max<int64_t>(1, outer[0]));
  outside_scalar_.clear();
}

std::vector<bool> LowerCtx::group_members(const Jaxpr& j, const std::vector<size_t>& group) const {
  std::vector<bool> member(j.vars.size(), false);
  for (size_t k : group) member.at(j.eqns[k].outs[0].id) = true;
  return member;
}

void LowerCtx::load_outside_scalars(const Jaxpr& j, const std::vector<size_t>& group,
                                    const std::vector<bool>& member, const ArrayType& root_type) {
  // Loaded once, before the loops (inside, a load may not be hoisted by LLVM when the stores
  // could alias it).
  outside_scalar_.assign(j.vars.size(), Value());
  if (root_type.shape.empty()) return;
  for (size_t k : group)
    for (const Atom& a : j.eqns[k].ins)
      if (is_var(a) && !member[as_var(a).id] && !outside_scalar_[as_var(a).id] &&
          type_of(a).array.rank() == 0)
        outside_scalar_[as_var(a).id] = load(a, {});
}

void LowerCtx::lower_fused_row(const Jaxpr& j, const std::vector<size_t>& group,
                               const std::vector<bool>& member, Ivs outer_ivs, Value dst,
                               const ArrayType& rt) {
  // Broadcast members that read one element per row (`x - mean[:, None]`) are loaded once
  // per row, before the innermost loop: LLVM does not vectorise a loop that reads a fixed
  // address and stores into the same allocation (both in the workspace), as it cannot tell
  // them apart.
  const int64_t last = rt.rank() - 1;
  row_invariant_.assign(j.vars.size(), Value());
  for (size_t k : group) {
    const Eqn& e = j.eqns[k];
    if (e.prim != Prim::broadcast_in_dim || (is_var(e.ins[0]) && member[as_var(e.ins[0]).id]))
      continue;
    const ArrayType xt = type_of(e.ins[0]).array;
    const IntList& dims = e.params.get<IntList>("broadcast_dimensions");
    bool invariant = true;
    for (size_t d = 0; d < dims.size(); ++d) invariant &= xt.shape[d] == 1 || dims[d] != last;
    if (!invariant) continue;
    std::vector<Value> ivs(outer_ivs.begin(), outer_ivs.end());
    ivs.push_back(index(0));  // not read: no operand dim maps to the last one
    row_invariant_[e.outs[0].id] = load(e.ins[0], broadcast_operand_index(e, ivs));
  }
  split_at_interior(rt.shape.back(), pad_interior(j, group, rt.shape.back()),
                    /*parallel=*/false, [&](Value i) {
                      std::vector<Value> ivs(outer_ivs.begin(), outer_ivs.end());
                      ivs.push_back(i);
                      store(fused_element(j, group, ivs), dst, rt.dtype, ivs);
                    });
  row_invariant_.clear();
}

std::optional<std::pair<int64_t, int64_t>> LowerCtx::pad_interior(const Jaxpr& j,
                                                                  const std::vector<size_t>& group,
                                                                  int64_t extent) const {
  std::vector<const Eqn*> views(j.vars.size(), nullptr);
  for (size_t k : group)
    if (const Eqn& e = j.eqns[k]; e.prim == Prim::slice || e.prim == Prim::pad)
      views[e.outs[0].id] = &e;
  // Along the last dim a view is read at index off + scale * i of group element i; a pad
  // padded on a side reads its operand only for lo <= index < lo + n, which bounds i.
  int64_t first = 0, end = extent;
  bool any = false, ok = true;
  std::function<void(const Eqn&, int64_t, int64_t)> walk = [&](const Eqn& e, int64_t off,
                                                               int64_t scale) {
    const ArrayType xt = type_of(e.ins[0]).array;
    if (xt.rank() != type_of(e.outs[0]).array.rank() || xt.rank() == 0) {
      ok = false;
      return;
    }
    const size_t last = static_cast<size_t>(xt.rank() - 1);
    if (e.prim == Prim::slice) {
      const int64_t start = e.params.get<IntList>("start_indices").at(last);
      const IntList strides = e.params.get_or<IntList>("strides", {});
      const int64_t stride = last < strides.size() ? strides[last] : 1;
      off = start + stride * off;
      scale *= stride;
    } else {
      const IntList& cfg = e.params.get<IntListList>("padding_config").at(last);
      const int64_t lo = cfg.at(0), hi = cfg.at(1), n = xt.shape[last];
      if (lo > 0 || hi > 0) {
        any = true;
        // lo <= off + scale * i < lo + n, with scale >= 1.
        auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); };
        first = std::max(first, ceil_div(lo - off, scale));
        end = std::min(end, ceil_div(lo + n - off, scale));
      }
      off -= lo;
    }
    if (is_var(e.ins[0]) && views[as_var(e.ins[0]).id])
      walk(*views[as_var(e.ins[0]).id], off, scale);
  };
  for (size_t k : group) {
    const Eqn& e = j.eqns[k];
    if (views[e.outs[0].id]) {
      if (k == group.back()) walk(e, 0, 1);
      continue;
    }
    for (const Atom& a : e.ins)
      if (is_var(a) && views[as_var(a).id]) {
        if (e.prim == Prim::broadcast_in_dim) ok = false;  // read at other indices
        walk(*views[as_var(a).id], 0, 1);
      }
  }
  if (!ok || !any || first >= end) return std::nullopt;
  return std::make_pair(first, end);
}

void LowerCtx::split_at_interior(int64_t n, std::optional<std::pair<int64_t, int64_t>> interior,
                                 bool parallel, const std::function<void(Value)>& body) {
  auto range = [&](int64_t from, int64_t to, bool inside) {
    if (from >= to) return;
    const bool saved = pad_interior_;
    pad_interior_ = inside;
    mlir::Operation* loop = loop_nest({to - from}, [&](Ivs iv) {
      body(from == 0 ? iv[0] : b.create<mlir::arith::AddIOp>(loc, iv[0], index(from)).getResult());
    });
    if (parallel && inside) mark_parallel(loop, to - from, 1);
    pad_interior_ = saved;
  };
  if (!interior) return range(0, n, false);
  range(0, interior->first, false);
  range(interior->first, interior->second, true);
  range(interior->second, n, false);
}

mlir::Operation* LowerCtx::lower_epilogue_rows(const Jaxpr& j, size_t root) {
  const int saved = frames_.back().eqn;
  frames_.back().eqn = static_cast<int>(root);
  const Eqn& e = j.eqns[root];
  const ArrayType rt = j.type_of(e.outs[0]).array;
  if (rt.rank() < 1) fail_eqn(e, "an epilogue needs a result of rank 1 or more");
  const Value dst = result_buffer(e.outs[0]);
  const Shape outer(rt.shape.begin(), rt.shape.end() - 1);
  mlir::Operation* rows = nullptr;
  in_eqn_body(j, root, dst, [&](const Jaxpr& in, const std::vector<size_t>& members) {
    const std::vector<bool> member = group_members(in, members);
    load_outside_scalars(in, members, member, rt);
    rows = loop_nest({num_elements(outer)}, [&](Ivs row) {
      // Row r of the flattened outer dims, as indices into them (row-major).
      std::vector<Value> outer_ivs(outer.size());
      Value rest = row[0];
      for (size_t d = outer.size(); d-- > 0;) {
        if (d == 0) {
          outer_ivs[d] = rest;
          break;
        }
        outer_ivs[d] = b.create<mlir::arith::RemUIOp>(loc, rest, index(outer[d]));
        rest = b.create<mlir::arith::DivUIOp>(loc, rest, index(outer[d]));
      }
      lower_fused_row(in, members, member, outer_ivs, dst, rt);
    });
    rows->setAttr(kEpilogueAttr, b.getUnitAttr());
    outside_scalar_.clear();
  });
  frames_.back().eqn = saved;
  return rows;
}

std::vector<Value> LowerCtx::broadcast_operand_index(const Eqn& e, Ivs ivs) {
  const ArrayType xt = type_of(e.ins[0]).array;
  const IntList& dims = e.params.get<IntList>("broadcast_dimensions");
  std::vector<Value> at;
  for (size_t d = 0; d < dims.size(); ++d)
    at.push_back(xt.shape[d] == 1 ? index(0) : ivs.at(static_cast<size_t>(dims[d])));
  return at;
}

Value LowerCtx::view_element(const std::vector<const Eqn*>& views, const Eqn& e, Ivs ivs) {
  const ArrayType xt = type_of(e.ins[0]).array;
  std::vector<Value> at;
  Value inside;  // pad: whether the element comes from the operand
  if (e.prim == Prim::slice) {
    const IntList& start = e.params.get<IntList>("start_indices");
    const IntList strides = e.params.get_or<IntList>("strides", {});
    for (size_t d = 0; d < ivs.size(); ++d) {
      at.push_back(affine_index(ivs[d], d < strides.size() ? strides[d] : 1, start.at(d)));
    }
  } else {  // pad: operand element i - lo where that is inside the operand, else the value
    const IntListList& cfg = e.params.get<IntListList>("padding_config");
    const Value padding = is_var(e.ins[1]) && as_var(e.ins[1]).id < outside_scalar_.size() &&
                                  outside_scalar_[as_var(e.ins[1]).id]
                              ? outside_scalar_[as_var(e.ins[1]).id]
                              : load(e.ins[1], {});
    for (int64_t n : xt.shape)
      if (n == 0) return padding;
    for (size_t d = 0; d < ivs.size(); ++d) {
      const int64_t lo = cfg.at(d).at(0), hi = cfg[d].at(1);
      Value i = ivs[d];
      if (lo != 0) i = b.create<mlir::arith::SubIOp>(loc, i, index(lo));
      // Only a side padded by a positive amount can fall outside; the load reads a clamped
      // index there, and the select takes the padding value.
      auto test = [&](mlir::arith::CmpIPredicate p, int64_t bound) {
        Value ok = b.create<mlir::arith::CmpIOp>(loc, p, i, index(bound));
        inside = inside ? b.create<mlir::arith::AndIOp>(loc, inside, ok).getResult() : ok;
      };
      // In a group's interior (split_at_interior) the last dim is inside by construction.
      const bool checked = !(pad_interior_ && d + 1 == ivs.size());
      if (checked && lo > 0) test(mlir::arith::CmpIPredicate::sge, 0);
      if (checked && hi > 0) test(mlir::arith::CmpIPredicate::slt, xt.shape[d]);
      if (checked && lo > 0) i = b.create<mlir::arith::MaxSIOp>(loc, i, index(0));
      if (checked && hi > 0) i = b.create<mlir::arith::MinSIOp>(loc, i, index(xt.shape[d] - 1));
      at.push_back(i);
    }
    Value v = view_operand(views, e.ins[0], at);
    return inside ? b.create<mlir::arith::SelectOp>(loc, inside, v, padding).getResult() : v;
  }
  return view_operand(views, e.ins[0], at);
}

Value LowerCtx::view_operand(const std::vector<const Eqn*>& views, const Atom& a, Ivs ivs) {
  if (is_var(a) && views[as_var(a).id]) return view_element(views, *views[as_var(a).id], ivs);
  return load(a, ivs);
}

Value LowerCtx::fused_element(const Jaxpr& j, const std::vector<size_t>& members, Ivs ivs) {
  std::vector<Value> element(j.vars.size());  // by var id: members' values, in registers
  // Views (fusion.h) are evaluated where they are read, at the index their reader asks for.
  std::vector<const Eqn*> views(j.vars.size(), nullptr);
  for (size_t k : members)
    if (const Eqn& e = j.eqns[k]; e.prim == Prim::slice || e.prim == Prim::pad)
      views[e.outs[0].id] = &e;
  for (size_t k : members) {
    const Eqn& e = j.eqns[k];
    if (views[e.outs[0].id]) {
      if (k == members.back()) return view_element(views, e, ivs);
      continue;
    }
    if (e.outs[0].id < row_invariant_.size() && row_invariant_[e.outs[0].id]) {
      element[e.outs[0].id] = row_invariant_[e.outs[0].id];
      continue;
    }
    if (e.prim == Prim::broadcast_in_dim) {  // one element of the operand
      // An operand that is a member has the group's shape: the broadcast is the identity.
      if (is_var(e.ins[0]) && element[as_var(e.ins[0]).id]) {
        element[e.outs[0].id] = element[as_var(e.ins[0]).id];
        continue;
      }
      if (is_var(e.ins[0]) && views[as_var(e.ins[0]).id]) {
        element[e.outs[0].id] = view_element(views, *views[as_var(e.ins[0]).id], ivs);
        continue;
      }
      element[e.outs[0].id] = load(e.ins[0], broadcast_operand_index(e, ivs));
      continue;
    }
    const ElemFn* f = elementwise_rule(e.prim);
    if (!f) fail_eqn(e, "fused but has no elementwise rule");
    std::vector<Value> xs;
    for (const Atom& a : e.ins) {
      const uint32_t id = is_var(a) ? as_var(a).id : 0;
      if (is_var(a) && element[id])
        xs.push_back(element[id]);
      else if (is_var(a) && views[id])
        xs.push_back(view_element(views, *views[id], ivs));
      else if (is_var(a) && id < outside_scalar_.size() && outside_scalar_[id])
        xs.push_back(outside_scalar_[id]);
      else
        xs.push_back(load(a, ivs));
    }
    element[e.outs[0].id] = (*f)(*this, e, type_of(e.ins.at(0)).dtype(), xs);
  }
  return element[j.eqns[members.back()].outs[0].id];
}

void register_fused_lowerings(LowerTable& t) {
  t.set(Prim::fused, [](LowerCtx& c, const Eqn& e) { c.lower_fused(e); });
  t.set(Prim::product_epilogue, [](LowerCtx& c, const Eqn& e) { c.lower_product_epilogue(e); });
}

}  // namespace refjit::backend
