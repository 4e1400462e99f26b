// llmk/gemm/w8a8.cuh: 8-bit tensor-core GEMMs with fused dequantization.
//
//   W8A8 (int8):  acc[i, j] = sum_k A[i, k] * W[j, k]          int8 x int8 -> int32 (mma m16n8k32 .s8)
//                 out[i, j] = s_a[i] * s_w[j] * (acc[i, j] - z_a[i] * colsum_w[j]) + bias[j]
//   FP8 (e4m3):   out[i, j] = s_a * s_w[j] * sum_k A[i, k] * W[j, k] + bias[j]    fp32 accumulate, sm_89+
//   Mixed LLM.int8(): the W8A8 result over the regular columns plus the fp16 product of the outlier columns,
//                 out = s_a[i] s_w[j] acc_int8[i, j] + sum_o A_out[i, o] * W_out[j, o] + bias[j], ONE kernel:
//                 the int8 mainloop, the dequantization in registers, then an fp16 mainloop over the outlier
//                 columns accumulating into the same fp32 registers.
//
// Layout: both operands K-major ("TN", what the 8-bit mma wants): A [M, K] row-major (activations), W [N, K]
// row-major (weights, one output channel per row). s_a is per token ([M]) or per tensor ([1]); s_w per
// channel
// ([N]) or per tensor ([1]). Asymmetric activations (A = s_a (q - z_a)) need colsum_w[j] = sum_k W[j, k]
// (weight_column_sums() computes it once per weight). Outputs: raw int32 (no dequantization), fp32, fp16,
// bf16. M, N are arbitrary (predicated); K must be a multiple of 16 (16-byte rows for cp.async).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "llmk/arch/mma.cuh"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"
#include "llmk/core/vector.cuh"
#include "llmk/gemm/hopper_gemm.cuh"
#include "llmk/gemm/kmajor_mainloop.cuh"
#include "llmk/gemm/quant_gemm_args.cuh"

