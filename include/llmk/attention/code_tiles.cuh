// llmk/attention/code_tiles.cuh: tiles of an 8-bit K/V cache (int8, fp8 e4m3 / e5m2) that stay 8-bit in
// shared memory and are dequantized in registers, on their way into the mma fragments.
//
// The decode kernel's quantized path used to copy a tile's codes into a staging area, dequantize the whole
// tile into a T tile in a separate pass between two barriers, then run the T path over it: one tile in
// flight, the scales read from global memory right after a barrier. Here the codes and their per-row scales
// travel through an ordinary Stages-deep cp.async ring (half the bytes of a T ring per stage) and each
// warp converts exactly the codes its mma fragments need:
//   K (B of S = Q K^T: n = key, k = dim): the pairs (2t, 2t+1) and (2t+8, 2t+9) of key g's row, two 16-bit
//     shared loads per mma, in the natural dim order (the same sums as the T path, bit for bit);
//   V (B of O += P V: k = key, n = dim): ldmatrix.trans on the codes read as 16-bit pairs gives thread
//     (g, t) the bytes V[2t][2g], V[2t][2g+1], V[2t+1][2g], V[2t+1][2g+1], i.e. the B fragments of two n8
//     tiles at once: the dims 2g ("even" tile) and 2g+1 ("odd" tile) of each 16-dim chunk. The keys (the
//     reduction) keep their order; only the output columns are relabelled, undone by o_dim().
// Every element is T(float(code) * scale), the value dequant_codes computes, so the quantized decode gives
// the same bits as the dense decode over the dequantized cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "llmk/arch/bit_ops.cuh"
#include "llmk/arch/convert.cuh"
#include "llmk/arch/cp_async.cuh"
#include "llmk/arch/ldmatrix.cuh"
#include "llmk/arch/packed_math.cuh"
#include "llmk/attention/tile_ops.cuh"
#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/kvcache/paged_kv.cuh"

namespace llmk::attention::detail {

/// One stage of the code ring: kRows rows of K codes, kRows rows of V codes (row pitch kDim + 16 bytes:
/// 16-byte aligned, and ldmatrix / 16-bit loads of 8 consecutive rows hit distinct banks), then the rows'
/// K scales and V scales (fp32).
template <int kRows, int kDim>
struct CodeStage {
  static constexpr int kPitch = kDim + 16;  // bytes
  static constexpr std::size_t kCodeBytes = static_cast<std::size_t>(kRows) * kPitch;
  static constexpr std::size_t kBytes = 2 * kCodeBytes + 2 * kRows * sizeof(float);
  static_assert(kDim % 16 == 0, "8-bit rows are copied in 16-byte chunks");

