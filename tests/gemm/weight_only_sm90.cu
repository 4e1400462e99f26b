// Tests of the Hopper weight-only kernel (llmk/gemm/weight_only_sm90.cuh) through weight_only_gemm, against
// the fp64 host reference: both token tiles (64 and 128), 4- and 8-bit codes, fp16 and bf16, zero points or
// none, bias, group sizes 64, 128 (two slices a group) and per-channel, act-order, M and N tails inside a
// tile, several tiles per block (the persistent loop, 2 simulated SMs) and more k-slices than ring slots,
// the TMA-store epilogue (16-byte rows of D) and plain stores (other ldd); which kernel the plan picks on
// sm_90 and on sm_80, and the shapes that keep the mma.sync kernels; split-K (the plan's counts, given and
// heuristic splits, several units a block, act-order).
#include <doctest/doctest.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "llmk/gemm/weight_only.cuh"
#include "support/test_env.hpp"
#include "weight_only_fixtures.hpp"

namespace {

using llmk::test::ScopedEnv;

bool hopper_here() {
  return llmk::device_arch() == 900 && llmk::sm90a_runnable<llmk::gemm::WeightOnlySm90Config<>>();
}

constexpr int kHopper = 3;

}  // namespace

TEST_CASE(
    "weight_only sm90: both token tiles, 4/8-bit, fp16/bf16, zero points, bias, tails, TMA / plain stores") {
  if (!hopper_here()) return;
  std::mt19937 rng(9090);
  // 132 SMs: M = 150 and N = 144 make 3 x 2 tiles of 64 tokens in one wave (token tile 64); D rows of 16
  // bytes (TMA store) and ldd = N + 3 (plain stores).
  check_gemm<llmk::half>({150, 144, 256, 64, 4, true, false, true, 0, 0, kHopper, 64}, rng);
  check_gemm<llmk::half>({200, 136, 384, 128, 8, false, false, true, 3, 0, kHopper, 64}, rng);
  check_gemm<llmk::bfloat16>({140, 80, 320, 64, 8, true, true, true, 0, 0, kHopper, 64}, rng);
#if defined(LLMK_SIM)
  {
    // 2 simulated SMs: every block walks several tiles; 128-token tiles; K = 768 is 12 slices for 6 ring
    // slots.
    ScopedEnv two_sms("LLMK_SIM_SM_COUNT", "2");
    check_gemm<llmk::bfloat16>({250, 128, 768, 768, 4, true, false, false, 0, 0, kHopper, 128}, rng);
    check_gemm<llmk::half>({256, 256, 192, 64, 4, false, true, true, 5, 0, kHopper, 128}, rng);
    if (!llmk::test::fast())
      check_gemm<llmk::half>({500, 272, 1024, 128, 8, true, false, true, 0, 0, kHopper, 128}, rng);
  }
#else
  // A GPU has its own SM count: more tiles than SMs (16 x 16 of 128 tokens), 12 slices, both store paths.
  check_gemm<llmk::bfloat16>({2048, 2048, 768, 768, 4, true, false, false, 0, 0, kHopper, 0}, rng);
  check_gemm<llmk::half>({2000, 2048, 512, 64, 8, false, true, true, 5, 0, kHopper, 0}, rng);
#endif
}

