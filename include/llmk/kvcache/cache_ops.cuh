// llmk/kvcache/cache_ops.cuh: the kernels that write and move pages of a paged KV cache (paged_kv.cuh):
//   append_kv     new tokens' K and V rows into their slots (slot = page * page_size + offset; -1 = skip),
//                 the write side of prefill chunks and decode steps;
//   copy_pages    whole pages src[i] -> dst[i] for every KV head (copy-on-write after a fork);
// and the host conversion between the two page-table forms.
//
// Both kernels move rows of head_dim elements in 16-byte vectors, one warp per row. A slot or page outside
// the pool traps in the simulator and in GPU builds without NDEBUG, and is skipped otherwise: never an
// out-of-bounds write.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"
#include "llmk/core/vector.cuh"
#include "llmk/kvcache/paged_kv.cuh"
#include "llmk/quant/scheme.cuh"

namespace llmk::kvcache {

/// Arguments of append_kv. New K/V: [num_tokens, kv_heads, head_dim] with strides (elements); slot_mapping
/// [num_tokens] (device, int64): token t goes to page slot_mapping[t] / page_size, offset % page_size.
/// Quantized caches (Code = int8_t, float8_e4m3, float8_e5m2) quantize on write with llmk::quant's symmetric
/// scheme: kPerTokenHead computes each row's scale from its absmax and WRITES it to k_scales / v_scales
/// [num_pages * page_size * kv_heads]; kPerHead / kPerTensor READ the given (calibrated) scales. Example:
/// append_kv; an int8 cache adds
///   a.scale_mode = llmk::kvcache::KvScale::kPerTokenHead; a.k_scales = k_sc; a.v_scales = v_sc;
template <class T, class Code = T>
struct AppendArgs {
  const T* k = nullptr;
  const T* v = nullptr;
  std::int64_t k_stride_token = 0, k_stride_head = 0, v_stride_token = 0, v_stride_head = 0;
  const std::int64_t* slot_mapping = nullptr;
  int num_tokens = 0, kv_heads = 0, head_dim = 0;
  Code* k_pages = nullptr;
  Code* v_pages = nullptr;
  PageStrides strides;
  int page_size = 0, num_pages = 0;
  KvScale scale_mode = KvScale::kNone;
  float* k_scales = nullptr;
  float* v_scales = nullptr;
};

namespace detail {

LLMK_DEVICE bool checked_index(long long index, long long limit) {
  if (index >= 0 && index < limit) return true;
#if defined(LLMK_SIM) || (LLMK_DEVICE_PASS && !defined(NDEBUG))
  __trap();
#endif
  return false;
}

}  // namespace detail

namespace detail {

// Quantizes this lane's 8 values of a row (lanes past head_dim hold zeros) and returns the row's scale:
// from the row's absmax (kPerTokenHead) or the given scale.
template <class Code>
LLMK_DEVICE float quantize_row8(const float (&x)[8], KvScale mode, const float* scales, int head,
                                Code (&q)[8]) {
  using Q = quant::Quantizer<Code, quant::Symmetric, quant::PerToken>;
  quant::QuantParams p{1.0f, 0};
  if (mode == KvScale::kPerTokenHead) {
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (fabsf(x[e]) < INFINITY) amax = fmaxf(amax, fabsf(x[e]));  // finite values only, as llmk::quant does
#pragma unroll
    for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    p = Q::params_from_absmax(amax);
  } else {
    p.scale = scales[mode == KvScale::kPerHead ? head : 0];
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) q[e] = static_cast<Code>(Q::quantize(x[e], p));
  return p.scale;
}

}  // namespace detail

/// One warp per (token, head) row, grid-stride. Rows are whole warps, so the per-row reductions are
/// warp-uniform. Launched (with its arguments checked) by append_kv: call that (example and errors there).
template <class T, class Code>
__global__ void __launch_bounds__(256) append_kv_kernel(AppendArgs<T, Code> a) {
  constexpr bool kQuantized = !std::is_same_v<T, Code>;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const long long rows = static_cast<long long>(a.num_tokens) * a.kv_heads;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x / 32);
  for (long long row = static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < rows;
       row += warps) {
    const int token = static_cast<int>(row / a.kv_heads), head = static_cast<int>(row % a.kv_heads);
    const std::int64_t slot = a.slot_mapping[token];
    if (slot < 0) continue;  // -1: padding token, nothing to write
    const std::int64_t page = slot / a.page_size, offset = slot % a.page_size;
    if (!detail::checked_index(page, a.num_pages)) continue;
    const std::int64_t dst = page * a.strides.page + offset * a.strides.slot + head * a.strides.head;
    const T* ks = a.k + token * a.k_stride_token + static_cast<std::int64_t>(head) * a.k_stride_head;
    const T* vs = a.v + token * a.v_stride_token + static_cast<std::int64_t>(head) * a.v_stride_head;
    if constexpr (!kQuantized) {
      for (int c = lane * 8; c < a.head_dim; c += 32 * 8) {
        store16(a.k_pages + dst + c, load16(ks + c));
        store16(a.v_pages + dst + c, load16(vs + c));
      }
    } else {
      // head_dim <= 256: one chunk of 8 values per lane.
      const int c = lane * 8;
      const bool mine = c < a.head_dim;
      float kx[8] = {}, vx[8] = {};
      if (mine) {
        const Vector16<T> kr = load16(ks + c), vr = load16(vs + c);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          kx[e] = static_cast<float>(kr.elements[e]);
          vx[e] = static_cast<float>(vr.elements[e]);
        }
      }
      Code kq[8], vq[8];
      const float k_scale = detail::quantize_row8(kx, a.scale_mode, a.k_scales, head, kq);
      const float v_scale = detail::quantize_row8(vx, a.scale_mode, a.v_scales, head, vq);
      if (mine) {
        Vector8<Code> ko, vo;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          ko.elements[e] = kq[e];
          vo.elements[e] = vq[e];
        }
        store8(a.k_pages + dst + c, ko);
        store8(a.v_pages + dst + c, vo);
      }
      if (a.scale_mode == KvScale::kPerTokenHead && lane == 0) {
        const std::int64_t at = (page * a.page_size + offset) * a.kv_heads + head;
        a.k_scales[at] = k_scale;
        a.v_scales[at] = v_scale;
      }
    }
  }
}