  unsigned char* base;
  LLMK_DEVICE unsigned char* k() const { return base; }
  LLMK_DEVICE unsigned char* v() const { return base + kCodeBytes; }
  LLMK_DEVICE float* k_scale() const { return reinterpret_cast<float*>(base + 2 * kCodeBytes); }
  LLMK_DEVICE float* v_scale() const { return k_scale() + kRows; }
};

/// Issues the cp.async copies of keys key0.. of (sequence b, KV head `head`) into `stage`: kThreads / kRows
/// threads per row, one page lookup per thread, each copying its share of the row's 16-byte chunks, and
/// the row's K scale (first thread) or V scale (second). Rows at or past key_end and rows of a bad page are
/// zero-filled, codes and scales (so they dequantize to +0).
template <int kRows, int kDim, int kThreads, class T, class Code>
LLMK_DEVICE void stage_code_tile(const kvcache::PagedKv<T, Code>& pages, int b, int head, int key0,
                                 int key_end, const CodeStage<kRows, kDim>& stage, int tid) {
  constexpr int kPerRow = kThreads / kRows, kChunksPerRow = kDim / 16;
  static_assert(kThreads % kRows == 0 && kPerRow >= 2, "two or more threads per row (K and V scales)");
  constexpr int kPitch = CodeStage<kRows, kDim>::kPitch;
  const int row = tid / kPerRow, part = tid % kPerRow;
  int page = -1, slot = 0;
  if (key0 + row < key_end) pages.locate(b, key0 + row, page, slot);
  const bool valid = page >= 0;
  const std::int64_t off = valid ? pages.row_offset_at(page, slot, head) : 0;
  const auto* k_src = reinterpret_cast<const unsigned char*>(pages.k_pages) + off;
  const auto* v_src = reinterpret_cast<const unsigned char*>(pages.v_pages) + off;
  unsigned char* k_dst = stage.k() + row * kPitch;
  unsigned char* v_dst = stage.v() + row * kPitch;
#pragma unroll
  for (int j = part; j < kChunksPerRow; j += kPerRow) {
    arch::cp_async_cg16_zfill(k_dst + j * 16, k_src + (valid ? j * 16 : 0), valid ? 16 : 0);
    arch::cp_async_cg16_zfill(v_dst + j * 16, v_src + (valid ? j * 16 : 0), valid ? 16 : 0);
  }
  if (part < 2) {
    const std::int64_t s = valid ? pages.scale_index(page, slot, head) : 0;
    arch::cp_async_zfill<4>((part == 0 ? stage.k_scale() : stage.v_scale()) + row,
                            (part == 0 ? pages.k_scales : pages.v_scales) + s, valid ? 4 : 0);
  }
}

/// The four 8-bit codes of `x` (byte i: code i) as floats, exactly.
template <class Code>
LLMK_DEVICE void codes_to_float4(std::uint32_t x, float (&f)[4]) {
  if constexpr (std::is_same_v<Code, std::int8_t>) {
    // code + 128 as the low byte of the float 2^23 + (code + 128): one byte permute and one add per code
    // (I2F would be exact too, at an eighth of the FP32 rate).
    const std::uint32_t biased = x ^ 0x80808080u;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      f[i] = ::llmk::detail::bits_to_float(
                 arch::prmt(biased, 0x4B000000u, 0x7650u + static_cast<std::uint32_t>(i))) -
             8388736.0f;  // 2^23 + 128
  } else if constexpr (std::is_same_v<Code, float8_e5m2>) {
    // e5m2 is the high byte of the f16 of the same value: a byte permute per pair, then f16 -> f32 (exact).
    arch::cvt_f16x2_to_f32x2(arch::prmt(x, 0u, 0x1404u), f[0], f[1]);
    arch::cvt_f16x2_to_f32x2(arch::prmt(x, 0u, 0x3424u), f[2], f[3]);
  } else {
#if LLMK_DEVICE_PASS && LLMK_ARCH >= 890
    // e4m3 -> f16 is exact (one cvt per pair), f16 -> f32 too.
    arch::cvt_f16x2_to_f32x2(arch::cvt_e4m3x2_to_f16x2(static_cast<std::uint16_t>(x & 0xFFFFu)), f[0], f[1]);
    arch::cvt_f16x2_to_f32x2(arch::cvt_e4m3x2_to_f16x2(static_cast<std::uint16_t>(x >> 16)), f[2], f[3]);
#else
    // No fp8 conversion instruction (sm_80, the simulator). e4m3 S.EEEE.MMM moved to f16 bits
    // S.0EEEE.MMM0000000 is the value times 2^-8 (subnormals too); one exact f16 multiply by 2^8 restores it.
    // The NaN codes (S.1111.111) would become +-480: they are put back by hand.
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const std::uint32_t u =
          arch::prmt(x, 0u, p == 0 ? 0x1404u : 0x3424u);  // code 2p + i in the top byte of lane i
      const std::uint32_t h = arch::mul_f16x2((u & 0x80008000u) | ((u >> 1) & 0x3F803F80u), 0x5C005C00u);
      arch::cvt_f16x2_to_f32x2(h, f[2 * p], f[2 * p + 1]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (((x >> (8 * i)) & 0x7Fu) == 0x7Fu)
        f[i] = ::llmk::detail::bits_to_float(::llmk::detail::kCanonicalFloatNaN);
#endif
  }
}

/// s = Q K^T for the 16 query rows of `q` (T, pitch kQPitch) and the 16 keys of `k` (codes, the warp's first
/// row, pitch kCodePitch; `k_scale` their scales): compute_scores() with K dequantized in registers.
template <class T, class Code, int kDim, int kQPitch, int kCodePitch>
LLMK_DEVICE void compute_scores_codes(const T* q, const unsigned char* k, const float* k_scale, int lane,
                                      float (&s)[1][2][4]) {
  using Mma = typename MmaFor<T>::Atom;
  const int g = lane / 4, t = lane % 4;
  const float scale[2] = {k_scale[g], k_scale[8 + g]};
#pragma unroll
  for (int ni = 0; ni < 2; ++ni)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[0][ni][e] = 0.0f;
#pragma unroll
  for (int kd = 0; kd < kDim / 16; ++kd) {
    std::uint32_t a[4];
    arch::LDSM_x4::copy(&q[(lane % 16) * kQPitch + kd * 16 + (lane / 16) * 8], a[0], a[1], a[2], a[3]);
#pragma unroll
    for (int ni = 0; ni < 2; ++ni) {
      const unsigned char* row = k + (ni * 8 + g) * kCodePitch + kd * 16 + 2 * t;
      // Dims 2t, 2t + 1 (low half) and 2t + 8, 2t + 9 (high half) of key g.
      const std::uint32_t codes = arch::prmt(*reinterpret_cast<const std::uint16_t*>(row),
                                             *reinterpret_cast<const std::uint16_t*>(row + 8), 0x5410u);
      float f[4];
      codes_to_float4<Code>(codes, f);
      const std::uint32_t b[2] = {MmaFor<T>::pack(f[0] * scale[ni], f[1] * scale[ni]),
                                  MmaFor<T>::pack(f[2] * scale[ni], f[3] * scale[ni])};
      Mma::fma(s[0][ni], a, b, s[0][ni]);
    }
  }
}

/// o += P V for the warp's 16 keys: P packed by pack_p(), V the codes of the warp's first key row (pitch
/// kCodePitch) and `v_scale` their scales. o[2c] and o[2c + 1] are the even and odd dims of chunk c
/// (o_dim() maps a fragment element to its dim).
template <class T, class Code, int kD8, int kCodePitch>
LLMK_DEVICE void accumulate_pv_codes(const std::uint32_t (&a)[1][1][4], const unsigned char* v,
                                     const float* v_scale, int lane, float (&o)[1][kD8][4]) {
  constexpr int kChunks = kD8 / 2;  // 16-dim chunks
  using Mma = typename MmaFor<T>::Atom;
  const int t = lane % 4;
  // The keys of this thread's B elements: 2t, 2t + 1 (low block), 2t + 8, 2t + 9 (high block).
  const float s00 = v_scale[2 * t], s01 = v_scale[2 * t + 1];
  const float s10 = v_scale[2 * t + 8], s11 = v_scale[2 * t + 9];
#pragma unroll
  for (int c = 0; c < kChunks; c += 2) {
    // Transposed x4 of 16-bit pairs: matrix j covers keys (j % 2) * 8.. and the 16 dims of chunk c + j / 2
    // (an odd last chunk: x2, matrices 0 and 1).
    const int j = lane / 8;
    std::uint32_t r[4] = {0u, 0u, 0u, 0u};
    if (c + 1 < kChunks)
      arch::LDSM_x4_T::copy(v + ((j % 2) * 8 + lane % 8) * kCodePitch + (c + j / 2) * 16, r[0], r[1], r[2],
                            r[3]);
    else
      arch::LDSM_x2_T::copy(v + ((j % 2) * 8 + lane % 8) * kCodePitch + c * 16, r[0], r[1]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (c + h >= kChunks) break;
      // Bytes of r: V[2t][2g], V[2t][2g + 1], V[2t + 1][2g], V[2t + 1][2g + 1] (keys 0..7 in r[2h], keys
      // 8..15 in r[2h + 1], of chunk c + h).
      float lo[4], hi[4];
      codes_to_float4<Code>(r[2 * h], lo);
      codes_to_float4<Code>(r[2 * h + 1], hi);
      const std::uint32_t even[2] = {MmaFor<T>::pack(lo[0] * s00, lo[2] * s01),
                                     MmaFor<T>::pack(hi[0] * s10, hi[2] * s11)};
      const std::uint32_t odd[2] = {MmaFor<T>::pack(lo[1] * s00, lo[3] * s01),
                                    MmaFor<T>::pack(hi[1] * s10, hi[3] * s11)};
      Mma::fma(o[0][2 * (c + h)], a[0][0], even, o[0][2 * (c + h)]);
      Mma::fma(o[0][2 * (c + h) + 1], a[0][0], odd, o[0][2 * (c + h) + 1]);
    }
  }
}

/// The dim of element e (0..3: rows g, g, g + 8, g + 8) of tile di of accumulate_pv_codes()'s o, for thread
/// t.
LLMK_HOST_DEVICE constexpr int o_dim(int di, int e, int t) {
  return (di / 2) * 16 + 4 * t + 2 * (e % 2) + di % 2;
}

}  // namespace llmk::attention::detail
