// Tests of llmk::attention split-KV decode (plan_decode + decode) against the fp64 reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
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
  // Non-positive blocks or key tile: one split, no division by zero.
  CHECK(attn::choose_decode_splits(0, 4096, 64, 132) == 1);
  CHECK(attn::choose_decode_splits(8, 4096, 0, 132) == 1);
  // The doc example: 8 sequences x 8 KV heads on 132 SMs want ceil(264 / 64) = 5 splits (4096 keys allow 16).
  CHECK(attn::choose_decode_splits(8 * 8, 4096, 64, 132) == 5);
}

TEST_CASE("decode: default_scale is 1 / sqrt(head_dim), 0 for a non-positive head dim") {
  CHECK(attn::default_scale(128) == 1.0f / std::sqrt(128.0f));
  CHECK(attn::default_scale(64) == 0.125f);
  CHECK(attn::default_scale(0) == 0.0f);
  CHECK(attn::default_scale(-3) == 0.0f);
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
  a = good;
  a.kv_lens =
      reinterpret_cast<const int*>(reinterpret_cast<const char*>(d_lens.data()) + 2);  // read as int32
  expect(a, "'kv_lens': must be aligned to its element size");
  // One sequence: the batch stride is unused, so any value passes (the heads' rows are o_stride_head apart).
  a = good;
  a.batch = 1;
  a.o_stride_batch = 0;
  REQUIRE(attn::plan_decode(a, &plan, 2).ok());
  CHECK(attn::decode(a, plan, ws.data(), ws.size(), nullptr).ok());
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

namespace {

// Writes `value` to element d of key t, KV head h, sequence b of K (in_v false) or V: in the device cache and
// in the reference's ragged copy (t must be below the sequence's length).
template <class T>
void plant(Inputs<T>& in, const Case& c, bool in_v, int b, int t, int h, int d, T value) {
  REQUIRE(t < in.lens[b]);
  llmk::DeviceBuffer<T>& dev = in_v ? in.d_v : in.d_k;
  std::vector<T> cache = dev.to_host();
  cache[(static_cast<std::size_t>(b) * in.max_kv + t) * in.token_stride + h * c.dim + d] = value;
  dev.upload(cache);
  std::size_t t0 = 0;
  for (int i = 0; i < b; ++i) t0 += static_cast<std::size_t>(in.lens[i]);
  (in_v ? in.v_ragged : in.k_ragged)[((t0 + t) * c.kv_heads + h) * c.dim + d] = value;
}

// A planted special value and the output it must give: exactly NaN in `col` of heads [head0, head0 +
// heads) of sequence b (col -1: every column, and the LSE NaN too).
struct NanSpot {
  int b, head0, heads, col;
};

// Runs decode with `splits` into fresh (poisoned) output and LSE buffers and checks the NaN pattern of
// `spots` exactly: those elements NaN, every other one finite and within the rule of the reference.
template <class T>
void check_decode_nans(const Case& c, Inputs<T>& in, int splits, const std::vector<NanSpot>& spots) {
  CAPTURE(c.window_left);
  CAPTURE(splits);
  const int batch = static_cast<int>(c.kv_lens.size());
  llmk::DeviceBuffer<T> d_o(static_cast<std::size_t>(batch) * c.heads * c.dim);  // poisoned
  llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(batch) * c.heads);
  const attn::DecodeArgs<T> a = args_of(c, in, d_o.data(), d_lse.data());
  attn::DecodePlan plan;
  REQUIRE(attn::plan_decode(a, &plan, splits).ok());
  REQUIRE(plan.num_splits == splits);
  llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);  // poisoned
  const llmk::Status run = attn::decode(a, plan, ws.data(), plan.workspace_bytes, nullptr);
  REQUIRE_MESSAGE(run.ok(), run.message());
  const std::vector<float> lse = d_lse.to_host();
  auto hit = [&](std::int64_t row, int col, bool lse_only) {
    for (const NanSpot& s : spots)
      if (row / c.heads == s.b && row % c.heads >= s.head0 && row % c.heads < s.head0 + s.heads &&
          (s.col < 0 || (!lse_only && s.col == col)))
        return true;
    return false;
  };
  std::set<std::int64_t> want_rows;
  for (const NanSpot& s : spots)
    for (int h = s.head0; h < s.head0 + s.heads; ++h)
      want_rows.insert(static_cast<std::int64_t>(s.b) * c.heads + h);
  const std::int64_t nan_rows = llmk::test::check_special_values(
      in.p, in.q, in.k_ragged, in.v_ragged, d_o.to_host(), &lse,
      [&](std::int64_t row, int col) { return hit(row, col, false); },
      [&](std::int64_t row) { return hit(row, 0, true); });
  CHECK(nan_rows == static_cast<std::int64_t>(want_rows.size()));
}

