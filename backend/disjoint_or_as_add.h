// An LLVM function pass run after each InstCombine of the optimising pipeline
// (backend/native.cpp): every `or disjoint a, b` becomes `add nuw nsw a, b`.
//
// Why: InstCombine writes an index sum whose operands share no bits as `or disjoint`
// (`row * 512 + (col + 128)` inside a loop that knows col < 128), and LLVM 19's Reassociate
// then rebuilds such trees as plain `or`, dropping the flag. Scalar evolution cannot see a plain
// `or` as a sum, so the vectoriser finds no bounds for the address and leaves the loop scalar
// ("cannot identify array bounds"): an LSTM cell's gates, which read slices of one product,
// ran one float at a time. Kept as `add`, the sums survive Reassociate, and later InstCombines
// are free to turn them back into `or disjoint`, which scalar evolution reads correctly.
#pragma once

#include "llvm/IR/PassManager.h"

namespace refjit::backend {

struct DisjointOrAsAdd : llvm::PassInfoMixin<DisjointOrAsAdd> {
  llvm::PreservedAnalyses run(llvm::Function& function, llvm::FunctionAnalysisManager&);
};

}  // namespace refjit::backend