/// Copies page src[i] to page dst[i] (all slots, all heads, K and V): one block per pair, one warp per row.
/// Launched by copy_pages (example and errors there).
template <class T>
__global__ void __launch_bounds__(256)
    copy_pages_kernel(T* k_pages, T* v_pages, PageStrides strides, int page_size, int num_pages, int kv_heads,
                      int head_dim, const int* src, const int* dst, float* k_scales, float* v_scales) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte vector
  const int pair = static_cast<int>(blockIdx.x), lane = static_cast<int>(threadIdx.x % 32);
  const int from = src[pair], to = dst[pair];
  if (!detail::checked_index(from, num_pages) || !detail::checked_index(to, num_pages)) return;
  const std::int64_t src_page = from * strides.page, dst_page = to * strides.page;
  const int rows = page_size * kv_heads;  // < 2^31 (copy_pages checks it); the counters are 64-bit: row + 8
                                          // and r + 256 pass 2^31 when rows is that close to it
#pragma unroll 1
  for (std::int64_t row = threadIdx.x / 32; row < rows; row += blockDim.x / 32) {
    const std::int64_t slot = row / kv_heads, head = row - slot * kv_heads;
    const std::int64_t in_page = slot * strides.slot + head * strides.head;
#pragma unroll 1
    for (int c = lane * kVec; c < head_dim; c += 32 * kVec) {
      store16(k_pages + dst_page + in_page + c, load16(k_pages + src_page + in_page + c));
      store16(v_pages + dst_page + in_page + c, load16(v_pages + src_page + in_page + c));
    }
  }
  // Per-token-head scales of a quantized cache: page_size * kv_heads consecutive floats per page.
  if (k_scales != nullptr)
    for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
      k_scales[static_cast<std::int64_t>(to) * rows + r] =
          k_scales[static_cast<std::int64_t>(from) * rows + r];
      v_scales[static_cast<std::int64_t>(to) * rows + r] =
          v_scales[static_cast<std::int64_t>(from) * rows + r];
    }
}

