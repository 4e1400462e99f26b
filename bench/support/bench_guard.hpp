// bench/support/bench_guard.hpp: an exception out of a benchmark errors its row, not the whole binary.
//
// Google Benchmark does not catch exceptions: one thrown by a benchmark's setup (a DeviceBuffer the GPU
// cannot allocate, a copy that fails: llmk::Error) reached std::terminate and lost every later row of the
// binary, the anchors' included. Every benchmark function is a function-try-block ending in LLMK_BENCH_CATCH,
// which turns the exception into SkipWithError: the row shows `error_occurred` with the message, the binary
// goes on, and the GPU command's results check (bench/model/checks.py) fails the run on that row.
//
//   template <class T>
//   void BM_Foo(benchmark::State& state) try {
//     llmk::DeviceBuffer<T> data(n);  // may throw
//     ...
//   }
//   LLMK_BENCH_CATCH(state)
//
// tests/perf/test_perf_tools.py checks that every BM_ function under bench/ has it.
#pragma once

#include <benchmark/benchmark.h>

#include <exception>
#include <string>

namespace llmk::bench {

/// Errors the current row with "exception: <what>" (SkipWithError stops a running timer and tolerates a
/// benchmark loop left part-way).
inline void error_row(benchmark::State& state, const char* what) {
  const std::string message = std::string("exception: ") + (what != nullptr ? what : "(no message)");
  state.SkipWithError(message.c_str());
}

}  // namespace llmk::bench

/// The handlers of a benchmark function's try block (see the file comment).
#define LLMK_BENCH_CATCH(state)                                                      \
  catch (const std::exception& llmk_bench_exception) {                               \
    ::llmk::bench::error_row(state, llmk_bench_exception.what());                    \
  }                                                                                  \
  catch (...) {                                                                      \
    ::llmk::bench::error_row(state, "an exception not derived from std::exception"); \
  }
