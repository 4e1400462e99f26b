// llmk/arch/minmax.cuh: the NaN-propagating float maximum atom.
//
//   float max_nan(float a, float b)   max.NaN.f32 (sm_80+): one FMNMX
//
// Semantics (PTX ISA, max with .NaN): the result is the canonical NaN (0x7fffffff) when either input is
// NaN; otherwise the larger value, with -0.0 < +0.0; subnormal inputs and results are kept (no .ftz). The
// online softmax needs the NaN to propagate (a NaN score must poison its row, never be skipped as fmaxf
// would), and this does it in one instruction where the compare-and-select form takes three.
//
// Simulator and host: the same rules in C++, bit for bit (tests/arch/atoms.cu checks both builds).
#pragma once

#include <cstdint>

#include "llmk/config.cuh"

#if !LLMK_DEVICE_PASS
#include <cstring>
#endif

namespace llmk::arch {

/// max.NaN.f32: the larger of a and b, NaN when either is NaN (a running row maximum):
///   m = llmk::arch::max_nan(m, s);
LLMK_HOST_DEVICE float max_nan(float a, float b) {
#if LLMK_DEVICE_PASS
  float d;
  asm("max.NaN.f32 %0, %1, %2;\n" : "=f"(d) : "f"(a), "f"(b));
  return d;
#else
  if (a != a || b != b) {
    const std::uint32_t canonical = 0x7fffffffu;
    float nan;
    std::memcpy(&nan, &canonical, sizeof(nan));
    return nan;
  }
  if (a == b) {  // equal, or +0 and -0: +0 wins (-0 < +0); for equal non-zero values either is the same
    std::uint32_t ua, ub;
    std::memcpy(&ua, &a, sizeof(ua));
    std::memcpy(&ub, &b, sizeof(ub));
    return (ua & 0x80000000u) ? b : a;
  }
  return a > b ? a : b;
#endif
}

}  // namespace llmk::arch
