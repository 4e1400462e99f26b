// llmk/attention/prefill_mma.cuh: FlashAttention-2 style prefill on mma.sync tensor cores (sm_80 and newer;
// prefill.cuh selects it everywhere except sm_90, where prefill_sm90.cuh's wgmma kernel runs).
//
// One block owns Br query rows and streams Bc-key tiles of K and V through a Stages-deep cp.async ring; each
// warp owns 16 * kMmaM rows and keeps its S tile, its online-softmax state and its O accumulator in
// registers, so the N x N score matrix never exists. Per KV tile, each warp runs
//     S = Q K^T  ->  scale, soft-cap, mask  ->  m, l update, P = 2^(S - m)  ->  O = O * rescale + P V
// and at the end O / l goes out through shared memory in 16-byte rows.
//
// GQA packing: the rows of a tile are (token, head) pairs of ONE KV head's group, row = token * G +
// head_in_group (G = num_heads / num_kv_heads), so every K/V tile a block loads serves all G query heads that
// read it. With G = 1 this is the usual one-head tile; for decode-like short queries it fills the tile with
// heads.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "llmk/attention/args.cuh"
#include "llmk/attention/code_tiles.cuh"
#include "llmk/attention/kv_access.cuh"
#include "llmk/attention/mask.cuh"
#include "llmk/attention/online_softmax.cuh"
#include "llmk/attention/tile_ops.cuh"
#include "llmk/attention/validate.cuh"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/kvcache/paged_kv.cuh"

namespace llmk::attention {

/// Tiling of the prefill kernel: head dim, Br query rows and Bc keys per tile, Warps warps (each owning
/// Br / Warps rows), K/V pipeline depth. Stages >= 2: a ring of that many K+V tiles, whole tiles in flight
/// while one computes. Stages = 1: one K and one V buffer, V's copy overlapping S = Q K^T and the next K's
/// copy overlapping O += P V (FlashAttention-2's schedule, half the shared memory of a 2-stage ring). Any
/// head dim that is a multiple of 16 up to 256 compiles.
///   using Cfg = llmk::attention::PrefillConfig<128, 64, 64, 4, 2>;   // 64 x 64 tiles, a 2-stage ring
///   llmk::Status s = llmk::attention::prefill_mma_with_config<llmk::half, Cfg>(a, stream);
template <int HeadDim, int Br, int Bc, int Warps, int Stages>
struct PrefillConfig {
  static constexpr int kHeadDim = HeadDim, kBr = Br, kBc = Bc, kWarps = Warps, kStages = Stages;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kWarpRows = Br / Warps;
  static constexpr int kMmaM = kWarpRows / 16, kN8 = Bc / 8, kD8 = HeadDim / 8;
  static constexpr int kPitch = HeadDim + 8;  // elements; the 16-byte pad spreads ldmatrix rows over banks
  /// S, the softmax and P one 16-row tile at a time when a warp's O takes 128 or more registers (32 rows at
  /// head dim 128): each K fragment is read once per 16-row tile instead of once per warp, but only one
  /// tile's scores are live next to O (the 128 x 32 d128 tile: 0 bytes of spill instead of 60 with nvcc 13).
  /// Same bits either way. V fragments still feed every 16-row tile.
  static constexpr bool kScoresPerM16 = kMmaM > 1 && kMmaM* HeadDim >= 256;

  static_assert(HeadDim % 16 == 0 && HeadDim >= 16 && HeadDim <= 256,
                "head dim must be a multiple of 16 in [16, 256]");
  static_assert(Br % (16 * Warps) == 0, "each warp owns whole 16-row mma tiles: Br % (16 * Warps) == 0");
  static_assert(Bc % 16 == 0 && Bc >= 16, "Bc must be a multiple of 16 (P V consumes keys in k16 steps)");
  static_assert(Stages >= 1 && Stages <= 4, "the K/V pipeline has 1..4 stages");

