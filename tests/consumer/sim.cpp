// Simulator-backend consumer of llmk: this translation unit is built by the host compiler with LLMK_SIM
// defined (llmk::sim adds it), so the CUDA spellings (__global__, threadIdx, ...) come from the simulator's
// shim and llmk::launch runs the grid on the CPU.
#include <llmk/config.cuh>
#include <llmk/core/launch.cuh>
#include <llmk/core/numeric.cuh>

#include <cstdio>

#ifndef LLMK_SIM
#error "llmk::sim must define LLMK_SIM"
#endif

__global__ void scale_kernel(float* data, float factor, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] = float(llmk::half(data[i] * factor));
}

int main() {
  constexpr int n = 100;
  float data[n];
  for (int i = 0; i < n; ++i) data[i] = float(i);
  const llmk::Status status =
      llmk::launch(scale_kernel, dim3((n + 63) / 64), dim3(64), 0, cudaStream_t{}, data, 0.5f, n);
  if (!status.ok()) {
    std::printf("consumer_sim: FAILED: launch: %s\n", status.message().c_str());
    return 1;
  }
  for (int i = 0; i < n; ++i) {
    if (data[i] != 0.5f * float(i)) {
      std::printf("consumer_sim: FAILED: data[%d] = %g\n", i, double(data[i]));
      return 1;
    }
  }
  std::printf("consumer_sim: a kernel ran in the simulator: OK\n");
  return 0;
}
