// llmk/gemm/weight_only.cuh: weight-only quantized GEMM (W4A16 and W8A16) with group-wise or per-channel
// scales, optional zero points, GPTQ act-order and split-K over all SMs.
// This header: the plan (tile by M, splits, workspace), validation and the launcher; the mma.sync kernel is
// in weight_only_kernel.cuh, the Hopper kernel in weight_only_sm90.cuh.
//
//   D[M, N] = A[M, K] * dequant(W)[N, K]^T (+ bias[N])
//   dequant(W)[n, k] = T(s[k / G, n] * (u[n, k] - z[k / G, n]))       (one rounding to T)
//
// A is T = llmk::half or llmk::bfloat16, row-major [M, K] (K contiguous); D, scales and bias are T as well.
// W holds UNSIGNED codes u of `bits` = 4 or 8 bits in the packed layout of weight_only_layout.cuh (made by
// weight_only_repack); zero points z are uint8 codes (absent: z = 8 for 4-bit, 128 for 8-bit, the symmetric
// case; bf16 with 4-bit codes needs z < 128). Scales and zero points are row-major [K / G, N] (GPTQ's
// layout). G is any multiple of 16 that divides K (G = K: per-channel). The kernel forms u - z exactly and
// rounds s * (u - z) once to T, the value the mma consumes (weight_only_dequant.cuh); the host reference
// (llmk/reference/weight_only.hpp) dequantizes the same way and accumulates in fp64; the kernel accumulates
// in fp32 on tensor cores (mma.m16n8k16) and rounds the output once to T.
//
// ---- Tiles ----
// WeightOnlyConfig<BM, BN, BK, WarpsM, WarpsN, WarpsK, Stages>: a block computes a BM x BN tile of D and
// streams BK slices of A (cp.async into padded rows, ldmatrix) and of the packed W tiles (cp.async, one
// 16-byte shared load per lane per tile) through a Stages-deep ring. With G % 64 == 0, N % 8 == 0 (% 16 with
// zeros) and 16-byte aligned scales / zeros the slice's scales and zero points travel in the same ring (no
// global load in the loop). WarpsM x WarpsN warps split the tile; WarpsK warps split each slice's k16 steps
// into contiguous runs and sum their partials through shared memory at the end, in a fixed order.
//
// ---- Split-K ----
// A grid of n-tiles x m-tiles x S splits: split s takes a contiguous run of BK slices. With S > 1 every block
// writes its fp32 partial tile to the workspace, counts itself in the tile's arrival word, and the block that
// arrives last sums the S partials in split order (0, 1, ..., S - 1: the same bits whichever block is last),
// adds the bias and stores D; all its threads share that sum in 4-column quads with their loads batched
// (split_k.cuh). The arrival word holds (this call's tag << 16 | arrivals); a word with another
// tag (another call's, or whatever the memory held) counts as none, and the last block resets it to 0, so the
// workspace needs no initialization and may be shared with other work between calls (a stale word matches
// the 48-bit tag of a call only by chance, 2^-48). Not for two calls running at once on one workspace.
// weight_only_gemm picks the tile by M and S by the SM count (WeightOnlyArgs::split_k overrides it).
//
// ---- Hopper ----
// On sm_90 with sm_90a code, M > kWeightOnlySm90MinM (16) runs weight_only_sm90_kernel instead
// (weight_only_sm90.cuh: wgmma with the dequantized weights as its register A operand, TMA, persistent,
// split-K over the same workspace where its tiles leave SMs idle) wherever G % 64 == 0, N % 8 == 0 (% 16
// with zero points) and scales / zeros are 16-byte aligned; other shapes keep the mma.sync tiles.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/status.cuh"
#include "llmk/gemm/split_k.cuh"
#include "llmk/gemm/weight_only_args.cuh"
#include "llmk/gemm/weight_only_kernel.cuh"
#include "llmk/gemm/weight_only_layout.cuh"
#include "llmk/gemm/weight_only_sm90.cuh"

