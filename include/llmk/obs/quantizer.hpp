// llmk/obs/quantizer.hpp: the weight quantizers OBQ, GPTQ and SparseGPT use, chosen at run time by (bits,
// symmetric, symmetric grid). They ARE llmk::quant::Quantizer (llmk/quant/scheme.cuh: the same rounding,
// ranges and edge cases as every llmk kernel and calibrator); this header adds 2- and 3-bit code types
// (obs::int2_code, uint2_code, int3_code, uint3_code: storage tags with StorageTraits, used for the
// arithmetic only, never stored) so that bits 2, 3, 4 and 8 all go through the one implementation:
//   symmetric, full range (default)  signed codes q in [-2^(b-1), 2^(b-1) - 1], s = 2 amax / (2^b - 1): the
//                                    GPTQ reference's sym=True grid (quant::SymmetricFullRange, 16 levels at
//                                    4 bits)
//   symmetric, absmax                the same codes without -2^(b-1), s = amax / (2^(b-1) - 1)
//   (quant::Symmetric,
//                                    15 levels at 4 bits; SymmetricGrid::kAbsmax)
//   asymmetric                       unsigned codes q in [0, 2^b - 1], s = (hi - lo) / (2^b - 1), z =
//   round(-lo / s)
// Output codes are UNSIGNED (the weight-only GEMM's format, llmk/gemm/weight_only.cuh): symmetric codes are
// stored as u = q + 2^(b-1) with zero point z = 2^(b-1); asymmetric ones as u = q with their zero point.
// Either way the weight is s * (u - z).
//
//   llmk::obs::with_quantizer(4, true, llmk::obs::SymmetricGrid::kFullRange,
//                             [&]<class Q>() { auto p = Q::params_from_absmax(amax); });
#pragma once

#include <cstdint>

#include "llmk/core/status.cuh"
#include "llmk/quant/scheme.cuh"

namespace llmk::obs {

/// Tags for 2- and 3-bit codes (arithmetic only).
struct int2_code {};
struct uint2_code {};
struct int3_code {};
struct uint3_code {};

}  // namespace llmk::obs

namespace llmk::quant {
template <>
struct StorageTraits<llmk::obs::int2_code> {
  static constexpr bool kSupported = true, kIsFloat = false, kSigned = true, kPacked = true;
  static constexpr int kBits = 2, kQmin = -2, kQmax = 1;
  static constexpr const char* kName = "int2";
};
template <>
struct StorageTraits<llmk::obs::uint2_code> {
  static constexpr bool kSupported = true, kIsFloat = false, kSigned = false, kPacked = true;
  static constexpr int kBits = 2, kQmin = 0, kQmax = 3;
  static constexpr const char* kName = "uint2";
};
template <>
struct StorageTraits<llmk::obs::int3_code> {
  static constexpr bool kSupported = true, kIsFloat = false, kSigned = true, kPacked = true;
  static constexpr int kBits = 3, kQmin = -4, kQmax = 3;
  static constexpr const char* kName = "int3";
};
template <>
struct StorageTraits<llmk::obs::uint3_code> {
  static constexpr bool kSupported = true, kIsFloat = false, kSigned = false, kPacked = true;
  static constexpr int kBits = 3, kQmin = 0, kQmax = 7;
  static constexpr const char* kName = "uint3";
};
}  // namespace llmk::quant

