// Model-checking harnesses of llmk/kvcache/allocator.hpp, shared by the randomized doctest
// (tests/kvcache/allocator.cu) and the libFuzzer target (tests/kvcache/fuzz_allocator.cpp). No doctest here:
// every operation returns an empty string when everything checked out, else a description of the failure.
//
// ManagerHarness drives a KvCacheManager and keeps, independently of it, a model of every sequence's tokens
// and block table, plus a "page memory" that simulates the device pages: appended tokens are written into
// their page slots, CopyOps are performed, free pages are poisoned. After every operation it checks:
//   - the manager's own invariant checker;
//   - the model: live sequences, lengths, block tables (an operation changes only its own sequence's table),
//     refcount of every block = number of model tables holding it, free + evictable + referenced = N;
//   - the tokens of every sequence read back through its block table from the page memory equal the model's
//     tokens (this is what proves copy-on-write and prefix sharing: a write into a shared page, a missing or
//     wrong copy, a reused cache block with other content, or an evicted page still in use shows up here);
//   - success is predicted by the model: an append succeeds iff its block cost (computed from the model's
//     tables) is <= N - referenced blocks; an add that fails needed more blocks than were available;
//   - a failing call returns the expected code and leaves debug_string() unchanged.
// PoolHarness does the same for a bare BlockPool against a model of states, refcounts and LRU order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "llmk/core/status.cuh"
#include "llmk/kvcache/allocator.hpp"

namespace llmk::kvcache::testing {

inline constexpr TokenId kPoison = -7;

// The page-table structs of kvcache/cache_ops.cuh (which needs a CUDA or simulator build; the fuzzer has
// none).
struct HostCsr {
  std::vector<int> indptr, indices, last_page_len;
};
struct HostBlockTable {
  int max_blocks = 0;
  std::vector<int> table, seq_lens;
};

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// ---------------------------------------------------------------------------------------------------------------
class ManagerHarness {
 public:
  struct Stats {
    std::int64_t adds = 0, appends = 0, forks = 0, frees = 0, evict_calls = 0;
    std::int64_t oom = 0, rejected = 0, cow = 0, hit_tokens = 0, evicted = 0;
    std::int64_t evicted_by_allocation = 0;  // cached blocks that an add or append took over
  };

  // hash_bits < 64 forces hash collisions (KvCacheManager::set_hash_bits_for_testing).
  ManagerHarness(std::int32_t num_blocks, std::int32_t page_size, bool prefix_caching, int hash_bits = 64)
      : kv_(num_blocks, page_size, prefix_caching),
        n_(num_blocks),
        page_(page_size),
        mem_(static_cast<std::size_t>(num_blocks) * static_cast<std::size_t>(page_size), kPoison) {
    if (!kv_.set_hash_bits_for_testing(hash_bits).ok()) throw Error(Status::internal("bad hash_bits"));
  }

  const KvCacheManager& kv() const { return kv_; }
  const Stats& stats() const { return stats_; }
  std::vector<SeqId> live() const {
    std::vector<SeqId> ids;
    for (const auto& kv : model_) ids.push_back(kv.first);
    return ids;
  }
  std::int64_t length(SeqId seq) const { return static_cast<std::int64_t>(model_.at(seq).size()); }

