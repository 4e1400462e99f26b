// Throughput of the 16-bit GEMMs (D = A * B^T, fp32 accumulate, fp32 out): BM_TileGemmF16, the mma.sync tile
// GEMM (what sm_80 / sm_89 run; on Hopper it shows how far mma.sync is from wgmma), and BM_GemmF16, gemm_f16,
// the launcher an engine calls (the wgmma kernel on Hopper, the tile GEMM elsewhere); both with a split-K
// workspace (GemmF16Args), as an engine would call them. On a GPU: device time
// from CUDA events; in the simulator: the cost of simulating it (small shapes only).
//
// Anchors in the same binary (CUDA build, cuBLAS linked by bench/CMakeLists.txt): BM_CublasGemm<half> and
// BM_CublasGemm<bfloat16>, cublasGemmEx on the same shapes and layout (fp16 or bf16 A and B, fp32 compute,
// fp32 out: the same operation as BM_TileGemmF16), with the same args M/N/K and counters. Counters: FLOP/s =
// 2 M N K; bytes/s = A and B read once (2 bytes each) + D written (4 bytes).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <type_traits>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/gemm_f16.cuh"
#include "llmk/gemm/tile_gemm.cuh"
#include "support/gpu_timer.hpp"
#if defined(LLMK_CUDA) && defined(LLMK_BENCH_CUBLAS)
#include "support/cublas_anchor.hpp"
#endif

namespace {

using llmk::bfloat16;
using llmk::half;

// BM_TileGemmF16 (kDispatch = false: tile_gemm) and BM_GemmF16 (gemm_f16): the same data and counters, each
// with its launcher's split-K workspace, as an engine would call them (small M splits K).
template <bool kDispatch>
void run_f16_gemm(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<llmk::half> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(n) * k);
  for (auto& x : a) x = llmk::half(dist(rng));
  for (auto& x : b) x = llmk::half(dist(rng));
  llmk::DeviceBuffer<llmk::half> d_a(a), d_b(b);
  llmk::DeviceBuffer<float> d_d(static_cast<std::size_t>(m) * n);
  llmk::gemm::GemmF16Args<llmk::half, float> g{d_a.data(), k, d_b.data(), k, nullptr, n,
                                               d_d.data(), n, m,          n, k};
  const std::size_t bytes =
      kDispatch ? llmk::gemm::gemm_f16_workspace_bytes(g) : llmk::gemm::tile_gemm_workspace_bytes(g);
  llmk::DeviceBuffer<unsigned char> ws(std::max<std::size_t>(bytes, 16));
  g.workspace = ws.data();
  g.workspace_bytes = ws.size();
  llmk::bench::time_iterations(state, [&] {
    if constexpr (kDispatch)
      return llmk::gemm::gemm_f16(g, nullptr);
    else
      return llmk::gemm::tile_gemm(g, nullptr);
  });
  llmk::bench::set_throughput(state, 2.0 * m * n * k, 2.0 * (1.0 * m * k + 1.0 * n * k) + 4.0 * m * n);
}

void BM_TileGemmF16(benchmark::State& state) {
  run_f16_gemm<false>(state);
}
void BM_GemmF16(benchmark::State& state) {
  run_f16_gemm<true>(state);
}

#if defined(LLMK_CUDA) && defined(LLMK_BENCH_CUBLAS)
template <class T>
void BM_CublasGemm(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(n) * k);
  for (auto& x : a) x = T(dist(rng));
  for (auto& x : b) x = T(dist(rng));
  llmk::DeviceBuffer<T> d_a(a), d_b(b);
  llmk::DeviceBuffer<float> d_d(static_cast<std::size_t>(m) * n);
  llmk::bench::CublasHandle handle;
  if (!llmk::bench::skip_unless_ok(state,
                                   llmk::bench::cublas_status("cublasCreate", cublasCreate(&handle.h))))
    return;
  const cudaDataType_t type = std::is_same_v<T, half> ? CUDA_R_16F : CUDA_R_16BF;
  const float alpha = 1.0f, beta = 0.0f;
  llmk::bench::time_iterations(state, [&] {
    return llmk::bench::cublas_tn(handle.h, m, n, k, &alpha, d_b.data(), type, d_a.data(), &beta, d_d.data(),
                                  CUDA_R_32F, CUBLAS_COMPUTE_32F);
  });
  llmk::bench::set_throughput(state, 2.0 * m * n * k, 2.0 * (1.0 * m * k + 1.0 * n * k) + 4.0 * m * n);
}
#endif

#if defined(LLMK_CUDA)
void gemm_shapes(benchmark::internal::Benchmark* b) {
  b->Args({4096, 4096, 4096})->Args({1024, 4096, 4096})->Args({16, 4096, 4096})->Args({4096, 11008, 4096});
}
BENCHMARK(BM_TileGemmF16)
    ->Apply(gemm_shapes)
    ->ArgNames({"M", "N", "K"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmF16)
    ->Apply(gemm_shapes)
    ->ArgNames({"M", "N", "K"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
#if defined(LLMK_BENCH_CUBLAS)
BENCHMARK_TEMPLATE(BM_CublasGemm, half)
    ->Apply(gemm_shapes)
    ->ArgNames({"M", "N", "K"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_CublasGemm, bfloat16)
    ->Apply(gemm_shapes)
    ->ArgNames({"M", "N", "K"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
#endif
#else
BENCHMARK(BM_TileGemmF16)
    ->Args({64, 64, 64})
    ->Args({128, 128, 128})
    ->ArgNames({"M", "N", "K"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
#endif

}  // namespace
