// llmk/core/smem.cuh: a kernel's shared memory is one arena in dynamic shared memory (design rule 4).
//
// The kernel describes its whole shared memory as one struct (tiles, pipeline stages, scratch) and gets it
// with shared_storage<T>(); the launcher passes sizeof(T) as the dynamic shared-memory size. In the simulator
// that arena is a per-block heap allocation poisoned at block start, so stale reads and overruns show up.
#pragma once

#include <cstddef>
#include <type_traits>

#include "llmk/config.cuh"

namespace llmk {

/// Start of the block's dynamic shared memory (128-byte aligned); shared_storage<T>() gives a typed view.
///   unsigned char* smem = llmk::dynamic_smem();
LLMK_DEVICE unsigned char* dynamic_smem() {
#if defined(LLMK_SIM)
  return sim::dynamic_shared_base();
#elif defined(LLMK_CUDA)
  extern __shared__ __align__(128) unsigned char llmk_dynamic_smem[];
  return llmk_dynamic_smem;
#else
  return nullptr;
#endif
}

/// The block's shared memory viewed as `T`. Launch with at least sizeof(T) bytes of dynamic shared memory.
///
///   struct GemmSmem { half a[2][64 * 40]; half b[2][32 * 72]; };
///   __global__ void k(...) { GemmSmem& smem = llmk::shared_storage<GemmSmem>(); ... }
///   llmk::launch(k, grid, block, sizeof(GemmSmem), stream, ...);
template <class T>
LLMK_DEVICE T& shared_storage(LLMK_LOC_ONLY) {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                "shared storage must be a trivial aggregate: it is never constructed or destroyed");
  static_assert(alignof(T) <= 128, "shared storage alignment above 128 bytes is not provided");
#if defined(LLMK_SIM)
  if (sim::dynamic_shared_size() < sizeof(T))
    sim::fail("shared_storage<T>: the launch provided " + std::to_string(sim::dynamic_shared_size()) +
                  " bytes of dynamic shared memory, T needs " + std::to_string(sizeof(T)),
              LLMK_LOC_FWD);
#endif
  return *reinterpret_cast<T*>(dynamic_smem());
}

}  // namespace llmk
