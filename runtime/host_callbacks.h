// Host calls: how a program's debug_callback eqns (jax.debug.print, jax.debug.callback) reach
// a function of the process that runs it. The program holds only a number (the eqn's
// `callback` param); the process's handler knows what function each number names (the
// Python package registers one, python/refjit/_callbacks.py). The interpreter calls the
// handler directly; compiled code calls the entry points below.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "refjit/array.h"

namespace refjit {

// Called with the eqn's callback number and a copy of each operand, in order.
using HostCallHandler = std::function<void(int64_t callback, std::vector<Array> args)>;

// Sets the process's handler (an empty function removes it).
void set_host_call_handler(HostCallHandler handler);

// Calls the handler; throws refjit::Error when none is set. What the handler throws
// propagates.
void call_host(int64_t callback, std::vector<Array> args);

// Compiled code cannot let an exception unwind through its frames: the entry points keep the
// first failure of a run (per thread) and skip the host calls after it, and the caller
// rethrows it once the code returns (backend/native.cpp).
void throw_pending_host_call_error();

}  // namespace refjit

// The entry points generated code calls (backend/lower_host.cpp), one host call as
// begin, one `arg` per operand (an unranked memref: its rank, then its descriptor; dtype is a
// DType's value), then end, which makes the call.
extern "C" {
struct RefjitMemRefHead;
void refjit_host_call_begin(int64_t callback);
void refjit_host_call_arg(int64_t dtype, int64_t rank, const RefjitMemRefHead* data);
void refjit_host_call_end();
}
