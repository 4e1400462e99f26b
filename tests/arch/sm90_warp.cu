// Tests of stmatrix (every count, with and without .trans), elect.sync, setmaxnreg, warpgroup_sync, the named
// barriers and the warpgroup turns built on them (llmk/arch/sm90/stmatrix.cuh, warp_specialization.cuh,
// llmk/arch/named_barrier.cuh, sm90/warpgroup_turns.cuh) against the PTX ISA's descriptions, and the
// simulator's checks of setmaxnreg (the same count across the warpgroup, a whole warpgroup) and of named
// barriers (counts, ids, over-arrival, arrivals no bar.sync consumed, deadlocks).
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "llmk/arch/named_barrier.cuh"
#include "llmk/arch/sm90/stmatrix.cuh"
#include "llmk/arch/sm90/warp_specialization.cuh"
#include "llmk/arch/sm90/warpgroup_turns.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"
#include "support/hopper.hpp"

namespace {

using namespace llmk::arch::sm90;
using llmk::arch::named_barrier_arrive;
using llmk::arch::named_barrier_sync;

using llmk::test::hopper_available;

// Row r of matrix j lives at 16-byte slot (j * 8 + (3 * r) % 8) of a 512-byte buffer: the rows are not in
// order, so each lane's address matters.
LLMK_HOST_DEVICE int row_slot(int j, int r) {
  return j * 8 + (3 * r) % 8;
}

template <class Atom, int kNum>
__global__ void stmatrix_kernel(const std::uint32_t* regs, std::uint16_t* out) {
  auto* buf = reinterpret_cast<std::uint16_t*>(llmk::dynamic_smem());
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < 256; i += 32) buf[i] = 0xFFFF;
  __syncwarp();
  std::uint32_t r[kNum];
  for (int j = 0; j < kNum; ++j) r[j] = regs[lane * 4 + j];
  const int j =
      lane / 8 < kNum ? lane / 8 : 0;  // lanes beyond the used matrices give a valid, unused address
  Atom::copy(buf + 8 * row_slot(j, lane % 8), r);
  __syncwarp();
  for (int i = lane; i < 256; i += 32) out[i] = buf[i];
}

template <class Atom, int kNum, bool kTrans>
void check_stmatrix(unsigned seed) {
  CAPTURE(kNum);
  CAPTURE(kTrans);
  std::mt19937 rng(seed);
  std::vector<std::uint32_t> regs(32 * 4);
  for (auto& r : regs) r = static_cast<std::uint32_t>(rng());
  llmk::DeviceBuffer<std::uint32_t> d_regs(regs);
  llmk::DeviceBuffer<std::uint16_t> out(256);
  REQUIRE(
      llmk::launch(stmatrix_kernel<Atom, kNum>, dim3(1), dim3(32), 512, nullptr, d_regs.data(), out.data())
          .ok());
#if defined(LLMK_CUDA)
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
#endif
  const std::vector<std::uint16_t> got = out.to_host();
  // PTX ISA "stmatrix": element (row, col) of matrix j comes from the thread whose fragment holds it; without
  // .trans thread 4*row + col/2 holds (row, col) in half col % 2 of register j; with .trans the matrix is
  // stored transposed, so memory (row, col) holds fragment element (col, row).
  std::vector<std::uint16_t> want(256, 0xFFFF);
  for (int j = 0; j < kNum; ++j)
    for (int row = 0; row < 8; ++row)
      for (int col = 0; col < 8; ++col) {
        const int fr = kTrans ? col : row, fc = kTrans ? row : col;
        const int lane = 4 * fr + fc / 2;
        want[static_cast<std::size_t>(8 * row_slot(j, row) + col)] =
            static_cast<std::uint16_t>(regs[static_cast<std::size_t>(lane * 4 + j)] >> (16 * (fc % 2)));
      }
  CHECK(got == want);
}

TEST_CASE("stmatrix x1/x2/x4, with and without .trans") {
  if (!hopper_available()) return;
  check_stmatrix<STSM_x1, 1, false>(1);
  check_stmatrix<STSM_x2, 2, false>(2);
  check_stmatrix<STSM_x4, 4, false>(3);
  check_stmatrix<STSM_x1_T, 1, true>(4);
  check_stmatrix<STSM_x2_T, 2, true>(5);
  check_stmatrix<STSM_x4_T, 4, true>(6);
}

__global__ void elect_kernel(unsigned mask, int* out) {
  const unsigned lane = threadIdx.x % 32;
  if ((mask >> lane) & 1u) out[threadIdx.x] = elect_one(mask) ? 1 : 0;
}

