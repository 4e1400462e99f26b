// Throughput of split-KV decode attention (llmk/attention/decode.cuh), next to a device-to-device copy of the
// same device as the bandwidth reference. On a GPU: device time from CUDA events; in the simulator: the cost
// of simulating it (tiny shapes only; those numbers say nothing about a GPU).
//
// BM_Decode: one query token per sequence over a full KV cache [batch, kv_len, kv_heads, d] (fp16), the split
// count chosen by the heuristic (plan_decode with num_splits = 0), the caller-owned workspace allocated once.
//   Arguments (named in the benchmark name): batch, kv_len, heads, kv_heads, d.
//   Counters:
//     bytes/s  bytes = K + V read (2 * batch * kv_len * kv_heads * d * sizeof(T)) + q read + o written
//              (batch * heads * d * sizeof(T) each). Split partials in the workspace are not counted.
//     FLOP/s   FLOPs = 4 * batch * heads * kv_len * d (q K^T and P V); decode is memory-bound, bytes/s is
//              the number that matters.
//     splits   the split count plan_decode chose.
// BM_DecodeSplits: BM_Decode at a fixed split count (argument `splits`; GQA 32/8, d128): the sweep that
//   tunes choose_decode_splits on a GPU.
//     kv_copies  how many copies of the KV cache the iterations rotate through (see below).
//   L2: a KV cache smaller than the L2 would be served from it after the first iteration (50 MiB on H100),
//   so the benchmark allocates enough copies of the cache to cover 4x the L2 and each iteration reads the
//   next copy: every iteration reads K/V from DRAM, as a decode step of a real model does.
//
// BM_DeviceCopy: cudaMemcpyAsync device-to-device of a 1 GiB buffer (simulator: 1 MiB with
// llmk::device_copy).
//   Counter: bytes/s with bytes = 2 * size (size read + size written).
//
// Bandwidth efficiency of decode, from the JSON (--benchmark_format=json): for a BM_Decode entry,
//   efficiency = BM_Decode's "bytes/s" / BM_DeviceCopy's "bytes/s"
// i.e. decode's compulsory traffic per second as a fraction of what a device-to-device copy achieves
// reading and writing the same memory (the practical DRAM peak, below the nominal bandwidth). Small batches
// and short caches are bound by launch latency and the merge kernel, not by DRAM, and score low.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "llmk/attention/decode.cuh"
#include "llmk/core/memory.cuh"
#include "support/bench_data.hpp"
#include "support/gpu_timer.hpp"

