// Tests of llmk/obs/awq.hpp (AWQ), built by the plain host compiler (no LAPACK, no simulator): AWQ beats
// round-to-nearest on a layer with salient activation channels; an independent re-implementation of the
// reference search (llm-awq auto_scale + auto_clip written from the published code: fp32 weights and pseudo
// quantizer as its fp32 tensors, fp64 sums, plain loops) picks the same alpha and clip values and gives the
// same codes; the folds into a norm and into a previous linear, and the layer output through the weight-only
// GEMM's reference; alpha = 0 when every channel has the same magnitude; bad arguments.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "llmk/obs/awq.hpp"
#include "llmk/reference/weight_only.hpp"

namespace {

struct AwqLayer {
  std::int64_t n = 0, k = 0, ldw = 0, t = 0, ldx = 0;
  std::vector<float> w, x;  // [n, ldw], [t, ldx]; the padding holds NaN (never read)
};

// W ~ N(0, 0.05^2) and X ~ N(0.1, 1), both nonzero; `salient` activation channels scaled by 10 .. 50; with
// `tiny`, channel 100 is scaled by 1e-9 (x_mean^alpha then falls below the reference's 1e-4 clamp).
AwqLayer make_awq_layer(std::int64_t n, std::int64_t k, std::int64_t t, std::int64_t pad_w,
                        std::int64_t pad_x, int salient, unsigned seed, bool tiny = false) {
  AwqLayer l;
  l.n = n;
  l.k = k;
  l.t = t;
  l.ldw = k + pad_w;
  l.ldx = k + pad_x;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  l.w.assign(static_cast<std::size_t>(n * l.ldw), nan);
  l.x.assign(static_cast<std::size_t>(t * l.ldx), nan);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      float v = 0.05f * nd(rng);
      if (v == 0.0f) v = 1e-3f;
      l.w[static_cast<std::size_t>(r * l.ldw + c)] = v;
    }
  std::vector<float> gain(static_cast<std::size_t>(k), 1.0f);
  for (int i = 0; i < salient; ++i)
    gain[static_cast<std::size_t>((i * 37 + 5) % k)] =
        10.0f + 40.0f * static_cast<float>(i) / std::max(1, salient - 1);
  if (tiny) gain[100] = 1e-9f;
  for (std::int64_t i = 0; i < t; ++i)
    for (std::int64_t c = 0; c < k; ++c) {
      float v = 0.1f + nd(rng);
      if (v == 0.0f) v = 0.5f;
      l.x[static_cast<std::size_t>(i * l.ldx + c)] = v * gain[static_cast<std::size_t>(c)];
    }
  return l;
}

llmk::obs::AwqResult run_awq(const AwqLayer& l, const llmk::obs::AwqOptions& opt) {
  llmk::obs::AwqResult r;
  const llmk::Status st =
      llmk::obs::awq_quantize(l.w.data(), l.n, l.k, l.ldw, l.x.data(), l.t, l.ldx, opt, &r);
  REQUIRE_MESSAGE(st.ok(), st.message());
  return r;
}

// ---- an independent re-implementation of the reference (llm-awq) search ---------------------------------

struct RefResult {
  int alpha_index = -1;
  std::vector<double> s, errors, clip_max;
  std::vector<int> clip_step, codes, zeros;
  std::vector<double> scales, deq;  // scales [groups, n]; deq [n, k] of W diag(s)
  double output_error = 0.0;
};

// pseudo_quantize_tensor of one group in fp32, as the reference's fp32 tensor ops compute it: zero point:
// scale = max(max - min, 1e-5) / (2^b - 1), zero = clamp(-round(min / scale), 0, 2^b - 1); symmetric: scale =
// max(amax, 1e-5) / (2^(b-1) - 1), q = clamp(round(w / scale), -2^(b-1), 2^(b-1) - 1). fp32 matters: a group
// clamped on both ends has min / scale = -(2^b - 1) / 2 up to the scale's last bit, and the reference's fp32
// rounding decides that tie. Writes the unsigned code (symmetric: q + 2^(b-1)) and the dequantized value.
void ref_quant_group(const std::vector<float>& v, int bits, bool zero_point, std::vector<int>& code,
                     std::vector<float>& deq, float* scale_out, int* zero_out) {
  const std::size_t len = v.size();
  code.resize(len);
  deq.resize(len);
  if (zero_point) {
    const float mx = *std::max_element(v.begin(), v.end()), mn = *std::min_element(v.begin(), v.end());
    const float max_int = static_cast<float>((1 << bits) - 1);
    const float scale = std::max(mx - mn, 1e-5f) / max_int;
    const float zero = std::clamp(-std::nearbyint(mn / scale), 0.0f, max_int);
    for (std::size_t j = 0; j < len; ++j) {
      const float q = std::clamp(std::nearbyint(v[j] / scale) + zero, 0.0f, max_int);
      code[j] = static_cast<int>(q);
      deq[j] = (q - zero) * scale;
    }
    *scale_out = scale;
    *zero_out = static_cast<int>(zero);
  } else {
    float amax = 0.0f;
    for (float e : v) amax = std::max(amax, std::fabs(e));
    const float max_int = static_cast<float>((1 << (bits - 1)) - 1),
                min_int = -static_cast<float>(1 << (bits - 1));
    const float scale = std::max(amax, 1e-5f) / max_int;
    for (std::size_t j = 0; j < len; ++j) {
      const float q = std::clamp(std::nearbyint(v[j] / scale), min_int, max_int);
      code[j] = static_cast<int>(q - min_int);
      deq[j] = q * scale;
    }
    *scale_out = scale;
    *zero_out = static_cast<int>(-min_int);
  }
}

