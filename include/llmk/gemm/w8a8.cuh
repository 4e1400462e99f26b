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

#include <atomic>
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
#include "llmk/gemm/split_k.cuh"

namespace llmk::gemm {

/// Arguments of mixed_int8_gemm: the int8 part (regular columns, outlier columns zeroed in both A and W)
/// plus the fp16 outlier part: A_out [M, k_outliers] and W_out [N, k_outliers] (K-major, as
/// llmk::quant::split_outlier_columns writes them; k_outliers may be 0). k_outliers is a host value: with
/// outlier columns found on the device (find_outlier_columns), their count crosses to the host before the
/// launch, so a step whose outliers change cannot be captured in a CUDA graph as one (capture it per count).
/// Example: mixed_int8_gemm.
struct MixedInt8Args {
  QuantGemmArgs<std::int8_t> regular;
  const half* a_outliers = nullptr;
  std::int64_t lda_outliers = 0;
  const half* w_outliers = nullptr;
  std::int64_t ldw_outliers = 0;
  int k_outliers = 0;
};

/// Tiles of the 8-bit GEMMs (BK in elements = bytes): large (prefill), medium, and the small-M tile for
/// decode, where the grid must spread N over many blocks. Example: w8a8_gemm_with_tile.
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

// The operands of this block: all of K, or under split-K the k-tiles of split blockIdx.z
// (kmajor_split_window).
template <class Tile, bool kSplitK, class In, class Acc>
LLMK_DEVICE KMajorOperands kmajor_split_operands(const QuantGemmKernelArgs<In>& p,
                                                 const SplitKArgs<Acc>& split) {
  const KMajorOperands op{p.a, p.w, p.lda, p.ldw, p.m, p.n, p.k};
  if (kSplitK) return kmajor_split_window<Tile, In>(op, split.k_tiles_per_split);
  return op;
}

/// The dequantization factors of this thread's accumulator rows and columns, each loaded once (the epilogue
/// used to load them per output: up to 5 loads per element). Rows / columns outside [M, N] get zeros.
template <class Tile>
struct AccFactors {
  DequantRow row[Tile::kMmaM][2];
  DequantCol col[Tile::kMmaN][2];
  LLMK_DEVICE AccFactors(const DequantScales& s, int block_m, int block_n, int m, int n) {
#pragma unroll
    for (int mi = 0; mi < Tile::kMmaM; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = block_m + acc_row<Tile>(mi, h);
        row[mi][h] = r < m ? dequant_row(s, r) : DequantRow{};
      }
#pragma unroll
    for (int ni = 0; ni < Tile::kMmaN; ++ni)
#pragma unroll
      for (int o = 0; o < 2; ++o) {
        const int c = block_n + acc_col<Tile>(ni, o);
        col[ni][o] = c < n ? dequant_col(s, c) : DequantCol{};
      }
  }
};

}  // namespace detail

/// W8A8 kernel: one block per BM x BN output tile (blockIdx.x over N tiles, blockIdx.y over M tiles) and,
/// with kSplitK, split of K (blockIdx.z). The split-K reduction is a separate instantiation: its code after
/// the mainloop changes how ptxas schedules the loop (sm_80, medium tile: 138 -> 171-177 instructions per
/// loop iteration), so the unsplit kernels stay as they were. Launched (with its arguments checked) by
/// w8a8_gemm / w8a8_gemm_with_tile: call those (example and errors there), not the kernel.
template <class Out, class Tile, bool kSaturate, bool kSplitK = false>
__global__ void __launch_bounds__(Tile::kThreads)
    w8a8_kernel(detail::QuantGemmKernelArgs<std::int8_t> p, detail::SplitKArgs<std::int32_t> split) {
  using Mma =
      std::conditional_t<kSaturate, arch::MMA_16x8x32_S32S8S8S32_SATFINITE, arch::MMA_16x8x32_S32S8S8S32>;
  const int block_m = static_cast<int>(blockIdx.y) * Tile::BM,
            block_n = static_cast<int>(blockIdx.x) * Tile::BN;
  std::int32_t acc[Tile::kMmaM][Tile::kMmaN][4];
  detail::zero<Tile>(acc);
  kmajor_mainloop<Tile, 1, Mma>(detail::kmajor_split_operands<Tile, kSplitK>(p, split), block_m, block_n,
                                dynamic_smem(), acc);
  auto value = [&](int row, int col, std::int32_t v) -> Out {
    if constexpr (std::is_same_v<Out, std::int32_t>)
      return v;
    else
      return Out(detail::dequantize(p.scales, row, col, detail::zero_point_corrected(p.scales, row, col, v)));
  };
  if constexpr (kSplitK) {
    detail::kmajor_split_k_finish<Tile>(split, acc, static_cast<Out*>(p.d), p.ldd, block_m, block_n, p.m, p.n,
                                        value);
  } else if constexpr (std::is_same_v<Out, std::int32_t>) {
    store_tile_staged<Tile>(dynamic_smem(), static_cast<Out*>(p.d), p.ldd, block_m, block_n, p.m, p.n,
                            [&](int, int, int mi, int ni, int e) -> Out { return acc[mi][ni][e]; });
  } else {
    const detail::AccFactors<Tile> f(p.scales, block_m, block_n, p.m, p.n);
    store_tile_staged<Tile>(
        dynamic_smem(), static_cast<Out*>(p.d), p.ldd, block_m, block_n, p.m, p.n,
        [&](int, int, int mi, int ni, int e) -> Out {
          const detail::DequantRow& r = f.row[mi][e / 2];
          const detail::DequantCol& c = f.col[ni][e % 2];
          return Out(detail::dequantize(p.scales, r, c,
                                        detail::zero_point_corrected(p.scales, r, c, acc[mi][ni][e])));
        });
  }
}

