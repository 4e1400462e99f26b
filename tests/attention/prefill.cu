// Tests of llmk::attention::prefill against the fp64 reference, in the simulator (and on a GPU). Every case
// runs both kernels: the mma.sync one (prefill_mma) and whatever prefill dispatches to on this device: the
// Hopper kernel on sm_90 and in the simulator (LLMK_SIM_ARCH defaults to 900).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_check.hpp"
#include "llmk/attention/prefill.cuh"
#include "llmk/core/memory.cuh"
#include "support/test_env.hpp"

namespace {

using bf16 = llmk::bfloat16;
using f16 = llmk::half;
namespace attn = llmk::attention;

struct Case {
  std::vector<int> q_lens, kv_lens;  // one entry: uniform-length mode; several: varlen (cu_seqlens)
  int heads = 2, kv_heads = 2, dim = 64;
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  float magnitude = 1.0f;
  int batch = 1;     // uniform mode: this many sequences of q_lens[0] / kv_lens[0]
  int head_pad = 0;  // extra elements between heads (strided layout)
  bool with_lse = true;
};

llmk::reference::AttentionProblem problem_of(const Case& c) {
  llmk::reference::AttentionProblem p;
  if (c.q_lens.size() == 1) {
    p.q_lens.assign(c.batch, c.q_lens[0]);
    p.kv_lens.assign(c.batch, c.kv_lens[0]);
  } else {
    p.q_lens = c.q_lens;
    p.kv_lens = c.kv_lens;
  }
  p.num_heads = c.heads;
  p.num_kv_heads = c.kv_heads;
  p.head_dim = c.dim;
  p.options.softmax_scale = attn::default_scale(c.dim);
  p.options.softcap = c.softcap;
  p.options.causal = c.causal;
  p.options.window_left = c.window_left;
  p.options.window_right = c.window_right;
  return p;
}

// The prefix sums of a problem's query and key lengths (cu_seqlens_q, cu_seqlens_k).
std::pair<std::vector<int>, std::vector<int>> cu_seqlens(const llmk::reference::AttentionProblem& p) {
  std::vector<int> cu_q(p.batch() + 1, 0), cu_k(p.batch() + 1, 0);
  for (int b = 0; b < p.batch(); ++b) {
    cu_q[b + 1] = cu_q[b] + p.q_lens[b];
    cu_k[b + 1] = cu_k[b] + p.kv_lens[b];
  }
  return {cu_q, cu_k};
}

// Packed [tokens, heads, row] Q / K / V / O (row >= dim: padded head rows) and the head counts.
template <class T>
void set_packed_layout(attn::PrefillArgs<T>& a, int heads, int kv_heads, int dim, std::int64_t row) {
  a.q_stride_token = a.o_stride_token = heads * row;
  a.k_stride_token = a.v_stride_token = kv_heads * row;
  a.q_stride_head = a.k_stride_head = a.v_stride_head = a.o_stride_head = row;
  a.num_heads = heads;
  a.num_kv_heads = kv_heads;
  a.head_dim = dim;
}

// Copies a contiguous [tokens, heads, dim] tensor into one with `pad` extra elements after each head row, NaN
// (a load that runs past the head dim poisons the output).
template <class T>
std::vector<T> with_head_pad(const std::vector<T>& x, int heads, int dim, int pad) {
  const std::size_t tokens = x.size() / (static_cast<std::size_t>(heads) * dim);
  std::vector<T> y(tokens * heads * (dim + pad), T(std::nanf("")));
  for (std::size_t t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < dim; ++d) y[(t * heads + h) * (dim + pad) + d] = x[(t * heads + h) * dim + d];
  return y;
}

template <class T>
std::vector<T> without_head_pad(const std::vector<T>& y, int heads, int dim, int pad) {
  const std::size_t tokens = y.size() / (static_cast<std::size_t>(heads) * (dim + pad));
  std::vector<T> x(tokens * heads * dim);
  for (std::size_t t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < dim; ++d) x[(t * heads + h) * dim + d] = y[(t * heads + h) * (dim + pad) + d];
  return x;
}

// Runs prefill on random inputs, returns the output (and LSE) on the host; Launch picks the entry point.
template <class T, class Launch>
void run_case(const Case& c, std::mt19937& rng, Launch&& launch) {
  const llmk::reference::AttentionProblem p = problem_of(c);
  CAPTURE(c.dim);
  CAPTURE(c.heads);
  CAPTURE(c.kv_heads);
  CAPTURE(c.causal);
  CAPTURE(c.window_left);
  CAPTURE(c.window_right);
  CAPTURE(c.softcap);
  INFO("q_lens[0] = " << p.q_lens[0] << ", kv_lens[0] = " << p.kv_lens[0] << ", batch " << p.batch());
  const std::vector<T> q = llmk::test::random_tensor<T>(p.q_elements(), c.magnitude, rng);
  const std::vector<T> k = llmk::test::random_tensor<T>(p.kv_elements(), c.magnitude, rng);
  const std::vector<T> v = llmk::test::random_tensor<T>(p.kv_elements(), 1.0f, rng);
  const int pad = c.head_pad, row = c.dim + pad;

  llmk::DeviceBuffer<T> d_q(with_head_pad(q, c.heads, c.dim, pad)),
      d_k(with_head_pad(k, c.kv_heads, c.dim, pad)), d_v(with_head_pad(v, c.kv_heads, c.dim, pad));
  llmk::DeviceBuffer<T> d_o(static_cast<std::size_t>(p.total_q()) * c.heads * row);  // poisoned
  llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(p.total_q()) * c.heads + 1);
  const auto [cu_q, cu_k] = cu_seqlens(p);
  llmk::DeviceBuffer<int> d_cu_q(cu_q), d_cu_k(cu_k);

  attn::PrefillArgs<T> a;
  a.q = d_q.data();
  a.k = d_k.data();
  a.v = d_v.data();
  a.o = d_o.data();
  set_packed_layout(a, c.heads, c.kv_heads, c.dim, row);
  a.lse = c.with_lse ? d_lse.data() : nullptr;
  if (c.q_lens.size() == 1) {
    a.q_len = c.q_lens[0];
    a.kv_len = c.kv_lens[0];
  } else {
    a.cu_seqlens_q = d_cu_q.data();
    a.cu_seqlens_k = d_cu_k.data();
    a.cu_seqlens_q_host = cu_q.data();
    a.cu_seqlens_k_host = cu_k.data();
  }
  a.batch = p.batch();
  a.options = p.options;
  const llmk::Status s = launch(a);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(llmk::device_synchronize().ok());
  const std::vector<T> o_padded = d_o.to_host();
  const std::vector<T> got = without_head_pad(o_padded, c.heads, c.dim, pad);
  // O's padding after each head row and the LSE past the last row stay poisoned (never written).
  int pad_written = 0;
  for (std::size_t r = 0; r < o_padded.size() / row; ++r)
    for (int e = c.dim; e < row; ++e) pad_written += o_padded[r * row + e].bits != 0xFFFF;
  CHECK(pad_written == 0);
  std::vector<float> lse = d_lse.to_host();
  CHECK(std::isnan(lse.back()));
  lse.pop_back();
  llmk::test::check_attention(p, q, k, v, got, c.with_lse ? &lse : nullptr);
}

