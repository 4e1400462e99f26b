// llmk/gemm/hopper_gemm.cuh: the Hopper (sm_90a) GEMM: persistent, warp-specialized, TMA + wgmma.
//
//   D[i, j] = epilogue(i, j, sum_k A[i, k] * B[j, k])      A [M, K], B [N, K], both K-major ("TN")
//
// One kernel template for every input type: fp16 / bf16 (HGMMA, fp32 accumulate), fp8 e4m3 (QGMMA, fp32
// accumulate), int8 (IGMMA, int32 accumulate, wrapping or saturating). A block is 3 warpgroups (384 threads):
//
//   warpgroup 0: producer. setmaxnreg_dec<40>; one elected thread walks the block's tiles and, per k-tile,
//                waits for a free ring slot, then TMA-loads the 128 x BK slice of A and the BN x BK slice of
//                B (128-byte rows, 128B swizzle: exactly the wgmma K-major layout) into it;
//   warpgroups 1, 2: consumers. setmaxnreg_inc<232>; each owns 64 rows of the 128 x BN tile: per k-tile it
//   waits
//                for the slot, issues BK*bytes/32 wgmmas (m64nBNk16 or k32) chained on its accumulators,
//                commits, waits for the previous k-tile's group (one group stays in flight) and frees that
//                slot; at the end of a tile it applies the epilogue to its registers and stores to global
//                memory.
//
// Tiles are handed out round-robin (block b takes tiles b, b + grid, ...; grid = min(tiles, SMs)); the ring's
// positions run on across tiles, so loads of the next tile overlap the epilogue of the current one. M, N and
// K tails come from TMA's zero fill (K) and predicated stores (M, N). Epilogues: QuantEpilogue (W8A8 / fp8:
// dequantization as DequantScales), LinearEpilogue (alpha * acc + beta * C, fp32).
//
// Launchers: w8a8_gemm_sm90, fp8_gemm_sm90, gemm_f16_sm90 (fp16/bf16). w8a8_gemm and fp8_gemm dispatch to
// them on sm_90 devices (or in the simulator with LLMK_SIM_ARCH=900, see docs/hopper.md) when the build has
// sm_90a code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "llmk/arch/sm90/bulk_copy.cuh"
#include "llmk/arch/sm90/pipeline.cuh"
#include "llmk/arch/sm90/tma.cuh"
#include "llmk/arch/sm90/warp_specialization.cuh"
#include "llmk/arch/sm90/wgmma.cuh"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/gemm/quant_gemm_args.cuh"
#include "llmk/gemm/tile_gemm.cuh"

namespace llmk::gemm {

namespace sm90_detail {

// The wgmma atom and accumulator of an input type.
template <class In, bool kSaturate>
struct WgmmaOf;
template <bool S>
struct WgmmaOf<half, S> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx16_F32F16F16_SS<N>;
  using Acc = float;
};
template <bool S>
struct WgmmaOf<bfloat16, S> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx16_F32BF16BF16_SS<N>;
  using Acc = float;
};
template <bool S>
struct WgmmaOf<float8_e4m3, S> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx32_F32E4M3E4M3_SS<N>;
  using Acc = float;
};
template <>
struct WgmmaOf<std::int8_t, false> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx32_S32S8S8_SS<N>;
  using Acc = std::int32_t;
};
template <>
struct WgmmaOf<std::int8_t, true> {
  template <int N>
  using Atom = arch::sm90::WGMMA_64xNx32_S32S8S8_SATFINITE_SS<N>;
  using Acc = std::int32_t;
};

template <class In>
constexpr arch::sm90::TmaElem tma_elem() {
  return sizeof(In) == 1 ? arch::sm90::TmaElem::kU8 : arch::sm90::TmaElem::kU16;
}

}  // namespace sm90_detail

/// Tile configuration of the Hopper GEMM: 128 x BN block tile, BK = one 128-byte row of K, Stages ring slots.
template <class In, int BN = 128, int Stages = 4, bool kSaturate = false>
struct Sm90GemmConfig {
  static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256, "BN: a multiple of 16 up to 256");
  using Elem = In;
  using Wgmma = sm90_detail::WgmmaOf<In, kSaturate>;
  using Acc = typename Wgmma::Acc;
  using Atom = typename Wgmma::template Atom<BN>;
  static constexpr int kBM = 128, kBN = BN, kStages = Stages;
  static constexpr int kBK = 128 / static_cast<int>(sizeof(In));  // elements in one 128-byte row
  static constexpr int kKSteps = 4;                               // wgmmas per k-tile (32 bytes of K each)
  static constexpr int kThreads = 384;
  static constexpr int kConsumerWarps = 8;
  static constexpr unsigned kABytes = kBM * 128, kBBytes = static_cast<unsigned>(kBN) * 128;
  static constexpr int kSmemBytes =
      Stages * static_cast<int>(kABytes + kBBytes) + 1024 /*barriers*/ + 1024 /*alignment of the arena*/;
  static_assert(kSmemBytes <= 227 * 1024, "the ring must fit in 227 KiB");
};

