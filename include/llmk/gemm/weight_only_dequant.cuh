// llmk/gemm/weight_only_dequant.cuh: the register dequantization of the weight-only GEMM (weight_only.cuh):
// packed-layout words (weight_only_layout.cuh) to mma B fragments, T(s * (u - z)) with ONE rounding, the
// value the host reference (llmk/reference/weight_only.hpp) builds, bit for bit.
//
// Four exact forms, chosen by (T, bits):
// - fp16, 4-bit: (word & 0x000F000F) | 0x6400'6400 is the f16x2 pair 1024 + u (ulp 1 in [1024, 2048)), and
//   (word & 0x00F000F0) | 0x5400'5400 is 64 + u (the nibble at bits 4..7 counts sixteenths in [64, 128)), so
//   that pair needs no shift. Subtracting the packed 1024 + z / 64 + z gives u - z exactly; one mul.rn.f16x2
//   by the scale is the only rounding. Per word (4 pairs, 2 mma B fragments): 4 LOP3, 1 shift, 4 HADD2, 4
//   HMUL2.
// - fp16, 8-bit: prmt(word, 0x64646464, 0x4240 / 0x4341) puts bytes 0 / 2 (1 / 3) under the exponent byte
//   0x64: 1024 + u; then the same sub and mul. Per word (2 pairs): 2 PRMT, 2 HADD2, 2 HMUL2.
// - bf16, 4-bit: ((word >> 4 i) & 0x000F000F) | 0x4300'4300 is 128 + u (exact for u < 128), minus 128 + z,
//   times s (sub / mul as fma.rn.bf16x2: one rounding each, the subtraction exact). Needs z < 128.
// - bf16, 8-bit: 128 + 255 is not a bf16, so fp32: prmt(word, 0x4B000000, 0x7540 + b) is 2^23 + u (byte b of
//   the word under fp32's 2^23), minus 2^23 + z exact, times s exact (<= 11 + 8 significant bits), and one
//   cvt.rn.bf16x2.f32 rounds the pair.
// The atoms (arch/bit_ops.cuh, arch/packed_math.cuh) run the same arithmetic in the simulator, bit-exactly.
#pragma once

#include <cstdint>
#include <type_traits>

#include "llmk/arch/bit_ops.cuh"
#include "llmk/arch/convert.cuh"
#include "llmk/arch/mma_f32.cuh"
#include "llmk/arch/packed_math.cuh"
#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/vector.cuh"

