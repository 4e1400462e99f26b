// llmk/gemm/hopper_gemm.cuh: the Hopper (sm_90a) GEMM: persistent, warp-specialized, TMA + wgmma.
//
//   D[i, j] = epilogue(i, j, sum_k A[i, k] * B[j, k])      A [M, K], B [N, K], both K-major ("TN")
//
// One kernel template for every input type: fp16 / bf16 (HGMMA, fp32 accumulate), fp8 e4m3 (QGMMA, fp32
// accumulate), int8 (IGMMA, int32 accumulate, wrapping or saturating). A block is 3 warpgroups (384 threads):
//
//   warpgroup 0: producer. setmaxnreg_dec<40>; one elected thread walks the block's tiles and, per k-tile,
//                waits for a free ring slot, then TMA-loads the 128 x BK slice of A and the BN x BK slice of
//                B (128-byte rows, 128B swizzle: exactly the wgmma K-major layout) into it;
//   warpgroups 1, 2: consumers. setmaxnreg_inc<232>; each owns 64 rows of the 128 x BN tile: per k-tile
//                it waits for the slot, issues BK*bytes/32 wgmmas (m64nBNk16 or k32) chained on its
//                accumulators, commits, waits for the previous k-tile's group (one group stays in flight)
//                and frees that slot. At the end of a tile it applies the epilogue in registers, writes the
//                64 x BN result with stmatrix (16-bit outputs) or 8-byte stores (32-bit) into its staging
//                tile (128B-swizzled 64-row x 128-byte boxes: no bank conflicts), fences the async proxy,
//                and one thread TMA-stores the boxes (the TMA clips M and N tails). The next tile's staging
//                waits for that store to have read the tile (bulk wait_group.read + a warpgroup barrier).
//
// Tiles are handed out round-robin (block b takes tiles b, b + grid, ...; grid = min(tiles, SMs)); the ring's
// positions run on across tiles, so loads of the next tile overlap the epilogue of the current one, but the
// tensor cores idle through it. Sm90PingPongGemmConfig (opt-in) hides the epilogue instead: each consumer
// warpgroup owns whole 128 x BN tiles (every other tile of the block; two m64 wgmmas a k-step) and the two
// issue their k-loops in turns, so one stores while the other computes. K tails
// come from TMA's zero fill. Outputs whose rows are not 16-byte aligned (or tiles that are not whole boxes)
// take plain predicated stores of the same values instead of the TMA store. Epilogues: QuantEpilogue
// (W8A8 / fp8: dequantization as DequantScales), LinearEpilogue (alpha * acc + beta * C; fp32, fp16 or bf16
// C/D), Fp8BlockScaledEpilogue (block-wise fp8: the k-loop scales each 128-wide k-tile's partial sums by
// s_a[kb, row] * s_w[col / 128, kb], whose slices the producer TMA-loads into the ring slot with the
// operands). fp8 (both epilogues) promotes by default: each k-tile's wgmmas go to fresh accumulators that
// are waited for and added into fp32 registers, since the fp8 tensor cores keep fewer bits than fp32
// (Sm90GemmConfig's FastAccum = true keeps one chain over K instead); a 256-wide tile does that in two
// 128-column slices. The launchers that choose the tile themselves (w8a8_gemm, fp8_gemm, gemm_f16_sm90 with
// Cfg = void) take 128 x 64, 128 x 128 or 128 x 256 tiles by the shape (sm90_detail::choose_tile_n).
//
// Launchers: w8a8_gemm_sm90, fp8_gemm_sm90, fp8_gemm_blockwise; gemm_f16_sm90 (fp16 / bf16) is
// gemm_f16.cuh's. w8a8_gemm and fp8_gemm dispatch to them on sm_90 devices (or in the simulator with
// LLMK_SIM_ARCH=900, see docs/hopper.md) when the build has sm_90a code.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "llmk/arch/sm90/bulk_copy.cuh"
#include "llmk/arch/sm90/cluster.cuh"
#include "llmk/arch/sm90/pipeline.cuh"
#include "llmk/arch/sm90/stmatrix.cuh"
#include "llmk/arch/sm90/tma.cuh"
#include "llmk/arch/sm90/warp_specialization.cuh"
#include "llmk/arch/sm90/warpgroup_turns.cuh"
#include "llmk/arch/sm90/wgmma.cuh"
#include "llmk/config.cuh"
#include "llmk/core/hopper_support.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/gemm/hopper_gemm_epilogue.cuh"
#include "llmk/gemm/quant_gemm_args.cuh"
#include "llmk/gemm/split_k.cuh"
#include "llmk/gemm/tile_gemm.cuh"

namespace llmk::gemm {

namespace sm90_detail {

// The wgmma atom and accumulator of an input type.
template <class In, bool kSaturate>
struct WgmmaOf;
template <bool S>
struct WgmmaOf<half, S> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx16_F32F16F16_SS<N>;
  using Acc = float;
};
template <bool S>
struct WgmmaOf<bfloat16, S> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx16_F32BF16BF16_SS<N>;
  using Acc = float;
};
template <bool S>
struct WgmmaOf<float8_e4m3, S> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx32_F32E4M3E4M3_SS<N>;
  using Acc = float;
};
template <>
struct WgmmaOf<std::int8_t, false> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx32_S32S8S8_SS<N>;
  using Acc = std::int32_t;
};
template <>
struct WgmmaOf<std::int8_t, true> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx32_S32S8S8_SATFINITE_SS<N>;
  using Acc = std::int32_t;
};

template <class In>
constexpr arch::sm90::TmaElem tma_elem() {
  return sizeof(In) == 1 ? arch::sm90::TmaElem::kU8 : arch::sm90::TmaElem::kU16;
}

}  // namespace sm90_detail

