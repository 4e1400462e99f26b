// llmk/gemm/hopper_gemm_epilogue.cuh: what the Hopper GEMM (hopper_gemm.cuh) stores and how: its epilogues
// (QuantEpilogue, Fp8BlockScaledEpilogue; LinearEpilogue is tile_gemm.cuh's), the kernel's parameters and
// shared-memory layout, and the stores of one consumer warpgroup's 64 x BN block of accumulators: through
// 128B-swizzled staging boxes and TMA stores, plainly where a TMA store cannot take the output, and in quads
// for the split-K reduction. Included by hopper_gemm.cuh; the kernel, its configurations and launchers are
// there.
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "llmk/arch/sm90/bulk_copy.cuh"
#include "llmk/arch/sm90/pipeline.cuh"
#include "llmk/arch/sm90/stmatrix.cuh"
#include "llmk/arch/sm90/tma.cuh"
#include "llmk/arch/sm90/warp_specialization.cuh"
#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/vector.cuh"
#include "llmk/gemm/quant_gemm_args.cuh"
#include "llmk/gemm/split_k.cuh"

namespace llmk::gemm {

/// The epilogue of a Hopper GEMM maps an accumulator to the output element: value(row, col, acc), called
/// only for row < M and col < N. kBlockScaled: the accumulators arrive already multiplied by the block-wise
/// scales (Fp8BlockScaledEpilogue). A factored epilogue (FactoredEpilogue) also splits value into row(r) and
/// col(c), the factors it loads, and value(row(r), col(c), acc): the TMA-store epilogue then loads a
/// thread's 2 rows and 16 columns of a box once instead of per output (5 loads per output before).
///   static_assert(llmk::gemm::FactoredEpilogue<llmk::gemm::QuantEpilogue<llmk::half, std::int32_t>>);
template <class E>
concept FactoredEpilogue = requires(const E& e, typename E::Row r, typename E::Col c) {
  { e.row(0) } -> std::same_as<typename E::Row>;
  { e.col(0) } -> std::same_as<typename E::Col>;
};

/// s_a s_w (acc - z_a colsum_w) + bias (int8), s_a s_w acc + bias (fp8), or the raw int32 accumulator. The
/// launchers (w8a8_gemm_sm90, fp8_gemm_sm90) build it from QuantGemmArgs::scales:
///   const llmk::gemm::QuantEpilogue<llmk::half, std::int32_t> epi{g.scales};
///   llmk::half y = epi.value(row, col, acc);
template <class Out_, class Acc>
struct QuantEpilogue {
  using Out = Out_;
  static constexpr bool kBlockScaled = false;
  static constexpr bool kRaw = std::is_same_v<Out, std::int32_t>;  // no scales (they may be null)
  DequantScales scales;
  struct Row {
    detail::DequantRow f{};
  };
  struct Col {
    detail::DequantCol f{};
  };
  LLMK_DEVICE Row row(int r) const {
    if constexpr (kRaw)
      return {};
    else
      return {detail::dequant_row(scales, r)};
  }
  LLMK_DEVICE Col col(int c) const {
    if constexpr (kRaw)
      return {};
    else
      return {detail::dequant_col(scales, c)};
  }
  LLMK_DEVICE Out value(const Row& r, const Col& c, Acc v) const {
    if constexpr (kRaw)
      return v;
    else if constexpr (std::is_same_v<Acc, std::int32_t>)
      return Out(detail::dequantize(scales, r.f, c.f, detail::zero_point_corrected(scales, r.f, c.f, v)));
    else
      return Out(detail::dequantize(scales, r.f, c.f, v));
  }
  LLMK_DEVICE Out value(int r, int c, Acc v) const { return value(row(r), col(c), v); }
};

// LinearEpilogue (alpha * acc + beta * C, the 16-bit GEMMs) is tile_gemm.cuh's, shared with the mma.sync
// kernel.

/// acc + bias, where acc already holds sum_kb s_a[kb, i] s_w[j / 128, kb] partial_kb (block-wise fp8). Built
/// by fp8_gemm_blockwise:  llmk::gemm::Fp8BlockScaledEpilogue<llmk::bfloat16> epi{g.scales.bias};
template <class Out_>
struct Fp8BlockScaledEpilogue {
  using Out = Out_;
  static constexpr bool kBlockScaled = true;
  const float* bias = nullptr;
  LLMK_DEVICE Out value(int, int col, float v) const { return Out(bias != nullptr ? v + bias[col] : v); }
};

/// What the kernel reads: the operand maps, the output (through a TMA store where `d_map` is valid, else
/// by plain stores), the block-scale maps of a block-scaled epilogue, and the epilogue. Filled by the Hopper
/// GEMM launchers (hopper_gemm.cuh: gemm_f16_sm90, w8a8_gemm_sm90, ...; call those, example there).
template <class Epilogue>
struct Sm90GemmParams {
  arch::sm90::TensorMap a, b;
  arch::sm90::TensorMap d_map;  // [M, N] in 64-row x 128-byte boxes, 128B swizzle (when tma_store)
  // Block-scaled only. TMA boxes start on 16-byte boundaries, so each box begins at the scale's index
  // rounded down to a multiple of 4 and the consumer reads (index % 4) floats further in.
  arch::sm90::TensorMap a_scales;  // rank 1: s_a[kb * ld_a_scales + i], boxes of kAScaleBox
  arch::sm90::TensorMap w_scales;  // rank 1: s_w[(j / 128) * k_blocks + kb], boxes of 4
  int m = 0, n = 0, k = 0;
  int ld_a_scales = 0, k_blocks = 0;
  bool tma_store = false;
  typename Epilogue::Out* d = nullptr;
  std::int64_t ldd = 0;
  Epilogue epi;
};

/// The split-K kernel's parameters (gemm_sm90_split_kernel): the unit u of tiles x splits is tile u /
/// splits, k-tiles [s kps, min((s + 1) kps, k-tiles)) of split s = u % splits (kps =
/// split.k_tiles_per_split); each unit writes its Acc partials, and the last of a tile's units to arrive sums
/// them in split order and applies the epilogue (split_k.cuh). Filled by the same launchers where they split.
template <class Epilogue, class Acc>
struct Sm90GemmSplitParams : Sm90GemmParams<Epilogue> {
  int splits = 1;
  bool quad_store = false;  // d 4-element aligned and ldd % 4 == 0: a quad of outputs in one store
  detail::SplitKArgs<Acc> split;
};

// s_a boxes: a tile's 128 row scales and up to 3 floats before them (the box starts on a 16-byte boundary).
inline constexpr int kAScaleBox = 132;

/// Shared memory of the kernel: the operand ring, two output staging boxes per consumer warpgroup (64 rows x
/// 128 bytes each, 128B swizzle: what stmatrix writes without bank conflicts and the TMA store reads; the
/// epilogue rotates through them box by box, so a 128 x 256 tile with four ring slots still fits), and the
/// block scales of each ring slot. Its size: sm90_gemm_smem_bytes.
template <class Cfg, class Epilogue>
struct Sm90GemmStorage {
  static constexpr int kOutBytes = static_cast<int>(sizeof(typename Epilogue::Out));
  static constexpr int kBoxCols = 128 / kOutBytes;  // output columns per 128-byte box
  static constexpr int kBoxes = Cfg::kBN / kBoxCols;
  static constexpr int kBoxBytes = 64 * 128;
  // The TMA-store epilogue needs whole boxes (and 2- or 4-byte outputs); other tiles store directly.
  static constexpr bool kStaged = (kOutBytes == 2 || kOutBytes == 4) && Cfg::kBN % kBoxCols == 0;
  alignas(1024) unsigned char a[Cfg::kStages][Cfg::kABytes];
  alignas(1024) unsigned char b[Cfg::kStages][Cfg::kBBytes];
  alignas(1024) unsigned char out[kStaged ? 2 : 1][kStaged ? 2 * kBoxBytes : 1024];  // [warpgroup][2 boxes]
  // kAScaleBox floats in rows of whole 128-byte lines (each row's TMA destination 128-byte aligned).
  alignas(128) float a_scales[Epilogue::kBlockScaled ? Cfg::kStages : 1][(kAScaleBox + 31) / 32 * 32];
  alignas(128) float w_scales[Epilogue::kBlockScaled ? Cfg::kStages : 1][32];
  arch::sm90::TmaRing<Cfg::kStages> ring;
  int last_split;  // split-K: whether this block arrived last at its tile
};

/// Dynamic shared memory of gemm_sm90_kernel<Cfg, Epilogue> (the arena is aligned to 1024 in the kernel).
///   const int smem = llmk::gemm::sm90_gemm_smem_bytes<Cfg, llmk::gemm::LinearEpilogue<float>>();
template <class Cfg, class Epilogue>
constexpr int sm90_gemm_smem_bytes() {
  return static_cast<int>(sizeof(Sm90GemmStorage<Cfg, Epilogue>)) + 1024;
}

namespace sm90_detail {

// The packed 16-bit pair (lo = a, hi = b) of two outputs, the register stmatrix stores.
template <class Out>
LLMK_DEVICE std::uint32_t pack_pair(Out a, Out b) {
  return static_cast<std::uint32_t>(a.bits) | (static_cast<std::uint32_t>(b.bits) << 16);
}

// Writes output box `Box` (columns Box * kBoxCols .. of the tile) of the consumer warpgroup's 64 x BN
// accumulator block (rows 16w + g (+8), columns 8j + 2t (+1), the wgmma D layout) into the 64-row x 128-byte
// staging box `box`, 128B-swizzled, as Out: stmatrix.x4 for 16-bit outputs (16 columns per call, each lane
// addressing one swizzled 16-byte row), 8-byte pairs for 32-bit ones. Elements outside [M, N] are 0 (the TMA
// store clips them). Box is a template argument so that acc is indexed by constants (registers, not local).
template <class Cfg, int Box, class Epilogue, class Acc>
LLMK_DEVICE void stage_box(unsigned char* box, const Acc (&acc)[Cfg::kBN / 2], const Epilogue& epi, int r0,
                           int c0, int m, int n) {
  using Out = typename Epilogue::Out;
  const int lane = static_cast<int>(threadIdx.x % 32), w = static_cast<int>(threadIdx.x % 128) / 32;
  const int g = lane / 4, t = lane % 4;
  // Accumulator i of the box: row 16w + g (+8 for i & 2), column 8 (i / 4) + 2t (+1 for i & 1).
  auto row_of = [&](int i) { return r0 + 16 * w + g + 8 * ((i >> 1) & 1); };
  auto col_of = [&](int i) { return c0 + 8 * (i >> 2) + 2 * t + (i & 1); };
  auto make_out_at = [&] {
    if constexpr (FactoredEpilogue<Epilogue>) {
      // The thread's 2 rows' and the box's 2 x kGroups columns' factors, each loaded once.
      constexpr int kGroups = 128 / static_cast<int>(sizeof(Out)) / 8;  // 8-column groups of the box
      typename Epilogue::Row rf[2];
      typename Epilogue::Col cf[kGroups][2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row_of(2 * h);
        rf[h] = row < m ? epi.row(row) : typename Epilogue::Row{};
      }
#pragma unroll
      for (int q = 0; q < kGroups; ++q)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = col_of(4 * (Box * kGroups + q) + e);
          cf[q][e] = col < n ? epi.col(col) : typename Epilogue::Col{};
        }
      return [=, &acc, &epi](int i) -> Out {
        return row_of(i) < m && col_of(i) < n
                   ? epi.value(rf[(i >> 1) & 1], cf[(i >> 2) - Box * kGroups][i & 1], acc[i])
                   : Out{};
      };
    } else {
      return [&](int i) -> Out {
        const int row = row_of(i), col = col_of(i);
        return row < m && col < n ? epi.value(row, col, acc[i]) : Out{};
      };
    }
  };
  const auto out_at = make_out_at();
  // Byte offset of (row, 16-byte chunk c of the box's row), 128B swizzle.
  auto offset = [](int row, int chunk) { return row * 128 + ((chunk ^ (row % 8)) * 16); };
  if constexpr (sizeof(Out) == 2) {  // 64 columns per box: 4 stmatrix.x4 of 16 columns
    // Every value of the box first, then the stores: the epilogue's loads (scales, bias, C) are not held
    // behind each stmatrix (an asm with a memory clobber), so their latencies overlap.
    std::uint32_t r[4][4];
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = 8 * (4 * Box + q) + 2 * j;
        r[q][j] = pack_pair(out_at(i), out_at(i + 1));
      }
    const int row = 16 * w + (lane % 8) + 8 * ((lane >> 3) & 1);
#pragma unroll
    for (int q = 0; q < 4; ++q) arch::sm90::STSM_x4::copy(box + offset(row, 2 * q + (lane >> 4)), r[q]);
  } else {  // 32 columns per box: accumulators 16 Box .. 16 Box + 15
#pragma unroll
    for (int i = 16 * Box; i < 16 * Box + 16; i += 2) {
      const int row = 16 * w + g + 8 * ((i >> 1) & 1), col = 8 * ((i >> 2) % 4) + 2 * t;
      struct alignas(8) Pair {
        Out v[2];
      };
      *reinterpret_cast<Pair*>(box + offset(row, col / 4) + (col % 4) * 4) = Pair{{out_at(i), out_at(i + 1)}};
    }
  }
}

