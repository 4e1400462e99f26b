// llmk/attention/prefill_sm90_layout.cuh: the tiles of the Hopper prefill kernel (prefill_sm90.cuh): its
// configurations (fp16/bf16 and fp8 operands), the swizzled shared-memory layout the TMA boxes and the wgmma
// descriptors share, the barriers, and the fp8 kernel's key order for P V.
//
// fp8 P V. An 8-bit wgmma reads B (V, N = head dim) K-major only, so the fp8 kernel keeps V transposed in
// its ring: Vt[d][k], the keys of a tile contiguous per head-dim row. The A operand (P, from registers)
// wants, in each 32-key step, k = 4t..4t+3 and 16+4t..16+4t+3 per thread (t = lane % 4), while the S
// accumulator holds columns 2t, 2t+1 of each 8-column block. Rather than exchanging bytes between lanes,
// the kernel packs each thread's own P values in register order (pack_p_fp8) and stores the keys of V in
// the same order (fp8_vt_key): A position 4t + j of a 16-key half holds key 8 * (j / 2) + 2t + j % 2. A
// sum over keys does not depend on their order, so P V is unchanged.
#pragma once

#include <cstdint>

#include "llmk/arch/convert.cuh"
#include "llmk/arch/sm90/pipeline.cuh"
#include "llmk/arch/sm90/wgmma.cuh"
#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"

