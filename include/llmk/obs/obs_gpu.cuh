// llmk/obs/obs_gpu.cuh: OBS pruning and OBQ on the GPU. The same algorithms, options and outputs as the host
// entries obs_prune (llmk/obs/obs.hpp) and obq_quantize (llmk/obs/obq.hpp), on device memory:
//   prepare      input checks (the first non-finite w / h element), diag H to the host (dead columns, the
//                damping mean), the symmetrized, dead-column-fixed H and the dead-column-zeroed W into the
//                workspace; OBQ: the grids of every group from those weights (gpu_path.cuh's grid kernel, MSE
//                clip search included).
//   inverse      the full damped inverse H^-1 (InverseForm::kFull) through the backend on device memory, with
//                damped_inverse's retry policy (gpu_path.cuh's damped_upper_cholesky_device, kFull).
//   column loop  ONE CTA (256 threads) per row, rows_in_flight rows per launch: the row owns an fp64 copy of
//                H^-1 [d, d] and fp64 row vectors in the workspace; each step is a block-wide argmin of the
//                host's selection key with the host's exact tie-breaking (first column in index order; OBQ's
//                outlier rule), the OBS update of the row and the Schur downdate of its H^-1 (elementwise, in
//                parallel). OBQ kBestOfBoth runs both greedy orders and keeps the smaller saliency sum (ties
//                to least saliency); refine_sweeps runs obq_refine_row's coordinate descent on the kept H.
//   loss         1/2 tr((W - W') H (W - W')^T) with the caller's H: E = W - W', E H through the backend's
//                GEMM, a warp-per-row fp64 reduction.
// The stream is synchronized at the phase boundaries (ObsTimings); the backend must run on the same stream.
//
// Results: in the simulator (HostLapackBackend on simulated device memory) every output equals the host
// entry's bit for bit (weights, masks, codes, scales, zeros, row losses; the reported losses to 1e-9
// relative: fp64 sums in another order). On a GPU the inverse comes from cuSOLVER and nvcc contracts the fp64
// updates to FMAs, so values agree to fp32 rounding of H^-1 (about 1e-5 relative on well-conditioned layers),
// and a greedy choice between near-equal keys may differ, which changes that row's mask / codes (expect ~1%
// of the entries, the loss within ~1e-3 relative).
//
// Cost: O(cols^3) for the inverse plus O(steps cols^2) per row (steps = prune_per_row, or cols per OBQ
// order). Workspace: about (4 rows + 2 cols) cols * 4 bytes plus rows_in_flight * (cols^2 + 6 cols) * 8 bytes
// for the per-row H^-1 copies: rows_in_flight = min(rows, 1024, 1 GiB / (8 cols^2)) by default
// (obs_gpu_rows_in_flight); a smaller workspace runs fewer rows in flight (down to 1, see the queries).
//
//   llmk::obs::CudaLinalgBackend la(stream);                // the simulator: llmk::obs::HostLapackBackend
//   llmk::obs::ObqOptions opt;  opt.bits = 4;
//   std::size_t ws = llmk::obs::obq_quantize_gpu_workspace_bytes(N, K, opt);
//   llmk::obs::ObqGpuOutputs out{d_codes, K, d_scales, d_zeros, d_g_idx, d_dequant, K};
//   llmk::obs::ObqGpuReport rep;
//   llmk::Status s = llmk::obs::obq_quantize_gpu(d_w, N, K, K, d_h, K, opt, la, out, d_ws, ws, stream, &rep);
//
// The parts: obs_gpu_layout.cuh (rows in flight, the workspace layout and its size), obs_gpu_kernels.cuh (the
// glue kernels and the per-row kernel). This file: the phase driver (detail::run_obs_gpu) and the entries
// obs_prune_gpu and obq_quantize_gpu with their outputs, reports and workspace queries.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/obs/gpu_path.cuh"
#include "llmk/obs/obs.hpp"
#include "llmk/obs/obs_gpu_kernels.cuh"
#include "llmk/obs/obs_gpu_layout.cuh"

