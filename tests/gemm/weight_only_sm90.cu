// Tests of the Hopper weight-only kernel (llmk/gemm/weight_only_sm90.cuh) through weight_only_gemm, against
// the fp64 host reference: both token tiles (64 and 128), 4- and 8-bit codes, fp16 and bf16, zero points or
// none, bias, group sizes 64, 128 (two slices a group) and per-channel, act-order, M and N tails inside a
// tile, several tiles per block (the persistent loop, 2 simulated SMs) and more k-slices than ring slots,
// the TMA-store epilogue (16-byte rows of D) and plain stores (other ldd); which kernel the plan picks on
// sm_90 and on sm_80, and the shapes that keep the mma.sync kernels.
#include <doctest/doctest.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "llmk/gemm/weight_only.cuh"
#include "support/test_env.hpp"
#include "weight_only_fixtures.hpp"

namespace {

// Sets a simulator setting for the scope (ignored on a GPU, where the device decides).
struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name); }
};

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
  CHECK(tile() == 1);  // medium tile
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
  x.split_k = 2;  // split-K asked for: the mma.sync kernels split
  CHECK(tile() == 2);
}
