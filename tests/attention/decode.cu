// Tests of llmk::attention split-KV decode (plan_decode + decode) against the fp64 reference.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attention/attention_check.hpp"
#include "llmk/attention/decode.cuh"
#include "llmk/core/memory.cuh"
#include "support/test_env.hpp"

namespace {

using bf16 = llmk::bfloat16;
using f16 = llmk::half;
namespace attn = llmk::attention;

struct Case {
  std::vector<int> kv_lens;  // per sequence (the batch)
  int heads = 4, kv_heads = 2, dim = 128;
  int max_kv_len = 0;  // 0: max of kv_lens
  int window_left = -1;
  float softcap = 0.0f;
  float magnitude = 1.0f;
  bool use_kv_lens = true;  // false: every sequence has max_kv_len keys
};

struct Result {
  std::vector<float> o, lse;
  int splits;
};

template <class T>
struct Inputs {
  llmk::reference::AttentionProblem p;
  std::vector<T> q, k_ragged, v_ragged;  // reference layout
  llmk::DeviceBuffer<T> d_q, d_k, d_v;   // decode layout: K/V [B, max_kv, Hkv, D] with a padded token stride
  llmk::DeviceBuffer<int> d_lens;
  std::vector<int> lens;
  int max_kv = 0, token_stride = 0;
};

template <class T>
Inputs<T> make_inputs(const Case& c, std::mt19937& rng) {
  Inputs<T> in;
  const int batch = static_cast<int>(c.kv_lens.size());
  in.lens = c.kv_lens;
  in.max_kv = c.max_kv_len;
  for (int len : c.kv_lens) in.max_kv = std::max(in.max_kv, len);
  if (!c.use_kv_lens) in.lens.assign(batch, in.max_kv);
  in.p.q_lens.assign(batch, 1);
  in.p.kv_lens = in.lens;
  in.p.num_heads = c.heads;
  in.p.num_kv_heads = c.kv_heads;
  in.p.head_dim = c.dim;
  in.p.options.softmax_scale = attn::default_scale(c.dim);
  in.p.options.softcap = c.softcap;
  in.p.options.causal = true;  // the query is the last token: causal changes nothing
  in.p.options.window_left = c.window_left;
  in.q = llmk::test::random_tensor<T>(in.p.q_elements(), c.magnitude, rng);
  in.token_stride = c.kv_heads * c.dim + 8;  // a padded cache row
  const std::size_t cache = static_cast<std::size_t>(batch) * in.max_kv * in.token_stride;
  const std::vector<T> k = llmk::test::random_tensor<T>(static_cast<std::int64_t>(cache), c.magnitude, rng);
  const std::vector<T> v = llmk::test::random_tensor<T>(static_cast<std::int64_t>(cache), 1.0f, rng);
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < in.lens[b]; ++t)
      for (int h = 0; h < c.kv_heads; ++h)
        for (int d = 0; d < c.dim; ++d) {
          const std::size_t src =
              (static_cast<std::size_t>(b) * in.max_kv + t) * in.token_stride + h * c.dim + d;
          in.k_ragged.push_back(k[src]);
          in.v_ragged.push_back(v[src]);
        }
  in.d_q = llmk::DeviceBuffer<T>(in.q);
  in.d_k = llmk::DeviceBuffer<T>(k);
  in.d_v = llmk::DeviceBuffer<T>(v);
  in.d_lens = llmk::DeviceBuffer<int>(in.lens);
  return in;
}

template <class T>
attn::DecodeArgs<T> args_of(const Case& c, Inputs<T>& in, T* o, float* lse) {
  attn::DecodeArgs<T> a;
  a.q = in.d_q.data();
  a.q_stride_batch = static_cast<std::int64_t>(c.heads) * c.dim;
  a.q_stride_head = c.dim;
  a.k = in.d_k.data();
  a.v = in.d_v.data();
  a.k_stride_batch = a.v_stride_batch = static_cast<std::int64_t>(in.max_kv) * in.token_stride;
  a.k_stride_token = a.v_stride_token = in.token_stride;
  a.k_stride_head = a.v_stride_head = c.dim;
  a.o = o;
  a.o_stride_batch = static_cast<std::int64_t>(c.heads) * c.dim;
  a.o_stride_head = c.dim;
  a.lse = lse;
  if (c.use_kv_lens) {
    a.kv_lens = in.d_lens.data();
    a.kv_lens_host = in.lens.data();
  }
  a.max_kv_len = in.max_kv;
  a.batch = static_cast<int>(c.kv_lens.size());
  a.num_heads = c.heads;
  a.num_kv_heads = c.kv_heads;
  a.head_dim = c.dim;
  a.options = in.p.options;
  a.options.causal = false;
  return a;
}