/// Tile configuration of the Hopper GEMM: 128 x BN block tile, BK = one 128-byte row of K, Stages ring slots.
/// FastAccum (fp8 only): false (the default) adds each 128-wide k-tile's wgmma sums into separate fp32
/// registers ("promotion", as cuBLASLt does unless CUBLASLT_MATMUL_DESC_FAST_ACCUM is set); true keeps one
/// wgmma accumulator over all of K. Hopper's fp8 tensor cores accumulate with fewer bits than fp32 (about
/// 14 significant bits were reported for the H800; an H100 run of llmk's tests missed a 2^-22 tolerance
/// by 1e-4 relative at K = 96..400), so fast accumulation's error grows with K.
///   using Cfg = llmk::gemm::Sm90GemmConfig<llmk::half, 256>;   // 128 x 256 tiles, 4 slots
///   llmk::Status s = llmk::gemm::gemm_f16_sm90<Cfg>(g, stream);
template <class In, int BN = 128, int Stages = 4, bool kSaturate = false, bool FastAccum = false>
struct Sm90GemmConfig {
  static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256, "BN: a multiple of 16 up to 256");
  using Elem = In;
  static constexpr bool kPromote =
      !FastAccum && (std::is_same_v<In, float8_e4m3> || std::is_same_v<In, float8_e5m2>);
  using Wgmma = sm90_detail::WgmmaOf<In, kSaturate>;
  using Acc = typename Wgmma::Acc;
  using Atom = typename Wgmma::template Atom<BN>;
  static constexpr int kBM = 128, kBN = BN, kStages = Stages;
  // Whether the launchers may split K (gemm_sm90_split_kernel): not int8 .satfinite (saturation is of the
  // whole sum) and not promoted fp8 at BN = 256 (its split kernel spills); those shapes run unsplit. fp8
  // fast accumulation splits since split_k_store_pair (its split kernel's wgmmas had been serialized, C7514);
  // fp16 / bf16 split (gemm_f16_sm90 with a workspace).
  static constexpr bool kCanSplitK =
      !kSaturate && !(std::is_same_v<In, float8_e4m3> && !FastAccum && BN > 128);
  static constexpr int kBK = 128 / static_cast<int>(sizeof(In));  // elements in one 128-byte row
  static constexpr int kKSteps = 4;                               // wgmmas per k-tile (32 bytes of K each)
  static constexpr int kThreads = 384;
  static constexpr int kConsumerWarps = 8;
  static constexpr int kClusterM = 1;       // blocks per cluster along M (Sm90ClusterGemmConfig: 2)
  static constexpr bool kPingPong = false;  // Sm90PingPongGemmConfig: true
  static constexpr unsigned kABytes = kBM * 128, kBBytes = static_cast<unsigned>(kBN) * 128;
  static_assert(Stages * (kABytes + kBBytes) <= 192 * 1024, "the ring must leave room for the staging tiles");
};

/// Base (an Sm90GemmConfig) in clusters of 2 blocks along M: the two blocks of a cluster take the tiles at
/// rows m0 and m0 + 128 of the same columns, and each TMA-loads one half of their shared BN x BK slice of B
/// and multicasts it into both blocks' ring slots. Each block then pulls (128 + BN / 2) x BK operand bytes
/// from L2 per k-tile instead of (128 + BN) x BK: the L2 -> SM traffic the 2026-11-25 H100 run pointed at
/// (docs/gemm.md, "Measured and predicted"). A slot is refilled only when the consumers of both blocks have
/// released it (each consumer warp arrives on its own and its peer's "empty" barrier), and a block's producer
/// waits for the last releases of both blocks before it exits. Opt-in (not chosen by the dispatch until a GPU
/// run measures it); no split-K.
///
///   using Cfg = llmk::gemm::Sm90ClusterGemmConfig<llmk::gemm::Sm90GemmConfig<llmk::half, 256>>;
///   llmk::Status s = llmk::gemm::gemm_f16_sm90<Cfg>(g, stream);
template <class Base>
struct Sm90ClusterGemmConfig : Base {
  static constexpr int kClusterM = 2;
  static constexpr bool kCanSplitK = false;
  static_assert(Base::kBN % 16 == 0 && Base::kBN / 2 % 8 == 0, "each block loads half of B's rows");
  static_assert(!std::is_same_v<typename Base::Elem, float8_e4m3>,
                "fp8 in clusters: not tested yet (fp16, bf16 and int8 are)");
};

/// Base (an Sm90GemmConfig, or an Sm90ClusterGemmConfig of one) with "ping-pong" consumers: each consumer
/// warpgroup owns whole 128 x BN tiles (two m64 wgmmas per k-step, BN accumulators a thread) instead of 64
/// rows of every tile, the two take the block's tiles alternately, and they issue their k-loops in turns
/// (sm90/warpgroup_turns.cuh), so that one warpgroup's epilogue (the stores of its tile, the scale loads)
/// runs while the other's wgmmas keep the tensor cores busy. In the cooperative kernel both warpgroups
/// finish a tile together and every SM's tensor cores idle through the epilogue: a candidate for the fixed
/// cost per round of tiles the 2026-11-25 H100 run fitted (docs/gemm.md). A tile's operand bytes per FLOP
/// are those of the cooperative 128 x BN tile. BN <= 128 (the accumulators); fp16, bf16 and int8 (not fp8
/// yet: promoted fp8's per-k-tile partial sums would need BN more registers, and fast-accumulation fp8 is
/// untested); no split-K. Opt-in (not chosen by the dispatch until a GPU run measures it against the
/// cooperative tiles: the K sweep's ping-pong rows).
///
///   using Cfg = llmk::gemm::Sm90PingPongGemmConfig<llmk::gemm::Sm90GemmConfig<llmk::half, 128>>;
///   llmk::Status s = llmk::gemm::gemm_f16_sm90<Cfg>(g, stream);
template <class Base>
struct Sm90PingPongGemmConfig : Base {
  static constexpr bool kPingPong = true;
  static constexpr bool kCanSplitK = false;
  static_assert(Base::kBN <= 128, "ping-pong: a warpgroup holds a 128 x BN tile's accumulators, BN <= 128");
  static_assert(!std::is_same_v<typename Base::Elem, float8_e4m3>,
                "ping-pong fp8: not tested yet (fp16, bf16 and int8 are)");
};

