// refjit/distributed.h over MPI: a CollectiveGroup per communicator, and the session.
#include <fmt/format.h>
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "distributed/departures.h"
#include "distributed/sum_algorithm.h"
#include "refjit/distributed.h"
#include "refjit/ir/error.h"
#include "runtime/collectives.h"

namespace refjit::distributed {

namespace {

enum class Op : long long { psum = 1, all_gather = 2, broadcast = 3 };

const char* op_name(long long op) {
  switch (static_cast<Op>(op)) {
    case Op::psum: return "psum";
    case Op::all_gather: return "all_gather";
    case Op::broadcast: return "broadcast_from";
  }
  return "?";
}

// Whether the sums over `comm` may run on the runtime's communication thread: MPI must allow
// calls from two threads one at a time (MPI_THREAD_SERIALIZED: Session asks for it, mpi4py asks
// for MPI_THREAD_MULTIPLE), and the thread must have a CPU of its own: at least two per process
// of `comm` on this machine, from the CPUs this process may use. On a machine whose cores the
// processes share (mpirun binds one per core), the thread took the CPU from the computation it
// overlapped and made the step slower (docs/distributed.md "Overlapping the sums").
// REFJIT_BACKGROUND_SUMS=1 or 0 decides instead. Collective over `comm`.
bool sums_in_background_here(MPI_Comm comm) {
  MPI_Comm local;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int on_this_machine = 1;
  MPI_Comm_size(local, &on_this_machine);
  MPI_Comm_free(&local);
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_SERIALIZED) return false;
  if (const char* v = std::getenv("REFJIT_BACKGROUND_SUMS"); v && *v) return std::string(v) != "0";
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) return false;
  // Processes bound to distinct cores see one CPU each; unbound ones share the machine's.
  const int usable = CPU_COUNT(&cpus);
  const int machine = static_cast<int>(std::thread::hardware_concurrency());
  const int per_process = usable >= machine ? machine / std::max(on_this_machine, 1) : usable;
  return per_process >= 2;
}

class MpiGroup final : public CollectiveGroup {
 public:
  MpiGroup(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // The members' ranks in the job, which is what a process that leaves is known by.
    MPI_Group mine, world;
    MPI_Comm_group(comm_, &mine);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> ranks(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) ranks[static_cast<size_t>(r)] = r;
    world_ranks_.resize(ranks.size());
    MPI_Group_translate_ranks(mine, size_, ranks.data(), world, world_ranks_.data());
    MPI_Group_free(&mine);
    MPI_Group_free(&world);
    background_ = sums_in_background_here(comm_);
  }
  ~MpiGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm comm() const { return comm_; }
  std::string describe() const override {
    return fmt::format("an MPI communicator of {} processes", size_);
  }
  bool sums_in_background() const override { return background_; }

  // The sum, by one of two fixed-order algorithms chosen by the array's size and the number of
  // members (sum_algorithm). Either way every element is added in an order that depends only
  // on (count, size), so every member ends with the same bits, for any network or timing.
  std::string sum_in_place(void* data, int64_t count, DType dtype) override {
    if (std::string err = agree(Op::psum, count, dtype, 0); !err.empty()) return err;
    if (size_ == 1 || count == 0) return {};
    if (sum_algorithm(count * byte_size(dtype), size_) == SumAlgorithm::tree)
      return tree_sum(data, count, dtype);
    return segment_sum(data, count, dtype);
  }

