// llmk/obs/sparsegpt.hpp: SparseGPT on the host (Frantar & Alistarh 2023): GPTQ's column loop with pruning
// targets. Every row shares one inverse-Hessian sequence, the upper Cholesky factor U of the damped H^-1
// (H^-1 = U^T U, llmk/obs/damped_inverse.hpp); fixing column j of a row at q (0 when pruned, its grid point
// under joint quantization, else the weight itself) costs e = (w_j - q) / U_jj and updates the columns after
// it by w_t -= e U_jt. The mask is chosen by the OBS saliency w_t^2 / [H_F^-1]_tt = w_t^2 / U_tt^2, evaluated
// on the CURRENT (already compensated) weights, a block (or an n:m group) at a time. Lazy batches as in GPTQ:
// one trailing GEMM per block, W[:, i2:] -= Err U[i1:i2, i2:], through the linear-algebra backend.
//
// Exact semantics (the GPU kernel reproduces them bit for bit; fp32 throughout, in this order):
//   1. dense copies of W and H, dead columns fixed (H_ii = 1, W[:, i] = 0: zero weights that still go
//      through the mask rule, where they score 0), U = damped_inverse(..., kUpperCholesky).
//   2. bs = min(block_size, cols); n:m: rounded down to a multiple of m, at least m (groups never straddle
//      blocks). Blocks [i1, i2) = [0, bs), [bs, 2 bs), ...
//   3. score s_t = (w_t * w_t) / (U_tt * U_tt) in fp32; rank rule (llmk/obs/pruning.hpp): prune the k of
//      lowest (score, column) in the candidate set.
//      unstructured  at each block start, on the current weights of the block's columns [i1, i2):
//                    scope kReference (default, the reference code's rule): ONE candidate set of all rows x
//                      [i1, i2), row-major, k = llround(sparsity rows i2) - llround(sparsity rows i1), so the
//                      layer loses exactly llround(sparsity rows cols) weights and rows with small saliencies
//                      give more. (The reference prunes score <= sorted[int(numel sparsity)]: one more weight
//                      and every tie per block; llmk's count is exact. count = PruneCount::kThreshold: the
//                      reference's rule, in every candidate set of either scope.)
//                    scope kPerRow: per row, candidates [i1, i2), k = llround(sparsity i2) - llround(sparsity
//                      i1): every row loses exactly llround(sparsity cols) weights (for kernels that need the
//                      same count in every row, or rows that must stay independent). Costs +24-26% layer loss
//                      at 50% on rows of unequal norms (docs/obs.md).
//      n:m           when j - i1 is a multiple of m, per row, candidates j .. j+m-1 (current weights), k = n.
//   4. column loop j = i1 .. i2-1 (group grids first when grouped and j % G == 0, then the n:m mask), each
//      row: x = w_j; q = pruned ? 0 : (bits ? dequantize(quantize(x)) : x); e = (x - q) / U_jj;
//      w_t -= e * U_jt for t in (j, i2); Err[r, j - i1] = e. Pruned weights get the code of 0: the zero
//      point.
//   5. W[:, i2:] -= Err[:, 0:count] U[i1:i2, i2:] (backend GEMM).
// Joint quantization grids are GPTQ's with act_order off (llmk/obs/gptq.hpp): per-channel grids from the
// dead-column-fixed original weights; group grids when column j % G == 0 is reached, from the current weights
// of ALL the group's columns (the ones that will be pruned too), the columns past the block first getting the
// block's pending update.
//
//   llmk::obs::HostLapackBackend la;
//   llmk::obs::SparseGptOptions opt;  opt.prune_n = 2;  opt.prune_m = 4;         // 2:4
//   llmk::obs::SparseGptResult out;
//   llmk::Status s = llmk::obs::sparsegpt_prune(w.data(), N, K, K, h.data(), K, opt, la, &out);
//   // out.weights: pruned + compensated; llmk::obs::compress_n_m(out.weights.data(), ...) packs it
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "llmk/obs/obs.hpp"
#include "llmk/obs/pruning.hpp"

