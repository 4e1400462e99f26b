// llmk/obs/hessian.cuh: the layer Hessian of the OBS family, H = (2 / n) sum_s x_s x_s^T, over streamed
// calibration batches X [rows, d] (rows = tokens, d = the layer's input features), kept as an fp32 running
// average: after a batch of r rows on top of n samples,
//   H <- (n / (n + r)) H + (2 / (n + r)) X^T X,   n <- n + r
// (GPTQ's add_batch). Then, before inverting it:
//   dead columns   H_ii == 0 (an input feature that is always 0): H_ii = 1 and the weight column is zeroed
//                  (it never contributes to the output, so its weights are free; 0 is the canonical choice)
//   dampening      H_ii += percdamp * mean(diag H)   (percdamp default 0.01; llmk/obs/gptq.hpp retries with
//                  10x more when the Cholesky factorization fails)
//
// Two implementations of the update with the same contract: hessian_update_host (fp64 accumulation of the
// batch, one rounding to fp32) and hessian_update (device memory, fp32 accumulation): a tensor-core kernel
// for 16-byte aligned fp16/bf16 batches (the usual calibration activations) and a SIMT kernel for everything
// else (fp32 batches, unaligned ones); hessian_update_kernel_for states the rule. HessianAccumulator wraps
// the host version with its own storage. With samples == 0 neither reads the old H (it may be uninitialized).
// Non-finite inputs: the host update (and HessianAccumulator) rejects a batch holding a NaN or +-Inf, naming
// 'x' and the element, before it changes h (one poisoned batch would otherwise poison every later one); the
// device update does not look (a check would cost a synchronization per batch): a non-finite value reaches
// H, which dampen() and every consumer (GPTQ, SparseGPT, OBS, Wanda) reject, naming 'h'.
//
//   llmk::obs::HessianAccumulator acc(d);
//   for (const auto& batch : batches) llmk::throw_if_error(acc.add_batch(batch.data(), batch_rows, d));
//   std::vector<float> h = acc.hessian();          // [d, d] row-major
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "llmk/config.cuh"
#include "llmk/core/status.cuh"
#include "llmk/quant/scheme.cuh"

#if !defined(LLMK_HOST_ONLY)
#include "llmk/arch/cp_async.cuh"
#include "llmk/arch/ldmatrix.cuh"
#include "llmk/arch/mma.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/tensor_view.cuh"
#endif

