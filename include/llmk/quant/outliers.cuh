// llmk/quant/outliers.cuh: the LLM.int8() mixed-precision decomposition (Dettmers et al. 2022).
//
// A linear layer Y = X W^T with X [M, K] (tokens x features) and W [N, K] is split along K:
//   O = the feature columns j where any |X[r, j]| >= threshold (default 6.0), sorted, n_out = |O|
//   Y = X_regular W_regular^T + X_outlier W_outlier^T
//     X_regular [M, K]     = X with the columns in O set to 0            (int8-quantized per token, then
//     GEMM) W_regular [N, K]     = W with the columns in O set to 0            (int8-quantized per channel)
//     X_outlier [M, n_out] = X[:, O]  (gathered, same element type as X)  (16-bit GEMM)
//     W_outlier [N, n_out] = W[:, O]  (gathered)
// Layouts the GEMM consumes: all four are row-major with K (or n_out) contiguous, i.e. both GEMMs are "TN"
// (A [M, K'], B [N, K'], K' contiguous) exactly like llmk::gemm::tile_gemm_f16. The split writes every column
// of X_outlier / W_outlier up to its row stride ld_outlier, zero-filling columns n_out .. ld_outlier - 1, so
// a GEMM can run with K' = ld_outlier (e.g. round_up(n_out, 8) for tile_gemm_f16's K % 8 == 0 rule) on the
// padded operands without extra memsets. Zeroing (rather than removing) the outlier columns of the regular
// part keeps K unchanged for the int8 GEMM and its tiles; the zeros quantize to exactly 0 and add nothing.
//
//   // 1. detect (on the activations of this forward pass, or once on calibration data)
//   llmk::quant::find_outlier_columns(d_x, K, M, K, 6.0f, d_cols, d_count, stream);   // d_cols [K], d_count
//   [1] int n_out;  llmk::device_copy(&n_out, d_count, sizeof(int), llmk::CopyKind::kDeviceToHost);
//   // 2. split both operands with the same column list
//   llmk::quant::split_outlier_columns(d_x, K, M, K, d_cols, n_out, d_x_reg, K, d_x_out, ld_out, stream);
//   llmk::quant::split_outlier_columns(d_w, K, N, K, d_cols, n_out, d_w_reg, K, d_w_out, ld_out, stream);
#pragma once

#include <cstdint>
#include <limits>

#include "llmk/config.cuh"
#include "llmk/core/device_algorithms.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/vector.cuh"
#include "llmk/quant/reduce_columns.cuh"
#include "llmk/quant/scheme.cuh"

namespace llmk::quant {

/// LLM.int8()'s default outlier threshold:  find_outlier_columns(x, K, M, K, kDefaultOutlierThreshold, ...).
inline constexpr float kDefaultOutlierThreshold = 6.0f;

namespace detail {

inline constexpr int kCompactThreads = 256;

struct OutlierCompactSmem {
  int warp_counts[kCompactThreads / 32];
};

// One block. data[0 .. cols) holds each column's max |x| (float bits, NaN skipped, Inf kept); replaces it in
// place by the sorted list of the columns with max >= threshold, then -1 up to cols, and writes the count.
// In place is safe: a chunk's values are read before the barrier, its indices written after, and an index is
// only ever written at a position <= its column.
template <int kUnused = 0>  // inline linkage (a plain kernel in a header is defined in every TU)
__global__ void __launch_bounds__(kCompactThreads)
    outlier_compact_kernel(std::int32_t* data, std::int64_t cols, float threshold, std::int32_t* count_out) {
  auto& smem = shared_storage<OutlierCompactSmem>();
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  std::int64_t found = 0;
  for (std::int64_t c0 = 0; c0 < cols; c0 += kCompactThreads) {
    const std::int64_t c = c0 + tid;
    const bool flag = c < cols && __uint_as_float(static_cast<unsigned>(data[c])) >= threshold;
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    if (lane == 0) smem.warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
#pragma unroll
    for (int w = 0; w < kCompactThreads / 32; ++w) {
      const int n = smem.warp_counts[w];
      before += w < warp ? n : 0;
      total += n;
    }
    if (flag) data[found + before + __popc(ballot & ((1u << lane) - 1u))] = static_cast<std::int32_t>(c);
    found += total;
    __syncthreads();  // warp_counts is rewritten by the next chunk
  }
  for (std::int64_t i = found + tid; i < cols; i += kCompactThreads) data[i] = -1;
  if (tid == 0) *count_out = static_cast<std::int32_t>(found);
}

// The workspace form's kernels: flags[c] = (column max c >= threshold) and iota[c] = c; then, after the
// device-wide select, the -1 tail and the int32 count.
template <int kUnused = 0>
__global__ void __launch_bounds__(256)
    outlier_flags_kernel(const unsigned* amax_bits, std::int64_t cols, float threshold, std::uint8_t* flags,
                         std::int32_t* iota) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
       c += stride) {
    flags[c] = __uint_as_float(amax_bits[c]) >= threshold ? 1 : 0;
    iota[c] = static_cast<std::int32_t>(c);
  }
}

