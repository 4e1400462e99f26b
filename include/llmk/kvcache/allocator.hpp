// llmk/kvcache/allocator.hpp: the host block allocator of a paged KV cache (host only, no CUDA).
//
// The KV cache lives in a device pool of N fixed-size pages ("blocks") of page_size tokens each; a sequence's
// KV is the list of its blocks (its block table). This header manages the block ids; the engine owns the
// device memory and the kernels that read and write it. Two layers:
//
//   BlockPool       N physical block ids 0..N-1 (block_pool.hpp): a free list, a reference count per block
//                   and an LRU list of evictable cached blocks. allocate / retain / release, with errors for
//                   exhaustion, double free (release of a block without references) and foreign ids (outside
//                   [0, N)).
//   KvCacheManager  per-sequence block tables on top of a BlockPool: add_sequence (with prefix-cache reuse),
//                   append_tokens (allocates blocks; copy-on-write of a shared partial last block), fork
//                   (beam search, parallel sampling: the child shares every block), free_sequence, eviction,
//                   and the export of block tables in the two layouts paged-attention kernels take (CSR and
//                   padded, into CsrPageTable / BlockTable of kvcache/cache_ops.cuh or any struct with their
//                   fields).
//
//   llmk::kvcache::KvCacheManager kv(/*num_blocks=*/1024, /*page_size=*/16);
//   llmk::kvcache::SeqId seq;
//   std::int64_t cached = 0;
//   LLMK_RETURN_IF_ERROR(kv.add_sequence(prompt, &seq, &cached, std::ssize(prompt) - 1));
//   // prefill: write the KV of tokens [cached, prompt.size()) at their slots, attend, sample `next` ...
//   std::vector<llmk::kvcache::CopyOp> copies;
//   LLMK_RETURN_IF_ERROR(kv.append_tokens(seq, std::span(&next, 1), &copies));
//   // decode step: first the copies (device page copies src -> dst), then write the new token's KV ...
//   llmk::kvcache::CsrPageTable csr;                                  // kvcache/cache_ops.cuh
//   LLMK_RETURN_IF_ERROR(kv.export_csr(std::span(&seq, 1), &csr));   // -> PagedKv's page table
//   LLMK_RETURN_IF_ERROR(kv.free_sequence(seq));
//
// Slot of token position p of a sequence: block = block_table[p / page_size], slot p % page_size.
//
// Prefix caching. A full block is registered under the hash chain
//   h_0 = kRootHash,   h_i = block_hash(h_{i-1}, tokens of block i)     (i = 1, 2, ...)
// (block_hash: splitmix64 mixing, below). A new sequence reuses the longest chain of cached full blocks that
// matches its prompt. Matching is exact, not probabilistic: each cache entry stores its block's token ids and
// the registration id of its parent entry (ids are unique, never reused), and a lookup compares both, so a
// hit implies that every token of the reused prefix is equal. A hash collision only costs a cache miss. When
// the last reference to a registered block is released the block is not freed: it keeps its KV and goes to
// the back of an LRU list of evictable blocks. Allocation takes free blocks first, then evicts the least
// recently used cached block (dropping its cache entry). A block that becomes full with content already
// cached (a prompt recomputed past its cached prefix) is a duplicate: the sequence chains through the cached
// entry, and its own block stands in for it: when that entry is evicted while a duplicate is still held, the
// duplicate takes over the registration (same id, so the entries chained after it stay reachable).
// Blocks are registered when they become full (in
// add_sequence and append_tokens), i.e. before the engine has written their KV: the engine must write the KV
// of appended tokens in stream order before any kernel that reads a block shared through the cache. The usual
// step (write the new tokens' K/V, then attend) satisfies this even when the sharing sequence is in the same
// batch.
//
// Errors and guarantees. Every fallible operation returns a llmk::Status and has the strong guarantee: it
// checks everything first (arguments, sequence ids, the number of blocks it needs) and mutates only when it
// cannot fail, so an error leaves the state exactly unchanged (debug_string() is equal before and after).
// Exhaustion is Status::out_of_memory; double free, foreign block ids and unknown sequences are
// Status::invalid_argument. Constructors throw llmk::Error on invalid sizes. (std::bad_alloc from the host
// containers is not converted to a Status: the vectors a call grows are reserved before it mutates, but an
// allocation failure inside the hash map or a cache entry during prefix-cache registration leaves the object
// in a valid but unspecified state.)
//
// Thread safety. Neither class is thread-safe and neither locks: use one manager per engine (scheduler)
// thread, or guard every call with one external mutex. const member functions do not mutate anything (no
// mutable caches), so any number of threads may call const members concurrently as long as no thread calls a
// non-const member at the same time. Different instances are independent.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "llmk/core/status.cuh"
#include "llmk/kvcache/block_pool.hpp"

