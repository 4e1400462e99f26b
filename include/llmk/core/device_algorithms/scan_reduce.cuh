// llmk/core/device_algorithms/scan_reduce.cuh: prefix sums and reductions, whole and segmented.
// The interface's rules (temporary storage, key types, the two builds): llmk/core/device_algorithms.cuh.
// Errors every entry shares (Status::invalid_argument naming the argument): temp_bytes null; on the second
// call (temp not null) *temp_bytes below the size query's answer ('temp_bytes') or temp not 16-byte aligned
// ('temp'). Pointers are checked on the second call only, and only those the call reads or writes, each for
// null and for alignment to its element type (the named pointer): each entry's "Errors:" line lists them
// with its own rules. A failing CUB call or launch: Status::cuda_error
// naming it (the simulator's kernels: Status::Code::kSimulatorError).
#pragma once

#include "llmk/core/device_algorithms/common.cuh"

namespace llmk::device {

namespace detail {
template <class In, class Out>
Status check_in_out(const In* in, const Out* out) {
  return check_pointers({{"in", in}, {"out", out}});
}
// A reduction's output is written even for count 0; its input is read only for count > 0.
template <class In, class Out>
Status check_reduce(const In* in, const Out* out, std::int64_t count) {
  LLMK_RETURN_IF_ERROR(check_pointers({{"out", out}}));
  if (count > 0) LLMK_RETURN_IF_ERROR(check_pointers({{"in", in}}));
  return {};
}
template <class In, class Out>
Status check_segmented(const In* in, const Out* out, const std::int64_t* offsets) {
  return check_pointers({{"in", in}, {"out", out}, {"offsets", offsets}});
}
// The segmented reductions take no element count: the simulator checks that the segments do not decrease.
inline constexpr std::int64_t kAnyCount = std::numeric_limits<std::int64_t>::max();
}  // namespace detail

/// out[i] = in[0] + ... + in[i - 1] (exclusive; out[0] = 0) or + in[i] (inclusive). Integer types: exact.
/// in and out may be the same array. Errors: the shared ones (file comment); count < 0; in or out null or
/// misaligned when count > 0.
///   llmk::device::exclusive_sum<std::int32_t>(temp, &bytes, counts, offsets, n, stream);
template <class T>
Status exclusive_sum(void* temp, std::size_t* temp_bytes, const T* in, T* out, std::int64_t count,
                     cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) -> Status {
    thrust::exclusive_scan(thrust::cpp::par, in, in + count, out, T{0});
    return {};
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    return detail::cub_status(cub::DeviceScan::ExclusiveSum(t, b, in, out, count, stream),
                              "cub::DeviceScan::ExclusiveSum");
  };
#endif
  return detail::two_phase(
      temp, temp_bytes, count == 0, [&] { return detail::check_in_out(in, out); }, run);
}

/// The inclusive form of exclusive_sum. Errors: as exclusive_sum's.
///   llmk::device::inclusive_sum<std::int64_t>(temp, &bytes, lengths, cu_seqlens + 1, batch, stream);
template <class T>
Status inclusive_sum(void* temp, std::size_t* temp_bytes, const T* in, T* out, std::int64_t count,
                     cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) -> Status {
    thrust::inclusive_scan(thrust::cpp::par, in, in + count, out);
    return {};
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    return detail::cub_status(cub::DeviceScan::InclusiveSum(t, b, in, out, count, stream),
                              "cub::DeviceScan::InclusiveSum");
  };
#endif
  return detail::two_phase(
      temp, temp_bytes, count == 0, [&] { return detail::check_in_out(in, out); }, run);
}

/// *out (device) = max |in[i]| over the finite elements (0 when there are none, count 0 included): llmk's
/// amax rule (llmk/quant/kernels.cuh). Exact (a max), so bit-identical on both builds. T: float, llmk::half,
/// llmk::bfloat16. Errors: the shared ones (file comment); count < 0; out null or misaligned, or in null or
/// misaligned when count > 0.
///   llmk::device::reduce_max_abs<float>(temp, &bytes, x, d_amax, n, stream);
template <class T>
Status reduce_max_abs(void* temp, std::size_t* temp_bytes, const T* in, float* out, std::int64_t count,
                      cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) -> Status {
    *out = thrust::transform_reduce(thrust::cpp::par, in, in + count, detail::FiniteAbs<T>{}, 0.0f,
                                    detail::MaxOp{});
    return {};
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    return detail::cub_status(cub::DeviceReduce::TransformReduce(t, b, in, out, count, detail::MaxOp{},
                                                                 detail::FiniteAbs<T>{}, 0.0f, stream),
                              "cub::DeviceReduce::TransformReduce");
  };
