// Tests of the TMA tensor copies and tensor maps (llmk/arch/sm90/tma.cuh): loads of 1-5 dimensional boxes
// with coordinates before the start and past the end (zero and NaN fill), every swizzle mode, stores that
// drop the out-of-bounds part of the box, and make_tensor_map's validation. The expected shared-memory images
// are built here from the CUDA programming guide's description (dense box, innermost fastest; swizzle as
// "16-byte chunk x of row y goes to chunk x ^ (line % W)" of a 1024-byte aligned tile), not from the
// emulator's helpers.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "llmk/arch/sm90/bulk_copy.cuh"
#include "llmk/arch/sm90/mbarrier.cuh"
#include "llmk/arch/sm90/tma.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"
#include "support/hopper.hpp"

namespace {

using namespace llmk::arch::sm90;

using llmk::test::hopper_available;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

struct Coords {
  int c[5];
};

// A rank-2 description: dims d0 (innermost) x d1, row stride in bytes, box b0 x b1, no swizzle, zero fill.
TensorMapDesc desc_2d(TmaElem elem, const void* global, std::uint64_t d0, std::uint64_t d1,
                      std::uint64_t stride, std::uint32_t b0, std::uint32_t b1) {
  TensorMapDesc d;
  d.elem = elem;
  d.rank = 2;
  d.global = global;
  d.dims[0] = d0;
  d.dims[1] = d1;
  d.strides[0] = stride;
  d.box[0] = b0;
  d.box[1] = b1;
  return d;
}

template <int R>
LLMK_DEVICE void load_box(void* dst, const TensorMap& map, std::uint64_t* bar, const Coords& c) {
  if constexpr (R == 1) tma_load(dst, map, bar, {c.c[0]});
  if constexpr (R == 2) tma_load(dst, map, bar, {c.c[0], c.c[1]});
  if constexpr (R == 3) tma_load(dst, map, bar, {c.c[0], c.c[1], c.c[2]});
  if constexpr (R == 4) tma_load(dst, map, bar, {c.c[0], c.c[1], c.c[2], c.c[3]});
  if constexpr (R == 5) tma_load(dst, map, bar, {c.c[0], c.c[1], c.c[2], c.c[3], c.c[4]});
}

// One thread loads the box into a 1024-byte aligned tile; every thread copies the tile out after the wait.
template <int R>
__global__ void tma_load_box(const __grid_constant__ TensorMap map, Coords c, unsigned box_bytes,
                             unsigned char* out) {
  unsigned char* tile = align_shared<1024>(llmk::dynamic_smem());
  auto* bar = reinterpret_cast<std::uint64_t*>(tile + ((box_bytes + 127u) / 128u * 128u));
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_prefetch(map);
    mbarrier_arrive_expect_tx(bar, box_bytes);
    load_box<R>(tile, map, bar, c);
  }
  mbarrier_wait_parity(bar, 0);
  for (unsigned i = threadIdx.x; i < box_bytes; i += blockDim.x) out[i] = tile[i];
}

// The expected tile: dense box (innermost first), out-of-bounds elements filled, then the swizzle.
std::vector<unsigned char> expected_tile(const TensorMapDesc& d, const std::vector<unsigned char>& host,
                                         const Coords& c) {
  const int es = tma_elem_bytes(d.elem);
  std::uint32_t box[5] = {1, 1, 1, 1, 1};
  std::uint64_t dims[5] = {1, 1, 1, 1, 1};
  for (int i = 0; i < d.rank; ++i) box[i] = d.box[i], dims[i] = d.dims[i];
  std::size_t total = static_cast<std::size_t>(es);
  for (int i = 0; i < 5; ++i) total *= box[i];
  std::vector<unsigned char> dense(total);
  std::size_t at = 0;
  for (std::uint32_t b4 = 0; b4 < box[4]; ++b4)
    for (std::uint32_t b3 = 0; b3 < box[3]; ++b3)
      for (std::uint32_t b2 = 0; b2 < box[2]; ++b2)
        for (std::uint32_t b1 = 0; b1 < box[1]; ++b1)
          for (std::uint32_t b0 = 0; b0 < box[0]; ++b0, at += static_cast<std::size_t>(es)) {
            const long long g[5] = {c.c[0] + static_cast<long long>(b0), c.c[1] + static_cast<long long>(b1),
                                    c.c[2] + static_cast<long long>(b2), c.c[3] + static_cast<long long>(b3),
                                    c.c[4] + static_cast<long long>(b4)};
            bool in = true;
            long long byte = 0;
            for (int i = 0; i < d.rank; ++i) {
              in = in && g[i] >= 0 && static_cast<std::uint64_t>(g[i]) < dims[i];
              byte += i == 0 ? g[i] * es : g[i] * static_cast<long long>(d.strides[i - 1]);
            }
            if (in)
              std::memcpy(&dense[at], &host[static_cast<std::size_t>(byte)], static_cast<std::size_t>(es));
            else if (d.oob == TmaOobFill::kNan)
              std::memset(&dense[at], 0xFF, static_cast<std::size_t>(es));  // any NaN: compared as "is NaN"
            else
              std::memset(&dense[at], 0, static_cast<std::size_t>(es));
          }
  if (d.swizzle == SmemSwizzle::kNone) return dense;
  // Rows of span bytes; 16-byte chunk x of the row in 128-byte line L moves to chunk (x_in_line ^ (L % W)).
  const std::size_t w = swizzle_span(d.swizzle) / 16;
  std::vector<unsigned char> out(total);
  for (std::size_t chunk = 0; chunk < total / 16; ++chunk) {
    const std::size_t line = chunk / 8, in_line = chunk % 8;
    const std::size_t to = line * 8 + (in_line ^ (line % w));
    std::memcpy(&out[to * 16], &dense[chunk * 16], 16);
  }
  return out;
}

