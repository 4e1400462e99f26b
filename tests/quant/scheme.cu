// Tests of the scalar quantization arithmetic (llmk/quant/scheme.cuh): the literature's worked examples,
// round trips, edge cases. Host-side; kernels call exactly these functions (tests/quant/kernels.cu checks
// that).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "llmk/quant/scheme.cuh"

namespace q = llmk::quant;

TEST_CASE("worked example: int8 absmax with amax 3.2 maps 0.1 to 4, which dequantizes to 0.1008") {
  using Q = q::Quantizer<int8_t, q::Symmetric, q::PerTensor>;
  const q::QuantParams p = Q::params_from_absmax(3.2f);
  CHECK(p.scale == doctest::Approx(3.2 / 127).epsilon(1e-7));
  CHECK(p.zero_point == 0);
  CHECK(Q::quantize(0.1f, p) == 4);
  CHECK(Q::dequantize(4, p) == doctest::Approx(0.1008).epsilon(1e-3));
  CHECK(std::fabs(Q::dequantize(4, p) - 0.1f) == doctest::Approx(0.0008).epsilon(1e-2));
  CHECK(Q::quantize(3.2f, p) == 127);
  CHECK(Q::quantize(-3.2f, p) == -127);
}

TEST_CASE("worked example: zero point into [-128, 127] with max 3.2 and min -3.0") {
  using Q = q::Quantizer<int8_t, q::Asymmetric, q::PerTensor>;
  const q::QuantParams p = Q::params_from_range(-3.0f, 3.2f);
  CHECK(p.scale == doctest::Approx(6.2 / 255).epsilon(1e-6));
  CHECK(1.0 / p.scale == doctest::Approx(41.13).epsilon(1e-4));  // the multiplicative factor
  CHECK(p.zero_point == -5);
  CHECK(Q::quantize(0.1f, p) == -1);
  CHECK(Q::quantize(-3.0f, p) == -128);
  CHECK(Q::quantize(3.2f, p) == 127);
}

TEST_CASE("worked example: affine into [0, 255] with min -0.5 and max 0.8") {
  using Q = q::Quantizer<uint8_t, q::Asymmetric, q::PerTensor>;
  const q::QuantParams p = Q::params_from_range(-0.5f, 0.8f);
  CHECK(p.scale == doctest::Approx(0.00510).epsilon(2e-3));
  CHECK(p.zero_point == 98);
  CHECK(Q::quantize(0.0f, p) == 98);
  CHECK(Q::dequantize(98, p) == 0.0f);
}

TEST_CASE("fp8 scaling: s = amax / 448 (e4m3) and amax / 57344 (e5m2), saturating") {
  using E4 = q::Quantizer<llmk::float8_e4m3, q::Symmetric, q::PerToken>;
  using E5 = q::Quantizer<llmk::float8_e5m2, q::Symmetric, q::PerToken>;
  const q::QuantParams p4 = E4::params_from_absmax(896.0f), p5 = E5::params_from_absmax(114688.0f);
  CHECK(p4.scale == 2.0f);
  CHECK(p5.scale == 2.0f);
  CHECK(E4::quantize(896.0f, p4).to_float() == 448.0f);
  CHECK(E4::quantize(1e9f, p4).to_float() == 448.0f);  // saturation
  CHECK(E4::quantize(-std::numeric_limits<float>::infinity(), p4).to_float() == -448.0f);
  CHECK(E5::quantize(1e9f, p5).to_float() == 57344.0f);
  CHECK(E4::quantize(std::nanf(""), p4).is_nan());
  CHECK(E4::dequantize(E4::quantize(3.0f, p4), p4) == 3.0f);
}

template <class Q>
void check_round_trip(float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  const q::QuantParams p = [&] {
    if constexpr (Q::kAsymmetric)
      return Q::params_from_range(lo, hi);
    else
      return Q::params_from_absmax(std::max(std::fabs(lo), std::fabs(hi)));
  }();
  for (int i = 0; i < 20000; ++i) {
    const float x = dist(rng);
    const float back = Q::dequantize(Q::quantize(x, p), p);
    if constexpr (Q::kIsFloat) {
      // fp8: relative rounding error of the format (3 or 2 mantissa bits) plus subnormal spacing.
      const float rel = std::is_same_v<typename Q::storage_type, llmk::float8_e4m3> ? 1.0f / 16 : 1.0f / 8;
      REQUIRE(std::fabs(back - x) <= rel * std::fabs(x) + p.scale * 0.002f);
    } else {
      // Inside the clipping range the error is at most half a step (plus fp32 rounding of the arithmetic).
      REQUIRE(std::fabs(back - x) <= p.scale * 0.5f * (1.0f + 1e-5f) + 1e-7f * std::fabs(x));
    }
  }
}

