// llmk/obs/obs.hpp: Optimal Brain Surgeon on one row of a linear layer, and what GPTQ shares with it.
//
// The layer loss of changing a weight row w by dw, with the layer Hessian H = (2/n) X X^T, is exactly the
// quadratic E(dw) = 1/2 dw H dw^T (= ||dw X||^2 / n: the Taylor expansion of the squared output error has no
// other terms). Forcing weight q to a value (0 for pruning, its grid point for quantization) with the other
// weights free, i.e. minimizing E subject to e_q^T dw = t - w_q, gives (Lagrange)
//   dw = ((t - w_q) / [H^-1]_qq) H^-1 e_q         (pruning, t = 0:  w <- w - (w_q / [H^-1]_qq) H^-1 e_q)
//   E  = (t - w_q)^2 / (2 [H^-1]_qq)              (the saliency; pruning: w_q^2 / (2 [H^-1]_qq))
// Once q is fixed it leaves the problem: the inverse Hessian of the remaining weights is the Schur downdate
//   H^-1 <- H^-1 - H^-1 e_q e_q^T H^-1 / [H^-1]_qq   (row and column q become 0).
// OBS pruning repeats: the least saliency, update, downdate. OBQ does the same with quantization targets.
// docs/obs.md has the derivation and the costs.
//
//   llmk::obs::HostLapackBackend la;
//   llmk::obs::ObsPruneOptions opt;  opt.prune_per_row = cols / 2;
//   llmk::obs::ObsPruneResult out;
//   llmk::Status s = llmk::obs::obs_prune(w.data(), rows, cols, cols, h.data(), cols, opt, la, &out);
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "llmk/core/status.cuh"
#include "llmk/obs/hessian.cuh"
#include "llmk/obs/linalg.hpp"
#include "llmk/obs/quantizer.hpp"
#include "llmk/quant/calibration.hpp"

