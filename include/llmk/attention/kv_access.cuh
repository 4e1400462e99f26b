// llmk/attention/kv_access.cuh: where the attention kernels find key/value rows. The kernels are written
// against three members, so one kernel source reads a dense ragged batch (prefill), a dense batched cache
// (decode) or a paged cache (llmk/kvcache/paged_kv.cuh):
//   int length(b)                      keys of sequence b
//   const T* k_row(b, head, key)       the key row (nullptr: zero-fill it), v_row likewise
//   const T* any_k(), any_v()          a valid address for zero-filling copies
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "llmk/arch/cp_async.cuh"
#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/vector.cuh"
#include "llmk/kvcache/paged_kv.cuh"

namespace llmk::attention::detail {

/// Prefill's dense K/V: ragged [total_kv, kv_heads, D], sequence b at cu_seqlens_k[b] (or b * kv_len).
template <class T>
struct RaggedKv {
  const T* k;
  const T* v;
  std::int64_t k_stride_token, k_stride_head, v_stride_token, v_stride_head;
  const int* cu_seqlens_k;
  int kv_len;

  LLMK_DEVICE int length(int b) const {
    return cu_seqlens_k != nullptr ? cu_seqlens_k[b + 1] - cu_seqlens_k[b] : kv_len;
  }
  LLMK_DEVICE std::int64_t token(int b, int key) const {
    return (cu_seqlens_k != nullptr ? static_cast<std::int64_t>(cu_seqlens_k[b])
                                    : static_cast<std::int64_t>(b) * kv_len) +
           key;
  }
  LLMK_DEVICE const T* k_row(int b, int head, int key) const {
    return k + token(b, key) * k_stride_token + static_cast<std::int64_t>(head) * k_stride_head;
  }
  LLMK_DEVICE const T* v_row(int b, int head, int key) const {
    return v + token(b, key) * v_stride_token + static_cast<std::int64_t>(head) * v_stride_head;
  }
  LLMK_DEVICE const T* any_k() const { return k; }
  LLMK_DEVICE const T* any_v() const { return v; }
  // Consecutive keys of a sequence are a constant stride apart (StridedKv): tiles load with stepped
  // addresses.
  LLMK_DEVICE std::int64_t k_key_stride() const { return k_stride_token; }
  LLMK_DEVICE std::int64_t v_key_stride() const { return v_stride_token; }
};

/// Decode's dense K/V cache: [batch, max_kv_len, kv_heads, D] with strides; sequence b has kv_lens[b] keys.
template <class T>
struct BatchedKv {
  const T* k;
  const T* v;
  std::int64_t k_stride_batch, k_stride_token, k_stride_head, v_stride_batch, v_stride_token, v_stride_head;
  const int* kv_lens;
  int max_kv_len;

  LLMK_DEVICE int length(int b) const { return kv_lens != nullptr ? kv_lens[b] : max_kv_len; }
  LLMK_DEVICE const T* k_row(int b, int head, int key) const {
    return k + static_cast<std::int64_t>(b) * k_stride_batch +
           static_cast<std::int64_t>(key) * k_stride_token + static_cast<std::int64_t>(head) * k_stride_head;
  }
  LLMK_DEVICE const T* v_row(int b, int head, int key) const {
    return v + static_cast<std::int64_t>(b) * v_stride_batch +
           static_cast<std::int64_t>(key) * v_stride_token + static_cast<std::int64_t>(head) * v_stride_head;
  }
  LLMK_DEVICE const T* any_k() const { return k; }
  LLMK_DEVICE const T* any_v() const { return v; }
  LLMK_DEVICE std::int64_t k_key_stride() const { return k_stride_token; }
  LLMK_DEVICE std::int64_t v_key_stride() const { return v_stride_token; }
};

/// A K/V view whose keys of one sequence and head are a constant stride apart (k_row(b, h, key) ==
/// k_row(b, h, 0) + key * k_key_stride()): the dense layouts, not the paged one.
template <class Kv>
concept StridedKv = requires(const Kv& kv) {
  { kv.k_key_stride() } -> std::convertible_to<std::int64_t>;
  { kv.v_key_stride() } -> std::convertible_to<std::int64_t>;
};

/// A K/V view whose key row and value row of a token sit at the same offset from any_k() / any_v()
/// (row_offset(b, h, key) < 0: a bad page): one page lookup serves both copies. The paged cache.
template <class Kv>
concept SharedOffsetKv = requires(const Kv& kv, int i) {
  { kv.row_offset(i, i, i) } -> std::convertible_to<std::int64_t>;
};

/// A paged cache: rows through the page table (a bad page index zero-fills after the checked-build trap).
/// For a quantized cache (Code != T) the kernels take the quantized path: code_rows gives the codes and their
/// scales; prefill dequantizes the tile into shared memory as T (QuantizedTile), decode in registers (both
/// in code_tiles.cuh).
template <class T, class Code = T>
struct PagedKvRows {
  static constexpr bool kQuantized = !std::is_same_v<T, Code>;
  using Stored = Code;
  kvcache::PagedKv<T, Code> pages;

  LLMK_DEVICE int length(int b) const { return pages.length(b); }
  LLMK_DEVICE const Code* k_row(int b, int head, int key) const {
    const std::int64_t off = pages.row_offset(b, head, key);
    return off < 0 ? nullptr : pages.k_pages + off;
  }
  LLMK_DEVICE const Code* v_row(int b, int head, int key) const {
    const std::int64_t off = pages.row_offset(b, head, key);
    return off < 0 ? nullptr : pages.v_pages + off;
  }
  LLMK_DEVICE const Code* any_k() const { return pages.k_pages; }
  LLMK_DEVICE const Code* any_v() const { return pages.v_pages; }
  /// K and V rows share one offset (SharedOffsetKv): k_pages + off and v_pages + off, -1 for a bad page.
  LLMK_DEVICE std::int64_t row_offset(int b, int head, int key) const {
    return pages.row_offset(b, head, key);
  }

  /// The K and V codes of token `key` (nullptr for a bad page) and their scales.
  LLMK_DEVICE void code_rows(int b, int head, int key, const Code*& k, const Code*& v, float& k_scale,
                             float& v_scale) const {
    int p, slot;
    pages.locate(b, key, p, slot);
    if (p < 0) {
      k = v = nullptr;
      k_scale = v_scale = 0.0f;
      return;
    }
    const std::int64_t off = pages.row_offset_at(p, slot, head);
    k = pages.k_pages + off;
    v = pages.v_pages + off;
    k_scale = pages.scale(pages.k_scales, p, slot, head);
    v_scale = pages.scale(pages.v_scales, p, slot, head);
  }
};

/// Whether an accessor reads a quantized cache (only PagedKvRows<T, 8-bit code> does).
template <class Kv>
struct IsQuantizedKv : std::false_type {};
template <class T, class Code>
struct IsQuantizedKv<PagedKvRows<T, Code>> : std::bool_constant<PagedKvRows<T, Code>::kQuantized> {};

}  // namespace llmk::attention::detail
