// llmk/core/device_algorithms/select.cuh: selections: stream compaction (by flag, by threshold), the k lowest
// and every key at or below the k-th (masks), and the k-th value, per equal or ragged segment and over a
// whole tensor. The highest k: invert the keys (~bits for unsigned, -x for float); ties keep their rank rule
// (lower position first). The interface's rules (temporary storage, key types, the two builds):
// llmk/core/device_algorithms.cuh. Errors every entry shares (Status::invalid_argument naming the argument):
// temp_bytes null; on the second call (temp not null) *temp_bytes below the size query's answer
// ('temp_bytes') or temp not 16-byte aligned
// ('temp'). Pointers are checked on the second call only, and only those the call reads or writes, each for
// null and for alignment to its element type (the named pointer): each entry's "Errors:" line lists them
// with its own rules. A failing CUB call or launch: Status::cuda_error
// naming it (the simulator's kernels: Status::Code::kSimulatorError).
// The ragged forms' offsets (segments + 1 entries, 0 first, count last, non-decreasing) are checked in the
// simulator only ('offsets'); on a GPU they are the caller's contract, as CUB's are.
#pragma once

#include "llmk/core/device_algorithms/common.cuh"
#include "llmk/core/device_algorithms/sort.cuh"

namespace llmk::device {

/// Stream compaction: out gets in[i] for every i with flags[i] != 0, in order; *num_selected (device) the
/// count. out must hold count elements (the worst case). Errors: the shared ones (file comment); count < 0;
/// num_selected null or misaligned; in, flags or out null or misaligned when count > 0.
///   llmk::device::select_flagged<std::int32_t>(temp, &bytes, iota, is_outlier, cols_out, d_count, K,
///   stream);
template <class T>
Status select_flagged(void* temp, std::size_t* temp_bytes, const T* in, const std::uint8_t* flags, T* out,
                      std::int64_t* num_selected, std::int64_t count, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  auto checks = [&]() -> Status {
    LLMK_RETURN_IF_ERROR(detail::check_pointers({{"num_selected", num_selected}}));
    if (count > 0) LLMK_RETURN_IF_ERROR(detail::check_pointers({{"in", in}, {"flags", flags}, {"out", out}}));
    return {};
  };
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) -> Status {
    T* end = thrust::copy_if(thrust::cpp::par, in, in + count, flags, out, detail::NonZero{});
    *num_selected = static_cast<std::int64_t>(end - out);
    return {};
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    return detail::cub_status(cub::DeviceSelect::Flagged(t, b, in, flags, out, num_selected, count, stream),
                              "cub::DeviceSelect::Flagged");
  };
#endif
  return detail::two_phase(temp, temp_bytes, false, checks, run);
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

// The threshold form of scatter_keep_kernel: keep[sorted_index[i]] = (its key > the key of rank k of its
// segment), k < length: the k + 1 lowest and every tie of the last are pruned.
template <class Key, class Index>
__global__ void __launch_bounds__(256)
    scatter_keep_ties_kernel(const Key* keys, const Index* sorted_index, std::int64_t count,
                             std::int64_t length, std::int64_t k, std::uint8_t* keep) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const Key threshold = keys[sorted_index[i / length * length + k]];
    keep[sorted_index[i]] = threshold < keys[sorted_index[i]] ? 1 : 0;
  }
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

// The ragged forms: segment s = [offsets[s], offsets[s + 1]), offsets[0] = 0, offsets[segments] = count.
// The segment holding position p: the last s with offsets[s] <= p (a binary search; empty segments share
// their offset with the next one, which the search skips).
LLMK_HOST_DEVICE std::int64_t segment_holding(const std::int64_t* offsets, std::int64_t segments,
                                              std::int64_t p) {
  std::int64_t lo = 0, hi = segments;  // offsets[lo] <= p < offsets[hi]
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (offsets[mid] <= p)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

template <class Index>
__global__ void __launch_bounds__(256)
    segment_of_offsets_kernel(const Index* index, std::int64_t count, const std::int64_t* offsets,
                              std::int64_t segments, Index* segment_of) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    segment_of[i] =
        static_cast<Index>(segment_holding(offsets, segments, static_cast<std::int64_t>(index[i])));
}

