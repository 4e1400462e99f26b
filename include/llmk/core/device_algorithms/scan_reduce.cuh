// llmk/core/device_algorithms/scan_reduce.cuh: prefix sums and reductions, whole and segmented.
// The interface's rules (temporary storage, key types, the two builds): llmk/core/device_algorithms.cuh.
#pragma once

#include "llmk/core/device_algorithms/common.cuh"

namespace llmk::device {

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

/// out[s] = the sum of segment s = [offsets[s], offsets[s + 1]) (0 when empty); the summation order as
/// reduce_sum's (exact for integers).
///   llmk::device::segmented_reduce_sum<std::int64_t>(temp, &bytes, kept, kept_per_row, rows, row_offsets,
///                                                    stream);
template <class T>
Status segmented_reduce_sum(void* temp, std::size_t* temp_bytes, const T* in, T* out, std::int64_t segments,
                            const std::int64_t* offsets, cudaStream_t stream) {
  if (segments < 0) return Status::invalid_argument("segments", str_cat("must be >= 0, got ", segments));
  std::size_t needs = 0;
#if defined(LLMK_SIM)
  (void)stream;
  needs = detail::kSimTempBytes;
#else
  LLMK_RETURN_IF_ERROR(detail::cub_status(
      cub::DeviceSegmentedReduce::Sum(nullptr, needs, in, out, segments, offsets, offsets + 1, stream),
      "cub::DeviceSegmentedReduce::Sum"));
#endif
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, needs, &query));
  if (query || segments == 0) return {};
  if (in == nullptr || out == nullptr || offsets == nullptr)
    return Status::invalid_argument("in", "in, out and offsets must not be null");
#if defined(LLMK_SIM)
  for (std::int64_t s = 0; s < segments; ++s)
    out[s] = thrust::reduce(thrust::cpp::par, in + offsets[s], in + offsets[s + 1], T{0});
  return {};
#else
  std::size_t bytes = *temp_bytes;
  return detail::cub_status(
      cub::DeviceSegmentedReduce::Sum(temp, bytes, in, out, segments, offsets, offsets + 1, stream),
      "cub::DeviceSegmentedReduce::Sum");
#endif
}

}  // namespace llmk::device