namespace sm90_detail {

// Named barriers of the ping-pong consumers' turns (5 and 6: warpgroup_sync has 1..3, split-K's 4).
inline constexpr int kPingPongFirstBarrier = 5;
static_assert(kPingPongFirstBarrier > detail::kSplitKConsumersBarrier);

// The kernel body (see the file comment); kSplitK: units of tiles x p.splits (Sm90GemmSplitParams).
template <class Cfg, class Epilogue, bool kSplitK, class Params>
LLMK_DEVICE void gemm_sm90_body(const Params& p) {
  namespace sm90 = arch::sm90;
  if constexpr (!sm90::kHasWgmma) {
#if LLMK_DEVICE_PASS
    __trap();
#endif
  } else {
    using Storage = Sm90GemmStorage<Cfg, Epilogue>;
    using Acc = typename Cfg::Acc;
    constexpr bool kBlockScaled = Epilogue::kBlockScaled;
    Storage& s = *reinterpret_cast<Storage*>(sm90::align_shared<1024>(dynamic_smem()));
    const int m = p.m, n = p.n;
    const int tiles_m = ceil_div(m, Cfg::kBM), tiles_n = ceil_div(n, Cfg::kBN);
    const int tiles = tiles_m * tiles_n, k_tiles = ceil_div(p.k, Cfg::kBK);
    static_assert(!kSplitK || !kBlockScaled, "split-K: not with block-wise scales");
    int splits = 1, kps = k_tiles;  // the unsplit kernel: a unit is a tile with all of K
    if constexpr (kSplitK) splits = p.splits, kps = p.split.k_tiles_per_split;
    // Clusters of 2 along M (Sm90ClusterGemmConfig): a unit is a pair of vertically adjacent tiles, one per
    // block of the cluster (rank r takes the pair's tile r), and the clusters walk the units.
    constexpr int kCm = Cfg::kClusterM;
    static_assert(kCm == 1 || (kCm == 2 && !kSplitK && !kBlockScaled), "clusters: unsplit, not block-scaled");
    const int pairs_m = ceil_div(tiles_m, kCm);
    const int units = (kCm == 1 ? tiles : pairs_m * tiles_n) * splits;
    const unsigned rank = kCm == 1 ? 0u : sm90::cluster_ctarank();
    const int first_unit = static_cast<int>(blockIdx.x) / kCm, unit_step = static_cast<int>(gridDim.x) / kCm;
    // A unit's tile origin: (m0, n0) of this block's tile.
    auto tile_origin = [&](int tile) {
      if constexpr (kCm == 1)
        return std::pair<int, int>{(tile % tiles_m) * Cfg::kBM, (tile / tiles_m) * Cfg::kBN};
      else
        return std::pair<int, int>{((tile % pairs_m) * kCm + static_cast<int>(rank)) * Cfg::kBM,
                                   (tile / pairs_m) * Cfg::kBN};
    };
    // Ping-pong: a tile's slots are read by its one warpgroup, so 4 warps free each slot (8 cooperative).
    constexpr bool kPp = Cfg::kPingPong;
    constexpr unsigned kReleasingWarps = kPp ? Cfg::kConsumerWarps / 2 : Cfg::kConsumerWarps;
    static_assert(!kPp || !kSplitK, "ping-pong: no split-K");
    if (threadIdx.x == 0) s.ring.init(kReleasingWarps * kCm);
    if constexpr (kCm == 1)
      __syncthreads();
    else
      sm90::cluster_sync();  // both blocks' barriers exist before either block signals the other's
    // Frees ring slot c: in a cluster, in both blocks (each block's producer refills its slot for both).
    auto release = [&](const sm90::RingPosition<Cfg::kStages>& c) {
      if constexpr (kCm == 1) {
        s.ring.consumer_release(c);
      } else {
        s.ring.consumer_release_to(c, rank);
        s.ring.consumer_release_to(c, rank ^ 1u);
      }
    };
    const int wg = static_cast<int>(threadIdx.x / 128);
    if (wg == 0) {  // producer
      sm90::setmaxnreg_dec<40>();
      if (threadIdx.x == 0) {
        constexpr unsigned kTx = Cfg::kABytes + Cfg::kBBytes + (kBlockScaled ? kAScaleBox * 4 + 4 * 4 : 0);
        sm90::RingPosition<Cfg::kStages> q;
        for (int unit = first_unit; unit < units; unit += unit_step) {
          const int tile = unit / splits, kt0 = (unit % splits) * kps, kt1 = min(kt0 + kps, k_tiles);
          const std::pair<int, int> origin = tile_origin(tile);
          const int m0 = origin.first, n0 = origin.second;
          for (int kt = kt0; kt < kt1; ++kt) {
            s.ring.producer_acquire(q, kTx);
            sm90::tma_load(s.a[q.stage], p.a, s.ring.full_bar(q), {kt * Cfg::kBK, m0});
            if constexpr (kCm == 1) {
              sm90::tma_load(s.b[q.stage], p.b, s.ring.full_bar(q), {kt * Cfg::kBK, n0});
            } else {  // this block's half of B's rows, into both blocks' slots
              constexpr int kHalf = Cfg::kBN / 2;
              sm90::tma_load_multicast(s.b[q.stage] + rank * (kHalf * 128u), p.b, s.ring.full_bar(q),
                                       {kt * Cfg::kBK, n0 + static_cast<int>(rank) * kHalf}, 0x3);
            }
            if constexpr (kBlockScaled) {
              // m0 is a multiple of 128: the s_a box starts (kt * ld_a_scales) % 4 floats early.
              sm90::tma_load(s.a_scales[q.stage], p.a_scales, s.ring.full_bar(q),
                             {(kt * p.ld_a_scales + m0) & ~3});
              sm90::tma_load(s.w_scales[q.stage], p.w_scales, s.ring.full_bar(q),
                             {((n0 / 128) * p.k_blocks + kt) & ~3});
            }
            q.advance();
          }
        }
        if constexpr (kCm > 1) {
          // The consumers of both blocks arrive on this block's "empty" barriers: wait for the last of those
          // arrivals (every slot released once more) before this block may exit.
          for (int st = 0; st < Cfg::kStages; ++st) {
            s.ring.producer_wait(q);
            q.advance();
          }
        }
      }
      return;  // no block-wide barrier follows
    }
    sm90::setmaxnreg_inc<232>();
    // Cooperative: rows 64 * half .. of every tile. Ping-pong: every row of every other tile of the block.
    const int half = wg - 1;
    const int tid = static_cast<int>(threadIdx.x % 128), w = tid / 32, lane = tid % 32;
    unsigned char* staging = s.out[Storage::kStaged ? half : 0];
    unsigned box_seq = 0;     // staging boxes used so far (store_tile_boxes)
    bool box_stored = false;  // whether the last of them was stored (store_tile_boxes)
    sm90::RingPosition<Cfg::kStages> c, prev;
    // Block-scaled or promoted fp8: one k-tile's partial sums, added into acc once its wgmmas are done, in
    // column slices of at most 128 (a 128 x 256 tile takes two slices per k-tile: acc and one slice's partial
    // sums fit the consumers' 232 registers, two full sets would not).
    constexpr bool kTileSums = kBlockScaled || Cfg::kPromote;
    constexpr int kPartN = kTileSums && Cfg::kBN > 128 ? 128 : Cfg::kBN, kSlices = Cfg::kBN / kPartN;
    static_assert(!kBlockScaled || Cfg::kBN == 128,
                  "block-wise scales: one 128-column weight block per tile");
    using PartAtom = typename Cfg::Wgmma::template Atom<kPartN>;
    Acc part[kPartN / 2] = {};
    // 64-row slices of a tile this warpgroup accumulates: 1 (cooperative) or 2 (ping-pong).
    constexpr int kSubs = kPp ? 2 : 1;
    static_assert(!kPp || !kTileSums, "ping-pong: not with per-k-tile partial sums");
    // The block's units are first_unit + li * unit_step, li = 0 .. local - 1; ping-pong warpgroup `half`
    // takes li = half, half + 2, ..., skipping the other's k-tiles in the ring, and both take (local + 1) / 2
    // turns (warpgroup 1 an empty one when local is odd: WarpgroupTurns needs equal counts).
    const int local = first_unit < units ? (units - 1 - first_unit) / unit_step + 1 : 0;
    [[maybe_unused]] const sm90::WarpgroupTurns<2, kPingPongFirstBarrier> turns{half};
    if constexpr (kPp) {
      if (local > 0) turns.start();
      if (half == 1) c.advance_by(kps);  // unsplit: every unit has all k_tiles = kps k-tiles
    }
    for (int li = kPp ? half : 0; li < local; li += kPp ? 2 : 1) {
      const int unit = first_unit + li * unit_step;
      const int tile = unit / splits, kt0 = (unit % splits) * kps, kt1 = min(kt0 + kps, k_tiles);
      const std::pair<int, int> origin = tile_origin(tile);
      const int m0 = origin.first, n0 = origin.second;
      Acc acc[kSubs][Cfg::kBN / 2] = {};
      if constexpr (kPp) turns.wait();
      for (int kt = kt0; kt < kt1; ++kt) {
        s.ring.consumer_wait(c);
        const std::uint64_t da = sm90::make_smem_desc(s.a[c.stage] + (kPp ? 0 : half) * 64 * 128, 16, 1024,
                                                      sm90::SmemSwizzle::k128B);
        const std::uint64_t db = sm90::make_smem_desc(s.b[c.stage], 16, 1024, sm90::SmemSwizzle::k128B);
        if constexpr (kTileSums) {
          // The k-tile's partial sums wait for their wgmmas, then join acc: block-scaled, times s_a (this
          // thread's two rows) * s_w (the tile's one 128-column block); promoted fp8, as they are.
          float s_lo = 1.0f, s_hi = 1.0f;
          if constexpr (kBlockScaled) {
            const int r = 64 * half + 16 * w + lane / 4 + ((kt * p.ld_a_scales) & 3);
            const float sw = s.w_scales[c.stage][((n0 / 128) * p.k_blocks + kt) & 3];
            s_lo = s.a_scales[c.stage][r] * sw, s_hi = s.a_scales[c.stage][r + 8] * sw;
          }
#pragma unroll
          for (int sl = 0; sl < kSlices; ++sl) {  // B rows sl * kPartN .. (128 bytes each)
            sm90::wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < Cfg::kKSteps; ++ks)
              PartAtom::fma(part, sm90::advance_smem_desc(da, 32u * ks),
                            sm90::advance_smem_desc(db, 128u * kPartN * sl + 32u * ks), ks > 0);
            sm90::wgmma_commit();
            sm90::wgmma_wait<0>();
            if (sl == kSlices - 1 && lane == 0) release(c);
            if constexpr (kBlockScaled) {
#pragma unroll
              for (int i = 0; i < kPartN / 2; ++i) acc[0][i] += part[i] * (((i >> 1) & 1) ? s_hi : s_lo);
            } else {
#pragma unroll
              for (int i = 0; i < kPartN / 2; ++i) acc[0][sl * kPartN / 2 + i] += part[i];
            }
          }
        } else {
          sm90::wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < Cfg::kKSteps; ++ks)
#pragma unroll
            for (int sub = 0; sub < kSubs; ++sub)  // A rows 64 sub .. (8 swizzle atoms of 1024 bytes each)
              Cfg::Atom::fma(acc[sub], sm90::advance_smem_desc(da, 8192u * sub + 32u * ks),
                             sm90::advance_smem_desc(db, 32u * ks), kt > kt0 || ks > 0);
          sm90::wgmma_commit();
          if (kt > kt0) {
            sm90::wgmma_wait<1>();  // the previous k-tile's wgmmas are done: free its slot
            if (lane == 0) release(prev);
          }
          prev = c;
        }
        c.advance();
      }
      if constexpr (kPp) turns.pass();  // the other warpgroup's k-loop runs while this one stores
      if constexpr (!kTileSums) {
        sm90::wgmma_wait<0>();
        if (lane == 0) release(prev);
      }
      if constexpr (kPp) c.advance_by(kps);  // past the other warpgroup's next unit
      if constexpr (kSplitK) {
        const int r0 = m0 + 64 * half;
        // This unit's partials (rows r0 + 16w + g (+8), column pairs n0 + 8j + 2t: 8-byte stores into plane
        // `split` of [M, ldp]; columns past N up to ldp hold the zero-filled B rows' zeros), then the tile's
        // last unit to arrive sums the planes in split order and stores epilogue(sum).
        const int g = lane / 4, t = lane % 4, split = unit % splits;
        Acc* plane = p.split.partials + static_cast<std::int64_t>(split) * m * p.split.ldp;
#pragma unroll
        for (int i = 0; i < Cfg::kBN / 2; i += 2) {
          const int row = r0 + 16 * w + g + 8 * ((i >> 1) & 1), col = n0 + 8 * (i >> 2) + 2 * t;
          if (row < m && col < p.split.ldp) {
            Acc* dst = plane + static_cast<std::int64_t>(row) * p.split.ldp + col;
            detail::split_k_store_pair(dst, acc[0][i], acc[0][i + 1]);
          }
        }
        const int ctid = static_cast<int>(threadIdx.x) - 128;  // 0..255 over both consumer warpgroups
        if (!detail::split_k_publish_among<256>(&p.split.arrivals[tile], p.split.tag,
                                                static_cast<unsigned>(splits), &s.last_split, ctid,
                                                detail::kSplitKConsumersBarrier))
          continue;
        using Out = typename Epilogue::Out;
        detail::split_k_reduce_as<256, Cfg::kBM, Cfg::kBN>(
            ctid, p.split.partials, p.split.ldp, m, n, m0, n0, splits,
            [&](int row, int col, const Acc(&sum)[4], int cols) {
              Out v[4];
              if constexpr (FactoredEpilogue<Epilogue>) {
                const auto rf = p.epi.row(row);  // once per quad
#pragma unroll
                for (int e = 0; e < 4; ++e)
                  v[e] = e < cols ? p.epi.value(rf, p.epi.col(col + e), sum[e]) : Out{};
              } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) v[e] = e < cols ? p.epi.value(row, col + e, sum[e]) : Out{};
              }
              store_quad(p.d + static_cast<std::int64_t>(row) * p.ldd + col, v, cols, p.quad_store);
            });
      } else {  // (an else, not a continue: the store loop is unreachable in split-K instantiations)
#pragma unroll
        for (int sub = 0; sub < kSubs; ++sub) {
          const int r0 = m0 + 64 * (kPp ? sub : half);
          if constexpr (Storage::kStaged) {
            if (p.tma_store) {
              sm90_detail::store_tile_boxes<Cfg, Storage>(staging, box_seq, box_stored, acc[sub], p, r0, n0,
                                                          std::make_integer_sequence<int, Storage::kBoxes>{});
              continue;
            }
          }
          store_rows_plain<Cfg>(acc[sub], p, r0, n0);
        }
      }
    }
    if constexpr (kPp) {
      if (half == 1 && local % 2 == 1) turns.wait(), turns.pass();  // the turn of warpgroup 0's last tile
      if (local > 0) turns.finish();
    }
    if constexpr (Storage::kStaged)
      if (p.tma_store && tid == 0) sm90::bulk_wait_group<0>();  // the stores are complete before the exit
    (void)box_seq, (void)box_stored;
  }
}

}  // namespace sm90_detail

