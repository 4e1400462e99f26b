// llmk/gemm/weight_only.cuh: weight-only quantized GEMM (W4A16 and W8A16) with group-wise or per-channel
// scales, optional zero points and GPTQ act-order.
//
//   D[M, N] = A[M, K] * dequant(W)[N, K]^T (+ bias[N])
//   dequant(W)[n, k] = T(s[k / G, n] * (u[n, k] - z[k / G, n]))       (one rounding to T, see below)
//
// A is T = llmk::half or llmk::bfloat16, row-major [M, K] (K contiguous); D, scales and bias are T as well.
// W holds UNSIGNED codes u of `bits` = 4 or 8 bits; zero points z are uint8 codes (absent: z = 8 for 4-bit,
// z = 128 for 8-bit, the symmetric case). Signed symmetric codes q in [-8, 7] / [-128, 127] are the unsigned
// codes u = q + 8 / q + 128 with the default zero point: pass `signed_codes = true` to the repack and it
// flips the sign bit of every code (u = q ^ 8, q ^ 0x80), which is exactly that.
// Scales and zero points are row-major [K / G, N] (GPTQ's layout): group g of column n at [g * N + n].
// G is any multiple of 16 that divides K (32, 64, 128, ...; G = K is per-channel).
//
// Rounding: the kernel forms u - z exactly and rounds s * (u - z) once to T (RN), the value the mma consumes
// (in packed f16x2 / bf16x2 arithmetic, or in fp32 for bf16 with 8-bit codes: see wo_dequant_pair). The host
// reference (llmk/reference/weight_only.hpp) dequantizes the same way and accumulates in fp64; the kernel
// accumulates in fp32 on tensor cores (mma.m16n8k16 with fp32 accumulators) and rounds the output once to T.
//
// ---- The kernel's weight layout ("packed", produced by weight_only_repack) ----
// N is padded to N16 = ceil(N / 16) * 16 (padding columns hold code 0 and are never stored); K % 16 == 0.
// The weights are cut into tiles of 16 columns (n) x 16 K elements, tile (nt, kt) = columns 16 nt..,
// k 16 kt.., stored in the order  tile index = nt * (K / 16) + kt,  each tile 32 * bits bytes (128 B for
// 4-bit, 256 B for 8-bit): 32 lanes x (bits / 4) 32-bit words, lane l's words at byte l * bits of the tile
// (32-bit word l * bits / 4: lane l's 4 bytes at byte 4 l for 4-bit, its 8 bytes at byte 8 l for 8-bit).
// Lane l = 4 g + t (g = l / 4, t = l % 4) holds exactly the codes of its m16n8k16 B fragments for the
// two n8 sub-tiles j = 0, 1 of the tile: column n = 16 nt + 8 j + g, and register r = 0 (k = 2t, 2t + 1) or
// r = 1 (k = 2t + 8, 2t + 9), relative to 16 kt. With h = 0 for the lower k of a pair and 1 for the upper:
//   4-bit: one word; the code of (j, r, h) is the nibble p = (2 j + r) + 4 h (bits 4p .. 4p + 3), so
//          (word >> 4 i) & 0x000F000F is the pair of fragment register r = i % 2 of sub-tile j = i / 2, with
//          the lower k in the low half, as the mma wants it.
//   8-bit: two words w_j (j = sub-tile); the code of (r, h) is byte r + 2 h of w_j, so
//          (w_j >> 8 r) & 0x00FF00FF is the pair of fragment register r of sub-tile j.
// A warp reads one tile with one conflict-free 32-bit (4-bit) or two 32-bit (8-bit) shared loads per lane,
// and the 16 columns of a tile row for a BK slice are contiguous in global memory, so blocks stream their W
// tiles with 16-byte cp.async copies.
//
// Dequantization (registers, a bit trick): (code | 0x4B000000) as an fp32 is 2^23 + u exactly; subtract
// (2^23 + z) (exact), multiply by s (exact: at most 11 + 8 significant bits), and round the pair once to T2
// with cvt.rn.{f16x2,bf16x2}.f32: T(s * (u - z)) bit for bit, for both T and both widths, and the same
// instructions in the simulator. Per pair of codes: shift + and/or (lop3), 2 fadd, 2 fmul, 1 cvt. (The half2
// variant, (u | 0x6400) as half = 1024 + u then sub.f16x2 + mul.f16x2, needs 2 instead of 4 float ops per
// pair but needs f16x2/bf16x2 arithmetic atoms that arch/ does not have yet; cuda_fp16.h's __hsub2 / __hmul2
// are inline PTX, which the simulator cannot run.)
//
// ---- GPTQ act-order ----
// With a per-K-column group index g_idx[K] (each group exactly G columns, any order), act_order_permutation
// sorts K by g_idx (stable) into perm[K] (perm[k'] = the original column at sorted position k'), the repack
// gathers W's columns by perm (so groups are contiguous and group(k') = k' / G), and the GEMM gathers A's
// columns by the same perm into caller-owned workspace (weight_only_workspace_bytes) before the main kernel.
//
// ---- Tiles ----
// WeightOnlyConfig<BM, BN, BK, WarpsM, WarpsN, WarpsK, Stages>: a block computes a BM x BN tile of D and
// streams BK slices of A (cp.async into padded rows, ldmatrix) and of the packed W tiles (cp.async) through a
// Stages-deep ring; WarpsM x WarpsN warps split the tile, WarpsK warps split each slice's k16 steps (summed
// through shared memory at the end: the decode config uses it, so a block of 4 warps covers only 32 columns
// and the grid has N / 32 blocks). weight_only_gemm picks by M: M <= 16 (decode), M <= 64, larger.
// M, N are arbitrary (predicated); K % 16 == 0 (a partial last BK slice is predicated).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "llmk/arch/convert.cuh"
#include "llmk/arch/cp_async.cuh"
#include "llmk/arch/ldmatrix.cuh"
#include "llmk/arch/mma.cuh"
#include "llmk/arch/mma_f32.cuh"
#include "llmk/arch/packed_math.cuh"
#include "llmk/config.cuh"
#include "llmk/core/device_algorithms.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"

