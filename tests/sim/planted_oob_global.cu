// Planted bug (ASan build): the last thread writes one element past the end of a global buffer.
#include <cstdio>

#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"

__global__ void write_one_past_the_end(float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i <= n) out[i] = 1.0f;  // line 9: should be i < n
}

int main() {
  const int n = 100;
  llmk::DeviceBuffer<float> out(n);
  llmk::Status s = llmk::launch(write_one_past_the_end, dim3(4), dim3(32), 0, nullptr, out.data(), n);
  std::printf("launch: %s\n", s.ok() ? "ok" : s.message().c_str());
  return 0;
}
