// Tests of the wgmma atoms (llmk/arch/sm90/wgmma.cuh) against a scalar reference: every type family, both A
// sources (shared memory, registers), K- and MN-major operands, every swizzle mode of the descriptor, several
// N, chained k-steps through advanced descriptors, +-1 scales, wrapping and saturating int32 accumulation;
// and the simulator's checks (accumulators read before wgmma.wait_group, a missing wgmma.fence, an incomplete
// warpgroup, shared memory written without fence.proxy.async).
//
// The shared-memory images and register fragments are built here from the PTX ISA's layout definitions (the
// canonical layouts: 8-row core matrices / swizzle atoms, 16-byte chunks XOR-ed with the row inside the 8-row
// group; the m64nN register fragments), not from the emulator's helpers. Inputs are small integers in every
// float format, so products and sums are exact and the GPU (sm90_wgmma_cuda) must match bit for bit too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmk/arch/sm90/bulk_copy.cuh"
#include "llmk/arch/sm90/wgmma.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "support/hopper.hpp"

namespace {

using namespace llmk::arch::sm90;

using llmk::test::hopper_available;

enum class Fmt { f16, bf16, e4m3, e5m2, s8, u8 };
int fmt_bytes(Fmt f) {
  return (f == Fmt::f16 || f == Fmt::bf16) ? 2 : 1;
}

// Code of the small integer v in format f (exactly representable for |v| <= 8; s8/u8 any in range).
std::uint32_t encode(Fmt f, int v) {
  switch (f) {
    case Fmt::f16:
      return llmk::half(static_cast<float>(v)).bits;
    case Fmt::bf16:
      return llmk::bfloat16(static_cast<float>(v)).bits;
    case Fmt::e4m3:
      return llmk::float8_e4m3::from_float_satfinite(static_cast<float>(v)).bits;
    case Fmt::e5m2:
      return llmk::float8_e5m2::from_float_satfinite(static_cast<float>(v)).bits;
    case Fmt::s8:
      return static_cast<std::uint8_t>(static_cast<std::int8_t>(v));
    case Fmt::u8:
      return static_cast<std::uint32_t>(v) & 0xFFu;
  }
  return 0;
}

// An operand's shared-memory layout: rows x kelems elements, as the PTX ISA's canonical layouts define them.
struct Layout {
  bool k_major = true;
  SmemSwizzle sw = SmemSwizzle::kNone;
  int es = 2;  // element bytes
  int rows = 64;
  int kelems = 16;
  std::uint32_t lbo = 0, sbo = 0;
  std::uint32_t step_bytes = 0;  // descriptor start advance per k-step (32 bytes of K)

  int chunks() const {  // 16-byte chunks in a swizzle row (W)
    return sw == SmemSwizzle::k128B ? 8 : sw == SmemSwizzle::k64B ? 4 : sw == SmemSwizzle::k32B ? 2 : 1;
  }
  std::uint32_t bytes() const { return static_cast<std::uint32_t>(rows * kelems * es); }

  static Layout make(bool k_major, SmemSwizzle sw, int es, int rows, int kelems) {
    Layout l{k_major, sw, es, rows, kelems};
    const int w = l.chunks();
    const int kbytes = kelems * es;
    if (k_major) {
      if (sw == SmemSwizzle::kNone) {
        l.lbo = 128;  // the K-neighbour core matrix (8 rows x 16 B) follows
        l.sbo = static_cast<std::uint32_t>(kbytes / 16 * 128);  // next 8 rows after all K core matrices
        l.step_bytes = 2 * l.lbo;
      } else {
        REQUIRE(kbytes == 16 * w);  // one swizzle atom across K
        l.lbo = 16;                 // unused
        l.sbo = static_cast<std::uint32_t>(8 * 16 * w);
        l.step_bytes = 32;
      }
    } else {
      const int mn_per_atom = 8 * w;  // 16-bit elements of M/N in one swizzle row
      REQUIRE(rows % mn_per_atom == 0);
      if (sw == SmemSwizzle::kNone) {
        l.lbo = 128;  // next 8 k-rows
        l.sbo = static_cast<std::uint32_t>(kelems / 8 * 128);
        l.step_bytes = 2 * l.lbo;
      } else {
        l.sbo = static_cast<std::uint32_t>(128 * w);               // next 8 k-rows
        l.lbo = static_cast<std::uint32_t>(kelems / 8 * 128 * w);  // next atom along M/N
        l.step_bytes = 2 * l.sbo;
      }
    }
    return l;
  }

