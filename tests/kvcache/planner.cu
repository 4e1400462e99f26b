// Tests of the KV-cache memory planner (llmk/kvcache/planner.hpp): the worked example of the literature at
// compile time, the GPT weight formula on GPT-2 small, GQA savings, and plan_memory()'s breakdown and errors.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "llmk/core/status.cuh"
#include "llmk/kvcache/planner.hpp"

using namespace llmk::kvcache;
using llmk::Status;

namespace {

constexpr std::int64_t GiB = std::int64_t{1} << 30;

// The worked example: d = 4096 (32 heads x 128), s = 2048, b = 64, L = 32, fp16:
// 2 x 64 x 2048 x 4096 x 32 x 2 bytes = 68,719,476,736 (about 68.7 GB).
static_assert(kv_bytes(64, 2048, 32, 32, 128, 2) == 2ll * 64 * 2048 * 4096 * 32 * 2);
static_assert(kv_bytes(64, 2048, 32, 32, 128, 2) == 68'719'476'736);
// One sequence: 2 x 2048 x 4096 x 32 x 2 = 1,073,741,824 (about 1.07 GB).
static_assert(kv_bytes(1, 2048, 32, 32, 128, 2) == 1'073'741'824);
// GQA with 8 KV heads of 32: a quarter.
static_assert(kv_bytes(1, 2048, 32, 8, 128, 2) == 1'073'741'824 / 4);
static_assert(kv_bytes(64, 2048, 32, 8, 128, 2) * 4 == kv_bytes(64, 2048, 32, 32, 128, 2));
static_assert(gqa_kv_fraction(32, 8) == 0.25);
static_assert(gqa_saving(32, 8) == 0.75);
static_assert(gqa_saving(32, 32) == 0.0);
static_assert(gqa_kv_fraction(32, 1) == 1.0 / 32);  // MQA

// Per token and per block.
static_assert(kv_bytes_per_token(32, 32, 128, 2) == 524'288);  // 0.5 MiB per token
static_assert(kv_bytes_per_token(32, 8, 128, 1, 4) ==
              67'584);  // int8 KV with an fp32 scale per token and head
static_assert(kv_bytes_per_token_bits(32, 8, 128, 4, 2) == 32 * 8 * 2 * (64 + 2));  // int4 KV, fp16 scales
static_assert(kv_bytes_per_token_bits(1, 1, 3, 4) == 2 * 2);  // 12 bits round up to 2 bytes
static_assert(kv_bytes_per_token_bits(32, 8, 128, 16) == kv_bytes_per_token(32, 8, 128, 2));
static_assert(kv_block_bytes(16, 524'288) == 8'388'608);
static_assert(blocks_per_sequence(0, 16) == 0);
static_assert(blocks_per_sequence(1, 16) == 1);
static_assert(blocks_per_sequence(16, 16) == 1);
static_assert(blocks_per_sequence(17, 16) == 2);
static_assert(blocks_per_sequence(std::numeric_limits<std::int64_t>::max(), 1) ==
              std::numeric_limits<std::int64_t>::max());

// GPT-2 small (V = 50257, d = 768, L = 12): V d + L (12 d^2 + 13 d) = 38,597,376 + 12 x 7,087,872.
static_assert(gpt_weight_params(50257, 768, 12) == 50257ll * 768 + 12ll * (12 * 768 * 768 + 13 * 768));
static_assert(gpt_weight_params(50257, 768, 12) == 123'651'840);
// Plus the learned position embedding (1024 x 768) and the final LayerNorm (2 x 768): GPT-2's published
// parameter count, 124,439,808 (the "124M" model).
static_assert(gpt_weight_params(50257, 768, 12) + 1024 * 768 + 2 * 768 == 124'439'808);
static_assert(gpt_weight_bytes(50257, 768, 12, 2) == 247'303'680);

// Blocks in a budget.
static_assert(blocks_that_fit(80 * GiB, 14 * GiB, 6 * GiB, 8 << 20) == 7680);
static_assert(blocks_that_fit(10, 6, 3, 2) == 0);   // 1 byte left: no block
static_assert(blocks_that_fit(10, 12, 0, 2) == 0);  // the weights do not fit
static_assert(blocks_that_fit(10, 0, 0, 5) == 2);

static_assert(!checked_mul(std::int64_t{1} << 62, 2).has_value());
static_assert(*checked_mul(std::int64_t{1} << 31, std::int64_t{1} << 31) == std::int64_t{1} << 62);
static_assert(!checked_add(std::numeric_limits<std::int64_t>::max(), 1).has_value());

PlanRequest llama_like() {
  PlanRequest r;
  r.vocab = 32000;
  r.d_model = 4096;
  r.layers = 32;
  r.heads = 32;
  r.kv_heads = 8;
  r.memory_bytes = 80 * GiB;
  r.reserved_bytes = 6 * GiB;
  r.page_size = 16;
  r.max_seq_len = 4096;
  return r;
}

void require_error(const Status& s, Status::Code code, const std::string& needle) {
  REQUIRE_MESSAGE(s.code() == code, s.message());
  CHECK_MESSAGE(s.message().find(needle) != std::string::npos, s.message());
}

}  // namespace

TEST_CASE("plan_memory: breakdown of a GQA model in 80 GiB") {
  MemoryPlan p;
  const Status s = plan_memory(llama_like(), &p);
  REQUIRE_MESSAGE(s.ok(), s.message());
  // (32000 x 4096 + 32 (12 x 4096^2 + 13 x 4096)) x 2 bytes.
  CHECK(p.weight_params == 6'575'226'880);
  CHECK(p.weight_bytes == 13'150'453'760);
  CHECK(p.kv_bytes_per_token == 131'072);  // 2 x 32 x 8 x 128 x 2
  CHECK(p.kv_bytes_per_token_mha == 524'288);
  CHECK(p.gqa_saving == 0.75);
  CHECK(p.block_bytes == 2'097'152);
  // 80 GiB - 6 GiB - weights = 66,306,441,216 bytes = 31617 blocks + 786,432 bytes.
  CHECK(p.num_blocks == 31'617);
  CHECK(p.kv_cache_bytes == 31'617ll * 2'097'152);
  CHECK(p.unused_bytes == 786'432);
  CHECK(p.weight_bytes + p.reserved_bytes + p.kv_cache_bytes + p.unused_bytes == 80 * GiB);
  CHECK(p.token_capacity == 505'872);
  CHECK(p.max_sequences == 123);  // 256 blocks per 4096-token sequence
  const std::string text = p.to_string();
  CHECK_MESSAGE(text.find("blocks         31617") != std::string::npos, text);
  CHECK_MESSAGE(text.find("GQA saves 75%") != std::string::npos, text);

  // The same model with MHA keeps a quarter of the blocks (the remainder rounds differently).
  PlanRequest mha = llama_like();
  mha.kv_heads = 0;  // = heads
  MemoryPlan q;
  REQUIRE(plan_memory(mha, &q).ok());
  CHECK(q.kv_bytes_per_token == 524'288);
  CHECK(q.gqa_saving == 0.0);
  CHECK(q.num_blocks == 66'306'441'216 / (16 * 524'288));
}

TEST_CASE("plan_memory: explicit weights, quantized KV, head_dim, the block id cap") {
  PlanRequest r = llama_like();
  r.weight_bytes = 4 * GiB;  // e.g. int4 weights, counted by the caller
  r.kv_bytes_per_element = 1;
  r.kv_scale_bytes_per_head = 4;
  r.head_dim = 64;  // given explicitly (need not be d_model / heads)
  MemoryPlan p;
  REQUIRE(plan_memory(r, &p).ok());
  CHECK(p.weight_params == -1);
  CHECK(p.weight_bytes == 4 * GiB);
  CHECK(p.kv_bytes_per_token == kv_bytes_per_token(32, 8, 64, 1, 4));
  CHECK(p.num_blocks == (70 * GiB) / (16 * kv_bytes_per_token(32, 8, 64, 1, 4)));

  // More blocks than int32 block ids can name: capped, the rest reported unused.
  PlanRequest big;
  big.layers = 1;
  big.heads = 1;
  big.head_dim = 1;
  big.kv_bytes_per_element = 1;
  big.page_size = 1;
  big.weight_bytes = 0;
  big.memory_bytes = std::int64_t{1} << 40;
  REQUIRE(plan_memory(big, &p).ok());
  CHECK(p.num_blocks == std::numeric_limits<std::int32_t>::max());
  CHECK(p.kv_cache_bytes + p.unused_bytes == std::int64_t{1} << 40);
}

TEST_CASE("plan_memory: invalid requests, overflow and budgets without room") {
  MemoryPlan p, untouched;
  untouched.num_blocks = 42;
  p = untouched;
  PlanRequest r = llama_like();
  r.kv_heads = 5;
  require_error(plan_memory(r, &p), Status::Code::kInvalidArgument, "'kv_heads': must divide heads");
  r = llama_like();
  r.kv_heads = 64;
  require_error(plan_memory(r, &p), Status::Code::kInvalidArgument, "kv_heads");
  r = llama_like();
  r.d_model = 4000;
  r.heads = 48;
  require_error(plan_memory(r, &p), Status::Code::kInvalidArgument, "heads does not divide d_model");
  r = llama_like();
  r.layers = 0;
  require_error(plan_memory(r, &p), Status::Code::kInvalidArgument, "'layers': must be >= 1, got 0");
  r = llama_like();
  r.page_size = -3;
  require_error(plan_memory(r, &p), Status::Code::kInvalidArgument, "page_size");
  r = llama_like();
  r.reserved_bytes = -1;
  require_error(plan_memory(r, &p), Status::Code::kInvalidArgument, "reserved_bytes");
  r = llama_like();
  r.vocab = 0;
  require_error(plan_memory(r, &p), Status::Code::kInvalidArgument, "vocab");
  r = llama_like();
  r.d_model = std::int64_t{1} << 32;
  r.heads = 1;
  r.kv_heads = 1;
  require_error(plan_memory(r, &p), Status::Code::kInvalidArgument, "overflows int64");
  r = llama_like();
  r.weight_bytes = 1;
  r.page_size = std::int64_t{1} << 50;
  require_error(plan_memory(r, &p), Status::Code::kInvalidArgument,
                "'page_size': the computed size overflows");
  r = llama_like();
  r.weight_bytes = std::numeric_limits<std::int64_t>::max();
  require_error(plan_memory(r, &p), Status::Code::kInvalidArgument, "reserved_bytes");
  r = llama_like();
  r.memory_bytes = 16 * GiB;  // 12.25 GiB of weights + 6 GiB reserved
  require_error(plan_memory(r, &p), Status::Code::kOutOfMemory, "no KV block fits");
  require_error(plan_memory(llama_like(), nullptr), Status::Code::kInvalidArgument, "plan");
  CHECK(p.num_blocks == 42);  // untouched on error
}
