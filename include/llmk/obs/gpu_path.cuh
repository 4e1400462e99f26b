// llmk/obs/gpu_path.cuh: what the GPU paths of GPTQ (llmk/obs/gptq_gpu.cuh) and SparseGPT
// (llmk/obs/sparsegpt_gpu.cuh) share: the fused column-loop kernel, the grid kernel, the small O(d^2) glue
// kernels, the damped inverse on device memory, and the driver that runs the phases. Users call the two
// entries; this header is their machinery (the kernels themselves: llmk/obs/gpu_path_kernels.cuh).
//
// The phases (the same math and order as the host paths, llmk/obs/gptq.hpp and sparsegpt.hpp):
//   prepare      input checks (a kernel finds the first non-finite w / h element), diag H to the host (dead
//                columns), the act-order permutation on the device (a stable descending radix sort of diag H
//                with the dead columns fixed, llmk::device::sort_pairs), diag H in that order back to the
//                host (the damping mean), W and H permuted into the workspace (dead columns fixed on the
//                way), grids from the original weights (per-channel, static groups) by a warp-per-(group,
//                row) kernel.
//   inverse      damping + Cholesky + inverse + upper Cholesky of H^-1 through the backend on device memory,
//                with damped_inverse's retry policy (llmk/obs/damped_inverse.hpp); the O(d^2) glue (copy +
//                damp, weak pivot, finiteness, lower-triangle zeroing) is small kernels plus d floats to the
//                host.
//   column loop  per block [i1, i2): ONE launch of column_loop_kernel. Every CTA stages U[i1:i2, i1:i2]
//                (<= 128 x 128 fp32 = 64 KiB, the >48 KiB opt-in of llmk::launch) in shared memory once; a
//                warp owns a row: lane l holds the row's block columns l, l + 32, l + 64, l + 96 in registers
//                (a warp reads a row of U contiguously: conflict-free), and for j in the block: broadcast w_j
//                (shuffle), quantize / prune, e = (w_j - q) / U_jj, w_t -= e U_jt for t > j. Warps loop over
//                several rows, so U is staged once per CTA for many rows.
//   trailing     W[:, i2:] -= Err U[i1:i2, i2:] through the backend's GEMM on device memory.
//   loss         1/2 tr((W - Q) H (W - Q)^T): E = W - Q is written by the column loop (original column
//                order), EH = E H through the backend's GEMM, then a warp-per-row fp64 reduction.
// The stream is synchronized at the phase boundaries (and around each block's launch and GEMM) to fill
// ObsTimings; the backend must run on the same stream (CudaLinalgBackend(stream)).
//
// Block size: the kernel holds at most 128 columns (kFusedMaxBlock), and a dynamic group (GPTQ's grid set
// when its first column is reached) must never straddle a block except starting at its first column, so
// its columns past the block are current in global W without the host path's extra GEMM. The block size used
// is the largest bs <= min(block_size, cols, 128) (n:m: the host's rounding to a multiple of m first) with
//   group size G <= bs: bs % G == 0,     G > bs: G % bs == 0,     n:m: bs % m == 0.
// When that equals the host path's block size, the simulator (host backend) reproduces the host path bit for
// bit; otherwise GPTQ's result differs by fp32 rounding only with GroupGrid::kCurrent (lazy batches do not
// change the math), while the default kBlockStart takes a group's grid from W as its block began (the
// reference's rule), so there the block size is part of the answer, as are SparseGPT's unstructured masks,
// chosen per block (the reports give the block size used).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <span>
#include <string_view>
#include <vector>

#include "llmk/config.cuh"
#include "llmk/core/device_algorithms.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"
#include "llmk/obs/gpu_path_kernels.cuh"
#include "llmk/obs/linalg.hpp"
#include "llmk/obs/obs.hpp"
#include "llmk/obs/pruning.hpp"
#include "llmk/obs/quantizer.hpp"
#include "llmk/quant/scheme.cuh"

