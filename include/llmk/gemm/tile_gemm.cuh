// llmk/gemm/tile_gemm.cuh: the mma.sync 16-bit GEMM (fp16 or bf16 inputs, fp32 accumulation), for sm_80 and
// newer; gemm_f16.cuh's gemm_f16 dispatches to it off Hopper and to hopper_gemm.cuh's wgmma kernel on sm_90.
//
//   D[M, N] = alpha * A[M, K] * B[N, K]^T + beta * C[M, N]        (D and C may alias; C, D: fp32 or T)
//
// Both operands are K-major ("TN"): A row-major [M, K], B row-major [N, K], the layout of a linear layer's
// activations and weights. The mainloop is kmajor_mainloop.cuh's (the one the 8-bit GEMMs run): each block
// owns a BM x BN tile of D and streams BK-wide slices of A and B through a Stages-deep cp.async ring; each
// warp owns a WM x WN sub-tile and feeds mma.m16n8k16 from ldmatrix. The epilogue stages the tile in shared
// memory and writes D in 16-byte rows. M and N are arbitrary (out-of-range rows are zero-filled by cp.async);
// K must be a multiple of 8 (16-byte rows), and the tail of the last K slice is zero-filled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "llmk/arch/mma.cuh"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"
#include "llmk/gemm/kmajor_mainloop.cuh"
#include "llmk/gemm/quant_gemm_args.cuh"
#include "llmk/gemm/split_k.cuh"