namespace llmk::gemm {

// ---- layout ----

/// Bytes of the packed (kernel-layout) weights for N x K codes of `bits` bits: ceil(N / 16) * 16 * K * bits
/// / 8.
///   std::size_t bytes = llmk::gemm::weight_only_packed_bytes(4096, 4096, 4);   // 8 MiB
inline std::size_t weight_only_packed_bytes(int n, int k, int bits) {
  const std::size_t n16 = static_cast<std::size_t>((n + 15) / 16);
  return n16 * 16 * static_cast<std::size_t>(k) * static_cast<std::size_t>(bits) / 8;
}

/// Where code (n, k) lives in the packed layout: byte offset and bit shift (0 or 4 for 4-bit, 0 for 8-bit).
/// The layout is documented at the top of this file.
///   auto [byte, shift] = llmk::gemm::weight_only_code_position(n, k, K, 4);
struct CodePosition {
  std::int64_t byte;
  int shift;
};
LLMK_HOST_DEVICE CodePosition weight_only_code_position(int n, int k, int k_total, int bits) {
  const std::int64_t tile = static_cast<std::int64_t>(n / 16) * (k_total / 16) + k / 16;
  const int nn = n % 16, kk = k % 16;
  const int j = nn / 8, g = nn % 8, r = kk / 8, t = (kk % 8) / 2, h = kk % 2;
  const int lane = 4 * g + t;
  if (bits == 4) {
    const int p = (2 * j + r) + 4 * h;  // nibble within the lane's word
    return {tile * 128 + lane * 4 + p / 2, 4 * (p % 2)};
  }
  return {tile * 256 + lane * 8 + 4 * j + r + 2 * h, 0};
}

namespace detail {

// Code (n, k) of the plain row-major input: 4-bit = pack_int4 order (element 2i in the low nibble), 8-bit =
// bytes.
LLMK_HOST_DEVICE std::uint32_t wo_plain_code(const std::uint8_t* w, std::int64_t ld_bytes, int n, int k,
                                             int bits) {
  const std::uint8_t* row = w + static_cast<std::int64_t>(n) * ld_bytes;
  if (bits == 4) return (static_cast<std::uint32_t>(row[k / 2]) >> (4 * (k % 2))) & 0xFu;
  return row[k];
}

}  // namespace detail

/// Arguments of the offline repack from the plain row-major format to the kernel layout.
struct WeightRepackArgs {
  const void* w;          // plain [N, K]: 4-bit two codes a byte (llmk::quant::pack_int4 order), 8-bit bytes
  std::int64_t ld_bytes;  // bytes between rows of w: >= ceil(K / 2) (4-bit) or >= K (8-bit)
  const std::int32_t* perm;  // [K] act-order permutation (packed column k takes w's column perm[k]) or null;
                             // 4-byte aligned
  void* packed;              // weight_only_packed_bytes(n, k, bits) bytes (device: 4-byte aligned)
  int n, k, bits;
  bool signed_codes;  // w holds two's-complement codes q: stored as u = q + 8 (4-bit) / q + 128 (8-bit)
};

namespace detail {

inline Status validate_repack(const WeightRepackArgs& r) {
  if (r.w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (r.packed == nullptr) return Status::invalid_argument("packed", "must not be null");
  if (r.bits != 4 && r.bits != 8)
    return Status::invalid_argument("bits", str_cat("must be 4 or 8, got ", r.bits));
  if (r.n < 1) return Status::invalid_argument("n", str_cat("must be >= 1, got ", r.n));
  if (r.k < 16 || r.k % 16 != 0)
    return Status::invalid_argument("k", str_cat("must be a positive multiple of 16 (the mma K), got ", r.k));
  const std::int64_t row_bytes = r.bits == 4 ? (r.k + 1) / 2 : r.k;
  if (r.ld_bytes < row_bytes)
    return Status::invalid_argument(
        "ld_bytes", str_cat("must be >= ", row_bytes, " (K=", r.k, ", bits=", r.bits, "), got ", r.ld_bytes));
  if (r.perm != nullptr && reinterpret_cast<std::uintptr_t>(r.perm) % 4 != 0)
    return Status::invalid_argument("perm", "must be 4-byte aligned (it is read as int32)");
  return {};
}

constexpr int kRepackThreads = 256;

// One thread per 32-bit word of the packed layout: gathers the 8 (4-bit) or 4 (8-bit) codes of the word.
template <class Unused = void>
__global__ void __launch_bounds__(kRepackThreads) weight_only_repack_kernel(WeightRepackArgs r) {
  const int k16 = r.k / 16;
  const std::int64_t words = static_cast<std::int64_t>((r.n + 15) / 16) * k16 * 8 * r.bits;
  const std::uint8_t* w = static_cast<const std::uint8_t*>(r.w);
  std::uint32_t* out = static_cast<std::uint32_t*>(r.packed);
  const std::uint32_t flip = r.signed_codes ? (r.bits == 4 ? 0x8u : 0x80u) : 0u;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int words_per_tile = 8 * r.bits;  // 32 lanes x bits / 4 words: 32 (4-bit) or 64 (8-bit)
    const std::int64_t tile = i / words_per_tile;
    const int in_tile = static_cast<int>(i % words_per_tile);
    const int nt = static_cast<int>(tile / k16), kt = static_cast<int>(tile % k16);
    const int lane = r.bits == 4 ? in_tile : in_tile / 2;
    const int g = lane / 4, t = lane % 4;
    std::uint32_t word = 0;
    const int fields = 32 / r.bits;
    for (int f = 0; f < fields; ++f) {
      int j, rr, h;
      if (r.bits == 4) {
        const int i4 = f % 4;
        h = f / 4;
        j = i4 / 2;
        rr = i4 % 2;
      } else {
        j = in_tile % 2;
        rr = f % 2;
        h = f / 2;
      }
      const int n = 16 * nt + 8 * j + g, k = 16 * kt + 2 * t + 8 * rr + h;
      std::uint32_t code = 0;
      if (n < r.n) {
        const int src_k = r.perm != nullptr ? r.perm[k] : k;
        // A perm entry outside [0, K) (act_order_permutation marks a malformed g_idx with -1) reads nothing
        // and yields code 0 instead of an out-of-bounds read.
        if (src_k >= 0 && src_k < r.k) code = wo_plain_code(w, r.ld_bytes, n, src_k, r.bits) ^ flip;
      }
      word |= code << (r.bits * f);
    }
    out[i] = word;
  }
}

}  // namespace detail

/// Repacks plain row-major weights into the kernel layout on the host (both pointers host memory). Gives the
/// same bytes as weight_only_repack. perm (host, [K]) entries must be in [0, K).
///   std::vector<std::uint8_t> packed(llmk::gemm::weight_only_packed_bytes(N, K, 4));
///   llmk::gemm::WeightRepackArgs r{w_plain.data(), (K + 1) / 2, nullptr, packed.data(), N, K, 4, false};
///   llmk::Status s = llmk::gemm::weight_only_repack_host(r);
inline Status weight_only_repack_host(const WeightRepackArgs& r) {
  if (Status s = detail::validate_repack(r); !s.ok()) return s;
  const std::uint8_t* w = static_cast<const std::uint8_t*>(r.w);
  std::uint8_t* out = static_cast<std::uint8_t*>(r.packed);
  const std::size_t bytes = weight_only_packed_bytes(r.n, r.k, r.bits);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = 0;  // padding columns: code 0
  if (r.perm != nullptr)
    for (int k = 0; k < r.k; ++k)
      if (r.perm[k] < 0 || r.perm[k] >= r.k)
        return Status::invalid_argument("perm",
                                        str_cat("entries must be in [0, K), perm[", k, "] = ", r.perm[k]));
  const std::uint32_t flip = r.signed_codes ? (r.bits == 4 ? 0x8u : 0x80u) : 0u;
  for (int n = 0; n < r.n; ++n)
    for (int k = 0; k < r.k; ++k) {
      const int src_k = r.perm != nullptr ? r.perm[k] : k;
      const std::uint32_t code = detail::wo_plain_code(w, r.ld_bytes, n, src_k, r.bits) ^ flip;
      const CodePosition pos = weight_only_code_position(n, k, r.k, r.bits);
      out[pos.byte] = static_cast<std::uint8_t>(out[pos.byte] | (code << pos.shift));
    }
  return {};
}

/// Repacks on the device (w, perm, packed: device memory): one launch, one thread per packed 32-bit word.
/// Same bytes as weight_only_repack_host; perm entries must be in [0, K) (not checked on the device).
///   llmk::gemm::WeightRepackArgs r{d_w, (K + 1) / 2, d_perm /* or nullptr */, d_packed, N, K, 4, false};
///   llmk::Status s = llmk::gemm::weight_only_repack(r, stream);
inline Status weight_only_repack(const WeightRepackArgs& r, cudaStream_t stream) {
  if (Status s = detail::validate_repack(r); !s.ok()) return s;
  if (reinterpret_cast<std::uintptr_t>(r.packed) % 4 != 0)
    return Status::invalid_argument("packed", "must be 4-byte aligned (the kernel writes 32-bit words)");
  const std::int64_t words = static_cast<std::int64_t>(weight_only_packed_bytes(r.n, r.k, r.bits) / 4);
  const std::int64_t blocks = min<std::int64_t>(ceil_div<std::int64_t>(words, detail::kRepackThreads), 65535);
  return launch(detail::weight_only_repack_kernel<>, dim3(static_cast<unsigned>(blocks)),
                dim3(detail::kRepackThreads), 0, stream, r);
}

/// Inverse of the repack (host): writes the unsigned codes u (as stored) back in the plain format (4-bit: two
/// a byte, element 2i in the low nibble; 8-bit: bytes), row stride ld_bytes. Columns come out in packed order
/// (after an act-order repack, plain column k holds original column perm[k]).
///   llmk::gemm::weight_only_unpack_host(packed.data(), N, K, 4, plain.data(), (K + 1) / 2);
inline Status weight_only_unpack_host(const void* packed, int n, int k, int bits, void* w,
                                      std::int64_t ld_bytes) {
  if (packed == nullptr) return Status::invalid_argument("packed", "must not be null");
  if (w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (bits != 4 && bits != 8) return Status::invalid_argument("bits", str_cat("must be 4 or 8, got ", bits));
  if (n < 1 || k < 16 || k % 16 != 0)
    return Status::invalid_argument(
        "k", str_cat("n >= 1 and k a positive multiple of 16 needed, got n=", n, " k=", k));
  if (ld_bytes < (bits == 4 ? (k + 1) / 2 : k))
    return Status::invalid_argument("ld_bytes", "must be >= the bytes of one row");
  const std::uint8_t* in = static_cast<const std::uint8_t*>(packed);
  std::uint8_t* out = static_cast<std::uint8_t*>(w);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < k; ++c) {
      const CodePosition pos = weight_only_code_position(r, c, k, bits);
      const std::uint32_t code =
          (static_cast<std::uint32_t>(in[pos.byte]) >> pos.shift) & (bits == 4 ? 0xFu : 0xFFu);
      std::uint8_t& dst = out[static_cast<std::int64_t>(r) * ld_bytes + (bits == 4 ? c / 2 : c)];
      if (bits == 8)
        dst = static_cast<std::uint8_t>(code);
      else if (c % 2 == 0)
        dst = static_cast<std::uint8_t>((dst & 0xF0u) | code);
      else
        dst = static_cast<std::uint8_t>((dst & 0x0Fu) | (code << 4));
    }
  return {};
}

// ---- act-order ----

namespace detail {

inline Status validate_act_order(const std::int32_t* g_idx, int k, int group_size, const std::int32_t* perm) {
  if (g_idx == nullptr) return Status::invalid_argument("g_idx", "must not be null");
  if (perm == nullptr) return Status::invalid_argument("perm", "must not be null");
  if (reinterpret_cast<std::uintptr_t>(g_idx) % 4 != 0)
    return Status::invalid_argument("g_idx", "must be 4-byte aligned (it is read as int32)");
  if (reinterpret_cast<std::uintptr_t>(perm) % 4 != 0)
    return Status::invalid_argument("perm", "must be 4-byte aligned (it is written as int32)");
  if (k < 1) return Status::invalid_argument("k", str_cat("must be >= 1, got ", k));
  if (group_size < 1 || k % group_size != 0)
    return Status::invalid_argument("group_size",
                                    str_cat("must divide K (K=", k, ", group_size=", group_size, ")"));
  return {};
}

// After the stable sort of (g_idx, column): position i must hold a column of group i / G; where a malformed
// g_idx (a group with more or fewer than G columns, an entry outside [0, K / G)) breaks that, perm[i] = -1.
template <class Unused = void>
__global__ void __launch_bounds__(256)
    act_order_check_kernel(const std::int32_t* sorted_groups, int k, int group_size, std::int32_t* perm) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < k;
       i += static_cast<int>(gridDim.x * blockDim.x))
    if (sorted_groups[i] != i / group_size) perm[i] = -1;
}

