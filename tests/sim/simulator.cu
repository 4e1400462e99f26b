// Self-tests of the CPU SIMT simulator: barriers, warp intrinsics (against scalar references written from the
// CUDA Programming Guide's wording, not from the PTX formula the simulator uses), atomics, shared-memory
// poisoning, cp.async timing, and the failures it must report with block, thread and source line.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmk/arch/cp_async.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---- barriers
// -----------------------------------------------------------------------------------------------

__global__ void barrier_reductions(int* out, int modulus) {
  const int t = static_cast<int>(threadIdx.x + threadIdx.y * blockDim.x);
  const int pred = t % modulus == 0;
  const int count = __syncthreads_count(pred);
  const int all = __syncthreads_and(pred);
  const int any = __syncthreads_or(pred);
  const int nthreads = static_cast<int>(blockDim.x * blockDim.y);
  const int block = static_cast<int>(blockIdx.x);
  out[(block * nthreads + t) * 3 + 0] = count;
  out[(block * nthreads + t) * 3 + 1] = all;
  out[(block * nthreads + t) * 3 + 2] = any;
}

// Every thread writes its slot, then reads its neighbour's after the barrier, many rounds.
__global__ void barrier_rounds(int* out, int rounds) {
  int* s = reinterpret_cast<int*>(llmk::dynamic_smem());
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  int acc = 0;
  for (int r = 0; r < rounds; ++r) {
    s[t] = t * 1000 + r;
    __syncthreads();
    acc += s[(t + 1) % n] - r;
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

TEST_CASE("__syncthreads_count/and/or over odd block shapes") {
  for (dim3 block : {dim3(1), dim3(7), dim3(33), dim3(16, 5), dim3(200)}) {
    for (int modulus : {1, 2, 7, 1000}) {
      const int n = static_cast<int>(block.x * block.y);
      llmk::DeviceBuffer<int> out(static_cast<std::size_t>(3 * n * 3));
      llmk::Status s = llmk::launch(barrier_reductions, dim3(3), block, 0, nullptr, out.data(), modulus);
      REQUIRE_MESSAGE(s.ok(), s.message());
      int count = 0;
      for (int t = 0; t < n; ++t) count += t % modulus == 0;
      std::vector<int> got = out.to_host();
      for (int i = 0; i < 3 * n; ++i) {
        CHECK(got[i * 3 + 0] == count);
        CHECK(got[i * 3 + 1] == (count == n ? 1 : 0));
        CHECK(got[i * 3 + 2] == (count > 0 ? 1 : 0));
      }
    }
  }
}

TEST_CASE("barriers order shared-memory traffic across many rounds") {
  const int n = 96, rounds = 50;
  llmk::DeviceBuffer<int> out(static_cast<std::size_t>(4 * n));
  llmk::Status s =
      llmk::launch(barrier_rounds, dim3(4), dim3(n), n * sizeof(int), nullptr, out.data(), rounds);
  REQUIRE_MESSAGE(s.ok(), s.message());
  std::vector<int> got = out.to_host();
  for (int i = 0; i < 4 * n; ++i) CHECK(got[i] == ((i % n) + 1) % n * 1000 * rounds);
}

// ---- shuffles
// -----------------------------------------------------------------------------------------------

enum class Shfl { kIdx, kUp, kDown, kXor };

// Scalar reference from the CUDA Programming Guide ("Warp Shuffle Functions").
int shuffle_source(Shfl mode, int lane, int arg, int width) {
  const int group_start = lane & ~(width - 1);
  switch (mode) {
    case Shfl::kIdx:
      return group_start + (arg & (width - 1));  // srcLane taken modulo width, in the same group
    case Shfl::kUp:
      return (lane - group_start) >= arg ? lane - arg : lane;  // no wrap: own value
    case Shfl::kDown:
      return (lane - group_start) + arg < width ? lane + arg : lane;
    case Shfl::kXor: {
      const int src = lane ^ arg;  // later groups are not accessible: own value
      return src >= group_start + width ? lane : src;
    }
  }
  return lane;
}

__global__ void shuffle_kernel(const std::uint64_t* in, const int* args, std::uint64_t* out32,
                               std::uint64_t* out64, int mode, int width) {
  const unsigned lane = threadIdx.x;
  const std::uint64_t v64 = in[lane];
  const unsigned v32 = static_cast<unsigned>(v64);
  const int arg = args[lane];
  unsigned r32 = 0;
  std::uint64_t r64 = 0;
  switch (mode) {
    case 0:
      r32 = __shfl_sync(0xffffffffu, v32, arg, width);
      r64 = __shfl_sync(0xffffffffu, v64, arg, width);
      break;
    case 1:
      r32 = __shfl_up_sync(0xffffffffu, v32, static_cast<unsigned>(arg), width);
      r64 = __shfl_up_sync(0xffffffffu, v64, static_cast<unsigned>(arg), width);
      break;
    case 2:
      r32 = __shfl_down_sync(0xffffffffu, v32, static_cast<unsigned>(arg), width);
      r64 = __shfl_down_sync(0xffffffffu, v64, static_cast<unsigned>(arg), width);
      break;
    default:
      r32 = __shfl_xor_sync(0xffffffffu, v32, arg, width);
      r64 = __shfl_xor_sync(0xffffffffu, v64, arg, width);
      break;
  }
  out32[lane] = r32;
  out64[lane] = r64;
}

TEST_CASE("shuffles follow the programming guide for every mode, width and offset") {
  std::mt19937_64 rng(42);
  std::vector<std::uint64_t> values(32);
  for (auto& v : values) v = rng() | 1;  // random, non-zero
  llmk::DeviceBuffer<std::uint64_t> d_in(values), d_out32(32), d_out64(32);
  for (int mode = 0; mode < 4; ++mode) {
    for (int width : {1, 2, 4, 8, 16, 32}) {
      // Per-lane arguments: uniform sweeps and random per-lane values (idx may differ per lane).
      std::vector<std::vector<int>> arg_sets;
      for (int a : {0, 1, 3, 5, 16, 31}) arg_sets.push_back(std::vector<int>(32, a));
      std::vector<int> random_args(32);
      for (auto& a : random_args) a = static_cast<int>(rng() % (mode == 0 ? 64 : 32));
      if (mode == 0) arg_sets.push_back(random_args);
      for (const auto& args : arg_sets) {
        CAPTURE(mode);
        CAPTURE(width);
        CAPTURE(args[0]);
        llmk::DeviceBuffer<int> d_args(args);
        llmk::Status s = llmk::launch(shuffle_kernel, dim3(1), dim3(32), 0, nullptr, d_in.data(),
                                      d_args.data(), d_out32.data(), d_out64.data(), mode, width);
        REQUIRE_MESSAGE(s.ok(), s.message());
        std::vector<std::uint64_t> o32 = d_out32.to_host(), o64 = d_out64.to_host();
        for (int lane = 0; lane < 32; ++lane) {
          const int src = shuffle_source(static_cast<Shfl>(mode), lane, args[lane], width);
          CHECK(o64[lane] == values[src]);
          CHECK(o32[lane] == (values[src] & 0xffffffffu));
        }
      }
    }
  }
}

// Two half-warps shuffle independently with disjoint masks; a sub-mask covering only the lanes that take
// part.
__global__ void shuffle_partial_masks(int* out) {
  const unsigned lane = threadIdx.x;
  int v = static_cast<int>(lane) * 10;
  if (lane < 16)
    v = __shfl_xor_sync(0x0000ffffu, v, 1);
  else
    v = __shfl_xor_sync(0xffff0000u, v, 2);
  if (lane % 2 == 0) v += __shfl_down_sync(0x55555555u, v, 2);
  out[lane] = v;
}

TEST_CASE("shuffles with disjoint and sparse masks") {
  llmk::DeviceBuffer<int> out(32);
  llmk::Status s = llmk::launch(shuffle_partial_masks, dim3(1), dim3(32), 0, nullptr, out.data());
  REQUIRE_MESSAGE(s.ok(), s.message());
  std::vector<int> got = out.to_host();
  std::vector<int> step1(32);
  for (int l = 0; l < 32; ++l) step1[l] = (l < 16 ? (l ^ 1) : (l ^ 2)) * 10;
  for (int l = 0; l < 32; ++l) {
    int want = step1[l];
    if (l % 2 == 0) want += (l + 2 < 32) ? step1[l + 2] : step1[l];
    CHECK(got[l] == want);
  }
}

// ---- votes, __syncwarp, __activemask, redux ---------------------------------------------------------------

__global__ void vote_kernel(const int* pred, unsigned* out) {
  const unsigned lane = threadIdx.x % 32;
  const int p = pred[threadIdx.x];
  out[threadIdx.x * 6 + 0] = __ballot_sync(0xffffffffu, p);
  out[threadIdx.x * 6 + 1] = static_cast<unsigned>(__any_sync(0xffffffffu, p));
  out[threadIdx.x * 6 + 2] = static_cast<unsigned>(__all_sync(0xffffffffu, p));
  unsigned sub = 0;
  if (lane % 3 == 0) sub = __ballot_sync(0x49249249u, p);  // lanes 0, 3, 6, ..., 30
  out[threadIdx.x * 6 + 3] = sub;
  __syncwarp();
  out[threadIdx.x * 6 + 4] =
      __reduce_add_sync(0xffffffffu, static_cast<unsigned>(pred[threadIdx.x] * (lane + 1)));
  unsigned active = 0;
  if (lane >= 8) active = __activemask();
  out[threadIdx.x * 6 + 5] = active;
}

TEST_CASE("ballot, any, all, sub-mask ballot, syncwarp, redux and activemask") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<int> pred(64);
    for (auto& p : pred) p = static_cast<int>(rng() % 2);
    if (trial == 2) std::fill(pred.begin(), pred.begin() + 32, 1);
    if (trial == 3) std::fill(pred.begin() + 32, pred.end(), 0);
    llmk::DeviceBuffer<int> d_pred(pred);
    llmk::DeviceBuffer<unsigned> out(64 * 6);
    llmk::Status s = llmk::launch(vote_kernel, dim3(1), dim3(64), 0, nullptr, d_pred.data(), out.data());
    REQUIRE_MESSAGE(s.ok(), s.message());
    std::vector<unsigned> got = out.to_host();
    for (int w = 0; w < 2; ++w) {
      unsigned ballot = 0, sub = 0, sum = 0;
      for (int l = 0; l < 32; ++l) {
        if (pred[w * 32 + l]) ballot |= 1u << l;
        if (pred[w * 32 + l] && l % 3 == 0) sub |= 1u << l;
        sum += static_cast<unsigned>(pred[w * 32 + l] * (l + 1));
      }
      for (int l = 0; l < 32; ++l) {
        const unsigned* o = &got[(w * 32 + l) * 6];
        CHECK(o[0] == ballot);
        CHECK(o[1] == (ballot != 0 ? 1u : 0u));
        CHECK(o[2] == (ballot == 0xffffffffu ? 1u : 0u));
        CHECK(o[3] == (l % 3 == 0 ? sub : 0u));
        CHECK(o[4] == sum);
        CHECK(o[5] == (l >= 8 ? 0xffffff00u : 0u));
      }
    }
  }
}

