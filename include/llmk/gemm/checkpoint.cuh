// llmk/gemm/checkpoint.cuh: GPTQ and AWQ checkpoint tensors in and out of the weight-only GEMM
// (llmk/gemm/weight_only.cuh). import_checkpoint_host / import_checkpoint (device) turn one linear layer's
// qweight / qzeros / scales / g_idx, exactly as a GPTQ (v1 or v2) or AWQ checkpoint stores them, into what
// weight_only_gemm takes: the packed weights, T scales, uint8 zero points and the act-order permutation.
// export_gptq_host writes llmk's own GPTQ result (llmk::obs::QuantizedLayer) as GPTQ checkpoint tensors.
//
// ---- The formats (one nn.Linear: weight W [N = out_features, K = in_features]) ----
// Packed tensors are int32, read as uint32 words; bit 0 is the word's least significant bit. b = bits,
// P = 32 / b codes per word, mask = 2^b - 1, G = group_size, groups = K / G. Codes q are unsigned in
// [0, mask]. Everything below is in elements of the named tensor, row-major.
//
// GPTQ (AutoGPTQ, GPTQ-for-LLaMa, GPTQModel; read by the exllama, exllamav2, Marlin and vLLM loaders):
//   qweight  int32 [K / P, N]        packed along K: word (i, n) holds q[n, k] for k = P i + j, j = 0 .. P-1,
//                                   in bits b j .. b j + b - 1 (4-bit: k = 8 i + j at bit 4 j; 8-bit:
//                                   k = 4 i + j at bit 8 j).
//   qzeros   int32 [groups, N / P]   packed the same way, along N: word (g, c) holds the stored zero of
//   column
//                                   n = P c + j in bits b j .. b j + b - 1.
//   scales   fp16  [groups, N]       (GPTQ's layout, the weight-only GEMM's too).
//   g_idx    int32 [K]               group of input column k; absent means k / G. With act-order ("desc_act")
//                                   it is a shuffle of k / G: every group still has exactly G columns.
//   w[n, k] = scales[g, n] * (q[n, k] - z[g, n]),  g = g_idx[k].
//   Zero points. "gptq" (v1, the usual checkpoint_format) stores z - 1 and the loaders add 1 back; "gptq_v2"
//   (GPTQModel format="gptq_v2") stores z. See "v1 zero points" below for the one value where they differ.
//
// AWQ (AutoAWQ and llm-awq, version "GEMM"; 4-bit only):
//   qweight  int32 [K, N / 8]        packed along N, interleaved: nibble i (bits 4 i .. 4 i + 3) of word (k,
//   c)
//                                   holds q[8 c + order[i], k], order = {0, 2, 4, 6, 1, 3, 5, 7}; i.e. column
//                                   8 c + j is nibble 4 (j % 2) + j / 2 (the order AWQ's kernel dequantizes
//                                   in: its shifts give the even columns, then the odd ones).
//   qzeros   int32 [groups, N / 8]   the same packing; z stored as is (no offset).
//   scales   fp16  [groups, N];  no g_idx (AWQ has no act-order): g = k / G.
//   w[n, k] = scales[g, n] * (q[n, k] - z[g, n]).
//
// llmk's weight-only format (what import produces, weight_only.cuh): codes u = q unchanged (unsigned),
// repacked into the kernel layout (weight_only_repack; the plain input is [N, K], 4-bit two codes a byte with
// element 2 i in the low nibble, 8-bit one a byte), scales [groups, N] of T (half: the fp16 values exactly;
// bfloat16: rounded to nearest even, as every bf16 engine does), zero points uint8 [groups, N] holding z
// itself, and, for act-order, perm = act_order_permutation(g_idx), which the repack applies to W's columns
// and the GEMM to A's. Then weight_only_gemm computes exactly T(scales[g, n] * (q[n, k] - z[g, n])) per
// weight, the value the checkpoint defines (rounded once to T, see weight_only.cuh).
//
// ---- Rules, and why ----
//   bits 4 or 8                   the GEMM's code widths; 2- and 3-bit are Status::unsupported (3-bit words
//                                 also straddle fields across words). AWQ: 4 only (its only format).
//   GPTQ: K % P == 0              qweight packs P rows of K a word. GPTQ with qzeros: N % P == 0 (qzeros
//   packs
//                                 P columns a word, [groups, N * b / 32]). AWQ: N % 8 == 0 (both tensors pack
//                                 8 columns a word).
//   K % 16, G % 16, G | K         the GEMM's: K is covered by m16n8k16 steps and groups by whole k16 steps.
//                                 group_size -1 (GPTQ's "per-channel") means G = K.
//   g_idx: entries in [0, groups), each group exactly G columns: the act-order permutation's precondition.
//   AWQ with g_idx                rejected: the format has none, so a g_idx is a caller's mix-up.
//   4-byte aligned qweight, qzeros, g_idx (int32 loads), 2-byte aligned scales; device: dst.w 4-byte aligned
//   (the repack writes words), workspace 4-byte aligned (the flag word and group counters; the act-order
//   sort's temporary storage is aligned to 16 bytes inside it).
//   Every violation is Status::invalid_argument naming the argument ('qweight', 'qzeros', 'scales', 'g_idx',
//   'n', 'k', 'bits', 'group_size', 'format' for the checkpoint; 'dst.w', 'dst.scales', 'dst.zeros',
//   'dst.perm', 'workspace', 'workspace_bytes' for the outputs). Nothing is written on an error.
//
// ---- v1 zero points ----
// AutoGPTQ's pack() stores z - 1 (OR'ed into the word as a uint32) and every v1 loader adds 1 to the masked
// field: z = (stored & mask) + 1 (AutoGPTQ's torch path, exllama, exllamav2, vLLM's gptq_gemm). So v1 reaches
// z in [1, 2^b]; a true z = 0 cannot be stored (-1 is the all-ones field, and the OR also sets every field
// above it in that word), and the stored value mask reads back as z = 2^b. llmk reproduces those loaders:
//   4-bit stored 15  -> z = 16: a valid uint8 zero point; the GEMM computes s (u - 16), as the loaders do.
//   8-bit stored 255 -> z = 256 does not fit a uint8 zero point: rejected ('qzeros'), on the host and the
//                       device. Such a field comes from a true z = 0 that v1 cannot store; export the model
//                       as gptq_v2, which stores z = 0 as is.
// (GPTQModel's v1 -> v2 conversion instead adds 0x11111111 to the packed word, which wraps 15 to 0 and
// carries into the next field; the two readings differ only for stored == mask.) export_gptq_host writes v1
// only for z in [1, mask] and rejects z = 0 (write kV2 instead).
//
// ---- Host and device ----
// import_checkpoint_host (host memory) and import_checkpoint (device memory, caller-owned workspace) validate
// the same rules, including the tensors' contents (finite scales, g_idx, 8-bit v1 zeros: the device path
// checks them in a kernel and reads back one flag word, one stream synchronization),
// and write identical bytes: both unpack with the
// same decoding functions (one thread per plain byte and per scale / zero on the device) and then run the
// weight-only repack and act-order permutation, whose host and device versions are bit-identical.
// The act-order permutation is computed and used only when g_idx is not the trivial k / G (AutoGPTQ stores a
// trivial g_idx in every checkpoint without act-order; a permutation there would cost an A gather per call).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/memory.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/gemm/weight_only.cuh"
#include "llmk/obs/obs.hpp"

