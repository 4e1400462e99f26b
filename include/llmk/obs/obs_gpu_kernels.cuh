// llmk/obs/obs_gpu_kernels.cuh: the device side of OBS pruning and OBQ on the GPU (llmk/obs/obs_gpu.cuh
// describes the phases): the glue kernels (dense weights with dead columns zeroed, the symmetrized Hessian,
// the error W - W'), and the per-row kernel, one CTA per row: the block-wide selection that reproduces the
// host's scan, the OBS update and downdate of the row's own fp64 H^-1, OBQ's orders and the refinement
// sweeps; with launch_obs_rows, the one place that picks the quantizer type at run time for it.
#pragma once

#include <cmath>
#include <cstdint>

#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/obs/gpu_path_kernels.cuh"
#include "llmk/obs/obq.hpp"
#include "llmk/obs/quantizer.hpp"

namespace llmk::obs {

/// Threads of the per-row CTA of obs_prune_gpu / obq_quantize_gpu.
inline constexpr int kObsRowThreads = 256;

namespace detail {

// ---- glue kernels

// wd[r, c] = w[r, c], 0 in dead columns (H_cc == 0), as dense_copies + fix_dead_columns.
template <class T>
__global__ void __launch_bounds__(kGlueThreads)
    obs_dense_weights_kernel(const T* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw, const T* h,
                             std::int64_t ldh, T* wd, std::int64_t ldp) {
  for_each_element(rows, cols, [&](std::int64_t r, std::int64_t c) {
    wd[r * ldp + c] = h[c * ldh + c] == 0.0f ? 0.0f : w[r * ldw + c];
  });
}

// hfix = (H + H^T) / 2 in fp32 with dead diagonals set to 1 (dense_copies).
template <class T>
__global__ void __launch_bounds__(kGlueThreads)
    obs_sym_hessian_kernel(const T* h, std::int64_t d, std::int64_t ldh, T* hfix, std::int64_t ldp) {
  for_each_element(d, d, [&](std::int64_t i, std::int64_t j) {
    const T v = 0.5f * (h[i * ldh + j] + h[j * ldh + i]);
    hfix[i * ldp + j] = i == j && v == 0.0f ? 1.0f : v;
  });
}

// e[r, c] = w[r, c] - q[r, c] (the caller's W, as layer_loss).
template <class T>
__global__ void __launch_bounds__(kGlueThreads)
    obs_error_kernel(const T* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw, const T* q,
                     std::int64_t ldq, T* e, std::int64_t lde) {
  for_each_element(rows, cols,
                   [&](std::int64_t r, std::int64_t c) { e[r * lde + c] = w[r * ldw + c] - q[r * ldq + c]; });
}

// ---- the per-row kernel

/// Arguments of one per-row launch (rows row0 .. row0 + gridDim.x - 1, one CTA each).
struct ObsRowArgs {
  std::int64_t rows, d, row0;
  const float* wd;    // [rows, ldp] dead-zeroed W
  const float* hinv;  // [d, ldp] damped H^-1
  const float* hfix;  // [d, ldp] symmetrized, dead-fixed H (refinement)
  std::int64_t ldp;
  double* hi;                                 // [in_flight, d, d]
  double *row, *col, *values, *values2, *he;  // [in_flight, d]
  int *codes, *codes2;                        // [in_flight, d]
  std::uint8_t* done;                         // [in_flight, d]
  int prune;                                  // 1: OBS pruning (targets 0), 0: OBQ
  std::int64_t steps;                         // prune_per_row (pruning)
  int order;                                  // ObqOrder
  int refine_sweeps;
  std::int64_t group_size;
  const float* scales;  // [groups, rows] (OBQ)
  const std::uint8_t* zeros;
  // outputs
  float* qd;         // [rows, ldp] W' for the loss
  double* row_sum;   // [rows] saliency sums
  double* row_loss;  // pruning, nullable
  float* out_w;      // pruning: weights; OBQ: dequantized (nullable)
  std::int64_t ldo;
  std::uint8_t* mask;  // pruning
  std::int64_t ldm;
  std::uint8_t* out_codes;  // OBQ
  std::int64_t ldc;
};

/// A selection candidate: cls 0 = OBQ outlier (off the grid), 1 = finite-order key, 2 = NaN key, 3 = none.
struct ObsCand {
  double key;
  std::int64_t idx;
  int cls;
};

LLMK_DEVICE bool obs_better(const ObsCand& a, const ObsCand& b) {
  if (a.cls != b.cls) return a.cls < b.cls;
  if (a.cls <= 1) {
    if (a.key < b.key) return true;
    if (!(a.key == b.key)) return false;
  }
  return a.idx < b.idx;
}

struct ObsRowSmem {
  double key[kObsRowThreads / 32];
  std::int64_t idx[kObsRowThreads / 32];
  int cls[kObsRowThreads / 32];
  std::int64_t first[kObsRowThreads / 32];
  // the step's decision (thread 0)
  double t, scale, hqq, delta;
  std::int64_t q;
  int stop;
};

LLMK_DEVICE double obs_saliency_dev(double w_q, double hinv_qq, double target) {
  const double delta = target - w_q;
  return delta * delta / (2.0 * hinv_qq);
}

template <class Q>
LLMK_DEVICE quant::QuantParams obs_params(const ObsRowArgs& a, std::int64_t r, std::int64_t c) {
  const std::int64_t at = (c / a.group_size) * a.rows + r;
  return quant::QuantParams{a.scales[at], static_cast<std::int32_t>(a.zeros[at]) - kCodeOffset<Q>};
}

// The candidate of free column c (obq_row's / obs_prune's key). code / t: its grid point (pruning: 0).
template <class Q>
LLMK_DEVICE ObsCand obs_candidate(const ObsRowArgs& a, std::int64_t r, const double* row, const double* hi,
                                  std::int64_t c, int order, int* code_out, double* t_out) {
  const double x = row[c];
  const double hqq = hi[c * a.d + c];
  ObsCand cand{0.0, c, 1};
  if (a.prune) {
    cand.key = obs_saliency_dev(x, hqq, 0.0);
    *code_out = 0;
    *t_out = 0.0;
  } else {
    const quant::QuantParams p = obs_params<Q>(a, r, c);
    const int code = static_cast<int>(Q::quantize(static_cast<float>(x), p));
    const double t = Q::dequantize(code, p);
    const double gap = ::fabs(t - x);
    const bool out = gap > 0.5 * static_cast<double>(p.scale) * (1.0 + 1e-6);
    cand.key = out                                                   ? -gap
               : order == static_cast<int>(ObqOrder::kLeastSaliency) ? obs_saliency_dev(x, hqq, t)
                                                                     : hqq;
    cand.cls = out ? 0 : 1;
    *code_out = code;
    *t_out = t;
  }
  if (cand.cls == 1 && cand.key != cand.key) cand.cls = 2;
  return cand;
}

// One greedy pass over the row (OBS pruning: a.steps steps; OBQ: d steps in `order`), the host's obs_prune /
// obq_row loop. Returns the saliency sum (meaningful in thread 0). codes / values get the fixed weights.
template <class Q>
LLMK_DEVICE double obs_greedy_pass(const ObsRowArgs& a, ObsRowSmem& s, std::int64_t r, std::int64_t slot,
                                   int order, int* codes, double* values) {
  const std::int64_t d = a.d;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  double* hi = a.hi + slot * d * d;
  double* row = a.row + slot * d;
  double* col = a.col + slot * d;
  std::uint8_t* done = a.done + slot * d;
  for (std::int64_t i = tid; i < d * d; i += kObsRowThreads)
    hi[i] = static_cast<double>(a.hinv[(i / d) * a.ldp + i % d]);
  for (std::int64_t c = tid; c < d; c += kObsRowThreads) {
    row[c] = static_cast<double>(a.wd[r * a.ldp + c]);
    done[c] = 0;
    values[c] = 0.0;
    codes[c] = 0;
  }
  __syncthreads();
  const std::int64_t steps = a.prune ? a.steps : d;
  double sum = 0.0;
  for (std::int64_t k = 0; k < steps; ++k) {
    // ---- selection: the best candidate (obs_better) and the first free column, block-wide
    ObsCand best{0.0, d, 3};
    std::int64_t first = d;
    for (std::int64_t c = tid; c < d; c += kObsRowThreads) {
      if (done[c]) continue;
      int code = 0;
      double t = 0.0;
      const ObsCand cand = obs_candidate<Q>(a, r, row, hi, c, order, &code, &t);
      if (obs_better(cand, best)) best = cand;
      first = c < first ? c : first;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      ObsCand o;
      o.key = __shfl_xor_sync(kWarpMask, best.key, offset);
      o.idx = __shfl_xor_sync(kWarpMask, best.idx, offset);
      o.cls = __shfl_xor_sync(kWarpMask, best.cls, offset);
      if (obs_better(o, best)) best = o;
      const std::int64_t f = __shfl_xor_sync(kWarpMask, first, offset);
      first = f < first ? f : first;
    }
    if (lane == 0) {
      s.key[warp] = best.key;
      s.idx[warp] = best.idx;
      s.cls[warp] = best.cls;
      s.first[warp] = first;
    }
    __syncthreads();
    if (tid == 0) {
      for (int w = 1; w < kObsRowThreads / 32; ++w) {
        const ObsCand o{s.key[w], s.idx[w], s.cls[w]};
        if (obs_better(o, best)) best = o;
        first = s.first[w] < first ? s.first[w] : first;
      }
      // The host's sequential scan starts from the first free column: a NaN key there is never replaced
      // (unless an outlier exists: outliers always win).
      int code = 0;
      double t = 0.0;
      const ObsCand f = obs_candidate<Q>(a, r, row, hi, first, order, &code, &t);
      const std::int64_t q = best.cls >= 1 && f.cls == 2 ? first : best.idx;
      (void)obs_candidate<Q>(a, r, row, hi, q, order, &code, &t);
      const double hqq = hi[q * d + q];
      const double xq = row[q];
      s.q = q;
      s.t = t;
      s.hqq = hqq;
      s.scale = (t - xq) / hqq;
      sum += obs_saliency_dev(xq, hqq, t);
      done[q] = 1;
      codes[q] = code;
      values[q] = t;
    }
    __syncthreads();
    // ---- the OBS update (obs_update; fixed weights back to their grid points / 0) and column q of H^-1
    const std::int64_t q = s.q;
    const double scale = s.scale, hqq = s.hqq;
    for (std::int64_t j = tid; j < d; j += kObsRowThreads) {
      const double updated = row[j] + scale * hi[q * d + j];
      row[j] = done[j] ? values[j] : updated;
      col[j] = hi[j * d + q];
    }
    __syncthreads();
    // ---- the downdate (obs_downdate): row and column q become 0
    for (std::int64_t e = tid; e < d * d; e += kObsRowThreads) {
      const std::int64_t i = e / d, j = e % d;
      if (i == q || j == q) {
        hi[e] = 0.0;
      } else {
        const double f = col[i] / hqq;
        hi[e] -= f * col[j];
      }
    }
    __syncthreads();
  }
  return sum;
}

// Coordinate descent (obq_refine_row) on the kept codes / values: thread 0 scans for the next move, all
// threads apply it to H e.
template <class Q>
LLMK_DEVICE void obs_refine(const ObsRowArgs& a, ObsRowSmem& s, std::int64_t r, std::int64_t slot, int* codes,
                            double* values) {
  const std::int64_t d = a.d;
  const int tid = static_cast<int>(threadIdx.x);
  double* e = a.row + slot * d;  // the row buffer is free now
  double* he = a.he + slot * d;
  const float* h = a.hfix;
  for (std::int64_t i = tid; i < d; i += kObsRowThreads)
    e[i] = static_cast<double>(a.wd[r * a.ldp + i]) - values[i];
  __syncthreads();
  for (std::int64_t i = tid; i < d; i += kObsRowThreads) {
    double acc = 0.0;
    for (std::int64_t j = 0; j < d; ++j) acc += static_cast<double>(h[i * a.ldp + j]) * e[j];
    he[i] = acc;
  }
  __syncthreads();
  for (int sweep = 0; sweep < a.refine_sweeps; ++sweep) {
    bool moved = false;  // uniform: every thread sees every published move
    std::int64_t j0 = 0;
    for (;;) {
      if (tid == 0) {
        std::int64_t jm = d;
        for (std::int64_t j = j0; j < d; ++j) {
          const double hjj = h[j * a.ldp + j];
          if (!(hjj > 0.0)) continue;
          const quant::QuantParams p = obs_params<Q>(a, r, j);
          const int code = static_cast<int>(Q::quantize(static_cast<float>(values[j] + he[j] / hjj), p));
          const double t = Q::dequantize(code, p);
          const double delta = values[j] - t;
          if (delta == 0.0 || delta * he[j] + 0.5 * delta * delta * hjj >= 0.0) continue;
          values[j] = t;
          codes[j] = code;
          s.delta = delta;
          jm = j;
          break;
        }
        s.q = jm;
      }
      __syncthreads();
      const std::int64_t jm = s.q;
      if (jm == d) break;
      moved = true;
      const double delta = s.delta;
      for (std::int64_t i = tid; i < d; i += kObsRowThreads)
        he[i] += static_cast<double>(h[i * a.ldp + jm]) * delta;
      __syncthreads();
      j0 = jm + 1;
    }
    __syncthreads();  // s.q is rewritten by the next sweep's scan
    if (!moved) break;
  }
}

template <class Q>
__global__ void __launch_bounds__(kObsRowThreads, 1) obs_row_kernel(const ObsRowArgs a) {
  ObsRowSmem& s = shared_storage<ObsRowSmem>();
  const std::int64_t slot = blockIdx.x, r = a.row0 + slot, d = a.d;
  const int tid = static_cast<int>(threadIdx.x);
  if (r >= a.rows) return;  // whole CTA
  int* codes = a.codes + slot * d;
  double* values = a.values + slot * d;
  double best = 0.0;
  if (a.prune) {
    best = obs_greedy_pass<Q>(a, s, r, slot, 0, codes, values);
  } else {
    const int first = a.order == static_cast<int>(ObqOrder::kMostDetermined)
                          ? static_cast<int>(ObqOrder::kMostDetermined)
                          : static_cast<int>(ObqOrder::kLeastSaliency);
    best = obs_greedy_pass<Q>(a, s, r, slot, first, codes, values);
    if (a.order == static_cast<int>(ObqOrder::kBestOfBoth)) {
      int* codes2 = a.codes2 + slot * d;
      double* values2 = a.values2 + slot * d;
      const double other =
          obs_greedy_pass<Q>(a, s, r, slot, static_cast<int>(ObqOrder::kMostDetermined), codes2, values2);
      if (tid == 0) s.stop = other < best ? 1 : 0;
      __syncthreads();
      if (s.stop) {
        best = other;
        codes = codes2;
        values = values2;
      }
      __syncthreads();
    }
    if (a.refine_sweeps > 0) obs_refine<Q>(a, s, r, slot, codes, values);
  }
  const std::uint8_t* done = a.done + slot * d;
  for (std::int64_t c = tid; c < d; c += kObsRowThreads) {
    const float v = static_cast<float>(values[c]);
    if (a.prune) {
      const float wv = done[c] ? 0.0f : static_cast<float>(a.row[slot * d + c]);
      a.qd[r * a.ldp + c] = wv;
      a.out_w[r * a.ldo + c] = wv;
      a.mask[r * a.ldm + c] = done[c] ? 0 : 1;
    } else {
      a.qd[r * a.ldp + c] = v;
      if (a.out_w != nullptr) a.out_w[r * a.ldo + c] = v;
      a.out_codes[r * a.ldc + c] = static_cast<std::uint8_t>(codes[c] + kCodeOffset<Q>);
    }
  }
  if (tid == 0) {
    a.row_sum[r] = best;
    if (a.row_loss != nullptr) a.row_loss[r] = best;
  }
}

// The one place that picks Q at run time (8 instantiations); pruning reuses the 4-bit symmetric instance.
inline Status launch_obs_rows(int bits, bool symmetric, const ObsRowArgs& a, std::int64_t ctas,
                              cudaStream_t stream) {
  return with_quantizer(bits == 0 ? 4 : bits, bits == 0 ? true : symmetric, [&]<class Q>() -> Status {
    return launch(obs_row_kernel<Q>, dim3(static_cast<unsigned>(ctas)), dim3(kObsRowThreads),
                  sizeof(ObsRowSmem), stream, a);
  });
}

}  // namespace detail

}  // namespace llmk::obs