// Both kernels on the same inputs. Sanitizer builds (LLMK_TEST_FAST) run one kernel per case, the two in
// turn: each still meets every test case's shapes and masks under ASan/TSan, at half the cost (the plain
// build checks every case's answer with both).
template <class T>
void run_case(const Case& c, std::mt19937& rng) {
  static int cases = 0;
  const int turn = cases++;
  std::mt19937 same = rng;
  if (!llmk::test::fast() || turn % 2 == 0) {
    INFO("kernel: mma.sync (prefill_mma)");
    run_case<T>(c, same, [](const attn::PrefillArgs<T>& a) { return attn::prefill_mma(a, nullptr); });
  }
  if (!llmk::test::fast() || turn % 2 == 1) {
    INFO("kernel: prefill's dispatch (sm_90: the Hopper kernel)");
    run_case<T>(c, rng, [](const attn::PrefillArgs<T>& a) { return attn::prefill(a, nullptr); });
  } else {
    rng = same;  // the same stream of inputs as when both run
  }
}

// The launchers of the NaN tests: both kernels.
template <class T>
using Launcher = llmk::Status (*)(const attn::PrefillArgs<T>&, cudaStream_t);
template <class T>
const Launcher<T> kBothKernels[] = {attn::prefill_mma<T>, attn::prefill<T>};

Case uniform(int q_len, int kv_len, int dim, bool causal) {
  Case c;
  c.q_lens = {q_len};
  c.kv_lens = {kv_len};
  c.dim = dim;
  c.causal = causal;
  return c;
}

}  // namespace

TEST_CASE("prefill: sequence lengths 1..513, causal and not") {
  std::mt19937 rng(101);
  const std::vector<int> lens =
      llmk::test::fast() ? std::vector<int>{1, 17, 65} : std::vector<int>{1, 7, 17, 63, 65, 127, 200, 513};
  for (int len : lens)
    for (bool causal : {false, true}) {
      if (len == 513 && !causal) continue;  // the causal run covers the length; keeps the simulator fast
      run_case<f16>(uniform(len, len, 64, causal), rng);
    }
}

TEST_CASE("prefill: q_len != kv_len, bottom-right causal alignment") {
  std::mt19937 rng(102);
  // Sanitizer builds (LLMK_TEST_FAST): the same mix (q < kv, q > kv, one row, partial tiles, several Br and
  // Bc tiles) at about half the tiles.
  const std::vector<std::pair<int, int>> shapes =
      llmk::test::fast()
          ? std::vector<std::pair<int, int>>{{7, 130}, {1, 127}, {65, 17}, {63, 65}, {17, 200}, {130, 63}}
          : std::vector<std::pair<int, int>>{{7, 200}, {1, 127}, {65, 17}, {63, 65}, {17, 513}, {200, 63}};
  for (auto [q_len, kv_len] : shapes)
    for (bool causal : {true, false}) run_case<f16>(uniform(q_len, kv_len, 64, causal), rng);
}

TEST_CASE("prefill: every runtime head dim, fp16 and bf16") {
  std::mt19937 rng(103);
  for (int dim : {64, 96, 128, 256}) {
    Case c = uniform(llmk::test::pick(65, 17), llmk::test::pick(127, 33), dim, true);
    c.heads = 4;
    c.kv_heads = 2;
    run_case<f16>(c, rng);
    c.causal = false;
    run_case<bf16>(c, rng);
  }
}

TEST_CASE("prefill: a custom head dim (80) by explicit instantiation; the runtime dispatch rejects it") {
  std::mt19937 rng(104);
  Case c = uniform(llmk::test::pick(63, 17), llmk::test::pick(63, 17), 80, true);
  // prefill_with_config: the Hopper kernel on sm_90 (d80: five 32-byte column blocks), mma.sync elsewhere.
  auto dispatched = [](const attn::PrefillArgs<f16>& a) {
    return attn::prefill_with_config<f16, attn::DefaultPrefillConfig<80>>(a, nullptr);
  };
  auto mma = [](const attn::PrefillArgs<f16>& a) {
    return attn::prefill_mma_with_config<f16, attn::DefaultPrefillConfig<80>>(a, nullptr);
  };
  run_case<f16>(c, rng, dispatched);
  run_case<f16>(c, rng, mma);
  c.causal = false;
  c.q_lens = {7};
  run_case<f16>(c, rng, dispatched);
  run_case<f16>(c, rng, mma);
}

TEST_CASE("prefill: GQA ratios 1, 4, 8 and MQA") {
  std::mt19937 rng(105);
  for (int kv_heads : {8, 2, 1}) {
    Case c = uniform(llmk::test::pick(63, 17), llmk::test::pick(127, 33), 64, true);
    c.heads = 8;
    c.kv_heads = kv_heads;
    run_case<f16>(c, rng);
  }
  Case c = uniform(7, 65, 128, false);  // group 6: rows of a tile mix tokens and heads unevenly
  c.heads = 12;
  c.kv_heads = 2;
  run_case<bf16>(c, rng);
}

TEST_CASE("prefill: sliding windows and soft-cap") {
  std::mt19937 rng(106);
  Case c = uniform(llmk::test::pick(127, 33), llmk::test::pick(200, 40), 64, true);
  c.window_left = 16;
  run_case<f16>(c, rng);
  c.causal = false;
  c.window_left = 8;
  c.window_right = 5;
  run_case<f16>(c, rng);
  c.window_left = -1;
  c.window_right = 0;  // the same as causal
  run_case<bf16>(c, rng);
  c = uniform(65, 65, 128, true);
  c.softcap = 30.0f;
  c.magnitude = 4.0f;
  run_case<f16>(c, rng);
}

