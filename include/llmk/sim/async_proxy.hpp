// llmk/sim/async_proxy.hpp: Hopper's asynchronous proxy in the simulator (included by llmk/sim/runtime.hpp):
// mbarriers, bulk copies (cp.async.bulk and TMA tensor copies, whose addressing llmk/arch/sm90/ computes),
// fence.proxy.async and the checks around them. The state lives in llmk/sim/async_state.hpp; docs/hopper.md
// has the model and its limits.
//
// What it reports (each names the thread and source line):
//  - an mbarrier that is not initialised, misaligned, outside shared memory, overwritten by an ordinary
//  store, or
//    used by another thread before a __syncthreads made its init visible; an arrival beyond the phase's
//    count; a tx-count outside [-(2^20 - 1), 2^20 - 1]; a thread waiting twice for the same phase (a wrong
//    parity);
//  - a block where nothing can run while threads wait on mbarriers: the deadlock report lists each barrier's
//    phase, pending arrivals and tx-count (a tx-count that is not 0 means expect_tx and the copies disagree);
//  - a bulk copy into shared memory whose mbarrier's init was not fenced for the async proxy;
//  - the async proxy (wgmma, a TMA store) reading shared memory that ordinary stores changed after the last
//    fence.proxy.async;
//  - the shared source of a bulk store changed before cp.async.bulk.wait_group.read;
//  - a block that finishes while bulk copies into its shared memory are in flight.
#pragma once

#include <cstring>
#include <sstream>
#include <string>

#include "llmk/sim/runtime.hpp"

