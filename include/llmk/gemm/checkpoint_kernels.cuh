// llmk/gemm/checkpoint_kernels.cuh: the device side of import_checkpoint (checkpoint.cuh): the flag bits and
// workspace header of the device contents check, its kernels (clear, check, group count), the unpack kernels
// (plain codes; scales and zero points), their grid size and the read-back of the flag word.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "llmk/config.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/gemm/checkpoint_format.cuh"
#include "llmk/quant/scheme.cuh"

namespace llmk::gemm {

namespace detail {

// Bit flags the device check ORs into the workspace's first word.
constexpr unsigned kCkptBadZero = 1u;         // 8-bit GPTQ v1 stored zero 255 (z = 256)
constexpr unsigned kCkptBadGroup = 2u;        // a g_idx entry outside [0, groups)
constexpr unsigned kCkptBadCount = 4u;        // a group without exactly G columns
constexpr unsigned kCkptActOrder = 8u;        // g_idx differs from k / G somewhere
constexpr unsigned kCkptBadScale = 16u;       // a scale that is NaN or +-Inf
constexpr int kCkptThreads = 256;             // threads per block of every kernel here
constexpr std::size_t kCkptHeaderBytes = 16;  // the flag word (padded) at the start of the workspace

// ---- device kernels (grid-stride loops, kCkptThreads threads a block) ----

// Zeroes the flag word and the group counters.
template <class Unused = void>
__global__ void __launch_bounds__(kCkptThreads)
    checkpoint_clear_kernel(unsigned* flags, int* counts, int groups) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i <= groups;
       i += static_cast<int>(gridDim.x * blockDim.x)) {
    if (i == 0)
      *flags = 0u;
    else
      counts[i - 1] = 0;
  }
}

// Contents check: item i < K checks g_idx[i] (range, counts per group, act-order); item i < groups * N
// checks the scale of (i / N, i % N) (finite) and its 8-bit v1 stored zero. s.group_size is resolved.
template <class Unused = void>
__global__ void __launch_bounds__(kCkptThreads)
    checkpoint_check_kernel(CheckpointTensors s, unsigned* flags, int* counts) {
  const int groups = s.k / s.group_size;
  const std::int64_t gidx_items = s.g_idx != nullptr ? s.k : 0;
  const bool check_zeros = s.format == CheckpointFormat::kGptqV1 && s.bits == 8 && s.qzeros != nullptr;
  const std::int64_t zero_items = check_zeros ? static_cast<std::int64_t>(groups) * s.n : 0;
  const std::int64_t scale_items = static_cast<std::int64_t>(groups) * s.n;
  const std::int64_t items = gidx_items > scale_items ? gidx_items : scale_items;
  unsigned bad = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (i < gidx_items) {
      const std::int32_t g = s.g_idx[i];
      if (g < 0 || g >= groups) {
        bad |= kCkptBadGroup;
      } else {
        atomicAdd(&counts[g], 1);
        if (g != static_cast<int>(i / s.group_size)) bad |= kCkptActOrder;
      }
    }
    if (i < scale_items && !quant::is_finite(s.scales[i].to_float())) bad |= kCkptBadScale;
    if (i < zero_items && ckpt_stored_zero(s, static_cast<int>(i / s.n), static_cast<int>(i % s.n)) == 0xFFu)
      bad |= kCkptBadZero;
  }
  if (bad != 0) atomicOr(flags, bad);
}

// One thread per group: flags a group without exactly G columns.
template <class Unused = void>
__global__ void __launch_bounds__(kCkptThreads)
    checkpoint_count_kernel(const int* counts, int groups, int group_size, unsigned* flags) {
  for (int g = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); g < groups;
       g += static_cast<int>(gridDim.x * blockDim.x))
    if (counts[g] != group_size) atomicOr(flags, kCkptBadCount);
}

// One thread per plain byte: byte (n, c) of the [N, ld] plain codes, original column order.
template <class Unused = void>
__global__ void __launch_bounds__(kCkptThreads)
    checkpoint_codes_kernel(CheckpointTensors s, std::uint8_t* plain, std::int64_t ld) {
  const std::int64_t total = static_cast<std::int64_t>(s.n) * ld;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int n = static_cast<int>(i / ld), c = static_cast<int>(i % ld);
    std::uint32_t byte;
    if (s.bits == 8) {
      byte = ckpt_code(s, n, c);
    } else {
      const std::uint32_t hi = 2 * c + 1 < s.k ? ckpt_code(s, n, 2 * c + 1) : 0u;
      byte = ckpt_code(s, n, 2 * c) | (hi << 4);
    }
    plain[i] = static_cast<std::uint8_t>(byte);
  }
}

// One thread per (group, column): the scale converted to T and the zero point z.
template <class T>
__global__ void __launch_bounds__(kCkptThreads)
    checkpoint_quant_kernel(CheckpointTensors s, T* scales, std::uint8_t* zeros) {
  const std::int64_t total = static_cast<std::int64_t>(s.k / s.group_size) * s.n;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    scales[i] = T(s.scales[i].to_float());
    if (s.qzeros != nullptr) zeros[i] = ckpt_zero(s, static_cast<int>(i / s.n), static_cast<int>(i % s.n));
  }
}

inline dim3 ckpt_grid(std::int64_t items) {
  const std::int64_t blocks = ceil_div<std::int64_t>(items < 1 ? 1 : items, kCkptThreads);
  return dim3(static_cast<unsigned>(blocks < 65535 ? blocks : 65535));
}

// Reads one word of device memory (synchronizes the stream).
inline Status ckpt_read_word(const unsigned* p, unsigned* value, cudaStream_t stream) {
#if defined(LLMK_CUDA)
  cudaError_t e = cudaMemcpyAsync(value, p, sizeof(unsigned), cudaMemcpyDeviceToHost, stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaMemcpyAsync", cudaGetErrorString(e));
  e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaStreamSynchronize", cudaGetErrorString(e));
#else
  (void)stream;
  std::memcpy(value, p, sizeof(unsigned));
#endif
  return {};
}

}  // namespace detail

}  // namespace llmk::gemm
