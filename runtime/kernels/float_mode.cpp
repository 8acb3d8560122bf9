#include "runtime/kernels/float_mode.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#define REFJIT_HAS_MXCSR 1
#endif

namespace refjit::kernels {

namespace {
#ifdef REFJIT_HAS_MXCSR
constexpr uint32_t kFlushToZero = 0x8000;       // FTZ: subnormal results become zero
constexpr uint32_t kDenormalsAreZero = 0x0040;  // DAZ: subnormal operands read as zero
#endif
}  // namespace

uint32_t current_float_mode() {
#ifdef REFJIT_HAS_MXCSR
  return _mm_getcsr();
#else
  return 0;
#endif
}

uint32_t flushing_subnormals(uint32_t mode) {
#ifdef REFJIT_HAS_MXCSR
  return mode | kFlushToZero | kDenormalsAreZero;
#else
  return mode;
#endif
}

ScopedFloatMode::ScopedFloatMode(uint32_t mode) : saved_(current_float_mode()) {
#ifdef REFJIT_HAS_MXCSR
  if (mode != saved_) _mm_setcsr(mode);
#else
  (void)mode;
#endif
}

ScopedFloatMode::~ScopedFloatMode() {
#ifdef REFJIT_HAS_MXCSR
  if (current_float_mode() != saved_) _mm_setcsr(saved_);
#endif
}

}  // namespace refjit::kernels