TEST_CASE("prefill: every tile kind in one sequence (window edge, unmasked hot loop, diagonal)") {
  // The kernel runs tiles that no row of the block masks in its hot loop (no mask test) and the others
  // (window edges, the causal diagonal, a partial last tile, any soft-capped tile) in the general step. Per
  // default tile (docs/attention.md), a row block that has all three:
  // (keys masked for some rows by the window | unmasked, the hot loop | the causal diagonal):
  //   d64, 128 x 96, ring: queries 256..383 of 384, window_left 300: 0..95 | 96..191 | 192..383;
  //   d96 / d128, 64 x 96: queries 192..255 of 288, window_left 200: 0..95 | 96..191 | 192..287;
  //   d256, 64 x 64: queries 128..191 of 192, window_left 150: 0..63 | 64..127 | 128..191.
  // Sanitizer builds (LLMK_TEST_FAST) run that row block alone: the last queries of the sequence as a
  // q_len < kv_len case (bottom-right aligned, so they sit at the same positions and see the same keys).
  std::mt19937 rng(111);
  Case c = uniform(llmk::test::pick(384, 128), 384, 64, true);
  c.window_left = 300;
  run_case<f16>(c, rng);
  c = uniform(llmk::test::pick(288, 64), 288, 128, true);
  c.window_left = 200;
  run_case<bf16>(c, rng);
  c.dim = 96;
  run_case<f16>(c, rng);
  c = uniform(llmk::test::pick(192, 64), 192, 256, true);
  c.window_left = 150;
  run_case<bf16>(c, rng);
  // Soft-cap: unmasked tiles take the general step too (the hot loop has no tanh).
  c = uniform(130, 130, 64, false);
  c.softcap = 20.0f;
  c.magnitude = 4.0f;
  run_case<f16>(c, rng);
}

TEST_CASE("prefill: varlen batches, strided layout, batch of equal lengths") {
  std::mt19937 rng(107);
  std::uniform_int_distribution<int> len(1, llmk::test::pick(300, 40));
  Case c;
  for (int b = 0; b < llmk::test::pick(5, 3); ++b) {
    const int kv = len(rng);
    c.kv_lens.push_back(kv);
    c.q_lens.push_back(std::uniform_int_distribution<int>(1, kv)(rng));
  }
  c.q_lens.push_back(0);  // an empty sequence in the middle of a batch is allowed
  c.kv_lens.push_back(5);
  c.q_lens.push_back(9);
  c.kv_lens.push_back(9);
  c.dim = 128;
  c.heads = 4;
  c.kv_heads = 2;
  c.causal = true;
  run_case<bf16>(c, rng);
  c.causal = false;
  c.head_pad = 8;
  c.with_lse = false;
  run_case<f16>(c, rng);
  Case u = uniform(33, 40, 64, true);
  u.batch = 3;
  u.head_pad = 16;
  run_case<f16>(u, rng);
}

TEST_CASE("prefill: large-magnitude scores do not overflow") {
  std::mt19937 rng(108);
  Case c = uniform(llmk::test::pick(127, 33), llmk::test::pick(127, 33), 64, false);
  c.magnitude = 8.0f;  // scaled scores reach about +-60: exp would overflow fp16/fp32 without the running max
  run_case<f16>(c, rng);
  c.causal = true;
  run_case<bf16>(c, rng);
}

TEST_CASE("prefill: a NaN in one query row reaches that row only") {
  std::mt19937 rng(109);
  const int n = 40, heads = 2, dim = 64;
  std::vector<f16> q = llmk::test::random_tensor<f16>(n * heads * dim, 1.0f, rng);
  const std::vector<f16> k = llmk::test::random_tensor<f16>(n * heads * dim, 1.0f, rng);
  const std::vector<f16> v = llmk::test::random_tensor<f16>(n * heads * dim, 1.0f, rng);
  const int bad_token = 21, bad_head = 1;
  q[(bad_token * heads + bad_head) * dim + 5] = f16(std::nanf(""));
  llmk::DeviceBuffer<f16> d_q(q), d_k(k), d_v(v), d_o(q.size());
  llmk::DeviceBuffer<float> d_lse(n * heads);
  attn::PrefillArgs<f16> a;
  a.q = d_q.data();
  a.k = d_k.data();
  a.v = d_v.data();
  a.o = d_o.data();
  a.q_stride_token = a.k_stride_token = a.v_stride_token = a.o_stride_token = heads * dim;
  a.q_stride_head = a.k_stride_head = a.v_stride_head = a.o_stride_head = dim;
  a.lse = d_lse.data();
  a.q_len = a.kv_len = n;
  a.batch = 1;
  a.num_heads = a.num_kv_heads = heads;
  a.head_dim = dim;
  a.options.softmax_scale = attn::default_scale(dim);
  for (Launcher<f16> launch : kBothKernels<f16>) {
    d_o.poison();  // each kernel's own output: the other's stays in the buffers otherwise
    d_lse.poison();
    REQUIRE(launch(a, nullptr).ok());
    const std::vector<f16> o = d_o.to_host();
    const std::vector<float> lse = d_lse.to_host();
    for (int t = 0; t < n; ++t)
      for (int h = 0; h < heads; ++h) {
        const bool bad = t == bad_token && h == bad_head;
        CHECK(std::isnan(lse[t * heads + h]) == bad);
        for (int d = 0; d < dim; ++d) CHECK(std::isnan(o[(t * heads + h) * dim + d].to_float()) == bad);
      }
  }
}

TEST_CASE("prefill: bad arguments are rejected with the rule that failed") {
  llmk::DeviceBuffer<f16> buf(4096);
  attn::PrefillArgs<f16> good;
  good.q = good.k = good.v = buf.data();
  good.o = buf.data() + 2048;
  good.q_stride_token = good.k_stride_token = good.v_stride_token = good.o_stride_token = 128;
  good.q_stride_head = good.k_stride_head = good.v_stride_head = good.o_stride_head = 64;
  good.q_len = good.kv_len = 8;
  good.batch = 2;
  good.num_heads = 2;
  good.num_kv_heads = 2;
  good.head_dim = 64;
  good.options.softmax_scale = 0.125f;
  REQUIRE(attn::prefill(good, nullptr).ok());

  auto expect = [](const attn::PrefillArgs<f16>& a, const char* needle) {
    const llmk::Status s = attn::prefill(a, nullptr);
    CHECK_FALSE(s.ok());
    INFO(s.message());
    CHECK(s.message().find(needle) != std::string::npos);
  };
  attn::PrefillArgs<f16> a = good;
  a.head_dim = 80;
  expect(a, "prefill_with_config");
  a = good;
  a.head_dim = 72;
  expect(a, "head_dim");
  a = good;
  a.num_kv_heads = 3;
  a.num_heads = 4;
  expect(a, "multiple of num_kv_heads");
  a = good;
  a.q = buf.data() + 1;
  expect(a, "16-byte aligned");
  a = good;
  a.k = nullptr;
  expect(a, "must not be null");
  a = good;
  a.q_len = -1;
  expect(a, "q_len");
  a = good;
  a.k_stride_token = 100;
  expect(a, "k_stride_token");
  a = good;
  a.options.softmax_scale = 0.0f;
  expect(a, "softmax_scale");
  a = good;
  a.options.window_left = -2;
  expect(a, "window_left");
  a = good;
  a.o_stride_token = 64;
  expect(a, "overlap");
  // Varlen: offsets must be given on both sides, start at 0 and not decrease.
  llmk::DeviceBuffer<int> d_cu(std::vector<int>{0, 4, 8});
  const int cu_bad[] = {0, 6, 4}, cu_good[] = {0, 4, 8};
  a = good;
  a.cu_seqlens_q = d_cu.data();
  expect(a, "give both or neither");
  a.cu_seqlens_k = d_cu.data();
  expect(a, "host copy");
  a.cu_seqlens_q_host = cu_good;
  a.cu_seqlens_k_host = cu_bad;
  expect(a, "must not decrease");
  a.cu_seqlens_k_host = cu_good;
  CHECK(attn::prefill(a, nullptr).ok());
  const int* misaligned = reinterpret_cast<const int*>(reinterpret_cast<const char*>(d_cu.data()) + 2);
  a.cu_seqlens_q = misaligned;  // the kernels read the offsets as int32
  expect(a, "'cu_seqlens_q': must be aligned to its element size");
  a.cu_seqlens_q = d_cu.data();
  a.cu_seqlens_k = misaligned;
  expect(a, "'cu_seqlens_k': must be aligned to its element size");
  // Lengths past 2^30 in the offsets name the offsets, not q_len / kv_len (which varlen calls do not use);
  // rejected from the host copies before any device access.
  const int cu_huge[] = {0, (1 << 30) + 64}, cu_short[] = {0, 16};
  a.cu_seqlens_k = d_cu.data();
  a.batch = 1;
  a.cu_seqlens_q_host = cu_short;
  a.cu_seqlens_k_host = cu_huge;
  expect(a, "'cu_seqlens_k_host': sequence lengths must be <= 2^30");
  a.cu_seqlens_q_host = cu_huge;
  a.cu_seqlens_k_host = cu_short;
  expect(a, "'cu_seqlens_q_host': sequence lengths must be <= 2^30");
  a = good;
  a.head_dim = 80;
  CHECK(attn::prefill_with_config<f16, attn::DefaultPrefillConfig<64>>(a, nullptr)
            .message()
            .find("compiled for 64") != std::string::npos);
}

