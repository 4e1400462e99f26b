// llmk/attention/code_tiles.cuh: tiles of an 8-bit K/V cache (int8, fp8 e4m3 / e5m2) that stay 8-bit in
// shared memory and are dequantized in registers, on their way into the mma fragments.
//
// The decode kernel's quantized path used to copy a tile's codes into a staging area, dequantize the whole
// tile into a T tile in a separate pass between two barriers, then run the T path over it: one tile in
// flight, the scales read from global memory right after a barrier. Here the codes and their per-row scales
// travel through an ordinary Stages-deep cp.async ring (half the bytes of a T ring per stage) and each
// warp converts exactly the codes its mma fragments need:
//   K (B of S = Q K^T: n = key, k = dim): dims 4t..4t+3 of key g's row, one 32-bit shared load per mma, as
//     the k slots 2t, 2t+1, 2t+8, 2t+9 (Q's chunks are interleaved to match once per block);
//   V (B of O += P V: k = key, n = dim): ldmatrix.trans on the codes read as 16-bit pairs gives thread
//     (g, t) the bytes V[2t][2g], V[2t][2g+1], V[2t+1][2g], V[2t+1][2g+1], i.e. the B fragments of two n8
//     tiles at once: the dims 2g ("even" tile) and 2g+1 ("odd" tile) of each 16-dim chunk. The keys (the
//     reduction) keep their order; only the output columns are relabelled, undone by o_dim().
// The codes convert to T exactly (every int8 / e4m3 / e5m2 value is a half and a bfloat16) and the scales
// are applied where they cost least: K's to the fp32 scores (one multiply per score, not per code), V's to P
// before it is packed (VScaleFold). So the decode over an 8-bit cache computes attention over the exact
// dequantized values code * scale, K without a rounding to T; it is not bit-identical to the dense decode
// over T(code * scale) (docs/kvcache.md, "Dequantize on read").
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
#include "llmk/core/vector.cuh"
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

/// Issues the cp.async copies of this thread's row of `stage` (row tid / (kThreads / kRows)), token at
/// (physical page `page`, `slot`) of KV head `head` (page -1: a key past the end or a bad page): kThreads /
/// kRows threads per row, each copying its share of the row's 16-byte chunks, and the row's K scale (first
/// thread) or V scale (second). A row with page -1 is zero-filled, codes and scales (it dequantizes to +0).
template <int kRows, int kDim, int kThreads, class T, class Code>
LLMK_DEVICE void stage_code_row(const kvcache::PagedKv<T, Code>& pages, int head, int page, int slot,
                                const CodeStage<kRows, kDim>& stage, int tid) {
  constexpr int kPerRow = kThreads / kRows, kChunksPerRow = kDim / 16;
  static_assert(kThreads % kRows == 0 && kPerRow >= 2, "two or more threads per row (K and V scales)");
  constexpr int kPitch = CodeStage<kRows, kDim>::kPitch;
  const int row = tid / kPerRow, part = tid % kPerRow;
  const bool valid = page >= 0;
  const std::int64_t off = valid ? pages.row_offset_at(page, slot, head) : 0;
  const auto* k_src = reinterpret_cast<const unsigned char*>(pages.k_pages) + off;
  const auto* v_src = reinterpret_cast<const unsigned char*>(pages.v_pages) + off;
  unsigned char* k_dst = stage.k() + row * kPitch;
  unsigned char* v_dst = stage.v() + row * kPitch;
  // A zero-filled row copies from the pool's first row (src-size 0 reads nothing): every chunk's address
  // is then the row's plus an immediate, with no select per chunk.
#pragma unroll
  for (int j = part; j < kChunksPerRow; j += kPerRow) {
    arch::cp_async_cg16_zfill(k_dst + j * 16, k_src + j * 16, valid ? 16 : 0);
    arch::cp_async_cg16_zfill(v_dst + j * 16, v_src + j * 16, valid ? 16 : 0);
  }
  if (part < 2) {
    const std::int64_t s = valid ? pages.scale_index(page, slot, head) : 0;
    arch::cp_async_zfill<4>((part == 0 ? stage.k_scale() : stage.v_scale()) + row,
                            (part == 0 ? pages.k_scales : pages.v_scales) + s, valid ? 4 : 0);
  }
}

