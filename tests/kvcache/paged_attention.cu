// Tests of the paged KV cache kernels: append_kv / copy_pages, and paged decode / paged (chunked) prefill,
// which must equal the dense kernels bit for bit on the same logical data (same tiles, same order) and the
// fp64 reference within the attention tolerance; both table forms and both page layouts give identical
// results.
//
// This program compiles only the head dims it runs through the runtime launchers (LLMK_ATTENTION_HEAD_DIMS,
// docs/attention.md): the dispatch over 64/96/128/256 is tested in tests/attention/; here each dtype and
// cache type would otherwise instantiate four decode, four mma.sync prefill and four Hopper prefill kernels,
// twice the compile time of the whole program.
#define LLMK_ATTENTION_HEAD_DIMS 64, 128
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "attention/attention_check.hpp"
#include "llmk/attention/decode.cuh"
#include "llmk/attention/prefill.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/kvcache/cache_ops.cuh"
#include "llmk/kvcache/paged_kv.cuh"
#include "llmk/reference/quant.hpp"
#include "support/test_env.hpp"

namespace {

namespace attn = llmk::attention;
namespace kv = llmk::kvcache;
using f16 = llmk::half;
using bf16 = llmk::bfloat16;

struct Setup {
  std::vector<int> lens;  // keys per sequence
  int heads = 4, kv_heads = 2, dim = 64, page_size = 16;
  int shared_prefix = 0;  // sequence 1 starts with sequence 0's first `shared_prefix` tokens, in shared pages
  bool hnd = false;
};

// A paged cache holding the logical K/V of every sequence, and the same data densely.
template <class T>
struct Cache {
  Setup s;
  std::vector<int> kv_begin;  // ragged offsets
  std::vector<T> k, v;        // ragged [total, kv_heads, dim] (reference layout)
  kv::CsrPageTable csr;
  kv::BlockTable table;
  int num_pages = 0;
  kv::PageStrides strides;
  llmk::DeviceBuffer<T> k_pool, v_pool;
  llmk::DeviceBuffer<int> d_indptr, d_indices, d_last, d_table, d_lens;

  kv::PagedKv<T> view(bool csr_form) const {
    kv::PagedKv<T> p;
    p.k_pages = k_pool.data();
    p.v_pages = v_pool.data();
    p.strides = strides;
    p.page_size = s.page_size;
    p.num_pages = num_pages;
    if (csr_form) {
      p.page_indptr = d_indptr.data();
      p.page_indices = d_indices.data();
      p.last_page_len = d_last.data();
      p.page_indptr_host = csr.indptr.data();
      p.last_page_len_host = csr.last_page_len.data();
    } else {
      p.block_table = d_table.data();
      p.max_blocks_per_seq = table.max_blocks;
      p.seq_lens = d_lens.data();
      p.seq_lens_host = table.seq_lens.data();
    }
    return p;
  }
};

// Writes the logical K/V of every token through append_kv into Code pools (slot -1 skips a token).
template <class T, class Code>
void write_tokens(const std::vector<T>& k, const std::vector<T>& v, const Setup& s,
                  const kv::PageStrides& strides, int num_pages, const std::vector<std::int64_t>& slots,
                  Code* k_pool, Code* v_pool, kv::KvScale mode = kv::KvScale::kNone,
                  float* k_scales = nullptr, float* v_scales = nullptr) {
  if (slots.empty()) return;
  llmk::DeviceBuffer<T> d_k(k), d_v(v);
  llmk::DeviceBuffer<std::int64_t> d_slots(slots);
  kv::AppendArgs<T, Code> a;
  a.k = d_k.data();
  a.v = d_v.data();
  a.k_stride_token = a.v_stride_token = static_cast<std::int64_t>(s.kv_heads) * s.dim;
  a.k_stride_head = a.v_stride_head = s.dim;
  a.slot_mapping = d_slots.data();
  a.num_tokens = static_cast<int>(slots.size());
  a.kv_heads = s.kv_heads;
  a.head_dim = s.dim;
  a.k_pages = k_pool;
  a.v_pages = v_pool;
  a.strides = strides;
  a.page_size = s.page_size;
  a.num_pages = num_pages;
  a.scale_mode = mode;
  a.k_scales = k_scales;
  a.v_scales = v_scales;
  const llmk::Status st = kv::append_kv(a, nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
}

// `plant(c)`, when given, changes c.k / c.v (special values) after they are drawn and before sequence 1's
// shared prefix is copied from sequence 0 and the pools are written.
template <class T, class Plant = std::nullptr_t>
void make_cache(Cache<T>& c, const Setup& s, std::mt19937& rng, Plant plant = nullptr) {
  c.s = s;
  const int batch = static_cast<int>(s.lens.size()), row = s.kv_heads * s.dim;
  c.kv_begin.assign(batch + 1, 0);
  for (int b = 0; b < batch; ++b) c.kv_begin[b + 1] = c.kv_begin[b] + s.lens[b];
  c.k = llmk::test::random_tensor<T>(static_cast<std::int64_t>(c.kv_begin[batch]) * row, 1.0f, rng);
  c.v = llmk::test::random_tensor<T>(static_cast<std::int64_t>(c.kv_begin[batch]) * row, 1.0f, rng);
  if constexpr (!std::is_same_v<Plant, std::nullptr_t>) plant(c);
  // Only whole pages are shared, and only as many as both sequences have.
  const int shared_pages = batch < 2 ? 0 : std::min({s.shared_prefix, s.lens[0], s.lens[1]}) / s.page_size;
  for (int t = 0; t < shared_pages * s.page_size; ++t)
    for (int e = 0; e < row; ++e) {
      c.k[(c.kv_begin[1] + t) * row + e] = c.k[t * row + e];
      c.v[(c.kv_begin[1] + t) * row + e] = c.v[t * row + e];
    }
  // Pages: a shuffled pool with spare pages; sequence 1 reuses sequence 0's first pages.
  int needed = 0;
  for (int len : s.lens) needed += llmk::ceil_div(len, s.page_size);
  c.num_pages = needed + 5;
  std::vector<int> ids(c.num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  int next = 0;
  c.csr.indptr.assign(batch + 1, 0);
  c.csr.last_page_len.assign(batch, 0);
  for (int b = 0; b < batch; ++b) {
    const int pages = llmk::ceil_div(s.lens[b], s.page_size);
    for (int i = 0; i < pages; ++i)
      c.csr.indices.push_back(b == 1 && i < shared_pages ? c.csr.indices[i] : ids[next++]);
    c.csr.indptr[b + 1] = c.csr.indptr[b] + pages;
    c.csr.last_page_len[b] = pages == 0 ? 0 : s.lens[b] - (pages - 1) * s.page_size;
  }
  llmk::throw_if_error(kv::csr_to_block_table(c.csr, s.page_size, &c.table));
  c.strides = s.hnd ? kv::make_hnd_strides(s.page_size, s.kv_heads, s.dim)
                    : kv::make_nhd_strides(s.page_size, s.kv_heads, s.dim);
  c.k_pool = llmk::DeviceBuffer<T>(static_cast<std::size_t>(c.num_pages) * c.strides.page);  // poisoned
  c.v_pool = llmk::DeviceBuffer<T>(static_cast<std::size_t>(c.num_pages) * c.strides.page);
  // Write every token through append_kv (the shared prefix of sequence 1 is skipped with slot -1).
  std::vector<std::int64_t> slots;
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < s.lens[b]; ++t) {
      const bool shared = b == 1 && t < shared_pages * s.page_size;
      const int page = c.csr.indices[c.csr.indptr[b] + t / s.page_size];
      slots.push_back(shared ? -1 : static_cast<std::int64_t>(page) * s.page_size + t % s.page_size);
    }
  write_tokens<T, T>(c.k, c.v, s, c.strides, c.num_pages, slots, c.k_pool.data(), c.v_pool.data());
  c.d_indptr = llmk::DeviceBuffer<int>(c.csr.indptr);
  c.d_indices = llmk::DeviceBuffer<int>(c.csr.indices.empty() ? std::vector<int>{0} : c.csr.indices);
  c.d_last = llmk::DeviceBuffer<int>(c.csr.last_page_len);
  c.d_table = llmk::DeviceBuffer<int>(c.table.table);
  c.d_lens = llmk::DeviceBuffer<int>(c.table.seq_lens);
}

// Causal prefill arguments for chunks of new tokens (cu_seqlens_q) of every sequence of a Setup; K/V unset.
template <class T>
attn::PrefillArgs<T> chunk_args(const Setup& s, const T* q, T* o, const int* d_cu_q, const int* cu_q) {
  attn::PrefillArgs<T> a;
  a.q = q;
  a.o = o;
  a.q_stride_token = a.o_stride_token = static_cast<std::int64_t>(s.heads) * s.dim;
  a.q_stride_head = a.o_stride_head = s.dim;
  a.cu_seqlens_q = d_cu_q;
  a.cu_seqlens_q_host = cu_q;
  a.batch = static_cast<int>(s.lens.size());
  a.num_heads = s.heads;
  a.num_kv_heads = s.kv_heads;
  a.head_dim = s.dim;
  a.options.softmax_scale = attn::default_scale(s.dim);
  a.options.causal = true;
  return a;
}

// The same arguments reading dense ragged K/V [total, kv_heads, dim] (cu_k: the sequences' key offsets).
template <class T>
attn::PrefillArgs<T> with_dense_kv(attn::PrefillArgs<T> a, const Setup& s, const T* k, const T* v,
                                   const int* d_cu_k, const int* cu_k) {
  a.k = k;
  a.v = v;
  a.k_stride_token = a.v_stride_token = static_cast<std::int64_t>(s.kv_heads) * s.dim;
  a.k_stride_head = a.v_stride_head = s.dim;
  a.cu_seqlens_k = d_cu_k;
  a.cu_seqlens_k_host = cu_k;
  return a;
}

// Every token's row read back from the pools equals what was written (exact).
template <class T>
void check_read_back(const Cache<T>& c) {
  const std::vector<T> kp = c.k_pool.to_host(), vp = c.v_pool.to_host();
  const int row = c.s.kv_heads * c.s.dim;
  int bad = 0;
  for (std::size_t b = 0; b < c.s.lens.size(); ++b)
    for (int t = 0; t < c.s.lens[b]; ++t) {
      const int page = c.csr.indices[c.csr.indptr[b] + t / c.s.page_size], slot = t % c.s.page_size;
      for (int h = 0; h < c.s.kv_heads; ++h)
        for (int d = 0; d < c.s.dim; ++d) {
          const std::int64_t at = page * c.strides.page + slot * c.strides.slot + h * c.strides.head + d;
          const std::int64_t want = (c.kv_begin[b] + t) * static_cast<std::int64_t>(row) + h * c.s.dim + d;
          bad += kp[at].bits != c.k[want].bits || vp[at].bits != c.v[want].bits;
        }
    }
  CHECK(bad == 0);
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].bits != b[i].bits) return false;
  return true;
}

// The reference problem of a decode step over `s`: one query per sequence, the default scale.
llmk::reference::AttentionProblem decode_problem(const Setup& s) {
  llmk::reference::AttentionProblem p;
  p.q_lens.assign(s.lens.size(), 1);
  p.kv_lens = s.lens;
  p.num_heads = s.heads;
  p.num_kv_heads = s.kv_heads;
  p.head_dim = s.dim;
  p.options.softmax_scale = attn::default_scale(s.dim);
  return p;
}

// Decode arguments for `s`: one query token per sequence, q and o [batch, heads, dim], lse [batch, heads].
template <class T>
attn::DecodeArgs<T> decode_args(const Setup& s, const T* q, T* o, float* lse) {
  attn::DecodeArgs<T> a;
  a.q = q;
  a.q_stride_batch = a.o_stride_batch = static_cast<std::int64_t>(s.heads) * s.dim;
  a.q_stride_head = a.o_stride_head = s.dim;
  a.o = o;
  a.lse = lse;
  a.batch = static_cast<int>(s.lens.size());
  a.num_heads = s.heads;
  a.num_kv_heads = s.kv_heads;
  a.head_dim = s.dim;
  a.options.softmax_scale = attn::default_scale(s.dim);
  return a;
}

// Decode over the cache: form 0 dense [batch, max_len, kv_heads, dim], 1 paged CSR, 2 paged block table.
template <class T>
std::vector<T> run_decode(const Cache<T>& c, const std::vector<T>& q, int splits, int form,
                          std::vector<float>* lse_out) {
  const Setup& s = c.s;
  const int batch = static_cast<int>(s.lens.size());
  llmk::DeviceBuffer<T> d_q(q), d_o(static_cast<std::size_t>(batch) * s.heads * s.dim);
  llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(batch) * s.heads);
  attn::DecodeArgs<T> a = decode_args<T>(s, d_q.data(), d_o.data(), d_lse.data());
  attn::DecodePlan plan;
  llmk::DeviceBuffer<T> dk, dv;
  llmk::DeviceBuffer<int> dl;
  const llmk::Status st = [&]() -> llmk::Status {
    if (form == 0) {
      const int max_len = std::max(1, *std::max_element(s.lens.begin(), s.lens.end()));
      const int row = s.kv_heads * s.dim;
      // Rows past a sequence's length are NaN: a key read there would show in every output of its head.
      const T nan = T(std::numeric_limits<float>::quiet_NaN());
      std::vector<T> k(static_cast<std::size_t>(batch) * max_len * row, nan), v(k.size(), nan);
      for (int b = 0; b < batch; ++b)
        for (int t = 0; t < s.lens[b]; ++t)
          for (int e = 0; e < row; ++e) {
            k[(static_cast<std::size_t>(b) * max_len + t) * row + e] = c.k[(c.kv_begin[b] + t) * row + e];
            v[(static_cast<std::size_t>(b) * max_len + t) * row + e] = c.v[(c.kv_begin[b] + t) * row + e];
          }
      dk = llmk::DeviceBuffer<T>(k);
      dv = llmk::DeviceBuffer<T>(v);
      dl = llmk::DeviceBuffer<int>(s.lens);
      a.k = dk.data();
      a.v = dv.data();
      a.k_stride_batch = a.v_stride_batch = static_cast<std::int64_t>(max_len) * row;
      a.k_stride_token = a.v_stride_token = row;
      a.k_stride_head = a.v_stride_head = s.dim;
      a.kv_lens = dl.data();
      a.kv_lens_host = s.lens.data();
      a.max_kv_len = max_len;
      REQUIRE(attn::plan_decode(a, &plan, splits).ok());
      llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
      return attn::decode(a, plan, ws.data(), ws.size(), nullptr);
    } else {
      const kv::PagedKv<T> pages = c.view(form == 1);
      REQUIRE(attn::plan_decode_paged(a, pages, &plan, splits).ok());
      llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
      return attn::decode_paged(a, pages, plan, ws.data(), ws.size(), nullptr);
    }
  }();
  REQUIRE_MESSAGE(st.ok(), st.message());
  if (lse_out != nullptr) *lse_out = d_lse.to_host();
  return d_o.to_host();
}