/// FP8 kernel (e4m3 x e4m3, fp32 accumulate), blocks as w8a8_kernel. Compiled to a trap for architectures
/// without fp8 mma; the launcher refuses such devices before launching. Launched by fp8_gemm /
/// fp8_gemm_with_tile (example and errors there).
template <class Out, class Tile, bool kSplitK = false>
__global__ void __launch_bounds__(Tile::kThreads)
    fp8_kernel(detail::QuantGemmKernelArgs<float8_e4m3> p, detail::SplitKArgs<float> split) {
  if constexpr (arch::kHasFp8Mma) {
    const int block_m = static_cast<int>(blockIdx.y) * Tile::BM,
              block_n = static_cast<int>(blockIdx.x) * Tile::BN;
    float acc[Tile::kMmaM][Tile::kMmaN][4];
    detail::zero<Tile>(acc);
    kmajor_mainloop<Tile, 1, arch::MMA_16x8x32_F32E4M3E4M3F32>(
        detail::kmajor_split_operands<Tile, kSplitK>(p, split), block_m, block_n, dynamic_smem(), acc);
    auto value = [&](int row, int col, float v) { return Out(detail::dequantize(p.scales, row, col, v)); };
    if constexpr (kSplitK) {
      detail::kmajor_split_k_finish<Tile>(split, acc, static_cast<Out*>(p.d), p.ldd, block_m, block_n, p.m,
                                          p.n, value);
    } else {
      const detail::AccFactors<Tile> f(p.scales, block_m, block_n, p.m, p.n);
      store_tile_staged<Tile>(
          dynamic_smem(), static_cast<Out*>(p.d), p.ldd, block_m, block_n, p.m, p.n,
          [&](int, int, int mi, int ni, int e) -> Out {
            return Out(detail::dequantize(p.scales, f.row[mi][e / 2], f.col[ni][e % 2], acc[mi][ni][e]));
          });
    }
  } else {
#if LLMK_DEVICE_PASS
    __trap();
#endif
    (void)split;
  }
}

/// Mixed LLM.int8() kernel: int8 mainloop, dequantize into fp32 registers, fp16 mainloop over the outliers.
/// Launched by mixed_int8_gemm / mixed_int8_gemm_with_tile (example and errors there).
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

// Blocks of a K-major tile's split-K kernel one SM holds at once: by shared memory (the ring or the float
// epilogue staging, whichever is larger, + the 1 KiB an SM reserves per block) and by registers (65536 an
// SM; ptxas gives the split kernels of the 64-thread small tile 154-168 registers: 6 blocks, the 128-thread
// medium one 127-142: 3, the 256-thread large one up to 128: 1 counted, 2 possible).
template <class Tile>
int qgemm_blocks_per_sm() {
  const int by_registers = Tile::kThreads >= 256 ? 1 : (Tile::kThreads >= 128 ? 3 : 6);
  return max(1, min(by_registers, device_smem_per_sm() / (smem_bytes<Tile, float, 1>() + 1024)));
}