namespace llmk::obs {

// ---- the OBS step (one row; T = float or double)
// ---------------------------------------------------------------------

/// Saliency of moving weight q from w_q to target: (target - w_q)^2 / (2 [H^-1]_qq) (pruning: target 0).
///   double s = llmk::obs::obs_saliency(w[q], hinv[q * d + q]);
inline double obs_saliency(double w_q, double hinv_qq, double target = 0.0) {
  const double delta = target - w_q;
  return delta * delta / (2.0 * hinv_qq);
}

namespace detail {
// The OBS step without argument checks (the algorithms' inner loops; the public forms below check first).
template <class T>
double obs_update_unchecked(T* w, std::int64_t d, const T* hinv, std::int64_t ldh, std::int64_t q, T target) {
  const T hqq = hinv[q * ldh + q];
  const T scale = (target - w[q]) / hqq;
  const double saliency =
      obs_saliency(static_cast<double>(w[q]), static_cast<double>(hqq), static_cast<double>(target));
  for (std::int64_t j = 0; j < d; ++j) w[j] += scale * hinv[q * ldh + j];
  w[q] = target;
  return saliency;
}
template <class T>
void obs_downdate_unchecked(T* hinv, std::int64_t d, std::int64_t ldh, std::int64_t q) {
  const T hqq = hinv[q * ldh + q];
  std::vector<T> col(static_cast<std::size_t>(d));
  for (std::int64_t i = 0; i < d; ++i) col[static_cast<std::size_t>(i)] = hinv[i * ldh + q];
  for (std::int64_t i = 0; i < d; ++i) {
    const T f = col[static_cast<std::size_t>(i)] / hqq;
    for (std::int64_t j = 0; j < d; ++j) hinv[i * ldh + j] -= f * col[static_cast<std::size_t>(j)];
  }
  for (std::int64_t i = 0; i < d; ++i) hinv[i * ldh + q] = hinv[q * ldh + i] = T(0);
}
// d >= 1, ldh >= d, q in [0, d), H^-1_qq finite and > 0 (a positive definite inverse's diagonal).
template <class T>
Status check_obs_step(const T* hinv, std::int64_t d, std::int64_t ldh, std::int64_t q) {
  if (hinv == nullptr) return Status::invalid_argument("hinv", "must not be null");
  if (d < 1) return Status::invalid_argument("d", str_cat("must be >= 1, got ", d));
  if (ldh < d) return Status::invalid_argument("ldh", str_cat("must be >= d (", d, "), got ", ldh));
  if (q < 0 || q >= d) return Status::invalid_argument("q", str_cat("must be in [0, d = ", d, "), got ", q));
  const T hqq = hinv[q * ldh + q];
  if (!(hqq > T(0)) || !std::isfinite(static_cast<double>(hqq)))
    return Status::invalid_argument("hinv", str_cat("[H^-1]_qq must be finite and > 0, got ", hqq));
  return {};
}
}  // namespace detail

/// The optimal update for fixing weight q at target: w <- w + ((target - w_q) / [H^-1]_qq) H^-1[q, :]
/// (H^-1 symmetric [d, d], ld ldh), then w_q = target exactly. The saliency (the loss increase) goes to
/// *saliency when not null. Errors name w, hinv (null, or [H^-1]_qq not finite and > 0), d, ldh, q; nothing
/// changes on error.
///   double loss = 0.0;
///   llmk::Status s = llmk::obs::obs_update(w.data(), d, hinv.data(), d, q, 0.0, &loss);   // prune q
template <class T>
Status obs_update(T* w, std::int64_t d, const T* hinv, std::int64_t ldh, std::int64_t q, T target = T(0),
                  double* saliency = nullptr) {
  if (w == nullptr) return Status::invalid_argument("w", "must not be null");
  LLMK_RETURN_IF_ERROR(detail::check_obs_step(hinv, d, ldh, q));
  const double s = detail::obs_update_unchecked(w, d, hinv, ldh, q, target);
  if (saliency != nullptr) *saliency = s;
  return {};
}

/// Removes weight q from the inverse Hessian: H^-1 <- H^-1 - H^-1[:, q] H^-1[q, :] / [H^-1]_qq. Row and
/// column q become 0 (exactly); the rest is the inverse Hessian of the weights still free. Errors as
/// obs_update's; nothing changes on error.
///   llmk::Status s = llmk::obs::obs_downdate(hinv.data(), d, d, q);
template <class T>
Status obs_downdate(T* hinv, std::int64_t d, std::int64_t ldh, std::int64_t q) {
  LLMK_RETURN_IF_ERROR(detail::check_obs_step<T>(hinv, d, ldh, q));
  detail::obs_downdate_unchecked(hinv, d, ldh, q);
  return {};
}

// ---- damped inverse with retry
// ---------------------------------------------------------------------------------------

/// How the Hessian was made invertible: dead columns, the percdamp that succeeded, and the retries.
struct DampingReport {
  std::int64_t dead_columns = 0;  ///< columns with H_ii == 0 (weights zeroed, H_ii = 1)
  double percdamp = 0.0;          ///< the percdamp of the successful attempt
  double damp = 0.0;              ///< the value added to the diagonal (percdamp * mean(diag H))
  int retries = 0;                ///< failed attempts before it (each one: percdamp x damp_growth)
  std::int64_t failed_pivot = 0;  ///< 1-based pivot where the last failed attempt broke (0: none failed)
};

/// Dampening and the retry policy (defaults: GPTQ's 0.01, then x10 up to 6 more times: 0.1 .. 10^4).
/// Where GPTQ's (and SparseGPT's joint quantization's) dynamic group grids come from when a group begins
/// inside a lazy-batch block (group size not a multiple of the block size, e.g. 32 or 64 with block 128):
enum class GroupGrid {
  kBlockStart,  ///< W as the block began (the reference code: find_params(W[:, j:j+G]) reads W, not the
                ///< block's working copy, so the block's earlier columns' errors are not in the grid)
  kCurrent,     ///< the current, compensated weights (the paper's algorithm; 0.92-1.06x the reference's loss
                ///< in an independent emulation, so not always better: docs/obs.md)
};

/// Which weights a per-channel grid (GPTQ's and SparseGPT's joint quantization, group_size 0) sees in a dead
/// column (H_ii == 0, whose weights are zeroed: its input is always 0):
enum class DeadColumnGrid {
  kZeroed,    ///< default: the zeroed weights (a dead column's weight cannot widen its row's grid)
  kOriginal,  ///< the original weights, as the reference (find_params(W) runs before W[:, dead] = 0)
};

struct DampingOptions {
  double percdamp = 0.01;  ///< first attempt: H_ii += percdamp * mean(diag H); >= 0
  double damp_growth =
      10.0;             ///< each retry multiplies percdamp by this (> 1); a percdamp of 0 retries at 1e-4
  int max_retries = 6;  ///< attempts after the first (>= 0)
  /// Also retry when a Cholesky pivot is at rounding-noise level (L_ii^2 <= 64 eps H_ii), which fp32
  /// factorizations accept (default); false: only a failed factorization or a non-finite result retries,
  /// as the reference (which never retries: it stops where llmk retries) uses any factor that succeeds.
  bool retry_weak_pivots = true;
};

/// The inverse forms the algorithms need.
enum class InverseForm {
  kFull,           ///< H^-1, both triangles (OBS, OBQ)
  kUpperCholesky,  ///< U with H^-1 = U^T U, upper triangle, lower zeroed (GPTQ)
};

namespace detail {

inline Status check_dead_column_grid(DeadColumnGrid g) {
  if (g != DeadColumnGrid::kZeroed && g != DeadColumnGrid::kOriginal)
    return Status::invalid_argument("dead_column_grid",
                                    "must be DeadColumnGrid::kZeroed or DeadColumnGrid::kOriginal");
  return {};
}

inline Status check_group_grid(GroupGrid g) {
  if (g != GroupGrid::kBlockStart && g != GroupGrid::kCurrent)
    return Status::invalid_argument("group_grid", "must be GroupGrid::kBlockStart or GroupGrid::kCurrent");
  return {};
}

inline Status check_damping(const DampingOptions& o) {
  if (!(o.percdamp >= 0.0) || !std::isfinite(o.percdamp))
    return Status::invalid_argument("percdamp", str_cat("must be finite and >= 0, got ", o.percdamp));
  if (!(o.damp_growth > 1.0) || !std::isfinite(o.damp_growth))
    return Status::invalid_argument("damp_growth", str_cat("must be finite and > 1, got ", o.damp_growth));
  if (o.max_retries < 0 || o.max_retries > 64)
    return Status::invalid_argument("max_retries", str_cat("must be in [0, 64], got ", o.max_retries));
  return {};
}

// A Cholesky factor whose pivot lost all but rounding noise of its diagonal (L_ii^2 <= 64 eps H_ii) is
// treated as a failure: fp32 spotrf accepts such pivots, and the inverse is then garbage (finite but huge).
inline std::int64_t weak_pivot(const float* l, const float* a_diag, std::int64_t d, std::int64_t ld) {
  const double eps = std::numeric_limits<float>::epsilon();
  for (std::int64_t i = 0; i < d; ++i) {
    const double p = static_cast<double>(l[i * ld + i]);
    if (!(p * p > 64.0 * eps * static_cast<double>(a_diag[i]))) return i + 1;
  }
  return 0;
}

inline bool all_finite(const float* a, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i)
    if (!std::isfinite(a[i])) return false;
  return true;
}

}  // namespace detail

