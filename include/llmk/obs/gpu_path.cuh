// llmk/obs/gpu_path.cuh: what the GPU paths of GPTQ (llmk/obs/gptq_gpu.cuh) and SparseGPT
// (llmk/obs/sparsegpt_gpu.cuh) share: the fused column-loop kernel, the grid kernel, the small O(d^2) glue
// kernels, the damped inverse on device memory, and the driver that runs the phases. Users call the two
// entries; this header is their machinery.
//
// The phases (the same math and order as the host paths, llmk/obs/gptq.hpp and sparsegpt.hpp):
//   prepare      input checks (a kernel finds the first non-finite w / h element), diag H to the host (dead
//                columns), the act-order permutation on the device (a stable descending radix sort of diag H
//                with the dead columns fixed, llmk::device::sort_pairs), diag H in that order back to the
//                host (the damping mean), W and H permuted into the workspace (dead columns fixed on the
//                way), grids from the original weights (per-channel, static groups) by a warp-per-(group,
//                row) kernel.
//   inverse      damping + Cholesky + inverse + upper Cholesky of H^-1 through the backend on device memory,
//                with damped_inverse's retry policy (llmk/obs/obs.hpp); the O(d^2) glue (copy + damp, weak
//                pivot, finiteness, lower-triangle zeroing) is small kernels plus d floats to the host.
//   column loop  per block [i1, i2): ONE launch of column_loop_kernel. Every CTA stages U[i1:i2, i1:i2]
//                (<= 128 x 128 fp32 = 64 KiB, the >48 KiB opt-in of llmk::launch) in shared memory once; a
//                warp owns a row: lane l holds the row's block columns l, l + 32, l + 64, l + 96 in registers
//                (a warp reads a row of U contiguously: conflict-free), and for j in the block: broadcast w_j
//                (shuffle), quantize / prune, e = (w_j - q) / U_jj, w_t -= e U_jt for t > j. Warps loop over
//                several rows, so U is staged once per CTA for many rows.
//   trailing     W[:, i2:] -= Err U[i1:i2, i2:] through the backend's GEMM on device memory.
//   loss         1/2 tr((W - Q) H (W - Q)^T): E = W - Q is written by the column loop (original column
//                order), EH = E H through the backend's GEMM, then a warp-per-row fp64 reduction.
// The stream is synchronized at the phase boundaries (and around each block's launch and GEMM) to fill
// ObsTimings; the backend must run on the same stream (CudaLinalgBackend(stream)).
//
// Block size: the kernel holds at most 128 columns (kFusedMaxBlock), and a dynamic group (GPTQ's grid set
// when its first column is reached) must never straddle a block except starting at its first column, so
// its columns past the block are current in global W without the host path's extra GEMM. The block size used
// is the largest bs <= min(block_size, cols, 128) (n:m: the host's rounding to a multiple of m first) with
//   group size G <= bs: bs % G == 0,     G > bs: G % bs == 0,     n:m: bs % m == 0.
// When that equals the host path's block size, the simulator (host backend) reproduces the host path bit for
// bit; otherwise GPTQ's result differs by fp32 rounding only (lazy batches do not change the math), while
// SparseGPT's unstructured masks are chosen per block and may differ (the reports give the block size used).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "llmk/config.cuh"
#include "llmk/core/device_algorithms.cuh"
#include "llmk/core/status.cuh"
#include "llmk/obs/linalg.hpp"
#include "llmk/obs/obs.hpp"
#include "llmk/obs/pruning.hpp"
#include "llmk/obs/quantizer.hpp"
#include "llmk/quant/scheme.cuh"

#if defined(LLMK_HOST_ONLY)
#error "llmk/obs/gpu_path.cuh holds kernels: build with nvcc or the simulator (LLMK_SIM)"
#endif

#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/vector.cuh"

namespace llmk::obs {

/// Most columns one fused column-loop launch handles (the U block in shared memory: 128 x 128 fp32).
inline constexpr std::int64_t kFusedMaxBlock = 128;

namespace detail {

inline constexpr int kFusedSlots = static_cast<int>(kFusedMaxBlock / 32);  // block columns per lane
inline constexpr int kFusedWarps = 8;                                      // rows in flight per CTA
inline constexpr unsigned kWarpMask = 0xffffffffu;
inline constexpr int kGlueThreads = 256;

// kPruneUnstructured: per row, selected in the column loop; kPruneBlock: one candidate set of all rows of the
// block (SparseGPT's reference rule), selected by block_scores_kernel + llmk::device::lowest_k_mask first.
enum PruneMode : int { kPruneNone = 0, kPruneUnstructured = 1, kPruneNM = 2, kPruneBlock = 3 };

// ---- device helpers

LLMK_HOST_DEVICE double pow_d(double x, double y) {
#if LLMK_DEVICE_PASS
  return ::pow(x, y);
#else
  return std::pow(x, y);
#endif
}

// v[k] for a warp-uniform runtime k, without indexing a register array dynamically (no local memory).
LLMK_DEVICE float pick_slot(const float (&v)[kFusedSlots], int k) {
  float r = v[0];
#pragma unroll
  for (int i = 1; i < kFusedSlots; ++i)
    if (k == i) r = v[i];
  return r;
}

LLMK_DEVICE float warp_min(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(kWarpMask, v, offset);
    v = o < v ? o : v;
  }
  return v;
}
LLMK_DEVICE float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(kWarpMask, v, offset);
    v = o > v ? o : v;
  }
  return v;
}
// Butterfly sum: a + b is commutative, so every lane ends with the same bits (warp-uniform decisions).
LLMK_DEVICE double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kWarpMask, v, offset);
  return v;
}

/// How a grid is chosen (GptqOptions' min/max or MSE clip search, and the symmetric grid).
struct GridChoice {
  int mse;
  int grid;
  double maxshrink;
  double norm;
  int full_range;  ///< symmetric Q: SymmetricGrid::kFullRange (1) or kAbsmax (0); ignored when asymmetric
};

template <class Q>
LLMK_HOST_DEVICE quant::QuantParams params_of_range(float lo, float hi, int full_range) {
  if constexpr (Q::kAsymmetric)
    return Q::params_from_range(lo, hi);
  else
    return symmetric_params<Q>(quant::fabs_f(lo) > quant::fabs_f(hi) ? quant::fabs_f(lo) : quant::fabs_f(hi),
                               full_range != 0);
}