namespace llmk::attention {

namespace detail {

/// The swizzle mode of a column block `span` bytes wide (32, 64 or 128).
template <int Span>
inline constexpr arch::sm90::SmemSwizzle kSwizzleOfSpan = Span == 128  ? arch::sm90::SmemSwizzle::k128B
                                                          : Span == 64 ? arch::sm90::SmemSwizzle::k64B
                                                                       : arch::sm90::SmemSwizzle::k32B;

/// The widest swizzle span (128, 64 or 32 bytes) that divides a row of `row_bytes`.
constexpr int span_of_row(int row_bytes) {
  return row_bytes % 128 == 0 ? 128 : row_bytes % 64 == 0 ? 64 : 32;
}

/// The tiling shared by the fp16/bf16 and fp8 configurations: head dim, Bc keys per KV tile, Stages slots,
/// ElemBytes per Q/K/V element. The query tile is 128 rows (two consumer warpgroups of 64).
template <int HeadDim, int Bc, int Stages, int ElemBytes>
struct Sm90PrefillTiles {
  static_assert(HeadDim % 16 == 0 && HeadDim >= 16 && HeadDim <= 256,
                "head dim must be a multiple of 16 in [16, 256]");
  static_assert(Bc % 16 == 0 && Bc >= 16 && Bc <= 256, "Bc must be a multiple of 16 in [16, 256]");
  static_assert(Stages >= 1 && Stages <= 8, "the ring has 1..8 slots");
  static constexpr int kHeadDim = HeadDim, kBr = 128, kBc = Bc, kStages = Stages, kElemBytes = ElemBytes;
  static constexpr int kThreads = 384, kConsumerWarps = 8;
  static constexpr int kRowBytes = HeadDim * ElemBytes;  // one Q/K/V row
  /// Bytes of a column block's row: the widest swizzle span that divides a row.
  static constexpr int kSpan = span_of_row(kRowBytes);
  static constexpr arch::sm90::SmemSwizzle kSwizzle = kSwizzleOfSpan<kSpan>;
  static constexpr int kSpanElems = kSpan / ElemBytes;
  static constexpr int kDBlocks = kRowBytes / kSpan;
  static constexpr int kKSteps = kRowBytes / 32;  // wgmma k-steps of 32 bytes along the head dim (S = Q K^T)
  static constexpr int kQBytes = kBr * kRowBytes;
  static constexpr int kTileBytes = Bc * kRowBytes;  // one K or V tile
  static constexpr int kBarrierBytes = 1024;
};

}  // namespace detail

/// Tiling of the Hopper prefill kernel over fp16/bf16 operands: head dim (a multiple of 16 up to 256), Bc
/// keys per KV tile (a multiple of 16 up to 256), Stages K+V slots in the TMA ring. Example:
/// prefill_sm90_with_config (prefill_sm90.cuh), with Sm90PrefillConfig<128, 64, 3>.
template <int HeadDim, int Bc, int Stages>
struct Sm90PrefillConfig : detail::Sm90PrefillTiles<HeadDim, Bc, Stages, 2> {
  using Tiles = detail::Sm90PrefillTiles<HeadDim, Bc, Stages, 2>;
  static constexpr bool kFp8 = false;
  /// The consumer warpgroups issue their wgmmas in turns (ping-pong), so one's softmax overlaps the other's
  /// tensor-core work: up to head dim 128, where the softmax is a large share of a tile (FlashAttention-3
  /// makes the same choice from its measurements; at d256 the GEMMs dominate and turns would only wait).
  static constexpr bool kPingPong = HeadDim <= 128;
  static constexpr int kOutSpan = Tiles::kSpan;  // the epilogue stages the output in Q's rows
  static constexpr std::size_t kSmemBytes = static_cast<std::size_t>(Tiles::kQBytes) +
                                            2ull * Stages * Tiles::kTileBytes + Tiles::kBarrierBytes +
                                            1024;  // + alignment
  static_assert(kSmemBytes <= 227 * 1024, "Q, the K/V ring and the barriers must fit in 227 KiB");
};

/// Tiling of the fp8 (e4m3 Q/K/V) Hopper prefill kernel: head dim a multiple of 32 (the k-steps of an 8-bit
/// wgmma; 64 when Bc = 32), Bc 32, 64, 128 or 256, Stages slots of K and of transposed V. V tiles land in two
/// staging slots (TMA or cp.async) and the producer warpgroup transposes them into the ring; the epilogue
/// stages the 16-bit output there. Example: prefill_fp8_with_config (prefill_fp8.cuh), with
/// Sm90Fp8PrefillConfig<128, 128, 2>.
template <int HeadDim, int Bc, int Stages>
struct Sm90Fp8PrefillConfig : detail::Sm90PrefillTiles<HeadDim, Bc, Stages, 1> {
  using Tiles = detail::Sm90PrefillTiles<HeadDim, Bc, Stages, 1>;
  static_assert(HeadDim % 32 == 0, "fp8 prefill: the head dim must be a multiple of 32");
  static_assert(Bc == 32 || Bc == 64 || Bc == 128 || Bc == 256,
                "fp8 prefill: Bc is 32, 64, 128 or 256 (the V transposition's thread layout)");
  // The V transposition steps the head dim by 2048 / Bc bytes a pass (sm90_transpose_v's kStep): 64 at Bc =
  // 32 (D % 32 covers the other Bc).
  static_assert(HeadDim % (2048 / Bc) == 0,
                "fp8 prefill: with Bc = 32 the head dim must be a multiple of 64");
  static constexpr bool kFp8 = true;
  /// Ping-pong from head dim 128 (FlashAttention-3's choice for fp8: below, the tiles are too short for the
  /// turns to pay).
  static constexpr bool kPingPong = HeadDim >= 128;
  static constexpr int kVtSpan = detail::span_of_row(Bc);  // Vt rows are Bc bytes
  static constexpr arch::sm90::SmemSwizzle kVtSwizzle = detail::kSwizzleOfSpan<kVtSpan>;
  static constexpr int kOutSpan = detail::span_of_row(HeadDim * 2);  // 16-bit output rows
  static constexpr int kOutBytes = Tiles::kBr * HeadDim * 2;
  static constexpr int kStagingBytes = 2 * Tiles::kTileBytes > kOutBytes ? 2 * Tiles::kTileBytes : kOutBytes;
  static constexpr std::size_t kSmemBytes = static_cast<std::size_t>(Tiles::kQBytes) +
                                            2ull * Stages * Tiles::kTileBytes + kStagingBytes +
                                            Tiles::kBarrierBytes + 1024;
  static_assert(kSmemBytes <= 227 * 1024,
                "Q, the K/Vt ring, the staging and the barriers must fit in 227 KiB");
};

/// Defaults per head dim: 128 x 128 tiles in a 4-slot ring up to head dim 64, 128 x 128 in 2 slots up to
/// 128, 128 x 64 in 2 slots above (d256: 194 KiB of shared memory). prefill() and prefill_with_config use
/// them on sm_90:  using Cfg = llmk::attention::DefaultSm90PrefillConfig<128>;
template <int HeadDim>
using DefaultSm90PrefillConfig =
    Sm90PrefillConfig<HeadDim, (HeadDim <= 128 ? 128 : 64), (HeadDim <= 64 ? 4 : 2)>;

/// fp8 defaults: 128 x 128 tiles in 2 slots up to head dim 128 (112 KiB at d128), 128 x 64 above (d256:
/// 160 KiB). What prefill_fp8() uses:  using Cfg = llmk::attention::DefaultSm90Fp8PrefillConfig<128>;
template <int HeadDim>
using DefaultSm90Fp8PrefillConfig = Sm90Fp8PrefillConfig<HeadDim, (HeadDim <= 128 ? 128 : 64), 2>;

namespace detail {

/// The barriers of the kernel, after the tiles.
template <int Stages>
struct Sm90PrefillBarriers {
  arch::sm90::TmaRing<Stages> k;  // K tiles: a slot is free once the S = Q K^T reading it completed
  arch::sm90::TmaRing<Stages> v;  // V (fp8: Vt) tiles: free once the P V reading it completed
  std::uint64_t q_full;           // the Q tile landed
  std::uint64_t tail_full;        // the last tile's V landed, before the producer zeroes its tail
  std::uint64_t v_staged[2];      // fp8: a V tile landed in staging slot 0 / 1
};

/// Offset of byte `b` (16-aligned chunks stay whole) of row `r` in a K-major tile of `rows` rows stored as
/// column blocks of Span bytes with the matching swizzle (tiles start at a multiple of 1024).
template <int Span>
LLMK_HOST_DEVICE int swizzled_span_offset(int rows, int r, int b) {
  const int off = (b / Span) * rows * Span + r * Span + b % Span;
  constexpr int kChunkMask = Span / 16 - 1;
  return off ^ (((off >> 7) & kChunkMask) << 4);
}

/// swizzled_span_offset in the Q/K/V tiles of a configuration.
template <class Cfg>
LLMK_HOST_DEVICE int swizzled_offset(int rows, int r, int b) {
  return swizzled_span_offset<Cfg::kSpan>(rows, r, b);
}

/// The key (within its tile) that position `pos` of a transposed fp8 V row holds (see the file comment).
LLMK_HOST_DEVICE constexpr int fp8_vt_key(int pos) {
  const int j = pos % 4, t = (pos / 4) % 4;
  return pos - pos % 16 + 8 * (j / 2) + 2 * t + j % 2;
}

/// P (the scores after the softmax, in the S accumulator's m16n8 view) -> e4m3 A fragments of the 8-bit
/// wgmma, one [4] per 32-key step, in register order (the keys of V are stored in the same order).
template <int kN8>
LLMK_DEVICE void pack_p_fp8(const float (&p)[1][kN8][4], std::uint32_t (&a)[kN8 / 4][4]) {
  static_assert(kN8 % 4 == 0, "P is consumed in k32 steps");
#pragma unroll
  for (int kk = 0; kk < kN8 / 4; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int n = 4 * kk + 2 * (r / 2), e = 2 * (r % 2);  // rows g (r even) / g + 8 (r odd)
      a[kk][r] =
          static_cast<std::uint32_t>(arch::cvt_f32x2_to_e4m3x2(p[0][n][e], p[0][n][e + 1])) |
          (static_cast<std::uint32_t>(arch::cvt_f32x2_to_e4m3x2(p[0][n + 1][e], p[0][n + 1][e + 1])) << 16);
    }
}

}  // namespace detail

}  // namespace llmk::attention
