// llmk/attention/prefill_sm90_producers.cuh: what the producer warpgroup of the Hopper prefill kernel
// (prefill_sm90.cuh) runs besides TMA: the page gather of a paged fp16/bf16 cache (cp.async into the swizzled
// ring), the dequantizing reader of an int8/fp8 cache, and the fp8 kernel's transposition of V.
#pragma once

#include <cstdint>
#include <type_traits>

#include "llmk/arch/cp_async.cuh"
#include "llmk/arch/sm90/mbarrier.cuh"
#include "llmk/arch/sm90/pipeline.cuh"
#include "llmk/arch/sm90/warp_specialization.cuh"
#include "llmk/attention/code_tiles.cuh"
#include "llmk/attention/kv_access.cuh"
#include "llmk/attention/prefill_sm90_layout.cuh"
#include "llmk/config.cuh"
#include "llmk/core/vector.cuh"

namespace llmk::attention::detail {

/// The paged producer: the 4 warps of the producer warpgroup (`ptid` 0..127) gather the K and V rows of each
/// visible tile from their pages with 16-byte cp.async into the swizzled ring slots (one page lookup per row
/// and group of 4 threads; keys past the end and bad pages are zero-filled) and publish them. K_j and V_j are
/// separate cp.async groups; a group is published (cp.async.wait_group, fence.proxy.async for wgmma, one
/// arrival per warp) once the next one is in flight. The order K_j, publish V_{j-1}, V_j, publish K_j never
/// waits for a slot whose release needs a tile still unpublished (with one slot, K_j is published before
/// V_j's slot is awaited: that slot frees only after the P V that follows S_j).
template <class Cfg, class Kv, int S>
LLMK_DEVICE void sm90_gather_pages(const Kv& kv, arch::sm90::TmaRing<S>& k_bars,
                                   arch::sm90::TmaRing<S>& v_bars, unsigned char* k_ring,
                                   unsigned char* v_ring, int b, int kv_head, int kv_len, int tile_begin,
                                   int tile_end, int ptid) {
  namespace sm90 = arch::sm90;
  constexpr int Bc = Cfg::kBc, kChunks = Cfg::kHeadDim / 8;
  // A row is copied by kPerRow threads, each taking every kPerRow-th 16-byte chunk from one row pointer: one
  // page lookup per row and thread group (a lookup per chunk before: about 135 instructions per 16 bytes). At
  // most 4 chunks a thread (d256: 8 threads a row): more unrolled copies spilled at the producer's 40
  // registers.
  constexpr int kPerRow = kChunks % 4 == 0 ? (kChunks / 4 > 4 ? kChunks / 4 : 4) : (kChunks % 2 == 0 ? 2 : 1);
  constexpr int kRowsPerPass = 128 / kPerRow;
  static_assert(128 % kPerRow == 0, "whole row groups");
  const int part = ptid % kPerRow;
  auto gather = [&](bool is_k, unsigned char* tile_smem, int tile) {
    const auto* base = is_k ? kv.any_k() : kv.any_v();
#pragma unroll 1
    for (int row = ptid / kPerRow; row < Bc; row += kRowsPerPass) {
      const int key = tile * Bc + row;
      const std::int64_t off = key < kv_len ? kv.row_offset(b, kv_head, key) : std::int64_t{-1};
      const auto* src = base + (off >= 0 ? off : 0);  // a zero-filled row reads nothing (src-size 0)
#pragma unroll
      for (int c = 0; c < kChunks / kPerRow; ++c) {
        const int chunk = part + c * kPerRow;
        arch::cp_async_cg16_zfill(tile_smem + swizzled_offset<Cfg>(Bc, row, chunk * 16), src + chunk * 8,
                                  off >= 0 ? 16 : 0);
      }
    }
    arch::cp_async_commit();
  };
  // Publishes once every cp.async group but the newest `pending` has landed.
  auto publish = [&](auto pending, sm90::TmaRing<S>& bars, const sm90::RingPosition<S>& at) {
    arch::cp_async_wait<decltype(pending)::value>();
    sm90::fence_proxy_async();
    __syncwarp();
    if (ptid % 32 == 0) bars.producer_publish(at);
  };
  using One = std::integral_constant<int, 1>;
  using None = std::integral_constant<int, 0>;
  sm90::RingPosition<S> pos, prev;
#pragma unroll 1
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    k_bars.producer_wait(pos);
    gather(true, k_ring + pos.stage * Cfg::kTileBytes, tile);
    if (tile > tile_begin) publish(One{}, v_bars, prev);  // V_{j-1}: every group but K_j landed
    if constexpr (S == 1) publish(None{}, k_bars, pos);
    v_bars.producer_wait(pos);
    gather(false, v_ring + pos.stage * Cfg::kTileBytes, tile);
    if constexpr (S > 1) publish(One{}, k_bars, pos);  // K_j: every group but V_j landed
    prev = pos;
    pos.advance();
  }
  if (tile_end > tile_begin) publish(None{}, v_bars, prev);
}