// The TMA-store epilogue of one consumer warpgroup's 64 x BN block (rows r0.., columns c0..): box by box
// through the warpgroup's two staging boxes (`seq` counts this warpgroup's boxes across tiles and alternates
// them), each box's store its own bulk group. A staging box is rewritten only once the store issued from it
// two boxes earlier has read it: wait_group.read 1 (every group but the newest) after a box that was stored,
// wait_group.read 0 after one that was not (a box wholly outside [M, N] issues no store and commits no
// group, so the newest group may be this buffer's). `stored` is the issuer's record of the previous box.
template <class Cfg, class Storage, class Epilogue, class Acc, int... Box>
LLMK_DEVICE void store_tile_boxes(unsigned char* staging, unsigned& seq, bool& stored,
                                  const Acc (&acc)[Cfg::kBN / 2], const Sm90GemmParams<Epilogue>& p, int r0,
                                  int c0, std::integer_sequence<int, Box...>) {
  namespace sm90 = arch::sm90;
  const bool issuer = threadIdx.x % 128 == 0;
  auto one = [&]<int B>(std::integral_constant<int, B>) {
    unsigned char* box = staging + (seq++ & 1u) * Storage::kBoxBytes;
    if (issuer) {
      if (stored)
        sm90::bulk_wait_group_read<1>();
      else
        sm90::bulk_wait_group_read<0>();
    }
    sm90::warpgroup_sync();
    stage_box<Cfg, B>(box, acc, p.epi, r0, c0, p.m, p.n);
    sm90::fence_proxy_async();  // the stores above, seen by the TMA store's async proxy
    sm90::warpgroup_sync();
    if (issuer) {
      stored = r0 < p.m && c0 + B * Storage::kBoxCols < p.n;
      if (stored) {
        sm90::tma_store(p.d_map, box, {c0 + B * Storage::kBoxCols, r0});
        sm90::bulk_commit_group();
      }
    }
  };
  (one(std::integral_constant<int, Box>{}), ...);
}

