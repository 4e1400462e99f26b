// Throughput of the quantization kernels (llmk/quant/kernels.cuh): quantize, dequantize, quantize_dynamic,
// tensor_amax, per granularity and storage type, and the outlier column list (llmk/quant/outliers.cuh), each
// hand-written reduction next to its CUB form (the pairs' anchors, bench/model/pairs.py). They are
// memory-bound: the bytes/s counter (bytes read + written per call, parameters included) is the number to
// compare with the device's bandwidth (H100 SXM: 3.35 TB/s). Each call reads its own copy of the input
// (copies_for: 4x the L2 in all, rotated), so the input comes from DRAM as in a model's layer, not from L2
// (until 2026-11-29 the token shapes up to 1024 rows and the amax / outlier sets were re-read from L2). On a
// GPU: device time from CUDA events; in the simulator: the cost of simulating it (small shapes only).
#include <benchmark/benchmark.h>

#include <random>
#include <type_traits>
#include <vector>

#include "llmk/core/device_algorithms.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/quant/kernels.cuh"
#include "llmk/quant/outliers.cuh"
#include "support/bench_data.hpp"
#include "support/gpu_timer.hpp"

using llmk::bench::copies_for;

namespace {

namespace q = llmk::quant;

template <class T>
std::vector<T> random_tensor(std::size_t count) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<T> v(count);
  for (auto& x : v) {
    if constexpr (std::is_same_v<T, float>)
      x = dist(rng);
    else
      x = T(dist(rng));
  }
  return v;
}

// A device tensor of N(0, 1) values (uniform bytes for uint8 codes), filled from a pool of 1M values on the
// device (bench_data.hpp): generating every value on the host took most of this binary's first H100 run.
template <class T>
llmk::DeviceBuffer<T> random_device(std::size_t count) {
  llmk::DeviceBuffer<T> buf(count);
  if constexpr (std::is_same_v<T, std::uint8_t>)
    llmk::bench::fill_random(buf, 1, [](std::mt19937& rng) { return static_cast<std::uint8_t>(rng()); });
  else
    llmk::bench::fill_normal(buf, 1);
  return buf;
}

// Group size of a granularity for an argument list (GroupWise<G>: G; GroupWise<0>: 128; others: unused).
template <class Q>
int group_size_of() {
  using G = typename Q::granularity;
  if constexpr (q::is_group_wise<G>::value)
    return G::kGroupSize > 0 ? G::kGroupSize : 128;
  else
    return 0;
}

// Scales (and zero points) one [rows, cols] tensor needs.
template <class Q>
std::size_t params_of(int rows, int cols) {
  return static_cast<std::size_t>(q::param_count<typename Q::granularity>(rows, cols, group_size_of<Q>()));
}

template <class Q>
double param_bytes(int rows, int cols) {
  return static_cast<double>(params_of<Q>(rows, cols)) * (Q::kAsymmetric ? 8.0 : 4.0);
}

template <class Q>
std::int64_t row_bytes(int cols) {
  return q::storage_row_bytes<typename Q::storage_type>(cols);
}

template <class Q, class In>
void BM_QuantizeDynamic(benchmark::State& state) try {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const std::int64_t ldq = row_bytes<Q>(cols);
  const std::size_t n = static_cast<std::size_t>(rows) * cols, copies = copies_for(n * sizeof(In));
  llmk::DeviceBuffer<In> x = random_device<In>(copies * n);
  llmk::DeviceBuffer<std::uint8_t> out(static_cast<std::size_t>(rows) * ldq);
  llmk::DeviceBuffer<float> scales(params_of<Q>(rows, cols));
  llmk::DeviceBuffer<std::int32_t> zeros(params_of<Q>(rows, cols));
  std::size_t ws_bytes = 0;
  if (!llmk::bench::skip_unless_ok(
          state, q::quantize_dynamic<Q, In>(nullptr, cols, nullptr, ldq, rows, cols, nullptr, nullptr,
                                            group_size_of<Q>(), nullptr, &ws_bytes, nullptr)))
    return;
  llmk::DeviceBuffer<std::uint32_t> ws((ws_bytes + 3) / 4);
  llmk::bench::time_rotating(state, copies, [&](std::size_t c) {
    return q::quantize_dynamic<Q>(x.data() + c * n, cols, out.data(), ldq, rows, cols, scales.data(),
                                  Q::kAsymmetric ? zeros.data() : nullptr, group_size_of<Q>(), ws.data(),
                                  &ws_bytes, nullptr);
  });
  llmk::bench::set_throughput(state, 1.0 * rows * cols,
                              1.0 * rows * cols * sizeof(In) + 1.0 * rows * ldq + param_bytes<Q>(rows, cols));
}
LLMK_BENCH_CATCH(state)

