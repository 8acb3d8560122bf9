// Internal to the native backend: the context every lowering rule works with, and the
// per-primitive rule table. Included only by backend/*.cpp (it pulls in MLIR).
//
// Model: every jaxpr value (array or ref) is a statically shaped memref. Rules read
// operands element by element (`load`), write results into buffers obtained from
// `result_buffer` (which consults the BufferPlan), or `bind` a result to a view of an
// existing buffer. Element computations use i1 for bool; bool memrefs store i8.
//
// Following a buffer assignment (docs/buffers.md), each frame keeps one memref per buffer
// of its plan; a value's memref is a view of its buffer's memref. result_buffer(v) returns
// v's buffer, which for an in-place update is operand 0's: a rule asks shares_buffer() and
// then writes only the region instead of copying the operand first.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/buffer_plan.h"
#include "backend/fusion.h"
#include "backend/row_loops.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "refjit/ir/error.h"
#include "refjit/ir/jaxpr.h"

namespace refjit::backend {

// Names every backend file uses.
using mlir::Value;
namespace arith = mlir::arith;
namespace math = mlir::math;

// One lexical region of generated code (function body, loop body, cond branch): the
// buffers allocated in it, freed when it ends.
struct Scope {
  std::vector<mlir::Value> allocations;
  int64_t workspace_mark = 0;  // workspace offset when the scope began (restored at its end)
};

// Choices of the lowering that CompileOptions make (native.h).
struct LoweringOptions {
  // The code may call refjit's runtime kernels (JIT code, not `refjit compile` objects,
  // which need only libc and libm).
  bool runtime_kernels = true;
  // Loops marked by parallel_loop_nest run on the runtime's threads (parallel_loops.h);
  // needs runtime_kernels.
  bool parallel_loops = true;
  // Element loops chaining transcendental functions are split by stage (chain_fission.h).
  bool chain_fission = true;
  // f32 tanh, log1p, expm1 and erf become math-dialect ops that MLIR's polynomial
  // approximations replace (vectorisable), instead of libm calls.
  bool approximate_math = true;
};

class LowerCtx {
 public:
  LowerCtx(mlir::OpBuilder& b, mlir::ModuleOp module, const BufferPlan& plan,
           LoweringOptions options)
      : b(b), loc(b.getUnknownLoc()), module_(module), plan_(plan), options_(options) {}

  // Fresh buffers become views of this workspace argument (memref<?xi8>) at static offsets,
  // stack-allocated by scope, instead of memref.alloc (BufferPlan::use_workspace).
  void set_workspace(mlir::Value ws) { workspace_ = ws; }
  // Bytes of workspace the lowered function needs (high-water mark).
  int64_t workspace_bytes() const { return workspace_high_; }

  mlir::OpBuilder& b;
  mlir::Location loc;

  // ---- types
  mlir::Type elem_type(DType d);     // computation type (i1 for bool)
  mlir::Type storage_type(DType d);  // memref element type (i8 for bool)
  mlir::MemRefType memref_type(const ArrayType& t);

  // ---- constants
  mlir::Value index(int64_t v);
  mlir::Value constant(DType d, double v);  // of elem_type(d), converted as a literal
  mlir::Value int_constant(DType d, int64_t v);
  mlir::Value complex_constant(DType d, double re, double im);
  mlir::Value literal(const Literal& l);

  // ---- arithmetic on one element of dtype d (float, complex or integer ops)
  mlir::Value add(DType d, mlir::Value x, mlir::Value y);
  mlir::Value mul(DType d, mlir::Value x, mlir::Value y);