template <int kUnused = 0>
__global__ void __launch_bounds__(256)
    outlier_finish_kernel(const std::int64_t* found, std::int64_t cols, std::int32_t* outlier_cols,
                          std::int32_t* count_out) {
  const std::int64_t n = *found;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = n + static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < cols;
       i += stride)
    outlier_cols[i] = -1;
  if (blockIdx.x == 0 && threadIdx.x == 0) *count_out = static_cast<std::int32_t>(n);
}

// The workspace form's layout (256-byte aligned pieces): column maxima, flags, iota, the count, CUB's temp.
struct OutlierWorkspace {
  std::size_t amax = 0, flags = 0, iota = 0, count = 0, select = 0;
  static std::size_t up(std::size_t x) { return (x + 255) / 256 * 256; }
  std::size_t bytes() const { return amax + flags + iota + count + select; }
};

inline Status outlier_workspace(std::int64_t cols, OutlierWorkspace* ws) {
  const auto n = static_cast<std::size_t>(cols);
  ws->amax = OutlierWorkspace::up(n * 4);
  ws->flags = OutlierWorkspace::up(n);
  ws->iota = OutlierWorkspace::up(n * 4);
  ws->count = 256;
  return llmk::device::select_flagged<std::int32_t>(nullptr, &ws->select, nullptr, nullptr, nullptr, nullptr,
                                                    cols, nullptr);
}

// The argument rules both forms of find_outlier_columns share.
template <class In>
Status check_find_outliers(const In* x, std::int64_t ldx, std::int64_t rows, std::int64_t cols,
                           float threshold, const std::int32_t* outlier_cols,
                           const std::int32_t* num_outliers) {
  LLMK_RETURN_IF_ERROR(check_columns_view(x, ldx, rows, cols));
  if (cols > std::numeric_limits<std::int32_t>::max())
    return Status::invalid_argument("cols", str_cat("must be < 2^31 (int32 column indices), got ", cols));
  if (!(threshold > 0.0f))
    return Status::invalid_argument("threshold", str_cat("must be > 0, got ", threshold));
  if (outlier_cols == nullptr && cols > 0)
    return Status::invalid_argument("outlier_cols", "must not be null");
  if (num_outliers == nullptr) return Status::invalid_argument("num_outliers", "must not be null");
  LLMK_RETURN_IF_ERROR(check_element_alignment<std::int32_t>("outlier_cols", outlier_cols));
  return check_element_alignment<std::int32_t>("num_outliers", num_outliers);
}

inline constexpr int kSplitThreads = 256;
inline constexpr int kSplitRowsPerBlock = 16;
inline constexpr int kSplitChunkCols = 8192;  // columns whose outlier bitmap a block holds at once

struct SplitSmem {
  unsigned bitmap[kSplitChunkCols / 32];
};

template <class T>
struct SplitParams {
  const T* x;
  std::int64_t ldx, rows, cols;
  const std::int32_t* outlier_cols;
  int n_out;
  T* regular;
  std::int64_t ld_regular;
  T* outlier;
  std::int64_t ld_outlier;
  bool vectorized;  // x, regular and both strides allow 16-byte accesses
};

