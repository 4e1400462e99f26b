// Tests of the SmoothQuant host helpers (llmk/quant/smoothquant.hpp): the formula on a hand example, alpha 0
// and 1, zero columns and clamps, the fp64 equivalence of the smoothed layer, and argument validation.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "llmk/quant/smoothquant.hpp"

using namespace llmk::quant;

namespace {

void expect_invalid(const llmk::Status& s, const char* needle) {
  CHECK_FALSE(s.ok());
  CHECK(s.code() == llmk::Status::Code::kInvalidArgument);
  CHECK_MESSAGE(s.message().find(needle) != std::string::npos, s.message());
}

std::vector<float> random_vector(std::size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = rng() % 2 ? d(rng) : -d(rng);
  return v;
}

}  // namespace

TEST_CASE("SmoothQuant scales on a hand example (two weights fed by the same input, alpha 0.5)") {
  const std::int64_t k = 4;
  // W1 [2, 4] and W2 [1, 4] (row stride 5: one padding column that must not be read).
  const float w1[] = {1.0f,  -4.0f, 0.25f,   0.0f, 99.0f,  //
                      -0.5f, 2.0f,  -0.125f, 0.0f, 99.0f};
  const float w2[] = {0.5f, 1.0f, 0.0f, 0.0f, 99.0f};
  const WeightView<const float> ws[] = {{w1, 2, k, 5}, {w2, 1, k, 5}};
  float w_amax[4];
  REQUIRE(weight_column_amax(std::span<const WeightView<const float>>(ws), k, w_amax).ok());
  CHECK(w_amax[0] == 1.0f);
  CHECK(w_amax[1] == 4.0f);
  CHECK(w_amax[2] == 0.25f);
  CHECK(w_amax[3] == 0.0f);
  const float act[] = {4.0f, 1.0f, 9.0f, 3.0f};
  float s[4];
  REQUIRE(smoothing_factors(act, w_amax, k, 0.5f, s).ok());
  CHECK(s[0] == 2.0f);  // sqrt(4) / sqrt(1)
  CHECK(s[1] == 0.5f);  // sqrt(1) / sqrt(4)
  CHECK(s[2] == 6.0f);  // sqrt(9) / sqrt(0.25)
  CHECK(s[3] == 1.0f);  // zero weight column
  // After smoothing, max|X_j| / s_j and max|W_j| * s_j are both sqrt(max|X_j| max|W_j|) (alpha 0.5).
  for (int j = 0; j < 3; ++j) CHECK(act[j] / s[j] == doctest::Approx(w_amax[j] * s[j]));
}

TEST_CASE("SmoothQuant alpha 0 and 1, zero columns and the clamps") {
  const float act[] = {8.0f, 0.5f, 0.0f, 2.0f, 1e-12f, 3.0f};
  const float wam[] = {2.0f, 0.25f, 5.0f, 0.0f, 100.0f, 1e-7f};
  float s[6];
  REQUIRE(smoothing_factors(act, wam, 6, 1.0f, s).ok());  // s = max|X_j|
  CHECK(s[0] == 8.0f);
  CHECK(s[1] == 0.5f);
  CHECK(s[2] == 1.0f);                      // zero activation column
  CHECK(s[3] == 1.0f);                      // zero weight column
  CHECK(s[4] == static_cast<float>(1e-5));  // 1e-12 clamped up to 1e-5
  CHECK(s[5] == 3.0f);
  REQUIRE(smoothing_factors(act, wam, 6, 0.0f, s).ok());  // s = 1 / max|W_j|
  CHECK(s[0] == 0.5f);
  CHECK(s[1] == 4.0f);
  CHECK(s[2] == 1.0f);
  CHECK(s[3] == 1.0f);
  CHECK(s[4] == 0.01f);
  CHECK(s[5] == static_cast<float>(1.0 / 1e-5));  // weight absmax 1e-7 clamped up to 1e-5
  REQUIRE(smoothing_factors(act, wam, 6, 0.5f, s).ok());
  CHECK(s[4] == static_cast<float>(std::max(std::sqrt(1e-12) / std::sqrt(100.0), 1e-5)));
}

