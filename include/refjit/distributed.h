// Processes working together over MPI (libopenmpi-dev): the optional refjit_distributed
// library, built when CMake finds MPI (docs/distributed.md). A Session starts MPI for the
// process; collectives (refjit/collectives.h) over an axis bound to a Communicator then run
// across its processes, and over any unbound axis across all of them.
//
//   int main(int argc, char** argv) {
//     refjit::distributed::Session mpi(argc, argv);        // MPI_Init ... MPI_Finalize
//     auto step = refjit::jit([&](Ref w, Ref g, Value x) { ...; psum(g, "data"); ... });
//   }
//
// Run with `mpirun -np N program` (scripts/distributed.sh).
#pragma once

#include <memory>
#include <string>

namespace refjit {

class CollectiveGroup;

namespace distributed {

// A set of processes (an MPI communicator) collectives can run over.
class Communicator {
 public:
  // Every process of the job (MPI_COMM_WORLD). Needs a live Session.
  static Communicator world();
  int rank() const;
  int size() const;
  // The processes with the same `color`, ranked by `key` (then by rank here), as MPI_Comm_split.
  // Every process of this communicator must call it.
  Communicator split(int color, int key) const;

  // A communicator made by other code, given by its Fortran handle (MPI_Comm_c2f, mpi4py's
  // comm.py2f()). refjit works on a duplicate of it (MPI_Comm_dup), so its messages never mix
  // with the caller's: every process of the communicator must call this.
  static Communicator from_fortran_handle(int handle);

  // Internal: the group the runtime's collectives use.
  const std::shared_ptr<CollectiveGroup>& group() const { return group_; }
  explicit Communicator(std::shared_ptr<CollectiveGroup> group) : group_(std::move(group)) {}

 private:
  std::shared_ptr<CollectiveGroup> group_;
};

// MPI for this process, from construction to destruction (MPI_Init / MPI_Finalize, unless
// something else started MPI first). While it lives, axes bound to nothing span every process.
class Session {
 public:
  Session(int& argc, char**& argv);
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  bool owns_mpi_ = false;
};

// This process's rank and the number of processes in the job (0 and 1 without a Session).
int rank();
int size();

// Collectives naming `axis` run over `comm` from now on (jax's axis_name, bound to processes).
void bind_axis(const std::string& axis, const Communicator& comm);

}  // namespace distributed
}  // namespace refjit
