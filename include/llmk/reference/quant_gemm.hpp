// llmk/reference/quant_gemm.hpp: host references of the 8-bit GEMMs (llmk/gemm/w8a8.cuh): exact integer
// accumulation for int8, fp64 for everything else. Simple loops; 64-bit offsets.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "llmk/core/numeric.cuh"

namespace llmk::reference {

/// acc[i, j] = sum_k a[i, k] * w[j, k] for int8 A [M, K], W [N, K] (row-major), as the int8 mma computes it:
/// exact, then wrapped to int32 (two's complement) when saturate is false; with saturate, clamped to the
/// int32 range after every 32-element step of K in order (what mma .satfinite does per m16n8k32 call).
///   std::vector<std::int32_t> want(M * N);
///   llmk::reference::gemm_s8s8_s32(a.data(), K, w.data(), K, M, N, K, want.data(), N, /*saturate=*/false);
inline void gemm_s8s8_s32(const std::int8_t* a, std::int64_t lda, const std::int8_t* w, std::int64_t ldw,
                          int m, int n, int k, std::int32_t* acc, std::int64_t ldacc, bool saturate) {
  constexpr std::int64_t lo = std::numeric_limits<std::int32_t>::min(),
                         hi = std::numeric_limits<std::int32_t>::max();
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      std::int64_t s = 0;
      for (int p0 = 0; p0 < k; p0 += 32) {
        std::int64_t chunk = 0;
        for (int p = p0; p < std::min(k, p0 + 32); ++p)
          chunk += std::int64_t(a[i * lda + p]) * w[j * ldw + p];
        s += chunk;
        if (saturate) s = std::clamp(s, lo, hi);
      }
      acc[i * ldacc + j] =
          static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(s)));
    }
}

/// Host view of llmk::gemm::DequantScales (host pointers; no column sums: the reference subtracts z_a from
/// the operand exactly). Aggregate order as DequantScales without w_column_sums:
///   llmk::reference::HostDequant s{sa.data(), true, nullptr, sw.data(), true, bias.data()};
struct HostDequant {
  const float* a_scales = nullptr;
  bool a_per_token = true;
  const std::int32_t* a_zero_points = nullptr;
  const float* w_scales = nullptr;
  bool w_per_channel = true;
  const float* bias = nullptr;
};

/// out[i, j] = s_a[i] * s_w[j] * sum_k (a[i, k] - z_a[i]) * w[j, k] + bias[j] in fp64 from the exact operand
/// values (In = std::int8_t, float8_e4m3, half, ...). What the dequantized 8-bit GEMMs are compared against.
///   std::vector<double> ref(M * N);   // s: a HostDequant
///   llmk::reference::gemm_dequant_fp64(a.data(), K, w.data(), K, M, N, K, s, ref.data(), N);
template <class In>
void gemm_dequant_fp64(const In* a, std::int64_t lda, const In* w, std::int64_t ldw, int m, int n, int k,
                       const HostDequant& s, double* out, std::int64_t ldo) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      const double z = s.a_zero_points != nullptr ? s.a_zero_points[s.a_per_token ? i : 0] : 0.0;
      double sum = 0.0;
      for (int p = 0; p < k; ++p)
        sum += (static_cast<double>(static_cast<float>(a[i * lda + p])) - z) *
               static_cast<double>(static_cast<float>(w[j * ldw + p]));
      double v = sum * static_cast<double>(s.a_scales[s.a_per_token ? i : 0]) *
                 static_cast<double>(s.w_scales[s.w_per_channel ? j : 0]);
      if (s.bias != nullptr) v += s.bias[j];
      out[i * ldo + j] = v;
    }
}

/// Block-wise fp8 GEMM (llmk::gemm::Fp8BlockScales) in fp64 from the exact operand values:
/// out[i, j] = sum_kb a_scales[kb * ld_a_scales + i] * w_scales[(j / 128) * k_blocks + kb]
///             * sum_{k in [128 kb, 128 kb + 128)} a[i, k] w[j, k]  + bias[j].
///   llmk::reference::gemm_fp8_blockwise_fp64(a.data(), K, w.data(), K, M, N, K, sa_t.data(), M, sw.data(),
///                                            nullptr, ref.data(), N);   // sa_t [ceil(K/128), M], no bias
template <class In>
void gemm_fp8_blockwise_fp64(const In* a, std::int64_t lda, const In* w, std::int64_t ldw, int m, int n,
                             int k, const float* a_scales, std::int64_t ld_a_scales, const float* w_scales,
                             const float* bias, double* out, std::int64_t ldo) {
  const int k_blocks = (k + 127) / 128;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double v = 0.0;
      for (int kb = 0; kb < k_blocks; ++kb) {
        double sum = 0.0;
        for (int p = 128 * kb; p < std::min(k, 128 * kb + 128); ++p)
          sum += static_cast<double>(static_cast<float>(a[i * lda + p])) *
                 static_cast<double>(static_cast<float>(w[j * ldw + p]));
        v += sum * static_cast<double>(a_scales[kb * ld_a_scales + i]) *
             static_cast<double>(w_scales[static_cast<std::int64_t>(j / 128) * k_blocks + kb]);
      }
      if (bias != nullptr) v += bias[j];
      out[i * ldo + j] = v;
    }
}

/// out[i, j] += sum_k a[i, k] * w[j, k] in fp64 (the outlier part of the mixed LLM.int8() GEMM).
///   llmk::reference::gemm_accumulate_fp64(x_out.data(), ld, w_out.data(), ld, M, N, ld, ref.data(), N);
template <class In>
void gemm_accumulate_fp64(const In* a, std::int64_t lda, const In* w, std::int64_t ldw, int m, int n, int k,
                          double* out, std::int64_t ldo) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int p = 0; p < k; ++p)
        sum += static_cast<double>(static_cast<float>(a[i * lda + p])) *
               static_cast<double>(static_cast<float>(w[j * ldw + p]));
      out[i * ldo + j] += sum;
    }
}

}  // namespace llmk::reference