namespace llmk::gemm {

/// Arguments of mixed_int8_gemm: the int8 part (regular columns, outlier columns zeroed in both A and W)
/// plus the fp16 outlier part: A_out [M, k_outliers] and W_out [N, k_outliers] (K-major, as
/// llmk::quant::split_outlier_columns writes them; k_outliers may be 0).
struct MixedInt8Args {
  QuantGemmArgs<std::int8_t> regular;
  const half* a_outliers = nullptr;
  std::int64_t lda_outliers = 0;
  const half* w_outliers = nullptr;
  std::int64_t ldw_outliers = 0;
  int k_outliers = 0;
};

/// Tiles of the 8-bit GEMMs (BK in elements = bytes): large (prefill), medium, and the small-M tile for
/// decode, where the grid must spread N over many blocks.
using QGemmLarge = KMajorTile<128, 128, 64, 2, 4, 3>;
using QGemmMedium = KMajorTile<64, 128, 64, 2, 2, 3>;
using QGemmSmall = KMajorTile<16, 64, 128, 1, 2, 4>;
/// The mixed kernel's large tile: two stages, so that its fp16 ring (the larger one) stays within the
/// 99 KiB per block of sm_86 / sm_89.
using QGemmMixedLarge = KMajorTile<128, 128, 64, 2, 4, 2>;

namespace detail {

template <class Tile, class Acc>
LLMK_DEVICE void zero(Acc (&acc)[Tile::kMmaM][Tile::kMmaN][4]) {
#pragma unroll
  for (int mi = 0; mi < Tile::kMmaM; ++mi)
#pragma unroll
    for (int ni = 0; ni < Tile::kMmaN; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = Acc(0);
}

}  // namespace detail

/// W8A8 kernel: one block per BM x BN output tile (blockIdx.x over N tiles, blockIdx.y over M tiles).
template <class Out, class Tile, bool kSaturate>
__global__ void __launch_bounds__(Tile::kThreads) w8a8_kernel(QuantGemmArgs<std::int8_t> p) {
  using Mma =
      std::conditional_t<kSaturate, arch::MMA_16x8x32_S32S8S8S32_SATFINITE, arch::MMA_16x8x32_S32S8S8S32>;
  const int block_m = static_cast<int>(blockIdx.y) * Tile::BM,
            block_n = static_cast<int>(blockIdx.x) * Tile::BN;
  std::int32_t acc[Tile::kMmaM][Tile::kMmaN][4];
  detail::zero<Tile>(acc);
  kmajor_mainloop<Tile, 1, Mma>(KMajorOperands{p.a, p.w, p.lda, p.ldw, p.m, p.n, p.k}, block_m, block_n,
                                dynamic_smem(), acc);
  store_tile_staged<Tile>(
      dynamic_smem(), static_cast<Out*>(p.d), p.ldd, block_m, block_n, p.m, p.n,
      [&](int row, int col, int mi, int ni, int e) -> Out {
        if constexpr (std::is_same_v<Out, std::int32_t>) {
          return acc[mi][ni][e];
        } else {
          return Out(detail::dequantize(p.scales, row, col,
                                        detail::zero_point_corrected(p.scales, row, col, acc[mi][ni][e])));
        }
      });
}

/// FP8 kernel (e4m3 x e4m3, fp32 accumulate). Compiled to a trap for architectures without fp8 mma; the
/// launcher refuses such devices before launching.
template <class Out, class Tile>
__global__ void __launch_bounds__(Tile::kThreads) fp8_kernel(QuantGemmArgs<float8_e4m3> p) {
  if constexpr (arch::kHasFp8Mma) {
    const int block_m = static_cast<int>(blockIdx.y) * Tile::BM,
              block_n = static_cast<int>(blockIdx.x) * Tile::BN;
    float acc[Tile::kMmaM][Tile::kMmaN][4];
    detail::zero<Tile>(acc);
    kmajor_mainloop<Tile, 1, arch::MMA_16x8x32_F32E4M3E4M3F32>(
        KMajorOperands{p.a, p.w, p.lda, p.ldw, p.m, p.n, p.k}, block_m, block_n, dynamic_smem(), acc);
    store_tile_staged<Tile>(dynamic_smem(), static_cast<Out*>(p.d), p.ldd, block_m, block_n, p.m, p.n,
                            [&](int row, int col, int mi, int ni, int e) -> Out {
                              return Out(detail::dequantize(p.scales, row, col, acc[mi][ni][e]));
                            });
  } else {
#if LLMK_DEVICE_PASS
    __trap();
#endif
  }
}

/// Mixed LLM.int8() kernel: int8 mainloop, dequantize into fp32 registers, fp16 mainloop over the outliers.
template <class Out, class Tile>
__global__ void __launch_bounds__(Tile::kThreads) mixed_int8_kernel(MixedInt8Args p) {
  const QuantGemmArgs<std::int8_t>& r = p.regular;
  const int block_m = static_cast<int>(blockIdx.y) * Tile::BM,
            block_n = static_cast<int>(blockIdx.x) * Tile::BN;
  float out[Tile::kMmaM][Tile::kMmaN][4];
  {
    std::int32_t acc[Tile::kMmaM][Tile::kMmaN][4];
    detail::zero<Tile>(acc);
    kmajor_mainloop<Tile, 1, arch::MMA_16x8x32_S32S8S8S32>(
        KMajorOperands{r.a, r.w, r.lda, r.ldw, r.m, r.n, r.k}, block_m, block_n, dynamic_smem(), acc);
    // Scale in place (rows/columns past the edge get scale 0: they are never stored).
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
    const int warp_m = warp / Tile::WarpsN, warp_n = warp % Tile::WarpsN, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int mi = 0; mi < Tile::kMmaM; ++mi)
#pragma unroll
      for (int ni = 0; ni < Tile::kMmaN; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = block_m + warp_m * Tile::WM + mi * 16 + g + (e / 2) * 8;
          const int col = block_n + warp_n * Tile::WN + ni * 8 + 2 * t + (e % 2);
          float v = 0.0f;
          if (row < r.m && col < r.n) {
            const float sa = r.scales.a_scales[r.scales.a_per_token ? row : 0];
            const float sw = r.scales.w_scales[r.scales.w_per_channel ? col : 0];
            v = static_cast<float>(acc[mi][ni][e]) * (sa * sw);
          }
          out[mi][ni][e] = v;
        }
  }
  if (p.k_outliers > 0)
    kmajor_mainloop<Tile, 2, arch::MMA_16x8x16_F32F16F16F32>(
        KMajorOperands{p.a_outliers, p.w_outliers, p.lda_outliers, p.ldw_outliers, r.m, r.n, p.k_outliers},
        block_m, block_n, dynamic_smem(), out);
  store_tile_staged<Tile>(dynamic_smem(), static_cast<Out*>(r.d), r.ldd, block_m, block_n, r.m, r.n,
                          [&](int, int col, int mi, int ni, int e) -> Out {
                            float v = out[mi][ni][e];
                            if (r.scales.bias != nullptr) v += r.scales.bias[col];
                            return Out(v);
                          });
}

namespace detail {

// Dynamic shared memory of an 8-bit GEMM kernel: the largest of its mainloop rings and the staged epilogue.
template <class Tile, class Out, int... kElementBytes>
constexpr int smem_bytes() {
  int bytes = kStagedEpilogueBytes<Tile, Out>;
  ((bytes = bytes > Tile::template Bytes<kElementBytes>::kSmemBytes
                ? bytes
                : Tile::template Bytes<kElementBytes>::kSmemBytes),
   ...);
  return bytes;
}

inline Status check_grid(int m, int bm) {
  if (ceil_div<long long>(m, bm) > 65535)
    return Status::invalid_argument("m",
                                    str_cat("must be <= ", 65535LL * bm, " for this tile (BM=", bm, ")"));
  return {};
}

}  // namespace detail

/// sums[j] = sum_k W[j, k] for each output column j of the GEMM (one warp per weight row, 16-byte loads).
/// (A template only so that the header can be included by several translation units.)
template <class W = std::int8_t>
__global__ void weight_column_sums_kernel(const W* w, std::int64_t ldw, int n, int k, std::int32_t* sums) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int row =
      static_cast<int>(blockIdx.x) * static_cast<int>(blockDim.x / 32) + static_cast<int>(threadIdx.x / 32);
  if (row >= n) return;  // whole warps leave together
  std::int32_t s = 0;
  for (int c = lane * 16; c < k; c += 32 * 16) {
    const Vector16<W> v = load16(w + static_cast<std::int64_t>(row) * ldw + c);
#pragma unroll
    for (int e = 0; e < 16; ++e) s += v.elements[e];
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) sums[row] = s;
}

