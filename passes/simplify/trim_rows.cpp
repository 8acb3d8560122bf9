#include "passes/simplify/trim_rows.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "ir/loop_params.h"
#include "ir/window_params.h"
#include "passes/jaxpr_util.h"
#include "passes/simplify/inline.h"
#include "passes/simplify/int_ranges.h"
#include "refjit/ir/use_def.h"

namespace refjit {
namespace {

using Ranges = IntRanges;

int64_t window_rows(std::optional<IntRange> start, int64_t size, int64_t dim, int64_t per_row);

// Rows of dim 0 read or written through the indexer of get/swap/addupdate eqn `e`.
int64_t indexer_rows(const Eqn& e, const Ranges& r, int64_t dim) {
  const ParamValue* pv = e.params.find("indexer");
  const Indexer* idx = pv ? std::get_if<Indexer>(pv) : nullptr;
  if (!idx || idx->dims.empty()) return dim;  // the whole ref
  const IndexerDim& d0 = idx->dims[0];
  // Index arrays clamp into [0, dim-1] like integer indices.
  const int64_t size = d0.kind == IndexerDim::Kind::slice ? d0.size : 1;
  if (d0.dynamic) {
    // Dynamic operands follow the ref (and, for swap/addupdate, the value), dim 0's first.
    const size_t first = e.prim == Prim::get ? 1 : 2;
    if (e.ins.size() <= first) return dim;
    return window_rows(range_of(r, e.ins[first]), size, dim, 1);
  }
  const int64_t stride = d0.kind == IndexerDim::Kind::slice ? std::max<int64_t>(d0.stride, 1) : 1;
  return std::min(dim, d0.start + (size - 1) * stride + 1);
}

int64_t static_slice_rows(const Eqn& e, int64_t dim) {
  const IntList& limit = e.params.get<IntList>("limit_indices");
  return limit.empty() ? dim : std::min(dim, limit[0]);
}

// Rows (of `dim`) a clamped window of `size` elements along a dim of `dim * per_row` elements
// needs, its start in `start`: at least ceil((max(hi, 0) + size) / per_row).
int64_t window_rows(std::optional<IntRange> start, int64_t size, int64_t dim, int64_t per_row) {
  if (!start) return dim;
  const int64_t end = std::max<int64_t>(start->hi, 0) + size;
  return std::min(dim, (end + per_row - 1) / per_row);
}

// Rows indices in `idx` need when out-of-range ones are dropped (scatter) or clamped
// (gather): every index the original hits must stay in range, so max(hi, 0) / per_row + 1.
int64_t indexed_rows(std::optional<IntRange> idx, int64_t dim, int64_t per_row) {
  if (!idx) return dim;
  return std::min(dim, std::max<int64_t>(idx->hi, 0) / per_row + 1);
}

// Positions per index of dim 0 for a gather or scatter on axis 0 whose indices address
// `dims` dims: the elements of dims 1..dims-1.
int64_t per_index(const Jaxpr& j, const Eqn& e) {
  const Shape& x = j.type_of(e.ins[0]).array.shape;
  return num_elements(Shape(x.begin() + 1, x.begin() + indexed_dims(e.params)));
}

// The rows of a scan carry that its body touches, following the carry from body invar `y`
// through in-place updates (dynamic_update_slice, scatter) and row-preserving reshapes to
// carry-out `k`; nullopt if it is used any other way. `family` maps each var holding the
// carry to its rows-per-carry-row multiplier (a flattened [D, W] carry has D*W rows of 1).
std::optional<int64_t> carry_rows_in_body(const Jaxpr& body, const Ranges& r, Var y, size_t k,
                                          int64_t dim, std::map<uint32_t, int64_t>& family) {
  family = {{y.id, 1}};
  int64_t need = 0;
  for (const Eqn& e : body.eqns) {
    for (size_t p = 0; p < e.ins.size(); ++p) {
      if (!is_var(e.ins[p]) || !family.count(as_var(e.ins[p]).id)) continue;
      if (p != 0) return std::nullopt;
      const int64_t m = family.at(as_var(e.ins[p]).id);
      if (e.prim == Prim::dynamic_slice && e.ins.size() >= 2) {
        need = std::max(need, window_rows(range_of(r, e.ins[1]),
                                          e.params.get<IntList>("slice_sizes").at(0), dim, m));
      } else if (e.prim == Prim::dynamic_update_slice && e.ins.size() >= 3) {
        const Shape& update = body.type_of(e.ins[1]).array.shape;
        if (update.empty()) return std::nullopt;
        need = std::max(need, window_rows(range_of(r, e.ins[2]), update[0], dim, m));
        family[e.outs.at(0).id] = m;
      } else if ((e.prim == Prim::scatter || e.prim == Prim::scatter_add) && e.ins.size() == 3 &&
                 e.params.get_or<int64_t>("axis", -1) == 0) {
        need = std::max(need, indexed_rows(range_of(r, e.ins[1]), dim, m * per_index(body, e)));
        family[e.outs.at(0).id] = m;
      } else if (e.prim == Prim::gather && e.params.get_or<int64_t>("axis", -1) == 0) {
        need = std::max(need, indexed_rows(range_of(r, e.ins[1]), dim, m * per_index(body, e)));
      } else if (e.prim == Prim::slice) {
        need = std::max(need, window_rows(IntRange{0, 0}, static_slice_rows(e, dim * m), dim, m));
      } else if (is_row_major_reshape(e)) {
        // Row-major, so carry row i is elements [i*E, (i+1)*E) before and after.
        const Shape& out = body.type_of(e.outs.at(0)).array.shape;
        if (out.empty() || out[0] % dim != 0) return std::nullopt;
        family[e.outs[0].id] = out[0] / dim;
      } else {
        return std::nullopt;
      }
    }
  }
  for (size_t q = 0; q < body.outvars.size(); ++q) {
    const bool in_family = is_var(body.outvars[q]) && family.count(as_var(body.outvars[q]).id);
    if (in_family != (q == k)) return std::nullopt;
  }
  return need;
}

// The rows of ref `ref` touched by the eqns of `j` (recursing into scans that take it as a
// constant); nullopt if it is used any other way or returned.
std::optional<int64_t> ref_rows(const Jaxpr& j, const Ranges& r, Var ref, int64_t dim) {
  int64_t need = 0;
  for (const Eqn& e : j.eqns) {
    for (size_t p = 0; p < e.ins.size(); ++p) {
      if (!is_var(e.ins[p]) || as_var(e.ins[p]) != ref) continue;
      if ((e.prim == Prim::get || e.prim == Prim::swap || e.prim == Prim::addupdate) && p == 0) {
        need = std::max(need, indexer_rows(e, r, dim));
      } else if ((e.prim == Prim::get_flat_run || e.prim == Prim::swap_flat_run) && p == 0) {
        // Positions min(max(start + k, 0), bound), k < length, in blocks of one dim-0 index.
        const int64_t block = num_elements(j.type_of(ref).array.shape) / std::max<int64_t>(dim, 1);
        if (block == 0) return std::nullopt;
        const int64_t bound = e.params.get<int64_t>("bound");
        need = std::max(need, std::min(bound / block + 1,
                                       window_rows(range_of(r, e.ins[1]),
                                                   e.params.get<int64_t>("length"), dim, block)));
      } else if (e.prim == Prim::shift_add && p == 0) {
        // Both windows (dim 0's starts clamp as dynamic_slice's).
        const ShiftAddParams s = ShiftAddParams::of(e);
        if (s.rank == 0) return std::nullopt;
        need = std::max(
            {need, window_rows(range_of(r, s.write_starts(e)[0]), (*s.write_sizes)[0], dim, 1),
             window_rows(range_of(r, s.add_starts(e)[0]), (*s.add_sizes)[0], dim, 1)});
      } else if (e.prim == Prim::scan && p < ScanParams::of(e).num_consts) {
        const Jaxpr& body = *ScanParams::of(e).body;
        std::optional<int64_t> inner =
            ref_rows(body, scan_body_int_ranges(e, r), body.invars.at(p), dim);
        if (!inner) return std::nullopt;
        need = std::max(need, *inner);
      } else {
        return std::nullopt;
      }
    }
  }
  for (const Atom& a : j.outvars)
    if (is_var(a) && as_var(a) == ref) return std::nullopt;
  return need;
}

Shape trimmed_shape(Shape s, int64_t rows) {
  s.at(0) = rows;
  return s;
}

// Gives ref `ref` of `j` the shape `shape`, in `j` and in the bodies of scans taking it.
void retype_ref(Jaxpr& j, Var ref, const Shape& shape) {
  j.vars.at(ref.id).type.array.shape = shape;
  for (Eqn& e : j.eqns) {
    if (e.prim != Prim::scan) continue;
    for (size_t p = 0; p < e.ins.size() && p < ScanParams::of(e).num_consts; ++p) {
      if (!is_var(e.ins[p]) || as_var(e.ins[p]) != ref) continue;
      Jaxpr body = *ScanParams::of(e).body;
      retype_ref(body, body.invars.at(p), shape);
      e.params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(body)));
    }
  }
}

