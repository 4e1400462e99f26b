// llmk/attention/tile_ops.cuh: the warp-level steps both attention kernels are made of, in the order the math
// runs: load rows (cp.async), S = Q K^T (ldmatrix + mma), scale/soft-cap/mask, online softmax
// (online_softmax.cuh), O += P V (ldmatrix.trans + mma), store O through shared memory in 16-byte vectors.
//
// Shared-memory tiles are row-major [rows][kPitch] with kPitch = head_dim + 8 elements: the 16-byte pad puts
// the 8 rows one ldmatrix reads in different bank groups. A warp's fragment covers 16 * kMmaM query rows
// and 8 * kN8 keys; accumulators follow the mma.m16n8 layout (thread holds rows g, g + 8, columns 2t, 2t +
// 1).
#pragma once

#include <cstdint>
#include <cstring>

#include "llmk/arch/convert.cuh"
#include "llmk/arch/cp_async.cuh"
#include "llmk/arch/ldmatrix.cuh"
#include "llmk/arch/mma.cuh"
#include "llmk/arch/mma_f32.cuh"
#include "llmk/attention/online_softmax.cuh"
#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/vector.cuh"

namespace llmk::attention::detail {

/// The 16x8x16 fp32-accumulating mma for an input type, and the packing of two floats into its operand.
template <class T>
struct MmaFor {
  using Atom = typename arch::MmaF32For<T>::Atom;
  LLMK_DEVICE static std::uint32_t pack(float lo, float hi) { return arch::MmaF32For<T>::pack(lo, hi); }
};

/// K and V tiles of kRows rows whose K and V rows sit at the same offset from their bases (a paged cache: K
/// and V pages share the page table and the strides): row_offset(r) gives the offset of row r in elements (<
/// 0: zero-fill both rows), looked up once per row for both copies. A row is copied by a group of up to 4
/// threads, each taking every 4th 16-byte chunk at immediate offsets from one row pointer, so a thread looks
/// up kRows / (kThreads / 4) rows (2 at a 64-row tile of 128 threads; one per 16-byte chunk, 8, before), and
/// a warp's copy covers 8 rows x 64 contiguous bytes. A zero-filled row copies from the pool's first row
/// (src-size 0 reads nothing).
template <int kRows, int kDim, int kPitch, int kThreads, class T, class RowOffset>
LLMK_DEVICE void load_kv_rows_async(T* k_tile, T* v_tile, const T* k_base, const T* v_base,
                                    const RowOffset& row_offset, int tid) {
  constexpr int kChunks = kDim / 8;  // 16-byte chunks of a row
  constexpr int kPerRow = kChunks % 4 == 0 ? 4 : (kChunks % 2 == 0 ? 2 : 1);
  static_assert(kThreads % kPerRow == 0, "whole row groups");
  constexpr int kRowsPerPass = kThreads / kPerRow, kPasses = (kRows + kRowsPerPass - 1) / kRowsPerPass;
  const int part = tid % kPerRow, row0 = tid / kPerRow;
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int row = row0 + i * kRowsPerPass;
    if (kRows % kRowsPerPass != 0 && row >= kRows) break;
    const std::int64_t off = row_offset(row);
    const bool valid = off >= 0;
    const T* k_src = k_base + (valid ? off : 0) + part * 8;
    const T* v_src = v_base + (valid ? off : 0) + part * 8;
    T* k_dst = k_tile + row * kPitch + part * 8;
    T* v_dst = v_tile + row * kPitch + part * 8;
#pragma unroll
    for (int c = 0; c < kChunks / kPerRow; ++c) {
      arch::cp_async_cg16_zfill(k_dst + c * kPerRow * 8, k_src + c * kPerRow * 8, valid ? 16 : 0);
      arch::cp_async_cg16_zfill(v_dst + c * kPerRow * 8, v_src + c * kPerRow * 8, valid ? 16 : 0);
    }
  }
}

