// Planted bug (TSan build): warp 1 reads a tile that a bulk copy (TMA's non-tensor form) is landing, after a
// __syncthreads but without waiting on the copy's mbarrier. The simulator lands the copy from the scheduler
// and gives happens-before only through the mbarrier phase, so TSan reports the read racing with the landing
// write.
#include <cstdio>
#include <vector>

#include "llmk/arch/sm90/bulk_copy.cuh"
#include "llmk/arch/sm90/mbarrier.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

struct Storage {
  alignas(128) float tile[64];
  std::uint64_t bar;
};

__global__ void reads_tile_without_waiting(const float* src, float* out) {
  using namespace llmk::arch::sm90;
  Storage& s = llmk::shared_storage<Storage>();
  if (threadIdx.x == 0) {
    mbarrier_init(&s.bar, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(&s.bar, sizeof(s.tile));
    bulk_copy_g2s(s.tile, src, sizeof(s.tile), &s.bar);
  }
  __syncthreads();
  if (threadIdx.x >= 32) out[threadIdx.x - 32] = s.tile[threadIdx.x - 32];  // BUG: no mbarrier wait
  if (threadIdx.x == 0) mbarrier_wait_parity(&s.bar, 0);
}

int main() {
  std::vector<float> src(64, 1.0f);
  llmk::DeviceBuffer<float> d_src(src), out(32);
  llmk::Status s = llmk::launch(reads_tile_without_waiting, dim3(1), dim3(64), sizeof(Storage), nullptr,
                                d_src.data(), out.data());
  std::printf("launch: %s\n", s.ok() ? "ok" : s.message().c_str());
  return 0;
}