  std::string add(std::span<const TokenId> prompt, std::int64_t max_cached_tokens) {
    const std::string before = kv_.debug_string();
    const std::vector<BlockPool::State> states = pool_states();
    const std::int64_t available = n_ - referenced();
    const std::int64_t len = static_cast<std::int64_t>(prompt.size());
    SeqId id = -1;
    std::int64_t cached = -1;
    const Status s = kv_.add_sequence(prompt, &id, &cached, max_cached_tokens);
    if (!s.ok()) {
      if (s.code() != Status::Code::kOutOfMemory) return "add_sequence: unexpected error: " + s.message();
      if (ceil_div(len, page_) <= available)
        return str_cat("add_sequence failed with ", available, " blocks available for ", ceil_div(len, page_),
                       ": ", s.message());
      if (kv_.debug_string() != before) return "add_sequence changed the state on error";
      ++stats_.oom;
      return verify();
    }
    ++stats_.adds;
    if (model_.count(id) || (!model_.empty() && id <= model_.rbegin()->first) || id < last_id_)
      return str_cat("add_sequence returned a used or old id ", id);
    last_id_ = id + 1;
    const std::int64_t limit = std::min(len, std::max<std::int64_t>(max_cached_tokens, 0));
    if (cached < 0 || cached % page_ != 0 || cached > limit || (!kv_.prefix_caching() && cached != 0))
      return str_cat("add_sequence: bad cached token count ", cached, " (len ", len, ", limit ", limit, ")");
    const std::span<const BlockId> table = kv_.block_table(id);
    if (static_cast<std::int64_t>(table.size()) != ceil_div(len, page_))
      return str_cat("add_sequence: ", table.size(), " blocks for ", len, " tokens");
    for (std::int64_t j = 0; j < cached / page_; ++j)
      if (states[static_cast<std::size_t>(table[static_cast<std::size_t>(j)])] == BlockPool::State::kFree)
        return str_cat("add_sequence reused block ", table[static_cast<std::size_t>(j)], " that was free");
    for (std::size_t j = static_cast<std::size_t>(cached / page_); j < table.size(); ++j)
      stats_.evicted_by_allocation += states[static_cast<std::size_t>(table[j])] == BlockPool::State::kCached;
    for (std::int64_t p = cached; p < len; ++p) write(table, p, prompt[static_cast<std::size_t>(p)]);
    model_[id].assign(prompt.begin(), prompt.end());
    tables_[id].assign(table.begin(), table.end());
    stats_.hit_tokens += cached;
    return verify();
  }

  std::string append(SeqId seq, std::span<const TokenId> tokens) {
    const std::string before = kv_.debug_string();
    const std::vector<BlockPool::State> states = pool_states();
    std::vector<TokenId>& m = model_.at(seq);
    const std::vector<BlockId> old = tables_.at(seq);
    const std::int64_t len = static_cast<std::int64_t>(m.size()),
                       n = static_cast<std::int64_t>(tokens.size());
    const bool cow = n > 0 && len % page_ != 0 && refs_in_model(old.back()) > 1;
    const std::int64_t cost = ceil_div(len + n, page_) - ceil_div(len, page_) + (cow ? 1 : 0);
    const std::int64_t available = n_ - referenced();
    std::int64_t predicted = -1;
    if (const Status s = kv_.blocks_needed(seq, n, &predicted); !s.ok() || predicted != cost)
      return str_cat("blocks_needed: ", predicted, " (", s.message(), "), model says ", cost);
    const CopyOp sentinel{123, 456, 7};
    std::vector<CopyOp> copies{sentinel};
    const Status s = kv_.append_tokens(seq, tokens, &copies);
    if (!s.ok()) {
      if (s.code() != Status::Code::kOutOfMemory) return "append_tokens: unexpected error: " + s.message();
      if (cost <= available)
        return str_cat("append_tokens failed with ", available, " blocks available for ", cost, ": ",
                       s.message());
      if (kv_.debug_string() != before) return "append_tokens changed the state on error";
      if (copies.size() != 1 || copies[0] != sentinel) return "append_tokens changed *copies on error";
      ++stats_.oom;
      return verify();
    }
    ++stats_.appends;
    if (cost > available)
      return str_cat("append_tokens succeeded needing ", cost, " of ", available, " blocks");
    const std::span<const BlockId> table = kv_.block_table(seq);
    if (static_cast<std::int64_t>(table.size()) != ceil_div(len + n, page_))
      return str_cat("append_tokens: ", table.size(), " blocks for ", len + n, " tokens");
    if (copies.size() != (cow ? 2u : 1u) || copies[0] != sentinel)
      return str_cat("append_tokens: ", copies.size() - 1, " copies, expected ", cow ? 1 : 0);
    for (std::size_t j = 0; j < old.size(); ++j) {
      const bool last = j + 1 == old.size();
      if (cow && last) {
        const CopyOp want{old[j], table[j], static_cast<std::int32_t>(len % page_)};
        if (copies[1] != want || table[j] == old[j])
          return str_cat("copy-on-write: got {", copies[1].src_block, ",", copies[1].dst_block, ",",
                         copies[1].num_tokens, "}, table[", j, "]=", table[j]);
      } else if (table[j] != old[j]) {
        return str_cat("append_tokens changed block ", j, " of the table");
      }
    }
    for (std::size_t j = old.size() - (cow ? 1 : 0); j < table.size(); ++j)
      stats_.evicted_by_allocation += states[static_cast<std::size_t>(table[j])] == BlockPool::State::kCached;
    if (cow) {
      ++stats_.cow;
      const CopyOp& c = copies[1];
      std::copy_n(page(c.src_block), c.num_tokens, page(c.dst_block));
    }
    for (std::int64_t i = 0; i < n; ++i) write(table, len + i, tokens[static_cast<std::size_t>(i)]);
    m.insert(m.end(), tokens.begin(), tokens.end());
    tables_[seq].assign(table.begin(), table.end());
    return verify();
  }

