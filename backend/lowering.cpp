// LowerCtx: the shared machinery of the lowering rules, and the module driver.
#include "backend/lowering.h"

#include <fmt/format.h>

#include "backend/chain_fission.h"
#include "backend/fusion.h"
#include "backend/parallel_loops.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/BuiltinTypes.h"

namespace refjit::backend {

[[noreturn]] void fail_eqn(const Eqn& e, const std::string& what) {
  throw Error(fmt::format("native backend: cannot lower `{}`: {}", prim_name(e.prim), what));
}

const LowerTable& lower_table() {
  static const LowerTable table = [] {
    LowerTable t;
    register_elementwise_lowerings(t);
    register_shape_lowerings(t);
    register_reduce_lowerings(t);
    register_window_lowerings(t);
    register_dot_lowerings(t);
    register_ref_lowerings(t);
    register_control_lowerings(t);
    register_collective_lowerings(t);
    register_linalg_lowerings(t);
    register_host_lowerings(t);
    register_im2col_lowerings(t);
    register_fused_lowerings(t);
    register_row_loop_lowerings(t);
    return t;
  }();
  return table;
}

// ---------------------------------------------------------------- types and constants

mlir::Type LowerCtx::elem_type(DType d) {
  if (is_complex(d)) return mlir::ComplexType::get(elem_type(real_dtype(d)));
  // Integers are signless in MLIR: the operations choose signed or unsigned semantics.
  if (d == DType::f32) return b.getF32Type();
  if (d == DType::f64) return b.getF64Type();
  if (d == DType::f16) return b.getF16Type();
  if (d == DType::bf16) return b.getBF16Type();
  return b.getIntegerType(static_cast<unsigned>(bit_width(d)));
}

mlir::Type LowerCtx::storage_type(DType d) {
  return d == DType::bool_ ? b.getI8Type() : elem_type(d);
}

mlir::MemRefType LowerCtx::memref_type(const ArrayType& t) {
  return mlir::MemRefType::get(t.shape, storage_type(t.dtype));
}

Value LowerCtx::index(int64_t v) { return b.create<mlir::arith::ConstantIndexOp>(loc, v); }

Value LowerCtx::constant(DType d, double v) {
  if (is_complex(d)) return complex_constant(d, v, 0.0);
  if (is_float(d)) return b.create<mlir::arith::ConstantOp>(loc, b.getFloatAttr(elem_type(d), v));
  return int_constant(d, d == DType::bool_ ? (v != 0) : static_cast<int64_t>(v));
}

Value LowerCtx::int_constant(DType d, int64_t v) {
  // v's low bits (a uint64 value is its bit pattern; narrower ints wrap as the dtype does).
  unsigned bits = static_cast<unsigned>(bit_width(d));
  llvm::APInt value(64, static_cast<uint64_t>(v));
  return b.create<mlir::arith::ConstantOp>(loc, b.getIntegerAttr(elem_type(d), value.trunc(bits)));
}

Value LowerCtx::complex_constant(DType d, double re, double im) {
  mlir::Type part = elem_type(real_dtype(d));
  return b.create<mlir::complex::ConstantOp>(
      loc, elem_type(d), b.getArrayAttr({b.getFloatAttr(part, re), b.getFloatAttr(part, im)}));
}

Value LowerCtx::literal(const Literal& l) {
  if (is_complex(l.dtype)) return complex_constant(l.dtype, l.f, l.im);
  return is_float(l.dtype) ? constant(l.dtype, l.f) : int_constant(l.dtype, l.i);
}

Value LowerCtx::add(DType d, Value x, Value y) {
  if (is_complex(d)) return b.create<mlir::complex::AddOp>(loc, x, y);
  if (is_float(d)) return b.create<mlir::arith::AddFOp>(loc, x, y);
  return b.create<mlir::arith::AddIOp>(loc, x, y);
}

Value LowerCtx::mul(DType d, Value x, Value y) {
  if (is_complex(d)) return b.create<mlir::complex::MulOp>(loc, x, y);
  if (is_float(d)) return b.create<mlir::arith::MulFOp>(loc, x, y);
  return b.create<mlir::arith::MulIOp>(loc, x, y);
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
  const ArrayType& t = f.jaxpr->type_of(v).array;
  Value m;
  const auto into = std::find_if(f.result_into.begin(), f.result_into.end(),
                                 [&](const auto& r) { return r.first == v.id; });
  if (into != f.result_into.end()) {
    m = into->second;
  } else if (f.plan) {
    int b = v.id < f.plan->buffer_of_var.size() ? f.plan->buffer_of_var[v.id] : -1;
    m = b >= 0 ? view_as(buffer_memory(b), t) : alloc(t);
  } else {
    int slot = f.top_level ? plan_.output_slot_of(v) : -1;
    m = slot >= 0 ? output_buffers_.at(slot) : alloc(t);
  }
  f.env.at(v.id) = m;
  return m;
}

void LowerCtx::bind(Var v, Value memref) {
  Frame& f = frames_.back();
  int b = f.plan && v.id < f.plan->buffer_of_var.size() ? f.plan->buffer_of_var[v.id] : -1;
  if (b >= 0 && !f.mem.at(b)) {
    // The plan gave `v` a buffer of its own that nothing made yet (a view of a literal):
    // the value must live there, e.g. when that buffer is an output array.
    const ArrayType& t = f.jaxpr->type_of(v).array;
    Value dst = view_as(buffer_memory(b), t);
    copy(memref, dst, t);
    memref = dst;
  }
  f.env.at(v.id) = memref;
}

Value LowerCtx::view_as(Value memref, const ArrayType& t) {
  auto mt = mlir::cast<mlir::MemRefType>(memref.getType());
  if (mt.getShape() == llvm::ArrayRef<int64_t>(t.shape)) return memref;
  const llvm::SmallVector<int64_t> strides = mlir::computeSuffixProduct(t.shape);
  if (mt.getLayout().isIdentity())
    return b.create<mlir::memref::ReinterpretCastOp>(loc, memref_type(t), memref, 0, t.shape,
                                                     strides);
  // A view with an offset (a row of a bigger buffer): keep the offset, row-major strides.
  auto meta = b.create<mlir::memref::ExtractStridedMetadataOp>(loc, memref);
  return strided_view(memref, t, strides, meta.getOffset());
}

Value LowerCtx::strided_view(Value memref, const ArrayType& t, llvm::ArrayRef<int64_t> strides,
                             Value offset) {
  auto layout = mlir::StridedLayoutAttr::get(b.getContext(), mlir::ShapedType::kDynamic, strides);
  auto type = mlir::MemRefType::get(t.shape, storage_type(t.dtype), layout);
  std::vector<mlir::OpFoldResult> sizes, stride_attrs;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    sizes.push_back(b.getIndexAttr(t.shape[i]));
    stride_attrs.push_back(b.getIndexAttr(strides[i]));
  }
  return b.create<mlir::memref::ReinterpretCastOp>(loc, type, memref, mlir::OpFoldResult(offset),
                                                   sizes, stride_attrs);
}

