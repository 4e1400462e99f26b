// Two translation units of one program include every public header of llmk (llmk_all_headers.hpp, generated
// by tests/core/CMakeLists.txt from include/llmk/) and run the same launcher: the program links only if no
// header defines a non-inline entity (a plain __global__ kernel in a header is defined in every translation
// unit that includes it: "multiple definition" at link time, in the simulator build and under nvcc alike).
#include <doctest/doctest.h>

#include <vector>

#include "llmk_all_headers.hpp"

float tensor_amax_in_other_unit(const std::vector<float>& x);  // header_linkage_b.cu

namespace {

float tensor_amax_here(const std::vector<float>& x) {
  llmk::DeviceBuffer<float> d_x(x), amax(1);
  const int cols = static_cast<int>(x.size());
  REQUIRE(llmk::quant::tensor_amax(d_x.data(), cols, 1, cols, amax.data(), nullptr).ok());
  return amax.to_host()[0];
}

}  // namespace

TEST_CASE("every public header links into two translation units of one program") {
  const std::vector<float> x = {0.5f, -7.5f, 3.0f, 2.0f, -1.0f, 6.25f, 0.0f, -4.0f};
  CHECK(tensor_amax_here(x) == 7.5f);
  CHECK(tensor_amax_in_other_unit(x) == 7.5f);
}
