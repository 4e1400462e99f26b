// llmk/reference/quant.hpp: host references of the quantization kernels (llmk/quant/kernels.cuh).
//
// Simple loops over exactly the scheme functions the kernels call (llmk/quant/scheme.cuh), so a kernel and
// its reference agree bit for bit. Same layouts and argument meanings as the kernels (strides in elements for
// float/half/bfloat16 tensors, in bytes for quantized storage; scales [1], [rows] or [rows][cols /
// group_size]). Preconditions (shapes, strides, group_size dividing cols) are the caller's: these functions
// do not validate. Bytes between a row and its stride are never written.
//
//   using Q = llmk::quant::Quantizer<int8_t, llmk::quant::Symmetric, llmk::quant::PerToken>;
//   std::vector<std::uint8_t> q(rows * cols);
//   std::vector<float> scales(rows);
//   llmk::reference::quantize_dynamic<Q>(x.data(), cols, q.data(), cols, rows, cols, scales.data(),
//                                        nullptr, 0);
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "llmk/core/numeric.cuh"
#include "llmk/quant/scheme.cuh"

namespace llmk::reference {

namespace quant_detail {

// Parameter index layout of Q's granularity: index(r, c) = r * per_row + c / group.
template <class Q>
struct ParamLayout {
  std::int64_t per_row;
  int group;
  ParamLayout(int cols, int group_size) {
    using G = typename Q::granularity;
    if constexpr (std::is_same_v<G, llmk::quant::PerTensor>) {
      per_row = 0;
      group = cols > 0 ? cols : 1;
    } else if constexpr (llmk::quant::kPerRow<G>) {
      per_row = 1;
      group = cols > 0 ? cols : 1;
    } else {
      per_row = cols / group_size;
      group = group_size;
    }
  }
  std::int64_t index(std::int64_t r, std::int64_t c) const { return r * per_row + c / group; }
};

template <class Q>
std::uint32_t code_bits(typename Q::Code code) {
  if constexpr (Q::kIsFloat)
    return code.bits;
  else
    return static_cast<std::uint32_t>(code) & (Q::traits::kPacked ? 0xFu : 0xFFu);
}

template <class Q>
typename Q::Code code_at(const std::uint8_t* row, std::int64_t c) {
  using S = typename Q::storage_type;
  if constexpr (Q::kIsFloat) {
    return S::from_bits(row[c]);
  } else if constexpr (Q::traits::kPacked) {
    const int nibble = (row[c / 2] >> (4 * (c % 2))) & 0xF;
    return Q::traits::kSigned ? (nibble >= 8 ? nibble - 16 : nibble) : nibble;
  } else {
    return Q::traits::kSigned ? static_cast<int>(static_cast<std::int8_t>(row[c])) : static_cast<int>(row[c]);
  }
}

}  // namespace quant_detail

/// The finite range of n elements read with a stride: min and max over finite values (0, 0 when there are
/// none).
///   float lo, hi;
///   llmk::reference::finite_min_max(w.data() + c, rows, /*stride=*/cols, &lo, &hi);   // column c
template <class In>
void finite_min_max(const In* x, std::int64_t n, std::int64_t stride, float* min_out, float* max_out) {
  bool any = false;
  float lo = 0.0f, hi = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = llmk::quant::load_as_float(x[i * stride]);
    if (!std::isfinite(v)) continue;
    if (!any || v < lo) lo = v;
    if (!any || v > hi) hi = v;
    any = true;
  }
  *min_out = lo;
  *max_out = hi;
}

/// max |x| over the finite elements (0 when there are none):  float a = llmk::reference::finite_amax(x, n);
template <class In>
float finite_amax(const In* x, std::int64_t n) {
  float amax = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = llmk::quant::load_as_float(x[i]);
    if (std::isfinite(v)) amax = std::fmax(amax, std::fabs(v));
  }
  return amax;
}

