// llmk/obs/gptq.hpp: GPTQ on the host (Frantar et al. 2022): OBQ with a FIXED column order for all rows, so
// every row shares one inverse Hessian sequence, given by the upper Cholesky factor U of the damped H^-1
// (H^-1 = U^T U): quantizing column j costs err = (w_j - q_j) / U_jj and the update of the columns after it
// is w_{j+1:} -= err U_{j, j+1:}; the objective grows by (w_j - q_j)^2 / (2 U_jj^2) (U_jj^2 is [H_F^-1]_jj of
// the columns still free). Lazy batches: the columns of a block of block_size are updated inside the block
// only; the trailing columns get one GEMM per block, W[:, i2:] -= Err[:, i1:i2] U[i1:i2, i2:], through the
// linear-algebra backend. block_size >= cols is the plain unblocked column loop.
//
// Options (defaults): bits 4 (2, 3, 4, 8), symmetric, per-channel (group_size 0) or group-wise (any group
// size dividing cols; the grid of a group is fixed from the current, error-compensated weights when its first
// column is reached), act_order (columns by descending diag H; g_idx records each column's group), static
// groups (grids from the original weights, natural groups: g_idx = k / G even with act-order), MSE clip
// search (llmk::quant::mse_clip_search), percdamp 0.01 with x10 retries. Output: llmk::obs::QuantizedLayer,
// the weight-only GEMM's format (llmk/gemm/weight_only.cuh), and the layer loss 1/2 tr((W - Q) H (W - Q)^T).
//
//   llmk::obs::HostLapackBackend la;
//   llmk::obs::GptqOptions opt;  opt.bits = 4;  opt.group_size = 128;  opt.act_order = true;
//   llmk::obs::QuantizedLayer q;
//   llmk::Status s = llmk::obs::gptq_quantize(w.data(), N, K, K, h.data(), K, opt, la, &q);
//   // q.codes / q.scales / q.zeros / q.g_idx -> pack_plain_codes, act_order_permutation_host, repack
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "llmk/obs/obs.hpp"