// One decode request: its query [heads, dim] and its history [len, kv_heads, dim].
struct Request {
  int len = 0;
  std::vector<f16> q, k, v;
};

Request make_request(int len, const Case& shape, std::mt19937& rng) {
  Request r;
  r.len = len;
  r.q = llmk::test::random_tensor<f16>(static_cast<std::int64_t>(shape.heads) * shape.dim, 1.0f, rng);
  const std::int64_t kv = static_cast<std::int64_t>(len) * shape.kv_heads * shape.dim;
  r.k = llmk::test::random_tensor<f16>(kv, 1.0f, rng);
  r.v = llmk::test::random_tensor<f16>(kv, 1.0f, rng);
  return r;
}

struct BatchOut {
  std::vector<f16> o;  // [batch, heads, dim]
  std::vector<float> lse;
  int splits = 0;
};

// Decodes `reqs` as one batch (dense cache [batch, max_len, kv_heads, dim]) with `splits`; with `check`, also
// against the fp64 reference; with `plan_only`, returns the plan's split count only.
BatchOut decode_batch(const std::vector<const Request*>& reqs, const Case& shape, attn::DecodeSplits splits,
                      bool check = false, bool plan_only = false) {
  const int batch = static_cast<int>(reqs.size()), row = shape.kv_heads * shape.dim;
  const int qrow = shape.heads * shape.dim;
  int max_len = 1;
  for (const Request* r : reqs) max_len = std::max(max_len, r->len);
  std::vector<int> lens;
  std::vector<f16> q, k(static_cast<std::size_t>(batch) * max_len * row, f16(0.0f)), v(k.size(), f16(0.0f));
  std::vector<f16> k_ragged, v_ragged;
  for (int b = 0; b < batch; ++b) {
    const Request& r = *reqs[b];
    lens.push_back(r.len);
    q.insert(q.end(), r.q.begin(), r.q.end());
    std::copy(r.k.begin(), r.k.end(), k.begin() + static_cast<std::ptrdiff_t>(b) * max_len * row);
    std::copy(r.v.begin(), r.v.end(), v.begin() + static_cast<std::ptrdiff_t>(b) * max_len * row);
    k_ragged.insert(k_ragged.end(), r.k.begin(), r.k.end());
    v_ragged.insert(v_ragged.end(), r.v.begin(), r.v.end());
  }
  llmk::DeviceBuffer<f16> d_q(q), d_k(k), d_v(v), d_o(static_cast<std::size_t>(batch) * qrow);
  llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(batch) * shape.heads);
  llmk::DeviceBuffer<int> d_lens(lens);
  attn::DecodeArgs<f16> a;
  a.q = d_q.data();
  a.q_stride_batch = a.o_stride_batch = qrow;
  a.q_stride_head = a.o_stride_head = shape.dim;
  a.k = d_k.data();
  a.v = d_v.data();
  a.k_stride_batch = a.v_stride_batch = static_cast<std::int64_t>(max_len) * row;
  a.k_stride_token = a.v_stride_token = row;
  a.k_stride_head = a.v_stride_head = shape.dim;
  a.o = d_o.data();
  a.lse = d_lse.data();
  a.kv_lens = d_lens.data();
  a.kv_lens_host = lens.data();
  a.max_kv_len = max_len;
  a.batch = batch;
  a.num_heads = shape.heads;
  a.num_kv_heads = shape.kv_heads;
  a.head_dim = shape.dim;
  a.options.softmax_scale = attn::default_scale(shape.dim);
  a.options.window_left = shape.window_left;
  attn::DecodePlan plan;
  const llmk::Status planned = attn::plan_decode(a, &plan, splits);
  REQUIRE_MESSAGE(planned.ok(), planned.message());
  BatchOut out;
  out.splits = plan.num_splits;
  if (plan_only) return out;
  llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);  // poisoned
  const llmk::Status run = attn::decode(a, plan, ws.data(), ws.size(), nullptr);
  REQUIRE_MESSAGE(run.ok(), run.message());
  out.o = d_o.to_host();
  out.lse = d_lse.to_host();
  if (check) {
    llmk::reference::AttentionProblem p;
    p.q_lens.assign(batch, 1);
    p.kv_lens = lens;
    p.num_heads = shape.heads;
    p.num_kv_heads = shape.kv_heads;
    p.head_dim = shape.dim;
    p.options = a.options;
    p.options.causal = true;
    llmk::test::check_attention(p, q, k_ragged, v_ragged, out.o, &out.lse);
  }
  return out;
}

