// llmk/config.cuh: the one place that decides which backend a translation unit is built for.
//
// LLMK_SIM    defined by the build for the simulator backend: the host compiler compiles kernels and
//             include/llmk/sim runs them on the CPU.
// LLMK_CUDA   defined here when nvcc compiles the unit (host or device pass).
// LLMK_DEVICE_PASS  true only inside nvcc's device compilation pass (where inline PTX is legal).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(LLMK_SIM) && defined(__CUDACC__)
#error "LLMK_SIM is for the host compiler; nvcc builds the CUDA backend"
#endif

#if defined(LLMK_SIM)
#include <source_location>
#include "llmk/sim/cuda_shim.hpp"
#define LLMK_HOST_DEVICE inline
#define LLMK_DEVICE inline
#define LLMK_HOST inline
#define LLMK_FORCEINLINE inline __attribute__((always_inline))
#define LLMK_DEVICE_PASS 0
// Simulator builtins carry the caller's source location so failures name the kernel line.
#define LLMK_LOC_TAIL , ::std::source_location llmk_loc = ::std::source_location::current()
#define LLMK_LOC_ONLY ::std::source_location llmk_loc = ::std::source_location::current()
#define LLMK_LOC_FWD llmk_loc
#define LLMK_LOC_ARG , llmk_loc  // forwards the caller's location as a trailing argument
#elif defined(__CUDACC__)
#define LLMK_CUDA 1
#include <cuda_runtime.h>
#define LLMK_HOST_DEVICE __host__ __device__ __forceinline__
#define LLMK_DEVICE __device__ __forceinline__
#define LLMK_HOST __host__ inline
#define LLMK_FORCEINLINE __forceinline__
#if defined(__CUDA_ARCH__)
#define LLMK_DEVICE_PASS 1
#else
#define LLMK_DEVICE_PASS 0
#endif
#define LLMK_LOC_TAIL
#define LLMK_LOC_ONLY
#define LLMK_LOC_FWD
#define LLMK_LOC_ARG
#else
// Plain host compiler without LLMK_SIM: host-only headers (reference/, core types, host helpers)
// are usable; kernels are not.
#define LLMK_HOST_ONLY 1
#define LLMK_HOST_DEVICE inline
#define LLMK_DEVICE inline
#define LLMK_HOST inline
#define LLMK_FORCEINLINE inline
#define LLMK_DEVICE_PASS 0
#define LLMK_LOC_TAIL
#define LLMK_LOC_ONLY
#define LLMK_LOC_FWD
#define LLMK_LOC_ARG
#endif

// Target architecture of the current device pass (0 on the host and in the simulator, which
// emulates every atom regardless of architecture).
#if defined(__CUDA_ARCH__)
#define LLMK_ARCH __CUDA_ARCH__
#else
#define LLMK_ARCH 0
#endif

#define LLMK_STRINGIFY_(x) #x
#define LLMK_STRINGIFY(x) LLMK_STRINGIFY_(x)