namespace llmk::gemm {

/// Tile shape of the mma.sync 16-bit GEMM: block tile BM x BN x BK (BK in elements), warps arranged WarpsM x
/// WarpsN, a Stages-deep cp.async ring. The K-major tile of kmajor_mainloop.cuh. Example: tile_gemm.
template <int BM, int BN, int BK, int WarpsM, int WarpsN, int Stages>
using TileGemmConfig = KMajorTile<BM, BN, BK, WarpsM, WarpsN, Stages>;

/// The large tile (M > 64 with enough tiles for the SMs): 128 x 128 x 32, 2 x 2 warps of 64 x 64, 4 stages
/// (80 KiB: two blocks per SM on sm_80 / sm_90, one on sm_86 / sm_89). A warp's k16 step reads 8 ldmatrix.x4
/// for 32 mma (the 64 x 64 tile's 2 x 2 warps of 32 x 32 read 4 for 8), and each block loads 16 bytes of
/// operands per 64 FLOPs against 32 (half the L2 traffic). Forced with
/// tile_gemm<llmk::gemm::TileGemmLarge>(...).
using TileGemmLarge = TileGemmConfig<128, 128, 32, 2, 2, 4>;
/// The small tile (M <= 64, or too few large tiles to fill the SMs): 64 x 64 x 64, 2 x 2 warps of 32 x 32,
/// 3 stages (54 KiB). 64-element slices: 64 x 64 x 32 in 4 stages compiled to 4.0-7.1 instructions per mma
/// (ptxas rebuilt its addresses every slice at 64-72 registers), this tile to 3.1 (5.0 on sm_89). Forced with
/// tile_gemm<llmk::gemm::TileGemmSmall>(...).
using TileGemmSmall = TileGemmConfig<64, 64, 64, 2, 2, 3>;

/// alpha * acc + beta * C in fp32, rounded once to Out (C and D of type Out: float, llmk::half, bfloat16).
/// The epilogue of the 16-bit GEMMs, mma.sync and Hopper alike; the launchers build it from their alpha,
/// beta, c and ldc:  llmk::gemm::LinearEpilogue<float> epi{alpha, beta, c, ldc};
template <class Out_ = float>
struct LinearEpilogue {
  using Out = Out_;
  static constexpr bool kBlockScaled = false;
  float alpha = 1.0f, beta = 0.0f;
  const Out* c = nullptr;
  std::int64_t ldc = 0;
  LLMK_DEVICE Out value(int row, int col, float v) const {
    float out = alpha * v;
    if (beta != 0.0f) out += beta * static_cast<float>(c[static_cast<std::int64_t>(row) * ldc + col]);
    return Out(out);
  }
};

/// What the mma.sync 16-bit GEMM kernel reads. Leading dimensions are in elements. Built by tile_gemm from
/// its arguments (call tile_gemm; example there).
template <class T, class Out>
struct TileGemmParams {
  const T* a;
  const T* b;
  Out* d;
  int m, n, k;
  std::int64_t lda, ldb, ldd;
  LinearEpilogue<Out> epi;
};

/// The arguments of the 16-bit GEMMs in one struct (gemm_f16, gemm_f16_sm90), with the split-K workspace the
/// Hopper kernel may use at small M (caller-owned, CUB style: gemm_f16_workspace_bytes(args) first). split_k:
/// 0 splits K by the SM count where a workspace is given (and not at all without one), 1 never, s >= 2 into
/// at most s splits (a workspace required). Leading dimensions are in elements. Aggregate order: a, lda, b,
/// ldb, c, ldc, d, ldd, m, n, k, alpha, beta, split_k, workspace, workspace_bytes (example: gemm_f16).
///   llmk::gemm::GemmF16Args<llmk::half, llmk::half> g{a, K, b, K, nullptr, N, d, N, M, N, K};
template <class T, class Out = float>
struct GemmF16Args {
  const T* a = nullptr;
  std::int64_t lda = 0;
  const T* b = nullptr;
  std::int64_t ldb = 0;
  const Out* c = nullptr;  // read only when beta != 0; may alias d
  std::int64_t ldc = 0;
  Out* d = nullptr;
  std::int64_t ldd = 0;
  int m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  int split_k = 0;
  /// 16-byte aligned, gemm_f16_workspace_bytes(args) bytes; contents need no reset. One call at a time per
  /// workspace: two calls running at once on one workspace (other streams) would mix their tiles' arrival
  /// counts and leave tiles of D unwritten. It must not overlap A, B, C or D.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

namespace detail {

// The mma.sync atom of a 16-bit input type.
template <class T>
using Mma16 = std::conditional_t<std::is_same_v<T, bfloat16>, arch::MMA_16x8x16_F32BF16BF16F32,
                                 arch::MMA_16x8x16_F32F16F16F32>;

// Dynamic shared memory of tile_gemm_kernel<T, Out, Tile>: the ring or the staged output tile, whichever is
// larger (the epilogue reuses the ring).
template <class Tile, class Out>
constexpr int tile_gemm_smem_bytes() {
  constexpr int ring = Tile::template Bytes<2>::kSmemBytes, staged = kStagedEpilogueBytes<Tile, Out>;
  return ring > staged ? ring : staged;
}

}  // namespace detail

namespace detail {

// The block's accumulators of a tile GEMM: all of K, or under kSplitK the k-tiles of split blockIdx.z.
template <class T, class Out, class Tile, bool kSplitK>
LLMK_DEVICE void tile_gemm_accumulate(const TileGemmParams<T, Out>& p, int k_tiles_per_split, int block_m,
                                      int block_n, float (&acc)[Tile::kMmaM][Tile::kMmaN][4]) {
#pragma unroll
  for (int mi = 0; mi < Tile::kMmaM; ++mi)
#pragma unroll
    for (int ni = 0; ni < Tile::kMmaN; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
  KMajorOperands op{p.a, p.b, p.lda, p.ldb, p.m, p.n, p.k};
  if constexpr (kSplitK) op = kmajor_split_window<Tile, T>(op, k_tiles_per_split);
  kmajor_mainloop<Tile, 2, Mma16<T>>(op, block_m, block_n, dynamic_smem(), acc);
}

}  // namespace detail

/// The kernel: one block per BM x BN tile of D (blockIdx.x over N tiles, blockIdx.y over M tiles). A minimum
/// of one block per SM in the launch bounds: without it ptxas held the small tile to 72 registers on sm_89
/// and rematerialized addresses in the main loop (5.00 instructions per HMMA; 3.09 with 100 registers, as on
/// sm_80 / sm_90, where shared memory limits the blocks per SM before registers do). Launched (with its
/// arguments checked) by tile_gemm: call that (example and errors there), not the kernel.
template <class T, class Out, class Tile>
__global__ void __launch_bounds__(Tile::kThreads, 1) tile_gemm_kernel(TileGemmParams<T, Out> p) {
  const int block_m = static_cast<int>(blockIdx.y) * Tile::BM,
            block_n = static_cast<int>(blockIdx.x) * Tile::BN;
  float acc[Tile::kMmaM][Tile::kMmaN][4];
  detail::tile_gemm_accumulate<T, Out, Tile, false>(p, 0, block_m, block_n, acc);
  // The whole tile's C is read into shared memory before any of D is written: D may alias C.
  store_tile_staged<Tile>(
      dynamic_smem(), p.d, p.ldd, block_m, block_n, p.m, p.n,
      [&](int row, int col, int mi, int ni, int e) -> Out { return p.epi.value(row, col, acc[mi][ni][e]); });
}

/// The split-K kernel (a separate instantiation, so the unsplit kernel's code stays as it is): split
/// blockIdx.z of the tile writes its fp32 partials to the workspace, and the tile's last split to arrive sums
/// every split in order and stores the epilogue of the sum (C read and D written element by element, so D may
/// alias C). Launched by tile_gemm(GemmF16Args) where its split plan splits (example there).
template <class T, class Out, class Tile>
__global__ void __launch_bounds__(Tile::kThreads)
    tile_gemm_split_kernel(TileGemmParams<T, Out> p, detail::SplitKArgs<float> split) {
  const int block_m = static_cast<int>(blockIdx.y) * Tile::BM,
            block_n = static_cast<int>(blockIdx.x) * Tile::BN;
  float acc[Tile::kMmaM][Tile::kMmaN][4];
  detail::tile_gemm_accumulate<T, Out, Tile, true>(p, split.k_tiles_per_split, block_m, block_n, acc);
  detail::kmajor_split_k_finish<Tile>(
      split, acc, p.d, p.ldd, block_m, block_n, p.m, p.n,
      [&](int row, int col, float sum) { return p.epi.value(row, col, sum); });
}

namespace detail {

// The argument rules of the fp16 / bf16 GEMMs (tile_gemm, gemm_f16_sm90); see tile_gemm.
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
  // 32-bit tile arithmetic (a row of K in bytes, tile counts, the split-K pitch).
  if (m > (1 << 30) || n > (1 << 30) || k >= (1 << 30))
    return Status::invalid_argument(
        "m/n/k",
        str_cat("must be M, N <= 2^30 and K < 2^30 (32-bit tile arithmetic), got ", m, " x ", n, " x ", k));
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

// Whether an M x N call on `sms` SMs takes the large tile: M > 64 and at least one large tile per SM (fewer,
// and the small tile's 4x as many blocks keep more SMs loading).
inline bool tile_gemm_takes_large(int m, int n, int sms) {
  return m > 64 &&
         ceil_div<long long>(m, TileGemmLarge::BM) * ceil_div<long long>(n, TileGemmLarge::BN) >= sms;
}

template <class Tile>
Status check_tile_gemm_grid(int m) {
  if (ceil_div<long long>(m, Tile::BM) > 65535)
    return Status::invalid_argument(
        "m", str_cat("must be <= ", 65535LL * Tile::BM, " for this tile (BM=", Tile::BM, ")"));
  return {};
}

// The split plan of an M x N x K call on Tile (`sms` SMs): split_k = 0 fills one wave of resident blocks (by
// shared memory and by the split kernel's registers, estimated from the accumulators: ptxas gives the small
// tile's 155, the large tile's 220, so 3 and 2 blocks an SM), at least 2 k-tiles a split, the partials'
// traffic (S x M x N x 4 bytes) at most half the weights' (N x K x 2 bytes); split_k = s: at most s.
template <class Tile, class Out>
QGemmSplitPlan tile_gemm_split_plan(int m, int n, int k, int split_k, int sms) {
  const long long tiles = ceil_div<long long>(m, Tile::BM) * ceil_div<long long>(n, Tile::BN);
  const int k_tiles = ceil_div(k, Tile::BK);
  long long want = split_k;
  if (want == 0) {
    constexpr int kAcc = 4 * Tile::kMmaM * Tile::kMmaN, kRegs = 2 * kAcc + 96;
    const int by_registers = 65536 / (Tile::kThreads * (kRegs < 255 ? kRegs : 256));
    const int by_smem = device_smem_per_sm() / (tile_gemm_smem_bytes<Tile, Out>() + 1024);
    const long long blocks = max(1, min(by_registers, by_smem));
    want = blocks * sms / tiles;
    want = min<long long>(want, k_tiles / 2);
    want = min<long long>(want, 2LL * k / (8LL * m));
  }
  return split_k_plan_of(want, tiles, k_tiles, m, n);
}

template <class Tile, class T, class Out>
Status launch_tile_gemm(const TileGemmParams<T, Out>& p, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(check_tile_gemm_grid<Tile>(p.m));
  return launch(
      tile_gemm_kernel<T, Out, Tile>,
      dim3(static_cast<unsigned>(ceil_div(p.n, Tile::BN)), static_cast<unsigned>(ceil_div(p.m, Tile::BM))),
      dim3(Tile::kThreads), tile_gemm_smem_bytes<Tile, Out>(), stream, p);
}

// tile_gemm over GemmF16Args on Tile: the split kernel where the plan splits, else the unsplit one.
template <class Tile, class T, class Out>
Status launch_tile_gemm_args(const GemmF16Args<T, Out>& a, cudaStream_t stream) {
  QGemmSplitPlan plan;
  LLMK_RETURN_IF_ERROR(qgemm_resolve_split_by(
      a, true, [&] { return tile_gemm_split_plan<Tile, Out>(a.m, a.n, a.k, a.split_k, device_sm_count()); },
      plan, "gemm_f16_workspace_bytes"));
  const TileGemmParams<T, Out> p{a.a, a.b,   a.d,   a.m,   a.n,
                                 a.k, a.lda, a.ldb, a.ldd, LinearEpilogue<Out>{a.alpha, a.beta, a.c, a.ldc}};
  if (plan.splits == 1) return launch_tile_gemm<Tile>(p, stream);
  LLMK_RETURN_IF_ERROR(check_tile_gemm_grid<Tile>(a.m));
  return launch(tile_gemm_split_kernel<T, Out, Tile>,
                dim3(static_cast<unsigned>(ceil_div(a.n, Tile::BN)),
                     static_cast<unsigned>(ceil_div(a.m, Tile::BM)), static_cast<unsigned>(plan.splits)),
                dim3(Tile::kThreads), tile_gemm_smem_bytes<Tile, Out>(), stream, p,
                qgemm_split_args<float>(plan, a.workspace, a.n));
}

}  // namespace detail

/// D = alpha * A * B^T + beta * C on mma.sync tensor cores (sm_80 and newer) with fp16 or bf16 A [M, K] and
/// B [N, K] (row-major, K contiguous), fp32 accumulation, and C and D of type Out: float, or T itself
/// (alpha * acc + beta * C in fp32, rounded once). D may alias C. Tile = void (the default) picks
/// TileGemmLarge or TileGemmSmall by the shape (detail::tile_gemm_takes_large); a TileGemmConfig forces one.
/// On Hopper, gemm_f16 (llmk/gemm/gemm_f16.cuh) runs the wgmma kernel instead.
///
/// Requirements (each violation returns Status::invalid_argument naming the argument):
///   a, b, d non-null (c non-null when beta != 0); M, N, K >= 1; M, N <= 2^30, K < 2^30; K % 8 == 0; lda, ldb
///   >= K and multiples of 8; ldc, ldd >= N; a and b 16-byte aligned, c and d aligned to their element; M <=
///   65535 * BM. A failed launch: Status::cuda_error.
///
///   llmk::DeviceBuffer<llmk::bfloat16> d_a(a), d_b(b);          // A [M, K], B [N, K]
///   llmk::DeviceBuffer<llmk::bfloat16> d_d(M * N);
///   llmk::Status s = llmk::gemm::tile_gemm(d_a.data(), K, d_b.data(), K, nullptr, N, d_d.data(), N, M, N, K,
///                                          1.0f, 0.0f, stream);     // bf16 out, fp32 accumulation
///   using Tile = llmk::gemm::TileGemmConfig<128, 64, 32, 2, 2, 3>;  // or a tile of your own
///   s = llmk::gemm::tile_gemm<Tile>(d_a.data(), K, d_b.data(), K, nullptr, N, d_d.data(), N, M, N, K, 1.0f,
///                                   0.0f, stream);
template <class Tile = void, class T, class Out>
Status tile_gemm(const T* a, std::int64_t lda, const T* b, std::int64_t ldb,
                 const std::type_identity_t<Out>* c, std::int64_t ldc, Out* d, std::int64_t ldd, int m, int n,
                 int k, float alpha, float beta, cudaStream_t stream) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, "tile_gemm: llmk::half or bfloat16");
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, T>,
                "tile_gemm: C and D are float or the input type");
  LLMK_RETURN_IF_ERROR(
      detail::validate_f16_gemm(a, lda, b, ldb, c, ldc, static_cast<const Out*>(d), ldd, m, n, k, beta));
  const TileGemmParams<T, Out> p{a, b, d, m, n, k, lda, ldb, ldd, LinearEpilogue<Out>{alpha, beta, c, ldc}};
  if constexpr (std::is_void_v<Tile>) {
    if (detail::tile_gemm_takes_large(m, n, device_sm_count()))
      return detail::launch_tile_gemm<TileGemmLarge>(p, stream);
    return detail::launch_tile_gemm<TileGemmSmall>(p, stream);
  } else {
    return detail::launch_tile_gemm<Tile>(p, stream);
  }
}

