// llmk/obs/quantized_layer.hpp: the quantized-layer format OBQ and GPTQ write (QuantizedLayer: codes, scales
// and zero points in the weight-only GEMM's layout, with the loss, the damping report and the timings) and
// pack_plain_codes, which turns its codes into the GEMM repack's plain input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "llmk/core/status.cuh"
#include "llmk/obs/damped_inverse.hpp"
#include "llmk/obs/quantizer.hpp"
#include "llmk/obs/timings.hpp"

namespace llmk::obs {

/// A quantized weight [rows = N, cols = K] in the format of llmk/gemm/weight_only.cuh (and its host reference
/// llmk/reference/weight_only.hpp): dequantized w[n, k] = scales[g, n] * (codes[n, k] - zeros[g, n]) with
/// g = g_idx[k]. codes are unsigned, one per byte, in the ORIGINAL column order; pack_plain_codes() makes the
/// repack's plain input; act_order_permutation(g_idx) gives the GEMM's perm.
///   std::vector<std::uint8_t> plain;
///   llmk::throw_if_error(llmk::obs::pack_plain_codes(layer, &plain));  // 4-bit: two codes a byte
struct QuantizedLayer {
  std::int64_t rows = 0, cols = 0;
  int bits = 4;
  bool symmetric = true;
  SymmetricGrid symmetric_grid = SymmetricGrid::kFullRange;  ///< which symmetric grid (symmetric only)
  std::int64_t group_size = 0;                               ///< columns per group (cols for per-channel)
  std::int64_t groups = 0;                                   ///< cols / group_size
  std::vector<std::uint8_t> codes;                           ///< [rows, cols] unsigned codes u
  std::vector<float> scales;        ///< [groups, rows] (GPTQ's layout): group g of row n at g * rows + n
  std::vector<std::uint8_t> zeros;  ///< [groups, rows] zero-point codes (symmetric: 2^(bits-1))
  std::vector<std::int32_t> g_idx;  ///< [cols] group of each column
  std::vector<std::int32_t> order;  ///< [cols] the processing order (order[i] = original column); act-order
  std::vector<float> dequantized;   ///< [rows, cols] s * (u - z) in fp32, original column order
  double loss = 0.0;  ///< 1/2 tr((W - Q) H (W - Q)^T), H the Hessian given (undamped) = ||(W - Q) X||^2 / n
  double loss_estimate = 0.0;  ///< the algorithm's own sum of saliencies (the objective with the damped H)
  DampingReport damping;
  ObsTimings timings;  ///< where the time went (GPTQ, SparseGPT; OBQ: inverse, column_loop, loss)
};

/// The repack's plain input (llmk::gemm::WeightRepackArgs::w, ld_bytes = ceil(cols / 2) or cols): 4-bit codes
/// two a byte (element 2i in the low nibble), 8-bit one a byte. 2- and 3-bit layers have no GEMM yet.
///   std::vector<std::uint8_t> plain;
///   llmk::Status s = llmk::obs::pack_plain_codes(layer, &plain);
inline Status pack_plain_codes(const QuantizedLayer& layer, std::vector<std::uint8_t>* plain) {
  if (plain == nullptr) return Status::invalid_argument("plain", "must not be null");
  if (layer.bits != 4 && layer.bits != 8)
    return Status::unsupported(str_cat("bits=", layer.bits, " for the weight-only GEMM (supported: 4, 8)"));
  if (static_cast<std::int64_t>(layer.codes.size()) != layer.rows * layer.cols)
    return Status::invalid_argument("layer", "codes must hold rows * cols elements");
  if (layer.bits == 8) {
    *plain = layer.codes;
    return {};
  }
  const std::int64_t ld = (layer.cols + 1) / 2;
  plain->assign(static_cast<std::size_t>(layer.rows * ld), 0);
  for (std::int64_t r = 0; r < layer.rows; ++r)
    for (std::int64_t c = 0; c < layer.cols; ++c)
      (*plain)[static_cast<std::size_t>(r * ld + c / 2)] |= static_cast<std::uint8_t>(
          (layer.codes[static_cast<std::size_t>(r * layer.cols + c)] & 0xF) << (4 * (c % 2)));
  return {};
}

}  // namespace llmk::obs
