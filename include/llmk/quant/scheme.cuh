// llmk/quant/scheme.cuh: the quantization arithmetic, in one place, identical on host, in the simulator and
// on the device. Kernels, host references and calibration all call these functions, so "bit for bit" between
// a kernel and its reference is a matter of feeding them the same inputs.
//
// A quantizer is three choices, each a type:
//   storage      int8_t, uint8_t, llmk::int4_t, llmk::uint4_t (packed two per byte), float8_e4m3, float8_e5m2
//   scheme       Symmetric (no zero point, 2^b - 1 levels: activations, KV caches, W8A8), SymmetricFullRange
//                (no zero point, all 2^b levels: the GPTQ reference's sym=True, weights) or Asymmetric
//   granularity  PerTensor, PerChannel (one scale per row of a weight [out, in]), PerToken (one scale per
//                row of an activation [tokens, hidden]), GroupWise<G> (G consecutive elements of a row;
//                G = 0: runtime)
//
//   using Q = llmk::quant::Quantizer<llmk::int4_t, llmk::quant::Asymmetric, llmk::quant::GroupWise<128>>;
//   llmk::quant::QuantParams p = Q::params_from_range(row_min, row_max);
//   int code = Q::quantize(x, p);            // in [-8, 7]
//   float back = Q::dequantize(code, p);     // (code - zero_point) * scale
//
// The rules (docs/quantization.md has the derivations and the worked examples):
//   Symmetric, integer: s = amax / qmax,                          q = clamp(round(x / s), qmin, qmax)
//   SymmetricFullRange: s = amax / (qmax + 1/2) = 2 amax / (2^b - 1), q = clamp(round(x / s), qmin, qmax)
//                       (qmin = -2^(b-1) is used: 16 levels at 4 bits instead of 15; +-amax sits half a step
//                       outside the last levels, as in the GPTQ reference, whose unsigned codes are q +
//                       2^(b-1))
//   Asymmetric:         lo = min(min, 0), hi = max(max, 0)  (the range always holds 0, so 0 is exact)
//                       s = (hi - lo) / (qmax - qmin), z = round(-lo / s) + qmin, q = clamp(round(x / s) + z)
//   fp8 (symmetric):    s = amax / 448 (e4m3) or amax / 57344 (e5m2), q = fp8_satfinite(x / s)
//   dequantize:         x' = (q - z) * s   (fp8: float(q) * s)
//   round:              round half to even (IEEE nearest), the same instruction semantics everywhere
//   arithmetic:         fp32, IEEE division and multiplication, and never a multiply feeding an add (nvcc
//                       would contract it into an FMA and the host would not). Do not build llmk kernels with
//                       --use_fast_math: approximate division breaks bit-exactness with the reference.
// Edge cases:
//   all-zero range      Symmetric (both): s = 1 (every code 0, dequantizes to exactly 0); Asymmetric: [-1, 1]
//                       (as the GPTQ reference does), zero quantizes to z and back to exactly 0.
//   NaN input           integer storage: the zero point (dequantizes to 0); fp8: NaN. The same for a NaN
//                       quotient x / s (a static scale that is 0, Inf or NaN: scales must be positive,
//                       finite).
//   huge ranges         (hi - lo) beyond fp32 is computed as hi/n - lo/n, so the scale stays finite.
//   +-Inf input         integer storage: qmax / qmin; fp8: +-max (saturation).
//   ranges              the range reductions (amax, min, max) skip NaN and +-Inf, so scales stay finite.
#pragma once

#include <cstdint>
#include <type_traits>

#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"

#if !LLMK_DEVICE_PASS
#include <cmath>
#endif

