// Tests of llmk::sm90a_runnable (llmk/core/hopper_support.cuh): the answer, and (on a GPU) that asking it for
// the first time inside a CUDA graph capture leaves the capture valid.
#include "llmk/core/hopper_support.cuh"

#include <doctest/doctest.h>

#include "llmk/arch/sm90/sm90.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/memory.cuh"
#include "support/test_env.hpp"

namespace {

struct TagAnswer {};
struct TagInCapture {};
struct TagOlderDevice {};

// What the device runs for this translation unit, by launching: 1 in an sm_90a image.
__global__ void has_wgmma_kernel(int* out) {
  *out = llmk::arch::sm90::kHasWgmma ? 1 : 0;
}

bool launched_answer() {
  llmk::DeviceBuffer<int> flag(1);
  REQUIRE(llmk::launch(has_wgmma_kernel, dim3(1), dim3(1), 0, nullptr, flag.data()).ok());
  return flag.to_host()[0] == 1;
}

#if defined(LLMK_CUDA)
__global__ void add_one(int* x) {
  *x += 1;
}
#endif

}  // namespace

TEST_CASE("sm90a_runnable: true exactly where an sm_90 device runs this program's sm_90a code") {
  const bool want = llmk::device_arch() == 900 && launched_answer();
  CHECK(llmk::sm90a_runnable<TagAnswer>() == want);
  CHECK(llmk::sm90a_runnable<TagAnswer>() == want);  // the cached answer
#if defined(LLMK_SIM)
  CHECK(want);  // the simulator emulates every atom
  llmk::test::ScopedEnv sm80("LLMK_SIM_ARCH", "800");
  CHECK_FALSE(llmk::sm90a_runnable<TagOlderDevice>());
#endif
}

#if defined(LLMK_CUDA)
// Engines capture decode steps (and, with fixed shapes, prefill and the GEMMs) into CUDA graphs; the first
// launcher call for a new tile configuration may come inside such a capture. Global mode is the strictest:
// an unsafe call from any thread (cudaMalloc, a synchronous copy) invalidates the capture.
TEST_CASE("sm90a_runnable: a first call inside a global-mode stream capture leaves the capture valid") {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  llmk::DeviceBuffer<int> x(std::vector<int>{41});
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  const bool answer = llmk::sm90a_runnable<TagInCapture>();
  CHECK(llmk::launch(add_one, dim3(1), dim3(1), 0, stream, x.data()).ok());
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(x.to_host()[0] == 42);
  CHECK(answer == (llmk::device_arch() == 900 && launched_answer()));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}
#endif
