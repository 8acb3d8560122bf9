// JAX's conv_general_dilated, read as refjit's pad, strided slices, one concatenate and one
// dot_general (rewrites.h).
//
// The rewrite is im2col: the input is brought to [N, spatial..., C] and padded (lhs dilation
// is interior padding), each kernel position takes a strided slice of it, the slices are laid
// side by side along the feature axis, and one dot_general against the kernel, flattened to
// [positions * I, O], computes every output at once. Feature groups and batch groups become a
// batch dim of that dot_general. Every step is a primitive with JVP and transpose rules, so
// the derivatives of a convolution (and JAX's printed gradients, which are convolutions
// themselves) need nothing more.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "import/jax/rewrite_support.h"

namespace refjit::text {

namespace {

constexpr std::string_view kConv = "conv_general_dilated";

// One spatial dim's geometry.
struct Window {
  int64_t in = 0, kernel = 0, stride = 1, lo = 0, hi = 0, lhs_dilation = 1, rhs_dilation = 1;
  int64_t padded() const { return (in > 0 ? (in - 1) * lhs_dilation + 1 : 0) + lo + hi; }
  int64_t reach() const { return (kernel - 1) * rhs_dilation + 1; }
  int64_t out() const {
    if (kernel == 0 || padded() < reach()) return 0;
    return (padded() - reach()) / stride + 1;
  }
};

void check_spec(const IntList& spec, std::string_view name, int64_t rank) {
  if (static_cast<int64_t>(spec.size()) != rank)
    fail(kConv, fmt::format("{} ({}) has {} entries but the operands have rank {}", name,
                            fmt::join(spec, ", "), spec.size(), rank));
  std::vector<bool> seen(static_cast<size_t>(rank));
  for (int64_t d : spec) {
    if (d < 0 || d >= rank || seen[static_cast<size_t>(d)])
      fail(kConv, fmt::format("{} ({}) is not a permutation of the dims 0..{}", name,
                              fmt::join(spec, ", "), rank - 1));
    seen[static_cast<size_t>(d)] = true;
  }
}

const IntList& per_spatial(const Params& p, std::string_view name, size_t spatial) {
  const IntList& v = p.get<IntList>(name);
  if (v.size() != spatial)
    fail(kConv, fmt::format("{} ({}) has {} entries but there are {} spatial dims", name,
                            fmt::join(v, ", "), v.size(), spatial));
  for (int64_t x : v)
    if (x < 1)
      fail(kConv, fmt::format("{} ({}) must be >= 1 everywhere", name, fmt::join(v, ", ")));
  return v;
}

std::vector<Atom> conv_general_dilated(RewriteArgs& a) {
  expect_operands(a, kConv, 2);
  const ArrayType lhs = array_of(a, kConv, 0);
  const ArrayType rhs = array_of(a, kConv, 1);
  if (lhs.dtype != rhs.dtype)
    fail(kConv, fmt::format("the input is {} but the kernel is {}; the dtypes must agree",
                            lhs.str(), rhs.str()));
  if (!is_inexact(lhs.dtype) && !is_int(lhs.dtype))
    fail(kConv, fmt::format("operands of type {} are not numbers", lhs.str()));
  const int64_t rank = lhs.rank();
  if (rank < 2 || rhs.rank() != rank)
    fail(kConv, fmt::format("the input {} and kernel {} must have the same rank, at least 2",
                            lhs.str(), rhs.str()));
  const IntListList& dn = a.params.get<IntListList>("dimension_numbers");
  const IntList &lhs_spec = dn[0], &rhs_spec = dn[1], &out_spec = dn[2];
  check_spec(lhs_spec, "lhs_spec", rank);
  check_spec(rhs_spec, "rhs_spec", rank);
  check_spec(out_spec, "out_spec", rank);
  const size_t ns = static_cast<size_t>(rank - 2);

  const IntList& strides = per_spatial(a.params, "window_strides", ns);
  const IntList& lhs_dil = per_spatial(a.params, "lhs_dilation", ns);
  const IntList& rhs_dil = per_spatial(a.params, "rhs_dilation", ns);
  const IntListList& padding = a.params.get<IntListList>("padding");
  if (padding.size() != ns)
    fail(kConv,
         fmt::format("padding has {} entries but there are {} spatial dims", padding.size(), ns));
  const int64_t groups = a.params.get<int64_t>("feature_group_count");
  const int64_t batch_groups = a.params.get<int64_t>("batch_group_count");
  if (groups < 1 || batch_groups < 1)
    fail(kConv, "feature_group_count and batch_group_count must be >= 1");
  if (groups > 1 && batch_groups > 1)
    fail(kConv, "feature_group_count and batch_group_count cannot both be above 1");

  const int64_t n = lhs.shape[lhs_spec[0]], c = lhs.shape[lhs_spec[1]];
  const int64_t o = rhs.shape[rhs_spec[0]], i = rhs.shape[rhs_spec[1]];
  if (c != i * groups)
    fail(kConv, fmt::format("the input has {} features (dim {} of {}) but the kernel takes {} per "
                            "group (dim {} of {}) and feature_group_count is {}",
                            c, lhs_spec[1], lhs.str(), i, rhs_spec[1], rhs.str(), groups));
  if (o % groups != 0 || o % batch_groups != 0)
    fail(kConv, fmt::format("the kernel's {} output features do not split into {} groups", o,
                            groups * batch_groups));
  if (n % batch_groups != 0)
    fail(kConv, fmt::format("the input's batch of {} does not split into batch_group_count {} "
                            "groups",
                            n, batch_groups));

  std::vector<Window> win(ns);
  Shape out_canon{n / batch_groups};  // [N, out spatial..., O]
  for (size_t k = 0; k < ns; ++k) {
    if (padding[k].size() != 2)
      fail(kConv, fmt::format("padding entry {} must be a (lo, hi) pair", k));
    win[k] = {lhs.shape[lhs_spec[2 + k]],
              rhs.shape[rhs_spec[2 + k]],
              strides[k],
              padding[k][0],
              padding[k][1],
              lhs_dil[k],
              rhs_dil[k]};
    if (win[k].padded() < 0)
      fail(kConv, fmt::format("padding ({}, {}) leaves spatial dim {} a negative size", win[k].lo,
                              win[k].hi, k));
    out_canon.push_back(win[k].out());
  }
  out_canon.push_back(o);

  Emit e{a.b};
  DType d = lhs.dtype;
  IntList to_out(static_cast<size_t>(rank));  // canonical order -> the out_spec layout
  to_out[static_cast<size_t>(out_spec[0])] = 0;
  to_out[static_cast<size_t>(out_spec[1])] = rank - 1;
  for (size_t k = 0; k < ns; ++k) to_out[static_cast<size_t>(out_spec[2 + k])] = 1 + k;
  auto finish = [&](Atom canon) {
    Atom r = e.transpose(canon, to_out);
    if (const DType* pref = a.params.find("preferred_element_type")
                                ? std::get_if<DType>(a.params.find("preferred_element_type"))
                                : nullptr;
        pref && *pref != d)
      r = e.op(Prim::convert_element_type, {r}, Params{{"new_dtype", *pref}, {"weak_type", false}});
    return std::vector<Atom>{r};
  };

  int64_t positions = 1;
  for (const Window& w : win) positions *= w.kernel;
  int64_t out_elems = 1;
  for (int64_t s : out_canon) out_elems *= s;
  if (out_elems == 0 || positions == 0 || i == 0)  // nothing to sum: zeros of the out shape
    return finish(e.broadcast(e.scalar(d, 0), out_canon, {}));

  // The input as [N, spatial..., C], padded and dilated.
  IntList lhs_perm{lhs_spec[0]};
  for (size_t k = 0; k < ns; ++k) lhs_perm.push_back(lhs_spec[2 + k]);
  lhs_perm.push_back(lhs_spec[1]);
  Atom x = e.transpose(a.ins[0], lhs_perm);
  IntListList pad_config{{0, 0, 0}};
  bool padded = false;
  for (const Window& w : win) {
    pad_config.push_back({w.lo, w.hi, w.lhs_dilation - 1});
    padded = padded || w.lo != 0 || w.hi != 0 || w.lhs_dilation != 1;
  }
  pad_config.push_back({0, 0, 0});
  if (padded)
    x = e.op(Prim::pad, {x, e.scalar(d, 0)}, Params{{"padding_config", std::move(pad_config)}});

  // One strided slice per kernel position (row-major over the kernel's spatial dims), side by
  // side along the feature axis: [N, out spatial..., positions * C].
  std::vector<Atom> columns;
  IntList pos(ns, 0);
  for (int64_t p = 0; p < positions; ++p) {
    IntList start{0}, limit{n}, step{1};
    for (size_t k = 0; k < ns; ++k) {
      int64_t first = pos[k] * win[k].rhs_dilation;
      start.push_back(first);
      limit.push_back(first + (out_canon[1 + k] - 1) * win[k].stride + 1);
      step.push_back(win[k].stride);
    }
    start.push_back(0);
    limit.push_back(c);
    step.push_back(1);
    columns.push_back(
        e.op(Prim::slice, {x},
             Params{{"limit_indices", limit}, {"start_indices", start}, {"strides", step}}));
    for (size_t k = ns; k-- > 0;) {  // next position
      if (++pos[k] < win[k].kernel) break;
      pos[k] = 0;
    }
  }
  const int64_t last = rank - 1;
  Atom cols = columns.size() == 1 ? columns[0]
                                  : e.op(Prim::concatenate, columns, Params{{"dimension", last}});

  // The kernel as [positions, I, O].
  IntList rhs_perm;
  for (size_t k = 0; k < ns; ++k) rhs_perm.push_back(rhs_spec[2 + k]);
  rhs_perm.push_back(rhs_spec[1]);
  rhs_perm.push_back(rhs_spec[0]);
  Atom w = e.transpose(a.ins[1], rhs_perm);

  Shape spatial_out(out_canon.begin() + 1, out_canon.end() - 1);
  if (groups == 1 && batch_groups == 1) {
    w = e.reshape(w, Shape{positions * i, o});
    return finish(e.op(Prim::dot_general, {cols, w},
                       Params{{"dimension_numbers", DotDims{{last}, {0}, {}, {}}},
                              {"precision", NoneParam{}},
                              {"preferred_element_type", NoneParam{}}}));
  }

  // Grouped: the dot_general's batch dim is the group; its result [G, N', out..., O / G] is
  // brought back to [N', out..., G, O / G] = [N', out..., O].
  const int64_t g = groups * batch_groups, og = o / g;
  Atom grouped_cols;
  DotDims dims;
  if (groups > 1) {
    // Features split into groups: cols [N, out..., positions, G, I] against [positions, I, G, O/G].
    Shape s{n};
    s.insert(s.end(), spatial_out.begin(), spatial_out.end());
    s.insert(s.end(), {positions, g, i});
    grouped_cols = e.reshape(cols, s);
    w = e.reshape(w, Shape{positions, i, g, og});
    int64_t pd = 1 + static_cast<int64_t>(ns);
    dims = DotDims{{pd, pd + 2}, {0, 1}, {pd + 1}, {2}};
  } else {
    // The batch split into groups: cols [G, N / G, out..., positions * C] against
    // [positions * C, G, O / G].
    Shape s{g, n / g};
    s.insert(s.end(), spatial_out.begin(), spatial_out.end());
    s.push_back(positions * c);
    grouped_cols = e.reshape(cols, s);
    w = e.reshape(w, Shape{positions * i, g, og});
    dims = DotDims{{last + 1}, {0}, {0}, {1}};
  }
  Atom prod = e.op(Prim::dot_general, {grouped_cols, w},
                   Params{{"dimension_numbers", dims},
                          {"precision", NoneParam{}},
                          {"preferred_element_type", NoneParam{}}});
  IntList back;  // [G, N', out..., O/G] -> [N', out..., G, O/G]
  for (int64_t k = 1; k <= static_cast<int64_t>(ns) + 1; ++k) back.push_back(k);
  back.push_back(0);
  back.push_back(static_cast<int64_t>(ns) + 2);
  return finish(e.reshape(e.transpose(prod, back), out_canon));
}

}  // namespace

void add_conv_rewrites(std::vector<JaxRewrite>& table) {
  table.push_back({std::string_view(kConv),
                   {{"batch_group_count", K::integer},
                    {"dimension_numbers", K::conv_dims},
                    {"feature_group_count", K::integer},
                    {"lhs_dilation", K::ints},
                    {"padding", K::int_lists},
                    {"preferred_element_type", K::dtype_or_none},
                    {"rhs_dilation", K::ints},
                    {"window_strides", K::ints}},
                   {"precision"},
                   conv_general_dilated});
}

}  // namespace refjit::text