namespace llmk::sim {
namespace detail {

inline constexpr std::int64_t kMaxTxCount = (std::int64_t{1} << 20) - 1;

inline std::string hex_offset(std::size_t off) {
  std::ostringstream os;
  os << "0x" << std::hex << off;
  return os.str();
}

// Offset of [p, p + bytes) in the calling block's shared arena, or a failure naming `what`.
inline std::size_t arena_offset(const void* p, std::size_t bytes, std::size_t align, const char* what,
                                const std::source_location& loc) {
  if (!::llmk::sim::is_shared(p, bytes)) {
    std::ostringstream os;
    os << what << ": " << p << " (" << bytes << " bytes) is not inside this block's shared-memory arena";
    fail_current(os.str(), loc);
  }
  if (reinterpret_cast<std::uintptr_t>(p) % align != 0) {
    std::ostringstream os;
    os << what << ": " << p << " is not aligned to " << align << " bytes";
    fail_current(os.str(), loc);
  }
  return static_cast<std::size_t>(static_cast<const unsigned char*>(p) - current_thread().block->smem);
}

// The async proxy's view of shared memory: block-start poison until bulk copies or fences write it.
LLMK_SIM_BOOKKEEPING unsigned char* async_view(Block& b) {
  SimStateScope scope;
  if (!b.async.view) {
    b.async.view.reset(new unsigned char[b.smem_bytes > 0 ? b.smem_bytes : 1]);
    for (std::size_t i = 0; i < b.smem_bytes; ++i) b.async.view[i] = kSharedPoisonByte;
  }
  return b.async.view.get();
}

// Copies between the generic and the async views, out of TSan's sight (the simulator's bookkeeping: these are
// not accesses of the kernel). The volatile source keeps the compiler from turning the loop into a memcpy
// call, which TSan would intercept.
LLMK_SIM_BOOKKEEPING void bookkeeping_copy(unsigned char* dst, const unsigned char* src, std::size_t n) {
  const volatile unsigned char* from = src;
  for (std::size_t i = 0; i < n; ++i) dst[i] = from[i];
}
// Index of the first byte where a and b differ, or n (no memcmp call either).
LLMK_SIM_BOOKKEEPING std::size_t bookkeeping_mismatch(const unsigned char* a, const unsigned char* b,
                                                      std::size_t n) {
  const volatile unsigned char* x = a;
  for (std::size_t i = 0; i < n; ++i)
    if (x[i] != b[i]) return i;
  return n;
}

// --- mbarrier --------------------------------------------------------------------------------------------

LLMK_SIM_BOOKKEEPING Mbarrier* find_mbarrier(Block& b, std::size_t off) {
  SimStateScope scope;
  auto it = b.async.barriers.find(off);
  return it == b.async.barriers.end() ? nullptr : it->second.get();
}
LLMK_SIM_BOOKKEEPING std::uint64_t read_tag(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);  // 8 bytes, inlined: not intercepted
  return v;
}

inline std::string describe_mbarrier(const Mbarrier& m) {
  std::ostringstream os;
  os << "mbarrier at shared offset " << hex_offset(m.offset) << " (phase " << m.completed << ", parity "
     << (m.completed & 1) << ": " << m.pending << " of " << m.count << " arrivals pending, tx-count " << m.tx
     << ")";
  return os.str();
}

// The checked mbarrier at `bar` for an operation of the calling thread.
LLMK_SIM_BOOKKEEPING Mbarrier& checked_mbarrier(Thread& t, const void* bar, const char* op,
                                                const std::source_location& loc) {
  SimStateScope scope;
  Block& b = *t.block;
  const std::size_t off = arena_offset(bar, 8, 8, op, loc);
  Mbarrier* m = find_mbarrier(b, off);
  if (m == nullptr) {
    fail_current(
        std::string(op) + ": no mbarrier was initialised (mbarrier.init) at shared offset " + hex_offset(off),
        loc);
  }
  if (read_tag(b.smem + off) != kMbarrierTag) {
    fail_current(std::string(op) + ": the " + describe_mbarrier(*m) +
                     " was overwritten by an ordinary store since its mbarrier.init at " +
                     format_loc(m->init_loc),
                 loc);
  }
  // A __syncthreads after the init makes it visible to the block, and so does a barrier.cluster phase.
  const bool cluster_barrier_since = b.cluster != nullptr && b.cluster->completed > m->init_cluster_phase;
  if (t.linear != m->init_thread && b.barrier_epoch == m->init_epoch && !cluster_barrier_since) {
    fail_current(std::string(op) + ": the " + describe_mbarrier(*m) + " initialised by thread " +
                     std::to_string(m->init_thread) + " at " + format_loc(m->init_loc) +
                     " is used by another thread before a __syncthreads made the init visible",
                 loc);
  }
  return *m;
}

// Wakes the threads waiting for the phase that just completed (its parity is (completed - 1) & 1).
LLMK_SIM_BOOKKEEPING void wake_mbarrier_waiters(Block& b, const Mbarrier& m) {
  SimStateScope scope;
  const unsigned done_parity = static_cast<unsigned>((m.completed - 1) & 1);
  for (Thread& o : b.threads) {
    if (o.state == WaitState::kMbarrier && o.wait_bar == m.offset && o.wait_parity == done_parity) {
      o.woken_phase = m.completed - 1;
      o.state = WaitState::kRunnable;
    }
  }
}

// Completes the current phase when no arrival and no transaction byte is pending.
LLMK_SIM_BOOKKEEPING void maybe_complete_phase(Block& b, Mbarrier& m) {
  SimStateScope scope;
  if (m.pending != 0 || m.tx != 0) return;
  ++m.completed;
  m.pending = m.count;
  wake_mbarrier_waiters(b, m);
}

LLMK_SIM_BOOKKEEPING void check_tx_range(const Mbarrier& m, const char* op, const std::source_location& loc) {
  if (m.tx > kMaxTxCount || m.tx < -kMaxTxCount) {
    fail_current(std::string(op) + ": the tx-count of the " + describe_mbarrier(m) +
                     " left the range [-(2^20 - 1), 2^20 - 1]",
                 loc);
  }
}

// A landing bulk copy: complete_tx of `bytes` on the barrier at `off` (scheduler side; no thread to blame).
LLMK_SIM_BOOKKEEPING void complete_tx(Block& b, std::size_t off, std::int64_t bytes,
                                      const std::source_location& issued_at) {
  SimStateScope scope;
  Mbarrier* m = find_mbarrier(b, off);
  if (m == nullptr)
    return;  // re-initialised or invalidated while the copy was in flight: nothing to complete
  hb_release(m->sync_of(m->completed));
  m->copy_phase = m->completed + 1;
  m->copy_loc = issued_at;
  m->tx -= bytes;
  maybe_complete_phase(b, *m);
}

// --- bulk copies into shared memory ------------------------------------------------------------------------

LLMK_SIM_BOOKKEEPING void push_async_load(Block& b, std::unique_ptr<AsyncLoad> load) {
  SimStateScope scope;
  b.async.in_flight.push_back(std::move(load));
}
LLMK_SIM_BOOKKEEPING std::unique_ptr<AsyncLoad> take_async_load(Block& b, std::size_t i) {
  SimStateScope scope;
  std::unique_ptr<AsyncLoad> load = std::move(b.async.in_flight[i]);
  b.async.in_flight.erase(b.async.in_flight.begin() + static_cast<std::ptrdiff_t>(i));
  return load;
}
LLMK_SIM_BOOKKEEPING std::size_t async_loads_in_flight(const Block& b) {
  SimStateScope scope;
  return b.async.in_flight.size();
}

// Lands one bulk copy: its bytes become visible to both proxies, then its mbarrier sees complete_tx.
inline void land_async_load(Block& b, std::unique_ptr<AsyncLoad> load) {
  hb_acquire(&load->issue_sync);
  std::memcpy(b.smem + load->dst, load->bytes.data(), load->bytes.size());  // the kernel's data: TSan sees it
  bookkeeping_copy(async_view(b) + load->dst, load->bytes.data(), load->bytes.size());
  complete_tx(b, load->bar, static_cast<std::int64_t>(load->bytes.size()), load->loc);
}

// Scheduler: lands each copy in flight with probability 1/2 (all of them when `all`).
inline void land_async_loads(Block& b, bool all) {
  for (std::size_t i = 0; i < async_loads_in_flight(b);) {
    if (all || (b.rng() & 1u) != 0)
      land_async_load(b, take_async_load(b, i));
    else
      ++i;
  }
}

LLMK_SIM_BOOKKEEPING std::string describe_async_loads(const Block& b) {
  SimStateScope scope;
  std::ostringstream os;
  for (const auto& l : b.async.in_flight)
    os << "\n  a bulk copy of " << l->bytes.size() << " bytes into shared offset " << hex_offset(l->dst)
       << " issued by thread " << l->thread << " at " << format_loc(l->loc);
  return os.str();
}

// Bulk copies that landed in a phase no thread waited for (the block could have exited before they landed).
LLMK_SIM_BOOKKEEPING std::string describe_unwaited_copies(const Block& b) {
  SimStateScope scope;
  std::ostringstream os;
  for (const auto& [off, m] : b.async.barriers)
    if (m->copy_phase > m->waited_phase)
      os << "\n  the bulk copy issued at " << format_loc(m->copy_loc) << " counted for phase "
         << m->copy_phase - 1 << " of the mbarrier at shared offset " << hex_offset(off)
         << ", which no thread waited for";
  return os.str();
}

LLMK_SIM_BOOKKEEPING std::string describe_waited_mbarriers(const Block& b) {
  SimStateScope scope;
  std::ostringstream os;
  for (const auto& [off, m] : b.async.barriers) {
    bool waited = false;
    for (const Thread& t : b.threads) waited |= t.state == WaitState::kMbarrier && t.wait_bar == off;
    if (waited) os << "\n  " << describe_mbarrier(*m);
  }
  return os.str();
}

// --- fences, waits and bulk stores
// ---------------------------------------------------------------------------

LLMK_SIM_BOOKKEEPING void mark_inits_fenced(Block& b, const Thread& t) {
  SimStateScope scope;
  for (auto& [off, m] : b.async.barriers)
    if (m->init_thread == t.linear) m->init_fenced = true;
}
LLMK_SIM_BOOKKEEPING void fence_async_view(Block& b, const Thread& t) {
  {
    SimStateScope scope;
    bookkeeping_copy(async_view(b), b.smem, b.smem_bytes);
  }
  mark_inits_fenced(b, t);
}
LLMK_SIM_BOOKKEEPING void poison_async_view(Block& b, std::size_t off, std::size_t n) {
  SimStateScope scope;
  unsigned char* v = async_view(b);
  for (std::size_t i = 0; i < n; ++i) v[off + i] = kSharedPoisonByte;
}

// A bulk copy of `bytes` into arena offset `off` of block `b`, issued by thread `thread`: the destination
// reads poison until the copy lands (at a random scheduling round) and complete_tx's the mbarrier at
// `bar_off`.
inline void queue_async_load(Block& b, std::size_t off, std::vector<unsigned char> bytes, std::size_t bar_off,
                             unsigned thread, const std::source_location& loc) {
  std::memset(b.smem + off, kSharedPoisonByte, bytes.size());  // poisoned until it lands
  poison_async_view(b, off, bytes.size());
  auto load = std::make_unique<AsyncLoad>();
  load->dst = off;
  load->bytes = std::move(bytes);
  load->bar = bar_off;
  load->loc = loc;
  load->thread = thread;
  hb_release(&load->issue_sync);
  push_async_load(b, std::move(load));
}

LLMK_SIM_BOOKKEEPING void note_phase_waited(Mbarrier& m, std::uint64_t phase) {
  SimStateScope scope;
  m.waited_phase = std::max(m.waited_phase, phase + 1);
}

LLMK_SIM_BOOKKEEPING void set_mbarrier_wait(Thread& t, std::size_t off, unsigned parity,
                                            const std::source_location& loc) {
  t.where = loc;
  t.wait_bar = off;
  t.wait_parity = parity;
  t.state = WaitState::kMbarrier;
}
inline void wait_on_mbarrier(Thread& t, std::size_t off, unsigned parity, const std::source_location& loc) {
  set_mbarrier_wait(t, off, parity, loc);
  yield_without_sync(t);  // resumed by the phase's completion (wake_mbarrier_waiters)
}
// False when the thread already waited for this phase of this barrier.
inline bool record_phase_seen(Thread& t, std::uint64_t serial, std::uint64_t phase) {
  std::uint64_t& seen = t.mbar_seen[serial];
  if (seen == phase + 1) return false;
  seen = phase + 1;
  return true;
}

inline void check_store_source(Thread& t, AsyncStore& s, const std::source_location& loc) {
  if (s.source_released) return;
  const std::size_t n = s.src_snapshot.size();
  const std::size_t i = bookkeeping_mismatch(t.block->smem + s.src, s.src_snapshot.data(), n);
  if (i != n) {
    fail_current("the shared source of a bulk store issued at " + format_loc(s.loc) + " changed at offset " +
                     hex_offset(s.src + i) + " before cp.async.bulk.wait_group.read covered it",
                 loc);
  }
  s.source_released = true;
}
inline void complete_store_group(std::vector<AsyncStore>& group) {
  for (AsyncStore& s : group) {
    std::size_t at = 0;
    for (auto [dst, n] : s.runs) {
      std::memcpy(dst, s.data.data() + at, n);
      at += n;
    }
  }
}

}  // namespace detail

