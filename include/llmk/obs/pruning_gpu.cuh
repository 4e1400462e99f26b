// llmk/obs/pruning_gpu.cuh: Wanda and magnitude pruning (llmk/obs/pruning.hpp) on device memory, with the
// host's selection exactly: the same scores, the same per-row count, the same rank rule (ties go to the
// lower column index), so the weights and masks are bit for bit the host's, in the simulator and on a GPU.
//
// Scores as keys. The host ranks fp64 scores: magnitude |w| (exact in fp32, so the key is the fp32 bit
// pattern of |w|), Wanda |w| * sqrt(H_cc) (one IEEE fp64 sqrt and one fp64 product, no contraction possible,
// so the key is the fp64 bit pattern). Scores are finite and >= 0 (inputs validated), so the keys order as
// unsigned integers, and +0 / -0 weights both give key 0 (fabs).
//
// Kernels (256 threads):
//   unstructured  the candidate set is a row (Wanda's default, and scope kPerRow: one CTA per row,
//   grid-stride
//                 over rows, k = llround(sparsity * cols)) or the whole layer (magnitude's default, and scope
//                 kPerLayer: one CTA, k = llround(sparsity * rows * cols), ties to the lower row-major
//                 index). The selection is llmk/obs/select_gpu.cuh's exact radix select (4 histogram passes
//                 for magnitude's 32-bit keys, 8 for Wanda's 64-bit keys) plus an ordered pass for the ties.
//                 A per-layer selection on one CTA reads the layer 5-9 times on one SM: an offline step.
//                 PruneCount::kThreshold (the reference codes' rule): the key of rank int(sparsity * n) and
//                 every key at or below it (select_lowest's all_ties; the device sort's
//                 segmented_at_or_below_kth_mask), the host's masks bit for bit as well.
//   device sort   (the workspace overloads; PruneGpuSelect) the same selection by CUB on the whole GPU: a
//                 keys kernel writes every score key, llmk::device::segmented_lowest_k_mask (one stable radix
//                 sort of (key, index); for per-row sets a second one groups the positions by row) marks
//                 the k lowest of each set, an apply kernel writes out and mask. Bit for bit the CTA select's
//                 result (same keys, same rank rule). kAuto takes it for per-layer sets (one CTA cannot use
//                 the GPU; the entries without a workspace allocate its storage) and keeps the CTA select per
//                 row: a row's select runs on-chip from L1/L2 (the row
//                 is re-read per radix pass but never written), while the device sorts write and re-read
//                 (key, index) pairs through global memory. Measured on an H100 (bench/obs.cu,
//                 BM_PruneBlockSelect vs BM_PruneDeviceSort, 4096 x 4096): per row the CTA select is 5x
//                 faster (537 us vs 2.75 ms), per layer 58x slower (67.9 ms vs 1.17 ms): per-layer sets
//                 are sorted.
//   n:m           groups of m consecutive columns (m <= 32), 32 / m groups per warp, a lane per column:
//                 rank_t = #{u : s_u < s_t or (s_u == s_t and u < t)} by m shuffles (registers only);
//                 rank < n is pruned.
// Validation syncs the stream once: a check kernel ORs flags (non-finite w, non-finite or negative H_cc)
// into out_weights' first word, which is read back before the pruning kernel overwrites it. No loss is
// computed (the host entries' PruneResult::loss): compute 1/2 tr(E H E^T) with the backend's GEMM
// (llmk/obs/linalg.hpp) on E = W - out_weights if it is needed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "llmk/config.cuh"
#include "llmk/core/device_algorithms.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"
#include "llmk/obs/pruning.hpp"
#include "llmk/obs/select_gpu.cuh"

#if defined(LLMK_HOST_ONLY)
#error "llmk/obs/pruning_gpu.cuh holds kernels: build with nvcc or the simulator (LLMK_SIM)"
#endif

#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

