#include "runtime/flat_index.h"

#include <fmt/format.h>

#include <cstring>

#include "refjit/ir/error.h"
#include "runtime/dtype_dispatch.h"

namespace refjit {

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

Array take_elements(const Array& src, Shape shape, std::span<const int64_t> offsets) {
  Array out(ArrayType{src.dtype(), std::move(shape)});
  if (out.size() != static_cast<int64_t>(offsets.size()))
    throw Error(fmt::format("internal: {} offsets for {} elements", offsets.size(), out.size()));
  const size_t w = static_cast<size_t>(byte_size(src.dtype()));
  const std::byte* from = src.data();
  std::byte* to = out.mutable_data();
  for (size_t i = 0; i < offsets.size(); ++i) std::memcpy(to + i * w, from + offsets[i] * w, w);
  return out;
}

void put_elements(Array& dst, std::span<const int64_t> offsets, const Array& src) {
  if (src.dtype() != dst.dtype() || src.size() != static_cast<int64_t>(offsets.size()))
    throw Error(fmt::format("internal: writing {} into {} at {} offsets", src.type().str(),
                            dst.type().str(), offsets.size()));
  const size_t w = static_cast<size_t>(byte_size(src.dtype()));
  const std::byte* from = src.data();
  std::byte* to = dst.mutable_data();
  for (size_t i = 0; i < offsets.size(); ++i) std::memcpy(to + offsets[i] * w, from + i * w, w);
}

void add_elements(Array& dst, std::span<const int64_t> offsets, const Array& src) {
  if (src.dtype() != dst.dtype() || src.size() != static_cast<int64_t>(offsets.size()))
    throw Error(fmt::format("internal: adding {} into {} at {} offsets", src.type().str(),
                            dst.type().str(), offsets.size()));
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsBool<T>) {
      throw Error("cannot add into a bool array: addition is defined for numbers only");
    } else {
      auto d = dst.mutable_values<T>();
      auto s = src.values<T>();
      for (size_t i = 0; i < offsets.size(); ++i) {
        if constexpr (kIsInt<T>) {
          using U = std::make_unsigned_t<T>;
          d[offsets[i]] = static_cast<T>(static_cast<U>(d[offsets[i]]) + static_cast<U>(s[i]));
        } else {
          d[offsets[i]] += s[i];
        }
      }
    }
  });
}

std::vector<int64_t> window_offsets(const Shape& shape, const std::vector<int64_t>& starts,
                                    const Shape& window) {
  std::vector<int64_t> xs = row_major_strides(shape);
  std::vector<int64_t> offsets;
  for_each_index(window, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t i = 0; i < shape.size(); ++i) off += (starts[i] + idx[i]) * xs[i];
    offsets.push_back(off);
  });
  return offsets;
}

}  // namespace refjit
