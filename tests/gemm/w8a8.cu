// Tests of the 8-bit GEMMs (llmk/gemm/w8a8.cuh): W8A8 (raw int32, exact; dequantized), satfinite, FP8, the
// mixed LLM.int8() GEMM and weight_column_sums, against llmk/reference/quant_gemm.hpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/tile_gemm.cuh"
#include "llmk/gemm/w8a8.cuh"
#include "llmk/reference/quant_gemm.hpp"
#include "quant_gemm_fixtures.hpp"
#include "support/test_env.hpp"

namespace {

using namespace llmk::test::qgemm;

// Shapes over M {1, 7, 33, 128, 257} (every tile of the M table), N and K not multiples of the tiles.
std::vector<Shape> shapes() {
  if (llmk::test::fast()) return {{1, 24, 48}, {33, 72, 96}, {70, 40, 32}};
  return {{1, 200, 160}, {7, 24, 512}, {33, 130, 96}, {128, 72, 208}, {257, 136, 64}};
}

// True where fp8 GEMMs can run (the simulator, sm_89+). Elsewhere the fp8 tests check the refusal only.
bool fp8_available() {
  const int arch = gemm::detail::device_arch();
  return arch == 0 || arch >= 890;
}

}  // namespace

TEST_CASE("w8a8: raw int32 accumulators are exact, every M tile, odd N and K") {
  std::mt19937 rng(501);
  for (const Shape& s : shapes()) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    const std::int64_t lda = s.k + 16, ldw = s.k;
    const std::int64_t ldd = s.m % 2 == 1 ? s.n + 3 : (s.n + 3) / 4 * 4 + 4;  // element and 16-byte stores
    const auto a = random_int8(s.m, lda, s.k, rng), w = random_int8(s.n, ldw, s.k, rng);
    llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
    llmk::DeviceBuffer<std::int32_t> d_d(static_cast<std::size_t>(s.m) * ldd);
    gemm::QuantGemmArgs<std::int8_t> p;
    p.a = d_a.data();
    p.lda = lda;
    p.w = d_w.data();
    p.ldw = ldw;
    p.m = s.m;
    p.n = s.n;
    p.k = s.k;
    p.d = d_d.data();
    p.ldd = ldd;
    const llmk::Status st = gemm::w8a8_gemm<std::int32_t>(p, nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    const auto got = d_d.to_host();
    std::vector<std::int32_t> want(static_cast<std::size_t>(s.m) * ldd);
    llmk::reference::gemm_s8s8_s32(a.data(), lda, w.data(), ldw, s.m, s.n, s.k, want.data(), ldd, false);
    int bad = 0, padding = 0;
    for (int i = 0; i < s.m; ++i) {
      for (int j = 0; j < s.n; ++j)
        if (got[i * ldd + j] != want[i * ldd + j] && bad++ < 5)
          MESSAGE("acc[" << i << "][" << j << "] = " << got[i * ldd + j] << ", want " << want[i * ldd + j]);
      for (std::int64_t j = s.n; j < ldd; ++j) padding += got[i * ldd + j] != -1;  // still the poison
    }
    CHECK(bad == 0);
    CHECK(padding == 0);
  }
}

TEST_CASE("w8a8: dequantized outputs (per token/tensor x per channel/tensor, zero points, bias)") {
  std::mt19937 rng(502);
  struct Mode {
    bool per_token, per_channel, zero_points, bias;
  };
  const std::vector<Mode> modes = {{true, true, false, false},
                                   {false, false, false, true},
                                   {true, true, true, true},
                                   {false, true, true, false}};
  int which = 0;
  for (const Shape& s : shapes()) {
    const Mode md = modes[which++ % modes.size()];
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    CAPTURE(md.per_token);
    CAPTURE(md.per_channel);
    CAPTURE(md.zero_points);
    const auto a = random_int8(s.m, s.k, s.k, rng), w = random_int8(s.n, s.k, s.k, rng);
    llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
    Scales sc;
    make_scales(sc, s.m, s.n, md.per_token, md.per_channel, md.zero_points, md.bias, rng);
    if (md.zero_points) {
      REQUIRE(gemm::weight_column_sums(d_w.data(), s.k, s.n, s.k, sc.sums.data(), nullptr).ok());
      sc.dev.w_column_sums = sc.sums.data();
    }
    std::vector<double> ref(static_cast<std::size_t>(s.m) * s.n);
    llmk::reference::gemm_dequant_fp64(a.data(), s.k, w.data(), s.k, s.m, s.n, s.k, sc.host, ref.data(), s.n);
    const double bound = 128.0 * 128.0 * s.k * 2e-2 * 2e-2;  // |products| summed, scaled
    gemm::QuantGemmArgs<std::int8_t> p{d_a.data(), s.k, d_w.data(), s.k, s.m, s.n, s.k, sc.dev, nullptr, s.n};
    {
      llmk::DeviceBuffer<f16> d(static_cast<std::size_t>(s.m) * s.n);
      p.d = d.data();
      const llmk::Status st = gemm::w8a8_gemm<f16>(p, nullptr);
      REQUIRE_MESSAGE(st.ok(), st.message());
      check_close(d.to_host(), s.n, ref, s.m, s.n, bound);
    }
    if (s.m > 16 && s.m <= 64) {
      llmk::DeviceBuffer<float> d(static_cast<std::size_t>(s.m) * s.n);
      p.d = d.data();
      REQUIRE(gemm::w8a8_gemm_with_tile<float, gemm::QGemmMedium>(p, nullptr).ok());
      check_close(d.to_host(), s.n, ref, s.m, s.n, bound);
    }
    if (s.m <= 16) {
      llmk::DeviceBuffer<bf16> d(static_cast<std::size_t>(s.m) * s.n);
      p.d = d.data();
      REQUIRE(gemm::w8a8_gemm_with_tile<bf16, gemm::QGemmSmall>(p, nullptr).ok());
      check_close(d.to_host(), s.n, ref, s.m, s.n, bound);
    }
  }
}

TEST_CASE("w8a8: weight_column_sums is exact") {
  std::mt19937 rng(503);
  const int n = 37, k = 272;
  const auto w = random_int8(n, k, k, rng);
  llmk::DeviceBuffer<std::int8_t> d_w(w);
  llmk::DeviceBuffer<std::int32_t> d_s(n);
  REQUIRE(gemm::weight_column_sums(d_w.data(), k, n, k, d_s.data(), nullptr).ok());
  const auto got = d_s.to_host();
  for (int j = 0; j < n; ++j) {
    std::int32_t want = 0;
    for (int p = 0; p < k; ++p) want += w[j * k + p];
    CHECK(got[j] == want);
  }
}

TEST_CASE("w8a8: .satfinite clamps where plain int32 accumulation wraps (K = 131104, all -128)") {
  {  // K % 32 == 16: the mma.sync tiles' clamp steps (from K's end) would not be the reference's (from 0)
    llmk::DeviceBuffer<std::int8_t> a48(48), w48(8 * 48);
    llmk::DeviceBuffer<std::int32_t> d8(8);
    gemm::QuantGemmArgs<std::int8_t> bad{a48.data(), 48, w48.data(), 48, 1, 8, 48, {}, d8.data(), 8};
    const llmk::Status st = gemm::w8a8_gemm_with_tile<std::int32_t, gemm::QGemmSmall, true>(bad, nullptr);
    CHECK(st.message().find("'k'") != std::string::npos);
    CHECK(st.message().find("multiple of 32") != std::string::npos);
  }
  if (llmk::test::fast()) return;      // 4 million MACs per output: the plain simulator run covers it
  const int m = 1, n = 8, k = 131104;  // 16384 * 131104 > 2^31 - 1
  std::vector<std::int8_t> a(k, std::int8_t(-128)), w(static_cast<std::size_t>(n) * k, std::int8_t(-128));
  llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
  llmk::DeviceBuffer<std::int32_t> d_d(n);
  gemm::QuantGemmArgs<std::int8_t> p{d_a.data(), k, d_w.data(), k, m, n, k, {}, d_d.data(), n};
  std::vector<std::int32_t> want(n);
  REQUIRE(gemm::w8a8_gemm_with_tile<std::int32_t, gemm::QGemmSmall, true>(p, nullptr).ok());
  llmk::reference::gemm_s8s8_s32(a.data(), k, w.data(), k, m, n, k, want.data(), n, true);
  CHECK(want[0] == 2147483647);
  CHECK(d_d.to_host() == want);
  REQUIRE(gemm::w8a8_gemm<std::int32_t>(p, nullptr).ok());
  llmk::reference::gemm_s8s8_s32(a.data(), k, w.data(), k, m, n, k, want.data(), n, false);
  CHECK(want[0] < 0);  // wrapped
  CHECK(d_d.to_host() == want);
}