// The split count for an M x N x K call on `sms` SMs. split_k = 0: as many splits as one wave of resident
// blocks holds (never a second, partial wave), at least 2 k-tiles a split, and the partials' traffic
// (S x M x N x 4 bytes, written and read back: mostly L2) at most half the weights' (N x K bytes).
template <class Tile>
QGemmSplitPlan qgemm_split_plan(int m, int n, int k, int split_k, int sms) {
  const long long tiles = static_cast<long long>(ceil_div(m, Tile::BM)) * ceil_div(n, Tile::BN);
  const int k_tiles = ceil_div(k, Tile::BK);
  long long want = split_k;
  if (want == 0) {
    want = static_cast<long long>(qgemm_blocks_per_sm<Tile>()) * sms / tiles;
    want = min<long long>(want, k_tiles / 2);
    want = min<long long>(want, k / (8LL * m));
  }
  return split_k_plan_of(want, tiles, k_tiles, m, n);
}

// The plan of a call on `Tile` with its workspace (qgemm_resolve_split_by).
template <class Tile, class In>
Status qgemm_resolve_split(const QuantGemmArgs<In>& p, bool can_split, QGemmSplitPlan& plan) {
  return qgemm_resolve_split_by(
      p, can_split, [&] { return qgemm_split_plan<Tile>(p.m, p.n, p.k, p.split_k, device_sm_count()); },
      plan);
}

template <class Tile, class Out, class Kernel, class In, class Acc>
Status launch_qgemm(Kernel kernel, const QuantGemmArgs<In>& p, const QGemmSplitPlan& plan,
                    const SplitKArgs<Acc>& split, cudaStream_t stream) {
  return launch(kernel,
                dim3(static_cast<unsigned>(ceil_div(p.n, Tile::BN)),
                     static_cast<unsigned>(ceil_div(p.m, Tile::BM)), static_cast<unsigned>(plan.splits)),
                dim3(Tile::kThreads), (smem_bytes<Tile, Out, 1>()), stream, kernel_args(p), split);
}

}  // namespace detail

