// Tests of the host KV block allocator (llmk/kvcache/allocator.hpp): BlockPool and KvCacheManager, worked
// examples of fork/copy-on-write, prefix caching and LRU eviction, errors that leave the state unchanged, the
// exports into cache_ops.cuh's page-table structs, and long randomized operation sequences checked against a
// model after every step (allocator_harness.hpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kvcache/allocator_harness.hpp"
#include "llmk/core/status.cuh"
#include "llmk/kvcache/allocator.hpp"
#include "llmk/kvcache/cache_ops.cuh"  // CsrPageTable, BlockTable and their conversions (simulator build)
#include "support/test_env.hpp"

using namespace llmk::kvcache;
using llmk::Status;

namespace {

// The first outputs of splitmix64 seeded with 0 are mix64(0), mix64(0x9e37...15), ... (Vigna's reference).
static_assert(mix64(0) == 0xe220a8397b1dcdafull);
static_assert(mix64(0x9e3779b97f4a7c15ull) == 0x6e789e6aa1b965f4ull);
constexpr TokenId kAbc[] = {1, 2, 3}, kAbd[] = {1, 2, 4}, kAb[] = {1, 2};
static_assert(block_hash(kRootHash, kAbc) == block_hash(kRootHash, kAbc));
static_assert(block_hash(kRootHash, kAbc) != block_hash(kRootHash, kAbd));
static_assert(block_hash(kRootHash, kAbc) != block_hash(1, kAbc));
static_assert(block_hash(kRootHash, kAb) == block_hash(kRootHash, std::span(kAbc, 2)));  // same tokens
static_assert(block_hash(kRootHash, kAb) != block_hash(kRootHash, kAbc));                // length counts

std::vector<TokenId> iota_tokens(int n, TokenId first = 100) {
  std::vector<TokenId> t(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = first + i;
  return t;
}

std::vector<BlockId> table(const KvCacheManager& kv, SeqId s) {
  const auto t = kv.block_table(s);
  return {t.begin(), t.end()};
}

void require_ok(const Status& s) {
  REQUIRE_MESSAGE(s.ok(), s.message());
}

// Expects code and a message containing `needle`.
void require_error(const Status& s, Status::Code code, const std::string& needle) {
  REQUIRE_MESSAGE(s.code() == code, s.message());
  CHECK_MESSAGE(s.message().find(needle) != std::string::npos, s.message());
}

// A std::mt19937 as a harness Source.
struct Rng {
  std::mt19937 gen;
  std::uint32_t operator()(std::uint32_t bound) { return static_cast<std::uint32_t>(gen() % bound); }
};

}  // namespace

TEST_CASE("BlockPool: allocate, share, release, errors leave the state unchanged") {
  BlockPool pool(3);
  CHECK(pool.num_blocks() == 3);
  CHECK(pool.num_free() == 3);
  BlockId a, b, c, d = 77;
  require_ok(pool.allocate(&a));
  require_ok(pool.allocate(&b));
  require_ok(pool.allocate(&c));
  CHECK(a == 0);
  CHECK(b == 1);
  CHECK(c == 2);
  CHECK(pool.num_in_use() == 3);

  std::string before = pool.debug_string();
  require_error(pool.allocate(&d), Status::Code::kOutOfMemory, "all 3 blocks are in use");
  CHECK(d == 77);
  std::vector<BlockId> many;
  require_error(pool.allocate(2, &many), Status::Code::kOutOfMemory, "2 blocks requested, 0 available");
  CHECK(many.empty());
  CHECK(pool.debug_string() == before);

  require_ok(pool.retain(b));
  CHECK(pool.refcount(b) == 2);
  require_ok(pool.release(b));
  require_ok(pool.release(b));
  CHECK(pool.state(b) == BlockPool::State::kFree);

  before = pool.debug_string();
  require_error(pool.release(b), Status::Code::kInvalidArgument, "double free: block 1 is free");
  require_error(pool.retain(b), Status::Code::kInvalidArgument, "block 1 is free");
  for (const BlockId foreign : {-1, 3, 1000, std::numeric_limits<BlockId>::min()}) {
    require_error(pool.release(foreign), Status::Code::kInvalidArgument, "foreign block id");
    require_error(pool.retain(foreign), Status::Code::kInvalidArgument, "not in the pool [0, 3)");
    require_error(pool.set_cacheable(foreign, true), Status::Code::kInvalidArgument, "foreign block id");
  }
  require_error(pool.set_cacheable(b, true), Status::Code::kInvalidArgument, "is free");
  require_error(pool.allocate(-1, &many), Status::Code::kInvalidArgument, "count");
  require_error(pool.allocate(nullptr), Status::Code::kInvalidArgument, "must not be null");
  CHECK(pool.debug_string() == before);
  require_ok(pool.check_invariants());

  // A cacheable block goes to the LRU list at refcount 0; allocation prefers free blocks, then evicts LRU.
  require_ok(pool.set_cacheable(a, true));
  require_ok(pool.set_cacheable(c, true));
  require_ok(pool.release(c));  // LRU: c
  require_ok(pool.release(a));  // LRU: c, a
  CHECK(pool.num_cached() == 2);
  CHECK(pool.lru_front() == c);
  require_error(pool.release(a), Status::Code::kInvalidArgument, "double free: block 0 has no references");
  BlockId got, evicted;
  require_ok(pool.allocate(&got, &evicted));
  CHECK(got == b);  // the free one first
  CHECK(evicted == kNoBlock);
  require_ok(pool.allocate(&got, &evicted));
  CHECK(got == c);  // then the least recently used cached one
  CHECK(evicted == c);
  CHECK_FALSE(pool.cacheable(c));
  require_ok(pool.retain(a));  // revives a cached block
  CHECK(pool.state(a) == BlockPool::State::kInUse);
  CHECK(pool.num_cached() == 0);
  require_ok(pool.check_invariants());

  CHECK_THROWS_AS(BlockPool(-1), llmk::Error);
  BlockPool empty(0);
  require_error(empty.allocate(&got), Status::Code::kOutOfMemory, "exhausted");
  require_ok(empty.check_invariants());
}

TEST_CASE("BlockPool: randomized operations against a model") {
  const int runs = llmk::test::pick(40, 8);
  for (int run = 0; run < runs; ++run) {
    Rng rng{std::mt19937(static_cast<std::uint32_t>(1000 + run))};
    testing::PoolHarness h(static_cast<std::int32_t>(1 + rng(12)));
    const std::string err = testing::run_pool_steps(h, rng, llmk::test::pick(3000, 600));
    REQUIRE_MESSAGE(err.empty(), "run ", run, ": ", err);
    CHECK(h.errors() > 0);
  }
}

TEST_CASE("KvCacheManager: fork shares every block, append copies a shared partial last block") {
  KvCacheManager kv(16, 4);
  const std::vector<TokenId> prompt = iota_tokens(10);  // 3 blocks, the last holds 2 tokens
  SeqId a, b;
  std::int64_t cached = -1;
  require_ok(kv.add_sequence(prompt, &a, &cached));
  CHECK(cached == 0);
  CHECK(table(kv, a) == std::vector<BlockId>{0, 1, 2});
  require_ok(kv.fork(a, &b));
  CHECK(b == a + 1);
  CHECK(table(kv, b) == table(kv, a));
  for (const BlockId blk : table(kv, a)) CHECK(kv.pool().refcount(blk) == 2);
  CHECK(kv.pool().num_free() == 13);

  std::vector<CopyOp> copies;
  const TokenId next_b[] = {7, 8, 9};
  require_ok(kv.append_tokens(b, next_b, &copies));  // b: copy of block 2 into a fresh block 3
  REQUIRE(copies.size() == 1);
  CHECK(copies[0] == CopyOp{2, 3, 2});
  CHECK(table(kv, b) == std::vector<BlockId>{0, 1, 3, 4});  // and block 4 for the 13th token
  CHECK(kv.pool().refcount(2) == 1);
  CHECK(kv.num_tokens(b) == 13);

  const TokenId next_a[] = {5};
  require_ok(kv.append_tokens(a, next_a, &copies));  // a owns block 2 alone now: no copy
  CHECK(copies.size() == 1);
  CHECK(table(kv, a) == std::vector<BlockId>{0, 1, 2});

  // A full shared last block needs no copy: the new token starts a new block.
  SeqId c, d;
  require_ok(kv.add_sequence(iota_tokens(8), &c));
  require_ok(kv.fork(c, &d));
  require_ok(kv.append_tokens(d, next_a, &copies));
  CHECK(copies.size() == 1);
  CHECK(kv.block_table(d).size() == 3);
  require_ok(kv.check_invariants());

  require_ok(kv.free_sequence(a));
  require_ok(kv.free_sequence(b));
  require_ok(kv.free_sequence(c));
  require_ok(kv.free_sequence(d));
  CHECK(kv.pool().num_in_use() == 0);
  require_ok(kv.check_invariants());
}

TEST_CASE("KvCacheManager: prefix caching reuses exact full-block chains, evicts least recently used") {
  KvCacheManager kv(8, 4);
  const std::vector<TokenId> prompt = iota_tokens(14);  // 3 full blocks + 2 tokens
  SeqId a;
  require_ok(kv.add_sequence(prompt, &a));
  CHECK(kv.num_cache_entries() == 3);
  const std::vector<BlockId> ta = table(kv, a);

  // Same prompt while a is alive: the 3 full blocks are shared, the partial one is not.
  SeqId b;
  std::int64_t cached = -1;
  require_ok(kv.add_sequence(prompt, &b, &cached));
  CHECK(cached == 12);
  const std::vector<BlockId> tb = table(kv, b);
  CHECK(std::vector<BlockId>(tb.begin(), tb.begin() + 3) == std::vector<BlockId>(ta.begin(), ta.begin() + 3));
  CHECK(tb[3] != ta[3]);
  CHECK(kv.pool().refcount(ta[0]) == 2);

  // max_cached_tokens limits the reuse (the engine recomputes the last prompt token).
  SeqId c;
  require_ok(kv.add_sequence(std::span(prompt).first(12), &c, &cached, 11));
  CHECK(cached == 8);
  CHECK(table(kv, c)[2] != ta[2]);
  require_ok(kv.free_sequence(c));

  // A different token in block 1: only block 0 matches (exact comparison, not just a prefix of hashes). Its
  // block 2 holds the same tokens as a's block 2 but follows another parent: a different cache entry.
  std::vector<TokenId> other = prompt;
  other[5] = -3;
  SeqId e;
  require_ok(kv.add_sequence(other, &e, &cached));
  CHECK(cached == 4);
  const std::vector<BlockId> te = table(kv, e);
  CHECK(te[0] == ta[0]);
  CHECK(kv.num_cache_entries() == 5);
  require_ok(kv.free_sequence(e));  // LRU: e's block 2, e's block 1 (tail first)

  // Freed full blocks stay cached (evictable) and are found again.
  require_ok(kv.free_sequence(a));
  require_ok(kv.free_sequence(b));  // LRU: te[2], te[1], ta[2], ta[1], ta[0]
  CHECK(kv.pool().num_in_use() == 0);
  CHECK(kv.pool().num_cached() == 5);
  SeqId f;
  require_ok(kv.add_sequence(prompt, &f, &cached));
  CHECK(cached == 12);
  const std::vector<BlockId> tf = table(kv, f);
  CHECK(std::vector<BlockId>(tf.begin(), tf.begin() + 3) == std::vector<BlockId>(ta.begin(), ta.begin() + 3));
  CHECK(kv.pool().num_cached() == 2);
  require_ok(kv.free_sequence(f));
  CHECK(kv.pool().lru_front() == te[2]);

  // Fill the pool with unrelated tokens: allocation takes the 3 free blocks, then evicts least recently used
  // first; within a chain the tail goes first (free_sequence releases the last block first).
  SeqId g;
  std::vector<CopyOp> copies;
  require_ok(kv.add_sequence(iota_tokens(16, 1000), &g));  // 4 blocks: 3 free + te[2] evicted
  CHECK(kv.pool().num_free() == 0);
  CHECK(kv.pool().lru_front() == te[1]);
  const TokenId more[] = {1, 2, 3, 4};
  require_ok(kv.append_tokens(g, more, &copies));
  CHECK(kv.pool().lru_front() == ta[2]);
  require_ok(kv.append_tokens(g, more, &copies));
  CHECK(kv.pool().lru_front() == ta[1]);
  CHECK(kv.pool().num_cached() == 2);
  CHECK(copies.empty());
  CHECK(kv.num_cache_entries() == 8);  // g's 6 full blocks, ta[0] and ta[1]
  require_ok(kv.add_sequence(std::span(prompt).first(8), &f, &cached));
  CHECK(cached == 8);
  CHECK(table(kv, f) == std::vector<BlockId>{ta[0], ta[1]});
  require_ok(kv.check_invariants());
  require_ok(kv.free_sequence(f));
  require_ok(kv.free_sequence(g));
  const std::int32_t evictable = kv.pool().num_cached();
  CHECK(evictable == 8);  // g's 6 full blocks and the prefix chain's 2
  CHECK(kv.evict_cached_blocks(std::numeric_limits<std::int32_t>::max()) == evictable);
  CHECK(kv.pool().num_free() == 8);
  CHECK(kv.num_cache_entries() == 0);
  require_ok(kv.check_invariants());
}

TEST_CASE("KvCacheManager: a block computed twice is cached once and the chain continues through it") {
  KvCacheManager kv(8, 2);
  const std::vector<TokenId> prompt = iota_tokens(5);  // blocks {100,101} {102,103} {104}
  SeqId a, b, c;
  require_ok(kv.add_sequence(std::span(prompt).first(3), &a));  // registers block {100,101}
  CHECK(kv.num_cache_entries() == 1);
  // b computes the same first block itself (token by token, no lookup), then a second one.
  require_ok(kv.add_sequence({}, &b));
  std::vector<CopyOp> copies;
  for (const TokenId t : prompt) require_ok(kv.append_tokens(b, std::span(&t, 1), &copies));
  CHECK(table(kv, b)[0] != table(kv, a)[0]);
  CHECK(kv.num_cache_entries() == 2);  // b's first block duplicates a's and is not registered again
  // The full prompt finds both blocks: b's second block hangs off a's copy of the first.
  std::int64_t cached = -1;
  require_ok(kv.add_sequence(prompt, &c, &cached));
  CHECK(cached == 4);
  CHECK(table(kv, c)[0] == table(kv, a)[0]);
  CHECK(table(kv, c)[1] == table(kv, b)[1]);
  require_ok(kv.check_invariants());
}

TEST_CASE(
    "KvCacheManager: an evicted entry moves to a held duplicate, so the chain after it stays reachable") {
  // The engine's admission rule (max_cached_tokens = prompt size - 1) with a prompt of whole blocks
  // recomputes the last block, a duplicate of a cached one; the sequence's later blocks chain through the
  // cached entry. Until 2026-11-29 evicting that entry (the sequence holds its duplicate, not the entry's
  // block) left them unreachable: a later prompt A B C D + 1 reused 4 tokens instead of 16.
  for (const bool held_elsewhere : {false, true}) {
    CAPTURE(held_elsewhere);
    KvCacheManager kv(8, 4);
    const std::vector<TokenId> ab = {1, 1, 1, 1, 2, 2, 2, 2}, c = {3, 3, 3, 3}, d = {4, 4, 4, 4};
    std::vector<CopyOp> copies;
    std::int64_t cached = -1;
    SeqId x, y, z, w;
    require_ok(kv.add_sequence(ab, &x));
    if (!held_elsewhere) require_ok(kv.free_sequence(x));  // A, B cached and evictable
    require_ok(kv.add_sequence(ab, &y, &cached, 7));       // reuses A, recomputes B
    CHECK(cached == 4);
    require_ok(kv.append_tokens(y, c, &copies));          // C chains through x's B entry
    if (held_elsewhere) require_ok(kv.free_sequence(x));  // x's B becomes evictable only now
    const std::vector<TokenId> other(20, 9);              // 5 blocks: the 4 free ones, then x's B
    require_ok(kv.add_sequence(other, &z));               // memory pressure: evicts x's B (the LRU front)
    require_ok(kv.check_invariants());
    require_ok(kv.free_sequence(z));
    require_ok(kv.append_tokens(y, d, &copies));
    require_ok(kv.free_sequence(y));
    require_ok(kv.check_invariants());
    const std::vector<TokenId> again = {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5};
    require_ok(kv.add_sequence(again, &w, &cached, 16));
    CHECK(cached == 16);
    require_ok(kv.check_invariants());
  }
  // A duplicate freed before the entry is evicted is forgotten (not promoted later).
  KvCacheManager kv(4, 2);
  const std::vector<TokenId> p = {7, 7};
  SeqId a, b, e;
  std::int64_t cached = -1;
  require_ok(kv.add_sequence(p, &a));
  require_ok(kv.add_sequence(p, &b, &cached, 1));  // recomputes {7, 7}: a duplicate of a's block
  CHECK(cached == 0);
  require_ok(kv.free_sequence(b));
  require_ok(kv.free_sequence(a));
  require_ok(kv.check_invariants());
  CHECK(kv.evict_cached_blocks(4) == 1);
  CHECK(kv.num_cache_entries() == 0);
  require_ok(kv.add_sequence(p, &e, &cached));
  CHECK(cached == 0);
  require_ok(kv.check_invariants());
}

TEST_CASE("KvCacheManager: per-step vectors grow geometrically (copies, block tables)") {
  // Reserving the exact size before each mutation reallocated the whole vector on every copy-on-write of a
  // step and on every new block (O(n^2): 80,000 copies took 10.6 s). Count the reallocations instead of time.
  constexpr int kChildren = 4096;
  KvCacheManager kv(2 * kChildren + 8, 16);
  const std::vector<TokenId> prompt(8, 1);  // a partial last block, shared by every fork
  SeqId root;
  require_ok(kv.add_sequence(prompt, &root));
  std::vector<SeqId> kids(kChildren);
  for (SeqId& k : kids) require_ok(kv.fork(root, &k));
  std::vector<CopyOp> copies;
  int moves = 0;
  const CopyOp* at = copies.data();
  for (const SeqId k : kids) {
    const TokenId t = 2;
    require_ok(kv.append_tokens(k, std::span(&t, 1), &copies));
    moves += copies.data() != at;
    at = copies.data();
  }
  CHECK(copies.size() == kChildren);
  CHECK(moves <= 14);                           // log2(4096) + 2
  KvCacheManager one(kChildren + 8, 1, false);  // page size 1: a new block every token
  SeqId s;
  const TokenId first = 1;
  require_ok(one.add_sequence(std::span(&first, 1), &s));
  int table_moves = 0;
  const BlockId* blocks = one.block_table(s).data();
  for (int i = 0; i < kChildren; ++i) {
    require_ok(one.append_tokens(s, std::span(&first, 1), &copies));
    table_moves += one.block_table(s).data() != blocks;
    blocks = one.block_table(s).data();
  }
  CHECK(table_moves <= 14);
  require_ok(one.check_invariants());
}

TEST_CASE("KvCacheManager: forced hash collisions never share wrong blocks") {
  KvCacheManager kv(16, 2);
  require_ok(kv.set_hash_bits_for_testing(1));  // two hash values for every block
  SeqId a, b;
  std::int64_t cached = -1;
  require_ok(kv.add_sequence(iota_tokens(8), &a));
  CHECK(kv.num_cache_entries() <= 2);
  for (TokenId first = 0; first < 40; first += 2) {  // other prompts land on the same hashes
    require_ok(kv.add_sequence(iota_tokens(8, first), &b, &cached));
    CHECK(cached == (first == 100 ? 8 : 0));
    require_ok(kv.free_sequence(b));
  }
  require_ok(kv.add_sequence(iota_tokens(8), &b, &cached));
  CHECK(cached <= 8);
  for (std::int64_t j = 0; j < cached / 2; ++j) CHECK(table(kv, b)[j] == table(kv, a)[j]);
  require_error(kv.set_hash_bits_for_testing(64), Status::Code::kInvalidArgument, "only change while");
  require_error(kv.set_hash_bits_for_testing(0), Status::Code::kInvalidArgument, "[1, 64]");
  require_ok(kv.check_invariants());
}

TEST_CASE("KvCacheManager: prefix caching disabled never shares across sequences") {
  KvCacheManager kv(8, 2, /*enable_prefix_caching=*/false);
  SeqId a, b;
  std::int64_t cached = -1;
  require_ok(kv.add_sequence(iota_tokens(6), &a));
  require_ok(kv.add_sequence(iota_tokens(6), &b, &cached));
  CHECK(cached == 0);
  CHECK(kv.num_cache_entries() == 0);
  require_ok(kv.free_sequence(a));
  CHECK(kv.pool().num_free() == 5);  // nothing cached
  require_ok(kv.check_invariants());
}

TEST_CASE("KvCacheManager: exhaustion and double free are errors that leave the state unchanged") {
  KvCacheManager kv(4, 2);
  SeqId a, b;
  require_ok(kv.add_sequence(iota_tokens(5), &a));  // 3 blocks
  require_ok(kv.fork(a, &b));
  std::string before = kv.debug_string();

  SeqId c = -9;
  require_error(kv.add_sequence(iota_tokens(3, 50), &c), Status::Code::kOutOfMemory, "needs 2 new blocks");
  CHECK(c == -9);
  std::vector<CopyOp> copies;
  const std::vector<TokenId> three = iota_tokens(3, 60);
  // b's last block is partial and shared: 1 copy + 1 more block for 3 tokens (5 -> 8) = 2 > 1 available.
  std::int64_t needed = -1;
  require_ok(kv.blocks_needed(b, 3, &needed));
  CHECK(needed == 2);
  require_error(kv.append_tokens(b, three, &copies), Status::Code::kOutOfMemory,
                "needs 2 blocks; 1 available");
  CHECK(copies.empty());
  CHECK(kv.debug_string() == before);

  require_ok(kv.free_sequence(b));
  before = kv.debug_string();
  require_error(kv.free_sequence(b), Status::Code::kInvalidArgument, "unknown sequence id 1");
  require_error(kv.fork(b, &c), Status::Code::kInvalidArgument, "unknown sequence");
  require_error(kv.append_tokens(b, three, &copies), Status::Code::kInvalidArgument, "unknown sequence");
  require_error(kv.append_tokens(a, three, nullptr), Status::Code::kInvalidArgument, "copies");
  const SeqId batch[] = {a, b};
  CsrPageTable csr;
  BlockTable padded;
  require_error(kv.export_csr(batch, &csr), Status::Code::kInvalidArgument,
                "unknown sequence id 1 at index 1");
  require_error(kv.export_block_table(batch, &padded), Status::Code::kInvalidArgument, "at index 1");
  require_error(kv.export_block_table(batch, &padded, -1), Status::Code::kInvalidArgument, "min_width");
  CHECK(kv.debug_string() == before);
  CHECK(csr.indptr.empty());

  // An empty pool: only empty sequences fit.
  KvCacheManager none(0, 16);
  SeqId e;
  require_ok(none.add_sequence({}, &e));
  require_error(none.append_tokens(e, three, &copies), Status::Code::kOutOfMemory, "0 available");
  CHECK_THROWS_AS(KvCacheManager(4, 0), llmk::Error);
  CHECK_THROWS_AS(KvCacheManager(-1, 4), llmk::Error);
}

TEST_CASE("KvCacheManager: exports into cache_ops.cuh's CsrPageTable and BlockTable") {
  KvCacheManager kv(16, 4);
  SeqId a, b, e;
  require_ok(kv.add_sequence(iota_tokens(9), &a));       // blocks 0 1 2, last page 1 token
  require_ok(kv.add_sequence(iota_tokens(8, 500), &b));  // blocks 3 4, last page full
  require_ok(kv.add_sequence({}, &e));                   // empty
  const SeqId batch[] = {b, e, a, b};
  CsrPageTable csr;
  require_ok(kv.export_csr(batch, &csr));
  CHECK(csr.indptr == std::vector<int>{0, 2, 2, 5, 7});
  CHECK(csr.indices == std::vector<int>{3, 4, 0, 1, 2, 3, 4});
  CHECK(csr.last_page_len == std::vector<int>{4, 0, 1, 4});
  BlockTable t;
  require_ok(kv.export_block_table(batch, &t));
  CHECK(t.max_blocks == 3);
  CHECK(t.table == std::vector<int>{3, 4, -1, -1, -1, -1, 0, 1, 2, 3, 4, -1});
  CHECK(t.seq_lens == std::vector<int>{8, 0, 9, 8});
  // The two exports agree with cache_ops.cuh's conversions between the forms.
  BlockTable converted;
  require_ok(csr_to_block_table(csr, kv.page_size(), &converted));
  CHECK(converted.max_blocks == t.max_blocks);
  CHECK(converted.table == t.table);
  CHECK(converted.seq_lens == t.seq_lens);
  CsrPageTable back;
  require_ok(block_table_to_csr(t, kv.page_size(), &back));
  CHECK(back.indptr == csr.indptr);
  CHECK(back.indices == csr.indices);
  CHECK(back.last_page_len == csr.last_page_len);

  require_ok(kv.export_block_table(std::span(batch, 1), &t, 5, 0));
  CHECK(t.max_blocks == 5);
  CHECK(t.table == std::vector<int>{3, 4, 0, 0, 0});
  const SeqId empty_only[] = {e};
  require_ok(kv.export_block_table(empty_only, &t));  // width at least 1 by default, as csr_to_block_table
  CHECK(t.max_blocks == 1);
  CHECK(t.table == std::vector<int>{-1});
  require_ok(kv.export_block_table(empty_only, &t, 0));  // still one column: the kernels reject width 0
  CHECK(t.max_blocks == 1);
  CHECK(t.table == std::vector<int>{-1});
  require_ok(kv.export_block_table({}, &t, 0));  // an empty batch: one column, no rows
  CHECK(t.max_blocks == 1);
  CHECK(t.table.empty());
  require_ok(kv.export_csr({}, &csr));
  CHECK(csr.indptr == std::vector<int>{0});
}

TEST_CASE("KvCacheManager: randomized operations against a model, checked after every step") {
  struct Config {
    std::int32_t blocks, page;
    bool caching;
    int hash_bits = 64;  // < 64: forced hash collisions
  };
  const Config configs[] = {{12, 1, true}, {16, 2, true},  {24, 3, true}, {40, 4, true},    {20, 16, true},
                            {9, 2, false}, {32, 5, false}, {40, 8, true}, {16, 2, true, 1}, {24, 3, true, 3}};
  const std::int64_t steps = llmk::test::pick(2000, 500);
  for (std::size_t i = 0; i < std::size(configs); ++i) {
    const Config& c = configs[i];
    CAPTURE(i);
    testing::ManagerHarness::Stats total;
    for (std::uint32_t seed = 0; seed < 3; ++seed) {
      CAPTURE(seed);
      Rng rng{std::mt19937(seed * 7919u + static_cast<std::uint32_t>(i))};
      testing::ManagerHarness h(c.blocks, c.page, c.caching, c.hash_bits);
      std::string err = testing::run_manager_steps(h, rng, steps);
      REQUIRE_MESSAGE(err.empty(), err);
      err = h.finish();
      REQUIRE_MESSAGE(err.empty(), err);
      const auto& st = h.stats();
      MESSAGE("config ", i, " seed ", seed, ": adds ", st.adds, " appends ", st.appends, " forks ", st.forks,
              " frees ", st.frees, " oom ", st.oom, " cow ", st.cow, " hit tokens ", st.hit_tokens,
              " evicted ", st.evicted, " + ", st.evicted_by_allocation, " by allocation, rejected ",
              st.rejected);
      total.forks += st.forks;
      total.cow += st.cow;
      total.oom += st.oom;
      total.rejected += st.rejected;
      total.hit_tokens += st.hit_tokens;
      total.evicted_by_allocation += st.evicted_by_allocation;
    }
    // The runs exercised what they are meant to.
    CHECK(total.forks > 0);
    if (c.page > 1) CHECK(total.cow > 0);  // a page of 1 token is never partial
    CHECK(total.oom > 0);
    CHECK(total.rejected > 0);
    if (c.caching) {
      CHECK(total.hit_tokens > 0);
      CHECK(total.evicted_by_allocation > 0);
    }
  }
}
