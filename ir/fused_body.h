// What the body of a `fused` or `product_epilogue` eqn may hold and how it reads its operands
// (primitives.def): the facts their type rules, the buffer assignment and the backend share.
#pragma once

#include <cstddef>
#include <string>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// A static slice, or a pad without interior padding (each element of its result is one element
// of its operand, or the padding value): evaluated inside a fused body where it is read.
bool is_view_eqn(const Jaxpr& j, const Eqn& e);

// Why `body` cannot be a fused eqn's body, or "" when it can: no constvars, no refs, one
// result, defined by its last eqn; every eqn elementwise, a broadcast_in_dim or a view, the last
// one possibly a reduction (reduce_sum, reduce_max, reduce_min) instead.
std::string fused_body_problem(const Jaxpr& body);

// Whether body invar `k` is read only at the result's own index: by elementwise eqns of the
// result's shape, the root not a reduction. The fused eqn may then write its result over that
// operand's buffer (each element is read before it is stored); not when a view or a broadcast
// reads it at other indices.
bool read_at_result_index(const Jaxpr& body, size_t k);

// Why `body` cannot be a product_epilogue eqn's body, or "" when it can: no constvars, no refs,
// two eqns: a dot_general or im2col_dot of two invars, then its one reader (a fused eqn or an
// elementwise eqn) reading it only at the result's own index, whose result, of the product's
// type, the body returns.
std::string product_epilogue_body_problem(const Jaxpr& body);

// Why `body` cannot be a row_loop eqn's body, or "" when it can: no constvars, no refs, every
// eqn with one result, no effect and no body but a fused eqn's; its results defined by its eqns.
// (Whether each is an item of a loop over the same rows, backend/row_loops.h, the
// backend checks when it lowers the loop, naming the eqn that is not.)
std::string row_loop_body_problem(const Jaxpr& body);

}  // namespace refjit