namespace llmk::obs {

/// How the GPU pruning entries select the k lowest scores of an unstructured candidate set (a row or the
/// layer; n:m patterns are ranked in registers whatever this says). Every choice gives the same bits.
///   kAuto         per-layer sets: kDeviceSort when a workspace is given; per-row sets: kBlockSelect
///   kBlockSelect  one CTA per set, an exact radix select in shared memory (no workspace)
///   kDeviceSort   CUB's stable (segmented) radix sort of (key, index) over the whole GPU (workspace)
enum class PruneGpuSelect { kAuto, kBlockSelect, kDeviceSort };

namespace prune_gpu_detail {

inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
inline constexpr unsigned kFull = 0xffffffffu;
inline constexpr int kMaxGroup = 32;  // n:m: m <= 32 (a group lives in one warp's registers)

enum CheckBits : unsigned { kBadW = 1u, kBadHFinite = 2u, kBadHNegative = 4u };

// The sort key of column c of row r (see the file comment). Wanda: Key = 64 bits, else 32 bits.
template <bool kWanda>
struct KeyOf;
template <>
struct KeyOf<false> {
  using type = unsigned;
  LLMK_DEVICE static unsigned get(const float* wr, const float*, std::int64_t, std::int64_t c) {
    return __float_as_uint(fabsf(wr[c]));
  }
};
template <>
struct KeyOf<true> {
  using type = unsigned long long;
  LLMK_DEVICE static unsigned long long get(const float* wr, const float* h, std::int64_t ldh,
                                            std::int64_t c) {
    // fabs(h): a -0 diagonal (a dead column; the checks take it, as -0 < 0 is false) must score +0, as on the
    // host; sqrt(-0) is -0, whose bits would rank above every positive score.
    const double s = fabs(static_cast<double>(wr[c])) * sqrt(fabs(static_cast<double>(h[c * ldh + c])));
    return static_cast<unsigned long long>(__double_as_longlong(s));
  }
};

// Unstructured: CTA b takes the candidate sets b, b + gridDim.x, ...: per row (segment_rows = 1, one set per
// row) or per layer (segment_rows = rows, one set); prunes the k lowest keys of each (select_lowest: the rank
// rule, ties to the lower row-major index) and writes out and mask.
template <bool kWanda>
__global__ void __launch_bounds__(kThreads)
    unstructured_kernel(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                        const float* h, std::int64_t ldh, std::int64_t segment_rows, std::int64_t k,
                        bool all_ties, float* out, std::int64_t ld_out, std::uint8_t* mask,
                        std::int64_t ld_mask) {
  using K = KeyOf<kWanda>;
  select_detail::SelectSmem& sm = shared_storage<select_detail::SelectSmem>();
  for (std::int64_t r0 = blockIdx.x * segment_rows; r0 < rows; r0 += gridDim.x * segment_rows) {
    select_detail::select_lowest<typename K::type>(
        sm, segment_rows, cols, k,
        [&](std::int64_t r, std::int64_t c) { return K::get(w + (r0 + r) * ldw, h, ldh, c); },
        [&](std::int64_t r, std::int64_t c, bool pruned) {
          out[(r0 + r) * ld_out + c] = pruned ? 0.0f : w[(r0 + r) * ldw + c];
          mask[(r0 + r) * ld_mask + c] = pruned ? std::uint8_t{0} : std::uint8_t{1};
        },
        all_ties);
  }
}

// n:m, one CTA per row: 32 / m groups per warp, lane (g, t) holds column t of its group g.
template <bool kWanda>
__global__ void __launch_bounds__(kThreads)
    nm_kernel(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw, const float* h,
              std::int64_t ldh, int n, int m, float* out, std::int64_t ld_out, std::uint8_t* mask,
              std::int64_t ld_mask) {
  using K = KeyOf<kWanda>;
  using Key = typename K::type;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int per_warp = 32 / m;
  const int g_lane = lane / m, t = lane % m;
  const bool lane_used = g_lane < per_warp;
  const std::int64_t groups = cols / m;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* wr = w + r * ldw;
    for (std::int64_t g0 = static_cast<std::int64_t>(warp) * per_warp; g0 < groups;
         g0 += static_cast<std::int64_t>(kWarps) * per_warp) {  // warp-uniform
      const std::int64_t g = g0 + g_lane;
      const bool valid = lane_used && g < groups;
      const std::int64_t c = g * m + t;
      const Key key = valid ? K::get(wr, h, ldh, c) : Key{0};
      const int src0 = lane_used ? g_lane * m : lane;
      int rank = 0;
      for (int u = 0; u < m; ++u) {
        const Key ku = __shfl_sync(kFull, key, src0 + (lane_used ? u : 0));
        rank += (ku < key || (ku == key && u < t)) ? 1 : 0;
      }
      if (valid) {
        const bool pruned = rank < n;
        out[r * ld_out + c] = pruned ? 0.0f : wr[c];
        mask[r * ld_mask + c] = pruned ? std::uint8_t{0} : std::uint8_t{1};
      }
    }
  }
}

// keys[r * cols + c] = the sort key of (r, c) (KeyOf), row-major and dense for the device-wide selection.
template <bool kWanda>
__global__ void __launch_bounds__(kThreads)
    keys_kernel(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw, const float* h,
                std::int64_t ldh, typename KeyOf<kWanda>::type* keys) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < rows * cols;
       i += stride)
    keys[i] = KeyOf<kWanda>::get(w + i / cols * ldw, h, ldh, i % cols);
}

