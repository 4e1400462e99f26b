// Tests of the Hopper asynchronous atoms (llmk/arch/sm90/: mbarrier, cp.async.bulk, bulk groups,
// fence.proxy.async) and of the simulator's checks around them (llmk/sim/async_proxy.hpp). The positive cases
// run on a Hopper GPU too (sm90_async_cuda); every failure the simulator must report is a simulator-only case
// that checks the report names the rule and the line.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmk/arch/sm90/bulk_copy.cuh"
#include "llmk/arch/sm90/mbarrier.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"
#include "support/hopper.hpp"
#include "support/test_env.hpp"

namespace {

using namespace llmk::arch::sm90;

using llmk::test::hopper_available;

template <class Kernel, class... Args>
llmk::Status run(Kernel kernel, dim3 grid, dim3 block, std::size_t smem, Args... args) {
  llmk::Status s = llmk::launch(kernel, grid, block, smem, nullptr, args...);
#if defined(LLMK_CUDA)
  if (s.ok()) {
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return llmk::Status::cuda_error("cudaDeviceSynchronize", cudaGetErrorString(e));
  }
#endif
  return s;
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// ---- a warp-specialized ring: one producer thread, three consumer warps
// -------------------------------------

constexpr int kTileFloats = 256;  // 1 KiB a tile
constexpr int kStages = 2;

struct RingStorage {
  alignas(128) float tile[kStages][kTileFloats];
  std::uint64_t full[kStages];
  std::uint64_t empty[kStages];
};

// Warp 0 lane 0 streams `tiles` tiles through a kStages-slot ring with cp.async.bulk; warps 1..3 wait for
// each tile, add it into their own slice of `out` (element j of tile i goes to out[j]), and release the slot.
// Each barrier runs tiles / kStages phases, so parities flip many times.
__global__ void bulk_ring(const float* src, float* out, int tiles) {
  RingStorage& s = llmk::shared_storage<RingStorage>();
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      mbarrier_init(&s.full[i], 1);
      mbarrier_init(&s.empty[i], 3);  // one arrival per consumer warp
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  if (warp == 0) {
    if (lane == 0) {
      for (int i = 0; i < tiles; ++i) {
        const int slot = i % kStages;
        mbarrier_wait_parity(&s.empty[slot],
                             ((i / kStages) & 1) ^ 1);  // first pass: parity 1 returns at once
        mbarrier_arrive_expect_tx(&s.full[slot], kTileFloats * sizeof(float));
        bulk_copy_g2s(s.tile[slot], src + static_cast<std::size_t>(i) * kTileFloats,
                      kTileFloats * sizeof(float), &s.full[slot]);
      }
    }
    return;
  }
  float acc[8] = {};
  const int base =
      static_cast<int>((warp - 1) * 32 + lane);  // 96 consumer threads cover 256 floats in 3 steps
  for (int i = 0; i < tiles; ++i) {
    const int slot = i % kStages;
    mbarrier_wait_parity(&s.full[slot], (i / kStages) & 1);
    for (int r = 0; r < 3; ++r) {
      const int j = base + 96 * r;
      if (j < kTileFloats) acc[r] += s.tile[slot][j];
    }
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&s.empty[slot]);
  }
  for (int r = 0; r < 3; ++r) {
    const int j = base + 96 * r;
    if (j < kTileFloats) out[blockIdx.x * kTileFloats + j] = acc[r];
  }
}

TEST_CASE("cp.async.bulk through a two-stage mbarrier ring (full/empty barriers, many phases)") {
  if (!hopper_available()) return;
  const int tiles = 7;
  const std::vector<float> src = random_floats(static_cast<std::size_t>(tiles) * kTileFloats, 11);
  llmk::DeviceBuffer<float> d_src(src), out(2 * kTileFloats);
  const llmk::Status st =
      run(bulk_ring, dim3(2), dim3(128), sizeof(RingStorage), d_src.data(), out.data(), tiles);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const std::vector<float> got = out.to_host();
  for (int j = 0; j < 2 * kTileFloats; ++j) {
    float want = 0.0f;
    for (int i = 0; i < tiles; ++i) want += src[static_cast<std::size_t>(i) * kTileFloats + j % kTileFloats];
    CAPTURE(j);
    CHECK(got[j] == want);  // same order of additions as the kernel
  }
}

// Threads write a tile with ordinary stores, fence it for the async proxy, and one thread stores it with
// cp.async.bulk (two bulk groups, waited with .read and then fully).
__global__ void bulk_store_tile(const float* src, float* dst) {
  float* tile = reinterpret_cast<float*>(llmk::dynamic_smem());
  const int t = static_cast<int>(threadIdx.x);
  for (int j = t; j < 2 * kTileFloats; j += static_cast<int>(blockDim.x)) tile[j] = 2.0f * src[j];
  fence_proxy_async();
  __syncthreads();
  if (t == 0) {
    bulk_copy_s2g(dst, tile, kTileFloats * sizeof(float));
    bulk_commit_group();
    bulk_copy_s2g(dst + kTileFloats, tile + kTileFloats, kTileFloats * sizeof(float));
    bulk_commit_group();
    bulk_wait_group_read<1>();
    bulk_wait_group<0>();
  }
}

TEST_CASE("cp.async.bulk shared -> global after fence.proxy.async, with bulk groups") {
  if (!hopper_available()) return;
  const std::vector<float> src = random_floats(2 * kTileFloats, 12);
  llmk::DeviceBuffer<float> d_src(src), dst(2 * kTileFloats);
  const llmk::Status st =
      run(bulk_store_tile, dim3(1), dim3(64), 2 * kTileFloats * sizeof(float), d_src.data(), dst.data());
  REQUIRE_MESSAGE(st.ok(), st.message());
  const std::vector<float> got = dst.to_host();
  for (int j = 0; j < 2 * kTileFloats; ++j) CHECK(got[j] == 2.0f * src[j]);
}

// Arrival counts and parities: 4 warps arrive with counts 1, 2, 3, 4 on a barrier of count 10; test_wait says
// "not yet" for parity 0 before the last arrival and "done" after; parity 1 is "done" from the start.
__global__ void arrival_counts(int* out) {
  std::uint64_t* bar = reinterpret_cast<std::uint64_t*>(llmk::dynamic_smem());
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 10);
    out[0] = mbarrier_test_wait_parity(bar, 1) ? 1 : 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) out[1] = mbarrier_test_wait_parity(bar, 0) ? 1 : 0;
  __syncthreads();
  if (lane == 0) mbarrier_arrive_count(bar, warp + 1);
  mbarrier_wait_parity(bar, 0);
  if (threadIdx.x == 0) out[2] = mbarrier_test_wait_parity(bar, 1) ? 1 : 0;  // phase 1 is current
}

