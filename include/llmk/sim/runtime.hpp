// llmk/sim/runtime.hpp: the CPU SIMT simulator that executes unmodified llmk __global__ kernels.
//
// Model (docs/simulator.md has the full story):
//  - every CUDA thread is a fiber; a block's fibers run on one OS thread; blocks are spread over a pool of
//    OS threads; block order and fiber resume order are shuffled by a seed (LLMK_SIM_SEED);
//  - a fiber runs until it reaches a synchronisation point (__syncthreads, a warp collective) and yields;
//  - __syncthreads completes when every thread of the block has arrived at a barrier; a thread that exits
//    while others wait, or a block where no fiber can run, is reported as a deadlock with every thread's
//    state and source location;
//  - warp collectives are rendezvous of the lanes named in the mask: the last lane to arrive computes for
//    all of them; mask errors are reported with the lanes' source locations;
//  - dynamic shared memory is one heap arena per block, poisoned (0xFF bytes: NaN in every float type) at
//    block start, so a read of never-written shared memory is visible and ASan sees overruns;
//  - cp.async copies snapshot their source at issue, poison their destination, and land at wait_group.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <source_location>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "llmk/sim/async_state.hpp"
#include "llmk/sim/fiber.hpp"
#include "llmk/sim/types.hpp"

namespace llmk::sim {

inline constexpr unsigned kWarpSize = 32;
inline constexpr std::size_t kMaxDynamicSharedBytes = 227 * 1024;  // sm_90's opt-in maximum per block
inline constexpr unsigned char kSharedPoisonByte = 0xFF;           // NaN in fp32, fp16, bf16; -1 in ints

/// Simulator settings, read once from the environment:
///   LLMK_SIM_SEED     seed for block/fiber order shuffling (default 1)
///   LLMK_SIM_THREADS  OS threads that run blocks (default: hardware concurrency, at most 8)
///   LLMK_SIM_STACK_KB fiber stack size in KiB (default 256)
///   LLMK_SIM_TIMEOUT  seconds a launch may take before the watchdog reports the running threads and aborts
///                     (default 300; a thread spinning on another thread's write never yields, see docs)
struct Settings {
  std::uint64_t seed = 1;
  unsigned os_threads = 2;
  std::size_t stack_bytes = 256 * 1024;
  double timeout_seconds = 300.0;

  static const Settings& get() {
    static const Settings s = [] {
      Settings r;
      if (const char* v = std::getenv("LLMK_SIM_SEED")) r.seed = std::strtoull(v, nullptr, 0);
      unsigned hw = std::thread::hardware_concurrency();
      r.os_threads = std::clamp(hw == 0 ? 2u : hw, 1u, 8u);
      if (const char* v = std::getenv("LLMK_SIM_THREADS")) r.os_threads = std::max(1, std::atoi(v));
      if (const char* v = std::getenv("LLMK_SIM_TIMEOUT")) r.timeout_seconds = std::max(1.0, std::atof(v));
      if (const char* v = std::getenv("LLMK_SIM_STACK_KB"))
        r.stack_bytes = std::max<std::size_t>(16, std::strtoull(v, nullptr, 0)) * 1024;
      return r;
    }();
    return s;
  }
};

namespace detail {

enum class WaitState : std::uint8_t {
  kRunnable,
  kBarrier,
  kWarp,
  kActiveMask,
  kMbarrier,
  kNamedBarrier,
  kClusterBarrier,
  kDone,
  kFailed
};

struct Block;

// A pending cp.async copy: source bytes captured at issue, written to shared memory at wait_group.
struct PendingCopy {
  void* dst;
  int cp_size;
  int src_size;
  unsigned char data[16];
};

// One simulated CUDA thread.
struct Thread {
  Block* block = nullptr;
  uint3 thread_idx{};
  unsigned linear = 0;  // x + y*Bx + z*Bx*By
  unsigned warp = 0;
  unsigned lane = 0;
  FiberContext fiber;

