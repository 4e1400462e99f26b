// bench/support/gpu_timer.hpp: time one benchmark iteration in both backends.
//
// CUDA: cudaEvents around the work, reported through Google Benchmark's manual time (UseManualTime), so the
// number is device time, not host launch overhead (a spin kernel before the start event, sized from the
// call's host time, hides the host's share of the call). Every CUDA call of the timing is checked: a failure
// errors the row (SkipWithError) instead of reporting a 0 s sample. Simulator: wall time of the (synchronous)
// simulated run; simulator numbers measure the simulator, never the kernel's speed on a GPU.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

#include "bench_guard.hpp"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/status.cuh"

namespace llmk::bench {

/// Skips the benchmark with the message of `status` unless it is ok; returns status.ok(). For the setup
/// steps that may refuse a shape (plans, library handles, a warm-up call):
///   if (!skip_unless_ok(state, planned)) return;
inline bool skip_unless_ok(benchmark::State& state, const Status& status) {
  if (!status.ok()) state.SkipWithError(status.message().c_str());
  return status.ok();
}

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
/// The spin's floor: about 20 us at the H100's 1.98 GHz. LLMK_BENCH_SPIN_CYCLES overrides it (a longer spin
/// shows whether a small kernel's time is host time).
inline long long spin_cycles() {
  static const long long cycles = [] {
    const char* e = std::getenv("LLMK_BENCH_SPIN_CYCLES");
    return e != nullptr ? std::atoll(e) : 40000LL;
  }();
  return cycles;
}
/// The spin before each sample: 3x the host time of one warm call (its enqueue: checks, plans, launches),
/// at least spin_cycles() and at most 2 ms, so that the host has queued the start event, the call and the
/// stop event before the GPU reaches the start event (the SDPA anchor sizes its sleep the same way). Cycles
/// at 2 GHz, above any Hopper clock: at a lower clock the spin only lasts longer. A call whose host time
/// passes ~0.7 ms (one that synchronizes inside) is timed with part of its host time.
inline long long spin_cycles_for(double host_seconds) {
  const double cycles = std::min(2e-3, 3.0 * host_seconds) * 2e9;
  return std::max(spin_cycles(), static_cast<long long>(cycles));
}
/// Status of a CUDA runtime call, named in the message ("CUDA error in cudaEventSynchronize: ...").
inline Status cuda_status(const char* call, cudaError_t e) {
  return e == cudaSuccess ? Status{} : Status::cuda_error(call, cudaGetErrorString(e));
}
/// Owns a start / stop event pair; `status` says when either could not be created.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  Status status;
  EventPair() : status(create(&start, &stop)) {}
  ~EventPair() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  static Status create(cudaEvent_t* a, cudaEvent_t* b) {
    LLMK_RETURN_IF_ERROR(cuda_status("cudaEventCreate", cudaEventCreate(a)));
    return cuda_status("cudaEventCreate", cudaEventCreate(b));
  }
};
#endif

/// One-pass timing, the GPU command's mode: with LLMK_BENCH_ONE_PASS_S=<seconds> set, time_iterations takes
/// all of a benchmark's samples inside one iteration of Google Benchmark's loop (until `seconds` of measured
/// time, at least kOnePassMinSamples and at most kOnePassMaxSamples calls) and reports their mean, with the
/// count as the `samples` counter. Run the binary with a tiny --benchmark_min_time (scripts/gpu_validate.sh
/// passes 1e-9) so that the framework stops after that one iteration. Why: Google Benchmark's iteration-count
/// search calls a benchmark function 3 to 5 times, each call building its data again (weight copies of up
/// to ~180 MiB filled from the host), which made the quant GEMM binary alone outlast a 9-minute GPU call;
/// one pass builds the data once. Unset or 0: the framework's own search, as any Google Benchmark.
inline double one_pass_seconds() {
  static const double seconds = [] {
    const char* e = std::getenv("LLMK_BENCH_ONE_PASS_S");
    return e != nullptr ? std::atof(e) : 0.0;
  }();
  return seconds;
}
inline constexpr long long kOnePassMinSamples = 5;
inline constexpr long long kOnePassMaxSamples = 200;  // 200 samples of a 10 us kernel: ~10 ms of wall time