/// The column sums asymmetric activations need (DequantScales::w_column_sums): sums[j] = sum_k W[j, k] for
/// W [N, K] int8 (K % 16 == 0, ldw % 16 == 0, w 16-byte aligned). Compute once per weight.
///
///   llmk::DeviceBuffer<std::int32_t> sums(N);
///   llmk::Status s = llmk::gemm::weight_column_sums(w_q, K, N, K, sums.data(), stream);
inline Status weight_column_sums(const std::int8_t* w, std::int64_t ldw, int n, int k, std::int32_t* sums,
                                 cudaStream_t stream) {
  if (w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (sums == nullptr) return Status::invalid_argument("sums", "must not be null");
  if (n < 1) return Status::invalid_argument("n", str_cat("must be >= 1, got ", n));
  if (k < 1 || k % 16 != 0)
    return Status::invalid_argument("k", str_cat("must be a positive multiple of 16, got ", k));
  if (ldw < k || ldw % 16 != 0) return Status::invalid_argument("ldw", "must be >= K and a multiple of 16");
  if (reinterpret_cast<std::uintptr_t>(w) % 16 != 0)
    return Status::invalid_argument("w", "must be 16-byte aligned");
  LLMK_RETURN_IF_ERROR(check_element_alignment<std::int32_t>("sums", sums));
  return launch(weight_column_sums_kernel<std::int8_t>, dim3(static_cast<unsigned>(ceil_div(n, 4))),
                dim3(128), 0, stream, w, ldw, n, k, sums);
}

/// W8A8 GEMM with an explicit tile; kSaturate uses mma .satfinite (the int32 accumulator clamps at +-2^31
/// instead of wrapping; it only matters for K > 2^31 / 128^2 = 131072).
template <class Out, class Tile, bool kSaturate = false>
Status w8a8_gemm_with_tile(const QuantGemmArgs<std::int8_t>& p, cudaStream_t stream) {
  static_assert(std::is_same_v<Out, std::int32_t> || std::is_same_v<Out, float> ||
                    std::is_same_v<Out, half> || std::is_same_v<Out, bfloat16>,
                "W8A8 outputs: std::int32_t (raw accumulator), float, llmk::half, llmk::bfloat16");
  LLMK_RETURN_IF_ERROR(
      (detail::validate_quant_gemm<std::int8_t, Out>(p, !std::is_same_v<Out, std::int32_t>)));
  LLMK_RETURN_IF_ERROR(detail::check_grid(p.m, Tile::BM));
  return launch(
      w8a8_kernel<Out, Tile, kSaturate>,
      dim3(static_cast<unsigned>(ceil_div(p.n, Tile::BN)), static_cast<unsigned>(ceil_div(p.m, Tile::BM))),
      dim3(Tile::kThreads), (detail::smem_bytes<Tile, Out, 1>()), stream, p);
}

/// The tile the 8-bit GEMMs pick for M rows: small for decode-like M <= 16, medium up to 64, else large (on
/// sm_90 with sm_90a code: the Hopper wgmma kernel instead of the large tile, with 128 x 64 tiles where 128 x
/// 128 ones would leave half the SMs idle).
enum class QGemmTileKind { kSmall, kMedium, kLarge };
inline QGemmTileKind choose_qgemm_tile(int m) {
  return m <= 16 ? QGemmTileKind::kSmall : (m <= 64 ? QGemmTileKind::kMedium : QGemmTileKind::kLarge);
}

/// int8 x int8 -> int32 GEMM with the epilogue chosen by Out: std::int32_t writes the raw accumulator;
/// float, llmk::half and llmk::bfloat16 write s_a * s_w * (acc - z_a * colsum_w) + bias (see the file
/// comment).
///
///   llmk::gemm::QuantGemmArgs<std::int8_t> g;
///   g.a = x_q; g.lda = K; g.w = w_q; g.ldw = K; g.m = M; g.n = N; g.k = K;   // K-major int8 operands
///   g.scales.a_scales = x_scales;  g.scales.w_scales = w_scales;            // per token, per channel
///   g.d = y; g.ldd = N;                                                     // llmk::half [M, N]
///   llmk::Status s = llmk::gemm::w8a8_gemm<llmk::half>(g, stream);
///
/// Errors (Status::invalid_argument naming the argument): null or misaligned (16-byte) operands, K not a
/// multiple of 16, lda/ldw < K or not multiples of 16, ldd < N, missing scales for a dequantized output,
/// d, scales, zero points, column sums or bias not aligned to their element, zero points without column
/// sums, M beyond the grid.
template <class Out>
Status w8a8_gemm(const QuantGemmArgs<std::int8_t>& p, cudaStream_t stream) {
  switch (choose_qgemm_tile(p.m)) {
    case QGemmTileKind::kSmall:
      return w8a8_gemm_with_tile<Out, QGemmSmall>(p, stream);
    case QGemmTileKind::kMedium:
      return w8a8_gemm_with_tile<Out, QGemmMedium>(p, stream);
    default:
      // Compute-bound sizes: the wgmma kernel where the device and the build have it
      // (llmk/gemm/hopper_gemm.cuh).
      if (sm90_detail::sm90_available<Sm90GemmConfig<std::int8_t>>())
        return sm90_detail::with_chosen_tile<std::int8_t>(
            p.m, p.n, [&]<class Cfg>(Cfg) { return w8a8_gemm_sm90<Out, Cfg>(p, stream); });
      return w8a8_gemm_with_tile<Out, QGemmLarge>(p, stream);
  }
}

/// FP8 GEMM (e4m3 x e4m3, fp32 accumulate) with an explicit tile. Needs sm_89+ (Ada, Hopper): on an older
/// device it returns Status::unsupported before launching. Out: float, llmk::half, llmk::bfloat16. Scales
/// as in DequantScales (zero points are not allowed: fp8 is symmetric).
template <class Out, class Tile>
Status fp8_gemm_with_tile(const QuantGemmArgs<float8_e4m3>& p, cudaStream_t stream) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, half> || std::is_same_v<Out, bfloat16>,
                "FP8 GEMM outputs: float, llmk::half, llmk::bfloat16");
  LLMK_RETURN_IF_ERROR((detail::validate_quant_gemm<float8_e4m3, Out>(p, true)));
  if (p.scales.a_zero_points != nullptr)
    return Status::invalid_argument("scales.a_zero_points", "must be null: fp8 operands are symmetric");
  LLMK_RETURN_IF_ERROR(detail::check_grid(p.m, Tile::BM));
  const int arch = detail::device_arch();
  if (arch != 0 && arch < 890)
    return Status::unsupported(
        str_cat("fp8 GEMM needs fp8 mma.sync (sm_89 or newer); this device is sm_", arch / 10));
