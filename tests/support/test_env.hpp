// Test-side helpers shared by llmk tests (include as "support/test_env.hpp"; tests/ is on the include path).
#pragma once

#include <cstdlib>

namespace llmk::test {

// True when LLMK_TEST_FAST is set (and not "0"): the sanitizer builds set it, and tests shrink their problem
// sizes (fewer random trials, smaller shapes) so the ASan and TSan runs stay within the CI budget.
inline bool fast() {
  const char* v = std::getenv("LLMK_TEST_FAST");
  return v != nullptr && *v != '\0' && !(v[0] == '0' && v[1] == '\0');
}

// `full` normally, `reduced` under LLMK_TEST_FAST.
template <class T>
inline T pick(T full, T reduced) {
  return fast() ? reduced : full;
}

}  // namespace llmk::test
