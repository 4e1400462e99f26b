// llmk/obs/gpu_path_kernels.cuh: the kernels of the GPU paths of GPTQ and SparseGPT (llmk/obs/gpu_path.cuh
// describes the phases): the fused column-loop kernel, the grid kernel from the original weights, the small
// O(d^2) glue kernels, and the one place that picks the quantizer type at run time for them.
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
#error "llmk/obs/gpu_path_kernels.cuh holds kernels: build with nvcc or the simulator (LLMK_SIM)"
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

// kPruneUnstructured: per row, selected in the column loop; kPruneBlock: a mask of the block chosen first by
// block_scores_kernel + a device-wide selection (llmk/core/device_algorithms.cuh): one candidate set of all
// rows of the block (SparseGPT's reference rule), or one per row with the threshold count.
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
  SymmetricGrid symmetric_grid;  ///< symmetric Q's grid (grid_params); ignored when asymmetric
  bool dead_columns_original;    ///< static_grid_kernel reads a dead column's w (DeadColumnGrid::kOriginal)
};

// The grid of one group, computed by a whole warp: visit(f) calls f(v) for this lane's share of the group's
// values. The same arithmetic as detail::group_params (llmk/obs/group_grids.hpp): the finite min/max
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
  if (!g.mse) return grid_params<Q>(lo, hi, g.symmetric_grid);
  const int steps = static_cast<int>(g.maxshrink * g.grid) > 1 ? static_cast<int>(g.maxshrink * g.grid) : 1;
  quant::QuantParams best{1.0f, 0};
  double best_err = static_cast<double>(inf);  // mse_clip_search's start: +inf
  for (int i = 0; i < steps; ++i) {
    const float pf = static_cast<float>(1.0 - static_cast<double>(i) / g.grid);  // fp32 products, as the host
    const quant::QuantParams cand = grid_params<Q>(pf * lo, pf * hi, g.symmetric_grid);
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

// One warp per (group g, row r): the grid of w[r, g G .. g G + G) with dead columns read as 0 (as they are,
// with choice.dead_columns_original), written to scales / zeros [g * rows + r] (unsigned zero-point codes,
// as QuantizedLayer).
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
        f(h[c * ldh + c] == 0.0f && !choice.dead_columns_original ? 0.0f : w[r * ldw + c]);
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
  int dynamic_groups;  // grids set when column j % group_size == 0 is reached
  // ... from the current weights (GroupGrid::kCurrent), else from W as the block began (kBlockStart: global
  // W, which this launch only reads)
  int group_grid_current;
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
          // The group's columns: this block's from the registers (current) or from global W (as the block
          // began), those past the block (only when it starts at the block's first column) from global W,
          // which the trailing updates made current.
          const std::int64_t tail_end = a.group_size - (count - jj);
          p = warp_group_params<Q>(a.grid, [&](auto&& f) {
#pragma unroll
            for (int k = 0; k < kFusedSlots; ++k) {
              const int t = lane + 32 * k;
              if (t >= jj && t < count && t < jj + a.group_size) f(a.group_grid_current ? w[k] : wrow[t]);
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

}  // namespace detail
}  // namespace llmk::obs
