// Throughput of llmk's quantized GEMMs (llmk/gemm/w8a8.cuh, llmk/gemm/weight_only.cuh) next to cuBLAS
// baselines in the same binary. Every GEMM is the "TN" linear layer D[M, N] = A[M, K] * W[N, K]^T (A
// row-major activations, W row-major weights, one output channel per row). On a GPU: device time from CUDA
// events; in the simulator: the cost of simulating it (tiny shapes only; those numbers say nothing about a
// GPU).
//
// Benchmarks (arguments, named in the benchmark name: M, N, K):
//   BM_W8A8          w8a8_gemm<half>: int8 x int8 -> int32 accumulate, fp16 out, per-token s_a [M] x
//                    per-channel s_w [N] scales (symmetric activations).
//   BM_W4A16         weight_only_gemm<half>, 4-bit codes, group 128, fp16 scales and uint8 zero points
//                    [K/128, N].
//   BM_W4A16PerChannel  the same with per-channel (group = K) fp16 scales, no zero points.
//   BM_W8A16         weight_only_gemm<half>, 8-bit codes, per-channel (group = K) fp16 scales, no zero
//                    points (symmetric).
//                    The three weight-only families and BM_CublasHgemm run the weight-only grid: M in
//                    {1, 2, 4, ..., 256, 4096} x (N, K) of real layers (weight_only_grid_args).
//   BM_W4A16Hopper   BM_W4A16 with WeightOnlyArgs::kernel = kHopper (the wgmma kernel at every M; skipped
//   BM_W4A16MmaSync  without sm_90a on an sm_90) and kMmaSync (the mma.sync tiles): the crossover the
//   dispatch
//                    (M > 16 on Hopper) rests on, over weight_only_crossover_args.
//   BM_FP8           fp8_gemm<half>: e4m3 x e4m3, fp32 accumulate, fp16 out, per-token x per-channel scales.
//                    sm_89+ only: on an older device fp8_gemm returns Status::unsupported and the benchmark
//                    is skipped with that message ("error_occurred" in the JSON).
//                    BM_W8A8 and BM_FP8 run the Hopper wgmma kernel for M > 64 where the device is an sm_90
//                    and the build has sm_90a code (scripts/gpu_validate.sh builds for 90a on Hopper); at
//                    M <= 64 the mma.sync tiles split K over the SMs in a workspace
//                    (quant_gemm_workspace_bytes).
//   BM_W8A8Hopper,   w8a8_gemm_sm90 / fp8_gemm_sm90 (the Hopper kernel, its split-K by the SM count) at
//   BM_FP8Hopper     M <= 64, where w8a8_gemm / fp8_gemm take the mma.sync tiles: the crossover (CUDA build,
//                    sm_90a).
//   BM_Sm90Hgemm     gemm_f16_sm90<half> (CUDA build): the Hopper fp16 GEMM, fp16 out (as cuBLAS's), split-K
//                    over a workspace at small M (gemm_f16_workspace_bytes); skipped without sm_90a.
//   BM_Sm90KSweepF16<BN, Cm[, Pp]>, BM_Sm90KSweepI8<BN, Cm[, Pp]>  the Hopper GEMM with its tile width
//                    forced (CUDA build, sm_90a): gemm_f16_sm90 (fp16, fp16 out) or w8a8_gemm_sm90 (int8,
//                    fp16 out, per-token x per-channel scales), Cm = 2: in clusters of 2 blocks with B
//                    multicast (Sm90ClusterGemmConfig), Pp = 1: ping-pong consumers (Sm90PingPongGemmConfig,
//                    BN = 128), 128 x BN tiles, unsplit, at M = N = 4096 and K from 256 to 8192 (Cm = 1,
//                    Pp = 0: the kernels BM_Sm90Hgemm and BM_W8A8 already build; the others: eight kernels of
//                    their own). Fits time = rounds x (F + k-tiles x slope) per (kernel, BN, Cm, Pp):
//                    `python3 -m bench.model.gemm_rounds <results folder>` (docs/gemm.md).
//   BM_FP8Blockwise  fp8_gemm_blockwise<half> (CUDA build): e4m3 with DeepSeek-V3 block-wise scales (1 x 128
//                    activations, 128 x 128 weights), Hopper only; anchor BM_CublasLtFp8.
//   BM_MixedInt8     mixed_int8_gemm<half> (LLM.int8()): the W8A8 product over K columns plus an fp16
//                    product over k_outliers = 32 outlier columns, fused in one kernel.
//   CUDA build only (cuBLAS, CUDA::cublas / CUDA::cublasLt linked by bench/CMakeLists.txt):
//   BM_CublasHgemm   cublasGemmEx: fp16 A and W, fp32 compute (CUBLAS_COMPUTE_32F), fp16 out.
//   BM_CublasLtInt8  cublasLtMatmul: int8 A and W, int32 compute (CUBLAS_COMPUTE_32I), raw int32 out (no
//                    dequantization: the bare int8 tensor-core GEMM, a floor for what BM_W8A8 does). Falls
//                    back to cublasGemmEx (CUDA_R_8I -> CUDA_R_32I) if cuBLASLt offers no algorithm; the
//                    counter `cublaslt` says which ran (1: cuBLASLt, 0: cublasGemmEx).
//   BM_CublasLtFp8   cublasLtMatmul: e4m3 A and W, fp32 compute, fp16 out, no scales (the anchor of BM_FP8;
//                    sm_89+, skipped where cuBLASLt has no fp8 algorithm).
//   Shapes (GPU): M in {1, 16, 64, 128, 256, 4096} x (N, K) in {(4096, 4096), (11008, 4096), (4096, 11008)}
//   (Llama-7B's attention / MLP up / MLP down projections; M = tokens: decode to prefill).
//   Simulator: M in {1, 16}, N = K = 128, llmk kernels only.
//
// Counters:
//   FLOP/s   FLOPs = 2 * M * N * K for every benchmark (integer operations count as FLOPs, so for the
//            int8 and fp8 GEMMs this is TOPS). BM_MixedInt8 also multiplies the 32 outlier columns
//            (2 * M * N * 32 more); they are its overhead and not counted.
//   bytes/s  bytes = the operands actually read (A, the weights in their stored format, weight scales and
//            zero points, activation scales, the outlier operands) + the output written. The minimal
//            traffic; what matters for small M, where the GEMM is bound by reading the weights.
//   weight_copies  see below.
//   L2: weights smaller than the L2 (a 4096 x 4096 int4 matrix is 8 MiB; the H100's L2 is 50 MiB) would be
//   served from it after the first iteration. Each benchmark therefore allocates enough copies of everything
//   weight-side (weights, scales, zero points, outlier weights) to cover 4x the L2, and iteration i uses copy
//   i % weight_copies: every iteration reads its weights from DRAM, as a layer of a real model does. The
//   activations and the output are not rotated (in a model they come from / go to the neighbouring layers).
//
// Ratios, from the JSON (--benchmark_format=json or --benchmark_out=quant.json): every benchmark has the same
// name after its first '/' for the same shape ("M:16/N:4096/K:4096/manual_time") and the same FLOPs there, so
//   speedup of X over Y at (M, N, K) = Y's real_time / X's real_time = X's "FLOP/s" / Y's "FLOP/s"
// e.g. W4A16 over cuBLAS fp16: BM_CublasHgemm/M:16/N:4096/K:4096 real_time / BM_W4A16/M:16/N:4096/K:4096
// real_time. All of them at once (skipped benchmarks left out):
//   jq -r '[.benchmarks[] | select(.run_type == "iteration" and (.error_occurred | not))
//           | {key: (.name | sub("^[^/]+/"; "")), bench: (.name | sub("/.*"; "")), t: .real_time}]
//          | group_by(.key)[] | (map({(.bench): .t}) | add) as $t
//          | select($t.BM_CublasHgemm and $t.BM_W4A16)
//          | "\(.[0].key)  W4A16 / cuBLAS fp16: \($t.BM_CublasHgemm / $t.BM_W4A16)"' quant.json
// (swap in BM_W8A8 / BM_CublasLtInt8 or BM_W8A8 / BM_CublasHgemm, etc.). For the memory-bound small-M rows,
// also compare "bytes/s" with the device's DRAM bandwidth (bench_attention_decode_cuda's BM_DeviceCopy).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/gemm_f16.cuh"
#include "llmk/gemm/w8a8.cuh"
#include "llmk/gemm/weight_only.cuh"
#include "support/bench_data.hpp"
#include "support/gpu_timer.hpp"

