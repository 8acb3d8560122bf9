#include "passes/simplify/window_sums.h"

#include <optional>
#include <utility>
#include <vector>

#include "refjit/ir/use_def.h"

namespace refjit {

namespace {

constexpr size_t kMaxWindows = 16;

// One `ref[window] += value`.
struct Window {
  size_t eqn;
  Var value;
  IntList start, size;  // per dim of the ref
};

// A ref that becomes a sum, and the eqns the sum replaces.
struct Accumulation {
  size_t init = 0, new_ref = 0, freeze = 0;
  std::optional<size_t> crop;  // a pad with zeros that alone reads the frozen value
  std::vector<Window> windows;
};

bool is_zero_literal(const Atom& a) {
  const Literal* l = std::get_if<Literal>(&a);
  return l && l->equals(0.0);
}

int64_t elements(const IntList& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

class WindowSums {
 public:
  // The matches are found on the jaxpr as given (ud_ describes it), then rewritten at once.
  explicit WindowSums(Jaxpr& j) : j_(j), ud_(j) {}

  int run() {
    std::vector<Accumulation> found;
    for (size_t i = 0; i < j_.eqns.size(); ++i)
      if (std::optional<Accumulation> a = match(i)) found.push_back(std::move(*a));
    if (found.empty()) return 0;

    // Drop the matched eqns; each sum goes where its ref was frozen.
    std::vector<bool> drop(j_.eqns.size(), false);
    std::vector<int> sum_at(j_.eqns.size(), -1);
    for (size_t a = 0; a < found.size(); ++a) {
      const Accumulation& acc = found[a];
      drop[acc.init] = drop[acc.new_ref] = drop[acc.freeze] = true;
      if (acc.crop) drop[*acc.crop] = true;
      for (const Window& w : acc.windows) drop[w.eqn] = true;
      sum_at[acc.freeze] = static_cast<int>(a);
    }
    std::vector<Eqn> out;
    for (size_t i = 0; i < j_.eqns.size(); ++i) {
      if (sum_at[i] >= 0) emit_sum(found[static_cast<size_t>(sum_at[i])], out);
      if (!drop[i]) out.push_back(std::move(j_.eqns[i]));
    }
    j_.eqns = std::move(out);
    return static_cast<int>(found.size());
  }

 private:
  // A zero ref at eqn i (new_ref of a broadcast zero read by nothing else) that is only added
  // into by static windows, then frozen.
  std::optional<Accumulation> match(size_t i) const {
    const Eqn& e = j_.eqns[i];
    if (e.prim != Prim::new_ref || e.ins.size() != 1 || e.outs.size() != 1) return std::nullopt;
    const Eqn* init = ud_.def(e.ins[0]);
    if (!init || init->prim != Prim::broadcast_in_dim || init->ins.size() != 1 ||
        !is_zero_literal(init->ins[0]) || !ud_.read_once(as_var(e.ins[0])))
      return std::nullopt;
    const Var ref = e.outs[0];
    const ArrayType rt = j_.type_of(ref).array;
    if (rt.rank() == 0 || ud_.is_output(ref)) return std::nullopt;

    Accumulation acc;
    acc.init = static_cast<size_t>(ud_.def_index(as_var(e.ins[0])));
    acc.new_ref = i;
    bool frozen = false;
    for (const UseDef::Use& u : ud_.uses(ref)) {
      const Eqn& user = j_.eqns[u.eqn];
      if (u.operand != 0 || frozen) return std::nullopt;  // nothing after the freeze
      if (user.prim == Prim::freeze) {
        frozen = true;
        acc.freeze = u.eqn;
        continue;
      }
      std::optional<Window> w = window(user, u.eqn, rt);
      if (!w) return std::nullopt;
      acc.windows.push_back(std::move(*w));
    }
    if (!frozen || acc.windows.empty() || acc.windows.size() > kMaxWindows) return std::nullopt;
    for (const Window& w : acc.windows)
      if (2 * elements(w.size) < elements(rt.shape)) return std::nullopt;
    acc.crop = crop_of(j_.eqns[acc.freeze].outs.at(0));
    return acc;
  }

  // `ref[start:start+size, ...] += value` with static unit-stride slices only.
  std::optional<Window> window(const Eqn& e, size_t index, const ArrayType& rt) const {
    if (e.prim != Prim::addupdate || e.ins.size() != 2 || !is_var(e.ins[1])) return std::nullopt;
    const Indexer& idx = e.params.get<Indexer>("indexer");
    if (idx.dims.size() > static_cast<size_t>(rt.rank())) return std::nullopt;
    Window w{index, as_var(e.ins[1]), {}, {}};
    for (size_t d = 0; d < static_cast<size_t>(rt.rank()); ++d) {
      if (d >= idx.dims.size()) {
        w.start.push_back(0);
        w.size.push_back(rt.shape[d]);
        continue;
      }
      const IndexerDim& x = idx.dims[d];
      if (x.kind != IndexerDim::Kind::slice || x.dynamic || x.stride != 1) return std::nullopt;
      w.start.push_back(x.start);
      w.size.push_back(x.size);
    }
    const ArrayType vt = j_.type_of(w.value).array;
    if (vt.dtype != rt.dtype || vt.shape != Shape(w.size.begin(), w.size.end()))
      return std::nullopt;
    return w;
  }

  // The pad with zeros and no interior padding that is the only reader of `frozen`.
  std::optional<size_t> crop_of(Var frozen) const {
    if (!ud_.read_once(frozen)) return std::nullopt;
    const UseDef::Use u = ud_.uses(frozen)[0];
    const Eqn& e = j_.eqns[u.eqn];
    if (e.prim != Prim::pad || u.operand != 0 || e.ins.size() != 2 || !is_zero_literal(e.ins[1]))
      return std::nullopt;
    for (const IntList& c : e.params.get<IntListList>("padding_config"))
      if (c.size() != 3 || c[2] != 0) return std::nullopt;
    return u.eqn;
  }

  // The sum of the windows' values, each padded to its place (and cropped): the frozen value,
  // or the crop's result.
  void emit_sum(const Accumulation& acc, std::vector<Eqn>& out) {
    const ArrayType rt = j_.type_of(j_.eqns[acc.new_ref].outs[0]).array;
    const size_t rank = static_cast<size_t>(rt.rank());
    IntListList outer(rank, IntList{0, 0, 0});
    Var result = j_.eqns[acc.freeze].outs[0];
    if (acc.crop) {
      outer = j_.eqns[*acc.crop].params.get<IntListList>("padding_config");
      result = j_.eqns[*acc.crop].outs[0];
    }
    const ArrayType result_type = j_.type_of(result).array;
    std::optional<Var> sum;
    for (size_t k = 0; k < acc.windows.size(); ++k) {
      const Window& w = acc.windows[k];
      // The window lies inside the ref, so padding it and then cropping is one pad.
      IntListList config;
      for (size_t d = 0; d < rank; ++d)
        config.push_back(
            {w.start[d] + outer[d][0], rt.shape[d] - w.start[d] - w.size[d] + outer[d][1], 0});
      const bool last = k + 1 == acc.windows.size();
      const Var padded = last && k == 0 ? result : j_.new_var(Type(result_type));
      out.push_back(Eqn{Prim::pad,
                        Params{{"padding_config", std::move(config)}},
                        {w.value, Literal::of(rt.dtype, 0.0)},
                        {padded}});
      if (!sum) {
        sum = padded;
        continue;
      }
      const Var total = last ? result : j_.new_var(Type(result_type));
      out.push_back(Eqn{Prim::add, Params{}, {*sum, padded}, {total}});
      sum = total;
    }
  }

  Jaxpr& j_;
  const UseDef ud_;
};

}  // namespace

int sum_window_accumulations(Jaxpr& j) { return WindowSums(j).run(); }

}  // namespace refjit
