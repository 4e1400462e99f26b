// llmk/attention/validate.cuh: the argument checks shared by the attention launchers. Each returns a Status
// naming the argument and the rule it broke.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>
#include <type_traits>
#include <utility>

#include "llmk/attention/args.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"

/// The head dims the runtime launchers (prefill(), prefill_paged(), decode(), decode_paged(), the fp8
/// prefills) dispatch, each with its default tiles. An engine that serves known models can compile only the
/// dims it needs (compile time and binary size: each dim is a decode, a prefill and, on sm_90, a Hopper
/// prefill kernel per dtype and cache type) by defining the list before including llmk:
///
///   #define LLMK_ATTENTION_HEAD_DIMS 64, 128   // or -DLLMK_ATTENTION_HEAD_DIMS=64,128
///   #include "llmk/attention/prefill.cuh"
///
/// Each entry must be a multiple of 16 from 16 to 256 that the launchers you call accept; a head dim outside
/// the list is rejected at runtime with the explicit instantiation to call instead. Every translation unit of
/// a program must see the same list.
#ifndef LLMK_ATTENTION_HEAD_DIMS
#define LLMK_ATTENTION_HEAD_DIMS 64, 96, 128, 256
#endif
#define LLMK_DETAIL_STRINGIFY_(...) #__VA_ARGS__
#define LLMK_DETAIL_STRINGIFY(...) LLMK_DETAIL_STRINGIFY_(__VA_ARGS__)

namespace llmk::attention {

/// The head dims the runtime launchers dispatch (LLMK_ATTENTION_HEAD_DIMS). Others (any multiple of 16 up to
/// 256) need an explicit instantiation: prefill_with_config<T, DefaultPrefillConfig<80>>(args, stream).
inline constexpr int kRuntimeHeadDims[] = {LLMK_ATTENTION_HEAD_DIMS};

namespace detail {
constexpr bool runtime_head_dims_valid() {
  for (int d : kRuntimeHeadDims)
    if (d < 16 || d > 256 || d % 16 != 0) return false;
  return true;
}
}  // namespace detail
static_assert(detail::runtime_head_dims_valid(),
              "LLMK_ATTENTION_HEAD_DIMS: every head dim must be a multiple of 16 from 16 to 256");

}  // namespace llmk::attention