// `bytes`: the tensor's size when the outermost stride does not give it (0: from the description).
template <int R>
void check_load(const TensorMapDesc& d0, const Coords& c, unsigned seed, std::size_t bytes = 0) {
  CAPTURE(seed);
  TensorMapDesc d = d0;
  if (bytes == 0)
    bytes = d.rank > 1 ? d.strides[d.rank - 2] * d.dims[d.rank - 1]
                       : d.dims[0] * static_cast<std::size_t>(tma_elem_bytes(d.elem));
  std::vector<unsigned char> host(bytes);
  std::mt19937 rng(seed);
  for (auto& b : host) b = static_cast<unsigned char>(rng() % 120);  // no NaN patterns in the data itself
  llmk::DeviceBuffer<unsigned char> g(host);
  d.global = g.data();
  TensorMap map{};
  const llmk::Status ms = make_tensor_map(&map, d);
  REQUIRE_MESSAGE(ms.ok(), ms.message());
  const std::vector<unsigned char> want = expected_tile(d, host, c);
  const unsigned box_bytes = static_cast<unsigned>(want.size());
  llmk::DeviceBuffer<unsigned char> out(want.size());
  const llmk::Status st = llmk::launch(tma_load_box<R>, dim3(1), dim3(64), box_bytes + 2048, nullptr, map, c,
                                       box_bytes, out.data());
  REQUIRE_MESSAGE(st.ok(), st.message());
#if defined(LLMK_CUDA)
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
#endif
  const std::vector<unsigned char> got = out.to_host();
  const int es = tma_elem_bytes(d.elem);
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); i += static_cast<std::size_t>(es)) {
    bool same = std::memcmp(&got[i], &want[i], static_cast<std::size_t>(es)) == 0;
    if (!same && d.oob == TmaOobFill::kNan && want[i] == 0xFF && want[i + 1] == 0xFF) {
      if (es == 2) {  // f16 / bf16 NaN: exponent all ones (f16: bits 10-14; bf16: 7-14) and a mantissa
        std::uint16_t v;
        std::memcpy(&v, &got[i], 2);
        same = d.elem == TmaElem::kF16 ? ((v & 0x7C00u) == 0x7C00u && (v & 0x3FFu) != 0)
                                       : ((v & 0x7F80u) == 0x7F80u && (v & 0x7Fu) != 0);
      } else {
        float f;
        std::memcpy(&f, &got[i], 4);
        same = std::isnan(f);
      }
    }
    if (!same && ++bad <= 5) {
      CAPTURE(i);
      CHECK(same);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("TMA 2D loads with every swizzle, coordinates before the start and past the end") {
  if (!hopper_available()) return;
  unsigned seed = 1;
  for (SmemSwizzle sw : {SmemSwizzle::kNone, SmemSwizzle::k32B, SmemSwizzle::k64B, SmemSwizzle::k128B}) {
    CAPTURE(static_cast<int>(sw));
    const std::uint32_t inner = sw == SmemSwizzle::kNone ? 24 : swizzle_span(sw) / 2;  // f16 elements
    TensorMapDesc d;
    d.elem = TmaElem::kF16;
    d.rank = 2;
    d.dims[0] = 100;
    d.dims[1] = 37;
    d.strides[0] = 224;  // 112 elements: padded rows
    d.box[0] = inner;
    d.box[1] = 16;
    d.swizzle = sw;
    for (Coords c : {Coords{{0, 0}}, Coords{{-8, -3}}, Coords{{88, 30}}, Coords{{40, 10}}})
      check_load<2>(d, c, seed++);
  }
}

TEST_CASE("TMA 1D, 3D and 5D loads, zero and NaN fill") {
  if (!hopper_available()) return;
  {
    TensorMapDesc d;
    d.elem = TmaElem::kU8;
    d.rank = 1;
    d.dims[0] = 200;
    d.box[0] = 64;
    check_load<1>(d, Coords{{160}}, 10);
    check_load<1>(d, Coords{{-32}}, 11);
  }
  {
    TensorMapDesc d;
    d.elem = TmaElem::kF32;
    d.rank = 3;
    d.dims[0] = 13;
    d.dims[1] = 7;
    d.dims[2] = 5;
    d.strides[0] = 64;
    d.strides[1] = 64 * 8;
    d.box[0] = 8;
    d.box[1] = 4;
    d.box[2] = 3;
    d.oob = TmaOobFill::kNan;
    check_load<3>(d, Coords{{8, 5, 3}}, 12);
    d.oob = TmaOobFill::kZero;
    check_load<3>(d, Coords{{-4, -1, 0}}, 13);
  }
  {
    TensorMapDesc d;
    d.elem = TmaElem::kBF16;
    d.rank = 5;
    const std::uint64_t dims[5] = {24, 3, 4, 2, 3};
    for (int i = 0; i < 5; ++i) d.dims[i] = dims[i];
    d.strides[0] = 64;
    d.strides[1] = 64 * 3;
    d.strides[2] = 64 * 3 * 4;
    d.strides[3] = 64 * 3 * 4 * 2;
    const std::uint32_t box[5] = {16, 2, 3, 2, 2};
    for (int i = 0; i < 5; ++i) d.box[i] = box[i];
    d.oob = TmaOobFill::kNan;
    check_load<5>(d, Coords{{16, 2, -1, 1, 2}}, 14);
  }
}

// Threads fill a 16 x 32 f16 tile (value = index), fence, and one thread stores it at `c` (partly out of
// bounds).
__global__ void tma_store_box(const __grid_constant__ TensorMap map, int c0, int c1) {
  auto* tile = reinterpret_cast<std::uint16_t*>(align_shared<1024>(llmk::dynamic_smem()));
  for (int i = static_cast<int>(threadIdx.x); i < 16 * 32; i += static_cast<int>(blockDim.x))
    tile[i] = static_cast<std::uint16_t>(i + 1);
  fence_proxy_async();
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_store(map, tile, {c0, c1});
    bulk_commit_group();
    bulk_wait_group<0>();
  }
}

TEST_CASE("TMA 2D store writes only the in-bounds part of the box") {
  if (!hopper_available()) return;
  const int rows = 20, cols = 40, pitch = 48;  // elements
  std::vector<std::uint16_t> host(static_cast<std::size_t>(rows) * pitch, 0xBEEF);
  llmk::DeviceBuffer<std::uint16_t> g(host);
  TensorMapDesc d;
  d.elem = TmaElem::kU16;
  d.rank = 2;
  d.global = g.data();
  d.dims[0] = cols;
  d.dims[1] = rows;
  d.strides[0] = pitch * 2;
  d.box[0] = 32;
  d.box[1] = 16;
  TensorMap map{};
  REQUIRE(make_tensor_map(&map, d).ok());
  const int c0 = 24, c1 = 10;
  const llmk::Status st =
      llmk::launch(tma_store_box, dim3(1), dim3(64), 16 * 32 * 2 + 1024, nullptr, map, c0, c1);
  REQUIRE_MESSAGE(st.ok(), st.message());
#if defined(LLMK_CUDA)
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
#endif
  const std::vector<std::uint16_t> got = g.to_host();
  int bad = 0;
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < pitch; ++x) {
      const int by = y - c1, bx = x - c0;
      const bool written = x < cols && by >= 0 && by < 16 && bx >= 0 && bx < 32;
      const std::uint16_t want = written ? static_cast<std::uint16_t>(by * 32 + bx + 1) : 0xBEEF;
      if (got[static_cast<std::size_t>(y * pitch + x)] != want && ++bad <= 5) {
        CAPTURE(y);
        CAPTURE(x);
        CHECK(got[static_cast<std::size_t>(y * pitch + x)] == want);
      }
    }
  CHECK(bad == 0);
}