namespace detail {

inline Status check_pool(const void* k_pages, const void* v_pages, const PageStrides& s, int page_size,
                         int num_pages, int kv_heads, int head_dim) {
  auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (k_pages == nullptr || v_pages == nullptr)
    return Status::invalid_argument("k_pages/v_pages", "must not be null");
  if (!aligned(k_pages) || !aligned(v_pages))
    return Status::invalid_argument("k_pages/v_pages", "must be 16-byte aligned");
  if (page_size < 1) return Status::invalid_argument("page_size", str_cat("must be >= 1, got ", page_size));
  if (num_pages < 1) return Status::invalid_argument("num_pages", str_cat("must be >= 1, got ", num_pages));
  if (kv_heads < 1) return Status::invalid_argument("kv_heads", str_cat("must be >= 1, got ", kv_heads));
  if (head_dim < 8 || head_dim % 8 != 0 || head_dim > (1 << 30))
    return Status::invalid_argument(
        "head_dim",
        str_cat("must be a positive multiple of 8 (16-byte rows) up to 2^30 (32-bit column loops), got ",
                head_dim));
  if (s.page <= 0 || s.slot <= 0 || s.head <= 0 || s.page % 8 != 0 || s.slot % 8 != 0 || s.head % 8 != 0)
    return Status::invalid_argument("strides",
                                    "page, slot and head strides must be positive multiples of 8 elements");
  LLMK_RETURN_IF_ERROR(check_page_strides(s, page_size, kv_heads, head_dim));
  return {};
}

}  // namespace detail

