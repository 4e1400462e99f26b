// llmk/gemm/checkpoint_export.cuh: export_gptq_host, which writes llmk's own GPTQ result
// (llmk::obs::QuantizedLayer) as GPTQ checkpoint tensors (GptqCheckpoint, v1 or v2 zero points: see the top
// of llmk/gemm/checkpoint.cuh), ready to be saved or imported back.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "llmk/config.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/status.cuh"
#include "llmk/gemm/checkpoint_format.cuh"
#include "llmk/obs/obs.hpp"

namespace llmk::gemm {

/// The GPTQ zero-point convention to write: kV1 = checkpoint_format "gptq" (stores z - 1), kV2 = "gptq_v2"
/// (example: export_gptq_host).
enum class GptqExportFormat { kV1, kV2 };

/// GPTQ checkpoint tensors of one layer, owned (host memory), as export_gptq_host writes them. Save them
/// under the layer's prefix as qweight, qzeros, scales and g_idx (int32, int32, fp16, int32), with
/// quantize_config {"bits", "group_size", "desc_act": act-order, "sym", "checkpoint_format": "gptq" /
/// "gptq_v2"}.
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