namespace llmk::gemm {

namespace detail {

constexpr int kPermuteThreads = 256;

// a_perm[m, k'] = a[m, perm[k']] (row pitch K), 8 elements per thread; a perm entry out
// of [0, K) gives NaN.
template <class T>
__global__ void __launch_bounds__(kPermuteThreads)
    weight_only_permute_kernel(const T* a, std::int64_t lda, const std::int32_t* perm, T* a_perm, int m,
                               int k) {
  const std::int64_t chunks_per_row = k / 8, total = static_cast<std::int64_t>(m) * chunks_per_row;
  for (std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < total;
       c += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = c / chunks_per_row;
    const int k0 = static_cast<int>(c % chunks_per_row) * 8;
    alignas(16) std::uint16_t v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int src = perm[k0 + e];
      v[e] = (src >= 0 && src < k) ? a[row * lda + src].bits : std::uint16_t{0x7FFF};
    }
    std::uint32_t* out = reinterpret_cast<std::uint32_t*>(a_perm + row * k + k0);
    const std::uint32_t* in = reinterpret_cast<const std::uint32_t*>(v);
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = in[e];
  }
}

/// How a call runs: the tile (by M), the split count and the workspace it needs.
struct WoPlan {
  // 0: WeightOnlySmallM<bits>, 1: MediumM, 2: LargeM, 3: the Hopper kernel (weight_only_sm90.cuh)
  int tile = 0;
  int token_tile = 128;  // tile 3: the tokens of a block tile (WeightOnlySm90Config's BT)
  int splits = 1, k_tiles_per_split = 1, m_tiles = 1, n_tiles = 1;
  std::size_t perm_bytes = 0, arrival_bytes = 0, partial_bytes = 0;
  std::size_t workspace_bytes() const { return perm_bytes + arrival_bytes + partial_bytes; }
};

// Blocks of a tile one SM holds at once: by registers (65536 an SM; ptxas gives the 128-thread small tiles
// 119-154 registers: 3 blocks, the medium one 164-180: 2, the 256-thread large one more than 128: 1) and by
// shared memory (the staged ring, the larger one, plus the 1 KiB an SM reserves per block): an sm_89 (100
// KiB an SM) holds one small-tile block, an H100 two of 4-bit codes (77 KiB each) and two of 8-bit (84).
template <class Cfg>
int wo_blocks_per_sm(int bits) {
  const int by_registers = Cfg::kThreads >= 256 ? 1 : (Cfg::BM <= 16 ? 3 : 2);
  const int smem = static_cast<int>(bits == 4 ? sizeof(typename Cfg::template SharedStorage<4, true>)
                                              : sizeof(typename Cfg::template SharedStorage<8, true>)) +
                   1024;
  return max(1, min(by_registers, device_smem_per_sm() / smem));
}

// The split plan's common tail (split_k_plan_of): clamped, no empty split, and the workspace.
inline void wo_apply_splits(WoPlan& plan, long long want, int k_tiles, int m, int n) {
  static_assert(kWeightOnlyMaxSplits == kSplitKMaxSplits, "the weight-only GEMM shares split_k.cuh's limit");
  const QGemmSplitPlan s =
      split_k_plan_of(want, static_cast<long long>(plan.m_tiles) * plan.n_tiles, k_tiles, m, n);
  plan.splits = s.splits;
  plan.k_tiles_per_split = s.k_tiles_per_split;
  plan.arrival_bytes = s.arrival_bytes;
  plan.partial_bytes = s.partial_bytes;
}

template <class Cfg>
void wo_plan_tiles(WoPlan& plan, int m, int n, int k, int bits, int split_k, int sms) {
  plan.m_tiles = ceil_div(m, Cfg::BM);
  plan.n_tiles = ceil_div(n, Cfg::BN);
  const int k_tiles = ceil_div(k, Cfg::BK);
  const long long tiles = static_cast<long long>(plan.m_tiles) * plan.n_tiles;
  int want = split_k;
  if (want == 0) {
    // As many splits as one wave of resident blocks holds (more warps an SM: more weight bytes in flight;
    // never a second, partial wave); at least 2 slices a split, and the partials' traffic (S x M x N x 4
    // bytes, written and read: mostly L2) at most twice the weights' (N x K x bits / 8).
    const long long resident = static_cast<long long>(wo_blocks_per_sm<Cfg>(bits)) * sms;
    want = static_cast<int>(max<long long>(1, resident / tiles));
    want = min(want, max(1, k_tiles / 2));
    const long long by_traffic = (static_cast<long long>(k) * bits) / (32LL * m);
    want = static_cast<int>(min<long long>(want, max<long long>(1, by_traffic)));
  }
  wo_apply_splits(plan, want, k_tiles, m, n);
}

// Whether the Hopper kernel can run `x` here: the shape (weight_only_sm90_shape_ok), an sm_90 device and
// sm_90a code.
template <class T>
bool weight_only_sm90_runnable(const WeightOnlyArgs<T>& x) {
  return weight_only_sm90_shape_ok(x) && device_arch() == 900 && sm90a_runnable<WeightOnlySm90Config<>>();
}

// The Hopper kernel's split count (one block an SM, persistent). Its time goes as rounds x slices a unit
// (measured on an H100 at M = 256: about 0.3 us a 64-wide slice of a 64-token tile whatever N and K), so S
// is split_k_rounds_splits' (one wave where tiles < SMs, a trimmed last wave where tiles > SMs), at most K /
// 128 (2 slices a split), K bits / (32 M) (the partials' traffic at most twice the weights', the rule of
// wo_plan_tiles) and 16.
inline void wo_sm90_plan_splits(WoPlan& plan, int m, int n, int k, int bits, int split_k, int sms) {
  const int k_tiles = k / WeightOnlySm90Config<>::kBK;  // K % 64 == 0 here
  const long long tiles = static_cast<long long>(plan.m_tiles) * plan.n_tiles;
  int want = split_k;
  if (want == 0) {
    const long long by_traffic = (static_cast<long long>(k) * bits) / (32LL * m);
    const int most = static_cast<int>(
        min<long long>(min(kWeightOnlyMaxSplits, max(1, k_tiles / 2)), max<long long>(1, by_traffic)));
    want = split_k_rounds_splits(tiles, k_tiles, most, sms);
  }
  wo_apply_splits(plan, want, k_tiles, m, n);
}

template <class T>
WoPlan wo_plan(const WeightOnlyArgs<T>& x, int sms) {
  WoPlan plan;
  plan.tile = x.m <= 16 ? 0 : (x.m <= 128 ? 1 : 2);  // up to 128: 8.6 vs 12 instructions per mma
  const bool hopper = x.kernel == WeightOnlyKernel::kHopper ||
                      (x.kernel == WeightOnlyKernel::kAuto && x.m > kWeightOnlySm90MinM);
  if (hopper && weight_only_sm90_runnable(x)) {
    plan.tile = 3;
    plan.token_tile = wo_sm90_token_tile(x.m, x.n, sms);
    plan.m_tiles = ceil_div(x.m, plan.token_tile);
    plan.n_tiles = ceil_div(x.n, WeightOnlySm90Config<>::kBN);
    wo_sm90_plan_splits(plan, x.m, x.n, x.k, x.bits, x.split_k, sms);
  } else if (plan.tile == 0) {
    if (x.bits == 4)
      wo_plan_tiles<WeightOnlySmallM<4>>(plan, x.m, x.n, x.k, x.bits, x.split_k, sms);
    else
      wo_plan_tiles<WeightOnlySmallM<8>>(plan, x.m, x.n, x.k, x.bits, x.split_k, sms);
  } else if (plan.tile == 1)
    wo_plan_tiles<WeightOnlyMediumM>(plan, x.m, x.n, x.k, x.bits, x.split_k, sms);
  else
    wo_plan_tiles<WeightOnlyLargeM>(plan, x.m, x.n, x.k, x.bits, x.split_k, sms);
  if (x.perm != nullptr) plan.perm_bytes = round_up_256(static_cast<std::size_t>(x.m) * x.k * sizeof(T));
  return plan;
}

template <class T, int kBits, class Cfg, bool kStagedQuant = false>
Status launch_weight_only(const WeightOnlyKernelParams<T>& p, const WoPlan& plan, cudaStream_t stream) {
  if (plan.m_tiles > 65535)
    return Status::invalid_argument(
        "m", str_cat("must be <= ", 65535LL * Cfg::BM, " for this tile (BM=", Cfg::BM, ")"));
  return launch(weight_only_gemm_kernel<T, kBits, Cfg, kStagedQuant>,
                dim3(static_cast<unsigned>(plan.n_tiles), static_cast<unsigned>(plan.m_tiles),
                     static_cast<unsigned>(plan.splits)),
                dim3(Cfg::kThreads), sizeof(typename Cfg::template SharedStorage<kBits, kStagedQuant>),
                stream, p);
}

/// Whether the scales and zero points can travel through the cp.async ring (16-byte chunks of a group row):
/// N % 8 == 0 (N % 16 == 0 with zero points), 16-byte aligned scales / zeros, and G % 64 == 0 (a warp's run
/// of 4 k16 steps then lies in one group, a run of 8 in at most two, split at its middle). Every layer of the
/// common models qualifies (N = 4096, 11008, 14336, ..., G = 64, 128 or per-channel with K % 64 == 0); other
/// shapes load them from global memory when a lane's group changes.
template <class T>
bool weight_only_staged_quant(const WeightOnlyKernelParams<T>& p) {
  return wo_quant_rows_copyable(p.group.divisor, p.n, p.scales, p.zeros);
}

template <class T, int kBits>
Status dispatch_weight_only(const WeightOnlyKernelParams<T>& p, const WoPlan& plan, cudaStream_t stream) {
  const bool staged = weight_only_staged_quant(p);
  if (plan.tile == 0)
    return staged ? launch_weight_only<T, kBits, WeightOnlySmallM<kBits>, true>(p, plan, stream)
                  : launch_weight_only<T, kBits, WeightOnlySmallM<kBits>>(p, plan, stream);
  if (plan.tile == 1)
    return staged ? launch_weight_only<T, kBits, WeightOnlyMediumM, true>(p, plan, stream)
                  : launch_weight_only<T, kBits, WeightOnlyMediumM>(p, plan, stream);
  return launch_weight_only<T, kBits, WeightOnlyLargeM>(p, plan, stream);
}

}  // namespace detail