/// load_kv_rows_async over a paged cache with its page lookups a tile ahead: fetch() issues the block-table
/// loads of a tile's rows (the rows and threads of load_kv_rows_async), issue() (called a pipeline step
/// later, for the same tile) checks them, forms the row offsets and issues the copies. A table load's latency
/// then overlaps a tile's compute instead of holding back the copies that need it (paged decode: one global
/// load round trip per tile before its copies could start).
template <int kRows, int kDim, int kPitch, int kThreads>
struct PagedRowsAhead {
  static constexpr int kChunks = kDim / 8;  // 16-byte chunks of a row
  static constexpr int kPerRow = kChunks % 4 == 0 ? 4 : (kChunks % 2 == 0 ? 2 : 1);
  static constexpr int kRowsPerPass = kThreads / kPerRow;
  static constexpr int kPasses = (kRows + kRowsPerPass - 1) / kRowsPerPass;
  static_assert(kThreads % kPerRow == 0 && kPasses <= 32, "whole row groups");
  int page[kPasses], slot[kPasses];  // raw table entries (checked in issue) and slots
  unsigned in_seq = 0;               // bit i: pass i's row is a key of the sequence

  /// `table`: the sequence's row of the page table (PagedKv::table_row, looked up once per block).
  template <class Pages>
  LLMK_DEVICE void fetch(const Pages& pages, const int* table, int key0, int key_end, int tid) {
    in_seq = 0;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int row = tid / kPerRow + i * kRowsPerPass;
      page[i] = slot[i] = 0;
      if (kRows % kRowsPerPass != 0 && row >= kRows) break;
      if (key0 + row < key_end) {
        int logical;
        pages.split_key(key0 + row, logical, slot[i]);
        page[i] = table[logical];
        in_seq |= 1u << i;
      }
    }
  }

  // The copy loop repeats load_kv_rows_async's on purpose: through a shared helper ptxas lost the immediate
  // chunk offsets (d128 decode 397 -> 449 instructions per 32 HMMAs).
  template <class T, class Pages>
  LLMK_DEVICE void issue(T* k_tile, T* v_tile, const Pages& pages, int head, int tid) const {
    const int part = tid % kPerRow;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int row = tid / kPerRow + i * kRowsPerPass;
      if (kRows % kRowsPerPass != 0 && row >= kRows) break;
      const int p = (in_seq >> i) & 1u ? pages.checked_page(page[i]) : -1;
      const bool valid = p >= 0;
      const std::int64_t off = valid ? pages.row_offset_at(p, slot[i], head) : 0;
      const T* k_src = pages.k_pages + off + part * 8;
      const T* v_src = pages.v_pages + off + part * 8;
      T* k_dst = k_tile + row * kPitch + part * 8;
      T* v_dst = v_tile + row * kPitch + part * 8;
#pragma unroll
      for (int c = 0; c < kChunks / kPerRow; ++c) {
        arch::cp_async_cg16_zfill(k_dst + c * kPerRow * 8, k_src + c * kPerRow * 8, valid ? 16 : 0);
        arch::cp_async_cg16_zfill(v_dst + c * kPerRow * 8, v_src + c * kPerRow * 8, valid ? 16 : 0);
      }
    }
  }
};

/// Scores into the base-2 domain of the online softmax, with the optional soft-cap:
///   x = log2(e) * (softcap > 0 ? softcap * tanh(scale * s / softcap) : scale * s)
/// split into a per-score part (operator(): s, or tanh(s * scale / softcap)) and a positive factor
/// (exp_scale(): scale log2(e), or softcap log2(e)) that FragmentSoftmax::update folds into its exponent
/// FFMA.
struct ScoreTransform {
  float scale_log2 = 0.0f;  // scale * log2(e)      (no soft-cap)
  float pre = 0.0f;         // scale / softcap       (soft-cap)
  float post = 0.0f;        // softcap * log2(e)     (soft-cap)
  bool softcap = false;