// The search as the reference runs it (weights and the pseudo quantizer in fp32 tensors, the searches' sums
// here in fp64). force_alpha >= 0: skip the search and use that alpha (to show the comparison can fail).
RefResult ref_awq(const AwqLayer& l, const llmk::obs::AwqOptions& opt, int force_alpha = -1) {
  const std::int64_t n = l.n, k = l.k, t = l.t, gs = opt.group_size == 0 ? k : opt.group_size, ng = k / gs;
  auto W = [&](std::int64_t r, std::int64_t c) { return l.w[r * l.ldw + c]; };
  auto X = [&](std::int64_t i, std::int64_t c) { return static_cast<double>(l.x[i * l.ldx + c]); };
  // pseudo_quantize_tensor of a whole [n, k] weight, no clip.
  auto pseudo = [&](const std::vector<float>& w) {
    std::vector<float> out(w.size()), v(static_cast<std::size_t>(gs)), d;
    std::vector<int> code;
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t g = 0; g < ng; ++g) {
        for (std::int64_t j = 0; j < gs; ++j) v[j] = w[r * k + g * gs + j];
        float sc;
        int z;
        ref_quant_group(v, opt.bits, opt.zero_point, code, d, &sc, &z);
        for (std::int64_t j = 0; j < gs; ++j) out[r * k + g * gs + j] = d[j];
      }
    return out;
  };
  // mean over (tokens, n) of (X W^T - X Weff^T)^2, straight from the definition.
  auto out_err = [&](const std::vector<double>& weff) {
    double sum = 0.0;
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t r = 0; r < n; ++r) {
        double a = 0.0, b = 0.0;
        for (std::int64_t c = 0; c < k; ++c) {
          a += X(i, c) * W(r, c);
          b += X(i, c) * weff[r * k + c];
        }
        sum += (a - b) * (a - b);
      }
    return sum / static_cast<double>(t * n);
  };
  std::vector<double> x_max(k, 0.0), w_max(k, 0.0);
  for (std::int64_t c = 0; c < k; ++c) {
    for (std::int64_t i = 0; i < t; ++i) x_max[c] += std::fabs(X(i, c));
    x_max[c] /= static_cast<double>(t);
  }
  if (opt.duo_scaling) {  // AutoAWQ: |w| / (group amax + 1e-6), mean over rows
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t g = 0; g < ng; ++g) {
        double amax = 0.0;
        for (std::int64_t j = 0; j < gs; ++j) amax = std::max(amax, std::fabs(double(W(r, g * gs + j))));
        for (std::int64_t j = 0; j < gs; ++j)
          w_max[g * gs + j] += std::fabs(W(r, g * gs + j)) / (amax + 1e-6);
      }
    for (auto& v : w_max) v /= static_cast<double>(n);
  }
  RefResult res;
  std::vector<float> best_s;
  double best_error = std::numeric_limits<double>::infinity();
  for (int i = 0; i < opt.n_grid; ++i) {
    if (force_alpha >= 0 && i != force_alpha) {
      res.errors.push_back(0.0);
      continue;
    }
    const double ratio = i * 1.0 / opt.n_grid;
    std::vector<double> s(k);
    for (std::int64_t c = 0; c < k; ++c)
      s[c] = std::max(opt.duo_scaling ? std::pow(x_max[c], ratio) / (std::pow(w_max[c], 1.0 - ratio) + 1e-4)
                                      : std::pow(x_max[c], ratio),
                      1e-4);
    const double smax = *std::max_element(s.begin(), s.end()), smin = *std::min_element(s.begin(), s.end());
    std::vector<float> sf(k);  // the fp32 scales tensor
    for (std::int64_t c = 0; c < k; ++c) sf[c] = static_cast<float>(s[c] / std::sqrt(smax * smin));
    std::vector<float> ws(static_cast<std::size_t>(n * k));  // fc.weight.mul_(scales)
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < k; ++c) ws[r * k + c] = W(r, c) * sf[c];
    const std::vector<float> q = pseudo(ws);
    std::vector<double> weff(q.size());  // Q(W s) / s
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < k; ++c) weff[r * k + c] = double(q[r * k + c]) / sf[c];
    const double loss = out_err(weff);
    res.errors.push_back(loss);
    if (loss < best_error) {
      best_error = loss;
      res.alpha_index = i;
      best_s = sf;
    }
  }
  res.s.assign(best_s.begin(), best_s.end());
  // auto_clip_layer on W diag(s) with X diag(1/s).
  std::vector<float> ws(static_cast<std::size_t>(n * k));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c) ws[r * k + c] = W(r, c) * best_s[c];
  const std::int64_t step = std::max<std::int64_t>(1, t / opt.clip_sample_tokens);
  res.clip_max.assign(static_cast<std::size_t>(n * ng), 0.0);
  res.clip_step.assign(static_cast<std::size_t>(n * ng), 0);
  std::vector<float> v(gs), d;
  std::vector<int> code;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t g = 0; g < ng; ++g) {
      float org_max = 0.0f;
      for (std::int64_t j = 0; j < gs; ++j) org_max = std::max(org_max, std::fabs(ws[r * k + g * gs + j]));
      float best_max = org_max;
      double min_err = 1e9;
      int best_i = 0;
      const int shrink_steps = opt.clip ? static_cast<int>(opt.clip_max_shrink * opt.clip_n_grid) : 0;
      for (int i_s = 0; i_s < shrink_steps; ++i_s) {
        const float max_val = org_max * static_cast<float>(1.0 - static_cast<double>(i_s) / opt.clip_n_grid);
        for (std::int64_t j = 0; j < gs; ++j) v[j] = std::clamp(ws[r * k + g * gs + j], -max_val, max_val);
        float sc;
        int z;
        ref_quant_group(v, opt.bits, opt.zero_point, code, d, &sc, &z);
        double err = 0.0;
        std::int64_t cnt = 0;
        for (std::int64_t i = 0; i < t; i += step, ++cnt) {
          double org_out = 0.0, cur_out = 0.0;
          for (std::int64_t j = 0; j < gs; ++j) {
            const double xs = X(i, g * gs + j) / best_s[g * gs + j];
            org_out += xs * ws[r * k + g * gs + j];
            cur_out += xs * d[j];
          }
          err += (cur_out - org_out) * (cur_out - org_out);
        }
        err /= static_cast<double>(cnt);
        if (err < min_err) {
          min_err = err;
          best_max = max_val;
          best_i = i_s;
        }
      }
      res.clip_max[r * ng + g] = best_max;
      res.clip_step[r * ng + g] = best_i;
    }
  // apply_clip, then the final pseudo quantization with scales and zeros.
  res.codes.assign(static_cast<std::size_t>(n * k), 0);
  res.deq.assign(static_cast<std::size_t>(n * k), 0.0);
  res.scales.assign(static_cast<std::size_t>(ng * n), 0.0);
  res.zeros.assign(static_cast<std::size_t>(ng * n), 0);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t g = 0; g < ng; ++g) {
      const float m = static_cast<float>(res.clip_max[r * ng + g]);
      for (std::int64_t j = 0; j < gs; ++j) v[j] = std::clamp(ws[r * k + g * gs + j], -m, m);
      float sc;
      int z;
      ref_quant_group(v, opt.bits, opt.zero_point, code, d, &sc, &z);
      for (std::int64_t j = 0; j < gs; ++j) {
        res.codes[r * k + g * gs + j] = code[j];
        res.deq[r * k + g * gs + j] = d[j];
      }
      res.scales[g * n + r] = sc;
      res.zeros[g * n + r] = z;
    }
  std::vector<double> weff(res.deq);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c) weff[r * k + c] /= res.s[c];
  res.output_error = out_err(weff);
  return res;
}

