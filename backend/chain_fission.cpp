#include "backend/chain_fission.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "backend/mlir_pch.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace refjit::backend {

namespace {

using mlir::Operation;
using mlir::Value;
namespace arith = mlir::arith;
namespace math = mlir::math;
namespace memref = mlir::memref;
namespace scf = mlir::scf;

constexpr llvm::StringLiteral kTranscendentalMark = "refjit.transcendental";

// The functions whose expansion is a long polynomial (or a libm call), and the last
// operation of one the lowering expanded itself (mark_transcendental).
bool is_transcendental(Operation* op) {
  return mlir::isa<math::ExpOp, math::Exp2Op, math::ExpM1Op, math::LogOp, math::Log1pOp,
                   math::Log2Op, math::Log10Op, math::TanhOp, math::ErfOp, math::SinOp, math::CosOp,
                   math::TanOp, math::AtanOp, math::Atan2Op, math::PowFOp>(op) ||
         op->hasAttr(kTranscendentalMark);
}

// The first stage of a loop's body and the values of it the rest reads from buffers.
struct Stage {
  std::vector<Operation*> ops;  // in body order
  std::vector<Value> cuts;
};

bool is_innermost_unit_step(scf::ForOp loop) {
  if (mlir::getConstantIntValue(loop.getStep()) != std::optional<int64_t>(1)) return false;
  for (const mlir::NamedAttribute& a : loop->getDiscardableAttrs())
    if (a.getName().getValue().starts_with("refjit.")) return false;
  for (Operation& op : loop.getBody()->without_terminator()) {
    if (op.getNumRegions() != 0) return false;
    if (!mlir::isa<memref::LoadOp, memref::StoreOp>(op) && !mlir::isMemoryEffectFree(&op))
      return false;
  }
  return true;
}

// The first stage of `loop`'s body: everything the transcendental functions before the last
// one of the deepest chain need. nullopt when the deepest chain is shorter than two, or when
// that stage cannot run ahead of the rest (see chain_fission.h).
std::optional<Stage> first_stage(scf::ForOp loop) {
  mlir::Block* body = loop.getBody();
  llvm::DenseMap<Operation*, int> depth;   // transcendental functions on the longest path in
  llvm::DenseMap<Operation*, bool> heavy;  // a transcendental function among its ancestors
  int deepest = 0;
  for (Operation& op : body->without_terminator()) {
    int d = 0;
    bool h = is_transcendental(&op);
    for (Value v : op.getOperands())
      if (Operation* def = v.getDefiningOp(); def && def->getBlock() == body) {
        d = std::max(d, depth[def]);
        h = h || heavy[def];
      }
    if (is_transcendental(&op)) ++d;
    depth[&op] = d;
    heavy[&op] = h;
    deepest = std::max(deepest, d);
  }
  if (deepest < 2) return std::nullopt;

  // The backward closure of the transcendental functions below the deepest level.
  llvm::SmallPtrSet<Operation*, 32> in_stage;
  std::vector<Operation*> work;
  for (Operation& op : body->without_terminator())
    if (is_transcendental(&op) && depth[&op] < deepest) work.push_back(&op);
  while (!work.empty()) {
    Operation* op = work.back();
    work.pop_back();
    if (!in_stage.insert(op).second) continue;
    for (Value v : op->getOperands()) {
      if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v);
          arg && arg.getOwner() == body && arg != loop.getInductionVar())
        return std::nullopt;  // a carried value: the stage cannot run ahead
      if (Operation* def = v.getDefiningOp(); def && def->getBlock() == body) work.push_back(def);
    }
  }

  llvm::SmallPtrSet<Value, 8> stored;
  for (Operation& op : body->without_terminator())
    if (auto st = mlir::dyn_cast<memref::StoreOp>(op)) stored.insert(st.getMemRef());
  Stage stage;
  for (Operation& op : body->without_terminator()) {
    if (!in_stage.contains(&op)) continue;
    if (auto ld = mlir::dyn_cast<memref::LoadOp>(op); ld && stored.contains(ld.getMemRef()))
      return std::nullopt;
    stage.ops.push_back(&op);
    for (Value r : op.getResults()) {
      const bool read_later =
          llvm::any_of(r.getUsers(), [&](Operation* user) { return !in_stage.contains(user); });
      if (!read_later || !heavy[&op]) continue;  // cheap values are computed again
      if (!r.getType().isIntOrFloat()) return std::nullopt;
      stage.cuts.push_back(r);
    }
  }
  return stage;
}