#if defined(LLMK_CUDA) && defined(LLMK_BENCH_CUBLAS)
#include <cublasLt.h>

#include "support/cublas_anchor.hpp"
#define LLMK_QUANT_GEMM_CUBLAS 1
#endif

namespace {

namespace gemm = llmk::gemm;
using llmk::half;

constexpr int kOutliers = 32;    // k_outliers of BM_MixedInt8
constexpr int kGroupSize = 128;  // group of BM_W4A16

using llmk::bench::copies_for;
using llmk::bench::fill_random;

// Generators (each value from a fresh distribution: the values of the recorded results; fill_normal draws
// its values from one distribution and gives different ones).
half normal_half(std::mt19937& rng) {
  return half(std::normal_distribution<float>(0.0f, 1.0f)(rng));
}
std::int8_t random_int8(std::mt19937& rng) {
  return static_cast<std::int8_t>(std::uniform_int_distribution<int>(-127, 127)(rng));
}
std::uint8_t random_byte(std::mt19937& rng) {
  return static_cast<std::uint8_t>(std::uniform_int_distribution<int>(0, 255)(rng));
}
std::uint8_t random_code4(std::mt19937& rng) {  // a 4-bit zero point
  return static_cast<std::uint8_t>(std::uniform_int_distribution<int>(0, 15)(rng));
}
llmk::float8_e4m3 normal_fp8(std::mt19937& rng) {
  return llmk::float8_e4m3(std::normal_distribution<float>(0.0f, 1.0f)(rng));
}
// Scales small enough that the fp16 outputs stay finite for K up to 11008.
float int8_scale(std::mt19937& rng) {
  return std::uniform_real_distribution<float>(0.5e-3f, 1.5e-3f)(rng);
}
half weight_scale(std::mt19937& rng) {
  return half(std::uniform_real_distribution<float>(0.005f, 0.02f)(rng));
}

struct Shape {
  int m, n, k;
  explicit Shape(const benchmark::State& state)
      : m(static_cast<int>(state.range(0))),
        n(static_cast<int>(state.range(1))),
        k(static_cast<int>(state.range(2))) {}
  std::size_t mk() const { return static_cast<std::size_t>(m) * k; }
  std::size_t nk() const { return static_cast<std::size_t>(n) * k; }
  std::size_t mn() const { return static_cast<std::size_t>(m) * n; }
  double flops() const { return 2.0 * m * n * static_cast<double>(k); }
};

// Runs `call(copy)` once (the warm-up; a refusal skips the benchmark with the Status message), then times it,
// iteration i on weight copy i % copies, and sets the counters.
template <class Call>
void run_timed(benchmark::State& state, const Shape& s, double bytes, std::size_t copies, Call call) {
  if (!llmk::bench::skip_unless_ok(state, call(std::size_t{0}))) return;
  // A failure errors this row (skip_unless_ok), not the whole binary (an exception would end it).
  if (!llmk::bench::skip_unless_ok(state, llmk::device_synchronize())) return;
  llmk::bench::time_rotating(state, copies, call, 1);
  llmk::bench::set_throughput(state, s.flops(), bytes);
  state.counters["weight_copies"] = static_cast<double>(copies);
}

// ---- llmk kernels ----

// The operands of a per-token x per-channel scaled 8-bit GEMM (BM_W8A8, BM_FP8 and the regular part of
// BM_MixedInt8): A [M, K] and s_a [M] once; W [N, K] and s_w [N], `copies` copies of them; D [M, N] fp16.
// `gen` draws the 8-bit codes of A and W.
template <class In>
struct ScaledOperands {
  llmk::DeviceBuffer<In> a, w;
  llmk::DeviceBuffer<float> a_scales, w_scales;
  llmk::DeviceBuffer<half> d;
  gemm::QuantGemmArgs<In> args;  // everything but w / w_scales (set per copy by on_copy)

