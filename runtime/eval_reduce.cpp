// Eval rules of the reductions and dot_general. Accumulation is in the element type (f32 sums
// in float), in row-major order of the reduced elements.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "refjit/ir/error.h"
#include "refjit/ir/im2col.h"
#include "runtime/dtype_dispatch.h"
#include "runtime/eval_rules.h"
#include "runtime/flat_index.h"

namespace refjit {

namespace {

// Splits x's dims into kept and reduced ones; `groups[o]` lists the flat offsets of the
// elements reduced into output element o, in row-major order.
struct Reduction {
  Shape out_shape;
  std::vector<std::vector<int64_t>> groups;
};

Reduction plan_reduction(const Eqn& e, const Array& x, const IntList& axes) {
  std::vector<bool> reduced(x.rank(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= x.rank() || reduced[a])
      eval_fail(e, fmt::format("axes ({}) must be distinct dims of {}", fmt::join(axes, ", "),
                               x.type().str()));
    reduced[a] = true;
  }
  Reduction r;
  for (int i = 0; i < x.rank(); ++i)
    if (!reduced[i]) r.out_shape.push_back(x.shape()[i]);
  std::vector<int64_t> os = row_major_strides(r.out_shape);
  r.groups.resize(static_cast<size_t>(num_elements(r.out_shape)));
  int64_t flat = 0;
  for_each_index(x.shape(), [&](const std::vector<int64_t>& idx) {
    int64_t o = 0, k = 0;
    for (int i = 0; i < x.rank(); ++i)
      if (!reduced[i]) o += idx[i] * os[k++];
    r.groups[o].push_back(flat++);
  });
  return r;
}

enum class ReduceKind { sum, max, min };

template <ReduceKind kKind>
std::vector<RtValue> eval_reduce(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  Reduction r = plan_reduction(e, x, e.params.get<IntList>("axes"));
  Array out(ArrayType{x.dtype(), r.out_shape});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsNumber<T> || (kIsComplex<T> && kKind == ReduceKind::sum)) {
      auto xs = x.values<T>();
      auto os = out.mutable_values<T>();
      for (size_t o = 0; o < r.groups.size(); ++o) {
        T acc;
        if constexpr (kKind == ReduceKind::sum) {
          acc = T(0);
        } else if constexpr (kKind == ReduceKind::max) {
          if constexpr (kIsFloat<T>)
            acc = -std::numeric_limits<T>::infinity();
          else
            acc = std::numeric_limits<T>::min();
        } else {
          if constexpr (kIsFloat<T>)
            acc = std::numeric_limits<T>::infinity();
          else
            acc = std::numeric_limits<T>::max();
        }
        for (int64_t i : r.groups[o]) {
          T v = xs[i];
          if constexpr (kKind == ReduceKind::sum) {
            if constexpr (kIsInt<T>) {
              using U = std::make_unsigned_t<T>;
              acc = static_cast<T>(static_cast<U>(acc) + static_cast<U>(v));
            } else {
              acc += v;
            }
          } else {
            if constexpr (kIsFloat<T>) {
              if (std::isnan(v) || std::isnan(acc)) {
                acc = std::numeric_limits<T>::quiet_NaN();
                continue;
              }
            }
            if constexpr (kKind == ReduceKind::max)
              acc = v > acc ? v : acc;
            else
              acc = v < acc ? v : acc;
          }
        }
        os[o] = acc;
      }
    } else {
      bad_dtype(e, 0, x.dtype(), "float32, float64, int32, int64");
    }
  });
  return {out};
}

