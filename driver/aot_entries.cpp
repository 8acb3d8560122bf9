// The entry points of an AOT object per mode: the function, its gradient, its JVP, or the
// VJP's forward and backward halves sharing a residual struct (docs/aot.md).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "driver/aot_plan.h"
#include "driver/derive.h"
#include "driver/pipeline.h"
#include "passes/ad/jvp.h"
#include "passes/ad/vjp.h"
#include "refjit/ir/error.h"

namespace refjit::aot {

std::string Namer::take(std::string want, const std::string& fallback) {
  std::string s;
  for (char ch : want) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (s.empty() || s == "_" || !is_c_identifier(s) || s.starts_with("__")) s = fallback;
  std::string name = s;
  for (int k = 2; used_.count(name); ++k) name = fmt::format("{}_{}", s, k);
  used_.insert(name);
  return name;
}

namespace {

std::string binder(const Jaxpr& j, Var v) { return j.info(v).name; }

// Parameters for the constvars and invars of `j` (named after `names_from`'s binders).
void add_input_params(CEntry& e, const Jaxpr& j, const Jaxpr& names_from, Namer& namer,
                      std::vector<int>* param_of_input = nullptr) {
  auto add = [&](Var v, Var named, const std::string& fallback, const std::string& what) {
    const Type& t = j.type_of(v);
    CParam p;
    p.name = namer.take(binder(names_from, named), fallback);
    p.type = t.array;
    if (t.is_ref) {
      p.kind = ParamKind::inout;
      p.doc = fmt::format("{}, a ref: read and updated in place", what);
    } else {
      p.kind = t.array.is_scalar() ? ParamKind::scalar_in : ParamKind::array_in;
      p.doc = what;
    }
    if (param_of_input) param_of_input->push_back(static_cast<int>(e.params.size()));
    e.slots.push_back({false, static_cast<int>(e.params.size())});
    e.params.push_back(std::move(p));
  };
  for (size_t i = 0; i < j.constvars.size(); ++i)
    add(j.constvars[i], names_from.constvars[i], fmt::format("const{}", i),
        fmt::format("constvar {}", i));
  for (size_t i = 0; i < j.invars.size(); ++i)
    add(j.invars[i], names_from.invars[i], fmt::format("arg{}", i), fmt::format("argument {}", i));
}

void add_output_param(CEntry& e, const ArrayType& t, std::string name, std::string doc) {
  e.slots.push_back({false, static_cast<int>(e.params.size())});
  e.params.push_back({std::move(name), ParamKind::out, t, std::move(doc)});
}

std::string out_name(const std::string& base, size_t i, size_t n) {
  return n == 1 ? base : fmt::format("{}{}", base, i);
}

ResidualStruct layout_residuals(const std::string& name, const Jaxpr& fwd, size_t first,
                                size_t count) {
  ResidualStruct rs;
  rs.name = name;
  int64_t offset = 0, max_align = 1;
  for (size_t k = 0; k < count; ++k) {
    const Atom& a = fwd.outvars[first + k];
    ArrayType t = fwd.type_of(a).array;
    int64_t align = byte_size(t.dtype);
    max_align = std::max(max_align, align);
    offset = (offset + align - 1) / align * align;
    Field f;
    f.name = fmt::format("r{}", k);
    f.type = t;
    f.offset = offset;
    std::string src = is_var(a) ? fwd.info(as_var(a)).name : std::string();
    f.doc = src.empty() || src == "_" ? "saved by the forward pass"
                                      : fmt::format("the forward value `{}`", src);
    rs.fields.push_back(f);
    // C99 has no zero-length arrays: an empty residual still takes one element.
    offset += std::max<int64_t>(t.num_elements(), 1) * byte_size(t.dtype);
  }
  if (count == 0) offset = 1;  // `char unused_;`
  rs.size = (offset + max_align - 1) / max_align * max_align;
  return rs;
}

std::string program_label(const AotOptions& o) {
  return o.source_name.empty()
             ? "the program"
             : "the program in " + std::filesystem::path(o.source_name).filename().string();
}

std::vector<int> default_wrt(const Jaxpr& f) {
  std::vector<int> w;
  for (size_t i = 0; i < f.invars.size(); ++i) {
    const Type& t = f.type_of(f.invars[i]);
    if (!t.is_ref && is_float(t.dtype())) w.push_back(static_cast<int>(i));
  }
  if (w.empty()) throw Error("aot: the program has no float, non-ref invar to differentiate");
  return w;
}

void plan_function(EntryPlan& plan, const Jaxpr& f, const AotOptions& o) {
  plan.jaxprs.push_back(f);
  CEntry e;
  e.symbol = o.name;
  e.summary = fmt::format("{}: computes {}.", o.name, program_label(o));
  Namer namer;
  add_input_params(e, f, f, namer);
  for (size_t i = 0; i < f.outvars.size(); ++i)
    add_output_param(e, f.type_of(f.outvars[i]).array,
                     namer.take(out_name("out", i, f.outvars.size()), "out"),
                     fmt::format("output {}", i));
  plan.entries.push_back(std::move(e));
}

void plan_grad(EntryPlan& plan, const Jaxpr& f, const AotOptions& o) {
  std::vector<int> wrt = o.wrt.empty() ? default_wrt(f) : o.wrt;
  // As the pipeline's autodiff pass derives it (windows first; no constant is known here).
  plan.jaxprs.push_back(derive_program(f, Derivative::grad, wrt));
  CEntry e;
  e.symbol = o.name;
  e.summary = fmt::format(
      "{}: computes the scalar output of {} and its gradient with respect to the\n"
      " * arguments listed below as `grad_*`.",
      o.name, program_label(o));
  Namer namer;
  add_input_params(e, f, f, namer);
  add_output_param(e, f.type_of(f.outvars[0]).array, namer.take("out", "out"),
                   "the program's output");
  for (int w : wrt) {
    Var v = f.invars[w];
    std::string label =
        binder(f, v).empty() ? fmt::format("argument {}", w) : fmt::format("`{}`", binder(f, v));
    add_output_param(e, f.type_of(v).array,
                     namer.take("grad_" + binder(f, v), fmt::format("grad_arg{}", w)),
                     fmt::format("d out / d {}", label));
  }
  plan.entries.push_back(std::move(e));
}

void plan_jvp(EntryPlan& plan, const Jaxpr& f, const AotOptions& o) {
  std::vector<bool> nonzero;
  for (Var v : f.invars) nonzero.push_back(is_float(f.type_of(v).dtype()));
  // The windows the autodiff pass makes first, then tangents for the float invars only.
  Jaxpr j = Differentiable(f).jvp(nonzero);
  CEntry e;
  e.symbol = o.name;
  e.summary = fmt::format(
      "{}: forward mode of {}: the outputs and their tangents (directional\n"
      " * derivatives) along the given input tangents `tangent_*`.",
      o.name, program_label(o));
  Namer namer;
  // Primals: j's constvars and its first |invars| invars; named after f's binders.
  auto add_in = [&](size_t pos_in_j, const std::string& name, const std::string& fallback,
                    const std::string& doc) {
    const Type& t =
        j.type_of(pos_in_j < j.constvars.size() ? j.constvars[pos_in_j]
                                                : j.invars[pos_in_j - j.constvars.size()]);
    CParam p;
    p.name = namer.take(name, fallback);
    p.type = t.array;
    p.kind = t.is_ref ? ParamKind::inout
                      : (t.array.is_scalar() ? ParamKind::scalar_in : ParamKind::array_in);
    p.doc = t.is_ref ? doc + ", a ref: read and updated in place" : doc;
    e.slots.push_back({false, static_cast<int>(e.params.size())});
    e.params.push_back(std::move(p));
  };
  size_t nc = f.constvars.size();
  for (size_t i = 0; i < nc; ++i)
    add_in(i, binder(f, f.constvars[i]), fmt::format("const{}", i), fmt::format("constvar {}", i));
  for (size_t i = 0; i < f.invars.size(); ++i)
    add_in(nc + i, binder(f, f.invars[i]), fmt::format("arg{}", i), fmt::format("argument {}", i));
  size_t k = 0;
  for (size_t i = 0; i < f.invars.size(); ++i) {
    if (!nonzero[i]) continue;
    std::string b = binder(f, f.invars[i]);
    add_in(nc + f.invars.size() + k++, "tangent_" + b, fmt::format("tangent_arg{}", i),
           fmt::format("tangent of {}", b.empty() ? fmt::format("argument {}", i) : "`" + b + "`"));
  }
  size_t n = f.outvars.size();
  for (size_t i = 0; i < n; ++i)
    add_output_param(e, j.type_of(j.outvars[i]).array, namer.take(out_name("out", i, n), "out"),
                     fmt::format("output {}", i));
  for (size_t i = 0; i < n; ++i)
    add_output_param(e, j.type_of(j.outvars[n + i]).array,
                     namer.take(out_name("tangent_out", i, n), "tangent_out"),
                     fmt::format("tangent of output {}", i));
  plan.jaxprs.push_back(std::move(j));
  plan.entries.push_back(std::move(e));
}

void plan_vjp(EntryPlan& plan, const Jaxpr& f, const AotOptions& o) {
  std::vector<AotAccum> accum = o.accum;
  if (accum.empty())
    for (Var v : f.invars) {
      const Type& t = f.type_of(v);
      accum.push_back(!t.is_ref && is_float(t.dtype()) ? AotAccum::value : AotAccum::dont_want);
    }
  if (accum.size() != f.invars.size())
    throw Error(
        fmt::format("aot: --accum gives {} accumulator(s) but the program has {} "
                    "invar(s); give one of value, ref, dontwant per invar",
                    accum.size(), f.invars.size()));
  std::vector<bool> diff;
  std::vector<AccumKind> kinds;
  for (size_t i = 0; i < accum.size(); ++i) {
    const Type& t = f.type_of(f.invars[i]);
    bool d = accum[i] != AotAccum::dont_want;
    if (d && !is_float(t.dtype()))
      throw Error(
          fmt::format("aot: --accum: argument {} ({}) has type {}, which is not a "
                      "float; its accumulator must be dontwant",
                      i, binder(f, f.invars[i]), t.str()));
    if (accum[i] == AotAccum::value && t.is_ref)
      throw RefError("E5", fmt::format("aot: --accum: argument {} ({}) is a ref ({}); the "
                                       "gradient of a ref is accumulated into a ref: use ref "
                                       "(or dontwant)",
                                       i, binder(f, f.invars[i]), t.str()));
    diff.push_back(d);
    if (d) kinds.push_back(accum[i] == AotAccum::value ? AccumKind::value : AccumKind::ref);
  }
  if (kinds.empty()) throw Error("aot: --vjp with every accumulator dontwant computes no gradient");
  VjpJaxprs v = Differentiable(f).vjp(diff, kinds);
  if (!v.backward.constvars.empty() || v.forward.constvars.size() != f.constvars.size() ||
      v.forward.invars.size() != f.invars.size())
    throw Error("aot: internal error, unexpected constvars in the vjp programs");
  plan.jaxprs.push_back(std::move(v.forward));
  plan.jaxprs.push_back(std::move(v.backward));
  const Jaxpr& fwd = plan.jaxprs[0];
  const Jaxpr& bwd = plan.jaxprs[1];
  size_t nout = f.outvars.size();
  std::string fwd_name = o.name + "_fwd", bwd_name = o.name + "_bwd";
  plan.residuals = layout_residuals(o.name + "_residuals", fwd, nout, v.num_residuals);
  const ResidualStruct& rs = *plan.residuals;

  // fwd(consts..., args..., outs..., residuals*)
  CEntry e;
  e.symbol = fwd_name;
  e.summary = fmt::format(
      "{}: computes {} like a plain call\n"
      " * and fills `res` with what {} needs.",
      fwd_name, program_label(o), bwd_name);
  Namer namer;
  std::vector<int> input_param;  // constvars then invars -> param index
  add_input_params(e, fwd, f, namer, &input_param);
  for (size_t i = 0; i < nout; ++i)
    add_output_param(e, fwd.type_of(fwd.outvars[i]).array,
                     namer.take(out_name("out", i, nout), "out"), fmt::format("output {}", i));
  for (int r = 0; r < v.num_residuals; ++r) e.slots.push_back({true, r});
  e.params.push_back({namer.take("res", "res"),
                      ParamKind::residuals,
                      {},
                      fmt::format("{}*: receives the residuals", rs.name)});
  std::vector<CParam> fwd_inputs;
  for (int p : input_param) fwd_inputs.push_back(e.params[p]);
  plan.entries.push_back(std::move(e));

  // bwd(const residuals*, ref residuals..., cotangents..., gradients in invar order)
  CEntry be;
  be.symbol = bwd_name;
  be.residuals_const = true;
  be.summary = fmt::format(
      "{}: the gradients of {}\n"
      " * for the output cotangents `ct_*`, from residuals filled by {}.\n"
      " * Does not modify `res`: call it any number of times. value accumulators\n"
      " * (`grad_*` outputs) are overwritten; ref accumulators (`grad_*` in/out) have\n"
      " * the gradient added into them (+=).",
      bwd_name, program_label(o), fwd_name);
  Namer bnamer;
  be.params.push_back({bnamer.take("res", "res"),
                       ParamKind::residuals,
                       {},
                       fmt::format("const {}*: residuals from {}", rs.name, fwd_name)});
  for (int r = 0; r < v.num_residuals; ++r) be.slots.push_back({true, r});
  size_t pos = static_cast<size_t>(v.num_residuals);
  for (int r : v.ref_residuals) {
    CParam p = fwd_inputs.at(r);
    p.name = bnamer.take(p.name, fmt::format("ref{}", r));
    p.doc =
        fmt::format("the same ref that was passed to {} as `{}`", fwd_name, fwd_inputs.at(r).name);
    be.slots.push_back({false, static_cast<int>(be.params.size())});
    be.params.push_back(std::move(p));
    ++pos;
  }
  // Ref accumulators (bwd invars, input order) and cotangents come next in the jaxpr; the
  // gradient parameters go last in invar order, so record their slots first.
  std::vector<int> grad_param(f.invars.size(), -1);
  std::vector<size_t> ref_acc_slot;
  for (size_t i = 0; i < accum.size(); ++i)
    if (accum[i] == AotAccum::ref) {
      ref_acc_slot.push_back(be.slots.size());
      be.slots.push_back({false, -1});
      ++pos;
    }
  for (size_t i = 0; i < nout; ++i) {
    const Type& t = bwd.type_of(bwd.invars.at(pos + i));
    CParam p;
    p.name = bnamer.take(out_name("ct_out", i, nout), "ct_out");
    p.type = t.array;
    p.kind = t.array.is_scalar() ? ParamKind::scalar_in : ParamKind::array_in;
    p.doc = is_float(t.dtype())
                ? fmt::format("cotangent of output {}{}", i,
                              t.array.is_scalar() ? " (1 for the gradient of a scalar loss)" : "")
                : fmt::format("cotangent of output {} (not differentiable: ignored)", i);
    be.slots.push_back({false, static_cast<int>(be.params.size())});
    be.params.push_back(std::move(p));
  }
  size_t ref_k = 0, value_k = 0;
  std::vector<std::pair<size_t, int>> out_slots;  // (outvar index, param)
  for (size_t i = 0; i < accum.size(); ++i) {
    if (accum[i] == AotAccum::dont_want) continue;
    std::string b = binder(f, f.invars[i]);
    std::string label = b.empty() ? fmt::format("argument {}", i) : "`" + b + "`";
    CParam p;
    p.name = bnamer.take("grad_" + b, fmt::format("grad_arg{}", i));
    p.type = f.type_of(f.invars[i]).array;
    if (accum[i] == AotAccum::ref) {
      p.kind = ParamKind::inout;
      p.doc = fmt::format("gradient of {}, added into (+=)", label);
      be.slots[ref_acc_slot.at(ref_k++)].index = static_cast<int>(be.params.size());
    } else {
      p.kind = ParamKind::out;
      p.doc = fmt::format("gradient of {}, written", label);
      out_slots.push_back({value_k++, static_cast<int>(be.params.size())});
    }
    grad_param[i] = static_cast<int>(be.params.size());
    be.params.push_back(std::move(p));
  }
  if (pos + nout != bwd.invars.size() || value_k != bwd.outvars.size())
    throw Error("aot: internal error, the backward program's signature is not as expected");
  for (auto [k, param] : out_slots) be.slots.push_back({false, param});
  plan.entries.push_back(std::move(be));
}

}  // namespace

EntryPlan plan_entries(const Jaxpr& program, const AotOptions& options) {
  EntryPlan plan;
  switch (options.mode) {
    case AotMode::function: plan_function(plan, program, options); break;
    case AotMode::grad: plan_grad(plan, program, options); break;
    case AotMode::jvp: plan_jvp(plan, program, options); break;
    case AotMode::vjp: plan_vjp(plan, program, options); break;
  }
  for (size_t i = 0; i < plan.entries.size(); ++i) plan.entries[i].jaxpr = &plan.jaxprs[i];
  return plan;
}

}  // namespace refjit::aot
