// The second translation unit of header_linkage_a.cu: every public header again, the same launcher.
#include <vector>

#include "llmk_all_headers.hpp"

float tensor_amax_in_other_unit(const std::vector<float>& x) {
  llmk::DeviceBuffer<float> d_x(x), amax(1);
  const int cols = static_cast<int>(x.size());
  if (!llmk::quant::tensor_amax(d_x.data(), cols, 1, cols, amax.data(), nullptr).ok()) return -1.0f;
  return amax.to_host()[0];
}