// Decodes q over the dense cache and both paged table forms; the three must agree bit for bit (outputs and
// LSEs, NaN payloads included). Returns the CSR form's output and LSE.
template <class T>
std::vector<T> decode_all_forms(const Cache<T>& c, const std::vector<T>& q, int splits,
                                std::vector<float>* lse) {
  std::vector<float> lse_dense, lse_table;
  const auto dense = run_decode(c, q, splits, 0, &lse_dense);
  const auto csr = run_decode(c, q, splits, 1, lse);
  const auto table = run_decode(c, q, splits, 2, &lse_table);
  CHECK(same_bits(dense, csr));
  CHECK(same_bits(dense, table));
  REQUIRE(lse->size() == lse_dense.size());
  CHECK(std::memcmp(lse_dense.data(), lse->data(), lse_dense.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(lse_dense.data(), lse_table.data(), lse_dense.size() * sizeof(float)) == 0);
  return csr;
}

template <class T>
void check_decode(const Setup& s, std::mt19937& rng, int splits) {
  CAPTURE(s.page_size);
  CAPTURE(s.hnd);
  CAPTURE(s.shared_prefix);
  CAPTURE(splits);
  Cache<T> c;
  make_cache<T>(c, s, rng);
  check_read_back(c);
  const int batch = static_cast<int>(s.lens.size());
  const std::vector<T> q =
      llmk::test::random_tensor<T>(static_cast<std::int64_t>(batch) * s.heads * s.dim, 1.0f, rng);
  std::vector<float> lse;
  const std::vector<T> out = decode_all_forms(c, q, splits, &lse);
  const llmk::reference::AttentionProblem p = decode_problem(s);
  llmk::test::check_attention(p, q, c.k, c.v, out, &lse);
}

}  // namespace

TEST_CASE("append_kv then read back; paged decode == dense decode bit for bit, both table forms") {
  std::mt19937 rng(601);
  const std::vector<int> page_sizes =
      llmk::test::fast() ? std::vector<int>{1, 16} : std::vector<int>{1, 3, 8, 16, 128};
  for (int ps : page_sizes) {
    Setup s;
    s.lens = {ps * 3 + 1, ps * 2 + (ps > 1 ? ps / 2 : 0), 0, 37};  // mid-page ends and an empty sequence
    s.page_size = ps;
    s.shared_prefix = ps * 2;  // sequence 1 shares sequence 0's first two pages
    check_decode<f16>(s, rng, 1);
    check_decode<f16>(s, rng, 3);
  }
}

// Head dim 128 (this program's other runtime head dim besides 64): the dispatch's kernels (on sm_90 the
// Hopper kernel, whose producer gathers a page row with 4 threads, each every 4th 16-byte chunk) at page size
// 3 (the rows of a 128-key tile on many pages, a short last page): paged == dense bit for bit, output and
// LSE.
namespace {

// The head-dim-128 chunk of the two tests below: sequences of 150 and 37 keys in pages of 3, a 7-token chunk
// at the end of each (their last 7 tokens), fp16; `paged` writes o_paged and lse_paged.
struct ChunkD128 {
  Setup s;
  Cache<f16> c;
  std::vector<int> cu_q = {0, 7, 14};
  std::vector<f16> q;
  llmk::DeviceBuffer<f16> d_q, o_dense, o_paged;
  llmk::DeviceBuffer<int> d_cu_q, d_cu_k;
  llmk::DeviceBuffer<float> lse_dense, lse_paged;
  attn::PrefillArgs<f16> paged;

  explicit ChunkD128(std::mt19937& rng) {
    s.lens = {150, 37};
    s.page_size = 3;
    s.dim = 128;
    make_cache<f16>(c, s, rng);
    q = llmk::test::random_tensor<f16>(14LL * s.heads * s.dim, 1.0f, rng);
    d_q = llmk::DeviceBuffer<f16>(q);
    o_dense = llmk::DeviceBuffer<f16>(q.size());
    o_paged = llmk::DeviceBuffer<f16>(q.size());
    d_cu_q = llmk::DeviceBuffer<int>(cu_q);
    d_cu_k = llmk::DeviceBuffer<int>(c.kv_begin);
    lse_dense = llmk::DeviceBuffer<float>(14 * s.heads);
    lse_paged = llmk::DeviceBuffer<float>(14 * s.heads);
    paged = chunk_args<f16>(s, d_q.data(), o_paged.data(), d_cu_q.data(), cu_q.data());
    paged.lse = lse_paged.data();
  }
  // The same chunk over dense K/V (k, v: device [total, kv_heads, dim]) into o_dense / lse_dense.
  attn::PrefillArgs<f16> dense(const f16* k, const f16* v) {
    attn::PrefillArgs<f16> a = with_dense_kv(paged, s, k, v, d_cu_k.data(), c.kv_begin.data());
    a.o = o_dense.data();
    a.lse = lse_dense.data();
    return a;
  }
};

}  // namespace

