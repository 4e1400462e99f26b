// llmk/gemm/weight_only_kernel.cuh: the mma.sync kernel of weight_only_gemm (llmk/gemm/weight_only.cuh, which
// includes this header and describes the math, the tiles and split-K): its tile configurations, the
// cp.async loader of A, the packed weights and (staged) scales / zero points, and the kernel.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "llmk/arch/cp_async.cuh"
#include "llmk/arch/ldmatrix.cuh"
#include "llmk/arch/mma.cuh"
#include "llmk/arch/mma_f32.cuh"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/vector.cuh"
#include "llmk/gemm/split_k.cuh"
#include "llmk/gemm/weight_only_args.cuh"
#include "llmk/gemm/weight_only_dequant.cuh"
#include "llmk/gemm/weight_only_layout.cuh"

namespace llmk::gemm {

/// Tile shape: BM x BN output tile, BK slice of K per stage, WarpsM x WarpsN warps over the tile, WarpsK
/// warps splitting each slice's k16 steps into contiguous runs, Stages-deep cp.async ring. weight_only_gemm
/// picks the tile by M (the named ones below); no entry takes a configuration of one's own, but a kernel
/// can read its shape:  constexpr int kThreads = llmk::gemm::WeightOnlyMediumM::kThreads;
template <int BM_, int BN_, int BK_, int WarpsM_, int WarpsN_, int WarpsK_, int Stages_>
struct WeightOnlyConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WarpsM = WarpsM_, WarpsN = WarpsN_, WarpsK = WarpsK_,
                       Stages = Stages_;
  static constexpr int kThreads = WarpsM * WarpsN * WarpsK * 32;
  static constexpr int WM = BM / WarpsM, WN = BN / WarpsN;
  static constexpr int kMmaM = WM / 16, kMmaN = WN / 8, kTilesN = WN / 16;  // per warp
  static constexpr int kKSteps = BK / 16, kStepsPerWarp = kKSteps / WarpsK;
  static constexpr int kSmemRowA = BK + 8;  // elements; the 16-byte pad spreads ldmatrix rows over banks
  static_assert(BK % 64 == 0, "BK must hold whole packed tiles of both widths: a multiple of 64");
  static_assert(BM % (16 * WarpsM) == 0, "each warp needs whole m16 tiles: BM % (16 * WarpsM) == 0");
  static_assert(BN % (16 * WarpsN) == 0, "each warp needs whole n16 weight tiles: BN % (16 * WarpsN) == 0");
  static_assert(kKSteps % WarpsK == 0 && kStepsPerWarp % 4 == 0,
                "each warp's run of k16 steps must be whole 4-bit tiles: (BK / 16 / WarpsK) % 4 == 0");
  static_assert(Stages >= 2 && Stages <= 8, "the cp.async ring needs 2..8 stages");
  static_assert(kThreads <= 1024, "at most 1024 threads a block");

  /// Group rows of scales / zero points one BK slice can touch when they are staged (G a multiple of 64):
  /// at most BK / 64.
  static constexpr int kQGroups = BK / 64;

  /// kStagedQuant: the slice's scales (and zero points) travel through the ring with A and W. `red` (the
  /// WarpsK partial sums) reuses the ring once the main loop is done.
  template <int kBits, bool kStagedQuant = false>
  struct SharedStorage {
    static constexpr int kTileK = 256 / kBits, kTilesK = BK / kTileK;
    static constexpr int kWBytes = (BN / 16) * kTilesK * 512;
    static constexpr int kRedFloats = WarpsK > 1 ? (WarpsK - 1) * WarpsM* WarpsN * 32 * kMmaM* kMmaN * 4 : 1;
    static constexpr int kQElems = kStagedQuant ? kQGroups * BN : 16;
    /// The stages this width gets: Stages, or fewer where the ring would pass 96 KiB (sm_86 / sm_89 give a
    /// block at most 99 KiB), e.g. 8-bit codes in the 32 x 128 x 128 tile run 3.
    static constexpr int kStageBytes = BM * kSmemRowA * 2 + kWBytes + kQElems * 3;
    static constexpr int kStages = [] {
      int s = Stages;
      while (s > 2 && s * kStageBytes > 96 * 1024) --s;
      return s;
    }();
    struct Ring {
      alignas(16) std::uint16_t a[kStages][BM * kSmemRowA];
      alignas(16) std::uint8_t w[kStages][kWBytes];
      alignas(
          16) std::uint16_t qs[kStages][kQElems];  // scale bits, [group - first group of the slice][column]
      alignas(16) std::uint8_t qz[kStages][kQElems];  // zero-point codes, same layout
    };
    union {
      Ring ring;
      float red[kRedFloats];
    };
    int last_split;  // split-K: whether this block arrived last (and sums the splits)
  };
};