namespace llmk::obs {

/// Options of gptq_quantize.
struct GptqOptions {
  int bits = 4;           ///< 2, 3, 4 or 8 (the weight-only GEMM takes 4 and 8)
  bool symmetric = true;  ///< symmetric (signed grid stored as u = q + 2^(b-1)) or asymmetric
  SymmetricGrid symmetric_grid =
      SymmetricGrid::kFullRange;  ///< 2^b levels as the reference; kAbsmax; kReference
  std::int64_t group_size = 0;    ///< 0: per-channel; else it must divide cols
  DeadColumnGrid dead_column_grid =
      DeadColumnGrid::kZeroed;  ///< per-channel grids: kOriginal as the reference
  bool act_order = false;       ///< process columns by descending diag H
  bool static_groups = false;   ///< group grids from the original weights (natural groups k / G)
  GroupGrid group_grid = GroupGrid::kBlockStart;  ///< dynamic groups beginning in a block (group_grids.hpp)
  std::int64_t block_size = 128;  ///< lazy-batch block (>= 1); >= cols: the unblocked column loop
  bool mse_clip = false;          ///< MSE clip search for each grid (llmk::quant::mse_clip_search)
  int mse_grid = 100;
  double mse_maxshrink = 0.8;
  double mse_norm = 2.4;
  DampingOptions damping;   ///< percdamp 0.01, x10 retries
  bool report_loss = true;  ///< compute QuantizedLayer::loss (one more O(N K^2) GEMM); false: loss = NaN
};

/// GPTQ for one layer: w [rows = N out features, cols = K in features] (ldw), h the layer Hessian [K, K]
/// (ldh; llmk/obs/hessian.cuh), both fp32 host memory and finite. Dead columns (H_ii == 0) get zero weights;
/// the Hessian is damped (retrying with more damping when the Cholesky factorization fails; reported in
/// out->damping). Errors name the argument: rows, cols, w, ldw, h, ldh, bits, group_size, block_size,
/// symmetric_grid, group_grid, dead_column_grid, mse_grid, mse_maxshrink, mse_norm, percdamp, damp_growth,
/// max_retries, out. Cost: O(K^3) (inverse) + O(N K^2) (the updates, mostly GEMM) + O(N K^2) for the reported
/// loss (opt.report_loss = false skips it).
///   llmk::obs::GptqOptions opt;
///   opt.group_size = 128;
///   llmk::obs::QuantizedLayer q;
///   llmk::throw_if_error(llmk::obs::gptq_quantize(w.data(), N, K, K, h.data(), K, opt, la, &q));
inline Status gptq_quantize(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                            const float* h, std::int64_t ldh, const GptqOptions& opt, LinalgBackend& la,
                            QuantizedLayer* out) {
  const detail::LayerArgs a{w, rows, cols, ldw, h, ldh};
  LLMK_RETURN_IF_ERROR(detail::validate_layer(a));
  LLMK_RETURN_IF_ERROR(detail::validate_quant_choice(opt.bits, opt.group_size, cols));
  LLMK_RETURN_IF_ERROR(detail::check_symmetric_grid(opt.symmetric_grid));
  if (opt.block_size < 1)
    return Status::invalid_argument("block_size", str_cat("must be >= 1, got ", opt.block_size));
  LLMK_RETURN_IF_ERROR(
      detail::check_mse_options(opt.mse_clip, opt.mse_grid, opt.mse_maxshrink, opt.mse_norm));
  LLMK_RETURN_IF_ERROR(detail::check_group_grid(opt.group_grid));
  LLMK_RETURN_IF_ERROR(detail::check_dead_column_grid(opt.dead_column_grid));
  LLMK_RETURN_IF_ERROR(detail::check_damping(opt.damping));
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");

  const std::int64_t n = rows, d = cols;
  const std::size_t nd = static_cast<std::size_t>(n * d);
  ObsTimings times;
  auto phase = std::chrono::steady_clock::now();
  std::vector<float> wd, hd;
  DampingReport rep;
  detail::dense_copies(a, wd, hd, &rep.dead_columns);

  QuantizedLayer res;
  res.rows = n;
  res.cols = d;
  res.bits = opt.bits;
  res.symmetric = opt.symmetric;
  res.symmetric_grid = opt.symmetric_grid;
  res.group_size = opt.group_size == 0 ? d : opt.group_size;
  res.groups = d / res.group_size;
  const std::int64_t G = res.group_size;
  const bool grouped = opt.group_size > 0;
  const bool static_groups = grouped && opt.static_groups;

  // Column order: perm[j] = original column processed j-th.
  std::vector<std::int32_t> perm(static_cast<std::size_t>(d));
  std::iota(perm.begin(), perm.end(), 0);
  if (opt.act_order)
    std::stable_sort(perm.begin(), perm.end(), [&](std::int32_t x, std::int32_t y) {
      return hd[static_cast<std::size_t>(x * d + x)] > hd[static_cast<std::size_t>(y * d + y)];
    });
  std::vector<float> wp(nd), hp(static_cast<std::size_t>(d * d));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 0; j < d; ++j)
      wp[static_cast<std::size_t>(r * d + j)] =
          wd[static_cast<std::size_t>(r * d + perm[static_cast<std::size_t>(j)])];
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j < d; ++j)
      hp[static_cast<std::size_t>(i * d + j)] = hd[static_cast<std::size_t>(
          perm[static_cast<std::size_t>(i)] * d + perm[static_cast<std::size_t>(j)])];

  times.prepare_s = detail::seconds_since(phase);
  phase = std::chrono::steady_clock::now();
  std::vector<float> u;
  LLMK_RETURN_IF_ERROR(
      damped_inverse(hp.data(), d, d, opt.damping, InverseForm::kUpperCholesky, la, &u, &rep));
  times.inverse_s = detail::seconds_since(phase);
  phase = std::chrono::steady_clock::now();

  res.codes.assign(nd, 0);
  res.dequantized.assign(nd, 0.0f);
  res.scales.assign(static_cast<std::size_t>(res.groups * n), 0.0f);
  res.zeros.assign(static_cast<std::size_t>(res.groups * n), 0);
  res.g_idx.resize(static_cast<std::size_t>(d));
  res.order = perm;
  for (std::int64_t j = 0; j < d; ++j) {
    const std::int64_t c = perm[static_cast<std::size_t>(j)];
    res.g_idx[static_cast<std::size_t>(c)] =
        static_cast<std::int32_t>(static_groups || !opt.act_order ? c / G : j / G);
  }

  Status status = with_quantizer(opt.bits, opt.symmetric, opt.symmetric_grid, [&]<class Q>() -> Status {
    // params[g * n + r]: the grid of group g (the g_idx numbering) for row r.
    std::vector<quant::QuantParams> params(static_cast<std::size_t>(res.groups * n));
    auto set_params = [&](std::int64_t g, std::int64_t r, const float* x) {
      const quant::QuantParams p = detail::group_params<Q>(x, G, opt.symmetric_grid, opt.mse_clip,
                                                           opt.mse_grid, opt.mse_maxshrink, opt.mse_norm);
      params[static_cast<std::size_t>(g * n + r)] = p;
      res.scales[static_cast<std::size_t>(g * n + r)] = p.scale;
      res.zeros[static_cast<std::size_t>(g * n + r)] =
          static_cast<std::uint8_t>(p.zero_point + kCodeOffset<Q>);
    };
    if (!grouped && opt.dead_column_grid == DeadColumnGrid::kOriginal)  // the caller's w, dead columns too
      for (std::int64_t r = 0; r < n; ++r) set_params(0, r, w + r * ldw);
    else if (static_groups || !grouped)  // grids from the original (dead-column-fixed) weights
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t g = 0; g < res.groups; ++g) set_params(g, r, wd.data() + r * d + g * G);

    const std::int64_t bs = std::min(opt.block_size, d);
    std::vector<float> err(static_cast<std::size_t>(n * bs));
    const bool dynamic = grouped && !static_groups;
    detail::DynamicGroupGrids grids(opt.group_grid);
    double loss_est = 0.0;
    for (std::int64_t i1 = 0; i1 < d; i1 += bs) {
      const std::int64_t i2 = std::min(i1 + bs, d), count = i2 - i1;
      if (dynamic) grids.begin_block(wp, n, d, i1, i2);
      for (std::int64_t j = i1; j < i2; ++j) {
        if (dynamic && j % G == 0)
          LLMK_RETURN_IF_ERROR(
              grids.at_group(wp, n, d, j, G, i1, i2, err, bs, u, la,
                             [&](std::int64_t r, const float* v) { set_params(j / G, r, v); }));
        const float ujj = u[static_cast<std::size_t>(j * d + j)];
        const std::int64_t c = perm[static_cast<std::size_t>(j)];
        const std::int64_t g = res.g_idx[static_cast<std::size_t>(c)];
        const float* urow = u.data() + j * d;
        for (std::int64_t r = 0; r < n; ++r) {
          float* wr = wp.data() + r * d;
          const quant::QuantParams& p = params[static_cast<std::size_t>(g * n + r)];
          const float x = wr[j];
          const int code = static_cast<int>(Q::quantize(x, p));
          const float q = Q::dequantize(code, p);
          const float e = (x - q) / ujj;
          loss_est += 0.5 * static_cast<double>(e) * e;
          for (std::int64_t t = j + 1; t < i2; ++t) wr[t] -= e * urow[t];
          err[static_cast<std::size_t>(r * bs + (j - i1))] = e;
          res.codes[static_cast<std::size_t>(r * d + c)] = static_cast<std::uint8_t>(code + kCodeOffset<Q>);
          res.dequantized[static_cast<std::size_t>(r * d + c)] = q;
        }
      }
      if (i2 < d) {  // the lazy trailing update, one GEMM per block
        const auto t0 = std::chrono::steady_clock::now();
        LLMK_RETURN_IF_ERROR(la.gemm(Op::kNone, Op::kNone, n, d - i2, count, -1.0f, err.data(), bs,
                                     u.data() + i1 * d + i2, d, 1.0f, wp.data() + i2, d));
        times.trailing_s += detail::seconds_since(t0);
      }
    }
    res.loss_estimate = loss_est;
    return {};
  });
  LLMK_RETURN_IF_ERROR(status);
  // Everything since the inverse that was not a trailing GEMM: the column loops (grids included).
  times.column_loop_s = detail::seconds_since(phase) - times.trailing_s;
  if (!detail::all_finite(res.dequantized.data(), n * d))
    return Status::internal("gptq produced non-finite weights");
  phase = std::chrono::steady_clock::now();
  if (opt.report_loss)
    LLMK_RETURN_IF_ERROR(detail::layer_loss(a, res.dequantized, la, &res.loss));
  else
    res.loss = std::numeric_limits<double>::quiet_NaN();
  times.loss_s = detail::seconds_since(phase);
  res.damping = rep;
  res.timings = times;
  *out = std::move(res);
  return {};
}

}  // namespace llmk::obs
