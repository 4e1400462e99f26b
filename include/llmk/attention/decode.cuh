// llmk/attention/decode.cuh: flash-decoding. One query token per sequence over a long KV history.
//
// Decode reads every key and value once and does little math per byte, so the kernel is about keeping
// enough loads in flight. The KV range of each sequence is split into num_splits chunks, one block each
// (grid: splits x (KV heads x head tiles) x batch), so that even batch 1 fills the GPU. Inside a block:
//   - the rows of the mma tile are the query heads of ONE KV head's group (up to 16 per block), so a K/V
//     tile loaded once serves the whole GQA group on tensor cores (MHA uses 1 of the 16 rows: decode is
//     bandwidth-bound, the idle rows cost no bandwidth);
//   - each warp takes 16 keys of every Bc = 16 * Warps key tile and keeps its own online-softmax state;
//     at the end the warps merge their states through shared memory.
// With one split the block writes O directly. Otherwise it writes a normalized fp32 partial output and its
// base-2 log-sum-exp to the caller's workspace, and decode_merge_kernel combines the splits:
//   out = sum_s 2^(lse_s - lse) * out_s,   lse = log2 sum_s 2^lse_s.
// Split boundaries: by default the visible range is cut evenly into num_splits chunks, so they (and the low
// bits of the output) follow the split count the heuristic picks from the batch and the SM count. The
// batch-invariant mode (DecodeSplits::batch_invariant) cuts every sequence into fixed keys_per_split chunks
// instead, so a sequence's bits depend on that sequence only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

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
#include "llmk/core/vector.cuh"
#include "llmk/kvcache/paged_kv.cuh"

namespace llmk::attention {

/// Tiling of the split-KV decode kernel: head dim, Warps warps of 16 keys each per tile (Bc = 16 * Warps),
/// Stages-deep K/V ring. Any head dim that is a multiple of 16 up to 256 compiles.
template <int HeadDim, int Warps, int Stages>
struct DecodeConfig {
  static constexpr int kHeadDim = HeadDim, kWarps = Warps, kStages = Stages;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kRows = 16;  // query heads per block (one mma tile)
  static constexpr int kBc = 16 * Warps;
  static constexpr int kD8 = HeadDim / 8;
  static constexpr int kPitch = HeadDim + 8;
  static_assert(HeadDim % 16 == 0 && HeadDim >= 16 && HeadDim <= 256,
                "head dim must be a multiple of 16 in [16, 256]");
  static_assert(Warps >= 1 && Warps <= 8, "1..8 warps");
  static_assert(Stages >= 2 && Stages <= 4, "the K/V ring has 2..4 stages");