TEST_CASE("weight_only sm90: the plan takes the Hopper kernel only where it applies") {
  std::mt19937 rng(9191);
#if defined(LLMK_SIM)
  // The same problem on a simulated sm_80: the mma.sync large tile, same answer.
  {
    ScopedEnv sm80("LLMK_SIM_ARCH", "800");
    check_gemm<llmk::half>({150, 144, 256, 64, 4, true, false, true, 0, 0, 2}, rng);
  }
#endif
  if (!hopper_here()) return;
  llmk::gemm::WeightOnlyArgs<llmk::half> x;
  alignas(16) static llmk::half scales[16];
  alignas(16) static std::uint8_t zeros[16];
  x.m = 256, x.n = 4096, x.k = 4096, x.group_size = 128, x.bits = 4, x.scales = scales, x.zeros = zeros;
  const auto tile = [&] { return llmk::gemm::detail::wo_plan(x, 132).tile; };
  CHECK(tile() == kHopper);
  CHECK(llmk::gemm::detail::wo_plan(x, 132).token_tile == 64);  // 128 tiles of 64 tokens, not 64 of 128
  x.m = 4096;
  CHECK(llmk::gemm::detail::wo_plan(x, 132).token_tile == 128);
  x.m = llmk::gemm::kWeightOnlySm90MinM;
  CHECK(tile() == 0);  // M <= 16: the mma.sync decode tile
  x.m = 256;
  x.group_size = 32;  // a 64-wide slice would cross groups
  CHECK(tile() == 2);
  x.group_size = 128;
  x.n = 4104;  // N % 16 != 0 with zero points (the zero rows' TMA stride)
  CHECK(tile() == 2);
  x.zeros = nullptr;
  CHECK(tile() == kHopper);  // N % 8 == 0 suffices without
  x.scales = scales + 1;     // scales not 16-byte aligned
  CHECK(tile() == 2);
  x.scales = scales;
  x.bits = 8, x.k = (1 << 29) + 128;  // 8-bit codes past K = 2^29: TMA coordinates past 2^31
  CHECK(tile() == 2);
  x.k = 1 << 29;
  CHECK(tile() == kHopper);
  x.bits = 4, x.k = 4096;
  x.split_k = 2;  // split-K asked for: the Hopper kernel splits too
  CHECK(tile() == kHopper);
  CHECK(llmk::gemm::detail::wo_plan(x, 132).splits == 2);
  // WeightOnlyArgs::kernel overrides the choice by M.
  x.split_k = 0;
  x.kernel = llmk::gemm::WeightOnlyKernel::kMmaSync;
  CHECK(tile() == 2);
  x.m = 40;
  CHECK(tile() == 1);
  x.kernel = llmk::gemm::WeightOnlyKernel::kHopper;
  x.m = 1;
  CHECK(tile() == kHopper);
  CHECK(llmk::gemm::detail::wo_plan(x, 132).splits == 4);  // 32 tiles of 64 tokens x 4 splits
}

TEST_CASE("weight_only sm90: kernel = kHopper at decode-sized M, and where it cannot run") {
  std::mt19937 rng(9393);
  const llmk::gemm::WeightOnlyKernel hopper = llmk::gemm::WeightOnlyKernel::kHopper;
  if (hopper_here()) {
    // M = 1 and 5 on the Hopper kernel (64-token tiles, rows 1.. of the activation box are TMA's zero fill),
    // split 4 ways by the heuristic and 3 given.
    for (const auto& [m, split] : {std::pair{1, 0}, std::pair{5, 3}}) {
      Case c{m, 128, 512, 128, 4, true, false, true, 0, split, kHopper, 64};
      c.kernel = hopper;
      check_gemm<llmk::half>(c, rng);
    }
  }
  // Where the Hopper kernel cannot run, kHopper is an error naming `kernel` (kAuto would take mma.sync).
  alignas(16) static llmk::half buf[64];
  llmk::gemm::WeightOnlyArgs<llmk::half> x;
  x.a = buf, x.lda = 64, x.w = buf, x.scales = buf, x.d = buf, x.ldd = 16;
  x.m = 1, x.n = 16, x.k = 64, x.group_size = 32, x.bits = 4;  // G = 32: a 64-wide slice crosses groups
  x.w_bytes = static_cast<std::int64_t>(llmk::gemm::weight_only_packed_bytes(16, 64, 4));
  x.scales_size = 2 * 16;
  x.kernel = hopper;
  const llmk::Status s = llmk::gemm::weight_only_validate(x, nullptr, 0);
  CHECK(s.message().find("'kernel'") != std::string::npos);
  x.kernel = static_cast<llmk::gemm::WeightOnlyKernel>(7);
  CHECK(llmk::gemm::weight_only_validate(x, nullptr, 0).message().find("'kernel'") != std::string::npos);
  x.kernel = llmk::gemm::WeightOnlyKernel::kAuto;
  CHECK(llmk::gemm::weight_only_validate(x, nullptr, 0).ok());
}

