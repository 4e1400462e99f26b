// llmk/sim/cuda_shim.hpp: the CUDA C++ surface (qualifiers, built-in variables, synchronisation, warp
// intrinsics, atomics) as the simulator implements it. Included by llmk/config.cuh when LLMK_SIM is defined;
// kernels are compiled unmodified by the host compiler against it.
//
// Every synchronising builtin takes the caller's source location as a defaulted last argument, so a
// failure report names the kernel line, the block and the thread.
#pragma once

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "llmk/sim/runtime.hpp"
#include "llmk/sim/types.hpp"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __grid_constant__
// Static shared memory cannot be given per-block storage, poisoned or bounds-checked on the CPU. llmk kernels
// place all shared memory in the dynamic arena (llmk::shared_storage<T>()); this name turns any use into a
// compile error that says so.
#define __shared__ LLMK_SIM_static_shared_memory_is_not_supported_use_llmk_shared_storage
#define __constant__ LLMK_SIM_constant_memory_is_not_supported_pass_kernel_parameters

namespace llmk::sim::detail {
inline const dim3& block_dim() {
  return current_thread().block->launch->block;
}
inline const dim3& grid_dim() {
  return current_thread().block->launch->grid;
}
}  // namespace llmk::sim::detail

#define threadIdx (static_cast<const uint3&>(::llmk::sim::detail::current_thread().thread_idx))
#define blockIdx (static_cast<const uint3&>(::llmk::sim::detail::current_thread().block->block_idx))
#define blockDim (::llmk::sim::detail::block_dim())
#define gridDim (::llmk::sim::detail::grid_dim())
#ifndef warpSize
#define warpSize 32
#endif

// ---- block barrier ----------------------------------------------------------------------------------------

inline void __syncthreads(std::source_location loc = std::source_location::current()) {
  ::llmk::sim::detail::block_barrier(0, ::llmk::sim::detail::BarrierReduce::kNone, loc);
}
inline int __syncthreads_count(int predicate, std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::detail::block_barrier(predicate, ::llmk::sim::detail::BarrierReduce::kCount, loc);
}
inline int __syncthreads_and(int predicate, std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::detail::block_barrier(predicate, ::llmk::sim::detail::BarrierReduce::kAnd, loc);
}
inline int __syncthreads_or(int predicate, std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::detail::block_barrier(predicate, ::llmk::sim::detail::BarrierReduce::kOr, loc);
}

// ---- warp synchronisation and votes -----------------------------------------------------------------------

inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location loc = std::source_location::current()) {
  ::llmk::sim::warp_collective<int>(
      "__syncwarp", mask, 0, [](const int* const*, int* const*) {}, loc);
}

inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::warp_collective<unsigned>(
      "__ballot_sync", mask, predicate != 0,
      [](const bool* const* in, unsigned* const* out) {
        unsigned bits = 0;
        for (unsigned l = 0; l < 32; ++l)
          if (in[l] && *in[l]) bits |= 1u << l;
        for (unsigned l = 0; l < 32; ++l)
          if (out[l]) *out[l] = bits;
      },
      loc);
}
inline int __any_sync(unsigned mask, int predicate,
                      std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::warp_collective<int>(
      "__any_sync", mask, predicate != 0,
      [](const bool* const* in, int* const* out) {
        int any = 0;
        for (unsigned l = 0; l < 32; ++l) any |= in[l] && *in[l];
        for (unsigned l = 0; l < 32; ++l)
          if (out[l]) *out[l] = any;
      },
      loc);
}
inline int __all_sync(unsigned mask, int predicate,
                      std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::warp_collective<int>(
      "__all_sync", mask, predicate != 0,
      [](const bool* const* in, int* const* out) {
        int all = 1;
        for (unsigned l = 0; l < 32; ++l)
          if (in[l]) all &= *in[l];
        for (unsigned l = 0; l < 32; ++l)
          if (out[l]) *out[l] = all;
      },
      loc);
}

namespace llmk::sim::detail {

LLMK_SIM_BOOKKEEPING void active_mask_arrive(Thread& t, const std::source_location& loc) {
  t.where = loc;
  t.state = WaitState::kActiveMask;
}
LLMK_SIM_BOOKKEEPING unsigned active_mask_result(const Thread& t) {
  return t.active_mask_result;
}

}  // namespace llmk::sim::detail