namespace llmk::attention::detail {

inline Status check_heads(int num_heads, int num_kv_heads) {
  if (num_heads < 1) return Status::invalid_argument("num_heads", str_cat("must be >= 1, got ", num_heads));
  if (num_kv_heads < 1)
    return Status::invalid_argument("num_kv_heads", str_cat("must be >= 1, got ", num_kv_heads));
  if (num_heads % num_kv_heads != 0)
    return Status::invalid_argument("num_heads",
                                    str_cat("must be a multiple of num_kv_heads (GQA/MQA), got ", num_heads,
                                            " query heads and ", num_kv_heads, " KV heads"));
  return {};
}

inline Status check_options(const AttentionOptions& o) {
  if (!(o.softmax_scale > 0.0f) || !std::isfinite(o.softmax_scale))
    return Status::invalid_argument(
        "options.softmax_scale",
        str_cat("must be finite and > 0 (e.g. 1/sqrt(head_dim)), got ", o.softmax_scale));
  if (!(o.softcap >= 0.0f) || !std::isfinite(o.softcap))
    return Status::invalid_argument("options.softcap",
                                    str_cat("must be finite and >= 0 (0: off), got ", o.softcap));
  if (o.window_left < -1)
    return Status::invalid_argument("options.window_left",
                                    str_cat("must be >= 0, or -1 for unbounded, got ", o.window_left));
  if (o.window_right < -1)
    return Status::invalid_argument("options.window_right",
                                    str_cat("must be >= 0, or -1 for unbounded, got ", o.window_right));
  return {};
}

/// A tensor pointer: non-null and 16-byte aligned (rows move in 16-byte vectors).
inline Status check_tensor_pointer(std::string_view name, const void* p) {
  if (p == nullptr) return Status::invalid_argument(name, "must not be null");
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
    return Status::invalid_argument(name, "must be 16-byte aligned (rows are moved in 16-byte vectors)");
  return {};
}

/// A stride in elements of `elem_bytes` bytes: a positive multiple of 16 bytes, so every row stays aligned.
inline Status check_stride(std::string_view name, std::int64_t stride, int elem_bytes = 2) {
  const int per16 = 16 / elem_bytes;
  if (stride <= 0 || stride % per16 != 0)
    return Status::invalid_argument(name,
                                    str_cat("must be a positive multiple of ", per16, " elements (16 bytes) ",
                                            "so rows stay 16-byte aligned, got ", stride));
  return {};
}

/// One side of an attention operand, [outer, heads, head_dim] with element strides: a non-null 16-byte
/// aligned pointer, strides that are multiples of 16 bytes (the outer one only when it is used), and a head
/// stride that covers a row.
inline Status check_rows(std::string_view name, const void* p, std::string_view head_stride_name,
                         std::int64_t head_stride, std::string_view outer_stride_name,
                         std::int64_t outer_stride, bool outer_used, std::int64_t head_dim,
                         int elem_bytes = 2) {
  LLMK_RETURN_IF_ERROR(check_tensor_pointer(name, p));
  LLMK_RETURN_IF_ERROR(check_stride(head_stride_name, head_stride, elem_bytes));
  if (outer_used) LLMK_RETURN_IF_ERROR(check_stride(outer_stride_name, outer_stride, elem_bytes));
  if (head_stride < head_dim)
    return Status::invalid_argument(head_stride_name,
                                    str_cat("must be >= head_dim (", head_dim, "), got ", head_stride));
  return {};
}

/// Host copy of cumulative offsets: starts at 0, never decreases; returns the largest length in *max_len.
inline Status check_offsets(std::string_view name, const int* cu, int batch, int* max_len) {
  if (cu == nullptr)
    return Status::invalid_argument(name,
                                    "host copy must be given with the device offsets (it sizes the grid)");
  if (cu[0] != 0) return Status::invalid_argument(name, str_cat("must start at 0, got ", cu[0]));
  *max_len = 0;
  for (int b = 0; b < batch; ++b) {
    const long long len = static_cast<long long>(cu[b + 1]) - cu[b];
    if (len < 0)
      return Status::invalid_argument(name, str_cat("must not decrease (sequence ", b, " has length ", len,
                                                    ": ", cu[b + 1], " - ", cu[b], ")"));
    if (len > *max_len) *max_len = static_cast<int>(len);
  }
  return {};
}

inline Status check_head_dim(int head_dim, int compiled) {
  if (head_dim != compiled)
    return Status::invalid_argument(
        "head_dim", str_cat("is ", head_dim, " but this configuration is compiled for ", compiled));
  return {};
}

/// The one runtime-to-compile-time switch of the attention launchers: calls f(std::integral_constant<int, D>)
/// for the runtime head dims (kRuntimeHeadDims, LLMK_ATTENTION_HEAD_DIMS); any other head dim is an error
/// naming the explicit instantiation (`instantiate` is its prefix, e.g. "prefill_with_config<T,
/// DefaultPrefillConfig<").
template <class F, std::size_t... I>
Status dispatch_head_dim(int head_dim, const char* instantiate, F&& f, std::index_sequence<I...>) {
  Status result;
  const bool listed =
      ((head_dim == kRuntimeHeadDims[I]
            ? (static_cast<void>(result = f(std::integral_constant<int, kRuntimeHeadDims[I]>{})), true)
            : false) ||
       ...);
  if (listed) return result;
  return Status::invalid_argument(
      "head_dim", str_cat(head_dim,
                          " is not dispatched at runtime (" LLMK_DETAIL_STRINGIFY(
                              LLMK_ATTENTION_HEAD_DIMS) " are); for a multiple of 16 up to 256 call ",
                          instantiate, head_dim, ">>"));
}

template <class F>
Status dispatch_head_dim(int head_dim, const char* instantiate, F&& f) {
  return dispatch_head_dim(head_dim, instantiate, std::forward<F>(f),
                           std::make_index_sequence<std::size(kRuntimeHeadDims)>{});
}

}  // namespace llmk::attention::detail