namespace llmk::obs {

namespace detail {

template <class T>
Status validate_hessian_update(const float* h, std::int64_t d, std::int64_t ldh, std::int64_t samples,
                               const T* x, std::int64_t rows, std::int64_t ldx) {
  if (d < 1) return Status::invalid_argument("d", str_cat("must be >= 1, got ", d));
  if (h == nullptr) return Status::invalid_argument("h", "must not be null");
  if (ldh < d) return Status::invalid_argument("ldh", str_cat("must be >= d (d=", d, ", ldh=", ldh, ")"));
  if (samples < 0) return Status::invalid_argument("samples", str_cat("must be >= 0, got ", samples));
  if (rows < 0) return Status::invalid_argument("rows", str_cat("must be >= 0, got ", rows));
  if (x == nullptr && rows > 0) return Status::invalid_argument("x", "must not be null when rows > 0");
  if (ldx < d) return Status::invalid_argument("ldx", str_cat("must be >= d (d=", d, ", ldx=", ldx, ")"));
  return {};
}

}  // namespace detail

/// Host update of the running Hessian h [d, d] (ldh) with a batch x [rows, d] (ldx; T = float, llmk::half or
/// llmk::bfloat16): h <- (samples / (samples + rows)) h + (2 / (samples + rows)) x^T x, the batch product in
/// fp64, each element rounded once to fp32. The caller then adds rows to its sample count. A batch of 0 rows
/// changes nothing; with samples == 0 the old h is not read (only written). Cost: rows d^2 multiply-adds (d
/// (d + 1) / 2 computed, mirrored).
///   std::int64_t n = 0;
///   std::vector<float> h(d * d, 0.0f);
///   llmk::throw_if_error(llmk::obs::hessian_update_host(h.data(), d, d, n, x.data(), rows, d));
///   n += rows;
template <class T>
Status hessian_update_host(float* h, std::int64_t d, std::int64_t ldh, std::int64_t samples, const T* x,
                           std::int64_t rows, std::int64_t ldx) {
  LLMK_RETURN_IF_ERROR(detail::validate_hessian_update(h, d, ldh, samples, x, rows, ldx));
  if (rows == 0) return {};
  // h and x are host memory here (no device-pointer check: it rejected the host vectors this function is for,
  // and it is not declared in a plain host build).
  const double total = static_cast<double>(samples) + static_cast<double>(rows);
  const double keep = static_cast<double>(samples) / total, add = 2.0 / total;
  std::vector<double> xs(static_cast<std::size_t>(d));
  std::vector<double> acc(static_cast<std::size_t>(d * (d + 1) / 2), 0.0);  // packed lower triangle
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < d; ++c) {
      const double v = quant::load_as_float(x[r * ldx + c]);
      if (!std::isfinite(v))  // before h is written: a rejected batch changes nothing
        return Status::invalid_argument("x", str_cat("must be finite (x[", r, ", ", c, "] = ", v,
                                                     "): a non-finite sample would poison H"));
      xs[static_cast<std::size_t>(c)] = v;
    }
    std::size_t p = 0;
    for (std::int64_t i = 0; i < d; ++i) {
      const double xi = xs[static_cast<std::size_t>(i)];
      for (std::int64_t j = 0; j <= i; ++j) acc[p++] += xi * xs[static_cast<std::size_t>(j)];
    }
  }
  std::size_t p = 0;
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j <= i; ++j, ++p) {
      // keep == 0 (the first batch): the old values are not read, so h may start uninitialized.
      const double old_lower = samples == 0 ? 0.0 : h[i * ldh + j];
      const double old_upper = samples == 0 ? 0.0 : h[j * ldh + i];
      const float lower = static_cast<float>(keep * old_lower + add * acc[p]);
      const float upper = static_cast<float>(keep * old_upper + add * acc[p]);
      h[i * ldh + j] = lower;
      h[j * ldh + i] = upper;
    }
  return {};
}

/// Dead columns: every i with h[i, i] == 0 gets h[i, i] = 1 and column i of the weight w [rows, d] (ldw)
/// zeroed (w may be null when rows == 0). Returns the number of dead columns in *dead (may be null).
///   std::int64_t dead = 0;
///   llmk::throw_if_error(llmk::obs::fix_dead_columns(h.data(), d, d, w.data(), rows, d, &dead));
inline Status fix_dead_columns(float* h, std::int64_t d, std::int64_t ldh, float* w, std::int64_t rows,
                               std::int64_t ldw, std::int64_t* dead) {
  if (d < 1) return Status::invalid_argument("d", str_cat("must be >= 1, got ", d));
  if (h == nullptr) return Status::invalid_argument("h", "must not be null");
  if (ldh < d) return Status::invalid_argument("ldh", str_cat("must be >= d (d=", d, ", ldh=", ldh, ")"));
  if (rows < 0) return Status::invalid_argument("rows", str_cat("must be >= 0, got ", rows));
  if (w == nullptr && rows > 0) return Status::invalid_argument("w", "must not be null when rows > 0");
  if (rows > 0 && ldw < d)
    return Status::invalid_argument("ldw", str_cat("must be >= d (d=", d, ", ldw=", ldw, ")"));
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < d; ++i) {
    if (h[i * ldh + i] != 0.0f) continue;
    ++count;
    h[i * ldh + i] = 1.0f;
    for (std::int64_t r = 0; r < rows; ++r) w[r * ldw + i] = 0.0f;
  }
  if (dead != nullptr) *dead = count;
  return {};
}