/// The page lookups of decode's code ring, a tile ahead of the copies: fetch() loads the raw table entry of
/// this thread's row (one lookup per thread and tile), issue() (a pipeline step later) checks it and stages
/// the row (stage_code_row), so the copies never wait for the table load.
template <int kRows, int kDim, int kThreads>
struct CodeRowsAhead {
  int page = 0, slot = 0;
  bool in_seq = false;

  /// `table`: the sequence's row of the page table (PagedKv::table_row).
  template <class Pages>
  LLMK_DEVICE void fetch(const Pages& pages, const int* table, int key0, int key_end, int tid) {
    const int key = key0 + tid / (kThreads / kRows);
    in_seq = key < key_end;
    page = slot = 0;
    if (in_seq) {
      int logical;
      pages.split_key(key, logical, slot);
      page = table[logical];
    }
  }
  template <class T, class Code>
  LLMK_DEVICE void issue(const kvcache::PagedKv<T, Code>& pages, int head,
                         const CodeStage<kRows, kDim>& stage, int tid) const {
    stage_code_row<kRows, kDim, kThreads>(pages, head, in_seq ? pages.checked_page(page) : -1, slot, stage,
                                          tid);
  }
};

/// prmt selector that puts codes lo and hi (byte indices of a) into the two 16-bit halves of the result:
/// as the low byte of each half under a fill byte taken from b (high = false), or as the high byte over a
/// zero low byte from b (high = true).
LLMK_HOST_DEVICE constexpr std::uint32_t code_byte_sel(int lo, int hi, bool high) {
  return high ? (4u | static_cast<std::uint32_t>(lo) << 4 | 4u << 8 | static_cast<std::uint32_t>(hi) << 12)
              : (static_cast<std::uint32_t>(lo) | 4u << 4 | static_cast<std::uint32_t>(hi) << 8 | 4u << 12);
}

/// fp8 codes kA0, kA1 and kB0, kB1 of `x` as f16 pairs, exactly.
template <class Code, int kA0, int kA1, int kB0, int kB1>
LLMK_DEVICE void codes_to_f16_pairs(std::uint32_t x, std::uint32_t& a, std::uint32_t& b) {
  static_assert(std::is_same_v<Code, float8_e4m3> || std::is_same_v<Code, float8_e5m2>, "fp8 codes");
  if constexpr (std::is_same_v<Code, float8_e5m2>) {
    // e5m2 is the high byte of the f16 of the same value.
    a = arch::prmt(x, 0u, code_byte_sel(kA0, kA1, true));
    b = arch::prmt(x, 0u, code_byte_sel(kB0, kB1, true));
  } else {
#if LLMK_DEVICE_PASS && LLMK_ARCH >= 890
    // e4m3 -> f16 is exact: one cvt per pair.
    constexpr std::uint32_t kSelA = static_cast<std::uint32_t>(kA0 | kA1 << 4 | 0x4400);
    constexpr std::uint32_t kSelB = static_cast<std::uint32_t>(kB0 | kB1 << 4 | 0x4400);
    a = arch::cvt_e4m3x2_to_f16x2(static_cast<std::uint16_t>(arch::prmt(x, 0u, kSelA)));
    b = arch::cvt_e4m3x2_to_f16x2(static_cast<std::uint16_t>(arch::prmt(x, 0u, kSelB)));
#else
    // No fp8 conversion instruction (sm_80, the simulator). e4m3 S.EEEE.MMM moved to f16 bits
    // S.0EEEE.MMM0000000 is the value times 2^-8 (subnormals too); one exact f16 multiply by 2^8 restores it.
    // The NaN codes (S.1111.111) would become +-480: they are put back by hand.
    auto convert = [](std::uint32_t u) {  // code i in the high byte of half i
      const std::uint32_t h = arch::mul_f16x2((u & 0x80008000u) | ((u >> 1) & 0x3F803F80u), 0x5C005C00u);
      // Bit 15 of a half is set where its code's low 7 bits are all ones (no carry leaves the half); such
      // halves get 0x7FFF or-ed in: a NaN of the code's sign.
      const std::uint32_t nan = ((u & 0x7F007F00u) + 0x01000100u) & 0x80008000u;
      return h | (nan - (nan >> 15));
    };
    a = convert(arch::prmt(x, 0u, code_byte_sel(kA0, kA1, true)));
    b = convert(arch::prmt(x, 0u, code_byte_sel(kB0, kB1, true)));
#endif
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
  } else {
    std::uint32_t h0, h1;
    codes_to_f16_pairs<Code, 0, 1, 2, 3>(x, h0, h1);
    arch::cvt_f16x2_to_f32x2(h0, f[0], f[1]);
    arch::cvt_f16x2_to_f32x2(h1, f[2], f[3]);
  }
}