TEST_CASE("fp8: e4m3 x e4m3 with per-tensor / per-channel scales, fp32 accumulate") {
  if (!fp8_available()) {
    MESSAGE("no fp8 mma on this device: the numerics are skipped (the refusal is tested below)");
    return;
  }
  std::mt19937 rng(504);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  int which = 0;
  for (const Shape& s : shapes()) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    std::vector<e4m3> a(static_cast<std::size_t>(s.m) * s.k), w(static_cast<std::size_t>(s.n) * s.k);
    for (auto& x : a) x = e4m3::from_float_satfinite(dist(rng) == 0.0f ? 1.0f : dist(rng));
    for (auto& x : w) x = e4m3::from_float_satfinite(dist(rng));
    llmk::DeviceBuffer<e4m3> d_a(a), d_w(w);
    Scales sc;
    make_scales(sc, s.m, s.n, false, which % 2 == 0, false, which % 3 == 0, rng);
    std::vector<double> ref(static_cast<std::size_t>(s.m) * s.n);
    llmk::reference::gemm_dequant_fp64(a.data(), s.k, w.data(), s.k, s.m, s.n, s.k, sc.host, ref.data(), s.n);
    const double bound = 64.0 * s.k * 2e-2 * 2e-2 * (s.k / 32 + 2);
    const std::vector<double> gpu = fp8_gpu_allowance(a, s.k, w, s.k, s.m, s.n, s.k, sc.host);
    gemm::QuantGemmArgs<e4m3> p{d_a.data(), s.k, d_w.data(), s.k, s.m, s.n, s.k, sc.dev, nullptr, s.n};
    if (which++ % 2 == 0) {
      llmk::DeviceBuffer<f16> d(static_cast<std::size_t>(s.m) * s.n);
      p.d = d.data();
      const llmk::Status st = gemm::fp8_gemm<f16>(p, nullptr);
      REQUIRE_MESSAGE(st.ok(), st.message());
      check_close(d.to_host(), s.n, ref, s.m, s.n, bound, gpu);
    } else {
      llmk::DeviceBuffer<float> d(static_cast<std::size_t>(s.m) * s.n);
      p.d = d.data();
      const llmk::Status st = gemm::fp8_gemm_with_tile<float, gemm::QGemmMedium>(p, nullptr);
      REQUIRE_MESSAGE(st.ok(), st.message());
      check_close(d.to_host(), s.n, ref, s.m, s.n, bound, gpu);
    }
  }
}

TEST_CASE(
    "mixed LLM.int8(): equals the int8 GEMM plus the fp16 GEMM of the outliers, and the fp64 reference") {
  std::mt19937 rng(505);
  for (const Shape& s : shapes()) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    const int k_out = 16;  // e.g. 11 outlier columns, zero-padded to 16
    const auto a = random_int8(s.m, s.k, s.k, rng), w = random_int8(s.n, s.k, s.k, rng);
    const auto fa = random_floats(static_cast<std::size_t>(s.m) * k_out, -8.0f, 8.0f, rng);
    const auto fw = random_floats(static_cast<std::size_t>(s.n) * k_out, -1.0f, 1.0f, rng);
    std::vector<f16> ao(fa.size()), wo(fw.size());
    for (std::size_t i = 0; i < fa.size(); ++i) ao[i] = (i % k_out) < 11 ? f16(fa[i]) : f16(0.0f);
    for (std::size_t i = 0; i < fw.size(); ++i) wo[i] = (i % k_out) < 11 ? f16(fw[i]) : f16(0.0f);
    llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
    llmk::DeviceBuffer<f16> d_ao(ao), d_wo(wo);
    Scales sc;
    make_scales(sc, s.m, s.n, true, true, false, true, rng);
    gemm::MixedInt8Args p;
    p.regular = {d_a.data(), s.k, d_w.data(), s.k, s.m, s.n, s.k, sc.dev, nullptr, s.n};
    p.a_outliers = d_ao.data();
    p.lda_outliers = k_out;
    p.w_outliers = d_wo.data();
    p.ldw_outliers = k_out;
    p.k_outliers = k_out;
    llmk::DeviceBuffer<float> d(static_cast<std::size_t>(s.m) * s.n);
    p.regular.d = d.data();
    const llmk::Status st = s.m <= 16 ? gemm::mixed_int8_gemm_with_tile<float, gemm::QGemmSmall>(p, nullptr)
                                      : gemm::mixed_int8_gemm<float>(p, nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    const std::vector<float> got = d.to_host();

    // Separately: the int8 GEMM (dequantized, with bias) + the fp16 tile GEMM of the outliers.
    llmk::DeviceBuffer<float> d_int8(static_cast<std::size_t>(s.m) * s.n),
        d_f16(static_cast<std::size_t>(s.m) * s.n);
    gemm::QuantGemmArgs<std::int8_t> q = p.regular;
    q.d = d_int8.data();
    REQUIRE(gemm::w8a8_gemm_with_tile<float, gemm::QGemmMedium>(q, nullptr).ok());
    REQUIRE(gemm::tile_gemm_f16(d_ao.data(), k_out, d_wo.data(), k_out, nullptr, s.n, d_f16.data(), s.n, s.m,
                                s.n, k_out, 1.0f, 0.0f, nullptr)
                .ok());
    const std::vector<float> i8 = d_int8.to_host(), h16 = d_f16.to_host();
    std::vector<double> ref(static_cast<std::size_t>(s.m) * s.n);
    llmk::reference::gemm_dequant_fp64(a.data(), s.k, w.data(), s.k, s.m, s.n, s.k, sc.host, ref.data(), s.n);
    llmk::reference::gemm_accumulate_fp64(ao.data(), k_out, wo.data(), k_out, s.m, s.n, k_out, ref.data(),
                                          s.n);
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double sep = static_cast<double>(i8[i]) + h16[i];
      const double tol = 1e-5 * (std::fabs(ref[i]) + 1.0);
      if (!(std::fabs(got[i] - sep) <= tol && std::fabs(got[i] - ref[i]) <= tol) && bad++ < 5)
        MESSAGE("out[" << i << "] = " << got[i] << ", separate " << sep << ", fp64 " << ref[i]);
    }
    CHECK(bad == 0);
  }
  // No outliers at all: the int8 part alone.
  const auto a = random_int8(5, 32, 32, rng), w = random_int8(9, 32, 32, rng);
  llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
  Scales sc;
  make_scales(sc, 5, 9, true, true, false, false, rng);
  llmk::DeviceBuffer<float> d(45);
  gemm::MixedInt8Args p;
  p.regular = {d_a.data(), 32, d_w.data(), 32, 5, 9, 32, sc.dev, d.data(), 9};
  REQUIRE(gemm::mixed_int8_gemm_with_tile<float, gemm::QGemmSmall>(p, nullptr).ok());
  std::vector<double> ref(45);
  llmk::reference::gemm_dequant_fp64(a.data(), 32, w.data(), 32, 5, 9, 32, sc.host, ref.data(), 9);
  check_close(d.to_host(), 9, ref, 5, 9, 128.0 * 128 * 32 * 4e-4);
}

