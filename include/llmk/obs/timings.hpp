// llmk/obs/timings.hpp: ObsTimings, where the wall-clock time of one GPTQ / SparseGPT / OBQ run went (the
// host and the GPU entries report it), and detail::seconds_since, which measures the phases.
#pragma once

#include <chrono>

namespace llmk::obs {

/// Where the wall-clock time of one GPTQ / SparseGPT / OBQ run went, in seconds (the GPU
/// paths synchronize their stream at the phase boundaries, so the split is exact there too):
///   prepare      copies, dead columns, act-order permutation, grids from the original weights
///   inverse      damping + Cholesky + inverse + upper Cholesky of H^-1 (with the retries)
///   column_loop  the in-block column loops (quantize / prune one column, update the rest of the block)
///   trailing     the lazy trailing updates W[:, i2:] -= Err U[i1:i2, i2:] (backend GEMM)
///   loss         the reported layer loss 1/2 tr((W - Q) H (W - Q)^T)
///   double t = q.timings.inverse_s + q.timings.column_loop_s + q.timings.trailing_s;
struct ObsTimings {
  double prepare_s = 0.0, inverse_s = 0.0, column_loop_s = 0.0, trailing_s = 0.0, loss_s = 0.0;
  double total() const { return prepare_s + inverse_s + column_loop_s + trailing_s + loss_s; }
};

namespace detail {
// Seconds since `start` (std::chrono::steady_clock).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace detail

}  // namespace llmk::obs
