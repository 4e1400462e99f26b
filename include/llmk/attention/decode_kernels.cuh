// llmk/attention/decode_kernels.cuh: the device side of split-KV decode (decode.cuh): decode_kernel, which
// attends one split of every sequence's keys (dense, batched, paged or 8-bit paged K/V) and writes O or a
// normalized fp32 partial and its base-2 LSE, and decode_merge_kernel, which combines the splits; with their
// shared-memory sizes. The launchers are in decode.cuh.
#pragma once

#include <cstddef>
#include <cstdint>

#include "llmk/attention/args.cuh"
#include "llmk/attention/code_tiles.cuh"
#include "llmk/attention/decode_plan.cuh"
#include "llmk/attention/kv_access.cuh"
#include "llmk/attention/mask.cuh"
#include "llmk/attention/online_softmax.cuh"
#include "llmk/attention/tile_ops.cuh"
#include "llmk/config.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/vector.cuh"

namespace llmk::attention {

namespace detail {

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

/// The split kernel. Grid: (num_splits, num_kv_heads * ceil(group / 16), batch). Launched (with its
/// arguments checked) by decode_with_config / decode_paged_with_config (decode.cuh): call those (example and
/// errors there), not the kernel.
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
/// directly. Launched by decode_with_config / decode_paged_with_config after decode_kernel when the plan has
/// more than one split (example there).
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

}  // namespace llmk::attention
