// llmk/sim/scheduler.hpp: the simulator's scheduler side (included by llmk/sim/runtime.hpp, not on its own):
// fiber entry and exit, deadlock reports, the per-block scheduling loop, the worker pool, the watchdog and
// launch_kernel. runtime.hpp has the model.
#pragma once

#include "llmk/sim/runtime.hpp"

namespace llmk::sim {

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
    // So do bulk stores (their sources were checked at each wait_group.read; the rest are checked here).
    try {
      bulk_commit();
      bulk_wait(0, false, self.where);
    } catch (const FiberAbort&) {
      failed = true;
    }
  }
  finish_fiber(self, failed);
}

struct ThreadSnapshot {
  WaitState state;
  std::source_location where;
  const char* op;
  unsigned mask;
  std::size_t wait_bar;
  unsigned wait_parity;
};

LLMK_SIM_BOOKKEEPING ThreadSnapshot snapshot(const Thread& t) {
  return {t.state, t.where, t.op, t.mask, t.wait_bar, t.wait_parity};
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
    case WaitState::kMbarrier:
      return "waits on an mbarrier";
    case WaitState::kNamedBarrier:
      return "waits at bar.sync";
    case WaitState::kClusterBarrier:
      return "waits at barrier.cluster.wait";
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
                  std::strcmp(o.where.file_name(), s.where.file_name()) == 0 && o.mask == s.mask &&
                  o.wait_bar == s.wait_bar && o.wait_parity == s.wait_parity;
      if (!same) break;
      ++j;
    }
    os << "\n  threads " << format_dim(b.threads[i].thread_idx) << ".."
       << format_dim(b.threads[j - 1].thread_idx) << " (linear " << i << ".." << j - 1
       << "): " << state_name(s.state);
    if (s.state == WaitState::kWarp)
      os << " " << s.op << " (mask 0x" << std::hex << s.mask << std::dec << ")";
    if (s.state == WaitState::kMbarrier)
      os << " at shared offset " << hex_offset(s.wait_bar) << " for parity " << s.wait_parity;
    if (s.state == WaitState::kNamedBarrier) os << " " << s.wait_bar;
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
  unsigned at_barrier = 0, exited = 0, in_warp = 0, at_mbarrier = 0, at_named = 0, at_cluster = 0;
  for (const Thread& t : b.threads) {
    ThreadSnapshot s = snapshot(t);
    at_cluster += s.state == WaitState::kClusterBarrier;
    at_barrier += s.state == WaitState::kBarrier;
    exited += s.state == WaitState::kDone;
    in_warp += s.state == WaitState::kWarp;
    at_mbarrier += s.state == WaitState::kMbarrier;
    at_named += s.state == WaitState::kNamedBarrier;
  }
  os << "llmk-sim: deadlock in block " << format_dim(b.block_idx) << " of grid " << format_dim(b.launch->grid)
     << ", block size " << format_dim(b.launch->block) << " (kernel " << b.launch->kernel_name
     << ", LLMK_SIM_SEED=" << Settings::get().seed << "): ";
  if (at_barrier > 0)
    os << "barrier divergence: " << at_barrier << " of " << b.threads.size()
       << " threads wait at __syncthreads, " << exited << " exited, " << in_warp
       << " wait in warp collectives";
  else if (at_mbarrier > 0)
    os << "mbarrier phase never completes: " << at_mbarrier << " threads wait on mbarriers, " << exited
       << " exited, " << in_warp
       << " wait in warp collectives (a phase needs all its arrivals and a tx-count "
          "of 0: expect_tx bytes that no copy delivers, or copies that deliver more, leave it pending)"
       << describe_waited_mbarriers(b);
  else if (at_cluster > 0)
    os << "barrier.cluster phase never completes: " << at_cluster << " threads wait at barrier.cluster.wait, "
       << exited << " exited, " << in_warp
       << " wait in warp collectives (every thread of every block of the cluster must arrive)";
  else if (at_named > 0)
    os << "named barrier phase never completes: " << at_named << " threads wait at bar.sync, " << exited
       << " exited, " << in_warp
       << " wait in warp collectives (a phase needs as many arrivals as its thread "
          "count)"
       << describe_pending_named_barriers(b);
  else
    os << "warp collective never completes: a lane named in its mask never arrives (llmk requires every lane "
          "named in a mask to reach the collective; a lane that exited does not count as arrived): "
       << in_warp << " threads wait in warp collectives, " << exited << " exited";
  os << describe_block_threads(b);
  return os.str();
}

