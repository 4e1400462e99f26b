// llmk/sim/fiber.hpp: guarded fiber stacks and the context switch the simulator runs CUDA threads on.
//
// One fiber per CUDA thread. Switching uses Boost.Context's fcontext jump (tens of nanoseconds; ucontext's
// swapcontext makes a syscall per switch and is several times slower). Every jump is wrapped with the
// annotations AddressSanitizer and ThreadSanitizer need to follow execution across stacks:
//  - ASan: start/finish_switch_fiber, so stack accesses are checked against the right stack;
//  - TSan: each fiber is a TSan fiber, switched with the no_sync flag so a switch does NOT create a
//    happens-before edge (otherwise every missing __syncthreads would be hidden). The simulator adds the
//    edges CUDA guarantees (launch, barriers, warp collectives) explicitly, see hb_release/hb_acquire.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/detail/fcontext.hpp>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define LLMK_SIM_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define LLMK_SIM_TSAN 1
#endif

// Simulator bookkeeping that fibers of one block share (wait states, rendezvous slots) must stay invisible
// to TSan: fibers switch without synchronisation, so TSan would report the simulator instead of the kernel.
// `inline` for linkage (these are header functions: tests/core/header_linkage links two translation units),
// noinline so that no instrumented copy is inlined into a TSan-instrumented caller.
#if defined(LLMK_SIM_TSAN)
#define LLMK_SIM_BOOKKEEPING inline __attribute__((no_sanitize_thread, noinline))
#else
#define LLMK_SIM_BOOKKEEPING inline
#endif

namespace llmk::sim::detail {

namespace bctx = boost::context::detail;

// Happens-before edges the CUDA model guarantees; no-ops outside TSan builds.
inline void hb_release([[maybe_unused]] void* sync_object) {
#if defined(LLMK_SIM_TSAN)
  __tsan_release(sync_object);
#endif
}
inline void hb_acquire([[maybe_unused]] void* sync_object) {
#if defined(LLMK_SIM_TSAN)
  __tsan_acquire(sync_object);
#endif
}

#if defined(LLMK_SIM_TSAN)
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

// Scope in which the calling fiber's memory accesses are invisible to TSan, for simulator state in standard
// containers that fibers of one block share (LLMK_SIM_BOOKKEEPING cannot reach into the non-inlined container
// code). No-op outside TSan builds.
struct SimStateScope {
#if defined(LLMK_SIM_TSAN)
  SimStateScope() {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  }
  ~SimStateScope() {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  }
#endif
  SimStateScope(const SimStateScope&) = delete;
  SimStateScope& operator=(const SimStateScope&) = delete;
#if !defined(LLMK_SIM_TSAN)
  SimStateScope() {}  // user-provided: no "unused variable" warning for the scope objects
#endif
};

// A stack with an inaccessible guard page below it: an overflow faults instead of corrupting a neighbour.
class GuardedStack {
 public:
  explicit GuardedStack(std::size_t usable_bytes) {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    usable_ = (usable_bytes + page_ - 1) / page_ * page_;
    void* p = mmap(nullptr, usable_ + page_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) std::abort();
    if (mprotect(p, page_, PROT_NONE) != 0) std::abort();
    base_ = static_cast<char*>(p);
  }
  GuardedStack(const GuardedStack&) = delete;
  GuardedStack& operator=(const GuardedStack&) = delete;
  ~GuardedStack() { munmap(base_, usable_ + page_); }

  char* bottom() const { return base_ + page_; }  // lowest usable address
  char* top() const { return base_ + page_ + usable_; }
  std::size_t size() const { return usable_; }

  // A fiber abandoned after a failure leaves ASan stack redzones behind; clear them before reuse.
  void reset_for_reuse() {
#if defined(LLMK_SIM_ASAN)
    __asan_unpoison_memory_region(bottom(), usable_);
#endif
  }

 private:
  char* base_ = nullptr;
  std::size_t page_ = 0;
  std::size_t usable_ = 0;
};

// Process-wide free list so repeated launches do not mmap/munmap thousands of stacks.
class StackPool {
 public:
  static StackPool& instance() {
    static StackPool pool;
    return pool;
  }
  GuardedStack* take(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (std::size_t i = free_.size(); i-- > 0;) {
        if (free_[i]->size() >= bytes) {
          GuardedStack* s = free_[i];
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          s->reset_for_reuse();
          return s;
        }
      }
    }
    return new GuardedStack(bytes);
  }
  void give_back(GuardedStack* s) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(s);
  }
  ~StackPool() {
    for (GuardedStack* s : free_) delete s;
  }

 private:
  std::mutex mutex_;
  std::vector<GuardedStack*> free_;
};

