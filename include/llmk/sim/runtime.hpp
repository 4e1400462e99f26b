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

enum class WaitState : std::uint8_t { kRunnable, kBarrier, kWarp, kActiveMask, kDone, kFailed };

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
  unsigned mask = 0;
  const void* in = nullptr;
  void* out = nullptr;
  unsigned active_mask_result = 0;
  bool aborting = false;  // set when the block is abandoned: the fiber unwinds at its suspension point
  // TSan sync objects (their addresses): released by this thread when it arrives at a rendezvous, and by the
  // thread completing the rendezvous for this thread to acquire when it leaves. See
  // rendezvous_acquire_arrivals.
  int tsan_arrive = 0;
  int tsan_leave = 0;

  // Private to this fiber.
  std::vector<PendingCopy> copies_uncommitted;
  std::vector<std::vector<PendingCopy>> copy_groups;  // committed, oldest first
};

// Per-warp synchronisation object (its address is the TSan sync object for that warp's collectives).
struct Warp {
  unsigned lanes_present = 0;  // bit l set when lane l exists in this (possibly partial) warp
};

struct Launch;

struct Block {
  Launch* launch = nullptr;
  uint3 block_idx{};
  unsigned linear = 0;
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  unsigned barrier_arrived = 0;
  int start_tsan_sync = 0;
  int end_tsan_sync = 0;
  unsigned char* smem = nullptr;
  std::size_t smem_bytes = 0;
  std::string error;  // first failure of this block
  bool failed = false;
  SchedulerContext* sched = nullptr;
  std::mt19937_64 rng;
};