template <class Unused = void>
__global__ void __launch_bounds__(256) act_order_iota_kernel(std::int32_t* out, int k) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < k;
       i += static_cast<int>(gridDim.x * blockDim.x))
    out[i] = i;
}

}  // namespace detail

/// GPTQ act-order on the host: perm[K] = the columns sorted by g_idx, stable (perm[k'] = original column).
/// Requires every group 0 .. K/G - 1 to hold exactly G columns (GPTQ's g_idx does), so that the sorted column
/// k' is in group k' / G.
///   std::vector<std::int32_t> perm(K);
///   llmk::Status s = llmk::gemm::act_order_permutation_host(g_idx.data(), K, 128, perm.data());
inline Status act_order_permutation_host(const std::int32_t* g_idx, int k, int group_size,
                                         std::int32_t* perm) {
  if (Status s = detail::validate_act_order(g_idx, k, group_size, perm); !s.ok()) return s;
  const int groups = k / group_size;
  std::vector<int> count(static_cast<std::size_t>(groups), 0);
  for (int i = 0; i < k; ++i) {
    if (g_idx[i] < 0 || g_idx[i] >= groups)
      return Status::invalid_argument("g_idx", str_cat("entries must be in [0, K / group_size) = [0, ",
                                                       groups, "), g_idx[", i, "] = ", g_idx[i]));
    ++count[static_cast<std::size_t>(g_idx[i])];
  }
  for (int g = 0; g < groups; ++g)
    if (count[static_cast<std::size_t>(g)] != group_size)
      return Status::invalid_argument(
          "g_idx", str_cat("every group must hold exactly group_size = ", group_size, " columns; group ", g,
                           " holds ", count[static_cast<std::size_t>(g)]));
  for (int g = 0; g < groups; ++g) count[static_cast<std::size_t>(g)] = 0;
  for (int i = 0; i < k; ++i) {
    const int g = g_idx[i];
    perm[static_cast<std::int64_t>(g) * group_size + count[static_cast<std::size_t>(g)]++] = i;
  }
  return {};
}

