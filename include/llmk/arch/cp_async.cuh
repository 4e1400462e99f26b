// llmk/arch/cp_async.cuh: asynchronous global -> shared copies (cp.async, sm_80+).
//
//   cp_async_ca<N>(smem_dst, gmem_src)                 cp.async.ca.shared.global, N = 4, 8 or 16 bytes
//   cp_async_cg16(smem_dst, gmem_src)                  cp.async.cg.shared.global, 16 bytes (bypasses L1)
//   cp_async_zfill<N>(smem_dst, gmem_src, src_bytes)   .ca with src-size: copies src_bytes in [0, N]
//                                                      bytes and zero-fills the rest of the N destination
//                                                      bytes
//   cp_async_cg16_zfill(smem_dst, gmem_src, src_bytes) the same with .cg, N = 16
//   cp_async_commit()                                  cp.async.commit_group (an empty group is fine)
//   cp_async_wait<N>()                                 cp.async.wait_group N: all but the newest N committed
//                                                      groups of THIS thread are complete
//   cp_async_wait_all()                                cp.async.wait_all (= commit + wait_group 0)
//
// Rules (checked by the simulator, which fails the launch naming the caller's line): dst in the block's
// shared memory, dst and src aligned to N, src not in shared memory, 0 <= src_bytes <= N. With src_bytes == 0
// nothing is read from src (its value must still be aligned). Completed copies are visible to the issuing
// thread only: other threads need a barrier after the wait. The issue and wait asm carry a "memory" clobber
// so the compiler neither sinks earlier shared stores past an issue nor hoists shared loads above a wait.
//
// Usage (one 16-byte chunk of a tile row, zero-filled past the matrix edge; one group per stage):
//
//   llmk::arch::cp_async_cg16_zfill(&tile[row * kPitch + col], src, in_bounds ? 16 : 0);
//   llmk::arch::cp_async_commit();
//   llmk::arch::cp_async_wait<0>();   // this thread's copies have landed
//   __syncthreads();                  // ... and every thread's are visible
#pragma once

#include "llmk/config.cuh"

#include <cstdint>

#if defined(LLMK_SIM)
#include <sstream>
#include "llmk/sim/runtime.hpp"
#endif

namespace llmk::arch {

namespace detail {

#if defined(LLMK_SIM)
inline void cp_async_emulate(const char* op, void* dst, const void* src, int n, int src_bytes,
                             std::source_location loc) {
  auto complain = [&](const char* what) {
    std::ostringstream os;
    os << op << " (dst " << dst << ", src " << src << ", " << n << " bytes, src_bytes " << src_bytes
       << "): " << what;
    ::llmk::sim::fail(os.str(), loc);
  };
  if (src_bytes < 0 || src_bytes > n) complain("src_bytes must be in [0, copy size]");
  if (reinterpret_cast<std::uintptr_t>(dst) % static_cast<unsigned>(n) != 0)
    complain("the shared-memory destination is not aligned to the copy size");
  if (reinterpret_cast<std::uintptr_t>(src) % static_cast<unsigned>(n) != 0)
    complain("the global source is not aligned to the copy size");
  if (!::llmk::sim::is_shared(dst, static_cast<std::size_t>(n)))
    complain("the destination is not inside this block's shared-memory arena");
  if (src_bytes > 0 && ::llmk::sim::is_shared(src, 1))
    complain("the source lies in shared memory; cp.async copies from global memory");
  ::llmk::sim::cp_async(dst, src, n, src_bytes, loc);
}
#endif

#if LLMK_DEVICE_PASS
LLMK_DEVICE std::uint32_t cp_async_smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
LLMK_DEVICE std::uint64_t cp_async_gmem_u64(const void* p) {
  return static_cast<std::uint64_t>(__cvta_generic_to_global(p));
}
#endif

}  // namespace detail

/// cp.async.ca of N = 4, 8 or 16 bytes (example: the file comment).
template <int N>
LLMK_DEVICE void cp_async_ca(void* smem_dst, const void* gmem_src LLMK_LOC_TAIL) {
  static_assert(N == 4 || N == 8 || N == 16, "cp.async.ca copies 4, 8 or 16 bytes");
#if LLMK_DEVICE_PASS
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(detail::cp_async_smem_u32(smem_dst)),
               "l"(detail::cp_async_gmem_u64(gmem_src)), "n"(N)
               : "memory");
#elif defined(LLMK_SIM)
  detail::cp_async_emulate("cp.async.ca.shared.global", smem_dst, gmem_src, N, N, LLMK_LOC_FWD);
#elif defined(LLMK_HOST_ONLY)
  (void)smem_dst, (void)gmem_src;
  __builtin_trap();
#endif
}