// ---- atomics
// ------------------------------------------------------------------------------------------------

__global__ void atomics_kernel(int* counter, unsigned* maxv, unsigned long long* sum64, float* fsum,
                               unsigned* wrap) {
  const unsigned id = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(counter, 1);
  atomicMax(maxv, id * 7u % 1009u);
  atomicAdd(sum64, static_cast<unsigned long long>(id));
  atomicAdd(fsum, 0.5f);
  atomicInc(wrap, 9u);
}

TEST_CASE("atomics are atomic across blocks running on several OS threads") {
  const unsigned blocks = 37, threads = 64, total = blocks * threads;
  llmk::DeviceBuffer<int> counter(std::vector<int>{0});
  llmk::DeviceBuffer<unsigned> maxv(std::vector<unsigned>{0}), wrap(std::vector<unsigned>{0});
  llmk::DeviceBuffer<unsigned long long> sum64(std::vector<unsigned long long>{0});
  llmk::DeviceBuffer<float> fsum(std::vector<float>{0.0f});
  llmk::Status s = llmk::launch(atomics_kernel, dim3(blocks), dim3(threads), 0, nullptr, counter.data(),
                                maxv.data(), sum64.data(), fsum.data(), wrap.data());
  REQUIRE_MESSAGE(s.ok(), s.message());
  unsigned want_max = 0;
  for (unsigned id = 0; id < total; ++id) want_max = std::max(want_max, id * 7u % 1009u);
  CHECK(counter.to_host()[0] == static_cast<int>(total));
  CHECK(maxv.to_host()[0] == want_max);
  CHECK(sum64.to_host()[0] == 1ull * total * (total - 1) / 2);
  CHECK(fsum.to_host()[0] == 0.5f * total);
  CHECK(wrap.to_host()[0] == total % 10);
}