/// The same on the device (g_idx, perm and temp: device memory): one stable radix sort of (g_idx, column)
/// pairs (llmk::device::sort_pairs: CUB on a GPU, Thrust in the simulator) plus a check. Temporary storage in
/// CUB's style: call with temp == nullptr for *temp_bytes, then with that much (16-byte aligned). The device
/// cannot report a malformed g_idx as a Status: every position whose column is not of group k' / G gets -1,
/// so check g_idx on the host (act_order_permutation_host) or look for -1 in perm.
///   std::size_t bytes = 0;
///   llmk::gemm::act_order_permutation(nullptr, &bytes, d_g_idx, K, 128, d_perm, stream);
///   llmk::DeviceBuffer<unsigned char> temp(bytes);
///   llmk::Status s = llmk::gemm::act_order_permutation(temp.data(), &bytes, d_g_idx, K, 128, d_perm,
///   stream);
inline Status act_order_permutation(void* temp, std::size_t* temp_bytes, const std::int32_t* g_idx, int k,
                                    int group_size, std::int32_t* perm, cudaStream_t stream) {
  if (temp_bytes == nullptr) return Status::invalid_argument("temp_bytes", "must not be null");
  if (k < 1) return Status::invalid_argument("k", str_cat("must be >= 1, got ", k));
  // temp: the column indices [k], the sorted groups [k], then the sort's own storage.
  const std::size_t ints = (static_cast<std::size_t>(k) * sizeof(std::int32_t) + 255) / 256 * 256;
  std::size_t sort_bytes = 0;
  LLMK_RETURN_IF_ERROR((llmk::device::sort_pairs<std::int32_t, std::int32_t>(
      nullptr, &sort_bytes, g_idx, nullptr, nullptr, nullptr, k, llmk::device::SortOrder::kAscending,
      stream)));
  const std::size_t need = 2 * ints + sort_bytes;
  if (temp == nullptr) {
    *temp_bytes = need;
    return {};
  }
  if (Status s = detail::validate_act_order(g_idx, k, group_size, perm); !s.ok()) return s;
  if (*temp_bytes < need)
    return Status::invalid_argument(
        "temp_bytes", str_cat("must be >= the size query's ", need, " bytes, got ", *temp_bytes));
  if (reinterpret_cast<std::uintptr_t>(temp) % 16 != 0)
    return Status::invalid_argument("temp", "must be 16-byte aligned");
  auto* base = static_cast<unsigned char*>(temp);
  auto* cols = reinterpret_cast<std::int32_t*>(base);
  auto* sorted_groups = reinterpret_cast<std::int32_t*>(base + ints);
  const dim3 grid(static_cast<unsigned>(std::min(ceil_div(k, 256), 1024)));
  LLMK_RETURN_IF_ERROR(launch(detail::act_order_iota_kernel<>, grid, dim3(256), 0, stream, cols, k));
  LLMK_RETURN_IF_ERROR((llmk::device::sort_pairs<std::int32_t, std::int32_t>(
      base + 2 * ints, &sort_bytes, g_idx, sorted_groups, cols, perm, k, llmk::device::SortOrder::kAscending,
      stream)));
  return launch(detail::act_order_check_kernel<>, grid, dim3(256), 0, stream, sorted_groups, k, group_size,
                perm);
}

// ---- the GEMM ----

/// Tile shape: BM x BN output tile, BK slice of K per stage, WarpsM x WarpsN warps over the tile, WarpsK
/// warps splitting each slice's k16 steps, Stages-deep cp.async ring.
template <int BM_, int BN_, int BK_, int WarpsM_, int WarpsN_, int WarpsK_, int Stages_>
struct WeightOnlyConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WarpsM = WarpsM_, WarpsN = WarpsN_, WarpsK = WarpsK_,
                       Stages = Stages_;
  static constexpr int kThreads = WarpsM * WarpsN * WarpsK * 32;
  static constexpr int WM = BM / WarpsM, WN = BN / WarpsN;
  static constexpr int kMmaM = WM / 16, kMmaN = WN / 8, kTilesN = WN / 16;  // per warp
  static constexpr int kKSteps = BK / 16, kStepsPerWarp = kKSteps / WarpsK;
  static constexpr int kSmemRowA = BK + 8;  // elements; the 16-byte pad spreads ldmatrix rows over banks
  static_assert(BK % 16 == 0, "BK must be a multiple of the mma K (16)");
  static_assert(BM % (16 * WarpsM) == 0, "each warp needs whole m16 tiles: BM % (16 * WarpsM) == 0");
  static_assert(BN % (16 * WarpsN) == 0, "each warp needs whole n16 weight tiles: BN % (16 * WarpsN) == 0");
  static_assert(kKSteps % WarpsK == 0, "the k16 steps of a slice must split evenly: (BK / 16) % WarpsK == 0");
  static_assert(Stages >= 2 && Stages <= 8, "the cp.async ring needs 2..8 stages");
  static_assert(kThreads <= 1024, "at most 1024 threads a block");

  /// Groups of scales / zero points one BK slice can touch (G >= 16, a multiple of 16; slices start at
  /// multiples of BK >= 64): at most BK / 16.
  static constexpr int kQGroups = BK / 16;
  static_assert(BK >= 64, "the staged scales assume at most BK / 16 groups per slice (BK >= 64)");

  /// kStagedQuant: the slice's scales (and zero points) travel through the ring with A and W.
  template <int kBits, bool kStagedQuant = false>
  struct SharedStorage {
    static constexpr int kWordsPerTile = 8 * kBits;  // 32 lanes x bits / 4 words: 32 (4-bit) or 64 (8-bit)
    static constexpr int kWWords = (BN / 16) * kKSteps * kWordsPerTile;
    static constexpr int kRedFloats = WarpsK > 1 ? (WarpsK - 1) * WarpsM* WarpsN * 32 * kMmaM* kMmaN * 4 : 1;
    static constexpr int kQElems = kStagedQuant ? kQGroups * BN : 16;
    alignas(16) std::uint16_t a[Stages][BM * kSmemRowA];
    alignas(16) std::uint32_t w[Stages][kWWords];
    alignas(16) std::uint16_t qs[Stages][kQElems];  // scale bits, [group - first group of the slice][column]
    alignas(16) std::uint8_t qz[Stages][kQElems];   // zero-point codes, same layout
    alignas(16) float red[kRedFloats];
  };
};