template <class Q, class In>
void BM_Quantize(benchmark::State& state) try {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const std::int64_t ldq = row_bytes<Q>(cols);
  const std::size_t n = static_cast<std::size_t>(rows) * cols, copies = copies_for(n * sizeof(In));
  llmk::DeviceBuffer<In> x = random_device<In>(copies * n);
  llmk::DeviceBuffer<std::uint8_t> out(static_cast<std::size_t>(rows) * ldq);
  llmk::DeviceBuffer<float> scales(std::vector<float>(params_of<Q>(rows, cols), 0.02f));
  llmk::DeviceBuffer<std::int32_t> zeros(std::vector<std::int32_t>(params_of<Q>(rows, cols), 1));
  llmk::bench::time_rotating(state, copies, [&](std::size_t c) {
    return q::quantize<Q>(x.data() + c * n, cols, out.data(), ldq, rows, cols, scales.data(), zeros.data(),
                          group_size_of<Q>(), nullptr);
  });
  llmk::bench::set_throughput(state, 1.0 * rows * cols,
                              1.0 * rows * cols * sizeof(In) + 1.0 * rows * ldq + param_bytes<Q>(rows, cols));
}
LLMK_BENCH_CATCH(state)

template <class Q, class Out>
void BM_Dequantize(benchmark::State& state) try {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const std::int64_t ldq = row_bytes<Q>(cols);
  const std::size_t n = static_cast<std::size_t>(rows) * ldq, copies = copies_for(n);
  llmk::DeviceBuffer<std::uint8_t> codes = random_device<std::uint8_t>(copies * n);
  llmk::DeviceBuffer<Out> y(static_cast<std::size_t>(rows) * cols);
  llmk::DeviceBuffer<float> scales(std::vector<float>(params_of<Q>(rows, cols), 0.02f));
  llmk::DeviceBuffer<std::int32_t> zeros(std::vector<std::int32_t>(params_of<Q>(rows, cols), 1));
  llmk::bench::time_rotating(state, copies, [&](std::size_t c) {
    return q::dequantize<Q>(codes.data() + c * n, ldq, y.data(), cols, rows, cols, scales.data(),
                            zeros.data(), group_size_of<Q>(), nullptr);
  });
  llmk::bench::set_throughput(
      state, 1.0 * rows * cols,
      1.0 * rows * ldq + 1.0 * rows * cols * sizeof(Out) + param_bytes<Q>(rows, cols));
}
LLMK_BENCH_CATCH(state)

template <class In>
void BM_TensorAmax(benchmark::State& state) try {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const std::size_t n = static_cast<std::size_t>(rows) * cols, copies = copies_for(n * sizeof(In));
  llmk::DeviceBuffer<In> x = random_device<In>(copies * n);
  llmk::DeviceBuffer<float> amax(1);
  llmk::bench::time_rotating(state, copies, [&](std::size_t c) {
    return q::tensor_amax(x.data() + c * n, cols, rows, cols, amax.data(), nullptr);
  });
  llmk::bench::set_throughput(state, 1.0 * rows * cols, 1.0 * rows * cols * sizeof(In) + 4.0);
}
LLMK_BENCH_CATCH(state)