#if defined(LLMK_CUDA)
  // The device may be new enough while the code it would run is not (a build without sm_89/sm_90 code runs
  // sm_8x SASS or JIT-compiles compute_80 PTX, where the kernel is a trap): refuse that too.
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(fp8_kernel<Out, Tile>)) == cudaSuccess &&
      (attr.ptxVersion < 89 || attr.binaryVersion < 89))
    return Status::unsupported(str_cat("fp8 GEMM: the kernel was compiled for compute_", attr.ptxVersion,
                                       " / sm_", attr.binaryVersion,
                                       ", which has no fp8 mma; build for sm_89 or sm_90"));
#endif
  return launch(
      fp8_kernel<Out, Tile>,
      dim3(static_cast<unsigned>(ceil_div(p.n, Tile::BN)), static_cast<unsigned>(ceil_div(p.m, Tile::BM))),
      dim3(Tile::kThreads), (detail::smem_bytes<Tile, Out, 1>()), stream, p);
}

/// fp8_gemm_with_tile with the tile chosen by M (as w8a8_gemm).
///
///   llmk::gemm::QuantGemmArgs<llmk::float8_e4m3> g;   // a [M, K], w [N, K], K-major
///   g.scales.a_scales = &s_x; g.scales.a_per_token = false;   // per tensor
///   g.scales.w_scales = s_w;                                   // per channel
///   llmk::Status s = llmk::gemm::fp8_gemm<llmk::bfloat16>(g, stream);
template <class Out>
Status fp8_gemm(const QuantGemmArgs<float8_e4m3>& p, cudaStream_t stream) {
  switch (choose_qgemm_tile(p.m)) {
    case QGemmTileKind::kSmall:
      return fp8_gemm_with_tile<Out, QGemmSmall>(p, stream);
    case QGemmTileKind::kMedium:
      return fp8_gemm_with_tile<Out, QGemmMedium>(p, stream);
    default:
      if (sm90_detail::sm90_available<Sm90GemmConfig<float8_e4m3>>())
        return sm90_detail::with_chosen_tile<float8_e4m3>(
            p.m, p.n, [&]<class Cfg>(Cfg) { return fp8_gemm_sm90<Out, Cfg>(p, stream); });
      return fp8_gemm_with_tile<Out, QGemmLarge>(p, stream);
  }
}