// ---- fiber-side operations (called by the atoms in llmk/arch/sm90/)
// ----------------------------------------

/// mbarrier.init: `count` arrivals per phase, phase 0 current, tx-count 0.
inline void mbarrier_init(void* bar, unsigned count,
                          std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  detail::Block& b = *t.block;
  const std::size_t off = detail::arena_offset(bar, 8, 8, "mbarrier.init", loc);
  if (count == 0 || count > (1u << 20) - 1) fail("mbarrier.init: count must be in [1, 2^20 - 1]", loc);
  detail::SimStateScope scope;
  auto m = std::make_unique<detail::Mbarrier>();
  m->offset = off;
  m->count = count;
  m->pending = count;
  m->init_epoch = b.barrier_epoch;
  m->init_thread = t.linear;
  m->init_cluster_phase = b.cluster != nullptr ? b.cluster->completed : 0;
  m->init_loc = loc;
  m->serial = ++b.mbarrier_serial;
  std::memcpy(b.smem + off, &detail::kMbarrierTag, 8);
  b.async.barriers[off] = std::move(m);
}

/// mbarrier.inval: the object may be reused as ordinary memory.
inline void mbarrier_inval(void* bar, std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  detail::Mbarrier& m = detail::checked_mbarrier(t, bar, "mbarrier.inval", loc);
  detail::SimStateScope scope;
  t.block->async.barriers.erase(m.offset);
}

