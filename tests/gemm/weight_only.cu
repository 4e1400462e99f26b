// Tests of llmk::gemm::weight_only_* (W4A16 / W8A16) against the fp64 host reference, in the simulator (and
// on a GPU): repacking (host == device bytes, round trip), act-order permutation, the GEMM over shapes, group
// sizes, zero points, bit widths, dtypes, act-order and bias, and the launcher's argument checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/weight_only.cuh"
#include "llmk/reference/weight_only.hpp"
#include "support/test_env.hpp"
#include "weight_only_fixtures.hpp"

#if defined(LLMK_SIM)
namespace {
// The simulator plays an sm_80 here: these cases test the mma.sync tiles (which an sm_90 takes for M <= 16
// and for the shapes the Hopper kernel does not), and tests/gemm/weight_only_sm90.cu tests the Hopper kernel.
// An LLMK_SIM_ARCH set by the caller wins. A GPU runs whichever kernel its own architecture takes.
[[maybe_unused]] const bool kSimAsSm80 = setenv("LLMK_SIM_ARCH", "800", 0) == 0;
}  // namespace
#endif

TEST_CASE("weight_only repack: host and device give the same bytes, unpack round-trips") {
  std::mt19937 rng(101);
  for (int bits : {4, 8})
    for (bool act_order : {false, true}) {
      CAPTURE(bits);
      CAPTURE(act_order);
      const int n = 40, k = 96;  // N not a multiple of 16: padded columns hold code 0
      std::vector<std::uint8_t> plain = random_plain(n, k, bits, rng);
      std::vector<std::int32_t> perm(static_cast<std::size_t>(k));
      if (act_order) {
        std::vector<std::int32_t> g_idx = shuffled_g_idx(k, 32, rng);
        REQUIRE(llmk::gemm::act_order_permutation_host(g_idx.data(), k, 32, perm.data()).ok());
      }
      const std::int32_t* hperm = act_order ? perm.data() : nullptr;
      std::vector<std::uint8_t> packed = repack_host(plain, hperm, n, k, bits);

      llmk::DeviceBuffer<std::uint8_t> d_plain(plain);
      llmk::DeviceBuffer<std::int32_t> d_perm(perm);
      llmk::DeviceBuffer<std::uint8_t> d_packed(packed.size());  // poisoned
      llmk::gemm::WeightRepackArgs r{
          d_plain.data(), plain_ld(k, bits), act_order ? d_perm.data() : nullptr, d_packed.data(), n, k, bits,
          false};
      const llmk::Status s = llmk::gemm::weight_only_repack(r, nullptr);
      REQUIRE_MESSAGE(s.ok(), s.message());
      CHECK(d_packed.to_host() == packed);

      std::vector<std::uint8_t> back(plain.size(), 0);
      REQUIRE(llmk::gemm::weight_only_unpack_host(packed.data(), n, k, bits, back.data(), plain_ld(k, bits))
                  .ok());
      if (!act_order) {
        CHECK(back == plain);
      } else {
        int bad = 0;
        for (int row = 0; row < n; ++row)
          for (int col = 0; col < k; ++col) {
            auto code = [&](const std::vector<std::uint8_t>& w, int c) {
              const std::uint8_t b =
                  w[static_cast<std::size_t>(row) * plain_ld(k, bits) + (bits == 4 ? c / 2 : c)];
              return bits == 4 ? (b >> (4 * (c % 2))) & 0xF : int(b);
            };
            bad += code(back, col) != code(plain, perm[static_cast<std::size_t>(col)]);
          }
        CHECK(bad == 0);
      }
      // Spot-check the documented fragment layout: lane 5 (g = 1, t = 1) of tile (0, 0) owns bytes 80..95;
      // its word 0 is k16 step 0, where 4-bit nibble p = (2j + r) + 4h holds code (n = 8j + 1, k = 2 + 8r +
      // h).
      if (bits == 4 && !act_order) {
        std::uint32_t word;
        std::memcpy(&word, packed.data() + 5 * 16, 4);
        for (int p = 0; p < 8; ++p) {
          const int i = p % 4, h = p / 4, j = i / 2, rr = i % 2;
          const int nn = 8 * j + 1, kk = 2 + 8 * rr + h;
          const int want = (plain[static_cast<std::size_t>(nn) * (k / 2) + kk / 2] >> (4 * (kk % 2))) & 0xF;
          CHECK(int((word >> (4 * p)) & 0xF) == want);
        }
      }
    }
}