/// The kernel (see the file comment). Launch with Cfg::kThreads threads and sm90_gemm_smem_bytes<Cfg,
/// Epilogue>() bytes. Launched (with its arguments checked and its tensor maps made) by gemm_f16_sm90,
/// w8a8_gemm_sm90, fp8_gemm_sm90 and fp8_gemm_blockwise: call those (example and errors there).
template <class Cfg, class Epilogue>
__global__ void __launch_bounds__(384, 1)
    gemm_sm90_kernel(const __grid_constant__ Sm90GemmParams<Epilogue> p) {
  sm90_detail::gemm_sm90_body<Cfg, Epilogue, false>(p);
}

/// The split-K kernel: the same with K split over units (Sm90GemmSplitParams; a separate instantiation, so
/// that the unsplit kernel's code is untouched by the reduction). Launched by the same entries where their
/// split plan splits K.
template <class Cfg, class Epilogue>
__global__ void __launch_bounds__(384, 1)
    gemm_sm90_split_kernel(const __grid_constant__ Sm90GemmSplitParams<Epilogue, typename Cfg::Acc> p) {
  sm90_detail::gemm_sm90_body<Cfg, Epilogue, true>(p);
}

namespace sm90_detail {

// True where the Hopper kernel of Cfg can run (llmk/core/hopper_support.cuh).
template <class Cfg>
bool sm90_available() {
  return sm90a_runnable<Cfg>();
}

// The width BN (64, 128 or 256) of the 128 x BN tile for an M x N output on `sms` SMs, by a small model:
// per round of tiles (grid = min(tiles, SMs)), the larger of the tensor time of a k-step (BN / 128, in units
// of a 128 x 128 tile's) and the time the active SMs take to pull their operand slices through L2
// (kL2 * active / sms * (128 + BN) / 256). kL2 = 1.5 is measured: on the H100 run of 2026-11-25
// (bench/results/2026-11-25-h100-80gb-hbm3-7e21187-subset) a 128 x 128 k-tile took 0.425 us, fp16 and int8
// alike, with every SM loading, where its tensor time is 0.28 us. Wider tiles load fewer bytes per FLOP and
// cut the rounds' fixed costs; narrower ones keep more SMs busy.
inline int choose_tile_n(int m, int n, int sms) {
  constexpr double kL2 = 1.5;
  int best = 128;
  double best_cost = 0.0;
  for (const int bn : {128, 64, 256}) {  // ties keep the earlier width
    const long long tiles = static_cast<long long>(ceil_div(m, 128)) * ceil_div(n, bn);
    const long long full = tiles / sms, last = tiles % sms;
    auto round = [&](long long active) {
      return std::max(bn / 128.0, kL2 * static_cast<double>(active) / sms * (128.0 + bn) / 256.0);
    };
    const double cost = static_cast<double>(full) * round(sms) + (last > 0 ? round(last) : 0.0);
    if (bn == 128 || cost < best_cost) best = bn, best_cost = cost;
  }
  return best;
}

// Runs `launch(Cfg)` with the Sm90GemmConfig<In, BN> that choose_tile_n picks (the dispatch of w8a8_gemm,
// fp8_gemm and gemm_f16_sm90): one place turns the runtime choice into the compile-time tile.
template <class In, class Launch>
Status with_chosen_tile(int m, int n, Launch&& launch) {
  switch (choose_tile_n(m, n, device_sm_count())) {
    case 64:
      return launch(Sm90GemmConfig<In, 64>{});
    case 256:
      return launch(Sm90GemmConfig<In, 256>{});
    default:
      return launch(Sm90GemmConfig<In, 128>{});
  }
}

template <class Cfg, class In>
Status make_operand_maps(const In* a, std::int64_t lda, const In* b, std::int64_t ldb, int m, int n, int k,
                         arch::sm90::TensorMap* map_a, arch::sm90::TensorMap* map_b) {
  namespace sm90 = arch::sm90;
  sm90::TensorMapDesc da;
  da.elem = tma_elem<In>();
  da.rank = 2;
  da.global = a;
  da.dims[0] = static_cast<std::uint64_t>(k);
  da.dims[1] = static_cast<std::uint64_t>(m);
  da.strides[0] = static_cast<std::uint64_t>(lda) * sizeof(In);
  da.box[0] = Cfg::kBK;
  da.box[1] = Cfg::kBM;
  da.swizzle = sm90::SmemSwizzle::k128B;
  sm90::TensorMapDesc db = da;
  db.global = b;
  db.dims[1] = static_cast<std::uint64_t>(n);
  db.strides[0] = static_cast<std::uint64_t>(ldb) * sizeof(In);
  db.box[1] = Cfg::kBN / Cfg::kClusterM;  // in a cluster, each block loads half of the slice
  LLMK_RETURN_IF_ERROR(sm90::make_tensor_map(map_a, da));
  return sm90::make_tensor_map(map_b, db);
}

// The output map: [M, N] of Out in boxes of 64 rows x 128 bytes with the 128B swizzle (the staging layout).
template <class Out>
Status make_output_map(Out* d, std::int64_t ldd, int m, int n, arch::sm90::TensorMap* map) {
  namespace sm90 = arch::sm90;
  sm90::TensorMapDesc dd;
  dd.elem = sizeof(Out) == 2 ? sm90::TmaElem::kU16 : sm90::TmaElem::kU32;
  dd.rank = 2;
  dd.global = d;
  dd.dims[0] = static_cast<std::uint64_t>(n);
  dd.dims[1] = static_cast<std::uint64_t>(m);
  dd.strides[0] = static_cast<std::uint64_t>(ldd) * sizeof(Out);
  dd.box[0] = 128 / sizeof(Out);
  dd.box[1] = 64;
  dd.swizzle = sm90::SmemSwizzle::k128B;
  return sm90::make_tensor_map(map, dd);
}

// A rank-1 fp32 map over `count` scales, `box` per copy.
inline Status make_scale_map(const float* scales, std::uint64_t count, std::uint32_t box,
                             arch::sm90::TensorMap* map) {
  namespace sm90 = arch::sm90;
  sm90::TensorMapDesc ds;
  ds.elem = sm90::TmaElem::kF32;
  ds.rank = 1;
  ds.global = scales;
  ds.dims[0] = count;
  ds.box[0] = box;
  return sm90::make_tensor_map(map, ds);
}

// The split plan of an M x N x K call on Cfg's tiles (`sms` SMs, one block each): split_k_rounds_splits'
// count for split_k = 0, at least 2 k-tiles a split, the partials' traffic (S x M x N x 4 bytes, written and
// read back: mostly L2) at most half the weights' (N x K x element bytes, the rule of the mma.sync 8-bit
// GEMMs), at most 16; split_k = s: at most s.
template <class Cfg>
detail::QGemmSplitPlan sm90_split_plan(int m, int n, int k, int split_k, int sms) {
  const long long tiles = static_cast<long long>(ceil_div(m, Cfg::kBM)) * ceil_div(n, Cfg::kBN);
  const int k_tiles = ceil_div(k, Cfg::kBK);
  if (!Cfg::kCanSplitK) return {};
  int want = split_k;
  if (want == 0) {
    const long long by_traffic = k * static_cast<long long>(sizeof(typename Cfg::Elem)) / (8LL * m);
    const int most = static_cast<int>(
        std::min<long long>(std::min(kSplitKMaxSplits, std::max(1, k_tiles / 2)), std::max(1LL, by_traffic)));
    want = detail::split_k_rounds_splits(tiles, k_tiles, most, sms);
  }
  return detail::split_k_plan_of(want, tiles, k_tiles, m, n);
}

// sm90_split_plan on the tile with_chosen_tile picks for the shape (what w8a8_gemm / fp8_gemm run at M > 64).
template <class In>
detail::QGemmSplitPlan sm90_split_plan_chosen(int m, int n, int k, int split_k, int sms) {
  switch (choose_tile_n(m, n, sms)) {
    case 64:
      return sm90_split_plan<Sm90GemmConfig<In, 64>>(m, n, k, split_k, sms);
    case 256:
      return sm90_split_plan<Sm90GemmConfig<In, 256>>(m, n, k, split_k, sms);
    default:
      return sm90_split_plan<Sm90GemmConfig<In, 128>>(m, n, k, split_k, sms);
  }
}

template <class T>
struct IsSm90GemmConfig : std::false_type {};
template <class In, int BN, int Stages, bool kSaturate, bool FastAccum>
struct IsSm90GemmConfig<Sm90GemmConfig<In, BN, Stages, kSaturate, FastAccum>> : std::true_type {};
template <class Base>
struct IsSm90GemmConfig<Sm90ClusterGemmConfig<Base>> : IsSm90GemmConfig<Base> {};
template <class Base>
struct IsSm90GemmConfig<Sm90PingPongGemmConfig<Base>> : IsSm90GemmConfig<Base> {};

// Fills the operand and output maps of `prm` (m, n, k, d, ldd, epi set by the caller) and launches. The
// output goes through the TMA-store epilogue where the tile allows it and d is 16-byte aligned with 16-byte
// rows; otherwise through plain stores (same values). With `plan.splits > 1` the split-K kernel runs over
// `workspace` (plan.workspace_bytes() bytes, 16-byte aligned); kCanSplit: whether to instantiate it at all.
template <class Cfg, bool kCanSplit = false, class In, class Epilogue>
Status launch_gemm_sm90(const In* a, std::int64_t lda, const In* b, std::int64_t ldb,
                        Sm90GemmParams<Epilogue>& prm, cudaStream_t stream,
                        const detail::QGemmSplitPlan& plan = {}, void* workspace = nullptr) {
  using Out = typename Epilogue::Out;
  constexpr int kSmem = sm90_gemm_smem_bytes<Cfg, Epilogue>();
  static_assert(kSmem <= 227 * 1024, "the ring and the staging tiles must fit in 227 KiB");
  LLMK_RETURN_IF_ERROR((make_operand_maps<Cfg>(a, lda, b, ldb, prm.m, prm.n, prm.k, &prm.a, &prm.b)));
  prm.tma_store = Sm90GemmStorage<Cfg, Epilogue>::kStaged &&
                  reinterpret_cast<std::uintptr_t>(prm.d) % 16 == 0 &&
                  (prm.ldd * static_cast<std::int64_t>(sizeof(Out))) % 16 == 0;
  if (prm.tma_store) LLMK_RETURN_IF_ERROR(make_output_map(prm.d, prm.ldd, prm.m, prm.n, &prm.d_map));
  const long long tiles = static_cast<long long>(ceil_div(prm.m, Cfg::kBM)) * ceil_div(prm.n, Cfg::kBN);
  if (tiles * std::max(1, plan.splits) > 0x7FFFFFFFLL)  // the kernel counts tiles x splits in int
    return Status::invalid_argument(
        "m", str_cat("M x N needs fewer than 2^31 tiles of 128 x ", Cfg::kBN, " (times the split count)"));
  if constexpr (kCanSplit && !Epilogue::kBlockScaled) {
    if (plan.splits > 1) {
      Sm90GemmSplitParams<Epilogue, typename Cfg::Acc> sp;
      static_cast<Sm90GemmParams<Epilogue>&>(sp) = prm;
      sp.splits = plan.splits;
      sp.split = detail::qgemm_split_args<typename Cfg::Acc>(plan, workspace, prm.n);
      sp.quad_store = reinterpret_cast<std::uintptr_t>(prm.d) % (4 * sizeof(Out)) == 0 && prm.ldd % 4 == 0;
      const unsigned grid =
          static_cast<unsigned>(std::min<long long>(tiles * plan.splits, device_sm_count()));
      return launch(gemm_sm90_split_kernel<Cfg, Epilogue>, dim3(grid), dim3(Cfg::kThreads),
                    static_cast<std::size_t>(kSmem), stream, sp);
    }
  }
  if constexpr (Cfg::kClusterM > 1) {
    // Clusters of 2 blocks, each cluster a pair of tiles at a time: min(pairs, SMs / 2) clusters.
    const long long pairs = static_cast<long long>(ceil_div(ceil_div(prm.m, Cfg::kBM), Cfg::kClusterM)) *
                            ceil_div(prm.n, Cfg::kBN);
    const long long clusters = std::max(1LL, std::min<long long>(pairs, device_sm_count() / Cfg::kClusterM));
    return launch_cluster(gemm_sm90_kernel<Cfg, Epilogue>,
                          dim3(static_cast<unsigned>(clusters * Cfg::kClusterM)), dim3(Cfg::kThreads),
                          dim3(Cfg::kClusterM, 1, 1), static_cast<std::size_t>(kSmem), stream, prm);
  } else {
    const unsigned grid = static_cast<unsigned>(std::min<long long>(tiles, device_sm_count()));
    return launch(gemm_sm90_kernel<Cfg, Epilogue>, dim3(grid), dim3(Cfg::kThreads),
                  static_cast<std::size_t>(kSmem), stream, prm);
  }
}

}  // namespace sm90_detail