/// Writes the new tokens' K and V rows into their slots (T = llmk::half or llmk::bfloat16; the pages and the
/// new rows have the same type).
///
///   llmk::kvcache::AppendArgs<llmk::half> a;
///   a.k = k_new; a.v = v_new; a.k_stride_token = a.v_stride_token = H_kv * D; a.k_stride_head = ... = D;
///   a.slot_mapping = slots; a.num_tokens = n; a.kv_heads = H_kv; a.head_dim = D;
///   a.k_pages = k_pool; a.v_pages = v_pool; a.strides = llmk::kvcache::make_nhd_strides(16, H_kv, D);
///   a.page_size = 16; a.num_pages = pool_pages;
///   llmk::Status s = llmk::kvcache::append_kv(a, stream);
///
/// Errors (Status::invalid_argument naming the argument): k_pages or v_pages null or not 16-byte aligned;
/// page_size, num_pages or kv_heads < 1; head_dim not a positive multiple of 8 up to 2^30; a page stride
/// not a positive multiple of 8, or strides failing check_page_strides; an unquantized cache with a
/// scale_mode other than kNone; a quantized one with a mode its codes do not take (int8: kPerTokenHead or
/// kPerHead; fp8: kPerTensor or kPerHead), k_scales / v_scales null or not 4-byte aligned, head_dim not a
/// multiple of 16 up to 256 or strides not multiples of 16; num_tokens < 0; with tokens, k or v null or not
/// 16-byte aligned, slot_mapping null or misaligned, a k/v stride not a positive multiple of 8. A failed
/// launch: Status::cuda_error.
template <class T, class Code>
Status append_kv(const AppendArgs<T, Code>& a, cudaStream_t stream) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>,
                "append_kv: llmk::half or llmk::bfloat16");
  LLMK_RETURN_IF_ERROR(
      detail::check_pool(a.k_pages, a.v_pages, a.strides, a.page_size, a.num_pages, a.kv_heads, a.head_dim));
  if constexpr (std::is_same_v<T, Code>) {
    if (a.scale_mode != KvScale::kNone)
      return Status::invalid_argument("scale_mode", "must be kNone for an unquantized cache");
  } else {
    constexpr bool kInt8 = std::is_same_v<Code, std::int8_t>;
    static_assert(kInt8 || std::is_same_v<Code, float8_e4m3> || std::is_same_v<Code, float8_e5m2>,
                  "quantized KV codes: int8_t, float8_e4m3, float8_e5m2");
    const bool ok = kInt8 ? (a.scale_mode == KvScale::kPerTokenHead || a.scale_mode == KvScale::kPerHead)
                          : (a.scale_mode == KvScale::kPerTensor || a.scale_mode == KvScale::kPerHead);
    if (!ok)
      return Status::invalid_argument("scale_mode", kInt8
                                                        ? "int8 caches take kPerTokenHead or kPerHead scales"
                                                        : "fp8 caches take kPerTensor or kPerHead scales");
    if (a.k_scales == nullptr || a.v_scales == nullptr)
      return Status::invalid_argument("k_scales/v_scales", "must not be null for a quantized cache");
    if (reinterpret_cast<std::uintptr_t>(a.k_scales) % 4 != 0 ||
        reinterpret_cast<std::uintptr_t>(a.v_scales) % 4 != 0)
      return Status::invalid_argument("k_scales/v_scales", "must be 4-byte aligned");
    if (a.head_dim % 16 != 0 || a.head_dim > 256)
      return Status::invalid_argument("head_dim", "must be a multiple of 16 up to 256 for an 8-bit cache");
    if (a.strides.page % 16 != 0 || a.strides.slot % 16 != 0 || a.strides.head % 16 != 0)
      return Status::invalid_argument("strides",
                                      "must be multiples of 16 codes (16 bytes) for an 8-bit cache");
  }
  if (a.num_tokens < 0)
    return Status::invalid_argument("num_tokens", str_cat("must be >= 0, got ", a.num_tokens));
  if (a.num_tokens == 0) return {};
  if (a.k == nullptr || a.v == nullptr) return Status::invalid_argument("k/v", "must not be null");
  if (reinterpret_cast<std::uintptr_t>(a.k) % 16 != 0 || reinterpret_cast<std::uintptr_t>(a.v) % 16 != 0)
    return Status::invalid_argument("k/v", "must be 16-byte aligned");
  if (a.slot_mapping == nullptr) return Status::invalid_argument("slot_mapping", "must not be null");
  LLMK_RETURN_IF_ERROR(check_element_alignment<std::int64_t>("slot_mapping", a.slot_mapping));
  const std::int64_t row_strides[] = {a.k_stride_token, a.k_stride_head, a.v_stride_token, a.v_stride_head};
  for (std::int64_t s : row_strides)
    if (s <= 0 || s % 8 != 0)
      return Status::invalid_argument("k/v strides",
                                      "must be positive multiples of 8 elements (16-byte rows)");
  const long long rows = static_cast<long long>(a.num_tokens) * a.kv_heads;
  const unsigned blocks = static_cast<unsigned>(min<long long>(ceil_div<long long>(rows, 8), 65535));
  return launch(append_kv_kernel<T, Code>, dim3(blocks), dim3(256), 0, stream, a);
}

