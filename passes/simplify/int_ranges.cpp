#include "passes/simplify/int_ranges.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "ir/loop_params.h"

namespace refjit {
namespace {

// Ranges beyond this are dropped, so interval arithmetic never overflows.
constexpr int64_t kRangeLimit = int64_t{1} << 40;

std::optional<IntRange> bounded(int64_t lo, int64_t hi) {
  if (lo < -kRangeLimit || hi > kRangeLimit) return std::nullopt;
  return IntRange{lo, hi};
}

std::optional<IntRange> join(std::optional<IntRange> a, std::optional<IntRange> b) {
  if (!a || !b) return std::nullopt;
  return IntRange{std::min(a->lo, b->lo), std::max(a->hi, b->hi)};
}

// The range of one eqn's (single, integer) result from its operands' ranges.
std::optional<IntRange> result_range(const Eqn& e, const IntRanges& r) {
  auto in = [&](size_t k) { return range_of(r, e.ins.at(k)); };
  switch (e.prim) {
    // Results whose elements are some of operand 0's.
    case Prim::slice:
    case Prim::squeeze:
    case Prim::reshape:
    case Prim::expand_dims:
    case Prim::broadcast_in_dim:
    case Prim::transpose:
    case Prim::copy:
    case Prim::checkpoint_name:
    case Prim::dynamic_slice:
    case Prim::gather:
    case Prim::reduce_max:
    case Prim::reduce_min:
    case Prim::convert_element_type: return in(0);
    case Prim::select_n: {
      if (e.ins.size() < 2) return std::nullopt;
      // Only the cases the predicate can pick.
      const size_t cases = e.ins.size() - 1;
      std::optional<IntRange> pick = in(0);
      const int64_t first = pick ? std::clamp<int64_t>(pick->lo, 0, cases - 1) : 0;
      const int64_t last = pick ? std::clamp<int64_t>(pick->hi, 0, cases - 1) : cases - 1;
      std::optional<IntRange> out = in(1 + first);
      for (int64_t k = first + 1; k <= last; ++k) out = join(out, in(1 + k));
      return out;
    }
    case Prim::and_:
    case Prim::or_:
    case Prim::not_: {
      // Logic on values in [0, 1] (bools, or integers known to be 0 or 1).
      auto a = in(0), b = e.prim == Prim::not_ ? a : in(1);
      if (!a || !b || a->lo < 0 || a->hi > 1 || b->lo < 0 || b->hi > 1) return std::nullopt;
      if (e.prim == Prim::not_) return IntRange{1 - a->hi, 1 - a->lo};
      if (e.prim == Prim::and_) return IntRange{a->lo & b->lo, a->hi & b->hi};
      return IntRange{a->lo | b->lo, a->hi | b->hi};
    }
    case Prim::lt:
    case Prim::le:
    case Prim::gt:
    case Prim::ge:
    case Prim::eq:
    case Prim::ne: {
      auto a = in(0), b = in(1);
      std::optional<bool> v = a && b ? decide_comparison(e.prim, *a, *b) : std::nullopt;
      return v ? IntRange{*v, *v} : IntRange{0, 1};
    }
    case Prim::div: {
      // By a positive constant: truncation toward zero is monotonic.
      auto a = in(0), b = in(1);
      if (!a || !b || b->lo != b->hi || b->lo <= 0) return std::nullopt;
      return IntRange{a->lo / b->lo, a->hi / b->lo};
    }
    case Prim::concatenate: {
      std::optional<IntRange> out = in(0);
      for (size_t k = 1; k < e.ins.size(); ++k) out = join(out, in(k));
      return out;
    }
    case Prim::iota: {
      const IntList& shape = e.params.get<IntList>("shape");
      const auto dim = static_cast<size_t>(e.params.get<int64_t>("dimension"));
      if (dim >= shape.size() || shape[dim] < 1) return std::nullopt;
      return IntRange{0, shape[dim] - 1};
    }
    case Prim::neg: {
      auto a = in(0);
      return a ? bounded(-a->hi, -a->lo) : std::nullopt;
    }
    case Prim::add:
    case Prim::add_any:
    case Prim::sub:
    case Prim::mul:
    case Prim::max:
    case Prim::min: {
      auto a = in(0), b = in(1);
      if (!a || !b) return std::nullopt;
      switch (e.prim) {
        case Prim::sub: return bounded(a->lo - b->hi, a->hi - b->lo);
        case Prim::max: return IntRange{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
        case Prim::min: return IntRange{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
        case Prim::mul: {
          if (std::max({std::abs(a->lo), std::abs(a->hi), std::abs(b->lo), std::abs(b->hi)}) >
              (int64_t{1} << 20))
            return std::nullopt;
          int64_t c[] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
          return IntRange{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
        }
        default: return bounded(a->lo + b->lo, a->hi + b->hi);
      }
    }
    default: return std::nullopt;
  }
}

// Ranges are tracked for i32 and i64 (index arithmetic) and bool (0 or 1: comparisons that
// select between indices); other integer dtypes stay unknown.
bool tracked(DType d) { return d == DType::i32 || d == DType::i64 || d == DType::bool_; }

}  // namespace

std::optional<bool> decide_comparison(Prim p, IntRange a, IntRange b) {
  switch (p) {
    case Prim::lt:
      if (a.hi < b.lo) return true;
      if (a.lo >= b.hi) return false;
      return std::nullopt;
    case Prim::le:
      if (a.hi <= b.lo) return true;
      if (a.lo > b.hi) return false;
      return std::nullopt;
    case Prim::gt: return decide_comparison(Prim::lt, b, a);
    case Prim::ge: return decide_comparison(Prim::le, b, a);
    case Prim::eq:
      if (a.lo == a.hi && b.lo == b.hi && a.lo == b.lo) return true;
      if (a.hi < b.lo || b.hi < a.lo) return false;
      return std::nullopt;
    case Prim::ne: {
      std::optional<bool> e = decide_comparison(Prim::eq, a, b);
      return e ? std::optional<bool>(!*e) : std::nullopt;
    }
    default: return std::nullopt;
  }
}

std::optional<IntRange> range_of(const IntRanges& r, const Atom& a) {
  if (const Literal* l = std::get_if<Literal>(&a))
    return tracked(l->dtype) ? std::optional<IntRange>(IntRange{l->i, l->i}) : std::nullopt;
  return r.at(as_var(a).id);
}

// The ranges inside a scan's body: consts and xs take their operand's range (an xs row holds
// a subset of the stacked elements); carries are unknown.
IntRanges scan_body_int_ranges(const Eqn& e, const IntRanges& outer) {
  const ScanParams scan = ScanParams::of(e);
  const Jaxpr& body = *scan.body;
  IntRanges r(body.vars.size());
  const size_t nc = scan.num_consts, nk = scan.num_carry;
  for (size_t p = 0; p < e.ins.size() && p < body.invars.size(); ++p)
    if (p < nc || p >= nc + nk) r[body.invars[p].id] = range_of(outer, e.ins[p]);
  analyze_int_ranges(body, r);
  return r;
}

void analyze_int_ranges(const Jaxpr& j, IntRanges& r) {
  for (const Eqn& e : j.eqns) {
    if (e.prim == Prim::scan) {
      const ScanParams scan = ScanParams::of(e);
      const Jaxpr& body = *scan.body;
      IntRanges br = scan_body_int_ranges(e, r);
      const size_t nk = scan.num_carry;
      for (size_t k = nk; k < e.outs.size() && k < body.outvars.size(); ++k)
        r[e.outs[k].id] = range_of(br, body.outvars[k]);
      continue;
    }
    if (e.outs.size() != 1) continue;
    const Type& t = j.type_of(e.outs[0]);
    if (t.is_ref || !tracked(t.array.dtype)) continue;
    // A range the result's dtype cannot hold means the arithmetic may wrap: unknown.
    std::optional<IntRange> out = result_range(e, r);
    const DType d = t.array.dtype;
    const int64_t max = d == DType::i32 ? INT32_MAX : d == DType::bool_ ? 1 : kRangeLimit;
    const int64_t min = d == DType::i32 ? INT32_MIN : d == DType::bool_ ? 0 : -kRangeLimit;
    if (out && (out->lo < min || out->hi > max)) out.reset();
    r[e.outs[0].id] = out;
  }
}

IntRanges int_ranges_from_consts(const Jaxpr& j,
                                 const std::vector<std::optional<IntRange>>& const_ranges) {
  IntRanges r(j.vars.size());
  for (size_t k = 0; k < j.constvars.size() && k < const_ranges.size(); ++k)
    r[j.constvars[k].id] = const_ranges[k];
  analyze_int_ranges(j, r);
  return r;
}

std::optional<IntRange> element_range(const Array& a) {
  if (!is_int(a.dtype()) || a.size() == 0) return std::nullopt;
  IntRange range{a.as_int(0), a.as_int(0)};
  for (int64_t i = 1; i < a.size(); ++i) {
    range.lo = std::min(range.lo, a.as_int(i));
    range.hi = std::max(range.hi, a.as_int(i));
  }
  return range;
}

}  // namespace refjit