// The grid of one group, computed by a whole warp: visit(f) calls f(v) for this lane's share of the group's
// values. The same arithmetic as detail::group_params (llmk/obs/obs.hpp): the finite min/max
// (MinMaxCalibrator; none finite: [0, 0]) or llmk::quant::mse_clip_search (candidates p = 1 - i / grid, fp64
// error sums, strict < keeps the first best). The MSE sums are per lane then a butterfly: the same terms as
// the host's sequential sum in another order (a near-tie may pick the neighbouring candidate on the GPU).
template <class Q, class Visit>
LLMK_DEVICE quant::QuantParams warp_group_params(const GridChoice& g, Visit&& visit) {
  const float inf = __int_as_float(0x7f800000);
  float lo = inf, hi = -inf;
  visit([&](float v) {
    if (!quant::is_finite(v)) return;
    v = v + 0.0f;  // -0 -> +0: lanes agree on the sign of a zero extreme
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  });
  lo = warp_min(lo);
  hi = warp_max(hi);
  if (lo > hi) lo = hi = 0.0f;  // nothing finite: MinMaxCalibrator's empty range
  if (!g.mse) return params_of_range<Q>(lo, hi, g.full_range);
  const int steps = static_cast<int>(g.maxshrink * g.grid) > 1 ? static_cast<int>(g.maxshrink * g.grid) : 1;
  quant::QuantParams best{1.0f, 0};
  double best_err = static_cast<double>(inf);  // mse_clip_search's start: +inf
  for (int i = 0; i < steps; ++i) {
    const double p = 1.0 - static_cast<double>(i) / g.grid;
    const quant::QuantParams cand =
        params_of_range<Q>(static_cast<float>(p * lo), static_cast<float>(p * hi), g.full_range);
    double err = 0.0;
    visit([&](float v) {
      if (!quant::is_finite(v)) return;
      double d = static_cast<double>(Q::dequantize(Q::quantize(v, cand), cand)) - v;
      d = d < 0.0 ? -d : d;
      err += g.norm == 2.0 ? d * d : pow_d(d, g.norm);
    });
    err = warp_sum(err);
    if (err < best_err) {
      best_err = err;
      best = cand;
    }
  }
  return best;
}

// ---- glue kernels (O(d^2), grid-stride over [rows, cols])

inline constexpr int kGlueElementsPerThread = 8;  // fewer, busier threads (the simulator's cost is threads)

// A 1-D grid for for_each_element over [rows, cols].
inline dim3 glue_grid(std::int64_t rows, std::int64_t cols) {
  const std::int64_t blocks = ceil_div<std::int64_t>(rows * cols, kGlueThreads * kGlueElementsPerThread);
  return dim3(static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, 4096)));
}

// f(r, c) for every element of [rows, cols], grid-stride over the row-major flattening (coalesced).
template <class F>
LLMK_DEVICE void for_each_element(std::int64_t rows, std::int64_t cols, F&& f) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols;
       i += stride)
    f(i / cols, i % cols);
}

// The glue kernels are templates on the element type (T = float here) so that this header's kernels have
// inline linkage: an engine may include it from several translation units.

// *first = min over non-finite a[r, c] of r * cols + c (left alone when all are finite).
template <class T>
__global__ void __launch_bounds__(kGlueThreads)
    first_nonfinite_kernel(const T* a, std::int64_t rows, std::int64_t cols, std::int64_t lda,
                           unsigned long long* first) {
  for_each_element(rows, cols, [&](std::int64_t r, std::int64_t c) {
    if (!quant::is_finite(a[r * lda + c])) atomicMin(first, static_cast<unsigned long long>(r * cols + c));
  });
}

// out[i] = a[i, i].
template <class T>
__global__ void __launch_bounds__(kGlueThreads)
    gather_diag_kernel(const T* a, std::int64_t d, std::int64_t lda, T* out) {
  for_each_element(1, d, [&](std::int64_t r, std::int64_t c) { out[r + c] = a[c * lda + c]; });
}

// Act-order's sort input: keys[c] = H_cc with a dead column's 0 read as 1 (fix_dead_columns, as the host
// check's copy), columns[c] = c (the identity permutation when act-order is off).
template <class T>
__global__ void __launch_bounds__(kGlueThreads)
    act_order_keys_kernel(const T* diag, std::int64_t d, T* keys, std::int32_t* columns) {
  for_each_element(1, d, [&](std::int64_t, std::int64_t c) {
    const T v = diag[c];
    keys[c] = v == T(0) ? T(1) : v;
    columns[c] = static_cast<std::int32_t>(c);
  });
}

// g_idx[perm[j]] = (by_position ? j : perm[j]) / G: GPTQ's group of each original column (by processing
// position under act-order with dynamic groups, else by the column itself).
template <int kUnused = 0>
__global__ void __launch_bounds__(kGlueThreads)
    group_index_kernel(const std::int32_t* perm, std::int64_t d, std::int64_t group, bool by_position,
                       std::int32_t* g_idx) {
  for_each_element(1, d, [&](std::int64_t, std::int64_t j) {
    const std::int64_t c = perm[j];
    g_idx[c] = static_cast<std::int32_t>((by_position ? j : c) / group);
  });
}

// W in processing order with dead columns (H_cc == 0) zeroed: wp[r, j] = w[r, perm[j]].
template <class T>
__global__ void __launch_bounds__(kGlueThreads)
    permute_weights_kernel(const T* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw, const T* h,
                           std::int64_t ldh, const std::int32_t* perm, T* wp, std::int64_t ldp) {
  for_each_element(rows, cols, [&](std::int64_t r, std::int64_t c) {
    const std::int64_t src = perm[c];
    wp[r * ldp + c] = h[src * ldh + src] == 0.0f ? 0.0f : w[r * ldw + src];
  });
}

// H in processing order, through its symmetric part as the host paths use it (detail::dense_copies), dead
// diagonals set to 1: hp[i, j] = (h[perm[i], perm[j]] + h[perm[j], perm[i]]) / 2.
template <class T>
__global__ void __launch_bounds__(kGlueThreads)
    permute_hessian_kernel(const T* h, std::int64_t d, std::int64_t ldh, const std::int32_t* perm, T* hp,
                           std::int64_t ldp) {
  for_each_element(d, d, [&](std::int64_t r, std::int64_t c) {
    const std::int64_t pr = perm[r], pc = perm[c];
    const T v = 0.5f * (h[pr * ldh + pc] + h[pc * ldh + pr]);
    hp[r * ldp + c] = r == c && v == 0.0f ? 1.0f : v;
  });
}

// a = h + damp I, the diagonal as dampen() computes it (fp64 sum, one rounding).
template <class T>
__global__ void __launch_bounds__(kGlueThreads)
    damped_copy_kernel(const T* h, std::int64_t d, std::int64_t ldh, double damp, T* a, std::int64_t lda) {
  for_each_element(d, d, [&](std::int64_t r, std::int64_t c) {
    const T v = h[r * ldh + c];
    a[r * lda + c] = r == c ? static_cast<T>(static_cast<double>(v) + damp) : v;
  });
}

// The strictly lower triangle of a becomes 0 (U's storage after the upper Cholesky factorization).
template <class T>
__global__ void __launch_bounds__(kGlueThreads) zero_lower_kernel(T* a, std::int64_t d, std::int64_t lda) {
  for_each_element(d, d, [&](std::int64_t r, std::int64_t c) {
    if (c < r) a[r * lda + c] = 0.0f;
  });
}

// out[r] = sum_c e[r, c] * eh[r, c] in fp64 (one warp per row).
template <class T>
__global__ void __launch_bounds__(kGlueThreads)
    row_dot_kernel(const T* e, const T* eh, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                   double* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (kGlueThreads / 32);
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * (kGlueThreads / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    double s = 0.0;
    for (std::int64_t c = lane; c < cols; c += 32) s += static_cast<double>(e[r * ld + c]) * eh[r * ld + c];
    s = warp_sum(s);
    if (lane == 0) out[r] = s;
  }
}

