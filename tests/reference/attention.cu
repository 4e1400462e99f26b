// Tests of the host attention references (llmk/reference/attention.hpp): closed-form values, softmax
// properties, LSE merging (split-KV), the mask semantics of llmk/attention/mask.cuh checked against one-query
// sub-problems, the GQA head mapping, the rounding of the naive same-precision baseline, and the fp8 kernel's
// P-rounding reference. Host logic only.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "llmk/attention/mask.cuh"
#include "llmk/attention/online_softmax.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/reference/attention.hpp"

using llmk::reference::AttentionProblem;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

template <class T>
std::vector<T> random_values(std::int64_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> out(static_cast<std::size_t>(count));
  for (auto& x : out) {
    float f = dist(rng);
    if (std::fabs(f) < 1e-3f) f = 0.5f;  // never zero (nor tiny)
    x = T(f);
  }
  return out;
}

template <class T>
struct Inputs {
  std::vector<T> q, k, v;
};

template <class T>
Inputs<T> random_inputs(const AttentionProblem& pr, std::mt19937& rng) {
  return {random_values<T>(pr.q_elements(), rng), random_values<T>(pr.kv_elements(), rng),
          random_values<T>(pr.kv_elements(), rng)};
}

struct Result {
  std::vector<double> out, lse;
};

template <class T>
Result run_fp64(const AttentionProblem& pr, const Inputs<T>& in) {
  Result r{std::vector<double>(static_cast<std::size_t>(pr.q_elements()), -1.0),
           std::vector<double>(static_cast<std::size_t>(pr.total_q() * pr.num_heads), -1.0)};
  llmk::reference::attention_fp64(pr, in.q.data(), in.k.data(), in.v.data(), r.out.data(), r.lse.data());
  return r;
}

AttentionProblem make_problem(std::vector<int> q_lens, std::vector<int> kv_lens, int heads, int kv_heads,
                              int dim) {
  AttentionProblem pr;
  pr.q_lens = std::move(q_lens);
  pr.kv_lens = std::move(kv_lens);
  pr.num_heads = heads;
  pr.num_kv_heads = kv_heads;
  pr.head_dim = dim;
  pr.options.softmax_scale = llmk::attention::default_scale(dim);
  return pr;
}

std::vector<std::int64_t> offsets(const std::vector<int>& lens) {
  std::vector<std::int64_t> off(lens.size() + 1, 0);
  for (std::size_t b = 0; b < lens.size(); ++b) off[b + 1] = off[b] + lens[b];
  return off;
}

// Keys [first[b], first[b] + count[b]) of every sequence b, packed into a new ragged K (or V) tensor.
template <class T>
std::vector<T> slice_keys(const AttentionProblem& pr, const std::vector<T>& kv, const std::vector<int>& first,
                          const std::vector<int>& count) {
  const std::int64_t token = static_cast<std::int64_t>(pr.num_kv_heads) * pr.head_dim;
  const std::vector<std::int64_t> off = offsets(pr.kv_lens);
  std::vector<T> out;
  for (std::size_t b = 0; b < pr.kv_lens.size(); ++b) {
    const auto begin = kv.begin() + (off[b] + first[b]) * token;
    out.insert(out.end(), begin, begin + static_cast<std::int64_t>(count[b]) * token);
  }
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;  // equal infinities too
    m = std::max(m, std::fabs(a[i] - b[i]));
    if (std::isnan(a[i] - b[i])) return kInf;  // inf vs finite, or NaN
  }
  return m;
}

