// tests/arch/exact_sum.cpp: llmk::arch::detail::ExactSum, the exact accumulator behind the simulator's
// tensor-core emulation (mma.sync and wgmma float accumulation), against a bit-at-a-time reference and
// against hand-computed roundings. Host C++ only: no kernels, no simulator.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "llmk/arch/detail/exact.hpp"
#include "support/test_env.hpp"

namespace {

using llmk::arch::detail::decode_fp;
using llmk::arch::detail::ExactSum;
using llmk::arch::detail::FpFormat;
using llmk::arch::detail::FpParts;
using llmk::arch::detail::multiply;

// The reference: the same fixed-point number (bit i weighs 2^(i - 320), 640 bits, two's complement), kept one
// bit per element. Each term is added bit by bit with a carry; the result is read off bit by bit: the
// highest set bit, 24 bits down from it (not below 2^-149), the round bit, the sticky OR of everything below,
// round to nearest even.
class BitSum {
 public:
  static constexpr int kBits = 640;
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
    std::vector<int> t(kBits, 0);
    for (int i = 0; i < 64; ++i)
      if ((p.mant >> i) & 1u) t[static_cast<std::size_t>(p.exp + kOffset + i)] = 1;
    if (p.neg) t = negated(t);
    int carry = 0;
    for (int i = 0; i < kBits; ++i) {
      const int s = bits_[static_cast<std::size_t>(i)] + t[static_cast<std::size_t>(i)] + carry;
      bits_[static_cast<std::size_t>(i)] = s & 1;
      carry = s >> 1;
    }
  }

  float round_to_float() const {
    if (nan_ || (pinf_ && ninf_)) return std::numeric_limits<float>::quiet_NaN();
    if (pinf_) return std::numeric_limits<float>::infinity();
    if (ninf_) return -std::numeric_limits<float>::infinity();
    const bool negative = bits_[kBits - 1] != 0;
    const std::vector<int> v = negative ? negated(bits_) : bits_;
    int msb = -1;
    for (int i = kBits - 1; i >= 0 && msb < 0; --i)
      if (v[static_cast<std::size_t>(i)]) msb = i;
    if (msb < 0) return 0.0f;
    int lsb = msb - 23;
    if (lsb < kOffset - 149) lsb = kOffset - 149;
    double mant = 0;
    for (int i = msb; i >= lsb; --i) mant = 2 * mant + v[static_cast<std::size_t>(i)];
    const bool round = v[static_cast<std::size_t>(lsb - 1)] != 0;
    bool sticky = false;
    for (int i = lsb - 2; i >= 0; --i) sticky = sticky || v[static_cast<std::size_t>(i)] != 0;
    if (round && (sticky || std::fmod(mant, 2.0) == 1.0)) mant += 1;
    const float r = static_cast<float>(std::ldexp(mant, lsb - kOffset));
    return negative ? -r : r;
  }

 private:
  static std::vector<int> negated(std::vector<int> v) {
    for (int& b : v) b ^= 1;
    for (int i = 0; i < kBits; ++i) {
      v[static_cast<std::size_t>(i)] ^= 1;
      if (v[static_cast<std::size_t>(i)] == 1) break;  // the +1 stopped carrying here
    }
    return v;
  }

  std::vector<int> bits_ = std::vector<int>(kBits, 0);
  bool nan_ = false, pinf_ = false, ninf_ = false;
};

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// The same float, or both NaN.
bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b);
}

FpParts power_of_two(int e, bool neg = false) {
  FpParts p;
  p.mant = 1;
  p.exp = e;
  p.neg = neg;
  return p;
}

float exact_round(const std::vector<FpParts>& terms) {
  ExactSum s;
  for (const FpParts& p : terms) s.add(p);
  return s.round_to_float();
}

constexpr FpFormat kFormats[] = {llmk::arch::detail::kF16, llmk::arch::detail::kBF16,
                                 llmk::arch::detail::kE4M3, llmk::arch::detail::kE5M2};

}  // namespace

