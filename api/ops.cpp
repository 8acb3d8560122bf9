// The named ops of refjit/ops.h: each binds one primitive (docs/primitives.md) or a few.
#include "refjit/ops.h"

#include <fmt/format.h>

#include "refjit/ir/error.h"
#include "refjit/trace.h"

namespace refjit {

namespace {

Value bind(Prim p, std::vector<Operand> ins, Params params = {}) {
  return bind_prim1(p, ins, std::move(params));
}

Value unary(Prim p, const Value& x, Params params = {}) { return bind(p, {x}, std::move(params)); }

// A C++ scalar takes the dtype of the array it meets (weak typing); a float scalar meeting
// an int/bool array promotes both to f32, as in JAX.
std::pair<Value, Value> unify(Value a, Value b) {
  if (a.dtype() == b.dtype()) return {a, b};
  auto to = [](const Value& x, DType d) {
    return x.is_weak() ? Value::scalar(d, x.item()) : convert(x, d);
  };
  if (a.is_weak() != b.is_weak()) {
    Value& weak = a.is_weak() ? a : b;
    Value& strong = a.is_weak() ? b : a;
    if (is_float(weak.dtype()) && !is_float(strong.dtype())) {
      strong = convert(strong, DType::f32);
      weak = to(weak, DType::f32);
    } else {
      weak = to(weak, strong.dtype());
    }
  } else if (a.is_weak() && b.is_weak()) {
    // Both C++ scalars: the "wider kind" wins (bool < int < float).
    auto rank_of = [](DType d) { return is_float(d) ? 2 : is_int(d) ? 1 : 0; };
    DType d = rank_of(a.dtype()) >= rank_of(b.dtype()) ? a.dtype() : b.dtype();
    a = to(a, d);
    b = to(b, d);
  }
  return {a, b};
}

Value binary(Prim p, const Value& a, const Value& b) {
  auto [x, y] = unify(a, b);
  return bind(p, {x, y});
}

Ints all_axes(const Value& x) {
  Ints axes;
  for (int i = 0; i < x.rank(); ++i) axes.push_back(i);
  return axes;
}

}  // namespace

Value neg(const Value& x) { return unary(Prim::neg, x); }
Value exp(const Value& x) { return unary(Prim::exp, x); }
Value log(const Value& x) { return unary(Prim::log, x); }
Value log1p(const Value& x) { return unary(Prim::log1p, x); }
Value expm1(const Value& x) { return unary(Prim::expm1, x); }
Value sin(const Value& x) { return unary(Prim::sin, x); }
Value cos(const Value& x) { return unary(Prim::cos, x); }
Value tan(const Value& x) { return unary(Prim::tan, x); }
Value tanh(const Value& x) { return unary(Prim::tanh, x); }
Value logistic(const Value& x) { return unary(Prim::logistic, x); }
Value sqrt(const Value& x) { return unary(Prim::sqrt, x); }
Value rsqrt(const Value& x) { return unary(Prim::rsqrt, x); }
Value abs(const Value& x) { return unary(Prim::abs, x); }
Value sign(const Value& x) { return unary(Prim::sign, x); }
Value floor(const Value& x) { return unary(Prim::floor, x); }
Value ceil(const Value& x) { return unary(Prim::ceil, x); }
Value round(const Value& x, int rounding_method) {
  return unary(Prim::round, x, {{"rounding_method", int64_t{rounding_method}}});
}
Value logical_not(const Value& x) { return unary(Prim::not_, x); }
Value integer_pow(const Value& x, int64_t y) { return unary(Prim::integer_pow, x, {{"y", y}}); }
Value convert(const Value& x, DType new_dtype) {
  return unary(Prim::convert_element_type, x, {{"new_dtype", new_dtype}, {"weak_type", false}});
}
Value stop_gradient(const Value& x) { return unary(Prim::stop_gradient, x); }
Value copy(const Value& x) { return unary(Prim::copy, x); }
Value real(const Value& x) { return unary(Prim::real, x); }
Value imag(const Value& x) { return unary(Prim::imag, x); }
Value conj(const Value& x) { return unary(Prim::conj, x, {{"input_dtype", x.dtype()}}); }
Value complex(const Value& re, const Value& im) { return bind(Prim::complex, {re, im}); }

Value add(const Value& a, const Value& b) { return binary(Prim::add, a, b); }
Value add_any(const Value& a, const Value& b) { return binary(Prim::add_any, a, b); }
Value sub(const Value& a, const Value& b) { return binary(Prim::sub, a, b); }
Value mul(const Value& a, const Value& b) { return binary(Prim::mul, a, b); }
Value div(const Value& a, const Value& b) { return binary(Prim::div, a, b); }
Value max(const Value& a, const Value& b) { return binary(Prim::max, a, b); }
Value min(const Value& a, const Value& b) { return binary(Prim::min, a, b); }
Value pow(const Value& a, const Value& b) { return binary(Prim::pow, a, b); }
Value eq(const Value& a, const Value& b) { return binary(Prim::eq, a, b); }
Value ne(const Value& a, const Value& b) { return binary(Prim::ne, a, b); }
Value lt(const Value& a, const Value& b) { return binary(Prim::lt, a, b); }
Value le(const Value& a, const Value& b) { return binary(Prim::le, a, b); }
Value gt(const Value& a, const Value& b) { return binary(Prim::gt, a, b); }
Value ge(const Value& a, const Value& b) { return binary(Prim::ge, a, b); }
Value logical_and(const Value& a, const Value& b) { return binary(Prim::and_, a, b); }
Value logical_or(const Value& a, const Value& b) { return binary(Prim::or_, a, b); }

Value select_n(const Value& pred, const std::vector<Value>& cases) {
  if (cases.empty()) throw TypeError("select_n needs at least one case");
  // C++ scalar cases take the dtype of the first array case; scalar cases are broadcast to
  // the shape of the first non-scalar case (numpy's where(p, x, 0)).
  DType d = cases[0].dtype();
  for (const Value& c : cases)
    if (!c.is_weak()) {
      d = c.dtype();
      break;
    }
  Shape shape = pred.shape();
  for (const Value& c : cases)
    if (c.rank() > 0) {
      shape = c.shape();
      break;
    }
  std::vector<Operand> ins{pred};
  for (const Value& c : cases) {
    Value x = c.is_weak() && c.dtype() != d ? Value::scalar(d, c.item()) : c;
    if (x.rank() == 0 && !shape.empty()) x = broadcast_in_dim(x, shape, {});
    ins.push_back(x);
  }
  return bind(Prim::select_n, std::move(ins));
}

Value where(const Value& pred, const Value& on_true, const Value& on_false) {
  return select_n(pred, {on_false, on_true});
}

Value broadcast_in_dim(const Value& x, const Ints& shape, const Ints& broadcast_dimensions) {
  return unary(Prim::broadcast_in_dim, x,
               {{"broadcast_dimensions", broadcast_dimensions},
                {"shape", shape},
                {"sharding", NoneParam{}}});
}

Value broadcast_to(const Value& x, const Ints& shape) {
  if (x.shape() == shape) return x;
  if (static_cast<size_t>(x.rank()) > shape.size())
    throw TypeError(fmt::format("cannot broadcast {} to the lower-rank shape ({})", x.type().str(),
                                shape_text(shape)));
  Ints dims;
  int64_t offset = static_cast<int64_t>(shape.size()) - x.rank();
  for (int i = 0; i < x.rank(); ++i) dims.push_back(offset + i);
  return broadcast_in_dim(x, shape, dims);
}

Value reshape(const Value& x, const Ints& new_sizes) {
  return unary(Prim::reshape, x, {{"dimensions", NoneParam{}}, {"new_sizes", new_sizes}});
}
Value squeeze(const Value& x, const Ints& dimensions) {
  return unary(Prim::squeeze, x, {{"dimensions", dimensions}});
}
Value expand_dims(const Value& x, const Ints& dimensions) {
  return unary(Prim::expand_dims, x, {{"dimensions", dimensions}});
}
Value transpose(const Value& x, const Ints& permutation) {
  return unary(Prim::transpose, x, {{"permutation", permutation}});
}
Value concatenate(const std::vector<Value>& xs, int64_t dimension) {
  std::vector<Operand> ins(xs.begin(), xs.end());
  return bind(Prim::concatenate, std::move(ins), {{"dimension", dimension}});
}
Value pad(const Value& x, const Value& padding_value, const IntListList& padding_config) {
  auto [a, v] = unify(x, padding_value);
  return bind(Prim::pad, {a, v}, {{"padding_config", padding_config}});
}
Value slice(const Value& x, const Ints& start_indices, const Ints& limit_indices,
            const Ints& strides) {
  Params p{{"limit_indices", limit_indices}, {"start_indices", start_indices}};
  if (strides.empty())
    p.set("strides", NoneParam{});
  else
    p.set("strides", strides);
  return unary(Prim::slice, x, std::move(p));
}
Value dynamic_slice(const Value& x, const std::vector<Value>& start_indices,
                    const Ints& slice_sizes) {
  std::vector<Operand> ins{x};
  for (const Value& i : start_indices)
    ins.push_back(i.is_weak() ? Value::scalar(DType::i32, i.item()) : i);
  return bind(Prim::dynamic_slice, std::move(ins), {{"slice_sizes", slice_sizes}});
}
Value dynamic_update_slice(const Value& x, const Value& update,
                           const std::vector<Value>& start_indices) {
  std::vector<Operand> ins{x, update};
  for (const Value& i : start_indices)
    ins.push_back(i.is_weak() ? Value::scalar(DType::i32, i.item()) : i);
  return bind(Prim::dynamic_update_slice, std::move(ins));
}
Value iota(DType dtype, const Ints& shape, int64_t dimension) {
  return bind(
      Prim::iota, {},
      {{"dimension", dimension}, {"dtype", dtype}, {"shape", shape}, {"sharding", NoneParam{}}});
}
namespace {
Params indexing_params(int64_t axis, int64_t dims) {
  Params params{{"axis", axis}};
  if (dims != 1) params.set("dims", dims);
  return params;
}
}  // namespace

Value gather(const Value& x, const Value& indices, int64_t axis, int64_t dims) {
  return bind(Prim::gather, {x, indices}, indexing_params(axis, dims));
}
Value scatter(const Value& x, const Value& indices, const Value& updates, int64_t axis,
              bool unique_indices, int64_t dims) {
  Params params = indexing_params(axis, dims);
  if (unique_indices) params.set("unique_indices", true);
  return bind(Prim::scatter, {x, indices, updates}, std::move(params));
}
Value scatter_add(const Value& x, const Value& indices, const Value& updates, int64_t axis,
                  int64_t dims) {
  return bind(Prim::scatter_add, {x, indices, updates}, indexing_params(axis, dims));
}

Value reduce_sum(const Value& x, const Ints& axes) {
  return unary(Prim::reduce_sum, x, {{"axes", axes}});
}
Value reduce_sum(const Value& x) { return reduce_sum(x, all_axes(x)); }
Value reduce_max(const Value& x, const Ints& axes) {
  return unary(Prim::reduce_max, x, {{"axes", axes}});
}
Value reduce_max(const Value& x) { return reduce_max(x, all_axes(x)); }
Value reduce_min(const Value& x, const Ints& axes) {
  return unary(Prim::reduce_min, x, {{"axes", axes}});
}
Value reduce_min(const Value& x) { return reduce_min(x, all_axes(x)); }
Value argmax(const Value& x, int64_t axis, DType index_dtype) {
  return unary(Prim::argmax, x, {{"axes", Ints{axis}}, {"index_dtype", index_dtype}});
}
Value dot_general(const Value& lhs, const Value& rhs, const DotDims& dimension_numbers) {
  return bind(Prim::dot_general, {lhs, rhs},
              {{"dimension_numbers", dimension_numbers},
               {"precision", NoneParam{}},
               {"preferred_element_type", NoneParam{}}});
}
Eigh eigh(const Value& a, bool lower) {
  const Operand in[] = {a};
  std::vector<Operand> out = bind_prim(Prim::eigh, in,
                                       {{"algorithm", NoneParam{}},
                                        {"lower", lower},
                                        {"sort_eigenvalues", true},
                                        {"subset_by_index", NoneParam{}}});
  return {std::get<Value>(out[0]), std::get<Value>(out[1])};
}
namespace {
std::vector<Operand> bind_svd(const Value& a, bool full_matrices, bool compute_uv) {
  const Operand in[] = {a};
  return bind_prim(Prim::svd, in,
                   {{"algorithm", NoneParam{}},
                    {"compute_uv", compute_uv},
                    {"full_matrices", full_matrices},
                    {"subset_by_index", NoneParam{}}});
}
}  // namespace
Svd svd(const Value& a, bool full_matrices) {
  std::vector<Operand> out = bind_svd(a, full_matrices, true);
  return {std::get<Value>(out[1]), std::get<Value>(out[0]), std::get<Value>(out[2])};
}
Value svd_values(const Value& a) { return std::get<Value>(bind_svd(a, true, false)[0]); }
Eig eig(const Value& a, bool left, bool right, bool eigenvector_derivatives) {
  const Operand in[] = {a};
  std::vector<Operand> out = bind_prim(Prim::eig, in,
                                       {{"compute_left_eigenvectors", left},
                                        {"compute_right_eigenvectors", right},
                                        {"enable_eigvec_derivs", eigenvector_derivatives},
                                        {"implementation", NoneParam{}}});
  Eig r{std::get<Value>(out[0]), Value(), Value()};
  if (left) r.left = std::get<Value>(out[1]);
  if (right) r.right = std::get<Value>(out.back());
  return r;
}
Value cholesky(const Value& a) { return bind(Prim::cholesky, {a}, {}); }
Value triangular_solve(const Value& a, const Value& b, const TriangularSolveOptions& options) {
  return bind(Prim::triangular_solve, {a, b},
              {{"conjugate_a", false},
               {"left_side", options.left_side},
               {"lower", options.lower},
               {"transpose_a", options.transpose_a},
               {"unit_diagonal", options.unit_diagonal}});
}
Value tridiagonal_solve(const Value& dl, const Value& d, const Value& du, const Value& b) {
  return bind(Prim::tridiagonal_solve, {dl, d, du, b}, {{"perturb_singular", false}});
}
Lu lu(const Value& a) {
  const Operand in[] = {a};
  std::vector<Operand> out = bind_prim(Prim::lu, in, {});
  return {std::get<Value>(out[0]), std::get<Value>(out[1]), std::get<Value>(out[2])};
}
Qr qr(const Value& a, bool full_matrices) {
  const Operand in[] = {a};
  std::vector<Operand> out = bind_prim(
      Prim::qr, in,
      {{"full_matrices", full_matrices}, {"pivoting", false}, {"use_magma", NoneParam{}}});
  return {std::get<Value>(out[0]), std::get<Value>(out[1])};
}
Value matmul(const Value& a, const Value& b) {
  if (a.rank() < 1 || a.rank() > 2 || b.rank() < 1 || b.rank() > 2)
    throw TypeError(fmt::format("matmul takes rank-1 or rank-2 operands, got {} and {}",
                                a.type().str(), b.type().str()));
  DotDims dims;
  dims.lhs_contract = {a.rank() - 1};
  dims.rhs_contract = {0};
  return dot_general(a, b, dims);
}
Value dot(const Value& a, const Value& b) { return matmul(a, b); }

Value full(const Ints& shape, const Value& fill, DType dtype) {
  Value f = fill.is_weak() && fill.is_concrete() ? Value::scalar(dtype, fill.item())
            : fill.dtype() == dtype              ? fill
                                                 : convert(fill, dtype);
  if (f.rank() != 0)
    throw TypeError(fmt::format("full: the fill value must be a scalar, got {}", f.type().str()));
  if (shape.empty()) return f;
  if (!is_tracing() && f.is_concrete())
    return Value(Array::full(ArrayType{dtype, shape}, f.item()));
  return broadcast_in_dim(f, shape, {});
}
Value zeros(const Ints& shape, DType dtype) { return full(shape, 0, dtype); }
Value ones(const Ints& shape, DType dtype) { return full(shape, 1, dtype); }
Value zeros_like(const Value& x) { return zeros(x.shape(), x.dtype()); }
Value ones_like(const Value& x) { return ones(x.shape(), x.dtype()); }
Value arange(int64_t n, DType dtype) { return iota(dtype, {n}, 0); }

}  // namespace refjit