  static constexpr std::size_t kPipelineBytes =
      2ull * (static_cast<std::size_t>(kRows) * kPitch + 2ull * Stages * kBc * kPitch);
  // The warp merge reuses the same memory: m and l per warp and row, then each warp's [16][D] fp32 output.
  static constexpr std::size_t kMergeBytes = 4ull * Warps * kRows * (2 + HeadDim);
  static constexpr std::size_t kSmemBytes = kPipelineBytes > kMergeBytes ? kPipelineBytes : kMergeBytes;
};

/// Defaults: 4 warps (64-key tiles) up to head dim 128, 2 warps (32-key tiles) above; double buffered.
template <int HeadDim>
using DefaultDecodeConfig = DecodeConfig<HeadDim, (HeadDim <= 128 ? 4 : 2), 2>;

/// Largest split count decode accepts (explicit or heuristic; the batch-invariant mode has its own limit).
inline constexpr int kMaxDecodeSplits = 128;

/// Default chunk of the batch-invariant mode: 512 keys, 8 key tiles of the default configurations up to head
/// dim 128 (16 of head dim 256's 32-key tiles).
inline constexpr int kBatchInvariantKeysPerSplit = 512;
/// Largest split count of the batch-invariant mode (it follows the longest sequence).
inline constexpr int kMaxBatchInvariantSplits = 65535;

/// How plan_decode() chooses the splits. An int converts to it, so plan_decode(args, &plan, 3) keeps working.
///   - DecodeSplits(0): the heuristic (choose_decode_splits: batch, heads, length and SM count).
///   - DecodeSplits(n): n splits in [1, kMaxDecodeSplits], the visible keys cut evenly.
///   - DecodeSplits::batch_invariant(k): chunks of k keys (a positive multiple of the key tile Bc): split s
///     of every sequence holds its visible keys [s * k, (s + 1) * k), and the splits merge in split order.
///     A sequence's output bits then depend only on that sequence, not on the batch it is in, the split
///     count or the SM count. The optional num_splits fixes the grid's width (e.g. a plan made once for the
///     longest history a CUDA graph will see); by default it is ceil(longest visible history / k).
///
///   namespace attn = llmk::attention;
///   attn::DecodePlan plan;   // the same bits for a request whatever else is in the batch
///   LLMK_RETURN_IF_ERROR(attn::plan_decode(a, &plan, attn::DecodeSplits::batch_invariant()));
struct DecodeSplits {
  int num_splits = 0;      // 0: the heuristic (default mode) or just enough splits (batch-invariant mode)
  int keys_per_split = 0;  // 0: the default mode; > 0: the batch-invariant mode
  /// The default mode: `splits` even splits (1..kMaxDecodeSplits), 0 for the heuristic. Implicit, so that an
  /// int passes for a DecodeSplits. plan_decode* reject other counts (invalid_argument naming num_splits).
  ///   LLMK_RETURN_IF_ERROR(llmk::attention::plan_decode(a, &plan, llmk::attention::DecodeSplits(4)));
  constexpr DecodeSplits(int splits = 0) : num_splits(splits) {}  // NOLINT(google-explicit-constructor)
  /// The batch-invariant mode: chunks of keys_per_split keys (a positive multiple of the configuration's key
  /// tile Bc, at most 2^30) and num_splits splits (0: just enough for the longest visible history; else at
  /// least that many and at most kMaxBatchInvariantSplits, e.g. a fixed grid for a CUDA graph). plan_decode*
  /// check both (invalid_argument naming keys_per_split or num_splits).
  ///   // 1024-key chunks, a grid wide enough for histories of up to 32 x 1024 keys
  ///   const auto splits = llmk::attention::DecodeSplits::batch_invariant(1024, 32);
  ///   LLMK_RETURN_IF_ERROR(llmk::attention::plan_decode(a, &plan, splits));
  static constexpr DecodeSplits batch_invariant(int keys_per_split = kBatchInvariantKeysPerSplit,
                                                int num_splits = 0) {
    DecodeSplits s(num_splits);
    s.keys_per_split = keys_per_split;
    return s;
  }
};

/// How decode() will run: the split count, the chunk of the batch-invariant mode (0: none) and the workspace
/// it needs (0 bytes with one split).
struct DecodePlan {
  int num_splits = 1;
  int keys_per_split = 0;  // > 0: split s of every sequence holds its visible keys [s * k, (s + 1) * k)
  std::size_t workspace_bytes = 0;
};

/// Split heuristic: enough blocks for about two per SM, but at least 4 key tiles per split, at most
/// kMaxDecodeSplits. `blocks` is batch * num_kv_heads * ceil(group / 16); 1 (no split) when blocks,
/// max_kv_len or block_keys is not positive.
///   // 8 sequences x 8 KV heads on 132 SMs: 5 splits (320 blocks of the 264 wanted)
///   const int splits = llmk::attention::choose_decode_splits(8 * 8, 4096, 64, 132);
inline int choose_decode_splits(long long blocks, int max_kv_len, int block_keys, int num_sms) {
  const long long target = 2LL * (num_sms > 0 ? num_sms : 1);
  if (blocks <= 0 || blocks >= target || max_kv_len <= 0 || block_keys <= 0) return 1;
  const long long wanted = ceil_div<long long>(target, blocks);
  const long long by_length = max<long long>(1, max_kv_len / (4LL * block_keys));
  return static_cast<int>(min<long long>(min<long long>(wanted, by_length), kMaxDecodeSplits));
}

namespace detail {

/// Workspace layout: partial outputs [batch, heads, splits, D] fp32, then base-2 LSEs [batch, heads, splits].
struct DecodeWorkspace {
  float* partial_o = nullptr;
  float* partial_lse2 = nullptr;
  int num_splits = 1;
  int keys_per_split = 0;  // > 0: fixed chunks (batch-invariant mode)
};

inline std::size_t decode_workspace_bytes(int batch, int heads, int head_dim, int splits) {
  if (splits <= 1) return 0;
  const std::size_t rows = static_cast<std::size_t>(batch) * heads * splits;
  return rows * head_dim * sizeof(float) + round_up<std::size_t>(rows * sizeof(float), 16);
}

/// Stages of an 8-bit cache's code ring: one more than the T ring's, in less memory (a code stage is about
/// half a T stage).
template <class Cfg>
inline constexpr int kDecodeCodeStages = Cfg::kStages + 1;

/// Dynamic shared memory of decode_kernel: the Q tile and the K/V ring (of T, or of codes and scales for an
/// 8-bit cache), reused by the warps' merge.
template <class T, class Cfg, class Kv>
constexpr std::size_t decode_smem_bytes() {
  if constexpr (IsQuantizedKv<Kv>::value) {
    const std::size_t ring = sizeof(T) * Cfg::kRows * Cfg::kPitch +
                             kDecodeCodeStages<Cfg> * CodeStage<Cfg::kBc, Cfg::kHeadDim>::kBytes;
    return ring > Cfg::kMergeBytes ? ring : Cfg::kMergeBytes;
  } else {
    return Cfg::kSmemBytes;
  }
}

}  // namespace detail

/// The split kernel. Grid: (num_splits, num_kv_heads * ceil(group / 16), batch).
// 8-bit caches get launch bounds with a minimum of 3 blocks per SM: without one, ptxas gives the d128 code
// path 217 registers (2 blocks of 4 warps per SM); with 3 it fits 168 without spilling, as many blocks as
// the d128 code ring's 61 KiB of shared memory allows on H100. The other caches keep ptxas's own choice
// (minimum 0 = none): a minimum of 1 raised fp16 d64 decode from 91 to 106 registers (5 -> 4 blocks per SM
// on H100).
template <class T, class Cfg, class Kv>
__global__ void __launch_bounds__(Cfg::kThreads, detail::IsQuantizedKv<Kv>::value ? 3 : 0)
    decode_kernel(DecodeArgs<T> args, detail::ScoreTransform transform, detail::DecodeWorkspace ws, Kv kv) {
  constexpr int D = Cfg::kHeadDim, Bc = Cfg::kBc, P = Cfg::kPitch, S = Cfg::kStages, W = Cfg::kWarps;
  constexpr int kRows = Cfg::kRows, kD8 = Cfg::kD8;

  const int b = static_cast<int>(blockIdx.z), split = static_cast<int>(blockIdx.x);
  const int group = args.num_heads / args.num_kv_heads, head_tiles = ceil_div(group, kRows);
  const int kv_head = static_cast<int>(blockIdx.y) / head_tiles;
  const int head0 = kv_head * group + (static_cast<int>(blockIdx.y) % head_tiles) * kRows;
  const int heads_here = min(kRows, kv_head * group + group - head0);

  // This split's keys: the visible range cut into num_splits chunks of whole tiles, or (batch-invariant mode)
  // into chunks of keys_per_split keys whatever num_splits is.
  const int kv_len = kv.length(b);
  const Mask mask = make_mask(1, kv_len, false, args.options.window_left, -1);
  const int visible_first = mask.first_key(0), visible_end = kv_len;
  const int chunk = ws.keys_per_split > 0
                        ? ws.keys_per_split
                        : round_up(ceil_div(max(visible_end - visible_first, 0), ws.num_splits), Bc);
  const int key_begin = static_cast<int>(min<long long>(visible_first + static_cast<long long>(split) * chunk,
                                                        static_cast<long long>(visible_end)));
  const int key_end = key_begin + min(chunk, visible_end - key_begin);  // no int overflow at 2^30 keys
  const int tiles = ceil_div(key_end - key_begin, Bc);

  unsigned char* raw = dynamic_smem();
  T* q_tile = reinterpret_cast<T*>(raw);
  T* k_ring = q_tile + kRows * P;
  T* v_ring = k_ring + S * Bc * P;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;

  auto q_row = [&](int r) -> const T* {
    if (r >= heads_here) return nullptr;
    return args.q + static_cast<std::int64_t>(b) * args.q_stride_batch +
           static_cast<std::int64_t>(head0 + r) * args.q_stride_head;
  };
  // Every head sees the same keys (one query position); the split's range is the mask.
  detail::RowRanges<1> ranges;
  ranges.first[0][0] = ranges.first[0][1] = key_begin;
  ranges.end[0][0] = ranges.end[0][1] = key_end;

  float o[1][kD8][4];
#pragma unroll
  for (int di = 0; di < kD8; ++di)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[0][di][e] = 0.0f;
  FragmentSoftmax<1> softmax;
  softmax.init();
  detail::VScaleFold<T> v_fold;  // an 8-bit cache's V scales (o is in units of v_fold.unit)

  // One K/V tile in shared memory (keys tile_key0..): this warp's 16 keys of it, scored by scores(s) and
  // accumulated by pv(p) (the T tile or the code tile). Whole tiles without a soft-cap run in the hot loop
  // (general = false: nothing between the mma and the softmax); the last, partial tile and soft-capped tiles
  // take the general form (the tanh, the key-range mask).
  // scores(s) returns a factor for o besides the softmax's (the code path's change of V unit; 1 otherwise).
  auto attend = [&](bool general, int tile_key0, const auto& scores, const auto& pv) {
    const int warp_key0 = tile_key0 + warp * 16;
    if (general && warp_key0 >= key_end) return;  // this warp's keys of the last tile are all past the end
    float s[1][2][4];
    const float o_factor = scores(s);
    if (general) detail::transform_scores(s, transform, warp_key0 + 16 > key_end, warp_key0, ranges, lane);
    float f[1][2];
    softmax.update_scores(s, transform.exp_scale(), f);
    f[0][0] *= o_factor;
    f[0][1] *= o_factor;
    softmax.rescale_if_changed(o, f);
    pv(s);
  };
  auto attend_tile = [&](bool general, const T* k_tile, const T* v_tile, int tile_key0) {
    attend(
        general, tile_key0,
        [&](float(&s)[1][2][4]) {
          detail::compute_scores<T, 1, 2, D, P>(q_tile, k_tile + warp * 16 * P, lane, s);
          return 1.0f;
        },
        [&](const float(&p)[1][2][4]) {
          detail::accumulate_pv<T, 1, 2, kD8, P>(p, v_tile + warp * 16 * P, lane, o);
        });
  };
  // Whole tiles whose copies (S - 1 tiles ahead) are whole too: no bounds test anywhere in the hot loop.
  const int full_tiles = transform.softcap ? 0 : max(0, (key_end - key_begin) / Bc - (S - 1));
  // Runs step(general, i) for every tile, the whole tiles (i < full_tiles) in a loop of their own.
  auto for_each_tile = [&](const auto& step) {
    for (int i = 0; i < tiles;) {
      if (i < full_tiles) {
        for (; i < full_tiles; ++i) step(false, i);
      } else {
        step(true, i);
        ++i;
      }
    }
  };

  detail::load_rows_async<kRows, D, P, Cfg::kThreads>(q_tile, q_row, args.q, tid);
  if constexpr (detail::IsQuantizedKv<Kv>::value) {
    // 8-bit cache: codes and scales through a ring of their own (code_tiles.cuh), dequantized in registers.
    using Code = typename Kv::Stored;
    using Stage = detail::CodeStage<Bc, D>;
    constexpr int CS = detail::kDecodeCodeStages<Cfg>, CP = Stage::kPitch;
    unsigned char* code_ring = raw + sizeof(T) * kRows * P;
    auto stage = [&](int slot) { return Stage{code_ring + slot * Stage::kBytes}; };
    // Page lookups a tile ahead of the copies (CodeRowsAhead).
    detail::CodeRowsAhead<Bc, D, Cfg::kThreads> ahead;
    const int* table = kv.pages.table_row(b);
    auto fetch = [&](int tile) { ahead.fetch(kv.pages, table, key_begin + tile * Bc, key_end, tid); };
    auto issue = [&](int slot) { ahead.issue(kv.pages, kv_head, stage(slot), tid); };
    arch::cp_async_commit();  // Q alone: interleaved once it lands, before the first tile's scores
#pragma unroll
    for (int s = 0; s < CS - 1; ++s) {
      if (s < tiles) {
        fetch(s);
        issue(s);
      }
      arch::cp_async_commit();
    }
    if (CS - 1 < tiles) fetch(CS - 1);
    arch::cp_async_wait<CS - 1>();
    __syncthreads();
    detail::interleave_q_chunks<kRows, D, P, Cfg::kThreads>(q_tile, tid);  // the loop's barrier orders it
    for_each_tile([&](bool general, int i) {
      arch::cp_async_wait<CS - 2>();
      __syncthreads();  // tile i landed for every thread; slot (i - 1) % CS is free (tile i - 1 computed)
      if (i + CS - 1 < tiles) issue((i + CS - 1) % CS);
      arch::cp_async_commit();
      if (i + CS < tiles) fetch(i + CS);
      const Stage st = stage(i % CS);
      attend(
          general, key_begin + i * Bc,
          [&](float(&s)[1][2][4]) {
            detail::compute_scores_codes<T, Code, D, P, CP>(q_tile, st.k() + warp * 16 * CP,
                                                            st.k_scale() + warp * 16, lane, s);
            return v_fold.next(st.v_scale() + warp * 16, lane);
          },
          [&](const float(&p)[1][2][4]) {
            std::uint32_t a[1][1][4];
            v_fold.pack(p, a);
            detail::accumulate_pv_codes<T, Code, kD8, CP>(a, st.v() + warp * 16 * CP, lane, o);
          });
    });
  } else {
    if constexpr (detail::SharedOffsetKv<Kv>) {
      // Paged: each tile's page lookups go out a step before its copies (PagedRowsAhead), so the copies of
      // tile i + S - 1 never wait for a table load.
      detail::PagedRowsAhead<Bc, D, P, Cfg::kThreads> ahead;
      const int* table = kv.pages.table_row(b);
      auto fetch = [&](int tile) { ahead.fetch(kv.pages, table, key_begin + tile * Bc, key_end, tid); };
      auto issue = [&](int slot) {
        ahead.issue(k_ring + slot * Bc * P, v_ring + slot * Bc * P, kv.pages, kv_head, tid);
      };
#pragma unroll
      for (int s = 0; s < S - 1; ++s) {
        if (s < tiles) {
          fetch(s);
          issue(s);
        }
        arch::cp_async_commit();
      }
      if (S - 1 < tiles) fetch(S - 1);
      for_each_tile([&](bool general, int i) {
        arch::cp_async_wait<S - 2>();
        __syncthreads();
        if (i + S - 1 < tiles) issue((i + S - 1) % S);
        arch::cp_async_commit();
        if (i + S < tiles) fetch(i + S);
        attend_tile(general, k_ring + (i % S) * Bc * P, v_ring + (i % S) * Bc * P, key_begin + i * Bc);
      });
    } else {
      // Dense and batched K/V (paged: PagedRowsAhead above). whole: every key of the tile is before key_end
      // (the hot loop's copies), no bounds test.
      auto load_kv = [&](int tile, int slot, bool whole) {
        const int key0 = key_begin + tile * Bc;
        if constexpr (detail::StridedKv<Kv>) {  // dense cache: stepped addresses (prefill.cuh)
          T* k_dst = k_ring + slot * Bc * P;
          T* v_dst = v_ring + slot * Bc * P;
          const T* k_src = kv.k_row(b, kv_head, key0);
          const T* v_src = kv.v_row(b, kv_head, key0);
          if (whole) {
            detail::load_strided_rows_async<Bc, D, P, Cfg::kThreads, true>(k_dst, k_src, kv.k_key_stride(),
                                                                           Bc, kv.any_k(), tid);
            detail::load_strided_rows_async<Bc, D, P, Cfg::kThreads, true>(v_dst, v_src, kv.v_key_stride(),
                                                                           Bc, kv.any_v(), tid);
          } else {
            detail::load_strided_rows_async<Bc, D, P, Cfg::kThreads>(k_dst, k_src, kv.k_key_stride(),
                                                                     key_end - key0, kv.any_k(), tid);
            detail::load_strided_rows_async<Bc, D, P, Cfg::kThreads>(v_dst, v_src, kv.v_key_stride(),
                                                                     key_end - key0, kv.any_v(), tid);
          }
        } else {
          (void)whole;
          auto k_row = [&](int r) -> const T* {
            return key0 + r < key_end ? kv.k_row(b, kv_head, key0 + r) : nullptr;
          };
          auto v_row = [&](int r) -> const T* {
            return key0 + r < key_end ? kv.v_row(b, kv_head, key0 + r) : nullptr;
          };
          detail::load_rows_async<Bc, D, P, Cfg::kThreads>(k_ring + slot * Bc * P, k_row, kv.any_k(), tid);
          detail::load_rows_async<Bc, D, P, Cfg::kThreads>(v_ring + slot * Bc * P, v_row, kv.any_v(), tid);
        }
      };
#pragma unroll
      for (int s = 0; s < S - 1; ++s) {
        if (s < tiles) load_kv(s, s, false);
        arch::cp_async_commit();
      }
      for_each_tile([&](bool general, int i) {
        arch::cp_async_wait<S - 2>();
        __syncthreads();
        if (i + S - 1 < tiles) load_kv(i + S - 1, (i + S - 1) % S, !general);
        arch::cp_async_commit();
        attend_tile(general, k_ring + (i % S) * Bc * P, v_ring + (i % S) * Bc * P, key_begin + i * Bc);
      });
    }
  }
  softmax.reduce_sums();

  // Merge the warps' states: m, l and the unnormalized O of every warp go to shared memory (the ring is
  // free once every copy has landed and every warp is past its last tile).
  arch::cp_async_wait_all();
  __syncthreads();
  float* red_m = reinterpret_cast<float*>(raw);
  float* red_l = red_m + W * kRows;
  float* red_o = red_l + W * kRows;  // [W][kRows][D]
  {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = g + 8 * r;
      if (t == 0) {
        red_m[warp * kRows + row] = softmax.m[0][r];
        red_l[warp * kRows + row] = softmax.l[0][r];
      }
#pragma unroll
      for (int di = 0; di < kD8; ++di) {
        // The code path's o holds even / odd dims per tile (code_tiles.cuh): elements 2 dims apart.
        constexpr bool kCodes = detail::IsQuantizedKv<Kv>::value;
        float* dst = &red_o[(warp * kRows + row) * D + (kCodes ? detail::o_dim(di, 0, t) : di * 8 + 2 * t)];
        const float unit = kCodes ? v_fold.unit : 1.0f;
        dst[0] = o[0][di][2 * r] * unit;
        dst[kCodes ? 2 : 1] = o[0][di][2 * r + 1] * unit;
      }
    }
  }
  __syncthreads();