class RowTrimmer {
 public:
  RowTrimmer(Jaxpr j, const std::vector<std::optional<IntRange>>& const_ranges)
      : j_(std::move(j)), r_(int_ranges_from_consts(j_, const_ranges)), use_def_(j_) {}

  int run() {
    int trimmed = 0;
    for (size_t i = 0; i < j_.eqns.size(); ++i) {
      if (j_.eqns[i].prim == Prim::scan) trimmed += trim_scan_carries(i);
      if (j_.eqns[i].prim == Prim::new_ref) trimmed += trim_new_ref(i);
    }
    if (trimmed > 0) insert_init_slices();
    return trimmed;
  }

  Jaxpr take() { return std::move(j_); }

 private:
  // The final carry `v` is read only by static slices: the rows they take.
  std::optional<int64_t> final_carry_rows(Var v, int64_t dim) const {
    int64_t need = 0;
    for (const Atom& a : j_.outvars)
      if (is_var(a) && as_var(a) == v) return std::nullopt;
    for (const Eqn& e : j_.eqns)
      for (size_t p = 0; p < e.ins.size(); ++p) {
        if (!is_var(e.ins[p]) || as_var(e.ins[p]) != v) continue;
        if (e.prim != Prim::slice || p != 0) return std::nullopt;
        need = std::max(need, static_slice_rows(e, dim));
      }
    return need;
  }