namespace {

namespace attn = llmk::attention;
using llmk::half;

using llmk::bench::BM_DeviceCopy;  // the bandwidth reference (bench/support/bench_data.hpp)

// Decode with `splits` splits (0: the heuristic's choice).
template <class T>
void run_decode(benchmark::State& state, int splits) {
  const int batch = static_cast<int>(state.range(0)), kv_len = static_cast<int>(state.range(1)),
            heads = static_cast<int>(state.range(2)), kv_heads = static_cast<int>(state.range(3)),
            d = static_cast<int>(state.range(4));
  const std::size_t cache_count = static_cast<std::size_t>(batch) * kv_len * kv_heads * d;  // K (or V)
  const std::size_t cache_bytes = 2 * cache_count * sizeof(T);                              // K and V
  const std::size_t copies = llmk::bench::copies_for(cache_bytes);
  const std::size_t q_count = static_cast<std::size_t>(batch) * heads * d;
  llmk::DeviceBuffer<T> q(q_count), o(q_count), k(copies * cache_count), v(copies * cache_count);
  llmk::bench::fill_normal(q, 1);
  llmk::bench::fill_normal(k, 2);
  llmk::bench::fill_normal(v, 3);

  attn::DecodeArgs<T> a;
  a.q = q.data();
  a.q_stride_batch = static_cast<std::int64_t>(heads) * d;
  a.q_stride_head = d;
  a.k = k.data();
  a.v = v.data();
  a.k_stride_batch = a.v_stride_batch = static_cast<std::int64_t>(kv_len) * kv_heads * d;
  a.k_stride_token = a.v_stride_token = static_cast<std::int64_t>(kv_heads) * d;
  a.k_stride_head = a.v_stride_head = d;
  a.o = o.data();
  a.o_stride_batch = static_cast<std::int64_t>(heads) * d;
  a.o_stride_head = d;
  a.max_kv_len = kv_len;
  a.batch = batch;
  a.num_heads = heads;
  a.num_kv_heads = kv_heads;
  a.head_dim = d;
  a.options.softmax_scale = attn::default_scale(d);

  attn::DecodePlan plan;
  const llmk::Status planned = attn::plan_decode(a, &plan, splits);
  if (!llmk::bench::skip_unless_ok(state, planned)) return;
  llmk::DeviceBuffer<unsigned char> workspace(plan.workspace_bytes);

  llmk::bench::time_rotating(state, copies, [&](std::size_t copy) {
    const std::size_t offset = copy * cache_count;
    attn::DecodeArgs<T> step = a;
    step.k = k.data() + offset;
    step.v = v.data() + offset;
    return attn::decode(step, plan, workspace.data(), workspace.size(), nullptr);
  });

  const double flops = 4.0 * batch * heads * static_cast<double>(kv_len) * d;
  const double bytes = static_cast<double>(cache_bytes) + 2.0 * q_count * sizeof(T);
  llmk::bench::set_throughput(state, flops, bytes);
  state.counters["splits"] = plan.num_splits;
  state.counters["kv_copies"] = static_cast<double>(copies);
}

template <class T>
void BM_Decode(benchmark::State& state) try {
  run_decode<T>(state, 0);
}
LLMK_BENCH_CATCH(state)

// The split sweep: the heuristic's shapes at fixed split counts (argument 6, `splits`), so that one GPU run
// shows which count each shape wants (choose_decode_splits aims at about 2 blocks an SM; FlashAttention-2's
// heuristic at whole waves of one block an SM).
template <class T>
void BM_DecodeSplits(benchmark::State& state) try {
  run_decode<T>(state, static_cast<int>(state.range(5)));
}
LLMK_BENCH_CATCH(state)

#if defined(LLMK_CUDA)
constexpr double kMaxCacheBytes = 8.0 * (1ull << 30);  // K + V of one cache copy

// batch, kv_len, heads, kv_heads, d: head dim 128, caches above 8 GiB (K + V) skipped.
void add_decode(benchmark::internal::Benchmark* b, int heads, int kv_heads) {
  constexpr int d = 128;
  for (int batch : {1, 8, 32, 128})
    for (int kv_len : {512, 2048, 8192, 32768})
      if (2.0 * batch * kv_len * kv_heads * d * sizeof(half) <= kMaxCacheBytes)
        b->Args({batch, kv_len, heads, kv_heads, d});
}
// GQA: 32 query heads sharing 8 KV heads (Llama-3-8B-like); MHA: 32 and 32.
void gqa_args(benchmark::internal::Benchmark* b) {
  add_decode(b, 32, 8);
}
void mha_args(benchmark::internal::Benchmark* b) {
  add_decode(b, 32, 32);
}
// GQA 32/8, d128, batch 1 / 8 / 32 at 8k and 32k keys, 1 to 64 splits (48 runs).
void split_args(benchmark::internal::Benchmark* b) {
  for (int batch : {1, 8, 32})
    for (int kv_len : {8192, 32768})
      for (int splits : {1, 2, 4, 5, 6, 8, 16, 33})
        b->Args({batch, kv_len, 32, 8, 128, batch == 1 ? 2 * splits : splits});
}
#define LLMK_COPY_MIB ->Arg(1024)
#define LLMK_BENCH_UNIT ->UseManualTime()->Unit(benchmark::kMicrosecond)
#else
// The simulator: 256 keys (one split), and 1024 keys for a short run through the split + merge path.
void gqa_args(benchmark::internal::Benchmark* b) {
  b->Args({1, 256, 4, 1, 64});
  b->Args({2, 256, 4, 1, 64});
  b->Args({1, 1024, 4, 1, 64});
}
void mha_args(benchmark::internal::Benchmark* b) {
  b->Args({2, 256, 2, 2, 64});
}
void split_args(benchmark::internal::Benchmark* b) {
  b->Args({1, 1024, 4, 1, 64, 3});
}
#define LLMK_COPY_MIB ->Arg(1)
#define LLMK_BENCH_UNIT ->UseManualTime()->Unit(benchmark::kMillisecond)
#endif

#define LLMK_ARG_NAMES ->ArgNames({"batch", "kv_len", "heads", "kv_heads", "d"})

BENCHMARK_TEMPLATE(BM_Decode, half)->Apply(gqa_args) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_Decode, half)->Apply(mha_args) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_DecodeSplits, half)
    ->Apply(split_args)
    ->ArgNames({"batch", "kv_len", "heads", "kv_heads", "d", "splits"}) LLMK_BENCH_UNIT;
BENCHMARK(BM_DeviceCopy) LLMK_COPY_MIB->ArgNames({"MiB"}) LLMK_BENCH_UNIT;

}  // namespace