/// W8A8 GEMM on Hopper (IGMMA), the arguments and results of w8a8_gemm (docs/gemm.md). Errors: the
/// Status::invalid_argument checks of w8a8_gemm; Status::unsupported where no sm_90a kernel can run.
///
///   llmk::Status s = llmk::gemm::w8a8_gemm_sm90<llmk::half>(g, stream);   // g as for w8a8_gemm
template <class Out, class Cfg = Sm90GemmConfig<std::int8_t>>
Status w8a8_gemm_sm90(const QuantGemmArgs<std::int8_t>& p, cudaStream_t stream) {
  static_assert(std::is_same_v<typename Cfg::Elem, std::int8_t>,
                "w8a8_gemm_sm90 needs an int8 configuration");
  LLMK_RETURN_IF_ERROR(
      (detail::validate_quant_gemm<std::int8_t, Out>(p, !std::is_same_v<Out, std::int32_t>)));
  using Epi = QuantEpilogue<Out, std::int32_t>;
  if (!sm90_detail::sm90_available<Cfg>())
    return Status::unsupported("w8a8_gemm_sm90 needs an sm_90 device and a build with sm_90a code");
  detail::QGemmSplitPlan plan;
  LLMK_RETURN_IF_ERROR(detail::qgemm_resolve_split_by(
      p, Cfg::kCanSplitK,
      [&] { return sm90_detail::sm90_split_plan<Cfg>(p.m, p.n, p.k, p.split_k, device_sm_count()); }, plan));
  Sm90GemmParams<Epi> prm;
  prm.m = p.m, prm.n = p.n, prm.k = p.k, prm.d = static_cast<Out*>(p.d), prm.ldd = p.ldd;
  prm.epi = Epi{p.scales};
  return sm90_detail::launch_gemm_sm90<Cfg, Cfg::kCanSplitK>(p.a, p.lda, p.w, p.ldw, prm, stream, plan,
                                                             p.workspace);
}

