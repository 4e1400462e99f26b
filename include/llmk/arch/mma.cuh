// llmk/arch/mma.cuh: warp-level mma.sync atoms (one struct per PTX instruction, CuTe-arch style).
//
//   D = A * B + C for one warp; A is 16 x K (row-major fragments), B is K x 8 (column-major fragments),
//   C and D are 16 x 8. Every lane of the warp must call the atom (mask 0xffffffff, .sync.aligned).
//
// Names: MMA_<M>x<N>x<K>_<D><A><B><C>[_SATFINITE], e.g. MMA_16x8x32_S32S8S8S32_SATFINITE.
// Registers (ptx-fragments.md, PTX ISA "Matrix Fragments for mma.m16n8k16/k32/k64"), with g = lane / 4 and
// t = lane % 4, E = 32 / element bits elements per register (low bits first), K the atom's K:
//   A: a[r] holds row g + 8 * (r & 1), columns t*E .. t*E + E-1, plus K/2 when r >= 2.
//   B: b[r] holds column g, rows (k) t*E .. t*E + E-1, plus K/2 for r == 1.
//   C, D: c[i] holds row g + 8 * (i >> 1), column 2t + (i & 1).
//
// Simulator semantics (LLMK_SIM):
//   - float accumulators: each D element is the EXACT value of c + sum_k a*b (computed in a wide fixed-point
//     accumulator, no intermediate rounding), rounded once to float32 (round to nearest even; an exact zero
//     gives +0; NaN in, or inf - inf, gives NaN). The hardware's internal accumulation order and rounding are
//     unspecified (and differ between architectures: fp8 mma on sm_89/sm_90 is known to keep fewer
//     accumulator bits), so GPU tests compare with a tolerance; simulator tests compare exactly.
//   - integer accumulators: the exact sum in int64, then wrapped modulo 2^32 (two's complement), or clamped
//     to [INT32_MIN, INT32_MAX] by the _SATFINITE variants.
//
// Architecture: every atom needs sm_80, except the fp8 ones, which need sm_89 (PTX ISA 8.4). In an nvcc
// device pass for an older architecture, instantiating an fp8 atom's fma() is a compile error (the fp8
// fma() is a template for that reason); guard fp8 code with `if constexpr (llmk::arch::kHasFp8Mma)` inside a
// template, or with `#if LLMK_ARCH == 0 || LLMK_ARCH >= 890`.
//
// Usage (one k-step of a warp's 16 x 8 fp32 tile; a and b loaded with LDSM_x4 / LDSM_x2_T, ldmatrix.cuh):
//
//   float acc[4] = {};
//   std::uint32_t a[4], b[2];
//   llmk::arch::MMA_16x8x16_F32F16F16F32::fma(acc, a, b, acc);   // D = A * B + C, in place
#pragma once

#include "llmk/config.cuh"

#include <cstdint>

#if defined(LLMK_SIM)
#include <vector>

#include "llmk/arch/detail/exact.hpp"
#include "llmk/sim/runtime.hpp"
#endif

namespace llmk::arch {

/// True where fp8 mma.sync can be used in the current compilation pass (host pass and simulator: true).
inline constexpr bool kHasFp8Mma = (LLMK_ARCH == 0 || LLMK_ARCH >= 890);

namespace detail {

enum class Elem { f16, bf16, e4m3, e5m2, s8, u8, s4, u4 };

constexpr int elem_bits(Elem e) {
  return (e == Elem::f16 || e == Elem::bf16) ? 16 : (e == Elem::s4 || e == Elem::u4) ? 4 : 8;
}

template <class T>
inline constexpr bool dependent_false = false;

#if defined(LLMK_SIM)

inline std::int64_t decode_int(std::uint32_t code, Elem e) {
  switch (e) {
    case Elem::s8:
      return static_cast<std::int8_t>(static_cast<std::uint8_t>(code));
    case Elem::u8:
      return code & 0xFFu;
    case Elem::s4:
      return (code & 8u) ? static_cast<std::int64_t>(code & 0xFu) - 16 : (code & 0xFu);
    case Elem::u4:
      return code & 0xFu;
    default:
      std::abort();
  }
}

inline FpParts decode_float(std::uint32_t code, Elem e) {
  switch (e) {
    case Elem::f16:
      return decode_fp(code, kF16);
    case Elem::bf16:
      return decode_fp(code, kBF16);
    case Elem::e4m3:
      return decode_fp(code, kE4M3);
    case Elem::e5m2:
      return decode_fp(code, kE5M2);
    default:
      std::abort();
  }
}

// Emulates mma.sync.aligned.m16n8k<K>.row.col for one warp. Acc is float or std::int32_t.
template <int K, Elem EA, Elem EB, class Acc, bool kSatfinite>
struct MmaEmulation {
  static_assert(elem_bits(EA) == elem_bits(EB), "A and B element widths must match");
  static constexpr int kBits = elem_bits(EA);
  static constexpr int kPerReg = 32 / kBits;
  static_assert(K == 8 * kPerReg, "K must be 8 registers' worth of elements (2 A regs x 4 lanes per row)");
  static constexpr bool kFloat = EA == Elem::f16 || EA == Elem::bf16 || EA == Elem::e4m3 || EA == Elem::e5m2;