// Checks every row of pr against attention over the keys [range(b, i).first, range(b, i).second) alone: a
// problem with that one query and those keys, unmasked. This states the mask independently of make_mask.
template <class T>
void check_rows_against_ranges(const AttentionProblem& pr, const Inputs<T>& in,
                               const std::function<std::pair<int, int>(int, int)>& range) {
  const Result full = run_fp64(pr, in);
  const int heads = pr.num_heads, dim = pr.head_dim;
  const std::int64_t q_token = static_cast<std::int64_t>(heads) * dim;
  const std::int64_t kv_token = static_cast<std::int64_t>(pr.num_kv_heads) * dim;
  const std::vector<std::int64_t> q_off = offsets(pr.q_lens), kv_off = offsets(pr.kv_lens);
  for (int b = 0; b < pr.batch(); ++b)
    for (int i = 0; i < pr.q_lens[b]; ++i) {
      CAPTURE(b);
      CAPTURE(i);
      const auto [j0, j1] = range(b, i);
      const std::int64_t t = q_off[b] + i;
      if (j1 <= j0) {  // nothing visible
        for (std::int64_t e = 0; e < q_token; ++e) CHECK(full.out[t * q_token + e] == 0.0);
        for (int h = 0; h < heads; ++h) CHECK(full.lse[t * heads + h] == -kInf);
        continue;
      }
      AttentionProblem one = pr;
      one.q_lens = {1};
      one.kv_lens = {j1 - j0};
      one.options.causal = false;
      one.options.window_left = one.options.window_right = -1;
      Inputs<T> sub;
      sub.q.assign(in.q.begin() + t * q_token, in.q.begin() + (t + 1) * q_token);
      sub.k.assign(in.k.begin() + (kv_off[b] + j0) * kv_token, in.k.begin() + (kv_off[b] + j1) * kv_token);
      sub.v.assign(in.v.begin() + (kv_off[b] + j0) * kv_token, in.v.begin() + (kv_off[b] + j1) * kv_token);
      const Result want = run_fp64(one, sub);
      for (std::int64_t e = 0; e < q_token; ++e)
        CHECK(std::fabs(full.out[t * q_token + e] - want.out[e]) < 1e-13);
      for (int h = 0; h < heads; ++h) CHECK(std::fabs(full.lse[t * heads + h] - want.lse[h]) < 1e-13);
    }
}

}  // namespace

TEST_CASE("attention_fp64: hand-computed case, D = 2, one query, two keys") {
  // q = (2, 1), k0 = (1, 0), k1 = (0, 1): q.k = 2 and 1; scale 0.5 gives s = (1, 0.5).
  AttentionProblem pr = make_problem({1}, {2}, 1, 1, 2);
  pr.options.softmax_scale = 0.5f;
  const std::vector<float> q = {2.0f, 1.0f}, k = {1.0f, 0.0f, 0.0f, 1.0f}, v = {1.0f, -2.0f, 3.0f, 0.5f};

  auto check = [&](double s0, double s1) {
    const double p0 = std::exp(s0) / (std::exp(s0) + std::exp(s1)), p1 = 1.0 - p0;
    double out[2], lse;
    llmk::reference::attention_fp64(pr, q.data(), k.data(), v.data(), out, &lse);
    CHECK(out[0] == doctest::Approx(p0 * 1.0 + p1 * 3.0).epsilon(1e-15));
    CHECK(out[1] == doctest::Approx(p0 * -2.0 + p1 * 0.5).epsilon(1e-15));
    CHECK(lse == doctest::Approx(std::log(std::exp(s0) + std::exp(s1))).epsilon(1e-15));
    // The same values as half (all exact in binary16) give the same fp64 result.
    std::vector<llmk::half> qh, kh, vh;
    for (float x : q) qh.push_back(llmk::half(x));
    for (float x : k) kh.push_back(llmk::half(x));
    for (float x : v) vh.push_back(llmk::half(x));
    double out_h[2], lse_h;
    llmk::reference::attention_fp64(pr, qh.data(), kh.data(), vh.data(), out_h, &lse_h);
    CHECK(out_h[0] == out[0]);
    CHECK(out_h[1] == out[1]);
    CHECK(lse_h == lse);
    // lse is optional.
    llmk::reference::attention_fp64(pr, q.data(), k.data(), v.data(), out_h, nullptr);
    CHECK(out_h[0] == out[0]);
  };
  SUBCASE("no softcap") {
    check(1.0, 0.5);
  }
  SUBCASE("softcap 0.25: s = 0.25 tanh(s / 0.25)") {
    pr.options.softcap = 0.25f;
    check(0.25 * std::tanh(4.0), 0.25 * std::tanh(2.0));
  }
  SUBCASE("causal with q_len < kv_len changes nothing for the last query") {
    pr.options.causal = true;
    check(1.0, 0.5);
  }
}

