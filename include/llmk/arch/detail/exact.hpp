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

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

// ExactSum's arithmetic touches only the accumulator of one emulated instruction, private to the call: TSan
// has nothing to find there, and its per-access hooks on the limbs made the emulation most of a TSan test's
// time.
#if defined(__SANITIZE_THREAD__)
#define LLMK_EXACT_UNTRACKED __attribute__((no_sanitize_thread))
#else
#define LLMK_EXACT_UNTRACKED
#endif

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

  // Adds a[0] b[0] + ... + a[n-1] b[n-1] exactly: the product loop of the tensor-core emulation, over
  // operands decoded once per instruction. The same sum as add(multiply(a[k], b[k])) for every k.
  LLMK_EXACT_UNTRACKED void add_dot(const FpParts* a, const FpParts* b, int n) {
    for (int k = 0; k < n; ++k) {
      if (a[k].nan || b[k].nan || a[k].inf || b[k].inf) {
        add(multiply(a[k], b[k]));
        continue;
      }
      const std::uint64_t m = a[k].mant * b[k].mant;
      if (m != 0) add_integer(a[k].neg != b[k].neg, m, a[k].exp + b[k].exp);
    }
  }

  // The exact sum rounded once to float32 (round to nearest even). An exact zero sum gives +0.0f.
  LLMK_EXACT_UNTRACKED float round_to_float() const {
    if (nan_ || (pinf_ && ninf_)) return std::numeric_limits<float>::quiet_NaN();
    if (pinf_) return std::numeric_limits<float>::infinity();
    if (ninf_) return -std::numeric_limits<float>::infinity();
    std::uint64_t v[kWords];
    normalize(v);
    const bool negative = (v[kWords - 1] >> 63) != 0;
    if (negative) negate(v);
    int top = kWords - 1;
    while (top >= 0 && v[top] == 0) --top;
    if (top < 0) return 0.0f;
    const int msb = top * 64 + 63 - std::countl_zero(v[top]);
    // Keep 24 significant bits, but nothing below 2^-149 (float subnormal grid).
    int lsb = msb - 23;
    if (lsb < kOffset - 149) lsb = kOffset - 149;
    std::uint64_t mant = msb >= lsb ? field(v, lsb, msb - lsb + 1) : 0;
    const bool round = lsb >= 1 && field(v, lsb - 1, 1) != 0;
    const bool sticky = any_below(v, lsb - 1);
    if (round && (sticky || (mant & 1u))) ++mant;
    // mant <= 2^24 and the value lies on the float grid: exact in double; the cast is exact or overflows to
    // inf.
    const double mag = std::ldexp(static_cast<double>(mant), lsb - kOffset);
    const float r = static_cast<float>(mag);
    return negative ? -r : r;
  }

 private:
  // Bits [lo, lo + n) of v as an integer (1 <= n <= 64, lo + n <= 64 kWords).
  static std::uint64_t field(const std::uint64_t* v, int lo, int n) {
    const int w = lo >> 6, s = lo & 63;
    std::uint64_t x = v[w] >> s;
    if (s != 0 && s + n > 64) x |= v[w + 1] << (64 - s);
    return n == 64 ? x : x & ((std::uint64_t{1} << n) - 1u);
  }

  // Whether any of bits [0, n) of v is set (false for n <= 0).
  static bool any_below(const std::uint64_t* v, int n) {
    if (n <= 0) return false;
    const int w = n >> 6, r = n & 63;
    for (int i = 0; i < w; ++i)
      if (v[i] != 0) return true;
    return r != 0 && (v[w] & ((std::uint64_t{1} << r) - 1u)) != 0;
  }

  static void negate(std::uint64_t* v) {
    std::uint64_t carry = 1;
    for (int i = 0; i < kWords; ++i) {
      const std::uint64_t x = ~v[i] + carry;
      carry = (carry && x == 0) ? 1 : 0;
      v[i] = x;
    }
  }

  // Adds (or subtracts) mant * 2^exp. The emulation calls this for every product, so it is carry-save: the
  // number is kLimbs signed 32-bit digits held in int64 (value = sum limb[i] 2^(32 i - kOffset)); a term (64
  // bits at most) touches three limbs and no carry moves until normalize(). Each add changes a limb by less
  // than 2^32, so 2^31 terms cannot overflow one.
  LLMK_EXACT_UNTRACKED void add_integer(bool neg, std::uint64_t mant, int exp) {
    const int pos = exp + kOffset;
    // Callers stay inside the documented range; anything else is a bug in the emulation itself.
    // Terms reach at most 2^256 (bit 576): far below the sign bit (639), so sums of 33 terms never overflow.
    if (pos < 0 || (pos >> 6) + 1 >= kWords) std::abort();
    const int limb = pos >> 5;
    const unsigned __int128 t = static_cast<unsigned __int128>(mant) << (pos & 31);
    const auto d0 = static_cast<std::int64_t>(static_cast<std::uint32_t>(t));
    const auto d1 = static_cast<std::int64_t>(static_cast<std::uint32_t>(t >> 32));
    const auto d2 = static_cast<std::int64_t>(static_cast<std::uint32_t>(t >> 64));
    if (neg) {
      limbs_[limb] -= d0;
      limbs_[limb + 1] -= d1;
      limbs_[limb + 2] -= d2;
    } else {
      limbs_[limb] += d0;
      limbs_[limb + 1] += d1;
      limbs_[limb + 2] += d2;
    }
  }

  // The sum as a 64 kWords-bit two's complement integer: the carries move up the limbs once.
  LLMK_EXACT_UNTRACKED void normalize(std::uint64_t* v) const {
    std::int64_t carry = 0;
    for (int i = 0; i < kWords; ++i) {
      const std::int64_t lo = limbs_[2 * i] + carry;
      const std::int64_t hi = limbs_[2 * i + 1] + (lo >> 32);  // arithmetic shift: floor(lo / 2^32)
      carry = hi >> 32;
      v[i] =
          (static_cast<std::uint64_t>(static_cast<std::uint32_t>(hi)) << 32) | static_cast<std::uint32_t>(lo);
    }
  }

  static constexpr int kLimbs = 2 * kWords;
  std::int64_t limbs_[kLimbs] = {};
  bool nan_ = false;
  bool pinf_ = false;
  bool ninf_ = false;
};

}  // namespace llmk::arch::detail
