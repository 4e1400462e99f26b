// Tests of the host calibrators (llmk/quant/calibration.hpp): min/max, percentile and KL histograms, GPTQ's
// MSE clipping search, batch accumulation, edge cases and the claims about when clipping beats absmax.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "llmk/core/status.cuh"
#include "llmk/quant/calibration.hpp"
#include "support/test_env.hpp"

using namespace llmk::quant;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

using Int8Sym = Quantizer<int8_t, Symmetric, PerTensor>;
using Int4Sym = Quantizer<llmk::int4_t, Symmetric, PerTensor>;
using Int4Asym = Quantizer<llmk::int4_t, Asymmetric, PerTensor>;

template <class Q>
double quant_mse(const std::vector<float>& x, QuantParams p) {
  double e = 0.0;
  for (float v : x) {
    const double d = static_cast<double>(Q::dequantize(Q::quantize(v, p), p)) - v;
    e += d * d;
  }
  return e / static_cast<double>(x.size());
}

// Heavy-tailed "activations": Laplace(0, 1) bulk with `outliers` planted values of magnitude 80..120 (~100x
// the typical |x| of 1), random signs and positions.
std::vector<float> heavy_tailed(std::size_t n, int outliers, std::mt19937& rng) {
  std::exponential_distribution<float> e(1.0f);
  std::uniform_real_distribution<float> big(80.0f, 120.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = rng() % 2 ? e(rng) : -e(rng);
  for (int i = 0; i < outliers; ++i) x[rng() % n] = rng() % 2 ? big(rng) : -big(rng);
  return x;
}

template <class F>
void expect_invalid(F&& f, const char* needle) {
  try {
    f();
    FAIL("no exception; expected one mentioning " << needle);
  } catch (const llmk::Error& e) {
    CHECK(e.status().code() == llmk::Status::Code::kInvalidArgument);
    CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

// A literal port of TensorRT's / MXNet's entropy search (written from the published pseudo code, independent
// of kl_search's loops), for small histograms.
double reference_kl_divergence(const std::vector<double>& hist, int i, int nq) {
  const int n = static_cast<int>(hist.size());
  std::vector<double> p(hist.begin(), hist.begin() + i);
  for (int j = i; j < n; ++j) p[static_cast<std::size_t>(i - 1)] += hist[static_cast<std::size_t>(j)];
  std::vector<double> quantized(static_cast<std::size_t>(nq), 0.0);
  const int merged = i / nq;
  for (int g = 0; g < nq; ++g)
    for (int j = g * merged; j < (g + 1) * merged; ++j)
      quantized[static_cast<std::size_t>(g)] += hist[static_cast<std::size_t>(j)];
  for (int j = nq * merged; j < i; ++j)
    quantized[static_cast<std::size_t>(nq - 1)] += hist[static_cast<std::size_t>(j)];
  std::vector<double> q(static_cast<std::size_t>(i), 0.0);
  for (int g = 0; g < nq; ++g) {
    const int start = g * merged, stop = g == nq - 1 ? i : start + merged;
    int norm = 0;
    for (int j = start; j < stop; ++j) norm += p[static_cast<std::size_t>(j)] != 0.0;
    if (norm)
      for (int j = start; j < stop; ++j)
        q[static_cast<std::size_t>(j)] = quantized[static_cast<std::size_t>(g)] / norm;
  }
  for (int j = 0; j < i; ++j)
    if (p[static_cast<std::size_t>(j)] == 0.0) q[static_cast<std::size_t>(j)] = 0.0;
  auto smooth = [](std::vector<double>& d) {
    const double eps = 1e-4;
    double zeros = 0;
    for (double v : d) zeros += v == 0.0;
    const double eps1 = eps * zeros / (static_cast<double>(d.size()) - zeros);
    for (double& v : d) v += v == 0.0 ? eps : -eps1;
  };
  smooth(p);
  smooth(q);
  double sp = 0, sq = 0, kl = 0;
  for (int j = 0; j < i; ++j) sp += p[static_cast<std::size_t>(j)], sq += q[static_cast<std::size_t>(j)];
  for (int j = 0; j < i; ++j) {
    const double a = p[static_cast<std::size_t>(j)] / sp, b = q[static_cast<std::size_t>(j)] / sq;
    kl += a * std::log(a / b);
  }
  return kl;
}

}  // namespace

TEST_CASE("MinMaxCalibrator: running min/max/amax, NaN/Inf skipped, empty, strided views, 16-bit inputs") {
  MinMaxCalibrator c;
  CHECK(c.amax() == 0.0f);
  CHECK(c.range().min == 0.0f);
  const float a[] = {1.5f, -2.0f, kNaN, 0.25f};
  c.observe(a, 4);
  const float b[] = {kInf, -kInf, 3.0f};
  c.observe(b, 3);
  CHECK(c.min() == -2.0f);
  CHECK(c.max() == 3.0f);
  CHECK(c.amax() == 3.0f);
  CHECK(c.finite_count() == 4);
  CHECK(c.non_finite_count() == 3);
  MinMaxCalibrator only_bad;
  only_bad.observe(b, 2);
  CHECK(only_bad.amax() == 0.0f);  // all non-finite behaves like all-zero
  CHECK(to_quant_params<Int8Sym>(only_bad.range()).scale == 1.0f);
  const QuantParams asym = to_quant_params<Int4Asym>(only_bad.range());
  CHECK(asym.scale == 2.0f / 15.0f);  // the [-1, 1] range of an empty group
  // A strided [2, 3] view of a [2, 4] buffer: the padding column (100) is not read.
  const llmk::half h[] = {llmk::half(1.0f), llmk::half(-5.0f), llmk::half(2.0f),  llmk::half(100.0f),
                          llmk::half(0.5f), llmk::half(4.0f),  llmk::half(-1.0f), llmk::half(-100.0f)};
  MinMaxCalibrator v;
  v.observe(h, 2, 3, 4);
  CHECK(v.min() == -5.0f);
  CHECK(v.max() == 4.0f);
  CHECK(v.finite_count() == 6);
  // to_quant_params uses the scheme arithmetic
  CHECK(to_quant_params<Int8Sym>(c.range()).scale == Int8Sym::params_from_absmax(3.0f).scale);
  const QuantParams p4 = to_quant_params<Int4Asym>(c.range());
  CHECK(p4.scale == Int4Asym::params_from_range(-2.0f, 3.0f).scale);
  CHECK(p4.zero_point == Int4Asym::params_from_range(-2.0f, 3.0f).zero_point);
}

TEST_CASE("AbsHistogram: resolution, percentile bounds, zeros and non-finite values") {
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(llmk::test::pick<std::size_t>(50000, 20000));
  for (auto& v : x) v = g(rng);
  AbsHistogram h;
  h.observe(x.data(), x.size());
  const float amax = h.minmax().amax();
  // Resolution: amax / 2048 < w <= amax / 1024.
  CHECK(h.bin_width() > amax / 2048.0);
  CHECK(h.bin_width() <= amax / 1024.0);
  std::uint64_t total = 0;
  for (auto c : h.counts()) total += c;
  CHECK(total == x.size());
  std::vector<float> sorted(x.size());
  std::transform(x.begin(), x.end(), sorted.begin(), [](float v) { return std::fabs(v); });
  std::sort(sorted.begin(), sorted.end());
  for (double p : {50.0, 99.0, 99.9, 99.99, 100.0}) {
    CAPTURE(p);
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(x.size())));
    const float exact = sorted[rank - 1];
    const float got = h.percentile(p);
    CHECK(got >= exact);                  // at least p% of the values are <= the result
    CHECK(got <= exact + h.bin_width());  // within one bin
  }
  CHECK(h.percentile(100.0) == amax);
  // Zeros before the first non-zero value, then NaN / Inf.
  AbsHistogram z;
  const float zeros[] = {0.0f, -0.0f, 0.0f};
  z.observe(zeros, 3);
  CHECK(z.bin_width() == 0.0);
  CHECK(z.percentile(50.0) == 0.0f);
  const float more[] = {kNaN, 1.0f, kInf, 0.0f};
  z.observe(more, 4);
  CHECK(z.counts()[0] == 4);  // the three pending zeros and the new one
  CHECK(z.total() == 5);
  CHECK(z.bin_width() == std::ldexp(1.0, 1 - 11));  // amax 1: R = 2 (strictly greater), w = 2 / 2048
  CHECK(z.percentile(80.0) == 0.0f + static_cast<float>(z.bin_width()));
  CHECK(z.percentile(100.0) == 1.0f);
}

