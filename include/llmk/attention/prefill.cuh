// llmk/attention/prefill.cuh: the prefill launchers, choosing the kernel at runtime.
//
//   sm_90 device with sm_90a code (dense, paged or quantized   the Hopper kernel (prefill_sm90.cuh: TMA /
//   page paged K/V; GQA groups up to 128, larger ones that have a   gather, wgmma, warp specialization)
//   divisor in [64, 128])
//   everything else (sm_80/89; a prime group above 128)        the mma.sync kernel (prefill_mma.cuh)
//
// Both compute the same attention (masks, soft-cap, GQA packing, varlen, LSE) within the FlashAttention
// tolerance rule; the explicit forms prefill_mma_with_config / prefill_sm90_with_config pin one kernel (for
// benchmarks of variants, or bit-stable results across machines).
#pragma once

#include <type_traits>

#include "llmk/attention/prefill_mma.cuh"
#include "llmk/attention/prefill_sm90.cuh"

namespace llmk::attention {

/// Prefill attention for one head dim (any multiple of 16 up to 256): out = softmax(scale * Q K^T, masked) V
/// per query head, fp32 accumulation, output rounded to T. On sm_90 (sm_90a code in the build) the Hopper
/// kernel runs with DefaultSm90PrefillConfig<Cfg::kHeadDim>; elsewhere the mma.sync kernel with the tiles of
/// Cfg.
///
///   llmk::attention::PrefillArgs<llmk::half> a;
///   a.q = q; a.q_stride_token = H * 80; a.q_stride_head = 80;   // [tokens, H, 80], and so on for k, v, o
///   ...
///   a.batch = 1; a.q_len = a.kv_len = n; a.num_heads = H; a.num_kv_heads = H_kv; a.head_dim = 80;
///   a.options.softmax_scale = llmk::attention::default_scale(80); a.options.causal = true;
///   namespace attn = llmk::attention;
///   llmk::Status s = attn::prefill_with_config<llmk::half, attn::DefaultPrefillConfig<80>>(a, stream);
///
/// Errors (Status::invalid_argument naming the argument): head_dim != Cfg::kHeadDim, null or misaligned
/// tensors, strides not multiples of 8 elements, num_heads not a multiple of num_kv_heads, bad lengths or
/// offsets, bad options. Empty sequences are allowed (nothing is written for q_len = 0). A failed launch:
/// Status::cuda_error.
///
/// CUDA graphs: the launch reads the host offsets (cu_seqlens_*_host, or q_len / kv_len): the grid (the
/// longest query), the Hopper kernel's tensor maps (the total query and key counts) and its block order are
/// fixed by them. A captured prefill replays correctly only with device offsets within those it was captured
/// with: capture with the largest (padded) lengths. Rows past them are not written; keys past them read as
/// zeros.
template <class T, class Cfg>
Status prefill_with_config(const PrefillArgs<T>& args, cudaStream_t stream) {
  using HopperCfg = DefaultSm90PrefillConfig<Cfg::kHeadDim>;
  int max_q_len = 0;
  LLMK_RETURN_IF_ERROR((detail::validate_prefill_launch<T, Cfg>(args, &max_q_len)));
  if (detail::sm90_prefill_applies<T, HopperCfg>(args))
    return detail::launch_prefill_sm90<T, HopperCfg>(args, max_q_len, stream);
  return prefill_mma_with_config<T, Cfg>(args, stream);
}

/// Prefill attention for the runtime head dims (kRuntimeHeadDims) with the default tiles; any other head dim
/// returns Status::invalid_argument naming the explicit instantiation to use. See prefill_with_config() (the
/// arguments and the other errors, which are the same).
///
///   a.head_dim = 128; a.options.softmax_scale = llmk::attention::default_scale(128);   // a as there
///   LLMK_RETURN_IF_ERROR(llmk::attention::prefill(a, stream));
template <class T>
Status prefill(const PrefillArgs<T>& args, cudaStream_t stream) {
  return detail::dispatch_head_dim(
      args.head_dim, "prefill_with_config<T, DefaultPrefillConfig<", [&](auto dim) {
        return prefill_with_config<T, DefaultPrefillConfig<decltype(dim)::value>>(args, stream);
      });
}

/// prefill() on the mma.sync kernel on every architecture (the runtime head dims, default tiles): the same
/// results within the tolerance rule, e.g. to compare against the Hopper kernel. Errors: those of prefill().
///
///   LLMK_RETURN_IF_ERROR(llmk::attention::prefill_mma(a, stream));   // a as for prefill()
template <class T>
Status prefill_mma(const PrefillArgs<T>& args, cudaStream_t stream) {
  return detail::dispatch_head_dim(
      args.head_dim, "prefill_mma_with_config<T, DefaultPrefillConfig<", [&](auto dim) {
        return prefill_mma_with_config<T, DefaultPrefillConfig<decltype(dim)::value>>(args, stream);
      });
}

/// Prefill over a paged KV cache (chunked prefill): the queries of each sequence (args.q with cu_seqlens_q or
/// q_len, as for prefill_with_config) attend to the keys of the sequence's pages, bottom-right aligned:
/// append the chunk's own K/V to the cache first (llmk::kvcache::append_kv), then a causal mask lets each new
/// token see the cached prefix and the chunk up to itself. args.k, args.v and args.cu_seqlens_k must be null.
/// On sm_90 the Hopper kernel runs (its producer warpgroup gathers fp16/bf16 rows from the pages, or
/// dequantizes int8/fp8 codes into its ring); elsewhere the mma.sync kernel with the tiles of Cfg.
///
///   llmk::kvcache::PagedKv<llmk::half> pages;   // pools, strides, page_size, num_pages, one table form
///   a.q = chunk_q; a.cu_seqlens_q = ...; a.options.causal = true;
///   llmk::Status s = llmk::attention::prefill_paged(a, pages, stream);
///   // the explicit form, e.g. for head dim 80 (not dispatched by prefill_paged):
///   s = llmk::attention::prefill_paged_with_config<
///       llmk::half, llmk::attention::DefaultPagedPrefillConfig<80, llmk::half>>(a, pages, stream);
///
/// Errors (Status::invalid_argument naming the argument): the checks of prefill_with_config on Q, O, the
/// query lengths (cu_seqlens_q with cu_seqlens_q_host, or q_len), the heads and the options, head_dim !=
/// Cfg::kHeadDim included; k, v or cu_seqlens_k not null ('k/v/cu_seqlens_k'); the page view's checks
/// (kvcache::validate_paged_kv, naming 'pages.<field>': pools, page_size, num_pages, strides, a quantized
/// cache's scale mode and scales, exactly one table form with its host copies, lengths up to 2^30). A failed
/// launch: Status::cuda_error.
template <class T, class Cfg, class Code = T>
Status prefill_paged_with_config(const PrefillArgs<T>& args, const kvcache::PagedKv<T, Code>& pages,
                                 cudaStream_t stream) {
  using HopperCfg = DefaultSm90PrefillConfig<Cfg::kHeadDim>;
  if (args.head_dim == Cfg::kHeadDim && detail::sm90_prefill_applies<T, HopperCfg>(args))
    return prefill_paged_sm90_with_config<T, HopperCfg, Code>(args, pages, stream);
  return prefill_paged_mma_with_config<T, Cfg, Code>(args, pages, stream);
}

/// prefill_paged_with_config() for the runtime head dims (kRuntimeHeadDims); see there (example and errors).
/// A head dim outside kRuntimeHeadDims: invalid_argument naming 'head_dim' and the explicit instantiation.
template <class T, class Code>
Status prefill_paged(const PrefillArgs<T>& args, const kvcache::PagedKv<T, Code>& pages,
                     cudaStream_t stream) {
  return detail::dispatch_head_dim(
      args.head_dim, "prefill_paged_with_config<T, DefaultPrefillConfig<", [&](auto dim) {
        return prefill_paged_with_config<T, DefaultPagedPrefillConfig<decltype(dim)::value, Code>, Code>(
            args, pages, stream);
      });
}

/// prefill_paged() on the mma.sync kernel on every architecture. Errors: those of prefill_paged_with_config,
/// and a head dim outside kRuntimeHeadDims ('head_dim').
///
///   // a, pages as for prefill_paged:
///   llmk::Status s = llmk::attention::prefill_paged_mma(a, pages, stream);
template <class T, class Code>
Status prefill_paged_mma(const PrefillArgs<T>& args, const kvcache::PagedKv<T, Code>& pages,
                         cudaStream_t stream) {
  return detail::dispatch_head_dim(
      args.head_dim, "prefill_paged_mma_with_config<T, DefaultPrefillConfig<", [&](auto dim) {
        return prefill_paged_mma_with_config<T, DefaultPagedPrefillConfig<decltype(dim)::value, Code>, Code>(
            args, pages, stream);
      });
}

}  // namespace llmk::attention
