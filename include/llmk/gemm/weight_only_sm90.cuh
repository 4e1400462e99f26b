// llmk/gemm/weight_only_sm90.cuh: the Hopper (sm_90a) kernel of the weight-only GEMM (weight_only.cuh) for
// M > 16: wgmma with the dequantized weights as its register A operand.
//
//   D^T[n, i] = sum_k dequant(W)[n, k] * A[i, k]      (the weights are wgmma's M side, the tokens its N side)
//
// Hopper's wgmma takes its A operand from registers in the layout of an mma.m16n8k16 fragment, and the packed
// weight layout (weight_only_layout.cuh) already gives lane l of a warp exactly the codes of that fragment
// for 16 weight rows (output columns): one 16-byte shared load per lane per 64 K (4-bit) / 32 K (8-bit), the
// same LOP3 / PRMT dequantization as the mma.sync kernels (weight_only_dequant.cuh), then m64nBTk16 wgmmas
// whose B operand is the activation tile in shared memory. No dequantized copy of W exists anywhere.
//
// A block is 3 warpgroups (384 threads), persistent over 128 x BT tiles of D^T (128 output columns, BT
// tokens), like the Hopper GEMM (hopper_gemm.cuh).
// - Warpgroup 0, the producer: one thread per 64-wide k-slice waits for a free ring slot and TMA-loads the
//   BT x 64 activation box (128B swizzle: wgmma's K-major B layout), the 8 packed weight tiles of the block's
//   128 columns (one box of a rank-2 view of the packed buffer), and the slice's group row of scales and zero
//   points.
// - Warpgroups 1, 2, the consumers: 64 output columns each (warp w: the 16-column strip 4 (wg - 1) + w). Per
//   slice a lane rebuilds its two columns' constants, loads its words, dequantizes 4 k16 steps into one of
//   two register buffers, and issues 4 wgmmas; the previous slice's wgmmas are waited for (one group in
//   flight) before its buffer and ring slot are reused. The epilogue adds the bias, rounds to T, transposes
//   the fragments into a 128B-swizzled [BT tokens][64 columns] tile with stmatrix.trans, and TMA-stores it
//   (plain stores where D's rows are not 16-byte aligned).
// - Split-K where the tiles alone leave SMs idle (M = 17..128 at common N): a block walks units of tiles x
//   splits; a split unit writes its fp32 partials, and the last of a tile's units to arrive sums them in
//   split order and stores D (split_k.cuh, the reduction the mma.sync kernels use).
//
// Requirements (detail::weight_only_sm90_shape_ok): G % 64 == 0 (a slice lies in one group, K % 64 == 0), N %
// 8 == 0 (N % 16 with zero points: the TMA row strides), scales / zeros 16-byte aligned, K <= 2^29 with
// 8-bit codes (TMA's 32-bit coordinates).
// weight_only_gemm takes this path on sm_90 devices with sm_90a code for M > kWeightOnlySm90MinM; act-order
// permutes A first, as on the other paths. Results equal the mma.sync kernels' up to the fp32 summation
// order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "llmk/arch/sm90/bulk_copy.cuh"
#include "llmk/arch/sm90/pipeline.cuh"
#include "llmk/arch/sm90/stmatrix.cuh"
#include "llmk/arch/sm90/tma.cuh"
#include "llmk/arch/sm90/warp_specialization.cuh"
#include "llmk/arch/sm90/wgmma.cuh"
#include "llmk/config.cuh"
#include "llmk/core/hopper_support.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/gemm/split_k.cuh"
#include "llmk/gemm/weight_only_args.cuh"
#include "llmk/gemm/weight_only_dequant.cuh"
#include "llmk/gemm/weight_only_layout.cuh"