// out / mask from the dense keep flags the device-wide selection wrote (1 = kept).
template <class T>
__global__ void __launch_bounds__(kThreads)
    apply_keep_kernel(const T* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                      const std::uint8_t* keep, T* out, std::int64_t ld_out, std::uint8_t* mask,
                      std::int64_t ld_mask) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < rows * cols;
       i += stride) {
    const std::int64_t r = i / cols, c = i % cols;
    const bool kept = keep[i] != 0;
    out[r * ld_out + c] = kept ? w[r * ldw + c] : T{0};
    mask[r * ld_mask + c] = kept ? std::uint8_t{1} : std::uint8_t{0};
  }
}

// Flags (CheckBits) ORed into *flags: non-finite w[r, c]; (Wanda) non-finite or negative h[c, c]. A template
// (T = float) so that the kernel has inline linkage: the header may be included from several translation
// units.
template <class T>
__global__ void __launch_bounds__(kThreads)
    check_kernel(const T* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw, const T* h,
                 std::int64_t ldh, unsigned* flags) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  unsigned bits = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < rows * cols;
       i += stride) {
    const T v = w[(i / cols) * ldw + i % cols];
    if (!(fabsf(v) <= 3.402823466e38f)) bits |= kBadW;
  }
  if (h != nullptr)
    for (std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; c < cols;
         c += stride) {
      const T v = h[c * ldh + c];
      if (!(fabsf(v) <= 3.402823466e38f))
        bits |= kBadHFinite;
      else if (v < 0.0f)
        bits |= kBadHNegative;
    }
  if (bits != 0) atomicOr(flags, bits);
}