// Runs decode with `splits` (0: heuristic) and checks it against the reference; returns the output.
template <class T>
std::vector<T> run_decode(const Case& c, Inputs<T>& in, int splits) {
  CAPTURE(c.dim);
  CAPTURE(c.heads);
  CAPTURE(c.kv_heads);
  CAPTURE(c.window_left);
  CAPTURE(c.softcap);
  CAPTURE(splits);
  const int batch = static_cast<int>(c.kv_lens.size());
  llmk::DeviceBuffer<T> d_o(static_cast<std::size_t>(batch) * c.heads * c.dim);
  llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(batch) * c.heads);
  const attn::DecodeArgs<T> a = args_of(c, in, d_o.data(), d_lse.data());
  attn::DecodePlan plan;
  llmk::Status s = attn::plan_decode(a, &plan, splits);
  REQUIRE_MESSAGE(s.ok(), s.message());
  if (splits > 0) CHECK(plan.num_splits == splits);
  INFO("splits " << plan.num_splits << ", workspace " << plan.workspace_bytes);
  llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);  // poisoned
  const llmk::Status run = attn::decode(a, plan, ws.data(), plan.workspace_bytes, nullptr);
  REQUIRE_MESSAGE(run.ok(), run.message());
  REQUIRE(llmk::device_synchronize().ok());
  const std::vector<T> got = d_o.to_host();
  const std::vector<float> lse = d_lse.to_host();
  llmk::test::check_attention(in.p, in.q, in.k_ragged, in.v_ragged, got, &lse);
  return got;
}

// Splits {1, several, heuristic} each meet the tolerance and agree with each other to fp32 rounding.
template <class T>
void run_all_splits(const Case& c, std::mt19937& rng, std::vector<int> split_counts) {
  Inputs<T> in = make_inputs<T>(c, rng);
  const std::vector<T> one = run_decode(c, in, 1);
  for (int splits : split_counts) {
    const std::vector<T> many = run_decode(c, in, splits);
    double diff = 0.0;
    for (std::size_t i = 0; i < one.size(); ++i)
      diff = std::max(diff, static_cast<double>(std::fabs(one[i].to_float() - many[i].to_float())));
    INFO("splits " << splits << " vs 1: max difference " << diff);
    // Only the summation order differs; two roundings of the output to T at |o| <= 1 at most.
    CHECK(diff <= 2.0 * (std::is_same_v<T, f16> ? 0x1p-10 : 0x1p-7));
  }
}

}  // namespace

TEST_CASE("decode: kv lengths 1..2000, splits 1 / several / heuristic, GQA") {
  std::mt19937 rng(201);
  Case c;
  c.kv_lens = llmk::test::fast() ? std::vector<int>{1, 65, 200} : std::vector<int>{1, 7, 63, 200, 513, 2000};
  run_all_splits<f16>(c, rng, {3, 7, 0});
  c.kv_heads = 4;  // MHA
  run_all_splits<bf16>(c, rng, {5});
}

TEST_CASE("decode: every runtime head dim, GQA ratios 1, 4, 8, fp16 and bf16") {
  std::mt19937 rng(202);
  for (int dim : {64, 96, 128, 256})
    for (int kv_heads : {8, 2, 1}) {
      Case c;
      c.kv_lens = {llmk::test::pick(300, 70), 129};
      c.dim = dim;
      c.heads = 8;
      c.kv_heads = kv_heads;
      if (kv_heads == 2)
        run_all_splits<bf16>(c, rng, {4});
      else
        run_all_splits<f16>(c, rng, {2});
    }
}

