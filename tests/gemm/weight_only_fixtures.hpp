// Fixtures of the weight-only GEMM tests (weight_only.cu, weight_only_sm90.cu): random codes, scales and
// activations (never zeros), the repack, and check_gemm, which runs weight_only_gemm on a poisoned output
// and compares every element with the fp64 host reference under the stated error bound.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/weight_only.cuh"
#include "llmk/reference/weight_only.hpp"
#include "special_values.hpp"

namespace {

std::int64_t plain_ld(int k, int bits) {
  return bits == 4 ? k / 2 : k;
}

// Random plain codes [N, K] (row stride = plain_ld): every code value occurs.
std::vector<std::uint8_t> random_plain(int n, int k, int bits, std::mt19937& rng) {
  std::vector<std::uint8_t> w(static_cast<std::size_t>(n) * plain_ld(k, bits));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : w) b = static_cast<std::uint8_t>(byte(rng));
  return w;
}

template <class T>
std::vector<T> random_values(std::size_t count, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<T> v(count);
  for (auto& x : v) {
    float f = dist(rng);
    if (f == 0.0f) f = 0.5f * hi;  // never zeros
    x = T(f);
  }
  return v;
}

// A shuffled GPTQ group index: each group exactly G columns, in random column order.
std::vector<std::int32_t> shuffled_g_idx(int k, int group_size, std::mt19937& rng) {
  std::vector<std::int32_t> g(static_cast<std::size_t>(k));
  for (int i = 0; i < k; ++i) g[static_cast<std::size_t>(i)] = i / group_size;
  std::shuffle(g.begin(), g.end(), rng);
  return g;
}

std::vector<std::uint8_t> repack_host(const std::vector<std::uint8_t>& plain, const std::int32_t* perm, int n,
                                      int k, int bits, bool signed_codes = false) {
  std::vector<std::uint8_t> packed(llmk::gemm::weight_only_packed_bytes(n, k, bits));
  llmk::gemm::WeightRepackArgs r{plain.data(), plain_ld(k, bits), perm, packed.data(), n, k,
                                 bits,         signed_codes};
  const llmk::Status s = llmk::gemm::weight_only_repack_host(r);
  REQUIRE_MESSAGE(s.ok(), s.message());
  return packed;
}

struct Case {
  int m, n, k, group_size, bits;
  bool zeros, act_order, bias;
  std::int64_t ldd_pad = 0;
  int split_k = 0;          // WeightOnlyArgs::split_k
  int want_tile = -1;       // >= 0: the plan must pick this kernel (detail::WoPlan::tile; 3: Hopper)
  int want_token_tile = 0;  // > 0: with tile 3, this token tile
  llmk::gemm::WeightOnlyKernel kernel = llmk::gemm::WeightOnlyKernel::kAuto;
};

// Unit roundoff of T (the output rounding) and an absolute floor for T's subnormal outputs.
template <class T>
constexpr double kUnitRoundoff = std::is_same_v<T, llmk::half> ? 0x1p-11 : 0x1p-8;
template <class T>
constexpr double kAbsFloor = std::is_same_v<T, llmk::half> ? 0x1p-24 : 0x1p-120;

// Error bound. The weights the mma sees equal the reference's dequantized weights exactly and every product
// a * w is exact in fp32, so the error is (1) fp32 accumulation: one rounding per mma (16 products + C) over
// K / 16 mmas, plus the partial-sum additions of the K-split warps (at most 3), of the split-K splits (at
// most 15) and the bias add: at most (K / 16 + 22) roundings of a running |sum| <= S = sum_k |a w| + |bias|,
// i.e. (K / 16 + 22) 2^-24 S, doubled for the hardware's unspecified internal accumulation; (2) the final
// rounding to T: u_T |v| with |v| <= |ref| + (1). So
// |got - ref| <= u_T |ref| + (1 + u_T) 2 (K / 16 + 22) 2^-24 S + floor_T.
template <class T>
double tolerance(double ref, double abs_sum, int k) {
  const double acc = 2.0 * (k / 16 + 22) * std::ldexp(abs_sum, -24);
  return kUnitRoundoff<T> * std::fabs(ref) + (1.0 + kUnitRoundoff<T>)*acc + kAbsFloor<T>;
}