TEST_CASE("round trip: |x - dequant(quant(x))| <= s/2 inside the clipping range, every storage and scheme") {
  std::mt19937 rng(3);
  for (auto [lo, hi] :
       {std::pair{-1.0f, 1.0f}, std::pair{-3.0f, 0.5f}, std::pair{0.25f, 7.0f}, std::pair{-1e-3f, 2e-3f}}) {
    CAPTURE(lo);
    CAPTURE(hi);
    check_round_trip<q::Quantizer<int8_t, q::Symmetric, q::PerTensor>>(lo, hi, rng);
    check_round_trip<q::Quantizer<int8_t, q::Asymmetric, q::PerTensor>>(lo, hi, rng);
    check_round_trip<q::Quantizer<uint8_t, q::Asymmetric, q::PerTensor>>(lo, hi, rng);
    check_round_trip<q::Quantizer<llmk::int4_t, q::Symmetric, q::GroupWise<64>>>(lo, hi, rng);
    check_round_trip<q::Quantizer<llmk::int4_t, q::SymmetricFullRange, q::GroupWise<64>>>(lo, hi, rng);
    check_round_trip<q::Quantizer<int8_t, q::SymmetricFullRange, q::PerChannel>>(lo, hi, rng);
    check_round_trip<q::Quantizer<llmk::int4_t, q::Asymmetric, q::GroupWise<64>>>(lo, hi, rng);
    check_round_trip<q::Quantizer<llmk::uint4_t, q::Asymmetric, q::GroupWise<>>>(lo, hi, rng);
    check_round_trip<q::Quantizer<llmk::float8_e4m3, q::Symmetric, q::PerToken>>(lo, hi, rng);
    check_round_trip<q::Quantizer<llmk::float8_e5m2, q::Symmetric, q::PerToken>>(lo, hi, rng);
  }
}

// The GPTQ reference's symmetric grid (quant.py, sym=True), written from its definition in fp32 as the
// reference computes it: xmax = max(|min|, max), xmin = -xmax, scale = (xmax - xmin) / maxq, zero = (maxq +
// 1) / 2, code = clamp(round(x / scale) + zero, 0, maxq), value = scale * (code - zero).
TEST_CASE("SymmetricFullRange is the GPTQ reference's sym=True grid: 2^b levels, s = 2 amax / (2^b - 1)") {
  std::mt19937 rng(17);
  auto check = [&]<class Q>(int bits) {
    CAPTURE(bits);
    const int maxq = (1 << bits) - 1, zero = (maxq + 1) / 2;
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::set<int> used;
    for (int group = 0; group < 200; ++group) {
      std::vector<float> x(64);
      for (auto& v : x) v = dist(rng) * (0.1f + static_cast<float>(group % 7));
      float lo = 0.0f, hi = 0.0f;
      for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
      const float xmax = std::max(std::fabs(lo), hi), xmin = -xmax;
      const float ref_scale = (xmax - xmin) / static_cast<float>(maxq);
      const q::QuantParams p = Q::params_from_absmax(xmax);
      REQUIRE(p.scale == ref_scale);  // bit for bit: one correctly rounded division of the same real
      REQUIRE(p.zero_point == 0);
      for (float v : x) {
        const float code = std::clamp(std::nearbyint(v / ref_scale) + zero, 0.0f, static_cast<float>(maxq));
        const int q = Q::quantize(v, p);
        REQUIRE(q + zero == static_cast<int>(code));
        REQUIRE(Q::dequantize(q, p) == ref_scale * (code - static_cast<float>(zero)));
        used.insert(q);
      }
    }
    CHECK(static_cast<int>(used.size()) == maxq + 1);  // every level is reached, -2^(b-1) included
  };
  check.template operator()<q::Quantizer<llmk::int4_t, q::SymmetricFullRange, q::PerChannel>>(4);
  check.template operator()<q::Quantizer<int8_t, q::SymmetricFullRange, q::PerChannel>>(8);
  // The 15-level absmax grid never uses -8 at 4 bits, and its step is 15/14 of the full-range step.
  using Abs = q::Quantizer<llmk::int4_t, q::Symmetric, q::PerChannel>;
  using Full = q::Quantizer<llmk::int4_t, q::SymmetricFullRange, q::PerChannel>;
  // amax 7.5: s = 1 exactly, so -amax / s = -7.5 rounds (half to even) to -8, as in the reference (where
  // fl(s) rounds up, -amax / s lands just inside -7.5 and gives -7 there too: the same arithmetic).
  CHECK(Abs::quantize(-7.5f, Abs::params_from_absmax(7.5f)) == -7);
  CHECK(Full::quantize(-7.5f, Full::params_from_absmax(7.5f)) == -8);
  CHECK(Full::quantize(7.5f, Full::params_from_absmax(7.5f)) == 7);
  CHECK(Full::params_from_absmax(7.5f).scale == 1.0f);
  CHECK(Full::params_from_absmax(0.0f).scale == 1.0f);  // all-zero group: every code 0
}