TEST_CASE("attention_fp64: outputs are convex combinations of the visible values") {
  std::mt19937 rng(11);
  AttentionProblem pr = make_problem({4, 7, 3}, {9, 7, 1}, 4, 2, 8);
  pr.options.causal = true;
  pr.options.window_left = 3;
  pr.options.softcap = 5.0f;
  const auto in = random_inputs<llmk::half>(pr, rng);
  const Result r = run_fp64(pr, in);
  const std::vector<std::int64_t> q_off = offsets(pr.q_lens), kv_off = offsets(pr.kv_lens);
  const int dim = pr.head_dim, group = pr.num_heads / pr.num_kv_heads;
  int rows_checked = 0;
  for (int b = 0; b < pr.batch(); ++b) {
    const auto mask = llmk::attention::make_mask(pr.q_lens[b], pr.kv_lens[b], true, 3, -1);
    for (int i = 0; i < pr.q_lens[b]; ++i)
      for (int h = 0; h < pr.num_heads; ++h) {
        const std::int64_t row = (q_off[b] + i) * pr.num_heads + h;
        for (int d = 0; d < dim; ++d) {
          double lo = kInf, hi = -kInf;
          for (int j = 0; j < pr.kv_lens[b]; ++j) {
            if (!mask.visible(i, j)) continue;
            const double x = float(in.v[((kv_off[b] + j) * pr.num_kv_heads + h / group) * dim + d]);
            lo = std::min(lo, x);
            hi = std::max(hi, x);
          }
          const double o = r.out[row * dim + d];
          if (lo > hi) {
            CHECK(o == 0.0);
          } else {
            CHECK(o >= lo - 1e-15);
            CHECK(o <= hi + 1e-15);
            ++rows_checked;
          }
        }
      }
  }
  CHECK(rows_checked > 0);
}

TEST_CASE("attention_fp64: adding a constant to every score of a row shifts the LSE and keeps the output") {
  // Every key's last coordinate is 1, so the query's last coordinate c adds scale * c to all of its scores.
  std::mt19937 rng(12);
  AttentionProblem pr = make_problem({3, 5}, {6, 5}, 2, 1, 4);
  pr.options.causal = true;
  auto in = random_inputs<llmk::half>(pr, rng);
  for (std::size_t t = 0; t < in.k.size(); t += 4) in.k[t + 3] = llmk::half(1.0f);
  Inputs<llmk::half> shifted = in;
  for (std::size_t t = 0; t < in.q.size(); t += 4) {
    in.q[t + 3] = llmk::half(0.25f);
    shifted.q[t + 3] = llmk::half(-0.75f);
  }
  const Result a = run_fp64(pr, in), b = run_fp64(pr, shifted);
  CHECK(max_abs_diff(a.out, b.out) < 1e-14);
  for (std::size_t r = 0; r < a.lse.size(); ++r)
    CHECK(b.lse[r] - a.lse[r] == doctest::Approx(-1.0 * pr.options.softmax_scale).epsilon(1e-12));
}

TEST_CASE("merge_states: edge cases") {
  const double o[2][3] = {{1.0, 2.0, 3.0}, {-4.0, 5.0, 0.5}};
  double out[3], lse;
  SUBCASE("a part with lse -inf contributes nothing") {
    const double l[2] = {-kInf, 0.75};
    llmk::reference::merge_states(2, 3, &o[0][0], l, out, &lse);
    CHECK(out[0] == -4.0);
    CHECK(out[1] == 5.0);
    CHECK(out[2] == 0.5);
    CHECK(lse == 0.75);
  }
  SUBCASE("all parts -inf: zero output, lse -inf") {
    const double l[2] = {-kInf, -kInf};
    llmk::reference::merge_states(2, 3, &o[0][0], l, out, &lse);
    CHECK(out[0] == 0.0);
    CHECK(out[2] == 0.0);
    CHECK(lse == -kInf);
    llmk::reference::merge_states(0, 3, &o[0][0], l, out, nullptr);
    CHECK(out[1] == 0.0);
  }
  SUBCASE("a NaN lse makes the row NaN, also beside -inf parts (fmax would drop it), as the kernels' merge") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const double other : {-kInf, 0.75}) {
      const double l[2] = {other, nan};
      llmk::reference::merge_states(2, 3, &o[0][0], l, out, &lse);
      CHECK(std::isnan(out[0]));
      CHECK(std::isnan(out[2]));
      CHECK(std::isnan(lse));
      float w_a = 0.0f, w_b = 0.0f;  // the split kernels' merge of two normalized parts (base-2 lse)
      CHECK(std::isnan(llmk::attention::merge_normalized(static_cast<float>(other), NAN, w_a, w_b)));
    }
  }
  SUBCASE("equal lse: the mean, lse + log 2") {
    const double l[2] = {1.5, 1.5};
    llmk::reference::merge_states(2, 3, &o[0][0], l, out, &lse);
    CHECK(out[0] == doctest::Approx(-1.5).epsilon(1e-15));
    CHECK(out[1] == doctest::Approx(3.5).epsilon(1e-15));
    CHECK(lse == doctest::Approx(1.5 + std::log(2.0)).epsilon(1e-15));
  }
}

