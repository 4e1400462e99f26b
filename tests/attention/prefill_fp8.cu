// Tests of llmk::attention::prefill_fp8 / prefill_paged_fp8 (the Hopper kernel over e4m3 Q, K, V) against the
// fp64 reference of the dequantized inputs, in the simulator (which reports sm_90) and on an sm_90 GPU.
//
// The tolerance follows from the one rounding fp16 attention does not have: P rounded to e4m3 (relative
// error <= 2^-4 above 2^-6, absolute <= 2^-10 below, with p scaled into (0, 256]). Per element:
//   |out - ref| <= (2^-4 + kv_len * 2^-18) * max |v| + 2^-8 * |ref| + 1e-4       (a bound, never reached)
// and, since the roundings of many keys cancel, over the whole output:
//   rms(out - ref) <= 0.04 * rms(ref)            (measured: 0.0257, the same on an H100 and in the simulator;
//                                                 a zero, shuffled or mis-scaled output is at 1 or more; one
//                                                 V row lost moves a row by ~1 / sqrt(kv_len): 0.065 at 240
//                                                 keys, which the bound of 0.08 until 2026-11-29 let pass)
// LSEs (computed from the unrounded p) within 1e-3.
// Those bounds compare with exact attention. Each element is also checked against what the kernel computes,
// llmk::reference::attention_fp8_p_rounded (P rounded to e4m3 per key tile, from the running max): within
// that reference's slack (a p at an e4m3 rounding boundary may round either way), the P V sum's rounding and
// half an ulp of T. In the simulator that is about an ulp of T per element (LSEs within lse_tolerance): one
// V row lost, a key tile misplaced or a rescale skipped is far outside it. On a GPU the fp8 tensor cores
// sum with fewer bits than fp32, allowed for as in the fp8 GEMM tests (kFp8GpuRel).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "attention/attention_check.hpp"
#include "llmk/attention/prefill_fp8.cuh"
#include "llmk/core/memory.cuh"
#include "support/test_env.hpp"

