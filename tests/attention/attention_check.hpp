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
/// fails.
template <class T>
void check_attention(const reference::AttentionProblem& p, const std::vector<T>& q, const std::vector<T>& k,
                     const std::vector<T>& v, const std::vector<T>& got, const std::vector<float>* got_lse) {
  const std::int64_t n = p.q_elements();
  std::vector<double> ref(static_cast<std::size_t>(n)),
      ref_lse(static_cast<std::size_t>(p.total_q() * p.num_heads));
  std::vector<float> naive(static_cast<std::size_t>(n));
  reference::attention_fp64(p, q.data(), k.data(), v.data(), ref.data(), ref_lse.data());
  reference::attention_naive(p, q.data(), k.data(), v.data(), naive.data());
  double err = 0.0, naive_err = 0.0;
  std::int64_t worst = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    const double e = std::fabs(static_cast<double>(got[i].to_float()) - ref[i]);
    if (!(e <= err)) {  // NaN sticks
      err = e;
      worst = i;
      if (std::isnan(e)) break;
    }
    naive_err = std::max(naive_err, std::fabs(static_cast<double>(naive[i]) - ref[i]));
  }
  const double tol = 2.0 * naive_err + 1e-3;
  INFO("max error " << err << " at element " << worst << " (token "
                    << (worst < 0 ? -1 : worst / (p.num_heads * p.head_dim)) << ", head "
                    << (worst < 0 ? -1 : (worst / p.head_dim) % p.num_heads) << "), naive error " << naive_err
                    << ", tolerance " << tol);
  CHECK(err <= tol);
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