  // Byte offset of element (r, k) from a tile start aligned to 1024 bytes.
  std::uint32_t offset(int r, int k) const {
    const int w = chunks();
    std::uint32_t linear;
    if (k_major) {
      const int kb = k * es;
      if (sw == SmemSwizzle::kNone)
        return static_cast<std::uint32_t>((r / 8) * static_cast<int>(sbo) + (r % 8) * 16 +
                                          (kb / 16) * static_cast<int>(lbo) + kb % 16);
      // rows of 16W bytes, 8 rows an atom
      linear = static_cast<std::uint32_t>((r / 8) * static_cast<int>(sbo) + (r % 8) * 16 * w + kb);
    } else {
      if (sw == SmemSwizzle::kNone)
        return static_cast<std::uint32_t>((r / 8) * static_cast<int>(sbo) + (r % 8) * 2 + (k % 8) * 16 +
                                          (k / 8) * static_cast<int>(lbo));
      linear = static_cast<std::uint32_t>((r % (8 * w)) * 2 + (r / (8 * w)) * static_cast<int>(lbo) +
                                          (k % 8) * 16 * w + (k / 8) * static_cast<int>(sbo));
    }
    // The 16-byte chunk index inside a 128-byte line is XOR-ed with the line index modulo W.
    const std::uint32_t line = (linear / 128) % static_cast<std::uint32_t>(w);
    const std::uint32_t chunk = (linear / 16) % 8;
    return (linear & ~0x70u) | (((chunk ^ line) & 7u) << 4);
  }
};

struct Params {
  std::uint32_t image_bytes;
  std::uint32_t b_base;  // offset of B's tile in the image
  std::uint32_t lbo_a, sbo_a, step_a, lbo_b, sbo_b, step_b;
  SmemSwizzle sw_a, sw_b;
  int steps;
  int accumulate_first;
  int read_early;  // 1: read the accumulators before the wait (the simulator must give poison)
};

// Issue functors: one call of an atom with the test's immediates.
template <class Atom, Major MA = Major::kK, Major MB = Major::kK, int SA = 1, int SB = 1>
struct Float16SS {
  template <int R>
  LLMK_DEVICE void operator()(float (&d)[R], std::uint64_t da, std::uint64_t db, bool acc) const {
    Atom::template fma<MA, MB, SA, SB>(d, da, db, acc);
  }
};
template <class Atom, Major MB = Major::kK, int SA = 1, int SB = 1>
struct Float16RS {
  template <int R>
  LLMK_DEVICE void operator()(float (&d)[R], const std::uint32_t (&a)[4], std::uint64_t db, bool acc) const {
    Atom::template fma<MB, SA, SB>(d, a, db, acc);
  }
};
template <class Atom>
struct Fp8SS {
  template <int R>
  LLMK_DEVICE void operator()(float (&d)[R], std::uint64_t da, std::uint64_t db, bool acc) const {
    Atom::fma(d, da, db, acc);
  }
};
template <class Atom>
struct Fp8RS {
  template <int R>
  LLMK_DEVICE void operator()(float (&d)[R], const std::uint32_t (&a)[4], std::uint64_t db, bool acc) const {
    Atom::fma(d, a, db, acc);
  }
};
template <class Atom>
struct IntSS {
  template <int R>
  LLMK_DEVICE void operator()(std::int32_t (&d)[R], std::uint64_t da, std::uint64_t db, bool acc) const {
    Atom::fma(d, da, db, acc);
  }
};
template <class Atom>
struct IntRS {
  template <int R>
  LLMK_DEVICE void operator()(std::int32_t (&d)[R], const std::uint32_t (&a)[4], std::uint64_t db,
                              bool acc) const {
    Atom::fma(d, a, db, acc);
  }
};

template <class Atom, class Acc, int N, bool kRs, class Issue>
__global__ void wgmma_kernel(const std::uint8_t* image, const std::uint32_t* a_regs, const Acc* c_in,
                             Acc* out, Params p, Issue issue) {
  unsigned char* tile = align_shared<1024>(llmk::dynamic_smem());
  for (std::uint32_t i = threadIdx.x; i < p.image_bytes; i += blockDim.x) tile[i] = image[i];
  fence_proxy_async();
  __syncthreads();
  const int tid = static_cast<int>(threadIdx.x);
  Acc d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = c_in[tid * (N / 2) + i];
  wgmma_fence();
  for (int s = 0; s < p.steps; ++s) {
    const std::uint64_t db = make_smem_desc(tile + p.b_base + s * p.step_b, p.lbo_b, p.sbo_b, p.sw_b);
    const bool acc = s > 0 || p.accumulate_first != 0;
    if constexpr (kRs) {
      std::uint32_t a[4];
      for (int r = 0; r < 4; ++r) a[r] = a_regs[(s * 128 + tid) * 4 + r];
      issue(d, a, db, acc);
    } else {
      const std::uint64_t da = make_smem_desc(tile + s * p.step_a, p.lbo_a, p.sbo_a, p.sw_a);
      issue(d, da, db, acc);
    }
  }
  wgmma_commit();
  if (p.read_early) {
    for (int i = 0; i < N / 2; ++i) out[tid * (N / 2) + i] = d[i];
    wgmma_wait<0>();
    return;
  }
  wgmma_wait<0>();
  for (int i = 0; i < N / 2; ++i) out[tid * (N / 2) + i] = d[i];
}

struct Case {
  Fmt fa, fb;
  Layout la, lb;  // la unused (rows/kelems only) for register A
  bool a_rs = false;
  int steps = 1;
  int sa = 1, sb = 1;
  bool accumulate_first = true;
  bool saturate = false;
  bool int_acc = false;
  bool extreme_c = false;  // C near the int32 limits (overflow on purpose)
};

// Runs `issue` (a lambda calling one atom) over the case and compares with the reference.
template <class Atom, class Acc, int N, bool kRs, class Issue>
void run_case(const Case& c, Issue issue, unsigned seed, bool read_early = false) {
  CAPTURE(seed);
  std::mt19937 rng(seed);
  const int es = fmt_bytes(c.fa);
  const int kstep = 32 / es;
  const int ktot = kstep * c.steps;
  auto small = [&](Fmt f) {
    if (f == Fmt::s8) return static_cast<int>(rng() % 256) - 128;
    if (f == Fmt::u8) return static_cast<int>(rng() % 256);
    return static_cast<int>(rng() % 17) - 8;
  };
  std::vector<int> A(64 * ktot), B(static_cast<std::size_t>(N) * ktot);
  for (int& v : A) v = small(c.fa);
  for (int& v : B) v = small(c.fb);

  // Shared-memory image: A's tile at 0, B's at the next 1024-byte boundary.
  const std::uint32_t a_bytes = kRs ? 0u : c.la.bytes();
  const std::uint32_t b_base = (a_bytes + 1023u) / 1024u * 1024u;
  std::vector<std::uint8_t> image(b_base + c.lb.bytes(), 0xAB);
  auto put = [&](std::uint32_t off, std::uint32_t code, int bytes) {
    for (int i = 0; i < bytes; ++i)
      image[off + static_cast<std::uint32_t>(i)] = static_cast<std::uint8_t>(code >> (8 * i));
  };
  if (!kRs)
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < ktot; ++k) put(c.la.offset(m, k), encode(c.fa, A[m * ktot + k]), es);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < ktot; ++k) put(b_base + c.lb.offset(n, k), encode(c.fb, B[n * ktot + k]), es);

  // A in registers: warp w holds rows 16w..16w+15 of each 64 x kstep slice (PTX "Register Fragments", wgmma
  // A).
  std::vector<std::uint32_t> regs(static_cast<std::size_t>(c.steps) * 128 * 4, 0);
  if (kRs) {
    for (int s = 0; s < c.steps; ++s)
      for (int tid = 0; tid < 128; ++tid) {
        const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
        for (int r = 0; r < 4; ++r) {
          const int row = 16 * w + g + 8 * (r & 1);
          std::uint32_t word = 0;
          const int per = 4 / es;
          for (int e = 0; e < per; ++e) {
            const int k = (es == 2 ? 2 * t + 8 * (r >> 1) : 4 * t + 16 * (r >> 1)) + e;
            word |= encode(c.fa, A[row * ktot + s * kstep + k]) << (8 * es * e);
          }
          regs[(static_cast<std::size_t>(s) * 128 + tid) * 4 + r] = word;
        }
      }
  }

  // C, and the expected D at (thread, register).
  std::vector<Acc> cin(128 * (N / 2)), want(128 * (N / 2));
  for (int tid = 0; tid < 128; ++tid)
    for (int i = 0; i < N / 2; ++i) {
      const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
      const int row = 16 * w + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t + (i & 1);
      long long cval = static_cast<long long>(rng() % 201) - 100;
      if (c.extreme_c)
        cval = (rng() & 1) ? 2147483647LL - static_cast<long long>(rng() % 1000000)
                           : -2147483647LL + static_cast<long long>(rng() % 1000000);
      cin[static_cast<std::size_t>(tid * (N / 2) + i)] = static_cast<Acc>(cval);
      // Each wgmma (one k-step) rounds, wraps or saturates its own result.
      long long sum = c.accumulate_first ? cval : 0;
      for (int s = 0; s < c.steps; ++s) {
        for (int k = s * kstep; k < (s + 1) * kstep; ++k)
          sum += static_cast<long long>(c.sa * A[row * ktot + k]) * (c.sb * B[col * ktot + k]);
        if (c.int_acc) {
          if (c.saturate)
            sum = std::clamp<long long>(sum, INT32_MIN, INT32_MAX);
          else
            sum = static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<unsigned long long>(sum)));
        }
      }
      want[static_cast<std::size_t>(tid * (N / 2) + i)] = static_cast<Acc>(sum);
    }

  Params p{};
  p.image_bytes = static_cast<std::uint32_t>(image.size());
  p.b_base = b_base;
  p.lbo_a = c.la.lbo, p.sbo_a = c.la.sbo, p.step_a = c.la.step_bytes, p.sw_a = c.la.sw;
  p.lbo_b = c.lb.lbo, p.sbo_b = c.lb.sbo, p.step_b = c.lb.step_bytes, p.sw_b = c.lb.sw;
  p.steps = c.steps;
  p.accumulate_first = c.accumulate_first ? 1 : 0;
  p.read_early = read_early ? 1 : 0;
  llmk::DeviceBuffer<std::uint8_t> d_image(image);
  llmk::DeviceBuffer<std::uint32_t> d_regs(regs);
  llmk::DeviceBuffer<Acc> d_c(cin), d_out(cin.size());
  const llmk::Status st =
      llmk::launch(wgmma_kernel<Atom, Acc, N, kRs, Issue>, dim3(1), dim3(128), image.size() + 1024, nullptr,
                   d_image.data(), d_regs.data(), d_c.data(), d_out.data(), p, issue);
  REQUIRE_MESSAGE(st.ok(), st.message());