TEST_CASE("decode: groups larger than one 16-row tile (32 and 20 query heads on one KV head)") {
  std::mt19937 rng(203);
  Case c;
  c.kv_lens = {100, 37};
  c.dim = 64;
  c.heads = 32;
  c.kv_heads = 1;
  run_all_splits<f16>(c, rng, {3});
  c.heads = 20;  // the second head tile holds 4 heads
  run_all_splits<f16>(c, rng, {2});
}

TEST_CASE("decode: sliding window, soft-cap, large magnitudes, empty and uniform sequences") {
  std::mt19937 rng(204);
  Case c;
  c.kv_lens = {300, 17, 1};
  c.window_left = 40;
  run_all_splits<f16>(c, rng, {4});
  c.window_left = -1;
  c.softcap = 20.0f;
  c.magnitude = 4.0f;
  run_all_splits<bf16>(c, rng, {3});
  c.softcap = 0.0f;
  c.magnitude = 8.0f;  // scores about +-60
  run_all_splits<f16>(c, rng, {3});
  c.magnitude = 1.0f;
  c.kv_lens = {0, 50, 0};  // empty histories: zero rows, LSE -inf
  run_all_splits<f16>(c, rng, {2});
  c.kv_lens = {90, 90};
  c.use_kv_lens = false;
  run_all_splits<f16>(c, rng, {2});
}