std::vector<RtValue> eval_argmax(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  const IntList& axes = e.params.get<IntList>("axes");
  if (axes.size() != 1) eval_fail(e, fmt::format("needs exactly one axis, got {}", axes.size()));
  DType index_dtype = e.params.get<DType>("index_dtype");
  if (!is_int(index_dtype))
    eval_fail(e, fmt::format("index_dtype must be int32 or int64, got {}", long_name(index_dtype)));
  Reduction r = plan_reduction(e, x, axes);
  if (x.shape()[axes[0]] == 0 && !r.groups.empty())
    eval_fail(e, fmt::format("argmax over axis {} of size 0 has no answer", axes[0]));
  Array out(ArrayType{index_dtype, r.out_shape});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsComplex<T>) {
      bad_dtype(e, 0, x.dtype(), "an ordered dtype (not complex)");
    } else {
      auto xs = x.values<T>();
      for (size_t o = 0; o < r.groups.size(); ++o) {
        // Groups list the axis elements in order, so the position in the group is the index.
        const auto& g = r.groups[o];
        int64_t best = 0;
        for (size_t k = 1; k < g.size(); ++k) {
          T v = xs[g[k]], b = xs[g[best]];
          if constexpr (kIsFloat<T>) {
            if (std::isnan(b)) break;  // the first NaN is maximal
            if (std::isnan(v) || v > b) best = static_cast<int64_t>(k);
          } else {
            if (v > b) best = static_cast<int64_t>(k);
          }
        }
        out.set_from_double(static_cast<int64_t>(o), static_cast<double>(best));
      }
    }
  });
  return {out};
}

// XLA order: batch dims, then lhs free dims, then rhs free dims.
std::vector<RtValue> eval_dot_general(const EvalContext&, const Eqn& e,
                                      std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& lhs = array_in(e, ins, 0);
  const Array& rhs = array_in(e, ins, 1);
  const DotDims& dd = e.params.get<DotDims>("dimension_numbers");
  if (lhs.dtype() != rhs.dtype())
    eval_fail(e,
              fmt::format("operand dtypes differ: {} and {}", lhs.type().str(), rhs.type().str()));
  if (dd.lhs_contract.size() != dd.rhs_contract.size() ||
      dd.lhs_batch.size() != dd.rhs_batch.size())
    eval_fail(e, "lhs and rhs need the same number of contracting and of batch dims");
  auto check_dims = [&](const IntList& dims, const Array& a, std::vector<bool>& used,
                        std::string_view side) {
    for (int64_t d : dims) {
      if (d < 0 || d >= a.rank() || used[d])
        eval_fail(e, fmt::format("{} dim {} is out of range or repeated for {}", side, d,
                                 a.type().str()));
      used[d] = true;
    }
  };
  std::vector<bool> lused(lhs.rank(), false), rused(rhs.rank(), false);
  check_dims(dd.lhs_batch, lhs, lused, "lhs batch");
  check_dims(dd.lhs_contract, lhs, lused, "lhs contracting");
  check_dims(dd.rhs_batch, rhs, rused, "rhs batch");
  check_dims(dd.rhs_contract, rhs, rused, "rhs contracting");
  Shape out_shape, contract_shape;
  for (size_t i = 0; i < dd.lhs_batch.size(); ++i) {
    if (lhs.shape()[dd.lhs_batch[i]] != rhs.shape()[dd.rhs_batch[i]])
      eval_fail(e, fmt::format("batch dim sizes differ: lhs dim {} vs rhs dim {}", dd.lhs_batch[i],
                               dd.rhs_batch[i]));
    out_shape.push_back(lhs.shape()[dd.lhs_batch[i]]);
  }
  for (size_t i = 0; i < dd.lhs_contract.size(); ++i) {
    if (lhs.shape()[dd.lhs_contract[i]] != rhs.shape()[dd.rhs_contract[i]])
      eval_fail(e, fmt::format("contracting dim sizes differ: lhs dim {} vs rhs dim {}",
                               dd.lhs_contract[i], dd.rhs_contract[i]));
    contract_shape.push_back(lhs.shape()[dd.lhs_contract[i]]);
  }
  std::vector<int64_t> lfree, rfree;
  for (int i = 0; i < lhs.rank(); ++i)
    if (!lused[i]) lfree.push_back(i), out_shape.push_back(lhs.shape()[i]);
  for (int i = 0; i < rhs.rank(); ++i)
    if (!rused[i]) rfree.push_back(i), out_shape.push_back(rhs.shape()[i]);

  DType out_dtype = lhs.dtype();
  if (const ParamValue* p = e.params.find("preferred_element_type"))
    if (const DType* d = std::get_if<DType>(p)) out_dtype = *d;
  if (is_bool(lhs.dtype()) || is_bool(out_dtype))
    bad_dtype(e, 0, DType::bool_, "float32, float64, int32, int64");
  // Operands are converted to the output dtype, then multiplied and summed in it.
  auto convert = [&](const Array& a) {
    if (a.dtype() == out_dtype) return a;
    Array c(ArrayType{out_dtype, a.shape()});
    visit_dtype(a.dtype(), [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      visit_dtype(out_dtype, [&](auto to_tag) {
        using To = typename decltype(to_tag)::type;
        if constexpr ((kIsNumber<From> && kIsNumber<To> && !(kIsFloat<From> && kIsInt<To>)) ||
                      (kIsComplex<From> && kIsComplex<To>)) {
          auto src = a.values<From>();
          auto dst = c.mutable_values<To>();
          for (size_t i = 0; i < src.size(); ++i) dst[i] = static_cast<To>(src[i]);
        } else {
          eval_fail(e, fmt::format("cannot accumulate {} operands as preferred_element_type {}",
                                   long_name(a.dtype()), long_name(out_dtype)));
        }
      });
    });
    return c;
  };
  Array l = convert(lhs), r = convert(rhs);
  const std::vector<int64_t> ls = row_major_strides(lhs.shape()),
                             rs = row_major_strides(rhs.shape());
  const size_t nb = dd.lhs_batch.size();
  Array out(ArrayType{out_dtype, out_shape});
  visit_dtype(out_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsNumber<T> && !kIsComplex<T>) {
      bad_dtype(e, 0, out_dtype, "floats, complex numbers and integers");
    } else {
      auto lv = l.values<T>();
      auto rv = r.values<T>();
      auto ov = out.mutable_values<T>();
      int64_t flat = 0;
      for_each_index(out_shape, [&](const std::vector<int64_t>& o) {
        int64_t lbase = 0, rbase = 0;
        for (size_t i = 0; i < nb; ++i) {
          lbase += o[i] * ls[dd.lhs_batch[i]];
          rbase += o[i] * rs[dd.rhs_batch[i]];
        }
        for (size_t i = 0; i < lfree.size(); ++i) lbase += o[nb + i] * ls[lfree[i]];
        for (size_t i = 0; i < rfree.size(); ++i) rbase += o[nb + lfree.size() + i] * rs[rfree[i]];
        T acc = T(0);
        for_each_index(contract_shape, [&](const std::vector<int64_t>& c) {
          int64_t li = lbase, ri = rbase;
          for (size_t i = 0; i < c.size(); ++i) {
            li += c[i] * ls[dd.lhs_contract[i]];
            ri += c[i] * rs[dd.rhs_contract[i]];
          }
          if constexpr (kIsInt<T>) {
            using U = std::make_unsigned_t<T>;
            acc = static_cast<T>(static_cast<U>(acc) +
                                 static_cast<U>(lv[li]) * static_cast<U>(rv[ri]));
          } else {
            acc += lv[li] * rv[ri];
          }
        });
        ov[flat++] = acc;
      });
    }
  });
  return {out};
}