#if defined(LLMK_CUDA)
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
#endif
  const std::vector<Acc> got = d_out.to_host();
  if (read_early) {
    int poisoned = 0;
    for (Acc v : got) {
      if constexpr (std::is_floating_point_v<Acc>)
        poisoned += std::isnan(v) ? 1 : 0;
      else
        poisoned += v == -1 ? 1 : 0;
    }
    CHECK(poisoned == static_cast<int>(got.size()));
    return;
  }
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]) && ++bad <= 5) {
      CAPTURE(i);
      CHECK(got[i] == want[i]);
    }
  CHECK(bad == 0);
}

const SmemSwizzle kModes[] = {SmemSwizzle::kNone, SmemSwizzle::k32B, SmemSwizzle::k64B, SmemSwizzle::k128B};

int steps_for(SmemSwizzle sw, bool k_major) {
  if (!k_major) return 2;
  return sw == SmemSwizzle::k128B ? 4 : sw == SmemSwizzle::k64B ? 2 : sw == SmemSwizzle::k32B ? 1 : 2;
}

TEST_CASE("wgmma f16 SS, K-major, every swizzle mode, chained k-steps") {
  if (!hopper_available()) return;
  constexpr int N = 64;
  using Atom = WGMMA_64xNx16_F32F16F16_SS<N>;
  const Float16SS<Atom> issue{};
  unsigned seed = 100;
  for (SmemSwizzle sw : kModes) {
    CAPTURE(static_cast<int>(sw));
    const int steps = steps_for(sw, true);
    Case c{Fmt::f16, Fmt::f16, Layout::make(true, sw, 2, 64, 16 * steps),
           Layout::make(true, sw, 2, N, 16 * steps)};
    c.steps = steps;
    c.accumulate_first = sw != SmemSwizzle::k32B;  // one case with scale-d = 0
    run_case<Atom, float, N, false>(c, issue, seed++);
  }
}