// One block per kSplitRowsPerBlock rows: first gathers the outlier columns (and zero padding) of its rows,
// then copies its rows to `regular` with the outlier columns zeroed, one kSplitChunkCols-column chunk at a
// time (the chunk's outlier columns as a bitmap in shared memory). Gathering first makes an in-place split
// (regular == x) correct.
template <class T>
__global__ void __launch_bounds__(kSplitThreads) split_outlier_columns_kernel(SplitParams<T> p) {
  constexpr int V = static_cast<int>(16 / sizeof(T));
  auto& smem = shared_storage<SplitSmem>();
  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * kSplitRowsPerBlock;
  const std::int64_t r1 = r0 + kSplitRowsPerBlock < p.rows ? r0 + kSplitRowsPerBlock : p.rows;
  const T zero = convert_output<T>(0.0f);

  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t o = tid; o < p.ld_outlier; o += kSplitThreads) {
      T v = zero;
      if (o < p.n_out) {
        const std::int64_t c = p.outlier_cols[o];
        if (c >= 0 && c < p.cols) v = p.x[r * p.ldx + c];
      }
      p.outlier[r * p.ld_outlier + o] = v;
    }

  for (std::int64_t chunk0 = 0; chunk0 < p.cols; chunk0 += kSplitChunkCols) {
    const std::int64_t chunk_cols = p.cols - chunk0 < kSplitChunkCols ? p.cols - chunk0 : kSplitChunkCols;
    __syncthreads();  // the gather (first chunk) or the previous chunk's bitmap reads are done
    for (int w = tid; w < kSplitChunkCols / 32; w += kSplitThreads) smem.bitmap[w] = 0u;
    __syncthreads();
    // unsigned: o + kSplitThreads stays below 2^32 for any int n_out (an int o would wrap near 2^31)
    for (unsigned o = static_cast<unsigned>(tid); o < static_cast<unsigned>(p.n_out); o += kSplitThreads) {
      const std::int64_t c = static_cast<std::int64_t>(p.outlier_cols[o]) - chunk0;
      if (c >= 0 && c < chunk_cols) atomicOr(&smem.bitmap[c / 32], 1u << (c % 32));
    }
    __syncthreads();
    const std::int64_t vectors = ceil_div<std::int64_t>(chunk_cols, V);
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t i = tid; i < vectors; i += kSplitThreads) {
        const std::int64_t cc = i * V;  // column within the chunk
        const T* src = p.x + r * p.ldx + chunk0 + cc;
        T* dst = p.regular + r * p.ld_regular + chunk0 + cc;
        if (p.vectorized && cc + V <= chunk_cols) {
          Vector16<T> v = load16(src);
#pragma unroll
          for (int e = 0; e < V; ++e)
            if ((smem.bitmap[(cc + e) / 32] >> ((cc + e) % 32)) & 1u) v.elements[e] = zero;
          store16(dst, v);
        } else {
          for (int e = 0; e < V && cc + e < chunk_cols; ++e)
            dst[e] = ((smem.bitmap[(cc + e) / 32] >> ((cc + e) % 32)) & 1u) ? zero : src[e];
        }
      }
  }
}

}  // namespace detail

/// Finds the LLM.int8() outlier feature columns of x [rows, cols] (row stride ldx): the columns j with
/// |x[r, j]| >= threshold for some row r (|x| == threshold counts; +-Inf counts, NaN never does). Writes the
/// column indices in increasing order to outlier_cols[0 .. count), -1 to outlier_cols[count .. cols), and
/// count to *num_outliers (both device memory). In = float, llmk::half, llmk::bfloat16.
/// Two kernels plus a fill: a column max (the column_amax kernel keeping +-Inf) written as float bits into
/// outlier_cols itself (so no workspace is needed), then a one-block compaction that turns it, in place, into
/// the sorted index list (ballot + popc prefix sums, deterministic). Copy *num_outliers to the host to size
/// the outlier operands of split_outlier_columns.
///
/// Requirements (Status::invalid_argument naming the argument): rows, cols >= 0; cols < 2^31; ldx >= cols;
/// threshold > 0 (+Inf allowed: only infinite values count); x non-null unless empty; outlier_cols non-null
/// when cols > 0; num_outliers non-null. rows == 0 or cols == 0 give count 0.
///
///   llmk::DeviceBuffer<std::int32_t> d_cols(K), d_count(1);
///   llmk::Status s = llmk::quant::find_outlier_columns(d_x.data(), K, M, K, 6.0f, d_cols.data(),
///                                                      d_count.data(), stream);
template <class In>
Status find_outlier_columns(const In* x, std::int64_t ldx, std::int64_t rows, std::int64_t cols,
                            float threshold, std::int32_t* outlier_cols, std::int32_t* num_outliers,
                            cudaStream_t stream) {
  static_assert(detail::kColumnInput<In>,
                "find_outlier_columns: In must be float, llmk::half or llmk::bfloat16");
  LLMK_RETURN_IF_ERROR(
      detail::check_find_outliers(x, ldx, rows, cols, threshold, outlier_cols, num_outliers));
  if (cols > 0)
    LLMK_RETURN_IF_ERROR((detail::launch_column_absmax<In, true>(
        x, ldx, rows, cols, reinterpret_cast<unsigned*>(outlier_cols), stream)));
  return launch(detail::outlier_compact_kernel<>, dim3(1), dim3(detail::kCompactThreads),
                sizeof(detail::OutlierCompactSmem), stream, outlier_cols, cols, threshold, num_outliers);
}

