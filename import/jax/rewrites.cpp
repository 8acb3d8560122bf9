// The table of JAX rewrites, and the simple ones (rewrites.h). The families with more
// machinery have files of their own in import/jax/: gather_scatter.cpp, folds.cpp (cumulative
// ops and reductions as scans), prng.cpp, gamma.cpp, conv.cpp, linalg.cpp, collective.cpp.
#include "import/jax/rewrites.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <optional>

#include "import/jax/rewrite_support.h"
#include "ir/remat_policy.h"

namespace refjit::text {

namespace {

// ---- simple rewrites --------------------------------------------------------------------

std::vector<Atom> square(RewriteArgs& a) {
  expect_operands(a, "square", 1);
  Emit e{a.b};
  return {e.op(Prim::integer_pow, {a.ins[0]}, Params{{"y", int64_t{2}}})};
}

// mul[out_dtype=D] x y: both operands converted to D, then multiplied (JAX's lowering), size-1
// dims broadcast as a plain mul's are.
std::vector<Atom> mul_out_dtype(RewriteArgs& a) {
  constexpr std::string_view prim = "mul";
  expect_operands(a, prim, 2);
  if (a.out_types.size() != 1 || a.out_types[0].is_ref) fail(prim, "expects one array result");
  const ArrayType out = a.out_types[0].array;
  Emit e{a.b};
  std::vector<Atom> ops;
  for (size_t k = 0; k < 2; ++k) {
    Atom x = a.ins[k];
    const ArrayType t = array_of(a, prim, k);
    if (t.dtype != out.dtype)
      x = e.op(Prim::convert_element_type, {x},
               Params{{"new_dtype", out.dtype}, {"weak_type", false}});
    if (t.rank() == out.rank() && t.shape != out.shape)
      x = e.broadcast(x, out.shape, iota_list(out.rank()));
    ops.push_back(x);
  }
  return {e.op(Prim::mul, std::move(ops))};
}

// tile[reps] x: x repeated reps[d] times along each dim d (a broadcast to [r0, s0, r1, s1, ...],
// then a reshape to [r0 s0, r1 s1, ...]). Fewer dims in x than reps: JAX's leading 1s.
std::vector<Atom> tile(RewriteArgs& a) {
  constexpr std::string_view prim = "tile";
  expect_operands(a, prim, 1);
  const ArrayType x = array_of(a, prim, 0);
  const IntList& reps = a.params.get<IntList>("reps");
  if (static_cast<int64_t>(reps.size()) < x.rank())
    fail(prim, fmt::format("reps ({}) has fewer entries than {} has dims", fmt::join(reps, ", "),
                           x.str()));
  Emit e{a.b};
  Shape padded(reps.size() - static_cast<size_t>(x.rank()), 1);
  padded.insert(padded.end(), x.shape.begin(), x.shape.end());
  Atom v = e.reshape(a.ins[0], padded);
  Shape wide, out;
  IntList dims;
  for (size_t d = 0; d < reps.size(); ++d) {
    if (reps[d] < 0) fail(prim, fmt::format("reps entry {} is negative", reps[d]));
    wide.push_back(reps[d]);
    wide.push_back(padded[d]);
    dims.push_back(static_cast<int64_t>(2 * d + 1));
    out.push_back(reps[d] * padded[d]);
  }
  return {e.reshape(e.broadcast(v, wide, dims), out)};
}

// device_put x_1 .. x_n: the values themselves (refjit runs on one device, the host).
std::vector<Atom> device_put(RewriteArgs& a) { return a.ins; }

// clamp lo x hi = min(max(x, lo), hi); lo and hi are scalars or x's shape.
std::vector<Atom> clamp(RewriteArgs& a) {
  expect_operands(a, "clamp", 3);
  Emit e{a.b};
  return {e.op(Prim::min, {e.op(Prim::max, {a.ins[1], a.ins[0]}), a.ins[2]})};
}

// split[axis sizes] x: consecutive slices along axis.
std::vector<Atom> split(RewriteArgs& a) {
  expect_operands(a, "split", 1);
  const ArrayType x = array_of(a, "split", 0);
  int64_t axis = a.params.get<int64_t>("axis");
  const IntList& sizes = a.params.get<IntList>("sizes");
  if (axis < 0 || axis >= x.rank())
    fail("split", fmt::format("axis {} is out of range for {}", axis, x.str()));
  int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  if (total != x.shape[axis])
    fail("split", fmt::format("sizes {} add up to {} but dimension {} of {} is {}",
                              fmt::join(sizes, ", "), total, axis, x.str(), x.shape[axis]));
  Emit e{a.b};
  std::vector<Atom> outs;
  int64_t at = 0;
  for (int64_t n : sizes) {
    if (n < 0) fail("split", "sizes must be >= 0");
    IntList start(x.rank(), 0), limit(x.shape.begin(), x.shape.end());
    start[axis] = at;
    limit[axis] = at + n;
    outs.push_back(e.slice(a.ins[0], start, limit));
    at += n;
  }
  return outs;
}

// stack[axis] x0 x1 ...: each gets a new dim of size 1 at axis, then they are concatenated.
std::vector<Atom> stack(RewriteArgs& a) {
  if (a.ins.empty()) fail("stack", "expects at least one operand");
  int64_t axis = a.params.get<int64_t>("axis");
  Emit e{a.b};
  std::vector<Atom> parts;
  for (size_t k = 0; k < a.ins.size(); ++k) {
    const ArrayType x = array_of(a, "stack", k);
    if (axis < 0 || axis > x.rank())
      fail("stack", fmt::format("axis {} is out of range for {}", axis, x.str()));
    parts.push_back(e.op(Prim::expand_dims, {a.ins[k]}, Params{{"dimensions", IntList{axis}}}));
  }
  if (parts.size() == 1) return parts;
  return {e.op(Prim::concatenate, parts, Params{{"dimension", axis}})};
}

// rev[dimensions] x: each listed dim reversed, as a gather with the indices n-1, ..., 0 (so its
// transpose is a sparse scatter-add, like any gather's).
std::vector<Atom> rev(RewriteArgs& a) {
  expect_operands(a, "rev", 1);
  const ArrayType x = array_of(a, "rev", 0);
  Emit e{a.b};
  Atom out = a.ins[0];
  for (int64_t d : a.params.get<IntList>("dimensions")) {
    if (d < 0 || d >= x.rank())
      fail("rev", fmt::format("dimension {} is out of range for {}", d, x.str()));
    int64_t n = x.shape[d];
    if (n <= 1) continue;
    Atom up = e.op(Prim::iota, {},
                   Params{{"dimension", int64_t{0}}, {"dtype", DType::i32}, {"shape", IntList{n}}});
    Atom down = e.op(Prim::sub, {e.scalar(DType::i32, static_cast<double>(n - 1)), up});
    out = e.op(Prim::gather, {out, down}, Params{{"axis", d}});
  }
  return {out};
}

// unstack[axis] x: one array per index along axis, without that dim.
std::vector<Atom> unstack(RewriteArgs& a) {
  expect_operands(a, "unstack", 1);
  const ArrayType x = array_of(a, "unstack", 0);
  int64_t axis = a.params.get<int64_t>("axis");
  if (axis < 0 || axis >= x.rank())
    fail("unstack", fmt::format("axis {} is out of range for {}", axis, x.str()));
  Emit e{a.b};
  std::vector<Atom> outs;
  for (int64_t i = 0; i < x.shape[axis]; ++i) {
    IntList start(x.rank(), 0), limit(x.shape.begin(), x.shape.end());
    start[axis] = i;
    limit[axis] = i + 1;
    outs.push_back(e.op(Prim::squeeze, {e.slice(a.ins[0], start, limit)},
                        Params{{"dimensions", IntList{axis}}}));
  }
  return outs;
}

// reshape[dimensions=(...) new_sizes]: JAX's reshape may transpose first; refjit's IR keeps
// the transpose a separate eqn.
std::vector<Atom> reshape(RewriteArgs& a) {
  expect_operands(a, "reshape", 1);
  Emit e{a.b};
  Atom x = a.ins[0];
  if (const auto* dims =
          std::get_if<IntList>(a.params.find("dimensions") ? a.params.find("dimensions") : &kNone))
    x = e.transpose(x, *dims);
  const IntList& sizes = a.params.get<IntList>("new_sizes");
  return {e.op(Prim::reshape, {x}, Params{{"dimensions", NoneParam{}}, {"new_sizes", sizes}})};
}

// argmin[axes index_dtype] x = argmax of x with its order reversed: -x for floats (a NaN stays
// NaN, which both count as the extreme), bitwise not for ints and bools (no overflow at the
// minimum), so the first minimal index wins as in JAX.
std::vector<Atom> argmin(RewriteArgs& a) {
  expect_operands(a, "argmin", 1);
  const ArrayType x = array_of(a, "argmin", 0);
  Emit e{a.b};
  Atom flipped = e.op(is_float(x.dtype) ? Prim::neg : Prim::not_, {a.ins[0]});
  if (x.dtype == DType::bool_)  // argmax wants numbers; a bool's order is its integer's
    flipped = e.op(Prim::convert_element_type, {flipped},
                   Params{{"new_dtype", DType::i32}, {"weak_type", false}});
  return {e.op(Prim::argmax, {flipped},
               Params{{"axes", a.params.get<IntList>("axes")},
                      {"index_dtype", a.params.get<DType>("index_dtype")}})};
}

// top_k[axis k] x: the k largest along `axis` and their indices, largest first (ties: the lower
// index first). A stable ascending sort of x's order reversed (-x for floats, bitwise not for
// ints), carrying an iota; then the first k of each lane.
std::vector<Atom> top_k(RewriteArgs& a) {
  expect_operands(a, "top_k", 1);
  const ArrayType x = array_of(a, "top_k", 0);
  int64_t axis = a.params.get_or<int64_t>("axis", x.rank() - 1);
  int64_t k = a.params.get<int64_t>("k");
  if (axis < 0 || axis >= x.rank())
    fail("top_k", fmt::format("axis {} is out of range for {}", axis, x.str()));
  if (k < 0 || k > x.shape[axis])
    fail("top_k",
         fmt::format("k={} is more than the {} elements along axis {}", k, x.shape[axis], axis));
  Emit e{a.b};
  Prim flip = is_float(x.dtype) ? Prim::neg : Prim::not_;
  Atom keys = e.op(flip, {a.ins[0]});
  Atom iota = e.op(Prim::iota, {},
                   Params{{"dimension", axis},
                          {"dtype", DType::i32},
                          {"shape", IntList(x.shape.begin(), x.shape.end())}});
  std::vector<Var> sorted =
      a.b.add_eqn(Prim::sort, {keys, iota},
                  Params{{"dimension", axis}, {"is_stable", true}, {"num_keys", int64_t{1}}});
  IntList start(x.rank(), 0), limit(x.shape.begin(), x.shape.end());
  limit[axis] = k;
  return {e.op(flip, {e.slice(sorted[0], start, limit)}), e.slice(sorted[1], start, limit)};
}

// empty / empty2: an array whose contents do not matter (JAX uses it for the residuals a
// cond branch does not compute). refjit fills it with zeros, so programs stay deterministic.
std::vector<Atom> empty(RewriteArgs& a) {
  if (!a.ins.empty()) fail("empty", "takes no operands");
  if (a.out_types.size() != 1 || a.out_types[0].is_ref) fail("empty", "binds exactly one array");
  const ArrayType& t = a.out_types[0].array;
  Emit e{a.b};
  return {e.op(Prim::broadcast_in_dim, {e.scalar(t.dtype, 0.0)},
               Params{{"broadcast_dimensions", IntList{}},
                      {"shape", IntList(t.shape.begin(), t.shape.end())}})};
}

// empty_ref: a new ref whose contents do not matter until written; refjit zero-fills it
// (deterministic, like empty). free_ref: the ref's storage is released when nothing uses it,
// so the eqn itself has nothing to do.
std::vector<Atom> empty_ref(RewriteArgs& a) {
  if (!a.ins.empty()) fail("empty_ref", "takes no operands");
  if (a.out_types.size() != 1 || !a.out_types[0].is_ref)
    fail("empty_ref", "binds exactly one ref, written r:Ref{f32[3]}");
  const ArrayType& t = a.out_types[0].array;
  Emit e{a.b};
  Atom zeros = e.op(Prim::broadcast_in_dim, {e.scalar(t.dtype, 0.0)},
                    Params{{"broadcast_dimensions", IntList{}},
                           {"shape", IntList(t.shape.begin(), t.shape.end())}});
  return {e.op(Prim::new_ref, {zeros})};
}

// free_ref r: the ref ends here, as a freeze whose value nobody reads: the verifier refuses
// a later use of it, or a second free (E12), as JAX does.
std::vector<Atom> free_ref(RewriteArgs& a) {
  if (a.ins.size() != 1 || !a.b.type_of(a.ins[0]).is_ref) fail("free_ref", "takes one ref");
  if (!a.out_types.empty()) fail("free_ref", "binds no values");
  Emit e{a.b};
  (void)e.op(Prim::freeze, {a.ins[0]});
  return {};
}

// custom_jvp_call: a jit of call_jaxpr. With refjit's `jvp_jaxpr` param (the Python package
// traces the rule) the jit carries it as its custom JVP rule, which autodiff applies in place
// of differentiating the body. JAX's own printout names the rule (`jvp=f`) without its body:
// the jit is marked jvp_rule_missing, and autodiff differentiates the primal, which agrees
// with the rule except where the rule deliberately differs (jax.nn.relu at 0); the CLI warns.

// A function name as a param value refjit prints and reads back (`<lambda>` -> `_lambda_`).
std::string printable_name(std::string name) {
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.') ch = '_';
  return name.empty() ? std::string("_") : name;
}

// The call_jaxpr of a custom_jvp_call or custom_vjp_call, which refjit calls as a jit body.
const JaxprPtr& custom_call_body(RewriteArgs& a, std::string_view prim) {
  const JaxprPtr& body = a.params.get<JaxprPtr>("call_jaxpr");
  if (!body) fail(prim, "call_jaxpr is None");
  if (!body->constvars.empty()) fail(prim, "a call_jaxpr with constvars cannot be called");
  return body;
}

std::vector<Atom> custom_jvp_call(RewriteArgs& a) {
  constexpr std::string_view prim = "custom_jvp_call";
  const JaxprPtr& body = custom_call_body(a, prim);
  const std::string name = printable_name(a.params.get_or<std::string>("name", std::string(prim)));
  Params p{{"jaxpr", body}, {"name", name}};
  if (const JaxprPtr* rule = std::get_if<JaxprPtr>(a.params.find("jvp_jaxpr")); rule && *rule)
    p.set("jvp_jaxpr", *rule);  // refjit's Python package traced the rule
  else
    p.set("jvp_rule_missing", name);  // JAX's printout: the rule by name only
  std::vector<Var> outs = a.b.add_eqn(Prim::jit, a.ins, std::move(p));
  return {outs.begin(), outs.end()};
}

// while whose condition writes refs, as jax.jit runs it: a condition's writes persist only for
// evaluations that go on into the body (the last one, which ends the loop, is undone). So the
// loop's condition runs on fresh copies of the refs it writes, and the body first runs the
// condition again on the real refs, then itself. A ref written by both is refused, as in JAX.
// A condition that writes no ref is the while unchanged.
std::vector<Atom> while_loop(RewriteArgs& a) {
  constexpr std::string_view prim = "while";
  const JaxprPtr& cond = a.params.get<JaxprPtr>("cond_jaxpr");
  const JaxprPtr& body = a.params.get<JaxprPtr>("body_jaxpr");
  const size_t nc = static_cast<size_t>(a.params.get<int64_t>("cond_nconsts"));
  const size_t nb = static_cast<size_t>(a.params.get<int64_t>("body_nconsts"));
  auto plain = [&] {
    std::vector<Var> outs = a.b.add_eqn(Prim::while_, a.ins, a.params);
    return std::vector<Atom>(outs.begin(), outs.end());
  };
  if (nc + nb > a.ins.size() || !cond->constvars.empty() || !body->constvars.empty())
    return plain();  // the type rule names what is wrong
  const std::vector<RefEffects> cond_fx = compute_effects(*cond);
  const std::vector<RefEffects> body_fx = compute_effects(*body);
  std::vector<size_t> written;  // cond consts the condition writes
  for (size_t k = 0; k < nc; ++k)
    if (cond_fx[k].written || cond_fx[k].accumulated) written.push_back(k);
  if (written.empty()) return plain();
  for (size_t k : written)
    for (size_t m = 0; m < nb; ++m)
      if (a.ins[k] == a.ins[nc + m] && (body_fx[m].written || body_fx[m].accumulated))
        fail(prim, fmt::format("operand {} is a ref both the condition and the body write; "
                               "refjit, like JAX, cannot order those writes (write it in one "
                               "of them)",
                               k));
  const size_t ncarry = a.ins.size() - nc - nb;
  std::vector<Type> carry_types;
  for (size_t k = 0; k < ncarry; ++k) carry_types.push_back(a.b.type_of(a.ins[nc + nb + k]));
  auto call = [](JaxprBuilder& b, const JaxprPtr& j, std::vector<Atom> ins) {
    return b.add_eqn(Prim::jit, std::move(ins),
                     Params{{"jaxpr", j}, {"name", std::string("while")}});
  };
  // The loop's condition: the original on copies of the refs it writes.
  JaxprBuilder cb;
  std::vector<Atom> cond_ins;
  for (size_t k = 0; k < nc; ++k) cond_ins.push_back(cb.add_invar(a.b.type_of(a.ins[k])));
  for (const Type& t : carry_types) cond_ins.push_back(cb.add_invar(t));
  for (size_t k : written) {
    Var now = cb.add_eqn1(Prim::get, {cond_ins[k]}, Params{{"indexer", Indexer{}}});
    cond_ins[k] = cb.add_eqn1(Prim::new_ref, {now});
  }
  cb.set_outvars({call(cb, cond, cond_ins)[0]});
  // The loop's body: the original condition on the real refs, its result unused, then the body.
  JaxprBuilder bb;
  std::vector<Atom> consts;
  for (size_t k = 0; k < nc + nb; ++k) consts.push_back(bb.add_invar(a.b.type_of(a.ins[k])));
  std::vector<Atom> carry;
  for (const Type& t : carry_types) carry.push_back(bb.add_invar(t));
  std::vector<Atom> cin(consts.begin(), consts.begin() + static_cast<long>(nc));
  cin.insert(cin.end(), carry.begin(), carry.end());
  (void)call(bb, cond, cin);
  std::vector<Atom> bin(consts.begin() + static_cast<long>(nc), consts.end());
  bin.insert(bin.end(), carry.begin(), carry.end());
  std::vector<Var> next = call(bb, body, bin);
  bb.set_outvars(std::vector<Atom>(next.begin(), next.end()));
  // Operands: the cond consts, then cond consts and body consts for the body, then the carry.
  std::vector<Atom> ins(a.ins.begin(), a.ins.begin() + static_cast<long>(nc));
  ins.insert(ins.end(), a.ins.begin(), a.ins.begin() + static_cast<long>(nc + nb));
  ins.insert(ins.end(), a.ins.begin() + static_cast<long>(nc + nb), a.ins.end());
  Params p{{"body_jaxpr", std::make_shared<const Jaxpr>(bb.finish())},
           {"body_nconsts", static_cast<int64_t>(nc + nb)},
           {"cond_jaxpr", std::make_shared<const Jaxpr>(cb.finish())},
           {"cond_nconsts", static_cast<int64_t>(nc)}};
  std::vector<Var> outs = a.b.add_eqn(Prim::while_, std::move(ins), std::move(p));
  return {outs.begin(), outs.end()};
}

// run_state[jaxpr is_initialized] x_1 .. x_n (jax._src.state's run_state): a ref made from each
// initialized x_k (an uninitialized one, is_initialized False, takes no operand and starts
// as zeros), the stateful jaxpr called on the refs, and their final values as the results.
std::vector<Atom> run_state(RewriteArgs& a) {
  constexpr std::string_view prim = "run_state";
  const JaxprPtr& body = a.params.get<JaxprPtr>("jaxpr");
  if (!body->constvars.empty()) fail(prim, "a jaxpr with constvars cannot be run");
  const IntList initialized =
      a.params.get_or<IntList>("is_initialized", IntList(body->invars.size(), 1));
  if (initialized.size() != body->invars.size())
    fail(prim, fmt::format("is_initialized has {} entries for a jaxpr of {} refs",
                           initialized.size(), body->invars.size()));
  Emit e{a.b};
  std::vector<Atom> refs;
  std::vector<bool> passed_through;  // the operand is a ref itself
  size_t next = 0;
  for (size_t k = 0; k < body->invars.size(); ++k) {
    const Type& t = body->type_of(body->invars[k]);
    if (!t.is_ref) fail(prim, fmt::format("jaxpr input {} is {}, not a ref", k, t.str()));
    Atom init;
    if (initialized[k]) {
      if (next >= a.ins.size()) fail(prim, "has fewer operands than initialized refs");
      init = a.ins[next++];
    } else {
      init = e.broadcast(e.scalar(t.array.dtype, 0.0), t.array.shape, {});
    }
    // An operand that is a ref already (a nested run_state given an outer one) is that ref:
    // the body updates it, and the result is the ref itself.
    passed_through.push_back(is_var(init) && a.b.jaxpr().type_of(as_var(init)).is_ref);
    refs.push_back(passed_through.back() ? init : e.op(Prim::new_ref, {init}));
  }
  if (next != a.ins.size()) fail(prim, "has more operands than initialized refs");
  a.b.add_eqn(Prim::jit, refs, Params{{"jaxpr", body}, {"name", std::string(prim)}});
  std::vector<Atom> outs;
  for (size_t k = 0; k < refs.size(); ++k)
    outs.push_back(passed_through[k] ? refs[k] : e.op(Prim::freeze, {refs[k]}));
  return outs;
}

// remat2 (jax.checkpoint / jax.remat): a checkpointed call of its jaxpr, whose `policy` param
// (passes/ad/remat.h) refjit's reverse mode follows. JAX prints the policy as Python reprs:
// None and nothing_saveable recompute everything, DotsSaveable(only_if_no_batch_dims=...) keeps
// products, everything_saveable keeps all, SaveOnlyTheseNames(...) keeps the values named by
// `name[name=...]` eqns (checkpoint_name). Other policies by name (save_any_names_but_these,
// offloading) are read as nothing_saveable: the same results, more recomputation than JAX's.
// A policy of the user's own is read as everything_saveable.
std::string remat_policy_of(const std::string& text) {
  if (text == "None" || text.find("nothing_saveable") != std::string::npos)
    return "nothing_saveable";
  if (text.rfind("DotsSaveable(", 0) == 0)
    return text.find("only_if_no_batch_dims=True") != std::string::npos
               ? "dots_with_no_batch_dims_saveable"
               : "dots_saveable";
  if (text.find("dots_saveable") != std::string::npos) return "dots_saveable";
  if (text.find("dots_with_no_batch_dims") != std::string::npos)
    return "dots_with_no_batch_dims_saveable";
  const bool only_these = text.rfind("SaveOnlyTheseNames(", 0) == 0;
  if (only_these || text.rfind("SaveAnyNamesButThese(", 0) == 0) {
    // SaveOnlyTheseNames(saveable_names=frozenset({'a', 'b'})),
    // SaveAnyNamesButThese(names=frozenset({'a'})): the quoted names.
    std::vector<std::string> names;
    for (size_t at = text.find('\''); at != std::string::npos;) {
      const size_t end = text.find('\'', at + 1);
      if (end == std::string::npos) break;
      names.push_back(text.substr(at + 1, end - at - 1));
      at = text.find('\'', end + 1);
    }
    std::sort(names.begin(), names.end());
    return fmt::format("{}{}", only_these ? kSaveOnlyTheseNames : kSaveAnyNamesButThese,
                       fmt::join(names, ","));
  }
  if (text.find("save_only_these_names") != std::string::npos ||
      text.find("save_any_names_but_these") != std::string::npos)
    return "nothing_saveable";
  return "everything_saveable";
}

std::vector<Atom> remat(RewriteArgs& a) {
  const JaxprPtr& body = a.params.get<JaxprPtr>("jaxpr");
  if (!body) fail("remat2", "jaxpr is None");
  if (!body->constvars.empty()) fail("remat2", "a jaxpr with constvars cannot be called");
  std::vector<Var> outs = a.b.add_eqn(
      Prim::jit, a.ins,
      Params{{"jaxpr", body},
             {"name", std::string("checkpoint")},
             {"policy", remat_policy_of(a.params.get_or<std::string>("policy", "None"))}});
  return {outs.begin(), outs.end()};
}

// custom_vjp_call as JAX prints it: `fwd=f bwd=g` name Python functions whose bodies are not in
// the text. refjit runs call_jaxpr (the primal, exact) but refuses to differentiate it
// (passes/jaxpr_util.h: refuse_missing_custom_rule): the primal's own derivative may differ
// from the rule's. refjit's own custom_vjp_call (fwd_jaxpr / bwd_jaxpr in the text) keeps its
// rules.
std::vector<Atom> custom_vjp_call(RewriteArgs& a) {
  constexpr std::string_view prim = "custom_vjp_call";
  const JaxprPtr& body = custom_call_body(a, prim);
  const std::string name = printable_name(a.params.get_or<std::string>("name", std::string(prim)));
  Params p{{"jaxpr", body}, {"name", std::string(prim)}, {"custom_rule_missing", name}};
  std::vector<Var> outs = a.b.add_eqn(Prim::jit, a.ins, std::move(p));
  return {outs.begin(), outs.end()};
}

// reduce_precision: rounds to a float format of fewer bits. JAX emits it with the operand's
// own format (8/23 bits for f32) in the gradient of jax.checkpoint, to keep the recomputed
// values from being merged with the saved ones; that is the identity, which refjit reads.
std::vector<Atom> reduce_precision(RewriteArgs& a) {
  constexpr std::string_view prim = "reduce_precision";
  expect_operands(a, prim, 1);
  const ArrayType x = array_of(a, prim, 0);
  const int64_t exponent = a.params.get<int64_t>("exponent_bits");
  const int64_t mantissa = a.params.get<int64_t>("mantissa_bits");
  const bool f64 = x.dtype == DType::f64;
  if (!is_float(x.dtype) || exponent < (f64 ? 11 : 8) || mantissa < (f64 ? 52 : 23))
    fail(prim, fmt::format("rounding {} to {} exponent and {} mantissa bits is not supported; "
                           "refjit reads reduce_precision only to the operand's own format",
                           x.str(), exponent, mantissa));
  return {a.ins[0]};
}

// platform_index[platforms=(('cpu',), ('cuda', 'rocm'), None)]: which branch of
// lax.platform_dependent runs here. refjit runs on the CPU: the first entry naming 'cpu',
// else the default (None) entry.
std::vector<Atom> platform_index(RewriteArgs& a) {
  constexpr std::string_view prim = "platform_index";
  expect_operands(a, prim, 0);
  const std::string& text = a.params.get<std::string>("platforms");
  // The entries are the top-level items of the outer tuple.
  std::vector<std::string> entries;
  int depth = 0;
  std::string item;
  for (char c : text) {
    if (c == '(') {
      if (depth++ == 0) continue;
    } else if (c == ')') {
      if (--depth == 0) continue;
    }
    if (depth == 1 && c == ',') {
      entries.push_back(item);
      item.clear();
      continue;
    }
    if (depth >= 1) item += c;
  }
  if (item.find_first_not_of(' ') != std::string::npos) entries.push_back(item);
  std::optional<int64_t> found, fallback;
  for (size_t k = 0; k < entries.size(); ++k) {
    if (!found && entries[k].find("'cpu'") != std::string::npos) found = static_cast<int64_t>(k);
    if (!fallback && entries[k].find("None") != std::string::npos)
      fallback = static_cast<int64_t>(k);
  }
  if (!found && !fallback)
    fail(prim, fmt::format("no entry of platforms={} is for 'cpu' or the default; refjit runs "
                           "on the CPU",
                           text));
  return {Literal::of(DType::i32, static_cast<double>(found ? *found : *fallback))};
}

// lt_to / le_to / eq_to: comparisons in IEEE's total order (jnp.searchsorted, interp, expm):
// -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN, and NaNs of one sign are equal.
// A float's bits as a signed integer, with the magnitude bits of negative values flipped,
// compare in that order. Integers and bools compare as they are.
JaxRewrite total_order(std::string_view name, Prim compare) {
  return {name, {}, {}, [name, compare](RewriteArgs& a) -> std::vector<Atom> {
            expect_operands(a, name, 2);
            const ArrayType x = array_of(a, name, 0);
            if (is_complex(x.dtype))
              fail(name, fmt::format("operand 0 has type {}; complex numbers have no total "
                                     "order in refjit",
                                     x.str()));
            Emit e{a.b};
            if (!is_float(x.dtype)) return {e.op(compare, {a.ins[0], a.ins[1]})};
            const int bits = bit_width(x.dtype);
            const DType as_int = bits == 16 ? DType::i16 : bits == 32 ? DType::i32 : DType::i64;
            auto key = [&](const Atom& v) {
              const Atom i = e.op(Prim::bitcast_convert_type, {v}, Params{{"new_dtype", as_int}});
              const Atom sign = e.op(Prim::shift_right_arithmetic,
                                     {i, e.broadcast(Literal::of(as_int, bits - 1), x.shape, {})});
              const double magnitude = std::ldexp(1.0, bits - 1) - 1;  // 0x7f..f
              const Atom flip = e.op(
                  Prim::and_, {sign, e.broadcast(Literal::of(as_int, magnitude), x.shape, {})});
              return e.op(Prim::xor_, {i, flip});
            };
            return {e.op(compare, {key(a.ins[0]), key(a.ins[1])})};
          }};
}

std::vector<JaxRewrite> make_rewrites() {
  std::vector<JaxRewrite> r;
  r.push_back({"square", {}, {}, square});
  r.push_back(total_order("lt_to", Prim::lt));
  r.push_back(total_order("le_to", Prim::le));
  r.push_back(total_order("eq_to", Prim::eq));
  r.push_back({"clamp", {}, {}, clamp});
  r.push_back({"tile", {{"reps", K::ints}}, {}, tile});
  r.push_back({"device_put", {}, {"copy_semantics", "devices", "srcs"}, device_put});
  r.push_back({"mul", {{"out_dtype", K::dtype_or_none}}, {}, mul_out_dtype});
  r.push_back({"platform_index", {{"platforms", K::raw_text}}, {"has_default"}, platform_index});
  r.push_back({"split", {{"axis", K::integer}, {"sizes", K::ints}}, {}, split});
  r.push_back({"stack", {{"axis", K::integer}}, {}, stack});
  r.push_back({"unstack", {{"axis", K::integer}}, {}, unstack});
  r.push_back({"rev", {{"dimensions", K::ints}}, {}, rev});
  r.push_back({"top_k", {{"axis", K::integer}, {"k", K::integer}}, {}, top_k});
  r.push_back({"argmin", {{"axes", K::ints}, {"index_dtype", K::dtype}}, {}, argmin});
  r.push_back({"reshape", {{"dimensions", K::ints_or_none}, {"new_sizes", K::ints}}, {}, reshape});
  r.push_back({"empty", {}, {"dtype", "memory_space"}, empty});
  r.push_back({"empty_ref", {}, {"memory_space", "ty"}, empty_ref});
  r.push_back({"free_ref", {}, {}, free_ref});
  r.push_back({"while",
               {{"body_jaxpr", K::jaxpr},
                {"body_nconsts", K::integer},
                {"cond_jaxpr", K::jaxpr},
                {"cond_nconsts", K::integer}},
               {},
               while_loop});
  r.push_back({"run_state",
               {{"jaxpr", K::jaxpr}, {"is_initialized", K::bools_or_none}},
               {"which_linear"},
               run_state});
  r.push_back({"empty2", {}, {"dtype", "memory_space"}, empty});
  r.push_back({"custom_jvp_call",
               {{"call_jaxpr", K::jaxpr}, {"jvp_jaxpr", K::jaxpr}, {"name", K::name}},
               {"jvp", "jvp_jaxpr_fun", "jvp_jaxpr_thunk", "num_consts", "symbolic_zeros"},
               custom_jvp_call});
  r.push_back({"reduce_precision",
               {{"exponent_bits", K::integer}, {"mantissa_bits", K::integer}},
               {},
               reduce_precision});
  r.push_back({"remat2",
               {{"jaxpr", K::jaxpr}, {"policy", K::raw_text}},
               {"differentiated", "prevent_cse"},
               remat});
  r.push_back({"custom_vjp_call",
               {{"call_jaxpr", K::jaxpr}, {"name", K::name}},
               {"fwd", "bwd", "num_consts", "out_trees", "symbolic_zeros"},
               custom_vjp_call});
  add_shard_map_rewrites(r);
  add_gather_scatter_rewrites(r);
  add_fold_rewrites(r);
  add_prng_rewrites(r);
  add_conv_rewrites(r);
  add_collective_rewrites(r);
  add_gamma_rewrites(r);
  add_linalg_rewrites(r);
  return r;
}

}  // namespace

const std::vector<JaxRewrite>& all_rewrites() {
  static const std::vector<JaxRewrite> rewrites = make_rewrites();
  return rewrites;
}

const JaxRewrite* find_jax_rewrite(std::string_view name) {
  for (const JaxRewrite& r : all_rewrites())
    if (r.name == name) return &r;
  return nullptr;
}

std::vector<std::string_view> jax_rewrite_names() {
  std::vector<std::string_view> names;
  for (const JaxRewrite& r : all_rewrites()) names.push_back(r.name);
  return names;
}

const ForeignRewrites& jax_rewrites() {
  static const ForeignRewrites table{find_jax_rewrite, jax_rewrite_names, complex_extremum};
  return table;
}

}  // namespace refjit::text
