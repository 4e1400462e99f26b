// Planted bug: a thread reads the destination of its cp.async without cp.async.wait_group. In the simulator
// the destination holds poison until the wait, so the result is NaN instead of passing by luck.
#include <cmath>
#include <cstdio>
#include <vector>

#include "llmk/arch/cp_async.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

__global__ void copy_then_read_without_wait(const float* src, float* out) {
  float* tile = reinterpret_cast<float*>(llmk::dynamic_smem());
  const int t = static_cast<int>(threadIdx.x);
  llmk::arch::cp_async_cg16(&tile[4 * t], &src[4 * t]);
  llmk::arch::cp_async_commit();
  // missing: llmk::arch::cp_async_wait<0>();
  out[t] = tile[4 * t] + tile[4 * t + 3];
}

int main() {
  std::vector<float> src(128, 1.0f);
  llmk::DeviceBuffer<float> d_src(src), out(32);
  llmk::Status s =
      llmk::launch(copy_then_read_without_wait, dim3(1), dim3(32), 512, nullptr, d_src.data(), out.data());
  if (!s.ok()) {
    std::printf("launch failed: %s\n", s.message().c_str());
    return 2;
  }
  int poisoned = 0;
  for (float v : out.to_host()) poisoned += std::isnan(v) ? 1 : 0;
  std::printf(
      "%d of 32 results are poison (NaN): the read of the cp.async destination came before its wait\n",
      poisoned);
  return poisoned == 32 ? 1 : 0;
}
