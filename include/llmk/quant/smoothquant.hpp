// llmk/quant/smoothquant.hpp: SmoothQuant (Xiao et al. 2023) as host helpers, applied offline to a model.
//
// A linear layer Y = X W^T with activations X [tokens, K] and weights W [N, K] is rewritten as
//   Y = (X diag(1/s)) (W diag(s))^T
// with a per-input-channel smoothing factor s [K] that moves quantization difficulty from the activations
// (channel outliers) to the weights:
//   s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)          (alpha default 0.5)
// where max|X_j| is the calibrated absmax of activation column j (llmk::quant::column_amax on calibration
// batches, max over batches) and max|W_j| the absmax of column j over every weight fed by the same input (the
// q, k and v projections of an attention block, gate and up of an MLP). As in the reference implementation
// (smoothquant/smooth.py), max|W_j| is clamped to >= 1e-5 and s_j to
// >= 1e-5. A column whose activation absmax or weight absmax is exactly 0 gets s_j = 1: it contributes
// nothing to Y, so no factor changes the result, and 1 keeps its weights and norm parameters unchanged (the
// reference would give s_j = 1e-5 or an arbitrary large factor). 1/s is folded into the preceding
// normalization (LayerNorm / RMSNorm weight gamma and optional bias beta): gamma_j /= s_j, beta_j /= s_j, so
// the activation X / s is produced for free.
//
//   std::vector<float> s(K);
//   const llmk::quant::WeightView<float> ws[] = {{wq, Nq, K, K}, {wk, Nk, K, K}, {wv, Nv, K, K}};
//   llmk::Status st = llmk::quant::smoothquant_apply(act_amax.data(), K, 0.5f,
//                                                    std::span<const llmk::quant::WeightView<float>>(ws),
//                                                    ln_gamma, ln_beta, s.data());
//
// All helpers return Status::invalid_argument("name", "rule (values)") on bad input and change nothing then.
// Arithmetic: s in fp64 (std::pow), stored as fp32; W' = fp32(W) * s and gamma' = fp32(gamma) / s in fp32,
// rounded once to the storage type (float, llmk::half, llmk::bfloat16).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/quant/scheme.cuh"

