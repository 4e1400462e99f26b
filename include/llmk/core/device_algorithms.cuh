// llmk/core/device_algorithms.cuh: the device-wide algorithms llmk needs (sort, segmented sort, scan, reduce,
// select, "the k lowest"), one interface over two implementations:
//   GPU build (nvcc)     CUB's device-wide algorithms (cub::DeviceRadixSort, DeviceSegmentedSort, DeviceScan,
//                        DeviceReduce, DeviceSegmentedReduce, DeviceSelect), queued on `stream`.
//   simulator (LLMK_SIM) Thrust with its CPP device system on the simulator's memory (host memory), run at
//   once:
//                        the simulator's launches are synchronous too, so callers see the same ordering.
// Both are exact (integer and comparison algorithms; float sums excepted, see reduce_sum), and the sorts are
// STABLE on both, so results are bit-identical between the builds.
//
// Temporary storage, CUB's protocol: call with temp == nullptr to get *temp_bytes (nothing runs), then again
// with temp pointing to at least that many bytes (device memory, 16-byte aligned). The simulator asks for a
// small non-zero size so that the usual "allocate, then call" code never passes nullptr the second time.
//
//   std::size_t bytes = 0;
//   llmk::device::sort_pairs<unsigned, int>(nullptr, &bytes, keys, keys_out, vals, vals_out, n,
//                                           llmk::device::SortOrder::kAscending, stream);
//   llmk::DeviceBuffer<unsigned char> temp(bytes);
//   llmk::Status s = llmk::device::sort_pairs<unsigned, int>(temp.data(), &bytes, keys, keys_out, vals,
//                                                            vals_out, n,
//                                                            llmk::device::SortOrder::kAscending, stream);
//
// Keys: unsigned / signed 32- and 64-bit integers and float. Float keys must not be NaN; -0.0 and +0.0 are
// equal (CUB's radix sort and Thrust's comparison sort agree on that). Kernel-side (block / warp) primitives
// are llmk's own, not CUB's: CUB's collectives are inline PTX, which the simulator cannot run
// (docs/architecture.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "llmk/config.cuh"
#include "llmk/core/status.cuh"

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

enum class SortOrder { kAscending, kDescending };

namespace detail {

#if defined(LLMK_SIM)
inline constexpr std::size_t kSimTempBytes = 16;  // see the file comment
#endif

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
template <class Key, class Value>
void stable_sort_pairs_host(const Key* keys_in, Key* keys_out, const Value* values_in, Value* values_out,
                            std::int64_t count, SortOrder order) {
  std::vector<std::int64_t> pos(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) pos[static_cast<std::size_t>(i)] = i;
  if (order == SortOrder::kAscending)
    std::stable_sort(pos.begin(), pos.end(),
                     [&](std::int64_t a, std::int64_t b) { return keys_in[a] < keys_in[b]; });
  else
    std::stable_sort(pos.begin(), pos.end(),
                     [&](std::int64_t a, std::int64_t b) { return keys_in[b] < keys_in[a]; });
  for (std::int64_t i = 0; i < count; ++i) {
    keys_out[i] = keys_in[pos[static_cast<std::size_t>(i)]];
    values_out[i] = values_in[pos[static_cast<std::size_t>(i)]];
  }
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

}  // namespace detail

/// Stable sort of (key, value) pairs by key: keys_out / values_out get the sorted pairs; equal keys keep
/// their input order (in both orders). Inputs and outputs must not overlap. count 0: nothing runs.
///   llmk::device::sort_pairs<float, std::int32_t>(temp, &bytes, diag, diag_sorted, iota, perm, d,
///                                                 llmk::device::SortOrder::kDescending, stream);
template <class Key, class Value>
Status sort_pairs(void* temp, std::size_t* temp_bytes, const Key* keys_in, Key* keys_out,
                  const Value* values_in, Value* values_out, std::int64_t count, SortOrder order,
                  cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  std::size_t needs = 0;
#if defined(LLMK_SIM)
  (void)stream;
  needs = detail::kSimTempBytes;
#else
  if (order == SortOrder::kAscending)
    LLMK_RETURN_IF_ERROR(
        detail::cub_status(cub::DeviceRadixSort::SortPairs(nullptr, needs, keys_in, keys_out, values_in,
                                                           values_out, count, 0, sizeof(Key) * 8, stream),
                           "cub::DeviceRadixSort::SortPairs"));
  else
    LLMK_RETURN_IF_ERROR(detail::cub_status(
        cub::DeviceRadixSort::SortPairsDescending(nullptr, needs, keys_in, keys_out, values_in, values_out,
                                                  count, 0, sizeof(Key) * 8, stream),
        "cub::DeviceRadixSort::SortPairsDescending"));
#endif
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, needs, &query));
  if (query || count == 0) return {};
  if (keys_in == nullptr || keys_out == nullptr || values_in == nullptr || values_out == nullptr)
    return Status::invalid_argument("keys_in", "keys and values (in and out) must not be null");