  std::string fork(SeqId parent) {
    SeqId child = -1;
    const std::int32_t free_before = kv_.pool().num_free(), cached_before = kv_.pool().num_cached();
    if (const Status s = kv_.fork(parent, &child); !s.ok()) return "fork: " + s.message();
    ++stats_.forks;
    if (model_.count(child) || child < last_id_) return str_cat("fork returned a used or old id ", child);
    last_id_ = child + 1;
    const std::span<const BlockId> table = kv_.block_table(child);
    if (!std::equal(table.begin(), table.end(), tables_.at(parent).begin(), tables_.at(parent).end()))
      return "fork: the child's table differs from the parent's";
    if (kv_.pool().num_free() != free_before || kv_.pool().num_cached() != cached_before)
      return "fork took blocks from the pool";
    model_[child] = model_.at(parent);
    tables_[child] = tables_.at(parent);
    return verify();
  }

  std::string free(SeqId seq) {
    if (const Status s = kv_.free_sequence(seq); !s.ok()) return "free_sequence: " + s.message();
    ++stats_.frees;
    model_.erase(seq);
    tables_.erase(seq);
    const std::string err = verify();
    if (!err.empty()) return err;
    return reject_unknown(seq);  // a double free must be rejected
  }

  std::string evict(std::int32_t max_blocks) {
    const std::int32_t cached = kv_.pool().num_cached(), entries = kv_.num_cache_entries();
    const std::int32_t got = kv_.evict_cached_blocks(max_blocks);
    ++stats_.evict_calls;
    stats_.evicted += got;
    if (got != std::clamp(max_blocks, 0, cached))
      return str_cat("evict_cached_blocks(", max_blocks, ") evicted ", got, " of ", cached);
    // An evicted entry whose content a live sequence holds in a duplicate block moves to that block (in use,
    // not evictable): the entries drop by `got` minus those moves.
    const std::int32_t after = kv_.num_cache_entries();
    if (kv_.pool().num_cached() != cached - got || after < entries - got || after > entries)
      return "evict_cached_blocks: counts are off";
    return verify();
  }

  // Every call that names a sequence must reject `bogus` (not live) and change nothing.
  std::string reject_unknown(SeqId bogus) {
    if (model_.count(bogus)) return "reject_unknown: the id is live";
    const std::string before = kv_.debug_string();
    std::vector<CopyOp> copies;
    SeqId out = -1;
    std::int64_t blocks = -1;
    HostCsr csr;
    HostBlockTable padded;
    const TokenId t = 1;
    const SeqId batch[] = {bogus};
    const Status results[] = {
        kv_.free_sequence(bogus),    kv_.append_tokens(bogus, std::span(&t, 1), &copies),
        kv_.fork(bogus, &out),       kv_.blocks_needed(bogus, 1, &blocks),
        kv_.export_csr(batch, &csr), kv_.export_block_table(batch, &padded)};
    for (const Status& s : results) {
      if (s.code() != Status::Code::kInvalidArgument ||
          s.message().find("unknown sequence") == std::string::npos)
        return "an unknown sequence id was not rejected: " + s.message();
      ++stats_.rejected;
    }
    if (kv_.debug_string() != before || !copies.empty() || out != -1 || blocks != -1)
      return "a rejected call changed the state or its outputs";
    if (kv_.block_table(bogus).size() != 0 || kv_.num_tokens(bogus) != -1 || kv_.contains(bogus))
      return "queries of an unknown sequence";
    return {};
  }

