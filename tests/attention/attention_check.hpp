// Shared pieces of the attention tests: random inputs, the FlashAttention tolerance rule, LSE comparison.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "llmk/core/numeric.cuh"
#include "llmk/reference/attention.hpp"

namespace llmk::test {

/// Uniform values in [-magnitude, magnitude], never zero.
template <class T>
std::vector<T> random_tensor(std::int64_t count, float magnitude, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-magnitude, magnitude);
  std::vector<T> v(static_cast<std::size_t>(count));
  for (auto& x : v) {
    float f = dist(rng);
    if (T(f).to_float() == 0.0f) f = magnitude * 0.5f;
    x = T(f);
  }
  return v;
}

/// The absolute floor of the rule for one output row (docs/attention.md, "Testing"): one unit in the last
/// place of T at the row's largest reference value (the kernel rounds its output to T, the naive baseline
/// keeps fp32), at most 1e-3, plus 1e-6. Before 2026-11-29 the floor was 1e-3 for every row, more than a
/// dropped key moves a row of a long history (|v_j - out| / kv_len: ~3e-4 at 2000 keys).
template <class T>
double output_floor(double row_ref_max) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, "16-bit outputs only");
  constexpr int kMantissaBits = std::is_same_v<T, half> ? 10 : 7;
  return std::min(1e-3, std::ldexp(row_ref_max, -kMantissaBits)) + 1e-6;
}

/// How close a row came to its bound (error / bound), printed per call when LLMK_TEST_TOLERANCE_STATS is
/// set: what the floor above was calibrated with.
inline bool tolerance_stats() {
  static const bool on = std::getenv("LLMK_TEST_TOLERANCE_STATS") != nullptr;
  return on;
}

/// The LSE bound: 5e-5 * max(1, |ref|). The kernels' LSEs are fp32 sums of 2^x over the reference's inputs
/// (the 8-bit-cache decode too: its codes convert to T exactly and the scales apply in fp32, so it attends
/// over the exact code * scale the reference reads): the simulator's are within 3e-7 relative, the GPU's
/// approximate exp2 / log2 add ~2^-22. A key missing from the sum moves the LSE by p_j ~ 1 / kv_len.
inline double lse_tolerance(double ref) {
  return 5e-5 * std::max(1.0, std::fabs(ref));
}

/// The FlashAttention rule, per row: max |out - ref| <= 2 * max |naive - ref| + output_floor<T>(max |ref|),
/// where naive is the same-precision framework computation; every LSE within lse_tolerance (or both -inf).
/// `got` may contain poison: NaN fails. k_exact / v_exact (optional): the exact K and V when k / v are their
/// roundings to T (an 8-bit cache's code * scale): the reference then attends over the exact values, the
/// naive baseline over k / v (what a framework that dequantizes to T computes).
template <class T>
void check_attention(const reference::AttentionProblem& p, const std::vector<T>& q, const std::vector<T>& k,
                     const std::vector<T>& v, const std::vector<T>& got, const std::vector<float>* got_lse,
                     const std::vector<double>* k_exact = nullptr,
                     const std::vector<double>* v_exact = nullptr) {
  const std::int64_t n = p.q_elements();
  std::vector<double> ref(static_cast<std::size_t>(n)),
      ref_lse(static_cast<std::size_t>(p.total_q() * p.num_heads));
  std::vector<float> naive(static_cast<std::size_t>(n));
  if (k_exact != nullptr && v_exact != nullptr) {
    std::vector<double> qd(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) qd[i] = static_cast<double>(q[i].to_float());
    reference::attention_fp64(p, qd.data(), k_exact->data(), v_exact->data(), ref.data(), ref_lse.data());
  } else {
    reference::attention_fp64(p, q.data(), k.data(), v.data(), ref.data(), ref_lse.data());
  }
  reference::attention_naive(p, q.data(), k.data(), v.data(), naive.data());
  // Checked per (token, head) row, so one bad row cannot hide behind another row's large naive error; the
  // global figures are reported.
  double err = 0.0, naive_err = 0.0, used = 0.0;
  std::int64_t worst = -1, bad_rows = 0;
  const int d = p.head_dim;
  for (std::int64_t row = 0; row < n / d; ++row) {
    double row_err = 0.0, row_naive = 0.0, row_max = 0.0;
    for (std::int64_t i = row * d; i < (row + 1) * d; ++i) {
      const double e = std::fabs(static_cast<double>(got[i].to_float()) - ref[i]);
      row_err = std::isnan(e) ? e : std::max(row_err, e);
      if (std::isnan(row_err)) break;
      row_naive = std::max(row_naive, std::fabs(static_cast<double>(naive[i]) - ref[i]));
      row_max = std::max(row_max, std::fabs(ref[i]));
    }
    naive_err = std::max(naive_err, row_naive);
    if (!(row_err <= err)) {
      err = row_err;
      worst = row;
    }
    const double bound = 2.0 * row_naive + output_floor<T>(row_max);
    used = std::isnan(row_err) ? row_err : std::max(used, row_err / bound);
    if (!(row_err <= bound) && bad_rows++ < 3)
      MESSAGE("row " << row << " (token " << row / p.num_heads << ", head " << row % p.num_heads
                     << "): error " << row_err << ", naive error " << row_naive << ", bound " << bound);
  }
  INFO("max error " << err << " in row " << worst << ", max naive error " << naive_err);
  CHECK(bad_rows == 0);
  double lse_used = 0.0;
  if (got_lse != nullptr) {
    int bad = 0;
    for (std::size_t i = 0; i < ref_lse.size(); ++i) {
      const double g = (*got_lse)[i], r = ref_lse[i];
      const double tol = lse_tolerance(r);
      const bool ok = std::isinf(r) ? (g == r) : std::fabs(g - r) <= tol;
      if (!std::isinf(r)) lse_used = std::isnan(g) ? g : std::max(lse_used, std::fabs(g - r) / tol);
      if (!ok && bad++ < 5) MESSAGE("lse[" << i << "] = " << g << ", want " << r << " +- " << tol);
    }
    CHECK(bad == 0);
  }
  if (tolerance_stats())
    std::fprintf(stderr, "tolerance use: output %.3f lse %.3f (rows %lld, head dim %d, exact K/V given %d)\n",
                 used, lse_used, static_cast<long long>(n / d), d, k_exact != nullptr ? 1 : 0);
}