namespace {

using f16 = llmk::half;
using bf16 = llmk::bfloat16;
using e4m3 = llmk::float8_e4m3;
namespace attn = llmk::attention;
namespace kv = llmk::kvcache;

struct Case {
  std::vector<int> q_lens, kv_lens;  // per sequence (varlen offsets when there are several)
  int heads = 2, kv_heads = 2, dim = 64;
  bool causal = false;
  int window_left = -1;
  float softcap = 0.0f;
  bool per_head = false;  // descales per KV head (else per tensor)
};

// Host inputs: codes and descales, and the problem they describe.
struct Inputs {
  llmk::reference::AttentionProblem p;
  std::vector<e4m3> q, k, v;
  std::vector<float> qs, ks, vs;
  std::vector<int> cu_q, cu_k;
};

Inputs make_inputs(const Case& c, std::mt19937& rng) {
  Inputs in;
  in.p.q_lens = c.q_lens;
  in.p.kv_lens = c.kv_lens;
  in.p.num_heads = c.heads;
  in.p.num_kv_heads = c.kv_heads;
  in.p.head_dim = c.dim;
  in.p.options.softmax_scale = attn::default_scale(c.dim);
  in.p.options.causal = c.causal;
  in.p.options.window_left = c.window_left;
  in.p.options.softcap = c.softcap;
  in.q = llmk::test::random_tensor<e4m3>(in.p.q_elements(), 4.0f, rng);
  in.k = llmk::test::random_tensor<e4m3>(in.p.kv_elements(), 4.0f, rng);
  in.v = llmk::test::random_tensor<e4m3>(in.p.kv_elements(), 4.0f, rng);
  std::uniform_real_distribution<float> scale(0.2f, 0.6f);
  const int n = c.per_head ? c.kv_heads : 1;
  for (auto* s : {&in.qs, &in.ks, &in.vs})
    for (int i = 0; i < n; ++i) s->push_back(scale(rng));
  in.cu_q.assign(1, 0);
  in.cu_k.assign(1, 0);
  for (std::size_t b = 0; b < c.q_lens.size(); ++b) {
    in.cu_q.push_back(in.cu_q.back() + c.q_lens[b]);
    in.cu_k.push_back(in.cu_k.back() + c.kv_lens[b]);
  }
  return in;
}

// The device copies of the inputs and the arguments over them (varlen offsets always).
struct Device {
  llmk::DeviceBuffer<e4m3> q, k, v;
  llmk::DeviceBuffer<float> qs, ks, vs, lse;
  llmk::DeviceBuffer<int> cu_q, cu_k;
  explicit Device(const Inputs& in)
      : q(in.q),
        k(in.k),
        v(in.v),
        qs(in.qs),
        ks(in.ks),
        vs(in.vs),
        lse(static_cast<std::size_t>(in.p.total_q() * in.p.num_heads)),
        cu_q(in.cu_q),
        cu_k(in.cu_k) {}
};

template <class T>
attn::PrefillFp8Args<T> args_of(const Inputs& in, Device& d, T* o, bool per_head) {
  const auto& p = in.p;
  attn::PrefillFp8Args<T> a;
  a.q = d.q.data();
  a.k = d.k.data();
  a.v = d.v.data();
  a.o = o;
  a.q_stride_token = a.o_stride_token = static_cast<std::int64_t>(p.num_heads) * p.head_dim;
  a.k_stride_token = a.v_stride_token = static_cast<std::int64_t>(p.num_kv_heads) * p.head_dim;
  a.q_stride_head = a.k_stride_head = a.v_stride_head = a.o_stride_head = p.head_dim;
  a.lse = d.lse.data();
  a.descale = {d.qs.data(), d.ks.data(), d.vs.data(),
               per_head ? attn::Fp8Descale::kPerKvHead : attn::Fp8Descale::kPerTensor};
  a.cu_seqlens_q = d.cu_q.data();
  a.cu_seqlens_k = d.cu_k.data();
  a.cu_seqlens_q_host = in.cu_q.data();
  a.cu_seqlens_k_host = in.cu_k.data();
  a.batch = p.batch();
  a.num_heads = p.num_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.head_dim = p.head_dim;
  a.options = p.options;
  return a;
}

// Worst relative rms error seen, reported by the last test (docs/attention.md quotes it), and the largest
// share of the per-element bound used.
double g_worst_rms = 0.0, g_worst_max = 0.0, g_worst_share = 0.0;

// fp8 products summed by a GPU's tensor cores: fewer significand bits than fp32 (the fp8 GEMM tests measured
// up to 2^-13.6 of the magnitudes summed on an H100 and allow 2^-11: tests/gemm/quant_gemm_fixtures.hpp). The
// simulator sums in fp32.
#if defined(LLMK_SIM)
constexpr double kFp8GpuRel = 0.0;
#else
constexpr double kFp8GpuRel = 0x1p-11;
#endif

// The key tile (Bc) of the default configuration, which prefill_fp8 / prefill_paged_fp8 dispatch to.
int default_bc(int dim) {
  switch (dim) {
    case 64:
      return attn::DefaultSm90Fp8PrefillConfig<64>::kBc;
    case 96:
      return attn::DefaultSm90Fp8PrefillConfig<96>::kBc;
    case 128:
      return attn::DefaultSm90Fp8PrefillConfig<128>::kBc;
    case 256:
      return attn::DefaultSm90Fp8PrefillConfig<256>::kBc;
    default:
      FAIL("no default fp8 configuration for head dim " << dim);
      return 0;
  }
}

// Every element against the P-rounding reference (see the file comment); returns the elements outside.
template <class T>
int check_p_rounded(const Inputs& in, const std::vector<T>& got, bool per_head, int bc) {
  const auto& p = in.p;
  const std::size_t n = static_cast<std::size_t>(p.q_elements());
  std::vector<double> want(n), slack(n), magnitude(n);
  llmk::reference::Fp8PRoundingModel model;
  model.key_tile = bc;
  model.score_rel = kFp8GpuRel;
  llmk::reference::attention_fp8_p_rounded(p, in.q.data(), in.k.data(), in.v.data(), in.qs.data(),
                                           in.ks.data(), in.vs.data(), per_head, model, want.data(),
                                           slack.data(), magnitude.data());
  const int max_kv = *std::max_element(p.kv_lens.begin(), p.kv_lens.end());
  // The P V sum (and L's): fp32 over at most max_kv terms in the simulator.
  const double acc_rel = kFp8GpuRel > 0.0 ? kFp8GpuRel : max_kv * 0x1p-24;
  constexpr int kHalfUlpShift = std::is_same_v<T, f16> ? 11 : 8;  // half an ulp of T, relative
  int bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i].to_float()), w = want[i];
    const double tol = slack[i] + acc_rel * magnitude[i] + 0x1p-20 * std::fabs(w) +
                       std::ldexp(std::max(std::fabs(w), std::fabs(g)), -kHalfUlpShift) + 1e-7;
    const double e = std::fabs(g - w);
    if (!(e <= tol) && bad++ < 3)
      MESSAGE("element " << i << ": got " << g << ", the P-rounding reference " << w << " (bound " << tol
                         << ", of which rounding slack " << slack[i] << ")");
    if (std::isfinite(e)) g_worst_share = std::max(g_worst_share, e / tol);
  }
  return bad;
}

template <class T>
void check_fp8(const Inputs& in, const std::vector<T>& got, const std::vector<float>& lse, bool per_head,
               int bc) {
  CHECK(check_p_rounded(in, got, per_head, bc) == 0);
  const auto& p = in.p;
  std::vector<double> ref(static_cast<std::size_t>(p.q_elements())),
      ref_lse(static_cast<std::size_t>(p.total_q() * p.num_heads));
  llmk::reference::attention_fp8_fp64(p, in.q.data(), in.k.data(), in.v.data(), in.qs.data(), in.ks.data(),
                                      in.vs.data(), per_head, ref.data(), ref_lse.data());
  double vmax = 0.0;
  for (std::size_t i = 0; i < in.v.size(); ++i)
    vmax = std::max(vmax,
                    std::fabs(in.v[i].to_float() *
                              static_cast<double>(in.vs[per_head ? (i / p.head_dim) % p.num_kv_heads : 0])));
  const int max_kv = *std::max_element(p.kv_lens.begin(), p.kv_lens.end());
  const double slack = (1.0 / 16 + max_kv / 262144.0) * vmax;
  double err2 = 0.0, ref2 = 0.0, worst = 0.0;
  int bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(static_cast<double>(got[i].to_float()) - ref[i]);
    if (!(e <= slack + std::fabs(ref[i]) / 256 + 1e-4) && bad++ < 3)
      MESSAGE("element " << i << ": got " << got[i].to_float() << ", want " << ref[i]);
    if (std::isfinite(e)) worst = std::max(worst, e);
    err2 += e * e;
    ref2 += ref[i] * ref[i];
  }
  const double rms = std::sqrt(err2 / std::max(ref2, 1e-30));
  INFO("rms error / rms ref = " << rms << ", max error " << worst << " (bound " << slack << " + |ref|/256)");
  CHECK(bad == 0);
  CHECK(rms <= 0.04);
  g_worst_rms = std::max(g_worst_rms, rms);
  g_worst_max = std::max(g_worst_max, worst / std::max(vmax, 1e-30));
  int bad_lse = 0;
  for (std::size_t i = 0; i < ref_lse.size(); ++i) {
    const double g = lse[i], r = ref_lse[i];
    // LSEs from the unrounded p: lse_tolerance in the simulator; 1e-3 on a GPU (its scores' fp8 sums).
    const double tol = kFp8GpuRel > 0.0 ? 1e-3 : llmk::test::lse_tolerance(r);
    const bool ok = std::isinf(r) ? g == r : std::fabs(g - r) <= tol;
    if (!ok && bad_lse++ < 3) MESSAGE("lse[" << i << "] = " << g << ", want " << r);
  }
  CHECK(bad_lse == 0);
}