// A consumer polls a flag another warp sets: __nanosleep is the yield point that lets the producer run.
__global__ void flag_handshake(int* out) {
  volatile int* s = reinterpret_cast<volatile int*>(llmk::dynamic_smem());
  if (threadIdx.x == 0) s[0] = 0;
  __syncthreads();
  if (threadIdx.x == 32) {
    s[1] = 42;
    __threadfence_block();
    atomicExch(const_cast<int*>(s), 1);
  }
  if (threadIdx.x == 0) {
    while (atomicAdd(const_cast<int*>(s), 0) == 0) __nanosleep(100);
    out[0] = s[1];
  }
}

TEST_CASE("__nanosleep yields, so a thread polling another warp's flag makes progress") {
  for (int seed_round = 0; seed_round < 4; ++seed_round) {
    llmk::DeviceBuffer<int> out(1);
    llmk::Status s = llmk::launch(flag_handshake, dim3(1), dim3(64), 2 * sizeof(int), nullptr, out.data());
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(out.to_host()[0] == 42);
  }
}

// CUDA's atomics take the value as the pointee type: literals of another type convert, as with nvcc.
__global__ void atomics_with_literals(unsigned* u, float* f, unsigned long long* ull) {
  atomicAdd(u, 1);
  atomicAdd(f, 1.0);
  atomicMax(u, 0);
  atomicCAS(ull, 0, 5);
}