#if defined(LLMK_SIM)
// A box's global address must be 16-byte aligned (PTX ISA, tensor tiled mode): the innermost coordinate
// times the element size is a multiple of 16. An H100 raised "illegal instruction" for a 2-byte box at
// element 90; the simulator reports the load or store with the rule.
TEST_CASE("TMA boxes start on a 16-byte boundary (the simulator reports one that does not)") {
  std::vector<std::uint16_t> host(37 * 112, 1);
  llmk::DeviceBuffer<std::uint16_t> g(host);
  TensorMapDesc d = desc_2d(TmaElem::kF16, g.data(), 100, 37, 224, 24, 16);
  TensorMap map{};
  REQUIRE(make_tensor_map(&map, d).ok());
  llmk::DeviceBuffer<unsigned char> out(768);
  for (int c0 : {90, 3, -1}) {
    CAPTURE(c0);
    const llmk::Status st = llmk::launch(tma_load_box<2>, dim3(1), dim3(64), 768 + 2048, nullptr, map,
                                         Coords{{c0, 30}}, 768u, out.data());
    REQUIRE(!st.ok());
    CHECK(contains(st.message(), "not at a 16-byte boundary"));
  }
  d.elem = TmaElem::kU16;
  d.box[0] = 32;
  REQUIRE(make_tensor_map(&map, d).ok());
  const llmk::Status st =
      llmk::launch(tma_store_box, dim3(1), dim3(64), 16 * 32 * 2 + 1024, nullptr, map, 20, 4);
  REQUIRE(!st.ok());
  CHECK(contains(st.message(), "cp.async.bulk.tensor (store)"));
  CHECK(contains(st.message(), "not at a 16-byte boundary"));
}
#endif

