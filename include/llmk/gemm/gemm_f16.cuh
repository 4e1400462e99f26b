// llmk/gemm/gemm_f16.cuh: the 16-bit GEMM launchers.
//
//   D[M, N] = alpha * A[M, K] * B[N, K]^T + beta * C[M, N]        A, B: fp16 or bf16; C, D: fp32 or A's type
//
// gemm_f16 is the one an engine calls, on any architecture llmk runs on; the device picks the kernel at run
// time: on sm_90 with sm_90a code in the build, the persistent wgmma kernel (gemm_f16_sm90: hopper_gemm.cuh's
// kernel with the LinearEpilogue, its tile width by the shape, split-K over a caller's workspace at small M);
// elsewhere (sm_80, sm_86, sm_89, or a Hopper build without sm_90a code) the mma.sync tile GEMM
// (tile_gemm.cuh, its tile by the shape). Both give alpha * acc + beta * C in fp32, rounded once to Out;
// their sums differ only in the order the tensor cores add the products.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "llmk/core/status.cuh"
#include "llmk/gemm/hopper_gemm.cuh"
#include "llmk/gemm/quant_gemm_args.cuh"
#include "llmk/gemm/tile_gemm.cuh"

namespace llmk::gemm {

/// Which kernel gemm_f16 runs on this device: true for the Hopper wgmma kernel (an sm_90 device and sm_90a
/// code in the build), false for the mma.sync tile GEMM. Reads the current device; never fails.
///   const char* kernel = llmk::gemm::gemm_f16_uses_sm90<llmk::bfloat16>() ? "wgmma" : "mma.sync";
template <class T>
bool gemm_f16_uses_sm90() {
  return sm90_detail::sm90_available<Sm90GemmConfig<T>>();
}

namespace sm90_detail {

// gemm_f16_sm90 on validated arguments; kSplit: whether to instantiate the split-K kernels (the positional
// launcher, which has no workspace, does not).
template <class Cfg, bool kSplit, class T, class Out>
Status gemm_f16_sm90_run(const GemmF16Args<T, Out>& p, cudaStream_t stream) {
  static_assert(
      [] {
        if constexpr (std::is_void_v<Cfg>)
          return true;
        else
          return std::is_same_v<typename Cfg::Elem, T>;
      }(),
      "gemm_f16_sm90<Cfg>: Cfg must be an Sm90GemmConfig of the operands' type T (an fp16 "
      "configuration over bf16 operands would read their bits as fp16)");
  if (!sm90_available<Sm90GemmConfig<T>>())
    return Status::unsupported("gemm_f16_sm90 needs an sm_90 device and a build with sm_90a code");
  using Epi = LinearEpilogue<Out>;
  Sm90GemmParams<Epi> prm;
  prm.m = p.m, prm.n = p.n, prm.k = p.k, prm.d = p.d, prm.ldd = p.ldd;
  prm.epi = Epi{p.alpha, p.beta, p.c, p.ldc};
  auto run = [&]<class C>(C) {
    detail::QGemmSplitPlan plan;
    if constexpr (kSplit)
      LLMK_RETURN_IF_ERROR(detail::qgemm_resolve_split_by(
          p, C::kCanSplitK, [&] { return sm90_split_plan<C>(p.m, p.n, p.k, p.split_k, device_sm_count()); },
          plan, "gemm_f16_workspace_bytes"));
    constexpr bool kRunSplit = kSplit && C::kCanSplitK;
    return launch_gemm_sm90<C, kRunSplit>(p.a, p.lda, p.b, p.ldb, prm, stream, plan, p.workspace);
  };
  if constexpr (std::is_void_v<Cfg>)
    return with_chosen_tile<T>(p.m, p.n, run);
  else
    return run(Cfg{});
}

}  // namespace sm90_detail

/// D = alpha * A * B^T + beta * C on Hopper (HGMMA) with fp16 or bf16 A [M, K] and B [N, K] (K contiguous),
/// fp32 accumulation, and C and D of type Out: float, or T itself (fp16 / bf16 out, as cuBLAS's HGEMM with
/// fp32 compute: alpha * acc + beta * C in fp32, rounded once). Requirements: those of tile_gemm
/// (llmk/gemm/tile_gemm.cuh). Cfg = void (the default) picks the tile width by the shape
/// (sm90_detail::choose_tile_n: 128 x 256 tiles for large outputs, 128 x 64 where wider tiles would leave SMs
/// idle); an Sm90GemmConfig forces one. With a workspace (GemmF16Args) it splits K where the tiles are too
/// few for the SMs (sm90_split_plan: M = 1..64 at N = 4096 -> 2 splits); the positional form never splits.
/// Errors: the Status::invalid_argument requirements of tile_gemm (checked first); Status::unsupported where
/// no sm_90a kernel can run; a failed launch: Status::cuda_error.
///
///   llmk::Status s = llmk::gemm::gemm_f16_sm90(a, K, b, K, nullptr, N, d_f32, N, M, N, K, 1.0f, 0.0f,
///                                              stream);                     // float* d_f32: fp32 out
///   s = llmk::gemm::gemm_f16_sm90(a, K, b, K, nullptr, N, d_f16, N, M, N, K, 1.0f, 0.0f, stream);  // half*
template <class T, class Cfg = void, class Out>
Status gemm_f16_sm90(const T* a, std::int64_t lda, const T* b, std::int64_t ldb,
                     const std::type_identity_t<Out>* c, std::int64_t ldc, Out* d, std::int64_t ldd, int m,
                     int n, int k, float alpha, float beta, cudaStream_t stream) {
  const GemmF16Args<T, Out> p{a, lda, b, ldb, c, ldc, d, ldd, m, n, k, alpha, beta, 1, nullptr, 0};
  LLMK_RETURN_IF_ERROR(detail::validate_f16_gemm_args(p));
  return sm90_detail::gemm_f16_sm90_run<Cfg, false>(p, stream);
}

/// gemm_f16_sm90 with its arguments in a GemmF16Args, split-K over p.workspace included (see there). Errors:
/// those of the positional form, and the split_k and workspace checks of tile_gemm(GemmF16Args) against
/// gemm_f16_workspace_bytes<Cfg>(p).
///
///   llmk::gemm::GemmF16Args<llmk::half, llmk::half> g{a, K, b, K, nullptr, N, d, N, M, N, K};
///   llmk::DeviceBuffer<unsigned char> ws(std::max<std::size_t>(llmk::gemm::gemm_f16_workspace_bytes(g), 1));
///   g.workspace = ws.data(), g.workspace_bytes = ws.size();
///   llmk::Status s = llmk::gemm::gemm_f16_sm90(g, stream);
template <class Cfg = void, class T, class Out>
Status gemm_f16_sm90(const GemmF16Args<T, Out>& p, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::validate_f16_gemm_args(p));
  return sm90_detail::gemm_f16_sm90_run<Cfg, true>(p, stream);
}

