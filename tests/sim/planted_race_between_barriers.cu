// Planted bug (TSan build): a write-after-read hazard between two barriers. Thread t reads its neighbour's
// slot, then overwrites its own slot, which its other neighbour is reading: a __syncthreads is missing in
// between.
#include <cstdio>

#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

__global__ void shift_twice_missing_barrier(int* out) {
  int* s = reinterpret_cast<int*>(llmk::dynamic_smem());
  const unsigned t = threadIdx.x, n = blockDim.x;
  s[t] = static_cast<int>(t);
  __syncthreads();
  const int neighbour = s[(t + 1) % n];  // line 15: the read
  s[t] = 2 * neighbour;                  // line 16: the racing write (a __syncthreads is missing above)
  __syncthreads();
  out[t] = s[(t + 1) % n];
}

int main() {
  llmk::DeviceBuffer<int> out(64);
  llmk::Status s =
      llmk::launch(shift_twice_missing_barrier, dim3(1), dim3(64), 64 * sizeof(int), nullptr, out.data());
  std::printf("launch: %s\n", s.ok() ? "ok" : s.message().c_str());
  return 0;  // TSan's exit code (66) reports the race
}