std::int64_t code_mismatches(const llmk::obs::AwqResult& got, const RefResult& want) {
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < want.codes.size(); ++i) bad += got.quantized.codes[i] != want.codes[i];
  return bad;
}

double rel(double a, double b) {
  return std::fabs(a - b) / std::max(std::fabs(b), 1e-30);
}

bool has(const llmk::Status& st, const std::string& name) {
  return st.code() == llmk::Status::Code::kInvalidArgument &&
         st.message().find("'" + name + "'") != std::string::npos;
}

}  // namespace

TEST_CASE("awq: beats round-to-nearest on a layer with salient activation channels") {
  const AwqLayer l = make_awq_layer(40, 256, 96, 0, 0, 6, 101);
  struct Case {
    const char* name;
    bool zero_point;
    std::int64_t group;
  };
  for (const Case c : {Case{"asymmetric g128", true, 128}, Case{"symmetric per-channel", false, 0}}) {
    CAPTURE(c.name);
    llmk::obs::AwqOptions opt;
    opt.zero_point = c.zero_point;
    opt.group_size = c.group;
    const llmk::obs::AwqResult r = run_awq(l, opt);
    llmk::obs::AwqOptions no_clip = opt;
    no_clip.clip = false;
    const llmk::obs::AwqResult rs = run_awq(l, no_clip);
    std::printf(
        "awq %-22s alpha %.2f  output MSE: RTN %.4e  scaling %.4e (x%.3f)  scaling+clip %.4e (x%.3f)\n",
        c.name, r.alpha, r.rtn_error, r.search_error, r.search_error / r.rtn_error, r.output_error,
        r.output_error / r.rtn_error);
    CHECK(r.alpha > 0.0);
    CHECK(r.search_error <= r.rtn_error);  // alpha = 0 is RTN and the search keeps the best
    CHECK(r.output_error < 0.8 * r.rtn_error);
    CHECK(rs.output_error == doctest::Approx(r.search_error).epsilon(1e-12));  // no clip: the search's error
    CHECK(r.alpha_errors[0] == doctest::Approx(r.rtn_error).epsilon(1e-12));
    // The salient channels get the largest scales.
    const auto& s = r.input_scales;
    const std::size_t top = static_cast<std::size_t>(std::max_element(s.begin(), s.end()) - s.begin());
    CHECK(top == static_cast<std::size_t>((5 * 37 + 5) % 256));  // the 50x channel
    // Format: scales/zeros [groups, n], g_idx, identity order, dequantized = scale (u - z).
    const auto& q = r.quantized;
    const std::int64_t gs = c.group == 0 ? 256 : c.group;
    CHECK(q.group_size == gs);
    CHECK(q.groups == 256 / gs);
    CHECK(q.symmetric == !c.zero_point);
    CHECK(q.loss == doctest::Approx(r.output_error * 40).epsilon(1e-12));
    for (std::int64_t row = 0; row < 40; ++row)
      for (std::int64_t col = 0; col < 256; ++col) {
        const std::size_t i = static_cast<std::size_t>(row * 256 + col),
                          gi = static_cast<std::size_t>(col / gs * 40 + row);
        REQUIRE(q.g_idx[static_cast<std::size_t>(col)] == col / gs);
        REQUIRE(q.order[static_cast<std::size_t>(col)] == col);
        REQUIRE(q.codes[i] <= 15);
        if (!c.zero_point) REQUIRE(q.zeros[gi] == 8);
        REQUIRE(q.dequantized[i] == static_cast<float>(q.codes[i] - q.zeros[gi]) * q.scales[gi]);
      }
  }
}