/// The parameters dynamic quantization computes for a group of values (symmetric and fp8: finite amax;
/// asymmetric: finite min and max).
///   const llmk::quant::QuantParams p = llmk::reference::params_for<Q>(row, cols);
template <class Q, class In>
llmk::quant::QuantParams params_for(const In* x, std::int64_t n) {
  if constexpr (Q::kAsymmetric) {
    float lo, hi;
    finite_min_max(x, n, 1, &lo, &hi);
    return Q::params_from_range(lo, hi);
  } else {
    return Q::params_from_absmax(finite_amax(x, n));
  }
}

/// Static quantization with the given parameters (the reference of llmk::quant::quantize, its arguments
/// without the stream):
///   llmk::reference::quantize<Q>(w.data(), in, q.data(), in, out, in, scales.data(), nullptr, 0);
template <class Q, class In>
void quantize(const In* x, std::int64_t ldx, void* q, std::int64_t ldq_bytes, int rows, int cols,
              const float* scales, const std::int32_t* zero_points, int group_size) {
  const quant_detail::ParamLayout<Q> layout(cols, group_size);
  auto* qb = static_cast<std::uint8_t*>(q);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::uint8_t* row = qb + r * ldq_bytes;
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t i = layout.index(r, c);
      const llmk::quant::QuantParams p{scales[i], Q::kAsymmetric ? zero_points[i] : 0};
      const std::uint32_t bits =
          quant_detail::code_bits<Q>(Q::quantize(llmk::quant::load_as_float(x[r * ldx + c]), p));
      if constexpr (Q::traits::kPacked) {
        std::uint8_t& byte = row[c / 2];
        if (c % 2 == 0)
          byte = static_cast<std::uint8_t>(bits);  // the high nibble: the next element, or 0 padding
        else
          byte = static_cast<std::uint8_t>((byte & 0x0Fu) | (bits << 4));
      } else {
        row[c] = static_cast<std::uint8_t>(bits);
      }
    }
  }
}

/// Dynamic quantization (the reference of llmk::quant::quantize_dynamic): per group, the parameters from the
/// finite range, then quantize. Writes scales_out (and zero_points_out when Asymmetric) in Q's layout.
/// Example: the file comment.
template <class Q, class In>
void quantize_dynamic(const In* x, std::int64_t ldx, void* q, std::int64_t ldq_bytes, int rows, int cols,
                      float* scales_out, std::int32_t* zero_points_out, int group_size) {
  if (rows == 0 || cols == 0) return;
  using G = typename Q::granularity;
  const quant_detail::ParamLayout<Q> layout(cols, group_size);
  if constexpr (std::is_same_v<G, llmk::quant::PerTensor>) {
    // The whole tensor is one group: gather the finite range over the rows.
    bool any = false;
    float lo = 0.0f, hi = 0.0f, amax = 0.0f;
    for (std::int64_t r = 0; r < rows; ++r) {
      float rlo, rhi;
      finite_min_max(x + r * ldx, cols, 1, &rlo, &rhi);
      const float ramax = finite_amax(x + r * ldx, cols);
      amax = std::fmax(amax, ramax);
      lo = any ? std::fmin(lo, rlo) : rlo;
      hi = any ? std::fmax(hi, rhi) : rhi;
      any = true;
    }
    llmk::quant::QuantParams p;
    if constexpr (Q::kAsymmetric)
      p = Q::params_from_range(lo, hi);
    else
      p = Q::params_from_absmax(amax);
    scales_out[0] = p.scale;
    if constexpr (Q::kAsymmetric) zero_points_out[0] = p.zero_point;
  } else {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t g = 0; g < layout.per_row; ++g) {
        const llmk::quant::QuantParams p = params_for<Q>(x + r * ldx + g * layout.group, layout.group);
        scales_out[r * layout.per_row + g] = p.scale;
        if constexpr (Q::kAsymmetric) zero_points_out[r * layout.per_row + g] = p.zero_point;
      }
  }
  quantize<Q>(x, ldx, q, ldq_bytes, rows, cols, scales_out, zero_points_out, group_size);
}

