// llmk/sim/cluster.hpp: thread-block clusters (sm_90) in the simulator (included by llmk/sim/runtime.hpp).
//
// The blocks of a cluster run together on one OS thread, their threads interleaved by one scheduler
// (scheduler.hpp, run_cluster), so they can wait on each other. What the cluster adds, each checked:
//  - barrier.cluster.arrive / .wait: every thread of every block of the cluster arrives, then waits; a wait
//    without an arrival, or a second arrival before the wait, is reported; a phase that never completes is a
//    deadlock naming the waiting threads;
//  - mapa: an address in the calling block's shared memory -> the same offset in the block of a given rank
//    (ordinary loads and stores through it are ordinary memory accesses: TSan sees the races);
//  - mbarrier arrivals on a peer block's barrier (mbarrier.arrive.release.cluster.shared::cluster): the
//  peer's
//    init must have been made visible to the cluster first (a barrier.cluster phase completed after it), and
//    the peer must not have exited;
//  - multicast bulk copies (cp.async.bulk.tensor ... .multicast::cluster): the box lands at the same offset
//    in every block of the mask, each complete_tx'ing its own mbarrier at the same offset; each destination
//    is poisoned until its copy lands, like a unicast copy.
// Limits: the blocks of a cluster are kept until the whole cluster finishes, so an access through a mapa
// address into a block that already exited reads its last bytes instead of faulting (arrivals and copies
// into an exited block are reported).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "llmk/sim/runtime.hpp"

