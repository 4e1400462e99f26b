// Throughput of prefill attention (llmk/attention/prefill.cuh) over a batch of equal-length sequences,
// token-major Q/K/V/O. BM_Prefill runs what prefill() dispatches to: the Hopper kernel (prefill_sm90.cuh:
// TMA + wgmma, warp-specialized) on sm_90, the mma.sync kernel elsewhere; BM_PrefillMma pins the mma.sync
// kernel (prefill_mma, FlashAttention-2 style) for the comparison on the same GPU; BM_PrefillFp8 runs
// prefill_fp8 (e4m3 Q/K/V, fp16 output, QGMMA; sm_90 only, FlashAttention-3's fp8 benchmark). On a GPU:
// device time from CUDA events; in the simulator: the cost of simulating it (tiny shapes only; those numbers
// say nothing about a GPU).
//
// Shapes follow FlashAttention-2's benchmark (benchmarks/benchmark_flash_attention.py): 16k tokens in total
// (batch = 16384 / seq) and model dim 2048 (heads = 2048 / head_dim), so every row does the same work per
// token of context. Plus one GQA shape (32 query heads, 8 KV heads, head dim 128, 16k tokens).
//
// Arguments (named in the benchmark name): batch, seq (= q_len = kv_len), heads, kv_heads, d (head dim),
// causal (0/1).
//
// Counters (set_throughput; Google Benchmark divides by the measured time):
//   FLOP/s   FLOPs = 4 * batch * heads * seq^2 * d (two matmuls, Q K^T and P V, of 2 * seq^2 * d FLOPs each
//            per head), halved when causal: FA2's convention, which counts the useful half of the
//            score matrix (the masked-out tiles the kernel skips are not counted; the diagonal tiles it
//            computes in full are counted as half). Softmax and scaling FLOPs are not counted. With GQA the
//            FLOPs are those of the query heads. This is the number to compare with FA2's/FA3's TFLOP/s.
//   bytes/s  bytes = Q, K and V read once + O written once (the compulsory traffic; K/V with kv_heads; fp8:
//            1-byte Q/K/V, 2-byte O).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "llmk/attention/prefill.cuh"
#include "llmk/attention/prefill_fp8.cuh"
#include "llmk/core/memory.cuh"
#include "support/bench_data.hpp"
#include "support/gpu_timer.hpp"

namespace {

namespace attn = llmk::attention;
using llmk::bfloat16;
using llmk::half;

// half goes through the runtime head-dim dispatch; bfloat16 is benchmarked at head dim 128 only and is
// instantiated for that one configuration (other head dims report an error).
template <class T>
llmk::Status run_prefill(const attn::PrefillArgs<T>& a) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return attn::prefill_with_config<T, attn::DefaultPrefillConfig<128>>(a, nullptr);
  else
    return attn::prefill(a, nullptr);
}

// The mma.sync kernel on every architecture (half, runtime head dims).
struct MmaKernel {};

// A pinned mma.sync tile (the variants: LLMK_BENCH_VARIANTS).
template <class Cfg>
struct MmaTile {};
template <class T, class Cfg>
llmk::Status tile_prefill(const attn::PrefillArgs<T>& a, MmaTile<Cfg>) {
  return attn::prefill_mma_with_config<T, Cfg>(a, nullptr);
}

// The benchmark's arguments: batch, seq (= q_len = kv_len), heads, kv_heads, d, causal.
struct Shape {
  int batch, seq, heads, kv_heads, d;
  bool causal;
  explicit Shape(const benchmark::State& st)
      : batch(static_cast<int>(st.range(0))),
        seq(static_cast<int>(st.range(1))),
        heads(static_cast<int>(st.range(2))),
        kv_heads(static_cast<int>(st.range(3))),
        d(static_cast<int>(st.range(4))),
        causal(st.range(5) != 0) {}
  std::size_t q_count() const { return static_cast<std::size_t>(batch) * seq * heads * d; }
  std::size_t kv_count() const { return static_cast<std::size_t>(batch) * seq * kv_heads * d; }
  double flops() const {
    return 4.0 * batch * heads * static_cast<double>(seq) * seq * d / (causal ? 2.0 : 1.0);
  }
};

