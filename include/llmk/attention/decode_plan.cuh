// llmk/attention/decode_plan.cuh: how split-KV decode (decode.cuh) is tiled and split: DecodeConfig and its
// defaults, the split modes (DecodeSplits: even splits, the heuristic, batch-invariant fixed chunks), the
// DecodePlan that plan_decode() returns, the split heuristic choose_decode_splits(), the workspace layout and
// size, and detail::plan_splits(), which turns the arguments and a DecodeSplits into a DecodePlan.
#pragma once

#include <cstddef>

#include "llmk/attention/args.cuh"
#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/status.cuh"

namespace llmk::attention {

/// Tiling of the split-KV decode kernel: head dim, Warps warps of 16 keys each per tile (Bc = 16 * Warps),
/// Stages-deep K/V ring. Any head dim that is a multiple of 16 up to 256 compiles.
///   using Cfg = llmk::attention::DecodeConfig<128, 8, 3>;   // 128-key tiles, a 3-stage ring
///   LLMK_RETURN_IF_ERROR((llmk::attention::plan_decode_with_config<llmk::half, Cfg>(a, &plan)));
template <int HeadDim, int Warps, int Stages>
struct DecodeConfig {
  static constexpr int kHeadDim = HeadDim, kWarps = Warps, kStages = Stages;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kRows = 16;  // query heads per block (one mma tile)
  static constexpr int kBc = 16 * Warps;
  static constexpr int kD8 = HeadDim / 8;
  static constexpr int kPitch = HeadDim + 8;
  static_assert(HeadDim % 16 == 0 && HeadDim >= 16 && HeadDim <= 256,
                "head dim must be a multiple of 16 in [16, 256]");
  static_assert(Warps >= 1 && Warps <= 8, "1..8 warps");
  static_assert(Stages >= 2 && Stages <= 4, "the K/V ring has 2..4 stages");