// ---------------------------------------------------------------- the buffer assignment

const EqnBuffers* LowerCtx::eqn_buffers() const {
  const Frame& f = frames_.back();
  if (!f.plan || f.eqn < 0 || static_cast<size_t>(f.eqn) >= f.plan->eqns.size()) return nullptr;
  return &f.plan->eqns[f.eqn];
}

bool LowerCtx::shares_buffer(const Atom& a, Var v) const {
  const Frame& f = frames_.back();
  if (!f.plan || !is_var(a)) return false;
  const auto& bv = f.plan->buffer_of_var;
  Var x = as_var(a);
  if (x.id >= bv.size() || v.id >= bv.size()) return false;
  return bv[x.id] >= 0 && bv[x.id] == bv[v.id];
}

bool LowerCtx::has_no_buffer(Var v) const {
  const Frame& f = frames_.back();
  return f.plan && (v.id >= f.plan->buffer_of_var.size() || f.plan->buffer_of_var[v.id] < 0);
}

Value LowerCtx::buffer_memory(int b) {
  Frame& f = frames_.back();
  Value& m = f.mem.at(b);
  if (m) return m;
  const Buffer& B = f.plan->buffers.at(b);
  if (f.top_level && B.home >= 0) {
    m = view_as(output_buffers_.at(B.home), B.type);
  } else if (f.top_level && B.origin == BufferOrigin::result) {
    m = output_buffers_.at(B.index);
  } else if (B.outer >= 0 && frames_.size() >= 2) {
    Value outer = frames_[frames_.size() - 2].mem.at(B.outer);
    if (!outer)
      throw Error(
          fmt::format("native backend: internal error, buffer {} of {} stands for a "
                      "buffer of the enclosing jaxpr that was not made yet",
                      b, f.plan->where));
    m = view_as(outer, B.type);
  } else {
    m = alloc(B.type);
  }
  return m;
}

