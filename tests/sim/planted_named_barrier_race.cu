// Planted bug (TSan build): warpgroup 0 hands a shared buffer to warpgroup 1 through a named barrier but
// writes part of it after its bar.arrive. The arrival releases only the writes before it, so ThreadSanitizer
// must report the late write against warpgroup 1's read (the simulator's happens-before edges are exact).
#include <cstdio>

#include "llmk/arch/named_barrier.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

__global__ void writes_after_arrive(int* out) {
  int* s = reinterpret_cast<int*>(llmk::dynamic_smem());
  const int t = static_cast<int>(threadIdx.x);
  if (t < 128) {
    s[t] = t;
    llmk::arch::named_barrier_arrive(3, 256);
    s[128 + t] = t;  // line 17: BUG: after the arrival
  } else {
    llmk::arch::named_barrier_sync(3, 256);
    out[t - 128] = s[t - 128] + s[t];  // line 20: the racing read
  }
}

int main() {
  llmk::DeviceBuffer<int> out(128);
  llmk::Status s =
      llmk::launch(writes_after_arrive, dim3(1), dim3(256), 256 * sizeof(int), nullptr, out.data());
  std::printf("launch: %s\n", s.ok() ? "ok" : s.message().c_str());
  return 0;  // TSan's exit code (66) reports the race
}