namespace llmk::quant {

// ---- schemes ----------------------------------------------------------------------------------------------

/// q = clamp(round(x / s)), s = amax / qmax; no zero point. The schemes are Quantizer's second argument:
///   using Q = llmk::quant::Quantizer<int8_t, llmk::quant::Symmetric, llmk::quant::PerToken>;
struct Symmetric {
  static constexpr const char* kName = "symmetric";
};
/// q = clamp(round(x / s), qmin, qmax), s = amax / (qmax + 1/2) = 2 amax / (2^b - 1): every one of the 2^b
/// signed codes is used (int4: [-8, 7], 16 levels), as the GPTQ reference's symmetric mode (sym=True) and the
/// checkpoints made with it (stored unsigned, u = q + 2^(b-1), zero point 2^(b-1)). Integer storage only. The
/// weight quantizers' default (llmk/obs/quantizer.hpp); Symmetric (15 levels at 4 bits) stays available.
struct SymmetricFullRange {
  static constexpr const char* kName = "symmetric-full-range";
};
/// q = clamp(round(x / s) + z), s = (max - min) / (2^b - 1), z = round(-min / s) + qmin.
struct Asymmetric {
  static constexpr const char* kName = "asymmetric";
};

// ---- granularities ----------------------------------------------------------------------------------------
// Tensors are row-major [rows, cols] with a row stride; "along the reduction dimension" = along a row.

/// One scale (and zero point) for the whole tensor. The granularities are Quantizer's third argument:
///   using Q = llmk::quant::Quantizer<llmk::float8_e4m3, llmk::quant::Symmetric, llmk::quant::PerTensor>;
struct PerTensor {
  static constexpr const char* kName = "per-tensor";
};
/// One scale per row of a weight [out_channels, in_features]: per output channel.
struct PerChannel {
  static constexpr const char* kName = "per-channel";
};
/// One scale per row of an activation [tokens, hidden]: per token.
struct PerToken {
  static constexpr const char* kName = "per-token";
};
/// One scale per G consecutive elements of a row (G must divide the row length). G = 0: the group size is a
/// runtime argument (any value >= 1 that divides the row length).
template <int G = 0>
struct GroupWise {
  static_assert(G >= 0, "GroupWise<G>: the group size must be >= 1 (or 0 for a runtime group size)");
  static constexpr int kGroupSize = G;
  static constexpr const char* kName = "group-wise";
};

/// Whether a granularity is a GroupWise<G>:  static_assert(is_group_wise<GroupWise<128>>::value);
template <class T>
struct is_group_wise : std::false_type {};
template <int G>
struct is_group_wise<GroupWise<G>> : std::true_type {};

/// The granularity tags (PerTensor, PerChannel, PerToken, GroupWise<G>):
///   static_assert(llmk::quant::Granularity<llmk::quant::PerToken>);
template <class G>
concept Granularity = std::is_same_v<G, PerTensor> || std::is_same_v<G, PerChannel> ||
    std::is_same_v<G, PerToken> || is_group_wise<G>::value;
/// The scheme tags (Symmetric, SymmetricFullRange, Asymmetric):  static_assert(Scheme<Asymmetric>);
template <class S>
concept Scheme =
    std::is_same_v<S, Symmetric> || std::is_same_v<S, SymmetricFullRange> || std::is_same_v<S, Asymmetric>;

/// True for the granularities with one scale per row (PerChannel and PerToken share the layout).
template <class G>
inline constexpr bool kPerRow = std::is_same_v<G, PerChannel> || std::is_same_v<G, PerToken>;

// ---- storage ----------------------------------------------------------------------------------------------

/// Bits, code range and packing of a storage type (kSupported false for the others):
///   static_assert(llmk::quant::StorageTraits<llmk::int4_t>::kQmax == 7);
template <class T>
struct StorageTraits {
  static constexpr bool kSupported = false;
};
template <>
struct StorageTraits<int8_t> {
  static constexpr bool kSupported = true, kIsFloat = false, kSigned = true, kPacked = false;
  static constexpr int kBits = 8, kQmin = -128, kQmax = 127;
  static constexpr const char* kName = "int8";
};
template <>
struct StorageTraits<uint8_t> {
  static constexpr bool kSupported = true, kIsFloat = false, kSigned = false, kPacked = false;
  static constexpr int kBits = 8, kQmin = 0, kQmax = 255;
  static constexpr const char* kName = "uint8";
};
template <>
struct StorageTraits<int4_t> {
  static constexpr bool kSupported = true, kIsFloat = false, kSigned = true, kPacked = true;
  static constexpr int kBits = 4, kQmin = -8, kQmax = 7;
  static constexpr const char* kName = "int4";
};
template <>
struct StorageTraits<uint4_t> {
  static constexpr bool kSupported = true, kIsFloat = false, kSigned = false, kPacked = true;
  static constexpr int kBits = 4, kQmin = 0, kQmax = 15;
  static constexpr const char* kName = "uint4";
};
template <>
struct StorageTraits<float8_e4m3> {
  static constexpr bool kSupported = true, kIsFloat = true, kSigned = true, kPacked = false;
  static constexpr int kBits = 8;
  static constexpr float kMaxFinite = 448.0f;
  static constexpr const char* kName = "fp8_e4m3";
};
template <>
struct StorageTraits<float8_e5m2> {
  static constexpr bool kSupported = true, kIsFloat = true, kSigned = true, kPacked = false;
  static constexpr int kBits = 8;
  static constexpr float kMaxFinite = 57344.0f;
  static constexpr const char* kName = "fp8_e5m2";
};

/// The supported storage types (StorageTraits<T>::kSupported):  static_assert(Storage<llmk::float8_e4m3>);
template <class T>
concept Storage = StorageTraits<T>::kSupported;

/// Bytes one row of `cols` quantized elements occupies (int4: two per byte, the last high nibble of an odd
/// row is zero padding):  std::int64_t ldq_bytes = llmk::quant::storage_row_bytes<llmk::int4_t>(cols);
template <Storage T>
LLMK_HOST_DEVICE constexpr std::int64_t storage_row_bytes(std::int64_t cols) {
  return StorageTraits<T>::kPacked ? (cols + 1) / 2 : cols;
}

/// How many scales (and zero points) a [rows, cols] tensor needs with granularity G: 1, rows, or
/// rows * (cols / group_size). Size the parameter buffers with it:
///   std::size_t n = llmk::quant::param_count<llmk::quant::GroupWise<128>>(rows, cols, 128);
template <class G>
LLMK_HOST_DEVICE constexpr std::int64_t param_count(std::int64_t rows, std::int64_t cols, int group_size) {
  if constexpr (std::is_same_v<G, PerTensor>)
    return 1;
  else if constexpr (kPerRow<G>)
    return rows;
  else
    return rows * (cols / (G::kGroupSize > 0 ? G::kGroupSize : group_size));
}

// ---- scalar arithmetic ------------------------------------------------------------------------------------

/// Scale and zero point of one quantization group (zero_point is 0 for symmetric and fp8 schemes), as
/// Quantizer's params_from_* return them:  llmk::quant::QuantParams p{0.05f, 0};
struct QuantParams {
  float scale;
  std::int32_t zero_point;
};

/// Round half to even, as the hardware's cvt.rni / rintf do:  llmk::quant::round_half_even(2.5f) == 2.0f.
LLMK_HOST_DEVICE float round_half_even(float x) {
#if LLMK_DEVICE_PASS
  return rintf(x);
#else
  return std::nearbyint(x);  // the default rounding mode is to-nearest-even; llmk never changes it
#endif
}

/// False for NaN and +-Inf:  if (!llmk::quant::is_finite(x)) continue;   // skipped by the range reductions
LLMK_HOST_DEVICE bool is_finite(float x) {
  return x - x == 0.0f;
}  // false for NaN and +-Inf
/// True for NaN only:  llmk::quant::is_nan(x)
LLMK_HOST_DEVICE bool is_nan(float x) {
  return x != x;
}

/// |x| with the sign bit cleared for -0.0 too (reductions may compare amax bit patterns):
///   amax = llmk::quant::fabs_f(x) > amax ? llmk::quant::fabs_f(x) : amax;
LLMK_HOST_DEVICE float fabs_f(float x) {
  return x < 0.0f ? -x : (x == 0.0f ? 0.0f : x);
}

/// The quantization arithmetic of one storage x scheme; the granularity only decides which elements share
/// QuantParams. Invalid combinations fail to compile with a message that says why.
///   using Q = llmk::quant::Quantizer<int8_t, llmk::quant::Symmetric, llmk::quant::PerToken>;
///   const llmk::quant::QuantParams p = Q::params_from_absmax(row_amax);
///   int code = Q::quantize(x, p);              // in [-127, 127] for |x| <= row_amax
///   float back = Q::dequantize(code, p);       // code * scale
template <class StorageT, class SchemeT, class GranularityT>
struct Quantizer {
  static_assert(Storage<StorageT>,
                "llmk::quant::Quantizer: unsupported storage type; use int8_t, uint8_t, llmk::int4_t, "
                "llmk::uint4_t, llmk::float8_e4m3 or llmk::float8_e5m2");
  static_assert(Scheme<SchemeT>,
                "llmk::quant::Quantizer: the scheme must be Symmetric, SymmetricFullRange or Asymmetric");
  static_assert(
      Granularity<GranularityT>,
      "llmk::quant::Quantizer: the granularity must be PerTensor, PerChannel, PerToken or GroupWise<G>");
  static_assert(
      !(StorageTraits<StorageT>::kIsFloat && std::is_same_v<SchemeT, Asymmetric>),
      "llmk::quant::Quantizer: fp8 storage supports only the Symmetric scheme (fp8 has no zero point)");
  static_assert(!(StorageTraits<StorageT>::kIsFloat && std::is_same_v<SchemeT, SymmetricFullRange>),
                "llmk::quant::Quantizer: fp8 storage supports only the Symmetric scheme (SymmetricFullRange "
                "is an integer grid)");
  static_assert(!(!StorageTraits<StorageT>::kIsFloat && !StorageTraits<StorageT>::kSigned &&
                  !std::is_same_v<SchemeT, Asymmetric>),
                "llmk::quant::Quantizer: unsigned storage (uint8_t, uint4_t) needs the Asymmetric scheme; "
                "use int8_t or llmk::int4_t for symmetric quantization");