namespace llmk::gemm {

/// How a checkpoint stores its zero points and packs its codes (see the top of this file).
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

/// What an import wrote, i.e. what to pass to the GEMM (checkpoint_gemm_args does it).
struct CheckpointImportInfo {
  bool zeros = false;      ///< dst.zeros written (the checkpoint has qzeros): args.zeros = dst.zeros
  bool act_order = false;  ///< dst.perm written (g_idx is not k / G): args.perm = dst.perm and a workspace
};

namespace detail {

inline bool ckpt_misaligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes != 0;
}

// Bit flags the device check ORs into the workspace's first word.
constexpr unsigned kCkptBadZero = 1u;         // 8-bit GPTQ v1 stored zero 255 (z = 256)
constexpr unsigned kCkptBadGroup = 2u;        // a g_idx entry outside [0, groups)
constexpr unsigned kCkptBadCount = 4u;        // a group without exactly G columns
constexpr unsigned kCkptActOrder = 8u;        // g_idx differs from k / G somewhere
constexpr unsigned kCkptBadScale = 16u;       // a scale that is NaN or +-Inf
constexpr int kCkptThreads = 256;             // threads per block of every kernel here
constexpr std::size_t kCkptHeaderBytes = 16;  // the flag word (padded) at the start of the workspace

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

// Code q[n, k] of the checkpoint (the definitions at the top of this file).
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

// ---- device kernels (grid-stride loops, kCkptThreads threads a block) ----

// Zeroes the flag word and the group counters.
template <class Unused = void>
__global__ void __launch_bounds__(kCkptThreads)
    checkpoint_clear_kernel(unsigned* flags, int* counts, int groups) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i <= groups;
       i += static_cast<int>(gridDim.x * blockDim.x)) {
    if (i == 0)
      *flags = 0u;
    else
      counts[i - 1] = 0;
  }
}

// Contents check: item i < K checks g_idx[i] (range, counts per group, act-order); item i < groups * N
// checks the scale of (i / N, i % N) (finite) and its 8-bit v1 stored zero. s.group_size is resolved.
template <class Unused = void>
__global__ void __launch_bounds__(kCkptThreads)
    checkpoint_check_kernel(CheckpointTensors s, unsigned* flags, int* counts) {
  const int groups = s.k / s.group_size;
  const std::int64_t gidx_items = s.g_idx != nullptr ? s.k : 0;
  const bool check_zeros = s.format == CheckpointFormat::kGptqV1 && s.bits == 8 && s.qzeros != nullptr;
  const std::int64_t zero_items = check_zeros ? static_cast<std::int64_t>(groups) * s.n : 0;
  const std::int64_t scale_items = static_cast<std::int64_t>(groups) * s.n;
  const std::int64_t items = gidx_items > scale_items ? gidx_items : scale_items;
  unsigned bad = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (i < gidx_items) {
      const std::int32_t g = s.g_idx[i];
      if (g < 0 || g >= groups) {
        bad |= kCkptBadGroup;
      } else {
        atomicAdd(&counts[g], 1);
        if (g != static_cast<int>(i / s.group_size)) bad |= kCkptActOrder;
      }
    }
    if (i < scale_items && !quant::is_finite(s.scales[i].to_float())) bad |= kCkptBadScale;
    if (i < zero_items && ckpt_stored_zero(s, static_cast<int>(i / s.n), static_cast<int>(i % s.n)) == 0xFFu)
      bad |= kCkptBadZero;
  }
  if (bad != 0) atomicOr(flags, bad);
}