TEST_CASE("Accumulating many batches equals one big batch (min/max, histogram, percentile, KL exactly)") {
  std::mt19937 rng(7);
  std::vector<float> x = heavy_tailed(llmk::test::pick<std::size_t>(40000, 12000), 3, rng);
  x[17] = kNaN;
  x[18] = -kInf;
  x[19] = 0.0f;
  PercentileCalibrator one(99.9);
  KLCalibrator kl_one(128);
  MinMaxCalibrator mm_one;
  one.observe(x.data(), x.size());
  kl_one.observe(x.data(), x.size());
  mm_one.observe(x.data(), x.size());
  // Batches of random sizes, small-magnitude first so the range grows (re-binning) several times.
  std::vector<float> ordered = x;
  std::stable_partition(ordered.begin(), ordered.end(), [](float v) { return std::fabs(v) < 2.0f; });
  PercentileCalibrator many(99.9);
  KLCalibrator kl_many(128);
  MinMaxCalibrator mm_many;
  for (std::size_t i = 0; i < ordered.size();) {
    const std::size_t len = std::min<std::size_t>(1 + rng() % 3000, ordered.size() - i);
    many.observe(ordered.data() + i, len);
    kl_many.observe(ordered.data() + i, len);
    mm_many.observe(ordered.data() + i, len);
    i += len;
  }
  CHECK(mm_many.min() == mm_one.min());
  CHECK(mm_many.max() == mm_one.max());
  CHECK(mm_many.finite_count() == mm_one.finite_count());
  CHECK(mm_many.non_finite_count() == mm_one.non_finite_count());
  CHECK(many.bin_width() == one.bin_width());
  CHECK(many.counts() == one.counts());
  CHECK(many.amax() == one.amax());
  CHECK(kl_many.amax() == kl_one.amax());
}

