// tests/gemm/quant_gemm_fixtures.hpp: inputs, dequantization sets and the tolerance check shared by the 8-bit
// GEMM tests (w8a8.cu: the mma.sync kernels; gemm_sm90.cu: the Hopper kernels).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/w8a8.cuh"
#include "llmk/reference/quant_gemm.hpp"
#include "special_values.hpp"

namespace llmk::test::qgemm {

namespace gemm = llmk::gemm;
namespace special = llmk::test::special;  // special_values.hpp
using f16 = llmk::half;
using bf16 = llmk::bfloat16;
using e4m3 = llmk::float8_e4m3;

struct Shape {
  int m, n, k;
};

// Random int8 in [-128, 127] with the extremes forced into every row (overflow-free saturation checks).
inline std::vector<std::int8_t> random_int8(int rows, std::int64_t ld, int cols, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(-128, 127);
  std::vector<std::int8_t> v(static_cast<std::size_t>(rows) * ld, std::int8_t(77));  // padding: never read
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      int x = dist(rng);
      if (x == 0) x = 1;
      if (c == r % cols) x = -128;
      if (c == (r + 1) % cols) x = 127;
      v[r * ld + c] = static_cast<std::int8_t>(x);
    }
  return v;
}

inline std::vector<float> random_floats(std::size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

template <class Out>
double out_ulp_rel() {
  if constexpr (std::is_same_v<Out, f16>) return 0x1p-11;
  if constexpr (std::is_same_v<Out, bf16>) return 0x1p-8;
  return 0x1p-24;
}

// Device copies of a dequantization set and its host view.
struct Scales {
  llmk::DeviceBuffer<float> a, w, bias;
  llmk::DeviceBuffer<std::int32_t> z, sums;
  std::vector<float> h_a, h_w, h_bias;
  std::vector<std::int32_t> h_z;
  gemm::DequantScales dev;
  llmk::reference::HostDequant host;
};

inline void make_scales(Scales& s, int m, int n, bool per_token, bool per_channel, bool zero_points,
                        bool bias, std::mt19937& rng) {
  s.h_a = random_floats(per_token ? m : 1, 1e-3f, 2e-2f, rng);
  s.h_w = random_floats(per_channel ? n : 1, 1e-3f, 2e-2f, rng);
  s.h_bias = random_floats(n, -1.0f, 1.0f, rng);
  s.a = llmk::DeviceBuffer<float>(s.h_a);
  s.w = llmk::DeviceBuffer<float>(s.h_w);
  s.bias = llmk::DeviceBuffer<float>(s.h_bias);
  s.dev = {s.a.data(), per_token, nullptr, s.w.data(), per_channel, nullptr, bias ? s.bias.data() : nullptr};
  s.host = {s.h_a.data(), per_token, nullptr, s.h_w.data(), per_channel, bias ? s.h_bias.data() : nullptr};
  if (zero_points) {
    std::uniform_int_distribution<int> zd(-20, 20);
    s.h_z.resize(per_token ? m : 1);
    for (auto& z : s.h_z) z = zd(rng);
    s.z = llmk::DeviceBuffer<std::int32_t>(s.h_z);
    s.sums = llmk::DeviceBuffer<std::int32_t>(n);
    s.dev.a_zero_points = s.z.data();
    s.host.a_zero_points = s.h_z.data();
  }
}

// A dirty workspace of `bytes` (random bytes: split-K must need no initialization).
inline llmk::DeviceBuffer<unsigned char> dirty_workspace(std::size_t bytes, std::mt19937& rng) {
  std::vector<unsigned char> junk(bytes + 16);
  for (auto& b : junk) b = static_cast<unsigned char>(rng());
  return llmk::DeviceBuffer<unsigned char>(junk);
}

// q.split_k = splits and a dirty workspace of the size q's query asks (> 0: the call really splits) in
// q.workspace; the returned buffer must outlive the call.
template <class In>
llmk::DeviceBuffer<unsigned char> split_workspace(llmk::gemm::QuantGemmArgs<In>& q, int splits,
                                                  std::mt19937& rng) {
  q.split_k = splits;
  const std::size_t bytes = llmk::gemm::quant_gemm_workspace_bytes(q);
  REQUIRE(bytes > 0);
  auto ws = dirty_workspace(bytes, rng);
  q.workspace = ws.data();
  q.workspace_bytes = bytes;
  return ws;
}

// The bit patterns of 16-bit outputs (bit-for-bit comparisons).
template <class T>
std::vector<std::uint16_t> bits_of(const std::vector<T>& v) {
  std::vector<std::uint16_t> out;
  for (const T& x : v) out.push_back(x.bits);
  return out;
}

// An e4m3 operand [rows, ld] for the special-value tests: [-8, 8] over the first k columns, NaN codes (0x7F)
// past K, so a load past K would show in the outputs.
inline std::vector<e4m3> fp8_with_nan_padding(std::int64_t rows, int k, int ld, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  std::vector<e4m3> x(static_cast<std::size_t>(rows) * ld);
  for (std::size_t e = 0; e < x.size(); ++e)
    x[e] =
        e % ld < static_cast<std::size_t>(k) ? e4m3::from_float_satfinite(dist(rng)) : e4m3::from_bits(0x7F);
  return x;
}

// An fp8 GEMM problem: e4m3 operands A [M, K] and W [N, K] drawn from [-8, 8] (A first, then W), per-token x
// per-channel scales with bias, and the fp64 reference of the dequantized product ([M, N], row pitch N).
struct Fp8Problem {
  std::vector<e4m3> a, w;
  llmk::DeviceBuffer<e4m3> d_a, d_w;
  Scales sc;
  std::vector<double> ref;
};

inline void make_fp8_problem(Fp8Problem& f, const Shape& s, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  f.a.resize(static_cast<std::size_t>(s.m) * s.k);
  f.w.resize(static_cast<std::size_t>(s.n) * s.k);
  for (auto& x : f.a) x = e4m3::from_float_satfinite(dist(rng));
  for (auto& x : f.w) x = e4m3::from_float_satfinite(dist(rng));
  f.d_a = llmk::DeviceBuffer<e4m3>(f.a);
  f.d_w = llmk::DeviceBuffer<e4m3>(f.w);
  make_scales(f.sc, s.m, s.n, true, true, false, true, rng);
  f.ref.assign(static_cast<std::size_t>(s.m) * s.n, 0.0);
  llmk::reference::gemm_dequant_fp64(f.a.data(), s.k, f.w.data(), s.k, s.m, s.n, s.k, f.sc.host, f.ref.data(),
                                     s.n);
}

// fp8 products summed by the tensor cores of a GPU: Hopper's fp8 units keep fewer significand bits than fp32
// (about 14 were reported for the H800; an H100 missed the fp32 tolerance below by up to 2^-13.6 of the
// magnitudes summed), so on a GPU build an fp8 result may also differ by kFp8GpuRel times
// sum_k |a_k| |w_k| s_a s_w. The simulator adds in fp32: no allowance there.
#if defined(LLMK_SIM)
inline constexpr double kFp8GpuRel = 0.0;
#else
inline constexpr double kFp8GpuRel = 0x1p-11;
#endif

inline std::vector<e4m3> fp8_abs(const std::vector<e4m3>& v) {
  std::vector<e4m3> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = e4m3::from_bits(static_cast<std::uint8_t>(v[i].bits & 0x7F));
  return out;
}

// kFp8GpuRel * s_a s_w sum_k |a_k w_k| per output (per-tensor / per-channel / per-token scales): the
// allowance check_close adds for fp8 results of a GPU build. Empty in the simulator.
inline std::vector<double> fp8_gpu_allowance(const std::vector<e4m3>& a, std::int64_t lda,
                                             const std::vector<e4m3>& w, std::int64_t ldw, int m, int n,
                                             int k, llmk::reference::HostDequant scales) {
  if (kFp8GpuRel == 0.0) return {};
  scales.bias = nullptr;
  scales.a_zero_points = nullptr;
  std::vector<double> out(static_cast<std::size_t>(m) * n);
  const std::vector<e4m3> pa = fp8_abs(a), pw = fp8_abs(w);
  llmk::reference::gemm_dequant_fp64(pa.data(), lda, pw.data(), ldw, m, n, k, scales, out.data(), n);
  for (double& x : out) x = kFp8GpuRel * std::fabs(x);
  return out;
}

// Columns n .. ldd - 1 of each of the m rows of `got` (row pitch ldd) must still hold the poison (0xFF bytes:
// device buffers start so): a store into the padding (a TMA box or a split-K quad bounded by ldd instead of
// n) fails.
template <class Out>
void check_padding_untouched(const std::vector<Out>& got, std::int64_t ldd, int m, int n) {
  int padding_written = 0;
  for (int i = 0; i < m; ++i)
    for (std::int64_t j = n; j < ldd && static_cast<std::size_t>(i * ldd + j) < got.size(); ++j) {
      unsigned char bytes[sizeof(Out)];
      std::memcpy(bytes, &got[static_cast<std::size_t>(i * ldd + j)], sizeof(Out));
      for (unsigned char b : bytes) padding_written += b != 0xFF;
    }
  CHECK_MESSAGE(padding_written == 0, "bytes written in the padding columns n .. ldd - 1");
}

// |got - ref| <= |ref| * (output rounding + a few fp32 roundings) + atol (+ the fp8 GPU allowance, when
// given), element-wise; NaN (poison) fails. The padding columns n .. ldd - 1 must be untouched
// (check_padding_untouched).
template <class Out>
void check_close(const std::vector<Out>& got, std::int64_t ldd, const std::vector<double>& ref, int m, int n,
                 double scale_bound, const std::vector<double>& allowance = {}) {
  check_padding_untouched(got, ldd, m, n);
  int bad = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      const double r = ref[static_cast<std::size_t>(i) * n + j];
      const double g = static_cast<double>(static_cast<float>(got[i * ldd + j]));
      const double tol = std::fabs(r) * (out_ulp_rel<Out>() + 8 * 0x1p-24) + scale_bound * 0x1p-22 + 1e-6 +
                         (allowance.empty() ? 0.0 : allowance[static_cast<std::size_t>(i) * n + j]);
      if (!(std::fabs(g - r) <= tol) && bad++ < 5)
        MESSAGE("out[" << i << "][" << j << "] = " << g << ", want " << r << " (tol " << tol << ")");
    }
  CHECK(bad == 0);
}

