// tests/gemm/special_values.hpp: the GEMMs' special-value policy (docs/gemm.md, "Special values (NaN, Inf,
// overflow)") as a check. A test plants NaN / Inf / huge inputs, writes down which outputs they reach (the
// planted Pattern), and check_special classifies EVERY output element as finite, NaN, +Inf or -Inf: it must
// be the class of the fp64 reference (IEEE arithmetic: NaN propagates, Inf * 0 and Inf - Inf are NaN, a value
// past the output type's range rounds to +-Inf), the reference must agree with the planted pattern (so a
// test states what its plants do), and every finite output must still match the reference within the
// test's tolerance. An element the kernel never wrote keeps DeviceBuffer's poison (0xFF bytes: NaN in the
// float types), so a NaN with exactly those bits counts as unwritten: the kernels' own NaNs never have them
// (the simulator's are positive quiet NaNs; a GPU's arithmetic gives its canonical 0x7FFF / 0x7FFFFFFF).
// Also: f16_special_problem, the planted 16-bit GEMM problem of tile_gemm.cu and gemm_sm90.cu.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "llmk/core/numeric.cuh"

namespace llmk::test::special {

/// An output's class. kInf only in a planted pattern: +-Inf with the sign the data gives (the reference's).
enum class Kind : char { kFinite = '.', kNaN = 'N', kPosInf = '+', kNegInf = '-', kInf = 'I' };

inline std::string name(Kind k) {
  switch (k) {
    case Kind::kFinite:
      return "finite";
    case Kind::kNaN:
      return "NaN";
    case Kind::kPosInf:
      return "+Inf";
    case Kind::kNegInf:
      return "-Inf";
    default:
      return "+-Inf";
  }
}

inline Kind kind_of(double v) {
  if (std::isnan(v)) return Kind::kNaN;
  if (std::isinf(v)) return v > 0 ? Kind::kPosInf : Kind::kNegInf;
  return Kind::kFinite;
}

/// The least |v| that rounds to nearest (ties to even) to +-Inf in Out: the largest finite value plus half
/// its ulp (fp16: 65504 + 16).
template <class Out>
constexpr double overflow_at() {
  if constexpr (std::is_same_v<Out, half>)
    return 65520.0;
  else if constexpr (std::is_same_v<Out, bfloat16>)
    return 0x1.ffp127;  // (2 - 2^-7) 2^127 + 2^119
  else
    return 0x1.ffffffp127;  // (2 - 2^-23) 2^127 + 2^103
}

/// The class of an exact result v once rounded to Out.
template <class Out>
Kind rounded_kind(double v) {
  const Kind k = kind_of(v);
  if (k == Kind::kFinite && std::fabs(v) >= overflow_at<Out>()) return v > 0 ? Kind::kPosInf : Kind::kNegInf;
  return k;
}

/// An [m, n] map of output classes: all finite, then what the plants reach, row by row, column by column or
/// element by element (later settings win).
struct Pattern {
  int m = 0, n = 0;
  std::vector<Kind> kinds;
  Pattern() = default;
  Pattern(int rows, int cols)
      : m(rows), n(cols), kinds(static_cast<std::size_t>(rows) * cols, Kind::kFinite) {}
  Kind& at(int i, int j) { return kinds[static_cast<std::size_t>(i) * n + j]; }
  Kind at(int i, int j) const { return kinds[static_cast<std::size_t>(i) * n + j]; }
  void row(int i, Kind k) {
    for (int j = 0; j < n; ++j) at(i, j) = k;
  }
  void col(int j, Kind k) {
    for (int i = 0; i < m; ++i) at(i, j) = k;
  }
  int count(Kind k) const {
    int c = 0;
    for (Kind x : kinds) c += x == k ? 1 : 0;
    return c;
  }
};

/// The classes of the fp64 reference `ref` ([m, n], row pitch n) rounded to Out.
template <class Out>
Pattern pattern_of(const std::vector<double>& ref, int m, int n) {
  Pattern p(m, n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) p.at(i, j) = rounded_kind<Out>(ref[static_cast<std::size_t>(i) * n + j]);
  return p;
}

/// Whether a planted class (kInf: either sign) admits the exact one.
inline bool admits(Kind planted, Kind exact) {
  if (planted == Kind::kInf) return exact == Kind::kPosInf || exact == Kind::kNegInf;
  return planted == exact;
}

/// Bytes of DeviceBuffer's poison (0xFF): an element the kernel did not write.
template <class Out>
bool is_poison(const Out& v) {
  unsigned char bytes[sizeof(Out)];
  std::memcpy(bytes, &v, sizeof(Out));
  for (unsigned char b : bytes)
    if (b != 0xFF) return false;
  return true;
}

/// Checks `got` ([m, ldd] of Out) against the fp64 reference `ref` ([m, n]) and the planted pattern: every
/// element's class is the reference's (sign included), which the planted pattern admits; finite elements
/// are within tol(i, j) of the reference; no element holds the poison; the padding columns n .. ldd - 1 still
/// do. Returns the reference's pattern (for counts).
template <class Out, class Tol>
Pattern check_special(const std::vector<Out>& got, std::int64_t ldd, const Pattern& planted,
                      const std::vector<double>& ref, Tol&& tol) {
  const int m = planted.m, n = planted.n;
  const Pattern want = pattern_of<Out>(ref, m, n);
  int disagree = 0;  // the test's own plants against the reference
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      if (!admits(planted.at(i, j), want.at(i, j)) && disagree++ < 5)
        MESSAGE("planted [" << i << "][" << j << "] " << name(planted.at(i, j)) << ", the reference gives "
                            << name(want.at(i, j)) << " (" << ref[static_cast<std::size_t>(i) * n + j]
                            << ")");
  CHECK_MESSAGE(disagree == 0, "the plants do not reach the outputs the test says (a test bug)");
  int bad = 0, padding = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      const Out& g = got[static_cast<std::size_t>(i) * ldd + j];
      const double v = static_cast<double>(static_cast<float>(g)),
                   r = ref[static_cast<std::size_t>(i) * n + j];
      const Kind k = want.at(i, j);
      bool ok = kind_of(v) == k && !is_poison(g);
      if (ok && k == Kind::kFinite) ok = std::fabs(v - r) <= tol(i, j);
      if (ok || bad++ >= 8) continue;
      if (is_poison(g))
        MESSAGE("D[" << i << "][" << j << "] holds the poison (never written), want " << name(k));
      else if (k == Kind::kFinite)
        MESSAGE("D[" << i << "][" << j << "] = " << v << ", want " << r << " within " << tol(i, j));
      else
        MESSAGE("D[" << i << "][" << j << "] = " << v << ", want " << name(k));
    }
    for (std::int64_t j = n; j < ldd; ++j)
      padding += is_poison(got[static_cast<std::size_t>(i) * ldd + j]) ? 0 : 1;
  }
  CHECK(bad == 0);
  CHECK_MESSAGE(padding == 0, "elements written in the padding columns n .. ldd - 1");
  return want;
}

