// Tests of every llmk/arch atom against scalar references written from the PTX ISA layout tables
// (../shared/ptx-fragments.md, PTX ISA "Matrix Fragments for mma.m16n8k16 / m16n8k32 / m16n8k64", "ldmatrix",
// "cp.async", "cvt"). Built as atoms_sim (simulator: exact comparisons) and atoms_cuda (GPU: exact for
// integer and bit-level results, a relative tolerance for float accumulation and approximate math).
//
// The references here deliberately do not reuse the library: the fragment maps are the ISA's per-element
// formulas (not mma.cuh's per-register ones), floats are decoded by a separate decoder, and rounding to
// f16 / bf16 / fp8 is a brute-force nearest-even search over every code of the format.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "llmk/arch/arch.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"
#include "support/test_env.hpp"

namespace {

using namespace llmk::arch;
using std::int32_t;
using std::int64_t;
using std::uint16_t;
using std::uint32_t;
using std::uint8_t;

// ------------------------------------------------------------------------------------------------------------
// Host helpers.

template <class Kernel, class... Args>
void run_warp(Kernel kernel, std::size_t smem_bytes, Args... args) {
  const llmk::Status s = llmk::launch(kernel, dim3(1), dim3(32), smem_bytes, nullptr, args...);
  REQUIRE_MESSAGE(s.ok(), s.message());
#if defined(LLMK_CUDA)
  const cudaError_t e = cudaDeviceSynchronize();
  REQUIRE_MESSAGE(e == cudaSuccess, cudaGetErrorString(e));
#endif
}

// Compute capability of the device the test runs on (the simulator emulates every atom).
int device_cc() {
#if defined(LLMK_CUDA)
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major * 10 + minor;
#else
  return 1000;
#endif
}

constexpr bool kSim =
#if defined(LLMK_SIM)
    true;
#else
    false;
#endif

float bits_f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Element formats.
enum class Ty { f16, bf16, e4m3, e5m2, s8, u8, s4, u4 };

int ty_bits(Ty t) {
  return (t == Ty::f16 || t == Ty::bf16) ? 16 : (t == Ty::s4 || t == Ty::u4) ? 4 : 8;
}

struct Fmt {
  int ebits, mbits, bias;
  bool fn;  // e4m3 "fn": no inf, NaN only at S.1111.111
};
Fmt fmt_of(Ty t) {
  switch (t) {
    case Ty::f16:
      return {5, 10, 15, false};
    case Ty::bf16:
      return {8, 7, 127, false};
    case Ty::e4m3:
      return {4, 3, 7, true};
    default:
      return {5, 2, 15, false};  // e5m2
  }
}

// Independent decoder: (1 + m / 2^M) * 2^(e - bias) for normals, m * 2^(1 - bias - M) for subnormals.
double decode(uint32_t code, Fmt f) {
  const uint32_t all_e = (1u << f.ebits) - 1, all_m = (1u << f.mbits) - 1;
  const bool neg = (code >> (f.ebits + f.mbits)) & 1u;
  const uint32_t e = (code >> f.mbits) & all_e, m = code & all_m;
  double mag;
  if (!f.fn && e == all_e)
    mag = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (f.fn && e == all_e && m == all_m)
    mag = std::numeric_limits<double>::quiet_NaN();
  else if (e == 0)
    mag = std::ldexp(double(m), 1 - f.bias - f.mbits);
  else
    mag = std::ldexp(1.0 + double(m) / double(1u << f.mbits), int(e) - f.bias);
  return neg ? -mag : mag;
}
double decode(uint32_t code, Ty t) {
  return decode(code, fmt_of(t));
}

int64_t decode_int(uint32_t code, Ty t) {
  switch (t) {
    case Ty::s8:
      return int64_t(int8_t(uint8_t(code)));
    case Ty::u8:
      return code & 0xFF;
    case Ty::s4:
      return (code & 0xF) >= 8 ? int64_t(code & 0xF) - 16 : int64_t(code & 0xF);
    default:
      return code & 0xF;  // u4
  }
}

bool is_nan_code(uint32_t code, Fmt f) {
  return std::isnan(decode(code, f));
}

// Brute-force round-to-nearest-even onto a format: the sorted list of every finite non-negative code.
struct Rounder {
  Fmt f;
  std::vector<double> values;  // values[c] = decode(c) for c in [0, max_code]
  uint32_t max_code = 0;
  explicit Rounder(Fmt fmt) : f(fmt) {
    for (uint32_t c = 0;; ++c) {
      const double v = decode(c, f);
      if (!std::isfinite(v)) break;
      values.push_back(v);
      max_code = c;
      if (c + 1 >= (1u << (f.ebits + f.mbits))) break;
    }
  }
  // satfinite: out-of-range finite values and inf clamp to +-max. Otherwise IEEE overflow to inf.
  uint32_t round(double x, bool satfinite) const {
    const uint32_t sign = std::signbit(x) ? (1u << (f.ebits + f.mbits)) : 0u;
    if (std::isnan(x)) return 0xFFFFFFFFu;  // "some NaN": compared by NaN-ness
    const double a = std::fabs(x);
    const double maxv = values[max_code];
    if (std::isinf(a)) return satfinite ? (sign | max_code) : (sign | (max_code + 1));
    // Binary search for the first code with value >= a.
    const auto it = std::lower_bound(values.begin(), values.end(), a);
    if (it == values.end()) {
      // Beyond max: IEEE rounds to inf once a >= max + half an ulp of max (the tie goes to the even
      // "2^(emax+1)").
      const double ulp = maxv - values[max_code - 1];
      if (satfinite || a < maxv + ulp / 2) return sign | max_code;
      return sign | (max_code + 1);  // infinity code (exponent all ones, mantissa 0) for IEEE formats
    }
    const uint32_t hi = uint32_t(it - values.begin());
    if (values[hi] == a || hi == 0) return sign | hi;
    const uint32_t lo = hi - 1;
    const double dlo = a - values[lo], dhi = values[hi] - a;
    if (dlo < dhi) return sign | lo;
    if (dhi < dlo) return sign | hi;
    return sign | ((lo & 1u) == 0 ? lo : hi);
  }
};
const Rounder& rounder(Ty t) {
  static const Rounder f16(fmt_of(Ty::f16)), bf16(fmt_of(Ty::bf16)), e4m3(fmt_of(Ty::e4m3)),
      e5m2(fmt_of(Ty::e5m2));
  switch (t) {
    case Ty::f16:
      return f16;
    case Ty::bf16:
      return bf16;
    case Ty::e4m3:
      return e4m3;
    default:
      return e5m2;
  }
}

// Checks a produced code against a reference code from Rounder (0xFFFFFFFF = NaN expected).
bool same_code(uint32_t got, uint32_t ref, Ty t) {
  if (ref == 0xFFFFFFFFu) return is_nan_code(got, fmt_of(t));
  return got == ref;
}

// ------------------------------------------------------------------------------------------------------------
// mma: the PTX ISA's per-element fragment formulas. Element i of a lane's fragment lives in register
// i / (32 / bits), at bit offset (i % (32 / bits)) * bits (low bits first).

int a_row(int K, int lane, int i) {
  const int g = lane >> 2;
  switch (K) {
    case 16:
      return (i < 2 || (4 <= i && i < 6)) ? g : g + 8;  // m16n8k16 .f16/.bf16
    case 32:
      return (i < 4 || (8 <= i && i < 12)) ? g : g + 8;  // m16n8k32 .s8/.u8/.e4m3/.e5m2
    default:
      return (i < 8 || (16 <= i && i < 24)) ? g : g + 8;  // m16n8k64 .s4/.u4
  }
}
int a_col(int K, int lane, int i) {
  const int t = lane % 4;
  switch (K) {
    case 16:
      return t * 2 + (i & 0x1) + (i >= 4 ? 8 : 0);
    case 32:
      return t * 4 + (i & 0x3) + (i >= 8 ? 16 : 0);
    default:
      return t * 8 + (i & 0x7) + (i >= 16 ? 32 : 0);
  }
}
int b_row(int K, int lane, int i) {  // the k index
  const int t = lane % 4;
  switch (K) {
    case 16:
      return t * 2 + (i & 0x1) + (i >= 2 ? 8 : 0);
    case 32:
      return t * 4 + (i & 0x3) + (i >= 4 ? 16 : 0);
    default:
      return t * 8 + (i & 0x7) + (i >= 8 ? 32 : 0);
  }
}
int b_col(int lane) {
  return lane >> 2;
}
int c_row(int lane, int i) {
  return (lane >> 2) + (i >= 2 ? 8 : 0);
}
int c_col(int lane, int i) {
  return (lane % 4) * 2 + (i & 0x1);
}

uint32_t get_elem(const uint32_t* regs, int i, int bits) {
  const int per = 32 / bits;
  return (regs[i / per] >> ((i % per) * bits)) & (bits == 32 ? 0xFFFFFFFFu : ((1u << bits) - 1u));
}
void set_elem(uint32_t* regs, int i, int bits, uint32_t code) {
  const int per = 32 / bits;
  const uint32_t mask = (1u << bits) - 1u;
  const int sh = (i % per) * bits;
  regs[i / per] = (regs[i / per] & ~(mask << sh)) | ((code & mask) << sh);
}

template <class Op, class Acc>
__global__ void mma_kernel(const uint32_t* a, const uint32_t* b, const Acc* c, Acc* d) {
  const unsigned l = threadIdx.x;
  uint32_t ra[4], rb[2];
  Acc rc[4], rd[4];
  for (int i = 0; i < 4; ++i) ra[i] = a[l * 4 + i];
  for (int i = 0; i < 2; ++i) rb[i] = b[l * 2 + i];
  for (int i = 0; i < 4; ++i) rc[i] = c[l * 4 + i];
  if constexpr (LLMK_ARCH == 0 || LLMK_ARCH >= Op::kMinArch) {
    Op::fma(rd, ra, rb, rc);
  } else {
    __trap();  // the host skips atoms the device cannot run; never reached
  }
  for (int i = 0; i < 4; ++i) d[l * 4 + i] = rd[i];
}

// One test case: the atom, its A and B element types, and whether it saturates.
template <class Op, Ty A, Ty B, bool Sat = false>
struct MmaCase {
  using op = Op;
  static constexpr Ty ta = A, tb = B;
  static constexpr bool sat = Sat;
};

// Fragments of one warp, as the per-lane register files.
template <class Acc>
struct Frags {
  std::vector<uint32_t> a = std::vector<uint32_t>(32 * 4, 0);
  std::vector<uint32_t> b = std::vector<uint32_t>(32 * 2, 0);
  std::vector<Acc> c = std::vector<Acc>(32 * 4);
};

// Random element codes. Floats avoid zero codes and stay in a bounded exponent range so that the double
// reference (c + sum of 32 products) is exact: see each comment.
uint32_t random_code(Ty t, std::mt19937_64& rng) {
  auto u = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  switch (t) {
    case Ty::f16:
      return (u(0, 1) << 15) | (u(9, 18) << 10) | u(0, 1023);  // |x| in [2^-6, 2^4)
    case Ty::bf16:
      return (u(0, 1) << 15) | (u(121, 130) << 7) | u(0, 127);  // |x| in [2^-6, 2^4)
    case Ty::e4m3: {                                            // every finite non-zero code
      for (;;) {
        const uint32_t c = u(0, 255);
        if ((c & 0x7F) != 0x7F && (c & 0x7F) != 0) return c;
      }
    }
    case Ty::e5m2:
      return (u(0, 1) << 7) | (u(7, 22) << 2) | u(0, 3);  // |x| in [2^-8, 2^8)
    case Ty::s8:
    case Ty::u8:
      return u(0, 255);
    default:
      return u(0, 15);
  }
}
// c: |c| in [2^-4, 2^6) with a full random mantissa.
float random_c_float(std::mt19937_64& rng) {
  const uint32_t sign = std::uniform_int_distribution<uint32_t>(0, 1)(rng);
  const uint32_t e = std::uniform_int_distribution<uint32_t>(127 - 4, 127 + 5)(rng);
  const uint32_t m = std::uniform_int_distribution<uint32_t>(0, (1u << 23) - 1)(rng);
  return bits_f32((sign << 31) | (e << 23) | m);
}

struct Mats {
  int K;
  std::vector<uint32_t> A;  // 16 x K codes
  std::vector<uint32_t> B;  // K x 8 codes
};

template <class Acc>
Mats gather(const Frags<Acc>& f, int K, int bits_a, int bits_b) {
  Mats m{K, std::vector<uint32_t>(16 * K, 0xDEADBEEF), std::vector<uint32_t>(K * 8, 0xDEADBEEF)};
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4 * (32 / bits_a); ++i)
      m.A[a_row(K, lane, i) * K + a_col(K, lane, i)] = get_elem(&f.a[lane * 4], i, bits_a);
    for (int i = 0; i < 2 * (32 / bits_b); ++i)
      m.B[b_row(K, lane, i) * 8 + b_col(lane)] = get_elem(&f.b[lane * 2], i, bits_b);
  }
  for (uint32_t v : m.A) REQUIRE(v != 0xDEADBEEF);  // the layout covers every element exactly
  for (uint32_t v : m.B) REQUIRE(v != 0xDEADBEEF);
  return m;
}

