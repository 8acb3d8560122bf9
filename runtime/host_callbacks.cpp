#include "runtime/host_callbacks.h"

#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <memory>
#include <mutex>

#include "refjit/ir/error.h"
#include "runtime/kernels/gemm.h"

namespace refjit {

namespace {

std::mutex handler_mu;
std::shared_ptr<const HostCallHandler> handler;

// One host call being assembled by compiled code, and the first failure of the run.
struct Staged {
  int64_t callback = -1;
  std::vector<Array> args;
  std::exception_ptr failure;
};
thread_local Staged staged;

std::shared_ptr<const HostCallHandler> current_handler() {
  std::lock_guard<std::mutex> lock(handler_mu);
  return handler;
}

// A copy of a memref's elements, in row-major order, whatever its strides.
Array copy_of(DType dtype, int64_t rank, const RefjitMemRefHead* m) {
  const auto* sizes = reinterpret_cast<const int64_t*>(m + 1);
  const int64_t* strides = sizes + rank;
  ArrayType type{dtype, Shape(sizes, sizes + rank)};
  Array out = Array::uninitialized(type);
  const int64_t elem = byte_size(dtype);
  const auto* base = static_cast<const std::byte*>(m->aligned) + m->offset * elem;
  std::byte* to = out.mutable_data();
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  for (int64_t n = 0; n < out.size(); ++n) {
    int64_t at = 0;
    for (int64_t d = 0; d < rank; ++d) at += index[d] * strides[d];
    std::memcpy(to + n * elem, base + at * elem, static_cast<size_t>(elem));
    for (int64_t d = rank; d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

void set_host_call_handler(HostCallHandler h) {
  std::lock_guard<std::mutex> lock(handler_mu);
  handler = h ? std::make_shared<const HostCallHandler>(std::move(h)) : nullptr;
}

void call_host(int64_t callback, std::vector<Array> args) {
  const std::shared_ptr<const HostCallHandler> h = current_handler();
  if (!h)
    throw Error(fmt::format(
        "debug_callback: the program calls host function {}, but no host functions are "
        "registered in this process (the refjit Python package registers jax.debug.print's "
        "and jax.debug.callback's)",
        callback));
  (*h)(callback, std::move(args));
}

void throw_pending_host_call_error() {
  if (!staged.failure) return;
  std::exception_ptr failure = std::move(staged.failure);
  staged = Staged{};
  std::rethrow_exception(failure);
}

}  // namespace refjit

extern "C" {

void refjit_host_call_begin(int64_t callback) {
  refjit::staged.callback = callback;
  refjit::staged.args.clear();
}

void refjit_host_call_arg(int64_t dtype, int64_t rank, const RefjitMemRefHead* data) {
  if (refjit::staged.failure) return;
  try {
    refjit::staged.args.push_back(refjit::copy_of(static_cast<refjit::DType>(dtype), rank, data));
  } catch (...) {
    refjit::staged.failure = std::current_exception();
  }
}

void refjit_host_call_end() {
  std::vector<refjit::Array> args = std::move(refjit::staged.args);
  refjit::staged.args.clear();
  if (refjit::staged.failure) return;  // a run makes no host call after one failed
  try {
    refjit::call_host(refjit::staged.callback, std::move(args));
  } catch (...) {
    refjit::staged.failure = std::current_exception();
  }
}

}  // extern "C"
