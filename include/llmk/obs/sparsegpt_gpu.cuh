// llmk/obs/sparsegpt_gpu.cuh: SparseGPT on the GPU. The same algorithm, options and output meaning as the
// host path (llmk/obs/sparsegpt.hpp, sparsegpt_prune), on device memory, through the machinery GPTQ's GPU
// path uses (llmk/obs/gpu_path.cuh): per block ONE fused column-loop launch (masks, optional joint
// quantization, the in-block updates), the trailing updates, factorizations and loss through the backend.
//
// Masks: unstructured with scope kReference (default, the reference code's rule): at each block start the
// block's scores are written once and llmk::device::lowest_k_mask (llmk/core/device_algorithms.cuh: one
// stable CUB radix sort on a GPU) prunes the k = llround(sparsity rows i2) - llround(sparsity rows i1) lowest
// scores (w_t^2 / U_tt^2 on the current weights, fp32) of all rows x the
// block's columns, ties to the lower row-major index; with kPerRow, per row in the column loop, the k =
// llround(sparsity i2) - llround(sparsity i1) lowest of the row's block, ties to the lower column (every row
// loses exactly llround(sparsity cols) weights). Both are the host path's rules (llmk/obs/sparsegpt.hpp).
// count = PruneCount::kThreshold (the reference code's rule, either scope): every score at or below the
// set's (the block's, or a row's in the block) sorted score at int(sparsity n), from the block's scores by
// llmk::device::segmented_at_or_below_kth_mask, as the host path does.
// n:m: when (j - i1) % m == 0, the n lowest of columns j .. j+m-1. Pruned weights are exactly 0 (code: the
// zero point).
//
// Block size used: the largest bs <= the host path's block size (min(block_size, cols), n:m rounded down to
// a multiple of m, at least m), capped at 128, with bs % m == 0 (n:m) and the group rule of GPTQ's GPU path
// (G <= bs: bs % G == 0; G > bs: G % bs == 0). n:m with m > 128 is Status::unsupported. When the block size
// used equals the host path's, the simulator (host backend) reproduces sparsegpt_prune bit for bit; otherwise
// unstructured masks are chosen over other blocks (the same sparsity, another mask).
//
//   llmk::obs::CudaLinalgBackend la(stream);                // the simulator: llmk::obs::HostLapackBackend
//   llmk::obs::SparseGptOptions opt;  opt.prune_n = 2;  opt.prune_m = 4;
//   std::size_t ws = llmk::obs::sparsegpt_gpu_workspace_bytes(N, K, opt);
//   llmk::obs::SparseGptGpuOutputs out;  out.weights = d_wout;  out.ld_weights = K;  out.mask = d_mask;
//   out.ld_mask = K;
//   llmk::obs::SparseGptGpuReport rep;
//   llmk::Status s = llmk::obs::sparsegpt_prune_gpu(d_w, N, K, K, d_h, K, opt, la, out, d_ws, ws, stream,
//   &rep);
#pragma once

#include <cstdint>

#include "llmk/obs/gpu_path.cuh"
#include "llmk/obs/sparsegpt.hpp"