TEST_CASE("weight_only sm90: split counts on 132 SMs (the fewest rounds x slices)") {
  if (!hopper_here()) return;
  alignas(16) static llmk::half scales[16];
  alignas(16) static std::uint8_t zeros[16];
  llmk::gemm::WeightOnlyArgs<llmk::half> x;
  x.group_size = 128, x.scales = scales, x.zeros = zeros;
  x.kernel = llmk::gemm::WeightOnlyKernel::kHopper;  // also at M = 1 (kAuto: M > 16)
  // (M, N, K, bits) -> token tile, tiles, splits: S minimizing rounds x slices a unit (ceil(tiles S / 132)
  // ceil(slices / S), a larger S only for a 5% gain), at least 2 slices of 64 each, the partials' traffic at
  // most twice the weights' (S <= K bits / 32 M), at most 16.
  struct Want {
    int m, n, k, bits, token_tile, tiles, splits;
  };
  for (const Want& w : {Want{17, 4096, 4096, 8, 64, 32, 4}, Want{32, 4096, 4096, 4, 64, 32, 4},
                        Want{64, 4096, 4096, 4, 64, 32, 4}, Want{128, 4096, 4096, 4, 64, 64, 2},
                        Want{128, 4096, 11008, 4, 64, 64, 2}, Want{64, 11008, 4096, 4, 64, 86, 3},
                        Want{256, 4096, 4096, 4, 64, 128, 1}, Want{32, 1024, 4096, 4, 64, 8, 16},
                        Want{1, 28672, 4096, 4, 64, 224, 4}, Want{128, 14336, 4096, 4, 128, 112, 1},
                        Want{17, 1024, 256, 8, 64, 8, 2}}) {
    CAPTURE(w.m);
    CAPTURE(w.n);
    CAPTURE(w.k);
    x.m = w.m, x.n = w.n, x.k = w.k, x.bits = w.bits;
    const llmk::gemm::detail::WoPlan p = llmk::gemm::detail::wo_plan(x, 132);
    CHECK(p.tile == kHopper);
    CHECK(p.token_tile == w.token_tile);
    CHECK(p.m_tiles * p.n_tiles == w.tiles);
    CHECK(p.splits == w.splits);
    CHECK((p.splits > 1) == (p.partial_bytes > 0));
  }
}

TEST_CASE("weight_only sm90: split-K (heuristic and given), several units a block, tails, act-order") {
  if (!hopper_here()) return;
  std::mt19937 rng(9292);
  // One tile, 16 slices: 8 splits of 2 (by the SM count; the partials' traffic would allow 12).
  check_gemm<llmk::half>({20, 64, 1024, 128, 8, true, false, true, 0, 0, kHopper, 64}, rng);
  // Given split counts: 3 over 8 slices (3, 3, 2) with an odd ldd (element stores in the reduction); at
  // most 5 with act-order (4 of 2 slices).
  check_gemm<llmk::half>({40, 144, 512, 64, 4, true, false, true, 3, 3, kHopper, 64}, rng);
  check_gemm<llmk::bfloat16>({24, 80, 512, 128, 4, false, true, true, 0, 5, kHopper, 64}, rng);
#if defined(LLMK_SIM)
  {
    // 2 simulated SMs, several units a block, the reductions between other units' main loops: one 128-token
    // tile (a token tail) x 2 column tiles x 3 splits = 6 units; 3 x 2 tiles of 64 tokens x 2 splits = 12.
    ScopedEnv two_sms("LLMK_SIM_SM_COUNT", "2");
    check_gemm<llmk::half>({100, 144, 768, 768, 4, false, false, true, 0, 3, kHopper, 128}, rng);
    check_gemm<llmk::bfloat16>({150, 136, 384, 64, 8, false, false, false, 0, 2, kHopper, 64}, rng);
  }
#endif
}

// Special values (docs/gemm.md, "Special values") on the Hopper kernel: check_special_values
// (weight_only_fixtures.hpp: a NaN activation row, dequantized fp16 weights past 65504 as +-Inf, Inf * 0 =
// NaN, a -Inf bias, an output past 65504), unsplit with 16-byte rows of D (the TMA store; ldd = N + 8, the
// padding poisoned) and split in two (4 slices of 64) with ldd = N + 3.
TEST_CASE("weight_only sm90 special values: NaN rows, fp16 dequantization overflow, Inf * 0, split-K") {
  if (!hopper_here()) return;
  std::mt19937 rng(9494);
  check_special_values<llmk::half>(20, 64, 256, 1, 72, kHopper, rng);
  check_special_values<llmk::half>(20, 64, 256, 2, 67, kHopper, rng);
}