/// From a Hessian h [d, d] (ldh; dead columns already fixed, llmk/obs/hessian.cuh) to its damped inverse in
/// `form`, retrying with more damping when the Cholesky factorization fails or is numerically singular (a
/// pivot at rounding-noise level) or a result is not finite. out gets [d, d] row-major (ld d). When every
/// attempt fails the Status is an error (the algorithms then write no weights): never NaN.
///   std::vector<float> u;  llmk::obs::DampingReport rep;
///   llmk::Status s = llmk::obs::damped_inverse(h.data(), d, d, {}, llmk::obs::InverseForm::kUpperCholesky,
///                                              la, &u, &rep);
inline Status damped_inverse(const float* h, std::int64_t d, std::int64_t ldh, const DampingOptions& opt,
                             InverseForm form, LinalgBackend& la, std::vector<float>* out,
                             DampingReport* report) {
  if (d < 1) return Status::invalid_argument("d", str_cat("must be >= 1, got ", d));
  if (h == nullptr) return Status::invalid_argument("h", "must not be null");
  if (ldh < d) return Status::invalid_argument("ldh", str_cat("must be >= d (d=", d, ", ldh=", ldh, ")"));
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");
  LLMK_RETURN_IF_ERROR(detail::check_damping(opt));
  const std::size_t n2 = static_cast<std::size_t>(d * d);
  std::vector<float>& a = *out;
  std::vector<float> diag(static_cast<std::size_t>(d));
  DampingReport rep;
  double percdamp = opt.percdamp;
  for (int attempt = 0; attempt <= opt.max_retries; ++attempt) {
    if (attempt > 0) {
      ++rep.retries;
      percdamp = percdamp > 0.0 ? percdamp * opt.damp_growth : 1e-4;
    }
    a.assign(n2, 0.0f);
    for (std::int64_t i = 0; i < d; ++i)
      for (std::int64_t j = 0; j < d; ++j) a[static_cast<std::size_t>(i * d + j)] = h[i * ldh + j];
    double damp = 0.0;
    LLMK_RETURN_IF_ERROR(dampen(a.data(), d, d, percdamp, &damp));
    for (std::int64_t i = 0; i < d; ++i)
      diag[static_cast<std::size_t>(i)] = a[static_cast<std::size_t>(i * d + i)];
    std::int64_t failed = 0;
    LLMK_RETURN_IF_ERROR(la.cholesky(Uplo::kLower, d, a.data(), d, &failed));
    if (failed == 0 && opt.retry_weak_pivots) failed = detail::weak_pivot(a.data(), diag.data(), d, d);
    if (failed == 0) LLMK_RETURN_IF_ERROR(la.cholesky_inverse(Uplo::kLower, d, a.data(), d, &failed));
    if (failed == 0 && !detail::all_finite(a.data(), d * d)) failed = d;
    if (failed == 0 && form == InverseForm::kUpperCholesky) {
      LLMK_RETURN_IF_ERROR(la.cholesky(Uplo::kUpper, d, a.data(), d, &failed));
      for (std::int64_t i = 0; i < d && failed == 0; ++i)
        for (std::int64_t j = 0; j < i; ++j) a[static_cast<std::size_t>(i * d + j)] = 0.0f;
      if (failed == 0 && !detail::all_finite(a.data(), d * d)) failed = d;
    }
    if (failed != 0) {
      rep.failed_pivot = failed;
      continue;
    }
    rep.percdamp = percdamp;
    rep.damp = damp;
    if (report != nullptr) {
      rep.dead_columns = report->dead_columns;
      *report = rep;
    }
    return {};
  }
  a.clear();
  if (report != nullptr) {
    rep.dead_columns = report->dead_columns;
    rep.percdamp = percdamp;
    *report = rep;
  }
  return Status::invalid_argument(
      "h", str_cat("is not positive definite even with percdamp = ", percdamp, " after ", rep.retries,
                   " retries (last failing pivot ", rep.failed_pivot, "); check the calibration data"));
}

// ---- phase timings
// -------------------------------------------------------------------------------------------------

/// Where the wall-clock time of one GPTQ / SparseGPT / OBQ run went, in seconds (the GPU
/// paths synchronize their stream at the phase boundaries, so the split is exact there too):
///   prepare      copies, dead columns, act-order permutation, grids from the original weights
///   inverse      damping + Cholesky + inverse + upper Cholesky of H^-1 (with the retries)
///   column_loop  the in-block column loops (quantize / prune one column, update the rest of the block)
///   trailing     the lazy trailing updates W[:, i2:] -= Err U[i1:i2, i2:] (backend GEMM)
///   loss         the reported layer loss 1/2 tr((W - Q) H (W - Q)^T)
///   double t = q.timings.inverse_s + q.timings.column_loop_s + q.timings.trailing_s;
struct ObsTimings {
  double prepare_s = 0.0, inverse_s = 0.0, column_loop_s = 0.0, trailing_s = 0.0, loss_s = 0.0;
  double total() const { return prepare_s + inverse_s + column_loop_s + trailing_s + loss_s; }
};