/// out = s_a s_w (acc - z_a colsum_w) + bias (int8), s_a s_w acc + bias (fp8), or the raw int32 accumulator.
template <class Out, class Acc>
struct QuantEpilogue {
  DequantScales scales;
  Out* d = nullptr;
  std::int64_t ldd = 0;
  LLMK_DEVICE void operator()(int row, int col, Acc v) const {
    Out* dst = d + static_cast<std::int64_t>(row) * ldd + col;
    if constexpr (std::is_same_v<Out, std::int32_t>)
      *dst = v;
    else if constexpr (std::is_same_v<Acc, std::int32_t>)
      *dst = Out(detail::dequantize(scales, row, col, detail::zero_point_corrected(scales, row, col, v)));
    else
      *dst = Out(detail::dequantize(scales, row, col, v));
  }
};

/// D = alpha * acc + beta * C (fp32 C and D).
struct LinearEpilogue {
  float alpha = 1.0f, beta = 0.0f;
  const float* c = nullptr;
  std::int64_t ldc = 0;
  float* d = nullptr;
  std::int64_t ldd = 0;
  LLMK_DEVICE void operator()(int row, int col, float v) const {
    float out = alpha * v;
    if (beta != 0.0f) out += beta * c[static_cast<std::int64_t>(row) * ldc + col];
    d[static_cast<std::int64_t>(row) * ldd + col] = out;
  }
};

template <class Cfg>
struct Sm90GemmStorage {
  alignas(1024) unsigned char a[Cfg::kStages][Cfg::kABytes];
  alignas(1024) unsigned char b[Cfg::kStages][Cfg::kBBytes];
  arch::sm90::TmaRing<Cfg::kStages> ring;
};

/// The kernel (see the file comment). Launch with Cfg::kThreads threads and Cfg::kSmemBytes bytes.
template <class Cfg, class Epilogue>
__global__ void __launch_bounds__(384, 1)
    gemm_sm90_kernel(const __grid_constant__ arch::sm90::TensorMap map_a,
                     const __grid_constant__ arch::sm90::TensorMap map_b, int m, int n, int k, Epilogue epi) {
  namespace sm90 = arch::sm90;
  if constexpr (!sm90::kHasWgmma) {
#if LLMK_DEVICE_PASS
    __trap();
#endif
  } else {
    using Storage = Sm90GemmStorage<Cfg>;
    Storage& s = *reinterpret_cast<Storage*>(sm90::align_shared<1024>(dynamic_smem()));
    const int tiles_m = ceil_div(m, Cfg::kBM), tiles_n = ceil_div(n, Cfg::kBN);
    const int tiles = tiles_m * tiles_n, k_tiles = ceil_div(k, Cfg::kBK);
    if (threadIdx.x == 0) s.ring.init(Cfg::kConsumerWarps);
    __syncthreads();
    const int wg = static_cast<int>(threadIdx.x / 128);
    if (wg == 0) {  // producer
      sm90::setmaxnreg_dec<40>();
      if (threadIdx.x == 0) {
        sm90::RingPosition<Cfg::kStages> p;
        for (int tile = static_cast<int>(blockIdx.x); tile < tiles; tile += static_cast<int>(gridDim.x)) {
          const int m0 = (tile % tiles_m) * Cfg::kBM, n0 = (tile / tiles_m) * Cfg::kBN;
          for (int kt = 0; kt < k_tiles; ++kt) {
            s.ring.producer_acquire(p, Cfg::kABytes + Cfg::kBBytes);
            sm90::tma_load(s.a[p.stage], map_a, s.ring.full_bar(p), {kt * Cfg::kBK, m0});
            sm90::tma_load(s.b[p.stage], map_b, s.ring.full_bar(p), {kt * Cfg::kBK, n0});
            p.advance();
          }
        }
      }
      return;  // no block-wide barrier follows
    }
    sm90::setmaxnreg_inc<232>();
    const int half = wg - 1;  // rows 64 * half .. of the tile
    const int tid = static_cast<int>(threadIdx.x % 128), w = tid / 32, lane = tid % 32;
    sm90::RingPosition<Cfg::kStages> c, prev;
    for (int tile = static_cast<int>(blockIdx.x); tile < tiles; tile += static_cast<int>(gridDim.x)) {
      const int m0 = (tile % tiles_m) * Cfg::kBM, n0 = (tile / tiles_m) * Cfg::kBN;
      typename Cfg::Acc acc[Cfg::kBN / 2] = {};
      for (int kt = 0; kt < k_tiles; ++kt) {
        s.ring.consumer_wait(c);
        const std::uint64_t da =
            sm90::make_smem_desc(s.a[c.stage] + half * 64 * 128, 16, 1024, sm90::SmemSwizzle::k128B);
        const std::uint64_t db = sm90::make_smem_desc(s.b[c.stage], 16, 1024, sm90::SmemSwizzle::k128B);
        sm90::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < Cfg::kKSteps; ++ks)
          Cfg::Atom::fma(acc, sm90::advance_smem_desc(da, 32u * ks), sm90::advance_smem_desc(db, 32u * ks),
                         kt > 0 || ks > 0);
        sm90::wgmma_commit();
        if (kt > 0) {
          sm90::wgmma_wait<1>();  // the previous k-tile's wgmmas are done: free its slot
          if (lane == 0) s.ring.consumer_release(prev);
        }
        prev = c;
        c.advance();
      }
      sm90::wgmma_wait<0>();
      if (lane == 0) s.ring.consumer_release(prev);
      // Epilogue: thread (w, g = lane / 4, t = lane % 4) holds rows 16w + g (+8), columns 8j + 2t (+1).
      const int g = lane / 4, t = lane % 4;
#pragma unroll
      for (int i = 0; i < Cfg::kBN / 2; ++i) {
        const int row = m0 + 64 * half + 16 * w + g + 8 * ((i >> 1) & 1);
        const int col = n0 + 8 * (i >> 2) + 2 * t + (i & 1);
        if (row < m && col < n) epi(row, col, acc[i]);
      }
    }
  }
}

