// The README demo: a linear layer's matmul, D = A * W^T, on tensor cores (fp16 in, fp32 accumulate), checked
// against the fp64 host reference. The same source runs on a GPU (tile_gemm_demo_cuda) or, with no GPU, in
// the CPU simulator (tile_gemm_demo_sim).
//
//   tile_gemm_demo [M N K]      (default 200 96 136: odd sizes on purpose)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "llmk/core/memory.cuh"
#include "llmk/gemm/tile_gemm.cuh"
#include "llmk/reference/gemm.hpp"

int main(int argc, char** argv) {
  int m = 200, n = 96, k = 136;
  if (argc == 4) {
    m = std::atoi(argv[1]);
    n = std::atoi(argv[2]);
    k = std::atoi(argv[3]);
  }
#if defined(LLMK_SIM)
  const char* backend = "CPU SIMT simulator (no GPU needed)";
#else
  if (llmk::cuda_device_count() == 0) {
    std::printf("no CUDA GPU found: run tile_gemm_demo_sim instead\n");
    return 77;
  }
  const char* backend = "CUDA GPU";
#endif
  std::printf("llmk tile GEMM demo on the %s: D[%d x %d] = A[%d x %d] * W[%d x %d]^T\n", backend, m, n, m, k,
              n, k);

  std::mt19937 rng(2026);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<llmk::half> a(static_cast<std::size_t>(m) * k), w(static_cast<std::size_t>(n) * k);
  for (auto& x : a) x = llmk::half(dist(rng));
  for (auto& x : w) x = llmk::half(dist(rng));

  try {
    llmk::DeviceBuffer<llmk::half> d_a(a), d_w(w);
    llmk::DeviceBuffer<float> d_d(static_cast<std::size_t>(m) * n);
    const auto t0 = std::chrono::steady_clock::now();
    const llmk::Status launched = llmk::gemm::tile_gemm_f16(
        d_a.data(), k, d_w.data(), k, nullptr, n, d_d.data(), n, m, n, k, 1.0f, 0.0f, /*stream=*/nullptr);
    const llmk::Status s = launched.ok() ? llmk::device_synchronize() : launched;
    const auto t1 = std::chrono::steady_clock::now();
    if (!s.ok()) {
      std::printf("error: %s\n", s.message().c_str());
      return 1;
    }
    std::vector<float> got = d_d.to_host(), want(got.size());
    llmk::reference::gemm_tn(a.data(), k, w.data(), k, nullptr, n, want.data(), n, m, n, k, 1.0f, 0.0f);
    double max_err = 0.0, max_ref = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
      max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
    }
    std::printf("max |D - reference| = %.3g (max |D| = %.3g), %.1f ms wall\n", max_err, max_ref,
                std::chrono::duration<double, std::milli>(t1 - t0).count());
    const bool ok = max_err <= 1e-4 * std::max(1.0, max_ref) * std::sqrt(static_cast<double>(k));
    std::printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  } catch (const llmk::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
