// llmk/core/device_algorithms/common.cuh: what every device-wide algorithm shares: the build switch (CUB on
// the GPU, Thrust's CPP system or std:: in the simulator), the temporary-storage protocol's checks,
// SortOrder, and small element-wise launches. The interface and its rules: llmk/core/device_algorithms.cuh.
#pragma once

#include <initializer_list>
#include <string_view>
#include <utility>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "llmk/config.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"

#if defined(LLMK_HOST_ONLY)
#error "llmk/core/device_algorithms.cuh works on device memory: build with nvcc or the simulator (LLMK_SIM)"
#endif

#if defined(LLMK_SIM)
#ifndef THRUST_DEVICE_SYSTEM  // the simulator's "device" memory is host memory
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CPP
#endif
#include <thrust/copy.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/transform_reduce.h>

#include <cmath>
#include <vector>
#else
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <cub/device/device_select.cuh>
#endif

#include "llmk/core/launch.cuh"

namespace llmk::device {

/// The order of sort_pairs, sort_keys and their segmented forms (stable either way: equal keys keep their
/// input order). A value that is not one of the two enumerators is an invalid_argument naming 'order'.
///   llmk::device::sort_keys<float>(temp, &bytes, in, out, n, llmk::device::SortOrder::kDescending, stream);
enum class SortOrder { kAscending, kDescending };

namespace detail {

#if defined(LLMK_SIM)
inline constexpr std::size_t kSimTempBytes = 16;  // see the file comment
#endif

// A typed pointer argument of an entry: its name, and the alignment check of its element type (CUB and
// llmk's kernels load and store whole elements, so a misaligned pointer faults on the GPU, asynchronously,
// after the call returned).
struct PointerArg {
  const char* name;
  const void* pointer;
  Status (*check_alignment)(std::string_view, const void*);
  template <class T>
  PointerArg(const char* n, const T* p) : name(n), pointer(p), check_alignment(&check_element_alignment<T>) {}
};

// The first pointer of `args` that is null ("must not be null") or not aligned to its element ("must be
// aligned to its element size (N bytes)"), as an invalid_argument naming it; OK when all are valid.
inline Status check_pointers(std::initializer_list<PointerArg> args) {
  for (const PointerArg& a : args) {
    if (a.pointer == nullptr) return Status::invalid_argument(a.name, "must not be null");
    LLMK_RETURN_IF_ERROR(a.check_alignment(a.name, a.pointer));
  }
  return {};
}

// The sorts' order: a SortOrder enumerator (any other value would sort descending on the GPU).
inline Status check_order(SortOrder order) {
  if (order != SortOrder::kAscending && order != SortOrder::kDescending)
    return Status::invalid_argument(
        "order",
        str_cat("must be SortOrder::kAscending or SortOrder::kDescending, got ", static_cast<int>(order)));
  return {};
}

// The common argument checks; `needs` is what the implementation asks for (nothing runs when temp is null).
inline Status check_temp(const void* temp, std::size_t* temp_bytes, std::size_t needs, bool* query) {
  if (temp_bytes == nullptr) return Status::invalid_argument("temp_bytes", "must not be null");
  *query = temp == nullptr;
  if (*query) {
    *temp_bytes = needs;
    return {};
  }
  if (*temp_bytes < needs)
    return Status::invalid_argument(
        "temp_bytes", str_cat("must be >= the size query's ", needs, " bytes, got ", *temp_bytes));
  if (reinterpret_cast<std::uintptr_t>(temp) % 16 != 0)
    return Status::invalid_argument("temp", "must be 16-byte aligned");
  return {};
}

inline Status check_count(std::int64_t count) {
  if (count < 0) return Status::invalid_argument("count", str_cat("must be >= 0, got ", count));
  return {};
}

#if !defined(LLMK_SIM)
inline Status cub_status(cudaError_t e, const char* what) {
  if (e != cudaSuccess) return Status::cuda_error(what, cudaGetErrorString(e));
  return {};
}
#endif

// CUB's protocol around one algorithm, written once. `run(temp, bytes)` is the work: on a GPU the CUB call
// (which answers the size query when temp is null), in the simulator the host implementation (no query:
// it asks for kSimTempBytes). `checks()` validates the pointers once the query is past; nothing runs when
// `nothing_to_run`. Each entry defines `run` in one #if: its CUB call or its simulator body.
template <class Run, class Checks>
Status two_phase(void* temp, std::size_t* temp_bytes, bool nothing_to_run, Checks&& checks, Run&& run) {
  std::size_t needs = 0;
#if defined(LLMK_SIM)
  needs = kSimTempBytes;
#else
  LLMK_RETURN_IF_ERROR(run(nullptr, needs));
#endif
  bool query = false;
  LLMK_RETURN_IF_ERROR(check_temp(temp, temp_bytes, needs, &query));
  if (query || nothing_to_run) return {};
  LLMK_RETURN_IF_ERROR(checks());
  std::size_t bytes = *temp_bytes;
  return run(temp, bytes);
}

#if defined(LLMK_SIM)
// The simulator's segment loop: fn(b, e) for each segment [offsets[s], offsets[s + 1]), which must lie in
// [0, count) and not decrease (read on the host here; on a GPU the caller's contract, as CUB's).
template <class Fn>
Status for_each_segment(std::int64_t count, std::int64_t segments, const std::int64_t* offsets, Fn&& fn) {
  for (std::int64_t s = 0; s < segments; ++s) {
    const std::int64_t b = offsets[s], e = offsets[s + 1];
    if (b < 0 || e < b || e > count)
      return Status::invalid_argument(
          "offsets",
          str_cat("segment ", s, " = [", b, ", ", e, ") is not inside [0, ", count, ") or is decreasing"));
    fn(b, e);
  }
  return {};
}
#endif

// |x| of a finite value, 0 for NaN and +-Inf (llmk's amax rule: ranges skip non-finite values).
template <class T>
struct FiniteAbs {
  LLMK_HOST_DEVICE float operator()(T v) const {
    const float x = static_cast<float>(v);
    const float a = x < 0.0f ? -x : x;
    return a - a == 0.0f ? a : 0.0f;
  }
};

#if defined(LLMK_SIM)
// The simulator's stable sort of (key, value) pairs: std::stable_sort of the positions by key. Not Thrust's:
// Debian's Thrust 1.17 sequential sorts (merge and radix) bind a null reference internally, which UBSan
// rejects in the sanitizer builds, and the CUDA toolkit's newer Thrust cannot be included next to the
// simulator's CUDA shim (it pulls in the real CUDA runtime headers). Scans, reductions and copies are
// Thrust's.
//
// Keys compare as CUB's radix sort orders them, a strict weak order for every bit pattern: integers by value;
// floats by their bits twiddled into unsigned order after -0.0 -> +0.0 (CUB treats the zeros as equal), so a
// NaN has CUB's place (a positive NaN after +Inf, a negative one before -Inf) instead of breaking std::sort's
// precondition (undefined behaviour with `<` on NaN).
template <class Key>
auto radix_order(Key k) {
  if constexpr (std::is_same_v<Key, float>) {
    std::uint32_t b;
    std::memcpy(&b, &k, 4);
    if ((b & 0x7FFFFFFFu) == 0) b = 0;
    return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
  } else {
    return k;
  }
}

template <class Key, class Value>
void stable_sort_pairs_host(const Key* keys_in, Key* keys_out, const Value* values_in, Value* values_out,
                            std::int64_t count, SortOrder order) {
  std::vector<std::int64_t> pos(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) pos[static_cast<std::size_t>(i)] = i;
  if (order == SortOrder::kAscending)
    std::stable_sort(pos.begin(), pos.end(), [&](std::int64_t a, std::int64_t b) {
      return radix_order(keys_in[a]) < radix_order(keys_in[b]);
    });
  else
    std::stable_sort(pos.begin(), pos.end(), [&](std::int64_t a, std::int64_t b) {
      return radix_order(keys_in[b]) < radix_order(keys_in[a]);
    });
  for (std::int64_t i = 0; i < count; ++i) {
    keys_out[i] = keys_in[pos[static_cast<std::size_t>(i)]];
    values_out[i] = values_in[pos[static_cast<std::size_t>(i)]];
  }
}

template <class Key>
void stable_sort_keys_host(const Key* keys_in, Key* keys_out, std::int64_t count, SortOrder order) {
  std::copy(keys_in, keys_in + count, keys_out);
  if (order == SortOrder::kAscending)
    std::stable_sort(keys_out, keys_out + count,
                     [](const Key& a, const Key& b) { return radix_order(a) < radix_order(b); });
  else
    std::stable_sort(keys_out, keys_out + count,
                     [](const Key& a, const Key& b) { return radix_order(b) < radix_order(a); });
}
#endif

struct NonZero {
  LLMK_HOST_DEVICE bool operator()(std::uint8_t f) const { return f != 0; }
};

struct MaxOp {
  template <class T>
  LLMK_HOST_DEVICE T operator()(T a, T b) const {
    return a < b ? b : a;
  }
};

// out[i] = i. A template for inline linkage.
template <class Index>
__global__ void __launch_bounds__(256) iota_kernel(Index* out, std::int64_t count) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    out[i] = static_cast<Index>(i);
}

// Workspace carving: every sub-array starts on a 256-byte boundary.
inline std::size_t align_up(std::size_t x) {
  return (x + 255) / 256 * 256;
}

inline dim3 elementwise_grid(std::int64_t count) {
  return dim3(static_cast<unsigned>(std::min<std::int64_t>((count + 255) / 256, 4096)));
}

}  // namespace detail

}  // namespace llmk::device
