// llmk/core/device_algorithms/sort.cuh: stable radix sorts, whole and segmented.
// The interface's rules (temporary storage, key types, the two builds): llmk/core/device_algorithms.cuh.
// Errors every entry shares (Status::invalid_argument naming the argument): temp_bytes null; on the second
// call (temp not null) *temp_bytes below the size query's answer ('temp_bytes') or temp not 16-byte aligned
// ('temp'); order not a SortOrder enumerator ('order', on either call). Pointers are checked on the second
// call only, and only those the call reads or writes, each for null and for alignment to its element type
// (the named pointer): each entry's "Errors:" line lists them with its own rules. A failing CUB call or
// launch: Status::cuda_error naming it (the simulator's kernels: Status::Code::kSimulatorError).
#pragma once

#include "llmk/core/device_algorithms/common.cuh"

namespace llmk::device {

/// Stable sort of (key, value) pairs by key: keys_out / values_out get the sorted pairs; equal keys keep
/// their input order (in both orders). Inputs and outputs must not overlap. count 0: nothing runs.
/// Errors: the shared ones (file comment); count < 0; keys_in, keys_out, values_in or values_out null or
/// misaligned when count > 0.
///   llmk::device::sort_pairs<float, std::int32_t>(temp, &bytes, diag, diag_sorted, iota, perm, d,
///                                                 llmk::device::SortOrder::kDescending, stream);
template <class Key, class Value>
Status sort_pairs(void* temp, std::size_t* temp_bytes, const Key* keys_in, Key* keys_out,
                  const Value* values_in, Value* values_out, std::int64_t count, SortOrder order,
                  cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_order(order));
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  auto checks = [&]() -> Status {
    return detail::check_pointers(
        {{"keys_in", keys_in}, {"keys_out", keys_out}, {"values_in", values_in}, {"values_out", values_out}});
  };
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) -> Status {
    detail::stable_sort_pairs_host(keys_in, keys_out, values_in, values_out, count, order);
    return {};
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    if (order == SortOrder::kAscending)
      return detail::cub_status(
          cub::DeviceRadixSort::SortPairs(t, b, keys_in, keys_out, values_in, values_out, count, 0,
                                          sizeof(Key) * 8, stream),
          "cub::DeviceRadixSort::SortPairs");
    return detail::cub_status(
        cub::DeviceRadixSort::SortPairsDescending(t, b, keys_in, keys_out, values_in, values_out, count, 0,
                                                  sizeof(Key) * 8, stream),
        "cub::DeviceRadixSort::SortPairsDescending");
  };
#endif
  return detail::two_phase(temp, temp_bytes, count == 0, checks, run);
}

/// Stable sort of keys: keys_out gets keys_in in order (equal keys keep their input order, which shows only
/// for -0.0 / +0.0). Input and output must not overlap. count 0: nothing runs. Errors: the shared ones (file
/// comment); count < 0; keys_in or keys_out null or misaligned when count > 0.
///   llmk::device::sort_keys<float>(temp, &bytes, magnitudes, sorted, n, llmk::device::SortOrder::kAscending,
///                                  stream);
template <class Key>
Status sort_keys(void* temp, std::size_t* temp_bytes, const Key* keys_in, Key* keys_out, std::int64_t count,
                 SortOrder order, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_order(order));
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  auto checks = [&]() -> Status {
    return detail::check_pointers({{"keys_in", keys_in}, {"keys_out", keys_out}});
  };
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) -> Status {
    detail::stable_sort_keys_host(keys_in, keys_out, count, order);
    return {};
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    if (order == SortOrder::kAscending)
      return detail::cub_status(
          cub::DeviceRadixSort::SortKeys(t, b, keys_in, keys_out, count, 0, sizeof(Key) * 8, stream),
          "cub::DeviceRadixSort::SortKeys");
    return detail::cub_status(
        cub::DeviceRadixSort::SortKeysDescending(t, b, keys_in, keys_out, count, 0, sizeof(Key) * 8, stream),
        "cub::DeviceRadixSort::SortKeysDescending");
  };
#endif
  return detail::two_phase(temp, temp_bytes, count == 0, checks, run);
}

