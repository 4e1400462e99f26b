// llmk/arch/sm90/mbarrier.cuh: mbarrier, the shared-memory barrier with arrival counts and transaction bytes
// that Hopper's asynchronous copies signal (sm_90; try_wait needs sm_90).
//
//   mbarrier_init(bar, count)              mbarrier.init.shared::cta.b64: `count` arrivals per phase, phase 0
//   fence_mbarrier_init()                  fence.mbarrier_init.release.cluster: the inits of this thread
//                                          become visible to the async proxy (follow it with __syncthreads);
//                                          inits only: data the async proxy reads needs fence_proxy_async
//   mbarrier_inval(bar)                    mbarrier.inval.shared::cta.b64 (before reusing the 8 bytes)
//   mbarrier_arrive(bar)                   mbarrier.arrive.shared::cta.b64 (release.cta), one arrival
//   mbarrier_arrive_count(bar, n)          the same with n arrivals
//   mbarrier_arrive_expect_tx(bar, bytes)  mbarrier.arrive.expect_tx: tx-count += bytes, then one arrival
//   mbarrier_expect_tx(bar, bytes)         mbarrier.expect_tx: tx-count += bytes (no arrival)
//   mbarrier_try_wait_parity(bar, p)       mbarrier.try_wait.parity (acquire.cta): true once the phase with
//                                          parity p has completed (may block for a while before saying false)
//   mbarrier_wait_parity(bar, p)           loops on try_wait until true
//   mbarrier_test_wait_parity(bar, p)      mbarrier.test_wait.parity: the same test, never blocks
//
// A phase completes when all its arrivals have arrived and its tx-count (bytes expected minus bytes landed)
// is 0; then the next phase starts with the same count. Parity p names "the phase of parity p": right after
// init, waiting for parity 0 blocks until phase 0 completes and waiting for parity 1 returns at once (a
// producer starts with parity 1 on its "slot empty" barriers for that reason).
//
// Usage (one transaction barrier guarding a bulk copy of `bytes` into `tile`):
//
//   __shared__-like storage: std::uint64_t* full = ...;   // 8-byte aligned, in shared memory
//   if (threadIdx.x == 0) { mbarrier_init(full, 1); fence_mbarrier_init(); }
//   __syncthreads();
//   if (threadIdx.x == 0) {
//     mbarrier_arrive_expect_tx(full, bytes);
//     bulk_copy_g2s(tile, src, bytes, full);
//   }
//   mbarrier_wait_parity(full, 0);   // every thread: the tile has landed
//
// The simulator checks every rule it can (llmk/sim/async_proxy.hpp): init before use and visible through a
// __syncthreads, no ordinary store over a live barrier, no over-arrival, tx-count range, a thread waiting
// twice for the same phase (wrong parity), and deadlocks that name each waited barrier's state.
#pragma once

#include <cstdint>

#include "llmk/arch/sm90/sm90.cuh"

namespace llmk::arch::sm90 {

/// Initializes the barrier at `bar` for `count` arrivals per phase, phase 0 (example: the file comment).
LLMK_DEVICE void mbarrier_init(std::uint64_t* bar, unsigned count LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(detail::smem_u32(bar)), "r"(count)
               : "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::mbarrier_init(bar, count, LLMK_LOC_FWD);
#else
  (void)bar, (void)count;
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// Makes this thread's mbarrier_init's visible to the async proxy (example: the file comment).
LLMK_DEVICE void fence_mbarrier_init(LLMK_LOC_ONLY) {
#if LLMK_SM90_ASM
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::fence_mbarrier_init(LLMK_LOC_FWD);
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// Invalidates the barrier before its 8 bytes are reused for anything else:  mbarrier_inval(full);
LLMK_DEVICE void mbarrier_inval(std::uint64_t* bar LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(detail::smem_u32(bar)) : "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::mbarrier_inval(bar, LLMK_LOC_FWD);
#else
  (void)bar;
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// One arrival; returns the state token (opaque on the GPU; the phase number in the simulator).
///   mbarrier_arrive(&empty[stage]);   // a consumer frees a slot
LLMK_DEVICE std::uint64_t mbarrier_arrive(std::uint64_t* bar LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  std::uint64_t state;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];\n"
               : "=l"(state)
               : "r"(detail::smem_u32(bar))
               : "memory");
  return state;
#elif defined(LLMK_SIM)
  return ::llmk::sim::mbarrier_arrive(bar, 1, 0, LLMK_LOC_FWD);
#else
  (void)bar;
  LLMK_SM90_UNAVAILABLE();
  return 0;
#endif
}

/// `count` arrivals at once (as mbarrier_arrive):  mbarrier_arrive_count(bar, 4);
LLMK_DEVICE std::uint64_t mbarrier_arrive_count(std::uint64_t* bar, unsigned count LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  std::uint64_t state;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1], %2;\n"
               : "=l"(state)
               : "r"(detail::smem_u32(bar)), "r"(count)
               : "memory");
  return state;
#elif defined(LLMK_SIM)
  return ::llmk::sim::mbarrier_arrive(bar, count, 0, LLMK_LOC_FWD);
#else
  (void)bar, (void)count;
  LLMK_SM90_UNAVAILABLE();
  return 0;
#endif
}