  // Bookkeeping shared with other fibers of the block: touched only in LLMK_SIM_BOOKKEEPING functions.
  WaitState state = WaitState::kRunnable;
  std::source_location where{};  // location of the current or last synchronisation point
  int barrier_predicate = 0;
  int barrier_result = 0;
  const char* op = nullptr;  // warp collective name
  bool group_op = false;     // op is a warpgroup instruction (all 128 threads of the warpgroup)
  unsigned mask = 0;
  const void* in = nullptr;
  void* out = nullptr;
  unsigned active_mask_result = 0;
  std::size_t wait_bar = 0;       // kMbarrier: arena offset of the mbarrier waited on (kNamedBarrier: its id)
  unsigned wait_parity = 0;       //            and the parity of the phase waited for
  std::uint64_t woken_phase = 0;  //            the phase whose completion woke it (both kinds)
  std::uint64_t named_arrived[16] = {};  // per named barrier: 1 + the phase of this thread's last arrival
  std::uint64_t cluster_arrived = 0;     // barrier.cluster: 1 + the phase of this thread's last arrival
  bool aborting = false;  // set when the block is abandoned: the fiber unwinds at its suspension point
  // TSan sync objects (their addresses): released by this thread when it arrives at a rendezvous, and by the
  // thread completing the rendezvous for this thread to acquire when it leaves. See
  // rendezvous_acquire_arrivals.
  int tsan_arrive = 0;
  int tsan_leave = 0;

  // Private to this fiber.
  std::vector<PendingCopy> copies_uncommitted;
  std::vector<std::vector<PendingCopy>> copy_groups;  // committed, oldest first
  std::map<std::uint64_t, std::uint64_t> mbar_seen;   // mbarrier serial -> 1 + last phase this thread waited
  std::vector<AsyncStore> stores_uncommitted;         // bulk stores (shared -> global)
  std::vector<std::vector<AsyncStore>> store_groups;  // committed, oldest first
  std::vector<PendingAccumulators> acc_uncommitted;   // wgmma accumulators in flight
  std::vector<std::vector<PendingAccumulators>> acc_groups;
  bool wgmma_fenced = false;  // wgmma.fence since the last wgmma.wait_group
};

// Per-warp synchronisation object (its address is the TSan sync object for that warp's collectives).
struct Warp {
  unsigned lanes_present = 0;  // bit l set when lane l exists in this (possibly partial) warp
};

struct Launch;
struct Cluster;

// One of the 16 named barriers of a block (bar.sync / bar.arrive with a thread count,
// llmk/sim/named_barrier.hpp).
struct NamedBarrier {
  unsigned expected = 0;  // threads of the current phase, from its first arrival (0: no arrival yet)
  unsigned arrived = 0;   // threads arrived in the current phase
  unsigned waiting = 0;   // of them, by bar.sync (suspended until the phase completes)
  std::uint64_t completed = 0;
  std::source_location first_loc{};  // the current phase's first arrival
  std::deque<int> phase_sync;        // TSan sync object of each phase: arrivals release, bar.sync acquires

  int* sync_of(std::uint64_t phase) {
    while (phase_sync.size() <= phase) phase_sync.push_back(0);
    return &phase_sync[static_cast<std::size_t>(phase)];
  }
};

struct Block {
  Launch* launch = nullptr;
  uint3 block_idx{};
  unsigned linear = 0;
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  unsigned barrier_arrived = 0;
  unsigned barrier_epoch = 0;  // __syncthreads completed so far
  std::uint64_t mbarrier_serial = 0;
  AsyncProxyState async;
  NamedBarrier named[16];
  int start_tsan_sync = 0;
  int end_tsan_sync = 0;
  unsigned char* smem = nullptr;
  std::size_t smem_bytes = 0;
  std::string error;  // first failure of this block
  bool failed = false;
  SchedulerContext* sched = nullptr;
  std::mt19937_64 rng;
  Cluster* cluster = nullptr;  // the blocks launched together with it (a cluster of one without clusters)
  unsigned cluster_rank = 0;   // %cluster_ctarank
  bool exited = false;         // every thread of it finished (its shared memory stays until the cluster ends)
};

// The blocks of one thread-block cluster (sm_90), scheduled together on one OS thread so that they can wait
// on each other: barrier.cluster, mbarrier arrivals on a peer's barrier, multicast bulk copies
// (llmk/sim/cluster.hpp).
struct Cluster {
  dim3 dims{1, 1, 1};
  std::vector<Block*> blocks;   // by rank
  unsigned threads = 0;         // all threads of all its blocks
  unsigned arrived = 0;         // barrier.cluster arrivals of the current phase
  std::uint64_t completed = 0;  // barrier.cluster phases completed
  std::deque<int> phase_sync;   // TSan sync object of each phase: arrivals release, waits acquire

