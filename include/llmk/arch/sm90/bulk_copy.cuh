// llmk/arch/sm90/bulk_copy.cuh: non-tensor bulk copies (cp.async.bulk, sm_90) and the proxy fence.
//
//   bulk_copy_g2s(smem_dst, gmem_src, bytes, bar)
//                                  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes: lands
//                                  later, then complete_tx(bytes) on the mbarrier `bar`
//   bulk_copy_s2g(gmem_dst, smem_src, bytes)
//                                  cp.async.bulk.global.shared::cta.bulk_group
//   bulk_commit_group()            cp.async.bulk.commit_group (the thread's bulk stores so far)
//   bulk_wait_group<N>()           cp.async.bulk.wait_group N: all but the newest N groups done
//   bulk_wait_group_read<N>()      cp.async.bulk.wait_group.read N: their sources were read (the shared
//                                  source may be reused; global writes may still be pending)
//   fence_proxy_async()            fence.proxy.async.shared::cta: this thread's ordinary shared stores
//                                  become visible to the async proxy (wgmma, TMA stores)
//
// Rules (the simulator checks them): bytes a multiple of 16, both addresses 16-byte aligned, the shared side
// in the block's arena, the global side not; the mbarrier expects the bytes (arrive.expect_tx / expect_tx)
// and its init was fenced (fence_mbarrier_init or fence_proxy_async). A bulk copy's destination reads poison
// in the simulator until its mbarrier phase completes; the source of a bulk store must not change before
// wait_group.read. No fence is needed after waiting on a copy's mbarrier: its completion is visible to
// ordinary loads.
//
// Usage: a load is in llmk/arch/sm90/mbarrier.cuh's example; a store of a tile written with ordinary stores:
//
//   fence_proxy_async();                      // every writing thread, then __syncthreads()
//   if (threadIdx.x == 0) {
//     bulk_copy_s2g(dst, tile, bytes);
//     bulk_commit_group();
//     bulk_wait_group_read<0>();              // `tile` may be overwritten now
//   }
#pragma once

#include <cstdint>

#include "llmk/arch/sm90/sm90.cuh"

#if defined(LLMK_SIM)
#include <string>
#include <utility>
#include <vector>
#endif

namespace llmk::arch::sm90 {

namespace detail {
#if defined(LLMK_SIM)
inline void check_bulk(const char* op, const void* shared, const void* global, unsigned bytes,
                       std::source_location loc) {
  if (bytes == 0 || bytes % 16 != 0)
    ::llmk::sim::fail(std::string(op) + ": size must be a positive multiple of 16", loc);
  if (reinterpret_cast<std::uintptr_t>(global) % 16 != 0)
    ::llmk::sim::fail(std::string(op) + ": the global address is not 16-byte aligned", loc);
  if (::llmk::sim::is_shared(global, 1))
    ::llmk::sim::fail(std::string(op) + ": the global operand lies in shared memory", loc);
  if (!::llmk::sim::is_shared(shared, bytes) || reinterpret_cast<std::uintptr_t>(shared) % 16 != 0)
    ::llmk::sim::fail(
        std::string(op) + ": the shared operand must be 16-byte aligned and inside the block's arena", loc);
}
#endif
}  // namespace detail

/// Starts a bulk copy of `bytes` into shared memory; it complete_tx's `bar` when it lands (example:
/// mbarrier.cuh's file comment).
LLMK_DEVICE void bulk_copy_g2s(void* smem_dst, const void* gmem_src, unsigned bytes,
                               std::uint64_t* bar LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          detail::smem_u32(smem_dst)),
      "l"(gmem_src), "r"(bytes), "r"(detail::smem_u32(bar))
      : "memory");
#elif defined(LLMK_SIM)
  constexpr const char* op = "cp.async.bulk.shared::cluster.global";
  detail::check_bulk(op, smem_dst, gmem_src, bytes, LLMK_LOC_FWD);
  const auto* src = static_cast<const unsigned char*>(gmem_src);
  ::llmk::sim::bulk_load_to_shared(smem_dst, std::vector<unsigned char>(src, src + bytes), bar, op,
                                   LLMK_LOC_FWD);
#else
  (void)smem_dst, (void)gmem_src, (void)bytes, (void)bar;
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// Starts a bulk store of `bytes` from shared memory into the thread's current bulk group (example: the
/// file comment).
LLMK_DEVICE void bulk_copy_s2g(void* gmem_dst, const void* smem_src, unsigned bytes LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gmem_dst),
               "r"(detail::smem_u32(smem_src)), "r"(bytes)
               : "memory");
#elif defined(LLMK_SIM)
  constexpr const char* op = "cp.async.bulk.global.shared::cta";
  detail::check_bulk(op, smem_src, gmem_dst, bytes, LLMK_LOC_FWD);
  const auto* src = static_cast<const unsigned char*>(smem_src);
  std::vector<std::pair<unsigned char*, std::size_t>> runs{{static_cast<unsigned char*>(gmem_dst), bytes}};
  ::llmk::sim::bulk_store_from_shared(smem_src, bytes, std::move(runs),
                                      std::vector<unsigned char>(src, src + bytes), op, LLMK_LOC_FWD);
#else
  (void)gmem_dst, (void)smem_src, (void)bytes;
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// Closes this thread's group of bulk stores (example: the file comment).
LLMK_DEVICE void bulk_commit_group(LLMK_LOC_ONLY) {
#if LLMK_SM90_ASM
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#elif defined(LLMK_SIM)
  (void)llmk_loc;
  ::llmk::sim::bulk_commit();
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// Waits until all but the newest N bulk groups of this thread are complete (their writes done):
///   bulk_wait_group<0>();
template <int N>
LLMK_DEVICE void bulk_wait_group(LLMK_LOC_ONLY) {
  static_assert(N >= 0 && N <= 7, "cp.async.bulk.wait_group takes an immediate count; llmk allows 0..7");
#if LLMK_SM90_ASM
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::bulk_wait(N, false, LLMK_LOC_FWD);
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// Waits until all but the newest N bulk groups of this thread have read their sources (example: the file
/// comment).
template <int N>
LLMK_DEVICE void bulk_wait_group_read(LLMK_LOC_ONLY) {
  static_assert(N >= 0 && N <= 7, "cp.async.bulk.wait_group.read takes an immediate count; llmk allows 0..7");
#if LLMK_SM90_ASM
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::bulk_wait(N, true, LLMK_LOC_FWD);
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// Makes this thread's ordinary shared-memory stores visible to the async proxy (example: the file comment).
LLMK_DEVICE void fence_proxy_async(LLMK_LOC_ONLY) {
#if LLMK_SM90_ASM
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::fence_proxy_async(LLMK_LOC_FWD);
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

}  // namespace llmk::arch::sm90