// One thread per group: flags a group without exactly G columns.
template <class Unused = void>
__global__ void __launch_bounds__(kCkptThreads)
    checkpoint_count_kernel(const int* counts, int groups, int group_size, unsigned* flags) {
  for (int g = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); g < groups;
       g += static_cast<int>(gridDim.x * blockDim.x))
    if (counts[g] != group_size) atomicOr(flags, kCkptBadCount);
}

// One thread per plain byte: byte (n, c) of the [N, ld] plain codes, original column order.
template <class Unused = void>
__global__ void __launch_bounds__(kCkptThreads)
    checkpoint_codes_kernel(CheckpointTensors s, std::uint8_t* plain, std::int64_t ld) {
  const std::int64_t total = static_cast<std::int64_t>(s.n) * ld;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int n = static_cast<int>(i / ld), c = static_cast<int>(i % ld);
    std::uint32_t byte;
    if (s.bits == 8) {
      byte = ckpt_code(s, n, c);
    } else {
      const std::uint32_t hi = 2 * c + 1 < s.k ? ckpt_code(s, n, 2 * c + 1) : 0u;
      byte = ckpt_code(s, n, 2 * c) | (hi << 4);
    }
    plain[i] = static_cast<std::uint8_t>(byte);
  }
}

// One thread per (group, column): the scale converted to T and the zero point z.
template <class T>
__global__ void __launch_bounds__(kCkptThreads)
    checkpoint_quant_kernel(CheckpointTensors s, T* scales, std::uint8_t* zeros) {
  const std::int64_t total = static_cast<std::int64_t>(s.k / s.group_size) * s.n;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    scales[i] = T(s.scales[i].to_float());
    if (s.qzeros != nullptr) zeros[i] = ckpt_zero(s, static_cast<int>(i / s.n), static_cast<int>(i % s.n));
  }
}

inline dim3 ckpt_grid(std::int64_t items) {
  const std::int64_t blocks = ceil_div<std::int64_t>(items < 1 ? 1 : items, kCkptThreads);
  return dim3(static_cast<unsigned>(blocks < 65535 ? blocks : 65535));
}

// Reads one word of device memory (synchronizes the stream).
inline Status ckpt_read_word(const unsigned* p, unsigned* value, cudaStream_t stream) {
#if defined(LLMK_CUDA)
  cudaError_t e = cudaMemcpyAsync(value, p, sizeof(unsigned), cudaMemcpyDeviceToHost, stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaMemcpyAsync", cudaGetErrorString(e));
  e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaStreamSynchronize", cudaGetErrorString(e));
#else
  (void)stream;
  std::memcpy(value, p, sizeof(unsigned));
#endif
  return {};
}

}  // namespace detail

/// Unpacks a checkpoint to llmk's plain format on the host, without repacking: codes [N, K] in the ORIGINAL
/// column order (4-bit two a byte, element 2i in the low nibble; 8-bit one a byte; row stride ld_bytes),
/// scales [K / G, N] as T, and zero points z [K / G, N] (when src.qzeros is given; zeros may be null
/// otherwise). This is the input of weight_only_repack_host and of llmk::reference::weight_only_gemm (with
/// src.g_idx as its g_idx). g_idx is not read. Only the checkpoint's own rules apply here (not the GEMM's
/// K % 16 and G % 16), plus the v1 zero-point policy (an 8-bit stored 255 is rejected, 'qzeros').
///
///   std::vector<std::uint8_t> plain(N * (K / 2)), zeros((K / G) * N);
///   std::vector<llmk::half> scales((K / G) * N);
///   llmk::Status s = llmk::gemm::unpack_checkpoint_host(src, plain.data(), K / 2, scales.data(),
///   zeros.data());
template <class T>
Status unpack_checkpoint_host(const CheckpointTensors& src, std::uint8_t* codes, std::int64_t ld_bytes,
                              T* scales_out, std::uint8_t* zeros_out) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>,
                "T must be llmk::half or llmk::bfloat16");
  LLMK_RETURN_IF_ERROR(detail::validate_checkpoint(src, /*gemm_rules=*/false));
  if (codes == nullptr) return Status::invalid_argument("codes", "must not be null");
  const std::int64_t row = detail::ckpt_plain_ld(src.k, src.bits);
  if (ld_bytes < row)
    return Status::invalid_argument(
        "ld_bytes", str_cat("must be >= ", row, " (K=", src.k, ", bits=", src.bits, "), got ", ld_bytes));
  if (scales_out == nullptr) return Status::invalid_argument("scales_out", "must not be null");
  if (src.qzeros != nullptr && zeros_out == nullptr)
    return Status::invalid_argument("zeros_out", "must not be null: the checkpoint has qzeros");
  CheckpointTensors s = src;
  s.group_size = detail::ckpt_group_size(src);
  bool unused = false;
  LLMK_RETURN_IF_ERROR(detail::check_checkpoint_contents_host(s, /*check_g_idx=*/false, &unused));
  detail::unpack_codes_host(s, codes, ld_bytes);
  detail::unpack_quant_host(s, scales_out, zeros_out);
  return {};
}