  // ---- values of the jaxpr being lowered (the innermost frame's)
  Type type_of(const Atom& a) const;
  // The buffer of a var (throws if unbound); for a literal, a fresh rank-0 buffer holding it.
  mlir::Value buffer(const Atom& a);
  // A buffer for result `v` of the current eqn: the buffer the plan gives it (possibly an
  // operand's, for an in-place update), or a fresh allocation.
  mlir::Value result_buffer(Var v);
  // Makes `v` refer to `memref` (a view or another value's buffer); no copy.
  void bind(Var v, mlir::Value memref);
  mlir::Value alloc(const ArrayType& t);
  // `memref` (contiguous row-major data, any offset) seen with type `t` (same element count):
  // itself, or a memref.reinterpret_cast of it.
  mlir::Value view_as(mlir::Value memref, const ArrayType& t);
  // `memref` seen as `t` with `strides`, from element `offset` (an index value) of it.
  mlir::Value strided_view(mlir::Value memref, const ArrayType& t, llvm::ArrayRef<int64_t> strides,
                           mlir::Value offset);

  // ---- the buffer assignment (null / false / -1 under the naive plan)
  // The plan of the jaxpr being lowered, and of the eqn being lowered.
  const JaxprBuffers* buffers() const { return frames_.back().plan; }
  const EqnBuffers* eqn_buffers() const;
  // Whether the plan puts `a` and `v` in the same buffer (`v` then overwrites `a` in place,
  // or is a view of it). Always false under the naive plan.
  bool shares_buffer(const Atom& a, Var v) const;
  // Whether the plan gives `v` no storage (an unused result, e.g. swap's old value).
  bool has_no_buffer(Var v) const;

  // ---- element access (idx are index values; rank-0 and literals take none)
  mlir::Value load(const Atom& a, mlir::ValueRange idx);
  mlir::Value load_mem(mlir::Value memref, DType d, mlir::ValueRange idx);
  void store(mlir::Value v, mlir::Value memref, DType d, mlir::ValueRange idx);
  // A scalar int operand as i64 (for dynamic indices).
  mlir::Value load_index_scalar(const Atom& a);
  // An integer element of dtype d widened to i64 (sign- or zero-extended by its dtype).
  mlir::Value index_to_i64(mlir::Value v, DType d);
  // clamp(v, lo, hi) on i64, returned as index.
  mlir::Value clamp_to_index(mlir::Value i64, int64_t lo, int64_t hi);

  // ---- code structure
  using Ivs = const std::vector<mlir::Value>&;
  // Nested scf.for over `shape`; body gets the induction variables (outermost first).
  // Returns the outermost loop (null for rank 0).
  mlir::Operation* loop_nest(const Shape& shape, const std::function<void(Ivs)>& body);
  // A loop_nest whose iterations are independent (each writes only its own elements): when
  // large enough, its outermost loop runs on the runtime's threads (mark_parallel).
  void parallel_loop_nest(const Shape& shape, const std::function<void(Ivs)>& body);
  // Marks `loop` (an scf.for over 0..iterations) parallel when the options allow it and its
  // iterations, each touching about `elements_per_iteration` elements, are worth the threads.
  void mark_parallel(mlir::Operation* loop, int64_t iterations, int64_t elements_per_iteration);
  // A single scf.for carrying `init`; body returns the next carried values.
  std::vector<mlir::Value> loop_with_carry(
      int64_t n, std::vector<mlir::Value> init,
      const std::function<std::vector<mlir::Value>(mlir::Value iv,
                                                   const std::vector<mlir::Value>& carried)>& body);
  // An scf.while carrying `init`: `cond` reads the carried values before each step (true: run
  // it), `body` makes the next ones. Returns the final values.
  std::vector<mlir::Value> while_loop(
      const std::vector<mlir::Value>& init,
      const std::function<mlir::Value(const std::vector<mlir::Value>&)>& cond,
      const std::function<std::vector<mlir::Value>(const std::vector<mlir::Value>&)>& body);
  // An scf.if on `cond` (i1): `then` emits the code of its then block, `otherwise` (if any) that
  // of its else block.
  void if_then(mlir::Value cond, const std::function<void()>& then,
               const std::function<void()>& otherwise = {});
  // Whether lo <= v <= hi (v an index or i64 value), as i1.
  mlir::Value in_range(mlir::Value v, int64_t lo, int64_t hi);
  // i * scale + offset on index values (no op for a scale of 1 or an offset of 0).
  mlir::Value affine_index(mlir::Value i, int64_t scale, int64_t offset = 0);
  // Elementwise copy between same-shaped memrefs of any layout.
  void copy(mlir::Value src, mlir::Value dst, const ArrayType& t);
  void fill(mlir::Value dst, const ArrayType& t, mlir::Value scalar);
  // Copies `n` contiguous elements from `src` at index `src_idx` to `dst` at `dst_idx` (both
  // row-major runs; the two ranges may overlap, e.g. a row segment shifted inside its own
  // buffer): one llvm.memmove.
  void move_elements(mlir::Value dst, mlir::ValueRange dst_idx, mlir::Value src,
                     mlir::ValueRange src_idx, int64_t n, DType d);
  // The same with a run-time element count `n` (an index value, >= 0).
  void move_elements(mlir::Value dst, mlir::ValueRange dst_idx, mlir::Value src,
                     mlir::ValueRange src_idx, mlir::Value n, DType d);
  // Rank-reducing view of row `i` (an index value) of a memref along dim 0.
  mlir::Value row_view(mlir::Value memref, mlir::Value i);
  // A call to a libm function (float -> float), declared on first use.
  mlir::Value call_libm(const std::string& name, mlir::ValueRange args);
  const LoweringOptions& options() const { return options_; }
  // A call to a runtime kernel returning nothing, declared on first use with the types of
  // `args` (the JIT resolves it: native.cpp registers the symbols).
  void call_runtime(const std::string& name, mlir::ValueRange args);

