// llmk/arch/sm90/wgmma.cuh: warpgroup matrix multiply-accumulate (wgmma.mma_async, sm_90a), its shared-memory
// matrix descriptors, and wgmma.fence / commit_group / wait_group.
//
// One wgmma computes D (64 x N) = A (64 x K) * B^T (B stored N x K) + (accumulate ? D : 0) for the 128
// threads of a warpgroup (warps 4k..4k+3, every thread executes it). K is 32 bytes of elements: 16 for
// f16/bf16, 32 for e4m3/e5m2/s8/u8. A comes from shared memory (a descriptor, _SS) or registers (_RS); B
// always from shared memory. Atoms are named WGMMA_64xNx<K>_<D><A><B>_<SS|RS>[_SATFINITE]<N>, N = 8, 16, ...,
// 256.
//
// Registers, with w = warp in the warpgroup, g = lane / 4, t = lane % 4 (PTX ISA "Register Fragments" for
// wgmma):
//   D: d[i] (i < N/2) holds row 16w + g + 8*((i >> 1) & 1), column 8*(i >> 2) + 2t + (i & 1)
//   A (RS), 16-bit: a[r] holds row 16w + g + 8*(r & 1), k = 2t + 8*(r >> 1) + {0, 1} (low half first)
//   A (RS), 8-bit:  a[r] holds row 16w + g + 8*(r & 1), k = 4t + 16*(r >> 1) + {0..3} (low byte first)
//
// Descriptors (make_smem_desc): start address, leading and stride byte offsets, swizzle (none/32B/64B/128B).
// K-major operand, element (r, k), b = k * element bytes:
//   no swizzle: start + (r / 8) * SBO + (r % 8) * 16 + (b / 16) * LBO + b % 16
//   swizzle W (W = 2/4/8 sixteen-byte chunks for 32B/64B/128B):
//               swz(start + (r / 8) * SBO + (r % 8) * 16W + b)      (LBO unused; b < 32)
// MN-major (Major::kMN, f16/bf16 from shared memory only), element (r, k):
//   no swizzle: start + (r / 8) * SBO + (r % 8) * 2 + (k % 8) * 16 + (k / 8) * LBO
//   swizzle W:  swz(start + (r % 8W) * 2 + (r / 8W) * LBO + (k % 8) * 16W + (k / 8) * SBO)
// where swz(x) = x ^ (((x >> 7) & (W - 1)) << 4) on the absolute shared address: a swizzled tile starts at a
// multiple of 128W bytes (1024 for 128B), which is also the layout TMA writes with the same swizzle mode.
//
// Asynchrony: wgmma_fence() before the first wgmma and after any wgmma_wait() (before the next wgmma);
// wgmma_commit() closes a group; wgmma_wait<N>() waits for all but the newest N groups. Accumulators and A
// registers must not be touched between the wgmma and the wait covering it (the simulator poisons them).
//
// Usage (one k-step of a 64 x 128 tile, A and B in 128B-swizzled K-major shared tiles):
//
//   float acc[64];
//   wgmma_fence();
//   WGMMA_64xNx16_F32F16F16_SS<128>::fma(acc, make_smem_desc(a_tile, 16, 1024, SmemSwizzle::k128B),
//                                        make_smem_desc(b_tile, 16, 1024, SmemSwizzle::k128B), k > 0);
//   wgmma_commit();
//   wgmma_wait<0>();
#pragma once

#include <cstdint>

#include "llmk/arch/sm90/sm90.cuh"

#if LLMK_SM90A_ASM
#include "llmk/arch/sm90/detail/wgmma_asm.inc"
#endif
#if defined(LLMK_SIM)
#include "llmk/arch/sm90/detail/wgmma_emulation.hpp"
#endif

