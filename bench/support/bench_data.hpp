// bench/support/bench_data.hpp: the data side of the benchmarks, shared by all of them.
//
// Random device tensors filled in milliseconds however large, the L2 rotation (enough copies of the data that
// every iteration reads from DRAM, not from the L2 the previous iteration filled), and the device-to-device
// copy every bandwidth number is compared against (BM_DeviceCopy).
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <random>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <vector>

#include "gpu_timer.hpp"
#include "llmk/config.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/status.cuh"

namespace llmk::bench {

namespace detail {

// Uploads `pool` into buf[0, pool.size()) and doubles it on the device until buf is full.
template <class T>
void fill_from_pool(DeviceBuffer<T>& buf, const std::vector<T>& pool) {
  const std::size_t n = buf.size();
  throw_if_error(device_copy(buf.data(), pool.data(), pool.size() * sizeof(T), CopyKind::kHostToDevice));
  for (std::size_t filled = pool.size(); filled < n; filled *= 2) {
    const std::size_t count = std::min(filled, n - filled);
    throw_if_error(
        device_copy(buf.data() + filled, buf.data(), count * sizeof(T), CopyKind::kDeviceToDevice));
  }
}

// The host pools, kept for the whole process: Google Benchmark calls a benchmark function once per step of
// its iteration-count search (3 to 5 times per benchmark), each call building its data again, and drawing a
// pool (up to 1M values from std::mt19937 through a distribution: tens of ms) was most of a large
// benchmark's setup. A pool is a function of (generator, seed, size) when the generator starts from the
// same state every time: a function pointer (keyed by its address) or a stateless type.
struct PoolKey {
  std::type_index gen_type;
  const void* gen_fn;
  unsigned seed;
  std::size_t size;
  bool operator<(const PoolKey& o) const {
    return std::tie(gen_type, gen_fn, seed, size) < std::tie(o.gen_type, o.gen_fn, o.seed, o.size);
  }
};

template <class T, class Gen>
std::vector<T> draw_pool(std::size_t size, unsigned seed, Gen gen) {
  std::mt19937 rng(seed);
  std::vector<T> pool(size);
  for (auto& x : pool) x = gen(rng);
  return pool;
}

template <class T, class Gen>
const std::vector<T>& cached_pool(const PoolKey& key, Gen gen) {
  static std::map<PoolKey, std::vector<T>> pools;
  auto it = pools.find(key);
  if (it == pools.end()) it = pools.emplace(key, draw_pool<T>(key.size, key.seed, gen)).first;
  return it->second;
}

template <class Gen>
const void* function_address(const Gen& gen) {
  if constexpr (std::is_pointer_v<Gen>)
    return reinterpret_cast<const void*>(gen);
  else
    return nullptr;
}

}  // namespace detail

/// Fills `buf` with gen(rng) values, rng = std::mt19937(seed): a pool of up to 1M values is generated on the
/// host, uploaded, and then doubled on the device (device-to-device copies), so multi-GiB tensors fill in
/// milliseconds. The values repeat with that period, which changes nothing for speed; gen must not return
/// only zeros, NaNs or denormals. `gen` is taken by value and called in order on that one copy, so a
/// generator with state (a mutable lambda holding a distribution) keeps it across the whole pool. A function
/// pointer or a stateless generator's pool is drawn once per process and reused (detail::cached_pool).
template <class T, class Gen>
void fill_random(DeviceBuffer<T>& buf, unsigned seed, Gen gen) {
  const std::size_t n = buf.size();
  if (n == 0) return;
  const std::size_t size = std::min<std::size_t>(n, std::size_t{1} << 20);
  if constexpr (std::is_function_v<std::remove_pointer_t<Gen>> || std::is_empty_v<Gen>)
    detail::fill_from_pool(
        buf, detail::cached_pool<T>({std::type_index(typeid(Gen)), detail::function_address(gen), seed, size},
                                    gen));
  else
    detail::fill_from_pool(buf, detail::draw_pool<T>(size, seed, gen));
}

/// Fills `buf` with N(0, 1) values (one std::normal_distribution<float> over the whole pool, converted to T),
/// as fill_random describes: never all zeros, no NaN, no denormals. The generator starts from the same
/// state every call, so its pools are reused too.
template <class T>
void fill_normal(DeviceBuffer<T>& buf, unsigned seed) {
  const std::size_t n = buf.size();
  if (n == 0) return;
  auto gen = [dist = std::normal_distribution<float>(0.0f, 1.0f)](std::mt19937& rng) mutable {
    return T(dist(rng));
  };
  const std::size_t size = std::min<std::size_t>(n, std::size_t{1} << 20);
  detail::fill_from_pool(buf,
                         detail::cached_pool<T>({std::type_index(typeid(gen)), nullptr, seed, size}, gen));
}

/// Bytes the rotated copies of a benchmark's data must cover so that consecutive iterations miss in L2: 4x
/// the L2 of the current device on a GPU (256 MiB if the attribute cannot be read), nothing in the simulator.
inline std::size_t l2_flush_bytes() {
#if defined(LLMK_CUDA)
  int device = 0, l2 = 0;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) == cudaSuccess && l2 > 0)
    return 4 * static_cast<std::size_t>(l2);
  return std::size_t{256} << 20;
#else
  return 0;
#endif
}

/// How many copies of `bytes_per_copy` bytes cover l2_flush_bytes(): ceil(flush / bytes_per_copy), at least 1
/// (always 1 in the simulator).
inline std::size_t copies_for(std::size_t bytes_per_copy) {
  return std::max<std::size_t>(1, (l2_flush_bytes() + bytes_per_copy - 1) / bytes_per_copy);
}

/// time_iterations over rotated data: iteration i (counted from `first`) runs work(i % copies), the index of
/// the copy of the data it must use. `first` = 1 when copy 0 already served a warm-up call.
template <class Work>
void time_rotating(benchmark::State& state, std::size_t copies, Work&& work, std::size_t first = 0) {
  std::size_t iteration = first;
  time_iterations(state, [&] { return work(iteration++ % copies); });
}

/// The bandwidth reference, registered as BM_DeviceCopy with the size in MiB as its one argument (`using
/// llmk::bench::BM_DeviceCopy;` then BENCHMARK(BM_DeviceCopy), so the name carries no namespace): a
/// device-to-device copy of that many MiB, cudaMemcpyAsync on a GPU, llmk::device_copy in the simulator.
/// Counter: bytes/s with bytes = 2 * size (size read + size written).
inline void BM_DeviceCopy(benchmark::State& state) try {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0)) << 20;
  DeviceBuffer<unsigned char> src(bytes), dst(bytes);
  if (!skip_unless_ok(state, device_memset(src.data(), 0x3c, bytes))) return;
  time_iterations(state, [&]() -> Status {
#if defined(LLMK_CUDA)
    const cudaError_t e = cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, nullptr);
    if (e != cudaSuccess) return Status::cuda_error("cudaMemcpyAsync", cudaGetErrorString(e));
    return {};
#else
    return device_copy(dst.data(), src.data(), bytes, CopyKind::kDeviceToDevice);
#endif
  });
  set_bandwidth(state, 2.0 * static_cast<double>(bytes));  // a copy has no FLOPs
}
LLMK_BENCH_CATCH(state)

}  // namespace llmk::bench