namespace detail {
// Seconds since `start` (std::chrono::steady_clock).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace detail

// ---- the quantized-layer format (OBQ and GPTQ output)
// -------------------------------------------------------------------

/// A quantized weight [rows = N, cols = K] in the format of llmk/gemm/weight_only.cuh (and its host reference
/// llmk/reference/weight_only.hpp): dequantized w[n, k] = scales[g, n] * (codes[n, k] - zeros[g, n]) with
/// g = g_idx[k]. codes are unsigned, one per byte, in the ORIGINAL column order; pack_plain_codes() makes the
/// repack's plain input; act_order_permutation(g_idx) gives the GEMM's perm.
///   std::vector<std::uint8_t> plain;
///   llmk::throw_if_error(llmk::obs::pack_plain_codes(layer, &plain));  // 4-bit: two codes a byte
struct QuantizedLayer {
  std::int64_t rows = 0, cols = 0;
  int bits = 4;
  bool symmetric = true;
  SymmetricGrid symmetric_grid = SymmetricGrid::kFullRange;  ///< which symmetric grid (symmetric only)
  std::int64_t group_size = 0;                               ///< columns per group (cols for per-channel)
  std::int64_t groups = 0;                                   ///< cols / group_size
  std::vector<std::uint8_t> codes;                           ///< [rows, cols] unsigned codes u
  std::vector<float> scales;        ///< [groups, rows] (GPTQ's layout): group g of row n at g * rows + n
  std::vector<std::uint8_t> zeros;  ///< [groups, rows] zero-point codes (symmetric: 2^(bits-1))
  std::vector<std::int32_t> g_idx;  ///< [cols] group of each column
  std::vector<std::int32_t> order;  ///< [cols] the processing order (order[i] = original column); act-order
  std::vector<float> dequantized;   ///< [rows, cols] s * (u - z) in fp32, original column order
  double loss = 0.0;  ///< 1/2 tr((W - Q) H (W - Q)^T), H the Hessian given (undamped) = ||(W - Q) X||^2 / n
  double loss_estimate = 0.0;  ///< the algorithm's own sum of saliencies (the objective with the damped H)
  DampingReport damping;
  ObsTimings timings;  ///< where the time went (GPTQ, SparseGPT; OBQ: inverse, column_loop, loss)
};

/// The repack's plain input (llmk::gemm::WeightRepackArgs::w, ld_bytes = ceil(cols / 2) or cols): 4-bit codes
/// two a byte (element 2i in the low nibble), 8-bit one a byte. 2- and 3-bit layers have no GEMM yet.
///   std::vector<std::uint8_t> plain;
///   llmk::Status s = llmk::obs::pack_plain_codes(layer, &plain);
inline Status pack_plain_codes(const QuantizedLayer& layer, std::vector<std::uint8_t>* plain) {
  if (plain == nullptr) return Status::invalid_argument("plain", "must not be null");
  if (layer.bits != 4 && layer.bits != 8)
    return Status::unsupported(str_cat("bits=", layer.bits, " for the weight-only GEMM (supported: 4, 8)"));
  if (static_cast<std::int64_t>(layer.codes.size()) != layer.rows * layer.cols)
    return Status::invalid_argument("layer", "codes must hold rows * cols elements");
  if (layer.bits == 8) {
    *plain = layer.codes;
    return {};
  }
  const std::int64_t ld = (layer.cols + 1) / 2;
  plain->assign(static_cast<std::size_t>(layer.rows * ld), 0);
  for (std::int64_t r = 0; r < layer.rows; ++r)
    for (std::int64_t c = 0; c < layer.cols; ++c)
      (*plain)[static_cast<std::size_t>(r * ld + c / 2)] |= static_cast<std::uint8_t>(
          (layer.codes[static_cast<std::size_t>(r * layer.cols + c)] & 0xF) << (4 * (c % 2)));
  return {};
}

namespace detail {

struct LayerArgs {
  const float* w;
  std::int64_t rows, cols, ldw;
  const float* h;
  std::int64_t ldh;
};

// The weight half of validate_layer (magnitude pruning needs no Hessian).
inline Status validate_weights(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw) {
  if (rows < 1) return Status::invalid_argument("rows", str_cat("must be >= 1, got ", rows));
  if (cols < 1) return Status::invalid_argument("cols", str_cat("must be >= 1, got ", cols));
  if (w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (ldw < cols)
    return Status::invalid_argument("ldw", str_cat("must be >= cols (cols=", cols, ", ldw=", ldw, ")"));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      if (!std::isfinite(w[r * ldw + c]))
        return Status::invalid_argument("w",
                                        str_cat("must be finite; w[", r, ", ", c, "] = ", w[r * ldw + c]));
  return {};
}

inline Status validate_layer(const LayerArgs& a) {
  LLMK_RETURN_IF_ERROR(validate_weights(a.w, a.rows, a.cols, a.ldw));
  if (a.cols > std::numeric_limits<int>::max())  // before any cols^2 buffer: LAPACK/BLAS take 32-bit sizes
    return Status::invalid_argument("cols",
                                    str_cat("must be < 2^31 (the backend's sizes are 32-bit), got ", a.cols));
  if (a.h == nullptr) return Status::invalid_argument("h", "must not be null");
  if (a.ldh < a.cols)
    return Status::invalid_argument(
        "ldh", str_cat("must be >= cols (the Hessian is [cols, cols]; cols=", a.cols, ", ldh=", a.ldh, ")"));
  for (std::int64_t i = 0; i < a.cols; ++i)
    for (std::int64_t j = 0; j < a.cols; ++j)
      if (!std::isfinite(a.h[i * a.ldh + j]))
        return Status::invalid_argument(
            "h", str_cat("must be finite; h[", i, ", ", j, "] = ", a.h[i * a.ldh + j]));
  for (std::int64_t i = 0; i < a.cols; ++i)
    if (a.h[i * a.ldh + i] < 0.0f)
      return Status::invalid_argument(
          "h", str_cat("must have a non-negative diagonal; h[", i, ", ", i, "] = ", a.h[i * a.ldh + i]));
  return {};
}

// GPTQ's MSE clip search options (llmk::quant::mse_clip_search), checked only when the search is on.
inline Status check_mse_options(bool mse_clip, int grid, double maxshrink, double norm) {
  if (!mse_clip) return {};
  if (grid < 1) return Status::invalid_argument("mse_grid", str_cat("must be >= 1, got ", grid));
  if (!(maxshrink > 0.0 && maxshrink <= 1.0))
    return Status::invalid_argument("mse_maxshrink", str_cat("must be in (0, 1], got ", maxshrink));
  // A huge norm overflows every candidate's error to inf (the search could not choose): keep it sane.
  if (!(norm > 0.0 && norm <= 64.0))
    return Status::invalid_argument("mse_norm", str_cat("must be in (0, 64], got ", norm));
  return {};
}

inline Status validate_quant_choice(int bits, std::int64_t group_size, std::int64_t cols) {
  LLMK_RETURN_IF_ERROR(check_bits(bits));
  if (group_size < 0 || (group_size > 0 && cols % group_size != 0))
    return Status::invalid_argument(
        "group_size",
        str_cat("must be 0 (per-channel) or divide cols (cols=", cols, ", group_size=", group_size, ")"));
  return {};
}

// Dense copies of W and H with the dead columns fixed.
inline void dense_copies(const LayerArgs& a, std::vector<float>& w, std::vector<float>& h,
                         std::int64_t* dead) {
  w.resize(static_cast<std::size_t>(a.rows * a.cols));
  h.resize(static_cast<std::size_t>(a.cols * a.cols));
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t c = 0; c < a.cols; ++c)
      w[static_cast<std::size_t>(r * a.cols + c)] = a.w[r * a.ldw + c];
  // The symmetric part (H + H^T) / 2: the objective 1/2 e H e^T only sees it, and the factorizations read one
  // triangle, so a slightly asymmetric H (accumulated elsewhere) is used consistently everywhere.
  for (std::int64_t i = 0; i < a.cols; ++i)
    for (std::int64_t j = 0; j < a.cols; ++j)
      h[static_cast<std::size_t>(i * a.cols + j)] = 0.5f * (a.h[i * a.ldh + j] + a.h[j * a.ldh + i]);
  (void)fix_dead_columns(h.data(), a.cols, a.cols, w.data(), a.rows, a.cols, dead);  // validated already
}

// 1/2 tr(E H E^T), E = W - Q (both [rows, cols] dense; W read through ldw), through the backend's GEMM.
inline Status layer_loss(const LayerArgs& a, const std::vector<float>& q, LinalgBackend& la, double* loss) {
  std::vector<float> e(static_cast<std::size_t>(a.rows * a.cols)), eh(e.size());
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t c = 0; c < a.cols; ++c)
      e[static_cast<std::size_t>(r * a.cols + c)] =
          a.w[r * a.ldw + c] - q[static_cast<std::size_t>(r * a.cols + c)];
  LLMK_RETURN_IF_ERROR(la.gemm(Op::kNone, Op::kNone, a.rows, a.cols, a.cols, 1.0f, e.data(), a.cols, a.h,
                               a.ldh, 0.0f, eh.data(), a.cols));
  double s = 0.0;
  for (std::size_t i = 0; i < e.size(); ++i) s += static_cast<double>(e[i]) * eh[i];
  *loss = 0.5 * s;
  return {};
}

// Quantization parameters of one group of values on the symmetric grid `sgrid` (grid_params: min/max, or
// GPTQ's MSE clip search over its candidates).
template <class Q>
quant::QuantParams group_params(const float* x, std::int64_t count, SymmetricGrid sgrid, bool mse, int grid,
                                double maxshrink, double norm) {
  const auto params_of = [sgrid](float lo, float hi) { return grid_params<Q>(lo, hi, sgrid); };
  if (mse)
    return quant::mse_clip_search<Q>(std::span<const float>(x, static_cast<std::size_t>(count)), grid,
                                     maxshrink, norm, params_of)
        .params;
  quant::MinMaxCalibrator mm;
  mm.observe(x, static_cast<std::size_t>(count));
  return params_of(mm.min(), mm.max());
}

// GPTQ's and SparseGPT's dynamic group grids, GroupGrid::kBlockStart (the reference code's rule, the
// default): the grid of the group [j, j + G) is set when the column loop of block [i1, i2) reaches column j,
// from W as it stood when the block began: the block's columns from `start` (W[:, i1:i2] copied at the block
// start, [n, i2 - i1]), those past the block from wp, which this block's errors have not reached yet (the
// reference's find_params(W[:, j:j+G]) reads W, not the block's working copy W1). Calls set(r, values).
template <class Set>
void block_start_group_values(const std::vector<float>& start, const std::vector<float>& wp, std::int64_t n,
                              std::int64_t d, std::int64_t j, std::int64_t G, std::int64_t i1,
                              std::int64_t i2, std::vector<float>& group_vals, Set set) {
  const std::int64_t count = i2 - i1, inside = std::min(G, i2 - j);
  group_vals.resize(static_cast<std::size_t>(G));
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t t = 0; t < inside; ++t)
      group_vals[static_cast<std::size_t>(t)] = start[static_cast<std::size_t>(r * count + j - i1 + t)];
    for (std::int64_t t = inside; t < G; ++t)
      group_vals[static_cast<std::size_t>(t)] = wp[static_cast<std::size_t>(r * d + j + t)];
    set(r, group_vals.data());
  }
}