namespace sm90_detail {

// Writes 1 where the code the device runs has wgmma (an sm_90a image), 0 elsewhere.
template <class Cfg>
__global__ void wgmma_probe_kernel(int* out) {
  *out = arch::sm90::kHasWgmma ? 1 : 0;
}

// True where the Hopper kernel of Cfg can run: an sm_90 device (the simulator reports LLMK_SIM_ARCH, default
// 900) running an sm_90a image of this translation unit. A plain sm_90 image has the same binary version, so
// the first call asks the device itself (a probe kernel from the same fatbin; the answer is cached).
template <class Cfg>
bool sm90_available() {
  if (detail::device_arch() != 900) return false;
#if defined(LLMK_CUDA)
  static const bool has = [] {
    int* flag = nullptr;
    if (cudaMalloc(&flag, sizeof(int)) != cudaSuccess) return false;
    int host = 0;
    const bool ok = launch(wgmma_probe_kernel<Cfg>, dim3(1), dim3(1), 0, nullptr, flag).ok() &&
                    cudaMemcpy(&host, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(flag);
    return ok && host == 1;
  }();
  return has;
#else
  return true;
#endif
}

template <class Cfg, class In>
Status make_operand_maps(const In* a, std::int64_t lda, const In* b, std::int64_t ldb, int m, int n, int k,
                         arch::sm90::TensorMap* map_a, arch::sm90::TensorMap* map_b) {
  namespace sm90 = arch::sm90;
  sm90::TensorMapDesc da;
  da.elem = tma_elem<In>();
  da.rank = 2;
  da.global = a;
  da.dims[0] = static_cast<std::uint64_t>(k);
  da.dims[1] = static_cast<std::uint64_t>(m);
  da.strides[0] = static_cast<std::uint64_t>(lda) * sizeof(In);
  da.box[0] = Cfg::kBK;
  da.box[1] = Cfg::kBM;
  da.swizzle = sm90::SmemSwizzle::k128B;
  sm90::TensorMapDesc db = da;
  db.global = b;
  db.dims[1] = static_cast<std::uint64_t>(n);
  db.strides[0] = static_cast<std::uint64_t>(ldb) * sizeof(In);
  db.box[1] = Cfg::kBN;
  LLMK_RETURN_IF_ERROR(sm90::make_tensor_map(map_a, da));
  return sm90::make_tensor_map(map_b, db);
}

template <class Cfg, class In, class Epilogue>
Status launch_gemm_sm90(const In* a, std::int64_t lda, const In* b, std::int64_t ldb, int m, int n, int k,
                        const Epilogue& epi, cudaStream_t stream) {
  arch::sm90::TensorMap map_a{}, map_b{};
  LLMK_RETURN_IF_ERROR((make_operand_maps<Cfg>(a, lda, b, ldb, m, n, k, &map_a, &map_b)));
  const long long tiles = static_cast<long long>(ceil_div(m, Cfg::kBM)) * ceil_div(n, Cfg::kBN);
  const unsigned grid = static_cast<unsigned>(std::min<long long>(tiles, device_sm_count()));
  return launch(gemm_sm90_kernel<Cfg, Epilogue>, dim3(grid), dim3(Cfg::kThreads),
                static_cast<std::size_t>(Cfg::kSmemBytes), stream, map_a, map_b, m, n, k, epi);
}

}  // namespace sm90_detail

/// W8A8 GEMM on Hopper (IGMMA), the arguments and results of w8a8_gemm (docs/gemm.md). Returns
/// Status::unsupported where no sm_90a kernel can run.
///
///   llmk::Status s = llmk::gemm::w8a8_gemm_sm90<llmk::half>(g, stream);   // g as for w8a8_gemm
template <class Out, class Cfg = Sm90GemmConfig<std::int8_t>>
Status w8a8_gemm_sm90(const QuantGemmArgs<std::int8_t>& p, cudaStream_t stream) {
  static_assert(std::is_same_v<typename Cfg::Elem, std::int8_t>,
                "w8a8_gemm_sm90 needs an int8 configuration");
  LLMK_RETURN_IF_ERROR(
      (detail::validate_quant_gemm<std::int8_t, Out>(p, !std::is_same_v<Out, std::int32_t>)));
  using Epi = QuantEpilogue<Out, std::int32_t>;
  if (!sm90_detail::sm90_available<Cfg>())
    return Status::unsupported("w8a8_gemm_sm90 needs an sm_90 device and a build with sm_90a code");
  return sm90_detail::launch_gemm_sm90<Cfg>(p.a, p.lda, p.w, p.ldw, p.m, p.n, p.k,
                                            Epi{p.scales, static_cast<Out*>(p.d), p.ldd}, stream);
}

/// FP8 (e4m3) GEMM on Hopper (QGMMA), the arguments and results of fp8_gemm.
template <class Out, class Cfg = Sm90GemmConfig<float8_e4m3>>
Status fp8_gemm_sm90(const QuantGemmArgs<float8_e4m3>& p, cudaStream_t stream) {
  static_assert(std::is_same_v<typename Cfg::Elem, float8_e4m3>, "fp8_gemm_sm90 needs an e4m3 configuration");
  LLMK_RETURN_IF_ERROR((detail::validate_quant_gemm<float8_e4m3, Out>(p, true)));
  if (p.scales.a_zero_points != nullptr)
    return Status::invalid_argument("scales.a_zero_points", "must be null: fp8 operands are symmetric");
  using Epi = QuantEpilogue<Out, float>;
  if (!sm90_detail::sm90_available<Cfg>())
    return Status::unsupported("fp8_gemm_sm90 needs an sm_90 device and a build with sm_90a code");
  return sm90_detail::launch_gemm_sm90<Cfg>(p.a, p.lda, p.w, p.ldw, p.m, p.n, p.k,
                                            Epi{p.scales, static_cast<Out*>(p.d), p.ldd}, stream);
}

/// D = alpha * A * B^T + beta * C on Hopper (HGMMA) with fp16 or bf16 A [M, K] and B [N, K] (K contiguous),
/// fp32 C and D. Requirements: those of tile_gemm_f16 (llmk/gemm/tile_gemm.cuh), plus c and d 4-byte aligned.
///
///   llmk::Status s = llmk::gemm::gemm_f16_sm90(a, K, b, K, nullptr, N, d, N, M, N, K, 1.0f, 0.0f, stream);
template <class T, class Cfg = Sm90GemmConfig<T>>
Status gemm_f16_sm90(const T* a, std::int64_t lda, const T* b, std::int64_t ldb, const float* c,
                     std::int64_t ldc, float* d, std::int64_t ldd, int m, int n, int k, float alpha,
                     float beta, cudaStream_t stream) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>,
                "gemm_f16_sm90: llmk::half or bfloat16");
  LLMK_RETURN_IF_ERROR(detail::validate_f16_gemm(a, lda, b, ldb, c, ldc, d, ldd, m, n, k, beta));
  if (!sm90_detail::sm90_available<Cfg>())
    return Status::unsupported("gemm_f16_sm90 needs an sm_90 device and a build with sm_90a code");
  return sm90_detail::launch_gemm_sm90<Cfg>(a, lda, b, ldb, m, n, k,
                                            LinearEpilogue{alpha, beta, c, ldc, d, ldd}, stream);
}

}  // namespace llmk::gemm