void LowerCtx::count_copy(const ArrayType& t) {
  if (!plan_.counts) return;
  if (loop_depth_ > 0) {
    ++plan_.counts->copies_in_loops;
    plan_.counts->bytes_in_loops += t.byte_size();
  } else {
    ++plan_.counts->copies_outside;
    plan_.counts->bytes_outside += t.byte_size();
  }
}

void LowerCtx::perform_copy(const Copy& cp, const Atom* fill_from) {
  const Frame& f = frames_.back();
  if (cp.kind == CopyKind::fill) {
    if (!fill_from || is_var(*fill_from))
      throw Error(fmt::format("native backend: internal error, no literal for a fill in {}",
                              f.plan->where));
    const Literal& l = std::get<Literal>(*fill_from);
    ArrayType t = f.plan->buffers.at(cp.dst).type;
    count_copy(t);
    fill(buffer_memory(cp.dst), t, literal(l));
    return;
  }
  if (!cp.value)
    throw Error(
        fmt::format("native backend: internal error, a copy without a value in {}", f.plan->where));
  Var v = *cp.value;
  const ArrayType& t = f.jaxpr->type_of(v).array;
  Value src =
      f.plan->buffer_of_var.at(v.id) == cp.src ? buffer(v) : view_as(buffer_memory(cp.src), t);
  copy(src, view_as(buffer_memory(cp.dst), t), t);
}

// ---------------------------------------------------------------- element access

Value LowerCtx::load(const Atom& a, mlir::ValueRange idx) {
  if (!is_var(a)) return literal(std::get<Literal>(a));
  if (fused_operand_ && as_var(a).id == fused_operand_->var_id) {
    FusedOperand fused = *fused_operand_;  // members' own loads must read their buffers
    fused_operand_.reset();
    std::vector<Value> ivs(idx.begin(), idx.end());
    Value v = fused_element(*fused.jaxpr, fused.members, ivs);
    fused_operand_ = std::move(fused);
    return v;
  }
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
  return index_to_i64(load(a, {}), type_of(a).dtype());
}

Value LowerCtx::index_to_i64(Value v, DType d) {
  if (bit_width(d) == 64) return v;
  if (d == DType::bool_ || is_unsigned(d))
    return b.create<mlir::arith::ExtUIOp>(loc, b.getI64Type(), v);
  return b.create<mlir::arith::ExtSIOp>(loc, b.getI64Type(), v);
}

Value LowerCtx::clamp_to_index(Value i64, int64_t lo, int64_t hi) {
  if (hi < lo) hi = lo;
  Value c = b.create<mlir::arith::MaxSIOp>(loc, i64, int_constant(DType::i64, lo));
  c = b.create<mlir::arith::MinSIOp>(loc, c, int_constant(DType::i64, hi));
  return b.create<mlir::arith::IndexCastOp>(loc, b.getIndexType(), c);
}

// ---------------------------------------------------------------- code structure

mlir::Operation* LowerCtx::loop_nest(const Shape& shape, const std::function<void(Ivs)>& body) {
  mlir::OpBuilder::InsertionGuard guard(b);
  std::vector<Value> ivs;
  mlir::Operation* outermost = nullptr;
  for (int64_t n : shape) {
    auto loop = b.create<mlir::scf::ForOp>(loc, index(0), index(n), index(1));
    if (!outermost) outermost = loop;
    b.setInsertionPoint(loop.getBody()->getTerminator());
    ivs.push_back(loop.getInductionVar());
  }
  body(ivs);
  return outermost;
}

void LowerCtx::parallel_loop_nest(const Shape& shape, const std::function<void(Ivs)>& body) {
  mlir::Operation* outer = loop_nest(shape, body);
  if (shape.empty()) return;
  mark_parallel(outer, shape[0], num_elements(Shape(shape.begin() + 1, shape.end())));
}

