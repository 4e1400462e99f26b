// llmk/attention/args.cuh: the arguments of the attention launchers (prefill and decode).
//
// Tensors are ragged, token-major: Q [total_q, num_heads, head_dim], K and V [total_kv, num_kv_heads,
// head_dim], O like Q, each with its own token and head strides in elements (the head_dim axis is
// contiguous). Sequence b owns tokens [cu_seqlens[b], cu_seqlens[b + 1]). Query head h reads KV head h /
// (num_heads / num_kv_heads) (MHA: equal counts, GQA: a divisor, MQA: one KV head).
#pragma once

#include <cmath>
#include <cstdint>

#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"

namespace llmk::attention {

/// Options shared by prefill and decode. softmax_scale multiplies Q K^T before everything else (the usual
/// value is 1 / sqrt(head_dim), see default_scale()); softcap > 0 applies score = softcap * tanh(score /
/// softcap) after the scale (Gemma 2 / Grok style); the mask is described in mask.cuh. The launchers reject a
/// softmax_scale that is not finite and > 0, a softcap that is not finite and >= 0, and windows below -1.
///   a.options = {llmk::attention::default_scale(128), /*softcap=*/0.0f, /*causal=*/true,
///                /*window_left=*/4095};
struct AttentionOptions {
  float softmax_scale = 0.0f;  // must be set (> 0 and finite)
  float softcap = 0.0f;        // 0: off
  bool causal = false;
  int window_left = -1;   // -1: unbounded
  int window_right = -1;  // -1: unbounded (causal forces <= 0)
};

/// 1 / sqrt(head_dim), the scale of "Attention Is All You Need"; 0 for head_dim <= 0 (which the launchers
/// then reject by name: options.softmax_scale must be > 0).
///   args.options.softmax_scale = llmk::attention::default_scale(128);  // 0.0883883
inline float default_scale(int head_dim) {
  return head_dim > 0 ? 1.0f / std::sqrt(static_cast<float>(head_dim)) : 0.0f;
}

/// Arguments of prefill(): a batch of variable-length sequences, every query attending to its own sequence's
/// keys (bottom-right aligned when q_len != kv_len). T is half or bfloat16. The rules each field must meet:
/// prefill_with_config (prefill.cuh, whose example sets equal lengths); a varlen batch:
///   llmk::attention::PrefillArgs<llmk::half> a;   // q, o [total_q, 32, 128]; k, v [total_kv, 8, 128]
///   a.q = q; a.q_stride_token = 32 * 128; a.q_stride_head = 128;   // and so on for k, v and o
///   a.cu_seqlens_q = d_cu_q; a.cu_seqlens_q_host = cu_q.data();   // [B + 1]; the same for _k
///   a.batch = B; a.num_heads = 32; a.num_kv_heads = 8; a.head_dim = 128;   // options as there
template <class T>
struct PrefillArgs {
  const T* q = nullptr;
  std::int64_t q_stride_token = 0, q_stride_head = 0;
  const T* k = nullptr;
  std::int64_t k_stride_token = 0, k_stride_head = 0;
  const T* v = nullptr;
  std::int64_t v_stride_token = 0, v_stride_head = 0;
  T* o = nullptr;
  std::int64_t o_stride_token = 0, o_stride_head = 0;
  /// Optional [total_q, num_heads] (contiguous) natural-log sum of exp of the scaled scores of each row.
  float* lse = nullptr;

  /// Device cumulative offsets [batch + 1] of queries and keys, and the same arrays on the host (used to
  /// validate and to size the grid; they must hold the same values). Both null: every sequence has q_len
  /// queries and kv_len keys, sequence b starting at token b * q_len (b * kv_len).
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  const int* cu_seqlens_q_host = nullptr;
  const int* cu_seqlens_k_host = nullptr;
  int q_len = 0, kv_len = 0;  // used when the offsets are null