  // Both exports of `seqs` (live ids, repeats allowed) against block_table() and the model lengths.
  std::string check_exports(std::span<const SeqId> seqs) {
    HostCsr csr;
    HostBlockTable padded;
    if (const Status s = kv_.export_csr(seqs, &csr); !s.ok()) return "export_csr: " + s.message();
    const std::int32_t min_width = static_cast<std::int32_t>(seqs.size() % 3);
    if (const Status s = kv_.export_block_table(seqs, &padded, min_width, -5); !s.ok())
      return "export_block_table: " + s.message();
    if (csr.indptr.size() != seqs.size() + 1 || csr.last_page_len.size() != seqs.size() ||
        csr.indptr[0] != 0 || padded.seq_lens.size() != seqs.size())
      return "export: wrong sizes";
    std::int64_t width = std::max<std::int32_t>(min_width, 1);  // at least one column, even all-empty
    for (const SeqId id : seqs)
      width = std::max<std::int64_t>(width, static_cast<std::int64_t>(tables_.at(id).size()));
    if (padded.max_blocks != width ||
        static_cast<std::int64_t>(padded.table.size()) != width * static_cast<std::int64_t>(seqs.size()))
      return "export_block_table: wrong width";
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      const std::vector<BlockId>& table = tables_.at(seqs[i]);
      const std::int64_t len = length(seqs[i]);
      const auto begin = csr.indices.begin() + csr.indptr[i];
      const auto end = csr.indices.begin() + csr.indptr[i + 1];
      if (!std::equal(begin, end, table.begin(), table.end())) return "export_csr: wrong page indices";
      const std::int64_t last = len == 0 ? 0 : (len - 1) % page_ + 1;
      if (csr.last_page_len[i] != last) return "export_csr: wrong last page length";
      if (padded.seq_lens[i] != len) return "export_block_table: wrong length";
      for (std::int64_t j = 0; j < width; ++j) {
        const BlockId want =
            j < static_cast<std::int64_t>(table.size()) ? table[static_cast<std::size_t>(j)] : -5;
        if (padded.table[static_cast<std::size_t>(static_cast<std::int64_t>(i) * width + j)] != want)
          return "export_block_table: wrong entry";
      }
    }
    if (csr.indptr.back() != static_cast<int>(csr.indices.size()))
      return "export_csr: indptr does not end at the number of pages";
    return {};
  }

  // Frees everything: then no block may be referenced, and after evicting the cache every block is free.
  std::string finish() {
    for (const SeqId id : live()) {
      const std::string err = free(id);
      if (!err.empty()) return err;
    }
    if (kv_.pool().num_in_use() != 0)
      return str_cat("leak: ", kv_.pool().num_in_use(), " blocks still in use");
    if (kv_.pool().num_free() + kv_.pool().num_cached() != n_) return "leak: free + cached != N";
    const std::string err = evict(n_);
    if (!err.empty()) return err;
    if (kv_.pool().num_free() != n_ || kv_.num_cache_entries() != 0 || kv_.num_sequences() != 0)
      return "leak: not every block is free after evicting the cache";
    return {};
  }

