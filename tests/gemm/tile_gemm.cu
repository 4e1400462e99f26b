// Tests of llmk::gemm::tile_gemm (the mma.sync 16-bit GEMM) and its fp16 -> fp32 form tile_gemm_f16 against
// the fp64 host reference, in the simulator (and on a GPU).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/tile_gemm.cuh"
#include "llmk/reference/gemm.hpp"
#include "special_values.hpp"
#include "support/test_env.hpp"

namespace {

using llmk::bfloat16;
using f16 = llmk::half;
namespace gemm = llmk::gemm;

struct Problem {
  int m, n, k;
  std::int64_t lda, ldb, ldd;
};

template <class T>
std::vector<T> random_values(std::size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> v(count);
  for (auto& x : v) {
    float f = dist(rng);
    if (f == 0.0f) f = 0.5f;  // never zeros
    x = T(f);
  }
  return v;
}

// Error bound: the kernel rounds to fp32 once per mma (every 16 products) and accumulates in fp32, so the
// error is at most ~(K / 16 + 1) fp32 roundings of the running |sum|. Doubled for margin; plus a tiny atol.
double tolerance(double abs_sum, int k) {
  return 2.0 * (k / 16 + 2) * std::ldexp(abs_sum, -24) + 1e-6;
}

// tile_gemm<Tile, T, Out> (Tile = void: the launcher's choice) on one problem, D in place of C (they alias),
// against the fp64 reference: fp32 out within `tolerance`, 16-bit out within it plus half an ulp of the
// output. Padding columns of D past N must be untouched.
// kSplit: through the GemmF16Args launcher with split_k and a workspace of tile_gemm_workspace_bytes (random
// bytes: it needs no reset; a template argument, so that only these cases compile split kernels). Returns D.
template <class T, class Out, class Tile = void, bool kSplit = false>
std::vector<Out> check_problem(const Problem& pr, float alpha, float beta, std::mt19937& rng,
                               int split_k = 1) {
  CAPTURE(pr.m);
  CAPTURE(pr.n);
  CAPTURE(pr.k);
  CAPTURE(beta);
  std::vector<T> a = random_values<T>(static_cast<std::size_t>(pr.m) * pr.lda, rng);
  std::vector<T> b = random_values<T>(static_cast<std::size_t>(pr.n) * pr.ldb, rng);
  std::vector<Out> c = random_values<Out>(static_cast<std::size_t>(pr.m) * pr.ldd, rng);
  std::vector<float> c_f(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) c_f[i] = static_cast<float>(c[i]);

  llmk::DeviceBuffer<T> d_a(a), d_b(b);
  llmk::DeviceBuffer<Out> d_d(c.size());  // poisoned unless beta != 0
  if (beta != 0.0f) d_d.upload(c);
  // (Initialized, not assigned: nvcc warns about a discarded Status& from operator=.)
  const llmk::Status s = [&] {
    if constexpr (!kSplit) {
      (void)split_k;
      return gemm::tile_gemm<Tile>(d_a.data(), pr.lda, d_b.data(), pr.ldb, d_d.data(), pr.ldd, d_d.data(),
                                   pr.ldd, pr.m, pr.n, pr.k, alpha, beta, nullptr);
    } else {
      gemm::GemmF16Args<T, Out> g{d_a.data(), pr.lda, d_b.data(), pr.ldb, d_d.data(), pr.ldd, d_d.data(),
                                  pr.ldd,     pr.m,   pr.n,       pr.k,   alpha,      beta};
      g.split_k = split_k;
      g.workspace_bytes = gemm::tile_gemm_workspace_bytes<Tile>(g);
      CHECK(g.workspace_bytes > 0);  // every split case here splits
      std::vector<unsigned char> junk(g.workspace_bytes + 16);
      for (auto& x : junk) x = static_cast<unsigned char>(rng());
      llmk::DeviceBuffer<unsigned char> ws(junk);
      g.workspace = ws.data();
      return gemm::tile_gemm<Tile>(g, nullptr);
    }
  }();
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(llmk::device_synchronize().ok());
  std::vector<Out> got = d_d.to_host();

  std::vector<float> want(c_f);
  llmk::reference::gemm_tn(a.data(), pr.lda, b.data(), pr.ldb, c_f.data(), pr.ldd, want.data(), pr.ldd, pr.m,
                           pr.n, pr.k, alpha, beta);
  std::vector<double> scale(static_cast<std::size_t>(pr.m) * pr.n);
  llmk::reference::gemm_tn_abs(a.data(), pr.lda, b.data(), pr.ldb, scale.data(), pr.m, pr.n, pr.k);
  const double out_ulp = std::is_same_v<Out, float> ? 0.0 : std::is_same_v<Out, bfloat16> ? 0x1p-8 : 0x1p-11;

  int bad = 0;
  for (int i = 0; i < pr.m; ++i)
    for (int j = 0; j < pr.n; ++j) {
      const std::size_t idx = static_cast<std::size_t>(i) * pr.ldd + j;
      const double tol = std::fabs(alpha) * tolerance(scale[static_cast<std::size_t>(i) * pr.n + j], pr.k) +
                         std::fabs(beta) * std::ldexp(std::fabs(c_f[idx]), -23) +
                         std::fabs(want[idx]) * out_ulp;
      const double g = static_cast<float>(got[idx]);
      const double err = std::fabs(g - want[idx]);
      if (!(err <= tol)) {  // NaN (poison) fails too
        if (bad++ < 5)
          MESSAGE("D[" << i << "][" << j << "] = " << g << ", want " << want[idx] << " (tol " << tol << ")");
      }
    }
  CHECK(bad == 0);
  // Padding columns between N and ldd must be untouched.
  for (int i = 0; i < pr.m; ++i)
    for (std::int64_t j = pr.n; j < pr.ldd; ++j) {
      const std::size_t idx = static_cast<std::size_t>(i) * pr.ldd + j;
      if (beta != 0.0f)
        CHECK(static_cast<float>(got[idx]) == c_f[idx]);
      else
        CHECK(std::isnan(static_cast<float>(got[idx])));
    }
  return got;
}

}  // namespace