// grouped[i]: the positions grouped by segment (group s at [offsets[s], offsets[s + 1])), each group in
// (key, position) order; group_seg[i] its segment (null: one segment). keep[grouped[i]] = (rank >= k_s),
// k_s = ks[s] clamped to [0, length of s].
template <class Index>
__global__ void __launch_bounds__(256)
    scatter_keep_ragged_kernel(const Index* grouped, const Index* group_seg, std::int64_t count,
                               const std::int64_t* offsets, const std::int64_t* ks, std::uint8_t* keep) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const std::int64_t s = group_seg == nullptr ? 0 : static_cast<std::int64_t>(group_seg[i]);
    const std::int64_t b = offsets[s], len = offsets[s + 1] - b, k = ks[s];
    const std::int64_t kk = k < 0 ? 0 : (k > len ? len : k);
    keep[grouped[i]] = i - b >= kk ? 1 : 0;
  }
}

// out[s] = the key of rank k (0-based, clamped to the segment's last) of segment s; Key{} when it is empty.
template <class Key, class Index>
__global__ void __launch_bounds__(256)
    gather_kth_kernel(const Key* keys, const Index* grouped, const std::int64_t* offsets,
                      std::int64_t segments, std::int64_t k, Key* out) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < segments;
       s += stride) {
    const std::int64_t b = offsets[s], len = offsets[s + 1] - b;
    out[s] = len == 0 ? Key{} : keys[grouped[b + (k < 0 ? 0 : (k >= len ? len - 1 : k))]];
  }
}

// offsets = {0, count}: one segment (kth_value).
template <int kUnused = 0>
__global__ void whole_offsets_kernel(std::int64_t* offsets, std::int64_t count) {
  if (threadIdx.x == 0) {
    offsets[0] = 0;
    offsets[1] = count;
  }
}

// The shared machinery of the ragged forms: after it, grouped / group_seg as above (group_seg null when
// segments <= 1). Two stable radix sorts, as segmented_lowest_k_mask's. Workspace: rank_layout.
struct RankLayout {
  std::size_t index = 0, by_key = 0, sorted_keys = 0, grouped = 0, sort_temp = 0, total = 0;
  std::size_t sort_bytes = 0, group_bytes = 0;
};

template <class Key>
Status rank_layout(std::int64_t count, std::int64_t segments, cudaStream_t stream, RankLayout* l) {
  using Index = std::uint32_t;
  static_assert(sizeof(Key) >= sizeof(Index), "the segment keys reuse the sorted keys' storage");
  const std::size_t n = static_cast<std::size_t>(count);
  const std::size_t idx_bytes = align_up(n * sizeof(Index)), key_bytes = align_up(n * sizeof(Key));
  LLMK_RETURN_IF_ERROR((sort_pairs<Key, Index>(nullptr, &l->sort_bytes, nullptr, nullptr, nullptr, nullptr,
                                               count, SortOrder::kAscending, stream)));
  if (segments > 1)
    LLMK_RETURN_IF_ERROR((sort_pairs<Index, Index>(nullptr, &l->group_bytes, nullptr, nullptr, nullptr,
                                                   nullptr, count, SortOrder::kAscending, stream)));
  l->index = 0;
  l->by_key = idx_bytes;
  l->sorted_keys = 2 * idx_bytes;
  l->grouped = 2 * idx_bytes + key_bytes;
  l->sort_temp = l->grouped + (segments > 1 ? idx_bytes : 0);
  l->total = l->sort_temp + std::max(l->sort_bytes, l->group_bytes);
  return {};
}