  /// Shared memory of one block, in elements of a 2-byte type.
  static constexpr std::size_t kSmemElements =
      static_cast<std::size_t>(Br) * kPitch + 2ull * Stages * Bc * kPitch;
  static constexpr std::size_t kSmemBytes = kSmemElements * 2;
};

/// Defaults per head dim (fit in 99 KiB of shared memory, the sm_89 limit, and compile spill-free), all with
/// 4 warps and 96-key tiles up to head dim 128: up to 64, 128 query rows (32 per warp) in a 2-stage ring; up
/// to 128, 64 rows (16 per warp) with single K/V buffers (FlashAttention-2's schedule; 68 KiB at d128, two
/// blocks per SM on sm_80); above, 64 x 64 with single buffers (d256: exactly 99 KiB). 96 keys rather than 64
/// spread each tile's fixed work (the O rescale, the row max and sum, the copies' addresses) over 1.5x the
/// HMMAs: 4.8 -> 4.5 instructions per HMMA at d64, 4.0 -> 3.6 at d128. 128 rows at d128 (FlashAttention-2's
/// tile) and 128 keys at d64 need more than 255 registers with nvcc 13 and spill. Example:
/// prefill_with_config (prefill.cuh), with DefaultPrefillConfig<80>.
template <int HeadDim>
using DefaultPrefillConfig =
    std::conditional_t<(HeadDim <= 64), PrefillConfig<HeadDim, 128, 96, 4, 2>,
                       std::conditional_t<(HeadDim <= 128), PrefillConfig<HeadDim, 64, 96, 4, 1>,
                                          PrefillConfig<HeadDim, 64, 64, 4, 1>>>;

/// Defaults of prefill_paged(): up to head dim 64, 128 x 64 tiles, up to 128, 64 x 64, above, 64 x 32, all in
/// a 2-stage ring. Single buffers would look pages up separately for K and V (the ring's load_kv_rows_async
/// shares one lookup per row) and spill at d256; a quantized cache stages its codes in the ring's second
/// slots. Example: prefill_paged_with_config (prefill.cuh), with DefaultPagedPrefillConfig<80, llmk::half>.
template <int HeadDim, class Code>
using DefaultPagedPrefillConfig =
    PrefillConfig<HeadDim, (HeadDim <= 64 ? 128 : 64), (HeadDim <= 128 ? 64 : 32), 4, 2>;

namespace detail {

/// Where sequence b's queries are (token offset and count); kv_len is filled from the K/V accessor.
struct SequenceSpan {
  int q_begin, q_len, kv_len;
};

template <class T>
LLMK_DEVICE SequenceSpan sequence_span(const PrefillArgs<T>& a, int b) {
  if (a.cu_seqlens_q != nullptr) {
    const int q0 = a.cu_seqlens_q[b];
    return {q0, a.cu_seqlens_q[b + 1] - q0, 0};
  }
  return {b * a.q_len, a.q_len, 0};
}

}  // namespace detail

/// The prefill kernel. Grid: (query-row tiles of the longest sequence, num_kv_heads, batch). Minimum 1 block
/// per SM in the launch bounds: without it ptxas capped some paged variants at 128-168 registers and spilled.
/// Launched (with its arguments checked) by prefill_mma_with_config / prefill_paged_mma_with_config: call
/// those (example and errors there), not the kernel.
template <class T, class Cfg, class Kv>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    prefill_kernel(PrefillArgs<T> args, detail::ScoreTransform transform, Kv kv) {
  constexpr int D = Cfg::kHeadDim, Br = Cfg::kBr, Bc = Cfg::kBc, P = Cfg::kPitch, S = Cfg::kStages;
  constexpr int kMmaM = Cfg::kMmaM, kN8 = Cfg::kN8, kD8 = Cfg::kD8;

  const int b = static_cast<int>(blockIdx.z);
  detail::SequenceSpan seq = detail::sequence_span(args, b);
  seq.kv_len = kv.length(b);
  const int kv_head = static_cast<int>(blockIdx.y);
  const int group = args.num_heads / args.num_kv_heads;
  const int rows_total = seq.q_len * group;  // packed (token, head) rows of this sequence and KV head
  const int row0 = static_cast<int>(blockIdx.x) * Br;
  if (row0 >= rows_total) return;  // the grid is sized for the longest sequence
  const int rows_here = min(Br, rows_total - row0);

  T* smem = reinterpret_cast<T*>(dynamic_smem());
  T* q_tile = smem;
  T* k_ring = smem + Br * P;
  T* v_ring = k_ring + S * Bc * P;
  // Quantized caches stage the next tile's codes in the ring's second slots.
  static_assert(!detail::IsQuantizedKv<Kv>::value || S >= 2,
                "a quantized cache stages its codes in the ring's second slots: Stages >= 2");
  auto* k_stage = reinterpret_cast<unsigned char*>(k_ring + Bc * P);
  auto* v_stage = reinterpret_cast<unsigned char*>(v_ring + Bc * P);
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;

  // Row r of the tile -> its query token and head.
  auto q_row = [&](int r) -> const T* {
    if (r >= rows_here) return nullptr;
    const int packed = row0 + r, token = packed / group, head = kv_head * group + packed % group;
    return args.q + (static_cast<std::int64_t>(seq.q_begin) + token) * args.q_stride_token +
           static_cast<std::int64_t>(head) * args.q_stride_head;
  };
  const Mask mask = make_mask(seq.q_len, seq.kv_len, args.options.causal, args.options.window_left,
                              args.options.window_right);
  // Keys any row of the tile can see, in whole Bc tiles.
  const int first_query = row0 / group, last_query = (row0 + rows_here - 1) / group;
  const TileSpan tiles = visible_tiles(mask, first_query, last_query, Bc);
  const int kv_end = tiles.kv_end, tile_begin = tiles.begin, tile_end = tiles.end;

  // Tiles that every row of the block sees whole (no key of them is masked for any row): the hot loop runs
  // them without a mask test. The others (window edges, the causal diagonal, a partial last tile) and every
  // tile under a soft-cap take the general step.
  const int fast_begin = tiles.unmasked_begin;
  // The copies a hot step issues (tiles up to `tile + max(S - 1, 1)`) must be whole tiles too, so the hot
  // loop stops that many tiles before the first partial one.
  constexpr int kLookahead = S >= 2 ? S - 1 : 1;
  const int fast_end =
      transform.softcap ? fast_begin : max(fast_begin, min(tiles.unmasked_end, kv_end / Bc - kLookahead));

  const int warp_row0 = warp * Cfg::kWarpRows;
  float o[kMmaM][kD8][4];
#pragma unroll
  for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
    for (int di = 0; di < kD8; ++di)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mi][di][e] = 0.0f;
  FragmentSoftmax<kMmaM> softmax;
  softmax.init();

