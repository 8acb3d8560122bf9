#include "refjit/ir/window.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refjit/ir/error.h"

namespace refjit {

namespace {

IntList ones(size_t n) { return IntList(n, 1); }

}  // namespace

Window Window::of(const Params& p) {
  Window w;
  w.dims = p.get<IntList>("window_dimensions");
  w.strides = p.get<IntList>("window_strides");
  w.base_dilation = p.get_or<IntList>("base_dilation", ones(w.dims.size()));
  w.window_dilation = p.get_or<IntList>("window_dilation", ones(w.dims.size()));
  for (const IntList& lh : p.get<IntListList>("padding")) {
    if (lh.size() != 2)
      throw TypeError(fmt::format("window padding entries are (low, high) pairs, not ({})",
                                  fmt::join(lh, ", ")));
    w.padding.emplace_back(lh[0], lh[1]);
  }
  return w;
}

Params Window::params(bool with_dilations) const {
  IntListList pad;
  for (auto [lo, hi] : padding) pad.push_back({lo, hi});
  Params p{{"padding", pad}, {"window_dimensions", dims}, {"window_strides", strides}};
  if (with_dilations) {
    p.set("base_dilation", base_dilation);
    p.set("window_dilation", window_dilation);
  }
  return p;
}

Shape Window::out_shape(const Shape& in, std::string_view prim) const {
  const size_t n = in.size();
  auto fail = [&](const std::string& what) { throw TypeError(fmt::format("{}: {}", prim, what)); };
  if (dims.size() != n || strides.size() != n || padding.size() != n || base_dilation.size() != n ||
      window_dilation.size() != n)
    fail(
        fmt::format("the operand has rank {} but the window params have {} dims, {} strides, "
                    "{} paddings, {} base and {} window dilations; each needs one per dim",
                    n, dims.size(), strides.size(), padding.size(), base_dilation.size(),
                    window_dilation.size()));
  Shape out;
  for (size_t d = 0; d < n; ++d) {
    if (dims[d] < 1 || strides[d] < 1 || base_dilation[d] < 1 || window_dilation[d] < 1)
      fail(
          fmt::format("dim {}: window size {}, stride {}, base dilation {} and window "
                      "dilation {} must all be at least 1",
                      d, dims[d], strides[d], base_dilation[d], window_dilation[d]));
    const int64_t dilated = in[d] == 0 ? 0 : (in[d] - 1) * base_dilation[d] + 1;
    const int64_t padded = dilated + padding[d].first + padding[d].second;
    const int64_t span = (dims[d] - 1) * window_dilation[d] + 1;
    out.push_back(padded < span ? 0 : (padded - span) / strides[d] + 1);
  }
  return out;
}

std::optional<int64_t> Window::source(int d, int64_t o, int64_t w, int64_t in_size) const {
  const int64_t p = o * strides[d] + w * window_dilation[d] - padding[d].first;
  if (p < 0 || p % base_dilation[d] != 0) return std::nullopt;
  const int64_t i = p / base_dilation[d];
  if (i >= in_size) return std::nullopt;
  return i;
}

Window Window::with_leading_dim() const {
  Window w = *this;
  w.dims.insert(w.dims.begin(), 1);
  w.strides.insert(w.strides.begin(), 1);
  w.base_dilation.insert(w.base_dilation.begin(), 1);
  w.window_dilation.insert(w.window_dilation.begin(), 1);
  w.padding.insert(w.padding.begin(), {0, 0});
  return w;
}

}  // namespace refjit
