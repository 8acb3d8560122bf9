#include "runtime/kernels/float_builtins.h"

#include <bit>
#include <cstdint>

#include "refjit/ir/half_float.h"

extern "C" float refjit_truncsfbf2(float x) {
  return std::bit_cast<float>(static_cast<uint32_t>(refjit::BFloat16(x).bits));
}