TEST_CASE("weight_only repack of signed codes stores q + 8 / q + 128 (host and device)") {
  std::mt19937 rng(5);
  for (int bits : {4, 8}) {
    const int n = 16, k = 32;
    std::vector<std::uint8_t> plain = random_plain(n, k, bits, rng);
    std::vector<std::uint8_t> packed = repack_host(plain, nullptr, n, k, bits, true);
    {  // the device repack stores the same bytes (the GEMM then reads u = q + 8 / q + 128 like any code)
      llmk::DeviceBuffer<std::uint8_t> d_plain(plain), d_packed(packed.size());  // poisoned
      const llmk::gemm::WeightRepackArgs r{
          d_plain.data(), plain_ld(k, bits), nullptr, d_packed.data(), n, k, bits, true};
      const llmk::Status s = llmk::gemm::weight_only_repack(r, nullptr);
      REQUIRE_MESSAGE(s.ok(), s.message());
      CHECK(d_packed.to_host() == packed);
    }
    std::vector<std::uint8_t> back(plain.size());
    REQUIRE(
        llmk::gemm::weight_only_unpack_host(packed.data(), n, k, bits, back.data(), plain_ld(k, bits)).ok());
    // The repack's bounds: K past 2^30 would overflow the tile count of a code's position.
    const llmk::Status big = llmk::gemm::weight_only_unpack_host(packed.data(), n, (1 << 30) + 16, bits,
                                                                 back.data(), std::int64_t{1} << 30);
    CHECK(big.message().find("'k': must be <= 2^30") != std::string::npos);
    for (std::size_t i = 0; i < plain.size(); ++i) {
      const int flip = bits == 4 ? 0x88 : 0x80;  // q + 8 == q ^ 8 on a nibble, q + 128 == q ^ 0x80 on a byte
      CHECK(back[i] == (plain[i] ^ flip));
    }
  }
}

TEST_CASE("weight_only packed layout: bytes built from the documented formula equal the repack's") {
  // Written from docs/gemm.md ("The packed layout"), not from the library: TK = 64 (4-bit) or 32 (8-bit);
  // tile = nt * ceil(K / TK) + kt, each 512 bytes; lane l = 4g + t owns the 16 bytes at 16 l: four 32-bit
  // words q; 4-bit: word q is k16 step q, code (j, r, h) its nibble p = (2j + r) + 4h; 8-bit: word q is
  // sub-tile j = q % 2 of step q / 2, code (r, h) its byte r + 2h; column n = 16 nt + 8j + g, k = TK kt + 16
  // step + 2t + 8r + h; padding (n >= N or k >= K) holds code 0.
  std::mt19937 rng(2024);
  for (int bits : {4, 8}) {
    CAPTURE(bits);
    const int n = 40, k = 80;  // N16 = 48: 3 strips, the last half padding; K = 80: a partial last tile
    std::vector<std::uint8_t> plain = random_plain(n, k, bits, rng);
    auto code = [&](int col, int kk) -> std::uint32_t {
      if (col >= n || kk >= k) return 0;
      const std::uint8_t b =
          plain[static_cast<std::size_t>(col) * plain_ld(k, bits) + (bits == 4 ? kk / 2 : kk)];
      return bits == 4 ? (b >> (4 * (kk % 2))) & 0xFu : b;
    };
    const int tk = bits == 4 ? 64 : 32, k_tiles = (k + tk - 1) / tk, strips = (n + 15) / 16;
    std::vector<std::uint8_t> want(static_cast<std::size_t>(strips) * k_tiles * 512, 0xAB);
    for (int nt = 0; nt < strips; ++nt)
      for (int kt = 0; kt < k_tiles; ++kt)
        for (int l = 0; l < 32; ++l) {
          const int g = l / 4, t = l % 4;
          std::uint32_t words[4] = {0, 0, 0, 0};
          for (int q = 0; q < 4; ++q)
            for (int j = 0; j < 2; ++j)
              for (int r = 0; r < 2; ++r)
                for (int h = 0; h < 2; ++h) {
                  const int step = bits == 4 ? q : q / 2;
                  if (bits == 8 && j != q % 2) continue;
                  const std::uint32_t c = code(16 * nt + 8 * j + g, tk * kt + 16 * step + 2 * t + 8 * r + h);
                  words[q] |= bits == 4 ? c << (4 * ((2 * j + r) + 4 * h)) : c << (8 * (r + 2 * h));
                }
          std::memcpy(want.data() + static_cast<std::size_t>(nt * k_tiles + kt) * 512 + l * 16, words,
                      16);  // little-endian, as on the GPU
        }
    CHECK(repack_host(plain, nullptr, n, k, bits) == want);
    llmk::DeviceBuffer<std::uint8_t> d_plain(plain), d_packed(want.size());
    const llmk::gemm::WeightRepackArgs r{
        d_plain.data(), plain_ld(k, bits), nullptr, d_packed.data(), n, k, bits, false};
    const llmk::Status s = llmk::gemm::weight_only_repack(r, nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(d_packed.to_host() == want);
  }
}

TEST_CASE("weight_only act-order permutation: host == device, stable, malformed g_idx rejected") {
  std::mt19937 rng(17);
  const int k = 256, group = 64;
  std::vector<std::int32_t> g_idx = shuffled_g_idx(k, group, rng);
  std::vector<std::int32_t> perm(static_cast<std::size_t>(k));
  REQUIRE(llmk::gemm::act_order_permutation_host(g_idx.data(), k, group, perm.data()).ok());
  for (int i = 0; i < k; ++i)
    CHECK(g_idx[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])] == i / group);
  for (int i = 1; i < k; ++i)
    if (i % group != 0)
      CHECK(perm[static_cast<std::size_t>(i)] > perm[static_cast<std::size_t>(i - 1)]);  // stable
  llmk::DeviceBuffer<std::int32_t> d_g(g_idx), d_perm(static_cast<std::size_t>(k));
  REQUIRE(llmk::gemm::act_order_permutation(d_g.data(), k, group, d_perm.data(), nullptr).ok());
  CHECK(d_perm.to_host() == perm);

  g_idx[0] = (g_idx[0] + 1) % (k / group);  // one group now has G + 1 columns, another G - 1
  const llmk::Status s = llmk::gemm::act_order_permutation_host(g_idx.data(), k, group, perm.data());
  CHECK_FALSE(s.ok());
  CHECK_MESSAGE(s.message().find("'g_idx'") != std::string::npos, s.message());
  d_g.upload(g_idx);
  REQUIRE(llmk::gemm::act_order_permutation(d_g.data(), k, group, d_perm.data(), nullptr).ok());
  std::vector<std::int32_t> dev = d_perm.to_host();
  CHECK(std::count(dev.begin(), dev.end(), -1) == 1);
}