TEST_CASE("paged (chunked) prefill, head dim 128: == dense prefill bit for bit") {
  std::mt19937 rng(614);
  ChunkD128 x(rng);
  llmk::DeviceBuffer<f16> d_k(x.c.k), d_v(x.c.v);
  REQUIRE(attn::prefill(x.dense(d_k.data(), d_v.data()), nullptr).ok());
  const llmk::Status st = attn::prefill_paged(x.paged, x.c.view(false), nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(same_bits(x.o_dense.to_host(), x.o_paged.to_host()));
  CHECK(x.lse_dense.to_host() == x.lse_paged.to_host());
}

TEST_CASE("paged prefill: head counts below 1 are rejected by name, never divided by") {
  // prefill_paged asks whether the Hopper kernel applies (the GQA group num_heads / num_kv_heads) before the
  // launcher validates: a zero KV-head count divided by zero there (SIGFPE) until 2026-11-29.
  std::mt19937 rng(615);
  ChunkD128 x(rng);
  for (const auto& [heads, kv_heads, name] :
       {std::tuple{x.paged.num_heads, 0, "num_kv_heads"}, std::tuple{x.paged.num_heads, -1, "num_kv_heads"},
        std::tuple{0, x.paged.num_kv_heads, "num_heads"}}) {
    attn::PrefillArgs<f16> a = x.paged;
    a.num_heads = heads;
    a.num_kv_heads = kv_heads;
    const llmk::Status st = attn::prefill_paged(a, x.c.view(false), nullptr);
    CHECK(st.code() == llmk::Status::Code::kInvalidArgument);
    CHECK_MESSAGE(st.message().find(name) != std::string::npos, st.message());
  }
}

TEST_CASE("paged decode: HND and NHD; bf16; GQA 4 and MQA; head dim 128") {
  std::mt19937 rng(602);
  for (bool hnd : {false, true}) {
    Setup s;
    s.lens = {70, 129, 5};
    s.page_size = 16;
    s.hnd = hnd;
    s.heads = 8;
    s.kv_heads = 2;
    s.dim = 128;
    check_decode<bf16>(s, rng, 2);
  }
  Setup s;
  s.lens = {45, 90};
  s.page_size = 8;
  s.heads = 4;
  s.kv_heads = 1;
  s.hnd = true;
  check_decode<f16>(s, rng, 0);
}

// docs/attention.md, "Special values", through the page table: a NaN in K at key j makes every column of the
// query heads that see j NaN (and their LSE), a NaN in V one column; a NaN in a page shared by two sequences
// reaches both. The paged forms give the dense kernel's bits (NaN payloads included), and the NaN pattern is
// exactly the expected one: every other output and LSE finite.
TEST_CASE("paged decode: NaN in K or V pages reaches exactly the heads that see it, shared pages included") {
  std::mt19937 rng(615);
  Setup s;
  s.lens = {150, 200, 37};
  s.page_size = 16;
  s.shared_prefix = 32;                // sequence 1's first two pages are sequence 0's
  const int row = s.kv_heads * s.dim;  // 2 KV heads of dim 64; 4 query heads: heads 2g, 2g + 1 read KV head g
  const float nan = std::nanf("");
  Cache<f16> c;
  make_cache<f16>(c, s, rng, [&](Cache<f16>& cc) {
    auto at = [&](int b, int t, int g, int col) { return (cc.kv_begin[b] + t) * row + g * s.dim + col; };
    cc.k[at(0, 5, 1, 17)] = f16(nan);   // a shared page: heads 2, 3 of sequences 0 and 1
    cc.v[at(1, 180, 0, 9)] = f16(nan);  // column 9 of heads 0, 1 of sequence 1
    cc.k[at(2, 36, 0, 0)] = f16(nan);   // the last key of a short last page: heads 0, 1 of sequence 2
  });
  // (sequence, head, column): column -1 is the whole row and its LSE.
  const std::set<std::tuple<int, int, int>> want = {{0, 2, -1}, {0, 3, -1}, {1, 2, -1}, {1, 3, -1},
                                                    {1, 0, 9},  {1, 1, 9},  {2, 0, -1}, {2, 1, -1}};
  const int batch = static_cast<int>(s.lens.size());
  const std::vector<f16> q =
      llmk::test::random_tensor<f16>(static_cast<std::int64_t>(batch) * s.heads * s.dim, 1.0f, rng);
  for (int splits : {1, 3}) {
    CAPTURE(splits);
    std::vector<float> lse_csr;
    const std::vector<f16> csr = decode_all_forms(c, q, splits, &lse_csr);
    int nan_outputs = 0;
    for (int b = 0; b < batch; ++b)
      for (int h = 0; h < s.heads; ++h) {
        CAPTURE(b);
        CAPTURE(h);
        const bool whole = want.count({b, h, -1}) != 0;
        CHECK(std::isnan(lse_csr[b * s.heads + h]) == whole);
        for (int col = 0; col < s.dim; ++col) {
          const float o = static_cast<float>(csr[(static_cast<std::size_t>(b) * s.heads + h) * s.dim + col]);
          const bool want_nan = whole || want.count({b, h, col}) != 0;
          nan_outputs += std::isnan(o) ? 1 : 0;
          if (std::isnan(o) != want_nan || (!want_nan && !std::isfinite(o))) {
            CAPTURE(col);
            FAIL_CHECK("output " << o << " where " << (want_nan ? "NaN" : "a finite value")
                                 << " is expected");
          }
        }
      }
    CHECK(nan_outputs == 6 * s.dim + 2);
  }
}

TEST_CASE("paged (chunked) prefill: a chunk attends to the cached prefix and to itself, == dense prefill") {
  std::mt19937 rng(603);
  for (int ps : {3, 16}) {
    for (bool hnd : {false, true}) {
      // Sanitizer builds (LLMK_TEST_FAST): page size 3 with NHD and 16 with HND (each size and each layout
      // once).
      if (llmk::test::fast() && hnd != (ps == 16)) continue;
      Setup s;
      s.lens = {40, 23, 1, 0};
      s.page_size = ps;
      s.hnd = hnd;
      s.shared_prefix = 2 * ps;
      CAPTURE(ps);
      CAPTURE(hnd);
      Cache<f16> c;
      make_cache<f16>(c, s, rng);
      const int batch = static_cast<int>(s.lens.size());
      std::vector<int> q_lens(batch), cu_q(batch + 1, 0);  // the last min(len, 7) tokens are the new chunk
      for (int b = 0; b < batch; ++b) {
        q_lens[b] = std::min(s.lens[b], 7);
        cu_q[b + 1] = cu_q[b] + q_lens[b];
      }
      const std::vector<f16> q =
          llmk::test::random_tensor<f16>(static_cast<std::int64_t>(cu_q[batch]) * s.heads * s.dim, 1.0f, rng);
      llmk::DeviceBuffer<f16> d_q(q), d_k(c.k), d_v(c.v);
      llmk::DeviceBuffer<int> d_cu_q(cu_q), d_cu_k(c.kv_begin);
      const std::size_t n_out = static_cast<std::size_t>(cu_q[batch]) * s.heads * s.dim;
      llmk::DeviceBuffer<f16> o_dense(n_out), o_paged(n_out);
      llmk::DeviceBuffer<float> lse_dense(cu_q[batch] * s.heads), lse_paged(cu_q[batch] * s.heads);
      auto base = [&](f16* o, float* lse) {
        attn::PrefillArgs<f16> a = chunk_args<f16>(s, d_q.data(), o, d_cu_q.data(), cu_q.data());
        a.lse = lse;
        return a;
      };
      const attn::PrefillArgs<f16> dense =
          with_dense_kv(base(o_dense.data(), lse_dense.data()), s, d_k.data(), d_v.data(), d_cu_k.data(),
                        c.kv_begin.data());
      llmk::reference::AttentionProblem p;
      p.q_lens = q_lens;
      p.kv_lens = s.lens;
      p.num_heads = s.heads;
      p.num_kv_heads = s.kv_heads;
      p.head_dim = s.dim;
      p.options.softmax_scale = attn::default_scale(s.dim);
      p.options.causal = true;
      // Both kernels: the dispatch (the Hopper kernel on sm_90: TMA for dense K/V, the producer's gather for
      // pages) and the mma.sync one; paged == dense bit for bit within each on the same tiles (the mma.sync
      // kernel's paged default has 64-key tiles, its dense default 96: the dense run pins the paged tiles).
      // Every output and LSE is poisoned before its launch (a run that writes nothing cannot pass on the
      // previous run's answer), and each kernel's dense answer meets the reference, so each paged run does.
      // Sanitizer builds (LLMK_TEST_FAST): the mma.sync kernel at page size 16 only.
      for (bool mma : {false, true}) {
        if (mma && llmk::test::fast() && ps != 16) continue;
        CAPTURE(mma);
        o_dense.poison();
        lse_dense.poison();
        REQUIRE((mma ? attn::prefill_mma_with_config<f16, attn::DefaultPagedPrefillConfig<64, f16>>(dense,
                                                                                                    nullptr)
                     : attn::prefill(dense, nullptr))
                    .ok());
        const std::vector<f16> want = o_dense.to_host();
        const std::vector<float> want_lse = lse_dense.to_host();
        llmk::test::check_attention(p, q, c.k, c.v, want, &want_lse);
        for (bool csr : {true, false}) {
          CAPTURE(csr);
          o_paged.poison();
          lse_paged.poison();
          const attn::PrefillArgs<f16> paged = base(o_paged.data(), lse_paged.data());
          const llmk::Status st = mma ? attn::prefill_paged_mma(paged, c.view(csr), nullptr)
                                      : attn::prefill_paged(paged, c.view(csr), nullptr);
          REQUIRE_MESSAGE(st.ok(), st.message());
          CHECK(same_bits(want, o_paged.to_host()));
          CHECK(want_lse == lse_paged.to_host());
        }
      }
    }
  }
}

TEST_CASE("copy_pages copies K and V of every slot and head; table conversions round-trip") {
  std::mt19937 rng(604);
  Setup s;
  s.lens = {50, 20};
  s.page_size = 8;
  s.hnd = true;
  Cache<f16> c;
  make_cache<f16>(c, s, rng);
  std::vector<int> spare;  // pages no sequence uses
  for (int p = 0; p < c.num_pages; ++p)
    if (std::find(c.csr.indices.begin(), c.csr.indices.end(), p) == c.csr.indices.end()) spare.push_back(p);
  const std::vector<int> src = {c.csr.indices[0], c.csr.indices[1]}, dst = {spare[0], spare[1]};
  llmk::DeviceBuffer<int> d_src(src), d_dst(dst);
  REQUIRE(kv::copy_pages(c.k_pool.data(), c.v_pool.data(), c.strides, s.page_size, c.num_pages, s.kv_heads,
                         s.dim, d_src.data(), d_dst.data(), 2, nullptr)
              .ok());
  const std::vector<f16> kp = c.k_pool.to_host(), vp = c.v_pool.to_host();
  for (int i = 0; i < 2; ++i) {
    int bad = 0;
    for (std::int64_t e = 0; e < c.strides.page; ++e)
      bad += kp[src[i] * c.strides.page + e].bits != kp[dst[i] * c.strides.page + e].bits ||
             vp[src[i] * c.strides.page + e].bits != vp[dst[i] * c.strides.page + e].bits;
    CHECK(bad == 0);
  }
  kv::CsrPageTable back;
  REQUIRE(kv::block_table_to_csr(c.table, s.page_size, &back).ok());
  CHECK(back.indptr == c.csr.indptr);
  CHECK(back.indices == c.csr.indices);
  CHECK(back.last_page_len == c.csr.last_page_len);
}

namespace {
// The two-sequence table tests' inputs: sequences of 20 and 9 tokens in 8-token pages, q and o [2, heads,
// dim] contiguous, decode arguments with scale 1/8.
struct TwoSequences {
  Setup s = make_setup();
  Cache<f16> c;
  llmk::DeviceBuffer<f16> d_q{static_cast<std::size_t>(2 * s.heads * s.dim)},
      d_o{static_cast<std::size_t>(2 * s.heads * s.dim)};
  attn::DecodeArgs<f16> a;

  explicit TwoSequences(std::uint32_t seed) {
    std::mt19937 rng(seed);
    make_cache<f16>(c, s, rng);
    a.q = d_q.data();
    a.o = d_o.data();
    a.q_stride_batch = a.o_stride_batch = s.heads * s.dim;
    a.q_stride_head = a.o_stride_head = s.dim;
    a.batch = 2;
    a.num_heads = s.heads;
    a.num_kv_heads = s.kv_heads;
    a.head_dim = s.dim;
    a.options.softmax_scale = 0.125f;
  }
  static Setup make_setup() {
    Setup s;
    s.lens = {20, 9};
    s.page_size = 8;
    return s;
  }
};
}  // namespace

TEST_CASE("append_kv: NaN and +-Inf inputs give the reference quantizer's codes byte for byte (int8, e4m3)") {
  // docs/kvcache.md: the per-token-head absmax uses the finite values; +inf -> 127 s, -inf -> -128 s, NaN ->
  // 0 (int8); fp8 keeps NaN and saturates +-inf to +-448. Rows: specials among random values; a finite row; a
  // row with no finite value (scale 1).
  Setup s;
  s.kv_heads = 2;
  s.dim = 64;
  s.page_size = 4;
  const int tokens = 3, row = s.kv_heads * s.dim;
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<f16> x(static_cast<std::size_t>(tokens) * row);
  for (auto& e : x) e = f16(dist(rng));
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  x[3] = f16(nan);  // token 0, head 0
  x[10] = f16(inf);
  x[20] = f16(-inf);
  for (int e = 0; e < s.dim; ++e)
    x[2 * row + e] = f16(e % 3 == 0 ? nan : (e % 3 == 1 ? inf : -inf));  // token 2
  const kv::PageStrides strides = kv::make_nhd_strides(s.page_size, s.kv_heads, s.dim);
  const std::vector<std::int64_t> slots = {1, 2, 3};  // page 0, slots 1..3
  auto pool_index = [&](int t, int h) { return slots[t] * strides.slot + h * strides.head; };
  SUBCASE("int8, per-token-head scales") {
    using Q = llmk::quant::Quantizer<std::int8_t, llmk::quant::Symmetric, llmk::quant::PerToken>;
    llmk::DeviceBuffer<std::int8_t> kp(strides.page), vp(strides.page);
    llmk::DeviceBuffer<float> ks(static_cast<std::size_t>(s.page_size) * s.kv_heads),
        vs(static_cast<std::size_t>(s.page_size) * s.kv_heads);
    write_tokens<f16, std::int8_t>(x, x, s, strides, 1, slots, kp.data(), vp.data(),
                                   kv::KvScale::kPerTokenHead, ks.data(), vs.data());
    const auto kc = kp.to_host(), vc = vp.to_host();
    const auto ksc = ks.to_host(), vsc = vs.to_host();
    int bad = 0;
    for (int t = 0; t < tokens; ++t)
      for (int h = 0; h < s.kv_heads; ++h) {
        std::vector<std::int8_t> want(static_cast<std::size_t>(s.dim));
        float scale = 0.0f;
        llmk::reference::quantize_dynamic<Q>(x.data() + t * row + h * s.dim, s.dim, want.data(), s.dim, 1,
                                             s.dim, &scale, nullptr, s.dim);
        const std::size_t si = static_cast<std::size_t>(slots[t]) * s.kv_heads + h;
        bad += std::memcmp(&ksc[si], &scale, 4) != 0 || std::memcmp(&vsc[si], &scale, 4) != 0;
        bad += std::memcmp(kc.data() + pool_index(t, h), want.data(), want.size()) != 0;
        bad += std::memcmp(vc.data() + pool_index(t, h), want.data(), want.size()) != 0;
      }
    CHECK(bad == 0);
    CHECK(kc[pool_index(0, 0) + 3] == 0);  // NaN
    CHECK(kc[pool_index(0, 0) + 10] == 127);
    CHECK(kc[pool_index(0, 0) + 20] == -128);
    CHECK(ksc[static_cast<std::size_t>(slots[2]) * s.kv_heads] == 1.0f);  // no finite value: scale 1
  }
  SUBCASE("e4m3, per-head scales") {
    using Q = llmk::quant::Quantizer<llmk::float8_e4m3, llmk::quant::Symmetric, llmk::quant::PerToken>;
    const std::vector<float> head_scales = {0.01f, 0.02f};
    llmk::DeviceBuffer<llmk::float8_e4m3> kp(strides.page), vp(strides.page);
    llmk::DeviceBuffer<float> ks(head_scales), vs(head_scales);
    write_tokens<f16, llmk::float8_e4m3>(x, x, s, strides, 1, slots, kp.data(), vp.data(),
                                         kv::KvScale::kPerHead, ks.data(), vs.data());
    const auto kc = kp.to_host(), vc = vp.to_host();
    int bad = 0;
    for (int t = 0; t < tokens; ++t)
      for (int h = 0; h < s.kv_heads; ++h) {
        std::vector<std::uint8_t> want(static_cast<std::size_t>(s.dim));
        llmk::reference::quantize<Q>(x.data() + t * row + h * s.dim, s.dim, want.data(), s.dim, 1, s.dim,
                                     &head_scales[static_cast<std::size_t>(h)], nullptr, s.dim);
        bad += std::memcmp(kc.data() + pool_index(t, h), want.data(), want.size()) != 0;
        bad += std::memcmp(vc.data() + pool_index(t, h), want.data(), want.size()) != 0;
      }
    CHECK(bad == 0);
    CHECK(std::isnan(kc[pool_index(0, 0) + 3].to_float()));
    CHECK(kc[pool_index(0, 0) + 10].to_float() == 448.0f);
    CHECK(kc[pool_index(0, 0) + 20].to_float() == -448.0f);
  }
}

TEST_CASE("paged attention: bad tables are rejected; a page outside the pool is caught, never read") {
  TwoSequences in(605);
  const Setup& s = in.s;
  Cache<f16>& c = in.c;
  const attn::DecodeArgs<f16>& a = in.a;
  attn::DecodePlan plan;
  auto expect = [&](const kv::PagedKv<f16>& p, const char* needle) {
    const llmk::Status st = attn::plan_decode_paged(a, p, &plan, 1);
    CHECK_FALSE(st.ok());
    INFO(st.message());
    CHECK(st.message().find(needle) != std::string::npos);
  };
  kv::PagedKv<f16> both = c.view(true);
  both.block_table = c.d_table.data();
  both.seq_lens = c.d_lens.data();
  expect(both, "exactly one table form");
  kv::PagedKv<f16> p = c.view(true);
  p.page_indptr_host = nullptr;
  expect(p, "host copies");
  p = c.view(true);
  std::vector<int> bad_last = c.csr.last_page_len;
  bad_last[0] = 0;
  p.last_page_len_host = bad_last.data();
  expect(p, "last_page_len");
  p = c.view(false);
  std::vector<int> long_lens = c.table.seq_lens;
  long_lens[1] = c.table.max_blocks * s.page_size + 1;
  p.seq_lens_host = long_lens.data();
  expect(p, "seq_lens");
  p = c.view(false);
  p.strides.slot = 12;
  expect(p, "strides.slot");
  // A runtime head dim outside this program's LLMK_ATTENTION_HEAD_DIMS: rejected, naming the list and the
  // explicit instantiation.
  attn::DecodeArgs<f16> d96 = a;
  d96.head_dim = 96;
  const std::string no96 = attn::plan_decode_paged(d96, c.view(true), &plan, 1).message();
  CHECK(no96.find("96 is not dispatched at runtime (64, 128 are)") != std::string::npos);
  CHECK(no96.find("plan_decode_paged_with_config") != std::string::npos);
  attn::DecodeArgs<f16> with_k = a;
  with_k.k = in.d_q.data();
  CHECK(attn::plan_decode_paged(with_k, c.view(true), &plan, 1).message().find("paged cache") !=
        std::string::npos);
#if defined(LLMK_SIM)
  // A table entry outside the pool: the kernel traps (a simulator error), nothing is read out of bounds.
  std::vector<int> table = c.table.table;
  table[1] = c.num_pages + 3;
  llmk::DeviceBuffer<int> d_bad(table);
  p = c.view(false);
  p.block_table = d_bad.data();
  REQUIRE(attn::plan_decode_paged(a, p, &plan, 1).ok());
  const llmk::Status st = attn::decode_paged(a, p, plan, nullptr, 0, nullptr);
  CHECK(st.code() == llmk::Status::Code::kSimulatorError);
  CHECK(st.message().find("__trap") != std::string::npos);
#endif
}

namespace {

// A quantized copy of a plain cache: the same pages and tables, codes written by append_kv<T, Code> with
// `mode`; returns the dequantized logical K/V (T(float(code) * scale), what the kernels compute with).
template <class T, class Code>
struct QuantCache {
  llmk::DeviceBuffer<Code> k_pool, v_pool;
  llmk::DeviceBuffer<float> k_scales, v_scales;
  kv::KvScale mode = kv::KvScale::kNone;
  std::vector<T> k_deq, v_deq;           // T(code * scale): what prefill computes with
  std::vector<double> k_exact, v_exact;  // code * scale exactly: what decode computes with

  kv::PagedKv<T, Code> view(const Cache<T>& c, bool csr_form) const {
    const kv::PagedKv<T> plain = c.view(csr_form);
    kv::PagedKv<T, Code> p;
    p.k_pages = k_pool.data();
    p.v_pages = v_pool.data();
    p.scale_mode = mode;
    p.k_scales = k_scales.data();
    p.v_scales = v_scales.data();
    p.strides = plain.strides;
    p.page_size = plain.page_size;
    p.num_pages = plain.num_pages;
    p.page_indptr = plain.page_indptr;
    p.page_indices = plain.page_indices;
    p.last_page_len = plain.last_page_len;
    p.page_indptr_host = plain.page_indptr_host;
    p.last_page_len_host = plain.last_page_len_host;
    p.block_table = plain.block_table;
    p.max_blocks_per_seq = plain.max_blocks_per_seq;
    p.seq_lens = plain.seq_lens;
    p.seq_lens_host = plain.seq_lens_host;
    return p;
  }
};

template <class T, class Code>
void make_quant_cache(QuantCache<T, Code>& qc, const Cache<T>& c, kv::KvScale mode, double* max_rel_err) {
  const Setup& s = c.s;
  const int batch = static_cast<int>(s.lens.size()), row = s.kv_heads * s.dim;
  qc.mode = mode;
  const std::size_t pool = static_cast<std::size_t>(c.num_pages) * c.strides.page;
  qc.k_pool = llmk::DeviceBuffer<Code>(pool);
  qc.v_pool = llmk::DeviceBuffer<Code>(pool);
  // Static scales (per head / per tensor) from the absmax of the data, as a calibration would give.
  const double qmax =
      std::is_same_v<Code, std::int8_t> ? 127.0 : (std::is_same_v<Code, llmk::float8_e4m3> ? 448.0 : 57344.0);
  const int n_static = mode == kv::KvScale::kPerHead ? s.kv_heads : 1;
  std::vector<float> ks(mode == kv::KvScale::kPerTokenHead
                            ? static_cast<std::size_t>(c.num_pages) * s.page_size * s.kv_heads
                            : n_static,
                        0.0f),
      vs(ks.size(), 0.0f);
  if (mode != kv::KvScale::kPerTokenHead) {
    for (std::size_t i = 0; i < c.k.size(); ++i) {
      const int h = mode == kv::KvScale::kPerHead ? static_cast<int>((i / s.dim) % s.kv_heads) : 0;
      ks[h] = std::max(ks[h], std::fabs(c.k[i].to_float()) / static_cast<float>(qmax));
      vs[h] = std::max(vs[h], std::fabs(c.v[i].to_float()) / static_cast<float>(qmax));
    }
  }
  qc.k_scales = llmk::DeviceBuffer<float>(ks);
  qc.v_scales = llmk::DeviceBuffer<float>(vs);
  // Each slot written once, by the first token that maps to it (later ones get slot -1, as make_cache's
  // shared prefix): two tokens appended to one slot in one launch would race.
  std::vector<std::int64_t> slots;
  std::set<std::int64_t> written;
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < s.lens[b]; ++t) {
      const std::int64_t slot =
          static_cast<std::int64_t>(c.csr.indices[c.csr.indptr[b] + t / s.page_size]) * s.page_size +
          t % s.page_size;
      slots.push_back(written.insert(slot).second ? slot : -1);
    }
  write_tokens<T, Code>(c.k, c.v, s, c.strides, c.num_pages, slots, qc.k_pool.data(), qc.v_pool.data(), mode,
                        qc.k_scales.data(), qc.v_scales.data());
  // Read back and dequantize; the error against the written values is the quantization error.
  const std::vector<Code> kp = qc.k_pool.to_host(), vp = qc.v_pool.to_host();
  const std::vector<float> ksc = qc.k_scales.to_host(), vsc = qc.v_scales.to_host();
  qc.k_deq.assign(c.k.size(), T(0.0f));
  qc.v_deq.assign(c.v.size(), T(0.0f));
  qc.k_exact.assign(c.k.size(), 0.0);
  qc.v_exact.assign(c.v.size(), 0.0);
  *max_rel_err = 0.0;
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < s.lens[b]; ++t) {
      const int page = c.csr.indices[c.csr.indptr[b] + t / s.page_size], slot = t % s.page_size;
      for (int h = 0; h < s.kv_heads; ++h) {
        const std::size_t si = mode == kv::KvScale::kPerTokenHead
                                   ? (static_cast<std::size_t>(page) * s.page_size + slot) * s.kv_heads + h
                                   : (mode == kv::KvScale::kPerHead ? h : 0);
        for (int d = 0; d < s.dim; ++d) {
          const std::int64_t at = page * c.strides.page + slot * c.strides.slot + h * c.strides.head + d;
          const std::size_t li = (static_cast<std::size_t>(c.kv_begin[b]) + t) * row + h * s.dim + d;
          qc.k_exact[li] = static_cast<double>(static_cast<float>(kp[at])) * ksc[si];
          qc.v_exact[li] = static_cast<double>(static_cast<float>(vp[at])) * vsc[si];
          qc.k_deq[li] = T(static_cast<float>(kp[at]) * ksc[si]);
          qc.v_deq[li] = T(static_cast<float>(vp[at]) * vsc[si]);
          // Error relative to the row's scale range (qmax * scale): half a step for int8, 2^-4 / 2^-3 for
          // fp8.
          *max_rel_err = std::max(
              {*max_rel_err, std::fabs(qc.k_deq[li].to_float() - c.k[li].to_float()) / (qmax * ksc[si]),
               std::fabs(qc.v_deq[li].to_float() - c.v[li].to_float()) / (qmax * vsc[si])});
        }
      }
    }
}