TEST_CASE("atomics accept arguments that convert to the pointee type") {
  llmk::DeviceBuffer<unsigned> u(std::vector<unsigned>{0});
  llmk::DeviceBuffer<float> f(std::vector<float>{0.0f});
  llmk::DeviceBuffer<unsigned long long> ull(std::vector<unsigned long long>{0});
  REQUIRE(
      llmk::launch(atomics_with_literals, dim3(1), dim3(8), 0, nullptr, u.data(), f.data(), ull.data()).ok());
  CHECK(u.to_host()[0] == 8u);
  CHECK(f.to_host()[0] == 8.0f);
  CHECK(ull.to_host()[0] == 5u);
}

// ---- shared memory poison and cp.async --------------------------------------------------------------------

__global__ void read_unwritten_shared(float* out) {
  const float* s = reinterpret_cast<const float*>(llmk::dynamic_smem());
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}

TEST_CASE("shared memory is poisoned at block start: unwritten reads are NaN") {
  llmk::DeviceBuffer<float> out(64);
  llmk::Status s =
      llmk::launch(read_unwritten_shared, dim3(2), dim3(32), 32 * sizeof(float), nullptr, out.data());
  REQUIRE_MESSAGE(s.ok(), s.message());
  for (float v : out.to_host()) CHECK(std::isnan(v));
}

// Copies 16 bytes per thread and reads them back before (wait == false) or after the wait.
__global__ void cp_async_read(const float* src, float* out, int wait) {
  float* s = reinterpret_cast<float*>(llmk::dynamic_smem());
  const int t = static_cast<int>(threadIdx.x);
  llmk::arch::cp_async_cg16(&s[4 * t], &src[4 * t]);
  llmk::arch::cp_async_commit();
  if (wait) llmk::arch::cp_async_wait<0>();
  for (int i = 0; i < 4; ++i) out[4 * t + i] = s[4 * t + i];
}

TEST_CASE("a cp.async destination reads poison until its group is waited for") {
  std::vector<float> src(128);
  for (int i = 0; i < 128; ++i) src[i] = 1.0f + i;
  llmk::DeviceBuffer<float> d_src(src), out(128);
  REQUIRE(llmk::launch(cp_async_read, dim3(1), dim3(32), 512, nullptr, d_src.data(), out.data(), 1).ok());
  CHECK(out.to_host() == src);
  out.poison();
  REQUIRE(llmk::launch(cp_async_read, dim3(1), dim3(32), 512, nullptr, d_src.data(), out.data(), 0).ok());
  for (float v : out.to_host()) CHECK(std::isnan(v));
}