/// Codes kA0, kA1 (pair a) and kB0, kB1 (pair b) of the four in `x` as T pairs (the first code in the low
/// half), exactly: every int8, e4m3 and e5m2 value is a half and a bfloat16. fp16 takes the short paths
/// (int8: a byte permute under the fp16 1024 and one packed subtract per pair; e5m2: one byte permute per
/// pair; e4m3: one cvt per pair on sm_89+); bf16 goes through exact floats.
template <class T, class Code, int kA0, int kA1, int kB0, int kB1>
LLMK_DEVICE void codes_to_pairs(std::uint32_t x, std::uint32_t& a, std::uint32_t& b) {
  if constexpr (std::is_same_v<T, half> && std::is_same_v<Code, std::int8_t>) {
    // 0x64XX is the fp16 1024 + XX; XX = code + 128 (the sign bit flipped), so subtracting 1152 leaves code.
    const std::uint32_t biased = x ^ 0x80808080u;
    a = arch::sub_f16x2(arch::prmt(biased, 0x64646464u, code_byte_sel(kA0, kA1, false)), 0x64806480u);
    b = arch::sub_f16x2(arch::prmt(biased, 0x64646464u, code_byte_sel(kB0, kB1, false)), 0x64806480u);
  } else if constexpr (std::is_same_v<T, half>) {
    codes_to_f16_pairs<Code, kA0, kA1, kB0, kB1>(x, a, b);
  } else {
    float f[4];
    codes_to_float4<Code>(x, f);
    a = MmaFor<T>::pack(f[kA0], f[kA1]);
    b = MmaFor<T>::pack(f[kB0], f[kB1]);
  }
}

/// 16 codes at `src` (shared memory) times `scale`, rounded to T: T(float(code) * scale), the prefill's and
/// the reference's dequantization. Codes 0..7 go to dst0, 8..15 to dst1 (16-byte stores).
template <class T, class Code>
LLMK_DEVICE void dequant_chunk16(const unsigned char* src, float scale, void* dst0, void* dst1) {
  const Vector16<std::uint32_t> c = load16(reinterpret_cast<const std::uint32_t*>(src));
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    Vector16<std::uint32_t> out;
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      float f[4];
      codes_to_float4<Code>(c.elements[2 * h + w], f);
      out.elements[2 * w] = MmaFor<T>::pack(f[0] * scale, f[1] * scale);
      out.elements[2 * w + 1] = MmaFor<T>::pack(f[2] * scale, f[3] * scale);
    }
    store16(reinterpret_cast<std::uint32_t*>(h == 0 ? dst0 : dst1), out);
  }
}