TEST_CASE("rounding is half to even") {
  using Q = q::Quantizer<int8_t, q::Symmetric, q::PerTensor>;
  const q::QuantParams p{1.0f, 0};
  CHECK(Q::quantize(0.5f, p) == 0);
  CHECK(Q::quantize(1.5f, p) == 2);
  CHECK(Q::quantize(2.5f, p) == 2);
  CHECK(Q::quantize(-0.5f, p) == 0);
  CHECK(Q::quantize(-1.5f, p) == -2);
  CHECK(Q::quantize(-2.5f, p) == -2);
}

TEST_CASE("edge cases: all-zero ranges, NaN and Inf inputs, values beyond the range") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  using S8 = q::Quantizer<int8_t, q::Symmetric, q::PerTensor>;
  const q::QuantParams zero = S8::params_from_absmax(0.0f);
  CHECK(zero.scale == 1.0f);
  CHECK(S8::quantize(0.0f, zero) == 0);
  CHECK(S8::dequantize(0, zero) == 0.0f);
  const q::QuantParams p = S8::params_from_absmax(1.0f);
  CHECK(S8::quantize(nan, p) == 0);
  CHECK(S8::quantize(inf, p) == 127);
  CHECK(S8::quantize(-inf, p) == -128);
  CHECK(S8::quantize(1e30f, p) == 127);
  CHECK(S8::quantize(-2.0f, p) == -128);  // clamped to the storage range

  using A4 = q::Quantizer<llmk::uint4_t, q::Asymmetric, q::GroupWise<32>>;
  const q::QuantParams z4 = A4::params_from_range(0.0f, 0.0f);  // constant zero group: range [-1, 1]
  CHECK(z4.scale == doctest::Approx(2.0 / 15));
  CHECK(A4::dequantize(A4::quantize(0.0f, z4), z4) == 0.0f);
  const q::QuantParams c4 = A4::params_from_range(2.0f, 2.0f);  // constant positive group: range [0, 2]
  CHECK(c4.zero_point == 0);
  CHECK(A4::quantize(2.0f, c4) == 15);
  CHECK(A4::dequantize(15, c4) == doctest::Approx(2.0f));
  CHECK(A4::quantize(nan, c4) == c4.zero_point);
  const q::QuantParams neg = A4::params_from_range(-5.0f, -1.0f);  // all negative: range [-5, 0], z = qmax
  CHECK(neg.zero_point == 15);
  CHECK(A4::dequantize(A4::quantize(0.0f, neg), neg) == 0.0f);
}

TEST_CASE("storage row bytes: int4 packs two per byte, an odd row is padded") {
  CHECK(q::storage_row_bytes<llmk::int4_t>(7) == 4);
  CHECK(q::storage_row_bytes<llmk::uint4_t>(8) == 4);
  CHECK(q::storage_row_bytes<int8_t>(7) == 7);
  CHECK(q::storage_row_bytes<llmk::float8_e4m3>(1) == 1);
  CHECK(q::storage_row_bytes<llmk::int4_t>(0) == 0);
}

TEST_CASE("huge ranges keep a finite scale; a NaN quotient (bad static scale) maps to the zero point") {
  const float inf = std::numeric_limits<float>::infinity();
  using A8 = q::Quantizer<int8_t, q::Asymmetric, q::PerTensor>;
  const q::QuantParams p = A8::params_from_range(-3e38f, 3e38f);  // hi - lo overflows fp32
  CHECK(std::isfinite(p.scale));
  CHECK(p.scale > 0.0f);
  CHECK(A8::dequantize(A8::quantize(0.0f, p), p) == 0.0f);
  CHECK(A8::quantize(inf, p) == 127);
  CHECK(A8::quantize(-inf, p) == -128);
  CHECK(A8::quantize(3e38f, p) == 127);
  CHECK(std::isfinite(A8::dequantize(A8::quantize(1.0f, p), p)));
  using U4 = q::Quantizer<llmk::uint4_t, q::Asymmetric, q::GroupWise<>>;
  const q::QuantParams p4 = U4::params_from_range(-3.4e38f, 3.4e38f);
  CHECK(std::isfinite(p4.scale));
  CHECK(U4::dequantize(U4::quantize(0.0f, p4), p4) == 0.0f);
  // Static scales of 0, Inf or NaN are invalid; quantize still never converts a NaN to int.
  CHECK(A8::quantize(0.0f, {0.0f, 5}) == 5);
  CHECK(A8::quantize(inf, {inf, 5}) == 5);
  CHECK(A8::quantize(1.0f, {std::nanf(""), -3}) == -3);
  // A static zero point outside the code range: a NaN's code is clamped as any other (4-bit: [0, 15]).
  CHECK(U4::quantize(std::nanf(""), {1.0f, 20}) == 15);
  CHECK(U4::quantize(std::nanf(""), {1.0f, -4}) == 0);
  CHECK(U4::quantize(100.0f, {1.0f, 20}) == 15);
  CHECK(A8::quantize(std::nanf(""), {1.0f, 300}) == 127);
}