namespace llmk::gemm::detail {

template <class T, int kBits>
inline constexpr bool kWoPackedDequant = std::is_same_v<T, half> || kBits == 4;

constexpr std::uint32_t kWoMagic = 0x4B000000u;  // fp32 2^23: (code | 0x4B000000) is 2^23 + code, exactly
constexpr int kWoLopAndOr = 0xEA;                // lop3 truth table of (a & b) | c

/// The constants of one n8 column of a lane for its current group: the scale pair s2 and the zero pairs M + z
/// (z_lo: M = 1024 fp16 / 128 bf16; z_hi: 64 + z, fp16 4-bit's second nibble), or s and 2^23 + z in fp32.
struct WoColumnQuant {
  std::uint32_t s2, z_lo, z_hi;
  float sf, zf;
};

template <class T, int kBits>
LLMK_DEVICE WoColumnQuant wo_column_quant(T s, std::uint32_t z) {
  if constexpr (kWoPackedDequant<T, kBits>) {
    const std::uint32_t s2 = std::uint32_t{s.bits} * 0x00010001u;
    if constexpr (std::is_same_v<T, half>) {
      const std::uint32_t lo = (0x6400u | z) * 0x00010001u;  // 1024 + z, exact for z < 1024
      // 64 + z = (1024 + z) - 960, exact (integers below 2048).
      const std::uint32_t hi = kBits == 4 ? arch::sub_f16x2(lo, 0x63806380u) : 0u;
      return {s2, lo, hi, 0.0f, 0.0f};
    } else {
      return {s2, (0x4300u | z) * 0x00010001u, 0u, 0.0f, 0.0f};
    }
  } else {
    return {0u, 0u, 0u, s.to_float(), llmk::detail::bits_to_float(kWoMagic | z)};
  }
}

// (M + u pair - M + z pair) * s pair, packed.
template <class T>
LLMK_DEVICE std::uint32_t wo_scale_pair(std::uint32_t biased, std::uint32_t z2, std::uint32_t s2) {
  if constexpr (std::is_same_v<T, half>)
    return arch::mul_f16x2(arch::sub_f16x2(biased, z2), s2);
  else
    return arch::mul_bf16x2(arch::sub_bf16x2(biased, z2), s2);
}

/// One 4-bit word (one k16 step of a 16-column tile) to the B fragments of its two n8 sub-tiles:
/// b0 = sub-tile 0 (columns g, constants q0), b1 = sub-tile 1 (q1); register r of each as the mma wants.
template <class T>
LLMK_DEVICE void wo_dequant_word4(std::uint32_t word, const WoColumnQuant& q0, const WoColumnQuant& q1,
                                  std::uint32_t (&b0)[2], std::uint32_t (&b1)[2]) {
  if constexpr (std::is_same_v<T, half>) {
    const std::uint32_t upper = word >> 8;  // nibbles 2, 3 (sub-tile 1) down to 0, 1
    b0[0] = wo_scale_pair<T>(arch::lop3<kWoLopAndOr>(word, 0x000F000Fu, 0x64006400u), q0.z_lo, q0.s2);
    b0[1] = wo_scale_pair<T>(arch::lop3<kWoLopAndOr>(word, 0x00F000F0u, 0x54005400u), q0.z_hi, q0.s2);
    b1[0] = wo_scale_pair<T>(arch::lop3<kWoLopAndOr>(upper, 0x000F000Fu, 0x64006400u), q1.z_lo, q1.s2);
    b1[1] = wo_scale_pair<T>(arch::lop3<kWoLopAndOr>(upper, 0x00F000F0u, 0x54005400u), q1.z_hi, q1.s2);
  } else {
    b0[0] = wo_scale_pair<T>(arch::lop3<kWoLopAndOr>(word, 0x000F000Fu, 0x43004300u), q0.z_lo, q0.s2);
    b0[1] = wo_scale_pair<T>(arch::lop3<kWoLopAndOr>(word >> 4, 0x000F000Fu, 0x43004300u), q0.z_lo, q0.s2);
    b1[0] = wo_scale_pair<T>(arch::lop3<kWoLopAndOr>(word >> 8, 0x000F000Fu, 0x43004300u), q1.z_lo, q1.s2);
    b1[1] = wo_scale_pair<T>(arch::lop3<kWoLopAndOr>(word >> 12, 0x000F000Fu, 0x43004300u), q1.z_lo, q1.s2);
  }
}

/// One 8-bit word (one n8 sub-tile of one k16 step) to that sub-tile's B fragment.
template <class T>
LLMK_DEVICE void wo_dequant_word8(std::uint32_t word, const WoColumnQuant& q, std::uint32_t (&b)[2]) {
  if constexpr (std::is_same_v<T, half>) {
    b[0] = wo_scale_pair<T>(arch::prmt(word, 0x64646464u, 0x4240u), q.z_lo, q.s2);
    b[1] = wo_scale_pair<T>(arch::prmt(word, 0x64646464u, 0x4341u), q.z_lo, q.s2);
  } else {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const std::uint32_t sel = 0x7540u + static_cast<std::uint32_t>(r);
      const float lo = (llmk::detail::bits_to_float(arch::prmt(word, kWoMagic, sel)) - q.zf) * q.sf;
      const float hi = (llmk::detail::bits_to_float(arch::prmt(word, kWoMagic, sel + 2u)) - q.zf) * q.sf;
      b[r] = arch::MmaF32For<T>::pack(lo, hi);
    }
  }
}

// Stores a quad of a split-K reduction's sums (row, col .. col + cols - 1) as T(sum + bias): two 4-byte pair
// stores where `pair_store` (d 4-byte aligned, ldd even) and the quad is whole, else element by element.
template <class T>
LLMK_DEVICE void wo_store_reduced(T* d, std::int64_t ldd, const T* bias, bool pair_store, int row, int col,
                                  const float (&sum)[4], int cols) {
  T out[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float b = bias != nullptr && e < cols ? bias[col + e].to_float() : 0.0f;
    out[e] = T(sum[e] + b);
  }
  T* dst = d + static_cast<std::int64_t>(row) * ldd + col;
  if (cols == 4 && pair_store) {
    store4(dst, Vector4<T>{{out[0], out[1]}});
    store4(dst + 2, Vector4<T>{{out[2], out[3]}});
  } else {
    for (int e = 0; e < cols; ++e) dst[e] = out[e];
  }
}

}  // namespace llmk::gemm::detail