void LowerCtx::mark_parallel(mlir::Operation* loop, int64_t iterations,
                             int64_t elements_per_iteration) {
  if (!loop || !options_.runtime_kernels || !options_.parallel_loops || iterations < 2) return;
  const int64_t per = std::max<int64_t>(1, elements_per_iteration);
  if (iterations * per < kParallelMinElements) return;
  // A task gets at least half the threshold's elements.
  const int64_t min_per_task = std::max<int64_t>(1, (kParallelMinElements / 2 + per - 1) / per);
  loop->setAttr(kParallelAttr, b.getI64IntegerAttr(min_per_task));
}

std::vector<Value> LowerCtx::loop_with_carry(
    int64_t n, std::vector<Value> init,
    const std::function<std::vector<Value>(Value, const std::vector<Value>&)>& body) {
  // The body builder runs with `b` itself, its insertion point in the loop's body.
  auto loop = b.create<mlir::scf::ForOp>(
      loc, index(0), index(n), index(1), init,
      [&](mlir::OpBuilder&, mlir::Location, Value iv, mlir::ValueRange carried) {
        b.create<mlir::scf::YieldOp>(loc, body(iv, {carried.begin(), carried.end()}));
      });
  return {loop.getResults().begin(), loop.getResults().end()};
}

std::vector<Value> LowerCtx::while_loop(
    const std::vector<Value>& init, const std::function<Value(const std::vector<Value>&)>& cond,
    const std::function<std::vector<Value>(const std::vector<Value>&)>& body) {
  std::vector<mlir::Type> types;
  for (Value v : init) types.push_back(v.getType());
  std::vector<mlir::Location> locs(init.size(), loc);
  mlir::OpBuilder::InsertionGuard guard(b);
  auto loop = b.create<mlir::scf::WhileOp>(loc, types, init);
  mlir::Block* before = b.createBlock(&loop.getBefore(), {}, types, locs);
  std::vector<Value> args(before->getArguments().begin(), before->getArguments().end());
  b.create<mlir::scf::ConditionOp>(loc, cond(args), before->getArguments());
  mlir::Block* after = b.createBlock(&loop.getAfter(), {}, types, locs);
  args.assign(after->getArguments().begin(), after->getArguments().end());
  b.create<mlir::scf::YieldOp>(loc, body(args));
  return {loop.getResults().begin(), loop.getResults().end()};
}

void LowerCtx::if_then(Value cond, const std::function<void()>& then,
                       const std::function<void()>& otherwise) {
  auto branch = b.create<mlir::scf::IfOp>(loc, cond, /*withElseRegion=*/bool(otherwise));
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(branch.thenBlock()->getTerminator());
  then();
  if (!otherwise) return;
  b.setInsertionPoint(branch.elseBlock()->getTerminator());
  otherwise();
}

Value LowerCtx::in_range(Value v, int64_t lo, int64_t hi) {
  auto bound = [&](int64_t x) {
    return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(v.getType(), x));
  };
  return b.create<arith::AndIOp>(
      loc, b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, v, bound(lo)),
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sle, v, bound(hi)));
}

Value LowerCtx::affine_index(Value i, int64_t scale, int64_t offset) {
  if (scale != 1) i = b.create<arith::MulIOp>(loc, i, index(scale));
  if (offset != 0) i = b.create<arith::AddIOp>(loc, i, index(offset));
  return i;
}