TEST_CASE("prefill: a custom tile configuration (8 warps, Bc = 32, 3-stage ring)") {
  std::mt19937 rng(110);
  using Cfg = attn::PrefillConfig<64, 128, 32, 8, 3>;
  auto launch = [](const attn::PrefillArgs<f16>& a) {
    return attn::prefill_mma_with_config<f16, Cfg>(a, nullptr);
  };
  const int big = llmk::test::pick(200, 136);  // two 128-row tiles and several 32-key tiles either way
  for (auto [q_len, kv_len] : std::vector<std::pair<int, int>>{{big, big}, {17, 130}, {1, 65}}) {
    Case c = uniform(q_len, kv_len, 64, true);
    c.heads = 4;
    c.kv_heads = 1;
    run_case<f16>(c, rng, launch);
    c.causal = false;
    run_case<f16>(c, rng, launch);
  }
}

TEST_CASE("prefill: 32 rows per warp at head dim 128 (S and P one 16-row tile at a time)") {
  std::mt19937 rng(116);
  using Cfg = attn::PrefillConfig<128, 128, 32, 4, 2>;
  static_assert(Cfg::kScoresPerM16, "this tile takes the per-16-row scores path");
  static_assert(!attn::DefaultPrefillConfig<64>::kScoresPerM16 &&
                    !attn::DefaultPrefillConfig<128>::kScoresPerM16 &&
                    !attn::DefaultPrefillConfig<256>::kScoresPerM16 &&
                    !attn::DefaultPagedPrefillConfig<64, f16>::kScoresPerM16,
                "the defaults keep the shared K fragments");
  auto launch = [](const attn::PrefillArgs<f16>& a) {
    return attn::prefill_mma_with_config<f16, Cfg>(a, nullptr);
  };
  // 150 queries x 2 heads: two whole 128-row tiles and a partial one, causal (diagonal tiles on the general
  // step, whole ones in the hot loop); then a window and the soft-cap on every tile (the general step).
  Case c = uniform(llmk::test::pick(150, 131), 161, 128, true);
  c.heads = 2;
  c.kv_heads = 1;
  run_case<f16>(c, rng, launch);
  c = uniform(37, 99, 128, false);
  c.window_left = 40;
  c.softcap = 30.0f;
  c.magnitude = 2.0f;
  run_case<f16>(c, rng, launch);
}

TEST_CASE(
    "prefill: window edge cases (window_left 0 and INT_MAX, q_len > kv_len, causal with window_right > 0)") {
  std::mt19937 rng(111);
  Case c = uniform(20, 8, 64, false);
  c.window_left = 2147483647;  // as unbounded; must not overflow when q_len > kv_len
  run_case<f16>(c, rng);
  c = uniform(33, 40, 64, true);
  c.window_left = 0;  // each query sees its own key only
  run_case<f16>(c, rng);
  c = uniform(30, 12, 64, false);
  c.window_left = 10;
  c.window_right = 7;
  run_case<bf16>(c, rng);
  c = uniform(65, 80, 64, true);
  c.window_right = 5;  // causal wins: the same as window_right = 0
  run_case<f16>(c, rng);
}

TEST_CASE("prefill: a NaN in one key reaches exactly the queries that see it") {
  std::mt19937 rng(112);
  const int n = 40, dim = 64;
  const std::vector<f16> q = llmk::test::random_tensor<f16>(n * dim, 1.0f, rng);
  std::vector<f16> k = llmk::test::random_tensor<f16>(n * dim, 1.0f, rng);
  const std::vector<f16> v = llmk::test::random_tensor<f16>(n * dim, 1.0f, rng);
  const int bad_key = 30;
  k[bad_key * dim + 7] = f16(std::nanf(""));
  llmk::DeviceBuffer<f16> d_q(q), d_k(k), d_v(v), d_o(q.size());
  attn::PrefillArgs<f16> a;
  a.q = d_q.data();
  a.k = d_k.data();
  a.v = d_v.data();
  a.o = d_o.data();
  a.q_stride_token = a.k_stride_token = a.v_stride_token = a.o_stride_token = dim;
  a.q_stride_head = a.k_stride_head = a.v_stride_head = a.o_stride_head = dim;
  a.q_len = a.kv_len = n;
  a.batch = 1;
  a.num_heads = a.num_kv_heads = 1;
  a.head_dim = dim;
  a.options.softmax_scale = attn::default_scale(dim);
  a.options.causal = true;
  for (Launcher<f16> launch : kBothKernels<f16>) {
    d_o.poison();  // each kernel's own output (poison is NaN: the rows before the bad key must be written)
    REQUIRE(launch(a, nullptr).ok());
    const std::vector<f16> o = d_o.to_host();
    for (int t = 0; t < n; ++t) CHECK(std::isnan(o[t * dim].to_float()) == (t >= bad_key));
  }
}