TEST_CASE("wgmma bf16 SS, MN-major A and B (transposed), negated A, every swizzle mode") {
  if (!hopper_available()) return;
  constexpr int N = 64;
  using Atom = WGMMA_64xNx16_F32BF16BF16_SS<N>;
  const Float16SS<Atom, Major::kMN, Major::kMN, -1, 1> issue{};
  unsigned seed = 200;
  for (SmemSwizzle sw : kModes) {
    CAPTURE(static_cast<int>(sw));
    Case c{Fmt::bf16, Fmt::bf16, Layout::make(false, sw, 2, 64, 32), Layout::make(false, sw, 2, N, 32)};
    c.steps = 2;
    c.sa = -1;
    run_case<Atom, float, N, false>(c, issue, seed++);
  }
}

TEST_CASE("wgmma bf16 and f16 RS: A from registers, B K-major and MN-major") {
  if (!hopper_available()) return;
  {
    constexpr int N = 32;
    using Atom = WGMMA_64xNx16_F32BF16BF16_RS<N>;
    const Float16RS<Atom> issue{};
    Case c{Fmt::bf16, Fmt::bf16, Layout::make(true, SmemSwizzle::kNone, 2, 64, 64),
           Layout::make(true, SmemSwizzle::k128B, 2, N, 64)};
    c.a_rs = true;
    c.steps = 4;
    run_case<Atom, float, N, true>(c, issue, 300);
  }
  {
    constexpr int N = 64;
    using Atom = WGMMA_64xNx16_F32F16F16_RS<N>;
    const Float16RS<Atom, Major::kMN, 1, -1> issue{};
    Case c{Fmt::f16, Fmt::f16, Layout::make(true, SmemSwizzle::kNone, 2, 64, 32),
           Layout::make(false, SmemSwizzle::k64B, 2, N, 32)};
    c.a_rs = true;
    c.steps = 2;
    c.sb = -1;
    run_case<Atom, float, N, true>(c, issue, 301);
  }
}

