// llmk/attention/mask.cuh: which keys a query sees, and the score transform applied before the softmax.
//
// Positions are 0-based within one sequence. With q_len queries and kv_len keys the queries are aligned to
// the END of the keys (bottom-right, as FlashAttention >= 2.1): query i sits at key position i + (kv_len -
// q_len). Key j is visible to query i iff
//     j < kv_len,
//     j >= i + (kv_len - q_len) - window_left     (when window_left >= 0),
//     j <= i + (kv_len - q_len) + window_right    (when window_right >= 0; causal means window_right = 0).
// A query that sees no key (possible when q_len > kv_len under a causal mask, or with a window) gets a zero
// output row and LSE = -inf.
#pragma once

#include <cstdint>

#include "llmk/config.cuh"
#include "llmk/core/math.cuh"

namespace llmk::attention {

/// Mask of one sequence: bottom-right aligned causal/sliding-window limits (see the file comment).
struct Mask {
  int q_len = 0, kv_len = 0;
  int window_left = -1;   // -1: unbounded
  int window_right = -1;  // -1: unbounded; 0: causal

  /// Key position of query i's own token.
  LLMK_HOST_DEVICE int diagonal(int i) const { return i + (kv_len - q_len); }
  /// First visible key of query i (may be > last_key: nothing visible).
  LLMK_HOST_DEVICE int first_key(int i) const {
    if (window_left < 0) return 0;
    const long long f = static_cast<long long>(diagonal(i)) - window_left;  // 64-bit: window_left may be huge
    return f < 0 ? 0 : static_cast<int>(f);
  }
  /// One past the last visible key of query i.
  LLMK_HOST_DEVICE int end_key(int i) const {
    if (window_right < 0) return kv_len;
    const long long e = static_cast<long long>(diagonal(i)) + window_right + 1;
    return static_cast<int>(e < 0 ? 0 : (e > kv_len ? kv_len : e));
  }
  LLMK_HOST_DEVICE bool visible(int i, int j) const { return j >= first_key(i) && j < end_key(i); }
  /// True when no key position of [j0, j1) is masked for any query of [i0, i1] (the fast path of a tile).
  LLMK_HOST_DEVICE bool tile_unmasked(int i0, int i1, int j0, int j1) const {
    return j1 <= kv_len && j0 >= first_key(i1) && j1 <= end_key(i0);
  }
};

/// Builds the mask of one sequence from the user-facing options.
LLMK_HOST_DEVICE Mask make_mask(int q_len, int kv_len, bool causal, int window_left, int window_right) {
  Mask m;
  m.q_len = q_len;
  m.kv_len = kv_len;
  m.window_left = window_left;
  m.window_right = causal ? (window_right < 0 ? 0 : min(window_right, 0)) : window_right;
  return m;
}

}  // namespace llmk::attention