// Issues four groups of one 16-byte copy each, then waits with wait_group<N>: the oldest 4 - N groups have
// landed, the newest N still read poison. Element g of the output is slot g as read right after the wait.
template <int N>
__global__ void cp_async_wait_newest_pending(const float* src, float* out) {
  float* s = reinterpret_cast<float*>(llmk::dynamic_smem());
  for (int g = 0; g < 4; ++g) {
    llmk::arch::cp_async_cg16(&s[4 * g], &src[4 * g]);
    llmk::arch::cp_async_commit();
  }
  llmk::arch::cp_async_wait<N>();
  for (int i = 0; i < 16; ++i) out[i] = s[i];
}

template <int N>
void check_wait_group_keeps_newest() {
  CAPTURE(N);
  std::vector<float> src(16);
  for (int i = 0; i < 16; ++i) src[i] = 2.0f + i;
  llmk::DeviceBuffer<float> d_src(src), out(16);
  REQUIRE(
      llmk::launch(cp_async_wait_newest_pending<N>, dim3(1), dim3(1), 64, nullptr, d_src.data(), out.data())
          .ok());
  const std::vector<float> got = out.to_host();
  for (int i = 0; i < 16; ++i) {
    CAPTURE(i);
    if (i / 4 < 4 - N)
      CHECK(got[i] == src[i]);
    else
      CHECK(std::isnan(got[i]));
  }
}

TEST_CASE("cp.async.wait_group N leaves exactly the newest N groups pending") {
  check_wait_group_keeps_newest<0>();
  check_wait_group_keeps_newest<1>();
  check_wait_group_keeps_newest<3>();
}

// ---- failures that must be reported
// -------------------------------------------------------------------------

constexpr int kDivergentBarrierLine = __LINE__ + 4;
__global__ void divergent_barrier(int* out) {
  // Only block 1 diverges: its threads >= 40 skip the barrier and exit.
  if (blockIdx.x == 1 && threadIdx.x >= 40) return;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;  // own slots: blocks run on several OS threads
}

TEST_CASE("a __syncthreads in a divergent branch is reported as a deadlock naming block, threads and line") {
  llmk::DeviceBuffer<int> out(3 * 64);
  llmk::Status s = llmk::launch(divergent_barrier, dim3(3), dim3(64), 0, nullptr, out.data());
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == llmk::Status::Code::kSimulatorError);
  const std::string& m = s.message();
  INFO(m);
  CHECK(contains(m, "deadlock in block (1,0,0)"));
  CHECK(contains(m, "barrier divergence: 40 of 64 threads wait at __syncthreads, 24 exited"));
  CHECK(contains(m, "threads (0,0,0)..(39,0,0)"));
  CHECK(contains(m, "simulator.cu:" + std::to_string(kDivergentBarrierLine)));
  CHECK(contains(m, "threads (40,0,0)..(63,0,0) (linear 40..63): exited"));
}

constexpr int kTwoBarriersLine = __LINE__ + 5;
__global__ void two_different_barriers(int* out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 0;
}

TEST_CASE("threads meeting at different __syncthreads calls are reported") {
  llmk::DeviceBuffer<int> out(64);
  llmk::Status s = llmk::launch(two_different_barriers, dim3(1), dim3(64), 0, nullptr, out.data());
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  CHECK(contains(s.message(), "barrier divergence"));
  CHECK(contains(s.message(), "simulator.cu:" + std::to_string(kTwoBarriersLine)));
  CHECK(contains(s.message(), "simulator.cu:" + std::to_string(kTwoBarriersLine - 2)));
}

constexpr int kBadMaskLine = __LINE__ + 3;
__global__ void shuffle_mask_omits_lane(int* out) {
  // Every lane takes part, but the mask leaves out lane 5.
  out[blockIdx.x * blockDim.x + threadIdx.x] = __shfl_xor_sync(0xffffffdfu, static_cast<int>(threadIdx.x), 1);
}

TEST_CASE("a shuffle whose mask omits a participating lane is reported with the lane and line") {
  llmk::DeviceBuffer<int> out(2 * 64);
  llmk::Status s = llmk::launch(shuffle_mask_omits_lane, dim3(2), dim3(64), 0, nullptr, out.data());
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  CHECK(contains(s.message(), "__shfl_xor_sync"));
  CHECK(contains(s.message(), "mask 0xffffffdf"));
  CHECK(contains(s.message(), "lane 5"));
  CHECK(contains(s.message(), "simulator.cu:" + std::to_string(kBadMaskLine)));
  CHECK((contains(s.message(), "thread (5,0,0)") || contains(s.message(), "thread (37,0,0)") ||
         contains(s.message(), "thread (4,0,0)") || contains(s.message(), "thread (36,0,0)")));
}

