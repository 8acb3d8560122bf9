#include "python/src/arrays.h"

// NumPy's C API, in this file only (import_numpy() loads it when the module starts).
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <fmt/format.h>
#include <numpy/arrayobject.h>

#include <cstdint>
#include <vector>

namespace nb = nanobind;

namespace refjit::python {

namespace {

using Code = nb::dlpack::dtype_code;

template <class A>
Array borrow_any(const A& a, const std::string& what) {
  const DType d = dtype_of(a.dtype(), what);
  Shape shape;
  for (size_t k = 0; k < a.ndim(); ++k) shape.push_back(static_cast<int64_t>(a.shape(k)));
  ArrayType t{d, std::move(shape)};
  const auto address = reinterpret_cast<std::uintptr_t>(a.data());
  if (t.num_elements() > 0 && address % static_cast<std::uintptr_t>(byte_size(d)) != 0)
    return Array(t, a.data());  // compiled code assumes element alignment: copy
  // Keep the ndarray (and so the Python object behind it) alive with the storage.
  auto* keep = new A(a);
  auto* data = static_cast<std::byte*>(const_cast<void*>(static_cast<const void*>(a.data())));
  std::shared_ptr<std::byte[]> storage(data, [keep](std::byte*) {
    nb::gil_scoped_acquire gil;
    delete keep;
  });
  return Array(std::move(t), std::move(storage));
}

}  // namespace

DType dtype_of(const nb::dlpack::dtype& d, const std::string& what) {
  const auto code = static_cast<Code>(d.code);
  if (d.lanes == 1) {
    if (code == Code::Float && d.bits == 32) return DType::f32;
    if (code == Code::Float && d.bits == 64) return DType::f64;
    if (code == Code::Float && d.bits == 16) return DType::f16;
    if (code == Code::Bfloat && d.bits == 16) return DType::bf16;
    if (code == Code::Bool && d.bits == 8) return DType::bool_;
    if (code == Code::Complex && d.bits == 64) return DType::c64;
    if (code == Code::Complex && d.bits == 128) return DType::c128;
    if (code == Code::Int || code == Code::UInt) {
      const bool u = code == Code::UInt;
      switch (d.bits) {
        case 8: return u ? DType::u8 : DType::i8;
        case 16: return u ? DType::u16 : DType::i16;
        case 32: return u ? DType::u32 : DType::i32;
        case 64: return u ? DType::u64 : DType::i64;
        default: break;
      }
    }
  }
  throw nb::type_error(
      fmt::format("{} has an element type refjit does not support (DLPack code {}, {} bits); "
                  "refjit computes in float16/32/64, bfloat16, complex64/128, signed and unsigned "
                  "integers and bool",
                  what, static_cast<int>(d.code), static_cast<int>(d.bits))
          .c_str());
}

ArrayType array_type_of(const InArray& a, const std::string& what) {
  Shape shape;
  for (size_t k = 0; k < a.ndim(); ++k) shape.push_back(static_cast<int64_t>(a.shape(k)));
  return ArrayType{dtype_of(a.dtype(), what), std::move(shape)};
}

Array borrow(const InArray& a, const std::string& what) { return borrow_any(a, what); }

Array borrow_writable(const InOutArray& a, const std::string& what) { return borrow_any(a, what); }

namespace {

// NumPy's number for a refjit dtype; -1 for bfloat16, which NumPy has not.
int numpy_type(DType d) {
  switch (d) {
    case DType::f32: return NPY_FLOAT32;
    case DType::f64: return NPY_FLOAT64;
    case DType::f16: return NPY_FLOAT16;
    case DType::i8: return NPY_INT8;
    case DType::i16: return NPY_INT16;
    case DType::i32: return NPY_INT32;
    case DType::i64: return NPY_INT64;
    case DType::u8: return NPY_UINT8;
    case DType::u16: return NPY_UINT16;
    case DType::u32: return NPY_UINT32;
    case DType::u64: return NPY_UINT64;
    case DType::bool_: return NPY_BOOL;
    case DType::c64: return NPY_COMPLEX64;
    case DType::c128: return NPY_COMPLEX128;
    case DType::bf16: break;
  }
  return -1;
}

// NumPy's dtype for a refjit one (a new reference). bfloat16 arrays are ml_dtypes' bfloat16
// (the type jax.numpy.bfloat16 is).
PyArray_Descr* numpy_dtype(DType d) {
  if (d == DType::bf16) {
    // Looked up once and kept for the process (see to_result).
    static PyObject* const bf16 = [] {
      nb::object ml = nb::module_::import_("ml_dtypes").attr("bfloat16");
      return nb::module_::import_("numpy").attr("dtype")(ml).release().ptr();
    }();
    Py_INCREF(bf16);
    return reinterpret_cast<PyArray_Descr*>(bf16);
  }
  return PyArray_DescrFromType(numpy_type(d));
}

// A NumPy array of class `type` over `a`'s memory, which a capsule holding the Array keeps
// alive as the array's base. Made with NumPy's C API: through nanobind's ndarray (a buffer
// NumPy parses) and a view as refjit.Array, each result cost 0.7 us, most of a small training
// step's marshalling (33 results).
nb::object new_array(Array a, PyTypeObject* type) {
  const ArrayType& t = a.type();
  std::vector<npy_intp> dims(t.shape.begin(), t.shape.end());
  auto* held = new Array(std::move(a));
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<Array*>(p); });
  // The Array is this result's only holder, so NumPy may write it (a mutable result). An
  // empty one may have no memory; NumPy is given an address it never reads.
  alignas(16) static std::byte no_elements[16];
  void* data = held->byte_size() > 0 ? static_cast<void*>(held->mutable_data()) : no_elements;
  PyObject* out = PyArray_NewFromDescr(type, numpy_dtype(t.dtype), static_cast<int>(dims.size()),
                                       dims.data(), nullptr, data, NPY_ARRAY_CARRAY, nullptr);
  if (!out) throw nb::python_error();
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(out), owner.release().ptr()) < 0) {
    Py_DECREF(out);
    throw nb::python_error();
  }
  return nb::steal(out);
}

}  // namespace

