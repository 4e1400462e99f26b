// llmk/reference/attention.hpp: host references of attention (llmk/attention), for tests and users.
//
//   attention_fp64   exact-as-practical attention: every step in fp64 from the exact values of the inputs;
//                    what kernels are compared against.
//   attention_naive  what a straightforward framework implementation computes in the storage precision T
//                    (fp32 accumulation, intermediates rounded to T). Its distance to attention_fp64 is the
//                    baseline of the FlashAttention tolerance rule:
//                    max|out - ref| <= 2 * max|naive - ref| + 1e-3.
//   merge_states     combines partial results (output, LSE) over disjoint key sets, as split-KV kernels do.
//   attention_fp8_fp64       attention_fp64 over 8-bit float codes times their descale factors.
//   attention_fp8_p_rounded  what an fp8 kernel computes when it rounds P to e4m3 per key tile, with a
//                            per-element slack for its fp32 arithmetic.
//
// Layout (that of llmk::attention with contiguous tensors): ragged and token-major, Q and O [total_q,
// num_heads, head_dim], K and V [total_kv, num_kv_heads, head_dim], LSE [total_q, num_heads]; sequence b owns
// q_lens[b] query tokens starting at q_lens[0] + ... + q_lens[b - 1], and kv_lens[b] key tokens likewise.
// Query head h reads KV head h / (num_heads / num_kv_heads). The mask is llmk::attention::make_mask
// (bottom-right aligned, see llmk/attention/mask.cuh). Decode is the case q_lens[b] == 1 (repack DecodeArgs'
// K/V into this layout). Simple loops, no tiling; offsets are 64-bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "llmk/attention/args.cuh"
#include "llmk/attention/mask.cuh"
#include "llmk/core/numeric.cuh"

namespace llmk::reference {

/// One attention problem in the ragged layout of the file comment (example: attention_fp64).
struct AttentionProblem {
  std::vector<int> q_lens, kv_lens;  // per sequence; same size (the batch)
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;
  llmk::attention::AttentionOptions options;  // softmax_scale is used as given (set it, e.g. default_scale())

  /// Number of sequences.
  int batch() const { return static_cast<int>(q_lens.size()); }
  /// Sum of q_lens: the token count of Q and O.
  std::int64_t total_q() const { return sum(q_lens); }
  /// Sum of kv_lens: the token count of K and V.
  std::int64_t total_kv() const { return sum(kv_lens); }
  /// Elements of Q (and O): total_q * num_heads * head_dim.
  std::int64_t q_elements() const { return total_q() * num_heads * head_dim; }
  /// Elements of K (and of V): total_kv * num_kv_heads * head_dim.
  std::int64_t kv_elements() const { return total_kv() * num_kv_heads * head_dim; }

  /// Throws std::invalid_argument when the shape is inconsistent: q_lens and kv_lens of different sizes, a
  /// negative length, a non-positive head count or head_dim, or num_heads not a multiple of num_kv_heads.
  void validate() const {
    if (q_lens.size() != kv_lens.size())
      throw std::invalid_argument("AttentionProblem: q_lens has " + std::to_string(q_lens.size()) +
                                  " entries, kv_lens " + std::to_string(kv_lens.size()));
    for (std::size_t b = 0; b < q_lens.size(); ++b)
      if (q_lens[b] < 0 || kv_lens[b] < 0)
        throw std::invalid_argument("AttentionProblem: negative length in sequence " + std::to_string(b));
    if (num_heads <= 0 || num_kv_heads <= 0 || head_dim <= 0)
      throw std::invalid_argument("AttentionProblem: num_heads, num_kv_heads and head_dim must be > 0");
    if (num_heads % num_kv_heads != 0)
      throw std::invalid_argument("AttentionProblem: num_heads (" + std::to_string(num_heads) +
                                  ") is not a multiple of num_kv_heads (" + std::to_string(num_kv_heads) +
                                  ")");
  }

