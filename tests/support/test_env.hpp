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

// Sets an environment variable for the scope, e.g. a simulator setting (LLMK_SIM_ARCH: the simulated
// device's architecture; LLMK_SIM_SM_COUNT: its SM count); unset again at the end. Ignored on a GPU.
//   llmk::test::ScopedEnv sm80("LLMK_SIM_ARCH", "800");
struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

// `full` normally, `reduced` under LLMK_TEST_FAST.
template <class T>
inline T pick(T full, T reduced) {
  return fast() ? reduced : full;
}

}  // namespace llmk::test
