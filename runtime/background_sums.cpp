#include "runtime/background_sums.h"

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

namespace refjit {

namespace {

struct Request {
  std::shared_ptr<CollectiveGroup> group;
  std::string axis;
  void* data;
  int64_t count;
  DType dtype;
  bool background;  // the communication thread may run it
  bool done = false;
  std::string error;
};

thread_local bool t_communication_thread = false;
std::atomic<int64_t> g_run_on_thread{0};

// The started sums, in order, and the communication thread that runs those whose group allows
// it (made when the first such sum starts). A caller waiting for a sum runs the ones before it
// that have not begun itself: a sum whose group does not allow the thread runs so, at its wait,
// still bucketed and in order. Made once and never destroyed: the thread waits on the queue for
// the life of the process (a detached thread blocked on a condition variable does not keep the
// process from exiting).
class SumQueue {
 public:
  void start(std::shared_ptr<Request> r) {
    std::lock_guard lock(mu_);
    if (r->background && !threaded_) {
      threaded_ = true;
      std::thread([this] { run(); }).detach();
    }
    in_flight_[r->data] = r;
    queue_.push_back(std::move(r));
    if (threaded_) work_.notify_one();
  }

  std::string finish(void* data) {
    std::unique_lock lock(mu_);
    auto it = in_flight_.find(data);
    if (it == in_flight_.end()) return {};
    std::shared_ptr<Request> r = it->second;
    drain(lock, [&] { return r->done; });
    in_flight_.erase(data);
    return std::move(r->error);
  }

  void finish_all() {
    std::unique_lock lock(mu_);
    drain(lock, [&] { return queue_.empty() && !running_; });
  }

 private:
  // Until `enough`: runs the next sum that has not begun on this thread, or waits for the one
  // running (one runs at a time, so the group's collectives are made in the order they were
  // started, from one thread at a time).
  template <class Enough>
  void drain(std::unique_lock<std::mutex>& lock, Enough enough) {
    while (!enough()) {
      if (!running_ && !queue_.empty()) {
        std::shared_ptr<Request> next = queue_.front();
        queue_.pop_front();
        execute(*next, lock);
      } else {
        finished_.wait(lock);
      }
    }
  }

  void run() {
    t_communication_thread = true;
    std::unique_lock lock(mu_);
    for (;;) {
      work_.wait(lock, [&] { return !queue_.empty() && !running_ && queue_.front()->background; });
      std::shared_ptr<Request> r = queue_.front();
      queue_.pop_front();
      execute(*r, lock);
      g_run_on_thread.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Runs `r` (taken off the queue) with `lock` released.
  void execute(Request& r, std::unique_lock<std::mutex>& lock) {
    running_ = true;
    lock.unlock();
    std::string err;
    try {  // (on the communication thread nothing may escape: it would end the process)
      err = r.group->sum_in_place(r.data, r.count, r.dtype);
    } catch (const std::exception& e) {
      err = e.what();
    }
    lock.lock();
    if (!err.empty()) r.error = fmt::format("psum over '{}': {}", r.axis, err);
    r.done = true;
    running_ = false;
    finished_.notify_all();
    if (threaded_) work_.notify_one();
  }

  std::mutex mu_;
  std::condition_variable work_;
  std::condition_variable finished_;
  std::deque<std::shared_ptr<Request>> queue_;
  std::unordered_map<void*, std::shared_ptr<Request>> in_flight_;
  bool running_ = false;
  bool threaded_ = false;
};

SumQueue& queue() {
  static SumQueue* q = new SumQueue;  // never destroyed (see SumQueue)
  return *q;
}

// Set once the queue exists: a process that never starts a sum pays nothing at its waits.
std::atomic<bool> any_started{false};
std::once_flag queue_made;

}  // namespace

void start_background_sum(std::shared_ptr<CollectiveGroup> group, std::string axis, void* data,
                          int64_t count, DType dtype) {
  if (group->size() == 1 || count == 0) {
    std::string err = group->sum_in_place(data, count, dtype);
    if (!err.empty()) record_collective_error(fmt::format("psum over '{}': {}", axis, err));
    return;
  }
  std::call_once(queue_made, [] {
    queue();
    any_started = true;
  });
  auto r = std::make_shared<Request>();
  r->group = std::move(group);
  r->axis = std::move(axis);
  r->data = data;
  r->count = count;
  r->dtype = dtype;
  r->background = r->group->sums_in_background();
  queue().start(std::move(r));
}

std::string finish_background_sum(void* data) {
  if (!any_started) return {};
  return queue().finish(data);
}

void finish_background_sums() {
  if (any_started) queue().finish_all();
}

bool on_communication_thread() { return t_communication_thread; }

int64_t sums_run_on_communication_thread() {
  return g_run_on_thread.load(std::memory_order_relaxed);
}

}  // namespace refjit