/// find_outlier_columns with caller-owned temporary storage (CUB's protocol: temp == nullptr writes the size
/// to *temp_bytes and runs nothing; then call again with at least that many bytes of 16-byte aligned device
/// memory): the same outputs, bit for bit, with the compaction done by llmk::device::select_flagged
/// (cub::DeviceSelect::Flagged over the whole GPU) instead of the one-block ballot scan. Workspace: about 9
/// bytes per column plus CUB's storage. Errors: those of find_outlier_columns, plus temp_bytes and temp.
/// bench/quantize.cu measures both forms (BM_OutlierColumns / BM_OutlierColumnsCub).
///
///   std::size_t bytes = 0;
///   llmk::quant::find_outlier_columns(nullptr, &bytes, d_x, K, M, K, 6.0f, d_cols, d_count, stream);
///   llmk::DeviceBuffer<unsigned char> temp(bytes);
///   llmk::Status s = llmk::quant::find_outlier_columns(temp.data(), &bytes, d_x, K, M, K, 6.0f, d_cols,
///                                                      d_count, stream);
template <class In>
Status find_outlier_columns(void* temp, std::size_t* temp_bytes, const In* x, std::int64_t ldx,
                            std::int64_t rows, std::int64_t cols, float threshold, std::int32_t* outlier_cols,
                            std::int32_t* num_outliers, cudaStream_t stream) {
  static_assert(detail::kColumnInput<In>,
                "find_outlier_columns: In must be float, llmk::half or llmk::bfloat16");
  if (temp_bytes == nullptr) return Status::invalid_argument("temp_bytes", "must not be null");
  if (cols < 0) return Status::invalid_argument("cols", str_cat("must be >= 0, got ", cols));
  if (cols > std::numeric_limits<std::int32_t>::max())
    return Status::invalid_argument("cols", str_cat("must be < 2^31 (int32 column indices), got ", cols));
  detail::OutlierWorkspace ws;
  LLMK_RETURN_IF_ERROR(detail::outlier_workspace(cols, &ws));
  if (temp == nullptr) {
    *temp_bytes = ws.bytes();
    return {};
  }
  if (*temp_bytes < ws.bytes())
    return Status::invalid_argument(
        "temp_bytes", str_cat("must be >= the size query's ", ws.bytes(), " bytes, got ", *temp_bytes));
  if (!is_aligned(temp, 16)) return Status::invalid_argument("temp", "must be 16-byte aligned");
  LLMK_RETURN_IF_ERROR(
      detail::check_find_outliers(x, ldx, rows, cols, threshold, outlier_cols, num_outliers));
  auto* base = static_cast<unsigned char*>(temp);
  auto* amax = reinterpret_cast<unsigned*>(base);
  auto* flags = base + ws.amax;
  auto* iota = reinterpret_cast<std::int32_t*>(base + ws.amax + ws.flags);
  auto* found = reinterpret_cast<std::int64_t*>(base + ws.amax + ws.flags + ws.iota);
  void* select_temp = base + ws.amax + ws.flags + ws.iota + ws.count;
  if (cols == 0)  // writes the count 0
    return launch(detail::outlier_compact_kernel<>, dim3(1), dim3(detail::kCompactThreads),
                  sizeof(detail::OutlierCompactSmem), stream, outlier_cols, cols, threshold, num_outliers);
  const dim3 grid(static_cast<unsigned>(min<std::int64_t>(ceil_div<std::int64_t>(cols, 256), 4096)));
  LLMK_RETURN_IF_ERROR((detail::launch_column_absmax<In, true>(x, ldx, rows, cols, amax, stream)));
  LLMK_RETURN_IF_ERROR(
      launch(detail::outlier_flags_kernel<>, grid, dim3(256), 0, stream, amax, cols, threshold, flags, iota));
  LLMK_RETURN_IF_ERROR(llmk::device::select_flagged<std::int32_t>(select_temp, &ws.select, iota, flags,
                                                                  outlier_cols, found, cols, stream));
  return launch(detail::outlier_finish_kernel<>, grid, dim3(256), 0, stream, found, cols, outlier_cols,
                num_outliers);
}