/// Decode (M <= 16), 4-bit codes: 16 x 128 tile, 2 warps over N (64 columns each), 2 over each 256-wide K
/// slice (16 KiB of weights a stage), 3 stages (77 KiB), 128 threads; split-K fills the SMs. A warp's run is
/// 8 k16 steps (64 mmas), so what a slice costs whatever its size (the copies' addresses, a group's
/// constants, the barrier, the loop) is paid once per 64 mmas: 11.6 instructions per mma executed at G =
/// 128 on sm_90a (12.8 counted, with the mid-run group change G = 64 takes) against 14.3 with 128-wide
/// slices (4 steps a run).
using WeightOnlySmallM4 = WeightOnlyConfig<16, 128, 256, 1, 2, 2, 3>;
/// Decode (M <= 16), 8-bit codes: 16 x 128 x 128, 4 stages (a 256-wide slice of 8-bit codes is 32 KiB of
/// weights: 2 stages under the 96 KiB cap).
using WeightOnlySmallM8 = WeightOnlyConfig<16, 128, 128, 1, 2, 2, 4>;
/// The decode tile of a code width.
template <int kBits>
using WeightOnlySmallM = std::conditional_t<kBits == 4, WeightOnlySmallM4, WeightOnlySmallM8>;
/// 16 < M <= 128: 32 x 128 x 128, the same warps (two m16 tiles each), 4 stages (3 for 8-bit codes).
using WeightOnlyMediumM = WeightOnlyConfig<32, 128, 128, 1, 2, 2, 4>;
/// M > 128: 128 x 128 x 64, 2 x 4 warps (64 x 32 each), 3 stages.
using WeightOnlyLargeM = WeightOnlyConfig<128, 128, 64, 2, 4, 1, 3>;

namespace detail {

template <class T>
struct WeightOnlyKernelParams {
  const T* a;
  std::int64_t lda;
  const std::uint8_t* w;
  const T* scales;
  const std::uint8_t* zeros;
  const T* bias;
  T* d;
  std::int64_t ldd;
  int m, n, k;
  FastDivisor group;
  bool pair_store;               // d and ldd allow 4-byte stores of column pairs
  int k_tiles_per_split;         // BK slices per split (the grid's z is the split count)
  float* partials;               // split-K: [splits, M, ldp] fp32
  int ldp;                       // split-K: the partials' row pitch, N rounded up to 4 (16-byte rows)
  unsigned long long* arrivals;  // split-K: [m_tiles * n_tiles] arrival words
  unsigned long long tag;        // split-K: this call's 48-bit tag (non-zero)
};

template <class T, int kBits>
LLMK_DEVICE WoColumnQuant wo_load_column_quant(const WeightOnlyKernelParams<T>& p, int group, int col) {
  constexpr std::uint32_t kDefaultZero = kBits == 4 ? 8u : 128u;
  T s = T(0.0f);
  std::uint32_t z = kDefaultZero;
  if (col < p.n) {
    const std::int64_t idx = static_cast<std::int64_t>(group) * p.n + col;
    s = p.scales[idx];
    if (p.zeros != nullptr) z = p.zeros[idx];
  }
  return wo_column_quant<T, kBits>(s, z);
}

// The copies of one block, with every address computed once: each thread owns fixed chunks of the A slice,
// the W slice and (staged) the scale / zero rows, and a slice only adds its K offset. Chunks past M, N or K
// copy nothing (zero-filled; src-size 0 reads nothing).
template <class Cfg, int kBits, class T, bool kStagedQuant>
struct WoLoader {
  using Ring = typename Cfg::template SharedStorage<kBits, kStagedQuant>::Ring;
  static constexpr int kTileK = 256 / kBits, kTilesK = Cfg::BK / kTileK;
  static constexpr int kAPerRow = Cfg::BK / 8, kAChunks = Cfg::BM * kAPerRow;
  static constexpr int kAIters = (kAChunks + Cfg::kThreads - 1) / Cfg::kThreads;
  static constexpr int kWPerRow = kTilesK * 32, kWChunks = (Cfg::BN / 16) * kWPerRow;
  static constexpr int kWIters = (kWChunks + Cfg::kThreads - 1) / Cfg::kThreads;
  static constexpr int kScaleChunks = Cfg::BN / 8, kZeroChunks = Cfg::BN / 16;
  static constexpr int kQPerGroup = kScaleChunks + kZeroChunks, kQChunks = Cfg::kQGroups * kQPerGroup;
  static constexpr int kQIters = kStagedQuant ? (kQChunks + Cfg::kThreads - 1) / Cfg::kThreads : 0;

