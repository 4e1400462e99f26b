// llmk/gemm/kmajor_mainloop.cuh: the mainloop shared by the tensor-core GEMMs whose operands are both K-major
// ("TN": A [M, K] and B [N, K] row-major): int8 (W8A8), fp8, the fp16 / bf16 tile GEMM (tile_gemm.cuh) and
// the 16-bit part of the mixed LLM.int8() GEMM.
//
// The loop works in BYTES along K. Every mma these kernels use consumes 32 bytes of K per operand row
// (m16n8k16 on 2-byte types, m16n8k32 on 1-byte types), and ldmatrix moves 8 x 16-byte rows whatever the
// element type, so one addressing scheme serves all of them: lane l of an A ldmatrix.x4 addresses row l % 16
// and byte column (l / 16) * 16 of each 16 x 32-byte step; for B, matrix j = l / 8 covers n rows (j / 2)
// * 8.. and bytes (j % 2) * 16.., whose registers are exactly the b0/b1 of two n8 tiles.
//
// A block owns BM x BN of the output and streams BK-byte slices of A and B through a Stages-deep cp.async
// ring (rows padded by 16 bytes so the 8 rows of one ldmatrix hit different bank groups); each warp owns a WM
// x WN sub-tile of accumulators in the mma C layout (rows g, g + 8; columns 2t, 2t + 1). Accumulators of rows
// past M or columns past N hold sums of real (clamped) rows, not zeros: callers store and reduce only the
// in-range ones.
#pragma once

#include <cstdint>

#include "llmk/arch/cp_async.cuh"
#include "llmk/arch/ldmatrix.cuh"
#include "llmk/config.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/vector.cuh"
#include "llmk/gemm/split_k.cuh"

namespace llmk::gemm {

/// Tile shape of the K-major GEMMs: BM x BN output tile, BK ELEMENTS of K per pipeline stage, WarpsM x WarpsN
/// warps, Stages-deep ring. kElementBytes is the operand size (1 for int8/fp8, 2 for fp16/bf16).
///   using Tile = llmk::gemm::KMajorTile<64, 128, 64, 2, 2, 3>;   // e.g. w8a8_gemm_with_tile<Out, Tile>
template <int BM_, int BN_, int BK_, int WarpsM_, int WarpsN_, int Stages_>
struct KMajorTile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WarpsM = WarpsM_, WarpsN = WarpsN_, Stages = Stages_;
  static constexpr int kThreads = WarpsM * WarpsN * 32;
  static constexpr int WM = BM / WarpsM, WN = BN / WarpsN;
  static constexpr int kMmaM = WM / 16, kMmaN = WN / 8;
  static_assert(BM % (16 * WarpsM) == 0, "each warp needs whole m16 tiles: BM % (16 * WarpsM) == 0");
  static_assert(BN % (16 * WarpsN) == 0, "each warp loads B in n16 pairs: BN % (16 * WarpsN) == 0");
  static_assert(Stages >= 2 && Stages <= 8, "the cp.async ring needs 2..8 stages");

  /// Byte geometry for an operand of `kElementBytes` bytes.
  template <int kElementBytes>
  struct Bytes {
    static constexpr int kSlice = BK * kElementBytes;  // bytes of K per stage
    static constexpr int kPitch = kSlice + 16;         // padded shared row
    static constexpr int kChunks = kSlice / 16;        // 16-byte chunks per row and stage
    static_assert(kSlice % 32 == 0, "BK must cover whole mma steps: BK * element bytes % 32 == 0");
    static constexpr int kStageBytesA = BM * kPitch, kStageBytesB = BN * kPitch;
    static constexpr int kSmemBytes = Stages * (kStageBytesA + kStageBytesB);
  };
};

