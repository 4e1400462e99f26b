// llmk/arch/sm90/cluster.cuh: thread-block clusters (sm_90): the blocks of a cluster run at once on nearby
// SMs and can wait on each other, signal each other's mbarriers and receive one TMA load together.
//
//   cluster_ctarank()                      %cluster_ctarank: this block's rank in its cluster (x fastest)
//   cluster_nctarank()                     %cluster_nctarank: blocks in the cluster
//   cluster_arrive()                       barrier.cluster.arrive.release: one arrival of this thread
//   cluster_wait()                         barrier.cluster.wait.acquire: until every thread of every block
//                                          of the cluster arrived (after this thread's arrival)
//   cluster_sync()                         both
//   cluster_map_shared(p, rank)            mapa.u64: p's offset in block `rank`'s shared memory
//   mbarrier_arrive_cluster(bar, rank)     mapa + mbarrier.arrive.release.cluster.shared::cluster: one
//                                          arrival on the mbarrier at bar's offset in block `rank`
//   tma_load_multicast(dst, map, bar, {c0, c1}, mask)
//                                          cp.async.bulk.tensor.2d ... .multicast::cluster (sm_90a): the box
//                                          lands at dst's offset in every block of `mask` (bit r = rank r),
//                                          each complete_tx'ing its own mbarrier at bar's offset
//
// Launch a cluster kernel with llmk::launch_cluster (llmk/core/launch.cuh). Every block's mbarriers that
// peers signal must be initialised and fenced (fence_mbarrier_init) before a cluster_sync(), and a block
// must not exit while a peer may still signal its barriers or copy into its shared memory. The simulator
// runs the blocks of a cluster together and checks these rules (llmk/sim/cluster.hpp).
//
// Usage (each thread reads its value in the next block of the cluster through distributed shared memory):
//
//   int* mine = reinterpret_cast<int*>(llmk::dynamic_smem());
//   mine[threadIdx.x] = value;
//   cluster_sync();                                        // every block's value is written
//   int theirs = cluster_map_shared(mine, (cluster_ctarank() + 1) % cluster_nctarank())[threadIdx.x];
//   cluster_sync();                                        // no block exits while a peer reads it
#pragma once

#include <cstdint>

#include "llmk/arch/sm90/sm90.cuh"
#include "llmk/arch/sm90/tma.cuh"

namespace llmk::arch::sm90 {

/// This block's rank in its cluster (example: the file comment).
LLMK_DEVICE unsigned cluster_ctarank() {
#if LLMK_SM90_ASM
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
#elif defined(LLMK_SIM)
  return ::llmk::sim::cluster_ctarank();
#else
  LLMK_SM90_UNAVAILABLE();
  return 0;
#endif
}

/// The number of blocks in this block's cluster (example: the file comment).
LLMK_DEVICE unsigned cluster_nctarank() {
#if LLMK_SM90_ASM
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
#elif defined(LLMK_SIM)
  return ::llmk::sim::cluster_nctarank();
#else
  LLMK_SM90_UNAVAILABLE();
  return 1;
#endif
}

/// barrier.cluster.arrive.release: this thread's arrival; pair it with cluster_wait:
///   cluster_arrive();  /* independent work */  cluster_wait();
LLMK_DEVICE void cluster_arrive(LLMK_LOC_ONLY) {
#if LLMK_SM90_ASM
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::cluster_arrive(LLMK_LOC_FWD);
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// barrier.cluster.wait.acquire: until every thread of the cluster arrived (see cluster_arrive).
LLMK_DEVICE void cluster_wait(LLMK_LOC_ONLY) {
#if LLMK_SM90_ASM
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::cluster_wait(LLMK_LOC_FWD);
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// cluster_arrive() then cluster_wait(): a barrier over every thread of the cluster (example: the file
/// comment).
LLMK_DEVICE void cluster_sync(LLMK_LOC_ONLY) {
  cluster_arrive(LLMK_LOC_FWD);
  cluster_wait(LLMK_LOC_FWD);
}

/// The generic address of `p`'s offset (p in this block's shared memory) in the shared memory of block `rank`
/// of the cluster (distributed shared memory: ordinary loads and stores reach the peer). Example: the file
/// comment.
template <class T>
LLMK_DEVICE T* cluster_map_shared(T* p, unsigned rank LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  std::uint64_t out;
  asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(out) : "l"(reinterpret_cast<std::uint64_t>(p)), "r"(rank));
  return reinterpret_cast<T*>(out);
#elif defined(LLMK_SIM)
  return static_cast<T*>(::llmk::sim::cluster_map_shared(p, rank, LLMK_LOC_FWD));
#else
  (void)rank;
  LLMK_SM90_UNAVAILABLE();
  return p;
#endif
}

/// One arrival on the mbarrier at `bar`'s offset in block `rank` of the cluster (e.g. freeing a slot the
/// peer's producer multicasts into):  mbarrier_arrive_cluster(&ring.empty[stage], peer);
LLMK_DEVICE void mbarrier_arrive_cluster(std::uint64_t* bar, unsigned rank LLMK_LOC_TAIL) {
#if LLMK_SM90_ASM
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(detail::smem_u32(bar)),
      "r"(rank)
      : "memory");
#elif defined(LLMK_SIM)
  ::llmk::sim::mbarrier_arrive_cluster(bar, rank, LLMK_LOC_FWD);
#else
  (void)bar, (void)rank;
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// tma_load of a 2-D box into dst's offset of every block in `mask` (bit r = rank r), each block's mbarrier
/// at bar's offset receiving the bytes (sm_90a). A cluster of 2, each block loading its half of the rows:
///   tma_load_multicast(tile + rank * half_elems, map, bar, {k0, n0 + int(rank) * half_rows}, 0x3);
LLMK_DEVICE void tma_load_multicast(void* smem_dst, const TensorMap& map, std::uint64_t* bar,
                                    const int (&coords)[2], std::uint16_t mask LLMK_LOC_TAIL) {
#if LLMK_SM90A_ASM
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%3, %4}], [%2], %5;" ::"r"(detail::smem_u32(smem_dst)),
      "l"(reinterpret_cast<std::uint64_t>(&map)), "r"(detail::smem_u32(bar)), "r"(coords[0]), "r"(coords[1]),
      "h"(mask)
      : "memory");
#elif defined(LLMK_SIM)
  detail::sim_tma_load(smem_dst, map, bar, coords, 2, LLMK_LOC_FWD, mask);
#else
  (void)smem_dst, (void)map, (void)bar, (void)coords, (void)mask;
  LLMK_SM90_UNAVAILABLE();
#endif
}

}  // namespace llmk::arch::sm90
