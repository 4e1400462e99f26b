// llmk/attention/prefill_sm90.cuh: prefill attention on Hopper (sm_90a): TMA + mbarrier ring, wgmma, warp
// specialization. The same math, masks and results (within the FlashAttention rule) as the mma.sync kernel
// of prefill_mma.cuh; prefill.cuh dispatches to this one on sm_90.
//
// A block owns 128 packed (token, head) query rows of one KV head (GQA packing as in prefill_mma.cuh) and is
// 3 warpgroups:
//
//   warpgroup 0 (producer, setmaxnreg 40)      warpgroups 1, 2 (consumers, setmaxnreg 232, 64 rows each)
//   ------------------------------------      ---------------------------------------------------------
//   TMA: Q tile -> q_full                      wait q_full
//   for each KV tile:                          for each KV tile:
//     wait slot free (empty[s])                  wait full[s]
//     TMA: K tile, V tile -> full[s]             S = Q K^T            wgmma SS (m64 n=Bc k16) x D/16
//                                                scale, soft-cap, mask (edge tiles only), online softmax
//   the last tile, when it reaches past the      P -> registers, A operand layout (no shared memory)
//   sequence's keys: TMA -> tail barrier, the    O += P V             wgmma RS (m64 n=D k16) x Bc/16, V
//   warp zeroes the V rows past the end,                              MN-major (transposed descriptor)
//   fence.proxy.async, then publishes full[s]    free the slot (empty[s])
//                                              O / l -> shared (Q's rows) -> 16-byte stores; LSE
//
// Overlap. Within a consumer, S = Q K^T of tile j is issued with O += P V of tile j - 1, and the softmax of
// tile j runs while that P V is in flight. Between the consumers (Cfg::kPingPong: 16-bit head dims <= 128,
// fp8 head dims >= 128): they issue those wgmmas in turns (named barriers 4 and 5,
// arch/sm90/warpgroup_turns.cuh), so warpgroup 1's softmax runs while warpgroup 2's wgmmas hold the tensor
// cores and the other way round:
//
//   warpgroup 1:  [issue QK PV]  softmax j ......  [issue QK PV]  softmax j+1 ...
//   warpgroup 2:     wait turn   [issue QK PV]  softmax j ......  [issue QK PV] ...
//   tensor cores:  WG1 j         WG2 j          WG1 j+1         WG2 j+1
//
// Shared tiles are K-major in column blocks of `span` bytes (128 when D % 64 == 0, else 64 or 32) with the
// matching swizzle: exactly what the TMA box of a column block writes and what wgmma descriptors read. V is
// the B operand of P V with N = D contiguous: the same tile read through an MN-major descriptor (LBO = one
// column block, SBO = 8 key rows).
//
// The zeroing of V rows past the sequence's end keeps a NaN or Inf in the next sequence's values (or any
// other data TMA reads past a ragged sequence) out of this one: P is exactly 0 there, but 0 * NaN is not.
//
// Q is loaded by one rank-3 box {span, group, tokens} per column block: the packed rows of T tokens x group
// heads land in row order. Rows per block are therefore a multiple of the group (128 / group rounded down,
// and to whole 128-byte boxes); the rest of the 128-row tile is padding no one stores. A group above 128 is
// cut into blocks of `rows` heads of one token (box {span, rows, 1}; rows the largest divisor of the group
// in [64, 128]), so every block still holds a single query's mask.
//
// fp8 (Sm90Fp8PrefillConfig, prefill_fp8.cuh): the same kernel with e4m3 Q/K/V and QGMMA for both products.
// The producer (setmaxnreg 48; consumers 224) loads V into two staging slots and transposes it into the V
// ring (8-bit wgmma reads B K-major only), in the key order of P's registers (prefill_sm90_layout.cuh);
// descales fold into the exp2 scale and the output, and the output is staged in the V staging slots.
#pragma once

#include <cstdint>
#include <type_traits>

#include "llmk/arch/sm90/bulk_copy.cuh"
#include "llmk/arch/sm90/mbarrier.cuh"
#include "llmk/arch/sm90/pipeline.cuh"
#include "llmk/arch/sm90/tma.cuh"
#include "llmk/arch/sm90/warp_specialization.cuh"
#include "llmk/arch/sm90/warpgroup_turns.cuh"
#include "llmk/arch/sm90/wgmma.cuh"
#include "llmk/attention/args.cuh"
#include "llmk/attention/block_order.cuh"
#include "llmk/attention/mask.cuh"
#include "llmk/attention/online_softmax.cuh"
#include "llmk/attention/prefill_mma.cuh"
#include "llmk/attention/prefill_sm90_layout.cuh"
#include "llmk/attention/prefill_sm90_producers.cuh"
#include "llmk/attention/tile_ops.cuh"
#include "llmk/config.cuh"
#include "llmk/core/hopper_support.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/vector.cuh"