template <class Key>
Status rank_by_segment(void* temp, const RankLayout& l, const Key* keys, std::int64_t count,
                       std::int64_t segments, const std::int64_t* offsets, const std::uint32_t** grouped,
                       const std::uint32_t** group_seg, cudaStream_t stream) {
  using Index = std::uint32_t;
  auto* base = static_cast<unsigned char*>(temp);
  auto* index = reinterpret_cast<Index*>(base + l.index);  // positions; later the groups' segments
  auto* by_key = reinterpret_cast<Index*>(base + l.by_key);
  auto* sorted_keys = reinterpret_cast<Key*>(base + l.sorted_keys);  // later the positions' segments
  void* sort_temp = base + l.sort_temp;
  const dim3 grid = elementwise_grid(count);
  std::size_t bytes = l.sort_bytes;
  LLMK_RETURN_IF_ERROR(launch(iota_kernel<Index>, grid, dim3(256), 0, stream, index, count));
  LLMK_RETURN_IF_ERROR((sort_pairs<Key, Index>(sort_temp, &bytes, keys, sorted_keys, index, by_key, count,
                                               SortOrder::kAscending, stream)));
  if (segments <= 1) {
    *grouped = by_key;
    *group_seg = nullptr;
    return {};
  }
  auto* segment_of = reinterpret_cast<Index*>(sorted_keys);
  auto* out = reinterpret_cast<Index*>(base + l.grouped);
  LLMK_RETURN_IF_ERROR(launch(segment_of_offsets_kernel<Index>, grid, dim3(256), 0, stream, by_key, count,
                              offsets, segments, segment_of));
  bytes = l.group_bytes;
  LLMK_RETURN_IF_ERROR((sort_pairs<Index, Index>(sort_temp, &bytes, segment_of, index, by_key, out, count,
                                                 SortOrder::kAscending, stream)));
  *grouped = out;
  *group_seg = index;
  return {};
}

// The ragged forms' argument checks. In the simulator (host memory) the offsets are checked too; on a GPU
// they are the caller's contract, as CUB's are.
inline Status check_ragged(std::int64_t count, std::int64_t segments) {
  LLMK_RETURN_IF_ERROR(check_count(count));
  if (segments < 0 || (segments == 0 && count > 0))
    return Status::invalid_argument("segments",
                                    str_cat("must be >= 1 (>= 0 when count is 0), got ", segments));
  if (count > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()))
    return Status::invalid_argument("count", str_cat("must be < 2^32 (32-bit positions), got ", count));
  return {};
}

// The rank-based ragged forms (rank_by_segment) also store each position's segment as a 32-bit id.
inline Status check_ragged_ranked(std::int64_t count, std::int64_t segments) {
  LLMK_RETURN_IF_ERROR(check_ragged(count, segments));
  if (segments > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()))
    return Status::invalid_argument("segments",
                                    str_cat("must be < 2^32 (32-bit segment ids), got ", segments));
  return {};
}

inline Status check_offsets_values(std::int64_t count, std::int64_t segments, const std::int64_t* offsets) {
#if defined(LLMK_SIM)
  if (offsets[0] != 0 || offsets[segments] != count)
    return Status::invalid_argument("offsets", str_cat("must start at 0 and end at count = ", count,
                                                       ", got [", offsets[0], ", ", offsets[segments], "]"));
  for (std::int64_t s = 0; s < segments; ++s)
    if (offsets[s + 1] < offsets[s])
      return Status::invalid_argument(
          "offsets", str_cat("must be non-decreasing; offsets[", s + 1, "] = ", offsets[s + 1], " < offsets[",
                             s, "] = ", offsets[s]));
#else
  (void)count, (void)segments, (void)offsets;
#endif
  return {};
}