template <class Case>
void check_mma(const Frags<typename std::remove_extent_t<typename Case::op::CRegisters>>& f,
               const char* what) {
  using Op = typename Case::op;
  using Acc = std::remove_extent_t<typename Op::CRegisters>;
  constexpr int K = Op::kK;
  constexpr bool kSat = Case::sat;
  const int bits = ty_bits(Case::ta);
  REQUIRE(K == 8 * (32 / bits));

  llmk::DeviceBuffer<uint32_t> da(f.a), db(f.b);
  llmk::DeviceBuffer<Acc> dc(f.c), dd(32 * 4);
  dd.poison();
  run_warp(mma_kernel<Op, Acc>, 0, da.data(), db.data(), dc.data(), dd.data());
  const std::vector<Acc> d = dd.to_host();

  const Mats m = gather(f, K, bits, ty_bits(Case::tb));
  // C from its fragments.
  Acc C[16][8];
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) C[c_row(lane, i)][c_col(lane, i)] = f.c[lane * 4 + i];

  int failures = 0;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const int row = c_row(lane, i), col = c_col(lane, i);
      const Acc got = d[lane * 4 + i];
      if constexpr (std::is_same_v<Acc, float>) {
        double sum = C[row][col], mag = std::fabs(double(C[row][col]));
        for (int k = 0; k < K; ++k) {
          const double p = decode(m.A[row * K + k], Case::ta) * decode(m.B[k * 8 + col], Case::tb);
          sum += p;
          if (std::isfinite(p)) mag += std::fabs(p);
        }
        const float ref = float(sum);
        bool ok;
        if (std::isnan(ref))
          ok = std::isnan(got);
        else if (std::isinf(ref) || kSim)
          ok = got == ref;
        else {
          // GPU: accumulation order/precision is unspecified; fp8 mma keeps fewer accumulator bits.
          const double tol = (Case::ta == Ty::e4m3 || Case::ta == Ty::e5m2) ? 0x1p-11 : 0x1p-19;
          ok = std::fabs(double(got) - double(ref)) <= tol * mag + 1e-30;
        }
        if (!ok && failures++ < 8)
          FAIL_CHECK(what << ": lane " << lane << " d[" << i << "] = D[" << row << "][" << col << "]: got "
                          << got << ", reference " << ref);
      } else {
        int64_t s = C[row][col];
        for (int k = 0; k < K; ++k)
          s += decode_int(m.A[row * K + k], Case::ta) * decode_int(m.B[k * 8 + col], Case::tb);
        int32_t ref;
        if (kSat)
          ref = int32_t(std::clamp<int64_t>(s, INT32_MIN, INT32_MAX));
        else
          ref = int32_t(uint32_t(uint64_t(s)));
        if (got != ref && failures++ < 8)
          FAIL_CHECK(what << ": lane " << lane << " d[" << i << "] = D[" << row << "][" << col << "]: got "
                          << got << ", reference " << ref << " (exact sum " << s << ")");
      }
    }
  }
  CHECK_MESSAGE(failures == 0, what << ": " << failures << " mismatching registers");
}

template <class Case>
bool runnable() {
  if (device_cc() < Case::op::kMinArch / 10) {
    MESSAGE("skipping " << Case::op::kPtx << ": the device is sm_" << device_cc());
    return false;
  }
  return true;
}