// A paged cache over `s`, its quantized copy (within rel_bound of the values), and random queries [batch,
// heads, dim].
template <class T, class Code>
std::vector<T> quantized_cache(Cache<T>& c, QuantCache<T, Code>& qc, const Setup& s, kv::KvScale mode,
                               double rel_bound, std::mt19937& rng) {
  make_cache<T>(c, s, rng);
  double rel = 0.0;
  make_quant_cache(qc, c, mode, &rel);
  INFO("quantization error / (qmax * scale) = " << rel);
  CHECK(rel <= rel_bound);
  const int batch = static_cast<int>(s.lens.size());
  return llmk::test::random_tensor<T>(static_cast<std::int64_t>(batch) * s.heads * s.dim, 1.0f, rng);
}

// Paged decode over a quantized cache with a window and soft-cap (window < 0, softcap 0: none) and `splits`
// splits: the fp64 reference on the exact dequantized values within the FlashAttention rule (output and
// LSE), the same bits from both table forms; each output and LSE a fresh poisoned buffer.
template <class T, class Code>
void decode_quantized_both_forms(const Setup& s, const Cache<T>& c, const QuantCache<T, Code>& qc,
                                 const std::vector<T>& q, int window, float softcap, int splits) {
  const int batch = static_cast<int>(s.lens.size());
  llmk::reference::AttentionProblem p = decode_problem(s);
  p.options.window_left = window;
  p.options.softcap = softcap;
  std::vector<T> first;
  for (bool csr : {true, false}) {
    CAPTURE(csr);
    llmk::DeviceBuffer<T> d_q(q), d_o(q.size());
    llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(batch) * s.heads);
    attn::DecodeArgs<T> a = decode_args<T>(s, d_q.data(), d_o.data(), d_lse.data());
    a.options.window_left = window;
    a.options.softcap = softcap;
    const kv::PagedKv<T, Code> pages = qc.view(c, csr);
    attn::DecodePlan plan;
    REQUIRE(attn::plan_decode_paged(a, pages, &plan, splits).ok());
    llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
    const llmk::Status st = attn::decode_paged(a, pages, plan, ws.data(), ws.size(), nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    const std::vector<T> got = d_o.to_host();
    const std::vector<float> lse = d_lse.to_host();
    if (csr) {
      llmk::test::check_attention(p, q, qc.k_deq, qc.v_deq, got, &lse, &qc.k_exact, &qc.v_exact);
      first = got;
    } else {
      CHECK(same_bits(first, got));
    }
  }
}

