// llmk/arch/detail/exact.hpp: exact arithmetic used by the simulator's emulation of the arch atoms.
//
// Plain host C++ (no CUDA, no simulator dependency). Included only where LLMK_SIM is defined.
//
// - decode_fp<Format>(bits): an element of a small floating-point format as sign * mant * 2^exp
//   (exact, integer mantissa), or NaN / infinity flags.
// - ExactSum: a fixed-point accumulator wide enough to hold any sum of 33 terms, each a float32
//   value or a product of two f16 / bf16 / e4m3 / e5m2 values, without rounding; round_to_float()
//   rounds the exact sum to float32 once (round to nearest, ties to even; overflow to infinity).
//   A plain double accumulator is NOT exact here: bf16 products span 2^-266 .. 2^256 and a sum of
//   them can need hundreds of bits, and rounding double -> float afterwards can double-round.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace llmk::arch::detail {

// IEEE-style binary format description. kFiniteOnly: the OCP E4M3 ("fn") rule: no infinities, the only NaN
// encodings are S.1111.111.
struct FpFormat {
  int exp_bits;
  int man_bits;
  int bias;
  bool finite_only;
};
inline constexpr FpFormat kF32{8, 23, 127, false};
inline constexpr FpFormat kF16{5, 10, 15, false};
inline constexpr FpFormat kBF16{8, 7, 127, false};
inline constexpr FpFormat kE4M3{4, 3, 7, true};
inline constexpr FpFormat kE5M2{5, 2, 15, false};

struct FpParts {
  bool nan = false;
  bool inf = false;
  bool neg = false;
  std::uint64_t mant = 0;  // value = (neg ? -1 : 1) * mant * 2^exp  (mant == 0: a zero)
  int exp = 0;
};

inline FpParts decode_fp(std::uint32_t bits, FpFormat f) {
  FpParts p;
  const std::uint32_t man_mask = (1u << f.man_bits) - 1u;
  const std::uint32_t exp_mask = (1u << f.exp_bits) - 1u;
  const std::uint32_t m = bits & man_mask;
  const std::uint32_t e = (bits >> f.man_bits) & exp_mask;
  p.neg = ((bits >> (f.man_bits + f.exp_bits)) & 1u) != 0;
  if (e == exp_mask) {
    if (f.finite_only) {
      if (m == man_mask) {
        p.nan = true;
        return p;
      }
    } else {
      if (m == 0)
        p.inf = true;
      else
        p.nan = true;
      return p;
    }
  }
  if (e == 0) {
    p.mant = m;
    p.exp = 1 - f.bias - f.man_bits;
  } else {
    p.mant = m | (1u << f.man_bits);
    p.exp = static_cast<int>(e) - f.bias - f.man_bits;
  }
  return p;
}

inline FpParts decode_f32(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return decode_fp(b, kF32);
}

// Exact product of two decoded values (NaN for NaN inputs and for infinity * zero).
inline FpParts multiply(const FpParts& a, const FpParts& b) {
  FpParts r;
  r.neg = a.neg != b.neg;
  if (a.nan || b.nan) {
    r.nan = true;
  } else if (a.inf || b.inf) {
    if ((!a.inf && a.mant == 0) || (!b.inf && b.mant == 0))
      r.nan = true;
    else
      r.inf = true;
  } else {
    r.mant = a.mant * b.mant;  // <= 24 x 24 bits
    r.exp = a.exp + b.exp;
  }
  return r;
}

class ExactSum {
 public:
  // Bit i of the fixed-point integer has weight 2^(i - kOffset). The smallest weight in use is 2^-266 (bf16
  // subnormal squared), the largest term is below 2^256 (bf16 max squared), sums of 33 terms add 6 bits.
  static constexpr int kWords = 10;
  static constexpr int kOffset = 320;

  void add(const FpParts& p) {
    if (p.nan) {
      nan_ = true;
      return;
    }
    if (p.inf) {
      (p.neg ? ninf_ : pinf_) = true;
      return;
    }
    if (p.mant == 0) return;
    add_integer(p.neg, p.mant, p.exp);
  }

  void add_float(float x) { add(decode_f32(x)); }

  // The exact sum rounded once to float32 (round to nearest even). An exact zero sum gives +0.0f.
  float round_to_float() const {
    if (nan_ || (pinf_ && ninf_)) return std::numeric_limits<float>::quiet_NaN();
    if (pinf_) return std::numeric_limits<float>::infinity();
    if (ninf_) return -std::numeric_limits<float>::infinity();
    std::uint64_t v[kWords];
    std::memcpy(v, w_, sizeof v);
    const bool negative = (v[kWords - 1] >> 63) != 0;
    if (negative) negate(v);
    int msb = -1;
    for (int i = kWords * 64 - 1; i >= 0; --i) {
      if (bit(v, i)) {
        msb = i;
        break;
      }
    }
    if (msb < 0) return 0.0f;
    // Keep 24 significant bits, but nothing below 2^-149 (float subnormal grid).
    int lsb = msb - 23;
    if (lsb < kOffset - 149) lsb = kOffset - 149;
    std::uint64_t mant = 0;
    for (int i = msb; i >= lsb; --i) mant = (mant << 1) | (bit(v, i) ? 1u : 0u);
    const bool round = lsb >= 1 && bit(v, lsb - 1);
    bool sticky = false;
    for (int i = lsb - 2; i >= 0 && !sticky; --i) sticky = bit(v, i);
    if (round && (sticky || (mant & 1u))) ++mant;
    // mant <= 2^24 and the value lies on the float grid: exact in double; the cast is exact or overflows to
    // inf.
    const double mag = std::ldexp(static_cast<double>(mant), lsb - kOffset);
    const float r = static_cast<float>(mag);
    return negative ? -r : r;
  }

 private:
  static bool bit(const std::uint64_t* v, int i) { return ((v[i >> 6] >> (i & 63)) & 1u) != 0; }

  static void negate(std::uint64_t* v) {
    std::uint64_t carry = 1;
    for (int i = 0; i < kWords; ++i) {
      const std::uint64_t x = ~v[i] + carry;
      carry = (carry && x == 0) ? 1 : 0;
      v[i] = x;
    }
  }

  void add_integer(bool neg, std::uint64_t mant, int exp) {
    const int pos = exp + kOffset;
    // Callers stay inside the documented range; anything else is a bug in the emulation itself.
    // Terms reach at most 2^256 (bit 576): far below the sign bit (639), so sums of 33 terms never overflow.
    if (pos < 0 || (pos >> 6) + 1 >= kWords) std::abort();
    std::uint64_t t[kWords] = {};
    const int word = pos >> 6;
    const int shift = pos & 63;
    t[word] = mant << shift;
    if (shift != 0) t[word + 1] = mant >> (64 - shift);
    if (neg) negate(t);
    std::uint64_t carry = 0;
    for (int i = 0; i < kWords; ++i) {
      const std::uint64_t s1 = w_[i] + t[i];
      const std::uint64_t c1 = s1 < w_[i] ? 1 : 0;
      const std::uint64_t s2 = s1 + carry;
      const std::uint64_t c2 = s2 < s1 ? 1 : 0;
      w_[i] = s2;
      carry = c1 | c2;
    }
  }

  std::uint64_t w_[kWords] = {};
  bool nan_ = false;
  bool pinf_ = false;
  bool ninf_ = false;
};

}  // namespace llmk::arch::detail