TEST_CASE("elect.sync picks exactly one lane of the mask in each warp") {
  if (!hopper_available()) return;
  for (unsigned mask : {0xFFFFFFFFu, 0x0F0F0F00u, 0x80000000u}) {
    CAPTURE(mask);
    llmk::DeviceBuffer<int> out(std::vector<int>(64, 0));
    REQUIRE(llmk::launch(elect_kernel, dim3(1), dim3(64), 0, nullptr, mask, out.data()).ok());
#if defined(LLMK_CUDA)
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
#endif
    const std::vector<int> got = out.to_host();
    for (int w = 0; w < 2; ++w) {
      int leaders = 0;
      for (int l = 0; l < 32; ++l) {
        leaders += got[static_cast<std::size_t>(32 * w + l)];
        if (!((mask >> l) & 1u)) CHECK(got[static_cast<std::size_t>(32 * w + l)] == 0);
      }
      CHECK(leaders == 1);
    }
  }
}

// Warpgroup 0 gives registers away, warpgroup 1 takes them; both still compute (mode 0). Mode 1: warpgroup
// 0's threads ask for different counts (the simulator reports it).
__global__ void __launch_bounds__(256, 1) setmaxnreg_kernel(int* out, int mode) {
  const int wg = static_cast<int>(threadIdx.x / 128);
  if (wg == 0) {
    if (mode == 1 && threadIdx.x == 5)
      setmaxnreg_dec<48>();
    else
      setmaxnreg_dec<40>();
  } else {
    setmaxnreg_inc<232>();
  }
  out[threadIdx.x] = static_cast<int>(threadIdx.x) * 3 + wg;
}

TEST_CASE("setmaxnreg moves registers between warpgroups") {
  if (!hopper_available()) return;
  llmk::DeviceBuffer<int> out(256);
  const llmk::Status st = llmk::launch(setmaxnreg_kernel, dim3(1), dim3(256), 0, nullptr, out.data(), 0);
  REQUIRE_MESSAGE(st.ok(), st.message());
#if defined(LLMK_CUDA)
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
#endif
  const std::vector<int> got = out.to_host();
  for (int t = 0; t < 256; ++t) CHECK(got[static_cast<std::size_t>(t)] == t * 3 + t / 128);
}

// Each warpgroup exchanges values through shared memory behind its own named barrier, a different number of
// rounds per warpgroup (the barriers are independent: no block-wide barrier could pair them up).
__global__ void __launch_bounds__(256, 1) warpgroup_sync_kernel(int* out) {
  int* slot = reinterpret_cast<int*>(llmk::dynamic_smem());  // [256]
  const int t = static_cast<int>(threadIdx.x), wg = t / 128, first = 128 * wg;
  for (int round = 0; round <= 2 * wg; ++round) {
    slot[t] = t * 7 + round;
    warpgroup_sync();
    const int v = slot[first + (t - first + 37) % 128];
    warpgroup_sync();  // everyone has read before the next round overwrites
    out[t] = v;
  }
}

TEST_CASE("warpgroup_sync orders shared memory within a warpgroup, independently per warpgroup") {
  if (!hopper_available()) return;
  llmk::DeviceBuffer<int> out(256);
  const llmk::Status st =
      llmk::launch(warpgroup_sync_kernel, dim3(1), dim3(256), 256 * sizeof(int), nullptr, out.data());
  REQUIRE_MESSAGE(st.ok(), st.message());
#if defined(LLMK_CUDA)
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
#endif
  const std::vector<int> got = out.to_host();
  for (int t = 0; t < 256; ++t) {
    const int first = t / 128 * 128, last_round = 2 * (t / 128);
    CHECK(got[static_cast<std::size_t>(t)] == (first + (t - first + 37) % 128) * 7 + last_round);
  }
}

#if defined(LLMK_SIM)
TEST_CASE("setmaxnreg misuse is reported: counts that differ in a warpgroup, a partial warpgroup") {
  llmk::DeviceBuffer<int> out(256);
  llmk::Status st = llmk::launch(setmaxnreg_kernel, dim3(1), dim3(256), 0, nullptr, out.data(), 1);
  REQUIRE(!st.ok());
  // Thread 5's instruction is another source line: the rendezvous reports the mismatch.
  CHECK(st.message().find("warpgroup instruction mismatch") != std::string::npos);
  st = llmk::launch(setmaxnreg_kernel, dim3(1), dim3(96), 0, nullptr, out.data(), 0);
  REQUIRE(!st.ok());
  CHECK(st.message().find("the block has only 96 threads") != std::string::npos);
}
#endif

