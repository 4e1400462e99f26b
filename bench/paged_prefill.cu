// Chunked prefill over a paged KV cache (llmk/attention/prefill.cuh, prefill_paged) against the dense prefill
// of the same shape in the same binary: what an engine runs when a chunk of new tokens attends to its
// sequence's cached keys and to itself.
//
// BM_PagedPrefill<T[, Code]>: batch sequences of kv_len keys each, already in the cache (the chunk's own keys
// included), and q_len new queries per sequence (its last q_len tokens), causal; NHD pages of page_size
// tokens, one shuffled pool, block-table form. Code: the cache's element (T: fp16/bf16 pages; int8 with
// per-token-head scales; e4m3 with one per-tensor scale, both dequantized to T on the way into the tensor
// cores). Head dim 128 only (one explicit instantiation per cache type: prefill_paged_with_config).
// BM_DenseChunkPrefill<T>: prefill_with_config over dense [batch * kv_len, kv_heads, d] K/V with the same
// queries (the paged form's anchor: ratio = dense time / paged time, the cost of the pages and, for 8-bit
// caches, of dequantizing them).
//
// Arguments: batch, q_len, kv_len, heads, kv_heads, d, page_size (dense: 0).
// Counters:
//   FLOP/s   FLOPs = 4 * batch * heads * d * (the (query, key) pairs the causal mask keeps: q_len * (kv_len -
//            q_len) + q_len * (q_len + 1) / 2), FlashAttention's count.
//   bytes/s  bytes = Q read + O written (T) + K and V read once at their stored width (+ the per-row int8
//            scales).
// On the Hopper GPU both run the wgmma kernel (prefill_sm90.cuh; the paged one with its producer warpgroup
// gathering or dequantizing pages); elsewhere the mma.sync kernel (the paged one with its own tiles,
// DefaultPagedPrefillConfig).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

#include "llmk/attention/prefill.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/kvcache/paged_kv.cuh"
#include "support/bench_data.hpp"
#include "support/gpu_timer.hpp"
#include "support/page_pool.hpp"