  std::string verify() {
    if (const Status s = kv_.check_invariants(); !s.ok()) return "check_invariants: " + s.message();
    if (kv_.sequences() != live()) return "the manager's live sequences differ from the model's";
    std::vector<std::int32_t> refs(static_cast<std::size_t>(n_), 0);
    for (const auto& [id, tokens] : model_) {
      const std::vector<BlockId>& want = tables_.at(id);
      const std::span<const BlockId> table = kv_.block_table(id);
      if (!std::equal(table.begin(), table.end(), want.begin(), want.end()))
        return str_cat("the block table of sequence ", id, " changed");
      if (kv_.num_tokens(id) != static_cast<std::int64_t>(tokens.size()))
        return str_cat("sequence ", id, " has ", kv_.num_tokens(id), " tokens, model ", tokens.size());
      for (std::size_t p = 0; p < tokens.size(); ++p) {
        const TokenId got =
            page(table[p / static_cast<std::size_t>(page_)])[p % static_cast<std::size_t>(page_)];
        if (got != tokens[p])
          return str_cat("sequence ", id, " token ", p, " reads ", got, " through its block table, model ",
                         tokens[p]);
      }
      for (const BlockId b : want) ++refs[static_cast<std::size_t>(b)];
    }
    std::int32_t referenced = 0;
    for (BlockId b = 0; b < n_; ++b) {
      if (kv_.pool().refcount(b) != refs[static_cast<std::size_t>(b)])
        return str_cat("block ", b, " refcount ", kv_.pool().refcount(b), ", model ",
                       refs[static_cast<std::size_t>(b)]);
      referenced += refs[static_cast<std::size_t>(b)] > 0;
      if (kv_.pool().state(b) == BlockPool::State::kFree) std::fill_n(page(b), page_, kPoison);
    }
    if (kv_.pool().num_free() + kv_.pool().num_cached() + referenced != n_)
      return "free + evictable + referenced != N";
    return {};
  }

 private:
  TokenId* page(BlockId b) {
    return mem_.data() + static_cast<std::size_t>(b) * static_cast<std::size_t>(page_);
  }
  void write(std::span<const BlockId> table, std::int64_t pos, TokenId t) {
    page(table[static_cast<std::size_t>(pos / page_)])[pos % page_] = t;
  }
  std::int32_t refs_in_model(BlockId b) const {
    std::int32_t r = 0;
    for (const auto& kv : tables_)
      r += static_cast<std::int32_t>(std::count(kv.second.begin(), kv.second.end(), b));
    return r;
  }
  std::int32_t referenced() const {
    std::vector<std::uint8_t> seen(static_cast<std::size_t>(n_), 0);
    for (const auto& kv : tables_)
      for (const BlockId b : kv.second) seen[static_cast<std::size_t>(b)] = 1;
    return static_cast<std::int32_t>(std::count(seen.begin(), seen.end(), 1));
  }
  std::vector<BlockPool::State> pool_states() const {
    std::vector<BlockPool::State> s(static_cast<std::size_t>(n_));
    for (BlockId b = 0; b < n_; ++b) s[static_cast<std::size_t>(b)] = kv_.pool().state(b);
    return s;
  }

  KvCacheManager kv_;
  std::int32_t n_, page_;
  std::vector<TokenId> mem_;  // [N, page_size] simulated pages
  std::map<SeqId, std::vector<TokenId>> model_;
  std::map<SeqId, std::vector<BlockId>> tables_;
  SeqId last_id_ = 0;
  Stats stats_;
};

// ---------------------------------------------------------------------------------------------------------------
class PoolHarness {
 public:
  explicit PoolHarness(std::int32_t num_blocks)
      : pool_(num_blocks),
        n_(num_blocks),
        state_(static_cast<std::size_t>(num_blocks), BlockPool::State::kFree),
        ref_(static_cast<std::size_t>(num_blocks), 0),
        cacheable_(static_cast<std::size_t>(num_blocks), false) {}

  const BlockPool& pool() const { return pool_; }
  std::int64_t errors() const { return errors_; }