template <class Case>
Frags<float> random_float_frags(std::mt19937_64& rng) {
  Frags<float> f;
  const int bits = ty_bits(Case::ta);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4 * (32 / bits); ++i) set_elem(&f.a[lane * 4], i, bits, random_code(Case::ta, rng));
    for (int i = 0; i < 2 * (32 / bits); ++i) set_elem(&f.b[lane * 2], i, bits, random_code(Case::tb, rng));
    for (int i = 0; i < 4; ++i) f.c[lane * 4 + i] = random_c_float(rng);
  }
  return f;
}

template <class Case>
Frags<int32_t> random_int_frags(std::mt19937_64& rng) {
  Frags<int32_t> f;
  const int bits = ty_bits(Case::ta);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4 * (32 / bits); ++i) set_elem(&f.a[lane * 4], i, bits, random_code(Case::ta, rng));
    for (int i = 0; i < 2 * (32 / bits); ++i) set_elem(&f.b[lane * 2], i, bits, random_code(Case::tb, rng));
    for (int i = 0; i < 4; ++i) f.c[lane * 4 + i] = int32_t(uint32_t(rng()));
  }
  return f;
}

uint32_t max_code(Ty t) {
  return t == Ty::s8 ? 0x7F : t == Ty::u8 ? 0xFF : t == Ty::s4 ? 0x7 : 0xF;
}
uint32_t min_code(Ty t) {
  return t == Ty::s8 ? 0x80 : t == Ty::u8 ? 0x00 : t == Ty::s4 ? 0x8 : 0x0;
}

using F16 = MmaCase<MMA_16x8x16_F32F16F16F32, Ty::f16, Ty::f16>;
using BF16 = MmaCase<MMA_16x8x16_F32BF16BF16F32, Ty::bf16, Ty::bf16>;
using E4M3 = MmaCase<MMA_16x8x32_F32E4M3E4M3F32, Ty::e4m3, Ty::e4m3>;
using E5M2 = MmaCase<MMA_16x8x32_F32E5M2E5M2F32, Ty::e5m2, Ty::e5m2>;
using E4M3E5M2 = MmaCase<MMA_16x8x32_F32E4M3E5M2F32, Ty::e4m3, Ty::e5m2>;
using E5M2E4M3 = MmaCase<MMA_16x8x32_F32E5M2E4M3F32, Ty::e5m2, Ty::e4m3>;

}  // namespace

TEST_CASE_TEMPLATE("mma float atoms: random fragments against the layout-table reference", Case, F16, BF16,
                   E4M3, E5M2, E4M3E5M2, E5M2E4M3) {
  if (!runnable<Case>()) return;
  std::mt19937_64 rng(0xA70Cu + unsigned(Case::ta) * 7 + unsigned(Case::tb));
  const int trials = llmk::test::pick(4, 2);
  for (int trial = 0; trial < trials; ++trial) {
    Frags<float> f = random_float_frags<Case>(rng);
    if (trial == 1) {
      // Special values: a NaN in A (row of lane 5's a0), an infinity in B where the format has one.
      const int bits = ty_bits(Case::ta);
      set_elem(&f.a[5 * 4], 0, bits, Case::ta == Ty::f16 ? 0x7E00 : Case::ta == Ty::bf16 ? 0x7FC0 : 0x7F);
      if (Case::tb == Ty::f16) set_elem(&f.b[9 * 2], 1, 16, 0x7C00);
      if (Case::tb == Ty::bf16) set_elem(&f.b[9 * 2], 1, 16, 0xFF80);
      if (Case::tb == Ty::e5m2) set_elem(&f.b[9 * 2], 1, 8, 0x7C);
    }
    check_mma<Case>(f, Case::op::kPtx);
  }
}

TEST_CASE("mma f32 accumulation is the exact sum rounded once (simulator semantics)") {
  // D[0][0] = 1 + 2^-12 * 2^-12 + 2^-50 * 2^-50 = 1 + 2^-24 + 2^-100. Rounded once to float: 1 + 2^-23 (just
  // above the tie). A double accumulator would round 1 + 2^-24 + 2^-100 to the tie 1 + 2^-24, and then
  // to 1.0f. The GPU's accumulation is unspecified, so this is a simulator-only property.
  if (!kSim) return;
  Frags<float> f;
  // A[0][0] is lane 0 a-element 0; A[0][1] is lane 0 element 1. B[0][0] is lane 0 b-element 0, B[1][0]
  // element 1.
  set_elem(&f.a[0], 0, 16, 0x3980);  // bf16 2^-12
  set_elem(&f.a[0], 1, 16, 0x2680);  // bf16 2^-50
  set_elem(&f.b[0], 0, 16, 0x3980);
  set_elem(&f.b[0], 1, 16, 0x2680);
  for (float& c : f.c) c = 0.0f;
  f.c[0] = 1.0f;
  llmk::DeviceBuffer<uint32_t> da(f.a), db(f.b);
  llmk::DeviceBuffer<float> dc(f.c), dd(32 * 4);
  run_warp(mma_kernel<MMA_16x8x16_F32BF16BF16F32, float>, 0, da.data(), db.data(), dc.data(), dd.data());
  const std::vector<float> d = dd.to_host();
  CHECK(f32_bits(d[0]) == 0x3F800001u);
  for (int i = 1; i < 128; ++i) CHECK(d[i] == 0.0f);

  // Range: max_bf16^2 (about 2^256) - max_bf16^2 + 1 is exactly 1 (a double accumulator starting from C gives
  // 0), and max_bf16^2 alone overflows float to +inf. Lane 0's d0 is D[0][0], d1 is D[0][1].
  Frags<float> g;
  set_elem(&g.a[0], 0, 16, 0x7F7F);  // A[0][0] = max
  set_elem(&g.a[0], 1, 16, 0xFF7F);  // A[0][1] = -max
  set_elem(&g.b[0], 0, 16, 0x7F7F);  // B[0][0] = B[1][0] = max  ->  D[0][0] = 1 + max^2 - max^2
  set_elem(&g.b[0], 1, 16, 0x7F7F);
  set_elem(&g.b[4 * 2], 0, 16,
           0x7F7F);  // lane 4 holds column 1: B[0][1] = max, B[1][1] = 0 -> D[0][1] = +inf
  for (float& c : g.c) c = 0.0f;
  g.c[0] = 1.0f;
  llmk::DeviceBuffer<uint32_t> ga(g.a), gb(g.b);
  llmk::DeviceBuffer<float> gc(g.c), gd(32 * 4);
  run_warp(mma_kernel<MMA_16x8x16_F32BF16BF16F32, float>, 0, ga.data(), gb.data(), gc.data(), gd.data());
  const std::vector<float> e = gd.to_host();
  CHECK(e[0] == 1.0f);
  CHECK(e[1] == std::numeric_limits<float>::infinity());
}

namespace {
template <class Wrap, class Sat>
struct IntCases {
  using wrap = Wrap;
  using sat = Sat;
};
using S8S8 = IntCases<MmaCase<MMA_16x8x32_S32S8S8S32, Ty::s8, Ty::s8>,
                      MmaCase<MMA_16x8x32_S32S8S8S32_SATFINITE, Ty::s8, Ty::s8, true>>;
using U8U8 = IntCases<MmaCase<MMA_16x8x32_S32U8U8S32, Ty::u8, Ty::u8>,
                      MmaCase<MMA_16x8x32_S32U8U8S32_SATFINITE, Ty::u8, Ty::u8, true>>;
using S8U8 = IntCases<MmaCase<MMA_16x8x32_S32S8U8S32, Ty::s8, Ty::u8>,
                      MmaCase<MMA_16x8x32_S32S8U8S32_SATFINITE, Ty::s8, Ty::u8, true>>;
using U8S8 = IntCases<MmaCase<MMA_16x8x32_S32U8S8S32, Ty::u8, Ty::s8>,
                      MmaCase<MMA_16x8x32_S32U8S8S32_SATFINITE, Ty::u8, Ty::s8, true>>;
using S4S4 = IntCases<MmaCase<MMA_16x8x64_S32S4S4S32, Ty::s4, Ty::s4>,
                      MmaCase<MMA_16x8x64_S32S4S4S32_SATFINITE, Ty::s4, Ty::s4, true>>;
using U4U4 = IntCases<MmaCase<MMA_16x8x64_S32U4U4S32, Ty::u4, Ty::u4>,
                      MmaCase<MMA_16x8x64_S32U4U4S32_SATFINITE, Ty::u4, Ty::u4, true>>;
using S4U4 = IntCases<MmaCase<MMA_16x8x64_S32S4U4S32, Ty::s4, Ty::u4>,
                      MmaCase<MMA_16x8x64_S32S4U4S32_SATFINITE, Ty::s4, Ty::u4, true>>;
using U4S4 = IntCases<MmaCase<MMA_16x8x64_S32U4S4S32, Ty::u4, Ty::s4>,
                      MmaCase<MMA_16x8x64_S32U4S4S32_SATFINITE, Ty::u4, Ty::s4, true>>;
}  // namespace

