// llmk/obs/awq.hpp: AWQ, activation-aware weight quantization (Lin et al. 2023), on the host, as the
// reference implementations do it (mit-han-lab/llm-awq awq/quantize/auto_scale.py + auto_clip.py;
// casper-hansen/AutoAWQ awq/quantize/quantizer.py for duo scaling and the clip token step).
//
// A linear layer Y = X W^T (X [tokens, K] calibration activations, W [N, K]) is rewritten exactly as
//   Y = (X diag(1/s)) (W diag(s))^T
// and W diag(s) is quantized instead of W: input channels with large activations get s > 1, so their weights
// are quantized on a relatively finer grid (the weights that matter most for the output lose the least). 1/s
// is folded into the op that produces X (a norm's gamma/beta or the previous linear's rows), so it is free.
//   1. Scale search. x_mean[k] = mean_t |x[t, k]|. For alpha = i / n_grid, i = 0 .. n_grid-1:
//        s = max(x_mean^alpha, 1e-4)
//            (duo_scaling: s = max(x_mean^alpha / (w_mean^(1-alpha) + 1e-4), 1e-4))
//        s = s / sqrt(max(s) min(s))
//        err(alpha) = mean over (tokens, N) of (X W^T - X (Q(W diag(s)) diag(1/s))^T)^2
//      Q the group-wise pseudo-quantizer. The first alpha with the smallest error wins (strict <). Without
//      duo scaling alpha = 0 is s = 1, plain round-to-nearest, so the chosen error is never above RTN's.
//   2. Clip search (auto_clip) on W' = W diag(s) with X' = X diag(1/s): for each output row and group, the
//      clip value m = amax|W'_group| (1 - i / clip_n_grid), i = 0 .. int(clip_max_shrink clip_n_grid) - 1,
//      that minimizes the group's own output error mean_t (X'_group (Q(clamp(W'_group, -m, m)) -
//      W'_group)^T)^2 over sampled tokens (every step-th token, step = max(1, tokens / clip_sample_tokens)).
//   3. W' is clamped to [-m, m] per group and quantized: the weight-only GEMM's format (QuantizedLayer).
//
//   llmk::obs::AwqOptions opt;                   // 4 bits, group 128, zero point, clip search
//   llmk::obs::AwqResult r;
//   llmk::throw_if_error(llmk::obs::awq_quantize(w.data(), N, K, K, x.data(), T, K, opt, &r));
//   llmk::throw_if_error(llmk::obs::awq_fold_into_norm(gamma, beta, K, r.input_scales.data()));
//   // r.quantized -> pack_plain_codes -> the weight-only GEMM, fed X diag(1/s) by the folded norm
//
// The grid is llmk's (llmk::quant::Quantizer, llmk/quant/scheme.cuh). Deliberate differences from the
// reference, each documented in docs/obs.md ("## AWQ"): the asymmetric range is widened to hold 0 (identical
// whenever a group has both signs, as trained weights do); an all-zero group gets llmk's edge-case parameters
// instead of a span clamped to 1e-5 (both dequantize to exactly 0); AwqOptions::reference_grid gives the
// reference's parameters in both cases; s and the error sums are fp64, while W
// diag(s), the clip values and the quantizer are fp32 like the reference's fp32 tensors (it usually runs in
// fp16). Cost (T tokens, T_c sampled tokens, n_clip = int(clip_max_shrink clip_n_grid)):
//   O(n_grid T N K) for the scale search + O(n_clip T_c N K) for the clip search + O(T N K) for the reported
//   errors: plain fp64 host loops, 20 T N K + 10 T_c N K + 2 T N K multiply-adds at the defaults.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/obs/obs.hpp"
#include "llmk/quant/scheme.cuh"
#include "llmk/quant/smoothquant.hpp"