/// Special-value checks (docs/attention.md, "Special values"): `got` (and `got_lse`, optional) against a
/// reference computed from the same NaN-holding inputs, with the elements that must be NaN named:
/// nan_out(row, col) for element col of output row `row` (row = token * num_heads + head), nan_lse(row) for
/// its LSE. An element named must be NaN; every other one must be finite and within tol(row, i) (element
/// i of `ref`) of the reference, and the reference itself finite there (else the expectation is wrong); an
/// LSE not named must be within 1e-3 of the reference, or equal to it when it is -inf. Returns the number
/// of output rows holding a NaN, which a test checks is what it planted.
template <class T, class NanOut, class NanLse, class Tol>
std::int64_t check_nan_pattern(std::int64_t rows, int d, const std::vector<double>& ref,
                               const std::vector<double>& ref_lse, const std::vector<T>& got,
                               const std::vector<float>* got_lse, NanOut&& nan_out, NanLse&& nan_lse,
                               Tol&& tol) {
  std::int64_t nan_rows = 0;
  int missing_nan = 0, bad = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    bool row_has_nan = false;
    for (int col = 0; col < d; ++col) {
      const std::int64_t i = row * d + col;
      const float g = got[static_cast<std::size_t>(i)].to_float();
      row_has_nan = row_has_nan || std::isnan(g);
      if (nan_out(row, col)) {
        if (!std::isnan(g) && missing_nan++ < 5)
          MESSAGE("row " << row << " col " << col << ": got " << g << ", want NaN");
        continue;
      }
      const double r = ref[static_cast<std::size_t>(i)];
      const bool ok = std::isfinite(g) && std::isfinite(r) && std::fabs(g - r) <= tol(row, i);
      if (!ok && bad++ < 5)
        MESSAGE("row " << row << " col " << col << ": got " << g << ", want finite " << r << " +- "
                       << tol(row, i));
    }
    nan_rows += row_has_nan;
  }
  CHECK(missing_nan == 0);
  CHECK(bad == 0);
  if (got_lse != nullptr) {
    int bad_lse = 0;
    for (std::int64_t row = 0; row < rows; ++row) {
      const double g = (*got_lse)[static_cast<std::size_t>(row)], r = ref_lse[static_cast<std::size_t>(row)];
      const bool ok = nan_lse(row) ? std::isnan(g)
                      : r == -std::numeric_limits<double>::infinity()
                          ? g == r
                          : std::isfinite(r) && std::fabs(g - r) <= 1e-3;
      if (!ok && bad_lse++ < 5) {
        if (nan_lse(row))
          MESSAGE("lse[" << row << "] = " << g << ", want NaN");
        else
          MESSAGE("lse[" << row << "] = " << g << ", want " << r);
      }
    }
    CHECK(bad_lse == 0);
  }
  return nan_rows;
}