TEST_CASE_TEMPLATE("mma integer atoms: random, overflow (wrap vs satfinite) and extreme inputs", Cases, S8S8,
                   U8U8, S8U8, U8S8, S4S4, U4U4, S4U4, U4S4) {
  using W = typename Cases::wrap;
  using S = typename Cases::sat;
  constexpr Ty TA = W::ta, TB = W::tb;
  const int bits = ty_bits(TA);
  std::mt19937_64 rng(0x1A7Eu + unsigned(TA) * 11 + unsigned(TB));

  SUBCASE("random fragments, random full-range C") {
    for (int trial = 0; trial < llmk::test::pick(3, 1); ++trial) {
      const Frags<int32_t> f = random_int_frags<W>(rng);
      check_mma<W>(f, W::op::kPtx);
      check_mma<S>(f, S::op::kPtx);
    }
  }
  SUBCASE("accumulation overflows int32: wrap modulo 2^32 vs satfinite clamp") {
    // Rows 0-7: A = max, B = max, C = INT32_MAX - small: the sum exceeds INT32_MAX. Rows 8-15: A = min
    // (negative for signed A), C = INT32_MIN + small: signed A underflows below INT32_MIN.
    Frags<int32_t> f;
    for (int lane = 0; lane < 32; ++lane) {
      for (int i = 0; i < 4 * (32 / bits); ++i)
        set_elem(&f.a[lane * 4], i, bits, a_row(W::op::kK, lane, i) < 8 ? max_code(TA) : min_code(TA));
      for (int i = 0; i < 2 * (32 / bits); ++i) set_elem(&f.b[lane * 2], i, bits, max_code(TB));
      for (int i = 0; i < 4; ++i) {
        const int32_t small = int32_t(rng() % 1000);
        f.c[lane * 4 + i] = c_row(lane, i) < 8 ? INT32_MAX - small : INT32_MIN + small;
      }
    }
    check_mma<W>(f, W::op::kPtx);
    check_mma<S>(f, S::op::kPtx);
    // The two atoms really disagree here (the test exercises overflow, not just agreement).
    llmk::DeviceBuffer<uint32_t> da(f.a), db(f.b);
    llmk::DeviceBuffer<int32_t> dc(f.c), dw(128), ds(128);
    run_warp(mma_kernel<typename W::op, int32_t>, 0, da.data(), db.data(), dc.data(), dw.data());
    run_warp(mma_kernel<typename S::op, int32_t>, 0, da.data(), db.data(), dc.data(), ds.data());
    const auto w = dw.to_host(), s = ds.to_host();
    CHECK(s[0] == INT32_MAX);  // lane 0 d0 is row 0: overflowed and clamped
    CHECK(w[0] < 0);           // ... and wrapped to a negative value
    if (TA == Ty::s8 || TA == Ty::s4) {
      CHECK(s[2] == INT32_MIN);  // lane 0 d2 is row 8: underflowed and clamped
      CHECK(w[2] > 0);
    }
  }
  SUBCASE("extreme element values (-128, 127, ...), random C") {
    const uint32_t ext8s[] = {0x80, 0x7F, 0x81, 0xFF, 0x01}, ext8u[] = {0xFF, 0x80, 0x7F, 0x01, 0xFE};
    const uint32_t ext4s[] = {0x8, 0x7, 0x9, 0xF, 0x1}, ext4u[] = {0xF, 0x8, 0x7, 0x1, 0xE};
    auto pick_ext = [&](Ty t) {
      const uint32_t* set = t == Ty::s8 ? ext8s : t == Ty::u8 ? ext8u : t == Ty::s4 ? ext4s : ext4u;
      return set[rng() % 5];
    };
    Frags<int32_t> f;
    for (int lane = 0; lane < 32; ++lane) {
      for (int i = 0; i < 4 * (32 / bits); ++i) set_elem(&f.a[lane * 4], i, bits, pick_ext(TA));
      for (int i = 0; i < 2 * (32 / bits); ++i) set_elem(&f.b[lane * 2], i, bits, pick_ext(TB));
      for (int i = 0; i < 4; ++i) f.c[lane * 4 + i] = int32_t(rng() % 2000001) - 1000000;
    }
    check_mma<W>(f, W::op::kPtx);
    check_mma<S>(f, S::op::kPtx);
  }
}

// ------------------------------------------------------------------------------------------------------------
// ldmatrix

namespace {

struct alignas(16) Row16 {
  uint16_t h[8];
};

// Rows of `tile` are copied to shared memory with a stride of `stride` rows (so gaps exist); lane l then
// addresses shared row lane_row[l], or (lane_row[l] < 0) a deliberately misaligned address that the atom must
// ignore (only for lanes >= 8 * Num).
template <class Op, int Num>
__global__ void ldsm_kernel(const Row16* tile, int rows, int stride, const int* lane_row, uint32_t* out) {
  Row16* smem = reinterpret_cast<Row16*>(llmk::dynamic_smem());
  const int l = int(threadIdx.x);
  for (int r = l; r < rows; r += 32) smem[r * stride] = tile[r];
  __syncthreads();
  const int row = lane_row[l];
  const void* addr = row >= 0 ? static_cast<const void*>(smem + row * stride)
                              : static_cast<const void*>(reinterpret_cast<const unsigned char*>(smem) + 2);
  uint32_t d[4] = {0, 0, 0, 0};
  if constexpr (Num == 1)
    Op::copy(addr, d[0]);
  else if constexpr (Num == 2)
    Op::copy(addr, d[0], d[1]);
  else
    Op::copy(addr, d[0], d[1], d[2], d[3]);
  for (int j = 0; j < 4; ++j) out[l * 4 + j] = d[j];
}

template <class Op, int Num, bool Trans>
void check_ldsm(const char* name) {
  std::mt19937_64 rng(0x1D5Eu + Num * 2 + Trans);
  const int rows = 64, stride = 3;
  for (int trial = 0; trial < llmk::test::pick(3, 1); ++trial) {
    std::vector<Row16> tile(rows);
    for (auto& r : tile)
      for (auto& h : r.h) h = uint16_t(rng());
    // Lanes address distinct rows in a random order (not the identity).
    std::vector<int> perm(rows);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int> lane_row(32);
    for (int l = 0; l < 32; ++l) lane_row[l] = l < 8 * Num ? perm[l] : -1;
    llmk::DeviceBuffer<Row16> dt(tile);
    llmk::DeviceBuffer<int> dl(lane_row);
    llmk::DeviceBuffer<uint32_t> dout(32 * 4);
    run_warp(ldsm_kernel<Op, Num>, std::size_t(rows * stride * 16), dt.data(), rows, stride, dl.data(),
             dout.data());
    const auto out = dout.to_host();
    for (int l = 0; l < 32; ++l) {
      for (int j = 0; j < Num; ++j) {
        // Matrix j's row r is the tile row given by lane 8j + r.
        auto elem = [&](int r, int c) { return uint32_t(tile[lane_row[8 * j + r]].h[c]); };
        uint32_t expect;
        if (Trans)
          expect = elem(2 * (l % 4), l / 4) | (elem(2 * (l % 4) + 1, l / 4) << 16);
        else
          expect = elem(l / 4, 2 * (l % 4)) | (elem(l / 4, 2 * (l % 4) + 1) << 16);
        CHECK_MESSAGE(out[l * 4 + j] == expect, name << ": lane " << l << " register " << j);
      }
    }
  }
}

}  // namespace