namespace {

namespace attn = llmk::attention;
namespace kv = llmk::kvcache;
using llmk::half;
using llmk::bench::fill_normal;

constexpr int kDim = 128;  // the one head dim instantiated

struct ChunkShape {
  int batch, q_len, kv_len, heads, kv_heads, d, page_size;
  explicit ChunkShape(const benchmark::State& st)
      : batch(static_cast<int>(st.range(0))),
        q_len(static_cast<int>(st.range(1))),
        kv_len(static_cast<int>(st.range(2))),
        heads(static_cast<int>(st.range(3))),
        kv_heads(static_cast<int>(st.range(4))),
        d(static_cast<int>(st.range(5))),
        page_size(static_cast<int>(st.range(6))) {}
  std::size_t q_count() const { return static_cast<std::size_t>(batch) * q_len * heads * d; }
  std::size_t kv_count() const { return static_cast<std::size_t>(batch) * kv_len * kv_heads * d; }
  double flops() const {
    const double pairs = static_cast<double>(q_len) * (kv_len - q_len) + 0.5 * q_len * (q_len + 1.0);
    return 4.0 * batch * heads * d * pairs;
  }
};

// Causal chunk arguments over q / o (K/V and the key lengths set by the caller).
template <class T>
attn::PrefillArgs<T> chunk_args(const ChunkShape& s, const T* q, T* o) {
  attn::PrefillArgs<T> a;
  a.q = q;
  a.o = o;
  a.q_stride_token = a.o_stride_token = static_cast<std::int64_t>(s.heads) * s.d;
  a.q_stride_head = a.o_stride_head = s.d;
  a.q_len = s.q_len;
  a.batch = s.batch;
  a.num_heads = s.heads;
  a.num_kv_heads = s.kv_heads;
  a.head_dim = s.d;
  a.options.softmax_scale = attn::default_scale(s.d);
  a.options.causal = true;
  return a;
}

template <class T>
void BM_DenseChunkPrefill(benchmark::State& state) try {
  const ChunkShape s(state);
  if (s.d != kDim) {
    state.SkipWithError("head dim 128 only");
    return;
  }
  llmk::DeviceBuffer<T> q(s.q_count()), o(s.q_count()), k(s.kv_count()), v(s.kv_count());
  fill_normal(q, 1);
  fill_normal(k, 2);
  fill_normal(v, 3);
  attn::PrefillArgs<T> a = chunk_args(s, q.data(), o.data());
  a.k = k.data();
  a.v = v.data();
  a.k_stride_token = a.v_stride_token = static_cast<std::int64_t>(s.kv_heads) * s.d;
  a.k_stride_head = a.v_stride_head = s.d;
  a.kv_len = s.kv_len;
  llmk::bench::time_iterations(
      state, [&] { return attn::prefill_with_config<T, attn::DefaultPrefillConfig<kDim>>(a, nullptr); });
  llmk::bench::set_throughput(state, s.flops(), 2.0 * (s.q_count() + s.kv_count()) * sizeof(T));
}
LLMK_BENCH_CATCH(state)

template <class T, class Code = T>
void BM_PagedPrefill(benchmark::State& state) try {
  constexpr bool kQuantized = !std::is_same_v<T, Code>;
  const ChunkShape s(state);
  if (s.d != kDim) {
    state.SkipWithError("head dim 128 only");
    return;
  }
  const int pages_per_seq = llmk::ceil_div(s.kv_len, s.page_size);
  const std::size_t total_pages = static_cast<std::size_t>(s.batch) * pages_per_seq;
  std::vector<int> ids(total_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(42));
  const std::vector<int> seq_lens(s.batch, s.kv_len);

  llmk::DeviceBuffer<T> q(s.q_count()), o(s.q_count());
  fill_normal(q, 1);
  const llmk::bench::PagePool<T, Code> pool(total_pages, s.page_size, s.kv_heads, s.d);
  llmk::DeviceBuffer<int> d_table(ids), d_lens(seq_lens);
  kv::PagedKv<T, Code> pages = pool.view();
  pages.block_table = d_table.data();
  pages.max_blocks_per_seq = pages_per_seq;
  pages.seq_lens = d_lens.data();
  pages.seq_lens_host = seq_lens.data();

  const attn::PrefillArgs<T> a = chunk_args(s, q.data(), o.data());
  using Cfg = attn::DefaultPagedPrefillConfig<kDim, Code>;
  llmk::bench::time_iterations(
      state, [&] { return attn::prefill_paged_with_config<T, Cfg, Code>(a, pages, nullptr); });
  const double rows = static_cast<double>(s.batch) * s.kv_len * s.kv_heads;
  llmk::bench::set_throughput(state, s.flops(),
                              2.0 * s.q_count() * sizeof(T) + 2.0 * s.kv_count() * sizeof(Code) +
                                  (kQuantized && pool.kPerRowScales ? 2.0 * rows * sizeof(float) : 0.0));
  state.counters["page_size"] = s.page_size;
}
LLMK_BENCH_CATCH(state)

#if defined(LLMK_CUDA)
// Llama-3-8B-like GQA (32 query heads, 8 KV heads, head dim 128): a 512-token chunk after 3.5k cached
// tokens (batch 4), a 2048-token chunk after 6k (batch 1), and a whole 2048-token prompt (batch 8); pages
// of 16 tokens.
void chunk_args_paged(benchmark::internal::Benchmark* b) {
  for (const auto& [batch, q_len, kv_len] : {std::tuple{4, 512, 4096}, {1, 2048, 8192}, {8, 2048, 2048}})
    b->Args({batch, q_len, kv_len, 32, 8, kDim, 16});
}
void chunk_args_dense(benchmark::internal::Benchmark* b) {
  for (const auto& [batch, q_len, kv_len] : {std::tuple{4, 512, 4096}, {1, 2048, 8192}, {8, 2048, 2048}})
    b->Args({batch, q_len, kv_len, 32, 8, kDim, 0});
}
#else
// The simulator: one sequence, a 16-token chunk over 80 keys, two query heads on one KV head, pages of 16.
void chunk_args_paged(benchmark::internal::Benchmark* b) {
  b->Args({1, 16, 80, 2, 1, kDim, 16});
}
void chunk_args_dense(benchmark::internal::Benchmark* b) {
  b->Args({1, 16, 80, 2, 1, kDim, 0});
}
#endif

#define LLMK_ARG_NAMES ->ArgNames({"batch", "q_len", "kv_len", "heads", "kv_heads", "d", "page_size"})
#define LLMK_BENCH_UNIT ->UseManualTime()->Unit(benchmark::kMillisecond)

BENCHMARK_TEMPLATE(BM_DenseChunkPrefill, half)->Apply(chunk_args_dense) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_PagedPrefill, half)->Apply(chunk_args_paged) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_PagedPrefill, half, std::int8_t)
    ->Apply(chunk_args_paged) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_PagedPrefill, half, llmk::float8_e4m3)
    ->Apply(chunk_args_paged) LLMK_ARG_NAMES LLMK_BENCH_UNIT;

}  // namespace
