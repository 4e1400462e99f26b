// llmk/gemm/checkpoint_validate.cuh: the argument and contents checks of checkpoint.cuh's importers (the
// rules and their reasons: "Rules, and why" and "v1 zero points" at the top of llmk/gemm/checkpoint.cuh): the
// checkpoint's shape, bits, group size and alignment, the import's outputs, and (host) the tensors' contents:
// finite scales, 8-bit v1 zero points, g_idx range and group sizes. The device contents check is
// checkpoint_kernels.cuh's checkpoint_check_kernel.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/gemm/checkpoint_format.cuh"

namespace llmk::gemm {

namespace detail {

// The checkpoint's own rules (and, with gemm_rules, the GEMM's K % 16 and G % 16).
inline Status validate_checkpoint(const CheckpointTensors& s, bool gemm_rules) {
  if (s.format != CheckpointFormat::kGptqV1 && s.format != CheckpointFormat::kGptqV2 &&
      s.format != CheckpointFormat::kAwq)
    return Status::invalid_argument("format", "must be kGptqV1, kGptqV2 or kAwq");
  const bool awq = s.format == CheckpointFormat::kAwq;
  if (s.qweight == nullptr) return Status::invalid_argument("qweight", "must not be null");
  if (s.scales == nullptr) return Status::invalid_argument("scales", "must not be null");
  if (s.bits == 2 || s.bits == 3)
    return Status::unsupported(str_cat(
        "bits=", s.bits, " checkpoints (the weight-only GEMM has 4- and 8-bit codes; supported: 4, 8)"));
  if (s.bits != 4 && s.bits != 8)
    return Status::invalid_argument("bits", str_cat("must be 4 or 8, got ", s.bits));
  if (awq && s.bits != 4)
    return Status::unsupported(str_cat("AWQ checkpoints with bits=", s.bits,
                                       " (AWQ's GEMM format packs 4-bit codes; supported: 4)"));
  if (awq && s.g_idx != nullptr)
    return Status::invalid_argument("g_idx",
                                    "must be null for AWQ (AWQ has no act-order: column k is in group "
                                    "k / group_size)");
  const int per = 32 / s.bits;
  if (s.n < 1) return Status::invalid_argument("n", str_cat("must be >= 1, got ", s.n));
  if (awq && s.n % 8 != 0)
    return Status::invalid_argument(
        "n",
        str_cat("must be a multiple of 8 for AWQ (qweight and qzeros pack 8 columns a word), got ", s.n));
  if (!awq && s.qzeros != nullptr && s.n % per != 0)
    return Status::invalid_argument(
        "n", str_cat("must be a multiple of 32 / bits = ", per, " for GPTQ with qzeros (qzeros packs ", per,
                     " columns a word: [groups, N * bits / 32]), got ", s.n));
  if (s.k < 1) return Status::invalid_argument("k", str_cat("must be >= 1, got ", s.k));
  if (!awq && s.k % per != 0)
    return Status::invalid_argument(
        "k", str_cat("must be a multiple of 32 / bits = ", per, " for GPTQ (qweight packs ", per,
                     " rows of K a word: [K * bits / 32, N]), got ", s.k));
  // The GEMM format's bounds (weight_only_repack's), checked before anything in dst is written.
  if (gemm_rules && s.n > (1 << 30))
    return Status::invalid_argument("n",
                                    str_cat("must be <= 2^30 (the weight-only GEMM's bound), got ", s.n));
  if (gemm_rules && s.k > (1 << 30))
    return Status::invalid_argument("k",
                                    str_cat("must be <= 2^30 (the weight-only GEMM's bound), got ", s.k));
  if (gemm_rules && s.k % 16 != 0)
    return Status::invalid_argument(
        "k", str_cat("must be a multiple of 16 (the weight-only GEMM's mma K; pad K with zero columns), got ",
                     s.k));
  const int g = s.group_size == -1 ? s.k : s.group_size;
  if (g < 1 || s.k % g != 0)
    return Status::invalid_argument("group_size", str_cat("must divide K, or be -1 for per-channel (K=", s.k,
                                                          ", group_size=", s.group_size, ")"));
  if (gemm_rules && g % 16 != 0)
    return Status::invalid_argument(
        "group_size",
        str_cat("must be a multiple of 16 (the weight-only GEMM's groups are whole k16 steps), got ", g));
  if (ckpt_misaligned(s.qweight, 4))
    return Status::invalid_argument("qweight", "must be 4-byte aligned (it is read as int32 words)");
  if (s.qzeros != nullptr && ckpt_misaligned(s.qzeros, 4))
    return Status::invalid_argument("qzeros", "must be 4-byte aligned (it is read as int32 words)");
  if (s.g_idx != nullptr && ckpt_misaligned(s.g_idx, 4))
    return Status::invalid_argument("g_idx", "must be 4-byte aligned (it is read as int32)");
  if (ckpt_misaligned(s.scales, 2))
    return Status::invalid_argument("scales", "must be 2-byte aligned (it is read as fp16)");
  return {};
}

template <class T>
Status validate_import_output(const CheckpointTensors& s, const CheckpointImportOutput<T>& d, bool device) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>,
                "T must be llmk::half or llmk::bfloat16 (the weight-only GEMM's types)");
  if (d.w == nullptr) return Status::invalid_argument("dst.w", "must not be null");
  if (device && ckpt_misaligned(d.w, 4))
    return Status::invalid_argument("dst.w", "must be 4-byte aligned (the repack writes 32-bit words)");
  if (d.scales == nullptr) return Status::invalid_argument("dst.scales", "must not be null");
  if (ckpt_misaligned(d.scales, sizeof(T)))
    return Status::invalid_argument("dst.scales", "must be aligned to its element");
  if (s.qzeros != nullptr && d.zeros == nullptr)
    return Status::invalid_argument("dst.zeros", "must not be null: the checkpoint has qzeros");
  if (d.perm != nullptr && ckpt_misaligned(d.perm, 4))
    return Status::invalid_argument("dst.perm", "must be 4-byte aligned");
  return {};
}