// Sequence b's output and LSE bytes of a batch.
std::vector<unsigned char> bytes_of(const BatchOut& out, int b, const Case& shape) {
  const std::size_t n = static_cast<std::size_t>(shape.heads) * shape.dim;
  std::vector<unsigned char> bytes(n * sizeof(f16) + shape.heads * sizeof(float));
  std::memcpy(bytes.data(), out.o.data() + b * n, n * sizeof(f16));
  std::memcpy(bytes.data() + n * sizeof(f16), out.lse.data() + static_cast<std::size_t>(b) * shape.heads,
              shape.heads * sizeof(float));
  return bytes;
}

}  // namespace

TEST_CASE("decode: batch-invariant splits give a request the same bits in any batch, grid or SM count") {
  std::mt19937 rng(207);
  // Sanitizer builds (LLMK_TEST_FAST): the windowed pass only.
  for (int window : llmk::test::fast() ? std::vector<int>{700} : std::vector<int>{-1, 700}) {
    CAPTURE(window);
    Case shape;  // GQA 8 / 2, head dim 64: 64-key tiles, 512-key splits
    shape.heads = 8;
    shape.kv_heads = 2;
    shape.dim = 64;
    shape.window_left = window;
    // Two requests: 1000 keys (2 splits, 1000 - 299 = 701 visible under the window) and 77 (one split: the
    // direct write path alone, the merge path inside a wider batch); other requests of other lengths.
    const Request a = make_request(1000, shape, rng), b = make_request(77, shape, rng);
    const std::vector<int> others_len =
        llmk::test::fast() ? std::vector<int>{1100, 5} : std::vector<int>{1300, 5, 0, 300, 1537};
    std::vector<Request> others;
    for (int len : others_len) others.push_back(make_request(len, shape, rng));
    const auto invariant = attn::DecodeSplits::batch_invariant();
    const BatchOut a_alone = decode_batch({&a}, shape, invariant),
                   b_alone = decode_batch({&b}, shape, invariant);
    CHECK(a_alone.splits == 2);
    CHECK(b_alone.splits == 1);
    const std::vector<unsigned char> a_bits = bytes_of(a_alone, 0, shape),
                                     b_bits = bytes_of(b_alone, 0, shape);

    // Batches of other sizes and lengths: the grid's split count changes, the two requests' bits do not.
    std::vector<std::vector<const Request*>> batches = {{&b, &a}, {&others[0], &b, &others[1], &a}};
    if (!llmk::test::fast()) batches.push_back({&others[2], &a, &others[3], &b, &others[4]});
    for (std::size_t i = 0; i < batches.size(); ++i) {
      CAPTURE(i);
      const BatchOut out = decode_batch(batches[i], shape, invariant, /*check=*/i == 1);
      for (std::size_t j = 0; j < batches[i].size(); ++j) {
        if (batches[i][j] == &a) CHECK(bytes_of(out, static_cast<int>(j), shape) == a_bits);
        if (batches[i][j] == &b) CHECK(bytes_of(out, static_cast<int>(j), shape) == b_bits);
      }
      CHECK(out.splits >= a_alone.splits);
    }
    // A wider grid than needed (a plan made for longer histories): trailing empty splits change nothing.
    const BatchOut wide = decode_batch({&b, &a}, shape, attn::DecodeSplits::batch_invariant(512, 9));
    CHECK(wide.splits == 9);
    CHECK(bytes_of(wide, 0, shape) == b_bits);
    CHECK(bytes_of(wide, 1, shape) == a_bits);
    // Another SM count (the simulator reports 132 unless LLMK_SIM_SM_COUNT says otherwise): the heuristic's
    // split count follows it, the batch-invariant plan does not.
    BatchOut few_sms;
    [[maybe_unused]] int heuristic_1 = 0;
    {
      const llmk::test::ScopedEnv one_sm("LLMK_SIM_SM_COUNT", "1");
      few_sms = decode_batch({&a}, shape, invariant);
      heuristic_1 = decode_batch({&a}, shape, 0, false, /*plan_only=*/true).splits;
    }
    [[maybe_unused]] const int heuristic_132 = decode_batch({&a}, shape, 0, false, /*plan_only=*/true).splits;
#if defined(LLMK_SIM)  // LLMK_SIM_SM_COUNT moves the simulator only: on a GPU both plans see its SMs
    CHECK(heuristic_1 != heuristic_132);
#endif
    CHECK(few_sms.splits == a_alone.splits);
    CHECK(bytes_of(few_sms, 0, shape) == a_bits);
  }
}