  // Each thread finishes 8-column chunks of rows: combine the warps, normalize, write.
  const bool single = ws.num_splits == 1;
  for (int c = tid; c < heads_here * (D / 8); c += Cfg::kThreads) {
    const int row = c / (D / 8), col = (c % (D / 8)) * 8;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < W; ++w) m = max_propagate_nan(m, red_m[w * kRows + row]);
    float l = 0.0f, acc[8] = {};
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const float f = exp2_shifted(red_m[w * kRows + row], m);
      l += red_l[w * kRows + row] * f;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] += red_o[(w * kRows + row) * D + col + e] * f;
    }
    const float inv = l == 0.0f ? 0.0f : 1.0f / l;
    const int head = head0 + row;
    if (single) {
      Vector16<T> out;
#pragma unroll
      for (int e = 0; e < 8; ++e) out.elements[e] = T(acc[e] * inv);
      store16(args.o + static_cast<std::int64_t>(b) * args.o_stride_batch +
                  static_cast<std::int64_t>(head) * args.o_stride_head + col,
              out);
      if (col == 0 && args.lse != nullptr)
        args.lse[static_cast<std::int64_t>(b) * args.num_heads + head] = lse_from_state(m, l);
    } else {
      const std::int64_t prow =
          (static_cast<std::int64_t>(b) * args.num_heads + head) * ws.num_splits + split;
      Vector16<float> lo, hi;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        lo.elements[e] = acc[e] * inv;
        hi.elements[e] = acc[4 + e] * inv;
      }
      store16(ws.partial_o + prow * D + col, lo);
      store16(ws.partial_o + prow * D + col + 4, hi);
      if (col == 0) ws.partial_lse2[prow] = l == 0.0f ? -INFINITY : m + ::log2f(l);
    }
  }
}

