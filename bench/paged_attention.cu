// Paged KV cache throughput: split-KV decode over a paged cache (llmk/attention/decode.cuh, decode_paged)
// next to the dense decode over the same logical data, and append_kv (llmk/kvcache/cache_ops.cuh), with a
// device-to-device copy as the bandwidth reference. On a GPU: device time from CUDA events; in the simulator:
// the cost of simulating it (tiny shapes only; those numbers say nothing about a GPU).
//
// BM_PagedDecode<T>: one query token per sequence, every sequence kv_len keys long, in an NHD page pool
// [pages, page_size, kv_heads, d]. The pages of all sequences are taken from the pool in a shuffled order (as
// a block allocator hands them out after some churn: logically adjacent pages are never physically adjacent).
// Split count from the heuristic (plan_decode_paged with num_splits = 0), workspace allocated once.
//   Arguments (named in the benchmark name): batch, kv_len, heads, kv_heads, d, page_size, csr (0: block
//   table [batch, max_blocks] + seq_lens, vLLM's form; 1: CSR page_indptr / page_indices / last_page_len,
//   FlashInfer's form).
//   Counters:
//     bytes/s    bytes = K + V of all sequences (2 * batch * kv_len * kv_heads * d * sizeof(T)) + q read + o
//                written (batch * heads * d * sizeof(T) each). The page table (4 bytes per page, read by the
//                blocks of every KV head: 2 MiB at page size 1, batch 64, 8192 keys) and the split partials
//                are not counted.
//     FLOP/s     FLOPs = 4 * batch * heads * kv_len * d (q K^T and P V); decode is memory-bound, bytes/s
//                is the number that matters.
//     splits     the split count plan_decode_paged chose (the same as the dense decode's for the same shape).
//     page_size  the page size (also in the name).
//     kv_copies  how many copies of the cache the iterations rotate through (see L2 below).
// BM_DenseDecode<T>: the dense decode of llmk/attention/decode.cuh on a [batch, kv_len, kv_heads, d] cache of
//   the same shape (arguments batch, kv_len, heads, kv_heads, d; counters bytes/s, FLOP/s, splits, kv_copies
//   as above); the same bytes and FLOPs per iteration as the paged entries of that shape.
//
// Paged efficiency, from the JSON (--benchmark_format=json): for a BM_PagedDecode entry,
//   efficiency = BM_PagedDecode's "bytes/s" / "bytes/s" of the BM_DenseDecode entry with the same T, batch,
//                kv_len, heads, kv_heads and d
// i.e. what the page indirection costs (1.0: free). FlashInfer reports about 90% of dense at page size 1; our
// targets are in /work/shared/targets.md (the project's "what we aim to beat", Attention section). Both
// numbers also compare against BM_DeviceCopy as bench/attention_decode.cu describes.
//
// BM_AppendKv<T[, Code]>: append_kv of num_tokens new K and V rows [tokens, kv_heads, d] into a
// page-size-16 NHD pool through an int64 slot_mapping. Two cases: a decode step (64 tokens, one per sequence
// of a batch of 64, each at a random slot of its own page) and a prefill chunk (4096 consecutive tokens of
// one sequence, starting at a random slot of its first page, over shuffled pages). Code = std::int8_t
// (per-token- head scales, computed and written with every row) or llmk::float8_e4m3 (one per-tensor scale,
// read): quantize-on-write into an 8-bit cache.
//   Arguments: tokens, seqs, kv_heads, d, page_size.
//   Counters: bytes/s with bytes = the new rows read (2 * tokens * kv_heads * d * sizeof(T), K and V) + the
//   rows written to the pool (the same at sizeof(Code)) + the int8 cache's scales written (2 * tokens *
//   kv_heads * 4) + the slot mapping read (8 * tokens): read + written, like BM_DeviceCopy's (before
//   2026-11-29 it counted the written bytes only). FLOP/s (8-bit caches only; the 16-bit append is a copy):
//   one per value quantized, 2 * tokens * kv_heads * d, as bench/quantize.cu counts. kv_copies as below. The
//   decode step moves about 0.5 MiB and is bound by launch latency, not bandwidth.
//
// BM_CopyPages<T>: copy_pages of `pairs` pages src[i] -> dst[i] (copy-on-write after a fork), K and V, page
// size 16, all in one shuffled pool; T = std::int8_t also copies the pages' per-token-head scales.
//   Arguments: pairs, kv_heads, d, page_size. 64 pairs (one page per sequence of a batch of 64) is
//   launch-bound; 4096 pairs (a 64k-token prefix) measures bandwidth. Counters: bytes/s with bytes = the
//   pages read and written (4 * pairs * page_size * kv_heads * d * sizeof(T)) + the int8 scales read and
//   written (4 * pairs * page_size * kv_heads * 4) + src and dst ids (8 * pairs); no FLOP/s (a copy, as
//   BM_DeviceCopy); kv_copies as below.
//
// BM_DeviceCopy: cudaMemcpyAsync device-to-device of a 1 GiB buffer (simulator: 1 MiB with
// llmk::device_copy);
//   bytes/s with bytes = 2 * size (read + written).
//
// L2: data smaller than the L2 would be served from it after the first iteration (50 MiB on H100), so every
// benchmark allocates enough copies of its data (caches, page tables, new rows, destination pages) to cover
// 4x the L2 and each iteration uses the next copy: every iteration reads K/V from DRAM, as a decode step of a
// real model does. The paged copies live in ONE pool, their pages shuffled together.
//
// Quantized KV: BM_PagedDecode<half, int8_t> (per-token-head scales) and <half, float8_e4m3> (per-tensor
// scale) over the same shapes as the fp16 cache; bytes are counted at the stored width (+ the scale rows), so
// the fp16 / int8 / fp8 time ratio is the speedup of the smaller cache.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