namespace llmk::kvcache {

// ---------------------------------------------------------------------------------------------------------------
// KvCacheManager
// ---------------------------------------------------------------------------------------------------------------

/// A page copy the engine must perform (on the device, in stream order) before writing the KV of the tokens
/// that an append_tokens call appended: copy the first `num_tokens` slots (all layers, K and V) of block
/// `src_block` to block `dst_block` (copying the whole page, as copy_pages in kvcache/cache_ops.cuh does, is
/// equally right). Produced by copy-on-write of a shared partial last block (example: append_tokens):
///   for (const llmk::kvcache::CopyOp& c : copies) src.push_back(c.src_block), dst.push_back(c.dst_block);
///   // upload src / dst, then llmk::kvcache::copy_pages(..., d_src, d_dst, copies.size(), stream)
struct CopyOp {
  BlockId src_block = kNoBlock;
  BlockId dst_block = kNoBlock;
  std::int32_t num_tokens = 0;  // valid slots of src_block, in [1, page_size)
  friend bool operator==(const CopyOp&, const CopyOp&) = default;
};

/// What export_csr() fills: a struct with the fields of llmk::kvcache::CsrPageTable (kvcache/cache_ops.cuh),
/// the CSR page table (FlashInfer's form) of a batch of B sequences:
///   indptr        [B + 1]  sequence i owns indices[indptr[i] .. indptr[i + 1])
///   indices       [total]  block ids
///   last_page_len [B]      tokens in the sequence's last page, in [1, page_size] (0 for an empty sequence)
/// (std::vector<int> each). This header does not include cache_ops.cuh, which needs a CUDA or simulator
/// build.
template <class T>
concept CsrPageTableLike = std::default_initializable<T> && std::movable<T> && requires(T& t) {
  t.indptr.push_back(0);
  t.indices.push_back(0);
  t.last_page_len.push_back(0);
};

/// What export_block_table() fills: a struct with the fields of llmk::kvcache::BlockTable
/// (kvcache/cache_ops.cuh), the padded block table (vLLM's form) of a batch of B sequences:
///   max_blocks                       the row width
///   table [B * max_blocks]           table[i * max_blocks + j] = j-th block of sequence i, a pad value
///                                    past its last block
///   seq_lens [B]                     tokens of sequence i
template <class T>
concept BlockTableLike = std::default_initializable<T> && std::movable<T> && requires(T& t) {
  t.max_blocks = 0;
  t.table.push_back(0);
  t.seq_lens.push_back(0);
};

/// Per-sequence block tables over a BlockPool, with fork/copy-on-write and prefix caching (file comment).
///
/// Invariants (check_invariants()): the refcount of every block equals the number of sequence tables that
/// hold it (the prefix cache holds no reference); no block is both free and referenced; free + evictable
/// cached + referenced = N; a sequence of n tokens has ceil(n / page_size) blocks, all distinct; every cache
/// entry names a cacheable block holding page_size tokens, and every cacheable block has exactly one entry;
/// a duplicate block (see the file comment) is held, unregistered, and stands in for one registered entry.
///
///   llmk::kvcache::KvCacheManager kv(64, 16);
///   llmk::kvcache::SeqId a, b;
///   LLMK_RETURN_IF_ERROR(kv.add_sequence(prompt, &a));        // 40 tokens: 3 blocks, the last holds 8
///   LLMK_RETURN_IF_ERROR(kv.fork(a, &b));                     // b shares all 3 (refcounts 2)
///   std::vector<llmk::kvcache::CopyOp> copies;
///   // b gets a new last block: copies = {{last_a, new, 8}}
///   LLMK_RETURN_IF_ERROR(kv.append_tokens(b, next_b, &copies));
///
/// Thread safety: see the file comment (not thread-safe; concurrent const calls only).
class KvCacheManager {
 public:
  /// A manager of `num_blocks` blocks of `page_size` tokens. Throws llmk::Error when num_blocks < 0 or
  /// page_size < 1. With enable_prefix_caching = false no block is ever registered or shared across sequences
  /// except by fork.
  KvCacheManager(std::int32_t num_blocks, std::int32_t page_size, bool enable_prefix_caching = true)
      : pool_(num_blocks), page_size_(page_size), prefix_caching_(enable_prefix_caching) {
    if (page_size < 1)
      throw Error(Status::invalid_argument("page_size", str_cat("must be >= 1, got ", page_size)));
    entries_.resize(static_cast<std::size_t>(num_blocks));
  }

  /// Tokens per block.
  std::int32_t page_size() const { return page_size_; }
  /// Whether full blocks are registered and reused across sequences.
  bool prefix_caching() const { return prefix_caching_; }
  /// The underlying pool (read-only: counts, refcounts, states).
  const BlockPool& pool() const { return pool_; }
  /// Number of live sequences.
  std::int32_t num_sequences() const { return static_cast<std::int32_t>(seqs_.size()); }
  /// Live sequence ids, ascending.
  std::vector<SeqId> sequences() const {
    std::vector<SeqId> ids;
    ids.reserve(seqs_.size());
    for (const auto& kv : seqs_) ids.push_back(kv.first);
    return ids;
  }
  /// Whether `seq` is a live sequence.
  bool contains(SeqId seq) const { return seqs_.count(seq) != 0; }
  /// Tokens of a sequence; -1 for an unknown id.
  std::int64_t num_tokens(SeqId seq) const {
    const auto it = seqs_.find(seq);
    return it == seqs_.end() ? -1 : it->second.num_tokens;
  }
  /// Block table of a sequence (empty for an unknown id). Valid until the next non-const call.
  std::span<const BlockId> block_table(SeqId seq) const {
    const auto it = seqs_.find(seq);
    if (it == seqs_.end()) return {};
    return it->second.blocks;
  }
  /// Number of registered prefix-cache entries (in-use and evictable blocks).
  std::int32_t num_cache_entries() const { return static_cast<std::int32_t>(cache_.size()); }