namespace detail {

// One thread's share of the copies of an operand's K slices: kRows rows of each slice from global row `row0`.
// The slices run backwards from K's end: slice 0 starts at byte `k_first` = k_bytes - k_tiles * kSlice <= 0
// and its chunks before byte 0 are zero-filled (the K tail, handled once, in the prologue); every later slice
// lies wholly inside K and costs a cp.async and a 64-bit add per chunk, with no predicate. The source of each
// chunk (its row and column) is computed once. Rows past `rows` load row `rows - 1` instead of zeros: their
// products land only in outputs past M or N, which are never stored (nor summed by split-K).
template <class Tile, int kElementBytes, int kRows>
struct KMajorSliceCopy {
  using B = typename Tile::template Bytes<kElementBytes>;
  static constexpr int kTotal = kRows * B::kChunks, kPer = (kTotal + Tile::kThreads - 1) / Tile::kThreads;
  // Chunk i of a thread is chunk tid + i * kThreads; when kThreads is a multiple of the chunks per row, it is
  // kRowStep rows below chunk i - 1 in the same column, so its shared offset is an immediate from chunk 0's.
  static constexpr bool kRowAligned = Tile::kThreads % B::kChunks == 0;
  static constexpr int kRowStep = Tile::kThreads / B::kChunks;

  const unsigned char* src[kPer];  // chunk i's row and column, at K byte 0
  int k_next;                      // the next slice's first K byte (k_first, then k_first + kSlice, ...)

  LLMK_DEVICE KMajorSliceCopy(const unsigned char* base, std::int64_t ld_bytes, int rows, int row0,
                              int k_first)
      : k_next(k_first) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = min(static_cast<int>(threadIdx.x) + i * Tile::kThreads, kTotal - 1);
      const int row = c / B::kChunks, col = (c % B::kChunks) * 16;
      src[i] = base + static_cast<std::int64_t>(min(row0 + row, rows - 1)) * ld_bytes + col;
    }
  }

  LLMK_DEVICE static bool has(int i) {
    return kTotal % Tile::kThreads == 0 || static_cast<int>(threadIdx.x) + i * Tile::kThreads < kTotal;
  }
  LLMK_DEVICE static int chunk_col(int i) {
    return ((static_cast<int>(threadIdx.x) + i * Tile::kThreads) % B::kChunks) * 16;
  }
  LLMK_DEVICE static int dst(int i) {
    const int tid = static_cast<int>(threadIdx.x);
    if constexpr (kRowAligned) {
      return (tid / B::kChunks + i * kRowStep) * B::kPitch + (tid % B::kChunks) * 16;
    } else {
      const int c = tid + i * Tile::kThreads;
      return (c / B::kChunks) * B::kPitch + (c % B::kChunks) * 16;
    }
  }

  // Slice 0 into `slot`: chunks before K byte 0 zero-filled (their source stays the valid row start).
  LLMK_DEVICE void first(unsigned char* slot) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const bool valid = k_next + chunk_col(i) >= 0;
      if (has(i)) arch::cp_async_cg16_zfill(slot + dst(i), valid ? src[i] + k_next : src[i], valid ? 16 : 0);
    }
    k_next += B::kSlice;
  }
  // The next slice (slice 1 on: wholly inside K) into `slot`.
  LLMK_DEVICE void next(unsigned char* slot) {
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (has(i)) arch::cp_async_cg16(slot + dst(i), src[i] + k_next);
    k_next += B::kSlice;
  }
};

}  // namespace detail

/// One K-major operand pair of a GEMM: A [m, k] and B [n, k] with leading dimensions in elements (example:
/// kmajor_mainloop).
struct KMajorOperands {
  const void* a;
  const void* b;
  std::int64_t lda, ldb;
  int m, n, k;
};

namespace detail {
/// k_bytes of K in slice-byte slices: how many, and the K byte where slice 0 begins (<= 0: slice 0 is the
/// partial one when slice does not divide k_bytes). Computed without k_bytes + slice - 1 or tiles * slice,
/// which pass 2^31 near the GEMMs' K limit (16-bit K = 2^30 - 8: 2^31 - 16 bytes).
struct KSlicing {
  int tiles, first;
};
LLMK_HOST_DEVICE constexpr KSlicing k_slicing(int k_bytes, int slice) {
  const int rest = k_bytes % slice;
  return {k_bytes / slice + (rest != 0 ? 1 : 0), rest != 0 ? rest - slice : 0};
}
}  // namespace detail