// ---- grids from the original weights (per-channel, static groups)

// One warp per (group g, row r): the grid of w[r, g G .. g G + G) with dead columns read as 0, written to
// scales / zeros [g * rows + r] (unsigned zero-point codes, as QuantizedLayer).
template <class Q>
__global__ void __launch_bounds__(kGlueThreads)
    static_grid_kernel(const float* w, std::int64_t rows, std::int64_t ldw, const float* h, std::int64_t ldh,
                       std::int64_t groups, std::int64_t group_size, GridChoice choice, float* scales,
                       std::uint8_t* zeros) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (kGlueThreads / 32);
  for (std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * (kGlueThreads / 32) + threadIdx.x / 32;
       item < groups * rows; item += warps) {
    const std::int64_t g = item / rows, r = item % rows, c0 = g * group_size;
    const quant::QuantParams p = warp_group_params<Q>(choice, [&](auto&& f) {
      for (std::int64_t c = c0 + lane; c < c0 + group_size; c += 32)
        f(h[c * ldh + c] == 0.0f ? 0.0f : w[r * ldw + c]);
    });
    if (lane == 0) {
      scales[item] = p.scale;
      zeros[item] = static_cast<std::uint8_t>(p.zero_point + kCodeOffset<Q>);
    }
  }
}

// ---- the fused column loop

/// Arguments of one column-loop launch (block [i1, i1 + count) of the processing order).
struct ColumnLoopArgs {
  std::int64_t rows, i1, count;
  float* w;  // working weights [rows, ldw], processing order (read: the block and a group's tail)
  std::int64_t ldw;
  const float* u;  // U [cols, ldu], processing order
  std::int64_t ldu;
  float* err;  // Err [rows, lderr]: e of the block's columns
  std::int64_t lderr;
  const std::int32_t* perm;   // [cols] processing position -> original column
  const std::int32_t* g_idx;  // [cols] original column -> group (static grids; null for dynamic groups)
  // quantization
  int quantize;        // 0: kept weights stay as they are
  int dynamic_groups;  // grids set from the current weights when column j % group_size == 0 is reached
  std::int64_t group_size;
  GridChoice grid;
  float* scales;  // [groups, rows]
  std::uint8_t* zeros;
  // pruning
  int prune_mode;
  std::int64_t prune_k;  // unstructured: weights pruned from this block of every row
  int prune_n, prune_m;
  const std::uint8_t* block_keep;  // kPruneBlock: [rows, ldbk] the block's mask (1 = kept), block columns
  std::int64_t ldbk;
  // outputs, original column order
  std::uint8_t* codes;  // null when !quantize
  std::int64_t ldc;
  float* q_out;  // dequantized / pruned weights (nullable)
  std::int64_t ldq;
  std::uint8_t* mask;  // 1 = kept (nullable)
  std::int64_t ldm;
  float* e_loss;  // W - Q for the reported loss
  std::int64_t lde;
  const float* w_orig;  // the caller's weights
  std::int64_t ldwo;
  double* row_est;      // [rows] running sum of e^2 / 2
  unsigned* nonfinite;  // set to 1 when a q is not finite
};

struct ColumnLoopSmem {
  float u[kFusedMaxBlock][kFusedMaxBlock];  // U[i1 + a, i1 + b] at [a][b] (upper triangle staged)
  std::int32_t col[kFusedMaxBlock];         // original column of block column t
  std::int32_t group[kFusedMaxBlock];       // its group (static grids)
};

// SparseGPT's saliency of the current weight x of a column whose U diagonal is ut (fp32, as the host path).
LLMK_DEVICE float prune_score(float x, float ut) {
  return (x * x) / (ut * ut);
}