/// check_nan_pattern() for 16-bit inputs against attention_fp64, with the FlashAttention rule per row: the
/// naive same-precision baseline's error is taken over the row's elements not named NaN (where the naive
/// result and the reference are finite).
template <class T, class NanOut, class NanLse>
std::int64_t check_special_values(const reference::AttentionProblem& p, const std::vector<T>& q,
                                  const std::vector<T>& k, const std::vector<T>& v, const std::vector<T>& got,
                                  const std::vector<float>* got_lse, NanOut&& nan_out, NanLse&& nan_lse) {
  const std::int64_t n = p.q_elements(), rows = p.total_q() * p.num_heads;
  const int d = p.head_dim;
  std::vector<double> ref(static_cast<std::size_t>(n)), ref_lse(static_cast<std::size_t>(rows));
  std::vector<float> naive(static_cast<std::size_t>(n));
  reference::attention_fp64(p, q.data(), k.data(), v.data(), ref.data(), ref_lse.data());
  reference::attention_naive(p, q.data(), k.data(), v.data(), naive.data());
  std::vector<double> bound(static_cast<std::size_t>(rows), 0.0);  // 2 * naive error + output_floor
  for (std::int64_t row = 0; row < rows; ++row) {
    double row_naive = 0.0, row_max = 0.0;
    for (int col = 0; col < d; ++col) {
      const std::size_t i = static_cast<std::size_t>(row * d + col);
      const double e = std::fabs(static_cast<double>(naive[i]) - ref[i]);
      if (!nan_out(row, col) && std::isfinite(e)) {
        row_naive = std::max(row_naive, e);
        row_max = std::max(row_max, std::fabs(ref[i]));
      }
    }
    bound[static_cast<std::size_t>(row)] = 2.0 * row_naive + output_floor<T>(row_max);
  }
  return check_nan_pattern(
      rows, d, ref, ref_lse, got, got_lse, nan_out, nan_lse,
      [&](std::int64_t row, std::int64_t) { return bound[static_cast<std::size_t>(row)]; });
}

/// The keys [first, end) of one sequence whose V rows a prefill block loads, for the block holding query
/// `token`'s rows: blocks own rows_per_block packed (token, head) rows (row = token * group + head in group)
/// and load the Bc-key tiles from the one holding the block's first visible key; the mma.sync kernel copies
/// keys up to the block's last visible key and zero-fills the rest of the tile (whole_tiles = false), the
/// Hopper kernel loads whole tiles by TMA and zeroes only the keys past the sequence's end (whole_tiles =
/// true). A NaN in V at a key of this range reaches every row of the block (P is 0 where a row does not see
/// the key, and 0 * NaN = NaN). The mask is written out here (bottom-right aligned, docs/attention.md), not
/// taken from the kernels' Mask. {0, 0} when the block sees no key (it loads none).
struct PrefillLoads {
  int rows_per_block = 0, bc = 0;
  bool whole_tiles = false;

  std::pair<int, int> keys(int q_len, int kv_len, const attention::AttentionOptions& o, int group, int token,
                           int head_in_group) const {
    const long long right =
        o.causal ? (o.window_right < 0 ? 0 : std::min(o.window_right, 0)) : o.window_right;
    auto first_key = [&](long long i) {
      const long long pos = i + kv_len - q_len;
      return o.window_left < 0 ? 0LL : std::max(0LL, pos - o.window_left);
    };
    auto end_key = [&](long long i) {
      const long long pos = i + kv_len - q_len;
      return right < 0 ? static_cast<long long>(kv_len) : std::clamp(pos + right + 1, 0LL, 1LL * kv_len);
    };
    const long long row = 1LL * token * group + head_in_group, row0 = row / rows_per_block * rows_per_block;
    const long long last_row = std::min(row0 + rows_per_block, 1LL * q_len * group) - 1;
    const long long first = first_key(row0 / group), end = end_key(last_row / group);
    if (first >= end) return {0, 0};
    const long long begin = first / bc * bc;
    const long long stop = whole_tiles ? std::min((end + bc - 1) / bc * bc, 1LL * kv_len) : end;
    return {static_cast<int>(begin), static_cast<int>(stop)};
  }
};

}  // namespace llmk::test