/// acc += A[block_m.., :] * B[block_n.., :]^T for this warp's sub-tile, through the ring in `smem` (Tile::
/// Bytes<E>::kSmemBytes bytes). Mma is the atom (its fragments are 32 bytes of K); Acc its accumulator type.
/// Ends with every copy landed and a barrier, so the caller may reuse `smem` afterwards. Accumulators of rows
/// past op.m or columns past op.n are not zero (KMajorSliceCopy loads clamped rows there). A fp16 block:
///   float acc[Tile::kMmaM][Tile::kMmaN][4] = {};
///   const llmk::gemm::KMajorOperands op{a, b, lda, ldb, m, n, k};
///   llmk::gemm::kmajor_mainloop<Tile, 2, llmk::arch::MMA_16x8x16_F32F16F16F32>(op, block_m, block_n,
///                                                                              llmk::dynamic_smem(), acc);
template <class Tile, int kElementBytes, class Mma, class Acc>
LLMK_DEVICE void kmajor_mainloop(const KMajorOperands& op, int block_m, int block_n, unsigned char* smem,
                                 Acc (&acc)[Tile::kMmaM][Tile::kMmaN][4]) {
  using B = typename Tile::template Bytes<kElementBytes>;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warp_m = warp / Tile::WarpsN, warp_n = warp % Tile::WarpsN;
  const std::int64_t lda = op.lda * kElementBytes, ldb = op.ldb * kElementBytes;
  const int k_bytes = op.k * kElementBytes;
  const detail::KSlicing slicing = detail::k_slicing(k_bytes, B::kSlice);
  const int k_tiles = slicing.tiles;
  unsigned char* ring_a = smem;
  unsigned char* ring_b = smem + Tile::Stages * B::kStageBytesA;
  // Slice kt covers K bytes [k_first + kt * kSlice, + kSlice): the partial one (if any) is slice 0.
  const int k_first = slicing.first;
  detail::KMajorSliceCopy<Tile, kElementBytes, Tile::BM> copy_a(static_cast<const unsigned char*>(op.a), lda,
                                                                op.m, block_m, k_first);
  detail::KMajorSliceCopy<Tile, kElementBytes, Tile::BN> copy_b(static_cast<const unsigned char*>(op.b), ldb,
                                                                op.n, block_n, k_first);
  // Slices are issued in order, slice 0 in the prologue.
  copy_a.first(ring_a);
  copy_b.first(ring_b);
  arch::cp_async_commit();
#pragma unroll
  for (int s = 1; s < Tile::Stages - 1; ++s) {
    if (s < k_tiles) {
      copy_a.next(ring_a + s * B::kStageBytesA);
      copy_b.next(ring_b + s * B::kStageBytesB);
    }
    arch::cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    // Slice kt has landed once at most Stages - 2 newer groups are pending; the barrier publishes every
    // thread's copies and frees the slot refilled next (read in iteration kt - 1). Unsigned slots: no sign
    // fix-ups of kt % Stages.
    arch::cp_async_wait<Tile::Stages - 2>();
    __syncthreads();
    const int next = kt + Tile::Stages - 1;
    if (next < k_tiles) {
      const unsigned refill = static_cast<unsigned>(next) % Tile::Stages;
      copy_a.next(ring_a + refill * B::kStageBytesA);
      copy_b.next(ring_b + refill * B::kStageBytesB);
    }
    arch::cp_async_commit();

    const unsigned slot = static_cast<unsigned>(kt) % Tile::Stages;
    const unsigned char* sa = ring_a + slot * B::kStageBytesA;
    const unsigned char* sb = ring_b + slot * B::kStageBytesB;
#pragma unroll
    for (int kk = 0; kk < B::kSlice; kk += 32) {
      std::uint32_t af[Tile::kMmaM][4];
#pragma unroll
      for (int mi = 0; mi < Tile::kMmaM; ++mi) {
        const int row = warp_m * Tile::WM + mi * 16 + lane % 16;
        arch::LDSM_x4::copy(sa + row * B::kPitch + kk + (lane / 16) * 16, af[mi][0], af[mi][1], af[mi][2],
                            af[mi][3]);
      }
      std::uint32_t bf[Tile::kMmaN][2];
#pragma unroll
      for (int nj = 0; nj < Tile::kMmaN; nj += 2) {
        const int j = lane / 8;
        const int row = warp_n * Tile::WN + nj * 8 + (j / 2) * 8 + lane % 8;
        arch::LDSM_x4::copy(sb + row * B::kPitch + kk + (j % 2) * 16, bf[nj][0], bf[nj][1], bf[nj + 1][0],
                            bf[nj + 1][1]);
      }
#pragma unroll
      for (int mi = 0; mi < Tile::kMmaM; ++mi)
#pragma unroll
        for (int ni = 0; ni < Tile::kMmaN; ++ni) Mma::fma(acc[mi][ni], af[mi], bf[ni], acc[mi][ni]);
    }
  }
  arch::cp_async_wait_all();
  __syncthreads();
}