  /// A test seam: keeps only the low `bits` bits (1..64) of every block hash, so that tests and fuzzers can
  /// force hash collisions and check that they never share wrong KV. Only allowed while no sequence exists
  /// and the cache is empty; invalid_argument otherwise.
  ///   KvCacheManager kv(64, 4);
  ///   LLMK_RETURN_IF_ERROR(kv.set_hash_bits_for_testing(2));   // 4 distinct hashes: collisions everywhere
  Status set_hash_bits_for_testing(int bits) {
    if (bits < 1 || bits > 64)
      return Status::invalid_argument("bits", str_cat("must be in [1, 64], got ", bits));
    if (!seqs_.empty() || !cache_.empty())
      return Status::invalid_argument("bits", "the hash width can only change while the manager is empty");
    hash_mask_ = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
    return {};
  }

  /// Blocks an append of `num_new_tokens` tokens to `seq` would take from the pool (new blocks plus one for
  /// copy-on-write), for admission control: the append succeeds iff *blocks <= pool().num_available().
  /// invalid_argument for a null `blocks`, num_new_tokens < 0 or an unknown sequence.
  ///   std::int64_t need = 0;
  ///   LLMK_RETURN_IF_ERROR(kv.blocks_needed(seq, 1, &need));
  ///   if (need > kv.pool().num_available()) { /* preempt a sequence before this decode step */ }
  Status blocks_needed(SeqId seq, std::int64_t num_new_tokens, std::int64_t* blocks) const {
    if (blocks == nullptr) return Status::invalid_argument("blocks", "must not be null");
    if (num_new_tokens < 0)
      return Status::invalid_argument("num_new_tokens", str_cat("must be >= 0, got ", num_new_tokens));
    const Sequence* s = find(seq);
    if (s == nullptr) return unknown_sequence("seq", seq);
    *blocks = append_cost(*s, num_new_tokens);
    return {};
  }

  /// Adds a sequence holding `prompt` and returns its id in *seq. With prefix caching it first reuses the
  /// longest chain of cached full blocks that matches the prompt, at most floor(max_cached_tokens /
  /// page_size) blocks (pass prompt.size() - 1 when the last prompt token must be recomputed for its logits;
  /// a negative value reuses nothing),
  /// and reports the reused token count in *cached_tokens (a multiple of page_size; when not null). The
  /// engine then writes the KV of tokens [*cached_tokens, prompt.size()). Blocks that the prompt fills are
  /// registered in the cache at once, so another sequence may reuse them before their KV is written: an
  /// engine that prefills a prompt over several steps should add the first chunk here and append the rest
  /// with append_tokens as each chunk's KV is written (or write the KV before admitting other requests).
  /// out_of_memory when the blocks do not fit; nothing changes then.
  ///   SeqId seq; std::int64_t cached;
  ///   LLMK_RETURN_IF_ERROR(kv.add_sequence(prompt, &seq, &cached, std::ssize(prompt) - 1));
  Status add_sequence(std::span<const TokenId> prompt, SeqId* seq, std::int64_t* cached_tokens = nullptr,
                      std::int64_t max_cached_tokens = std::numeric_limits<std::int64_t>::max()) {
    if (seq == nullptr) return Status::invalid_argument("seq", "must not be null");
    // 1. Longest cached prefix (no mutation).
    Sequence fresh;
    std::vector<BlockId> hits;
    if (prefix_caching_) {
      const std::int64_t full = static_cast<std::int64_t>(prompt.size()) / page_size_;
      const std::int64_t limit = std::min(full, std::max<std::int64_t>(max_cached_tokens, 0) / page_size_);
      for (std::int64_t i = 0; i < limit; ++i) {
        const auto tokens = prompt.subspan(static_cast<std::size_t>(i * page_size_), page_size_u());
        const std::uint64_t h = hash(fresh.chain_hash, tokens);
        const BlockId b = lookup(h, fresh.chain_reg, tokens);
        if (b == kNoBlock) break;
        hits.push_back(b);
        fresh.chain_hash = h;
        fresh.chain_reg = entry(b).reg;
      }
    }
    // 2. Capacity: reviving an evictable hit takes it out of the available blocks too.
    const std::int64_t hit_tokens = static_cast<std::int64_t>(hits.size()) * page_size_;
    std::int64_t revived = 0;
    for (const BlockId b : hits) revived += pool_.state(b) == BlockPool::State::kCached;
    const std::int64_t new_blocks = ceil_div(static_cast<std::int64_t>(prompt.size()), page_size_) -
                                    static_cast<std::int64_t>(hits.size());
    if (new_blocks + revived > pool_.num_available())
      return Status::out_of_memory(str_cat("a sequence of ", prompt.size(), " tokens needs ", new_blocks,
                                           " new blocks (", hits.size(), " reused from the prefix cache, ",
                                           revived, " of them evictable); ", pool_.num_available(),
                                           " available (", pool_.num_free(), " free + ", pool_.num_cached(),
                                           " evictable) of ", pool_.num_blocks()));
    // 3. Mutate (cannot fail from here on, except std::bad_alloc before the pool is touched).
    fresh.blocks.reserve(hits.size() + static_cast<std::size_t>(new_blocks));
    fresh.partial.reserve(page_size_u());
    const SeqId id = next_seq_;
    Sequence& s = seqs_.emplace(id, std::move(fresh)).first->second;
    ++next_seq_;
    for (const BlockId b : hits) {
      must(pool_.retain(b));
      s.blocks.push_back(b);
    }
    s.num_tokens = hit_tokens;
    fill(s, prompt.subspan(static_cast<std::size_t>(hit_tokens)));
    *seq = id;
    if (cached_tokens != nullptr) *cached_tokens = hit_tokens;
    return {};
  }

