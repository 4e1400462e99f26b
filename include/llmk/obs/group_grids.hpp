// llmk/obs/group_grids.hpp: the quantization grids of the host algorithms (OBQ, GPTQ, SparseGPT's joint
// quantization): the rules GroupGrid and DeadColumnGrid and their checks, the checks of the grid choices
// (bits, group size, the MSE clip search's options), one group's parameters (detail::group_params), and the
// dynamic group grids GPTQ's and SparseGPT's column loops share (block_start_group_values,
// current_group_values, DynamicGroupGrids).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "llmk/core/status.cuh"
#include "llmk/obs/linalg.hpp"
#include "llmk/obs/quantizer.hpp"
#include "llmk/quant/calibration.hpp"

namespace llmk::obs {

/// Where GPTQ's (and SparseGPT's joint quantization's) dynamic group grids come from when a group begins
/// inside a lazy-batch block (group size not a multiple of the block size, e.g. 32 or 64 with block 128):
enum class GroupGrid {
  kBlockStart,  ///< W as the block began (the reference code: find_params(W[:, j:j+G]) reads W, not the
                ///< block's working copy, so the block's earlier columns' errors are not in the grid)
  kCurrent,     ///< the current, compensated weights (the paper's algorithm; 0.92-1.06x the reference's loss
                ///< in an independent emulation, so not always better: docs/obs.md)
};

/// Which weights a per-channel grid (GPTQ's and SparseGPT's joint quantization, group_size 0) sees in a dead
/// column (H_ii == 0, whose weights are zeroed: its input is always 0):
enum class DeadColumnGrid {
  kZeroed,    ///< default: the zeroed weights (a dead column's weight cannot widen its row's grid)
  kOriginal,  ///< the original weights, as the reference (find_params(W) runs before W[:, dead] = 0)
};

namespace detail {

inline Status check_dead_column_grid(DeadColumnGrid g) {
  if (g != DeadColumnGrid::kZeroed && g != DeadColumnGrid::kOriginal)
    return Status::invalid_argument("dead_column_grid",
                                    "must be DeadColumnGrid::kZeroed or DeadColumnGrid::kOriginal");
  return {};
}

inline Status check_group_grid(GroupGrid g) {
  if (g != GroupGrid::kBlockStart && g != GroupGrid::kCurrent)
    return Status::invalid_argument("group_grid", "must be GroupGrid::kBlockStart or GroupGrid::kCurrent");
  return {};
}

// GPTQ's MSE clip search options (llmk::quant::mse_clip_search), checked only when the search is on.
inline Status check_mse_options(bool mse_clip, int grid, double maxshrink, double norm) {
  if (!mse_clip) return {};
  if (grid < 1) return Status::invalid_argument("mse_grid", str_cat("must be >= 1, got ", grid));
  if (!(maxshrink > 0.0 && maxshrink <= 1.0))
    return Status::invalid_argument("mse_maxshrink", str_cat("must be in (0, 1], got ", maxshrink));
  // A huge norm overflows every candidate's error to inf (the search could not choose): keep it sane.
  if (!(norm > 0.0 && norm <= 64.0))
    return Status::invalid_argument("mse_norm", str_cat("must be in (0, 64], got ", norm));
  return {};
}

inline Status validate_quant_choice(int bits, std::int64_t group_size, std::int64_t cols) {
  LLMK_RETURN_IF_ERROR(check_bits(bits));
  if (group_size < 0 || (group_size > 0 && cols % group_size != 0))
    return Status::invalid_argument(
        "group_size",
        str_cat("must be 0 (per-channel) or divide cols (cols=", cols, ", group_size=", group_size, ")"));
  return {};
}

// Quantization parameters of one group of values on the symmetric grid `sgrid` (grid_params: min/max, or
// GPTQ's MSE clip search over its candidates).
template <class Q>
quant::QuantParams group_params(const float* x, std::int64_t count, SymmetricGrid sgrid, bool mse, int grid,
                                double maxshrink, double norm) {
  const auto params_of = [sgrid](float lo, float hi) { return grid_params<Q>(lo, hi, sgrid); };
  if (mse)
    return quant::mse_clip_search<Q>(std::span<const float>(x, static_cast<std::size_t>(count)), grid,
                                     maxshrink, norm, params_of)
        .params;
  quant::MinMaxCalibrator mm;
  mm.observe(x, static_cast<std::size_t>(count));
  return params_of(mm.min(), mm.max());
}

// GPTQ's and SparseGPT's dynamic group grids, GroupGrid::kBlockStart (the reference code's rule, the
// default): the grid of the group [j, j + G) is set when the column loop of block [i1, i2) reaches column j,
// from W as it stood when the block began: the block's columns from `start` (W[:, i1:i2] copied at the block
// start, [n, i2 - i1]), those past the block from wp, which this block's errors have not reached yet (the
// reference's find_params(W[:, j:j+G]) reads W, not the block's working copy W1). Calls set(r, values).
template <class Set>
void block_start_group_values(const std::vector<float>& start, const std::vector<float>& wp, std::int64_t n,
                              std::int64_t d, std::int64_t j, std::int64_t G, std::int64_t i1,
                              std::int64_t i2, std::vector<float>& group_vals, Set set) {
  const std::int64_t count = i2 - i1, inside = std::min(G, i2 - j);
  group_vals.resize(static_cast<std::size_t>(G));
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t t = 0; t < inside; ++t)
      group_vals[static_cast<std::size_t>(t)] = start[static_cast<std::size_t>(r * count + j - i1 + t)];
    for (std::int64_t t = inside; t < G; ++t)
      group_vals[static_cast<std::size_t>(t)] = wp[static_cast<std::size_t>(r * d + j + t)];
    set(r, group_vals.data());
  }
}

