// llmk/gemm/weight_only_layout.cuh: the packed weight layout of the weight-only GEMM (weight_only.cuh), its
// repack from plain row-major codes (host and device), the inverse, and GPTQ act-order permutations.
//
// ---- The packed layout (produced by weight_only_repack) ----
// Codes are unsigned (`bits` = 4 or 8). W [N, K] is cut into tiles of 16 columns (n) x TK K elements, TK =
// weight_only_tile_k(bits) = 64 (4-bit) or 32 (8-bit), so every tile is 512 bytes; N is padded to a multiple
// of 16 and K to a multiple of TK with code 0 (padding is never used: the kernel skips k16 steps past K and
// never stores columns past N). Tiles are stored in the order  tile = nt * ceil(K / TK) + kt  (columns 16
// nt.., k TK kt..), so the tiles of one 16-column strip are contiguous along K (blocks stream them with
// 16-byte cp.async). Inside a tile, lane l (= 4 g + t, g = l / 4, t = l % 4) owns the 16 bytes at byte 16 l:
// four 32-bit words q = 0..3 holding exactly the codes of its m16n8k16 B fragments for the tile's k16 steps,
// so a warp reads a whole tile with ONE conflict-free 16-byte shared load per lane and no shuffling. The B
// fragment of sub-tile j (n8 columns 16 nt + 8 j + g) at step s has register r = 0 (k = 2t, 2t + 1) or r = 1
// (k = 2t + 8, 2t + 9), relative to k = TK kt + 16 s; h = 0 for the lower k of a pair, 1 for the upper:
//   4-bit: word q is step s = q; the code of (j, r, h) is its nibble p = (2 j + r) + 4 h (bits 4p .. 4p + 3),
//          so (word >> 4 i) & 0x000F000F is the pair of fragment register r = i % 2 of sub-tile j = i / 2,
//          with the lower k in the low half, as the mma wants it.
//   8-bit: word q is sub-tile j = q % 2 of step s = q / 2; the code of (r, h) is its byte r + 2 h, so
//          (word >> 8 r) & 0x00FF00FF is the pair of fragment register r.
// weight_only_code_position(n, k, K, bits) gives the byte and shift of any code.
//
// ---- GPTQ act-order ----
// With a per-K-column group index g_idx[K] (each group exactly G columns, any order), act_order_permutation
// sorts K by g_idx (stable) into perm[K] (perm[k'] = the original column at sorted position k'), the repack
// gathers W's columns by perm (so groups are contiguous and group(k') = k' / G), and the GEMM gathers A's
// columns by the same perm into caller-owned workspace (weight_only_workspace_bytes) before the main kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "llmk/config.cuh"
#include "llmk/core/device_algorithms.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/status.cuh"