/// Dampening: h[i, i] += percdamp * mean(diag h) for every i; the added value goes to *damp (may be null).
/// percdamp must be finite and >= 0, the diagonal finite (else invalid_argument naming it; h unchanged).
///   double damp = 0.0;
///   llmk::throw_if_error(llmk::obs::dampen(h.data(), d, d, 0.01, &damp));
inline Status dampen(float* h, std::int64_t d, std::int64_t ldh, double percdamp, double* damp) {
  if (d < 1) return Status::invalid_argument("d", str_cat("must be >= 1, got ", d));
  if (h == nullptr) return Status::invalid_argument("h", "must not be null");
  if (ldh < d) return Status::invalid_argument("ldh", str_cat("must be >= d (d=", d, ", ldh=", ldh, ")"));
  if (!(percdamp >= 0.0) || !std::isfinite(percdamp))
    return Status::invalid_argument("percdamp", str_cat("must be finite and >= 0, got ", percdamp));
  double mean = 0.0;
  for (std::int64_t i = 0; i < d; ++i) mean += h[i * ldh + i];
  mean /= static_cast<double>(d);
  if (!std::isfinite(mean))  // one non-finite diagonal entry would make every one non-finite
    return Status::invalid_argument("h", "must have a finite diagonal (a NaN or +-Inf h[i, i] was found)");
  const double add = percdamp * mean;
  for (std::int64_t i = 0; i < d; ++i) h[i * ldh + i] = static_cast<float>(h[i * ldh + i] + add);
  if (damp != nullptr) *damp = add;
  return {};
}

/// Owns a host Hessian and its sample count; add_batch() streams calibration batches into it.
///   llmk::obs::HessianAccumulator acc(4096);
///   llmk::throw_if_error(acc.add_batch(x.data(), tokens, 4096));       // x: [tokens, 4096] fp32
///   const std::vector<float>& h = acc.hessian();
class HessianAccumulator {
 public:
  /// An all-zero [d, d] Hessian with 0 samples, for a layer with d input features. Does not throw: with
  /// d < 1 the Hessian is empty and add_batch() returns invalid_argument naming 'd'.
  ///   llmk::obs::HessianAccumulator acc(layer.in_features);   // then add_batch per calibration batch
  explicit HessianAccumulator(std::int64_t d)
      : d_(d), h_(d > 0 ? static_cast<std::size_t>(d * d) : 0, 0.0f) {}
  /// Adds a batch x [rows, d] with row stride ldx (T = float, llmk::half, llmk::bfloat16); a batch holding a
  /// NaN or +-Inf is rejected (naming 'x') and changes nothing.
  template <class T>
  Status add_batch(const T* x, std::int64_t rows, std::int64_t ldx) {
    LLMK_RETURN_IF_ERROR(hessian_update_host(h_.data(), d_, d_, samples_, x, rows, ldx));
    samples_ += rows;
    return {};
  }
  /// d, the constructor's.
  std::int64_t dim() const { return d_; }
  /// Rows added so far (the n of the running average).
  std::int64_t samples() const { return samples_; }
  /// H [d, d] row-major (ldh = d): zeros until the first batch.
  const std::vector<float>& hessian() const { return h_; }

 private:
  std::int64_t d_;
  std::int64_t samples_ = 0;
  std::vector<float> h_;
};

#if !defined(LLMK_HOST_ONLY)

/// Which kernel hessian_update runs for a batch (hessian_update_kernel_for says it before the call).
enum class HessianKernel {
  kTensorCore,  ///< mma.m16n8k16 (fp16/bf16 inputs, fp32 accumulation), 128 x 128 tiles, cp.async ring
  kSimt,        ///< fp32 FMA, 16 x 16 tiles (fp32 X, or 16-bit X without 16-byte alignment)
};

