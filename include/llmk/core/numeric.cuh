// llmk/core/numeric.cuh: the storage number formats llmk computes with, identical on host, in the
// simulator and on the device.
//
//   llmk::half         IEEE 754 binary16 (1.5.10, bias 15), max 65504, has inf/NaN.
//   llmk::bfloat16     the upper 16 bits of a binary32 (1.8.7), has inf/NaN.
//   llmk::float8_e4m3  OCP FP8 E4M3FN (1.4.3, bias 7): no inf, max 448, NaN = S.1111.111 only.
//   llmk::float8_e5m2  OCP FP8 E5M2 (1.5.2, bias 15): IEEE-like, max 57344, has inf/NaN.
//   llmk::int4_t, llmk::uint4_t  4-bit integer element types (packed forms live in llmk/core/int4.cuh).
//
// Each floating type is a trivially copyable struct whose only member is its raw bit pattern (`bits`),
// so arrays of them have exactly the layout of the CUDA types (__half, __nv_bfloat16, __nv_fp8_e4m3, ...).
//
// Conversion rules (one software implementation; nvcc's device pass may use hardware conversions that
// give the same bits):
//   float -> half / bfloat16 : round to nearest, ties to even; subnormals kept; overflow -> +-inf;
//                              any NaN -> the canonical quiet NaN 0x7FFF (sign and payload are not kept:
//                              that is what the hardware cvt instructions produce).
//   float -> fp8             : round to nearest even, then either
//                              from_float_satfinite  (llmk's default): +-inf and finite values beyond the
//                                                    range become +-max (PTX cvt .satfinite semantics);
//                              from_float_nonsaturating: overflow -> NaN (e4m3) or +-inf (e5m2).
//                              Any NaN -> canonical NaN 0x7F in both modes.
//   small type -> float      : exact. NaN -> canonical float NaN 0x7FFFFFFF, except bfloat16 whose
//                              conversion is a plain 16-bit shift (payload kept, as on the device).
#pragma once

#include "llmk/config.cuh"

#include <cstdint>
#include <cstring>

