// Planted kernels for the static performance gates' self-test (scripts/perf/static_gates.sh --self-test).
// Compiled by nvcc only, in the same build as the tests (an object library: the gates read its object like
// any other), never launched. Namespace llmk_planted:: keeps them out of the real gate run.
//   pipelined_mma<false>: a cp.async ring feeding mma.sync; the gates must pass it.
//   pipelined_mma<true>: the same loop plus one plain global load (a per-tile scale) used at once; the gates
//     must report the LDG in the pipelined main loop.
//   spilling: more live values than its register cap (__maxnreg__); the gates must report the spill.
#include <cstdint>

#include "llmk/arch/cp_async.cuh"
#include "llmk/arch/mma.cuh"

namespace llmk_planted {

constexpr int kStages = 2;
constexpr int kTileBytes = 16 * 32;  // one 16 x 16 fp16 tile: 32 threads x 16 bytes

template <bool kPlantLdg>
__global__ void __launch_bounds__(32)
    pipelined_mma(const uint4* a, const float* scales, float* out, int tiles) {
  __shared__ uint4 ring[kStages][kTileBytes / 16];
  const int lane = threadIdx.x;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  llmk::arch::cp_async_cg16(&ring[0][lane], a + lane);
  llmk::arch::cp_async_commit();
  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) llmk::arch::cp_async_cg16(&ring[(t + 1) % kStages][lane], a + (t + 1) * 32 + lane);
    llmk::arch::cp_async_commit();
    llmk::arch::cp_async_wait<1>();
    __syncthreads();
    const uint4 v = ring[t % kStages][lane];
    const std::uint32_t fa[4] = {v.x, v.y, v.z, v.w};
    const std::uint32_t fb[2] = {v.y, v.x};
    float d[4];
    llmk::arch::MMA_16x8x16_F32F16F16F32::fma(d, fa, fb, acc);
    float s = 1.0f;
    if constexpr (kPlantLdg) s = scales[t];  // the planted bug: a global load's latency exposed every tile
    for (int i = 0; i < 4; ++i) acc[i] = d[i] * s;
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) out[lane * 4 + i] = acc[i];
}

// 64 values that are all live until the end, under a 32-register cap.
__global__ void __maxnreg__(32) spilling(const float* in, float* out) {
  float v[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) v[i] = in[threadIdx.x + 32 * i];
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < 64; ++i)
#pragma unroll
    for (int j = i + 1; j < 64; j += 7) acc += v[i] * v[j];
#pragma unroll
  for (int i = 0; i < 64; ++i) out[threadIdx.x + 32 * i] = v[i] + acc;
}

template __global__ void pipelined_mma<false>(const uint4*, const float*, float*, int);
template __global__ void pipelined_mma<true>(const uint4*, const float*, float*, int);

}  // namespace llmk_planted