namespace llmk::gemm {

/// weight_only_gemm takes the Hopper kernel for M above this (where it is eligible): the mma.sync medium tile
/// it replaced at M = 17..128 measured 0.19-0.81x cuBLAS fp16 in 12 of 15 shapes on an H100 (docs/gemm.md).
constexpr int kWeightOnlySm90MinM = 16;

/// The Hopper weight-only tile: 128 output columns x BT tokens, 64 of K per ring slot, Stages slots. Chosen
/// by weight_only_gemm (args.kernel = WeightOnlyKernel::kHopper forces the family); the probe tag of
/// sm90a_runnable:  bool hopper = llmk::sm90a_runnable<llmk::gemm::WeightOnlySm90Config<>>();
template <int BT = 128, int Stages = 6>
struct WeightOnlySm90Config {
  static_assert(BT % 16 == 0 && BT >= 16 && BT <= 256, "BT (the wgmma N): a multiple of 16 up to 256");
  static constexpr int kBN = 128, kBT = BT, kBK = 64, kStages = Stages;
  static constexpr int kThreads = 384, kConsumerWarps = 8;
};

namespace sm90_detail {

template <class T>
struct WoWgmmaOf;
template <>
struct WoWgmmaOf<half> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx16_F32F16F16_RS<N>;
};
template <>
struct WoWgmmaOf<bfloat16> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx16_F32BF16BF16_RS<N>;
};

/// Shared memory: the ring (activations, packed weights, one group row of scales and zero points per slot)
/// and each consumer warpgroup's output staging tile.
template <class Cfg, int kBits>
struct WoSm90Storage {
  static constexpr int kABytes = Cfg::kBT * 128;       // BT rows of 64 K
  static constexpr int kWBytes = 8 * 512 * kBits / 4;  // 8 strips x 64 K: 1 (4-bit) or 2 (8-bit) tiles
  static constexpr int kOutBytes = Cfg::kBT * 128;     // [BT][64 columns] of T
  alignas(1024) unsigned char a[Cfg::kStages][kABytes];
  alignas(1024) unsigned char out[2][kOutBytes];
  alignas(128) unsigned char w[Cfg::kStages][kWBytes];
  alignas(128) std::uint16_t scales[Cfg::kStages][Cfg::kBN];
  alignas(128) std::uint8_t zeros[Cfg::kStages][Cfg::kBN];
  arch::sm90::TmaRing<Cfg::kStages> ring;
  int last_split;  // split-K: whether this block arrived last at its tile
};

template <class Cfg, int kBits>
constexpr int wo_sm90_smem_bytes() {
  return static_cast<int>(sizeof(WoSm90Storage<Cfg, kBits>)) + 1024;
}

}  // namespace sm90_detail

/// What the Hopper weight-only kernel reads. Filled by weight_only_gemm (call that; example there).
template <class T>
struct WeightOnlySm90Params {
  arch::sm90::TensorMap a;       // [M, K] of T, boxes of BT x 64, 128B swizzle
  arch::sm90::TensorMap w;       // packed words as [strips][tiles_k * 128] u32, boxes of 8 strips x 64 K
  arch::sm90::TensorMap scales;  // [K / G, N] u16, boxes of 1 x 128
  arch::sm90::TensorMap zeros;   // [K / G, N] u8, boxes of 1 x 128 (has_zeros)
  arch::sm90::TensorMap d_map;   // [M, N] u16, boxes of BT x 64, 128B swizzle (tma_store)
  int m = 0, n = 0, k = 0;
  int slices_per_group = 1;  // G / 64
  bool has_zeros = false, tma_store = false;
  bool pair_store = false;  // D element pairs 4-byte aligned (split-K's reduction stores)
  const T* bias = nullptr;
  T* d = nullptr;
  std::int64_t ldd = 0;
  // Split-K: unit u of tiles x splits is tile u / splits, k-slices [s kps, min((s + 1) kps, K / 64)) of
  // split s = u % splits (kps = split.k_tiles_per_split; one split: every slice); splits > 1 writes fp32
  // partials and the last unit of a tile to arrive sums them in split order (split_k.cuh).
  int splits = 1;
  detail::SplitKArgs<float> split;
};