TEST_CASE("prefill: a NaN or Inf in the next sequence's keys and values stays out of this one") {
  // Varlen: sequence 0 (37 keys) ends inside a key tile whose other rows are sequence 1's tokens. Its P is 0
  // there, but 0 * NaN is NaN: the mma.sync kernel zero-fills those rows, the Hopper kernel zeroes them in
  // shared memory after the TMA load.
  std::mt19937 rng(113);
  const int dim = 128, len0 = 37, len1 = 50, n = len0 + len1;
  const std::vector<f16> q = llmk::test::random_tensor<f16>(n * dim, 1.0f, rng);
  std::vector<f16> k = llmk::test::random_tensor<f16>(n * dim, 1.0f, rng);
  std::vector<f16> v = llmk::test::random_tensor<f16>(n * dim, 1.0f, rng);
  k[(len0 + 2) * dim + 3] = f16(std::nanf(""));
  v[(len0 + 1) * dim + 9] = f16(std::nanf(""));
  v[(len0 + 4) * dim + 100] = f16(INFINITY);
  llmk::DeviceBuffer<f16> d_q(q), d_k(k), d_v(v), d_o(q.size());
  const std::vector<int> cu = {0, len0, n};
  llmk::DeviceBuffer<int> d_cu(cu);
  attn::PrefillArgs<f16> a;
  a.q = d_q.data();
  a.k = d_k.data();
  a.v = d_v.data();
  a.o = d_o.data();
  a.q_stride_token = a.k_stride_token = a.v_stride_token = a.o_stride_token = dim;
  a.q_stride_head = a.k_stride_head = a.v_stride_head = a.o_stride_head = dim;
  a.cu_seqlens_q = a.cu_seqlens_k = d_cu.data();
  a.cu_seqlens_q_host = a.cu_seqlens_k_host = cu.data();
  a.batch = 2;
  a.num_heads = a.num_kv_heads = 1;
  a.head_dim = dim;
  a.options.softmax_scale = attn::default_scale(dim);
  for (Launcher<f16> launch : kBothKernels<f16>) {
    d_o.poison();  // each kernel's own output
    REQUIRE(launch(a, nullptr).ok());
    const std::vector<f16> o = d_o.to_host();
    int bad = 0;
    for (int t = 0; t < len0; ++t)
      for (int d = 0; d < dim; ++d) bad += !std::isfinite(o[t * dim + d].to_float());
    CHECK(bad == 0);
  }
}

TEST_CASE(
    "prefill block order: every (row tile, sequence, KV head) once; causal heaviest first in sections") {
  // The Hopper kernel takes its (row tile, sequence, KV head) from PrefillBlockOrder::block(blockIdx.x): a
  // block missed or taken twice would leave poisoned output rows, but only a launch with more K/V than a
  // section holds has more than one section, so the sections are checked here on the mapping itself.
  struct Shape {
    int row_tiles, batch, kv_heads;
    bool causal;
    std::int64_t kv_bytes;  // per (sequence, KV head) pair
    int want_section;
  };
  const std::int64_t budget = attn::kPrefillSectionBytes;
  for (const Shape& c :
       {Shape{5, 3, 1, false, 1, 1}, Shape{1, 2, 4, true, 1, 8}, Shape{7, 1, 1, true, budget, 1},
        Shape{4, 7, 1, true, budget / 3, 3}, Shape{3, 5, 2, true, budget / 4, 4},
        Shape{6, 2, 3, true, 2 * budget, 1}, Shape{2, 4, 3, true, 64, 12}}) {
    CAPTURE(c.row_tiles);
    CAPTURE(c.batch);
    CAPTURE(c.kv_heads);
    const auto o =
        attn::detail::make_prefill_block_order(c.row_tiles, c.batch, c.kv_heads, c.causal, c.kv_bytes);
    CHECK(o.section_pairs == c.want_section);
    REQUIRE(o.blocks() == static_cast<std::int64_t>(c.row_tiles) * c.batch * c.kv_heads);
    std::vector<int> seen(static_cast<std::size_t>(o.blocks()), 0);
    for (std::int64_t i = 0; i < o.blocks(); ++i) {
      const attn::detail::PrefillBlock blk = o.block(static_cast<unsigned>(i));
      REQUIRE(blk.row_tile >= 0);
      REQUIRE(blk.row_tile < c.row_tiles);
      REQUIRE(blk.batch >= 0);
      REQUIRE(blk.batch < c.batch);
      REQUIRE(blk.kv_head >= 0);
      REQUIRE(blk.kv_head < c.kv_heads);
      ++seen[static_cast<std::size_t>((blk.batch * c.kv_heads + blk.kv_head) * c.row_tiles + blk.row_tile)];
      if (!c.causal) {  // the natural order: row tiles fastest, then KV heads, then sequences
        CHECK(blk.row_tile == i % c.row_tiles);
        CHECK(blk.kv_head == (i / c.row_tiles) % c.kv_heads);
        CHECK(blk.batch == i / (static_cast<std::int64_t>(c.row_tiles) * c.kv_heads));
      } else {  // sections of pairs in order; within one, row tiles descending, its pairs fastest
        const int pairs = c.batch * c.kv_heads, pair = blk.batch * c.kv_heads + blk.kv_head;
        const int section = pair / o.section_pairs, first = section * o.section_pairs;
        const int here = std::min(o.section_pairs, pairs - first);
        const std::int64_t offset = i - static_cast<std::int64_t>(first) * c.row_tiles;
        CHECK(blk.row_tile == c.row_tiles - 1 - offset / here);
        CHECK(pair == first + offset % here);
      }
    }
    CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(seen.size()));
  }
}