TEST_CASE("8-bit GEMMs: bad arguments are rejected with the rule that failed") {
  llmk::DeviceBuffer<std::int8_t> buf(4096);
  llmk::DeviceBuffer<float> fbuf(64);
  gemm::QuantGemmArgs<std::int8_t> good{buf.data(), 32, buf.data() + 1024, 32, 4, 8, 32, {}, fbuf.data(), 8};
  good.scales.a_scales = fbuf.data();
  good.scales.w_scales = fbuf.data();
  llmk::DeviceBuffer<float> out(32);
  good.d = out.data();
  REQUIRE(gemm::w8a8_gemm<float>(good, nullptr).ok());
  auto expect = [](const llmk::Status& s, const char* needle) {
    CHECK_FALSE(s.ok());
    INFO(s.message());
    CHECK(s.message().find(needle) != std::string::npos);
  };
  auto p = good;
  p.a = buf.data() + 8;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "16-byte aligned");
  p = good;
  p.k = 40;
  p.lda = p.ldw = 48;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "multiple of 16");
  p = good;
  p.ldw = 16;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "ldw");
  p = good;
  p.scales.w_scales = nullptr;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "w_scales");
  p = good;
  llmk::DeviceBuffer<std::int32_t> z(4);
  p.scales.a_zero_points = z.data();
  expect(gemm::w8a8_gemm<float>(p, nullptr), "w_column_sums");
  p = good;
  p.w = nullptr;
  expect(gemm::w8a8_gemm<std::int32_t>(p, nullptr), "must not be null");
  p = good;
  p.m = 0;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "'m'");
  // fp8 on an architecture without fp8 mma (the simulator pretends to be sm_80).
  llmk::DeviceBuffer<e4m3> f8(4096);
  gemm::QuantGemmArgs<e4m3> f{f8.data(), 32, f8.data() + 1024, 32, 4, 8, 32, good.scales, out.data(), 8};
  if (!fp8_available()) {
    CHECK(gemm::fp8_gemm<float>(f, nullptr).code() == llmk::Status::Code::kUnsupported);
    return;
  }
  REQUIRE(gemm::fp8_gemm<float>(f, nullptr).ok());
#if defined(LLMK_SIM)  // LLMK_SIM_ARCH moves the simulator only; a GPU stays what it is
  const llmk::Status s80 = [&] {
    llmk::test::ScopedEnv sm80("LLMK_SIM_ARCH", "800");
    return gemm::fp8_gemm<float>(f, nullptr);
  }();
  CHECK(s80.code() == llmk::Status::Code::kUnsupported);
  CHECK(s80.message().find("sm_89") != std::string::npos);
#endif
  // Mixed: outlier operands.
  gemm::MixedInt8Args mx;
  mx.regular = good;
  mx.k_outliers = 12;
  expect(gemm::mixed_int8_gemm<float>(mx, nullptr), "k_outliers");
  mx.k_outliers = 16;
  expect(gemm::mixed_int8_gemm<float>(mx, nullptr), "a_outliers");
  expect(gemm::weight_column_sums(buf.data(), 32, 4, 24, z.data(), nullptr), "'k'");
}

// Edge cases from review: ring reuse, padding, outlier tiles, per-token fp8 scales.
static std::vector<std::int8_t> rnd8(int rows, std::int64_t ld, int cols, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<std::int8_t> v(static_cast<std::size_t>(rows) * ld, std::int8_t(77));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) v[r * ld + c] = std::int8_t(d(rng));
  return v;
}
static std::vector<float> rndf(std::size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

template <class Tile>
static void raw_case(int m, int n, int k, std::int64_t ldd_override = 0) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  std::mt19937 rng(static_cast<unsigned>(m * 1000 + n + k));
  const std::int64_t lda = k + 32, ldw = k + 16, ldd = ldd_override ? ldd_override : n + 5;
  auto a = rnd8(m, lda, k, rng), w = rnd8(n, ldw, k, rng);
  llmk::DeviceBuffer<std::int8_t> da(a), dw(w);
  llmk::DeviceBuffer<std::int32_t> dd(static_cast<std::size_t>(m) * ldd);
  gemm::QuantGemmArgs<std::int8_t> p{da.data(), lda, dw.data(), ldw, m, n, k, {}, dd.data(), ldd};
  REQUIRE(gemm::w8a8_gemm_with_tile<std::int32_t, Tile>(p, nullptr).ok());
  auto got = dd.to_host();
  std::vector<std::int32_t> want(static_cast<std::size_t>(m) * ldd, -1);
  llmk::reference::gemm_s8s8_s32(a.data(), lda, w.data(), ldw, m, n, k, want.data(), ldd, false);
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];  // padding stays -1 (poison)
  CHECK(bad == 0);
}

TEST_CASE("w8a8: ring reuse in every tile (many k tiles), output padding past N untouched") {
  raw_case<gemm::QGemmSmall>(9, 70, 656);
  raw_case<gemm::QGemmMedium>(40, 130, 272);
  raw_case<gemm::QGemmLarge>(130, 136, 272);
  raw_case<gemm::QGemmLarge>(130, 131, 64, 136);
  raw_case<gemm::QGemmSmall>(3, 67, 32, 72);
  raw_case<gemm::QGemmMedium>(33, 66, 32, 68);
}

// One mixed GEMM against the fp64 reference. Out: float, or fp16 / bf16, which round the kernel's fp32 result
// once more: out_ulp_rel<Out>() of |ref| (2^-11, 2^-8) on top of the fp32 tolerance. ldd: the output row
// pitch (0: N); with ldd > N the padding columns must keep the poison. per_token / per_channel: the scales'
// modes (false: one per-tensor scale).
template <class Tile, class Out = float>
static void mixed_case(int m, int n, int k, int k_out, int ld_out, std::int64_t ldd = 0,
                       bool per_token = true, bool per_channel = true) {
  if (ldd == 0) ldd = n;
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(k_out);
  CAPTURE(ldd);
  CAPTURE(per_token);
  CAPTURE(per_channel);
  std::mt19937 rng(m + n + k + k_out);
  auto a = rnd8(m, k, k, rng), w = rnd8(n, k, k, rng);
  auto fa = rndf(static_cast<std::size_t>(m) * ld_out, -4.f, 4.f, rng),
       fw = rndf(static_cast<std::size_t>(n) * ld_out, -1.f, 1.f, rng);
  std::vector<f16> ao(fa.size()), wo(fw.size());
  for (std::size_t i = 0; i < fa.size(); ++i) ao[i] = (int(i % ld_out) < k_out) ? f16(fa[i]) : f16(100.0f);
  for (std::size_t i = 0; i < fw.size(); ++i) wo[i] = (int(i % ld_out) < k_out) ? f16(fw[i]) : f16(100.0f);
  auto sa = rndf(per_token ? m : 1, 1e-3f, 2e-2f, rng), sw = rndf(per_channel ? n : 1, 1e-3f, 2e-2f, rng),
       bias = rndf(n, -1, 1, rng);
  llmk::DeviceBuffer<std::int8_t> da(a), dw(w);
  llmk::DeviceBuffer<f16> dao(ao), dwo(wo);
  llmk::DeviceBuffer<float> dsa(sa), dsw(sw), db(bias);
  llmk::DeviceBuffer<Out> dd(static_cast<std::size_t>(m) * ldd);  // poisoned, the padding included
  gemm::MixedInt8Args p;
  p.regular = {
      da.data(), k,  dw.data(), k,
      m,         n,  k,         {dsa.data(), per_token, nullptr, dsw.data(), per_channel, nullptr, db.data()},
      dd.data(), ldd};
  p.a_outliers = dao.data();
  p.lda_outliers = ld_out;
  p.w_outliers = dwo.data();
  p.ldw_outliers = ld_out;
  p.k_outliers = k_out;
  auto st = gemm::mixed_int8_gemm_with_tile<Out, Tile>(p, nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  auto got = dd.to_host();
  std::vector<double> ref(static_cast<std::size_t>(m) * n);
  llmk::reference::HostDequant hd{sa.data(), per_token, nullptr, sw.data(), per_channel, bias.data()};
  llmk::reference::gemm_dequant_fp64(a.data(), k, w.data(), k, m, n, k, hd, ref.data(), n);
  llmk::reference::gemm_accumulate_fp64(ao.data(), ld_out, wo.data(), ld_out, m, n, k_out, ref.data(), n);
  check_padding_untouched(got, ldd, m, n);
  int bad = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      const double r = ref[static_cast<std::size_t>(i) * n + j];
      const double g = static_cast<double>(static_cast<float>(got[static_cast<std::size_t>(i * ldd + j)]));
      if (!(std::fabs(g - r) <= 1e-4 * (std::fabs(r) + 1.0) + out_ulp_rel<Out>() * std::fabs(r)) && bad++ < 5)
        MESSAGE("out[" << i << "][" << j << "] = " << g << " want " << r);
    }
  CHECK(bad == 0);
}