/// The code staging of the quantized producer (sm90_dequant_pages), after the kernel's barriers: a ring of
/// kSlots pieces, each kRows rows of one operand's codes (K or V of one tile, D bytes a row) and their fp32
/// scales. Pieces of at most 8 KiB of codes (64 rows up to head dim 128, 32 at d256) keep several in flight
/// in what the tiles leave of the 227 KiB: d64, d96 and d128 6 slots, d256 4.
template <class Cfg>
struct Sm90CodeStaging {
  static constexpr int kHeadDim = Cfg::kHeadDim, kBc = Cfg::kBc;
  static constexpr int kRowsCap = 8192 / kHeadDim;  // >= 32
  static constexpr int kRows = kBc % 64 == 0 && kRowsCap >= 64 ? 64 : kBc % 32 == 0 ? 32 : 16;
  static constexpr int kPieces = kBc / kRows;  // per operand and tile
  static constexpr int kCodeBytes = kRows * kHeadDim;
  static constexpr int kSlotBytes = kCodeBytes + kRows * 4;  // a multiple of 16
  static constexpr std::size_t kFree = 227 * 1024 - Cfg::kSmemBytes;
  static constexpr int kSlots = kFree / kSlotBytes >= 6 ? 6 : static_cast<int>(kFree / kSlotBytes);
  static constexpr std::size_t kBytes = static_cast<std::size_t>(kSlots) * kSlotBytes;
};

