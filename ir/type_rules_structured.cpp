// Type rules of the structured primitives, whose params hold sub-jaxprs (docs/primitives.md
// "Structured"). The sub-jaxprs themselves are verified by the verifier; these rules check
// that they fit the eqn's operands and give its result types.
#include <algorithm>

#include "ir/fused_body.h"
#include "ir/remat_policy.h"
#include "ir/type_rule_support.h"
#include "ir/type_rules.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

namespace {

using type_rules::Checker;

std::string types_text(const std::vector<Type>& types) {
  std::string s;
  for (const Type& t : types) s += (s.empty() ? "" : ", ") + t.str();
  return s;
}

// Sub-jaxprs take everything as invars: consts are passed as operands.
void check_no_constvars(const Checker& c, const Jaxpr& j, std::string_view what) {
  if (!j.constvars.empty())
    c.fail("{} has {} constvars; a sub-jaxpr takes its consts as invars, passed as operands", what,
           j.constvars.size());
}

// Refs cannot leave a sub-jaxpr (E9).
void check_no_ref_outputs(const Checker& c, const Jaxpr& j, std::string_view what,
                          std::string code = "E9") {
  std::vector<Type> outs = j.out_types();
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].is_ref)
      c.fail_ref(std::move(code),
                 "{} returns a ref as output {} ({}); refs cannot be returned, pass the ref in "
                 "as an operand and write to it instead",
                 what, k, outs[k].str());
}

// custom_vjp's fwd may return a ref as a residual only if it is one of its own inputs (E10).
void check_fwd_ref_outputs(const Checker& c, const Jaxpr& fwd) {
  for (size_t k = 0; k < fwd.outvars.size(); ++k) {
    Type t = fwd.type_of(fwd.outvars[k]);
    if (!t.is_ref) continue;
    const Atom& a = fwd.outvars[k];
    bool is_input =
        is_var(a) && std::find(fwd.invars.begin(), fwd.invars.end(), as_var(a)) != fwd.invars.end();
    if (!is_input)
      c.fail_ref("E10",
                 "fwd_jaxpr returns a ref as output {} ({}) that is not one of its inputs; a "
                 "fwd rule may only pass its own ref arguments on as residuals",
                 k, t.str());
  }
}

// Operands [first, first + n) have the types of j's invars.
void check_operands_match(const Checker& c, const Jaxpr& j, size_t first, std::string_view what) {
  std::vector<Type> ins = j.in_types();
  size_t given = c.in().size() - first;
  if (given != ins.size())
    c.fail("{} takes {} inputs but {} operands were given", what, ins.size(), given);
  for (size_t k = 0; k < ins.size(); ++k)
    if (c.in()[first + k] != ins[k])
      c.fail("operand {} has type {} but {} input {} has type {}", first + k,
             c.in()[first + k].str(), what, k, ins[k].str());
}

// A jit's custom JVP rule (jvp_jaxpr, from jax.custom_jvp): primals then one tangent per
// primal, each of its primal's type, to the body's outputs then one tangent per output.
void check_custom_jvp_rule(const Checker& c, const Jaxpr& body, const Jaxpr& rule) {
  check_no_constvars(c, rule, "the custom_jvp rule");
  for (const Type& t : body.in_types())
    if (t.is_ref) c.fail("a custom_jvp rule cannot take refs (the jit body takes {})", t.str());
  std::vector<Type> ins = body.in_types(), outs = body.out_types();
  const size_t n_in = ins.size(), n_out = outs.size();
  for (size_t k = 0; k < n_in; ++k) ins.push_back(ins[k]);
  for (size_t k = 0; k < n_out; ++k) outs.push_back(outs[k]);
  if (rule.in_types() != ins || rule.out_types() != outs)
    c.fail(
        "the custom_jvp rule maps ({}) to ({}), but a rule for this body maps ({}) to ({}): "
        "the primals then their tangents, to the outputs then theirs",
        types_text(rule.in_types()), types_text(rule.out_types()), types_text(ins),
        types_text(outs));
}

std::vector<Type> jit_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::jit, in, params);
  const Jaxpr& body = c.jaxpr_param("jaxpr");
  check_no_constvars(c, body, "the jit body");
  check_operands_match(c, body, 0, "the jit body");
  check_no_ref_outputs(c, body, "the jit body");
  if (const std::string* policy = c.optional_param<std::string>("policy");
      policy && !is_remat_policy(*policy))
    c.fail(
        "policy '{}' is not a remat policy (nothing_saveable, dots_saveable, "
        "dots_with_no_batch_dims_saveable, everything_saveable, save_only_these_names:NAME,... or "
        "save_any_names_but_these:NAME,...)",
        *policy);
  if (params.has("jvp_jaxpr")) check_custom_jvp_rule(c, body, c.jaxpr_param("jvp_jaxpr"));
  return body.out_types();
}

