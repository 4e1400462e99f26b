// llmk/arch/convert.cuh: packed conversions between float and the 16-/8-bit formats, as kernels need them.
//
// Packing convention everywhere in llmk: the FIRST element lives in the LOW bits ("lo"), the second in the
// high bits ("hi"), matching the mma fragment layouts (element 2t in the low half, 2t+1 in the high half).
// Note the PTX operand order of cvt.rn.f16x2.f32 d, a, b: a goes to the UPPER half of d, b to the lower;
// these functions pass (hi, lo) to the instruction so that callers never see that order.
//
//   std::uint32_t cvt_f32x2_to_f16x2(float lo, float hi)      cvt.rn.f16x2.f32   (RN, overflow -> inf,
//                                                             NaN -> 0x7FFF)
//   std::uint32_t cvt_f32x2_to_bf16x2(float lo, float hi)     cvt.rn.bf16x2.f32  (RN, overflow -> inf,
//                                                             NaN -> 0x7FFF)
//   void cvt_f16x2_to_f32x2(std::uint32_t, float& lo, float& hi)    exact
//   void cvt_bf16x2_to_f32x2(std::uint32_t, float& lo, float& hi)   exact (a shift; NaN payloads kept)
//   std::uint16_t cvt_f32x2_to_e4m3x2(float lo, float hi)     cvt.rn.satfinite.e4m3x2.f32
//   std::uint16_t cvt_f32x2_to_e5m2x2(float lo, float hi)     cvt.rn.satfinite.e5m2x2.f32
//   std::uint16_t cvt_f16x2_to_e4m3x2(std::uint32_t)          cvt.rn.satfinite.e4m3x2.f16x2
//   std::uint16_t cvt_f16x2_to_e5m2x2(std::uint32_t)          cvt.rn.satfinite.e5m2x2.f16x2
//   std::uint32_t cvt_e4m3x2_to_f16x2(std::uint16_t)          cvt.rn.f16x2.e4m3x2  (exact)
//   std::uint32_t cvt_e5m2x2_to_f16x2(std::uint16_t)          cvt.rn.f16x2.e5m2x2  (exact)
//
// fp8 conversions use the hardware instructions on sm_89+ and numeric.cuh's software path elsewhere (sm_80,
// the simulator, the host). .satfinite: finite values beyond the range and +-inf become +-max finite
// (448 for e4m3, 57344 for e5m2); NaN becomes NaN (numeric.cuh's canonical 0x7F; the GPU's NaN bit pattern
// may differ, so tests compare NaN-ness). The software path is bit-exact with the hardware otherwise.
// In the simulator every function here is the numeric.cuh software path (it needs no warp).
//
// Usage (an fp32 accumulator pair to an f16x2 operand register, and an e4m3 pair to f16x2):
//
//   std::uint32_t h2 = llmk::arch::cvt_f32x2_to_f16x2(acc[0], acc[1]);   // acc[0] in bits 0-15
//   std::uint32_t w2 = llmk::arch::cvt_e4m3x2_to_f16x2(codes);            // codes: two e4m3 bytes
#pragma once

#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"

#include <cstdint>
#include <cstring>

namespace llmk::arch {

/// cvt.rn.f16x2.f32: (lo, hi) rounded to f16, lo in bits 0-15 (example: the file comment).
LLMK_HOST_DEVICE std::uint32_t cvt_f32x2_to_f16x2(float lo, float hi) {
#if LLMK_DEVICE_PASS
  std::uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return std::uint32_t(::llmk::half(lo).bits) | (std::uint32_t(::llmk::half(hi).bits) << 16);
#endif
}

/// cvt.rn.bf16x2.f32: (lo, hi) rounded to bf16, lo in bits 0-15 (as cvt_f32x2_to_f16x2).
LLMK_HOST_DEVICE std::uint32_t cvt_f32x2_to_bf16x2(float lo, float hi) {
#if LLMK_DEVICE_PASS
  std::uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return std::uint32_t(::llmk::bfloat16(lo).bits) | (std::uint32_t(::llmk::bfloat16(hi).bits) << 16);
#endif
}

/// The two f16 of `packed` as floats (exact):  float lo, hi; cvt_f16x2_to_f32x2(h2, lo, hi);
LLMK_HOST_DEVICE void cvt_f16x2_to_f32x2(std::uint32_t packed, float& lo, float& hi) {
#if LLMK_DEVICE_PASS
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}\n"
      : "=f"(lo), "=f"(hi)
      : "r"(packed));
#else
  lo = ::llmk::half::from_bits(std::uint16_t(packed & 0xFFFFu)).to_float();
  hi = ::llmk::half::from_bits(std::uint16_t(packed >> 16)).to_float();
#endif
}

