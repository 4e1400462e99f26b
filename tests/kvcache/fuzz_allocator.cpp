// libFuzzer target for llmk/kvcache/allocator.hpp: the input bytes choose a configuration (pool size, page
// size, prefix caching, a narrowed hash that forces collisions) and then every operation and its arguments.
// The same model-checking harnesses as the doctest (allocator_harness.hpp) check every step: invariants,
// refcounts against the model's block tables, the tokens of every sequence read back through its block table
// from a simulated page memory, predicted exhaustion, rejected double frees / foreign ids / unknown sequences
// with the state unchanged, and no leak after freeing everything. Any failure aborts with a description.
//
// Built only with -DLLMK_BUILD_FUZZERS=ON and a compiler that supports -fsanitize=fuzzer (clang); run it with
// scripts/fuzz_allocator.sh [seconds].
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kvcache/allocator_harness.hpp"

namespace {

// Reads choices from the fuzzer's bytes: one byte for bounds up to 256, two above. Exhausted input reads 0.
class ByteSource {
 public:
  ByteSource(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint32_t operator()(std::uint32_t bound) {
    if (bound <= 1) return 0;
    std::uint32_t v = next();
    if (bound > 256) v = (v << 8) | next();
    return v % bound;
  }
  bool exhausted() const { return pos_ >= size_; }

 private:
  std::uint32_t next() { return pos_ < size_ ? data_[pos_++] : 0u; }
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

[[noreturn]] void fail(const char* what, const std::string& err) {
  std::fprintf(stderr, "kvcache allocator fuzzer: %s: %s\n", what, err.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace llmk::kvcache::testing;
  ByteSource src(data, size);
  if (src(4) == 0) {  // a bare BlockPool
    PoolHarness h(static_cast<std::int32_t>(src(33)));
    const std::string err = run_pool_steps(h, src, 1 << 20);
    if (!err.empty()) fail("BlockPool", err);
    return 0;
  }
  const auto blocks = static_cast<std::int32_t>(src(40));
  const auto page = static_cast<std::int32_t>(1 + src(8));
  const bool caching = src(4) != 0;
  const int hash_bits = src(4) == 0 ? static_cast<int>(1 + src(4)) : 64;
  ManagerHarness h(blocks, page, caching, hash_bits);
  std::string err = run_manager_steps(h, src, 1 << 20, 1 + static_cast<std::int32_t>(src(24)));
  if (!err.empty()) fail("KvCacheManager", err);
  err = h.finish();
  if (!err.empty()) fail("KvCacheManager finish", err);
  return 0;
}
