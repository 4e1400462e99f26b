// llmk/kvcache/block_pool.hpp: the physical block ids of a paged KV cache (host only, no CUDA): BlockPool
// (reference counts, a free list, an LRU list of evictable cached blocks) and the block hash of prefix
// caching. KvCacheManager (llmk/kvcache/allocator.hpp, which includes this header) builds sequences' block
// tables on top; its file comment states the error guarantees and thread safety both classes share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "llmk/core/status.cuh"

namespace llmk::kvcache {

namespace detail {
// Reserves room for `need` elements before a call mutates (the strong guarantee), growing geometrically:
// reserving exactly `need` would copy the whole vector on every per-step append (O(n^2) over n steps).
template <class V>
void reserve_for(V& v, std::size_t need) {
  if (need > v.capacity()) v.reserve(std::max(need, 2 * v.capacity()));
}
}  // namespace detail

/// A physical block (page) id, in [0, num_blocks).
using BlockId = std::int32_t;
/// A token id as the model's tokenizer produces it.
using TokenId = std::int32_t;
/// A sequence handle, assigned by KvCacheManager (0, 1, 2, ... never reused).
using SeqId = std::int64_t;

/// "No block" (an empty slot of an evicted-block report, the default pad of a padded block table).
inline constexpr BlockId kNoBlock = -1;

// ---------------------------------------------------------------------------------------------------------------
// Hashing of full blocks
// ---------------------------------------------------------------------------------------------------------------

/// Parent hash of a sequence's first block ("llmk-kvc" in ASCII).
inline constexpr std::uint64_t kRootHash = 0x6c6c6d6b2d6b7663ull;

/// The splitmix64 output function (Steele, Lea, Flood 2014): a bijective 64-bit mix with full avalanche.
///   static_assert(llmk::kvcache::mix64(0) == 0xe220a8397b1dcdafull);
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Hash of a full block given its parent's hash (kRootHash for the first block) and its token ids:
///   h = mix64(parent ^ 0xa0761d6478bd642f); for each token t: h = mix64(h ^ uint32(t));
///   return mix64(h ^ count)
/// Not cryptographic; KvCacheManager compares token ids exactly, so collisions never share wrong KV.
///   std::uint64_t h1 = llmk::kvcache::block_hash(llmk::kvcache::kRootHash, first_block_tokens);
///   std::uint64_t h2 = llmk::kvcache::block_hash(h1, second_block_tokens);
constexpr std::uint64_t block_hash(std::uint64_t parent, std::span<const TokenId> tokens) {
  std::uint64_t h = mix64(parent ^ 0xa0761d6478bd642full);
  for (const TokenId t : tokens) h = mix64(h ^ static_cast<std::uint32_t>(t));
  return mix64(h ^ static_cast<std::uint64_t>(tokens.size()));
}

// ---------------------------------------------------------------------------------------------------------------
// BlockPool
// ---------------------------------------------------------------------------------------------------------------

/// A fixed pool of N block ids with reference counts, a free list and an LRU list of evictable cached blocks.
///
/// Every block is in exactly one state:
///   kFree    on the free list, refcount 0;
///   kInUse   refcount >= 1;
///   kCached  refcount 0, "cacheable" (its content is registered in a prefix cache), on the LRU list.
/// A block is cacheable when its owner says so (set_cacheable); when the last reference to a cacheable block
/// is released it becomes kCached (back of the LRU list) instead of kFree. allocate() takes a free block
/// first (the lowest ids first on a fresh pool), else evicts the front (least recently used) of the LRU list.
///
///   llmk::kvcache::BlockPool pool(4);
///   llmk::kvcache::BlockId b;
///   LLMK_RETURN_IF_ERROR(pool.allocate(&b));   // refcount(b) == 1
///   LLMK_RETURN_IF_ERROR(pool.retain(b));      // 2: shared
///   LLMK_RETURN_IF_ERROR(pool.release(b));     // 1
///   LLMK_RETURN_IF_ERROR(pool.release(b));     // 0: free again
///   llmk::Status s = pool.release(b);          // kInvalidArgument "... double free: block 0 is free"
///
/// Thread safety: see the file comment (not thread-safe; concurrent const calls only).
class BlockPool {
 public:
  enum class State : std::uint8_t { kFree, kInUse, kCached };