TEST_CASE("TMA: the stride of a dimension of extent 1 may be anything (never used)") {
  if (!hopper_available()) return;
  // One row of 40 f16 whose row stride is neither a multiple of 16 nor below 2^40 (a GEMM with M = 1).
  for (std::uint64_t stride : {std::uint64_t{3}, std::uint64_t{1} << 45}) {
    CAPTURE(stride);
    check_load<2>(desc_2d(TmaElem::kF16, nullptr, 40, 1, stride, 32, 4), Coords{{8, 0}}, 51, 80);
    check_load<2>(desc_2d(TmaElem::kF16, nullptr, 40, 1, stride, 32, 4), Coords{{16, -2}}, 52, 80);
  }
  TensorMapDesc d;  // [5][1][32] u16 with a bogus stride for the middle dimension, and [1][4][32]
  d.elem = TmaElem::kU16;
  d.rank = 3;
  d.dims[0] = 32, d.dims[1] = 1, d.dims[2] = 5;
  d.strides[0] = 1000, d.strides[1] = 96;  // rows padded to 48 elements
  d.box[0] = 16, d.box[1] = 2, d.box[2] = 4;
  check_load<3>(d, Coords{{16, 0, 2}}, 53, 5 * 96);
  d.dims[1] = 4, d.dims[2] = 1;
  d.strides[0] = 64, d.strides[1] = (std::uint64_t{1} << 41) + 5;
  check_load<3>(d, Coords{{0, 1, 0}}, 54, 4 * 64);
  // A used stride still follows the rules.
  TensorMap map{};
  d.dims[2] = 2;
  llmk::DeviceBuffer<unsigned char> g(4096);
  d.global = g.data();
  const llmk::Status s = make_tensor_map(&map, d);
  CHECK(!s.ok());
  CHECK(contains(s.message(), "desc.strides"));
}