  // S = Q K^T for kM of the warp's 16-row tiles from tile m0 on, one K tile in shared memory; on the general
  // step also the soft-cap and the mask (each thread's rows' visible key ranges are computed there, off the
  // hot loop); then the online softmax of those rows (s becomes P).
  auto scores = [&](auto m0_c, bool general, const T* k_tile, int tile, auto& s) {
    constexpr int m0 = decltype(m0_c)::value, kM = std::extent_v<std::remove_reference_t<decltype(s)>>;
    detail::compute_scores<T, kM, kN8, D, P>(q_tile + (warp_row0 + 16 * m0) * P, k_tile, lane, s);
    if (general) {
      const bool masked = !mask.tile_unmasked(first_query, last_query, tile * Bc, tile * Bc + Bc);
      detail::transform_scores(
          s, transform, masked, tile * Bc,
          [&](int mi, int r, int& first, int& end) {
            // padding rows copy the last real row: finite, unused
            const int local = min(warp_row0 + (m0 + mi) * 16 + lane / 4 + 8 * r, rows_here - 1);
            const int query = (row0 + local) / group;
            first = mask.first_key(query);
            end = mask.end_key(query);
          },
          lane);
    }
    softmax.template update_rows<m0>(s, o, transform.exp_scale());
  };
  // P of a tile for O += P V: the scores of all the warp's rows at once, or packed 16 rows at a time
  // (Cfg::kScoresPerM16).
  using Probs =
      std::conditional_t<Cfg::kScoresPerM16, std::uint32_t[kMmaM][kN8 / 2][4], float[kMmaM][kN8][4]>;
  auto attend_qk = [&](bool general, const T* k_tile, int tile, Probs& p) {
    if constexpr (Cfg::kScoresPerM16) {
      [&]<int... kMi>(std::integer_sequence<int, kMi...>) {
        (
            [&] {
              float s[1][kN8][4];
              scores(std::integral_constant<int, kMi>{}, general, k_tile, tile, s);
              std::uint32_t packed[1][kN8 / 2][4];
              detail::pack_p<T>(s, packed);
              std::memcpy(p[kMi], packed[0], sizeof(packed));
            }(),
            ...);
      }
      (std::make_integer_sequence<int, kMmaM>{});
    } else {
      scores(std::integral_constant<int, 0>{}, general, k_tile, tile, p);
    }
  };
  auto attend_pv = [&](const Probs& p, const T* v_tile) {
    if constexpr (Cfg::kScoresPerM16)
      detail::accumulate_pv<T, kMmaM, kN8 / 2, kD8, P, /*kKeysInner=*/true>(p, v_tile, lane, o);
    else
      detail::accumulate_pv<T, kMmaM, kN8, kD8, P>(p, v_tile, lane, o);
  };

