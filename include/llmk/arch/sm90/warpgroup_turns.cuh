// llmk/arch/sm90/warpgroup_turns.cuh: consumer warpgroups that take turns issuing their tensor-core work
// (FlashAttention-3's "ping-pong"), built on the named barrier atoms (llmk/arch/named_barrier.cuh).
//
// With two consumer warpgroups each doing GEMM, softmax, GEMM per tile, letting them issue in turn makes one
// warpgroup's softmax (MUFU, FMA) run while the other's wgmmas occupy the tensor cores, instead of both
// warpgroups competing for the tensor cores and then both idling them during their softmax.
//
// Warpgroup i waits for its turn on barrier kFirstId + i (128 of its threads with bar.sync plus 128 of the
// previous warpgroup's with bar.arrive) and passes the turn to warpgroup i + 1 (mod N). The last warpgroup
// hands warpgroup 0 its first turn in start(); warpgroup 0 takes the turn the last one passes after its
// final turn in finish(), so every phase of every barrier is consumed (what the simulator checks at block
// exit). Every warpgroup must take the same number of turns. wait() and pass() have no branch: ptxas
// serializes every wgmma of a kernel whose wgmma path holds a divergent branch (C7520), so the balancing
// conditionals live in start() and finish(), outside the loop.
//
// Usage (consumer warpgroups 1 and 2 of a kernel whose warpgroup 0 is the producer; ids 1..3 belong to
// warpgroup_sync in a 384-thread block):
//
//   WarpgroupTurns<2, 4> turns{wg - 1};
//   if (tiles > 0) turns.start();
//   for (int t = 0; t < tiles; ++t) {
//     turns.wait();
//     ... wgmma_fence, issue S = Q K^T and O += P V, commit ...
//     turns.pass();
//     ... wait for S, softmax (the other warpgroup's wgmmas run meanwhile) ...
//   }
//   if (tiles > 0) turns.finish();
#pragma once

#include "llmk/arch/named_barrier.cuh"

namespace llmk::arch::sm90 {

/// Warpgroups consumer warpgroups taking turns on named barriers FirstId .. FirstId + Warpgroups - 1
/// (example: the file comment).
template <int Warpgroups, int FirstId>
struct WarpgroupTurns {
  static_assert(Warpgroups >= 2 && FirstId >= 1 && FirstId + Warpgroups <= 16, "barrier ids 1..15");
  static constexpr int kThreads = 2 * 128;  // the waiting warpgroup and the passing one

  int index;  // this warpgroup among the ones taking turns: 0..Warpgroups-1

  /// Every thread of every participating warpgroup, once, before the first wait (only when the warpgroups
  /// take at least one turn: without turns nothing may be arrived).
  LLMK_DEVICE void start() const {
    if (index == Warpgroups - 1) named_barrier_arrive(FirstId, kThreads);
  }
  /// Waits until the previous warpgroup passed the turn (warpgroup 0's first turn: start()).
  LLMK_DEVICE void wait() const { named_barrier_sync(FirstId + index, kThreads); }
  /// Passes the turn to the next warpgroup.
  LLMK_DEVICE void pass() const { named_barrier_arrive(FirstId + (index + 1) % Warpgroups, kThreads); }
  /// Every thread of every participating warpgroup, once, after its last turn (when start() ran): warpgroup
  /// 0 takes the turn the last warpgroup passed after its final one.
  LLMK_DEVICE void finish() const {
    if (index == 0) named_barrier_sync(FirstId, kThreads);
  }
};

}  // namespace llmk::arch::sm90