TEST_CASE("tile_gemm_f16 matches the fp64 reference over odd shapes") {
  std::mt19937 rng(20261121);
  const std::vector<int> sizes =
      llmk::test::fast() ? std::vector<int>{16, 200} : std::vector<int>{16, 48, 128, 200};
  for (int m : sizes)
    for (int n : sizes)
      for (int k : sizes) check_problem<f16, float>({m, n, k, k, k, n}, 1.0f, 0.0f, rng);
}

TEST_CASE("tile_gemm_f16 handles M and N of 1, 7, 17, 63, 65 and padded leading dimensions") {
  std::mt19937 rng(7);
  for (int m : {1, 7, 65})
    for (int n : {1, 17, 63}) check_problem<f16, float>({m, n, 24, 40, 32, n + 3}, 1.0f, 0.0f, rng);
}

TEST_CASE("tile_gemm_f16 alpha and beta epilogue") {
  std::mt19937 rng(11);
  check_problem<f16, float>({33, 70, 64, 64, 72, 75}, 0.5f, -1.25f, rng);
}

TEST_CASE("tile_gemm_f16 with a three-stage pipeline and a 4 x 1 warp layout") {
  std::mt19937 rng(13);
  using Cfg = gemm::TileGemmConfig<64, 32, 32, 4, 1, 3>;
  check_problem<f16, float, Cfg>({100, 50, 136, 136, 136, 50}, 1.0f, 0.0f, rng);
}

TEST_CASE("tile_gemm: the large tile (128 x 128, 64 x 64 warps, 4 stages) over M, N and K tails") {
  std::mt19937 rng(17);
  check_problem<f16, float, gemm::TileGemmLarge>({200, 136, 272, 280, 272, 140}, 1.0f, 0.0f, rng);
  if (!llmk::test::fast())
    check_problem<f16, float, gemm::TileGemmLarge>({129, 257, 40, 40, 48, 257}, 0.75f, 0.5f, rng);
}

TEST_CASE("tile_gemm: bf16 inputs and 16-bit outputs (fp32 epilogue, rounded once)") {
  std::mt19937 rng(19);
  check_problem<bfloat16, bfloat16, gemm::TileGemmSmall>({70, 72, 96, 104, 96, 80}, 1.0f, 0.0f, rng);
  check_problem<bfloat16, bfloat16, gemm::TileGemmSmall>({65, 33, 48, 48, 48, 40}, -0.5f, 2.0f, rng);
  check_problem<f16, f16, gemm::TileGemmSmall>({17, 130, 64, 64, 72, 136}, 1.5f, 0.25f, rng);
}