// The decisions written as IR (fused, product_epilogue, row_loop): the operands are the body's
// invars, the results its outvars, and the body holds only what its `problem` check admits
// (ir/fused_body.h says what each may hold).
template <Prim P, std::string (*problem)(const Jaxpr&)>
std::vector<Type> decision_body_rule(std::span<const Type> in, const Params& params) {
  Checker c(P, in, params);
  const Jaxpr& body = c.jaxpr_param("jaxpr");
  check_operands_match(c, body, 0, fmt::format("the {} body", prim_name(P)));
  if (std::string why = problem(body); !why.empty()) c.fail("{}", why);
  return body.out_types();
}

// while: cond_consts, body_consts, carry -> carry. cond_jaxpr maps (cond_consts, carry) to a
// bool[]; body_jaxpr maps (body_consts, carry) to the next carry. Refs may be consts.
std::vector<Type> while_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::while_, in, params);
  const Jaxpr& cond = c.jaxpr_param("cond_jaxpr");
  const Jaxpr& body = c.jaxpr_param("body_jaxpr");
  int64_t cond_n = c.int_param("cond_nconsts");
  int64_t body_n = c.int_param("body_nconsts");
  if (cond_n < 0 || body_n < 0 || static_cast<size_t>(cond_n + body_n) > in.size())
    c.fail("cond_nconsts={} and body_nconsts={} do not fit the {} operands", cond_n, body_n,
           in.size());
  check_no_constvars(c, cond, "the while condition");
  check_no_constvars(c, body, "the while body");
  const size_t nc = static_cast<size_t>(cond_n), nb = static_cast<size_t>(body_n);
  std::vector<Type> carry(in.begin() + static_cast<long>(nc + nb), in.end());
  for (size_t k = 0; k < carry.size(); ++k)
    if (carry[k].is_ref)
      c.fail_ref("E9",
                 "operand {} ({}) is a carry but refs cannot be while carries; pass the ref "
                 "as a const (closed over) instead",
                 nc + nb + k, carry[k].str());
  auto expect_inputs = [&](const Jaxpr& j, size_t first, size_t n, std::string_view what) {
    std::vector<Type> want(in.begin() + static_cast<long>(first),
                           in.begin() + static_cast<long>(first + n));
    want.insert(want.end(), carry.begin(), carry.end());
    std::vector<Type> got = j.in_types();
    if (got.size() != want.size())
      c.fail("{} takes {} inputs but gets {} ({} consts and {} carries)", what, got.size(),
             want.size(), n, carry.size());
    for (size_t k = 0; k < want.size(); ++k)
      if (got[k] != want[k])
        c.fail("{}'s input {} has type {} but gets {}", what, k, got[k].str(), want[k].str());
  };
  expect_inputs(cond, 0, nc, "the while condition");
  expect_inputs(body, nc, nb, "the while body");
  std::vector<Type> pred = cond.out_types();
  if (pred.size() != 1 || pred[0] != Type(ArrayType{DType::bool_, {}}))
    c.fail("the while condition must return one bool[], not ({})", types_text(pred));
  std::vector<Type> next = body.out_types();
  if (next != carry)
    c.fail("the while body returns ({}) but the carry is ({}); a carry keeps its type",
           types_text(next), types_text(carry));
  return carry;
}