namespace detail {

template <class T, class Out>
Status validate_f16_gemm_args(const GemmF16Args<T, Out>& p) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>,
                "16-bit GEMM: llmk::half or bfloat16");
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, T>,
                "16-bit GEMM: C and D are float or the input type");
  LLMK_RETURN_IF_ERROR(validate_f16_gemm(p.a, p.lda, p.b, p.ldb, p.c, p.ldc, static_cast<const Out*>(p.d),
                                         p.ldd, p.m, p.n, p.k, p.beta));
  if (p.split_k < 0 || p.split_k > kSplitKMaxSplits)
    return Status::invalid_argument(
        "split_k",
        str_cat("must be in [0, ", kSplitKMaxSplits, "] (0: by the SM count, 1: no split), got ", p.split_k));
  return {};
}

}  // namespace detail

/// tile_gemm with its arguments in a GemmF16Args: with a workspace it splits K where the output has too few
/// tiles for the SMs (detail::tile_gemm_split_plan: one wave of resident blocks, e.g. M = 16, N = K = 4096 on
/// 108 SMs: 64 small tiles x 8 splits), fp32 partials summed in split order (deterministic for a split
/// count).
///
///   llmk::gemm::GemmF16Args<llmk::half> g{a, K, b, K, nullptr, N, d, N, M, N, K};   // d: float (Out)
///   const std::size_t bytes = llmk::gemm::tile_gemm_workspace_bytes(g);
///   llmk::DeviceBuffer<unsigned char> ws(std::max<std::size_t>(bytes, 1));
///   g.workspace = ws.data(), g.workspace_bytes = ws.size();
///   llmk::Status s = llmk::gemm::tile_gemm(g, stream);
///
/// Errors (Status::invalid_argument naming the argument): the requirements of the positional tile_gemm;
/// split_k outside [0, kSplitKMaxSplits]; where the plan splits, workspace null (split_k >= 2 always needs
/// one) or not 16-byte aligned, or workspace_bytes below tile_gemm_workspace_bytes(p). A failed launch:
/// Status::cuda_error.
template <class Tile = void, class T, class Out>
Status tile_gemm(const GemmF16Args<T, Out>& p, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::validate_f16_gemm_args(p));
  if constexpr (std::is_void_v<Tile>) {
    if (detail::tile_gemm_takes_large(p.m, p.n, device_sm_count()))
      return detail::launch_tile_gemm_args<TileGemmLarge>(p, stream);
    return detail::launch_tile_gemm_args<TileGemmSmall>(p, stream);
  } else {
    return detail::launch_tile_gemm_args<Tile>(p, stream);
  }
}