TEST_CASE("prefill: the dispatch picks the Hopper kernel on sm_90 and the mma.sync kernel elsewhere") {
  // Bit-for-bit equal outputs identify the kernel that ran (the two differ in their low bits: 110 keys are
  // two 96-key tiles for the mma.sync kernel, one 128-key tile for the Hopper kernel).
  std::mt19937 rng(114);
  const int n = 110, heads = 4, kv_heads = 2, dim = 64;
  const std::vector<f16> q = llmk::test::random_tensor<f16>(n * heads * dim, 1.0f, rng);
  const std::vector<f16> k = llmk::test::random_tensor<f16>(n * kv_heads * dim, 1.0f, rng);
  const std::vector<f16> v = llmk::test::random_tensor<f16>(n * kv_heads * dim, 1.0f, rng);
  llmk::DeviceBuffer<f16> d_q(q), d_k(k), d_v(v), d_o(q.size());
  attn::PrefillArgs<f16> a;
  a.q = d_q.data();
  a.k = d_k.data();
  a.v = d_v.data();
  a.o = d_o.data();
  a.q_stride_token = a.o_stride_token = heads * dim;
  a.k_stride_token = a.v_stride_token = kv_heads * dim;
  a.q_stride_head = a.k_stride_head = a.v_stride_head = a.o_stride_head = dim;
  a.q_len = a.kv_len = n;
  a.batch = 1;
  a.num_heads = heads;
  a.num_kv_heads = kv_heads;
  a.head_dim = dim;
  a.options.softmax_scale = attn::default_scale(dim);
  a.options.causal = true;
  auto output = [&](const llmk::Status& s) {
    REQUIRE_MESSAGE(s.ok(), s.message());
    const std::vector<f16> o = d_o.to_host();
    std::vector<std::uint16_t> bits(o.size());
    for (std::size_t i = 0; i < o.size(); ++i) bits[i] = o[i].bits;
    return bits;
  };
  const auto mma = output(attn::prefill_mma(a, nullptr));
  const auto dispatched = output(attn::prefill(a, nullptr));
  if (llmk::device_arch() == 900) {
    const auto hopper =
        output(attn::prefill_sm90_with_config<f16, attn::DefaultSm90PrefillConfig<64>>(a, nullptr));
    CHECK(dispatched == hopper);
    CHECK(dispatched != mma);
  }
#if defined(LLMK_SIM)
  llmk::test::ScopedEnv sm80("LLMK_SIM_ARCH", "800");
  const auto on_ampere = output(attn::prefill(a, nullptr));
  const llmk::Status refused =
      attn::prefill_sm90_with_config<f16, attn::DefaultSm90PrefillConfig<64>>(a, nullptr);
  CHECK(on_ampere == mma);
  CHECK(refused.code() == llmk::Status::Code::kUnsupported);
#endif
}

TEST_CASE("prefill: Hopper kernel, a custom configuration (d64, Bc = 48, 3-slot ring) and GQA groups") {
  // Bc = 48: three k16 steps of P V per tile, a ring that wraps several times; group 16 and 3 (126 rows per
  // block: a padding row range no one stores).
  if (llmk::device_arch() != 900) return;
  std::mt19937 rng(115);
  using Cfg = attn::Sm90PrefillConfig<64, 48, 3>;
  auto launch = [](const attn::PrefillArgs<f16>& a) {
    return attn::prefill_sm90_with_config<f16, Cfg>(a, nullptr);
  };
  for (auto [heads, kv_heads] : std::vector<std::pair<int, int>>{{16, 1}, {6, 2}}) {
    Case c = uniform(llmk::test::pick(100, 50), llmk::test::pick(230, 120), 64, true);
    c.heads = heads;
    c.kv_heads = kv_heads;
    c.window_left = 90;
    run_case<f16>(c, rng, launch);
    c.causal = false;
    c.window_left = -1;
    run_case<f16>(c, rng, launch);
  }
}

TEST_CASE(
    "prefill: Hopper kernel, GQA groups above 128 (blocks of one token's heads); a prime group refused") {
  // Group 192: blocks of 96 heads; group 160 (two KV heads): blocks of 80. Group 131 has no divisor in [64,
  // 128]: the Hopper launcher refuses it and the dispatch runs the mma.sync kernel.
  using Cfg = attn::DefaultSm90PrefillConfig<64>;
  static_assert(attn::detail::sm90_prefill_rows_per_block<Cfg>(6) == 126);
  static_assert(attn::detail::sm90_prefill_rows_per_block<Cfg>(128) == 128);
  static_assert(attn::detail::sm90_prefill_rows_per_block<Cfg>(192) == 96);
  static_assert(attn::detail::sm90_prefill_rows_per_block<Cfg>(160) == 80);
  static_assert(attn::detail::sm90_prefill_rows_per_block<Cfg>(1024) == 128);
  static_assert(attn::detail::sm90_prefill_rows_per_block<Cfg>(131) == 0);
  if (llmk::device_arch() != 900) return;
  std::mt19937 rng(116);
  auto launch = [](const attn::PrefillArgs<f16>& a) {
    return attn::prefill_sm90_with_config<f16, Cfg>(a, nullptr);
  };
  for (auto [heads, kv_heads] : std::vector<std::pair<int, int>>{{192, 1}, {320, 2}}) {
    Case c = uniform(5, llmk::test::pick(37, 21), 64, true);
    c.heads = heads;
    c.kv_heads = kv_heads;
    run_case<f16>(c, rng, launch);
  }
  Case c = uniform(2, 19, 64, false);
  c.heads = 131;
  c.kv_heads = 1;
  run_case<f16>(c, rng, [](const attn::PrefillArgs<f16>& a) {
    const llmk::Status refused = attn::prefill_sm90_with_config<f16, Cfg>(a, nullptr);
    CHECK(refused.code() == llmk::Status::Code::kUnsupported);
    CHECK(refused.message().find("GQA group (num_heads / num_kv_heads = 131)") != std::string::npos);
    return attn::prefill(a, nullptr);
  });
}

namespace {

// The special-value tests (docs/attention.md, "Special values"): head dim 64, explicit host inputs in the
// reference layout (contiguous, varlen offsets from the problem).
constexpr int kSpecialDim = 64;
using MmaCfg64 = attn::DefaultPrefillConfig<kSpecialDim>;
using HopperCfg64 = attn::DefaultSm90PrefillConfig<kSpecialDim>;

// A kernel pinned to its default d64 tile and the keys its blocks load (llmk::test::PrefillLoads): the
// mma.sync kernel everywhere, the Hopper kernel where it runs (the simulator reports sm_90).
template <class T>
struct PinnedKernel {
  std::string name;
  Launcher<T> launch;
  llmk::test::PrefillLoads loads;
};

template <class T>
std::vector<PinnedKernel<T>> pinned_kernels(int group) {
  std::vector<PinnedKernel<T>> kernels = {{"mma.sync, DefaultPrefillConfig<64>",
                                           attn::prefill_mma_with_config<T, MmaCfg64>,
                                           {MmaCfg64::kBr, MmaCfg64::kBc, false}}};
  if (llmk::device_arch() == 900)
    kernels.push_back(
        {"Hopper, DefaultSm90PrefillConfig<64>",
         attn::prefill_sm90_with_config<T, HopperCfg64>,
         {attn::detail::sm90_prefill_rows_per_block<HopperCfg64>(group), HopperCfg64::kBc, true}});
  return kernels;
}

// One launch into fresh output and LSE buffers (allocated poisoned): the output and LSE on the host.
template <class T>
std::pair<std::vector<T>, std::vector<float>> launch_special(Launcher<T> launch,
                                                             const llmk::reference::AttentionProblem& p,
                                                             const std::vector<T>& q, const std::vector<T>& k,
                                                             const std::vector<T>& v) {
  const auto [cu_q, cu_k] = cu_seqlens(p);
  llmk::DeviceBuffer<T> d_q(q), d_k(k), d_v(v), d_o(q.size());  // d_o poisoned
  llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(p.total_q()) * p.num_heads);
  llmk::DeviceBuffer<int> d_cu_q(cu_q), d_cu_k(cu_k);
  attn::PrefillArgs<T> a;
  a.q = d_q.data();
  a.k = d_k.data();
  a.v = d_v.data();
  a.o = d_o.data();
  set_packed_layout(a, p.num_heads, p.num_kv_heads, p.head_dim, p.head_dim);
  a.lse = d_lse.data();
  a.cu_seqlens_q = d_cu_q.data();
  a.cu_seqlens_k = d_cu_k.data();
  a.cu_seqlens_q_host = cu_q.data();
  a.cu_seqlens_k_host = cu_k.data();
  a.batch = p.batch();
  a.options = p.options;
  const llmk::Status s = launch(a, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(llmk::device_synchronize().ok());
  return {d_o.to_host(), d_lse.to_host()};
}

llmk::reference::AttentionProblem special_problem(std::vector<int> q_lens, std::vector<int> kv_lens,
                                                  int heads, int kv_heads, bool causal) {
  llmk::reference::AttentionProblem p;
  p.q_lens = std::move(q_lens);
  p.kv_lens = std::move(kv_lens);
  p.num_heads = heads;
  p.num_kv_heads = kv_heads;
  p.head_dim = kSpecialDim;
  p.options.softmax_scale = attn::default_scale(kSpecialDim);
  p.options.causal = causal;
  return p;
}

// Element (token, head, col) of a [tokens, heads, dim] tensor.
std::size_t at(int token, int heads, int head, int col) {
  return (static_cast<std::size_t>(token) * heads + head) * kSpecialDim + col;
}

// Output row (token, head) of the problem -> its sequence and the token's position in it.
std::pair<int, int> sequence_of(const llmk::reference::AttentionProblem& p, std::int64_t row) {
  int token = static_cast<int>(row / p.num_heads);
  for (int b = 0; b < p.batch(); ++b) {
    if (token < p.q_lens[b]) return {b, token};
    token -= p.q_lens[b];
  }
  return {-1, -1};
}

}  // namespace