// The same reduction by CUB (llmk::device::reduce_max_abs: cub::DeviceReduce on a GPU) on the same contiguous
// tensor: the pairing's anchor of BM_TensorAmax (bench/model/pairs.py). tensor_amax stays hand-written
// (strided views with 16-byte loads, no workspace) while it is not slower than this.
template <class In>
void BM_TensorAmaxCub(benchmark::State& state) try {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const std::int64_t n = static_cast<std::int64_t>(rows) * cols;
  const std::size_t copies = copies_for(static_cast<std::size_t>(n) * sizeof(In));
  llmk::DeviceBuffer<In> x = random_device<In>(copies * static_cast<std::size_t>(n));
  llmk::DeviceBuffer<float> amax(1);
  std::size_t bytes = 0;
  if (!llmk::bench::skip_unless_ok(
          state, llmk::device::reduce_max_abs<In>(nullptr, &bytes, x.data(), amax.data(), n, nullptr)))
    return;
  llmk::DeviceBuffer<unsigned char> temp(bytes);
  llmk::bench::time_rotating(state, copies, [&](std::size_t c) {
    return llmk::device::reduce_max_abs<In>(temp.data(), &bytes, x.data() + c * static_cast<std::size_t>(n),
                                            amax.data(), n, nullptr);
  });
  llmk::bench::set_throughput(state, 1.0 * n, 1.0 * n * sizeof(In) + 4.0);
}
LLMK_BENCH_CATCH(state)

// LLM.int8()'s outlier column list of activations [tokens, hidden] (about 1% of columns above 6): the
// one-block compaction (no workspace) and the workspace form (CUB's DeviceSelect), the latter the anchor.
template <class In>
std::vector<In> outlier_activations(int rows, int cols, std::size_t copies) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  std::vector<In> x = random_tensor<In>(n);
  for (int c = 0; c < cols; c += 97) x[static_cast<std::size_t>(c)] = In(8.0f);
  x.reserve(copies * n);
  for (std::size_t i = 1; i < copies; ++i)
    x.insert(x.end(), x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
  return x;
}

template <class In>
void BM_OutlierColumns(benchmark::State& state) try {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const std::size_t n = static_cast<std::size_t>(rows) * cols, copies = copies_for(n * sizeof(In));
  llmk::DeviceBuffer<In> x(outlier_activations<In>(rows, cols, copies));
  llmk::DeviceBuffer<std::int32_t> out(static_cast<std::size_t>(cols)), count(1);
  llmk::bench::time_rotating(state, copies, [&](std::size_t c) {
    return q::find_outlier_columns(x.data() + c * n, cols, rows, cols, 6.0f, out.data(), count.data(),
                                   nullptr);
  });
  llmk::bench::set_throughput(state, 1.0 * rows * cols, 1.0 * rows * cols * sizeof(In) + 8.0 * cols);
}
LLMK_BENCH_CATCH(state)

template <class In>
void BM_OutlierColumnsCub(benchmark::State& state) try {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const std::size_t n = static_cast<std::size_t>(rows) * cols, copies = copies_for(n * sizeof(In));
  llmk::DeviceBuffer<In> x(outlier_activations<In>(rows, cols, copies));
  llmk::DeviceBuffer<std::int32_t> out(static_cast<std::size_t>(cols)), count(1);
  std::size_t bytes = 0;
  if (!llmk::bench::skip_unless_ok(state, q::find_outlier_columns(nullptr, &bytes, x.data(), cols, rows, cols,
                                                                  6.0f, out.data(), count.data(), nullptr)))
    return;
  llmk::DeviceBuffer<unsigned char> temp(bytes);
  llmk::bench::time_rotating(state, copies, [&](std::size_t c) {
    return q::find_outlier_columns(temp.data(), &bytes, x.data() + c * n, cols, rows, cols, 6.0f, out.data(),
                                   count.data(), nullptr);
  });
  llmk::bench::set_throughput(state, 1.0 * rows * cols, 1.0 * rows * cols * sizeof(In) + 8.0 * cols);
}
LLMK_BENCH_CATCH(state)