TEST_CASE("decode: custom head dim 80 by explicit instantiation") {
  std::mt19937 rng(205);
  Case c;
  c.kv_lens = {150, 33};
  c.dim = 80;
  Inputs<f16> in = make_inputs<f16>(c, rng);
  for (int splits : {1, 3}) {
    llmk::DeviceBuffer<f16> d_o(2 * c.heads * c.dim);
    llmk::DeviceBuffer<float> d_lse(2 * c.heads);
    const attn::DecodeArgs<f16> a = args_of(c, in, d_o.data(), d_lse.data());
    using Cfg = attn::DefaultDecodeConfig<80>;
    attn::DecodePlan plan;
    CHECK(attn::plan_decode(a, &plan, splits).message().find("DefaultDecodeConfig<80>") != std::string::npos);
    REQUIRE(attn::plan_decode_with_config<f16, Cfg>(a, &plan, splits).ok());
    llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
    const llmk::Status s = attn::decode_with_config<f16, Cfg>(a, plan, ws.data(), ws.size(), nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
    const std::vector<float> lse = d_lse.to_host();
    llmk::test::check_attention(in.p, in.q, in.k_ragged, in.v_ragged, d_o.to_host(), &lse);
  }
}

TEST_CASE("decode: the split heuristic") {
  // Small batches over long histories split; a full GPU does not; short histories are not cut below 4 tiles.
  CHECK(attn::choose_decode_splits(1 * 8, 32768, 64, 132) == 33);
  CHECK(attn::choose_decode_splits(128 * 8, 32768, 64, 132) == 1);
  CHECK(attn::choose_decode_splits(1 * 8, 512, 64, 132) == 2);
  CHECK(attn::choose_decode_splits(1, 1 << 20, 64, 132) == attn::kMaxDecodeSplits);
  CHECK(attn::choose_decode_splits(1, 1 << 20, 64, 132) <= attn::kMaxDecodeSplits);
  CHECK(attn::choose_decode_splits(4, 0, 64, 132) == 1);
}

TEST_CASE("decode: bad arguments are rejected with the rule that failed") {
  llmk::DeviceBuffer<f16> buf(8192);
  const int lens_host[] = {10, 20};
  llmk::DeviceBuffer<int> d_lens(std::vector<int>{10, 20});
  attn::DecodeArgs<f16> good;
  good.q = good.k = good.v = buf.data();
  good.o = buf.data() + 4096;
  good.q_stride_batch = good.o_stride_batch = 128;
  good.q_stride_head = good.o_stride_head = 64;
  good.k_stride_batch = good.v_stride_batch = 32 * 64;
  good.k_stride_token = good.v_stride_token = 64;
  good.k_stride_head = good.v_stride_head = 64;
  good.kv_lens = d_lens.data();
  good.kv_lens_host = lens_host;
  good.max_kv_len = 32;
  good.batch = 2;
  good.num_heads = 2;
  good.num_kv_heads = 1;
  good.head_dim = 64;
  good.options.softmax_scale = 0.125f;
  attn::DecodePlan plan;
  REQUIRE(attn::plan_decode(good, &plan, 2).ok());
  llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
  REQUIRE(attn::decode(good, plan, ws.data(), ws.size(), nullptr).ok());

  auto expect = [&](const attn::DecodeArgs<f16>& a, const char* needle) {
    attn::DecodePlan p2;
    const llmk::Status planned = attn::plan_decode(a, &p2, 2);
    const llmk::Status s = planned.ok() ? attn::decode(a, plan, ws.data(), ws.size(), nullptr) : planned;
    CHECK_FALSE(s.ok());
    INFO(s.message());
    CHECK(s.message().find(needle) != std::string::npos);
  };
  attn::DecodeArgs<f16> a = good;
  a.head_dim = 72;
  expect(a, "head_dim");
  a = good;
  a.num_heads = 3;
  a.num_kv_heads = 2;
  expect(a, "multiple of num_kv_heads");
  a = good;
  a.v = buf.data() + 4;
  expect(a, "16-byte aligned");
  a = good;
  a.o = nullptr;
  expect(a, "must not be null");
  a = good;
  a.kv_lens_host = nullptr;
  expect(a, "kv_lens_host");
  a = good;
  const int too_long[] = {10, 40};
  a.kv_lens_host = too_long;
  expect(a, "max_kv_len");
  a = good;
  const int negative[] = {-1, 4};
  a.kv_lens_host = negative;
  expect(a, "kv_lens");
  a = good;
  a.max_kv_len = -3;
  expect(a, "max_kv_len");
  a = good;
  a.k_stride_token = 12;
  expect(a, "k_stride_token");
  a = good;
  a.options.softcap = -1.0f;
  expect(a, "softcap");
  a = good;
  a.o_stride_batch = 8;  // head-major needs stride_batch >= head_dim: these rows overlap
  expect(a, "overlap");
  // The heuristic counts only the keys a sliding window lets through.
  a = good;
  a.batch = 1;
  a.max_kv_len = 100000;  // planning reads no memory
  a.kv_lens = nullptr;
  REQUIRE(attn::plan_decode(a, &plan, 0).ok());
  CHECK(plan.num_splits == attn::kMaxDecodeSplits);
  a.options.window_left = 50;
  REQUIRE(attn::plan_decode(a, &plan, 0).ok());
  CHECK(plan.num_splits == 1);
  CHECK(attn::plan_decode(good, &plan, attn::kMaxDecodeSplits + 1).message().find("num_splits") !=
        std::string::npos);
  CHECK(attn::plan_decode(good, nullptr, 1).message().find("plan") != std::string::npos);
  REQUIRE(attn::plan_decode(good, &plan, 4).ok());
  CHECK(attn::decode(good, plan, nullptr, 0, nullptr).message().find("workspace") != std::string::npos);
  CHECK(attn::decode(good, plan, ws.data(), plan.workspace_bytes - 4, nullptr)
            .message()
            .find("workspace_bytes") != std::string::npos);
}

TEST_CASE("decode: a custom configuration (2 warps, 4-stage ring)") {
  std::mt19937 rng(206);
  Case c;
  c.kv_lens = {500, 31, 160};
  c.dim = 64;
  using Cfg = attn::DecodeConfig<64, 2, 4>;
  Inputs<f16> in = make_inputs<f16>(c, rng);
  for (int splits : {1, 3}) {
    llmk::DeviceBuffer<f16> d_o(3 * c.heads * c.dim);
    llmk::DeviceBuffer<float> d_lse(3 * c.heads);
    const attn::DecodeArgs<f16> a = args_of(c, in, d_o.data(), d_lse.data());
    attn::DecodePlan plan;
    REQUIRE(attn::plan_decode_with_config<f16, Cfg>(a, &plan, splits).ok());
    llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
    const llmk::Status s = attn::decode_with_config<f16, Cfg>(a, plan, ws.data(), ws.size(), nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
    const std::vector<float> lse = d_lse.to_host();
    llmk::test::check_attention(in.p, in.q, in.k_ragged, in.v_ragged, d_o.to_host(), &lse);
  }
}