namespace llmk::obs {

/// Options of awq_quantize. The defaults are the reference's usual configuration: AutoAWQ's default
/// quant_config (w_bit 4, q_group_size 128, zero_point True) = llm-awq's documented --w_bit 4 --q_group_size
/// 128, with llm-awq's search constants.
struct AwqOptions {
  int bits = 4;                   ///< 4 or 8 (the weight-only GEMM's); w_bit 4
  std::int64_t group_size = 128;  ///< q_group_size 128; 0 = per-channel (one group of K columns)
  /// Asymmetric, zero point (the reference's zero_point=True); false: symmetric, s = amax / (2^(b-1) - 1).
  bool zero_point = true;
  int n_grid = 20;  ///< scale search: alpha = i / n_grid, i < n_grid (auto_scale's n_grid = 20)
  /// AutoAWQ's duo scaling s = x^a / (w^(1-a) + 1e-4) (its default is on; llm-awq has only s = x^a).
  bool duo_scaling = false;
  bool clip = true;              ///< clip search (llm-awq's auto_clip; the reference skips q/k projections)
  int clip_n_grid = 20;          ///< auto_clip_layer n_grid = 20
  double clip_max_shrink = 0.5;  ///< auto_clip_layer max_shrink = 0.5: clip factors 1, 0.95, ..., 0.55
  /// auto_clip_layer n_sample_token = 512: every max(1, tokens / 512)-th token (AutoAWQ's step rule).
  std::int64_t clip_sample_tokens = 512;
  /// The reference's pseudo-quantizer parameters in every case (docs/obs.md, "AWQ"): zero point:
  /// s = max(max - min, 1e-5) / (2^b - 1), z = clamp(-round(min / s), 0, 2^b - 1), so a group with no
  /// negative value clips everything above max - min; symmetric: s = max(amax, 1e-5) / (2^(b-1) - 1); and the
  /// clip search's start at 1e9 (no clipping unless a candidate's error is below it). Default (false): llmk's
  /// grid (the range widened to hold 0; an all-zero group s = 1) and a start at +inf.
  bool reference_grid = false;
};

/// What awq_quantize found and produced.
struct AwqResult {
  /// s [K]: the layer's weight columns are multiplied by s, its input must be X diag(1/s)
  /// (awq_fold_into_norm / awq_fold_into_linear fold 1/s into the op producing X).
  std::vector<float> input_scales;
  double alpha = 0.0;                ///< the chosen ratio alpha_index / n_grid
  int alpha_index = 0;               ///< i of the chosen alpha
  std::vector<double> alpha_errors;  ///< [n_grid] err(alpha_i) of the scale search (the reference's history)
  std::vector<float> clip_max;  ///< [N, groups] (n * groups + g): the clip value m of each group of W diag(s)
  std::vector<std::int32_t> clip_step;  ///< [N, groups] i of m = amax (1 - i / clip_n_grid); 0 = not clipped
  /// Q(clamp(W diag(s))) in the weight-only GEMM's format: unsigned codes [N, K] (original column order),
  /// scales and zeros [groups, N] (symmetric: zero 2^(bits-1)), g_idx[k] = k / group_size, order = identity,
  /// dequantized [N, K] (of W diag(s), not of W). loss = loss_estimate = ||X (W - Q diag(1/s))^T||^2 / tokens
  /// (= output_error * N).
  QuantizedLayer quantized;
  double output_error = 0.0;  ///< mean over (tokens, N) of (X W^T - (X diag(1/s)) dequantized^T)^2
  double search_error = 0.0;  ///< err(alpha) of the chosen alpha (scaling only, before the clip search)
  double rtn_error = 0.0;     ///< the same error for round-to-nearest on the same grid (no scaling, no clip)
  double scale_search_s = 0.0, clip_search_s = 0.0, total_s = 0.0;  ///< wall time of the phases
};

namespace detail {

// The reference's parameters (AwqOptions::reference_grid) of a group spanning [lo, hi] (asymmetric) or with
// absolute maximum hi (symmetric), in fp32 as its tensor ops: the span or amax clamped to 1e-5, the zero
// point -round(lo / s) clamped to the codes. A span that overflows fp32 is divided in two parts (llmk's
// rule).
template <class Q>
quant::QuantParams awq_reference_params(float lo, float hi) {
  if constexpr (Q::kAsymmetric) {
    const float steps = static_cast<float>(Q::traits::kQmax - Q::traits::kQmin), span = hi - lo;
    const float scale = std::isfinite(span) ? std::max(span, 1e-5f) / steps : hi / steps - lo / steps;
    const float z = std::clamp(-quant::round_half_even(lo / scale), static_cast<float>(Q::traits::kQmin),
                               static_cast<float>(Q::traits::kQmax));
    return {scale, static_cast<std::int32_t>(z)};
  } else {
    (void)lo;
    return {std::max(hi, 1e-5f) / static_cast<float>(Q::traits::kQmax), 0};
  }
}

// Quantizes v[0, len) (one group, values already clamped) with Q, on llmk's grid or the reference's:
// unsigned codes (offset by 2^(b-1) for the signed symmetric codes; may be null) and dequantized values (may
// be null). Returns the group's parameters with the UNSIGNED zero point.
template <class Q>
quant::QuantParams awq_quantize_group(const float* v, std::int64_t len, bool reference, std::uint8_t* codes,
                                      float* deq) {
  quant::QuantParams p{};
  if constexpr (Q::kAsymmetric) {
    float lo = v[0], hi = v[0];
    for (std::int64_t j = 1; j < len; ++j) {
      lo = std::min(lo, v[j]);
      hi = std::max(hi, v[j]);
    }
    p = reference ? awq_reference_params<Q>(lo, hi) : Q::params_from_range(lo, hi);
  } else {
    float amax = 0.0f;
    for (std::int64_t j = 0; j < len; ++j) amax = std::max(amax, std::fabs(v[j]));
    p = reference ? awq_reference_params<Q>(0.0f, amax) : Q::params_from_absmax(amax);
  }
  const int offset = Q::traits::kSigned ? -Q::traits::kQmin : 0;
  for (std::int64_t j = 0; j < len; ++j) {
    const int q = Q::quantize(v[j], p);
    if (codes != nullptr) codes[j] = static_cast<std::uint8_t>(q + offset);
    if (deq != nullptr) deq[j] = Q::dequantize(q, p);
  }
  return {p.scale, p.zero_point + offset};
}

// The four grids AWQ uses: (4 | 8 bits) x (asymmetric | symmetric absmax, the reference's two rules), with
// llmk's or the reference's parameters (AwqOptions::reference_grid).
inline quant::QuantParams awq_quantize_group(const AwqOptions& opt, const float* v, std::int64_t len,
                                             std::uint8_t* codes, float* deq) {
  using quant::Asymmetric, quant::PerChannel, quant::Quantizer, quant::Symmetric;
  const bool ref = opt.reference_grid;
  if (opt.zero_point)
    return opt.bits == 4
               ? awq_quantize_group<Quantizer<uint4_t, Asymmetric, PerChannel>>(v, len, ref, codes, deq)
               : awq_quantize_group<Quantizer<std::uint8_t, Asymmetric, PerChannel>>(v, len, ref, codes, deq);
  return opt.bits == 4
             ? awq_quantize_group<Quantizer<int4_t, Symmetric, PerChannel>>(v, len, ref, codes, deq)
             : awq_quantize_group<Quantizer<std::int8_t, Symmetric, PerChannel>>(v, len, ref, codes, deq);
}

// Pseudo-quantizes every group of ws [n, k] (dense, no clip) into deq [n, k].
inline void awq_pseudo_quantize(const AwqOptions& opt, const std::vector<float>& ws, std::int64_t n,
                                std::int64_t k, std::int64_t gs, std::vector<float>& deq) {
  deq.resize(ws.size());
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c0 = 0; c0 < k; c0 += gs)
      (void)awq_quantize_group(opt, ws.data() + r * k + c0, gs, nullptr, deq.data() + r * k + c0);
}

// mean over (t, n) of (X E^T)^2: X [t, k] and E [n, k] dense fp64.
inline double awq_output_mse(const std::vector<double>& x, std::int64_t t, std::int64_t k,
                             const std::vector<double>& e, std::int64_t n) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < t; ++i) {
    const double* xr = x.data() + i * k;
    for (std::int64_t r = 0; r < n; ++r) {
      const double* er = e.data() + r * k;
      double dot = 0.0;
      for (std::int64_t c = 0; c < k; ++c) dot += xr[c] * er[c];
      sum += dot * dot;
    }
  }
  return sum / (static_cast<double>(t) * static_cast<double>(n));
}