template <class T, class Code>
void check_quantized(kv::KvScale mode, double rel_bound, std::mt19937& rng) {
  Setup s;
  s.lens = {70, 33, 0, 9};
  s.page_size = 16;
  s.heads = 4;
  s.kv_heads = 2;
  Cache<T> c;
  QuantCache<T, Code> qc;
  const std::vector<T> q = quantized_cache(c, qc, s, mode, rel_bound, rng);
  // Decode over the quantized cache: attention over the exact dequantized values (code * scale; the scales
  // folded into the scores and P, code_tiles.cuh) within the FlashAttention rule, whose naive baseline
  // attends over T(code * scale); the same bits from both table forms.
  const int batch = static_cast<int>(s.lens.size());
  decode_quantized_both_forms(s, c, qc, q, -1, 0.0f, 2);
  // Chunked prefill over the quantized cache == dense prefill over the dequantized values.
  std::vector<int> cu_q(batch + 1, 0);
  for (int b = 0; b < batch; ++b) cu_q[b + 1] = cu_q[b] + std::min(s.lens[b], 5);
  const std::vector<T> qp =
      llmk::test::random_tensor<T>(static_cast<std::int64_t>(cu_q[batch]) * s.heads * s.dim, 1.0f, rng);
  llmk::DeviceBuffer<T> d_qp(qp), d_kd(qc.k_deq), d_vd(qc.v_deq), o1(qp.size()), o2(qp.size());
  llmk::DeviceBuffer<int> d_cu_q(cu_q), d_cu_k(c.kv_begin);
  const attn::PrefillArgs<T> a = chunk_args<T>(s, d_qp.data(), o1.data(), d_cu_q.data(), cu_q.data());
  attn::PrefillArgs<T> dense_args =
      with_dense_kv(a, s, d_kd.data(), d_vd.data(), d_cu_k.data(), c.kv_begin.data());
  dense_args.o = o2.data();
  // Both kernels (sm_90: the Hopper kernel's producer dequantizes the pages into its ring), each output
  // poisoned before its launch; each kernel's paged answer also meets the reference over T(code * scale) (the
  // values both kernels compute with).
  llmk::reference::AttentionProblem pp;
  for (int b = 0; b < batch; ++b) pp.q_lens.push_back(cu_q[b + 1] - cu_q[b]);
  pp.kv_lens = s.lens;
  pp.num_heads = s.heads;
  pp.num_kv_heads = s.kv_heads;
  pp.head_dim = s.dim;
  pp.options = a.options;
  for (bool mma : {false, true}) {
    CAPTURE(mma);
    o1.poison();
    o2.poison();
    REQUIRE((mma ? attn::prefill_paged_mma(a, qc.view(c, false), nullptr)
                 : attn::prefill_paged(a, qc.view(c, false), nullptr))
                .ok());
    // mma.sync: the paged default's tiles (the dense default has 96-key tiles: another summation order).
    REQUIRE((mma ? attn::prefill_mma_with_config<T, attn::DefaultPagedPrefillConfig<64, Code>>(dense_args,
                                                                                               nullptr)
                 : attn::prefill(dense_args, nullptr))
                .ok());
    const std::vector<T> got = o1.to_host();
    CHECK(same_bits(got, o2.to_host()));
    llmk::test::check_attention(pp, qp, qc.k_deq, qc.v_deq, got, nullptr);
  }
  // Copy-on-write of a quantized page moves the codes and, for per-token-head scales, the scale rows.
  std::vector<int> spare;
  for (int pg = 0; pg < c.num_pages; ++pg)
    if (std::find(c.csr.indices.begin(), c.csr.indices.end(), pg) == c.csr.indices.end()) spare.push_back(pg);
  const int from = c.csr.indices[0], to = spare[0];
  llmk::DeviceBuffer<int> d_from(std::vector<int>{from}), d_to(std::vector<int>{to});
  const bool row_scales = mode == kv::KvScale::kPerTokenHead;
  REQUIRE(kv::copy_pages(qc.k_pool.data(), qc.v_pool.data(), c.strides, s.page_size, c.num_pages, s.kv_heads,
                         s.dim, d_from.data(), d_to.data(), 1, nullptr,
                         row_scales ? qc.k_scales.data() : nullptr, row_scales ? qc.v_scales.data() : nullptr)
              .ok());
  const std::vector<Code> kp = qc.k_pool.to_host(), vp = qc.v_pool.to_host();
  const std::vector<float> ksc = qc.k_scales.to_host(), vsc = qc.v_scales.to_host();
  int bad = 0;
  for (std::int64_t e = 0; e < c.strides.page; ++e) {
    Code a0 = kp[from * c.strides.page + e], a1 = kp[to * c.strides.page + e];
    Code b0 = vp[from * c.strides.page + e], b1 = vp[to * c.strides.page + e];
    bad += std::memcmp(&a0, &a1, 1) != 0 || std::memcmp(&b0, &b1, 1) != 0;
  }
  if (row_scales)
    for (int r = 0; r < s.page_size * s.kv_heads; ++r)
      bad += ksc[from * s.page_size * s.kv_heads + r] != ksc[to * s.page_size * s.kv_heads + r] ||
             vsc[from * s.page_size * s.kv_heads + r] != vsc[to * s.page_size * s.kv_heads + r];
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE(
    "quantized KV: int8 per token-head and per head, fp8 e4m3 / e5m2; append quantizes, kernels dequantize") {
  std::mt19937 rng(606);
  check_quantized<f16, std::int8_t>(kv::KvScale::kPerTokenHead, 0.5 / 127 + 1e-3, rng);
  check_quantized<bf16, std::int8_t>(kv::KvScale::kPerHead, 0.5 / 127 + 4e-3, rng);
  check_quantized<f16, llmk::float8_e4m3>(kv::KvScale::kPerTensor, 1.0 / 16 + 1e-3, rng);
  check_quantized<f16, llmk::float8_e5m2>(kv::KvScale::kPerHead, 1.0 / 8 + 1e-3, rng);
  // The other granularity of each code and dtype (int8: per token-head or head; fp8: per head or tensor; the
  // scale index is a runtime mode: no other kernels).
  check_quantized<f16, llmk::float8_e4m3>(kv::KvScale::kPerHead, 1.0 / 16 + 1e-3, rng);
  if (llmk::test::fast()) return;
  check_quantized<bf16, std::int8_t>(kv::KvScale::kPerTokenHead, 0.5 / 127 + 4e-3, rng);
  check_quantized<f16, std::int8_t>(kv::KvScale::kPerHead, 0.5 / 127 + 1e-3, rng);
  check_quantized<f16, llmk::float8_e5m2>(kv::KvScale::kPerTensor, 1.0 / 8 + 1e-3, rng);
}

namespace {

// Head dim 48: three 16-dim chunks, so the code path's V fragments end with a single chunk (ldmatrix x2),
// with bf16 and fp8 codes and two splits (the merge path), against the fp64 reference on the exact
// dequantized values.
template <class Code>
void check_bf16_decode_d48(kv::KvScale mode, double rel_bound, std::mt19937& rng) {
  Setup s;
  s.lens = {70, 33, 0, 9};
  s.dim = 48;
  Cache<bf16> c;
  make_cache<bf16>(c, s, rng);
  QuantCache<bf16, Code> qc;
  double rel = 0.0;
  make_quant_cache(qc, c, mode, &rel);
  INFO("quantization error / (qmax * scale) = " << rel);
  CHECK(rel <= rel_bound);
  const int batch = static_cast<int>(s.lens.size());
  const std::vector<bf16> q =
      llmk::test::random_tensor<bf16>(static_cast<std::int64_t>(batch) * s.heads * s.dim, 1.0f, rng);
  llmk::DeviceBuffer<bf16> d_q(q), d_o(q.size());
  llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(batch) * s.heads);
  const attn::DecodeArgs<bf16> a = decode_args<bf16>(s, d_q.data(), d_o.data(), d_lse.data());
  using Cfg = attn::DecodeConfig<48, 2, 2>;
  const kv::PagedKv<bf16, Code> pages = qc.view(c, false);
  attn::DecodePlan plan;
  REQUIRE(attn::plan_decode_paged_with_config<bf16, Cfg>(a, pages, &plan, 2).ok());
  llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
  const llmk::Status st =
      attn::decode_paged_with_config<bf16, Cfg>(a, pages, plan, ws.data(), ws.size(), nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const llmk::reference::AttentionProblem p = decode_problem(s);
  const std::vector<float> lse = d_lse.to_host();
  llmk::test::check_attention(p, q, qc.k_deq, qc.v_deq, d_o.to_host(), &lse, &qc.k_exact, &qc.v_exact);
}

}  // namespace

TEST_CASE("quantized decode, head dim 48 (an odd number of 16-dim chunks): bf16 with e4m3 and e5m2 codes") {
  std::mt19937 rng(612);
  // bf16 inputs: the bf16 + int8 case's margin over each code's quantization step.
  check_bf16_decode_d48<llmk::float8_e4m3>(kv::KvScale::kPerHead, 1.0 / 16 + 4e-3, rng);
  check_bf16_decode_d48<llmk::float8_e5m2>(kv::KvScale::kPerTensor, 1.0 / 8 + 4e-3, rng);
}

namespace {

// decode_quantized_both_forms over a fresh quantized cache for `s`.
template <class T, class Code>
void check_quant_decode(const Setup& s, kv::KvScale mode, double rel_bound, int window, float softcap,
                        int splits, std::mt19937& rng) {
  CAPTURE(s.dim);
  CAPTURE(s.heads);
  CAPTURE(s.kv_heads);
  CAPTURE(window);
  CAPTURE(softcap);
  Cache<T> c;
  QuantCache<T, Code> qc;
  const std::vector<T> q = quantized_cache(c, qc, s, mode, rel_bound, rng);
  decode_quantized_both_forms(s, c, qc, q, window, softcap, splits);
}

}  // namespace

// Quantized decode at head dim 128 (64-key tiles, 16 dims of codes per chunk x 8), beyond the d64 / d48 cases
// above: int8 at GQA 2; e4m3 with a window and soft-cap (window 70: the keys start at 79 and 29, inside a
// page and a tile, and the second split starts mid-tile too; soft-cap 2: every tile on the general step);
// 8 query heads on one KV head (a group of 8 in a 16-row tile), bf16 int8 per head.
TEST_CASE("quantized decode, head dim 128: int8 and e4m3, a window and soft-cap, 8 heads on one KV head") {
  std::mt19937 rng(616);
  Setup s;
  s.lens = {100, 37, 0, 9};
  s.dim = 128;
  check_quant_decode<f16, std::int8_t>(s, kv::KvScale::kPerTokenHead, 0.5 / 127 + 1e-3, -1, 0.0f, 2, rng);
  s.lens = {150, 61, 100};
  check_quant_decode<f16, llmk::float8_e4m3>(s, kv::KvScale::kPerHead, 1.0 / 16 + 1e-3, 70, 2.0f, 2, rng);
  s.lens = {90, 17};
  s.heads = 8;
  s.kv_heads = 1;
  check_quant_decode<bf16, std::int8_t>(s, kv::KvScale::kPerHead, 0.5 / 127 + 4e-3, -1, 0.0f, 2, rng);
}

// Quantized pages at head dim 128 (on sm_90 the Hopper kernel's producer streams the codes through its
// staging ring in pieces of 64 rows, two per 128-key tile, and converts them in place), int8 per token-head
// and e4m3 per head, page size 3: == the dense prefill over T(code * scale) bit for bit, output and LSE.
TEST_CASE("quantized paged prefill, head dim 128: == dense prefill over the dequantized values bit for bit") {
  std::mt19937 rng(615);
  ChunkD128 x(rng);
  auto check = [&](auto code, kv::KvScale mode) {
    using Code = decltype(code);
    CAPTURE(sizeof(Code));
    QuantCache<f16, Code> qc;
    double rel = 0.0;
    make_quant_cache(qc, x.c, mode, &rel);
    llmk::DeviceBuffer<f16> d_kd(qc.k_deq), d_vd(qc.v_deq);
    // Every output and LSE poisoned before its launch (they hold the previous code's answers).
    x.o_dense.poison();
    x.lse_dense.poison();
    REQUIRE(attn::prefill(x.dense(d_kd.data(), d_vd.data()), nullptr).ok());
    x.o_paged.poison();
    x.lse_paged.poison();
    const llmk::Status st = attn::prefill_paged(x.paged, qc.view(x.c, false), nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    CHECK(same_bits(x.o_dense.to_host(), x.o_paged.to_host()));
    CHECK(x.lse_dense.to_host() == x.lse_paged.to_host());
  };
  check(std::int8_t{}, kv::KvScale::kPerTokenHead);
  check(llmk::float8_e4m3{}, kv::KvScale::kPerHead);
}

// The V scales are folded into P with fp16 (code_tiles.cuh, VScaleFold): O is kept in units of a power of two
// near each tile's largest scale, so P * scale / unit stays out of the fp16 subnormals. Per-token V
// magnitudes spread over 2^-12..2^4 (the unit changes from tile to tile) still meet the reference on the
// exact values; and scaling every V scale by 2^-6 scales every output by 2^-6 bit for bit (where the result
// is a normal fp16): without the units, P * scale * 2^-6 would fall into the subnormals and round
// differently.
TEST_CASE(
    "quantized decode, fp16 int8 per token: V scales over 2^16 and a 2^-6 rescale (V scales folded into P)") {
  std::mt19937 rng(613);
  Setup s;
  s.lens = {300, 41};
  Cache<f16> c;
  make_cache<f16>(c, s, rng);
  std::uniform_int_distribution<int> exponent(-12, 4);
  const int row = s.kv_heads * s.dim;
  for (std::size_t t = 0; t * row < c.v.size(); ++t) {
    const float f = std::ldexp(1.0f, exponent(rng));
    for (int e = 0; e < row; ++e) c.v[t * row + e] = f16(c.v[t * row + e].to_float() * f);
  }
  QuantCache<f16, std::int8_t> qc;
  double rel = 0.0;
  make_quant_cache(qc, c, kv::KvScale::kPerTokenHead, &rel);
  const int batch = static_cast<int>(s.lens.size());
  const std::vector<f16> q =
      llmk::test::random_tensor<f16>(static_cast<std::int64_t>(batch) * s.heads * s.dim, 1.0f, rng);
  auto decode = [&](std::vector<float>* lse) {
    llmk::DeviceBuffer<f16> d_q(q), d_o(q.size());
    llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(batch) * s.heads);
    const attn::DecodeArgs<f16> a = decode_args<f16>(s, d_q.data(), d_o.data(), d_lse.data());
    const kv::PagedKv<f16, std::int8_t> pages = qc.view(c, false);
    attn::DecodePlan plan;
    REQUIRE(attn::plan_decode_paged(a, pages, &plan, 2).ok());
    llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
    const llmk::Status st = attn::decode_paged(a, pages, plan, ws.data(), ws.size(), nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    *lse = d_lse.to_host();
    return d_o.to_host();
  };
  std::vector<float> lse;
  const std::vector<f16> out = decode(&lse);
  const llmk::reference::AttentionProblem p = decode_problem(s);
  llmk::test::check_attention(p, q, qc.k_deq, qc.v_deq, out, &lse, &qc.k_exact, &qc.v_exact);
  std::vector<float> vs = qc.v_scales.to_host();
  for (float& x : vs) x = std::ldexp(x, -6);
  qc.v_scales = llmk::DeviceBuffer<float>(vs);
  std::vector<float> lse_scaled;
  const std::vector<f16> scaled = decode(&lse_scaled);
  CHECK(lse_scaled == lse);  // the scores do not depend on V
  int compared = 0, bad = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const float want = out[i].to_float() * 0x1p-6f;
    if (!(std::fabs(want) >= 0x1p-14f)) continue;  // a subnormal fp16 result rounds differently
    ++compared;
    if (scaled[i].to_float() != want && bad++ < 5)
      MESSAGE("o[" << i << "] = " << scaled[i].to_float() << ", want " << want);
  }
  CHECK(compared > static_cast<int>(out.size()) / 2);
  CHECK(bad == 0);
}

namespace {

// What a special-value case expects of an output element or LSE: finite (and within the rule of the
// reference), NaN, or non-finite (NaN or +-inf: what an infinite scale may give, docs/kvcache.md).
enum class Want { kFinite, kNan, kNonFinite };

// llmk::test::check_special_values() over a quantized cache: the reference attends over the exact
// dequantized values (exact: decode, which folds the scales in fp32) or over their roundings to T (prefill,
// which computes with T(code * scale)); the naive baseline over the roundings; the rule per row over its
// finite elements. kNonFinite elements may be NaN or +-inf (an infinity there is checked as a NaN).
// Returns the number of output rows holding a non-finite value.
template <class T, class Code, class WantOut, class WantLse>
std::int64_t check_quant_special(const llmk::reference::AttentionProblem& p, const std::vector<T>& q,
                                 const QuantCache<T, Code>& qc, bool exact, std::vector<T> got,
                                 std::vector<float> lse, WantOut&& want_out, WantLse&& want_lse) {
  const std::int64_t n = p.q_elements(), rows = p.total_q() * p.num_heads;
  const int d = p.head_dim;
  REQUIRE(got.size() == static_cast<std::size_t>(n));
  REQUIRE(lse.size() == static_cast<std::size_t>(rows));
  std::vector<double> ref(static_cast<std::size_t>(n)), ref_lse(static_cast<std::size_t>(rows));
  if (exact) {
    std::vector<double> qd(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) qd[i] = static_cast<double>(q[i].to_float());
    llmk::reference::attention_fp64(p, qd.data(), qc.k_exact.data(), qc.v_exact.data(), ref.data(),
                                    ref_lse.data());
  } else {
    llmk::reference::attention_fp64(p, q.data(), qc.k_deq.data(), qc.v_deq.data(), ref.data(),
                                    ref_lse.data());
  }
  std::vector<float> naive(static_cast<std::size_t>(n));
  llmk::reference::attention_naive(p, q.data(), qc.k_deq.data(), qc.v_deq.data(), naive.data());
  std::vector<double> bound(static_cast<std::size_t>(rows));
  std::int64_t nonfinite_rows = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    double row_naive = 0.0, row_max = 0.0;
    bool nonfinite = false;
    for (int col = 0; col < d; ++col) {
      const std::size_t i = static_cast<std::size_t>(row * d + col);
      const double e = std::fabs(static_cast<double>(naive[i]) - ref[i]);
      if (want_out(row, col) == Want::kFinite && std::isfinite(e)) {
        row_naive = std::max(row_naive, e);
        row_max = std::max(row_max, std::fabs(ref[i]));
      }
      nonfinite = nonfinite || !std::isfinite(got[i].to_float());
      if (want_out(row, col) == Want::kNonFinite && std::isinf(got[i].to_float()))
        got[i] = T(std::numeric_limits<float>::quiet_NaN());
    }
    nonfinite_rows += nonfinite;
    bound[static_cast<std::size_t>(row)] = 2.0 * row_naive + llmk::test::output_floor<T>(row_max);
    if (want_lse(row) == Want::kNonFinite && std::isinf(lse[static_cast<std::size_t>(row)]))
      lse[static_cast<std::size_t>(row)] = std::numeric_limits<float>::quiet_NaN();
  }
  llmk::test::check_nan_pattern(
      rows, d, ref, ref_lse, got, &lse,
      [&](std::int64_t row, int col) { return want_out(row, col) != Want::kFinite; },
      [&](std::int64_t row) { return want_lse(row) != Want::kFinite; },
      [&](std::int64_t row, std::int64_t) { return bound[static_cast<std::size_t>(row)]; });
  return nonfinite_rows;
}

// Paged decode over a quantized cache (CSR or block table, `splits` splits) into fresh poisoned buffers.
template <class T, class Code>
std::pair<std::vector<T>, std::vector<float>> run_quant_decode(const Setup& s, const Cache<T>& c,
                                                               const QuantCache<T, Code>& qc,
                                                               const std::vector<T>& q, int splits,
                                                               bool csr) {
  const int batch = static_cast<int>(s.lens.size());
  llmk::DeviceBuffer<T> d_q(q), d_o(q.size());
  llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(batch) * s.heads);
  const attn::DecodeArgs<T> a = decode_args<T>(s, d_q.data(), d_o.data(), d_lse.data());
  const kv::PagedKv<T, Code> pages = qc.view(c, csr);
  attn::DecodePlan plan;
  REQUIRE(attn::plan_decode_paged(a, pages, &plan, splits).ok());
  REQUIRE(plan.num_splits == splits);
  llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
  const llmk::Status st = attn::decode_paged(a, pages, plan, ws.data(), ws.size(), nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  return {d_o.to_host(), d_lse.to_host()};
}

// A causal chunk over a quantized cache: the last min(len, 5) tokens of each sequence as the queries.
struct QuantChunk {
  std::vector<int> cu_q;
  llmk::reference::AttentionProblem p;
};

QuantChunk quant_chunk(const Setup& s) {
  QuantChunk ch;
  const int batch = static_cast<int>(s.lens.size());
  ch.cu_q.assign(batch + 1, 0);
  for (int b = 0; b < batch; ++b) {
    ch.cu_q[b + 1] = ch.cu_q[b] + std::min(s.lens[b], 5);
    ch.p.q_lens.push_back(std::min(s.lens[b], 5));
  }
  ch.p.kv_lens = s.lens;
  ch.p.num_heads = s.heads;
  ch.p.num_kv_heads = s.kv_heads;
  ch.p.head_dim = s.dim;
  ch.p.options.softmax_scale = attn::default_scale(s.dim);
  ch.p.options.causal = true;
  return ch;
}

// prefill_paged (mma false: the dispatch, the Hopper kernel on sm_90) or prefill_paged_mma of a chunk over
// the quantized cache (block table) into fresh poisoned buffers.
template <class T, class Code>
std::pair<std::vector<T>, std::vector<float>> run_quant_prefill(const Setup& s, const Cache<T>& c,
                                                                const QuantCache<T, Code>& qc,
                                                                const QuantChunk& ch, const std::vector<T>& q,
                                                                bool mma) {
  llmk::DeviceBuffer<T> d_q(q), d_o(q.size());
  llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(ch.p.total_q()) * s.heads);
  llmk::DeviceBuffer<int> d_cu_q(ch.cu_q);
  attn::PrefillArgs<T> a = chunk_args<T>(s, d_q.data(), d_o.data(), d_cu_q.data(), ch.cu_q.data());
  a.lse = d_lse.data();
  const llmk::Status st = mma ? attn::prefill_paged_mma(a, qc.view(c, false), nullptr)
                              : attn::prefill_paged(a, qc.view(c, false), nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  return {d_o.to_host(), d_lse.to_host()};
}

// A NaN written through append_kv into an 8-bit cache (docs/kvcache.md): fp8 keeps it as a NaN code, which
// paged decode and prefill propagate as fp16 pages do (docs/attention.md, "Special values"); int8 has no NaN
// code and stores 0 (the per-token-head scale from the finite values), so every output stays finite.
// Planted (the fp16 NaN test's and one more): K at key 5 of KV head 1 in a page shared by sequences 0 and 1;
// V at key 180 of sequence 1 (KV head 0, column 9); K at the last key (36) of sequence 2's short last page
// (KV head 0); V at the last key (149) of sequence 0 (KV head 0, column 30).
//   decode: heads 2, 3 of sequences 0 and 1 and heads 0, 1 of sequence 2 whole (and their LSE); column 9 of
//     heads 0, 1 of sequence 1; column 30 of heads 0, 1 of sequence 0.
//   prefill (the last 5 tokens of each sequence, causal): the same, but K at key 36 reaches only sequence
//     2's last token (the others mask it), and V at key 149 every token of sequence 0: one block holds the
//     sequence's 10 rows (5 tokens x group 2) and loads the keys up to its last visible one, 149, so the
//     rows that do not see it get 0 * NaN too.
template <class Code>
void check_nan_written(kv::KvScale mode, std::mt19937& rng) {
  constexpr bool kInt8 = std::is_same_v<Code, std::int8_t>;
  const std::string code = kInt8 ? "int8" : (std::is_same_v<Code, llmk::float8_e4m3> ? "e4m3" : "e5m2");
  CAPTURE(code);
  Setup s;
  s.lens = {150, 200, 37};
  s.page_size = 16;
  s.shared_prefix = 32;  // sequence 1's first two pages are sequence 0's
  const int row = s.kv_heads * s.dim, batch = static_cast<int>(s.lens.size());
  const float nan = std::nanf("");
  struct Spot {
    bool in_v;
    int b, t, g, col;
  };
  const std::vector<Spot> spots = {
      {false, 0, 5, 1, 17}, {true, 1, 180, 0, 9}, {false, 2, 36, 0, 0}, {true, 0, 149, 0, 30}};
  Cache<f16> c;
  make_cache<f16>(c, s, rng, [&](Cache<f16>& cc) {
    for (const Spot& sp : spots)
      (sp.in_v ? cc.v : cc.k)[(cc.kv_begin[sp.b] + sp.t) * row + sp.g * s.dim + sp.col] = f16(nan);
  });
  QuantCache<f16, Code> qc;
  double rel = 0.0;
  make_quant_cache(qc, c, mode, &rel);
  // The codes at the planted spots: NaN (fp8) or 0 (int8), read back through make_quant_cache.
  for (const Spot& sp : spots) {
    const std::size_t li = (static_cast<std::size_t>(c.kv_begin[sp.b]) + sp.t) * row + sp.g * s.dim + sp.col;
    const double x = (sp.in_v ? qc.v_exact : qc.k_exact)[li];
    CHECK((kInt8 ? x == 0.0 : std::isnan(x)));
  }
  auto hit = [&](int b, int token_pos, int h, int col, bool prefill, bool lse_only) {
    bool reached = false;  // int8 stores the NaNs as 0: nothing is reached
    for (const Spot& sp : spots) {
      if (h / (s.heads / s.kv_heads) != sp.g || (sp.in_v && (lse_only || col != sp.col))) continue;
      // Sequence 1 reads sequence 0's shared pages.
      const bool same_seq = sp.b == b || (sp.b == 0 && b == 1 && sp.t < s.shared_prefix);
      if (!same_seq) continue;
      if (prefill && !sp.in_v && sp.t > token_pos) continue;  // K: only the rows that see the key
      reached = true;
    }
    return !kInt8 && reached;
  };
  // Decode: one query per sequence, splits 1 and 3, both table forms (the same bits).
  const std::vector<f16> q =
      llmk::test::random_tensor<f16>(static_cast<std::int64_t>(batch) * s.heads * s.dim, 1.0f, rng);
  const llmk::reference::AttentionProblem p = decode_problem(s);
  for (int splits : {1, 3}) {
    CAPTURE(splits);
    const auto [o, lse] = run_quant_decode(s, c, qc, q, splits, true);
    const auto [o_table, lse_table] = run_quant_decode(s, c, qc, q, splits, false);
    CHECK(same_bits(o, o_table));
    CHECK(std::memcmp(lse.data(), lse_table.data(), lse.size() * sizeof(float)) == 0);
    auto want = [&](std::int64_t r, int col, bool lse_only) {
      const int b = static_cast<int>(r / s.heads), h = static_cast<int>(r % s.heads);
      return hit(b, s.lens[b] - 1, h, col, false, lse_only) ? Want::kNan : Want::kFinite;
    };
    const std::int64_t nan_rows = check_quant_special(
        p, q, qc, true, o, lse, [&](std::int64_t r, int col) { return want(r, col, false); },
        [&](std::int64_t r) { return want(r, 0, true); });
    CHECK(nan_rows == (kInt8 ? 0 : 10));  // 6 whole rows, 4 with one NaN column
  }
  // Chunked prefill.
  const QuantChunk ch = quant_chunk(s);
  const std::vector<f16> qp =
      llmk::test::random_tensor<f16>(static_cast<std::int64_t>(ch.cu_q[batch]) * s.heads * s.dim, 1.0f, rng);
  auto want = [&](std::int64_t r, int col, bool lse_only) {
    int token = static_cast<int>(r / s.heads), b = 0;
    while (token >= ch.cu_q[b + 1]) ++b;
    const int pos = token - ch.cu_q[b] + s.lens[b] - ch.p.q_lens[b];
    return hit(b, pos, static_cast<int>(r % s.heads), col, true, lse_only) ? Want::kNan : Want::kFinite;
  };
  // The mma.sync kernel for every code; the dispatch too for e4m3 (on sm_90 and in the simulator the Hopper
  // kernel, whose producer dequantizes with the same dequant_chunk16; 0.6 s a launch in the simulator).
  for (bool mma :
       std::is_same_v<Code, llmk::float8_e4m3> ? std::vector<bool>{false, true} : std::vector<bool>{true}) {
    CAPTURE(mma);
    const auto [o, lse] = run_quant_prefill(s, c, qc, ch, qp, mma);
    const std::int64_t nan_rows = check_quant_special(
        ch.p, qp, qc, false, o, lse, [&](std::int64_t r, int col) { return want(r, col, false); },
        [&](std::int64_t r) { return want(r, 0, true); });
    // Sequence 0: 5 tokens x heads 0..3; sequence 1: 5 x heads 0..3; sequence 2: its last token, heads 0, 1.
    CHECK(nan_rows == (kInt8 ? 0 : 5 * 4 + 5 * 4 + 2));
  }
}

}  // namespace

