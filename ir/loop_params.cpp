#include "ir/loop_params.h"

#include <string>

#include "refjit/ir/error.h"

namespace refjit {

namespace {

const Jaxpr* body_param(const Eqn& e, const char* name) {
  const JaxprPtr& body = e.params.get<JaxprPtr>(name);
  if (!body) throw Error(std::string(prim_name(e.prim)) + ": param '" + name + "' holds no jaxpr");
  return body.get();
}

size_t count_param(const Eqn& e, const char* name) {
  const int64_t n = e.params.get<int64_t>(name);
  if (n < 0)
    throw Error(std::string(prim_name(e.prim)) + ": param '" + name + "' is negative (" +
                std::to_string(n) + ")");
  return static_cast<size_t>(n);
}

void expect(const Eqn& e, Prim p) {
  if (e.prim != p)
    throw Error("expected a " + std::string(prim_name(p)) + " eqn, got " +
                std::string(prim_name(e.prim)));
}

}  // namespace

ScanParams ScanParams::of(const Eqn& scan) {
  expect(scan, Prim::scan);
  ScanParams p;
  p.body = body_param(scan, "jaxpr");
  p.length = scan.params.get<int64_t>("length");
  p.num_consts = count_param(scan, "num_consts");
  p.num_carry = count_param(scan, "num_carry");
  p.reverse = scan.params.get_or<bool>("reverse", false);
  p.unroll = scan.params.get_or<int64_t>("unroll", 1);
  if (p.num_consts + p.num_carry > scan.ins.size())
    throw Error("scan: num_consts=" + std::to_string(p.num_consts) +
                " and num_carry=" + std::to_string(p.num_carry) + " do not fit its " +
                std::to_string(scan.ins.size()) + " operands");
  return p;
}

WhileParams WhileParams::of(const Eqn& loop) {
  expect(loop, Prim::while_);
  WhileParams p;
  p.cond = body_param(loop, "cond_jaxpr");
  p.body = body_param(loop, "body_jaxpr");
  p.cond_nconsts = count_param(loop, "cond_nconsts");
  p.body_nconsts = count_param(loop, "body_nconsts");
  if (p.cond_nconsts + p.body_nconsts > loop.ins.size())
    throw Error("while: cond_nconsts=" + std::to_string(p.cond_nconsts) +
                " and body_nconsts=" + std::to_string(p.body_nconsts) + " do not fit its " +
                std::to_string(loop.ins.size()) + " operands");
  return p;
}

LinearSolveParams LinearSolveParams::of(const Eqn& e) {
  expect(e, Prim::linear_solve);
  LinearSolveParams p;
  p.num_consts = count_param(e, "num_consts");
  if (p.num_consts > e.ins.size())
    throw Error("linear_solve: num_consts=" + std::to_string(p.num_consts) + " does not fit its " +
                std::to_string(e.ins.size()) + " operands");
  body_param(e, "solve_jaxpr");
  p.solve = e.params.get<JaxprPtr>("solve_jaxpr");
  auto optional = [&](const char* name) -> JaxprPtr {
    const JaxprPtr* j = std::get_if<JaxprPtr>(e.params.find(name));
    return j ? *j : nullptr;
  };
  p.transpose_solve = optional("transpose_solve_jaxpr");
  p.matvec = optional("matvec_jaxpr");
  p.vecmat = optional("vecmat_jaxpr");
  return p;
}

}  // namespace refjit