TEST_CASE("smoothquant_apply keeps X W^T (fp64) and balances the column ranges") {
  std::mt19937 rng(4);
  const std::int64_t m = 9, k = 40, n1 = 7, n2 = 5;
  // A LayerNorm output X = xhat * gamma + beta with a few outlier channels (large gamma), as in LLMs.
  std::vector<float> xhat = random_vector(static_cast<std::size_t>(m * k), 0.1f, 2.0f, rng);
  std::vector<float> gamma = random_vector(static_cast<std::size_t>(k), 0.5f, 1.5f, rng);
  std::vector<float> beta = random_vector(static_cast<std::size_t>(k), 0.0f, 0.2f, rng);
  gamma[3] = 60.0f;
  gamma[17] = -45.0f;
  auto norm_out = [&](const std::vector<float>& g, const std::vector<float>& b) {
    std::vector<double> x(static_cast<std::size_t>(m * k));
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t j = 0; j < k; ++j)
        x[r * k + j] = static_cast<double>(static_cast<float>(xhat[r * k + j] * g[j] + b[j]));  // fp32 norm
    return x;
  };
  const std::vector<double> x = norm_out(gamma, beta);
  std::vector<float> act_amax(static_cast<std::size_t>(k), 0.0f);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t j = 0; j < k; ++j)
      act_amax[j] = std::max(act_amax[j], static_cast<float>(std::fabs(x[r * k + j])));
  std::vector<float> w1 = random_vector(static_cast<std::size_t>(n1 * k), 0.01f, 0.5f, rng);
  std::vector<float> w2 = random_vector(static_cast<std::size_t>(n2 * k), 0.01f, 0.5f, rng);
  for (std::int64_t r = 0; r < n1; ++r)
    w1[r * k + 21] = 0.0f;  // zero weight column in one of the two weights
  const std::vector<float> w1_orig = w1, w2_orig = w2;
  std::vector<float> g2 = gamma, b2 = beta, s(static_cast<std::size_t>(k));
  WeightView<float> ws[] = {{w1.data(), n1, k, k}, {w2.data(), n2, k, k}};
  REQUIRE(smoothquant_apply(act_amax.data(), k, 0.5f, std::span<const WeightView<float>>(ws), g2.data(),
                            b2.data(), s.data())
              .ok());
  CHECK(s[3] > 5.0f);  // the outlier channels are scaled down in X
  CHECK(s[17] > 5.0f);
  const std::vector<double> xs = norm_out(g2, b2);
  // Y = X W^T vs X diag(1/s) (W diag(s))^T, accumulated in fp64. Each smoothed factor (gamma / s, beta / s,
  // W * s) is one fp32 rounding (2^-24 relative) and the norm output one more, so per product at most ~4 *
  // 2^-24 relative: |Y' - Y| <= 4 * 2^-24 * sum_j |x_j w_j| (plus fp64 noise).
  auto check_layer = [&](const std::vector<float>& w_orig, const std::vector<float>& w_new, std::int64_t n) {
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t i = 0; i < n; ++i) {
        double y = 0, ys = 0, mag = 0;
        for (std::int64_t j = 0; j < k; ++j) {
          y += x[r * k + j] * w_orig[i * k + j];
          ys += xs[r * k + j] * w_new[i * k + j];
          mag += std::fabs(x[r * k + j] * w_orig[i * k + j]);
        }
        CHECK(std::fabs(y - ys) <= 4.0 * std::ldexp(mag, -24) + 1e-12);
      }
  };
  check_layer(w1_orig, w1, n1);
  check_layer(w2_orig, w2, n2);
  // Balance: for alpha 0.5, max|X_j / s_j| == max|W_j s_j| (up to rounding) for every column.
  std::vector<float> w_amax(static_cast<std::size_t>(k), 0.0f);
  for (const auto* w : {&w1, &w2})
    for (std::size_t e = 0; e < w->size(); ++e) w_amax[e % k] = std::max(w_amax[e % k], std::fabs((*w)[e]));
  for (std::int64_t j = 0; j < k; ++j) CHECK(act_amax[j] / s[j] == doctest::Approx(w_amax[j]).epsilon(1e-5));
}

TEST_CASE("smooth_weight and fold_smoothing_into_norm on 16-bit parameters") {
  llmk::half w[] = {llmk::half(1.0f), llmk::half(-3.0f), llmk::half(0.5f), llmk::half(7.0f)};
  const float s[] = {2.0f, 0.25f};
  REQUIRE(smooth_weight(WeightView<llmk::half>{w, 2, 2, 2}, s).ok());
  CHECK(static_cast<float>(w[0]) == 2.0f);
  CHECK(static_cast<float>(w[1]) == -0.75f);
  CHECK(static_cast<float>(w[2]) == 1.0f);
  CHECK(static_cast<float>(w[3]) == 1.75f);
  llmk::bfloat16 g[] = {llmk::bfloat16(1.0f), llmk::bfloat16(3.0f)};
  REQUIRE(fold_smoothing_into_norm(g, static_cast<llmk::bfloat16*>(nullptr), 2, s).ok());  // RMSNorm: no bias
  CHECK(static_cast<float>(g[0]) == 0.5f);
  CHECK(static_cast<float>(g[1]) == 12.0f);
}

