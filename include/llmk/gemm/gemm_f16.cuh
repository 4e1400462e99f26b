// llmk/gemm/gemm_f16.cuh: the 16-bit GEMM an engine calls, on any architecture llmk runs on.
//
//   D[M, N] = alpha * A[M, K] * B[N, K]^T + beta * C[M, N]        A, B: fp16 or bf16; C, D: fp32 or A's type
//
// One launcher, two kernels chosen at run time by the device: on sm_90 with sm_90a code in the build, the
// persistent wgmma kernel (hopper_gemm.cuh's gemm_f16_sm90, its tile width by the shape); elsewhere (sm_80,
// sm_86, sm_89, or a Hopper build without sm_90a code) the mma.sync tile GEMM (tile_gemm.cuh's tile_gemm, its
// tile by the shape). Both give alpha * acc + beta * C in fp32, rounded once to Out; their sums differ only
// in the order the tensor cores add the products.
#pragma once

#include <cstdint>
#include <type_traits>

#include "llmk/core/status.cuh"
#include "llmk/gemm/hopper_gemm.cuh"
#include "llmk/gemm/tile_gemm.cuh"

namespace llmk::gemm {

/// Which kernel gemm_f16 runs on this device: true for the Hopper wgmma kernel.
template <class T>
bool gemm_f16_uses_sm90() {
  return sm90_detail::sm90_available<Sm90GemmConfig<T>>();
}

/// D = alpha * A * B^T + beta * C with fp16 or bf16 A [M, K] and B [N, K] (row-major, K contiguous), fp32
/// accumulation, C and D of type Out (float, or T itself), on the device's best kernel: wgmma on sm_90 (with
/// sm_90a code in the build), mma.sync elsewhere. Requirements: those of tile_gemm (llmk/gemm/tile_gemm.cuh),
/// checked before either kernel is chosen, so an argument error names the same rule everywhere.
///
///   llmk::DeviceBuffer<llmk::half> d_a(a), d_b(b);   // A [M, K], B [N, K]
///   llmk::DeviceBuffer<llmk::half> d_d(M * N);
///   llmk::Status s = llmk::gemm::gemm_f16(d_a.data(), K, d_b.data(), K, nullptr, N, d_d.data(), N, M, N, K,
///                                         1.0f, 0.0f, stream);
template <class T, class Out>
Status gemm_f16(const T* a, std::int64_t lda, const T* b, std::int64_t ldb,
                const std::type_identity_t<Out>* c, std::int64_t ldc, Out* d, std::int64_t ldd, int m, int n,
                int k, float alpha, float beta, cudaStream_t stream) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, "gemm_f16: llmk::half or bfloat16");
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, T>,
                "gemm_f16: C and D are float or the input type");
  LLMK_RETURN_IF_ERROR(
      detail::validate_f16_gemm(a, lda, b, ldb, c, ldc, static_cast<const Out*>(d), ldd, m, n, k, beta));
  if (gemm_f16_uses_sm90<T>())
    return gemm_f16_sm90<T, void, Out>(a, lda, b, ldb, c, ldc, d, ldd, m, n, k, alpha, beta, stream);
  return tile_gemm<void, T, Out>(a, lda, b, ldb, c, ldc, d, ldd, m, n, k, alpha, beta, stream);
}

}  // namespace llmk::gemm
