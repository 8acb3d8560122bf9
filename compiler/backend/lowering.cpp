// LowerCtx: the shared machinery of the lowering rules, and the module driver.
#include "compiler/backend/lowering.h"

#include <fmt/format.h>

#include "compiler/backend/fusion.h"
#include "mlir/IR/BuiltinTypes.h"

namespace refjit::backend {

using mlir::Value;

[[noreturn]] void fail_eqn(const Eqn& e, const std::string& what) {
  throw Error(fmt::format("native backend: cannot lower `{}`: {}", prim_name(e.prim), what));
}

void load_dialects(mlir::MLIRContext& ctx) {
  ctx.loadDialect<mlir::arith::ArithDialect, mlir::func::FuncDialect, mlir::math::MathDialect,
                  mlir::memref::MemRefDialect, mlir::scf::SCFDialect>();
}

const LowerTable& lower_table() {
  static const LowerTable table = [] {
    LowerTable t;
    register_elementwise_lowerings(t);
    register_shape_lowerings(t);
    register_reduce_lowerings(t);
    register_ref_lowerings(t);
    register_control_lowerings(t);
    return t;
  }();
  return table;
}

// ---------------------------------------------------------------- types and constants

mlir::Type LowerCtx::elem_type(DType d) {
  switch (d) {
    case DType::f32: return b.getF32Type();
    case DType::f64: return b.getF64Type();
    case DType::i32: return b.getI32Type();
    case DType::i64: return b.getI64Type();
    case DType::bool_: return b.getI1Type();
  }
  return {};
}

mlir::Type LowerCtx::storage_type(DType d) {
  return d == DType::bool_ ? b.getI8Type() : elem_type(d);
}

mlir::MemRefType LowerCtx::memref_type(const ArrayType& t) {
  return mlir::MemRefType::get(t.shape, storage_type(t.dtype));
}

Value LowerCtx::index(int64_t v) { return b.create<mlir::arith::ConstantIndexOp>(loc, v); }

Value LowerCtx::constant(DType d, double v) {
  if (is_float(d)) return b.create<mlir::arith::ConstantOp>(loc, b.getFloatAttr(elem_type(d), v));
  return int_constant(d, d == DType::bool_ ? (v != 0) : static_cast<int64_t>(v));
}

Value LowerCtx::int_constant(DType d, int64_t v) {
  return b.create<mlir::arith::ConstantOp>(loc, b.getIntegerAttr(elem_type(d), v));
}

Value LowerCtx::literal(const Literal& l) {
  return is_float(l.dtype) ? constant(l.dtype, l.f) : int_constant(l.dtype, l.i);
}

// ---------------------------------------------------------------- values

Type LowerCtx::type_of(const Atom& a) const {
  if (is_var(a)) return frames_.back().jaxpr->type_of(as_var(a));
  return Type(std::get<Literal>(a).type());
}

Value LowerCtx::alloc(const ArrayType& t) {
  Value m;
  if (workspace_) {
    // Stack allocation in the workspace: 64-byte aligned, released when the scope ends.
    int64_t bytes = t.byte_size();
    int64_t offset = workspace_offset_;
    workspace_offset_ += (bytes + 63) / 64 * 64;
    workspace_high_ = std::max(workspace_high_, workspace_offset_);
    m = b.create<mlir::memref::ViewOp>(loc, memref_type(t), workspace_, index(offset),
                                       mlir::ValueRange{});
  } else {
    m = b.create<mlir::memref::AllocOp>(loc, memref_type(t), b.getI64IntegerAttr(64));
  }
  scopes_.back().allocations.push_back(m);
  return m;
}

Value LowerCtx::buffer(const Atom& a) {
  if (!is_var(a)) {
    const Literal& l = std::get<Literal>(a);
    Value m = alloc(l.type());
    store(literal(l), m, l.dtype, {});
    return m;
  }
  Value m = frames_.back().env.at(as_var(a).id);
  if (!m)
    throw Error(
        fmt::format("native backend: variable #{} is used before it is defined", as_var(a).id));
  return m;
}

Value LowerCtx::result_buffer(Var v) {
  Frame& f = frames_.back();
  int slot = f.top_level ? plan_.output_slot_of(v) : -1;
  Value m = slot >= 0 ? output_buffers_.at(slot) : alloc(f.jaxpr->type_of(v).array);
  f.env.at(v.id) = m;
  return m;
}

void LowerCtx::bind(Var v, Value memref) { frames_.back().env.at(v.id) = memref; }

// ---------------------------------------------------------------- element access

Value LowerCtx::load(const Atom& a, mlir::ValueRange idx) {
  if (!is_var(a)) return literal(std::get<Literal>(a));
  ArrayType t = type_of(a).array;
  return load_mem(buffer(a), t.dtype, t.rank() == 0 ? mlir::ValueRange{} : idx);
}

Value LowerCtx::load_mem(Value memref, DType d, mlir::ValueRange idx) {
  Value v = b.create<mlir::memref::LoadOp>(loc, memref, idx);
  if (d == DType::bool_) {
    Value zero = b.create<mlir::arith::ConstantOp>(loc, b.getI8IntegerAttr(0));
    v = b.create<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::ne, v, zero);
  }
  return v;
}