#if defined(LLMK_SIM)
  detail::stable_sort_pairs_host(keys_in, keys_out, values_in, values_out, count, order);
  return {};
#else
  std::size_t bytes = *temp_bytes;
  if (order == SortOrder::kAscending)
    return detail::cub_status(cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, values_in,
                                                              values_out, count, 0, sizeof(Key) * 8, stream),
                              "cub::DeviceRadixSort::SortPairs");
  return detail::cub_status(
      cub::DeviceRadixSort::SortPairsDescending(temp, bytes, keys_in, keys_out, values_in, values_out, count,
                                                0, sizeof(Key) * 8, stream),
      "cub::DeviceRadixSort::SortPairsDescending");
#endif
}

/// Stable sort of (key, value) pairs within each segment s = [offsets[s], offsets[s + 1]) (offsets: device,
/// segments + 1 non-decreasing entries; elements outside every segment are neither read nor written).
///   llmk::device::segmented_sort_pairs<unsigned, std::int32_t>(temp, &bytes, keys, keys_out, cols, cols_out,
///       rows * k, rows, row_offsets, llmk::device::SortOrder::kAscending, stream);
template <class Key, class Value>
Status segmented_sort_pairs(void* temp, std::size_t* temp_bytes, const Key* keys_in, Key* keys_out,
                            const Value* values_in, Value* values_out, std::int64_t count,
                            std::int64_t segments, const std::int64_t* offsets, SortOrder order,
                            cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  if (segments < 0) return Status::invalid_argument("segments", str_cat("must be >= 0, got ", segments));
  std::size_t needs = 0;
#if defined(LLMK_SIM)
  (void)stream;
  needs = detail::kSimTempBytes;
#else
  if (order == SortOrder::kAscending)
    LLMK_RETURN_IF_ERROR(detail::cub_status(
        cub::DeviceSegmentedSort::StableSortPairs(nullptr, needs, keys_in, keys_out, values_in, values_out,
                                                  count, segments, offsets, offsets + 1, stream),
        "cub::DeviceSegmentedSort::StableSortPairs"));
  else
    LLMK_RETURN_IF_ERROR(detail::cub_status(cub::DeviceSegmentedSort::StableSortPairsDescending(
                                                nullptr, needs, keys_in, keys_out, values_in, values_out,
                                                count, segments, offsets, offsets + 1, stream),
                                            "cub::DeviceSegmentedSort::StableSortPairsDescending"));
#endif
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, needs, &query));
  if (query || count == 0 || segments == 0) return {};
  if (keys_in == nullptr || keys_out == nullptr || values_in == nullptr || values_out == nullptr)
    return Status::invalid_argument("keys_in", "keys and values (in and out) must not be null");
  if (offsets == nullptr) return Status::invalid_argument("offsets", "must not be null");
#if defined(LLMK_SIM)
  for (std::int64_t s = 0; s < segments; ++s) {
    const std::int64_t b = offsets[s], e = offsets[s + 1];
    if (b < 0 || e < b || e > count)
      return Status::invalid_argument(
          "offsets",
          str_cat("segment ", s, " = [", b, ", ", e, ") is not inside [0, ", count, ") or is decreasing"));
    detail::stable_sort_pairs_host(keys_in + b, keys_out + b, values_in + b, values_out + b, e - b, order);
  }
  return {};
