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

/// Mask of one sequence: bottom-right aligned causal/sliding-window limits (see the file comment). Built by
/// make_mask (example there).
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

/// The Bc-key tiles a block of queries [first_query, last_query] visits: [begin, end) holds every key any of
/// them sees; from unmasked_begin up to (not including) unmasked_end every query sees every key of a tile
/// (the kernels' hot loop: no mask test), when unmasked_begin < unmasked_end. kv_end: one past the last key
/// any of them sees. Computed by visible_tiles (example there).
struct TileSpan {
  int begin, end, unmasked_begin, unmasked_end, kv_end;
};
/// The TileSpan of queries [first_query, last_query] over tiles of bc keys:
///   const llmk::attention::TileSpan t = llmk::attention::visible_tiles(mask, q0, q0 + 63, 64);
///   for (int j = t.begin; j < t.end; ++j) { /* mask test outside [unmasked_begin, unmasked_end) */ }
LLMK_HOST_DEVICE TileSpan visible_tiles(const Mask& mask, int first_query, int last_query, int bc) {
  const int kv_first = mask.first_key(first_query), kv_end = mask.end_key(last_query);
  TileSpan t;
  t.kv_end = kv_end;
  t.begin = kv_first / bc;
  t.end = kv_first < kv_end ? ceil_div(kv_end, bc) : t.begin;
  t.unmasked_begin = max(t.begin, ceil_div(mask.first_key(last_query), bc));
  t.unmasked_end = mask.end_key(first_query) / bc;  // <= kv_end / bc: end_key grows with the query
  return t;
}

/// Builds the mask of one sequence from the user-facing options (window -1: unbounded).
///   llmk::attention::Mask m = llmk::attention::make_mask(4, 10, /*causal=*/true, -1, -1);
///   m.visible(0, 6);   // true: query 0 is key position 6
///   m.visible(0, 7);   // false
LLMK_HOST_DEVICE Mask make_mask(int q_len, int kv_len, bool causal, int window_left, int window_right) {
  Mask m;
  m.q_len = q_len;
  m.kv_len = kv_len;
  m.window_left = window_left;
  m.window_right = causal ? (window_right < 0 ? 0 : min(window_right, 0)) : window_right;
  return m;
}

}  // namespace llmk::attention