namespace llmk::arch::sm90 {

/// Which dimension is contiguous in a shared-memory operand: K (the default, "TN") or M/N (transposed).
enum class Major : int { kK = 0, kMN = 1 };

/// The descriptor of a shared-memory operand starting at `smem` (16-byte aligned; swizzled tiles aligned to
/// their repeat), with leading / stride byte offsets as defined above (multiples of 16).
LLMK_DEVICE std::uint64_t make_smem_desc(const void* smem, std::uint32_t lbo_bytes, std::uint32_t sbo_bytes,
                                         SmemSwizzle swizzle) {
  const std::uint32_t start = shared_address(smem);
  return static_cast<std::uint64_t>((start & 0x3FFFFu) >> 4) |
         (static_cast<std::uint64_t>((lbo_bytes & 0x3FFFFu) >> 4) << 16) |
         (static_cast<std::uint64_t>((sbo_bytes & 0x3FFFFu) >> 4) << 32) |
         (static_cast<std::uint64_t>(swizzle) << 62);
}

/// The descriptor `desc` advanced by `bytes` (a multiple of 16) along its start address, e.g. to the next
/// 32-byte K step inside a swizzled row.
LLMK_HOST_DEVICE std::uint64_t advance_smem_desc(std::uint64_t desc, std::uint32_t bytes) {
  return desc + (bytes >> 4);
}

/// wgmma.fence: before the first wgmma and after any wgmma_wait (example: the file comment).
LLMK_DEVICE void wgmma_fence(LLMK_LOC_ONLY) {
#if LLMK_SM90A_ASM
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#elif defined(LLMK_SIM)
  (void)llmk_loc;
  detail::wgmma_fence_emulate();
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// wgmma.commit_group: closes the group of wgmmas issued since the last commit (example: the file comment).
LLMK_DEVICE void wgmma_commit(LLMK_LOC_ONLY) {
#if LLMK_SM90A_ASM
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#elif defined(LLMK_SIM)
  (void)llmk_loc;
  detail::wgmma_commit_emulate();
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// wgmma.wait_group N: waits until all but the newest N committed groups completed (example: the file
/// comment; wgmma_wait<1>() keeps one group in flight).
template <int N>
LLMK_DEVICE void wgmma_wait(LLMK_LOC_ONLY) {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes an immediate count; llmk allows 0..7");
#if LLMK_SM90A_ASM
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#elif defined(LLMK_SIM)
  detail::wgmma_wait_emulate(N, llmk_loc);
#else
  LLMK_SM90_UNAVAILABLE();
#endif
}

/// Keeps the compiler from moving accesses of accumulator registers across wgmma issue/wait points (a
/// compiler barrier, not an instruction):  wgmma_fence_registers(acc);
template <class T, int R>
LLMK_DEVICE void wgmma_fence_registers(T (&regs)[R]) {
#if LLMK_DEVICE_PASS
  for (int i = 0; i < R; ++i) {
    if constexpr (sizeof(T) == 4 && !std::is_integral_v<T>)
      asm volatile("" : "+f"(regs[i])::"memory");
    else
      asm volatile("" : "+r"(regs[i])::"memory");
  }
#else
  (void)regs;
#endif
}

#if defined(LLMK_SIM)
#define LLMK_WGMMA_EMULATE(K, EA, EB, INT, SAT, RS, MA, MB, SA, SB, PTX)                                    \
  ::llmk::arch::sm90::detail::wgmma_issue(                                                                  \
      ::llmk::arch::sm90::detail::WgmmaShape{N, K, ::llmk::arch::detail::Elem::EA,                          \
                                             ::llmk::arch::detail::Elem::EB, INT, SAT, RS, MA == Major::kK, \
                                             MB == Major::kK, SA, SB},                                      \
      PTX, d, RS ? a_regs : nullptr, desc_a, desc_b, accumulate, llmk_loc)
#endif

#if LLMK_SM90A_ASM
#define LLMK_WGMMA_DEVICE(FORM, KSTR, TYPES) LLMK_WGMMA_ASM_##FORM(KSTR, TYPES)
#else
#define LLMK_WGMMA_DEVICE(FORM, KSTR, TYPES) LLMK_SM90_UNAVAILABLE()
#endif

#if defined(LLMK_SIM)
#define LLMK_WGMMA_BODY(FORM, KSTR, TYPES, K, EA, EB, INT, SAT, RS, MA, MB, SA, SB, PTX) \
  LLMK_WGMMA_EMULATE(K, EA, EB, INT, SAT, RS, MA, MB, SA, SB, PTX)
#elif LLMK_DEVICE_PASS
#define LLMK_WGMMA_BODY(FORM, KSTR, TYPES, K, EA, EB, INT, SAT, RS, MA, MB, SA, SB, PTX) \
  LLMK_WGMMA_DEVICE(FORM, KSTR, TYPES)
#else
#define LLMK_WGMMA_BODY(FORM, KSTR, TYPES, K, EA, EB, INT, SAT, RS, MA, MB, SA, SB, PTX) \
  LLMK_SM90_UNAVAILABLE()
#endif

// f16 / bf16: scale (+1/-1) and transpose immediates for shared-memory operands.
#define LLMK_DEFINE_WGMMA_16BIT(NAME, TYPES, EA, EB)                                                       \
  template <int N>                                                                                         \
  struct NAME##_SS {                                                                                       \
    static constexpr int kM = 64, kN = N, kK = 16;                                                         \
    template <Major MA = Major::kK, Major MB = Major::kK, int SA = 1, int SB = 1>                          \
    LLMK_DEVICE static void fma(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,             \
                                bool accumulate LLMK_LOC_TAIL) {                                           \
      static_assert((SA == 1 || SA == -1) && (SB == 1 || SB == -1), "wgmma scales are +1 or -1");          \
      [[maybe_unused]] constexpr int TA = static_cast<int>(MA), TB = static_cast<int>(MB);                 \
      [[maybe_unused]] const std::uint32_t scale_d = accumulate ? 1u : 0u;                                 \
      [[maybe_unused]] const std::uint32_t* a_regs = nullptr;                                              \
      LLMK_WGMMA_BODY(F32_SS_SCALE_TRANS, "k16", TYPES, 16, EA, EB, false, false, false, MA, MB, SA, SB,   \
                      "wgmma.mma_async.m64nNk16" TYPES " (SS)");                                           \
    }                                                                                                      \
  };                                                                                                       \
  template <int N>                                                                                         \
  struct NAME##_RS {                                                                                       \
    static constexpr int kM = 64, kN = N, kK = 16;                                                         \
    template <Major MB = Major::kK, int SA = 1, int SB = 1>                                                \
    LLMK_DEVICE static void fma(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b,      \
                                bool accumulate LLMK_LOC_TAIL) {                                           \
      static_assert((SA == 1 || SA == -1) && (SB == 1 || SB == -1), "wgmma scales are +1 or -1");          \
      [[maybe_unused]] constexpr int TB = static_cast<int>(MB);                                            \
      [[maybe_unused]] const std::uint32_t scale_d = accumulate ? 1u : 0u;                                 \
      [[maybe_unused]] const std::uint32_t* a_regs = a;                                                    \
      [[maybe_unused]] const std::uint64_t desc_a = 0;                                                     \
      LLMK_WGMMA_BODY(F32_RS_SCALE_TRANS, "k16", TYPES, 16, EA, EB, false, false, true, Major::kK, MB, SA, \
                      SB, "wgmma.mma_async.m64nNk16" TYPES " (RS)");                                       \
    }                                                                                                      \
  }

// fp8: scale immediates, K-major only.
#define LLMK_DEFINE_WGMMA_FP8(NAME, TYPES, EA, EB)                                                           \
  template <int N>                                                                                           \
  struct NAME##_SS {                                                                                         \
    static constexpr int kM = 64, kN = N, kK = 32;                                                           \
    template <int SA = 1, int SB = 1>                                                                        \
    LLMK_DEVICE static void fma(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,               \
                                bool accumulate LLMK_LOC_TAIL) {                                             \
      static_assert((SA == 1 || SA == -1) && (SB == 1 || SB == -1), "wgmma scales are +1 or -1");            \
      [[maybe_unused]] const std::uint32_t scale_d = accumulate ? 1u : 0u;                                   \
      [[maybe_unused]] const std::uint32_t* a_regs = nullptr;                                                \
      LLMK_WGMMA_BODY(F32_SS_SCALE, "k32", TYPES, 32, EA, EB, false, false, false, Major::kK, Major::kK, SA, \
                      SB, "wgmma.mma_async.m64nNk32" TYPES " (SS)");                                         \
    }                                                                                                        \
  };                                                                                                         \
  template <int N>                                                                                           \
  struct NAME##_RS {                                                                                         \
    static constexpr int kM = 64, kN = N, kK = 32;                                                           \
    template <int SA = 1, int SB = 1>                                                                        \
    LLMK_DEVICE static void fma(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b,        \
                                bool accumulate LLMK_LOC_TAIL) {                                             \
      static_assert((SA == 1 || SA == -1) && (SB == 1 || SB == -1), "wgmma scales are +1 or -1");            \
      [[maybe_unused]] const std::uint32_t scale_d = accumulate ? 1u : 0u;                                   \
      [[maybe_unused]] const std::uint32_t* a_regs = a;                                                      \
      [[maybe_unused]] const std::uint64_t desc_a = 0;                                                       \
      LLMK_WGMMA_BODY(F32_RS_SCALE, "k32", TYPES, 32, EA, EB, false, false, true, Major::kK, Major::kK, SA,  \
                      SB, "wgmma.mma_async.m64nNk32" TYPES " (RS)");                                         \
    }                                                                                                        \
  }

