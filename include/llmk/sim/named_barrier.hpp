// llmk/sim/named_barrier.hpp: the 16 named barriers of a block in the simulator (bar.sync / bar.arrive
// with a thread count; included by llmk/sim/runtime.hpp). The atoms are in llmk/arch/named_barrier.cuh.
//
// Model (PTX ISA "bar, barrier"): a phase of barrier `id` completes when `threads` threads have arrived;
// bar.sync arrives and waits for the phase, bar.arrive arrives and goes on. The simulator counts threads
// (the GPU counts warps of 32: the same as long as whole warps arrive, which a partial count turns into a
// reported deadlock) and reports, naming the barrier and the lines:
//  - a thread count that is 0, not a multiple of 32, larger than the block, or different from the one the
//    phase's first arrival gave;
//  - an id outside 1..15 (0 is __syncthreads') or one that warpgroup_sync uses (1..number of warpgroups);
//  - a thread arriving twice in one phase (its second arrival would count for the next phase on the GPU:
//    a ping-pong that signals twice before the other side waited);
//  - a phase completed by bar.arrive alone (no thread waited: the arrivals order nothing);
//  - a block that exits with a phase partly arrived (an arrival that no bar.sync ever consumed);
//  - a bar.sync that never completes (a deadlock report that lists the barriers and their counts).
// Happens-before: every arrival releases into its phase's sync object, every bar.sync acquires it when
// the phase completes, so data passed from an arriving warpgroup to a waiting one is ordered in TSan.
#pragma once

#include <sstream>
#include <string>

namespace llmk::sim {
namespace detail {

inline constexpr unsigned kNamedBarriers = 16;

inline std::string describe_named_barrier(unsigned id, const NamedBarrier& nb) {
  std::ostringstream os;
  os << "named barrier " << id << " (phase " << nb.completed << ": " << nb.arrived << " of " << nb.expected
     << " threads arrived, " << nb.waiting << " of them waiting, the first at " << format_loc(nb.first_loc)
     << ")";
  return os.str();
}

struct NamedArrival {
  std::string error;
  bool completed = false;  // this arrival completed the phase
  std::uint64_t phase = 0;
};

// One thread's arrival (bookkeeping: the block's barrier state is shared by its fibers).
LLMK_SIM_BOOKKEEPING NamedArrival named_barrier_arrival(Thread& t, unsigned id, unsigned threads, bool wait,
                                                        const char* op, const std::source_location& loc) {
  SimStateScope scope;
  Block& b = *t.block;
  NamedBarrier& nb = b.named[id];
  NamedArrival r;
  if (nb.expected == 0) {
    nb.expected = threads;
    nb.first_loc = loc;
  } else if (nb.expected != threads) {
    r.error = std::string(op) + " " + std::to_string(id) + ", " + std::to_string(threads) +
              ": the thread count differs from the " + std::to_string(nb.expected) +
              " of this phase's first " + "arrival at " + format_loc(nb.first_loc);
    return r;
  }
  if (t.named_arrived[id] == nb.completed + 1) {
    r.error = std::string(op) + " " + std::to_string(id) +
              ": the thread arrives a second time in one phase of " + describe_named_barrier(id, nb) +
              " (on the GPU it would count for the next phase)";
    return r;
  }
  t.named_arrived[id] = nb.completed + 1;
  r.phase = nb.completed;
  hb_release(nb.sync_of(nb.completed));
  ++nb.arrived;
  if (nb.arrived < nb.expected) {
    if (wait) {
      ++nb.waiting;
      t.where = loc;
      t.wait_bar = id;
      t.state = WaitState::kNamedBarrier;
    }
    return r;
  }
  if (!wait && nb.waiting == 0) {
    r.error = std::string(op) + " " + std::to_string(id) + " completes a phase of " +
              describe_named_barrier(id, nb) +
              " that no thread waited for with bar.sync: these arrivals order nothing (an over-arrival)";
    return r;
  }
  r.completed = true;
  for (Thread& o : b.threads) {
    if (o.state == WaitState::kNamedBarrier && o.wait_bar == id) {
      o.woken_phase = nb.completed;
      o.state = WaitState::kRunnable;
    }
  }
  ++nb.completed;
  nb.expected = nb.arrived = nb.waiting = 0;
  return r;
}

LLMK_SIM_BOOKKEEPING void named_barrier_acquire(Block& b, unsigned id, std::uint64_t phase) {
  SimStateScope scope;
  hb_acquire(b.named[id].sync_of(phase));
}

LLMK_SIM_BOOKKEEPING std::uint64_t woken_phase(const Thread& t) {
  return t.woken_phase;
}

// The named barriers with a phase partly arrived (block exit and deadlock reports).
LLMK_SIM_BOOKKEEPING std::string describe_pending_named_barriers(const Block& b) {
  SimStateScope scope;
  std::ostringstream os;
  for (unsigned id = 0; id < kNamedBarriers; ++id)
    if (b.named[id].arrived > 0) os << "\n  " << describe_named_barrier(id, b.named[id]);
  return os.str();
}

}  // namespace detail

/// bar.sync id, threads (wait = true) or bar.arrive id, threads (wait = false) by the calling thread.
inline void named_barrier(unsigned id, unsigned threads, bool wait,
                          std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  const char* op = wait ? "bar.sync" : "bar.arrive";
  const unsigned block_threads = static_cast<unsigned>(t.block->threads.size());
  const unsigned warpgroups = block_threads / detail::kWarpgroupSize;
  if (id == 0 || id >= detail::kNamedBarriers)
    fail(std::string(op) + " " + std::to_string(id) + ": named barriers are 1..15 (0 is __syncthreads')",
         loc);
  if (id <= warpgroups)
    fail(std::string(op) + " " + std::to_string(id) + ": barriers 1.." + std::to_string(warpgroups) +
             " belong to warpgroup_sync in a block of " + std::to_string(block_threads) + " threads",
         loc);
  const unsigned rounded = (block_threads + kWarpSize - 1) / kWarpSize * kWarpSize;
  if (threads == 0 || threads % kWarpSize != 0 || threads > rounded)
    fail(std::string(op) + " " + std::to_string(id) + ", " + std::to_string(threads) +
             ": the thread count must be a non-zero multiple of 32, at most the block's " +
             std::to_string(rounded),
         loc);
  const detail::NamedArrival a = detail::named_barrier_arrival(t, id, threads, wait, op, loc);
  if (!a.error.empty()) fail(a.error, loc);
  if (!wait) return;
  if (a.completed) {
    detail::named_barrier_acquire(*t.block, id, a.phase);
    return;
  }
  detail::yield_without_sync(t);  // the arrival released; resumed when the phase completes
  detail::named_barrier_acquire(*t.block, id, detail::woken_phase(t));
}

}  // namespace llmk::sim
