// llmk/kvcache/planner.hpp: KV-cache memory arithmetic (host only; constexpr where possible).
//
// The formulas (all sizes in bytes, 64-bit):
//   KV bytes per token  = 2 (K and V) x layers x kv_heads x (head_dim x bytes(dtype) + scale bytes per head)
//   KV bytes            = batch x seq_len x KV bytes per token
//   block bytes         = page_size x KV bytes per token
//   GPT weight params   = V d + L (12 d^2 + 13 d)        (V vocab, d model width, L layers)
//   GPT weight bytes    = GPT weight params x bytes(dtype)
//   blocks that fit     = floor((memory budget - weight bytes - reserved bytes) / block bytes), >= 0
//   GQA saving          = 1 - kv_heads / heads           (the fraction of MHA's KV memory that GQA/MQA saves)
//
// The GPT formula counts per layer 4 d^2 (Q, K, V, output projections) + 8 d^2 (MLP d -> 4d -> d) weights and
// 13 d biases and LayerNorm parameters (4d + d + 4d + d + 2 x 2d), plus the token embedding V d (tied with
// the LM head). It leaves out the learned position embedding (n_ctx x d) and the final LayerNorm (2 d),
// exactly as written in the literature; add them for an exact GPT-2 count (124,439,808 for GPT-2 small).
// Models with GQA, gated MLPs or untied heads differ: give their weight bytes explicitly
// (PlanRequest::weight_bytes).
//
// The worked example (d = 4096 = 32 heads x 128, L = 32, fp16, batch 64, seq_len 2048):
//   static_assert(llmk::kvcache::kv_bytes(64, 2048, 32, 32, 128, 2) == 68'719'476'736);  // ~68.7 GB
//   // ~1.07 GB per sequence:
//   static_assert(llmk::kvcache::kv_bytes(1, 2048, 32, 32, 128, 2) == 1'073'741'824);
//   // 8 KV heads of 32: a quarter
//   static_assert(llmk::kvcache::kv_bytes(1, 2048, 32, 8, 128, 2) * 4 == 1'073'741'824);
//
// The constexpr helpers have the precondition that arguments are >= 0 and nothing overflows int64 (in a
// constant expression an overflow is a compile error). For run-time values use plan_memory(), which validates
// its arguments and checks every product and sum for overflow, returning a Status.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "llmk/core/status.cuh"

