// Host calls from Python (runtime/host_callbacks.h): jax.debug.print and jax.debug.callback.
#pragma once

#include <nanobind/nanobind.h>

namespace refjit::python {

// Adds set_host_callback_handler(handler) to the module.
void bind_host_calls(nanobind::module_& m);

}  // namespace refjit::python