  int* sync_of(std::uint64_t phase) {
    SimStateScope scope;
    while (phase_sync.size() <= phase) phase_sync.push_back(0);
    return &phase_sync[static_cast<std::size_t>(phase)];
  }
};

// What a kernel launch shares across OS worker threads.
struct Launch {
  dim3 grid{}, block{};
  dim3 cluster{1, 1, 1};  // blocks per cluster in each dimension (divides grid)
  std::size_t smem_bytes = 0;
  std::function<void()> body;  // runs the kernel for the current thread
  std::atomic<bool> failed{false};
  std::atomic<std::uint64_t> next_block{0};
  std::vector<unsigned> block_order;
  std::uint64_t launch_seed = 0;
  std::string kernel_name;
  std::mutex error_mutex;
  std::string error;
  // The simulated thread each OS worker is running (for the watchdog's report).
  std::unique_ptr<std::atomic<const Thread*>[]> running;
};

inline thread_local Thread* tls_current_thread = nullptr;
inline thread_local Block* tls_current_block = nullptr;

// The scheduler sets the current thread right before each switch; fibers read it (bookkeeping).
LLMK_SIM_BOOKKEEPING void set_current_thread(Thread* t) {
  tls_current_thread = t;
}
LLMK_SIM_BOOKKEEPING Thread* current_thread_or_null() {
  return tls_current_thread;
}

inline Thread& current_thread() {
  Thread* t = current_thread_or_null();
  if (t == nullptr) {
    std::fprintf(stderr, "llmk-sim: a device builtin was called outside a simulated kernel\n");
    std::abort();
  }
  return *t;
}

LLMK_SIM_BOOKKEEPING void set_block_failed(Block& b) {
  b.failed = true;
}
LLMK_SIM_BOOKKEEPING bool block_failed(const Block& b) {
  return b.failed;
}

inline std::string format_dim(const uint3& d) {
  std::ostringstream os;
  os << "(" << d.x << "," << d.y << "," << d.z << ")";
  return os.str();
}
inline std::string format_dim(const dim3& d) {
  std::ostringstream os;
  os << "(" << d.x << "," << d.y << "," << d.z << ")";
  return os.str();
}
inline std::string format_loc(const std::source_location& loc) {
  std::ostringstream os;
  if (loc.line() == 0) return "<unknown location>";
  os << loc.file_name() << ":" << loc.line() << " in " << loc.function_name();
  return os.str();
}

inline std::string thread_name(const Thread& t) {
  std::ostringstream os;
  os << "block " << format_dim(t.block->block_idx) << " thread " << format_dim(t.thread_idx) << " (warp "
     << t.warp << ", lane " << t.lane << ")";
  return os.str();
}

// Records the first failure of a block (and of the launch).
// The scheduler polls `failed` (bookkeeping); it reads `error` only after acquiring the fibers' releases.
inline void record_block_error(Block& b, const std::string& msg) {
  if (b.error.empty()) b.error = msg;
  set_block_failed(b);
  b.launch->failed.store(true, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------------------
// Fiber side.

LLMK_SIM_BOOKKEEPING void set_state(Thread& t, WaitState s) {
  t.state = s;
}
LLMK_SIM_BOOKKEEPING void set_aborting(Thread& t) {
  t.aborting = true;
}
LLMK_SIM_BOOKKEEPING WaitState get_state(const Thread& t) {
  return t.state;
}

// Suspends the calling fiber until the scheduler resumes it.
// Thrown to unwind a fiber's stack (so the objects its frames own are destroyed) up to its entry: by the
// thread that fails, and by every suspended thread of a block that is being abandoned.
struct FiberAbort {};

LLMK_SIM_BOOKKEEPING bool aborting(const Thread& t) {
  return t.aborting;
}

// Publishes the caller's writes (TSan release of its arrival object) and suspends it, touching nothing
// instrumented in between. When the block is being abandoned the fiber resumes only to unwind.
LLMK_SIM_BOOKKEEPING void release_and_yield(Thread& t) {
  hb_release(&t.tsan_arrive);
  switch_to_scheduler(*t.block->sched, t.fiber);
  if (t.aborting) {
    hb_acquire(
        &t.tsan_leave);  // unwinding destroys objects other lanes may have written (collective outputs)
    throw FiberAbort{};
  }
}

// Suspends the caller without any happens-before edge (__activemask and __nanosleep are not memory barriers).
LLMK_SIM_BOOKKEEPING void yield_without_sync(Thread& t) {
  switch_to_scheduler(*t.block->sched, t.fiber);
  if (t.aborting) throw FiberAbort{};
}

// Happens-before of one rendezvous (a barrier or a warp collective), exact to the instance: every participant
// released its own arrival object before suspending; the thread that completes the rendezvous acquires all of
// them, and after computing releases into every participant's leave object, which each participant acquires
// as it leaves. One shared object per block or warp would be wrong: TSan's release accumulates, so a thread
// leaving rendezvous N would also acquire what faster threads released arriving at N + 1, hiding every race
// in the code between two barriers.
LLMK_SIM_BOOKKEEPING void rendezvous_acquire_arrivals([[maybe_unused]] Block& b,
                                                      [[maybe_unused]] unsigned first,
                                                      [[maybe_unused]] unsigned count,
                                                      [[maybe_unused]] unsigned lane_mask) {
#if defined(LLMK_SIM_TSAN)
  for (unsigned i = 0; i < count; ++i)
    if (lane_mask & (1u << (i % 32))) hb_acquire(&b.threads[first + i].tsan_arrive);
#endif
}
LLMK_SIM_BOOKKEEPING void rendezvous_release_leaves([[maybe_unused]] Block& b,
                                                    [[maybe_unused]] unsigned first,
                                                    [[maybe_unused]] unsigned count,
                                                    [[maybe_unused]] unsigned lane_mask) {
#if defined(LLMK_SIM_TSAN)
  for (unsigned i = 0; i < count; ++i)
    if (lane_mask & (1u << (i % 32))) hb_release(&b.threads[first + i].tsan_leave);
#endif
}
LLMK_SIM_BOOKKEEPING void rendezvous_leave([[maybe_unused]] Thread& t) {
  hb_acquire(&t.tsan_leave);
}

LLMK_SIM_BOOKKEEPING void record_thread_failure(Thread& t, const std::string& what,
                                                const std::source_location& loc) {
  std::ostringstream os;
  os << "llmk-sim: " << what << "\n  at " << format_loc(loc) << "\n  by " << thread_name(t) << " of grid "
     << format_dim(t.block->launch->grid) << ", block size " << format_dim(t.block->launch->block)
     << " (LLMK_SIM_SEED=" << Settings::get().seed << ")";
  record_block_error(*t.block, os.str());
  t.where = loc;
}

// Reports a failure of the calling simulated thread and never returns: the block is abandoned.
[[noreturn]] inline void fail_current(const std::string& what, const std::source_location& loc) {
  record_thread_failure(current_thread(), what, loc);
  throw FiberAbort{};
}

// Runs the cp.async copies of one committed group (oldest first).
inline void complete_copy_group(std::vector<PendingCopy>& group) {
  for (PendingCopy& c : group) {
    auto* dst = static_cast<unsigned char*>(c.dst);
    std::memcpy(dst, c.data, static_cast<std::size_t>(c.src_size));
    std::memset(dst + c.src_size, 0, static_cast<std::size_t>(c.cp_size - c.src_size));
  }
}

// --- barrier ---------------------------------------------------------------------------------------------

enum class BarrierReduce { kNone, kCount, kAnd, kOr };

// Returns true when the caller was the last to arrive (and has released everyone).
LLMK_SIM_BOOKKEEPING bool barrier_arrive(Thread& t, int predicate, BarrierReduce reduce,
                                         const std::source_location& loc) {
  Block& b = *t.block;
  t.where = loc;
  t.barrier_predicate = predicate != 0;
  t.state = WaitState::kBarrier;
  ++b.barrier_arrived;
  if (b.barrier_arrived < b.threads.size()) return false;
  // Everybody is here: check that they all wait at the same barrier, compute the reduction, release.
  for (Thread& o : b.threads) {
    if (o.where.line() != loc.line() || std::strcmp(o.where.file_name(), loc.file_name()) != 0) {
      std::ostringstream os;
      os << "barrier divergence: threads of one block wait at different __syncthreads calls: "
         << thread_name(o) << " waits at " << format_loc(o.where);
      fail_current(os.str(), loc);
    }
  }
  int count = 0;
  for (Thread& o : b.threads) count += o.barrier_predicate;
  int result = 0;
  switch (reduce) {
    case BarrierReduce::kNone:
      result = 0;
      break;
    case BarrierReduce::kCount:
      result = count;
      break;
    case BarrierReduce::kAnd:
      result = count == static_cast<int>(b.threads.size());
      break;
    case BarrierReduce::kOr:
      result = count != 0;
      break;
  }
  for (Thread& o : b.threads) {
    o.barrier_result = result;
    o.state = WaitState::kRunnable;
  }
  b.barrier_arrived = 0;
  ++b.barrier_epoch;
  return true;
}

LLMK_SIM_BOOKKEEPING int barrier_result(const Thread& t) {
  return t.barrier_result;
}

inline int block_barrier(int predicate, BarrierReduce reduce, const std::source_location& loc) {
  Thread& t = current_thread();
  if (barrier_arrive(t, predicate, reduce, loc)) {
    const unsigned n = static_cast<unsigned>(t.block->threads.size());
    rendezvous_acquire_arrivals(*t.block, 0, n, 0xffffffffu);
    rendezvous_release_leaves(*t.block, 0, n, 0xffffffffu);
  } else {
    release_and_yield(t);
  }
  rendezvous_leave(t);
  return barrier_result(t);
}

// --- warp collectives ------------------------------------------------------------------------------------

struct CollectiveCheck {
  bool complete = false;
  const void* ins[kWarpSize] = {};
  void* outs[kWarpSize] = {};
};

// Registers the caller at a collective and reports whether every lane of `mask` has arrived at the same one.
LLMK_SIM_BOOKKEEPING void collective_arrive(Thread& t, const char* op, unsigned mask, const void* in,
                                            void* out, const std::source_location& loc,
                                            CollectiveCheck& check) {
  Block& b = *t.block;
  const Warp& w = b.warps[t.warp];
  if ((mask & (1u << t.lane)) == 0) {
    std::ostringstream os;
    os << op << ": mask 0x" << std::hex << mask << std::dec << " does not include the calling lane "
       << t.lane;
    fail_current(os.str(), loc);
  }
  if ((mask & ~w.lanes_present) != 0) {
    std::ostringstream os;
    os << op << ": mask 0x" << std::hex << mask << " names lanes that do not exist in this warp (present: 0x"
       << w.lanes_present << ")";
    fail_current(os.str(), loc);
  }
  t.where = loc;
  t.op = op;
  t.group_op = false;
  t.mask = mask;
  t.in = in;
  t.out = out;
  t.state = WaitState::kWarp;
  const unsigned base = t.warp * kWarpSize;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((mask & (1u << l)) == 0) continue;
    const Thread& o = b.threads[base + l];
    if (o.state != WaitState::kWarp) return;  // someone is still on the way
  }
  // Every lane of the mask waits at a collective: they must all be the same one with the same mask.
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((mask & (1u << l)) == 0) continue;
    const Thread& o = b.threads[base + l];
    if (o.mask != mask || std::strcmp(o.op, op) != 0) {
      if ((o.mask & (1u << t.lane)) == 0) return;  // o waits for other lanes; it may come back later
      std::ostringstream os;
      os << "warp collective mismatch: lane " << t.lane << " calls " << op << " with mask 0x" << std::hex
         << mask << std::dec << " but lane " << l << " waits in " << o.op << " with mask 0x" << std::hex
         << o.mask << std::dec << " at " << format_loc(o.where);
      fail_current(os.str(), loc);
    }
  }
  check.complete = true;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((mask & (1u << l)) == 0) continue;
    check.ins[l] = b.threads[base + l].in;
    check.outs[l] = b.threads[base + l].out;
  }
}

LLMK_SIM_BOOKKEEPING void collective_release(Thread& t, unsigned mask) {
  const unsigned base = t.warp * kWarpSize;
  for (unsigned l = 0; l < kWarpSize; ++l)
    if (mask & (1u << l)) t.block->threads[base + l].state = WaitState::kRunnable;
}

}  // namespace detail