/// Workspace weight_only_gemm needs (16-byte aligned; no initialization): with act-order (perm non-null) the
/// permuted copy of A (M * K * sizeof(T), rounded up to 256), and with split-K (more than one split: M small
/// next to the SM count, or split_k > 1) the arrival words and the fp32 partials (splits * M * round_up(N, 4)
/// * 4). 0 when neither applies (e.g. split_k = 1 and no perm). Depends on the current device (its SM count
/// when split_k = 0; on Hopper, M > 16 takes the wgmma kernel, with its own split plan, only for G % 64 ==
/// 0, aligned scales / zeros and N % 8 or 16): query with the call's own arguments (pointers, group_size,
/// zeros), not placeholders.
///   std::size_t bytes = llmk::gemm::weight_only_workspace_bytes(args);
template <class T>
std::size_t weight_only_workspace_bytes(const WeightOnlyArgs<T>& args) {
  if (args.m < 1 || args.n < 1 || args.k < 1 || args.split_k < 0) return 0;
  return detail::wo_plan(args, device_sm_count()).workspace_bytes();
}

/// Validates `args` as weight_only_gemm does, without launching (Status::invalid_argument naming the
/// argument): the Requirements listed at weight_only_gemm, the workspace included (null, not 16-byte aligned
/// or smaller than weight_only_workspace_bytes(args) when the call needs one). Reads the current device.
///
///   // at model load, once per layer: fail early rather than at the first forward pass
///   LLMK_RETURN_IF_ERROR(llmk::gemm::weight_only_validate(x, d_workspace, workspace_bytes));
template <class T>
Status weight_only_validate(const WeightOnlyArgs<T>& x, const void* workspace, std::size_t workspace_bytes);