/// A 16-bit GEMM problem D = A B^T + beta C (alpha = 1) with planted special values; M >= 18, N >= 21,
/// K >= 64, K % 8 == 0; A [M, lda = K + 8], B [N, ldb = K + 8] with NaN in the padding past K (a load past K,
/// or a K tail not zero-filled, shows as NaN in the wrong outputs), C [M, N]:
///   row 3     A[3, 5] = NaN: a NaN row.
///   column 7  B[7, K - 4] = +Inf: +-Inf by the sign of A[i, K - 4]; A[11, K - 4] = 0: D[11, 7] = Inf * 0 =
///             NaN.
///   row 14    A[14, 30] = +Inf: +-Inf by the sign of B[j, 30]; B[7, 30] = -0.5, A[14, K - 4] = 0.5:
///             D[14, 7] = -Inf + Inf = NaN (the two in different splits where the last split starts past 30).
///   row 17 and column 20 all 64: D[17, 20] = 4096 K, past 65504 (+Inf in fp16 out, finite in fp32 and bf16);
///             the rest of both stays below 64 K.
///   C         beta != 0: C[5, 2] = NaN (a NaN output), C[6, 3] = -Inf (-sign(beta) Inf); beta = 0: C is NaN
///             everywhere and must not be read.
template <class T, class Out>
struct F16Special {
  int m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0;
  float beta = 0.0f;
  std::vector<T> a, b;
  std::vector<Out> c;
  std::vector<double> ref, mag;  // [M, N]: D in fp64, and sum_k |a b| + |beta c|
  Pattern planted;
  // The 16-bit GEMMs' bound (tests/gemm/tile_gemm.cu): one fp32 rounding per k16 step, doubled, the
  // epilogue's, and the rounding to Out (half an ulp, relative).
  double tol(int i, int j) const {
    const std::size_t r = static_cast<std::size_t>(i) * n + j;
    const double out_ulp = std::is_same_v<Out, float>      ? 0.0
                           : std::is_same_v<Out, bfloat16> ? 0x1p-8
                                                           : 0x1p-11;
    return 2.0 * (k / 16 + 2) * std::ldexp(mag[r], -24) + 1e-6 + std::fabs(ref[r]) * out_ulp;
  }
};

