// Tests of the Hopper GEMM (llmk/gemm/hopper_gemm.cuh): W8A8 (raw int32 exact; dequantized), fp8 and
// fp16/bf16 against the same references as the mma.sync kernels, over shapes with M, N and K tails, several
// tiles per block (the persistent loop) and more k-tiles than ring slots; a narrow-tile / two-slot
// configuration; block-wise fp8 scales; the TMA-store epilogue (16-byte output rows) and plain stores (other
// rows); the dispatch of w8a8_gemm and fp8_gemm on either simulated architecture (LLMK_SIM_ARCH); the
// refusal on a device without sm_90a; gemm_f16's choice of kernel by architecture; fp16 split-K; split-K over
// a workspace (the plan's counts, W8A8 bit for bit the unsplit result, fp8 within bound and deterministic,
// .satfinite unsplit: exact sums, and the clamp where int32 accumulation would wrap).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/gemm_f16.cuh"
#include "llmk/gemm/hopper_gemm.cuh"
#include "llmk/gemm/w8a8.cuh"
#include "llmk/reference/gemm.hpp"
#include "llmk/reference/quant_gemm.hpp"
#include "quant_gemm_fixtures.hpp"
#include "support/test_env.hpp"

namespace {

using namespace llmk::test::qgemm;

// M, N, K tails against the 128 x 128 x BK tile; the larger shape gives each simulated block several tiles.
std::vector<Shape> shapes() {
  if (llmk::test::fast()) return {{70, 40, 160}, {130, 136, 48}};
  return {{200, 136, 272}, {70, 264, 128}, {129, 40, 400}};
}

// LLMK_SIM_SM_COUNT: the SMs the persistent grid is sized to, 2 so that every block walks several tiles.
using llmk::test::ScopedEnv;

bool sm90_here() {
  static ScopedEnv two_sms("LLMK_SIM_SM_COUNT", "2");  // for the whole run of this test program
  return gemm::detail::device_arch() == 900 &&
         gemm::sm90_detail::sm90_available<gemm::Sm90GemmConfig<std::int8_t>>();
}

// The elements of D's padding columns (n..ldd-1 of each of the m rows) that are no longer the poison (0xFF
// bytes): a TMA store box or a split-K quad store bounded by ldd instead of n writes them. For the outputs
// not checked by check_close (which checks its padding itself): raw int32 and check_f16.
template <class Out>
int padding_written(const std::vector<Out>& got, std::int64_t ldd, int m, int n) {
  Out poison;
  std::memset(static_cast<void*>(&poison), 0xFF, sizeof(Out));
  int written = 0;
  for (int i = 0; i < m; ++i)
    for (std::int64_t j = n; j < ldd; ++j)
      if (std::memcmp(&got[static_cast<std::size_t>(i * ldd + j)], &poison, sizeof(Out)) != 0 &&
          written++ < 5)
        MESSAGE("padding d[" << i << "][" << j << "] was written");
  return written;
}

}  // namespace

// w8a8_gemm_sm90<int32> with configuration Cfg against the exact reference (lda and ldd padded: ldd = N +
// pad).
template <class Cfg>
void check_raw_int32(const Shape& s, std::int64_t pad, std::mt19937& rng) {
  CAPTURE(s.m);
  CAPTURE(s.n);
  CAPTURE(s.k);
  const std::int64_t lda = s.k + 16, ldd = s.n + pad;
  const auto a = random_int8(s.m, lda, s.k, rng), w = random_int8(s.n, s.k, s.k, rng);
  llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
  llmk::DeviceBuffer<std::int32_t> d(static_cast<std::size_t>(s.m) * ldd);
  gemm::QuantGemmArgs<std::int8_t> p{d_a.data(), lda, d_w.data(), s.k, s.m, s.n, s.k, {}, d.data(), ldd};
  const llmk::Status st = gemm::w8a8_gemm_sm90<std::int32_t, Cfg>(p, nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::vector<std::int32_t> want(static_cast<std::size_t>(s.m) * ldd, 0);
  llmk::reference::gemm_s8s8_s32(a.data(), lda, w.data(), s.k, s.m, s.n, s.k, want.data(), ldd, false);
  const std::vector<std::int32_t> got = d.to_host();
  int bad = 0;
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) bad += got[i * ldd + j] != want[i * ldd + j] ? 1 : 0;
  CHECK(bad == 0);
  CHECK(padding_written(got, ldd, s.m, s.n) == 0);
}

TEST_CASE("sm90 W8A8: raw int32 accumulators are exact (M, N, K tails, several tiles per block)") {
  if (!sm90_here()) return;
  std::mt19937 rng(901);
  for (const Shape& s : shapes()) check_raw_int32<gemm::Sm90GemmConfig<std::int8_t>>(s, 3, rng);
}