namespace detail {
// weight_only_validate, giving the plan it checked the workspace against (*plan, when ok): weight_only_gemm
// runs that plan rather than making it twice.
template <class T>
Status weight_only_validate_plan(const WeightOnlyArgs<T>& x, const void* workspace,
                                 std::size_t workspace_bytes, WoPlan* planned) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>,
                "T must be llmk::half or llmk::bfloat16");
  auto misaligned = [](const void* ptr, std::size_t bytes) {
    return reinterpret_cast<std::uintptr_t>(ptr) % bytes != 0;
  };
  if (x.a == nullptr) return Status::invalid_argument("a", "must not be null");
  if (x.w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (x.scales == nullptr) return Status::invalid_argument("scales", "must not be null");
  if (x.d == nullptr) return Status::invalid_argument("d", "must not be null");
  if (x.bits != 4 && x.bits != 8)
    return Status::invalid_argument("bits", str_cat("must be 4 or 8, got ", x.bits));
  if (x.m < 1) return Status::invalid_argument("m", str_cat("must be >= 1, got ", x.m));
  if (x.n < 1) return Status::invalid_argument("n", str_cat("must be >= 1, got ", x.n));
  if (x.n > (1 << 30)) return Status::invalid_argument("n", str_cat("must be <= 2^30, got ", x.n));
  if (x.k > (1 << 30)) return Status::invalid_argument("k", str_cat("must be <= 2^30, got ", x.k));
  if (x.k < 1 || x.k % 16 != 0)
    return Status::invalid_argument(
        "k", str_cat("must be a positive multiple of 16 (the mma K; pad K with zero columns), got ", x.k));
  if (x.group_size < 16 || x.group_size % 16 != 0 || x.k % x.group_size != 0)
    return Status::invalid_argument("group_size",
                                    str_cat("must be a multiple of 16 that divides K (K=", x.k,
                                            ", group_size=", x.group_size, "); per-channel: K"));
  if (x.split_k < 0 || x.split_k > kWeightOnlyMaxSplits)
    return Status::invalid_argument("split_k",
                                    str_cat("must be in [0, ", kWeightOnlyMaxSplits,
                                            "] (0: by the SM count, 1: no split), got ", x.split_k));
  if (x.lda < x.k || x.lda % 8 != 0)
    return Status::invalid_argument(
        "lda", str_cat("must be >= K and a multiple of 8 (K=", x.k, ", lda=", x.lda, ")"));
  if (x.ldd < x.n)
    return Status::invalid_argument("ldd", str_cat("must be >= N (N=", x.n, ", ldd=", x.ldd, ")"));
  if (misaligned(x.a, 16)) return Status::invalid_argument("a", "must be 16-byte aligned");
  if (misaligned(x.w, 16)) return Status::invalid_argument("w", "must be 16-byte aligned");
  if (misaligned(x.scales, sizeof(T)))
    return Status::invalid_argument("scales", "must be aligned to its element");
  if (misaligned(x.d, sizeof(T))) return Status::invalid_argument("d", "must be aligned to its element");
  if (x.bias != nullptr && misaligned(x.bias, sizeof(T)))
    return Status::invalid_argument("bias", "must be aligned to its element");
  const std::int64_t packed = static_cast<std::int64_t>(weight_only_packed_bytes(x.n, x.k, x.bits));
  if (x.w_bytes != packed)
    return Status::invalid_argument(
        "w_bytes", str_cat("must equal weight_only_packed_bytes(N, K, bits) = ", packed, " (N=", x.n,
                           ", K=", x.k, ", bits=", x.bits, "), got ", x.w_bytes));
  const std::int64_t quant_count = static_cast<std::int64_t>(x.k / x.group_size) * x.n;
  if (x.scales_size != quant_count)
    return Status::invalid_argument(
        "scales_size", str_cat("must equal (K / group_size) * N = ", quant_count, " (K=", x.k,
                               ", group_size=", x.group_size, ", N=", x.n, "), got ", x.scales_size));
  if (x.zeros != nullptr && x.zeros_size != quant_count)
    return Status::invalid_argument(
        "zeros_size", str_cat("must equal (K / group_size) * N = ", quant_count, ", got ", x.zeros_size));
  if (x.perm != nullptr) {
    if (x.perm_size != x.k)
      return Status::invalid_argument("perm_size", str_cat("must equal K = ", x.k, ", got ", x.perm_size));
    if (misaligned(x.perm, sizeof(std::int32_t)))
      return Status::invalid_argument("perm",
                                      "must be aligned to its element (4 bytes: it is read as int32)");
  }
  if (x.kernel != WeightOnlyKernel::kAuto && x.kernel != WeightOnlyKernel::kMmaSync &&
      x.kernel != WeightOnlyKernel::kHopper)
    return Status::invalid_argument("kernel", "must be kAuto, kMmaSync or kHopper");
  if (x.kernel == WeightOnlyKernel::kHopper && !detail::weight_only_sm90_runnable(x))
    return Status::invalid_argument(
        "kernel",
        str_cat("kHopper needs an sm_90 device, sm_90a code in the build, group_size % 64 == 0, N % 8 "
                "== 0 (N % 16 with zero points) and 16-byte aligned scales / zeros (device sm_",
                device_arch() / 10, ", group_size=", x.group_size, ", N=", x.n, ")"));
  if (ceil_div<long long>(x.m, WeightOnlyLargeM::BM) > 65535)
    return Status::invalid_argument("m", str_cat("must be <= ", 65535LL * WeightOnlyLargeM::BM));
  const WoPlan plan = wo_plan(x, device_sm_count());
  const std::size_t need = plan.workspace_bytes();
  if (need > 0) {
    const char* why =
        x.perm != nullptr ? (plan.splits > 1 ? "act-order and split-K" : "act-order") : "split-K";
    if (workspace == nullptr)
      return Status::invalid_argument(
          "workspace", str_cat("must not be null: ", why, " needs ", need,
                               " bytes (weight_only_workspace_bytes; split_k = 1 needs none without perm)"));
    if (misaligned(workspace, 16)) return Status::invalid_argument("workspace", "must be 16-byte aligned");
    if (workspace_bytes < need)
      return Status::invalid_argument(
          "workspace_bytes",
          str_cat("must be >= weight_only_workspace_bytes = ", need, " (", why, "), got ", workspace_bytes));
  }
  *planned = plan;
  return {};
}
}  // namespace detail

