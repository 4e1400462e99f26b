// llmk/quant/reduce_columns.cuh: per-column absmax of a row-major [rows, cols] tensor (float, half,
// bfloat16).
//
//   amax[j] = max over rows r of |x[r, j]|, skipping NaN and +-Inf (0 for a column with nothing finite)
//
// This is the activation statistic SmoothQuant needs (max|X_j| per input channel, over calibration tokens)
// and the first half of the LLM.int8() outlier detection (llmk/quant/outliers.cuh).
//
// Kernel: blocks of 32 x 8 threads. A block owns a tile of 32 * V columns (V = 16 / sizeof(In): 4 floats or 8
// halves, one 16-byte vector per lane) and a slab of up to kColumnRowsPerBlock rows; the 8 row groups stride
// through the slab with 16-byte vector loads (scalar loads for the last partial vector of a row, or
// everywhere when x or its row stride is not 16-byte aligned), combine through shared memory, and fold the
// slab's maxima into the output with atomicMax on the float bit patterns (non-negative floats order like
// their bits). The result is deterministic: max is exact and order independent. A first tiny kernel sets the
// output to 0.
#pragma once

#include <cstdint>
#include <type_traits>

#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"
#include "llmk/core/vector.cuh"
#include "llmk/quant/scheme.cuh"

namespace llmk::quant {

/// Rows one block of column_amax reduces (the grid's y extent is ceil(rows / this), grown for huge row
/// counts).
inline constexpr std::int64_t kColumnRowsPerBlock = 128;

namespace detail {

inline constexpr int kColumnLanes = 32, kColumnRowGroups = 8;

template <class In>
inline constexpr int kColumnVector = static_cast<int>(16 / sizeof(In));

template <class In>
inline constexpr bool kColumnInput =
    std::is_same_v<In, float> || std::is_same_v<In, half> || std::is_same_v<In, bfloat16>;

struct ColumnReduceSmem {
  float partial[kColumnRowGroups][kColumnLanes * 8];  // [row group][column of the tile], V <= 8
};

template <class In>
struct ColumnReduceParams {
  const In* x;
  std::int64_t ldx, rows, cols, rows_per_block;
  unsigned* out_bits;  // float bit patterns, combined with atomicMax
  bool vectorized;     // x and ldx allow 16-byte loads
};

// |v| for the reduction: kKeepInf = false skips NaN and +-Inf (contribute 0); true skips only NaN (+-Inf
// contribute +Inf, which is what "any |x| >= threshold" needs).
template <bool kKeepInf>
LLMK_DEVICE float reduce_abs(float v) {
  if constexpr (kKeepInf)
    return is_nan(v) ? 0.0f : fabs_f(v);
  else
    return is_finite(v) ? fabs_f(v) : 0.0f;
}

/// out[i] = value for i < count.
template <int kUnused = 0>  // inline linkage (a plain kernel in a header is defined in every TU)
__global__ void __launch_bounds__(256) fill_u32_kernel(unsigned* out, std::int64_t count, unsigned value) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    out[i] = value;
}

template <class In, bool kKeepInf>
__global__ void __launch_bounds__(kColumnLanes* kColumnRowGroups)
    column_absmax_kernel(ColumnReduceParams<In> p) {
  constexpr int V = kColumnVector<In>;
  constexpr int kTileCols = kColumnLanes * V;
  auto& smem = shared_storage<ColumnReduceSmem>();
  const int lane = static_cast<int>(threadIdx.x), group = static_cast<int>(threadIdx.y);
  const std::int64_t tile0 = static_cast<std::int64_t>(blockIdx.x) * kTileCols;
  const std::int64_t c0 = tile0 + lane * V;
  const std::int64_t r_begin = static_cast<std::int64_t>(blockIdx.y) * p.rows_per_block;
  const std::int64_t r_end = r_begin + p.rows_per_block < p.rows ? r_begin + p.rows_per_block : p.rows;

  float m[V];
#pragma unroll
  for (int e = 0; e < V; ++e) m[e] = 0.0f;
  if (c0 < p.cols) {
    const bool full = p.vectorized && c0 + V <= p.cols;
    for (std::int64_t r = r_begin + group; r < r_end; r += kColumnRowGroups) {
      const In* src = p.x + r * p.ldx + c0;
      if (full) {
        const Vector16<In> v = load16(src);
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const float a = reduce_abs<kKeepInf>(load_as_float(v.elements[e]));
          m[e] = a > m[e] ? a : m[e];
        }
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e)
          if (c0 + e < p.cols) {
            const float a = reduce_abs<kKeepInf>(load_as_float(src[e]));
            m[e] = a > m[e] ? a : m[e];
          }
      }
    }
  }