/// Decode (M <= 16): 16 x 32 tile, 4 warps splitting each 256-wide K slice (4 KiB of 4-bit weights a stage);
/// N / 32 blocks.
using WeightOnlySmallM = WeightOnlyConfig<16, 32, 256, 1, 1, 4, 4>;
/// 16 < M <= 64: 64 x 64 x 64, 2 x 2 warps, 4 stages.
using WeightOnlyMediumM = WeightOnlyConfig<64, 64, 64, 2, 2, 1, 4>;
/// M > 64: 128 x 128 x 64, 2 x 4 warps (64 x 32 each), 3 stages.
using WeightOnlyLargeM = WeightOnlyConfig<128, 128, 64, 2, 4, 1, 3>;

/// Arguments of weight_only_gemm (T = llmk::half or llmk::bfloat16). Leading dimensions are in elements.
template <class T>
struct WeightOnlyArgs {
  const T* a = nullptr;                 // [M, K] row-major, 16-byte aligned
  std::int64_t lda = 0;                 // >= K, multiple of 8
  const void* w = nullptr;              // packed weights (weight_only_repack), 16-byte aligned
  std::int64_t w_bytes = 0;             // bytes given in w: must equal weight_only_packed_bytes(n, k, bits)
  const T* scales = nullptr;            // [K / G, N] row-major
  std::int64_t scales_size = 0;         // elements given in scales: must equal (K / G) * N
  const std::uint8_t* zeros = nullptr;  // [K / G, N] zero-point codes, or null (z = 8 / 128)
  std::int64_t zeros_size = 0;          // elements given in zeros (when non-null): must equal (K / G) * N
  const std::int32_t* perm = nullptr;   // [K] act-order permutation (4-byte aligned) or null
  std::int64_t perm_size = 0;           // elements given in perm (when non-null): must equal K
  const T* bias = nullptr;              // [N] or null
  T* d = nullptr;                       // [M, N] row-major, ldd >= N
  std::int64_t ldd = 0;
  int m = 0, n = 0, k = 0;
  int group_size = 0;  // G: a multiple of 16 dividing K (G = K: per-channel)
  int bits = 4;        // 4 or 8
};

namespace detail {

template <class T>
struct WeightOnlyKernelParams {
  const T* a;
  std::int64_t lda;
  const std::uint8_t* w;
  const T* scales;
  const std::uint8_t* zeros;
  const T* bias;
  T* d;
  std::int64_t ldd;
  int m, n, k;
  FastDivisor group;
  bool pair_store;  // d and ldd allow 4-byte stores of column pairs
};

// Dequantization of a pair of codes u (bits 0.. and 16.., already masked) to a packed T2 fragment register,
// T(s * (u - z)) with one rounding, in one of two exact forms:
//   packed 16-bit (fp16 with 4- or 8-bit codes, bf16 with 4-bit codes): (magic16 | u) is the 16-bit float M +
//   u
//     exactly (M = 1024 in fp16, 128 in bf16; exact while u < M), minus (M + z) is u - z exactly, times s is
//     the one RN rounding: a lop3, sub.f16x2 and mul.f16x2 per pair (arch/packed_math.cuh);
//   fp32 (bf16 with 8-bit codes, where 128 + 255 is not a bf16): (2^23 + u) - (2^23 + z) is exact, times s is
//     exact (<= 11 + 8 significant bits), one RN cvt to T2.
// Both give the same bits as the reference's T(s * (u - z)).
template <class T, int kBits>
inline constexpr bool kWoPackedDequant = std::is_same_v<T, half> || kBits == 4;

constexpr std::uint32_t kWoMagic = 0x4B000000u;  // fp32 2^23: (code | 0x4B000000) is 2^23 + code, exactly

// The constants of one n8 column of a lane for the current group: s and M + z as packed pairs (packed form),
// or s and 2^23 + z in fp32.
struct WoColumnQuant {
  std::uint32_t s2, z2;
  float sf, zf;
};

template <class T, int kBits>
LLMK_DEVICE WoColumnQuant wo_column_quant(T s, std::uint32_t z) {
  if constexpr (kWoPackedDequant<T, kBits>) {
    const std::uint32_t m = std::is_same_v<T, half> ? 0x6400u : 0x4300u;
    return {std::uint32_t{s.bits} * 0x00010001u, (m | z) * 0x00010001u, 0.0f, 0.0f};
  } else {
    return {0u, 0u, s.to_float(), llmk::detail::bits_to_float(kWoMagic | z)};
  }
}

template <class T, int kBits>
LLMK_DEVICE std::uint32_t wo_dequant_pair(std::uint32_t pair, const WoColumnQuant& q) {
  if constexpr (kWoPackedDequant<T, kBits>) {
    if constexpr (std::is_same_v<T, half>)
      return arch::mul_f16x2(arch::sub_f16x2(pair | 0x64006400u, q.z2), q.s2);
    else
      return arch::mul_bf16x2(arch::sub_bf16x2(pair | 0x43004300u, q.z2), q.s2);
  } else {
    const float lo = (llmk::detail::bits_to_float(kWoMagic | (pair & 0xFFFFu)) - q.zf) * q.sf;
    const float hi = (llmk::detail::bits_to_float(kWoMagic | (pair >> 16)) - q.zf) * q.sf;
    return arch::MmaF32For<T>::pack(lo, hi);
  }
}

template <class T, int kBits>
LLMK_DEVICE WoColumnQuant wo_load_column_quant(const WeightOnlyKernelParams<T>& p, int group, int col) {
  constexpr std::uint32_t kDefaultZero = kBits == 4 ? 8u : 128u;
  T s = T(0.0f);
  std::uint32_t z = kDefaultZero;
  if (col < p.n) {
    const std::int64_t idx = static_cast<std::int64_t>(group) * p.n + col;
    s = p.scales[idx];
    if (p.zeros != nullptr) z = p.zeros[idx];
  }
  return wo_column_quant<T, kBits>(s, z);
}

// The scales (and zero points) of the groups one K slice touches, for the block's BN columns, into the
// stage's qs / qz ([group - first group][column]). Requires N % 8 == 0 (N % 16 == 0 with zero points) and
// 16-byte aligned scales / zeros (weight_only_staged_quant checks it): every 16-byte chunk of a group row is
// then aligned and wholly inside or wholly past column N. Chunks past N or past the last group read nothing
// (zero-filled; those columns are never stored).
template <class Cfg, class T>
LLMK_DEVICE void wo_load_quant(const WeightOnlyKernelParams<T>& p, std::uint16_t* qs, std::uint8_t* qz,
                               int block_n, int k0) {
  constexpr int kScaleChunks = Cfg::BN / 8, kZeroChunks = Cfg::BN / 16;
  constexpr int kPerGroup = kScaleChunks + kZeroChunks, kTotal = Cfg::kQGroups * kPerGroup;
  const int tid = static_cast<int>(threadIdx.x);
  const int g0 = static_cast<int>(p.group.divide(static_cast<std::uint32_t>(k0)));
  const int k_last = min(k0 + Cfg::BK, p.k) - 1;
  const int g_last = static_cast<int>(p.group.divide(static_cast<std::uint32_t>(k_last)));
#pragma unroll
  for (int i = 0; i < (kTotal + Cfg::kThreads - 1) / Cfg::kThreads; ++i) {
    const int c = tid + i * Cfg::kThreads;
    if (c >= kTotal) break;
    const int j = c / kPerGroup, r = c % kPerGroup;
    const std::int64_t row = static_cast<std::int64_t>(g0 + j) * p.n;
    if (r < kScaleChunks) {
      const int col = block_n + r * 8;
      const bool valid = g0 + j <= g_last && col < p.n;
      arch::cp_async_cg16_zfill(qs + j * Cfg::BN + r * 8, valid ? p.scales + row + col : p.scales,
                                valid ? 16 : 0);
    } else {
      const int col = block_n + (r - kScaleChunks) * 16;
      const bool valid = p.zeros != nullptr && g0 + j <= g_last && col < p.n;
      arch::cp_async_cg16_zfill(qz + j * Cfg::BN + (r - kScaleChunks) * 16,
                                valid ? p.zeros + row + col : (p.zeros != nullptr ? p.zeros : p.w),
                                valid ? 16 : 0);
    }
  }
}

// Copies of one K slice of A: BM rows x BK elements; rows past M and chunks past K are zero-filled.
template <class Cfg, class T>
LLMK_DEVICE void wo_load_a(const WeightOnlyKernelParams<T>& p, std::uint16_t* tile, int block_m, int k0) {
  constexpr int kChunksPerRow = Cfg::BK / 8, kTotal = Cfg::BM * kChunksPerRow;
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int i = 0; i < (kTotal + Cfg::kThreads - 1) / Cfg::kThreads; ++i) {
    const int c = tid + i * Cfg::kThreads;
    if (kTotal % Cfg::kThreads != 0 && c >= kTotal) break;
    const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    const int g_row = block_m + row, g_k = k0 + col;
    const bool valid = g_row < p.m && g_k < p.k;
    const T* from = valid ? p.a + static_cast<std::int64_t>(g_row) * p.lda + g_k : p.a;
    arch::cp_async_cg16_zfill(&tile[row * Cfg::kSmemRowA + col], from, valid ? 16 : 0);
  }
}

