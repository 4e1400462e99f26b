// llmk/attention/prefill_fp8.cuh: fp8 prefill attention on Hopper: e4m3 Q, K and V with descale factors, a
// half / bfloat16 output, on the kernel of prefill_sm90.cuh with 8-bit wgmma (QGMMA) for both products.
//
//   S = (Q K^T) * q_descale * k_descale        QGMMA e4m3 x e4m3 -> fp32; the descales fold into the
//                                              softmax scale (one FFMA + exp2 per score, as in fp16)
//   P = 2^(S' - m + 8), rounded to e4m3        in registers, the A operand of the next QGMMA
//   O = (P V) * v_descale / l                  V transposed in shared memory by the producer warpgroup
//
// Accuracy: Q, K and V enter exactly (their codes times the descales); the products accumulate in fp32. The
// one rounding fp16 attention does not have is P's: e4m3 keeps 3 mantissa bits, so each p has a relative
// error of at most 2^-4, and the +8 bias (p in (0, 256]) keeps probabilities down to 2^-14 of the row max
// out of the subnormals. The error of an output is therefore at most about 2^-4 * max |v| per row plus the
// fp16/bf16 rounding, and much less on average (the roundings of many keys cancel): docs/attention.md
// gives the figures measured against the fp64 reference.
//
// Paged caches: prefill_paged_fp8 reads the e4m3 pages of a kvcache::PagedKv<T, float8_e4m3> directly
// (no dequantization pass); the pages' per-tensor or per-head scales are K's and V's descale factors.
//
// sm_90 only: no other architecture has 8-bit tensor-core products of floats; elsewhere (and without sm_90a
// code in the build) the launchers return Status::unsupported.
#pragma once

#include <cstdint>

#include "llmk/attention/args.cuh"
#include "llmk/attention/prefill_mma.cuh"
#include "llmk/attention/prefill_sm90.cuh"
#include "llmk/attention/validate.cuh"
#include "llmk/core/status.cuh"
#include "llmk/kvcache/paged_kv.cuh"

namespace llmk::attention {

namespace detail {

/// A descale array: non-null and 4-byte aligned (paged: K's and V's must be null, the pages' scales are
/// used).
inline Status check_descale(const char* name, const float* p) {
  if (p == nullptr)
    return Status::invalid_argument(name, "must not be null (a device float per tensor or KV head)");
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(float) != 0)
    return Status::invalid_argument(name, "must be 4-byte aligned");
  return {};
}

template <class T, class Cfg>
Status validate_prefill_fp8_launch(const PrefillFp8Args<T>& args, bool dense_kv, int* max_q_len) {
  static_assert(Cfg::kFp8, "fp8 prefill takes an Sm90Fp8PrefillConfig");
  LLMK_RETURN_IF_ERROR(check_head_dim(args.head_dim, Cfg::kHeadDim));
  LLMK_RETURN_IF_ERROR(validate_prefill(args, max_q_len, dense_kv));
  if (args.descale.mode != Fp8Descale::kPerTensor && args.descale.mode != Fp8Descale::kPerKvHead)
    return Status::invalid_argument("descale.mode", "must be kPerTensor or kPerKvHead");
  LLMK_RETURN_IF_ERROR(check_descale("descale.q", args.descale.q));
  if (dense_kv) {
    LLMK_RETURN_IF_ERROR(check_descale("descale.k", args.descale.k));
    LLMK_RETURN_IF_ERROR(check_descale("descale.v", args.descale.v));
  } else if (args.descale.k != nullptr || args.descale.v != nullptr) {
    return Status::invalid_argument(
        "descale.k/descale.v", "must be null for a paged cache: the pages' scales are K's and V's descales");
  }
  return {};
}

}  // namespace detail

/// fp8 prefill with an explicit configuration (Sm90Fp8PrefillConfig<D, Bc, Stages>: D and Bc multiples of
/// 32): out = softmax(scale * (q_descale Q)(k_descale K)^T, masked) (v_descale V) per query head, with the
/// masks, soft-cap, GQA/MQA, varlen offsets and LSE of prefill_with_config.
///
///   llmk::attention::PrefillFp8Args<llmk::half> a;
///   a.q = q8; a.q_stride_token = H * 128; a.q_stride_head = 128;      // e4m3 [tokens, H, 128], and k, v
///   a.o = out; a.o_stride_token = H * 128; a.o_stride_head = 128;     // half [tokens, H, 128]
///   a.descale = {d_q_scale, d_k_scale, d_v_scale, llmk::attention::Fp8Descale::kPerTensor};  // device
///   a.batch = 1; a.q_len = a.kv_len = n; a.num_heads = H; a.num_kv_heads = H_kv; a.head_dim = 128;
///   a.options.softmax_scale = llmk::attention::default_scale(128); a.options.causal = true;
///   llmk::Status s = llmk::attention::prefill_fp8_with_config<
///       llmk::half, llmk::attention::Sm90Fp8PrefillConfig<128, 128, 2>>(a, stream);
///
/// Errors: the Status::invalid_argument checks of prefill_with_config (Q/K/V strides in multiples of 16
/// elements), a null or misaligned descale array, an unknown descale mode; Status::unsupported without an
/// sm_90 device and sm_90a code, or for a GQA group above 128 without a divisor in [64, 128].
template <class T, class Cfg>
Status prefill_fp8_with_config(const PrefillFp8Args<T>& args, cudaStream_t stream) {
  int max_q_len = 0;
  LLMK_RETURN_IF_ERROR((detail::validate_prefill_fp8_launch<T, Cfg>(args, true, &max_q_len)));
  LLMK_RETURN_IF_ERROR((detail::sm90_prefill_refusal<T, Cfg>(args, "prefill_fp8")));
  return detail::launch_prefill_sm90<T, Cfg>(args, max_q_len, stream);
}