/// FP8 (e4m3) GEMM on Hopper (QGMMA), the arguments and results of fp8_gemm. Errors: the
/// Status::invalid_argument checks of fp8_gemm; Status::unsupported where no sm_90a kernel can run.
///
///   llmk::Status s = llmk::gemm::fp8_gemm_sm90<llmk::bfloat16>(g, stream);   // g as for fp8_gemm
template <class Out, class Cfg = Sm90GemmConfig<float8_e4m3>>
Status fp8_gemm_sm90(const QuantGemmArgs<float8_e4m3>& p, cudaStream_t stream) {
  static_assert(std::is_same_v<typename Cfg::Elem, float8_e4m3>, "fp8_gemm_sm90 needs an e4m3 configuration");
  LLMK_RETURN_IF_ERROR((detail::validate_quant_gemm<float8_e4m3, Out>(p, true)));
  if (p.scales.a_zero_points != nullptr)
    return Status::invalid_argument("scales.a_zero_points", "must be null: fp8 operands are symmetric");
  using Epi = QuantEpilogue<Out, float>;
  if (!sm90_detail::sm90_available<Cfg>())
    return Status::unsupported("fp8_gemm_sm90 needs an sm_90 device and a build with sm_90a code");
  detail::QGemmSplitPlan plan;
  LLMK_RETURN_IF_ERROR(detail::qgemm_resolve_split_by(
      p, Cfg::kCanSplitK,
      [&] { return sm90_detail::sm90_split_plan<Cfg>(p.m, p.n, p.k, p.split_k, device_sm_count()); }, plan));
  Sm90GemmParams<Epi> prm;
  prm.m = p.m, prm.n = p.n, prm.k = p.k, prm.d = static_cast<Out*>(p.d), prm.ldd = p.ldd;
  prm.epi = Epi{p.scales};
  return sm90_detail::launch_gemm_sm90<Cfg, Cfg::kCanSplitK>(p.a, p.lda, p.w, p.ldw, prm, stream, plan,
                                                             p.workspace);
}