 private:
  static std::int64_t sum(const std::vector<int>& lens) {
    std::int64_t total = 0;
    for (int len : lens) total += len;
    return total;
  }
};

namespace attention_detail {

// The exact value of a storage element (half, bfloat16 and float are all exact in fp64).
template <class T>
double exact(T x) {
  if constexpr (std::is_same_v<T, double>)
    return x;
  else
    return static_cast<double>(static_cast<float>(x));
}

// x rounded to T (ties to even), returned as the float holding that T value.
template <class T>
float round_to(float x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else
    return static_cast<float>(T(x));
}

// Calls f(b, i, h, q_token, kv_token0, kv_head, mask): once per (sequence, query, head) row, in the order of
// the rows in memory. q_token is the row's token index in Q, kv_token0 the sequence's first token in K/V.
// The mask, written independently of llmk::attention::Mask (so a mistake there cannot hide in both) and in
// 64-bit arithmetic: query i sits at key position i + kv_len - q_len; key j is visible iff 0 <= j < kv_len,
// j >= pos - window_left (window_left >= 0), j <= pos + right (right = 0 when causal, window_right when >= 0,
// the smaller of the two when both apply).
struct ReferenceMask {
  std::int64_t q_len, kv_len, window_left, right;  // right < 0: unbounded
  bool visible(std::int64_t i, std::int64_t j) const {
    const std::int64_t pos = i + kv_len - q_len;
    if (j < 0 || j >= kv_len) return false;
    if (window_left >= 0 && j < pos - window_left) return false;
    if (right >= 0 && j > pos + right) return false;
    return true;
  }
};

template <class F>
void for_each_row(const AttentionProblem& p, F&& f) {
  p.validate();
  const int group = p.num_heads / p.num_kv_heads;
  std::int64_t q0 = 0, kv0 = 0;
  for (int b = 0; b < p.batch(); ++b) {
    std::int64_t right = p.options.window_right;
    if (p.options.causal) right = right < 0 ? 0 : std::min<std::int64_t>(right, 0);
    const ReferenceMask mask{p.q_lens[b], p.kv_lens[b], p.options.window_left, right};
    for (int i = 0; i < p.q_lens[b]; ++i)
      for (int h = 0; h < p.num_heads; ++h) f(b, i, h, q0 + i, kv0, h / group, mask);
    q0 += p.q_lens[b];
    kv0 += p.kv_lens[b];
  }
}

}  // namespace attention_detail

/// Attention in fp64. For every query row: s_j = scale * (q . k_j), then s_j = softcap * tanh(s_j / softcap)
/// when softcap > 0, over the keys j the mask shows; out = softmax(s) V and lse = max + log(sum exp(s - max))
/// (natural log), all in fp64 from the exact values of the T inputs (T: half, bfloat16, float or double).
/// A row that sees no key gets out = 0 and lse = -inf. out is [total_q, num_heads, head_dim], lse
/// [total_q, num_heads] or null. Throws std::invalid_argument on an inconsistent shape (see validate()).
///
///   llmk::reference::AttentionProblem pr;
///   pr.q_lens = {5, 1};                 // sequence 0: a 5-token prefill; sequence 1: one decode token
///   pr.kv_lens = {5, 9};
///   pr.num_heads = 8;                   // GQA, 4 query heads per KV head
///   pr.num_kv_heads = 2;
///   pr.head_dim = 64;
///   pr.options.softmax_scale = llmk::attention::default_scale(64);
///   pr.options.causal = true;
///   std::vector<double> out(pr.q_elements()), lse(pr.total_q() * pr.num_heads);
///   llmk::reference::attention_fp64(pr, q.data(), k.data(), v.data(), out.data(), lse.data());
template <class T>
void attention_fp64(const AttentionProblem& p, const T* q, const T* k, const T* v, double* out, double* lse) {
  using attention_detail::exact;
  const int d_len = p.head_dim;
  const std::int64_t q_token = static_cast<std::int64_t>(p.num_heads) * d_len;
  const std::int64_t kv_token = static_cast<std::int64_t>(p.num_kv_heads) * d_len;
  const double scale = p.options.softmax_scale;
  const double softcap = p.options.softcap;
  std::vector<double> s, acc(static_cast<std::size_t>(d_len));
  attention_detail::for_each_row(p, [&](int b, int i, int h, std::int64_t qt, std::int64_t kv0, int hk,
                                        const attention_detail::ReferenceMask& mask) {
    const T* qi = q + qt * q_token + static_cast<std::int64_t>(h) * d_len;
    double* o = out + qt * q_token + static_cast<std::int64_t>(h) * d_len;
    const int kv_len = p.kv_lens[b];
    s.assign(static_cast<std::size_t>(kv_len), 0.0);
    bool any = false;
    double m = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < kv_len; ++j) {
      if (!mask.visible(i, j)) continue;
      const T* kj = k + (kv0 + j) * kv_token + static_cast<std::int64_t>(hk) * d_len;
      double dot = 0.0;
      for (int d = 0; d < d_len; ++d) dot += exact(qi[d]) * exact(kj[d]);
      double sj = scale * dot;
      if (softcap > 0.0) sj = softcap * std::tanh(sj / softcap);
      s[static_cast<std::size_t>(j)] = sj;
      m = any ? std::fmax(m, sj) : sj;
      any = true;
    }
    if (!any) {  // nothing visible: the convention of llmk::attention (zero row, LSE -inf)
      for (int d = 0; d < d_len; ++d) o[d] = 0.0;
      if (lse) lse[qt * p.num_heads + h] = -std::numeric_limits<double>::infinity();
      return;
    }
    // Subtracting the row max keeps every exp in (0, 1]: no overflow, and the largest term is exactly 1.
    double sum = 0.0;
    for (auto& a : acc) a = 0.0;
    for (int j = 0; j < kv_len; ++j) {
      if (!mask.visible(i, j)) continue;
      const double e = std::exp(s[static_cast<std::size_t>(j)] - m);
      const T* vj = v + (kv0 + j) * kv_token + static_cast<std::int64_t>(hk) * d_len;
      sum += e;
      for (int d = 0; d < d_len; ++d) acc[static_cast<std::size_t>(d)] += e * exact(vj[d]);
    }
    for (int d = 0; d < d_len; ++d) o[d] = acc[static_cast<std::size_t>(d)] / sum;
    if (lse) lse[qt * p.num_heads + h] = m + std::log(sum);
  });
}