  std::string allocate() {
    const std::int64_t free = std::count(state_.begin(), state_.end(), BlockPool::State::kFree);
    BlockId b = kNoBlock, evicted = -9;
    const std::string before = pool_.debug_string();
    const Status s = pool_.allocate(&b, &evicted);
    if (free == 0 && lru_.empty()) {
      if (s.code() != Status::Code::kOutOfMemory) return "allocate on an exhausted pool: " + s.message();
      if (pool_.debug_string() != before || b != kNoBlock) return "allocate changed the state on error";
      ++errors_;
      return verify();
    }
    if (!s.ok()) return "allocate: " + s.message();
    if (!pool_.contains(b)) return str_cat("allocate returned a foreign id ", b);
    if (free > 0) {
      if (state_[idx(b)] != BlockPool::State::kFree || evicted != kNoBlock)
        return str_cat("allocate returned block ", b, " (evicted ", evicted, ") while free blocks existed");
    } else {
      if (b != lru_.front() || evicted != b)
        return str_cat("allocate evicted ", evicted, ", LRU front ", lru_.front());
      lru_.pop_front();
    }
    state_[idx(b)] = BlockPool::State::kInUse;
    ref_[idx(b)] = 1;
    cacheable_[idx(b)] = false;
    return verify();
  }

  std::string allocate_n(std::int32_t count) {
    const std::string before = pool_.debug_string();
    const std::int64_t available = std::count(state_.begin(), state_.end(), BlockPool::State::kFree) +
                                   static_cast<std::int64_t>(lru_.size());
    std::vector<BlockId> blocks{kNoBlock}, evicted;
    const Status s = pool_.allocate(count, &blocks, &evicted);
    if (count < 0 || count > available) {
      if (s.ok()) return "allocate(count) succeeded beyond the available blocks";
      if (pool_.debug_string() != before || blocks.size() != 1)
        return "allocate(count) changed the state on error";
      ++errors_;
      return verify();
    }
    if (!s.ok()) return "allocate(count): " + s.message();
    if (blocks.size() != static_cast<std::size_t>(count) + 1)
      return "allocate(count): wrong number of blocks";
    std::size_t next_evicted = 0;
    for (std::size_t i = 1; i < blocks.size(); ++i) {
      const BlockId b = blocks[i];
      if (state_[idx(b)] == BlockPool::State::kCached) {
        if (lru_.empty() || lru_.front() != b || next_evicted >= evicted.size() || evicted[next_evicted] != b)
          return "allocate(count): eviction out of LRU order or unreported";
        ++next_evicted;
        lru_.pop_front();
      } else if (state_[idx(b)] != BlockPool::State::kFree) {
        return "allocate(count) returned a block in use";
      }
      state_[idx(b)] = BlockPool::State::kInUse;
      ref_[idx(b)] = 1;
      cacheable_[idx(b)] = false;
    }
    if (next_evicted != evicted.size()) return "allocate(count) reported blocks it did not evict";
    return verify();
  }

  std::string retain(BlockId b) {
    const bool ok = b >= 0 && b < n_ && state_[idx(b)] != BlockPool::State::kFree;
    const std::string before = pool_.debug_string();
    return mutate(pool_.retain(b), ok, before, [&] {
      if (state_[idx(b)] == BlockPool::State::kCached) lru_.erase(std::find(lru_.begin(), lru_.end(), b));
      state_[idx(b)] = BlockPool::State::kInUse;
      ++ref_[idx(b)];
    });
  }

  std::string release(BlockId b) {
    const bool ok = b >= 0 && b < n_ && state_[idx(b)] == BlockPool::State::kInUse;
    const std::string before = pool_.debug_string();
    return mutate(pool_.release(b), ok, before, [&] {
      if (--ref_[idx(b)] == 0) {
        state_[idx(b)] = cacheable_[idx(b)] ? BlockPool::State::kCached : BlockPool::State::kFree;
        if (cacheable_[idx(b)]) lru_.push_back(b);
      }
    });
  }

  std::string set_cacheable(BlockId b, bool c) {
    const bool ok = b >= 0 && b < n_ && !(c && state_[idx(b)] == BlockPool::State::kFree);
    const std::string before = pool_.debug_string();
    return mutate(pool_.set_cacheable(b, c), ok, before, [&] {
      if (!c && state_[idx(b)] == BlockPool::State::kCached) {
        lru_.erase(std::find(lru_.begin(), lru_.end(), b));
        state_[idx(b)] = BlockPool::State::kFree;
      }
      cacheable_[idx(b)] = c;
    });
  }