inline Status zero_word(unsigned* p, cudaStream_t stream) {
#if defined(LLMK_CUDA)
  const cudaError_t e = cudaMemsetAsync(p, 0, sizeof(unsigned), stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaMemsetAsync", cudaGetErrorString(e));
#else
  (void)stream;
  std::memset(p, 0, sizeof(unsigned));
#endif
  return {};
}

inline Status read_word(const unsigned* p, unsigned* v, cudaStream_t stream) {
#if defined(LLMK_CUDA)
  cudaError_t e = cudaMemcpyAsync(v, p, sizeof(unsigned), cudaMemcpyDeviceToHost, stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaMemcpyAsync", cudaGetErrorString(e));
  e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaStreamSynchronize", cudaGetErrorString(e));
#else
  (void)stream;
  std::memcpy(v, p, sizeof(unsigned));
#endif
  return {};
}

// What a call runs: the selection path, its candidate sets and the workspace it needs.
struct PrunePlan {
  bool device_sort = false;
  bool threshold = false;  // PruneCount::kThreshold: k is the rank whose key and every key below is pruned
  std::int64_t segments = 0, length = 0, k = 0;  // the unstructured candidate sets and the count per set
  std::size_t keys_bytes = 0, keep_bytes = 0, select_bytes = 0;
  // Never 0 (CUB's protocol: a caller allocates the queried size and calls again with a non-null pointer).
  std::size_t bytes() const { return device_sort ? keys_bytes + keep_bytes + select_bytes : 16; }
};

inline std::size_t align256(std::size_t x) {
  return (x + 255) / 256 * 256;
}

// The shape and configuration rules (everything the workspace size depends on) and the plan.
inline Status plan_prune(std::int64_t rows, std::int64_t cols, bool wanda, const PruneOptions& opt,
                         PruneGpuSelect select, bool has_workspace, PrunePlan* plan) {
  if (rows < 1) return Status::invalid_argument("rows", str_cat("must be >= 1, got ", rows));
  if (cols < 1) return Status::invalid_argument("cols", str_cat("must be >= 1, got ", cols));
  if (cols > std::numeric_limits<int>::max())
    return Status::invalid_argument("cols", str_cat("must be < 2^31 (32-bit per-row counts), got ", cols));
  LLMK_RETURN_IF_ERROR(detail::check_prune_pattern(opt.sparsity, opt.prune_n, opt.prune_m, cols));
  LLMK_RETURN_IF_ERROR(detail::check_scope(opt.scope));
  LLMK_RETURN_IF_ERROR(detail::check_count(opt.count));
  if (select != PruneGpuSelect::kAuto && select != PruneGpuSelect::kBlockSelect &&
      select != PruneGpuSelect::kDeviceSort)
    return Status::invalid_argument("select", "must be kAuto, kBlockSelect or kDeviceSort");
  if (select == PruneGpuSelect::kDeviceSort && !has_workspace)
    return Status::invalid_argument("select",
                                    "kDeviceSort needs a workspace (the temp / temp_bytes overload)");
  if (opt.prune_n > 0 && opt.prune_m > kMaxGroup)
    return Status::invalid_argument(
        "prune_m", str_cat("must be <= 32 on the GPU (a group is held by one warp), got ", opt.prune_m));
  const bool nm = opt.prune_n > 0,
             layer = !nm && detail::per_layer(opt.scope, /*reference_per_layer=*/!wanda);
  *plan = PrunePlan{};
  plan->device_sort = !nm && has_workspace &&
                      (select == PruneGpuSelect::kDeviceSort || (select == PruneGpuSelect::kAuto && layer));
  if ((layer || plan->device_sort) && rows * cols > 0xffffffffLL)
    return Status::invalid_argument(
        "rows", str_cat("rows * cols must be < 2^32 for a ", layer ? "per-layer" : "device-sort",
                        " selection (32-bit counts and indices), got ", rows, " x ", cols));
  plan->segments = layer ? 1 : rows;
  plan->length = layer ? rows * cols : cols;
  plan->threshold = !nm && opt.count == PruneCount::kThreshold;
  // The threshold rule's rank: int(sparsity * n), as detail::prune_at_or_below_rank (sparsity < 1: < n).
  plan->k = nm                ? 0
            : plan->threshold ? static_cast<std::int64_t>(opt.sparsity * static_cast<double>(plan->length))
            : layer           ? detail::prune_count(opt.sparsity, plan->length)
                              : detail::row_prune_count(opt.sparsity, plan->length);
  if (plan->device_sort) {
    const auto n = static_cast<std::size_t>(rows * cols);
    plan->keys_bytes = align256(n * (wanda ? 8 : 4));
    plan->keep_bytes = align256(n);
    // One size query serves both rules (segmented_at_or_below_kth_mask shares the sorts' storage).
    if (wanda)
      LLMK_RETURN_IF_ERROR(llmk::device::segmented_lowest_k_mask<unsigned long long>(
          nullptr, &plan->select_bytes, nullptr, plan->segments, plan->length, plan->k, nullptr, nullptr));
    else
      LLMK_RETURN_IF_ERROR(llmk::device::segmented_lowest_k_mask<unsigned>(
          nullptr, &plan->select_bytes, nullptr, plan->segments, plan->length, plan->k, nullptr, nullptr));
  }
  return {};
}

// The device-wide selection (plan.device_sort): keys, the k lowest per set, out and mask.
template <bool kWanda>
Status prune_device_sort(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                         const float* h, std::int64_t ldh, const PrunePlan& plan, void* temp, float* out,
                         std::int64_t ld_out, std::uint8_t* mask, std::int64_t ld_mask, cudaStream_t stream) {
  using Key = typename KeyOf<kWanda>::type;
  auto* base = static_cast<unsigned char*>(temp);
  auto* keys = reinterpret_cast<Key*>(base);
  auto* keep = base + plan.keys_bytes;
  void* select_temp = base + plan.keys_bytes + plan.keep_bytes;
  const dim3 grid(
      static_cast<unsigned>(std::min<std::int64_t>((rows * cols + kThreads - 1) / kThreads, 4096)));
  LLMK_RETURN_IF_ERROR(
      launch(keys_kernel<kWanda>, grid, dim3(kThreads), 0, stream, w, rows, cols, ldw, h, ldh, keys));
  std::size_t select_bytes = plan.select_bytes;
  if (plan.threshold)
    LLMK_RETURN_IF_ERROR(llmk::device::segmented_at_or_below_kth_mask<Key>(
        select_temp, &select_bytes, keys, plan.segments, plan.length, plan.k, keep, stream));
  else
    LLMK_RETURN_IF_ERROR(llmk::device::segmented_lowest_k_mask<Key>(
        select_temp, &select_bytes, keys, plan.segments, plan.length, plan.k, keep, stream));
  return launch(apply_keep_kernel<float>, grid, dim3(kThreads), 0, stream, w, rows, cols, ldw, keep, out,
                ld_out, mask, ld_mask);
}

inline Status prune_gpu(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                        const float* h, std::int64_t ldh, bool wanda, const PruneOptions& opt,
                        const PrunePlan& plan, void* temp, float* out, std::int64_t ld_out,
                        std::uint8_t* mask, std::int64_t ld_mask, cudaStream_t stream) {
  if (w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (ldw < cols)
    return Status::invalid_argument("ldw", str_cat("must be >= cols (cols=", cols, ", ldw=", ldw, ")"));
  if (wanda) {
    if (h == nullptr) return Status::invalid_argument("h", "must not be null");
    if (ldh < cols)
      return Status::invalid_argument(
          "ldh", str_cat("must be >= cols (the Hessian is [cols, cols]; cols=", cols, ", ldh=", ldh, ")"));
  }
  if (out == nullptr) return Status::invalid_argument("out_weights", "must not be null");
  if (ld_out < cols)
    return Status::invalid_argument("ld_out",
                                    str_cat("must be >= cols (cols=", cols, ", ld_out=", ld_out, ")"));
  if (mask == nullptr) return Status::invalid_argument("mask", "must not be null");
  if (ld_mask < cols)
    return Status::invalid_argument("ld_mask",
                                    str_cat("must be >= cols (cols=", cols, ", ld_mask=", ld_mask, ")"));
  // fp32 loads and stores (the first word of out is also the kernels' flag word for atomicOr); checked before
  // the overlaps, which assume whole elements.
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("w", w));
  if (wanda) LLMK_RETURN_IF_ERROR(check_element_alignment<float>("h", h));
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("out_weights", out));
  const std::int64_t w_bytes = ((rows - 1) * ldw + cols) * 4,
                     h_bytes = wanda ? ((cols - 1) * ldh + cols) * 4 : 0;
  const std::int64_t out_bytes = ((rows - 1) * ld_out + cols) * 4, mask_bytes = (rows - 1) * ld_mask + cols;
  if (ranges_overlap(out, out_bytes, w, w_bytes) || (wanda && ranges_overlap(out, out_bytes, h, h_bytes)))
    return Status::invalid_argument("out_weights", "must not overlap w or h");
  if (ranges_overlap(mask, mask_bytes, w, w_bytes) ||
      (wanda && ranges_overlap(mask, mask_bytes, h, h_bytes)) ||
      ranges_overlap(mask, mask_bytes, out, out_bytes))
    return Status::invalid_argument("mask", "must not overlap w, h or out_weights");
  if (plan.device_sort) {
    const auto t_bytes = static_cast<std::int64_t>(plan.bytes());
    if (ranges_overlap(temp, t_bytes, w, w_bytes) || (wanda && ranges_overlap(temp, t_bytes, h, h_bytes)) ||
        ranges_overlap(temp, t_bytes, out, out_bytes) || ranges_overlap(temp, t_bytes, mask, mask_bytes))
      return Status::invalid_argument("temp", "must not overlap w, h, out_weights or mask");
  }
  LLMK_RETURN_IF_ERROR(check_device_pointer("w", w));
  if (wanda) LLMK_RETURN_IF_ERROR(check_device_pointer("h", h));
  LLMK_RETURN_IF_ERROR(check_device_pointer("out_weights", out));
  LLMK_RETURN_IF_ERROR(check_device_pointer("mask", mask));

  // Input values (the host entries' checks; only the diagonal of h is read here).
  unsigned* flags = reinterpret_cast<unsigned*>(out);
  LLMK_RETURN_IF_ERROR(zero_word(flags, stream));
  const std::int64_t items = rows * cols > cols ? rows * cols : cols;
  const unsigned check_blocks =
      static_cast<unsigned>(std::min<std::int64_t>((items + kThreads * 8 - 1) / (kThreads * 8), 1024));
  LLMK_RETURN_IF_ERROR(launch(check_kernel<float>, dim3(check_blocks), dim3(kThreads), 0, stream, w, rows,
                              cols, ldw, wanda ? h : nullptr, ldh, flags));
  unsigned bad = 0;
  LLMK_RETURN_IF_ERROR(read_word(flags, &bad, stream));
  if (bad & kBadW) return Status::invalid_argument("w", "must be finite (a non-finite element was found)");
  if (bad & kBadHFinite)
    return Status::invalid_argument("h", "must have a finite diagonal (a non-finite h[c, c] was found)");
  if (bad & kBadHNegative)
    return Status::invalid_argument("h", "must have a non-negative diagonal (a negative h[c, c] was found)");

  const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>(rows, 65535)));
  const float* hh = wanda ? h : nullptr;
  if (opt.prune_n > 0) {
    if (wanda)
      return launch(nm_kernel<true>, grid, dim3(kThreads), 0, stream, w, rows, cols, ldw, hh, ldh,
                    opt.prune_n, opt.prune_m, out, ld_out, mask, ld_mask);
    return launch(nm_kernel<false>, grid, dim3(kThreads), 0, stream, w, rows, cols, ldw, hh, ldh, opt.prune_n,
                  opt.prune_m, out, ld_out, mask, ld_mask);
  }
  if (plan.device_sort)
    return wanda ? prune_device_sort<true>(w, rows, cols, ldw, hh, ldh, plan, temp, out, ld_out, mask,
                                           ld_mask, stream)
                 : prune_device_sort<false>(w, rows, cols, ldw, hh, ldh, plan, temp, out, ld_out, mask,
                                            ld_mask, stream);
  // Per row: one candidate set per row, a CTA each; per layer: one set, one CTA (file comment).
  const std::int64_t segment_rows = plan.segments == 1 ? rows : 1;
  const dim3 ugrid = segment_rows > 1 ? dim3(1) : grid;
  const std::size_t smem = sizeof(select_detail::SelectSmem);
  // The threshold rule: the (rank + 1)-th lowest key and every key at or below it.
  const std::int64_t k = plan.threshold ? plan.k + 1 : plan.k;
  if (wanda)
    return launch(unstructured_kernel<true>, ugrid, dim3(kThreads), smem, stream, w, rows, cols, ldw, hh, ldh,
                  segment_rows, k, plan.threshold, out, ld_out, mask, ld_mask);
  return launch(unstructured_kernel<false>, ugrid, dim3(kThreads), smem, stream, w, rows, cols, ldw, hh, ldh,
                segment_rows, k, plan.threshold, out, ld_out, mask, ld_mask);
}