TEST_CASE("mbarrier arrival counts and phase parities") {
  if (!hopper_available()) return;
  llmk::DeviceBuffer<int> out(3);
  const llmk::Status st = run(arrival_counts, dim3(1), dim3(128), 8, out.data());
  REQUIRE_MESSAGE(st.ok(), st.message());
  const std::vector<int> got = out.to_host();
  CHECK(got[0] == 1);
  CHECK(got[1] == 0);
  CHECK(got[2] == 0);
}

#if defined(LLMK_SIM)
// ---- what the simulator must report

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
// -------------------------------------------------------------------------

struct OneTile {
  alignas(128) float tile[64];
  std::uint64_t bar;
  int inited;
};

// mode 0: over-arrival; 1: init not visible (no __syncthreads); 2: no mbarrier at the address; 3: an ordinary
// store over the live barrier; 4: the same phase waited twice; 5: expect_tx 16 bytes more than the copy;
// 6: the block exits with the copy in flight; 7: init not fenced for the async proxy.
__global__ void misuse(const float* src, int mode) {
  OneTile& s = llmk::shared_storage<OneTile>();
  if (threadIdx.x == 0) {
    atomicExch(&s.inited, 0);
    mbarrier_init(&s.bar, 1);
    if (mode != 7) fence_mbarrier_init();
    atomicExch(&s.inited, 1);
  }
  if (mode != 1) __syncthreads();
  if (threadIdx.x != 32) return;  // one thread of warp 1 does the rest
  if (mode == 1)
    while (atomicAdd(&s.inited, 0) != 1) __nanosleep(32);  // after the init, but no __syncthreads
  switch (mode) {
    case 0:
      mbarrier_arrive(&s.bar);
      mbarrier_arrive_count(&s.bar, 2);  // phase 1 needs 1
      break;
    case 1:
      mbarrier_arrive(&s.bar);
      break;
    case 2:
      mbarrier_arrive(reinterpret_cast<std::uint64_t*>(&s.tile[0]));
      break;
    case 3:
      s.bar = 0;
      mbarrier_arrive(&s.bar);
      break;
    case 4:
      mbarrier_arrive(&s.bar);
      mbarrier_wait_parity(&s.bar, 0);
      mbarrier_wait_parity(&s.bar, 0);  // meant parity 1 of the next phase
      break;
    case 5:
      mbarrier_arrive_expect_tx(&s.bar, sizeof(s.tile) + 16);
      bulk_copy_g2s(s.tile, src, sizeof(s.tile), &s.bar);
      mbarrier_wait_parity(&s.bar, 0);
      break;
    case 6:
    case 7:
      mbarrier_arrive_expect_tx(&s.bar, sizeof(s.tile));
      bulk_copy_g2s(s.tile, src, sizeof(s.tile), &s.bar);
      break;
    default:
      break;
  }
}

