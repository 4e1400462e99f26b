// Planted bug (TSan build): lanes of one warp exchange values through shared memory between two __syncwarp
// calls, but the second exchange lacks its own __syncwarp: lane l overwrites the slot lane l-1 is reading.
#include <cstdio>

#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

__global__ void warp_exchange_missing_syncwarp(int* out) {
  int* s = reinterpret_cast<int*>(llmk::dynamic_smem());
  const unsigned lane = threadIdx.x;
  s[lane] = static_cast<int>(lane);
  __syncwarp();
  const int next = s[(lane + 1) % 32];  // line 14: the read
  s[lane] = next + 100;                 // line 15: the racing write (a __syncwarp is missing above)
  __syncwarp();
  out[lane] = s[(lane + 1) % 32];
}

int main() {
  llmk::DeviceBuffer<int> out(32);
  llmk::Status s =
      llmk::launch(warp_exchange_missing_syncwarp, dim3(1), dim3(32), 32 * sizeof(int), nullptr, out.data());
  std::printf("launch: %s\n", s.ok() ? "ok" : s.message().c_str());
  return 0;
}