#endif
  return detail::two_phase(
      temp, temp_bytes, false, [&] { return detail::check_reduce(in, out, count); }, run);
}

/// *out (device) = the sum of in[0 .. count) (0 for count 0). Integer types: exact. Floating point: the
/// summation order is the implementation's (a tree on the GPU, left to right in the simulator), so the last
/// bits may differ between the builds; use an integer or fp64 type where the result must be reproducible.
/// Errors: the shared ones (file comment); count < 0; out null or misaligned, or in null or misaligned when
/// count > 0.
///   llmk::device::reduce_sum<std::int64_t>(temp, &bytes, counts, d_total, n, stream);
template <class T>
Status reduce_sum(void* temp, std::size_t* temp_bytes, const T* in, T* out, std::int64_t count,
                  cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) -> Status {
    *out = thrust::reduce(thrust::cpp::par, in, in + count, T{0});
    return {};
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    return detail::cub_status(cub::DeviceReduce::Sum(t, b, in, out, count, stream), "cub::DeviceReduce::Sum");
  };
#endif
  return detail::two_phase(
      temp, temp_bytes, false, [&] { return detail::check_reduce(in, out, count); }, run);
}

/// out[s] = max |in[i]| over the finite elements of segment s = [offsets[s], offsets[s + 1]) (0 when empty).
/// Errors: the shared ones (file comment); segments < 0; in, out or offsets null or misaligned when
/// segments > 0; in the
/// simulator only, a negative or decreasing offset ('offsets'; on a GPU the offsets are the caller's
/// contract).
///   llmk::device::segmented_reduce_max_abs<float>(temp, &bytes, w, row_amax, rows, row_offsets, stream);
template <class T>
Status segmented_reduce_max_abs(void* temp, std::size_t* temp_bytes, const T* in, float* out,
                                std::int64_t segments, const std::int64_t* offsets, cudaStream_t stream) {
  if (segments < 0) return Status::invalid_argument("segments", str_cat("must be >= 0, got ", segments));
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) {
    std::int64_t s = 0;
    return detail::for_each_segment(
        detail::kAnyCount, segments, offsets, [&](std::int64_t b, std::int64_t e) {
          out[s++] = thrust::transform_reduce(thrust::cpp::par, in + b, in + e, detail::FiniteAbs<T>{}, 0.0f,
                                              detail::MaxOp{});
        });
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    return detail::cub_status(cub::DeviceSegmentedReduce::Reduce(
                                  t, b, thrust::make_transform_iterator(in, detail::FiniteAbs<T>{}), out,
                                  segments, offsets, offsets + 1, detail::MaxOp{}, 0.0f, stream),
                              "cub::DeviceSegmentedReduce::Reduce");
  };
#endif
  return detail::two_phase(
      temp, temp_bytes, segments == 0, [&] { return detail::check_segmented(in, out, offsets); }, run);
}

/// out[s] = the sum of segment s = [offsets[s], offsets[s + 1]) (0 when empty); the summation order as
/// reduce_sum's (exact for integers). Errors: as segmented_reduce_max_abs's.
///   llmk::device::segmented_reduce_sum<std::int64_t>(temp, &bytes, kept, kept_per_row, rows, row_offsets,
///                                                    stream);
template <class T>
Status segmented_reduce_sum(void* temp, std::size_t* temp_bytes, const T* in, T* out, std::int64_t segments,
                            const std::int64_t* offsets, cudaStream_t stream) {
  if (segments < 0) return Status::invalid_argument("segments", str_cat("must be >= 0, got ", segments));
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) {
    std::int64_t s = 0;
    return detail::for_each_segment(detail::kAnyCount, segments, offsets,
                                    [&](std::int64_t b, std::int64_t e) {
                                      out[s++] = thrust::reduce(thrust::cpp::par, in + b, in + e, T{0});
                                    });
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    return detail::cub_status(
        cub::DeviceSegmentedReduce::Sum(t, b, in, out, segments, offsets, offsets + 1, stream),
        "cub::DeviceSegmentedReduce::Sum");
  };
#endif
  return detail::two_phase(
      temp, temp_bytes, segments == 0, [&] { return detail::check_segmented(in, out, offsets); }, run);
}

}  // namespace llmk::device