/// Imports a checkpoint on the host (all pointers host memory): writes the GEMM's packed weights (dst.w,
/// weight_only_packed_bytes(N, K, bits) bytes), scales as T, zero points (with qzeros) and, when g_idx is not
/// k / G, the act-order permutation. Validates every argument and the tensors' contents (g_idx: range and
/// exactly G columns a group; the v1 zero-point policy) before writing anything. `info` (optional) says what
/// was written; checkpoint_gemm_args turns it into the GEMM's arguments. The same bytes as import_checkpoint.
///
///   llmk::gemm::CheckpointTensors src{llmk::gemm::CheckpointFormat::kGptqV1, qweight, qzeros, scales, g_idx,
///                                     N, K, /*bits=*/4, /*group_size=*/128};
///   std::vector<std::uint8_t> w(llmk::gemm::weight_only_packed_bytes(N, K, 4)), zeros((K / 128) * N);
///   std::vector<llmk::half> sc((K / 128) * N);
///   std::vector<std::int32_t> perm(K);
///   llmk::gemm::CheckpointImportOutput<llmk::half> dst{w.data(), sc.data(), zeros.data(), perm.data()};
///   llmk::gemm::CheckpointImportInfo info;
///   llmk::Status s = llmk::gemm::import_checkpoint_host(src, dst, &info);
///   // upload w, sc, zeros (if info.zeros) and perm (if info.act_order); then checkpoint_gemm_args
template <class T>
Status import_checkpoint_host(const CheckpointTensors& src, const CheckpointImportOutput<T>& dst,
                              CheckpointImportInfo* info = nullptr) {
  LLMK_RETURN_IF_ERROR(detail::validate_checkpoint(src, /*gemm_rules=*/true));
  LLMK_RETURN_IF_ERROR(detail::validate_import_output(src, dst, /*device=*/false));
  CheckpointTensors s = src;
  s.group_size = detail::ckpt_group_size(src);
  bool act_order = false;
  LLMK_RETURN_IF_ERROR(detail::check_checkpoint_contents_host(s, /*check_g_idx=*/true, &act_order));
  if (act_order && dst.perm == nullptr)
    return Status::invalid_argument("dst.perm", "must not be null: g_idx is not k / group_size (act-order)");
  const std::int64_t ld = detail::ckpt_plain_ld(s.k, s.bits);
  std::vector<std::uint8_t> plain(static_cast<std::size_t>(static_cast<std::int64_t>(s.n) * ld));
  detail::unpack_codes_host(s, plain.data(), ld);
  if (act_order) LLMK_RETURN_IF_ERROR(act_order_permutation_host(s.g_idx, s.k, s.group_size, dst.perm));
  const WeightRepackArgs r{plain.data(), ld, act_order ? dst.perm : nullptr, dst.w, s.n, s.k, s.bits, false};
  LLMK_RETURN_IF_ERROR(weight_only_repack_host(r));
  detail::unpack_quant_host(s, dst.scales, dst.zeros);
  if (info != nullptr) *info = {s.qzeros != nullptr, act_order};
  return {};
}

namespace detail {
// Offset of the act-order permutation's temporary storage in the workspace (after the header, the group
// counters and the plain codes), and its size.
inline std::size_t ckpt_perm_temp_offset(const CheckpointTensors& src) {
  const std::size_t groups = static_cast<std::size_t>(src.k / ckpt_group_size(src));
  return round_up<std::size_t>(
      kCkptHeaderBytes + round_up<std::size_t>(4 * groups, 16) +
          static_cast<std::size_t>(src.n) * static_cast<std::size_t>(ckpt_plain_ld(src.k, src.bits)),
      256);
}
// With a g_idx: act_order_permutation's temporary storage plus 12 bytes, so that the storage can start at
// the next 16-byte boundary of a workspace that is only 4-byte aligned (ckpt_perm_temp).
inline std::size_t ckpt_perm_temp_bytes(const CheckpointTensors& src) {
  std::size_t bytes = 0;
  if (src.g_idx == nullptr) return 0;  // no act-order without a g_idx
  (void)act_order_permutation(nullptr, &bytes, src.g_idx, src.k, ckpt_group_size(src), nullptr, nullptr);
  return bytes + 12;
}
// The act-order temporary storage in the workspace: 16-byte aligned (what the sort's storage needs).
inline void* ckpt_perm_temp(std::uint8_t* workspace, const CheckpointTensors& src) {
  const auto at = reinterpret_cast<std::uintptr_t>(workspace + ckpt_perm_temp_offset(src));
  return reinterpret_cast<void*>((at + 15) / 16 * 16);
}
}  // namespace detail