namespace llmk::obs {

/// Options of sparsegpt_prune.
struct SparseGptOptions {
  double sparsity = 0.5;  ///< fraction of the weights pruned, in [0, 1); used when prune_n == 0
  PruneScope scope = PruneScope::kReference;  ///< unstructured: kReference (per block) or kPerRow
  PruneCount count = PruneCount::kExact;      ///< unstructured: exact counts, or the reference's threshold
  int prune_n = 0;                            ///< n:m when > 0: n zeros in every m consecutive columns
  int prune_m = 0;                            ///< (0 < n < m, cols % m == 0); both 0: unstructured
  std::int64_t block_size = 128;  ///< lazy-batch block (>= 1); n:m rounds it down to a multiple of m
  int bits = 0;                   ///< joint quantization: 0 (none), 2, 3, 4 or 8
  bool symmetric = true;          ///< as GptqOptions
  SymmetricGrid symmetric_grid = SymmetricGrid::kFullRange;  ///< as GptqOptions
  std::int64_t group_size = 0;  ///< as GptqOptions (0: per-channel; must be 0 when bits == 0)
  DeadColumnGrid dead_column_grid = DeadColumnGrid::kZeroed;  ///< as GptqOptions
  GroupGrid group_grid = GroupGrid::kBlockStart;              ///< as GptqOptions
  bool mse_clip = false;  ///< GPTQ's MSE clip search for each grid (as GptqOptions)
  int mse_grid = 100;
  double mse_maxshrink = 0.8;
  double mse_norm = 2.4;
  DampingOptions damping;   ///< percdamp 0.01, x10 retries
  bool report_loss = true;  ///< compute SparseGptResult::loss (one more O(N K^2) GEMM); false: loss = NaN
};

/// sparsegpt_prune's output.
struct SparseGptResult {
  std::vector<float> weights;      ///< [rows, cols] pruned (exactly 0), compensated, (de)quantized when bits
  std::vector<std::uint8_t> mask;  ///< [rows, cols] 1 = kept
  QuantizedLayer quantized;        ///< bits > 0: the weight-only GEMM format (as gptq); else empty (rows 0)
  double loss = 0.0;               ///< 1/2 tr((W - W') H (W - W')^T) with the given (undamped) H
  double loss_estimate = 0.0;      ///< sum of e^2 / 2: the same with the damped, dead-column-fixed H
  std::int64_t block_size = 0;     ///< the block size used (after min(cols) and the n:m rounding)
  DampingReport damping;
  ObsTimings timings;
};

namespace detail {
struct NoQuantizer {};  // bits == 0: kept weights stay as they are
}  // namespace detail

/// SparseGPT for one layer: w [rows = N out features, cols = K in features] (ldw) and its Hessian h [K, K]
/// (ldh; llmk/obs/hessian.cuh), fp32 host memory, finite. Prunes per opt (the file comment gives the exact
/// rules), optionally quantizing the kept weights jointly. Errors name the argument: rows, cols, w, ldw, h,
/// ldh, sparsity ("must be in [0, 1)"), prune_n / prune_m ("0 < n < m and cols % m == 0"), block_size, bits,
/// group_size, symmetric_grid, group_grid, dead_column_grid, mse_grid, mse_maxshrink, mse_norm, percdamp,
/// damp_growth, max_retries, out. A Hessian that no damping makes positive definite is an error naming h
/// (nothing written). Cost: O(K^3) + O(N K^2) (mostly GEMM) + O(N K^2) loss.
///   llmk::obs::SparseGptOptions opt;  opt.sparsity = 0.5;  opt.bits = 4;  opt.group_size = 128;
///   llmk::obs::SparseGptResult out;
///   llmk::throw_if_error(llmk::obs::sparsegpt_prune(w.data(), N, K, K, h.data(), K, opt, la, &out));
inline Status sparsegpt_prune(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                              const float* h, std::int64_t ldh, const SparseGptOptions& opt,
                              LinalgBackend& la, SparseGptResult* out) {
  const detail::LayerArgs a{w, rows, cols, ldw, h, ldh};
  LLMK_RETURN_IF_ERROR(detail::validate_layer(a));
  LLMK_RETURN_IF_ERROR(detail::check_prune_pattern(opt.sparsity, opt.prune_n, opt.prune_m, cols));
  LLMK_RETURN_IF_ERROR(detail::check_scope(opt.scope));
  LLMK_RETURN_IF_ERROR(detail::check_count(opt.count));
  if (opt.scope == PruneScope::kPerLayer)
    return Status::invalid_argument(
        "scope", "SparseGPT chooses its mask a block of columns at a time: kReference or kPerRow");
  if (opt.block_size < 1)
    return Status::invalid_argument("block_size", str_cat("must be >= 1, got ", opt.block_size));
  if (opt.bits != 0) {
    LLMK_RETURN_IF_ERROR(detail::validate_quant_choice(opt.bits, opt.group_size, cols));
    LLMK_RETURN_IF_ERROR(
        detail::check_mse_options(opt.mse_clip, opt.mse_grid, opt.mse_maxshrink, opt.mse_norm));
  } else if (opt.group_size != 0) {
    return Status::invalid_argument("group_size",
                                    str_cat("must be 0 without quantization (bits 0), got ", opt.group_size));
  }
  LLMK_RETURN_IF_ERROR(detail::check_symmetric_grid(opt.symmetric_grid));
  LLMK_RETURN_IF_ERROR(detail::check_group_grid(opt.group_grid));
  LLMK_RETURN_IF_ERROR(detail::check_dead_column_grid(opt.dead_column_grid));
  LLMK_RETURN_IF_ERROR(detail::check_damping(opt.damping));
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");

  const std::int64_t n = rows, d = cols;
  const std::size_t nd = static_cast<std::size_t>(n * d);
  ObsTimings times;
  auto phase = std::chrono::steady_clock::now();
  std::vector<float> wp, hd;  // wp: the working weights (updated in place)
  DampingReport rep;
  detail::dense_copies(a, wp, hd, &rep.dead_columns);
  times.prepare_s = detail::seconds_since(phase);
  phase = std::chrono::steady_clock::now();
  std::vector<float> u;
  LLMK_RETURN_IF_ERROR(
      damped_inverse(hd.data(), d, d, opt.damping, InverseForm::kUpperCholesky, la, &u, &rep));
  times.inverse_s = detail::seconds_since(phase);
  phase = std::chrono::steady_clock::now();

  SparseGptResult res;
  res.weights.assign(nd, 0.0f);
  res.mask.assign(nd, 1);
  const bool nm = opt.prune_n > 0;
  const std::int64_t m = opt.prune_m;
  std::int64_t bs = std::min(opt.block_size, d);
  if (nm) bs = std::max(m, bs - bs % m);
  res.block_size = bs;

  QuantizedLayer& ql = res.quantized;
  const bool grouped = opt.bits != 0 && opt.group_size > 0;
  const std::int64_t G = grouped ? opt.group_size : d;
  if (opt.bits != 0) {
    ql.rows = n;
    ql.cols = d;
    ql.bits = opt.bits;
    ql.symmetric = opt.symmetric;
    ql.symmetric_grid = opt.symmetric_grid;
    ql.group_size = G;
    ql.groups = d / G;
    ql.codes.assign(nd, 0);
    ql.scales.assign(static_cast<std::size_t>(ql.groups * n), 0.0f);
    ql.zeros.assign(static_cast<std::size_t>(ql.groups * n), 0);
    ql.g_idx.resize(static_cast<std::size_t>(d));
    ql.order.resize(static_cast<std::size_t>(d));
    for (std::int64_t c = 0; c < d; ++c) {
      ql.g_idx[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(c / G);
      ql.order[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(c);
    }
  }

  auto run = [&]<class Q>() -> Status {
    constexpr bool kQuant = !std::is_same_v<Q, detail::NoQuantizer>;
    // params[g * n + r]: the grid of group g for row r.
    std::vector<quant::QuantParams> params(kQuant ? static_cast<std::size_t>(ql.groups * n) : 0);
    auto set_params = [&](std::int64_t g, std::int64_t r, const float* x) {
      if constexpr (kQuant) {
        const quant::QuantParams p = detail::group_params<Q>(x, G, opt.symmetric_grid, opt.mse_clip,
                                                             opt.mse_grid, opt.mse_maxshrink, opt.mse_norm);
        params[static_cast<std::size_t>(g * n + r)] = p;
        ql.scales[static_cast<std::size_t>(g * n + r)] = p.scale;
        ql.zeros[static_cast<std::size_t>(g * n + r)] =
            static_cast<std::uint8_t>(p.zero_point + kCodeOffset<Q>);
      }
    };
    if (kQuant &&
        !grouped)  // per-channel grids from the original (dead-column-fixed, or the caller's) weights
      for (std::int64_t r = 0; r < n; ++r)
        set_params(0, r, opt.dead_column_grid == DeadColumnGrid::kOriginal ? w + r * ldw : wp.data() + r * d);

    const bool per_block = !nm && opt.scope == PruneScope::kReference;
    std::vector<float> err(static_cast<std::size_t>(n * bs)),
        scores(static_cast<std::size_t>(per_block ? n * bs : bs));
    std::vector<std::uint8_t> block_keep(static_cast<std::size_t>(per_block ? n * bs : 0));
    detail::DynamicGroupGrids grids(opt.group_grid);
    std::vector<std::int64_t> idx;
    std::vector<float> sorted;
    const bool threshold = !nm && opt.count == PruneCount::kThreshold;
    // fp32 saliency of the current weight of row r, column t (the GPU kernel computes the same expression).
    auto score = [&](std::int64_t r, std::int64_t t) {
      const float x = wp[static_cast<std::size_t>(r * d + t)], ut = u[static_cast<std::size_t>(t * d + t)];
      return (x * x) / (ut * ut);
    };
    double loss_est = 0.0;
    for (std::int64_t i1 = 0; i1 < d; i1 += bs) {
      const std::int64_t i2 = std::min(i1 + bs, d), count = i2 - i1;
      if (grouped) grids.begin_block(wp, n, d, i1, i2);
      if (per_block) {
        const std::int64_t k =
            detail::prune_count(opt.sparsity, n * i2) - detail::prune_count(opt.sparsity, n * i1);
        if (k > 0 || threshold) {
          for (std::int64_t r = 0; r < n; ++r)
            for (std::int64_t t = i1; t < i2; ++t)
              scores[static_cast<std::size_t>(r * count + t - i1)] = score(r, t);
          std::fill(block_keep.begin(), block_keep.begin() + n * count, std::uint8_t{1});
          if (threshold)
            detail::prune_at_or_below_rank(scores.data(), n * count, opt.sparsity, block_keep.data(), sorted);
          else
            detail::prune_lowest(scores.data(), n * count, k, block_keep.data(), idx);
          for (std::int64_t r = 0; r < n; ++r)
            for (std::int64_t t = i1; t < i2; ++t)
              res.mask[static_cast<std::size_t>(r * d + t)] =
                  block_keep[static_cast<std::size_t>(r * count + t - i1)];
        }
      } else if (!nm) {
        const std::int64_t k = detail::prune_count(opt.sparsity, i2) - detail::prune_count(opt.sparsity, i1);
        if (k > 0 || threshold)
          for (std::int64_t r = 0; r < n; ++r) {
            for (std::int64_t t = i1; t < i2; ++t) scores[static_cast<std::size_t>(t - i1)] = score(r, t);
            if (threshold)
              detail::prune_at_or_below_rank(scores.data(), count, opt.sparsity, res.mask.data() + r * d + i1,
                                             sorted);
            else
              detail::prune_lowest(scores.data(), count, k, res.mask.data() + r * d + i1, idx);
          }
      }
      for (std::int64_t j = i1; j < i2; ++j) {
        if (grouped && j % G == 0)
          LLMK_RETURN_IF_ERROR(
              grids.at_group(wp, n, d, j, G, i1, i2, err, bs, u, la,
                             [&](std::int64_t r, const float* v) { set_params(j / G, r, v); }));
        if (nm && (j - i1) % m == 0)
          for (std::int64_t r = 0; r < n; ++r) {
            for (std::int64_t t = 0; t < m; ++t) scores[static_cast<std::size_t>(t)] = score(r, j + t);
            detail::prune_lowest(scores.data(), m, opt.prune_n, res.mask.data() + r * d + j, idx);
          }
        const float ujj = u[static_cast<std::size_t>(j * d + j)];
        const float* urow = u.data() + j * d;
        for (std::int64_t r = 0; r < n; ++r) {
          float* wr = wp.data() + r * d;
          const std::size_t at = static_cast<std::size_t>(r * d + j);
          const bool keep = res.mask[at] != 0;
          const float x = wr[j];
          float q = keep ? x : 0.0f;
          if constexpr (kQuant) {
            const quant::QuantParams& p = params[static_cast<std::size_t>((j / G) * n + r)];
            const int code = keep ? static_cast<int>(Q::quantize(x, p)) : p.zero_point;
            q = keep ? Q::dequantize(code, p) : 0.0f;
            ql.codes[at] = static_cast<std::uint8_t>(code + kCodeOffset<Q>);
          }
          const float e = (x - q) / ujj;
          loss_est += 0.5 * static_cast<double>(e) * e;
          for (std::int64_t t = j + 1; t < i2; ++t) wr[t] -= e * urow[t];
          err[static_cast<std::size_t>(r * bs + (j - i1))] = e;
          res.weights[at] = q;
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
  };
  const Status status = opt.bits != 0 ? with_quantizer(opt.bits, opt.symmetric, opt.symmetric_grid, run)
                                      : run.template operator()<detail::NoQuantizer>();
  LLMK_RETURN_IF_ERROR(status);
  // Everything since the inverse that was not a trailing GEMM: the column loops (masks and grids included).
  times.column_loop_s = detail::seconds_since(phase) - times.trailing_s;
  if (!detail::all_finite(res.weights.data(), n * d))
    return Status::internal("sparsegpt produced non-finite weights");
  phase = std::chrono::steady_clock::now();
  if (opt.report_loss)
    LLMK_RETURN_IF_ERROR(detail::layer_loss(a, res.weights, la, &res.loss));
  else
    res.loss = std::numeric_limits<double>::quiet_NaN();
  times.loss_s = detail::seconds_since(phase);
  res.damping = rep;
  res.timings = times;
  if (opt.bits != 0) {
    ql.dequantized = res.weights;
    ql.loss = res.loss;
    ql.loss_estimate = res.loss_estimate;
    ql.damping = rep;
    ql.timings = times;
  }
  *out = std::move(res);
  return {};
}

}  // namespace llmk::obs
