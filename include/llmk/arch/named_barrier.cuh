// llmk/arch/named_barrier.cuh: the named barrier atoms (any architecture llmk builds for).
//
//   named_barrier_sync(id, threads)     bar.sync id, threads: arrive at barrier `id` and wait until
//                                       `threads` threads (whole warps) have arrived in this phase
//   named_barrier_arrive(id, threads)   bar.arrive id, threads: arrive and go on (a release: the threads
//                                       that bar.sync in the same phase see the caller's earlier writes)
//
// A block has 16 barriers: 0 is __syncthreads', 1..(warpgroups) are warpgroup_sync's (sm90/
// warp_specialization.cuh); kernels take ids above those. The usual pairing is a producer that arrives and a
// consumer that syncs, with `threads` counting both sides: the phase completes when both have arrived.
// The simulator checks the rules in llmk/sim/named_barrier.hpp (matching counts, one arrival per thread per
// phase, no phase completed by arrivals alone, none left partly arrived at exit, deadlocks named).
//
// Usage (two warpgroups take turns issuing their tensor-core work, sm90/warpgroup_turns.cuh):
//
//   if (wg == 1) named_barrier_sync(4, 256);    // wait until warpgroup 2 passed the turn (128 + 128 threads)
//   ... issue wgmma ...
//   named_barrier_arrive(5, 256);               // pass it to warpgroup 2, which waits on barrier 5
#pragma once

#include "llmk/config.cuh"

#if defined(LLMK_SIM)
#include "llmk/sim/runtime.hpp"
#endif

namespace llmk::arch {

/// bar.sync id, threads: arrive at barrier `id` and wait for `threads` arrivals (example: the file comment).
LLMK_DEVICE void named_barrier_sync(int id, int threads LLMK_LOC_TAIL) {
#if LLMK_DEVICE_PASS
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::named_barrier(static_cast<unsigned>(id), static_cast<unsigned>(threads), true, LLMK_LOC_FWD);
#else
  (void)id;
  (void)threads;
#endif
}

/// bar.arrive id, threads: arrive at barrier `id` and go on (example: the file comment).
LLMK_DEVICE void named_barrier_arrive(int id, int threads LLMK_LOC_TAIL) {
#if LLMK_DEVICE_PASS
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::named_barrier(static_cast<unsigned>(id), static_cast<unsigned>(threads), false, LLMK_LOC_FWD);
#else
  (void)id;
  (void)threads;
#endif
}

}  // namespace llmk::arch