// The execution context of one OS worker thread's scheduler (the "main" side of every switch).
struct SchedulerContext {
  bctx::fcontext_t ctx = nullptr;  // where a fiber jumps to yield
  void* tsan_fiber = nullptr;      // the OS thread's own TSan fiber
  const void* asan_stack_bottom = nullptr;
  std::size_t asan_stack_size = 0;
};

// A fiber's own switch state (kept apart from simulator bookkeeping).
struct FiberContext {
  bctx::fcontext_t ctx = nullptr;
  GuardedStack* stack = nullptr;
  void* tsan_fiber = nullptr;
  void* asan_fake_stack = nullptr;  // ASan fake-stack handle saved while this fiber is switched out
  bool dying = false;               // next switch out is the last one
};

// Scheduler -> fiber. Returns when the fiber yields or finishes. `data` reaches the fiber.
LLMK_SIM_BOOKKEEPING void switch_to_fiber([[maybe_unused]] SchedulerContext& sched, FiberContext& fiber,
                                          void* data) {
#if defined(LLMK_SIM_ASAN)
  void* sched_fake = nullptr;
  __sanitizer_start_switch_fiber(&sched_fake, fiber.stack->bottom(), fiber.stack->size());
#endif
#if defined(LLMK_SIM_TSAN)
  __tsan_switch_to_fiber(fiber.tsan_fiber, __tsan_switch_to_fiber_no_sync);
#endif
  bctx::transfer_t t = bctx::jump_fcontext(fiber.ctx, data);
  fiber.ctx = t.fctx;
#if defined(LLMK_SIM_ASAN)
  __sanitizer_finish_switch_fiber(sched_fake, nullptr, nullptr);
#endif
}

// Fiber -> scheduler. Returns when the scheduler resumes this fiber (never, if fiber.dying).
LLMK_SIM_BOOKKEEPING void switch_to_scheduler(SchedulerContext& sched, FiberContext& fiber) {
  (void)fiber;  // only the sanitizer builds use it
#if defined(LLMK_SIM_ASAN)
  __sanitizer_start_switch_fiber(fiber.dying ? nullptr : &fiber.asan_fake_stack, sched.asan_stack_bottom,
                                 sched.asan_stack_size);
#endif
#if defined(LLMK_SIM_TSAN)
  __tsan_switch_to_fiber(sched.tsan_fiber, __tsan_switch_to_fiber_no_sync);
#endif
  bctx::transfer_t t = bctx::jump_fcontext(sched.ctx, nullptr);
  sched.ctx = t.fctx;
#if defined(LLMK_SIM_ASAN)
  __sanitizer_finish_switch_fiber(fiber.asan_fake_stack, nullptr, nullptr);
#endif
}

// First instructions on a new fiber's stack: record where the scheduler is, as ASan wants.
LLMK_SIM_BOOKKEEPING void fiber_landed(SchedulerContext& sched, bctx::transfer_t t) {
  sched.ctx = t.fctx;
#if defined(LLMK_SIM_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &sched.asan_stack_bottom, &sched.asan_stack_size);
#endif
}

inline void fiber_create(FiberContext& fiber, std::size_t stack_bytes, void (*entry)(bctx::transfer_t)) {
  fiber.stack = StackPool::instance().take(stack_bytes);
  fiber.ctx = bctx::make_fcontext(fiber.stack->top(), fiber.stack->size(), entry);
  fiber.dying = false;
  fiber.asan_fake_stack = nullptr;
#if defined(LLMK_SIM_TSAN)
  fiber.tsan_fiber = __tsan_create_fiber(0);
#endif
}

inline void fiber_destroy(FiberContext& fiber) {
#if defined(LLMK_SIM_TSAN)
  if (fiber.tsan_fiber) __tsan_destroy_fiber(fiber.tsan_fiber);
  fiber.tsan_fiber = nullptr;
#endif
  if (fiber.stack) StackPool::instance().give_back(fiber.stack);
  fiber.stack = nullptr;
  fiber.ctx = nullptr;
}

inline void scheduler_init(SchedulerContext& sched) {
#if defined(LLMK_SIM_TSAN)
  sched.tsan_fiber = __tsan_get_current_fiber();
#else
  (void)sched;
#endif
}

}  // namespace llmk::sim::detail