/// The paged producer of a quantized (int8 / fp8) cache. The producer warpgroup streams each tile's codes
/// and per-row scales through the staging ring with cp.async, K's pieces before V's, kSlots - 1 pieces in
/// flight (one page lookup per row, piece and thread: 128 / kRows threads a row, each every (128 / kRows)-th
/// 16-byte chunk), and turns each landed piece into T (code * scale, rounded to T: the values the mma.sync
/// kernel and the reference dequantization produce) in the swizzled ring slot. A slot's K tile is published
/// once its last piece is stored, before V's slot is awaited (one-slot rings cannot deadlock). (The first
/// version read each 16 codes with a plain load and converted them at once: one load in flight per thread,
/// a memory latency per 16 codes.)
template <class Cfg, class T, class Kv, int S>
LLMK_DEVICE void sm90_dequant_pages(const Kv& kv, arch::sm90::TmaRing<S>& k_bars,
                                    arch::sm90::TmaRing<S>& v_bars, unsigned char* k_ring,
                                    unsigned char* v_ring, unsigned char* staging, int b, int kv_head,
                                    int kv_len, int tile_begin, int tile_end, int ptid) {
  namespace sm90 = arch::sm90;
  using Code = typename Kv::Stored;
  using Staging = Sm90CodeStaging<Cfg>;
  constexpr int Bc = Cfg::kBc, D = Cfg::kHeadDim, kChunks = D / 16;  // 16 codes a chunk
  constexpr int kRows = Staging::kRows, kPieces = Staging::kPieces, kSlots = Staging::kSlots;
  constexpr int kPerRow = 128 / kRows;
  static_assert(kSlots >= 2,
                "a quantized cache needs two code staging slots beside Q and the ring: fewer stages or keys");
  const auto& pages = kv.pages;
  const int total = (tile_end - tile_begin) * 2 * kPieces;
  auto slot_of = [&](int n) { return staging + (n % kSlots) * Staging::kSlotBytes; };

  // Piece n: tile tile_begin + n / (2 kPieces), K's pieces, then V's.
  auto stage = [&](int n) {
    const int tile = tile_begin + n / (2 * kPieces), q = n % (2 * kPieces);
    const bool is_k = q < kPieces;
    const int row = ptid / kPerRow, part = ptid % kPerRow, key = tile * Bc + (q % kPieces) * kRows + row;
    int page = -1, slot = 0;
    if (key < kv_len) pages.locate(b, key, page, slot);
    const bool valid = page >= 0;
    const std::int64_t off = valid ? pages.row_offset_at(page, slot, kv_head) : 0;
    // A zero-filled row copies from the pool's first row (src-size 0 reads nothing).
    const auto* src = reinterpret_cast<const unsigned char*>(is_k ? pages.k_pages : pages.v_pages) + off;
    unsigned char* dst = slot_of(n) + row * D;
#pragma unroll
    for (int j = 0; j < (kChunks + kPerRow - 1) / kPerRow; ++j) {
      const int chunk = part + j * kPerRow;
      if (kChunks % kPerRow == 0 || chunk < kChunks)
        arch::cp_async_cg16_zfill(dst + chunk * 16, src + chunk * 16, valid ? 16 : 0);
    }
    if (part == 0) {
      const std::int64_t s = valid ? pages.scale_index(page, slot, kv_head) : 0;
      arch::cp_async_zfill<4>(reinterpret_cast<float*>(slot_of(n) + Staging::kCodeBytes) + row,
                              (is_k ? pages.k_scales : pages.v_scales) + s, valid ? 4 : 0);
    }
  };
  // Piece n (landed) -> T rows of its ring slot `tile_smem`. When 128 threads cover whole rows of chunks in
  // steps of 8 rows under the 128-byte swizzle (head dims 64, 128, 256), a thread keeps one chunk column
  // and its rows' swizzle term: the addresses are computed once per piece (the general form spent about 40
  // instructions per 16 codes on them).
  auto convert = [&](int n, unsigned char* tile_smem) {
    const unsigned char* codes = slot_of(n);
    const auto* scales = reinterpret_cast<const float*>(codes + Staging::kCodeBytes);
    const int row0 = (n % kPieces) * kRows;
    constexpr int kRowStep = 128 / kChunks;
    if constexpr (128 % kChunks == 0 && kRows % kRowStep == 0 && kRowStep % 8 == 0 && Cfg::kSpan == 128) {
      const int chunk = ptid % kChunks, r = ptid / kChunks;
      unsigned char* dst = tile_smem + swizzled_offset<Cfg>(Bc, row0 + r, chunk * 32);
      unsigned char* dst1 = tile_smem + swizzled_offset<Cfg>(Bc, row0 + r, chunk * 32 + 16);
#pragma unroll 1                                  // 40 registers
      for (int i = 0; i < kRows / kRowStep; ++i)  // the swizzle term of a row repeats every 8 rows
        dequant_chunk16<T, Code>(codes + (r + i * kRowStep) * D + chunk * 16, scales[r + i * kRowStep],
                                 dst + i * kRowStep * 128, dst1 + i * kRowStep * 128);
    } else {
#pragma unroll 1
      for (int idx = ptid; idx < kRows * kChunks; idx += 128) {
        const int row = idx / kChunks, chunk = idx % kChunks;
        dequant_chunk16<T, Code>(codes + row * D + chunk * 16, scales[row],
                                 tile_smem + swizzled_offset<Cfg>(Bc, row0 + row, chunk * 32),
                                 tile_smem + swizzled_offset<Cfg>(Bc, row0 + row, chunk * 32 + 16));
      }
    }
  };

#pragma unroll 1
  for (int n = 0; n < kSlots - 1; ++n) {
    if (n < total) stage(n);
    arch::cp_async_commit();
  }
  sm90::RingPosition<S> pos;
#pragma unroll 1
  for (int n = 0; n < total; ++n) {
    // This thread's copies of piece n landed; after the barrier everyone's have, and piece n - 1 is
    // converted, so its slot takes piece n + kSlots - 1.
    arch::cp_async_wait<kSlots - 2>();
    sm90::warpgroup_sync();
    if (n + kSlots - 1 < total) stage(n + kSlots - 1);
    arch::cp_async_commit();
    const int q = n % (2 * kPieces);
    const bool is_k = q < kPieces;
    if (q % kPieces == 0) (is_k ? k_bars : v_bars).producer_wait(pos);
    convert(n, (is_k ? k_ring : v_ring) + pos.stage * Cfg::kTileBytes);
    if (q % kPieces == kPieces - 1) {
      sm90::fence_proxy_async();  // ordinary stores, read by wgmma
      __syncwarp();
      if (ptid % 32 == 0) (is_k ? k_bars : v_bars).producer_publish(pos);
      if (!is_k) pos.advance();
    }
  }
}