inline Status ckpt_bad_zero(std::int64_t g, std::int64_t n) {
  const std::string where = g >= 0 ? str_cat(" (group ", g, ", column ", n, ")") : std::string();
  return Status::invalid_argument(
      "qzeros",
      str_cat("an 8-bit GPTQ v1 stored zero is 255", where,
              ": v1 stores z - 1, so z = 256, which a uint8 zero point cannot hold (it comes from a "
              "true z = 0, which v1 cannot store: export the model as gptq_v2; see \"v1 zero points\" "
              "in llmk/gemm/checkpoint.cuh)"));
}

inline Status ckpt_bad_scale(std::int64_t g, std::int64_t n) {
  const std::string where = g >= 0 ? str_cat(" (group ", g, ", column ", n, ")") : std::string();
  return Status::invalid_argument(
      "scales",
      str_cat("must be finite: a NaN or +-Inf fp16 scale", where,
              " would make its group's outputs NaN (a corrupt checkpoint; export rejects them too)"));
}

// Host check of the tensors' contents: finite scales, v1 8-bit zeros, g_idx range and group sizes.
// *act_order = g_idx is given and differs from k / G. s.group_size is resolved.
inline Status check_checkpoint_contents_host(const CheckpointTensors& s, bool check_g_idx, bool* act_order) {
  const int g = s.group_size, groups = s.k / g;
  for (int gi = 0; gi < groups; ++gi)
    for (int n = 0; n < s.n; ++n)
      if (!std::isfinite(s.scales[static_cast<std::int64_t>(gi) * s.n + n].to_float()))
        return ckpt_bad_scale(gi, n);
  if (s.format == CheckpointFormat::kGptqV1 && s.bits == 8 && s.qzeros != nullptr)
    for (int gi = 0; gi < groups; ++gi)
      for (int n = 0; n < s.n; ++n)
        if (ckpt_stored_zero(s, gi, n) == 0xFFu) return ckpt_bad_zero(gi, n);
  *act_order = false;
  if (!check_g_idx || s.g_idx == nullptr) return {};
  std::vector<int> count(static_cast<std::size_t>(groups), 0);
  for (int k = 0; k < s.k; ++k) {
    const std::int32_t gk = s.g_idx[k];
    if (gk < 0 || gk >= groups)
      return Status::invalid_argument("g_idx", str_cat("entries must be in [0, K / group_size) = [0, ",
                                                       groups, "), g_idx[", k, "] = ", gk));
    ++count[static_cast<std::size_t>(gk)];
    if (gk != k / g) *act_order = true;
  }
  for (int gi = 0; gi < groups; ++gi)
    if (count[static_cast<std::size_t>(gi)] != g)
      return Status::invalid_argument("g_idx", str_cat("every group must hold exactly group_size = ", g,
                                                       " columns (the act-order "
                                                       "permutation's precondition); group ",
                                                       gi, " holds ", count[static_cast<std::size_t>(gi)]));
  return {};
}

}  // namespace detail

}  // namespace llmk::gemm
