// llmk/obs/gptq_gpu.cuh: GPTQ on the GPU. The same algorithm, options and output meaning as the host path
// (llmk/obs/gptq.hpp, gptq_quantize), on device memory: the per-block column loop is ONE fused kernel launch
// (rows are independent; the block of the Cholesky factor U lives in shared memory), the trailing updates,
// the factorizations and the loss go through the linear-algebra backend (cuSOLVER / cuBLAS:
// CudaLinalgBackend, llmk/obs/linalg_cuda.cuh). llmk/obs/gpu_path.cuh describes the phases and the kernel.
//
// Results: in the simulator (host backend on simulated device memory) the outputs equal gptq_quantize's bit
// for bit when the block size used (report.block_size) equals the host path's min(block_size, cols); on a GPU
// they agree to fp32 rounding (cuBLAS / cuSOLVER order, FMA contraction), which may move a rare value across
// a rounding boundary (one code step).
//
// Block size used: the largest bs <= min(block_size, cols, 128) such that a dynamic group never straddles a
// block except from its first column (group size G <= bs: bs % G == 0; G > bs: G % bs == 0). Per-channel and
// static grids impose nothing. Lazy batches do not change the math, only the fp32 rounding.
//
//   llmk::obs::CudaLinalgBackend la(stream);                // the simulator: llmk::obs::HostLapackBackend
//   llmk::obs::GptqOptions opt;  opt.group_size = 128;  opt.act_order = true;
//   std::size_t ws = llmk::obs::gptq_gpu_workspace_bytes(N, K, opt);
//   llmk::obs::GptqGpuOutputs out{d_codes, K, d_scales, d_zeros, d_g_idx, d_dequant, K};
//   llmk::obs::GptqGpuReport rep;
//   llmk::Status s = llmk::obs::gptq_quantize_gpu(d_w, N, K, K, d_h, K, opt, la, out, d_ws, ws, stream,
//   &rep);
#pragma once

#include <cstdint>
#include <vector>

#include "llmk/obs/gptq.hpp"
#include "llmk/obs/gpu_path.cuh"