std::vector<Type> scan_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::scan, in, params);
  const Jaxpr& body = c.jaxpr_param("jaxpr");
  int64_t length = c.int_param("length");
  int64_t num_consts = c.int_param("num_consts");
  int64_t num_carry = c.int_param("num_carry");
  if (length < 0) c.fail("length {} is negative", length);
  if (num_consts < 0 || num_carry < 0 || static_cast<size_t>(num_consts + num_carry) > in.size())
    c.fail("num_consts={} and num_carry={} do not fit the {} operands", num_consts, num_carry,
           in.size());
  check_no_constvars(c, body, "the scan body");
  size_t n_consts = num_consts, n_carry = num_carry, n_xs = in.size() - n_consts - n_carry;
  std::vector<Type> body_in = body.in_types();
  if (body_in.size() != in.size())
    c.fail(
        "the scan body takes {} inputs but there are {} operands ({} consts, {} carries, {} "
        "xs)",
        body_in.size(), in.size(), n_consts, n_carry, n_xs);
  for (size_t k = 0; k < n_consts + n_carry; ++k) {
    if (k >= n_consts && in[k].is_ref)
      c.fail_ref("E9",
                 "operand {} ({}) is a carry but refs cannot be scan carries; pass the "
                 "ref as a const (closed over) instead",
                 k, in[k].str());
    if (in[k] != body_in[k])
      c.fail("operand {} ({}) has type {} but the scan body's input {} has type {}", k,
             k < n_consts ? "a const" : "a carry", in[k].str(), k, body_in[k].str());
  }
  for (size_t k = n_consts + n_carry; k < in.size(); ++k) {
    const Type& x = in[k];
    if (x.array.rank() == 0 || x.shape()[0] != length)
      c.fail("operand {} (an xs) has type {} but must have a leading dim of size length={}", k,
             x.str(), length);
    Type slice = x;
    slice.array.shape.erase(slice.array.shape.begin());
    if (body_in[k] != slice)
      c.fail(
          "operand {} (an xs) has type {}, so the scan body's input {} must have type {} but "
          "it has type {}",
          k, x.str(), k, slice.str(), body_in[k].str());
  }
  std::vector<Type> body_out = body.out_types();
  if (body_out.size() < n_carry)
    c.fail("the scan body returns {} outputs but there are {} carries", body_out.size(), n_carry);
  check_no_ref_outputs(c, body, "the scan body");
  std::vector<Type> out;
  for (size_t k = 0; k < n_carry; ++k) {
    if (body_out[k] != in[n_consts + k])
      c.fail(
          "the scan body's carry output {} has type {} but the carry input (operand {}) has "
          "type {}; a carry keeps its type",
          k, body_out[k].str(), n_consts + k, in[n_consts + k].str());
    out.push_back(body_out[k]);
  }
  for (size_t k = n_carry; k < body_out.size(); ++k) {
    ArrayType y = body_out[k].array;
    y.shape.insert(y.shape.begin(), length);
    out.push_back(Type(std::move(y)));
  }
  return out;
}

std::vector<Type> cond_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::cond, in, params);
  c.expect_at_least(1);
  const ArrayType& index = c.array(0);
  if (!index.is_scalar() || (index.dtype != DType::i32 && index.dtype != DType::bool_))
    c.fail("operand 0 (the branch index) has type {} but must be i32[] or bool[]", index.str());
  const auto& branches = c.param<JaxprList>("branches");
  if (branches.empty()) c.fail("param 'branches' is empty; cond needs at least one branch");
  if (index.dtype == DType::bool_ && branches.size() != 2)
    c.fail("a bool index selects between exactly 2 branches, got {}", branches.size());
  std::vector<Type> out;
  for (size_t b = 0; b < branches.size(); ++b) {
    if (!branches[b]) c.fail("branch {} holds no jaxpr", b);
    const Jaxpr& j = *branches[b];
    std::string what = fmt::format("branch {}", b);
    check_no_constvars(c, j, what);
    check_operands_match(c, j, 1, what);
    check_no_ref_outputs(c, j, what);
    std::vector<Type> outs = j.out_types();
    if (b == 0) {
      out = outs;
    } else if (outs != out) {
      c.fail(
          "branch {} returns ({}) but branch 0 returns ({}); all branches must return the "
          "same types",
          b, types_text(outs), types_text(out));
    }
  }
  return out;
}