namespace llmk::sim {

namespace detail {

LLMK_SIM_BOOKKEEPING Cluster& cluster_of(Thread& t) {
  return *t.block->cluster;
}

// The block of rank `rank` in the calling thread's cluster (fails for a rank outside it).
inline Block& peer_block(Thread& t, unsigned rank, const char* op, const std::source_location& loc) {
  Cluster& c = cluster_of(t);
  if (rank >= c.blocks.size())
    fail_current(std::string(op) + ": rank " + std::to_string(rank) + " is outside the cluster of " +
                     std::to_string(c.blocks.size()) + " blocks",
                 loc);
  return *c.blocks[rank];
}

// Whether every thread of `b` has finished.
LLMK_SIM_BOOKKEEPING bool block_exited(const Block& b) {
  for (const Thread& o : b.threads)
    if (o.state != WaitState::kDone) return false;
  return true;
}

// The mbarrier at arena offset `off` of block `peer` (the calling thread's own block: checked_mbarrier), for
// an operation of the calling thread.
inline Mbarrier& checked_peer_mbarrier(Thread& t, Block& peer, std::size_t off, const char* op,
                                       const std::source_location& loc) {
  if (&peer == t.block) return checked_mbarrier(t, peer.smem + off, op, loc);
  SimStateScope scope;
  const std::string who = "block rank " + std::to_string(peer.cluster_rank);
  if (block_exited(peer))
    fail_current(std::string(op) + ": " + who +
                     " has exited (a block must not exit while other blocks of its "
                     "cluster may still signal its barriers or copy into its shared memory)",
                 loc);
  Mbarrier* m = find_mbarrier(peer, off);
  if (m == nullptr)
    fail_current(
        std::string(op) + ": no mbarrier was initialised at shared offset " + hex_offset(off) + " of " + who,
        loc);
  if (read_tag(peer.smem + off) != kMbarrierTag)
    fail_current(std::string(op) + ": the " + describe_mbarrier(*m) + " of " + who +
                     " was overwritten by an ordinary store since its mbarrier.init",
                 loc);
  if (cluster_of(t).completed <= m->init_cluster_phase)
    fail_current(std::string(op) + ": the " + describe_mbarrier(*m) + " of " + who + " initialised at " +
                     format_loc(m->init_loc) +
                     " is used by another block of the cluster before a barrier.cluster arrive/wait made the "
                     "init visible to the cluster",
                 loc);
  return *m;
}

LLMK_SIM_BOOKKEEPING bool cluster_arrive_step(Thread& t, const std::source_location& loc,
                                              std::string* error) {
  Cluster& c = cluster_of(t);
  t.where = loc;
  if (t.cluster_arrived != 0) {
    *error = "barrier.cluster.arrive: a second arrival before barrier.cluster.wait";
    return false;
  }
  t.cluster_arrived = c.completed + 1;
  if (++c.arrived == c.threads) {
    ++c.completed;
    c.arrived = 0;
    for (Block* b : c.blocks)
      for (Thread& o : b->threads)
        if (o.state == WaitState::kClusterBarrier) o.state = WaitState::kRunnable;
  }
  return true;
}

LLMK_SIM_BOOKKEEPING void set_cluster_wait(Thread& t, const std::source_location& loc) {
  t.where = loc;
  t.state = WaitState::kClusterBarrier;
}

}  // namespace detail

/// %cluster_ctarank: the calling block's rank in its cluster (x fastest).
inline unsigned cluster_ctarank() {
  return detail::current_thread().block->cluster_rank;
}

/// %cluster_nctarank: blocks in the calling block's cluster.
inline unsigned cluster_nctarank() {
  return static_cast<unsigned>(detail::cluster_of(detail::current_thread()).blocks.size());
}

/// barrier.cluster.arrive.release: one arrival of the calling thread in the cluster barrier's current phase.
inline void cluster_arrive(std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  std::string error;
  detail::Cluster& c = detail::cluster_of(t);
  detail::hb_release(c.sync_of(c.completed));
  if (!detail::cluster_arrive_step(t, loc, &error)) fail(error, loc);
}

/// barrier.cluster.wait.acquire: waits until the phase of the calling thread's last arrival has completed.
inline void cluster_wait(std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  detail::Cluster& c = detail::cluster_of(t);
  std::uint64_t phase;
  {
    detail::SimStateScope scope;
    if (t.cluster_arrived == 0) fail("barrier.cluster.wait without a barrier.cluster.arrive before it", loc);
    phase = t.cluster_arrived - 1;
  }
  for (;;) {
    bool done;
    {
      detail::SimStateScope scope;
      done = c.completed > phase;
    }
    if (done) break;
    detail::set_cluster_wait(t, loc);
    detail::yield_without_sync(t);  // resumed when the phase completes (cluster_arrive_step)
  }
  detail::SimStateScope scope;
  t.cluster_arrived = 0;
  detail::hb_acquire(c.sync_of(phase));
}

/// mapa.shared::cluster: the address at the offset of `p` (in the calling block's shared memory) in the
/// shared memory of the block of rank `rank`.
inline void* cluster_map_shared(const void* p, unsigned rank,
                                std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  const std::size_t off = detail::arena_offset(p, 1, 1, "mapa.shared::cluster", loc);
  return detail::peer_block(t, rank, "mapa.shared::cluster", loc).smem + off;
}

/// mbarrier.arrive.release.cluster.shared::cluster: one arrival on the mbarrier at the offset of `bar` in the
/// block of rank `rank` (the calling block's own rank included).
inline void mbarrier_arrive_cluster(void* bar, unsigned rank,
                                    std::source_location loc = std::source_location::current()) {
  constexpr const char* op = "mbarrier.arrive.shared::cluster";
  detail::Thread& t = detail::current_thread();
  const std::size_t off = detail::arena_offset(bar, 8, 8, op, loc);
  detail::Block& peer = detail::peer_block(t, rank, op, loc);
  detail::Mbarrier& m = detail::checked_peer_mbarrier(t, peer, off, op, loc);
  detail::SimStateScope scope;
  if (m.pending == 0) fail(std::string(op) + ": over-arrival on the " + detail::describe_mbarrier(m), loc);
  detail::hb_release(m.sync_of(m.completed));
  m.pending -= 1;
  detail::maybe_complete_phase(peer, m);
}

/// A multicast bulk copy: `bytes` (in their shared-memory order) land at the offset of `dst` in every block
/// whose rank is set in `mask`, each complete_tx'ing its mbarrier at the offset of `bar`.
inline void bulk_load_to_shared_multicast(void* dst, const std::vector<unsigned char>& bytes, void* bar,
                                          unsigned mask, const char* op,
                                          std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  const std::size_t off = detail::arena_offset(dst, bytes.size(), 16, op, loc);
  const std::size_t bar_off = detail::arena_offset(bar, 8, 8, op, loc);
  const unsigned n = cluster_nctarank();
  if (mask == 0 || (n < 16 && (mask >> n) != 0))
    fail(std::string(op) + ": ctaMask 0x" + detail::hex_offset(mask) + " must name ranks of the cluster of " +
             std::to_string(n) + " blocks, at least one",
         loc);
  for (unsigned r = 0; r < n; ++r) {
    if (((mask >> r) & 1u) == 0) continue;
    detail::Block& peer = detail::peer_block(t, r, op, loc);
    detail::Mbarrier& m = detail::checked_peer_mbarrier(t, peer, bar_off, op, loc);
    bool fenced;
    {
      detail::SimStateScope scope;
      fenced = m.init_fenced;
    }
    if (!fenced)
      fail(std::string(op) + ": the " + detail::describe_mbarrier(m) + " of block rank " + std::to_string(r) +
               " was not made visible to the async proxy (fence.mbarrier_init after the init)",
           loc);
    detail::queue_async_load(peer, off, bytes, bar_off, t.linear, loc);
  }
}

}  // namespace llmk::sim