  // Key 0 of this sequence and KV head (dense K/V: every key row is a constant step from it).
  const T* k_key0 = nullptr;
  const T* v_key0 = nullptr;
  if constexpr (detail::StridedKv<Kv>) {
    k_key0 = kv.k_row(b, kv_head, 0);
    v_key0 = kv.v_row(b, kv_head, 0);
  }
  // Dense K/V in the hot loop: this thread's source address in the next K and the next V tile it copies.
  // The hot loop copies consecutive tiles, so each copy steps its pointer by one tile: no 64-bit multiply per
  // tile (start_hot_copies sets them when the hot loop begins).
  using RowCopy = detail::StridedRowCopy<Bc, D, Cfg::kThreads>;
  const T* k_next = nullptr;
  const T* v_next = nullptr;
  auto start_hot_copies = [&](int first_k_tile, int first_v_tile) {
    if constexpr (detail::StridedKv<Kv> && !detail::IsQuantizedKv<Kv>::value) {
      const std::int64_t ks = kv.k_key_stride(), vs = kv.v_key_stride();
      k_next = k_key0 + first_k_tile * Bc * ks + RowCopy::src_offset(tid, ks);
      v_next = v_key0 + first_v_tile * Bc * vs + RowCopy::src_offset(tid, vs);
    } else {
      (void)first_k_tile, (void)first_v_tile;
    }
  };
  // Copies of one K (is_k) or V tile into `dst`; keys past the end are zero-filled (and masked).
  // whole: a hot-loop copy (the tile is inside the sequence, no bounds test; dense K/V: the next tile of
  // k_next / v_next, whatever `tile` says).
  auto load_one = [&](bool is_k, int tile, T* dst, bool whole) {
    const int key0 = tile * Bc;
    if constexpr (detail::IsQuantizedKv<Kv>::value) {
      (void)is_k, (void)key0, (void)dst, (void)whole;  // codes go through QuantizedTile's staging instead
    } else if constexpr (detail::StridedKv<Kv>) {
      const std::int64_t stride = is_k ? kv.k_key_stride() : kv.v_key_stride();
      if (whole) {
        if (is_k) {
          RowCopy::template whole<P>(dst, k_next, stride, tid);
          k_next += Bc * stride;
        } else {
          RowCopy::template whole<P>(dst, v_next, stride, tid);
          v_next += Bc * stride;
        }
      } else {
        const T* src = (is_k ? k_key0 : v_key0) + key0 * stride;
        detail::load_strided_rows_async<Bc, D, P, Cfg::kThreads>(dst, src, stride, kv_end - key0,
                                                                 is_k ? kv.any_k() : kv.any_v(), tid);
      }
    } else {
      (void)whole;
      detail::load_rows_async<Bc, D, P, Cfg::kThreads>(
          dst,
          [&](int r) -> const T* {
            const int key = key0 + r;
            if (key >= kv_end) return nullptr;
            return is_k ? kv.k_row(b, kv_head, key) : kv.v_row(b, kv_head, key);
          },
          is_k ? kv.any_k() : kv.any_v(), tid);
    }
  };
  // Both tiles into ring slot `slot` (paged K/V: one page lookup per row serves both copies).
  auto load_kv = [&](int tile, int slot, bool whole) {
    if constexpr (detail::IsQuantizedKv<Kv>::value) {
      (void)tile, (void)slot, (void)whole;  // codes go through QuantizedTile's staging instead
    } else if constexpr (detail::SharedOffsetKv<Kv>) {
      (void)whole;  // the page lookup's own check (a bad page reads zeros) stays
      const int key0 = tile * Bc;
      detail::load_kv_rows_async<Bc, D, P, Cfg::kThreads>(
          k_ring + slot * Bc * P, v_ring + slot * Bc * P, kv.any_k(), kv.any_v(),
          [&](int r) -> std::int64_t {
            const int key = key0 + r;
            return key < kv_end ? kv.row_offset(b, kv_head, key) : std::int64_t{-1};
          },
          tid);
    } else {
      load_one(true, tile, k_ring + slot * Bc * P, whole);
      load_one(false, tile, v_ring + slot * Bc * P, whole);
    }
  };