/// Threads of the merge kernel: D / 8 per head (8 columns each), as many heads per block as fill about 4
/// warps (one head per block would leave a d128 block half a warp).
template <int D>
inline constexpr int kMergeHeadsPerBlock = (128 / (D / 8)) > 1 ? 128 / (D / 8) : 1;

/// Combines the splits of decode_kernel in split order. Grid: (ceil(num_heads / kMergeHeadsPerBlock), batch);
/// block: kMergeHeadsPerBlock heads of D / 8 threads, 8 columns each. Splits of weight 0 with a finite
/// partial (empty splits: LSE -inf, partial 0) are skipped, so trailing splits a sequence does not reach
/// change no bit (a NaN or Inf partial of weight 0 is kept: it gives NaN, as the one-split kernel's 0 * NaN
/// does); a sequence with one non-empty split gets that split's partial back exactly (weight 2^0 = 1, first
/// term assigned, not added to 0, so even a -0 survives): the same bits as the one-split kernel writes
/// directly.
template <class T, int D>
__global__ void __launch_bounds__(D / 8 * kMergeHeadsPerBlock<D>)
    decode_merge_kernel(DecodeArgs<T> args, detail::DecodeWorkspace ws) {
  constexpr int kThreadsPerHead = D / 8;
  const int tid = static_cast<int>(threadIdx.x);
  const int head = static_cast<int>(blockIdx.x) * kMergeHeadsPerBlock<D> + tid / kThreadsPerHead;
  const int b = static_cast<int>(blockIdx.y);
  if (head >= args.num_heads) return;
  const int col = (tid % kThreadsPerHead) * 8;
  const std::int64_t row0 = (static_cast<std::int64_t>(b) * args.num_heads + head) * ws.num_splits;
  float m = -INFINITY;
  for (int s = 0; s < ws.num_splits; ++s) m = max_propagate_nan(m, ws.partial_lse2[row0 + s]);
  float sum = 0.0f, acc[8] = {};
  bool first = true;
  for (int s = 0; s < ws.num_splits; ++s) {
    const float lse2 = ws.partial_lse2[row0 + s];
    // The split holding the max weighs exactly 1 (not left to ex2.approx(0)); -inf - -inf is NaN, not 0.
    const float w = lse2 - m == 0.0f ? 1.0f : exp2_shifted(lse2, m);
    const Vector16<float> lo = load16(ws.partial_o + (row0 + s) * D + col);
    const Vector16<float> hi = load16(ws.partial_o + (row0 + s) * D + col + 4);
    if (w == 0.0f) {
      // An empty split (partial 0), or one whose weight underflowed or whose scores were all -inf: a finite
      // partial adds nothing and is skipped, but a NaN or Inf there is the NaN the one-split kernel writes
      // (0 * NaN, 0 * Inf at a key of p = 0), so it is kept: the merge never drops a NaN.
      bool finite = true;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        finite = finite && lo.elements[e] - lo.elements[e] == 0.0f && hi.elements[e] - hi.elements[e] == 0.0f;
      if (finite) continue;
    }
    sum += w;
    if (first) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc[e] = w * lo.elements[e];
        acc[4 + e] = w * hi.elements[e];
      }
      first = false;
      continue;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc[e] += w * lo.elements[e];
      acc[4 + e] += w * hi.elements[e];
    }
  }
  const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
  Vector16<T> out;