namespace llmk::obs {
namespace detail {

// ---- host helpers

inline Status stream_sync(cudaStream_t stream) {
#if defined(LLMK_CUDA)
  const cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaStreamSynchronize", cudaGetErrorString(e));
#else
  (void)stream;  // simulator launches are synchronous
#endif
  return {};
}

// Copies on `stream` and waits (small transfers at phase boundaries; the host buffer may be pageable).
inline Status copy_sync(void* dst, const void* src, std::size_t bytes, bool to_host, cudaStream_t stream) {
  if (bytes == 0) return {};
#if defined(LLMK_CUDA)
  const cudaError_t e =
      cudaMemcpyAsync(dst, src, bytes, to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaMemcpyAsync", cudaGetErrorString(e));
  return stream_sync(stream);
#else
  (void)to_host;
  (void)stream;
  std::memcpy(dst, src, bytes);
  return {};
#endif
}

// Index of the first non-finite element of a device matrix [rows, cols] (lda), or -1. `flag` is one
// unsigned long long of device scratch.
inline Status first_nonfinite(const float* a, std::int64_t rows, std::int64_t cols, std::int64_t lda,
                              unsigned long long* flag, cudaStream_t stream, std::int64_t* first) {
  const unsigned long long none = std::numeric_limits<unsigned long long>::max();
  LLMK_RETURN_IF_ERROR(copy_sync(flag, &none, sizeof(none), false, stream));
  LLMK_RETURN_IF_ERROR(launch(first_nonfinite_kernel<float>, glue_grid(rows, cols), dim3(kGlueThreads), 0,
                              stream, a, rows, cols, lda, flag));
  unsigned long long got = 0;
  LLMK_RETURN_IF_ERROR(copy_sync(&got, flag, sizeof(got), true, stream));
  *first = got == none ? -1 : static_cast<std::int64_t>(got);
  return {};
}

inline Status device_diag(const float* a, std::int64_t d, std::int64_t lda, float* scratch,
                          std::vector<float>* out, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(
      launch(gather_diag_kernel<float>, glue_grid(1, d), dim3(kGlueThreads), 0, stream, a, d, lda, scratch));
  out->resize(static_cast<std::size_t>(d));
  return copy_sync(out->data(), scratch, static_cast<std::size_t>(d) * sizeof(float), true, stream);
}

/// Device scratch the damped inverse needs besides its matrices: d floats and one flag.
struct DeviceInverseScratch {
  float* diag;
  unsigned long long* flag;
};

// The prepare phase's input checks, shared by the GPU entries: w and h finite (the first bad element is
// named), diag H non-negative; returns diag H on the host with the dead columns (H_ii == 0) set to 1 and
// counted (fix_dead_columns; the weight columns are zeroed by the entries' copy kernels).
inline Status check_inputs_read_diag(const float* w, std::int64_t n, std::int64_t d, std::int64_t ldw,
                                     const float* h, std::int64_t ldh, unsigned long long* flag,
                                     float* diag_scratch, cudaStream_t stream, std::vector<float>* diag,
                                     std::int64_t* dead_columns) {
  std::int64_t bad = -1;
  LLMK_RETURN_IF_ERROR(first_nonfinite(w, n, d, ldw, flag, stream, &bad));
  if (bad >= 0)
    return Status::invalid_argument("w", str_cat("must be finite; w[", bad / d, ", ", bad % d, "] is not"));
  LLMK_RETURN_IF_ERROR(first_nonfinite(h, d, d, ldh, flag, stream, &bad));
  if (bad >= 0)
    return Status::invalid_argument("h", str_cat("must be finite; h[", bad / d, ", ", bad % d, "] is not"));
  LLMK_RETURN_IF_ERROR(device_diag(h, d, ldh, diag_scratch, diag, stream));
  for (std::int64_t i = 0; i < d; ++i)
    if ((*diag)[static_cast<std::size_t>(i)] < 0.0f)
      return Status::invalid_argument("h", str_cat("must have a non-negative diagonal; h[", i, ", ", i,
                                                   "] = ", (*diag)[static_cast<std::size_t>(i)]));
  for (float& v : *diag)
    if (v == 0.0f) {
      v = 1.0f;
      ++*dead_columns;
    }
  return {};
}

// The backend must queue its work on the GPU path's stream (kernels and factorizations are ordered by it).
inline Status check_backend_stream(const LinalgBackend& la, cudaStream_t stream) {
#if defined(LLMK_CUDA)
  if (la.uses_device_memory() && la.stream_handle() != static_cast<const void*>(stream))
    return Status::invalid_argument(
        "la", "must run on the stream given to the GPU path (construct CudaLinalgBackend(stream))");
#else
  (void)la, (void)stream;
#endif
  return {};
}

// damped_inverse (llmk/obs/damped_inverse.hpp) on device memory, InverseForm::kUpperCholesky (default) or
// kFull (OBS / OBQ, llmk/obs/obs_gpu.cuh: stops after the inverse): the same attempts, damping values, checks
// and report. h (device, [d, ldh]) is the dead-column-fixed Hessian in processing order, h_diag its diagonal
// on the host; u (device, [d, ldu]) receives U (or H^-1, both triangles). The factorizations go through `la`.
// (The retry loop mirrors damped_inverse.hpp's line for line; one template over host / device glue could
// serve both.)
inline Status damped_upper_cholesky_device(const float* h, const std::vector<float>& h_diag, std::int64_t d,
                                           std::int64_t ldh, const DampingOptions& opt, LinalgBackend& la,
                                           float* u, std::int64_t ldu, const DeviceInverseScratch& scratch,
                                           cudaStream_t stream, DampingReport* report,
                                           InverseForm form = InverseForm::kUpperCholesky) {
  LLMK_RETURN_IF_ERROR(check_backend_stream(la, stream));
  LLMK_RETURN_IF_ERROR(check_damping(opt));
  DampingReport rep;
  rep.dead_columns = report->dead_columns;
  std::vector<float> a_diag(static_cast<std::size_t>(d)), l_diag;
  double mean = 0.0;  // dampen(): the mean of the diagonal in fp64, in order
  for (std::int64_t i = 0; i < d; ++i) mean += h_diag[static_cast<std::size_t>(i)];
  mean /= static_cast<double>(d);
  double percdamp = opt.percdamp;
  for (int attempt = 0; attempt <= opt.max_retries; ++attempt) {
    if (attempt > 0) {
      ++rep.retries;
      percdamp = percdamp > 0.0 ? percdamp * opt.damp_growth : 1e-4;
    }
    const double damp = percdamp * mean;
    LLMK_RETURN_IF_ERROR(launch(damped_copy_kernel<float>, glue_grid(d, d), dim3(kGlueThreads), 0, stream, h,
                                d, ldh, damp, u, ldu));
    for (std::int64_t i = 0; i < d; ++i)
      a_diag[static_cast<std::size_t>(i)] =
          static_cast<float>(static_cast<double>(h_diag[static_cast<std::size_t>(i)]) + damp);
    std::int64_t failed = 0, bad = -1;
    LLMK_RETURN_IF_ERROR(la.cholesky(Uplo::kLower, d, u, ldu, &failed));
    if (failed == 0 && opt.retry_weak_pivots) {
      LLMK_RETURN_IF_ERROR(device_diag(u, d, ldu, scratch.diag, &l_diag, stream));
      failed = weak_pivot(l_diag.data(), a_diag.data(), d, 0);  // ld 0: l_diag is the contiguous diagonal
    }
    if (failed == 0) LLMK_RETURN_IF_ERROR(la.cholesky_inverse(Uplo::kLower, d, u, ldu, &failed));
    if (failed == 0) {
      LLMK_RETURN_IF_ERROR(first_nonfinite(u, d, d, ldu, scratch.flag, stream, &bad));
      if (bad >= 0) failed = d;
    }
    if (failed == 0 && form == InverseForm::kUpperCholesky) {
      LLMK_RETURN_IF_ERROR(la.cholesky(Uplo::kUpper, d, u, ldu, &failed));
      if (failed == 0) {
        LLMK_RETURN_IF_ERROR(
            launch(zero_lower_kernel<float>, glue_grid(d, d), dim3(kGlueThreads), 0, stream, u, d, ldu));
        LLMK_RETURN_IF_ERROR(first_nonfinite(u, d, d, ldu, scratch.flag, stream, &bad));
        if (bad >= 0) failed = d;
      }
    }
    if (failed != 0) {
      rep.failed_pivot = failed;
      continue;
    }
    rep.percdamp = percdamp;
    rep.damp = damp;
    *report = rep;
    return {};
  }
  rep.percdamp = percdamp;
  *report = rep;
  return Status::invalid_argument(
      "h", str_cat("is not positive definite even with percdamp = ", percdamp, " after ", rep.retries,
                   " retries (last failing pivot ", rep.failed_pivot, "); check the calibration data"));
}

// ---- the driver

/// What the GPTQ and SparseGPT entries ask of the driver (already validated).
struct FusedConfig {
  int bits;  // 0: no quantization
  bool symmetric;
  std::int64_t group_size;  // 0: per-channel
  bool act_order, static_groups;
  bool group_grid_current;  // GroupGrid::kCurrent (else kBlockStart, the reference's rule)
  GridChoice grid;
  std::int64_t block_size;  // requested
  DampingOptions damping;
  int prune_mode;
  double sparsity;
  int prune_n, prune_m;
  bool prune_threshold;  // kPruneBlock: PruneCount::kThreshold (every score at or below the rank's)
  bool select_per_row;   // kPruneBlock: one candidate set per row of the block (else one for the block)
};

struct FusedOutputs {
  std::uint8_t* codes;
  std::int64_t ldc;
  float* scales;
  std::uint8_t* zeros;
  std::int32_t* g_idx;
  float* q_out;
  std::int64_t ldq;
  std::uint8_t* mask;
  std::int64_t ldm;
};

struct FusedReport {
  std::int64_t block_size = 0;
  std::vector<std::int32_t> order;
  double loss = 0.0, loss_estimate = 0.0;
  DampingReport damping;
  ObsTimings timings;
};

// The block size the kernel runs (file comment); 0 when none exists (n:m with m > 128).
inline std::int64_t fused_block_size(std::int64_t cols, std::int64_t requested, std::int64_t dynamic_group,
                                     std::int64_t m) {
  std::int64_t base = std::min(requested, cols);
  if (m > 0) base = std::max(m, base - base % m);  // the host path's n:m rounding
  for (std::int64_t bs = std::min(base, kFusedMaxBlock); bs >= 1; --bs) {
    if (m > 0 && bs % m != 0) continue;
    if (dynamic_group > 0 && (dynamic_group <= bs ? bs % dynamic_group != 0 : dynamic_group % bs != 0))
      continue;
    return bs;
  }
  return 0;
}

// Workspace regions, each 256-byte aligned (offsets from the workspace start).
struct FusedLayout {
  std::int64_t ldp = 0, bs = 0;
  std::size_t wp = 0, e = 0, scratch = 0, u = 0, err = 0, diag = 0, flag = 0, row_est = 0, row_dot = 0,
              perm = 0, nonfinite = 0, block_keep = 0, select_temp = 0, select_bytes = 0, order_keys = 0,
              order_sorted = 0, order_cols = 0, order_temp = 0, order_bytes = 0, total = 0;
};

// select_segments > 0: SparseGPT's block masks (kPruneBlock) over that many candidate sets a block (1: the
// block, rows: per row): the mask and the selection's temporary storage.
inline FusedLayout fused_layout(std::int64_t rows, std::int64_t cols, std::int64_t bs,
                                std::int64_t select_segments = 0) {
  FusedLayout l;
  rows = std::max<std::int64_t>(rows, 0);
  cols = std::max<std::int64_t>(cols, 0);
  l.ldp = round_up<std::int64_t>(std::max<std::int64_t>(cols, 1), 4);  // 16-byte rows
  l.bs = bs;
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t start = at;
    at += (bytes + 255) / 256 * 256;
    return start;
  };
  const std::size_t mat = static_cast<std::size_t>(l.ldp) * sizeof(float);
  l.wp = take(static_cast<std::size_t>(rows) * mat);                       // working W (processing order)
  l.e = take(static_cast<std::size_t>(rows) * mat);                        // W - Q (original order)
  l.scratch = take(static_cast<std::size_t>(std::max(rows, cols)) * mat);  // permuted H, then E H
  l.u = take(static_cast<std::size_t>(cols) * mat);                        // U
  l.err = take(static_cast<std::size_t>(rows * std::max<std::int64_t>(bs, 1)) * sizeof(float));
  l.diag = take(static_cast<std::size_t>(cols) * sizeof(float));
  l.flag = take(sizeof(unsigned long long));
  l.row_est = take(static_cast<std::size_t>(rows) * sizeof(double));
  l.row_dot = take(static_cast<std::size_t>(rows) * sizeof(double));
  l.perm = take(static_cast<std::size_t>(cols) * sizeof(std::int32_t));
  l.nonfinite = take(sizeof(unsigned));
  // act-order on the device: (fixed diag H, column) pairs, the descending stable sort's outputs and temp
  l.order_keys = take(static_cast<std::size_t>(cols) * sizeof(float));
  l.order_sorted = take(static_cast<std::size_t>(cols) * sizeof(float));
  l.order_cols = take(static_cast<std::size_t>(cols) * sizeof(std::int32_t));
  std::size_t order_bytes = 0;
  // A size query runs nothing; an error here (no device) leaves 0 and the run reports it.
  (void)llmk::device::sort_pairs<float, std::int32_t>(nullptr, &order_bytes, nullptr, nullptr, nullptr,
                                                      nullptr, cols, llmk::device::SortOrder::kDescending,
                                                      nullptr);
  l.order_temp = take(order_bytes);
  l.order_bytes = order_bytes;
  if (select_segments > 0) {
    const std::int64_t cells = rows * std::max<std::int64_t>(bs, 1);
    l.block_keep = take(static_cast<std::size_t>(cells));
    std::size_t bytes = 0;
    // The size query runs nothing; an error here (no device) leaves 0 and the run reports it. Both rules
    // (lowest k, at or below the k-th) take the same storage.
    (void)llmk::device::segmented_lowest_k_mask<unsigned>(nullptr, &bytes, nullptr, select_segments,
                                                          cells / select_segments, 0, nullptr, nullptr);
    l.select_temp = take(bytes);
    l.select_bytes = bytes;
  }
  l.total = at;
  return l;
}

template <class T>
T* region(void* workspace, std::size_t offset) {
  return reinterpret_cast<T*>(static_cast<unsigned char*>(workspace) + offset);
}

// Checks shared by the entries: the layer, the workspace and the backend.
inline Status validate_fused_common(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                                    const float* h, std::int64_t ldh) {
  if (rows < 1) return Status::invalid_argument("rows", str_cat("must be >= 1, got ", rows));
  if (cols < 1) return Status::invalid_argument("cols", str_cat("must be >= 1, got ", cols));
  if (cols > std::numeric_limits<std::int32_t>::max())
    return Status::invalid_argument(
        "cols", str_cat("must be < 2^31 (g_idx and the permutation are int32), got ", cols));
  if (w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (ldw < cols)
    return Status::invalid_argument("ldw", str_cat("must be >= cols (cols=", cols, ", ldw=", ldw, ")"));
  if (h == nullptr) return Status::invalid_argument("h", "must not be null");
  if (ldh < cols)
    return Status::invalid_argument(
        "ldh", str_cat("must be >= cols (the Hessian is [cols, cols]; cols=", cols, ", ldh=", ldh, ")"));
  // The backend's sizes are 32-bit (LAPACK, cuSOLVER): fail here, before any output is written.
  constexpr std::int64_t kMax32 = std::numeric_limits<std::int32_t>::max();
  if (rows > kMax32) return Status::invalid_argument("rows", str_cat("must be < 2^31, got ", rows));
  if (ldw > kMax32) return Status::invalid_argument("ldw", str_cat("must be < 2^31, got ", ldw));
  if (ldh > kMax32) return Status::invalid_argument("ldh", str_cat("must be < 2^31, got ", ldh));
  // fp32 loads (the checks' kernels, the copies, the backend's GEMM); before the entries' overlap checks.
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("w", w));
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("h", h));
  LLMK_RETURN_IF_ERROR(check_device_pointer("w", w));
  LLMK_RETURN_IF_ERROR(check_device_pointer("h", h));
  return {};
}

// Bytes from the first element of a [rows, cols] matrix (leading dimension ld >= cols, elements of `elem`
// bytes) to one past its last, in 64 bits; saturates at INT64_MAX (such an extent overlaps everything).
inline std::int64_t extent_bytes(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t elem) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  if (rows < 1 || cols < 1) return 0;
  if (rows > 1 && ld > (kMax / elem - cols) / (rows - 1)) return kMax;
  return ((rows - 1) * ld + cols) * elem;
}