// The entries' common frame: plan (and the size query), then the run. Without a workspace, a set that kAuto
// sorts on the whole GPU (a per-layer set) gets storage allocated here (device_malloc, freed after
// synchronizing `stream`); when that allocation fails, the one-CTA select (the same bits, slower).
inline Status prune_entry(void* temp, std::size_t* temp_bytes, bool has_workspace, PruneGpuSelect select,
                          const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                          const float* h, std::int64_t ldh, bool wanda, const PruneOptions& opt, float* out,
                          std::int64_t ld_out, std::uint8_t* mask, std::int64_t ld_mask,
                          cudaStream_t stream) {
  if (has_workspace && temp_bytes == nullptr)
    return Status::invalid_argument("temp_bytes", "must not be null");
  PrunePlan plan;
  LLMK_RETURN_IF_ERROR(plan_prune(rows, cols, wanda, opt, select, has_workspace, &plan));
  if (!has_workspace) {
    PrunePlan sorted;
    LLMK_RETURN_IF_ERROR(plan_prune(rows, cols, wanda, opt, PruneGpuSelect::kAuto, true, &sorted));
    if (sorted.device_sort) {
      bool allocated = false;
      const Status s = with_device_scratch(
          sorted.bytes(), stream,
          [&](void* own) {
            return prune_gpu(w, rows, cols, ldw, h, ldh, wanda, opt, sorted, own, out, ld_out, mask, ld_mask,
                             stream);
          },
          &allocated);
      if (allocated) return s;  // else the one-CTA select below: the same bits
    }
  }
  if (has_workspace) {
    if (temp == nullptr) {
      *temp_bytes = plan.bytes();
      return {};
    }
    if (*temp_bytes < plan.bytes())
      return Status::invalid_argument(
          "temp_bytes", str_cat("must be >= the size query's ", plan.bytes(), " bytes, got ", *temp_bytes));
    if (reinterpret_cast<std::uintptr_t>(temp) % 16 != 0)
      return Status::invalid_argument("temp", "must be 16-byte aligned");
  }
  return prune_gpu(w, rows, cols, ldw, h, ldh, wanda, opt, plan, temp, out, ld_out, mask, ld_mask, stream);
}

}  // namespace prune_gpu_detail