namespace llmk::obs {

/// Where sparsegpt_prune_gpu writes (all device memory, caller-owned).
struct SparseGptGpuOutputs {
  float* weights = nullptr;     ///< [rows, ld_weights] pruned (exactly 0), compensated, dequantized when bits
  std::int64_t ld_weights = 0;  ///< >= cols
  std::uint8_t* mask = nullptr;   ///< [rows, ld_mask] 1 = kept
  std::int64_t ld_mask = 0;       ///< >= cols
  std::uint8_t* codes = nullptr;  ///< bits > 0: [rows, ld_codes] unsigned codes (QuantizedLayer::codes)
  std::int64_t ld_codes = 0;
  float* scales = nullptr;        ///< bits > 0: [groups, rows]
  std::uint8_t* zeros = nullptr;  ///< bits > 0: [groups, rows] zero-point codes
  std::int32_t* g_idx = nullptr;  ///< bits > 0: [cols] = c / G
};

/// What sparsegpt_prune_gpu reports on the host.
struct SparseGptGpuReport {
  std::int64_t block_size = 0;  ///< the block size used (file comment)
  double loss = 0.0;            ///< 1/2 tr((W - W') H (W - W')^T) with the given H
  double loss_estimate = 0.0;   ///< sum of e^2 / 2: the damped objective
  DampingReport damping;
  ObsTimings timings;
};

/// The block size sparsegpt_prune_gpu uses (file comment); 0 when none fits (n:m with m > 128).
///   std::int64_t bs = llmk::obs::sparsegpt_gpu_block_size(K, opt);      // 128 for 2:4 and K >= 128
inline std::int64_t sparsegpt_gpu_block_size(std::int64_t cols, const SparseGptOptions& opt) {
  const bool nm = opt.prune_n > 0;
  const std::int64_t group = opt.bits != 0 && opt.group_size > 0 ? opt.group_size : 0;
  return detail::fused_block_size(cols, opt.block_size, group, nm ? opt.prune_m : 0);
}

namespace detail {
// How the GPU entry chooses its masks: n:m and the exact per-row count inside the column loop
// (kPruneNM, kPruneUnstructured); a block mask from the device-wide selection (kPruneBlock) for one set a
// block (scope kReference), and for the threshold count per row (its ties need the sorted scores).
inline int sparsegpt_prune_mode(const SparseGptOptions& opt) {
  if (opt.prune_n > 0) return kPruneNM;
  if (opt.scope == PruneScope::kPerRow && opt.count == PruneCount::kExact) return kPruneUnstructured;
  return kPruneBlock;
}
// The candidate sets of a block mask: rows (per row) or 1 (the block); 0 without one.
inline std::int64_t sparsegpt_select_segments(std::int64_t rows, const SparseGptOptions& opt) {
  if (sparsegpt_prune_mode(opt) != kPruneBlock) return 0;
  return opt.scope == PruneScope::kPerRow ? rows : 1;
}
}  // namespace detail

/// Device workspace bytes sparsegpt_prune_gpu needs (16-byte aligned); as GPTQ's (gptq_gpu_workspace_bytes).
///   std::size_t ws = llmk::obs::sparsegpt_gpu_workspace_bytes(N, K, opt);
inline std::size_t sparsegpt_gpu_workspace_bytes(std::int64_t rows, std::int64_t cols,
                                                 const SparseGptOptions& opt) {
  if (rows < 1 || cols < 1 || opt.block_size < 1) return 0;
  const std::int64_t bs = sparsegpt_gpu_block_size(cols, opt);
  return detail::fused_layout(rows, cols, bs > 0 ? bs : 1, detail::sparsegpt_select_segments(rows, opt))
      .total;
}

/// SparseGPT of one layer on the GPU: w [rows = N, cols = K] (ldw) and its Hessian h [K, K] (ldh), fp32
/// device memory, finite; neither is modified. Options and output meaning as sparsegpt_prune
/// (llmk/obs/sparsegpt.hpp). `la` performs the factorizations and GEMMs on device memory on `stream` (a GPU
/// build requires la.uses_device_memory(); in the simulator HostLapackBackend serves). Errors name the
/// argument: rows, cols, w, ldw, h, ldh, sparsity, prune_n, prune_m, block_size, scope, bits, group_size,
/// symmetric_grid, group_grid, dead_column_grid, mse_grid, mse_maxshrink, mse_norm, percdamp, damp_growth,
/// max_retries, weights, ld_weights, mask, ld_mask, codes, ld_codes, scales, zeros, g_idx, workspace,
/// workspace_bytes, la, report; n:m with m > 128 is Status::unsupported. w, h, weights, scales, g_idx must be
/// 4-byte aligned; no output may overlap h, nor w, except weights being w itself with ld_weights = ldw (in
/// place), nor another output or the workspace; nor the workspace w or h (quantizer outputs only when bits >
/// 0). On an error the outputs' contents are unspecified; on success they are finite. Synchronous (the
/// timings need it).
///   llmk::obs::SparseGptGpuReport rep;
///   llmk::throw_if_error(llmk::obs::sparsegpt_prune_gpu(d_w, N, K, K, d_h, K, opt, la, out, d_ws, ws,
///   stream,
///                                                       &rep));
inline Status sparsegpt_prune_gpu(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                                  const float* h, std::int64_t ldh, const SparseGptOptions& opt,
                                  LinalgBackend& la, const SparseGptGpuOutputs& out, void* workspace,
                                  std::size_t workspace_bytes, cudaStream_t stream,
                                  SparseGptGpuReport* report) {
  LLMK_RETURN_IF_ERROR(detail::validate_fused_common(w, rows, cols, ldw, h, ldh));
  LLMK_RETURN_IF_ERROR(detail::check_prune_pattern(opt.sparsity, opt.prune_n, opt.prune_m, cols));
  if (opt.block_size < 1)
    return Status::invalid_argument("block_size", str_cat("must be >= 1, got ", opt.block_size));
  LLMK_RETURN_IF_ERROR(detail::check_scope(opt.scope));
  LLMK_RETURN_IF_ERROR(detail::check_count(opt.count));
  if (opt.scope == PruneScope::kPerLayer)
    return Status::invalid_argument(
        "scope", "SparseGPT chooses its mask a block of columns at a time: kReference or kPerRow");
  if (rows > (std::int64_t{1} << 24))
    return Status::invalid_argument(
        "rows",
        str_cat("must be <= 2^24 (a block's mask indexes rows x 128 candidates in 32 bits), got ", rows));
  const bool quantize = opt.bits != 0;
  if (quantize) {
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
  const std::int64_t bs = sparsegpt_gpu_block_size(cols, opt);
  if (bs == 0)
    return Status::unsupported(str_cat("n:m with m = ", opt.prune_m, " > ", kFusedMaxBlock,
                                       " on the GPU path (the fused column loop holds at most ",
                                       kFusedMaxBlock, " columns)"));
  if (out.weights == nullptr) return Status::invalid_argument("weights", "must not be null");
  if (out.ld_weights < cols)
    return Status::invalid_argument(
        "ld_weights", str_cat("must be >= cols (cols=", cols, ", ld_weights=", out.ld_weights, ")"));
  if (out.mask == nullptr) return Status::invalid_argument("mask", "must not be null");
  if (out.ld_mask < cols)
    return Status::invalid_argument("ld_mask",
                                    str_cat("must be >= cols (cols=", cols, ", ld_mask=", out.ld_mask, ")"));
  if (quantize) {
    if (out.codes == nullptr) return Status::invalid_argument("codes", "must not be null when bits > 0");
    if (out.ld_codes < cols)
      return Status::invalid_argument(
          "ld_codes", str_cat("must be >= cols (cols=", cols, ", ld_codes=", out.ld_codes, ")"));
    if (out.scales == nullptr) return Status::invalid_argument("scales", "must not be null when bits > 0");
    if (out.zeros == nullptr) return Status::invalid_argument("zeros", "must not be null when bits > 0");
    if (out.g_idx == nullptr) return Status::invalid_argument("g_idx", "must not be null when bits > 0");
  }
  if (report == nullptr) return Status::invalid_argument("report", "must not be null");
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("weights", out.weights));
  if (quantize) {
    LLMK_RETURN_IF_ERROR(check_element_alignment<float>("scales", out.scales));
    LLMK_RETURN_IF_ERROR(check_element_alignment<std::int32_t>("g_idx", out.g_idx));
  }
  const detail::InputExtents in = detail::input_extents(w, rows, cols, ldw, h, ldh);
  const std::int64_t groups = opt.group_size > 0 ? cols / opt.group_size : 1;
  // The weights may be w itself (in place); nothing else may overlap w or h (the loss GEMM reads h last).
  // Without quantization the quantized outputs are not written (null regions).
  const detail::OutputRegion regions[] = {
      {"weights", out.weights, detail::extent_bytes(rows, cols, out.ld_weights, 4), "ld_weights",
       out.ld_weights},
      {"mask", out.mask, detail::extent_bytes(rows, cols, out.ld_mask, 1)},
      {"codes", quantize ? out.codes : nullptr, detail::extent_bytes(rows, cols, out.ld_codes, 1)},
      {"scales", quantize ? out.scales : nullptr, detail::extent_bytes(groups, rows, rows, 4)},
      {"zeros", quantize ? out.zeros : nullptr, detail::extent_bytes(groups, rows, rows, 1)},
      {"g_idx", quantize ? out.g_idx : nullptr, cols * 4}};
  LLMK_RETURN_IF_ERROR(detail::check_outputs_vs_inputs(regions, in));
  LLMK_RETURN_IF_ERROR(check_device_pointer("weights", out.weights));
  LLMK_RETURN_IF_ERROR(check_device_pointer("mask", out.mask));
  LLMK_RETURN_IF_ERROR(check_device_pointer("codes", out.codes));
  LLMK_RETURN_IF_ERROR(check_device_pointer("scales", out.scales));
  LLMK_RETURN_IF_ERROR(check_device_pointer("zeros", out.zeros));
  LLMK_RETURN_IF_ERROR(check_device_pointer("g_idx", out.g_idx));
  LLMK_RETURN_IF_ERROR(detail::validate_fused_resources(la, workspace, workspace_bytes,
                                                        sparsegpt_gpu_workspace_bytes(rows, cols, opt)));
  LLMK_RETURN_IF_ERROR(detail::check_resources_disjoint(regions, workspace, workspace_bytes, in));

  detail::FusedConfig cfg{};
  cfg.bits = opt.bits;
  cfg.symmetric = opt.symmetric;
  cfg.group_size = quantize ? opt.group_size : 0;
  cfg.act_order = false;
  cfg.static_groups = false;
  cfg.group_grid_current = opt.group_grid == GroupGrid::kCurrent;
  cfg.grid = detail::GridChoice{
      opt.mse_clip ? 1 : 0, opt.mse_grid,
      opt.mse_maxshrink,    opt.mse_norm,
      opt.symmetric_grid,   cfg.group_size == 0 && opt.dead_column_grid == DeadColumnGrid::kOriginal};
  cfg.block_size = opt.block_size;
  cfg.damping = opt.damping;
  cfg.prune_mode = detail::sparsegpt_prune_mode(opt);
  cfg.prune_threshold = opt.prune_n == 0 && opt.count == PruneCount::kThreshold;
  cfg.select_per_row = opt.scope == PruneScope::kPerRow;
  cfg.sparsity = opt.sparsity;
  cfg.prune_n = opt.prune_n;
  cfg.prune_m = opt.prune_m;
  detail::FusedOutputs fo{};
  fo.codes = quantize ? out.codes : nullptr;
  fo.ldc = out.ld_codes;
  fo.scales = out.scales;
  fo.zeros = out.zeros;
  fo.g_idx = out.g_idx;
  fo.q_out = out.weights;
  fo.ldq = out.ld_weights;
  fo.mask = out.mask;
  fo.ldm = out.ld_mask;
  detail::FusedReport fr;
  LLMK_RETURN_IF_ERROR(
      detail::run_fused(w, rows, cols, ldw, h, ldh, cfg, la, fo, workspace, bs, stream, &fr));
  report->block_size = fr.block_size;
  report->loss = fr.loss;
  report->loss_estimate = fr.loss_estimate;
  report->damping = fr.damping;
  report->timings = fr.timings;
  return {};
}

}  // namespace llmk::obs