TEST_CASE("prefill: a NaN in V at key j reaches every row of the blocks that load it, rows before j too") {
  // Sequence 0 (80 tokens, causal, GQA group 4) holds NaN V at key 70 (KV head 0, column 9) and key 40 (KV
  // head 1, column 20); sequence 1 is clean. A block loads key j's V row when j lies between the first key
  // of the tile holding the block's first visible key and its last visible key (mma.sync: the rest of the
  // tile is zero-filled) or the end of that tile (Hopper: whole tiles by TMA, zeroed past the sequence's
  // end only); every row of such a block then gets NaN in that column, also the rows that do not see j
  // (0 * NaN). No LSE changes. Both kernels' blocks hold 32 tokens (128 rows); the tiles are 96 keys
  // (mma.sync) and 128 keys (Hopper), so:
  //   key 70: mma.sync tokens 64..79 (64..69 do not see it; tokens 32..63 load tile 0 = keys 0..95 only up to
  //           key 63 and stay finite); Hopper every token (tokens 0..31 load keys 0..79);
  //   key 40: mma.sync tokens 32..79 (32..39 do not see it); Hopper every token.
  // Then the same inputs under window_left 20: blocks load keys before their rows' windows (not in sanitizer
  // builds, LLMK_TEST_FAST).
  std::mt19937 rng(117);
  const int heads = 8, kv_heads = 2, group = 4, len0 = 80;
  llmk::reference::AttentionProblem p = special_problem({len0, 20}, {len0, 20}, heads, kv_heads, true);
  const std::vector<f16> q = llmk::test::random_tensor<f16>(p.q_elements(), 1.0f, rng);
  const std::vector<f16> k = llmk::test::random_tensor<f16>(p.kv_elements(), 1.0f, rng);
  std::vector<f16> v = llmk::test::random_tensor<f16>(p.kv_elements(), 1.0f, rng);
  struct Planted {
    int key, kv_head, col;
  };
  const std::vector<Planted> planted = {{70, 0, 9}, {40, 1, 20}};
  for (const Planted& n : planted) v[at(n.key, kv_heads, n.kv_head, n.col)] = f16(std::nanf(""));

  for (int window_left : llmk::test::fast() ? std::vector<int>{-1} : std::vector<int>{-1, 20}) {
    CAPTURE(window_left);
    p.options.window_left = window_left;
    for (const PinnedKernel<f16>& kernel : pinned_kernels<f16>(group)) {
      INFO("kernel: " << kernel.name);
      const llmk::test::PrefillLoads& loads = kernel.loads;
      auto keys = [&](int token) { return loads.keys(len0, len0, p.options, group, token, 0); };
      if (window_left < 0) {  // the blocks named above
        using Range = std::pair<int, int>;
        CHECK(keys(10) == (loads.whole_tiles ? Range{0, len0} : Range{0, 32}));
        CHECK(keys(40) == (loads.whole_tiles ? Range{0, len0} : Range{0, 64}));
        CHECK(keys(70) == Range{0, len0});
      }
      auto nan_out = [&](std::int64_t row, int col) {
        const auto [b, token] = sequence_of(p, row);
        const int head = static_cast<int>(row % heads);
        if (b != 0) return false;
        for (const Planted& n : planted) {
          if (head / group != n.kv_head || col != n.col) continue;
          const auto [first, end] = loads.keys(len0, len0, p.options, group, token, head % group);
          if (n.key >= first && n.key < end) return true;
        }
        return false;
      };
      std::int64_t want_rows = 0;
      for (std::int64_t row = 0; row < p.total_q() * heads; ++row)
        for (int col = 0; col < kSpecialDim; ++col)
          if (nan_out(row, col)) {
            ++want_rows;
            break;
          }
      const auto [o, lse] = launch_special(kernel.launch, p, q, k, v);
      const std::int64_t nan_rows =
          llmk::test::check_special_values(p, q, k, v, o, &lse, nan_out, [](std::int64_t) { return false; });
      CHECK(nan_rows == want_rows);
    }
  }
}