  static_assert(Cfg::kThreads % kAPerRow == 0, "a thread's A chunks share one column");
  static constexpr int kARowsPerIter = Cfg::kThreads / kAPerRow;
  const T* a_src;         // this thread's first chunk (row tid / kAPerRow), for k0 = 0
  std::int64_t a_stride;  // kARowsPerIter rows
  int a_col;              // the chunks' column in the slice (K bound)
  int a_rows;             // chunks i < a_rows are inside M (and exist)
  const std::uint8_t* w_src[kWIters];
  int w_tk[kWIters];  // the chunk's tile along K in the slice; a huge value for a strip past N
  int w_tiles_k;      // packed tiles along K: ceil(K / kTileK)
  const void* q_src[kQIters > 0 ? kQIters : 1];  // column start in group row 0
  int q_group[kQIters > 0 ? kQIters : 1];        // group row j of the slice; kQGroups for no chunk
  bool q_zero[kQIters > 0 ? kQIters : 1];        // a zero-point chunk (else scales)
  bool q_col_ok[kQIters > 0 ? kQIters : 1];

  LLMK_DEVICE WoLoader(const WeightOnlyKernelParams<T>& p, int block_m, int block_n) {
    const int tid = static_cast<int>(threadIdx.x);
    {
      const int row = tid / kAPerRow;
      a_col = (tid % kAPerRow) * 8;
      a_src = p.a + static_cast<std::int64_t>(block_m + row) * p.lda + a_col;
      a_stride = static_cast<std::int64_t>(kARowsPerIter) * p.lda;
      const int rows_left = min(p.m - block_m, Cfg::BM) - row;  // this thread's rows are row + i R, i >= 0
      a_rows = rows_left > 0 ? ceil_div(rows_left, kARowsPerIter) : 0;
    }
    const int strips = (p.n + 15) / 16;
    w_tiles_k = (p.k + kTileK - 1) / kTileK;
#pragma unroll
    for (int i = 0; i < kWIters; ++i) {
      const int c = tid + i * Cfg::kThreads;
      const int strip = block_n / 16 + c / kWPerRow, rem = c % kWPerRow;
      const bool ok = c < kWChunks && strip < strips;
      w_tk[i] = ok ? rem / 32 : (1 << 30);
      w_src[i] =
          p.w + (ok ? (static_cast<std::int64_t>(strip) * w_tiles_k + rem / 32) * 512 + (rem % 32) * 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < kQIters; ++i) {
      const int c = tid + i * Cfg::kThreads;
      const int j = c / kQPerGroup, r = c % kQPerGroup;
      q_group[i] = c < kQChunks ? j : Cfg::kQGroups;
      q_zero[i] = r >= kScaleChunks;
      const int col = block_n + (q_zero[i] ? (r - kScaleChunks) * 16 : r * 8);
      q_col_ok[i] = c < kQChunks && col < p.n && (!q_zero[i] || p.zeros != nullptr);
      q_src[i] =
          q_zero[i] ? static_cast<const void*>((p.zeros != nullptr ? p.zeros : p.w) + (q_col_ok[i] ? col : 0))
                    : static_cast<const void*>(p.scales + (q_col_ok[i] ? col : 0));
    }
  }

  /// Issues the copies of slice `kt` into ring stage `stage` (no commit).
  LLMK_DEVICE void load(const WeightOnlyKernelParams<T>& p, Ring& ring, int stage, int kt) const {
    const int tid = static_cast<int>(threadIdx.x);
    const int k0 = kt * Cfg::BK, k_left = p.k - k0;
    const bool a_k_ok = a_col < k_left;
#pragma unroll
    for (int i = 0; i < kAIters; ++i) {
      const int c = tid + i * Cfg::kThreads;
      if (kAChunks % Cfg::kThreads != 0 && c >= kAChunks) break;
      const int row = c / kAPerRow;
      arch::cp_async_cg16_zfill(&ring.a[stage][row * Cfg::kSmemRowA + a_col], a_src + i * a_stride + k0,
                                a_k_ok && i < a_rows ? 16 : 0);
    }
    const int tk0 = kt * kTilesK;
#pragma unroll
    for (int i = 0; i < kWIters; ++i) {
      const int c = tid + i * Cfg::kThreads;
      if (kWChunks % Cfg::kThreads != 0 && c >= kWChunks) break;
      arch::cp_async_cg16_zfill(&ring.w[stage][c * 16], w_src[i] + static_cast<std::int64_t>(tk0) * 512,
                                tk0 + w_tk[i] < w_tiles_k ? 16 : 0);
    }
    if constexpr (kStagedQuant) {
      const int g0 = static_cast<int>(p.group.divide(static_cast<std::uint32_t>(k0)));
      const int g_last =
          static_cast<int>(p.group.divide(static_cast<std::uint32_t>(min(k0 + Cfg::BK, p.k) - 1)));
#pragma unroll
      for (int i = 0; i < kQIters; ++i) {
        const int c = tid + i * Cfg::kThreads;
        if (kQChunks % Cfg::kThreads != 0 && c >= kQChunks) break;
        const int j = q_group[i], r = c % kQPerGroup;
        const bool ok = q_col_ok[i] && g0 + j <= g_last;
        const std::int64_t row = ok ? static_cast<std::int64_t>(g0 + j) * p.n : 0;
        void* dst = q_zero[i] ? static_cast<void*>(&ring.qz[stage][j * Cfg::BN + (r - kScaleChunks) * 16])
                              : static_cast<void*>(&ring.qs[stage][j * Cfg::BN + r * 8]);
        const void* src = q_zero[i]
                              ? static_cast<const void*>(static_cast<const std::uint8_t*>(q_src[i]) + row)
                              : static_cast<const void*>(static_cast<const T*>(q_src[i]) + row);
        arch::cp_async_cg16_zfill(dst, src, ok ? 16 : 0);
      }
    }
  }
};

}  // namespace detail

/// The kernel: one block per BM x BN tile of D and split of K (blockIdx.x over N tiles, y over M tiles, z
/// over splits). kStagedQuant (G % 64 == 0): scales and zero points arrive through the cp.async ring with
/// each slice (no global load in the main loop) and a warp's run of k16 steps changes group at most once, at
/// its middle (runs of 8 steps; runs of 4 lie in one group); otherwise each lane loads them from global
/// memory when its group changes, at any step. Launched (with its arguments checked) by weight_only_gemm:
/// call that (example and errors there), not the kernel.
// Minimum blocks per SM 2 for the 128-thread tiles (no register cap below 255); 1 for the 256-thread large
// tile, whose 64 x 32 warp tiles need more than the 128 registers two blocks would leave (sm_80 spilled at
// 128).
template <class T, int kBits, class Cfg, bool kStagedQuant = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kThreads >= 256 ? 1 : 2)
    weight_only_gemm_kernel(detail::WeightOnlyKernelParams<T> p) {
  using Smem = typename Cfg::template SharedStorage<kBits, kStagedQuant>;
  using Mma = typename arch::MmaF32For<T>::Atom;
  constexpr int kTileK = 256 / kBits, kTilesK = Cfg::BK / kTileK, kStepsPerTile = kTileK / 16;
  constexpr int kS = Cfg::kStepsPerWarp, kStages = Smem::kStages;
  static_assert(!kStagedQuant || kS == 4 || kS == 8,
                "staged scales handle runs of 4 k16 steps (one group) or 8 (at most one group change)");
  struct alignas(16) Words {
    std::uint32_t w[4];
  };
  auto& smem = shared_storage<Smem>();
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warp_k = warp / (Cfg::WarpsM * Cfg::WarpsN), warp_mn = warp % (Cfg::WarpsM * Cfg::WarpsN);
  const int warp_m = warp_mn / Cfg::WarpsN, warp_n = warp_mn % Cfg::WarpsN;
  const int block_m = static_cast<int>(blockIdx.y) * Cfg::BM,
            block_n = static_cast<int>(blockIdx.x) * Cfg::BN;
  const int k_tiles = ceil_div(p.k, Cfg::BK);
  const int kt_begin = static_cast<int>(blockIdx.z) * p.k_tiles_per_split;
  const int kt_end = min(k_tiles, kt_begin + p.k_tiles_per_split);
  const int g = lane / 4;
  const int group_steps = static_cast<int>(p.group.divisor) / 16;
  // The zero point without zero points (staged: added to the zero-filled qz).
  const std::uint32_t zero_bias = p.zeros != nullptr ? 0u : (kBits == 4 ? 8u : 128u);
  const detail::WoLoader<Cfg, kBits, T, kStagedQuant> loader(p, block_m, block_n);

  float acc[Cfg::kMmaM][Cfg::kMmaN][4];
#pragma unroll
  for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
    for (int ni = 0; ni < Cfg::kMmaN; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;

  detail::WoColumnQuant quant[Cfg::kMmaN];
  int current_group = -1;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (kt_begin + s < kt_end) loader.load(p, smem.ring, s, kt_begin + s);
    arch::cp_async_commit();
  }
  int read_stage = 0, write_stage = kStages - 1;
  for (int kt = kt_begin; kt < kt_end; ++kt) {
    // Slice kt has landed once at most Stages - 2 newer groups are pending; the barrier publishes every
    // thread's copies and frees the slot the next copies overwrite (read in iteration kt - 1).
    arch::cp_async_wait<kStages - 2>();
    __syncthreads();
    if (kt + kStages - 1 < kt_end) loader.load(p, smem.ring, write_stage, kt + kStages - 1);
    arch::cp_async_commit();

    // This warp's run: k16 steps [warp_k * kS, warp_k * kS + kS) of the slice.
    const int k_first = kt * Cfg::BK + warp_k * kS * 16;
    if (k_first < p.k) {  // uniform over the warp
      const std::uint16_t* a_tile = smem.ring.a[read_stage];
      const std::uint8_t* w_tile = smem.ring.w[read_stage];
      // The group of the run's first step; `boundary` is the step of the run where the next group starts.
      // Staged (G % 64 == 0, runs starting at multiples of 64) a run of 4 steps is in one group and a run of
      // 8 changes group at most once, at step 4.
      const auto [first_group, rem] = p.group.divmod(static_cast<std::uint32_t>(k_first));
      int group = static_cast<int>(first_group);
      int boundary = (static_cast<int>(p.group.divisor) - static_cast<int>(rem)) / 16;
      // Staged: the constants of `group` from its row in this stage's qs / qz. Any stage holding the group
      // holds the same values, so the constants survive stage changes. Without zero points qz holds zeros
      // (nothing was copied): adding the default zero point keeps one branch-free path.
      const auto load_staged_quant = [&](int slot) {
#pragma unroll
        for (int ni = 0; ni < Cfg::kMmaN; ++ni) {
          const int c = slot * Cfg::BN + warp_n * Cfg::WN + ni * 8 + g;
          T sv;
          sv.bits = smem.ring.qs[read_stage][c];
          quant[ni] = detail::wo_column_quant<T, kBits>(sv, smem.ring.qz[read_stage][c] + zero_bias);
        }
      };
      if (group != current_group) {
        current_group = group;
        if constexpr (kStagedQuant) {
          load_staged_quant(group -
                            static_cast<int>(p.group.divide(static_cast<std::uint32_t>(kt * Cfg::BK))));
        } else {
#pragma unroll
          for (int ni = 0; ni < Cfg::kMmaN; ++ni)
            quant[ni] =
                detail::wo_load_column_quant<T, kBits>(p, group, block_n + warp_n * Cfg::WN + ni * 8 + g);
        }
      }
      Words b_words[Cfg::kTilesN];
#pragma unroll
      for (int ss = 0; ss < kS; ++ss) {
        if constexpr (!kStagedQuant) {
          if (ss > 0) {
            if (k_first + 16 * ss >= p.k) break;  // partial last slice (uniform over the warp)
            if (ss == boundary) {
              ++group;
              boundary += group_steps;
              current_group = group;
#pragma unroll
              for (int ni = 0; ni < Cfg::kMmaN; ++ni)
                quant[ni] =
                    detail::wo_load_column_quant<T, kBits>(p, group, block_n + warp_n * Cfg::WN + ni * 8 + g);
            }
          }
        }
        if constexpr (kStagedQuant && kS == 8) {
          if (ss == 4) {  // uniform over the warp
            // G % 64 == 0 and K % G == 0 make K a multiple of 64: a run is inside K, or its first half is.
            if (k_first + 64 >= p.k) break;
            if (boundary == 4) {
              ++group;
              current_group = group;
              load_staged_quant(group -
                                static_cast<int>(p.group.divide(static_cast<std::uint32_t>(kt * Cfg::BK))));
            }
          }
        }
        const int step = warp_k * kS + ss;
        // B words: one 16-byte load per lane per packed tile (4 steps of 4-bit, 2 of 8-bit).
        if (ss % kStepsPerTile == 0) {
#pragma unroll
          for (int tn = 0; tn < Cfg::kTilesN; ++tn) {
            const int tile = (warp_n * Cfg::kTilesN + tn) * kTilesK + step / kStepsPerTile;
            b_words[tn] = *reinterpret_cast<const Words*>(w_tile + tile * 512 + lane * 16);
          }
        }
        // A fragments: lane l addresses row l % 16 and 8-column half l / 16 of each 16 x 16 tile.
        std::uint32_t a_frag[Cfg::kMmaM][4];
#pragma unroll
        for (int mi = 0; mi < Cfg::kMmaM; ++mi) {
          const int row = warp_m * Cfg::WM + mi * 16 + (lane % 16);
          arch::LDSM_x4::copy(&a_tile[row * Cfg::kSmemRowA + step * 16 + (lane / 16) * 8], a_frag[mi][0],
                              a_frag[mi][1], a_frag[mi][2], a_frag[mi][3]);
        }
        std::uint32_t b_frag[Cfg::kMmaN][2];
#pragma unroll
        for (int tn = 0; tn < Cfg::kTilesN; ++tn) {
          if constexpr (kBits == 4) {
            detail::wo_dequant_word4<T>(b_words[tn].w[ss % 4], quant[2 * tn], quant[2 * tn + 1],
                                        b_frag[2 * tn], b_frag[2 * tn + 1]);
          } else {
#pragma unroll
            for (int j = 0; j < 2; ++j)
              detail::wo_dequant_word8<T>(b_words[tn].w[2 * (ss % 2) + j], quant[2 * tn + j],
                                          b_frag[2 * tn + j]);
          }
        }
#pragma unroll
        for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
          for (int ni = 0; ni < Cfg::kMmaN; ++ni) Mma::fma(acc[mi][ni], a_frag[mi], b_frag[ni], acc[mi][ni]);
      }
    }
    read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
    write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
  }

  // Warps splitting K: warps 1.. of each (warp_m, warp_n) hand their partial sums to warp 0 through shared
  // memory (the ring, now idle), summed in warp_k order: deterministic.
  const bool owner = warp_k == 0;
  if constexpr (Cfg::WarpsK > 1) {
    constexpr int kFrag = Cfg::kMmaM * Cfg::kMmaN * 4;
    arch::cp_async_wait_all();
    __syncthreads();  // every warp is done with the ring
    if (!owner) {
      float* dst = smem.red + ((warp_k - 1) * Cfg::WarpsM * Cfg::WarpsN + warp_mn) * 32 * kFrag;
#pragma unroll
      for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
        for (int ni = 0; ni < Cfg::kMmaN; ++ni)
#pragma unroll
          for (int r = 0; r < 4; ++r) dst[((mi * Cfg::kMmaN + ni) * 4 + r) * 32 + lane] = acc[mi][ni][r];
    }
    __syncthreads();
    if (owner) {
      for (int wk = 1; wk < Cfg::WarpsK; ++wk) {
        const float* src = smem.red + ((wk - 1) * Cfg::WarpsM * Cfg::WarpsN + warp_mn) * 32 * kFrag;
#pragma unroll
        for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
          for (int ni = 0; ni < Cfg::kMmaN; ++ni)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[mi][ni][r] += src[((mi * Cfg::kMmaN + ni) * 4 + r) * 32 + lane];
      }
    }
  }

  const int t = lane % 4;
  // Split-K: publish this split's partial tile; the last block to arrive sums all splits in split order
  // (split_k.cuh) and stores D itself.
  if (gridDim.z > 1) {
    if (owner)
      detail::split_k_store_partial(p.partials + static_cast<std::int64_t>(blockIdx.z) * p.m * p.ldp, p.ldp,
                                    p.m, block_m + warp_m * Cfg::WM, block_n + warp_n * Cfg::WN, acc);
    const int tile = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x);
    if (!detail::split_k_publish(&p.arrivals[tile], p.tag, &smem.last_split)) return;
    detail::split_k_reduce<Cfg::kThreads, Cfg::BM, Cfg::BN>(
        p.partials, p.ldp, p.m, p.n, block_m, block_n, static_cast<int>(gridDim.z),
        [&](int row, int col, const float(&sum)[4], int cols) {
          detail::wo_store_reduced(p.d, p.ldd, p.bias, p.pair_store, row, col, sum, cols);
        });
    return;
  }

  // Epilogue: D = T(acc + bias), accumulator layout rows g / g + 8, columns 2t, 2t + 1.
  if (!owner) return;