  // Data moves in rank order segments: member r sums segment r of everybody's data, in rank
  // order, then every member gathers the sums. The bytes moved per member are about
  // 2 * count * (size - 1) / size elements, as a ring allreduce, in 2 (size - 1) messages.
  std::string segment_sum(void* data, int64_t count, DType dtype) {
    const int64_t bytes = byte_size(dtype);
    auto seg_begin = [&](int r) { return count * r / size_; };
    auto seg_bytes = [&](int r) {
      return static_cast<int>((seg_begin(r + 1) - seg_begin(r)) * bytes);
    };
    auto seg_offset = [&](int r) { return static_cast<int>(seg_begin(r) * bytes); };
    const int64_t mine = seg_begin(rank_ + 1) - seg_begin(rank_);
    std::byte* own = static_cast<std::byte*>(data) + seg_offset(rank_);
    // Every other member's piece of my segment (my own piece stays where it is), into a buffer
    // kept from call to call so no fresh pages are touched per allreduce.
    std::vector<int> send_counts(size_), send_displs(size_), recv_counts(size_), recv_displs(size_);
    for (int r = 0; r < size_; ++r) {
      send_counts[r] = r == rank_ ? 0 : seg_bytes(r);
      send_displs[r] = seg_offset(r);
      recv_counts[r] = r == rank_ ? 0 : static_cast<int>(mine * bytes);
      recv_displs[r] = static_cast<int>(r * mine * bytes);
    }
    const size_t need = static_cast<size_t>(size_ * mine * bytes);
    if (scratch_.size() < need) scratch_.resize(need);
    std::byte* pieces = scratch_.data();
    MPI_Alltoallv(data, send_counts.data(), send_displs.data(), MPI_BYTE, pieces,
                  recv_counts.data(), recv_displs.data(), MPI_BYTE, comm_);
    // piece(0) + piece(1) + ... in rank order, into the first piece (member 0's own data).
    auto piece = [&](int r) { return r == rank_ ? own : pieces + r * mine * bytes; };
    for (int r = 1; r < size_; ++r) add_elements(piece(0), piece(r), mine, dtype);
    if (rank_ != 0) std::memcpy(own, piece(0), static_cast<size_t>(mine * bytes));
    std::vector<int> counts(size_), displs(size_);
    for (int r = 0; r < size_; ++r) {
      counts[r] = seg_bytes(r);
      displs[r] = seg_offset(r);
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), displs.data(), MPI_BYTE,
                   comm_);
    return {};
  }

  // A binomial tree to member 0, then a broadcast: at step k, a member whose k-th bit is its
  // lowest set bit sends its partial sum to the member 2^k below it, which adds it after its
  // own ((x0 + x1) + (x2 + x3)) + ...). 2 log2(size) messages of the whole array: fewer than
  // the segments' for small arrays and many members.
  std::string tree_sum(void* data, int64_t count, DType dtype) {
    constexpr int kTag = 0x7073;  // "ps"
    const int bytes = static_cast<int>(count * byte_size(dtype));
    if (scratch_.size() < static_cast<size_t>(bytes)) scratch_.resize(static_cast<size_t>(bytes));
    for (int step = 1; step < size_; step <<= 1) {
      if (rank_ & step) {
        MPI_Send(data, bytes, MPI_BYTE, rank_ - step, kTag, comm_);
        break;
      }
      if (rank_ + step < size_) {
        MPI_Recv(scratch_.data(), bytes, MPI_BYTE, rank_ + step, kTag, comm_, MPI_STATUS_IGNORE);
        add_elements(data, scratch_.data(), count, dtype);
      }
    }
    MPI_Bcast(data, bytes, MPI_BYTE, 0, comm_);
    return {};
  }

  std::string all_gather(const void* in, void* out, int64_t count, DType dtype) override {
    if (std::string err = agree(Op::all_gather, count, dtype, 0); !err.empty()) return err;
    const int n = static_cast<int>(count * byte_size(dtype));
    MPI_Allgather(in, n, MPI_BYTE, out, n, MPI_BYTE, comm_);
    return {};
  }

  std::string broadcast(void* data, int64_t count, DType dtype, int root) override {
    if (std::string err = agree(Op::broadcast, count, dtype, root); !err.empty()) return err;
    if (root >= size_) return fmt::format("root {} is not a member of {}", root, describe());
    MPI_Bcast(data, static_cast<int>(count * byte_size(dtype)), MPI_BYTE, root, comm_);
    return {};
  }

 private:
  // One small allreduce before the data moves: every member learns the smallest and largest
  // of each member's (collective, dtype, count, root), so all of them see the same mismatch
  // and return the same error instead of waiting on each other. It is also where a member
  // that left the job is noticed (distributed/departures.h): before the data moves, every
  // member has arrived.
  std::string agree(Op op, int64_t count, DType dtype, int root) const {
    if (const int gone = departed_member(world_ranks_); gone >= 0)
      return fmt::format(
          "process {} of the job has left it (its program ended), so a collective it is a "
          "member of can never complete",
          gone);
    long long v[8] = {static_cast<long long>(op),
                      -static_cast<long long>(op),
                      static_cast<long long>(dtype),
                      -static_cast<long long>(dtype),
                      count,
                      -count,
                      root,
                      -root};
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, v, 8, MPI_LONG_LONG, MPI_MAX, comm_, &request);
    wait_watching(request, world_ranks_,
                  fmt::format("{} over {}", op_name(static_cast<long long>(op)), describe()));
    if (v[0] != -v[1])
      return fmt::format("the processes disagree on the collective ({} and {} at the same step)",
                         op_name(-v[1]), op_name(v[0]));
    if (v[2] != -v[3])
      return fmt::format("the processes disagree on the dtype ({} and {})",
                         short_name(static_cast<DType>(-v[3])),
                         short_name(static_cast<DType>(v[2])));
    if (v[4] != -v[5])
      return fmt::format(
          "the processes disagree on the shape: their arrays have between {} and {} elements "
          "(every process must pass the same shape)",
          -v[5], v[4]);
    if (v[6] != -v[7])
      return fmt::format("the processes disagree on the root ({} and {})", -v[7], v[6]);
    if (count * byte_size(dtype) > INT_MAX)
      return fmt::format("{} elements of {} is more than the 2 GiB one MPI message carries", count,
                         short_name(dtype));
    return {};
  }

  MPI_Comm comm_;
  bool owned_;
  std::vector<std::byte> scratch_;  // sum_in_place's received pieces
  std::vector<int> world_ranks_;    // each member's rank in the job
  int rank_ = 0;
  int size_ = 1;
  bool background_ = false;  // sums may run on the communication thread
};