TEST_CASE("merge_states: merging attention over two key halves gives the full attention") {
  std::mt19937 rng(13);
  struct Case {
    const char* name;
    std::vector<int> q_lens, kv_lens, split;
    bool causal;
    float softcap;
  };
  // Causal: the first part holds keys every query sees (split <= kv - q + 1), so it is an unmasked problem,
  // and the second part keeps the bottom-right alignment (both the diagonal and the key count shift by
  // split). With split = kv - q + 1 the first query sees none of the second part: its partial LSE is -inf.
  const Case cases[] = {
      {"non-causal, softcap", {3, 2, 1}, {7, 4, 5}, {3, 2, 2}, false, 3.0f},
      {"causal", {3, 2}, {9, 6}, {7, 2}, true, 0.0f},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    AttentionProblem pr = make_problem(c.q_lens, c.kv_lens, 4, 2, 16);
    pr.options.causal = c.causal;
    pr.options.softcap = c.softcap;
    const auto in = random_inputs<llmk::half>(pr, rng);
    const Result full = run_fp64(pr, in);

    std::vector<int> zeros(c.split.size(), 0), rest(c.split.size());
    for (std::size_t b = 0; b < c.split.size(); ++b) rest[b] = c.kv_lens[b] - c.split[b];
    AttentionProblem first = pr, second = pr;
    first.kv_lens = c.split;
    first.options.causal = false;
    second.kv_lens = rest;
    const Inputs<llmk::half> in_first{in.q, slice_keys(pr, in.k, zeros, c.split),
                                      slice_keys(pr, in.v, zeros, c.split)};
    const Inputs<llmk::half> in_second{in.q, slice_keys(pr, in.k, c.split, rest),
                                       slice_keys(pr, in.v, c.split, rest)};
    const Result a = run_fp64(first, in_first), b = run_fp64(second, in_second);
    if (c.causal) CHECK(b.lse[0] == -kInf);  // the first query of sequence 0 sees no key of the second part

    const int dim = pr.head_dim;
    Result merged{std::vector<double>(full.out.size()), std::vector<double>(full.lse.size())};
    for (std::size_t row = 0; row < full.lse.size(); ++row) {
      std::vector<double> o_parts(a.out.begin() + row * dim, a.out.begin() + (row + 1) * dim);
      o_parts.insert(o_parts.end(), b.out.begin() + row * dim, b.out.begin() + (row + 1) * dim);
      const double l[2] = {a.lse[row], b.lse[row]};
      llmk::reference::merge_states(2, dim, o_parts.data(), l, merged.out.data() + row * dim,
                                    &merged.lse[row]);
    }
    CHECK(max_abs_diff(merged.out, full.out) < 1e-12);
    CHECK(max_abs_diff(merged.lse, full.lse) < 1e-12);
  }
}