std::string misuse_report(int mode) {
  const std::vector<float> src = random_floats(64, 13);
  llmk::DeviceBuffer<float> d_src(src);
  const llmk::Status st =
      llmk::launch(misuse, dim3(1), dim3(64), sizeof(OneTile), nullptr, d_src.data(), mode);
  REQUIRE(!st.ok());
  return st.message();
}

TEST_CASE("mbarrier misuse is reported with the rule and the line") {
  CHECK(contains(misuse_report(0), "over-arrival"));
  CHECK(contains(misuse_report(1), "before a __syncthreads made the init visible"));
  CHECK(contains(misuse_report(2), "no mbarrier was initialised"));
  CHECK(contains(misuse_report(3), "overwritten by an ordinary store"));
  const std::string twice = misuse_report(4);
  CHECK(contains(twice, "waits a second time for phase 0"));
  CHECK(contains(twice, "sm90_async.cu"));
  const std::string tx = misuse_report(5);
  CHECK(contains(tx, "mbarrier phase never completes"));
  CHECK(contains(tx, "tx-count 16"));
  CHECK(contains(misuse_report(6), "finished while bulk copies into its shared memory were in flight"));
  CHECK(contains(misuse_report(7), "not made visible to the async proxy"));
}

// mode 0: ordinary stores after the fence, then a bulk store; 1: the source overwritten before
// wait_group.read; 2: fence.mbarrier_init instead of fence.proxy.async after the stores (it orders mbarrier
// inits only, not data).
__global__ void store_misuse(float* dst, int mode) {
  float* tile = reinterpret_cast<float*>(llmk::dynamic_smem());
  const int t = static_cast<int>(threadIdx.x);
  if (mode == 0) fence_proxy_async();
  tile[t] = static_cast<float>(t);
  if (mode == 1) fence_proxy_async();
  if (mode == 2) fence_mbarrier_init();
  __syncthreads();
  if (t == 0) {
    bulk_copy_s2g(dst, tile, 32 * sizeof(float));
    bulk_commit_group();
    if (mode == 1) tile[5] = -1.0f;
    bulk_wait_group_read<0>();
  }
}

TEST_CASE(
    "the async proxy reading stale shared memory, and a bulk store's source reused early, are reported") {
  llmk::DeviceBuffer<float> dst(32);
  llmk::Status st = llmk::launch(store_misuse, dim3(1), dim3(32), 32 * sizeof(float), nullptr, dst.data(), 0);
  REQUIRE(!st.ok());
  CHECK(contains(st.message(), "changed after the last fence.proxy.async"));
  st = llmk::launch(store_misuse, dim3(1), dim3(32), 32 * sizeof(float), nullptr, dst.data(), 1);
  REQUIRE(!st.ok());
  CHECK(contains(st.message(), "before cp.async.bulk.wait_group.read"));
  st = llmk::launch(store_misuse, dim3(1), dim3(32), 32 * sizeof(float), nullptr, dst.data(), 2);
  REQUIRE(!st.ok());
  CHECK(contains(st.message(), "changed after the last fence.proxy.async"));
}

#if !defined(LLMK_SIM_TSAN)  // the early read races with the landing copy (TSan reports that instead)
// A thread reading a bulk copy's destination without waiting on its mbarrier reads poison.
__global__ void read_without_wait(const float* src, float* out) {
  OneTile& s = llmk::shared_storage<OneTile>();
  if (threadIdx.x == 0) {
    mbarrier_init(&s.bar, 1);
    fence_mbarrier_init();
    mbarrier_arrive_expect_tx(&s.bar, sizeof(s.tile));
    bulk_copy_g2s(s.tile, src, sizeof(s.tile), &s.bar);
    for (int j = 0; j < 64; ++j) out[j] = s.tile[j];
    mbarrier_wait_parity(&s.bar, 0);
  }
}

TEST_CASE("a bulk copy's destination reads poison until its mbarrier phase completes") {
  const std::vector<float> src = random_floats(64, 14);
  llmk::DeviceBuffer<float> d_src(src), out(64);
  REQUIRE(
      llmk::launch(read_without_wait, dim3(1), dim3(1), sizeof(OneTile), nullptr, d_src.data(), out.data())
          .ok());
  for (float v : out.to_host()) CHECK(std::isnan(v));
}
#endif
#endif  // LLMK_SIM

}  // namespace
