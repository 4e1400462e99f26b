// llmk/obs/obs_gpu_layout.cuh: the workspace of OBS pruning and OBQ on the GPU (llmk/obs/obs_gpu.cuh): how
// many rows run in flight (obs_gpu_rows_in_flight and its limits), the workspace regions
// (detail::obs_gpu_layout), the bytes a number of rows in flight needs and the most rows that fit in a given
// workspace.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "llmk/core/math.cuh"

namespace llmk::obs {

/// Default budget of the per-row fp64 H^-1 copies (rows in flight * 8 cols^2 bytes).
inline constexpr std::size_t kObsGpuInFlightBudget = std::size_t{1} << 30;
/// Most rows one launch processes.
inline constexpr std::int64_t kObsGpuMaxRowsInFlight = 1024;

/// The default number of rows processed concurrently (one CTA each): min(rows, 1024, 1 GiB / (8 cols^2)),
/// at least 1.
///   std::int64_t c = llmk::obs::obs_gpu_rows_in_flight(4096, 4096);      // 8
inline std::int64_t obs_gpu_rows_in_flight(std::int64_t rows, std::int64_t cols) {
  if (rows < 1 || cols < 1) return 0;
  const double per_row = 8.0 * static_cast<double>(cols) * static_cast<double>(cols);
  const double fit = static_cast<double>(kObsGpuInFlightBudget) / per_row;
  const std::int64_t cap = std::min(rows, kObsGpuMaxRowsInFlight);
  return fit >= static_cast<double>(cap) ? cap : std::max<std::int64_t>(1, static_cast<std::int64_t>(fit));
}

namespace detail {

// Workspace regions, each 256-byte aligned (offsets from the workspace start).
struct ObsGpuLayout {
  std::int64_t ldp = 0, in_flight = 0;
  std::size_t wd = 0, hfix = 0, hinv = 0, qd = 0, hi = 0, row = 0, col = 0, values = 0, values2 = 0, he = 0,
              codes = 0, codes2 = 0, done = 0, row_sum = 0, row_dot = 0, diag = 0, flag = 0, total = 0;
};

inline ObsGpuLayout obs_gpu_layout(std::int64_t rows, std::int64_t cols, std::int64_t in_flight) {
  ObsGpuLayout l;
  rows = std::max<std::int64_t>(rows, 0);
  cols = std::max<std::int64_t>(cols, 0);
  in_flight = std::max<std::int64_t>(in_flight, 1);
  l.ldp = round_up<std::int64_t>(std::max<std::int64_t>(cols, 1), 4);
  l.in_flight = in_flight;
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t start = at;
    at += (bytes + 255) / 256 * 256;
    return start;
  };
  const std::size_t mat = static_cast<std::size_t>(l.ldp) * sizeof(float);
  const std::size_t vec = static_cast<std::size_t>(in_flight) * static_cast<std::size_t>(cols);
  l.wd = take(static_cast<std::size_t>(rows) * mat);    // W, dead columns zeroed; then E = W - W'
  l.hfix = take(static_cast<std::size_t>(cols) * mat);  // (H + H^T) / 2, dead diagonals 1
  l.hinv = take(static_cast<std::size_t>(cols) * mat);  // the damped H^-1 (fp32)
  l.qd = take(static_cast<std::size_t>(rows) * mat);    // W' (dense); then E H
  l.hi = take(vec * static_cast<std::size_t>(cols) * sizeof(double));  // per-row H^-1 copies
  l.row = take(vec * sizeof(double));
  l.col = take(vec * sizeof(double));
  l.values = take(vec * sizeof(double));
  l.values2 = take(vec * sizeof(double));
  l.he = take(vec * sizeof(double));
  l.codes = take(vec * sizeof(int));
  l.codes2 = take(vec * sizeof(int));
  l.done = take(vec);
  l.row_sum = take(static_cast<std::size_t>(rows) * sizeof(double));
  l.row_dot = take(static_cast<std::size_t>(rows) * sizeof(double));
  l.diag = take(static_cast<std::size_t>(cols) * sizeof(float));
  l.flag = take(sizeof(unsigned long long));
  l.total = at;
  return l;
}

// The workspace bytes for `in_flight` rows in flight (0: the default).
inline std::size_t obs_gpu_workspace_bytes(std::int64_t rows, std::int64_t cols, std::int64_t in_flight) {
  if (rows < 1 || cols < 1 || in_flight < 0) return 0;
  const std::int64_t def = obs_gpu_rows_in_flight(rows, cols);
  return obs_gpu_layout(rows, cols, in_flight == 0 ? def : std::min(in_flight, def)).total;
}

// The most rows in flight (<= the default) whose layout fits in `bytes`; 0 when not even one fits.
inline std::int64_t obs_gpu_fit_rows(std::int64_t rows, std::int64_t cols, std::size_t bytes) {
  std::int64_t lo = 0, hi = obs_gpu_rows_in_flight(rows, cols);
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (obs_gpu_layout(rows, cols, mid).total <= bytes)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace detail

}  // namespace llmk::obs