/// The mma.sync prefill's quantized tiles, in two steps per K/V tile:
///   stage_codes    cp.async copies of the tile's 8-bit K and V codes and their per-row scales into a staging
///                  area (the ring's second slots, unused by this path), issued before the previous tile
///                  computes: kThreads / kRows threads a row (at least one), one page lookup per row and
///                  thread, each copying every (kThreads / kRows)-th 16-byte chunk; the scales after the
///                  codes;
///   dequant_codes  after the copies landed, T(float(code) * scale) into the first ring slots, which the mma
///                  path then reads as usual (no global load: the first version looked each row up again
///                  here, per 16 codes, for its scales).
/// Rows past key_end (and rows whose page is invalid) are zero-filled, codes and scales, so they become +0.
/// kRows x kDim codes, kThreads threads, the staging rows padded to kDim + 16 bytes.
template <class T, int kRows, int kDim, int kThreads>
struct QuantizedTile {
  static constexpr int kStagePitch = kDim + 16;  // bytes
  static constexpr int kChunksPerRow = kDim / 16, kChunks = kRows * kChunksPerRow;
  static constexpr int kScaleOffset = kRows * kStagePitch;  // bytes: the rows' fp32 scales follow the codes
  static constexpr int kPerRow = kThreads >= kRows ? kThreads / kRows : 1;
  static constexpr int kRowsPerPass = kThreads / kPerRow;
  static_assert(kThreads % kRows == 0 || kRows % kThreads == 0, "whole rows per thread group");

  template <class Kv>
  LLMK_DEVICE static void stage_codes(const Kv& kv, int b, int head, int key0, int key_end,
                                      unsigned char* k_stage, unsigned char* v_stage, int tid) {
    const auto& pages = kv.pages;
    const int part = tid % kPerRow;
#pragma unroll 1
    for (int row = tid / kPerRow; row < kRows; row += kRowsPerPass) {
      int page = -1, slot = 0;
      if (key0 + row < key_end) pages.locate(b, key0 + row, page, slot);
      const bool valid = page >= 0;
      const std::int64_t off = valid ? pages.row_offset_at(page, slot, head) : 0;
      // A zero-filled row copies from the pool's first row (src-size 0 reads nothing).
      const auto* k_src = reinterpret_cast<const unsigned char*>(pages.k_pages) + off;
      const auto* v_src = reinterpret_cast<const unsigned char*>(pages.v_pages) + off;
#pragma unroll
      for (int c = 0; c < (kChunksPerRow + kPerRow - 1) / kPerRow; ++c) {
        const int col = (part + c * kPerRow) * 16;
        if (kChunksPerRow % kPerRow == 0 || col < kDim) {
          arch::cp_async_cg16_zfill(k_stage + row * kStagePitch + col, k_src + col, valid ? 16 : 0);
          arch::cp_async_cg16_zfill(v_stage + row * kStagePitch + col, v_src + col, valid ? 16 : 0);
        }
      }
      const std::int64_t s = valid ? pages.scale_index(page, slot, head) : 0;
      if (kPerRow == 1 || part == 0)
        arch::cp_async_zfill<4>(reinterpret_cast<float*>(k_stage + kScaleOffset) + row, pages.k_scales + s,
                                valid ? 4 : 0);
      if (kPerRow == 1 || part == 1)
        arch::cp_async_zfill<4>(reinterpret_cast<float*>(v_stage + kScaleOffset) + row, pages.v_scales + s,
                                valid ? 4 : 0);
    }
  }

  template <class Code, int kPitch>
  LLMK_DEVICE static void dequant_codes(const unsigned char* k_stage, const unsigned char* v_stage, T* k_tile,
                                        T* v_tile, int tid) {
    const auto* k_scale = reinterpret_cast<const float*>(k_stage + kScaleOffset);
    const auto* v_scale = reinterpret_cast<const float*>(v_stage + kScaleOffset);
#pragma unroll 1
    for (int c = tid; c < kChunks; c += kThreads) {
      const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 16;
      T* k_dst = k_tile + row * kPitch + col;
      T* v_dst = v_tile + row * kPitch + col;
      dequant_chunk16<T, Code>(k_stage + row * kStagePitch + col, k_scale[row], k_dst, k_dst + 8);
      dequant_chunk16<T, Code>(v_stage + row * kStagePitch + col, v_scale[row], v_dst, v_dst + 8);
    }
  }
};