namespace llmk::kvcache {

// ---------------------------------------------------------------------------------------------------------------
// Checked arithmetic
// ---------------------------------------------------------------------------------------------------------------

/// a * b, or nullopt when it overflows int64.
///   static_assert(!llmk::kvcache::checked_mul(std::int64_t{1} << 62, 2).has_value());
constexpr std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// a + b, or nullopt when it overflows int64.
///   static_assert(!llmk::kvcache::checked_add(std::numeric_limits<std::int64_t>::max(), 1).has_value());
constexpr std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// constexpr formulas
// ---------------------------------------------------------------------------------------------------------------

/// KV bytes of one token over all layers: 2 x layers x kv_heads x (head_dim x bytes_per_element +
/// scale_bytes_per_head). scale_bytes_per_head is the per-(token, head) scale of a quantized cache, stored
/// once for K and once for V (e.g. 4 for an fp32 scale per token and head with int8 / fp8 KV).
///   static_assert(llmk::kvcache::kv_bytes_per_token(32, 32, 128, 2) == 524'288);      // 0.5 MiB / token
///   static_assert(llmk::kvcache::kv_bytes_per_token(32, 8, 128, 1, 4) == 67'584);     // int8 + fp32 scales
constexpr std::int64_t kv_bytes_per_token(std::int64_t layers, std::int64_t kv_heads, std::int64_t head_dim,
                                          std::int64_t bytes_per_element,
                                          std::int64_t scale_bytes_per_head = 0) {
  return 2 * layers * kv_heads * (head_dim * bytes_per_element + scale_bytes_per_head);
}

/// kv_bytes_per_token for sub-byte elements: head_dim x bits_per_element bits per head and K or V, rounded up
/// to whole bytes (int4 KV: bits_per_element = 4).
///   static_assert(llmk::kvcache::kv_bytes_per_token_bits(32, 8, 128, 4, 2) == 32 * 8 * 2 * (64 + 2));
constexpr std::int64_t kv_bytes_per_token_bits(std::int64_t layers, std::int64_t kv_heads,
                                               std::int64_t head_dim, std::int64_t bits_per_element,
                                               std::int64_t scale_bytes_per_head = 0) {
  return 2 * layers * kv_heads * ((head_dim * bits_per_element + 7) / 8 + scale_bytes_per_head);
}

/// KV bytes of `batch` sequences of `seq_len` tokens: batch x seq_len x kv_bytes_per_token(...).
///   static_assert(llmk::kvcache::kv_bytes(64, 2048, 32, 32, 128, 2) == 68'719'476'736);
constexpr std::int64_t kv_bytes(std::int64_t batch, std::int64_t seq_len, std::int64_t layers,
                                std::int64_t kv_heads, std::int64_t head_dim, std::int64_t bytes_per_element,
                                std::int64_t scale_bytes_per_head = 0) {
  return batch * seq_len *
         kv_bytes_per_token(layers, kv_heads, head_dim, bytes_per_element, scale_bytes_per_head);
}

/// Bytes of one KV block (page) of `page_size` tokens.
///   static_assert(llmk::kvcache::kv_block_bytes(16, 524'288) == 8'388'608);
constexpr std::int64_t kv_block_bytes(std::int64_t page_size, std::int64_t bytes_per_token) {
  return page_size * bytes_per_token;
}

/// Blocks a sequence of `seq_len` tokens occupies: ceil(seq_len / page_size), 0 for seq_len <= 0.
/// page_size >= 1 (a precondition, not checked).
///   static_assert(llmk::kvcache::blocks_per_sequence(33, 16) == 3);
constexpr std::int64_t blocks_per_sequence(std::int64_t seq_len, std::int64_t page_size) {
  return seq_len <= 0 ? 0 : (seq_len - 1) / page_size + 1;
}

/// Weight parameters of a GPT-style model: V d + L (12 d^2 + 13 d) (see the file comment for what it counts).
///   static_assert(llmk::kvcache::gpt_weight_params(50257, 768, 12) == 123'651'840);   // GPT-2 small
constexpr std::int64_t gpt_weight_params(std::int64_t vocab, std::int64_t d_model, std::int64_t layers) {
  return vocab * d_model + layers * (12 * d_model * d_model + 13 * d_model);
}

/// Weight bytes of a GPT-style model: gpt_weight_params(vocab, d_model, layers) x bytes_per_element.
///   static_assert(llmk::kvcache::gpt_weight_bytes(50257, 768, 12, 2) == 247'303'680);
constexpr std::int64_t gpt_weight_bytes(std::int64_t vocab, std::int64_t d_model, std::int64_t layers,
                                        std::int64_t bytes_per_element) {
  return gpt_weight_params(vocab, d_model, layers) * bytes_per_element;
}

/// KV blocks that fit in `memory_budget` after the weights and a reserve (activations, workspaces, the CUDA
/// context): floor((memory_budget - weight_bytes - reserved_bytes) / block_bytes), 0 when nothing is left.
/// block_bytes >= 1.
///   constexpr std::int64_t GiB = std::int64_t{1} << 30;
///   static_assert(llmk::kvcache::blocks_that_fit(80 * GiB, 14 * GiB, 6 * GiB, 8 << 20) == 7680);
constexpr std::int64_t blocks_that_fit(std::int64_t memory_budget, std::int64_t weight_bytes,
                                       std::int64_t reserved_bytes, std::int64_t block_bytes) {
  const std::int64_t left = memory_budget - weight_bytes - reserved_bytes;
  return left > 0 ? left / block_bytes : 0;
}

/// The fraction of MHA's KV memory that GQA keeps: kv_heads / heads (1 for MHA, 1/heads for MQA).
///   static_assert(llmk::kvcache::gqa_kv_fraction(32, 8) == 0.25);
constexpr double gqa_kv_fraction(std::int64_t heads, std::int64_t kv_heads) {
  return static_cast<double>(kv_heads) / static_cast<double>(heads);
}

/// The fraction of MHA's KV memory that GQA saves: 1 - kv_heads / heads.
///   static_assert(llmk::kvcache::gqa_saving(32, 8) == 0.75);
constexpr double gqa_saving(std::int64_t heads, std::int64_t kv_heads) {
  return 1.0 - gqa_kv_fraction(heads, kv_heads);
}

// ---------------------------------------------------------------------------------------------------------------
// The planner
// ---------------------------------------------------------------------------------------------------------------

/// What plan_memory() plans for: the model's shape, the KV format, the page size and the memory budget
/// (example: plan_memory; designated initializers in member order).
struct PlanRequest {
  // Model.
  std::int64_t vocab = 0;
  std::int64_t d_model = 0;
  std::int64_t layers = 0;
  std::int64_t heads = 0;     // query heads
  std::int64_t kv_heads = 0;  // 0: = heads (MHA); must divide heads
  std::int64_t head_dim = 0;  // 0: d_model / heads (must divide)
  std::int64_t weight_bytes_per_element = 2;
  std::int64_t weight_bytes = -1;  // -1: gpt_weight_bytes(vocab, d_model, layers, weight_bytes_per_element)
  // KV cache.
  std::int64_t kv_bytes_per_element = 2;
  std::int64_t kv_scale_bytes_per_head = 0;
  std::int64_t page_size = 16;
  // Memory.
  std::int64_t memory_bytes = 0;    // the device memory the engine may use
  std::int64_t reserved_bytes = 0;  // activations, workspaces, CUDA graphs, ...
  std::int64_t max_seq_len = 0;     // optional: > 0 also reports how many sequences of this length fit
};

/// plan_memory()'s breakdown. memory_bytes = weight_bytes + reserved_bytes + kv_cache_bytes + unused_bytes.
///   std::cout << plan.to_string();   // after plan_memory(r, &plan); plan.num_blocks sizes the pool
struct MemoryPlan {
  std::int64_t weight_params = -1;  // the GPT formula's count; -1 when weight_bytes was given
  std::int64_t weight_bytes = 0;
  std::int64_t reserved_bytes = 0;
  std::int64_t kv_bytes_per_token = 0;
  std::int64_t kv_bytes_per_token_mha = 0;  // the same cache with kv_heads = heads
  double gqa_saving = 0.0;                  // 1 - kv_heads / heads
  std::int64_t block_bytes = 0;
  std::int64_t num_blocks = 0;      // blocks that fit, at most INT32_MAX (block ids are int32)
  std::int64_t kv_cache_bytes = 0;  // num_blocks x block_bytes
  std::int64_t unused_bytes = 0;    // the remainder smaller than a block (or more when num_blocks was capped)
  std::int64_t token_capacity = 0;  // num_blocks x page_size
  std::int64_t max_sequences = 0;   // num_blocks / blocks_per_sequence(max_seq_len) (0 without max_seq_len)