// Special values (docs/gemm.md, "Special values": the dequantizing epilogue multiplies by the scales and adds
// the bias as given, so non-finite ones propagate). A W8A8 problem [M >= 6, N >= 13] with random int8
// operands, per-token and per-channel scales, zero points (and column sums) where asked, and a bias, planted:
//   a_scales[3] = NaN       row 3 NaN
//   w_scales[7] = NaN       column 7 NaN
//   w_scales[9] = +Inf      column 9 +-Inf, the sign of the (zero-point corrected) sum
//   bias[11] = +Inf, bias[12] = -Inf   columns 11 and 12 +Inf and -Inf
//   a_scales[5] = 1e10      row 5 is about 1e8 times the corrected sums: +-Inf in fp16 out, finite (fp32) in
//                           fp32 and bf16 out
// (none of the sums is 0 for these seeds: the reference's classes must agree with the pattern).
struct W8A8Special {
  std::vector<std::int8_t> a, w;
  llmk::DeviceBuffer<std::int8_t> d_a, d_w;
  Scales sc;
  std::vector<double> ref;  // [M, N]
  double bound = 0.0;       // check_close's scale_bound
};

inline void make_w8a8_special(W8A8Special& p, const Shape& s, bool zero_points, std::mt19937& rng) {
  REQUIRE((s.m >= 6 && s.n >= 13));
  p.a = random_int8(s.m, s.k, s.k, rng);
  p.w = random_int8(s.n, s.k, s.k, rng);
  p.d_a = llmk::DeviceBuffer<std::int8_t>(p.a);
  p.d_w = llmk::DeviceBuffer<std::int8_t>(p.w);
  make_scales(p.sc, s.m, s.n, true, true, zero_points, true, rng);
  if (zero_points) {
    REQUIRE(gemm::weight_column_sums(p.d_w.data(), s.k, s.n, s.k, p.sc.sums.data(), nullptr).ok());
    p.sc.dev.w_column_sums = p.sc.sums.data();
  }
  const float inf = std::numeric_limits<float>::infinity();
  p.sc.h_a[3] = std::numeric_limits<float>::quiet_NaN();
  p.sc.h_a[5] = 1e10f;
  p.sc.h_w[7] = std::numeric_limits<float>::quiet_NaN();
  p.sc.h_w[9] = inf;
  p.sc.h_bias[11] = inf;
  p.sc.h_bias[12] = -inf;
  p.sc.a.upload(p.sc.h_a);
  p.sc.w.upload(p.sc.h_w);
  p.sc.bias.upload(p.sc.h_bias);
  p.ref.assign(static_cast<std::size_t>(s.m) * s.n, 0.0);
  llmk::reference::gemm_dequant_fp64(p.a.data(), s.k, p.w.data(), s.k, s.m, s.n, s.k, p.sc.host, p.ref.data(),
                                     s.n);
  p.bound = 128.0 * 128.0 * s.k * 2e-2 * 2e-2;
}