#pragma unroll
  for (int e = 0; e < 8; ++e) out.elements[e] = T(acc[e] * inv);
  store16(args.o + static_cast<std::int64_t>(b) * args.o_stride_batch +
              static_cast<std::int64_t>(head) * args.o_stride_head + col,
          out);
  if (col == 0 && args.lse != nullptr)
    args.lse[static_cast<std::int64_t>(b) * args.num_heads + head] =
        sum == 0.0f ? -INFINITY : (m + ::log2f(sum)) * kLn2;
}

namespace detail {

template <class T>
Status validate_decode(const DecodeArgs<T>& a, bool dense_kv = true) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, "decode supports half and bfloat16");
  if (a.batch < 1) return Status::invalid_argument("batch", str_cat("must be >= 1, got ", a.batch));
  LLMK_RETURN_IF_ERROR(check_heads(a.num_heads, a.num_kv_heads));
  LLMK_RETURN_IF_ERROR(check_options(a.options));
  const std::int64_t d = a.head_dim;
  const bool batched = a.batch > 1;
  LLMK_RETURN_IF_ERROR(
      check_rows("q", a.q, "q_stride_head", a.q_stride_head, "q_stride_batch", a.q_stride_batch, batched, d));
  LLMK_RETURN_IF_ERROR(
      check_rows("o", a.o, "o_stride_head", a.o_stride_head, "o_stride_batch", a.o_stride_batch, batched, d));
  if (a.lse != nullptr) LLMK_RETURN_IF_ERROR(check_element_alignment<float>("lse", a.lse));
  if (dense_kv) {
    LLMK_RETURN_IF_ERROR(check_rows("k", a.k, "k_stride_head", a.k_stride_head, "k_stride_batch",
                                    a.k_stride_batch, batched, d));
    LLMK_RETURN_IF_ERROR(check_rows("v", a.v, "v_stride_head", a.v_stride_head, "v_stride_batch",
                                    a.v_stride_batch, batched, d));
    LLMK_RETURN_IF_ERROR(check_stride("k_stride_token", a.k_stride_token));
    LLMK_RETURN_IF_ERROR(check_stride("v_stride_token", a.v_stride_token));
  } else if (a.k != nullptr || a.v != nullptr || a.kv_lens != nullptr) {
    return Status::invalid_argument("k/v/kv_lens", "must be null: keys and values come from the paged cache");
  }
  // Output rows of different (batch, head) pairs must not overlap: batch-major or head-major layouts. With
  // one sequence the batch stride is unused and the heads' rows are apart by o_stride_head >= head_dim
  // (check_rows). Saturating products: the strides are positive but may be huge.
  if (a.batch > 1) {
    const bool batch_major = a.o_stride_batch >= mul_sat(a.o_stride_head, a.num_heads);
    const bool head_major = a.o_stride_batch >= d && a.o_stride_head >= mul_sat(a.o_stride_batch, a.batch);
    if (!batch_major && !head_major)
      return Status::invalid_argument(
          "o_stride_batch/o_stride_head",
          str_cat("output rows overlap: need stride_batch >= num_heads * stride_head (batch-major) or "
                  "stride_head >= "
                  "batch * stride_batch with stride_batch >= head_dim (head-major), got ",
                  a.o_stride_batch, " and ", a.o_stride_head));
  }
  if (dense_kv && ((a.max_kv_len < 0) || (a.max_kv_len > (1 << 30))))
    return Status::invalid_argument("max_kv_len", str_cat("must be in [0, 2^30], got ", a.max_kv_len));
  if (dense_kv && a.kv_lens != nullptr) {
    LLMK_RETURN_IF_ERROR(check_element_alignment<int>("kv_lens", a.kv_lens));  // read as int32
    if (a.kv_lens_host == nullptr)
      return Status::invalid_argument("kv_lens_host",
                                      "must be given with kv_lens (the host copy is validated)");
    for (int b = 0; b < a.batch; ++b)
      if (a.kv_lens_host[b] < 0 || a.kv_lens_host[b] > a.max_kv_len)
        return Status::invalid_argument("kv_lens", str_cat("must be in [0, max_kv_len = ", a.max_kv_len,
                                                           "], sequence ", b, " has ", a.kv_lens_host[b]));
  }
  const int group = a.num_heads / a.num_kv_heads;
  if (static_cast<long long>(a.num_kv_heads) * ceil_div(group, 16) > 65535 || a.batch > 65535)
    return Status::invalid_argument("num_heads/batch",
                                    "grid limits: num_kv_heads * ceil(group / 16) and batch <= 65535");
  return {};
}