/// The dispatch rule of hessian_update, explicit so callers (and tests) can tell which kernel runs:
/// kTensorCore when T is llmk::half or llmk::bfloat16, x is 16-byte aligned and ldx is a multiple of 8
/// (every row starts on a 16-byte boundary, so rows are staged with 16-byte cp.async copies); kSimt
/// otherwise (fp32 X always: there is no fp32 tensor-core mma, and rounding X to tf32 would change the
/// result). d and rows do not matter (tails are zero-filled).
///   if (llmk::obs::hessian_update_kernel_for(d_x, ldx) == llmk::obs::HessianKernel::kSimt) { /* slower */ }
template <class T>
HessianKernel hessian_update_kernel_for(const T* x, std::int64_t ldx) {
  constexpr bool k16 = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
  if constexpr (!k16) {
    (void)x, (void)ldx;
    return HessianKernel::kSimt;
  } else {
    const bool aligned = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && ldx % 8 == 0;
    return aligned ? HessianKernel::kTensorCore : HessianKernel::kSimt;
  }
}

namespace detail {

// ---- SIMT kernel (fp32 X, or unaligned 16-bit X)
inline constexpr int kHessianTile = 16;

struct HessianSmem {
  float xi[kHessianTile][kHessianTile + 1];  // [row of the chunk][column i0 + c]
  float xj[kHessianTile][kHessianTile + 1];  // [row of the chunk][column j0 + c]
};

// h[i, j] <- keep h[i, j] + sum, except that keep == 0 (the first batch) ignores the old value, so an
// uninitialized (even NaN) Hessian may be passed with samples == 0.
LLMK_HOST_DEVICE float hessian_blend(float old, float keep, float sum) {
  return keep == 0.0f ? sum : keep * old + sum;
}

// One 16 x 16 tile of H per block (256 threads, thread (ty, tx) owns H[i0 + ty, j0 + tx]); the batch is read
// in chunks of 16 rows through shared memory. Tiles strictly above the diagonal exit at once (the lower
// triangle's blocks write both mirrored elements).
template <class T>
__global__ void __launch_bounds__(256)
    hessian_update_kernel(float* h, std::int64_t d, std::int64_t ldh, const T* x, std::int64_t rows,
                          std::int64_t ldx, float keep, float add) {
  if (blockIdx.y < blockIdx.x) return;  // whole block: no barrier is skipped by a subset of threads
  HessianSmem& smem = shared_storage<HessianSmem>();
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.y) * kHessianTile;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * kHessianTile;
  float acc = 0.0f;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kHessianTile) {
    const std::int64_t r = r0 + ty;
    const bool row_ok = r < rows;
    smem.xi[ty][tx] = row_ok && i0 + tx < d ? quant::load_as_float(x[r * ldx + i0 + tx]) : 0.0f;
    smem.xj[ty][tx] = row_ok && j0 + tx < d ? quant::load_as_float(x[r * ldx + j0 + tx]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kHessianTile; ++k) acc += smem.xi[k][ty] * smem.xj[k][tx];
    __syncthreads();
  }
  const std::int64_t i = i0 + ty, j = j0 + tx;
  if (i < d && j < d && j <= i) {
    const float sum = add * acc;
    h[i * ldh + j] = hessian_blend(h[i * ldh + j], keep, sum);
    if (j != i) h[j * ldh + i] = hessian_blend(h[j * ldh + i], keep, sum);
  }
}