template <class T>
void check_gemm(const Case& c, std::mt19937& rng) {
  CAPTURE(c.m);
  CAPTURE(c.n);
  CAPTURE(c.k);
  CAPTURE(c.group_size);
  CAPTURE(c.bits);
  CAPTURE(c.zeros);
  CAPTURE(c.act_order);
  CAPTURE(c.bias);
  const int groups = c.k / c.group_size;
  const std::int64_t ldd = c.n + c.ldd_pad;
  std::vector<T> a = random_values<T>(static_cast<std::size_t>(c.m) * c.k, -1.0f, 1.0f, rng);
  std::vector<std::uint8_t> plain = random_plain(c.n, c.k, c.bits, rng);
  const float s_hi = c.bits == 4 ? 0.02f : 0.002f;
  std::vector<T> scales = random_values<T>(static_cast<std::size_t>(groups) * c.n, 0.25f * s_hi, s_hi, rng);
  std::vector<std::uint8_t> zeros(static_cast<std::size_t>(groups) * c.n);
  std::uniform_int_distribution<int> zdist(0, c.bits == 4 ? 15 : 255);
  for (auto& z : zeros) z = static_cast<std::uint8_t>(zdist(rng));
  std::vector<T> bias = random_values<T>(static_cast<std::size_t>(c.n), -1.0f, 1.0f, rng);
  std::vector<std::int32_t> g_idx, perm;
  if (c.act_order) {
    g_idx = shuffled_g_idx(c.k, c.group_size, rng);
    perm.resize(static_cast<std::size_t>(c.k));
    const llmk::Status s =
        llmk::gemm::act_order_permutation_host(g_idx.data(), c.k, c.group_size, perm.data());
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  std::vector<std::uint8_t> packed =
      repack_host(plain, c.act_order ? perm.data() : nullptr, c.n, c.k, c.bits);

  llmk::DeviceBuffer<T> d_a(a), d_scales(scales), d_bias(bias);
  llmk::DeviceBuffer<std::uint8_t> d_w(packed), d_zeros(zeros);
  llmk::DeviceBuffer<std::int32_t> d_perm(c.act_order ? perm : std::vector<std::int32_t>{0});
  llmk::DeviceBuffer<T> d_d(static_cast<std::size_t>(c.m) * ldd);  // poisoned

  llmk::gemm::WeightOnlyArgs<T> x;
  x.a = d_a.data();
  x.lda = c.k;
  x.w = d_w.data();
  x.w_bytes = static_cast<std::int64_t>(packed.size());
  x.scales = d_scales.data();
  x.scales_size = static_cast<std::int64_t>(scales.size());
  if (c.zeros) {
    x.zeros = d_zeros.data();
    x.zeros_size = static_cast<std::int64_t>(zeros.size());
  }
  if (c.act_order) {
    x.perm = d_perm.data();
    x.perm_size = c.k;
  }
  if (c.bias) x.bias = d_bias.data();
  x.d = d_d.data();
  x.ldd = ldd;
  x.m = c.m;
  x.n = c.n;
  x.k = c.k;
  x.group_size = c.group_size;
  x.bits = c.bits;
  x.split_k = c.split_k;
  x.kernel = c.kernel;
  if (c.want_tile >= 0) {
    const llmk::gemm::detail::WoPlan plan = llmk::gemm::detail::wo_plan(x, llmk::device_sm_count());
    REQUIRE(plan.tile == c.want_tile);
    if (c.want_token_tile > 0) CHECK(plan.token_tile == c.want_token_tile);
  }
  const std::size_t ws_bytes = llmk::gemm::weight_only_workspace_bytes(x);
  CHECK(ws_bytes >= (c.act_order ? static_cast<std::size_t>(c.m) * c.k * sizeof(T) : 0));
  if (c.split_k == 1 && !c.act_order) CHECK(ws_bytes == 0);
  llmk::DeviceBuffer<unsigned char> ws(std::max<std::size_t>(ws_bytes, 16));  // poisoned: no initialization
  const llmk::Status s = llmk::gemm::weight_only_gemm(x, ws.data(), ws_bytes, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(llmk::device_synchronize().ok());
  std::vector<T> got = d_d.to_host();

  std::vector<double> want(static_cast<std::size_t>(c.m) * c.n), mag(want.size());
  llmk::reference::weight_only_gemm(a.data(), c.k, plain.data(), plain_ld(c.k, c.bits), c.bits, scales.data(),
                                    c.zeros ? zeros.data() : nullptr, c.act_order ? g_idx.data() : nullptr,
                                    c.group_size, c.bias ? bias.data() : nullptr, c.m, c.n, c.k, want.data(),
                                    mag.data());
  int bad = 0;
  for (int i = 0; i < c.m; ++i) {
    for (int j = 0; j < c.n; ++j) {
      const std::size_t r = static_cast<std::size_t>(i) * c.n + j;
      const double g = static_cast<float>(got[static_cast<std::size_t>(i) * ldd + j]);
      const double tol = tolerance<T>(want[r], mag[r], c.k);
      if (!(std::fabs(g - want[r]) <= tol)) {  // NaN (poison) fails too
        if (bad++ < 5)
          MESSAGE("D[" << i << "][" << j << "] = " << g << ", want " << want[r] << " (tol " << tol << ")");
      }
    }
    for (std::int64_t j = c.n; j < ldd; ++j)  // padding columns stay poisoned
      if (got[static_cast<std::size_t>(i * ldd + j)].bits != 0xFFFF && bad++ < 5)
        MESSAGE("padding D[" << i << "][" << j << "] was written");
  }
  CHECK(bad == 0);
}

// Special values (docs/gemm.md, "Special values": the weights are dequantized in the activation type, so
// s (u - z) past 65504 is +-Inf in fp16, as in the reference's dequantization; NaN activations make their
// output rows NaN; IEEE arithmetic otherwise). fp16, 4-bit codes, G = 64, no zero points (z = 8), a bias;
// M >= 5, N >= 21, K >= 256; planted:
//   A[3, 5] = NaN                          row 3 NaN
//   column 7, group 1: scale 30000, codes 8 (weight 0) but 15 at k = 70 (7 * 30000 = 210000: +Inf):
//                                          column 7 +-Inf by the sign of A[i, 70]
//   A[1, 70] = 0                           D[1, 7] = 0 * Inf = NaN
//   column 9, group 3: scale 30000, codes 8 but 0 at k = 200 (-8 * 30000: -Inf):
//                                          column 9 +-Inf by the sign of A[i, 200]
//   bias[12] = -Inf                        column 12 -Inf
//   column 20, group 0: scale 8000, codes 15 at k < 16 (56000 each, finite), 8 at k = 16..63;
//   A[4, k < 16] = 1, other rows' A[i, k < 16] scaled by 2^-10:
//                                          D[4, 20] = 16 * 56000 + ... = +Inf (the output overflows), the
//                                          rest of column 20 finite
// Every output classified (special_values.hpp); D's padding (ldd > N) stays poisoned. want_tile >= 0: the
// plan must pick that kernel (tile 3: Hopper); the plan must split `split_k` ways.
template <class T>
void check_special_values(int m, int n, int k, int split_k, std::int64_t ldd, int want_tile,
                          std::mt19937& rng) {
  namespace sp = llmk::test::special;
  static_assert(std::is_same_v<T, llmk::half>, "the overflows planted are fp16's");
  CAPTURE(m);
  CAPTURE(split_k);
  REQUIRE((m >= 5 && n >= 21 && k >= 256 && k % 64 == 0));
  const int g = 64, groups = k / g;
  std::vector<T> a = random_values<T>(static_cast<std::size_t>(m) * k, -1.0f, 1.0f, rng);
  std::vector<std::uint8_t> plain = random_plain(n, k, 4, rng);
  std::vector<T> scales = random_values<T>(static_cast<std::size_t>(groups) * n, 0.005f, 0.02f, rng);
  std::vector<T> bias = random_values<T>(static_cast<std::size_t>(n), -1.0f, 1.0f, rng);
  auto code = [&](int col, int kk, int u) {
    std::uint8_t& byte = plain[static_cast<std::size_t>(col) * (k / 2) + kk / 2];
    byte = static_cast<std::uint8_t>(kk % 2 == 0 ? (byte & 0xF0) | u : (byte & 0x0F) | (u << 4));
  };
  auto scale = [&](int group, int col) -> T& { return scales[static_cast<std::size_t>(group) * n + col]; };
  a[static_cast<std::size_t>(3) * k + 5] = T(std::numeric_limits<float>::quiet_NaN());
  scale(1, 7) = T(30000.0f);
  for (int kk = 64; kk < 128; ++kk) code(7, kk, kk == 70 ? 15 : 8);
  a[static_cast<std::size_t>(1) * k + 70] = T(0.0f);
  scale(3, 9) = T(30000.0f);
  for (int kk = 192; kk < 256; ++kk) code(9, kk, kk == 200 ? 0 : 8);
  bias[12] = T(-std::numeric_limits<float>::infinity());
  scale(0, 20) = T(8000.0f);
  for (int kk = 0; kk < 64; ++kk) code(20, kk, kk < 16 ? 15 : 8);
  for (int i = 0; i < m; ++i)
    for (int kk = 0; kk < 16; ++kk) {
      T& x = a[static_cast<std::size_t>(i) * k + kk];
      x = i == 4 ? T(1.0f) : T(std::ldexp(static_cast<float>(x), -10));
    }
  sp::Pattern planted(m, n);
  planted.at(4, 20) = sp::Kind::kPosInf;
  planted.col(7, sp::Kind::kInf);
  planted.col(9, sp::Kind::kInf);
  planted.col(12, sp::Kind::kNegInf);
  planted.at(1, 7) = sp::Kind::kNaN;
  planted.row(3, sp::Kind::kNaN);

  std::vector<std::uint8_t> packed = repack_host(plain, nullptr, n, k, 4);
  llmk::DeviceBuffer<T> d_a(a), d_scales(scales), d_bias(bias);
  llmk::DeviceBuffer<std::uint8_t> d_w(packed);
  llmk::DeviceBuffer<T> d_d(static_cast<std::size_t>(m) * ldd);
  llmk::gemm::WeightOnlyArgs<T> x;
  x.a = d_a.data();
  x.lda = k;
  x.w = d_w.data();
  x.w_bytes = static_cast<std::int64_t>(packed.size());
  x.scales = d_scales.data();
  x.scales_size = static_cast<std::int64_t>(scales.size());
  x.bias = d_bias.data();
  x.d = d_d.data();
  x.ldd = ldd;
  x.m = m;
  x.n = n;
  x.k = k;
  x.group_size = g;
  x.bits = 4;
  x.split_k = split_k;
  const llmk::gemm::detail::WoPlan plan = llmk::gemm::detail::wo_plan(x, llmk::device_sm_count());
  if (want_tile >= 0) REQUIRE(plan.tile == want_tile);
  CHECK(plan.splits == split_k);
  const std::size_t ws_bytes = llmk::gemm::weight_only_workspace_bytes(x);
  llmk::DeviceBuffer<unsigned char> ws(std::max<std::size_t>(ws_bytes, 16));  // poisoned: no initialization
  d_d.poison();
  const llmk::Status s = llmk::gemm::weight_only_gemm(x, ws.data(), ws_bytes, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(llmk::device_synchronize().ok());
  std::vector<double> want(static_cast<std::size_t>(m) * n), mag(want.size());
  llmk::reference::weight_only_gemm(a.data(), k, plain.data(), k / 2, 4, scales.data(), nullptr, nullptr, g,
                                    bias.data(), m, n, k, want.data(), mag.data());
  const sp::Pattern exact = sp::check_special(d_d.to_host(), ldd, planted, want, [&](int i, int j) {
    const std::size_t r = static_cast<std::size_t>(i) * n + j;
    return tolerance<T>(want[r], mag[r], k);
  });
  CHECK(exact.count(sp::Kind::kNaN) == n + 1);
  CHECK(exact.count(sp::Kind::kFinite) > m * n / 2);
}

}  // namespace