  // One pipeline step for tile `tile`: wait for its data, start later copies, attend.
  auto step = [&](bool general, int tile) {
    Probs p;
    if constexpr (detail::IsQuantizedKv<Kv>::value) {
      // Quantized cache: this tile's codes were staged (cp.async) by the previous step; dequantize them into
      // the K/V buffers, then stage the next tile's codes while this one computes.
      using Tile = detail::QuantizedTile<T, Bc, D, Cfg::kThreads>;
      arch::cp_async_wait_all();
      __syncthreads();  // this tile's codes (and Q) landed; the buffers are free (previous tile computed)
      Tile::template dequant_codes<typename Kv::Stored, P>(k_stage, v_stage, k_ring, v_ring, tid);
      __syncthreads();  // the staging area is free again
      if (tile + 1 < tile_end)
        Tile::stage_codes(kv, b, kv_head, (tile + 1) * Bc, kv_end, k_stage, v_stage, tid);
      arch::cp_async_commit();
      attend_qk(general, k_ring, tile, p);
      attend_pv(p, v_ring);
    } else if constexpr (S == 1) {
      // Single K and V buffers (FlashAttention-2's schedule): V's copy overlaps S = Q K^T and the softmax,
      // the next K's copy overlaps O += P V.
      arch::cp_async_wait_all();
      __syncthreads();  // K landed; every warp is done with the previous V
      load_one(false, tile, v_ring, !general);
      arch::cp_async_commit();
      attend_qk(general, k_ring, tile, p);
      arch::cp_async_wait_all();
      __syncthreads();  // V landed; every warp is done with K
      if (tile + 1 < tile_end) load_one(true, tile + 1, k_ring, !general);
      arch::cp_async_commit();
      attend_pv(p, v_ring);
    } else {
      // Tile i has landed once at most S - 2 newer groups are pending; the barrier publishes every thread's
      // copies and guarantees the slot refilled below (read in step i - 1) is free.
      const unsigned i = static_cast<unsigned>(tile - tile_begin);  // unsigned: i % S without sign fix-ups
      arch::cp_async_wait<S - 2>();
      __syncthreads();
      if (tile + S - 1 < tile_end) load_kv(tile + S - 1, (i + S - 1) % S, !general);
      arch::cp_async_commit();
      const int slot = i % S;
      attend_qk(general, k_ring + slot * Bc * P, tile, p);
      attend_pv(p, v_ring + slot * Bc * P);
    }
  };

