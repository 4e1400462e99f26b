// llmk/arch/bit_ops.cuh: the two integer bit-manipulation instructions the weight-only dequantization needs.
//
//   std::uint32_t lop3<kLut>(a, b, c)   lop3.b32 d, a, b, c, kLut     any 3-input bitwise function: bit i of
//                                       d = bit (4 a_i + 2 b_i + c_i) of kLut; kLut = F(0xF0, 0xCC, 0xAA),
//                                       e.g. (a & b) | c = 0xEA, so (x & mask) | magic is ONE instruction
//   std::uint32_t prmt(a, b, sel)       prmt.b32 d, a, b, sel        byte permute (default mode): bytes 0-3
//                                       of a and 4-7 of b; nibble i of sel picks d's byte i (bit 3 of the
//                                       nibble replicates that byte's sign bit instead)
//
// Why atoms: ptxas does not always merge a mask and an OR with two immediates into one LOP3 (the weight-only
// loop had an AND and an OR per code pair), and nothing in C++ spells PRMT. Off the device both are computed
// bit by bit, exactly as the ISA defines them.
#pragma once

#include <cstdint>

#include "llmk/config.cuh"

namespace llmk::arch {

/// lop3.b32 with the truth table kLut (inputs a = 0xF0, b = 0xCC, c = 0xAA).
///   std::uint32_t pair = lop3<0xEA>(word, 0x000F000Fu, 0x64006400u);   // (word & mask) | magic
template <int kLut>
LLMK_HOST_DEVICE std::uint32_t lop3(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  static_assert(kLut >= 0 && kLut <= 0xFF, "lop3 takes an 8-bit truth table");
#if LLMK_DEVICE_PASS
  std::uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(kLut));
  return d;
#else
  std::uint32_t d = 0;
  for (int i = 0; i < 8; ++i)
    if ((kLut >> i) & 1) d |= ((i & 4) ? a : ~a) & ((i & 2) ? b : ~b) & ((i & 1) ? c : ~c);
  return d;
#endif
}

/// prmt.b32 (default mode): d's byte i is byte (sel >> 4i) & 7 of {b, a} (a = bytes 0-3), or, when bit 3 of
/// that nibble is set, that byte's sign bit replicated over 8 bits.
///   std::uint32_t h = prmt(word, 0x64646464u, 0x4240u);   // bytes 0 and 2 of word under 0x64: fp16 1024 + u
LLMK_HOST_DEVICE std::uint32_t prmt(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
#if LLMK_DEVICE_PASS
  std::uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
#else
  std::uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t nib = (sel >> (4 * i)) & 0xFu, idx = nib & 7u;
    std::uint32_t byte = ((idx < 4 ? a >> (8 * idx) : b >> (8 * (idx - 4)))) & 0xFFu;
    if (nib & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    d |= byte << (8 * i);
  }
  return d;
#endif
}

}  // namespace llmk::arch
