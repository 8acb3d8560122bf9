// Type rules of the shape and data-movement primitives (docs/primitives.md "Shapes and data
// movement").
#include <algorithm>

#include "ir/type_rule_support.h"
#include "ir/type_rules.h"
#include "ir/window_params.h"

namespace refjit {

namespace {

using type_rules::Checker;
using type_rules::DTypeClass;
using type_rules::ints_text;
using type_rules::one;

void check_sizes_nonnegative(const Checker& c, const IntList& sizes, std::string_view what) {
  for (int64_t s : sizes)
    if (s < 0) c.fail("{} {} has a negative size {}", what, ints_text(sizes), s);
}

std::vector<Type> broadcast_in_dim_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::broadcast_in_dim, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array(0);
  const IntList& shape = c.ints_param("shape");
  const IntList& bd = c.ints_param("broadcast_dimensions");
  check_sizes_nonnegative(c, shape, "shape");
  if (static_cast<int>(bd.size()) != x.rank())
    c.fail(
        "broadcast_dimensions {} has {} entries but operand 0 ({}) has rank {}; give one "
        "output dim per operand dim",
        ints_text(bd), bd.size(), x.str(), x.rank());
  for (size_t i = 0; i < bd.size(); ++i) {
    c.check_axis(bd[i], static_cast<int>(shape.size()), "broadcast_dimensions entry");
    if (i > 0 && bd[i] <= bd[i - 1])
      c.fail("broadcast_dimensions {} must be strictly increasing", ints_text(bd));
    if (x.shape[i] != 1 && x.shape[i] != shape[bd[i]])
      c.fail(
          "operand 0 ({}) dim {} has size {} but output dim {} has size {}; it must be equal "
          "or 1",
          x.str(), i, x.shape[i], bd[i], shape[bd[i]]);
  }
  return one(ArrayType{x.dtype, shape});
}

std::vector<Type> reshape_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::reshape, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array(0);
  const IntList& sizes = c.ints_param("new_sizes");
  check_sizes_nonnegative(c, sizes, "new_sizes");
  if (const IntList* dims = c.optional_param<IntList>("dimensions")) {
    for (size_t i = 0; i < dims->size(); ++i)
      if ((*dims)[i] != static_cast<int64_t>(i))
        c.fail(
            "dimensions={} is not supported; transpose first, then reshape with "
            "dimensions=None",
            ints_text(*dims));
  }
  if (num_elements(sizes) != x.num_elements())
    c.fail("operand 0 ({}) has {} elements but new_sizes {} has {}", x.str(), x.num_elements(),
           ints_text(sizes), num_elements(sizes));
  return one(ArrayType{x.dtype, sizes});
}

std::vector<Type> squeeze_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::squeeze, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array(0);
  const IntList& dims = c.ints_param("dimensions");
  c.check_axes(dims, x.rank(), "dimensions entry");
  Shape out;
  for (int i = 0; i < x.rank(); ++i) {
    bool dropped = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (dropped && x.shape[i] != 1)
      c.fail("cannot squeeze dim {} of operand 0 ({}): its size is {}, not 1", i, x.str(),
             x.shape[i]);
    if (!dropped) out.push_back(x.shape[i]);
  }
  return one(ArrayType{x.dtype, std::move(out)});
}

std::vector<Type> expand_dims_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::expand_dims, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array(0);
  const IntList& dims = c.ints_param("dimensions");
  int out_rank = x.rank() + static_cast<int>(dims.size());
  c.check_axes(dims, out_rank, "dimensions entry (an output position)");
  Shape out;
  size_t next = 0;
  for (int i = 0; i < out_rank; ++i) {
    if (std::find(dims.begin(), dims.end(), i) != dims.end())
      out.push_back(1);
    else
      out.push_back(x.shape[next++]);
  }
  return one(ArrayType{x.dtype, std::move(out)});
}

std::vector<Type> transpose_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::transpose, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array(0);
  const IntList& perm = c.ints_param("permutation");
  if (static_cast<int>(perm.size()) != x.rank())
    c.fail("permutation {} has {} entries but operand 0 ({}) has rank {}", ints_text(perm),
           perm.size(), x.str(), x.rank());
  c.check_axes(perm, x.rank(), "permutation entry");
  Shape out;
  for (int64_t p : perm) out.push_back(x.shape[p]);
  return one(ArrayType{x.dtype, std::move(out)});
}

