// Compile-time checks of the attention tile configurations: each LLMK_INVALID_CASE names a configuration
// that must NOT compile, and the test (tests/attention/CMakeLists.txt) requires the compiler's error to carry
// the readable message for it. Case 0 is the nearest valid configuration, which must compile.
#include "llmk/attention/prefill_sm90_layout.cuh"

namespace attn = llmk::attention;

#if LLMK_INVALID_CASE == 0
using Cfg = attn::Sm90Fp8PrefillConfig<64, 32, 1>;
#elif LLMK_INVALID_CASE == 1
// fp8 prefill, Bc = 32: the V transposition steps the head dim by 64 bytes a pass, so D = 96 would write
// Vt rows of the neighbouring column blocks (and past D).
using Cfg = attn::Sm90Fp8PrefillConfig<96, 32, 1>;
#endif

int main() {
  return Cfg::kSmemBytes > 0 ? 0 : 1;
}