  int batch = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  AttentionOptions options;
};

/// Where the descale factors of an fp8 operand live: one value for the whole tensor, or one per KV head
/// (FlashAttention-3's per-head granularity; the query heads of a GQA group share their KV head's value).
enum class Fp8Descale : int { kPerTensor = 0, kPerKvHead = 1 };

/// The device arrays of fp8 descale factors: value = code * descale. Each holds 1 float (kPerTensor) or
/// num_kv_heads floats (kPerKvHead), 4-byte aligned. Read on the device, so their values are not validated:
/// a NaN, infinite or zero descale gives NaN, infinite or zero rows, or finite ones under a soft-cap
/// (docs/attention.md, "Special values", states which).
///   a.descale = {d_q_scale, d_k_scale, d_v_scale, llmk::attention::Fp8Descale::kPerKvHead};
struct Fp8Descales {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  Fp8Descale mode = Fp8Descale::kPerTensor;
};

/// Arguments of prefill_fp8(): PrefillArgs with e4m3 Q, K and V (their codes times the descale factors are
/// the values attended to) and a T = half / bfloat16 output. Strides are in elements (bytes) and multiples of
/// 16 for Q/K/V, multiples of 8 for O. See PrefillArgs for the shapes, offsets and options, and
/// prefill_fp8_with_config (prefill_fp8.cuh) for an example.
template <class T>
struct PrefillFp8Args {
  const float8_e4m3* q = nullptr;
  std::int64_t q_stride_token = 0, q_stride_head = 0;
  const float8_e4m3* k = nullptr;
  std::int64_t k_stride_token = 0, k_stride_head = 0;
  const float8_e4m3* v = nullptr;
  std::int64_t v_stride_token = 0, v_stride_head = 0;
  T* o = nullptr;
  std::int64_t o_stride_token = 0, o_stride_head = 0;
  float* lse = nullptr;
  Fp8Descales descale;

  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  const int* cu_seqlens_q_host = nullptr;
  const int* cu_seqlens_k_host = nullptr;
  int q_len = 0, kv_len = 0;

  int batch = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  AttentionOptions options;
};

/// Arguments of decode(): one new query token per sequence over its KV history.
///   Q [batch, num_heads, head_dim], O like Q; K/V [batch, max_kv_len, num_kv_heads, head_dim] with strides.
/// Sequence b attends to its first kv_lens[b] keys (all max_kv_len when kv_lens is null). The query is the
/// last token: a causal mask changes nothing, window_left limits the history to the last window_left + 1
/// keys. The rules each field must meet: plan_decode_with_config (decode.cuh).
///   llmk::attention::DecodeArgs<llmk::half> a;   // q, o [B, 32, 128]; k, v [B, L, 8, 128]; o, v as q, k
///   a.q = q; a.q_stride_batch = 32 * 128; a.q_stride_head = 128; a.k = k; a.k_stride_batch = L * 8 * 128;
///   a.k_stride_token = 8 * 128; a.k_stride_head = 128; a.max_kv_len = L; a.batch = B; a.head_dim = 128;
///   a.num_heads = 32; a.num_kv_heads = 8; a.options.softmax_scale = llmk::attention::default_scale(128);
template <class T>
struct DecodeArgs {
  const T* q = nullptr;
  std::int64_t q_stride_batch = 0, q_stride_head = 0;
  const T* k = nullptr;
  std::int64_t k_stride_batch = 0, k_stride_token = 0, k_stride_head = 0;
  const T* v = nullptr;
  std::int64_t v_stride_batch = 0, v_stride_token = 0, v_stride_head = 0;
  T* o = nullptr;
  std::int64_t o_stride_batch = 0, o_stride_head = 0;
  float* lse = nullptr;  // optional [batch, num_heads], natural log

  const int* kv_lens = nullptr;       // device [batch]; null: every sequence has max_kv_len keys
  const int* kv_lens_host = nullptr;  // the same values on the host (required with kv_lens)
  int max_kv_len = 0;

  int batch = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  AttentionOptions options;  // causal and window_right are accepted and have no effect
};

}  // namespace llmk::attention