  /// Appends `tokens` to sequence `seq`, allocating blocks as needed. When the last block is partial and
  /// shared (after fork), it is first replaced by a fresh block and CopyOp{old, new, valid slots} is appended
  /// to *copies: the engine performs the copies before writing the new tokens' KV. Blocks that become full
  /// are registered in the prefix cache. out_of_memory when the blocks do not fit (see blocks_needed);
  /// invalid_argument for an unknown sequence or a null `copies`; nothing changes on error.
  ///   std::vector<CopyOp> copies;
  ///   for (SeqId s : batch) LLMK_RETURN_IF_ERROR(kv.append_tokens(s, std::span(&next[s], 1), &copies));
  ///   engine_copy_pages(copies);  // then write the new K/V, then attend
  Status append_tokens(SeqId seq, std::span<const TokenId> tokens, std::vector<CopyOp>* copies) {
    if (copies == nullptr) return Status::invalid_argument("copies", "must not be null");
    Sequence* s = find(seq);
    if (s == nullptr) return unknown_sequence("seq", seq);
    if (tokens.empty()) return {};
    const std::int64_t n = static_cast<std::int64_t>(tokens.size());
    const std::int64_t cost = append_cost(*s, n);
    if (cost > pool_.num_available())
      return Status::out_of_memory(str_cat("appending ", n, " tokens to sequence ", seq, " (", s->num_tokens,
                                           " tokens) needs ", cost, " blocks; ", pool_.num_available(),
                                           " available (", pool_.num_free(), " free + ", pool_.num_cached(),
                                           " evictable) of ", pool_.num_blocks()));
    detail::reserve_for(s->blocks, static_cast<std::size_t>(ceil_div(s->num_tokens + n, page_size_)));
    s->partial.reserve(page_size_u());
    if (needs_cow(*s, n)) {
      detail::reserve_for(*copies, copies->size() + 1);
      const BlockId old = s->blocks.back();
      const BlockId fresh = take_block();
      copies->push_back({old, fresh, static_cast<std::int32_t>(s->num_tokens % page_size_)});
      must(pool_.release(old));  // refcount was > 1: stays in use by the other sequences
      s->blocks.back() = fresh;
    }
    fill(*s, tokens);
    return {};
  }

  /// Adds a sequence that shares every block of `parent` (refcounts + 1) and returns its id in *child. The
  /// first append to either side that writes into a shared partial last block copies it (copy-on-write).
  /// Takes no block from the pool. invalid_argument for an unknown parent.
  ///   SeqId beams[4] = {root};
  ///   for (int i = 1; i < 4; ++i) LLMK_RETURN_IF_ERROR(kv.fork(root, &beams[i]));
  Status fork(SeqId parent, SeqId* child) {
    if (child == nullptr) return Status::invalid_argument("child", "must not be null");
    const Sequence* p = find(parent);
    if (p == nullptr) return unknown_sequence("parent", parent);
    for (const BlockId b : p->blocks)
      if (pool_.refcount(b) == std::numeric_limits<std::int32_t>::max())
        return Status::invalid_argument("parent", str_cat("block ", b, ": reference count overflow"));
    Sequence copy = *p;
    copy.blocks.reserve(p->blocks.capacity());
    copy.partial.reserve(page_size_u());
    const SeqId id = next_seq_;
    Sequence& c = seqs_.emplace(id, std::move(copy)).first->second;
    ++next_seq_;
    for (const BlockId b : c.blocks) must(pool_.retain(b));
    *child = id;
    return {};
  }

