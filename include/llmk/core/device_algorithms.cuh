// llmk/core/device_algorithms.cuh: the device-wide algorithms llmk needs (sort, segmented sort, scan, reduce,
// select by flag or threshold, "the k lowest", "at or below the k-th", the k-th value), one interface over
// two implementations:
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
// Keys: unsigned / signed 32- and 64-bit integers and float. Float keys sort as CUB's radix sort orders
// them, in both builds (the simulator's comparison sort compares the same twiddled bits): -0.0 and +0.0 are
// equal (stable), a positive NaN sorts after +Inf and a negative one before -Inf. The threshold selections
// compare with <, so a NaN key is never selected by select_less_than and a NaN threshold selects nothing;
// segmented_at_or_below_kth_mask needs keys without NaN. Kernel-side (block / warp)
// primitives are llmk's own, not CUB's: CUB's collectives are inline PTX, which the simulator cannot run
// (docs/architecture.md). The algorithms live in llmk/core/device_algorithms/ (sort, scan_reduce, select).
#pragma once

#include "llmk/core/device_algorithms/common.cuh"
#include "llmk/core/device_algorithms/scan_reduce.cuh"
#include "llmk/core/device_algorithms/select.cuh"
#include "llmk/core/device_algorithms/sort.cuh"
