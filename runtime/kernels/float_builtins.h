// Compiler builtins that LLVM's code generator may call from JIT code and that the process
// need not have: on x86 CPUs without AVX512-BF16, rounding a float to bfloat16 (in a
// comparison or select on bf16 values, say) becomes a call of __truncsfbf2, which GCC 12's
// libgcc does not provide. native.cpp binds these under the builtins' names.
#pragma once

extern "C" {
// __truncsfbf2: x rounded to bfloat16 (to nearest, ties to even; NaN stays NaN). The x86-64
// ABI returns a bfloat16 in the low 16 bits of xmm0, which is where a float's low bits are
// returned, so the result is a float carrying the 16 bits.
float refjit_truncsfbf2(float x);
}