  /// Drops a sequence: releases its blocks, last block first (so that, among the blocks this frees into the
  /// prefix cache, the tail ones are evicted first). invalid_argument for an unknown (or already freed)
  /// sequence.
  ///   LLMK_RETURN_IF_ERROR(kv.free_sequence(seq));
  Status free_sequence(SeqId seq) {
    const auto it = seqs_.find(seq);
    if (it == seqs_.end()) return unknown_sequence("seq", seq);
    const std::vector<BlockId>& blocks = it->second.blocks;
    for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) {
      must(pool_.release(*b));
      if (pool_.refcount(*b) == 0) forget_duplicate(*b);  // an unregistered duplicate is freed
    }
    seqs_.erase(it);
    return {};
  }

  /// Evicts up to `max_blocks` evictable cached blocks, least recently used first, dropping their cache
  /// entries (an entry whose content a live sequence holds in a duplicate block moves to that block instead:
  /// see the file comment); returns how many. evict_cached_blocks(INT32_MAX) empties the evictable part of
  /// the cache.
  /// Never fails; max_blocks <= 0 evicts nothing.
  ///   const std::int32_t freed = kv.evict_cached_blocks(std::numeric_limits<std::int32_t>::max());
  std::int32_t evict_cached_blocks(std::int32_t max_blocks) {
    std::int32_t n = 0;
    for (; n < max_blocks && pool_.lru_front() != kNoBlock; ++n)
      unregister(pool_.lru_front(), /*promote=*/true);  // un-marking a cached block frees it
    return n;
  }

  /// Block tables of `seqs` (in this order; repeats allowed) in CSR form (see CsrPageTableLike), into *out
  /// (replaced). invalid_argument for an unknown sequence or more than INT32_MAX pages in total; *out is
  /// unchanged then.
  ///   llmk::kvcache::CsrPageTable csr;                     // kvcache/cache_ops.cuh
  ///   // then upload csr.indptr, csr.indices and csr.last_page_len:
  ///   LLMK_RETURN_IF_ERROR(kv.export_csr(batch, &csr));
  template <CsrPageTableLike Csr>
  Status export_csr(std::span<const SeqId> seqs, Csr* out) const {
    if (out == nullptr) return Status::invalid_argument("out", "must not be null");
    std::int64_t total = 0;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      const Sequence* s = find(seqs[i]);
      if (s == nullptr) return unknown_sequence("seqs", seqs[i], i);
      total += static_cast<std::int64_t>(s->blocks.size());
    }
    if (total > std::numeric_limits<std::int32_t>::max() ||
        seqs.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
      return Status::invalid_argument("seqs", str_cat("the batch holds ", total, " pages of ", seqs.size(),
                                                      " sequences (more than INT32_MAX)"));
    Csr t;
    using Index = typename decltype(t.indptr)::value_type;
    t.indptr.reserve(seqs.size() + 1);
    t.indices.reserve(static_cast<std::size_t>(total));
    t.last_page_len.reserve(seqs.size());
    t.indptr.push_back(0);
    for (const SeqId id : seqs) {
      const Sequence& s = *find(id);
      for (const BlockId b : s.blocks) t.indices.push_back(static_cast<Index>(b));
      t.indptr.push_back(static_cast<Index>(t.indices.size()));
      t.last_page_len.push_back(
          static_cast<Index>(s.num_tokens == 0 ? 0 : (s.num_tokens - 1) % page_size_ + 1));
    }
    *out = std::move(t);
    return {};
  }