  /// One line per quantity, e.g. "weights      247303680 B (123651840 params)".
  std::string to_string() const {
    return str_cat("weights        ", weight_bytes, " B (", weight_params, " params)\n",  //
                   "reserved       ", reserved_bytes, " B\n",                             //
                   "KV per token   ", kv_bytes_per_token, " B (MHA ", kv_bytes_per_token_mha,
                   " B, GQA saves ", gqa_saving * 100.0, "%)\n",  //
                   "block          ", block_bytes, " B\n",        //
                   "blocks         ", num_blocks, " (", kv_cache_bytes, " B, ", token_capacity, " tokens)\n",
                   "unused         ", unused_bytes, " B\n",  //
                   "max sequences  ", max_sequences, "\n");
  }
};

/// Plans the KV cache of a model in a memory budget: validates the request (every size >= 1 where it must be,
/// kv_heads divides heads, head_dim = d_model / heads when not given), computes the breakdown with overflow
/// checks and stores it in *plan. invalid_argument naming the field for a bad request or an int64 overflow;
/// out_of_memory when weights + reserve leave no room for a single block. *plan is written only on success.
///   llmk::kvcache::PlanRequest r{.vocab = 32000, .d_model = 4096, .layers = 32, .heads = 32, .kv_heads = 8,
///                                .memory_bytes = 80ll << 30, .reserved_bytes = 6ll << 30,
///                                .max_seq_len = 4096};
///   llmk::kvcache::MemoryPlan plan;
///   LLMK_RETURN_IF_ERROR(llmk::kvcache::plan_memory(r, &plan));
///   llmk::kvcache::KvCacheManager kv(static_cast<std::int32_t>(plan.num_blocks), r.page_size);
inline Status plan_memory(const PlanRequest& r, MemoryPlan* plan) {
  if (plan == nullptr) return Status::invalid_argument("plan", "must not be null");
  const auto positive = [](const char* name, std::int64_t v) -> Status {
    if (v < 1) return Status::invalid_argument(name, str_cat("must be >= 1, got ", v));
    return {};
  };
  const auto non_negative = [](const char* name, std::int64_t v) -> Status {
    if (v < 0) return Status::invalid_argument(name, str_cat("must be >= 0, got ", v));
    return {};
  };
  LLMK_RETURN_IF_ERROR(positive("layers", r.layers));
  LLMK_RETURN_IF_ERROR(positive("heads", r.heads));
  LLMK_RETURN_IF_ERROR(non_negative("kv_heads", r.kv_heads));
  LLMK_RETURN_IF_ERROR(non_negative("head_dim", r.head_dim));
  LLMK_RETURN_IF_ERROR(positive("kv_bytes_per_element", r.kv_bytes_per_element));
  LLMK_RETURN_IF_ERROR(non_negative("kv_scale_bytes_per_head", r.kv_scale_bytes_per_head));
  LLMK_RETURN_IF_ERROR(positive("page_size", r.page_size));
  LLMK_RETURN_IF_ERROR(non_negative("memory_bytes", r.memory_bytes));
  LLMK_RETURN_IF_ERROR(non_negative("reserved_bytes", r.reserved_bytes));
  LLMK_RETURN_IF_ERROR(non_negative("max_seq_len", r.max_seq_len));
  const std::int64_t kv_heads = r.kv_heads == 0 ? r.heads : r.kv_heads;
  if (kv_heads > r.heads || r.heads % kv_heads != 0)
    return Status::invalid_argument(
        "kv_heads", str_cat("must divide heads (heads=", r.heads, ", kv_heads=", kv_heads, ")"));
  std::int64_t head_dim = r.head_dim;
  if (head_dim == 0) {
    LLMK_RETURN_IF_ERROR(positive("d_model", r.d_model));
    if (r.d_model % r.heads != 0)
      return Status::invalid_argument(
          "head_dim",
          str_cat("is 0 and heads does not divide d_model (d_model=", r.d_model, ", heads=", r.heads, ")"));
    head_dim = r.d_model / r.heads;
  }

  const auto overflow = [](const char* name) {
    return Status::invalid_argument(name, "the computed size overflows int64");
  };
  MemoryPlan p;
  // Weights.
  if (r.weight_bytes >= 0) {
    p.weight_bytes = r.weight_bytes;
  } else {
    LLMK_RETURN_IF_ERROR(positive("vocab", r.vocab));
    LLMK_RETURN_IF_ERROR(positive("d_model", r.d_model));
    LLMK_RETURN_IF_ERROR(positive("weight_bytes_per_element", r.weight_bytes_per_element));
    const auto d2 = checked_mul(r.d_model, r.d_model);
    const auto d2x12 = d2 ? checked_mul(*d2, 12) : std::nullopt;
    const auto layer = d2x12 ? checked_add(*d2x12, 13 * r.d_model) : std::nullopt;  // d < 2^31 here
    const auto layers = layer ? checked_mul(*layer, r.layers) : std::nullopt;
    const auto embed = checked_mul(r.vocab, r.d_model);
    const auto params = layers && embed ? checked_add(*layers, *embed) : std::nullopt;
    const auto bytes = params ? checked_mul(*params, r.weight_bytes_per_element) : std::nullopt;
    if (!bytes) return overflow("weight_bytes");
    p.weight_params = *params;
    p.weight_bytes = *bytes;
  }
  p.reserved_bytes = r.reserved_bytes;
  // KV sizes: 2 x layers x kv_heads x (head_dim x bytes + scale).
  const auto kv_size = [&](std::int64_t heads) -> std::optional<std::int64_t> {
    const auto elems = checked_mul(head_dim, r.kv_bytes_per_element);
    const auto per_head = elems ? checked_add(*elems, r.kv_scale_bytes_per_head) : std::nullopt;
    const auto lh = checked_mul(r.layers, heads);
    const auto lh2 = lh ? checked_mul(*lh, 2) : std::nullopt;
    return per_head && lh2 ? checked_mul(*lh2, *per_head) : std::nullopt;
  };
  const auto per_token = kv_size(kv_heads);
  const auto per_token_mha = kv_size(r.heads);
  if (!per_token || !per_token_mha) return overflow("kv_bytes_per_token");
  p.kv_bytes_per_token = *per_token;
  p.kv_bytes_per_token_mha = *per_token_mha;
  p.gqa_saving = gqa_saving(r.heads, kv_heads);
  const auto block = checked_mul(r.page_size, p.kv_bytes_per_token);
  if (!block) return overflow("page_size");
  p.block_bytes = *block;
  // Blocks.
  const auto fixed = checked_add(p.weight_bytes, r.reserved_bytes);
  if (!fixed) return overflow("reserved_bytes");
  const std::int64_t blocks =
      blocks_that_fit(r.memory_bytes, p.weight_bytes, r.reserved_bytes, p.block_bytes);
  if (blocks == 0)
    return Status::out_of_memory(str_cat("no KV block fits: memory ", r.memory_bytes, " B - weights ",
                                         p.weight_bytes, " B - reserved ", r.reserved_bytes,
                                         " B < one block (", p.block_bytes, " B = ", r.page_size,
                                         " tokens x ", p.kv_bytes_per_token, " B)"));
  p.num_blocks = std::min<std::int64_t>(blocks, std::numeric_limits<std::int32_t>::max());
  p.kv_cache_bytes = p.num_blocks * p.block_bytes;  // <= memory_bytes
  p.unused_bytes = r.memory_bytes - *fixed - p.kv_cache_bytes;
  const auto capacity = checked_mul(p.num_blocks, r.page_size);
  if (!capacity) return overflow("page_size");
  p.token_capacity = *capacity;
  p.max_sequences = r.max_seq_len > 0 ? p.num_blocks / blocks_per_sequence(r.max_seq_len, r.page_size) : 0;
  *plan = p;
  return {};
}

}  // namespace llmk::kvcache