  /// A pool of `num_blocks` free blocks (ids 0..num_blocks-1). Throws llmk::Error when num_blocks < 0.
  explicit BlockPool(std::int32_t num_blocks) {
    if (num_blocks < 0)
      throw Error(Status::invalid_argument("num_blocks", str_cat("must be >= 0, got ", num_blocks)));
    const auto n = static_cast<std::size_t>(num_blocks);
    refcount_.assign(n, 0);
    state_.assign(n, State::kFree);
    cacheable_.assign(n, 0);
    prev_.assign(n, kNoBlock);
    next_.assign(n, kNoBlock);
    free_.reserve(n);
    for (BlockId b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  }

  /// N, the number of blocks.
  std::int32_t num_blocks() const { return static_cast<std::int32_t>(refcount_.size()); }
  /// Blocks on the free list.
  std::int32_t num_free() const { return static_cast<std::int32_t>(free_.size()); }
  /// Evictable cached blocks (refcount 0, on the LRU list).
  std::int32_t num_cached() const { return num_cached_; }
  /// Blocks an allocation can obtain: num_free() + num_cached().
  std::int32_t num_available() const { return num_free() + num_cached_; }
  /// Blocks with at least one reference: N - num_available().
  std::int32_t num_in_use() const { return num_blocks() - num_available(); }

  /// True when 0 <= block < N.
  bool contains(BlockId block) const { return block >= 0 && block < num_blocks(); }
  /// State of a block; kFree for an id outside the pool.
  State state(BlockId block) const { return contains(block) ? state_[idx(block)] : State::kFree; }
  /// Reference count of a block; 0 for an id outside the pool.
  std::int32_t refcount(BlockId block) const { return contains(block) ? refcount_[idx(block)] : 0; }
  /// Whether a block goes to the LRU list (not the free list) when its last reference is released.
  bool cacheable(BlockId block) const { return contains(block) && cacheable_[idx(block)] != 0; }
  /// The block allocate() would evict next (the least recently used cached block), or kNoBlock.
  BlockId lru_front() const { return lru_head_; }

  /// ok when `block` is an id of this pool; otherwise invalid_argument naming `argument`.
  ///   LLMK_RETURN_IF_ERROR(pool.check_block(ids[i], "ids"));   // an id from outside, before using it
  Status check_block(BlockId block, const char* argument = "block") const {
    if (!contains(block))
      return Status::invalid_argument(argument, str_cat("block id ", block, " is not in the pool [0, ",
                                                        num_blocks(), ") (a foreign block id)"));
    return {};
  }

  /// Takes one block (refcount 1, not cacheable): a free one, else the LRU cached one. *evicted (when not
  /// null) receives the evicted block's id (the same as *block) or kNoBlock, so that the owner of the prefix
  /// cache can drop the block's entry. out_of_memory when no block is available; nothing changes then.
  ///   BlockId b, evicted;
  ///   LLMK_RETURN_IF_ERROR(pool.allocate(&b, &evicted));
  ///   if (evicted != llmk::kvcache::kNoBlock) cache.erase(evicted);
  Status allocate(BlockId* block, BlockId* evicted = nullptr) {
    if (block == nullptr) return Status::invalid_argument("block", "must not be null");
    if (num_available() == 0)
      return Status::out_of_memory(
          str_cat("KV block pool exhausted: all ", num_blocks(), " blocks are in use"));
    const BlockId b = take_one(evicted);
    *block = b;
    return {};
  }

  /// Takes `count` blocks at once (all or nothing), appending their ids to *blocks and the evicted ones (if
  /// any) to *evicted (when not null). out_of_memory when fewer than `count` are available.
  ///   std::vector<BlockId> ids;
  ///   LLMK_RETURN_IF_ERROR(pool.allocate(8, &ids));
  Status allocate(std::int32_t count, std::vector<BlockId>* blocks, std::vector<BlockId>* evicted = nullptr) {
    if (blocks == nullptr) return Status::invalid_argument("blocks", "must not be null");
    if (count < 0) return Status::invalid_argument("count", str_cat("must be >= 0, got ", count));
    if (count > num_available())
      return Status::out_of_memory(str_cat("KV block pool: ", count, " blocks requested, ", num_available(),
                                           " available (", num_free(), " free + ", num_cached_,
                                           " evictable) of ", num_blocks()));
    detail::reserve_for(*blocks, blocks->size() + static_cast<std::size_t>(count));
    if (evicted != nullptr) detail::reserve_for(*evicted, evicted->size() + static_cast<std::size_t>(count));
    for (std::int32_t i = 0; i < count; ++i) {
      BlockId ev = kNoBlock;
      blocks->push_back(take_one(&ev));
      if (ev != kNoBlock && evicted != nullptr) evicted->push_back(ev);
    }
    return {};
  }

  /// Adds a reference to an in-use block, or revives a cached block (refcount 0 -> 1, off the LRU list).
  /// invalid_argument for a foreign id or a free block.
  Status retain(BlockId block) {
    LLMK_RETURN_IF_ERROR(check_block(block));
    const std::size_t i = idx(block);
    if (state_[i] == State::kFree)
      return Status::invalid_argument("block",
                                      str_cat("block ", block, " is free (retain of an unallocated block)"));
    if (refcount_[i] == std::numeric_limits<std::int32_t>::max())
      return Status::invalid_argument("block", str_cat("block ", block, ": reference count overflow"));
    if (state_[i] == State::kCached) {
      lru_unlink(block);
      state_[i] = State::kInUse;
    }
    ++refcount_[i];
    return {};
  }

  /// Drops a reference. At refcount 0 the block goes to the back of the LRU list when cacheable, else to the
  /// free list. invalid_argument for a foreign id and for a double free (a block with no references: free or
  /// cached).
  Status release(BlockId block) {
    LLMK_RETURN_IF_ERROR(check_block(block));
    const std::size_t i = idx(block);
    if (state_[i] == State::kFree)
      return Status::invalid_argument("block", str_cat("double free: block ", block, " is free"));
    if (state_[i] == State::kCached)
      return Status::invalid_argument(
          "block",
          str_cat("double free: block ", block, " has no references (it is an evictable cached block)"));
    if (--refcount_[i] == 0) {
      if (cacheable_[i]) {
        state_[i] = State::kCached;
        lru_push_back(block);
      } else {
        state_[i] = State::kFree;
        free_.push_back(block);
      }
    }
    return {};
  }

  /// Marks a block cacheable or not. Marking an in-use block cacheable sends it to the LRU list instead of
  /// the free list at refcount 0; un-marking a cached block frees it at once. invalid_argument for a foreign
  /// id and for marking a free block cacheable.
  ///   LLMK_RETURN_IF_ERROR(pool.set_cacheable(b, true));   // its KV is registered in a prefix cache
  ///   LLMK_RETURN_IF_ERROR(pool.release(b));  // refcount 0: kCached, at the back of the LRU list
  Status set_cacheable(BlockId block, bool cacheable) {
    LLMK_RETURN_IF_ERROR(check_block(block));
    const std::size_t i = idx(block);
    if (cacheable && state_[i] == State::kFree)
      return Status::invalid_argument("block", str_cat("block ", block, " is free and cannot be cacheable"));
    if (!cacheable && state_[i] == State::kCached) {
      lru_unlink(block);
      state_[i] = State::kFree;
      free_.push_back(block);
    }
    cacheable_[i] = cacheable ? 1 : 0;
    return {};
  }

  /// Frees up to `max_count` cached blocks, least recently used first, appending their ids to *evicted (when
  /// not null). Returns how many were evicted. Never fails; max_count <= 0 evicts nothing.
  ///   std::vector<llmk::kvcache::BlockId> evicted;
  ///   pool.evict_lru(4, &evicted);   // then drop the evicted blocks' prefix-cache entries
  std::int32_t evict_lru(std::int32_t max_count, std::vector<BlockId>* evicted = nullptr) {
    std::int32_t n = 0;
    for (; n < max_count && lru_head_ != kNoBlock; ++n) {
      const BlockId b = lru_head_;
      if (evicted != nullptr) evicted->push_back(b);
      const Status s = set_cacheable(b, false);  // cannot fail: b is a cached block of this pool
      (void)s;
    }
    return n;
  }

  /// Checks every internal invariant (states, reference counts, free list, LRU links, counters); ok or
  /// internal("...") naming the first violation. O(N). For tests and fuzzers.
  ///   LLMK_RETURN_IF_ERROR(pool.check_invariants());
  Status check_invariants() const {
    const std::int32_t n = num_blocks();
    std::vector<std::uint8_t> seen(static_cast<std::size_t>(n), 0);
    for (const BlockId b : free_) {
      if (!contains(b)) return Status::internal(str_cat("free list holds foreign id ", b));
      if (seen[idx(b)]) return Status::internal(str_cat("block ", b, " is on the free list twice"));
      seen[idx(b)] = 1;
      if (state_[idx(b)] != State::kFree)
        return Status::internal(str_cat("block ", b, " is on the free list but not free"));
    }
    std::int32_t cached = 0;
    BlockId prev = kNoBlock;
    for (BlockId b = lru_head_; b != kNoBlock; b = next_[idx(b)]) {
      if (!contains(b)) return Status::internal(str_cat("LRU list holds foreign id ", b));
      if (seen[idx(b)]) return Status::internal(str_cat("block ", b, " is on the free/LRU lists twice"));
      seen[idx(b)] = 1;
      if (state_[idx(b)] != State::kCached)
        return Status::internal(str_cat("block ", b, " is on the LRU list but not cached"));
      if (prev_[idx(b)] != prev) return Status::internal(str_cat("LRU prev link of block ", b, " is wrong"));
      prev = b;
      if (++cached > n) return Status::internal("LRU list has a cycle");
    }
    if (lru_tail_ != prev) return Status::internal("LRU tail is wrong");
    if (cached != num_cached_)
      return Status::internal(str_cat("LRU list has ", cached, " blocks, counter says ", num_cached_));
    for (BlockId b = 0; b < n; ++b) {
      const std::size_t i = idx(b);
      switch (state_[i]) {
        case State::kFree:
          if (!seen[i]) return Status::internal(str_cat("free block ", b, " is not on the free list"));
          if (refcount_[i] != 0 || cacheable_[i])
            return Status::internal(
                str_cat("free block ", b, " has refcount ", refcount_[i], " / is cacheable"));
          break;
        case State::kCached:
          if (!seen[i]) return Status::internal(str_cat("cached block ", b, " is not on the LRU list"));
          if (refcount_[i] != 0 || !cacheable_[i])
            return Status::internal(
                str_cat("cached block ", b, " has refcount ", refcount_[i], " / not cacheable"));
          break;
        case State::kInUse:
          if (seen[i]) return Status::internal(str_cat("in-use block ", b, " is on the free or LRU list"));
          if (refcount_[i] <= 0)
            return Status::internal(str_cat("in-use block ", b, " has refcount ", refcount_[i]));
          if (prev_[i] != kNoBlock || next_[i] != kNoBlock)
            return Status::internal(str_cat("in-use block ", b, " has LRU links"));
          break;
        default:
          return Status::internal(str_cat("block ", b, " has an invalid state"));
      }
    }
    return {};
  }

  /// A complete, deterministic description of the state (free list order, LRU order, per-block refcount,
  /// state and cacheable flag). Equal strings <=> equal states; tests compare it before and after an error.
  ///   const std::string before = pool.debug_string();
  ///   if (!pool.release(b).ok()) assert(pool.debug_string() == before);   // errors change nothing
  std::string debug_string() const {
    std::string s = str_cat("BlockPool{N=", num_blocks(), " free=[");
    for (const BlockId b : free_) s += str_cat(b, ",");
    s += "] lru=[";
    for (BlockId b = lru_head_; b != kNoBlock; b = next_[idx(b)]) s += str_cat(b, ",");
    s += "] blocks=[";
    for (BlockId b = 0; b < num_blocks(); ++b)
      s += str_cat(b, ":", static_cast<int>(state_[idx(b)]), "/", refcount_[idx(b)], "/",
                   static_cast<int>(cacheable_[idx(b)]), " ");
    return s + "]}";
  }

 private:
  static std::size_t idx(BlockId b) { return static_cast<std::size_t>(b); }

  // Precondition: num_available() > 0.
  BlockId take_one(BlockId* evicted) {
    BlockId b;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
      if (evicted != nullptr) *evicted = kNoBlock;
    } else {
      b = lru_head_;
      lru_unlink(b);
      cacheable_[idx(b)] = 0;
      if (evicted != nullptr) *evicted = b;
    }
    state_[idx(b)] = State::kInUse;
    refcount_[idx(b)] = 1;
    return b;
  }

  void lru_push_back(BlockId b) {
    prev_[idx(b)] = lru_tail_;
    next_[idx(b)] = kNoBlock;
    if (lru_tail_ != kNoBlock)
      next_[idx(lru_tail_)] = b;
    else
      lru_head_ = b;
    lru_tail_ = b;
    ++num_cached_;
  }

  void lru_unlink(BlockId b) {
    const BlockId p = prev_[idx(b)], n = next_[idx(b)];
    if (p != kNoBlock)
      next_[idx(p)] = n;
    else
      lru_head_ = n;
    if (n != kNoBlock)
      prev_[idx(n)] = p;
    else
      lru_tail_ = p;
    prev_[idx(b)] = next_[idx(b)] = kNoBlock;
    --num_cached_;
  }

  std::vector<std::int32_t> refcount_;
  std::vector<State> state_;
  std::vector<std::uint8_t> cacheable_;
  std::vector<BlockId> prev_, next_;  // LRU links (kNoBlock = none)
  std::vector<BlockId> free_;         // a stack: allocate takes the back
  BlockId lru_head_ = kNoBlock, lru_tail_ = kNoBlock;
  std::int32_t num_cached_ = 0;
};

}  // namespace llmk::kvcache
