#include "runtime/collectives.h"

#include <fmt/format.h>

#include <complex>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "refjit/ir/error.h"
#include "refjit/ir/half_float.h"
#include "runtime/background_sums.h"
#include "runtime/kernels/gemm.h"

namespace refjit {

namespace {

class SingleProcessGroup final : public CollectiveGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string sum_in_place(void*, int64_t, DType) override { return {}; }
  std::string all_gather(const void* in, void* out, int64_t count, DType dtype) override {
    if (in != out) std::memcpy(out, in, static_cast<size_t>(count * byte_size(dtype)));
    return {};
  }
  std::string broadcast(void*, int64_t, DType, int root) override {
    if (root != 0) return fmt::format("root {} is not a member of {}", root, describe());
    return {};
  }
  std::string describe() const override { return "this process alone"; }
};

struct Registry {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<CollectiveGroup>> bound;
  std::shared_ptr<CollectiveGroup> fallback = single_process_group();
  std::vector<std::string> names;  // by axis id
};

Registry& registry() {
  static Registry r;
  return r;
}

thread_local std::string pending_error;

template <class T>
void add_typed(void* acc, const void* x, int64_t count) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(x);
  for (int64_t i = 0; i < count; ++i) a[i] = static_cast<T>(a[i] + b[i]);
}

// The aligned data pointer of an unranked memref's descriptor.
std::byte* data_of(const RefjitMemRefHead* m, DType dtype) {
  return static_cast<std::byte*>(m->aligned) + m->offset * byte_size(dtype);
}

}  // namespace

void bind_axis(const std::string& axis, std::shared_ptr<CollectiveGroup> group) {
  if (!group) throw Error(fmt::format("bind_axis: axis '{}' bound to no group", axis));
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.bound[axis] = std::move(group);
}

void unbind_axis(const std::string& axis) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.bound.erase(axis);
}

void set_default_group(std::shared_ptr<CollectiveGroup> group) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.fallback = group ? std::move(group) : single_process_group();
}

std::shared_ptr<CollectiveGroup> group_of(std::string_view axis) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (auto it = r.bound.find(std::string(axis)); it != r.bound.end()) return it->second;
  return r.fallback;
}

std::shared_ptr<CollectiveGroup> single_process_group() {
  static const auto group = std::make_shared<SingleProcessGroup>();
  return group;
}

void add_elements(void* acc, const void* x, int64_t count, DType dtype) {
  switch (dtype) {
    case DType::f32: return add_typed<float>(acc, x, count);
    case DType::f64: return add_typed<double>(acc, x, count);
    case DType::i32: return add_typed<int32_t>(acc, x, count);
    case DType::i64: return add_typed<int64_t>(acc, x, count);
    case DType::i8: return add_typed<int8_t>(acc, x, count);
    case DType::i16: return add_typed<int16_t>(acc, x, count);
    case DType::u8: return add_typed<uint8_t>(acc, x, count);
    case DType::u16: return add_typed<uint16_t>(acc, x, count);
    case DType::u32: return add_typed<uint32_t>(acc, x, count);
    case DType::u64: return add_typed<uint64_t>(acc, x, count);
    case DType::f16: return add_typed<Float16>(acc, x, count);  // rounded at every add
    case DType::bf16: return add_typed<BFloat16>(acc, x, count);
    case DType::c64: return add_typed<std::complex<float>>(acc, x, count);
    case DType::c128: return add_typed<std::complex<double>>(acc, x, count);
    case DType::bool_: break;
  }
  throw Error(fmt::format("psum: cannot add {} values", short_name(dtype)));
}

int64_t axis_id(std::string_view axis) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (size_t i = 0; i < r.names.size(); ++i)
    if (r.names[i] == axis) return static_cast<int64_t>(i);
  r.names.emplace_back(axis);
  return static_cast<int64_t>(r.names.size() - 1);
}

std::string axis_name_of(int64_t id) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (id < 0 || static_cast<size_t>(id) >= r.names.size()) return fmt::format("#{}", id);
  return r.names[static_cast<size_t>(id)];
}