TEST_CASE(
    "sm90 W8A8: one row takes any lda and ldd (the TMA maps' unused strides; no 'desc.strides' error)") {
  if (!sm90_here()) return;
  std::mt19937 rng(905);
  const int n = 72, k = 96;
  const auto a = random_int8(1, k, k, rng), w = random_int8(n, k, k, rng);
  llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
  llmk::DeviceBuffer<std::int32_t> d(n);
  std::vector<std::int32_t> want(n, 0);
  llmk::reference::gemm_s8s8_s32(a.data(), k, w.data(), k, 1, n, k, want.data(), n, false);
  const std::int64_t huge = (std::int64_t{1} << 41) + 16;  // 2^41 bytes of int8 / 2^43 of int32: past 2^40
  gemm::QuantGemmArgs<std::int8_t> p{d_a.data(), huge, d_w.data(), k, 1, n, k, {}, d.data(), huge};
  const llmk::Status st = gemm::w8a8_gemm_sm90<std::int32_t, gemm::Sm90GemmConfig<std::int8_t>>(p, nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(d.to_host() == want);
}

TEST_CASE("sm90 W8A8: dequantized outputs (zero points, per token/channel, bias)") {
  if (!sm90_here()) return;
  std::mt19937 rng(902);
  int which = 0;
  for (const Shape& s : shapes()) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    const bool zp = which % 2 == 0;
    const auto a = random_int8(s.m, s.k, s.k, rng), w = random_int8(s.n, s.k, s.k, rng);
    llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
    Scales sc;
    make_scales(sc, s.m, s.n, true, which % 3 != 1, zp, true, rng);
    if (zp) {
      REQUIRE(gemm::weight_column_sums(d_w.data(), s.k, s.n, s.k, sc.sums.data(), nullptr).ok());
      sc.dev.w_column_sums = sc.sums.data();
    }
    ++which;
    std::vector<double> ref(static_cast<std::size_t>(s.m) * s.n);
    llmk::reference::gemm_dequant_fp64(a.data(), s.k, w.data(), s.k, s.m, s.n, s.k, sc.host, ref.data(), s.n);
    const double bound = 128.0 * 128.0 * s.k * 2e-2 * 2e-2;
    llmk::DeviceBuffer<bf16> d(static_cast<std::size_t>(s.m) * s.n);
    gemm::QuantGemmArgs<std::int8_t> p{d_a.data(), s.k, d_w.data(), s.k,      s.m,
                                       s.n,        s.k, sc.dev,     d.data(), s.n};
    const llmk::Status st = gemm::w8a8_gemm_sm90<bf16>(p, nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    check_close(d.to_host(), s.n, ref, s.m, s.n, bound);
  }
}

TEST_CASE("sm90 FP8: e4m3 x e4m3, per-tensor and per-channel scales, bias; 128 x 128 and 128 x 256 tiles") {
  if (!sm90_here()) return;
  std::mt19937 rng(903);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  int which = 0;
  for (const Shape& s : shapes()) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    std::vector<e4m3> a(static_cast<std::size_t>(s.m) * s.k), w(static_cast<std::size_t>(s.n) * s.k);
    for (auto& x : a) x = e4m3::from_float_satfinite(dist(rng));
    for (auto& x : w) x = e4m3::from_float_satfinite(dist(rng));
    llmk::DeviceBuffer<e4m3> d_a(a), d_w(w);
    Scales sc;
    make_scales(sc, s.m, s.n, false, which % 2 == 0, false, which % 2 == 1, rng);
    std::vector<double> ref(static_cast<std::size_t>(s.m) * s.n);
    llmk::reference::gemm_dequant_fp64(a.data(), s.k, w.data(), s.k, s.m, s.n, s.k, sc.host, ref.data(), s.n);
    const double bound = 64.0 * s.k * 2e-2 * 2e-2 * (s.k / 32 + 2);
    const std::vector<double> gpu = fp8_gpu_allowance(a, s.k, w, s.k, s.m, s.n, s.k, sc.host);
    gemm::QuantGemmArgs<e4m3> p{d_a.data(), s.k, d_w.data(), s.k, s.m, s.n, s.k, sc.dev, nullptr, s.n};
    if (which++ % 2 == 0) {
      llmk::DeviceBuffer<float> d(static_cast<std::size_t>(s.m) * s.n);
      p.d = d.data();
      const llmk::Status st = gemm::fp8_gemm_sm90<float>(p, nullptr);
      REQUIRE_MESSAGE(st.ok(), st.message());
      check_close(d.to_host(), s.n, ref, s.m, s.n, bound, gpu);
    } else {
      llmk::DeviceBuffer<f16> d(static_cast<std::size_t>(s.m) * s.n);
      p.d = d.data();
      // 128 x 256 tiles: the promoted k-tile sums run in two 128-column slices.
      const llmk::Status st = gemm::fp8_gemm_sm90<f16, gemm::Sm90GemmConfig<e4m3, 256>>(p, nullptr);
      REQUIRE_MESSAGE(st.ok(), st.message());
      check_close(d.to_host(), s.n, ref, s.m, s.n, bound, gpu);
    }
  }
}