#if LLMK_DEVICE_PASS
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace llmk {

namespace detail {

LLMK_HOST_DEVICE uint32_t float_to_bits(float value) {
#if LLMK_DEVICE_PASS
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

LLMK_HOST_DEVICE float bits_to_float(uint32_t bits) {
#if LLMK_DEVICE_PASS
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

inline constexpr uint32_t kCanonicalFloatNaN = 0x7FFFFFFFu;

// Result of rounding a float onto a binary format with kMantissaBits stored mantissa bits and
// minimum normal exponent kMinExponent, before deciding what to do with overflow.
struct RoundedCode {
  uint32_t magnitude;  // exponent and mantissa fields, may exceed the largest finite code
  uint32_t sign;       // 0 or 1
  bool is_nan;
  bool is_inf;
};

// Rounds |value| to the nearest multiple of the target's unit in the last place (ties to even).
// One formula covers normals and subnormals: the unit is 2^(max(e, emin) - M), and the resulting
// code ((max(e, emin) - emin) << M) + q is correct even when rounding carries into the exponent
// (q == 2^(M+1) for a normal, q == 2^M for the largest subnormal).
template <int kMantissaBits, int kMinExponent>
LLMK_HOST_DEVICE RoundedCode round_float_to_code(float value) {
  const uint32_t bits = float_to_bits(value);
  RoundedCode out{0u, bits >> 31, false, false};
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) {
    out.is_nan = true;
    return out;
  }
  if (abs_bits == 0x7F800000u) {
    out.is_inf = true;
    return out;
  }
  const int exponent = int(abs_bits >> 23) - 127;  // float subnormals read as 2^-127: all round to 0
  const uint32_t significand = (abs_bits & 0x7FFFFFu) | 0x800000u;
  const int unit_exponent = (exponent > kMinExponent ? exponent : kMinExponent);
  const int shift = 23 - kMantissaBits + (unit_exponent - exponent);
  if (shift >= 25) return out;  // below half of the smallest subnormal (the tie at exactly half is 25)
  uint32_t quotient = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (remainder > halfway || (remainder == halfway && (quotient & 1u))) ++quotient;
  out.magnitude = (uint32_t(unit_exponent - kMinExponent) << kMantissaBits) + quotient;
  return out;
}

LLMK_HOST_DEVICE uint16_t float_to_half_bits(float value) {
#if LLMK_DEVICE_PASS
  return __half_as_ushort(__float2half_rn(value));
#else
  const RoundedCode code = round_float_to_code<10, -14>(value);
  if (code.is_nan) return 0x7FFF;
  const uint32_t sign = code.sign << 15;
  if (code.is_inf || code.magnitude > 0x7BFFu) return uint16_t(sign | 0x7C00u);
  return uint16_t(sign | code.magnitude);
#endif
}

LLMK_HOST_DEVICE float half_bits_to_float(uint16_t half_bits) {
#if LLMK_DEVICE_PASS
  return __half2float(__ushort_as_half(half_bits));
#else
  const uint32_t sign = uint32_t(half_bits >> 15) << 31;
  const uint32_t exponent_field = (half_bits >> 10) & 0x1Fu;
  const uint32_t mantissa = half_bits & 0x3FFu;
  if (exponent_field == 0x1F) {
    return bits_to_float(mantissa ? kCanonicalFloatNaN : (sign | 0x7F800000u));
  }
  if (exponent_field == 0) {
    // Subnormal: mantissa * 2^-24 is exact in float (an integer below 2^10 times a power of two).
    return bits_to_float(sign | float_to_bits(float(mantissa) * 5.9604644775390625e-8f));
  }
  return bits_to_float(sign | ((exponent_field + 112u) << 23) | (mantissa << 13));
#endif
}

LLMK_HOST_DEVICE uint16_t float_to_bfloat16_bits(float value) {
#if LLMK_DEVICE_PASS && LLMK_ARCH >= 800
  return __bfloat16_as_ushort(__float2bfloat16_rn(value));
#else
  const uint32_t bits = float_to_bits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest even; a carry walks into the exponent and
  // turns the largest values into inf, exactly as IEEE overflow requires.
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
#endif
}

LLMK_HOST_DEVICE float bfloat16_bits_to_float(uint16_t bfloat16_bits) {
  return bits_to_float(uint32_t(bfloat16_bits) << 16);
}

// Encodings of the two FP8 formats, used by the generic encoder/decoder below.
struct E4M3Format {
  static constexpr int kMantissaBits = 3;
  static constexpr int kMinExponent = -6;           // bias 7
  static constexpr uint32_t kMaxFiniteCode = 0x7E;  // 0.1111.110 = 448
  static constexpr uint8_t kNaNCode = 0x7F;
  static constexpr bool kHasInf = false;  // non-saturating overflow becomes NaN
};
struct E5M2Format {
  static constexpr int kMantissaBits = 2;
  static constexpr int kMinExponent = -14;          // bias 15
  static constexpr uint32_t kMaxFiniteCode = 0x7B;  // 0.11110.11 = 57344
  static constexpr uint8_t kNaNCode = 0x7F;
  static constexpr bool kHasInf = true;  // non-saturating overflow becomes +-inf (0x7C)
};

template <class Format>
LLMK_HOST_DEVICE uint8_t float_to_fp8_bits(float value, bool saturate) {
  const RoundedCode code = round_float_to_code<Format::kMantissaBits, Format::kMinExponent>(value);
  if (code.is_nan) return Format::kNaNCode;
  const uint32_t sign = code.sign << 7;
  if (code.is_inf || code.magnitude > Format::kMaxFiniteCode) {
    if (saturate) return uint8_t(sign | Format::kMaxFiniteCode);
    return Format::kHasInf ? uint8_t(sign | 0x7Cu) : Format::kNaNCode;
  }
  return uint8_t(sign | code.magnitude);
}

LLMK_HOST_DEVICE float fp8_bits_to_float(uint8_t fp8_bits, int mantissa_bits, int exponent_bias,
                                         bool has_inf) {
  const uint32_t sign = uint32_t(fp8_bits >> 7) << 31;
  const uint32_t exponent_field = (fp8_bits & 0x7Fu) >> mantissa_bits;
  const uint32_t mantissa = fp8_bits & ((1u << mantissa_bits) - 1u);
  const uint32_t max_exponent_field = (0x7Fu >> mantissa_bits);
  if (exponent_field == max_exponent_field) {
    if (has_inf) {  // e5m2: IEEE specials
      return bits_to_float(mantissa ? kCanonicalFloatNaN : (sign | 0x7F800000u));
    }
    if (mantissa == (1u << mantissa_bits) - 1u) return bits_to_float(kCanonicalFloatNaN);  // e4m3 NaN
  }
  if (exponent_field == 0) {
    // Subnormal: mantissa * 2^(1 - bias - M); exact in float.
    const float unit = bits_to_float(uint32_t(127 + 1 - exponent_bias - mantissa_bits) << 23);
    return bits_to_float(sign | float_to_bits(float(mantissa) * unit));
  }
  return bits_to_float(sign | ((exponent_field - exponent_bias + 127u) << 23) |
                       (mantissa << (23 - mantissa_bits)));
}

}  // namespace detail

/// IEEE 754 binary16. Raw bits in `bits`; convert explicitly.
///   llmk::half h(1.5f);                 // round to nearest even
///   float f = float(h);                 // exact
///   auto one = llmk::half::from_bits(0x3C00);
struct half {
  uint16_t bits;

  half() = default;
  LLMK_HOST_DEVICE explicit half(float value) : bits(detail::float_to_half_bits(value)) {}
  LLMK_HOST_DEVICE static constexpr half from_bits(uint16_t raw) {
    half out{};
    out.bits = raw;
    return out;
  }
  LLMK_HOST_DEVICE float to_float() const { return detail::half_bits_to_float(bits); }
  LLMK_HOST_DEVICE explicit operator float() const { return to_float(); }
  LLMK_HOST_DEVICE constexpr bool is_nan() const { return (bits & 0x7FFF) > 0x7C00; }
};

/// bfloat16: the top half of a binary32. Raw bits in `bits`.
///   llmk::bfloat16 b(3.14159f);          // 3.140625 (round to nearest even)
///   float f = float(b);
struct bfloat16 {
  uint16_t bits;

  bfloat16() = default;
  LLMK_HOST_DEVICE explicit bfloat16(float value) : bits(detail::float_to_bfloat16_bits(value)) {}
  LLMK_HOST_DEVICE static constexpr bfloat16 from_bits(uint16_t raw) {
    bfloat16 out{};
    out.bits = raw;
    return out;
  }
  LLMK_HOST_DEVICE float to_float() const { return detail::bfloat16_bits_to_float(bits); }
  LLMK_HOST_DEVICE explicit operator float() const { return to_float(); }
  LLMK_HOST_DEVICE constexpr bool is_nan() const { return (bits & 0x7FFF) > 0x7F80; }
};

/// OCP FP8 E4M3FN: no infinities, max 448, NaN is S.1111.111.
/// The float constructor saturates (llmk's default); say which mode you mean with the named factories:
///   auto q = llmk::float8_e4m3::from_float_satfinite(1000.f);     // 448
///   auto n = llmk::float8_e4m3::from_float_nonsaturating(1000.f); // NaN
///   float f = float(q);
struct float8_e4m3 {
  uint8_t bits;

  float8_e4m3() = default;
  /// Same as from_float_satfinite.
  LLMK_HOST_DEVICE explicit float8_e4m3(float value)
      : bits(detail::float_to_fp8_bits<detail::E4M3Format>(value, true)) {}
  LLMK_HOST_DEVICE static constexpr float8_e4m3 from_bits(uint8_t raw) {
    float8_e4m3 out{};
    out.bits = raw;
    return out;
  }
  /// Round to nearest even; +-inf and finite values beyond +-448 become +-448; NaN stays NaN.
  LLMK_HOST_DEVICE static float8_e4m3 from_float_satfinite(float value) {
    return from_bits(detail::float_to_fp8_bits<detail::E4M3Format>(value, true));
  }
  /// Round to nearest even; anything that rounds beyond +-448 (and +-inf) becomes NaN.
  LLMK_HOST_DEVICE static float8_e4m3 from_float_nonsaturating(float value) {
    return from_bits(detail::float_to_fp8_bits<detail::E4M3Format>(value, false));
  }
  LLMK_HOST_DEVICE float to_float() const { return detail::fp8_bits_to_float(bits, 3, 7, false); }
  LLMK_HOST_DEVICE explicit operator float() const { return to_float(); }
  LLMK_HOST_DEVICE constexpr bool is_nan() const { return (bits & 0x7F) == 0x7F; }
};

/// OCP FP8 E5M2: IEEE-like, max 57344, has +-inf and NaN.
///   auto q = llmk::float8_e5m2::from_float_satfinite(1e6f);      // 57344
///   auto i = llmk::float8_e5m2::from_float_nonsaturating(1e6f);  // +inf
struct float8_e5m2 {
  uint8_t bits;

  float8_e5m2() = default;
  /// Same as from_float_satfinite.
  LLMK_HOST_DEVICE explicit float8_e5m2(float value)
      : bits(detail::float_to_fp8_bits<detail::E5M2Format>(value, true)) {}
  LLMK_HOST_DEVICE static constexpr float8_e5m2 from_bits(uint8_t raw) {
    float8_e5m2 out{};
    out.bits = raw;
    return out;
  }
  /// Round to nearest even; +-inf and finite values beyond +-57344 become +-57344; NaN stays NaN.
  LLMK_HOST_DEVICE static float8_e5m2 from_float_satfinite(float value) {
    return from_bits(detail::float_to_fp8_bits<detail::E5M2Format>(value, true));
  }
  /// Round to nearest even; overflow becomes +-inf (IEEE behaviour).
  LLMK_HOST_DEVICE static float8_e5m2 from_float_nonsaturating(float value) {
    return from_bits(detail::float_to_fp8_bits<detail::E5M2Format>(value, false));
  }
  LLMK_HOST_DEVICE float to_float() const { return detail::fp8_bits_to_float(bits, 2, 15, true); }
  LLMK_HOST_DEVICE explicit operator float() const { return to_float(); }
  LLMK_HOST_DEVICE constexpr bool is_nan() const { return (bits & 0x7F) > 0x7C; }
};

/// A signed 4-bit integer element in [-8, 7] (held unpacked here; packed pairs: llmk::int4x2).
/// Named int4_t, not int4, so it does not shadow CUDA's int4 vector type inside namespace llmk.
///   llmk::int4_t w{-3};
struct int4_t {
  int8_t value;
};
/// An unsigned 4-bit integer element in [0, 15] (packed pairs: llmk::uint4x2).
///   llmk::uint4_t w{12};
struct uint4_t {
  uint8_t value;
};

static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2);
static_assert(sizeof(float8_e4m3) == 1 && sizeof(float8_e5m2) == 1);

/// The two floats of a packed pair, as unpack_half_x2 and unpack_bfloat16_x2 return them.
///   llmk::FloatPair p = llmk::unpack_half_x2(word);   // p.first: bits 0-15
struct FloatPair {
  float first;
  float second;
};

/// Two floats as two halves in one 32-bit word (a half2 register): `first` in bits 0-15.
///   uint32_t word = llmk::pack_half_x2(1.f, 2.f);   // 0x40003C00
LLMK_HOST_DEVICE uint32_t pack_half_x2(float first, float second) {
  return uint32_t(detail::float_to_half_bits(first)) | (uint32_t(detail::float_to_half_bits(second)) << 16);
}
/// Inverse of pack_half_x2:  auto [a, b] = llmk::unpack_half_x2(word);
LLMK_HOST_DEVICE FloatPair unpack_half_x2(uint32_t packed) {
  return {detail::half_bits_to_float(uint16_t(packed & 0xFFFFu)),
          detail::half_bits_to_float(uint16_t(packed >> 16))};
}
/// Two floats as two bfloat16 in one 32-bit word: `first` in bits 0-15.
///   uint32_t word = llmk::pack_bfloat16_x2(1.f, 2.f);  // 0x40003F80
LLMK_HOST_DEVICE uint32_t pack_bfloat16_x2(float first, float second) {
  return uint32_t(detail::float_to_bfloat16_bits(first)) |
         (uint32_t(detail::float_to_bfloat16_bits(second)) << 16);
}
/// Inverse of pack_bfloat16_x2:  auto [a, b] = llmk::unpack_bfloat16_x2(word);
LLMK_HOST_DEVICE FloatPair unpack_bfloat16_x2(uint32_t packed) {
  return {detail::bfloat16_bits_to_float(uint16_t(packed & 0xFFFFu)),
          detail::bfloat16_bits_to_float(uint16_t(packed >> 16))};
}

/// Range and identity of the element types llmk handles, like std::numeric_limits but usable on the
/// device and defined for llmk's own types.
///   float qmax = float(llmk::numeric_traits<llmk::float8_e4m3>::max());   // 448
///   static_assert(llmk::numeric_traits<llmk::int4_t>::bits == 4);
template <class T>
struct numeric_traits;  // undefined: only the types below are supported

template <>
struct numeric_traits<float> {
  static constexpr int bits = 32;
  static constexpr const char* name = "float";
  LLMK_HOST_DEVICE static constexpr float max() { return 3.40282346638528859811704183484516925e+38f; }
  LLMK_HOST_DEVICE static constexpr float lowest() { return -max(); }
};
template <>
struct numeric_traits<half> {
  static constexpr int bits = 16;
  static constexpr const char* name = "half";
  LLMK_HOST_DEVICE static constexpr half max() { return half::from_bits(0x7BFF); }  // 65504
  LLMK_HOST_DEVICE static constexpr half lowest() { return half::from_bits(0xFBFF); }
};
template <>
struct numeric_traits<bfloat16> {
  static constexpr int bits = 16;
  static constexpr const char* name = "bfloat16";
  LLMK_HOST_DEVICE static constexpr bfloat16 max() { return bfloat16::from_bits(0x7F7F); }
  LLMK_HOST_DEVICE static constexpr bfloat16 lowest() { return bfloat16::from_bits(0xFF7F); }
};
template <>
struct numeric_traits<float8_e4m3> {
  static constexpr int bits = 8;
  static constexpr const char* name = "float8_e4m3";
  LLMK_HOST_DEVICE static constexpr float8_e4m3 max() { return float8_e4m3::from_bits(0x7E); }  // 448
  LLMK_HOST_DEVICE static constexpr float8_e4m3 lowest() { return float8_e4m3::from_bits(0xFE); }
};
template <>
struct numeric_traits<float8_e5m2> {
  static constexpr int bits = 8;
  static constexpr const char* name = "float8_e5m2";
  LLMK_HOST_DEVICE static constexpr float8_e5m2 max() { return float8_e5m2::from_bits(0x7B); }  // 57344
  LLMK_HOST_DEVICE static constexpr float8_e5m2 lowest() { return float8_e5m2::from_bits(0xFB); }
};
template <>
struct numeric_traits<int8_t> {
  static constexpr int bits = 8;
  static constexpr const char* name = "int8";
  LLMK_HOST_DEVICE static constexpr int8_t max() { return 127; }
  LLMK_HOST_DEVICE static constexpr int8_t lowest() { return -128; }
};
template <>
struct numeric_traits<uint8_t> {
  static constexpr int bits = 8;
  static constexpr const char* name = "uint8";
  LLMK_HOST_DEVICE static constexpr uint8_t max() { return 255; }
  LLMK_HOST_DEVICE static constexpr uint8_t lowest() { return 0; }
};
template <>
struct numeric_traits<int4_t> {
  static constexpr int bits = 4;
  static constexpr const char* name = "int4";
  LLMK_HOST_DEVICE static constexpr int4_t max() { return {7}; }
  LLMK_HOST_DEVICE static constexpr int4_t lowest() { return {-8}; }
};
template <>
struct numeric_traits<uint4_t> {
  static constexpr int bits = 4;
  static constexpr const char* name = "uint4";
  LLMK_HOST_DEVICE static constexpr uint4_t max() { return {15}; }
  LLMK_HOST_DEVICE static constexpr uint4_t lowest() { return {0}; }
};
template <>
struct numeric_traits<int32_t> {
  static constexpr int bits = 32;
  static constexpr const char* name = "int32";
  LLMK_HOST_DEVICE static constexpr int32_t max() { return 2147483647; }
  LLMK_HOST_DEVICE static constexpr int32_t lowest() { return -2147483647 - 1; }
};

}  // namespace llmk