// PrefillArgs<T> or PrefillFp8Args<T> over token-major tensors of the shape.
template <class Args, class In, class Out>
Args prefill_args(const Shape& s, const In* q, const In* k, const In* v, Out* o) {
  Args a;
  a.q = q;
  a.k = k;
  a.v = v;
  a.o = o;
  a.q_stride_token = a.o_stride_token = static_cast<std::int64_t>(s.heads) * s.d;
  a.k_stride_token = a.v_stride_token = static_cast<std::int64_t>(s.kv_heads) * s.d;
  a.q_stride_head = a.k_stride_head = a.v_stride_head = a.o_stride_head = s.d;
  a.q_len = a.kv_len = s.seq;
  a.batch = s.batch;
  a.num_heads = s.heads;
  a.num_kv_heads = s.kv_heads;
  a.head_dim = s.d;
  a.options.softmax_scale = attn::default_scale(s.d);
  a.options.causal = s.causal;
  return a;
}

template <class T, class Kernel = void>
void BM_Prefill(benchmark::State& state) try {
  const Shape s(state);
  llmk::DeviceBuffer<T> q(s.q_count()), k(s.kv_count()), v(s.kv_count()), o(s.q_count());
  llmk::bench::fill_normal(q, 1);
  llmk::bench::fill_normal(k, 2);
  llmk::bench::fill_normal(v, 3);
  const auto a = prefill_args<attn::PrefillArgs<T>>(s, q.data(), k.data(), v.data(), o.data());

  llmk::bench::time_iterations(state, [&] {
    if constexpr (std::is_same_v<Kernel, MmaKernel>)
      return attn::prefill_mma(a, nullptr);
    else if constexpr (!std::is_void_v<Kernel>)
      return tile_prefill(a, Kernel{});
    else
      return run_prefill(a);
  });
  llmk::bench::set_throughput(state, s.flops(), (2.0 * s.q_count() + 2.0 * s.kv_count()) * sizeof(T));
}
LLMK_BENCH_CATCH(state)

// fp8: normal(0, 1) values as e4m3 codes, descales 1 (per tensor), half output.
void BM_PrefillFp8(benchmark::State& state) try {
  const Shape s(state);
  llmk::DeviceBuffer<llmk::float8_e4m3> q(s.q_count()), k(s.kv_count()), v(s.kv_count());
  llmk::DeviceBuffer<half> o(s.q_count());
  llmk::bench::fill_normal(q, 1);
  llmk::bench::fill_normal(k, 2);
  llmk::bench::fill_normal(v, 3);
  const llmk::DeviceBuffer<float> ones(std::vector<float>{1.0f, 1.0f, 1.0f});
  auto a = prefill_args<attn::PrefillFp8Args<half>>(s, q.data(), k.data(), v.data(), o.data());
  a.descale = {ones.data(), ones.data() + 1, ones.data() + 2, attn::Fp8Descale::kPerTensor};

  llmk::bench::time_iterations(state, [&] { return attn::prefill_fp8(a, nullptr); });
  llmk::bench::set_throughput(state, s.flops(),
                              (s.q_count() + 2.0 * s.kv_count()) * 1.0 + s.q_count() * sizeof(half));
}
LLMK_BENCH_CATCH(state)

#if defined(LLMK_CUDA)
constexpr int kTotalTokens = 16384;  // FA2: batch = 16384 / seq
constexpr int kModelDim = 2048;      // FA2: heads = 2048 / head_dim
constexpr int kSeqLens[] = {512, 1024, 2048, 4096, 8192, 16384};