  std::string evict(std::int32_t k) {
    std::vector<BlockId> evicted;
    const std::int32_t got = pool_.evict_lru(k, &evicted);
    const std::int32_t want = std::clamp<std::int32_t>(k, 0, static_cast<std::int32_t>(lru_.size()));
    if (got != want || evicted.size() != static_cast<std::size_t>(want)) return "evict_lru: wrong count";
    for (const BlockId b : evicted) {
      if (b != lru_.front()) return "evict_lru: not in LRU order";
      lru_.pop_front();
      state_[idx(b)] = BlockPool::State::kFree;
      cacheable_[idx(b)] = false;
    }
    return verify();
  }

  std::string verify() const {
    if (const Status s = pool_.check_invariants(); !s.ok()) return "check_invariants: " + s.message();
    std::int32_t free = 0;
    for (BlockId b = 0; b < n_; ++b) {
      if (pool_.state(b) != state_[idx(b)] || pool_.refcount(b) != ref_[idx(b)] ||
          pool_.cacheable(b) != cacheable_[idx(b)])
        return str_cat("block ", b, " differs from the model");
      free += state_[idx(b)] == BlockPool::State::kFree;
    }
    if (pool_.num_free() != free || pool_.num_cached() != static_cast<std::int32_t>(lru_.size()))
      return "pool counts differ from the model";
    if (pool_.lru_front() != (lru_.empty() ? kNoBlock : lru_.front()))
      return "LRU front differs from the model";
    return {};
  }

 private:
  static std::size_t idx(BlockId b) { return static_cast<std::size_t>(b); }

  // A call the model says succeeds iff `ok`: on success apply the model update, on failure expect an
  // invalid_argument and an unchanged pool.
  template <class Update>
  std::string mutate(const Status& s, bool ok, const std::string& before, Update&& update) {
    if (ok) {
      if (!s.ok()) return "unexpected error: " + s.message();
      update();
      return verify();
    }
    if (s.code() != Status::Code::kInvalidArgument) return "expected invalid_argument, got: " + s.message();
    ++errors_;
    if (pool_.debug_string() != before) return "a rejected call changed the pool: " + s.message();
    return verify();
  }

  BlockPool pool_;
  std::int32_t n_;
  std::vector<BlockPool::State> state_;
  std::vector<std::int32_t> ref_;
  std::vector<bool> cacheable_;
  std::deque<BlockId> lru_;
  std::int64_t errors_ = 0;
};

// ---------------------------------------------------------------------------------------------------------------
// Random drivers. `Source` is a callable std::uint32_t(std::uint32_t bound) -> [0, bound) (a seeded RNG in
// the doctest, the fuzzer's bytes in the fuzz target). Each returns an empty string or the first failure.
// ---------------------------------------------------------------------------------------------------------------