std::vector<Type> custom_vjp_call_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::custom_vjp_call, in, params);
  const Jaxpr& primal = c.jaxpr_param("call_jaxpr");
  check_no_constvars(c, primal, "call_jaxpr");
  check_operands_match(c, primal, 0, "call_jaxpr");
  check_no_ref_outputs(c, primal, "call_jaxpr", "E10");
  std::vector<Type> outs = primal.out_types();
  const int64_t* num_res = c.optional_param<int64_t>("num_res");
  if (num_res && *num_res < 0) c.fail("num_res {} is negative", *num_res);
  if (const JaxprPtr* fwd = c.optional_param<JaxprPtr>("fwd_jaxpr"); fwd && *fwd) {
    check_operands_match(c, **fwd, 0, "fwd_jaxpr");
    check_fwd_ref_outputs(c, **fwd);
    std::vector<Type> fwd_outs = (*fwd)->out_types();
    if (fwd_outs.size() < outs.size())
      c.fail(
          "fwd_jaxpr returns {} outputs but the primal returns {}; fwd returns the primal "
          "outputs, then the residuals",
          fwd_outs.size(), outs.size());
    size_t n_res = num_res ? static_cast<size_t>(*num_res) : fwd_outs.size() - outs.size();
    if (fwd_outs.size() != outs.size() + n_res)
      c.fail(
          "fwd_jaxpr returns {} outputs but {} primal outputs and num_res={} residuals are "
          "expected",
          fwd_outs.size(), outs.size(), n_res);
    for (size_t k = 0; k < outs.size(); ++k)
      if (fwd_outs[k] != outs[k])
        c.fail("fwd_jaxpr output {} has type {} but the primal output {} has type {}", k,
               fwd_outs[k].str(), k, outs[k].str());
    if (const JaxprPtr* bwd = c.optional_param<JaxprPtr>("bwd_jaxpr"); bwd && *bwd) {
      std::vector<Type> bwd_in = (*bwd)->in_types();
      const bool accumulating = bwd_accumulates(**bwd, n_res, outs.size(), in.size());
      const size_t want_in = n_res + outs.size() + (accumulating ? in.size() : 0);
      if (bwd_in.size() != want_in)
        c.fail(
            "bwd_jaxpr takes {} inputs but {} residuals and {} output cotangents are expected "
            "(then, for a bwd that returns nothing, one accumulator ref per operand)",
            bwd_in.size(), n_res, outs.size());
      for (size_t k = 0; k < n_res; ++k)
        if (bwd_in[k] != fwd_outs[outs.size() + k])
          c.fail("bwd_jaxpr input {} has type {} but residual {} has type {}", k, bwd_in[k].str(),
                 k, fwd_outs[outs.size() + k].str());
      if (accumulating) {
        for (size_t k = 0; k < in.size(); ++k) {
          const Type& acc = bwd_in[n_res + outs.size() + k];
          if (!acc.is_ref || acc.array != in[k].array)
            c.fail(
                "bwd_jaxpr input {} is the accumulator of operand {}, a Ref{{{}}}, but has "
                "type {}",
                n_res + outs.size() + k, k, in[k].array.str(), acc.str());
        }
      } else if ((*bwd)->outvars.size() != in.size()) {
        c.fail(
            "bwd_jaxpr returns {} cotangents but there are {} operands; return one per "
            "operand",
            (*bwd)->outvars.size(), in.size());
      }
    }
  }
  return outs;
}

// linear_solve: operands are num_consts consts, then the right-hand sides b. Each of its jaxprs
// (solve, and when given matvec, vecmat and transpose_solve) takes every operand and
// returns values of b's types; none takes or gives a ref.
std::vector<Type> linear_solve_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::linear_solve, in, params);
  const int64_t num_consts = c.int_param("num_consts");
  if (num_consts < 0 || num_consts >= static_cast<int64_t>(in.size()))
    c.fail("num_consts={} leaves no right-hand side among its {} operand(s)", num_consts,
           in.size());
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k].is_ref)
      c.fail("operand {} is a ref ({}); a linear solve takes arrays only", k, in[k].str());
  const std::vector<Type> rhs(in.begin() + num_consts, in.end());
  auto check = [&](std::string_view name, bool required) {
    const JaxprPtr* j = c.optional_param<JaxprPtr>(name);
    if (!j || !*j) {
      if (required) c.fail("has no {}", name);
      return;
    }
    check_no_constvars(c, **j, name);
    check_operands_match(c, **j, 0, name);
    const std::vector<Type> outs = (*j)->out_types();
    if (outs != rhs)
      c.fail("{} returns ({}) but the right-hand sides are ({})", name, types_text(outs),
             types_text(rhs));
  };
  check("solve_jaxpr", true);
  check("matvec_jaxpr", false);
  check("vecmat_jaxpr", false);
  check("transpose_solve_jaxpr", false);
  return rhs;
}

}  // namespace

void register_structured_type_rules(TypeRuleTable& t) {
  auto set = [&t](Prim p, TypeRule r) { t[static_cast<int>(p)] = r; };
  set(Prim::jit, jit_rule);
  set(Prim::fused, decision_body_rule<Prim::fused, fused_body_problem>);
  set(Prim::product_epilogue,
      decision_body_rule<Prim::product_epilogue, product_epilogue_body_problem>);
  set(Prim::row_loop, decision_body_rule<Prim::row_loop, row_loop_body_problem>);
  set(Prim::scan, scan_rule);
  set(Prim::while_, while_rule);
  set(Prim::cond, cond_rule);
  set(Prim::custom_vjp_call, custom_vjp_call_rule);
  set(Prim::linear_solve, linear_solve_rule);
}

}  // namespace refjit