#pragma unroll
  for (int e = 0; e < V; ++e) smem.partial[group][lane * V + e] = m[e];
  __syncthreads();
  const int t = group * kColumnLanes + lane;
  if (t < kTileCols && tile0 + t < p.cols) {
    float best = 0.0f;
#pragma unroll
    for (int g = 0; g < kColumnRowGroups; ++g) best = smem.partial[g][t] > best ? smem.partial[g][t] : best;
    if (best > 0.0f) atomicMax(p.out_bits + tile0 + t, __float_as_uint(best));
  }
}

template <class In>
Status check_columns_view(const In* x, std::int64_t ldx, std::int64_t rows, std::int64_t cols) {
  if (rows < 0) return Status::invalid_argument("rows", str_cat("must be >= 0, got ", rows));
  if (cols < 0) return Status::invalid_argument("cols", str_cat("must be >= 0, got ", cols));
  if (ldx < cols)
    return Status::invalid_argument("ldx", str_cat("must be >= cols (cols=", cols, ", ldx=", ldx, ")"));
  if (x == nullptr && rows > 0 && cols > 0) return Status::invalid_argument("x", "must not be null");
  return check_element_alignment<In>("x", x);
}

// Sets out_bits[0 .. cols) to 0 and, when rows > 0, max-combines |x| into it (as float bits).
template <class In, bool kKeepInf>
Status launch_column_absmax(const In* x, std::int64_t ldx, std::int64_t rows, std::int64_t cols,
                            unsigned* out_bits, cudaStream_t stream) {
  const std::int64_t fill_blocks = ceil_div<std::int64_t>(cols, 256);
  LLMK_RETURN_IF_ERROR(launch(fill_u32_kernel<>,
                              dim3(static_cast<unsigned>(fill_blocks < 4096 ? fill_blocks : 4096)), dim3(256),
                              0, stream, out_bits, cols, 0u));
  if (rows == 0) return {};
  constexpr int kTileCols = kColumnLanes * kColumnVector<In>;
  std::int64_t rows_per_block = kColumnRowsPerBlock;
  if (ceil_div<std::int64_t>(rows, rows_per_block) > 65535)
    rows_per_block = round_up<std::int64_t>(ceil_div<std::int64_t>(rows, 65535), kColumnRowGroups);
  const bool vectorized = is_aligned(x, 16) && (ldx * static_cast<std::int64_t>(sizeof(In))) % 16 == 0;
  ColumnReduceParams<In> p{x, ldx, rows, cols, rows_per_block, out_bits, vectorized};
  return launch(column_absmax_kernel<In, kKeepInf>,
                dim3(static_cast<unsigned>(ceil_div<std::int64_t>(cols, kTileCols)),
                     static_cast<unsigned>(ceil_div<std::int64_t>(rows, rows_per_block))),
                dim3(kColumnLanes, kColumnRowGroups), sizeof(ColumnReduceSmem), stream, p);
}

}  // namespace detail

/// amax_out[j] = max_r |x[r, j]| over the finite values of column j of x [rows, cols] (row stride ldx
/// elements), 0 for a column without a finite non-zero value (also when rows == 0). In = float, llmk::half,
/// llmk::bfloat16. Deterministic. 16-byte vector loads when x is 16-byte aligned and ldx * sizeof(In) is a
/// multiple of 16 (scalar loads otherwise, same result).
///
/// Requirements (each violation returns Status::invalid_argument naming the argument): rows, cols >= 0;
/// ldx >= cols; x non-null and amax_out non-null unless the tensor is empty.
/// cols == 0 launches nothing; rows == 0 only zeroes amax_out.
///
///   llmk::DeviceBuffer<llmk::half> d_x(x);                 // [tokens, hidden]
///   llmk::DeviceBuffer<float> d_amax(hidden);
///   llmk::Status s = llmk::quant::column_amax(d_x.data(), hidden, tokens, hidden, d_amax.data(), stream);
///   // SmoothQuant: act_amax[j] = max over calibration batches of d_amax[j]
template <class In>
Status column_amax(const In* x, std::int64_t ldx, std::int64_t rows, std::int64_t cols, float* amax_out,
                   cudaStream_t stream) {
  static_assert(detail::kColumnInput<In>, "column_amax: In must be float, llmk::half or llmk::bfloat16");
  LLMK_RETURN_IF_ERROR(detail::check_columns_view(x, ldx, rows, cols));
  if (amax_out == nullptr && cols > 0) return Status::invalid_argument("amax_out", "must not be null");
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("amax_out", amax_out));  // an atomic target
  if (cols == 0) return {};
  return detail::launch_column_absmax<In, false>(x, ldx, rows, cols, reinterpret_cast<unsigned*>(amax_out),
                                                 stream);
}

}  // namespace llmk::quant
