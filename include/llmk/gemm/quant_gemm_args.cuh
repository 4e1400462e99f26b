// llmk/gemm/quant_gemm_args.cuh: what the 8-bit GEMMs (llmk/gemm/w8a8.cuh: mma.sync;
// llmk/gemm/hopper_gemm.cuh: wgmma) share: their arguments, the dequantizing epilogue's arithmetic, argument
// validation, and the device architecture their launchers dispatch on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"
#include "llmk/gemm/split_k.cuh"

namespace llmk::gemm {

/// Dequantization applied to the accumulator (ignored for int32 output): out = a_scale * w_scale * (acc -
/// a_zero * w_column_sum) + bias. Per-token activation and per-channel weight scales, no zero points or bias:
///   g.scales = {x_scales, /*a_per_token=*/true, nullptr, w_scales, /*w_per_channel=*/true};
struct DequantScales {
  const float* a_scales = nullptr;  // [M] (a_per_token) or [1]
  bool a_per_token = true;
  const std::int32_t* a_zero_points = nullptr;  // [M] / [1] like a_scales; null: symmetric activations
  const float* w_scales = nullptr;              // [N] (w_per_channel) or [1]
  bool w_per_channel = true;
  const std::int32_t* w_column_sums = nullptr;  // [N], required with a_zero_points
  const float* bias = nullptr;                  // [N] or null
};

/// Block-wise fp8 scales, as DeepSeek-V3 checkpoints and their activation quantizers produce them: one scale
/// per token and 128-wide block of K for the activations, one per 128 x 128 block of the weight. With
/// k_blocks = ceil(K / 128):
///   out[i, j] = sum_kb a_scales[kb * ld_a_scales + i] * w_scales[(j / 128) * k_blocks + kb]
///                      * sum_{k in block kb} A[i, k] W[j, k]   + bias[j]
/// The activation scales are token-contiguous per K block (the transposed layout DeepGEMM reads); the weight
/// scales are the checkpoint's row-major [ceil(N / 128), k_blocks] array. Both 16-byte aligned (TMA).
///   g.scales = {x_scales_t, /*ld_a_scales=*/M, w_scale_inv, /*bias=*/nullptr};   // fp8_gemm_blockwise
struct Fp8BlockScales {
  const float* a_scales = nullptr;  // [k_blocks, ld_a_scales]
  std::int64_t ld_a_scales = 0;     // >= M
  const float* w_scales = nullptr;  // [ceil(N / 128), k_blocks]
  const float* bias = nullptr;      // [N] or null
};

/// Arguments of w8a8_gemm and fp8_gemm (Scales = DequantScales) and of fp8_gemm_blockwise (Fp8BlockGemmArgs).
/// Leading dimensions in elements. The rules each field must meet and an example: w8a8_gemm (w8a8.cuh).
///   llmk::gemm::QuantGemmArgs<std::int8_t> g{x_q, K, w_q, K, M, N, K, scales, y, N};
template <class In, class Scales = DequantScales>
struct QuantGemmArgs {
  const In* a = nullptr;  // [M, K]
  std::int64_t lda = 0;
  const In* w = nullptr;  // [N, K]
  std::int64_t ldw = 0;
  int m = 0, n = 0, k = 0;
  Scales scales;
  void* d = nullptr;  // [M, N] of the output type
  std::int64_t ldd = 0;
  // Split-K (w8a8_gemm and fp8_gemm, mma.sync tiles and the Hopper kernel): where the output has too few
  // tiles to fill the SMs (decode-sized M; M = 65..256 on Hopper), blocks split K and sum their partials in
  // a fixed order, in a caller-owned
  // workspace of quant_gemm_workspace_bytes(args) bytes (16-byte aligned, no initialization; one call at a
  // time). split_k: 0 splits by the SM count where a workspace is given (none without one), 1 never, s in
  // [2, kSplitKMaxSplits] at most s (a workspace is then required).
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  int split_k = 0;
};

namespace detail {

// What the mma.sync 8-bit kernels take of QuantGemmArgs: the operands, scales and output, not the host-side
// split-K fields (the split comes as SplitKArgs). A kernel parameter with those fields as well made ptxas
// schedule the main loops differently (sm_80 medium W8A8 tile: 138 -> 168 instructions per iteration).
template <class In>
struct QuantGemmKernelArgs {
  const In* a;
  std::int64_t lda;
  const In* w;
  std::int64_t ldw;
  int m, n, k;
  DequantScales scales;
  void* d;
  std::int64_t ldd;
};

template <class In>
QuantGemmKernelArgs<In> kernel_args(const QuantGemmArgs<In>& p) {
  return {p.a, p.lda, p.w, p.ldw, p.m, p.n, p.k, p.scales, p.d, p.ldd};
}

}  // namespace detail

/// Arguments of fp8_gemm_blockwise (llmk/gemm/hopper_gemm.cuh; example there).
using Fp8BlockGemmArgs = QuantGemmArgs<float8_e4m3, Fp8BlockScales>;

namespace detail {

// The dequantization of output (row, col) in a row half (the activation's scale and zero point) and a column
// half (the weight's scale, its column sum, the bias), so that an epilogue loads each row's and each column's
// factors once rather than once per output.
struct DequantRow {
  float sa;
  std::int64_t z;  // 0 without zero points
};
struct DequantCol {
  float sw, bias;       // bias 0 when there is none (not added)
  std::int32_t colsum;  // 0 without zero points
};

LLMK_DEVICE DequantRow dequant_row(const DequantScales& s, int row) {
  const int i = s.a_per_token ? row : 0;
  return {s.a_scales[i], s.a_zero_points != nullptr ? std::int64_t{s.a_zero_points[i]} : std::int64_t{0}};
}

LLMK_DEVICE DequantCol dequant_col(const DequantScales& s, int col) {
  return {s.w_scales[s.w_per_channel ? col : 0], s.bias != nullptr ? s.bias[col] : 0.0f,
          s.w_column_sums != nullptr ? s.w_column_sums[col] : 0};
}

// s_a[i] * s_w[j] * v + bias[j] in fp32 (v already zero-point corrected).
LLMK_DEVICE float dequantize(const DequantScales& s, const DequantRow& r, const DequantCol& c, float v) {
  float out = v * (r.sa * c.sw);
  if (s.bias != nullptr) out += c.bias;
  return out;
}

// acc - z_a[i] * colsum_w[j] as float; the product can pass 2^31, so it is formed in 64 bits.
LLMK_DEVICE float zero_point_corrected(const DequantScales& s, const DequantRow& r, const DequantCol& c,
                                       std::int32_t acc) {
  if (s.a_zero_points == nullptr) return static_cast<float>(acc);
  return static_cast<float>(static_cast<std::int64_t>(acc) - r.z * c.colsum);
}

LLMK_DEVICE float dequantize(const DequantScales& s, int row, int col, float v) {
  return dequantize(s, dequant_row(s, row), dequant_col(s, col), v);
}

LLMK_DEVICE float zero_point_corrected(const DequantScales& s, int row, int col, std::int32_t acc) {
  if (s.a_zero_points == nullptr) return static_cast<float>(acc);
  return zero_point_corrected(s, dequant_row(s, row), dequant_col(s, col), acc);
}

template <class In, class Out, class Scales>
Status validate_quant_gemm(const QuantGemmArgs<In, Scales>& p, bool need_scales) {
  if (p.a == nullptr) return Status::invalid_argument("a", "must not be null");
  if (p.w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (p.d == nullptr) return Status::invalid_argument("d", "must not be null");
  if (p.m < 1) return Status::invalid_argument("m", str_cat("must be >= 1, got ", p.m));
  if (p.n < 1) return Status::invalid_argument("n", str_cat("must be >= 1, got ", p.n));
  if (p.k < 1) return Status::invalid_argument("k", str_cat("must be >= 1, got ", p.k));
  if (p.m > (1 << 30) || p.n > (1 << 30) || p.k > (1 << 30))
    return Status::invalid_argument("m/n/k", "must be <= 2^30 (32-bit tile arithmetic)");
  if (p.k % 16 != 0)
    return Status::invalid_argument(
        "k",
        str_cat("must be a multiple of 16 (8-bit rows are copied in 16-byte vectors); pad K with zeros, got ",
                p.k));
  if (p.lda < p.k || p.lda % 16 != 0)
    return Status::invalid_argument(
        "lda", str_cat("must be >= K and a multiple of 16 (K=", p.k, ", lda=", p.lda, ")"));
  if (p.ldw < p.k || p.ldw % 16 != 0)
    return Status::invalid_argument(
        "ldw", str_cat("must be >= K and a multiple of 16 (K=", p.k, ", ldw=", p.ldw, ")"));
  if (p.ldd < p.n)
    return Status::invalid_argument("ldd", str_cat("must be >= N (N=", p.n, ", ldd=", p.ldd, ")"));
  if (reinterpret_cast<std::uintptr_t>(p.a) % 16 != 0)
    return Status::invalid_argument("a", "must be 16-byte aligned");
  if (reinterpret_cast<std::uintptr_t>(p.w) % 16 != 0)
    return Status::invalid_argument("w", "must be 16-byte aligned");
  LLMK_RETURN_IF_ERROR(check_element_alignment<Out>("d", p.d));
  (void)need_scales;  // DequantScales only
  if constexpr (std::is_same_v<Scales, DequantScales>) {
    if (!need_scales) return {};
    const DequantScales& s = p.scales;
    if (s.a_scales == nullptr)
      return Status::invalid_argument("scales.a_scales", "must not be null (dequantized output)");
    if (s.w_scales == nullptr)
      return Status::invalid_argument("scales.w_scales", "must not be null (dequantized output)");
    LLMK_RETURN_IF_ERROR(check_element_alignment<float>("scales.a_scales", s.a_scales));
    LLMK_RETURN_IF_ERROR(check_element_alignment<float>("scales.w_scales", s.w_scales));
    LLMK_RETURN_IF_ERROR(check_element_alignment<std::int32_t>("scales.a_zero_points", s.a_zero_points));
    LLMK_RETURN_IF_ERROR(check_element_alignment<std::int32_t>("scales.w_column_sums", s.w_column_sums));
    LLMK_RETURN_IF_ERROR(check_element_alignment<float>("scales.bias", s.bias));
    if (s.a_zero_points != nullptr && s.w_column_sums == nullptr)
      return Status::invalid_argument("scales.w_column_sums",
                                      "must be given with a_zero_points (see weight_column_sums())");
  }
  return {};
}

template <class Out>
Status validate_fp8_block_gemm(const Fp8BlockGemmArgs& p) {
  LLMK_RETURN_IF_ERROR((validate_quant_gemm<float8_e4m3, Out>(p, false)));
  const Fp8BlockScales& s = p.scales;
  const std::int64_t k_blocks = (p.k + 127) / 128;
  if (s.a_scales == nullptr) return Status::invalid_argument("scales.a_scales", "must not be null");
  if (s.w_scales == nullptr) return Status::invalid_argument("scales.w_scales", "must not be null");
  if (reinterpret_cast<std::uintptr_t>(s.a_scales) % 16 != 0)
    return Status::invalid_argument("scales.a_scales", "must be 16-byte aligned (TMA)");
  if (reinterpret_cast<std::uintptr_t>(s.w_scales) % 16 != 0)
    return Status::invalid_argument("scales.w_scales", "must be 16-byte aligned (TMA)");
  if (s.ld_a_scales < p.m)
    return Status::invalid_argument("scales.ld_a_scales",
                                    str_cat("must be >= M (M=", p.m, ", ld_a_scales=", s.ld_a_scales, ")"));
  // Divided, not multiplied: a huge ld_a_scales must not wrap the product past the check.
  if (k_blocks > 0 && s.ld_a_scales > ((std::int64_t{1} << 31) - 128) / k_blocks)
    return Status::invalid_argument("scales.ld_a_scales",
                                    "ceil(K / 128) * ld_a_scales must stay below 2^31 (TMA coordinates)");
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("scales.bias", s.bias));
  return {};
}

// The split plan of a call with its workspace: split_k = 0 without a workspace does not split; a given split
// count (split_k >= 2) needs one; `planner()` gives the plan otherwise. Errors name the argument and the
// launcher's size query (`sizer`). Args: QuantGemmArgs, GemmF16Args (split_k, workspace, workspace_bytes).
template <class Args, class Planner>
Status qgemm_resolve_split_by(const Args& p, bool can_split, Planner&& planner, QGemmSplitPlan& plan,
                              const char* sizer = "quant_gemm_workspace_bytes") {
  if (p.split_k < 0 || p.split_k > kSplitKMaxSplits)
    return Status::invalid_argument(
        "split_k",
        str_cat("must be in [0, ", kSplitKMaxSplits, "] (0: by the SM count, 1: no split), got ", p.split_k));
  plan = QGemmSplitPlan{};
  if (!can_split || p.split_k == 1 || (p.split_k == 0 && p.workspace == nullptr)) return {};
  plan = planner();
  if (plan.splits == 1) return {};
  const std::size_t need = plan.workspace_bytes();
  if (p.workspace == nullptr)
    return Status::invalid_argument(
        "workspace", str_cat("must not be null: split_k = ", p.split_k, " needs ", need, " bytes (", sizer,
                             "; split_k = 0 needs none without one)"));
  if (reinterpret_cast<std::uintptr_t>(p.workspace) % 16 != 0)
    return Status::invalid_argument("workspace", "must be 16-byte aligned");
  if (p.workspace_bytes < need)
    return Status::invalid_argument(
        "workspace_bytes", str_cat("must be >= ", sizer, " = ", need, " for this call (", plan.splits,
                                   " splits), got ", p.workspace_bytes));
  return {};
}

// The kernel's view of the plan's workspace.
template <class Acc>
SplitKArgs<Acc> qgemm_split_args(const QGemmSplitPlan& plan, void* workspace, int n) {
  SplitKArgs<Acc> split;
  if (plan.splits > 1) {
    auto* base = static_cast<unsigned char*>(workspace);
    split.arrivals = reinterpret_cast<unsigned long long*>(base);
    split.partials = reinterpret_cast<Acc*>(base + plan.arrival_bytes);
    split.tag = split_k_next_tag();
    split.ldp = split_k_pitch(n);
    split.k_tiles_per_split = plan.k_tiles_per_split;
  }
  return split;
}

using ::llmk::device_arch;  // core/launch.cuh

}  // namespace detail

}  // namespace llmk::gemm