TEST_CASE("weight_only act-order permutation with caller-owned storage: the same slots and -1s") {
  std::mt19937 rng(17);
  const int k = 256, group = 64;
  std::vector<std::int32_t> g_idx = shuffled_g_idx(k, group, rng);
  std::vector<std::int32_t> perm(static_cast<std::size_t>(k));
  REQUIRE(llmk::gemm::act_order_permutation_host(g_idx.data(), k, group, perm.data()).ok());
  for (int i = 0; i < k; ++i)
    CHECK(g_idx[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])] == i / group);
  for (int i = 1; i < k; ++i)
    if (i % group != 0)
      CHECK(perm[static_cast<std::size_t>(i)] > perm[static_cast<std::size_t>(i - 1)]);  // stable
  llmk::DeviceBuffer<std::int32_t> d_g(g_idx), d_perm(static_cast<std::size_t>(k));
  std::size_t temp_bytes = 0;
  REQUIRE(
      llmk::gemm::act_order_permutation(nullptr, &temp_bytes, d_g.data(), k, group, d_perm.data(), nullptr)
          .ok());
  llmk::DeviceBuffer<unsigned char> temp(temp_bytes);
  d_perm.poison();
  REQUIRE(llmk::gemm::act_order_permutation(temp.data(), &temp_bytes, d_g.data(), k, group, d_perm.data(),
                                            nullptr)
              .ok());
  CHECK(d_perm.to_host() == perm);

  g_idx[0] = (g_idx[0] + 1) % (k / group);  // one group now has G + 1 columns, another G - 1
  const llmk::Status s = llmk::gemm::act_order_permutation_host(g_idx.data(), k, group, perm.data());
  CHECK_FALSE(s.ok());
  CHECK_MESSAGE(s.message().find("'g_idx'") != std::string::npos, s.message());
  d_g.upload(g_idx);
  REQUIRE(llmk::gemm::act_order_permutation(temp.data(), &temp_bytes, d_g.data(), k, group, d_perm.data(),
                                            nullptr)
              .ok());
  std::vector<std::int32_t> dev = d_perm.to_host();
  // Slot g G + c: the c-th column of group g, or -1 when the group has c or fewer (entries outside
  // [0, K / G) are in no group): the group that lost a column leaves one -1, the one that gained keeps G.
  auto slots = [&] {
    std::vector<std::int32_t> want(static_cast<std::size_t>(k), -1);
    for (int g = 0; g < k / group; ++g)
      for (int i = 0, c = 0; i < k && c < group; ++i)
        if (g_idx[static_cast<std::size_t>(i)] == g) want[static_cast<std::size_t>(g * group + c++)] = i;
    return want;
  };
  CHECK(dev == slots());
  CHECK(std::count(dev.begin(), dev.end(), -1) == 1);
  g_idx[1] = k / group;  // out of range (and g_idx[2] negative): two more columns in no group
  g_idx[2] = -1;
  d_g.upload(g_idx);
  d_perm.poison();
  REQUIRE(llmk::gemm::act_order_permutation(temp.data(), &temp_bytes, d_g.data(), k, group, d_perm.data(),
                                            nullptr)
              .ok());
  CHECK(d_perm.to_host() == slots());
  std::size_t small = temp_bytes - 1;
  CHECK(llmk::gemm::act_order_permutation(temp.data(), &small, d_g.data(), k, group, d_perm.data(), nullptr)
            .message()
            .find("'temp_bytes'") != std::string::npos);
}