  int trim_scan_carries(size_t i) {
    const Eqn& e = j_.eqns[i];
    const Jaxpr& body = *ScanParams::of(e).body;
    const size_t nc = ScanParams::of(e).num_consts, nk = ScanParams::of(e).num_carry;
    Ranges br;
    bool have_ranges = false;
    Jaxpr new_body = body;
    int trimmed = 0;
    for (size_t k = 0; k < nk && nc + k < body.invars.size(); ++k) {
      const Type& t = j_.type_of(e.outs.at(k));
      if (t.is_ref || t.array.shape.empty()) continue;
      const int64_t dim = t.array.shape[0];
      if (!have_ranges) br = scan_body_int_ranges(e, r_), have_ranges = true;
      std::map<uint32_t, int64_t> family;
      std::optional<int64_t> in_body =
          carry_rows_in_body(body, br, body.invars[nc + k], k, dim, family);
      std::optional<int64_t> after = final_carry_rows(e.outs[k], dim);
      if (!in_body || !after) continue;
      const int64_t rows = std::max<int64_t>({*in_body, *after, 1});
      if (rows >= dim) continue;
      const Shape shape = trimmed_shape(t.array.shape, rows);
      for (auto [id, per_row] : family) new_body.vars.at(id).type.array.shape[0] = rows * per_row;
      // Reshapes of the carry name their result shape.
      for (Eqn& b : new_body.eqns)
        if (is_row_major_reshape(b) && family.count(b.outs.at(0).id))
          b.params.set("new_sizes", IntList(new_body.type_of(b.outs[0]).array.shape));
      j_.vars.at(e.outs[k].id).type.array.shape = shape;
      init_trims_.push_back({i, nc + k, shape});
      ++trimmed;
    }
    if (trimmed > 0)
      j_.eqns[i].params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(new_body)));
    return trimmed;
  }

  int trim_new_ref(size_t i) {
    const Eqn& e = j_.eqns[i];
    if (e.outs.size() != 1 || e.ins.size() != 1) return 0;
    const Var ref = e.outs[0];
    const Type& t = j_.type_of(ref);
    if (!t.is_ref || t.array.shape.empty()) return 0;
    const int64_t dim = t.array.shape[0];
    std::optional<int64_t> rows = ref_rows(j_, r_, ref, dim);
    if (!rows || std::max<int64_t>(*rows, 1) >= dim) return 0;
    const Shape shape = trimmed_shape(t.array.shape, std::max<int64_t>(*rows, 1));
    retype_ref(j_, ref, shape);
    init_trims_.push_back({i, 0, shape});
    return 1;
  }

  // Gives each trimmed value's initial operand the trimmed shape: a broadcast of a scalar
  // read only there is narrowed in place (so the fill is trimmed too); anything else is
  // sliced just before the eqn.
  void insert_init_slices() {
    std::vector<std::vector<Eqn>> before(j_.eqns.size());
    for (const InitTrim& it : init_trims_) {
      Atom& init = j_.eqns[it.eqn].ins.at(it.operand);
      if (!is_var(init)) continue;  // a literal scalar has no rows
      const Var v = as_var(init);
      // The trims change no eqn's operands, so the reads counted at the start still hold.
      const int64_t d = use_def_.def_index(v);
      if (d >= 0 && use_def_.read_once(v) && j_.eqns[d].prim == Prim::broadcast_in_dim &&
          j_.eqns[d].ins.size() == 1 && j_.type_of(j_.eqns[d].ins[0]).array.shape.empty()) {
        j_.eqns[d].params.set("shape", IntList(it.shape));
        j_.vars.at(v.id).type.array.shape = it.shape;
        continue;
      }
      const ArrayType from = j_.type_of(v).array;
      const Var sliced = j_.new_var(Type(ArrayType{from.dtype, it.shape}));
      before[it.eqn].push_back(Eqn{Prim::slice,
                                   Params{{"start_indices", IntList(it.shape.size(), 0)},
                                          {"limit_indices", IntList(it.shape)},
                                          {"strides", NoneParam{}}},
                                   {v},
                                   {sliced}});
      j_.eqns[it.eqn].ins.at(it.operand) = sliced;
    }
    std::vector<Eqn> eqns;
    for (size_t i = 0; i < j_.eqns.size(); ++i) {
      for (Eqn& e : before[i]) eqns.push_back(std::move(e));
      eqns.push_back(std::move(j_.eqns[i]));
    }
    j_.eqns = std::move(eqns);
  }

  struct InitTrim {
    size_t eqn;
    size_t operand;
    Shape shape;
  };

  Jaxpr j_;
  Ranges r_;
  const UseDef use_def_;  // of j_ as it came in
  std::vector<InitTrim> init_trims_;
};

}  // namespace

Jaxpr trim_untouched_rows(const Jaxpr& jaxpr,
                          const std::vector<std::optional<IntRange>>& const_ranges, int* trimmed) {
  RowTrimmer t(has_jit_eqn(jaxpr) ? inline_jit(jaxpr) : jaxpr, const_ranges);
  const int n = t.run();
  if (trimmed) *trimmed = n;
  return n > 0 ? t.take() : jaxpr;
}

}  // namespace refjit