using llmk::bfloat16;
using llmk::half;
using Int8Token = q::Quantizer<int8_t, q::Symmetric, q::PerToken>;
using Int8Channel = q::Quantizer<int8_t, q::Symmetric, q::PerChannel>;
using Int8Tensor = q::Quantizer<int8_t, q::Symmetric, q::PerTensor>;
using UInt8TokenAsym = q::Quantizer<uint8_t, q::Asymmetric, q::PerToken>;
using E4m3Token = q::Quantizer<llmk::float8_e4m3, q::Symmetric, q::PerToken>;
using E4m3Tensor = q::Quantizer<llmk::float8_e4m3, q::Symmetric, q::PerTensor>;
using Int4G128 = q::Quantizer<llmk::int4_t, q::Asymmetric, q::GroupWise<128>>;
using Int4SymG64 = q::Quantizer<llmk::int4_t, q::Symmetric, q::GroupWise<64>>;

#if defined(LLMK_CUDA)
// Activations: tokens x hidden 4096 (decode batch 1 .. prefill 4096); weights: 4096 x 4096 (and 11008 x
// 4096).
#define LLMK_TOKENS_ARGS \
  ->Args({1, 4096})->Args({16, 4096})->Args({128, 4096})->Args({1024, 4096})->Args({4096, 4096})
#define LLMK_WEIGHT_ARGS ->Args({4096, 4096})->Args({11008, 4096})
#define LLMK_BENCH_UNIT ->UseManualTime()->Unit(benchmark::kMicrosecond)
#else
#define LLMK_TOKENS_ARGS ->Args({4, 256})->Args({32, 512})
#define LLMK_WEIGHT_ARGS ->Args({32, 512})
#define LLMK_BENCH_UNIT ->UseManualTime()->Unit(benchmark::kMillisecond)
#endif

// Dynamic (fused, one pass) per-token activation quantization.
BENCHMARK_TEMPLATE(BM_QuantizeDynamic, Int8Token, half) LLMK_TOKENS_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_QuantizeDynamic, Int8Token, bfloat16) LLMK_TOKENS_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_QuantizeDynamic, UInt8TokenAsym, half) LLMK_TOKENS_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_QuantizeDynamic, E4m3Token, half) LLMK_TOKENS_ARGS LLMK_BENCH_UNIT;
// Dynamic per-tensor (three launches) and group-wise (fused, one pass).
BENCHMARK_TEMPLATE(BM_QuantizeDynamic, Int8Tensor, half) LLMK_TOKENS_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_QuantizeDynamic, E4m3Tensor, half) LLMK_TOKENS_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_QuantizeDynamic, Int4G128, half) LLMK_WEIGHT_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_QuantizeDynamic, Int4G128, float) LLMK_WEIGHT_ARGS LLMK_BENCH_UNIT;
// Static quantization of weights.
BENCHMARK_TEMPLATE(BM_Quantize, Int8Channel, float) LLMK_WEIGHT_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_Quantize, Int8Channel, half) LLMK_WEIGHT_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_Quantize, Int4SymG64, half) LLMK_WEIGHT_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_Quantize, E4m3Tensor, bfloat16) LLMK_WEIGHT_ARGS LLMK_BENCH_UNIT;
// Dequantization.
BENCHMARK_TEMPLATE(BM_Dequantize, Int8Channel, half) LLMK_WEIGHT_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_Dequantize, Int4G128, half) LLMK_WEIGHT_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_Dequantize, Int4G128, float) LLMK_WEIGHT_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_Dequantize, E4m3Token, bfloat16) LLMK_TOKENS_ARGS LLMK_BENCH_UNIT;
// Reductions.
BENCHMARK_TEMPLATE(BM_TensorAmax, half) LLMK_TOKENS_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_TensorAmaxCub, half) LLMK_TOKENS_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_OutlierColumns, half) LLMK_TOKENS_ARGS LLMK_BENCH_UNIT;
BENCHMARK_TEMPLATE(BM_OutlierColumnsCub, half) LLMK_TOKENS_ARGS LLMK_BENCH_UNIT;

}  // namespace