// The byte extents of the entries' inputs w [rows, cols] (ldw) and h [cols, cols] (ldh).
struct InputExtents {
  const float* w;
  std::int64_t ldw, w_bytes;
  const float* h;
  std::int64_t h_bytes;
};

inline InputExtents input_extents(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                                  const float* h, std::int64_t ldh) {
  return {w, ldw, extent_bytes(rows, cols, ldw, 4), h, extent_bytes(cols, cols, ldh, 4)};
}

// An output of `bytes` bytes at p (null: not written) must not overlap w or h: the entries read both after
// writing outputs (and the loss reads w or h last).
inline Status check_output_disjoint(std::string_view name, const void* p, std::int64_t bytes,
                                    const InputExtents& in) {
  if (p == nullptr) return {};
  if (ranges_overlap(p, bytes, in.w, in.w_bytes) || ranges_overlap(p, bytes, in.h, in.h_bytes))
    return Status::invalid_argument(name, "must not overlap w or h");
  return {};
}

// A buffer an entry writes: the argument's name, its start (null: not written) and its bytes. A region with
// an `ld_name` is a weight output that may be w itself (in place, the same start and leading dimension `ld`
// as w): the fused column loop reads each original weight before it stores that element, and nothing reads
// w later. One list per entry serves both overlap checks below.
struct OutputRegion {
  std::string_view name;
  const void* p;
  std::int64_t bytes;
  std::string_view ld_name = {};
  std::int64_t ld = 0;
};