TEST_CASE("quantized paged decode and prefill: a NaN written by append_kv (e4m3, e5m2 NaN codes; int8 0)") {
  std::mt19937 rng(617);
  check_nan_written<llmk::float8_e4m3>(kv::KvScale::kPerHead, rng);
  check_nan_written<llmk::float8_e5m2>(kv::KvScale::kPerTensor, rng);
  check_nan_written<std::int8_t>(kv::KvScale::kPerTokenHead, rng);
}

// A NaN or infinite static per-head scale (docs/kvcache.md: NaN scales propagate, an infinite scale gives an
// infinite or NaN row), e4m3 per head, one KV head at a time: a V scale reaches every column of its group's
// heads (decode folds it into P, code_tiles.cuh VScaleFold; prefill dequantizes with it), their LSE
// unchanged; a K scale their whole rows and LSEs. The other KV head's heads meet the reference.
TEST_CASE("quantized paged decode and prefill: a NaN or infinite per-head K or V scale (e4m3)") {
  std::mt19937 rng(618);
  Setup s;
  s.lens = {150, 61, 37};
  s.page_size = 16;
  const int batch = static_cast<int>(s.lens.size()), group = s.heads / s.kv_heads;
  Cache<f16> c;
  QuantCache<f16, llmk::float8_e4m3> qc;
  const std::vector<f16> q = quantized_cache(c, qc, s, kv::KvScale::kPerHead, 1.0 / 16 + 1e-3, rng);
  const QuantChunk ch = quant_chunk(s);
  const std::vector<f16> qp =
      llmk::test::random_tensor<f16>(static_cast<std::int64_t>(ch.cu_q[batch]) * s.heads * s.dim, 1.0f, rng);
  const std::vector<float> ks = qc.k_scales.to_host(), vs = qc.v_scales.to_host();
  const float inf = std::numeric_limits<float>::infinity();
  struct Bad {
    bool in_v;
    int g;
    float scale;
  };
  for (const Bad bad :
       {Bad{true, 0, std::nanf("")}, Bad{true, 1, inf}, Bad{false, 1, std::nanf("")}, Bad{false, 0, inf}}) {
    CAPTURE(bad.in_v);
    CAPTURE(bad.g);
    CAPTURE(bad.scale);
    std::vector<float> k2 = ks, v2 = vs;
    (bad.in_v ? v2 : k2)[static_cast<std::size_t>(bad.g)] = bad.scale;
    qc.k_scales = llmk::DeviceBuffer<float>(k2);
    qc.v_scales = llmk::DeviceBuffer<float>(v2);
    // The values the reference attends over.
    std::vector<double>& exact = bad.in_v ? qc.v_exact : qc.k_exact;
    std::vector<f16>& deq = bad.in_v ? qc.v_deq : qc.k_deq;
    const std::vector<double> exact0 = exact;
    const std::vector<f16> deq0 = deq;
    const float old = (bad.in_v ? vs : ks)[static_cast<std::size_t>(bad.g)];
    for (std::size_t i = 0; i < exact.size(); ++i)
      if (static_cast<int>(i / s.dim) % s.kv_heads == bad.g) {
        const double code = exact[i] / old;  // exact[i] = code * old exactly (two floats' product)
        exact[i] = code * bad.scale;
        deq[i] = f16(static_cast<float>(code) * bad.scale);
      }
    const Want kind = std::isnan(bad.scale) ? Want::kNan : Want::kNonFinite;
    auto want_out = [&](std::int64_t r, int) { return r % s.heads / group == bad.g ? kind : Want::kFinite; };
    auto want_lse = [&](std::int64_t r) {
      return !bad.in_v && r % s.heads / group == bad.g ? kind : Want::kFinite;
    };
    for (int splits : {1, 3}) {
      CAPTURE(splits);
      const auto [o, lse] = run_quant_decode(s, c, qc, q, splits, false);
      CHECK(check_quant_special(decode_problem(s), q, qc, true, o, lse, want_out, want_lse) == batch * group);
    }
    // Prefill: the mma.sync kernel (the Hopper kernel dequantizes with the same dequant_chunk16; it runs the
    // NaN codes above).
    const auto [o, lse] = run_quant_prefill(s, c, qc, ch, qp, true);
    CHECK(check_quant_special(ch.p, qp, qc, false, o, lse, want_out, want_lse) == ch.p.total_q() * group);
    exact = exact0;
    deq = deq0;
  }
}

