// The Python package's processes over MPI (python/refjit/distributed.py): start MPI, bind
// named axes to communicators (MPI's world or an mpi4py one), ask the axes' sizes.
#pragma once

#include <nanobind/nanobind.h>

namespace refjit::python {

void bind_distributed(nanobind::module_& m);

}  // namespace refjit::python