std::vector<Type> concatenate_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::concatenate, in, params);
  c.expect_at_least(1);
  const ArrayType& first = c.array(0);
  int64_t dim = c.int_param("dimension");
  if (first.rank() == 0) c.fail("operand 0 is a scalar ({}); only arrays concatenate", first.str());
  c.check_axis(dim, first.rank(), "dimension");
  Shape out = first.shape;
  for (size_t i = 1; i < in.size(); ++i) {
    const ArrayType& xi = c.array(i);
    bool same = xi.dtype == first.dtype && xi.rank() == first.rank();
    for (int d = 0; same && d < xi.rank(); ++d)
      if (d != dim && xi.shape[d] != first.shape[d]) same = false;
    if (!same)
      c.fail(
          "operand {} has type {} but operand 0 has type {}; operands must have the same "
          "dtype and shape except along dimension {}",
          i, xi.str(), first.str(), dim);
    out[dim] += xi.shape[dim];
  }
  return one(ArrayType{first.dtype, std::move(out)});
}

std::vector<Type> pad_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::pad, in, params);
  c.expect_count(2);
  const ArrayType& x = c.array(0);
  const ArrayType& v = c.array(1);
  if (v.dtype != x.dtype || !v.is_scalar())
    c.fail("operand 1 (the padding value) has type {} but must be a scalar {}[]", v.str(),
           short_name(x.dtype));
  const auto& config = c.param<IntListList>("padding_config");
  if (static_cast<int>(config.size()) != x.rank())
    c.fail(
        "padding_config has {} entries but operand 0 ({}) has rank {}; give one (lo, hi, "
        "interior) per dim",
        config.size(), x.str(), x.rank());
  Shape out;
  for (int d = 0; d < x.rank(); ++d) {
    const auto& e = config[d];
    if (e.size() != 3)
      c.fail("padding_config entry {} has {} numbers; it must be (lo, hi, interior)", d, e.size());
    if (e[2] < 0) c.fail("padding_config entry {} has a negative interior padding {}", d, e[2]);
    int64_t s = x.shape[d];
    int64_t size = e[0] + e[1] + s + std::max<int64_t>(s - 1, 0) * e[2];
    if (size < 0)
      c.fail("padding_config entry {} ({}, {}, {}) gives dim {} a negative size {}", d, e[0], e[1],
             e[2], d, size);
    out.push_back(size);
  }
  return one(ArrayType{x.dtype, std::move(out)});
}

// The shape of the static window (start, limit, strides) of operand `k` (type x); `what`
// prefixes the messages ("" for a slice, "window k: " for concat_windows).
Shape window_shape(const Checker& c, const ArrayType& x, const IntList& start, const IntList& limit,
                   const IntList* strides, std::string_view what) {
  auto check_len = [&](const IntList& l, std::string_view name) {
    if (static_cast<int>(l.size()) != x.rank())
      c.fail("{}{} {} has {} entries but its operand ({}) has rank {}", what, name, ints_text(l),
             l.size(), x.str(), x.rank());
  };
  check_len(start, "start_indices");
  check_len(limit, "limit_indices");
  if (strides) check_len(*strides, "strides");
  Shape out;
  for (int d = 0; d < x.rank(); ++d) {
    int64_t stride = strides ? (*strides)[d] : 1;
    if (stride < 1) c.fail("{}strides entry {} is {}; strides must be >= 1", what, d, stride);
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > x.shape[d])
      c.fail(
          "{}dim {}: start {} and limit {} must satisfy 0 <= start <= limit <= {} (the size "
          "of dim {} of {})",
          what, d, start[d], limit[d], x.shape[d], d, x.str());
    out.push_back((limit[d] - start[d] + stride - 1) / stride);
  }
  return out;
}

std::vector<Type> slice_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::slice, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array(0);
  Shape out = window_shape(c, x, c.ints_param("start_indices"), c.ints_param("limit_indices"),
                           c.optional_param<IntList>("strides"), "");
  return one(ArrayType{x.dtype, std::move(out)});
}