TEST_CASE("paged prefill over several Br and Bc tiles: windows, page size 5 (no shift path), int8 HND") {
  std::mt19937 rng(607);
  Setup s;
  s.lens = {200, 150};
  s.page_size = 5;
  s.hnd = true;
  s.heads = 4;
  s.kv_heads = 2;
  Cache<f16> c;
  make_cache<f16>(c, s, rng);
  QuantCache<f16, std::int8_t> qc;
  double rel = 0.0;
  make_quant_cache(qc, c, kv::KvScale::kPerTokenHead, &rel);
  std::vector<int> cu_q = {0, 70,
                           140};  // 70 new tokens each: 140 packed rows, two Br tiles; keys span 4 Bc tiles
  const std::vector<f16> q = llmk::test::random_tensor<f16>(140LL * s.heads * s.dim, 1.0f, rng);
  llmk::DeviceBuffer<f16> d_q(q), d_k(c.k), d_v(c.v), d_kd(qc.k_deq), d_vd(qc.v_deq);
  llmk::DeviceBuffer<int> d_cu_q(cu_q), d_cu_k(c.kv_begin);
  // Sanitizer builds (LLMK_TEST_FAST): the windowed run only (its tiles include unmasked ones; the chunked
  // prefill test above covers no window).
  for (int window : llmk::test::fast() ? std::vector<int>{50} : std::vector<int>{-1, 50}) {
    CAPTURE(window);
    llmk::DeviceBuffer<f16> o_paged(q.size()), o_dense(q.size()), o_quant(q.size()), o_deq(q.size());
    attn::PrefillArgs<f16> a = chunk_args<f16>(s, d_q.data(), o_paged.data(), d_cu_q.data(), cu_q.data());
    a.options.window_left = window;
    REQUIRE(attn::prefill_paged(a, c.view(true), nullptr).ok());
    a.o = o_quant.data();
    REQUIRE(attn::prefill_paged(a, qc.view(c, false), nullptr).ok());
    attn::PrefillArgs<f16> dense =
        with_dense_kv(a, s, d_k.data(), d_v.data(), d_cu_k.data(), c.kv_begin.data());
    dense.o = o_dense.data();
    REQUIRE(attn::prefill(dense, nullptr).ok());
    dense.k = d_kd.data();
    dense.v = d_vd.data();
    dense.o = o_deq.data();
    REQUIRE(attn::prefill(dense, nullptr).ok());
    CHECK(same_bits(o_paged.to_host(), o_dense.to_host()));
    CHECK(same_bits(o_quant.to_host(), o_deq.to_host()));
    llmk::reference::AttentionProblem p;
    p.q_lens = {70, 70};
    p.kv_lens = s.lens;
    p.num_heads = s.heads;
    p.num_kv_heads = s.kv_heads;
    p.head_dim = s.dim;
    p.options = a.options;
    llmk::test::check_attention(p, q, c.k, c.v, o_paged.to_host(), nullptr);
    if (llmk::device_arch() == 900) {
      // The Hopper kernel with one-slot rings (the producer publishes K_j before awaiting V_j's slot) and
      // 48-key tiles (int8 pages: three 16-row code pieces per tile, converted a chunk at a time), fp16 and
      // int8 pages: the same answers as its default tiles within the rule.
      using OneSlot = attn::Sm90PrefillConfig<64, 48, 1>;
      a.o = o_paged.data();
      o_paged.poison();  // it holds the default tiles' answer
      REQUIRE(attn::prefill_paged_sm90_with_config<f16, OneSlot>(a, c.view(true), nullptr).ok());
      llmk::test::check_attention(p, q, c.k, c.v, o_paged.to_host(), nullptr);
      a.o = o_quant.data();
      o_quant.poison();
      REQUIRE(attn::prefill_paged_sm90_with_config<f16, OneSlot, std::int8_t>(a, qc.view(c, false), nullptr)
                  .ok());
      llmk::test::check_attention(p, q, qc.k_deq, qc.v_deq, o_quant.to_host(), nullptr);
    }
  }
}

TEST_CASE("paged KV: strides that do not fit the heads or overlap are rejected before any access") {
  std::mt19937 rng(608);
  Setup s;
  s.lens = {12, 7};
  s.page_size = 4;
  Cache<f16> c;
  make_cache<f16>(c, s, rng);
  llmk::DeviceBuffer<f16> d_q(2 * 4 * s.dim), d_o(2 * 4 * s.dim);
  attn::DecodeArgs<f16> a;
  a.q = d_q.data();
  a.o = d_o.data();
  a.q_stride_batch = a.o_stride_batch = 4 * s.dim;
  a.q_stride_head = a.o_stride_head = s.dim;
  a.batch = 2;
  a.num_heads = 4;
  a.num_kv_heads = 4;  // the pool was laid out for 2 KV heads
  a.head_dim = s.dim;
  a.options.softmax_scale = 0.125f;
  attn::DecodePlan plan;
  CHECK(attn::plan_decode_paged(a, c.view(false), &plan, 1).message().find("rows overlap") !=
        std::string::npos);
  a.num_kv_heads = 2;
  kv::PagedKv<f16> p = c.view(false);
  p.strides = {512, 128, 8};  // heads 8 elements apart: rows of 64 overlap
  CHECK(attn::plan_decode_paged(a, p, &plan, 1).message().find("rows overlap") != std::string::npos);
  p = c.view(false);
  p.strides.page = p.strides.page - 8;  // pages overlap
  CHECK(attn::plan_decode_paged(a, p, &plan, 1).message().find("strides.page") != std::string::npos);
  // The host conversions between the two table forms: empty input, and each rule named (out unchanged).
  kv::BlockTable bt;
  REQUIRE(kv::csr_to_block_table(kv::CsrPageTable{}, 4, &bt).ok());
  CHECK(bt.table.empty());
  CHECK(bt.max_blocks == 1);
  kv::CsrPageTable csr;
  auto names = [](const llmk::Status& st, const char* arg) {
    CHECK_MESSAGE(st.message().find(std::string("'") + arg + "'") != std::string::npos, st.message());
  };
  kv::BlockTable bad = c.table;
  bad.seq_lens[0] = bad.max_blocks * s.page_size + 1;
  names(kv::block_table_to_csr(bad, s.page_size, &csr), "seq_lens");
  bad = c.table;
  bad.seq_lens[1] = -1;
  names(kv::block_table_to_csr(bad, s.page_size, &csr), "seq_lens");
  bad = c.table;
  bad.table.pop_back();  // smaller than batch x max_blocks
  names(kv::block_table_to_csr(bad, s.page_size, &csr), "table");
  names(kv::block_table_to_csr(c.table, 0, &csr), "page_size");
  names(kv::block_table_to_csr(c.table, s.page_size, nullptr), "out");
  CHECK(csr.indptr.empty());  // unchanged by the failed calls
  kv::CsrPageTable bad_csr = c.csr;
  bad_csr.indices.pop_back();
  names(kv::csr_to_block_table(bad_csr, s.page_size, &bt), "indices");
  bad_csr = c.csr;
  bad_csr.last_page_len.pop_back();
  names(kv::csr_to_block_table(bad_csr, s.page_size, &bt), "last_page_len");
  bad_csr = c.csr;
  bad_csr.last_page_len[0] = s.page_size + 1;  // sequence 0 has pages
  names(kv::csr_to_block_table(bad_csr, s.page_size, &bt), "last_page_len");
  bad_csr = c.csr;
  std::swap(bad_csr.indptr[1], bad_csr.indptr[2]);  // decreasing
  names(kv::csr_to_block_table(bad_csr, s.page_size, &bt), "page_indptr");
  names(kv::csr_to_block_table(c.csr, 0, &bt), "page_size");
  CHECK(bt.table.empty());  // unchanged
}

TEST_CASE("paged KV: misaligned tables, indices and scales, and sizes past 2^31 / 2^63 are rejected") {
  TwoSequences in(609);
  const Setup& s = in.s;
  Cache<f16>& c = in.c;
  attn::DecodePlan plan;
  auto expect = [](const llmk::Status& st, const char* needle) {
    CHECK_FALSE(st.ok());
    INFO(st.message());
    CHECK(st.message().find(needle) != std::string::npos);
  };
  // The kernels read the tables as int32: a pointer off by 2 bytes is a Status, not a misaligned load.
  const auto off2 = [](const int* p) {
    return reinterpret_cast<const int*>(reinterpret_cast<const char*>(p) + 2);
  };
  kv::PagedKv<f16> p = c.view(true);
  p.page_indptr = off2(p.page_indptr);
  expect(attn::plan_decode_paged(in.a, p, &plan, 1), "'pages.page_indptr': must be aligned");
  p = c.view(true);
  p.page_indices = off2(p.page_indices);
  expect(attn::plan_decode_paged(in.a, p, &plan, 1), "'pages.page_indices': must be aligned");
  p = c.view(true);
  p.last_page_len = off2(p.last_page_len);
  expect(attn::plan_decode_paged(in.a, p, &plan, 1), "'pages.last_page_len': must be aligned");
  p = c.view(false);
  p.block_table = off2(p.block_table);
  expect(attn::plan_decode_paged(in.a, p, &plan, 1), "'pages.block_table': must be aligned");
  p = c.view(false);
  p.seq_lens = off2(p.seq_lens);
  expect(attn::plan_decode_paged(in.a, p, &plan, 1), "'pages.seq_lens': must be aligned");

  // Strides whose products pass 2^63 (the old checks multiplied in int64 and could wrap into a pass).
  expect(kv::check_page_strides({1024, 64, std::int64_t{1} << 61}, 16, 8, 64), "strides.page");
  expect(kv::check_page_strides({1024, std::int64_t{1} << 60, 64}, 16, 8, 64), "strides.page");
  CHECK(kv::check_page_strides(kv::make_nhd_strides(16, 8, 64), 16, 8, 64).ok());

  // copy_pages: int32 page lists, fp32 scales, and a page of more than 2^31 rows (int row indices).
  llmk::DeviceBuffer<int> d_pairs(std::vector<int>{0, 1});
  llmk::DeviceBuffer<float> d_scales(64);
  const auto copy = [&](const int* src, const int* dst, float* ks, float* vs) {
    return kv::copy_pages(c.k_pool.data(), c.v_pool.data(), c.strides, s.page_size, c.num_pages, s.kv_heads,
                          s.dim, src, dst, 1, nullptr, ks, vs);
  };
  expect(copy(off2(d_pairs.data()), d_pairs.data() + 1, nullptr, nullptr), "'src': must be aligned");
  expect(copy(d_pairs.data(), off2(d_pairs.data() + 1), nullptr, nullptr), "'dst': must be aligned");
  float* scales_off = reinterpret_cast<float*>(reinterpret_cast<char*>(d_scales.data()) + 2);
  expect(copy(d_pairs.data(), d_pairs.data() + 1, scales_off, d_scales.data()),
         "'k_scales': must be aligned");
  expect(copy(d_pairs.data(), d_pairs.data() + 1, d_scales.data(), scales_off),
         "'v_scales': must be aligned");
  const int big_page = 1 << 16, big_heads = 1 << 15;  // 2^31 rows a page; never accessed
  expect(kv::copy_pages(c.k_pool.data(), c.v_pool.data(), kv::make_nhd_strides(big_page, big_heads, 8),
                        big_page, 1, big_heads, 8, d_pairs.data(), d_pairs.data() + 1, 1, nullptr),
         "'page_size/kv_heads': page_size * kv_heads must be < 2^31");

  // append_kv reads slot_mapping as int64.
  llmk::DeviceBuffer<f16> d_new(static_cast<std::size_t>(s.kv_heads) * s.dim);
  llmk::DeviceBuffer<std::int64_t> d_slots(std::vector<std::int64_t>{0, 0});
  kv::AppendArgs<f16> ap;
  ap.k = ap.v = d_new.data();
  ap.k_stride_token = ap.v_stride_token = static_cast<std::int64_t>(s.kv_heads) * s.dim;
  ap.k_stride_head = ap.v_stride_head = s.dim;
  ap.slot_mapping = reinterpret_cast<const std::int64_t*>(reinterpret_cast<const char*>(d_slots.data()) + 4);
  ap.num_tokens = 1;
  ap.kv_heads = s.kv_heads;
  ap.head_dim = s.dim;
  ap.k_pages = c.k_pool.data();
  ap.v_pages = c.v_pool.data();
  ap.strides = c.strides;
  ap.page_size = s.page_size;
  ap.num_pages = c.num_pages;
  expect(kv::append_kv(ap, nullptr), "'slot_mapping': must be aligned");
  ap.slot_mapping = d_slots.data();
  ap.head_dim = (1 << 30) + 8;  // the column loops count in int: c + 256 would wrap near 2^31
  expect(kv::append_kv(ap, nullptr),
         "'head_dim': must be a positive multiple of 8 (16-byte rows) up to 2^30");
}

namespace {

// A sub-batch of a cache's sequences (`ids`, in batch order) as a CSR table over the same pool.
struct SubTable {
  std::vector<int> ids, indptr, indices, last;
  llmk::DeviceBuffer<int> d_indptr, d_indices, d_last;