/// fp8 attention's reference: Q, K and V given as 8-bit float codes (e4m3 / e5m2) with descale factors
/// (value = code * descale), dequantized exactly in fp64 and attended by attention_fp64. Each descale
/// array holds one value (per_kv_head false) or num_kv_heads values; a query head uses its KV head's.
///
///   llmk::reference::attention_fp8_fp64(pr, q8.data(), k8.data(), v8.data(), &qs, &ks, &vs, false,
///                                       out.data(), lse.data());
template <class Code>
void attention_fp8_fp64(const AttentionProblem& p, const Code* q, const Code* k, const Code* v,
                        const float* q_descale, const float* k_descale, const float* v_descale,
                        bool per_kv_head, double* out, double* lse) {
  p.validate();
  const int d = p.head_dim, group = p.num_heads / p.num_kv_heads;
  auto dequant = [&](const Code* x, std::int64_t tokens, int heads, int heads_per_kv, const float* descale) {
    std::vector<double> y(static_cast<std::size_t>(tokens * heads * d));
    for (std::int64_t t = 0; t < tokens; ++t)
      for (int h = 0; h < heads; ++h) {
        const double s = descale[per_kv_head ? h / heads_per_kv : 0];
        for (int e = 0; e < d; ++e) {
          const std::size_t i = static_cast<std::size_t>((t * heads + h) * d + e);
          y[i] = static_cast<double>(x[i].to_float()) * s;
        }
      }
    return y;
  };
  const std::vector<double> qd = dequant(q, p.total_q(), p.num_heads, group, q_descale);
  const std::vector<double> kd = dequant(k, p.total_kv(), p.num_kv_heads, 1, k_descale);
  const std::vector<double> vd = dequant(v, p.total_kv(), p.num_kv_heads, 1, v_descale);
  attention_fp64(p, qd.data(), kd.data(), vd.data(), out, lse);
}