// ---- tensor-core kernel (fp16 / bf16 X)
//
// H tile [i0, i0 + BM) x [j0, j0 + BN) += X[:, i-range]^T X[:, j-range]: an mma with M = i, N = j and the
// reduction K = the token (row) dimension. X is row-major [rows, d], so a staged slice of BK rows holds
// S[k][m] (m contiguous): that is A^T and B stored row-major, i.e. BOTH operands are "M/N-major", the
// opposite of the K-major layout the mma fragments want. ldmatrix.trans fixes it for free: on a stored 8 x 8
// block S[k][m] it hands lane (g, t) the elements S[2t][g], S[2t + 1][g] = A[g][2t], A[g][2t + 1], exactly an
// A (or B) fragment register. So each 16 x 16 A tile is one LDSM_x4_T (matrix j: k rows (j / 2) * 8.., m
// columns (j % 2) * 8..) and two n8 B tiles are one LDSM_x4_T (matrix j: k rows (j % 2) * 8.., n columns (j /
// 2) * 8..). Rows of the staged slice are padded by 16 bytes (pitch 272 bytes = 68 words), so the 8 rows one
// ldmatrix matrix reads start in 8 different 4-bank groups: no bank conflicts.
struct HessianMmaConfig {
  static constexpr int BM = 128, BN = 128;  // H tile (BM == BN: the tiles of the lower triangle are squares)
  static constexpr int BK = 32;             // rows (tokens) per pipeline stage
  static constexpr int WarpsM = 2, WarpsN = 4, Stages = 3;
  static constexpr int kThreads = WarpsM * WarpsN * 32;
  static constexpr int WM = BM / WarpsM, WN = BN / WarpsN;
  static constexpr int kMmaM = WM / 16, kMmaN = WN / 8;
  static constexpr int kPitch = BM + 8;         // 16-bit elements per staged row (16 bytes of padding)
  static constexpr int kChunksPerRow = BM / 8;  // 16-byte chunks per staged row
  static constexpr int kChunksPerThread = BK * kChunksPerRow / kThreads;
  static_assert(BM == BN, "diagonal tiles reuse the i-slice as the j-slice");
  static_assert(BK % 16 == 0, "BK must cover whole mma k16 steps");
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tiles are whole m16 tiles and n16 ldmatrix pairs");
  static_assert(BK * kChunksPerRow % kThreads == 0, "every thread copies the same number of chunks");
};

struct HessianMmaSmem {
  std::uint16_t xi[HessianMmaConfig::Stages][HessianMmaConfig::BK * HessianMmaConfig::kPitch];
  std::uint16_t xj[HessianMmaConfig::Stages][HessianMmaConfig::BK * HessianMmaConfig::kPitch];
};

template <class T>
using HessianMma = std::conditional_t<std::is_same_v<T, half>, arch::MMA_16x8x16_F32F16F16F32,
                                      arch::MMA_16x8x16_F32BF16BF16F32>;

// Issues the 16-byte copies of rows [r0, r0 + BK) x columns [c0, c0 + BM) of X into `slot`. Rows past `rows`
// and columns past d are zero-filled: a chunk that straddles d copies only its columns < d (src-size), so
// nothing past column d of a row is read (the row's padding up to ldx may be anything, even NaN).
template <class T>
LLMK_DEVICE void hessian_load_slice(const T* x, std::int64_t ldx, std::int64_t rows, std::int64_t d,
                                    std::int64_t r0, std::int64_t c0, std::uint16_t* slot) {
  using Cfg = HessianMmaConfig;
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int i = 0; i < Cfg::kChunksPerThread; ++i) {
    const int c = tid + i * Cfg::kThreads;
    const int row = c / Cfg::kChunksPerRow, col = (c % Cfg::kChunksPerRow) * 8;
    const std::int64_t g_row = r0 + row, g_col = c0 + col;
    const bool valid = g_row < rows && g_col < d;
    const int bytes = valid ? static_cast<int>(d - g_col < 8 ? d - g_col : 8) * 2 : 0;
    const T* from = valid ? x + g_row * ldx + g_col : x;
    arch::cp_async_cg16_zfill(slot + row * Cfg::kPitch + col, from, bytes);
  }
}

