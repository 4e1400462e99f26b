// bench/support/gpu_timer.hpp: time one benchmark iteration in both backends.
//
// CUDA: cudaEvents around the work, reported through Google Benchmark's manual time (UseManualTime), so the
// number is device time, not host launch overhead (a short spin kernel before the start event hides the
// host's share of the call). Simulator: wall time of the (synchronous) simulated run; simulator numbers
// measure the simulator, never the kernel's speed on a GPU.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>

#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/status.cuh"

namespace llmk::bench {

#if defined(LLMK_CUDA)
/// Keeps one SM busy for `cycles` clocks. time_iterations enqueues it before each start event so that the
/// host's share of a call (argument checks, plans, the launches themselves) overlaps it and the events time
/// the device work alone, as PyTorch's SDPA anchor does with torch.cuda._sleep. Without it the first H100
/// run measured a ~30 us floor for every small GEMM, cuBLAS's included.
__global__ void gpu_spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
/// About 20 us at the H100's 1.98 GHz: more than most launchers' host time, little added wall time.
/// LLMK_BENCH_SPIN_CYCLES overrides it (a longer spin shows whether a small kernel's time is host time).
inline long long spin_cycles() {
  static const long long cycles = [] {
    const char* e = std::getenv("LLMK_BENCH_SPIN_CYCLES");
    return e != nullptr ? std::atoll(e) : 40000LL;
  }();
  return cycles;
}
#endif

template <class Work>
void time_iterations(benchmark::State& state, Work&& work) {
#if defined(LLMK_CUDA)
  // One untimed call first: module loading, library handles and lazy initialization stay out of the
  // timings (the first H100 run timed cuBLAS's first GEMM, 64.7 ms, as one whole iteration).
  if (Status s = work(); !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  cudaDeviceSynchronize();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (auto _ : state) {
    (void)launch(gpu_spin, dim3(1), dim3(1), 0, nullptr, spin_cycles());
    cudaEventRecord(start);
    Status s = work();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    if (!s.ok()) {
      state.SkipWithError(s.message().c_str());
      break;
    }
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
#else
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = work();
    auto t1 = std::chrono::steady_clock::now();
    if (!s.ok()) {
      state.SkipWithError(s.message().c_str());
      break;
    }
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
#endif
}

/// Skips the benchmark with the message of `status` unless it is ok; returns status.ok(). For the setup
/// steps that may refuse a shape (plans, library handles, a warm-up call):
///   if (!skip_unless_ok(state, planned)) return;
inline bool skip_unless_ok(benchmark::State& state, const Status& status) {
  if (!status.ok()) state.SkipWithError(status.message().c_str());
  return status.ok();
}

/// Adds the bytes/s counter alone (Google Benchmark divides by the measured time; binary prefixes).
inline void set_bandwidth(benchmark::State& state, double bytes_per_iter) {
  state.counters["bytes/s"] = benchmark::Counter(
      bytes_per_iter, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1024);
}

/// Adds FLOP/s and bytes/s counters (Google Benchmark divides by the measured time).
inline void set_throughput(benchmark::State& state, double flops_per_iter, double bytes_per_iter) {
  state.counters["FLOP/s"] = benchmark::Counter(flops_per_iter, benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
  set_bandwidth(state, bytes_per_iter);
}

}  // namespace llmk::bench
