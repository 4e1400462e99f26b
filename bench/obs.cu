// Benchmarks of the OBS family (llmk/obs): the Hessian accumulation kernels, GPTQ and SparseGPT on the host
// (LAPACK/BLAS) and on the GPU path (cuSOLVER/cuBLAS + the fused column-loop kernel). On a GPU: the kernels'
// device time (CUDA events), the algorithms' wall time; in the simulator: the cost of simulating tiny shapes
// (those numbers say nothing about a GPU), and the host algorithms at a small shape.
//
// Benchmarks (arguments named in the benchmark name):
//   BM_Hessian<half|bfloat16|float>  d, rows: one hessian_update of a [rows, d] batch on a running H [d, d]
//                    (samples = rows, so H is read and written: a batch after the first). 16-bit batches take
//                    the tensor-core kernel, fp32 the SIMT one (counter tensor_core: 1 / 0).
//                    X rows are padded to ldx = a multiple of 8 elements. GPU: d in {4096, 11008}, rows
//                    2048. Simulator: d in {64, 130}, rows 48.
//   BM_GptqHost      N, K: llmk::obs::gptq_quantize with HostLapackBackend; W [N out, K in], 4-bit symmetric,
//                    group 128, block 128, no act-order.
//   BM_SparseGptHost N, K: llmk::obs::sparsegpt_prune with HostLapackBackend; 50% unstructured, no quant.
//                    Host shapes, both builds: N = K = 256 by default; with LLMK_BENCH_OBS_LAYERS=1 in the
//                    environment, Llama-7B's 4096 x 4096 (attention) and 11008 x 4096 (MLP up/gate) instead.
//                    Opt-in because with Debian's reference BLAS one run takes minutes (4096 x 4096 GPTQ:
//                    about 300 GFLOP of Cholesky/inverse, trailing-update and loss GEMMs). One iteration
//                    each.
//   BM_GptqGpu       N, K: llmk::obs::gptq_quantize_gpu, the BM_GptqHost options; CudaLinalgBackend on a GPU
//                    (4096 x 4096, 11008 x 4096), HostLapackBackend and the simulated kernels in the
//                    simulator (N = 16, K = 128).
//   BM_SparseGptGpu  N, K: llmk::obs::sparsegpt_prune_gpu, the BM_SparseGptHost options, BM_GptqGpu's shapes.
//   BM_PruneBlockSelect / BM_PruneDeviceSort  N, K, wanda: magnitude (per layer) or Wanda (per row) at 50%
//                    through the workspace form, CTA radix select vs CUB sorts (PruneGpuSelect); GPU: the
//                    BM_GptqGpu shapes, simulator: 16 x 128. Device time including the validation sync.
//
// Counters:
//   BM_Hessian: FLOP/s with FLOPs = rows d (d + 1), the multiply-adds of the lower triangle of X^T X
//     (what the kernels must compute; a full GEMM would count 2 rows d^2); bytes/s with bytes = X read
//     once + H read and written (rows d sizeof(T) + 8 d^2), the minimal traffic. X is rotated over x_copies
//     copies (4x the L2), as fresh activations would be; H stays (it is the running state).
//   GPTQ / SparseGPT: the phase split of ObsTimings in seconds per run (the GPU paths synchronize at
//     the phase boundaries): prepare_s, inverse_s (damping + Cholesky + inverse + Cholesky of the inverse),
//     column_loop_s (the in-block column loops), trailing_s (the lazy trailing GEMMs), loss_s (the reported
//     layer loss); loss (the layer loss 1/2 tr((W - Q) H (W - Q)^T), to see that the runs agree). Wall time
//     (UseRealTime).
//
// Inputs: W ~ N(0, 0.02^2); H_ij = s_i s_j 0.5^|i - j| (SPD, correlated neighbouring channels, log-normal
// channel scales s_i = exp(N(0, 0.5^2)) like activations' outlier channels), built in O(K^2).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/obs/gptq.hpp"
#include "llmk/obs/gptq_gpu.cuh"
#include "llmk/obs/hessian.cuh"
#include "llmk/obs/linalg.hpp"
#include "llmk/obs/pruning_gpu.cuh"
#include "llmk/obs/sparsegpt.hpp"
#include "llmk/obs/sparsegpt_gpu.cuh"
#include "support/bench_data.hpp"
#include "support/gpu_timer.hpp"