// The outputs against the inputs: none may overlap w or h (the entries read both after writing outputs, and
// the loss reads w or h last), except an in-place region being w itself.
inline Status check_outputs_vs_inputs(std::span<const OutputRegion> outputs, const InputExtents& in) {
  for (const OutputRegion& o : outputs) {
    if (o.ld_name.empty()) {
      LLMK_RETURN_IF_ERROR(check_output_disjoint(o.name, o.p, o.bytes, in));
      continue;
    }
    if (o.p == nullptr) continue;
    const bool in_place = o.p == in.w && o.ld == in.ldw;
    if ((!in_place && ranges_overlap(o.p, o.bytes, in.w, in.w_bytes)) ||
        ranges_overlap(o.p, o.bytes, in.h, in.h_bytes))
      return Status::invalid_argument(
          o.name, str_cat("must not overlap h, nor overlap w unless it is w itself with ", o.ld_name,
                          " = ldw (in place)"));
  }
  return {};
}

// The outputs and the workspace are written while the others are (the row kernels write weights, masks and
// codes while their state lives in the workspace): none may overlap another, and the workspace may not
// overlap w or h either. Call after validate_fused_resources (the workspace is then non-null).
inline Status check_resources_disjoint(std::span<const OutputRegion> outputs, const void* workspace,
                                       std::size_t workspace_bytes, const InputExtents& in) {
  const auto ws_bytes = static_cast<std::int64_t>(
      std::min<std::size_t>(workspace_bytes, std::numeric_limits<std::int64_t>::max()));
  LLMK_RETURN_IF_ERROR(check_output_disjoint("workspace", workspace, ws_bytes, in));
  for (auto i = outputs.begin(); i != outputs.end(); ++i) {
    if (i->p == nullptr) continue;
    if (ranges_overlap(i->p, i->bytes, workspace, ws_bytes))
      return Status::invalid_argument(i->name, "must not overlap the workspace");
    for (auto j = outputs.begin(); j != i; ++j)
      if (j->p != nullptr && ranges_overlap(i->p, i->bytes, j->p, j->bytes))
        return Status::invalid_argument(i->name, str_cat("must not overlap ", j->name));
  }
  return {};
}