TEST_CASE("ldmatrix x1/x2/x4 and .trans: permuted row addresses, unused lanes ignored") {
  check_ldsm<LDSM_x1, 1, false>("LDSM_x1");
  check_ldsm<LDSM_x2, 2, false>("LDSM_x2");
  check_ldsm<LDSM_x4, 4, false>("LDSM_x4");
  check_ldsm<LDSM_x1_T, 1, true>("LDSM_x1_T");
  check_ldsm<LDSM_x2_T, 2, true>("LDSM_x2_T");
  check_ldsm<LDSM_x4_T, 4, true>("LDSM_x4_T");
}

namespace {
// A is a row-major 16x16 f16 tile, B a row-major 16(k) x 8(n) f16 tile. LDSM_x4 with lane l at row l%16,
// chunk l/16 of A gives the m16n8k16 A fragment; LDSM_x2_T with lane l at row l%16 of B gives the B fragment.
__global__ void ldsm_mma_kernel(const uint16_t* a_tile, const uint16_t* b_tile, const float* c,
                                uint32_t* a_out, uint32_t* b_out, float* d_out) {
  uint16_t* smem = reinterpret_cast<uint16_t*>(llmk::dynamic_smem());
  uint16_t* as = smem;
  uint16_t* bs = smem + 256;
  const int l = int(threadIdx.x);
  for (int i = l; i < 256; i += 32) as[i] = a_tile[i];
  for (int i = l; i < 128; i += 32) bs[i] = b_tile[i];
  __syncthreads();
  uint32_t a[4], b[2];
  LDSM_x4::copy(as + (l % 16) * 16 + (l / 16) * 8, a[0], a[1], a[2], a[3]);
  LDSM_x2_T::copy(bs + (l % 16) * 8, b[0], b[1]);
  float cr[4] = {c[l * 4], c[l * 4 + 1], c[l * 4 + 2], c[l * 4 + 3]}, d[4];
  MMA_16x8x16_F32F16F16F32::fma(d, a, b, cr);
  for (int i = 0; i < 4; ++i) a_out[l * 4 + i] = a[i];
  for (int i = 0; i < 2; ++i) b_out[l * 2 + i] = b[i];
  for (int i = 0; i < 4; ++i) d_out[l * 4 + i] = d[i];
}
}  // namespace

TEST_CASE("ldmatrix.x4 on a row-major 16x16 tile is the m16n8k16 A fragment; .x2.trans on 16x8 is B") {
  std::mt19937_64 rng(0xF4A6u);
  std::vector<uint16_t> at(256), bt(128);
  for (auto& v : at) v = uint16_t(random_code(Ty::f16, rng));
  for (auto& v : bt) v = uint16_t(random_code(Ty::f16, rng));
  std::vector<float> c(128);
  for (auto& v : c) v = random_c_float(rng);
  llmk::DeviceBuffer<uint16_t> da(at), db(bt);
  llmk::DeviceBuffer<float> dc(c), dd(128);
  llmk::DeviceBuffer<uint32_t> dao(128), dbo(64);
  run_warp(ldsm_mma_kernel, 768, da.data(), db.data(), dc.data(), dao.data(), dbo.data(), dd.data());
  const auto ao = dao.to_host(), bo = dbo.to_host();
  const auto d = dd.to_host();
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i)
      CHECK_MESSAGE(get_elem(&ao[lane * 4], i, 16) == at[a_row(16, lane, i) * 16 + a_col(16, lane, i)],
                    "A fragment lane " << lane << " element " << i);
    for (int i = 0; i < 4; ++i)
      CHECK_MESSAGE(get_elem(&bo[lane * 2], i, 16) == bt[b_row(16, lane, i) * 8 + b_col(lane)],
                    "B fragment lane " << lane << " element " << i);
    for (int i = 0; i < 4; ++i) {
      const int row = c_row(lane, i), col = c_col(lane, i);
      double s = c[lane * 4 + i], mag = std::fabs(s);
      for (int k = 0; k < 16; ++k) {
        const double p = decode(at[row * 16 + k], Ty::f16) * decode(bt[k * 8 + col], Ty::f16);
        s += p;
        mag += std::fabs(p);
      }
      if (kSim)
        CHECK(d[lane * 4 + i] == float(s));
      else
        CHECK(std::fabs(d[lane * 4 + i] - s) <= 0x1p-19 * mag);
    }
  }
}

// ------------------------------------------------------------------------------------------------------------
// cp.async

namespace {

enum CpMode { kCa = 0, kCg = 1, kZfillCa = 2, kZfillCg = 3, kCaWaitAll = 4 };

template <int N, int Mode>
LLMK_DEVICE void cp_issue(unsigned char* dst, const unsigned char* src, int src_bytes) {
  if constexpr (Mode == kCa || Mode == kCaWaitAll)
    cp_async_ca<N>(dst, src);
  else if constexpr (Mode == kCg)
    cp_async_cg16(dst, src);
  else if constexpr (Mode == kZfillCa)
    cp_async_zfill<N>(dst, src, src_bytes);
  else
    cp_async_cg16_zfill(dst, src, src_bytes);
}

// Two groups per lane: group 0 copies src[l*N, +N) to smem[l*N, +N), group 1 copies src[32N + l*N, +N) to
// smem[32N + l*N, +N). After wait_group 1 the first group is read back, after wait_group 0 the second.
template <int N, int Mode>
__global__ void cp_kernel(const unsigned char* src, const int* src_bytes, unsigned char* out) {
  unsigned char* smem = llmk::dynamic_smem();
  const int l = int(threadIdx.x);
  for (int i = 0; i < N; ++i)
    smem[l * N + i] = smem[32 * N + l * N + i] = 0xAB;  // not zero: zfill must write
  __syncthreads();
  cp_issue<N, Mode>(smem + l * N, src + l * N, src_bytes[l]);
  cp_async_commit();
  cp_issue<N, Mode>(smem + 32 * N + l * N, src + 32 * N + l * N, src_bytes[32 + l]);
  if constexpr (Mode == kCaWaitAll) {
    cp_async_wait_all();
  } else {
    cp_async_commit();
    cp_async_wait<1>();
  }
  for (int i = 0; i < N; ++i) out[l * N + i] = smem[l * N + i];
  cp_async_wait<0>();
  for (int i = 0; i < N; ++i) out[32 * N + l * N + i] = smem[32 * N + l * N + i];
}

template <int N, int Mode>
void check_cp(const char* name) {
  std::mt19937_64 rng(0xC0A5u + N * 8 + Mode);
  std::vector<unsigned char> src(64 * N);
  for (auto& b : src) b = (unsigned char)(rng() % 255 + 1);  // never zero, so zero fill is visible
  std::vector<int> sb(64, N);
  const bool zfill = Mode == kZfillCa || Mode == kZfillCg;
  if (zfill)
    for (int i = 0; i < 64; ++i) sb[i] = i % (N + 1);  // every src_size in 0..N
  llmk::DeviceBuffer<unsigned char> dsrc(src), dout(64 * N);
  llmk::DeviceBuffer<int> dsb(sb);
  run_warp(cp_kernel<N, Mode>, std::size_t(64 * N), dsrc.data(), dsb.data(), dout.data());
  const auto out = dout.to_host();
  for (int i = 0; i < 64; ++i)
    for (int b = 0; b < N; ++b) {
      const unsigned char expect = b < sb[i] ? src[i * N + b] : 0;
      CHECK_MESSAGE(int(out[i * N + b]) == int(expect),
                    name << ": copy " << i << " byte " << b << " (src_bytes " << sb[i] << ")");
    }
}

}  // namespace

TEST_CASE("cp.async ca 4/8/16, cg 16, zero-fill with every src_size, wait_group and wait_all") {
  check_cp<4, kCa>("cp_async_ca<4>");
  check_cp<8, kCa>("cp_async_ca<8>");
  check_cp<16, kCa>("cp_async_ca<16>");
  check_cp<16, kCg>("cp_async_cg16");
  check_cp<4, kZfillCa>("cp_async_zfill<4>");
  check_cp<8, kZfillCa>("cp_async_zfill<8>");
  check_cp<16, kZfillCa>("cp_async_zfill<16>");
  check_cp<16, kZfillCg>("cp_async_cg16_zfill");
  check_cp<8, kCaWaitAll>("cp_async_ca<8> + wait_all");
}