/// The kernel (see the file comment). Launch with Cfg::kThreads threads and wo_sm90_smem_bytes<Cfg, kBits>()
/// bytes of dynamic shared memory, a grid of at most one block per SM. Launched (with its arguments checked
/// and its tensor maps made) by weight_only_gemm: call that (example and errors there), not the kernel.
template <class T, int kBits, class Cfg>
__global__ void __launch_bounds__(384, 1)
    weight_only_sm90_kernel(const __grid_constant__ WeightOnlySm90Params<T> p) {
  namespace sm90 = arch::sm90;
  if constexpr (!sm90::kHasWgmma) {
#if LLMK_DEVICE_PASS
    __trap();
#endif
  } else {
    using Storage = sm90_detail::WoSm90Storage<Cfg, kBits>;
    using Atom = typename sm90_detail::WoWgmmaOf<T>::template Atom<Cfg::kBT>;
    constexpr int kWordsPerSlice = 128 * kBits / 4;  // u32 words of one strip per 64 K
    Storage& s = *reinterpret_cast<Storage*>(sm90::align_shared<1024>(dynamic_smem()));
    const int tiles_t = ceil_div(p.m, Cfg::kBT), tiles_n = ceil_div(p.n, Cfg::kBN);
    const int tiles = tiles_t * tiles_n, k_tiles = p.k / Cfg::kBK;  // K % 64 == 0
    const int units = tiles * p.splits, kps = p.split.k_tiles_per_split;
    if (threadIdx.x == 0) s.ring.init(Cfg::kConsumerWarps);
    __syncthreads();
    const int wg = static_cast<int>(threadIdx.x / 128);
    if (wg == 0) {  // producer
      sm90::setmaxnreg_dec<40>();
      if (threadIdx.x == 0) {
        const unsigned tx = Storage::kABytes + Storage::kWBytes + Cfg::kBN * 2 + (p.has_zeros ? Cfg::kBN : 0);
        sm90::RingPosition<Cfg::kStages> q;
        for (int unit = static_cast<int>(blockIdx.x); unit < units; unit += static_cast<int>(gridDim.x)) {
          // Token tiles fastest: the blocks running at once share weight strips (read once into L2).
          const int tile = unit / p.splits, kt0 = (unit % p.splits) * kps, kt1 = min(kt0 + kps, k_tiles);
          const int t0 = (tile % tiles_t) * Cfg::kBT, n0 = (tile / tiles_t) * Cfg::kBN;
          for (int kt = kt0, group = kt0 / p.slices_per_group,
                   left = p.slices_per_group - kt0 % p.slices_per_group;
               kt < kt1; ++kt) {
            s.ring.producer_acquire(q, tx);
            std::uint64_t* bar = s.ring.full_bar(q);
            sm90::tma_load(s.a[q.stage], p.a, bar, {kt * Cfg::kBK, t0});
            sm90::tma_load(s.w[q.stage], p.w, bar, {kt * kWordsPerSlice, n0 / 16});
            sm90::tma_load(s.scales[q.stage], p.scales, bar, {n0, group});
            if (p.has_zeros) sm90::tma_load(s.zeros[q.stage], p.zeros, bar, {n0, group});
            if (--left == 0) ++group, left = p.slices_per_group;
            q.advance();
          }
        }
      }
      return;  // no block-wide barrier follows
    }
    sm90::setmaxnreg_inc<232>();
    const int half = wg - 1;  // output columns 64 half .. of the tile
    const int tid = static_cast<int>(threadIdx.x % 128), w = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int strip = 4 * half + w, col = strip * 16 + g;  // this lane's columns: col, col + 8
    constexpr std::uint32_t kDefaultZero = kBits == 4 ? 8u : 128u;
    unsigned char* staging = s.out[half];
    sm90::RingPosition<Cfg::kStages> c, prev;
    struct alignas(16) Words {
      std::uint32_t w[4];
    };
    for (int unit = static_cast<int>(blockIdx.x); unit < units; unit += static_cast<int>(gridDim.x)) {
      const int tile = unit / p.splits, split = unit % p.splits;
      const int kt0 = split * kps, kt1 = min(kt0 + kps, k_tiles);
      const int t0 = (tile % tiles_t) * Cfg::kBT, n0 = (tile / tiles_t) * Cfg::kBN;
      float acc[Cfg::kBT / 2];
#pragma unroll
      for (int i = 0; i < Cfg::kBT / 2; ++i) acc[i] = 0.0f;
      std::uint32_t frag0[4][4], frag1[4][4];  // two slices' A fragments: one in flight, one being built
      // One k-slice: constants, words, dequantization into `frag`, 4 wgmmas; then the previous slice's
      // wgmmas are waited for and its slot freed.
      auto slice = [&](std::uint32_t(&frag)[4][4], bool first) {
        s.ring.consumer_wait(c);
        const int st = c.stage;
        T s0, s1;
        s0.bits = s.scales[st][col];
        s1.bits = s.scales[st][col + 8];
        const std::uint32_t z0 = p.has_zeros ? s.zeros[st][col] : kDefaultZero;
        const std::uint32_t z1 = p.has_zeros ? s.zeros[st][col + 8] : kDefaultZero;
        const detail::WoColumnQuant q0 = detail::wo_column_quant<T, kBits>(s0, z0);
        const detail::WoColumnQuant q1 = detail::wo_column_quant<T, kBits>(s1, z1);
        if constexpr (kBits == 4) {
          const Words words = *reinterpret_cast<const Words*>(s.w[st] + strip * 512 + lane * 16);
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) {
            std::uint32_t b0[2], b1[2];
            detail::wo_dequant_word4<T>(words.w[ks], q0, q1, b0, b1);
            frag[ks][0] = b0[0], frag[ks][1] = b1[0], frag[ks][2] = b0[1], frag[ks][3] = b1[1];
          }
        } else {
#pragma unroll
          for (int tk = 0; tk < 2; ++tk) {
            const Words words =
                *reinterpret_cast<const Words*>(s.w[st] + strip * 1024 + tk * 512 + lane * 16);
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              std::uint32_t b0[2], b1[2];
              detail::wo_dequant_word8<T>(words.w[2 * j], q0, b0);
              detail::wo_dequant_word8<T>(words.w[2 * j + 1], q1, b1);
              const int ks = 2 * tk + j;
              frag[ks][0] = b0[0], frag[ks][1] = b1[0], frag[ks][2] = b0[1], frag[ks][3] = b1[1];
            }
          }
        }
        const std::uint64_t db = sm90::make_smem_desc(s.a[st], 16, 1024, sm90::SmemSwizzle::k128B);
        sm90::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          Atom::fma(acc, frag[ks], sm90::advance_smem_desc(db, 32u * ks), !first || ks > 0);
        sm90::wgmma_commit();
        if (!first) {
          sm90::wgmma_wait<1>();  // the previous slice's wgmmas are done: its fragments and slot are free
          if (lane == 0) s.ring.consumer_release(prev);
        }
        prev = c;
        c.advance();
      };
      for (int kt = kt0; kt < kt1; kt += 2) {
        slice(frag0, kt == kt0);
        if (kt + 1 < kt1) slice(frag1, false);
      }
      sm90::wgmma_wait<0>();
      sm90::wgmma_fence_registers(acc);  // the epilogue's reads stay after the wait
      if (lane == 0) s.ring.consumer_release(prev);

      // Epilogue: D[token, column] = T(acc + bias[column]); fragment i holds column 16 strip + g + 8 ((i >>
      // 1) & 1) and token 8 (i >> 2) + 2t + (i & 1) of the tile.
      const int col_lo = n0 + col, col_hi = col_lo + 8;
      if (p.splits > 1) {
        // This split's partials ([M, ldp] fp32 plane; N % 8 == 0 here, so ldp == N), then the tile's last
        // unit to arrive sums the planes in split order and stores D.
        float* plane = p.split.partials + static_cast<std::int64_t>(split) * p.m * p.split.ldp;
#pragma unroll
        for (int i = 0; i < Cfg::kBT / 2; ++i) {
          const int token = t0 + 8 * (i >> 2) + 2 * t + (i & 1), column = ((i >> 1) & 1) ? col_hi : col_lo;
          if (token < p.m && column < p.n)
            plane[static_cast<std::int64_t>(token) * p.split.ldp + column] = acc[i];
        }
        const int ctid = static_cast<int>(threadIdx.x) - 128;  // 0..255 over both consumer warpgroups
        if (!detail::split_k_publish_among<256>(&p.split.arrivals[tile], p.split.tag,
                                                static_cast<unsigned>(p.splits), &s.last_split, ctid,
                                                detail::kSplitKConsumersBarrier))
          continue;
        detail::split_k_reduce_as<256, Cfg::kBT, Cfg::kBN>(
            ctid, p.split.partials, p.split.ldp, p.m, p.n, t0, n0, p.splits,
            [&](int row, int column, const float(&sum)[4], int cols) {
              detail::wo_store_reduced(p.d, p.ldd, p.bias, p.pair_store, row, column, sum, cols);
            });
        continue;
      }
      const float bias_lo = p.bias != nullptr && col_lo < p.n ? static_cast<float>(p.bias[col_lo]) : 0.0f;
      const float bias_hi = p.bias != nullptr && col_hi < p.n ? static_cast<float>(p.bias[col_hi]) : 0.0f;
      auto out_at = [&](int i) { return T(acc[i] + (((i >> 1) & 1) ? bias_hi : bias_lo)); };
      if (p.tma_store) {
        // stmatrix.trans: matrix j' = lane / 8 of a call holds tokens 8 (2 q + j' / 2) .., columns 8 (j' % 2)
        // .. of the warp's strip; lane gives row lane % 8 of it. Rows of 128 bytes, 16-byte chunks swizzled
        // by the row (128B swizzle: no bank conflicts, the TMA store's layout).
        if (tid == 0) sm90::bulk_wait_group_read<0>();  // the previous tile's store has read the staging tile
        sm90::warpgroup_sync();
        const int jm = lane / 8, row_in = lane % 8;
#pragma unroll
        for (int q = 0; q < Cfg::kBT / 16; ++q) {
          std::uint32_t r[4];
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) {
            const int i = 4 * (2 * q + jj / 2) + 2 * (jj % 2);
            r[jj] = static_cast<std::uint32_t>(out_at(i).bits) |
                    (static_cast<std::uint32_t>(out_at(i + 1).bits) << 16);
          }
          const int token = 8 * (2 * q + jm / 2) + row_in, chunk = 2 * w + jm % 2;
          sm90::STSM_x4_T::copy(staging + token * 128 + ((chunk ^ (token % 8)) * 16), r);
        }
        sm90::fence_proxy_async();  // the stores above, seen by the TMA store's async proxy
        sm90::warpgroup_sync();
        if (tid == 0 && n0 + 64 * half < p.n) {
          sm90::tma_store(p.d_map, staging, {n0 + 64 * half, t0});
          sm90::bulk_commit_group();
        }
      } else {
#pragma unroll
        for (int i = 0; i < Cfg::kBT / 2; ++i) {
          const int token = t0 + 8 * (i >> 2) + 2 * t + (i & 1), column = ((i >> 1) & 1) ? col_hi : col_lo;
          if (token < p.m && column < p.n) p.d[static_cast<std::int64_t>(token) * p.ldd + column] = out_at(i);
        }
      }
    }
    if (p.tma_store && tid == 0) sm90::bulk_wait_group<0>();  // the stores are complete before the exit
  }
}

