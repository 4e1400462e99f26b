// llmk/core/hopper_support.cuh: whether llmk's Hopper kernels (wgmma, setmaxnreg: sm_90a code) can run on
// the current device, the question every launcher with an sm_90 path asks before dispatching to it.
//
//   if (llmk::sm90a_runnable<MyKernelTag>()) { /* launch the wgmma kernel */ } else { /* mma.sync kernel */ }
//
// True on an sm_90 device running an sm_90a image of the calling translation unit, and in the simulator
// unless LLMK_SIM_ARCH names an older device. A plain sm_90 image (no `a`) has the same binary version as an
// sm_90a one, so the first call asks the device itself with a one-thread probe kernel from the same fatbin
// (Tag instantiates it where the caller's kernels are); the answer is cached per Tag.
#pragma once

#include "llmk/arch/sm90/sm90.cuh"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"

namespace llmk {

namespace detail {
// Writes 1 where the code the device runs has wgmma (an sm_90a image), 0 elsewhere.
template <class Tag>
__global__ void sm90a_probe_kernel(int* out) {
  *out = arch::sm90::kHasWgmma ? 1 : 0;
}
}  // namespace detail

/// See the file comment.
template <class Tag>
bool sm90a_runnable() {
  if (device_arch() != 900) return false;
#if defined(LLMK_CUDA)
  static const bool has = [] {
    int* flag = nullptr;
    if (cudaMalloc(&flag, sizeof(int)) != cudaSuccess) return false;
    int host = 0;
    const bool ok = launch(detail::sm90a_probe_kernel<Tag>, dim3(1), dim3(1), 0, nullptr, flag).ok() &&
                    cudaMemcpy(&host, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(flag);
    return ok && host == 1;
  }();
  return has;
#else
  return true;
#endif
}

}  // namespace llmk