#pragma unroll
  for (int ni = 0; ni < Cfg::kMmaN; ++ni) {
    const int col = block_n + warp_n * Cfg::WN + ni * 8 + 2 * t;
    if (col >= p.n) continue;
    const bool has_second = col + 1 < p.n;
    float b0 = 0.0f, b1 = 0.0f;
    if (p.bias != nullptr) {
      b0 = p.bias[col].to_float();
      if (has_second) b1 = p.bias[col + 1].to_float();
    }
#pragma unroll
    for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = block_m + warp_m * Cfg::WM + mi * 16 + g + hr * 8;
        if (row >= p.m) continue;
        const float v0 = acc[mi][ni][hr * 2] + b0, v1 = acc[mi][ni][hr * 2 + 1] + b1;
        T* out = p.d + static_cast<std::int64_t>(row) * p.ldd + col;
        if (has_second && p.pair_store) {
          const std::uint32_t packed =
              std::is_same_v<T, half> ? arch::cvt_f32x2_to_f16x2(v0, v1) : arch::cvt_f32x2_to_bf16x2(v0, v1);
          *reinterpret_cast<std::uint32_t*>(out) = packed;
        } else {
          out[0] = T(v0);
          if (has_second) out[1] = T(v1);
        }
      }
  }
}
}  // namespace llmk::gemm