#if defined(LLMK_CUDA)
#include "llmk/obs/linalg_cuda.cuh"
#endif

#ifndef LLMK_BENCH_BLAS
#define LLMK_BENCH_BLAS "unknown"
#endif

namespace {

namespace obs = llmk::obs;

constexpr std::int64_t kGroupSize = 128;

// ---- inputs ----

struct Layer {
  std::int64_t n = 0, k = 0;
  std::vector<float> w, h;
};

Layer make_layer(std::int64_t n, std::int64_t k) {
  Layer layer;
  layer.n = n;
  layer.k = k;
  std::mt19937 rng(1234);
  std::normal_distribution<float> wd(0.0f, 0.02f);
  layer.w.resize(static_cast<std::size_t>(n * k));
  for (float& v : layer.w) v = wd(rng);
  std::normal_distribution<double> sd(0.0, 0.5);
  std::vector<double> s(static_cast<std::size_t>(k)), pw(static_cast<std::size_t>(k));
  for (double& v : s) v = std::exp(sd(rng));
  for (std::int64_t i = 0; i < k; ++i)
    pw[static_cast<std::size_t>(i)] = std::pow(0.5, static_cast<double>(i));
  layer.h.resize(static_cast<std::size_t>(k * k));
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = 0; j < k; ++j)
      layer.h[static_cast<std::size_t>(i * k + j)] =
          static_cast<float>(s[static_cast<std::size_t>(i)] * s[static_cast<std::size_t>(j)] *
                             pw[static_cast<std::size_t>(i > j ? i - j : j - i)]);
  return layer;
}

obs::GptqOptions gptq_options() {
  obs::GptqOptions opt;
  opt.bits = 4;
  opt.group_size = kGroupSize;
  opt.block_size = 128;
  return opt;
}

obs::SparseGptOptions sparsegpt_options() {
  obs::SparseGptOptions opt;
  opt.sparsity = 0.5;
  opt.block_size = 128;
  return opt;
}

// Sums ObsTimings over iterations and reports them as per-run averages.
struct PhaseCounters {
  obs::ObsTimings sum;
  double loss = 0.0;
  void add(const obs::ObsTimings& t, double run_loss) {
    sum.prepare_s += t.prepare_s;
    sum.inverse_s += t.inverse_s;
    sum.column_loop_s += t.column_loop_s;
    sum.trailing_s += t.trailing_s;
    sum.loss_s += t.loss_s;
    loss = run_loss;
  }
  // n x k layer, block b. FLOPs: the inverse 4/3 k^3 (Cholesky, inverse, Cholesky), the trailing GEMMs
  // n k^2, the column loops n k b, the reported loss 2 n k^2 (only when it is computed: `with_loss`).
  // Bytes (the minimal traffic): W[:, i2:] in and out once per block (4 n k^2 / b), H / U / Err workspaces
  // (~16 k^2), W in and the outputs out (~9 n k).
  void report(benchmark::State& state, double n, double k, double b, bool with_loss = true) const {
    llmk::bench::set_throughput(
        state, 4.0 / 3.0 * k * k * k + n * k * k + n * k * b + (with_loss ? 2.0 * n * k * k : 0.0),
        4.0 * n * k * k / b + 16.0 * k * k + 9.0 * n * k);
    auto avg = [](double v) { return benchmark::Counter(v, benchmark::Counter::kAvgIterations); };
    state.counters["prepare_s"] = avg(sum.prepare_s);
    state.counters["inverse_s"] = avg(sum.inverse_s);
    state.counters["column_loop_s"] = avg(sum.column_loop_s);
    state.counters["trailing_s"] = avg(sum.trailing_s);
    state.counters["loss_s"] = avg(sum.loss_s);
    state.counters["loss"] = loss;
  }
};

