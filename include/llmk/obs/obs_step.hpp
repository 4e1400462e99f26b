// llmk/obs/obs_step.hpp: the OBS step on one row (T = float or double): the saliency of fixing one weight at
// a target (obs_saliency), the optimal update of the other weights (obs_update) and the Schur downdate of the
// inverse Hessian that removes the fixed weight (obs_downdate), and their unchecked forms, which the
// algorithms' inner loops run. llmk/obs/obs.hpp has the derivation in short, docs/obs.md in full.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "llmk/core/status.cuh"

namespace llmk::obs {

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

}  // namespace llmk::obs