// The lanes of the calling warp that reach this same __activemask call: resolved when no lane of the block
// can make progress any more, so every lane that could arrive has arrived (a deterministic reading of
// "the threads currently converged with the caller").
inline unsigned __activemask(std::source_location loc = std::source_location::current()) {
  auto& t = ::llmk::sim::detail::current_thread();
  ::llmk::sim::detail::active_mask_arrive(t, loc);
  ::llmk::sim::detail::yield_without_sync(t);  // not a memory barrier: no happens-before edge
  return ::llmk::sim::detail::active_mask_result(t);
}

// ---- shuffles
// ----------------------------------------------------------------------------------------------- Implemented
// from the PTX shfl.sync definition (mode, b = lane or offset, c = clamp | segment mask << 8), with c
// computed from `width` the way CUDA C++ does.

namespace llmk::sim::detail {

enum class ShuffleMode { kIdx, kUp, kDown, kBfly };

struct ShuffleIn {
  std::uint64_t bits;
  unsigned b;
  unsigned c;
};
struct ShuffleOut {
  std::uint64_t bits;
  int bad_source;  // lane read outside the mask, or -1
  int bad_width;
};

inline std::uint64_t shuffle(const char* op, ShuffleMode mode, unsigned mask, std::uint64_t bits, unsigned b,
                             int width, const std::source_location& loc) {
  if (width < 1 || width > 32 || (width & (width - 1)) != 0)
    ::llmk::sim::fail(
        std::string(op) + ": width must be a power of two in [1, 32], got " + std::to_string(width), loc);
  const unsigned seg = static_cast<unsigned>(32 - width) << 8;
  const unsigned c = mode == ShuffleMode::kUp ? seg : (seg | 0x1fu);
  ShuffleOut out = ::llmk::sim::warp_collective<ShuffleOut>(
      op, mask, ShuffleIn{bits, b, c},
      [mode, mask](const ShuffleIn* const* in, ShuffleOut* const* outs) {
        for (int lane = 0; lane < 32; ++lane) {
          if (!in[lane]) continue;
          const int bval = static_cast<int>(in[lane]->b & 0x1fu);
          const int cval = static_cast<int>(in[lane]->c & 0x1fu);
          const int segmask = static_cast<int>((in[lane]->c >> 8) & 0x1fu);
          const int max_lane = (lane & segmask) | (cval & ~segmask);
          const int min_lane = lane & segmask;
          int j = lane;
          bool pval = false;
          switch (mode) {
            case ShuffleMode::kUp:
              j = lane - bval;
              pval = j >= max_lane;
              break;
            case ShuffleMode::kDown:
              j = lane + bval;
              pval = j <= max_lane;
              break;
            case ShuffleMode::kBfly:
              j = lane ^ bval;
              pval = j <= max_lane;
              break;
            case ShuffleMode::kIdx:
              j = min_lane | (bval & ~segmask);
              pval = j <= max_lane;
              break;
          }
          if (!pval) j = lane;
          ShuffleOut& o = *outs[lane];
          o.bad_width = in[lane]->c != in[__builtin_ctz(mask)]->c;
          if ((mask & (1u << j)) == 0) {
            o.bad_source = j;
            o.bits = 0;
          } else {
            o.bad_source = -1;
            o.bits = in[j]->bits;
          }
        }
      },
      loc);
  if (out.bad_width) ::llmk::sim::fail(std::string(op) + ": lanes of one shuffle use different widths", loc);
  if (out.bad_source >= 0)
    ::llmk::sim::fail(std::string(op) + ": reads lane " + std::to_string(out.bad_source) +
                          ", which is not in the mask (undefined on the GPU)",
                      loc);
  return out.bits;
}

template <class T>
inline std::uint64_t to_bits64(const T& v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "shuffles move trivially copyable values of at most 8 bytes");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <class T>
inline T from_bits64(std::uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

}  // namespace llmk::sim::detail

template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
                     std::source_location loc = std::source_location::current()) {
  using namespace ::llmk::sim::detail;
  return from_bits64<T>(shuffle("__shfl_sync", ShuffleMode::kIdx, mask, to_bits64(var),
                                static_cast<unsigned>(src_lane), width, loc));
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                        std::source_location loc = std::source_location::current()) {
  using namespace ::llmk::sim::detail;
  return from_bits64<T>(shuffle("__shfl_up_sync", ShuffleMode::kUp, mask, to_bits64(var), delta, width, loc));
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                          std::source_location loc = std::source_location::current()) {
  using namespace ::llmk::sim::detail;
  return from_bits64<T>(
      shuffle("__shfl_down_sync", ShuffleMode::kDown, mask, to_bits64(var), delta, width, loc));
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                         std::source_location loc = std::source_location::current()) {
  using namespace ::llmk::sim::detail;
  return from_bits64<T>(shuffle("__shfl_xor_sync", ShuffleMode::kBfly, mask, to_bits64(var),
                                static_cast<unsigned>(lane_mask), width, loc));
}