__global__ void shuffle_reads_outside_mask(int* out) {
  if (threadIdx.x < 16)
    out[threadIdx.x] = __shfl_sync(0x0000ffffu, 1, 20);  // source lane 20 is not in the mask
}

TEST_CASE("reading a lane outside the mask is reported") {
  llmk::DeviceBuffer<int> out(32);
  llmk::Status s = llmk::launch(shuffle_reads_outside_mask, dim3(1), dim3(32), 0, nullptr, out.data());
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  CHECK(contains(s.message(), "reads lane 20, which is not in the mask"));
}

__global__ void mismatched_collectives(int* out) {
  int v = static_cast<int>(threadIdx.x);
  if (threadIdx.x == 3)
    v = __shfl_down_sync(0xffffffffu, v, 1);  // lane 3 alone uses a different intrinsic
  else
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

TEST_CASE("lanes of one mask at different collectives are reported") {
  llmk::DeviceBuffer<int> out(32);
  llmk::Status s = llmk::launch(mismatched_collectives, dim3(1), dim3(32), 0, nullptr, out.data());
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  CHECK(contains(s.message(), "warp collective mismatch"));
}

__global__ void collective_missing_lane(int* out) {
  if (threadIdx.x == 7) return;  // lane 7 exits, the others wait for it forever
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
}

TEST_CASE("a lane that never reaches a collective is reported as a deadlock") {
  llmk::DeviceBuffer<int> out(32);
  llmk::Status s = llmk::launch(collective_missing_lane, dim3(1), dim3(32), 0, nullptr, out.data());
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  CHECK(contains(s.message(), "deadlock"));
  CHECK(contains(s.message(), "warp collective never completes"));
  CHECK(contains(s.message(), "threads (7,0,0)..(7,0,0) (linear 7..7): exited"));
}

__global__ void partial_warp_full_mask(int* out) {
  out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
}

TEST_CASE("a full mask in a partial warp names lanes that do not exist") {
  llmk::DeviceBuffer<int> out(48);
  llmk::Status s = llmk::launch(partial_warp_full_mask, dim3(1), dim3(48), 0, nullptr, out.data());
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  CHECK(contains(s.message(), "names lanes that do not exist"));
  CHECK(contains(s.message(), "warp 1"));
}

__global__ void cp_async_to_global(float* dst, const float* src) {
  llmk::arch::cp_async_cg16(dst, src);
}

TEST_CASE("cp.async to a non-shared destination is rejected") {
  llmk::DeviceBuffer<float> a(8), b(8);
  llmk::Status s = llmk::launch(cp_async_to_global, dim3(1), dim3(1), 64, nullptr, a.data(), b.data());
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "shared"));
}

__global__ void noop() {}

TEST_CASE("launch configurations are validated") {
  CHECK(contains(llmk::launch(noop, dim3(1), dim3(1025), 0, nullptr).message(), "'block'"));
  CHECK(contains(llmk::launch(noop, dim3(0), dim3(32), 0, nullptr).message(), "'grid'"));
  CHECK(contains(llmk::launch(noop, dim3(1), dim3(32), 300 * 1024, nullptr).message(), "'smem_bytes'"));
  CHECK(llmk::launch(noop, dim3(2, 3, 4), dim3(8, 4, 2), 0, nullptr).ok());
}

// ---- seeded order
// ------------------------------------------------------------------------------------------

__global__ void record_order(unsigned* counter, unsigned* order) {
  order[threadIdx.x] = atomicAdd(counter, 1u);
}

TEST_CASE("fiber order is shuffled (so order-dependent kernels are exposed)") {
  llmk::DeviceBuffer<unsigned> counter(std::vector<unsigned>{0}), order(64);
  REQUIRE(llmk::launch(record_order, dim3(1), dim3(64), 0, nullptr, counter.data(), order.data()).ok());
  std::vector<unsigned> got = order.to_host();
  std::vector<unsigned> sorted(got);
  std::sort(sorted.begin(), sorted.end());
  for (unsigned i = 0; i < 64; ++i) CHECK(sorted[i] == i);
  bool identity = true;
  for (unsigned i = 0; i < 64; ++i) identity = identity && got[i] == i;
  CHECK_FALSE(identity);
}

}  // namespace