namespace detail {

/// Whether the scale / zero-point rows can be copied in 16-byte pieces per 64-wide slice (the mma.sync
/// kernels' staged path and the Hopper kernel's TMA loads): G % 64 == 0, N % 8 == 0 (N % 16 with zero
/// points), 16-byte aligned scales / zeros.
inline bool wo_quant_rows_copyable(unsigned group_size, int n, const void* scales, const void* zeros) {
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  if (group_size % 64 != 0 || n % 8 != 0 || !aligned16(scales)) return false;
  return zeros == nullptr || (n % 16 == 0 && aligned16(zeros));
}

/// Whether the Hopper kernel can run `x` (the device and build aside): copyable scale rows, and weight
/// coordinates that fit TMA's signed 32-bit ones (a K slice of 64 is 32 words of 4-bit codes per 16 columns
/// and 64 of 8-bit ones, the inner coordinate up to 2K or 4K words: K <= 2^29 for 8-bit codes).
template <class T>
bool weight_only_sm90_shape_ok(const WeightOnlyArgs<T>& x) {
  if (x.bits == 8 && x.k > (1 << 29)) return false;
  return wo_quant_rows_copyable(static_cast<unsigned>(x.group_size), x.n, x.scales, x.zeros);
}

/// The token tile: 64 where 128 would leave the SMs' last wave much emptier (M = 256, N = 4096: 64 tiles of
/// 128 tokens for 132 SMs), else 128 (half the weight dequantization and L2 traffic per token).
inline int wo_sm90_token_tile(int m, int n, int sms) {
  const auto waves_cost = [&](int bt) {
    const long long tiles = static_cast<long long>(ceil_div(m, bt)) * ceil_div(n, 128);
    return static_cast<double>(ceil_div<long long>(tiles, sms)) * bt * (bt == 64 ? 1.1 : 1.0);
  };
  return waves_cost(64) < waves_cost(128) ? 64 : 128;
}

template <class T, int kBits, class Cfg>
Status launch_weight_only_sm90(const WeightOnlyArgs<T>& x, const T* a, std::int64_t lda, int splits,
                               const SplitKArgs<float>& split, cudaStream_t stream) {
  namespace sm90 = arch::sm90;
  constexpr int kSmem = sm90_detail::wo_sm90_smem_bytes<Cfg, kBits>();
  static_assert(kSmem <= 227 * 1024, "the ring and the staging tiles must fit in 227 KiB");
  WeightOnlySm90Params<T> p;
  p.m = x.m, p.n = x.n, p.k = x.k;
  p.slices_per_group = x.group_size / 64;
  p.has_zeros = x.zeros != nullptr;
  p.bias = x.bias, p.d = x.d, p.ldd = x.ldd;
  p.pair_store = reinterpret_cast<std::uintptr_t>(x.d) % 4 == 0 && x.ldd % 2 == 0;
  p.splits = splits;
  p.split = split;
  if (splits <= 1) p.split.k_tiles_per_split = x.k / Cfg::kBK;
  const std::uint64_t groups = static_cast<std::uint64_t>(x.k / x.group_size);
  sm90::TensorMapDesc da;
  da.elem = sm90::TmaElem::kU16;
  da.rank = 2;
  da.global = a;
  da.dims[0] = static_cast<std::uint64_t>(x.k);
  da.dims[1] = static_cast<std::uint64_t>(x.m);
  da.strides[0] = static_cast<std::uint64_t>(lda) * 2;
  da.box[0] = Cfg::kBK;
  da.box[1] = Cfg::kBT;
  da.swizzle = sm90::SmemSwizzle::k128B;
  LLMK_RETURN_IF_ERROR(sm90::make_tensor_map(&p.a, da));
  const int tiles_k = ceil_div(x.k, weight_only_tile_k(kBits));
  sm90::TensorMapDesc dw;
  dw.elem = sm90::TmaElem::kU32;
  dw.rank = 2;
  dw.global = x.w;
  dw.dims[0] = static_cast<std::uint64_t>(tiles_k) * 128;
  dw.dims[1] = static_cast<std::uint64_t>(ceil_div(x.n, 16));
  dw.strides[0] = static_cast<std::uint64_t>(tiles_k) * 512;
  dw.box[0] = 128 * kBits / 4;
  dw.box[1] = 8;
  LLMK_RETURN_IF_ERROR(sm90::make_tensor_map(&p.w, dw));
  sm90::TensorMapDesc ds;
  ds.elem = sm90::TmaElem::kU16;
  ds.rank = 2;
  ds.global = x.scales;
  ds.dims[0] = static_cast<std::uint64_t>(x.n);
  ds.dims[1] = groups;
  ds.strides[0] = static_cast<std::uint64_t>(x.n) * 2;
  ds.box[0] = Cfg::kBN;
  ds.box[1] = 1;
  LLMK_RETURN_IF_ERROR(sm90::make_tensor_map(&p.scales, ds));
  if (p.has_zeros) {
    sm90::TensorMapDesc dz = ds;
    dz.elem = sm90::TmaElem::kU8;
    dz.global = x.zeros;
    dz.strides[0] = static_cast<std::uint64_t>(x.n);
    LLMK_RETURN_IF_ERROR(sm90::make_tensor_map(&p.zeros, dz));
  }
  p.tma_store = reinterpret_cast<std::uintptr_t>(x.d) % 16 == 0 && (x.ldd * 2) % 16 == 0;
  if (p.tma_store) {
    sm90::TensorMapDesc dd;
    dd.elem = sm90::TmaElem::kU16;
    dd.rank = 2;
    dd.global = x.d;
    dd.dims[0] = static_cast<std::uint64_t>(x.n);
    dd.dims[1] = static_cast<std::uint64_t>(x.m);
    dd.strides[0] = static_cast<std::uint64_t>(x.ldd) * 2;
    dd.box[0] = 64;
    dd.box[1] = Cfg::kBT;
    dd.swizzle = sm90::SmemSwizzle::k128B;
    LLMK_RETURN_IF_ERROR(sm90::make_tensor_map(&p.d_map, dd));
  }
  const long long units =
      static_cast<long long>(ceil_div(x.m, Cfg::kBT)) * ceil_div(x.n, Cfg::kBN) * std::max(1, splits);
  if (units > 0x7FFFFFFFLL)  // the kernel counts tiles x splits in int
    return Status::invalid_argument(
        "m", str_cat("M x N needs fewer than 2^31 tiles of ", Cfg::kBT, " x 128 (times the split count)"));
  const unsigned grid = static_cast<unsigned>(std::min<long long>(units, device_sm_count()));
  return launch(weight_only_sm90_kernel<T, kBits, Cfg>, dim3(grid), dim3(Cfg::kThreads),
                static_cast<std::size_t>(kSmem), stream, p);
}

/// Runs `x` (validated; A already permuted for act-order) on the Hopper kernel with the token tile `bt`,
/// K split `splits` ways (`split`: the workspace's partials and arrival words, when splits > 1).
template <class T>
Status dispatch_weight_only_sm90(const WeightOnlyArgs<T>& x, const T* a, std::int64_t lda, int bt, int splits,
                                 const SplitKArgs<float>& split, cudaStream_t stream) {
  using Narrow = WeightOnlySm90Config<64>;
  using Wide = WeightOnlySm90Config<128>;
  if (x.bits == 4)
    return bt == 64 ? launch_weight_only_sm90<T, 4, Narrow>(x, a, lda, splits, split, stream)
                    : launch_weight_only_sm90<T, 4, Wide>(x, a, lda, splits, split, stream);
  return bt == 64 ? launch_weight_only_sm90<T, 8, Narrow>(x, a, lda, splits, split, stream)
                  : launch_weight_only_sm90<T, 8, Wide>(x, a, lda, splits, split, stream);
}

}  // namespace detail

}  // namespace llmk::gemm