// ---- (a) Hessian accumulation ----

template <class T>
void BM_Hessian(benchmark::State& state) try {
  const std::int64_t d = state.range(0), rows = state.range(1);
  // Rows padded to a multiple of 8 elements: 16-bit batches then meet the tensor-core kernel's rule.
  const std::int64_t ldx = (d + 7) / 8 * 8;
  const std::size_t x_count = static_cast<std::size_t>(rows * ldx),
                    x_bytes = static_cast<std::size_t>(rows * d) * sizeof(T);
  const std::size_t copies = llmk::bench::copies_for(x_count * sizeof(T));
  llmk::DeviceBuffer<T> x(copies * x_count);
  llmk::bench::fill_normal(x, 1);
  llmk::DeviceBuffer<float> h(static_cast<std::size_t>(d * d));
  // The first batch (samples = 0: H is only written) makes H a valid running Hessian; it is the warm-up.
  if (!llmk::bench::skip_unless_ok(state,
                                   obs::hessian_update(h.data(), d, d, 0, x.data(), rows, ldx, nullptr)))
    return;
  // A failure errors this row (skip_unless_ok), not the whole binary (an exception would end it).
  if (!llmk::bench::skip_unless_ok(state, llmk::device_synchronize())) return;
  llmk::bench::time_rotating(
      state, copies,
      [&](std::size_t c) {
        return obs::hessian_update(h.data(), d, d, rows, x.data() + c * x_count, rows, ldx, nullptr);
      },
      1);
  llmk::bench::set_throughput(
      state, static_cast<double>(rows) * static_cast<double>(d) * static_cast<double>(d + 1),
      static_cast<double>(x_bytes) + 8.0 * static_cast<double>(d) * static_cast<double>(d));
  state.counters["tensor_core"] =
      obs::hessian_update_kernel_for(x.data(), ldx) == obs::HessianKernel::kTensorCore ? 1.0 : 0.0;
  state.counters["x_copies"] = static_cast<double>(copies);
}
LLMK_BENCH_CATCH(state)

void BM_HessianF16(benchmark::State& state) try { BM_Hessian<llmk::half>(state); }
LLMK_BENCH_CATCH(state)
void BM_HessianBF16(benchmark::State& state) try { BM_Hessian<llmk::bfloat16>(state); }
LLMK_BENCH_CATCH(state)
void BM_HessianF32(benchmark::State& state) try { BM_Hessian<float>(state); }
LLMK_BENCH_CATCH(state)

// ---- (b, c) GPTQ and SparseGPT on the host ----