// segmented_lowest_k_mask (ties = false: the k lowest by (key, position)) and segmented_at_or_below_kth_mask
// (ties = true: every key at or below the key of rank k): one sort, then the scatter of either rule.
template <class Key>
Status segmented_mask(void* temp, std::size_t* temp_bytes, const Key* keys, std::int64_t segments,
                      std::int64_t length, std::int64_t k, bool ties, std::uint8_t* keep,
                      cudaStream_t stream) {
  if (segments < 0) return Status::invalid_argument("segments", str_cat("must be >= 0, got ", segments));
  if (length < 0) return Status::invalid_argument("length", str_cat("must be >= 0, got ", length));
  if (length > 0 && segments > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()) / length)
    return Status::invalid_argument(
        "count", str_cat("segments * length must be < 2^32 (32-bit indices), got ", segments, " x ", length));
  const std::int64_t count = segments * length;  // < 2^32 (checked first: the product could overflow)
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
  LLMK_RETURN_IF_ERROR(detail::check_pointers({{"keys", keys}, {"keep", keep}}));
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
  const std::int64_t rank = k < 0 ? 0 : (k >= length ? length - 1 : k);  // the ties form's rank
  auto scatter = [&](const Index* sorted_index) {
    return ties ? launch(detail::scatter_keep_ties_kernel<Key, Index>, grid, dim3(256), 0, stream, keys,
                         sorted_index, count, length, rank, keep)
                : launch(detail::scatter_keep_kernel<Index>, grid, dim3(256), 0, stream, sorted_index, count,
                         length, kk, keep);
  };
  if (one) return scatter(by_key);
  auto* segment_of = reinterpret_cast<Index*>(sorted_keys);
  LLMK_RETURN_IF_ERROR(launch(detail::segment_keys_kernel<Index>, grid, dim3(256), 0, stream, by_key, count,
                              length, segment_of));
  LLMK_RETURN_IF_ERROR((sort_pairs<Index, Index>(sort_temp, &group_bytes, segment_of, index, by_key, grouped,
                                                 count, SortOrder::kAscending, stream)));
  return scatter(grouped);
}
}  // namespace detail

/// The k lowest of each of `segments` equal segments s = keys[s * length .. (s + 1) * length), by (key,
/// index within the segment) (ties to the lower index, llmk's pruning rank rule): keep[i] = 0 for them, 1
/// for the others. A stable radix sort of (key, position) pairs (cub::DeviceRadixSort); with several
/// segments, a second stable radix sort of the positions by their segment groups them without disturbing
/// the key order inside a group (the same two sort instantiations serve every segment count, where a
/// segmented sort would add two more); plus two or three small launches. temp holds the position arrays and
/// the sorted keys. k is clamped to [0, length]; segments * length must be < 2^32 (32-bit positions).
/// Errors: the shared ones (file comment); segments or length < 0; segments * length >= 2^32 ('count');
/// keys or keep null or misaligned when segments * length > 0.
///   // per-row pruning of a [rows, cols] score matrix, k per row
///   llmk::device::segmented_lowest_k_mask<unsigned>(temp, &bytes, scores, rows, cols, k, keep, stream);
template <class Key>
Status segmented_lowest_k_mask(void* temp, std::size_t* temp_bytes, const Key* keys, std::int64_t segments,
                               std::int64_t length, std::int64_t k, std::uint8_t* keep, cudaStream_t stream) {
  return detail::segmented_mask<Key>(temp, temp_bytes, keys, segments, length, k, false, keep, stream);
}

/// The threshold rule of the SparseGPT and magnitude reference codes (every score at or below the sorted
/// score at index k): keep[i] = 0 for every key of segment s = keys[s * length .. (s + 1) * length) at or
/// below the key of rank k (0-based, ascending; k clamped to [0, length - 1]) of that segment, 1 for the
/// others: at least k + 1 keys a segment, and every tie of the last. The same sorts and temporary storage as
/// segmented_lowest_k_mask (the same size query answers both); only the last scatter differs. Errors: as
/// segmented_lowest_k_mask.
///   // Wanda / magnitude with the reference's count: every score <= the row's sorted score at int(p cols)
///   llmk::device::segmented_at_or_below_kth_mask<unsigned>(temp, &bytes, scores, rows, cols,
///                                                          static_cast<std::int64_t>(p * cols), keep,
///                                                          stream);
template <class Key>
Status segmented_at_or_below_kth_mask(void* temp, std::size_t* temp_bytes, const Key* keys,
                                      std::int64_t segments, std::int64_t length, std::int64_t k,
                                      std::uint8_t* keep, cudaStream_t stream) {
  return detail::segmented_mask<Key>(temp, temp_bytes, keys, segments, length, k, true, keep, stream);
}