/// sums[j] = sum_k W[j, k] for each output column j of the GEMM (one warp per weight row, 16-byte loads).
/// (A template only so that the header can be included by several translation units.) Launched by
/// weight_column_sums (example and errors there).
template <class W = std::int8_t>
__global__ void weight_column_sums_kernel(const W* w, std::int64_t ldw, int n, int k, std::int32_t* sums) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int row =
      static_cast<int>(blockIdx.x) * static_cast<int>(blockDim.x / 32) + static_cast<int>(threadIdx.x / 32);
  if (row >= n) return;  // whole warps leave together
  std::int32_t s = 0;
  for (std::int64_t c = lane * 16; c < k; c += 32 * 16) {  // 64-bit: c + 512 passes 2^31 at K near 2^31
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
///
/// Errors (Status::invalid_argument naming the argument): w or sums null; N < 1; K not a positive multiple
/// of 16; ldw < K or not a multiple of 16; w not 16-byte aligned; sums not 4-byte aligned. A failed launch:
/// Status::cuda_error.
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
/// instead of wrapping; it only matters for K > 2^31 / 128^2 = 131072) and never splits K (a clamp per
/// split is not the clamp of the whole sum). The clamp falls after every 32-element step of K counted from
/// k = 0 (reference::gemm_s8s8_s32, and the Hopper kernel); these tiles step from K's end, so with kSaturate
/// K must be a multiple of 32 (where both agree). Split-K as in QuantGemmArgs, with
/// quant_gemm_workspace_bytes<Tile>(p) bytes of workspace.
///
///   namespace gemm = llmk::gemm;   // g: as for w8a8_gemm
///   llmk::Status s = gemm::w8a8_gemm_with_tile<float, gemm::QGemmMedium>(g, stream);
///   s = gemm::w8a8_gemm_with_tile<std::int32_t, gemm::QGemmLarge, /*kSaturate=*/true>(g, stream);
///
/// Errors (Status::invalid_argument naming the argument): those listed at w8a8_gemm (no scales needed for
/// Out = std::int32_t), M above 65535 * Tile::BM (the grid) among them; with kSaturate, K not a multiple of
/// 32 (split_k is still range-checked, but K is never split). A failed launch: Status::cuda_error.
template <class Out, class Tile, bool kSaturate = false>
Status w8a8_gemm_with_tile(const QuantGemmArgs<std::int8_t>& p, cudaStream_t stream) {
  static_assert(std::is_same_v<Out, std::int32_t> || std::is_same_v<Out, float> ||
                    std::is_same_v<Out, half> || std::is_same_v<Out, bfloat16>,
                "W8A8 outputs: std::int32_t (raw accumulator), float, llmk::half, llmk::bfloat16");
  LLMK_RETURN_IF_ERROR(
      (detail::validate_quant_gemm<std::int8_t, Out>(p, !std::is_same_v<Out, std::int32_t>)));
  if (kSaturate && p.k % 32 != 0)
    return Status::invalid_argument(
        "k",
        str_cat("must be a multiple of 32 with .satfinite (the clamp steps of 32 from k = 0), got ", p.k));
  LLMK_RETURN_IF_ERROR(detail::check_grid(p.m, Tile::BM));
  detail::QGemmSplitPlan plan;
  LLMK_RETURN_IF_ERROR(detail::qgemm_resolve_split<Tile>(p, !kSaturate, plan));
  const auto split = detail::qgemm_split_args<std::int32_t>(plan, p.workspace, p.n);
  if constexpr (!kSaturate)
    if (plan.splits > 1)
      return detail::launch_qgemm<Tile, Out>(w8a8_kernel<Out, Tile, false, true>, p, plan, split, stream);
  return detail::launch_qgemm<Tile, Out>(w8a8_kernel<Out, Tile, kSaturate>, p, plan, split, stream);
}

/// The tile the 8-bit GEMMs pick for M rows: small for decode-like M <= 16, medium up to 64, else large (on
/// sm_90 with sm_90a code: the Hopper wgmma kernel instead of the large tile, with 128 x 64 tiles where 128 x
/// 128 ones would leave half the SMs idle).
enum class QGemmTileKind { kSmall, kMedium, kLarge };
/// The tile kind for M rows: kSmall for M <= 16, kMedium for M <= 64, kLarge above. Any M; never fails.
///   const bool decode_tile = llmk::gemm::choose_qgemm_tile(8) == llmk::gemm::QGemmTileKind::kSmall;  // true
inline QGemmTileKind choose_qgemm_tile(int m) {
  return m <= 16 ? QGemmTileKind::kSmall : (m <= 64 ? QGemmTileKind::kMedium : QGemmTileKind::kLarge);
}

/// Bytes of workspace w8a8_gemm / fp8_gemm (Tile = void) or w8a8_gemm_with_tile / fp8_gemm_with_tile (the
/// call's Tile, also an Sm90GemmConfig for w8a8_gemm_sm90 / fp8_gemm_sm90) need to split K with these
/// arguments: reads M, N, K, split_k and the device (its SM count and shared memory; on sm_90 with sm_90a
/// code M > 64 runs the Hopper kernel, with its own split plan), not the pointers. 0 where the call does not
/// split (outputs with enough tiles or rounds to keep the SMs busy, split_k = 1).
/// Split-K sums the splits' int32 (W8A8) or fp32 (fp8) partials in split order: deterministic for a given
/// split count; W8A8's int32 results are exact whatever the split.
///
///   llmk::gemm::QuantGemmArgs<std::int8_t> g = ...;   // as for the call (M = 1..64 decodes split)
///   const std::size_t bytes = llmk::gemm::quant_gemm_workspace_bytes(g);
///   llmk::DeviceBuffer<unsigned char> ws(std::max<std::size_t>(bytes, 1));
///   g.workspace = ws.data(); g.workspace_bytes = bytes;
///   llmk::Status s = llmk::gemm::w8a8_gemm<llmk::half>(g, stream);
template <class Tile = void, class In>
std::size_t quant_gemm_workspace_bytes(const QuantGemmArgs<In>& p) {
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.split_k < 0 || p.split_k > kSplitKMaxSplits || p.split_k == 1)
    return 0;
  auto bytes = [&]<class T>(T*) {
    return detail::qgemm_split_plan<T>(p.m, p.n, p.k, p.split_k, device_sm_count()).workspace_bytes();
  };
  if constexpr (sm90_detail::IsSm90GemmConfig<Tile>::value) {  // w8a8_gemm_sm90 / fp8_gemm_sm90<Out, Tile>
    return sm90_detail::sm90_split_plan<Tile>(p.m, p.n, p.k, p.split_k, device_sm_count()).workspace_bytes();
  } else if constexpr (!std::is_void_v<Tile>) {
    return bytes(static_cast<Tile*>(nullptr));
  } else {
    switch (choose_qgemm_tile(p.m)) {
      case QGemmTileKind::kSmall:
        return bytes(static_cast<QGemmSmall*>(nullptr));
      case QGemmTileKind::kMedium:
        return bytes(static_cast<QGemmMedium*>(nullptr));
      default:
        if (sm90_detail::sm90_available<Sm90GemmConfig<In>>())
          return sm90_detail::sm90_split_plan_chosen<In>(p.m, p.n, p.k, p.split_k, device_sm_count())
              .workspace_bytes();
        return bytes(static_cast<QGemmLarge*>(nullptr));
    }
  }
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
/// sums, M beyond the grid, split_k outside [0, kSplitKMaxSplits], a workspace that split-K needs missing,
/// misaligned (16 bytes) or smaller than quant_gemm_workspace_bytes(p). Where M > 64 runs the Hopper kernel,
/// w8a8_gemm_sm90's checks (the same). A failed launch: Status::cuda_error.
///
/// Split-K (decode-sized M: few output tiles): with g.workspace set (quant_gemm_workspace_bytes(g) bytes),
/// blocks split K until one wave of resident blocks fills the SMs; without one, each tile's block runs all
/// of K (on 132 SMs, N = 4096 then gives 64 blocks at M <= 16, 32 at M <= 64: the H100 run of 2026-11-25
/// measured 0.26-0.40x cuBLASLt there). On Hopper (M > 64) the wgmma kernel splits K the same way where its
/// tiles leave SMs idle (M = 65..256 at N = 4096: 2 splits).
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
///
///   // g: as for fp8_gemm
///   llmk::Status s = llmk::gemm::fp8_gemm_with_tile<llmk::half, llmk::gemm::QGemmSmall>(g, stream);
///
/// Errors: Status::invalid_argument for the checks listed at w8a8_gemm (scales always required), a non-null
/// scales.a_zero_points, M above 65535 * Tile::BM; Status::unsupported on a device older than sm_89, or when
/// the kernel was compiled without sm_89 / sm_90 code (it would trap). A failed launch: Status::cuda_error.
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
  // sm_8x SASS or JIT-compiles compute_80 PTX, where the kernel is a trap): refuse that too. The image's
  // versions are asked once per device (cudaFuncGetAttributes on every call cost about a microsecond).
  static std::atomic<int> versions[64];  // 1000 * ptxVersion + binaryVersion + 1; 0: not asked yet
  int device = 0, known = 0;
  if (cudaGetDevice(&device) == cudaSuccess && device >= 0 && device < 64)
    known = versions[device].load(std::memory_order_relaxed);
  if (known == 0) {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(fp8_kernel<Out, Tile>)) == cudaSuccess) {
      known = 1000 * attr.ptxVersion + attr.binaryVersion + 1;
      if (device >= 0 && device < 64) versions[device].store(known, std::memory_order_relaxed);
    } else {
      (void)cudaGetLastError();
    }
  }
  const int ptx = (known - 1) / 1000, binary = (known - 1) % 1000;
  if (known > 0 && (ptx < 89 || binary < 89))
    return Status::unsupported(str_cat("fp8 GEMM: the kernel was compiled for compute_", ptx, " / sm_",
                                       binary, ", which has no fp8 mma; build for sm_89 or sm_90"));