TEST_CASE("kl_search follows the TensorRT/MXNet definition (literal port on small histograms)") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 4; ++trial) {
    const int n = 64, nq = 8;
    std::vector<std::uint64_t> counts(static_cast<std::size_t>(n));
    std::vector<double> hist(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
      // decaying counts with holes and a far tail (the shape that makes clipping pay)
      std::uint64_t c = j < 20 ? 1000 / (j + 1) + rng() % 50 : (rng() % 4 == 0 ? rng() % 3 : 0);
      if (trial == 3 && j == n - 1) c = 5;
      counts[static_cast<std::size_t>(j)] = c;
      hist[static_cast<std::size_t>(j)] = static_cast<double>(c);
    }
    int best_i = 0;
    double best = std::numeric_limits<double>::infinity();
    for (int i = nq; i <= n; ++i) {
      const double d = reference_kl_divergence(hist, i, nq);
      if (d < best) best = d, best_i = i;
    }
    const KLSearchResult r = kl_search(counts, 0.5, nq, 1000.0f);
    CHECK(r.bins_kept == best_i);
    CHECK(r.divergence == doctest::Approx(best).epsilon(1e-9));
    CHECK(r.threshold == static_cast<float>((best_i + 0.5) * 0.5));
  }
  // An all-zero histogram: threshold 0.
  std::vector<std::uint64_t> zeros(2048, 0);
  CHECK(kl_search(zeros, 1.0, 128, 0.0f).threshold == 0.0f);
}