/// The error model of attention_fp8_p_rounded: how a kernel forms P (its tiles, its bias) and how far its
/// fp32 arithmetic may be from fp64. The defaults describe llmk's Hopper fp8 prefill in the simulator
/// (example: attention_fp8_p_rounded).
struct Fp8PRoundingModel {
  int key_tile = 128;  // keys per tile (the kernel's Bc): the running max moves once per tile
  int exp_bias = 8;    // p = 2^(x - m + exp_bias): p in (0, 2^exp_bias]
  // Error of the exponent argument x - m + exp_bias (fp32 scale, max and FMA), relative to |x| + |m| +
  // exp_bias; and of 2^arg itself, relative to p.
  double arg_rel = 0x1p-21, exp_rel = 0x1p-21;
  // Error of x from summing the QK products (a GPU's fp8 tensor cores keep fewer bits than fp32), relative to
  // the same sum of |q_d k_d| (scaled as x is). 0: exact products summed in fp32 (the simulator).
  double score_rel = 0.0;
};

/// What an fp8 attention kernel that rounds P to e4m3 computes, with a per-element bound of what its
/// arithmetic may add (attention_fp8_fp64 is the exact attention; this is that kernel's answer). Per row, in
/// the kernel's order: x_j = log2(e) s_j (s_j as attention_fp64 over the dequantized inputs); keys in tiles
/// t = j / key_tile of the sequence's keys; m_t the running max of x after tile t; p_j = 2^(x_j - m_t + bias)
/// rounded to float8_e4m3 (p^_j); out = v_descale sum_j 2^(m_t - m_T) p^_j v_j / L with L = sum_j 2^(x_j -
/// m_T + bias) unrounded (the kernel's l). Per element, `slack` bounds what fp32 arithmetic can change: a p_j
/// within its error of an e4m3 rounding boundary may round either way (|p^hi - p^lo|), and every p_j's error
/// moves its share of out (the sum and L alike); `magnitude` is v_descale sum_j 2^(m_t - m_T) p^_j |v_j| / L,
/// the scale of the P V accumulation's own rounding. A row that sees no key gets 0 in all three. Finite codes
/// only. Throws std::invalid_argument like attention_fp64, and for key_tile < 1.
///
///   llmk::reference::Fp8PRoundingModel model;   // model.key_tile = the kernel's Bc
///   std::vector<double> want(pr.q_elements()), slack(want.size()), magnitude(want.size());
///   llmk::reference::attention_fp8_p_rounded(pr, q8.data(), k8.data(), v8.data(), &qs, &ks, &vs, false,
///                                            model, want.data(), slack.data(), magnitude.data());
template <class Code>
void attention_fp8_p_rounded(const AttentionProblem& p, const Code* q, const Code* k, const Code* v,
                             const float* q_descale, const float* k_descale, const float* v_descale,
                             bool per_kv_head, const Fp8PRoundingModel& model, double* out, double* slack,
                             double* magnitude) {
  if (model.key_tile < 1) throw std::invalid_argument("attention_fp8_p_rounded: key_tile must be >= 1");
  const int d_len = p.head_dim, group = p.num_heads / std::max(p.num_kv_heads, 1);
  const std::int64_t q_token = static_cast<std::int64_t>(p.num_heads) * d_len;
  const std::int64_t kv_token = static_cast<std::int64_t>(p.num_kv_heads) * d_len;
  const double log2e = 1.4426950408889634, bias = model.exp_bias;
  const double softcap = p.options.softcap;
  std::vector<double> x, err, rel, tile_max, acc(static_cast<std::size_t>(d_len)), sl(acc.size()),
      mag(acc.size());
  auto value = [](Code c) { return static_cast<double>(c.to_float()); };
  attention_detail::for_each_row(p, [&](int b, int i, int h, std::int64_t qt, std::int64_t kv0, int hk,
                                        const attention_detail::ReferenceMask& mask) {
    const int kv_len = p.kv_lens[b], head = per_kv_head ? h / group : 0;
    const double qk = static_cast<double>(q_descale[head]) * k_descale[head], vs = v_descale[head];
    const Code* qi = q + qt * q_token + static_cast<std::int64_t>(h) * d_len;
    x.assign(static_cast<std::size_t>(kv_len), -std::numeric_limits<double>::infinity());
    err.assign(x.size(), 0.0);
    const int tiles = (kv_len + model.key_tile - 1) / model.key_tile;
    tile_max.assign(static_cast<std::size_t>(tiles), -std::numeric_limits<double>::infinity());
    for (int j = 0; j < kv_len; ++j) {
      if (!mask.visible(i, j)) continue;
      const Code* kj = k + (kv0 + j) * kv_token + static_cast<std::int64_t>(hk) * d_len;
      double dot = 0.0, abs_dot = 0.0;
      for (int d = 0; d < d_len; ++d) {
        dot += value(qi[d]) * value(kj[d]);
        abs_dot += std::fabs(value(qi[d]) * value(kj[d]));
      }
      double s = p.options.softmax_scale * qk * dot;
      if (softcap > 0.0) s = softcap * std::tanh(s / softcap);
      x[static_cast<std::size_t>(j)] = log2e * s;
      // The products' summation error, through the scale (tanh's slope is at most 1).
      err[static_cast<std::size_t>(j)] = model.score_rel * log2e * p.options.softmax_scale * qk * abs_dot;
      double& tm = tile_max[static_cast<std::size_t>(j / model.key_tile)];
      tm = std::max(tm, log2e * s);
    }
    double m_final = -std::numeric_limits<double>::infinity();
    for (double tm : tile_max) m_final = std::max(m_final, tm);
    double* o = out + qt * q_token + static_cast<std::int64_t>(h) * d_len;
    double* o_slack = slack + qt * q_token + static_cast<std::int64_t>(h) * d_len;
    double* o_mag = magnitude + qt * q_token + static_cast<std::int64_t>(h) * d_len;
    std::fill(acc.begin(), acc.end(), 0.0);
    std::fill(sl.begin(), sl.end(), 0.0);
    std::fill(mag.begin(), mag.end(), 0.0);
    if (m_final == -std::numeric_limits<double>::infinity()) {  // nothing visible
      std::copy(acc.begin(), acc.end(), o);
      std::copy(acc.begin(), acc.end(), o_slack);
      std::copy(acc.begin(), acc.end(), o_mag);
      return;
    }
    const double err_max = *std::max_element(err.begin(), err.end());  // the max's own error
    double l = 0.0, m = -std::numeric_limits<double>::infinity();
    rel.assign(x.size(), 0.0);  // each p's relative error bound
    for (int t = 0; t < tiles; ++t) {
      m = std::max(m, tile_max[static_cast<std::size_t>(t)]);
      const double w = std::exp2(m - m_final);  // the rescales of this tile's terms until the end
      for (int j = t * model.key_tile; j < std::min(kv_len, (t + 1) * model.key_tile); ++j) {
        const double xj = x[static_cast<std::size_t>(j)];
        if (xj == -std::numeric_limits<double>::infinity()) continue;
        const double pj = std::exp2(xj - m + bias);
        const double eps = (model.arg_rel * (std::fabs(xj) + std::fabs(m) + bias) +
                            err[static_cast<std::size_t>(j)] + err_max) *
                               0.6931471805599453 +
                           model.exp_rel;
        rel[static_cast<std::size_t>(j)] = eps;
        const double ph = static_cast<double>(float8_e4m3(static_cast<float>(pj)).to_float());
        const double lo = static_cast<double>(float8_e4m3(static_cast<float>(pj * (1.0 - eps))).to_float());
        const double hi = static_cast<double>(float8_e4m3(static_cast<float>(pj * (1.0 + eps))).to_float());
        l += std::exp2(xj - m_final + bias);
        const Code* vj = v + (kv0 + j) * kv_token + static_cast<std::int64_t>(hk) * d_len;
        for (int d = 0; d < d_len; ++d) {
          const double vd = value(vj[d]) * vs;
          acc[static_cast<std::size_t>(d)] += w * ph * vd;
          mag[static_cast<std::size_t>(d)] += w * ph * std::fabs(vd);
          sl[static_cast<std::size_t>(d)] += w * ((hi - lo) + eps * ph) * std::fabs(vd);
        }
      }
    }
    // Each p's error also moves L: |d(out)| <= sum_j eps_j p_j |out| / L.
    double l_err = 0.0;
    for (int j = 0; j < kv_len; ++j)
      if (x[static_cast<std::size_t>(j)] != -std::numeric_limits<double>::infinity())
        l_err +=
            rel[static_cast<std::size_t>(j)] * std::exp2(x[static_cast<std::size_t>(j)] - m_final + bias);
    for (int d = 0; d < d_len; ++d) {
      o[d] = acc[static_cast<std::size_t>(d)] / l;
      o_slack[d] = (sl[static_cast<std::size_t>(d)] + l_err * std::fabs(o[d])) / l;
      o_mag[d] = mag[static_cast<std::size_t>(d)] / l;
    }
  });
}