/// Expects `bytes` (> 0) more transaction bytes, then one arrival (example: the file comment).
LLMK_DEVICE void mbarrier_arrive_expect_tx(std::uint64_t* bar, unsigned bytes LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(detail::smem_u32(bar)),
               "r"(bytes)
               : "memory");
#elif defined(LLMK_SIM)
  if (bytes == 0) ::llmk::sim::fail("mbarrier.arrive.expect_tx: 0 bytes (use mbarrier_arrive)", LLMK_LOC_FWD);
  ::llmk::sim::mbarrier_arrive(bar, 1, bytes, LLMK_LOC_FWD);
#else
  (void)bar, (void)bytes;
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// Expects `bytes` more transaction bytes, without an arrival:  mbarrier_expect_tx(full, extra_bytes);
LLMK_DEVICE void mbarrier_expect_tx(std::uint64_t* bar, unsigned bytes LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  asm volatile("mbarrier.expect_tx.shared::cta.b64 [%0], %1;\n" ::"r"(detail::smem_u32(bar)), "r"(bytes)
               : "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::mbarrier_expect_tx(bar, bytes, LLMK_LOC_FWD);
#else
  (void)bar, (void)bytes;
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// True once the phase of parity `parity` has completed; may block for a while before saying false:
///   while (!mbarrier_try_wait_parity(full, phase)) {}
LLMK_DEVICE bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned parity LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  std::uint32_t done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(detail::smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
#elif defined(LLMK_SIM)
  return ::llmk::sim::mbarrier_try_wait_parity(bar, parity, LLMK_LOC_FWD);
#else
  (void)bar, (void)parity;
  LLMK_SM90_UNAVAILABLE();
  return false;
#endif
}

/// The test of mbarrier_try_wait_parity without blocking:  bool landed = mbarrier_test_wait_parity(full, 0);
LLMK_DEVICE bool mbarrier_test_wait_parity(std::uint64_t* bar, unsigned parity LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  std::uint32_t done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, "
      "p;\n}\n"
      : "=r"(done)
      : "r"(detail::smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
#elif defined(LLMK_SIM)
  return ::llmk::sim::mbarrier_test_wait_parity(bar, parity, LLMK_LOC_FWD);
#else
  (void)bar, (void)parity;
  LLMK_SM90_UNAVAILABLE();
  return false;
#endif
}

/// Waits until the phase of parity `parity` has completed (example: the file comment).
LLMK_DEVICE void mbarrier_wait_parity(std::uint64_t* bar, unsigned parity LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  // The retry loop inside one asm block (labels are local to its braces): the compiler cannot move the retry
  // path out of line, where its back edge would wrap the caller's main loop (and the static gates' view of
  // it).
  asm volatile(
      "{\n .reg .pred p;\n LLMK_MBAR_WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra LLMK_MBAR_WAIT;\n}\n" ::"r"(detail::smem_u32(bar)),
      "r"(parity)
      : "memory");
#else
  while (!mbarrier_try_wait_parity(bar, parity LLMK_LOC_ARG)) {
  }
#endif
}

}  // namespace llmk::arch::sm90