TEST_CASE("KL calibration on Gaussian activations with outliers picks a threshold well below the max") {
  std::mt19937 rng(9);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(llmk::test::pick<std::size_t>(40000, 16000));
  for (auto& v : x) v = g(rng);
  for (int i = 0; i < 4; ++i) x[rng() % x.size()] = i % 2 ? 100.0f : -90.0f;
  KLCalibrator kl;  // int8: 128 levels
  kl.observe(x.data(), x.size());
  const float t = kl.amax();
  CAPTURE(t);
  CHECK(t < 0.25f * kl.minmax().amax());  // far below the 100x outliers
  CHECK(t > 2.5f);                        // but not into the Gaussian bulk
  const ClipRange r = kl.range();
  CHECK(r.max == t);
  CHECK(r.min == -t);
  // Without outliers, int4 (8 levels) clips harder than int8 (128 levels): fewer levels, coarser steps.
  std::vector<float> clean(x.size());
  for (auto& v : clean) v = g(rng);
  KLCalibrator k8(128), k4(8);
  k8.observe(clean.data(), clean.size());
  k4.observe(clean.data(), clean.size());
  CHECK(k4.amax() < k8.amax());
  CHECK(k8.amax() <= k8.minmax().amax());
}

// When does clipping beat absmax? Quantization MSE ~ step^2 / 12 for the values inside the range plus the
// squared clipping error of the values outside. With a bulk of scale ~1 and rare outliers of ~100:
//  - int4 (7 positive levels): absmax makes the step ~100 / 7 = 14, the whole bulk rounds to 0 (MSE ~ E[x^2]
//  = 2
//    for Laplace(1)); clipping near the bulk costs (100 - t)^2 per outlier, ~1e4 * rate: clipping wins as
//    long as outliers are rarer than ~1e-4. That is the regime below (2 in 65536).
//  - int8 (127 levels): absmax's step is ~0.8, bulk MSE ~0.05; clipping still costs ~1e4 * rate, so it only
//  wins
//    for outliers rarer than ~5e-6. With the same data, int8 percentile clipping is ~5x worse than absmax:
//    for int8 activations with such outliers use the LLM.int8() split (llmk/quant/outliers.cuh) or
//    SmoothQuant.
//  - GPTQ's MSE search minimizes sum |err|^2.4 (which weighs the clipped outliers more than MSE does) and
//  never
//    shrinks below 0.21 * amax; it helps when outliers are this rare and otherwise stays near absmax (it
//    never does much worse than absmax since p = 1 is a candidate).
TEST_CASE(
    "Percentile, KL and MSE clipping beat absmax on heavy-tailed data with rare ~100x outliers (int4)") {
  std::mt19937 rng(1);
  const std::vector<float> x = heavy_tailed(65536, 2, rng);
  MinMaxCalibrator mm;
  PercentileCalibrator p999(99.9), p9999(99.99);
  KLCalibrator kl(8);                                 // int4: 8 levels per side
  for (std::size_t i = 0; i < x.size(); i += 4096) {  // 16 batches
    mm.observe(x.data() + i, 4096);
    p999.observe(x.data() + i, 4096);
    p9999.observe(x.data() + i, 4096);
    kl.observe(x.data() + i, 4096);
  }
  REQUIRE(mm.amax() > 80.0f);
  const double absmax = quant_mse<Int4Sym>(x, to_quant_params<Int4Sym>(mm.range()));
  const double perc999 = quant_mse<Int4Sym>(x, to_quant_params<Int4Sym>(p999.range()));
  const double perc9999 = quant_mse<Int4Sym>(x, to_quant_params<Int4Sym>(p9999.range()));
  const double kld = quant_mse<Int4Sym>(x, to_quant_params<Int4Sym>(kl.range()));
  const MseClipResult ms = mse_clip_search<Int4Sym>(std::span<const float>(x));
  const double mse = quant_mse<Int4Sym>(x, ms.params);
  MESSAGE("int4 MSE: absmax " << absmax << ", p99.9 " << perc999 << ", p99.99 " << perc9999 << ", KL " << kld
                              << ", GPTQ search " << mse << " (p=" << ms.shrink << ")");
  CHECK(perc999 < 0.5 * absmax);
  CHECK(perc9999 < 0.5 * absmax);
  CHECK(kld < 0.5 * absmax);
  CHECK(mse < 0.75 * absmax);  // bounded by the 0.21 * amax floor of the grid: ~0.48 here
  // The same data in int8: clipping the outliers costs more than absmax's coarser steps.
  const double absmax8 = quant_mse<Int8Sym>(x, to_quant_params<Int8Sym>(mm.range()));
  const double perc8 = quant_mse<Int8Sym>(x, to_quant_params<Int8Sym>(p999.range()));
  const double mse8 = quant_mse<Int8Sym>(x, mse_clip_search<Int8Sym>(std::span<const float>(x)).params);
  MESSAGE("int8 MSE: absmax " << absmax8 << ", p99.9 " << perc8 << ", GPTQ search " << mse8);
  CHECK(perc8 > 3.0 * absmax8);  // ~5x here
  CHECK(mse8 <= 1.05 * absmax8);
}