  static ScoreTransform make(float scale, float softcap) {
    ScoreTransform t;
    t.softcap = softcap > 0.0f;
    t.scale_log2 = scale * kLog2e;
    t.pre = t.softcap ? scale / softcap : 0.0f;
    t.post = softcap * kLog2e;
    return t;
  }
  LLMK_DEVICE float operator()(float s) const { return softcap ? ::tanhf(s * pre) : s; }
  LLMK_HOST_DEVICE float exp_scale() const { return softcap ? post : scale_log2; }
};

/// Issues cp.async copies of kRows rows of kDim elements into `tile` (pitch kPitch), kThreads threads
/// cooperating (this one is `tid`). row_src(r) gives the global address of row r, or nullptr to zero-fill
/// it (the copy then reads nothing; `any_valid` is a valid address the instruction may name).
template <int kRows, int kDim, int kPitch, int kThreads, class T, class RowSrc>
LLMK_DEVICE void load_rows_async(T* tile, const RowSrc& row_src, const T* any_valid, int tid) {
  constexpr int kChunks = kDim / 8, kTotal = kRows * kChunks;
  constexpr int kPerThread = (kTotal + kThreads - 1) / kThreads;
#pragma unroll 4
  for (int i = 0; i < kPerThread; ++i) {
    const int c = tid + i * kThreads;
    if (kTotal % kThreads != 0 && c >= kTotal) break;
    const int row = c / kChunks, col = (c % kChunks) * 8;
    const T* src = row_src(row);
    arch::cp_async_cg16_zfill(&tile[row * kPitch + col], src != nullptr ? src + col : any_valid,
                              src != nullptr ? 16 : 0);
  }
}

/// The thread -> chunk map of copies of rows at a constant stride (a dense K/V cache). A group of kRowThreads
/// threads covers a run of kRowThreads * 16 bytes of a row and a thread takes every kRowThreads-th 16-byte
/// chunk of its row, at immediate offsets from one address: a thread needs one 64-bit address per row it
/// copies, not one per chunk. 8 threads per row (each warp instruction moves whole 128-byte lines) up to head
/// dim 128; 4 above (64-byte runs, whole sectors): at d256 a 64-key tile is then 2 rows per thread, not 4,
/// and the rows' address arithmetic 8 instructions instead of about 20 per tile and tensor. Head dims that
/// are not a multiple of 64 use groups of 4 or 2 threads per row.
template <int kRows, int kDim, int kThreads>
struct StridedRowCopy {
  static constexpr int kChunks = kDim / 8;  // 16-byte chunks per row
  static constexpr int kRowThreads =        // threads per row
      (kChunks % 8 == 0 && kChunks <= 16) ? 8 : (kChunks % 4 == 0 ? 4 : (kChunks % 2 == 0 ? 2 : 1));
  static constexpr int kRowChunks = kChunks / kRowThreads;  // chunks per thread and row
  static constexpr int kChunkStep = kRowThreads * 8;        // elements between a thread's chunks
  static constexpr bool kUsable = kThreads % kRowThreads == 0;
  static constexpr int kRowStep = kUsable ? kThreads / kRowThreads : 1;  // rows between a thread's rows
  static constexpr int kThreadRows = (kRows + kRowStep - 1) / kRowStep;  // rows per thread

  LLMK_DEVICE static int row0(int tid) { return tid / kRowThreads; }
  LLMK_DEVICE static int col0(int tid) { return (tid % kRowThreads) * 8; }
  /// This thread's first source element relative to the tile's row 0 (elements).
  LLMK_DEVICE static std::int64_t src_offset(int tid, std::int64_t stride) {
    return row0(tid) * stride + col0(tid);
  }