  // ---- sub-jaxprs
  // Lowers `body` at the current insertion point with its constvars then invars bound to
  // `args` (memrefs; refs are passed by reference) and returns its outvars' buffers.
  // Literal outvars are materialised; other outvars may alias buffers of `args`.
  // Naive plan only.
  std::vector<mlir::Value> lower_inline(const Jaxpr& body, const std::vector<mlir::Value>& args);
  // Following the plan: lowers sub-jaxpr `sub` (sub_plans[which] of the current eqn) with
  // its binders in `args`; `setup(ctx)` runs in the new frame first (e.g. to place y rows
  // with set_buffer_memory); then the eqns and the plan's end copies. The body's results
  // end up in the buffers the plan says (the parent's result buffers, carries, rows).
  void lower_planned(const Jaxpr& sub, size_t which, const std::vector<mlir::Value>& args,
                     const std::function<void()>& setup = {});
  // The memref of buffer `b` of the current frame's plan, materialised on first use (the
  // output array or parent buffer it stands for, or a fresh allocation).
  mlir::Value buffer_memory(int b);
  void set_buffer_memory(int b, mlir::Value memref) { frames_.back().mem.at(b) = memref; }
  // Performs copy `cp` of the current plan; `literal` is the source of a fill.
  void perform_copy(const Copy& cp, const Atom* fill_from);
  // Runs `f` with a fresh scope whose allocations are freed at the current insertion point
  // when `f` returns (use for loop bodies and branches).
  void with_scope(const std::function<void()>& f);
  // Brackets the lowering of a loop body (copies inside count as per-iteration copies).
  void enter_loop() { ++loop_depth_; }
  void exit_loop() { --loop_depth_; }
  // Whether `memref` was allocated in the innermost scope (so nothing else aliases it).
  bool owned_by_current_scope(mlir::Value memref) const;

  // Lowers eqn `index` of `j` (the current frame's jaxpr) by its rule, as if at its position.
  void lower_eqn_at(const Jaxpr& j, size_t index);

