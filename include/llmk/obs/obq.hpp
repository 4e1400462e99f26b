// llmk/obs/obq.hpp: OBQ (Optimal Brain Quantizer, Frantar & Alistarh 2022) on the host: the OBS step with
// quantization targets, one weight at a time in a greedy order (ObqOrder), then optional coordinate-descent
// sweeps (ObqOptions::refine_sweeps); output in the quantized-layer format (QuantizedLayer). The GPU form is
// obq_quantize_gpu (llmk/obs/obs_gpu.cuh).
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "llmk/core/status.cuh"
#include "llmk/obs/damped_inverse.hpp"
#include "llmk/obs/group_grids.hpp"
#include "llmk/obs/layer_args.hpp"
#include "llmk/obs/linalg.hpp"
#include "llmk/obs/obs_step.hpp"
#include "llmk/obs/quantized_layer.hpp"
#include "llmk/obs/quantizer.hpp"
#include "llmk/obs/timings.hpp"
#include "llmk/quant/calibration.hpp"

namespace llmk::obs {

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
  SymmetricGrid symmetric_grid =
      SymmetricGrid::kFullRange;  ///< 2^b levels as the reference; kAbsmax; kReference
  std::int64_t group_size = 0;    ///< 0: per-channel; else it must divide cols
  bool mse_clip = false;          ///< GPTQ's MSE clip search for the grid (llmk::quant::mse_clip_search)
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
