#include "passes/simplify/index_runs.h"

#include <optional>
#include <utility>

#include "ir/window_params.h"
#include "passes/simplify/unit_run.h"

namespace refjit {

namespace {

// The first index of unit run `run`, emitted as the sum of its scalars (a sum already
// computed, for a get and a swap of the same run, is reused).
Atom emit_start(const UnitRun& run, DType dt, Rewriter& r) {
  return sum_of_terms(run.terms, dt, [&](Prim p, std::vector<Atom> ins) -> Atom {
    Eqn sum{p, {}, std::move(ins), {r.new_var(Type(ArrayType{dt, {}}))}};
    if (const Eqn* earlier = r.earlier_equal(sum)) return earlier->outs[0];
    const Var v = sum.outs[0];
    r.emit(std::move(sum));
    return v;
  });
}

// The first index of eqn `e`'s index vector (operand 1) if it is a unit run, emitted as the sum
// of the run's scalars; nullopt otherwise.
std::optional<Atom> run_start(const Eqn& e, Rewriter& r) {
  if (e.ins.size() < 2 || e.outs.size() != 1 || !e.params.find("axis")) return std::nullopt;
  const Type x = r.type_of(e.ins[0]);
  const int64_t axis = e.params.get<int64_t>("axis");
  if (x.is_ref || axis < 0 || axis >= x.array.rank()) return std::nullopt;
  const std::optional<UnitRun> run = as_unit_run(r.jaxpr(), e.ins[1]);
  if (!run || run->length < 1) return std::nullopt;
  return emit_start(*run, r.array_type(e.ins[1]).dtype, r);
}

Rewritten gather_of_run(Eqn& gather, Rewriter& r) {
  if (gather.ins.size() != 2) return Rewritten::no;
  const std::optional<Atom> start = run_start(gather, r);
  if (!start) return Rewritten::no;
  Params params;
  params.set("axis", gather.params.get<int64_t>("axis"));
  params.set("length", r.array_type(gather.ins[1]).shape.at(0));
  r.emit(Eqn{Prim::gather_run, std::move(params), {gather.ins[0], *start}, gather.outs});
  return Rewritten::replaced;
}

Rewritten scatter_of_run(Eqn& scatter, Rewriter& r) {
  if (scatter.ins.size() != 3) return Rewritten::no;
  const std::optional<Atom> start = run_start(scatter, r);
  if (!start) return Rewritten::no;
  Params params;
  params.set("axis", scatter.params.get<int64_t>("axis"));
  params.set("combine", std::string(combine_of_scatter(scatter.prim)));
  r.emit(Eqn{Prim::scatter_run,
             std::move(params),
             {scatter.ins[0], *start, scatter.ins[2]},
             scatter.outs});
  return Rewritten::replaced;
}

const RewritePattern kPatterns[] = {
    {"gather-of-run", Prim::gather, gather_of_run},
    {"scatter-of-run", Prim::scatter, scatter_of_run},
    {"scatter-of-run", Prim::scatter_add, scatter_of_run},
    {"scatter-of-run", Prim::scatter_mul, scatter_of_run},
    {"scatter-of-run", Prim::scatter_min, scatter_of_run},
    {"scatter-of-run", Prim::scatter_max, scatter_of_run},
};

}  // namespace

std::span<const RewritePattern> index_runs_patterns() { return kPatterns; }

}  // namespace refjit