#endif
  detail::QGemmSplitPlan plan;
  LLMK_RETURN_IF_ERROR(detail::qgemm_resolve_split<Tile>(p, true, plan));
  const auto split = detail::qgemm_split_args<float>(plan, p.workspace, p.n);
  if (plan.splits > 1)
    return detail::launch_qgemm<Tile, Out>(fp8_kernel<Out, Tile, true>, p, plan, split, stream);
  return detail::launch_qgemm<Tile, Out>(fp8_kernel<Out, Tile>, p, plan, split, stream);
}

/// fp8_gemm_with_tile with the tile chosen by M (as w8a8_gemm). Errors: those of fp8_gemm_with_tile (where
/// M > 64 runs the Hopper kernel, fp8_gemm_sm90's, the same checks).
///
///   llmk::gemm::QuantGemmArgs<llmk::float8_e4m3> g;   // a [M, K], w [N, K], K-major
///   g.scales.a_scales = s_x; g.scales.a_per_token = false;    // per tensor: one device float
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
///
///   namespace gemm = llmk::gemm;
///   llmk::Status s = gemm::mixed_int8_gemm_with_tile<llmk::half, gemm::QGemmMixedLarge>(g, stream);
///
/// Errors (Status::invalid_argument naming the argument): the checks listed at w8a8_gemm on p.regular (named
/// without the 'regular.' prefix: 'a', 'lda', 'scales.a_scales', ...); regular.scales.a_zero_points not null;
/// k_outliers outside [0, 2^29] or, when > 0, not a multiple of 8; a_outliers or w_outliers null or not
/// 16-byte aligned; lda_outliers or ldw_outliers below k_outliers or not a multiple of 8; regular.workspace
/// not null or regular.split_k > 1 (no split-K); M above 65535 * Tile::BM. A failed launch:
/// Status::cuda_error.
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
  if (p.regular.workspace != nullptr || p.regular.split_k > 1)
    return Status::invalid_argument(
        "regular.workspace",
        "mixed_int8_gemm does not split K: leave regular.workspace null and regular.split_k at 0 or 1");
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
///
/// Errors: those of mixed_int8_gemm_with_tile.
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
