// Processes that leave the job while others still count on them. A process whose Session ends
// (its program finished, or stopped on an error) tells every other process, on a communicator
// kept for that alone; a process waiting at a collective watches for those messages, so a
// member that left makes the others stop within seconds, naming it, instead of waiting for it
// forever. (A process that is killed or crashes is mpirun's to notice: it stops the job.)
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace refjit::distributed {

// Session start, on every process (collective over the world): the watch communicator.
void start_watching_departures();
// Session end: tells every other process that this one is leaving.
void announce_departure();
// The world rank of a member of `members` (world ranks) known to have left, or -1.
int departed_member(const std::vector<int>& members);
// Waits for `request`, a collective among `members` (world ranks). When a member has left and
// the request does not complete within a grace period, prints what happened (naming `what`
// and the member) and stops every process (MPI_Abort): the collective can never complete, and
// MPI cannot cancel it.
void wait_watching(MPI_Request& request, const std::vector<int>& members, const std::string& what);

}  // namespace refjit::distributed