  /// Copies a whole tile (kRows rows, no bounds test, fully unrolled: one 64-bit add per row): src is the
  /// tile's row 0 + src_offset(tid, stride), what the kernels' hot loops step from tile to tile.
  template <int kPitch, class T>
  LLMK_DEVICE static void whole(T* tile, const T* src, std::int64_t stride, int tid) {
    static_assert(kUsable);
    T* dst = tile + row0(tid) * kPitch + col0(tid);
    const std::int64_t step = kRowStep * stride;
#pragma unroll
    for (int i = 0; i < kThreadRows; ++i) {
      if (kRows % kRowStep != 0 && row0(tid) + i * kRowStep >= kRows) break;
#pragma unroll
      for (int j = 0; j < kRowChunks; ++j)
        arch::cp_async_cg16(dst + i * kRowStep * kPitch + j * kChunkStep, src + j * kChunkStep);
      src += step;
    }
  }

  /// Rows valid_rows.. are zero-filled (`any_valid`: an address the zero-size copies may name). A loop over
  /// the rows, not unrolled: the edge tiles' copies are off the hot loop, and unrolled rows kept their
  /// addresses live (d256 decode 226 -> 192 registers with unroll 4; d256 prefill spilled 160 B on sm_90a).
  template <int kPitch, class T>
  LLMK_DEVICE static void partial(T* tile, const T* src, std::int64_t stride, int valid_rows,
                                  const T* any_valid, int tid) {
    static_assert(kUsable);
    T* dst = tile + row0(tid) * kPitch + col0(tid);
    const std::int64_t step = kRowStep * stride;
#pragma unroll 1
    for (int i = 0; i < kThreadRows; ++i) {
      if (kRows % kRowStep != 0 && row0(tid) + i * kRowStep >= kRows) break;
      const bool valid = row0(tid) + i * kRowStep < valid_rows;
#pragma unroll
      for (int j = 0; j < kRowChunks; ++j)
        arch::cp_async_cg16_zfill(dst + i * kRowStep * kPitch + j * kChunkStep,
                                  valid ? src + j * kChunkStep : any_valid, valid ? 16 : 0);
      src += step;
    }
  }
};

/// load_rows_async for rows at a constant stride: row r of the tile is base + r * stride (elements), rows
/// valid_rows.. are zero-filled, with StridedRowCopy's map (one 64-bit multiply per call, one add per row).
/// kWhole: the caller guarantees valid_rows >= kRows (a tile inside the sequence): no bounds test.
template <int kRows, int kDim, int kPitch, int kThreads, bool kWhole = false, class T>
LLMK_DEVICE void load_strided_rows_async(T* tile, const T* base, std::int64_t stride, int valid_rows,
                                         const T* any_valid, int tid) {
  using Copy = StridedRowCopy<kRows, kDim, kThreads>;
  if constexpr (Copy::kUsable) {
    const T* src = base + Copy::src_offset(tid, stride);
    if constexpr (kWhole) {
      (void)valid_rows, (void)any_valid;
      Copy::template whole<kPitch>(tile, src, stride, tid);
    } else {
      Copy::template partial<kPitch>(tile, src, stride, valid_rows, any_valid, tid);
    }
  } else {
    load_rows_async<kRows, kDim, kPitch, kThreads>(
        tile, [&](int r) -> const T* { return r < valid_rows ? base + r * stride : nullptr; }, any_valid,
        tid);
  }
}

/// s = Q K^T for 16 * kMmaM query rows (from `q`, the warp's first row) and 8 * kN8 keys (from `k`, the
/// warp's first key row), reducing over kDim.
template <class T, int kMmaM, int kN8, int kDim, int kPitch>
LLMK_DEVICE void compute_scores(const T* q, const T* k, int lane, float (&s)[kMmaM][kN8][4]) {
  static_assert(kN8 % 2 == 0, "keys are loaded in pairs of n8 tiles");
  using Mma = typename MmaFor<T>::Atom;
#pragma unroll
  for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
    for (int ni = 0; ni < kN8; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mi][ni][e] = 0.0f;
#pragma unroll
  for (int kd = 0; kd < kDim / 16; ++kd) {
    std::uint32_t a[kMmaM][4];
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
      arch::LDSM_x4::copy(&q[(mi * 16 + lane % 16) * kPitch + kd * 16 + (lane / 16) * 8], a[mi][0], a[mi][1],
                          a[mi][2], a[mi][3]);
#pragma unroll
    for (int ni = 0; ni < kN8; ni += 2) {
      // Matrix j = lane / 8 of the x4: key rows (j / 2) * 8.. of the pair, dims (j % 2) * 8.. of the k16
      // step; a [key][dim] row is the column the mma wants for B.
      const int j = lane / 8;
      std::uint32_t b0[2], b1[2];
      arch::LDSM_x4::copy(&k[(ni * 8 + (j / 2) * 8 + lane % 8) * kPitch + kd * 16 + (j % 2) * 8], b0[0],
                          b0[1], b1[0], b1[1]);
#pragma unroll
      for (int mi = 0; mi < kMmaM; ++mi) {
        Mma::fma(s[mi][ni], a[mi], b0, s[mi][ni]);
        Mma::fma(s[mi][ni + 1], a[mi], b1, s[mi][ni + 1]);
      }
    }
  }
}

