// Host-only consumer of llmk: the numeric types work with a plain C++20 compiler.
#include <llmk/core/numeric.cuh>

#include <cstdio>

int main() {
  const llmk::half h(1.5f);
  const float back = float(h);
  if (back != 1.5f || h.bits != 0x3E00) {
    std::printf("consumer_host: FAILED: half(1.5f) -> bits 0x%04x -> %g\n", unsigned(h.bits), double(back));
    return 1;
  }
  std::printf("consumer_host: half(1.5f) = 0x%04x -> %g: OK\n", unsigned(h.bits), double(back));
  return 0;
}