// The keys a split may see at most: the longest history, bounded by a sliding window.
template <class T>
int visible_keys(const DecodeArgs<T>& args, int max_len) {
  return args.options.window_left >= 0
             ? static_cast<int>(min<long long>(max_len, static_cast<long long>(args.options.window_left) + 1))
             : max_len;
}

// The batch-invariant chunk and grid width: keys_per_split a positive multiple of Bc (at most 2^30),
// num_splits in [1, kMaxBatchInvariantSplits] covering the longest visible history.
template <class Cfg>
Status check_fixed_splits(const char* splits_name, int num_splits, const char* keys_name, int keys_per_split,
                          int visible) {
  if (keys_per_split < 1 || keys_per_split % Cfg::kBc != 0 || keys_per_split > (1 << 30))
    return Status::invalid_argument(keys_name, str_cat("must be a positive multiple of the key tile Bc = ",
                                                       Cfg::kBc, " (at most 2^30), got ", keys_per_split));
  const long long need = max<long long>(1, ceil_div<long long>(visible, keys_per_split));
  if (need > kMaxBatchInvariantSplits)
    return Status::invalid_argument(
        keys_name, str_cat(visible, " visible keys need ", need, " splits of ", keys_per_split,
                           " keys, more than kMaxBatchInvariantSplits = ", kMaxBatchInvariantSplits,
                           ": use longer splits"));
  if (num_splits != 0 && (num_splits < need || num_splits > kMaxBatchInvariantSplits))
    return Status::invalid_argument(
        splits_name, str_cat("must be in [", need, ", ", kMaxBatchInvariantSplits, "] (", need, " splits of ",
                             keys_per_split, " keys hold the longest visible history, ", visible,
                             " keys), got ", num_splits));
  return {};
}

// The split count (num_splits = 0: the heuristic, or just enough fixed chunks) and workspace for sequences of
// at most max_len keys.
template <class T, class Cfg>
Status plan_splits(const DecodeArgs<T>& args, int max_len, DecodePlan* plan, DecodeSplits splits) {
  const int visible = visible_keys(args, max_len);
  int num_splits = splits.num_splits;
  if (splits.keys_per_split != 0) {
    if (num_splits < 0)
      return Status::invalid_argument("num_splits",
                                      str_cat("must be >= 0 (0: as few as fit), got ", num_splits));
    LLMK_RETURN_IF_ERROR(
        check_fixed_splits<Cfg>("num_splits", num_splits, "keys_per_split", splits.keys_per_split, visible));
    if (num_splits == 0) num_splits = max(1, ceil_div(visible, splits.keys_per_split));
  } else {
    if (num_splits < 0 || num_splits > kMaxDecodeSplits)
      return Status::invalid_argument(
          "num_splits", str_cat("must be in [0, ", kMaxDecodeSplits, "] (0: heuristic), got ", num_splits));
    if (num_splits == 0) {
      const long long blocks = static_cast<long long>(args.batch) * args.num_kv_heads *
                               ceil_div(args.num_heads / args.num_kv_heads, 16);
      // A sliding window bounds the keys any split can see.
      num_splits = choose_decode_splits(blocks, visible, Cfg::kBc, ::llmk::device_sm_count());
    }
  }
  plan->num_splits = num_splits;
  plan->keys_per_split = splits.keys_per_split;
  plan->workspace_bytes = decode_workspace_bytes(args.batch, args.num_heads, args.head_dim, num_splits);
  return {};
}

// max_len: the longest history (a bound), to check that a batch-invariant plan's splits cover it.
template <class T, class Cfg, class Kv>
Status launch_decode(const DecodeArgs<T>& args, const DecodePlan& plan, void* workspace,
                     std::size_t workspace_bytes, const Kv& kv, int max_len, cudaStream_t stream) {
  if (plan.keys_per_split != 0) {
    LLMK_RETURN_IF_ERROR(check_fixed_splits<Cfg>("plan.num_splits", plan.num_splits, "plan.keys_per_split",
                                                 plan.keys_per_split, visible_keys(args, max_len)));
    if (plan.num_splits < 1)
      return Status::invalid_argument("plan.num_splits",
                                      str_cat("must be >= 1, got ", plan.num_splits, " (use plan_decode)"));
  } else if (plan.num_splits < 1 || plan.num_splits > kMaxDecodeSplits) {
    return Status::invalid_argument("plan.num_splits", str_cat("must be in [1, ", kMaxDecodeSplits, "], got ",
                                                               plan.num_splits, " (use plan_decode)"));
  }
  const std::size_t need = decode_workspace_bytes(args.batch, args.num_heads, args.head_dim, plan.num_splits);
  DecodeWorkspace ws;
  ws.num_splits = plan.num_splits;
  ws.keys_per_split = plan.keys_per_split;
  if (need > 0) {
    if (workspace == nullptr)
      return Status::invalid_argument("workspace", str_cat("must not be null (", need, " bytes)"));
    if (workspace_bytes < need)
      return Status::invalid_argument(
          "workspace_bytes",
          str_cat("must be >= ", need, " for ", plan.num_splits, " splits, got ", workspace_bytes));
    if (reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0)
      return Status::invalid_argument("workspace", "must be 16-byte aligned");
    const std::size_t rows = static_cast<std::size_t>(args.batch) * args.num_heads * plan.num_splits;
    ws.partial_o = static_cast<float*>(workspace);
    ws.partial_lse2 = ws.partial_o + rows * args.head_dim;
  }
  const int group = args.num_heads / args.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(plan.num_splits),
                  static_cast<unsigned>(args.num_kv_heads * ceil_div(group, Cfg::kRows)),
                  static_cast<unsigned>(args.batch));
  LLMK_RETURN_IF_ERROR(
      launch(decode_kernel<T, Cfg, Kv>, grid, dim3(Cfg::kThreads), decode_smem_bytes<T, Cfg, Kv>(), stream,
             args, ScoreTransform::make(args.options.softmax_scale, args.options.softcap), ws, kv));
  if (plan.num_splits == 1) return {};
  constexpr int kHeads = kMergeHeadsPerBlock<Cfg::kHeadDim>;
  return launch(
      decode_merge_kernel<T, Cfg::kHeadDim>,
      dim3(static_cast<unsigned>(ceil_div(args.num_heads, kHeads)), static_cast<unsigned>(args.batch)),
      dim3(Cfg::kHeadDim / 8 * kHeads), 0, stream, args, ws);
}