// The W[:, i1:i2] copy block_start_group_values reads, taken at the start of block [i1, i2).
inline void copy_block_start(const std::vector<float>& wp, std::int64_t n, std::int64_t d, std::int64_t i1,
                             std::int64_t i2, std::vector<float>& start) {
  const std::int64_t count = i2 - i1;
  start.resize(static_cast<std::size_t>(n * count));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t t = 0; t < count; ++t)
      start[static_cast<std::size_t>(r * count + t)] = wp[static_cast<std::size_t>(r * d + i1 + t)];
}

// GroupGrid::kCurrent: the grid of the group [j, j + G) is set when the column loop of
// block [i1, i2) reaches column j, from the current weights. The group's columns past the block have not
// received this block's updates yet: they are added to a copy, tmp = W[:, i2:j+G] - Err[:, :j-i1] U[i1:j,
// i2:j+G] (wp [n, d], err [n, bs], u [d, d], all row-major). Calls set(r, values) with the G current values
// of row r.
template <class Set>
Status current_group_values(const std::vector<float>& wp, std::int64_t n, std::int64_t d, std::int64_t j,
                            std::int64_t G, std::int64_t i1, std::int64_t i2, const std::vector<float>& err,
                            std::int64_t bs, const std::vector<float>& u, LinalgBackend& la,
                            std::vector<float>& tmp, std::vector<float>& group_vals, Set set) {
  const std::int64_t tail = std::max<std::int64_t>(0, j + G - i2);
  if (tail > 0) {
    tmp.assign(static_cast<std::size_t>(n * tail), 0.0f);
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t t = 0; t < tail; ++t)
        tmp[static_cast<std::size_t>(r * tail + t)] = wp[static_cast<std::size_t>(r * d + i2 + t)];
    if (j > i1)
      LLMK_RETURN_IF_ERROR(la.gemm(Op::kNone, Op::kNone, n, tail, j - i1, -1.0f, err.data(), bs,
                                   u.data() + i1 * d + i2, d, 1.0f, tmp.data(), tail));
  }
  group_vals.resize(static_cast<std::size_t>(G));
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t inside = G - tail;
    for (std::int64_t t = 0; t < inside; ++t)
      group_vals[static_cast<std::size_t>(t)] = wp[static_cast<std::size_t>(r * d + j + t)];
    for (std::int64_t t = 0; t < tail; ++t)
      group_vals[static_cast<std::size_t>(inside + t)] = tmp[static_cast<std::size_t>(r * tail + t)];
    set(r, group_vals.data());
  }
  return {};
}