/// mbarrier.expect_tx: raises the current phase's tx-count by `bytes`.
inline void mbarrier_expect_tx(void* bar, unsigned bytes,
                               std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  detail::Mbarrier& m = detail::checked_mbarrier(t, bar, "mbarrier.expect_tx", loc);
  detail::SimStateScope scope;
  m.tx += bytes;
  detail::check_tx_range(m, "mbarrier.expect_tx", loc);
}

/// mbarrier.arrive (release.cta) of `count` arrivals, after raising the tx-count by `tx_bytes`; returns the
/// state token (the phase the arrival counted for).
inline std::uint64_t mbarrier_arrive(void* bar, unsigned count, unsigned tx_bytes,
                                     std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  const char* op = tx_bytes > 0 ? "mbarrier.arrive.expect_tx" : "mbarrier.arrive";
  detail::Mbarrier& m = detail::checked_mbarrier(t, bar, op, loc);
  detail::SimStateScope scope;
  if (count == 0 || count > m.pending) {
    fail(std::string(op) + ": " + std::to_string(count) + " arrivals on the " + detail::describe_mbarrier(m) +
             ", which needs only " + std::to_string(m.pending) +
             " more this phase (over-arrival: the phase's count is exceeded)",
         loc);
  }
  const std::uint64_t phase = m.completed;
  detail::hb_release(m.sync_of(phase));
  m.tx += tx_bytes;
  detail::check_tx_range(m, op, loc);
  m.pending -= count;
  detail::maybe_complete_phase(*t.block, m);
  return phase;
}