/// Wanda pruning on device memory: the host wanda_prune's selection exactly (score |w_rc| * sqrt(H_cc) in
/// fp64, per-row count llround(sparsity * cols) or n:m with m <= 32, ties to the lower column index), so
/// out_weights and mask are bit for bit the host's PruneResult::weights / mask. w [rows, cols] (ldw), h
/// [cols, cols] (ldh; only its diagonal is read and checked: finite, >= 0), out_weights [rows, cols] (ld_out:
/// w where kept, 0 where pruned), mask [rows, cols] (ld_mask, 1 = kept); all device memory, outputs must not
/// overlap inputs; padding is neither read nor written. Syncs `stream` once (input validation); the pruning
/// kernels are then queued on it. No loss: compute 1/2 tr(E H E^T) with the backend's GEMM if needed. This
/// form takes no workspace: per-row sets use the CTA select (PruneGpuSelect::kBlockSelect); a
/// PruneScope::kPerLayer set is sorted over the whole GPU as kAuto does, in storage this call allocates
/// (about rows * cols * 29 bytes, llmk::device_malloc) and frees after synchronizing `stream` a second time
/// (if the allocation fails, one CTA selects it: the same bits, about 58x slower on an H100 at 4096 x 4096).
/// The workspace form below does neither. Errors name: rows, cols, w, ldw, h, ldh, sparsity, prune_n,
/// prune_m, scope, out_weights, ld_out, mask, ld_mask.
///   llmk::obs::PruneOptions opt;  opt.sparsity = 0.5;
///   llmk::Status s = llmk::obs::wanda_prune_gpu(d_w, rows, cols, cols, d_h, cols, opt, d_out, cols, d_mask,
///                                               cols, stream);
inline Status wanda_prune_gpu(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                              const float* h, std::int64_t ldh, const PruneOptions& opt, float* out_weights,
                              std::int64_t ld_out, std::uint8_t* mask, std::int64_t ld_mask,
                              cudaStream_t stream) {
  return prune_gpu_detail::prune_entry(nullptr, nullptr, false, PruneGpuSelect::kBlockSelect, w, rows, cols,
                                       ldw, h, ldh, true, opt, out_weights, ld_out, mask, ld_mask, stream);
}