TEST_CASE(
    "mixed LLM.int8(): many outlier k tiles (fp16 ring reuse), lda_outliers > k_outliers, padding poisoned") {
  mixed_case<gemm::QGemmSmall>(5, 70, 64, 520, 528);
  mixed_case<gemm::QGemmMedium>(20, 130, 96, 264, 272);
  mixed_case<gemm::QGemmLarge>(70, 136, 64, 200, 208);
}

TEST_CASE("mixed LLM.int8(): fp16 / bf16 outputs, per-tensor scales, ldd > N with the padding untouched") {
  // Output pitch (fp32, per-token x per-channel as above): N + 3 takes the element stores, N + 8 = 80 the
  // 16-byte ones (80 fp32 = 20 chunks of 4).
  mixed_case<gemm::QGemmMedium, float>(20, 70, 64, 8, 16, 73);
  mixed_case<gemm::QGemmSmall, float>(9, 72, 64, 16, 16, 80);
  // Per-tensor scales (one a scale, one w scale, or both) and 16-bit outputs, at N + 3 / N + 8 pitches too.
  mixed_case<gemm::QGemmSmall, f16>(9, 70, 64, 16, 24, 73, /*per_token=*/false, /*per_channel=*/true);
  mixed_case<gemm::QGemmMedium, bf16>(20, 72, 96, 8, 16, 80, /*per_token=*/true, /*per_channel=*/false);
  mixed_case<gemm::QGemmSmall, float>(5, 40, 32, 8, 8, 43, /*per_token=*/false, /*per_channel=*/false);
}

TEST_CASE("fp8: output pitch ldd > N: element stores (N + 3) and 16-byte stores (N + 8), padding untouched") {
  if (!fp8_available()) return;
  std::mt19937 rng(516);
  // M = 33: the medium tile, fp32 at N + 3 = 73 (element stores); M = 9: the small tile, fp16 at N + 8 = 80
  // (10 chunks of 8 a row: 16-byte stores).
  auto run = [&]<class Out>(Out*, const Shape& s, std::int64_t ldd) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(ldd);
    Fp8Problem f;
    make_fp8_problem(f, s, rng);
    const double bound = 64.0 * s.k * 2e-2 * 2e-2 * (s.k / 32 + 2);
    const std::vector<double> gpu = fp8_gpu_allowance(f.a, s.k, f.w, s.k, s.m, s.n, s.k, f.sc.host);
    llmk::DeviceBuffer<Out> d(static_cast<std::size_t>(s.m) * ldd);  // poisoned, the padding included
    gemm::QuantGemmArgs<e4m3> p{f.d_a.data(), s.k, f.d_w.data(), s.k, s.m, s.n, s.k, f.sc.dev, d.data(), ldd};
    const llmk::Status st = gemm::fp8_gemm<Out>(p, nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    check_close(d.to_host(), ldd, f.ref, s.m, s.n, bound, gpu);
  };
  run(static_cast<float*>(nullptr), Shape{33, 70, 64}, 73);
  run(static_cast<f16*>(nullptr), Shape{9, 72, 64}, 80);
}

TEST_CASE("fp8: per-token activation scales") {
  if (!fp8_available()) return;
  for (int m : {3, 40, 70}) {
    const int n = 72, k = 96;
    std::mt19937 rng(m);
    std::uniform_real_distribution<float> d(-8.f, 8.f);
    std::vector<e4m3> a(static_cast<std::size_t>(m) * k), w(static_cast<std::size_t>(n) * k);
    for (auto& x : a) x = e4m3::from_float_satfinite(d(rng));
    for (auto& x : w) x = e4m3::from_float_satfinite(d(rng));
    auto sa = rndf(m, 1e-3f, 2e-2f, rng), sw = rndf(n, 1e-3f, 2e-2f, rng);
    llmk::DeviceBuffer<e4m3> da(a), dw(w);
    llmk::DeviceBuffer<float> dsa(sa), dsw(sw), dd(static_cast<std::size_t>(m) * n);
    gemm::QuantGemmArgs<e4m3> p{
        da.data(), k, dw.data(), k, m, n, k, {dsa.data(), true, nullptr, dsw.data(), true, nullptr, nullptr},
        dd.data(), n};
    REQUIRE(gemm::fp8_gemm<float>(p, nullptr).ok());
    auto got = dd.to_host();
    std::vector<double> ref(static_cast<std::size_t>(m) * n);
    llmk::reference::HostDequant hd{sa.data(), true, nullptr, sw.data(), true, nullptr};
    llmk::reference::gemm_dequant_fp64(a.data(), k, w.data(), k, m, n, k, hd, ref.data(), n);
    const std::vector<double> gpu = fp8_gpu_allowance(a, k, w, k, m, n, k, hd);
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      bad +=
          !(std::fabs(got[i] - ref[i]) <= 1e-5 * (std::fabs(ref[i]) + 1e-2) + (gpu.empty() ? 0.0 : gpu[i]));
    CHECK(bad == 0);
  }
}

TEST_CASE(
    "8-bit GEMMs: more rejected arguments (lda < K, ldd < N, zero points where symmetric, outlier strides)") {
  llmk::DeviceBuffer<std::int8_t> buf(4096);
  llmk::DeviceBuffer<float> fbuf(64), out(64);
  llmk::DeviceBuffer<std::int32_t> z(8);
  gemm::QuantGemmArgs<std::int8_t> good{buf.data(), 32, buf.data() + 1024, 32, 4, 8, 32, {}, out.data(), 8};
  good.scales.a_scales = fbuf.data();
  good.scales.w_scales = fbuf.data();
  auto expect = [](const llmk::Status& s, const char* needle) {
    CHECK_FALSE(s.ok());
    INFO(s.message());
    CHECK(s.message().find(needle) != std::string::npos);
  };
  auto p = good;
  p.lda = 16;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "lda");
  p = good;
  p.ldd = 4;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "ldd");
  llmk::DeviceBuffer<e4m3> f8(4096);
  gemm::QuantGemmArgs<e4m3> f{f8.data(), 32, f8.data() + 1024, 32, 4, 8, 32, good.scales, out.data(), 8};
  f.scales.a_zero_points = z.data();
  f.scales.w_column_sums = z.data();
  expect(gemm::fp8_gemm<float>(f, nullptr), "a_zero_points");
  llmk::DeviceBuffer<f16> h(1024);
  gemm::MixedInt8Args mx;
  mx.regular = good;
  mx.a_outliers = h.data();
  mx.w_outliers = h.data() + 512;
  mx.k_outliers = 16;
  mx.lda_outliers = 8;
  mx.ldw_outliers = 16;
  expect(gemm::mixed_int8_gemm<float>(mx, nullptr), "lda_outliers");
  mx.lda_outliers = 16;
  mx.w_outliers = h.data() + 3;
  expect(gemm::mixed_int8_gemm<float>(mx, nullptr), "w_outliers");
  mx.w_outliers = h.data() + 512;
  REQUIRE(gemm::mixed_int8_gemm<float>(mx, nullptr).ok());
  mx.regular.scales.a_zero_points = z.data();
  mx.regular.scales.w_column_sums = z.data();
  expect(gemm::mixed_int8_gemm<float>(mx, nullptr), "a_zero_points");
  p = good;
  p.k = (1 << 30) + 16;
  p.lda = p.ldw = p.k;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "2^30");
}