#else
  std::size_t bytes = *temp_bytes;
  if (order == SortOrder::kAscending)
    return detail::cub_status(
        cub::DeviceSegmentedSort::StableSortPairs(temp, bytes, keys_in, keys_out, values_in, values_out,
                                                  count, segments, offsets, offsets + 1, stream),
        "cub::DeviceSegmentedSort::StableSortPairs");
  return detail::cub_status(cub::DeviceSegmentedSort::StableSortPairsDescending(
                                temp, bytes, keys_in, keys_out, values_in, values_out, count, segments,
                                offsets, offsets + 1, stream),
                            "cub::DeviceSegmentedSort::StableSortPairsDescending");
#endif
}

/// out[i] = in[0] + ... + in[i - 1] (exclusive; out[0] = 0) or + in[i] (inclusive). Integer types: exact.
/// in and out may be the same array.
///   llmk::device::exclusive_sum<std::int32_t>(temp, &bytes, counts, offsets, n, stream);
template <class T>
Status exclusive_sum(void* temp, std::size_t* temp_bytes, const T* in, T* out, std::int64_t count,
                     cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  std::size_t needs = 0;
#if defined(LLMK_SIM)
  (void)stream;
  needs = detail::kSimTempBytes;
#else
  LLMK_RETURN_IF_ERROR(
      detail::cub_status(cub::DeviceScan::ExclusiveSum(nullptr, needs, in, out, count, stream),
                         "cub::DeviceScan::ExclusiveSum"));
#endif
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, needs, &query));
  if (query || count == 0) return {};
  if (in == nullptr || out == nullptr) return Status::invalid_argument("in", "in and out must not be null");
#if defined(LLMK_SIM)
  thrust::exclusive_scan(thrust::cpp::par, in, in + count, out, T{0});
  return {};
#else
  std::size_t bytes = *temp_bytes;
  return detail::cub_status(cub::DeviceScan::ExclusiveSum(temp, bytes, in, out, count, stream),
                            "cub::DeviceScan::ExclusiveSum");
#endif
}

/// The inclusive form of exclusive_sum.
///   llmk::device::inclusive_sum<std::int64_t>(temp, &bytes, lengths, cu_seqlens + 1, batch, stream);
template <class T>
Status inclusive_sum(void* temp, std::size_t* temp_bytes, const T* in, T* out, std::int64_t count,
                     cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  std::size_t needs = 0;
#if defined(LLMK_SIM)
  (void)stream;
  needs = detail::kSimTempBytes;
#else
  LLMK_RETURN_IF_ERROR(
      detail::cub_status(cub::DeviceScan::InclusiveSum(nullptr, needs, in, out, count, stream),
                         "cub::DeviceScan::InclusiveSum"));
#endif
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, needs, &query));
  if (query || count == 0) return {};
  if (in == nullptr || out == nullptr) return Status::invalid_argument("in", "in and out must not be null");
#if defined(LLMK_SIM)
  thrust::inclusive_scan(thrust::cpp::par, in, in + count, out);
  return {};
#else
  std::size_t bytes = *temp_bytes;
  return detail::cub_status(cub::DeviceScan::InclusiveSum(temp, bytes, in, out, count, stream),
                            "cub::DeviceScan::InclusiveSum");
#endif
}

/// *out (device) = max |in[i]| over the finite elements (0 when there are none, count 0 included): llmk's
/// amax rule (llmk/quant/kernels.cuh). Exact (a max), so bit-identical on both builds. T: float, llmk::half,
/// llmk::bfloat16.
///   llmk::device::reduce_max_abs<float>(temp, &bytes, x, d_amax, n, stream);
template <class T>
Status reduce_max_abs(void* temp, std::size_t* temp_bytes, const T* in, float* out, std::int64_t count,
                      cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  std::size_t needs = 0;
#if defined(LLMK_SIM)
  (void)stream;
  needs = detail::kSimTempBytes;
#else
  LLMK_RETURN_IF_ERROR(
      detail::cub_status(cub::DeviceReduce::TransformReduce(nullptr, needs, in, out, count, detail::MaxOp{},
                                                            detail::FiniteAbs<T>{}, 0.0f, stream),
                         "cub::DeviceReduce::TransformReduce"));
#endif
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, needs, &query));
  if (query) return {};
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");
  if (count > 0 && in == nullptr) return Status::invalid_argument("in", "must not be null");
