// llmk/core/int4.cuh: packed 4-bit integers (signed s4 in [-8, 7], unsigned u4 in [0, 15]).
//
// Nibble order, everywhere in llmk (memory, registers, int4 GEMM weights):
//   element 2i   -> LOW nibble  (bits 0-3) of byte i
//   element 2i+1 -> HIGH nibble (bits 4-7) of byte i
// so in a little-endian 32-bit word element j (0..7) occupies bits 4j .. 4j+3. This is the layout
// mma.m16n8k64 .s4/.u4 reads: the element with the lower k index sits in the less significant bits.
//
// Values written with set()/pack_*() are MASKED to 4 bits (e.g. 9 stored as s4 reads back as -7):
// passing an out-of-range value is a programming error that these helpers do not diagnose. Use the
// *_saturate variants when the input may be out of range and clamping is what you want.
#pragma once

#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"

#include <cstdint>

namespace llmk {

namespace detail {
// Sign-extends the low 4 bits: put the nibble at the top of an int32 and shift back arithmetically.
LLMK_HOST_DEVICE constexpr int sign_extend_nibble(uint32_t nibble) {
  return int32_t(nibble << 28) >> 28;
}
LLMK_HOST_DEVICE constexpr int clamp_int(int value, int lowest, int highest) {
  return value < lowest ? lowest : (value > highest ? highest : value);
}
}  // namespace detail

/// Two signed 4-bit integers in one byte: element 0 in bits 0-3, element 1 in bits 4-7.
///   llmk::int4x2 pair = llmk::int4x2::pack_saturate(-3, 20);   // {-3, 7}
///   int second = pair.get(1);                                  // 7
///   pair.set(0, 5);                                            // value is masked to 4 bits
struct int4x2 {
  uint8_t bits;

  LLMK_HOST_DEVICE static constexpr int4x2 from_bits(uint8_t raw) {
    int4x2 out{};
    out.bits = raw;
    return out;
  }
  /// Packs two values, each masked to 4 bits (in-range values are the caller's responsibility).
  LLMK_HOST_DEVICE static constexpr int4x2 pack(int first, int second) {
    return from_bits(uint8_t((uint32_t(first) & 0xFu) | ((uint32_t(second) & 0xFu) << 4)));
  }
  /// Packs two values clamped to [-8, 7].
  LLMK_HOST_DEVICE static constexpr int4x2 pack_saturate(int first, int second) {
    return pack(detail::clamp_int(first, -8, 7), detail::clamp_int(second, -8, 7));
  }
  /// Element i (0 or 1), sign-extended to [-8, 7].
  LLMK_HOST_DEVICE constexpr int get(int i) const {
    return detail::sign_extend_nibble((uint32_t(bits) >> (4 * i)) & 0xFu);
  }
  /// Sets element i (0 or 1) to the low 4 bits of `value`.
  LLMK_HOST_DEVICE constexpr void set(int i, int value) {
    const uint32_t shift = 4u * uint32_t(i);
    bits = uint8_t((uint32_t(bits) & ~(0xFu << shift)) | ((uint32_t(value) & 0xFu) << shift));
  }
};

/// Two unsigned 4-bit integers in one byte: element 0 in bits 0-3, element 1 in bits 4-7.
///   llmk::uint4x2 pair = llmk::uint4x2::pack(3, 12);   // bits == 0xC3
struct uint4x2 {
  uint8_t bits;