namespace detail {

// Split-K's view of a K-major GEMM: split blockIdx.z's k-tiles as a GEMM over a window of K (A and B advanced
// to its start, K its length; the last window ends at K), so the mainloop is the unsplit one, unchanged.
// k_tiles_per_split counts Tile::BK-element slices; T is the operand's element type.
template <class Tile, class T>
LLMK_DEVICE KMajorOperands kmajor_split_window(KMajorOperands op, int k_tiles_per_split) {
  const int k0 = static_cast<int>(blockIdx.z) * k_tiles_per_split * Tile::BK;
  op.a = static_cast<const T*>(op.a) + k0;
  op.b = static_cast<const T*>(op.b) + k0;
  op.k = min(op.k - k0, k_tiles_per_split * Tile::BK);
  return op;
}

// The end of a split-K block of a K-major tile: publish this split's accumulators, and in the block that
// arrives last, sum every split in order and store value(row, col, sum) as Out (4-column quads: one 8- or
// 16-byte store each where d and ldd allow it).
template <class Tile, class Out, class Acc, class Value>
LLMK_DEVICE void kmajor_split_k_finish(const SplitKArgs<Acc>& split,
                                       const Acc (&acc)[Tile::kMmaM][Tile::kMmaN][4], Out* d,
                                       std::int64_t ldd, int block_m, int block_n, int m, int n,
                                       Value&& value) {
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int warp_m = warp / Tile::WarpsN, warp_n = warp % Tile::WarpsN;
  split_k_store_partial(split.partials + static_cast<std::int64_t>(blockIdx.z) * m * split.ldp, split.ldp, m,
                        block_m + warp_m * Tile::WM, block_n + warp_n * Tile::WN, acc);
  // The flag lives in the ring's first bytes: kmajor_mainloop ended with a barrier after its last read.
  int* flag = reinterpret_cast<int*>(dynamic_smem());
  if (!split_k_publish(&split.arrivals[blockIdx.y * gridDim.x + blockIdx.x], split.tag, flag)) return;
  const bool vector_ok = ldd % 4 == 0 && reinterpret_cast<std::uintptr_t>(d) % (4 * sizeof(Out)) == 0;
  split_k_reduce<Tile::kThreads, Tile::BM, Tile::BN>(
      split.partials, split.ldp, m, n, block_m, block_n, static_cast<int>(gridDim.z),
      [&](int row, int col, const Acc(&sum)[4], int cols) {
        Out out[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) out[e] = e < cols ? value(row, col + e, sum[e]) : Out{};
        Out* dst = d + static_cast<std::int64_t>(row) * ldd + col;
        if (cols == 4 && vector_ok) {
          if constexpr (sizeof(Out) == 4)
            store16(dst, Vector16<Out>{{out[0], out[1], out[2], out[3]}});
          else
            store8(dst, Vector8<Out>{{out[0], out[1], out[2], out[3]}});
        } else {
          for (int e = 0; e < cols; ++e) dst[e] = out[e];
        }
      });
}

}  // namespace detail