// Two warpgroups take `turns` turns each; in its turn a warpgroup appends its index to a log in shared memory
// and reads what the other wrote there (the turn orders both: a race otherwise). Without the turns the log's
// order would follow the scheduler's.
__global__ void __launch_bounds__(256, 1) warpgroup_turns_kernel(int* log, int* seen, int turns) {
  int* shared_log = reinterpret_cast<int*>(llmk::dynamic_smem());  // [2 * turns] entries, then [1] length
  int& length = shared_log[2 * turns];
  const int t = static_cast<int>(threadIdx.x), wg = t / 128;
  if (t == 0) length = 0;
  __syncthreads();
  WarpgroupTurns<2, 3> order{wg};  // ids 1, 2: warpgroup_sync's
  if (turns > 0) order.start();
  for (int i = 0; i < turns; ++i) {
    order.wait();
    const int before = length;
    if (t % 128 == 0) seen[wg * turns + i] = before > 0 ? shared_log[before - 1] : -1;
    named_barrier_sync(5 + wg, 128);  // the warpgroup has read `length` before its leader bumps it
    if (t % 128 == 0) {
      shared_log[before] = wg;
      length = before + 1;
    }
    order.pass();
  }
  if (turns > 0) order.finish();
  __syncthreads();
  for (int i = t; i < 2 * turns; i += 256) log[i] = shared_log[i];
}

TEST_CASE(
    "warpgroup turns alternate the warpgroups; bar.arrive orders the passer's writes before the waiter") {
  for (int turns : {0, 1, 5}) {
    CAPTURE(turns);
    llmk::DeviceBuffer<int> log(std::vector<int>(static_cast<std::size_t>(2 * turns + 1), -7));
    llmk::DeviceBuffer<int> seen(std::vector<int>(static_cast<std::size_t>(2 * turns + 1), -7));
    const llmk::Status st =
        llmk::launch(warpgroup_turns_kernel, dim3(1), dim3(256), (2 * turns + 1) * sizeof(int), nullptr,
                     log.data(), seen.data(), turns);
    REQUIRE_MESSAGE(st.ok(), st.message());
#if defined(LLMK_CUDA)
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
#endif
    const std::vector<int> got = log.to_host(), saw = seen.to_host();
    for (int i = 0; i < 2 * turns; ++i) CHECK(got[static_cast<std::size_t>(i)] == i % 2);
    for (int i = 0; i < turns; ++i) {
      CHECK(saw[static_cast<std::size_t>(i)] == (i == 0 ? -1 : 1));  // warpgroup 0 sees 1's last entry
      CHECK(saw[static_cast<std::size_t>(turns + i)] == 0);
    }
  }
}

#if defined(LLMK_SIM)
// Misuse of the named barriers, one per mode; each must be reported by the simulator.
__global__ void __launch_bounds__(256, 1) named_barrier_misuse_kernel(int mode) {
  const int t = static_cast<int>(threadIdx.x), wg = t / 128;
  switch (mode) {
    case 0:  // the two warpgroups give different thread counts for one phase
      if (wg == 0)
        named_barrier_arrive(4, 256);
      else
        named_barrier_sync(4, 224);
      break;
    case 1:  // warpgroup 0 passes twice before warpgroup 1 waited once
      if (wg == 0) {
        named_barrier_arrive(4, 256);
        named_barrier_arrive(4, 256);
      } else {
        named_barrier_sync(4, 256);
      }
      break;
    case 2:  // a phase completed by arrivals only
      named_barrier_arrive(4, 256);
      break;
    case 3:  // an arrival that no bar.sync consumes
      if (wg == 0) named_barrier_arrive(4, 256);
      break;
    case 4:  // warpgroup 1 waits for a pass that never comes
      if (wg == 1) named_barrier_sync(4, 256);
      break;
    case 5:  // an id of warpgroup_sync
      named_barrier_sync(2, 256);
      break;
    case 6:  // not whole warps
      named_barrier_sync(4, 100);
      break;
    default:
      break;
  }
}

TEST_CASE("named barrier misuse is reported with the barrier and the rule") {
  const char* expected[] = {
      "the thread count differs from the 256 of this phase's first arrival",
      "the thread arrives a second time in one phase of named barrier 4",
      "completes a phase of named barrier 4 (phase 0: 256 of 256 threads arrived, 0 of them waiting",
      "named barrier arrivals that no bar.sync consumed",
      "named barrier phase never completes: 128 threads wait at bar.sync",
      "bar.sync 2: barriers 1..2 belong to warpgroup_sync in a block of 256 threads",
      "bar.sync 4, 100: the thread count must be a non-zero multiple of 32",
  };
  for (int mode = 0; mode < 7; ++mode) {
    CAPTURE(mode);
    const llmk::Status st = llmk::launch(named_barrier_misuse_kernel, dim3(1), dim3(256), 0, nullptr, mode);
    REQUIRE(!st.ok());
    CHECK_MESSAGE(st.message().find(expected[mode]) != std::string::npos, st.message());
  }
  // The deadlock report names the barrier and its count.
  const llmk::Status st = llmk::launch(named_barrier_misuse_kernel, dim3(1), dim3(256), 0, nullptr, 4);
  CHECK(st.message().find("named barrier 4 (phase 0: 128 of 256 threads arrived, 128 of them waiting") !=
        std::string::npos);
}
#endif

}  // namespace