std::string axis_size_mismatch(int64_t traced, const CollectiveGroup& group) {
  if (traced == group.size()) return {};
  return fmt::format("the program was traced for {} processes but the axis is bound to {} ({})",
                     traced, group.describe(), group.size());
}

void record_collective_error(std::string message) {
  if (pending_error.empty()) pending_error = std::move(message);
}

void throw_pending_collective_error() {
  if (pending_error.empty()) return;
  std::string message = std::move(pending_error);
  pending_error.clear();
  throw Error(message);
}

}  // namespace refjit

using refjit::DType;

extern "C" {

void refjit_psum(int64_t axis, int64_t dtype, int64_t, const RefjitMemRefHead* data,
                 int64_t count) {
  refjit::finish_background_sums();
  const DType d = static_cast<DType>(dtype);
  const std::string name = refjit::axis_name_of(axis);
  std::string err = refjit::group_of(name)->sum_in_place(refjit::data_of(data, d), count, d);
  if (!err.empty()) refjit::record_collective_error(fmt::format("psum over '{}': {}", name, err));
}

void refjit_all_gather(int64_t axis, int64_t dtype, int64_t axis_size, int64_t,
                       const RefjitMemRefHead* in, int64_t, const RefjitMemRefHead* out,
                       int64_t count) {
  refjit::finish_background_sums();
  const DType d = static_cast<DType>(dtype);
  const std::string name = refjit::axis_name_of(axis);
  const std::shared_ptr<refjit::CollectiveGroup> group = refjit::group_of(name);
  // The result was sized when the program was traced; the group may have changed since.
  std::string err = refjit::axis_size_mismatch(axis_size, *group);
  if (err.empty())
    err = group->all_gather(refjit::data_of(in, d), refjit::data_of(out, d), count, d);
  if (!err.empty())
    refjit::record_collective_error(fmt::format("all_gather over '{}': {}", name, err));
}

void refjit_broadcast_from(int64_t axis, int64_t dtype, int64_t root, int64_t,
                           const RefjitMemRefHead* data, int64_t count) {
  refjit::finish_background_sums();
  const DType d = static_cast<DType>(dtype);
  const std::string name = refjit::axis_name_of(axis);
  std::string err =
      refjit::group_of(name)->broadcast(refjit::data_of(data, d), count, d, static_cast<int>(root));
  if (!err.empty())
    refjit::record_collective_error(fmt::format("broadcast_from over '{}': {}", name, err));
}

void refjit_psum_start(int64_t axis, int64_t dtype, int64_t, const RefjitMemRefHead* data,
                       int64_t count) {
  const DType d = static_cast<DType>(dtype);
  std::string name = refjit::axis_name_of(axis);
  refjit::start_background_sum(refjit::group_of(name), std::move(name), refjit::data_of(data, d),
                               count, d);
}

void refjit_psum_wait(int64_t dtype, int64_t, const RefjitMemRefHead* data) {
  std::string err = refjit::finish_background_sum(refjit::data_of(data, static_cast<DType>(dtype)));
  if (!err.empty()) refjit::record_collective_error(std::move(err));
}

void refjit_axis_index(int64_t axis, int64_t, const RefjitMemRefHead* out) {
  const int32_t rank = refjit::group_of(refjit::axis_name_of(axis))->rank();
  std::memcpy(refjit::data_of(out, DType::i32), &rank, sizeof rank);
}

void refjit_axis_index_checked(int64_t axis, int64_t axis_size, int64_t,
                               const RefjitMemRefHead* out) {
  const std::string name = refjit::axis_name_of(axis);
  const std::shared_ptr<refjit::CollectiveGroup> group = refjit::group_of(name);
  if (std::string err = refjit::axis_size_mismatch(axis_size, *group); !err.empty())
    refjit::record_collective_error(fmt::format("axis_index over '{}': {}", name, err));
  const int32_t rank = group->rank();
  std::memcpy(refjit::data_of(out, DType::i32), &rank, sizeof rank);
}

}  // extern "C"