/// A 4 x 4 byte transpose: row i of the result holds byte i of w[0..3] (w[0]'s in the low byte).
LLMK_DEVICE void transpose_bytes_4x4(std::uint32_t (&w)[4]) {
  const std::uint32_t t0 = __byte_perm(w[0], w[1], 0x5140), t1 = __byte_perm(w[0], w[1], 0x7362);
  const std::uint32_t t2 = __byte_perm(w[2], w[3], 0x5140), t3 = __byte_perm(w[2], w[3], 0x7362);
  w[0] = __byte_perm(t0, t2, 0x5410);
  w[1] = __byte_perm(t0, t2, 0x7632);
  w[2] = __byte_perm(t1, t3, 0x5410);
  w[3] = __byte_perm(t1, t3, 0x7632);
}

/// fp8: the producer warpgroup (`ptid` 0..127) transposes a staged V tile (rows = keys, the K tiles' layout)
/// into a Vt slot (rows = head dims, keys in fp8_vt_key order), zeroing keys >= `valid` (past the sequence:
/// P is 0 there, but 0 * NaN is not). A unit is 4 keys x 4 dims: 4 word loads, 8 byte permutes, 4 word
/// stores; the lanes of a warp cover consecutive key quads, so each store writes whole 128-byte rows.
///
/// 128 threads cover whole rows of quads (Sm90Fp8PrefillConfig: Bc in {32, 64, 128, 256}), so a thread keeps
/// its 4 keys for the whole tile and steps the head dim by a multiple of 8 rows: the keys' offsets and
/// swizzles, and the Vt rows' (a step of 8 rows keeps a row's swizzle), are computed once, so a unit costs
/// about one instruction per address (a first version recomputed them: 145 instructions per unit, more than
/// the consumers issue).
template <class Cfg>
LLMK_DEVICE void sm90_transpose_v(const unsigned char* staged, unsigned char* vt, int valid, int ptid) {
  constexpr int Bc = Cfg::kBc, D = Cfg::kHeadDim, kQuads = Bc / 4, kSpan = Cfg::kSpan, kVtSpan = Cfg::kVtSpan;
  constexpr int kStep = 4 * 128 / kQuads;  // head dims a pass advances (Sm90Fp8PrefillConfig: D % kStep == 0)
  const int quad = ptid % kQuads, d_first = 4 * (ptid / kQuads);  // d_first < kStep <= kSpan
  // Key row j's offset with its swizzle term and this thread's first column folded in: byte d_first + c of
  // the row (c a multiple of kStep, below kSpan) is at row[j] ^ c (the row offset is a multiple of kSpan,
  // the swizzle term and the column lie below it, and d_first's bits are below kStep's).
  int row[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int off = fp8_vt_key(4 * quad + j) * kSpan;
    row[j] = (off | (((off >> 7) & (kSpan / 16 - 1)) << 4)) ^ d_first;
  }
  int dst[4];  // offsets, not pointers: 40 registers
#pragma unroll
  for (int i = 0; i < 4; ++i) dst[i] = swizzled_span_offset<kVtSpan>(D, d_first + i, 4 * quad);
  auto passes = [&](auto masked) {
    bool keep[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) keep[j] = !masked || fp8_vt_key(4 * quad + j) < valid;
#pragma unroll 1
    for (int blk = 0; blk < D / kSpan; ++blk)  // the staged tile's column blocks
#pragma unroll 1                               // 48 registers: unrolled passes spilled
      for (int c = 0; c < kSpan; c += kStep) {
        std::uint32_t w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          w[j] = *reinterpret_cast<const std::uint32_t*>(staged + blk * Bc * kSpan + (row[j] ^ c));
          if constexpr (decltype(masked)::value) w[j] = keep[j] ? w[j] : 0u;
        }
        transpose_bytes_4x4(w);
        const int pass = (blk * kSpan + c) / kStep;  // Vt rows d_first + i + pass * kStep
#pragma unroll
        for (int i = 0; i < 4; ++i)
          *reinterpret_cast<std::uint32_t*>(vt + dst[i] + pass * kStep * kVtSpan) = w[i];
      }
  };
  if (valid >= Bc)
    passes(std::false_type{});
  else
    passes(std::true_type{});
}

