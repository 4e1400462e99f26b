// Tests for llmk/core/launch.cuh: the dynamic shared-memory limits raised once per kernel, device and size
// (DynamicSmemLimits), and launches above 48 KiB of dynamic shared memory (on a GPU: the first launch raises
// the limit through the driver, the second finds it recorded and asks nothing).
#include "llmk/core/launch.cuh"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/core/smem.cuh"

namespace {

// Every thread writes its id into its slot of a `bytes`-byte dynamic buffer, then thread 0 sums the buffer's
// last slots (so the whole allocation is used) into out[block].
template <int kUnused = 0>
__global__ void fill_smem(std::uint32_t* out, unsigned bytes) {
  auto* words = reinterpret_cast<std::uint32_t*>(llmk::dynamic_smem());
  const unsigned n = bytes / 4;
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) words[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint32_t sum = 0;
    for (unsigned i = n - 64; i < n; ++i) sum += words[i];
    out[blockIdx.x] = sum;
  }
}

}  // namespace

TEST_CASE("DynamicSmemLimits: a raise is kept per kernel and device, only grows, can be forgotten") {
  llmk::detail::DynamicSmemLimits limits;
  int a = 0, b = 0;  // two distinct "kernels"
  CHECK_FALSE(limits.allows(&a, 0, 64 * 1024));
  limits.raised(&a, 0, 96 * 1024);
  CHECK(limits.allows(&a, 0, 64 * 1024));
  CHECK(limits.allows(&a, 0, 96 * 1024));
  CHECK_FALSE(limits.allows(&a, 0, 96 * 1024 + 16));  // a larger launch raises again
  CHECK_FALSE(limits.allows(&a, 1, 64 * 1024));       // another device: its own limit
  CHECK_FALSE(limits.allows(&b, 0, 64 * 1024));       // another kernel
  limits.raised(&a, 0, 64 * 1024);                    // a smaller raise does not lower what is known
  CHECK(limits.allows(&a, 0, 96 * 1024));
  limits.raised(&a, 0, 128 * 1024);
  CHECK(limits.allows(&a, 0, 128 * 1024));
  limits.forget(&a, 0);
  CHECK_FALSE(limits.allows(&a, 0, 64 * 1024));
  CHECK(limits.size() == 0);
  // Bounded: past kMaxEntries pairs nothing new is kept (those launches ask the driver each time).
  std::vector<char> kernels(llmk::detail::DynamicSmemLimits::kMaxEntries + 2);
  for (char& k : kernels) limits.raised(&k, 0, 64 * 1024);
  CHECK(limits.size() == llmk::detail::DynamicSmemLimits::kMaxEntries);
  CHECK(limits.allows(&kernels.front(), 0, 64 * 1024));
  CHECK_FALSE(limits.allows(&kernels.back(), 0, 64 * 1024));
}

TEST_CASE("launch above 48 KiB of dynamic shared memory, twice (the second from the recorded raise)") {
  constexpr unsigned kBytes = 100 * 1024;  // above the 48 KiB default; every supported GPU allows it
  llmk::DeviceBuffer<std::uint32_t> out(2);
  std::uint32_t want = 0;
  for (unsigned i = kBytes / 4 - 64; i < kBytes / 4; ++i) want += i;
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    out.poison();
    const llmk::Status s = llmk::launch(fill_smem<>, dim3(2), dim3(128), kBytes, nullptr, out.data(), kBytes);
    REQUIRE_MESSAGE(s.ok(), s.message());
#if defined(LLMK_CUDA)
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    int device = 0;
    REQUIRE(cudaGetDevice(&device) == cudaSuccess);
    CHECK(llmk::detail::dynamic_smem_limits().allows(reinterpret_cast<const void*>(fill_smem<>), device,
                                                     kBytes));
#endif
    CHECK(out.to_host() == std::vector<std::uint32_t>{want, want});
  }
}