TEST_CASE("tile_gemm split-K over a workspace: the plan, in bound, deterministic, the arguments' errors") {
  using gemm::detail::tile_gemm_split_plan;
  // On an H100's 132 SMs: M = 16, N = K = 4096 is 64 small tiles; 3 split blocks an SM -> 6 splits.
  CHECK(tile_gemm_split_plan<gemm::TileGemmSmall, float>(16, 4096, 4096, 0, 132).splits == 6);
  CHECK(tile_gemm_split_plan<gemm::TileGemmLarge, float>(1024, 4096, 4096, 0, 132).splits == 1);  // 256 tiles
  CHECK(tile_gemm_split_plan<gemm::TileGemmSmall, float>(16, 4096, 4096, 5, 132).splits == 5);    // given
  CHECK(tile_gemm_split_plan<gemm::TileGemmSmall, float>(64, 4096, 256, 0, 132).splits == 1);     // partials
  // 3 small tiles, K = 1024 (16 slices): 8 splits by the SM count (2 slices each); ldd padded; twice on the
  // same inputs: the same bits.
  const Problem pr{17, 130, 1024, 1032, 1024, 133};
  std::mt19937 rng(29), rng_again(29);
  const auto first = check_problem<f16, float, void, true>(pr, 0.5f, -1.0f, rng, 0);
  CHECK(first == check_problem<f16, float, void, true>(pr, 0.5f, -1.0f, rng_again, 0));
  if (!llmk::test::fast())
    check_problem<bfloat16, bfloat16, gemm::TileGemmSmall, true>({40, 70, 200, 200, 208, 72}, 1.0f, 0.5f, rng,
                                                                 3);
  // split_k = 2 without a workspace, split_k out of range.
  const std::vector<f16> ones(64 * 1024, f16(0.25f));
  llmk::DeviceBuffer<f16> a(ones), b(ones);
  llmk::DeviceBuffer<float> d(64 * 64);
  gemm::GemmF16Args<f16, float> g{a.data(), 1024, b.data(), 1024, nullptr, 64, d.data(), 64, 64, 64, 1024};
  g.split_k = 2;
  CHECK(gemm::tile_gemm(g, nullptr).message().find("'workspace'") != std::string::npos);
  g.split_k = -1;
  CHECK(gemm::tile_gemm(g, nullptr).message().find("'split_k'") != std::string::npos);
  g.split_k = 0;  // no workspace: no split, no error
  CHECK(gemm::tile_gemm(g, nullptr).ok());
}