// FastAccum: one QGMMA chain over all of K (no promotion). Exact fp32 sums in the simulator; on a GPU the
// fp8 allowance, which fast accumulation may exceed at large K: a K of 272 keeps it inside (H100, first run).
TEST_CASE("sm90 FP8 with fast accumulation (Sm90GemmConfig FastAccum)") {
  if (!sm90_here()) return;
  const Shape s{70, 136, 272};
  std::mt19937 rng(913);
  Fp8Problem f;
  make_fp8_problem(f, s, rng);
  llmk::DeviceBuffer<float> d(static_cast<std::size_t>(s.m) * s.n);
  gemm::QuantGemmArgs<e4m3> p{f.d_a.data(), s.k, f.d_w.data(), s.k, s.m, s.n, s.k, f.sc.dev, d.data(), s.n};
  using Fast = gemm::Sm90GemmConfig<e4m3, 128, 4, false, /*FastAccum=*/true>;
  static_assert(!Fast::kPromote && gemm::Sm90GemmConfig<e4m3>::kPromote);
  const llmk::Status st = gemm::fp8_gemm_sm90<float, Fast>(p, nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const double bound = 64.0 * s.k * 2e-2 * 2e-2 * (s.k / 32 + 2);
  const std::vector<double> gpu = fp8_gpu_allowance(f.a, s.k, f.w, s.k, s.m, s.n, s.k, f.sc.host);
  check_close(d.to_host(), s.n, f.ref, s.m, s.n, bound, gpu);
  // Split K over a dirty workspace (3 k-tiles of 128: one a split): each split one fast chain over its
  // k-tiles, the partials summed in split order; within the same bound, the same bits on a second call.
  static_assert(Fast::kCanSplitK);
  const auto plan = gemm::sm90_detail::sm90_split_plan<Fast>(s.m, s.n, s.k, 3, 2);
  REQUIRE(plan.splits == 3);
  auto ws = dirty_workspace(plan.workspace_bytes(), rng);
  p.workspace = ws.data();
  p.workspace_bytes = ws.size();
  p.split_k = 3;
  llmk::DeviceBuffer<float> d1(d.size()), d2(d.size());
  p.d = d1.data();
  REQUIRE(gemm::fp8_gemm_sm90<float, Fast>(p, nullptr).ok());
  p.d = d2.data();
  REQUIRE(gemm::fp8_gemm_sm90<float, Fast>(p, nullptr).ok());
  const auto r1 = d1.to_host(), r2 = d2.to_host();
  check_close(r1, s.n, f.ref, s.m, s.n, bound, gpu);
  CHECK(std::memcmp(r1.data(), r2.data(), r1.size() * sizeof(float)) == 0);
}

// Block-wise fp8: random e4m3 operands, one scale per token and K block (token-contiguous rows padded to
// ld_a_scales = M + 5), one per 128 x 128 weight block; the output through the TMA-store epilogue (16-byte
// rows) or plain stores (odd ldd).
template <class Out>
void check_blockwise(const Shape& s, bool bias, std::int64_t ldd, unsigned seed) {
  CAPTURE(s.m);
  CAPTURE(s.n);
  CAPTURE(s.k);
  CAPTURE(ldd);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  std::vector<e4m3> a(static_cast<std::size_t>(s.m) * s.k), w(static_cast<std::size_t>(s.n) * s.k);
  for (auto& x : a) x = e4m3::from_float_satfinite(dist(rng));
  for (auto& x : w) x = e4m3::from_float_satfinite(dist(rng));
  const int k_blocks = (s.k + 127) / 128, n_blocks = (s.n + 127) / 128;
  const std::int64_t ld_sa = s.m + 5;
  const std::vector<float> sa = random_floats(static_cast<std::size_t>(k_blocks) * ld_sa, 1e-3f, 2e-2f, rng);
  const std::vector<float> sw =
      random_floats(static_cast<std::size_t>(n_blocks) * k_blocks, 1e-3f, 2e-2f, rng);
  const std::vector<float> b = random_floats(static_cast<std::size_t>(s.n), -1.0f, 1.0f, rng);
  llmk::DeviceBuffer<e4m3> d_a(a), d_w(w);
  llmk::DeviceBuffer<float> d_sa(sa), d_sw(sw), d_b(b);
  llmk::DeviceBuffer<Out> d(static_cast<std::size_t>(s.m) * ldd);
  gemm::Fp8BlockGemmArgs p{
      d_a.data(), s.k, d_w.data(), s.k,
      s.m,        s.n, s.k,        {d_sa.data(), ld_sa, d_sw.data(), bias ? d_b.data() : nullptr},
      d.data(),   ldd};
  const llmk::Status st = gemm::fp8_gemm_blockwise<Out>(p, nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::vector<double> ref(static_cast<std::size_t>(s.m) * s.n);
  llmk::reference::gemm_fp8_blockwise_fp64(a.data(), s.k, w.data(), s.k, s.m, s.n, s.k, sa.data(), ld_sa,
                                           sw.data(), bias ? b.data() : nullptr, ref.data(), s.n);
  std::vector<double> gpu;  // the fp8 GPU allowance (quant_gemm_fixtures.hpp), from the same block scales
  if (kFp8GpuRel != 0.0) {
    gpu.resize(ref.size());
    const std::vector<e4m3> pa = fp8_abs(a), pw = fp8_abs(w);
    llmk::reference::gemm_fp8_blockwise_fp64(pa.data(), s.k, pw.data(), s.k, s.m, s.n, s.k, sa.data(), ld_sa,
                                             sw.data(), nullptr, gpu.data(), s.n);
    for (double& x : gpu) x *= kFp8GpuRel;
  }
  check_close(d.to_host(), ldd, ref, s.m, s.n, 64.0 * s.k * 2e-2 * 2e-2 * (s.k / 32 + 2), gpu);
}

TEST_CASE(
    "sm90 FP8 block-wise scales (1 x 128 activations, 128 x 128 weights): TMA-store and plain epilogues") {
  if (!sm90_here()) return;
  const std::vector<Shape> sh = shapes();
  check_blockwise<bf16>(sh[0], true, sh[0].n, 910);
  check_blockwise<float>(sh[1], false, sh[1].n + 1, 911);
  if (!llmk::test::fast()) check_blockwise<f16>(sh[2], true, sh[2].n + 1, 912);
}

// Special values of the block-wise fp8 GEMM (docs/gemm.md: fp8 NaN codes propagate like fp16 NaNs; the block
// scales and the bias are device data, not checked): random e4m3 [70, 136, 160] (two 128-column weight
// blocks, two K blocks; NaN codes in the operands' padding past K, lda = ldw = K + 16), fp16 out through the
// TMA store (ldd = N + 8: the padding stays poisoned), planted:
//   A[3, 5] = 0x7F, W[7, 140] = 0xFF       row 3, column 7 NaN (the two NaN codes; K blocks 0 and 1)
//   a_scales[kb 1, row 11] = NaN            row 11 NaN
//   w_scales[column block 1, kb 0] = NaN    columns 128..135 NaN
//   a_scales[kb, rows M..ld_a_scales-1]     NaN, reaching no output (past M; a scale box reads them)
//   bias[20] = -Inf                         column 20 -Inf
//   a_scales[kb 0, row 15] = 1e9            row 15 +-Inf (past fp16's range)
TEST_CASE("sm90 FP8 block-wise special values: NaN codes and scales by block, -Inf bias, fp16 overflow") {
  if (!sm90_here()) return;
  using special::Kind;
  const Shape s{70, 136, 160};
  const int ld = s.k + 16;
  std::mt19937 rng(951);
  std::vector<e4m3> a = fp8_with_nan_padding(s.m, s.k, ld, rng);
  std::vector<e4m3> w = fp8_with_nan_padding(s.n, s.k, ld, rng);
  a[3 * ld + 5] = e4m3::from_bits(0x7F);
  w[7 * ld + 140] = e4m3::from_bits(0xFF);
  const int k_blocks = 2, n_blocks = 2;
  const std::int64_t ld_sa = s.m + 5;
  std::vector<float> sa = random_floats(static_cast<std::size_t>(k_blocks) * ld_sa, 1e-3f, 2e-2f, rng);
  std::vector<float> sw = random_floats(static_cast<std::size_t>(n_blocks) * k_blocks, 1e-3f, 2e-2f, rng);
  std::vector<float> b = random_floats(static_cast<std::size_t>(s.n), -1.0f, 1.0f, rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int kb = 0; kb < k_blocks; ++kb)
    for (std::int64_t i = s.m; i < ld_sa; ++i) sa[static_cast<std::size_t>(kb * ld_sa + i)] = nan;
  sa[static_cast<std::size_t>(1 * ld_sa + 11)] = nan;
  sa[15] = 1e9f;
  sw[1 * k_blocks + 0] = nan;
  b[20] = -std::numeric_limits<float>::infinity();
  llmk::DeviceBuffer<e4m3> d_a(a), d_w(w);
  llmk::DeviceBuffer<float> d_sa(sa), d_sw(sw), d_b(b);
  const std::int64_t ldd = s.n + 8;
  llmk::DeviceBuffer<f16> d(static_cast<std::size_t>(s.m) * ldd);
  gemm::Fp8BlockGemmArgs p{d_a.data(), ld,  d_w.data(), ld,
                           s.m,        s.n, s.k,        {d_sa.data(), ld_sa, d_sw.data(), d_b.data()},
                           d.data(),   ldd};
  d.poison();
  const llmk::Status st = gemm::fp8_gemm_blockwise<f16>(p, nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::vector<double> ref(static_cast<std::size_t>(s.m) * s.n);
  llmk::reference::gemm_fp8_blockwise_fp64(a.data(), ld, w.data(), ld, s.m, s.n, s.k, sa.data(), ld_sa,
                                           sw.data(), b.data(), ref.data(), s.n);
  std::vector<double> gpu;  // the fp8 GPU allowance (check_blockwise); none in the simulator
  if (kFp8GpuRel != 0.0) {
    gpu.resize(ref.size());
    const std::vector<e4m3> pa = fp8_abs(a), pw = fp8_abs(w);
    llmk::reference::gemm_fp8_blockwise_fp64(pa.data(), ld, pw.data(), ld, s.m, s.n, s.k, sa.data(), ld_sa,
                                             sw.data(), nullptr, gpu.data(), s.n);
    for (double& x : gpu) x *= kFp8GpuRel;
  }
  special::Pattern planted(s.m, s.n);
  planted.row(15, Kind::kInf);
  planted.col(20, Kind::kNegInf);
  planted.col(7, Kind::kNaN);
  for (int j = 128; j < s.n; ++j) planted.col(j, Kind::kNaN);
  planted.row(3, Kind::kNaN);
  planted.row(11, Kind::kNaN);
  check_quant_special(d.to_host(), ldd, planted, ref, 64.0 * s.k * 2e-2 * 2e-2 * (s.k / 32 + 2), gpu);
}

// Special values of the Hopper W8A8 epilogue (QuantEpilogue: the row and column factors loaded once, the TMA
// store) and of its split-K reduction: W8A8Special (quant_gemm_fixtures.hpp: NaN and +Inf scales, +-Inf bias)
// [70, 72, 256] with zero points, bf16 out (row 5's huge scale stays finite), unsplit with ldd = N + 8 and
// split in two over a dirty workspace with ldd = N + 3 (element stores).
TEST_CASE("sm90 W8A8 special values: NaN / Inf scales and bias propagate, unsplit and split-K") {
  if (!sm90_here()) return;
  std::mt19937 rng(952);
  const Shape s{70, 72, 256};  // one 128 x 128 tile, 2 k-tiles
  W8A8Special p;
  make_w8a8_special(p, s, true, rng);
  const special::Pattern planted = w8a8_special_planted<bf16>(s);
  for (const std::int64_t ldd : {static_cast<std::int64_t>(s.n) + 8, static_cast<std::int64_t>(s.n) + 3}) {
    CAPTURE(ldd);
    llmk::DeviceBuffer<bf16> d(static_cast<std::size_t>(s.m) * ldd);
    gemm::QuantGemmArgs<std::int8_t> q{p.d_a.data(), s.k, p.d_w.data(), s.k,      s.m,
                                       s.n,          s.k, p.sc.dev,     d.data(), ldd};
    llmk::DeviceBuffer<unsigned char> ws;
    if (ldd % 2 == 1) {
      q.split_k = 2;
      const std::size_t bytes = gemm::quant_gemm_workspace_bytes<gemm::Sm90GemmConfig<std::int8_t>>(q);
      REQUIRE(bytes > 0);
      ws = dirty_workspace(bytes, rng);
      q.workspace = ws.data();
      q.workspace_bytes = bytes;
    }
    d.poison();
    const llmk::Status st = gemm::w8a8_gemm_sm90<bf16>(q, nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    check_quant_special(d.to_host(), ldd, planted, p.ref, p.bound);
  }
}

TEST_CASE("fp8_gemm_blockwise validates its scales") {
  if (!sm90_here()) return;
  const Shape s{70, 40, 160};
  llmk::DeviceBuffer<e4m3> d_a(static_cast<std::size_t>(s.m) * s.k), d_w(static_cast<std::size_t>(s.n) * s.k);
  llmk::DeviceBuffer<float> d_sa(2 * 80), d_sw(4), d_out(static_cast<std::size_t>(s.m) * s.n);
  auto args = [&] {
    return gemm::Fp8BlockGemmArgs{d_a.data(),   s.k, d_w.data(), s.k,
                                  s.m,          s.n, s.k,        {d_sa.data(), 80, d_sw.data(), nullptr},
                                  d_out.data(), s.n};
  };
  auto names = [](const gemm::Fp8BlockGemmArgs& p, const char* arg) {
    const llmk::Status st = gemm::fp8_gemm_blockwise<float>(p, nullptr);
    CHECK(!st.ok());
    CHECK_MESSAGE(st.message().find(arg) != std::string::npos, st.message());
  };
  gemm::Fp8BlockGemmArgs p = args();
  p.scales.a_scales = nullptr;
  names(p, "scales.a_scales");
  p = args();
  p.scales.w_scales = d_sw.data() + 1;
  names(p, "scales.w_scales");
  p = args();
  p.scales.ld_a_scales = s.m - 1;
  names(p, "scales.ld_a_scales");
  p = args();
  p.scales.ld_a_scales = std::int64_t{1} << 31;  // past the TMA coordinates
  names(p, "scales.ld_a_scales");
  // ceil(K / 128) * ld_a_scales wraps to a small product: rejected all the same (the check divides).
  p.scales.ld_a_scales = (std::int64_t{1} << 62) + 256;
  names(p, "scales.ld_a_scales");
  p = args();
  p.scales.bias = reinterpret_cast<const float*>(reinterpret_cast<const char*>(d_sw.data()) + 2);
  names(p, "scales.bias");
  p = args();
  p.k = 24;
  names(p, "k");
#if defined(LLMK_SIM)
  ScopedEnv sim("LLMK_SIM_ARCH", "890");
  const llmk::Status st = gemm::fp8_gemm_blockwise<float>(args(), nullptr);
  CHECK(st.message().find("unsupported") != std::string::npos);
#endif
}

// gemm_f16_sm90 with C and D of type Out (float, or T: one rounding of the fp32 result to 16 bits, whose
// half-ulp is added to the tolerance; C is read as Out, so the reference reads the same rounded C).
// Cfg = void: the launcher picks the tile. Call: gemm_f16_sm90 positional (kSm90), gemm_f16 (kDispatch: the
// device picks the kernel; Cfg unused), or gemm_f16_sm90 over GemmF16Args with split_k and a dirty workspace
// of gemm_f16_workspace_bytes (kSm90Split). Returns D.
enum class F16Call { kSm90, kDispatch, kSm90Split };
template <class T, class Cfg, class Out = float, F16Call kCall = F16Call::kSm90>
std::vector<Out> check_f16(const Shape& s, float alpha, float beta, unsigned seed, std::int64_t ldd = 0,
                           int split_k = 1) {
  CAPTURE(s.m);
  CAPTURE(s.n);
  CAPTURE(s.k);
  if (ldd == 0) ldd = s.n;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::int64_t lda = s.k + 8;
  std::vector<T> a(static_cast<std::size_t>(s.m) * lda), b(static_cast<std::size_t>(s.n) * s.k);
  for (auto& x : a) x = T(dist(rng));
  for (auto& x : b) x = T(dist(rng));
  std::vector<Out> c(static_cast<std::size_t>(s.m) * s.n);
  for (auto& x : c) x = Out(dist(rng));
  llmk::DeviceBuffer<T> d_a(a), d_b(b);
  llmk::DeviceBuffer<Out> d_c(c), d_d(static_cast<std::size_t>(s.m) * ldd);
  // (if constexpr: each instantiation compiles only the kernels of its own call)
  const llmk::Status st = [&] {
    if constexpr (kCall == F16Call::kDispatch) {
      return gemm::gemm_f16<T, Out>(d_a.data(), lda, d_b.data(), s.k, d_c.data(), s.n, d_d.data(), ldd, s.m,
                                    s.n, s.k, alpha, beta, nullptr);
    } else if constexpr (kCall == F16Call::kSm90Split) {
      gemm::GemmF16Args<T, Out> g{d_a.data(), lda, d_b.data(), s.k, d_c.data(), s.n, d_d.data(),
                                  ldd,        s.m, s.n,        s.k, alpha,      beta};
      g.split_k = split_k;
      g.workspace_bytes = gemm::gemm_f16_workspace_bytes<Cfg>(g);
      CHECK(g.workspace_bytes > 0);  // every shape this mode tests splits
      std::mt19937 junk(seed);
      auto ws = dirty_workspace(g.workspace_bytes, junk);
      g.workspace = ws.data();
      return gemm::gemm_f16_sm90<Cfg>(g, nullptr);
    } else {
      return gemm::gemm_f16_sm90<T, Cfg>(d_a.data(), lda, d_b.data(), s.k, d_c.data(), s.n, d_d.data(), ldd,
                                         s.m, s.n, s.k, alpha, beta, nullptr);
    }
  }();
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::vector<Out> got = d_d.to_host();
  const double out_ulp = std::is_same_v<Out, float> ? 0.0 : std::is_same_v<Out, bf16> ? 0x1p-8 : 0x1p-11;
  int bad = 0;
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int kk = 0; kk < s.k; ++kk) {
        const double prod = static_cast<double>(static_cast<float>(a[i * lda + kk])) *
                            static_cast<double>(static_cast<float>(b[j * s.k + kk]));
        ref += prod;
        mag += std::fabs(prod);
      }
      ref = alpha * ref +
            beta * static_cast<double>(static_cast<float>(c[static_cast<std::size_t>(i) * s.n + j]));
      // One fp32 rounding per k16 step at most (the simulator rounds once), the epilogue's two, and the
      // output's rounding to 16 bits (half an ulp, relative).
      const double tol = (std::fabs(alpha) * mag * (s.k / 16 + 2) + std::fabs(beta)) * 0x1p-24 + 1e-6 +
                         std::fabs(ref) * out_ulp;
      const double g = static_cast<float>(got[static_cast<std::size_t>(i) * ldd + j]);
      if (!(std::fabs(g - ref) <= tol) && bad++ < 5)
        MESSAGE("d[" << i << "][" << j << "] = " << g << ", want " << ref);
    }
  CHECK(bad == 0);
  CHECK(padding_written(got, ldd, s.m, s.n) == 0);
  return got;
}

TEST_CASE("sm90 fp16 / bf16 GEMM: alpha * A B^T + beta * C; a 128 x 64 tile with two ring slots") {
  if (!sm90_here()) return;
  const std::vector<Shape> sh = shapes();
  check_f16<f16, gemm::Sm90GemmConfig<f16>>(sh[0], 1.0f, 0.0f, 904);
  check_f16<bf16, gemm::Sm90GemmConfig<bf16>>(sh[1], 0.5f, -1.5f, 905);
  // BN = 64 and 2 slots: more k-tiles than slots, the ring wraps within a tile and across tiles.
  check_f16<f16, gemm::Sm90GemmConfig<f16, 64, 2>>(Shape{150, 100, llmk::test::fast() ? 320 : 456}, 2.0f,
                                                   1.0f, 906);
}

TEST_CASE("sm90 128 x 256 tiles: exact W8A8 int32, fp16 with fp32 out (8 staging boxes per warpgroup)") {
  if (!sm90_here()) return;
  // N = 300: a full and a tail tile in N; with 2 simulated SMs each block walks two tiles, so the staging
  // boxes rotate across tiles as well as within one.
  const Shape s{llmk::test::fast() ? 130 : 200, 300, llmk::test::fast() ? 160 : 272};
  std::mt19937 rng(913);
  check_raw_int32<gemm::Sm90GemmConfig<std::int8_t, 256>>(s, 4, rng);
  check_f16<f16, gemm::Sm90GemmConfig<f16, 256>>(Shape{s.m, s.n, s.k / 2 + 8}, 1.5f, 0.5f, 914);
}

TEST_CASE("sm90 clusters of 2 along M: each block multicasts half of B to both (exact int8, fp16 out)") {
  if (!sm90_here()) return;
  // With 2 simulated SMs one cluster walks every pair of tiles. M = 300: 3 tile rows, so the second pair's
  // second tile lies past M (its block still loads and multicasts its half of B); N and K tails.
  std::mt19937 rng(921);
  using I8 = gemm::Sm90ClusterGemmConfig<gemm::Sm90GemmConfig<std::int8_t>>;
  static_assert(I8::kClusterM == 2 && !I8::kCanSplitK && gemm::Sm90GemmConfig<std::int8_t>::kClusterM == 1);
  check_raw_int32<I8>(Shape{llmk::test::fast() ? 260 : 300, 136, llmk::test::fast() ? 160 : 272}, 3, rng);
  check_f16<f16, gemm::Sm90ClusterGemmConfig<gemm::Sm90GemmConfig<f16, 256>>, f16>(Shape{130, 300, 200}, 1.5f,
                                                                                   0.5f, 922);
}

TEST_CASE(
    "sm90 ping-pong consumers: each warpgroup owns whole tiles, in turns (exact int8, fp16, clusters)") {
  if (!sm90_here()) return;
  // With 2 simulated SMs each block walks several tiles. 300 x 136 at 128 x 128: 6 tiles, 3 a block, so
  // warpgroup 1 takes one tile and an empty turn; int32 out through the TMA store (ldd = N + 4) and plain
  // stores (ldd = N + 3). 150 x 100 at 128 x 64 with 2 ring slots: 4 tiles, 2 a block; the ring wraps inside
  // a tile and each warpgroup skips the other's k-tiles across wraps; fp16 out (stmatrix) with beta * C.
  std::mt19937 rng(931);
  using I8 = gemm::Sm90PingPongGemmConfig<gemm::Sm90GemmConfig<std::int8_t>>;
  static_assert(I8::kPingPong && !I8::kCanSplitK && !gemm::Sm90GemmConfig<std::int8_t>::kPingPong);
  const int k = llmk::test::fast() ? 160 : 272;
  check_raw_int32<I8>(Shape{300, 136, k}, 4, rng);
  if (!llmk::test::fast()) check_raw_int32<I8>(Shape{300, 136, k}, 3, rng);
  check_f16<f16, gemm::Sm90PingPongGemmConfig<gemm::Sm90GemmConfig<f16, 64, 2>>, f16>(
      Shape{150, 100, llmk::test::fast() ? 200 : 456}, 2.0f, 1.0f, 932);
  // bf16 with fp32 out (8-byte pair stores into the staging boxes), 3 tiles a block.
  check_f16<bf16, gemm::Sm90PingPongGemmConfig<gemm::Sm90GemmConfig<bf16>>>(Shape{300, 136, 72}, 0.5f, -1.5f,
                                                                            933);
  // Ping-pong in clusters of 2: 130 x 300 is 1 pair of tile rows x 3 tile columns, 3 units for the cluster
  // (the second tile row past M but for 2 rows).
  using I8C = gemm::Sm90ClusterGemmConfig<I8>;
  static_assert(I8C::kPingPong && I8C::kClusterM == 2);
  check_raw_int32<I8C>(Shape{130, 300, k}, 4, rng);
}

TEST_CASE("sm90 fp16 / bf16 GEMM with 16-bit C and D: TMA-store and plain epilogues, the launcher's tile") {
  if (!sm90_here()) return;
  const std::vector<Shape> sh = shapes();
  check_f16<f16, void, f16>(sh[0], 1.0f, 0.5f, 915);
  check_f16<bf16, gemm::Sm90GemmConfig<bf16, 256>, bf16>(Shape{sh[1].m, 300, sh[1].k}, 0.75f, -1.0f, 916);
  check_f16<f16, void, f16>(Shape{70, 40, 64}, 1.0f, 0.0f, 917, 41);  // odd ldd: plain stores
}

// Special values (docs/gemm.md, "Special values") on the Hopper fp16 GEMM: special_values.hpp's planted
// problem (a NaN row of A, an Inf in a column of B meeting a zero of A, an Inf in a row of A meeting the
// opposite Inf, a sum past 65504, NaN / -Inf in C, NaN in the operands' padding past K), fp16 out through the
// TMA-store epilogue (K = 72: a k-tile and a tail; ldd = N + 8: the padding stays poisoned) and, at K = 256
// split in two over a dirty workspace, through the split-K reduction (ldd = N + 1: element stores; D[14, 7]'s
// -Inf and +Inf come from different splits). beta = 0: C is NaN everywhere and must not be read; beta = 0.5:
// C's NaN and -Inf reach their outputs.
TEST_CASE("sm90 fp16 GEMM special values: NaN / Inf, Inf * 0 = NaN, fp16 overflow, C unread at beta 0") {
  if (!sm90_here()) return;
  namespace sp = llmk::test::special;
  for (const float beta : {0.0f, 0.5f}) {
    CAPTURE(beta);
    {
      const auto p = sp::f16_special_problem<f16, f16>(20, 40, 72, beta, 941);
      const std::int64_t ldd = p.n + 8;
      llmk::DeviceBuffer<f16> d_a(p.a), d_b(p.b), d_c(p.c), d_d(static_cast<std::size_t>(p.m) * ldd);
      d_d.poison();
      const llmk::Status st =
          gemm::gemm_f16_sm90<f16, void>(d_a.data(), p.lda, d_b.data(), p.ldb, d_c.data(), p.n, d_d.data(),
                                         ldd, p.m, p.n, p.k, 1.0f, beta, nullptr);
      REQUIRE_MESSAGE(st.ok(), st.message());
      sp::check_f16_special(p, d_d.to_host(), ldd);
    }
    {
      const auto p = sp::f16_special_problem<f16, f16>(20, 40, 256, beta, 942);
      const std::int64_t ldd = p.n + 1;
      llmk::DeviceBuffer<f16> d_a(p.a), d_b(p.b), d_c(p.c), d_d(static_cast<std::size_t>(p.m) * ldd);
      gemm::GemmF16Args<f16, f16> g{d_a.data(), p.lda, d_b.data(), p.ldb, d_c.data(), p.n, d_d.data(),
                                    ldd,        p.m,   p.n,        p.k,   1.0f,       beta};
      g.split_k = 2;
      g.workspace_bytes = gemm::gemm_f16_workspace_bytes<void>(g);
      REQUIRE(g.workspace_bytes > 0);  // 4 k-tiles of 64 in 2 splits
      std::mt19937 junk(943);
      auto ws = dirty_workspace(g.workspace_bytes, junk);
      g.workspace = ws.data();
      d_d.poison();
      const llmk::Status st = gemm::gemm_f16_sm90<void>(g, nullptr);
      REQUIRE_MESSAGE(st.ok(), st.message());
      sp::check_f16_special(p, d_d.to_host(), ldd);
    }
  }
}

TEST_CASE("gemm_f16 runs the wgmma kernel on sm_90 and the mma.sync tile GEMM before it, same answer") {
  const Shape s{70, 72, 96};
  check_f16<f16, void, f16, F16Call::kDispatch>(s, 1.0f, 0.5f, 918);  // whatever this device is
#if defined(LLMK_SIM)
  for (const char* arch : {"800", "890", "900"}) {
    CAPTURE(arch);
    ScopedEnv sim("LLMK_SIM_ARCH", arch);
    CHECK(gemm::gemm_f16_uses_sm90<f16>() == (std::string(arch) == "900"));
    check_f16<f16, void, f16, F16Call::kDispatch>(s, 1.0f, 0.5f, 919);
  }
#endif
}

TEST_CASE("sm90 tile width by shape (choose_tile_n): 128 x 256 for large outputs, 128 x 64 for few tiles") {
  using gemm::sm90_detail::choose_tile_n;
  CHECK(choose_tile_n(4096, 4096, 132) == 256);
  CHECK(choose_tile_n(4096, 11008, 132) == 256);
  CHECK(choose_tile_n(256, 11008, 132) == 256);
  CHECK(choose_tile_n(256, 4096, 132) == 128);  // 64 tiles: tensor-bound, no gain from more
  CHECK(choose_tile_n(128, 4096, 132) == 64);   // 32 tiles of 128: 64 of 64 keep more SMs busy
  CHECK(choose_tile_n(65, 100, 132) == 64);
  CHECK(choose_tile_n(136, 72, 2) == 128);
}

#if defined(LLMK_SIM)
TEST_CASE(
    "w8a8_gemm gives the reference's answer on every simulated architecture; w8a8_gemm_sm90 refuses "
    "pre-sm_90") {
  std::mt19937 rng(907);
  const Shape s{llmk::test::fast() ? 72 : 136, 72, 96};  // M > 64: the large-M path (wgmma on sm_90)
  const auto a = random_int8(s.m, s.k, s.k, rng), w = random_int8(s.n, s.k, s.k, rng);
  llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
  std::vector<std::int32_t> want(static_cast<std::size_t>(s.m) * s.n);
  llmk::reference::gemm_s8s8_s32(a.data(), s.k, w.data(), s.k, s.m, s.n, s.k, want.data(), s.n, false);
  for (const char* arch : {"800", "890", "900"}) {
    CAPTURE(arch);
    ScopedEnv sim("LLMK_SIM_ARCH", arch);
    llmk::DeviceBuffer<std::int32_t> d(want.size());
    gemm::QuantGemmArgs<std::int8_t> p{d_a.data(), s.k, d_w.data(), s.k, s.m, s.n, s.k, {}, d.data(), s.n};
    REQUIRE(gemm::w8a8_gemm<std::int32_t>(p, nullptr).ok());
    CHECK(d.to_host() == want);
    const llmk::Status hopper = gemm::w8a8_gemm_sm90<std::int32_t>(p, nullptr);
    CHECK(hopper.ok() == (std::string(arch) == "900"));
    if (!hopper.ok()) CHECK(hopper.message().find("unsupported") != std::string::npos);
  }
}
#endif

TEST_CASE("sm90 split-K plan on 132 SMs: the fewest rounds x k-tiles, partials at most half the weights") {
  using gemm::sm90_detail::sm90_split_plan_chosen;
  // (M, N, K) -> splits for int8 (BK = 128; the tile width of choose_tile_n).
  CHECK(sm90_split_plan_chosen<std::int8_t>(256, 4096, 4096, 0, 132).splits == 2);   // 64 tiles of 128 x 128
  CHECK(sm90_split_plan_chosen<std::int8_t>(128, 4096, 4096, 0, 132).splits == 2);   // 64 tiles of 128 x 64
  CHECK(sm90_split_plan_chosen<std::int8_t>(256, 4096, 11008, 0, 132).splits == 2);  // 86 k-tiles, <= 5
  CHECK(sm90_split_plan_chosen<std::int8_t>(65, 4096, 4096, 0, 132).splits == 2);    // 64 tiles
  CHECK(sm90_split_plan_chosen<std::int8_t>(256, 11008, 4096, 0, 132).splits ==
        1);  // 86 tiles: 2 x 16 = 1 x 32
  CHECK(sm90_split_plan_chosen<std::int8_t>(4096, 4096, 4096, 0, 132).splits == 1);  // 512 tiles
  CHECK(sm90_split_plan_chosen<std::int8_t>(4096, 4096, 4096, 5, 132).splits == 5);  // given
  CHECK(sm90_split_plan_chosen<e4m3>(256, 4096, 4096, 0, 132).splits == 2);
  const auto plan = sm90_split_plan_chosen<std::int8_t>(256, 4096, 4096, 0, 132);
  CHECK(plan.partial_bytes == 2u * 256 * 4096 * 4);
  CHECK(plan.arrival_bytes == 512u);  // 64 words, rounded up to 256 bytes
}

TEST_CASE("sm90 fp16 / bf16 split-K: the plan at small M, results in bound and deterministic, its errors") {
  using gemm::sm90_detail::sm90_split_plan_chosen;
  // (M, N, K) on 132 SMs: 64-element k-tiles, so twice the 8-bit split counts' traffic limit.
  CHECK(sm90_split_plan_chosen<f16>(16, 4096, 4096, 0, 132).splits == 2);  // 64 tiles of 128 x 64
  CHECK(sm90_split_plan_chosen<f16>(1, 4096, 4096, 0, 132).splits == 2);
  CHECK(sm90_split_plan_chosen<f16>(64, 11008, 4096, 0, 132).splits == 3);  // 86 tiles: 2 rounds x 22, not 64
  CHECK(sm90_split_plan_chosen<f16>(4096, 4096, 4096, 0, 132).splits == 1);  // 512 tiles
  if (!sm90_here()) return;
  // 2 simulated SMs: 70 x 72 is one tile, K = 1024 is 16 k-tiles: split_k 0 -> 2 splits, 3 -> 3.
  const Shape s{70, 72, 1024};
  const auto two = check_f16<f16, void, f16, F16Call::kSm90Split>(s, 1.0f, 0.5f, 921, 0, 0);
  CHECK(bits_of(two) == bits_of(check_f16<f16, void, f16, F16Call::kSm90Split>(s, 1.0f, 0.5f, 921, 0, 0)));
  // bf16 with fp32 out on the 128 x 128 tile (an explicit Cfg: one split kernel, not one per tile width).
  check_f16<bf16, gemm::Sm90GemmConfig<bf16>, float, F16Call::kSm90Split>(Shape{s.m, 200, 640}, 0.5f, -1.0f,
                                                                          922, 203, 3);
  // A given split count needs a workspace; split_k out of range is an error.
  const std::vector<f16> ones(64 * 1024, f16(0.25f));
  llmk::DeviceBuffer<f16> a(ones), b(ones), d(64 * 64);
  gemm::GemmF16Args<f16, f16> g{a.data(), 1024, b.data(), 1024, nullptr, 64, d.data(), 64, 64, 64, 1024};
  g.split_k = 2;
  CHECK(gemm::gemm_f16_sm90(g, nullptr).message().find("'workspace'") != std::string::npos);
  g.split_k = 17;
  CHECK(gemm::gemm_f16(g, nullptr).message().find("'split_k'") != std::string::npos);
  g.split_k = 0;  // no workspace: no split, no error
  CHECK(gemm::gemm_f16(g, nullptr).ok());
}

TEST_CASE("sm90 split-K: W8A8 bit for bit the unsplit result (int32 exact, bf16 dequantized), fp8 in bound") {
  if (!sm90_here()) return;
  std::mt19937 rng(911);
  // 2 simulated SMs: K = 768 is 6 k-tiles of 128; split_k 3 -> 3 units a tile, several a block.
  const Shape s{llmk::test::fast() ? 100 : 136, 70, 768};  // N % 4 != 0: a partial quad at the edge
  CAPTURE(s.m);
  const auto a = random_int8(s.m, s.k, s.k, rng), w = random_int8(s.n, s.k, s.k, rng);
  llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
  for (const std::int64_t ldd : {static_cast<std::int64_t>(s.n), static_cast<std::int64_t>(s.n) + 3}) {
    CAPTURE(ldd);  // N + 3: the reduction's element stores
    // Raw int32: exact.
    std::vector<std::int32_t> want(static_cast<std::size_t>(s.m) * ldd, 0);
    llmk::reference::gemm_s8s8_s32(a.data(), s.k, w.data(), s.k, s.m, s.n, s.k, want.data(), ldd, false);
    llmk::DeviceBuffer<std::int32_t> d(static_cast<std::size_t>(s.m) * ldd);
    gemm::QuantGemmArgs<std::int8_t> p{d_a.data(), s.k, d_w.data(), s.k, s.m, s.n, s.k, {}, d.data(), ldd};
    p.split_k = 3;
    const std::size_t bytes = gemm::quant_gemm_workspace_bytes<gemm::Sm90GemmConfig<std::int8_t>>(p);
    REQUIRE(bytes > 0);  // the call really splits
    auto ws = dirty_workspace(bytes, rng);
    p.workspace = ws.data();
    p.workspace_bytes = bytes;
    const llmk::Status st = gemm::w8a8_gemm_sm90<std::int32_t>(p, nullptr);
    REQUIRE_MESSAGE(st.ok(), st.message());
    const std::vector<std::int32_t> got = d.to_host();
    int bad = 0;
    for (int i = 0; i < s.m; ++i)
      for (int j = 0; j < s.n; ++j) bad += got[i * ldd + j] != want[i * ldd + j] ? 1 : 0;
    CHECK(bad == 0);
    CHECK(padding_written(got, ldd, s.m, s.n) == 0);
    // Dequantized with zero points, per-token and per-channel scales and bias: the same bits as unsplit.
    Scales sc;
    make_scales(sc, s.m, s.n, true, true, true, true, rng);
    REQUIRE(gemm::weight_column_sums(d_w.data(), s.k, s.n, s.k, sc.sums.data(), nullptr).ok());
    sc.dev.w_column_sums = sc.sums.data();
    llmk::DeviceBuffer<bf16> one(static_cast<std::size_t>(s.m) * ldd), split(one.size());
    gemm::QuantGemmArgs<std::int8_t> q{d_a.data(), s.k, d_w.data(), s.k,        s.m,
                                       s.n,        s.k, sc.dev,     one.data(), ldd};
    REQUIRE(gemm::w8a8_gemm_sm90<bf16>(q, nullptr).ok());  // no workspace: unsplit
    q.d = split.data();
    q.workspace = ws.data();
    q.workspace_bytes = bytes;
    q.split_k = 3;
    const llmk::Status split_st = gemm::w8a8_gemm_sm90<bf16>(q, nullptr);
    REQUIRE_MESSAGE(split_st.ok(), split_st.message());
    const std::vector<bf16> got_split = split.to_host();
    CHECK(bits_of(one.to_host()) == bits_of(got_split));  // padding included
    CHECK(padding_written(got_split, ldd, s.m, s.n) == 0);
  }
  // fp8 (promoted k-tile sums) through fp8_gemm's dispatch (M > 64), split by the plan on 2 SMs (one 128 x
  // 64 tile, 18 k-tiles, K / 8M = 2: 2 splits): within the fp8 bound, the same bits on a second call.
  const Shape f8{100, 40, 2304};
  Fp8Problem f;
  make_fp8_problem(f, f8, rng);
  const double bound = 64.0 * f8.k * 2e-2 * 2e-2 * (f8.k / 32 + 2);
  const std::vector<double> gpu = fp8_gpu_allowance(f.a, f8.k, f.w, f8.k, f8.m, f8.n, f8.k, f.sc.host);
  gemm::QuantGemmArgs<e4m3> p{f.d_a.data(), f8.k, f.d_w.data(), f8.k,    f8.m,
                              f8.n,         f8.k, f.sc.dev,     nullptr, f8.n};
  const std::size_t bytes = gemm::quant_gemm_workspace_bytes(p);
#if defined(LLMK_SIM)
  CHECK(bytes > 0);
#endif
  auto ws = dirty_workspace(bytes, rng);
  p.workspace = ws.data();
  p.workspace_bytes = bytes;
  llmk::DeviceBuffer<float> d1(static_cast<std::size_t>(f8.m) * f8.n), d2(d1.size());
  p.d = d1.data();
  REQUIRE(gemm::fp8_gemm<float>(p, nullptr).ok());
  p.d = d2.data();
  REQUIRE(gemm::fp8_gemm<float>(p, nullptr).ok());
  const auto r1 = d1.to_host(), r2 = d2.to_host();
  check_close(r1, f8.n, f.ref, f8.m, f8.n, bound, gpu);
  CHECK(std::memcmp(r1.data(), r2.data(), r1.size() * sizeof(float)) == 0);
  // Saturating int8 never splits; a given split count needs a workspace.
  llmk::DeviceBuffer<std::int32_t> d(static_cast<std::size_t>(s.m) * s.n);
  gemm::QuantGemmArgs<std::int8_t> g{d_a.data(), s.k, d_w.data(), s.k, s.m, s.n, s.k, {}, d.data(), s.n};
  g.split_k = 3;
  const llmk::Status missing = gemm::w8a8_gemm_sm90<std::int32_t>(g, nullptr);
  CHECK(missing.message().find("'workspace'") != std::string::npos);
  using Saturating = gemm::Sm90GemmConfig<std::int8_t, 128, 4, true>;
  d.poison();  // written by the split-count check's run above
  REQUIRE(gemm::w8a8_gemm_sm90<std::int32_t, Saturating>(g, nullptr).ok());
  std::vector<std::int32_t> want(static_cast<std::size_t>(s.m) * s.n);
  llmk::reference::gemm_s8s8_s32(a.data(), s.k, w.data(), s.k, s.m, s.n, s.k, want.data(), s.n, true);
  CHECK(d.to_host() == want);  // random int8 at K = 768: no clamp, the exact sums
}

TEST_CASE("sm90 W8A8 .satfinite clamps where int32 accumulation would wrap (K = 131104, all -128)") {
  if (!sm90_here() || llmk::test::fast()) return;  // 16 million MACs per tile row: the plain sim run has it
  const int m = 1, n = 8, k = 131104;              // 16384 * 131104 > 2^31 - 1
  std::vector<std::int8_t> a(k, std::int8_t(-128)), w(static_cast<std::size_t>(n) * k, std::int8_t(-128));
  a[5] = 127;  // one product of another value, so the sums are not a multiple of 2^14 only
  llmk::DeviceBuffer<std::int8_t> d_a(a), d_w(w);
  llmk::DeviceBuffer<std::int32_t> d(n);
  std::vector<std::int32_t> want(n), plain(n);
  llmk::reference::gemm_s8s8_s32(a.data(), k, w.data(), k, m, n, k, want.data(), n, true);
  llmk::reference::gemm_s8s8_s32(a.data(), k, w.data(), k, m, n, k, plain.data(), n, false);
  REQUIRE(want[0] == 2147483647);
  REQUIRE(plain[0] != want[0]);  // the non-saturating sum wraps
  gemm::QuantGemmArgs<std::int8_t> g{d_a.data(), k, d_w.data(), k, m, n, k, {}, d.data(), n};
  REQUIRE(
      gemm::w8a8_gemm_sm90<std::int32_t, gemm::Sm90GemmConfig<std::int8_t, 128, 4, true>>(g, nullptr).ok());
  CHECK(d.to_host() == want);
}
