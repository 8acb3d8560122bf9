#include "python/src/xla_ffi.h"

#include <fmt/format.h>

#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>

#include "refjit/ir/error.h"
#include "runtime/interpreter.h"

#if REFJIT_HAVE_XLA_FFI
#include "xla/ffi/api/ffi.h"
#endif

namespace nb = nanobind;

namespace refjit::python {

namespace {

std::mutex g_programs_mutex;
std::deque<FfiProgram> g_programs;  // a deque: registering never moves an entry

const FfiProgram* program_at(int64_t id) {
  std::lock_guard<std::mutex> lock(g_programs_mutex);
  if (id < 0 || static_cast<size_t>(id) >= g_programs.size()) return nullptr;
  return &g_programs[static_cast<size_t>(id)];
}

}  // namespace

int64_t register_ffi_program(FfiProgram program) {
  std::lock_guard<std::mutex> lock(g_programs_mutex);
  g_programs.push_back(std::move(program));
  return static_cast<int64_t>(g_programs.size()) - 1;
}

#if REFJIT_HAVE_XLA_FFI

namespace ffi = xla::ffi;

namespace {

std::optional<DType> dtype_of(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::PRED: return DType::bool_;
    case ffi::DataType::S8: return DType::i8;
    case ffi::DataType::S16: return DType::i16;
    case ffi::DataType::S32: return DType::i32;
    case ffi::DataType::S64: return DType::i64;
    case ffi::DataType::U8: return DType::u8;
    case ffi::DataType::U16: return DType::u16;
    case ffi::DataType::U32: return DType::u32;
    case ffi::DataType::U64: return DType::u64;
    case ffi::DataType::F16: return DType::f16;
    case ffi::DataType::BF16: return DType::bf16;
    case ffi::DataType::F32: return DType::f32;
    case ffi::DataType::F64: return DType::f64;
    case ffi::DataType::C64: return DType::c64;
    case ffi::DataType::C128: return DType::c128;
    default: return std::nullopt;
  }
}

// The type XLA's buffer has, as refjit names it; an error naming `what` for a dtype refjit
// has no type for.
ArrayType type_of(const ffi::AnyBuffer& b, const std::string& what) {
  const std::optional<DType> d = dtype_of(b.element_type());
  if (!d) throw Error(fmt::format("{} has an element type refjit has no type for", what));
  Shape shape(b.dimensions().begin(), b.dimensions().end());
  return ArrayType{*d, std::move(shape)};
}

void expect_type(const ArrayType& got, const Type& want, const std::string& what) {
  if (got != want.array)
    throw Error(
        fmt::format("{} has type {} but the refjit program takes {}", what, got.str(), want.str()));
}

// Runs the program on XLA's buffers: inputs are read where they are (an Array over XLA's
// memory that owns nothing, and the code never writes it: no input is donated), and native
// code writes its results into XLA's result buffers (the interpreter's are copied there).
void run(const FfiProgram& p, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  if (args.size() != p.in_types.size() || rets.size() != p.out_types.size())
    throw Error(
        fmt::format("the custom call has {} operands and {} results; the refjit program "
                    "takes {} and returns {}",
                    args.size(), rets.size(), p.in_types.size(), p.out_types.size()));
  std::vector<RtValue> all(p.consts.begin(), p.consts.end());
  for (size_t k = 0; k < args.size(); ++k) {
    const std::string what = fmt::format("operand {}", k);
    ffi::ErrorOr<ffi::AnyBuffer> b = args.get<ffi::AnyBuffer>(k);
    if (!b.has_value()) throw Error(fmt::format("{} is not a buffer", what));
    ArrayType t = type_of(*b, what);
    expect_type(t, p.in_types[k], what);
    auto* data = static_cast<std::byte*>(b->untyped_data());
    all.emplace_back(Array(std::move(t), std::shared_ptr<std::byte[]>(data, [](std::byte*) {})));
  }
  std::vector<void*> into;
  for (size_t k = 0; k < rets.size(); ++k) {
    const std::string what = fmt::format("result {}", k);
    ffi::ErrorOr<ffi::Result<ffi::AnyBuffer>> r = rets.get<ffi::AnyBuffer>(k);
    if (!r.has_value()) throw Error(fmt::format("{} is not a buffer", what));
    expect_type(type_of(**r, what), p.out_types[k], what);
    into.push_back((*r)->untyped_data());
  }
  if (p.compiled) {  // native code writes XLA's result buffers itself
    p.compiled->call_into(all, into.data());
    return;
  }
  const std::vector<RtValue> outs = interpret(*p.interpreted, all);
  for (size_t k = 0; k < outs.size(); ++k) {
    const Array& a = std::get<Array>(outs[k]);
    if (a.byte_size() > 0) std::memcpy(into[k], a.data(), static_cast<size_t>(a.byte_size()));
  }
}

ffi::Error call(ffi::RemainingArgs args, ffi::RemainingRets rets, int64_t program) {
  const FfiProgram* p = program_at(program);
  if (!p) return ffi::Error::InvalidArgument(fmt::format("refjit_call: no program {}", program));
  try {
    run(*p, args, rets);
  } catch (const std::exception& e) {
    return ffi::Error::Internal(fmt::format("refjit_call: {}", e.what()));
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    refjit_xla_call, call,
    ffi::Ffi::Bind().RemainingArgs().RemainingRets().Attr<int64_t>("program"));

bool have_xla_ffi() { return true; }

nb::object xla_ffi_handler() { return nb::capsule(reinterpret_cast<void*>(&refjit_xla_call)); }

#else

bool have_xla_ffi() { return false; }
nb::object xla_ffi_handler() { return nb::none(); }

#endif

}  // namespace refjit::python