namespace llmk::attention {

/// What the Hopper prefill kernel reads. Kv: detail::RaggedKv<T> (dense K/V, loaded by TMA through k_map /
/// v_map) or detail::PagedKvRows<T, T> (a paged cache, gathered by the producer warpgroup with cp.async).
/// Filled by the launchers (prefill_sm90_with_config, prefill_paged_sm90_with_config, the fp8 prefills):
/// call those (example there).
template <class T, class Kv>
struct Sm90PrefillParams {
  arch::sm90::TensorMap q_map;  // [total_q, num_heads, D]: box {span, group, tokens}
  arch::sm90::TensorMap k_map;  // dense: [total_kv, num_kv_heads, D], box {span, 1, Bc}
  arch::sm90::TensorMap v_map;
  PrefillArgs<T> args;  // shapes, strides, output and options (Q, K and V are read through the maps and kv)
  Fp8Descales descale;  // fp8 kernels: the descale factors (K and V from the pages' scales when paged)
  detail::ScoreTransform transform;
  int rows_per_block = 0;  // packed rows a block owns (<= 128): whole GQA groups, or part of one above 128
  Kv kv;
  detail::PrefillBlockOrder order;  // which (row tile, sequence, KV head) a block takes (block_order.cuh)
};

namespace detail {

/// The first of the two named barriers of the consumers' turns (1..3 are warpgroup_sync's).
inline constexpr int kSm90PrefillTurnBarrier = 4;

/// The wgmma atoms of an element type: S = Q K^T (both from shared memory) and O += P V (P in registers).
template <class T, int Bc, int D>
struct Sm90AttentionMma;
template <int Bc, int D>
struct Sm90AttentionMma<half, Bc, D> {
  using QK = arch::sm90::WGMMA_64xNx16_F32F16F16_SS<Bc>;
  using PV = arch::sm90::WGMMA_64xNx16_F32F16F16_RS<D>;
};
template <int Bc, int D>
struct Sm90AttentionMma<bfloat16, Bc, D> {
  using QK = arch::sm90::WGMMA_64xNx16_F32BF16BF16_SS<Bc>;
  using PV = arch::sm90::WGMMA_64xNx16_F32BF16BF16_RS<D>;
};
template <int Bc, int D>
struct Sm90AttentionMma<float8_e4m3, Bc, D> {  // V transposed (K-major), P e4m3 in registers
  using QK = arch::sm90::WGMMA_64xNx32_F32E4M3E4M3_SS<Bc>;
  using PV = arch::sm90::WGMMA_64xNx32_F32E4M3E4M3_RS<D>;
};

}  // namespace detail

/// The kernel (see the file comment). Grid: (row tiles of the longest sequence, num_kv_heads, batch); Cfg::
/// kThreads threads, sm90_prefill_smem_bytes<Cfg, Kv>() of dynamic shared memory. Cfg::kFp8: Q/K/V are e4m3
/// codes (dense: RaggedKv<float8_e4m3>; paged: PagedKvRows<T, float8_e4m3> read without dequantizing), T the
/// output. Launched (with its arguments checked) by prefill_sm90_with_config, prefill_paged_sm90_with_config
/// and the fp8 prefills: call those (example and errors there), not the kernel.
template <class T, class Cfg, class Kv>
__global__ void __launch_bounds__(384, 1)
    prefill_sm90_kernel(const __grid_constant__ Sm90PrefillParams<T, Kv> p) {
  namespace sm90 = arch::sm90;
  if constexpr (!sm90::kHasWgmma) {
#if LLMK_DEVICE_PASS
    __trap();
#endif
  } else {
    constexpr int D = Cfg::kHeadDim, Bc = Cfg::kBc, S = Cfg::kStages, kSpan = Cfg::kSpan;
    constexpr int kD8 = D / 8;
    constexpr bool kFp8 = Cfg::kFp8;
    constexpr sm90::SmemSwizzle kSwz = Cfg::kSwizzle;
    // fp8: p = 2^(s c - m + 8) in (0, 256] keeps small probabilities out of e4m3's subnormals; o / l and
    // the LSE (m - 8) undo it.
    constexpr int kExpBias = kFp8 ? 8 : 0;
    using Mma = detail::Sm90AttentionMma<std::conditional_t<kFp8, float8_e4m3, T>, Bc, D>;
    using ScoreFrag =
        float[1][Cfg::kBc / 8][4];         // the S accumulator in the mma.m16n8 view of FragmentSoftmax
    using ScoreAcc = float[Cfg::kBc / 2];  // the same registers as the wgmma D operand
    using PFrag = std::conditional_t<kFp8, std::uint32_t[(Cfg::kBc + 31) / 32][4],  // fp8: k32 steps
                                     std::uint32_t[1][Cfg::kBc / 16][4]>;
    const PrefillArgs<T>& args = p.args;

    const detail::PrefillBlock blk = p.order.block(blockIdx.x);
    const int b = blk.batch;
    detail::SequenceSpan seq = detail::sequence_span(args, b);
    constexpr bool kPaged = !detail::StridedKv<Kv>;
    seq.kv_len = p.kv.length(b);
    const int kv_head = blk.kv_head;
    const int group = args.num_heads / args.num_kv_heads;
    const int rows_total = seq.q_len * group;
    const int row0 = blk.row_tile * p.rows_per_block;
    if (row0 >= rows_total) return;  // the grid is sized for the longest sequence
    const int rows_here = min(p.rows_per_block, rows_total - row0);

    const Mask mask = make_mask(seq.q_len, seq.kv_len, args.options.causal, args.options.window_left,
                                args.options.window_right);
    const int first_query = row0 / group, last_query = (row0 + rows_here - 1) / group;
    const TileSpan tiles = visible_tiles(mask, first_query, last_query, Bc);
    const int tile_begin = tiles.begin, tile_end = tiles.end;
    // Tiles every row sees whole take the step without a mask test (no soft-cap: it transforms every tile).
    const int fast_begin = tiles.unmasked_begin;
    const int fast_end = p.transform.softcap ? fast_begin : max(fast_begin, tiles.unmasked_end);
    // The last tile, when it reaches past the sequence's keys (its V rows there get zeroed); else tile_end.
    const int tail_tile = tile_end > tile_begin && tile_end * Bc > seq.kv_len ? tile_end - 1 : tile_end;

    unsigned char* q_tile = sm90::align_shared<1024>(dynamic_smem());
    unsigned char* k_ring = q_tile + Cfg::kQBytes;
    unsigned char* v_ring = k_ring + S * Cfg::kTileBytes;   // fp8: transposed V
    unsigned char* staging = v_ring + S * Cfg::kTileBytes;  // fp8: V as loaded, then the output
    unsigned char* barrier_bytes = staging;
    if constexpr (kFp8) barrier_bytes += Cfg::kStagingBytes;
    auto& bars = *reinterpret_cast<detail::Sm90PrefillBarriers<S>*>(barrier_bytes);
    static_assert(sizeof(detail::Sm90PrefillBarriers<S>) <= Cfg::kBarrierBytes);
    if (threadIdx.x == 0) {
      // Paged: the 4 producer warps fill a slot with cp.async and each publishes its part; fp8: the 4 warps
      // transpose V into its slot.
      bars.k.init(Cfg::kConsumerWarps, kPaged ? 4 : 1);
      bars.v.init(Cfg::kConsumerWarps, kPaged || kFp8 ? 4 : 1);
      sm90::mbarrier_init(&bars.q_full, 1);
      sm90::mbarrier_init(&bars.tail_full, 1);
      if constexpr (kFp8) {
        sm90::mbarrier_init(&bars.v_staged[0], 1);
        sm90::mbarrier_init(&bars.v_staged[1], 1);
      }
      sm90::fence_mbarrier_init();
    }
    __syncthreads();

    const int wg = static_cast<int>(threadIdx.x / 128);
    if (wg == 0) {  // producer warpgroup
      // fp8: the V transposition needs 48 registers (40 spilled); the pool then holds 224 per consumer.
      sm90::setmaxnreg_dec<kFp8 ? 48 : 40>();
      const int ptid = static_cast<int>(threadIdx.x);
      if (ptid == 0) {
        // The box: tokens x whole groups, or (groups above 128) rows_per_block heads of one token.
        sm90::mbarrier_arrive_expect_tx(&bars.q_full,
                                        static_cast<unsigned>(Cfg::kDBlocks * p.rows_per_block * kSpan));
#pragma unroll
        for (int c = 0; c < Cfg::kDBlocks; ++c) {
          const int coords[3] = {c * Cfg::kSpanElems, kv_head * group + row0 % group,
                                 seq.q_begin + first_query};
          sm90::tma_load(q_tile + c * Cfg::kBr * kSpan, p.q_map, &bars.q_full, coords);
        }
      }
      if constexpr (kFp8 && kPaged) {
        detail::sm90_gather_fp8_pages<Cfg>(p.kv, bars.k, bars.v, k_ring, v_ring, staging, b, kv_head,
                                           seq.kv_len, tile_begin, tile_end, ptid);
      } else if constexpr (detail::IsQuantizedKv<Kv>::value) {
        detail::sm90_dequant_pages<Cfg, T>(p.kv, bars.k, bars.v, k_ring, v_ring,
                                           barrier_bytes + Cfg::kBarrierBytes, b, kv_head, seq.kv_len,
                                           tile_begin, tile_end, ptid);
      } else if constexpr (kPaged) {
        detail::sm90_gather_pages<Cfg>(p.kv, bars.k, bars.v, k_ring, v_ring, b, kv_head, seq.kv_len,
                                       tile_begin, tile_end, ptid);
      } else {
        const int k_token0 = static_cast<int>(p.kv.token(b, 0));  // < 2^31: validated
        // A K or V tile (its column blocks) to `dst`, landing on `bar`.
        auto load = [&](const sm90::TensorMap& map, unsigned char* dst, std::uint64_t* bar, int tile) {
#pragma unroll
          for (int c = 0; c < Cfg::kDBlocks; ++c) {
            const int coords[3] = {c * Cfg::kSpanElems, kv_head, k_token0 + tile * Bc};
            sm90::tma_load(dst + c * Bc * kSpan, map, bar, coords);
          }
        };
        if constexpr (kFp8) {
          // K by TMA into its ring; V by TMA into two staging slots, transposed by the whole warpgroup into
          // the V ring (keys past the sequence zeroed there) and published by each warp.
          const int count = tile_end - tile_begin;
          auto stage_v = [&](int i) {
            sm90::mbarrier_arrive_expect_tx(&bars.v_staged[i & 1], Cfg::kTileBytes);
            load(p.v_map, staging + (i & 1) * Cfg::kTileBytes, &bars.v_staged[i & 1], tile_begin + i);
          };
          if (ptid == 0)
            for (int i = 0; i < 2 && i < count; ++i) stage_v(i);
          sm90::RingPosition<S> pos;
#pragma unroll 1
          for (int i = 0; i < count; ++i) {
            const int tile = tile_begin + i;
            if (ptid == 0) {
              bars.k.producer_acquire(pos, Cfg::kTileBytes);
              load(p.k_map, k_ring + pos.stage * Cfg::kTileBytes, bars.k.full_bar(pos), tile);
            }
            sm90::mbarrier_wait_parity(&bars.v_staged[i & 1], static_cast<unsigned>((i >> 1) & 1));
            bars.v.producer_wait(pos);
            detail::sm90_transpose_v<Cfg>(staging + (i & 1) * Cfg::kTileBytes,
                                          v_ring + pos.stage * Cfg::kTileBytes, seq.kv_len - tile * Bc, ptid);
            sm90::fence_proxy_async();  // ordinary stores, read by wgmma
            __syncwarp();
            if (ptid % 32 == 0) bars.v.producer_publish(pos);
            sm90::warpgroup_sync();  // every warp is done reading the staging slot
            if (ptid == 0 && i + 2 < count) stage_v(i + 2);
            pos.advance();
          }
          return;
        }
        const int lane = ptid;
        if (lane >= 32) return;
        if (lane == 0) {
          // K and V of a tile go to slot `stage` of their rings; K first (S = Q K^T needs it a tile earlier).
          sm90::RingPosition<S> pos;
#pragma unroll 1
          for (int tile = tile_begin; tile < tile_end; ++tile) {
            bars.k.producer_acquire(pos, Cfg::kTileBytes);
            load(p.k_map, k_ring + pos.stage * Cfg::kTileBytes, bars.k.full_bar(pos), tile);
            if (tile < tail_tile) {
              bars.v.producer_acquire(pos, Cfg::kTileBytes);
              load(p.v_map, v_ring + pos.stage * Cfg::kTileBytes, bars.v.full_bar(pos), tile);
            } else {  // the tail: its V lands on tail_full, the warp publishes the slot below
              bars.v.producer_wait(pos);
              sm90::mbarrier_arrive_expect_tx(&bars.tail_full, Cfg::kTileBytes);
              load(p.v_map, v_ring + pos.stage * Cfg::kTileBytes, &bars.tail_full, tile);
            }
            pos.advance();
          }
        }
        if (tail_tile < tile_end) {
          // The whole warp zeroes V rows [valid, Bc) of the tail's slot once it landed, fences them for the
          // async proxy (wgmma reads them) and publishes the slot.
          __syncwarp();
          const int i = tail_tile - tile_begin;
          sm90::RingPosition<S> pos;
          pos.stage = i % S;
          pos.phase = static_cast<unsigned>((i / S) & 1);
          sm90::mbarrier_wait_parity(&bars.tail_full, 0);
          unsigned char* v_tile = v_ring + pos.stage * Cfg::kTileBytes;
          const int valid = seq.kv_len - tail_tile * Bc;
          constexpr int kChunksPerRow = kSpan / 16;
          const int chunks = (Bc - valid) * kChunksPerRow * Cfg::kDBlocks;
          Vector16<T> zero;
#pragma unroll
          for (int e = 0; e < Vector16<T>::kSize; ++e) zero.elements[e] = T(0.0f);
          for (int idx = lane; idx < chunks; idx += 32) {
            const int blk = idx % Cfg::kDBlocks, rest = idx / Cfg::kDBlocks;
            const int row = valid + rest / kChunksPerRow, chunk = rest % kChunksPerRow;
            store16(reinterpret_cast<T*>(v_tile + blk * Bc * kSpan + row * kSpan + chunk * 16), zero);
          }
          sm90::fence_proxy_async();
          __syncwarp();
          if (lane == 0) bars.v.producer_publish(pos);
        }
      }
      return;  // no block-wide barrier follows
    }

    // The pool is the launch allocation, 168 x 384: 40 x 128 + 232 x 256 fills it, 48 x 128 + 224 x 256 fits.
    sm90::setmaxnreg_inc<kFp8 ? 224 : 232>();
    const int half = wg - 1;
    const int tid = static_cast<int>(threadIdx.x % 128), w = tid / 32, lane = tid % 32;
    const int warp_row0 = 64 * half + 16 * w;  // this warp's first row of the tile

    // fp8: the descale factors fold into the score scale (Q, K) and the output (V).
    detail::ScoreTransform transform = p.transform;
    float v_descale = 1.0f;
    if constexpr (kFp8) {
      const int h = p.descale.mode == Fp8Descale::kPerKvHead ? kv_head : 0;
      float k_descale = 0.0f;
      if constexpr (kPaged) {
        k_descale = p.kv.pages.scale(p.kv.pages.k_scales, 0, 0, kv_head);
        v_descale = p.kv.pages.scale(p.kv.pages.v_scales, 0, 0, kv_head);
      } else {
        k_descale = p.descale.k[h];
        v_descale = p.descale.v[h];
      }
      const float qk = p.descale.q[h] * k_descale;
      transform.scale_log2 *= qk;
      transform.pre *= qk;
    }

    float o[1][kD8][4];
#pragma unroll
    for (int di = 0; di < kD8; ++di)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[0][di][e] = 0.0f;
    auto& o_acc = reinterpret_cast<float(&)[Cfg::kHeadDim / 2]>(o);
    FragmentSoftmax<1> softmax;
    softmax.init();

    // Ping-pong: the consumer warpgroups issue each tile's wgmmas in turns (see the file comment).
    const sm90::WarpgroupTurns<2, detail::kSm90PrefillTurnBarrier> turns{half};
    auto wait_turn = [&]() {
      if constexpr (Cfg::kPingPong) turns.wait();
    };
    auto pass_turn = [&]() {
      if constexpr (Cfg::kPingPong) turns.pass();
    };

    sm90::mbarrier_wait_parity(&bars.q_full, 0);
    // Intra-warpgroup overlap: S = Q K^T of tile j is issued together with O += P V of tile j - 1, and the
    // softmax of tile j runs while that P V is still in flight; o is rescaled once it has landed.
    sm90::RingPosition<S> kpos, vpos;
    ScoreFrag s;
    auto& s_acc = reinterpret_cast<ScoreAcc&>(s);
    PFrag pa;
    float f[1][2];
    // S = Q K^T: k-steps of 32 bytes along the head dim, column block by column block (wgmma_fence() comes
    // first).
    auto issue_qk = [&]() {
      bars.k.consumer_wait(kpos);
      const unsigned char* k_tile = k_ring + kpos.stage * Cfg::kTileBytes;
#pragma unroll
      for (int ks = 0; ks < Cfg::kKSteps; ++ks) {
        const int blk = ks * 32 / kSpan, byte = ks * 32 % kSpan;
        const std::uint64_t dq = sm90::make_smem_desc(
            q_tile + blk * Cfg::kBr * kSpan + half * 64 * kSpan + byte, 16, 8 * kSpan, kSwz);
        const std::uint64_t dk = sm90::make_smem_desc(k_tile + blk * Bc * kSpan + byte, 16, 8 * kSpan, kSwz);
        Mma::QK::fma(s_acc, dq, dk, ks > 0);
      }
      sm90::wgmma_commit();
    };
    // O += P V: P from registers (16-bit: the S accumulator layout is the A fragment layout; fp8: packed in
    // register order against V transposed in the same key order), V MN-major (16-bit) or K-major (fp8).
    auto issue_pv = [&]() {
      bars.v.consumer_wait(vpos);
      const unsigned char* v_tile = v_ring + vpos.stage * Cfg::kTileBytes;
      if constexpr (kFp8) {
#pragma unroll
        for (int kk = 0; kk < Bc / 32; ++kk) {
          constexpr int kVtSpan = Cfg::kVtSpan;
          const int blk = kk * 32 / kVtSpan, byte = kk * 32 % kVtSpan;
          const std::uint64_t dv =
              sm90::make_smem_desc(v_tile + blk * D * kVtSpan + byte, 16, 8 * kVtSpan, Cfg::kVtSwizzle);
          Mma::PV::fma(o_acc, pa[kk], dv, true);
        }
      } else {
#pragma unroll
        for (int kk = 0; kk < Bc / 16; ++kk) {
          const std::uint64_t dv = sm90::make_smem_desc(
              v_tile + kk * 16 * kSpan, static_cast<std::uint32_t>(Bc * kSpan), 8 * kSpan, kSwz);
          Mma::PV::template fma<sm90::Major::kMN>(o_acc, pa[0][kk], dv, true);
        }
      }
      sm90::wgmma_commit();
    };
    auto pack = [&]() {
      if constexpr (kFp8)
        detail::pack_p_fp8(s, pa);
      else
        detail::pack_p<T>(s, pa);
    };
    auto release = [&](sm90::TmaRing<S>& ring, sm90::RingPosition<S>& at) {
      if (lane == 0) ring.consumer_release(at);
      at.advance();
    };
    // Scale, soft-cap, mask (general tiles only), then the online softmax of the scores (o's factor in f).
    auto softmax_tile = [&](bool general, int tile) {
      if (general) {
        const bool masked = !mask.tile_unmasked(first_query, last_query, tile * Bc, tile * Bc + Bc);
        detail::transform_scores(
            s, transform, masked, tile * Bc,
            [&](int, int r, int& first, int& end) {
              // padding rows copy the last real row: finite, unused
              const int local = min(warp_row0 + lane / 4 + 8 * r, rows_here - 1);
              const int query = (row0 + local) / group;
              first = mask.first_key(query);
              end = mask.end_key(query);
            },
            lane);
      }
      softmax.template update_scores<kExpBias>(s, transform.exp_scale(), f);
    };
    // One steady-state step: tile `tile`'s scores, the previous tile's P V.
    auto step = [&](bool general, int tile) {
      wait_turn();
      sm90::wgmma_fence();
      issue_qk();
      issue_pv();
      pass_turn();
      sm90::wgmma_wait<1>();  // S landed (P V may still run)
      sm90::wgmma_fence_registers(s_acc);
      release(bars.k, kpos);
      softmax_tile(general, tile);
      sm90::wgmma_wait<0>();  // P V landed: o and pa are free
      sm90::wgmma_fence_registers(o_acc);
      release(bars.v, vpos);
      FragmentSoftmax<1>::rescale_if_changed(o, f);
      pack();
    };
    auto is_general = [&](int tile) { return !(tile >= fast_begin && tile < fast_end); };
    if (tile_begin < tile_end) {
      if constexpr (Cfg::kPingPong) turns.start();
      wait_turn();
      sm90::wgmma_fence();
      issue_qk();
      pass_turn();
      sm90::wgmma_wait<0>();
      sm90::wgmma_fence_registers(s_acc);
      release(bars.k, kpos);
      softmax_tile(is_general(tile_begin), tile_begin);  // o is still 0: no rescale
      pack();
      for (int tile = tile_begin + 1; tile < tile_end;) {
        if (tile >= fast_begin && tile < fast_end) {
          for (; tile < fast_end; ++tile) step(false, tile);
        } else {
          step(true, tile);
          ++tile;
        }
      }
      sm90::wgmma_fence();
      issue_pv();
      sm90::wgmma_wait<0>();
      sm90::wgmma_fence_registers(o_acc);
      release(bars.v, vpos);
      if constexpr (Cfg::kPingPong) turns.finish();
    }

    softmax.reduce_sums();
    softmax.normalize(o);
    if constexpr (kFp8) {
#pragma unroll
      for (int di = 0; di < kD8; ++di)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[0][di][e] *= v_descale;
    }
    // The output is staged in shared memory: 16-bit kernels in the warpgroup's Q rows (every wgmma that read
    // them has completed: each warp waited for its groups, the barrier makes that true for the warpgroup);
    // fp8 in the V staging slots, which the producer no longer reads once the last V tile was published.
    sm90::warpgroup_sync();
    constexpr int kOutSpan = Cfg::kOutSpan;
    unsigned char* out_tile = kFp8 ? staging : q_tile;
    {
      const int g = lane / 4, t = lane % 4;
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int di = 0; di < kD8; ++di) {
          const std::uint32_t packed = detail::MmaFor<T>::pack(o[0][di][2 * r], o[0][di][2 * r + 1]);
          const int off =
              detail::swizzled_span_offset<kOutSpan>(Cfg::kBr, warp_row0 + g + 8 * r, di * 16 + 4 * t);
          *reinterpret_cast<std::uint32_t*>(out_tile + off) = packed;
        }
    }
    __syncwarp();
    constexpr int kChunks = D / 8;  // 16-byte chunks of an output row
    for (int idx = lane; idx < 16 * kChunks; idx += 32) {
      const int local = warp_row0 + idx / kChunks, chunk = idx % kChunks;
      if (local >= rows_here) continue;
      const int packed = row0 + local, token = packed / group, head = kv_head * group + packed % group;
      T* dst = args.o + (static_cast<std::int64_t>(seq.q_begin) + token) * args.o_stride_token +
               static_cast<std::int64_t>(head) * args.o_stride_head + chunk * 8;
      store16(dst, load16(reinterpret_cast<const T*>(
                       out_tile + detail::swizzled_span_offset<kOutSpan>(Cfg::kBr, local, chunk * 16))));
    }

    if (args.lse != nullptr && lane % 4 == 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int local = warp_row0 + lane / 4 + 8 * r;
        if (local >= rows_here) continue;
        const int packed = row0 + local, token = packed / group, head = kv_head * group + packed % group;
        args.lse[(static_cast<std::int64_t>(seq.q_begin) + token) * args.num_heads + head] =
            lse_from_state(softmax.m[0][r] - static_cast<float>(kExpBias), softmax.l[0][r]);
      }
    }
  }
}