/// Bytes of workspace gemm_f16 (Cfg = void) or gemm_f16_sm90<Cfg> needs to split K with these arguments:
/// reads M, N, K, split_k and the device (which kernel gemm_f16 runs there: tile_gemm_workspace_bytes off
/// Hopper; its SM count), not the pointers. 0 where the call does not split (outputs with enough tiles to
/// keep the SMs busy, split_k = 1). The splits' fp32 partials are summed in split order:
/// deterministic for a given split count.
///
///   llmk::gemm::GemmF16Args<llmk::half> g{a, K, b, K, nullptr, N, d, N, M, N, K};   // d: float (Out)
///   const std::size_t bytes = llmk::gemm::gemm_f16_workspace_bytes(g);
template <class Cfg = void, class T, class Out>
std::size_t gemm_f16_workspace_bytes(const GemmF16Args<T, Out>& p) {
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.split_k < 0 || p.split_k > kSplitKMaxSplits || p.split_k == 1)
    return 0;
  if constexpr (std::is_void_v<Cfg>) {
    if (!gemm_f16_uses_sm90<T>()) return tile_gemm_workspace_bytes(p);
    return sm90_detail::sm90_split_plan_chosen<T>(p.m, p.n, p.k, p.split_k, device_sm_count())
        .workspace_bytes();
  } else {
    return sm90_detail::sm90_split_plan<Cfg>(p.m, p.n, p.k, p.split_k, device_sm_count()).workspace_bytes();
  }
}

/// D = alpha * A * B^T + beta * C with fp16 or bf16 A [M, K] and B [N, K] (row-major, K contiguous), fp32
/// accumulation, C and D of type Out (float, or T itself), on the device's best kernel: wgmma on sm_90 (with
/// sm_90a code in the build), mma.sync elsewhere; either splits K over p.workspace where the output has too
/// few tiles for the SMs. Requirements: those of tile_gemm (llmk/gemm/tile_gemm.cuh), checked before either
/// kernel is chosen, so an argument error names the same rule everywhere.
///
/// Errors (Status::invalid_argument naming the argument): those of tile_gemm(GemmF16Args): the requirements
/// of tile_gemm, split_k outside [0, kSplitKMaxSplits], and where the call splits a workspace null, not
/// 16-byte aligned or below gemm_f16_workspace_bytes(p). A failed launch: Status::cuda_error.
///
///   llmk::gemm::GemmF16Args<llmk::half, llmk::half> g{a, K, b, K, nullptr, N, d, N, M, N, K};
///   llmk::DeviceBuffer<unsigned char> ws(std::max<std::size_t>(llmk::gemm::gemm_f16_workspace_bytes(g), 1));
///   g.workspace = ws.data(), g.workspace_bytes = ws.size();   // optional: without it no split
///   llmk::Status s = llmk::gemm::gemm_f16(g, stream);
template <class T, class Out>
Status gemm_f16(const GemmF16Args<T, Out>& p, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::validate_f16_gemm_args(p));
  if (gemm_f16_uses_sm90<T>()) return sm90_detail::gemm_f16_sm90_run<void, true>(p, stream);
  return tile_gemm(p, stream);
}

/// gemm_f16 with positional arguments (no workspace, so neither kernel splits K). Errors: the requirements of
/// tile_gemm (Status::invalid_argument naming the argument); a failed launch: Status::cuda_error.
///
///   llmk::Status s = llmk::gemm::gemm_f16(d_a.data(), K, d_b.data(), K, nullptr, N, d_d.data(), N, M, N, K,
///                                         1.0f, 0.0f, stream);
template <class T, class Out>
Status gemm_f16(const T* a, std::int64_t lda, const T* b, std::int64_t ldb,
                const std::type_identity_t<Out>* c, std::int64_t ldc, Out* d, std::int64_t ldd, int m, int n,
                int k, float alpha, float beta, cudaStream_t stream) {
  const GemmF16Args<T, Out> p{a, lda, b, ldb, c, ldc, d, ldd, m, n, k, alpha, beta, 1, nullptr, 0};
  LLMK_RETURN_IF_ERROR(detail::validate_f16_gemm_args(p));
  if (gemm_f16_uses_sm90<T>()) return sm90_detail::gemm_f16_sm90_run<void, false>(p, stream);
  return tile_gemm<void, T, Out>(a, lda, b, ldb, c, ldc, d, ldd, m, n, k, alpha, beta, stream);
}

}  // namespace llmk::gemm