namespace llmk::obs {

/// Checks a (bits) choice: 2, 3, 4 or 8.
///   LLMK_RETURN_IF_ERROR(llmk::obs::check_bits(options.bits));
inline Status check_bits(int bits) {
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
    return Status::invalid_argument("bits", str_cat("must be 2, 3, 4 or 8, got ", bits));
  return {};
}

/// The grid of symmetric weight quantization (options' `symmetric = true`).
enum class SymmetricGrid {
  kFullRange,  ///< default: all 2^b codes, s = 2 amax / (2^b - 1), the GPTQ reference's sym=True grid
  kAbsmax,     ///< 2^b - 1 codes (no -2^(b-1)), s = amax / (2^(b-1) - 1): llmk's grid before 2026-11
  kReference,  ///< the reference quantizer's grid in every case: kFullRange, except that a group with no
               ///< negative value gets s = max / (2^b - 1) (its codes reach (2^(b-1) - 1) / (2^b - 1) of
               ///< the max: the rest is clipped; docs/obs.md)
};

namespace detail {
// The grid option, checked by every entry that takes one (an unknown value would act as kAbsmax).
inline Status check_symmetric_grid(SymmetricGrid g) {
  if (g != SymmetricGrid::kFullRange && g != SymmetricGrid::kAbsmax && g != SymmetricGrid::kReference)
    return Status::invalid_argument(
        "symmetric_grid",
        "must be SymmetricGrid::kFullRange, SymmetricGrid::kAbsmax or SymmetricGrid::kReference");
  return {};
}

// The switch of with_quantizer; kFullRange = false leaves the SymmetricFullRange branch out entirely, so the
// kernels' form instantiates nothing for it.
template <bool kFullRange, class F>
decltype(auto) dispatch_quantizer(int bits, bool symmetric, SymmetricGrid grid, F&& f) {
  using quant::Asymmetric, quant::PerChannel, quant::Quantizer, quant::Symmetric, quant::SymmetricFullRange;
  if constexpr (kFullRange) {
    if (symmetric && grid != SymmetricGrid::kAbsmax) {  // kReference: the same codes, other scales
      switch (bits) {
        case 2:
          return f.template operator()<Quantizer<int2_code, SymmetricFullRange, PerChannel>>();
        case 3:
          return f.template operator()<Quantizer<int3_code, SymmetricFullRange, PerChannel>>();
        case 4:
          return f.template operator()<Quantizer<int4_t, SymmetricFullRange, PerChannel>>();
        default:
          return f.template operator()<Quantizer<int8_t, SymmetricFullRange, PerChannel>>();
      }
    }
  } else {
    (void)grid;
  }
  if (symmetric) {
    switch (bits) {
      case 2:
        return f.template operator()<Quantizer<int2_code, Symmetric, PerChannel>>();
      case 3:
        return f.template operator()<Quantizer<int3_code, Symmetric, PerChannel>>();
      case 4:
        return f.template operator()<Quantizer<int4_t, Symmetric, PerChannel>>();
      default:
        return f.template operator()<Quantizer<int8_t, Symmetric, PerChannel>>();
    }
  }
  switch (bits) {
    case 2:
      return f.template operator()<Quantizer<uint2_code, Asymmetric, PerChannel>>();
    case 3:
      return f.template operator()<Quantizer<uint3_code, Asymmetric, PerChannel>>();
    case 4:
      return f.template operator()<Quantizer<uint4_t, Asymmetric, PerChannel>>();
    default:
      return f.template operator()<Quantizer<uint8_t, Asymmetric, PerChannel>>();
  }
}
}  // namespace detail

/// Calls f.template operator()<Q>() with Q = llmk::quant::Quantizer<code type, scheme, PerChannel> for
/// (bits, symmetric, grid): scheme SymmetricFullRange (kFullRange and kReference, whose codes are the same:
/// its scales come from grid_params), Symmetric (kAbsmax) or Asymmetric (symmetric = false: the grid is
/// ignored). bits must pass check_bits. Returns what f returns.
///   double e = llmk::obs::with_quantizer(3, false, llmk::obs::SymmetricGrid::kFullRange,
///                                        [&]<class Q>() { return Q::params_from_range(lo, hi).scale; });
template <class F>
decltype(auto) with_quantizer(int bits, bool symmetric, SymmetricGrid grid, F&& f) {
  return detail::dispatch_quantizer<true>(bits, symmetric, grid, static_cast<F&&>(f));
}

/// The kernels' form (llmk/obs/gpu_path.cuh, obs_gpu.cuh): symmetric picks the absmax type for every grid,
/// because quantize() and dequantize() are the same for them (q = clamp(round(x / s)), x' = q s) and only the
/// scale differs, which the kernels take from grid_params with GridChoice::symmetric_grid at run time (a
/// third of the instantiations).
/// bits as for the 3-argument form (check_bits first: not checked here).
///   // the unsigned-code offset of a layer's quantizer: 2^(bits - 1) symmetric, 0 asymmetric
///   const int offset = llmk::obs::with_quantizer(bits, symmetric,
///                                                []<class Q>() { return llmk::obs::kCodeOffset<Q>; });
template <class F>
decltype(auto) with_quantizer(int bits, bool symmetric, F&& f) {
  return detail::dispatch_quantizer<false>(bits, symmetric, SymmetricGrid::kAbsmax, static_cast<F&&>(f));
}

/// The parameters of a group whose finite values span [lo, hi] (lo <= hi; [0, 0] when none is finite) on
/// the chosen grid, for a Q of either form of with_quantizer: asymmetric Q::params_from_range(lo, hi);
/// symmetric kFullRange / kAbsmax that scheme's params_from_absmax(max(|lo|, |hi|)), except that kFullRange
/// gives an all-zero group the reference's s = 2 / (2^b - 1) (the range [-1, 1]) rather than llmk::quant's
/// s = 1: the same zero codes, and a usable grid when the group receives updates later; kReference as the
/// reference's find_params (xmin = min(lo, 0), xmax = max(hi, 0), then xmin = -max(|xmin|, xmax) only when
/// xmin < 0): kFullRange's scale when lo < 0, hi / (2^b - 1) when lo >= 0 < hi, 2 / (2^b - 1) when both are 0
/// (a scale that underflows to 0 becomes 1, as every llmk quantizer's).
///   const llmk::quant::QuantParams p = llmk::obs::grid_params<Q>(-0.5f, 2.0f,
///   llmk::obs::SymmetricGrid::kReference);
template <class Q>
LLMK_HOST_DEVICE quant::QuantParams grid_params(float lo, float hi, SymmetricGrid grid) {
  if constexpr (Q::kAsymmetric) {
    (void)grid;
    return Q::params_from_range(lo, hi);
  } else {
    using Full =
        quant::Quantizer<typename Q::storage_type, quant::SymmetricFullRange, typename Q::granularity>;
    using Abs = quant::Quantizer<typename Q::storage_type, quant::Symmetric, typename Q::granularity>;
    const float steps = static_cast<float>(Q::traits::kQmax - Q::traits::kQmin);  // 2^b - 1
    if (grid != SymmetricGrid::kAbsmax && lo == 0.0f && hi == 0.0f) return {2.0f / steps, 0};
    if (grid == SymmetricGrid::kReference && lo >= 0.0f) {
      const float scale = hi / steps;
      return {scale > 0.0f ? scale : 1.0f, 0};
    }
    const float amax = quant::fabs_f(lo) > quant::fabs_f(hi) ? quant::fabs_f(lo) : quant::fabs_f(hi);
    return grid == SymmetricGrid::kAbsmax ? Abs::params_from_absmax(amax) : Full::params_from_absmax(amax);
  }
}

/// Offset from Q's code to the unsigned stored code u (2^(b-1) for signed codes, 0 for unsigned ones).
template <class Q>
inline constexpr int kCodeOffset = Q::traits::kSigned ? -Q::traits::kQmin : 0;

}  // namespace llmk::obs