TEST_CASE("weight_only W4A16 fp16 over M in {1, 7, 33, 128, 257}, N and K not multiples of the tile") {
  std::mt19937 rng(2026);
  const std::vector<int> ms =
      llmk::test::fast() ? std::vector<int>{1, 33, 129} : std::vector<int>{1, 7, 33, 128, 257};
  for (int m : ms) check_gemm<llmk::half>({m, 200, 320, 64, 4, true, false, true, 3}, rng);
}

TEST_CASE("weight_only W4A16 fp16 group sizes 32, 64, 128 and per-channel, with and without zero points") {
  std::mt19937 rng(7);
  const int k = 384;
  for (int m : {1, 40})
    for (int g : {32, 64, 128, k}) {
      check_gemm<llmk::half>({m, 136, k, g, 4, true, false, false}, rng);
      if (!llmk::test::fast()) check_gemm<llmk::half>({m, 136, k, g, 4, false, false, true}, rng);
    }
}

TEST_CASE("weight_only W8A16 fp16, W4A16 and W8A16 bf16") {
  std::mt19937 rng(99);
  for (int m : {7, 100}) {
    check_gemm<llmk::half>({m, 72, 256, 128, 8, true, false, true}, rng);
    check_gemm<llmk::half>({m, 72, 256, 256, 8, false, false, false}, rng);
    check_gemm<llmk::bfloat16>({m, 72, 256, 64, 4, true, false, true}, rng);
    check_gemm<llmk::bfloat16>({m, 72, 256, 256, 4, false, false, false}, rng);
    check_gemm<llmk::bfloat16>({m, 72, 256, 32, 8, true, false, true}, rng);
    check_gemm<llmk::bfloat16>({m, 72, 256, 256, 8, false, false, false}, rng);
  }
  // M > 128: the large tile (plan tile 2, WeightOnlyLargeM) with 8-bit codes and bf16 (its other cases are
  // 4-bit fp16), zero points and bias, ldd = N + 3 (the padding stays poisoned), no split.
  check_gemm<llmk::bfloat16>({200, 72, 256, 64, 8, true, false, true, 3, 1, 2}, rng);
}

TEST_CASE("weight_only scales through the cp.async ring (G % 64 == 0) and from global memory (other G, N)") {
  // With G % 64 == 0, N % 8 == 0 (N % 16 == 0 with zero points) and 16-byte aligned scales / zeros, the
  // small- and medium-M tiles stage each slice's scales and zero points with A and W (no global load in the
  // main loop): G = 64 puts two groups in a 128-wide slice (and in each warp's 8-step run of the 4-bit small
  // tile's 256-wide slices), G = 192 straddles slices (and, at K = 576, leaves the 4-bit small tile a last
  // run whose second half is past K), G = K is per-channel. G = 16 and 48 (a warp's run of 4 k16 steps
  // crosses groups) and N = 72 with zero points take the global path.
  std::mt19937 rng(707);
  for (int m : {5, 40}) {
    check_gemm<llmk::half>({m, 64, 384, 64, 4, true, false, true}, rng);
    check_gemm<llmk::half>({m, 48, 576, 192, 4, true, true, false}, rng);
    check_gemm<llmk::bfloat16>({m, 80, 384, 384, 8, true, false, true}, rng);
    check_gemm<llmk::half>({m, 64, 192, 16, 4, true, false, true}, rng);
    check_gemm<llmk::bfloat16>({m, 72, 192, 48, 8, false, false, false}, rng);
  }
}

TEST_CASE("weight_only GPTQ act-order with a shuffled group index") {
  std::mt19937 rng(31);
  for (int m : {1, 65}) {
    check_gemm<llmk::half>({m, 96, 256, 32, 4, true, true, true}, rng);
    check_gemm<llmk::half>({m, 48, 512, 128, 4, false, true, false}, rng);
  }
  check_gemm<llmk::bfloat16>({20, 80, 192, 64, 8, true, true, true}, rng);
}

TEST_CASE("weight_only larger decode and prefill shapes") {
  std::mt19937 rng(4242);
  check_gemm<llmk::half>(
      {1, llmk::test::pick(1024, 256), llmk::test::pick(2048, 512), 128, 4, true, false, false}, rng);
  if (!llmk::test::fast()) check_gemm<llmk::half>({96, 256, 1024, 128, 4, true, true, true}, rng);
}