// Creates block `block_linear` of the launch: its threads (fibers not yet started) and its shared memory.
inline void setup_block(Block& b, Launch& launch, unsigned block_linear, SchedulerContext& sched,
                        const Settings& settings) {
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
  // Shared memory: exact-size heap arena so ASan catches an overrun by a single byte; 1024-byte aligned, so
  // that a tile aligned in the shared window (align_shared<1024>, a swizzle repeat) is as aligned in host
  // memory (a struct with alignas(1024) members bound there is then aligned for UBSan too).
  if (launch.smem_bytes > 0) {
    b.smem = static_cast<unsigned char*>(::operator new (launch.smem_bytes, std::align_val_t{1024}));
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
}

// The checks of a block that ran to its end without failing: nothing may still write into its shared memory.
inline void check_finished_block(Block& b, const Launch& launch, const Settings& settings) {
  if (!block_failed(b)) {
    // On the GPU these copies could still be writing into the shared memory of an exited block.
    const std::string unwaited = describe_async_loads(b) + describe_unwaited_copies(b);
    if (!unwaited.empty()) {
      std::ostringstream os;
      os << "llmk-sim: block " << format_dim(b.block_idx) << " of kernel " << launch.kernel_name
         << " finished while bulk copies into its shared memory were in flight (LLMK_SIM_SEED="
         << settings.seed << "): some thread must wait on their mbarrier phase before the block exits"
         << unwaited;
      record_block_error(b, os.str());
    }
  }
  if (!block_failed(b)) {
    // A partly arrived phase: an arrival no bar.sync consumed (on the GPU a later kernel in a persistent
    // loop, or the next tile, would see it).
    const std::string pending = describe_pending_named_barriers(b);
    if (!pending.empty()) {
      std::ostringstream os;
      os << "llmk-sim: block " << format_dim(b.block_idx) << " of kernel " << launch.kernel_name
         << " finished with named barrier arrivals that no bar.sync consumed (LLMK_SIM_SEED=" << settings.seed
         << ")" << pending;
      record_block_error(b, os.str());
    }
  }
}

// Runs cluster `cluster_index` of the launch (its blocks together, interleaved; one block without clusters)
// to completion (or failure) on the calling OS thread.
inline void run_cluster(Launch& launch, unsigned cluster_index, SchedulerContext& sched, unsigned worker) {
  const Settings& settings = Settings::get();
  const dim3 cd = launch.cluster;
  const unsigned per_cluster = cd.x * cd.y * cd.z;
  const unsigned cgx = launch.grid.x / cd.x, cgy = launch.grid.y / cd.y;
  const uint3 cidx{cluster_index % cgx, (cluster_index / cgx) % cgy, cluster_index / (cgx * cgy)};
  Cluster cluster;
  cluster.dims = cd;
  std::vector<std::unique_ptr<Block>> owned;
  owned.reserve(per_cluster);
  for (unsigned r = 0; r < per_cluster; ++r) {  // rank r: x fastest, as %cluster_ctarank
    const unsigned bx = cidx.x * cd.x + r % cd.x, by = cidx.y * cd.y + (r / cd.x) % cd.y,
                   bz = cidx.z * cd.z + r / (cd.x * cd.y);
    owned.push_back(std::make_unique<Block>());
    Block& b = *owned.back();
    setup_block(b, launch, bx + launch.grid.x * (by + launch.grid.y * bz), sched, settings);
    b.cluster = &cluster;
    b.cluster_rank = r;
    cluster.blocks.push_back(&b);
    cluster.threads += static_cast<unsigned>(b.threads.size());
  }
  for (Block* b : cluster.blocks) hb_release(&b->start_tsan_sync);
  auto any_failed = [&] {
    for (Block* b : cluster.blocks)
      if (block_failed(*b)) return true;
    return false;
  };
  std::vector<Thread*> runnable;
  runnable.reserve(cluster.threads);
  // Warps of a real block do not advance in lockstep. Now and then one warp of a block is held back for a few
  // rounds while the others run ahead of it (as far as the next barrier lets them), so that reusing a shared
  // buffer another warp may still be reading, without a barrier in between, reads poison here instead of
  // passing. Each block of a cluster holds back its own.
  std::vector<unsigned> held_warp(per_cluster, ~0u), hold_rounds(per_cluster, 0);
  for (;;) {
    if (any_failed()) break;
    if (launch.failed.load(std::memory_order_relaxed)) break;  // another block failed: stop early
    // Bulk copies land at random rounds, so a thread that reads their destination before its mbarrier phase
    // completes reads poison.
    for (Block* b : cluster.blocks)
      if (async_loads_in_flight(*b) > 0) land_async_loads(*b, false);
    for (unsigned r = 0; r < per_cluster; ++r) {
      Block& b = *cluster.blocks[r];
      const unsigned nwarps = static_cast<unsigned>(b.warps.size());
      if (nwarps > 1 && hold_rounds[r]-- == 0) {
        const bool hold = (b.rng() & 1u) != 0;
        held_warp[r] = hold ? static_cast<unsigned>(b.rng() % nwarps) : ~0u;
        hold_rounds[r] = static_cast<unsigned>(b.rng() % (hold ? 16u : 4u));
      }
    }
    runnable.clear();
    unsigned live = 0, held_runnable = 0;
    for (unsigned r = 0; r < per_cluster; ++r) {
      Block& b = *cluster.blocks[r];
      unsigned block_live = 0;
      for (Thread& t : b.threads) {
        WaitState st = get_state(t);
        if (st == WaitState::kRunnable) {
          if (t.warp == held_warp[r])
            ++held_runnable;
          else
            runnable.push_back(&t);
        }
        if (st != WaitState::kDone) ++block_live;
      }
      if (block_live == 0) b.exited = true;
      live += block_live;
    }
    if (live == 0) break;
    if (runnable.empty() && held_runnable > 0) {  // only held warps can move: let them
      std::fill(held_warp.begin(), held_warp.end(), ~0u);
      std::fill(hold_rounds.begin(), hold_rounds.end(), 0u);
      continue;
    }
    if (runnable.empty()) {
      bool landed = false;
      for (Block* b : cluster.blocks)
        if (async_loads_in_flight(*b) > 0) {  // nothing runs until a copy lands
          land_async_loads(*b, true);
          landed = true;
        }
      if (landed) continue;
      bool progress = false;
      for (Block* b : cluster.blocks) progress = resolve_quiescence(*b) || progress;
      if (progress) continue;
      std::string report;
      Block* blamed = nullptr;
      for (Block* b : cluster.blocks) {
        if (b->exited) continue;
        report += (report.empty() ? "" : "\n") + deadlock_report(*b);
        if (blamed == nullptr) blamed = b;
      }
      record_block_error(*blamed, report);
      break;
    }
    std::shuffle(runnable.begin(), runnable.end(), cluster.blocks[0]->rng);
    for (Thread* t : runnable) {
      if (get_state(*t) != WaitState::kRunnable) continue;
      tls_current_block = t->block;
      set_current_thread(t);
      launch.running[worker].store(t, std::memory_order_relaxed);
      switch_to_fiber(sched, t->fiber, t);
      set_current_thread(nullptr);
      if (block_failed(*t->block)) break;
    }
  }
  for (Block* b : cluster.blocks) check_finished_block(*b, launch, settings);
  // Threads still suspended (the block failed, or another block did) are resumed once with `aborting` set:
  // they unwind from their suspension point, destroying what their frames own, and finish.
  for (Block* b : cluster.blocks) {
    tls_current_block = b;
    for (Thread& t : b->threads) {
      const WaitState st = get_state(t);
      if (st == WaitState::kDone || st == WaitState::kFailed) continue;
      set_aborting(t);
      set_current_thread(&t);
      switch_to_fiber(sched, t.fiber, &t);
      set_current_thread(nullptr);
    }
  }
  for (Block* b : cluster.blocks)
    hb_acquire(&b->end_tsan_sync);  // every fiber, finished or unwound, released it last
  tls_current_block = nullptr;
  for (Block* b : cluster.blocks) {
    for (Thread& t : b->threads) fiber_destroy(t.fiber);
    if (b->smem) ::operator delete (b->smem, std::align_val_t{1024});
    if (!b->error.empty()) {
      std::lock_guard<std::mutex> lock(launch.error_mutex);
      if (launch.error.empty()) launch.error = b->error;
    }
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
    run_cluster(launch, launch.block_order[i], sched, worker);
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

/// Runs `kernel(args...)` for every thread of the grid, in thread-block clusters of `cluster` blocks
/// (sm_90; dim3(1, 1, 1): no clusters). Synchronous: returns when all blocks finished. Arguments are
/// converted to the kernel's parameter types once (as the CUDA runtime copies them) and every thread receives
/// its own copy.
template <class... Params, class... Args>
LaunchResult launch_kernel_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster,
                                   std::size_t smem_bytes, const char* kernel_name, Args&&... args) {
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
  else if (cluster.x == 0 || cluster.y == 0 || cluster.z == 0 || grid.x % cluster.x != 0 ||
           grid.y % cluster.y != 0 || grid.z % cluster.z != 0)
    os << "invalid argument 'cluster': " << detail::format_dim(cluster) << " must divide the grid "
       << detail::format_dim(grid);
  else if (std::uint64_t(cluster.x) * cluster.y * cluster.z > 8)
    os << "invalid argument 'cluster': at most 8 blocks (the portable cluster size), got "
       << detail::format_dim(cluster);
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
  launch.cluster = cluster;
  launch.smem_bytes = smem_bytes;
  launch.kernel_name = kernel_name;
  launch.body = [kernel, params]() { std::apply(kernel, ParamTuple(*params)); };
  detail::install_sanitizer_hooks();
  const Settings& settings = Settings::get();
  const std::uint64_t launch_index = detail::launch_counter().fetch_add(1);
  launch.launch_seed = settings.seed * 0x2545F4914F6CDD1Dull + launch_index * 0x9E3779B97F4A7C15ull;
  const std::uint64_t nclusters = nblocks / (std::uint64_t(cluster.x) * cluster.y * cluster.z);
  launch.block_order.resize(nclusters);  // clusters (blocks without clusters), in a random order
  for (std::uint64_t i = 0; i < nclusters; ++i) launch.block_order[i] = static_cast<unsigned>(i);
  std::mt19937_64 rng(launch.launch_seed);
  std::shuffle(launch.block_order.begin(), launch.block_order.end(), rng);

  const unsigned workers = static_cast<unsigned>(std::min<std::uint64_t>(settings.os_threads, nclusters));
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

/// launch_kernel_cluster without clusters.
template <class... Params, class... Args>
LaunchResult launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem_bytes,
                           const char* kernel_name, Args&&... args) {
  return launch_kernel_cluster(kernel, grid, block, dim3(1, 1, 1), smem_bytes, kernel_name,
                               std::forward<Args>(args)...);
}

}  // namespace llmk::sim