TEST_CASE("decode: batch-invariant plans are validated") {
  llmk::DeviceBuffer<f16> buf(8192);
  attn::DecodeArgs<f16> a;
  a.q = a.k = a.v = buf.data();
  a.o = buf.data() + 4096;
  a.q_stride_head = a.o_stride_head = a.k_stride_head = a.v_stride_head = 64;
  a.q_stride_batch = a.o_stride_batch = 64;
  a.k_stride_token = a.v_stride_token = 64;
  a.max_kv_len = 1000;
  a.batch = 1;
  a.num_heads = a.num_kv_heads = 1;
  a.head_dim = 64;
  a.options.softmax_scale = 0.125f;
  attn::DecodePlan plan;
  REQUIRE(attn::plan_decode(a, &plan, attn::DecodeSplits::batch_invariant()).ok());
  CHECK(plan.num_splits == 2);
  CHECK(plan.keys_per_split == attn::kBatchInvariantKeysPerSplit);
  CHECK(plan.workspace_bytes == 2 * 64 * 4 + 16);
  a.options.window_left = 100;  // 101 visible keys: one split
  REQUIRE(attn::plan_decode(a, &plan, attn::DecodeSplits::batch_invariant(128)).ok());
  CHECK(plan.num_splits == 1);
  CHECK(plan.workspace_bytes == 0);
  a.options.window_left = -1;
  auto message = [&](attn::DecodeSplits s) { return attn::plan_decode(a, &plan, s).message(); };
  CHECK(message(attn::DecodeSplits::batch_invariant(100)).find("multiple of the key tile Bc = 64") !=
        std::string::npos);
  CHECK(message(attn::DecodeSplits::batch_invariant(-64)).find("keys_per_split") != std::string::npos);
  CHECK(message(attn::DecodeSplits::batch_invariant(512, 1)).find("must be in [2, ") != std::string::npos);
  CHECK(message(attn::DecodeSplits::batch_invariant(512, -1)).find("num_splits") != std::string::npos);
  a.max_kv_len = 1 << 30;  // 2^30 / 64 splits: too many
  CHECK(message(attn::DecodeSplits::batch_invariant(64)).find("kMaxBatchInvariantSplits") !=
        std::string::npos);
  a.max_kv_len = 1000;
  // decode() checks that a hand-made plan covers the longest history.
  REQUIRE(attn::plan_decode(a, &plan, attn::DecodeSplits::batch_invariant()).ok());
  llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
  attn::DecodePlan short_plan = plan;
  short_plan.num_splits = 1;
  CHECK(attn::decode(a, short_plan, ws.data(), ws.size(), nullptr).message().find("plan.num_splits") !=
        std::string::npos);
  short_plan = plan;
  short_plan.keys_per_split = 96;
  CHECK(attn::decode(a, short_plan, ws.data(), ws.size(), nullptr).message().find("plan.keys_per_split") !=
        std::string::npos);
}