TEST_CASE("MSE search per group (GPTQ usage) beats per-group absmax on Gaussian rows with 100x outliers") {
  std::mt19937 rng(2);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const std::int64_t rows = 16, cols = 1024, group = 128;
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (auto& v : w) v = g(rng);
  for (int i = 0; i < 8; ++i) w[rng() % w.size()] = i % 2 ? 100.0f : -100.0f;
  using Q = Quantizer<llmk::int4_t, Asymmetric, GroupWise<128>>;
  std::vector<QuantParams> params(static_cast<std::size_t>(rows * (cols / group)));
  mse_clip_search_rows<Q>(w.data(), rows, cols, cols, group, params.data());
  double err_absmax = 0.0, err_mse = 0.0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t gi = 0; gi < cols / group; ++gi) {
      const float* p = w.data() + r * cols + gi * group;
      MinMaxCalibrator mm;
      mm.observe(p, static_cast<std::size_t>(group));
      const QuantParams pa = to_quant_params<Q>(mm.range()),
                        pm = params[static_cast<std::size_t>(r * (cols / group) + gi)];
      for (std::int64_t i = 0; i < group; ++i) {
        const double da = Q::dequantize(Q::quantize(p[i], pa), pa) - p[i];
        const double dm = Q::dequantize(Q::quantize(p[i], pm), pm) - p[i];
        err_absmax += da * da;
        err_mse += dm * dm;
      }
    }
  MESSAGE("per-group int4 MSE: absmax " << err_absmax / w.size() << ", GPTQ search " << err_mse / w.size());
  // The groups holding an outlier stay near absmax (clipping a 100x value costs too much); every other group
  // tightens its range, a modest but systematic gain.
  CHECK(err_mse < 0.98 * err_absmax);
}

TEST_CASE("mse_clip_search with the GPTQ defaults reproduces a brute-force evaluation") {
  std::mt19937 rng(3);
  std::vector<float> x = heavy_tailed(300, 1, rng);
  x[10] = kNaN;  // skipped by the range and the error
  auto brute = [&](auto q_tag, double norm) {
    using Q = decltype(q_tag);
    MinMaxCalibrator mm;
    mm.observe(x.data(), x.size());
    double best = std::numeric_limits<double>::infinity();
    QuantParams best_p{};
    for (int i = 0; i < 80; ++i) {  // int(0.8 * 100)
      const double p = 1.0 - i / 100.0;
      const float pf = static_cast<float>(p), lo = pf * mm.min(), hi = pf * mm.max();
      QuantParams params;
      if constexpr (Q::kAsymmetric)
        params = Q::params_from_range(lo, hi);
      else
        params = Q::params_from_absmax(std::max(std::fabs(lo), std::fabs(hi)));
      double err = 0.0;
      for (float v : x)
        if (std::isfinite(v))
          err += std::pow(std::fabs(static_cast<double>(Q::dequantize(Q::quantize(v, params), params)) - v),
                          norm);
      if (err < best) best = err, best_p = params;
    }
    const MseClipResult r = mse_clip_search<Q>(std::span<const float>(x), 100, 0.8, norm);
    CHECK(r.params.scale == best_p.scale);
    CHECK(r.params.zero_point == best_p.zero_point);
    CHECK(r.error == doctest::Approx(best).epsilon(1e-12));
    CHECK(r.shrink <= 1.0f);
    CHECK(r.shrink >= 0.21f - 1e-6f);
  };
  brute(Int4Asym{}, 2.4);
  brute(Int4Sym{}, 2.4);
  brute(Int8Sym{}, 2.4);
  brute(Quantizer<llmk::float8_e4m3, Symmetric, PerTensor>{}, 2.0);
  // All-zero input: every candidate is equal, the first (p = 1) is kept.
  std::vector<float> zeros(16, 0.0f);
  const MseClipResult z = mse_clip_search<Int8Sym>(std::span<const float>(zeros));
  CHECK(z.shrink == 1.0f);
  CHECK(z.params.scale == 1.0f);
  CHECK(z.error == 0.0);
}