/// Lane index of the calling simulated thread (linear thread index modulo 32).
inline unsigned lane_id() {
  return detail::current_thread().lane;
}

/// Aborts the current launch with a report naming the calling thread and `loc`.
[[noreturn]] inline void fail(const std::string& what,
                              std::source_location loc = std::source_location::current()) {
  detail::fail_current(what, loc);
}

/// Warp rendezvous: every lane named in `mask` must call with the same `op` and `mask`. The lane that arrives
/// last runs `compute(ins, outs)` with arrays of 32 pointers to each lane's `In` and `Out` (nullptr for lanes
/// outside the mask). Returns the caller's `Out`.
///
///   unsigned sum = llmk::sim::warp_collective<unsigned>("sum", 0xffffffffu, v,
///       [](const unsigned* const* in, unsigned* const* out) { ... });
template <class Out, class In, class Compute>
Out warp_collective(const char* op, unsigned mask, const In& in, Compute&& compute,
                    std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  Out result{};
  detail::CollectiveCheck check;
  detail::collective_arrive(t, op, mask, &in, &result, loc, check);
  if (check.complete) {
    const unsigned first = t.warp * kWarpSize;
    detail::rendezvous_acquire_arrivals(*t.block, first, kWarpSize, mask);  // the other lanes' inputs
    compute(reinterpret_cast<const In* const*>(check.ins), reinterpret_cast<Out* const*>(check.outs));
    detail::rendezvous_release_leaves(*t.block, first, kWarpSize, mask);  // their outputs
    detail::collective_release(t, mask);
  } else {
    detail::release_and_yield(t);
  }
  detail::rendezvous_leave(t);
  return result;
}