#if defined(LLMK_SIM)
namespace {
__global__ void bad_ldsm_kernel(int which, const unsigned char* global) {
  unsigned char* smem = llmk::dynamic_smem();
  const int l = int(threadIdx.x);
  const void* addr = smem + 16 * l;
  if (which == 0 && l == 3) addr = smem + 16 * l + 4;  // misaligned, and lane 3 is used by .x1
  if (which == 1 && l == 9) addr = global;             // global memory, lane 9 is used by .x2
  uint32_t d0, d1;
  LDSM_x2::copy(addr, d0, d1);
}
__global__ void bad_cp_kernel(int which, const unsigned char* global) {
  unsigned char* smem = llmk::dynamic_smem();
  if (which == 0) cp_async_ca<16>(smem + 8, global);                           // misaligned destination
  if (which == 1) cp_async_ca<8>(smem, global + 4);                            // misaligned source
  if (which == 2) cp_async_ca<4>(const_cast<unsigned char*>(global), global);  // destination not shared
  if (which == 3) cp_async_zfill<8>(smem, global, 9);                          // src_bytes > N
  if (which == 4) cp_async_ca<4>(smem, smem + 16);                             // source in shared memory
  cp_async_wait_all();
}
}  // namespace

TEST_CASE("simulator: bad ldmatrix / cp.async addresses fail the launch with a message") {
  llmk::DeviceBuffer<unsigned char> g(64);
  const char* ldsm_expect[] = {"not 16-byte aligned", "not inside this block's shared-memory arena"};
  for (int which = 0; which < 2; ++which) {
    const llmk::Status s = llmk::launch(bad_ldsm_kernel, dim3(1), dim3(32), 512, nullptr, which, g.data());
    CHECK_FALSE(s.ok());
    CHECK_MESSAGE(s.message().find(ldsm_expect[which]) != std::string::npos, s.message());
    CHECK_MESSAGE(s.message().find("atoms.cu") != std::string::npos, s.message());
  }
  const char* cp_expect[] = {"destination is not aligned", "source is not aligned", "not inside this block's",
                             "src_bytes must be", "source lies in shared memory"};
  for (int which = 0; which < 5; ++which) {
    const llmk::Status s = llmk::launch(bad_cp_kernel, dim3(1), dim3(1), 64, nullptr, which, g.data());
    CHECK_FALSE(s.ok());
    CHECK_MESSAGE(s.message().find(cp_expect[which]) != std::string::npos, s.message());
  }
}
#endif

// ------------------------------------------------------------------------------------------------------------
// Packed conversions

namespace {

__global__ void cvt_from_f32_kernel(const float* in, int pairs, uint32_t* f16x2, uint32_t* bf16x2,
                                    uint32_t* e4m3x2, uint32_t* e5m2x2) {
  for (int i = int(threadIdx.x); i < pairs; i += 32) {
    const float lo = in[2 * i], hi = in[2 * i + 1];
    f16x2[i] = cvt_f32x2_to_f16x2(lo, hi);
    bf16x2[i] = cvt_f32x2_to_bf16x2(lo, hi);
    e4m3x2[i] = cvt_f32x2_to_e4m3x2(lo, hi);
    e5m2x2[i] = cvt_f32x2_to_e5m2x2(lo, hi);
  }
}

__global__ void cvt_from_x2_kernel(const uint32_t* in, int n, float* f16_f32, float* bf16_f32,
                                   uint32_t* e4m3x2, uint32_t* e5m2x2) {
  for (int i = int(threadIdx.x); i < n; i += 32) {
    cvt_f16x2_to_f32x2(in[i], f16_f32[2 * i], f16_f32[2 * i + 1]);
    cvt_bf16x2_to_f32x2(in[i], bf16_f32[2 * i], bf16_f32[2 * i + 1]);
    e4m3x2[i] = cvt_f16x2_to_e4m3x2(in[i]);
    e5m2x2[i] = cvt_f16x2_to_e5m2x2(in[i]);
  }
}

__global__ void cvt_from_f8x2_kernel(int n, uint32_t* from_e4m3, uint32_t* from_e5m2) {
  for (int i = int(threadIdx.x); i < n; i += 32) {
    from_e4m3[i] = cvt_e4m3x2_to_f16x2(uint16_t(i));
    from_e5m2[i] = cvt_e5m2x2_to_f16x2(uint16_t(i));
  }
}

std::vector<float> conversion_inputs(std::mt19937_64& rng) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v = {
      1.0f, 2.0f,  // the packing order check below relies on this first pair
      0.0f, -0.0f, inf, -inf, nan, -nan, 1e-45f, -1e-45f, 1e-40f, 1.17549435e-38f,
      // f16: max, just below / at the overflow tie, subnormals, the half-of-min-subnormal tie, ties to even.
      65504.0f, 65519.99f, 65520.0f, -65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 0x1.002p0f,
      0x1.006p0f, 0x1.ffcp-15f, 0x1.ffep-15f,
      // bf16 ties and overflow.
      0x1.01p0f, 0x1.03p0f, 0x1.fep127f, 0x1.ffp127f, 3.3895314e38f,
      // e4m3: max 448, the 464 tie (between 448 and 480), subnormals 2^-9.., ties.
      448.0f, 464.0f, 479.0f, 480.0f, 1e6f, 0x1p-9f, 0x1p-10f, 0x1.8p-10f, 0x1.1p0f, 0x1.3p0f,
      // e5m2: max 57344, overflow region, subnormals 2^-16, ties.
      57344.0f, 61439.0f, 61440.0f, 0x1p-16f, 0x1p-17f, 0x1.2p0f, 0x1.6p0f};
  for (int i = 0; i < 2000; ++i) {
    // Random sign, exponent across [-30, 20] (covers every format's subnormals, normals and overflow),
    // mantissa.
    const int e = int(rng() % 51) - 30;
    const float m = 1.0f + float(rng() % (1u << 23)) * 0x1p-23f;
    v.push_back((rng() & 1 ? -1.0f : 1.0f) * std::ldexp(m, e));
  }
  for (int i = 0; i < 500; ++i) v.push_back(bits_f32(uint32_t(rng())));  // any bit pattern
  if (v.size() % 2) v.push_back(1.5f);
  return v;
}

}  // namespace