template <class T>
Status weight_only_validate(const WeightOnlyArgs<T>& x, const void* workspace, std::size_t workspace_bytes) {
  detail::WoPlan plan;
  return detail::weight_only_validate_plan(x, workspace, workspace_bytes, &plan);
}

/// D = A * dequant(W)^T (+ bias): W4A16 / W8A16 with group-wise (or per-channel) scales, optional zero
/// points, optional GPTQ act-order and split-K. T = llmk::half or llmk::bfloat16. The tile is chosen by M
/// (WeightOnlySmallM / MediumM / LargeM; on Hopper the wgmma kernel for M > 16) and the split count by the
/// SM count (args.split_k = 0) or given (split_k = 1: none; s: at most s); args.kernel = kMmaSync / kHopper
/// forces one family (kHopper where it cannot run is an error naming `kernel`). With act-order (args.perm), A
/// is first gathered into the workspace (a second launch on the same stream). The workspace
/// (weight_only_workspace_bytes(args) bytes, 16-byte aligned, no initialization) also holds the split-K
/// partials; one workspace serves one call at a time. Results are deterministic for a given split count (the
/// splits are summed in a fixed order).
///
/// Requirements (each violation returns Status::invalid_argument naming the argument): a, w, scales, d
/// non-null; bits 4 or 8; M, N >= 1; K a positive multiple of 16; group_size a multiple of 16 dividing K;
/// split_k in [0, kWeightOnlyMaxSplits]; lda >= K, lda % 8 == 0; ldd >= N; a, w 16-byte aligned, scales, d,
/// bias, perm element-aligned; w_bytes == weight_only_packed_bytes(N, K, bits); scales_size (and zeros_size
/// with zeros) == (K / G) * N; perm_size == K with perm; a large enough workspace when one is needed; kernel
/// one of kAuto, kMmaSync, kHopper, and kHopper only where the Hopper kernel can run. M and N
/// need not be multiples of any tile.
///
///   // offline: repack (and, with act-order, the permutation)
///   std::vector<std::int32_t> perm(K);
///   llmk::gemm::act_order_permutation_host(g_idx.data(), K, G, perm.data());
///   llmk::gemm::WeightRepackArgs r{w_plain.data(), K / 2, perm.data(), packed.data(), N, K, 4, false};
///   llmk::gemm::weight_only_repack_host(r);   // upload packed, scales [K/G, N], zeros, perm
///   // per call
///   llmk::gemm::WeightOnlyArgs<llmk::half> x;
///   x.a = d_a; x.lda = K; x.w = d_packed; x.w_bytes = packed.size();
///   x.scales = d_scales; x.scales_size = (K / G) * N; x.zeros = d_zeros; x.zeros_size = (K / G) * N;
///   x.perm = d_perm; x.perm_size = K; x.d = d_out; x.ldd = N; x.m = M; x.n = N; x.k = K;
///   x.group_size = G; x.bits = 4;
///   // The size is not monotonic in M (decode splits K, prefill does not): allocate the largest over the Ms
///   // you will run, or query per call.
///   std::size_t ws = llmk::gemm::weight_only_workspace_bytes(x);
///   llmk::Status s = llmk::gemm::weight_only_gemm(x, d_workspace, ws, stream);
template <class T>
Status weight_only_gemm(const WeightOnlyArgs<T>& x, void* workspace, std::size_t workspace_bytes,
                        cudaStream_t stream) {
  detail::WoPlan plan;
  if (Status s = detail::weight_only_validate_plan(x, workspace, workspace_bytes, &plan); !s.ok()) return s;
  auto* base = static_cast<unsigned char*>(workspace);
  const T* a = x.a;
  std::int64_t lda = x.lda;
  if (x.perm != nullptr) {
    T* a_perm = reinterpret_cast<T*>(base);
    const std::int64_t total = static_cast<std::int64_t>(x.m) * (x.k / 8);
    const std::int64_t blocks =
        min<std::int64_t>(ceil_div<std::int64_t>(total, detail::kPermuteThreads), 65535);
    if (Status s = launch(detail::weight_only_permute_kernel<T>, dim3(static_cast<unsigned>(blocks)),
                          dim3(detail::kPermuteThreads), 0, stream, x.a, x.lda, x.perm, a_perm, x.m, x.k);
        !s.ok())
      return s;
    a = a_perm;
    lda = x.k;
  }
  if (plan.tile == 3) {
    detail::SplitKArgs<float> split;
    split.k_tiles_per_split = plan.k_tiles_per_split;
    split.ldp = detail::split_k_pitch(x.n);
    if (plan.splits > 1) {
      split.arrivals = reinterpret_cast<unsigned long long*>(base + plan.perm_bytes);
      split.partials = reinterpret_cast<float*>(base + plan.perm_bytes + plan.arrival_bytes);
      split.tag = detail::split_k_next_tag();
    }
    return detail::dispatch_weight_only_sm90(x, a, lda, plan.token_tile, plan.splits, split, stream);
  }
  detail::WeightOnlyKernelParams<T> p{a,
                                      lda,
                                      static_cast<const std::uint8_t*>(x.w),
                                      x.scales,
                                      x.zeros,
                                      x.bias,
                                      x.d,
                                      x.ldd,
                                      x.m,
                                      x.n,
                                      x.k,
                                      FastDivisor(static_cast<std::uint32_t>(x.group_size)),
                                      reinterpret_cast<std::uintptr_t>(x.d) % 4 == 0 && x.ldd % 2 == 0,
                                      plan.k_tiles_per_split,
                                      nullptr,
                                      detail::split_k_pitch(x.n),
                                      nullptr,
                                      0ull};
  if (plan.splits > 1) {
    p.arrivals = reinterpret_cast<unsigned long long*>(base + plan.perm_bytes);
    p.partials = reinterpret_cast<float*>(base + plan.perm_bytes + plan.arrival_bytes);
    p.tag = detail::split_k_next_tag();
  }
  return x.bits == 4 ? detail::dispatch_weight_only<T, 4>(p, plan, stream)
                     : detail::dispatch_weight_only<T, 8>(p, plan, stream);
}

}  // namespace llmk::gemm