TEST_CASE("awq: an independent re-implementation of the reference search agrees (alpha, clips, codes)") {
  const AwqLayer l = make_awq_layer(37, 192, 75, 3, 5, 4, 202, true);  // odd rows, padded lds, a tiny channel
  struct Case {
    const char* name;
    int bits;
    bool zero_point;
    std::int64_t group;
    bool duo;
    std::int64_t sample;
  };
  for (const Case c : {Case{"4-bit asymmetric g64", 4, true, 64, false, 512},
                       Case{"4-bit symmetric g96, sampled tokens", 4, false, 96, false, 16},
                       Case{"4-bit asymmetric per-channel, duo scaling", 4, true, 0, true, 512},
                       Case{"8-bit asymmetric g64", 8, true, 64, false, 512}}) {
    CAPTURE(c.name);
    llmk::obs::AwqOptions opt;
    opt.bits = c.bits;
    opt.zero_point = c.zero_point;
    opt.group_size = c.group;
    opt.duo_scaling = c.duo;
    opt.clip_sample_tokens = c.sample;
    const llmk::obs::AwqResult got = run_awq(l, opt);
    const RefResult want = ref_awq(l, opt);
    CHECK(got.alpha_index == want.alpha_index);
    REQUIRE(got.alpha_errors.size() == want.errors.size());
    for (std::size_t i = 0; i < want.errors.size(); ++i)
      CHECK(rel(got.alpha_errors[i], want.errors[i]) < 1e-9);
    for (std::size_t j = 0; j < want.s.size(); ++j)
      CHECK(got.input_scales[j] == want.s[j]);  // the same fp64 formula, rounded once
    std::int64_t clipped = 0, step_diff = 0;
    for (std::size_t i = 0; i < want.clip_step.size(); ++i) {
      step_diff += got.clip_step[i] != want.clip_step[i];
      clipped += want.clip_step[i] > 0;
      CHECK(got.clip_max[i] == want.clip_max[i]);
    }
    CHECK(step_diff == 0);
    if (c.bits == 4) CHECK(clipped > 0);  // the clip search did something to compare
    CHECK(code_mismatches(got, want) == 0);
    for (std::size_t i = 0; i < want.scales.size(); ++i) {
      CHECK(got.quantized.scales[i] == want.scales[i]);
      CHECK(got.quantized.zeros[i] == want.zeros[i]);
    }
    CHECK(rel(got.output_error, want.output_error) < 1e-9);
    std::printf(
        "awq vs re-implementation %-42s alpha %.2f, %lld of %zu groups clipped, MSE %.4e (RTN %.4e)\n",
        c.name, got.alpha, static_cast<long long>(clipped), want.clip_step.size(), got.output_error,
        got.rtn_error);

    // The comparison can fail: another alpha gives other codes (and no smaller error), and so does no
    // clipping.
    const RefResult wrong = ref_awq(l, opt, (want.alpha_index + 3) % opt.n_grid);
    CHECK(code_mismatches(got, wrong) > 0);
    CHECK(wrong.errors[(want.alpha_index + 3) % opt.n_grid] >= want.errors[want.alpha_index]);
    if (c.bits == 4) {
      llmk::obs::AwqOptions off = opt;
      off.clip = false;
      CHECK(code_mismatches(got, ref_awq(l, off)) > 0);
    }
  }
}

