// tests/perf/bench_guard.cpp: LLMK_BENCH_CATCH (bench/support/bench_guard.hpp) turns an exception out of a
// benchmark into an errored row, and the benchmarks registered after it still run.
#include <benchmark/benchmark.h>
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "bench_guard.hpp"
#include "llmk/core/status.cuh"

namespace {

bool g_fail = true;  // not a constant: the throws below are reachable as far as the compiler can tell
int g_after_iterations = 0;

// What a DeviceBuffer the GPU cannot allocate throws, before the benchmark loop.
void BM_ThrowsInSetup(benchmark::State& state) try {
  if (g_fail) throw llmk::Error(llmk::Status::invalid_argument("operands", "out of device memory"));
  for (auto _ : state) {
  }
}
LLMK_BENCH_CATCH(state)

// An exception inside the timed loop, with the timer running.
void BM_ThrowsInLoop(benchmark::State& state) try {
  for (auto _ : state) {
    if (g_fail) throw std::runtime_error("copy failed");
  }
}
LLMK_BENCH_CATCH(state)

void BM_ThrowsNonStd(benchmark::State& state) try {
  if (g_fail) throw 7;
  for (auto _ : state) {
  }
}
LLMK_BENCH_CATCH(state)

void BM_After(benchmark::State& state) try {
  for (auto _ : state) ++g_after_iterations;
}
LLMK_BENCH_CATCH(state)

struct Collect : benchmark::BenchmarkReporter {
  std::vector<Run> runs;
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& reported) override {
    runs.insert(runs.end(), reported.begin(), reported.end());
  }
};

}  // namespace

TEST_CASE("bench_guard: an exception errors its row and the binary goes on") {
  benchmark::ClearRegisteredBenchmarks();
  benchmark::RegisterBenchmark("BM_ThrowsInSetup", BM_ThrowsInSetup)->Iterations(3);
  benchmark::RegisterBenchmark("BM_ThrowsInLoop", BM_ThrowsInLoop)->Iterations(3);
  benchmark::RegisterBenchmark("BM_ThrowsNonStd", BM_ThrowsNonStd)->Iterations(3);
  benchmark::RegisterBenchmark("BM_After", BM_After)->Iterations(3);
  Collect reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();

  REQUIRE(reporter.runs.size() == 4);
  const auto& setup = reporter.runs[0];
  CHECK(setup.benchmark_name() == "BM_ThrowsInSetup/iterations:3");
  CHECK(setup.error_occurred);
  CHECK(setup.error_message.find("exception: ") == 0);
  CHECK(setup.error_message.find("out of device memory") != std::string::npos);
  CHECK(setup.error_message.find("operands") != std::string::npos);

  const auto& loop = reporter.runs[1];
  CHECK(loop.error_occurred);
  CHECK(loop.error_message == "exception: copy failed");

  const auto& non_std = reporter.runs[2];
  CHECK(non_std.error_occurred);
  CHECK(non_std.error_message == "exception: an exception not derived from std::exception");

  const auto& after = reporter.runs[3];
  CHECK(after.benchmark_name() == "BM_After/iterations:3");
  CHECK_FALSE(after.error_occurred);
  CHECK(after.iterations == 3);
  CHECK(g_after_iterations == 3);
}