TEST_CASE("8-bit GEMMs: misaligned zero points, column sums and bias are rejected and named") {
  llmk::DeviceBuffer<std::int8_t> buf(4096);
  llmk::DeviceBuffer<float> fbuf(64), out(64);
  llmk::DeviceBuffer<std::int32_t> z(64);
  gemm::QuantGemmArgs<std::int8_t> good{buf.data(), 32, buf.data() + 1024, 32, 4, 8, 32, {}, out.data(), 8};
  good.scales.a_scales = fbuf.data();
  good.scales.w_scales = fbuf.data();
  good.scales.a_zero_points = z.data();
  good.scales.w_column_sums = z.data() + 16;
  good.scales.bias = fbuf.data() + 16;
  REQUIRE(gemm::w8a8_gemm<float>(good, nullptr).ok());
  // One byte past an aligned pointer: never dereferenced, the launcher must refuse it first.
  auto off1 = [](auto* p) { return reinterpret_cast<decltype(p)>(reinterpret_cast<std::uintptr_t>(p) + 1); };
  auto expect = [](const llmk::Status& s, const char* needle) {
    CHECK_FALSE(s.ok());
    CHECK(s.code() == llmk::Status::Code::kInvalidArgument);
    CHECK_MESSAGE(s.message().find(needle) != std::string::npos, s.message());
  };
  auto p = good;
  p.scales.a_zero_points = off1(z.data());
  expect(gemm::w8a8_gemm<float>(p, nullptr), "'scales.a_zero_points'");
  p = good;
  p.scales.w_column_sums = off1(z.data() + 16);
  expect(gemm::w8a8_gemm<float>(p, nullptr), "'scales.w_column_sums'");
  p = good;
  p.scales.bias = off1(fbuf.data() + 16);
  expect(gemm::w8a8_gemm<float>(p, nullptr), "'scales.bias'");
  // fp8 and mixed share the validation: bias (the only one of the three they read).
  llmk::DeviceBuffer<e4m3> f8(4096);
  gemm::QuantGemmArgs<e4m3> f{f8.data(), 32, f8.data() + 1024, 32, 4, 8, 32, {}, out.data(), 8};
  f.scales.a_scales = fbuf.data();
  f.scales.w_scales = fbuf.data();
  f.scales.bias = off1(fbuf.data() + 16);
  expect(gemm::fp8_gemm<float>(f, nullptr), "'scales.bias'");
  gemm::MixedInt8Args mx;
  mx.regular = good;
  mx.regular.scales.a_zero_points = nullptr;
  mx.regular.scales.w_column_sums = nullptr;
  mx.regular.scales.bias = off1(fbuf.data() + 16);
  expect(gemm::mixed_int8_gemm<float>(mx, nullptr), "'scales.bias'");
}

TEST_CASE(
    "w8a8: split-K over a workspace gives the unsplit result bit for bit (int32 exact, fp16 dequantized)") {
  std::mt19937 rng(511);
  struct Case {
    int m, n, k, split_k;
    std::int64_t ldd;
  };
  // Small (M <= 16) and medium (M <= 64) tiles, N tails, k-tiles that do not divide evenly into the splits,
  // split_k by the SM count (0) and given (3, 16); odd ldd takes the element stores of the reduction.
  const std::vector<Case> cases = llmk::test::fast()
                                      ? std::vector<Case>{{1, 72, 1040, 0, 72}, {33, 40, 528, 3, 41}}
                                      : std::vector<Case>{{1, 200, 1040, 0, 200},
                                                          {7, 136, 2064, 3, 137},
                                                          {16, 64, 1024, 16, 64},
                                                          {33, 130, 1040, 0, 132},
                                                          {64, 72, 528, 2, 75}};
  for (const Case& c : cases) {
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    CAPTURE(c.split_k);
    const auto a = random_int8(c.m, c.k, c.k, rng), w = random_int8(c.n, c.k, c.k, rng);
    llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
    Scales sc;
    make_scales(sc, c.m, c.n, true, true, true, true, rng);
    REQUIRE(gemm::weight_column_sums(d_w.data(), c.k, c.n, c.k, sc.sums.data(), nullptr).ok());
    sc.dev.w_column_sums = sc.sums.data();
    gemm::QuantGemmArgs<std::int8_t> p{d_a.data(), c.k, d_w.data(), c.k,     c.m,
                                       c.n,        c.k, sc.dev,     nullptr, c.ldd};
    // The unsplit result (split_k = 1).
    llmk::DeviceBuffer<f16> d_one(static_cast<std::size_t>(c.m) * c.ldd);
    p.d = d_one.data();
    p.split_k = 1;
    CHECK(gemm::quant_gemm_workspace_bytes(p) == 0);
    REQUIRE(gemm::w8a8_gemm<f16>(p, nullptr).ok());
    // Split: the call must really split (a workspace is needed) for the comparison to mean anything.
    p.split_k = c.split_k;
    const std::size_t bytes = gemm::quant_gemm_workspace_bytes(p);
    REQUIRE(bytes > 0);
    auto ws = dirty_workspace(bytes, rng);
    p.workspace = ws.data();
    p.workspace_bytes = bytes;
    llmk::DeviceBuffer<f16> d_split(static_cast<std::size_t>(c.m) * c.ldd);
    p.d = d_split.data();
    for (int call = 0; call < 2; ++call) {  // the second call finds the first one's arrival words
      CAPTURE(call);
      d_split.poison();  // the second call must store every output again
      const llmk::Status st = gemm::w8a8_gemm<f16>(p, nullptr);
      REQUIRE_MESSAGE(st.ok(), st.message());
      const auto want = bits_of(d_one.to_host()), got = bits_of(d_split.to_host());
      int bad = 0;
      for (int i = 0; i < c.m; ++i)
        for (std::int64_t j = 0; j < c.ldd; ++j)  // the padding past N: poison in both
          if (got[i * c.ldd + j] != want[i * c.ldd + j] && bad++ < 5)
            MESSAGE("d[" << i << "][" << j << "] bits " << got[i * c.ldd + j] << ", unsplit "
                         << want[i * c.ldd + j]);
      CHECK(bad == 0);
    }
    // Raw int32 accumulators through the split, against the exact reference.
    llmk::DeviceBuffer<std::int32_t> d_raw(static_cast<std::size_t>(c.m) * c.ldd);
    p.d = d_raw.data();
    REQUIRE(gemm::w8a8_gemm<std::int32_t>(p, nullptr).ok());
    std::vector<std::int32_t> want(static_cast<std::size_t>(c.m) * c.ldd);
    llmk::reference::gemm_s8s8_s32(a.data(), c.k, w.data(), c.k, c.m, c.n, c.k, want.data(), c.ldd, false);
    const auto got = d_raw.to_host();
    int bad = 0;
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j) bad += got[i * c.ldd + j] != want[i * c.ldd + j];
    CHECK(bad == 0);
  }
}