namespace {
// Every decision of got is the re-implementation's: alpha, clips, codes, scales, zero points, the error.
void check_same_decisions(const llmk::obs::AwqResult& got, const RefResult& want) {
  CHECK(got.alpha_index == want.alpha_index);
  for (std::size_t i = 0; i < want.clip_step.size(); ++i) CHECK(got.clip_step[i] == want.clip_step[i]);
  CHECK(code_mismatches(got, want) == 0);
  for (std::size_t i = 0; i < want.scales.size(); ++i) {
    CHECK(got.quantized.scales[i] == want.scales[i]);
    CHECK(got.quantized.zeros[i] == want.zeros[i]);
  }
  CHECK(rel(got.output_error, want.output_error) < 1e-9);
}

// g64 with reference_grid (got, checked against the re-implementation's want) and without it (def).
struct GridRuns {
  llmk::obs::AwqResult got, def;
  RefResult want;
};
GridRuns run_both_grids(const AwqLayer& l, bool zero_point) {
  llmk::obs::AwqOptions opt;
  opt.group_size = 64;
  opt.zero_point = zero_point;
  opt.reference_grid = true;
  GridRuns r{run_awq(l, opt), {}, ref_awq(l, opt)};
  check_same_decisions(r.got, r.want);
  opt.reference_grid = false;
  r.def = run_awq(l, opt);
  return r;
}
}  // namespace

TEST_CASE(
    "awq: reference_grid gives the reference's parameters where llmk's grid differs (one-signed groups)") {
  // Rows 0-5 without a negative weight: the reference's zero point clamps to 0 there and its grid holds only
  // [0, max - min] (the rest clips); llmk's default widens the range to [0, max]. With reference_grid every
  // decision and code is the re-implementation's; the default's cost is measured. Symmetric grids agree.
  AwqLayer l = make_awq_layer(21, 128, 64, 0, 2, 3, 303);
  for (std::int64_t r = 0; r < 6; ++r)
    for (std::int64_t c = 0; c < l.k; ++c) {
      float& v = l.w[static_cast<std::size_t>(r * l.ldw + c)];
      v = std::fabs(v) + 0.02f;
    }
  for (const bool zero_point : {true, false}) {
    CAPTURE(zero_point);
    const GridRuns runs = run_both_grids(l, zero_point);
    const llmk::obs::AwqResult &got = runs.got, &def = runs.def;
    const RefResult& want = runs.want;
    if (zero_point) {
      CHECK(code_mismatches(def, want) > 0);
      CHECK(def.output_error < got.output_error);
    } else {
      CHECK(code_mismatches(def, want) == 0);  // the same rule unless amax < 1e-5
    }
    std::printf("awq reference_grid %-10s output MSE default %.4e, reference grid %.4e (%.2fx)\n",
                zero_point ? "asym g64" : "sym g64", def.output_error, got.output_error,
                got.output_error / def.output_error);
  }
}

TEST_CASE("awq: reference_grid's 1e-5 clamps and 1e9 clip-search start are the reference's") {
  // Row 6 spans less than 1e-5 (the reference clamps its span / amax to 1e-5), row 7 is x1e6 (every clip
  // candidate's error is above the reference's 1e9 start: it keeps no clipping there, where llmk's default
  // takes the smallest error).
  AwqLayer l = make_awq_layer(21, 128, 64, 0, 2, 3, 303);
  for (std::int64_t c = 0; c < l.k; ++c) {
    l.w[static_cast<std::size_t>(6 * l.ldw + c)] *= 4e-5f;
    l.w[static_cast<std::size_t>(7 * l.ldw + c)] *= 1e6f;
  }
  for (const bool zero_point : {true, false}) {
    CAPTURE(zero_point);
    const GridRuns runs = run_both_grids(l, zero_point);
    const llmk::obs::AwqResult &got = runs.got, &def = runs.def;
    const std::int64_t groups = l.k / 64;
    int tiny_differ = 0, huge_differ = 0;
    for (std::int64_t g = 0; g < groups; ++g) {
      tiny_differ += def.quantized.scales[static_cast<std::size_t>(g * l.n + 6)] !=
                     got.quantized.scales[static_cast<std::size_t>(g * l.n + 6)];
      huge_differ += def.clip_step[static_cast<std::size_t>(7 * groups + g)] !=
                     got.clip_step[static_cast<std::size_t>(7 * groups + g)];
      CHECK(got.clip_step[static_cast<std::size_t>(7 * groups + g)] == 0);  // the 1e9 start: no clipping
    }
    CHECK(tiny_differ == groups);  // the 1e-5 clamp
    CHECK(huge_differ > 0);        // the default's +inf start
  }
}