/// The k lowest of keys[0 .. count) by (key, index): segmented_lowest_k_mask with one segment. Errors: the
/// shared ones (file comment); count < 0 or >= 2^32; keys or keep null or misaligned when count > 0.
///   llmk::device::lowest_k_mask<unsigned>(temp, &bytes, score_bits, rows * cols, k, mask, stream);
template <class Key>
Status lowest_k_mask(void* temp, std::size_t* temp_bytes, const Key* keys, std::int64_t count, std::int64_t k,
                     std::uint8_t* keep, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  return segmented_lowest_k_mask<Key>(temp, temp_bytes, keys, 1, count, k, keep, stream);
}

/// The threshold rule over keys[0 .. count): segmented_at_or_below_kth_mask with one segment. Errors: the
/// shared ones (file comment); count < 0 or >= 2^32; keys or keep null or misaligned when count > 0.
///   llmk::device::at_or_below_kth_mask<unsigned>(temp, &bytes, score_bits, n, int(p * n), keep, stream);
template <class Key>
Status at_or_below_kth_mask(void* temp, std::size_t* temp_bytes, const Key* keys, std::int64_t count,
                            std::int64_t k, std::uint8_t* keep, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  return segmented_at_or_below_kth_mask<Key>(temp, temp_bytes, keys, 1, count, k, keep, stream);
}

/// The ragged form: segment s = keys[offsets[s] .. offsets[s + 1]) (offsets: device, segments + 1
/// non-decreasing entries from 0 to count; empty segments allowed), the ks[s] lowest of segment s by (key,
/// position) (ks: device, one per segment, each clamped to [0, the segment's length]): keep[i] = 0 for them,
/// 1 for the others. The same two stable radix sorts as the equal form (the segment of a position is found
/// by a binary search over offsets). count and segments must be < 2^32. Errors: the shared ones (file
/// comment); count < 0 or >= 2^32; segments < 0, >= 2^32, or 0 with count > 0; keys, offsets, ks or keep null
/// or misaligned when count > 0; the offsets' values (simulator only, file comment).
///   // 50% of each sequence's tokens, sequences of different lengths
///   llmk::device::segmented_lowest_k_mask<float>(temp, &bytes, scores, tokens, batch, cu_seqlens, halves,
///                                                keep, stream);
template <class Key>
Status segmented_lowest_k_mask(void* temp, std::size_t* temp_bytes, const Key* keys, std::int64_t count,
                               std::int64_t segments, const std::int64_t* offsets, const std::int64_t* ks,
                               std::uint8_t* keep, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_ragged_ranked(count, segments));
  detail::RankLayout l;
  LLMK_RETURN_IF_ERROR(detail::rank_layout<Key>(count, segments, stream, &l));
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, l.total, &query));
  if (query || count == 0) return {};
  LLMK_RETURN_IF_ERROR(
      detail::check_pointers({{"keys", keys}, {"offsets", offsets}, {"ks", ks}, {"keep", keep}}));
  LLMK_RETURN_IF_ERROR(detail::check_offsets_values(count, segments, offsets));
  const std::uint32_t *grouped = nullptr, *group_seg = nullptr;
  LLMK_RETURN_IF_ERROR(
      detail::rank_by_segment<Key>(temp, l, keys, count, segments, offsets, &grouped, &group_seg, stream));
  return launch(detail::scatter_keep_ragged_kernel<std::uint32_t>, detail::elementwise_grid(count), dim3(256),
                0, stream, grouped, group_seg, count, offsets, ks, keep);
}

