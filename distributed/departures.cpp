#include "distributed/departures.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "runtime/background_sums.h"

namespace refjit::distributed {

namespace {

constexpr int kLeavingTag = 0x5245;  // "RE"
// How long a collective may still complete after a member announced it left: the member may
// have finished this very collective and left before this process saw it complete.
constexpr std::chrono::seconds kGrace{2};

struct Watch {
  std::mutex mu;
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<char> departed;  // by world rank
};

Watch& watch() {
  static Watch w;
  return w;
}

// Receives every departure message that has arrived.
void collect_departures(Watch& w) {
  if (w.comm == MPI_COMM_NULL) return;
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kLeavingTag, w.comm, &arrived, &status);
    if (!arrived) return;
    MPI_Recv(nullptr, 0, MPI_BYTE, status.MPI_SOURCE, kLeavingTag, w.comm, MPI_STATUS_IGNORE);
    w.departed[static_cast<size_t>(status.MPI_SOURCE)] = 1;
  }
}

int first_departed(const Watch& w, const std::vector<int>& members) {
  for (int r : members)
    if (r >= 0 && static_cast<size_t>(r) < w.departed.size() && w.departed[static_cast<size_t>(r)])
      return r;
  return -1;
}

}  // namespace

void start_watching_departures() {
  Watch& w = watch();
  std::lock_guard lock(w.mu);
  if (w.comm != MPI_COMM_NULL) return;
  MPI_Comm_dup(MPI_COMM_WORLD, &w.comm);
  // A peer that already finalized must not turn this process's goodbye into an abort.
  MPI_Comm_set_errhandler(w.comm, MPI_ERRORS_RETURN);
  int size = 1;
  MPI_Comm_size(w.comm, &size);
  w.departed.assign(static_cast<size_t>(size), 0);
}

void announce_departure() {
  Watch& w = watch();
  std::lock_guard lock(w.mu);
  if (w.comm == MPI_COMM_NULL) return;
  int me = 0;
  MPI_Comm_rank(w.comm, &me);
  for (int r = 0; r < static_cast<int>(w.departed.size()); ++r) {
    if (r == me || w.departed[static_cast<size_t>(r)]) continue;
    // Empty messages go out eagerly: the send completes without the peer receiving it.
    MPI_Request request;
    if (MPI_Isend(nullptr, 0, MPI_BYTE, r, kLeavingTag, w.comm, &request) == MPI_SUCCESS)
      MPI_Request_free(&request);
  }
  w.comm = MPI_COMM_NULL;  // freed by MPI_Finalize; a freed communicator would need every peer
}

int departed_member(const std::vector<int>& members) {
  Watch& w = watch();
  std::lock_guard lock(w.mu);
  collect_departures(w);
  return first_departed(w, members);
}

void wait_watching(MPI_Request& request, const std::vector<int>& members, const std::string& what) {
  int done = 0;
  MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  std::chrono::steady_clock::time_point left_at{};
  for (unsigned polls = 1; !done; ++polls) {
    if (polls % 64 == 0) {  // a probe costs more than a test: one per 64 tests
      const int gone = departed_member(members);
      const auto now = std::chrono::steady_clock::now();
      if (gone >= 0 && left_at == std::chrono::steady_clock::time_point{}) left_at = now;
      if (gone >= 0 && now - left_at > kGrace) {
        int me = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
        std::fprintf(stderr,
                     "refjit: %s on process %d of the job: process %d left the job (its program "
                     "ended) while this process waited for it there, so the collective can never "
                     "complete; stopping every process (MPI_Abort)\n",
                     what.c_str(), me, gone);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 70);
      }
    }
    // The communication thread shares the cores with the computation it overlaps.
    if (on_communication_thread()) std::this_thread::yield();
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  }
}

}  // namespace refjit::distributed
