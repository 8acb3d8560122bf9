// The Python package's handler of host calls (runtime/host_callbacks.h): the function
// python/refjit/_callbacks.py registers, called with the GIL held on whatever thread runs the
// program (the caller's, or XLA's inside a jax.jit), with the operands as NumPy arrays.
#include "python/src/host_calls.h"

#include <nanobind/stl/function.h>

#include "python/src/arrays.h"
#include "runtime/host_callbacks.h"

namespace nb = nanobind;

namespace refjit::python {

void bind_host_calls(nb::module_& m) {
  m.def(
      "set_host_callback_handler",
      [](nb::object handler) {
        if (handler.is_none()) {
          set_host_call_handler(nullptr);
          return;
        }
        // Kept for the life of the process, never released: the runtime's copy of this
        // function is destroyed after the interpreter has shut down, when no reference may
        // be dropped any more.
        PyObject* held = handler.release().ptr();
        set_host_call_handler([held](int64_t callback, std::vector<Array> args) {
          nb::gil_scoped_acquire gil;
          nb::list arrays;
          for (Array& a : args) arrays.append(to_numpy(std::move(a)));
          const nb::handle fn(held);
          fn(callback, arrays);  // a Python exception propagates (as nb::python_error)
        });
      },
      "handler", "Sets the function debug_callback eqns call: handler(callback_number, arrays).");
}

}  // namespace refjit::python
