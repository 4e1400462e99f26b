// llmk/reference/gemm.hpp: host reference GEMMs. Simple loops, exact-enough arithmetic (fp64 accumulation of
// products that are exact in fp64), no tiling: what kernels are tested against, and what users can test with.
#pragma once

#include <cmath>
#include <cstdint>

#include "llmk/core/numeric.cuh"

namespace llmk::reference {

/// D = alpha * A * B^T + beta * C with A [M, K], B [N, K] (row-major), accumulated in fp64, rounded once to
/// fp32. C is read only when beta != 0 (it may alias D). Host memory; no checks.
///   std::vector<float> want(M * N);
///   llmk::reference::gemm_tn(a.data(), K, b.data(), K, nullptr, N, want.data(), N, M, N, K, 1.0f, 0.0f);
template <class T>
void gemm_tn(const T* a, std::int64_t lda, const T* b, std::int64_t ldb, const float* c, std::int64_t ldc,
             float* d, std::int64_t ldd, int m, int n, int k, float alpha, float beta) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int p = 0; p < k; ++p)
        sum += static_cast<double>(static_cast<float>(a[i * lda + p])) *
               static_cast<double>(static_cast<float>(b[j * ldb + p]));
      double v = static_cast<double>(alpha) * sum;
      if (beta != 0.0f) v += static_cast<double>(beta) * c[i * ldc + j];
      d[i * ldd + j] = static_cast<float>(v);
    }
  }
}

/// Sum over k of |A[i,k] * B[j,k]| for every (i, j): the scale that floating-point error bounds are relative
/// to.
///   std::vector<double> mag(M * N);
///   llmk::reference::gemm_tn_abs(a.data(), K, b.data(), K, mag.data(), M, N, K);   // |got - want| <= e mag
template <class T>
void gemm_tn_abs(const T* a, std::int64_t lda, const T* b, std::int64_t ldb, double* out, int m, int n,
                 int k) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int p = 0; p < k; ++p)
        sum += std::fabs(static_cast<double>(static_cast<float>(a[i * lda + p])) *
                         static_cast<double>(static_cast<float>(b[j * ldb + p])));
      out[i * static_cast<std::int64_t>(n) + j] = sum;
    }
}

}  // namespace llmk::reference