namespace detail {

inline constexpr unsigned kWarpgroupSize = 128;

struct GroupCheck {
  bool complete = false;
  const void* ins[kWarpgroupSize] = {};
  void* outs[kWarpgroupSize] = {};
};

// Registers the caller at a warpgroup instruction; complete when all 128 threads of its warpgroup wait at
// one.
LLMK_SIM_BOOKKEEPING void group_arrive(Thread& t, const char* op, const void* in, void* out,
                                       const std::source_location& loc, GroupCheck& check) {
  Block& b = *t.block;
  const unsigned first = t.linear / kWarpgroupSize * kWarpgroupSize;
  if (first + kWarpgroupSize > b.threads.size()) {
    std::ostringstream os;
    os << op << ": warpgroup instructions need the 4 warps " << first / kWarpSize << ".."
       << first / kWarpSize + 3 << " (threads " << first << ".." << first + kWarpgroupSize - 1
       << "), but the block has only " << b.threads.size() << " threads";
    fail_current(os.str(), loc);
  }
  t.where = loc;
  t.op = op;
  t.group_op = true;
  t.mask = 0xFFFFFFFFu;
  t.in = in;
  t.out = out;
  t.state = WaitState::kWarp;
  for (unsigned i = first; i < first + kWarpgroupSize; ++i) {
    const Thread& o = b.threads[i];
    if (o.state != WaitState::kWarp || !o.group_op) return;  // someone is still on the way
  }
  // .aligned: every thread of the warpgroup executes the same instruction.
  for (unsigned i = first; i < first + kWarpgroupSize; ++i) {
    const Thread& o = b.threads[i];
    if (std::strcmp(o.op, op) != 0 || o.where.line() != loc.line() ||
        std::strcmp(o.where.file_name(), loc.file_name()) != 0) {
      std::ostringstream os;
      os << "warpgroup instruction mismatch (.aligned): " << op << " here, but thread " << i << " waits in "
         << o.op << " at " << format_loc(o.where);
      fail_current(os.str(), loc);
    }
  }
  check.complete = true;
  for (unsigned i = 0; i < kWarpgroupSize; ++i) {
    check.ins[i] = b.threads[first + i].in;
    check.outs[i] = b.threads[first + i].out;
  }
}

LLMK_SIM_BOOKKEEPING void group_release(Thread& t) {
  const unsigned first = t.linear / kWarpgroupSize * kWarpgroupSize;
  for (unsigned i = first; i < first + kWarpgroupSize; ++i) t.block->threads[i].state = WaitState::kRunnable;
}

}  // namespace detail

