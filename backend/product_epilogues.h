// Matrix-product epilogues, decided on the Jaxpr (MLIR-free): the pipeline's
// `product-epilogues` pass.
//
// A float dot_general (or im2col_dot) whose result p is read only by one elementwise consumer
// (a `fused` eqn with an elementwise root, or a single elementwise eqn), each read of p an
// operand of an elementwise eqn of it at the result's own index, is computed together with that
// consumer: the pass writes the two as one `product_epilogue` eqn at the product's position
// (primitives.def), whose body holds the product then the consumer. Native code then has the
// matrix kernel call the consumer's loops on rows of the product as soon as they are final
// (runtime/kernels/gemm.h, Epilogue), so `relu(x @ w + b)` makes no separate pass over the
// product; the kernel writes p into the result's buffer and the consumer overwrites it there,
// row by row.
//
// The consumer then runs at the product's position, before the other eqns between the two
// (which keep theirs): it must not read their results, and under the buffers the program
// would get, none of them may write what it reads (its operands would live on to the product
// and the write would need a copy) nor have a body (not looked into; a fused eqn's is no
// program of its own). Its result must have p's type. The program is assigned buffers again
// afterwards, with the eqn as one eqn whose result gets a buffer of its own.
#pragma once

#include "passes/buffers/buffer_assignment.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// `program` with every product and its consumer as above, in every jaxpr it holds, written as
// one product_epilogue eqn; planned under `assignment`, a buffer assignment of `program`
// (nullptr: none, and no epilogue is taken).
Jaxpr fuse_product_epilogues(const Jaxpr& program, const BufferAssignment* assignment);

// The same with an assignment made with `options` first (what the pipeline runs).
Jaxpr fuse_product_epilogues(const Jaxpr& program, const BufferOptions& options);

}  // namespace refjit