TEST_CASE("wgmma fp8 (e4m3/e5m2 mixed) SS and RS, small and full N") {
  if (!hopper_available()) return;
  {
    constexpr int N = 16;
    using Atom = WGMMA_64xNx32_F32E4M3E5M2_SS<N>;
    const Fp8SS<Atom> issue{};
    unsigned seed = 400;
    for (SmemSwizzle sw : {SmemSwizzle::kNone, SmemSwizzle::k128B}) {
      const int steps = steps_for(sw, true);
      Case c{Fmt::e4m3, Fmt::e5m2, Layout::make(true, sw, 1, 64, 32 * steps),
             Layout::make(true, sw, 1, N, 32 * steps)};
      c.steps = steps;
      run_case<Atom, float, N, false>(c, issue, seed++);
    }
  }
  {
    constexpr int N = 24;
    using Atom = WGMMA_64xNx32_F32E5M2E4M3_RS<N>;
    const Fp8RS<Atom> issue{};
    Case c{Fmt::e5m2, Fmt::e4m3, Layout::make(true, SmemSwizzle::kNone, 1, 64, 64),
           Layout::make(true, SmemSwizzle::k64B, 1, N, 64)};
    c.a_rs = true;
    c.steps = 2;
    run_case<Atom, float, N, true>(c, issue, 410);
  }
  {
    constexpr int N = 256;
    using Atom = WGMMA_64xNx32_F32E4M3E4M3_SS<N>;
    const Fp8SS<Atom> issue{};
    Case c{Fmt::e4m3, Fmt::e4m3, Layout::make(true, SmemSwizzle::k32B, 1, 64, 32),
           Layout::make(true, SmemSwizzle::k32B, 1, N, 32)};
    run_case<Atom, float, N, false>(c, issue, 420);
  }
  {
    constexpr int N = 32;
    using Atom = WGMMA_64xNx32_F32E5M2E5M2_SS<N>;
    const Fp8SS<Atom> issue{};
    Case c{Fmt::e5m2, Fmt::e5m2, Layout::make(true, SmemSwizzle::k64B, 1, 64, 64),
           Layout::make(true, SmemSwizzle::k64B, 1, N, 64)};
    c.steps = 2;
    run_case<Atom, float, N, false>(c, issue, 430);
  }
  {
    constexpr int N = 16;
    using Atom = WGMMA_64xNx32_F32E4M3E4M3_RS<N>;
    const Fp8RS<Atom> issue{};
    Case c{Fmt::e4m3, Fmt::e4m3, Layout::make(true, SmemSwizzle::kNone, 1, 64, 32),
           Layout::make(true, SmemSwizzle::k128B, 1, N, 128)};
    c.a_rs = true;
    c.steps = 4;
    run_case<Atom, float, N, true>(c, issue, 440);
  }
}