/// Warpgroup rendezvous (wgmma and the other .sync.aligned warpgroup instructions): the 128 threads of the
/// caller's warpgroup (warps 4k..4k+3) must all reach the same `op` at the same source line. The last to
/// arrive runs `compute(ins, outs)` over arrays of 128 pointers (index = thread within the warpgroup).
template <class Out, class In, class Compute>
Out warpgroup_collective(const char* op, const In& in, Compute&& compute,
                         std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  Out result{};
  detail::GroupCheck check;
  detail::group_arrive(t, op, &in, &result, loc, check);
  if (check.complete) {
    const unsigned first = t.linear / detail::kWarpgroupSize * detail::kWarpgroupSize;
    detail::rendezvous_acquire_arrivals(*t.block, first, detail::kWarpgroupSize, 0xffffffffu);
    compute(reinterpret_cast<const In* const*>(check.ins), reinterpret_cast<Out* const*>(check.outs));
    detail::rendezvous_release_leaves(*t.block, first, detail::kWarpgroupSize, 0xffffffffu);
    detail::group_release(t);
  } else {
    detail::release_and_yield(t);
  }
  detail::rendezvous_leave(t);
  return result;
}

/// True when [p, p + bytes) lies inside the current block's dynamic shared-memory arena.
inline bool is_shared(const void* p, std::size_t bytes) {
  const detail::Block* b = detail::current_thread().block;
  auto* c = static_cast<const unsigned char*>(p);
  return c >= b->smem && bytes <= b->smem_bytes && c <= b->smem + (b->smem_bytes - bytes);
}