/// "Naive same-precision" attention: what a straightforward framework implementation in T computes, the
/// baseline of the FlashAttention tolerance rule. Per row, with every "round" a round-to-nearest-even to T:
///   s_j = round(sum_d q_d k_jd)      accumulated in fp32 over d = 0, 1, ... (products exact for 16-bit T)
///   s_j = round(s_j * scale)         in fp32
///   s_j = round(softcap * tanh(s_j / softcap))   in fp32, when softcap > 0
///   p_j = round(exp(s_j - max) / sum)            softmax in fp32 over the visible keys; masked keys get 0
///   o_d = round(sum_j p_j v_jd)      accumulated in fp32 over j = 0, 1, ...
/// A row that sees no key gets 0 (a framework would give NaN; llmk's convention is 0). out is [total_q,
/// num_heads, head_dim] floats, each exactly representable in T. With T = float nothing is rounded beyond
/// fp32. Large inputs can overflow T (as in the framework). Throws std::invalid_argument like attention_fp64.
///
///   std::vector<float> naive(pr.q_elements());   // pr, q, k, v (llmk::half) as for attention_fp64
///   llmk::reference::attention_naive(pr, q.data(), k.data(), v.data(), naive.data());
template <class T>
void attention_naive(const AttentionProblem& p, const T* q, const T* k, const T* v, float* out) {
  using attention_detail::round_to;
  const int d_len = p.head_dim;
  const std::int64_t q_token = static_cast<std::int64_t>(p.num_heads) * d_len;
  const std::int64_t kv_token = static_cast<std::int64_t>(p.num_kv_heads) * d_len;
  const float scale = p.options.softmax_scale;
  const float softcap = p.options.softcap;
  std::vector<float> s;
  attention_detail::for_each_row(p, [&](int b, int i, int h, std::int64_t qt, std::int64_t kv0, int hk,
                                        const attention_detail::ReferenceMask& mask) {
    const T* qi = q + qt * q_token + static_cast<std::int64_t>(h) * d_len;
    float* o = out + qt * q_token + static_cast<std::int64_t>(h) * d_len;
    const int kv_len = p.kv_lens[b];
    s.assign(static_cast<std::size_t>(kv_len), 0.0f);
    bool any = false;
    float m = 0.0f;
    for (int j = 0; j < kv_len; ++j) {
      if (!mask.visible(i, j)) continue;
      const T* kj = k + (kv0 + j) * kv_token + static_cast<std::int64_t>(hk) * d_len;
      float dot = 0.0f;
      for (int d = 0; d < d_len; ++d) dot += static_cast<float>(qi[d]) * static_cast<float>(kj[d]);
      float sj = round_to<T>(round_to<T>(dot) * scale);
      if (softcap > 0.0f) sj = round_to<T>(softcap * std::tanh(sj / softcap));
      s[static_cast<std::size_t>(j)] = sj;
      m = any ? std::fmax(m, sj) : sj;
      any = true;
    }
    if (!any) {
      for (int d = 0; d < d_len; ++d) o[d] = 0.0f;
      return;
    }
    // The framework's softmax: exponentials of (s - max) in fp32, normalized, then rounded to T (masked
    // entries stay 0, so they drop out of P V).
    float sum = 0.0f;
    for (int j = 0; j < kv_len; ++j) {
      if (!mask.visible(i, j)) continue;
      s[static_cast<std::size_t>(j)] = std::exp(s[static_cast<std::size_t>(j)] - m);
      sum += s[static_cast<std::size_t>(j)];
    }
    for (int j = 0; j < kv_len; ++j)
      s[static_cast<std::size_t>(j)] =
          mask.visible(i, j) ? round_to<T>(s[static_cast<std::size_t>(j)] / sum) : 0.0f;
    for (int d = 0; d < d_len; ++d) {
      float acc = 0.0f;
      for (int j = 0; j < kv_len; ++j) {
        if (!mask.visible(i, j)) continue;
        const T* vj = v + (kv0 + j) * kv_token + static_cast<std::int64_t>(hk) * d_len;
        acc += s[static_cast<std::size_t>(j)] * static_cast<float>(vj[d]);
      }
      o[d] = round_to<T>(acc);
    }
  });
}