TEST_CASE("convert: float pairs -> f16x2 / bf16x2 / e4m3x2 / e5m2x2 (first element in the low half)") {
  std::mt19937_64 rng(0xC417u);
  const std::vector<float> in = conversion_inputs(rng);
  const int pairs = int(in.size() / 2);
  llmk::DeviceBuffer<float> din(in);
  llmk::DeviceBuffer<uint32_t> o16(pairs), ob16(pairs), o43(pairs), o52(pairs);
  run_warp(cvt_from_f32_kernel, 0, din.data(), pairs, o16.data(), ob16.data(), o43.data(), o52.data());
  const auto r16 = o16.to_host(), rb16 = ob16.to_host(), r43 = o43.to_host(), r52 = o52.to_host();
  // Operand order: cvt.rn.f16x2.f32 d, a, b puts a in the UPPER half; the atoms take (lo, hi).
  CHECK(r16[0] == 0x40003C00u);  // lo 1.0 = 0x3C00, hi 2.0 = 0x4000
  CHECK(rb16[0] == 0x40003F80u);
  CHECK(r43[0] == 0x4038u);  // e4m3 1.0 = 0x38, 2.0 = 0x40
  CHECK(r52[0] == 0x403Cu);  // e5m2 1.0 = 0x3C, 2.0 = 0x40
  int failures = 0;
  for (int i = 0; i < pairs; ++i) {
    for (int h = 0; h < 2; ++h) {
      const float x = in[2 * i + h];
      const uint32_t g16 = (r16[i] >> (16 * h)) & 0xFFFF, gb16 = (rb16[i] >> (16 * h)) & 0xFFFF;
      const uint32_t g43 = (r43[i] >> (8 * h)) & 0xFF, g52 = (r52[i] >> (8 * h)) & 0xFF;
      const bool ok = same_code(g16, rounder(Ty::f16).round(x, false), Ty::f16) &&
                      same_code(gb16, rounder(Ty::bf16).round(x, false), Ty::bf16) &&
                      same_code(g43, rounder(Ty::e4m3).round(x, true), Ty::e4m3) &&
                      same_code(g52, rounder(Ty::e5m2).round(x, true), Ty::e5m2);
      if (!ok && failures++ < 10)
        FAIL_CHECK("x = " << x << " (0x" << std::hex << f32_bits(x) << "): f16 0x" << g16 << " bf16 0x"
                          << gb16 << " e4m3 0x" << g43 << " e5m2 0x" << g52 << std::dec);
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("convert: f16x2 / bf16x2 -> floats, f16x2 -> e4m3x2 / e5m2x2 (satfinite)") {
  std::mt19937_64 rng(0xC418u);
  std::vector<uint32_t> in = {0x40003C00u, 0x7C00FC00u, 0x7E000001u, 0x03FF8000u, 0x5F005BC0u, 0x7BFF7BFFu};
  for (uint32_t h = 0; h < 65536; h += 7)
    in.push_back(h | (uint32_t(65535 - h) << 16));  // sweeps every region
  for (int i = 0; i < 500; ++i) in.push_back(uint32_t(rng()));
  const int n = int(in.size());
  llmk::DeviceBuffer<uint32_t> din(in), o43(n), o52(n);
  llmk::DeviceBuffer<float> of(2 * n), obf(2 * n);
  run_warp(cvt_from_x2_kernel, 0, din.data(), n, of.data(), obf.data(), o43.data(), o52.data());
  const auto f = of.to_host(), bf = obf.to_host();
  const auto r43 = o43.to_host(), r52 = o52.to_host();
  CHECK(f[0] == 1.0f);  // low half first
  CHECK(f[1] == 2.0f);
  int failures = 0;
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < 2; ++h) {
      const uint32_t code = (in[i] >> (16 * h)) & 0xFFFF;
      const double v = decode(code, Ty::f16);
      const float gf = f[2 * i + h];
      bool ok = std::isnan(v) ? std::isnan(gf) : (gf == float(v) && std::signbit(gf) == std::signbit(v));
      ok = ok && f32_bits(bf[2 * i + h]) == (code << 16);  // bf16 -> f32 is a shift, NaN payload included
      ok = ok && same_code((r43[i] >> (8 * h)) & 0xFF, rounder(Ty::e4m3).round(v, true), Ty::e4m3);
      ok = ok && same_code((r52[i] >> (8 * h)) & 0xFF, rounder(Ty::e5m2).round(v, true), Ty::e5m2);
      if (!ok && failures++ < 10)
        FAIL_CHECK("half 0x" << std::hex << code << std::dec << ": f32 " << gf << " e4m3 0x" << std::hex
                             << ((r43[i] >> (8 * h)) & 0xFF) << " e5m2 0x" << ((r52[i] >> (8 * h)) & 0xFF)
                             << std::dec);
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("convert: every e4m3x2 / e5m2x2 pair -> f16x2 (exact)") {
  const int n = 65536;
  llmk::DeviceBuffer<uint32_t> o43(n), o52(n);
  run_warp(cvt_from_f8x2_kernel, 0, n, o43.data(), o52.data());
  const auto r43 = o43.to_host(), r52 = o52.to_host();
  int failures = 0;
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < 2; ++h) {
      const uint32_t c = (uint32_t(i) >> (8 * h)) & 0xFF;
      const uint32_t g43 = (r43[i] >> (16 * h)) & 0xFFFF, g52 = (r52[i] >> (16 * h)) & 0xFFFF;
      const bool ok = same_code(g43, rounder(Ty::f16).round(decode(c, Ty::e4m3), false), Ty::f16) &&
                      same_code(g52, rounder(Ty::f16).round(decode(c, Ty::e5m2), false), Ty::f16);
      if (!ok && failures++ < 10)
        FAIL_CHECK("fp8 0x" << std::hex << c << ": from e4m3 0x" << g43 << ", from e5m2 0x" << g52
                            << std::dec);
    }
  }
  CHECK(failures == 0);
}

// ------------------------------------------------------------------------------------------------------------
// Approximate math

namespace {
__global__ void fast_math_kernel(const float* in, int n, float* ex2, float* rcp) {
  for (int i = int(threadIdx.x); i < n; i += 32) {
    ex2[i] = ex2_approx(in[i]);
    rcp[i] = rcp_approx(in[i]);
  }
}
float ftz(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}
}  // namespace

TEST_CASE("ex2_approx / rcp_approx: sweep and special values (.ftz)") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> in = {
      0.0f,    -0.0f,   1e-40f, -1e-40f, inf,    -inf,    std::numeric_limits<float>::quiet_NaN(),
      1.0f,    -1.0f,   0.5f,   127.0f,  128.0f, -126.0f, -127.0f,
      -149.0f, -150.0f, 1e30f,  -1e30f,  3e38f,  1e-38f,  2e-38f};
  for (float x = -140.0f; x <= 130.0f; x += 1.0f / 64) in.push_back(x);
  std::mt19937_64 rng(0xE42u);
  for (int i = 0; i < 500; ++i)
    in.push_back(std::ldexp(1.0f + float(rng() % 1000000) * 1e-6f, int(rng() % 250) - 125));
  const int n = int(in.size());
  llmk::DeviceBuffer<float> din(in), oe(n), orc(n);
  run_warp(fast_math_kernel, 0, din.data(), n, oe.data(), orc.data());
  const auto e = oe.to_host(), r = orc.to_host();
  int failures = 0;
  for (int i = 0; i < n; ++i) {
    const float x = ftz(in[i]);
    const float re = ftz(float(std::exp2(double(x))));
    const float rr = ftz(float(1.0 / double(x)));
    auto close = [&](float got, float ref, double rel) {
      if (std::isnan(ref)) return std::isnan(got);
      if (kSim) return f32_bits(got) == f32_bits(ref);
      if (std::isinf(ref)) return got == ref;
      // GPU: relative error, plus an absolute slack of the smallest normal for results at the flush boundary.
      return std::fabs(double(got) - double(ref)) <= rel * std::fabs(double(ref)) + 0x1p-126;
    };
    const bool ok = close(e[i], re, 0x1p-21) && close(r[i], rr, 0x1p-22);
    if (!ok && failures++ < 10)
      FAIL_CHECK("x = " << in[i] << ": ex2 " << e[i] << " (reference " << re << "), rcp " << r[i]
                        << " (reference " << rr << ")");
  }
  CHECK(failures == 0);
  CHECK(e[0] == 1.0f);      // 2^0
  CHECK(e[2] == 1.0f);      // subnormal input flushed to 0
  CHECK(e[5] == 0.0f);      // 2^-inf
  CHECK(std::isinf(r[2]));  // 1 / flushed subnormal
}

// ------------------------------------------------------------------------------------------------------------
// NaN-propagating maximum

namespace {
__global__ void max_nan_kernel(const float* a, const float* b, int n, float* out) {
  for (int i = int(threadIdx.x); i < n; i += 32) out[i] = max_nan(a[i], b[i]);
}
}  // namespace

TEST_CASE("max_nan: NaN in either input gives the canonical NaN, -0 < +0, subnormals kept") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan_payload = std::bit_cast<float>(0x7fc01234u), neg_nan = std::bit_cast<float>(0xffc00000u);
  const std::vector<float> special = {0.0f,   -0.0f, 1e-40f, -1e-40f,     1.0f,    -1.0f, 3e38f,
                                      -3e38f, inf,   -inf,   nan_payload, neg_nan, 0.5f,  -0.5f};
  std::vector<float> a, b;
  for (float x : special)
    for (float y : special) {
      a.push_back(x);
      b.push_back(y);
    }
  std::mt19937_64 rng(0x3A7u);
  std::normal_distribution<float> nd(0.0f, 10.0f);
  for (int i = 0; i < 300; ++i) {
    a.push_back(nd(rng));
    b.push_back(i % 7 == 0 ? a.back() : nd(rng));  // some equal pairs
  }
  const int n = int(a.size());
  llmk::DeviceBuffer<float> da(a), db(b), dout(n);
  dout.poison();
  run_warp(max_nan_kernel, 0, da.data(), db.data(), n, dout.data());
  const auto got = dout.to_host();
  int failures = 0;
  for (int i = 0; i < n; ++i) {
    const float x = a[i], y = b[i];
    std::uint32_t want;
    if (std::isnan(x) || std::isnan(y))
      want = 0x7fffffffu;
    else if (x == 0.0f && y == 0.0f)
      want = (std::signbit(x) && std::signbit(y)) ? 0x80000000u : 0u;
    else
      want = f32_bits(x > y ? x : y);
    if (f32_bits(got[i]) != want && failures++ < 10)
      FAIL_CHECK("max_nan(" << x << ", " << y << ") = 0x" << std::hex << f32_bits(got[i]) << ", want 0x"
                            << want << std::dec);
  }
  CHECK(failures == 0);
}