// The effective weight error E = W - deq diag(1/s) (s null: 1) in fp64.
inline void awq_weight_error(const std::vector<float>& w, const std::vector<float>& deq, const float* s,
                             std::int64_t n, std::int64_t k, std::vector<double>& e) {
  e.resize(w.size());
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * k + c);
      const double q = s != nullptr ? static_cast<double>(deq[i]) / static_cast<double>(s[c]) : deq[i];
      e[i] = static_cast<double>(w[i]) - q;
    }
}

inline Status awq_check_scales(const float* scales, std::int64_t k) {
  if (scales == nullptr) return Status::invalid_argument("scales", "must not be null");
  return quant::detail::check_smoothing_scales(scales, k);
}

}  // namespace detail

/// AWQ for one linear layer: w [rows = N out features, cols = K in features] (row stride ldw), x the
/// calibration activations [tokens, K] (row stride ldx), both fp32 host memory and finite. Searches the
/// per-input-channel scales s and the per-group clip values (see the file comment), and quantizes W diag(s)
/// into out->quantized; the GEMM must then be fed X diag(1/s) (fold 1/s with awq_fold_into_norm or
/// awq_fold_into_linear). Also reports the output error of the result and of round-to-nearest on the same
/// grid. Errors name the argument: rows, cols, w, ldw, x, tokens, ldx, bits (4 or 8), group_size (0 or a
/// divisor of K), n_grid, clip_n_grid (>= 1), clip_max_shrink ([0, 1]), clip_sample_tokens (>= 1), out.
/// Cost: (n_grid T + n_clip T_c + 2 T) N K fp64 multiply-adds, single-threaded: 32 T N K at the defaults
/// with T < 1024 (T_c = T). About 1.2e9 a second on one core: 3.3 s for 512 x 512 with 512 tokens, minutes
/// for 4096 x 4096 (pass a token subset for big layers).
///   llmk::obs::AwqOptions opt;  opt.group_size = 128;
///   llmk::obs::AwqResult r;
///   llmk::Status st = llmk::obs::awq_quantize(w.data(), N, K, K, x.data(), tokens, K, opt, &r);
///   // r.alpha, r.input_scales (fold 1/s upstream), r.quantized (codes, scales, zeros, g_idx)
///   // r.output_error vs r.rtn_error: what the search gained
inline Status awq_quantize(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                           const float* x, std::int64_t tokens, std::int64_t ldx, const AwqOptions& opt,
                           AwqResult* out) {
  const auto start = std::chrono::steady_clock::now();
  if (rows < 1) return Status::invalid_argument("rows", str_cat("must be >= 1, got ", rows));
  if (cols < 1) return Status::invalid_argument("cols", str_cat("must be >= 1, got ", cols));
  if (w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (ldw < cols)
    return Status::invalid_argument("ldw", str_cat("must be >= cols (cols=", cols, ", ldw=", ldw, ")"));
  if (tokens < 1) return Status::invalid_argument("tokens", str_cat("must be >= 1, got ", tokens));
  if (x == nullptr) return Status::invalid_argument("x", "must not be null");
  if (ldx < cols)
    return Status::invalid_argument("ldx", str_cat("must be >= cols (cols=", cols, ", ldx=", ldx, ")"));
  if (opt.bits != 4 && opt.bits != 8)
    return Status::invalid_argument("bits",
                                    str_cat("must be 4 or 8 (the weight-only GEMM's), got ", opt.bits));
  if (opt.group_size < 0 || (opt.group_size > 0 && cols % opt.group_size != 0))
    return Status::invalid_argument(
        "group_size",
        str_cat("must be 0 (per-channel) or divide cols (cols=", cols, ", group_size=", opt.group_size, ")"));
  if (opt.n_grid < 1) return Status::invalid_argument("n_grid", str_cat("must be >= 1, got ", opt.n_grid));
  if (opt.clip_n_grid < 1)
    return Status::invalid_argument("clip_n_grid", str_cat("must be >= 1, got ", opt.clip_n_grid));
  if (!(opt.clip_max_shrink >= 0.0 && opt.clip_max_shrink <= 1.0))
    return Status::invalid_argument("clip_max_shrink",
                                    str_cat("must be in [0, 1], got ", opt.clip_max_shrink));
  if (opt.clip_sample_tokens < 1)
    return Status::invalid_argument("clip_sample_tokens",
                                    str_cat("must be >= 1, got ", opt.clip_sample_tokens));
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      if (!std::isfinite(w[r * ldw + c]))
        return Status::invalid_argument("w",
                                        str_cat("must be finite; w[", r, ", ", c, "] = ", w[r * ldw + c]));
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t c = 0; c < cols; ++c)
      if (!std::isfinite(x[t * ldx + c]))
        return Status::invalid_argument("x",
                                        str_cat("must be finite; x[", t, ", ", c, "] = ", x[t * ldx + c]));

  const std::int64_t n = rows, k = cols, nt = tokens;
  const std::int64_t gs = opt.group_size == 0 ? k : opt.group_size, groups = k / gs;
  const std::size_t nk = static_cast<std::size_t>(n * k);
  std::vector<float> wd(nk);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c) wd[static_cast<std::size_t>(r * k + c)] = w[r * ldw + c];
  std::vector<double> xd(static_cast<std::size_t>(nt * k));
  std::vector<double> x_mean(static_cast<std::size_t>(k), 0.0);
  for (std::int64_t t = 0; t < nt; ++t)
    for (std::int64_t c = 0; c < k; ++c) {
      const double v = x[t * ldx + c];
      xd[static_cast<std::size_t>(t * k + c)] = v;
      x_mean[static_cast<std::size_t>(c)] += std::fabs(v);
    }
  for (auto& m : x_mean) m /= static_cast<double>(nt);
  // AutoAWQ's w_mean: per group |w| / (amax + 1e-6), averaged over the rows.
  std::vector<double> w_mean(static_cast<std::size_t>(k), 0.0);
  if (opt.duo_scaling) {
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c0 = 0; c0 < k; c0 += gs) {
        const float* g = wd.data() + r * k + c0;
        float amax = 0.0f;
        for (std::int64_t j = 0; j < gs; ++j) amax = std::max(amax, std::fabs(g[j]));
        for (std::int64_t j = 0; j < gs; ++j)
          w_mean[static_cast<std::size_t>(c0 + j)] += std::fabs(g[j]) / (static_cast<double>(amax) + 1e-6);
      }
    for (auto& m : w_mean) m /= static_cast<double>(n);
  }

  AwqResult res;
  std::vector<float> deq, ws(nk);
  std::vector<double> e;
  // Round-to-nearest on the same grid.
  detail::awq_pseudo_quantize(opt, wd, n, k, gs, deq);
  detail::awq_weight_error(wd, deq, nullptr, n, k, e);
  res.rtn_error = detail::awq_output_mse(xd, nt, k, e, n);

  // 1. Scale search.
  std::vector<double> sd(static_cast<std::size_t>(k));
  std::vector<float> s(static_cast<std::size_t>(k)), best_s(static_cast<std::size_t>(k), 1.0f);
  double best_error = std::numeric_limits<double>::infinity();
  int best_index = -1;
  res.alpha_errors.assign(static_cast<std::size_t>(opt.n_grid), std::numeric_limits<double>::infinity());
  for (int i = 0; i < opt.n_grid; ++i) {
    const double alpha = static_cast<double>(i) / static_cast<double>(opt.n_grid);
    double smax = 0.0, smin = std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < k; ++c) {
      const std::size_t j = static_cast<std::size_t>(c);
      double v = std::pow(x_mean[j], alpha);
      if (opt.duo_scaling) v /= std::pow(w_mean[j], 1.0 - alpha) + 1e-4;
      v = std::max(v, 1e-4);
      sd[j] = v;
      smax = std::max(smax, v);
      smin = std::min(smin, v);
    }
    const double norm = std::sqrt(smax * smin);
    for (std::int64_t c = 0; c < k; ++c) {
      const std::size_t j = static_cast<std::size_t>(c);
      const double v = sd[j] / norm;
      s[j] = std::isfinite(v) ? static_cast<float>(v) : 1.0f;  // AutoAWQ: inf / nan scales -> 1
    }
    bool finite = true;
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < k; ++c) {
        const std::size_t j = static_cast<std::size_t>(r * k + c);
        ws[j] = wd[j] * s[static_cast<std::size_t>(c)];
        finite = finite && std::isfinite(ws[j]);
      }
    if (!finite) continue;  // W diag(s) overflowed fp32: the candidate is not representable, skip it
    detail::awq_pseudo_quantize(opt, ws, n, k, gs, deq);
    detail::awq_weight_error(wd, deq, s.data(), n, k, e);
    const double err = detail::awq_output_mse(xd, nt, k, e, n);
    res.alpha_errors[static_cast<std::size_t>(i)] = err;
    if (err < best_error) {
      best_error = err;
      best_index = i;
      best_s = s;
    }
  }
  if (best_index < 0) {  // every candidate overflowed fp32 (duo scaling with huge weights): keep s = 1, RTN
    best_index = 0;
    best_error = res.rtn_error;
  }
  res.alpha_index = best_index;
  res.alpha = static_cast<double>(best_index) / static_cast<double>(opt.n_grid);
  res.search_error = best_error;
  res.input_scales = best_s;
  const auto search_end = std::chrono::steady_clock::now();
  res.scale_search_s = std::chrono::duration<double>(search_end - start).count();

  // 2. Clip search on W' = W diag(s) with X' = X diag(1/s), per (row, group) over the sampled tokens.
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c)
      ws[static_cast<std::size_t>(r * k + c)] =
          wd[static_cast<std::size_t>(r * k + c)] * best_s[static_cast<std::size_t>(c)];
  const std::size_t ng = static_cast<std::size_t>(n * groups);
  res.clip_max.assign(ng, 0.0f);
  res.clip_step.assign(ng, 0);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t g = 0; g < groups; ++g) {
      const float* wg = ws.data() + r * k + g * gs;
      float amax = 0.0f;
      for (std::int64_t j = 0; j < gs; ++j) amax = std::max(amax, std::fabs(wg[j]));
      res.clip_max[static_cast<std::size_t>(r * groups + g)] = amax;
    }
  const int n_clip = opt.clip ? static_cast<int>(opt.clip_max_shrink * opt.clip_n_grid) : 0;
  if (n_clip > 0) {
    const std::int64_t step = std::max<std::int64_t>(1, nt / opt.clip_sample_tokens);
    std::vector<std::int64_t> sampled;
    for (std::int64_t t = 0; t < nt; t += step) sampled.push_back(t);
    std::vector<double> xs(sampled.size() * static_cast<std::size_t>(k));  // X diag(1/s), sampled rows
    for (std::size_t i = 0; i < sampled.size(); ++i)
      for (std::int64_t c = 0; c < k; ++c)
        xs[i * static_cast<std::size_t>(k) + static_cast<std::size_t>(c)] =
            xd[static_cast<std::size_t>(sampled[i] * k + c)] /
            static_cast<double>(best_s[static_cast<std::size_t>(c)]);
    std::vector<float> clamped(static_cast<std::size_t>(gs)), qg(static_cast<std::size_t>(gs));
    std::vector<double> dg(static_cast<std::size_t>(gs));
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t g = 0; g < groups; ++g) {
        const float* wg = ws.data() + r * k + g * gs;
        const std::size_t rg = static_cast<std::size_t>(r * groups + g);
        const float org = res.clip_max[rg];
        // The reference starts from 1e9 and keeps no clipping unless a candidate is below it
        // (reference_grid).
        double best = opt.reference_grid ? 1e9 : std::numeric_limits<double>::infinity();
        for (int i = 0; i < n_clip; ++i) {
          // fp32 as the reference's tensor op: org * float(1 - i / n_grid). With both ends of the group
          // clamped the asymmetric zero point is -lo / s = (2^b - 1) / 2, a tie that the last bit of the fp32
          // scale decides; this arithmetic decides it as the reference's fp32 arithmetic does.
          const float m =
              org * static_cast<float>(1.0 - static_cast<double>(i) / static_cast<double>(opt.clip_n_grid));
          for (std::int64_t j = 0; j < gs; ++j)
            clamped[static_cast<std::size_t>(j)] = std::min(std::max(wg[j], -m), m);
          (void)detail::awq_quantize_group(opt, clamped.data(), gs, nullptr, qg.data());
          for (std::int64_t j = 0; j < gs; ++j)
            dg[static_cast<std::size_t>(j)] = static_cast<double>(qg[static_cast<std::size_t>(j)]) - wg[j];
          double err = 0.0;
          for (std::size_t t = 0; t < sampled.size(); ++t) {
            const double* xr = xs.data() + t * static_cast<std::size_t>(k) + static_cast<std::size_t>(g * gs);
            double dot = 0.0;
            for (std::int64_t j = 0; j < gs; ++j) dot += xr[j] * dg[static_cast<std::size_t>(j)];
            err += dot * dot;
          }
          err /= static_cast<double>(sampled.size());
          if (err < best) {  // i = 0 (no clipping) enters unless reference_grid's 1e9 start is below its
                             // error (clip_max then keeps amax: the reference's initial best_max_val)
            best = err;
            res.clip_max[rg] = m;
            res.clip_step[rg] = i;
          }
        }
      }
  }
  const auto clip_end = std::chrono::steady_clock::now();
  res.clip_search_s = std::chrono::duration<double>(clip_end - search_end).count();

  // 3. Clamp and quantize W diag(s): the weight-only GEMM's format.
  QuantizedLayer& q = res.quantized;
  q.rows = n;
  q.cols = k;
  q.bits = opt.bits;
  q.symmetric = !opt.zero_point;
  if (!opt.zero_point)
    q.symmetric_grid = SymmetricGrid::kAbsmax;  // AWQ's symmetric rule: s = amax / (2^(b-1) - 1)
  q.group_size = gs;
  q.groups = groups;
  q.codes.assign(nk, 0);
  q.scales.assign(ng, 0.0f);
  q.zeros.assign(ng, 0);
  q.g_idx.resize(static_cast<std::size_t>(k));
  q.order.resize(static_cast<std::size_t>(k));
  for (std::int64_t c = 0; c < k; ++c) {
    q.g_idx[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(c / gs);
    q.order[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(c);
  }
  q.dequantized.assign(nk, 0.0f);
  std::vector<float> clamped(static_cast<std::size_t>(gs));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t g = 0; g < groups; ++g) {
      const float* wg = ws.data() + r * k + g * gs;
      const float m = res.clip_max[static_cast<std::size_t>(r * groups + g)];
      for (std::int64_t j = 0; j < gs; ++j)
        clamped[static_cast<std::size_t>(j)] = std::min(std::max(wg[j], -m), m);
      const quant::QuantParams p = detail::awq_quantize_group(
          opt, clamped.data(), gs, q.codes.data() + r * k + g * gs, q.dequantized.data() + r * k + g * gs);
      q.scales[static_cast<std::size_t>(g * n + r)] = p.scale;
      q.zeros[static_cast<std::size_t>(g * n + r)] = static_cast<std::uint8_t>(p.zero_point);
    }
  detail::awq_weight_error(wd, q.dequantized, best_s.data(), n, k, e);
  res.output_error = detail::awq_output_mse(xd, nt, k, e, n);
  q.loss = res.output_error * static_cast<double>(n);
  q.loss_estimate = q.loss;
  res.total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *out = std::move(res);
  return {};
}

