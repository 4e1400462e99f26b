// What the simulator costs, so test suites can size themselves: fiber context switches per second, a
// 128-thread block crossing 1000 barriers, warp shuffles, and launch overhead. Simulator only (the _sim
// build).
#include <benchmark/benchmark.h>

#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "support/gpu_timer.hpp"

namespace {

__global__ void barrier_loop(int barriers) {
  for (int i = 0; i < barriers; ++i) __syncthreads();
}

__global__ void shuffle_loop(int* out, int shuffles) {
  int v = static_cast<int>(threadIdx.x);
  for (int i = 0; i < shuffles; ++i) v += __shfl_xor_sync(0xffffffffu, v, i & 31);
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

__global__ void empty_kernel() {}

// Every thread yields to the scheduler and is resumed once per barrier: 2 switches per thread per barrier.
void BM_BarrierLoop(benchmark::State& state) try {
  const int threads = static_cast<int>(state.range(0)), barriers = static_cast<int>(state.range(1));
  llmk::bench::time_iterations(
      state, [&] { return llmk::launch(barrier_loop, dim3(1), dim3(threads), 0, nullptr, barriers); });
  state.counters["context_switches/s"] =
      benchmark::Counter(2.0 * threads * barriers, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["barriers/s"] = benchmark::Counter(barriers, benchmark::Counter::kIsIterationInvariantRate);
}
LLMK_BENCH_CATCH(state)
BENCHMARK(BM_BarrierLoop)
    ->Args({128, 1000})
    ->Args({32, 1000})
    ->Args({1024, 100})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_ShuffleLoop(benchmark::State& state) try {
  const int shuffles = static_cast<int>(state.range(0));
  llmk::DeviceBuffer<int> out(128);
  llmk::bench::time_iterations(state, [&] {
    return llmk::launch(shuffle_loop, dim3(1), dim3(128), 0, nullptr, out.data(), shuffles);
  });
  state.counters["warp_shuffles/s"] =
      benchmark::Counter(4.0 * shuffles, benchmark::Counter::kIsIterationInvariantRate);
}
LLMK_BENCH_CATCH(state)
BENCHMARK(BM_ShuffleLoop)->Arg(1000)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_EmptyLaunch(benchmark::State& state) try {
  const int blocks = static_cast<int>(state.range(0)), threads = static_cast<int>(state.range(1));
  llmk::bench::time_iterations(
      state, [&] { return llmk::launch(empty_kernel, dim3(blocks), dim3(threads), 0, nullptr); });
  state.counters["threads/s"] =
      benchmark::Counter(1.0 * blocks * threads, benchmark::Counter::kIsIterationInvariantRate);
}
LLMK_BENCH_CATCH(state)
BENCHMARK(BM_EmptyLaunch)->Args({1, 1})->Args({1000, 128})->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
