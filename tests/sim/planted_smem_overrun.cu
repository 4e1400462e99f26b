// Planted bug (ASan build): a kernel indexes past the end of its dynamic shared-memory arena.
#include <cstdio>

#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

__global__ void overrun_shared(float* out) {
  float* s = reinterpret_cast<float*>(llmk::dynamic_smem());
  s[threadIdx.x + 1] = 2.0f;  // line 10: thread 63 writes s[64], one past the 64-float arena
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];
}

int main() {
  llmk::DeviceBuffer<float> out(64);
  llmk::Status s = llmk::launch(overrun_shared, dim3(2), dim3(64), 64 * sizeof(float), nullptr, out.data());
  std::printf("launch: %s\n", s.ok() ? "ok" : s.message().c_str());
  return 0;
}
