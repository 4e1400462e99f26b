// llmk/core/math.cuh: small integer helpers, exact fast division by a runtime divisor, and the
// constants online softmax needs. All constexpr where the language allows and usable on host,
// in the simulator and on the device. (The ex2.approx atom lives in llmk/arch, not here.)
#pragma once

#include "llmk/config.cuh"

#include <cmath>
#include <cstdint>

namespace llmk {

/// log2(e): exp(x) == exp2(x * kLog2e).
inline constexpr float kLog2e = 1.4426950408889634f;
/// ln(2): log(x) == log2(x) * kLn2.
inline constexpr float kLn2 = 0.6931471805599453f;

/// Smaller of two values:  llmk::min(a, b)
template <class T>
LLMK_HOST_DEVICE constexpr T min(T a, T b) {
  return b < a ? b : a;
}
/// Larger of two values:  llmk::max(a, b)
template <class T>
LLMK_HOST_DEVICE constexpr T max(T a, T b) {
  return a < b ? b : a;
}

/// Number of `divisor`-sized pieces that cover `value`:  llmk::ceil_div(100, 32) == 4.
/// Requires value >= 0 and divisor > 0. Never overflows (value + divisor - 1 would, near the type's maximum).
template <class T>
LLMK_HOST_DEVICE constexpr T ceil_div(T value, T divisor) {
  return static_cast<T>(value / divisor + (value % divisor != 0 ? 1 : 0));
}
/// `value` rounded up to a multiple of `multiple`:  llmk::round_up(100, 32) == 128.
template <class T>
LLMK_HOST_DEVICE constexpr T round_up(T value, T multiple) {
  return ceil_div(value, multiple) * multiple;
}
/// True for 1, 2, 4, ...; false for 0 and negatives:  static_assert(llmk::is_pow2(64));
template <class T>
LLMK_HOST_DEVICE constexpr bool is_pow2(T value) {
  return value > 0 && (value & (value - 1)) == 0;
}
/// a * b for a, b >= 0, saturated at INT64_MAX instead of overflowing: the host checks compare products of
/// user-given strides and counts, which a bad argument can push past 2^63 (signed overflow is UB, and a
/// wrapped product could let the bad argument pass).
///   if (llmk::mul_sat(stride_head, num_heads) > stride_token) ...
LLMK_HOST_DEVICE constexpr std::int64_t mul_sat(std::int64_t a, std::int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > INT64_MAX / b ? INT64_MAX : a * b;
}
/// a + b for a, b >= 0, saturated at INT64_MAX:  int64_t end = llmk::add_sat(offset, llmk::mul_sat(n, ld));
LLMK_HOST_DEVICE constexpr std::int64_t add_sat(std::int64_t a, std::int64_t b) {
  return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/// log2 of a power of two:  llmk::log2_pow2(64) == 6. Result is unspecified for other values.
template <class T>
LLMK_HOST_DEVICE constexpr int log2_pow2(T value) {
  int log = 0;
  while (value > 1) {
    value >>= 1;
    ++log;
  }
  return log;
}

/// 2^x in float (the library exp2f; callers wanting the approximate hardware instruction use the
/// arch/ atom):  float p = llmk::exp2(x * llmk::kLog2e);   // e^x
LLMK_HOST_DEVICE float exp2(float x) {
  return ::exp2f(x);
}

/// High 32 bits of the 64-bit product of two 32-bit values:  llmk::mul_high(0x80000000u, 6u) == 3u.
LLMK_HOST_DEVICE uint32_t mul_high(uint32_t a, uint32_t b) {
#if LLMK_DEVICE_PASS
  return __umulhi(a, b);
#else
  return uint32_t((uint64_t(a) * b) >> 32);
#endif
}

/// Division of any uint32 by a divisor fixed at run time, without a divide instruction: one
/// multiply-high, an add, and two shifts. Exact for every dividend in [0, 2^32) and every divisor in
/// [1, 2^32). Build it once on the host, pass it to the kernel by value.
///   llmk::FastDivisor heads(num_heads);
///   uint32_t batch = heads.divide(linear_index);
///   auto [q, r] = heads.divmod(linear_index);
///
/// Method (round-up multiplier, Granlund & Montgomery 1994): with l = ceil(log2 d) and
/// m = floor(2^32 (2^l - d) / d) + 1 < 2^32, the 33-bit multiplier 2^32 + m satisfies
/// n / d == floor(n (2^32 + m) / 2^(32 + l)); t = mulhi(n, m) and the sum t + (n - t) / 2 keeps the
/// 33-bit intermediate in 32 bits.
struct FastDivisor {
  struct QuotientRemainder {
    uint32_t quotient;
    uint32_t remainder;
  };

  uint32_t divisor = 1;
  uint32_t multiplier = 1;  // m above (the low 32 bits of the 33-bit magic number)
  uint32_t pre_shift = 0;   // min(l, 1): 0 only for d == 1, where the halving would lose a bit
  uint32_t post_shift = 0;  // max(l - 1, 0)

  FastDivisor() = default;
  /// `d` must be >= 1.
  LLMK_HOST_DEVICE explicit FastDivisor(uint32_t d) : divisor(d) {
    uint32_t ceil_log2 = 0;
    while ((uint64_t(1) << ceil_log2) < d) ++ceil_log2;
    multiplier = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << ceil_log2) - d)) / d + 1);
    pre_shift = ceil_log2 < 1 ? ceil_log2 : 1;
    post_shift = ceil_log2 > 0 ? ceil_log2 - 1 : 0;
  }

  /// n / divisor.
  LLMK_HOST_DEVICE uint32_t divide(uint32_t n) const {
    const uint32_t t = mul_high(n, multiplier);
    return (t + ((n - t) >> pre_shift)) >> post_shift;
  }
  /// {n / divisor, n % divisor}.
  LLMK_HOST_DEVICE QuotientRemainder divmod(uint32_t n) const {
    const uint32_t quotient = divide(n);
    return {quotient, n - quotient * divisor};
  }
};

}  // namespace llmk