// A quantizing entry's outputs (GptqGpuOutputs, ObqGpuOutputs: codes, scales, zeros, g_idx, dequantized),
// `groups` rows of scales and zeros; `dequantized` may be w itself when `in_place` (gptq reads each weight
// before storing it), never otherwise.
template <class Outputs>
std::array<OutputRegion, 5> quantized_regions(const Outputs& out, std::int64_t rows, std::int64_t cols,
                                              std::int64_t groups, bool in_place) {
  return {{{"codes", out.codes, extent_bytes(rows, cols, out.ld_codes, 1)},
           {"scales", out.scales, extent_bytes(groups, rows, rows, 4)},
           {"zeros", out.zeros, extent_bytes(groups, rows, rows, 1)},
           {"g_idx", out.g_idx, cols * 4},
           {"dequantized", out.dequantized, extent_bytes(rows, cols, out.ld_dequantized, 4),
            in_place ? "ld_dequantized" : "", out.ld_dequantized}}};
}

// The element alignment of a quantizing entry's 4-byte outputs.
template <class Outputs>
Status check_quantized_alignment(const Outputs& out) {
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("scales", out.scales));
  LLMK_RETURN_IF_ERROR(check_element_alignment<std::int32_t>("g_idx", out.g_idx));
  return check_element_alignment<float>("dequantized", out.dequantized);
}