  // Prologue: Q joins the first copy group.
  detail::load_rows_async<Br, D, P, Cfg::kThreads>(q_tile, q_row, args.q, tid);
  if constexpr (detail::IsQuantizedKv<Kv>::value) {
    if (tile_begin < tile_end)
      detail::QuantizedTile<T, Bc, D, Cfg::kThreads>::stage_codes(kv, b, kv_head, tile_begin * Bc, kv_end,
                                                                  k_stage, v_stage, tid);
    arch::cp_async_commit();
  } else if constexpr (S == 1) {
    if (tile_begin < tile_end) load_one(true, tile_begin, k_ring, false);
    arch::cp_async_commit();
  } else {
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
      if (tile_begin + s < tile_end) load_kv(tile_begin + s, s, false);
      arch::cp_async_commit();
    }
  }
  // The general step outside [fast_begin, fast_end), the hot loop inside it (the kernel's main loop).
  for (int tile = tile_begin; tile < tile_end;) {
    if (tile == fast_begin && fast_begin < fast_end) {
      // A step copies tile + S - 1 (ring) or V of this tile and K of the next (single buffers).
      if constexpr (S >= 2)
        start_hot_copies(tile + S - 1, tile + S - 1);
      else
        start_hot_copies(tile + 1, tile);
      for (; tile < fast_end; ++tile) step(false, tile);
    } else {
      step(true, tile);
      ++tile;
    }
  }

  softmax.reduce_sums();
  softmax.normalize(o);
  // The warp reuses its own Q rows as the staging buffer once no copy into them can be pending: Q rows were
  // copied by threads of every warp, so their copies must have landed block-wide (when no KV tile was
  // visited, no barrier has done that yet).
  arch::cp_async_wait_all();
  __syncthreads();
  detail::stage_output<T, kMmaM, kD8, P>(o, q_tile + warp_row0 * P, lane);
  __syncwarp();
  auto o_row = [&](int r) -> T* {
    const int local = warp_row0 + r;
    if (local >= rows_here) return nullptr;
    const int packed = row0 + local, token = packed / group, head = kv_head * group + packed % group;
    return args.o + (static_cast<std::int64_t>(seq.q_begin) + token) * args.o_stride_token +
           static_cast<std::int64_t>(head) * args.o_stride_head;
  };
  detail::store_rows<Cfg::kWarpRows, D, P, 32>(q_tile + warp_row0 * P, o_row, lane);

  if (args.lse != nullptr && lane % 4 == 0) {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int local = warp_row0 + mi * 16 + lane / 4 + 8 * r;
        if (local >= rows_here) continue;
        const int packed = row0 + local, token = packed / group, head = kv_head * group + packed % group;
        args.lse[(static_cast<std::int64_t>(seq.q_begin) + token) * args.num_heads + head] =
            lse_from_state(softmax.m[mi][r], softmax.l[mi][r]);
      }
  }
}

