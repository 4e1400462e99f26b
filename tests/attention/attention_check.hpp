// Shared pieces of the attention tests: random inputs, the FlashAttention tolerance rule, LSE comparison.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
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

/// The FlashAttention rule: max |out - ref| <= 2 * max |naive - ref| + 1e-3, where naive is the
/// same-precision framework computation; every LSE within 1e-3 (or both -inf). `got` may contain poison: NaN
/// fails. k_exact / v_exact (optional): the exact K and V when k / v are their roundings to T (an 8-bit
/// cache's code * scale): the reference then attends over the exact values, the naive baseline over k / v
/// (what a framework that dequantizes to T computes).
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
  double err = 0.0, naive_err = 0.0;
  std::int64_t worst = -1, bad_rows = 0;
  const int d = p.head_dim;
  for (std::int64_t row = 0; row < n / d; ++row) {
    double row_err = 0.0, row_naive = 0.0;
    for (std::int64_t i = row * d; i < (row + 1) * d; ++i) {
      const double e = std::fabs(static_cast<double>(got[i].to_float()) - ref[i]);
      row_err = std::isnan(e) ? e : std::max(row_err, e);
      if (std::isnan(row_err)) break;
      row_naive = std::max(row_naive, std::fabs(static_cast<double>(naive[i]) - ref[i]));
    }
    naive_err = std::max(naive_err, row_naive);
    if (!(row_err <= err)) {
      err = row_err;
      worst = row;
    }
    if (!(row_err <= 2.0 * row_naive + 1e-3) && bad_rows++ < 3)
      MESSAGE("row " << row << " (token " << row / p.num_heads << ", head " << row % p.num_heads
                     << "): error " << row_err << ", naive error " << row_naive);
  }
  INFO("max error " << err << " in row " << worst << ", max naive error " << naive_err);
  CHECK(bad_rows == 0);
  if (got_lse != nullptr) {
    int bad = 0;
    for (std::size_t i = 0; i < ref_lse.size(); ++i) {
      const double g = (*got_lse)[i], r = ref_lse[i];
      const bool ok = std::isinf(r) ? (g == r) : std::fabs(g - r) <= 1e-3;
      if (!ok && bad++ < 5) MESSAGE("lse[" << i << "] = " << g << ", want " << r);
    }
    CHECK(bad == 0);
  }
}

}  // namespace llmk::test