// Copies of one K slice of the packed weights: (BN / 16) tile rows x (BK / 16) tiles, each tile 32 * bits
// bytes, contiguous along K in global memory. Tiles past the padded N or past K are zero-filled.
template <class Cfg, int kBits, class T>
LLMK_DEVICE void wo_load_w(const WeightOnlyKernelParams<T>& p, std::uint32_t* slot, int block_n, int k0) {
  constexpr int kTileBytes = 32 * kBits, kChunksPerTile = kTileBytes / 16;
  constexpr int kChunksPerRow = Cfg::kKSteps * kChunksPerTile, kTotal = (Cfg::BN / 16) * kChunksPerRow;
  const int tid = static_cast<int>(threadIdx.x);
  const int n16 = (p.n + 15) / 16, k16 = p.k / 16;
  unsigned char* dst = reinterpret_cast<unsigned char*>(slot);
#pragma unroll
  for (int i = 0; i < (kTotal + Cfg::kThreads - 1) / Cfg::kThreads; ++i) {
    const int c = tid + i * Cfg::kThreads;
    if (kTotal % Cfg::kThreads != 0 && c >= kTotal) break;
    const int tn = c / kChunksPerRow, rem = c % kChunksPerRow;
    const int g_nt = block_n / 16 + tn, g_kt = k0 / 16 + rem / kChunksPerTile;
    const bool valid = g_nt < n16 && g_kt < k16;
    const std::uint8_t* from = valid ? p.w + (static_cast<std::int64_t>(g_nt) * k16 + g_kt) * kTileBytes +
                                           (rem % kChunksPerTile) * 16
                                     : p.w;
    arch::cp_async_cg16_zfill(dst + static_cast<std::int64_t>(c) * 16, from, valid ? 16 : 0);
  }
}

}  // namespace detail