namespace detail {

/// The dense K/V view of prefill arguments (PrefillArgs<T>, or PrefillFp8Args<T>: e4m3 rows).
template <class Args>
auto ragged_kv(const Args& a) {
  using In = std::remove_cv_t<std::remove_pointer_t<decltype(a.k)>>;
  return RaggedKv<In>{
      a.k,     a.v, a.k_stride_token, a.k_stride_head, a.v_stride_token, a.v_stride_head, a.cu_seqlens_k,
      a.kv_len};
}

/// The checks of PrefillArgs<T> (and PrefillFp8Args<T>: 1-byte Q/K/V elements, so strides in multiples of
/// 16).
template <class Args>
Status validate_prefill(const Args& a, int* max_q_len, bool dense_kv = true) {
  using T = std::remove_cv_t<std::remove_pointer_t<decltype(a.o)>>;
  constexpr int kIn = static_cast<int>(sizeof(*a.q));
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, "prefill supports half and bfloat16");
  if (a.batch < 1) return Status::invalid_argument("batch", str_cat("must be >= 1, got ", a.batch));
  LLMK_RETURN_IF_ERROR(check_heads(a.num_heads, a.num_kv_heads));
  LLMK_RETURN_IF_ERROR(check_options(a.options));
  const std::int64_t d = a.head_dim;
  LLMK_RETURN_IF_ERROR(check_rows("q", a.q, "q_stride_head", a.q_stride_head, "q_stride_token",
                                  a.q_stride_token, true, d, kIn));
  LLMK_RETURN_IF_ERROR(
      check_rows("o", a.o, "o_stride_head", a.o_stride_head, "o_stride_token", a.o_stride_token, true, d));
  if (a.lse != nullptr) LLMK_RETURN_IF_ERROR(check_element_alignment<float>("lse", a.lse));
  if (dense_kv) {
    LLMK_RETURN_IF_ERROR(check_rows("k", a.k, "k_stride_head", a.k_stride_head, "k_stride_token",
                                    a.k_stride_token, true, d, kIn));
    LLMK_RETURN_IF_ERROR(check_rows("v", a.v, "v_stride_head", a.v_stride_head, "v_stride_token",
                                    a.v_stride_token, true, d, kIn));
    if ((a.cu_seqlens_q == nullptr) != (a.cu_seqlens_k == nullptr))
      return Status::invalid_argument("cu_seqlens_q/cu_seqlens_k", "give both or neither");
  } else if (a.cu_seqlens_k != nullptr || a.k != nullptr || a.v != nullptr) {
    return Status::invalid_argument("k/v/cu_seqlens_k",
                                    "must be null: keys and values come from the paged cache");
  }
  // The device offsets are read as int32 by the kernels.
  LLMK_RETURN_IF_ERROR(check_element_alignment<int>("cu_seqlens_q", a.cu_seqlens_q));
  if (dense_kv) LLMK_RETURN_IF_ERROR(check_element_alignment<int>("cu_seqlens_k", a.cu_seqlens_k));
  if (a.cu_seqlens_q != nullptr) {
    LLMK_RETURN_IF_ERROR(check_offsets("cu_seqlens_q_host", a.cu_seqlens_q_host, a.batch, max_q_len));
  } else {
    if (a.q_len < 0) return Status::invalid_argument("q_len", str_cat("must be >= 0, got ", a.q_len));
    if (dense_kv && a.kv_len < 0)
      return Status::invalid_argument("kv_len", str_cat("must be >= 0, got ", a.kv_len));
    if (static_cast<long long>(a.batch) * max(a.q_len, dense_kv ? a.kv_len : 0) > 0x7fffffffLL)
      return Status::invalid_argument("batch", "batch * max(q_len, kv_len) must fit in int32 token indices");
    *max_q_len = a.q_len;
  }
  // Lengths stay below 2^30 so that tile arithmetic (tile * Bc + Bc, token * group) cannot overflow int.
  if (dense_kv) {
    int max_kv = a.kv_len;
    if (a.cu_seqlens_k != nullptr)
      LLMK_RETURN_IF_ERROR(check_offsets("cu_seqlens_k_host", a.cu_seqlens_k_host, a.batch, &max_kv));
    if (max_kv > (1 << 30))
      return Status::invalid_argument(a.cu_seqlens_k != nullptr ? "cu_seqlens_k_host" : "kv_len",
                                      "sequence lengths must be <= 2^30");
  }
  const char* q_len_name = a.cu_seqlens_q != nullptr ? "cu_seqlens_q_host" : "q_len";
  if (*max_q_len > (1 << 30)) return Status::invalid_argument(q_len_name, "sequence lengths must be <= 2^30");
  // Output rows of different (token, head) pairs must not overlap: token-major or head-major layouts.
  const std::int64_t total_q =
      a.cu_seqlens_q != nullptr ? a.cu_seqlens_q_host[a.batch] : static_cast<std::int64_t>(a.batch) * a.q_len;
  // Saturating products: the strides are positive (check_rows) but may be huge.
  const bool token_major = a.o_stride_token >= mul_sat(a.o_stride_head, a.num_heads);
  const bool head_major = a.o_stride_token >= d && a.o_stride_head >= mul_sat(a.o_stride_token, total_q);
  if (!token_major && !head_major)
    return Status::invalid_argument("o_stride_token/o_stride_head",
                                    str_cat("output rows overlap: need stride_token >= num_heads * "
                                            "stride_head (token-major) or stride_head >= "
                                            "total_q * stride_token (head-major), got ",
                                            a.o_stride_token, " and ", a.o_stride_head));
  const long long rows = static_cast<long long>(*max_q_len) * (a.num_heads / a.num_kv_heads);
  if (rows > 0x7fffffffLL)
    return Status::invalid_argument(
        q_len_name, "the longest query length * (num_heads / num_kv_heads) must fit in int32");
  if (a.num_kv_heads > 65535 || a.batch > 65535)
    return Status::invalid_argument("num_kv_heads/batch", "must be <= 65535 (grid y and z)");
  return {};
}

/// The checks every prefill launcher runs first: the configuration's head dim, then the arguments.
template <class T, class Cfg>
Status validate_prefill_launch(const PrefillArgs<T>& args, int* max_q_len) {
  LLMK_RETURN_IF_ERROR(check_head_dim(args.head_dim, Cfg::kHeadDim));
  return validate_prefill(args, max_q_len);
}