/// Reorders the 4-byte dim pairs of every 16-dim chunk of the Q tile's rows in place, from (0,1) (2,3) ...
/// (14,15) to (0,1) (4,5) (8,9) (12,13) (2,3) (6,7) (10,11) (14,15): then the k slots 2t, 2t + 1, 2t + 8,
/// 2t + 9 of Q's mma fragment (ldmatrix) hold dims 4t..4t + 3, which a thread reads of a key row of codes in
/// one 32-bit shared load (compute_scores_codes). The sum over the dims is the same; only the slots of the
/// mma that add them differ. One 32-byte segment per thread; the caller orders it with barriers.
template <int kRows, int kDim, int kPitch, int kThreads, class T>
LLMK_DEVICE void interleave_q_chunks(T* q, int tid) {
  constexpr int kChunks = kDim / 16;
  for (int seg = tid; seg < kRows * kChunks; seg += kThreads) {
    auto* p = reinterpret_cast<std::uint32_t*>(q + (seg / kChunks) * kPitch + (seg % kChunks) * 16);
    const Vector16<std::uint32_t> lo = load16(p), hi = load16(p + 4);
    store16(p, Vector16<std::uint32_t>{{lo.elements[0], lo.elements[2], hi.elements[0], hi.elements[2]}});
    store16(p + 4, Vector16<std::uint32_t>{{lo.elements[1], lo.elements[3], hi.elements[1], hi.elements[3]}});
  }
}

/// s = Q K^T for the 16 query rows of `q` (T, pitch kQPitch, chunks interleaved by interleave_q_chunks()) and
/// the 16 keys of `k` (codes, the warp's first row, pitch kCodePitch; `k_scale` their scales): one 32-bit
/// shared load of codes per mma, then each key's column times its scale. The scale is applied to the fp32
/// score, not to each code: one multiply per score instead of one per code, and K takes no rounding to T (the
/// dot product of Q with the exact dequantized key).
template <class T, class Code, int kDim, int kQPitch, int kCodePitch>
LLMK_DEVICE void compute_scores_codes(const T* q, const unsigned char* k, const float* k_scale, int lane,
                                      float (&s)[1][2][4]) {
  using Mma = typename MmaFor<T>::Atom;
  const int g = lane / 4, t = lane % 4;
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
      // Dims 4t..4t + 3 of key g: the k slots 2t, 2t + 1, 2t + 8, 2t + 9 of the Q interleaved by
      // interleave_q_chunks().
      const std::uint32_t codes =
          *reinterpret_cast<const std::uint32_t*>(k + (ni * 8 + g) * kCodePitch + kd * 16 + 4 * t);
      std::uint32_t b[2];
      codes_to_pairs<T, Code, 0, 1, 2, 3>(codes, b[0], b[1]);
      Mma::fma(s[0][ni], a, b, s[0][ni]);
    }
  }
  // Column 2t + e % 2 of key block ni: key ni * 8 + 2t + e % 2.
#pragma unroll
  for (int ni = 0; ni < 2; ++ni) {
    const Vector8<float> scale = load8(k_scale + ni * 8 + 2 * t);
    s[0][ni][0] *= scale.elements[0];
    s[0][ni][1] *= scale.elements[1];
    s[0][ni][2] *= scale.elements[0];
    s[0][ni][3] *= scale.elements[1];
  }
}