namespace llmk::obs {

namespace detail {

struct ObsGpuConfig {
  int bits;  // 0: pruning
  bool symmetric;
  std::int64_t group_size;  // resolved (cols when per-channel)
  GridChoice grid;
  std::int64_t prune_per_row;
  int order, refine_sweeps;
  DampingOptions damping;
};

struct ObsGpuRun {
  double loss = 0.0, loss_estimate = 0.0;
  std::int64_t rows_in_flight = 0;
  DampingReport damping;
  ObsTimings timings;
};

// The whole run (arguments validated). `a` holds the outputs; the workspace pointers are filled here.
inline Status run_obs_gpu(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                          const float* h, std::int64_t ldh, const ObsGpuConfig& cfg, LinalgBackend& la,
                          ObsRowArgs a, void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                          ObsGpuRun* run) {
  const std::int64_t n = rows, d = cols;
  const std::int64_t in_flight = obs_gpu_fit_rows(n, d, workspace_bytes);
  const ObsGpuLayout L = obs_gpu_layout(n, d, in_flight);
  const std::int64_t ldp = L.ldp;
  float* wd = region<float>(workspace, L.wd);
  float* hfix = region<float>(workspace, L.hfix);
  float* hinv = region<float>(workspace, L.hinv);
  float* qd = region<float>(workspace, L.qd);
  double* row_sum = region<double>(workspace, L.row_sum);
  double* row_dot = region<double>(workspace, L.row_dot);
  float* diag_scratch = region<float>(workspace, L.diag);
  auto* flag = region<unsigned long long>(workspace, L.flag);
  ObsGpuRun rep;
  rep.rows_in_flight = in_flight;
  LLMK_RETURN_IF_ERROR(stream_sync(stream));
  auto phase = std::chrono::steady_clock::now();

  // ---- prepare
  std::vector<float> diag;
  LLMK_RETURN_IF_ERROR(check_inputs_read_diag(w, n, d, ldw, h, ldh, flag, diag_scratch, stream, &diag,
                                              &rep.damping.dead_columns));
  LLMK_RETURN_IF_ERROR(launch(obs_dense_weights_kernel<float>, glue_grid(n, d), dim3(kGlueThreads), 0, stream,
                              w, n, d, ldw, h, ldh, wd, ldp));
  LLMK_RETURN_IF_ERROR(launch(obs_sym_hessian_kernel<float>, glue_grid(d, d), dim3(kGlueThreads), 0, stream,
                              h, d, ldh, hfix, ldp));
  if (cfg.bits != 0)
    LLMK_RETURN_IF_ERROR(launch_static_grid(
        cfg.bits, cfg.symmetric, wd, n, ldp, hfix, ldp, d / cfg.group_size, cfg.group_size, cfg.grid,
        const_cast<float*>(a.scales), const_cast<std::uint8_t*>(a.zeros), stream));
  LLMK_RETURN_IF_ERROR(stream_sync(stream));
  rep.timings.prepare_s = seconds_since(phase);

  // ---- inverse (full)
  phase = std::chrono::steady_clock::now();
  LLMK_RETURN_IF_ERROR(damped_upper_cholesky_device(hfix, diag, d, ldp, cfg.damping, la, hinv, ldp,
                                                    DeviceInverseScratch{diag_scratch, flag}, stream,
                                                    &rep.damping, InverseForm::kFull));
  LLMK_RETURN_IF_ERROR(stream_sync(stream));
  rep.timings.inverse_s = seconds_since(phase);

  // ---- the rows
  phase = std::chrono::steady_clock::now();
  a.rows = n;
  a.d = d;
  a.wd = wd;
  a.hinv = hinv;
  a.hfix = hfix;
  a.ldp = ldp;
  a.hi = region<double>(workspace, L.hi);
  a.row = region<double>(workspace, L.row);
  a.col = region<double>(workspace, L.col);
  a.values = region<double>(workspace, L.values);
  a.values2 = region<double>(workspace, L.values2);
  a.he = region<double>(workspace, L.he);
  a.codes = region<int>(workspace, L.codes);
  a.codes2 = region<int>(workspace, L.codes2);
  a.done = region<std::uint8_t>(workspace, L.done);
  a.prune = cfg.bits == 0 ? 1 : 0;
  a.steps = cfg.prune_per_row;
  a.order = cfg.order;
  a.refine_sweeps = cfg.refine_sweeps;
  a.group_size = cfg.group_size;
  a.qd = qd;
  a.row_sum = row_sum;
  for (std::int64_t r0 = 0; r0 < n; r0 += in_flight) {
    a.row0 = r0;
    LLMK_RETURN_IF_ERROR(launch_obs_rows(cfg.bits, cfg.symmetric, a, std::min(in_flight, n - r0), stream));
  }
  std::int64_t bad = -1;
  LLMK_RETURN_IF_ERROR(first_nonfinite(qd, n, d, ldp, flag, stream, &bad));
  if (bad >= 0) return Status::internal("the GPU OBS / OBQ row loop produced non-finite weights");
  LLMK_RETURN_IF_ERROR(stream_sync(stream));
  rep.timings.column_loop_s = seconds_since(phase);

  // ---- loss: 1/2 tr(E H E^T) with the caller's H, E = W - W' (E in wd's storage, E H in qd's)
  phase = std::chrono::steady_clock::now();
  float* e = wd;
  LLMK_RETURN_IF_ERROR(launch(obs_error_kernel<float>, glue_grid(n, d), dim3(kGlueThreads), 0, stream, w, n,
                              d, ldw, qd, ldp, e, ldp));
  LLMK_RETURN_IF_ERROR(la.gemm(Op::kNone, Op::kNone, n, d, d, 1.0f, e, ldp, h, ldh, 0.0f, qd, ldp));
  const std::int64_t dot_blocks = std::min<std::int64_t>(ceil_div<std::int64_t>(n, kGlueThreads / 32), 4096);
  LLMK_RETURN_IF_ERROR(launch(row_dot_kernel<float>, dim3(static_cast<unsigned>(dot_blocks)),
                              dim3(kGlueThreads), 0, stream, e, qd, n, d, ldp, row_dot));
  std::vector<double> sums(static_cast<std::size_t>(2 * n));
  LLMK_RETURN_IF_ERROR(
      copy_sync(sums.data(), row_dot, static_cast<std::size_t>(n) * sizeof(double), true, stream));
  LLMK_RETURN_IF_ERROR(
      copy_sync(sums.data() + n, row_sum, static_cast<std::size_t>(n) * sizeof(double), true, stream));
  double dot = 0.0, est = 0.0;
  for (std::int64_t r = 0; r < n; ++r) {
    dot += sums[static_cast<std::size_t>(r)];
    est += sums[static_cast<std::size_t>(n + r)];
  }
  rep.loss = 0.5 * dot;
  rep.loss_estimate = est;
  rep.timings.loss_s = seconds_since(phase);
  *run = rep;
  return {};
}

// The entries' common checks: layer, outputs' leading dimension helpers and resources.
inline Status validate_obs_gpu_resources(LinalgBackend& la, const void* workspace,
                                         std::size_t workspace_bytes, std::int64_t rows, std::int64_t cols) {
  const std::size_t need = obs_gpu_layout(rows, cols, 1).total;  // one row in flight: the minimum
  LLMK_RETURN_IF_ERROR(validate_fused_resources(la, workspace, workspace_bytes, need));
  return {};
}

}  // namespace detail

// ---- OBS pruning on the GPU
// ------------------------------------------------------------------------------------------

/// Where obs_prune_gpu writes (device memory, caller-owned; ObsPruneResult's meaning).
struct ObsPruneGpuOutputs {
  float* weights = nullptr;      ///< [rows, ld_weights] pruned and compensated, pruned weights exactly 0
  std::int64_t ld_weights = 0;   ///< >= cols
  std::uint8_t* mask = nullptr;  ///< [rows, ld_mask], 1 = kept
  std::int64_t ld_mask = 0;      ///< >= cols
  double* row_loss = nullptr;    ///< [rows] saliency sums (nullable: not written)
};

/// What obs_prune_gpu reports on the host.
struct ObsPruneGpuReport {
  double loss = 0.0;                ///< 1/2 tr((W - W') H (W - W')^T), H as given
  std::int64_t rows_in_flight = 0;  ///< rows processed concurrently (chosen from the workspace given)
  DampingReport damping;
  ObsTimings timings;  ///< prepare, inverse, column_loop (the row kernels), loss
};

/// Device workspace bytes of obs_prune_gpu (16-byte aligned). rows_in_flight = 0: the default
/// obs_gpu_rows_in_flight(rows, cols) (the fastest); 1 gives the minimum the entry accepts. A workspace
/// between the two runs as many rows in flight as fit. Options are not used yet (the layout does not depend
/// on them).
///   std::size_t ws = llmk::obs::obs_prune_gpu_workspace_bytes(N, K, opt);
inline std::size_t obs_prune_gpu_workspace_bytes(std::int64_t rows, std::int64_t cols,
                                                 const ObsPruneOptions& opt,
                                                 std::int64_t rows_in_flight = 0) {
  (void)opt;
  return detail::obs_gpu_workspace_bytes(rows, cols, rows_in_flight);
}

/// OBS pruning (obs_prune, llmk/obs/obs.hpp) on the GPU: w [rows, cols] (ldw) and the layer Hessian h
/// [cols, cols] (ldh), fp32 device memory, finite; neither is modified. prune_per_row times per row: prune
/// the weight of least saliency w_q^2 / (2 [H^-1]_qq) (first column on ties), update the row, downdate its
/// H^-1. `la` runs the factorizations and GEMMs on device memory on `stream` (a GPU build requires
/// la.uses_device_memory(); in the simulator HostLapackBackend serves). Errors name the argument: rows, cols,
/// w, ldw, h, ldh, prune_per_row, percdamp, damp_growth, max_retries, weights, ld_weights, mask, ld_mask,
/// row_loss, workspace, workspace_bytes, la, report. w, h, weights must be 4-byte aligned, row_loss 8-byte;
/// outputs must not overlap w or h (not in place either), each other or the workspace, nor the workspace w
/// or h. Synchronous (returns after the stream finished).
///   llmk::obs::ObsPruneOptions opt;  opt.prune_per_row = K / 2;
///   llmk::obs::ObsPruneGpuOutputs out{d_pruned, K, d_mask, K, nullptr};
///   llmk::obs::ObsPruneGpuReport rep;
///   llmk::throw_if_error(llmk::obs::obs_prune_gpu(d_w, N, K, K, d_h, K, opt, la, out, d_ws,
///                                                 llmk::obs::obs_prune_gpu_workspace_bytes(N, K, opt),
///                                                 stream, &rep));
inline Status obs_prune_gpu(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                            const float* h, std::int64_t ldh, const ObsPruneOptions& opt, LinalgBackend& la,
                            const ObsPruneGpuOutputs& out, void* workspace, std::size_t workspace_bytes,
                            cudaStream_t stream, ObsPruneGpuReport* report) {
  LLMK_RETURN_IF_ERROR(detail::validate_fused_common(w, rows, cols, ldw, h, ldh));
  if (opt.prune_per_row < 0 || opt.prune_per_row > cols)
    return Status::invalid_argument("prune_per_row", str_cat("must be in [0, cols] (cols=", cols,
                                                             ", prune_per_row=", opt.prune_per_row, ")"));
  LLMK_RETURN_IF_ERROR(detail::check_damping(opt.damping));
  if (out.weights == nullptr) return Status::invalid_argument("weights", "must not be null");
  if (out.ld_weights < cols)
    return Status::invalid_argument(
        "ld_weights", str_cat("must be >= cols (cols=", cols, ", ld_weights=", out.ld_weights, ")"));
  if (out.mask == nullptr) return Status::invalid_argument("mask", "must not be null");
  if (out.ld_mask < cols)
    return Status::invalid_argument("ld_mask",
                                    str_cat("must be >= cols (cols=", cols, ", ld_mask=", out.ld_mask, ")"));
  if (report == nullptr) return Status::invalid_argument("report", "must not be null");
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("weights", out.weights));
  LLMK_RETURN_IF_ERROR(check_element_alignment<double>("row_loss", out.row_loss));
  // The rows write the outputs while w and h are still read (the loss reads w last): no overlap, in place
  // included.
  const detail::InputExtents in = detail::input_extents(w, rows, cols, ldw, h, ldh);
  const detail::OutputRegion regions[] = {
      {"weights", out.weights, detail::extent_bytes(rows, cols, out.ld_weights, 4)},
      {"mask", out.mask, detail::extent_bytes(rows, cols, out.ld_mask, 1)},
      {"row_loss", out.row_loss, rows * 8}};
  LLMK_RETURN_IF_ERROR(detail::check_outputs_vs_inputs(regions, in));
  LLMK_RETURN_IF_ERROR(check_device_pointer("weights", out.weights));
  LLMK_RETURN_IF_ERROR(check_device_pointer("mask", out.mask));
  LLMK_RETURN_IF_ERROR(check_device_pointer("row_loss", out.row_loss));
  LLMK_RETURN_IF_ERROR(detail::validate_obs_gpu_resources(la, workspace, workspace_bytes, rows, cols));
  LLMK_RETURN_IF_ERROR(detail::check_resources_disjoint(regions, workspace, workspace_bytes, in));