/// Folds 1/s into the normalization that produces the layer's input (LayerNorm / RMSNorm weight gamma and
/// optional bias beta, [K]): gamma_k /= s_k, beta_k /= s_k (fp32 quotient rounded once to T = float,
/// llmk::half or llmk::bfloat16), as the reference's scale_ln_fcs; the norm then outputs X diag(1/s). llmk's
/// SmoothQuant fold (llmk::quant::fold_smoothing_into_norm) does the arithmetic. Scales must be finite and >
/// 0; errors name k, gamma, scales; nothing changes on error.
///   const float* s = r.input_scales.data();  // r from awq_quantize on the layers after the norm
///   llmk::Status st = llmk::obs::awq_fold_into_norm(ln_gamma, ln_beta, K, s);
///   // no beta (RMSNorm): llmk::obs::awq_fold_into_norm<llmk::half>(ln_gamma, nullptr, K, s)
template <class T>
Status awq_fold_into_norm(T* gamma, T* beta, std::int64_t k, const float* scales) {
  if (k < 1) return Status::invalid_argument("k", str_cat("must be >= 1, got ", k));
  if (gamma == nullptr) return Status::invalid_argument("gamma", "must not be null");
  LLMK_RETURN_IF_ERROR(detail::awq_check_scales(scales, k));
  return quant::fold_smoothing_into_norm(gamma, beta, k, scales);
}