namespace llmk::obs {

/// Where gptq_quantize_gpu writes (all device memory, caller-owned; the meaning of QuantizedLayer's fields).
struct GptqGpuOutputs {
  std::uint8_t* codes = nullptr;    ///< [rows, ld_codes] unsigned codes, original column order
  std::int64_t ld_codes = 0;        ///< >= cols
  float* scales = nullptr;          ///< [groups, rows], groups = cols / G (G = cols when per-channel)
  std::uint8_t* zeros = nullptr;    ///< [groups, rows] zero-point codes (symmetric: 2^(bits-1))
  std::int32_t* g_idx = nullptr;    ///< [cols] group of each original column
  float* dequantized = nullptr;     ///< [rows, ld_dequantized] s * (u - z) (nullable: not written)
  std::int64_t ld_dequantized = 0;  ///< >= cols when dequantized is given
};

/// What gptq_quantize_gpu reports on the host.
struct GptqGpuReport {
  std::int64_t block_size = 0;  ///< the block size used (file comment)
  std::vector<std::int32_t>
      order;          ///< [cols] processing order (order[j] = original column), QuantizedLayer::order
  double loss = 0.0;  ///< 1/2 tr((W - Q) H (W - Q)^T) with the given H
  double loss_estimate = 0.0;  ///< sum of (w - q)^2 / (2 U_jj^2): the damped objective
  DampingReport damping;
  ObsTimings timings;  ///< the stream is synchronized at each phase boundary
};

/// The block size gptq_quantize_gpu uses for these options (the file comment's rule); options must be valid.
///   std::int64_t bs = llmk::obs::gptq_gpu_block_size(K, opt);       // 128 for K = 4096, G = 128
inline std::int64_t gptq_gpu_block_size(std::int64_t cols, const GptqOptions& opt) {
  const bool dynamic_groups = opt.group_size > 0 && !opt.static_groups;
  return detail::fused_block_size(cols, opt.block_size, dynamic_groups ? opt.group_size : 0, 0);
}

/// Device workspace bytes gptq_quantize_gpu needs (16-byte aligned): about (3 rows + 2 cols) * cols * 4
/// (working W, W - Q, the permuted H / E H, U) plus O(rows * 128 + cols).
///   std::size_t ws = llmk::obs::gptq_gpu_workspace_bytes(4096, 4096, opt);     // about 320 MiB
inline std::size_t gptq_gpu_workspace_bytes(std::int64_t rows, std::int64_t cols, const GptqOptions& opt) {
  if (rows < 1 || cols < 1 || opt.block_size < 1) return 0;
  return detail::fused_layout(rows, cols, gptq_gpu_block_size(cols, opt)).total;
}

/// GPTQ of one layer on the GPU: w [rows = N out features, cols = K in features] (ldw) and the layer Hessian
/// h [K, K] (ldh; llmk/obs/hessian.cuh), fp32 device memory, finite; neither is modified. Options and output
/// meaning as gptq_quantize (llmk/obs/gptq.hpp). `la` performs the factorizations and GEMMs on device memory
/// on `stream` (a GPU build requires la.uses_device_memory(); in the simulator HostLapackBackend serves).
/// Errors name the argument: rows, cols, w, ldw, h, ldh, bits, group_size, block_size, symmetric_grid,
/// group_grid, dead_column_grid, mse_grid, mse_maxshrink, mse_norm, percdamp, damp_growth, max_retries,
/// codes, ld_codes, scales, zeros, g_idx, dequantized, ld_dequantized, workspace, workspace_bytes, la,
/// report. w, h, scales, g_idx, dequantized must be 4-byte aligned; no output may overlap h, nor w, except
/// dequantized being w itself with ld_dequantized = ldw (in place); outputs must not overlap each other or
/// the workspace, nor the workspace w or h. A Hessian that no damping makes positive definite is an error
/// naming h. On an error the outputs' contents are unspecified; on success they are finite.
/// Synchronous: returns after the stream finished (the report's timings need it).
///   llmk::obs::GptqGpuOutputs out{d_codes, K, d_scales, d_zeros, d_g_idx, nullptr, 0};
///   llmk::obs::GptqGpuReport rep;
///   llmk::throw_if_error(llmk::obs::gptq_quantize_gpu(d_w, N, K, K, d_h, K, opt, la, out, d_ws,
///                                                     llmk::obs::gptq_gpu_workspace_bytes(N, K, opt),
///                                                     stream, &rep));
inline Status gptq_quantize_gpu(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                                const float* h, std::int64_t ldh, const GptqOptions& opt, LinalgBackend& la,
                                const GptqGpuOutputs& out, void* workspace, std::size_t workspace_bytes,
                                cudaStream_t stream, GptqGpuReport* report) {
  LLMK_RETURN_IF_ERROR(detail::validate_fused_common(w, rows, cols, ldw, h, ldh));
  LLMK_RETURN_IF_ERROR(detail::validate_quant_choice(opt.bits, opt.group_size, cols));
  LLMK_RETURN_IF_ERROR(detail::check_symmetric_grid(opt.symmetric_grid));
  if (opt.block_size < 1)
    return Status::invalid_argument("block_size", str_cat("must be >= 1, got ", opt.block_size));
  LLMK_RETURN_IF_ERROR(
      detail::check_mse_options(opt.mse_clip, opt.mse_grid, opt.mse_maxshrink, opt.mse_norm));
  LLMK_RETURN_IF_ERROR(detail::check_group_grid(opt.group_grid));
  LLMK_RETURN_IF_ERROR(detail::check_dead_column_grid(opt.dead_column_grid));
  LLMK_RETURN_IF_ERROR(detail::check_damping(opt.damping));
  if (out.codes == nullptr) return Status::invalid_argument("codes", "must not be null");
  if (out.ld_codes < cols)
    return Status::invalid_argument(
        "ld_codes", str_cat("must be >= cols (cols=", cols, ", ld_codes=", out.ld_codes, ")"));
  if (out.scales == nullptr) return Status::invalid_argument("scales", "must not be null");
  if (out.zeros == nullptr) return Status::invalid_argument("zeros", "must not be null");
  if (out.g_idx == nullptr) return Status::invalid_argument("g_idx", "must not be null");
  if (out.dequantized != nullptr && out.ld_dequantized < cols)
    return Status::invalid_argument("ld_dequantized",
                                    str_cat("must be >= cols when dequantized is given (cols=", cols,
                                            ", ld_dequantized=", out.ld_dequantized, ")"));
  if (report == nullptr) return Status::invalid_argument("report", "must not be null");
  // g_idx and the static grids are written before w is read; the loss GEMM reads h last.
  const std::int64_t groups = opt.group_size > 0 ? cols / opt.group_size : 1;
  const detail::InputExtents in = detail::input_extents(w, rows, cols, ldw, h, ldh);
  const auto regions = detail::quantized_regions(out, rows, cols, groups, /*in_place=*/true);
  LLMK_RETURN_IF_ERROR(detail::check_quantized_alignment(out));
  LLMK_RETURN_IF_ERROR(detail::check_outputs_vs_inputs(regions, in));
  LLMK_RETURN_IF_ERROR(check_device_pointer("codes", out.codes));
  LLMK_RETURN_IF_ERROR(check_device_pointer("scales", out.scales));
  LLMK_RETURN_IF_ERROR(check_device_pointer("zeros", out.zeros));
  LLMK_RETURN_IF_ERROR(check_device_pointer("g_idx", out.g_idx));
  LLMK_RETURN_IF_ERROR(check_device_pointer("dequantized", out.dequantized));
  LLMK_RETURN_IF_ERROR(detail::validate_fused_resources(la, workspace, workspace_bytes,
                                                        gptq_gpu_workspace_bytes(rows, cols, opt)));
  LLMK_RETURN_IF_ERROR(detail::check_resources_disjoint(regions, workspace, workspace_bytes, in));

  detail::FusedConfig cfg{};
  cfg.bits = opt.bits;
  cfg.symmetric = opt.symmetric;
  cfg.group_size = opt.group_size;
  cfg.act_order = opt.act_order;
  cfg.static_groups = opt.static_groups;
  cfg.group_grid_current = opt.group_grid == GroupGrid::kCurrent;
  cfg.grid = detail::GridChoice{
      opt.mse_clip ? 1 : 0, opt.mse_grid,
      opt.mse_maxshrink,    opt.mse_norm,
      opt.symmetric_grid,   opt.group_size == 0 && opt.dead_column_grid == DeadColumnGrid::kOriginal};
  cfg.block_size = opt.block_size;
  cfg.damping = opt.damping;
  cfg.prune_mode = detail::kPruneNone;
  detail::FusedOutputs fo{};
  fo.codes = out.codes;
  fo.ldc = out.ld_codes;
  fo.scales = out.scales;
  fo.zeros = out.zeros;
  fo.g_idx = out.g_idx;
  fo.q_out = out.dequantized;
  fo.ldq = out.ld_dequantized;
  detail::FusedReport fr;
  LLMK_RETURN_IF_ERROR(detail::run_fused(w, rows, cols, ldw, h, ldh, cfg, la, fo, workspace,
                                         gptq_gpu_block_size(cols, opt), stream, &fr));
  report->block_size = fr.block_size;
  report->order = std::move(fr.order);
  report->loss = fr.loss;
  report->loss_estimate = fr.loss_estimate;
  report->damping = fr.damping;
  report->timings = fr.timings;
  return {};
}

}  // namespace llmk::obs
