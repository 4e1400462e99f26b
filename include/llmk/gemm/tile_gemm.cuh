// llmk/gemm/tile_gemm.cuh: the first tensor-core kernel, fp16 inputs with fp32 accumulation.
//
//   D[M, N] = alpha * A[M, K] * B[N, K]^T + beta * C[M, N]        (D and C may alias)
//
// Both operands are K-major ("TN"): A row-major [M, K], B row-major [N, K], the layout of a linear layer's
// activations and weights. Each block owns a BM x BN tile of D and streams BK-wide slices of A and B through
// a Stages-deep cp.async ring in shared memory; each warp owns a WM x WN sub-tile and feeds mma.m16n8k16 from
// ldmatrix. M and N are arbitrary (out-of-range rows are zero-filled by cp.async); K must be a multiple of 8
// (16-byte rows), and the tail of the last K slice is zero-filled.
#pragma once

#include <cstdint>

#include "llmk/arch/cp_async.cuh"
#include "llmk/arch/ldmatrix.cuh"
#include "llmk/arch/mma.cuh"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"

namespace llmk::gemm {

/// Tile shape of tile_gemm_f16: block tile BM x BN x BK, warps arranged WarpsM x WarpsN, Stages-deep
/// pipeline.
template <int BM_, int BN_, int BK_, int WarpsM_, int WarpsN_, int Stages_>
struct TileGemmConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WarpsM = WarpsM_, WarpsN = WarpsN_, Stages = Stages_;
  static constexpr int kThreads = WarpsM * WarpsN * 32;
  static constexpr int WM = BM / WarpsM, WN = BN / WarpsN;  // warp tile
  static constexpr int kMmaM = WM / 16, kMmaN = WN / 8;     // mma tiles per warp
  // Rows are padded by 16 bytes so the 8 rows an ldmatrix reads fall in different bank groups.
  static constexpr int kSmemRow = BK + 8;       // halves
  static constexpr int kChunksPerRow = BK / 8;  // 16-byte chunks

  static_assert(BK % 16 == 0, "BK must be a multiple of the mma K (16)");
  static_assert(BM % (16 * WarpsM) == 0, "each warp needs whole m16 tiles: BM % (16 * WarpsM) == 0");
  static_assert(BN % (16 * WarpsN) == 0, "each warp loads B in n16 pairs: BN % (16 * WarpsN) == 0");
  static_assert(Stages >= 2 && Stages <= 8, "the cp.async ring needs 2..8 stages");
  static_assert((BM * kChunksPerRow) % kThreads == 0 && (BN * kChunksPerRow) % kThreads == 0,
                "every thread copies the same number of 16-byte chunks per tile");

  struct SharedStorage {
    half a[Stages][BM * kSmemRow];
    half b[Stages][BN * kSmemRow];
  };
};

/// The default: 64 x 64 x 32 block tile, 2 x 2 warps (32 x 32 each), double buffering.
using TileGemmDefault = TileGemmConfig<64, 64, 32, 2, 2, 2>;

/// Arguments of tile_gemm_f16. Leading dimensions are in elements.
struct TileGemmParams {
  const half* a;
  const half* b;
  const float* c;  // read only when beta != 0
  float* d;
  int m, n, k;
  std::int64_t lda, ldb, ldc, ldd;
  float alpha, beta;
};

namespace detail {

// Issues the cp.async copies of one operand's K slice: `rows` rows of `Cfg::BK` halves starting at global row
// `row0` and column `k0`, into a padded shared tile. Rows past `total_rows` and chunks past K are zero-filled
// (their source pointer stays at the always-valid `src`).
template <class Cfg, int kRows>
LLMK_DEVICE void load_operand_async(const half* src, std::int64_t ld, int total_rows, int k, int row0, int k0,
                                    half* tile) {
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int i = 0; i < kRows * Cfg::kChunksPerRow / Cfg::kThreads; ++i) {
    const int chunk = tid + i * Cfg::kThreads;
    const int row = chunk / Cfg::kChunksPerRow, col = (chunk % Cfg::kChunksPerRow) * 8;
    const int g_row = row0 + row, g_k = k0 + col;
    const bool valid = g_row < total_rows && g_k < k;
    const half* from = valid ? src + static_cast<std::int64_t>(g_row) * ld + g_k : src;
    arch::cp_async_cg16_zfill(&tile[row * Cfg::kSmemRow + col], from, valid ? 16 : 0);
  }
}

// Issues the copies of K slice `k_tile` of the A and B tiles into ring slot `stage`.
template <class Cfg>
LLMK_DEVICE void load_tile_async(const TileGemmParams& p, typename Cfg::SharedStorage& smem, int stage,
                                 int k_tile, int block_m, int block_n) {
  const int k0 = k_tile * Cfg::BK;
  load_operand_async<Cfg, Cfg::BM>(p.a, p.lda, p.m, p.k, block_m, k0, smem.a[stage]);
  load_operand_async<Cfg, Cfg::BN>(p.b, p.ldb, p.n, p.k, block_n, k0, smem.b[stage]);
}