/// cp.async.cg of 16 bytes, bypassing L1:  llmk::arch::cp_async_cg16(&tile[i], src + i);
LLMK_DEVICE void cp_async_cg16(void* smem_dst, const void* gmem_src LLMK_LOC_TAIL) {
#if LLMK_DEVICE_PASS
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(detail::cp_async_smem_u32(smem_dst)),
               "l"(detail::cp_async_gmem_u64(gmem_src))
               : "memory");
#elif defined(LLMK_SIM)
  detail::cp_async_emulate("cp.async.cg.shared.global", smem_dst, gmem_src, 16, 16, LLMK_LOC_FWD);
#elif defined(LLMK_HOST_ONLY)
  (void)smem_dst, (void)gmem_src;
  __builtin_trap();
#endif
}

/// cp.async.ca of src_bytes in [0, N] bytes, zero-filling the rest of the N (as cp_async_cg16_zfill).
template <int N>
LLMK_DEVICE void cp_async_zfill(void* smem_dst, const void* gmem_src, int src_bytes LLMK_LOC_TAIL) {
  static_assert(N == 4 || N == 8 || N == 16, "cp.async.ca copies 4, 8 or 16 bytes");
#if LLMK_DEVICE_PASS
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(detail::cp_async_smem_u32(smem_dst)),
               "l"(detail::cp_async_gmem_u64(gmem_src)), "n"(N), "r"(src_bytes)
               : "memory");
#elif defined(LLMK_SIM)
  detail::cp_async_emulate("cp.async.ca.shared.global (src-size)", smem_dst, gmem_src, N, src_bytes,
                           LLMK_LOC_FWD);
#elif defined(LLMK_HOST_ONLY)
  (void)smem_dst, (void)gmem_src, (void)src_bytes;
  __builtin_trap();
#endif
}

/// cp.async.cg with src-size: src_bytes in [0, 16] copied, the rest zero-filled (example: the file comment).
LLMK_DEVICE void cp_async_cg16_zfill(void* smem_dst, const void* gmem_src, int src_bytes LLMK_LOC_TAIL) {
#if LLMK_DEVICE_PASS
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(detail::cp_async_smem_u32(smem_dst)),
               "l"(detail::cp_async_gmem_u64(gmem_src)), "r"(src_bytes)
               : "memory");
#elif defined(LLMK_SIM)
  detail::cp_async_emulate("cp.async.cg.shared.global (src-size)", smem_dst, gmem_src, 16, src_bytes,
                           LLMK_LOC_FWD);
#elif defined(LLMK_HOST_ONLY)
  (void)smem_dst, (void)gmem_src, (void)src_bytes;
  __builtin_trap();
#endif
}

/// Closes this thread's group of cp.async copies (example: the file comment).
LLMK_DEVICE void cp_async_commit(LLMK_LOC_ONLY) {
#if LLMK_DEVICE_PASS
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#elif defined(LLMK_SIM)
  (void)llmk_loc;
  ::llmk::sim::cp_async_commit();
#elif defined(LLMK_HOST_ONLY)
  __builtin_trap();
#endif
}

/// Waits until at most the newest N committed groups of this thread are pending (a multistage ring):
///   llmk::arch::cp_async_wait<kStages - 2>();
template <int N>
LLMK_DEVICE void cp_async_wait(LLMK_LOC_ONLY) {
  static_assert(N >= 0 && N <= 7, "cp.async.wait_group takes an immediate count; llmk allows 0..7");
#if LLMK_DEVICE_PASS
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#elif defined(LLMK_SIM)
  (void)llmk_loc;
  ::llmk::sim::cp_async_wait_group(N);
#elif defined(LLMK_HOST_ONLY)
  __builtin_trap();
#endif
}

/// Commits and waits for every cp.async of this thread:  llmk::arch::cp_async_wait_all();
LLMK_DEVICE void cp_async_wait_all(LLMK_LOC_ONLY) {
#if LLMK_DEVICE_PASS
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#elif defined(LLMK_SIM)
  (void)llmk_loc;
  ::llmk::sim::cp_async_commit();
  ::llmk::sim::cp_async_wait_group(0);
#elif defined(LLMK_HOST_ONLY)
  __builtin_trap();
#endif
}

}  // namespace llmk::arch