template <class Q>
LLMK_DEVICE void column_loop_row(const ColumnLoopArgs& a, const ColumnLoopSmem& s, std::int64_t r, int lane) {
  const int count = static_cast<int>(a.count);
  const float* wrow = a.w + r * a.ldw + a.i1;
  float w[kFusedSlots], q[kFusedSlots];
  unsigned codes = 0;                 // byte k: the unsigned code of slot k
  unsigned pruned[kFusedSlots] = {};  // warp-uniform bitmasks: bit l of pruned[k] = column l + 32 k pruned
#pragma unroll
  for (int k = 0; k < kFusedSlots; ++k) {
    const int t = lane + 32 * k;
    w[k] = t < count ? wrow[t] : 0.0f;
    q[k] = 0.0f;
  }
  auto score_slots = [&](float(&sc)[kFusedSlots]) {
#pragma unroll
    for (int k = 0; k < kFusedSlots; ++k) {
      const int t = lane + 32 * k;
      sc[k] = t < count ? prune_score(w[k], s.u[t][t]) : 0.0f;
    }
  };
  // The rank rule (llmk/obs/pruning.hpp): among candidates [t0, t0 + n), prune rank_t < k with rank_t =
  // #{u : s_u < s_t or (s_u == s_t and u < t)}.
  auto prune_lowest = [&](int t0, int n, std::int64_t k_prune) {
    float sc[kFusedSlots];
    score_slots(sc);
    int rank[kFusedSlots] = {};
    for (int uu = t0; uu < t0 + n; ++uu) {
      const float su = __shfl_sync(kWarpMask, pick_slot(sc, uu / 32), uu % 32);
#pragma unroll
      for (int k = 0; k < kFusedSlots; ++k) {
        const int t = lane + 32 * k;
        rank[k] += su < sc[k] || (su == sc[k] && uu < t) ? 1 : 0;
      }
    }
#pragma unroll
    for (int k = 0; k < kFusedSlots; ++k) {
      if (32 * k + 31 < t0 || 32 * k >= t0 + n) continue;  // warp-uniform: slot k holds no candidate
      const int t = lane + 32 * k;
      pruned[k] |= __ballot_sync(kWarpMask, t >= t0 && t < t0 + n && rank[k] < k_prune);
    }
  };
  if (a.prune_mode == kPruneUnstructured && a.prune_k > 0) prune_lowest(0, count, a.prune_k);
  if (a.prune_mode == kPruneBlock) {
#pragma unroll
    for (int k = 0; k < kFusedSlots; ++k) {
      const int t = lane + 32 * k;
      pruned[k] = __ballot_sync(kWarpMask, t < count && a.block_keep[r * a.ldbk + t] == 0);
    }
  }

  quant::QuantParams p{1.0f, 0};
  std::int32_t cur_group = -1;
  if (a.quantize && a.dynamic_groups && a.i1 % a.group_size != 0) {
    // A group that started in an earlier block (G > bs): its grid is the one that launch wrote.
    const std::int64_t at = (a.i1 / a.group_size) * a.rows + r;
    p = quant::QuantParams{a.scales[at], static_cast<std::int32_t>(a.zeros[at]) - kCodeOffset<Q>};
  }
  // The block column where the next dynamic group starts (groups start at multiples of group_size).
  std::int64_t next_group = (a.group_size - a.i1 % a.group_size) % a.group_size;
  double est = 0.0;
  for (int jj = 0; jj < count; ++jj) {
    const std::int64_t j = a.i1 + jj;
    const int slot = jj / 32, src = jj % 32;
    if (a.quantize) {
      if (a.dynamic_groups) {
        if (jj == next_group) {
          next_group += a.group_size;
          // The group's columns: this block's from the registers (current), those past the block (only when
          // it starts at the block's first column) from global W, which the trailing updates made current.
          const std::int64_t tail_end = a.group_size - (count - jj);
          p = warp_group_params<Q>(a.grid, [&](auto&& f) {
#pragma unroll
            for (int k = 0; k < kFusedSlots; ++k) {
              const int t = lane + 32 * k;
              if (t >= jj && t < count && t < jj + a.group_size) f(w[k]);
            }
            for (std::int64_t t = lane; t < tail_end; t += 32) f(wrow[count + t]);
          });
          if (lane == 0) {
            const std::int64_t at = (j / a.group_size) * a.rows + r;
            a.scales[at] = p.scale;
            a.zeros[at] = static_cast<std::uint8_t>(p.zero_point + kCodeOffset<Q>);
          }
        }
      } else if (s.group[jj] != cur_group) {
        cur_group = s.group[jj];
        const std::int64_t at = static_cast<std::int64_t>(cur_group) * a.rows + r;
        p = quant::QuantParams{a.scales[at], static_cast<std::int32_t>(a.zeros[at]) - kCodeOffset<Q>};
      }
    }
    if (a.prune_mode == kPruneNM && jj % a.prune_m == 0) prune_lowest(jj, a.prune_m, a.prune_n);

    const float x = __shfl_sync(kWarpMask, pick_slot(w, slot), src);
    bool is_pruned = false;
#pragma unroll
    for (int k = 0; k < kFusedSlots; ++k)
      if (slot == k) is_pruned = (pruned[k] >> src) & 1u;
    int code = 0;
    float qv = x;
    if (a.quantize) {
      code = is_pruned ? p.zero_point : static_cast<int>(Q::quantize(x, p));
      qv = is_pruned ? 0.0f : Q::dequantize(code, p);
    } else if (is_pruned) {
      qv = 0.0f;
    }
    const float e = (x - qv) / s.u[jj][jj];
    est += 0.5 * static_cast<double>(e) * e;
#pragma unroll
    for (int k = 0; k < kFusedSlots; ++k) {
      const int t = lane + 32 * k;
      if (t > jj && t < count) w[k] -= e * s.u[jj][t];
      if (t == jj) {  // the slot of column j now holds its error; its q and code wait for the store
        w[k] = e;
        q[k] = qv;
        codes |= static_cast<unsigned>(code + kCodeOffset<Q>) << (8 * k);
      }
    }
  }

  bool bad = false;
#pragma unroll
  for (int k = 0; k < kFusedSlots; ++k) {
    const int t = lane + 32 * k;
    if (t >= count) continue;
    const std::int64_t c = s.col[t];
    // Read the original weight before any output store: an output may alias w (in place).
    a.e_loss[r * a.lde + c] = a.w_orig[r * a.ldwo + c] - q[k];
    a.err[r * a.lderr + t] = w[k];
    if (a.codes != nullptr) a.codes[r * a.ldc + c] = static_cast<std::uint8_t>(codes >> (8 * k));
    if (a.q_out != nullptr) a.q_out[r * a.ldq + c] = q[k];
    if (a.mask != nullptr) a.mask[r * a.ldm + c] = ((pruned[k] >> lane) & 1u) ? 0 : 1;
    bad = bad || !quant::is_finite(q[k]);
  }
  if (__any_sync(kWarpMask, bad) && lane == 0) atomicOr(a.nonfinite, 1u);
  if (lane == 0) a.row_est[r] = (a.i1 == 0 ? 0.0 : a.row_est[r]) + est;
}

// SparseGPT's reference mask of one block (kPruneBlock): block_scores_kernel writes the fp32 saliencies of
// all rows x the block's columns [i1, i1 + count) of the current weights (grid-stride, [rows, count]
// contiguous), then llmk::device::lowest_k_mask (CUB's radix sort on a GPU, Thrust in the simulator) keeps
// all but the k lowest by (score, row-major index): the host's rule, ties to the lower row, then column. The
// scores are non-negative floats, so their bit patterns order as they do. A template (T = float) for inline
// linkage.
template <class T>
__global__ void __launch_bounds__(kGlueThreads)
    block_scores_kernel(const T* w, std::int64_t ldw, std::int64_t rows, std::int64_t i1, std::int64_t count,
                        const T* u, std::int64_t ldu, T* scores) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * count;
       i += stride) {
    const std::int64_t r = i / count, c = i % count;
    scores[i] = prune_score(w[r * ldw + i1 + c], u[(i1 + c) * ldu + i1 + c]);
  }
}

// One launch per block: every CTA stages the block of U once, then its warps take rows
// r = blockIdx.x * 8 + warp, + gridDim.x * 8, ... (the whole loop is warp-uniform: no lane leaves early).
// The minimum of 1 block per SM is explicit: without it ptxas capped the sm_89 symmetric instances at 80
// registers and spilled; they need about 100.
template <class Q>
__global__ void __launch_bounds__(kFusedWarps * 32, 1) column_loop_kernel(const ColumnLoopArgs a) {
  ColumnLoopSmem& s = shared_storage<ColumnLoopSmem>();
  const int count = static_cast<int>(a.count);
  const int tid = static_cast<int>(threadIdx.x);
  const float* ub = a.u + a.i1 * a.ldu + a.i1;
  const bool vec = (a.i1 % 4 == 0) && (a.ldu % 4 == 0) && (count % 4 == 0) &&
                   (reinterpret_cast<std::uintptr_t>(a.u) % 16 == 0);
  if (vec) {  // 16-byte loads of the row segments that touch the upper triangle
    const int quads = count / 4;
    for (int idx = tid; idx < count * quads; idx += blockDim.x) {
      const int row = idx / quads, qd = idx % quads;
      if (4 * qd + 3 < row) continue;
      store16(&s.u[row][4 * qd], load16(ub + row * a.ldu + 4 * qd));
    }
  } else {
    for (int idx = tid; idx < count * count; idx += blockDim.x) {
      const int row = idx / count, col = idx % count;
      if (col >= row) s.u[row][col] = ub[row * a.ldu + col];
    }
  }
  for (int t = tid; t < count; t += blockDim.x) {
    const std::int32_t c = a.perm[a.i1 + t];
    s.col[t] = c;
    s.group[t] = a.g_idx != nullptr ? a.g_idx[c] : 0;
  }
  __syncthreads();
  const int lane = tid % 32, warp = tid / 32;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kFusedWarps + warp; r < a.rows;
       r += static_cast<std::int64_t>(gridDim.x) * kFusedWarps)
    column_loop_row<Q>(a, s, r, lane);
}