TEST_CASE("prefill: a +inf score makes the rows that see it NaN; a soft-cap maps it to the cap") {
  // K holds +inf at key 20 (KV head 0) and key 196 (KV head 1) in column 3, where every query is positive:
  // those scores are +inf. 8 queries over 200 keys, causal (queries at keys 192..199): every row of KV head
  // 0 sees key 20, inside tile 0, which every row sees whole (the kernels' unmasked hot loop: 96-key tiles
  // with one tile of lookahead in the mma.sync kernel, 128-key tiles in the Hopper kernel); of KV head 1
  // tokens 4..7 see key 196 (the diagonal tile; tokens 0..3 mask it to -inf). Without a soft-cap 2^(inf -
  // inf) makes those rows and their LSEs NaN; with soft-cap 30 the same inputs give finite rows, the
  // reference's (the capped score is 30).
  std::mt19937 rng(118);
  const int heads = 4, kv_heads = 2, group = 2, q_len = 8, kv_len = 200;
  llmk::reference::AttentionProblem p = special_problem({q_len}, {kv_len}, heads, kv_heads, true);
  std::vector<f16> q = llmk::test::random_tensor<f16>(p.q_elements(), 1.0f, rng);
  std::vector<f16> k = llmk::test::random_tensor<f16>(p.kv_elements(), 1.0f, rng);
  const std::vector<f16> v = llmk::test::random_tensor<f16>(p.kv_elements(), 1.0f, rng);
  for (int t = 0; t < q_len; ++t)
    for (int h = 0; h < heads; ++h) q[at(t, heads, h, 3)] = f16(std::fabs(q[at(t, heads, h, 3)].to_float()));
  k[at(20, kv_heads, 0, 3)] = f16(INFINITY);
  k[at(196, kv_heads, 1, 3)] = f16(INFINITY);
  auto sees_inf = [&](std::int64_t row) {
    const int token = static_cast<int>(row / heads), kv_head = static_cast<int>(row % heads) / group;
    return kv_head == 0 || token + kv_len - q_len >= 196;
  };
  for (const PinnedKernel<f16>& kernel : pinned_kernels<f16>(group)) {
    INFO("kernel: " << kernel.name);
    p.options.softcap = 0.0f;
    const auto [o, lse] = launch_special(kernel.launch, p, q, k, v);
    const std::int64_t nan_rows = llmk::test::check_special_values(
        p, q, k, v, o, &lse, [&](std::int64_t row, int) { return sees_inf(row); }, sees_inf);
    CHECK(nan_rows == q_len * group + 4 * group);
    p.options.softcap = 30.0f;
    const auto [capped, capped_lse] = launch_special(kernel.launch, p, q, k, v);
    llmk::test::check_attention(p, q, k, v, capped, &capped_lse);
  }
}

TEST_CASE("prefill: a row that sees no key gives 0 and LSE -inf, even with a NaN query row") {
  // Causal, 20 queries over 8 keys: tokens 0..11 see nothing; a second sequence has no keys at all. NaN query
  // rows: two that see nothing (token 2 head 0, token 3 head 2) and one that sees keys (token 15 head 3: NaN
  // row and LSE), and every row of sequence 1 head 1. V holds NaN at key 0 of KV head 0 (column 7), which the
  // one block of KV head 0 loads: all its rows get NaN in column 7 (the rows that see nothing included),
  // their LSE stays -inf; the rest of a row that sees nothing is exactly 0. Then a window without causal
  // (window_left 3, window_right 2): tokens 0..9 see nothing.
  std::mt19937 rng(119);
  const int heads = 4, kv_heads = 2, group = 2;
  const f16 nan = f16(std::nanf(""));
  {
    const llmk::reference::AttentionProblem p = special_problem({20, 5}, {8, 0}, heads, kv_heads, true);
    std::vector<f16> q = llmk::test::random_tensor<f16>(p.q_elements(), 1.0f, rng);
    const std::vector<f16> k = llmk::test::random_tensor<f16>(p.kv_elements(), 1.0f, rng);
    std::vector<f16> v = llmk::test::random_tensor<f16>(p.kv_elements(), 1.0f, rng);
    q[at(2, heads, 0, 11)] = q[at(3, heads, 2, 0)] = q[at(15, heads, 3, 40)] = nan;
    for (int t = 20; t < 25; ++t) q[at(t, heads, 1, 5)] = nan;
    v[at(0, kv_heads, 0, 7)] = nan;
    const std::int64_t nan_q_row = 15 * heads + 3;
    for (const PinnedKernel<f16>& kernel : pinned_kernels<f16>(group)) {
      INFO("kernel: " << kernel.name);
      CHECK(kernel.loads.keys(20, 8, p.options, group, 3, 0) == std::pair<int, int>{0, 8});
      const auto [o, lse] = launch_special(kernel.launch, p, q, k, v);
      const std::int64_t nan_rows = llmk::test::check_special_values(
          p, q, k, v, o, &lse,
          [&](std::int64_t row, int col) {
            return row == nan_q_row || (row < 20 * heads && row % heads / group == 0 && col == 7);
          },
          [&](std::int64_t row) { return row == nan_q_row; });
      CHECK(nan_rows == 20 * group + 1);
      // The rows that see nothing: exactly 0 (but column 7 of KV head 0), LSE -inf.
      int not_zero = 0, not_neg_inf = 0;
      for (std::int64_t row = 0; row < p.total_q() * heads; ++row) {
        if (row < 20 * heads && row / heads >= 12) continue;  // sequence 0 tokens 12..19 see keys
        not_neg_inf += lse[static_cast<std::size_t>(row)] != -INFINITY;
        for (int col = 0; col < kSpecialDim; ++col)
          if (!(row < 20 * heads && row % heads / group == 0 && col == 7))
            not_zero += o[static_cast<std::size_t>(row * kSpecialDim + col)].to_float() != 0.0f;
      }
      CHECK(not_zero == 0);
      CHECK(not_neg_inf == 0);
    }
  }
  {
    llmk::reference::AttentionProblem p = special_problem({20}, {8}, heads, kv_heads, false);
    p.options.window_left = 3;
    p.options.window_right = 2;  // query i sees keys [i - 15, i - 10]: nothing for i <= 9
    std::vector<f16> q = llmk::test::random_tensor<f16>(p.q_elements(), 1.0f, rng);
    const std::vector<f16> k = llmk::test::random_tensor<f16>(p.kv_elements(), 1.0f, rng);
    const std::vector<f16> v = llmk::test::random_tensor<f16>(p.kv_elements(), 1.0f, rng);
    q[at(3, heads, 0, 2)] = q[at(9, heads, 3, 60)] = q[at(14, heads, 1, 30)] = nan;
    const std::int64_t nan_q_row = 14 * heads + 1;
    for (const PinnedKernel<f16>& kernel : pinned_kernels<f16>(group)) {
      INFO("kernel: " << kernel.name);
      const auto [o, lse] = launch_special(kernel.launch, p, q, k, v);
      const std::int64_t nan_rows = llmk::test::check_special_values(
          p, q, k, v, o, &lse, [&](std::int64_t row, int) { return row == nan_q_row; },
          [&](std::int64_t row) { return row == nan_q_row; });
      CHECK(nan_rows == 1);
      int not_zero = 0, not_neg_inf = 0;
      for (std::int64_t row = 0; row < 10 * heads; ++row) {
        not_neg_inf += lse[static_cast<std::size_t>(row)] != -INFINITY;
        for (int col = 0; col < kSpecialDim; ++col)
          not_zero += o[static_cast<std::size_t>(row * kSpecialDim + col)].to_float() != 0.0f;
      }
      CHECK(not_zero == 0);
      CHECK(not_neg_inf == 0);
    }
  }
}