// Runs `launch` on fresh inputs for case c and checks the result; returns the output. bc: the key tile of
// the configuration `launch` runs (0: the default configuration's).
template <class T, class Launch>
std::vector<T> run_case(const Case& c, std::mt19937& rng, Launch&& launch, int bc = 0) {
  CAPTURE(c.dim);
  CAPTURE(c.heads);
  CAPTURE(c.kv_heads);
  CAPTURE(c.causal);
  CAPTURE(c.window_left);
  CAPTURE(c.softcap);
  CAPTURE(c.per_head);
  INFO("q_lens[0] = " << c.q_lens[0] << ", kv_lens[0] = " << c.kv_lens[0] << ", batch " << c.q_lens.size());
  const Inputs in = make_inputs(c, rng);
  Device d(in);
  llmk::DeviceBuffer<T> o(static_cast<std::size_t>(in.p.q_elements()));  // poisoned
  const llmk::Status s = launch(args_of<T>(in, d, o.data(), c.per_head));
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(llmk::device_synchronize().ok());
  const std::vector<T> got = o.to_host();
  check_fp8(in, got, d.lse.to_host(), c.per_head, bc > 0 ? bc : default_bc(c.dim));
  return got;
}

template <class T>
llmk::Status dispatch(const attn::PrefillFp8Args<T>& a) {
  return attn::prefill_fp8(a, nullptr);
}

bool hopper() {
  return llmk::device_arch() == 900;
}

}  // namespace

TEST_CASE("prefill_fp8: head dims 64, 96, 128, 256; lengths 1..200; causal and not") {
  if (!hopper()) return;  // refusal: tested below
  std::mt19937 rng(301);
  const std::vector<int> lens = llmk::test::fast() ? std::vector<int>{70} : std::vector<int>{1, 70, 200};
  for (int dim : {64, 96, 128, 256})
    for (int len : lens)
      for (bool causal : {false, true}) {
        // Sanitizer builds: each head dim once, causal and not alternating.
        if (llmk::test::fast() && causal != (dim == 64 || dim == 128)) continue;
        Case c;
        c.q_lens = {len};
        c.kv_lens = {len};
        c.dim = dim;
        c.causal = causal;
        run_case<f16>(c, rng, dispatch<f16>);
      }
}

TEST_CASE(
    "prefill_fp8: GQA (4 and 192) and MQA, varlen, windows, soft-cap, per-KV-head descales, bf16 output") {
  if (!hopper()) return;
  std::mt19937 rng(302);
  {
    Case c;  // GQA 4, varlen with a decode-like sequence, bottom-right causal, per-head descales, bf16
    c.q_lens = {37, llmk::test::pick(129, 40), 1};
    c.kv_lens = {37, llmk::test::pick(300, 140), 5};
    c.heads = 8;
    c.kv_heads = 2;
    c.dim = 128;
    c.causal = true;
    c.per_head = true;
    run_case<bf16>(c, rng, [](const attn::PrefillFp8Args<bf16>& a) {
      return attn::prefill_fp8_with_config<bf16, attn::DefaultSm90Fp8PrefillConfig<128>>(a, nullptr);
    });
  }
  {
    Case c;  // MQA, sliding window and soft-cap
    c.q_lens = {90};
    c.kv_lens = {150};
    c.heads = 4;
    c.kv_heads = 1;
    c.dim = 64;
    c.causal = true;
    c.window_left = 31;
    c.softcap = 30.0f;
    c.per_head = true;
    run_case<f16>(c, rng, dispatch<f16>);
  }
  {
    Case c;  // a GQA group above 128 (192: blocks of 96 heads of one token), d128 (ping-pong)
    c.q_lens = {3};
    c.kv_lens = {41};
    c.heads = 192;
    c.kv_heads = 1;
    c.dim = 128;
    c.causal = true;
    run_case<f16>(c, rng, dispatch<f16>);
  }
}