TEST_CASE(
    "fp8: split-K is deterministic and within the fp8 bound; an explicit tile sizes its own workspace") {
  if (!fp8_available()) {
    MESSAGE("no fp8 mma on this device: skipped (the refusal is tested above)");
    return;
  }
  std::mt19937 rng(512);
  const Shape s = llmk::test::fast() ? Shape{5, 40, 528} : Shape{5, 100, 1056};
  Fp8Problem f;
  make_fp8_problem(f, s, rng);
  const std::vector<double>& ref = f.ref;
  const double bound = 64.0 * s.k * 2e-2 * 2e-2 * (s.k / 32 + 2);
  const std::vector<double> gpu = fp8_gpu_allowance(f.a, s.k, f.w, s.k, s.m, s.n, s.k, f.sc.host);
  const std::int64_t ldd = s.n + 3;  // the reduction's element stores; the padding must stay poisoned
  gemm::QuantGemmArgs<e4m3> p{f.d_a.data(), s.k, f.d_w.data(), s.k, s.m, s.n, s.k, f.sc.dev, nullptr, ldd};
  const std::size_t bytes = gemm::quant_gemm_workspace_bytes(p);
  REQUIRE(bytes > 0);
  auto ws = dirty_workspace(bytes, rng);
  p.workspace = ws.data();
  p.workspace_bytes = bytes;
  llmk::DeviceBuffer<float> d1(static_cast<std::size_t>(s.m) * ldd), d2(static_cast<std::size_t>(s.m) * ldd);
  p.d = d1.data();
  REQUIRE(gemm::fp8_gemm<float>(p, nullptr).ok());
  p.d = d2.data();
  REQUIRE(gemm::fp8_gemm<float>(p, nullptr).ok());
  const auto r1 = d1.to_host(), r2 = d2.to_host();
  check_close(r1, ldd, ref, s.m, s.n, bound, gpu);
  CHECK(std::memcmp(r1.data(), r2.data(), r1.size() * sizeof(float)) == 0);
  // The medium tile at this M: its own plan and workspace size.
  gemm::QuantGemmArgs<e4m3> q = p;
  q.split_k = 4;
  const std::size_t medium = gemm::quant_gemm_workspace_bytes<gemm::QGemmMedium>(q);
  REQUIRE(medium > 0);
  auto ws_medium = dirty_workspace(medium, rng);
  q.workspace = ws_medium.data();
  q.workspace_bytes = medium;
  llmk::DeviceBuffer<bf16> d3(static_cast<std::size_t>(s.m) * ldd);
  q.d = d3.data();
  const llmk::Status st = gemm::fp8_gemm_with_tile<bf16, gemm::QGemmMedium>(q, nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  check_close(d3.to_host(), ldd, ref, s.m, s.n, bound, gpu);
}

// Special values (docs/gemm.md, "Special values"): W8A8Special (quant_gemm_fixtures.hpp: NaN and +Inf scales,
// +-Inf bias, a huge activation scale) on the medium tile with zero points and fp16 out (row 5 overflows to
// +-Inf), unsplit and split in two over a dirty workspace, and on the small tile with fp32 out, split; every
// output classified (special_values.hpp). The instantiations of the cases above.
TEST_CASE(
    "w8a8 special values: NaN / Inf scales and bias propagate, fp16 overflow, with and without split-K") {
  std::mt19937 rng(521);
  {
    const Shape s{20, 40, 256};  // the medium tile: 4 k-tiles of 64
    W8A8Special p;
    make_w8a8_special(p, s, true, rng);
    const special::Pattern planted = w8a8_special_planted<f16>(s);
    const std::int64_t ldd = s.n + 8;
    llmk::DeviceBuffer<f16> d(static_cast<std::size_t>(s.m) * ldd);
    gemm::QuantGemmArgs<std::int8_t> q{p.d_a.data(), s.k, p.d_w.data(), s.k,      s.m,
                                       s.n,          s.k, p.sc.dev,     d.data(), ldd};
    d.poison();
    REQUIRE(gemm::w8a8_gemm<f16>(q, nullptr).ok());
    check_quant_special(d.to_host(), ldd, planted, p.ref, p.bound);
    auto ws = split_workspace(q, 2, rng);
    d.poison();
    const llmk::Status st = gemm::w8a8_gemm<f16>(q, nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    check_quant_special(d.to_host(), ldd, planted, p.ref, p.bound);
  }
  {
    const Shape s{6, 40, 256};  // the small tile: 2 k-tiles of 128
    W8A8Special p;
    make_w8a8_special(p, s, false, rng);
    const std::int64_t ldd = s.n + 3;
    llmk::DeviceBuffer<float> d(static_cast<std::size_t>(s.m) * ldd);
    gemm::QuantGemmArgs<std::int8_t> q{p.d_a.data(), s.k, p.d_w.data(), s.k,      s.m,
                                       s.n,          s.k, p.sc.dev,     d.data(), ldd};
    auto ws = split_workspace(q, 2, rng);
    d.poison();
    const llmk::Status st = gemm::w8a8_gemm<float>(q, nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    check_quant_special(d.to_host(), ldd, w8a8_special_planted<float>(s), p.ref, p.bound);
  }
}

// Special values of the fp8 GEMM (docs/gemm.md: NaN codes propagate like fp16 NaNs; descales and bias are not
// checked): random e4m3 operands [20, 40, 240] (a K tail: 240 = 3 * 64 + 48) with NaN codes in their padding
// past K (lda = ldw = K + 16: a load past K shows), per-token and per-channel scales and a bias, planted:
//   A[3, 5] = 0x7F and W[7, 9] = 0xFF (the two NaN codes)   row 3 and column 7 NaN
//   w_scales[11] = NaN                                       column 11 NaN
//   bias[12] = -Inf                                          column 12 -Inf
//   row 13 all zero codes, a_scales[13] = +Inf               row 13 NaN (Inf * 0)
//   a_scales[15] = 1e9                                       row 15 +-Inf in fp16 out, finite in fp32 out
// fp16 out unsplit, fp32 out split in two over a dirty workspace (the medium tile: 4 k-tiles of 64, the first
// partial).
TEST_CASE("fp8 special values: NaN codes, NaN / Inf scales, -Inf bias, Inf * 0, fp16 overflow, split-K") {
  if (!fp8_available()) {
    MESSAGE("no fp8 mma on this device: skipped");
    return;
  }
  using special::Kind;
  std::mt19937 rng(522);
  const Shape s{20, 40, 240};
  const int ld = s.k + 16;
  std::vector<e4m3> a = fp8_with_nan_padding(s.m, s.k, ld, rng);
  std::vector<e4m3> w = fp8_with_nan_padding(s.n, s.k, ld, rng);
  a[3 * ld + 5] = e4m3::from_bits(0x7F);
  w[7 * ld + 9] = e4m3::from_bits(0xFF);
  for (int kk = 0; kk < s.k; ++kk) a[13 * ld + kk] = e4m3::from_bits(0x00);
  llmk::DeviceBuffer<e4m3> d_a(a), d_w(w);
  Scales sc;
  make_scales(sc, s.m, s.n, true, true, false, true, rng);
  sc.h_w[11] = std::numeric_limits<float>::quiet_NaN();
  sc.h_a[13] = std::numeric_limits<float>::infinity();
  sc.h_a[15] = 1e9f;
  sc.h_bias[12] = -std::numeric_limits<float>::infinity();
  sc.a.upload(sc.h_a);
  sc.w.upload(sc.h_w);
  sc.bias.upload(sc.h_bias);
  std::vector<double> ref(static_cast<std::size_t>(s.m) * s.n);
  llmk::reference::gemm_dequant_fp64(a.data(), ld, w.data(), ld, s.m, s.n, s.k, sc.host, ref.data(), s.n);
  const double bound = 64.0 * s.k * 2e-2 * 2e-2 * (s.k / 32 + 2);
  auto planted = [&](bool f16_out) {
    special::Pattern p(s.m, s.n);
    if (f16_out) p.row(15, Kind::kInf);
    p.col(12, Kind::kNegInf);
    p.col(11, Kind::kNaN);
    p.col(7, Kind::kNaN);
    p.row(13, Kind::kNaN);
    p.row(3, Kind::kNaN);
    return p;
  };
  // (fp8 on a GPU: within the allowance of fp8_gpu_allowance as well; it is 0 in the simulator.)
  const std::vector<double> gpu = fp8_gpu_allowance(a, ld, w, ld, s.m, s.n, s.k, sc.host);
  gemm::QuantGemmArgs<e4m3> q{d_a.data(), ld, d_w.data(), ld, s.m, s.n, s.k, sc.dev, nullptr, s.n};
  {
    llmk::DeviceBuffer<f16> d(static_cast<std::size_t>(s.m) * s.n);
    q.d = d.data();
    d.poison();
    const llmk::Status st = gemm::fp8_gemm<f16>(q, nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    check_quant_special(d.to_host(), s.n, planted(true), ref, bound, gpu);
  }
  {
    const std::int64_t ldd = s.n + 3;
    llmk::DeviceBuffer<float> d(static_cast<std::size_t>(s.m) * ldd);
    q.d = d.data();
    q.ldd = ldd;
    auto ws = split_workspace(q, 2, rng);
    d.poison();
    const llmk::Status st = gemm::fp8_gemm<float>(q, nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    check_quant_special(d.to_host(), ldd, planted(false), ref, bound, gpu);
  }
}

// Static (per-tensor) fp8 scales that are 0, +Inf or NaN. docs/gemm.md: the descales are not checked (device
// data) and non-finite scales propagate; the epilogue computes v (s_a s_w) + bias[j] in fp32
// (detail::dequantize, quant_gemm_args.cuh; the mma.sync tiles, their split-K reduction and the Hopper
// kernel's QuantEpilogue alike), v the fp32 sum, which e4m3 operands (no Inf codes) keep finite unless a
// NaN code is summed. So, with a_per_token = w_per_channel = false:
//   s_a or s_w NaN                        every output NaN (bias or not)
//   s_a = 0 or s_w = 0 (the other finite)  every output bias[j] exactly (v * 0 = +-0), NaN where v is NaN
//   s_a or s_w = +Inf (the other finite)  +-Inf by the sign of v, NaN where v = 0 (Inf * 0) or v is NaN
//   one 0, the other +Inf                 every output NaN (s_a s_w = 0 * Inf)
// Operands: random e4m3 [M, 40, 240] (NaN codes in the padding past K), A[3, 5] = 0x7F (row 3's v NaN),
// row 13 all zero codes (v = 0), a bias in [-1, 1]. Every output classified against the fp64 reference
// (special_values.hpp). M = 14: the small tile, fp16 out; M = 20: the medium tile split in two over a dirty
// workspace, fp32 out; M = 70: fp8_gemm's M > 64 kernel (the wgmma one on the simulated sm_90), fp16 out.
// The instantiations of the cases above.
TEST_CASE("fp8 per-tensor scales 0, +Inf, NaN: NaN everywhere, the bias, +-Inf and Inf * 0 = NaN") {
  if (!fp8_available()) {
    MESSAGE("no fp8 mma on this device: skipped");
    return;
  }
  using special::Kind;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* name;
    float sa, sw;
  };
  const Case cases[] = {{"s_a NaN", nan, 0.01f},        {"s_w NaN", 0.02f, nan},
                        {"s_a 0", 0.0f, 0.01f},         {"s_w 0", 0.02f, 0.0f},
                        {"s_a +Inf", inf, 0.01f},       {"s_w +Inf", 0.02f, inf},
                        {"s_a 0, s_w +Inf", 0.0f, inf}, {"s_a +Inf, s_w 0", inf, 0.0f}};
  std::mt19937 rng(523);
  // Sanitizer builds (LLMK_TEST_FAST): the split medium tile only.
  for (const int m : llmk::test::pick(std::vector<int>{14, 20, 70}, std::vector<int>{20})) {
    CAPTURE(m);
    const Shape s{m, 40, 240};
    const int ld = s.k + 16;
    std::vector<e4m3> a = fp8_with_nan_padding(s.m, s.k, ld, rng);
    const std::vector<e4m3> w = fp8_with_nan_padding(s.n, s.k, ld, rng);
    a[3 * ld + 5] = e4m3::from_bits(0x7F);
    for (int kk = 0; kk < s.k; ++kk) a[13 * ld + kk] = e4m3::from_bits(0x00);
    llmk::DeviceBuffer<e4m3> d_a(a), d_w(w);
    Scales sc;
    make_scales(sc, s.m, s.n, false, false, false, true, rng);
    const double bound = 64.0 * s.k * 2e-2 * 2e-2 * (s.k / 32 + 2);
    for (const Case& c : cases) {
      const std::string scales = c.name;
      CAPTURE(scales);
      sc.h_a[0] = c.sa;
      sc.h_w[0] = c.sw;
      sc.a.upload(sc.h_a);
      sc.w.upload(sc.h_w);
      std::vector<double> ref(static_cast<std::size_t>(s.m) * s.n);
      llmk::reference::gemm_dequant_fp64(a.data(), ld, w.data(), ld, s.m, s.n, s.k, sc.host, ref.data(), s.n);
      // The planted classes, from the rules above alone.
      const double factor = static_cast<double>(c.sa) * c.sw;  // NaN for a NaN scale and for 0 * Inf
      special::Pattern planted(s.m, s.n);
      if (std::isnan(factor)) {
        for (int i = 0; i < s.m; ++i) planted.row(i, Kind::kNaN);
      } else if (std::isinf(factor)) {
        for (int i = 0; i < s.m; ++i) planted.row(i, Kind::kInf);
        planted.row(13, Kind::kNaN);
      }
      planted.row(3, Kind::kNaN);
      const std::vector<double> gpu = fp8_gpu_allowance(a, ld, w, ld, s.m, s.n, s.k, sc.host);
      const auto tol = [&](int i, int j) {
        const std::size_t r = static_cast<std::size_t>(i) * s.n + j;
        return std::fabs(ref[r]) * (0x1p-11 + 8 * 0x1p-24) + bound * 0x1p-22 + 1e-6 +
               (gpu.empty() ? 0.0 : gpu[r]);
      };
      // Counts and, for a zero scale, the bias bit for bit (Out(bias[j])).
      auto check = [&](const auto& got, std::int64_t ldd) {
        using Out = typename std::decay_t<decltype(got)>::value_type;
        const special::Pattern want = special::check_special(got, ldd, planted, ref, tol);
        if (std::isnan(factor)) {
          CHECK(want.count(Kind::kNaN) == s.m * s.n);
        } else if (std::isinf(factor)) {
          CHECK(want.count(Kind::kNaN) == 2 * s.n);
          CHECK(want.count(Kind::kPosInf) > s.m * s.n / 4);
          CHECK(want.count(Kind::kNegInf) > s.m * s.n / 4);
        } else {
          REQUIRE(factor == 0.0);
          CHECK(want.count(Kind::kNaN) == s.n);
          int not_bias = 0;
          for (int i = 0; i < s.m; ++i)
            for (int j = 0; j < s.n; ++j) {
              const Out g = got[static_cast<std::size_t>(i) * ldd + j], b = Out(sc.h_bias[j]);
              if (i != 3 && std::memcmp(&g, &b, sizeof(Out)) != 0 && not_bias++ < 5)
                MESSAGE("D[" << i << "][" << j << "] = " << static_cast<float>(g) << ", want the bias "
                             << static_cast<float>(b));
            }
          CHECK(not_bias == 0);
        }
      };
      gemm::QuantGemmArgs<e4m3> q{d_a.data(), ld, d_w.data(), ld, s.m, s.n, s.k, sc.dev, nullptr, s.n};
      if (m == 20) {
        const std::int64_t ldd = s.n + 3;
        llmk::DeviceBuffer<float> d(static_cast<std::size_t>(s.m) * ldd);
        q.d = d.data();
        q.ldd = ldd;
        auto ws = split_workspace(q, 2, rng);
        d.poison();
        const llmk::Status st = gemm::fp8_gemm<float>(q, nullptr);
        REQUIRE_MESSAGE(st.ok(), st.message());
        check(d.to_host(), ldd);
      } else {
        llmk::DeviceBuffer<f16> d(static_cast<std::size_t>(s.m) * s.n);
        q.d = d.data();
        d.poison();
        const llmk::Status st = gemm::fp8_gemm<f16>(q, nullptr);
        REQUIRE_MESSAGE(st.ok(), st.message());
        check(d.to_host(), s.n);
      }
    }
  }
}

#if defined(LLMK_SIM)
TEST_CASE(
    "8-bit GEMMs at M > 64 on simulated sm_80 / sm_89: the large mma.sync tile's epilogue and split-K") {
  // The default simulated device is an sm_90, where M > 64 runs the wgmma kernel: this is the large tile's
  // dequantizing epilogue (per-token scales and zero points, per-channel scales, bias) and its split-K.
  std::mt19937 rng(514);
  const Shape s = llmk::test::fast() ? Shape{70, 40, 96} : Shape{130, 72, 208};
  CAPTURE(s.m);
  {
    llmk::test::ScopedEnv sm80("LLMK_SIM_ARCH", "800");
    REQUIRE(gemm::choose_qgemm_tile(s.m) == gemm::QGemmTileKind::kLarge);
    const auto a = random_int8(s.m, s.k, s.k, rng), w = random_int8(s.n, s.k, s.k, rng);
    llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
    Scales sc;
    make_scales(sc, s.m, s.n, true, true, true, true, rng);
    REQUIRE(gemm::weight_column_sums(d_w.data(), s.k, s.n, s.k, sc.sums.data(), nullptr).ok());
    sc.dev.w_column_sums = sc.sums.data();
    std::vector<double> ref(static_cast<std::size_t>(s.m) * s.n);
    llmk::reference::gemm_dequant_fp64(a.data(), s.k, w.data(), s.k, s.m, s.n, s.k, sc.host, ref.data(), s.n);
    const double bound = 128.0 * 128.0 * s.k * 2e-2 * 2e-2;
    const std::int64_t ldd = s.n + 8;
    gemm::QuantGemmArgs<std::int8_t> p{d_a.data(), s.k, d_w.data(), s.k, s.m, s.n, s.k, sc.dev, nullptr, ldd};
    llmk::DeviceBuffer<f16> d(static_cast<std::size_t>(s.m) * ldd);
    p.d = d.data();
    REQUIRE(gemm::w8a8_gemm<f16>(p, nullptr).ok());
    const auto unsplit = d.to_host();
    check_close(unsplit, ldd, ref, s.m, s.n, bound);
    p.split_k = 2;  // the large tile over a workspace: bit for bit the unsplit result
    const std::size_t bytes = gemm::quant_gemm_workspace_bytes(p);
    REQUIRE(bytes > 0);
    auto ws = dirty_workspace(bytes, rng);
    p.workspace = ws.data();
    p.workspace_bytes = bytes;
    d.poison();
    const llmk::Status st = gemm::w8a8_gemm<f16>(p, nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    CHECK(bits_of(d.to_host()) == bits_of(unsplit));
  }
  {
    llmk::test::ScopedEnv sm89("LLMK_SIM_ARCH", "890");
    Fp8Problem f;
    make_fp8_problem(f, s, rng);
    const double bound = 64.0 * s.k * 2e-2 * 2e-2 * (s.k / 32 + 2);
    const std::int64_t ldd = s.n + 8;  // 16-byte stores (N is a multiple of 8), the padding untouched
    gemm::QuantGemmArgs<e4m3> p{f.d_a.data(), s.k, f.d_w.data(), s.k, s.m, s.n, s.k, f.sc.dev, nullptr, ldd};
    llmk::DeviceBuffer<float> d(static_cast<std::size_t>(s.m) * ldd);
    p.d = d.data();
    REQUIRE(gemm::fp8_gemm<float>(p, nullptr).ok());
    check_close(d.to_host(), ldd, f.ref, s.m, s.n, bound);
  }
}
#endif

TEST_CASE("8-bit GEMMs: split-K arguments are checked and named") {
  llmk::DeviceBuffer<std::int8_t> buf(64 * 1024);
  llmk::DeviceBuffer<float> fbuf(64);
  llmk::DeviceBuffer<float> out(64);
  gemm::QuantGemmArgs<std::int8_t> good{buf.data(), 1024, buf.data() + 4096, 1024, 2, 16,
                                        1024,       {},   out.data(),        16};
  good.scales.a_scales = fbuf.data();
  good.scales.w_scales = fbuf.data();
  auto expect = [](const llmk::Status& s, const char* arg, const char* needle) {
    CHECK_FALSE(s.ok());
    INFO(s.message());
    CHECK(s.message().find(arg) != std::string::npos);
    CHECK(s.message().find(needle) != std::string::npos);
  };
  auto p = good;
  p.split_k = gemm::kSplitKMaxSplits + 1;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "split_k", "must be in [0, 16]");
  p.split_k = -1;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "split_k", "must be in [0, 16]");
  CHECK(gemm::quant_gemm_workspace_bytes(p) == 0);
  p = good;
  p.split_k = 4;
  const std::size_t need = gemm::quant_gemm_workspace_bytes(p);
  REQUIRE(need > 0);
  expect(gemm::w8a8_gemm<float>(p, nullptr), "workspace", "must not be null");
  llmk::DeviceBuffer<unsigned char> ws(need + 16);
  p.workspace = ws.data() + 8;
  p.workspace_bytes = need;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "workspace", "16-byte aligned");
  p.workspace = ws.data();
  p.workspace_bytes = need - 1;
  expect(gemm::w8a8_gemm<float>(p, nullptr), "workspace_bytes", "must be >=");
  p.workspace_bytes = need;
  CHECK(gemm::w8a8_gemm<float>(p, nullptr).ok());
  // split_k = 0 without a workspace runs unsplit (valid); the mixed GEMM takes no workspace at all.
  CHECK(gemm::w8a8_gemm<float>(good, nullptr).ok());
  gemm::MixedInt8Args mixed;
  mixed.regular = good;
  mixed.regular.workspace = ws.data();
  mixed.regular.workspace_bytes = need;
  expect(gemm::mixed_int8_gemm<float>(mixed, nullptr), "regular.workspace", "does not split K");
}

TEST_CASE("8-bit GEMMs: the split plan fills one wave of resident blocks (bench/model/sass.py mirrors it)") {
  auto splits = [](auto* tile, int m, int n, int k) {
    using Tile = std::remove_pointer_t<decltype(tile)>;
    return gemm::detail::qgemm_split_plan<Tile>(m, n, k, 0, 132).splits;
  };
  gemm::QGemmSmall* small = nullptr;
  gemm::QGemmMedium* medium = nullptr;
  // The counts tests/perf/test_perf_tools.py expects of qgemm_splits (an H100: 132 SMs, 228 KiB an SM).
  CHECK(splits(small, 1, 4096, 4096) == 8);     // 64 tiles x 8 = 512 blocks: 4 an SM
  CHECK(splits(small, 1, 11008, 4096) == 3);    // 172 tiles
  CHECK(splits(small, 16, 4096, 11008) == 8);   // 86 k-tiles: 11 a split
  CHECK(splits(medium, 64, 4096, 4096) == 8);   // capped by the partials' traffic (K / 8M)
  CHECK(splits(medium, 64, 11008, 4096) == 4);  // 86 tiles, 3 blocks an SM
  CHECK(splits(medium, 64, 4096, 11008) == 12);
  CHECK(splits(medium, 64, 72, 528) == 1);  // K / 8M = 1
  CHECK(gemm::detail::qgemm_split_plan<gemm::QGemmSmall>(1, 4096, 4096, 5, 132).splits ==
        5);  // 7 k-tiles a split
  CHECK(gemm::detail::qgemm_split_plan<gemm::QGemmSmall>(1, 4096, 4096, 16, 132).splits == 16);  // 2 each
}