/// Merges partial attention results over disjoint key sets into the result over their union, in fp64:
///   lse = log(sum_i exp(lse_i)),  out = sum_i exp(lse_i - lse) * o_i.
/// o_parts is [parts, dim] (part i's output row), lse_parts [parts] (natural log). A part with lse = -inf saw
/// no key and contributes nothing; when every part is -inf (or parts == 0), out = 0 and lse = -inf. A NaN
/// lse_i makes out and lse NaN (as the kernels' merges: a NaN is never dropped, even beside -inf parts). lse
/// may be null. For [rows, heads] tensors call it once per (row, head).
///
///   double o[2][4] = {...}, l[2] = {...}, merged[4], merged_lse;
///   llmk::reference::merge_states(2, 4, &o[0][0], l, merged, &merged_lse);
inline void merge_states(int parts, int dim, const double* o_parts, const double* lse_parts, double* out,
                         double* lse) {
  const double neg_inf = -std::numeric_limits<double>::infinity();
  double m = neg_inf;
  for (int i = 0; i < parts; ++i) {
    if (std::isnan(lse_parts[i])) {  // std::fmax would drop it
      for (int d = 0; d < dim; ++d) out[d] = std::numeric_limits<double>::quiet_NaN();
      if (lse) *lse = std::numeric_limits<double>::quiet_NaN();
      return;
    }
    m = std::fmax(m, lse_parts[i]);
  }
  for (int d = 0; d < dim; ++d) out[d] = 0.0;
  if (m == neg_inf) {  // no part saw a key
    if (lse) *lse = neg_inf;
    return;
  }
  // Weights relative to the largest LSE (the largest is exactly 1): no overflow, and -inf parts get exp(-inf)
  // = 0 without ever computing inf - inf.
  double sum = 0.0;
  for (int i = 0; i < parts; ++i) sum += std::exp(lse_parts[i] - m);
  for (int i = 0; i < parts; ++i) {
    if (lse_parts[i] == neg_inf) continue;
    const double w = std::exp(lse_parts[i] - m) / sum;
    for (int d = 0; d < dim; ++d) out[d] += w * o_parts[static_cast<std::int64_t>(i) * dim + d];
  }
  if (lse) *lse = m + std::log(sum);
}

}  // namespace llmk::reference