#if defined(LLMK_SIM)
  *out = thrust::transform_reduce(thrust::cpp::par, in, in + count, detail::FiniteAbs<T>{}, 0.0f,
                                  detail::MaxOp{});
  return {};
#else
  std::size_t bytes = *temp_bytes;
  return detail::cub_status(cub::DeviceReduce::TransformReduce(temp, bytes, in, out, count, detail::MaxOp{},
                                                               detail::FiniteAbs<T>{}, 0.0f, stream),
                            "cub::DeviceReduce::TransformReduce");
#endif
}

/// *out (device) = the sum of in[0 .. count) (0 for count 0). Integer types: exact. Floating point: the
/// summation order is the implementation's (a tree on the GPU, left to right in the simulator), so the last
/// bits may differ between the builds; use an integer or fp64 type where the result must be reproducible.
///   llmk::device::reduce_sum<std::int64_t>(temp, &bytes, counts, d_total, n, stream);
template <class T>
Status reduce_sum(void* temp, std::size_t* temp_bytes, const T* in, T* out, std::int64_t count,
                  cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  std::size_t needs = 0;
#if defined(LLMK_SIM)
  (void)stream;
  needs = detail::kSimTempBytes;
#else
  LLMK_RETURN_IF_ERROR(detail::cub_status(cub::DeviceReduce::Sum(nullptr, needs, in, out, count, stream),
                                          "cub::DeviceReduce::Sum"));
#endif
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, needs, &query));
  if (query) return {};
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");
  if (count > 0 && in == nullptr) return Status::invalid_argument("in", "must not be null");
#if defined(LLMK_SIM)
  *out = thrust::reduce(thrust::cpp::par, in, in + count, T{0});
  return {};
#else
  std::size_t bytes = *temp_bytes;
  return detail::cub_status(cub::DeviceReduce::Sum(temp, bytes, in, out, count, stream),
                            "cub::DeviceReduce::Sum");
#endif
}

/// out[s] = max |in[i]| over the finite elements of segment s = [offsets[s], offsets[s + 1]) (0 when empty).
///   llmk::device::segmented_reduce_max_abs<float>(temp, &bytes, w, row_amax, rows, row_offsets, stream);
template <class T>
Status segmented_reduce_max_abs(void* temp, std::size_t* temp_bytes, const T* in, float* out,
                                std::int64_t segments, const std::int64_t* offsets, cudaStream_t stream) {
  if (segments < 0) return Status::invalid_argument("segments", str_cat("must be >= 0, got ", segments));
  std::size_t needs = 0;
#if defined(LLMK_SIM)
  (void)stream;
  needs = detail::kSimTempBytes;
#else
  LLMK_RETURN_IF_ERROR(detail::cub_status(
      cub::DeviceSegmentedReduce::Reduce(nullptr, needs,
                                         thrust::make_transform_iterator(in, detail::FiniteAbs<T>{}), out,
                                         segments, offsets, offsets + 1, detail::MaxOp{}, 0.0f, stream),
      "cub::DeviceSegmentedReduce::Reduce"));
#endif
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, needs, &query));
  if (query || segments == 0) return {};
  if (in == nullptr || out == nullptr || offsets == nullptr)
    return Status::invalid_argument("in", "in, out and offsets must not be null");
#if defined(LLMK_SIM)
  for (std::int64_t s = 0; s < segments; ++s)
    out[s] = thrust::transform_reduce(thrust::cpp::par, in + offsets[s], in + offsets[s + 1],
                                      detail::FiniteAbs<T>{}, 0.0f, detail::MaxOp{});
  return {};
#else
  std::size_t bytes = *temp_bytes;
  return detail::cub_status(cub::DeviceSegmentedReduce::Reduce(
                                temp, bytes, thrust::make_transform_iterator(in, detail::FiniteAbs<T>{}), out,
                                segments, offsets, offsets + 1, detail::MaxOp{}, 0.0f, stream),
                            "cub::DeviceSegmentedReduce::Reduce");
