// Throughput of the 16-bit GEMMs (D = A * B^T, fp32 accumulate, fp32 out): BM_TileGemmF16, the mma.sync tile
// GEMM (what sm_80 / sm_89 run; on Hopper it shows how far mma.sync is from wgmma), and BM_GemmF16, gemm_f16,
// the launcher an engine calls (the wgmma kernel on Hopper, the tile GEMM elsewhere); both with a split-K
// workspace (GemmF16Args), as an engine would call them. BM_TileGemmBF16 / BM_GemmBF16: the same with bf16 A
// and B (CUDA build). On a GPU: device time from CUDA events; in the simulator: the cost of simulating it
// (small shapes only).
//
// Anchors in the same binary (CUDA build, cuBLAS linked by bench/CMakeLists.txt): BM_CublasGemm<half> and
// BM_CublasGemm<bfloat16>, cublasGemmEx on the same shapes and layout (fp16 or bf16 A and B, fp32 compute,
// fp32 out: the same operation as BM_TileGemmF16 / BM_TileGemmBF16), with the same args M/N/K and counters.
// Counters: FLOP/s = 2 M N K; bytes/s = A and B read once (2 bytes each) + D written (4 bytes); b_copies.
// L2: B (the weights) is rotated over b_copies copies covering 4x the L2, iteration i reading copy
// i % b_copies, as bench/quant_gemm.cu does (a 4096 x 4096 B is 32 MiB: it would stay in the H100's 50 MiB
// L2); A and D are not rotated (in a model they come from / go to the neighbouring layers). The rotation
// (llmk and cuBLAS alike) dates from 2026-11-29: earlier runs read B from L2 where it fit (M = 16, 1024).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <type_traits>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/gemm_f16.cuh"
#include "llmk/gemm/tile_gemm.cuh"
#include "support/bench_data.hpp"
#include "support/gpu_timer.hpp"
#if defined(LLMK_CUDA) && defined(LLMK_BENCH_CUBLAS)
#include "support/cublas_anchor.hpp"
#endif

namespace {

using llmk::bfloat16;
using llmk::half;

template <class T>
T uniform_value(std::mt19937& rng) {
  return T(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng));
}

// A [M, K] once, B [N, K] in `copies` copies (4x the L2), D [M, N] fp32: the operands of every benchmark
// here.
template <class T>
struct GemmOperands {
  int m, n, k;
  std::size_t copies;
  llmk::DeviceBuffer<T> a, b;
  llmk::DeviceBuffer<float> d;
  explicit GemmOperands(const benchmark::State& state)
      : m(static_cast<int>(state.range(0))),
        n(static_cast<int>(state.range(1))),
        k(static_cast<int>(state.range(2))),
        copies(llmk::bench::copies_for(nk() * sizeof(T))),
        a(static_cast<std::size_t>(m) * k),
        b(copies * nk()),
        d(static_cast<std::size_t>(m) * n) {
    llmk::bench::fill_random(a, 1, uniform_value<T>);
    llmk::bench::fill_random(b, 2, uniform_value<T>);
  }
  std::size_t nk() const { return static_cast<std::size_t>(n) * k; }
  const T* b_copy(std::size_t c) const { return b.data() + c * nk(); }
  void set_counters(benchmark::State& state) const {
    llmk::bench::set_throughput(state, 2.0 * m * n * k, 2.0 * (1.0 * m * k + 1.0 * n * k) + 4.0 * m * n);
    state.counters["b_copies"] = static_cast<double>(copies);
  }
};

// BM_TileGemm* (kDispatch = false: tile_gemm) and BM_Gemm* (gemm_f16): the same data and counters, each
// with its launcher's split-K workspace, as an engine would call them (small M splits K).
template <class T, bool kDispatch>
void run_f16_gemm(benchmark::State& state) {
  const GemmOperands<T> op(state);
  llmk::gemm::GemmF16Args<T, float> g{op.a.data(), op.k, op.b_copy(0), op.k, nullptr, op.n,
                                      op.d.data(), op.n, op.m,         op.n, op.k};
  const std::size_t bytes =
      kDispatch ? llmk::gemm::gemm_f16_workspace_bytes(g) : llmk::gemm::tile_gemm_workspace_bytes(g);
  llmk::DeviceBuffer<unsigned char> ws(std::max<std::size_t>(bytes, 16));
  g.workspace = ws.data();
  g.workspace_bytes = ws.size();
  llmk::bench::time_rotating(state, op.copies, [&](std::size_t c) {
    llmk::gemm::GemmF16Args<T, float> step = g;
    step.b = op.b_copy(c);
    if constexpr (kDispatch)
      return llmk::gemm::gemm_f16(step, nullptr);
    else
      return llmk::gemm::tile_gemm(step, nullptr);
  });
  op.set_counters(state);
}

void BM_TileGemmF16(benchmark::State& state) try { run_f16_gemm<half, false>(state); }
LLMK_BENCH_CATCH(state)
void BM_GemmF16(benchmark::State& state) try { run_f16_gemm<half, true>(state); }
LLMK_BENCH_CATCH(state)

#if defined(LLMK_CUDA)
void BM_TileGemmBF16(benchmark::State& state) try { run_f16_gemm<bfloat16, false>(state); }
LLMK_BENCH_CATCH(state)
void BM_GemmBF16(benchmark::State& state) try { run_f16_gemm<bfloat16, true>(state); }
LLMK_BENCH_CATCH(state)
#endif

#if defined(LLMK_CUDA) && defined(LLMK_BENCH_CUBLAS)
template <class T>
void BM_CublasGemm(benchmark::State& state) try {
  const GemmOperands<T> op(state);
  llmk::bench::CublasHandle handle;
  if (!llmk::bench::skip_unless_ok(state,
                                   llmk::bench::cublas_status("cublasCreate", cublasCreate(&handle.h))))
    return;
  const cudaDataType_t type = std::is_same_v<T, half> ? CUDA_R_16F : CUDA_R_16BF;
  const float alpha = 1.0f, beta = 0.0f;
  llmk::bench::time_rotating(state, op.copies, [&](std::size_t c) {
    return llmk::bench::cublas_tn(handle.h, op.m, op.n, op.k, &alpha, op.b_copy(c), type, op.a.data(), &beta,
                                  op.d.data(), CUDA_R_32F, CUBLAS_COMPUTE_32F);
  });
  op.set_counters(state);
}
LLMK_BENCH_CATCH(state)
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
BENCHMARK(BM_TileGemmBF16)
    ->Apply(gemm_shapes)
    ->ArgNames({"M", "N", "K"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmBF16)
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