memref::AllocaOp stage_buffer(mlir::OpBuilder& b, scf::ForOp loop, mlir::Type element) {
  mlir::OpBuilder::InsertionGuard guard(b);
  auto fn = loop->getParentOfType<mlir::func::FuncOp>();
  b.setInsertionPointToStart(&fn.getBody().front());
  return b.create<memref::AllocaOp>(loop.getLoc(), mlir::MemRefType::get({kChainTile}, element));
}

// Moves `loop`'s first stage into a loop of its own right before it, over the same
// iterations (at most kChainTile of them, from `base`), and repeats on that loop.
void split_stages(mlir::OpBuilder& b, scf::ForOp loop, Value base) {
  std::optional<Stage> stage = first_stage(loop);
  if (!stage) return;
  const mlir::Location loc = loop.getLoc();
  std::vector<Value> buffers;
  for (Value cut : stage->cuts) buffers.push_back(stage_buffer(b, loop, cut.getType()));

  b.setInsertionPoint(loop);
  auto first =
      b.create<scf::ForOp>(loc, loop.getLowerBound(), loop.getUpperBound(), loop.getStep());
  {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(first.getBody()->getTerminator());
    mlir::IRMapping map;
    map.map(loop.getInductionVar(), first.getInductionVar());
    for (Operation* op : stage->ops) b.clone(*op, map);
    Value at = b.create<arith::SubIOp>(loc, first.getInductionVar(), base);
    for (size_t k = 0; k < buffers.size(); ++k)
      b.create<memref::StoreOp>(loc, map.lookup(stage->cuts[k]), buffers[k], mlir::ValueRange{at});
  }
  {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value at = b.create<arith::SubIOp>(loc, loop.getInductionVar(), base);
    for (size_t k = 0; k < buffers.size(); ++k) {
      Value v = b.create<memref::LoadOp>(loc, buffers[k], mlir::ValueRange{at});
      stage->cuts[k].replaceAllUsesWith(v);
    }
  }
  for (auto it = stage->ops.rbegin(); it != stage->ops.rend(); ++it)
    if ((*it)->use_empty()) (*it)->erase();
  split_stages(b, first, base);
}

// Splits `loop` (innermost, step 1) into tiles of kChainTile iterations and each tile into
// stages, if its body qualifies.
void split_loop(scf::ForOp loop) {
  if (!is_innermost_unit_step(loop) || !first_stage(loop)) return;
  mlir::OpBuilder b(loop);
  const mlir::Location loc = loop.getLoc();
  const std::optional<int64_t> lo = mlir::getConstantIntValue(loop.getLowerBound());
  const std::optional<int64_t> hi = mlir::getConstantIntValue(loop.getUpperBound());
  if (lo && hi && *hi - *lo <= kChainTile) {
    split_stages(b, loop, loop.getLowerBound());
    return;
  }
  Value tile = b.create<arith::ConstantIndexOp>(loc, kChainTile);
  Value ub = loop.getUpperBound();
  scf::ForOp inner;
  auto tiles = b.create<scf::ForOp>(
      loc, loop.getLowerBound(), ub, tile, loop.getInitArgs(),
      [&](mlir::OpBuilder& tb, mlir::Location l, Value t, mlir::ValueRange carried) {
        Value end = tb.create<arith::MinSIOp>(l, tb.create<arith::AddIOp>(l, t, tile), ub);
        mlir::IRMapping map;
        inner = tb.create<scf::ForOp>(
            l, t, end, loop.getStep(), carried,
            [&](mlir::OpBuilder& ib, mlir::Location il, Value i, mlir::ValueRange args) {
              map.map(loop.getInductionVar(), i);
              map.map(loop.getRegionIterArgs(), args);
              for (Operation& op : loop.getBody()->without_terminator()) ib.clone(op, map);
              std::vector<Value> yielded;
              for (Value v : loop.getBody()->getTerminator()->getOperands())
                yielded.push_back(map.lookupOrDefault(v));
              ib.create<scf::YieldOp>(il, yielded);
            });
        tb.create<scf::YieldOp>(l, inner.getResults());
      });
  loop.replaceAllUsesWith(tiles.getResults());
  loop.erase();
  split_stages(b, inner, tiles.getInductionVar());
}

}  // namespace

void mark_transcendental(Operation* op) {
  op->setAttr(kTranscendentalMark, mlir::UnitAttr::get(op->getContext()));
}

void clear_transcendental_marks(mlir::ModuleOp module) {
  module.walk([](Operation* op) { op->removeAttr(kTranscendentalMark); });
}

void split_transcendental_chains(mlir::ModuleOp module) {
  std::vector<scf::ForOp> loops;
  module.walk([&](scf::ForOp loop) { loops.push_back(loop); });
  for (scf::ForOp loop : loops) split_loop(loop);
}

}  // namespace refjit::backend