#endif
}

/// Stream compaction: out gets in[i] for every i with flags[i] != 0, in order; *num_selected (device) the
/// count. out must hold count elements (the worst case).
///   llmk::device::select_flagged<std::int32_t>(temp, &bytes, iota, is_outlier, cols_out, d_count, K,
///   stream);
template <class T>
Status select_flagged(void* temp, std::size_t* temp_bytes, const T* in, const std::uint8_t* flags, T* out,
                      std::int64_t* num_selected, std::int64_t count, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  std::size_t needs = 0;
#if defined(LLMK_SIM)
  (void)stream;
  needs = detail::kSimTempBytes;
#else
  LLMK_RETURN_IF_ERROR(detail::cub_status(
      cub::DeviceSelect::Flagged(nullptr, needs, in, flags, out, num_selected, count, stream),
      "cub::DeviceSelect::Flagged"));
#endif
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, needs, &query));
  if (query) return {};
  if (num_selected == nullptr) return Status::invalid_argument("num_selected", "must not be null");
  if (count > 0 && (in == nullptr || flags == nullptr || out == nullptr))
    return Status::invalid_argument("in", "in, flags and out must not be null");
#if defined(LLMK_SIM)
  T* end = thrust::copy_if(thrust::cpp::par, in, in + count, flags, out, detail::NonZero{});
  *num_selected = static_cast<std::int64_t>(end - out);
  return {};
#else
  std::size_t bytes = *temp_bytes;
  return detail::cub_status(
      cub::DeviceSelect::Flagged(temp, bytes, in, flags, out, num_selected, count, stream),
      "cub::DeviceSelect::Flagged");
#endif
}

namespace detail {

// Segment s = [s * length, (s + 1) * length). sorted_index holds the positions of keys grouped by segment
// (each group in place: positions [s * length, (s + 1) * length) hold segment s's elements) and, within a
// group, ordered by (key, position): its first k entries are the segment's k lowest, the pruning rank rule.
// keep[sorted_index[i]] = (i - s * length >= k). A template for inline linkage.
template <class Index>
__global__ void __launch_bounds__(256)
    scatter_keep_kernel(const Index* sorted_index, std::int64_t count, std::int64_t length, std::int64_t k,
                        std::uint8_t* keep) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    keep[sorted_index[i]] = i - i / length * length >= k ? 1 : 0;
}

// out[i] = i.
template <class Index>
__global__ void __launch_bounds__(256) iota_kernel(Index* out, std::int64_t count) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    out[i] = static_cast<Index>(i);
}

// segment_of[i] = index[i] / length: the second sort's keys.
template <class Index>
__global__ void __launch_bounds__(256)
    segment_keys_kernel(const Index* index, std::int64_t count, std::int64_t length, Index* segment_of) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    segment_of[i] = static_cast<Index>(static_cast<std::int64_t>(index[i]) / length);
}

inline std::size_t align_up(std::size_t x) {
  return (x + 255) / 256 * 256;
}

inline dim3 elementwise_grid(std::int64_t count) {
  return dim3(static_cast<unsigned>(std::min<std::int64_t>((count + 255) / 256, 4096)));
}

}  // namespace detail

