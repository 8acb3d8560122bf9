// Eval rules of the windowed reductions (docs/primitives.md "Windows"; geometry: ir/window.h).
// A window position on padding or a dilation hole holds the reduction's identity (0, -inf,
// +inf); the selecting ops keep a window's first element that is not beaten (ge: first
// maximum, le: first minimum), as XLA's CPU backend does.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "refjit/ir/window.h"
#include "runtime/dtype_dispatch.h"
#include "runtime/eval_rules.h"
#include "runtime/flat_index.h"

namespace refjit {

namespace {

// Calls f(out_flat, in_flat or -1) for every output index and window offset, output-major,
// window offsets in row-major order; -1 stands for padding and dilation holes.
template <class F>
void for_each_window_element(const Window& w, const Shape& in, const Shape& out, F&& f) {
  const std::vector<int64_t> in_strides = row_major_strides(in);
  const Shape window(w.dims.begin(), w.dims.end());
  int64_t out_flat = 0;
  for_each_index(out, [&](const std::vector<int64_t>& o) {
    for_each_index(window, [&](const std::vector<int64_t>& k) {
      int64_t at = 0;
      for (int d = 0; d < w.rank() && at >= 0; ++d) {
        std::optional<int64_t> i = w.source(d, o[d], k[d], in[d]);
        at = i ? at + *i * in_strides[d] : -1;
      }
      f(out_flat, at);
    });
    ++out_flat;
  });
}

// The identity of max (ge) or min (le) in dtype T: -inf / +inf, or the integer extremes.
template <class T>
T select_identity(bool ge) {
  if constexpr (kIsFloat<T>)
    return static_cast<T>(ge ? -std::numeric_limits<double>::infinity()
                             : std::numeric_limits<double>::infinity());
  else
    return ge ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

// Whether `best` stays selected against `v`: select_prim(best, v).
template <class T>
bool keeps(bool ge, T best, T v) {
  return ge ? best >= v : best <= v;
}

enum class Reduce { sum, max, min };

template <Reduce kHow>
std::vector<RtValue> eval_reduce_window(const EvalContext&, const Eqn& e,
                                        std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  const Window w = Window::of(e.params);
  const Shape out_shape = w.out_shape(x.shape(), prim_name(e.prim));
  Array out(ArrayType{x.dtype(), out_shape});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsBool<T> || (kIsComplex<T> && kHow != Reduce::sum)) {
      bad_dtype(e, 0, x.dtype(), "a numeric dtype");
    } else {
      auto xs = x.values<T>();
      auto os = out.mutable_values<T>();
      T init;
      if constexpr (kHow == Reduce::sum)
        init = T(0);
      else if constexpr (kIsComplex<T>)
        init = T(0);  // unreachable: max/min of complex numbers are refused above
      else
        init = select_identity<T>(kHow == Reduce::max);
      for (auto& o : os) o = init;
      for_each_window_element(w, x.shape(), out_shape, [&](int64_t o, int64_t i) {
        if (i < 0) return;
        const T v = xs[i];
        if constexpr (kHow == Reduce::sum) {
          if constexpr (kIsInt<T>) {
            using U = std::make_unsigned_t<T>;
            os[o] = static_cast<T>(static_cast<U>(os[o]) + static_cast<U>(v));
          } else {
            os[o] = os[o] + v;
          }
        } else if constexpr (!kIsComplex<T>) {
          if constexpr (kIsFloat<T>)
            if (std::isnan(static_cast<double>(v)) || std::isnan(static_cast<double>(os[o]))) {
              os[o] = std::numeric_limits<T>::quiet_NaN();
              return;
            }
          if (kHow == Reduce::max ? v > os[o] : v < os[o]) os[o] = v;
        }
      });
    }
  });
  return {out};
}

// Per window, the flat operand index of the selected element (-1 when the window selects a
// padding or hole position, which holds the identity, or none). The selection starts from
// the window's first position (XLA's SelectAndScatter), or `from_identity`, from the
// identity itself, which only a beating element replaces (XLA's reduce-window init, which
// select_and_gather_add uses).
std::vector<int64_t> selected(const Eqn& e, const Array& x, const Window& w, const Shape& out_shape,
                              bool from_identity) {
  const bool ge = e.params.get<std::string>("select_prim") == "ge";
  std::vector<int64_t> pick(static_cast<size_t>(num_elements(out_shape)), -1);
  std::vector<bool> started(pick.size(), from_identity);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsBool<T> || kIsComplex<T>) {
      bad_dtype(e, 1, x.dtype(), "a real numeric dtype");
    } else {
      auto xs = x.values<T>();
      std::vector<T> best(pick.size(), select_identity<T>(ge));
      for_each_window_element(w, x.shape(), out_shape, [&](int64_t o, int64_t i) {
        const T v = i < 0 ? select_identity<T>(ge) : xs[i];
        if (!started[o] || !keeps(ge, best[o], v)) {
          best[o] = v;
          pick[o] = i;
          started[o] = true;
        }
      });
    }
  });
  return pick;
}

// select_and_gather_add t x: per window of x, t at x's selected element (0 where none).
std::vector<RtValue> eval_select_and_gather_add(const EvalContext&, const Eqn& e,
                                                std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& t = array_in(e, ins, 0);
  const Array& x = array_in(e, ins, 1);
  const Window w = Window::of(e.params);
  const Shape out_shape = w.out_shape(x.shape(), "select_and_gather_add");
  const std::vector<int64_t> pick = selected(e, x, w, out_shape, /*from_identity=*/true);
  Array out(ArrayType{t.dtype(), out_shape});
  for (size_t o = 0; o < pick.size(); ++o)
    if (pick[o] >= 0) out.set_from_double(static_cast<int64_t>(o), t.as_double(pick[o]));
  return {out};
}

// select_and_scatter_add s x: zeros of x's shape, each window's s added at x's selected
// element (a window selecting padding adds nothing).
std::vector<RtValue> eval_select_and_scatter_add(const EvalContext&, const Eqn& e,
                                                 std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& s = array_in(e, ins, 0);
  const Array& x = array_in(e, ins, 1);
  const Window w = Window::of(e.params);
  const Shape out_shape = w.out_shape(x.shape(), "select_and_scatter_add");
  if (out_shape != s.shape())
    eval_fail(e, fmt::format("the source {} does not have the windows' shape", s.type().str()));
  const std::vector<int64_t> pick = selected(e, x, w, out_shape, /*from_identity=*/false);
  std::vector<int64_t> at;
  std::vector<int64_t> which;
  for (size_t o = 0; o < pick.size(); ++o)
    if (pick[o] >= 0) {
      at.push_back(pick[o]);
      which.push_back(static_cast<int64_t>(o));
    }
  Array out(ArrayType{s.dtype(), x.shape()});
  add_elements(out, at,
               take_elements(s.reshaped({s.size()}), {static_cast<int64_t>(at.size())}, which));
  return {out};
}

}  // namespace

void register_window_eval_rules(EvalRuleTable& t) {
  t.set(Prim::reduce_window_sum, &eval_reduce_window<Reduce::sum>);
  t.set(Prim::reduce_window_max, &eval_reduce_window<Reduce::max>);
  t.set(Prim::reduce_window_min, &eval_reduce_window<Reduce::min>);
  t.set(Prim::select_and_gather_add, &eval_select_and_gather_add);
  t.set(Prim::select_and_scatter_add, &eval_select_and_scatter_add);
}

}  // namespace refjit