// Each operand's window, then concatenate's rule on the windows.
std::vector<Type> concat_windows_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::concat_windows, in, params);
  c.expect_at_least(1);
  const auto& starts = c.param<IntListList>("start_indices");
  const auto& limits = c.param<IntListList>("limit_indices");
  const auto& strides = c.param<IntListList>("strides");
  for (const auto* lists : {&starts, &limits, &strides})
    if (lists->size() != in.size())
      c.fail("start_indices, limit_indices and strides need one entry per operand ({}), got {}",
             in.size(), lists->size());
  const int64_t dim = c.int_param("dimension");
  std::vector<Shape> windows;
  for (size_t k = 0; k < in.size(); ++k)
    windows.push_back(window_shape(c, c.array(k), starts[k], limits[k], &strides[k],
                                   fmt::format("window {}: ", k)));
  const ArrayType& first = c.array(0);
  if (first.rank() == 0) c.fail("operand 0 is a scalar ({}); only arrays concatenate", first.str());
  c.check_axis(dim, first.rank(), "dimension");
  Shape out = windows[0];
  for (size_t k = 1; k < in.size(); ++k) {
    Shape a = windows[k], b = windows[0];
    if (c.array(k).dtype != first.dtype || a.size() != b.size() || (a[dim] = b[dim] = 0, a != b))
      c.fail(
          "window {} ({}, shape {}) does not match window 0 ({}, shape {}); windows must have "
          "the same dtype and shape except along dimension {}",
          k, short_name(c.array(k).dtype), ints_text(windows[k]), short_name(first.dtype),
          ints_text(windows[0]), dim);
    out[dim] += windows[k][dim];
  }
  return one(ArrayType{first.dtype, std::move(out)});
}

std::vector<Type> dynamic_slice_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::dynamic_slice, in, params);
  c.expect_at_least(1);
  const ArrayType& x = c.array(0);
  if (in.size() != static_cast<size_t>(x.rank()) + 1)
    c.fail("operand 0 ({}) has rank {} so {} start indices are needed, got {}", x.str(), x.rank(),
           x.rank(), in.size() - 1);
  for (size_t i = 1; i < in.size(); ++i) c.int_scalar(i, "a start index");
  const IntList& sizes = c.ints_param("slice_sizes");
  if (static_cast<int>(sizes.size()) != x.rank())
    c.fail("slice_sizes {} has {} entries but operand 0 ({}) has rank {}", ints_text(sizes),
           sizes.size(), x.str(), x.rank());
  for (int d = 0; d < x.rank(); ++d)
    if (sizes[d] < 0 || sizes[d] > x.shape[d])
      c.fail("slice_sizes entry {} is {} but must be in [0, {}] (dim {} of {})", d, sizes[d],
             x.shape[d], d, x.str());
  return one(ArrayType{x.dtype, sizes});
}

std::vector<Type> dynamic_update_slice_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::dynamic_update_slice, in, params);
  c.expect_at_least(2);
  const ArrayType& x = c.array(0);
  const ArrayType& u = c.array(1);
  if (in.size() != static_cast<size_t>(x.rank()) + 2)
    c.fail("operand 0 ({}) has rank {} so {} start indices are needed, got {}", x.str(), x.rank(),
           x.rank(), in.size() - 2);
  for (size_t i = 2; i < in.size(); ++i) c.int_scalar(i, "a start index");
  bool fits = u.dtype == x.dtype && u.rank() == x.rank();
  for (int d = 0; fits && d < x.rank(); ++d) fits = u.shape[d] <= x.shape[d];
  if (!fits)
    c.fail(
        "operand 1 (the update) has type {} but operand 0 has type {}; the update must have "
        "the same dtype and rank and fit inside",
        u.str(), x.str());
  return one(x);
}

// The windows (each as dynamic_slice takes it from its source), laid side by side along
// `dimension`, must fit in operand 0; the result is operand 0's type.
std::vector<Type> move_windows_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::move_windows, in, params);
  c.expect_at_least(1);
  const ArrayType& x = c.array(0);
  if (x.rank() == 0) c.fail("operand 0 is a scalar ({}); windows are moved into arrays", x.str());
  const auto& sizes = c.param<IntListList>("slice_sizes");
  if (sizes.empty()) c.fail("slice_sizes lists no window");
  const size_t rank = static_cast<size_t>(x.rank());
  const size_t want = MoveWindowsParams::operand_count(rank, sizes.size());
  if (in.size() != want)
    c.fail(
        "operand 0 ({}) has rank {} and slice_sizes lists {} windows, so {} operands are needed "
        "(the array, {} start indices, then each window's source and {} start indices); got {}",
        x.str(), rank, sizes.size(), want, rank, rank, in.size());
  const int64_t dim = c.int_param("dimension");
  c.check_axis(dim, x.rank(), "dimension");
  for (size_t i = 1; i <= rank; ++i) c.int_scalar(i, "a start index");
  Shape update;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const size_t s = MoveWindowsParams::operand_count(rank, k);
    const ArrayType& src = c.array(s);
    if (src.dtype != x.dtype || src.rank() != x.rank())
      c.fail(
          "window {}: its source (operand {}, {}) must have the dtype and rank of operand 0 ({})",
          k, s, src.str(), x.str());
    for (size_t i = 1; i <= rank; ++i) c.int_scalar(s + i, "a start index");
    const IntList& w = sizes[k];
    if (w.size() != rank)
      c.fail("window {}: slice_sizes entry {} has {} entries for rank {}", k, ints_text(w),
             w.size(), rank);
    for (size_t d = 0; d < rank; ++d)
      if (w[d] < 0 || w[d] > src.shape[d])
        c.fail("window {}: size {} of dim {} must be in [0, {}] (dim {} of its source {})", k, w[d],
               d, src.shape[d], d, src.str());
    if (k == 0) {
      update = w;
      continue;
    }
    for (size_t d = 0; d < rank; ++d)
      if (static_cast<int64_t>(d) != dim && w[d] != update[d])
        c.fail(
            "window {} (sizes {}) does not match window 0 (sizes {}); windows must have the same "
            "sizes except along dimension {}",
            k, ints_text(w), ints_text(sizes[0]), dim);
    update[dim] += w[dim];
  }
  for (size_t d = 0; d < rank; ++d)
    if (update[d] > x.shape[d])
      c.fail("the windows together (shape {}) do not fit in operand 0 ({})", ints_text(update),
             x.str());
  return one(x);
}