  // Lowers all eqns of `j` (already bound) in order.
  void lower_eqns(const Jaxpr& j);
  // A `fused` eqn: one loop nest computing its body's eqns per element into its result buffer.
  void lower_fused(const Eqn& e);
  // A `product_epilogue` eqn: its product (the matrix kernel's call, or loops) computed into its
  // result buffer, where its consumer then overwrites it row by row.
  void lower_product_epilogue(const Eqn& e);
  // Runs `f(body, members)` in a frame of the body of `e` (a fused or product_epilogue eqn): its
  // invars bound to e's operands, its result (and a product_epilogue's product) to `dst`;
  // `members` are all the body's eqns, in order.
  // (`with_operands` false: the invars are left unbound, for code that needs only the types.)
  void in_fused_body(const Eqn& e, mlir::Value dst,
                     const std::function<void(const Jaxpr&, const std::vector<size_t>&)>& f,
                     bool with_operands = true);
  // One loop nest computing the group's eqns (indices into j.eqns, root last) per element into
  // `dst`. A reduction root runs its own rule, reading its operand from the members (load()).
  void lower_fused_group(const Jaxpr& j, const std::vector<size_t>& group, mlir::Value dst);
  // A matrix-product epilogue (product_epilogues.h): eqn `root` (a fused eqn or one
  // elementwise eqn) as one scf.for over the rows of its result (all its dims but the last,
  // flattened), marked kEpilogueAttr for outline_epilogues (parallel_loops.h) to hand to the
  // matrix kernel's call that must come right after it. (Where there is no such call, the
  // consumer is lowered by its rule after the product.)
  mlir::Operation* lower_epilogue_rows(const Jaxpr& j, size_t root);
  // A `row_loop` eqn (row_loops.h): its body's passengers (views of row results), then one
  // scf.for over the rows computing row i of every item in turn; full reductions store a
  // partial per row, combined in row order after the loop.
  void lower_row_loop(const Eqn& e);
  // The loop `loop` of body `j` (in its frame).
  void lower_row_loop(const Jaxpr& j, const RowLoop& loop);
  // Row `block` of `rows` (one row of `t` per block), seen as all of `t` (dim 0 of stride 0).
  mlir::Value row_of_block(mlir::Value rows, const ArrayType& t, mlir::Value block);
  // The members of a group (eqn indices, in order) evaluated at element `ivs`, in
  // registers; returns the last member's value.
  mlir::Value fused_element(const Jaxpr& j, const std::vector<size_t>& members, Ivs ivs);
  // Element `ivs` of view `e` (a slice or pad member, fusion.h): its operand's element at the
  // index `ivs` maps to (or the padding value). `views[var id]` is the member view defining
  // the var, if any: a view of a view composes the two index maps.
  mlir::Value view_element(const std::vector<const Eqn*>& views, const Eqn& e, Ivs ivs);
  // Element `ivs` of `a`: computed when a member view defines it, else loaded.
  mlir::Value view_operand(const std::vector<const Eqn*>& views, const Atom& a, Ivs ivs);
  // The element of broadcast_in_dim `e`'s operand that its result element `ivs` reads.
  std::vector<mlir::Value> broadcast_operand_index(const Eqn& e, Ivs ivs);

  // ---- driver state
  struct Frame {
    const Jaxpr* jaxpr = nullptr;
    std::vector<mlir::Value> env;  // by var id
    bool top_level = false;
    const JaxprBuffers* plan = nullptr;  // null: naive plan
    std::vector<mlir::Value> mem;        // by buffer id of `plan`
    int eqn = -1;                        // the eqn being lowered
    // In the body of a fused or product_epilogue eqn: the vars computed into the eqn's result
    // buffer (result_buffer's answer for them), by var id.
    std::vector<std::pair<uint32_t, mlir::Value>> result_into;
  };
  void push_frame(const Jaxpr& j, bool top_level, const JaxprBuffers* plan = nullptr);
  void pop_frame();
  void bind_var(Var v, mlir::Value memref) { frames_.back().env.at(v.id) = memref; }
  void set_output_buffers(std::vector<mlir::Value> outs) { output_buffers_ = std::move(outs); }
  // Plan `index` of the buffer assignment, checked to be made for `j` (and `matches`: the
  // caller's own check, e.g. of the whole program's signature).
  const JaxprBuffers& checked_plan(size_t index, const Jaxpr& j, bool matches = true) const;