/// Mixed LLM.int8() GEMM with an explicit tile (see the file comment). The regular part must use symmetric
/// activations (no zero points); the outlier operands are fp16 with leading dimensions multiple of 8.
template <class Out, class Tile>
Status mixed_int8_gemm_with_tile(const MixedInt8Args& p, cudaStream_t stream) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, half> || std::is_same_v<Out, bfloat16>,
                "mixed GEMM outputs: float, llmk::half, llmk::bfloat16");
  LLMK_RETURN_IF_ERROR((detail::validate_quant_gemm<std::int8_t, Out>(p.regular, true)));
  if (p.regular.scales.a_zero_points != nullptr)
    return Status::invalid_argument("regular.scales.a_zero_points",
                                    "must be null: LLM.int8() quantizes activations symmetrically per token");
  if (p.k_outliers < 0 || p.k_outliers > (1 << 29))
    return Status::invalid_argument("k_outliers", str_cat("must be in [0, 2^29], got ", p.k_outliers));
  if (p.k_outliers > 0) {
    if (p.k_outliers % 8 != 0)
      return Status::invalid_argument(
          "k_outliers", str_cat("must be a multiple of 8 (pad the outlier operands with zero columns), got ",
                                p.k_outliers));
    if (p.a_outliers == nullptr) return Status::invalid_argument("a_outliers", "must not be null");
    if (p.w_outliers == nullptr) return Status::invalid_argument("w_outliers", "must not be null");
    if (reinterpret_cast<std::uintptr_t>(p.a_outliers) % 16 != 0)
      return Status::invalid_argument("a_outliers", "must be 16-byte aligned");
    if (reinterpret_cast<std::uintptr_t>(p.w_outliers) % 16 != 0)
      return Status::invalid_argument("w_outliers", "must be 16-byte aligned");
    if (p.lda_outliers < p.k_outliers || p.lda_outliers % 8 != 0)
      return Status::invalid_argument("lda_outliers", "must be >= k_outliers and a multiple of 8");
    if (p.ldw_outliers < p.k_outliers || p.ldw_outliers % 8 != 0)
      return Status::invalid_argument("ldw_outliers", "must be >= k_outliers and a multiple of 8");
  }
  LLMK_RETURN_IF_ERROR(detail::check_grid(p.regular.m, Tile::BM));
  constexpr int kSmem = detail::smem_bytes<Tile, Out, 1, 2>();
  return launch(mixed_int8_kernel<Out, Tile>,
                dim3(static_cast<unsigned>(ceil_div(p.regular.n, Tile::BN)),
                     static_cast<unsigned>(ceil_div(p.regular.m, Tile::BM))),
                dim3(Tile::kThreads), kSmem, stream, p);
}

