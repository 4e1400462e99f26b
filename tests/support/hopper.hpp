// tests/support/hopper.hpp: what the Hopper tests share: whether the device runs sm_90 code (the simulator
// always does), and the shared-window address of a pointer (llmk::arch::sm90::shared_address) re-exported for
// kernels.
#pragma once

#include "llmk/arch/sm90/sm90.cuh"
#include "llmk/config.cuh"

namespace llmk::test {

/// True in the simulator and on an sm_90+ GPU; the Hopper tests return early elsewhere.
inline bool hopper_available() {
#if defined(LLMK_CUDA)
  int dev = 0, major = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  return major >= 9;
#else
  return true;
#endif
}

}  // namespace llmk::test