// Where im2col_dot's and im2col_tdot's operand x is read: each row's offset in x (rows in
// row-major order) and each window's.
struct Im2colOffsets {
  Im2col g;
  std::vector<int64_t> rows, windows;
};

Im2colOffsets im2col_offsets(const Eqn& e, const Array& x) {
  Im2colOffsets o{Im2col::of(e.params), {}, {}};
  if (std::string problem = o.g.problem(x.shape()); !problem.empty()) eval_fail(e, problem);
  const std::vector<int64_t> xs = row_major_strides(x.shape());
  for (const IntList& s : o.g.starts) {
    int64_t off = 0;
    for (int d = 0; d < x.rank(); ++d) off += s[d] * xs[d];
    o.windows.push_back(off);
  }
  for_each_index(o.g.row_shape(), [&](const std::vector<int64_t>& row) {
    int64_t off = 0;
    for (size_t d = 0; d < row.size(); ++d) off += row[d] * o.g.strides[d] * xs[d];
    o.rows.push_back(off);
  });
  return o;
}

// Runs `body` with T, the float type of `x`.
template <class F>
void with_float_type(const Eqn& e, const Array& x, F&& body) {
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T>)
      bad_dtype(e, 0, x.dtype(), "floats");
    else
      body(T{});
  });
}