/// Splits x [rows, cols] (activations X [M, K] or weights W [N, K]; row stride ldx) along its columns:
///   regular[r, j] = 0 if j is in outlier_cols[0 .. n_out), else x[r, j]   (bit copy; [rows, cols])
///   outlier[r, o] = x[r, outlier_cols[o]] for o < n_out, 0 up to ld_outlier   ([rows, ld_outlier])
/// outlier_cols (device) normally comes from find_outlier_columns (sorted, unique, in [0, cols)); entries
/// outside [0, cols) are ignored by the zeroing and gather 0. Columns cols .. ld_regular - 1 of regular are
/// not touched. regular may be x itself (same ld) for an in-place split. T = float, llmk::half,
/// llmk::bfloat16; 16-byte vector accesses when x, regular and both strides are 16-byte aligned.
///
/// Requirements (Status::invalid_argument naming the argument): rows, cols >= 0; cols < 2^31; ldx >= cols;
/// ld_regular >= cols; 0 <= n_out <= cols; ld_outlier >= n_out; x and regular non-null unless rows or cols is
/// 0; outlier_cols non-null when n_out > 0; outlier non-null when rows > 0 and ld_outlier > 0; regular == x
/// only with ld_regular == ldx.
///
///   int n_out = ...;                                   // *num_outliers from find_outlier_columns
///   const std::int64_t ld_out = llmk::round_up<std::int64_t>(n_out, 8);
///   llmk::Status s = llmk::quant::split_outlier_columns(d_x, K, M, K, d_cols, n_out, d_x_reg, K, d_x_out,
///                                                       ld_out, stream);
template <class T>
Status split_outlier_columns(const T* x, std::int64_t ldx, std::int64_t rows, std::int64_t cols,
                             const std::int32_t* outlier_cols, int n_out, T* regular, std::int64_t ld_regular,
                             T* outlier, std::int64_t ld_outlier, cudaStream_t stream) {
  static_assert(detail::kColumnInput<T>,
                "split_outlier_columns: T must be float, llmk::half or llmk::bfloat16");
  LLMK_RETURN_IF_ERROR(detail::check_columns_view(x, ldx, rows, cols));
  if (cols > std::numeric_limits<std::int32_t>::max())
    return Status::invalid_argument("cols", str_cat("must be < 2^31 (int32 column indices), got ", cols));
  if (ld_regular < cols)
    return Status::invalid_argument(
        "ld_regular", str_cat("must be >= cols (cols=", cols, ", ld_regular=", ld_regular, ")"));
  if (n_out < 0 || n_out > cols)
    return Status::invalid_argument("n_out",
                                    str_cat("must be in [0, cols] (cols=", cols, ", n_out=", n_out, ")"));
  if (ld_outlier < n_out)
    return Status::invalid_argument(
        "ld_outlier", str_cat("must be >= n_out (n_out=", n_out, ", ld_outlier=", ld_outlier, ")"));
  if (regular == nullptr && rows > 0 && cols > 0)
    return Status::invalid_argument("regular", "must not be null");
  if (outlier_cols == nullptr && n_out > 0)
    return Status::invalid_argument("outlier_cols", "must not be null");
  if (outlier == nullptr && rows > 0 && ld_outlier > 0)
    return Status::invalid_argument("outlier", "must not be null");
  if (regular == x && ld_regular != ldx && rows > 0 && cols > 0)
    return Status::invalid_argument("regular", str_cat("may alias x only with the same row stride (ldx=", ldx,
                                                       ", ld_regular=", ld_regular, ")"));
  LLMK_RETURN_IF_ERROR(check_element_alignment<T>("regular", regular));
  LLMK_RETURN_IF_ERROR(check_element_alignment<T>("outlier", outlier));
  LLMK_RETURN_IF_ERROR(check_element_alignment<std::int32_t>("outlier_cols", outlier_cols));
  if (rows == 0 || (cols == 0 && ld_outlier == 0)) return {};
  const std::int64_t blocks = ceil_div<std::int64_t>(rows, detail::kSplitRowsPerBlock);
  if (blocks >= (std::int64_t{1} << 31))
    return Status::invalid_argument("rows",
                                    str_cat("must be < 2^31 * ", detail::kSplitRowsPerBlock, ", got ", rows));
  const auto row_bytes_ok = [](std::int64_t ld) {
    return (ld * static_cast<std::int64_t>(sizeof(T))) % 16 == 0;
  };
  const bool vectorized =
      is_aligned(x, 16) && is_aligned(regular, 16) && row_bytes_ok(ldx) && row_bytes_ok(ld_regular);
  detail::SplitParams<T> p{x,       ldx,        rows,    cols,       outlier_cols, n_out,
                           regular, ld_regular, outlier, ld_outlier, vectorized};
  return launch(detail::split_outlier_columns_kernel<T>, dim3(static_cast<unsigned>(blocks)),
                dim3(detail::kSplitThreads), sizeof(detail::SplitSmem), stream, p);
}

}  // namespace llmk::quant