/// The two bf16 of `packed` as floats (exact, NaN payloads kept); as cvt_f16x2_to_f32x2.
LLMK_HOST_DEVICE void cvt_bf16x2_to_f32x2(std::uint32_t packed, float& lo, float& hi) {
  // Exact on every backend: a bfloat16 is the upper half of a float.
  const std::uint32_t lo_bits = packed << 16;
  const std::uint32_t hi_bits = packed & 0xFFFF0000u;
  std::memcpy(&lo, &lo_bits, 4);
  std::memcpy(&hi, &hi_bits, 4);
}

/// cvt.rn.satfinite.e4m3x2.f32: (lo, hi) to two e4m3 bytes, lo in bits 0-7.
///   std::uint16_t q2 = llmk::arch::cvt_f32x2_to_e4m3x2(x0 * inv_scale, x1 * inv_scale);
LLMK_HOST_DEVICE std::uint16_t cvt_f32x2_to_e4m3x2(float lo, float hi) {
#if LLMK_DEVICE_PASS && LLMK_ARCH >= 890
  std::uint16_t d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return std::uint16_t(::llmk::float8_e4m3::from_float_satfinite(lo).bits |
                       (std::uint16_t(::llmk::float8_e4m3::from_float_satfinite(hi).bits) << 8));
#endif
}

/// cvt.rn.satfinite.e5m2x2.f32: (lo, hi) to two e5m2 bytes, lo in bits 0-7 (as cvt_f32x2_to_e4m3x2).
LLMK_HOST_DEVICE std::uint16_t cvt_f32x2_to_e5m2x2(float lo, float hi) {
#if LLMK_DEVICE_PASS && LLMK_ARCH >= 890
  std::uint16_t d;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\n" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return std::uint16_t(::llmk::float8_e5m2::from_float_satfinite(lo).bits |
                       (std::uint16_t(::llmk::float8_e5m2::from_float_satfinite(hi).bits) << 8));
#endif
}

// f16 -> fp8: the f16 value converts exactly to float, so the software path rounds once, like the hardware.
/// cvt.rn.satfinite.e4m3x2.f16x2: the two f16 of `h2` to two e4m3 bytes:  auto q2 = cvt_f16x2_to_e4m3x2(h2);
LLMK_HOST_DEVICE std::uint16_t cvt_f16x2_to_e4m3x2(std::uint32_t h2) {
#if LLMK_DEVICE_PASS && LLMK_ARCH >= 890
  std::uint16_t d;
  asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;\n" : "=h"(d) : "r"(h2));
  return d;
#else
  float lo, hi;
  cvt_f16x2_to_f32x2(h2, lo, hi);
  return cvt_f32x2_to_e4m3x2(lo, hi);
#endif
}

/// cvt.rn.satfinite.e5m2x2.f16x2: the two f16 of `h2` to two e5m2 bytes (as cvt_f16x2_to_e4m3x2).
LLMK_HOST_DEVICE std::uint16_t cvt_f16x2_to_e5m2x2(std::uint32_t h2) {
#if LLMK_DEVICE_PASS && LLMK_ARCH >= 890
  std::uint16_t d;
  asm("cvt.rn.satfinite.e5m2x2.f16x2 %0, %1;\n" : "=h"(d) : "r"(h2));
  return d;
#else
  float lo, hi;
  cvt_f16x2_to_f32x2(h2, lo, hi);
  return cvt_f32x2_to_e5m2x2(lo, hi);
#endif
}

// fp8 -> f16: every e4m3 / e5m2 value is exactly representable in f16.
/// cvt.rn.f16x2.e4m3x2: two e4m3 bytes (bits 0-7 first) to f16x2, exact (example: the file comment).
LLMK_HOST_DEVICE std::uint32_t cvt_e4m3x2_to_f16x2(std::uint16_t f8x2) {
#if LLMK_DEVICE_PASS && LLMK_ARCH >= 890
  std::uint32_t d;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(d) : "h"(f8x2));
  return d;
#else
  return cvt_f32x2_to_f16x2(::llmk::float8_e4m3::from_bits(std::uint8_t(f8x2 & 0xFFu)).to_float(),
                            ::llmk::float8_e4m3::from_bits(std::uint8_t(f8x2 >> 8)).to_float());
#endif
}

/// cvt.rn.f16x2.e5m2x2: two e5m2 bytes (bits 0-7 first) to f16x2, exact (as cvt_e4m3x2_to_f16x2).
LLMK_HOST_DEVICE std::uint32_t cvt_e5m2x2_to_f16x2(std::uint16_t f8x2) {
#if LLMK_DEVICE_PASS && LLMK_ARCH >= 890
  std::uint32_t d;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;\n" : "=r"(d) : "h"(f8x2));
  return d;
#else
  return cvt_f32x2_to_f16x2(::llmk::float8_e5m2::from_bits(std::uint8_t(f8x2 & 0xFFu)).to_float(),
                            ::llmk::float8_e5m2::from_bits(std::uint8_t(f8x2 >> 8)).to_float());
#endif
}

}  // namespace llmk::arch
