// llmk/sim/async_state.hpp: the simulator's state for Hopper's asynchronous proxy (one per block).
//
// Model (docs/hopper.md, "The simulator's model of the async proxy"):
//  - mbarrier objects live in shared memory (8 bytes, which hold a tag the simulator checks); their state is
//  kept
//    here, keyed by their offset in the block's arena: arrival count, pending arrivals, tx-count, completed
//    phases;
//  - bulk copies (cp.async.bulk, TMA tensor loads) capture their source at issue, poison their destination,
//  and
//    land later at a random scheduling round (or when nothing else can run), then complete_tx their mbarrier;
//  - the async proxy sees shared memory through its own view: written by bulk copies, and refreshed from the
//    generic proxy's bytes by fence.proxy.async. A wgmma or TMA store that reads bytes where the two views
//    differ read something ordinary stores wrote after the last fence: reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <source_location>
#include <utility>
#include <vector>

#include "llmk/sim/fiber.hpp"

namespace llmk::sim::detail {

// The 8 bytes of an initialised mbarrier hold this tag ("LLMKMBAR"): an ordinary store over it is detected.
inline constexpr std::uint64_t kMbarrierTag = 0x4C4C4D4B4D424152ull;

struct Mbarrier {
  std::size_t offset = 0;       // in the block's shared arena
  std::uint32_t count = 0;      // arrivals per phase (mbarrier.init)
  std::uint32_t pending = 0;    // arrivals the current phase still needs
  std::int64_t tx = 0;          // tx-count of the current phase (bytes expected minus bytes landed)
  std::uint64_t completed = 0;  // phases completed so far; the current phase's parity is completed & 1
  unsigned init_epoch = 0;      // the block's barrier epoch at init (other threads need a later one)
  unsigned init_thread = 0;     // linear index of the initialising thread
  std::uint64_t init_cluster_phase = 0;  // barrier.cluster phases completed at init (peers need a later one)
  std::uint64_t serial = 0;              // distinguishes re-initialisations of the same address
  bool init_fenced = false;              // its init thread has fenced since (bulk copies may signal it)
  std::uint64_t copy_phase = 0;          // 1 + the phase the last landed bulk copy counted for (0: none)
  std::uint64_t waited_phase = 0;        // 1 + the latest phase some thread waited for (0: none)
  std::source_location copy_loc{};       // where that copy was issued
  std::source_location init_loc{};
  std::deque<int> phase_sync;  // TSan sync object of each phase: its arrivals release, its waiters acquire

  int* sync_of(std::uint64_t phase) {
    SimStateScope scope;
    while (phase_sync.size() <= phase) phase_sync.push_back(0);
    return &phase_sync[static_cast<std::size_t>(phase)];
  }
};

// A bulk copy into shared memory in flight: its bytes, in their final shared-memory order, land at once.
struct AsyncLoad {
  std::size_t dst = 0;  // offset in the arena
  std::vector<unsigned char> bytes;
  std::size_t bar = 0;  // offset of the mbarrier that its landing complete_tx's
  int issue_sync = 0;   // TSan: released by the issuing thread, acquired by the landing
  std::source_location loc{};
  unsigned thread = 0;
};

struct AsyncProxyState {
  std::map<std::size_t, std::unique_ptr<Mbarrier>> barriers;  // by arena offset (stable addresses)
  std::vector<std::unique_ptr<AsyncLoad>> in_flight;
  std::unique_ptr<unsigned char[]> view;  // the async proxy's view of shared memory (allocated on first use)
};

// A bulk store (cp.async.bulk or TMA, shared -> global) of one thread, pending until its bulk group is waited
// for.
struct AsyncStore {
  std::size_t src = 0;                      // offset of its shared source in the arena
  std::vector<unsigned char> src_snapshot;  // the source as read at issue: unchanged until wait_group.read
  bool source_released = false;             // a wait_group.read covered it
  std::vector<std::pair<unsigned char*, std::size_t>> runs;  // global destination runs
  std::vector<unsigned char> data;                           // their bytes, concatenated
  std::source_location loc{};
};

// The shared-memory bytes one wgmma read (arena offsets and values): they must not change before the
// wgmma.wait_group that covers it, since the GPU may read them at any time until then.
struct OperandSnapshot {
  std::vector<std::uint32_t> offsets;
  std::vector<unsigned char> bytes;
};

// wgmma accumulator writes of one thread, applied at wgmma.wait_group.
struct PendingAccumulators {
  void* regs = nullptr;  // the accumulator array the wgmma named
  std::vector<std::uint32_t> values;
  std::shared_ptr<const OperandSnapshot> operands;  // shared by the warpgroup's 128 threads
  std::source_location loc{};
};

}  // namespace llmk::sim::detail