/// Times `work` (a callable returning Status) per iteration, in either mode (above). `sample(work)` returns
/// the seconds of one call or nullopt with the Status' message in `error`.
template <class Sample>
void run_samples(benchmark::State& state, Sample&& sample) {
  std::string error;
  if (const double target = one_pass_seconds(); target > 0.0) {
    for (auto _ : state) {
      double total = 0.0;
      long long n = 0;
      bool failed = false;
      while (n < kOnePassMinSamples || (total < target && n < kOnePassMaxSamples)) {
        const std::optional<double> t = sample(error);
        if (!t) {
          failed = true;
          break;
        }
        total += *t;
        ++n;
      }
      if (failed) {
        state.SkipWithError(error.c_str());
        break;
      }
      state.SetIterationTime(total / static_cast<double>(n));
      state.counters["samples"] = static_cast<double>(n);
    }
    return;
  }
  for (auto _ : state) {
    const std::optional<double> t = sample(error);
    if (!t) {
      state.SkipWithError(error.c_str());
      break;
    }
    state.SetIterationTime(*t);
  }
}

template <class Work>
void time_iterations(benchmark::State& state, Work&& work) {
#if defined(LLMK_CUDA)
  // One untimed call first: module loading, library handles and lazy initialization stay out of the
  // timings (the first H100 run timed cuBLAS's first GEMM, 64.7 ms, as one whole iteration). A second
  // untimed call measures a warm call's host time, which sizes the spin (spin_cycles_for).
  if (Status s = work(); !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  if (!skip_unless_ok(state, cuda_status("cudaDeviceSynchronize (warm-up)", cudaDeviceSynchronize()))) return;
  const auto h0 = std::chrono::steady_clock::now();
  const Status warm = work();
  const double host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count();
  if (!skip_unless_ok(state, warm)) return;
  if (!skip_unless_ok(state, cuda_status("cudaDeviceSynchronize (warm-up)", cudaDeviceSynchronize()))) return;
  const long long spin = spin_cycles_for(host_s);
  const EventPair ev;
  if (!skip_unless_ok(state, ev.status)) return;
  run_samples(state, [&](std::string& error) -> std::optional<double> {
    const Status s = [&]() -> Status {
      LLMK_RETURN_IF_ERROR(launch(gpu_spin, dim3(1), dim3(1), 0, nullptr, spin));
      LLMK_RETURN_IF_ERROR(cuda_status("cudaEventRecord", cudaEventRecord(ev.start)));
      return work();
    }();
    // The stop event and its wait even after a failed call: nothing of it is left running into the next.
    const Status done = [&]() -> Status {
      LLMK_RETURN_IF_ERROR(cuda_status("cudaEventRecord", cudaEventRecord(ev.stop)));
      return cuda_status("cudaEventSynchronize", cudaEventSynchronize(ev.stop));
    }();
    float ms = 0.0f;
    const Status timed =
        !s.ok()      ? s
        : !done.ok() ? done
                     : cuda_status("cudaEventElapsedTime", cudaEventElapsedTime(&ms, ev.start, ev.stop));
    if (!timed.ok()) {
      error = timed.message();
      return std::nullopt;
    }
    return ms / 1e3;
  });
#else
  run_samples(state, [&](std::string& error) -> std::optional<double> {
    auto t0 = std::chrono::steady_clock::now();
    Status s = work();
    auto t1 = std::chrono::steady_clock::now();
    if (!s.ok()) {
      error = s.message();
      return std::nullopt;
    }
    return std::chrono::duration<double>(t1 - t0).count();
  });
#endif
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
