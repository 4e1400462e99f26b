// Planted bug (plain build): a double-buffered cp.async pipeline issues the copy into the next slot BEFORE
// the barrier that tells it the other warp has finished reading that slot. The simulator lets warps run ahead
// of each other, so the slower warp reads the slot after the faster warp's cp.async poisoned it: NaN in the
// result.
#include <cmath>
#include <cstdio>
#include <vector>

#include "llmk/arch/cp_async.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

struct Ring {
  float slot[2][64 * 4];
};

__global__ void ring_sum_reuses_slot_too_early(const float* src, float* out, int tiles) {
  Ring& ring = llmk::shared_storage<Ring>();
  const int t = static_cast<int>(threadIdx.x);
  llmk::arch::cp_async_cg16(&ring.slot[0][4 * t], &src[4 * t]);
  llmk::arch::cp_async_commit();
  float acc = 0.0f;
  for (int i = 0; i < tiles; ++i) {
    if (i + 1 < tiles)  // BUG: this slot was read in iteration i - 1 and the barrier below comes too late
      llmk::arch::cp_async_cg16(&ring.slot[(i + 1) % 2][4 * t], &src[(i + 1) * 256 + 4 * t]);
    llmk::arch::cp_async_commit();
    llmk::arch::cp_async_wait<1>();
    __syncthreads();
    acc += ring.slot[i % 2][(4 * t + 128) % 256];  // an element the other warp copied
  }
  out[t] = acc;
}

int main() {
  const int tiles = 32;
  std::vector<float> src(static_cast<std::size_t>(tiles) * 256, 1.0f);
  llmk::DeviceBuffer<float> d_src(src), out(64);
  llmk::Status s = llmk::launch(ring_sum_reuses_slot_too_early, dim3(1), dim3(64), sizeof(Ring), nullptr,
                                d_src.data(), out.data(), tiles);
  if (!s.ok()) {
    std::printf("launch failed: %s\n", s.message().c_str());
    return 2;
  }
  int poisoned = 0;
  for (float v : out.to_host()) poisoned += std::isnan(v) ? 1 : 0;
  std::printf("%d of 64 results are poison (NaN): a slot was overwritten while another warp still read it\n",
              poisoned);
  return poisoned > 0 ? 1 : 0;
}