  static constexpr std::size_t kPipelineBytes =
      2ull * (static_cast<std::size_t>(kRows) * kPitch + 2ull * Stages * kBc * kPitch);
  // The warp merge reuses the same memory: m and l per warp and row, then each warp's [16][D] fp32 output.
  static constexpr std::size_t kMergeBytes = 4ull * Warps * kRows * (2 + HeadDim);
  static constexpr std::size_t kSmemBytes = kPipelineBytes > kMergeBytes ? kPipelineBytes : kMergeBytes;
};

/// Defaults: 4 warps (64-key tiles) up to head dim 128, 2 warps (32-key tiles) above; double buffered.
/// Example: plan_decode_with_config (decode.cuh), with DefaultDecodeConfig<80>.
template <int HeadDim>
using DefaultDecodeConfig = DecodeConfig<HeadDim, (HeadDim <= 128 ? 4 : 2), 2>;

/// Largest split count decode accepts (explicit or heuristic; the batch-invariant mode has its own limit).
inline constexpr int kMaxDecodeSplits = 128;

/// Default chunk of the batch-invariant mode: 512 keys, 8 key tiles of the default configurations up to head
/// dim 128 (16 of head dim 256's 32-key tiles).
inline constexpr int kBatchInvariantKeysPerSplit = 512;
/// Largest split count of the batch-invariant mode (it follows the longest sequence).
inline constexpr int kMaxBatchInvariantSplits = 65535;

/// How plan_decode() chooses the splits. An int converts to it, so plan_decode(args, &plan, 3) keeps working.
///   - DecodeSplits(0): the heuristic (choose_decode_splits: batch, heads, length and SM count).
///   - DecodeSplits(n): n splits in [1, kMaxDecodeSplits], the visible keys cut evenly.
///   - DecodeSplits::batch_invariant(k): chunks of k keys (a positive multiple of the key tile Bc): split s
///     of every sequence holds its visible keys [s * k, (s + 1) * k), and the splits merge in split order.
///     A sequence's output bits then depend only on that sequence, not on the batch it is in, the split
///     count or the SM count. The optional num_splits fixes the grid's width (e.g. a plan made once for the
///     longest history a CUDA graph will see); by default it is ceil(longest visible history / k).
///
///   namespace attn = llmk::attention;
///   attn::DecodePlan plan;   // the same bits for a request whatever else is in the batch
///   LLMK_RETURN_IF_ERROR(attn::plan_decode(a, &plan, attn::DecodeSplits::batch_invariant()));
struct DecodeSplits {
  int num_splits = 0;      // 0: the heuristic (default mode) or just enough splits (batch-invariant mode)
  int keys_per_split = 0;  // 0: the default mode; > 0: the batch-invariant mode
  /// The default mode: `splits` even splits (1..kMaxDecodeSplits), 0 for the heuristic. Implicit, so that an
  /// int passes for a DecodeSplits. plan_decode* reject other counts (invalid_argument naming num_splits).
  ///   LLMK_RETURN_IF_ERROR(llmk::attention::plan_decode(a, &plan, llmk::attention::DecodeSplits(4)));
  constexpr DecodeSplits(int splits = 0) : num_splits(splits) {}  // NOLINT(google-explicit-constructor)
  /// The batch-invariant mode: chunks of keys_per_split keys (a positive multiple of the configuration's key
  /// tile Bc, at most 2^30) and num_splits splits (0: just enough for the longest visible history; else at
  /// least that many and at most kMaxBatchInvariantSplits, e.g. a fixed grid for a CUDA graph). plan_decode*
  /// check both (invalid_argument naming keys_per_split or num_splits).
  ///   // 1024-key chunks, a grid wide enough for histories of up to 32 x 1024 keys
  ///   const auto splits = llmk::attention::DecodeSplits::batch_invariant(1024, 32);
  ///   LLMK_RETURN_IF_ERROR(llmk::attention::plan_decode(a, &plan, splits));
  static constexpr DecodeSplits batch_invariant(int keys_per_split = kBatchInvariantKeysPerSplit,
                                                int num_splits = 0) {
    DecodeSplits s(num_splits);
    s.keys_per_split = keys_per_split;
    return s;
  }
};

/// How decode() will run: the split count, the chunk of the batch-invariant mode (0: none) and the workspace
/// it needs (0 bytes with one split). Made by plan_decode* (example: decode_with_config, decode.cuh):
///   llmk::DeviceBuffer<unsigned char> ws(plan.workspace_bytes);
struct DecodePlan {
  int num_splits = 1;
  int keys_per_split = 0;  // > 0: split s of every sequence holds its visible keys [s * k, (s + 1) * k)
  std::size_t workspace_bytes = 0;
};

/// Split heuristic: enough blocks for about two per SM, but at least 4 key tiles per split, at most
/// kMaxDecodeSplits. `blocks` is batch * num_kv_heads * ceil(group / 16); 1 (no split) when blocks,
/// max_kv_len or block_keys is not positive.
///   // 8 sequences x 8 KV heads on 132 SMs: 5 splits (320 blocks of the 264 wanted)
///   const int splits = llmk::attention::choose_decode_splits(8 * 8, 4096, 64, 132);
inline int choose_decode_splits(long long blocks, int max_kv_len, int block_keys, int num_sms) {
  const long long target = 2LL * (num_sms > 0 ? num_sms : 1);
  if (blocks <= 0 || blocks >= target || max_kv_len <= 0 || block_keys <= 0) return 1;
  const long long wanted = ceil_div<long long>(target, blocks);
  const long long by_length = max<long long>(1, max_kv_len / (4LL * block_keys));
  return static_cast<int>(min<long long>(min<long long>(wanted, by_length), kMaxDecodeSplits));
}

namespace detail {

/// Workspace layout: partial outputs [batch, heads, splits, D] fp32, then base-2 LSEs [batch, heads, splits].
struct DecodeWorkspace {
  float* partial_o = nullptr;
  float* partial_lse2 = nullptr;
  int num_splits = 1;
  int keys_per_split = 0;  // > 0: fixed chunks (batch-invariant mode)
};

inline std::size_t decode_workspace_bytes(int batch, int heads, int head_dim, int splits) {
  if (splits <= 1) return 0;
  const std::size_t rows = static_cast<std::size_t>(batch) * heads * splits;
  return rows * head_dim * sizeof(float) + round_up<std::size_t>(rows * sizeof(float), 16);
}

// The keys a split may see at most: the longest history, bounded by a sliding window.
template <class T>
int visible_keys(const DecodeArgs<T>& args, int max_len) {
  return args.options.window_left >= 0
             ? static_cast<int>(min<long long>(max_len, static_cast<long long>(args.options.window_left) + 1))
             : max_len;
}

// The batch-invariant chunk and grid width: keys_per_split a positive multiple of Bc (at most 2^30),
// num_splits in [1, kMaxBatchInvariantSplits] covering the longest visible history.
template <class Cfg>
Status check_fixed_splits(const char* splits_name, int num_splits, const char* keys_name, int keys_per_split,
                          int visible) {
  if (keys_per_split < 1 || keys_per_split % Cfg::kBc != 0 || keys_per_split > (1 << 30))
    return Status::invalid_argument(keys_name, str_cat("must be a positive multiple of the key tile Bc = ",
                                                       Cfg::kBc, " (at most 2^30), got ", keys_per_split));
  const long long need = max<long long>(1, ceil_div<long long>(visible, keys_per_split));
  if (need > kMaxBatchInvariantSplits)
    return Status::invalid_argument(
        keys_name, str_cat(visible, " visible keys need ", need, " splits of ", keys_per_split,
                           " keys, more than kMaxBatchInvariantSplits = ", kMaxBatchInvariantSplits,
                           ": use longer splits"));
  if (num_splits != 0 && (num_splits < need || num_splits > kMaxBatchInvariantSplits))
    return Status::invalid_argument(
        splits_name, str_cat("must be in [", need, ", ", kMaxBatchInvariantSplits, "] (", need, " splits of ",
                             keys_per_split, " keys hold the longest visible history, ", visible,
                             " keys), got ", num_splits));
  return {};
}

// The split count (num_splits = 0: the heuristic, or just enough fixed chunks) and workspace for sequences of
// at most max_len keys.
template <class T, class Cfg>
Status plan_splits(const DecodeArgs<T>& args, int max_len, DecodePlan* plan, DecodeSplits splits) {
  const int visible = visible_keys(args, max_len);
  int num_splits = splits.num_splits;
  if (splits.keys_per_split != 0) {
    if (num_splits < 0)
      return Status::invalid_argument("num_splits",
                                      str_cat("must be >= 0 (0: as few as fit), got ", num_splits));
    LLMK_RETURN_IF_ERROR(
        check_fixed_splits<Cfg>("num_splits", num_splits, "keys_per_split", splits.keys_per_split, visible));
    if (num_splits == 0) num_splits = max(1, ceil_div(visible, splits.keys_per_split));
  } else {
    if (num_splits < 0 || num_splits > kMaxDecodeSplits)
      return Status::invalid_argument(
          "num_splits", str_cat("must be in [0, ", kMaxDecodeSplits, "] (0: heuristic), got ", num_splits));
    if (num_splits == 0) {
      const long long blocks = static_cast<long long>(args.batch) * args.num_kv_heads *
                               ceil_div(args.num_heads / args.num_kv_heads, 16);
      // A sliding window bounds the keys any split can see.
      num_splits = choose_decode_splits(blocks, visible, Cfg::kBc, ::llmk::device_sm_count());
    }
  }
  plan->num_splits = num_splits;
  plan->keys_per_split = splits.keys_per_split;
  plan->workspace_bytes = decode_workspace_bytes(args.batch, args.num_heads, args.head_dim, num_splits);
  return {};
}

}  // namespace detail

}  // namespace llmk::attention