TEST_CASE("awq: folding 1/s into a norm or a previous linear reproduces the layer through the GEMM format") {
  const std::int64_t n = 29, k = 128, t = 64, pre = 48, extra = 5;
  std::mt19937 rng(303);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto draw = [&](std::size_t count, float scale, float shift) {
    std::vector<float> v(count);
    for (auto& e : v) {
      e = shift + scale * nd(rng);
      if (e == 0.0f) e = 0.25f;
    }
    return v;
  };
  // The layer's input three ways: X = norm(h) gamma + beta (a LayerNorm), and X = h2 Wp[extra:]^T +
  // bp[extra:] (the tail of a fused previous linear), with salient channels made by gamma / Wp's rows.
  const std::vector<float> h = draw(static_cast<std::size_t>(t * k), 1.0f, 0.2f);
  std::vector<float> gamma = draw(static_cast<std::size_t>(k), 0.2f, 1.0f),
                     beta = draw(static_cast<std::size_t>(k), 0.1f, 0.0f);
  for (std::int64_t c = 3; c < k; c += 31) gamma[static_cast<std::size_t>(c)] *= 25.0f;
  auto norm_out = [&](const std::vector<float>& g, const std::vector<float>& b) {
    std::vector<float> x(static_cast<std::size_t>(t * k));
    for (std::int64_t i = 0; i < t; ++i) {
      double mean = 0.0, var = 0.0;
      for (std::int64_t c = 0; c < k; ++c) mean += h[i * k + c];
      mean /= k;
      for (std::int64_t c = 0; c < k; ++c) var += (h[i * k + c] - mean) * (h[i * k + c] - mean);
      const float inv = static_cast<float>(1.0 / std::sqrt(var / k + 1e-5));
      for (std::int64_t c = 0; c < k; ++c)
        x[i * k + c] = static_cast<float>(h[i * k + c] - mean) * inv * g[c] + b[c];
    }
    return x;
  };
  const std::vector<float> h2 = draw(static_cast<std::size_t>(t * pre), 1.0f, 0.0f);
  std::vector<float> wp = draw(static_cast<std::size_t>((k + extra) * pre), 0.1f, 0.0f);
  std::vector<float> bp = draw(static_cast<std::size_t>(k + extra), 0.1f, 0.0f);
  for (std::int64_t c = 7; c < k; c += 29)
    for (std::int64_t j = 0; j < pre; ++j) wp[(extra + c) * pre + j] *= 30.0f;
  auto linear_out = [&](const std::vector<float>& w_prev, const std::vector<float>& b_prev) {
    std::vector<float> x(static_cast<std::size_t>(t * k));
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t c = 0; c < k; ++c) {
        double acc = b_prev[extra + c];
        for (std::int64_t j = 0; j < pre; ++j) acc += double(h2[i * pre + j]) * w_prev[(extra + c) * pre + j];
        x[i * k + c] = static_cast<float>(acc);
      }
    return x;
  };
  const std::vector<float> w = draw(static_cast<std::size_t>(n * k), 0.05f, 0.0f);

  for (int source = 0; source < 2; ++source) {
    CAPTURE(source);
    const std::vector<float> x = source == 0 ? norm_out(gamma, beta) : linear_out(wp, bp);
    llmk::obs::AwqOptions opt;
    opt.group_size = 64;
    llmk::obs::AwqResult r;
    REQUIRE(llmk::obs::awq_quantize(w.data(), n, k, k, x.data(), t, k, opt, &r).ok());
    CHECK(r.alpha > 0.0);
    const std::vector<float>& s = r.input_scales;

    // Fold 1/s upstream and recompute the activations.
    std::vector<float> xf;
    if (source == 0) {
      std::vector<float> g2 = gamma, b2 = beta;
      REQUIRE(llmk::obs::awq_fold_into_norm(g2.data(), b2.data(), k, s.data()).ok());
      for (std::int64_t c = 0; c < k; ++c) CHECK(g2[c] == gamma[c] / s[c]);
      xf = norm_out(g2, b2);
    } else {
      std::vector<float> w2 = wp, b2 = bp;
      REQUIRE(llmk::obs::awq_fold_into_linear(w2.data(), k + extra, pre, pre, b2.data(), k, s.data()).ok());
      for (std::int64_t j = 0; j < extra * pre; ++j)
        CHECK(w2[j] == wp[j]);  // rows that do not feed the layer
      for (std::int64_t j = 0; j < extra; ++j) CHECK(b2[j] == bp[j]);
      xf = linear_out(w2, b2);
    }
    // X' = X diag(1/s) up to fp32 rounding of the recomputation.
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t c = 0; c < k; ++c) {
        const double want = double(x[i * k + c]) / s[c];
        REQUIRE(std::fabs(xf[i * k + c] - want) <= 1e-5 * (std::fabs(want) + 1.0 / s[c]));
      }

    // The layer through the weight-only GEMM's reference, from the packed codes, scales, zeros and g_idx.
    std::vector<std::uint8_t> plain;
    REQUIRE(llmk::obs::pack_plain_codes(r.quantized, &plain).ok());
    std::vector<double> y(static_cast<std::size_t>(t * n)), mag(y.size());
    llmk::reference::weight_only_gemm(xf.data(), k, plain.data(), k / 2, 4, r.quantized.scales.data(),
                                      r.quantized.zeros.data(), r.quantized.g_idx.data(), 64,
                                      static_cast<const float*>(nullptr), static_cast<int>(t),
                                      static_cast<int>(n), static_cast<int>(k), y.data(), mag.data());
    double err = 0.0;
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t row = 0; row < n; ++row) {
        double exact = 0.0, scaled = 0.0;  // X W^T, and X diag(1/s) dequantized^T
        for (std::int64_t c = 0; c < k; ++c) {
          exact += double(x[i * k + c]) * w[row * k + c];
          scaled += double(x[i * k + c]) / s[c] * r.quantized.dequantized[row * k + c];
        }
        // The folded activations differ from X / s by fp32 rounding (1e-5 relative above).
        REQUIRE(std::fabs(y[i * n + row] - scaled) <= 2e-5 * mag[i * n + row] + 1e-9);
        err += (y[i * n + row] - exact) * (y[i * n + row] - exact);
      }
    err /= static_cast<double>(t * n);
    CHECK(err == doctest::Approx(r.output_error).epsilon(1e-3));
    std::printf(
        "awq fold into %-6s: alpha %.2f, layer output MSE through the GEMM format %.4e (AWQ %.4e, RTN "
        "%.4e)\n",
        source == 0 ? "norm" : "linear", r.alpha, err, r.output_error, r.rtn_error);
  }
}