// `steps` random manager operations: add (prompts from a few shared "families" plus random tails, over a
// small token alphabet so that independent sequences also produce equal blocks), append (one token or a
// burst), fork, free, evict, exports, and calls with unknown ids. At most `max_live` sequences.
template <class Source>
std::string run_manager_steps(ManagerHarness& h, Source&& src, std::int64_t steps,
                              std::int32_t max_live = 16) {
  const std::int32_t page = h.kv().page_size();
  const std::uint32_t alphabet = 2 + src(3);
  std::vector<std::vector<TokenId>> families(4);
  std::uint32_t lcg = 12345;
  for (auto& f : families) {
    f.resize(1 + (lcg = lcg * 1103515245u + 12345u) % static_cast<std::uint32_t>(5 * page));
    for (auto& t : f) t = static_cast<TokenId>(((lcg = lcg * 1103515245u + 12345u) >> 16) % alphabet);
  }
  const auto pick = [&](const std::vector<SeqId>& ids) {
    return ids[src(static_cast<std::uint32_t>(ids.size()))];
  };
  for (std::int64_t step = 0; step < steps; ++step) {
    if constexpr (requires { src.exhausted(); })
      if (src.exhausted()) break;
    const std::vector<SeqId> live = h.live();
    std::uint32_t op = src(100);
    if (live.empty()) op = 0;
    if (static_cast<std::int32_t>(live.size()) >= max_live && (op < 25 || (op >= 55 && op < 65))) op = 70;
    std::string err;
    if (op < 25) {  // add
      const auto& base = families[src(static_cast<std::uint32_t>(families.size()))];
      std::vector<TokenId> prompt(base.begin(),
                                  base.begin() + src(static_cast<std::uint32_t>(base.size()) + 1));
      for (std::uint32_t i = src(static_cast<std::uint32_t>(2 * page + 1)); i > 0; --i)
        prompt.push_back(static_cast<TokenId>(src(alphabet)));
      const std::int64_t len = static_cast<std::int64_t>(prompt.size());
      const std::uint32_t mode = src(4);
      const std::int64_t max_cached =
          mode < 2    ? std::numeric_limits<std::int64_t>::max()
          : mode == 2 ? len - 1
                      : static_cast<std::int64_t>(src(static_cast<std::uint32_t>(len + 1)));
      err = h.add(prompt, max_cached);
    } else if (op < 55) {  // append
      const SeqId s = pick(live);
      std::vector<TokenId> tokens(src(3) == 0 ? src(static_cast<std::uint32_t>(3 * page + 1)) : 1);
      for (auto& t : tokens) t = static_cast<TokenId>(src(alphabet));
      err = h.append(s, tokens);
    } else if (op < 65) {  // fork
      err = h.fork(pick(live));
    } else if (op < 88) {  // free
      err = h.free(pick(live));
    } else if (op < 92) {  // evict
      err = h.evict(static_cast<std::int32_t>(src(4)));
    } else if (op < 97) {  // exports of a random batch, repeats allowed
      std::vector<SeqId> batch(src(5));
      for (auto& s : batch) s = pick(live);
      err = h.check_exports(batch);
    } else {  // unknown ids: a never-issued one or (when one exists) a freed one
      const SeqId max_id = live.back();
      SeqId bogus = max_id + 1 + static_cast<SeqId>(src(1000));
      for (SeqId id = static_cast<SeqId>(src(static_cast<std::uint32_t>(max_id + 1))); id <= max_id; ++id)
        if (!std::binary_search(live.begin(), live.end(), id)) {
          bogus = id;
          break;
        }
      err = h.reject_unknown(src(8) == 0 ? -1 - static_cast<SeqId>(src(5)) : bogus);
    }
    if (!err.empty()) return str_cat("step ", step, " (op ", op, "): ", err);
  }
  return {};
}

// `steps` random pool operations with ids from [-2, N + 2) (foreign ones included).
template <class Source>
std::string run_pool_steps(PoolHarness& h, Source&& src, std::int64_t steps) {
  const std::int32_t n = h.pool().num_blocks();
  const auto any_id = [&] { return static_cast<BlockId>(src(static_cast<std::uint32_t>(n + 4))) - 2; };
  for (std::int64_t step = 0; step < steps; ++step) {
    if constexpr (requires { src.exhausted(); })
      if (src.exhausted()) break;
    const std::uint32_t op = src(100);
    std::string err;
    if (op < 30)
      err = h.allocate();
    else if (op < 35)
      err = h.allocate_n(static_cast<std::int32_t>(src(static_cast<std::uint32_t>(n + 3))) - 1);
    else if (op < 50)
      err = h.retain(any_id());
    else if (op < 80)
      err = h.release(any_id());
    else if (op < 95)
      err = h.set_cacheable(any_id(), src(4) != 0);
    else
      err = h.evict(static_cast<std::int32_t>(src(4)) - 1);
    if (!err.empty()) return str_cat("step ", step, " (op ", op, "): ", err);
  }
  return {};
}

}  // namespace llmk::kvcache::testing