/// out[s] (device, one per segment) = the key of rank k (0-based, ascending; k clamped to [0, length - 1])
/// of segment s = keys[offsets[s] .. offsets[s + 1]), Key{} for an empty segment: the k-th value, e.g. a
/// pruning threshold per row or per sequence. offsets as in the ragged segmented_lowest_k_mask; count and
/// segments must be < 2^32. Exact (a sort), so bit-identical on both builds. Errors: the shared ones (file
/// comment); count < 0 or >= 2^32; segments < 0, >= 2^32, or 0 with count > 0; out or offsets null or
/// misaligned when segments > 0, keys null or misaligned when count > 0; the offsets' values (simulator
/// only, file comment).
///   // the median score of each row of a [rows, cols] matrix (row_offsets = 0, cols, 2 cols, ...)
///   llmk::device::segmented_kth_value<float>(temp, &bytes, scores, rows * cols, rows, row_offsets,
///                                            cols / 2, medians, stream);
template <class Key>
Status segmented_kth_value(void* temp, std::size_t* temp_bytes, const Key* keys, std::int64_t count,
                           std::int64_t segments, const std::int64_t* offsets, std::int64_t k, Key* out,
                           cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_ragged_ranked(count, segments));
  detail::RankLayout l;
  LLMK_RETURN_IF_ERROR(detail::rank_layout<Key>(count, segments, stream, &l));
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, l.total, &query));
  if (query || segments == 0) return {};
  LLMK_RETURN_IF_ERROR(detail::check_pointers({{"out", out}, {"offsets", offsets}}));
  if (count > 0) LLMK_RETURN_IF_ERROR(detail::check_pointers({{"keys", keys}}));
  LLMK_RETURN_IF_ERROR(detail::check_offsets_values(count, segments, offsets));
  const std::uint32_t *grouped = nullptr, *group_seg = nullptr;
  if (count > 0)
    LLMK_RETURN_IF_ERROR(
        detail::rank_by_segment<Key>(temp, l, keys, count, segments, offsets, &grouped, &group_seg, stream));
  return launch(detail::gather_kth_kernel<Key, std::uint32_t>, detail::elementwise_grid(segments), dim3(256),
                0, stream, keys, grouped, offsets, segments, k, out);
}

/// *out (device) = the key of rank k (0-based, ascending, clamped to [0, count - 1]) of keys[0 .. count);
/// Key{} when count is 0. temp also holds the one-segment offsets {0, count}. Errors: the shared ones (file
/// comment); count < 0 or >= 2^32; out null or misaligned; keys null or misaligned when count > 0.
///   llmk::device::kth_value<float>(temp, &bytes, magnitudes, n, n / 2, d_threshold, stream);
template <class Key>
Status kth_value(void* temp, std::size_t* temp_bytes, const Key* keys, std::int64_t count, std::int64_t k,
                 Key* out, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_ragged(count, 1));
  std::size_t bytes = 0;
  LLMK_RETURN_IF_ERROR(segmented_kth_value<Key>(nullptr, &bytes, keys, count, 1, nullptr, k, out, stream));
  const std::size_t offsets_at = detail::align_up(bytes);
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, offsets_at + 2 * sizeof(std::int64_t), &query));
  if (query) return {};
  LLMK_RETURN_IF_ERROR(detail::check_pointers({{"out", out}}));
  auto* offsets = reinterpret_cast<std::int64_t*>(static_cast<unsigned char*>(temp) + offsets_at);
  LLMK_RETURN_IF_ERROR(launch(detail::whole_offsets_kernel<>, dim3(1), dim3(32), 0, stream, offsets, count));
  return segmented_kth_value<Key>(temp, &bytes, keys, count, 1, offsets, k, out, stream);
}

namespace detail {
// The threshold test of select_less_than, on an element's position (the selected values are positions).
template <class Key, class Index>
struct LessAt {
  const Key* keys;
  Key threshold;
  LLMK_HOST_DEVICE bool operator()(Index i) const { return keys[i] < threshold; }
};
}  // namespace detail