// The one place that picks Q at run time for the kernels (8 instantiations each). bits == 0 (no
// quantization) reuses the 4-bit symmetric instance: its Q is never called then.
inline Status launch_column_loop(int bits, bool symmetric, const ColumnLoopArgs& a, cudaStream_t stream) {
  const std::int64_t ctas = std::min<std::int64_t>(ceil_div<std::int64_t>(a.rows, kFusedWarps), 1024);
  return with_quantizer(bits == 0 ? 4 : bits, bits == 0 ? true : symmetric, [&]<class Q>() -> Status {
    return launch(column_loop_kernel<Q>, dim3(static_cast<unsigned>(ctas)), dim3(kFusedWarps * 32),
                  sizeof(ColumnLoopSmem), stream, a);
  });
}

inline Status launch_static_grid(int bits, bool symmetric, const float* w, std::int64_t rows,
                                 std::int64_t ldw, const float* h, std::int64_t ldh, std::int64_t groups,
                                 std::int64_t group_size, const GridChoice& choice, float* scales,
                                 std::uint8_t* zeros, cudaStream_t stream) {
  const std::int64_t blocks =
      std::min<std::int64_t>(ceil_div<std::int64_t>(groups * rows, kGlueThreads / 32), 4096);
  return with_quantizer(bits, symmetric, [&]<class Q>() -> Status {
    return launch(static_grid_kernel<Q>, dim3(static_cast<unsigned>(blocks)), dim3(kGlueThreads), 0, stream,
                  w, rows, ldw, h, ldh, groups, group_size, choice, scales, zeros);
  });
}

// ---- host helpers

inline Status stream_sync(cudaStream_t stream) {
#if defined(LLMK_CUDA)
  const cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaStreamSynchronize", cudaGetErrorString(e));
#else
  (void)stream;  // simulator launches are synchronous
#endif
  return {};
}

