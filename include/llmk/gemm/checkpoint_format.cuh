// llmk/gemm/checkpoint_format.cuh: a GPTQ / AWQ checkpoint layer as checkpoint.cuh's importers see it (the
// formats are described at the top of llmk/gemm/checkpoint.cuh): CheckpointFormat, CheckpointTensors, the
// import's output (CheckpointImportOutput) and what it wrote (CheckpointImportInfo); the decoding of one code
// and one zero point (host and device, shared by both import paths) and the host unpack of whole tensors.
#pragma once

#include <cstddef>
#include <cstdint>

#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"

namespace llmk::gemm {

/// How a checkpoint stores its zero points and packs its codes (see the top of llmk/gemm/checkpoint.cuh).
///   kGptqV1  GPTQ, quantize_config checkpoint_format "gptq" (or absent): stored z - 1, loaders add 1
///   kGptqV2  GPTQ, checkpoint_format "gptq_v2" (GPTQModel): stored z
///   kAwq     AWQ "GEMM" (AutoAWQ / llm-awq, quant_method "awq"): packed along N in order 0 2 4 6 1 3 5 7
enum class CheckpointFormat { kGptqV1, kGptqV2, kAwq };

/// One linear layer's quantized tensors as a checkpoint stores them (views; nothing is owned). All pointers
/// are host memory for import_checkpoint_host and device memory for import_checkpoint.
///
///   llmk::gemm::CheckpointTensors src;
///   src.format = llmk::gemm::CheckpointFormat::kGptqV1;   // quantize_config.json: checkpoint_format "gptq"
///   src.qweight = qweight;  src.qzeros = qzeros;  src.scales = scales;  src.g_idx = g_idx;   // or null
///   src.n = 4096;  src.k = 4096;  src.bits = 4;  src.group_size = 128;   // -1 (per-channel) also accepted
struct CheckpointTensors {
  CheckpointFormat format = CheckpointFormat::kGptqV1;
  const std::int32_t* qweight = nullptr;  ///< GPTQ [K * bits / 32, N]; AWQ [K, N / 8]. 4-byte aligned.
  /// GPTQ [groups, N * bits / 32]; AWQ [groups, N / 8]. 4-byte aligned. Null: symmetric, no zero points are
  /// written and the GEMM uses its default z = 2^(bits - 1).
  const std::int32_t* qzeros = nullptr;
  const half* scales = nullptr;         ///< [groups, N] fp16, 2-byte aligned
  const std::int32_t* g_idx = nullptr;  ///< GPTQ: [K] or null (k / group_size); AWQ: must be null
  int n = 0;                            ///< N = out_features
  int k = 0;                            ///< K = in_features
  int bits = 4;                         ///< 4 or 8 (AWQ: 4)
  int group_size = 0;                   ///< G, dividing K; -1 = K (per-channel, GPTQ's convention)
};

/// Where an import writes (host or device memory, as the call). T = llmk::half or llmk::bfloat16, the GEMM's.
/// Sizes: w weight_only_packed_bytes(N, K, bits) bytes; scales and zeros (K / G) * N elements; perm K.
///
///   std::vector<std::uint8_t> w(llmk::gemm::weight_only_packed_bytes(N, K, 4));
///   std::vector<llmk::half> scales((K / G) * N);
///   std::vector<std::uint8_t> zeros((K / G) * N);
///   std::vector<std::int32_t> perm(K);
///   llmk::gemm::CheckpointImportOutput<llmk::half> dst{w.data(), scales.data(), zeros.data(), perm.data()};
template <class T>
struct CheckpointImportOutput {
  void* w = nullptr;              ///< the packed weights (the GEMM's args.w); device: 4-byte aligned
  T* scales = nullptr;            ///< [K / G, N]
  std::uint8_t* zeros = nullptr;  ///< [K / G, N] zero points z; required when the checkpoint has qzeros
  /// [K] act-order permutation, written only when g_idx is not k / G (CheckpointImportInfo::act_order). May
  /// be null when the caller knows there is no act-order; an act-order checkpoint then fails with 'dst.perm'.
  std::int32_t* perm = nullptr;
};

/// What an import wrote, i.e. what to pass to the GEMM (checkpoint_gemm_args does it; example:
/// import_checkpoint_host).
///   if (info.act_order) { /* upload perm; the GEMM needs a workspace */ }
struct CheckpointImportInfo {
  bool zeros = false;      ///< dst.zeros written (the checkpoint has qzeros): args.zeros = dst.zeros
  bool act_order = false;  ///< dst.perm written (g_idx is not k / G): args.perm = dst.perm and a workspace
};

namespace detail {

inline bool ckpt_misaligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes != 0;
}

// G with GPTQ's -1 resolved (only after validation).
inline int ckpt_group_size(const CheckpointTensors& s) {
  return s.group_size == -1 ? s.k : s.group_size;
}

// Bytes of one plain row: 4-bit two codes a byte (element 2i low), 8-bit one.
inline std::int64_t ckpt_plain_ld(int k, int bits) {
  return bits == 4 ? (k + 1) / 2 : k;
}

// AWQ: nibble of column 8c + j within its word (order = 0 2 4 6 1 3 5 7 inverted).
LLMK_HOST_DEVICE int ckpt_awq_nibble(int j) {
  return 4 * (j % 2) + j / 2;
}

// Code q[n, k] of the checkpoint (the definitions at the top of checkpoint.cuh).
LLMK_HOST_DEVICE std::uint32_t ckpt_code(const CheckpointTensors& s, int n, int k) {
  if (s.format == CheckpointFormat::kAwq) {
    const auto word = static_cast<std::uint32_t>(s.qweight[static_cast<std::int64_t>(k) * (s.n / 8) + n / 8]);
    return (word >> (4 * ckpt_awq_nibble(n % 8))) & 0xFu;
  }
  const int per = 32 / s.bits;
  const auto word = static_cast<std::uint32_t>(s.qweight[static_cast<std::int64_t>(k / per) * s.n + n]);
  return (word >> (s.bits * (k % per))) & ((1u << s.bits) - 1u);
}

// The stored zero field of (group g, column n), before the v1 offset.
LLMK_HOST_DEVICE std::uint32_t ckpt_stored_zero(const CheckpointTensors& s, int g, int n) {
  if (s.format == CheckpointFormat::kAwq) {
    const auto word = static_cast<std::uint32_t>(s.qzeros[static_cast<std::int64_t>(g) * (s.n / 8) + n / 8]);
    return (word >> (4 * ckpt_awq_nibble(n % 8))) & 0xFu;
  }
  const int per = 32 / s.bits;
  const auto word =
      static_cast<std::uint32_t>(s.qzeros[static_cast<std::int64_t>(g) * (s.n / per) + n / per]);
  return (word >> (s.bits * (n % per))) & ((1u << s.bits) - 1u);
}

// The zero point z (v1: stored + 1). An 8-bit v1 stored 255 (z = 256) is rejected before this is called.
LLMK_HOST_DEVICE std::uint8_t ckpt_zero(const CheckpointTensors& s, int g, int n) {
  const std::uint32_t stored = ckpt_stored_zero(s, g, n);
  return static_cast<std::uint8_t>(s.format == CheckpointFormat::kGptqV1 ? stored + 1u : stored);
}

// Plain codes [N, ld] in the original column order (host).
inline void unpack_codes_host(const CheckpointTensors& s, std::uint8_t* plain, std::int64_t ld) {
  for (int n = 0; n < s.n; ++n) {
    std::uint8_t* row = plain + static_cast<std::int64_t>(n) * ld;
    if (s.bits == 8) {
      for (int k = 0; k < s.k; ++k) row[k] = static_cast<std::uint8_t>(ckpt_code(s, n, k));
    } else {
      for (int k = 0; k < s.k; k += 2) {
        const std::uint32_t hi = k + 1 < s.k ? ckpt_code(s, n, k + 1) : 0u;
        row[k / 2] = static_cast<std::uint8_t>(ckpt_code(s, n, k) | (hi << 4));
      }
    }
  }
}

// Scales (to T) and zero points (host). s.group_size is resolved.
template <class T>
void unpack_quant_host(const CheckpointTensors& s, T* scales, std::uint8_t* zeros) {
  const int groups = s.k / s.group_size;
  for (int g = 0; g < groups; ++g)
    for (int n = 0; n < s.n; ++n) {
      const std::int64_t i = static_cast<std::int64_t>(g) * s.n + n;
      scales[i] = T(s.scales[i].to_float());
      if (s.qzeros != nullptr) zeros[i] = ckpt_zero(s, g, n);
    }
}

}  // namespace detail

}  // namespace llmk::gemm