// ---- warp reductions (sm_80 redux.sync)
// ---------------------------------------------------------------------

namespace llmk::sim::detail {
template <class T, class Op>
inline T warp_reduce(const char* name, unsigned mask, T value, Op op, const std::source_location& loc) {
  return ::llmk::sim::warp_collective<T>(
      name, mask, value,
      [op](const T* const* in, T* const* out) {
        bool first = true;
        T acc{};
        for (unsigned l = 0; l < 32; ++l) {
          if (!in[l]) continue;
          acc = first ? *in[l] : op(acc, *in[l]);
          first = false;
        }
        for (unsigned l = 0; l < 32; ++l)
          if (out[l]) *out[l] = acc;
      },
      loc);
}
}  // namespace llmk::sim::detail

inline unsigned __reduce_add_sync(unsigned mask, unsigned v,
                                  std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::detail::warp_reduce(
      "__reduce_add_sync", mask, v, [](unsigned a, unsigned b) { return a + b; }, loc);
}
inline int __reduce_add_sync(unsigned mask, int v,
                             std::source_location loc = std::source_location::current()) {
  return static_cast<int>(__reduce_add_sync(mask, static_cast<unsigned>(v), loc));
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned v,
                                  std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::detail::warp_reduce(
      "__reduce_min_sync", mask, v, [](unsigned a, unsigned b) { return a < b ? a : b; }, loc);
}
inline int __reduce_min_sync(unsigned mask, int v,
                             std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::detail::warp_reduce(
      "__reduce_min_sync.s32", mask, v, [](int a, int b) { return a < b ? a : b; }, loc);
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v,
                                  std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::detail::warp_reduce(
      "__reduce_max_sync", mask, v, [](unsigned a, unsigned b) { return a > b ? a : b; }, loc);
}
inline int __reduce_max_sync(unsigned mask, int v,
                             std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::detail::warp_reduce(
      "__reduce_max_sync.s32", mask, v, [](int a, int b) { return a > b ? a : b; }, loc);
}
inline unsigned __reduce_and_sync(unsigned mask, unsigned v,
                                  std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::detail::warp_reduce(
      "__reduce_and_sync", mask, v, [](unsigned a, unsigned b) { return a & b; }, loc);
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned v,
                                 std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::detail::warp_reduce(
      "__reduce_or_sync", mask, v, [](unsigned a, unsigned b) { return a | b; }, loc);
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned v,
                                  std::source_location loc = std::source_location::current()) {
  return ::llmk::sim::detail::warp_reduce(
      "__reduce_xor_sync", mask, v, [](unsigned a, unsigned b) { return a ^ b; }, loc);
}

// ---- atomics and fences
// ------------------------------------------------------------------------------------- Real atomics across
// the OS threads that run blocks. They are acq_rel, stronger than CUDA's relaxed device atomics, so the usual
// "write, __threadfence, atomic flag" patterns are race-free under TSan too.

namespace llmk::sim::detail {
template <class T, class F>
inline T atomic_update(T* address, F next) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load(std::memory_order_relaxed);
  while (!ref.compare_exchange_weak(old, next(old), std::memory_order_acq_rel, std::memory_order_relaxed)) {
  }
  return old;
}
}  // namespace llmk::sim::detail