namespace llmk::quant {

/// Lower clamp of max|W_j| and of s_j (smoothquant/smooth.py).
inline constexpr double kSmoothQuantMinScale = 1e-5;

/// A row-major [rows, cols] weight with row stride ld (elements). T = (const) float, half or bfloat16.
/// Aggregate order: data, rows, cols, ld:  llmk::quant::WeightView<float> wq{q_proj, N, K, K};
template <class T>
struct WeightView {
  T* data = nullptr;
  std::int64_t rows = 0, cols = 0, ld = 0;
};

namespace detail {
template <class T>
Status check_weight(const WeightView<T>& w, std::int64_t k, const char* name) {
  using U = std::remove_const_t<T>;
  static_assert(std::is_same_v<U, float> || std::is_same_v<U, half> || std::is_same_v<U, bfloat16>,
                "SmoothQuant weights are float, llmk::half or llmk::bfloat16");
  if (w.cols != k)
    return Status::invalid_argument(name, str_cat("must have K columns (K=", k, ", cols=", w.cols, ")"));
  if (w.rows < 0) return Status::invalid_argument(name, str_cat("rows must be >= 0, got ", w.rows));
  if (w.ld < w.cols)
    return Status::invalid_argument(name, str_cat("ld must be >= cols (cols=", w.cols, ", ld=", w.ld, ")"));
  if (w.data == nullptr && w.rows > 0 && w.cols > 0)
    return Status::invalid_argument(name, "data must not be null");
  return {};
}
// The smoothing factors every fold divides or multiplies by: finite and > 0 (0 would make gamma / s
// infinite, a NaN or Inf poison the whole column), all checked before anything is changed.
inline Status check_smoothing_scales(const float* scales, std::int64_t k) {
  if (scales == nullptr && k > 0) return Status::invalid_argument("scales", "must not be null");
  for (std::int64_t j = 0; j < k; ++j)
    if (!(std::isfinite(scales[j]) && scales[j] > 0.0f))
      return Status::invalid_argument("scales",
                                      str_cat("must be finite and > 0 (scales[", j, "]=", scales[j], ")"));
  return {};
}

}  // namespace detail

/// weight_amax[j] = max over every weight W_i [N_i, K] and row r of |W_i[r, j]| (NaN/Inf skipped; 0 for an
/// empty or all-zero column). No clamp here (smoothing_factors applies it).
///   const llmk::quant::WeightView<const float> ws[] = {{q, Nq, K, K}, {k_proj, Nk, K, K}, {v, Nv, K, K}};
///   std::vector<float> w_amax(K);
///   llmk::Status st = llmk::quant::weight_column_amax<const float>(ws, K, w_amax.data());  // T not deduced
/// Errors (Status::invalid_argument naming the argument): k < 0; weight_amax null with k > 0; weights empty;
/// a weight ('weights') without K columns, with rows < 0 or ld < cols, or with null data.
template <class T>
Status weight_column_amax(std::span<const WeightView<T>> weights, std::int64_t k, float* weight_amax) {
  if (k < 0) return Status::invalid_argument("k", str_cat("must be >= 0, got ", k));
  if (weight_amax == nullptr && k > 0) return Status::invalid_argument("weight_amax", "must not be null");
  if (weights.empty()) return Status::invalid_argument("weights", "must hold at least one weight");
  for (const auto& w : weights) LLMK_RETURN_IF_ERROR(detail::check_weight(w, k, "weights"));
  std::fill(weight_amax, weight_amax + k, 0.0f);
  for (const auto& w : weights)
    for (std::int64_t r = 0; r < w.rows; ++r)
      for (std::int64_t j = 0; j < k; ++j) {
        const float v = load_as_float(w.data[r * w.ld + j]);
        if (is_finite(v)) weight_amax[j] = std::max(weight_amax[j], std::fabs(v));
      }
  return {};
}

/// s_j = max(act_amax_j^alpha / max(weight_amax_j, 1e-5)^(1 - alpha), 1e-5), and s_j = 1 where act_amax_j or
/// weight_amax_j is 0. alpha in [0, 1]: alpha = 0 gives s = 1 / max|W_j| (every weight column becomes
/// [-1, 1], all the difficulty moves to the activations); alpha = 1 gives s = max|X_j| (every activation
/// column becomes [-1, 1], all the difficulty moves to the weights). Amax values must be finite and >= 0.
///   llmk::Status st = llmk::quant::smoothing_factors(act_amax, w_amax, K, 0.5f, s);
/// Errors (Status::invalid_argument naming the argument): k < 0; alpha outside [0, 1]; with k > 0, act_amax,
/// weight_amax or scales null, or an act_amax / weight_amax value not finite and >= 0.
inline Status smoothing_factors(const float* act_amax, const float* weight_amax, std::int64_t k, float alpha,
                                float* scales) {
  if (k < 0) return Status::invalid_argument("k", str_cat("must be >= 0, got ", k));
  if (!(alpha >= 0.0f && alpha <= 1.0f))
    return Status::invalid_argument("alpha", str_cat("must be in [0, 1], got ", alpha));
  if (k == 0) return {};
  if (act_amax == nullptr) return Status::invalid_argument("act_amax", "must not be null");
  if (weight_amax == nullptr) return Status::invalid_argument("weight_amax", "must not be null");
  if (scales == nullptr) return Status::invalid_argument("scales", "must not be null");
  for (std::int64_t j = 0; j < k; ++j) {
    if (!(std::isfinite(act_amax[j]) && act_amax[j] >= 0.0f))
      return Status::invalid_argument(
          "act_amax", str_cat("must be finite and >= 0 (act_amax[", j, "]=", act_amax[j], ")"));
    if (!(std::isfinite(weight_amax[j]) && weight_amax[j] >= 0.0f))
      return Status::invalid_argument(
          "weight_amax", str_cat("must be finite and >= 0 (weight_amax[", j, "]=", weight_amax[j], ")"));
  }
  for (std::int64_t j = 0; j < k; ++j) {
    if (act_amax[j] == 0.0f || weight_amax[j] == 0.0f) {
      scales[j] = 1.0f;
      continue;
    }
    const double w = std::max(static_cast<double>(weight_amax[j]), kSmoothQuantMinScale);
    const double s = std::pow(static_cast<double>(act_amax[j]), static_cast<double>(alpha)) /
                     std::pow(w, 1.0 - static_cast<double>(alpha));
    scales[j] = static_cast<float>(std::max(s, kSmoothQuantMinScale));
  }
  return {};
}

/// W[:, j] *= s_j for a weight [rows, K] (in place; fp32 product rounded once to T). Every s_j must be finite
/// and > 0 (invalid_argument naming 'scales' before anything changes).
///   llmk::Status st = llmk::quant::smooth_weight(llmk::quant::WeightView<float>{w, N, K, K}, s);
/// Errors (Status::invalid_argument naming the argument): the scales rule above; w ('w') with rows < 0,
/// ld < cols or null data.
template <class T>
Status smooth_weight(WeightView<T> w, const float* scales) {
  static_assert(!std::is_const_v<T>, "smooth_weight modifies the weight: pass a WeightView of non-const T");
  LLMK_RETURN_IF_ERROR(detail::check_weight(w, w.cols, "w"));
  LLMK_RETURN_IF_ERROR(detail::check_smoothing_scales(scales, w.cols));
  for (std::int64_t r = 0; r < w.rows; ++r)
    for (std::int64_t j = 0; j < w.cols; ++j) {
      T& e = w.data[r * w.ld + j];
      e = convert_output<T>(load_as_float(e) * scales[j]);
    }
  return {};
}

/// Folds 1/s into a preceding normalization: gamma_j /= s_j and, when beta is not null, beta_j /= s_j
/// (fp32 quotient rounded once to T). The normalization then outputs X diag(1/s). Every s_j must be finite
/// and > 0 (invalid_argument naming 'scales' before anything changes).
///   llmk::Status st = llmk::quant::fold_smoothing_into_norm(ln_gamma, ln_beta, K, s);
///   // RMSNorm (no beta): a typed null, e.g. static_cast<llmk::half*>(nullptr), or <llmk::half> given
/// Errors (Status::invalid_argument naming the argument): the scales rule above; k < 0; gamma null with
/// k > 0.
template <class T>
Status fold_smoothing_into_norm(T* gamma, T* beta, std::int64_t k, const float* scales) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>,
                "normalization parameters are float, llmk::half or llmk::bfloat16");
  if (k < 0) return Status::invalid_argument("k", str_cat("must be >= 0, got ", k));
  if (k == 0) return {};
  if (gamma == nullptr) return Status::invalid_argument("gamma", "must not be null");
  LLMK_RETURN_IF_ERROR(detail::check_smoothing_scales(scales, k));
  for (std::int64_t j = 0; j < k; ++j) {
    gamma[j] = convert_output<T>(load_as_float(gamma[j]) / scales[j]);
    if (beta != nullptr) beta[j] = convert_output<T>(load_as_float(beta[j]) / scales[j]);
  }
  return {};
}