 private:
  // Function `name` of the module, declared (private, of type ins -> outs) on first use.
  mlir::func::FuncOp declare(const std::string& name, mlir::TypeRange ins, mlir::TypeRange outs);
  // Parts of lower_fused_group: `member[var id]` says which vars the group computes.
  std::vector<bool> group_members(const Jaxpr& j, const std::vector<size_t>& group) const;
  // Loads the group's rank-0 operands from outside it into outside_scalar_.
  void load_outside_scalars(const Jaxpr& j, const std::vector<size_t>& group,
                            const std::vector<bool>& member, const ArrayType& root_type);
  // One row of the group's result (a rank >= 1 root): the loop over its last dim at
  // `outer_ivs`, with broadcasts that read one element per row loaded before it.
  void lower_fused_row(const Jaxpr& j, const std::vector<size_t>& group,
                       const std::vector<bool>& member, Ivs outer_ivs, mlir::Value dst,
                       const ArrayType& root_type);
  // The range [first, end) of the group's last dim where no member pad reads its padding along
  // that dim (a stencil's interior), when some pad could; nullopt otherwise.
  std::optional<std::pair<int64_t, int64_t>> pad_interior(const Jaxpr& j,
                                                          const std::vector<size_t>& group,
                                                          int64_t extent) const;
  // Emits `body(i)` for i in [0, n) of the group's last dim: with `interior`, as three loops,
  // the middle one (the interior) without the pads' bounds checks along that dim, so that it
  // vectorises. `parallel` marks the middle loop parallel.
  void split_at_interior(int64_t n, std::optional<std::pair<int64_t, int64_t>> interior,
                         bool parallel, const std::function<void(mlir::Value)>& body);
  // Row `row` (of block `block`) of a row-loop item, the eqns `members` of `j` (a fused eqn's
  // body, or one eqn), root last, into `dst` (the partials of a reduction finished after the
  // loop).
  void lower_row_of(const Jaxpr& j, const std::vector<size_t>& members, RowItemKind kind,
                    mlir::Value row, mlir::Value dst, mlir::Value block);
  // Runs `f(jaxpr, members)` on the eqns computing eqn `index` of `j` (a row-loop item or an
  // epilogue), as the eqn being lowered: in_fused_body for a fused eqn, its result bound to
  // `dst`; else the eqn alone, in `j`.
  void in_eqn_body(const Jaxpr& j, size_t index, mlir::Value dst,
                   const std::function<void(const Jaxpr&, const std::vector<size_t>&)>& f,
                   bool with_operands = true);
  void count_copy(const ArrayType& t);
  int loop_depth_ = 0;  // scan bodies being lowered
  // While a reduction rooting a fusion group is lowered: its operand, which load() computes
  // from the group's members instead of reading a buffer.
  struct FusedOperand {
    uint32_t var_id;
    const Jaxpr* jaxpr;
    std::vector<size_t> members;
  };
  std::optional<FusedOperand> fused_operand_;
  // While a fused group is lowered: rank-0 operands from outside it, loaded before its loops,
  // and broadcast members loaded once per row (by var id).
  std::vector<mlir::Value> outside_scalar_;
  std::vector<mlir::Value> row_invariant_;
  // While a fused group's interior is lowered: pads skip their bounds check along the last dim.
  bool pad_interior_ = false;
  mlir::ModuleOp module_;
  const BufferPlan& plan_;
  LoweringOptions options_;
  std::vector<Frame> frames_;
  std::vector<Scope> scopes_;
  std::vector<mlir::Value> output_buffers_;
  mlir::Value workspace_;
  int64_t workspace_offset_ = 0;
  int64_t workspace_high_ = 0;
};

using Ivs = LowerCtx::Ivs;

// One lowering rule per primitive: emits code for `eqn` at the builder's insertion point.
using LowerRule = std::function<void(LowerCtx&, const Eqn&)>;
using LowerTable = RuleTable<LowerRule>;

// Computes one result element of an elementwise eqn from its operand elements; `d` is
// operand 0's dtype.
using ElemFn =
    std::function<mlir::Value(LowerCtx&, const Eqn&, DType d, const std::vector<mlir::Value>&)>;
// The elementwise rule of `p` (registered by lower_elementwise.cpp), or nullptr.
const ElemFn* elementwise_rule(Prim p);
// The rule's form for complex operands or results (lower_complex.cpp), or nullptr.
const ElemFn* complex_elementwise_rule(Prim p);
// Rules that are one op on the operands, whatever their dtype.
template <class Op>
ElemFn unary_op() {
  return [](LowerCtx& c, const Eqn&, DType, const std::vector<Value>& x) -> Value {
    return c.b.create<Op>(c.loc, x[0]);
  };
}
template <class Op>
ElemFn binary_op() {
  return [](LowerCtx& c, const Eqn&, DType, const std::vector<Value>& x) -> Value {
    return c.b.create<Op>(c.loc, x[0], x[1]);
  };
}

// The sum, max and min reductions (lower_reduce.cpp), also elementwise max and min: the
// identity, and combining two elements (max and min propagate NaN; integers compare as their
// dtype's signedness says). `reassociate`: a float op may be reassociated (fast-math reassoc),
// so LLVM may keep several partial results in vector lanes (the order of a float sum then
// depends on the vector width, not on the data).
enum class Reducer { sum, max, min };
Value reducer_identity(LowerCtx& c, DType d, Reducer r);
Value combine(LowerCtx& c, DType d, Reducer r, Value a, Value b, bool reassociate = false);
// JAX's sort order on one key (sort's and argmax's; lower_reduce.cpp): whether x sorts before y;
// floats treat -0.0 as 0.0 and put NaNs (all equal) last.
Value sort_key_less(LowerCtx& c, DType d, Value x, Value y);

// The table, filled once by the register_* functions of the lower_*.cpp files.
const LowerTable& lower_table();
void register_elementwise_lowerings(LowerTable& t);
void register_shape_lowerings(LowerTable& t);
void register_reduce_lowerings(LowerTable& t);
void register_window_lowerings(LowerTable& t);  // lower_window.cpp
void register_dot_lowerings(LowerTable& t);
void register_ref_lowerings(LowerTable& t);
void register_control_lowerings(LowerTable& t);
void register_collective_lowerings(LowerTable& t);
void register_linalg_lowerings(LowerTable& t);    // lower_linalg.cpp
void register_host_lowerings(LowerTable& t);      // lower_host.cpp
void register_im2col_lowerings(LowerTable& t);    // lower_im2col.cpp
void register_fused_lowerings(LowerTable& t);     // lower_fused.cpp
void register_row_loop_lowerings(LowerTable& t);  // lower_row_loop.cpp
// The symbol a runtime entry taking a memref of any element type (refjit_host_call_arg, the
// collectives' refjit_psum, ...) is called by for `dtype`: `entry`_f32 and so on, each bound to
// the same C function (jit_link.cpp), since each MLIR declaration fixes its memref type.
std::string typed_runtime_symbol(std::string_view entry, DType dtype);

// A memref as the runtime's entry points take it (runtime/kernels/gemm.h, runtime/collectives.h):
// unranked, so every operand has one type and the callee reads the aligned pointer and offset
// from its descriptor. (Its address is not taken with memref.extract_aligned_pointer_as_index:
// expand-strided-metadata folds that through a memref.view into the workspace and drops the
// view's byte shift.)
mlir::Value unranked_memref(LowerCtx& c, mlir::Value memref);
// A call of a runtime matrix kernel (refjit_gemm_*, refjit_im2col_gemm_*, ...), its arguments
// made, not yet emitted: the kernel writes `target`, and the product goes to `out` (a copy of
// `type` when the two differ: a result view the kernel cannot write).
struct KernelCall {
  std::string entry;
  std::vector<mlir::Value> args;
  mlir::Value target, out;
  ArrayType type;
};
void emit_kernel_call(LowerCtx& c, const KernelCall& call);
// A product and its elementwise consumer `root` (product_epilogues.h): the consumer runs on
// the kernel's rows inside the call when the kernel writes the result in place and its rows
// are the result's (`rows_are_results`); otherwise the product (the call, or `loops`), then
// the consumer.
void emit_product_with_epilogue(LowerCtx& c, const Jaxpr& j, size_t root,
                                const std::optional<KernelCall>& call, bool rows_are_results,
                                const std::function<void()>& loops);

// The static strides of a memref, in elements (empty when its layout has dynamic strides).
llvm::SmallVector<int64_t> static_strides(mlir::Value memref);
// Whether a memref is row-major and contiguous (identity layout), as the runtime's entries
// that take a plain pointer need it.
bool is_contiguous(mlir::Value memref);
// Throws, naming the eqn's primitive, when the code being lowered may not call refjit's
// runtime (`refjit compile` objects link only libc and libm); `what` says what needs it.
void require_runtime(LowerCtx& c, const Eqn& e, std::string_view what);

// Builds the memref-level module with one function `refjit_main` taking one memref per
// constvar, invar and outvar (in that order), with a C interface wrapper.
// With plan.use_workspace, a last argument memref<?xi8> is the workspace; its required
// size in bytes is stored in `workspace_bytes` (0 without a workspace).
mlir::OwningOpRef<mlir::ModuleOp> build_module(mlir::MLIRContext& ctx, const Jaxpr& jaxpr,
                                               const BufferPlan& plan, int64_t& workspace_bytes,
                                               const LoweringOptions& options);

inline constexpr const char* kEntryName = "refjit_main";

// One element converted between dtypes with XLA semantics (lower_elementwise.cpp).
mlir::Value convert_element(LowerCtx& c, mlir::Value x, DType from, DType to);
// convert_element where `from` or `to` is complex (lower_complex.cpp).
mlir::Value convert_complex(LowerCtx& c, mlir::Value x, DType from, DType to);

// Lowers dot_general eqn `dot` of `j` (a product_epilogue's body) with its consumer, eqn `root`
// (product_epilogues.h): the matrix kernel runs the consumer on the product's rows as they are
// final, or, where the product is not a kernel call, both are lowered one after the other
// (lower_dot.cpp). The same for an im2col_dot (lower_im2col.cpp).
void lower_im2col_with_epilogue(LowerCtx& c, const Jaxpr& j, size_t product, size_t root);
void lower_product_with_epilogue(LowerCtx& c, const Jaxpr& j, size_t dot, size_t root);

// Reductions computed row by row (lower_reduce.cpp, for row loops): `reduce_row` folds
// every operand dim but the first at `row`, from the identity; `combine_partials` folds
// the `n` elements of `partials` (one per row) in order.
mlir::Value reduce_row(LowerCtx& c, const Eqn& e, mlir::Value row);
mlir::Value combine_partials(LowerCtx& c, const Eqn& e, mlir::Value partials, int64_t n);
// Column sums by blocks of rows (a reduction over dim 0; `partials` holds one result per
// block): `start_block_partial` sets block `block`'s to the identity, `fold_row_into_block`
// folds operand row `row` into it, `combine_block_partials` folds the `blocks` partials in
// order into `dst`.
void start_block_partial(LowerCtx& c, const Eqn& e, mlir::Value partials, mlir::Value block);
void fold_row_into_block(LowerCtx& c, const Eqn& e, mlir::Value row, mlir::Value partials,
                         mlir::Value block);
void combine_block_partials(LowerCtx& c, const Eqn& e, mlir::Value partials, int64_t blocks,
                            mlir::Value dst);
// Row `row` of a matrix-vector dot_general [R, K] . [K] (lower_dot.cpp, for row loops): the
// sum of its K products, reassociated so that it vectorises.
mlir::Value dot_row(LowerCtx& c, const Eqn& e, mlir::Value row);

[[noreturn]] void fail_eqn(const Eqn& e, const std::string& what);

}  // namespace refjit::backend