/// Bytes of device workspace import_checkpoint needs: a 16-byte flag header, one int32 counter per group
/// (rounded up to 16 bytes), the plain codes N * K * bits / 8 and, with a g_idx, act_order_permutation's
/// temporary storage (plus 12 bytes to align it: the workspace need only be 4-byte aligned). 0 for a
/// checkpoint that fails validation.
///   std::size_t bytes = llmk::gemm::import_checkpoint_workspace_bytes(src);
inline std::size_t import_checkpoint_workspace_bytes(const CheckpointTensors& src) {
  if (!detail::validate_checkpoint(src, /*gemm_rules=*/true).ok()) return 0;
  return detail::ckpt_perm_temp_offset(src) + detail::ckpt_perm_temp_bytes(src);
}

/// Imports a checkpoint on the device (src's tensors, dst and workspace: device memory): the same checks and
/// the same bytes as import_checkpoint_host. Kernels: a contents check (finite scales, g_idx, 8-bit v1 zeros;
/// its flag word is read back: one synchronization of `stream`), the unpack
/// (one thread per plain byte into the workspace, one per scale / zero point into dst), then
/// act_order_permutation (with act-order) and weight_only_repack. An offline step: run it once per layer
/// after uploading the checkpoint's tensors. On an error nothing in dst is written.
///
///   std::size_t ws_bytes = llmk::gemm::import_checkpoint_workspace_bytes(src);    // src: device pointers
///   llmk::DeviceBuffer<std::uint8_t> ws(ws_bytes), w(llmk::gemm::weight_only_packed_bytes(N, K, 4));
///   llmk::DeviceBuffer<llmk::half> sc((K / G) * N);
///   llmk::DeviceBuffer<std::uint8_t> zeros((K / G) * N);
///   llmk::DeviceBuffer<std::int32_t> perm(K);
///   llmk::gemm::CheckpointImportOutput<llmk::half> dst{w.data(), sc.data(), zeros.data(), perm.data()};
///   llmk::gemm::CheckpointImportInfo info;
///   llmk::Status s = llmk::gemm::import_checkpoint(src, dst, ws.data(), ws_bytes, stream, &info);
template <class T>
Status import_checkpoint(const CheckpointTensors& src, const CheckpointImportOutput<T>& dst, void* workspace,
                         std::size_t workspace_bytes, cudaStream_t stream,
                         CheckpointImportInfo* info = nullptr) {
  LLMK_RETURN_IF_ERROR(detail::validate_checkpoint(src, /*gemm_rules=*/true));
  LLMK_RETURN_IF_ERROR(detail::validate_import_output(src, dst, /*device=*/true));
  const std::size_t need = import_checkpoint_workspace_bytes(src);
  if (workspace == nullptr)
    return Status::invalid_argument(
        "workspace", str_cat("must not be null: needs ", need, " bytes (import_checkpoint_workspace_bytes)"));
  if (detail::ckpt_misaligned(workspace, 4))
    return Status::invalid_argument("workspace", "must be 4-byte aligned");
  if (workspace_bytes < need)
    return Status::invalid_argument(
        "workspace_bytes",
        str_cat("must be >= import_checkpoint_workspace_bytes = ", need, ", got ", workspace_bytes));
  LLMK_RETURN_IF_ERROR(check_device_pointer("qweight", src.qweight));
  LLMK_RETURN_IF_ERROR(check_device_pointer("qzeros", src.qzeros));
  LLMK_RETURN_IF_ERROR(check_device_pointer("scales", src.scales));
  LLMK_RETURN_IF_ERROR(check_device_pointer("g_idx", src.g_idx));
  LLMK_RETURN_IF_ERROR(check_device_pointer("dst.w", dst.w));
  LLMK_RETURN_IF_ERROR(check_device_pointer("dst.scales", dst.scales));
  LLMK_RETURN_IF_ERROR(check_device_pointer("dst.zeros", dst.zeros));
  LLMK_RETURN_IF_ERROR(check_device_pointer("dst.perm", dst.perm));
  LLMK_RETURN_IF_ERROR(check_device_pointer("workspace", workspace));

  CheckpointTensors s = src;
  s.group_size = detail::ckpt_group_size(src);
  const int groups = s.k / s.group_size;
  auto* base = static_cast<std::uint8_t*>(workspace);
  auto* flags = reinterpret_cast<unsigned*>(base);
  auto* counts = reinterpret_cast<int*>(base + detail::kCkptHeaderBytes);
  std::uint8_t* plain =
      base + detail::kCkptHeaderBytes + round_up<std::size_t>(4 * static_cast<std::size_t>(groups), 16);
  const std::int64_t ld = detail::ckpt_plain_ld(s.k, s.bits);
  const dim3 block(detail::kCkptThreads);

  // 1. Contents check (the scales are always checked), before anything in dst is written.
  unsigned bad = 0;
  {
    LLMK_RETURN_IF_ERROR(launch(detail::checkpoint_clear_kernel<>, detail::ckpt_grid(groups + 1), block, 0,
                                stream, flags, counts, groups));
    const std::int64_t check_items = std::max<std::int64_t>(static_cast<std::int64_t>(groups) * s.n, s.k);
    LLMK_RETURN_IF_ERROR(launch(detail::checkpoint_check_kernel<>, detail::ckpt_grid(check_items), block, 0,
                                stream, s, flags, counts));
    if (s.g_idx != nullptr)
      LLMK_RETURN_IF_ERROR(launch(detail::checkpoint_count_kernel<>, detail::ckpt_grid(groups), block, 0,
                                  stream, counts, groups, s.group_size, flags));
    LLMK_RETURN_IF_ERROR(detail::ckpt_read_word(flags, &bad, stream));
  }
  if (bad & detail::kCkptBadScale) return detail::ckpt_bad_scale(-1, -1);
  if (bad & detail::kCkptBadZero) return detail::ckpt_bad_zero(-1, -1);
  if (bad & detail::kCkptBadGroup)
    return Status::invalid_argument(
        "g_idx", str_cat("entries must be in [0, K / group_size) = [0, ", groups, ") (one is not)"));
  if (bad & detail::kCkptBadCount)
    return Status::invalid_argument(
        "g_idx", str_cat("every group must hold exactly group_size = ", s.group_size,
                         " columns (the act-order permutation's precondition; one group does not)"));
  const bool act_order = (bad & detail::kCkptActOrder) != 0;
  if (act_order && dst.perm == nullptr)
    return Status::invalid_argument("dst.perm", "must not be null: g_idx is not k / group_size (act-order)");

  // 2. Unpack, permutation, repack.
  LLMK_RETURN_IF_ERROR(launch(detail::checkpoint_codes_kernel<>,
                              detail::ckpt_grid(static_cast<std::int64_t>(s.n) * ld), block, 0, stream, s,
                              plain, ld));
  LLMK_RETURN_IF_ERROR(launch(detail::checkpoint_quant_kernel<T>,
                              detail::ckpt_grid(static_cast<std::int64_t>(groups) * s.n), block, 0, stream, s,
                              dst.scales, dst.zeros));
  if (act_order) {
    std::size_t perm_bytes = detail::ckpt_perm_temp_bytes(src) - 12;
    LLMK_RETURN_IF_ERROR(act_order_permutation(detail::ckpt_perm_temp(base, src), &perm_bytes, s.g_idx, s.k,
                                               s.group_size, dst.perm, stream));
  }
  const WeightRepackArgs r{plain, ld, act_order ? dst.perm : nullptr, dst.w, s.n, s.k, s.bits, false};
  LLMK_RETURN_IF_ERROR(weight_only_repack(r, stream));
  if (info != nullptr) *info = {s.qzeros != nullptr, act_order};
  return {};
}