  /// Block tables of `seqs` (in this order; repeats allowed) as a padded [batch, max_blocks] matrix plus
  /// sequence lengths (see BlockTableLike), into *out (replaced). max_blocks is the widest table of the
  /// batch, or `min_width` when that is larger (default 1, as csr_to_block_table; a fixed width keeps a
  /// captured CUDA graph's shapes stable), and at least 1 (the kernels need a row even when every sequence
  /// of the batch is empty); entries past a sequence's last block are `pad` (default -1).
  /// invalid_argument for an unknown sequence, a sequence longer than INT32_MAX tokens or a matrix larger
  /// than INT32_MAX entries; *out is unchanged then.
  ///   llmk::kvcache::BlockTable bt;                        // kvcache/cache_ops.cuh
  ///   LLMK_RETURN_IF_ERROR(kv.export_block_table(batch, &bt, /*min_width=*/max_model_len / page_size));
  template <BlockTableLike Table>
  Status export_block_table(std::span<const SeqId> seqs, Table* out, std::int32_t min_width = 1,
                            std::int32_t pad = kNoBlock) const {
    if (out == nullptr) return Status::invalid_argument("out", "must not be null");
    if (min_width < 0) return Status::invalid_argument("min_width", str_cat("must be >= 0, got ", min_width));
    std::int64_t width = std::max<std::int64_t>(min_width, 1);
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      const Sequence* s = find(seqs[i]);
      if (s == nullptr) return unknown_sequence("seqs", seqs[i], i);
      if (s->num_tokens > std::numeric_limits<std::int32_t>::max())
        return Status::invalid_argument(
            "seqs", str_cat("sequence ", seqs[i], " has ", s->num_tokens, " tokens (more than INT32_MAX)"));
      width = std::max(width, static_cast<std::int64_t>(s->blocks.size()));
    }
    const std::int64_t rows = static_cast<std::int64_t>(seqs.size());
    if (rows > std::numeric_limits<std::int32_t>::max() ||
        width * rows > std::numeric_limits<std::int32_t>::max())
      return Status::invalid_argument(
          "seqs", str_cat("the table has ", rows, " x ", width, " entries (more than INT32_MAX)"));
    Table t;
    using Index = typename decltype(t.table)::value_type;
    t.max_blocks = static_cast<decltype(t.max_blocks)>(width);
    t.table.assign(static_cast<std::size_t>(width * rows), static_cast<Index>(pad));
    t.seq_lens.reserve(seqs.size());
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      const Sequence& s = *find(seqs[i]);
      for (std::size_t j = 0; j < s.blocks.size(); ++j)
        t.table[i * static_cast<std::size_t>(width) + j] = static_cast<Index>(s.blocks[j]);
      t.seq_lens.push_back(static_cast<Index>(s.num_tokens));
    }
    *out = std::move(t);
    return {};
  }

  /// Checks every invariant of the class comment plus the pool's; ok or internal("...") naming the first
  /// violation. O(N + total blocks of all tables). For tests and fuzzers.
  ///   LLMK_RETURN_IF_ERROR(kv.check_invariants());   // after every operation of a fuzz step
  Status check_invariants() const {
    LLMK_RETURN_IF_ERROR(pool_.check_invariants());
    const std::int32_t n = pool_.num_blocks();
    std::vector<std::int64_t> refs(static_cast<std::size_t>(n), 0);
    std::vector<SeqId> stamp(static_cast<std::size_t>(n), -1);
    for (const auto& [id, s] : seqs_) {
      if (id < 0 || id >= next_seq_)
        return Status::internal(str_cat("sequence id ", id, " was never issued"));
      if (s.num_tokens < 0) return Status::internal(str_cat("sequence ", id, " has a negative length"));
      if (static_cast<std::int64_t>(s.blocks.size()) != ceil_div(s.num_tokens, page_size_))
        return Status::internal(str_cat("sequence ", id, ": ", s.blocks.size(), " blocks for ", s.num_tokens,
                                        " tokens (page size ", page_size_, ")"));
      if (static_cast<std::int64_t>(s.partial.size()) != s.num_tokens % page_size_)
        return Status::internal(str_cat("sequence ", id, ": partial block tokens out of sync"));
      for (const BlockId b : s.blocks) {
        if (!pool_.contains(b)) return Status::internal(str_cat("sequence ", id, " holds foreign block ", b));
        if (stamp[static_cast<std::size_t>(b)] == id)
          return Status::internal(str_cat("sequence ", id, " holds block ", b, " twice"));
        stamp[static_cast<std::size_t>(b)] = id;
        ++refs[static_cast<std::size_t>(b)];
      }
    }
    std::int32_t referenced = 0;
    for (BlockId b = 0; b < n; ++b) {
      const std::int64_t r = refs[static_cast<std::size_t>(b)];
      if (pool_.refcount(b) != r)
        return Status::internal(str_cat("block ", b, " has refcount ", pool_.refcount(b), " but ", r,
                                        " references from sequence tables"));
      if (r > 0 && pool_.state(b) != BlockPool::State::kInUse)
        return Status::internal(str_cat("block ", b, " is referenced but not in use (free or cached)"));
      referenced += r > 0;
    }
    if (pool_.num_free() + pool_.num_cached() + referenced != n)
      return Status::internal(str_cat("free ", pool_.num_free(), " + evictable ", pool_.num_cached(),
                                      " + referenced ", referenced, " != ", n));
    std::size_t registered = 0;
    for (BlockId b = 0; b < n; ++b) {
      const Entry& e = entry(b);
      if (e.registered != pool_.cacheable(b))
        return Status::internal(str_cat("block ", b, ": cache entry and pool cacheable flag disagree"));
      if (!e.registered) continue;
      ++registered;
      if (!prefix_caching_) return Status::internal("a cache entry exists with prefix caching disabled");
      const auto it = cache_.find(e.hash);
      if (it == cache_.end() || it->second != b)
        return Status::internal(str_cat("cached block ", b, " is not in the hash map under its hash"));
      if (static_cast<std::int64_t>(e.tokens.size()) != page_size_)
        return Status::internal(str_cat("cached block ", b, " is not a full block"));
      if (e.reg == 0 || e.reg >= next_reg_ || e.parent_reg >= e.reg)
        return Status::internal(str_cat("cached block ", b, " has inconsistent registration ids"));
    }
    if (registered != cache_.size())
      return Status::internal(
          str_cat("hash map has ", cache_.size(), " entries, ", registered, " registered"));
    // Duplicates: held, unregistered, listed once under the registration id of a registered entry.
    std::vector<std::uint64_t> regs;
    for (BlockId b = 0; b < n; ++b)
      if (entry(b).registered) regs.push_back(entry(b).reg);
    std::sort(regs.begin(), regs.end());
    std::size_t duplicates = 0;
    for (BlockId b = 0; b < n; ++b) {
      const Entry& e = entry(b);
      if (e.dup_of == 0) continue;
      ++duplicates;
      if (e.registered || pool_.refcount(b) == 0)
        return Status::internal(str_cat("duplicate block ", b, " is registered or not held"));
      const auto [first, last] = duplicates_.equal_range(e.dup_of);
      if (std::count_if(first, last, [&](const auto& kv) { return kv.second == b; }) != 1)
        return Status::internal(str_cat("duplicate block ", b, " is not listed once under its entry"));
      if (!std::binary_search(regs.begin(), regs.end(), e.dup_of))
        return Status::internal(str_cat("duplicate block ", b, " stands in for no registered entry"));
    }
    if (duplicates != duplicates_.size())
      return Status::internal(str_cat("duplicate list has ", duplicates_.size(), " entries, ", duplicates,
                                      " blocks are duplicates"));
    return {};
  }

  /// A complete, deterministic description of the state (pool, sequences, cache entries and id counters).
  /// Equal strings <=> equal states; tests compare it before and after a failing call.
  ///   const std::string before = kv.debug_string();
  ///   if (!kv.append_tokens(seq, tokens, &copies).ok()) assert(kv.debug_string() == before);
  std::string debug_string() const {
    std::string s =
        str_cat("KvCacheManager{page=", page_size_, " caching=", prefix_caching_, " next_seq=", next_seq_,
                " next_reg=", next_reg_, " ", pool_.debug_string(), " seqs=[");
    for (const auto& [id, q] : seqs_) {
      s += str_cat(id, ":{n=", q.num_tokens, " h=", q.chain_hash, " r=", q.chain_reg, " blocks=");
      for (const BlockId b : q.blocks) s += str_cat(b, ",");
      s += " partial=";
      for (const TokenId t : q.partial) s += str_cat(t, ",");
      s += "} ";
    }
    s += "] cache=[";
    for (BlockId b = 0; b < pool_.num_blocks(); ++b) {
      const Entry& e = entry(b);
      if (e.dup_of != 0) s += str_cat(b, ":{dup of r=", e.dup_of, "} ");
      if (!e.registered) continue;
      s += str_cat(b, ":{h=", e.hash, " r=", e.reg, " p=", e.parent_reg, " t=");
      for (const TokenId t : e.tokens) s += str_cat(t, ",");
      s += "} ";
    }
    return s + str_cat("] map=", cache_.size(), "}");
  }

 private:
  struct Sequence {
    std::vector<BlockId> blocks;
    std::vector<TokenId> partial;  // token ids of the partial last block (its first num_tokens % page_size)
    std::int64_t num_tokens = 0;
    std::uint64_t chain_hash = kRootHash;  // hash of the last full block (kRootHash when none)
    std::uint64_t chain_reg = 0;           // registration id of the cache entry with that content (0: root)
  };
  struct Entry {  // prefix-cache entry of a block (indexed by block id)
    bool registered = false;
    std::uint64_t hash = 0;
    std::uint64_t reg = 0;         // unique registration id (>= 1)
    std::uint64_t parent_reg = 0;  // registration id of the parent block's entry (0: first block)
    std::vector<TokenId> tokens;   // the page_size token ids of the block
    std::uint64_t dup_of = 0;      // unregistered duplicate: the registration id it stands in for (0: none)
  };

  static std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
  std::uint64_t hash(std::uint64_t parent, std::span<const TokenId> tokens) const {
    return block_hash(parent, tokens) & hash_mask_;
  }
  std::size_t page_size_u() const { return static_cast<std::size_t>(page_size_); }
  const Entry& entry(BlockId b) const { return entries_[static_cast<std::size_t>(b)]; }
  Entry& entry(BlockId b) { return entries_[static_cast<std::size_t>(b)]; }

  // Operations after the checks cannot fail; a failure here is a bug in this class.
  static void must(const Status& s) {
    if (!s.ok()) throw Error(Status::internal(str_cat("KvCacheManager: ", s.message())));
  }

  static Status unknown_sequence(const char* argument, SeqId seq) {
    return Status::invalid_argument(argument,
                                    str_cat("unknown sequence id ", seq, " (never added or already freed)"));
  }
  static Status unknown_sequence(const char* argument, SeqId seq, std::size_t index) {
    return Status::invalid_argument(argument, str_cat("unknown sequence id ", seq, " at index ", index,
                                                      " (never added or already freed)"));
  }

  const Sequence* find(SeqId seq) const {
    const auto it = seqs_.find(seq);
    return it == seqs_.end() ? nullptr : &it->second;
  }
  Sequence* find(SeqId seq) {
    const auto it = seqs_.find(seq);
    return it == seqs_.end() ? nullptr : &it->second;
  }

  bool needs_cow(const Sequence& s, std::int64_t n) const {
    return n > 0 && s.num_tokens % page_size_ != 0 && pool_.refcount(s.blocks.back()) > 1;
  }
  std::int64_t append_cost(const Sequence& s, std::int64_t n) const {
    return ceil_div(s.num_tokens + n, page_size_) - static_cast<std::int64_t>(s.blocks.size()) +
           (needs_cow(s, n) ? 1 : 0);
  }

  // The registered block with hash h whose entry matches (parent_reg, tokens) exactly, or kNoBlock.
  BlockId lookup(std::uint64_t h, std::uint64_t parent_reg, std::span<const TokenId> tokens) const {
    const auto it = cache_.find(h);
    if (it == cache_.end()) return kNoBlock;
    const Entry& e = entry(it->second);
    if (e.parent_reg != parent_reg ||
        !std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end()))
      return kNoBlock;
    return it->second;
  }

  // Takes a block from the pool (precondition: one is available), dropping the entry of an evicted block.
  BlockId take_block() {
    BlockId b = kNoBlock, evicted = kNoBlock;
    must(pool_.allocate(&b, &evicted));
    if (evicted != kNoBlock) drop_entry(evicted, /*promote=*/true);
    return b;
  }

  // Removes b's cache entry (the pool has already un-marked it).
  // promote (eviction): a held duplicate of b's content takes the entry over, same hash and registration id,
  // so the entries chained after it stay reachable; otherwise (a stale or colliding entry replaced) its
  // duplicates are forgotten with it.
  void drop_entry(BlockId b, bool promote) {
    Entry& e = entry(b);
    cache_.erase(e.hash);
    e.registered = false;
    const auto [first, last] = duplicates_.equal_range(e.reg);
    if (promote && first != last) {
      const BlockId d = first->second;
      duplicates_.erase(first);
      Entry& de = entry(d);
      de.registered = true;
      de.dup_of = 0;
      de.hash = e.hash;
      de.reg = e.reg;
      de.parent_reg = e.parent_reg;
      de.tokens = std::move(e.tokens);
      cache_.emplace(de.hash, d);
      must(pool_.set_cacheable(d, true));  // held: cached once its last holder releases it
    } else {
      for (auto it = first; it != last; ++it) entry(it->second).dup_of = 0;
      duplicates_.erase(first, last);
    }
    e.tokens.clear();
  }

  // Removes b's cache entry and un-marks it in the pool (a cached block is freed).
  void unregister(BlockId b, bool promote = false) {
    drop_entry(b, promote);
    must(pool_.set_cacheable(b, false));
  }

  // b (no longer held) stops standing in for an entry.
  void forget_duplicate(BlockId b) {
    Entry& e = entry(b);
    if (e.dup_of == 0) return;
    const auto [first, last] = duplicates_.equal_range(e.dup_of);
    for (auto it = first; it != last; ++it)
      if (it->second == b) {
        duplicates_.erase(it);
        break;
      }
    e.dup_of = 0;
  }

  // Writes `tokens` at the end of s: allocates the blocks they need (the capacity was checked), registers
  // every block that becomes full. The last block, when partial, is not shared (the caller did the CoW).
  void fill(Sequence& s, std::span<const TokenId> tokens) {
    for (const TokenId t : tokens) {
      if (s.num_tokens % page_size_ == 0) s.blocks.push_back(take_block());
      s.partial.push_back(t);
      ++s.num_tokens;
      if (s.num_tokens % page_size_ == 0) {
        register_full_block(s);
        s.partial.clear();
      }
    }
  }

  // s's last block just became full with the tokens in s.partial: advance its hash chain and register it.
  void register_full_block(Sequence& s) {
    if (!prefix_caching_) return;
    const BlockId b = s.blocks.back();
    const std::uint64_t h = hash(s.chain_hash, s.partial);
    const auto it = cache_.find(h);
    if (it != cache_.end()) {
      const BlockId other = it->second;
      if (lookup(h, s.chain_reg, s.partial) == other) {  // the same content is cached already: keep that one
        s.chain_hash = h;
        s.chain_reg = entry(other).reg;
        entry(b).dup_of = s.chain_reg;  // and b stands in for it (drop_entry promotes it)
        duplicates_.emplace(s.chain_reg, b);
        return;
      }
      unregister(other);  // a stale entry (its parent was evicted) or a hash collision: the newer one wins
    }
    Entry& e = entry(b);
    e.registered = true;
    e.hash = h;
    e.reg = next_reg_++;
    e.parent_reg = s.chain_reg;
    e.tokens.assign(s.partial.begin(), s.partial.end());
    cache_.emplace(h, b);
    must(pool_.set_cacheable(b, true));
    s.chain_hash = h;
    s.chain_reg = e.reg;
  }

  BlockPool pool_;
  std::int32_t page_size_;
  bool prefix_caching_;
  std::map<SeqId, Sequence> seqs_;
  std::vector<Entry> entries_;                                  // by block id
  std::unordered_map<std::uint64_t, BlockId> cache_;            // hash -> registered block
  std::unordered_multimap<std::uint64_t, BlockId> duplicates_;  // registration id -> held duplicates
  SeqId next_seq_ = 0;
  std::uint64_t next_reg_ = 1;
  std::uint64_t hash_mask_ = ~std::uint64_t{0};
};

}  // namespace llmk::kvcache