// What a kernel launch shares across OS worker threads.
struct Launch {
  dim3 grid{}, block{};
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

namespace detail {

// ---------------------------------------------------------------------------------------------------------
// Scheduler side.

// The fiber's last steps: after the release below nothing of the block may be touched by instrumented code,
// since the scheduler frees the block as soon as it acquires.
[[noreturn]] LLMK_SIM_BOOKKEEPING void finish_fiber(Thread& self, bool failed) {
  hb_release(&self.block->end_tsan_sync);
  self.state = failed ? WaitState::kFailed : WaitState::kDone;
  self.fiber.dying = true;
  switch_to_scheduler(*self.block->sched, self.fiber);
  std::abort();  // unreachable: a finished fiber is never resumed
}

inline void fiber_entry(bctx::transfer_t t) {
  Thread& self = *static_cast<Thread*>(t.data);
  fiber_landed(*self.block->sched, t);
  hb_acquire(&self.block->start_tsan_sync);
  bool failed = aborting(self);  // the block was abandoned before this thread ever ran
  if (!failed) try {
      self.block->launch->body();
    } catch (const FiberAbort&) {
      failed = true;
    } catch (const std::exception& e) {
      record_thread_failure(self, std::string("uncaught C++ exception in kernel: ") + e.what(), self.where);
      failed = true;
    } catch (...) {
      record_thread_failure(self, "uncaught C++ exception in kernel", self.where);
      failed = true;
    }
  if (!failed) {
    // Copies never waited for still land (as on the GPU); reading them without a wait was the bug.
    cp_async_commit();
    cp_async_wait_group(0);
  }
  finish_fiber(self, failed);
}

struct ThreadSnapshot {
  WaitState state;
  std::source_location where;
  const char* op;
  unsigned mask;
};

LLMK_SIM_BOOKKEEPING ThreadSnapshot snapshot(const Thread& t) {
  return {t.state, t.where, t.op, t.mask};
}

inline const char* state_name(WaitState s) {
  switch (s) {
    case WaitState::kRunnable:
      return "runnable";
    case WaitState::kBarrier:
      return "waits at __syncthreads";
    case WaitState::kWarp:
      return "waits in a warp collective";
    case WaitState::kActiveMask:
      return "waits in __activemask";
    case WaitState::kDone:
      return "exited";
    case WaitState::kFailed:
      return "failed";
  }
  return "?";
}

// Groups consecutive threads in the same state at the same place into one line of the report.
inline std::string describe_block_threads(const Block& b) {
  std::ostringstream os;
  std::size_t i = 0;
  const std::size_t n = b.threads.size();
  while (i < n) {
    ThreadSnapshot s = snapshot(b.threads[i]);
    std::size_t j = i + 1;
    while (j < n) {
      ThreadSnapshot o = snapshot(b.threads[j]);
      bool same = o.state == s.state && o.where.line() == s.where.line() &&
                  std::strcmp(o.where.file_name(), s.where.file_name()) == 0 && o.mask == s.mask;
      if (!same) break;
      ++j;
    }
    os << "\n  threads " << format_dim(b.threads[i].thread_idx) << ".."
       << format_dim(b.threads[j - 1].thread_idx) << " (linear " << i << ".." << j - 1
       << "): " << state_name(s.state);
    if (s.state == WaitState::kWarp)
      os << " " << s.op << " (mask 0x" << std::hex << s.mask << std::dec << ")";
    if (s.state == WaitState::kDone)
      os << (s.where.line() ? " after its last synchronisation at " + format_loc(s.where) : std::string());
    else if (s.where.line())
      os << " at " << format_loc(s.where);
    i = j;
  }
  return os.str();
}

// No fiber can run: resolve pending __activemask calls, or report the deadlock. Returns true on progress.
LLMK_SIM_BOOKKEEPING bool resolve_quiescence(Block& b) {
  bool progress = false;
  for (Thread& t : b.threads) {
    if (t.state != WaitState::kActiveMask) continue;
    // The lanes of this warp that wait at the same __activemask form the active mask.
    unsigned m = 0;
    const unsigned base = t.warp * kWarpSize;
    for (unsigned l = 0; l < kWarpSize && base + l < b.threads.size(); ++l) {
      const Thread& o = b.threads[base + l];
      if (o.state == WaitState::kActiveMask && o.where.line() == t.where.line() &&
          std::strcmp(o.where.file_name(), t.where.file_name()) == 0)
        m |= 1u << l;
    }
    for (unsigned l = 0; l < kWarpSize; ++l) {
      if (m & (1u << l)) {
        b.threads[base + l].active_mask_result = m;
        b.threads[base + l].state = WaitState::kRunnable;
      }
    }
    progress = true;
  }
  return progress;
}

inline std::string deadlock_report(const Block& b) {
  std::ostringstream os;
  unsigned at_barrier = 0, exited = 0, in_warp = 0;
  for (const Thread& t : b.threads) {
    ThreadSnapshot s = snapshot(t);
    at_barrier += s.state == WaitState::kBarrier;
    exited += s.state == WaitState::kDone;
    in_warp += s.state == WaitState::kWarp;
  }
  os << "llmk-sim: deadlock in block " << format_dim(b.block_idx) << " of grid " << format_dim(b.launch->grid)
     << ", block size " << format_dim(b.launch->block) << " (kernel " << b.launch->kernel_name
     << ", LLMK_SIM_SEED=" << Settings::get().seed << "): ";
  if (at_barrier > 0)
    os << "barrier divergence: " << at_barrier << " of " << b.threads.size()
       << " threads wait at __syncthreads, " << exited << " exited, " << in_warp
       << " wait in warp collectives";
  else
    os << "warp collective never completes: a lane named in its mask never arrives (llmk requires every lane "
          "named in a mask to reach the collective; a lane that exited does not count as arrived): "
       << in_warp << " threads wait in warp collectives, " << exited << " exited";
  os << describe_block_threads(b);
  return os.str();
}

// Runs one block to completion (or failure) on the calling OS thread.
inline void run_block(Launch& launch, unsigned block_linear, SchedulerContext& sched, unsigned worker) {
  const Settings& settings = Settings::get();
  Block b;
  b.launch = &launch;
  b.sched = &sched;
  b.linear = block_linear;
  b.block_idx = uint3{block_linear % launch.grid.x, (block_linear / launch.grid.x) % launch.grid.y,
                      block_linear / (launch.grid.x * launch.grid.y)};
  b.rng.seed(launch.launch_seed ^ (0x9E3779B97F4A7C15ull * (block_linear + 1)));
  const unsigned nthreads = launch.block.x * launch.block.y * launch.block.z;
  b.threads.resize(nthreads);
  b.warps.resize((nthreads + kWarpSize - 1) / kWarpSize);
  for (unsigned i = 0; i < nthreads; ++i) {
    Thread& t = b.threads[i];
    t.block = &b;
    t.linear = i;
    t.thread_idx = uint3{i % launch.block.x, (i / launch.block.x) % launch.block.y,
                         i / (launch.block.x * launch.block.y)};
    t.warp = i / kWarpSize;
    t.lane = i % kWarpSize;
    b.warps[t.warp].lanes_present |= 1u << t.lane;
  }
  // Shared memory: exact-size heap arena so ASan catches an overrun by a single byte.
  std::unique_ptr<unsigned char[]> smem_owner;
  if (launch.smem_bytes > 0) {
    b.smem = static_cast<unsigned char*>(::operator new (launch.smem_bytes, std::align_val_t{128}));
    std::memset(b.smem, kSharedPoisonByte, launch.smem_bytes);
    b.smem_bytes = launch.smem_bytes;
  }
  for (Thread& t : b.threads) {
    fiber_create(t.fiber, settings.stack_bytes, fiber_entry);
#if defined(LLMK_SIM_TSAN)
    // TSan reports then say which simulated thread raced ("Thread T12 'llmk-sim block (0,0,0) thread
    // (5,0,0)'").
    const std::string name =
        "llmk-sim block " + format_dim(b.block_idx) + " thread " + format_dim(t.thread_idx);
    __tsan_set_fiber_name(t.fiber.tsan_fiber, name.c_str());
#endif
  }

  tls_current_block = &b;
  hb_release(&b.start_tsan_sync);
  std::vector<Thread*> runnable;
  runnable.reserve(nthreads);
  // Warps of a real block do not advance in lockstep. Now and then one warp is held back for a few rounds
  // while the others run ahead of it (as far as the next barrier lets them), so that reusing a shared buffer
  // another warp may still be reading, without a barrier in between, reads poison here instead of passing.
  const unsigned nwarps = static_cast<unsigned>(b.warps.size());
  unsigned held_warp = ~0u, hold_rounds = 0;
  for (;;) {
    if (block_failed(b)) break;
    if (launch.failed.load(std::memory_order_relaxed)) break;  // another block failed: stop early
    if (nwarps > 1 && hold_rounds-- == 0) {
      const bool hold = (b.rng() & 1u) != 0;
      held_warp = hold ? static_cast<unsigned>(b.rng() % nwarps) : ~0u;
      hold_rounds = static_cast<unsigned>(b.rng() % (hold ? 16u : 4u));
    }
    runnable.clear();
    unsigned live = 0, held_runnable = 0;
    for (Thread& t : b.threads) {
      WaitState s = get_state(t);
      if (s == WaitState::kRunnable) {
        if (t.warp == held_warp)
          ++held_runnable;
        else
          runnable.push_back(&t);
      }
      if (s != WaitState::kDone) ++live;
    }
    if (live == 0) break;
    if (runnable.empty() && held_runnable > 0) {  // only the held warp can move: let it
      held_warp = ~0u;
      hold_rounds = 0;
      continue;
    }
    if (runnable.empty()) {
      if (resolve_quiescence(b)) continue;
      record_block_error(b, deadlock_report(b));
      break;
    }
    std::shuffle(runnable.begin(), runnable.end(), b.rng);
    for (Thread* t : runnable) {
      if (get_state(*t) != WaitState::kRunnable) continue;
      set_current_thread(t);
      launch.running[worker].store(t, std::memory_order_relaxed);
      switch_to_fiber(sched, t->fiber, t);
      set_current_thread(nullptr);
      if (block_failed(b)) break;
    }
  }
  // Threads still suspended (the block failed, or another block did) are resumed once with `aborting` set:
  // they unwind from their suspension point, destroying what their frames own, and finish.
  for (Thread& t : b.threads) {
    const WaitState s = get_state(t);
    if (s == WaitState::kDone || s == WaitState::kFailed) continue;
    set_aborting(t);
    set_current_thread(&t);
    switch_to_fiber(sched, t.fiber, &t);
    set_current_thread(nullptr);
  }
  hb_acquire(&b.end_tsan_sync);  // every fiber, finished or unwound, released it last
  tls_current_block = nullptr;
  for (Thread& t : b.threads) fiber_destroy(t.fiber);
  if (b.smem) ::operator delete (b.smem, std::align_val_t{128});
  if (!b.error.empty()) {
    std::lock_guard<std::mutex> lock(launch.error_mutex);
    if (launch.error.empty()) launch.error = b.error;
  }
}

#if defined(LLMK_SIM_ASAN)
// ASan names OS threads only; when it aborts on a kernel's bad access, say which simulated thread made it.
inline void report_simulated_thread_on_death() {
  Thread* t = current_thread_or_null();
  if (t == nullptr) return;
  std::fprintf(stderr,
               "llmk-sim: the access reported above was made by %s in kernel %s (last sync point: %s)\n",
               thread_name(*t).c_str(), t->block->launch->kernel_name.c_str(), format_loc(t->where).c_str());
}
#endif

inline void install_sanitizer_hooks() {
#if defined(LLMK_SIM_ASAN)
  static const bool installed = [] {
    __sanitizer_set_death_callback(report_simulated_thread_on_death);
    return true;
  }();
  (void)installed;
#endif
}

inline void worker_loop(Launch& launch, unsigned worker) {
  SchedulerContext sched;
  scheduler_init(sched);
  const std::uint64_t nblocks = launch.block_order.size();
  for (;;) {
    if (launch.failed.load(std::memory_order_relaxed)) break;
    std::uint64_t i = launch.next_block.fetch_add(1, std::memory_order_relaxed);
    if (i >= nblocks) break;
    run_block(launch, launch.block_order[i], sched, worker);
  }
  launch.running[worker].store(nullptr, std::memory_order_relaxed);
}

// The simulator switches threads only at synchronisation points, so a thread spinning on a value another
// thread of its block has yet to write never lets that thread run. Rather than hang, the watchdog reports
// which simulated threads were running when the launch exceeded LLMK_SIM_TIMEOUT, and aborts the process.
class Watchdog {
 public:
  Watchdog(Launch& launch, unsigned workers, double seconds) {
    thread_ = std::thread([this, &launch, workers, seconds] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) return;
      std::fprintf(
          stderr,
          "llmk-sim: launch of %s still running after %.0f s (LLMK_SIM_TIMEOUT). The simulator switches "
          "threads only at synchronisation points: a thread spinning on another thread's write without "
          "__syncthreads, __syncwarp or __nanosleep never yields. Running now:\n",
          launch.kernel_name.c_str(), seconds);
      for (unsigned w = 0; w < workers; ++w)
        if (const Thread* t = launch.running[w].load(std::memory_order_relaxed))
          std::fprintf(stderr, "  %s, last synchronisation point %s\n", thread_name(*t).c_str(),
                       format_loc(t->where).c_str());
      std::abort();
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

inline std::atomic<std::uint64_t>& launch_counter() {
  static std::atomic<std::uint64_t> counter{0};
  return counter;
}

}  // namespace detail

/// Result of a simulated launch: empty error string on success.
struct LaunchResult {
  std::string error;
  bool ok() const { return error.empty(); }
};

/// Runs `kernel(args...)` for every thread of the grid. Synchronous: returns when all blocks finished.
/// Arguments are converted to the kernel's parameter types once (as the CUDA runtime copies them) and
/// every thread receives its own copy.
template <class... Params, class... Args>
LaunchResult launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem_bytes,
                           const char* kernel_name, Args&&... args) {
  LaunchResult r;
  const std::uint64_t nthreads = std::uint64_t(block.x) * block.y * block.z;
  const std::uint64_t nblocks = std::uint64_t(grid.x) * grid.y * grid.z;
  std::ostringstream os;
  if (kernel == nullptr)
    os << "invalid argument 'kernel': must not be null";
  else if (nthreads == 0 || nthreads > 1024)
    os << "invalid argument 'block': threads per block must be in [1, 1024], got " << nthreads;
  else if (block.z > 64)
    os << "invalid argument 'block': block.z must be <= 64";
  else if (nblocks == 0)
    os << "invalid argument 'grid': must have at least one block";
  else if (grid.x >= (1u << 31) || grid.y > 65535 || grid.z > 65535)
    os << "invalid argument 'grid': exceeds (2^31-1, 65535, 65535)";
  else if (smem_bytes > kMaxDynamicSharedBytes)
    os << "invalid argument 'smem_bytes': " << smem_bytes << " exceeds the per-block maximum "
       << kMaxDynamicSharedBytes;
  if (!os.str().empty()) {
    r.error = "llmk-sim: launch of " + std::string(kernel_name) + " rejected: " + os.str();
    return r;
  }
  using ParamTuple = std::tuple<std::decay_t<Params>...>;
  auto params = std::make_shared<ParamTuple>(std::forward<Args>(args)...);
  detail::Launch launch;
  launch.grid = grid;
  launch.block = block;
  launch.smem_bytes = smem_bytes;
  launch.kernel_name = kernel_name;
  launch.body = [kernel, params]() { std::apply(kernel, ParamTuple(*params)); };
  detail::install_sanitizer_hooks();
  const Settings& settings = Settings::get();
  const std::uint64_t launch_index = detail::launch_counter().fetch_add(1);
  launch.launch_seed = settings.seed * 0x2545F4914F6CDD1Dull + launch_index * 0x9E3779B97F4A7C15ull;
  launch.block_order.resize(nblocks);
  for (std::uint64_t i = 0; i < nblocks; ++i) launch.block_order[i] = static_cast<unsigned>(i);
  std::mt19937_64 rng(launch.launch_seed);
  std::shuffle(launch.block_order.begin(), launch.block_order.end(), rng);

  const unsigned workers = static_cast<unsigned>(std::min<std::uint64_t>(settings.os_threads, nblocks));
  launch.running = std::make_unique<std::atomic<const detail::Thread*>[]>(workers);
  for (unsigned i = 0; i < workers; ++i) launch.running[i].store(nullptr);
  {
    detail::Watchdog watchdog(launch, workers, settings.timeout_seconds);
    if (workers <= 1) {
      detail::worker_loop(launch, 0);
    } else {
      std::vector<std::thread> pool;
      pool.reserve(workers);
      for (unsigned i = 0; i < workers; ++i)
        pool.emplace_back([&launch, i] { detail::worker_loop(launch, i); });
      for (std::thread& th : pool) th.join();
    }
  }
  r.error = launch.error;
  if (r.error.empty() && launch.failed.load()) r.error = "llmk-sim: launch failed";
  return r;
}

}  // namespace llmk::sim