// The plain-store epilogue of one consumer warpgroup's 64 x BN block (rows r0.., columns c0..), for outputs
// the TMA store cannot take: thread (w, g = lane / 4, t = lane % 4) holds rows 16w + g (+8), columns 8j + 2t
// (+1). A factored epilogue loads the 2 rows' factors once and each column pair's once per 8-column group.
template <class Cfg, class Epilogue, class Acc>
LLMK_DEVICE void store_rows_plain(const Acc (&acc)[Cfg::kBN / 2], const Sm90GemmParams<Epilogue>& p, int r0,
                                  int c0) {
  const int m = p.m, n = p.n;
  const int lane = static_cast<int>(threadIdx.x % 32), w = static_cast<int>(threadIdx.x % 128) / 32;
  const int g = lane / 4, t = lane % 4;
  [[maybe_unused]] const auto row_factors = [&] {
    if constexpr (FactoredEpilogue<Epilogue>) {
      using Row = typename Epilogue::Row;
      const int lo = r0 + 16 * w + g;
      return std::array<Row, 2>{lo < m ? p.epi.row(lo) : Row{}, lo + 8 < m ? p.epi.row(lo + 8) : Row{}};
    } else {
      return 0;
    }
  }();
#pragma unroll
  for (int j = 0; j < Cfg::kBN / 8; ++j) {
    const int col0 = c0 + 8 * j + 2 * t;
    [[maybe_unused]] const auto col_factors = [&] {
      if constexpr (FactoredEpilogue<Epilogue>) {
        using Col = typename Epilogue::Col;
        return std::array<Col, 2>{col0 < n ? p.epi.col(col0) : Col{},
                                  col0 + 1 < n ? p.epi.col(col0 + 1) : Col{}};
      } else {
        return 0;
      }
    }();
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 4 * j + e, row = r0 + 16 * w + g + 8 * (e >> 1), col = col0 + (e & 1);
      if (row < m && col < n) {
        typename Epilogue::Out v;
        if constexpr (FactoredEpilogue<Epilogue>)
          v = p.epi.value(row_factors[e >> 1], col_factors[e & 1], acc[i]);
        else
          v = p.epi.value(row, col, acc[i]);
        p.d[static_cast<std::int64_t>(row) * p.ldd + col] = v;
      }
    }
  }
}

// Stores a quad of outputs (row, col .. col + cols - 1) of the split-K reduction: one 8- or 16-byte store
// where `quad` allows it, else element by element.
template <class Out>
LLMK_DEVICE void store_quad(Out* dst, const Out (&v)[4], int cols, bool quad) {
  if (cols == 4 && quad) {
    if constexpr (sizeof(Out) == 2)
      store8(dst, Vector8<Out>{{v[0], v[1], v[2], v[3]}});
    else
      store16(dst, Vector16<Out>{{v[0], v[1], v[2], v[3]}});
  } else {
    for (int e = 0; e < cols; ++e) dst[e] = v[e];
  }
}

}  // namespace sm90_detail

}  // namespace llmk::gemm
