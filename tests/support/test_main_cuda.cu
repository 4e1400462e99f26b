// doctest main of the llmk tests built with nvcc (<name>_cuda). Test sources do not define main.
//
// Where no CUDA GPU is usable the program prints "no CUDA GPU: <name>_cuda skipped" and exits with 77, which
// CTest reports as skipped (SKIP_RETURN_CODE 77, set by llmk_add_test).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

namespace {

constexpr int kSkipReturnCode = 77;

const char* program_name(const char* argv0) {
  const char* slash = std::strrchr(argv0, '/');
  return slash != nullptr ? slash + 1 : argv0;
}

// Listing or help needs no GPU.
bool needs_gpu(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strstr(a, "-list") != nullptr || std::strncmp(a, "-l", 2) == 0 || std::strcmp(a, "-h") == 0 ||
        std::strcmp(a, "--help") == 0 || std::strcmp(a, "-?") == 0 || std::strstr(a, "-version") != nullptr) {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* name = program_name(argc > 0 ? argv[0] : "llmk_test_cuda");
  if (needs_gpu(argc, argv)) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      std::printf("no CUDA GPU: %s skipped\n", name);
      std::printf("  (cudaGetDeviceCount: %s)\n", err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
      std::fflush(stdout);
      return kSkipReturnCode;
    }
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
      std::printf("[llmk] %s on device %d: %s (sm_%d%d)\n", name, device, prop.name, prop.major, prop.minor);
    }
  }
  std::fflush(stdout);

  doctest::Context context;
  context.applyCommandLine(argc, argv);
  const int result = context.run();
  std::fflush(stdout);
  return result;
}