TEST_CASE(
    "ExactSum rounds the exact sum once: ties to even, sticky bits, subnormals, overflow, cancellation") {
  // 1 + 2^-24 is the tie between 1 and 1 + 2^-23: even is 1. Any bit below it breaks the tie upward.
  CHECK(bits_of(exact_round({power_of_two(0), power_of_two(-24)})) == 0x3F800000u);
  CHECK(bits_of(exact_round({power_of_two(0), power_of_two(-24), power_of_two(-266)})) == 0x3F800001u);
  // (1 + 2^-23) + 2^-24: the tie rounds to the even neighbour 1 + 2^-22.
  CHECK(bits_of(exact_round({power_of_two(0), power_of_two(-23), power_of_two(-24)})) == 0x3F800002u);
  // The same with the sign flipped, and a sum that cancels to exactly zero (+0.0f).
  CHECK(bits_of(exact_round({power_of_two(0, true), power_of_two(-24, true), power_of_two(-266, true)})) ==
        0xBF800001u);
  CHECK(bits_of(exact_round({power_of_two(200), power_of_two(-200), power_of_two(200, true),
                             power_of_two(-200, true)})) == 0x00000000u);
  // 2^250 - 2^250 + 1 == 1 exactly; 2^250 alone overflows to infinity; 2^127 (2 - 2^-23) is FLT_MAX.
  CHECK(exact_round({power_of_two(250), power_of_two(250, true), power_of_two(0)}) == 1.0f);
  CHECK(exact_round({power_of_two(250)}) == std::numeric_limits<float>::infinity());
  CHECK(exact_round({power_of_two(250, true)}) == -std::numeric_limits<float>::infinity());
  FpParts fmax;
  fmax.mant = (1u << 24) - 1u;
  fmax.exp = 104;
  CHECK(exact_round({fmax}) == std::numeric_limits<float>::max());
  // FLT_MAX + half an ulp is the tie to 2^128: even rounds up, to infinity.
  CHECK(exact_round({fmax, power_of_two(103)}) == std::numeric_limits<float>::infinity());
  // Subnormals: 2^-149 is the smallest; half of it is a tie to 0 (even); 1.5 of it rounds to 2^-148.
  CHECK(bits_of(exact_round({power_of_two(-149)})) == 0x00000001u);
  CHECK(bits_of(exact_round({power_of_two(-150)})) == 0x00000000u);
  CHECK(bits_of(exact_round({power_of_two(-149), power_of_two(-150)})) == 0x00000002u);
  CHECK(bits_of(exact_round({power_of_two(-150), power_of_two(-266)})) == 0x00000001u);
  CHECK(bits_of(exact_round({power_of_two(-150, true), power_of_two(-266, true)})) == 0x80000001u);
  // A borrow that runs through whole words: 2^100 - 2^-266 rounds to 2^100, and minus 2^100 again is -2^-266,
  // which rounds to -0 (below half of 2^-149).
  CHECK(exact_round({power_of_two(100), power_of_two(-266, true)}) == std::ldexp(1.0f, 100));
  CHECK(bits_of(exact_round({power_of_two(100), power_of_two(-266, true), power_of_two(100, true)})) ==
        0x80000000u);
  // NaN and infinities.
  FpParts nan, pinf, ninf;
  nan.nan = true;
  pinf.inf = true;
  ninf.inf = true;
  ninf.neg = true;
  CHECK(std::isnan(exact_round({power_of_two(0), nan})));
  CHECK(std::isnan(exact_round({pinf, ninf})));
  CHECK(exact_round({pinf, power_of_two(250, true)}) == std::numeric_limits<float>::infinity());
  CHECK(exact_round({ninf}) == -std::numeric_limits<float>::infinity());
  CHECK(bits_of(ExactSum{}.round_to_float()) == 0u);
}

TEST_CASE("ExactSum == the bit-at-a-time reference: random sums of products and floats, wide spreads") {
  std::mt19937 rng(20261128);
  const int sums = llmk::test::pick(20000, 2000);
  std::uniform_int_distribution<int> n_terms(1, 33);
  std::uniform_int_distribution<int> pick(0, 9);
  std::uniform_int_distribution<std::uint32_t> any32;
  int checked = 0;
  for (int s = 0; s < sums; ++s) {
    ExactSum fast;
    BitSum slow;
    const int n = n_terms(rng);
    const FpFormat fmt = kFormats[s % 4];
    const int nbits = 1 + fmt.exp_bits + fmt.man_bits;
    std::vector<FpParts> terms;
    for (int t = 0; t < n; ++t) {
      FpParts p;
      const int kind = pick(rng);
      if (kind < 6) {  // a product of two codes of the format (subnormals, NaN and infinities included)
        const std::uint32_t mask = (1u << nbits) - 1u;
        p = multiply(decode_fp(any32(rng) & mask, fmt), decode_fp(any32(rng) & mask, fmt));
      } else if (kind < 7) {  // a float32 value
        p = decode_fp(any32(rng), llmk::arch::detail::kF32);
      } else if (kind < 8) {  // a raw term: any mantissa up to 64 bits, any weight in range
        p.mant = (static_cast<std::uint64_t>(any32(rng)) << 32 | any32(rng)) >> (any32(rng) % 40);
        p.exp = static_cast<int>(any32(rng) % 400) - 266;
        p.neg = (any32(rng) & 1u) != 0;
      } else if (!terms.empty()) {  // cancel an earlier term exactly, or nearly (one ulp of its mantissa off)
        p = terms[any32(rng) % terms.size()];
        p.neg = !p.neg;
        if (kind == 9 && p.mant > 1) p.mant -= 1;
      }
      if (p.nan && pick(rng) != 0)
        continue;  // keep most sums finite so that the rounding is what is compared
      if (p.inf && pick(rng) < 8) continue;
      terms.push_back(p);
      fast.add(p);
      slow.add(p);
    }
    const float got = fast.round_to_float(), want = slow.round_to_float();
    if (!same(got, want)) {
      INFO("sum " << s << ": " << terms.size() << " terms, format " << s % 4);
      CHECK(bits_of(got) == bits_of(want));
    }
    ++checked;
  }
  CHECK(checked == sums);
}