/// fp8 over a paged e4m3 cache (read without dequantizing: the pages' per-tensor / per-head scales are the
/// descale factors): the warpgroup gathers K_j's codes into the K ring and V_j's into staging slot j % 2 with
/// cp.async (2-8 threads a row, one page lookup per row and thread shared by K and V, each thread at most 2
/// of the row's 16-byte chunks; zero-fill past the sequence and for bad pages), publishes K_j once it landed,
/// starts tile j + 1's copies, then transposes V_j into the V ring as the dense fp8 path does: tile j + 1's
/// copies fly while V_j is transposed (the first version waited for each tile's copies with nothing else in
/// flight, and looked a page up per 16 codes). K_j is published before any slot is awaited; K_{j+1}'s slot
/// frees once S_j = Q K_j^T is done, so one-slot rings cannot deadlock either.
template <class Cfg, class Kv, int S>
LLMK_DEVICE void sm90_gather_fp8_pages(const Kv& kv, arch::sm90::TmaRing<S>& k_bars,
                                       arch::sm90::TmaRing<S>& v_bars, unsigned char* k_ring,
                                       unsigned char* v_ring, unsigned char* staging, int b, int kv_head,
                                       int kv_len, int tile_begin, int tile_end, int ptid) {
  namespace sm90 = arch::sm90;
  constexpr int Bc = Cfg::kBc, kChunks = Cfg::kHeadDim / 16;  // 16 codes per copy
  // Threads a row: the power of two that leaves each at most 2 chunks of K and 2 of V (more spilled at the
  // producer's 48 registers: d96, d256).
  constexpr int kPerRow = kChunks <= 2 ? 1 : kChunks <= 4 ? 2 : kChunks <= 8 ? 4 : 8;
  constexpr int kRowsPerPass = 128 / kPerRow, kMine = (kChunks + kPerRow - 1) / kPerRow;
  const int part = ptid % kPerRow;
  // K_j into its ring slot, V_j into staging slot j % 2 (the same swizzled layout).
  auto gather = [&](unsigned char* k_tile, unsigned char* v_stage, int tile) {
#pragma unroll 1
    for (int row = ptid / kPerRow; row < Bc; row += kRowsPerPass) {
      const int key = tile * Bc + row;
      const std::int64_t off = key < kv_len ? kv.row_offset(b, kv_head, key) : std::int64_t{-1};
      const auto* k_src = kv.any_k() + (off >= 0 ? off : 0);  // a zero-filled row reads nothing
      const auto* v_src = kv.any_v() + (off >= 0 ? off : 0);
#pragma unroll
      for (int c = 0; c < kMine; ++c) {
        const int chunk = part + c * kPerRow, dst = swizzled_offset<Cfg>(Bc, row, chunk * 16);
        if (kChunks % kPerRow == 0 || chunk < kChunks) {
          arch::cp_async_cg16_zfill(k_tile + dst, k_src + chunk * 16, off >= 0 ? 16 : 0);
          arch::cp_async_cg16_zfill(v_stage + dst, v_src + chunk * 16, off >= 0 ? 16 : 0);
        }
      }
    }
    arch::cp_async_commit();
  };
  sm90::RingPosition<S> pos, next;
  if (tile_begin < tile_end) {
    k_bars.producer_wait(pos);
    gather(k_ring + pos.stage * Cfg::kTileBytes, staging, tile_begin);
  }
#pragma unroll 1
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    const int i = tile - tile_begin;
    arch::cp_async_wait<0>();
    sm90::fence_proxy_async();  // the K slot is read by wgmma
    __syncwarp();
    if (ptid % 32 == 0) k_bars.producer_publish(pos);
    sm90::warpgroup_sync();  // every thread's V_j copies landed; V_{j-1}'s staging slot is transposed
    next = pos;
    next.advance();
    if (tile + 1 < tile_end) {
      k_bars.producer_wait(next);
      gather(k_ring + next.stage * Cfg::kTileBytes, staging + ((i + 1) & 1) * Cfg::kTileBytes, tile + 1);
    }
    v_bars.producer_wait(pos);
    sm90_transpose_v<Cfg>(staging + (i & 1) * Cfg::kTileBytes, v_ring + pos.stage * Cfg::kTileBytes,
                          kv_len - tile * Bc, ptid);
    sm90::fence_proxy_async();
    __syncwarp();
    if (ptid % 32 == 0) v_bars.producer_publish(pos);
    pos = next;
  }
}

}  // namespace llmk::attention::detail