/// The kernel: one block per BM x BN tile of D (blockIdx.x over N tiles, blockIdx.y over M tiles).
/// kStagedQuant: scales and zero points arrive through the cp.async ring with each slice (no global load in
/// the main loop); otherwise each lane loads them from global memory when its group changes.
template <class T, int kBits, class Cfg, bool kStagedQuant = false>
__global__ void __launch_bounds__(Cfg::kThreads)
    weight_only_gemm_kernel(detail::WeightOnlyKernelParams<T> p) {
  using Smem = typename Cfg::template SharedStorage<kBits, kStagedQuant>;
  using Mma = typename arch::MmaF32For<T>::Atom;
  auto& smem = shared_storage<Smem>();
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warp_k = warp / (Cfg::WarpsM * Cfg::WarpsN), warp_mn = warp % (Cfg::WarpsM * Cfg::WarpsN);
  const int warp_m = warp_mn / Cfg::WarpsN, warp_n = warp_mn % Cfg::WarpsN;
  const int block_m = static_cast<int>(blockIdx.y) * Cfg::BM,
            block_n = static_cast<int>(blockIdx.x) * Cfg::BN;
  const int k_tiles = ceil_div(p.k, Cfg::BK);
  const int g = lane / 4;

  float acc[Cfg::kMmaM][Cfg::kMmaN][4];
#pragma unroll
  for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
    for (int ni = 0; ni < Cfg::kMmaN; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;

  detail::WoColumnQuant quant[Cfg::kMmaN];
  int current_group = -1;

#pragma unroll
  for (int s = 0; s < Cfg::Stages - 1; ++s) {
    if (s < k_tiles) {
      detail::wo_load_a<Cfg>(p, smem.a[s], block_m, s * Cfg::BK);
      detail::wo_load_w<Cfg, kBits>(p, smem.w[s], block_n, s * Cfg::BK);
      if constexpr (kStagedQuant) detail::wo_load_quant<Cfg>(p, smem.qs[s], smem.qz[s], block_n, s * Cfg::BK);
    }
    arch::cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    // Slice kt has landed once at most Stages - 2 newer groups are pending; the barrier publishes every
    // thread's copies and frees the slot the next copies overwrite (read in iteration kt - 1).
    arch::cp_async_wait<Cfg::Stages - 2>();
    __syncthreads();
    const int next = kt + Cfg::Stages - 1;
    if (next < k_tiles) {
      detail::wo_load_a<Cfg>(p, smem.a[next % Cfg::Stages], block_m, next * Cfg::BK);
      detail::wo_load_w<Cfg, kBits>(p, smem.w[next % Cfg::Stages], block_n, next * Cfg::BK);
      if constexpr (kStagedQuant)
        detail::wo_load_quant<Cfg>(p, smem.qs[next % Cfg::Stages], smem.qz[next % Cfg::Stages], block_n,
                                   next * Cfg::BK);
    }
    arch::cp_async_commit();

    const int stage = kt % Cfg::Stages;
    const std::uint16_t* a_tile = smem.a[stage];
    const std::uint32_t* w_tile = smem.w[stage];
#pragma unroll
    for (int ss = 0; ss < Cfg::kStepsPerWarp; ++ss) {
      const int step = ss * Cfg::WarpsK + warp_k;
      const int k = kt * Cfg::BK + step * 16;
      if (k >= p.k) break;  // partial last slice (uniform over the warp)
      const int group = static_cast<int>(p.group.divide(static_cast<std::uint32_t>(k)));
      if (group != current_group) {
        current_group = group;
        if constexpr (kStagedQuant) {
          // Any stage holding this group holds the same values, so the cache survives stage changes.
          constexpr std::uint32_t kDefaultZero = kBits == 4 ? 8u : 128u;
          const int j = group - static_cast<int>(p.group.divide(static_cast<std::uint32_t>(kt * Cfg::BK)));
#pragma unroll
          for (int ni = 0; ni < Cfg::kMmaN; ++ni) {
            const int c = j * Cfg::BN + warp_n * Cfg::WN + ni * 8 + g;
            T sv;
            sv.bits = smem.qs[stage][c];
            const std::uint32_t z = p.zeros != nullptr ? smem.qz[stage][c] : kDefaultZero;
            quant[ni] = detail::wo_column_quant<T, kBits>(sv, z);
          }
        } else {
#pragma unroll
          for (int ni = 0; ni < Cfg::kMmaN; ++ni)
            quant[ni] =
                detail::wo_load_column_quant<T, kBits>(p, group, block_n + warp_n * Cfg::WN + ni * 8 + g);
        }
      }
      // A fragments: lane l addresses row l % 16 and 8-column half l / 16 of each 16 x 16 tile.
      std::uint32_t a_frag[Cfg::kMmaM][4];
#pragma unroll
      for (int mi = 0; mi < Cfg::kMmaM; ++mi) {
        const int row = warp_m * Cfg::WM + mi * 16 + (lane % 16);
        arch::LDSM_x4::copy(&a_tile[row * Cfg::kSmemRowA + step * 16 + (lane / 16) * 8], a_frag[mi][0],
                            a_frag[mi][1], a_frag[mi][2], a_frag[mi][3]);
      }
      // B fragments: one packed tile (n16 x k16) per ni pair, this lane's word(s) only.
      std::uint32_t b_frag[Cfg::kMmaN][2];
#pragma unroll
      for (int tn = 0; tn < Cfg::kTilesN; ++tn) {
        const int tile = (warp_n * Cfg::kTilesN + tn) * Cfg::kKSteps + step;
        const std::uint32_t* words = w_tile + tile * Smem::kWordsPerTile + lane * (kBits / 4);
        if constexpr (kBits == 4) {
          const std::uint32_t word = words[0];
#pragma unroll
          for (int i = 0; i < 4; ++i)
            b_frag[2 * tn + i / 2][i % 2] =
                detail::wo_dequant_pair<T, kBits>((word >> (4 * i)) & 0x000F000Fu, quant[2 * tn + i / 2]);
        } else {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const std::uint32_t word = words[j];
#pragma unroll
            for (int r = 0; r < 2; ++r)
              b_frag[2 * tn + j][r] =
                  detail::wo_dequant_pair<T, kBits>((word >> (8 * r)) & 0x00FF00FFu, quant[2 * tn + j]);
          }
        }
      }
#pragma unroll
      for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
        for (int ni = 0; ni < Cfg::kMmaN; ++ni) Mma::fma(acc[mi][ni], a_frag[mi], b_frag[ni], acc[mi][ni]);
    }
  }

  // Warps splitting K: warps 1.. of each (warp_m, warp_n) hand their partial sums to warp 0 through shared
  // memory (summed in warp_k order: deterministic).
  if constexpr (Cfg::WarpsK > 1) {
    constexpr int kFrag = Cfg::kMmaM * Cfg::kMmaN * 4;
    arch::cp_async_wait_all();
    if (warp_k > 0) {
      float* dst = smem.red + ((warp_k - 1) * Cfg::WarpsM * Cfg::WarpsN + warp_mn) * 32 * kFrag;
#pragma unroll
      for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
        for (int ni = 0; ni < Cfg::kMmaN; ++ni)
#pragma unroll
          for (int r = 0; r < 4; ++r) dst[((mi * Cfg::kMmaN + ni) * 4 + r) * 32 + lane] = acc[mi][ni][r];
    }
    __syncthreads();
    if (warp_k > 0) return;
    for (int wk = 1; wk < Cfg::WarpsK; ++wk) {
      const float* src = smem.red + ((wk - 1) * Cfg::WarpsM * Cfg::WarpsN + warp_mn) * 32 * kFrag;
#pragma unroll
      for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
        for (int ni = 0; ni < Cfg::kMmaN; ++ni)
#pragma unroll
          for (int r = 0; r < 4; ++r) acc[mi][ni][r] += src[((mi * Cfg::kMmaN + ni) * 4 + r) * 32 + lane];
    }
  }

  // Epilogue: D = T(acc + bias), accumulator layout rows g / g + 8, columns 2t, 2t + 1.
  const int t = lane % 4;
#pragma unroll
  for (int ni = 0; ni < Cfg::kMmaN; ++ni) {
    const int col = block_n + warp_n * Cfg::WN + ni * 8 + 2 * t;
    if (col >= p.n) continue;
    const bool has_second = col + 1 < p.n;
    float b0 = 0.0f, b1 = 0.0f;
    if (p.bias != nullptr) {
      b0 = p.bias[col].to_float();
      if (has_second) b1 = p.bias[col + 1].to_float();
    }
#pragma unroll
    for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = block_m + warp_m * Cfg::WM + mi * 16 + g + hr * 8;
        if (row >= p.m) continue;
        const float v0 = acc[mi][ni][hr * 2] + b0, v1 = acc[mi][ni][hr * 2 + 1] + b1;
        T* out = p.d + static_cast<std::int64_t>(row) * p.ldd + col;
        if (has_second && p.pair_store) {
          const std::uint32_t packed =
              std::is_same_v<T, half> ? arch::cvt_f32x2_to_f16x2(v0, v1) : arch::cvt_f32x2_to_bf16x2(v0, v1);
          *reinterpret_cast<std::uint32_t*>(out) = packed;
        } else {
          out[0] = T(v0);
          if (has_second) out[1] = T(v1);
        }
      }
  }
}

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

