// NumPy arrays <-> refjit Arrays, without copies where the memory can be shared.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>
#include <string>

#include "refjit/array.h"
#include "refjit/ir/type.h"

namespace refjit::python {

// A read-only, C-contiguous host array (the refjit package makes inputs so before calling).
using InArray = nanobind::ndarray<nanobind::ro, nanobind::c_contig, nanobind::device::cpu>;
// A writable, C-contiguous host array (a gradient accumulator updated in place).
using InOutArray = nanobind::ndarray<nanobind::c_contig, nanobind::device::cpu>;

// The refjit dtype of a NumPy array; TypeError (Python) for a dtype refjit has no type for.
DType dtype_of(const nanobind::dlpack::dtype& d, const std::string& what);

// The type of `a` as refjit names it (f32[3,4]).
ArrayType array_type_of(const InArray& a, const std::string& what);

// An Array over `a`'s memory, keeping the NumPy object alive while any Array shares it.
// The memory is read, and written only through copy on write unless the Array is the only
// holder (a donated input, a ref accumulator).
Array borrow(const InArray& a, const std::string& what);
Array borrow_writable(const InOutArray& a, const std::string& what);
// An Array over the memory of `x` when it is a C-contiguous, aligned NumPy array of dtype
// `want` (not bfloat16), read only as borrow(); else nothing, and the caller converts it as
// above. Made with NumPy's C API: a tenth of nanobind's conversion, which took 0.4 us per
// argument of every call.
std::optional<Array> borrow_numpy(nanobind::handle x, DType want);

// Loads NumPy's C API, which to_numpy and to_result use; called once, as the module starts.
void import_numpy();

// A NumPy array over `a`'s memory (the Array is kept alive by the NumPy array's base).
nanobind::object to_numpy(Array a);
// The same as a result of a compiled call: a refjit.Array (python/refjit/_array.py).
nanobind::object to_result(Array a);

}  // namespace refjit::python
