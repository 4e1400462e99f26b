// llmk/arch/mma_f32.cuh: the fp32-accumulating m16n8k16 atom for a 16-bit input type, and the packing of two
// floats into one of its operand registers (element 2t low, 2t + 1 high), for kernels templated on the type.
//
//   using M = llmk::arch::MmaF32For<llmk::bfloat16>;
//   std::uint32_t a0 = M::pack(p0, p1);       // cvt.rn.bf16x2.f32
//   M::Atom::fma(d, a, b, c);                  // mma.m16n8k16 .f32.bf16.bf16.f32
#pragma once

#include <cstdint>

#include "llmk/arch/convert.cuh"
#include "llmk/arch/mma.cuh"
#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"

namespace llmk::arch {

/// The m16n8k16 fp32-accumulating atom (Atom) and the operand packing (pack) for T (example: the file
/// comment).
template <class T>
struct MmaF32For;  // llmk::half and llmk::bfloat16 only

template <>
struct MmaF32For<half> {
  using Atom = MMA_16x8x16_F32F16F16F32;
  LLMK_DEVICE static std::uint32_t pack(float lo, float hi) { return cvt_f32x2_to_f16x2(lo, hi); }
};
template <>
struct MmaF32For<bfloat16> {
  using Atom = MMA_16x8x16_F32BF16BF16F32;
  LLMK_DEVICE static std::uint32_t pack(float lo, float hi) { return cvt_f32x2_to_bf16x2(lo, hi); }
};

}  // namespace llmk::arch