  template <class Gen>
  ScaledOperands(const Shape& s, std::size_t copies, Gen gen)
      : a(s.mk()), w(copies * s.nk()), a_scales(s.m), w_scales(copies * s.n), d(s.mn()) {
    fill_random(a, 1, gen);
    fill_random(w, 2, gen);
    fill_random(a_scales, 3, int8_scale);
    fill_random(w_scales, 4, int8_scale);
    args.a = a.data();
    args.lda = s.k;
    args.ldw = s.k;
    args.m = s.m;
    args.n = s.n;
    args.k = s.k;
    args.scales.a_scales = a_scales.data();
    args.scales.a_per_token = true;
    args.scales.w_per_channel = true;
    args.d = d.data();
    args.ldd = s.n;
  }
  // `p` (args, or a copy of it) pointed at weight copy c.
  void on_copy(gemm::QuantGemmArgs<In>& p, const Shape& s, std::size_t c) const {
    p.w = w.data() + c * s.nk();
    p.scales.w_scales = w_scales.data() + c * s.n;
  }
};

// BM_W8A8 and BM_FP8: `gemm_fn(args)` on In codes drawn by `gen`; `hopper`: the workspace of the Hopper
// kernel's split plan at any M (BM_W8A8Hopper / BM_FP8Hopper).
template <class In, class Gen, class GemmFn>
void run_scaled_8bit(benchmark::State& state, Gen gen, GemmFn gemm_fn, bool hopper = false) {
  const Shape s(state);
  const double weight_bytes = static_cast<double>(s.nk()) + 4.0 * s.n;  // W + s_w
  const std::size_t copies = copies_for(static_cast<std::size_t>(weight_bytes));
  ScaledOperands<In> x(s, copies, gen);
  // Split-K at decode-sized M (few output tiles) needs a workspace for its partials, as cuBLASLt gets one.
  const std::size_t ws_bytes =
      hopper ? gemm::sm90_detail::sm90_split_plan_chosen<In>(s.m, s.n, s.k, 0, llmk::device_sm_count())
                   .workspace_bytes()
             : gemm::quant_gemm_workspace_bytes(x.args);
  llmk::DeviceBuffer<unsigned char> workspace(std::max<std::size_t>(ws_bytes, 16));
  x.args.workspace = workspace.data();
  x.args.workspace_bytes = ws_bytes;
  const double bytes = static_cast<double>(s.mk()) + 4.0 * s.m + weight_bytes + 2.0 * s.mn();
  run_timed(state, s, bytes, copies, [&](std::size_t c) {
    gemm::QuantGemmArgs<In> step = x.args;
    x.on_copy(step, s, c);
    return gemm_fn(step);
  });
}

void BM_W8A8(benchmark::State& state) try {
  run_scaled_8bit<std::int8_t>(state, random_int8,
                               [](const auto& p) { return gemm::w8a8_gemm<half>(p, nullptr); });
}
LLMK_BENCH_CATCH(state)
void BM_FP8(benchmark::State& state) try {
  run_scaled_8bit<llmk::float8_e4m3>(state, normal_fp8,
                                     [](const auto& p) { return gemm::fp8_gemm<half>(p, nullptr); });
}
LLMK_BENCH_CATCH(state)

#if defined(LLMK_CUDA)
// w8a8_gemm / fp8_gemm's Hopper kernel at every M (they take it for M > 64 only): the crossover at M <= 64
// against their mma.sync split-K tiles (BM_W8A8 / BM_FP8). Skipped without sm_90a.
void BM_W8A8Hopper(benchmark::State& state) try {
  run_scaled_8bit<std::int8_t>(
      state, random_int8,
      [](const auto& p) {
        return gemm::sm90_detail::with_chosen_tile<std::int8_t>(
            p.m, p.n, [&]<class Cfg>(Cfg) { return gemm::w8a8_gemm_sm90<half, Cfg>(p, nullptr); });
      },
      true);
}
LLMK_BENCH_CATCH(state)
void BM_FP8Hopper(benchmark::State& state) try {
  run_scaled_8bit<llmk::float8_e4m3>(
      state, normal_fp8,
      [](const auto& p) {
        return gemm::sm90_detail::with_chosen_tile<llmk::float8_e4m3>(
            p.m, p.n, [&]<class Cfg>(Cfg) { return gemm::fp8_gemm_sm90<half, Cfg>(p, nullptr); });
      },
      true);
}
LLMK_BENCH_CATCH(state)

// The Hopper fp16 GEMM (gemm_f16_sm90, llmk/gemm/gemm_f16.cuh): fp16 A and W, fp32 accumulate, fp16 out (the
// bytes of BM_CublasHgemm), with a workspace so that small M splits K as cuBLAS's does. Skipped with
// gemm_f16_sm90's message where the device or the build has no sm_90a code.
void BM_Sm90Hgemm(benchmark::State& state) try {
  const Shape s(state);
  const std::size_t copies = copies_for(2 * s.nk());
  llmk::DeviceBuffer<half> a(s.mk()), w(copies * s.nk());
  llmk::DeviceBuffer<half> d(s.mn());
  fill_random(a, 7, normal_half);
  fill_random(w, 8, normal_half);
  gemm::GemmF16Args<half, half> g{a.data(), s.k, w.data(), s.k, nullptr, s.n, d.data(), s.n, s.m, s.n, s.k};
  const std::size_t ws_bytes = gemm::gemm_f16_workspace_bytes(g);
  llmk::DeviceBuffer<unsigned char> workspace(std::max<std::size_t>(ws_bytes, 16));
  g.workspace = workspace.data();
  g.workspace_bytes = ws_bytes;
  const double bytes = 2.0 * static_cast<double>(s.mk()) + 2.0 * static_cast<double>(s.nk()) + 2.0 * s.mn();
  run_timed(state, s, bytes, copies, [&](std::size_t c) {
    gemm::GemmF16Args<half, half> gc = g;
    gc.b = w.data() + c * s.nk();
    return gemm::gemm_f16_sm90(gc, nullptr);
  });
}
LLMK_BENCH_CATCH(state)

// The Hopper GEMM's K sweep (docs/gemm.md, "Measured and predicted"). The 2026-11-25 H100 run fitted the
// large-M Hopper GEMMs as rounds x (F + k-tiles x 0.425 us) with an unexplained fixed cost F of 4.4-7.5 us a
// round, from shapes that varied M, N and the tile together. Here only K moves (M = N = 4096: the same
// rounds at every K), so one run separates F from the slope per tile width, and the two widths tell an
// L2-bound slope (in proportion to the operand bytes of a k-tile: 1.5x from BN = 128 to 256) from a
// tensor-bound one (in proportion to its FLOPs: 2x).
// Cm = 2: Sm90ClusterGemmConfig (clusters of 2 blocks along M, B multicast): the slope it saves is the L2
// term. Pp = 1: Sm90PingPongGemmConfig (each consumer warpgroup owns whole tiles, the two alternate, one's
// epilogue under the other's k-loop): the F it saves is the epilogue's share (the name gains ", 1").
template <class In, int BN, int Cm, int Pp>
using SweepBase = std::conditional_t<Pp == 0, gemm::Sm90GemmConfig<In, BN>,
                                     gemm::Sm90PingPongGemmConfig<gemm::Sm90GemmConfig<In, BN>>>;
template <class In, int BN, int Cm, int Pp = 0>
using SweepConfig = std::conditional_t<Cm == 1, SweepBase<In, BN, Cm, Pp>,
                                       gemm::Sm90ClusterGemmConfig<SweepBase<In, BN, Cm, Pp>>>;

template <int BN, int Cm, int Pp = 0>
void BM_Sm90KSweepF16(benchmark::State& state) try {
  const Shape s(state);
  const std::size_t copies = copies_for(2 * s.nk());
  llmk::DeviceBuffer<half> a(s.mk()), w(copies * s.nk()), d(s.mn());
  fill_random(a, 7, normal_half);
  fill_random(w, 8, normal_half);
  gemm::GemmF16Args<half, half> g{a.data(), s.k, w.data(), s.k, nullptr, s.n, d.data(), s.n, s.m, s.n, s.k};
  g.split_k = 1;
  const double bytes = 2.0 * static_cast<double>(s.mk()) + 2.0 * static_cast<double>(s.nk()) + 2.0 * s.mn();
  run_timed(state, s, bytes, copies, [&](std::size_t c) {
    gemm::GemmF16Args<half, half> gc = g;
    gc.b = w.data() + c * s.nk();
    return gemm::gemm_f16_sm90<SweepConfig<half, BN, Cm, Pp>>(gc, nullptr);
  });
}
LLMK_BENCH_CATCH(state)
template <int BN, int Cm, int Pp = 0>
void BM_Sm90KSweepI8(benchmark::State& state) try {
  const Shape s(state);
  const double weight_bytes = static_cast<double>(s.nk()) + 4.0 * s.n;  // W + s_w
  const std::size_t copies = copies_for(static_cast<std::size_t>(weight_bytes));
  ScaledOperands<std::int8_t> x(s, copies, random_int8);
  x.args.split_k = 1;
  const double bytes = static_cast<double>(s.mk()) + 4.0 * s.m + weight_bytes + 2.0 * s.mn();
  run_timed(state, s, bytes, copies, [&](std::size_t c) {
    gemm::QuantGemmArgs<std::int8_t> step = x.args;
    x.on_copy(step, s, c);
    return gemm::w8a8_gemm_sm90<half, SweepConfig<std::int8_t, BN, Cm, Pp>>(step, nullptr);
  });
}
LLMK_BENCH_CATCH(state)

// Block-wise fp8 (gemm::fp8_gemm_blockwise, DeepSeek-V3 scales): e4m3 A and W, s_a per token and 128 of K
// (token-contiguous), s_w per 128 x 128 weight block, fp16 out. Hopper only (skipped elsewhere with the
// launcher's message); its anchor is BM_CublasLtFp8 (per-tensor scaling, the same bytes of A and W).
void BM_FP8Blockwise(benchmark::State& state) try {
  const Shape s(state);
  const int kb = (s.k + 127) / 128, nb = (s.n + 127) / 128;
  const double weight_bytes = static_cast<double>(s.nk()) + 4.0 * nb * kb;
  const std::size_t copies = copies_for(static_cast<std::size_t>(weight_bytes));
  llmk::DeviceBuffer<llmk::float8_e4m3> a(s.mk()), w(copies * s.nk());
  llmk::DeviceBuffer<float> sa(static_cast<std::size_t>(kb) * s.m), sw(copies * nb * kb);
  llmk::DeviceBuffer<half> d(s.mn());
  fill_random(a, 1, normal_fp8);
  fill_random(w, 2, normal_fp8);
  fill_random(sa, 3, int8_scale);
  fill_random(sw, 4, int8_scale);
  const double bytes = static_cast<double>(s.mk()) + 4.0 * kb * s.m + weight_bytes + 2.0 * s.mn();
  run_timed(state, s, bytes, copies, [&](std::size_t c) {
    const gemm::Fp8BlockGemmArgs p{a.data(),
                                   s.k,
                                   w.data() + c * s.nk(),
                                   s.k,
                                   s.m,
                                   s.n,
                                   s.k,
                                   {sa.data(), s.m, sw.data() + c * nb * kb, nullptr},
                                   d.data(),
                                   s.n};
    return gemm::fp8_gemm_blockwise<half>(p, nullptr);
  });
}
LLMK_BENCH_CATCH(state)
#endif

void BM_MixedInt8(benchmark::State& state) try {
  const Shape s(state);
  const std::size_t w_out_count = static_cast<std::size_t>(s.n) * kOutliers;
  // W (outlier columns zeroed, still read) + s_w + the fp16 outlier weights.
  const double weight_bytes = static_cast<double>(s.nk()) + 4.0 * s.n + 2.0 * w_out_count;
  const std::size_t copies = copies_for(static_cast<std::size_t>(weight_bytes));
  const ScaledOperands<std::int8_t> x(s, copies, random_int8);
  llmk::DeviceBuffer<half> a_out(static_cast<std::size_t>(s.m) * kOutliers), w_out(copies * w_out_count);
  fill_random(a_out, 5, normal_half);
  fill_random(w_out, 6, normal_half);

  gemm::MixedInt8Args p;
  p.regular = x.args;
  p.a_outliers = a_out.data();
  p.lda_outliers = kOutliers;
  p.ldw_outliers = kOutliers;
  p.k_outliers = kOutliers;
  const double bytes =
      static_cast<double>(s.mk()) + 4.0 * s.m + 2.0 * s.m * kOutliers + weight_bytes + 2.0 * s.mn();
  run_timed(state, s, bytes, copies, [&](std::size_t c) {
    gemm::MixedInt8Args step = p;
    x.on_copy(step.regular, s, c);
    step.w_outliers = w_out.data() + c * w_out_count;
    return gemm::mixed_int8_gemm<half>(step, nullptr);
  });
}
LLMK_BENCH_CATCH(state)

// Weight-only GEMM: `bits` 4 or 8, scales per group of `group` K columns (0: per channel, G = K), uint8 zero
// points or none. The packed weights are random bytes: the repack (weight_only_repack) of random codes is a
// permutation of random codes, so random packed bytes are exactly what a repacked random weight looks like.
void run_weight_only(benchmark::State& state, int bits, int group, bool zero_points,
                     gemm::WeightOnlyKernel kernel = gemm::WeightOnlyKernel::kAuto) {
  const Shape s(state);
  const int g = group > 0 ? group : s.k;
  const std::size_t packed_bytes = gemm::weight_only_packed_bytes(s.n, s.k, bits);
  const std::size_t quant_count = static_cast<std::size_t>(s.k / g) * s.n;
  const double weight_bytes = static_cast<double>(packed_bytes) + 2.0 * quant_count +
                              (zero_points ? static_cast<double>(quant_count) : 0.0);
  const std::size_t copies = copies_for(static_cast<std::size_t>(weight_bytes));
  llmk::DeviceBuffer<half> a(s.mk()), scales(copies * quant_count), d(s.mn());
  llmk::DeviceBuffer<std::uint8_t> w(copies * packed_bytes), zeros(zero_points ? copies * quant_count : 0);
  fill_random(a, 1, normal_half);
  fill_random(w, 2, random_byte);
  fill_random(scales, 3, weight_scale);
  fill_random(zeros, 4, bits == 4 ? random_code4 : random_byte);  // function pointers: pools drawn once

  gemm::WeightOnlyArgs<half> x;
  x.a = a.data();
  x.lda = s.k;
  x.w_bytes = static_cast<std::int64_t>(packed_bytes);
  x.scales_size = static_cast<std::int64_t>(quant_count);
  x.zeros_size = zero_points ? static_cast<std::int64_t>(quant_count) : 0;
  x.d = d.data();
  x.ldd = s.n;
  x.m = s.m;
  x.n = s.n;
  x.k = s.k;
  x.group_size = g;
  x.bits = bits;
  x.kernel = kernel;
  x.scales = scales.data();
  x.zeros = zero_points ? zeros.data() : nullptr;
  if (kernel == gemm::WeightOnlyKernel::kHopper && !gemm::detail::weight_only_sm90_runnable(x)) {
    state.SkipWithError("the Hopper weight-only kernel cannot run here (needs sm_90 and sm_90a code)");
    return;
  }
  // Split-K (by the SM count) needs a workspace for its partials; it needs no initialization.
  const std::size_t ws_bytes = gemm::weight_only_workspace_bytes(x);
  llmk::DeviceBuffer<unsigned char> workspace(std::max<std::size_t>(ws_bytes, 16));
  state.counters["splits"] = static_cast<double>(gemm::detail::wo_plan(x, llmk::device_sm_count()).splits);
  const double bytes = 2.0 * static_cast<double>(s.mk()) + weight_bytes + 2.0 * s.mn();
  run_timed(state, s, bytes, copies, [&](std::size_t c) {
    gemm::WeightOnlyArgs<half> step = x;
    step.w = w.data() + c * packed_bytes;
    step.scales = scales.data() + c * quant_count;
    step.zeros = zero_points ? zeros.data() + c * quant_count : nullptr;
    return gemm::weight_only_gemm(step, workspace.data(), ws_bytes, nullptr);
  });
}

void BM_W4A16(benchmark::State& state) try { run_weight_only(state, 4, kGroupSize, true); }
LLMK_BENCH_CATCH(state)
void BM_W4A16PerChannel(benchmark::State& state) try { run_weight_only(state, 4, 0, false); }
LLMK_BENCH_CATCH(state)
void BM_W8A16(benchmark::State& state) try { run_weight_only(state, 8, 0, false); }
LLMK_BENCH_CATCH(state)
void BM_W4A16Hopper(benchmark::State& state) try {
  run_weight_only(state, 4, kGroupSize, true, gemm::WeightOnlyKernel::kHopper);
}
LLMK_BENCH_CATCH(state)
void BM_W4A16MmaSync(benchmark::State& state) try {
  run_weight_only(state, 4, kGroupSize, true, gemm::WeightOnlyKernel::kMmaSync);
}
LLMK_BENCH_CATCH(state)

// ---- cuBLAS baselines (CUDA build) ----
#if defined(LLMK_QUANT_GEMM_CUBLAS)

void BM_CublasHgemm(benchmark::State& state) try {
  const Shape s(state);
  const double weight_bytes = 2.0 * static_cast<double>(s.nk());
  const std::size_t copies = copies_for(static_cast<std::size_t>(weight_bytes));
  llmk::DeviceBuffer<half> a(s.mk()), w(copies * s.nk()), d(s.mn());
  fill_random(a, 1, normal_half);
  fill_random(w, 2, [](std::mt19937& rng) {  // ~ the dequantized weights of BM_W4A16
    return half(std::normal_distribution<float>(0.0f, 0.05f)(rng));
  });
  llmk::bench::CublasHandle handle;
  if (!llmk::bench::skip_unless_ok(state,
                                   llmk::bench::cublas_status("cublasCreate", cublasCreate(&handle.h))))
    return;
  const float alpha = 1.0f, beta = 0.0f;  // fp32: the scale type of CUBLAS_COMPUTE_32F
  const double bytes = 2.0 * static_cast<double>(s.mk()) + weight_bytes + 2.0 * s.mn();
  run_timed(state, s, bytes, copies, [&](std::size_t c) {
    return llmk::bench::cublas_tn(handle.h, s.m, s.n, s.k, &alpha, w.data() + c * s.nk(), CUDA_R_16F,
                                  a.data(), &beta, d.data(), CUDA_R_16F, CUBLAS_COMPUTE_32F);
  });
}
LLMK_BENCH_CATCH(state)

// cuBLASLt GEMM, the same mapping as cublas_tn: cuBLASLt A = W (stored [K, N], TRANSA = T), B = A (stored
// [K, M], TRANSB = N), C = D = [N, M] column-major. Int8 IMMA and fp8 kernels with the regular (column-major)
// order need exactly this TN form; int8 also needs leading dimensions and cuBLAS m (= our N) multiples of 4,
// fp8 multiples of 16: all our shapes qualify (cuBLASLt's heuristic says when a shape has no algorithm).
struct LtGemm {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr, b_layout = nullptr, c_layout = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic{};
  bool found = false;