template <class T>
BatchedKv<T> batched_kv(const DecodeArgs<T>& a) {
  return {a.k,
          a.v,
          a.k_stride_batch,
          a.k_stride_token,
          a.k_stride_head,
          a.v_stride_batch,
          a.v_stride_token,
          a.v_stride_head,
          a.kv_lens,
          a.max_kv_len};
}

constexpr const char* kDecodeInstantiation =
    "plan_decode_with_config / decode_with_config with DefaultDecodeConfig<";
constexpr const char* kPagedDecodeInstantiation =
    "plan_decode_paged_with_config / decode_paged_with_config with DefaultDecodeConfig<";

}  // namespace detail

/// Plans decode_with_config(): the split count (0 lets the heuristic choose from batch, heads, length and the
/// SM count; DecodeSplits::batch_invariant() cuts fixed chunks, see DecodeSplits) and the workspace it needs.
///
///   using Cfg = llmk::attention::DefaultDecodeConfig<80>;   // head dim 80: not dispatched by plan_decode
///   llmk::attention::DecodePlan plan;
///   LLMK_RETURN_IF_ERROR((llmk::attention::plan_decode_with_config<llmk::half, Cfg>(a, &plan)));
///
/// Errors (Status::invalid_argument naming the argument): plan null; head_dim != Cfg::kHeadDim; batch < 1;
/// num_heads or num_kv_heads < 1, or num_heads not a multiple of num_kv_heads; options.softmax_scale not
/// finite and > 0, options.softcap not finite and >= 0, options.window_left / window_right below -1; q, o, k
/// or v null or not 16-byte aligned; a head, token or (batch > 1) batch stride not a positive multiple of 8
/// elements, or a head stride below head_dim; lse not 4-byte aligned; overlapping output rows (need
/// o_stride_batch >= num_heads * o_stride_head, or o_stride_head >= batch * o_stride_batch with
/// o_stride_batch >= head_dim); max_kv_len outside [0, 2^30]; kv_lens not 4-byte aligned or given without
/// kv_lens_host, or a kv_lens_host[b] outside [0, max_kv_len]; batch or num_kv_heads * ceil(group / 16) above
/// 65535 (the grid). Splits: num_splits outside [0, kMaxDecodeSplits]; in the batch-invariant mode
/// keys_per_split not a positive multiple of Cfg::kBc (at most 2^30), num_splits below 0, or not 0 and
/// outside [ceil(visible keys / keys_per_split), kMaxBatchInvariantSplits], or a history that needs more than
/// kMaxBatchInvariantSplits chunks.
template <class T, class Cfg>
Status plan_decode_with_config(const DecodeArgs<T>& args, DecodePlan* plan, DecodeSplits splits = {}) {
  if (plan == nullptr) return Status::invalid_argument("plan", "must not be null");
  LLMK_RETURN_IF_ERROR(detail::check_head_dim(args.head_dim, Cfg::kHeadDim));
  LLMK_RETURN_IF_ERROR(detail::validate_decode(args));
  return detail::plan_splits<T, Cfg>(args, args.max_kv_len, plan, splits);
}

/// Split-KV decode with an explicit configuration. The caller owns the workspace (CUB style): plan first,
/// allocate plan.workspace_bytes (16-byte aligned; nothing when 0), then run. It only enqueues kernels on
/// `stream` (no allocation, synchronization or host read of device memory), so it can be captured in a CUDA
/// graph; a workspace serves one call at a time (two decodes in flight on two streams need two).
///
///   llmk::attention::DecodeArgs<llmk::half> a;   // q [B, H, 128], k/v [B, max_len, H_kv, 128], ...
///   llmk::attention::DecodePlan plan;
///   LLMK_RETURN_IF_ERROR(llmk::attention::plan_decode(a, &plan));
///   llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
///   LLMK_RETURN_IF_ERROR(llmk::attention::decode(a, plan, ws.data(), ws.size(), stream));
///
/// The explicit form takes a plan from plan_decode_with_config with the same Cfg:
///   namespace attn = llmk::attention;
///   LLMK_RETURN_IF_ERROR(
///       (attn::decode_with_config<llmk::half, Cfg>(a, plan, ws.data(), ws.size(), stream)));
///
/// Errors (Status::invalid_argument naming the argument): the argument checks of plan_decode_with_config;
/// plan.num_splits outside [1, kMaxDecodeSplits], or for a batch-invariant plan plan.keys_per_split not a
/// positive multiple of Cfg::kBc (at most 2^30) and plan.num_splits below 1 or too few for the longest
/// visible history; with more than one split, workspace null or not 16-byte aligned, or workspace_bytes below
/// what the plan needs for these arguments (plan.workspace_bytes). A failed launch: Status::cuda_error.
template <class T, class Cfg>
Status decode_with_config(const DecodeArgs<T>& args, const DecodePlan& plan, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_head_dim(args.head_dim, Cfg::kHeadDim));
  LLMK_RETURN_IF_ERROR(detail::validate_decode(args));
  return detail::launch_decode<T, Cfg>(args, plan, workspace, workspace_bytes, detail::batched_kv(args),
                                       args.max_kv_len, stream);
}