/// Threshold select: indices_out gets every position i with keys[i] < threshold, in increasing order;
/// *num_selected (device) their count. indices_out must hold count entries (the worst case); count must fit
/// Index. cub::DeviceSelect::If over a counting iterator on the GPU. Errors: the shared ones (file comment);
/// count < 0 or above Index's maximum; num_selected null or misaligned; keys or indices_out null or
/// misaligned when count > 0.
///   // the columns whose score is below the per-layer threshold
///   llmk::device::select_less_than<float, std::int32_t>(temp, &bytes, scores, n, threshold, cols, d_count,
///                                                       stream);
template <class Key, class Index>
Status select_less_than(void* temp, std::size_t* temp_bytes, const Key* keys, std::int64_t count,
                        Key threshold, Index* indices_out, std::int64_t* num_selected, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_count(count));
  if (count > static_cast<std::int64_t>(std::numeric_limits<Index>::max()))
    return Status::invalid_argument(
        "count",
        str_cat("must fit the index type (<= ", std::numeric_limits<Index>::max(), "), got ", count));
  const detail::LessAt<Key, Index> pred{keys, threshold};
  auto checks = [&]() -> Status {
    LLMK_RETURN_IF_ERROR(detail::check_pointers({{"num_selected", num_selected}}));
    if (count > 0)
      LLMK_RETURN_IF_ERROR(detail::check_pointers({{"keys", keys}, {"indices_out", indices_out}}));
    return {};
  };
#if defined(LLMK_SIM)
  (void)stream;
  auto run = [&](void*, std::size_t&) -> Status {
    std::int64_t n = 0;
    for (std::int64_t i = 0; i < count; ++i)
      if (pred(static_cast<Index>(i))) indices_out[n++] = static_cast<Index>(i);
    *num_selected = n;
    return {};
  };
#else
  auto run = [&](void* t, std::size_t& b) {
    return detail::cub_status(cub::DeviceSelect::If(t, b, thrust::counting_iterator<Index>(0), indices_out,
                                                    num_selected, count, pred, stream),
                              "cub::DeviceSelect::If");
  };
#endif
  return detail::two_phase(temp, temp_bytes, false, checks, run);
}

namespace detail {
// The segment of position i: the last s with offsets[s] <= i (so an empty segment never holds a position).
LLMK_HOST_DEVICE std::int64_t segment_of(const std::int64_t* offsets, std::int64_t segments, std::int64_t i) {
  std::int64_t lo = 0, hi = segments;  // offsets[lo] <= i < offsets[hi]
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (offsets[mid] <= i)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}
// flags[i] = keys[i] < thresholds[segment of i] (segmented_select_less_than's first step: the binary search
// runs here, in llmk's kernel, rather than in a predicate inside CUB's select, where it spilled registers).
template <class Key>
__global__ void __launch_bounds__(256)
    segment_less_flags_kernel(const Key* keys, std::int64_t count, const std::int64_t* offsets,
                              std::int64_t segments, const Key* thresholds, std::uint8_t* flags) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    flags[i] = keys[i] < thresholds[segment_of(offsets, segments, i)] ? 1 : 0;
}
// First position in sorted[0 .. n) holding a value >= v.
template <class Index>
LLMK_DEVICE std::int64_t lower_bound_of(const Index* sorted, std::int64_t n, std::int64_t v) {
  std::int64_t lo = 0, hi = n;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<std::int64_t>(sorted[mid]) < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}
// counts[s] = how many of the selected positions (increasing) lie in segment s: two binary searches.
template <class Index>
__global__ void __launch_bounds__(256)
    segment_counts_kernel(const Index* selected, const std::int64_t* num_selected,
                          const std::int64_t* offsets, std::int64_t segments, std::int64_t* counts) {
  const std::int64_t n = *num_selected;
  for (std::int64_t s = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; s < segments;
       s += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    counts[s] = lower_bound_of(selected, n, offsets[s + 1]) - lower_bound_of(selected, n, offsets[s]);
}
}  // namespace detail