// Copies on `stream` and waits (small transfers at phase boundaries; the host buffer may be pageable).
inline Status copy_sync(void* dst, const void* src, std::size_t bytes, bool to_host, cudaStream_t stream) {
  if (bytes == 0) return {};
#if defined(LLMK_CUDA)
  const cudaError_t e =
      cudaMemcpyAsync(dst, src, bytes, to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaMemcpyAsync", cudaGetErrorString(e));
  return stream_sync(stream);
#else
  (void)to_host;
  (void)stream;
  std::memcpy(dst, src, bytes);
  return {};
#endif
}

// Index of the first non-finite element of a device matrix [rows, cols] (lda), or -1. `flag` is one
// unsigned long long of device scratch.
inline Status first_nonfinite(const float* a, std::int64_t rows, std::int64_t cols, std::int64_t lda,
                              unsigned long long* flag, cudaStream_t stream, std::int64_t* first) {
  const unsigned long long none = std::numeric_limits<unsigned long long>::max();
  LLMK_RETURN_IF_ERROR(copy_sync(flag, &none, sizeof(none), false, stream));
  LLMK_RETURN_IF_ERROR(launch(first_nonfinite_kernel<float>, glue_grid(rows, cols), dim3(kGlueThreads), 0,
                              stream, a, rows, cols, lda, flag));
  unsigned long long got = 0;
  LLMK_RETURN_IF_ERROR(copy_sync(&got, flag, sizeof(got), true, stream));
  *first = got == none ? -1 : static_cast<std::int64_t>(got);
  return {};
}

inline Status device_diag(const float* a, std::int64_t d, std::int64_t lda, float* scratch,
                          std::vector<float>* out, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(
      launch(gather_diag_kernel<float>, glue_grid(1, d), dim3(kGlueThreads), 0, stream, a, d, lda, scratch));
  out->resize(static_cast<std::size_t>(d));
  return copy_sync(out->data(), scratch, static_cast<std::size_t>(d) * sizeof(float), true, stream);
}

/// Device scratch the damped inverse needs besides its matrices: d floats and one flag.
struct DeviceInverseScratch {
  float* diag;
  unsigned long long* flag;
};

// The prepare phase's input checks, shared by the GPU entries: w and h finite (the first bad element is
// named), diag H non-negative; returns diag H on the host with the dead columns (H_ii == 0) set to 1 and
// counted (fix_dead_columns; the weight columns are zeroed by the entries' copy kernels).
inline Status check_inputs_read_diag(const float* w, std::int64_t n, std::int64_t d, std::int64_t ldw,
                                     const float* h, std::int64_t ldh, unsigned long long* flag,
                                     float* diag_scratch, cudaStream_t stream, std::vector<float>* diag,
                                     std::int64_t* dead_columns) {
  std::int64_t bad = -1;
  LLMK_RETURN_IF_ERROR(first_nonfinite(w, n, d, ldw, flag, stream, &bad));
  if (bad >= 0)
    return Status::invalid_argument("w", str_cat("must be finite; w[", bad / d, ", ", bad % d, "] is not"));
  LLMK_RETURN_IF_ERROR(first_nonfinite(h, d, d, ldh, flag, stream, &bad));
  if (bad >= 0)
    return Status::invalid_argument("h", str_cat("must be finite; h[", bad / d, ", ", bad % d, "] is not"));
  LLMK_RETURN_IF_ERROR(device_diag(h, d, ldh, diag_scratch, diag, stream));
  for (std::int64_t i = 0; i < d; ++i)
    if ((*diag)[static_cast<std::size_t>(i)] < 0.0f)
      return Status::invalid_argument("h", str_cat("must have a non-negative diagonal; h[", i, ", ", i,
                                                   "] = ", (*diag)[static_cast<std::size_t>(i)]));
  for (float& v : *diag)
    if (v == 0.0f) {
      v = 1.0f;
      ++*dead_columns;
    }
  return {};
}

// The backend must queue its work on the GPU path's stream (kernels and factorizations are ordered by it).
inline Status check_backend_stream(const LinalgBackend& la, cudaStream_t stream) {
#if defined(LLMK_CUDA)
  if (la.uses_device_memory() && la.stream_handle() != static_cast<const void*>(stream))
    return Status::invalid_argument(
        "la", "must run on the stream given to the GPU path (construct CudaLinalgBackend(stream))");
#else
  (void)la, (void)stream;
#endif
  return {};
}

// damped_inverse (llmk/obs/obs.hpp) on device memory, InverseForm::kUpperCholesky (default) or kFull (OBS /
// OBQ, llmk/obs/obs_gpu.cuh: stops after the inverse): the same attempts, damping values, checks and report.
// h (device, [d, ldh]) is the dead-column-fixed Hessian in processing order, h_diag its diagonal on the host;
// u (device, [d, ldu]) receives U (or H^-1, both triangles). The factorizations go through `la`.
// (The retry loop mirrors obs.hpp's line for line; one template over host / device glue could serve both.)
inline Status damped_upper_cholesky_device(const float* h, const std::vector<float>& h_diag, std::int64_t d,
                                           std::int64_t ldh, const DampingOptions& opt, LinalgBackend& la,
                                           float* u, std::int64_t ldu, const DeviceInverseScratch& scratch,
                                           cudaStream_t stream, DampingReport* report,
                                           InverseForm form = InverseForm::kUpperCholesky) {
  LLMK_RETURN_IF_ERROR(check_backend_stream(la, stream));
  LLMK_RETURN_IF_ERROR(check_damping(opt));
  DampingReport rep;
  rep.dead_columns = report->dead_columns;
  std::vector<float> a_diag(static_cast<std::size_t>(d)), l_diag;
  double mean = 0.0;  // dampen(): the mean of the diagonal in fp64, in order
  for (std::int64_t i = 0; i < d; ++i) mean += h_diag[static_cast<std::size_t>(i)];
  mean /= static_cast<double>(d);
  double percdamp = opt.percdamp;
  for (int attempt = 0; attempt <= opt.max_retries; ++attempt) {
    if (attempt > 0) {
      ++rep.retries;
      percdamp = percdamp > 0.0 ? percdamp * opt.damp_growth : 1e-4;
    }
    const double damp = percdamp * mean;
    LLMK_RETURN_IF_ERROR(launch(damped_copy_kernel<float>, glue_grid(d, d), dim3(kGlueThreads), 0, stream, h,
                                d, ldh, damp, u, ldu));
    for (std::int64_t i = 0; i < d; ++i)
      a_diag[static_cast<std::size_t>(i)] =
          static_cast<float>(static_cast<double>(h_diag[static_cast<std::size_t>(i)]) + damp);
    std::int64_t failed = 0, bad = -1;
    LLMK_RETURN_IF_ERROR(la.cholesky(Uplo::kLower, d, u, ldu, &failed));
    if (failed == 0) {
      LLMK_RETURN_IF_ERROR(device_diag(u, d, ldu, scratch.diag, &l_diag, stream));
      failed = weak_pivot(l_diag.data(), a_diag.data(), d, 0);  // ld 0: l_diag is the contiguous diagonal
    }
    if (failed == 0) LLMK_RETURN_IF_ERROR(la.cholesky_inverse(Uplo::kLower, d, u, ldu, &failed));
    if (failed == 0) {
      LLMK_RETURN_IF_ERROR(first_nonfinite(u, d, d, ldu, scratch.flag, stream, &bad));
      if (bad >= 0) failed = d;
    }
    if (failed == 0 && form == InverseForm::kUpperCholesky) {
      LLMK_RETURN_IF_ERROR(la.cholesky(Uplo::kUpper, d, u, ldu, &failed));
      if (failed == 0) {
        LLMK_RETURN_IF_ERROR(
            launch(zero_lower_kernel<float>, glue_grid(d, d), dim3(kGlueThreads), 0, stream, u, d, ldu));
        LLMK_RETURN_IF_ERROR(first_nonfinite(u, d, d, ldu, scratch.flag, stream, &bad));
        if (bad >= 0) failed = d;
      }
    }
    if (failed != 0) {
      rep.failed_pivot = failed;
      continue;
    }
    rep.percdamp = percdamp;
    rep.damp = damp;
    *report = rep;
    return {};
  }
  rep.percdamp = percdamp;
  *report = rep;
  return Status::invalid_argument(
      "h", str_cat("is not positive definite even with percdamp = ", percdamp, " after ", rep.retries,
                   " retries (last failing pivot ", rep.failed_pivot, "); check the calibration data"));
}

// ---- the driver

/// What the GPTQ and SparseGPT entries ask of the driver (already validated).
struct FusedConfig {
  int bits;  // 0: no quantization
  bool symmetric;
  std::int64_t group_size;  // 0: per-channel
  bool act_order, static_groups;
  GridChoice grid;
  std::int64_t block_size;  // requested
  DampingOptions damping;
  int prune_mode;
  double sparsity;
  int prune_n, prune_m;
};

struct FusedOutputs {
  std::uint8_t* codes;
  std::int64_t ldc;
  float* scales;
  std::uint8_t* zeros;
  std::int32_t* g_idx;
  float* q_out;
  std::int64_t ldq;
  std::uint8_t* mask;
  std::int64_t ldm;
};

struct FusedReport {
  std::int64_t block_size = 0;
  std::vector<std::int32_t> order;
  double loss = 0.0, loss_estimate = 0.0;
  DampingReport damping;
  ObsTimings timings;
};

// The block size the kernel runs (file comment); 0 when none exists (n:m with m > 128).
inline std::int64_t fused_block_size(std::int64_t cols, std::int64_t requested, std::int64_t dynamic_group,
                                     std::int64_t m) {
  std::int64_t base = std::min(requested, cols);
  if (m > 0) base = std::max(m, base - base % m);  // the host path's n:m rounding
  for (std::int64_t bs = std::min(base, kFusedMaxBlock); bs >= 1; --bs) {
    if (m > 0 && bs % m != 0) continue;
    if (dynamic_group > 0 && (dynamic_group <= bs ? bs % dynamic_group != 0 : dynamic_group % bs != 0))
      continue;
    return bs;
  }
  return 0;
}

// Workspace regions, each 256-byte aligned (offsets from the workspace start).
struct FusedLayout {
  std::int64_t ldp = 0, bs = 0;
  std::size_t wp = 0, e = 0, scratch = 0, u = 0, err = 0, diag = 0, flag = 0, row_est = 0, row_dot = 0,
              perm = 0, nonfinite = 0, block_keep = 0, select_temp = 0, select_bytes = 0, order_keys = 0,
              order_sorted = 0, order_cols = 0, order_temp = 0, order_bytes = 0, total = 0;
};

// block_select: SparseGPT's block masks (kPruneBlock): the mask and lowest_k_mask's temporary storage.
inline FusedLayout fused_layout(std::int64_t rows, std::int64_t cols, std::int64_t bs,
                                bool block_select = false) {
  FusedLayout l;
  rows = std::max<std::int64_t>(rows, 0);
  cols = std::max<std::int64_t>(cols, 0);
  l.ldp = round_up<std::int64_t>(std::max<std::int64_t>(cols, 1), 4);  // 16-byte rows
  l.bs = bs;
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t start = at;
    at += (bytes + 255) / 256 * 256;
    return start;
  };
  const std::size_t mat = static_cast<std::size_t>(l.ldp) * sizeof(float);
  l.wp = take(static_cast<std::size_t>(rows) * mat);                       // working W (processing order)
  l.e = take(static_cast<std::size_t>(rows) * mat);                        // W - Q (original order)
  l.scratch = take(static_cast<std::size_t>(std::max(rows, cols)) * mat);  // permuted H, then E H
  l.u = take(static_cast<std::size_t>(cols) * mat);                        // U
  l.err = take(static_cast<std::size_t>(rows * std::max<std::int64_t>(bs, 1)) * sizeof(float));
  l.diag = take(static_cast<std::size_t>(cols) * sizeof(float));
  l.flag = take(sizeof(unsigned long long));
  l.row_est = take(static_cast<std::size_t>(rows) * sizeof(double));
  l.row_dot = take(static_cast<std::size_t>(rows) * sizeof(double));
  l.perm = take(static_cast<std::size_t>(cols) * sizeof(std::int32_t));
  l.nonfinite = take(sizeof(unsigned));
  // act-order on the device: (fixed diag H, column) pairs, the descending stable sort's outputs and temp
  l.order_keys = take(static_cast<std::size_t>(cols) * sizeof(float));
  l.order_sorted = take(static_cast<std::size_t>(cols) * sizeof(float));
  l.order_cols = take(static_cast<std::size_t>(cols) * sizeof(std::int32_t));
  std::size_t order_bytes = 0;
  // A size query runs nothing; an error here (no device) leaves 0 and the run reports it.
  (void)llmk::device::sort_pairs<float, std::int32_t>(nullptr, &order_bytes, nullptr, nullptr, nullptr,
                                                      nullptr, cols, llmk::device::SortOrder::kDescending,
                                                      nullptr);
  l.order_temp = take(order_bytes);
  l.order_bytes = order_bytes;
  if (block_select) {
    const std::int64_t cells = rows * std::max<std::int64_t>(bs, 1);
    l.block_keep = take(static_cast<std::size_t>(cells));
    std::size_t bytes = 0;
    // The size query runs nothing; an error here (no device) leaves 0 and the run reports it.
    (void)llmk::device::lowest_k_mask<unsigned>(nullptr, &bytes, nullptr, cells, 0, nullptr, nullptr);
    l.select_temp = take(bytes);
    l.select_bytes = bytes;
  }
  l.total = at;
  return l;
}

