// The host-only side of llmk built by the plain host compiler: no LLMK_SIM, no nvcc (LLMK_HOST_ONLY).
// Compiles every host-only header and runs the host Hessian API, so breakage that the simulator and nvcc
// builds hide (a device-only helper called from host code) fails here.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "llmk/kvcache/allocator.hpp"
#include "llmk/kvcache/planner.hpp"
#include "llmk/obs/awq.hpp"
#include "llmk/obs/gptq.hpp"
#include "llmk/obs/hessian.cuh"
#include "llmk/obs/obs.hpp"
#include "llmk/obs/pruning.hpp"
#include "llmk/obs/sparsegpt.hpp"
#include "llmk/quant/calibration.hpp"
#include "llmk/quant/smoothquant.hpp"
#include "llmk/reference/attention.hpp"
#include "llmk/reference/quant_gemm.hpp"

#if !defined(LLMK_HOST_ONLY) || defined(LLMK_SIM) || defined(__CUDACC__)
#error "tests/obs/host_only.cpp must be built by the plain host compiler"
#endif

TEST_CASE("host-only build: the Hessian of two streamed batches equals (2/n) X^T X of all rows") {
  constexpr std::int64_t d = 7, rows_a = 5, rows_b = 9, ldx = 9;  // odd sizes, padded rows
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x((rows_a + rows_b) * ldx);
  for (auto& v : x) v = dist(rng) + 0.25f;  // no zeros
  llmk::obs::HessianAccumulator acc(d);
  REQUIRE(acc.add_batch(x.data(), rows_a, ldx).ok());
  REQUIRE(acc.add_batch(x.data() + rows_a * ldx, rows_b, ldx).ok());
  CHECK(acc.samples() == rows_a + rows_b);
  const double n = static_cast<double>(rows_a + rows_b);
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j < d; ++j) {
      double want = 0.0;
      for (std::int64_t r = 0; r < rows_a + rows_b; ++r)
        want += double(x[r * ldx + i]) * double(x[r * ldx + j]);
      want *= 2.0 / n;
      const double got = acc.hessian()[static_cast<std::size_t>(i * d + j)];
      CHECK(std::abs(got - want) <= 1e-5 * (1.0 + std::abs(want)));
    }
}

TEST_CASE("host-only build: hessian_update_host names a bad argument") {
  std::vector<float> h(4, 0.0f), x(4, 1.0f);
  const llmk::Status st = llmk::obs::hessian_update_host(h.data(), 2, 1, 0, x.data(), 2, 2);  // ldh < d
  REQUIRE(!st.ok());
  CHECK(st.message().find("ldh") != std::string::npos);
}