/// Wanda pruning with caller-owned temporary storage (CUB's protocol: temp == nullptr writes the size to
/// *temp_bytes and runs nothing; then call again with at least that many bytes of 16-byte aligned device
/// memory that overlaps no argument). `select` chooses the selection (PruneGpuSelect; the default kAuto
/// sorts per-layer sets over the whole GPU with CUB and keeps the CTA select per row); the results are the
/// same bits whatever it says. Workspace of kDeviceSort: about rows * cols * 29 bytes (keys, keep flags,
/// positions, sorted keys, CUB's storage). Errors: those of the form above, plus temp_bytes, temp, select.
///   std::size_t bytes = 0;
///   llmk::obs::wanda_prune_gpu(nullptr, &bytes, d_w, rows, cols, cols, d_h, cols, opt, d_out, cols, d_mask,
///                              cols, stream);
///   llmk::DeviceBuffer<unsigned char> temp(bytes);
///   llmk::Status s = llmk::obs::wanda_prune_gpu(temp.data(), &bytes, d_w, rows, cols, cols, d_h, cols, opt,
///                                               d_out, cols, d_mask, cols, stream);
inline Status wanda_prune_gpu(void* temp, std::size_t* temp_bytes, const float* w, std::int64_t rows,
                              std::int64_t cols, std::int64_t ldw, const float* h, std::int64_t ldh,
                              const PruneOptions& opt, float* out_weights, std::int64_t ld_out,
                              std::uint8_t* mask, std::int64_t ld_mask, cudaStream_t stream,
                              PruneGpuSelect select = PruneGpuSelect::kAuto) {
  return prune_gpu_detail::prune_entry(temp, temp_bytes, true, select, w, rows, cols, ldw, h, ldh, true, opt,
                                       out_weights, ld_out, mask, ld_mask, stream);
}

