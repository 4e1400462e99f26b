// llmk/sim/types.hpp: the CUDA runtime types kernels and launchers name, for the simulator backend.
#pragma once

#include <cstddef>

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// Streams are accepted and ignored: every simulated launch completes before it returns.
struct CUstream_st;
using cudaStream_t = CUstream_st*;