/// The weight half of weight_only_gemm's arguments after an import: w, w_bytes, scales, scales_size, zeros
/// and perm (as `info` says), n, k, group_size (GPTQ's -1 resolved to K) and bits. Set a, lda, d, ldd, m and
/// bias, and pass a workspace of weight_only_workspace_bytes(args) bytes when info.act_order.
///
///   llmk::gemm::WeightOnlyArgs<llmk::half> x = llmk::gemm::checkpoint_gemm_args(src, d_dst, info);
///   x.a = d_act;  x.lda = K;  x.d = d_out;  x.ldd = N;  x.m = M;
///   llmk::Status s = llmk::gemm::weight_only_gemm(x, d_ws, llmk::gemm::weight_only_workspace_bytes(x),
///   stream);
template <class T>
WeightOnlyArgs<T> checkpoint_gemm_args(const CheckpointTensors& src, const CheckpointImportOutput<T>& dst,
                                       const CheckpointImportInfo& info) {
  WeightOnlyArgs<T> x;
  const int g = detail::ckpt_group_size(src);
  const std::int64_t quant = g > 0 ? static_cast<std::int64_t>(src.k / g) * src.n : 0;
  x.w = dst.w;
  x.w_bytes = static_cast<std::int64_t>(weight_only_packed_bytes(src.n, src.k, src.bits));
  x.scales = dst.scales;
  x.scales_size = quant;
  if (info.zeros) {
    x.zeros = dst.zeros;
    x.zeros_size = quant;
  }
  if (info.act_order) {
    x.perm = dst.perm;
    x.perm_size = src.k;
  }
  x.n = src.n;
  x.k = src.k;
  x.group_size = g;
  x.bits = src.bits;
  return x;
}

// ---- export ----

/// The GPTQ zero-point convention to write: kV1 = checkpoint_format "gptq" (stores z - 1), kV2 = "gptq_v2".
enum class GptqExportFormat { kV1, kV2 };