/// The k lowest of each of `segments` equal segments s = keys[s * length .. (s + 1) * length), by (key,
/// index within the segment) (ties to the lower index, llmk's pruning rank rule): keep[i] = 0 for them, 1
/// for the others. A stable radix sort of (key, position) pairs (cub::DeviceRadixSort); with several
/// segments, a second stable radix sort of the positions by their segment groups them without disturbing
/// the key order inside a group (the same two sort instantiations serve every segment count, where a
/// segmented sort would add two more); plus two or three small launches. temp holds the position arrays and
/// the sorted keys. k is clamped to [0, length]; segments * length must be < 2^32 (32-bit positions).
///   // per-row pruning of a [rows, cols] score matrix, k per row
///   llmk::device::segmented_lowest_k_mask<unsigned>(temp, &bytes, scores, rows, cols, k, keep, stream);
template <class Key>
Status segmented_lowest_k_mask(void* temp, std::size_t* temp_bytes, const Key* keys, std::int64_t segments,
                               std::int64_t length, std::int64_t k, std::uint8_t* keep, cudaStream_t stream) {
  if (segments < 0) return Status::invalid_argument("segments", str_cat("must be >= 0, got ", segments));
  if (length < 0) return Status::invalid_argument("length", str_cat("must be >= 0, got ", length));
  const std::int64_t count = segments * length;
  if (length > 0 && segments > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()) / length)
    return Status::invalid_argument(
        "count", str_cat("segments * length must be < 2^32 (32-bit indices), got ", segments, " x ", length));
  using Index = std::uint32_t;
  static_assert(sizeof(Key) >= sizeof(Index), "the segment keys reuse the sorted keys' storage");
  const std::size_t n = static_cast<std::size_t>(count);
  const bool one = segments <= 1;
  const std::size_t idx_bytes = detail::align_up(n * sizeof(Index)),
                    key_bytes = detail::align_up(n * sizeof(Key));
  std::size_t sort_bytes = 0, group_bytes = 0;
  LLMK_RETURN_IF_ERROR((sort_pairs<Key, Index>(nullptr, &sort_bytes, keys, nullptr, nullptr, nullptr, count,
                                               SortOrder::kAscending, stream)));
  if (!one)
    LLMK_RETURN_IF_ERROR((sort_pairs<Index, Index>(nullptr, &group_bytes, nullptr, nullptr, nullptr, nullptr,
                                                   count, SortOrder::kAscending, stream)));
  const std::size_t needs = (one ? 2 : 3) * idx_bytes + key_bytes + std::max(sort_bytes, group_bytes);
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, needs, &query));
  if (query || count == 0) return {};
  if (keys == nullptr || keep == nullptr)
    return Status::invalid_argument("keys", "keys and keep must not be null");
  auto* base = static_cast<unsigned char*>(temp);
  auto* index = reinterpret_cast<Index*>(base);                      // positions; later the sorted segments
  auto* by_key = reinterpret_cast<Index*>(base + idx_bytes);         // positions sorted by key
  auto* sorted_keys = reinterpret_cast<Key*>(base + 2 * idx_bytes);  // later the positions' segments
  auto* grouped = reinterpret_cast<Index*>(base + 2 * idx_bytes + key_bytes);
  void* sort_temp = base + (one ? 2 : 3) * idx_bytes + key_bytes;
  const dim3 grid = detail::elementwise_grid(count);
  LLMK_RETURN_IF_ERROR(launch(detail::iota_kernel<Index>, grid, dim3(256), 0, stream, index, count));
  LLMK_RETURN_IF_ERROR((sort_pairs<Key, Index>(sort_temp, &sort_bytes, keys, sorted_keys, index, by_key,
                                               count, SortOrder::kAscending, stream)));
  const std::int64_t kk = k < 0 ? 0 : (k > length ? length : k);
  if (one)
    return launch(detail::scatter_keep_kernel<Index>, grid, dim3(256), 0, stream, by_key, count, length, kk,
                  keep);
  auto* segment_of = reinterpret_cast<Index*>(sorted_keys);
  LLMK_RETURN_IF_ERROR(launch(detail::segment_keys_kernel<Index>, grid, dim3(256), 0, stream, by_key, count,
                              length, segment_of));
  LLMK_RETURN_IF_ERROR((sort_pairs<Index, Index>(sort_temp, &group_bytes, segment_of, index, by_key, grouped,
                                                 count, SortOrder::kAscending, stream)));
  return launch(detail::scatter_keep_kernel<Index>, grid, dim3(256), 0, stream, grouped, count, length, kk,
                keep);
}

/// The k lowest of keys[0 .. count) by (key, index): segmented_lowest_k_mask with one segment.
///   llmk::device::lowest_k_mask<unsigned>(temp, &bytes, score_bits, rows * cols, k, mask, stream);
template <class Key>
Status lowest_k_mask(void* temp, std::size_t* temp_bytes, const Key* keys, std::int64_t count, std::int64_t k,
                     std::uint8_t* keep, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  return segmented_lowest_k_mask<Key>(temp, temp_bytes, keys, 1, count, k, keep, stream);
}

}  // namespace llmk::device
