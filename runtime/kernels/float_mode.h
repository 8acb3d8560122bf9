// The floating-point mode native code runs in. As XLA's CPU backend does, refjit's compiled
// code flushes subnormal results to zero and reads subnormal operands as zero (the FTZ and DAZ
// bits of x86's MXCSR): on x86 an operation with a subnormal operand or result takes a
// microcode path of about a hundred cycles, so a loop whose values decay toward zero (each step
// multiplying by |w| < 1) otherwise slows down several-fold once they pass 1e-38.
// CompileOptions::flush_subnormals turns it off; the interpreter computes with subnormals.
#pragma once

#include <cstdint>

namespace refjit::kernels {

// The calling thread's floating-point mode bits (MXCSR on x86-64; 0 where not supported).
uint32_t current_float_mode();

// `mode` with subnormals flushed to zero (FTZ and DAZ set; unchanged where not supported).
uint32_t flushing_subnormals(uint32_t mode);

// Sets the calling thread's floating-point mode while it lives, then restores the previous.
class ScopedFloatMode {
 public:
  explicit ScopedFloatMode(uint32_t mode);
  ~ScopedFloatMode();
  ScopedFloatMode(const ScopedFloatMode&) = delete;
  ScopedFloatMode& operator=(const ScopedFloatMode&) = delete;

 private:
  uint32_t saved_;
};

}  // namespace refjit::kernels