/// Stable sort of (key, value) pairs within each segment s = [offsets[s], offsets[s + 1]) (offsets: device,
/// segments + 1 non-decreasing entries; elements outside every segment are neither read nor written).
/// Errors: the shared ones (file comment); count or segments < 0; when both are > 0, keys_in, keys_out,
/// values_in, values_out or offsets null or misaligned; in the simulator only, a segment outside [0, count)
/// or decreasing
/// ('offsets'; on a GPU the offsets are the caller's contract).
///   llmk::device::segmented_sort_pairs<unsigned, std::int32_t>(temp, &bytes, keys, keys_out, cols, cols_out,
///       rows * k, rows, row_offsets, llmk::device::SortOrder::kAscending, stream);
template <class Key, class Value>
Status segmented_sort_pairs(void* temp, std::size_t* temp_bytes, const Key* keys_in, Key* keys_out,
                            const Value* values_in, Value* values_out, std::int64_t count,
                            std::int64_t segments, const std::int64_t* offsets, SortOrder order,
                            cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_order(order));
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  if (segments < 0) return Status::invalid_argument("segments", str_cat("must be >= 0, got ", segments));
  auto checks = [&]() -> Status {
    return detail::check_pointers({{"keys_in", keys_in},
                                   {"keys_out", keys_out},
                                   {"values_in", values_in},
                                   {"values_out", values_out},
                                   {"offsets", offsets}});
  };
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) {
    return detail::for_each_segment(count, segments, offsets, [&](std::int64_t b, std::int64_t e) {
      detail::stable_sort_pairs_host(keys_in + b, keys_out + b, values_in + b, values_out + b, e - b, order);
    });
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    if (order == SortOrder::kAscending)
      return detail::cub_status(
          cub::DeviceSegmentedSort::StableSortPairs(t, b, keys_in, keys_out, values_in, values_out, count,
                                                    segments, offsets, offsets + 1, stream),
          "cub::DeviceSegmentedSort::StableSortPairs");
    return detail::cub_status(
        cub::DeviceSegmentedSort::StableSortPairsDescending(t, b, keys_in, keys_out, values_in, values_out,
                                                            count, segments, offsets, offsets + 1, stream),
        "cub::DeviceSegmentedSort::StableSortPairsDescending");
  };
#endif
  return detail::two_phase(temp, temp_bytes, count == 0 || segments == 0, checks, run);
}

/// Stable sort of keys within each segment s = [offsets[s], offsets[s + 1]) (as segmented_sort_pairs).
/// Errors: as segmented_sort_pairs's, for keys_in, keys_out and offsets.
///   llmk::device::segmented_sort_keys<float>(temp, &bytes, scores, sorted, rows * cols, rows, row_offsets,
///                                            llmk::device::SortOrder::kDescending, stream);
template <class Key>
Status segmented_sort_keys(void* temp, std::size_t* temp_bytes, const Key* keys_in, Key* keys_out,
                           std::int64_t count, std::int64_t segments, const std::int64_t* offsets,
                           SortOrder order, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_order(order));
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  if (segments < 0) return Status::invalid_argument("segments", str_cat("must be >= 0, got ", segments));
  auto checks = [&]() -> Status {
    return detail::check_pointers({{"keys_in", keys_in}, {"keys_out", keys_out}, {"offsets", offsets}});
  };
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) {
    return detail::for_each_segment(count, segments, offsets, [&](std::int64_t b, std::int64_t e) {
      detail::stable_sort_keys_host(keys_in + b, keys_out + b, e - b, order);
    });
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    if (order == SortOrder::kAscending)
      return detail::cub_status(cub::DeviceSegmentedSort::StableSortKeys(
                                    t, b, keys_in, keys_out, count, segments, offsets, offsets + 1, stream),
                                "cub::DeviceSegmentedSort::StableSortKeys");
    return detail::cub_status(cub::DeviceSegmentedSort::StableSortKeysDescending(
                                  t, b, keys_in, keys_out, count, segments, offsets, offsets + 1, stream),
                              "cub::DeviceSegmentedSort::StableSortKeysDescending");
  };
#endif
  return detail::two_phase(temp, temp_bytes, count == 0 || segments == 0, checks, run);
}

}  // namespace llmk::device