TEST_CASE("awq: equal-magnitude activations give s = 1 and alpha 0; without clipping the result is RTN") {
  const std::int64_t n = 24, k = 256, t = 64;
  AwqLayer l = make_awq_layer(n, k, t, 0, 0, 0, 404);
  std::mt19937 rng(405);
  for (auto& v : l.x) v = (rng() & 1u) ? 0.75f : -0.75f;  // |x| = 0.75 everywhere
  for (const bool zero_point : {true, false}) {
    CAPTURE(zero_point);
    llmk::obs::AwqOptions opt;
    opt.zero_point = zero_point;
    opt.clip = false;
    const llmk::obs::AwqResult r = run_awq(l, opt);
    CHECK(r.alpha_index == 0);
    for (float s : r.input_scales) REQUIRE(s == 1.0f);
    for (double e : r.alpha_errors) CHECK(e == r.rtn_error);  // every candidate is RTN: the first one wins
    CHECK(r.output_error == r.rtn_error);
    // RTN computed here with llmk's quantizer directly.
    for (std::int64_t row = 0; row < n; ++row)
      for (std::int64_t g = 0; g < k / 128; ++g) {
        const float* wg = l.w.data() + row * k + g * 128;
        float lo = wg[0], hi = wg[0], amax = 0.0f;
        for (int j = 0; j < 128; ++j) {
          lo = std::min(lo, wg[j]);
          hi = std::max(hi, wg[j]);
          amax = std::max(amax, std::fabs(wg[j]));
        }
        for (int j = 0; j < 128; ++j) {
          int u;
          if (zero_point) {
            using Q = llmk::quant::Quantizer<llmk::uint4_t, llmk::quant::Asymmetric, llmk::quant::PerChannel>;
            u = Q::quantize(wg[j], Q::params_from_range(lo, hi));
          } else {
            using Q = llmk::quant::Quantizer<llmk::int4_t, llmk::quant::Symmetric, llmk::quant::PerChannel>;
            u = Q::quantize(wg[j], Q::params_from_absmax(amax)) + 8;
          }
          REQUIRE(r.quantized.codes[static_cast<std::size_t>(row * k + g * 128 + j)] == u);
        }
      }
    // With the clip search the scales stay 1 and alpha 0.
    opt.clip = true;
    const llmk::obs::AwqResult rc = run_awq(l, opt);
    CHECK(rc.alpha_index == 0);
    for (float s : rc.input_scales) REQUIRE(s == 1.0f);
  }
}