template <class T>
T* region(void* workspace, std::size_t offset) {
  return reinterpret_cast<T*>(static_cast<unsigned char*>(workspace) + offset);
}

// Checks shared by the entries: the layer, the workspace and the backend.
inline Status validate_fused_common(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                                    const float* h, std::int64_t ldh) {
  if (rows < 1) return Status::invalid_argument("rows", str_cat("must be >= 1, got ", rows));
  if (cols < 1) return Status::invalid_argument("cols", str_cat("must be >= 1, got ", cols));
  if (cols > std::numeric_limits<std::int32_t>::max())
    return Status::invalid_argument(
        "cols", str_cat("must be < 2^31 (g_idx and the permutation are int32), got ", cols));
  if (w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (ldw < cols)
    return Status::invalid_argument("ldw", str_cat("must be >= cols (cols=", cols, ", ldw=", ldw, ")"));
  if (h == nullptr) return Status::invalid_argument("h", "must not be null");
  if (ldh < cols)
    return Status::invalid_argument(
        "ldh", str_cat("must be >= cols (the Hessian is [cols, cols]; cols=", cols, ", ldh=", ldh, ")"));
  // The backend's sizes are 32-bit (LAPACK, cuSOLVER): fail here, before any output is written.
  constexpr std::int64_t kMax32 = std::numeric_limits<std::int32_t>::max();
  if (rows > kMax32) return Status::invalid_argument("rows", str_cat("must be < 2^31, got ", rows));
  if (ldw > kMax32) return Status::invalid_argument("ldw", str_cat("must be < 2^31, got ", ldw));
  if (ldh > kMax32) return Status::invalid_argument("ldh", str_cat("must be < 2^31, got ", ldh));
  LLMK_RETURN_IF_ERROR(check_device_pointer("w", w));
  LLMK_RETURN_IF_ERROR(check_device_pointer("h", h));
  return {};
}

inline Status validate_fused_resources(LinalgBackend& la, const void* workspace, std::size_t workspace_bytes,
                                       std::size_t need) {
#if defined(LLMK_CUDA)
  if (!la.uses_device_memory())
    return Status::invalid_argument(
        "la", str_cat("must operate on device memory on a GPU build (got the '", la.name(),
                      "' backend; use llmk::obs::CudaLinalgBackend from llmk/obs/linalg_cuda.cuh)"));
#else
  (void)la;  // simulator: device memory is host memory, every backend serves
#endif
  if (workspace == nullptr)
    return Status::invalid_argument("workspace", str_cat("must not be null (needs ", need, " bytes)"));
  LLMK_RETURN_IF_ERROR(check_device_pointer("workspace", workspace));
  if (reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0)
    return Status::invalid_argument("workspace", "must be 16-byte aligned");
  if (workspace_bytes < need)
    return Status::invalid_argument("workspace_bytes", str_cat("must be >= the workspace query's ", need,
                                                               " bytes, got ", workspace_bytes));
  return {};
}

inline Status run_fused(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                        const float* h, std::int64_t ldh, const FusedConfig& cfg, LinalgBackend& la,
                        const FusedOutputs& out, void* workspace, std::int64_t bs, cudaStream_t stream,
                        FusedReport* report) {
  LLMK_RETURN_IF_ERROR(check_backend_stream(la, stream));
  const std::int64_t n = rows, d = cols;
  const FusedLayout L = fused_layout(n, d, bs, cfg.prune_mode == kPruneBlock);
  float* wp = region<float>(workspace, L.wp);
  float* e = region<float>(workspace, L.e);
  float* scratch = region<float>(workspace, L.scratch);
  float* u = region<float>(workspace, L.u);
  float* err = region<float>(workspace, L.err);
  float* diag_scratch = region<float>(workspace, L.diag);
  auto* flag = region<unsigned long long>(workspace, L.flag);
  double* row_est = region<double>(workspace, L.row_est);
  double* row_dot = region<double>(workspace, L.row_dot);
  std::int32_t* perm_dev = region<std::int32_t>(workspace, L.perm);
  unsigned* nonfinite = region<unsigned>(workspace, L.nonfinite);
  std::uint8_t* block_keep = region<std::uint8_t>(workspace, L.block_keep);
  const std::int64_t ldp = L.ldp;

  FusedReport rep;
  rep.block_size = bs;
  LLMK_RETURN_IF_ERROR(stream_sync(stream));  // the timings start with the caller's earlier work done
  auto phase = std::chrono::steady_clock::now();

  // ---- prepare
  std::vector<float> diag;
  LLMK_RETURN_IF_ERROR(check_inputs_read_diag(w, n, d, ldw, h, ldh, flag, diag_scratch, stream, &diag,
                                              &rep.damping.dead_columns));
  // Processing order on the device: gptq.hpp's stable sort by descending (dead-column-fixed) diag H is
  // a stable radix sort of (diag, column) pairs; perm and g_idx never leave the device. diag_p (diag in
  // processing order) comes back for the damping's host arithmetic.
  float* order_keys = region<float>(workspace, L.order_keys);
  float* order_sorted = region<float>(workspace, L.order_sorted);
  std::int32_t* order_cols = region<std::int32_t>(workspace, L.order_cols);
  LLMK_RETURN_IF_ERROR(launch(act_order_keys_kernel<float>, glue_grid(1, d), dim3(kGlueThreads), 0, stream,
                              diag_scratch, d, order_keys, cfg.act_order ? order_cols : perm_dev));
  std::vector<float> diag_p = diag;
  if (cfg.act_order) {
    std::size_t order_bytes = L.order_bytes;
    LLMK_RETURN_IF_ERROR((llmk::device::sort_pairs<float, std::int32_t>(
        region<void>(workspace, L.order_temp), &order_bytes, order_keys, order_sorted, order_cols, perm_dev,
        d, llmk::device::SortOrder::kDescending, stream)));
    LLMK_RETURN_IF_ERROR(copy_sync(diag_p.data(), order_sorted, diag_p.size() * sizeof(float), true, stream));
  }

  const bool quantize = cfg.bits != 0;
  const bool grouped = quantize && cfg.group_size > 0;
  const std::int64_t G = grouped ? cfg.group_size : d;
  const bool static_grids = quantize && (!grouped || cfg.static_groups);
  if (quantize)
    LLMK_RETURN_IF_ERROR(launch(group_index_kernel<>, glue_grid(1, d), dim3(kGlueThreads), 0, stream,
                                perm_dev, d, G, !static_grids && cfg.act_order, out.g_idx));
  const unsigned zero = 0;
  LLMK_RETURN_IF_ERROR(copy_sync(nonfinite, &zero, sizeof(zero), false, stream));
  LLMK_RETURN_IF_ERROR(launch(permute_weights_kernel<float>, glue_grid(n, d), dim3(kGlueThreads), 0, stream,
                              w, n, d, ldw, h, ldh, perm_dev, wp, ldp));
  LLMK_RETURN_IF_ERROR(launch(permute_hessian_kernel<float>, glue_grid(d, d), dim3(kGlueThreads), 0, stream,
                              h, d, ldh, perm_dev, scratch, ldp));
  if (static_grids)
    LLMK_RETURN_IF_ERROR(launch_static_grid(cfg.bits, cfg.symmetric, w, n, ldw, h, ldh, d / G, G, cfg.grid,
                                            out.scales, out.zeros, stream));
  LLMK_RETURN_IF_ERROR(stream_sync(stream));
  rep.timings.prepare_s = seconds_since(phase);

  // ---- inverse
  phase = std::chrono::steady_clock::now();
  LLMK_RETURN_IF_ERROR(damped_upper_cholesky_device(scratch, diag_p, d, ldp, cfg.damping, la, u, ldp,
                                                    DeviceInverseScratch{diag_scratch, flag}, stream,
                                                    &rep.damping));
  LLMK_RETURN_IF_ERROR(stream_sync(stream));
  rep.timings.inverse_s = seconds_since(phase);

  // ---- column loops and trailing updates
  ColumnLoopArgs a{};
  a.rows = n;
  a.w = wp;
  a.ldw = ldp;
  a.u = u;
  a.ldu = ldp;
  a.err = err;
  a.lderr = bs;
  a.perm = perm_dev;
  a.g_idx = static_grids ? out.g_idx : nullptr;
  a.quantize = quantize ? 1 : 0;
  a.dynamic_groups = quantize && !static_grids ? 1 : 0;
  a.group_size = G;
  a.grid = cfg.grid;
  a.scales = out.scales;
  a.zeros = out.zeros;
  a.prune_mode = cfg.prune_mode;
  a.prune_n = cfg.prune_n;
  a.prune_m = cfg.prune_m;
  a.codes = quantize ? out.codes : nullptr;
  a.ldc = out.ldc;
  a.q_out = out.q_out;
  a.ldq = out.ldq;
  a.mask = out.mask;
  a.ldm = out.ldm;
  a.e_loss = e;
  a.lde = ldp;
  a.w_orig = w;
  a.ldwo = ldw;
  a.row_est = row_est;
  a.nonfinite = nonfinite;
  a.block_keep = block_keep;
  a.ldbk = 0;  // set per block (kPruneBlock)
  for (std::int64_t i1 = 0; i1 < d; i1 += bs) {
    const std::int64_t i2 = std::min(i1 + bs, d);
    a.i1 = i1;
    a.count = i2 - i1;
    a.prune_k = cfg.prune_mode == kPruneUnstructured
                    ? prune_count(cfg.sparsity, i2) - prune_count(cfg.sparsity, i1)
                    : 0;
    auto t0 = std::chrono::steady_clock::now();
    if (cfg.prune_mode == kPruneBlock) {  // the scores go to Err, which the column loop then overwrites
      const std::int64_t cells = n * (i2 - i1);
      LLMK_RETURN_IF_ERROR(launch(block_scores_kernel<float>, glue_grid(n, i2 - i1), dim3(kGlueThreads), 0,
                                  stream, wp, ldp, n, i1, i2 - i1, u, ldp, err));
      std::size_t select_bytes = L.select_bytes;
      LLMK_RETURN_IF_ERROR(llmk::device::lowest_k_mask<unsigned>(
          region<unsigned char>(workspace, L.select_temp), &select_bytes,
          reinterpret_cast<const unsigned*>(err), cells,
          prune_count(cfg.sparsity, n * i2) - prune_count(cfg.sparsity, n * i1), block_keep, stream));
      a.ldbk = i2 - i1;  // the mask is [n, count], contiguous
    }
    LLMK_RETURN_IF_ERROR(launch_column_loop(cfg.bits, cfg.symmetric, a, stream));
    LLMK_RETURN_IF_ERROR(stream_sync(stream));
    rep.timings.column_loop_s += seconds_since(t0);
    if (i2 < d) {  // the lazy trailing update, one GEMM per block
      t0 = std::chrono::steady_clock::now();
      LLMK_RETURN_IF_ERROR(la.gemm(Op::kNone, Op::kNone, n, d - i2, i2 - i1, -1.0f, err, bs,
                                   u + i1 * ldp + i2, ldp, 1.0f, wp + i2, ldp));
      LLMK_RETURN_IF_ERROR(stream_sync(stream));
      rep.timings.trailing_s += seconds_since(t0);
    }
  }
  unsigned nonfinite_host = 0;
  LLMK_RETURN_IF_ERROR(copy_sync(&nonfinite_host, nonfinite, sizeof(unsigned), true, stream));
  if (nonfinite_host != 0) return Status::internal("the GPU column loop produced non-finite weights");

  // ---- loss: 1/2 tr(E H E^T) with the caller's H, E = W - Q (written by the column loop)
  phase = std::chrono::steady_clock::now();
  LLMK_RETURN_IF_ERROR(la.gemm(Op::kNone, Op::kNone, n, d, d, 1.0f, e, ldp, h, ldh, 0.0f, scratch, ldp));
  const std::int64_t dot_blocks = std::min<std::int64_t>(ceil_div<std::int64_t>(n, kGlueThreads / 32), 4096);
  LLMK_RETURN_IF_ERROR(launch(row_dot_kernel<float>, dim3(static_cast<unsigned>(dot_blocks)),
                              dim3(kGlueThreads), 0, stream, e, scratch, n, d, ldp, row_dot));
  std::vector<double> sums(static_cast<std::size_t>(2 * n));
  LLMK_RETURN_IF_ERROR(
      copy_sync(sums.data(), row_dot, static_cast<std::size_t>(n) * sizeof(double), true, stream));
  LLMK_RETURN_IF_ERROR(
      copy_sync(sums.data() + n, row_est, static_cast<std::size_t>(n) * sizeof(double), true, stream));
  double dot = 0.0, est = 0.0;
  for (std::int64_t r = 0; r < n; ++r) {
    dot += sums[static_cast<std::size_t>(r)];
    est += sums[static_cast<std::size_t>(n + r)];
  }
  rep.loss = 0.5 * dot;
  rep.loss_estimate = est;
  rep.timings.loss_s = seconds_since(phase);
  rep.order.resize(static_cast<std::size_t>(d));  // the report's copy of the processing order
  LLMK_RETURN_IF_ERROR(
      copy_sync(rep.order.data(), perm_dev, rep.order.size() * sizeof(std::int32_t), true, stream));
  *report = std::move(rep);
  return {};
}

}  // namespace detail

}  // namespace llmk::obs