/// Threshold select per segment: indices_out gets every position i with keys[i] < thresholds[s], s the
/// segment holding i (keys[offsets[s] .. offsets[s + 1])), in increasing order (so grouped by segment);
/// *num_selected (device) their count and, when segment_counts is not null, segment_counts[s] (device, one
/// per segment) the count of segment s. offsets as in the ragged segmented_lowest_k_mask (0 first, count
/// last, non-decreasing; empty segments allowed); thresholds one per segment, e.g. segmented_kth_value's
/// output. indices_out must hold count entries (the worst case); count must fit Index and be < 2^32. Three
/// steps: a flag per position (a binary search of offsets), cub::DeviceSelect::Flagged over a counting
/// iterator on the GPU (a loop in the simulator), and the counts (two binary searches per segment). Temporary
/// storage: one byte per position plus CUB's. Errors: the shared ones (file comment); count < 0, >= 2^32 or
/// above Index's maximum; segments < 0, or 0 with count > 0; num_selected null; offsets null when segments
/// > 0; keys, thresholds or indices_out null when count > 0; any of these, or segment_counts when not null,
/// misaligned; the offsets' values (simulator only).
///   // per row of a [rows, cols] score matrix, the columns below that row's threshold
///   llmk::device::segmented_select_less_than<float, std::int32_t>(temp, &bytes, scores, rows * cols, rows,
///                                                                 row_offsets, row_thresholds, positions,
///                                                                 d_total, d_per_row, stream);
template <class Key, class Index>
Status segmented_select_less_than(void* temp, std::size_t* temp_bytes, const Key* keys, std::int64_t count,
                                  std::int64_t segments, const std::int64_t* offsets, const Key* thresholds,
                                  Index* indices_out, std::int64_t* num_selected,
                                  std::int64_t* segment_counts, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_ragged(count, segments));
  if (count > static_cast<std::int64_t>(std::numeric_limits<Index>::max()))
    return Status::invalid_argument(
        "count",
        str_cat("must fit the index type (<= ", std::numeric_limits<Index>::max(), "), got ", count));
  const std::size_t select_at = detail::align_up(static_cast<std::size_t>(count));  // after the flags
  std::size_t select_bytes = 0;
#if defined(LLMK_SIM)
  select_bytes = detail::kSimTempBytes;
#else
  LLMK_RETURN_IF_ERROR(detail::cub_status(
      cub::DeviceSelect::Flagged(nullptr, select_bytes, thrust::counting_iterator<Index>(0),
                                 static_cast<const std::uint8_t*>(nullptr), indices_out, num_selected, count,
                                 stream),
      "cub::DeviceSelect::Flagged"));
#endif
  bool query = false;
  LLMK_RETURN_IF_ERROR(detail::check_temp(temp, temp_bytes, select_at + select_bytes, &query));
  if (query) return {};
  LLMK_RETURN_IF_ERROR(detail::check_pointers({{"num_selected", num_selected}}));
  if (segments > 0) LLMK_RETURN_IF_ERROR(detail::check_pointers({{"offsets", offsets}}));
  if (count > 0)
    LLMK_RETURN_IF_ERROR(
        detail::check_pointers({{"keys", keys}, {"thresholds", thresholds}, {"indices_out", indices_out}}));
  if (segment_counts != nullptr && segments > 0)
    LLMK_RETURN_IF_ERROR(detail::check_pointers({{"segment_counts", segment_counts}}));
  if (segments > 0) LLMK_RETURN_IF_ERROR(detail::check_offsets_values(count, segments, offsets));
  auto* flags = static_cast<std::uint8_t*>(temp);
  if (count > 0)
    LLMK_RETURN_IF_ERROR(launch(detail::segment_less_flags_kernel<Key>, detail::elementwise_grid(count),
                                dim3(256), 0, stream, keys, count, offsets, segments, thresholds, flags));
#if defined(LLMK_SIM)
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < count; ++i)
    if (flags[i] != 0) indices_out[n++] = static_cast<Index>(i);
  *num_selected = n;
#else
  LLMK_RETURN_IF_ERROR(detail::cub_status(
      cub::DeviceSelect::Flagged(static_cast<unsigned char*>(temp) + select_at, select_bytes,
                                 thrust::counting_iterator<Index>(0), static_cast<const std::uint8_t*>(flags),
                                 indices_out, num_selected, count, stream),
      "cub::DeviceSelect::Flagged"));
#endif
  if (segment_counts == nullptr || segments == 0) return {};
  return launch(detail::segment_counts_kernel<Index>, detail::elementwise_grid(segments), dim3(256), 0,
                stream, indices_out, num_selected, offsets, segments, segment_counts);
}

}  // namespace llmk::device