template <class T, class Out>
F16Special<T, Out> f16_special_problem(int m, int n, int k, float beta, unsigned seed) {
  REQUIRE((m >= 18 && n >= 21 && k >= 64 && k % 8 == 0));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto draw = [&] {
    const float f = dist(rng);
    return f == 0.0f ? 0.5f : f;  // never zeros but where planted
  };
  F16Special<T, Out> p;
  p.m = m, p.n = n, p.k = k, p.lda = k + 8, p.ldb = k + 8, p.beta = beta;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  p.a.resize(static_cast<std::size_t>(m) * p.lda);
  p.b.resize(static_cast<std::size_t>(n) * p.ldb);
  p.c.resize(static_cast<std::size_t>(m) * n);
  for (std::size_t e = 0; e < p.a.size(); ++e) p.a[e] = T(static_cast<int>(e % p.lda) < k ? draw() : nan);
  for (std::size_t e = 0; e < p.b.size(); ++e) p.b[e] = T(static_cast<int>(e % p.ldb) < k ? draw() : nan);
  for (auto& x : p.c) x = Out(beta != 0.0f ? draw() : nan);
  auto a = [&](int i, int kk) -> T& { return p.a[static_cast<std::size_t>(i) * p.lda + kk]; };
  auto b = [&](int j, int kk) -> T& { return p.b[static_cast<std::size_t>(j) * p.ldb + kk]; };
  const int k_late = k - 4;
  for (int kk = 0; kk < k; ++kk) a(17, kk) = T(64.0f), b(20, kk) = T(64.0f);
  a(3, 5) = T(nan);
  b(7, k_late) = T(inf);
  a(11, k_late) = T(0.0f);
  a(14, 30) = T(inf);
  b(7, 30) = T(-0.5f);
  a(14, k_late) = T(0.5f);
  if (beta != 0.0f) {
    p.c[static_cast<std::size_t>(5) * n + 2] = Out(nan);
    p.c[static_cast<std::size_t>(6) * n + 3] = Out(-inf);
  }
  // The planted pattern, from the rules above alone.
  p.planted = Pattern(m, n);
  if (std::is_same_v<Out, half>) p.planted.at(17, 20) = Kind::kInf;
  p.planted.col(7, Kind::kInf);
  p.planted.row(14, Kind::kInf);
  p.planted.at(14, 7) = Kind::kNaN;
  p.planted.at(11, 7) = Kind::kNaN;
  p.planted.row(3, Kind::kNaN);
  if (beta != 0.0f) {
    p.planted.at(5, 2) = Kind::kNaN;
    p.planted.at(6, 3) = Kind::kInf;
  }
  // The fp64 reference, IEEE arithmetic throughout; C read only where beta != 0 (as the GEMMs promise).
  p.ref.assign(static_cast<std::size_t>(m) * n, 0.0);
  p.mag.assign(p.ref.size(), 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0.0, mag = 0.0;
      for (int kk = 0; kk < k; ++kk) {
        const double prod = static_cast<double>(static_cast<float>(a(i, kk))) * static_cast<float>(b(j, kk));
        sum += prod;
        mag += std::fabs(prod);
      }
      if (beta != 0.0f) {
        const double bc =
            static_cast<double>(beta) * static_cast<float>(p.c[static_cast<std::size_t>(i) * n + j]);
        sum += bc;
        mag += std::fabs(bc);
      }
      p.ref[static_cast<std::size_t>(i) * n + j] = sum;
      p.mag[static_cast<std::size_t>(i) * n + j] = mag;
    }
  return p;
}

/// check_special for an F16Special's output D ([M, ldd]); checks that NaN, +Inf, -Inf and finite outputs all
/// occur (and, with fp16 out, the overflow at D[17, 20]).
template <class T, class Out>
void check_f16_special(const F16Special<T, Out>& p, const std::vector<Out>& got, std::int64_t ldd) {
  const Pattern want = check_special(got, ldd, p.planted, p.ref, [&](int i, int j) { return p.tol(i, j); });
  CHECK(want.count(Kind::kNaN) >= p.n + 2);
  CHECK(want.count(Kind::kPosInf) > 0);
  CHECK(want.count(Kind::kNegInf) > 0);
  CHECK(want.count(Kind::kFinite) > p.m * p.n / 2);
  if (std::is_same_v<Out, half>) CHECK(want.at(17, 20) == Kind::kPosInf);
}

}  // namespace llmk::test::special
