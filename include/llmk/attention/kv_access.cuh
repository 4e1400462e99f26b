// llmk/attention/kv_access.cuh: where the attention kernels find key/value rows. The kernels are written
// against three members, so one kernel source reads a dense ragged batch (prefill), a dense batched cache
// (decode) or a paged cache (llmk/kvcache/paged_kv.cuh):
//   int length(b)                      keys of sequence b
//   const T* k_row(b, head, key)       the key row (nullptr: zero-fill it), v_row likewise
//   const T* any_k(), any_v()          a valid address for zero-filling copies
#pragma once

#include <cstdint>

#include "llmk/config.cuh"
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
};

/// A paged cache: rows through the page table (a bad page index zero-fills after the checked-build trap).
template <class T>
struct PagedKvRows {
  kvcache::PagedKv<T> pages;

  LLMK_DEVICE int length(int b) const { return pages.length(b); }
  LLMK_DEVICE const T* k_row(int b, int head, int key) const {
    const std::int64_t off = pages.row_offset(b, head, key);
    return off < 0 ? nullptr : pages.k_pages + off;
  }
  LLMK_DEVICE const T* v_row(int b, int head, int key) const {
    const std::int64_t off = pages.row_offset(b, head, key);
    return off < 0 ? nullptr : pages.v_pages + off;
  }
  LLMK_DEVICE const T* any_k() const { return pages.k_pages; }
  LLMK_DEVICE const T* any_v() const { return pages.v_pages; }
};

}  // namespace llmk::attention::detail