// acc += A_slice * B_slice^T for this warp's sub-tile, reading ring slot `stage`.
template <class Cfg>
LLMK_DEVICE void mma_tile(const typename Cfg::SharedStorage& smem, int stage, int warp_m, int warp_n,
                          int lane, float (&acc)[Cfg::kMmaM][Cfg::kMmaN][4]) {
#pragma unroll
  for (int kk = 0; kk < Cfg::BK; kk += 16) {
    // A fragments: lane l addresses row l % 16 and 8-column half l / 16 of each 16 x 16 tile.
    std::uint32_t a_frag[Cfg::kMmaM][4];
#pragma unroll
    for (int mi = 0; mi < Cfg::kMmaM; ++mi) {
      const int row = warp_m * Cfg::WM + mi * 16 + (lane % 16);
      const half* addr = &smem.a[stage][row * Cfg::kSmemRow + kk + (lane / 16) * 8];
      arch::LDSM_x4::copy(addr, a_frag[mi][0], a_frag[mi][1], a_frag[mi][2], a_frag[mi][3]);
    }
    // B fragments, two n8 tiles per ldmatrix.x4: matrix j = lane / 8 covers n rows (j / 2) * 8.. and
    // k half j % 2; an [n][k] row is exactly the "column" the mma wants for B.
    std::uint32_t b_frag[Cfg::kMmaN][2];
#pragma unroll
    for (int nj = 0; nj < Cfg::kMmaN; nj += 2) {
      const int j = lane / 8;
      const int row = warp_n * Cfg::WN + nj * 8 + (j / 2) * 8 + (lane % 8);
      const half* addr = &smem.b[stage][row * Cfg::kSmemRow + kk + (j % 2) * 8];
      arch::LDSM_x4::copy(addr, b_frag[nj][0], b_frag[nj][1], b_frag[nj + 1][0], b_frag[nj + 1][1]);
    }
#pragma unroll
    for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
      for (int ni = 0; ni < Cfg::kMmaN; ++ni)
        arch::MMA_16x8x16_F32F16F16F32::fma(acc[mi][ni], a_frag[mi], b_frag[ni], acc[mi][ni]);
  }
}

// D = alpha * acc + beta * C for the accumulator fragment layout (row g / g + 8, columns 2t, 2t + 1).
template <class Cfg>
LLMK_DEVICE void store_tile(const TileGemmParams& p, int block_m, int block_n, int warp_m, int warp_n,
                            int lane, const float (&acc)[Cfg::kMmaM][Cfg::kMmaN][4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
    for (int ni = 0; ni < Cfg::kMmaN; ++ni)
#pragma unroll
      for (int half_row = 0; half_row < 2; ++half_row) {
        const int row = block_m + warp_m * Cfg::WM + mi * 16 + g + half_row * 8;
        const int col = block_n + warp_n * Cfg::WN + ni * 8 + 2 * t;
        if (row >= p.m) continue;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (col + e >= p.n) continue;
          float v = p.alpha * acc[mi][ni][half_row * 2 + e];
          if (p.beta != 0.0f) v += p.beta * p.c[static_cast<std::int64_t>(row) * p.ldc + col + e];
          p.d[static_cast<std::int64_t>(row) * p.ldd + col + e] = v;
        }
      }
}

}  // namespace detail

/// The kernel: one block per BM x BN tile of D (blockIdx.x over N tiles, blockIdx.y over M tiles).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads) tile_gemm_f16_kernel(TileGemmParams p) {
  auto& smem = shared_storage<typename Cfg::SharedStorage>();
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warp_m = warp / Cfg::WarpsN, warp_n = warp % Cfg::WarpsN;
  const int block_m = static_cast<int>(blockIdx.y) * Cfg::BM,
            block_n = static_cast<int>(blockIdx.x) * Cfg::BN;
  const int k_tiles = ceil_div(p.k, Cfg::BK);

  float acc[Cfg::kMmaM][Cfg::kMmaN][4];
#pragma unroll
  for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
    for (int ni = 0; ni < Cfg::kMmaN; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;

        // Prologue: put Stages - 1 slices in flight (one commit group per slice, empty past the end).
#pragma unroll
  for (int s = 0; s < Cfg::Stages - 1; ++s) {
    if (s < k_tiles) detail::load_tile_async<Cfg>(p, smem, s, s, block_m, block_n);
    arch::cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    // Slice kt has landed for this thread once at most Stages - 2 newer groups are pending; the barrier makes
    // every thread's copies visible and frees the slot the next load overwrites (read in iteration kt - 1).
    arch::cp_async_wait<Cfg::Stages - 2>();
    __syncthreads();
    const int next = kt + Cfg::Stages - 1;
    if (next < k_tiles) detail::load_tile_async<Cfg>(p, smem, next % Cfg::Stages, next, block_m, block_n);
    arch::cp_async_commit();
    detail::mma_tile<Cfg>(smem, kt % Cfg::Stages, warp_m, warp_n, lane, acc);
  }
  detail::store_tile<Cfg>(p, block_m, block_n, warp_m, warp_n, lane, acc);
}

