// Planted bug (TSan build): a shared-memory write and another thread's read with no __syncthreads between
// them. The test passes when ThreadSanitizer reports the race at the two kernel lines below.
#include <cstdio>

#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

__global__ void neighbour_sum_missing_barrier(int* out) {
  int* s = reinterpret_cast<int*>(llmk::dynamic_smem());
  s[threadIdx.x] = static_cast<int>(threadIdx.x);        // line 11: the write
  out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];  // line 12: the racing read (barrier missing)
}

int main() {
  llmk::DeviceBuffer<int> out(64);
  llmk::Status s =
      llmk::launch(neighbour_sum_missing_barrier, dim3(1), dim3(64), 64 * sizeof(int), nullptr, out.data());
  std::printf("launch: %s\n", s.ok() ? "ok" : s.message().c_str());
  return 0;  // TSan's exit code (66) reports the race
}