  static_assert(sizeof(GranularityT) > 0);  // instantiates GroupWise<G>, whose own check rejects G < 0

  using storage_type = StorageT;
  using scheme = SchemeT;
  using granularity = GranularityT;
  using traits = StorageTraits<StorageT>;
  static constexpr bool kIsFloat = traits::kIsFloat;
  static constexpr bool kAsymmetric = std::is_same_v<SchemeT, Asymmetric>;
  static constexpr bool kFullRange = std::is_same_v<SchemeT, SymmetricFullRange>;
  /// What quantize() returns: the integer code, or the fp8 value.
  using Code = std::conditional_t<kIsFloat, StorageT, int>;

  /// Scale and zero point for values in [min_value, max_value] (the finite min and max of the group).
  LLMK_HOST_DEVICE static QuantParams params_from_range(float min_value, float max_value) {
    if constexpr (kIsFloat) {
      return params_from_absmax(fabs_f(min_value) > fabs_f(max_value) ? fabs_f(min_value)
                                                                      : fabs_f(max_value));
    } else if constexpr (!kAsymmetric) {
      return params_from_absmax(fabs_f(min_value) > fabs_f(max_value) ? fabs_f(min_value)
                                                                      : fabs_f(max_value));
    } else {
      float lo = min_value < 0.0f ? min_value : 0.0f;
      float hi = max_value > 0.0f ? max_value : 0.0f;
      if (lo == 0.0f && hi == 0.0f) {
        lo = -1.0f;
        hi = 1.0f;
      }
      const float steps = static_cast<float>(traits::kQmax - traits::kQmin);
      // hi - lo overflows for data near +-3.4e38; split the division there so the scale stays finite.
      const float span = hi - lo;
      float scale = is_finite(span) ? span / steps : hi / steps - lo / steps;
      if (!(scale > 0.0f)) scale = 1.0f;  // a range so narrow that the division underflowed
      float z = round_half_even(-lo / scale) + static_cast<float>(traits::kQmin);
      z = z < traits::kQmin ? traits::kQmin : (z > traits::kQmax ? traits::kQmax : z);
      return {scale, static_cast<std::int32_t>(z)};
    }
  }

