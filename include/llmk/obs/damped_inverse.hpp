// llmk/obs/damped_inverse.hpp: from a layer Hessian to the inverse the OBS algorithms need (H^-1 for OBS
// and OBQ, the upper Cholesky factor of H^-1 for GPTQ and SparseGPT), robustly: the dampening and its retry
// policy (DampingOptions), what it took (DampingReport), the failure checks (a failed factorization, a pivot
// at rounding-noise level: detail::weak_pivot, a non-finite result) and damped_inverse. The same policy on
// device memory: damped_upper_cholesky_device (llmk/obs/gpu_path.cuh).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "llmk/core/status.cuh"
#include "llmk/obs/hessian.cuh"
#include "llmk/obs/linalg.hpp"

namespace llmk::obs {

/// How the Hessian was made invertible: dead columns, the percdamp that succeeded, and the retries.
struct DampingReport {
  std::int64_t dead_columns = 0;  ///< columns with H_ii == 0 (weights zeroed, H_ii = 1)
  double percdamp = 0.0;          ///< the percdamp of the successful attempt
  double damp = 0.0;              ///< the value added to the diagonal (percdamp * mean(diag H))
  int retries = 0;                ///< failed attempts before it (each one: percdamp x damp_growth)
  std::int64_t failed_pivot = 0;  ///< 1-based pivot where the last failed attempt broke (0: none failed)
};

/// Dampening and the retry policy (defaults: GPTQ's 0.01, then x10 up to 6 more times: 0.1 .. 10^4).
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

}  // namespace llmk::obs
