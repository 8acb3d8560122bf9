#include "backend/disjoint_or_as_add.h"

#include <vector>

#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Operator.h"

namespace refjit::backend {

llvm::PreservedAnalyses DisjointOrAsAdd::run(llvm::Function& function,
                                             llvm::FunctionAnalysisManager&) {
  std::vector<llvm::BinaryOperator*> ors;
  for (llvm::Instruction& inst : llvm::instructions(function))
    if (auto* op = llvm::dyn_cast<llvm::PossiblyDisjointInst>(&inst); op && op->isDisjoint())
      ors.push_back(llvm::cast<llvm::BinaryOperator>(op));
  if (ors.empty()) return llvm::PreservedAnalyses::all();
  for (llvm::BinaryOperator* op : ors) {
    // Disjoint operands add without a carry: the sum wraps neither as unsigned nor as signed.
    auto* add = llvm::BinaryOperator::CreateAdd(op->getOperand(0), op->getOperand(1), "", op);
    add->setHasNoUnsignedWrap();
    add->setHasNoSignedWrap();
    add->takeName(op);
    add->setDebugLoc(op->getDebugLoc());
    op->replaceAllUsesWith(add);
    op->eraseFromParent();
  }
  llvm::PreservedAnalyses kept;
  kept.preserveSet<llvm::CFGAnalyses>();
  return kept;
}

}  // namespace refjit::backend