void LowerCtx::store(Value v, Value memref, DType d, mlir::ValueRange idx) {
  if (d == DType::bool_) v = b.create<mlir::arith::ExtUIOp>(loc, b.getI8Type(), v);
  b.create<mlir::memref::StoreOp>(loc, v, memref, idx);
}

Value LowerCtx::load_index_scalar(const Atom& a) {
  Value v = load(a, {});
  DType d = type_of(a).dtype();
  if (d == DType::i64) return v;
  if (d == DType::bool_) return b.create<mlir::arith::ExtUIOp>(loc, b.getI64Type(), v);
  return b.create<mlir::arith::ExtSIOp>(loc, b.getI64Type(), v);
}

Value LowerCtx::clamp_to_index(Value i64, int64_t lo, int64_t hi) {
  if (hi < lo) hi = lo;
  Value c = b.create<mlir::arith::MaxSIOp>(loc, i64, int_constant(DType::i64, lo));
  c = b.create<mlir::arith::MinSIOp>(loc, c, int_constant(DType::i64, hi));
  return b.create<mlir::arith::IndexCastOp>(loc, b.getIndexType(), c);
}

// ---------------------------------------------------------------- code structure

void LowerCtx::loop_nest(const Shape& shape, const std::function<void(Ivs)>& body) {
  mlir::OpBuilder::InsertionGuard guard(b);
  std::vector<Value> ivs;
  for (int64_t n : shape) {
    auto loop = b.create<mlir::scf::ForOp>(loc, index(0), index(n), index(1));
    b.setInsertionPoint(loop.getBody()->getTerminator());
    ivs.push_back(loop.getInductionVar());
  }
  body(ivs);
}

