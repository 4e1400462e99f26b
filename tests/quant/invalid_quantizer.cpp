// Compile-time checks: each LLMK_INVALID_CASE names a Quantizer that must NOT compile, and the test (see
// tests/quant/CMakeLists.txt) requires the compiler's error to carry the readable message for it.
// Case 0 is a valid instantiation, which must compile.
#include "llmk/quant/scheme.cuh"

namespace q = llmk::quant;

#if LLMK_INVALID_CASE == 0
using Q = q::Quantizer<llmk::int4_t, q::Asymmetric, q::GroupWise<128>>;
#elif LLMK_INVALID_CASE == 1
using Q = q::Quantizer<llmk::float8_e4m3, q::Asymmetric, q::PerTensor>;  // fp8 has no zero point
#elif LLMK_INVALID_CASE == 2
using Q = q::Quantizer<uint8_t, q::Symmetric, q::PerToken>;  // unsigned storage needs a zero point
#elif LLMK_INVALID_CASE == 3
using Q = q::Quantizer<float, q::Symmetric, q::PerTensor>;  // not a storage type
#elif LLMK_INVALID_CASE == 4
using Q = q::Quantizer<int8_t, q::Symmetric, int>;  // not a granularity
#elif LLMK_INVALID_CASE == 5
using Q = q::Quantizer<int8_t, q::Symmetric, q::GroupWise<-4>>;  // negative group size
#elif LLMK_INVALID_CASE == 6
using Q = q::Quantizer<llmk::float8_e4m3, q::SymmetricFullRange, q::PerTensor>;  // an integer-only grid
#elif LLMK_INVALID_CASE == 7
using Q = q::Quantizer<llmk::uint4_t, q::SymmetricFullRange, q::PerChannel>;  // signed codes only
#endif

int main() {
  return Q::kIsFloat ? 1 : 0;
}
