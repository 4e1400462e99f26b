// doctest main of the llmk tests built for the simulator (<name>_sim). Test sources do not define main.
//
// Environment:
//   LLMK_SIM_SEED   seed of the simulator's block/fiber order shuffling (printed here so a failing run can be
//                   reproduced with the same seed).
//   LLMK_TEST_FAST  set to 1 by the sanitizer builds: tests may shrink their sizes (see
//   support/test_env.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (const char* seed = std::getenv("LLMK_SIM_SEED"); seed != nullptr && *seed != '\0') {
    std::printf("[llmk] LLMK_SIM_SEED=%s\n", seed);
  }
  if (const char* fast = std::getenv("LLMK_TEST_FAST"); fast != nullptr && *fast != '\0' && *fast != '0') {
    std::printf("[llmk] LLMK_TEST_FAST=%s: reduced sizes\n", fast);
  }
  std::fflush(stdout);

  doctest::Context context;
  context.applyCommandLine(argc, argv);
  const int result = context.run();
  std::fflush(stdout);
  return result;
}