template <class T>
inline T atomicAdd(T* address, std::type_identity_t<T> val) {
  static_assert(std::is_arithmetic_v<T>, "atomicAdd: arithmetic types only");
  return std::atomic_ref<T>(*address).fetch_add(val, std::memory_order_acq_rel);
}
template <class T>
inline T atomicSub(T* address, std::type_identity_t<T> val) {
  return std::atomic_ref<T>(*address).fetch_sub(val, std::memory_order_acq_rel);
}
template <class T>
inline T atomicExch(T* address, std::type_identity_t<T> val) {
  return std::atomic_ref<T>(*address).exchange(val, std::memory_order_acq_rel);
}
template <class T>
inline T atomicMin(T* address, std::type_identity_t<T> val) {
  return ::llmk::sim::detail::atomic_update(address, [val](T old) { return val < old ? val : old; });
}
template <class T>
inline T atomicMax(T* address, std::type_identity_t<T> val) {
  return ::llmk::sim::detail::atomic_update(address, [val](T old) { return val > old ? val : old; });
}
template <class T>
inline T atomicAnd(T* address, std::type_identity_t<T> val) {
  return std::atomic_ref<T>(*address).fetch_and(val, std::memory_order_acq_rel);
}
template <class T>
inline T atomicOr(T* address, std::type_identity_t<T> val) {
  return std::atomic_ref<T>(*address).fetch_or(val, std::memory_order_acq_rel);
}
template <class T>
inline T atomicXor(T* address, std::type_identity_t<T> val) {
  return std::atomic_ref<T>(*address).fetch_xor(val, std::memory_order_acq_rel);
}
template <class T>
inline T atomicCAS(T* address, std::type_identity_t<T> compare, std::type_identity_t<T> val) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, val, std::memory_order_acq_rel,
                                                       std::memory_order_acquire);
  return compare;  // the old value, whether or not the swap happened
}
inline unsigned atomicInc(unsigned* address, unsigned val) {
  return ::llmk::sim::detail::atomic_update(address,
                                            [val](unsigned old) { return old >= val ? 0u : old + 1; });
}
inline unsigned atomicDec(unsigned* address, unsigned val) {
  return ::llmk::sim::detail::atomic_update(
      address, [val](unsigned old) { return (old == 0 || old > val) ? val : old - 1; });
}

// Fences are full fences. TSan does not model standalone fences (GCC warns and ignores them); the acq_rel
// atomics above already carry the ordering it needs, so under TSan the fences compile to nothing.
#if defined(__SANITIZE_THREAD__)
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}
#else
inline void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void __threadfence_block() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void __threadfence_system() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
#endif

// A yield point without any memory ordering: lets a thread that polls a flag written by another thread of its
// block make progress in the simulator (which otherwise switches threads only at synchronisation points).
inline void __nanosleep(unsigned /*ns*/) {
  ::llmk::sim::detail::yield_without_sync(::llmk::sim::detail::current_thread());
}

[[noreturn]] inline void __trap(std::source_location loc = std::source_location::current()) {
  ::llmk::sim::fail("__trap() executed", loc);
}

// ---- bit and float intrinsics
// -------------------------------------------------------------------------------

inline int __popc(unsigned x) {
  return std::popcount(x);
}
inline int __popcll(unsigned long long x) {
  return std::popcount(x);
}
inline int __clz(int x) {
  return std::countl_zero(static_cast<unsigned>(x));
}
inline int __clzll(long long x) {
  return std::countl_zero(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) {
  return x == 0 ? 0 : std::countr_zero(static_cast<unsigned>(x)) + 1;
}
inline int __ffsll(long long x) {
  return x == 0 ? 0 : std::countr_zero(static_cast<unsigned long long>(x)) + 1;
}
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
// PRMT default mode: result byte i = byte selector[4i+2..4i] of the 8-byte value {y, x}.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const std::uint64_t v = (static_cast<std::uint64_t>(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i)
    r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  const std::uint64_t v = (static_cast<std::uint64_t>(hi) << 32) | lo;
  return static_cast<unsigned>((v << (shift & 31u)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  const std::uint64_t v = (static_cast<std::uint64_t>(hi) << 32) | lo;
  return static_cast<unsigned>(v >> (shift & 31u));
}
inline float __uint_as_float(unsigned x) {
  return std::bit_cast<float>(x);
}
inline unsigned __float_as_uint(float x) {
  return std::bit_cast<unsigned>(x);
}
inline float __int_as_float(int x) {
  return std::bit_cast<float>(x);
}
inline int __float_as_int(float x) {
  return std::bit_cast<int>(x);
}
inline double __longlong_as_double(long long x) {
  return std::bit_cast<double>(x);
}
inline long long __double_as_longlong(double x) {
  return std::bit_cast<long long>(x);
}
inline float __fdividef(float a, float b) {
  return a / b;
}
inline float __expf(float x) {
  return std::exp(x);
}
inline float __logf(float x) {
  return std::log(x);
}
inline float __saturatef(float x) {
  return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x));
}
inline float __fmaf_rn(float a, float b, float c) {
  return std::fma(a, b, c);
}
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