/// mixed_int8_gemm_with_tile with the tile chosen by M.
///
///   // x [M, K] fp16 -> find_outlier_columns / split_outlier_columns -> x_reg, x_out; same split of W;
///   // x_reg quantized per token to int8 (llmk::quant::quantize_dynamic), W_reg per channel offline.
///   llmk::gemm::MixedInt8Args g;
///   g.regular = {x_q, K, w_q, K, M, N, K, {x_scales, true, nullptr, w_scales, true, nullptr, bias}, y, N};
///   g.a_outliers = x_out; g.lda_outliers = ld_out; g.w_outliers = w_out; g.ldw_outliers = ld_out;
///   g.k_outliers = ld_out;   // a multiple of 8, zero-padded
///   llmk::Status s = llmk::gemm::mixed_int8_gemm<llmk::half>(g, stream);
template <class Out>
Status mixed_int8_gemm(const MixedInt8Args& p, cudaStream_t stream) {
  switch (choose_qgemm_tile(p.regular.m)) {
    case QGemmTileKind::kSmall:
      return mixed_int8_gemm_with_tile<Out, QGemmSmall>(p, stream);
    case QGemmTileKind::kMedium:
      return mixed_int8_gemm_with_tile<Out, QGemmMedium>(p, stream);
    default:
      return mixed_int8_gemm_with_tile<Out, QGemmMixedLarge>(p, stream);
  }
}

}  // namespace llmk::gemm