/// Visible key range [first, end) of each of this thread's rows (rows g and g + 8 of each m16 tile).
template <int kMmaM>
struct RowRanges {
  int first[kMmaM][2];
  int end[kMmaM][2];
};

/// Applies the score transform (the soft-cap's tanh; nothing without one) and, when `masked`, sets keys
/// outside each row's range to -inf. key0 is the key position of the fragment's column 0; row_range(mi, r,
/// first, end) gives the visible keys [first, end) of the thread's row r of m16 tile mi, asked for when
/// needed so that the ranges do not stay live in registers.
template <int kMmaM, int kN8, class RowRange>
LLMK_DEVICE void transform_scores(float (&s)[kMmaM][kN8][4], const ScoreTransform& tr, bool masked, int key0,
                                  const RowRange& row_range, int lane) {
  if (tr.softcap) {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
      for (int ni = 0; ni < kN8; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mi][ni][e] = tr(s[mi][ni][e]);
  }
  if (masked) {
    const int t = lane % 4;
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        int first, end;
        row_range(mi, r, first, end);
#pragma unroll
        for (int ni = 0; ni < kN8; ++ni)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = key0 + ni * 8 + 2 * t + e;
            if (!(key >= first && key < end)) s[mi][ni][2 * r + e] = -INFINITY;
          }
      }
  }
}

/// transform_scores() with the ranges precomputed in a RowRanges.
template <int kMmaM, int kN8>
LLMK_DEVICE void transform_scores(float (&s)[kMmaM][kN8][4], const ScoreTransform& tr, bool masked, int key0,
                                  const RowRanges<kMmaM>& rows, int lane) {
  transform_scores(
      s, tr, masked, key0,
      [&](int mi, int r, int& first, int& end) {
        first = rows.first[mi][r];
        end = rows.end[mi][r];
      },
      lane);
}

/// P (the softmax numerator in s, 8 * kN8 keys) packed into the A fragments of the P V mma, one per k16 step:
/// the accumulator layout of two n8 score tiles is exactly the A fragment of one k16 step, so P never leaves
/// registers; packing it as soon as the softmax is done halves the registers it holds.
template <class T, int kMmaM, int kN8>
LLMK_DEVICE void pack_p(const float (&p)[kMmaM][kN8][4], std::uint32_t (&a)[kMmaM][kN8 / 2][4]) {
  static_assert(kN8 % 2 == 0, "P is consumed in k16 steps");
#pragma unroll
  for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
    for (int kk = 0; kk < kN8 / 2; ++kk) {
      a[mi][kk][0] = MmaFor<T>::pack(p[mi][2 * kk][0], p[mi][2 * kk][1]);
      a[mi][kk][1] = MmaFor<T>::pack(p[mi][2 * kk][2], p[mi][2 * kk][3]);
      a[mi][kk][2] = MmaFor<T>::pack(p[mi][2 * kk + 1][0], p[mi][2 * kk + 1][1]);
      a[mi][kk][3] = MmaFor<T>::pack(p[mi][2 * kk + 1][2], p[mi][2 * kk + 1][3]);
    }
}

