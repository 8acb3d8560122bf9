// Typed views of the loop primitives' (and linear_solve's) params: `ScanParams::of(eqn)` instead of
// looking each param up by name (`eqn.params.get<int64_t>("num_consts")`) at every use. The names
// are the ones the text format's param table declares (ir/text_params.cpp); of() checks that the
// eqn is the right primitive and that the counts fit its operands, so a malformed eqn is an error
// naming the param, never an out-of-range index later.
//
// Views: they point into the eqn's params (its bodies) and must not outlive the eqn, nor be
// kept across a change of its params. A pass that builds a loop still sets the params by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// scan: operands are consts, then carries, then xs; the body takes the same, one row of each
// xs, and returns the carries, then one row of each ys.
struct ScanParams {
  const Jaxpr* body = nullptr;
  int64_t length = 0;
  size_t num_consts = 0;
  size_t num_carry = 0;
  bool reverse = false;
  int64_t unroll = 1;

  static ScanParams of(const Eqn& scan);

  size_t first_carry() const { return num_consts; }
  size_t first_xs() const { return num_consts + num_carry; }
  std::span<const Atom> consts(const Eqn& scan) const {
    return std::span(scan.ins).subspan(0, num_consts);
  }
  std::span<const Atom> carries(const Eqn& scan) const {
    return std::span(scan.ins).subspan(first_carry(), num_carry);
  }
  std::span<const Atom> xs(const Eqn& scan) const {
    return std::span(scan.ins).subspan(first_xs());
  }
};

// while: operands are the cond's consts, the body's consts, then the carries.
struct WhileParams {
  const Jaxpr* cond = nullptr;
  const Jaxpr* body = nullptr;
  size_t cond_nconsts = 0;
  size_t body_nconsts = 0;

  static WhileParams of(const Eqn& loop);

  size_t first_body_const() const { return cond_nconsts; }
  size_t first_carry() const { return cond_nconsts + body_nconsts; }
  std::span<const Atom> cond_consts(const Eqn& loop) const {
    return std::span(loop.ins).subspan(0, cond_nconsts);
  }
  std::span<const Atom> body_consts(const Eqn& loop) const {
    return std::span(loop.ins).subspan(first_body_const(), body_nconsts);
  }
  std::span<const Atom> carries(const Eqn& loop) const {
    return std::span(loop.ins).subspan(first_carry());
  }
};

// linear_solve: operands are the consts every jaxpr closes over, then the right-hand sides.
// Only `solve` is required; a jaxpr the program was not given is nullptr.
struct LinearSolveParams {
  size_t num_consts = 0;
  JaxprPtr solve, transpose_solve, matvec, vecmat;

  static LinearSolveParams of(const Eqn& solve);
};

}  // namespace refjit
