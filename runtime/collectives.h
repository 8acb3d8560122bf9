// The processes a named axis spans, and the collectives over them (psum, all_gather,
// broadcast_from, axis_index): what the interpreter's rules and the native code's runtime
// calls run. A group is refjit's view of a communicator; the MPI one lives in the optional
// refjit_distributed library (refjit/distributed.h), and an axis bound to nothing is a group
// of this process alone (every collective is then the identity, as on one device in JAX).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "refjit/ir/dtype.h"

namespace refjit {

class CollectiveGroup {
 public:
  virtual ~CollectiveGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Each collective is called by every member with the same dtype and count. When they
  // disagree, every member gets the same error message back (and no data moves), so no member
  // waits forever; an empty string is success.
  //
  // data[i] = the sum over members, in rank order, of their data[i] (bit-for-bit the same on
  // every member, whatever the number of members or the network does).
  virtual std::string sum_in_place(void* data, int64_t count, DType dtype) = 0;
  // out = every member's `in` (count elements each), stacked in rank order.
  virtual std::string all_gather(const void* in, void* out, int64_t count, DType dtype) = 0;
  // data = root's data on every member.
  virtual std::string broadcast(void* data, int64_t count, DType dtype, int root) = 0;
  // A short description for messages: "MPI communicator of 2 processes".
  virtual std::string describe() const = 0;
  // Whether sum_in_place may run on the runtime's communication thread while the caller
  // computes (runtime/background_sums.h): the group's collectives are then made from two
  // threads, one at a time. Worth it only when a CPU is free for that thread.
  virtual bool sums_in_background() const { return false; }
};

// Binds `axis` to `group` for the collectives that name it (replacing any earlier binding).
void bind_axis(const std::string& axis, std::shared_ptr<CollectiveGroup> group);
void unbind_axis(const std::string& axis);
// The group for axes bound to nothing (this process alone unless set, e.g. by
// distributed::Session to all its processes).
void set_default_group(std::shared_ptr<CollectiveGroup> group);
// The group `axis` names: its binding, else the default group.
std::shared_ptr<CollectiveGroup> group_of(std::string_view axis);

// A group of this process alone.
std::shared_ptr<CollectiveGroup> single_process_group();

// Empty when `group` spans `traced` processes, else why a program traced for that many
// (a shard_map's mesh axis, an all_gather's size) cannot run on it.
std::string axis_size_mismatch(int64_t traced, const CollectiveGroup& group);

// acc[i] += x[i] for `count` elements of `dtype` (not bool): the local step of a sum.
void add_elements(void* acc, const void* x, int64_t count, DType dtype);

// Native code names axes by number: the axis's id (stable for the process's life) and back.
int64_t axis_id(std::string_view axis);
std::string axis_name_of(int64_t id);

// A collective failure inside native code, recorded by the runtime entry points (which cannot
// throw through generated code) and thrown by the caller once the generated code returns.
void record_collective_error(std::string message);
// Throws refjit::Error with the first recorded message, if any, and clears it.
void throw_pending_collective_error();

}  // namespace refjit

// The entry points generated code calls (backend/lower_collective.cpp). Each array
// comes as an unranked memref (RefjitMemRefHead, runtime/kernels/gemm.h); dtype is a DType's
// value. A failure is recorded (record_collective_error) and the data left as it was.
extern "C" {
struct RefjitMemRefHead;
void refjit_psum(int64_t axis, int64_t dtype, int64_t rank, const RefjitMemRefHead* data,
                 int64_t count);
void refjit_all_gather(int64_t axis, int64_t dtype, int64_t axis_size, int64_t in_rank,
                       const RefjitMemRefHead* in, int64_t out_rank, const RefjitMemRefHead* out,
                       int64_t count);
// psum_start: starts the sum of `data` in place (runtime/background_sums.h); psum_wait: waits
// for the sum started at `data` (nothing when it was done at the start).
void refjit_psum_start(int64_t axis, int64_t dtype, int64_t rank, const RefjitMemRefHead* data,
                       int64_t count);
void refjit_psum_wait(int64_t dtype, int64_t rank, const RefjitMemRefHead* data);
void refjit_broadcast_from(int64_t axis, int64_t dtype, int64_t root, int64_t rank,
                           const RefjitMemRefHead* data, int64_t count);
void refjit_axis_index(int64_t axis, int64_t rank, const RefjitMemRefHead* out);
// axis_index with a required group size (axis_index[axis_size=n]): a mismatch is recorded.
void refjit_axis_index_checked(int64_t axis, int64_t axis_size, int64_t rank,
                               const RefjitMemRefHead* out);
}
