// llmk/reference/outliers.hpp: host references of llmk/quant/reduce_columns.cuh and llmk/quant/outliers.cuh,
// written as the plain loops of their definitions. Tensors are row-major with row strides in elements.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "llmk/core/numeric.cuh"

namespace llmk::reference {

namespace detail {
template <class T>
float outlier_ref_load(T v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return static_cast<float>(v);
}
}  // namespace detail

/// amax[j] = max over rows of |x[r, j]| over the finite values (0 when none).
///   std::vector<float> amax(cols);
///   llmk::reference::column_amax(x.data(), ld, rows, cols, amax.data());
template <class In>
void column_amax(const In* x, std::int64_t ldx, std::int64_t rows, std::int64_t cols, float* amax) {
  for (std::int64_t j = 0; j < cols; ++j) {
    float m = 0.0f;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float v = detail::outlier_ref_load(x[r * ldx + j]);
      if (std::isfinite(v) && std::fabs(v) > m) m = std::fabs(v);
    }
    amax[j] = m;
  }
}

/// The sorted columns j with |x[r, j]| >= threshold for some r (NaN never counts, +-Inf does).
///   std::vector<std::int32_t> cols = llmk::reference::outlier_columns(x.data(), K, M, K, 6.0f);
template <class In>
std::vector<std::int32_t> outlier_columns(const In* x, std::int64_t ldx, std::int64_t rows, std::int64_t cols,
                                          float threshold) {
  std::vector<std::int32_t> out;
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t r = 0; r < rows; ++r)
      if (std::fabs(detail::outlier_ref_load(x[r * ldx + j])) >= threshold) {  // false for NaN
        out.push_back(static_cast<std::int32_t>(j));
        break;
      }
  return out;
}

/// regular = x with the listed columns set to +0 (other elements bit-copied);
/// outlier[r, o] = x[r, cols_list[o]] for o < n_out and 0 for n_out <= o < ld_outlier.
///   llmk::reference::split_outlier_columns(x.data(), K, M, K, idx.data(), n, reg.data(), K, out.data(),
///                                          ld_out);
template <class T>
void split_outlier_columns(const T* x, std::int64_t ldx, std::int64_t rows, std::int64_t cols,
                           const std::int32_t* outlier_cols, int n_out, T* regular, std::int64_t ld_regular,
                           T* outlier, std::int64_t ld_outlier) {
  std::vector<bool> is_outlier(static_cast<std::size_t>(cols), false);
  for (int o = 0; o < n_out; ++o)
    if (outlier_cols[o] >= 0 && outlier_cols[o] < cols)
      is_outlier[static_cast<std::size_t>(outlier_cols[o])] = true;
  const T zero = T(0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < cols; ++j)
      regular[r * ld_regular + j] = is_outlier[static_cast<std::size_t>(j)] ? zero : x[r * ldx + j];
    for (std::int64_t o = 0; o < ld_outlier; ++o) {
      const bool valid = o < n_out && outlier_cols[o] >= 0 && outlier_cols[o] < cols;
      outlier[r * ld_outlier + o] = valid ? x[r * ldx + outlier_cols[o]] : zero;
    }
  }
}

}  // namespace llmk::reference
