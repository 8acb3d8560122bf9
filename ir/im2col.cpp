#include "refjit/ir/im2col.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace refjit {

Im2col Im2col::of(const Params& p) {
  return {p.get<IntListList>("starts"), p.get<IntList>("strides"), p.get<IntList>("window")};
}

Params Im2col::params() const {
  return Params{{"starts", starts}, {"strides", strides}, {"window", window}};
}

std::string Im2col::problem(const Shape& x) const {
  const size_t r = x.size();
  if (r < 2) return fmt::format("operand 0 has rank {}; it needs rows and channels", r);
  if (window.size() != r || strides.size() != r)
    return fmt::format("window ({}) and strides ({}) need one entry per dim of operand 0 ({})",
                       fmt::join(window, ", "), fmt::join(strides, ", "), r);
  if (starts.empty()) return "starts names no window";
  if (window.back() != x.back() || strides.back() != 1)
    return fmt::format("each window must span the last dim of operand 0 (size {}) with stride 1",
                       x.back());
  for (size_t d = 0; d < r; ++d)
    if (window[d] < 1 || strides[d] < 1)
      return fmt::format("window and strides must be positive (dim {})", d);
  for (const IntList& s : starts) {
    if (s.size() != r) return fmt::format("start ({}) needs {} entries", fmt::join(s, ", "), r);
    if (s.back() != 0) return fmt::format("start ({}) must begin at channel 0", fmt::join(s, ", "));
    for (size_t d = 0; d < r; ++d) {
      // The window's last position, start + (size - 1) * stride, must lie inside x (computed
      // without overflow: the params come from text).
      int64_t span = 0, last = 0;
      if (s[d] < 0 || __builtin_mul_overflow(window[d] - 1, strides[d], &span) ||
          __builtin_add_overflow(s[d], span, &last) || last >= x[d])
        return fmt::format("the window at ({}) leaves operand 0 along dim {} (size {})",
                           fmt::join(s, ", "), d, x[d]);
    }
  }
  int64_t depth = 0;
  if (__builtin_mul_overflow(windows(), channels(), &depth))
    return fmt::format("{} windows of {} channels are too many", windows(), channels());
  return "";
}

}  // namespace refjit