/// Folds 1/s into a previous linear layer whose outputs are this layer's input channels (the reference's
/// scale_fc_fc, e.g. v_proj -> o_proj, up_proj -> down_proj): prev_w is [prev_rows, prev_cols] (row stride
/// ld_prev, T = float, llmk::half or llmk::bfloat16) and its LAST k rows feed this layer's k input channels
/// (prev_rows == k for a plain linear; larger for a fused projection whose tail feeds this layer, as the
/// reference's fc1.weight[-k:]). Row prev_rows - k + j and bias entry prev_rows - k + j (bias [prev_rows],
/// may be null) are divided by s_j (fp32 quotient rounded once to T). Errors name k, prev_rows, prev_cols,
/// ld_prev, prev_w, scales; nothing changes on error.
///   // down_proj [H, I] was quantized with s [I]; up_proj [I, H] produces its input:
///   llmk::Status st = llmk::obs::awq_fold_into_linear(up_w, I, H, H, up_b, I, s);
///   // no bias: the type given, e.g. awq_fold_into_linear<llmk::half>(up_w, I, H, H, nullptr, I, s)
template <class T>
Status awq_fold_into_linear(T* prev_w, std::int64_t prev_rows, std::int64_t prev_cols, std::int64_t ld_prev,
                            T* prev_bias, std::int64_t k, const float* scales) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>,
                "awq_fold_into_linear: the previous layer's weights are float, llmk::half or llmk::bfloat16");
  if (k < 1) return Status::invalid_argument("k", str_cat("must be >= 1, got ", k));
  if (prev_rows < k)
    return Status::invalid_argument(
        "prev_rows",
        str_cat("must be >= k (its last k rows feed the layer; k=", k, ", prev_rows=", prev_rows, ")"));
  if (prev_cols < 1) return Status::invalid_argument("prev_cols", str_cat("must be >= 1, got ", prev_cols));
  if (ld_prev < prev_cols)
    return Status::invalid_argument(
        "ld_prev", str_cat("must be >= prev_cols (prev_cols=", prev_cols, ", ld_prev=", ld_prev, ")"));
  if (prev_w == nullptr) return Status::invalid_argument("prev_w", "must not be null");
  LLMK_RETURN_IF_ERROR(detail::awq_check_scales(scales, k));
  const std::int64_t first = prev_rows - k;
  for (std::int64_t j = 0; j < k; ++j) {
    T* row = prev_w + (first + j) * ld_prev;
    for (std::int64_t c = 0; c < prev_cols; ++c)
      row[c] = quant::convert_output<T>(quant::load_as_float(row[c]) / scales[j]);
    if (prev_bias != nullptr)
      prev_bias[first + j] = quant::convert_output<T>(quant::load_as_float(prev_bias[first + j]) / scales[j]);
  }
  return {};
}

}  // namespace llmk::obs