void BM_GptqHost(benchmark::State& state) try {
  const Layer layer = make_layer(state.range(0), state.range(1));
  obs::HostLapackBackend la;
  const obs::GptqOptions opt = gptq_options();
  PhaseCounters phases;
  for (auto _ : state) {
    obs::QuantizedLayer q;
    const llmk::Status s =
        obs::gptq_quantize(layer.w.data(), layer.n, layer.k, layer.k, layer.h.data(), layer.k, opt, la, &q);
    if (!s.ok()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    phases.add(q.timings, q.loss);
  }
  phases.report(state, static_cast<double>(layer.n), static_cast<double>(layer.k), 128.0);
}
LLMK_BENCH_CATCH(state)

// The issue's comparison with the GPTQ reference (PyTorch fasterquant, 1 thread: 15.3 s on this machine kind
// for 4096 x 4096): H from 2048 calibration samples (2/n X^T X, built before the timing), g128, act-order
// off, no reported loss. Run single-threaded: OPENBLAS_NUM_THREADS=1.
void BM_GptqHostNoLoss(benchmark::State& state) try {
  const std::int64_t n = state.range(0), k = state.range(1), samples = 2048;
  obs::HostLapackBackend la;
  Layer layer;
  layer.n = n;
  layer.k = k;
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  layer.w.resize(static_cast<std::size_t>(n * k));
  for (float& v : layer.w) v = 0.02f * nd(rng);
  std::vector<float> x(static_cast<std::size_t>(samples * k));
  for (float& v : x) v = nd(rng);
  layer.h.resize(static_cast<std::size_t>(k * k));
  if (!llmk::bench::skip_unless_ok(state, la.gemm(obs::Op::kTranspose, obs::Op::kNone, k, k, samples,
                                                  2.0f / static_cast<float>(samples), x.data(), k, x.data(),
                                                  k, 0.0f, layer.h.data(), k)))
    return;
  obs::GptqOptions opt = gptq_options();
  opt.report_loss = false;
  PhaseCounters phases;
  for (auto _ : state) {
    obs::QuantizedLayer q;
    const llmk::Status s =
        obs::gptq_quantize(layer.w.data(), layer.n, layer.k, layer.k, layer.h.data(), layer.k, opt, la, &q);
    if (!s.ok()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    phases.add(q.timings, 0.0);
  }
  phases.report(state, static_cast<double>(n), static_cast<double>(k), 128.0, opt.report_loss);
  state.SetLabel("blas=" LLMK_BENCH_BLAS);
}
LLMK_BENCH_CATCH(state)

void BM_SparseGptHost(benchmark::State& state) try {
  const Layer layer = make_layer(state.range(0), state.range(1));
  obs::HostLapackBackend la;
  const obs::SparseGptOptions opt = sparsegpt_options();
  PhaseCounters phases;
  for (auto _ : state) {
    obs::SparseGptResult r;
    const llmk::Status s =
        obs::sparsegpt_prune(layer.w.data(), layer.n, layer.k, layer.k, layer.h.data(), layer.k, opt, la, &r);
    if (!s.ok()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    phases.add(r.timings, r.loss);
  }
  phases.report(state, static_cast<double>(layer.n), static_cast<double>(layer.k), 128.0);
}
LLMK_BENCH_CATCH(state)

// ---- (d) the GPU path ----

// The backend of the GPU path: cuSOLVER/cuBLAS on a GPU, LAPACK/BLAS on the simulator's (host) memory.
#if defined(LLMK_CUDA)
using GpuPathBackend = obs::CudaLinalgBackend;
#else
using GpuPathBackend = obs::HostLapackBackend;
#endif

// Runs `call()` (synchronous; returns a Status and fills a report with .timings and .loss) once as the
// warm-up (handles, workspace), then per iteration, collecting the phase counters.
template <class Call>
void run_gpu_path(benchmark::State& state, std::int64_t n, std::int64_t k, Call call) {
  if (!llmk::bench::skip_unless_ok(state, call(nullptr))) return;
  PhaseCounters phases;
  for (auto _ : state) {
    const llmk::Status s = call(&phases);
    if (!s.ok()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
  }
  phases.report(state, static_cast<double>(n), static_cast<double>(k), 128.0);
}

void BM_GptqGpu(benchmark::State& state) try {
  const Layer layer = make_layer(state.range(0), state.range(1));
  const std::int64_t n = layer.n, k = layer.k, groups = k / kGroupSize;
  const obs::GptqOptions opt = gptq_options();
  llmk::DeviceBuffer<float> w(layer.w), h(layer.h);
  llmk::DeviceBuffer<std::uint8_t> codes(static_cast<std::size_t>(n * k)),
      zeros(static_cast<std::size_t>(groups * n));
  llmk::DeviceBuffer<float> scales(static_cast<std::size_t>(groups * n));
  llmk::DeviceBuffer<std::int32_t> g_idx(static_cast<std::size_t>(k));
  const std::size_t ws_bytes = obs::gptq_gpu_workspace_bytes(n, k, opt);
  llmk::DeviceBuffer<unsigned char> ws(ws_bytes);
  GpuPathBackend la;
  obs::GptqGpuOutputs out;
  out.codes = codes.data();
  out.ld_codes = k;
  out.scales = scales.data();
  out.zeros = zeros.data();
  out.g_idx = g_idx.data();
  run_gpu_path(state, n, k, [&](PhaseCounters* phases) -> llmk::Status {
    obs::GptqGpuReport rep;
    LLMK_RETURN_IF_ERROR(obs::gptq_quantize_gpu(w.data(), n, k, k, h.data(), k, opt, la, out, ws.data(),
                                                ws_bytes, nullptr, &rep));
    if (phases != nullptr) phases->add(rep.timings, rep.loss);
    return {};
  });
}
LLMK_BENCH_CATCH(state)

void BM_SparseGptGpu(benchmark::State& state) try {
  const Layer layer = make_layer(state.range(0), state.range(1));
  const std::int64_t n = layer.n, k = layer.k;
  const obs::SparseGptOptions opt = sparsegpt_options();
  llmk::DeviceBuffer<float> w(layer.w), h(layer.h), pruned(static_cast<std::size_t>(n * k));
  llmk::DeviceBuffer<std::uint8_t> mask(static_cast<std::size_t>(n * k));
  const std::size_t ws_bytes = obs::sparsegpt_gpu_workspace_bytes(n, k, opt);
  llmk::DeviceBuffer<unsigned char> ws(ws_bytes);
  GpuPathBackend la;
  obs::SparseGptGpuOutputs out;
  out.weights = pruned.data();
  out.ld_weights = k;
  out.mask = mask.data();
  out.ld_mask = k;
  run_gpu_path(state, n, k, [&](PhaseCounters* phases) -> llmk::Status {
    obs::SparseGptGpuReport rep;
    LLMK_RETURN_IF_ERROR(obs::sparsegpt_prune_gpu(w.data(), n, k, k, h.data(), k, opt, la, out, ws.data(),
                                                  ws_bytes, nullptr, &rep));
    if (phases != nullptr) phases->add(rep.timings, rep.loss);
    return {};
  });
}
LLMK_BENCH_CATCH(state)

// ---- (e) the GPU pruning selections: the CTA radix select against CUB's sorts ----

// wanda = 0: magnitude at its default scope (the whole layer); 1: Wanda at its default (per row). Both the
// workspace form, with PruneGpuSelect kBlockSelect (BM_PruneBlockSelect) or kDeviceSort (BM_PruneDeviceSort,
// the pairing's anchor): the same bits, the faster one should be kAuto's choice (pruning_gpu.cuh).
void run_prune(benchmark::State& state, obs::PruneGpuSelect select) {
  const Layer layer = make_layer(state.range(0), state.range(1));
  const std::int64_t n = layer.n, k = layer.k;
  const bool wanda = state.range(2) != 0;
  llmk::DeviceBuffer<float> w(layer.w), h(layer.h), out(static_cast<std::size_t>(n * k));
  llmk::DeviceBuffer<std::uint8_t> mask(static_cast<std::size_t>(n * k));
  obs::PruneOptions opt;
  opt.sparsity = 0.5;
  auto call = [&](void* temp, std::size_t* bytes) {
    return wanda ? obs::wanda_prune_gpu(temp, bytes, w.data(), n, k, k, h.data(), k, opt, out.data(), k,
                                        mask.data(), k, nullptr, select)
                 : obs::magnitude_prune_gpu(temp, bytes, w.data(), n, k, k, opt, out.data(), k, mask.data(),
                                            k, nullptr, select);
  };
  std::size_t bytes = 0;
  if (!llmk::bench::skip_unless_ok(state, call(nullptr, &bytes))) return;
  llmk::DeviceBuffer<unsigned char> temp(bytes);
  llmk::bench::time_iterations(state, [&] { return call(temp.data(), &bytes); });
  llmk::bench::set_throughput(state, static_cast<double>(n * k), 9.0 * n * k + 4.0 * k);
}

void BM_PruneBlockSelect(benchmark::State& state) try { run_prune(state, obs::PruneGpuSelect::kBlockSelect); }
LLMK_BENCH_CATCH(state)
void BM_PruneDeviceSort(benchmark::State& state) try { run_prune(state, obs::PruneGpuSelect::kDeviceSort); }
LLMK_BENCH_CATCH(state)

// ---- registration ----

// LLMK_BENCH_OBS_LAYERS=1 (set, not "0"): the host algorithms at the real layer shapes (minutes each).
bool layer_shapes_opted_in() {
  const char* v = std::getenv("LLMK_BENCH_OBS_LAYERS");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

// Llama-7B: attention projections (4096 x 4096) and MLP up/gate (N = 11008 out, K = 4096 in).
void layer_shapes(benchmark::internal::Benchmark* b) {
  b->Args({4096, 4096});
  b->Args({11008, 4096});
}

// The reference comparison's layer (opted in) or a small stand-in.
void reference_shapes(benchmark::internal::Benchmark* b) {
  b->Args(layer_shapes_opted_in() ? std::vector<std::int64_t>{4096, 4096}
                                  : std::vector<std::int64_t>{256, 256});
}

void host_shapes(benchmark::internal::Benchmark* b) {
  if (layer_shapes_opted_in())
    layer_shapes(b);
  else
    b->Args({256, 256});
}

#if defined(LLMK_CUDA)
void hessian_shapes(benchmark::internal::Benchmark* b) {
  b->Args({4096, 2048});
  b->Args({11008, 2048});
}
void gpu_path_shapes(benchmark::internal::Benchmark* b) {
  layer_shapes(b);
}
#define LLMK_OBS_KERNEL_UNIT ->UseManualTime()->Unit(benchmark::kMicrosecond)
#else
// The simulator: one tile plus a tail / two tile rows, 48 rows (one full 32-row slice and a partial one).
void hessian_shapes(benchmark::internal::Benchmark* b) {
  b->Args({64, 48});
  b->Args({130, 48});
}
// One 128-column block of the fused column loop, 16 rows.
void gpu_path_shapes(benchmark::internal::Benchmark* b) {
  b->Args({16, 128});
}
#define LLMK_OBS_KERNEL_UNIT ->UseManualTime()->Unit(benchmark::kMillisecond)
#endif

#define LLMK_OBS_HESSIAN_BENCH(fn) \
  BENCHMARK(fn)->Apply(hessian_shapes)->ArgNames({"d", "rows"}) LLMK_OBS_KERNEL_UNIT
#define LLMK_OBS_LAYER_BENCH(fn, shapes) \
  BENCHMARK(fn)                          \
      ->Apply(shapes)                    \
      ->ArgNames({"N", "K"})             \
      ->Iterations(1)                    \
      ->UseRealTime()                    \
      ->Unit(benchmark::kMillisecond)

LLMK_OBS_HESSIAN_BENCH(BM_HessianF16);
LLMK_OBS_HESSIAN_BENCH(BM_HessianBF16);
LLMK_OBS_HESSIAN_BENCH(BM_HessianF32);
LLMK_OBS_LAYER_BENCH(BM_GptqHost, host_shapes);
LLMK_OBS_LAYER_BENCH(BM_GptqHostNoLoss, reference_shapes);
LLMK_OBS_LAYER_BENCH(BM_SparseGptHost, host_shapes);
LLMK_OBS_LAYER_BENCH(BM_GptqGpu, gpu_path_shapes);
LLMK_OBS_LAYER_BENCH(BM_SparseGptGpu, gpu_path_shapes);
#if defined(LLMK_CUDA)
#define LLMK_PRUNE_ARGS \
  ->Args({4096, 4096, 0})->Args({4096, 4096, 1})->Args({11008, 4096, 0})->Args({11008, 4096, 1})
#else
#define LLMK_PRUNE_ARGS ->Args({16, 128, 0})->Args({16, 128, 1})
#endif
BENCHMARK(BM_PruneBlockSelect) LLMK_PRUNE_ARGS->ArgNames({"N", "K", "wanda"}) LLMK_OBS_KERNEL_UNIT;
BENCHMARK(BM_PruneDeviceSort) LLMK_PRUNE_ARGS->ArgNames({"N", "K", "wanda"}) LLMK_OBS_KERNEL_UNIT;

}  // namespace
