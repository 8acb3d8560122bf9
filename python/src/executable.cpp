#include "python/src/executable.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "driver/bound_program.h"
#include "python/src/arrays.h"
#include "refjit/ir/error.h"

namespace nb = nanobind;

namespace refjit::python {

namespace {

std::string argument_name(size_t k) { return fmt::format("argument {}", k); }

struct MemorySpan {
  const std::byte* begin;
  const std::byte* end;
  bool updated_in_place;
  bool overlaps(const MemorySpan& o) const { return begin < o.end && o.begin < end; }
};

// NumPy arrays of ml_dtypes' bfloat16 have no DLPack form: they cross as their uint16 bits.
// Asked only where the program takes bfloat16 (reading the dtype's name is Python calls, a
// microsecond per argument of every call).
nb::object castable(nb::handle x, const Type& want) {
  if (want.array.dtype == DType::bf16 && nb::hasattr(x, "dtype") && nb::hasattr(x, "view") &&
      nb::str(x.attr("dtype")).equal(nb::str("bfloat16")))
    return x.attr("view")("uint16");
  return nb::borrow(x);
}

Array read_as(Array a, const Type& want) {
  if (want.array.dtype == DType::bf16 && a.dtype() == DType::u16) return a.bitcast(DType::bf16);
  return a;
}

void check_type(const ArrayType& got, const Type& want, const std::string& what) {
  if (got != want.array)
    throw nb::type_error(
        fmt::format("{} has type {} but the compiled program takes {}", what, got.str(), want.str())
            .c_str());
}

}  // namespace

std::vector<RtValue> const_values(const Jaxpr& program, const nb::list& consts) {
  if (nb::len(consts) != program.constvars.size())
    throw nb::value_error(fmt::format("{} constant(s) given for a program with {} constvar(s)",
                                      nb::len(consts), program.constvars.size())
                              .c_str());
  std::vector<RtValue> values;
  for (size_t k = 0; k < program.constvars.size(); ++k) {
    const std::string what = fmt::format("constant {}", k);
    const Type& want = program.type_of(program.constvars[k]);
    InArray in;
    if (!nb::try_cast(castable(consts[k], want), in))
      throw nb::type_error(
          fmt::format("{} must be a NumPy array of type {}", what, want.str()).c_str());
    Array a = read_as(borrow(in, what), want).clone();
    check_type(a.type(), want, what);
    values.emplace_back(std::move(a));
  }
  return values;
}

Executable::Executable(const Jaxpr& program, const nb::list& consts, ExecutableOptions options)
    : donated_(std::move(options.donated)) {
  for (Var v : program.invars) {
    in_types_.push_back(program.type_of(v));
    argument_names_.push_back(argument_name(argument_names_.size()));
  }
  for (const Atom& a : program.outvars) out_types_.push_back(program.type_of(a));
  std::vector<RtValue> values = const_values(program, consts);
  const auto t0 = std::chrono::steady_clock::now();
  if (options.interpret) {
    interpreted_ = program;
    consts_ = std::move(values);
  } else {
    PipelineOptions p;
    p.buffers.donated = donated_;
    p.compile.exact_math = p.compile.exact_math || options.exact_math;  // or REFJIT_EXACT_MATH=1
    p.compile.opt_level = options.opt_level;
    nb::gil_scoped_release unlocked;
    const BoundProgram bound(program, values, std::move(p));
    compiled_ = std::make_shared<const CompiledFunction>(bound.compile());
    consts_ = bound.kept_consts(std::move(values));
  }
  compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int64_t Executable::ffi_id() {
  if (!ffi_id_) {
    FfiProgram p;
    p.compiled = compiled_;
    if (interpreted_) p.interpreted = std::make_shared<const Jaxpr>(*interpreted_);
    p.consts = consts_;
    p.in_types = in_types_;
    p.out_types = out_types_;
    ffi_id_ = register_ffi_program(std::move(p));
  }
  return *ffi_id_;
}

nb::list Executable::call(const nb::list& args) const {
  if (nb::len(args) != in_types_.size())
    throw nb::type_error(fmt::format("the compiled program takes {} argument(s), {} given",
                                     in_types_.size(), nb::len(args))
                             .c_str());
  std::vector<RtValue> all;
  all.reserve(consts_.size() + in_types_.size());
  all.assign(consts_.begin(), consts_.end());
  // What the caller's memory was, to tell results that alias an input (copied below) and
  // refs whose storage moved (copied back).
  std::vector<const std::byte*> input_data;
  std::vector<MemorySpan> spans;  // per argument: its bytes, and whether the call writes them
  std::vector<std::pair<RefBufferPtr, nb::object>> refs;
  input_data.reserve(in_types_.size());
  spans.reserve(in_types_.size());
  bool take = false;
  for (size_t k = 0; k < in_types_.size(); ++k) {
    const std::string& what = argument_names_[k];
    const Type& want = in_types_[k];
    const bool donated = k < donated_.size() && donated_[k];
    if (!want.is_ref && !donated) {
      if (std::optional<Array> a = borrow_numpy(args[k], want.array.dtype)) {
        check_type(a->type(), want, what);
        input_data.push_back(a->data());
        spans.push_back(MemorySpan{a->data(), a->data() + a->byte_size(), false});
        all.emplace_back(std::move(*a));
        continue;
      }
    }
    InOutArray writable;
    nb::object arg = castable(args[k], want);
    if ((want.is_ref || donated) && nb::try_cast(arg, writable)) {
      Array a = read_as(borrow_writable(writable, what), want);
      check_type(a.type(), want, what);
      input_data.push_back(a.data());
      spans.push_back(MemorySpan{a.data(), a.data() + a.byte_size(), want.is_ref});
      if (want.is_ref) {
        refs.emplace_back(RefBuffer::over(std::move(a)), arg);
        all.emplace_back(refs.back().first);
      } else {
        take = true;
        all.emplace_back(std::move(a));
      }
      continue;
    }
    if (want.is_ref)
      throw nb::type_error(fmt::format("{} must be a writable, C-contiguous NumPy array of type {} "
                                       "(it is updated in place)",
                                       what, want.array.str())
                               .c_str());
    InArray in;
    if (!nb::try_cast(arg, in))
      throw nb::type_error(
          fmt::format("{} must be a NumPy array of type {}", what, want.array.str()).c_str());
    Array a = read_as(borrow(in, what), want);
    check_type(a.type(), want, what);
    input_data.push_back(a.data());
    spans.push_back(MemorySpan{a.data(), a.data() + a.byte_size(), false});
    all.emplace_back(std::move(a));
  }
  // The compiled code updates refs and donated arrays in place assuming no other argument
  // shares their memory (two NumPy views of one buffer would).
  for (size_t i = 0; i < spans.size(); ++i)
    for (size_t j = 0; j < spans.size(); ++j) {
      if (i == j || !spans[i].overlaps(spans[j])) continue;
      if (spans[i].updated_in_place)
        throw RefError("E7", fmt::format("argument {} is updated in place but shares memory with "
                                         "argument {}; pass arrays that do not overlap",
                                         i, j));
      if (i < donated_.size() && donated_[i]) take = false;  // read it; do not reuse it
    }
  std::vector<RtValue> outs;
  {
    nb::gil_scoped_release unlocked;
    if (interpreted_)
      outs = interpret(*interpreted_, all);
    else if (take)
      outs = (*compiled_)(std::move(all));
    else
      outs = (*compiled_)(all);
  }
  // A ref's storage moves only if something else shared it; write the result back.
  for (auto& [ref, array] : refs) {
    InOutArray target = nb::cast<InOutArray>(array);
    if (ref->value().data() != target.data() && target.nbytes() > 0)
      std::memcpy(target.data(), ref->value().data(), target.nbytes());
  }
  all.clear();
  nb::list results;
  for (RtValue& v : outs) {
    Array* a = std::get_if<Array>(&v);
    if (!a) throw Error("the program returned a ref; only arrays can be returned to Python");
    // A result that is an input passed through (not donated) must not let NumPy write the
    // caller's array: it gets its own copy.
    bool aliases_input = false;
    for (size_t k = 0; k < input_data.size(); ++k)
      aliases_input |= a->data() == input_data[k] && !(k < donated_.size() && donated_[k]);
    results.append(to_result(aliases_input ? a->clone() : std::move(*a)));
  }
  return results;
}

}  // namespace refjit::python