/// Bytes of workspace tile_gemm(args) on Tile (void: the tile it picks) needs to split K with these
/// arguments: reads M, N, K, split_k and the device, not the pointers; 0 where it does not split.
///
///   const std::size_t bytes = llmk::gemm::tile_gemm_workspace_bytes(g);   // g as for the call
template <class Tile = void, class T, class Out>
std::size_t tile_gemm_workspace_bytes(const GemmF16Args<T, Out>& p) {
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.split_k < 0 || p.split_k > kSplitKMaxSplits || p.split_k == 1)
    return 0;
  if constexpr (std::is_void_v<Tile>) {
    if (detail::tile_gemm_takes_large(p.m, p.n, device_sm_count()))
      return tile_gemm_workspace_bytes<TileGemmLarge>(p);
    return tile_gemm_workspace_bytes<TileGemmSmall>(p);
  } else {
    return detail::tile_gemm_split_plan<Tile, Out>(p.m, p.n, p.k, p.split_k, device_sm_count())
        .workspace_bytes();
  }
}

/// tile_gemm with fp16 A and B and fp32 C and D (the first kernel's signature). Errors: those of tile_gemm.
///
///   std::vector<llmk::half> a(M * K), b(N * K);  // fill
///   llmk::DeviceBuffer<llmk::half> d_a(a), d_b(b);
///   llmk::DeviceBuffer<float> d_d(M * N);
///   llmk::Status s = llmk::gemm::tile_gemm_f16(d_a.data(), K, d_b.data(), K, nullptr, N, d_d.data(), N,
///                                              M, N, K, 1.0f, 0.0f, stream);
template <class Tile = void>
Status tile_gemm_f16(const half* a, std::int64_t lda, const half* b, std::int64_t ldb, const float* c,
                     std::int64_t ldc, float* d, std::int64_t ldd, int m, int n, int k, float alpha,
                     float beta, cudaStream_t stream) {
  return tile_gemm<Tile, half, float>(a, lda, b, ldb, c, ldc, d, ldd, m, n, k, alpha, beta, stream);
}

}  // namespace llmk::gemm