  SubTable(const kv::CsrPageTable& csr, std::vector<int> seq_ids) : ids(std::move(seq_ids)) {
    indptr.push_back(0);
    for (int id : ids) {
      for (int i = csr.indptr[id]; i < csr.indptr[id + 1]; ++i) indices.push_back(csr.indices[i]);
      indptr.push_back(static_cast<int>(indices.size()));
      last.push_back(csr.last_page_len[id]);
    }
    d_indptr = llmk::DeviceBuffer<int>(indptr);
    d_indices = llmk::DeviceBuffer<int>(indices.empty() ? std::vector<int>{0} : indices);
    d_last = llmk::DeviceBuffer<int>(last);
  }
  template <class T, class Code>
  kv::PagedKv<T, Code> view(kv::PagedKv<T, Code> p) const {
    p.page_indptr = d_indptr.data();
    p.page_indices = d_indices.data();
    p.last_page_len = d_last.data();
    p.page_indptr_host = indptr.data();
    p.last_page_len_host = last.data();
    p.page_indices_host = indices.data();  // the opt-in host check of every page id
    p.block_table = p.seq_lens = p.seq_lens_host = p.block_table_host = nullptr;
    return p;
  }
};

struct SubOut {
  std::vector<std::vector<unsigned char>> bits;  // per sequence of the sub-batch: its output and LSE bytes
  std::vector<f16> o;
  std::vector<float> lse;
  int splits = 0;
};

// Batch-invariant paged decode of a sub-batch; q_all holds every cache sequence's query [heads, dim].
template <class Code>
SubOut decode_sub(const kv::PagedKv<f16, Code>& pool, const Setup& s, const std::vector<f16>& q_all,
                  const SubTable& t, int window, attn::DecodeSplits splits) {
  const int batch = static_cast<int>(t.ids.size()), qrow = s.heads * s.dim;
  std::vector<f16> q;
  for (int id : t.ids) q.insert(q.end(), q_all.begin() + id * qrow, q_all.begin() + (id + 1) * qrow);
  llmk::DeviceBuffer<f16> d_q(q), d_o(q.size());
  llmk::DeviceBuffer<float> d_lse(static_cast<std::size_t>(batch) * s.heads);
  attn::DecodeArgs<f16> a;
  a.q = d_q.data();
  a.o = d_o.data();
  a.lse = d_lse.data();
  a.q_stride_batch = a.o_stride_batch = qrow;
  a.q_stride_head = a.o_stride_head = s.dim;
  a.batch = batch;
  a.num_heads = s.heads;
  a.num_kv_heads = s.kv_heads;
  a.head_dim = s.dim;
  a.options.softmax_scale = attn::default_scale(s.dim);
  a.options.window_left = window;
  const kv::PagedKv<f16, Code> pages = t.view(pool);
  attn::DecodePlan plan;
  const llmk::Status planned = attn::plan_decode_paged(a, pages, &plan, splits);
  REQUIRE_MESSAGE(planned.ok(), planned.message());
  llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
  const llmk::Status st = attn::decode_paged(a, pages, plan, ws.data(), ws.size(), nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SubOut out;
  out.o = d_o.to_host();
  out.lse = d_lse.to_host();
  out.splits = plan.num_splits;
  for (int b = 0; b < batch; ++b) {
    std::vector<unsigned char> bytes(qrow * sizeof(f16) + s.heads * sizeof(float));
    std::memcpy(bytes.data(), out.o.data() + b * qrow, qrow * sizeof(f16));
    std::memcpy(bytes.data() + qrow * sizeof(f16), out.lse.data() + b * s.heads, s.heads * sizeof(float));
    out.bits.push_back(std::move(bytes));
  }
  return out;
}

// Sequences 0 (1000 keys: two 512-key splits) and 1 (77 keys: one split) decoded alone and inside batches
// whose longest sequence changes the grid's split count: the same bits (memcmp) every time; the mixed batch
// also meets the fp64 reference on the values the kernel reads (k, v: dequantized for an 8-bit cache).
template <class Code>
void check_batch_invariant(const kv::PagedKv<f16, Code>& pool, const Cache<f16>& c, const std::vector<f16>& k,
                           const std::vector<f16>& v, const std::vector<f16>& q_all, int window,
                           bool all_batches, int keys_per_split, const std::vector<double>* k_exact = nullptr,
                           const std::vector<double>* v_exact = nullptr) {
  CAPTURE(window);
  const auto invariant = attn::DecodeSplits::batch_invariant(keys_per_split);
  const SubTable alone0(c.csr, {0}), alone1(c.csr, {1});
  const SubOut a0 = decode_sub(pool, c.s, q_all, alone0, window, invariant);
  const SubOut a1 = decode_sub(pool, c.s, q_all, alone1, window, invariant);
  CHECK(a1.splits == 1);  // the direct write path
  std::vector<std::vector<int>> batches = {{2, 1, 3, 0}};
  if (all_batches) batches.insert(batches.end(), {{1, 0}, {4, 0, 5, 1, 2}});
  for (const std::vector<int>& ids : batches) {
    const SubTable t(c.csr, ids);
    const SubOut out = decode_sub(pool, c.s, q_all, t, window, invariant);
    CHECK(out.splits > 1);  // the merge path
    for (std::size_t j = 0; j < ids.size(); ++j) {
      CAPTURE(j);
      if (ids[j] == 0) CHECK(out.bits[j] == a0.bits[0]);
      if (ids[j] == 1) CHECK(out.bits[j] == a1.bits[0]);
    }
    if (ids.size() != 4) continue;
    llmk::reference::AttentionProblem p;
    std::vector<f16> q, kr, vr;
    std::vector<double> kx, vx;
    const int row = c.s.kv_heads * c.s.dim, qrow = c.s.heads * c.s.dim;
    for (int id : ids) {
      p.kv_lens.push_back(c.s.lens[id]);
      q.insert(q.end(), q_all.begin() + id * qrow, q_all.begin() + (id + 1) * qrow);
      kr.insert(kr.end(), k.begin() + c.kv_begin[id] * row, k.begin() + c.kv_begin[id + 1] * row);
      vr.insert(vr.end(), v.begin() + c.kv_begin[id] * row, v.begin() + c.kv_begin[id + 1] * row);
      if (k_exact == nullptr) continue;
      kx.insert(kx.end(), k_exact->begin() + c.kv_begin[id] * row,
                k_exact->begin() + c.kv_begin[id + 1] * row);
      vx.insert(vx.end(), v_exact->begin() + c.kv_begin[id] * row,
                v_exact->begin() + c.kv_begin[id + 1] * row);
    }
    p.q_lens.assign(ids.size(), 1);
    p.num_heads = c.s.heads;
    p.num_kv_heads = c.s.kv_heads;
    p.head_dim = c.s.dim;
    p.options.softmax_scale = attn::default_scale(c.s.dim);
    p.options.causal = true;
    p.options.window_left = window;
    llmk::test::check_attention(p, q, kr, vr, out.o, &out.lse, k_exact ? &kx : nullptr,
                                k_exact ? &vx : nullptr);
  }
}

}  // namespace

TEST_CASE(
    "paged decode, batch-invariant splits: a request's bits do not depend on its batch, every cache dtype") {
  std::mt19937 rng(609);
  Setup s;
  // Sequence 0 needs several splits, sequence 1 exactly one. Sanitizer builds: 64-key splits (the d64 key
  // tile) of shorter sequences, the same structure at a tenth of the keys.
  const bool fast = llmk::test::fast();
  const int chunk = fast ? 64 : attn::kBatchInvariantKeysPerSplit;
  s.lens = fast ? std::vector<int>{130, 50, 150, 5, 0, 40} : std::vector<int>{1000, 77, 1100, 5, 0, 300};
  s.page_size = 16;
  Cache<f16> c;
  make_cache<f16>(c, s, rng);
  const std::vector<f16> q =
      llmk::test::random_tensor<f16>(static_cast<std::int64_t>(s.lens.size()) * s.heads * s.dim, 1.0f, rng);
  check_batch_invariant(c.view(true), c, c.k, c.v, q, -1, true, chunk);
  if (!fast) check_batch_invariant(c.view(true), c, c.k, c.v, q, 700, false, chunk);
  double rel = 0.0;
  {
    QuantCache<f16, std::int8_t> qc;
    make_quant_cache(qc, c, kv::KvScale::kPerTokenHead, &rel);
    check_batch_invariant(qc.view(c, true), c, qc.k_deq, qc.v_deq, q, -1, false, chunk, &qc.k_exact,
                          &qc.v_exact);
  }
  if (fast) return;
  {
    QuantCache<f16, llmk::float8_e4m3> qc;
    make_quant_cache(qc, c, kv::KvScale::kPerTensor, &rel);
    check_batch_invariant(qc.view(c, true), c, qc.k_deq, qc.v_deq, q, -1, false, chunk, &qc.k_exact,
                          &qc.v_exact);
  }
  {
    QuantCache<f16, llmk::float8_e5m2> qc;
    make_quant_cache(qc, c, kv::KvScale::kPerHead, &rel);
    check_batch_invariant(qc.view(c, true), c, qc.k_deq, qc.v_deq, q, -1, false, chunk, &qc.k_exact,
                          &qc.v_exact);
  }
}

TEST_CASE("validate_paged_kv's max_len: the longest sequence of either table form, from the host lengths") {
  // The Hopper paged prefill sizes its block order's L2 sections by it (attention/block_order.cuh). Only
  // the host lengths are read: the device pointers below are never dereferenced.
  alignas(16) static f16 pool[16];
  static const int device_table[1] = {0};
  auto base = [] {
    kv::PagedKv<f16, f16> p;
    p.k_pages = pool;
    p.v_pages = pool;
    p.page_size = 4;
    p.num_pages = 8;
    p.strides.head = 16;
    p.strides.slot = 16;
    p.strides.page = 64;
    return p;
  };
  int max_len = -1;
  kv::PagedKv<f16, f16> table = base();
  const int lens[3] = {5, 0, 17};
  table.block_table = device_table;
  table.seq_lens = lens;
  table.seq_lens_host = lens;
  table.max_blocks_per_seq = 5;
  REQUIRE(kv::validate_paged_kv(table, 3, 1, 16, &max_len).ok());
  CHECK(max_len == 17);
  REQUIRE(kv::validate_paged_kv(table, 2, 1, 16, &max_len).ok());
  CHECK(max_len == 5);
  kv::PagedKv<f16, f16> csr = base();
  const int indptr[4] = {0, 2, 2, 5}, last[3] = {3, 4, 1};  // 7, 0 and 9 tokens
  csr.page_indptr = indptr;
  csr.page_indices = device_table;
  csr.last_page_len = last;
  csr.page_indptr_host = indptr;
  csr.last_page_len_host = last;
  REQUIRE(kv::validate_paged_kv(csr, 3, 1, 16, &max_len).ok());
  CHECK(max_len == 9);
  REQUIRE(kv::validate_paged_kv(csr, 1, 1, 16, &max_len).ok());
  CHECK(max_len == 7);
  REQUIRE(kv::validate_paged_kv(csr, 0, 1, 16, &max_len).ok());
  CHECK(max_len == 0);
}

TEST_CASE("page tables checked on the host: every error names the sequence and the entry") {
  // 3 sequences of 20, 0 and 9 tokens in pages of 8 in a pool of 10: 3 + 0 + 2 pages.
  const int page_size = 8, num_pages = 10;
  const std::vector<int> indptr = {0, 3, 3, 5}, indices = {4, 0, 9, 7, 2}, last = {4, 0, 1};
  const std::vector<int> lens = {20, 0, 9}, table = {4, 0, 9, -1, -1, -1, -1, -1, 7, 2, -1, -1};  // 4 per row
  CHECK(kv::check_page_table_host(indptr.data(), indices.data(), last.data(), 3, page_size, num_pages).ok());
  CHECK(kv::check_block_table_host(table.data(), 4, lens.data(), 3, page_size, num_pages).ok());
  CHECK(kv::check_page_table_host(indptr.data(), nullptr, last.data(), 0, page_size, num_pages).ok());

  auto csr = [&](std::vector<int> ip, std::vector<int> idx, std::vector<int> lp, int batch = 3) {
    return kv::check_page_table_host(ip.data(), idx.empty() ? nullptr : idx.data(), lp.data(), batch,
                                     page_size, num_pages)
        .message();
  };
  auto bt = [&](std::vector<int> tb, std::vector<int> ln, int width = 4) {
    return kv::check_block_table_host(tb.data(), width, ln.data(), 3, page_size, num_pages).message();
  };
  auto has = [](const std::string& message, const char* needle) {
    INFO(message);
    CHECK(message.find(needle) != std::string::npos);
  };
  // Out-of-range and negative ids, with the sequence, its logical page and the entry.
  has(csr(indptr, {4, 0, 9, 10, 2}, last),
      "'page_indices': sequence 2, logical page 0 (entry 3): page id 10 is outside the pool [0, 10)");
  has(csr(indptr, {4, -1, 9, 7, 2}, last),
      "sequence 0, logical page 1 (entry 1): page id -1 is outside the pool");
  has(bt({4, 0, 9, -1, -1, -1, -1, -1, 7, 1200, -1, -1}, lens),
      "'block_table': sequence 2, logical page 1 (entry 9): page id 1200 is outside the pool [0, 10)");
  has(bt({4, 0, -1, -1, -1, -1, -1, -1, 7, 2, -1, -1}, lens),
      "sequence 0, logical page 2 (entry 2): page id -1");
  // Lengths: too few table entries for a length, negative lengths, CSR last-page lengths and offsets.
  has(bt(table, {33, 0, 9}), "sequence 0: 33 tokens need 5 pages of 8, a block-table row holds");
  has(bt(table, {20, -2, 9}), "'seq_lens': sequence 1: length -2 < 0");
  has(csr(indptr, indices, {4, 0, 9}), "'last_page_len': sequence 2: must be in [1, page_size = 8]");
  has(csr(indptr, indices, {0, 0, 1}), "sequence 0");
  has(csr({0, 3, 2, 5}, indices, last), "'page_indptr': must not decrease: sequence 1");
  has(csr({1, 3, 3, 5}, indices, last), "'page_indptr': must start at 0");
  // Null pointers, bad geometry.
  has(csr(indptr, {}, last), "'page_indices': must not be null");
  has(kv::check_page_table_host(nullptr, indices.data(), last.data(), 3, page_size, num_pages).message(),
      "'page_indptr': must not be null");
  has(kv::check_page_table_host(indptr.data(), indices.data(), nullptr, 3, page_size, num_pages).message(),
      "'last_page_len': must not be null");
  has(kv::check_block_table_host(nullptr, 4, lens.data(), 3, page_size, num_pages).message(),
      "'block_table': must not be null");
  has(kv::check_block_table_host(table.data(), 4, nullptr, 3, page_size, num_pages).message(),
      "'seq_lens': must not be null");
  has(bt(table, lens, 0), "'max_blocks_per_seq'");
  has(kv::check_block_table_host(table.data(), 4, lens.data(), 3, page_size, 0).message(), "'num_pages'");
  has(kv::check_page_table_host(indptr.data(), indices.data(), last.data(), 3, 0, num_pages).message(),
      "'page_size'");
  has(kv::check_page_table_host(indptr.data(), indices.data(), last.data(), -1, page_size, num_pages)
          .message(),
      "'batch'");

  // Opt-in through the launchers: a PagedKv with the host copy of its page ids is checked by plan and run.
  TwoSequences in(610);
  const Setup& s = in.s;
  Cache<f16>& c = in.c;
  const attn::DecodeArgs<f16>& a = in.a;
  attn::DecodePlan plan;
  for (bool csr_form : {true, false}) {
    CAPTURE(csr_form);
    kv::PagedKv<f16> p = c.view(csr_form);
    std::vector<int> host = csr_form ? c.csr.indices : c.table.table;
    (csr_form ? p.page_indices_host : p.block_table_host) = host.data();
    REQUIRE(attn::plan_decode_paged(a, p, &plan, 1).ok());
    host[csr_form ? 3 : c.table.max_blocks] = c.num_pages;  // sequence 1, logical page 0
    has(attn::plan_decode_paged(a, p, &plan, 1).message(), "sequence 1, logical page 0");
    has(attn::decode_paged(a, p, plan, nullptr, 0, nullptr).message(), "is outside the pool");
    attn::PrefillArgs<f16> pa;
    pa.q = in.d_q.data();
    pa.o = in.d_o.data();
    pa.q_stride_token = pa.o_stride_token = s.heads * s.dim;
    pa.q_stride_head = pa.o_stride_head = s.dim;
    pa.q_len = 1;
    pa.batch = 2;
    pa.num_heads = s.heads;
    pa.num_kv_heads = s.kv_heads;
    pa.head_dim = s.dim;
    pa.options.softmax_scale = 0.125f;
    has(attn::prefill_paged(pa, p, nullptr).message(), "is outside the pool");
  }
}