// Special values (docs/gemm.md, "Special values"): the planted problem of special_values.hpp (a NaN row of A,
// an Inf in a column of B meeting a zero of A, an Inf in a row of A meeting the opposite Inf, a sum past
// 65504, NaN / -Inf in C, NaN in the operands' padding past K), every output classified. fp16 out on the
// small tile at K = 72 (a zero-filled K tail; D[17, 20] overflows to +Inf); fp32 out at K = 136 split in two
// over a dirty workspace (D[14, 7]'s -Inf and +Inf come from different splits and meet in the reduction).
// With beta = 0, C is NaN everywhere and must not be read. The instantiations of the cases above, nothing
// new.
TEST_CASE("tile_gemm special values: NaN / Inf, Inf * 0 = NaN, fp16 overflow, C unread at beta 0") {
  namespace sp = llmk::test::special;
  for (const float beta : {0.0f, 0.5f}) {
    CAPTURE(beta);
    const auto p = sp::f16_special_problem<f16, f16>(20, 24, 72, beta, 31);
    const std::int64_t ldd = p.n + 8;  // 16-byte rows; the padding must stay poisoned
    llmk::DeviceBuffer<f16> d_a(p.a), d_b(p.b), d_c(p.c), d_d(static_cast<std::size_t>(p.m) * ldd);
    d_d.poison();
    const llmk::Status s =
        gemm::tile_gemm<gemm::TileGemmSmall>(d_a.data(), p.lda, d_b.data(), p.ldb, d_c.data(), p.n,
                                             d_d.data(), ldd, p.m, p.n, p.k, 1.0f, beta, nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
    sp::check_f16_special(p, d_d.to_host(), ldd);
  }
  for (const float beta : {0.0f, -0.75f}) {
    CAPTURE(beta);
    const auto p = sp::f16_special_problem<f16, float>(20, 24, 136, beta, 37);
    const std::int64_t ldd = p.n + 3;  // the reduction's element stores
    llmk::DeviceBuffer<f16> d_a(p.a), d_b(p.b);
    llmk::DeviceBuffer<float> d_c(p.c), d_d(static_cast<std::size_t>(p.m) * ldd);
    gemm::GemmF16Args<f16, float> g{d_a.data(), p.lda, d_b.data(), p.ldb, d_c.data(), p.n, d_d.data(),
                                    ldd,        p.m,   p.n,        p.k,   1.0f,       beta};
    g.split_k = 2;
    g.workspace_bytes = gemm::tile_gemm_workspace_bytes(g);
    REQUIRE(g.workspace_bytes > 0);  // 3 k-tiles of 64 (the last partial): splits of 2 and 1
    std::mt19937 rng(41);
    std::vector<unsigned char> junk(g.workspace_bytes);
    for (auto& x : junk) x = static_cast<unsigned char>(rng());
    llmk::DeviceBuffer<unsigned char> ws(junk);
    g.workspace = ws.data();
    d_d.poison();
    const llmk::Status s = gemm::tile_gemm(g, nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
    sp::check_f16_special(p, d_d.to_host(), ldd);
  }
}

TEST_CASE("the K-major main loop's slicing of K near the 2^30 limit (no 32-bit wrap)") {
  using llmk::gemm::detail::k_slicing;
  static_assert(k_slicing(200, 64).tiles == 4 && k_slicing(200, 64).first == -56);
  static_assert(k_slicing(256, 64).tiles == 4 && k_slicing(256, 64).first == 0);
  // K = 2^30 - 8 fp16 (2^31 - 16 bytes): the old ceil_div and k_tiles * kSlice wrapped to -16777215 slices.
  static_assert(k_slicing(2147483632, 128).tiles == 16777216 && k_slicing(2147483632, 128).first == -16);
  static_assert(k_slicing(2147483632, 64).tiles == 33554432 && k_slicing(2147483632, 64).first == -16);
  CHECK(k_slicing(7, 128).tiles == 1);
}

TEST_CASE("tile_gemm's tile by shape: the large tile only for M > 64 with a large tile per SM") {
  using gemm::detail::tile_gemm_takes_large;
  CHECK(tile_gemm_takes_large(4096, 4096, 132));       // 1024 large tiles
  CHECK(tile_gemm_takes_large(1024, 4096, 132));       // 256
  CHECK_FALSE(tile_gemm_takes_large(256, 4096, 132));  // 64 large tiles < 132 SMs: 256 small ones
  CHECK(tile_gemm_takes_large(256, 4096, 64));
  CHECK_FALSE(tile_gemm_takes_large(64, 1 << 20, 1));  // M <= 64: the small tile whatever N
  CHECK(tile_gemm_takes_large(65, 128 * 108, 108));
}

TEST_CASE("tile_gemm_f16 rejects bad arguments with a message naming the argument") {
  llmk::DeviceBuffer<llmk::half> a(64 * 64), b(64 * 64);
  llmk::DeviceBuffer<float> d(64 * 64);
  auto run = [&](const llmk::half* pa, std::int64_t lda, int m, int n, int k, float beta, std::int64_t ldd) {
    return llmk::gemm::tile_gemm_f16(pa, lda, b.data(), 64, nullptr, 64, d.data(), ldd, m, n, k, 1.0f, beta,
                                     nullptr);
  };
  auto expect = [](const llmk::Status& s, const char* needle) {
    CHECK_FALSE(s.ok());
    CHECK(s.code() == llmk::Status::Code::kInvalidArgument);
    CHECK_MESSAGE(s.message().find(needle) != std::string::npos, s.message());
  };
  expect(run(nullptr, 64, 16, 16, 16, 0.0f, 64), "'a'");
  expect(run(a.data(), 64, 16, 16, 20, 0.0f, 64), "'k': must be a multiple of 8");
  expect(run(a.data(), 60, 16, 16, 16, 0.0f, 64), "'lda'");
  expect(run(a.data(), 8, 16, 16, 16, 0.0f, 64), "'lda'");
  expect(run(a.data() + 1, 64, 16, 16, 16, 0.0f, 64), "'a': must be 16-byte aligned");
  expect(run(a.data(), 64, 0, 16, 16, 0.0f, 64), "'m'");
  expect(run(a.data(), 64, 16, 16, 16, 1.0f, 64), "'c': must not be null when beta != 0");
  expect(run(a.data(), 64, 16, 32, 16, 0.0f, 16), "'ldd'");
  // Sizes past the 32-bit tile arithmetic (K in bytes: 2^31 at K = 2^30); rejected before any access.
  expect(run(a.data(), 1 << 30, 1, 16, 1 << 30, 0.0f, 64), "'m/n/k': must be M, N <= 2^30 and K < 2^30");
  expect(run(a.data(), 64, 16, (1 << 30) + 8, 16, 0.0f, (1 << 30) + 8), "'m/n/k'");
}
