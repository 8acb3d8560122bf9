// jacfwd / jacrev (refjit/jacobian.h): one linearize or vjp of the function, then a scan that
// applies it to each row of an identity matrix.
#include "refjit/jacobian.h"

#include <fmt/format.h>

#include "refjit/autodiff.h"
#include "refjit/ir/error.h"
#include "refjit/loops.h"
#include "refjit/ops.h"

namespace refjit::flat {

namespace {

// The function being differentiated, under the name its jaxprs show.
struct NamedFunction {
  const std::function<Value(const Value&)>& f;
  const std::string& function_name;
  Value operator()(const Value& x) const { return f(x); }
  const std::string& name() const { return function_name; }
};

// The n x n identity matrix of dtype d.
Value identity_matrix(int64_t n, DType d) {
  return convert(eq(iota(DType::i32, {n, n}, 0), iota(DType::i32, {n, n}, 1)), d);
}

Ints concat(const Shape& a, const Shape& b) {
  Ints s(a.begin(), a.end());
  s.insert(s.end(), b.begin(), b.end());
  return s;
}

// [k, rest...] -> [rest..., k]
Value leading_dim_last(const Value& x) {
  Ints perm;
  for (int64_t d = 1; d < x.rank(); ++d) perm.push_back(d);
  perm.push_back(0);
  return transpose(x, perm);
}

// jacfwd: J e_j for each basis vector e_j of x's space, as the columns.
Value by_columns(const NamedFunction& f, const Value& x) {
  auto [y, f_lin] = refjit::linearize(f, x);
  const Shape in = x.shape();
  auto [none, columns] = refjit::scan(
      [&](std::tuple<>, const Value& e) {
        return std::pair{std::tuple<>{}, f_lin(reshape(e, Ints(in.begin(), in.end())))};
      },
      std::tuple<>{}, identity_matrix(x.size(), x.dtype()));
  (void)none;
  // columns: [n, out...] -> [out..., n] -> out + in
  return reshape(leading_dim_last(columns), concat(y.shape(), in));
}

// jacrev: e_i^T J for each basis vector e_i of the output's space, as the rows.
Value by_rows(const NamedFunction& f, const Value& x) {
  auto [y, f_vjp] = refjit::vjp(f, x);
  const Shape out = y.shape();
  auto [none, rows] = refjit::scan(
      [&](std::tuple<>, const Value& e) {
        auto [g] = f_vjp(reshape(e, Ints(out.begin(), out.end())));
        return std::pair{std::tuple<>{}, g.value()};
      },
      std::tuple<>{}, identity_matrix(y.size(), y.dtype()));
  (void)none;
  return reshape(rows, concat(out, x.shape()));  // [m, in...] -> out + in
}

}  // namespace

Value jacobian(const std::function<Value(const Value&)>& f, const std::string& name, const Value& x,
               bool reverse) {
  const char* what = reverse ? "jacrev" : "jacfwd";
  if (!is_float(x.dtype()))
    throw TypeError(
        fmt::format("{}: the argument has dtype {}; only float arguments can be differentiated",
                    what, long_name(x.dtype())));
  const NamedFunction named{f, name};
  return reverse ? by_rows(named, x) : by_columns(named, x);
}

}  // namespace refjit::flat
