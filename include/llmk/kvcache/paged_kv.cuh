// llmk/kvcache/paged_kv.cuh: the view of a paged KV cache that the paged attention kernels read.
//
// The cache is a pool of num_pages pages of page_size token slots. A page holds, for every KV head, page_size
// rows of head_dim elements; where they are is given by three strides (elements):
//     row(page, slot, head) = pages + page * stride_page + slot * stride_slot + head * stride_head
//   NHD [pages, page_size, kv_heads, head_dim]:
//       stride_page = page_size * H * D, stride_slot = H * D, stride_head = D
//   HND [pages, kv_heads, page_size, head_dim]:
//       stride_page = H * page_size * D, stride_slot = D, stride_head = page_size * D
// (make_nhd_strides / make_hnd_strides). K and V have their own base pointers and share the layout: separate
// pools, or one pool with V at an offset from K.
//
// Which pages a sequence owns is given in one of the two forms engines use:
//   CSR:          page_indptr [batch + 1], page_indices [page_indptr[batch]], last_page_len [batch]:
//                 sequence b owns pages page_indices[page_indptr[b] ..], its last one filled to
//                 last_page_len[b] (FlashInfer's form; a sequence with no page has length 0);
//   block table:  block_table [batch, max_blocks_per_seq] int32 + seq_lens [batch] (vLLM's form).
// Token `key` of sequence b is in logical page key / page_size, slot key % page_size (a shift and a mask when
// page_size is a power of two).
//
// A page index outside [0, num_pages) is a caller bug: in the simulator and in GPU builds without NDEBUG the
// kernel traps (the simulator reports block, thread and line); with NDEBUG on the GPU the row reads as zeros.
// It is never read out of bounds. Engines that keep a host copy of the table can have it checked before the
// launch instead (check_page_table_host / check_block_table_host, or PagedKv::page_indices_host /
// block_table_host to let the launchers do it): a Status naming the sequence and the entry.
#pragma once

#include <cstdint>
#include <type_traits>

#include "llmk/config.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"

namespace llmk::kvcache {

/// Page strides of one layout (elements):  pages.strides = llmk::kvcache::make_nhd_strides(16, 8, 128);
struct PageStrides {
  std::int64_t page = 0, slot = 0, head = 0;
};
/// NHD: [pages, page_size, kv_heads, head_dim]. Plain arithmetic, no checks (validate_paged_kv checks the
/// view).
///   static_assert(llmk::kvcache::make_nhd_strides(16, 8, 128).slot == 8 * 128);   // page 16384, head 128
constexpr PageStrides make_nhd_strides(int page_size, int kv_heads, int head_dim) {
  return {static_cast<std::int64_t>(page_size) * kv_heads * head_dim,
          static_cast<std::int64_t>(kv_heads) * head_dim, head_dim};
}
/// HND: [pages, kv_heads, page_size, head_dim]. Plain arithmetic, no checks (as make_nhd_strides).
///   static_assert(llmk::kvcache::make_hnd_strides(16, 8, 128).head == 16 * 128);   // page 16384, slot 128
constexpr PageStrides make_hnd_strides(int page_size, int kv_heads, int head_dim) {
  return {static_cast<std::int64_t>(kv_heads) * page_size * head_dim, head_dim,
          static_cast<std::int64_t>(page_size) * head_dim};
}

/// Scales of a quantized cache (value = code * scale, symmetric):
///   kPerTensor     k_scales[0]                                       (fp8)
///   kPerHead       k_scales[head]                                    (int8, fp8)
///   kPerTokenHead  k_scales[(page * page_size + slot) * kv_heads + head], written by append_kv  (int8)
enum class KvScale { kNone, kPerTensor, kPerHead, kPerTokenHead };

/// A paged KV cache and the page tables of a batch (device pointers, plus host copies for validation).
/// T is the attention dtype (llmk::half, llmk::bfloat16); Code the stored dtype: T itself, or int8_t,
/// float8_e4m3, float8_e5m2 for a quantized cache, dequantized as float(code) * scale and rounded to T when a
/// tile is loaded. A CSR-form fp16 cache (the rules: validate_paged_kv):
///   llmk::kvcache::PagedKv<llmk::half> p;
///   p.k_pages = k_pool; p.v_pages = v_pool; p.strides = llmk::kvcache::make_nhd_strides(16, H_kv, D);
///   p.page_size = 16; p.num_pages = pool_pages; p.page_indptr = d_indptr; p.page_indices = d_indices;
///   p.last_page_len = d_last; p.page_indptr_host = indptr.data(); p.last_page_len_host = last.data();
template <class T, class Code = T>
struct PagedKv {
  using Element = T;
  using Stored = Code;
  const Code* k_pages = nullptr;
  const Code* v_pages = nullptr;
  KvScale scale_mode = KvScale::kNone;
  const float* k_scales = nullptr;
  const float* v_scales = nullptr;
  int kv_heads = 0;  // needed by kPerTokenHead (set by the launchers)
  PageStrides strides;
  int page_size = 0;
  int num_pages = 0;

