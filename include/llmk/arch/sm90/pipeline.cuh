// llmk/arch/sm90/pipeline.cuh: the warp-specialized TMA ring every Hopper kernel of llmk uses: Stages slots,
// a "full" mbarrier per slot (the producer's arrive.expect_tx plus the slot's TMA bytes) and an "empty"
// mbarrier per slot (one arrival per consumer warp once its wgmmas reading the slot completed).
//
//   producer (one elected thread)                    consumers (every consumer warp)
//   RingPosition<S> p;                               RingPosition<S> c;
//   for each stage of work:                          for each stage of work:
//     ring.producer_acquire(p, bytes);                 ring.consumer_wait(c);
//     tma_load(slot p.stage, ..., ring.full_bar(p));   ... wgmma on slot c.stage ...; wgmma_wait
//     p.advance();                                     ring.consumer_release(c); c.advance();
//
// The first pass over the ring needs no consumer release: the producer waits the "empty" barriers on the
// parity of the phase before their first (which counts as complete), so positions start at phase 0 on both
// sides.
#pragma once

#include <cstdint>

#include "llmk/arch/sm90/cluster.cuh"
#include "llmk/arch/sm90/mbarrier.cuh"

namespace llmk::arch::sm90 {

/// A slot of a ring of Stages slots and the parity of its current use.
template <int Stages>
struct RingPosition {
  int stage = 0;
  unsigned phase = 0;
  LLMK_DEVICE void advance() {
    if (++stage == Stages) {
      stage = 0;
      phase ^= 1u;
    }
  }
  /// n advances at once (n >= 0): a consumer skipping the slots another consumer takes (ping-pong).
  LLMK_DEVICE void advance_by(int n) {
    const int s = stage + n;
    stage = s % Stages;
    phase ^= static_cast<unsigned>(s / Stages) & 1u;
  }
};

/// The barriers of the ring (in shared memory).
template <int Stages>
struct TmaRing {
  std::uint64_t full[Stages];
  std::uint64_t empty[Stages];

  /// One thread, before a __syncthreads: `consumer_arrivals` = arrivals that free a slot,
  /// `producer_arrivals` = arrivals that fill one (1: the TMA producer's arrive.expect_tx; more when several
  /// producer threads or warps fill a slot with ordinary copies and publish it with producer_publish).
  LLMK_DEVICE void init(unsigned consumer_arrivals, unsigned producer_arrivals = 1) {
    for (int s = 0; s < Stages; ++s) {
      mbarrier_init(&full[s], producer_arrivals);
      mbarrier_init(&empty[s], consumer_arrivals);
    }
    fence_mbarrier_init();
  }
  /// Producer: waits until slot p is free, then announces `tx_bytes` of TMA into it.
  LLMK_DEVICE void producer_acquire(const RingPosition<Stages>& p, unsigned tx_bytes) {
    producer_wait(p);
    mbarrier_arrive_expect_tx(&full[p.stage], tx_bytes);
  }
  /// Producer: waits until slot p is free, without announcing anything (a producer that fills the slot by
  /// other means then publishes it with producer_publish).
  LLMK_DEVICE void producer_wait(const RingPosition<Stages>& p) {
    mbarrier_wait_parity(&empty[p.stage], p.phase ^ 1u);
  }
  /// Producer: slot p is complete (a plain arrival; the writer fenced its generic stores with
  /// fence.proxy.async first when wgmma reads them).
  LLMK_DEVICE void producer_publish(const RingPosition<Stages>& p) { mbarrier_arrive(&full[p.stage]); }
  LLMK_DEVICE std::uint64_t* full_bar(const RingPosition<Stages>& p) { return &full[p.stage]; }
  /// Consumer: waits until slot c has landed.
  LLMK_DEVICE void consumer_wait(const RingPosition<Stages>& c) {
    mbarrier_wait_parity(&full[c.stage], c.phase);
  }
  /// Consumer (one arrival per call): slot c may be refilled.
  LLMK_DEVICE void consumer_release(const RingPosition<Stages>& c) { mbarrier_arrive(&empty[c.stage]); }
  /// Consumer in a cluster (one arrival per call): slot c may be refilled, said to the block of rank `rank`
  /// (whose producer multicasts into this block's slot too: init's consumer_arrivals counts both blocks').
  LLMK_DEVICE void consumer_release_to(const RingPosition<Stages>& c, unsigned rank) {
    mbarrier_arrive_cluster(&empty[c.stage], rank);
  }
};

}  // namespace llmk::arch::sm90
