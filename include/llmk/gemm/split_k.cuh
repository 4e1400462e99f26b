// llmk/gemm/split_k.cuh: split-K with a deterministic reduction, shared by the GEMMs that split K over
// thread blocks when their output has too few tiles to fill the SMs (weight-only and 8-bit GEMMs at small M).
//
// A grid of tiles x S splits: split s runs a contiguous range of k-tiles and publishes its partial tile (the
// accumulators, fp32 or int32) to plane s of a caller-owned [S, M, ldp] array. The block that arrives last
// at its tile's arrival word sums the S planes in split order 0, 1, ..., S - 1 (the same bits whichever
// block is last) and applies the epilogue. The arrival word holds (this call's tag << 16 | arrivals): a word
// with another tag counts as none, so the workspace needs no initialization, and the last arrival resets it
// to 0.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "llmk/arch/named_barrier.cuh"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/vector.cuh"

namespace llmk::gemm {

/// Most splits a split-K GEMM takes (its reduction issues the loads of up to 16 splits at once).
inline constexpr int kSplitKMaxSplits = 16;

namespace detail {

// What a split-K kernel needs besides its operands (the grid's z is the split count; z = 1: no split).
template <class Acc>
struct SplitKArgs {
  Acc* partials = nullptr;                 // [splits, M, ldp]
  unsigned long long* arrivals = nullptr;  // one word per output tile (blockIdx.y * gridDim.x + blockIdx.x)
  unsigned long long tag = 0;              // this call's tag (split_k_next_tag)
  int ldp = 0;                             // split_k_pitch(N)
  int k_tiles_per_split = 0;               // k-tiles of split z: [z * this, min((z + 1) * this, k-tiles))
};

// How a call splits K, and the workspace that needs: the arrival words, then the partial planes.
struct QGemmSplitPlan {
  int splits = 1, k_tiles_per_split = 0;
  std::size_t arrival_bytes = 0, partial_bytes = 0;
  std::size_t workspace_bytes() const { return arrival_bytes + partial_bytes; }
};

// The named barrier the consumer warpgroups of a warp-specialized split-K kernel meet at to count their unit
// (split_k_publish_among); 1..3 are warpgroup_sync's.
inline constexpr int kSplitKConsumersBarrier = 4;

// The split count of a persistent kernel (one block an SM walking tiles x S units) whose time goes as rounds
// x k-tiles a unit: the S in [1, most] minimizing ceil(tiles S / sms) ceil(k_tiles / S), a larger S taken
// only for a gain of 5% or more (each split adds partials and a reduction). Where tiles < sms that fills one
// wave (32 tiles on 132 SMs: 4 splits); where tiles > sms it trims the last wave (224 tiles, 64 k-tiles: 4
// splits, 7 rounds of 16 instead of 2 of 64).
inline int split_k_rounds_splits(long long tiles, int k_tiles, int most, int sms) {
  const auto cost = [&](int s) { return (tiles * s + sms - 1) / sms * ((k_tiles + s - 1) / s); };
  int want = 1;
  for (int s = 2; s <= most; ++s)
    if (cost(s) * 20 < cost(want) * 19) want = s;
  return want;
}

// Shared memory one SM offers its resident blocks (cudaDevAttrMaxSharedMemoryPerMultiprocessor: 233472 bytes
// on sm_90, 167936 on sm_80, 102400 on sm_86 / sm_89; the simulator plans as an H100): the split planners
// divide it by a block's bytes plus the 1 KiB an SM reserves per block.
inline int device_smem_per_sm() {
#if defined(LLMK_CUDA)
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess) {
    const int bytes = ::llmk::detail::cached_device_attribute(
        ::llmk::detail::kSlotSmemPerSm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
    if (bytes > 0) return bytes;
  }
#endif
  return 233472;
}

// The partials' row pitch: N rounded up to 4 elements, so that the reduction reads 16-byte quads.
inline int split_k_pitch(int n) {
  return (n + 3) / 4 * 4;
}

inline std::size_t round_up_256(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// The plan of `want` splits (the caller's heuristic or split_k) over `tiles` output tiles of `k_tiles`
// k-tiles each: clamped to [1, min(kSplitKMaxSplits, k_tiles)], every split non-empty, and its workspace (one
// arrival word a tile, 4-byte partials [splits, M, split_k_pitch(N)]). The common tail of the split planners.
inline QGemmSplitPlan split_k_plan_of(long long want, long long tiles, int k_tiles, int m, int n) {
  QGemmSplitPlan plan;
  want = want < 1 ? 1 : want;
  want = want > kSplitKMaxSplits ? kSplitKMaxSplits : want;
  want = want > k_tiles ? k_tiles : want;
  plan.k_tiles_per_split = ceil_div(k_tiles, static_cast<int>(want));
  plan.splits = ceil_div(k_tiles, plan.k_tiles_per_split);  // no empty split
  if (plan.splits > 1) {
    plan.arrival_bytes = round_up_256(static_cast<std::size_t>(tiles) * sizeof(unsigned long long));
    plan.partial_bytes = static_cast<std::size_t>(plan.splits) * m * split_k_pitch(n) * 4;
  }
  return plan;
}

// A 48-bit tag per call, never 0 (the value a finished tile's arrival word is reset to): a counter scrambled
// by splitmix64's finalizer, so that tags look random and a stale word (a size, an offset, a small count left
// by other work) matches one only by chance, not because tags are small numbers.
inline unsigned long long split_k_next_tag() {
  static std::atomic<unsigned long long> counter{0};
  unsigned long long tag = 0;
  while (tag == 0) {
    unsigned long long z = counter.fetch_add(1, std::memory_order_relaxed) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    tag = (z ^ (z >> 31)) & ((1ull << 48) - 1);
  }
  return tag;
}

// Counts this block in its tile's word and returns whether it is the last of `splits`; the last resets the
// word to 0. Two atomics at most once the word is this call's (the first arrival finds the 0 the previous
// call's last one left, the others add to the tagged word): a CAS loop for every arrival made the last of S
// splits wait for up to S serial round trips to L2.
LLMK_DEVICE bool split_k_arrive(unsigned long long* word, unsigned long long tag, unsigned splits) {
  const unsigned long long first = (tag << 16) | 1ull;
  unsigned long long old = atomicCAS(word, 0ull, first), count = 1;
  while (old != 0ull) {
    if ((old >> 16) == tag) {  // tagged by this call: nobody resets it before the last arrival
      count = (atomicAdd(word, 1ull) & 0xFFFFull) + 1;
      break;
    }
    const unsigned long long seen = old;  // another call's word or stale bytes: replace it
    old = atomicCAS(word, seen, first);
    if (old == seen) break;
  }
  const bool last = count == splits;
  if (last) atomicExch(word, 0ull);
  return last;
}

// Stores the partials pair (x, y) (8-byte aligned) as one 8-byte access. A float pair goes out as a float2:
// store8's integer word made the compiler carry the fp16 Hopper GEMM's fp32 wgmma accumulators as integers
// across its k-loop, and the conversions between wgmmas made ptxas serialize them (C7514).
template <class Acc>
LLMK_DEVICE void split_k_store_pair(Acc* destination, Acc x, Acc y) {
#if LLMK_DEVICE_PASS
  if constexpr (std::is_same_v<Acc, float>) {
    *reinterpret_cast<float2*>(destination) = make_float2(x, y);
    return;
  }
#endif
  store8(destination, Vector8<Acc>{{x, y}});
}

// Writes a warp's accumulators in the mma C layout (acc[mi][ni]: rows row0 + 16 mi + g (+8), columns col0 +
// 8 ni + 2t (+1)) to a partials plane of row pitch ldp; rows past m and columns past ldp are skipped (col0
// is even, so a pair never straddles ldp).
template <int kMmaM, int kMmaN, class Acc>
LLMK_DEVICE void split_k_store_partial(Acc* plane, int ldp, int m, int row0, int col0,
                                       const Acc (&acc)[kMmaM][kMmaN][4]) {
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
#pragma unroll
  for (int ni = 0; ni < kMmaN; ++ni)
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = row0 + mi * 16 + g + hr * 8, col = col0 + ni * 8 + 2 * t;
        if (row < m && col < ldp)
          store8(plane + static_cast<std::int64_t>(row) * ldp + col,
                 Vector8<Acc>{{acc[mi][ni][hr * 2], acc[mi][ni][hr * 2 + 1]}});
      }
}

// Publishes this split's partials (written by the caller before the call), then tells the block whether it
// arrived last at the tile's word; `flag` is an int in shared memory. The last block may read every plane
// once this returns true.
LLMK_DEVICE bool split_k_publish(unsigned long long* word, unsigned long long tag, int* flag) {
  __threadfence();  // this thread's partials are visible device-wide before the arrival
  __syncthreads();
  if (threadIdx.x == 0) *flag = split_k_arrive(word, tag, gridDim.z) ? 1 : 0;
  __syncthreads();
  const bool last = *flag != 0;
  if (last) __threadfence();
  return last;
}

// split_k_publish for the kThreads threads of a warp-specialized block that hold the accumulators (its
// producer warps have left): `thread` in [0, kThreads), `barrier_id` a named barrier of theirs, `splits` the
// tile's split count.
template <int kThreads>
LLMK_DEVICE bool split_k_publish_among(unsigned long long* word, unsigned long long tag, unsigned splits,
                                       int* flag, int thread, int barrier_id) {
  __threadfence();
  arch::named_barrier_sync(barrier_id, kThreads);
  if (thread == 0) *flag = split_k_arrive(word, tag, splits) ? 1 : 0;
  arch::named_barrier_sync(barrier_id, kThreads);
  const bool last = *flag != 0;
  if (last) __threadfence();
  return last;
}

// a + b: fp32, or int32 wrapping as the tensor cores' int32 accumulation does (no signed overflow).
LLMK_DEVICE float split_k_add(float a, float b) {
  return a + b;
}
LLMK_DEVICE std::int32_t split_k_add(std::int32_t a, std::int32_t b) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
}

// The last block of a split-K tile: for each 4-column quad of the BM x BN tile at (block_m, block_n) inside
// [m, n), sum[e] = partials[0] + partials[1] + ... + partials[splits - 1] in split order, then
// store(row, col, sum, cols) with cols = min(4, n - col). The kThreads threads share the tile in quads
// (16-byte loads of the [m, ldp] planes, coalesced along N), and each issues the loads of kBatch splits for
// kQuads quads before adding any: a few round trips to L2 whatever the split count, where summing in the mma
// layout took one per element and split (the ~20 us floor of the first H100 runs of the weight-only GEMM).
// `thread` in [0, kThreads): the caller's index among the threads that reduce (split_k_reduce: the block's).
template <int kThreads, int BM, int BN, int kInFlight = 16, class Acc, class Store>
LLMK_DEVICE void split_k_reduce_as(int thread, const Acc* partials, int ldp, int m, int n, int block_m,
                                   int block_n, int splits, Store&& store) {
  constexpr int kQuadsPerRow = BN / 4, kTileQuads = BM * kQuadsPerRow;
  constexpr int kPerThread = (kTileQuads + kThreads - 1) / kThreads;
  constexpr int kQuads = kPerThread < 4 ? kPerThread : 4;  // quads summed together
  constexpr int kBatch = kInFlight / kQuads;               // their loads in flight: kInFlight x 16 bytes
  static_assert(sizeof(Acc) == 4 && BN % 4 == 0, "fp32 or int32 partials in whole quads");
  static_assert(kPerThread % kQuads == 0, "whole groups of quads per thread");
  const std::int64_t plane = static_cast<std::int64_t>(m) * ldp;
  for (int q0 = 0; q0 < kPerThread; q0 += kQuads) {
    const Acc* src[kQuads];
    bool live[kQuads];
    int row[kQuads], col[kQuads];
    Vector16<Acc> sum[kQuads];
#pragma unroll
    for (int i = 0; i < kQuads; ++i) {
      const int q = thread + (q0 + i) * kThreads;
      row[i] = block_m + q / kQuadsPerRow;
      col[i] = block_n + (q % kQuadsPerRow) * 4;
      live[i] = (kTileQuads % kThreads == 0 || q < kTileQuads) && row[i] < m && col[i] < n;
      src[i] = partials + (live[i] ? static_cast<std::int64_t>(row[i]) * ldp + col[i] : 0);
      if (live[i]) sum[i] = load16(src[i]);  // split 0 starts the sum (0 + x would turn -0 into +0)
    }
    for (int s0 = 1; s0 < splits; s0 += kBatch) {
      Vector16<Acc> part[kBatch][kQuads];
#pragma unroll
      for (int j = 0; j < kBatch; ++j)
#pragma unroll
        for (int i = 0; i < kQuads; ++i)
          if (live[i] && s0 + j < splits) part[j][i] = load16(src[i] + (s0 + j) * plane);
#pragma unroll
      for (int j = 0; j < kBatch; ++j)
#pragma unroll
        for (int i = 0; i < kQuads; ++i)
          if (live[i] && s0 + j < splits)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              sum[i].elements[e] = split_k_add(sum[i].elements[e], part[j][i].elements[e]);
    }
#pragma unroll
    for (int i = 0; i < kQuads; ++i)
      if (live[i]) store(row[i], col[i], sum[i].elements, min(4, n - col[i]));
  }
}

template <int kThreads, int BM, int BN, int kInFlight = 16, class Acc, class Store>
LLMK_DEVICE void split_k_reduce(const Acc* partials, int ldp, int m, int n, int block_m, int block_n,
                                int splits, Store&& store) {
  split_k_reduce_as<kThreads, BM, BN, kInFlight>(static_cast<int>(threadIdx.x), partials, ldp, m, n, block_m,
                                                 block_n, splits, static_cast<Store&&>(store));
}

}  // namespace detail

}  // namespace llmk::gemm