  // CSR form (all three, or none).
  const int* page_indptr = nullptr;
  const int* page_indices = nullptr;
  const int* last_page_len = nullptr;
  const int* page_indptr_host = nullptr;    // required with the CSR form
  const int* last_page_len_host = nullptr;  // required with the CSR form
  const int* page_indices_host = nullptr;   // optional: given, the launchers check every page id on the host

  // Block-table form (both, or none).
  const int* block_table = nullptr;
  int max_blocks_per_seq = 0;
  const int* seq_lens = nullptr;
  const int* seq_lens_host = nullptr;     // required with the block-table form
  const int* block_table_host = nullptr;  // optional: given, the launchers check every page id on the host

  // Set by the launchers: log2(page_size) when it is a power of two, else -1.
  int page_shift = -1;

  /// Tokens of sequence b.
  LLMK_HOST_DEVICE int length(int b) const {
    if (block_table != nullptr) return seq_lens[b];
    const int pages = page_indptr[b + 1] - page_indptr[b];
    return pages == 0 ? 0 : (pages - 1) * page_size + last_page_len[b];
  }
  /// The table's entry for logical page `logical` of sequence b, unchecked (checked_page() checks it; kernels
  /// that look pages up a tile ahead load it early and check it when they use it).
  LLMK_DEVICE int table_entry(int b, int logical) const { return table_row(b)[logical]; }
  /// Sequence b's row of the table (block table or CSR): its entries are table_row(b)[logical].
  LLMK_DEVICE const int* table_row(int b) const {
    return block_table != nullptr ? block_table + static_cast<std::int64_t>(b) * max_blocks_per_seq
                                  : page_indices + page_indptr[b];
  }
  /// A table entry as a physical page: -1 (after a trap in checked builds) when it names a page outside the
  /// pool.
  LLMK_DEVICE int checked_page(int p) const {
    if (p < 0 || p >= num_pages) {
#if defined(LLMK_SIM) || (LLMK_DEVICE_PASS && !defined(NDEBUG))
      __trap();
#endif
      return -1;
    }
    return p;
  }
  /// Physical page of logical page `logical` of sequence b, or -1 (after a trap in checked builds) when the
  /// table names a page outside the pool.
  LLMK_DEVICE int physical_page(int b, int logical) const {
    return checked_page(table_entry(b, logical));
  }
  /// Index into k_scales / v_scales of the row at (physical page, slot, head) for a quantized cache.
  LLMK_HOST_DEVICE std::int64_t scale_index(std::int64_t page, int slot, int head) const {
    switch (scale_mode) {
      case KvScale::kPerHead:
        return head;
      case KvScale::kPerTokenHead:
        return (page * page_size + slot) * kv_heads + head;
      default:  // kPerTensor (kNone reads no scale)
        return 0;
    }
  }
  /// Scale of the row at (physical page, slot, head) for a quantized cache.
  LLMK_DEVICE float scale(const float* scales, std::int64_t page, int slot, int head) const {
    return scale_mode == KvScale::kNone ? 1.0f : scales[scale_index(page, slot, head)];
  }
  /// Offset (elements) of token `key`'s row for KV head `head` of sequence b, or -1 for a bad page.
  LLMK_DEVICE std::int64_t row_offset(int b, int head, int key) const {
    int p, slot;
    locate(b, key, p, slot);
    return p < 0 ? -1 : row_offset_at(p, slot, head);
  }
  /// Physical page (-1: a bad page) and slot of token `key` of sequence b.
  LLMK_DEVICE void locate(int b, int key, int& page, int& slot) const {
    int logical;
    split_key(key, logical, slot);
    page = physical_page(b, logical);
  }
  /// Logical page and slot of token `key` (no memory access).
  LLMK_DEVICE void split_key(int key, int& logical, int& slot) const {
    logical = page_shift >= 0 ? key >> page_shift : key / page_size;
    slot = page_shift >= 0 ? key & (page_size - 1) : key - logical * page_size;
  }
  /// Offset (elements) of the row at (physical page, slot, head).
  LLMK_DEVICE std::int64_t row_offset_at(int page, int slot, int head) const {
    return static_cast<std::int64_t>(page) * strides.page + static_cast<std::int64_t>(slot) * strides.slot +
           static_cast<std::int64_t>(head) * strides.head;
  }
};

/// The rows of one page must not overlap and must fit in stride.page: token-major (NHD-like: head >=
/// head_dim, slot >= head * kv_heads) or head-major (HND-like: slot >= head_dim, head >= slot * page_size),
/// and (page_size - 1) * slot + (kv_heads - 1) * head + head_dim <= page. The pool must hold num_pages * page
/// elements (a device size llmk cannot check). Errors: Status::invalid_argument naming 'pages.strides'
/// (overlapping rows) or 'pages.strides.page' (a page too small for its rows). validate_paged_kv runs it.
///   LLMK_RETURN_IF_ERROR(llmk::kvcache::check_page_strides(pages.strides, page_size, kv_heads, head_dim));
inline Status check_page_strides(const PageStrides& s, int page_size, int kv_heads, int head_dim) {
  // Saturating products: strides are positive here (checked by the callers) but may be huge.
  const bool token_major = s.head >= head_dim && s.slot >= mul_sat(s.head, kv_heads);
  const bool head_major = s.slot >= head_dim && s.head >= mul_sat(s.slot, page_size);
  if (!token_major && !head_major)
    return Status::invalid_argument(
        "pages.strides",
        str_cat("rows overlap: need head >= head_dim and slot >= head * kv_heads (NHD-like), or slot >= "
                "head_dim and head >= slot * page_size (HND-like); got slot ",
                s.slot, ", head ", s.head, " for page_size ", page_size, ", kv_heads ", kv_heads,
                ", head_dim ", head_dim));
  const std::int64_t extent =
      add_sat(add_sat(mul_sat(page_size - 1, s.slot), mul_sat(kv_heads - 1, s.head)), head_dim);
  if (extent > s.page)
    return Status::invalid_argument(
        "pages.strides.page", str_cat("must cover a page's rows (", extent, " elements), got ", s.page));
  return {};
}

namespace detail {

inline Status check_table_geometry(int batch, int page_size, int num_pages) {
  if (batch < 0) return Status::invalid_argument("batch", str_cat("must be >= 0, got ", batch));
  if (page_size < 1) return Status::invalid_argument("page_size", str_cat("must be >= 1, got ", page_size));
  if (num_pages < 1) return Status::invalid_argument("num_pages", str_cat("must be >= 1, got ", num_pages));
  return {};
}

// The page ids of one sequence: entries[0 .. pages) must lie in [0, num_pages).
inline Status check_page_ids(const char* name, const int* entries, long long first_entry, int b,
                             long long pages, int num_pages) {
  for (long long i = 0; i < pages; ++i) {
    const int id = entries[first_entry + i];
    if (id < 0 || id >= num_pages)
      return Status::invalid_argument(
          name, str_cat("sequence ", b, ", logical page ", i, " (entry ", first_entry + i, "): page id ", id,
                        " is outside the pool [0, ", num_pages, ")",
                        id < 0 ? " (a padding entry inside the sequence's length?)" : ""));
  }
  return {};
}

}  // namespace detail

namespace detail {
// The CSR rules that do not involve the pool: page_indptr starts at 0 and never decreases, last_page_len in
// [1, page_size] for a sequence with pages, lengths <= 2^30. page_indptr [batch + 1] and last_page_len
// [batch] not null (last_page_len may be null when batch == 0).
inline Status check_page_table_shape(const int* page_indptr, const int* last_page_len, int batch,
                                     int page_size) {
  if (page_indptr[0] != 0)
    return Status::invalid_argument("page_indptr", str_cat("must start at 0, got ", page_indptr[0]));
  for (int b = 0; b < batch; ++b) {
    const long long pages = static_cast<long long>(page_indptr[b + 1]) - page_indptr[b];
    if (pages < 0)
      return Status::invalid_argument("page_indptr",
                                      str_cat("must not decrease: sequence ", b, " has ", pages, " pages (",
                                              page_indptr[b], " -> ", page_indptr[b + 1], ")"));
    if (pages == 0) continue;
    if (last_page_len[b] < 1 || last_page_len[b] > page_size)
      return Status::invalid_argument("last_page_len",
                                      str_cat("sequence ", b, ": must be in [1, page_size = ", page_size,
                                              "] for a sequence with pages, got ", last_page_len[b]));
    if ((pages - 1) * page_size + last_page_len[b] > (1LL << 30))
      return Status::invalid_argument("page_indptr",
                                      str_cat("sequence ", b, ": ", pages, " pages of ", page_size,
                                              " tokens: sequence lengths must be <= 2^30"));
  }
  return {};
}
}  // namespace detail

/// Checks a CSR page table on the host before a launch (FlashInfer's form, see PagedKv): host copies of
/// page_indptr [batch + 1], page_indices [page_indptr[batch]] and last_page_len [batch]. Returns
/// Status::invalid_argument naming the array, the sequence and the entry for: a null pointer (page_indices
/// may be null when no sequence has a page), batch < 0, page_size or num_pages < 1, page_indptr[0] != 0 or
/// decreasing, last_page_len outside [1, page_size] for a sequence with pages, a page id outside
/// [0, num_pages) (negative included), a sequence longer than 2^30 tokens. Reads every entry once: O(batch +
/// page_indptr[batch]) host work, no device access.
///
///   // the engine's host copies, the same values it uploads for the kernel
///   LLMK_RETURN_IF_ERROR(llmk::kvcache::check_page_table_host(indptr.data(), indices.data(), last.data(),
///                                                             batch, page_size, num_pages));
///   // e.g. "invalid argument 'page_indices': sequence 3, logical page 7 (entry 42): page id 1200 is outside
///   //       the pool [0, 1024)"
///
/// Setting PagedKv::page_indices_host makes every paged launcher run this check (opt-in).
inline Status check_page_table_host(const int* page_indptr, const int* page_indices, const int* last_page_len,
                                    int batch, int page_size, int num_pages) {
  LLMK_RETURN_IF_ERROR(detail::check_table_geometry(batch, page_size, num_pages));
  if (page_indptr == nullptr) return Status::invalid_argument("page_indptr", "must not be null");
  if (last_page_len == nullptr && batch > 0)
    return Status::invalid_argument("last_page_len", "must not be null");
  LLMK_RETURN_IF_ERROR(detail::check_page_table_shape(page_indptr, last_page_len, batch, page_size));
  for (int b = 0; b < batch; ++b) {
    const long long pages = static_cast<long long>(page_indptr[b + 1]) - page_indptr[b];
    if (pages == 0) continue;
    if (page_indices == nullptr)
      return Status::invalid_argument("page_indices",
                                      str_cat("must not be null (sequence ", b, " has pages)"));
    LLMK_RETURN_IF_ERROR(
        detail::check_page_ids("page_indices", page_indices, page_indptr[b], b, pages, num_pages));
  }
  return {};
}

/// Checks a block table on the host before a launch (vLLM's form, see PagedKv): host copies of block_table
/// [batch, max_blocks_per_seq] (row-major) and seq_lens [batch]. Only the first ceil(seq_lens[b] / page_size)
/// entries of row b are page ids; the rest is padding (any value, conventionally -1). Returns
/// Status::invalid_argument naming the array, the sequence and the entry for: a null pointer, batch < 0,
/// page_size, num_pages or max_blocks_per_seq < 1, a negative length, a length above 2^30, a length that
/// needs more pages than a row holds, a page id outside [0, num_pages) (negative included). O(batch + the
/// pages the lengths need) host work, no device access.
///
///   LLMK_RETURN_IF_ERROR(llmk::kvcache::check_block_table_host(bt.table.data(), bt.max_blocks,
///                                                              bt.seq_lens.data(), batch, page_size,
///                                                              num_pages));
///   // e.g. "invalid argument 'block_table': sequence 3, logical page 7 (entry 391): page id -1 is
///   //       outside the pool [0, 1024) (a padding entry inside the sequence's length?)"
///
/// Setting PagedKv::block_table_host makes every paged launcher run this check (opt-in).
inline Status check_block_table_host(const int* block_table, int max_blocks_per_seq, const int* seq_lens,
                                     int batch, int page_size, int num_pages) {
  LLMK_RETURN_IF_ERROR(detail::check_table_geometry(batch, page_size, num_pages));
  if (max_blocks_per_seq < 1)
    return Status::invalid_argument("max_blocks_per_seq", str_cat("must be >= 1, got ", max_blocks_per_seq));
  if (batch == 0) return {};
  if (block_table == nullptr) return Status::invalid_argument("block_table", "must not be null");
  if (seq_lens == nullptr) return Status::invalid_argument("seq_lens", "must not be null");
  for (int b = 0; b < batch; ++b) {
    const int len = seq_lens[b];
    if (len < 0)
      return Status::invalid_argument("seq_lens", str_cat("sequence ", b, ": length ", len, " < 0"));
    if (len > (1 << 30))
      return Status::invalid_argument("seq_lens",
                                      str_cat("sequence ", b, ": length ", len, ": lengths must be <= 2^30"));
    const long long pages = ceil_div<long long>(len, page_size);
    if (pages > max_blocks_per_seq)
      return Status::invalid_argument(
          "seq_lens", str_cat("sequence ", b, ": ", len, " tokens need ", pages, " pages of ", page_size,
                              ", a block-table row holds max_blocks_per_seq = ", max_blocks_per_seq));
    LLMK_RETURN_IF_ERROR(detail::check_page_ids(
        "block_table", block_table, static_cast<long long>(b) * max_blocks_per_seq, b, pages, num_pages));
  }
  return {};
}

/// Validates a paged view for `batch` sequences with `kv_heads` heads of `head_dim` and sets its page_shift;
/// *max_len (optional) receives the longest sequence (the launchers size grids and the Hopper prefill's L2
/// sections by it). Uses the host copies of the table lengths, and checks
/// the page ids too when a host copy of them is given (page_indices_host / block_table_host). Every paged
/// launcher runs it; call it directly to check a view once, e.g. when it is built.
///
///   int max_len = 0;   // pages: a llmk::kvcache::PagedKv<llmk::half> (not const: page_shift is set)
///   LLMK_RETURN_IF_ERROR(llmk::kvcache::validate_paged_kv(pages, batch, kv_heads, head_dim, &max_len));
///
/// Errors (Status::invalid_argument naming 'pages.<field>' or 'head_dim'): k_pages or v_pages null or not
/// 16-byte aligned; page_size or num_pages < 1; a stride not a positive multiple of 8 elements, or strides
/// that fail check_page_strides; an unquantized cache with a scale mode other than kNone; a quantized cache
/// with a scale mode its codes do not take (int8: kPerTokenHead or kPerHead; fp8: kPerTensor or kPerHead),
/// k_scales or v_scales null or not 4-byte aligned, head_dim or a stride not a multiple of 16; not exactly
/// one table form; CSR: not all three arrays, an array not 4-byte aligned, page_indptr_host or
/// last_page_len_host null, page_indptr not starting at 0 or decreasing, a last_page_len outside
/// [1, page_size] for a sequence with pages, and check_page_table_host's errors when page_indices_host is
/// given; block table: block_table or seq_lens missing or not 4-byte aligned, seq_lens_host null,
/// max_blocks_per_seq < 1, a length outside [0, max_blocks_per_seq * page_size], and check_block_table_host's
/// errors when block_table_host is given; a sequence longer than 2^30 tokens.
template <class T, class Code>
Status validate_paged_kv(PagedKv<T, Code>& p, int batch, int kv_heads, int head_dim, int* max_len) {
  auto aligned = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  if (p.k_pages == nullptr) return Status::invalid_argument("pages.k_pages", "must not be null");
  if (p.v_pages == nullptr) return Status::invalid_argument("pages.v_pages", "must not be null");
  if (!aligned(p.k_pages) || !aligned(p.v_pages))
    return Status::invalid_argument("pages.k_pages/v_pages", "must be 16-byte aligned");
  if (p.page_size < 1)
    return Status::invalid_argument("pages.page_size", str_cat("must be >= 1, got ", p.page_size));
  if (p.num_pages < 1)
    return Status::invalid_argument("pages.num_pages", str_cat("must be >= 1, got ", p.num_pages));
  const std::int64_t strides[3] = {p.strides.page, p.strides.slot, p.strides.head};
  const char* names[3] = {"pages.strides.page", "pages.strides.slot", "pages.strides.head"};
  for (int i = 0; i < 3; ++i)
    if (strides[i] <= 0 || strides[i] % 8 != 0)
      return Status::invalid_argument(
          names[i], str_cat("must be a positive multiple of 8 elements (16 bytes), got ", strides[i]));
  LLMK_RETURN_IF_ERROR(check_page_strides(p.strides, p.page_size, kv_heads, head_dim));
  p.kv_heads = kv_heads;
  if constexpr (std::is_same_v<Code, T>) {
    if (p.scale_mode != KvScale::kNone)
      return Status::invalid_argument("pages.scale_mode", "must be kNone for an unquantized cache");
  } else {
    constexpr bool kInt8 = std::is_same_v<Code, std::int8_t>;
    static_assert(kInt8 || std::is_same_v<Code, float8_e4m3> || std::is_same_v<Code, float8_e5m2>,
                  "quantized KV codes: int8_t, float8_e4m3, float8_e5m2");
    const bool ok = kInt8 ? (p.scale_mode == KvScale::kPerTokenHead || p.scale_mode == KvScale::kPerHead)
                          : (p.scale_mode == KvScale::kPerTensor || p.scale_mode == KvScale::kPerHead);
    if (!ok)
      return Status::invalid_argument("pages.scale_mode",
                                      kInt8 ? "int8 caches take kPerTokenHead or kPerHead scales"
                                            : "fp8 caches take kPerTensor or kPerHead scales");
    if (p.k_scales == nullptr || p.v_scales == nullptr)
      return Status::invalid_argument("pages.k_scales/v_scales", "must not be null for a quantized cache");
    if (reinterpret_cast<std::uintptr_t>(p.k_scales) % 4 != 0 ||
        reinterpret_cast<std::uintptr_t>(p.v_scales) % 4 != 0)
      return Status::invalid_argument("pages.k_scales/v_scales", "must be 4-byte aligned");
    if (head_dim % 16 != 0)
      return Status::invalid_argument("head_dim",
                                      "must be a multiple of 16 for an 8-bit cache (16-byte rows)");
    if (p.strides.page % 16 != 0 || p.strides.slot % 16 != 0 || p.strides.head % 16 != 0)
      return Status::invalid_argument("pages.strides",
                                      "must be multiples of 16 codes (16 bytes) for an 8-bit cache");
  }
  const bool csr = p.page_indptr != nullptr || p.page_indices != nullptr || p.last_page_len != nullptr;
  const bool table = p.block_table != nullptr || p.seq_lens != nullptr;
  if (csr == table)
    return Status::invalid_argument("pages",
                                    "give exactly one table form: CSR (page_indptr, page_indices, "
                                    "last_page_len) or a block table (block_table, seq_lens)");
  long long longest = 0;
  if (csr) {
    if (p.page_indptr == nullptr || p.page_indices == nullptr || p.last_page_len == nullptr)
      return Status::invalid_argument("pages.page_indptr/page_indices/last_page_len", "give all three");
    // The kernels read the tables as int32.
    LLMK_RETURN_IF_ERROR(check_element_alignment<int>("pages.page_indptr", p.page_indptr));
    LLMK_RETURN_IF_ERROR(check_element_alignment<int>("pages.page_indices", p.page_indices));
    LLMK_RETURN_IF_ERROR(check_element_alignment<int>("pages.last_page_len", p.last_page_len));
    if (p.page_indptr_host == nullptr || p.last_page_len_host == nullptr)
      return Status::invalid_argument("pages.page_indptr_host/last_page_len_host",
                                      "host copies are required (lengths are validated on the host)");
    if (p.page_indptr_host[0] != 0)
      return Status::invalid_argument("pages.page_indptr",
                                      str_cat("must start at 0, got ", p.page_indptr_host[0]));
    for (int b = 0; b < batch; ++b) {
      const long long pages = static_cast<long long>(p.page_indptr_host[b + 1]) - p.page_indptr_host[b];
      if (pages < 0)
        return Status::invalid_argument("pages.page_indptr", str_cat("must not decrease (sequence ", b, ")"));
      if (pages > 0 && (p.last_page_len_host[b] < 1 || p.last_page_len_host[b] > p.page_size))
        return Status::invalid_argument("pages.last_page_len",
                                        str_cat("must be in [1, page_size = ", p.page_size,
                                                "] for a sequence with pages; "
                                                "sequence ",
                                                b, " has ", p.last_page_len_host[b]));
      const long long len = pages == 0 ? 0 : (pages - 1) * p.page_size + p.last_page_len_host[b];
      longest = len > longest ? len : longest;
    }
    if (p.page_indices_host != nullptr)
      LLMK_RETURN_IF_ERROR(check_page_table_host(p.page_indptr_host, p.page_indices_host,
                                                 p.last_page_len_host, batch, p.page_size, p.num_pages));
  } else {
    if (p.block_table == nullptr || p.seq_lens == nullptr)
      return Status::invalid_argument("pages.block_table/seq_lens", "give both");
    LLMK_RETURN_IF_ERROR(check_element_alignment<int>("pages.block_table", p.block_table));
    LLMK_RETURN_IF_ERROR(check_element_alignment<int>("pages.seq_lens", p.seq_lens));
    if (p.seq_lens_host == nullptr)
      return Status::invalid_argument("pages.seq_lens_host",
                                      "host copy is required (lengths are validated on the host)");
    if (p.max_blocks_per_seq < 1)
      return Status::invalid_argument("pages.max_blocks_per_seq",
                                      str_cat("must be >= 1, got ", p.max_blocks_per_seq));
    for (int b = 0; b < batch; ++b) {
      const long long len = p.seq_lens_host[b];
      if (len < 0 || len > static_cast<long long>(p.max_blocks_per_seq) * p.page_size)
        return Status::invalid_argument("pages.seq_lens",
                                        str_cat("must be in [0, max_blocks_per_seq * page_size = ",
                                                static_cast<long long>(p.max_blocks_per_seq) * p.page_size,
                                                "], sequence ", b, " has ", len));
      longest = len > longest ? len : longest;
    }
    if (p.block_table_host != nullptr)
      LLMK_RETURN_IF_ERROR(check_block_table_host(p.block_table_host, p.max_blocks_per_seq, p.seq_lens_host,
                                                  batch, p.page_size, p.num_pages));
  }
  if (longest > (1 << 30)) return Status::invalid_argument("pages", "sequence lengths must be <= 2^30");
  p.page_shift = -1;
  if ((p.page_size & (p.page_size - 1)) == 0)
    for (int s = 0; s < 31; ++s)
      if ((1 << s) == p.page_size) p.page_shift = s;
  if (max_len != nullptr) *max_len = static_cast<int>(longest);
  return {};
}

}  // namespace llmk::kvcache