namespace llmk::gemm {

// ---- layout ----

/// K elements one packed tile covers: 64 for 4-bit codes, 32 for 8-bit (a tile is 16 columns x this, 512
/// bytes):  static_assert(llmk::gemm::weight_only_tile_k(4) == 64);
LLMK_HOST_DEVICE constexpr int weight_only_tile_k(int bits) {
  return 256 / bits;
}

/// Bytes of the packed (kernel-layout) weights for N x K codes of `bits` bits: ceil(N / 16) x ceil(K /
/// weight_only_tile_k(bits)) tiles of 512 bytes (N and K padded with code 0).
///   std::size_t bytes = llmk::gemm::weight_only_packed_bytes(4096, 4096, 4);   // 8 MiB
LLMK_HOST_DEVICE constexpr std::size_t weight_only_packed_bytes(int n, int k, int bits) {
  const std::size_t n16 = static_cast<std::size_t>((n + 15) / 16);
  const std::size_t kt =
      static_cast<std::size_t>((k + weight_only_tile_k(bits) - 1) / weight_only_tile_k(bits));
  return n16 * kt * 512;
}

/// A code's place in the packed layout: byte offset and bit shift (what weight_only_code_position returns).
struct CodePosition {
  std::int64_t byte;
  int shift;
};
/// Where code (n, k) lives in the packed layout: byte offset and bit shift (0 or 4 for 4-bit, 0 for 8-bit).
/// The layout is documented at the top of this file.
///   auto [byte, shift] = llmk::gemm::weight_only_code_position(n, k, K, 4);
LLMK_HOST_DEVICE CodePosition weight_only_code_position(int n, int k, int k_total, int bits) {
  const int tile_k = weight_only_tile_k(bits), k_tiles = (k_total + tile_k - 1) / tile_k;
  const std::int64_t tile = static_cast<std::int64_t>(n / 16) * k_tiles + k / tile_k;
  const int step = (k % tile_k) / 16, nn = n % 16, kk = k % 16;
  const int j = nn / 8, g = nn % 8, r = kk / 8, t = (kk % 8) / 2, h = kk % 2;
  const std::int64_t lane_byte = tile * 512 + (4 * g + t) * 16;
  if (bits == 4) {
    const int p = (2 * j + r) + 4 * h;  // nibble within word `step` of the lane
    return {lane_byte + step * 4 + p / 2, 4 * (p % 2)};
  }
  return {lane_byte + (2 * step + j) * 4 + r + 2 * h, 0};
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

/// Arguments of the offline repack from the plain row-major format to the kernel layout. Aggregate order: w,
/// ld_bytes, perm, packed, n, k, bits, signed_codes (example: weight_only_repack_host).
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
  if (r.n > (1 << 30)) return Status::invalid_argument("n", str_cat("must be <= 2^30, got ", r.n));
  if (r.k > (1 << 30)) return Status::invalid_argument("k", str_cat("must be <= 2^30, got ", r.k));
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
  const int tile_k = weight_only_tile_k(r.bits), k_tiles = (r.k + tile_k - 1) / tile_k;
  const std::int64_t words = static_cast<std::int64_t>(weight_only_packed_bytes(r.n, r.k, r.bits) / 4);
  const std::uint8_t* w = static_cast<const std::uint8_t*>(r.w);
  std::uint32_t* out = static_cast<std::uint32_t*>(r.packed);
  const std::uint32_t flip = r.signed_codes ? (r.bits == 4 ? 0x8u : 0x80u) : 0u;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t tile = i / 128;  // 512 bytes = 128 words a tile, 4 per lane
    const int in_tile = static_cast<int>(i % 128), lane = in_tile / 4, q = in_tile % 4;
    const int nt = static_cast<int>(tile / k_tiles), kt = static_cast<int>(tile % k_tiles);
    const int g = lane / 4, t = lane % 4;
    std::uint32_t word = 0;
    const int fields = 32 / r.bits;
    for (int f = 0; f < fields; ++f) {
      int j, rr, h, step;
      if (r.bits == 4) {  // word q is k16 step q; nibble f = (2 j + r) + 4 h
        step = q;
        h = f / 4;
        j = (f % 4) / 2;
        rr = f % 2;
      } else {  // word q is sub-tile j = q % 2 of k16 step q / 2; byte f = r + 2 h
        step = q / 2;
        j = q % 2;
        rr = f % 2;
        h = f / 2;
      }
      const int n = 16 * nt + 8 * j + g, k = tile_k * kt + 16 * step + 2 * t + 8 * rr + h;
      std::uint32_t code = 0;
      if (n < r.n && k < r.k) {
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
///
/// Errors (Status::invalid_argument naming the field): w or packed null; bits not 4 or 8; n outside [1,
/// 2^30]; k not a positive multiple of 16 or above 2^30; ld_bytes below a row's bytes (ceil(K / 2) or K);
/// perm not 4-byte aligned, or an entry outside [0, K).
inline Status weight_only_repack_host(const WeightRepackArgs& r) {
  if (Status s = detail::validate_repack(r); !s.ok()) return s;
  const std::uint8_t* w = static_cast<const std::uint8_t*>(r.w);
  std::uint8_t* out = static_cast<std::uint8_t*>(r.packed);
  const std::size_t bytes = weight_only_packed_bytes(r.n, r.k, r.bits);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = 0;  // padding columns and steps: code 0
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
///
/// Errors: those of weight_only_repack_host except the perm entries (invalid_argument naming the field);
/// packed not 4-byte aligned ('packed'). A failed launch: Status::cuda_error.
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
///
/// Errors (Status::invalid_argument naming the argument): packed or w null; bits not 4 or 8; n outside
/// [1, 2^30]; k not a positive multiple of 16 or above 2^30; ld_bytes below a row's bytes.
inline Status weight_only_unpack_host(const void* packed, int n, int k, int bits, void* w,
                                      std::int64_t ld_bytes) {
  if (packed == nullptr) return Status::invalid_argument("packed", "must not be null");
  if (w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (bits != 4 && bits != 8) return Status::invalid_argument("bits", str_cat("must be 4 or 8, got ", bits));
  if (n < 1) return Status::invalid_argument("n", str_cat("must be >= 1, got ", n));
  // The repack's bounds (validate_repack): the code positions count tiles in int.
  if (n > (1 << 30)) return Status::invalid_argument("n", str_cat("must be <= 2^30, got ", n));
  if (k > (1 << 30)) return Status::invalid_argument("k", str_cat("must be <= 2^30, got ", k));
  if (k < 16 || k % 16 != 0)
    return Status::invalid_argument("k", str_cat("must be a positive multiple of 16, got ", k));
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

// After the stable sort of (g_idx, column) pairs: perm[g G + c] = the c-th column (in increasing order) of
// group g, found by binary search for g's run in the sorted groups; -1 where group g has c or fewer columns
// (a malformed g_idx: a group with fewer than G columns, or entries outside [0, K / G), which sort before
// group 0 or after the last group and so belong to no run). The columns past the G-th of a group with more
// than G are left out, as they were when one thread per group scanned g_idx.
template <class Unused = void>
__global__ void __launch_bounds__(256)
    act_order_gather_kernel(const std::int32_t* sorted_groups, const std::int32_t* sorted_cols, int k,
                            int group_size, std::int32_t* perm) {
  // 64-bit i: i + the grid's stride passes 2^31 when k is within 2^18 of it.
  for (std::int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < k; i += gridDim.x * blockDim.x) {
    const int g = static_cast<int>(i / group_size), c = static_cast<int>(i % group_size);
    int lo = 0, hi = k;  // the first sorted position whose group is >= g
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (sorted_groups[mid] < g)
        lo = mid + 1;
      else
        hi = mid;
    }
    const bool in_group = c < k - lo && sorted_groups[lo + c] == g;
    perm[i] = in_group ? sorted_cols[lo + c] : -1;
  }
}

template <class Unused = void>
__global__ void __launch_bounds__(256) act_order_iota_kernel(std::int32_t* out, int k) {
  for (std::int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < k; i += gridDim.x * blockDim.x)
    out[i] = static_cast<std::int32_t>(i);
}

}  // namespace detail

/// GPTQ act-order on the host: perm[K] = the columns sorted by g_idx, stable (perm[k'] = original column).
/// Requires every group 0 .. K/G - 1 to hold exactly G columns (GPTQ's g_idx does), so that the sorted column
/// k' is in group k' / G.
///   std::vector<std::int32_t> perm(K);
///   llmk::Status s = llmk::gemm::act_order_permutation_host(g_idx.data(), K, 128, perm.data());
///
/// Errors (Status::invalid_argument naming the argument): g_idx or perm null or not 4-byte aligned; k < 1;
/// group_size < 1 or not dividing K; a g_idx entry outside [0, K / group_size), or a group not holding
/// exactly group_size columns ('g_idx').
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
/// pairs (llmk::device::sort_pairs: CUB on a GPU, Thrust in the simulator) plus a gather. Temporary storage
/// in CUB's style: call with temp == nullptr for *temp_bytes, then with that much (16-byte aligned). The
/// device cannot report a malformed g_idx as a Status: position g G + c gets -1 when group g holds c or fewer
/// columns (a group with more than G columns keeps its first G; entries outside [0, K / G) are in no
/// group), so check g_idx on the host (act_order_permutation_host) or look for -1 in perm.
///   std::size_t bytes = 0;
///   llmk::gemm::act_order_permutation(nullptr, &bytes, d_g_idx, K, 128, d_perm, stream);
///   llmk::DeviceBuffer<unsigned char> temp(bytes);
///   llmk::Status s =
///       llmk::gemm::act_order_permutation(temp.data(), &bytes, d_g_idx, K, 128, d_perm, stream);
///
/// Errors (Status::invalid_argument naming the argument): temp_bytes null; k < 1; on the second call, g_idx
/// or perm null or not 4-byte aligned, group_size < 1 or not dividing K, *temp_bytes below the size query's
/// answer, temp not 16-byte aligned. A failing sort or launch: Status::cuda_error (the simulator's kernels:
/// Status::Code::kSimulatorError).
inline Status act_order_permutation(void* temp, std::size_t* temp_bytes, const std::int32_t* g_idx, int k,
                                    int group_size, std::int32_t* perm, cudaStream_t stream) {
  if (temp_bytes == nullptr) return Status::invalid_argument("temp_bytes", "must not be null");
  if (k < 1) return Status::invalid_argument("k", str_cat("must be >= 1, got ", k));
  // temp: the column indices [k], the sorted groups [k], the sorted columns [k], then the sort's storage.
  const std::size_t ints = (static_cast<std::size_t>(k) * sizeof(std::int32_t) + 255) / 256 * 256;
  std::size_t sort_bytes = 0;
  LLMK_RETURN_IF_ERROR((llmk::device::sort_pairs<std::int32_t, std::int32_t>(
      nullptr, &sort_bytes, g_idx, nullptr, nullptr, nullptr, k, llmk::device::SortOrder::kAscending,
      stream)));
  const std::size_t need = 3 * ints + sort_bytes;
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
  auto* sorted_cols = reinterpret_cast<std::int32_t*>(base + 2 * ints);
  const dim3 grid(static_cast<unsigned>(std::min(ceil_div(k, 256), 1024)));
  LLMK_RETURN_IF_ERROR(launch(detail::act_order_iota_kernel<>, grid, dim3(256), 0, stream, cols, k));
  LLMK_RETURN_IF_ERROR((llmk::device::sort_pairs<std::int32_t, std::int32_t>(
      base + 3 * ints, &sort_bytes, g_idx, sorted_groups, cols, sorted_cols, k,
      llmk::device::SortOrder::kAscending, stream)));
  return launch(detail::act_order_gather_kernel<>, grid, dim3(256), 0, stream, sorted_groups, sorted_cols, k,
                group_size, perm);
}

/// act_order_permutation without caller-owned storage (the form before the temporary-storage one): it
/// allocates the temporary storage (llmk::device_malloc), runs the form above on `stream`, waits for
/// `stream` and frees it. An offline step (once per layer at load time); inside a captured stream or a
/// latency-critical path, use the form above.
///   llmk::Status s = llmk::gemm::act_order_permutation(d_g_idx, K, 128, d_perm, stream);
///
/// Errors: those of the form above; the allocation's (Status::out_of_memory) and the synchronization's
/// (Status::cuda_error).
inline Status act_order_permutation(const std::int32_t* g_idx, int k, int group_size, std::int32_t* perm,
                                    cudaStream_t stream) {
  if (Status s = detail::validate_act_order(g_idx, k, group_size, perm); !s.ok()) return s;
  std::size_t bytes = 0;
  LLMK_RETURN_IF_ERROR(act_order_permutation(nullptr, &bytes, g_idx, k, group_size, perm, stream));
  return with_device_scratch(bytes, stream, [&](void* temp) {
    return act_order_permutation(temp, &bytes, g_idx, k, group_size, perm, stream);
  });
}

}  // namespace llmk::gemm