// batch, seq, heads, kv_heads, d, causal: MHA at model dim 2048, for the given head dims.
void add_mha(benchmark::internal::Benchmark* b, std::initializer_list<int> head_dims) {
  for (int d : head_dims)
    for (int causal : {0, 1})
      for (int seq : kSeqLens) b->Args({kTotalTokens / seq, seq, kModelDim / d, kModelDim / d, d, causal});
}
void mha_f16_args(benchmark::internal::Benchmark* b) {
  add_mha(b, {64, 128, 256});
}
void mha_bf16_args(benchmark::internal::Benchmark* b) {
  add_mha(b, {128});
}
// The mma.sync comparison: d128 MHA only (the GPU command's time budget).
void mma_args(benchmark::internal::Benchmark* b) {
  add_mha(b, {128});
}
// GQA: 32 query heads sharing 8 KV heads (groups of 4), head dim 128 (Llama-3-8B-like), 16k tokens.
void gqa_args(benchmark::internal::Benchmark* b) {
  for (int causal : {0, 1})
    for (int seq : kSeqLens) b->Args({kTotalTokens / seq, seq, 32, 8, 128, causal});
}
// fp8: FlashAttention-3's fp8 shapes, head dims 64, 128, 256 (MHA, model dim 2048).
void fp8_args(benchmark::internal::Benchmark* b) {
  add_mha(b, {64, 128, 256});
}
#define LLMK_BENCH_UNIT ->UseManualTime()->Unit(benchmark::kMillisecond)
#else
// The simulator: one head of dim 64 and 64 or 128 tokens (one 128-row query tile over one or two 64-key
// tiles), bf16 at dim 128, and two query heads sharing one KV head (GQA).
void mha_f16_args(benchmark::internal::Benchmark* b) {
  for (int causal : {0, 1})
    for (int seq : {64, 128}) b->Args({1, seq, 1, 1, 64, causal});
}
void mha_bf16_args(benchmark::internal::Benchmark* b) {
  b->Args({1, 64, 1, 1, 128, 1});
}
void gqa_args(benchmark::internal::Benchmark* b) {
  b->Args({1, 64, 2, 1, 64, 1});
}
void mma_args(benchmark::internal::Benchmark* b) {
  b->Args({1, 64, 1, 1, 64, 1});
}
void fp8_args(benchmark::internal::Benchmark* b) {
  b->Args({1, 64, 1, 1, 64, 1});
}
#define LLMK_BENCH_UNIT ->UseManualTime()->Unit(benchmark::kMillisecond)
#endif

#define LLMK_ARG_NAMES ->ArgNames({"batch", "seq", "heads", "kv_heads", "d", "causal"})

BENCHMARK_TEMPLATE(BM_Prefill, half)->Apply(mha_f16_args) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_Prefill, bfloat16)->Apply(mha_bf16_args) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_Prefill, half)->Apply(gqa_args) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_Prefill, half, MmaKernel)
    ->Name("BM_PrefillMma<half>")
    ->Apply(mma_args) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
BENCHMARK(BM_PrefillFp8)->Name("BM_PrefillFp8<half>")->Apply(fp8_args) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
#if defined(LLMK_CUDA) && defined(LLMK_BENCH_VARIANTS)
// mma.sync tile variants at d128 (the default is 64 x 96, one stage): FlashAttention-2's 128 x 64 (32 rows
// per warp; spills with nvcc 13) and 128 x 32 in a 2-stage ring, to choose the default by measurement.
using Tile128x64 = MmaTile<attn::PrefillConfig<128, 128, 64, 4, 1>>;
using Tile128x32 = MmaTile<attn::PrefillConfig<128, 128, 32, 4, 2>>;
BENCHMARK_TEMPLATE(BM_Prefill, half, Tile128x64)
    ->Name("BM_PrefillMmaTile<128x64x1>")
    ->Apply(mma_args) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_Prefill, half, Tile128x32)
    ->Name("BM_PrefillMmaTile<128x32x2>")
    ->Apply(mma_args) LLMK_ARG_NAMES LLMK_BENCH_UNIT;
#endif

}  // namespace