  struct In {
    std::uint32_t a[4];
    std::uint32_t b[2];
    Acc c[4];
  };
  struct Out {
    Acc d[4];
  };

  static std::uint32_t field(std::uint32_t reg, int e) {
    return (reg >> (e * kBits)) & ((kBits == 32) ? 0xFFFFFFFFu : ((1u << kBits) - 1u));
  }

  static void compute(const In* const* ins, Out* const* outs) {
    std::uint32_t A[16][K];
    std::uint32_t B[K][8];
    Acc C[16][8];
    for (int lane = 0; lane < 32; ++lane) {
      const In& in = *ins[lane];
      const int g = lane >> 2, t = lane & 3;
      for (int r = 0; r < 4; ++r)
        for (int e = 0; e < kPerReg; ++e)
          A[g + 8 * (r & 1)][t * kPerReg + e + (r >> 1) * (K / 2)] = field(in.a[r], e);
      for (int r = 0; r < 2; ++r)
        for (int e = 0; e < kPerReg; ++e) B[t * kPerReg + e + r * (K / 2)][g] = field(in.b[r], e);
      for (int i = 0; i < 4; ++i) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = in.c[i];
    }
    Acc D[16][8];
    // Float operands decoded once each (not once per product); B transposed so that a column is contiguous.
    [[maybe_unused]] std::vector<FpParts> fa, fb;
    if constexpr (kFloat) {
      fa.resize(16 * K);
      fb.resize(8 * K);
      for (int m = 0; m < 16; ++m)
        for (int k = 0; k < K; ++k) fa[static_cast<std::size_t>(m * K + k)] = decode_float(A[m][k], EA);
      for (int k = 0; k < K; ++k)
        for (int n = 0; n < 8; ++n) fb[static_cast<std::size_t>(n * K + k)] = decode_float(B[k][n], EB);
    }
    for (int m = 0; m < 16; ++m) {
      for (int n = 0; n < 8; ++n) {
        if constexpr (kFloat) {
          ExactSum sum;
          sum.add_float(C[m][n]);
          sum.add_dot(&fa[static_cast<std::size_t>(m * K)], &fb[static_cast<std::size_t>(n * K)], K);
          D[m][n] = sum.round_to_float();
        } else {
          std::int64_t s = C[m][n];
          for (int k = 0; k < K; ++k) s += decode_int(A[m][k], EA) * decode_int(B[k][n], EB);
          if constexpr (kSatfinite) {
            if (s > INT32_MAX) s = INT32_MAX;
            if (s < INT32_MIN) s = INT32_MIN;
            D[m][n] = static_cast<std::int32_t>(s);
          } else {
            D[m][n] = static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(s)));
          }
        }
      }
    }
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane >> 2, t = lane & 3;
      for (int i = 0; i < 4; ++i) outs[lane]->d[i] = D[g + 8 * (i >> 1)][2 * t + (i & 1)];
    }
  }

  static void run(Acc (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2], const Acc (&c)[4],
                  const char* op, std::source_location loc) {
    In in;
    for (int i = 0; i < 4; ++i) in.a[i] = a[i];
    for (int i = 0; i < 2; ++i) in.b[i] = b[i];
    for (int i = 0; i < 4; ++i) in.c[i] = c[i];
    const Out out = ::llmk::sim::warp_collective<Out>(op, 0xFFFFFFFFu, in, &compute, loc);
    for (int i = 0; i < 4; ++i) d[i] = out.d[i];
  }
};

#endif  // LLMK_SIM

}  // namespace detail

// The one place each accumulator type's inline asm is written.
#define LLMK_ARCH_MMA_ASM_F32(PTX)                                                                       \
  asm volatile(PTX " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"                        \
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), \
                 "f"(c[2]), "f"(c[3]))
#define LLMK_ARCH_MMA_ASM_S32(PTX)                                                                       \
  asm volatile(PTX " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"                        \
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), \
                 "r"(c[2]), "r"(c[3]))

#if defined(LLMK_SIM)
#define LLMK_ARCH_MMA_EMULATE(K, EA, EB, ACC, SAT, PTX)                                                      \
  ::llmk::arch::detail::MmaEmulation<K, ::llmk::arch::detail::Elem::EA, ::llmk::arch::detail::Elem::EB, ACC, \
                                     SAT>::run(d, a, b, c, PTX, LLMK_LOC_FWD)