// ------------------------------------------------------------------------------------------------------------
// Packed 16-bit arithmetic (arch/packed_math.cuh)

namespace {

__global__ void packed_math_kernel(const uint32_t* a, const uint32_t* b, int n, uint32_t* sub_h,
                                   uint32_t* mul_h, uint32_t* sub_b, uint32_t* mul_b) {
  for (int i = int(threadIdx.x); i < n; i += 32) {
    sub_h[i] = sub_f16x2(a[i], b[i]);
    mul_h[i] = mul_f16x2(a[i], b[i]);
    sub_b[i] = sub_bf16x2(a[i], b[i]);
    mul_b[i] = mul_bf16x2(a[i], b[i]);
  }
}

}  // namespace

TEST_CASE(
    "packed math: sub/mul f16x2 and bf16x2 round each lane once (specials, random codes, dequant pairs)") {
  std::mt19937_64 rng(0x9A7Du);
  std::vector<uint32_t> a, b;
  // Specials of both formats: zeros, subnormals, max, inf, NaN, ones; every pair of them.
  const std::vector<uint16_t> special = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x7BFF, 0xFBFF, 0x7C00,
                                         0xFC00, 0x7E00, 0x3C00, 0xBC00, 0x0080, 0x7F7F, 0xFF7F, 0x7F80,
                                         0x7FC0, 0x3F80, 0x4300, 0x6400, 0x3555, 0x0400, 0x8400, 0x0040};
  for (uint16_t x : special)
    for (uint16_t y : special) {
      a.push_back(uint32_t(x) | (uint32_t(y) << 16));
      b.push_back(uint32_t(y) | (uint32_t(x) << 16));
    }
  // What the weight-only dequantization computes: (M | u) - (M | z), then times a scale (u, z < 256).
  for (int u = 0; u < 256; u += 5)
    for (int z = 0; z < 256; z += 7) {
      a.push_back((0x6400u | u) | ((0x4300u | (u & 15)) << 16));
      b.push_back((0x6400u | z) | ((0x4300u | (z & 15)) << 16));
    }
  for (int i = 0; i < 3000; ++i) {  // any bit patterns, and nearby exponents (where rounding happens most)
    a.push_back(uint32_t(rng()));
    b.push_back(i % 2 ? uint32_t(rng()) : (a.back() ^ (uint32_t(rng()) & 0x03FF03FFu)));
  }
  const int n = int(a.size());
  llmk::DeviceBuffer<uint32_t> da(a), db(b), sh(n), mh(n), sb(n), mb(n);
  run_warp(packed_math_kernel, 0, da.data(), db.data(), n, sh.data(), mh.data(), sb.data(), mb.data());
  const auto rsh = sh.to_host(), rmh = mh.to_host(), rsb = sb.to_host(), rmb = mb.to_host();
  int failures = 0;
  for (int i = 0; i < n; ++i)
    for (int h = 0; h < 2; ++h) {
      const uint32_t x = (a[i] >> (16 * h)) & 0xFFFF, y = (b[i] >> (16 * h)) & 0xFFFF;
      const double xh = decode(x, fmt_of(Ty::f16)), yh = decode(y, fmt_of(Ty::f16));
      const double xb = decode(x, fmt_of(Ty::bf16)), yb = decode(y, fmt_of(Ty::bf16));
      const uint32_t g[4] = {(rsh[i] >> (16 * h)) & 0xFFFF, (rmh[i] >> (16 * h)) & 0xFFFF,
                             (rsb[i] >> (16 * h)) & 0xFFFF, (rmb[i] >> (16 * h)) & 0xFFFF};
      const bool ok = same_code(g[0], rounder(Ty::f16).round(xh - yh, false), Ty::f16) &&
                      same_code(g[1], rounder(Ty::f16).round(xh * yh, false), Ty::f16) &&
                      same_code(g[2], rounder(Ty::bf16).round(xb - yb, false), Ty::bf16) &&
                      same_code(g[3], rounder(Ty::bf16).round(xb * yb, false), Ty::bf16);
      if (!ok && failures++ < 10) {
        char msg[160];
        std::snprintf(msg, sizeof msg,
                      "lanes 0x%04x, 0x%04x: sub.f16 0x%04x mul.f16 0x%04x sub.bf16 0x%04x mul.bf16 0x%04x",
                      x, y, g[0], g[1], g[2], g[3]);
        FAIL_CHECK(msg);
      }
    }
  CHECK(failures == 0);
}

// ------------------------------------------------------------------------------------------------------------
// Bit operations (arch/bit_ops.cuh): lop3 with the truth tables the dequantization uses plus a few others,
// prmt with the dequantization's selectors and random ones (sign replication included). The expected values
// are written from the ISA's definitions independently of the atoms' emulation.

namespace {

__global__ void bit_ops_kernel(const uint32_t* a, const uint32_t* b, const uint32_t* c, const uint32_t* sel,
                               int n, uint32_t* out) {
  for (int i = int(threadIdx.x); i < n; i += 32) {
    out[6 * i + 0] = lop3<0xEA>(a[i], b[i], c[i]);  // (a & b) | c
    out[6 * i + 1] = lop3<0x96>(a[i], b[i], c[i]);  // a ^ b ^ c
    out[6 * i + 2] = lop3<0xE8>(a[i], b[i], c[i]);  // majority
    out[6 * i + 3] = lop3<0x1E>(a[i], b[i], c[i]);  // a ^ (b | c)
    out[6 * i + 4] = lop3<0xEA>(a[i], 0x00F000F0u, 0x54005400u);
    out[6 * i + 5] = prmt(a[i], b[i], sel[i]);
  }
}

uint32_t prmt_expected(uint32_t a, uint32_t b, uint32_t sel) {
  const uint64_t bytes = (uint64_t{b} << 32) | a;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t nib = (sel >> (4 * i)) & 15u;
    uint32_t v = uint32_t(bytes >> (8 * (nib & 7u))) & 0xFFu;
    if (nib >= 8) v = (v >> 7) ? 0xFFu : 0u;
    d |= v << (8 * i);
  }
  return d;
}

}  // namespace

TEST_CASE("bit ops: lop3 truth tables and prmt byte selection match the ISA's definitions") {
  std::mt19937 rng(0xB17u);
  const int n = 512;
  std::vector<uint32_t> a(n), b(n), c(n), sel(n);
  const uint32_t kSelectors[] = {0x4240u, 0x4341u, 0x7540u, 0x7542u, 0x7541u, 0x7543u};
  for (int i = 0; i < n; ++i) {
    a[i] = rng();
    b[i] = i % 4 == 0 ? 0x64646464u : rng();
    c[i] = rng();
    sel[i] = i < 6 ? kSelectors[i] : (rng() & 0xFFFFu);
  }
  llmk::DeviceBuffer<uint32_t> da(a), db(b), dc(c), ds(sel), dout(6 * n);
  run_warp(bit_ops_kernel, 0, da.data(), db.data(), dc.data(), ds.data(), n, dout.data());
  const auto got = dout.to_host();
  int failures = 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t x = a[i], y = b[i], z = c[i];
    const uint32_t want[6] = {(x & y) | z,
                              x ^ y ^ z,
                              (x & y) | (x & z) | (y & z),
                              x ^ (y | z),
                              (x & 0x00F000F0u) | 0x54005400u,
                              prmt_expected(x, y, sel[i])};
    for (int j = 0; j < 6; ++j)
      if (got[6 * i + j] != want[j] && failures++ < 10)
        FAIL_CHECK("input " << i << " op " << j << ": got " << got[6 * i + j] << ", want " << want[j]);
  }
  CHECK(failures == 0);
  // The dequantization's selectors on a known word: bytes 0 / 2 and 1 / 3 under 0x64, and fp32 2^23 + byte.
  CHECK(prmt(0xDDCCBBAAu, 0x64646464u, 0x4240u) == 0x64CC64AAu);
  CHECK(prmt(0xDDCCBBAAu, 0x64646464u, 0x4341u) == 0x64DD64BBu);
  CHECK(prmt(0xDDCCBBAAu, 0x4B000000u, 0x7541u) == 0x4B0000BBu);
}
