// Tests of the online-softmax building blocks (llmk/attention/online_softmax.cuh) on the host: the scalar
// state, the merges and the LSE converters, against direct fp64 computations. The fragment version
// (FragmentSoftmax) runs inside every attention kernel and is tested through them.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "llmk/attention/online_softmax.cuh"

namespace attn = llmk::attention;

namespace {

// Direct softmax-weighted average and natural LSE of scores s (natural units) over values v, in fp64.
void direct(const std::vector<double>& s, const std::vector<double>& v, double* out, double* lse) {
  double m = -INFINITY;
  for (double x : s) m = std::max(m, x);
  double l = 0.0, o = 0.0;
  for (std::size_t j = 0; j < s.size(); ++j) {
    l += std::exp(s[j] - m);
    o += std::exp(s[j] - m) * v[j];
  }
  *out = o / l;
  *lse = m + std::log(l);
}

}  // namespace

TEST_CASE("SoftmaxState: streaming add equals the direct softmax, also for scores around +-80") {
  std::mt19937 rng(301);
  for (double spread : {1.0, 80.0}) {
    std::uniform_real_distribution<double> dist(-spread, spread);
    std::vector<double> s(257), v(257);
    for (auto& x : s) x = dist(rng);
    for (auto& x : v) x = dist(rng) / spread;
    attn::SoftmaxState st;
    float o = 0.0f;
    for (std::size_t j = 0; j < s.size(); ++j) {
      float old_scale, p;
      st.add(static_cast<float>(s[j]) * attn::kLog2e, old_scale, p);
      o = o * old_scale + p * static_cast<float>(v[j]);
    }
    double want, want_lse;
    direct(s, v, &want, &want_lse);
    CAPTURE(spread);
    CHECK(std::isfinite(st.l));
    CHECK(o / st.l == doctest::Approx(want).epsilon(1e-4));
    CHECK(st.lse() == doctest::Approx(want_lse).epsilon(1e-5));
  }
}

TEST_CASE("SoftmaxState: merge of two halves equals the whole; rescale_to; empty states") {
  std::mt19937 rng(302);
  std::uniform_real_distribution<double> dist(-20.0, 20.0);
  std::vector<double> s(100), v(100);
  for (auto& x : s) x = dist(rng);
  for (auto& x : v) x = dist(rng) / 20.0;
  attn::SoftmaxState a, b;
  float oa = 0.0f, ob = 0.0f;
  for (int j = 0; j < 100; ++j) {
    float old_scale, p;
    attn::SoftmaxState& st = j < 37 ? a : b;
    float& o = j < 37 ? oa : ob;
    st.add(static_cast<float>(s[j]) * attn::kLog2e, old_scale, p);
    o = o * old_scale + p * static_cast<float>(v[j]);
  }
  float sa, sb;
  attn::merge(a, b, sa, sb);
  double want, want_lse;
  direct(s, v, &want, &want_lse);
  CHECK((oa * sa + ob * sb) / a.l == doctest::Approx(want).epsilon(1e-4));
  CHECK(a.lse() == doctest::Approx(want_lse).epsilon(1e-5));

  // rescale_to a larger max keeps lse and scales l by 2^(m - m_new).
  attn::SoftmaxState c = a;
  const float f = c.rescale_to(a.m + 3.0f);
  CHECK(f == doctest::Approx(0.125f));
  CHECK(c.lse() == doctest::Approx(a.lse()).epsilon(1e-6));

  // An empty state merges as nothing and has lse -inf; adding -inf (masked) changes nothing.
  attn::SoftmaxState empty;
  CHECK(empty.lse() == -INFINITY);
  float old_scale, p;
  empty.add(-INFINITY, old_scale, p);
  CHECK(p == 0.0f);
  CHECK(empty.l == 0.0f);
  CHECK(empty.m == -INFINITY);
  attn::SoftmaxState d = b;
  attn::merge(d, empty, sa, sb);
  CHECK(sa == 1.0f);
  CHECK(sb == 0.0f);
  CHECK(d.lse() == doctest::Approx(b.lse()).epsilon(1e-6));
  attn::SoftmaxState e;
  attn::merge(e, attn::SoftmaxState{}, sa, sb);
  CHECK(sa == 0.0f);
  CHECK(sb == 0.0f);
  CHECK(e.lse() == -INFINITY);
}

TEST_CASE("merge_normalized: weights of normalized partials; -inf parts; base-2 converters") {
  // Partials with natural lse 1 and 3: weights e^1 / (e^1 + e^3) and e^3 / (...).
  float wa, wb;
  const float lse2 = attn::merge_normalized(attn::lse_to_base2(1.0f), attn::lse_to_base2(3.0f), wa, wb);
  CHECK(wa == doctest::Approx(1.0 / (1.0 + std::exp(2.0))).epsilon(1e-5));
  CHECK(wb == doctest::Approx(std::exp(2.0) / (1.0 + std::exp(2.0))).epsilon(1e-5));
  CHECK(attn::lse_from_base2(lse2) == doctest::Approx(3.0 + std::log1p(std::exp(-2.0))).epsilon(1e-6));
  CHECK(attn::merge_normalized(-INFINITY, 5.0f, wa, wb) == doctest::Approx(5.0f));
  CHECK(wa == 0.0f);
  CHECK(wb == 1.0f);
  CHECK(attn::merge_normalized(-INFINITY, -INFINITY, wa, wb) == -INFINITY);
  CHECK(wa == 0.0f);
  CHECK(wb == 0.0f);
  CHECK(attn::lse_from_base2(attn::lse_to_base2(2.5f)) == doctest::Approx(2.5f).epsilon(1e-7));
  CHECK(attn::lse_to_base2(1.0f) == doctest::Approx(1.0 / std::log(2.0)).epsilon(1e-7));
}

TEST_CASE("online softmax NaN policy: a NaN score poisons the row's max, sum and lse") {
  CHECK(std::isnan(attn::max_propagate_nan(NAN, 1.0f)));
  CHECK(std::isnan(attn::max_propagate_nan(1.0f, NAN)));
  CHECK(attn::max_propagate_nan(-INFINITY, 2.0f) == 2.0f);
  attn::SoftmaxState st;
  float old_scale, p;
  st.add(1.0f, old_scale, p);
  st.add(NAN, old_scale, p);
  st.add(2.0f, old_scale, p);
  CHECK(std::isnan(st.m));
  CHECK(std::isnan(st.l));
  CHECK(std::isnan(st.lse()));
  float wa, wb;
  CHECK(std::isnan(attn::merge_normalized(NAN, 1.0f, wa, wb)));
}