#endif

// sm_80 atoms: the device body is the asm; the simulator body is the emulation; a plain host build never runs
// device code (the trap makes an accidental call loud).
#if LLMK_DEVICE_PASS
#define LLMK_ARCH_MMA_BODY_SM80(K, EA, EB, ACC, SAT, PTX, ASM) ASM(PTX)
#elif defined(LLMK_SIM)
#define LLMK_ARCH_MMA_BODY_SM80(K, EA, EB, ACC, SAT, PTX, ASM) LLMK_ARCH_MMA_EMULATE(K, EA, EB, ACC, SAT, PTX)
#elif defined(LLMK_HOST_ONLY)
#define LLMK_ARCH_MMA_BODY_SM80(K, EA, EB, ACC, SAT, PTX, ASM) __builtin_trap()
#else
#define LLMK_ARCH_MMA_BODY_SM80(K, EA, EB, ACC, SAT, PTX, ASM) (void)0
#endif

#define LLMK_ARCH_DEFINE_MMA(NAME, K, EA, EB, ACC, SAT, PTX, ASM)                                      \
  struct NAME {                                                                                        \
    using DRegisters = ACC[4];                                                                         \
    using ARegisters = std::uint32_t[4];                                                               \
    using BRegisters = std::uint32_t[2];                                                               \
    using CRegisters = ACC[4];                                                                         \
    static constexpr int kM = 16, kN = 8, kK = K;                                                      \
    static constexpr int kMinArch = 800; /* __CUDA_ARCH__ needed */                                    \
    static constexpr const char* kPtx = PTX;                                                           \
    LLMK_DEVICE static void fma(ACC (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2], \
                                const ACC (&c)[4] LLMK_LOC_TAIL) {                                     \
      LLMK_ARCH_MMA_BODY_SM80(K, EA, EB, ACC, SAT, PTX, ASM);                                          \
    }                                                                                                  \
  }

// ---- m16n8k16, f16 / bf16 inputs, f32 accumulate (sm_80) --------------------------------------------------
/// D = A * B + C, 16 x 8 x 16, f16 or bf16 inputs, f32 accumulators (example: the file comment).
LLMK_ARCH_DEFINE_MMA(MMA_16x8x16_F32F16F16F32, 16, f16, f16, float, false,
                     "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", LLMK_ARCH_MMA_ASM_F32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x16_F32BF16BF16F32, 16, bf16, bf16, float, false,
                     "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", LLMK_ARCH_MMA_ASM_F32);

// ---- m16n8k32, 8-bit integers, s32 accumulate (sm_80) -----------------------------------------------------
/// D = A * B + C, 16 x 8 x 32, s8/u8 inputs, s32 accumulators (wrapping, or clamped by _SATFINITE):
///   std::int32_t acc[4] = {};
///   llmk::arch::MMA_16x8x32_S32S8S8S32::fma(acc, a, b, acc);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x32_S32S8S8S32, 32, s8, s8, std::int32_t, false,
                     "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x32_S32U8U8S32, 32, u8, u8, std::int32_t, false,
                     "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x32_S32S8U8S32, 32, s8, u8, std::int32_t, false,
                     "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x32_S32U8S8S32, 32, u8, s8, std::int32_t, false,
                     "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x32_S32S8S8S32_SATFINITE, 32, s8, s8, std::int32_t, true,
                     "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x32_S32U8U8S32_SATFINITE, 32, u8, u8, std::int32_t, true,
                     "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.u8.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x32_S32S8U8S32_SATFINITE, 32, s8, u8, std::int32_t, true,
                     "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x32_S32U8S8S32_SATFINITE, 32, u8, s8, std::int32_t, true,
                     "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32", LLMK_ARCH_MMA_ASM_S32);

// ---- m16n8k64, 4-bit integers, s32 accumulate (sm_80; on sm_90 it is legal PTX, its speed is unmeasured)
/// D = A * B + C, 16 x 8 x 64, s4/u4 inputs (llmk/core/int4.cuh's nibble order), s32 accumulators; used
/// as the 8-bit atoms are:  llmk::arch::MMA_16x8x64_S32S4S4S32::fma(acc, a, b, acc);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x64_S32S4S4S32, 64, s4, s4, std::int32_t, false,
                     "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x64_S32U4U4S32, 64, u4, u4, std::int32_t, false,
                     "mma.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x64_S32S4U4S32, 64, s4, u4, std::int32_t, false,
                     "mma.sync.aligned.m16n8k64.row.col.s32.s4.u4.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x64_S32U4S4S32, 64, u4, s4, std::int32_t, false,
                     "mma.sync.aligned.m16n8k64.row.col.s32.u4.s4.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x64_S32S4S4S32_SATFINITE, 64, s4, s4, std::int32_t, true,
                     "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.s4.s4.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x64_S32U4U4S32_SATFINITE, 64, u4, u4, std::int32_t, true,
                     "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.u4.u4.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x64_S32S4U4S32_SATFINITE, 64, s4, u4, std::int32_t, true,
                     "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.s4.u4.s32", LLMK_ARCH_MMA_ASM_S32);