/// Block-relative row of this thread's accumulators [mi][.][e] with e / 2 == h (h = 1: the row 8 below), and
/// column of [.][ni][e] with e % 2 == odd (the mma.sync m16n8 D layout over the block's warps).
///   const int row = block_m + llmk::gemm::acc_row<Tile>(mi, e / 2);   // of acc[mi][ni][e]
///   const int col = block_n + llmk::gemm::acc_col<Tile>(ni, e % 2);
template <class Tile>
LLMK_DEVICE int acc_row(int mi, int h) {
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  return (warp / Tile::WarpsN) * Tile::WM + mi * 16 + lane / 4 + h * 8;
}
/// The column of acc_row's pair (see there).
template <class Tile>
LLMK_DEVICE int acc_col(int ni, int odd) {
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  return (warp % Tile::WarpsN) * Tile::WN + ni * 8 + 2 * (lane % 4) + odd;
}

/// Shared memory the staged epilogue needs for an Out tile (rows padded by 16 bytes): a kernel's dynamic
/// shared memory is max(ring bytes, kStagedEpilogueBytes<Tile, Out>).
template <class Tile, class Out>
inline constexpr int kStagedEpilogueBytes = Tile::BM*(Tile::BN* static_cast<int>(sizeof(Out)) + 16);

/// Writes the block's output tile through shared memory, so that global stores are 16-byte vectors: every
/// thread converts its in-range accumulators with value(row, col, mi, ni, e) -> Out into a padded [BM][BN]
/// tile in `smem` (kStagedEpilogueBytes, free after kmajor_mainloop), then the block copies whole 16-byte
/// chunks of rows to d (element stores for a row's tail past N, or when d / ldd are not 16-byte aligned).
///   llmk::gemm::store_tile_staged<Tile>(llmk::dynamic_smem(), d, ldd, block_m, block_n, m, n,
///       [&](int row, int col, int mi, int ni, int e) { return epi.value(row, col, acc[mi][ni][e]); });
template <class Tile, class Out, class F>
LLMK_DEVICE void store_tile_staged(unsigned char* smem, Out* d, std::int64_t ldd, int block_m, int block_n,
                                   int m, int n, F&& value) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(Out));
  constexpr int kPitch = Tile::BN + kVec;  // elements
  static_assert(Tile::BN % kVec == 0, "BN must hold whole 16-byte chunks of the output type");
  Out* tile = reinterpret_cast<Out*>(smem);
#pragma unroll
  for (int mi = 0; mi < Tile::kMmaM; ++mi)
#pragma unroll
    for (int ni = 0; ni < Tile::kMmaN; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = acc_row<Tile>(mi, e / 2), c = acc_col<Tile>(ni, e % 2);
        const int row = block_m + r, col = block_n + c;
        tile[r * kPitch + c] = (row < m && col < n) ? value(row, col, mi, ni, e) : Out(0);
      }
  __syncthreads();
  const bool vector_ok = ldd % kVec == 0 && reinterpret_cast<std::uintptr_t>(d) % 16 == 0;
  constexpr int kChunksPerRow = Tile::BN / kVec;
  for (int c = static_cast<int>(threadIdx.x); c < Tile::BM * kChunksPerRow; c += Tile::kThreads) {
    const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * kVec;
    const int grow = block_m + r, gcol = block_n + col;
    if (grow >= m || gcol >= n) continue;
    Out* dst = d + static_cast<std::int64_t>(grow) * ldd + gcol;
    const Out* src = tile + r * kPitch + col;
    if (vector_ok && gcol + kVec <= n) {
      store16(dst, load16(src));
    } else {
      for (int e = 0; e < kVec && gcol + e < n; ++e) dst[e] = src[e];
    }
  }
}

}  // namespace llmk::gemm