template <class T, int kBits, class Cfg, bool kStagedQuant = false>
Status launch_weight_only(const WeightOnlyKernelParams<T>& p, cudaStream_t stream) {
  const long long m_tiles = ceil_div<long long>(p.m, Cfg::BM), n_tiles = ceil_div<long long>(p.n, Cfg::BN);
  if (m_tiles > 65535)
    return Status::invalid_argument(
        "m", str_cat("must be <= ", 65535LL * Cfg::BM, " for this tile (BM=", Cfg::BM, ")"));
  return launch(weight_only_gemm_kernel<T, kBits, Cfg, kStagedQuant>,
                dim3(static_cast<unsigned>(n_tiles), static_cast<unsigned>(m_tiles)), dim3(Cfg::kThreads),
                sizeof(typename Cfg::template SharedStorage<kBits, kStagedQuant>), stream, p);
}

/// Whether the scales and zero points can travel through the cp.async ring (16-byte chunks of a group row):
/// N % 8 == 0 (N % 16 == 0 with zero points) and 16-byte aligned scales / zeros. Every layer of the common
/// models qualifies (N = 4096, 11008, 14336, ...); other shapes load them from global memory in the loop.
template <class T>
bool weight_only_staged_quant(const WeightOnlyKernelParams<T>& p) {
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  if (p.n % 8 != 0 || !aligned16(p.scales)) return false;
  return p.zeros == nullptr || (p.n % 16 == 0 && aligned16(p.zeros));
}

template <class T, int kBits>
Status dispatch_weight_only(const WeightOnlyKernelParams<T>& p, cudaStream_t stream) {
  const bool staged = weight_only_staged_quant(p);
  if (p.m <= 16)
    return staged ? launch_weight_only<T, kBits, WeightOnlySmallM, true>(p, stream)
                  : launch_weight_only<T, kBits, WeightOnlySmallM>(p, stream);
  if (p.m <= 64)
    return staged ? launch_weight_only<T, kBits, WeightOnlyMediumM, true>(p, stream)
                  : launch_weight_only<T, kBits, WeightOnlyMediumM>(p, stream);
  return launch_weight_only<T, kBits, WeightOnlyLargeM>(p, stream);
}

}  // namespace detail

/// Workspace weight_only_gemm needs: M * K * sizeof(T) bytes with act-order (perm non-null: the permuted
/// copy of A), 0 without.
///   std::size_t bytes = llmk::gemm::weight_only_workspace_bytes(args);
template <class T>
std::size_t weight_only_workspace_bytes(const WeightOnlyArgs<T>& args) {
  if (args.perm == nullptr || args.m < 1 || args.k < 1) return 0;
  return static_cast<std::size_t>(args.m) * static_cast<std::size_t>(args.k) * sizeof(T);
}

/// Validates `args` as weight_only_gemm does, without launching (Status::invalid_argument naming the
/// argument).
template <class T>
Status weight_only_validate(const WeightOnlyArgs<T>& x, const void* workspace, std::size_t workspace_bytes) {
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
  if (x.k < 1 || x.k % 16 != 0)
    return Status::invalid_argument(
        "k", str_cat("must be a positive multiple of 16 (the mma K; pad K with zero columns), got ", x.k));
  if (x.group_size < 16 || x.group_size % 16 != 0 || x.k % x.group_size != 0)
    return Status::invalid_argument("group_size",
                                    str_cat("must be a multiple of 16 that divides K (K=", x.k,
                                            ", group_size=", x.group_size, "); per-channel: K"));
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
    const std::size_t need = weight_only_workspace_bytes(x);
    if (workspace == nullptr)
      return Status::invalid_argument("workspace", str_cat("must not be null with act-order (perm): needs ",
                                                           need, " bytes (weight_only_workspace_bytes)"));
    if (misaligned(workspace, 16)) return Status::invalid_argument("workspace", "must be 16-byte aligned");
    if (workspace_bytes < need)
      return Status::invalid_argument(
          "workspace_bytes",
          str_cat("must be >= weight_only_workspace_bytes = ", need, ", got ", workspace_bytes));
  }
  if (ceil_div<long long>(x.m, WeightOnlyLargeM::BM) > 65535)
    return Status::invalid_argument("m", str_cat("must be <= ", 65535LL * WeightOnlyLargeM::BM));
  return {};
}

/// D = A * dequant(W)^T (+ bias): W4A16 / W8A16 with group-wise (or per-channel) scales, optional zero
/// points and optional GPTQ act-order. T = llmk::half or llmk::bfloat16. The tile config is chosen by M
/// (WeightOnlySmallM / MediumM / LargeM). With act-order (args.perm), A is first gathered into `workspace`
/// (weight_only_workspace_bytes(args) bytes, 16-byte aligned), a second launch on the same stream.
///
/// Requirements (each violation returns Status::invalid_argument naming the argument): a, w, scales, d
/// non-null; bits 4 or 8; M, N >= 1; K a positive multiple of 16; group_size a multiple of 16 dividing K;
/// lda >= K, lda % 8 == 0; ldd >= N; a, w 16-byte aligned, scales, d, bias, perm element-aligned; w_bytes ==
/// weight_only_packed_bytes(N, K, bits); scales_size (and zeros_size with zeros) == (K / G) * N; perm_size
/// == K with perm, and then a large enough workspace. M and N need not be multiples of any tile.
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
///   std::size_t ws = llmk::gemm::weight_only_workspace_bytes(x);   // M * K * 2 here, 0 without perm
///   llmk::Status s = llmk::gemm::weight_only_gemm(x, d_workspace, ws, stream);
template <class T>
Status weight_only_gemm(const WeightOnlyArgs<T>& x, void* workspace, std::size_t workspace_bytes,
                        cudaStream_t stream) {
  if (Status s = weight_only_validate(x, workspace, workspace_bytes); !s.ok()) return s;
  const T* a = x.a;
  std::int64_t lda = x.lda;
  if (x.perm != nullptr) {
    T* a_perm = static_cast<T*>(workspace);
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
                                      reinterpret_cast<std::uintptr_t>(x.d) % 4 == 0 && x.ldd % 2 == 0};
  return x.bits == 4 ? detail::dispatch_weight_only<T, 4>(p, stream)
                     : detail::dispatch_weight_only<T, 8>(p, stream);
}

}  // namespace llmk::gemm