/// GPTQ checkpoint tensors of one layer, owned (host memory), as export_gptq_host writes them. Save them
/// under the layer's prefix as qweight, qzeros, scales and g_idx (int32, int32, fp16, int32), with
/// quantize_config
/// {"bits", "group_size", "desc_act": act-order, "sym", "checkpoint_format": "gptq" / "gptq_v2"}.
///   llmk::gemm::GptqCheckpoint ckpt;   // after export_gptq_host
///   llmk::gemm::CheckpointTensors view = ckpt.tensors();   // import it back
struct GptqCheckpoint {
  CheckpointFormat format = CheckpointFormat::kGptqV1;  ///< kGptqV1 or kGptqV2
  int n = 0, k = 0, bits = 4, group_size = 0;
  std::vector<std::int32_t> qweight;  ///< [K * bits / 32, N]
  std::vector<std::int32_t> qzeros;   ///< [groups, N * bits / 32]
  std::vector<half> scales;           ///< [groups, N]
  std::vector<std::int32_t> g_idx;    ///< [K]

  /// A view of these tensors for import_checkpoint_host (valid while *this lives, unchanged).
  ///   // dst: a CheckpointImportOutput, as for import_checkpoint_host
  ///   llmk::gemm::CheckpointImportInfo info;
  ///   LLMK_RETURN_IF_ERROR(llmk::gemm::import_checkpoint_host(ckpt.tensors(), dst, &info));
  CheckpointTensors tensors() const {
    CheckpointTensors t;
    t.format = format;
    t.qweight = qweight.data();
    t.qzeros = qzeros.data();
    t.scales = scales.data();
    t.g_idx = g_idx.data();
    t.n = n;
    t.k = k;
    t.bits = bits;
    t.group_size = group_size;
    return t;
  }
};

