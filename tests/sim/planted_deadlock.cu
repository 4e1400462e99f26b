// Planted bug: a __syncthreads inside a branch that diverges in block (1,0,0) only. The simulator must report
// a deadlock naming that block, the waiting threads and the barrier's line.
#include <cstdio>

#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"

__global__ void divergent_barrier(int* out) {
  if (blockIdx.x == 1 && threadIdx.x >= 40) return;  // threads 40..63 of block 1 leave early
  __syncthreads();                                   // line 10
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

int main() {
  llmk::DeviceBuffer<int> out(4 * 64);
  llmk::Status s = llmk::launch(divergent_barrier, dim3(4), dim3(64), 0, nullptr, out.data());
  std::printf("%s\n", s.ok() ? "launch succeeded (the planted bug was NOT caught)" : s.message().c_str());
  return s.ok() ? 0 : 1;
}