TEST_CASE("decode: a NaN in K or V at key j reaches exactly the heads that see j, through the split merge") {
  // docs/attention.md, "Special values": NaN in K or V at key j gives NaN in exactly the query heads of that
  // KV head's group (K: the whole row and the LSE; V: that column, the LSE stays finite), only when j is
  // visible; keys before the window are never loaded. 3 splits put each NaN in one split (whole 64-key
  // tiles each): 200 keys in splits [0, 128), [128, 200) and an empty one, 90 keys in [0, 64), [64, 90);
  // with window_left 100, 101 visible keys from the first visible one, in 64-key splits.
  static_assert(attn::DefaultDecodeConfig<64>::kBc == 64, "the splits named here");
  std::mt19937 rng(208);
  Case c;
  c.kv_lens = {200, 150, 90};
  c.heads = 4;
  c.kv_heads = 2;  // heads 0, 1 read KV head 0; heads 2, 3 KV head 1
  c.dim = 64;
  const f16 nan = f16(std::nanf(""));
  {
    Inputs<f16> in = make_inputs<f16>(c, rng);
    plant(in, c, /*in_v=*/false, 0, 120, 1, 5, nan);  // sequence 0, KV head 1: heads 2, 3 (split 0 of 3)
    plant(in, c, /*in_v=*/true, 2, 80, 0, 11, nan);   // sequence 2, KV head 0: column 11 of heads 0, 1
    for (int splits : {1, 3}) check_decode_nans(c, in, splits, {{0, 2, 2, -1}, {2, 0, 2, 11}});
  }
  c.window_left = 100;  // visible: sequence 0 keys [99, 200), sequence 1 [49, 150), sequence 2 [0, 90)
  {
    Inputs<f16> in = make_inputs<f16>(c, rng);
    plant(in, c, /*in_v=*/false, 0, 98, 1, 5, nan);  // one key before the window: never loaded
    plant(in, c, /*in_v=*/true, 1, 48, 0, 9, nan);   // likewise
    plant(in, c, /*in_v=*/false, 1, 49, 1, 3, nan);  // the first visible key: heads 2, 3 of sequence 1
    plant(in, c, /*in_v=*/true, 0, 170, 0, 9, nan);  // split 1 of 3: column 9 of heads 0, 1 of sequence 0
    for (int splits : {1, 3}) check_decode_nans(c, in, splits, {{1, 2, 2, -1}, {0, 0, 2, 9}});
  }
}