bool mpi_live() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// MPI, callable from one thread at a time: the sums psum_start begins run on the runtime's
// communication thread (runtime/background_sums.h).
void init_mpi(int* argc, char*** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
}

}  // namespace

Communicator Communicator::world() {
  if (!mpi_live())
    throw Error("distributed: MPI is not running; create a refjit::distributed::Session first");
  static const auto world = std::make_shared<MpiGroup>(MPI_COMM_WORLD, false);
  return Communicator(world);
}

int Communicator::rank() const { return group_->rank(); }
int Communicator::size() const { return group_->size(); }

Communicator Communicator::split(int color, int key) const {
  auto* mpi = dynamic_cast<MpiGroup*>(group_.get());
  if (!mpi) throw Error("distributed: split needs an MPI communicator");
  MPI_Comm out;
  MPI_Comm_split(mpi->comm(), color, key, &out);
  return Communicator(std::make_shared<MpiGroup>(out, true));
}

Communicator Communicator::from_fortran_handle(int handle) {
  if (!mpi_live())
    throw Error("distributed: MPI is not running; create a refjit::distributed::Session first");
  MPI_Comm given = MPI_Comm_f2c(static_cast<MPI_Fint>(handle));
  if (given == MPI_COMM_NULL) throw Error("distributed: the communicator handle is MPI_COMM_NULL");
  MPI_Comm own;
  if (MPI_Comm_dup(given, &own) != MPI_SUCCESS)
    throw Error(fmt::format("distributed: MPI_Comm_dup of communicator handle {} failed", handle));
  return Communicator(std::make_shared<MpiGroup>(own, true));
}

Session::Session(int& argc, char**& argv) {
  if (!mpi_live()) {
    init_mpi(&argc, &argv);
    owns_mpi_ = true;
  }
  start_watching_departures();
  set_default_group(Communicator::world().group());
}

Session::Session() {
  if (!mpi_live()) {
    init_mpi(nullptr, nullptr);
    owns_mpi_ = true;
  }
  start_watching_departures();
  set_default_group(Communicator::world().group());
}

Session::~Session() {
  set_default_group(nullptr);
  if (!mpi_live()) return;
  announce_departure();
  if (owns_mpi_) MPI_Finalize();
}

int rank() { return mpi_live() ? Communicator::world().rank() : 0; }
int size() { return mpi_live() ? Communicator::world().size() : 1; }

void bind_axis(const std::string& axis, const Communicator& comm) {
  refjit::bind_axis(axis, comm.group());
}

}  // namespace refjit::distributed
