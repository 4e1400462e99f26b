// llmk/arch/packed_math.cuh: packed 16-bit float arithmetic, two lanes per 32-bit register (lo = bits 0..15,
// hi = bits 16..31, convert.cuh's convention), each lane rounded to nearest even once.
//
//   std::uint32_t sub_f16x2(a, b)    sub.rn.f16x2 d, a, b               a - b per lane
//   std::uint32_t mul_f16x2(a, b)    mul.rn.f16x2 d, a, b               a * b per lane
//   std::uint32_t sub_bf16x2(a, b)   fma.rn.bf16x2 d, b', 1.0, a        a - b per lane (b' = -b;
//                                                                       sub.rn.bf16x2 needs sm_90, the fma
//                                                                       rounds the same)
//   std::uint32_t mul_bf16x2(a, b)   fma.rn.bf16x2 d, a, b, -0.0        a * b per lane (the same rounding)
//
// NaN results are the canonical 0x7FFF (as the PTX ISA specifies for these instructions); subnormals are kept
// (no .ftz). Off the device (the simulator, the host) a lane is computed in double and rounded once to the
// format: a product of two 16-bit floats is exact in double, and so is a difference whenever the exponents of
// its operands are within 45 of each other; beyond that the smaller operand is far below half an ulp of the
// larger, which is the correctly rounded result both ways. So the emulation is bit-exact.
//
// Usage (dequantize two codes at once: (code - zero) * scale, every operand an f16x2 register):
//
//   std::uint32_t w2 = llmk::arch::mul_f16x2(llmk::arch::sub_f16x2(codes2, zero2), scale2);
#pragma once

#include <cmath>
#include <cstdint>

#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"

namespace llmk::arch {

namespace detail {

// Round-to-nearest-even of a double onto a binary16 (kMant = 10, kMinExp = -14, max 65504) or bfloat16
// (kMant = 7, kMinExp = -126) lane, as raw bits. The value is first rounded onto the format's grid in double
// (exact: scaling by a power of two), which float then holds exactly.
template <int kMant, int kMinExp, bool kHalf>
LLMK_HOST_DEVICE std::uint16_t round_lane(double x) {
  if (std::isnan(x)) return 0x7FFF;
  const double a = std::fabs(x);
  // Ties-to-even at the top of the range rounds to infinity (the largest finite value has an odd
  // significand).
  const double overflow = kHalf ? 65520.0 : std::ldexp(2.0 - std::ldexp(1.0, -8), 127);
  float v;
  if (a >= overflow) {
    v = INFINITY;
  } else {
    int e = 0;
    (void)std::frexp(a, &e);                            // a = f 2^e, f in [0.5, 1): exponent e - 1
    const int exp = e - 1 < kMinExp ? kMinExp : e - 1;  // subnormals share the smallest normal's grid
    const double ulp = std::ldexp(1.0, exp - kMant);
    v = static_cast<float>(std::nearbyint(a / ulp) * ulp);
  }
  if (std::signbit(x)) v = -v;
  if constexpr (kHalf)
    return ::llmk::detail::float_to_half_bits(v);  // exact: v is on the binary16 grid
  else
    return static_cast<std::uint16_t>(::llmk::detail::float_to_bits(v) >> 16);  // exact: on the bfloat16 grid
}

template <bool kHalf, class Op>
LLMK_HOST_DEVICE std::uint32_t emulate_x2(std::uint32_t a, std::uint32_t b, Op op) {
  std::uint32_t out = 0;
  for (int lane = 0; lane < 2; ++lane) {
    const auto x = static_cast<std::uint16_t>(a >> (16 * lane)),
               y = static_cast<std::uint16_t>(b >> (16 * lane));
    double fx, fy;
    if constexpr (kHalf) {
      fx = ::llmk::detail::half_bits_to_float(x);
      fy = ::llmk::detail::half_bits_to_float(y);
    } else {
      fx = ::llmk::detail::bits_to_float(std::uint32_t{x} << 16);
      fy = ::llmk::detail::bits_to_float(std::uint32_t{y} << 16);
    }
    const std::uint16_t r =
        kHalf ? round_lane<10, -14, true>(op(fx, fy)) : round_lane<7, -126, false>(op(fx, fy));
    out |= std::uint32_t{r} << (16 * lane);
  }
  return out;
}

struct SubOp {
  LLMK_HOST_DEVICE double operator()(double x, double y) const { return x - y; }
};
struct MulOp {
  LLMK_HOST_DEVICE double operator()(double x, double y) const { return x * y; }
};

}  // namespace detail

/// sub.rn.f16x2: a - b per f16 lane (example: the file comment).
LLMK_HOST_DEVICE std::uint32_t sub_f16x2(std::uint32_t a, std::uint32_t b) {
#if LLMK_DEVICE_PASS
  std::uint32_t d;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  return detail::emulate_x2<true>(a, b, detail::SubOp{});
#endif
}

/// mul.rn.f16x2: a * b per f16 lane (example: the file comment).
LLMK_HOST_DEVICE std::uint32_t mul_f16x2(std::uint32_t a, std::uint32_t b) {
#if LLMK_DEVICE_PASS
  std::uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  return detail::emulate_x2<true>(a, b, detail::MulOp{});
#endif
}

/// a - b per bf16 lane (an fma):  llmk::arch::mul_bf16x2(llmk::arch::sub_bf16x2(codes2, zero2), scale2)
LLMK_HOST_DEVICE std::uint32_t sub_bf16x2(std::uint32_t a, std::uint32_t b) {
#if LLMK_DEVICE_PASS
  std::uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(b ^ 0x80008000u), "r"(0x3F803F80u), "r"(a));
  return d;
#else
  return detail::emulate_x2<false>(a, b, detail::SubOp{});
#endif
}

/// a * b per bf16 lane (an fma with -0.0; example: sub_bf16x2).
LLMK_HOST_DEVICE std::uint32_t mul_bf16x2(std::uint32_t a, std::uint32_t b) {
#if LLMK_DEVICE_PASS
  std::uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
#else
  return detail::emulate_x2<false>(a, b, detail::MulOp{});
#endif
}

}  // namespace llmk::arch