/// The same for a paged cache: the arguments without dense K/V, then the view (validated and completed in
/// place: page shift, head count); *max_kv_len (optional): the longest history in the pages.
template <class T, class Cfg, class Code>
Status validate_prefill_paged_launch(const PrefillArgs<T>& args, kvcache::PagedKv<T, Code>* view,
                                     int* max_q_len, int* max_kv_len = nullptr) {
  LLMK_RETURN_IF_ERROR(check_head_dim(args.head_dim, Cfg::kHeadDim));
  LLMK_RETURN_IF_ERROR(validate_prefill(args, max_q_len, /*dense_kv=*/false));
  return kvcache::validate_paged_kv(*view, args.batch, args.num_kv_heads, args.head_dim, max_kv_len);
}

template <class T, class Cfg, class Kv>
Status launch_prefill(const PrefillArgs<T>& args, int max_q_len, const Kv& kv, cudaStream_t stream) {
  const long long rows = static_cast<long long>(max_q_len) * (args.num_heads / args.num_kv_heads);
  if (rows == 0) return {};
  const dim3 grid(static_cast<unsigned>(ceil_div<long long>(rows, Cfg::kBr)),
                  static_cast<unsigned>(args.num_kv_heads), static_cast<unsigned>(args.batch));
  return launch(prefill_kernel<T, Cfg, Kv>, grid, dim3(Cfg::kThreads), Cfg::kSmemBytes, stream, args,
                ScoreTransform::make(args.options.softmax_scale, args.options.softcap), kv);
}

}  // namespace detail

/// Prefill attention on the mma.sync kernel with an explicit tile configuration on every architecture (any
/// head dim that is a multiple of 16 up to 256); prefill_with_config (prefill.cuh) is the dispatching form:
/// out = softmax(scale * Q K^T, masked) V per query head, fp32 accumulation, output rounded to T.
///
///   llmk::attention::PrefillArgs<llmk::half> a;
///   a.q = q; a.q_stride_token = H * 80; a.q_stride_head = 80;   // [tokens, H, 80], and so on for k, v, o
///   ...
///   a.batch = 1; a.q_len = a.kv_len = n; a.num_heads = H; a.num_kv_heads = H_kv; a.head_dim = 80;
///   a.options.softmax_scale = llmk::attention::default_scale(80); a.options.causal = true;
///   namespace attn = llmk::attention;
///   llmk::Status s = attn::prefill_mma_with_config<llmk::half, attn::DefaultPrefillConfig<80>>(a, stream);
///
/// Errors (Status::invalid_argument naming the argument): head_dim != Cfg::kHeadDim, null or misaligned
/// tensors, strides not multiples of 8 elements, num_heads not a multiple of num_kv_heads, bad lengths or
/// offsets, bad options. Empty sequences are allowed (nothing is written for q_len = 0). A failed launch:
/// Status::cuda_error.
template <class T, class Cfg>
Status prefill_mma_with_config(const PrefillArgs<T>& args, cudaStream_t stream) {
  int max_q_len = 0;
  LLMK_RETURN_IF_ERROR((detail::validate_prefill_launch<T, Cfg>(args, &max_q_len)));
  return detail::launch_prefill<T, Cfg>(args, max_q_len, detail::ragged_kv(args), stream);
}

/// Prefill over a paged KV cache (fp16/bf16 or int8/fp8 pages) on the mma.sync kernel on every
/// architecture, with the tiles of Cfg; prefill_paged_with_config (prefill.cuh) is the dispatching form and
/// documents the arguments and the errors (the same checks).
///
///   // pages: llmk::kvcache::PagedKv<llmk::half, std::int8_t> (kPerTokenHead or kPerHead scales)
///   llmk::Status s = llmk::attention::prefill_paged_mma_with_config<
///       llmk::half, llmk::attention::PrefillConfig<128, 64, 64, 4, 2>>(a, pages, stream);
template <class T, class Cfg, class Code = T>
Status prefill_paged_mma_with_config(const PrefillArgs<T>& args, const kvcache::PagedKv<T, Code>& pages,
                                     cudaStream_t stream) {
  int max_q_len = 0;
  kvcache::PagedKv<T, Code> view = pages;
  LLMK_RETURN_IF_ERROR((detail::validate_prefill_paged_launch<T, Cfg>(args, &view, &max_q_len)));
  return detail::launch_prefill<T, Cfg>(args, max_q_len, detail::PagedKvRows<T, Code>{view}, stream);
}

}  // namespace llmk::attention
