// Compile-time checks of the GEMM configurations: each LLMK_INVALID_CASE names a call that must NOT compile,
// and the test (tests/gemm/CMakeLists.txt) requires the compiler's error to carry the readable message for
// it. Case 0 is the nearest valid call, which must compile.
#include "llmk/gemm/gemm_f16.cuh"

namespace gemm = llmk::gemm;

#if LLMK_INVALID_CASE == 0
using Cfg = gemm::Sm90GemmConfig<llmk::half>;
#elif LLMK_INVALID_CASE == 1
// A bf16 configuration over fp16 operands: the wgmma would read fp16 bits as bf16.
using Cfg = gemm::Sm90GemmConfig<llmk::bfloat16>;
#endif

int main() {
  const gemm::GemmF16Args<llmk::half, float> args{};
  return gemm::gemm_f16_sm90<Cfg>(args, nullptr).ok() ? 0 : 1;
}
