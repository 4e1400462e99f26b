// llmk/obs/select_gpu.cuh: the exact "prune the k lowest" selection of the Wanda / magnitude kernels
// (llmk/obs/pruning_gpu.cuh), as one CTA-wide device function over a [rows, cols] candidate set (one row: per
// row; the whole layer: per layer). The pruning entries keep it per row, where an H100 run measured it 5x
// faster than CUB's device-wide sorts (bench/obs.cu: 537 us vs 2.75 ms at 4096 x 4096); per-layer sets are
// sorted by llmk::device::segmented_lowest_k_mask (llmk/core/device_algorithms.cuh), 58x faster there
// (1.17 ms vs 67.9 ms), unless the caller asks for this select (PruneGpuSelect::kBlockSelect).
//
// The rule is the host's (llmk/obs/pruning.hpp, detail::prune_lowest): candidates are indexed row-major, and
// the k of lowest (key, index) are pruned. Keys are unsigned integers that order as the scores do (the bit
// patterns of finite, non-negative fp32 / fp64 scores). The algorithm:
//   1. an exact radix select of the k-th smallest key T: 8-bit digits, most significant first, one
//      shared-memory histogram pass over the candidates per digit (4 passes for 32-bit keys, 8 for 64-bit),
//      a block scan of the 256 bins finds the digit and the rank of T among the keys with that prefix;
//   2. an ordered pass: keys < T are pruned, and the first `rank` keys == T in index order (a prefix count
//      over chunks of blockDim.x candidates: per-warp ballot / popc plus the warp offsets).
// Cost: (digits + 1) reads of the candidates by one CTA. Fine for a row or a block of rows; a whole layer on
// one CTA is slow (an offline step; a device-wide select would use all SMs).
#pragma once

#include <cstdint>

#include "llmk/config.cuh"

namespace llmk::obs::select_detail {

inline constexpr int kThreads = 256;  // the CTA size select_lowest assumes
inline constexpr int kWarps = kThreads / 32;
inline constexpr unsigned kFull = 0xffffffffu;

struct alignas(16) SelectSmem {
  unsigned hist[256];
  unsigned warp_total[kWarps];
  unsigned long long prefix;  // the digits of T found so far
  unsigned rank;              // 1-based rank of T among the keys matching prefix
};

// Block-wide inclusive scan of v (256 threads); *total gets the sum. Two barriers; warp_total reusable after.
LLMK_DEVICE unsigned block_scan(unsigned v, unsigned* warp_total, unsigned* total) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const unsigned o = __shfl_up_sync(kFull, v, off);
    if (lane >= off) v += o;
  }
  if (lane == 31) warp_total[warp] = v;
  __syncthreads();
  unsigned base = 0, sum = 0;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) {
    const unsigned t = warp_total[i];
    base += i < warp ? t : 0u;
    sum += t;
  }
  __syncthreads();
  *total = sum;
  return v + base;
}

/// Called by all kThreads threads of a CTA: prunes the k lowest (key(r, c), r * cols + c) of the candidates
/// r < rows, c < cols, calling visit(r, c, pruned) exactly once for every candidate (by some thread). Key is
/// an unsigned integer type; key(r, c) must be deterministic (it is evaluated several times). Ends with a
/// barrier, so sm can be reused at once.
/// all_ties (the reference codes' threshold rule, PruneCount::kThreshold): every key equal to the k-th is
/// pruned too, not only the first `rank` of them in index order (the ordered pass then needs no counting).
template <class Key, class KeyFn, class Visit>
LLMK_DEVICE void select_lowest(SelectSmem& sm, std::int64_t rows, std::int64_t cols, std::int64_t k,
                               KeyFn&& key, Visit&& visit, bool all_ties = false) {
  constexpr int kBits = static_cast<int>(sizeof(Key) * 8);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32, warp = tid / 32;
  Key thr = 0;
  unsigned rank = 0;  // the number of keys == thr to prune (lowest indices first)
  if (k > 0) {
    if (tid == 0) {
      sm.prefix = 0;
      sm.rank = static_cast<unsigned>(k);
    }
    for (int shift = kBits - 8; shift >= 0; shift -= 8) {
      sm.hist[tid] = 0;
      __syncthreads();  // hist cleared, prefix / rank of the previous digit visible
      const Key prefix = static_cast<Key>(sm.prefix);
      const unsigned want = sm.rank;
      const Key high = shift + 8 >= kBits ? Key{0} : static_cast<Key>(~Key{0} << (shift + 8));
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = tid; c < cols; c += kThreads) {
          const Key v = key(r, c);
          if ((v & high) == prefix) atomicAdd(&sm.hist[static_cast<unsigned>(v >> shift) & 255u], 1u);
        }
      __syncthreads();
      const unsigned count = sm.hist[tid];
      unsigned total = 0;
      const unsigned incl = block_scan(count, sm.warp_total, &total);
      const unsigned excl = incl - count;
      if (excl < want && want <= incl) {  // exactly one thread: the digit of the want-th key
        sm.prefix = static_cast<unsigned long long>(prefix | (static_cast<Key>(tid) << shift));
        sm.rank = want - excl;
      }
      __syncthreads();  // before hist is cleared again; prefix / rank written
    }
    thr = static_cast<Key>(sm.prefix);
    rank = sm.rank;
  }
  // Ordered pass: prune key < thr, and key == thr while fewer than `rank` equal keys precede.
  unsigned seen = 0;  // keys == thr in the chunks before
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c0 = 0; c0 < cols; c0 += kThreads) {
      const std::int64_t c = c0 + tid;
      const bool in = c < cols;
      const Key v = in ? key(r, c) : Key{0};
      const bool eq = k > 0 && in && v == thr;
      unsigned before = 0;
      if (k > 0 && !all_ties && seen < rank) {  // block-uniform
        const unsigned ball = __ballot_sync(kFull, eq);
        if (lane == 0) sm.warp_total[warp] = static_cast<unsigned>(__popc(ball));
        __syncthreads();
        before = seen + static_cast<unsigned>(__popc(ball & ((1u << lane) - 1u)));
        unsigned sum = 0;
#pragma unroll
        for (int i = 0; i < kWarps; ++i) {
          const unsigned t = sm.warp_total[i];
          before += i < warp ? t : 0u;
          sum += t;
        }
        __syncthreads();
        seen += sum;
      } else {
        before = rank;  // no equal key is pruned any more
      }
      if (in) visit(r, c, k > 0 && (v < thr || (eq && (all_ties || before < rank))));
    }
  __syncthreads();  // sm reusable
}

}  // namespace llmk::obs::select_detail