// r += dot_general(x, y): the product as dot_general computes it, then added into the ref
// (native code adds the kernel's partial sums into the ref instead: equal within rounding).
std::vector<RtValue> eval_dot_accumulate(const EvalContext& cx, const Eqn& e,
                                         std::span<const RtValue> ins) {
  expect_operands(e, ins, 3);
  const RefBufferPtr& ref = ref_in(e, ins, 0);
  const std::vector<RtValue> product = eval_dot_general(cx, e, ins.subspan(1));
  const Array& p = std::get<Array>(product.at(0));
  if (p.type() != ref->type())
    eval_fail(e, fmt::format("the product {} does not fit the ref {}", p.type().str(),
                             Type::ref(ref->type()).str()));
  std::vector<int64_t> every(static_cast<size_t>(p.size()));
  for (size_t k = 0; k < every.size(); ++k) every[k] = static_cast<int64_t>(k);
  add_elements(ref->value(), every, p);
  return {};
}

// The product of x's windows with k, summed in the order dot_general sums the concatenated
// windows (window by window, channel by channel), so both give the same bits.
std::vector<RtValue> eval_im2col_dot(const EvalContext&, const Eqn& e,
                                     std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& x = array_in(e, ins, 0);
  const Array& k = array_in(e, ins, 1);
  const Im2colOffsets at = im2col_offsets(e, x);
  const int64_t channels = at.g.channels(), windows = at.g.windows();
  if (k.dtype() != x.dtype() || k.rank() != 2 || k.shape()[0] != windows * channels)
    eval_fail(e, fmt::format("operand 1 ({}) does not fit {} windows of {} channels of {}",
                             k.type().str(), windows, channels, x.type().str()));
  const int64_t cols = k.shape()[1];
  Shape out_shape = at.g.row_shape();
  out_shape.push_back(cols);
  Array out(ArrayType{x.dtype(), out_shape});
  with_float_type(e, x, [&](auto zero) {
    using T = decltype(zero);
    auto xv = x.values<T>();
    auto kv = k.values<T>();
    auto ov = out.mutable_values<T>();
    int64_t flat = 0;
    for (int64_t row : at.rows)
      for (int64_t o = 0; o < cols; ++o) {
        T acc = T(0);
        for (int64_t t = 0; t < windows; ++t)
          for (int64_t c = 0; c < channels; ++c)
            acc += xv[row + at.windows[t] + c] * kv[(t * channels + c) * cols + o];
        ov[flat++] = acc;
      }
  });
  return {out};
}

// The windows' matrix, transposed, times g: each element sums over the rows in row-major order,
// as dot_general does when it contracts the concatenation's row dims.
std::vector<RtValue> eval_im2col_tdot(const EvalContext&, const Eqn& e,
                                      std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& x = array_in(e, ins, 0);
  const Array& g = array_in(e, ins, 1);
  const Im2colOffsets at = im2col_offsets(e, x);
  const int64_t channels = at.g.channels(), windows = at.g.windows();
  const int64_t rows = static_cast<int64_t>(at.rows.size());
  if (g.dtype() != x.dtype() || g.rank() != at.g.rank() || g.size() % std::max<int64_t>(rows, 1))
    eval_fail(e, fmt::format("operand 1 ({}) does not have the windows' rows of {}", g.type().str(),
                             x.type().str()));
  const int64_t cols = g.shape().back();
  Array out(ArrayType{x.dtype(), {windows * channels, cols}});
  with_float_type(e, x, [&](auto zero) {
    using T = decltype(zero);
    auto xv = x.values<T>();
    auto gv = g.values<T>();
    auto ov = out.mutable_values<T>();
    for (int64_t t = 0; t < windows; ++t)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t o = 0; o < cols; ++o) {
          T acc = T(0);
          for (int64_t r = 0; r < rows; ++r)
            acc += xv[at.rows[r] + at.windows[t] + c] * gv[r * cols + o];
          ov[(t * channels + c) * cols + o] = acc;
        }
  });
  return {out};
}

}  // namespace

void register_reduce_eval_rules(EvalRuleTable& t) {
  t.set(Prim::reduce_sum, &eval_reduce<ReduceKind::sum>);
  t.set(Prim::reduce_max, &eval_reduce<ReduceKind::max>);
  t.set(Prim::reduce_min, &eval_reduce<ReduceKind::min>);
  t.set(Prim::argmax, &eval_argmax);
  t.set(Prim::dot_general, &eval_dot_general);
  t.set(Prim::dot_accumulate, &eval_dot_accumulate);
  t.set(Prim::im2col_dot, &eval_im2col_dot);
  t.set(Prim::im2col_tdot, &eval_im2col_tdot);
}

}  // namespace refjit