  detail::ObsGpuConfig cfg{};
  cfg.bits = 0;
  cfg.symmetric = true;
  cfg.group_size = cols;
  cfg.prune_per_row = opt.prune_per_row;
  cfg.order = 0;
  cfg.refine_sweeps = 0;
  cfg.damping = opt.damping;
  detail::ObsRowArgs a{};
  a.out_w = out.weights;
  a.ldo = out.ld_weights;
  a.mask = out.mask;
  a.ldm = out.ld_mask;
  a.row_loss = out.row_loss;
  detail::ObsGpuRun run;
  LLMK_RETURN_IF_ERROR(
      detail::run_obs_gpu(w, rows, cols, ldw, h, ldh, cfg, la, a, workspace, workspace_bytes, stream, &run));
  report->loss = run.loss;
  report->rows_in_flight = run.rows_in_flight;
  report->damping = run.damping;
  report->timings = run.timings;
  return {};
}

// ---- OBQ on the GPU
// --------------------------------------------------------------------------------------------------

/// Where obq_quantize_gpu writes (device memory, caller-owned; QuantizedLayer's meaning).
struct ObqGpuOutputs {
  std::uint8_t* codes = nullptr;    ///< [rows, ld_codes] unsigned codes
  std::int64_t ld_codes = 0;        ///< >= cols
  float* scales = nullptr;          ///< [groups, rows], groups = cols / G (G = cols when per-channel)
  std::uint8_t* zeros = nullptr;    ///< [groups, rows] zero-point codes (symmetric: 2^(bits-1))
  std::int32_t* g_idx = nullptr;    ///< [cols] k / G
  float* dequantized = nullptr;     ///< [rows, ld_dequantized] s * (u - z) (nullable: not written)
  std::int64_t ld_dequantized = 0;  ///< >= cols when dequantized is given
};