/// mbarrier.try_wait.parity: true once the phase with parity `parity` has completed, i.e. the current phase's
/// parity differs. In the simulator the caller is suspended until then (a try_wait may block for a while on
/// the GPU too), so it always returns true; a block where that never happens is a reported deadlock.
inline bool mbarrier_try_wait_parity(void* bar, unsigned parity,
                                     std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  detail::Mbarrier* m = &detail::checked_mbarrier(t, bar, "mbarrier.try_wait.parity", loc);
  parity &= 1u;
  std::uint64_t serial, completed;
  {
    detail::SimStateScope scope;
    serial = m->serial;
    completed = m->completed;
  }
  std::uint64_t phase;
  if ((completed & 1u) != parity) {
    phase = completed - 1;  // == UINT64_MAX before any completion: the "phase before the first" convention
  } else {
    detail::wait_on_mbarrier(t, m->offset, parity, loc);
    detail::SimStateScope scope;
    m = detail::find_mbarrier(*t.block, t.wait_bar);
    if (m == nullptr || m->serial != serial)
      fail("mbarrier.try_wait.parity: the mbarrier was invalidated", loc);
    phase = t.woken_phase;
  }
  if (phase != ~std::uint64_t{0}) {
    detail::SimStateScope scope;
    detail::hb_acquire(m->sync_of(phase));
    detail::note_phase_waited(*m, phase);
    if (!detail::record_phase_seen(t, serial, phase)) {
      fail("mbarrier.try_wait.parity: waits a second time for phase " + std::to_string(phase) + " of the " +
               detail::describe_mbarrier(*m) +
               ", which it already waited for (wrong parity: the phase it means has not completed yet)",
           loc);
    }
  }
  return true;
}

/// mbarrier.test_wait.parity: non-blocking; yields once when the phase is not complete yet.
inline bool mbarrier_test_wait_parity(void* bar, unsigned parity,
                                      std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  detail::Mbarrier& m = detail::checked_mbarrier(t, bar, "mbarrier.test_wait.parity", loc);
  bool done;
  {
    detail::SimStateScope scope;
    done = (m.completed & 1u) != (parity & 1u);
  }
  if (done) return mbarrier_try_wait_parity(bar, parity, loc);
  detail::yield_without_sync(t);
  return false;
}

/// fence.proxy.async by the calling thread: the async proxy now sees shared memory as the generic proxy does
/// (the simulator applies every thread's stores, a superset of what the fence orders), and the mbarriers this
/// thread initialised may be signalled by bulk copies.
inline void fence_proxy_async(std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  detail::Block& b = *t.block;
  (void)loc;
  detail::fence_async_view(b, t);
}

/// fence.mbarrier_init by the calling thread: the mbarriers it initialised may now be signalled by bulk
/// copies (and by the cluster's other blocks). It orders those inits only: shared-memory data that the async
/// proxy reads still needs fence.proxy.async, so the async view is left as it was.
inline void fence_mbarrier_init(std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  (void)loc;
  detail::mark_inits_fenced(*t.block, t);
}