TEST_CASE("attention_fp64: mask semantics against one-query sub-problems") {
  std::mt19937 rng(14);
  SUBCASE("causal, q_len < kv_len: query i sees keys 0 .. i + kv_len - q_len") {
    AttentionProblem pr = make_problem({3, 4}, {7, 4}, 2, 2, 4);
    pr.options.causal = true;
    check_rows_against_ranges(pr, random_inputs<llmk::half>(pr, rng), [&](int b, int i) {
      return std::pair<int, int>{0, i + pr.kv_lens[b] - pr.q_lens[b] + 1};
    });
  }
  SUBCASE("causal, q_len > kv_len: the first q_len - kv_len queries see nothing") {
    AttentionProblem pr = make_problem({5, 2}, {3, 6}, 2, 1, 4);
    pr.options.causal = true;
    const auto in = random_inputs<llmk::half>(pr, rng);
    check_rows_against_ranges(pr, in, [&](int b, int i) {
      return std::pair<int, int>{0, std::max(0, i + pr.kv_lens[b] - pr.q_lens[b] + 1)};
    });
    // Query 2 of sequence 0 sees key 0 only: out = v0 exactly, lse = its score.
    const Result r = run_fp64(pr, in);
    CHECK(r.lse[0] == -kInf);
    CHECK(r.lse[1 * 2 + 1] == -kInf);
    for (int d = 0; d < 4; ++d) CHECK(r.out[(2 * 2 + 0) * 4 + d] == double(float(in.v[d])));
  }
  SUBCASE("causal with window_right > 0 is still causal") {
    AttentionProblem pr = make_problem({4}, {6}, 1, 1, 4);
    pr.options.causal = true;
    pr.options.window_right = 2;
    check_rows_against_ranges(pr, random_inputs<llmk::half>(pr, rng), [&](int, int i) {
      return std::pair<int, int>{0, i + 3};
    });
  }
  SUBCASE("sliding window, not causal: keys diag - 2 .. diag + 1") {
    AttentionProblem pr = make_problem({6, 3}, {6, 8}, 2, 2, 4);
    pr.options.window_left = 2;
    pr.options.window_right = 1;
    check_rows_against_ranges(pr, random_inputs<llmk::half>(pr, rng), [&](int b, int i) {
      const int diag = i + pr.kv_lens[b] - pr.q_lens[b];
      return std::pair<int, int>{std::max(0, diag - 2), std::min(pr.kv_lens[b], diag + 2)};
    });
  }
  SUBCASE("causal sliding window (window_left 3): keys diag - 3 .. diag") {
    AttentionProblem pr = make_problem({4, 6}, {10, 3}, 2, 1, 4);
    pr.options.causal = true;
    pr.options.window_left = 3;
    check_rows_against_ranges(pr, random_inputs<llmk::half>(pr, rng), [&](int b, int i) {
      const int diag = i + pr.kv_lens[b] - pr.q_lens[b];
      return std::pair<int, int>{std::max(0, diag - 3), std::max(0, diag + 1)};
    });
  }
  SUBCASE("window_right only: keys 0 .. diag + 2") {
    AttentionProblem pr = make_problem({3}, {8}, 1, 1, 4);
    pr.options.window_right = 2;
    check_rows_against_ranges(pr, random_inputs<llmk::half>(pr, rng), [&](int, int i) {
      return std::pair<int, int>{0, std::min(8, i + 5 + 3)};
    });
  }
  SUBCASE("decode: one query per sequence, causal changes nothing, window_left keeps the last keys") {
    AttentionProblem pr = make_problem({1, 1, 1}, {5, 1, 9}, 4, 2, 8);
    const auto in = random_inputs<llmk::half>(pr, rng);
    const Result plain = run_fp64(pr, in);
    pr.options.causal = true;
    CHECK(max_abs_diff(run_fp64(pr, in).out, plain.out) == 0.0);
    pr.options.window_left = 2;
    check_rows_against_ranges(pr, in, [&](int b, int) {
      return std::pair<int, int>{std::max(0, pr.kv_lens[b] - 3), pr.kv_lens[b]};
    });
  }
}

TEST_CASE("attention_fp64: GQA head h reads KV head h / (num_heads / num_kv_heads)") {
  std::mt19937 rng(15);
  for (int kv_heads : {3, 1}) {  // GQA with groups of 2, and MQA
    CAPTURE(kv_heads);
    const int heads = 6, dim = 8, group = heads / kv_heads;
    AttentionProblem gqa = make_problem({3, 5}, {7, 5}, heads, kv_heads, dim);
    gqa.options.causal = true;
    const auto in = random_inputs<llmk::half>(gqa, rng);
    AttentionProblem mha = gqa;
    mha.num_kv_heads = heads;
    // MHA copies of K/V with KV head h holding GQA head `source(h)`.
    auto expand = [&](const std::vector<llmk::half>& x, auto source) {
      std::vector<llmk::half> out;
      for (std::int64_t t = 0; t < gqa.total_kv(); ++t)
        for (int h = 0; h < heads; ++h) {
          const auto begin = x.begin() + (t * kv_heads + source(h)) * dim;
          out.insert(out.end(), begin, begin + dim);
        }
      return out;
    };
    auto grouped = [&](int h) { return h / group; };
    const Inputs<llmk::half> dup{in.q, expand(in.k, grouped), expand(in.v, grouped)};
    const Result a = run_fp64(gqa, in), b = run_fp64(mha, dup);
    CHECK(max_abs_diff(a.out, b.out) == 0.0);
    CHECK(max_abs_diff(a.lse, b.lse) == 0.0);
    if (kv_heads > 1) {  // the interleaved mapping h % kv_heads is a different answer (the check has teeth)
      auto interleaved = [&](int h) { return h % kv_heads; };
      const Inputs<llmk::half> wrong{in.q, expand(in.k, interleaved), expand(in.v, interleaved)};
      CHECK(max_abs_diff(a.out, run_fp64(mha, wrong).out) > 1e-3);
    }
  }
}