std::vector<Type> iota_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::iota, in, params);
  c.expect_count(0);
  DType dtype = c.dtype_param("dtype");
  if (!type_rules::dtype_in(dtype, DTypeClass::number))
    c.fail("dtype {} is not numeric; iota needs {}", long_name(dtype),
           type_rules::describe(DTypeClass::number));
  const IntList& shape = c.ints_param("shape");
  check_sizes_nonnegative(c, shape, "shape");
  c.check_axis(c.int_param("dimension"), static_cast<int>(shape.size()), "dimension");
  return one(ArrayType{dtype, shape});
}

// The dims gather and the scatters index: `axis` and the `dims` - 1 after it.
struct IndexedDims {
  int64_t axis;
  int64_t count;
  // s[:axis] + k + s[axis+count:], the shape gather produces and a scatter's update has.
  Shape gathered(const ArrayType& x, const ArrayType& idx) const {
    Shape out(x.shape.begin(), x.shape.begin() + axis);
    out.insert(out.end(), idx.shape.begin(), idx.shape.end());
    out.insert(out.end(), x.shape.begin() + axis + count, x.shape.end());
    return out;
  }
  std::string str() const {
    return count == 1 ? fmt::format("axis {}", axis)
                      : fmt::format("dims {}..{}", axis, axis + count - 1);
  }
};

// Checks x's indexed dims and the indices (operand 1).
std::pair<IndexedDims, const ArrayType*> indexing(const Checker& c, const ArrayType& x) {
  const IndexedDims d{c.int_param("axis"), indexed_dims(c.params())};
  c.check_axis(d.axis, x.rank(), "axis");
  if (d.count < 1 || d.axis + d.count > x.rank())
    c.fail("dims={} from axis {} does not fit operand 0 ({})", d.count, d.axis, x.str());
  const ArrayType& idx = c.array(1);
  if (!is_int(idx.dtype))
    c.fail("operand 1 (the indices) has type {} but must have an integer dtype", idx.str());
  return {d, &idx};
}

std::vector<Type> gather_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::gather, in, params);
  c.expect_count(2);
  const ArrayType& x = c.array(0);
  const auto [d, idx] = indexing(c, x);
  int64_t n = 1;
  for (int64_t k = 0; k < d.count; ++k) n *= x.shape[d.axis + k];
  if (n == 0 && idx->num_elements() > 0)
    c.fail("operand 0 ({}) has size 0 along {}; there is nothing to gather", x.str(), d.str());
  return one(ArrayType{x.dtype, d.gathered(x, *idx)});
}

template <Prim P>
std::vector<Type> scatter_rule(std::span<const Type> in, const Params& params) {
  Checker c(P, in, params);
  c.expect_count(3);
  // scatter-add and scatter-mul combine complex numbers too; scatter-min/max real ones.
  const ArrayType& x =
      c.array_of(0, P == Prim::scatter                                 ? DTypeClass::any
                    : P == Prim::scatter_add || P == Prim::scatter_mul ? DTypeClass::arith
                                                                       : DTypeClass::number);
  const auto [d, idx] = indexing(c, x);
  ArrayType expected{x.dtype, d.gathered(x, *idx)};
  const ArrayType& u = c.array(2);
  if (u != expected)
    c.fail(
        "operand 2 (the updates) has type {} but {} is needed for operand 0 {} indexed by {} "
        "on {}",
        u.str(), expected.str(), x.str(), idx->str(), d.str());
  return one(x);
}