// The dynamic group grids of GPTQ's and SparseGPT's column loops under either GroupGrid rule: begin_block at
// each block start (kBlockStart keeps W[:, i1:i2] as it is then), at_group when column j begins a group.
class DynamicGroupGrids {
 public:
  explicit DynamicGroupGrids(GroupGrid rule) : rule_(rule) {}
  void begin_block(const std::vector<float>& wp, std::int64_t n, std::int64_t d, std::int64_t i1,
                   std::int64_t i2) {
    if (rule_ == GroupGrid::kBlockStart) copy_block_start(wp, n, d, i1, i2, block_start_);
  }
  // Calls set(r, values) with the G values row r's grid of group [j, j + G) is computed from.
  template <class Set>
  Status at_group(const std::vector<float>& wp, std::int64_t n, std::int64_t d, std::int64_t j,
                  std::int64_t G, std::int64_t i1, std::int64_t i2, const std::vector<float>& err,
                  std::int64_t bs, const std::vector<float>& u, LinalgBackend& la, Set set) {
    if (rule_ == GroupGrid::kBlockStart) {
      block_start_group_values(block_start_, wp, n, d, j, G, i1, i2, values_, set);
      return {};
    }
    return current_group_values(wp, n, d, j, G, i1, i2, err, bs, u, la, tmp_, values_, set);
  }

 private:
  GroupGrid rule_;
  std::vector<float> block_start_, tmp_, values_;
};

}  // namespace detail

// ---- OBS pruning
// -----------------------------------------------------------------------------------------------------

/// Options of obs_prune.
struct ObsPruneOptions {
  std::int64_t prune_per_row = 0;  ///< weights removed from every row, in [0, cols]
  DampingOptions damping;          ///< percdamp 0.01, x10 retries
};

/// obs_prune's output: the pruned and compensated weights and what it cost.
struct ObsPruneResult {
  std::vector<float> weights;      ///< [rows, cols], pruned weights exactly 0
  std::vector<std::uint8_t> mask;  ///< [rows, cols], 1 = kept
  std::vector<double> row_loss;    ///< [rows] sum of the saliencies (the damped objective's increase)
  double loss = 0.0;               ///< 1/2 tr((W - W') H (W - W')^T), H as given
  DampingReport damping;
};

/// OBS pruning, row by row: prune_per_row times, remove the weight of least saliency w_q^2 / (2 [H^-1]_qq),
/// apply the optimal update to the rest of the row and downdate H^-1. The row's arithmetic is fp64 (H^-1 from
/// the backend in fp32). Cost: O(cols^3) for the inverse, plus O(prune_per_row cols^2) per row (each row
/// downdates its own copy of H^-1: an exact but slow method, for small layers and as the reference that
/// SparseGPT approximates). h [cols, cols] is the layer Hessian (llmk/obs/hessian.cuh); dead columns and
/// dampening are handled here (DampingReport).
///   llmk::obs::ObsPruneOptions opt;  opt.prune_per_row = 2;
///   llmk::obs::ObsPruneResult out;
///   llmk::Status s = llmk::obs::obs_prune(w.data(), rows, cols, cols, h.data(), cols, opt, la, &out);
inline Status obs_prune(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                        const float* h, std::int64_t ldh, const ObsPruneOptions& opt, LinalgBackend& la,
                        ObsPruneResult* out) {
  const detail::LayerArgs a{w, rows, cols, ldw, h, ldh};
  LLMK_RETURN_IF_ERROR(detail::validate_layer(a));
  if (opt.prune_per_row < 0 || opt.prune_per_row > cols)
    return Status::invalid_argument("prune_per_row", str_cat("must be in [0, cols] (cols=", cols,
                                                             ", prune_per_row=", opt.prune_per_row, ")"));
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");
  std::vector<float> wd, hd, hinv;
  DampingReport rep;
  detail::dense_copies(a, wd, hd, &rep.dead_columns);
  LLMK_RETURN_IF_ERROR(
      damped_inverse(hd.data(), cols, cols, opt.damping, InverseForm::kFull, la, &hinv, &rep));
  ObsPruneResult res;
  res.weights.resize(wd.size());
  res.mask.assign(wd.size(), 1);
  res.row_loss.assign(static_cast<std::size_t>(rows), 0.0);
  std::vector<double> row(static_cast<std::size_t>(cols)), hi(hinv.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c)
      row[static_cast<std::size_t>(c)] = wd[static_cast<std::size_t>(r * cols + c)];
    for (std::size_t i = 0; i < hinv.size(); ++i) hi[i] = hinv[i];
    std::uint8_t* mask = res.mask.data() + r * cols;
    for (std::int64_t k = 0; k < opt.prune_per_row; ++k) {
      std::int64_t best = -1;
      double best_s = std::numeric_limits<double>::infinity();
      for (std::int64_t c = 0; c < cols; ++c) {
        if (!mask[c]) continue;
        const double s =
            obs_saliency(row[static_cast<std::size_t>(c)], hi[static_cast<std::size_t>(c * cols + c)]);
        if (best < 0 || s < best_s) {  // a NaN / inf saliency still yields a column
          best_s = s;
          best = c;
        }
      }
      res.row_loss[static_cast<std::size_t>(r)] +=
          detail::obs_update_unchecked(row.data(), cols, hi.data(), cols, best, 0.0);
      detail::obs_downdate_unchecked(hi.data(), cols, cols, best);
      mask[best] = 0;
      for (std::int64_t c = 0; c < cols; ++c)  // keep pruned weights exactly 0 (the downdated rows are 0)
        if (!mask[c]) row[static_cast<std::size_t>(c)] = 0.0;
    }
    for (std::int64_t c = 0; c < cols; ++c)
      res.weights[static_cast<std::size_t>(r * cols + c)] =
          static_cast<float>(row[static_cast<std::size_t>(c)]);
  }
  if (!detail::all_finite(res.weights.data(), rows * cols))
    return Status::internal("obs_prune produced non-finite weights");
  LLMK_RETURN_IF_ERROR(detail::layer_loss(a, res.weights, la, &res.loss));
  res.damping = rep;
  *out = std::move(res);
  return {};
}

// ---- OBQ
// ---------------------------------------------------------------------------------------------------------------

