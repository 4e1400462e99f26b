// llmk/core/hopper_support.cuh: whether llmk's Hopper kernels (wgmma, setmaxnreg: sm_90a code) can run on
// the current device, the question every launcher with an sm_90 path asks before dispatching to it.
//
//   if (llmk::sm90a_runnable<MyKernelTag>()) { /* launch the wgmma kernel */ } else { /* mma.sync kernel */ }
//
// True on an sm_90 device running an sm_90a image of the calling translation unit, and in the simulator
// unless LLMK_SIM_ARCH names an older device. A plain sm_90 image (no `a`) has the same binary version as an
// sm_90a one, so the answer comes from two probe kernels of the same fatbin (Tag instantiates them where
// the caller's kernels are) whose static shared memory differs in an sm_90a image only: cudaFuncGetAttributes
// reports the sizes of the image the device loads. Nothing is launched, allocated or copied, so the first
// call may come while a stream is being captured into a CUDA graph (any capture mode) or while another thread
// captures one; until 2026-11-29 the probe was launched (cudaMalloc, a launch on the legacy stream, a
// synchronous copy), which invalidated such a capture and cached "no Hopper" for the rest of the process. An
// answer is cached per Tag once the query succeeds; a failed query is not cached.
#pragma once

#include <atomic>

#include "llmk/arch/sm90/sm90.cuh"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"

namespace llmk {

#if defined(LLMK_CUDA)
namespace detail {

// Never launched: their attributes are the answer. The marker kernel holds 16 words of static shared memory
// in an sm_90a image (wgmma) and 8 in any other; the reference kernel holds 8 everywhere. An image's reported
// size may include a reservation of the architecture (ptxas reports 1024 + the array for sm_90 and sm_90a,
// not for sm_80), so the answer is the difference of the two, not a size.
template <class Tag, bool kMarker>
__global__ void sm90a_probe_kernel(int* out) {
  constexpr int kWords = kMarker && arch::sm90::kHasWgmma ? 16 : 8;
  __shared__ int words[kWords];  // indexed by thread, so kept whole
  words[threadIdx.x % kWords] = static_cast<int>(threadIdx.x);
  __syncthreads();
  if (out != nullptr) *out = words[(threadIdx.x + 1) % kWords];
}

// The static shared memory cudaFuncGetAttributes reports for `kernel` on the current device, or -1 (no image
// for it: the error is cleared, not left for the caller's next check).
inline long long static_shared_bytes(void (*kernel)(int*)) {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return static_cast<long long>(attr.sharedSizeBytes);
}

}  // namespace detail
#endif

/// See the file comment.
template <class Tag>
bool sm90a_runnable() {
  if (device_arch() != 900) return false;
#if defined(LLMK_CUDA)
  static std::atomic<int> cached{-1};  // -1: not asked yet (or the query failed); 0 / 1: the answer
  const int known = cached.load(std::memory_order_relaxed);
  if (known >= 0) return known == 1;
  const long long marker = detail::static_shared_bytes(detail::sm90a_probe_kernel<Tag, true>);
  const long long reference = detail::static_shared_bytes(detail::sm90a_probe_kernel<Tag, false>);
  if (marker < 0 || reference < 0) return false;
  const int answer = marker > reference ? 1 : 0;
  cached.store(answer, std::memory_order_relaxed);
  return answer == 1;
#else
  return true;
#endif
}

}  // namespace llmk