TEST_CASE("prefill_fp8: custom configurations (d192 with 3 slots and GQA 6; d64 with one 32-key slot)") {
  if (!hopper()) return;
  std::mt19937 rng(303);
  {
    Case c;  // 126 rows per block (whole groups of 6), a ring that wraps
    c.q_lens = {llmk::test::pick(60, 30)};
    c.kv_lens = {llmk::test::pick(230, 140)};
    c.heads = 12;
    c.kv_heads = 2;
    c.dim = 192;
    c.causal = true;
    c.window_left = 100;
    run_case<f16>(
        c, rng,
        [](const attn::PrefillFp8Args<f16>& a) {
          return attn::prefill_fp8_with_config<f16, attn::Sm90Fp8PrefillConfig<192, 64, 3>>(a, nullptr);
        },
        64);
  }
  {
    Case c;  // one slot: K_j is published before V_j's slot is awaited
    c.q_lens = {40};
    c.kv_lens = {150};
    c.dim = 64;
    run_case<f16>(
        c, rng,
        [](const attn::PrefillFp8Args<f16>& a) {
          return attn::prefill_fp8_with_config<f16, attn::Sm90Fp8PrefillConfig<64, 32, 1>>(a, nullptr);
        },
        32);
  }
}

TEST_CASE("prefill_fp8: a NaN in the next sequence's keys and values stays out of this one") {
  // Sequence 0 (37 keys) ends inside a key tile whose other rows are sequence 1's: the transposition zeroes
  // V there, the mask hides K.
  if (!hopper()) return;
  std::mt19937 rng(304);
  Case c;
  c.q_lens = {37, 50};
  c.kv_lens = {37, 50};
  c.dim = 128;
  const Inputs in = make_inputs(c, rng);
  Inputs poisoned = in;
  const e4m3 nan = e4m3::from_bits(0x7F);
  poisoned.k[(37 + 2) * 2 * 128 + 3] = nan;
  poisoned.v[(37 + 1) * 2 * 128 + 9] = nan;
  poisoned.v[(37 + 4) * 2 * 128 + 128 + 100] = nan;
  Device d(poisoned);
  llmk::DeviceBuffer<f16> o(static_cast<std::size_t>(in.p.q_elements()));
  REQUIRE(attn::prefill_fp8(args_of<f16>(poisoned, d, o.data(), false), nullptr).ok());
  const std::vector<f16> got = o.to_host();
  int bad = 0;
  for (int i = 0; i < 37 * 2 * 128; ++i) bad += !std::isfinite(got[static_cast<std::size_t>(i)].to_float());
  CHECK(bad == 0);
}