LLMK_ARCH_DEFINE_MMA(MMA_16x8x64_S32U4S4S32_SATFINITE, 64, u4, s4, std::int32_t, true,
                     "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.u4.s4.s32", LLMK_ARCH_MMA_ASM_S32);

// ---- m16n8k32, fp8 inputs, f32 accumulate (sm_89+) --------------------------------------------------------
// fma() is a template so that an sm_80 device pass only fails when a kernel actually instantiates it.
#if LLMK_DEVICE_PASS
#if LLMK_ARCH >= 890
#define LLMK_ARCH_MMA_BODY_SM89(NAME, K, EA, EB, PTX) LLMK_ARCH_MMA_ASM_F32(PTX)
#else
#define LLMK_ARCH_MMA_BODY_SM89(NAME, K, EA, EB, PTX) \
  static_assert(::llmk::arch::detail::dependent_false<Tag>,                                                 \
                #NAME " (" PTX ") needs sm_89 or newer, but this device pass has __CUDA_ARCH__ == "     \
                    LLMK_STRINGIFY(LLMK_ARCH) ". Guard the call with 'if constexpr (llmk::arch::kHasFp8Mma)' " \
                                              "in a template, or with '#if LLMK_ARCH == 0 || LLMK_ARCH >= 890'.")
#endif
#elif defined(LLMK_SIM)
#define LLMK_ARCH_MMA_BODY_SM89(NAME, K, EA, EB, PTX) LLMK_ARCH_MMA_EMULATE(K, EA, EB, float, false, PTX)
#elif defined(LLMK_HOST_ONLY)
#define LLMK_ARCH_MMA_BODY_SM89(NAME, K, EA, EB, PTX) __builtin_trap()
#else
#define LLMK_ARCH_MMA_BODY_SM89(NAME, K, EA, EB, PTX) (void)0
#endif

#define LLMK_ARCH_DEFINE_MMA_FP8(NAME, EA, EB, PTX)                                                      \
  struct NAME {                                                                                          \
    using DRegisters = float[4];                                                                         \
    using ARegisters = std::uint32_t[4];                                                                 \
    using BRegisters = std::uint32_t[2];                                                                 \
    using CRegisters = float[4];                                                                         \
    static constexpr int kM = 16, kN = 8, kK = 32;                                                       \
    static constexpr int kMinArch = 890; /* __CUDA_ARCH__ needed */                                      \
    static constexpr const char* kPtx = PTX;                                                             \
    template <class Tag = void>                                                                          \
    LLMK_DEVICE static void fma(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2], \
                                const float (&c)[4] LLMK_LOC_TAIL) {                                     \
      LLMK_ARCH_MMA_BODY_SM89(NAME, 32, EA, EB, PTX);                                                    \
    }                                                                                                    \
  }

/// D = A * B + C, 16 x 8 x 32, e4m3/e5m2 inputs, f32 accumulators (sm_89+; guard with kHasFp8Mma):
///   if constexpr (llmk::arch::kHasFp8Mma) llmk::arch::MMA_16x8x32_F32E4M3E4M3F32::fma(acc, a, b, acc);
LLMK_ARCH_DEFINE_MMA_FP8(MMA_16x8x32_F32E4M3E4M3F32, e4m3, e4m3,
                         "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32");
LLMK_ARCH_DEFINE_MMA_FP8(MMA_16x8x32_F32E5M2E5M2F32, e5m2, e5m2,
                         "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32");
LLMK_ARCH_DEFINE_MMA_FP8(MMA_16x8x32_F32E4M3E5M2F32, e4m3, e5m2,
                         "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32");
LLMK_ARCH_DEFINE_MMA_FP8(MMA_16x8x32_F32E5M2E4M3F32, e5m2, e4m3,
                         "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32");

#undef LLMK_ARCH_DEFINE_MMA_FP8
#undef LLMK_ARCH_MMA_BODY_SM89
#undef LLMK_ARCH_DEFINE_MMA
#undef LLMK_ARCH_MMA_BODY_SM80
#undef LLMK_ARCH_MMA_EMULATE
#undef LLMK_ARCH_MMA_ASM_S32
#undef LLMK_ARCH_MMA_ASM_F32

}  // namespace llmk::arch