/// Copies pages src[i] -> dst[i] for i < num_pairs (device arrays), K and V, every slot and head: the
/// copy-on-write the block allocator asks for after a fork. T is the stored type (llmk::half, llmk::bfloat16,
/// or the 8-bit codes of a quantized cache); a kPerTokenHead cache passes its k_scales / v_scales so that the
/// rows' scales are copied too (k_scales / v_scales are then the [num_pages * page_size * kv_heads] arrays;
/// never pass per-head or per-tensor scales here: they belong to no page). Pairs must not overlap (a page
/// both written and read by different pairs).
///
///   llmk::Status s = llmk::kvcache::copy_pages(k_pool, v_pool, strides, 16, pool_pages, H_kv, D,
///                                              d_src, d_dst, n_copies, stream);
///
/// Errors (Status::invalid_argument naming the argument): the pool checks of append_kv (pointers, sizes,
/// strides); rows or strides not whole 16-byte vectors; only one of k_scales / v_scales, or one misaligned;
/// page_size * kv_heads >= 2^31; num_pairs < 0; with pairs, src or dst null or misaligned. A failed launch:
/// Status::cuda_error.
template <class T>
Status copy_pages(T* k_pages, T* v_pages, PageStrides strides, int page_size, int num_pages, int kv_heads,
                  int head_dim, const int* src, const int* dst, int num_pairs, cudaStream_t stream,
                  float* k_scales = nullptr, float* v_scales = nullptr) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2, "copy_pages: 16-bit elements or 8-bit codes");
  LLMK_RETURN_IF_ERROR(
      detail::check_pool(k_pages, v_pages, strides, page_size, num_pages, kv_heads, head_dim));
  if (head_dim * static_cast<int>(sizeof(T)) % 16 != 0)
    return Status::invalid_argument("head_dim", "rows must be whole 16-byte vectors");
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  if (strides.page % kVec != 0 || strides.slot % kVec != 0 || strides.head % kVec != 0)
    return Status::invalid_argument("strides", "must keep every row 16-byte aligned");
  if ((k_scales == nullptr) != (v_scales == nullptr))
    return Status::invalid_argument("k_scales/v_scales", "give both or neither");
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("k_scales", k_scales));
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("v_scales", v_scales));
  // The kernel indexes page_size * kv_heads rows (and scales) of a page in int.
  if (static_cast<long long>(page_size) * kv_heads > 0x7fffffffLL)
    return Status::invalid_argument("page_size/kv_heads", "page_size * kv_heads must be < 2^31");
  if (num_pairs < 0) return Status::invalid_argument("num_pairs", str_cat("must be >= 0, got ", num_pairs));
  if (num_pairs == 0) return {};
  if (src == nullptr || dst == nullptr) return Status::invalid_argument("src/dst", "must not be null");
  LLMK_RETURN_IF_ERROR(check_element_alignment<int>("src", src));
  LLMK_RETURN_IF_ERROR(check_element_alignment<int>("dst", dst));
  return launch(copy_pages_kernel<T>, dim3(static_cast<unsigned>(num_pairs)), dim3(256), 0, stream, k_pages,
                v_pages, strides, page_size, num_pages, kv_heads, head_dim, src, dst, k_scales, v_scales);
}

/// A block table in the padded form: [batch, max_blocks] page ids (-1 past a sequence's pages) + lengths
/// (example: csr_to_block_table; check_block_table_host takes bt.table.data(), bt.max_blocks, ...).
struct BlockTable {
  int max_blocks = 0;
  std::vector<int> table;     // batch * max_blocks
  std::vector<int> seq_lens;  // batch
};
/// A page table in CSR form (example: block_table_to_csr; check_page_table_host takes its arrays).
struct CsrPageTable {
  std::vector<int> indptr;         // batch + 1
  std::vector<int> indices;        // indptr[batch]
  std::vector<int> last_page_len;  // batch
};

