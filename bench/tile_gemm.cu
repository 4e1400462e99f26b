// Throughput of the fp16 tensor-core tile GEMM (D = A * B^T, fp32 accumulate). On a GPU: device time from
// CUDA events; in the simulator: the cost of simulating it (small shapes only).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/tile_gemm.cuh"
#include "support/gpu_timer.hpp"

namespace {

void BM_TileGemmF16(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<llmk::half> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(n) * k);
  for (auto& x : a) x = llmk::half(dist(rng));
  for (auto& x : b) x = llmk::half(dist(rng));
  llmk::DeviceBuffer<llmk::half> d_a(a), d_b(b);
  llmk::DeviceBuffer<float> d_d(static_cast<std::size_t>(m) * n);
  llmk::bench::time_iterations(state, [&] {
    return llmk::gemm::tile_gemm_f16(d_a.data(), k, d_b.data(), k, nullptr, n, d_d.data(), n, m, n, k, 1.0f,
                                     0.0f, nullptr);
  });
  llmk::bench::set_throughput(state, 2.0 * m * n * k, 2.0 * (1.0 * m * k + 1.0 * n * k) + 4.0 * m * n);
}

#if defined(LLMK_CUDA)
BENCHMARK(BM_TileGemmF16)
    ->Args({4096, 4096, 4096})
    ->Args({1024, 4096, 4096})
    ->Args({16, 4096, 4096})
    ->Args({4096, 11008, 4096})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
#else
BENCHMARK(BM_TileGemmF16)
    ->Args({64, 64, 64})
    ->Args({128, 128, 128})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
#endif

}  // namespace