/// The V scales of a warp's 16 keys, folded into P: O += sum_key P[key] * (scale[key] * V_codes[key]) is
/// computed as (P[key] * scale[key]) . V_codes, so the codes convert to T exactly and each scale costs one
/// multiply per P element instead of one per code. With fp16, P * scale would fall into the subnormals for
/// small scales (P <= 1, a V scale of 1e-3 puts P = 0.06 at the bottom of the normal range); so O is kept in
/// units of a power of two near the tile's largest scale (`unit`), P takes scale / unit (at most 2), and o is
/// rescaled when the unit changes, with the softmax's factor (one multiply per row). bf16 has fp32's range:
/// its unit stays 1.
template <class T>
struct VScaleFold {
  float unit = 1.0f;  // o holds the unnormalized output divided by unit
  float key[4];       // this thread's P columns' factors: keys 2t, 2t + 1, 2t + 8, 2t + 9 (scale / unit)

  /// Takes the next tile's scales (the warp's 16 keys); returns the factor for o (old unit / new unit). Every
  /// lane of the warp calls it. The unit is clamped to [2^-40, 2^40], so the factor never overflows o.
  LLMK_DEVICE float next(const float* v_scale, int lane) {
    const int t = lane % 4;
    const Vector8<float> lo_pair = load8(v_scale + 2 * t), hi_pair = load8(v_scale + 8 + 2 * t);
    const float lo_x = lo_pair.elements[0], lo_y = lo_pair.elements[1];
    const float hi_x = hi_pair.elements[0], hi_y = hi_pair.elements[1];
    if constexpr (!std::is_same_v<T, half>) {
      key[0] = lo_x;
      key[1] = lo_y;
      key[2] = hi_x;
      key[3] = hi_y;
      return 1.0f;
    } else {
      float mx = fmaxf(fmaxf(lo_x, lo_y), fmaxf(hi_x, hi_y));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fminf(fmaxf(mx, 0x1p-40f), 0x1p40f);  // a NaN or zero tile of scales takes 2^-40
      // The power of two at or below mx, and its reciprocal (exact: a normal power of two).
      const std::uint32_t e = ::llmk::detail::float_to_bits(mx) & 0x7F800000u;
      const float inv = ::llmk::detail::bits_to_float(0x7F000000u - e);
      key[0] = lo_x * inv;
      key[1] = lo_y * inv;
      key[2] = hi_x * inv;
      key[3] = hi_y * inv;
      const float factor = unit * inv;
      unit = ::llmk::detail::bits_to_float(e);
      return factor;
    }
  }

  /// P (the softmax's p = 2^(s c - m), a score tile's layout) times the keys' factors, packed as pack_p().
  LLMK_DEVICE void pack(const float (&p)[1][2][4], std::uint32_t (&a)[1][1][4]) const {
    float q[1][2][4];
#pragma unroll
    for (int ni = 0; ni < 2; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) q[0][ni][e] = p[0][ni][e] * key[2 * ni + e % 2];
    pack_p<T>(q, a);
  }
};

/// o += P V for the warp's 16 keys: P packed by VScaleFold::pack() (the V scales folded in), V the codes of
/// the warp's first key row (pitch kCodePitch), converted to T exactly. o[2c] and o[2c + 1] are the even and
/// odd dims of chunk c (o_dim() maps a fragment element to its dim).
template <class T, class Code, int kD8, int kCodePitch>
LLMK_DEVICE void accumulate_pv_codes(const std::uint32_t (&a)[1][1][4], const unsigned char* v, int lane,
                                     float (&o)[1][kD8][4]) {
  constexpr int kChunks = kD8 / 2;  // 16-dim chunks
  using Mma = typename MmaFor<T>::Atom;
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
      // 8..15 in r[2h + 1], of chunk c + h): the even dim's keys are bytes 0 and 2, the odd dim's 1 and 3.
      std::uint32_t even[2], odd[2];
      codes_to_pairs<T, Code, 0, 2, 1, 3>(r[2 * h], even[0], odd[0]);
      codes_to_pairs<T, Code, 0, 2, 1, 3>(r[2 * h + 1], even[1], odd[1]);
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