inline Status validate_fused_resources(LinalgBackend& la, const void* workspace, std::size_t workspace_bytes,
                                       std::size_t need) {
#if defined(LLMK_CUDA)
  if (!la.uses_device_memory())
    return Status::invalid_argument(
        "la", str_cat("must operate on device memory on a GPU build (got the '", la.name(),
                      "' backend; use llmk::obs::CudaLinalgBackend from llmk/obs/linalg_cuda.cuh)"));
#else
  (void)la;  // simulator: device memory is host memory, every backend serves
#endif
  if (workspace == nullptr)
    return Status::invalid_argument("workspace", str_cat("must not be null (needs ", need, " bytes)"));
  LLMK_RETURN_IF_ERROR(check_device_pointer("workspace", workspace));
  if (reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0)
    return Status::invalid_argument("workspace", "must be 16-byte aligned");
  if (workspace_bytes < need)
    return Status::invalid_argument("workspace_bytes", str_cat("must be >= the workspace query's ", need,
                                                               " bytes, got ", workspace_bytes));
  return {};
}

inline Status run_fused(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                        const float* h, std::int64_t ldh, const FusedConfig& cfg, LinalgBackend& la,
                        const FusedOutputs& out, void* workspace, std::int64_t bs, cudaStream_t stream,
                        FusedReport* report) {
  LLMK_RETURN_IF_ERROR(check_backend_stream(la, stream));
  const std::int64_t n = rows, d = cols;
  const FusedLayout L =
      fused_layout(n, d, bs, cfg.prune_mode == kPruneBlock ? (cfg.select_per_row ? n : 1) : 0);
  float* wp = region<float>(workspace, L.wp);
  float* e = region<float>(workspace, L.e);
  float* scratch = region<float>(workspace, L.scratch);
  float* u = region<float>(workspace, L.u);
  float* err = region<float>(workspace, L.err);
  float* diag_scratch = region<float>(workspace, L.diag);
  auto* flag = region<unsigned long long>(workspace, L.flag);
  double* row_est = region<double>(workspace, L.row_est);
  double* row_dot = region<double>(workspace, L.row_dot);
  std::int32_t* perm_dev = region<std::int32_t>(workspace, L.perm);
  unsigned* nonfinite = region<unsigned>(workspace, L.nonfinite);
  std::uint8_t* block_keep = region<std::uint8_t>(workspace, L.block_keep);
  const std::int64_t ldp = L.ldp;

  FusedReport rep;
  rep.block_size = bs;
  LLMK_RETURN_IF_ERROR(stream_sync(stream));  // the timings start with the caller's earlier work done
  auto phase = std::chrono::steady_clock::now();

  // ---- prepare
  std::vector<float> diag;
  LLMK_RETURN_IF_ERROR(check_inputs_read_diag(w, n, d, ldw, h, ldh, flag, diag_scratch, stream, &diag,
                                              &rep.damping.dead_columns));
  // Processing order on the device: gptq.hpp's stable sort by descending (dead-column-fixed) diag H is
  // a stable radix sort of (diag, column) pairs; perm and g_idx never leave the device. diag_p (diag in
  // processing order) comes back for the damping's host arithmetic.
  float* order_keys = region<float>(workspace, L.order_keys);
  float* order_sorted = region<float>(workspace, L.order_sorted);
  std::int32_t* order_cols = region<std::int32_t>(workspace, L.order_cols);
  LLMK_RETURN_IF_ERROR(launch(act_order_keys_kernel<float>, glue_grid(1, d), dim3(kGlueThreads), 0, stream,
                              diag_scratch, d, order_keys, cfg.act_order ? order_cols : perm_dev));
  std::vector<float> diag_p = diag;
  if (cfg.act_order) {
    std::size_t order_bytes = L.order_bytes;
    LLMK_RETURN_IF_ERROR((llmk::device::sort_pairs<float, std::int32_t>(
        region<void>(workspace, L.order_temp), &order_bytes, order_keys, order_sorted, order_cols, perm_dev,
        d, llmk::device::SortOrder::kDescending, stream)));
    LLMK_RETURN_IF_ERROR(copy_sync(diag_p.data(), order_sorted, diag_p.size() * sizeof(float), true, stream));
  }

  const bool quantize = cfg.bits != 0;
  const bool grouped = quantize && cfg.group_size > 0;
  const std::int64_t G = grouped ? cfg.group_size : d;
  const bool static_grids = quantize && (!grouped || cfg.static_groups);
  if (quantize)
    LLMK_RETURN_IF_ERROR(launch(group_index_kernel<>, glue_grid(1, d), dim3(kGlueThreads), 0, stream,
                                perm_dev, d, G, !static_grids && cfg.act_order, out.g_idx));
  const unsigned zero = 0;
  LLMK_RETURN_IF_ERROR(copy_sync(nonfinite, &zero, sizeof(zero), false, stream));
  LLMK_RETURN_IF_ERROR(launch(permute_weights_kernel<float>, glue_grid(n, d), dim3(kGlueThreads), 0, stream,
                              w, n, d, ldw, h, ldh, perm_dev, wp, ldp));
  LLMK_RETURN_IF_ERROR(launch(permute_hessian_kernel<float>, glue_grid(d, d), dim3(kGlueThreads), 0, stream,
                              h, d, ldh, perm_dev, scratch, ldp));
  if (static_grids)
    LLMK_RETURN_IF_ERROR(launch_static_grid(cfg.bits, cfg.symmetric, w, n, ldw, h, ldh, d / G, G, cfg.grid,
                                            out.scales, out.zeros, stream));
  LLMK_RETURN_IF_ERROR(stream_sync(stream));
  rep.timings.prepare_s = seconds_since(phase);

  // ---- inverse
  phase = std::chrono::steady_clock::now();
  LLMK_RETURN_IF_ERROR(damped_upper_cholesky_device(scratch, diag_p, d, ldp, cfg.damping, la, u, ldp,
                                                    DeviceInverseScratch{diag_scratch, flag}, stream,
                                                    &rep.damping));
  LLMK_RETURN_IF_ERROR(stream_sync(stream));
  rep.timings.inverse_s = seconds_since(phase);

  // ---- column loops and trailing updates
  ColumnLoopArgs a{};
  a.rows = n;
  a.w = wp;
  a.ldw = ldp;
  a.u = u;
  a.ldu = ldp;
  a.err = err;
  a.lderr = bs;
  a.perm = perm_dev;
  a.g_idx = static_grids ? out.g_idx : nullptr;
  a.quantize = quantize ? 1 : 0;
  a.dynamic_groups = quantize && !static_grids ? 1 : 0;
  a.group_grid_current = cfg.group_grid_current ? 1 : 0;
  a.group_size = G;
  a.grid = cfg.grid;
  a.scales = out.scales;
  a.zeros = out.zeros;
  a.prune_mode = cfg.prune_mode;
  a.prune_n = cfg.prune_n;
  a.prune_m = cfg.prune_m;
  a.codes = quantize ? out.codes : nullptr;
  a.ldc = out.ldc;
  a.q_out = out.q_out;
  a.ldq = out.ldq;
  a.mask = out.mask;
  a.ldm = out.ldm;
  a.e_loss = e;
  a.lde = ldp;
  a.w_orig = w;
  a.ldwo = ldw;
  a.row_est = row_est;
  a.nonfinite = nonfinite;
  a.block_keep = block_keep;
  a.ldbk = 0;  // set per block (kPruneBlock)
  for (std::int64_t i1 = 0; i1 < d; i1 += bs) {
    const std::int64_t i2 = std::min(i1 + bs, d);
    a.i1 = i1;
    a.count = i2 - i1;
    a.prune_k = cfg.prune_mode == kPruneUnstructured
                    ? prune_count(cfg.sparsity, i2) - prune_count(cfg.sparsity, i1)
                    : 0;
    auto t0 = std::chrono::steady_clock::now();
    if (cfg.prune_mode == kPruneBlock) {  // the scores go to Err, which the column loop then overwrites
      const std::int64_t cells = n * (i2 - i1);
      LLMK_RETURN_IF_ERROR(launch(block_scores_kernel<float>, glue_grid(n, i2 - i1), dim3(kGlueThreads), 0,
                                  stream, wp, ldp, n, i1, i2 - i1, u, ldp, err));
      std::size_t select_bytes = L.select_bytes;
      const auto* keys = reinterpret_cast<const unsigned*>(err);  // scores >= 0: their bits order as they do
      void* select_temp = region<unsigned char>(workspace, L.select_temp);
      if (cfg.prune_threshold) {  // the reference's rule: every score <= the set's sorted score at int(p n)
        const std::int64_t sets = cfg.select_per_row ? n : 1, length = cells / sets;
        LLMK_RETURN_IF_ERROR(llmk::device::segmented_at_or_below_kth_mask<unsigned>(
            select_temp, &select_bytes, keys, sets, length,
            static_cast<std::int64_t>(cfg.sparsity * static_cast<double>(length)), block_keep, stream));
      } else {
        LLMK_RETURN_IF_ERROR(llmk::device::lowest_k_mask<unsigned>(
            select_temp, &select_bytes, keys, cells,
            prune_count(cfg.sparsity, n * i2) - prune_count(cfg.sparsity, n * i1), block_keep, stream));
      }
      a.ldbk = i2 - i1;  // the mask is [n, count], contiguous
    }
    LLMK_RETURN_IF_ERROR(launch_column_loop(cfg.bits, cfg.symmetric, a, stream));
    LLMK_RETURN_IF_ERROR(stream_sync(stream));
    rep.timings.column_loop_s += seconds_since(t0);
    if (i2 < d) {  // the lazy trailing update, one GEMM per block
      t0 = std::chrono::steady_clock::now();
      LLMK_RETURN_IF_ERROR(la.gemm(Op::kNone, Op::kNone, n, d - i2, i2 - i1, -1.0f, err, bs,
                                   u + i1 * ldp + i2, ldp, 1.0f, wp + i2, ldp));
      LLMK_RETURN_IF_ERROR(stream_sync(stream));
      rep.timings.trailing_s += seconds_since(t0);
    }
  }
  unsigned nonfinite_host = 0;
  LLMK_RETURN_IF_ERROR(copy_sync(&nonfinite_host, nonfinite, sizeof(unsigned), true, stream));
  if (nonfinite_host != 0) return Status::internal("the GPU column loop produced non-finite weights");

  // ---- loss: 1/2 tr(E H E^T) with the caller's H, E = W - Q (written by the column loop)
  phase = std::chrono::steady_clock::now();
  LLMK_RETURN_IF_ERROR(la.gemm(Op::kNone, Op::kNone, n, d, d, 1.0f, e, ldp, h, ldh, 0.0f, scratch, ldp));
  const std::int64_t dot_blocks = std::min<std::int64_t>(ceil_div<std::int64_t>(n, kGlueThreads / 32), 4096);
  LLMK_RETURN_IF_ERROR(launch(row_dot_kernel<float>, dim3(static_cast<unsigned>(dot_blocks)),
                              dim3(kGlueThreads), 0, stream, e, scratch, n, d, ldp, row_dot));
  std::vector<double> sums(static_cast<std::size_t>(2 * n));
  LLMK_RETURN_IF_ERROR(
      copy_sync(sums.data(), row_dot, static_cast<std::size_t>(n) * sizeof(double), true, stream));
  LLMK_RETURN_IF_ERROR(
      copy_sync(sums.data() + n, row_est, static_cast<std::size_t>(n) * sizeof(double), true, stream));
  double dot = 0.0, est = 0.0;
  for (std::int64_t r = 0; r < n; ++r) {
    dot += sums[static_cast<std::size_t>(r)];
    est += sums[static_cast<std::size_t>(n + r)];
  }
  rep.loss = 0.5 * dot;
  rep.loss_estimate = est;
  rep.timings.loss_s = seconds_since(phase);
  rep.order.resize(static_cast<std::size_t>(d));  // the report's copy of the processing order
  LLMK_RETURN_IF_ERROR(
      copy_sync(rep.order.data(), perm_dev, rep.order.size() * sizeof(std::int32_t), true, stream));
  *report = std::move(rep);
  return {};
}

}  // namespace detail

}  // namespace llmk::obs