TEST_CASE("attention_naive: rounds like a same-precision framework implementation") {
  std::mt19937 rng(16);
  AttentionProblem pr = make_problem({16, 5, 2}, {40, 23, 1}, 4, 2, 64);
  pr.options.causal = true;  // sequence 2 (q 2, kv 1): query 0 sees nothing

  auto run = [&](auto tag, float softcap, double max_err) {
    using T = decltype(tag);
    pr.options.softcap = softcap;
    const auto in = random_inputs<T>(pr, rng);
    const Result ref = run_fp64(pr, in);
    std::vector<float> naive(static_cast<std::size_t>(pr.q_elements()), -1.0f);
    llmk::reference::attention_naive(pr, in.q.data(), in.k.data(), in.v.data(), naive.data());
    double err = 0.0;
    int rounded_differently = 0;  // entries that differ from the fp64 result rounded once to T
    for (std::size_t e = 0; e < naive.size(); ++e) {
      err = std::max(err, std::fabs(naive[e] - ref.out[e]));
      CHECK(float(T(naive[e])) == naive[e]);  // representable in T
      if (naive[e] != float(T(float(ref.out[e])))) ++rounded_differently;
    }
    // The fully masked row (sequence 2, query 0): zeros.
    const std::int64_t masked_row = (pr.total_q() - 2) * pr.num_heads * pr.head_dim;
    for (int e = 0; e < pr.num_heads * pr.head_dim; ++e) CHECK(naive[masked_row + e] == 0.0f);
    MESSAGE("max |naive - fp64| = " << err
                                    << ", entries off the rounded fp64 result: " << rounded_differently);
    CHECK(err < max_err);
    return std::pair<double, int>{err, rounded_differently};
  };
  SUBCASE("half") {
    const auto [err, off] = run(llmk::half{}, 0.0f, 1e-2);
    CHECK(err > 0.0);
    CHECK(off > 0);  // intermediates are rounded, not just the output
  }
  SUBCASE("half, softcap") {
    const auto [err, off] = run(llmk::half{}, 0.5f, 1e-2);
    CHECK(err > 0.0);
    CHECK(off > 0);
  }
  SUBCASE("bfloat16") {
    const auto [err, off] = run(llmk::bfloat16{}, 0.0f, 1e-2);
    CHECK(err > 0.0);
    CHECK(off > 0);
  }
  SUBCASE("float: fp32 accuracy") {
    const auto [err, off] = run(0.0f, 0.0f, 1e-5);
    CHECK(err > 0.0);
  }
}