/// Magnitude pruning on device memory: the host magnitude_prune's selection exactly (score |w_rc|), outputs
/// and rules as wanda_prune_gpu without h. Magnitude's default scope is the whole layer, which this form
/// sorts over the whole GPU in storage it allocates and frees (as wanda_prune_gpu's form without workspace
/// says; on an H100 at 4096 x 4096 the sort took 1.17 ms where one CTA took 67.9 ms); the workspace form
/// below takes the storage from the caller. Errors name: rows, cols, w, ldw, sparsity, prune_n, prune_m,
/// scope, out_weights, ld_out, mask, ld_mask.
///   llmk::obs::PruneOptions opt;  opt.prune_n = 2;  opt.prune_m = 4;
///   llmk::Status s = llmk::obs::magnitude_prune_gpu(d_w, rows, cols, cols, opt, d_out, cols, d_mask, cols,
///                                                   stream);
inline Status magnitude_prune_gpu(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw,
                                  const PruneOptions& opt, float* out_weights, std::int64_t ld_out,
                                  std::uint8_t* mask, std::int64_t ld_mask, cudaStream_t stream) {
  return prune_gpu_detail::prune_entry(nullptr, nullptr, false, PruneGpuSelect::kBlockSelect, w, rows, cols,
                                       ldw, nullptr, 0, false, opt, out_weights, ld_out, mask, ld_mask,
                                       stream);
}

/// Magnitude pruning with caller-owned temporary storage: the workspace protocol and `select` of the Wanda
/// form above (kAuto: the default per-layer selection by CUB's radix sort over the whole GPU).
///   std::size_t bytes = 0;
///   llmk::obs::magnitude_prune_gpu(nullptr, &bytes, d_w, rows, cols, cols, opt, d_out, cols, d_mask, cols,
///                                  stream);
///   llmk::DeviceBuffer<unsigned char> temp(bytes);
///   llmk::Status s = llmk::obs::magnitude_prune_gpu(temp.data(), &bytes, d_w, rows, cols, cols, opt, d_out,
///                                                   cols, d_mask, cols, stream);
inline Status magnitude_prune_gpu(void* temp, std::size_t* temp_bytes, const float* w, std::int64_t rows,
                                  std::int64_t cols, std::int64_t ldw, const PruneOptions& opt,
                                  float* out_weights, std::int64_t ld_out, std::uint8_t* mask,
                                  std::int64_t ld_mask, cudaStream_t stream,
                                  PruneGpuSelect select = PruneGpuSelect::kAuto) {
  return prune_gpu_detail::prune_entry(temp, temp_bytes, true, select, w, rows, cols, ldw, nullptr, 0, false,
                                       opt, out_weights, ld_out, mask, ld_mask, stream);
}

}  // namespace llmk::obs