TEST_CASE("weight_only split-K: every split count and tile, staged and global scales, act-order") {
  // K = 1024 is 4 slices of the 4-bit small tile (BK = 256, M <= 16), 8 of the 8-bit small and the medium
  // tiles (BK = 128, M <= 128) and 16 of the large one (BK = 64); split_k s cuts them into at most s runs
  // (3 -> 3 x 3 slices, 5 -> 4 x 2, 16 -> 8 x 1 for BK = 128; 3 -> 2 x 2, 16 -> 4 x 1 for BK = 256).
  std::mt19937 rng(1717);
  for (int s : {2, 3, 16}) check_gemm<llmk::half>({1, 136, 1024, 128, 4, true, false, true, 0, s}, rng);
  check_gemm<llmk::half>({40, 72, 1024, 64, 8, true, false, false, 2, 5}, rng);      // N = 72 + zeros: global
  check_gemm<llmk::bfloat16>({100, 64, 512, 512, 4, false, true, true, 0, 3}, rng);  // medium, act-order
  check_gemm<llmk::half>({200, 72, 512, 128, 4, true, false, true, 0, 3}, rng);      // large tile
  // The last block sums 4-column quads of the partials (row pitch N rounded up to 4): N % 4 != 0 leaves a
  // partial quad at the edge, stored element by element; an odd ldd takes the element stores everywhere.
  check_gemm<llmk::half>({5, 70, 512, 128, 4, true, false, true, 3, 3}, rng);
  check_gemm<llmk::half>({5, 70, 512, 128, 4, true, false, true, 0, 4}, rng);
  check_gemm<llmk::bfloat16>({33, 37, 256, 64, 8, false, false, true, 0, 2}, rng);  // medium, N % 4 = 1
  if (!llmk::test::fast()) {
    check_gemm<llmk::bfloat16>({9, 48, 768, 48, 8, true, false, true, 0, 4}, rng);
    check_gemm<llmk::half>({3, 4096, 4096, 128, 4, true, false, false, 0, 0}, rng);  // the SM heuristic
  }
}

// Special values (docs/gemm.md, "Special values"): check_special_values (weight_only_fixtures.hpp: a NaN
// activation row, dequantized fp16 weights past 65504 as +-Inf, Inf * 0 = NaN, a -Inf bias, an output past
// 65504) on the small tile (M = 5) and on the medium tile (M = 20), unsplit and split in two; even ldd (pair
// stores) and odd (element stores).
TEST_CASE("weight_only special values: NaN rows, fp16 dequantization overflow to +-Inf, Inf * 0, split-K") {
  std::mt19937 rng(3131);
#if defined(LLMK_SIM)
  const int small = 0, medium = 1;  // the simulated sm_80's tiles
#else
  const int small = -1, medium = -1;  // whichever this GPU's plan takes
#endif
  check_special_values<llmk::half>(5, 64, 256, 1, 66, small, rng);
  check_special_values<llmk::half>(20, 64, 256, 1, 66, medium, rng);
  check_special_values<llmk::half>(20, 64, 256, 2, 67, medium, rng);  // 2 slices of 128
}