namespace detail {

/// Packed rows per block of the Hopper kernel for a GQA group, in whole 128-byte boxes per column block
/// (rows x span bytes). Groups up to 128: whole groups (the Q box is tokens x group heads), as many as fit
/// the 128-row tile. Larger groups: one token's heads split evenly, the largest divisor of the group in
/// [64, 128] (the tile at least half full; the Q box is 1 token x rows heads). 0 when no such count exists
/// (a group above 128 without such a divisor, e.g. a prime; or a 32-byte span with an odd group above 32):
/// the launchers then run the mma.sync kernel.
template <class Cfg>
constexpr int sm90_prefill_rows_per_block(int group) {
  if (group < 1) return 0;
  if (group <= Cfg::kBr) {
    for (int tokens = Cfg::kBr / group; tokens > 0; --tokens)
      if ((tokens * group * Cfg::kSpan) % 128 == 0) return tokens * group;
    return 0;
  }
  for (int rows = Cfg::kBr; rows >= Cfg::kBr / 2; --rows)
    if (group % rows == 0 && (rows * Cfg::kSpan) % 128 == 0) return rows;
  return 0;
}

/// The TMA map of a [tokens, heads, D] tensor of 16-bit or 8-bit elements in boxes {span, box_heads,
/// box_tokens}.
template <class T, class Cfg>
Status make_head_rows_map(const T* base, std::int64_t stride_token, std::int64_t stride_head,
                          std::int64_t tokens, int heads, int box_heads, int box_tokens,
                          arch::sm90::TensorMap* map) {
  namespace sm90 = arch::sm90;
  sm90::TensorMapDesc d;
  static_assert(sizeof(T) == Cfg::kElemBytes, "the configuration's element size");
  d.elem = sizeof(T) == 1 ? sm90::TmaElem::kU8 : sm90::TmaElem::kU16;
  d.rank = 3;
  d.global = base;
  d.dims[0] = static_cast<std::uint64_t>(Cfg::kHeadDim);
  d.dims[1] = static_cast<std::uint64_t>(heads);
  d.dims[2] = static_cast<std::uint64_t>(tokens > 0 ? tokens : 1);  // never read when there are no tokens
  // The stride of a dimension of extent 1 (one head, one token) is never used and may be anything, as in the
  // portable kernel: make_tensor_map substitutes a dense one. Any used stride at or above its 2^40-byte rule
  // would span more than 1 TiB, more memory than a GPU has.
  d.strides[0] = static_cast<std::uint64_t>(stride_head) * sizeof(T);
  d.strides[1] = static_cast<std::uint64_t>(stride_token) * sizeof(T);
  d.box[0] = static_cast<std::uint32_t>(Cfg::kSpanElems);
  d.box[1] = static_cast<std::uint32_t>(box_heads);
  d.box[2] = static_cast<std::uint32_t>(box_tokens);
  d.swizzle = Cfg::kSwizzle;
  return sm90::make_tensor_map(map, d);
}

/// Status::unsupported naming `launcher` where the Hopper kernel cannot run these (validated) arguments: no
/// sm_90 device or no sm_90a code, or a GQA group the query tile cannot be cut for
/// (sm90_prefill_rows_per_block).
template <class T, class Cfg, class Args = PrefillArgs<T>>
Status sm90_prefill_refusal(const Args& args, const char* launcher) {
  if (!sm90a_runnable<Cfg>())
    return Status::unsupported(str_cat(launcher, " needs an sm_90 device and a build with sm_90a code"));
  if (sm90_prefill_rows_per_block<Cfg>(args.num_heads / args.num_kv_heads) == 0)
    return Status::unsupported(
        str_cat(launcher, ": the GQA group (num_heads / num_kv_heads = ", args.num_heads / args.num_kv_heads,
                ") has no row count for the 128-row query tile (whole groups up to 128; above, a divisor in "
                "[64, 128])"));
  return {};
}

/// Whether the Hopper kernel runs these arguments: an sm_90a-capable device and a GQA group the Q box can
/// hold. Head counts below 1 answer false (no division by them): the mma.sync launcher's validation names
/// them, which is what prefill_paged_with_config reaches, since it asks before validating.
template <class T, class Cfg>
bool sm90_prefill_applies(const PrefillArgs<T>& args) {
  if (args.num_heads < 1 || args.num_kv_heads < 1) return false;
  return sm90_prefill_rows_per_block<Cfg>(args.num_heads / args.num_kv_heads) > 0 && sm90a_runnable<Cfg>();
}

/// The shapes, strides, output and options of fp8 arguments as PrefillArgs (Q, K and V left null: the
/// kernel reads them through its maps and K/V view).
template <class T>
PrefillArgs<T> prefill_shape(const PrefillFp8Args<T>& f) {
  PrefillArgs<T> a;
  a.q_stride_token = f.q_stride_token;
  a.q_stride_head = f.q_stride_head;
  a.k_stride_token = f.k_stride_token;
  a.k_stride_head = f.k_stride_head;
  a.v_stride_token = f.v_stride_token;
  a.v_stride_head = f.v_stride_head;
  a.o = f.o;
  a.o_stride_token = f.o_stride_token;
  a.o_stride_head = f.o_stride_head;
  a.lse = f.lse;
  a.cu_seqlens_q = f.cu_seqlens_q;
  a.cu_seqlens_k = f.cu_seqlens_k;
  a.cu_seqlens_q_host = f.cu_seqlens_q_host;
  a.cu_seqlens_k_host = f.cu_seqlens_k_host;
  a.q_len = f.q_len;
  a.kv_len = f.kv_len;
  a.batch = f.batch;
  a.num_heads = f.num_heads;
  a.num_kv_heads = f.num_kv_heads;
  a.head_dim = f.head_dim;
  a.options = f.options;
  return a;
}

// The parameters every launch fills: arguments (PrefillArgs<T> or PrefillFp8Args<T>), transform, rows per
// block, the Q map.
template <class T, class Cfg, class Kv, class Args>
Status sm90_prefill_params(const Args& args, const Kv& kv, Sm90PrefillParams<T, Kv>* prm) {
  const int group = args.num_heads / args.num_kv_heads;
  if constexpr (std::is_same_v<Args, PrefillArgs<T>>) {
    prm->args = args;
  } else {
    prm->args = prefill_shape(args);
    prm->descale = args.descale;
  }
  prm->transform = ScoreTransform::make(args.options.softmax_scale, args.options.softcap);
  prm->rows_per_block = sm90_prefill_rows_per_block<Cfg>(group);
  prm->kv = kv;
  const std::int64_t total_q = args.cu_seqlens_q != nullptr
                                   ? args.cu_seqlens_q_host[args.batch]
                                   : static_cast<std::int64_t>(args.batch) * args.q_len;
  // The Q box: tokens x whole groups, or one token's rows_per_block heads (a group above 128).
  const bool whole_groups = group <= prm->rows_per_block;
  return make_head_rows_map<std::remove_cv_t<std::remove_pointer_t<decltype(args.q)>>, Cfg>(
      args.q, args.q_stride_token, args.q_stride_head, total_q, args.num_heads,
      whole_groups ? group : prm->rows_per_block, whole_groups ? prm->rows_per_block / group : 1,
      &prm->q_map);
}

/// Dynamic shared memory of the kernel: the configuration's, plus the code staging of a quantized cache
/// (after the barriers).
template <class Cfg, class Kv>
constexpr std::size_t sm90_prefill_smem_bytes() {
  if constexpr (!Cfg::kFp8 && IsQuantizedKv<Kv>::value)
    return Cfg::kSmemBytes + Sm90CodeStaging<Cfg>::kBytes;
  else
    return Cfg::kSmemBytes;
}

template <class T, class Cfg, class Kv>
Status launch_sm90_prefill_kernel(Sm90PrefillParams<T, Kv>& prm, int max_q_len, cudaStream_t stream,
                                  std::int64_t longest_kv = 0) {
  if (max_q_len == 0) return {};
  LLMK_RETURN_IF_ERROR(prefill_block_order(prm.args, max_q_len, prm.rows_per_block, &prm.order, longest_kv));
  return launch(prefill_sm90_kernel<T, Cfg, Kv>, dim3(static_cast<unsigned>(prm.order.blocks())),
                dim3(Cfg::kThreads), sm90_prefill_smem_bytes<Cfg, Kv>(), stream, prm);
}

/// Dense K/V (validated PrefillArgs<T> or PrefillFp8Args<T>).
template <class T, class Cfg, class Args>
Status launch_prefill_sm90(const Args& args, int max_q_len, cudaStream_t stream) {
  using In = std::remove_cv_t<std::remove_pointer_t<decltype(args.k)>>;
  if (static_cast<long long>(max_q_len) * args.num_heads == 0) return {};
  const RaggedKv<In> kv = ragged_kv(args);
  Sm90PrefillParams<T, RaggedKv<In>> prm;
  LLMK_RETURN_IF_ERROR((sm90_prefill_params<T, Cfg>(args, kv, &prm)));
  const std::int64_t total_kv = args.cu_seqlens_k != nullptr
                                    ? args.cu_seqlens_k_host[args.batch]
                                    : static_cast<std::int64_t>(args.batch) * args.kv_len;
  LLMK_RETURN_IF_ERROR((make_head_rows_map<In, Cfg>(args.k, args.k_stride_token, args.k_stride_head, total_kv,
                                                    args.num_kv_heads, 1, Cfg::kBc, &prm.k_map)));
  LLMK_RETURN_IF_ERROR((make_head_rows_map<In, Cfg>(args.v, args.v_stride_token, args.v_stride_head, total_kv,
                                                    args.num_kv_heads, 1, Cfg::kBc, &prm.v_map)));
  return launch_sm90_prefill_kernel<T, Cfg>(prm, max_q_len, stream);
}

/// A paged cache, fp16/bf16 or int8/fp8 codes (validated arguments and view; fp8 arguments with an fp8
/// configuration read e4m3 codes without dequantizing). max_kv_len: the longest history in the pages
/// (validate_paged_kv's max_len).
template <class T, class Cfg, class Code, class Args>
Status launch_prefill_sm90_paged(const Args& args, int max_q_len, int max_kv_len,
                                 const kvcache::PagedKv<T, Code>& view, cudaStream_t stream) {
  if (static_cast<long long>(max_q_len) * args.num_heads == 0) return {};
  Sm90PrefillParams<T, PagedKvRows<T, Code>> prm;
  LLMK_RETURN_IF_ERROR((sm90_prefill_params<T, Cfg>(args, PagedKvRows<T, Code>{view}, &prm)));
  // The block order's sections hold the pairs whose histories fit in L2: the pages' lengths, not the chunk's.
  return launch_sm90_prefill_kernel<T, Cfg>(prm, max_q_len, stream, max_kv_len);
}

}  // namespace detail