// gather_run x start: x with `length` entries along `axis`, from the run of indices at start.
std::vector<Type> gather_run_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::gather_run, in, params);
  c.expect_count(2);
  const ArrayType& x = c.array(0);
  const int64_t axis = c.int_param("axis");
  c.check_axis(axis, x.rank(), "axis");
  c.int_scalar(1, "the run's first index");
  const int64_t length = c.int_param("length");
  if (length < 0) c.fail("length {} is negative", length);
  Shape shape = x.shape;
  shape[static_cast<size_t>(axis)] = length;
  const ArrayType out{x.dtype, shape};
  if (x.shape[axis] == 0 && out.num_elements() > 0)
    c.fail("operand 0 ({}) has size 0 along axis {}; there is nothing to gather", x.str(), axis);
  return one(out);
}

// scatter_run x start u: x, u's entries along `axis` combined in at the run of indices at start.
std::vector<Type> scatter_run_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::scatter_run, in, params);
  c.expect_count(3);
  const std::string& combine = c.param<std::string>("combine");
  const std::optional<Prim> combines = scatter_of_combine(combine);
  if (!combines) c.fail("combine '{}' is none of set, add, mul, min, max", combine);
  const Prim how = *combines;
  const ArrayType& x =
      c.array_of(0, how == Prim::scatter                                   ? DTypeClass::any
                    : how == Prim::scatter_add || how == Prim::scatter_mul ? DTypeClass::arith
                                                                           : DTypeClass::number);
  const int64_t axis = c.int_param("axis");
  c.check_axis(axis, x.rank(), "axis");
  c.int_scalar(1, "the run's first index");
  const ArrayType& u = c.array(2);
  bool fits = u.dtype == x.dtype && u.rank() == x.rank();
  for (int d = 0; fits && d < x.rank(); ++d) fits = d == axis || u.shape[d] == x.shape[d];
  if (!fits)
    c.fail(
        "operand 2 (the updates) has type {} but must be operand 0 ({}) with any size along "
        "axis {}",
        u.str(), x.str(), axis);
  return one(x);
}

// sort: operands of one shape, sorted together along `dimension` by the first num_keys.
std::vector<Type> sort_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::sort, in, params);
  c.expect_at_least(1);
  const ArrayType& x = c.array(0);
  c.check_axis(c.int_param("dimension"), x.rank(), "dimension");
  int64_t num_keys = c.int_param("num_keys");
  if (num_keys < 1 || num_keys > static_cast<int64_t>(in.size()))
    c.fail("num_keys={} must be between 1 and the number of operands, {}", num_keys, in.size());
  std::vector<Type> out;
  for (size_t k = 0; k < in.size(); ++k) {
    const ArrayType& a = c.array(k);
    if (a.shape != x.shape)
      c.fail("operand {} has type {} but operand 0 has type {}; sorted operands share a shape", k,
             a.str(), x.str());
    out.push_back(a);
  }
  return out;
}

}  // namespace

void register_shape_type_rules(TypeRuleTable& t) {
  auto set = [&t](Prim p, TypeRule r) { t[static_cast<int>(p)] = r; };
  set(Prim::broadcast_in_dim, broadcast_in_dim_rule);
  set(Prim::reshape, reshape_rule);
  set(Prim::squeeze, squeeze_rule);
  set(Prim::expand_dims, expand_dims_rule);
  set(Prim::transpose, transpose_rule);
  set(Prim::concatenate, concatenate_rule);
  set(Prim::concat_windows, concat_windows_rule);
  set(Prim::pad, pad_rule);
  set(Prim::slice, slice_rule);
  set(Prim::dynamic_slice, dynamic_slice_rule);
  set(Prim::dynamic_update_slice, dynamic_update_slice_rule);
  set(Prim::move_windows, move_windows_rule);
  set(Prim::iota, iota_rule);
  set(Prim::gather, gather_rule);
  set(Prim::gather_run, gather_run_rule);
  set(Prim::sort, sort_rule);
  set(Prim::scatter, scatter_rule<Prim::scatter>);
  set(Prim::scatter_add, scatter_rule<Prim::scatter_add>);
  set(Prim::scatter_mul, scatter_rule<Prim::scatter_mul>);
  set(Prim::scatter_min, scatter_rule<Prim::scatter_min>);
  set(Prim::scatter_max, scatter_rule<Prim::scatter_max>);
  set(Prim::scatter_run, scatter_run_rule);
}

}  // namespace refjit