namespace detail {

// The argument rules of the fp16 / bf16 GEMMs (tile_gemm_f16, gemm_f16_sm90); see tile_gemm_f16.
template <class T, class Out = float>
Status validate_f16_gemm(const T* a, std::int64_t lda, const T* b, std::int64_t ldb, const Out* c,
                         std::int64_t ldc, const Out* d, std::int64_t ldd, int m, int n, int k, float beta) {
  if (a == nullptr) return Status::invalid_argument("a", "must not be null");
  if (b == nullptr) return Status::invalid_argument("b", "must not be null");
  if (d == nullptr) return Status::invalid_argument("d", "must not be null");
  if (beta != 0.0f && c == nullptr) return Status::invalid_argument("c", "must not be null when beta != 0");
  if (m < 1) return Status::invalid_argument("m", str_cat("must be >= 1, got ", m));
  if (n < 1) return Status::invalid_argument("n", str_cat("must be >= 1, got ", n));
  if (k < 1) return Status::invalid_argument("k", str_cat("must be >= 1, got ", k));
  if (k % 8 != 0)
    return Status::invalid_argument(
        "k",
        str_cat("must be a multiple of 8 (rows are copied in 16-byte vectors); pad K with zeros, got ", k));
  if (lda < k || lda % 8 != 0)
    return Status::invalid_argument("lda",
                                    str_cat("must be >= K and a multiple of 8 (K=", k, ", lda=", lda, ")"));
  if (ldb < k || ldb % 8 != 0)
    return Status::invalid_argument("ldb",
                                    str_cat("must be >= K and a multiple of 8 (K=", k, ", ldb=", ldb, ")"));
  if (beta != 0.0f && ldc < n)
    return Status::invalid_argument("ldc", str_cat("must be >= N (N=", n, ", ldc=", ldc, ")"));
  if (ldd < n) return Status::invalid_argument("ldd", str_cat("must be >= N (N=", n, ", ldd=", ldd, ")"));
  if (reinterpret_cast<std::uintptr_t>(a) % 16 != 0)
    return Status::invalid_argument("a", "must be 16-byte aligned");
  if (reinterpret_cast<std::uintptr_t>(b) % 16 != 0)
    return Status::invalid_argument("b", "must be 16-byte aligned");
  LLMK_RETURN_IF_ERROR(check_element_alignment<Out>("c", c));
  LLMK_RETURN_IF_ERROR(check_element_alignment<Out>("d", d));
  return {};
}

}  // namespace detail

/// D = alpha * A * B^T + beta * C with fp16 A [M, K] and B [N, K] (row-major, K contiguous), fp32 C and D.
///
/// Requirements (each violation returns Status::invalid_argument naming the argument):
///   a, b, d non-null (c non-null when beta != 0); M, N, K >= 1; K % 8 == 0; lda, ldb >= K and multiples of
///   8; ldc, ldd >= N; a and b 16-byte aligned; M <= 65535 * BM.
///
///   std::vector<llmk::half> a(M * K), b(N * K);  // fill
///   llmk::DeviceBuffer<llmk::half> d_a(a), d_b(b);
///   llmk::DeviceBuffer<float> d_d(M * N);
///   llmk::Status s = llmk::gemm::tile_gemm_f16(d_a.data(), K, d_b.data(), K, nullptr, N, d_d.data(), N,
///                                              M, N, K, 1.0f, 0.0f, stream);
template <class Cfg = TileGemmDefault>
Status tile_gemm_f16(const half* a, std::int64_t lda, const half* b, std::int64_t ldb, const float* c,
                     std::int64_t ldc, float* d, std::int64_t ldd, int m, int n, int k, float alpha,
                     float beta, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::validate_f16_gemm(a, lda, b, ldb, c, ldc, d, ldd, m, n, k, beta));
  const long long m_tiles = ceil_div<long long>(m, Cfg::BM), n_tiles = ceil_div<long long>(n, Cfg::BN);
  if (m_tiles > 65535)
    return Status::invalid_argument(
        "m", str_cat("must be <= ", 65535LL * Cfg::BM, " for this tile (BM=", Cfg::BM, ")"));
  TileGemmParams p{a, b, c, d, m, n, k, lda, ldb, ldc, ldd, alpha, beta};
  return launch(tile_gemm_f16_kernel<Cfg>,
                dim3(static_cast<unsigned>(n_tiles), static_cast<unsigned>(m_tiles)), dim3(Cfg::kThreads),
                sizeof(typename Cfg::SharedStorage), stream, p);
}

}  // namespace llmk::gemm
