// llmk/gemm/weight_only_args.cuh: the arguments of the weight-only GEMM (weight_only.cuh), shared by its
// mma.sync kernels and its Hopper kernel (weight_only_sm90.cuh).
#pragma once

#include <cstdint>

namespace llmk::gemm {

/// Most splits of K weight_only_gemm makes (WeightOnlyArgs::split_k <= this).
constexpr int kWeightOnlyMaxSplits = 16;

/// Which kernel weight_only_gemm runs (WeightOnlyArgs::kernel).
enum class WeightOnlyKernel {
  kAuto,     // by M and the device: on sm_90 with sm_90a code the Hopper kernel for M > 16 where it applies,
             // else the mma.sync tiles
  kMmaSync,  // the mma.sync tile for M (WeightOnlySmallM / MediumM / LargeM) on every device
  kHopper,   // the Hopper kernel at any M: an error where it cannot run (device, build or shape)
};

/// Arguments of weight_only_gemm (T = llmk::half or llmk::bfloat16). Leading dimensions are in elements. The
/// rules each field must meet and a full example: weight_only_gemm (weight_only.cuh).
///   llmk::gemm::WeightOnlyArgs<llmk::half> x;
///   x.a = d_a; x.lda = K; x.w = d_packed; x.w_bytes = packed_bytes; x.d = d_out; x.ldd = N;   // and scales
template <class T>
struct WeightOnlyArgs {
  const T* a = nullptr;                 // [M, K] row-major, 16-byte aligned
  std::int64_t lda = 0;                 // >= K, multiple of 8
  const void* w = nullptr;              // packed weights (weight_only_repack), 16-byte aligned
  std::int64_t w_bytes = 0;             // bytes given in w: must equal weight_only_packed_bytes(n, k, bits)
  const T* scales = nullptr;            // [K / G, N] row-major
  std::int64_t scales_size = 0;         // elements given in scales: must equal (K / G) * N
  const std::uint8_t* zeros = nullptr;  // [K / G, N] zero-point codes, or null (z = 8 / 128)
  std::int64_t zeros_size = 0;          // elements given in zeros (when non-null): must equal (K / G) * N
  const std::int32_t* perm = nullptr;   // [K] act-order permutation (4-byte aligned) or null
  std::int64_t perm_size = 0;           // elements given in perm (when non-null): must equal K
  const T* bias = nullptr;              // [N] or null
  T* d = nullptr;                       // [M, N] row-major, ldd >= N
  std::int64_t ldd = 0;
  int m = 0, n = 0, k = 0;
  int group_size = 0;  // G: a multiple of 16 dividing K (G = K: per-channel)
  int bits = 4;        // 4 or 8
  int split_k = 0;     // 0: by the SM count; 1: no split; s in [2, kWeightOnlyMaxSplits]: at most s splits
  WeightOnlyKernel kernel = WeightOnlyKernel::kAuto;  // kAuto unless comparing the kernels (benchmarks)
};

}  // namespace llmk::gemm
