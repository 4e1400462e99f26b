// Planted bug (plain build): a warp-specialized ring with a "full" flag per step but no "empty" handshake.
// Warp 0 produces step k into slot k % 4 and publishes it; warp 1 waits for the flag and reads the slot.
// Nothing stops the producer from running more than 4 steps ahead and overwriting a slot the consumer has not
// read. Round-robin scheduling alone keeps the two warps within a step of each other, so only the simulator's
// warp hold-back (one warp kept back for up to 16 rounds) exposes it: some of the launches below must see a
// slot that already holds a later step.
#include <cstdio>
#include <vector>

#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

struct Ring {
  int slot[4];
  int published;
};

__global__ void producer_without_empty_barrier(int* wrong, int steps) {
  Ring& ring = llmk::shared_storage<Ring>();
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) ring.published = -1;
  __syncthreads();
  for (int k = 0; k < steps; ++k) {
    if (warp == 0) {
      if (lane == 0) {
        ring.slot[k % 4] = k;  // BUG: slot k % 4 may still hold step k - 4, unread
        atomicExch(&ring.published, k);
      }
    } else if (lane == 0) {
      while (atomicAdd(&ring.published, 0) < k) __nanosleep(32);
      if (ring.slot[k % 4] != k) atomicAdd(wrong, 1);
    }
    __syncwarp();
  }
}

int main() {
  const int launches = 32;
  int exposed = 0;
  for (int i = 0; i < launches; ++i) {
    llmk::DeviceBuffer<int> wrong(std::vector<int>{0});
    llmk::Status s = llmk::launch(producer_without_empty_barrier, dim3(1), dim3(64), sizeof(Ring), nullptr,
                                  wrong.data(), 64);
    if (!s.ok()) {
      std::printf("launch failed: %s\n", s.message().c_str());
      return 2;
    }
    exposed += wrong.to_host()[0] > 0 ? 1 : 0;
  }
  std::printf("%d of %d launches read a slot the producer had already overwritten\n", exposed, launches);
  return exposed > 0 ? 1 : 0;
}