TEST_CASE("decode: a row whose visible scores are all -inf gives 0 and LSE -inf; +inf in V gives +inf") {
  // docs/attention.md, "Special values". Query head 0 holds +inf in column 3 and KV head 0's keys are
  // negative there (sequences 0 and 1): every score of head 0 is -inf, so m stays -inf, every p is 0
  // (exp2_shifted), l = 0 and the row is 0 with LSE -inf, as a row that sees no key; head 1 (the same KV
  // head) is finite. V holds +inf at key 70 of KV head 1 (sequence 0, column 9): heads 2, 3 give +inf there
  // (p > 0), their LSE unchanged. Sequence 1 holds +inf at key 40 and NaN at key 60 of KV head 0 (columns 20
  // and 33): head 1 gives +inf and NaN; head 0 (p = 0 at every key) NaN in both (0 * inf, 0 * NaN), with one
  // split or three (the merge keeps a non-finite partial of weight 0: decode_merge_kernel).
  std::mt19937 rng(209);
  Case c;
  c.kv_lens = {150, 90};
  c.heads = 4;
  c.kv_heads = 2;
  c.dim = 64;
  Inputs<f16> in = make_inputs<f16>(c, rng);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<f16> k = in.d_k.to_host();
  std::size_t t0 = 0;
  for (int b = 0; b < 2; ++b) {
    in.q[(static_cast<std::size_t>(b) * c.heads + 0) * c.dim + 3] = f16(inf);
    for (int t = 0; t < in.lens[b]; ++t) {
      f16& kc = k[(static_cast<std::size_t>(b) * in.max_kv + t) * in.token_stride + 3];  // KV head 0
      kc = f16(-std::fabs(kc.to_float()));
      in.k_ragged[(t0 + t) * c.kv_heads * c.dim + 3] = kc;
    }
    t0 += static_cast<std::size_t>(in.lens[b]);
  }
  in.d_q.upload(in.q);
  in.d_k.upload(k);
  plant(in, c, /*in_v=*/true, 0, 70, 1, 9, f16(inf));
  plant(in, c, /*in_v=*/true, 1, 40, 0, 20, f16(inf));
  plant(in, c, /*in_v=*/true, 1, 60, 0, 33, f16(std::nanf("")));
  // The expected classes: rows r = sequence * heads + head.
  enum class Want { kFinite, kZero, kInf, kNan };
  const std::int64_t rows = 2 * c.heads;
  auto all_neg_inf = [&](std::int64_t r) { return r % c.heads == 0; };  // head 0 of both sequences
  auto want = [&](std::int64_t r, int col) {
    if (r == 2 || r == 3) return col == 9 ? Want::kInf : Want::kFinite;
    if (r == c.heads + 1) return col == 20 ? Want::kInf : (col == 33 ? Want::kNan : Want::kFinite);
    if (r == c.heads && (col == 20 || col == 33)) return Want::kNan;
    return all_neg_inf(r) ? Want::kZero : Want::kFinite;
  };
  // The reference (a -inf row would be NaN there: exp(-inf - -inf)) and the rule's bound per row over its
  // finite elements.
  std::vector<double> ref(static_cast<std::size_t>(rows * c.dim)), ref_lse(static_cast<std::size_t>(rows));
  std::vector<float> naive(ref.size());
  llmk::reference::attention_fp64(in.p, in.q.data(), in.k_ragged.data(), in.v_ragged.data(), ref.data(),
                                  ref_lse.data());
  llmk::reference::attention_naive(in.p, in.q.data(), in.k_ragged.data(), in.v_ragged.data(), naive.data());
  std::vector<double> bound(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    double row_naive = 0.0, row_max = 0.0;
    for (int col = 0; col < c.dim; ++col) {
      const std::size_t i = static_cast<std::size_t>(r * c.dim + col);
      if (want(r, col) != Want::kFinite) continue;
      row_naive = std::max(row_naive, std::fabs(static_cast<double>(naive[i]) - ref[i]));
      row_max = std::max(row_max, std::fabs(ref[i]));
    }
    bound[static_cast<std::size_t>(r)] = 2.0 * row_naive + llmk::test::output_floor<f16>(row_max);
  }
  for (int splits : {1, 3}) {
    CAPTURE(splits);
    llmk::DeviceBuffer<f16> d_o(static_cast<std::size_t>(rows) * c.dim);  // poisoned
    llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(rows));
    const attn::DecodeArgs<f16> a = args_of(c, in, d_o.data(), d_lse.data());
    attn::DecodePlan plan;
    REQUIRE(attn::plan_decode(a, &plan, splits).ok());
    REQUIRE(plan.num_splits == splits);
    llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);  // poisoned
    const llmk::Status run = attn::decode(a, plan, ws.data(), plan.workspace_bytes, nullptr);
    REQUIRE_MESSAGE(run.ok(), run.message());
    const std::vector<f16> o = d_o.to_host();
    const std::vector<float> lse = d_lse.to_host();
    int bad = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float g_lse = lse[static_cast<std::size_t>(r)];
      const double r_lse = ref_lse[static_cast<std::size_t>(r)];
      const bool lse_ok = all_neg_inf(r) ? g_lse == -inf
                                         : std::isfinite(r_lse) &&
                                               std::fabs(g_lse - r_lse) <= llmk::test::lse_tolerance(r_lse);
      if (!lse_ok && bad++ < 8)
        MESSAGE("lse[" << r << "] = " << g_lse << ", want " << (all_neg_inf(r) ? -inf : r_lse));
      for (int col = 0; col < c.dim; ++col) {
        const std::size_t i = static_cast<std::size_t>(r * c.dim + col);
        const float g = o[i].to_float();
        bool ok = false;
        switch (want(r, col)) {
          case Want::kZero:
            ok = g == 0.0f;
            break;
          case Want::kInf:
            ok = g == inf;
            break;
          case Want::kNan:
            ok = std::isnan(g);
            break;
          case Want::kFinite:
            ok = std::isfinite(g) && std::isfinite(ref[i]) &&
                 std::fabs(g - ref[i]) <= bound[static_cast<std::size_t>(r)];
            break;
        }
        if (!ok && bad++ < 8) MESSAGE("row " << r << " col " << col << ": got " << g << ", ref " << ref[i]);
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("decode: a +inf score makes the heads that see it NaN; a soft-cap maps it to the cap") {
  // docs/attention.md, "Special values": a +inf score gives 2^(inf - inf) = NaN, the head's row and its LSE;
  // with a soft-cap tanh maps it to the cap: a finite row, the reference's. fp16, window_left 100 (sequence 0
  // sees keys [49, 150), sequence 1 all of its 90): K holds +inf in column 5 at key 70 of KV head 1 (sequence
  // 0; split 1 of 3), where the queries of heads 2, 3 are positive: those heads are NaN; and at key 20 of KV
  // head 0, before the window (never loaded): heads 0, 1 stay finite. Query head 0 of sequence 1 holds +inf
  // in column 3, where keys of KV head 0 are positive: head 0 is NaN. bf16: a finite score past fp32's range
  // is +inf as well: q = k = 1e20 in column 7 (head 3 of sequence 1, its key 30 of KV head 1) sum to 1e40 in
  // the fp32 accumulator, NaN without a soft-cap (the fp64 reference's score stays finite there), the cap's
  // row (the reference's) with one. Column 7 is 0 in the other keys of KV head 1 and in head 2's query: no
  // other score is huge. One split and three.
  std::mt19937 rng(210);
  Case c;
  c.kv_lens = {150, 90};
  c.heads = 4;
  c.kv_heads = 2;
  c.dim = 64;
  c.window_left = 100;
  const float inf = std::numeric_limits<float>::infinity();
  {
    Inputs<f16> in = make_inputs<f16>(c, rng);
    for (int h = 0; h < c.heads; ++h) {  // sequence 0: every query positive in column 5
      f16& x = in.q[static_cast<std::size_t>(h) * c.dim + 5];
      x = f16(std::fabs(x.to_float()));
    }
    in.q[(static_cast<std::size_t>(1) * c.heads + 0) * c.dim + 3] = f16(inf);
    in.d_q.upload(in.q);
    plant(in, c, /*in_v=*/false, 0, 70, 1, 5, f16(inf));
    plant(in, c, /*in_v=*/false, 0, 20, 0, 5, f16(inf));
    int positive = 0;  // keys of sequence 1 positive in column 3 of KV head 0
    for (int t = 0; t < in.lens[1]; ++t) {
      const std::size_t key = static_cast<std::size_t>(in.lens[0]) + t;
      positive += in.k_ragged[(key * c.kv_heads + 0) * c.dim + 3].to_float() > 0.0f;
    }
    REQUIRE(positive > 0);
    for (const float softcap : {0.0f, 30.0f}) {
      CAPTURE(softcap);
      in.p.options.softcap = softcap;
      for (int splits : {1, 3})
        check_decode_nans(
            c, in, splits,
            softcap > 0.0f ? std::vector<NanSpot>{} : std::vector<NanSpot>{{0, 2, 2, -1}, {1, 0, 1, -1}});
    }
  }
  {
    Inputs<bf16> in = make_inputs<bf16>(c, rng);
    in.q[(static_cast<std::size_t>(1) * c.heads + 3) * c.dim + 7] = bf16(1e20f);
    in.q[(static_cast<std::size_t>(1) * c.heads + 2) * c.dim + 7] = bf16(0.0f);
    in.d_q.upload(in.q);
    for (int t = 0; t < in.lens[1]; ++t)
      plant(in, c, /*in_v=*/false, 1, t, 1, 7, bf16(t == 30 ? 1e20f : 0.0f));
    for (const float softcap : {0.0f, 30.0f}) {
      CAPTURE(softcap);
      in.p.options.softcap = softcap;
      for (int splits : {1, 3})
        check_decode_nans(c, in, splits,
                          softcap > 0.0f ? std::vector<NanSpot>{} : std::vector<NanSpot>{{1, 3, 1, -1}});
    }
  }
}