/// A bulk copy into shared memory of `bytes` (already in their shared-memory order), landing later and
/// complete_tx'ing the mbarrier at `bar`. The caller validated the source; the destination is checked here.
inline void bulk_load_to_shared(void* dst, std::vector<unsigned char> bytes, void* bar, const char* op,
                                std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  detail::Block& b = *t.block;
  const std::size_t off = detail::arena_offset(dst, bytes.size(), 16, op, loc);
  detail::Mbarrier& m = detail::checked_mbarrier(t, bar, op, loc);
  bool fenced;
  std::size_t bar_off;
  {
    detail::SimStateScope scope;
    fenced = m.init_fenced;
    bar_off = m.offset;
  }
  if (!fenced) {
    fail(std::string(op) + ": the " + detail::describe_mbarrier(m) + " initialised at " +
             detail::format_loc(m.init_loc) +
             " was not made visible to the async proxy (fence.mbarrier_init or fence.proxy.async after the "
             "init)",
         loc);
  }
  detail::queue_async_load(b, off, std::move(bytes), bar_off, t.linear, loc);
}

/// The async proxy reads [p, p + bytes) of shared memory (a wgmma operand, a TMA store's source): reported
/// when ordinary stores changed any of it after the last fence.proxy.async.
inline void async_proxy_read(const void* p, std::size_t bytes, const char* op,
                             std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  detail::Block& b = *t.block;
  const std::size_t off = detail::arena_offset(p, bytes, 1, op, loc);
  const std::size_t i = detail::bookkeeping_mismatch(b.smem + off, detail::async_view(b) + off, bytes);
  if (i != bytes) {
    fail(
        std::string(op) + " reads shared memory at offset " + detail::hex_offset(off + i) +
            " that ordinary stores (st.shared, cp.async) changed after the last fence.proxy.async: the async "
            "proxy does not see them. Put fence.proxy.async after the stores (before the barrier that orders "
            "them with this read)",
        loc);
  }
}

/// A bulk store (shared -> global, bulk_group) of the shared bytes [src, src + src_bytes) to the global
/// `runs` with the bytes `data` (the caller's reordering of the source; for cp.async.bulk the source itself).
/// The source must stay unchanged until cp.async.bulk.wait_group.read; global memory is written at
/// cp.async.bulk.wait_group or at thread exit.
inline void bulk_store_from_shared(const void* src, std::size_t src_bytes,
                                   std::vector<std::pair<unsigned char*, std::size_t>> runs,
                                   std::vector<unsigned char> data, const char* op,
                                   std::source_location loc = std::source_location::current()) {
  async_proxy_read(src, src_bytes, op, loc);
  detail::Thread& t = detail::current_thread();
  detail::AsyncStore s;
  s.src = static_cast<std::size_t>(static_cast<const unsigned char*>(src) - t.block->smem);
  s.src_snapshot.resize(src_bytes);
  detail::bookkeeping_copy(s.src_snapshot.data(), static_cast<const unsigned char*>(src), src_bytes);
  s.runs = std::move(runs);
  s.data = std::move(data);
  s.loc = loc;
  t.stores_uncommitted.push_back(std::move(s));
}

/// cp.async.bulk.commit_group.
inline void bulk_commit() {
  detail::Thread& t = detail::current_thread();
  t.store_groups.push_back(std::move(t.stores_uncommitted));
  t.stores_uncommitted.clear();
}

/// cp.async.bulk.wait_group(.read) n: every committed bulk group but the newest n has read its source (.read)
/// or completed. The simulator checks that the sources did not change, and writes global memory at the full
/// wait (or at thread exit).
inline void bulk_wait(int n, bool read_only, std::source_location loc = std::source_location::current()) {
  detail::Thread& t = detail::current_thread();
  const std::size_t keep = static_cast<std::size_t>(std::max(n, 0));
  const std::size_t older = t.store_groups.size() > keep ? t.store_groups.size() - keep : 0;
  for (std::size_t g = 0; g < older; ++g)
    for (detail::AsyncStore& s : t.store_groups[g]) detail::check_store_source(t, s, loc);
  if (read_only) return;
  for (std::size_t g = 0; g < older; ++g) detail::complete_store_group(t.store_groups[g]);
  t.store_groups.erase(t.store_groups.begin(), t.store_groups.begin() + static_cast<std::ptrdiff_t>(older));
}

}  // namespace llmk::sim
