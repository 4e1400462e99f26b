// llmk/attention/block_order.cuh: the order in which the Hopper prefill kernel's blocks (one query-row tile
// of one sequence and KV head each) run.
//
// The GPU starts blocks in grid order as SMs free up. Under a causal mask a row tile's work grows with its
// index (tile t sees about t + 1 key tiles), so the natural order (row tiles fastest) starts the heaviest
// block of each (sequence, KV head) pair last, and the last pairs' heavy blocks run alone at the end of the
// grid. Causal launches therefore go heaviest first (longest processing time first): row tiles in descending
// order, the pairs fastest. A row tile of every pair at once would stream every pair's K/V through L2 once
// per row tile, so the pairs are taken in sections whose K/V fit in a part of L2 (kPrefillSectionBytes):
// heaviest first within each section, section after section. A list-scheduling model (one block an SM,
// every key tile the same time, half a tile of fixed cost a block) gives 1.03-1.16x shorter causal grids on
// 132 SMs for the prefill benchmark's shapes (docs/attention.md, "Block order"); other masks keep the
// natural order (one pair a section, ascending). The mma.sync kernel (prefill_mma.cuh) keeps its 3-D grid:
// its 255-register variants have no register for a decoded block (ptxas rematerializes blockIdx; even
// reversing the row tiles by a kernel argument spilled 4 bytes at 32 rows a warp, d128, sm_80).
#pragma once

#include <algorithm>
#include <cstdint>

#include "llmk/attention/args.cuh"
#include "llmk/config.cuh"
#include "llmk/core/status.cuh"

namespace llmk::attention {

/// K/V bytes of the (sequence, KV head) pairs one section of a causal prefill grid covers: a third of an
/// H100's 50 MB L2 (A100 40 MB, L40S 48 MB).
inline constexpr std::int64_t kPrefillSectionBytes = std::int64_t{16} << 20;

namespace detail {

/// One block's work: row tile, sequence and KV head.
struct PrefillBlock {
  int row_tile, batch, kv_head;
};

/// Maps a 1-D grid of row_tiles x batch x kv_heads blocks to (row tile, sequence, KV head): sections of
/// section_pairs pairs (pair = sequence * kv_heads + KV head; the last section may be smaller), row tiles
/// outermost within a section (descending when heaviest_first), pairs innermost. A bijection onto every
/// (row tile, pair).
struct PrefillBlockOrder {
  int row_tiles = 1, kv_heads = 1, pairs = 1, section_pairs = 1;
  bool heaviest_first = false;

  /// `linear` < blocks() < 2^31 (prefill_block_order checks it), so 32-bit unsigned arithmetic throughout: a
  /// 64-bit division is a long called sequence (tried in the mma.sync kernel, whose 255-register variant it
  /// pushed to an 8-byte spill on sm_80; that kernel kept its 3-D grid).
  LLMK_HOST_DEVICE PrefillBlock block(unsigned linear) const {
    const unsigned section_blocks = static_cast<unsigned>(row_tiles) * static_cast<unsigned>(section_pairs);
    const unsigned section = linear / section_blocks;
    const int offset = static_cast<int>(linear - section * section_blocks);
    const int first_pair = static_cast<int>(section) * section_pairs;
    const int here = pairs - first_pair < section_pairs ? pairs - first_pair : section_pairs;
    const int rank = offset / here, pair = first_pair + offset % here;
    return {heaviest_first ? row_tiles - 1 - rank : rank, pair / kv_heads, pair % kv_heads};
  }
  std::int64_t blocks() const { return static_cast<std::int64_t>(row_tiles) * pairs; }
};

/// The order of a launch: heaviest first in L2-sized sections when causal (kv_bytes_per_pair: the K/V bytes
/// one pair reads, at the longest history), the natural order otherwise.
inline PrefillBlockOrder make_prefill_block_order(std::int64_t row_tiles, int batch, int kv_heads,
                                                  bool causal, std::int64_t kv_bytes_per_pair) {
  PrefillBlockOrder o;
  o.row_tiles = static_cast<int>(row_tiles);
  o.kv_heads = kv_heads;
  o.pairs = batch * kv_heads;
  o.heaviest_first = causal;
  if (causal) {
    const std::int64_t per = kv_bytes_per_pair > 0 ? kPrefillSectionBytes / kv_bytes_per_pair : o.pairs;
    o.section_pairs = static_cast<int>(per < 1 ? 1 : (per > o.pairs ? o.pairs : per));
  }
  return o;
}

/// The longest K/V history of a launch where the host knows it (kv_len, or the host copy of cu_seqlens_k),
/// else max_q_len: it sizes the sections.
template <class T>
std::int64_t longest_kv_hint(const PrefillArgs<T>& a, int max_q_len) {
  std::int64_t longest = a.kv_len > 0 ? a.kv_len : max_q_len;
  if (a.cu_seqlens_k_host != nullptr)
    for (int b = 0; b < a.batch; ++b)
      longest = std::max<std::int64_t>(longest, a.cu_seqlens_k_host[b + 1] - a.cu_seqlens_k_host[b]);
  return longest;
}

/// The block order of a prefill launch with `rows_per_block` packed rows a block, or an error when the grid
/// would pass 2^31 - 1 blocks (a 1-D grid). longest_kv: the longest K/V history when the caller knows it
/// (a paged cache's host lengths); 0: longest_kv_hint.
template <class T>
Status prefill_block_order(const PrefillArgs<T>& args, int max_q_len, int rows_per_block,
                           PrefillBlockOrder* order, std::int64_t longest_kv = 0) {
  const long long rows = static_cast<long long>(max_q_len) * (args.num_heads / args.num_kv_heads);
  const long long row_tiles = (rows + rows_per_block - 1) / rows_per_block;
  if (row_tiles * args.batch * args.num_kv_heads > 0x7fffffffLL)
    return Status::invalid_argument(
        "q_len", str_cat("row tiles x batch x num_kv_heads must be < 2^31 (one block each), got ", row_tiles,
                         " x ", args.batch, " x ", args.num_kv_heads));
  *order = make_prefill_block_order(row_tiles, args.batch, args.num_kv_heads, args.options.causal,
                                    (longest_kv > 0 ? longest_kv : longest_kv_hint(args, max_q_len)) *
                                        args.head_dim * 2 * static_cast<std::int64_t>(sizeof(T)));
  return {};
}

}  // namespace detail
}  // namespace llmk::attention