TEST_CASE("prefill_fp8: a NaN code inside the sequence reaches the rows of fp16's rules, no other row") {
  // docs/attention.md, "Special values", for e4m3 K/V (0x7F is NaN). Sequence 0 (60 tokens, causal, group 2):
  // NaN K at key 25 (KV head 1, column 3): exactly the rows that see key 25 (tokens 25..59 of heads 2, 3)
  // become NaN, with their LSE; tokens 0..24 compute the score in the same tile and mask it. NaN V at key 40
  // (KV head 0, column 9): every row of a block that loads it gets NaN in column 9 (tokens 0..39 of heads 0,
  // 1 too: one block of 60 tokens, whole 128-key tiles up to the sequence's end), the LSE unchanged. Every
  // other element within the fp8 bound of the file comment; sequence 1 and the other columns untouched.
  if (!hopper()) return;
  std::mt19937 rng(307);
  Case c;
  c.q_lens = {60, 20};
  c.kv_lens = {60, 20};
  c.heads = 4;
  c.kv_heads = 2;
  c.dim = 64;
  c.causal = true;
  const int group = 2;
  Inputs in = make_inputs(c, rng);
  const e4m3 nan = e4m3::from_bits(0x7F);
  in.k[(25 * 2 + 1) * 64 + 3] = nan;
  in.v[(40 * 2 + 0) * 64 + 9] = nan;
  using Cfg = attn::DefaultSm90Fp8PrefillConfig<64>;
  const llmk::test::PrefillLoads loads{attn::detail::sm90_prefill_rows_per_block<Cfg>(group), Cfg::kBc, true};
  for (int token : {0, 39, 59}) CHECK(loads.keys(60, 60, in.p.options, group, token, 0) == std::pair{0, 60});
  Device d(in);
  llmk::DeviceBuffer<f16> o(static_cast<std::size_t>(in.p.q_elements()));  // poisoned
  const llmk::Status s = attn::prefill_fp8(args_of<f16>(in, d, o.data(), false), nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  const std::vector<f16> got = o.to_host();
  const std::vector<float> lse = d.lse.to_host();

  const auto& p = in.p;
  std::vector<double> ref(static_cast<std::size_t>(p.q_elements())),
      ref_lse(static_cast<std::size_t>(p.total_q() * p.num_heads));
  llmk::reference::attention_fp8_fp64(p, in.q.data(), in.k.data(), in.v.data(), in.qs.data(), in.ks.data(),
                                      in.vs.data(), false, ref.data(), ref_lse.data());
  double vmax = 0.0;
  for (const e4m3 x : in.v)
    if (std::isfinite(x.to_float()))
      vmax = std::max(vmax, std::fabs(x.to_float() * static_cast<double>(in.vs[0])));
  const double slack = (1.0 / 16 + 60 / 262144.0) * vmax;
  auto k_nan = [&](std::int64_t row) {  // sequence 0, heads 2 and 3, tokens 25..59
    return row < 60 * c.heads && row % c.heads / group == 1 && row / c.heads >= 25;
  };
  const std::int64_t nan_rows = llmk::test::check_nan_pattern(
      p.total_q() * p.num_heads, c.dim, ref, ref_lse, got, &lse,
      [&](std::int64_t row, int col) {
        const int token = static_cast<int>(row / c.heads), head = static_cast<int>(row % c.heads);
        if (k_nan(row)) return true;
        if (row >= 60 * c.heads || head / group != 0 || col != 9) return false;
        const auto [first, end] = loads.keys(60, 60, p.options, group, token, head % group);
        return 40 >= first && 40 < end;
      },
      k_nan,
      [&](std::int64_t, std::int64_t i) {
        return slack + std::fabs(ref[static_cast<std::size_t>(i)]) / 256 + 1e-4;
      });
  CHECK(nan_rows == 35 * group + 60 * group);
}

namespace {

// The descale kinds of descale_special_case, one per KV head (descales per KV head).
enum class DescaleKind { kControl, kQNan, kK0, kQInf, kVNan, kVInf, kV0, kCount };

// One launch of descale_special_case's inputs: every element and LSE of every row classified by the rules
// of docs/attention.md (the fp8 descales row). One block per (sequence, KV head): it computes the tiles
// [0, ceil(kv_len / Bc)) when the sequence has keys, and a row "has a masked key" there unless it sees every
// key of those tiles (the keys past kv_len of a partial tile are masked too). Returns the number of rows
// holding a NaN, all zero and holding an infinity.
struct DescaleRows {
  int nan = 0, zero = 0, inf = 0;
};
DescaleRows descale_special_case(const Case& c, std::mt19937& rng) {
  CAPTURE(c.causal);
  CAPTURE(c.softcap);
  INFO("q_lens[0] = " << c.q_lens[0] << ", kv_lens[0] = " << c.kv_lens[0] << ", batch " << c.q_lens.size());
  using Cfg = attn::DefaultSm90Fp8PrefillConfig<64>;
  const int group = c.heads / c.kv_heads, d = c.dim, bc = Cfg::kBc;
  REQUIRE(c.kv_heads == static_cast<int>(DescaleKind::kCount));
  REQUIRE(d == 64);
  for (int q_len : c.q_lens) REQUIRE(q_len * group <= attn::detail::sm90_prefill_rows_per_block<Cfg>(group));
  Inputs in = make_inputs(c, rng);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const auto kv_of = [](DescaleKind k) { return static_cast<int>(k); };
  in.qs[kv_of(DescaleKind::kQNan)] = nan;
  in.ks[kv_of(DescaleKind::kK0)] = 0.0f;
  in.qs[kv_of(DescaleKind::kQInf)] = inf;
  in.vs[kv_of(DescaleKind::kVNan)] = nan;
  in.vs[kv_of(DescaleKind::kVInf)] = inf;
  in.vs[kv_of(DescaleKind::kV0)] = 0.0f;
  // kQInf: K all negative; query head 0 of the group all positive (every score negative), head 1 all
  // negative (every score positive). kVInf: V positive but column 9, negative (+inf / -inf outputs).
  const auto with_sign = [](e4m3 x, bool negative) {
    return e4m3::from_bits(static_cast<std::uint8_t>(negative ? (x.bits | 0x80) : (x.bits & 0x7F)));
  };
  for (std::int64_t t = 0; t < in.p.total_kv(); ++t)
    for (int e = 0; e < d; ++e) {
      e4m3& k = in.k[static_cast<std::size_t>((t * c.kv_heads + kv_of(DescaleKind::kQInf)) * d + e)];
      k = with_sign(k, true);
      e4m3& v = in.v[static_cast<std::size_t>((t * c.kv_heads + kv_of(DescaleKind::kVInf)) * d + e)];
      v = with_sign(v, e == 9);
    }
  for (std::int64_t t = 0; t < in.p.total_q(); ++t)
    for (int hg = 0; hg < group; ++hg)
      for (int e = 0; e < d; ++e) {
        e4m3& q =
            in.q[static_cast<std::size_t>((t * c.heads + kv_of(DescaleKind::kQInf) * group + hg) * d + e)];
        q = with_sign(q, hg == 1);
      }
  Device dev(in);
  llmk::DeviceBuffer<f16> o(static_cast<std::size_t>(in.p.q_elements()));  // poisoned, and the LSE
  const llmk::Status s = attn::prefill_fp8(args_of<f16>(in, dev, o.data(), true), nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  const std::vector<f16> got = o.to_host();
  const std::vector<float> lse = dev.lse.to_host();

  // The reference over finite stand-ins: NaN -> 1 (those rows are NaN), Q's +inf -> 1e15 (with a soft-cap
  // tanh(+-huge) = +-1 is exactly what +inf gives; without one those rows are NaN or 0), V's +inf -> 1.
  std::vector<float> qs = in.qs, ks = in.ks, vs = in.vs;
  qs[kv_of(DescaleKind::kQNan)] = 1.0f;
  qs[kv_of(DescaleKind::kQInf)] = 1e15f;
  vs[kv_of(DescaleKind::kVNan)] = vs[kv_of(DescaleKind::kVInf)] = 1.0f;
  const auto& p = in.p;
  std::vector<double> ref(static_cast<std::size_t>(p.q_elements())),
      ref_lse(static_cast<std::size_t>(p.total_q() * p.num_heads));
  llmk::reference::attention_fp8_fp64(p, in.q.data(), in.k.data(), in.v.data(), qs.data(), ks.data(),
                                      vs.data(), true, ref.data(), ref_lse.data());
  double vmax = 0.0;
  for (std::size_t i = 0; i < in.v.size(); ++i)
    vmax = std::max(vmax, std::fabs(in.v[i].to_float() * static_cast<double>(vs[(i / d) % c.kv_heads])));
  const int max_kv = *std::max_element(c.kv_lens.begin(), c.kv_lens.end());
  const double slack = (1.0 / 16 + max_kv / 262144.0) * vmax;

  enum class Want { kRef, kZero, kNaN, kPosInf, kNegInf };
  const bool capped = c.softcap > 0.0f;
  int bad = 0, bad_lse = 0;
  DescaleRows rows;
  std::int64_t row = 0;
  for (int b = 0; b < p.batch(); ++b) {
    const int q_len = c.q_lens[static_cast<std::size_t>(b)], kv_len = c.kv_lens[static_cast<std::size_t>(b)];
    const bool computes = kv_len > 0;                   // the block computes tile 0 on
    const int tiles_end = (kv_len + bc - 1) / bc * bc;  // the keys of its tiles
    for (int i = 0; i < q_len; ++i) {
      const int pos = i + kv_len - q_len;
      const int end = c.causal ? std::clamp(pos + 1, 0, kv_len) : kv_len;  // visible keys [0, end)
      const bool sees = end > 0, masked = end != tiles_end;
      for (int h = 0; h < c.heads; ++h, ++row) {
        const auto kind = static_cast<DescaleKind>(h / group);
        Want out = Want::kRef, l = Want::kRef;  // l: kRef or kNaN (kZero: -inf)
        switch (kind) {
          case DescaleKind::kQNan:  // c = NaN: -inf * NaN = NaN too; with a cap tanh(NaN), then the mask
            if (capped ? sees : computes) out = l = Want::kNaN;
            break;
          case DescaleKind::kK0:  // c = 0: -inf * 0 = NaN where a tile holds a masked key; capped: tanh(0)
            if (!capped && computes && masked) out = l = Want::kNaN;
            break;
          case DescaleKind::kQInf:  // scores +-inf: 2^(inf - inf) with a positive one, else all p = 0
            if (!capped) {
              out = l = sees && h % group == 1 ? Want::kNaN : Want::kZero;
            }
            break;
          case DescaleKind::kVNan:
            out = Want::kNaN;
            break;
          case DescaleKind::kVInf:  // o * inf, o = 0 where nothing is seen
            out = sees ? Want::kPosInf : Want::kNaN;
            break;
          case DescaleKind::kV0:
            out = Want::kZero;
            break;
          default:
            break;
        }
        bool row_nan = false, row_zero = true, row_inf = false;
        for (int e = 0; e < d; ++e) {
          const std::size_t idx = static_cast<std::size_t>(row * d + e);
          const f16 gv = got[idx];
          const float g = gv.to_float();
          const double r = ref[idx];
          Want w = out;
          if (w == Want::kPosInf && e == 9) w = Want::kNegInf;
          bool ok = gv.bits != 0xFFFF;  // the poison: never written
          switch (w) {
            case Want::kRef:
              ok = ok && std::isfinite(g) && std::isfinite(r) &&
                   std::fabs(g - r) <= slack + std::fabs(r) / 256 + 1e-4;
              break;
            case Want::kZero:
              ok = ok && g == 0.0f;
              break;
            case Want::kNaN:
              ok = ok && std::isnan(g);
              break;
            case Want::kPosInf:
              ok = ok && g == inf;
              break;
            case Want::kNegInf:
              ok = ok && g == -inf;
              break;
          }
          row_nan = row_nan || std::isnan(g);
          row_zero = row_zero && g == 0.0f;
          row_inf = row_inf || std::isinf(g);
          if (!ok && bad++ < 8)
            MESSAGE("row " << row << " (token " << i << " of sequence " << b << ", head " << h << ") col "
                           << e << ": got " << g << " (bits " << gv.bits << "), want class "
                           << static_cast<int>(w) << ", ref " << r);
        }
        rows.nan += row_nan;
        rows.zero += row_zero;
        rows.inf += row_inf;
        const float g_lse = lse[static_cast<std::size_t>(row)];
        std::uint32_t lse_bits;
        std::memcpy(&lse_bits, &g_lse, sizeof lse_bits);
        const double r_lse = ref_lse[static_cast<std::size_t>(row)];
        bool lse_ok = lse_bits != 0xFFFFFFFFu;
        if (l == Want::kNaN)
          lse_ok = lse_ok && std::isnan(g_lse);
        else if (l == Want::kZero || r_lse == -inf)
          lse_ok = lse_ok && g_lse == -inf;
        else
          lse_ok = lse_ok && std::isfinite(r_lse) && std::fabs(g_lse - r_lse) <= 1e-3;
        if (!lse_ok && bad_lse++ < 8)
          MESSAGE("lse[" << row << "] (head " << h << ") = " << g_lse << ", want "
                         << (l == Want::kNaN    ? "NaN"
                             : l == Want::kZero ? "-inf"
                                                : "the reference ")
                         << r_lse);
      }
    }
  }
  CHECK(bad == 0);
  CHECK(bad_lse == 0);
  return rows;
}

}  // namespace

// docs/attention.md, "Special values", fp8 descales: Q's and K's descales multiply the exponent's scale (with
// a soft-cap, the tanh's argument), V's the normalized output. Seven KV heads (group 2, d64, per-KV-head
// descales), one kind each: a control; Q descale NaN; K descale 0; Q descale +inf (K all negative, query head
// 0 of the group positive: only negative scores, head 1 negative: only positive ones); V descale NaN, +inf (V
// positive but column 9) and 0. Causal, 40 queries over 30 keys (tokens 0..9 see no key, in the block that
// computes tile 0 for the others; every row's tile holds masked keys, the partial tile's past 30), without
// and with soft-cap 30; then not causal, 8 queries over 128 keys (one whole tile, unmasked: a 0 descale gives
// the plain average of V) and 8 over 30.
TEST_CASE("prefill_fp8: NaN, 0 and +inf descales of Q, K and V, with and without soft-cap") {
  if (!hopper()) return;
  std::mt19937 rng(308);
  Case c;
  c.heads = 14;
  c.kv_heads = 7;
  c.dim = 64;
  c.per_head = true;
  c.causal = true;
  c.q_lens = {40};
  c.kv_lens = {30};
  // 80 rows a KV head. NaN: Q NaN 80, K 0 80, Q +inf the 30 of head 1 that see keys, V NaN 80, V +inf the 20
  // that see none; all zero: Q +inf 50, V 0 80, the control's 20 that see none; +-inf: V +inf 60.
  DescaleRows rows = descale_special_case(c, rng);
  CHECK(rows.nan == 290);
  CHECK(rows.zero == 150);
  CHECK(rows.inf == 60);
  // Soft-capped. NaN: Q NaN the 60 that see keys, V NaN 80, V +inf 20; all zero: the 20 that see no key of
  // Q NaN, K 0, Q +inf and the control, V 0 80.
  c.softcap = 30.0f;
  rows = descale_special_case(c, rng);
  CHECK(rows.nan == 160);
  CHECK(rows.zero == 160);
  CHECK(rows.inf == 60);
  // 32 rows a KV head, each sees keys. NaN: Q NaN 32, K 0 the 16 over 30 keys (the 16 over 128 average V), Q
  // +inf 16, V NaN 32; all zero: Q +inf 16, V 0 32; +-inf: V +inf 32.
  c.causal = false;
  c.softcap = 0.0f;
  c.q_lens = {8, 8};
  c.kv_lens = {128, 30};
  rows = descale_special_case(c, rng);
  CHECK(rows.nan == 96);
  CHECK(rows.zero == 48);
  CHECK(rows.inf == 32);
}

namespace {

// The inputs' K and V as an e4m3 paged cache (NHD, block table, pages in shuffled order) with the inputs'
// descales as its scales.
struct Pages {
  llmk::DeviceBuffer<e4m3> k, v;
  llmk::DeviceBuffer<int> table, lens;
  llmk::DeviceBuffer<float> ks, vs;
  std::vector<int> table_host, lens_host;
  kv::PagedKv<f16, e4m3> view;

  Pages(const Inputs& in, int page_size, bool per_head, std::mt19937& rng) {
    const auto& p = in.p;
    const int batch = p.batch(), d = p.head_dim, h = p.num_kv_heads;
    int max_blocks = 0, pages = 0;
    for (int len : p.kv_lens) {
      max_blocks = std::max(max_blocks, (len + page_size - 1) / page_size);
      pages += (len + page_size - 1) / page_size;
    }
    std::vector<int> order(static_cast<std::size_t>(pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    table_host.assign(static_cast<std::size_t>(batch * std::max(max_blocks, 1)), 0);
    const kv::PageStrides st = kv::make_nhd_strides(page_size, h, d);
    std::vector<e4m3> kp(static_cast<std::size_t>(pages * st.page), e4m3(1.0f)),
        vp(static_cast<std::size_t>(pages * st.page), e4m3(1.0f));
    int next = 0;
    for (int b = 0; b < batch; ++b) {
      const int len = p.kv_lens[static_cast<std::size_t>(b)];
      for (int blk = 0; blk * page_size < len; ++blk) table_host[b * max_blocks + blk] = order[next++];
      for (int t = 0; t < len; ++t)
        for (int hh = 0; hh < h; ++hh)
          for (int e = 0; e < d; ++e) {
            const std::int64_t src = ((in.cu_k[b] + t) * h + hh) * d + e;
            const std::int64_t dst = table_host[b * max_blocks + t / page_size] * st.page +
                                     (t % page_size) * st.slot + hh * st.head + e;
            kp[static_cast<std::size_t>(dst)] = in.k[static_cast<std::size_t>(src)];
            vp[static_cast<std::size_t>(dst)] = in.v[static_cast<std::size_t>(src)];
          }
    }
    lens_host = p.kv_lens;
    k = llmk::DeviceBuffer<e4m3>(kp);
    v = llmk::DeviceBuffer<e4m3>(vp);
    table = llmk::DeviceBuffer<int>(table_host);
    lens = llmk::DeviceBuffer<int>(lens_host);
    ks = llmk::DeviceBuffer<float>(in.ks);
    vs = llmk::DeviceBuffer<float>(in.vs);
    view.k_pages = k.data();
    view.v_pages = v.data();
    view.scale_mode = per_head ? kv::KvScale::kPerHead : kv::KvScale::kPerTensor;
    view.k_scales = ks.data();
    view.v_scales = vs.data();
    view.strides = st;
    view.page_size = page_size;
    view.num_pages = pages;
    view.block_table = table.data();
    view.max_blocks_per_seq = std::max(max_blocks, 1);
    view.seq_lens = lens.data();
    view.seq_lens_host = lens_host.data();
  }
};

}  // namespace

TEST_CASE("prefill_paged_fp8: e4m3 pages read directly == dense fp8 bit for bit (page sizes 16 and 5)") {
  if (!hopper()) return;
  std::mt19937 rng(305);
  for (int page_size : {16, 5})
    for (bool per_head : {false, true}) {
      if (llmk::test::fast() && page_size == 16) continue;
      CAPTURE(page_size);
      CAPTURE(per_head);
      Case c;
      c.q_lens = {45, 20};
      c.kv_lens = {45, llmk::test::pick(170, 90)};
      c.heads = 4;
      c.kv_heads = 2;
      c.dim = 128;
      c.causal = true;
      c.per_head = per_head;
      const Inputs in = make_inputs(c, rng);
      Device d(in);
      llmk::DeviceBuffer<f16> dense(static_cast<std::size_t>(in.p.q_elements())),
          paged(static_cast<std::size_t>(in.p.q_elements()));
      attn::PrefillFp8Args<f16> a = args_of<f16>(in, d, dense.data(), per_head);
      REQUIRE(attn::prefill_fp8(a, nullptr).ok());
      const std::vector<f16> want = dense.to_host();
      const std::vector<float> want_lse = d.lse.to_host();
      check_fp8(in, want, want_lse, per_head, default_bc(128));
      Pages pages(in, page_size, per_head, rng);
      a.o = paged.data();
      a.k = a.v = nullptr;
      a.cu_seqlens_k = a.cu_seqlens_k_host = nullptr;
      a.descale.k = a.descale.v = nullptr;
      d.lse.poison();  // the paged run writes the same LSE buffer: it must rewrite every entry, bit for bit
      const llmk::Status s = attn::prefill_paged_fp8(a, pages.view, nullptr);
      REQUIRE_MESSAGE(s.ok(), s.message());
      const std::vector<f16> got = paged.to_host();
      int differ = 0;
      for (std::size_t i = 0; i < got.size(); ++i) differ += got[i].bits != want[i].bits;
      CHECK(differ == 0);
      const std::vector<float> got_lse = d.lse.to_host();
      CHECK(std::memcmp(got_lse.data(), want_lse.data(), want_lse.size() * sizeof(float)) == 0);
      if (page_size == 5 && !per_head) {
        // One-slot rings and 32-key tiles: the producer publishes K_j, then awaits K_{j+1}'s slot (freed by
        // S_j) to start tile j + 1's copies before it transposes V_j. Within the rule of the reference.
        paged.poison();
        d.lse.poison();
        const llmk::Status one =
            attn::prefill_paged_fp8_with_config<f16, attn::Sm90Fp8PrefillConfig<128, 32, 1>>(a, pages.view,
                                                                                             nullptr);
        REQUIRE_MESSAGE(one.ok(), one.message());
        check_fp8(in, paged.to_host(), d.lse.to_host(), per_head, 32);
      }
    }
}

TEST_CASE("prefill_fp8: bad arguments are rejected with the rule that failed; refused off sm_90") {
  std::mt19937 rng(306);
  Case c;
  c.q_lens = {20};
  c.kv_lens = {20};
  c.dim = 64;
  const Inputs in = make_inputs(c, rng);
  Device d(in);
  llmk::DeviceBuffer<f16> o(static_cast<std::size_t>(in.p.q_elements()));
  const attn::PrefillFp8Args<f16> good = args_of<f16>(in, d, o.data(), false);
  auto expect = [](const attn::PrefillFp8Args<f16>& a, const char* needle) {
    const llmk::Status s = attn::prefill_fp8(a, nullptr);
    CHECK_MESSAGE(s.code() == llmk::Status::Code::kInvalidArgument, s.message());
    CHECK_MESSAGE(s.message().find(needle) != std::string::npos, s.message());
  };
  attn::PrefillFp8Args<f16> a = good;
  a.descale.q = nullptr;
  expect(a, "descale.q");
  a = good;
  a.descale.v = reinterpret_cast<const float*>(reinterpret_cast<const char*>(good.descale.v) + 2);
  expect(a, "descale.v");
  a = good;
  a.descale.mode = static_cast<attn::Fp8Descale>(7);
  expect(a, "descale.mode");
  a = good;
  a.q_stride_head = 72;  // a multiple of 8 elements: enough for fp16, not 16 bytes of e4m3
  expect(a, "q_stride_head");
  a = good;
  a.head_dim = 80;
  expect(a, "head_dim");
  {
    Pages pages(in, 16, false, rng);
    a = good;
    a.k = a.v = nullptr;
    a.cu_seqlens_k = a.cu_seqlens_k_host = nullptr;
    const llmk::Status s = attn::prefill_paged_fp8(a, pages.view, nullptr);
    CHECK(s.code() == llmk::Status::Code::kInvalidArgument);
    CHECK_MESSAGE(s.message().find("descale.k/descale.v") != std::string::npos, s.message());
  }
  if (!hopper()) {
    CHECK(attn::prefill_fp8(good, nullptr).code() == llmk::Status::Code::kUnsupported);
    return;
  }
#if defined(LLMK_SIM)
  const llmk::Status refused = [&] {
    llmk::test::ScopedEnv sm80("LLMK_SIM_ARCH", "800");
    return attn::prefill_fp8(good, nullptr);
  }();
  CHECK(refused.code() == llmk::Status::Code::kUnsupported);
  CHECK_MESSAGE(refused.message().find("prefill_fp8") != std::string::npos, refused.message());
#endif
  MESSAGE("fp8 prefill accuracy over these tests: worst rms(out - ref) / rms(ref) = "
          << g_worst_rms << ", worst max |out - ref| / max |v| = " << g_worst_max
          << ", largest share of the P-rounding bound used = " << g_worst_share);
}