TEST_CASE("attention_naive: hand-computed roundings (half)") {
  SUBCASE("the probabilities are rounded to T before P V") {
    // 11 equal scores: p = 1/11 rounds to 1489 * 2^-14, and 11 of those sum (exactly, in fp32) to
    // 1 - 5 * 2^-14, which rounds to the half 1 - 2^-11. Unrounded probabilities would give 1.
    AttentionProblem pr = make_problem({1}, {11}, 1, 1, 1);
    const std::vector<llmk::half> q = {llmk::half(0.5f)}, kv(11, llmk::half(1.0f));
    float naive = -1.0f;
    llmk::reference::attention_naive(pr, q.data(), kv.data(), kv.data(), &naive);
    CHECK(naive == 1.0f - 0x1p-11f);
    double exact = -1.0;
    llmk::reference::attention_fp64(pr, q.data(), kv.data(), kv.data(), &exact, nullptr);
    CHECK(exact == doctest::Approx(1.0).epsilon(1e-15));
  }
  SUBCASE("Q K^T is rounded to T before the scale") {
    // q = (1, 1), k0 = (64, 2^-5), k1 = (63.5, 0.5), scale 1 + 2^-12. Rounded to half, dot0 = 64 + 2^-5 (a
    // tie) becomes 64, and both scores are round(64 (1 + 2^-12)) = 64: p = (1/2, 1/2) and out = (v0 + v1) / 2
    // = (0.75, 0). Scaling the unrounded dot0 would give round(64.0469) = 64.0625, p0 = 0.515625, out0 =
    // 0.7578.
    AttentionProblem pr = make_problem({1}, {2}, 1, 1, 2);
    pr.options.softmax_scale = 1.0f + 0x1p-12f;
    auto h = [](float x) { return llmk::half(x); };
    const std::vector<llmk::half> q = {h(1.0f), h(1.0f)}, k = {h(64.0f), h(0x1p-5f), h(63.5f), h(0.5f)},
                                  v = {h(1.0f), h(0.25f), h(0.5f), h(-0.25f)};
    float naive[2] = {-1.0f, -1.0f};
    llmk::reference::attention_naive(pr, q.data(), k.data(), v.data(), naive);
    CHECK(naive[0] == 0.75f);
    CHECK(naive[1] == 0.0f);
    double exact[2];
    llmk::reference::attention_fp64(pr, q.data(), k.data(), v.data(), exact, nullptr);
    CHECK(exact[0] > 0.753);  // the fp64 reference sees the 2^-5 score difference
  }
}

TEST_CASE("attention_fp8_p_rounded: P rounded to e4m3 per key tile, from the running max (hand-computed)") {
  // softmax_scale = ln 2 makes x_j = log2(e) s_j = q k_j: keys with x = 0 and 0.5, V = (1, 0), descales 1.
  // key_tile 2 (one tile, m = 0.5): p = (2^7.5 = 181.02 -> e4m3 176, 2^8 = 256); the kernel's l sums the
  // unrounded p, so out = 176 / (181.02 + 256). key_tile 1: tile 0 from m = 0 (p = 256, exact), rescaled by
  // 2^-0.5 when tile 1 moves m to 0.5: exactly the fp64 attention. A third query row that sees no key
  // (causal, q_len 3 > kv_len 2) gets zeros.
  using e4m3 = llmk::float8_e4m3;
  AttentionProblem pr = make_problem({3}, {2}, 1, 1, 1);
  pr.options.softmax_scale = static_cast<float>(std::log(2.0));
  pr.options.causal = true;  // queries at key positions -1, 0, 1: row 0 sees nothing, row 1 key 0 only
  const std::vector<e4m3> q = {e4m3(1.0f), e4m3(1.0f), e4m3(1.0f)}, k = {e4m3(0.0f), e4m3(0.5f)},
                          v = {e4m3(1.0f), e4m3(0.0f)};
  const float one = 1.0f;
  const double xs = 0.5 * std::log2(std::exp(1.0)) * static_cast<float>(std::log(2.0));  // x of key 1
  const double l = std::exp2(8.0 - xs) + 256.0;
  double out[3], slack[3], magnitude[3], exact[3];
  llmk::reference::attention_fp8_fp64(pr, q.data(), k.data(), v.data(), &one, &one, &one, false, exact,
                                      nullptr);
  llmk::reference::Fp8PRoundingModel model;
  model.key_tile = 2;
  llmk::reference::attention_fp8_p_rounded(pr, q.data(), k.data(), v.data(), &one, &one, &one, false, model,
                                           out, slack, magnitude);
  CHECK(out[0] == 0.0);
  CHECK(slack[0] == 0.0);
  CHECK(out[1] == 1.0);  // one key: p = 256 exactly
  CHECK(out[2] == doctest::Approx(176.0 / l).epsilon(1e-12));
  CHECK(magnitude[2] == doctest::Approx(176.0 / l).epsilon(1e-12));
  CHECK(slack[2] < 1e-5);  // 181.02 is far from e4m3's midpoints (184): only the p errors' share
  CHECK(slack[2] > 0.0);
  model.key_tile = 1;
  llmk::reference::attention_fp8_p_rounded(pr, q.data(), k.data(), v.data(), &one, &one, &one, false, model,
                                           out, slack, magnitude);
  CHECK(out[2] == doctest::Approx(exact[2]).epsilon(1e-12));
  // An argument error large enough to cross a midpoint: either rounding is allowed, the slack covers both.
  model.key_tile = 2;
  model.arg_rel = 0.01;  // p0 within (1 +- 0.06) 181.02: 176 or 192
  llmk::reference::attention_fp8_p_rounded(pr, q.data(), k.data(), v.data(), &one, &one, &one, false, model,
                                           out, slack, magnitude);
  CHECK(slack[2] >= (192.0 - 176.0) / l);
  model.key_tile = 0;
  CHECK_THROWS_AS(llmk::reference::attention_fp8_p_rounded(pr, q.data(), k.data(), v.data(), &one, &one, &one,
                                                           false, model, out, slack, magnitude),
                  std::invalid_argument);
}