std::optional<Array> borrow_numpy(nb::handle x, DType want) {
  const int type = numpy_type(want);
  if (type < 0 || !PyArray_Check(x.ptr())) return std::nullopt;
  auto* array = reinterpret_cast<PyArrayObject*>(x.ptr());
  if (!PyArray_IS_C_CONTIGUOUS(array) || !PyArray_ISALIGNED(array) ||
      !PyArray_ISNOTSWAPPED(array) || !PyArray_EquivTypenums(PyArray_TYPE(array), type))
    return std::nullopt;
  Shape shape(PyArray_DIMS(array), PyArray_DIMS(array) + PyArray_NDIM(array));
  // The array stays alive while any Array shares its memory.
  PyObject* keep = x.ptr();
  Py_INCREF(keep);
  std::shared_ptr<std::byte[]> storage(static_cast<std::byte*>(PyArray_DATA(array)),
                                       [keep](std::byte*) {
                                         nb::gil_scoped_acquire gil;
                                         Py_DECREF(keep);
                                       });
  return Array(ArrayType{want, std::move(shape)}, std::move(storage));
}

void import_numpy() {
  if (_import_array() < 0) throw nb::python_error();
}

nb::object to_numpy(Array a) { return new_array(std::move(a), &PyArray_Type); }

nb::object to_result(Array a) {
  // Looked up once and kept for the process: a static nb::object would be released after the
  // interpreter has gone.
  static PyTypeObject* const result_type = reinterpret_cast<PyTypeObject*>(
      nb::object(nb::module_::import_("refjit._array").attr("Array")).release().ptr());
  return new_array(std::move(a), result_type);
}

}  // namespace refjit::python