std::vector<Value> LowerCtx::loop_with_carry(
    int64_t n, std::vector<Value> init,
    const std::function<std::vector<Value>(Value, const std::vector<Value>&)>& body) {
  auto loop = b.create<mlir::scf::ForOp>(loc, index(0), index(n), index(1), init);
  {
    mlir::OpBuilder::InsertionGuard guard(b);
    mlir::Block* blk = loop.getBody();
    if (blk->mightHaveTerminator())
      b.setInsertionPoint(blk->getTerminator());
    else
      b.setInsertionPointToEnd(blk);
    std::vector<Value> carried(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
    std::vector<Value> next = body(loop.getInductionVar(), carried);
    if (blk->mightHaveTerminator()) blk->getTerminator()->erase();
    b.setInsertionPointToEnd(blk);
    b.create<mlir::scf::YieldOp>(loc, next);
  }
  return std::vector<Value>(loop.getResults().begin(), loop.getResults().end());
}

void LowerCtx::copy(Value src, Value dst, const ArrayType& t) {
  auto st = mlir::cast<mlir::MemRefType>(src.getType());
  auto dt = mlir::cast<mlir::MemRefType>(dst.getType());
  if (st == dt && st.getLayout().isIdentity()) {
    b.create<mlir::memref::CopyOp>(loc, src, dst);
    return;
  }
  loop_nest(t.shape, [&](Ivs ivs) {
    Value v = b.create<mlir::memref::LoadOp>(loc, src, ivs);
    b.create<mlir::memref::StoreOp>(loc, v, dst, ivs);
  });
}

void LowerCtx::fill(Value dst, const ArrayType& t, Value scalar) {
  loop_nest(t.shape, [&](Ivs ivs) { store(scalar, dst, t.dtype, ivs); });
}

Value LowerCtx::row_view(Value memref, Value i) {
  auto src = mlir::cast<mlir::MemRefType>(memref.getType());
  auto shape = src.getShape();
  std::vector<int64_t> rest(shape.begin() + 1, shape.end());
  std::vector<mlir::OpFoldResult> offsets{i}, sizes{b.getIndexAttr(1)}, strides;
  for (size_t d = 0; d < shape.size(); ++d) strides.push_back(b.getIndexAttr(1));
  for (int64_t n : rest) {
    offsets.push_back(b.getIndexAttr(0));
    sizes.push_back(b.getIndexAttr(n));
  }
  auto type = mlir::cast<mlir::MemRefType>(
      mlir::memref::SubViewOp::inferRankReducedResultType(rest, src, offsets, sizes, strides));
  return b.create<mlir::memref::SubViewOp>(loc, type, memref, offsets, sizes, strides);
}

Value LowerCtx::call_libm(const std::string& name, mlir::ValueRange args) {
  mlir::Type t = args.front().getType();
  auto fn = module_.lookupSymbol<mlir::func::FuncOp>(name);
  if (!fn) {
    mlir::OpBuilder mb = mlir::OpBuilder::atBlockBegin(module_.getBody());
    std::vector<mlir::Type> ins(args.size(), t);
    fn = mb.create<mlir::func::FuncOp>(loc, name, mb.getFunctionType(ins, {t}));
    fn.setPrivate();
  }
  return b.create<mlir::func::CallOp>(loc, fn, args).getResult(0);
}

// ---------------------------------------------------------------- sub-jaxprs and scopes

void LowerCtx::push_frame(const Jaxpr& j, bool top_level) {
  frames_.push_back(Frame{&j, std::vector<Value>(j.vars.size()), top_level});
}

void LowerCtx::pop_frame() { frames_.pop_back(); }

void LowerCtx::free_scope(Scope& s) {
  for (Value m : s.allocations)
    if (m.getDefiningOp<mlir::memref::AllocOp>()) b.create<mlir::memref::DeallocOp>(loc, m);
  s.allocations.clear();
  workspace_offset_ = s.workspace_mark;
}

void LowerCtx::with_scope(const std::function<void()>& f) {
  scopes_.push_back(Scope{{}, workspace_offset_});
  f();
  free_scope(scopes_.back());
  scopes_.pop_back();
}

bool LowerCtx::owned_by_current_scope(Value memref) const {
  for (Value m : scopes_.back().allocations)
    if (m == memref) return true;
  return false;
}

std::vector<Value> LowerCtx::lower_inline(const Jaxpr& body, const std::vector<Value>& args) {
  size_t n_in = body.constvars.size() + body.invars.size();
  if (args.size() != n_in)
    throw Error(
        fmt::format("native backend: a sub-jaxpr takes {} values but got {}", n_in, args.size()));
  push_frame(body, false);
  size_t k = 0;
  for (Var v : body.constvars) bind_var(v, args[k++]);
  for (Var v : body.invars) bind_var(v, args[k++]);
  lower_eqns(body);
  std::vector<Value> outs;
  for (const Atom& a : body.outvars) outs.push_back(buffer(a));
  pop_frame();
  return outs;
}

void LowerCtx::lower_eqns(const Jaxpr& j) {
  const FusionPlan fusion = plan_fusion(j);
  for (size_t i = 0; i < j.eqns.size(); ++i) {
    const Eqn& e = j.eqns[i];
    if (fusion.group_of[i] >= 0) {
      // Members are computed inside their root's loop nest.
      if (fusion.is_root(i)) lower_fused_group(j, fusion.groups[fusion.group_of[i]]);
      continue;
    }
    const LowerRule* rule = lower_table().find(e.prim);
    if (!rule)
      throw Error(
          fmt::format("native backend: no lowering for primitive {} yet; run it with "
                      "the interpreter instead",
                      prim_name(e.prim)));
    (*rule)(*this, e);
  }
}

void LowerCtx::lower_fused_group(const Jaxpr& j, const std::vector<size_t>& group) {
  const Eqn& root = j.eqns[group.back()];
  ArrayType rt = j.type_of(root.outs[0]).array;
  Value dst = result_buffer(root.outs[0]);
  loop_nest(rt.shape, [&](Ivs ivs) {
    std::vector<Value> element(j.vars.size());  // by var id: members' values, in registers
    for (size_t k : group) {
      const Eqn& e = j.eqns[k];
      const ElemFn* f = elementwise_rule(e.prim);
      if (!f) fail_eqn(e, "fused but has no elementwise rule");
      std::vector<Value> xs;
      for (const Atom& a : e.ins) {
        if (is_var(a) && element[as_var(a).id])
          xs.push_back(element[as_var(a).id]);
        else
          xs.push_back(load(a, ivs));
      }
      element[e.outs[0].id] = (*f)(*this, e, type_of(e.ins.at(0)).dtype(), xs);
    }
    store(element[root.outs[0].id], dst, rt.dtype, ivs);
  });
}

// ---------------------------------------------------------------- module driver

mlir::OwningOpRef<mlir::ModuleOp> build_module(mlir::MLIRContext& ctx, const Jaxpr& jaxpr,
                                               const BufferPlan& plan, int64_t& workspace_bytes) {
  load_dialects(ctx);
  mlir::OpBuilder b(&ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(b.getUnknownLoc());
  LowerCtx lc(b, *module, plan);

  std::vector<mlir::Type> arg_types;
  for (Var v : jaxpr.constvars) arg_types.push_back(lc.memref_type(jaxpr.type_of(v).array));
  for (Var v : jaxpr.invars) arg_types.push_back(lc.memref_type(jaxpr.type_of(v).array));
  for (const Atom& a : jaxpr.outvars) {
    Type t = jaxpr.type_of(a);
    if (t.is_ref) throw Error("native backend: a jaxpr may not return a ref; freeze it first");
    arg_types.push_back(lc.memref_type(t.array));
  }
  if (plan.use_workspace)
    arg_types.push_back(mlir::MemRefType::get({mlir::ShapedType::kDynamic}, b.getI8Type()));
  b.setInsertionPointToEnd(module->getBody());
  auto fn =
      b.create<mlir::func::FuncOp>(b.getUnknownLoc(), kEntryName, b.getFunctionType(arg_types, {}));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  mlir::Block* entry = fn.addEntryBlock();
  b.setInsertionPointToEnd(entry);

  lc.push_frame(jaxpr, /*top_level=*/true);
  size_t k = 0;
  for (Var v : jaxpr.constvars) lc.bind_var(v, entry->getArgument(k++));
  for (Var v : jaxpr.invars) lc.bind_var(v, entry->getArgument(k++));
  std::vector<Value> outs;
  for (size_t i = 0; i < jaxpr.outvars.size(); ++i) outs.push_back(entry->getArgument(k++));
  lc.set_output_buffers(outs);
  if (plan.use_workspace) lc.set_workspace(entry->getArgument(k++));

  lc.with_scope([&] {
    lc.lower_eqns(jaxpr);
    for (size_t i = 0; i < jaxpr.outvars.size(); ++i) {
      Value src = lc.buffer(jaxpr.outvars[i]);
      if (src != outs[i]) lc.copy(src, outs[i], jaxpr.type_of(jaxpr.outvars[i]).array);
    }
  });
  b.create<mlir::func::ReturnOp>(b.getUnknownLoc());
  lc.pop_frame();
  workspace_bytes = lc.workspace_bytes();
  return module;
}

}  // namespace refjit::backend
