// llmk/obs/layer_args.hpp: the layer every host algorithm (OBS, OBQ, GPTQ, SparseGPT, Wanda, magnitude)
// takes, W [rows, cols] and its Hessian H [cols, cols] (detail::LayerArgs), and what they all do with it: the
// argument checks (validate_weights, validate_layer), the dense working copies with the dead columns fixed
// (dense_copies) and the reported loss 1/2 tr((W - Q) H (W - Q)^T) (layer_loss). All in llmk::obs::detail.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "llmk/core/status.cuh"
#include "llmk/obs/hessian.cuh"
#include "llmk/obs/linalg.hpp"

namespace llmk::obs {

namespace detail {

struct LayerArgs {
  const float* w;
  std::int64_t rows, cols, ldw;
  const float* h;
  std::int64_t ldh;
};

// The weight half of validate_layer (magnitude pruning needs no Hessian).
inline Status validate_weights(const float* w, std::int64_t rows, std::int64_t cols, std::int64_t ldw) {
  if (rows < 1) return Status::invalid_argument("rows", str_cat("must be >= 1, got ", rows));
  if (cols < 1) return Status::invalid_argument("cols", str_cat("must be >= 1, got ", cols));
  if (w == nullptr) return Status::invalid_argument("w", "must not be null");
  if (ldw < cols)
    return Status::invalid_argument("ldw", str_cat("must be >= cols (cols=", cols, ", ldw=", ldw, ")"));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      if (!std::isfinite(w[r * ldw + c]))
        return Status::invalid_argument("w",
                                        str_cat("must be finite; w[", r, ", ", c, "] = ", w[r * ldw + c]));
  return {};
}

inline Status validate_layer(const LayerArgs& a) {
  LLMK_RETURN_IF_ERROR(validate_weights(a.w, a.rows, a.cols, a.ldw));
  if (a.cols > std::numeric_limits<int>::max())  // before any cols^2 buffer: LAPACK/BLAS take 32-bit sizes
    return Status::invalid_argument("cols",
                                    str_cat("must be < 2^31 (the backend's sizes are 32-bit), got ", a.cols));
  if (a.h == nullptr) return Status::invalid_argument("h", "must not be null");
  if (a.ldh < a.cols)
    return Status::invalid_argument(
        "ldh", str_cat("must be >= cols (the Hessian is [cols, cols]; cols=", a.cols, ", ldh=", a.ldh, ")"));
  for (std::int64_t i = 0; i < a.cols; ++i)
    for (std::int64_t j = 0; j < a.cols; ++j)
      if (!std::isfinite(a.h[i * a.ldh + j]))
        return Status::invalid_argument(
            "h", str_cat("must be finite; h[", i, ", ", j, "] = ", a.h[i * a.ldh + j]));
  for (std::int64_t i = 0; i < a.cols; ++i)
    if (a.h[i * a.ldh + i] < 0.0f)
      return Status::invalid_argument(
          "h", str_cat("must have a non-negative diagonal; h[", i, ", ", i, "] = ", a.h[i * a.ldh + i]));
  return {};
}

// Dense copies of W and H with the dead columns fixed.
inline void dense_copies(const LayerArgs& a, std::vector<float>& w, std::vector<float>& h,
                         std::int64_t* dead) {
  w.resize(static_cast<std::size_t>(a.rows * a.cols));
  h.resize(static_cast<std::size_t>(a.cols * a.cols));
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t c = 0; c < a.cols; ++c)
      w[static_cast<std::size_t>(r * a.cols + c)] = a.w[r * a.ldw + c];
  // The symmetric part (H + H^T) / 2: the objective 1/2 e H e^T only sees it, and the factorizations read one
  // triangle, so a slightly asymmetric H (accumulated elsewhere) is used consistently everywhere.
  for (std::int64_t i = 0; i < a.cols; ++i)
    for (std::int64_t j = 0; j < a.cols; ++j)
      h[static_cast<std::size_t>(i * a.cols + j)] = 0.5f * (a.h[i * a.ldh + j] + a.h[j * a.ldh + i]);
  (void)fix_dead_columns(h.data(), a.cols, a.cols, w.data(), a.rows, a.cols, dead);  // validated already
}

// 1/2 tr(E H E^T), E = W - Q (both [rows, cols] dense; W read through ldw), through the backend's GEMM.
inline Status layer_loss(const LayerArgs& a, const std::vector<float>& q, LinalgBackend& la, double* loss) {
  std::vector<float> e(static_cast<std::size_t>(a.rows * a.cols)), eh(e.size());
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t c = 0; c < a.cols; ++c)
      e[static_cast<std::size_t>(r * a.cols + c)] =
          a.w[r * a.ldw + c] - q[static_cast<std::size_t>(r * a.cols + c)];
  LLMK_RETURN_IF_ERROR(la.gemm(Op::kNone, Op::kNone, a.rows, a.cols, a.cols, 1.0f, e.data(), a.cols, a.h,
                               a.ldh, 0.0f, eh.data(), a.cols));
  double s = 0.0;
  for (std::size_t i = 0; i < e.size(); ++i) s += static_cast<double>(e[i]) * eh[i];
  *loss = 0.5 * s;
  return {};
}

}  // namespace detail

}  // namespace llmk::obs