TEST_CASE("wgmma 8-bit integers: s8 x u8 SS, u8 x s8 RS, wrapping and saturating accumulation") {
  if (!hopper_available()) return;
  {
    constexpr int N = 8;
    using Atom = WGMMA_64xNx32_S32S8U8_SS<N>;
    const IntSS<Atom> issue{};
    Case c{Fmt::s8, Fmt::u8, Layout::make(true, SmemSwizzle::k64B, 1, 64, 64),
           Layout::make(true, SmemSwizzle::k64B, 1, N, 64)};
    c.steps = 2;
    c.int_acc = true;
    run_case<Atom, std::int32_t, N, false>(c, issue, 500);
  }
  {
    constexpr int N = 48;
    using Atom = WGMMA_64xNx32_S32U8S8_RS<N>;
    const IntRS<Atom> issue{};
    Case c{Fmt::u8, Fmt::s8, Layout::make(true, SmemSwizzle::kNone, 1, 64, 64),
           Layout::make(true, SmemSwizzle::kNone, 1, N, 64)};
    c.a_rs = true;
    c.steps = 2;
    c.int_acc = true;
    run_case<Atom, std::int32_t, N, true>(c, issue, 510);
  }
  {
    constexpr int N = 24;
    using Atom = WGMMA_64xNx32_S32U8U8_SATFINITE_RS<N>;
    const IntRS<Atom> issue{};
    Case c{Fmt::u8, Fmt::u8, Layout::make(true, SmemSwizzle::kNone, 1, 64, 64),
           Layout::make(true, SmemSwizzle::k32B, 1, N, 32)};
    c.a_rs = true;
    c.int_acc = true;
    c.saturate = true;
    c.extreme_c = true;
    run_case<Atom, std::int32_t, N, true>(c, issue, 530);
  }
  for (bool saturate : {false, true}) {
    CAPTURE(saturate);
    constexpr int N = 16;
    const IntSS<WGMMA_64xNx32_S32S8S8_SS<N>> wrap{};
    const IntSS<WGMMA_64xNx32_S32S8S8_SATFINITE_SS<N>> sat{};
    Case c{Fmt::s8, Fmt::s8, Layout::make(true, SmemSwizzle::k128B, 1, 64, 128),
           Layout::make(true, SmemSwizzle::k128B, 1, N, 128)};
    c.steps = 4;
    c.int_acc = true;
    c.saturate = saturate;
    c.extreme_c = true;
    if (saturate)
      run_case<WGMMA_64xNx32_S32S8S8_SATFINITE_SS<N>, std::int32_t, N, false>(c, sat, 520);
    else
      run_case<WGMMA_64xNx32_S32S8S8_SS<N>, std::int32_t, N, false>(c, wrap, 521);
  }
}