/// o += P V for the warp's rows: P packed by pack_p() (kK16 steps of 16 keys), V rows from `v` (the warp's
/// first key row). kKeysInner: loop over the keys inside the loop over the dims (each O fragment takes all
/// its k16 steps in a row; the same sums in the same order, so the same bits): with 32 rows per warp at d128
/// nvcc 13 then fits sm_80 in 255 registers without spilling (12 bytes the other way round).
template <class T, int kMmaM, int kK16, int kD8, int kPitch, bool kKeysInner = false>
LLMK_DEVICE void accumulate_pv(const std::uint32_t (&a)[kMmaM][kK16][4], const T* v, int lane,
                               float (&o)[kMmaM][kD8][4]) {
  static_assert(kD8 % 2 == 0, "V is consumed in n16 steps");
  using Mma = typename MmaFor<T>::Atom;
  auto step = [&](int kk, int di) {
    // Transposed x4: matrix j covers keys (j % 2) * 8.. of the k16 step and dims (j / 2) * 8.. of the pair.
    const int j = lane / 8;
    std::uint32_t b0[2], b1[2];
    arch::LDSM_x4_T::copy(&v[(kk * 16 + (j % 2) * 8 + lane % 8) * kPitch + di * 8 + (j / 2) * 8], b0[0],
                          b0[1], b1[0], b1[1]);
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi) {
      Mma::fma(o[mi][di], a[mi][kk], b0, o[mi][di]);
      Mma::fma(o[mi][di + 1], a[mi][kk], b1, o[mi][di + 1]);
    }
  };
  if constexpr (kKeysInner) {
#pragma unroll
    for (int di = 0; di < kD8; di += 2)
#pragma unroll
      for (int kk = 0; kk < kK16; ++kk) step(kk, di);
  } else {
#pragma unroll
    for (int kk = 0; kk < kK16; ++kk)
#pragma unroll
      for (int di = 0; di < kD8; di += 2) step(kk, di);
  }
}

/// accumulate_pv() from the unpacked P.
template <class T, int kMmaM, int kN8, int kD8, int kPitch>
LLMK_DEVICE void accumulate_pv(const float (&p)[kMmaM][kN8][4], const T* v, int lane,
                               float (&o)[kMmaM][kD8][4]) {
  std::uint32_t a[kMmaM][kN8 / 2][4];
  pack_p<T>(p, a);
  accumulate_pv<T, kMmaM, kN8 / 2, kD8, kPitch>(a, v, lane, o);
}

/// Writes the warp's output fragment, converted to T, into its rows of `tile` (pitch kPitch), so that
/// store_rows() can move whole rows in 16-byte vectors.
template <class T, int kMmaM, int kD8, int kPitch>
LLMK_DEVICE void stage_output(const float (&o)[kMmaM][kD8][4], T* tile, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int di = 0; di < kD8; ++di) {
        const std::uint32_t packed = MmaFor<T>::pack(o[mi][di][2 * r], o[mi][di][2 * r + 1]);
        std::memcpy(&tile[(mi * 16 + g + 8 * r) * kPitch + di * 8 + 2 * t], &packed, sizeof(packed));
      }
}

/// Copies kRows staged rows of kDim elements from `tile` to global memory in 16-byte vectors, kThreads
/// threads cooperating; row_dst(r) is the destination of row r or nullptr to skip it.
template <int kRows, int kDim, int kPitch, int kThreads, class T, class RowDst>
LLMK_DEVICE void store_rows(const T* tile, const RowDst& row_dst, int tid) {
  constexpr int kChunks = kDim / 8, kTotal = kRows * kChunks;
  for (int c = tid; c < kTotal; c += kThreads) {
    const int row = c / kChunks, col = (c % kChunks) * 8;
    T* dst = row_dst(row);
    if (dst != nullptr) store16(dst + col, load16(&tile[row * kPitch + col]));
  }
}

}  // namespace llmk::attention::detail