TEST_CASE("calibration rejects bad arguments with a message naming the argument") {
  expect_invalid([] { PercentileCalibrator c(0.0); }, "'percentile': must be in (0, 100]");
  expect_invalid([] { PercentileCalibrator c(100.5); }, "'percentile'");
  expect_invalid([] { AbsHistogram().percentile(-1.0); }, "'percentile'");
  expect_invalid([] { KLCalibrator c(0); }, "'num_quant_bins': must be in [1, 2048]");
  expect_invalid([] { KLCalibrator c(4096); }, "'num_quant_bins'");
  expect_invalid(
      [] {
        std::vector<std::uint64_t> h(16, 1);
        kl_search(h, 1.0, 17, 1.0f);
      },
      "'num_quant_bins': must be in [1, number of bins]");
  expect_invalid(
      [] {
        std::vector<std::uint64_t> h(16, 1);
        kl_search(h, -1.0, 4, 1.0f);
      },
      "'bin_width': must be >= 0");
  expect_invalid([] { MinMaxCalibrator().observe(static_cast<const float*>(nullptr), 3); },
                 "'data': must not be null");
  expect_invalid([] { AbsHistogram().observe(static_cast<const float*>(nullptr), 3); }, "'data'");
  float buf[8] = {};
  expect_invalid([&] { MinMaxCalibrator().observe(buf, 2, 4, 3); }, "'ld': must be >= cols (cols=4, ld=3)");
  expect_invalid([&] { MinMaxCalibrator().observe(buf, -1, 4, 4); }, "'rows': must be >= 0");
  expect_invalid([&] { MinMaxCalibrator().observe(buf, 1, -4, 4); }, "'cols': must be >= 0");
  expect_invalid([&] { MinMaxCalibrator().observe(static_cast<const float*>(nullptr), 2, 4, 4); },
                 "'data': must not be null");
  const std::span<const float> s(buf, 8);
  expect_invalid([&] { mse_clip_search<Int8Sym>(s, 0); }, "'grid': must be >= 1");
  expect_invalid([&] { mse_clip_search<Int8Sym>(s, 100, 0.0); }, "'maxshrink': must be in (0, 1]");
  expect_invalid([&] { mse_clip_search<Int8Sym>(s, 100, 1.5); }, "'maxshrink'");
  expect_invalid([&] { mse_clip_search<Int8Sym>(s, 100, 0.8, 0.0); }, "'norm': must be > 0");
  expect_invalid([&] { mse_clip_search<Int8Sym>(static_cast<const float*>(nullptr), 4); },
                 "'x': must not be null");
  QuantParams out[4];
  expect_invalid([&] { mse_clip_search_rows<Int8Sym>(buf, 2, 4, 4, 3, out); },
                 "'group_size': must divide cols (cols=4, group_size=3)");
  expect_invalid([&] { mse_clip_search_rows<Int8Sym>(buf, 2, 4, 4, 0, out); }, "'group_size'");
  expect_invalid([&] { mse_clip_search_rows<Int8Sym>(buf, 2, 4, 4, 2, static_cast<QuantParams*>(nullptr)); },
                 "'params': must not be null");
}