// Never launched: instantiates every atom family the tests above do not, so that ptxas (sm90_wgmma_cuda,
// built for sm_90a) checks their asm too.
__global__ void every_remaining_atom(float* f, std::int32_t* i, std::uint64_t da, std::uint64_t db) {
  float d[4] = {f[0], f[1], f[2], f[3]};
  std::int32_t e[4] = {i[0], i[1], i[2], i[3]};
  const std::uint32_t a[4] = {1, 2, 3, 4};
  wgmma_fence();
  WGMMA_64xNx32_F32E4M3E4M3_RS<8>::fma(d, a, db, true);
  WGMMA_64xNx32_F32E4M3E5M2_RS<8>::fma(d, a, db, true);
  WGMMA_64xNx32_F32E5M2E4M3_SS<8>::fma(d, da, db, true);
  WGMMA_64xNx32_F32E5M2E5M2_SS<8>::fma(d, da, db, true);
  WGMMA_64xNx32_F32E5M2E5M2_RS<8>::fma(d, a, db, true);
  WGMMA_64xNx32_S32S8S8_RS<8>::fma(e, a, db, true);
  WGMMA_64xNx32_S32S8U8_RS<8>::fma(e, a, db, true);
  WGMMA_64xNx32_S32U8S8_SS<8>::fma(e, da, db, true);
  WGMMA_64xNx32_S32U8U8_SS<8>::fma(e, da, db, true);
  WGMMA_64xNx32_S32U8U8_RS<8>::fma(e, a, db, true);
  WGMMA_64xNx32_S32S8S8_SATFINITE_RS<8>::fma(e, a, db, true);
  WGMMA_64xNx32_S32U8U8_SATFINITE_SS<8>::fma(e, da, db, true);
  WGMMA_64xNx32_S32U8U8_SATFINITE_RS<8>::fma(e, a, db, true);
  std::int32_t wide[128] = {};
  WGMMA_64xNx32_S32U8U8_SS<256>::fma(wide, da, db, true);
  float fwide[128] = {};
  WGMMA_64xNx16_F32BF16BF16_SS<256>::fma<Major::kMN, Major::kK>(fwide, da, db, true);
  wgmma_commit();
  wgmma_wait<1>();
  wgmma_wait<0>();
  for (int r = 0; r < 4; ++r) f[r] = d[r] + fwide[r], i[r] = e[r] + wide[r];
}

TEST_CASE("every wgmma atom family is instantiated for ptxas") {
  CHECK(reinterpret_cast<const void*>(&every_remaining_atom) != nullptr);
}

#if defined(LLMK_SIM)
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_CASE("wgmma accumulators read before wgmma.wait_group are poison") {
  constexpr int N = 16;
  using Atom = WGMMA_64xNx16_F32F16F16_SS<N>;
  const Float16SS<Atom> issue{};
  Case c{Fmt::f16, Fmt::f16, Layout::make(true, SmemSwizzle::k32B, 2, 64, 16),
         Layout::make(true, SmemSwizzle::k32B, 2, N, 16)};
  run_case<Atom, float, N, false>(c, issue, 600, /*read_early=*/true);
}

// mode 0: no wgmma.fence; 1: A written by ordinary stores without fence.proxy.async; 2: launched with 64
// threads.
__global__ void wgmma_misuse(int mode) {
  unsigned char* tile = llmk::dynamic_smem();
  for (int i = static_cast<int>(threadIdx.x); i < 4096; i += static_cast<int>(blockDim.x)) tile[i] = 0x3C;
  if (mode != 1) fence_proxy_async();
  __syncthreads();
  float d[8] = {};
  if (mode != 0) wgmma_fence();
  const std::uint64_t da = make_smem_desc(tile, 128, 256, SmemSwizzle::kNone);
  const std::uint64_t db = make_smem_desc(tile + 2048, 128, 256, SmemSwizzle::kNone);
  WGMMA_64xNx16_F32F16F16_SS<16>::fma(d, da, db, false);
  wgmma_commit();
  if (mode == 3 && threadIdx.x == 0) tile[2048 + 64] = 0x11;  // B row 4: the GPU may still be reading it
  wgmma_wait<0>();
}

TEST_CASE(
    "wgmma misuse is reported: missing wgmma.fence, stale shared memory, incomplete warpgroup, operands "
    "overwritten before the wait") {
  llmk::Status st = llmk::launch(wgmma_misuse, dim3(1), dim3(128), 4096, nullptr, 0);
  REQUIRE(!st.ok());
  CHECK(contains(st.message(), "no wgmma.fence"));
  st = llmk::launch(wgmma_misuse, dim3(1), dim3(128), 4096, nullptr, 1);
  REQUIRE(!st.ok());
  CHECK(contains(st.message(), "changed after the last fence.proxy.async"));
  st = llmk::launch(wgmma_misuse, dim3(1), dim3(64), 4096, nullptr, 2);
  REQUIRE(!st.ok());
  CHECK(contains(st.message(), "the block has only 64 threads"));
  st = llmk::launch(wgmma_misuse, dim3(1), dim3(128), 4096, nullptr, 3);
  REQUIRE(!st.ok());
  CHECK(contains(st.message(), "changed before this wait"));
}
#endif

}  // namespace
