// llmk/arch/sm90/sm90.cuh: which compilation passes may emit Hopper instructions, for the atoms in this
// folder.
//
//   LLMK_SM90_ASM   1 in an nvcc device pass for sm_90 or newer (mbarrier.try_wait, TMA, elect.sync,
//                   stmatrix)
//   LLMK_SM90A_ASM  1 in an nvcc device pass for sm_90a (wgmma, setmaxnreg: arch-specific, -gencode
//                   arch=compute_90a,code=sm_90a)
//   kHasHopper / kHasWgmma  the same as constexpr flags, true in the simulator (which emulates every
//                   atom), so kernels can write `if constexpr (llmk::arch::sm90::kHasWgmma)` around
//                   Hopper-only code.
// In a device pass for an older architecture an atom's body is __trap(): a Hopper kernel compiled into an
// sm_80 fatbin entry must never reach it (the launchers dispatch on the device's architecture).
#pragma once

#include "llmk/config.cuh"

#include <cstdint>

#if LLMK_DEVICE_PASS && LLMK_ARCH >= 900
#define LLMK_SM90_ASM 1
#else
#define LLMK_SM90_ASM 0
#endif

#if LLMK_DEVICE_PASS && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LLMK_SM90A_ASM 1
#else
#define LLMK_SM90A_ASM 0
#endif

#if defined(LLMK_SIM)
#include "llmk/sim/runtime.hpp"
#endif

namespace llmk::arch::sm90 {

#if defined(LLMK_SIM)
inline constexpr bool kHasHopper = true;
inline constexpr bool kHasWgmma = true;
#else
inline constexpr bool kHasHopper = LLMK_SM90_ASM != 0;
inline constexpr bool kHasWgmma = LLMK_SM90A_ASM != 0;
#endif

/// Shared-memory swizzle of Hopper tiles, shared by TMA (tensor maps) and wgmma (descriptors): the 16-byte
/// chunk bits [4, 4 + log2 W) of the shared address are XOR-ed with bits [7, 7 + log2 W), W = 2/4/8 chunks
/// for 32B/64B/128B. The values are the wgmma descriptor's 2-bit encoding.
enum class SmemSwizzle : std::uint32_t { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

/// Bytes of a swizzle row: 32, 64, 128 (0 without swizzle):  swizzle_span(SmemSwizzle::k128B) == 128.
LLMK_HOST_DEVICE constexpr std::uint32_t swizzle_span(SmemSwizzle s) {
  return s == SmemSwizzle::k128B ? 128u : s == SmemSwizzle::k64B ? 64u : s == SmemSwizzle::k32B ? 32u : 0u;
}

/// The shared-window address of a pointer into the block's shared memory: what TMA, wgmma descriptors and the
/// swizzle see. The simulator's shared window is the block's arena (offset 0 at its start).
///   std::uint32_t addr = llmk::arch::sm90::shared_address(tile);
LLMK_DEVICE std::uint32_t shared_address(const void* p) {
#if LLMK_DEVICE_PASS
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
#elif defined(LLMK_SIM)
  return static_cast<std::uint32_t>(static_cast<const unsigned char*>(p) -
                                    ::llmk::sim::dynamic_shared_base());
#else
  (void)p;
  return 0;
#endif
}

/// `p` rounded up to the next multiple of Align in the shared window (allocate Align - 1 more bytes):
/// swizzled tiles must start at their repeat (1024 bytes for the 128B swizzle).
///   Storage& s = *reinterpret_cast<Storage*>(align_shared<1024>(llmk::dynamic_smem()));
template <unsigned Align>
LLMK_DEVICE unsigned char* align_shared(unsigned char* p) {
  static_assert((Align & (Align - 1)) == 0, "a power of two");
  return p + ((Align - (shared_address(p) & (Align - 1))) & (Align - 1));
}

namespace detail {
#if LLMK_DEVICE_PASS
/// The 32-bit shared-window address of a generic pointer into shared memory.
LLMK_DEVICE std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
#endif
}  // namespace detail

}  // namespace llmk::arch::sm90

// The body of an atom outside its own passes: the simulator's emulation, a trap on the device (older
// architectures) or in a host-only build.
#if defined(LLMK_SIM)
#define LLMK_SM90_UNAVAILABLE(...) (void)0
#elif LLMK_DEVICE_PASS
#define LLMK_SM90_UNAVAILABLE(...) __trap()
#elif defined(LLMK_HOST_ONLY)
#define LLMK_SM90_UNAVAILABLE(...) __builtin_trap()
#else
#define LLMK_SM90_UNAVAILABLE(...) (void)0
#endif
