// Planted bug: all 32 lanes call a shuffle whose mask omits lane 9. The simulator must report the mask, the
// lane and the line.
#include <cstdio>

#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"

__global__ void butterfly_with_bad_mask(float* out) {
  float v = static_cast<float>(threadIdx.x);
  v += __shfl_xor_sync(0xfffffdffu, v, 16);  // line 10: lane 9 participates but is not in the mask
  out[threadIdx.x] = v;
}

int main() {
  llmk::DeviceBuffer<float> out(32);
  llmk::Status s = llmk::launch(butterfly_with_bad_mask, dim3(1), dim3(32), 0, nullptr, out.data());
  std::printf("%s\n", s.ok() ? "launch succeeded (the planted bug was NOT caught)" : s.message().c_str());
  return s.ok() ? 0 : 1;
}