#include "llmk/attention/decode.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/kvcache/cache_ops.cuh"
#include "llmk/kvcache/paged_kv.cuh"
#include "support/bench_data.hpp"
#include "support/gpu_timer.hpp"
#include "support/page_pool.hpp"

namespace {

namespace attn = llmk::attention;
namespace kv = llmk::kvcache;
using llmk::bfloat16;
using llmk::half;

using llmk::bench::BM_DeviceCopy;  // the bandwidth reference (bench/support/bench_data.hpp)
using llmk::bench::copies_for;
using llmk::bench::fill_normal;

// The shape of one decode benchmark (arguments 0..4 of both decode benchmarks).
struct DecodeShape {
  int batch, kv_len, heads, kv_heads, d;
  explicit DecodeShape(const benchmark::State& state)
      : batch(static_cast<int>(state.range(0))),
        kv_len(static_cast<int>(state.range(1))),
        heads(static_cast<int>(state.range(2))),
        kv_heads(static_cast<int>(state.range(3))),
        d(static_cast<int>(state.range(4))) {}
  std::size_t cache_count() const {  // elements of K (or V) of the whole batch
    return static_cast<std::size_t>(batch) * kv_len * kv_heads * d;
  }
  std::size_t q_count() const { return static_cast<std::size_t>(batch) * heads * d; }
};

// q, o and the decode arguments every decode benchmark shares (K/V filled in by the caller).
template <class T>
attn::DecodeArgs<T> decode_args(const DecodeShape& s, llmk::DeviceBuffer<T>& q, llmk::DeviceBuffer<T>& o) {
  attn::DecodeArgs<T> a;
  a.q = q.data();
  a.q_stride_batch = static_cast<std::int64_t>(s.heads) * s.d;
  a.q_stride_head = s.d;
  a.o = o.data();
  a.o_stride_batch = static_cast<std::int64_t>(s.heads) * s.d;
  a.o_stride_head = s.d;
  a.batch = s.batch;
  a.num_heads = s.heads;
  a.num_kv_heads = s.kv_heads;
  a.head_dim = s.d;
  a.options.softmax_scale = attn::default_scale(s.d);
  return a;
}

// Bytes: K and V at their stored width (+ one fp32 scale per row and K/V for per-token-head scales), q and o.
template <class T, class Code = T>
void set_decode_counters(benchmark::State& state, const DecodeShape& s, int splits, std::size_t copies,
                         bool per_row_scales = false) {
  const double flops = 4.0 * s.batch * s.heads * static_cast<double>(s.kv_len) * s.d;
  const double rows = static_cast<double>(s.batch) * s.kv_len * s.kv_heads;
  const double bytes = 2.0 * s.cache_count() * sizeof(Code) +
                       (per_row_scales ? 2.0 * rows * sizeof(float) : 0.0) + 2.0 * s.q_count() * sizeof(T);
  llmk::bench::set_throughput(state, flops, bytes);
  state.counters["splits"] = splits;
  state.counters["kv_copies"] = static_cast<double>(copies);
}

template <class T>
void BM_DenseDecode(benchmark::State& state) try {
  const DecodeShape s(state);
  const std::size_t cache_count = s.cache_count();
  const std::size_t copies = copies_for(2 * cache_count * sizeof(T));
  llmk::DeviceBuffer<T> q(s.q_count()), o(s.q_count()), k(copies * cache_count), v(copies * cache_count);
  fill_normal(q, 1);
  fill_normal(k, 2);
  fill_normal(v, 3);

  attn::DecodeArgs<T> a = decode_args(s, q, o);
  a.k = k.data();
  a.v = v.data();
  a.k_stride_batch = a.v_stride_batch = static_cast<std::int64_t>(s.kv_len) * s.kv_heads * s.d;
  a.k_stride_token = a.v_stride_token = static_cast<std::int64_t>(s.kv_heads) * s.d;
  a.k_stride_head = a.v_stride_head = s.d;
  a.max_kv_len = s.kv_len;

  attn::DecodePlan plan;
  const llmk::Status planned = attn::plan_decode(a, &plan, 0);
  if (!llmk::bench::skip_unless_ok(state, planned)) return;
  llmk::DeviceBuffer<unsigned char> workspace(plan.workspace_bytes);

  llmk::bench::time_rotating(state, copies, [&](std::size_t copy) {
    const std::size_t offset = copy * cache_count;
    attn::DecodeArgs<T> step = a;
    step.k = k.data() + offset;
    step.v = v.data() + offset;
    return attn::decode(step, plan, workspace.data(), workspace.size(), nullptr);
  });
  set_decode_counters<T>(state, s, plan.num_splits, copies);
}
LLMK_BENCH_CATCH(state)

template <class T, class Code = T>
void BM_PagedDecode(benchmark::State& state) try {
  constexpr bool kQuantized = !std::is_same_v<T, Code>;
  const DecodeShape s(state);
  const int page_size = static_cast<int>(state.range(5));
  const bool csr = state.range(6) != 0;
  const std::size_t copies = copies_for(2 * s.cache_count() * sizeof(Code));

  // Page tables: copy c of the cache is the c-th set of batch * pages_per_seq pages of one shuffled pool.
  // Every sequence has the same number of pages, so the rows of copy c's block table [batch, pages_per_seq]
  // are also its CSR page_indices.
  const int pages_per_seq = llmk::ceil_div(s.kv_len, page_size);
  const std::size_t pages_per_copy = static_cast<std::size_t>(s.batch) * pages_per_seq;
  const std::size_t total_pages = copies * pages_per_copy;
  if (total_pages > static_cast<std::size_t>(INT32_MAX)) {
    state.SkipWithError("page pool too large for int32 page ids");
    return;
  }
  std::vector<int> ids(total_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(42));
  std::vector<int> seq_lens(s.batch, s.kv_len), indptr(s.batch + 1), last_page_len(s.batch);
  for (int b = 0; b <= s.batch; ++b) indptr[b] = b * pages_per_seq;
  for (int b = 0; b < s.batch; ++b) last_page_len[b] = s.kv_len - (pages_per_seq - 1) * page_size;

  llmk::DeviceBuffer<T> q(s.q_count()), o(s.q_count());
  fill_normal(q, 1);
  // Quantized caches: int8 with per-token-head scales (the scale row is read with every K/V row), fp8 with
  // one per-tensor scale (PagePool).
  const llmk::bench::PagePool<T, Code> pool(total_pages, page_size, s.kv_heads, s.d);
  const bool per_row_scales = pool.kPerRowScales;
  llmk::DeviceBuffer<int> d_tables(ids), d_lens(seq_lens), d_indptr(indptr), d_last(last_page_len);
  kv::PagedKv<T, Code> pages = pool.view();
  if (csr) {
    pages.page_indptr = d_indptr.data();
    pages.page_indices = d_tables.data();
    pages.last_page_len = d_last.data();
    pages.page_indptr_host = indptr.data();
    pages.last_page_len_host = last_page_len.data();
  } else {
    pages.block_table = d_tables.data();
    pages.max_blocks_per_seq = pages_per_seq;
    pages.seq_lens = d_lens.data();
    pages.seq_lens_host = seq_lens.data();
  }

  const attn::DecodeArgs<T> a = decode_args(s, q, o);
  attn::DecodePlan plan;
  const llmk::Status planned = attn::plan_decode_paged(a, pages, &plan, 0);
  if (!llmk::bench::skip_unless_ok(state, planned)) return;
  llmk::DeviceBuffer<unsigned char> workspace(plan.workspace_bytes);

  llmk::bench::time_rotating(state, copies, [&](std::size_t copy) {
    const int* table = d_tables.data() + copy * pages_per_copy;
    kv::PagedKv<T, Code> step = pages;
    (csr ? step.page_indices : step.block_table) = table;
    return attn::decode_paged(a, step, plan, workspace.data(), workspace.size(), nullptr);
  });
  set_decode_counters<T, Code>(state, s, plan.num_splits, copies, kQuantized && per_row_scales);
  state.counters["page_size"] = page_size;
}
LLMK_BENCH_CATCH(state)

// A positive scale for the fp8 cache's per-tensor scale (any value works; the codes' range fits N(0, 1)
// rows).
float fp8_kv_scale(std::mt19937&) {
  return 1.0f / 64.0f;
}

template <class T, class Code = T>
void BM_AppendKv(benchmark::State& state) try {
  constexpr bool kQuantized = !std::is_same_v<T, Code>;
  constexpr bool kPerRowScales = std::is_same_v<Code, std::int8_t>;
  const int tokens = static_cast<int>(state.range(0)), seqs = static_cast<int>(state.range(1)),
            kv_heads = static_cast<int>(state.range(2)), d = static_cast<int>(state.range(3)),
            page_size = static_cast<int>(state.range(4));
  const int per_seq = tokens / seqs;  // tokens of each sequence, consecutive
  const std::size_t row_count = static_cast<std::size_t>(tokens) * kv_heads * d;  // new K (or V)
  const double scale_bytes = kPerRowScales ? 2.0 * tokens * kv_heads * sizeof(float) : 0.0;
  const double bytes = 2.0 * row_count * (sizeof(T) + sizeof(Code)) + scale_bytes + 8.0 * tokens;
  const std::size_t copies = copies_for(static_cast<std::size_t>(bytes));

  // Each sequence starts at a random slot of a page, so its tokens span up to ceil((page_size - 1 + per_seq)
  // / page_size) pages; every copy takes that many pages per sequence from one shuffled pool.
  const int pages_per_seq = llmk::ceil_div(page_size - 1 + per_seq, page_size);
  const std::size_t pages_per_copy = static_cast<std::size_t>(seqs) * pages_per_seq;
  const std::size_t total_pages = copies * pages_per_copy;
  std::mt19937 rng(7);
  std::vector<int> ids(total_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<std::int64_t> slots(copies * tokens);
  for (std::size_t c = 0; c < copies; ++c)
    for (int q = 0; q < seqs; ++q) {
      const int start = static_cast<int>(rng() % page_size);
      const int* seq_pages = ids.data() + c * pages_per_copy + static_cast<std::size_t>(q) * pages_per_seq;
      for (int t = 0; t < per_seq; ++t) {
        const int pos = start + t;
        slots[c * tokens + static_cast<std::size_t>(q) * per_seq + t] =
            static_cast<std::int64_t>(seq_pages[pos / page_size]) * page_size + pos % page_size;
      }
    }

  const kv::PageStrides strides = kv::make_nhd_strides(page_size, kv_heads, d);
  const std::size_t pool_count = total_pages * static_cast<std::size_t>(strides.page);
  llmk::DeviceBuffer<T> k_new(copies * row_count), v_new(copies * row_count);
  llmk::DeviceBuffer<Code> k_pool(pool_count), v_pool(pool_count);
  // int8: a scale per slot and head, written; fp8: one per-tensor scale, read.
  llmk::DeviceBuffer<float> k_scales(kPerRowScales ? total_pages * page_size * kv_heads : 1),
      v_scales(k_scales.size());
  if constexpr (kQuantized && !kPerRowScales) {
    llmk::bench::fill_random(k_scales, 8, fp8_kv_scale);
    llmk::bench::fill_random(v_scales, 9, fp8_kv_scale);
  }
  fill_normal(k_new, 4);
  fill_normal(v_new, 5);
  llmk::DeviceBuffer<std::int64_t> d_slots(slots);

  kv::AppendArgs<T, Code> a;
  a.k_stride_token = a.v_stride_token = static_cast<std::int64_t>(kv_heads) * d;
  a.k_stride_head = a.v_stride_head = d;
  a.num_tokens = tokens;
  a.kv_heads = kv_heads;
  a.head_dim = d;
  a.k_pages = k_pool.data();
  a.v_pages = v_pool.data();
  a.strides = strides;
  a.page_size = page_size;
  a.num_pages = static_cast<int>(total_pages);
  if constexpr (kQuantized) {
    a.scale_mode = kPerRowScales ? kv::KvScale::kPerTokenHead : kv::KvScale::kPerTensor;
    a.k_scales = k_scales.data();
    a.v_scales = v_scales.data();
  }

  llmk::bench::time_rotating(state, copies, [&](std::size_t c) {
    kv::AppendArgs<T, Code> step = a;
    step.k = k_new.data() + c * row_count;
    step.v = v_new.data() + c * row_count;
    step.slot_mapping = d_slots.data() + c * tokens;
    return kv::append_kv(step, nullptr);
  });
  if constexpr (kQuantized)
    llmk::bench::set_throughput(state, 2.0 * static_cast<double>(row_count), bytes);
  else
    llmk::bench::set_bandwidth(state, bytes);  // a copy: no FLOPs, as BM_DeviceCopy
  state.counters["kv_copies"] = static_cast<double>(copies);
}
LLMK_BENCH_CATCH(state)

template <class T>
void BM_CopyPages(benchmark::State& state) try {
  constexpr bool kScales = std::is_same_v<T, std::int8_t>;
  const int pairs = static_cast<int>(state.range(0)), kv_heads = static_cast<int>(state.range(1)),
            d = static_cast<int>(state.range(2)), page_size = static_cast<int>(state.range(3));
  const double rows = static_cast<double>(pairs) * page_size * kv_heads;  // rows of K (or V) copied
  const double bytes =
      4.0 * rows * d * sizeof(T) + (kScales ? 4.0 * rows * sizeof(float) : 0.0) + 8.0 * pairs;
  const std::size_t copies = copies_for(static_cast<std::size_t>(bytes));

  // Copy c reads pages ids[2c * pairs, (2c + 1) * pairs) and writes the next `pairs` of one shuffled pool.
  const std::size_t total_pages = copies * 2 * static_cast<std::size_t>(pairs);
  if (total_pages > static_cast<std::size_t>(INT32_MAX)) {
    state.SkipWithError("page pool too large for int32 page ids");
    return;
  }
  std::vector<int> ids(total_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(11));
  const llmk::bench::PagePool<T> pool(total_pages, page_size, kv_heads, d);
  llmk::DeviceBuffer<float> k_scales(kScales ? total_pages * page_size * kv_heads : 1),
      v_scales(k_scales.size());
  if constexpr (kScales) {
    fill_normal(k_scales, 6);
    fill_normal(v_scales, 7);
  }
  llmk::DeviceBuffer<int> d_ids(ids);

  llmk::bench::time_rotating(state, copies, [&](std::size_t c) {
    const int* src = d_ids.data() + 2 * c * pairs;
    return kv::copy_pages(pool.k.data(), pool.v.data(), pool.strides, page_size,
                          static_cast<int>(total_pages), kv_heads, d, src, src + pairs, pairs, nullptr,
                          kScales ? k_scales.data() : nullptr, kScales ? v_scales.data() : nullptr);
  });
  llmk::bench::set_bandwidth(state, bytes);  // a copy: no FLOPs, as BM_DeviceCopy
  state.counters["kv_copies"] = static_cast<double>(copies);
}
LLMK_BENCH_CATCH(state)

#if defined(LLMK_CUDA)
// Llama-3-8B-like GQA: 32 query heads sharing 8 KV heads, head dim 128. Largest cache: batch 64 x 8192 keys,
// 2 GiB of K + V (one copy).
constexpr int kHeads = 32, kKvHeads = 8, kDim = 128;
void dense_args(benchmark::internal::Benchmark* b) {
  for (int batch : {8, 64})
    for (int kv_len : {2048, 8192}) b->Args({batch, kv_len, kHeads, kKvHeads, kDim});
}
void paged_args(benchmark::internal::Benchmark* b) {
  for (int batch : {8, 64})
    for (int kv_len : {2048, 8192})
      for (int page_size : {1, 8, 16, 32, 128})
        b->Args({batch, kv_len, kHeads, kKvHeads, kDim, page_size, 0});
  b->Args({64, 8192, kHeads, kKvHeads, kDim, 16, 1});  // CSR form
}
// bf16: one shape, dense and paged (page size 16, block table).
void dense_args_bf16(benchmark::internal::Benchmark* b) {
  b->Args({64, 8192, kHeads, kKvHeads, kDim});
}
void paged_args_bf16(benchmark::internal::Benchmark* b) {
  b->Args({64, 8192, kHeads, kKvHeads, kDim, 16, 0});
}
// tokens, seqs, kv_heads, d, page_size: a decode step of batch 64, a 4096-token prefill chunk.
void append_args(benchmark::internal::Benchmark* b) {
  b->Args({64, 64, kKvHeads, kDim, 16});
  b->Args({4096, 1, kKvHeads, kDim, 16});
}
// pairs, kv_heads, d, page_size: one page per sequence of a batch of 64, a 64k-token prefix.
void copy_args(benchmark::internal::Benchmark* b) {
  b->Args({64, kKvHeads, kDim, 16});
  b->Args({4096, kKvHeads, kDim, 16});
}
#define LLMK_COPY_MIB ->Arg(1024)
#define LLMK_BENCH_UNIT ->UseManualTime()->Unit(benchmark::kMicrosecond)
#else
// The simulator: 128 keys, head dim 64, 4 query heads on 2 KV heads; page sizes 1 and 16.
void dense_args(benchmark::internal::Benchmark* b) {
  for (int batch : {1, 2}) b->Args({batch, 128, 4, 2, 64});
}
void paged_args(benchmark::internal::Benchmark* b) {
  for (int batch : {1, 2})
    for (int page_size : {1, 16}) b->Args({batch, 128, 4, 2, 64, page_size, 0});
  b->Args({2, 128, 4, 2, 64, 16, 1});  // CSR form
}
void dense_args_bf16(benchmark::internal::Benchmark* b) {
  b->Args({1, 128, 4, 2, 64});
}
void paged_args_bf16(benchmark::internal::Benchmark* b) {
  b->Args({1, 128, 4, 2, 64, 16, 0});
}
void append_args(benchmark::internal::Benchmark* b) {
  b->Args({2, 2, 2, 64, 16});
  b->Args({128, 1, 2, 64, 16});
}
void copy_args(benchmark::internal::Benchmark* b) {
  b->Args({4, 2, 64, 16});
}
#define LLMK_COPY_MIB ->Arg(1)
#define LLMK_BENCH_UNIT ->UseManualTime()->Unit(benchmark::kMillisecond)
#endif

#define LLMK_DENSE_NAMES ->ArgNames({"batch", "kv_len", "heads", "kv_heads", "d"})
#define LLMK_PAGED_NAMES ->ArgNames({"batch", "kv_len", "heads", "kv_heads", "d", "page_size", "csr"})

BENCHMARK_TEMPLATE(BM_DenseDecode, half)->Apply(dense_args) LLMK_DENSE_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_PagedDecode, half)->Apply(paged_args) LLMK_PAGED_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_DenseDecode, bfloat16)->Apply(dense_args_bf16) LLMK_DENSE_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_PagedDecode, bfloat16)->Apply(paged_args_bf16) LLMK_PAGED_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_PagedDecode, half, std::int8_t)->Apply(paged_args) LLMK_PAGED_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_PagedDecode, half, llmk::float8_e4m3)
    ->Apply(paged_args) LLMK_PAGED_NAMES LLMK_BENCH_UNIT;
#define LLMK_APPEND_NAMES ->ArgNames({"tokens", "seqs", "kv_heads", "d", "page_size"})
BENCHMARK_TEMPLATE(BM_AppendKv, half)->Apply(append_args) LLMK_APPEND_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_AppendKv, half, std::int8_t)->Apply(append_args) LLMK_APPEND_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_AppendKv, half, llmk::float8_e4m3)
    ->Apply(append_args) LLMK_APPEND_NAMES LLMK_BENCH_UNIT;
#define LLMK_COPY_PAGES_NAMES ->ArgNames({"pairs", "kv_heads", "d", "page_size"})
BENCHMARK_TEMPLATE(BM_CopyPages, half)->Apply(copy_args) LLMK_COPY_PAGES_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_CopyPages, std::int8_t)->Apply(copy_args) LLMK_COPY_PAGES_NAMES LLMK_BENCH_UNIT;
BENCHMARK(BM_DeviceCopy) LLMK_COPY_MIB->ArgNames({"MiB"}) LLMK_BENCH_UNIT;

}  // namespace