/// Which free weight OBQ quantizes next (per row, with the OBS update and downdate either way).
enum class ObqOrder {
  /// OBQ/OBC's greedy: the least quantization saliency (quant(w_q) - w_q)^2 / (2 [H_F^-1]_qq), except that a
  /// weight the updates pushed off its grid (error above half a step) goes first, the largest error first
  /// (OBC's outlier rule).
  kLeastSaliency,
  /// The most determined weight first: the smallest [H_F^-1]_qq (the weight whose error the others can least
  /// compensate, i.e. the largest effective H_qq). The ordering rule of successive cancellation (V-BLAST) and
  /// the adaptive, per-row form of GPTQ's act-order; outlier rule as above. On layers with outlier input
  /// channels the least-saliency greedy leaves those expensive weights for last, when nothing is left free to
  /// compensate their error, and can end near round-to-nearest; this order does not.
  kMostDetermined,
  /// Both greedy orders, keeping per row the one with the smaller objective (twice the cost). Default.
  kBestOfBoth,
};

/// Options of obq_quantize (the quantization choices are GPTQ's, llmk/obs/gptq.hpp).
struct ObqOptions {
  int bits = 4;           ///< 2, 3, 4 or 8
  bool symmetric = true;  ///< symmetric (signed grid, no zero point) or asymmetric
  SymmetricGrid symmetric_grid = SymmetricGrid::kFullRange;  ///< 2^b levels as the reference, or kAbsmax
  std::int64_t group_size = 0;                               ///< 0: per-channel; else it must divide cols
  bool mse_clip = false;  ///< GPTQ's MSE clip search for the grid (llmk::quant::mse_clip_search)
  int mse_grid = 100;
  double mse_maxshrink = 0.8;
  double mse_norm = 2.4;
  ObqOrder order = ObqOrder::kBestOfBoth;
  /// Coordinate-descent sweeps after the greedy pass (0 = none): each weight in turn moves to the grid point
  /// that minimizes the exact objective 1/2 e H e^T with the others fixed (the grid point nearest to the 1-D
  /// minimizer; a move is kept only when it lowers the objective, so the loss never grows). O(cols^2) a
  /// sweep.
  int refine_sweeps = 0;
  DampingOptions damping;
};

namespace detail {

// One row of OBQ in fp64: greedy quantization in `order` with OBS updates and downdates of the row's own copy
// of H^-1. Writes the row's codes (Q's signed/unsigned code, not yet offset) and grid values; returns the
// saliency sum (the damped objective).
template <class Q>
double obq_row(const float* w, std::int64_t cols, const std::vector<float>& hinv,
               const std::vector<quant::QuantParams>& params, std::int64_t group_size, ObqOrder order,
               std::vector<int>& codes, std::vector<double>& values) {
  const std::size_t d = static_cast<std::size_t>(cols);
  std::vector<double> row(d), hi(hinv.begin(), hinv.end());
  std::vector<std::uint8_t> done(d, 0);
  for (std::size_t c = 0; c < d; ++c) row[c] = w[c];
  double saliency_sum = 0.0;
  for (std::int64_t k = 0; k < cols; ++k) {
    std::int64_t best = -1;
    double best_key = 0.0, best_t = 0.0;
    int best_code = 0;
    bool best_out = false;
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t uc = static_cast<std::size_t>(c);
      if (done[uc]) continue;
      const quant::QuantParams& p = params[static_cast<std::size_t>(c / group_size)];
      const int code = static_cast<int>(Q::quantize(static_cast<float>(row[uc]), p));
      const double t = Q::dequantize(code, p);
      const double gap = std::fabs(t - row[uc]);
      // Off the grid (clamped): quantize it now, the largest error first, whatever the order.
      const bool out = gap > 0.5 * static_cast<double>(p.scale) * (1.0 + 1e-6);
      const double hqq = hi[uc * d + uc];
      const double key = out ? -gap : order == ObqOrder::kLeastSaliency ? obs_saliency(row[uc], hqq, t) : hqq;
      if (best >= 0 && (best_out && !out)) continue;
      if (best < 0 || (out && !best_out) || key < best_key) {
        best = c;
        best_key = key;
        best_t = t;
        best_code = code;
        best_out = out;
      }
    }
    saliency_sum += detail::obs_update_unchecked(row.data(), cols, hi.data(), cols, best, best_t);
    detail::obs_downdate_unchecked(hi.data(), cols, cols, best);
    const std::size_t ub = static_cast<std::size_t>(best);
    done[ub] = 1;
    codes[ub] = best_code;
    values[ub] = best_t;
    for (std::size_t c = 0; c < d; ++c)  // fixed weights stay exactly at their grid points
      if (done[c]) row[c] = values[c];
  }
  return saliency_sum;
}

// Coordinate descent on 1/2 e H e^T (e = w - q, H [cols, cols] as given) over the grid, `sweeps` passes.
template <class Q>
void obq_refine_row(const float* w, std::int64_t cols, const std::vector<float>& h,
                    const std::vector<quant::QuantParams>& params, std::int64_t group_size, int sweeps,
                    std::vector<int>& codes, std::vector<double>& values) {
  const std::size_t d = static_cast<std::size_t>(cols);
  std::vector<double> e(d), he(d, 0.0);  // he = H e
  for (std::size_t i = 0; i < d; ++i) e[i] = static_cast<double>(w[i]) - values[i];
  for (std::size_t i = 0; i < d; ++i)
    for (std::size_t j = 0; j < d; ++j) he[i] += static_cast<double>(h[i * d + j]) * e[j];
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    bool moved = false;
    for (std::size_t j = 0; j < d; ++j) {
      const double hjj = h[j * d + j];
      if (!(hjj > 0.0)) continue;
      // With the others fixed the objective in q_j is a parabola with its minimum at q_j + (H e)_j / H_jj.
      const quant::QuantParams& p = params[j / static_cast<std::size_t>(group_size)];
      const int code = static_cast<int>(Q::quantize(static_cast<float>(values[j] + he[j] / hjj), p));
      const double t = Q::dequantize(code, p);
      const double delta = values[j] - t;  // change of e_j
      if (delta == 0.0 || delta * he[j] + 0.5 * delta * delta * hjj >= 0.0) continue;
      values[j] = t;
      codes[j] = code;
      e[j] += delta;
      for (std::size_t i = 0; i < d; ++i) he[i] += static_cast<double>(h[i * d + j]) * delta;
      moved = true;
    }
    if (!moved) break;
  }
}

}  // namespace detail