  /// Symmetric (and fp8) parameters from the absolute maximum of the group.
  LLMK_HOST_DEVICE static QuantParams params_from_absmax(float amax) {
    static_assert(!kAsymmetric, "params_from_absmax: asymmetric quantizers need params_from_range(min, max)");
    float scale;
    if constexpr (kIsFloat)
      scale = amax / traits::kMaxFinite;
    else if constexpr (kFullRange)  // one correctly rounded division: the reference's (2 amax) / (2^b - 1)
      scale = amax / (static_cast<float>(traits::kQmax) + 0.5f);
    else
      scale = amax / static_cast<float>(traits::kQmax);
    if (!(scale > 0.0f)) scale = 1.0f;  // all-zero group (or underflow): every code is 0
    return {scale, 0};
  }

  /// Quantizes one value.
  LLMK_HOST_DEVICE static Code quantize(float x, QuantParams p) {
    if constexpr (kIsFloat) {
      return StorageT::from_float_satfinite(x / p.scale);  // NaN stays NaN, +-Inf saturates to +-max
    } else {
      const float scaled = x / p.scale;
      // A NaN input, or a NaN quotient from a zero, infinite or NaN scale (a bad static scale), maps to the
      // zero point rather than reaching the float-to-int conversion, which is undefined for NaN; clamped as
      // every code is (a static zero point is the caller's and may lie outside the code range).
      if (is_nan(scaled))
        return p.zero_point < traits::kQmin ? traits::kQmin
                                            : (p.zero_point > traits::kQmax ? traits::kQmax : p.zero_point);
      float q = round_half_even(scaled) + static_cast<float>(p.zero_point);
      // Clamp in float: x / s can exceed the int range (or be +-Inf) long before it is converted.
      q = q < static_cast<float>(traits::kQmin) ? static_cast<float>(traits::kQmin) : q;
      q = q > static_cast<float>(traits::kQmax) ? static_cast<float>(traits::kQmax) : q;
      return static_cast<int>(q);
    }
  }

  /// Dequantizes one code to fp32.
  LLMK_HOST_DEVICE static float dequantize(Code q, QuantParams p) {
    if constexpr (kIsFloat)
      return q.to_float() * p.scale;
    else
      return static_cast<float>(q - p.zero_point) * p.scale;
  }
};

// ---- output conversion ------------------------------------------------------------------------------------

/// Converts a dequantized fp32 value to an output type (float, half, bfloat16), round to nearest even:
///   y[i] = llmk::quant::convert_output<llmk::half>(Q::dequantize(code, p));
template <class Out>
LLMK_HOST_DEVICE Out convert_output(float v) {
  if constexpr (std::is_same_v<Out, float>)
    return v;
  else
    return Out(v);
}

/// Reads an input element (float, half, bfloat16) as fp32:  float v = llmk::quant::load_as_float(x[i]);
template <class In>
LLMK_HOST_DEVICE float load_as_float(In v) {
  if constexpr (std::is_same_v<In, float>)
    return v;
  else
    return static_cast<float>(v);
}

}  // namespace llmk::quant