// 8-bit integers: s32 accumulators, wrapping (or saturating with _SATFINITE), K-major only; N = 8, 16, 24,
// then multiples of 16 (ptxas rejects the others).
#define LLMK_DEFINE_WGMMA_INT8(NAME, TYPES, EA, EB, SAT)                                                     \
  template <int N>                                                                                           \
  struct NAME##_SS {                                                                                         \
    static_assert(N == 8 || N == 16 || N == 24 || (N % 16 == 0 && N >= 32 && N <= 256),                      \
                  "integer wgmma: N is 8, 16, 24 or a multiple of 16 up to 256");                            \
    static constexpr int kM = 64, kN = N, kK = 32;                                                           \
    LLMK_DEVICE static void fma(std::int32_t (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,        \
                                bool accumulate LLMK_LOC_TAIL) {                                             \
      [[maybe_unused]] const std::uint32_t scale_d = accumulate ? 1u : 0u;                                   \
      [[maybe_unused]] const std::uint32_t* a_regs = nullptr;                                                \
      LLMK_WGMMA_BODY(S32_SS, "k32", TYPES, 32, EA, EB, true, SAT, false, Major::kK, Major::kK, 1, 1,        \
                      "wgmma.mma_async.m64nNk32" TYPES " (SS)");                                             \
    }                                                                                                        \
  };                                                                                                         \
  template <int N>                                                                                           \
  struct NAME##_RS {                                                                                         \
    static_assert(N == 8 || N == 16 || N == 24 || (N % 16 == 0 && N >= 32 && N <= 256),                      \
                  "integer wgmma: N is 8, 16, 24 or a multiple of 16 up to 256");                            \
    static constexpr int kM = 64, kN = N, kK = 32;                                                           \
    LLMK_DEVICE static void fma(std::int32_t (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b, \
                                bool accumulate LLMK_LOC_TAIL) {                                             \
      [[maybe_unused]] const std::uint32_t scale_d = accumulate ? 1u : 0u;                                   \
      [[maybe_unused]] const std::uint32_t* a_regs = a;                                                      \
      [[maybe_unused]] const std::uint64_t desc_a = 0;                                                       \
      LLMK_WGMMA_BODY(S32_RS, "k32", TYPES, 32, EA, EB, true, SAT, true, Major::kK, Major::kK, 1, 1,         \
                      "wgmma.mma_async.m64nNk32" TYPES " (RS)");                                             \
    }                                                                                                        \
  }