/// The whole transformation for one normalization feeding one or several linear layers: computes the weight
/// column absmax over `weights`, s = smoothing_factors(act_amax, ., alpha), scales every weight's columns by
/// s and folds 1/s into gamma (and beta when not null). Writes s to `scales` [K] when not null. Validates
/// everything before changing anything. Errors: those of weight_column_amax, smoothing_factors,
/// smooth_weight and fold_smoothing_into_norm (gamma null with k > 0: 'gamma').
///   const llmk::quant::WeightView<llmk::half> ws[] = {{wq, 4096, 4096, 4096}, {wk, 1024, 4096, 4096}};
///   llmk::Status st = llmk::quant::smoothquant_apply<llmk::half, llmk::half>(  // W, G: not deduced
///       act_amax.data(), 4096, 0.5f, ws, gamma, /*beta (RMSNorm)*/ nullptr, s.data());
template <class W, class G>
Status smoothquant_apply(const float* act_amax, std::int64_t k, float alpha,
                         std::span<const WeightView<W>> weights, G* gamma, G* beta, float* scales) {
  std::vector<WeightView<const W>> views;
  for (const auto& w : weights) views.push_back({w.data, w.rows, w.cols, w.ld});
  std::vector<float> w_amax(static_cast<std::size_t>(std::max<std::int64_t>(k, 0)));
  LLMK_RETURN_IF_ERROR(weight_column_amax(std::span<const WeightView<const W>>(views), k, w_amax.data()));
  std::vector<float> s(w_amax.size());
  LLMK_RETURN_IF_ERROR(smoothing_factors(act_amax, w_amax.data(), k, alpha, s.data()));
  if (gamma == nullptr && k > 0) return Status::invalid_argument("gamma", "must not be null");
  for (const auto& w : weights) LLMK_RETURN_IF_ERROR(smooth_weight(w, s.data()));
  LLMK_RETURN_IF_ERROR(fold_smoothing_into_norm(gamma, beta, k, s.data()));
  if (scales != nullptr) std::copy(s.begin(), s.end(), scales);
  return {};
}

}  // namespace llmk::quant