TEST_CASE("weight_only split-K: same bits on every call, arrival words reset, no workspace initialization") {
  std::mt19937 rng(4711);
  const int m = 5, n = 256, k = 1024, g = 128;
  std::vector<llmk::half> a = random_values<llmk::half>(static_cast<std::size_t>(m) * k, -1.0f, 1.0f, rng);
  std::vector<std::uint8_t> packed = repack_host(random_plain(n, k, 4, rng), nullptr, n, k, 4);
  std::vector<llmk::half> scales =
      random_values<llmk::half>(static_cast<std::size_t>(k / g) * n, 0.005f, 0.02f, rng);
  llmk::DeviceBuffer<llmk::half> d_a(a), d_s(scales), d_d(static_cast<std::size_t>(m) * n);
  llmk::DeviceBuffer<std::uint8_t> d_w(packed);
  llmk::gemm::WeightOnlyArgs<llmk::half> x;
  x.a = d_a.data();
  x.lda = k;
  x.w = d_w.data();
  x.w_bytes = static_cast<std::int64_t>(packed.size());
  x.scales = d_s.data();
  x.scales_size = static_cast<std::int64_t>(scales.size());
  x.d = d_d.data();
  x.ldd = n;
  x.m = m;
  x.n = n;
  x.k = k;
  x.group_size = g;
  x.split_k = 4;
  const llmk::gemm::detail::WoPlan plan = llmk::gemm::detail::wo_plan(x, llmk::device_sm_count());
  REQUIRE(plan.splits == 4);
  REQUIRE(plan.arrival_bytes > 0);
  const std::size_t bytes = llmk::gemm::weight_only_workspace_bytes(x);
  CHECK(bytes == plan.arrival_bytes + static_cast<std::size_t>(4) * m * n * sizeof(float));
  llmk::DeviceBuffer<unsigned char> ws(bytes);  // poisoned arrival words: they must count as none
  std::vector<std::vector<llmk::half>> outs;
  for (int call = 0; call < 3; ++call) {
    if (call == 2) {  // other work left arbitrary bytes in the workspace
      std::vector<unsigned char> junk(bytes);
      for (auto& b : junk) b = static_cast<unsigned char>(rng());
      ws.upload(junk);
    }
    d_d.poison();
    const llmk::Status s = llmk::gemm::weight_only_gemm(x, ws.data(), bytes, nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
    REQUIRE(llmk::device_synchronize().ok());
    outs.push_back(d_d.to_host());
    std::vector<unsigned char> after = ws.to_host();
    for (std::size_t i = 0; i < plan.arrival_bytes; i += sizeof(unsigned long long)) {
      unsigned long long word;
      std::memcpy(&word, after.data() + i, sizeof(word));
      if (i < static_cast<std::size_t>(plan.m_tiles) * plan.n_tiles * sizeof(word)) CHECK(word == 0ull);
    }
  }
  auto same_bits = [](const std::vector<llmk::half>& u, const std::vector<llmk::half>& v) {
    for (std::size_t i = 0; i < u.size(); ++i)
      if (u[i].bits != v[i].bits) return false;
    return true;
  };
  CHECK(same_bits(outs[0], outs[1]));
  CHECK(same_bits(outs[0], outs[2]));
  auto message = [&](void* w, std::size_t b) {
    return llmk::gemm::weight_only_gemm(x, w, b, nullptr).message();
  };
  x.split_k = 17;
  CHECK(message(ws.data(), bytes).find("'split_k'") != std::string::npos);
  x.split_k = 4;
  CHECK(message(nullptr, 0).find("'workspace': must not be null: split-K") != std::string::npos);
  CHECK(message(ws.data(), bytes - 1).find("'workspace_bytes'") != std::string::npos);
  x.split_k = 1;
  CHECK(llmk::gemm::weight_only_workspace_bytes(x) == 0);
}

TEST_CASE("weight_only_gemm rejects bad arguments with a message naming the argument") {
  const int m = 16, n = 32, k = 128, g = 64;
  llmk::DeviceBuffer<llmk::half> a(static_cast<std::size_t>(m) * k + 8),
      scales(static_cast<std::size_t>(k / g) * n), d(static_cast<std::size_t>(m) * n);
  llmk::DeviceBuffer<std::uint8_t> w(llmk::gemm::weight_only_packed_bytes(n, k, 4) + 16);
  llmk::DeviceBuffer<std::int32_t> perm(static_cast<std::size_t>(k));
  auto base = [&] {
    llmk::gemm::WeightOnlyArgs<llmk::half> x;
    x.a = a.data();
    x.lda = k;
    x.w = w.data();
    x.w_bytes = static_cast<std::int64_t>(llmk::gemm::weight_only_packed_bytes(n, k, 4));
    x.scales = scales.data();
    x.scales_size = (k / g) * n;
    x.d = d.data();
    x.ldd = n;
    x.m = m;
    x.n = n;
    x.k = k;
    x.group_size = g;
    x.bits = 4;
    return x;
  };
  auto expect = [](const llmk::Status& s, const char* needle) {
    CHECK_FALSE(s.ok());
    CHECK(s.code() == llmk::Status::Code::kInvalidArgument);
    CHECK_MESSAGE(s.message().find(needle) != std::string::npos, s.message());
  };
  auto run = [](const llmk::gemm::WeightOnlyArgs<llmk::half>& x) {
    return llmk::gemm::weight_only_gemm(x, nullptr, 0, nullptr);
  };
  REQUIRE(run(base()).ok());
  REQUIRE(llmk::device_synchronize().ok());
  {
    auto x = base();
    x.a = nullptr;
    expect(run(x), "'a': must not be null");
  }
  {
    auto x = base();
    x.a = a.data() + 1;
    expect(run(x), "'a': must be 16-byte aligned");
  }
  {
    auto x = base();
    x.w = w.data() + 4;
    expect(run(x), "'w': must be 16-byte aligned");
  }
  {
    auto x = base();
    x.group_size = 48;  // multiple of 16, does not divide 128
    expect(run(x), "'group_size': must be a multiple of 16 that divides K");
  }
  {
    auto x = base();
    x.group_size = 8;
    expect(run(x), "'group_size'");
  }
  {
    auto x = base();
    x.k = 120;
    expect(run(x), "'k': must be a positive multiple of 16");
  }
  {
    auto x = base();
    x.scales_size = n;  // per-channel scales with group_size 64
    expect(run(x), "'scales_size': must equal (K / group_size) * N = 64");
  }
  {
    auto x = base();
    x.zeros = w.data();
    x.zeros_size = 3;
    expect(run(x), "'zeros_size'");
  }
  {
    auto x = base();
    x.w_bytes -= 16;
    expect(run(x), "'w_bytes'");
  }
  {
    auto x = base();
    x.bits = 3;
    expect(run(x), "'bits': must be 4 or 8");
  }
  {
    auto x = base();
    x.lda = k - 8;
    expect(run(x), "'lda'");
  }
  {
    auto x = base();
    x.ldd = n - 1;
    expect(run(x), "'ldd'");
  }
  {
    auto x = base();
    x.m = 0;
    expect(run(x), "'m'");
    x = base();
    x.n = (1 << 30) + 16;  // sizes derived from N and K stay far from int overflow
    expect(run(x), "'n': must be <= 2^30");
    x = base();
    x.k = (1 << 30) + 16;
    expect(run(x), "'k': must be <= 2^30");
  }
  {
    auto x = base();
    x.perm = perm.data();
    x.perm_size = k;
    expect(run(x), "'workspace': must not be null");
    llmk::DeviceBuffer<unsigned char> ws(llmk::gemm::weight_only_workspace_bytes(x));
    expect(llmk::gemm::weight_only_gemm(x, ws.data(), ws.size() - 1, nullptr), "'workspace_bytes'");
    x.perm_size = k - 1;
    expect(llmk::gemm::weight_only_gemm(x, ws.data(), ws.size(), nullptr), "'perm_size'");
  }
  // perm is read with 4-byte loads: one byte past an aligned pointer (never dereferenced) must be refused,
  // by the GEMM, the device and host repacks and the act-order permutation (with g_idx).
  auto off1 = [](auto* p) { return reinterpret_cast<decltype(p)>(reinterpret_cast<std::uintptr_t>(p) + 1); };
  {
    auto x = base();
    x.perm = off1(perm.data());
    x.perm_size = k;
    llmk::DeviceBuffer<unsigned char> ws(llmk::gemm::weight_only_workspace_bytes(x));
    expect(llmk::gemm::weight_only_gemm(x, ws.data(), ws.size(), nullptr), "'perm': must be aligned");
  }
  {
    llmk::DeviceBuffer<std::uint8_t> plain(static_cast<std::size_t>(n) * k / 2);
    llmk::gemm::WeightRepackArgs r{plain.data(), k / 2, off1(perm.data()), w.data(), n, k, 4, false};
    expect(llmk::gemm::weight_only_repack(r, nullptr), "'perm': must be 4-byte aligned");
    std::vector<std::uint8_t> h_plain(static_cast<std::size_t>(n) * k / 2),
        h_out(llmk::gemm::weight_only_packed_bytes(n, k, 4));
    std::vector<std::int32_t> h_perm(static_cast<std::size_t>(k) + 1);
    llmk::gemm::WeightRepackArgs rh{h_plain.data(), k / 2, off1(h_perm.data()), h_out.data(), n, k, 4, false};
    expect(llmk::gemm::weight_only_repack_host(rh), "'perm': must be 4-byte aligned");
  }
  {
    std::vector<std::int32_t> g_idx(static_cast<std::size_t>(k) + 1, 0),
        h_perm(static_cast<std::size_t>(k) + 1);
    expect(llmk::gemm::act_order_permutation_host(g_idx.data(), k, k, off1(h_perm.data())), "'perm'");
    expect(llmk::gemm::act_order_permutation_host(off1(g_idx.data()), k, k, h_perm.data()), "'g_idx'");
    llmk::DeviceBuffer<std::int32_t> d_g(static_cast<std::size_t>(k));
    std::size_t temp_bytes = 0;
    REQUIRE(
        llmk::gemm::act_order_permutation(nullptr, &temp_bytes, d_g.data(), k, k, perm.data(), nullptr).ok());
    llmk::DeviceBuffer<unsigned char> temp(temp_bytes);
    expect(llmk::gemm::act_order_permutation(temp.data(), &temp_bytes, d_g.data(), k, k, off1(perm.data()),
                                             nullptr),
           "'perm'");
  }
  {
    std::vector<std::uint8_t> plain(16 * 16), out(llmk::gemm::weight_only_packed_bytes(16, 32, 4));
    llmk::gemm::WeightRepackArgs r{plain.data(), 16, nullptr, out.data(), 16, 24, 4, false};
    expect(llmk::gemm::weight_only_repack_host(r), "'k'");
    r.k = 32;
    r.ld_bytes = 8;
    expect(llmk::gemm::weight_only_repack_host(r), "'ld_bytes'");
  }
}

// Edge shapes from review.
template <class T>
static void run_edge_case(int m, int n, int k, int G, int bits, bool zeros_on, bool act, std::int64_t lda,
                          std::int64_t ldd) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(G);
  CAPTURE(bits);
  CAPTURE(act);
  CAPTURE(lda);
  CAPTURE(ldd);
  std::mt19937 rng(m * 7 + n * 13 + k + bits);
  std::uniform_real_distribution<float> ud(-1.f, 1.f);
  std::vector<T> a(static_cast<std::size_t>(m) * lda, T(1000.0f));
  for (int i = 0; i < m; ++i)
    for (int c = 0; c < k; ++c) a[i * lda + c] = T(ud(rng));
  const std::int64_t pld = bits == 4 ? k / 2 : k;
  std::vector<std::uint8_t> plain(static_cast<std::size_t>(n) * pld);
  for (auto& b : plain) b = std::uint8_t(rng());
  const int groups = k / G;
  std::vector<T> scales(static_cast<std::size_t>(groups) * n);
  for (auto& s : scales) s = T(0.01f + 0.01f * std::fabs(ud(rng)));
  std::vector<std::uint8_t> zeros(scales.size());
  for (auto& z : zeros) z = std::uint8_t(rng() % (bits == 4 ? 16 : 256));
  std::vector<T> bias(n);
  for (auto& b : bias) b = T(ud(rng));
  std::vector<std::int32_t> g_idx, perm;
  if (act) {
    g_idx.resize(k);
    for (int i = 0; i < k; ++i) g_idx[i] = i / G;
    std::shuffle(g_idx.begin(), g_idx.end(), rng);
    perm.resize(k);
    REQUIRE(llmk::gemm::act_order_permutation_host(g_idx.data(), k, G, perm.data()).ok());
  }
  std::vector<std::uint8_t> packed(llmk::gemm::weight_only_packed_bytes(n, k, bits));
  llmk::gemm::WeightRepackArgs r{plain.data(), pld,  act ? perm.data() : nullptr, packed.data(), n, k,
                                 bits,         false};
  REQUIRE(llmk::gemm::weight_only_repack_host(r).ok());
  llmk::DeviceBuffer<T> da(a), ds(scales), db(bias), dd(static_cast<std::size_t>(m) * ldd);
  llmk::DeviceBuffer<std::uint8_t> dw(packed), dz(zeros);
  llmk::DeviceBuffer<std::int32_t> dp(act ? perm : std::vector<std::int32_t>{0});
  llmk::gemm::WeightOnlyArgs<T> x;
  x.a = da.data();
  x.lda = lda;
  x.w = dw.data();
  x.w_bytes = std::int64_t(packed.size());
  x.scales = ds.data();
  x.scales_size = std::int64_t(scales.size());
  if (zeros_on) {
    x.zeros = dz.data();
    x.zeros_size = std::int64_t(zeros.size());
  }
  if (act) {
    x.perm = dp.data();
    x.perm_size = k;
  }
  x.bias = db.data();
  x.d = dd.data();
  x.ldd = ldd;
  x.m = m;
  x.n = n;
  x.k = k;
  x.group_size = G;
  x.bits = bits;
  const std::size_t ws = llmk::gemm::weight_only_workspace_bytes(x);
  llmk::DeviceBuffer<unsigned char> dws(std::max<std::size_t>(ws, 16));
  auto st = llmk::gemm::weight_only_gemm(x, dws.data(), ws, nullptr);
  REQUIRE_MESSAGE(st.ok(), st.message());
  auto got = dd.to_host();
  // reference needs contiguous a
  std::vector<T> ac(static_cast<std::size_t>(m) * k);
  for (int i = 0; i < m; ++i)
    for (int c = 0; c < k; ++c) ac[i * k + c] = a[i * lda + c];
  std::vector<double> want(static_cast<std::size_t>(m) * n), mag(want.size());
  llmk::reference::weight_only_gemm(ac.data(), k, plain.data(), pld, bits, scales.data(),
                                    zeros_on ? zeros.data() : nullptr, act ? g_idx.data() : nullptr, G,
                                    bias.data(), m, n, k, want.data(), mag.data());
  int bad = 0;
  const double u = std::is_same_v<T, llmk::half> ? 0x1p-11 : 0x1p-8;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      const double g = static_cast<float>(got[i * ldd + j]), wv = want[i * n + j];
      const double tol = u * std::fabs(wv) + 2.0 * (k / 16 + 6) * std::ldexp(mag[i * n + j], -24) + 1e-6;
      if (!(std::fabs(g - wv) <= tol) && bad++ < 5)
        MESSAGE("D[" << i << "][" << j << "]=" << g << " want " << wv);
    }
    for (std::int64_t j = n; j < ldd; ++j)
      if (got[i * ldd + j].bits != 0xFFFF && bad++ < 5) MESSAGE("pad written " << i << "," << j);
  }
  CHECK(bad == 0);
}

TEST_CASE("weight-only: edge shapes (lda > K, N < 16, group 16, K = 16, act-order in the small-M config)") {
  run_edge_case<llmk::half>(3, 5, 16, 16, 4, true, false, 24, 7);
  run_edge_case<llmk::half>(1, 1, 32, 16, 8, false, false, 40, 1);
  run_edge_case<llmk::bfloat16>(9, 20, 48, 16, 8, true, true, 56, 21);
  run_edge_case<llmk::half>(70, 33, 80, 16, 4, true, true, 88, 35);
  run_edge_case<llmk::half>(30, 17, 144, 48, 4, false, true, 160, 18);
}