  static llmk::Status check(const char* call, cublasStatus_t s) {
    if (s == CUBLAS_STATUS_SUCCESS) return {};
    return llmk::Status::cuda_error(call, cublasLtGetStatusString(s));
  }

  // Sets everything up and asks for the best algorithm; found == false when cuBLASLt has none.
  llmk::Status init(int m, int n, int k, std::size_t workspace_bytes, cudaDataType_t in_type,
                    cudaDataType_t out_type, cublasComputeType_t compute, cudaDataType_t scale_type) {
    LLMK_RETURN_IF_ERROR(check("cublasLtCreate", cublasLtCreate(&handle)));
    LLMK_RETURN_IF_ERROR(
        check("cublasLtMatmulDescCreate", cublasLtMatmulDescCreate(&desc, compute, scale_type)));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    LLMK_RETURN_IF_ERROR(
        check("cublasLtMatmulDescSetAttribute",
              cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a))));
    LLMK_RETURN_IF_ERROR(
        check("cublasLtMatmulDescSetAttribute",
              cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b))));
    LLMK_RETURN_IF_ERROR(
        check("cublasLtMatrixLayoutCreate", cublasLtMatrixLayoutCreate(&a_layout, in_type, k, n, k)));
    LLMK_RETURN_IF_ERROR(
        check("cublasLtMatrixLayoutCreate", cublasLtMatrixLayoutCreate(&b_layout, in_type, k, m, k)));
    LLMK_RETURN_IF_ERROR(
        check("cublasLtMatrixLayoutCreate", cublasLtMatrixLayoutCreate(&c_layout, out_type, n, m, n)));
    LLMK_RETURN_IF_ERROR(check("cublasLtMatmulPreferenceCreate", cublasLtMatmulPreferenceCreate(&pref)));
    LLMK_RETURN_IF_ERROR(
        check("cublasLtMatmulPreferenceSetAttribute",
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &workspace_bytes, sizeof(workspace_bytes))));
    int returned = 0;
    const cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic(handle, desc, a_layout, b_layout, c_layout,
                                                            c_layout, pref, 1, &heuristic, &returned);
    found = h == CUBLAS_STATUS_SUCCESS && returned > 0;
    if (h != CUBLAS_STATUS_SUCCESS && h != CUBLAS_STATUS_NOT_SUPPORTED)
      return check("cublasLtMatmulAlgoGetHeuristic", h);
    return {};
  }

  // alpha / beta point to values of the descriptor's scale type.
  llmk::Status run(const void* w, const void* a, void* d, const void* alpha, const void* beta,
                   void* workspace, std::size_t workspace_bytes) const {
    return check("cublasLtMatmul",
                 cublasLtMatmul(handle, desc, alpha, w, a_layout, a, b_layout, beta, d, c_layout, d, c_layout,
                                &heuristic.algo, workspace, workspace_bytes, nullptr));
  }

  ~LtGemm() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (c_layout != nullptr) cublasLtMatrixLayoutDestroy(c_layout);
    if (b_layout != nullptr) cublasLtMatrixLayoutDestroy(b_layout);
    if (a_layout != nullptr) cublasLtMatrixLayoutDestroy(a_layout);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    if (handle != nullptr) cublasLtDestroy(handle);
  }
};

constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;

void BM_CublasLtInt8(benchmark::State& state) try {
  const Shape s(state);
  const double weight_bytes = static_cast<double>(s.nk());
  const std::size_t copies = copies_for(static_cast<std::size_t>(weight_bytes));
  llmk::DeviceBuffer<std::int8_t> a(s.mk()), w(copies * s.nk());
  llmk::DeviceBuffer<std::int32_t> d(s.mn());
  fill_random(a, 1, random_int8);
  fill_random(w, 2, random_int8);
  llmk::DeviceBuffer<unsigned char> workspace(kLtWorkspaceBytes);

  LtGemm lt;
  llmk::bench::CublasHandle fallback;
  const llmk::Status st = [&]() -> llmk::Status {
    LLMK_RETURN_IF_ERROR(
        lt.init(s.m, s.n, s.k, kLtWorkspaceBytes, CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I, CUDA_R_32I));
    if (lt.found) return {};
    return llmk::bench::cublas_status("cublasCreate", cublasCreate(&fallback.h));
  }();
  if (!llmk::bench::skip_unless_ok(state, st)) return;
  const std::int32_t alpha = 1, beta = 0;  // int32: the scale type of the descriptor
  const double bytes = static_cast<double>(s.mk()) + weight_bytes + 4.0 * s.mn();
  run_timed(state, s, bytes, copies, [&](std::size_t c) {
    const std::int8_t* wc = w.data() + c * s.nk();
    if (lt.found) return lt.run(wc, a.data(), d.data(), &alpha, &beta, workspace.data(), kLtWorkspaceBytes);
    return llmk::bench::cublas_tn(fallback.h, s.m, s.n, s.k, &alpha, wc, CUDA_R_8I, a.data(), &beta, d.data(),
                                  CUDA_R_32I, CUBLAS_COMPUTE_32I);
  });
  state.counters["cublaslt"] = lt.found ? 1.0 : 0.0;
}
LLMK_BENCH_CATCH(state)