/// CSR -> padded block table (host): max_blocks = the most pages of any sequence (at least 1), -1 past a
/// sequence's pages, seq_lens from the page counts and last_page_len. Page ids are copied as they are
/// (check_page_table_host checks them against a pool). Errors (invalid_argument; *out unchanged): out null,
/// page_size < 1, indptr not starting at 0 or decreasing, indices shorter than indptr[batch], last_page_len
/// shorter than batch or outside [1, page_size] for a sequence with pages, a sequence past 2^30 tokens.
///   llmk::kvcache::BlockTable bt;
///   LLMK_RETURN_IF_ERROR(llmk::kvcache::csr_to_block_table(csr, page_size, &bt));
inline Status csr_to_block_table(const CsrPageTable& csr, int page_size, BlockTable* out) {
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");
  if (page_size < 1) return Status::invalid_argument("page_size", str_cat("must be >= 1, got ", page_size));
  const int batch = csr.indptr.empty() ? 0 : static_cast<int>(csr.indptr.size()) - 1;
  if (!csr.indptr.empty()) {
    if (csr.last_page_len.size() < static_cast<std::size_t>(batch))
      return Status::invalid_argument(
          "last_page_len", str_cat("must hold batch = ", batch, " entries, got ", csr.last_page_len.size()));
    const long long total = csr.indptr[static_cast<std::size_t>(batch)];
    if (total >= 0 && csr.indices.size() < static_cast<std::size_t>(total))
      return Status::invalid_argument(
          "indices", str_cat("must hold indptr[batch] = ", total, " entries, got ", csr.indices.size()));
    // The rules of check_page_table_host other than the pool's bounds (page ids are copied, not checked).
    LLMK_RETURN_IF_ERROR(
        detail::check_page_table_shape(csr.indptr.data(), csr.last_page_len.data(), batch, page_size));
  }
  BlockTable t;
  t.max_blocks = 1;
  for (int b = 0; b < batch; ++b) t.max_blocks = max(t.max_blocks, csr.indptr[b + 1] - csr.indptr[b]);
  t.table.assign(static_cast<std::size_t>(batch) * t.max_blocks, -1);
  t.seq_lens.assign(static_cast<std::size_t>(batch), 0);
  for (int b = 0; b < batch; ++b) {
    const int pages = csr.indptr[b + 1] - csr.indptr[b];
    for (int i = 0; i < pages; ++i)
      t.table[static_cast<std::size_t>(b) * t.max_blocks + i] = csr.indices[csr.indptr[b] + i];
    t.seq_lens[b] = pages == 0 ? 0 : (pages - 1) * page_size + csr.last_page_len[b];
  }
  *out = std::move(t);
  return {};
}

/// Padded block table -> CSR (host): ceil(seq_len / page_size) pages per sequence, the first entries of each
/// row. Errors (invalid_argument; *out unchanged): out null, page_size or max_blocks < 1, table smaller than
/// seq_lens.size() * max_blocks, a length negative, above 2^30 or needing more than max_blocks pages, more
/// than INT32_MAX pages in all.
///   llmk::kvcache::CsrPageTable csr;
///   LLMK_RETURN_IF_ERROR(llmk::kvcache::block_table_to_csr(bt, page_size, &csr));
inline Status block_table_to_csr(const BlockTable& bt, int page_size, CsrPageTable* out) {
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");
  if (page_size < 1) return Status::invalid_argument("page_size", str_cat("must be >= 1, got ", page_size));
  if (bt.max_blocks < 1)
    return Status::invalid_argument("max_blocks", str_cat("must be >= 1, got ", bt.max_blocks));
  const std::size_t batch = bt.seq_lens.size();
  if (bt.table.size() / static_cast<std::size_t>(bt.max_blocks) < batch)
    return Status::invalid_argument("table", str_cat("must hold batch x max_blocks = ", batch, " x ",
                                                     bt.max_blocks, " entries, got ", bt.table.size()));
  long long total_pages = 0;  // indptr is int
  for (std::size_t b = 0; b < batch; ++b) {
    const int len = bt.seq_lens[b];
    if (len < 0 || len > (1 << 30) ||
        static_cast<long long>(len) > static_cast<long long>(bt.max_blocks) * page_size)
      return Status::invalid_argument(
          "seq_lens", str_cat("sequence ", b, ": must be in [0, min(2^30, max_blocks x page_size = ",
                              static_cast<long long>(bt.max_blocks) * page_size, ")], got ", len));
    total_pages += ceil_div(len, page_size);
  }
  if (total_pages > std::numeric_limits<int>::max())
    return Status::invalid_argument(
        "seq_lens", str_cat("the batch needs ", total_pages, " pages in total (more than INT32_MAX)"));
  CsrPageTable c;
  c.indptr.assign(batch + 1, 0);
  c.last_page_len.assign(batch, 0);
  for (std::size_t b = 0; b < batch; ++b) {
    const int pages = ceil_div(bt.seq_lens[b], page_size);
    for (int i = 0; i < pages; ++i)
      c.indices.push_back(bt.table[b * static_cast<std::size_t>(bt.max_blocks) + i]);
    c.indptr[b + 1] = c.indptr[b] + pages;
    c.last_page_len[b] = pages == 0 ? 0 : bt.seq_lens[b] - (pages - 1) * page_size;
  }
  *out = std::move(c);
  return {};
}

}  // namespace llmk::kvcache