/// Writes llmk's GPTQ / OBQ result as GPTQ checkpoint tensors (host): qweight packed along K, qzeros packed
/// along N (kV1: z - 1, kV2: z), scales rounded to fp16 (nearest even) and g_idx (layer.g_idx, or k / G when
/// empty). layer.zeros may be empty (symmetric: z = 2^(bits - 1)). Rules (invalid_argument naming
/// 'layer.<field>'): bits 2, 4 or 8 (3: Status::unsupported; the GEMM itself takes 4 and 8); cols and rows
/// multiples of 32 / bits (qweight packs K, qzeros packs N); group_size dividing cols with groups = cols /
/// group_size; every tensor of its documented size; codes and zeros <= 2^bits - 1; kV1: zeros >= 1 (v1 cannot
/// store z = 0: use kV2); g_idx in [0, groups); scales finite in fp16. Nothing is written on an error. The
/// vectors of `out` are resized (not cleared) and every element is then assigned.
///
///   llmk::obs::QuantizedLayer q;   // from llmk::obs::gptq_quantize (4-bit, group 128, act-order)
///   llmk::gemm::GptqCheckpoint ckpt;
///   llmk::Status s = llmk::gemm::export_gptq_host(q, llmk::gemm::GptqExportFormat::kV2, &ckpt);
///   // save ckpt.qweight / qzeros / scales / g_idx with "checkpoint_format": "gptq_v2"
inline Status export_gptq_host(const obs::QuantizedLayer& layer, GptqExportFormat format,
                               GptqCheckpoint* out) {
  if (out == nullptr) return Status::invalid_argument("out", "must not be null");
  if (format != GptqExportFormat::kV1 && format != GptqExportFormat::kV2)
    return Status::invalid_argument("format", "must be kV1 or kV2");
  const int bits = layer.bits;
  if (bits == 3)
    return Status::unsupported("bits=3 GPTQ export (3-bit fields straddle words; supported: 2, 4, 8)");
  if (bits != 2 && bits != 4 && bits != 8)
    return Status::invalid_argument("layer.bits", str_cat("must be 2, 4 or 8, got ", bits));
  const std::int64_t rows = layer.rows, cols = layer.cols, per = 32 / bits;
  const std::uint32_t mask = (1u << bits) - 1u;
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  if (rows < 1 || rows > kIntMax)
    return Status::invalid_argument("layer.rows", str_cat("must be in [1, 2^31), got ", rows));
  if (cols < 1 || cols > kIntMax)
    return Status::invalid_argument("layer.cols", str_cat("must be in [1, 2^31), got ", cols));
  if (cols % per != 0)
    return Status::invalid_argument(
        "layer.cols", str_cat("must be a multiple of 32 / bits = ", per, " (qweight packs ", per,
                              " rows of K a word), got ", cols));
  if (rows % per != 0)
    return Status::invalid_argument("layer.rows",
                                    str_cat("must be a multiple of 32 / bits = ", per, " (qzeros packs ", per,
                                            " columns a word), got ", rows));
  const std::int64_t g = layer.group_size;
  if (g < 1 || cols % g != 0)
    return Status::invalid_argument("layer.group_size",
                                    str_cat("must divide cols (cols=", cols, ", group_size=", g, ")"));
  const std::int64_t groups = cols / g;
  if (layer.groups != groups)
    return Status::invalid_argument(
        "layer.groups", str_cat("must equal cols / group_size = ", groups, ", got ", layer.groups));
  if (static_cast<std::int64_t>(layer.codes.size()) != rows * cols)
    return Status::invalid_argument(
        "layer.codes", str_cat("must hold rows * cols = ", rows * cols, " codes, got ", layer.codes.size()));
  if (static_cast<std::int64_t>(layer.scales.size()) != groups * rows)
    return Status::invalid_argument("layer.scales", str_cat("must hold groups * rows = ", groups * rows,
                                                            " scales, got ", layer.scales.size()));
  if (!layer.zeros.empty() && static_cast<std::int64_t>(layer.zeros.size()) != groups * rows)
    return Status::invalid_argument(
        "layer.zeros", str_cat("must be empty or hold groups * rows = ", groups * rows, " zero points, got ",
                               layer.zeros.size()));
  if (!layer.g_idx.empty() && static_cast<std::int64_t>(layer.g_idx.size()) != cols)
    return Status::invalid_argument(
        "layer.g_idx", str_cat("must be empty or hold cols = ", cols, " entries, got ", layer.g_idx.size()));
  for (std::size_t i = 0; i < layer.codes.size(); ++i)
    if (layer.codes[i] > mask)
      return Status::invalid_argument("layer.codes", str_cat("must be <= 2^bits - 1 = ", mask, "; codes[", i,
                                                             "] = ", int(layer.codes[i])));
  for (std::size_t i = 0; i < layer.scales.size(); ++i) {
    const float h = half(layer.scales[i]).to_float();
    if (!std::isfinite(layer.scales[i]) || !std::isfinite(h))
      return Status::invalid_argument(
          "layer.scales",
          str_cat("must be finite in fp16 (|s| <= 65504); scales[", i, "] = ", layer.scales[i]));
  }
  for (std::size_t i = 0; i < layer.zeros.size(); ++i) {
    const std::uint32_t z = layer.zeros[i];
    if (z > mask)
      return Status::invalid_argument("layer.zeros",
                                      str_cat("must be <= 2^bits - 1 = ", mask, "; zeros[", i, "] = ", z));
    if (format == GptqExportFormat::kV1 && z == 0)
      return Status::invalid_argument(
          "layer.zeros",
          str_cat("must be >= 1 for GPTQ v1, which stores z - 1 (zeros[", i, "] = 0: group ",
                  static_cast<std::int64_t>(i) / rows, ", row ", static_cast<std::int64_t>(i) % rows,
                  "); export GptqExportFormat::kV2 instead"));
  }
  for (std::size_t i = 0; i < layer.g_idx.size(); ++i)
    if (layer.g_idx[i] < 0 || layer.g_idx[i] >= groups)
      return Status::invalid_argument("layer.g_idx", str_cat("entries must be in [0, groups) = [0, ", groups,
                                                             "), g_idx[", i, "] = ", layer.g_idx[i]));

  out->format = format == GptqExportFormat::kV1 ? CheckpointFormat::kGptqV1 : CheckpointFormat::kGptqV2;
  out->n = static_cast<int>(rows);
  out->k = static_cast<int>(cols);
  out->bits = bits;
  out->group_size = static_cast<int>(g);
  out->qweight.resize(static_cast<std::size_t>(cols / per * rows));
  out->qzeros.resize(static_cast<std::size_t>(groups * (rows / per)));
  out->scales.resize(static_cast<std::size_t>(groups * rows));
  out->g_idx.resize(static_cast<std::size_t>(cols));
  for (std::int64_t i = 0; i < cols / per; ++i)  // word (i, n): codes of k = per * i + j at bits * j
    for (std::int64_t n = 0; n < rows; ++n) {
      std::uint32_t word = 0;
      for (std::int64_t j = 0; j < per; ++j)
        word |= static_cast<std::uint32_t>(layer.codes[static_cast<std::size_t>(n * cols + per * i + j)])
                << (bits * j);
      out->qweight[static_cast<std::size_t>(i * rows + n)] = static_cast<std::int32_t>(word);
    }
  const std::uint32_t default_zero = 1u << (bits - 1);
  const std::uint32_t offset = format == GptqExportFormat::kV1 ? 1u : 0u;
  for (std::int64_t gi = 0; gi < groups; ++gi)
    for (std::int64_t c = 0; c < rows / per; ++c) {  // word (g, c): zeros of n = per * c + j at bits * j
      std::uint32_t word = 0;
      for (std::int64_t j = 0; j < per; ++j) {
        const std::size_t zi = static_cast<std::size_t>(gi * rows + per * c + j);
        const std::uint32_t z = layer.zeros.empty() ? default_zero : layer.zeros[zi];
        word |= (z - offset) << (bits * j);
      }
      out->qzeros[static_cast<std::size_t>(gi * (rows / per) + c)] = static_cast<std::int32_t>(word);
    }
  for (std::size_t i = 0; i < layer.scales.size(); ++i) out->scales[i] = half(layer.scales[i]);
  for (std::int64_t k = 0; k < cols; ++k)
    out->g_idx[static_cast<std::size_t>(k)] =
        layer.g_idx.empty() ? static_cast<std::int32_t>(k / g) : layer.g_idx[static_cast<std::size_t>(k)];
  return {};
}

}  // namespace llmk::gemm
