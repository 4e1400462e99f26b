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
//
// The parts, each includable alone: obs_step.hpp (obs_saliency, obs_update, obs_downdate), damped_inverse.hpp
// (DampingOptions, DampingReport, InverseForm, damped_inverse), timings.hpp (ObsTimings),
// quantized_layer.hpp (QuantizedLayer, pack_plain_codes), layer_args.hpp (the layer's checks, dense copies
// and loss), group_grids.hpp (GroupGrid, DeadColumnGrid, the grids GPTQ and SparseGPT share), obq.hpp (OBQ:
// ObqOrder, ObqOptions, obq_quantize). This file: OBS pruning (ObsPruneOptions, ObsPruneResult, obs_prune);
// including it brings in all of the parts.
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
#include "llmk/obs/damped_inverse.hpp"
#include "llmk/obs/group_grids.hpp"
#include "llmk/obs/hessian.cuh"
#include "llmk/obs/layer_args.hpp"
#include "llmk/obs/linalg.hpp"
#include "llmk/obs/obq.hpp"
#include "llmk/obs/obs_step.hpp"
#include "llmk/obs/quantized_layer.hpp"
#include "llmk/obs/quantizer.hpp"
#include "llmk/obs/timings.hpp"
#include "llmk/quant/calibration.hpp"

namespace llmk::obs {

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
}  // namespace llmk::obs