// cuBLASLt fp8: e4m3 A and W, fp32 compute, fp16 out (no scales: the bare fp8 tensor-core GEMM, the floor for
// BM_FP8, which also applies per-token x per-channel scales). sm_89+; a device or shape without an fp8
// algorithm skips with cuBLASLt's answer.
void BM_CublasLtFp8(benchmark::State& state) try {
  const Shape s(state);
  const double weight_bytes = static_cast<double>(s.nk());
  const std::size_t copies = copies_for(static_cast<std::size_t>(weight_bytes));
  llmk::DeviceBuffer<llmk::float8_e4m3> a(s.mk()), w(copies * s.nk());
  llmk::DeviceBuffer<half> d(s.mn());
  fill_random(a, 1, normal_fp8);
  fill_random(w, 2, normal_fp8);
  llmk::DeviceBuffer<unsigned char> workspace(kLtWorkspaceBytes);
  LtGemm lt;
  const llmk::Status st = [&]() -> llmk::Status {
    LLMK_RETURN_IF_ERROR(lt.init(s.m, s.n, s.k, kLtWorkspaceBytes, CUDA_R_8F_E4M3, CUDA_R_16F,
                                 CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (!lt.found)
      return llmk::Status::unsupported("cuBLASLt has no fp8 e4m3 algorithm for this shape/device");
    return {};
  }();
  if (!llmk::bench::skip_unless_ok(state, st)) return;
  const float alpha = 1.0f, beta = 0.0f;
  const double bytes = static_cast<double>(s.mk()) + weight_bytes + 2.0 * s.mn();
  run_timed(state, s, bytes, copies, [&](std::size_t c) {
    return lt.run(w.data() + c * s.nk(), a.data(), d.data(), &alpha, &beta, workspace.data(),
                  kLtWorkspaceBytes);
  });
}
LLMK_BENCH_CATCH(state)

#endif  // LLMK_QUANT_GEMM_CUBLAS

// ---- registration ----

#if defined(LLMK_CUDA)
// Llama-7B projections: (N, K) = attention (4096, 4096), MLP up/gate (11008, 4096), MLP down (4096, 11008).
void shape_args(benchmark::internal::Benchmark* b) {
  for (const auto& [n, k] : {std::pair{4096, 4096}, std::pair{11008, 4096}, std::pair{4096, 11008}})
    for (int m : {1, 16, 64, 128, 256, 4096}) b->Args({m, n, k});
}
// The weight-only grid (decode and small batches): M from 1 to 256 (and 4096, the large-M dispatch) over the
// (N, K) of real layers: Llama-7B attention / MLP up / MLP down, Llama-3-8B MLP up (14336), and a fused
// gate+up of it (28672). BM_CublasHgemm runs the same grid (a superset of shape_args).
void weight_only_grid_args(benchmark::internal::Benchmark* b) {
  for (const auto& [n, k] : {std::pair{4096, 4096}, std::pair{11008, 4096}, std::pair{4096, 11008},
                             std::pair{14336, 4096}, std::pair{28672, 4096}})
    for (int m : {1, 2, 4, 8, 16, 32, 64, 128, 256, 4096}) b->Args({m, n, k});
}
// The kernels on either side of the weight-only dispatch's M threshold (a subset of the grid, so that
// BM_CublasHgemm anchors every row).
void weight_only_crossover_args(benchmark::internal::Benchmark* b) {
  for (const auto& [n, k] :
       {std::pair{4096, 4096}, std::pair{11008, 4096}, std::pair{4096, 11008}, std::pair{28672, 4096}})
    for (int m : {1, 4, 16, 32, 64, 128, 256}) b->Args({m, n, k});
}
// BM_Sm90KSweepF16 / I8: one output of 512 (BN = 256) or 1024 (BN = 128) tiles, K from 256 to 8192.
void k_sweep_args(benchmark::internal::Benchmark* b) {
  for (int k : {256, 1024, 2048, 4096, 8192}) b->Args({4096, 4096, k});
}
// The 8-bit GEMMs' Hopper kernel where the dispatch takes the mma.sync tiles (M <= 64; a subset of
// shape_args, so that the cuBLASLt anchors cover every row).
void hopper_small_m_args(benchmark::internal::Benchmark* b) {
  for (const auto& [n, k] : {std::pair{4096, 4096}, std::pair{11008, 4096}, std::pair{4096, 11008}})
    for (int m : {1, 16, 64}) b->Args({m, n, k});
}
#define LLMK_BENCH_UNIT ->UseManualTime()->Unit(benchmark::kMicrosecond)
#else
// The simulator: the decode tile (M = 1) and a full 16-row tile, one 128 x 128 weight.
void shape_args(benchmark::internal::Benchmark* b) {
  b->Args({1, 128, 128});
  b->Args({16, 128, 128});
}
void weight_only_grid_args(benchmark::internal::Benchmark* b) {
  shape_args(b);
}
void weight_only_crossover_args(benchmark::internal::Benchmark* b) {
  b->Args({1, 128, 128});
}
#define LLMK_BENCH_UNIT ->UseManualTime()->Unit(benchmark::kMillisecond)
#endif

#define LLMK_QUANT_BENCH(fn, args) BENCHMARK(fn)->Apply(args)->ArgNames({"M", "N", "K"}) LLMK_BENCH_UNIT

LLMK_QUANT_BENCH(BM_W8A8, shape_args);
LLMK_QUANT_BENCH(BM_W4A16, weight_only_grid_args);
LLMK_QUANT_BENCH(BM_W4A16PerChannel, weight_only_grid_args);
LLMK_QUANT_BENCH(BM_W8A16, weight_only_grid_args);
LLMK_QUANT_BENCH(BM_W4A16Hopper, weight_only_crossover_args);
LLMK_QUANT_BENCH(BM_W4A16MmaSync, weight_only_crossover_args);
LLMK_QUANT_BENCH(BM_FP8, shape_args);
LLMK_QUANT_BENCH(BM_MixedInt8, shape_args);
#if defined(LLMK_CUDA)
LLMK_QUANT_BENCH(BM_Sm90Hgemm, shape_args);
LLMK_QUANT_BENCH(BM_W8A8Hopper, hopper_small_m_args);
LLMK_QUANT_BENCH(BM_FP8Hopper, hopper_small_m_args);
LLMK_QUANT_BENCH(BM_FP8Blockwise, shape_args);
#define LLMK_K_SWEEP(fn, ...) \
  BENCHMARK_TEMPLATE(fn, __VA_ARGS__)->Apply(k_sweep_args)->ArgNames({"M", "N", "K"}) LLMK_BENCH_UNIT
LLMK_K_SWEEP(BM_Sm90KSweepF16, 128, 1);
LLMK_K_SWEEP(BM_Sm90KSweepF16, 256, 1);
LLMK_K_SWEEP(BM_Sm90KSweepI8, 128, 1);
LLMK_K_SWEEP(BM_Sm90KSweepI8, 256, 1);
LLMK_K_SWEEP(BM_Sm90KSweepF16, 128, 2);
LLMK_K_SWEEP(BM_Sm90KSweepF16, 256, 2);
LLMK_K_SWEEP(BM_Sm90KSweepI8, 128, 2);
LLMK_K_SWEEP(BM_Sm90KSweepI8, 256, 2);
LLMK_K_SWEEP(BM_Sm90KSweepF16, 128, 1, 1);  // ping-pong: BN <= 128
LLMK_K_SWEEP(BM_Sm90KSweepI8, 128, 1, 1);
LLMK_K_SWEEP(BM_Sm90KSweepF16, 128, 2, 1);
LLMK_K_SWEEP(BM_Sm90KSweepI8, 128, 2, 1);
#endif
#if defined(LLMK_QUANT_GEMM_CUBLAS)
LLMK_QUANT_BENCH(BM_CublasHgemm, weight_only_grid_args);
LLMK_QUANT_BENCH(BM_CublasLtInt8, shape_args);
LLMK_QUANT_BENCH(BM_CublasLtFp8, shape_args);
#endif

}  // namespace