  LLMK_HOST_DEVICE static constexpr uint4x2 from_bits(uint8_t raw) {
    uint4x2 out{};
    out.bits = raw;
    return out;
  }
  /// Packs two values, each masked to 4 bits.
  LLMK_HOST_DEVICE static constexpr uint4x2 pack(int first, int second) {
    return from_bits(uint8_t((uint32_t(first) & 0xFu) | ((uint32_t(second) & 0xFu) << 4)));
  }
  /// Packs two values clamped to [0, 15].
  LLMK_HOST_DEVICE static constexpr uint4x2 pack_saturate(int first, int second) {
    return pack(detail::clamp_int(first, 0, 15), detail::clamp_int(second, 0, 15));
  }
  /// Element i (0 or 1) in [0, 15].
  LLMK_HOST_DEVICE constexpr int get(int i) const { return int((uint32_t(bits) >> (4 * i)) & 0xFu); }
  /// Sets element i (0 or 1) to the low 4 bits of `value`.
  LLMK_HOST_DEVICE constexpr void set(int i, int value) {
    const uint32_t shift = 4u * uint32_t(i);
    bits = uint8_t((uint32_t(bits) & ~(0xFu << shift)) | ((uint32_t(value) & 0xFu) << shift));
  }
};

static_assert(sizeof(int4x2) == 1 && sizeof(uint4x2) == 1);

/// Packs 8 signed values into a 32-bit word, element j in bits 4j..4j+3, each masked to 4 bits.
///   int8_t w[8] = {0, 1, 2, 3, -1, -2, -3, -8};
///   uint32_t word = llmk::pack_int4x8(w);   // 0x8DEF3210
LLMK_HOST_DEVICE constexpr uint32_t pack_int4x8(const int8_t* values) {
  uint32_t word = 0;
  for (int j = 0; j < 8; ++j) word |= (uint32_t(values[j]) & 0xFu) << (4 * j);
  return word;
}
/// Like pack_int4x8 but clamps each value to [-8, 7] first (e.g. after rounding a quantized value).
///   int q[8] = {-9, 0, 1, 2, 3, 4, 5, 20};
///   uint32_t word = llmk::pack_int4x8_saturate(q);   // elements {-8, 0, 1, 2, 3, 4, 5, 7}
LLMK_HOST_DEVICE constexpr uint32_t pack_int4x8_saturate(const int* values) {
  uint32_t word = 0;
  for (int j = 0; j < 8; ++j) {
    word |= (uint32_t(detail::clamp_int(values[j], -8, 7)) & 0xFu) << (4 * j);
  }
  return word;
}
/// Element j (0..7) of a packed s4 word, sign-extended:  int v = llmk::int4x8_get(word, 3);
LLMK_HOST_DEVICE constexpr int int4x8_get(uint32_t word, int j) {
  return detail::sign_extend_nibble((word >> (4 * j)) & 0xFu);
}
/// Unpacks 8 signed values (inverse of pack_int4x8 for in-range values).
///   int8_t w[8];
///   llmk::unpack_int4x8(word, w);
LLMK_HOST_DEVICE constexpr void unpack_int4x8(uint32_t word, int8_t* values) {
  for (int j = 0; j < 8; ++j) values[j] = int8_t(int4x8_get(word, j));
}

/// Packs 8 unsigned values into a 32-bit word, element j in bits 4j..4j+3, each masked to 4 bits.
///   uint8_t w[8] = {1, 2, 3, 4, 5, 6, 7, 15};
///   uint32_t word = llmk::pack_uint4x8(w);  // 0xF7654321
LLMK_HOST_DEVICE constexpr uint32_t pack_uint4x8(const uint8_t* values) {
  uint32_t word = 0;
  for (int j = 0; j < 8; ++j) word |= (uint32_t(values[j]) & 0xFu) << (4 * j);
  return word;
}
/// Like pack_uint4x8 but clamps each value to [0, 15] first:  uint32_t w = llmk::pack_uint4x8_saturate(q);
LLMK_HOST_DEVICE constexpr uint32_t pack_uint4x8_saturate(const int* values) {
  uint32_t word = 0;
  for (int j = 0; j < 8; ++j) word |= uint32_t(detail::clamp_int(values[j], 0, 15)) << (4 * j);
  return word;
}
/// Element j (0..7) of a packed u4 word:  int v = llmk::uint4x8_get(word, 3);
LLMK_HOST_DEVICE constexpr int uint4x8_get(uint32_t word, int j) {
  return int((word >> (4 * j)) & 0xFu);
}
/// Unpacks 8 unsigned values (inverse of pack_uint4x8 for in-range values).
///   uint8_t w[8];
///   llmk::unpack_uint4x8(word, w);
LLMK_HOST_DEVICE constexpr void unpack_uint4x8(uint32_t word, uint8_t* values) {
  for (int j = 0; j < 8; ++j) values[j] = uint8_t(uint4x8_get(word, j));
}

}  // namespace llmk