// The pattern W8A8Special's plants give an Out output.
template <class Out>
special::Pattern w8a8_special_planted(const Shape& s) {
  using special::Kind;
  special::Pattern p(s.m, s.n);
  if (std::is_same_v<Out, f16>) p.row(5, Kind::kInf);
  p.col(9, Kind::kInf);
  p.col(11, Kind::kPosInf);
  p.col(12, Kind::kNegInf);
  p.col(7, Kind::kNaN);
  p.row(3, Kind::kNaN);
  return p;
}

// special::check_special with check_close's tolerance (and allowance); NaN, infinite and finite outputs must
// all occur.
template <class Out>
void check_quant_special(const std::vector<Out>& got, std::int64_t ldd, const special::Pattern& planted,
                         const std::vector<double>& ref, double scale_bound,
                         const std::vector<double>& allowance = {}) {
  using special::Kind;
  const special::Pattern want = special::check_special(got, ldd, planted, ref, [&](int i, int j) {
    const std::size_t r = static_cast<std::size_t>(i) * planted.n + j;
    return std::fabs(ref[r]) * (out_ulp_rel<Out>() + 8 * 0x1p-24) + scale_bound * 0x1p-22 + 1e-6 +
           (allowance.empty() ? 0.0 : allowance[r]);
  });
  CHECK(want.count(Kind::kNaN) > 0);
  CHECK(want.count(Kind::kPosInf) + want.count(Kind::kNegInf) > 0);
  CHECK(want.count(Kind::kFinite) > planted.m * planted.n / 2);
}

}  // namespace llmk::test::qgemm