// One 128 x 128 tile of the lower triangle per block (blockIdx.x enumerates the T (T + 1) / 2 tiles
// (bi, bj), bj <= bi, row by row); 8 warps of 64 x 32; the batch streams through a 3-stage cp.async ring of
// 32-row slices. Diagonal tiles stage one slice (it is both operands) and write only j <= i; every block
// writes its tile and the mirrored one, so H stays exactly symmetric.
template <class T>
__global__ void __launch_bounds__(HessianMmaConfig::kThreads)
    hessian_mma_kernel(float* h, std::int64_t d, std::int64_t ldh, const T* x, std::int64_t rows,
                       std::int64_t ldx, float keep, float add) {
  using Cfg = HessianMmaConfig;
  HessianMmaSmem& smem = shared_storage<HessianMmaSmem>();
  // Tile (bi, bj) of linear index b = bi (bi + 1) / 2 + bj; the sqrt estimate is corrected exactly.
  const std::int64_t b = blockIdx.x;
  std::int64_t bi = static_cast<std::int64_t>((sqrt(8.0 * static_cast<double>(b) + 1.0) - 1.0) * 0.5);
  while (bi * (bi + 1) / 2 > b) --bi;
  while ((bi + 1) * (bi + 2) / 2 <= b) ++bi;
  const std::int64_t bj = b - bi * (bi + 1) / 2;
  const bool diagonal = bi == bj;
  const std::int64_t i0 = bi * Cfg::BM, j0 = bj * Cfg::BN;

  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warp_m = warp / Cfg::WarpsN, warp_n = warp % Cfg::WarpsN;
  const std::int64_t k_tiles = (rows + Cfg::BK - 1) / Cfg::BK;

  float acc[Cfg::kMmaM][Cfg::kMmaN][4];
#pragma unroll
  for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
    for (int ni = 0; ni < Cfg::kMmaN; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;

  auto load = [&](std::int64_t kt, int slot) {
    hessian_load_slice(x, ldx, rows, d, kt * Cfg::BK, i0, smem.xi[slot]);
    if (!diagonal) hessian_load_slice(x, ldx, rows, d, kt * Cfg::BK, j0, smem.xj[slot]);
  };
  // Prologue: Stages - 1 slices in flight, one commit group each (empty past the end).
#pragma unroll
  for (int s = 0; s < Cfg::Stages - 1; ++s) {
    if (s < k_tiles) load(s, s);
    arch::cp_async_commit();
  }
  for (std::int64_t kt = 0; kt < k_tiles; ++kt) {
    // Slice kt has landed once at most Stages - 2 newer groups are pending; the barrier publishes every
    // thread's copies and frees the slot refilled next (read in iteration kt - 1).
    arch::cp_async_wait<Cfg::Stages - 2>();
    __syncthreads();
    const std::int64_t next = kt + Cfg::Stages - 1;
    if (next < k_tiles) load(next, static_cast<int>(next % Cfg::Stages));
    arch::cp_async_commit();

    const int slot = static_cast<int>(kt % Cfg::Stages);
    const std::uint16_t* sa = smem.xi[slot];
    const std::uint16_t* sb = diagonal ? smem.xi[slot] : smem.xj[slot];
#pragma unroll
    for (int kk = 0; kk < Cfg::BK; kk += 16) {
      const int j = lane / 8, r = lane % 8;
      std::uint32_t af[Cfg::kMmaM][4];
#pragma unroll
      for (int mi = 0; mi < Cfg::kMmaM; ++mi) {
        const int k = kk + r + (j / 2) * 8, m = warp_m * Cfg::WM + mi * 16 + (j % 2) * 8;
        arch::LDSM_x4_T::copy(sa + k * Cfg::kPitch + m, af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
      }
      std::uint32_t bf[Cfg::kMmaN][2];
#pragma unroll
      for (int nj = 0; nj < Cfg::kMmaN; nj += 2) {
        const int k = kk + r + (j % 2) * 8, n = warp_n * Cfg::WN + nj * 8 + (j / 2) * 8;
        arch::LDSM_x4_T::copy(sb + k * Cfg::kPitch + n, bf[nj][0], bf[nj][1], bf[nj + 1][0], bf[nj + 1][1]);
      }
#pragma unroll
      for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
        for (int ni = 0; ni < Cfg::kMmaN; ++ni) HessianMma<T>::fma(acc[mi][ni], af[mi], bf[ni], acc[mi][ni]);
    }
  }
  arch::cp_async_wait_all();  // only empty groups remain; keeps the ring's accounting closed

  // Epilogue: accumulator (mi, ni, e) is H[i0 + row, j0 + col] (rows g, g + 8; columns 2t, 2t + 1). The owner
  // of (i, j), j <= i, writes it and its mirror (j, i) from the same value.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
    for (int ni = 0; ni < Cfg::kMmaN; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t i = i0 + warp_m * Cfg::WM + mi * 16 + g + (e / 2) * 8;
        const std::int64_t jj = j0 + warp_n * Cfg::WN + ni * 8 + 2 * t + (e % 2);
        if (i >= d || jj >= d || jj > i) continue;
        const float sum = add * acc[mi][ni][e];
        h[i * ldh + jj] = hessian_blend(h[i * ldh + jj], keep, sum);
        if (jj != i) h[jj * ldh + i] = hessian_blend(h[jj * ldh + i], keep, sum);
      }
}

}  // namespace detail

/// Device update of the running Hessian (h, x: device memory), the same contract as hessian_update_host with
/// fp32 accumulation: |error| <= about rows 2^-24 sum_s |x_si x_sj| per element (relative to the fp64 host
/// version; 16-bit products are exact in fp32). With samples == 0 the old h is not read (it may be
/// uninitialized). One launch on `stream`, asynchronous; x must stay valid until it ran.
/// Kernels (hessian_update_kernel_for gives the choice for an x / ldx):
///   kTensorCore  T = llmk::half / llmk::bfloat16, x 16-byte aligned, ldx % 8 == 0: T (T + 1) / 2 blocks
///                of 256 threads for the T = ceil(d / 128) tiles of the lower triangle (mma.m16n8k16, fp32
///                accumulation, the batch staged 32 rows at a time by cp.async); rows X d^2 / 2 mma work.
///   kSimt        everything else (fp32 X, unaligned 16-bit X): ceil(d / 16)^2 blocks of 256 threads (those
///                above the diagonal exit at once), fp32 FMA.
/// Errors: invalid_argument naming d, h, ldh, samples, rows, x or ldx (d > 65535 * 16 on the SIMT path).
///   std::int64_t n = 0;   // samples so far
///   llmk::Status s = llmk::obs::hessian_update(d_h, d, d, n, d_x, rows, d, stream);   // d_x: half [rows, d]
///   n += rows;
template <class T>
Status hessian_update(float* h, std::int64_t d, std::int64_t ldh, std::int64_t samples, const T* x,
                      std::int64_t rows, std::int64_t ldx, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::validate_hessian_update(h, d, ldh, samples, x, rows, ldx));
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("h", h));  // the kernels' element loads and stores
  LLMK_RETURN_IF_ERROR(check_element_alignment<T>("x", x));
  if (rows == 0) return {};
  const double total = static_cast<double>(samples) + static_cast<double>(rows);
  const float keep = static_cast<float>(static_cast<double>(samples) / total);
  const float add = static_cast<float>(2.0 / total);
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    if (hessian_update_kernel_for(x, ldx) == HessianKernel::kTensorCore) {
      using Cfg = detail::HessianMmaConfig;
      const std::int64_t tiles = ceil_div<std::int64_t>(d, Cfg::BM);
      const std::int64_t blocks = tiles * (tiles + 1) / 2;
      if (blocks >= (std::int64_t{1} << 31))
        return Status::invalid_argument("d", str_cat("too large for the tensor-core kernel's grid, got ", d));
      return launch(detail::hessian_mma_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(Cfg::kThreads),
                    sizeof(detail::HessianMmaSmem), stream, h, d, ldh, x, rows, ldx, keep, add);
    }
  }
  const std::int64_t tiles = ceil_div<std::int64_t>(d, detail::kHessianTile);
  if (tiles > 65535) return Status::invalid_argument("d", str_cat("must be <= 65535 * 16, got ", d));
  return launch(detail::hessian_update_kernel<T>,
                dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(tiles)),
                dim3(detail::kHessianTile, detail::kHessianTile), sizeof(detail::HessianSmem), stream, h, d,
                ldh, x, rows, ldx, keep, add);
}

#endif  // !LLMK_HOST_ONLY

}  // namespace llmk::obs