/// FP8 (e4m3) GEMM with block-wise scales (Fp8BlockScales: 1 x 128 activation blocks, 128 x 128 weight
/// blocks) on Hopper (QGMMA). Each 128-wide k-tile's partial sums are scaled and added to fp32 accumulators
/// in registers (the wgmmas of one k-tile are waited for before the next k-tile's start: the two consumer
/// warpgroups cover each other's scaling). Out: float, llmk::half, llmk::bfloat16. Needs an sm_90 device
/// and sm_90a code (Status::unsupported otherwise: the mma.sync kernels have no block-wise mode).
///
/// Errors (Status::invalid_argument naming the argument): the operand checks of w8a8_gemm (a, w, d, m, n,
/// k, lda, ldw, ldd; no split-K); scales.a_scales or scales.w_scales null or not 16-byte aligned;
/// scales.ld_a_scales below M, or ceil(K / 128) * ld_a_scales not below 2^31; scales.bias not 4-byte
/// aligned. Status::unsupported as above; a failed tensor-map encode or launch: Status::cuda_error.
///
///   llmk::gemm::Fp8BlockGemmArgs g;
///   g.a = x_q; g.lda = K; g.w = w_q; g.ldw = K; g.m = M; g.n = N; g.k = K;
///   // x_scales_t [ceil(K/128), M], w_scale_inv [ceil(N/128), ceil(K/128)]:
///   g.scales = {x_scales_t, M, w_scale_inv, nullptr};
///   g.d = y; g.ldd = N;
///   llmk::Status s = llmk::gemm::fp8_gemm_blockwise<llmk::bfloat16>(g, stream);
template <class Out, class Cfg = Sm90GemmConfig<float8_e4m3>>
Status fp8_gemm_blockwise(const Fp8BlockGemmArgs& p, cudaStream_t stream) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, half> || std::is_same_v<Out, bfloat16>,
                "FP8 GEMM outputs: float, llmk::half, llmk::bfloat16");
  static_assert(
      std::is_same_v<typename Cfg::Elem, float8_e4m3> && Cfg::kBN == 128 && Cfg::kBK == 128,
      "block-wise scaling needs the e4m3 configuration with 128 x 128 tiles (one scale block each)");
  LLMK_RETURN_IF_ERROR(detail::validate_fp8_block_gemm<Out>(p));
  using Epi = Fp8BlockScaledEpilogue<Out>;
  if (!sm90_detail::sm90_available<Cfg>())
    return Status::unsupported("fp8_gemm_blockwise needs an sm_90 device and a build with sm_90a code");
  Sm90GemmParams<Epi> prm;
  prm.m = p.m, prm.n = p.n, prm.k = p.k, prm.d = static_cast<Out*>(p.d), prm.ldd = p.ldd;
  prm.epi = Epi{p.scales.bias};
  prm.k_blocks = ceil_div(p.k, 128);
  prm.ld_a_scales = static_cast<int>(p.scales.ld_a_scales);
  LLMK_RETURN_IF_ERROR(sm90_detail::make_scale_map(
      p.scales.a_scales,
      static_cast<std::uint64_t>(prm.k_blocks) * static_cast<std::uint64_t>(prm.ld_a_scales), kAScaleBox,
      &prm.a_scales));
  LLMK_RETURN_IF_ERROR(sm90_detail::make_scale_map(
      p.scales.w_scales,
      static_cast<std::uint64_t>(ceil_div(p.n, 128)) * static_cast<std::uint64_t>(prm.k_blocks), 4,
      &prm.w_scales));
  return sm90_detail::launch_gemm_sm90<Cfg>(p.a, p.lda, p.w, p.ldw, prm, stream);
}

}  // namespace llmk::gemm