/// prefill_fp8_with_config with DefaultSm90Fp8PrefillConfig for the runtime head dims (kRuntimeHeadDims).
/// Errors: those of prefill_fp8_with_config, and a head dim outside kRuntimeHeadDims ('head_dim').
///
///   llmk::Status s = llmk::attention::prefill_fp8(a, stream);   // a as for prefill_fp8_with_config
template <class T>
Status prefill_fp8(const PrefillFp8Args<T>& args, cudaStream_t stream) {
  return detail::dispatch_head_dim(
      args.head_dim, "prefill_fp8_with_config<T, DefaultSm90Fp8PrefillConfig<",
      [&](auto d) { return prefill_fp8_with_config<T, DefaultSm90Fp8PrefillConfig<d.value>>(args, stream); });
}

/// fp8 prefill over a paged e4m3 cache, read without dequantizing: args.k, args.v, args.cu_seqlens_k,
/// descale.k and descale.v are null (the pages hold the keys, their per-tensor / per-head scales are the
/// descales); descale.q is required. Pages, block tables and layouts as prefill_paged_with_config.
///
///   llmk::attention::PrefillFp8Args<llmk::half> a = ...;   // Q, O, cu_seqlens_q, descale.q, shapes
///   llmk::kvcache::PagedKv<llmk::half, llmk::float8_e4m3> pages = ...;   // kPerTensor or kPerHead scales
///   llmk::Status s = llmk::attention::prefill_paged_fp8(a, pages, stream);
///   // the explicit form, tiles of one's own choice:
///   s = llmk::attention::prefill_paged_fp8_with_config<
///       llmk::half, llmk::attention::Sm90Fp8PrefillConfig<128, 128, 2>>(a, pages, stream);
///
/// Errors: the Status::invalid_argument checks of prefill_fp8_with_config on Q, O, the query lengths, the
/// options and descale.q; k, v or cu_seqlens_k not null; descale.k or descale.v not null; the page view's
/// checks (kvcache::validate_paged_kv, naming 'pages.<field>'; fp8 pages take kPerTensor or kPerHead
/// scales); Status::unsupported as for prefill_fp8_with_config.
template <class T, class Cfg>
Status prefill_paged_fp8_with_config(const PrefillFp8Args<T>& args,
                                     const kvcache::PagedKv<T, float8_e4m3>& pages, cudaStream_t stream) {
  int max_q_len = 0, max_kv_len = 0;
  LLMK_RETURN_IF_ERROR((detail::validate_prefill_fp8_launch<T, Cfg>(args, false, &max_q_len)));
  kvcache::PagedKv<T, float8_e4m3> view = pages;
  LLMK_RETURN_IF_ERROR(
      kvcache::validate_paged_kv(view, args.batch, args.num_kv_heads, args.head_dim, &max_kv_len));
  LLMK_RETURN_IF_ERROR((detail::sm90_prefill_refusal<T, Cfg>(args, "prefill_paged_fp8")));
  return detail::launch_prefill_sm90_paged<T, Cfg>(args, max_q_len, max_kv_len, view, stream);
}

/// prefill_paged_fp8_with_config with DefaultSm90Fp8PrefillConfig for the runtime head dims
/// (kRuntimeHeadDims); see there (example and errors). A head dim outside kRuntimeHeadDims: invalid_argument
/// naming 'head_dim'.
template <class T>
Status prefill_paged_fp8(const PrefillFp8Args<T>& args, const kvcache::PagedKv<T, float8_e4m3>& pages,
                         cudaStream_t stream) {
  return detail::dispatch_head_dim(
      args.head_dim, "prefill_paged_fp8_with_config<T, DefaultSm90Fp8PrefillConfig<", [&](auto d) {
        return prefill_paged_fp8_with_config<T, DefaultSm90Fp8PrefillConfig<d.value>>(args, pages, stream);
      });
}

}  // namespace llmk::attention
