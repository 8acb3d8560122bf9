#include "passes/simplify/implicit_im2col.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "passes/jaxpr_util.h"
#include "refjit/ir/im2col.h"
#include "refjit/ir/use_def.h"

namespace refjit {

namespace {

// A literal +0 (the padding value of a transposed slice).
bool is_positive_zero(const Atom& a) {
  const Literal* l = std::get_if<Literal>(&a);
  return l && l->equals(0.0) && !std::signbit(l->f);
}

IntList iota_list(int64_t n) {
  IntList v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

class Im2colFinder {
 public:
  // The rewrites are found on the jaxpr as given (ud_ describes it); its eqns are replaced at
  // the end.
  explicit Im2colFinder(Jaxpr& j) : j_(j), ud_(j) {}

  int run() {
    find_window_sums();
    std::vector<Eqn> out;
    out.reserve(j_.eqns.size());
    for (size_t i = 0; i < j_.eqns.size(); ++i) {
      Eqn e = j_.eqns[i];
      changes_ += rewrite_body(e, [](Jaxpr& body) { return Im2colFinder(body).run(); });
      if (auto it = window_sums_.find(i); it != window_sums_.end()) {
        for (Eqn& r : it->second) out.push_back(std::move(r));
        continue;
      }
      if (e.prim != Prim::dot_general || !rewrite_product(e, out)) out.push_back(std::move(e));
    }
    if (changes_ > 0) j_.eqns = std::move(out);
    return changes_;
  }

 private:
  struct Windows {
    Im2col geometry;
    Var x;
  };

  const Eqn* def(const Atom& a) const { return ud_.def(a); }

  // Appends to `out` what replaces dot_general `e` when one operand is an im2col matrix;
  // false (nothing appended) otherwise.
  bool rewrite_product(const Eqn& e, std::vector<Eqn>& out) {
    const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
    const ArrayType& yt = j_.type_of(e.outs[0]).array;
    if (!dn.lhs_batch.empty() || (yt.dtype != DType::f32 && yt.dtype != DType::f64) ||
        j_.type_of(e.ins[0]).array.dtype != yt.dtype ||
        j_.type_of(e.ins[1]).array.dtype != yt.dtype)
      return false;
    // m . k (or m . k^T): im2col_dot.
    if (std::optional<Windows> w = windows_of(e.ins[0])) {
      const int rank = w->geometry.rank();
      const ArrayType& kt = j_.type_of(e.ins[1]).array;
      if (kt.rank() == 2 && dn.lhs_contract == IntList{rank - 1} &&
          (dn.rhs_contract == IntList{0} || dn.rhs_contract == IntList{1})) {
        Atom k = e.ins[1];
        if (dn.rhs_contract[0] == 1) {  // k transposed first (a kernel is small)
          Var kk = j_.new_var(ArrayType{kt.dtype, {kt.shape[1], kt.shape[0]}});
          out.push_back(Eqn{Prim::transpose, Params{{"permutation", IntList{1, 0}}}, {k}, {kk}});
          k = kk;
        }
        out.push_back(Eqn{Prim::im2col_dot, w->geometry.params(), {w->x, k}, e.outs});
        ++changes_;
        return true;
      }
    }
    // m^T . g, contracting every row dim: im2col_tdot; g^T . m is its transpose.
    for (int side = 0; side < 2; ++side) {
      std::optional<Windows> w = windows_of(e.ins[side]);
      if (!w) continue;
      const int rank = w->geometry.rank();
      const Atom& g = e.ins[1 - side];
      const IntList rows = iota_list(rank - 1);
      if (j_.type_of(g).array.rank() != rank || dn.lhs_contract != rows || dn.rhs_contract != rows)
        continue;
      const int64_t depth = w->geometry.windows() * w->geometry.channels();
      const int64_t cols = j_.type_of(g).array.shape.back();
      Var product = side == 0 ? e.outs[0] : j_.new_var(ArrayType{yt.dtype, {depth, cols}});
      out.push_back(Eqn{Prim::im2col_tdot, w->geometry.params(), {w->x, g}, {product}});
      if (side == 1)
        out.push_back(
            Eqn{Prim::transpose, Params{{"permutation", IntList{1, 0}}}, {product}, e.outs});
      ++changes_;
      return true;
    }
    return false;
  }

  // The windows that `m` concatenates, when m = concatenate(slices of one x) along its last
  // dim, every slice spanning x's last dim.
  std::optional<Windows> windows_of(const Atom& m) const {
    const Eqn* concat = def(m);
    const int64_t rank = j_.type_of(m).array.rank();
    if (!concat || concat->prim != Prim::concatenate || rank < 2 ||
        concat->params.get<int64_t>("dimension") != rank - 1 || concat->ins.size() < 2)
      return std::nullopt;
    Im2col g;
    std::optional<Var> x;
    for (const Atom& piece : concat->ins) {
      const Eqn* s = def(piece);
      if (!s || s->prim != Prim::slice || !is_var(s->ins[0])) return std::nullopt;
      const Var source = as_var(s->ins[0]);
      if (x && source.id != x->id) return std::nullopt;
      x = source;
      const Shape& xs = j_.type_of(source).array.shape;
      const IntList& start = s->params.get<IntList>("start_indices");
      const ParamValue* sp = s->params.find("strides");
      const IntList* strides = sp ? std::get_if<IntList>(sp) : nullptr;
      const IntList step = strides ? *strides : IntList(static_cast<size_t>(rank), 1);
      const Shape& window = j_.type_of(piece).array.shape;
      if (g.starts.empty()) {
        g.strides = step;
        g.window = IntList(window.begin(), window.end());
      } else if (step != g.strides || IntList(window.begin(), window.end()) != g.window) {
        return std::nullopt;
      }
      if (start.back() != 0 || step.back() != 1 || window.back() != xs.back()) return std::nullopt;
      g.starts.push_back(start);
    }
    if (!g.problem(j_.type_of(*x).array.shape).empty()) return std::nullopt;
    return Windows{std::move(g), *x};
  }

  // ---- the transpose of a convolution's im2col
  //
  // The gradient with respect to a convolution's input is k = ct . w^T (one block of C
  // columns per window), each block placed at its window's position and summed: after
  // canonicalize, `sum_t pad(slice(k, block t))`. That is a convolution too, of the padded
  // cotangent with the kernel flipped: dx[y, c] = sum_t sum_o ct[y - lo_t, o] w[t C + c, o]
  // = im2col_dot(pad(ct), w') with windows at L - lo_t (L = max lo_t) and w'[(t, o), c] =
  // w[t C + c, o]. Found first (they replace the sum's last add); the product k and the
  // pieces are left to dce.

  // The eqn reading `v`, when it has exactly one reader that is an eqn.
  std::optional<size_t> only_reader(Var v) const {
    if (!ud_.read_once(v)) return std::nullopt;
    return ud_.uses(v)[0].eqn;
  }

  void find_window_sums() {
    for (size_t i = 0; i < j_.eqns.size(); ++i)
      if (j_.eqns[i].prim == Prim::dot_general) window_sum_of(i);
  }

  void window_sum_of(size_t product) {
    const Eqn& dot = j_.eqns[product];
    const DotDims& dn = dot.params.get<DotDims>("dimension_numbers");
    const ArrayType& ct = j_.type_of(dot.ins[0]).array;
    const ArrayType& w = j_.type_of(dot.ins[1]).array;
    const ArrayType& kt = j_.type_of(dot.outs[0]).array;
    const int rank = ct.rank();
    if (rank < 2 || w.rank() != 2 || !dn.lhs_batch.empty() ||
        dn.lhs_contract != IntList{rank - 1} ||
        (dn.rhs_contract != IntList{0} && dn.rhs_contract != IntList{1}) ||
        (kt.dtype != DType::f32 && kt.dtype != DType::f64) || ct.dtype != kt.dtype ||
        w.dtype != kt.dtype || !is_var(dot.ins[0]) || !is_var(dot.ins[1]))
      return;
    const int64_t depth = kt.shape.back();
    // Every reader a slice of one block of columns, the blocks disjoint.
    if (ud_.is_output(dot.outs[0])) return;
    const std::vector<int32_t> slices = ud_.readers(dot.outs[0]);
    if (slices.size() < 2) return;
    int64_t width = -1;
    std::vector<int64_t> block_of(slices.size());
    std::vector<bool> seen;
    for (size_t n = 0; n < slices.size(); ++n) {
      const Eqn& s = j_.eqns[static_cast<size_t>(slices[n])];
      if (s.prim != Prim::slice) return;
      const IntList& start = s.params.get<IntList>("start_indices");
      const IntList& limit = s.params.get<IntList>("limit_indices");
      if (const IntList* st = std::get_if<IntList>(s.params.find("strides")))
        for (int64_t v : *st)
          if (v != 1) return;
      for (int d = 0; d + 1 < rank; ++d)
        if (start[d] != 0 || limit[d] != kt.shape[d]) return;
      const int64_t wdt = limit.back() - start.back();
      if (width < 0) {
        width = wdt;
        if (width < 1 || depth % width) return;
        seen.assign(static_cast<size_t>(depth / width), false);
      }
      if (wdt != width || start.back() % width) return;
      block_of[n] = start.back() / width;
      if (seen[block_of[n]]) return;
      seen[block_of[n]] = true;
    }
    const int64_t windows = depth / width;
    if (static_cast<int64_t>(slices.size()) != windows) return;
    // Each block placed (padded, or as it is) and read by the sum.
    std::vector<IntList> lo(static_cast<size_t>(windows));
    std::vector<Var> terms;
    for (size_t n = 0; n < slices.size(); ++n) {
      Var term = j_.eqns[static_cast<size_t>(slices[n])].outs[0];
      IntList& low = lo[block_of[n]];
      low.assign(static_cast<size_t>(rank), 0);
      std::optional<size_t> reader = only_reader(term);
      if (!reader) return;
      const Eqn& r = j_.eqns[*reader];
      if (r.prim == Prim::pad) {
        if (!is_positive_zero(r.ins.at(1))) return;
        const IntListList& config = r.params.get<IntListList>("padding_config");
        for (int d = 0; d < rank; ++d) {
          if (config[d][2] != 0) return;
          low[d] = config[d][0];
        }
        if (low.back() != 0 || config.back()[1] != 0) return;
        term = r.outs[0];
      }
      terms.push_back(term);
    }
    // The terms are exactly the leaves of a tree of adds, each add read once but the root,
    // each term a leaf once.
    const Shape& dx = j_.type_of(terms[0]).array.shape;
    std::vector<bool> leaf(j_.vars.size(), false);
    for (Var t : terms) {
      if (j_.type_of(t).array.shape != dx) return;
      leaf[t.id] = true;
    }
    std::optional<size_t> root;
    size_t leaves = 0, adds = 0;
    // Walk up from one leaf to the root, then count the tree below it.
    Var top = terms[0];
    while (true) {
      std::optional<size_t> reader = only_reader(top);
      if (!reader || j_.eqns[*reader].prim != Prim::add) break;
      top = j_.eqns[*reader].outs[0];
      root = *reader;
    }
    if (!root) return;
    std::vector<Var> todo = {top};
    while (!todo.empty()) {
      Var v = todo.back();
      todo.pop_back();
      if (leaf[v.id]) {
        leaf[v.id] = false;  // each term added once: a second visit ends the search
        ++leaves;
        continue;
      }
      const Eqn* a = def(v);
      if (!a || a->prim != Prim::add || (v.id != top.id && !only_reader(v))) return;
      ++adds;
      for (const Atom& in : a->ins) {
        if (!is_var(in)) return;
        todo.push_back(as_var(in));
      }
    }
    if (leaves != terms.size() || adds + 1 != terms.size()) return;
    // The windows over the padded cotangent.
    Im2col g;
    IntListList pad_config;
    for (int d = 0; d < rank; ++d) {
      int64_t low = lo[0][d];
      for (const IntList& l : lo) low = std::max(low, l[d]);
      int64_t high = 0;
      bool first = true;
      for (const IntList& l : lo) {
        const int64_t h = dx[d] - kt.shape[d] - l[d];
        high = first ? h : std::max(high, h);
        first = false;
      }
      if (d == rank - 1) low = high = 0;
      pad_config.push_back({low, high, 0});
    }
    Shape padded;
    for (int d = 0; d < rank; ++d)
      padded.push_back(d == rank - 1 ? ct.shape[d]
                                     : ct.shape[d] + pad_config[d][0] + pad_config[d][1]);
    for (const IntList& l : lo) {
      IntList start;
      for (int d = 0; d < rank; ++d) start.push_back(d == rank - 1 ? 0 : pad_config[d][0] - l[d]);
      g.starts.push_back(start);
    }
    g.strides.assign(static_cast<size_t>(rank), 1);
    g.window = IntList(dx.begin(), dx.end());
    g.window.back() = ct.shape.back();
    for (int64_t size : padded)
      if (size < 1) return;
    if (!g.problem(padded).empty()) return;
    // pad(ct), the kernel as [(t, o), c], then the product.
    const DType dt = kt.dtype;
    const int64_t cols = ct.shape.back();
    std::vector<Eqn> eqns;
    Var u = j_.new_var(ArrayType{dt, padded});
    eqns.push_back(Eqn{Prim::pad,
                       Params{{"padding_config", pad_config}},
                       {dot.ins[0], Literal::of(dt, 0.0)},
                       {u}});
    const bool w_rows_are_depth = dn.rhs_contract == IntList{1};  // w is [T C, O]
    Var w3 = j_.new_var(ArrayType{
        dt, w_rows_are_depth ? Shape{windows, width, cols} : Shape{cols, windows, width}});
    eqns.push_back(
        Eqn{Prim::reshape,
            Params{{"dimensions", NoneParam{}}, {"new_sizes", IntList(j_.type_of(w3).array.shape)}},
            {dot.ins[1]},
            {w3}});
    Var wt = j_.new_var(ArrayType{dt, {windows, cols, width}});
    eqns.push_back(
        Eqn{Prim::transpose,
            Params{{"permutation", w_rows_are_depth ? IntList{0, 2, 1} : IntList{1, 0, 2}}},
            {w3},
            {wt}});
    Var wk = j_.new_var(ArrayType{dt, {windows * cols, width}});
    eqns.push_back(
        Eqn{Prim::reshape,
            Params{{"dimensions", NoneParam{}}, {"new_sizes", IntList{windows * cols, width}}},
            {wt},
            {wk}});
    eqns.push_back(Eqn{Prim::im2col_dot, g.params(), {u, wk}, j_.eqns[*root].outs});
    window_sums_[*root] = std::move(eqns);
    ++changes_;
  }

  Jaxpr& j_;
  const UseDef ud_;
  std::map<size_t, std::vector<Eqn>> window_sums_;  // the root add's index: what replaces it
  int changes_ = 0;
};

}  // namespace

Jaxpr implicit_im2col(const Jaxpr& jaxpr, int* changes) {
  return rewritten_copy(
      jaxpr, [](Jaxpr& j) { return Im2colFinder(j).run(); }, changes);
}

}  // namespace refjit