void LowerCtx::copy(Value src, Value dst, const ArrayType& t) {
  count_copy(t);
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

void LowerCtx::move_elements(Value dst, mlir::ValueRange dst_idx, Value src,
                             mlir::ValueRange src_idx, int64_t n, DType d) {
  if (n <= 0) return;
  move_elements(dst, dst_idx, src, src_idx, index(n), d);
}

void LowerCtx::move_elements(Value dst, mlir::ValueRange dst_idx, Value src,
                             mlir::ValueRange src_idx, Value n, DType d) {
  const int64_t elem_bytes = byte_size(d);  // bool is stored as one byte
  // Address of element `idx` of `m`: aligned pointer + (offset + sum idx_i * stride_i) * size.
  // The strided offset is relative to the descriptor's aligned pointer, which only a
  // memref.view moves (by its byte shift). expand-strided-metadata rewrites the aligned
  // pointer of any view-like op to its source's, dropping that shift, so take the pointer
  // of the root buffer and add the byte shifts of the views in between.
  auto address = [&](Value m, mlir::ValueRange idx) {
    auto meta = b.create<mlir::memref::ExtractStridedMetadataOp>(loc, m);
    Value lin = meta.getOffset();
    for (size_t i = 0; i < idx.size(); ++i)
      lin = b.create<mlir::arith::AddIOp>(
          loc, lin, b.create<mlir::arith::MulIOp>(loc, idx[i], meta.getStrides()[i]));
    Value bytes = b.create<mlir::arith::MulIOp>(loc, lin, index(elem_bytes));
    Value root = m;
    while (auto view_like = root.getDefiningOp<mlir::ViewLikeOpInterface>()) {
      if (auto view = mlir::dyn_cast<mlir::memref::ViewOp>(view_like.getOperation()))
        bytes = b.create<mlir::arith::AddIOp>(loc, bytes, view.getByteShift());
      root = view_like.getViewSource();
    }
    Value base = b.create<mlir::memref::ExtractAlignedPointerAsIndexOp>(loc, root);
    Value addr = b.create<mlir::arith::AddIOp>(loc, base, bytes);
    Value i64 = b.create<mlir::arith::IndexCastOp>(loc, b.getI64Type(), addr);
    return b
        .create<mlir::LLVM::IntToPtrOp>(loc, mlir::LLVM::LLVMPointerType::get(b.getContext()), i64)
        .getResult();
  };
  Value to = address(dst, dst_idx);
  Value from = address(src, src_idx);
  Value bytes = b.create<mlir::arith::MulIOp>(loc, n, index(elem_bytes));
  bytes = b.create<mlir::arith::IndexCastOp>(loc, b.getI64Type(), bytes);
  b.create<mlir::LLVM::MemmoveOp>(loc, to, from, bytes, /*isVolatile=*/false);
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

bool is_contiguous(mlir::Value memref) {
  return mlir::cast<mlir::MemRefType>(memref.getType()).getLayout().isIdentity();
}

void require_runtime(LowerCtx& c, const Eqn& e, std::string_view what) {
  if (c.options().runtime_kernels) return;
  throw Error(
      fmt::format("{}: {} runs on refjit's runtime, which `refjit compile` objects do not "
                  "link; run the program with jit (or `refjit run`)",
                  prim_name(e.prim), what));
}

std::string typed_runtime_symbol(std::string_view entry, DType dtype) {
  return fmt::format("{}_{}", entry, short_name(dtype));
}

mlir::Value unranked_memref(LowerCtx& c, mlir::Value memref) {
  auto type = mlir::cast<mlir::MemRefType>(memref.getType());
  auto to = mlir::UnrankedMemRefType::get(type.getElementType(), type.getMemorySpace());
  return c.b.create<mlir::memref::CastOp>(c.loc, to, memref);
}

mlir::func::FuncOp LowerCtx::declare(const std::string& name, mlir::TypeRange ins,
                                     mlir::TypeRange outs) {
  if (auto fn = module_.lookupSymbol<mlir::func::FuncOp>(name)) return fn;
  mlir::OpBuilder mb = mlir::OpBuilder::atBlockBegin(module_.getBody());
  auto fn = mb.create<mlir::func::FuncOp>(loc, name, mb.getFunctionType(ins, outs));
  fn.setPrivate();
  return fn;
}

Value LowerCtx::call_libm(const std::string& name, mlir::ValueRange args) {
  const mlir::Type t = args.front().getType();
  const std::vector<mlir::Type> ins(args.size(), t);
  return b.create<mlir::func::CallOp>(loc, declare(name, ins, {t}), args).getResult(0);
}

void LowerCtx::call_runtime(const std::string& name, mlir::ValueRange args) {
  b.create<mlir::func::CallOp>(loc, declare(name, args.getTypes(), {}), args);
}

// ---------------------------------------------------------------- sub-jaxprs and scopes

void LowerCtx::push_frame(const Jaxpr& j, bool top_level, const JaxprBuffers* plan) {
  Frame f;
  f.jaxpr = &j;
  f.env.resize(j.vars.size());
  f.top_level = top_level;
  f.plan = plan;
  if (plan) f.mem.resize(plan->buffers.size());
  frames_.push_back(std::move(f));
}

const JaxprBuffers& LowerCtx::checked_plan(size_t index, const Jaxpr& j, bool matches) const {
  const BufferAssignment& a = *plan_.assignment;
  if (!matches || index >= a.jaxprs.size() || a.jaxprs[index].eqns.size() != j.eqns.size() ||
      a.jaxprs[index].buffer_of_var.size() != j.vars.size())
    throw Error(
        "native backend: the buffer plan was computed for another jaxpr; compute it with "
        "default_buffer_plan on the jaxpr being compiled");
  return a.jaxprs[index];
}

void LowerCtx::lower_planned(const Jaxpr& sub, size_t which, const std::vector<Value>& args,
                             const std::function<void()>& setup) {
  const EqnBuffers* eb = eqn_buffers();
  if (!eb || which >= eb->sub_plans.size())
    throw Error("native backend: internal error, the buffer plan has no plan for a sub-jaxpr");
  const JaxprBuffers& p = checked_plan(static_cast<size_t>(eb->sub_plans[which]), sub);
  size_t n_in = sub.constvars.size() + sub.invars.size();
  if (args.size() != n_in)
    throw Error(
        fmt::format("native backend: a sub-jaxpr takes {} values but got {}", n_in, args.size()));
  push_frame(sub, false, &p);
  size_t k = 0;
  auto bind_binder = [&](Var v) {
    bind_var(v, args[k]);
    int b = p.buffer_of_var.at(v.id);
    if (b >= 0 && !frames_.back().mem.at(b)) frames_.back().mem[b] = args[k];
    ++k;
  };
  for (Var v : sub.constvars) bind_binder(v);
  for (Var v : sub.invars) bind_binder(v);
  if (setup) setup();
  lower_eqns(sub);
  // Fills take their literal from the outvar whose home is the destination.
  size_t n_carry = 0, n_y = 0;
  for (const Buffer& B : p.buffers) n_carry += B.origin == BufferOrigin::carry;
  n_y = sub.outvars.size() >= n_carry ? sub.outvars.size() - n_carry : 0;
  for (const Copy& cp : p.end_copies) {
    const Atom* lit = nullptr;
    if (cp.kind == CopyKind::fill) {
      const Buffer& D = p.buffers.at(cp.dst);
      size_t out = static_cast<size_t>(D.index);
      if (D.origin == BufferOrigin::y_row) out = sub.outvars.size() - n_y + D.index;
      if (out < sub.outvars.size()) lit = &sub.outvars[out];
    }
    perform_copy(cp, lit);
  }
  pop_frame();
}

void LowerCtx::pop_frame() { frames_.pop_back(); }

void LowerCtx::with_scope(const std::function<void()>& f) {
  scopes_.push_back(Scope{{}, workspace_offset_});
  f();
  // Heap buffers (no workspace) are freed; workspace space is handed back.
  for (Value m : scopes_.back().allocations)
    if (m.getDefiningOp<mlir::memref::AllocOp>()) b.create<mlir::memref::DeallocOp>(loc, m);
  workspace_offset_ = scopes_.back().workspace_mark;
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
  if (plan_.counts)
    for (const Eqn& e : j.eqns) plan_.counts->fused_groups += e.prim == Prim::fused ? 1 : 0;
  for (size_t i = 0; i < j.eqns.size(); ++i) {
    frames_.back().eqn = static_cast<int>(i);
    lower_eqn_at(j, i);
  }
}

void LowerCtx::lower_eqn_at(const Jaxpr& j, size_t index) {
  const Eqn& e = j.eqns.at(index);
  const int saved = frames_.back().eqn;
  frames_.back().eqn = static_cast<int>(index);
  const LowerRule* rule = lower_table().find(e.prim);
  if (!rule)
    throw Error(
        fmt::format("native backend: no lowering for primitive {} yet; run it with "
                    "the interpreter instead",
                    prim_name(e.prim)));
  (*rule)(*this, e);
  frames_.back().eqn = saved;
}

// ---------------------------------------------------------------- module driver

mlir::OwningOpRef<mlir::ModuleOp> build_module(mlir::MLIRContext& ctx, const Jaxpr& jaxpr,
                                               const BufferPlan& plan, int64_t& workspace_bytes,
                                               const LoweringOptions& options) {
  ctx.loadDialect<mlir::arith::ArithDialect, mlir::complex::ComplexDialect, mlir::func::FuncDialect,
                  mlir::math::MathDialect, mlir::memref::MemRefDialect, mlir::scf::SCFDialect,
                  mlir::LLVM::LLVMDialect>();
  mlir::OpBuilder b(&ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(b.getUnknownLoc());
  LowerCtx lc(b, *module, plan, options);

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

  const JaxprBuffers* top = nullptr;
  if (!plan.naive) {
    if (!plan.assignment)
      throw Error("native backend: no buffer plan; use default_buffer_plan(jaxpr)");
    top = &lc.checked_plan(0, jaxpr, plan.signature == jaxpr_signature(jaxpr));
  }
  lc.push_frame(jaxpr, /*top_level=*/true, top);
  size_t k = 0;
  std::vector<Var> binders = jaxpr.constvars;
  binders.insert(binders.end(), jaxpr.invars.begin(), jaxpr.invars.end());
  for (Var v : binders) lc.bind_var(v, entry->getArgument(k++));
  std::vector<Value> outs;
  for (size_t i = 0; i < jaxpr.outvars.size(); ++i) outs.push_back(entry->getArgument(k++));
  lc.set_output_buffers(outs);
  if (plan.use_workspace) lc.set_workspace(entry->getArgument(k++));

  lc.with_scope([&] {
    if (!top) {
      lc.lower_eqns(jaxpr);
      for (size_t i = 0; i < jaxpr.outvars.size(); ++i) {
        Value src = lc.buffer(jaxpr.outvars[i]);
        if (src != outs[i]) lc.copy(src, outs[i], jaxpr.type_of(jaxpr.outvars[i]).array);
      }
      return;
    }
    // Binders are the caller's arrays and refs. The runtime passes inputs read-only, so a
    // donated input that the plan returns as output k is moved into output k on entry and
    // updated there; a donated ref keeps the caller's storage and is copied out at the end.
    std::vector<std::pair<Value, int>> ref_outputs;
    for (size_t i = 0; i < binders.size(); ++i) {
      Var v = binders[i];
      int b = top->buffer_of_var.at(v.id);
      if (b < 0) continue;
      const Buffer& B = top->buffers.at(b);
      Value arg = entry->getArgument(i);
      if (B.home >= 0 && B.origin == BufferOrigin::input && !jaxpr.type_of(v).is_ref) {
        Value home = lc.view_as(outs.at(B.home), B.type);
        // The runtime passes one array for both when the caller's donated array became
        // the output's storage (CompiledFunction taking its arguments): nothing to copy.
        Value from = lc.b.create<mlir::memref::ExtractAlignedPointerAsIndexOp>(lc.loc, arg);
        Value to =
            lc.b.create<mlir::memref::ExtractAlignedPointerAsIndexOp>(lc.loc, outs.at(B.home));
        Value differ = lc.b.create<arith::CmpIOp>(lc.loc, arith::CmpIPredicate::ne, from, to);
        lc.if_then(differ, [&] { lc.copy(arg, home, B.type); });
        lc.set_buffer_memory(b, home);
        lc.bind_var(v, home);
        continue;
      }
      if (B.home >= 0) ref_outputs.push_back({arg, B.home});
      lc.set_buffer_memory(b, arg);
    }
    lc.lower_eqns(jaxpr);
    for (const Copy& cp : top->end_copies) {
      const Buffer& D = top->buffers.at(cp.dst);
      const Atom* lit =
          D.origin == BufferOrigin::result && static_cast<size_t>(D.index) < jaxpr.outvars.size()
              ? &jaxpr.outvars[D.index]
              : nullptr;
      lc.perform_copy(cp, lit);
    }
    for (auto [ref, out] : ref_outputs) {
      ArrayType t = jaxpr.type_of(jaxpr.outvars.at(out)).array;
      lc.copy(lc.view_as(ref, t), outs.at(out), t);
    }
  });
  b.create<mlir::func::ReturnOp>(b.getUnknownLoc());
  lc.pop_frame();
  workspace_bytes = lc.workspace_bytes();
  outline_epilogues(*module);
  outline_parallel_loops(*module);
  outline_large_loops(*module);
  if (options.chain_fission) split_transcendental_chains(*module);
  clear_transcendental_marks(*module);
  return module;
}

}  // namespace refjit::backend

namespace refjit {

bool has_native_lowering(Prim p) { return backend::lower_table().find(p) != nullptr; }

}  // namespace refjit
