// llmk/reference/weight_only.hpp: host reference of the weight-only GEMM (llmk/gemm/weight_only.cuh).
//
// Works on the PLAIN weights (row-major [N, K] unsigned codes: 4-bit two a byte with element 2i in the low
// nibble, 8-bit one a byte) in the ORIGINAL column order, with an optional GPTQ group index g_idx[K]
// (null: column k is in group k / G). The dequantized weight is what the kernel feeds its mma:
//   w[n, k] = T(s[g, n] * (u[n, k] - z[g, n])),  g = g_idx ? g_idx[k] : k / G,
//   z = zeros ? zeros[g, n] : 8 (4-bit) / 128 (8-bit)
// (the product is exact in fp64 and fp32, rounded once to T). The GEMM accumulates exactly in fp64.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "llmk/core/numeric.cuh"

namespace llmk::reference {

/// Dequantizes plain codes to T: w_out[n * K + k] (row-major [N, K]).
///   std::vector<llmk::half> w(N * K);
///   llmk::reference::weight_only_dequantize(plain.data(), K / 2, 4, scales.data(), zeros.data(), nullptr,
///                                           128, N, K, w.data());
template <class T>
void weight_only_dequantize(const std::uint8_t* w, std::int64_t ld_bytes, int bits, const T* scales,
                            const std::uint8_t* zeros, const std::int32_t* g_idx, int group_size, int n,
                            int k, T* w_out) {
  const int default_zero = bits == 4 ? 8 : 128;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      const std::uint8_t byte = w[r * ld_bytes + (bits == 4 ? c / 2 : c)];
      const int u = bits == 4 ? (byte >> (4 * (c % 2))) & 0xF : byte;
      const std::int64_t g = g_idx != nullptr ? g_idx[c] : c / group_size;
      const int z = zeros != nullptr ? zeros[g * n + r] : default_zero;
      const double s = static_cast<double>(static_cast<float>(scales[g * n + r]));
      w_out[r * k + c] = T(static_cast<float>(s * static_cast<double>(u - z)));
    }
}

/// d[i * N + j] = sum_k a[i, k] * w[j, k] (+ bias[j]) in fp64, with w from weight_only_dequantize; abs_sum
/// (if non-null) gets sum_k |a[i, k] * w[j, k]| + |bias[j]|, the scale of floating-point error bounds.
///   std::vector<double> want(M * N), mag(M * N);
///   llmk::reference::weight_only_gemm(a.data(), K, plain.data(), K / 2, 4, scales.data(), nullptr, nullptr,
///                                     128, bias.data(), M, N, K, want.data(), mag.data());
template <class T>
void weight_only_gemm(const T* a, std::int64_t lda, const std::uint8_t* w, std::int64_t ld_bytes, int bits,
                      const T* scales, const std::uint8_t* zeros, const std::int32_t* g_idx, int group_size,
                      const T* bias, int m, int n, int k, double* d, double* abs_sum) {
  std::vector<T> wq(static_cast<std::size_t>(n) * k);
  weight_only_dequantize(w, ld_bytes, bits, scales, zeros, g_idx, group_size, n, k, wq.data());
  std::vector<double> wd(wq.size());
  for (std::size_t i = 0; i < wq.size(); ++i) wd[i] = static_cast<float>(wq[i]);
  std::vector<double> arow(static_cast<std::size_t>(k));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t p = 0; p < k; ++p) arow[p] = static_cast<float>(a[i * lda + p]);
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0.0, mag = 0.0;
      const double* wrow = wd.data() + j * k;
      for (std::int64_t p = 0; p < k; ++p) {
        const double prod = arow[p] * wrow[p];
        sum += prod;
        mag += std::fabs(prod);
      }
      if (bias != nullptr) {
        const double b = static_cast<float>(bias[j]);
        sum += b;
        mag += std::fabs(b);
      }
      d[i * n + j] = sum;
      if (abs_sum != nullptr) abs_sum[i * n + j] = mag;
    }
  }
}

}  // namespace llmk::reference