TEST_CASE("SmoothQuant helpers reject bad arguments with a message naming the argument") {
  const float a[] = {1.0f, 2.0f}, w[] = {1.0f, 1.0f};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float s[2];
  expect_invalid(smoothing_factors(a, w, -1, 0.5f, s), "'k': must be >= 0");
  expect_invalid(smoothing_factors(a, w, 2, 1.5f, s), "'alpha': must be in [0, 1]");
  expect_invalid(smoothing_factors(a, w, 2, nan, s), "'alpha'");
  expect_invalid(smoothing_factors(nullptr, w, 2, 0.5f, s), "'act_amax': must not be null");
  expect_invalid(smoothing_factors(a, nullptr, 2, 0.5f, s), "'weight_amax': must not be null");
  expect_invalid(smoothing_factors(a, w, 2, 0.5f, nullptr), "'scales': must not be null");
  const float bad_a[] = {1.0f, -2.0f}, bad_w[] = {nan, 1.0f};
  expect_invalid(smoothing_factors(bad_a, w, 2, 0.5f, s),
                 "'act_amax': must be finite and >= 0 (act_amax[1]=-2)");
  expect_invalid(smoothing_factors(a, bad_w, 2, 0.5f, s), "'weight_amax': must be finite and >= 0");
  float wbuf[8] = {};
  const WeightView<const float> good[] = {{wbuf, 2, 4, 4}};
  const WeightView<const float> wrong_k[] = {{wbuf, 2, 3, 4}};
  const WeightView<const float> bad_ld[] = {{wbuf, 2, 4, 3}};
  const WeightView<const float> null_w[] = {{nullptr, 2, 4, 4}};
  const WeightView<const float> neg_rows[] = {{wbuf, -1, 4, 4}};
  float out[4];
  using Span = std::span<const WeightView<const float>>;
  expect_invalid(weight_column_amax(Span(good), -1, out), "'k'");
  expect_invalid(weight_column_amax(Span(good), 4, nullptr), "'weight_amax': must not be null");
  expect_invalid(weight_column_amax(Span(), 4, out), "'weights': must hold at least one weight");
  expect_invalid(weight_column_amax(Span(wrong_k), 4, out), "'weights': must have K columns (K=4, cols=3)");
  expect_invalid(weight_column_amax(Span(bad_ld), 4, out), "'weights': ld must be >= cols");
  expect_invalid(weight_column_amax(Span(null_w), 4, out), "'weights': data must not be null");
  expect_invalid(weight_column_amax(Span(neg_rows), 4, out), "'weights': rows must be >= 0");
  expect_invalid(smooth_weight(WeightView<float>{wbuf, 2, 4, 4}, nullptr), "'scales': must not be null");
  expect_invalid(smooth_weight(WeightView<float>{wbuf, 2, 4, 2}, s), "'w': ld must be >= cols");
  float g[2] = {1.0f, 1.0f};
  expect_invalid(fold_smoothing_into_norm(static_cast<float*>(nullptr), g, 2, s),
                 "'gamma': must not be null");
  expect_invalid(fold_smoothing_into_norm(g, g, 2, nullptr), "'scales': must not be null");
  expect_invalid(fold_smoothing_into_norm(g, g, -2, s), "'k': must be >= 0");
  // Scales of 0, negative, NaN or Inf would poison the folded parameters: rejected before any change.
  for (const float bad : {0.0f, -2.0f, nan, std::numeric_limits<float>::infinity()}) {
    float sb[4] = {1.0f, 2.0f, 1.0f, bad};
    float wb[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    expect_invalid(smooth_weight(WeightView<float>{wb, 2, 4, 4}, sb), "'scales': must be finite and > 0");
    CHECK(wb[0] == 1.0f);  // unchanged
    float gb[4] = {1, 1, 1, 1};
    expect_invalid(fold_smoothing_into_norm(gb, static_cast<float*>(nullptr), 4, sb),
                   "'scales': must be finite and > 0 (scales[3]");
    CHECK(gb[0] == 1.0f);
  }
  // smoothquant_apply validates before changing anything.
  float wm[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  WeightView<float> wv[] = {{wm, 2, 4, 4}};
  const float act4[] = {1.0f, 2.0f, nan, 1.0f};
  float gamma4[4] = {1, 1, 1, 1};
  expect_invalid(smoothquant_apply(act4, 4, 0.5f, std::span<const WeightView<float>>(wv), gamma4,
                                   static_cast<float*>(nullptr), static_cast<float*>(nullptr)),
                 "'act_amax'");
  const float act_ok[] = {1.0f, 2.0f, 3.0f, 1.0f};
  expect_invalid(
      smoothquant_apply(act_ok, 4, 0.5f, std::span<const WeightView<float>>(wv), static_cast<float*>(nullptr),
                        static_cast<float*>(nullptr), static_cast<float*>(nullptr)),
      "'gamma': must not be null");
  for (float v : wm) CHECK(v == 1.0f);
  for (float v : gamma4) CHECK(v == 1.0f);
}
