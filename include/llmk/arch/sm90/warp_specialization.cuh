// llmk/arch/sm90/warp_specialization.cuh: the instructions warp-specialized Hopper kernels are built from.
//
//   elect_one(mask)            elect.sync (sm_90): true in exactly one lane of `mask` (the same lane in every
//                              lane's view; the simulator elects the lowest); every lane of `mask` must call
//                              it
//   setmaxnreg_inc<N>()        setmaxnreg.inc.sync.aligned.u32 N (sm_90a): raise this warpgroup's per-thread
//   setmaxnreg_dec<N>()        register budget to / lower it to N (24..256, a multiple of 8); all 128 threads
//                              of the warpgroup execute the same instruction (the simulator checks that and
//                              the range; registers themselves are not modelled)
//   warpgroup_sync()           bar.sync 1 + w, 128 (named barrier of warpgroup w = threadIdx.x / 128): a
//                              __syncthreads for the caller's 4 warps only (barrier 0 stays the block's);
//                              the simulator makes it a rendezvous of the warpgroup at one source line
//
// Usage (a producer warpgroup gives registers to two consumer warpgroups; kernel launched with
// __launch_bounds__(384, 1)):
//
//   const int wg = threadIdx.x / 128;
//   if (wg == 0) {
//     setmaxnreg_dec<40>();
//     if (threadIdx.x % 128 < 32 && elect_one(0xffffffffu)) { /* issue TMA loads */ }
//   } else {
//     setmaxnreg_inc<232>();
//     /* wgmma, softmax, epilogue */
//   }
#pragma once

#include <cstdint>

#include "llmk/arch/sm90/sm90.cuh"

#if defined(LLMK_SIM)
#include <string>
#endif

namespace llmk::arch::sm90 {

/// elect.sync: true in exactly one lane of `mask` (example: the file comment).
LLMK_DEVICE bool elect_one(unsigned mask LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  std::uint32_t pred = 0;
  asm volatile("{\n .reg .b32 r;\n .reg .pred p;\n elect.sync r|p, %1;\n selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(pred)
               : "r"(mask));
  return pred != 0;
#elif defined(LLMK_SIM)
  struct Out {
    bool leader;
  };
  const Out out = ::llmk::sim::warp_collective<Out>(
      "elect.sync", mask, 0,
      [mask](const int* const*, Out* const* outs) {
        const int lowest = __builtin_ctz(mask);
        for (int l = 0; l < 32; ++l)
          if (outs[l] != nullptr) outs[l]->leader = l == lowest;
      },
      LLMK_LOC_FWD);
  return out.leader;
#else
  (void)mask;
  LLMK_SM90_UNAVAILABLE();
  return false;
#endif
}

namespace detail {
#if defined(LLMK_SIM)
inline void setmaxnreg_emulate(const char* op, int n, std::source_location loc) {
  struct Out {
    std::string error;
  };
  const Out out = ::llmk::sim::warpgroup_collective<Out>(
      op, n,
      [op](const int* const* ins, Out* const* outs) {
        for (int i = 1; i < 128; ++i)
          if (*ins[i] != *ins[0])
            for (int j = 0; j < 128; ++j)
              outs[j]->error = std::string(op) + ": the register counts differ within the warpgroup (" +
                               std::to_string(*ins[0]) + " and " + std::to_string(*ins[i]) + ")";
      },
      loc);
  if (!out.error.empty()) ::llmk::sim::fail(out.error, loc);
}
#endif
}  // namespace detail

/// setmaxnreg.inc: raises this warpgroup's per-thread register budget to N (example: the file comment).
template <int N>
LLMK_DEVICE void setmaxnreg_inc(LLMK_LOC_ONLY) {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg: 24..256, a multiple of 8");
#if LLMK_SM90A_ASM
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#elif defined(LLMK_SIM)
  detail::setmaxnreg_emulate("setmaxnreg.inc.sync.aligned.u32", N, LLMK_LOC_FWD);
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// setmaxnreg.dec: lowers this warpgroup's per-thread register budget to N (example: the file comment).
template <int N>
LLMK_DEVICE void setmaxnreg_dec(LLMK_LOC_ONLY) {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg: 24..256, a multiple of 8");
#if LLMK_SM90A_ASM
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#elif defined(LLMK_SIM)
  detail::setmaxnreg_emulate("setmaxnreg.dec.sync.aligned.u32", N, LLMK_LOC_FWD);
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// A barrier over the caller's warpgroup only (named barrier 1 + threadIdx.x / 128, 128 threads):
///   warpgroup_sync();   // this warpgroup's shared-memory writes are visible to its 4 warps
LLMK_DEVICE void warpgroup_sync(LLMK_LOC_ONLY) {
#if LLMK_SM90_ASM
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + static_cast<int>(threadIdx.x / 128)) : "memory");
#elif defined(LLMK_SIM)
  struct Out {
    bool unused;
  };
  (void)::llmk::sim::warpgroup_collective<Out>(
      "bar.sync (warpgroup)", 0, [](const int* const*, Out* const*) {}, LLMK_LOC_FWD);
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

}  // namespace llmk::arch::sm90