/// Dequantization (the reference of llmk::quant::dequantize): y = (code - zero_point) * scale, converted to
/// Out.
///   llmk::reference::dequantize<Q>(q.data(), cols, y.data(), cols, rows, cols, scales.data(), nullptr, 0);
template <class Q, class Out>
void dequantize(const void* q, std::int64_t ldq_bytes, Out* y, std::int64_t ldy, int rows, int cols,
                const float* scales, const std::int32_t* zero_points, int group_size) {
  const quant_detail::ParamLayout<Q> layout(cols, group_size);
  const auto* qb = static_cast<const std::uint8_t*>(q);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t i = layout.index(r, c);
      const llmk::quant::QuantParams p{scales[i], Q::kAsymmetric ? zero_points[i] : 0};
      y[r * ldy + c] =
          llmk::quant::convert_output<Out>(Q::dequantize(quant_detail::code_at<Q>(qb + r * ldq_bytes, c), p));
    }
}

/// amax_out[r] = max |x[r][:]| over finite elements (the reference of llmk::quant::row_amax).
///   llmk::reference::row_amax(w.data(), in, out, in, amax.data());
template <class In>
void row_amax(const In* x, std::int64_t ldx, int rows, int cols, float* amax_out) {
  for (std::int64_t r = 0; r < rows; ++r) amax_out[r] = finite_amax(x + r * ldx, cols);
}

/// max |x| over the finite elements of the tensor (the reference of llmk::quant::tensor_amax).
///   float amax = llmk::reference::tensor_amax(x.data(), cols, rows, cols);
template <class In>
float tensor_amax(const In* x, std::int64_t ldx, int rows, int cols) {
  float amax = 0.0f;
  for (std::int64_t r = 0; r < rows; ++r) amax = std::fmax(amax, finite_amax(x + r * ldx, cols));
  return amax;
}

/// Packs codes two per byte, saturating to [-8, 7] (S = int4_t, int8_t codes) or [0, 15] (S = uint4_t,
/// uint8_t codes); element 2i in the low nibble of byte i, an odd row's last high nibble 0.
///   llmk::reference::pack_int4<llmk::int4_t>(codes.data(), cols, packed.data(), (cols + 1) / 2, rows, cols);
template <class S, class Code>
void pack_int4(const Code* codes, std::int64_t ld_codes, std::uint8_t* packed, std::int64_t ld_packed_bytes,
               int rows, int cols) {
  constexpr bool kSigned = std::is_same_v<S, llmk::int4_t>;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t b = 0; b < (cols + 1) / 2; ++b) {
      int v[2] = {0, 0};
      for (int k = 0; k < 2; ++k) {
        if (2 * b + k >= cols) continue;
        const int raw = static_cast<int>(codes[r * ld_codes + 2 * b + k]);
        v[k] = kSigned ? std::clamp(raw, -8, 7) : std::clamp(raw, 0, 15);
      }
      packed[r * ld_packed_bytes + b] = static_cast<std::uint8_t>((v[0] & 0xF) | ((v[1] & 0xF) << 4));
    }
}

/// Unpacks nibbles to codes (int4: sign-extended; uint4: [0, 15]); an odd row's padding nibble is ignored.
///   llmk::reference::unpack_int4<llmk::int4_t>(packed.data(), ld_packed, codes.data(), cols, rows, cols);
template <class S, class Code>
void unpack_int4(const std::uint8_t* packed, std::int64_t ld_packed_bytes, Code* codes, std::int64_t ld_codes,
                 int rows, int cols) {
  constexpr bool kSigned = std::is_same_v<S, llmk::int4_t>;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const int nibble = (packed[r * ld_packed_bytes + c / 2] >> (4 * (c % 2))) & 0xF;
      codes[r * ld_codes + c] = static_cast<Code>(kSigned && nibble >= 8 ? nibble - 16 : nibble);
    }
}

}  // namespace llmk::reference
