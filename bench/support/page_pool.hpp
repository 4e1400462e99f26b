// bench/support/page_pool.hpp: the page pool of the paged-attention benchmarks (bench/paged_attention.cu,
// bench/paged_prefill.cu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "bench_data.hpp"
#include "llmk/core/memory.cuh"
#include "llmk/kvcache/paged_kv.cuh"

namespace llmk::bench {

/// K and V of `pages` NHD pages (page_size tokens x kv_heads x d), normal random codes; a quantized Code gets
/// random scales too: int8 per token-head (a scale row read with every K/V row), fp8 one per tensor. view()
/// is the PagedKv over the pool with no table yet (the benchmark sets its table form).
template <class T, class Code = T>
struct PagePool {
  static constexpr bool kQuantized = !std::is_same_v<T, Code>;
  static constexpr bool kPerRowScales = std::is_same_v<Code, std::int8_t>;
  kvcache::PageStrides strides;
  std::size_t pages;
  int page_size;
  DeviceBuffer<Code> k, v;
  DeviceBuffer<float> k_scales, v_scales;

  PagePool(std::size_t pages_, int page_size_, int kv_heads, int d)
      : strides(kvcache::make_nhd_strides(page_size_, kv_heads, d)),
        pages(pages_),
        page_size(page_size_),
        k(pages_ * static_cast<std::size_t>(strides.page)),
        v(k.size()),
        k_scales(kPerRowScales ? pages_ * page_size_ * kv_heads : 1),
        v_scales(k_scales.size()) {
    fill_normal(k, 2);
    fill_normal(v, 3);
    if constexpr (kQuantized) {
      fill_normal(k_scales, 4);
      fill_normal(v_scales, 5);
    }
  }

  kvcache::PagedKv<T, Code> view() const {
    kvcache::PagedKv<T, Code> p;
    p.k_pages = k.data();
    p.v_pages = v.data();
    if constexpr (kQuantized) {
      p.scale_mode = kPerRowScales ? kvcache::KvScale::kPerTokenHead : kvcache::KvScale::kPerTensor;
      p.k_scales = k_scales.data();
      p.v_scales = v_scales.data();
    }
    p.strides = strides;
    p.page_size = page_size;
    p.num_pages = static_cast<int>(pages);
    return p;
  }
};

}  // namespace llmk::bench