/// f16 / bf16 inputs, f32 accumulators: <NAME>_SS<N>::fma(d, desc_a, desc_b, accumulate) and
/// <NAME>_RS<N>::fma(d, a, desc_b, accumulate) (A in four registers), d a float[N / 2] (example: the file
/// comment).
LLMK_DEFINE_WGMMA_16BIT(WGMMA_64xNx16_F32F16F16, ".f32.f16.f16", f16, f16);
LLMK_DEFINE_WGMMA_16BIT(WGMMA_64xNx16_F32BF16BF16, ".f32.bf16.bf16", bf16, bf16);

/// fp8 inputs (K = 32), f32 accumulators, K-major operands only:
///   WGMMA_64xNx32_F32E4M3E4M3_SS<128>::fma(acc, desc_a, desc_b, k > 0);   // float acc[64]
LLMK_DEFINE_WGMMA_FP8(WGMMA_64xNx32_F32E4M3E4M3, ".f32.e4m3.e4m3", e4m3, e4m3);
LLMK_DEFINE_WGMMA_FP8(WGMMA_64xNx32_F32E4M3E5M2, ".f32.e4m3.e5m2", e4m3, e5m2);
LLMK_DEFINE_WGMMA_FP8(WGMMA_64xNx32_F32E5M2E4M3, ".f32.e5m2.e4m3", e5m2, e4m3);
LLMK_DEFINE_WGMMA_FP8(WGMMA_64xNx32_F32E5M2E5M2, ".f32.e5m2.e5m2", e5m2, e5m2);

/// 8-bit integer inputs (K = 32), s32 accumulators (wrapping, or clamped by _SATFINITE):
///   WGMMA_64xNx32_S32S8S8_SS<128>::fma(acc, desc_a, desc_b, k > 0);       // std::int32_t acc[64]
LLMK_DEFINE_WGMMA_INT8(WGMMA_64xNx32_S32S8S8, ".s32.s8.s8", s8, s8, false);
LLMK_DEFINE_WGMMA_INT8(WGMMA_64xNx32_S32S8U8, ".s32.s8.u8", s8, u8, false);
LLMK_DEFINE_WGMMA_INT8(WGMMA_64xNx32_S32U8S8, ".s32.u8.s8", u8, s8, false);
LLMK_DEFINE_WGMMA_INT8(WGMMA_64xNx32_S32U8U8, ".s32.u8.u8", u8, u8, false);
LLMK_DEFINE_WGMMA_INT8(WGMMA_64xNx32_S32S8S8_SATFINITE, ".s32.s8.s8.satfinite", s8, s8, true);
LLMK_DEFINE_WGMMA_INT8(WGMMA_64xNx32_S32U8U8_SATFINITE, ".s32.u8.u8.satfinite", u8, u8, true);

}  // namespace llmk::arch::sm90