// The W[:, i1:i2] copy block_start_group_values reads, taken at the start of block [i1, i2).
inline void copy_block_start(const std::vector<float>& wp, std::int64_t n, std::int64_t d, std::int64_t i1,
                             std::int64_t i2, std::vector<float>& start) {
  const std::int64_t count = i2 - i1;
  start.resize(static_cast<std::size_t>(n * count));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t t = 0; t < count; ++t)
      start[static_cast<std::size_t>(r * count + t)] = wp[static_cast<std::size_t>(r * d + i1 + t)];
}

// GroupGrid::kCurrent: the grid of the group [j, j + G) is set when the column loop of
// block [i1, i2) reaches column j, from the current weights. The group's columns past the block have not
// received this block's updates yet: they are added to a copy, tmp = W[:, i2:j+G] - Err[:, :j-i1] U[i1:j,
// i2:j+G] (wp [n, d], err [n, bs], u [d, d], all row-major). Calls set(r, values) with the G current values
// of row r.
template <class Set>
Status current_group_values(const std::vector<float>& wp, std::int64_t n, std::int64_t d, std::int64_t j,
                            std::int64_t G, std::int64_t i1, std::int64_t i2, const std::vector<float>& err,
                            std::int64_t bs, const std::vector<float>& u, LinalgBackend& la,
                            std::vector<float>& tmp, std::vector<float>& group_vals, Set set) {
  const std::int64_t tail = std::max<std::int64_t>(0, j + G - i2);
  if (tail > 0) {
    tmp.assign(static_cast<std::size_t>(n * tail), 0.0f);
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t t = 0; t < tail; ++t)
        tmp[static_cast<std::size_t>(r * tail + t)] = wp[static_cast<std::size_t>(r * d + i2 + t)];
    if (j > i1)
      LLMK_RETURN_IF_ERROR(la.gemm(Op::kNone, Op::kNone, n, tail, j - i1, -1.0f, err.data(), bs,
                                   u.data() + i1 * d + i2, d, 1.0f, tmp.data(), tail));
  }
  group_vals.resize(static_cast<std::size_t>(G));
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t inside = G - tail;
    for (std::int64_t t = 0; t < inside; ++t)
      group_vals[static_cast<std::size_t>(t)] = wp[static_cast<std::size_t>(r * d + j + t)];
    for (std::int64_t t = 0; t < tail; ++t)
      group_vals[static_cast<std::size_t>(inside + t)] = tmp[static_cast<std::size_t>(r * tail + t)];
    set(r, group_vals.data());
  }
  return {};
}

// The dynamic group grids of GPTQ's and SparseGPT's column loops under either GroupGrid rule: begin_block at
// each block start (kBlockStart keeps W[:, i1:i2] as it is then), at_group when column j begins a group.
class DynamicGroupGrids {
 public:
  explicit DynamicGroupGrids(GroupGrid rule) : rule_(rule) {}
  void begin_block(const std::vector<float>& wp, std::int64_t n, std::int64_t d, std::int64_t i1,
                   std::int64_t i2) {
    if (rule_ == GroupGrid::kBlockStart) copy_block_start(wp, n, d, i1, i2, block_start_);
  }
  // Calls set(r, values) with the G values row r's grid of group [j, j + G) is computed from.
  template <class Set>
  Status at_group(const std::vector<float>& wp, std::int64_t n, std::int64_t d, std::int64_t j,
                  std::int64_t G, std::int64_t i1, std::int64_t i2, const std::vector<float>& err,
                  std::int64_t bs, const std::vector<float>& u, LinalgBackend& la, Set set) {
    if (rule_ == GroupGrid::kBlockStart) {
      block_start_group_values(block_start_, wp, n, d, j, G, i1, i2, values_, set);
      return {};
    }
    return current_group_values(wp, n, d, j, G, i1, i2, err, bs, u, la, tmp_, values_, set);
  }

 private:
  GroupGrid rule_;
  std::vector<float> block_start_, tmp_, values_;
};

}  // namespace detail

}  // namespace llmk::obs