/// What obq_quantize_gpu reports on the host.
struct ObqGpuReport {
  double loss = 0.0;           ///< 1/2 tr((W - Q) H (W - Q)^T), H as given
  double loss_estimate = 0.0;  ///< the greedy passes' saliency sum (the damped objective)
  std::int64_t rows_in_flight = 0;
  DampingReport damping;
  ObsTimings timings;
};

/// Device workspace bytes of obq_quantize_gpu (as obs_prune_gpu_workspace_bytes: rows_in_flight 0 = default,
/// 1 = the minimum accepted).
///   std::size_t ws = llmk::obs::obq_quantize_gpu_workspace_bytes(N, K, opt);
inline std::size_t obq_quantize_gpu_workspace_bytes(std::int64_t rows, std::int64_t cols,
                                                    const ObqOptions& opt, std::int64_t rows_in_flight = 0) {
  (void)opt;
  return detail::obs_gpu_workspace_bytes(rows, cols, rows_in_flight);
}

/// OBQ (obq_quantize, llmk/obs/obq.hpp) on the GPU, every ObqOptions choice (bits 2/3/4/8, symmetric, groups,
/// MSE clip, the three orders, refine_sweeps): w [rows, cols] (ldw), h [cols, cols] (ldh), fp32 device
/// memory, finite, not modified. Output in the weight-only GEMM's format (ObqGpuOutputs; g_idx[k] = k / G,
/// the order is the identity). Errors name the argument: rows, cols, w, ldw, h, ldh, bits, group_size,
/// symmetric_grid, order, refine_sweeps, mse_grid, mse_maxshrink, mse_norm, percdamp, damp_growth,
/// max_retries, codes, ld_codes, scales, zeros, g_idx, dequantized, ld_dequantized, workspace,
/// workspace_bytes, la, report. w, h, scales, g_idx, dequantized must be 4-byte aligned; outputs must not
/// overlap w or h (not in place either), each other or the workspace, nor the workspace w or h.
/// Synchronous.
///   llmk::obs::ObqOptions opt;  opt.bits = 4;  opt.group_size = 128;
///   llmk::obs::ObqGpuOutputs out{d_codes, K, d_scales, d_zeros, d_g_idx, nullptr, 0};
///   llmk::obs::ObqGpuReport rep;
///   llmk::throw_if_error(llmk::obs::obq_quantize_gpu(d_w, N, K, K, d_h, K, opt, la, out, d_ws,
///                                                    llmk::obs::obq_quantize_gpu_workspace_bytes(N, K, opt),
///                                                    stream, &rep));
inline Status obq_quantize_gpu(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                               const float* h, std::int64_t ldh, const ObqOptions& opt, LinalgBackend& la,
                               const ObqGpuOutputs& out, void* workspace, std::size_t workspace_bytes,
                               cudaStream_t stream, ObqGpuReport* report) {
  LLMK_RETURN_IF_ERROR(detail::validate_fused_common(w, rows, cols, ldw, h, ldh));
  LLMK_RETURN_IF_ERROR(detail::validate_quant_choice(opt.bits, opt.group_size, cols));
  LLMK_RETURN_IF_ERROR(detail::check_symmetric_grid(opt.symmetric_grid));
  if (opt.order != ObqOrder::kLeastSaliency && opt.order != ObqOrder::kMostDetermined &&
      opt.order != ObqOrder::kBestOfBoth)
    return Status::invalid_argument("order", "must be an ObqOrder value");
  if (opt.refine_sweeps < 0)
    return Status::invalid_argument("refine_sweeps", str_cat("must be >= 0, got ", opt.refine_sweeps));
  LLMK_RETURN_IF_ERROR(
      detail::check_mse_options(opt.mse_clip, opt.mse_grid, opt.mse_maxshrink, opt.mse_norm));
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
  // No output may overlap w or h (in place included: the loss reads w last).
  const std::int64_t groups = cols / (opt.group_size == 0 ? cols : opt.group_size);
  const detail::InputExtents in = detail::input_extents(w, rows, cols, ldw, h, ldh);
  const auto regions = detail::quantized_regions(out, rows, cols, groups, /*in_place=*/false);
  LLMK_RETURN_IF_ERROR(detail::check_quantized_alignment(out));
  LLMK_RETURN_IF_ERROR(detail::check_outputs_vs_inputs(regions, in));
  LLMK_RETURN_IF_ERROR(check_device_pointer("codes", out.codes));
  LLMK_RETURN_IF_ERROR(check_device_pointer("scales", out.scales));
  LLMK_RETURN_IF_ERROR(check_device_pointer("zeros", out.zeros));
  LLMK_RETURN_IF_ERROR(check_device_pointer("g_idx", out.g_idx));
  LLMK_RETURN_IF_ERROR(check_device_pointer("dequantized", out.dequantized));
  LLMK_RETURN_IF_ERROR(detail::validate_obs_gpu_resources(la, workspace, workspace_bytes, rows, cols));
  LLMK_RETURN_IF_ERROR(detail::check_resources_disjoint(regions, workspace, workspace_bytes, in));

  detail::ObsGpuConfig cfg{};
  cfg.bits = opt.bits;
  cfg.symmetric = opt.symmetric;
  cfg.group_size = opt.group_size == 0 ? cols : opt.group_size;
  cfg.grid = detail::GridChoice{opt.mse_clip ? 1 : 0, opt.mse_grid,       opt.mse_maxshrink,
                                opt.mse_norm,         opt.symmetric_grid, false};
  cfg.prune_per_row = 0;
  cfg.order = static_cast<int>(opt.order);
  cfg.refine_sweeps = opt.refine_sweeps;
  cfg.damping = opt.damping;
  {
    std::vector<std::int32_t> g_idx(static_cast<std::size_t>(cols));
    for (std::int64_t c = 0; c < cols; ++c)
      g_idx[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(c / cfg.group_size);
    LLMK_RETURN_IF_ERROR(
        detail::copy_sync(out.g_idx, g_idx.data(), g_idx.size() * sizeof(std::int32_t), false, stream));
  }
  detail::ObsRowArgs a{};
  a.scales = out.scales;
  a.zeros = out.zeros;
  a.out_w = out.dequantized;
  a.ldo = out.ld_dequantized;
  a.out_codes = out.codes;
  a.ldc = out.ld_codes;
  detail::ObsGpuRun run;
  LLMK_RETURN_IF_ERROR(
      detail::run_obs_gpu(w, rows, cols, ldw, h, ldh, cfg, la, a, workspace, workspace_bytes, stream, &run));
  report->loss = run.loss;
  report->loss_estimate = run.loss_estimate;
  report->rows_in_flight = run.rows_in_flight;
  report->damping = run.damping;
  report->timings = run.timings;
  return {};
}

}  // namespace llmk::obs
