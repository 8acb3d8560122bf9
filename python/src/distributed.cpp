// The MPI side of refjit.distributed (docs/distributed.md "From Python"). The module carries
// refjit_distributed's code itself when MPI was found at build time (REFJIT_HAVE_MPI), so the
// axes it binds are the ones the module's compiled code reads.
#include "python/src/distributed.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <optional>
#include <string>

#include "refjit/ir/error.h"
#include "runtime/collectives.h"

#if REFJIT_HAVE_MPI
#include "refjit/distributed.h"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace refjit::python {

namespace {

#if REFJIT_HAVE_MPI
// MPI for the rest of the process (finalized at exit when refjit started it).
std::unique_ptr<distributed::Session>& session() {
  static std::unique_ptr<distributed::Session> s;
  return s;
}
#else
[[noreturn]] void no_mpi() {
  throw Error(
      "refjit.distributed: this build of refjit has no MPI (install libopenmpi-dev and build "
      "the package again)");
}
#endif

}  // namespace

void bind_distributed(nb::module_& m) {
  m.def(
      "mpi_available", [] { return REFJIT_HAVE_MPI != 0; },
      "Whether this build of the module can run collectives over MPI.");
  m.def(
      "mpi_start",
      [] {
#if REFJIT_HAVE_MPI
        if (!session()) session() = std::make_unique<distributed::Session>();
#else
        no_mpi();
#endif
      },
      "Starts MPI for the process (unless something, e.g. mpi4py, already did); unbound axes "
      "then span every process.");
  m.def(
      "mpi_stop",
      [] {
#if REFJIT_HAVE_MPI
        session().reset();
#endif
      },
      "Ends what mpi_start began (MPI_Finalize when refjit started MPI).");
  m.def(
      "world_rank_and_size",
      []() -> std::pair<int, int> {
#if REFJIT_HAVE_MPI
        return {distributed::rank(), distributed::size()};
#else
        return {0, 1};
#endif
      },
      "This process's rank and the number of processes (0 and 1 without MPI).");
  m.def(
      "bind_axis",
      [](const std::string& axis, std::optional<int> fortran_handle) {
#if REFJIT_HAVE_MPI
        if (!session()) session() = std::make_unique<distributed::Session>();
        distributed::bind_axis(
            axis, fortran_handle ? distributed::Communicator::from_fortran_handle(*fortran_handle)
                                 : distributed::Communicator::world());
#else
        (void)axis;
        (void)fortran_handle;
        no_mpi();
#endif
      },
      "axis"_a, "fortran_handle"_a = nb::none(),
      "Collectives over `axis` run over the communicator (its Fortran handle), or every process.");
  m.def(
      "unbind_axis", [](const std::string& axis) { unbind_axis(axis); }, "axis"_a);
  m.def(
      "axis_rank_and_size",
      [](const std::string& axis) -> std::pair<int, int> {
        const auto group = group_of(axis);
        return {group->rank(), group->size()};
      },
      "axis"_a, "This process's position along `axis` and the number of processes it spans.");
}

}  // namespace refjit::python
