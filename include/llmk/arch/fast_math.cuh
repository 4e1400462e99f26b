// llmk/arch/fast_math.cuh: approximate special-function atoms (MUFU).
//
//   float ex2_approx(float x)   ex2.approx.ftz.f32: 2^x
//   float rcp_approx(float x)   rcp.approx.ftz.f32: 1/x
//
// These are APPROXIMATIONS on the GPU: the PTX ISA gives ex2.approx.f32 a maximum relative error of about
// 2^-22 (about 2 ulp) and rcp.approx.f32 about 1 ulp. Kernels must not rely on exact results, and GPU tests
// use a relative tolerance. .ftz: subnormal inputs are read as zero (of the same sign) and subnormal results
// are flushed to zero (of the same sign).
//
// Simulator and host: deterministic, accurate stand-ins with the same special cases: inputs are flushed, the
// function is computed in double and rounded once to float, and subnormal results are flushed.
//   ex2: NaN -> NaN, -inf -> +0, +inf -> +inf, +-0 (and subnormals) -> 1.
//   rcp: NaN -> NaN, +-0 (and subnormals) -> +-inf, +-inf -> +-0.
//
// Usage (an online-softmax probability and the final normalization):
//
//   float p = llmk::arch::ex2_approx(s * scale_log2 - m);
//   float inv_l = llmk::arch::rcp_approx(l);
#pragma once

#include "llmk/config.cuh"

#if !LLMK_DEVICE_PASS
#include <cmath>
#endif

namespace llmk::arch {

namespace detail {
#if !LLMK_DEVICE_PASS
inline float flush_subnormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}
#endif
}  // namespace detail

/// ex2.approx.ftz.f32: about 2^x (example: the file comment).
LLMK_HOST_DEVICE float ex2_approx(float x) {
#if LLMK_DEVICE_PASS
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  x = detail::flush_subnormal(x);
  return detail::flush_subnormal(static_cast<float>(std::exp2(static_cast<double>(x))));
#endif
}

/// rcp.approx.ftz.f32: about 1/x (example: the file comment).
LLMK_HOST_DEVICE float rcp_approx(float x) {
#if LLMK_DEVICE_PASS
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  x = detail::flush_subnormal(x);
  // 1/x in double rounded to float is the correctly rounded float reciprocal (53 >= 2 * 24 + 2).
  return detail::flush_subnormal(static_cast<float>(1.0 / static_cast<double>(x)));
#endif
}

}  // namespace llmk::arch