/// Base of the current block's dynamic shared memory (nullptr when the launch asked for none).
inline unsigned char* dynamic_shared_base() {
  return detail::current_thread().block->smem;
}
inline std::size_t dynamic_shared_size() {
  return detail::current_thread().block->smem_bytes;
}

/// cp.async: captures the source now, poisons the destination now, writes it at the wait of its group.
inline void cp_async(void* dst, const void* src, int cp_size, int src_size,
                     std::source_location loc = std::source_location::current()) {
  if (cp_size != 4 && cp_size != 8 && cp_size != 16)
    fail("cp.async: copy size must be 4, 8 or 16 bytes", loc);
  if (src_size < 0 || src_size > cp_size) fail("cp.async: src_size must be in [0, copy size]", loc);
  if (!is_shared(dst, static_cast<std::size_t>(cp_size)))
    fail("cp.async: destination is not inside the block's shared-memory arena", loc);
  if (reinterpret_cast<std::uintptr_t>(dst) % static_cast<unsigned>(cp_size) != 0 ||
      reinterpret_cast<std::uintptr_t>(src) % static_cast<unsigned>(cp_size) != 0)
    fail("cp.async: source and destination must be aligned to the copy size", loc);
  detail::PendingCopy c{dst, cp_size, src_size, {}};
  if (src_size > 0) std::memcpy(c.data, src, static_cast<std::size_t>(src_size));
  std::memset(dst, kSharedPoisonByte, static_cast<std::size_t>(cp_size));
  detail::current_thread().copies_uncommitted.push_back(c);
}

/// cp.async.commit_group: closes the current group (an empty group is allowed).
inline void cp_async_commit() {
  detail::Thread& t = detail::current_thread();
  t.copy_groups.push_back(std::move(t.copies_uncommitted));
  t.copies_uncommitted.clear();
}

/// cp.async.wait_group n: completes every committed group except the newest n.
inline void cp_async_wait_group(int n) {
  detail::Thread& t = detail::current_thread();
  const std::size_t keep = static_cast<std::size_t>(std::max(n, 0));
  while (t.copy_groups.size() > keep) {
    detail::complete_copy_group(t.copy_groups.front());
    t.copy_groups.erase(t.copy_groups.begin());
  }
}

}  // namespace llmk::sim

#include "llmk/sim/async_proxy.hpp"
#include "llmk/sim/cluster.hpp"
#include "llmk/sim/named_barrier.hpp"
#include "llmk/sim/scheduler.hpp"