TEST_CASE("attention_fp8_p_rounded: within a few percent of exact attention, closer with one tile per key") {
  // Random e4m3 inputs, GQA, causal, per-KV-head descales: the P rounding moves outputs by at most 2^-4 of
  // max |v| (rms far less), and the slack stays small where nothing is near a boundary.
  using e4m3 = llmk::float8_e4m3;
  std::mt19937 rng(41);
  AttentionProblem pr = make_problem({7, 20}, {30, 20}, 4, 2, 32);
  pr.options.causal = true;
  const std::vector<e4m3> q = random_values<e4m3>(pr.q_elements(), rng),
                          k = random_values<e4m3>(pr.kv_elements(), rng),
                          v = random_values<e4m3>(pr.kv_elements(), rng);
  const std::vector<float> qs = {0.7f, 1.3f}, ks = {1.1f, 0.4f}, vs = {0.5f, 2.0f};
  const std::size_t n = static_cast<std::size_t>(pr.q_elements());
  std::vector<double> exact(n), out(n), slack(n), magnitude(n);
  llmk::reference::attention_fp8_fp64(pr, q.data(), k.data(), v.data(), qs.data(), ks.data(), vs.data(), true,
                                      exact.data(), nullptr);
  llmk::reference::Fp8PRoundingModel model;
  model.key_tile = 8;
  llmk::reference::attention_fp8_p_rounded(pr, q.data(), k.data(), v.data(), qs.data(), ks.data(), vs.data(),
                                           true, model, out.data(), slack.data(), magnitude.data());
  double err2 = 0.0, ref2 = 0.0, worst_slack = 0.0;
  int moved = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double vmax = i / 32 % 4 < 2 ? 0.5 : 2.0;  // |v| <= 1 times the head's descale
    CHECK(std::fabs(out[i] - exact[i]) <= vmax / 16 + 1e-12);
    CHECK(magnitude[i] <= vmax * (1.0 + 1.0 / 16) + 1e-12);
    CHECK(magnitude[i] >= std::fabs(out[i]) - 1e-12);
    moved += out[i] != exact[i];
    err2 += (out[i] - exact[i]) * (out[i] - exact[i]);
    ref2 += exact[i] * exact[i];
    worst_slack = std::max(worst_slack, slack[i] / std::max(magnitude[i], 1e-30));
  }
  CHECK(moved > static_cast<int>(n / 2));  // the rounding is real
  CHECK(std::sqrt(err2 / ref2) < 0.04);
  CHECK(worst_slack < 0.5);
}

TEST_CASE("AttentionProblem: inconsistent shapes throw std::invalid_argument") {
  const std::vector<float> x(64, 0.5f);
  std::vector<double> out(64), lse(16);
  std::vector<float> naive(64);
  auto fails = [&](const AttentionProblem& pr) {
    CHECK_THROWS_AS(pr.validate(), std::invalid_argument);
    CHECK_THROWS_AS(llmk::reference::attention_fp64(pr, x.data(), x.data(), x.data(), out.data(), lse.data()),
                    std::invalid_argument);
    CHECK_THROWS_AS(llmk::reference::attention_naive(pr, x.data(), x.data(), x.data(), naive.data()),
                    std::invalid_argument);
  };
  const AttentionProblem good = make_problem({2}, {2}, 4, 2, 4);
  CHECK_NOTHROW(good.validate());
  CHECK(good.total_q() == 2);
  CHECK(good.total_kv() == 2);
  AttentionProblem pr = good;
  pr.kv_lens = {2, 3};
  fails(pr);
  pr = good;
  pr.num_kv_heads = 3;
  fails(pr);
  pr = good;
  pr.num_kv_heads = 0;
  fails(pr);
  pr = good;
  pr.head_dim = 0;
  fails(pr);
  pr = good;
  pr.q_lens = {-1};
  fails(pr);
}