TEST_CASE("awq: bad arguments are named") {
  const AwqLayer l = make_awq_layer(8, 256, 16, 0, 0, 1, 505);
  const llmk::obs::AwqOptions ok;
  llmk::obs::AwqResult r;
  auto call = [&](const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw, const float* x,
                  std::int64_t tokens, std::int64_t ldx, const llmk::obs::AwqOptions& o,
                  llmk::obs::AwqResult* out) {
    return llmk::obs::awq_quantize(w, rows, cols, ldw, x, tokens, ldx, o, out);
  };
  const float* w = l.w.data();
  const float* x = l.x.data();
  CHECK(has(call(nullptr, 8, 256, 256, x, 16, 256, ok, &r), "w"));
  CHECK(has(call(w, 0, 256, 256, x, 16, 256, ok, &r), "rows"));
  CHECK(has(call(w, 8, 0, 256, x, 16, 256, ok, &r), "cols"));
  CHECK(has(call(w, 8, 256, 255, x, 16, 256, ok, &r), "ldw"));
  CHECK(has(call(w, 8, 256, 256, nullptr, 16, 256, ok, &r), "x"));
  CHECK(has(call(w, 8, 256, 256, x, 0, 256, ok, &r), "tokens"));
  CHECK(has(call(w, 8, 256, 256, x, 16, 100, ok, &r), "ldx"));
  CHECK(has(call(w, 8, 256, 256, x, 16, 256, ok, nullptr), "out"));
  auto bad = [&](auto edit, const char* name) {
    llmk::obs::AwqOptions o = ok;
    edit(o);
    CAPTURE(name);
    CHECK(has(call(w, 8, 256, 256, x, 16, 256, o, &r), name));
  };
  bad([](auto& o) { o.bits = 3; }, "bits");
  bad([](auto& o) { o.bits = 2; }, "bits");
  bad([](auto& o) { o.group_size = 100; }, "group_size");
  bad([](auto& o) { o.group_size = -1; }, "group_size");
  bad([](auto& o) { o.n_grid = 0; }, "n_grid");
  bad([](auto& o) { o.clip_n_grid = 0; }, "clip_n_grid");
  bad([](auto& o) { o.clip_max_shrink = 1.5; }, "clip_max_shrink");
  bad([](auto& o) { o.clip_max_shrink = std::nan(""); }, "clip_max_shrink");
  bad([](auto& o) { o.clip_sample_tokens = 0; }, "clip_sample_tokens");
  std::vector<float> wn = l.w, xn = l.x;
  wn[3 * 256 + 17] = std::numeric_limits<float>::quiet_NaN();
  xn[5 * 256 + 200] = std::numeric_limits<float>::infinity();
  CHECK(has(call(wn.data(), 8, 256, 256, x, 16, 256, ok, &r), "w"));
  CHECK(has(call(w, 8, 256, 256, xn.data(), 16, 256, ok, &r), "x"));

  // The folds: nothing changes on error.
  std::vector<float> gamma(4, 1.5f), beta(4, 0.5f), pw(6 * 3, 2.0f), pb(6, 1.0f);
  const std::vector<float> s_ok = {1.0f, 2.0f, 0.5f, 4.0f}, s_bad = {1.0f, 0.0f, 0.5f, 4.0f};
  CHECK(has(llmk::obs::awq_fold_into_norm(gamma.data(), beta.data(), 4, s_bad.data()), "scales"));
  CHECK(has(llmk::obs::awq_fold_into_norm(gamma.data(), beta.data(), 4, nullptr), "scales"));
  CHECK(has(llmk::obs::awq_fold_into_norm<float>(nullptr, beta.data(), 4, s_ok.data()), "gamma"));
  CHECK(has(llmk::obs::awq_fold_into_norm(gamma.data(), beta.data(), 0, s_ok.data()), "k"));
  CHECK(gamma == std::vector<float>(4, 1.5f));
  CHECK(has(llmk::obs::awq_fold_into_linear(pw.data(), 3, 3, 3, pb.data(), 4, s_ok.data()), "prev_rows"));
  CHECK(has(llmk::obs::awq_fold_into_linear(pw.data(), 6, 3, 2, pb.data(), 4, s_ok.data()), "ld_prev"));
  CHECK(has(llmk::obs::awq_fold_into_linear(pw.data(), 6, 0, 3, pb.data(), 4, s_ok.data()), "prev_cols"));
  CHECK(has(llmk::obs::awq_fold_into_linear<float>(nullptr, 6, 3, 3, pb.data(), 4, s_ok.data()), "prev_w"));
  CHECK(has(llmk::obs::awq_fold_into_linear(pw.data(), 6, 3, 3, pb.data(), 4, s_bad.data()), "scales"));
  CHECK(pw == std::vector<float>(18, 2.0f));
  CHECK(pb == std::vector<float>(6, 1.0f));
  REQUIRE(llmk::obs::awq_fold_into_linear(pw.data(), 6, 3, 3, pb.data(), 4, s_ok.data()).ok());
  CHECK(pw[0] == 2.0f);                                 // row 0, 1 do not feed the layer
  CHECK(pw[3 * 3] == 1.0f);                             // row 3 = channel 1: / 2
  CHECK(pb[5] == 0.25f);                                // channel 3: / 4
  std::vector<llmk::half> hw(6 * 3, llmk::half(2.0f));  // half weights, no bias
  REQUIRE(llmk::obs::awq_fold_into_linear<llmk::half>(hw.data(), 6, 3, 3, nullptr, 4, s_ok.data()).ok());
  CHECK(static_cast<float>(hw[3 * 3]) == 1.0f);
  CHECK(static_cast<float>(hw[5 * 3 + 2]) == 0.5f);
  std::vector<llmk::bfloat16> hg(4, llmk::bfloat16(1.0f));
  REQUIRE(llmk::obs::awq_fold_into_norm<llmk::bfloat16>(hg.data(), nullptr, 4, s_ok.data()).ok());
  CHECK(static_cast<float>(hg[3]) == 0.25f);
}