/// Plans decode_paged_with_config(): as plan_decode_with_config, with the lengths taken from the page table.
/// args.k, args.v and args.kv_lens must be null (args.max_kv_len is ignored).
///
///   using Cfg = llmk::attention::DefaultDecodeConfig<80>;
///   llmk::attention::DecodePlan plan;   // pages: a llmk::kvcache::PagedKv<llmk::half>, as for decode_paged
///   namespace attn = llmk::attention;
///   LLMK_RETURN_IF_ERROR((attn::plan_decode_paged_with_config<llmk::half, Cfg>(a, pages, &plan)));
///
/// Errors (Status::invalid_argument naming the argument): those of plan_decode_with_config without the dense
/// K/V rules (k, v, their strides, max_kv_len, kv_lens); k, v or kv_lens not null ('k/v/kv_lens'); the page
/// view's checks (kvcache::validate_paged_kv, naming 'pages.<field>').
template <class T, class Cfg, class Code = T>
Status plan_decode_paged_with_config(const DecodeArgs<T>& args, const kvcache::PagedKv<T, Code>& pages,
                                     DecodePlan* plan, DecodeSplits splits = {}) {
  if (plan == nullptr) return Status::invalid_argument("plan", "must not be null");
  LLMK_RETURN_IF_ERROR(detail::check_head_dim(args.head_dim, Cfg::kHeadDim));
  LLMK_RETURN_IF_ERROR(detail::validate_decode(args, /*dense_kv=*/false));
  kvcache::PagedKv<T, Code> view = pages;
  int max_len = 0;
  LLMK_RETURN_IF_ERROR(
      kvcache::validate_paged_kv(view, args.batch, args.num_kv_heads, args.head_dim, &max_len));
  return detail::plan_splits<T, Cfg>(args, max_len, plan, splits);
}

/// Split-KV decode over a paged KV cache (llmk/kvcache/paged_kv.cuh: NHD or HND pages, CSR or block-table
/// form, any page size). Same kernel as decode_with_config; rows come through the page table.
///
///   llmk::kvcache::PagedKv<llmk::half> pages;   // k_pages, v_pages, strides, page_size, num_pages, table
///   llmk::attention::DecodePlan plan;
///   LLMK_RETURN_IF_ERROR(llmk::attention::plan_decode_paged(a, pages, &plan));
///   llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
///   LLMK_RETURN_IF_ERROR(llmk::attention::decode_paged(a, pages, plan, ws.data(), ws.size(), stream));
///
/// The explicit form takes a plan from plan_decode_paged_with_config with the same Cfg:
///   namespace attn = llmk::attention;
///   LLMK_RETURN_IF_ERROR(
///       (attn::decode_paged_with_config<llmk::half, Cfg>(a, pages, plan, ws.data(), ws.size(), stream)));
///
/// Errors (Status::invalid_argument naming the argument): the checks of plan_decode_paged_with_config, then
/// the plan and workspace checks of decode_with_config (the longest history taken from the page table). A
/// failed launch: Status::cuda_error.
template <class T, class Cfg, class Code = T>
Status decode_paged_with_config(const DecodeArgs<T>& args, const kvcache::PagedKv<T, Code>& pages,
                                const DecodePlan& plan, void* workspace, std::size_t workspace_bytes,
                                cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_head_dim(args.head_dim, Cfg::kHeadDim));
  LLMK_RETURN_IF_ERROR(detail::validate_decode(args, /*dense_kv=*/false));
  kvcache::PagedKv<T, Code> view = pages;
  int max_len = 0;
  LLMK_RETURN_IF_ERROR(
      kvcache::validate_paged_kv(view, args.batch, args.num_kv_heads, args.head_dim, &max_len));
  return detail::launch_decode<T, Cfg>(args, plan, workspace, workspace_bytes,
                                       detail::PagedKvRows<T, Code>{view}, max_len, stream);
}

/// plan_decode_with_config() for the runtime head dims (kRuntimeHeadDims) with default tiles; the example is
/// decode_with_config's. Errors: those of plan_decode_with_config, and a head dim outside kRuntimeHeadDims
/// (invalid_argument naming 'head_dim' and the explicit instantiation to call).
template <class T>
Status plan_decode(const DecodeArgs<T>& args, DecodePlan* plan, DecodeSplits splits = {}) {
  return detail::dispatch_head_dim(args.head_dim, detail::kDecodeInstantiation, [&](auto dim) {
    return plan_decode_with_config<T, DefaultDecodeConfig<decltype(dim)::value>>(args, plan, splits);
  });
}

/// decode_with_config() for the runtime head dims (kRuntimeHeadDims) with default tiles; see there (example
/// and errors). A head dim outside kRuntimeHeadDims: invalid_argument naming 'head_dim'.
template <class T>
Status decode(const DecodeArgs<T>& args, const DecodePlan& plan, void* workspace, std::size_t workspace_bytes,
              cudaStream_t stream) {
  return detail::dispatch_head_dim(args.head_dim, detail::kDecodeInstantiation, [&](auto dim) {
    return decode_with_config<T, DefaultDecodeConfig<decltype(dim)::value>>(args, plan, workspace,
                                                                            workspace_bytes, stream);
  });
}

/// plan_decode_paged_with_config() for the runtime head dims; the example is decode_paged_with_config's.
/// Errors: those of plan_decode_paged_with_config, and a head dim outside kRuntimeHeadDims ('head_dim').
template <class T, class Code>
Status plan_decode_paged(const DecodeArgs<T>& args, const kvcache::PagedKv<T, Code>& pages, DecodePlan* plan,
                         DecodeSplits splits = {}) {
  return detail::dispatch_head_dim(args.head_dim, detail::kPagedDecodeInstantiation, [&](auto dim) {
    return plan_decode_paged_with_config<T, DefaultDecodeConfig<decltype(dim)::value>, Code>(args, pages,
                                                                                             plan, splits);
  });
}

/// decode_paged_with_config() for the runtime head dims; see there (example and errors). A head dim outside
/// kRuntimeHeadDims: invalid_argument naming 'head_dim'.
template <class T, class Code>
Status decode_paged(const DecodeArgs<T>& args, const kvcache::PagedKv<T, Code>& pages, const DecodePlan& plan,
                    void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  return detail::dispatch_head_dim(args.head_dim, detail::kPagedDecodeInstantiation, [&](auto dim) {
    return decode_paged_with_config<T, DefaultDecodeConfig<decltype(dim)::value>, Code>(
        args, pages, plan, workspace, workspace_bytes, stream);
  });
}

}  // namespace llmk::attention