TEST_CASE("TensorMapCache: a map comes back only for the very same description and device") {
  llmk::arch::sm90::detail::TensorMapCache cache;
  int buffer[64];
  TensorMapDesc d = desc_2d(TmaElem::kF16, buffer, 64, 32, 128, 64, 8);
  TensorMap map{}, got{};
  for (int i = 0; i < 128; ++i) map.opaque[i] = static_cast<unsigned char>(i * 7 + 1);
  CHECK_FALSE(cache.find(d, 0, &got));
  cache.insert(d, 0, map);
  REQUIRE(cache.find(d, 0, &got));
  CHECK(std::memcmp(got.opaque, map.opaque, sizeof map.opaque) == 0);
  CHECK_FALSE(cache.find(d, 1, &got));  // another device
  auto differs = [&](auto change) {
    TensorMapDesc e = d;
    change(e);
    return !cache.find(e, 0, &got);
  };
  CHECK(differs([](TensorMapDesc& e) { e.elem = TmaElem::kBF16; }));
  CHECK(differs([](TensorMapDesc& e) { e.rank = 3; }));
  CHECK(differs([&](TensorMapDesc& e) { e.global = buffer + 4; }));
  CHECK(differs([](TensorMapDesc& e) { e.dims[1] = 31; }));
  CHECK(differs([](TensorMapDesc& e) { e.dims[4] = 2; }));  // beyond the rank too: compared as given
  CHECK(differs([](TensorMapDesc& e) { e.strides[0] = 144; }));
  CHECK(differs([](TensorMapDesc& e) { e.box[1] = 16; }));
  CHECK(differs([](TensorMapDesc& e) { e.swizzle = SmemSwizzle::k64B; }));
  CHECK(differs([](TensorMapDesc& e) { e.oob = TmaOobFill::kNan; }));
  // Direct-mapped: many descriptions evict one another; whatever is found is its own map.
  for (int i = 0; i < 3 * llmk::arch::sm90::detail::TensorMapCache::kSlots; ++i) {
    TensorMapDesc e = d;
    e.dims[1] = 100 + static_cast<std::uint64_t>(i);
    TensorMap m{};
    m.opaque[0] = static_cast<unsigned char>(i);
    cache.insert(e, 0, m);
  }
  int found = 0;
  for (int i = 0; i < 3 * llmk::arch::sm90::detail::TensorMapCache::kSlots; ++i) {
    TensorMapDesc e = d;
    e.dims[1] = 100 + static_cast<std::uint64_t>(i);
    if (!cache.find(e, 0, &got)) continue;
    ++found;
    CHECK(got.opaque[0] == static_cast<unsigned char>(i));
  }
  CHECK(found > 0);
  CHECK(found <= llmk::arch::sm90::detail::TensorMapCache::kSlots);
#if defined(LLMK_CUDA)
  if (hopper_available()) {  // make_tensor_map twice: the second from the cache, the same bytes
    llmk::DeviceBuffer<float> g(4096);
    TensorMapDesc real = desc_2d(TmaElem::kF16, g.data(), 64, 32, 128, 64, 8);
    TensorMap first{}, second{};
    REQUIRE(make_tensor_map(&first, real).ok());
    int device = 0;
    REQUIRE(cudaGetDevice(&device) == cudaSuccess);
    REQUIRE(llmk::arch::sm90::detail::tensor_map_cache().find(real, device, &got));
    REQUIRE(make_tensor_map(&second, real).ok());
    CHECK(std::memcmp(first.opaque, second.opaque, sizeof first.opaque) == 0);
  }
#endif
}

TEST_CASE("make_tensor_map validates every field and names it") {
  llmk::DeviceBuffer<float> g(4096);
  auto good = [&] {
    TensorMapDesc d = desc_2d(TmaElem::kF16, g.data(), 64, 32, 128, 64, 8);
    d.swizzle = SmemSwizzle::k128B;
    return d;
  };
  TensorMap map{};
  REQUIRE(make_tensor_map(&map, good()).ok());
  CHECK(contains(make_tensor_map(nullptr, good()).message(), "'map'"));
  auto expect = [&](TensorMapDesc d, const char* field, const char* rule) {
    const llmk::Status s = make_tensor_map(&map, d);
    CHECK(!s.ok());
    CHECK(contains(s.message(), field));
    CHECK(contains(s.message(), rule));
  };
  TensorMapDesc d = good();
  d.rank = 6;
  expect(d, "desc.rank", "[1, 5]");
  d = good();
  d.global = reinterpret_cast<const unsigned char*>(g.data()) + 8;
  expect(d, "desc.global", "16-byte aligned");
  d = good();
  d.dims[1] = 0;
  expect(d, "desc.dims", "dims[1]");
  d = good();
  d.strides[0] = 120;
  expect(d, "desc.strides", "multiple of 16");
  d = good();
  d.box[1] = 257;
  expect(d, "desc.box", "box[1]");
  d = good();
  d.swizzle = SmemSwizzle::kNone;
  d.box[0] = 12;
  expect(d, "desc.box", "multiple of 16");
  d = good();
  d.box[0] = 32;
  expect(d, "desc.box", "equal its span");
  d = good();
  d.elem = TmaElem::kU16;
  d.oob = TmaOobFill::kNan;
  expect(d, "desc.oob", "float element type");
}

}  // namespace