/// OBQ (Optimal Brain Quantizer, Frantar & Alistarh 2022), row by row: the grid of every group is fixed from
/// the original weights; then cols times, quantize the next free weight (ObqOptions::order: OBQ's least
/// saliency (quant(w_q) - w_q)^2 / (2 [H^-1]_qq), the most determined weight, or the better of both per row),
/// apply the optimal update to the free weights and downdate H^-1; optional coordinate-descent sweeps. fp64
/// row arithmetic. Cost: O(cols^3) per row and order (GPTQ approximates this with a fixed order in O(cols^2)
/// per row). Output: the weight-only GEMM's format (QuantizedLayer; g_idx[k] = k / group_size, order =
/// identity).
///   llmk::obs::ObqOptions opt;  opt.bits = 4;
///   llmk::obs::QuantizedLayer q;
///   llmk::Status s = llmk::obs::obq_quantize(w.data(), rows, cols, cols, h.data(), cols, opt, la, &q);
inline Status obq_quantize(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                           const float* h, std::int64_t ldh, const ObqOptions& opt, LinalgBackend& la,
                           QuantizedLayer* out) {
  const detail::LayerArgs a{w, rows, cols, ldw, h, ldh};
  LLMK_RETURN_IF_ERROR(detail::validate_layer(a));
  LLMK_RETURN_IF_ERROR(detail::validate_quant_choice(opt.bits, opt.group_size, cols));
  LLMK_RETURN_IF_ERROR(detail::check_symmetric_grid(opt.symmetric_grid));
  if (opt.order != ObqOrder::kLeastSaliency && opt.order != ObqOrder::kMostDetermined &&
      opt.order != ObqOrder::kBestOfBoth)
    return Status::invalid_argument("order", "must be an ObqOrder value");
  if (opt.refine_sweeps < 0)
    return Status::invalid_argument("refine_sweeps", str_cat("must be >= 0, got ", opt.refine_sweeps));
  LLMK_RETURN_IF_ERROR(
      detail::check_mse_options(opt.mse_clip, opt.mse_grid, opt.mse_maxshrink, opt.mse_norm));
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");
  ObsTimings times;
  auto phase = std::chrono::steady_clock::now();
  std::vector<float> wd, hd, hinv;
  DampingReport rep;
  detail::dense_copies(a, wd, hd, &rep.dead_columns);
  LLMK_RETURN_IF_ERROR(
      damped_inverse(hd.data(), cols, cols, opt.damping, InverseForm::kFull, la, &hinv, &rep));
  times.inverse_s = detail::seconds_since(phase);
  phase = std::chrono::steady_clock::now();
  QuantizedLayer res;
  res.rows = rows;
  res.cols = cols;
  res.bits = opt.bits;
  res.symmetric = opt.symmetric;
  res.symmetric_grid = opt.symmetric_grid;
  res.group_size = opt.group_size == 0 ? cols : opt.group_size;
  res.groups = cols / res.group_size;
  res.codes.assign(static_cast<std::size_t>(rows * cols), 0);
  res.dequantized.assign(static_cast<std::size_t>(rows * cols), 0.0f);
  res.scales.assign(static_cast<std::size_t>(res.groups * rows), 0.0f);
  res.zeros.assign(static_cast<std::size_t>(res.groups * rows), 0);
  res.g_idx.resize(static_cast<std::size_t>(cols));
  res.order.resize(static_cast<std::size_t>(cols));
  for (std::int64_t c = 0; c < cols; ++c) {
    res.g_idx[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(c / res.group_size);
    res.order[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(c);
  }
  Status status = with_quantizer(opt.bits, opt.symmetric, opt.symmetric_grid, [&]<class Q>() -> Status {
    const std::size_t d = static_cast<std::size_t>(cols);
    std::vector<quant::QuantParams> params(static_cast<std::size_t>(res.groups));
    std::vector<int> codes(d), codes2(d);
    std::vector<double> values(d), values2(d);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* wr = wd.data() + r * cols;
      for (std::int64_t g = 0; g < res.groups; ++g) {
        const quant::QuantParams p =
            detail::group_params<Q>(wr + g * res.group_size, res.group_size, opt.symmetric_grid, opt.mse_clip,
                                    opt.mse_grid, opt.mse_maxshrink, opt.mse_norm);
        params[static_cast<std::size_t>(g)] = p;
        res.scales[static_cast<std::size_t>(g * rows + r)] = p.scale;
        res.zeros[static_cast<std::size_t>(g * rows + r)] =
            static_cast<std::uint8_t>(p.zero_point + kCodeOffset<Q>);
      }
      const ObqOrder first =
          opt.order == ObqOrder::kMostDetermined ? ObqOrder::kMostDetermined : ObqOrder::kLeastSaliency;
      double best = detail::obq_row<Q>(wr, cols, hinv, params, res.group_size, first, codes, values);
      if (opt.order == ObqOrder::kBestOfBoth) {
        const double other = detail::obq_row<Q>(wr, cols, hinv, params, res.group_size,
                                                ObqOrder::kMostDetermined, codes2, values2);
        if (other < best) {
          best = other;
          codes.swap(codes2);
          values.swap(values2);
        }
      }
      if (opt.refine_sweeps > 0)
        detail::obq_refine_row<Q>(wr, cols, hd, params, res.group_size, opt.refine_sweeps, codes, values);
      res.loss_estimate += best;
      for (std::size_t c = 0; c < d; ++c) {
        res.codes[r * d + c] = static_cast<std::uint8_t>(codes[c] + kCodeOffset<Q>);
        res.dequantized[r * d + c] = static_cast<float>(values[c]);
      }
    }
    return {};
  });
  LLMK_RETURN_IF_ERROR(status);
  times.column_loop_s = detail::seconds_since(phase);
  if (!detail::all_finite(res.dequantized.data(), rows * cols))
    return Status::internal("obq produced non-finite weights");
  phase = std::chrono::steady_clock::now();
  LLMK_RETURN_IF_ERROR(detail::layer_loss(a, res.dequantized, la, &res.loss));
  times.loss_s = detail::seconds_since(phase);
  res.damping = rep;
  res.timings = times;
  *out = std::move(res);
  return {};
}

}  // namespace llmk::obs
