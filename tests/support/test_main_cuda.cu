// doctest main of the llmk tests built with nvcc (<name>_cuda). Test sources do not define main.
//
// Where the machine has no GPU the program prints "no CUDA GPU: <name>_cuda skipped" and exits with 77, which
// CTest reports as skipped (SKIP_RETURN_CODE 77, set by llmk_add_test). A skip must never hide a GPU that is
// there but unusable (a driver older than the CUDA runtime, a broken install): when the NVIDIA kernel driver
// shows a GPU (/proc/driver/nvidia/gpus/ or /dev/nvidia0), or LLMK_REQUIRE_GPU=1 is set
// (scripts/gpu_validate.sh sets it), the same condition is a failure (exit 1) with one line naming the CUDA
// error.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

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

// True when the kernel driver shows a GPU or the caller demands one: a CUDA failure then is not "no GPU".
bool gpu_expected() {
  const char* require = std::getenv("LLMK_REQUIRE_GPU");
  if (require != nullptr && std::strcmp(require, "1") == 0) return true;
  std::error_code ec;
  if (std::filesystem::exists("/dev/nvidia0", ec)) return true;
  const std::filesystem::path gpus{"/proc/driver/nvidia/gpus"};
  return std::filesystem::is_directory(gpus, ec) && !std::filesystem::is_empty(gpus, ec);
}

}  // namespace

int main(int argc, char** argv) {
  const char* name = program_name(argc > 0 ? argv[0] : "llmk_test_cuda");
  if (needs_gpu(argc, argv)) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      const char* why = err != cudaSuccess ? cudaGetErrorString(err) : "0 devices";
      if (gpu_expected()) {
        std::printf("FAILED: %s: a GPU is present (or LLMK_REQUIRE_GPU=1) but CUDA cannot use it: %s\n", name,
                    why);
        std::fflush(stdout);
        return 1;
      }
      std::printf("no CUDA GPU: %s skipped\n", name);
      std::printf("  (cudaGetDeviceCount: %s)\n", why);
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