/// Prefill attention on the Hopper kernel with an explicit tile configuration (dense K/V; the arguments,
/// checks and results of prefill_mma_with_config). Returns Status::unsupported where it cannot run: no
/// sm_90 device or no sm_90a code in the build, or a GQA group (num_heads / num_kv_heads) above 128 without
/// a divisor in [64, 128].
///
///   namespace attn = llmk::attention;   // a as for prefill_with_config
///   using Cfg = attn::Sm90PrefillConfig<128, 64, 3>;
///   llmk::Status s = attn::prefill_sm90_with_config<llmk::half, Cfg>(a, stream);
template <class T, class Cfg>
Status prefill_sm90_with_config(const PrefillArgs<T>& args, cudaStream_t stream) {
  int max_q_len = 0;
  LLMK_RETURN_IF_ERROR((detail::validate_prefill_launch<T, Cfg>(args, &max_q_len)));
  LLMK_RETURN_IF_ERROR((detail::sm90_prefill_refusal<T, Cfg>(args, "prefill_sm90_with_config")));
  return detail::launch_prefill_sm90<T, Cfg>(args, max_q_len, stream);
}

/// prefill_sm90_with_config() over a paged cache (the arguments and checks of prefill_paged_with_config):
/// the producer warpgroup gathers fp16/bf16 rows from their pages with cp.async, or reads int8/fp8 codes
/// and dequantizes them into the ring. Errors: those of prefill_paged_with_config, and Status::unsupported
/// where the Hopper kernel cannot run (as prefill_sm90_with_config).
///
///   llmk::Status s = llmk::attention::prefill_paged_sm90_with_config<
///       llmk::half, llmk::attention::Sm90PrefillConfig<128, 64, 3>>(a, pages, stream);   // as prefill_paged
template <class T, class Cfg, class Code = T>
Status prefill_paged_sm90_with_config(const PrefillArgs<T>& args, const kvcache::PagedKv<T, Code>& pages,
                                      cudaStream_t stream) {
  int max_q_len = 0, max_kv_len = 0;
  kvcache::PagedKv<T, Code> view = pages;
  LLMK_RETURN_IF_ERROR((detail::validate_prefill_paged_launch<T, Cfg>(args, &view, &max_q_len, &max_kv_len)));
  LLMK_RETURN_IF_ERROR((detail::sm90_prefill_refusal<T, Cfg>(args, "prefill_paged_sm90_with_config")));
  return detail::launch_prefill_sm90_paged<T, Cfg>(args, max_q_len, max_kv_len, view, stream);
}

}  // namespace llmk::attention
