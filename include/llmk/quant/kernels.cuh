// llmk/quant/kernels.cuh: the host launchers of the quantization kernels (the kernels themselves:
// llmk/quant/quantize_kernels.cuh).
//
//   quantize<Q, In>          static quantization with given scales (and zero points), every granularity
//   dequantize<Q, Out>       codes -> float / half / bfloat16
//   quantize_dynamic<Q, In>  computes the parameters from the data (symmetric: amax; asymmetric: min/max; the
//   ranges
//                            skip NaN and +-Inf) and quantizes; PerChannel/PerToken and GroupWise are ONE
//                            fused pass (one block per row reads the row once, reduces, writes scales,
//                            quantizes)
//   row_amax<In>, tensor_amax<In>   per-row and per-tensor absolute maxima (NaN and +-Inf skipped)
//   pack_int4<S>, unpack_int4<S>    int8 codes <-> packed nibbles (llmk/core/int4.cuh order), saturating
//
// Q is a llmk::quant::Quantizer<Storage, Scheme, Granularity>; every number goes through its
// params_from_range / params_from_absmax / quantize / dequantize (llmk/quant/scheme.cuh), so the kernels and
// the host references in llmk/reference/quant.hpp agree bit for bit.
//
// Layout (docs/quantization.md): row-major [rows, cols]; strides in elements for float/half/bfloat16 tensors
// and in BYTES for quantized storage (int4/uint4 rows are ceil(cols / 2) bytes, element 2i in the low nibble
// of byte i, an odd row's last high nibble is written as 0). Scales float32: PerTensor [1],
// PerChannel/PerToken [rows], GroupWise [rows][cols / group_size] (contiguous). Zero points int32 with the
// same shape, Asymmetric only (the pointer is ignored for symmetric and fp8 quantizers). Bytes between the
// row and the stride are never written.
//
// Kernels move global memory in 16-byte vectors (llmk::load16/store16) when a tensor's base pointer and row
// stride are 16-byte aligned, and take a scalar path otherwise (same results, slower). Empty tensors (rows ==
// 0 or cols == 0) are valid: nothing is launched and nothing is written (not even scales or amax_out).
//
// Kernel instantiations depend on (storage, scheme) and the input/output type only: the granularity is
// runtime data (parameters per row and group size), so PerChannel, PerToken, PerTensor and every GroupWise<G>
// share one kernel.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "llmk/config.cuh"
#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/status.cuh"
#include "llmk/quant/quantize_kernels.cuh"
#include "llmk/quant/scheme.cuh"

namespace llmk::quant {

namespace detail {

// ---- host-side validation
// ----------------------------------------------------------------------------------------

inline bool vec_ok(const void* base, std::int64_t row_stride_bytes) {
  return is_aligned(base, 16) && row_stride_bytes % 16 == 0;
}

inline constexpr int kMaxCols = (1 << 30);

inline Status check_shape(int rows, int cols) {
  if (rows < 0) return Status::invalid_argument("rows", str_cat("must be >= 0, got ", rows));
  if (cols < 0) return Status::invalid_argument("cols", str_cat("must be >= 0, got ", cols));
  // Column indices stay in 32 bits inside the kernels (offsets are 64-bit): keep a vector's end
  // representable.
  if (cols > kMaxCols)
    return Status::invalid_argument("cols", str_cat("must be <= ", kMaxCols, ", got ", cols));
  return {};
}

inline Status check_stride(const char* name, std::int64_t ld, std::int64_t row_width, const char* unit) {
  if (ld < row_width)
    return Status::invalid_argument(name, str_cat("must be >= the row width in ", unit,
                                                  " (row width=", row_width, ", ", name, "=", ld, ")"));
  return {};
}

// Parameter layout of a granularity: params_per_row and the group size along a row (see QuantizeArgs).
struct Layout {
  std::int64_t params_per_row;
  int group;
  bool per_tensor, grouped;
};

template <class G>
Status resolve_layout(int cols, int group_size, Layout* layout) {
  if constexpr (std::is_same_v<G, PerTensor>) {
    *layout = {0, cols, true, false};
  } else if constexpr (kPerRow<G>) {
    *layout = {1, cols, false, false};
  } else {
    if (G::kGroupSize > 0 && group_size != G::kGroupSize)
      return Status::invalid_argument(
          "group_size",
          str_cat("must equal the quantizer's GroupWise<", G::kGroupSize, "> (group_size=", group_size, ")"));
    if (group_size < 1)
      return Status::invalid_argument("group_size",
                                      str_cat("must be >= 1 for a group-wise quantizer, got ", group_size));
    if (cols % group_size != 0)
      return Status::invalid_argument(
          "group_size", str_cat("must divide cols (cols=", cols, ", group_size=", group_size, ")"));
    *layout = {cols / group_size, group_size, false, true};
  }
  return {};
}

// The checks quantize and quantize_dynamic share: shape, layout, strides, then (for a non-empty tensor)
// pointers and alignment. `*empty` tells the caller there is nothing to launch.
template <class Q, class In>
Status check_quantize_io(const In* x, std::int64_t ldx, const void* q, std::int64_t ldq_bytes, int rows,
                         int cols, const float* scales, const char* scales_name,
                         const std::int32_t* zero_points, const char* zero_points_name, int group_size,
                         Layout* layout, bool* empty) {
  LLMK_RETURN_IF_ERROR(check_shape(rows, cols));
  LLMK_RETURN_IF_ERROR(resolve_layout<typename Q::granularity>(cols, group_size, layout));
  LLMK_RETURN_IF_ERROR(check_stride("ldx", ldx, cols, "elements"));
  LLMK_RETURN_IF_ERROR(
      check_stride("ldq_bytes", ldq_bytes, storage_row_bytes<typename Q::storage_type>(cols), "bytes"));
  *empty = rows == 0 || cols == 0;
  if (*empty) return {};
  if (x == nullptr) return Status::invalid_argument("x", "must not be null");
  if (q == nullptr) return Status::invalid_argument("q", "must not be null");
  if (scales == nullptr) return Status::invalid_argument(scales_name, "must not be null");
  if (Q::kAsymmetric && zero_points == nullptr)
    return Status::invalid_argument(zero_points_name, "must not be null for an asymmetric quantizer");
  LLMK_RETURN_IF_ERROR(::llmk::check_element_alignment<float>(scales_name, scales));
  if (Q::kAsymmetric)  // ignored otherwise, whatever it points at
    LLMK_RETURN_IF_ERROR(::llmk::check_element_alignment<std::int32_t>(zero_points_name, zero_points));
  return ::llmk::check_element_alignment<In>("x", x);
}

// Threads per block of the grid-stride kernels: 256, or fewer (a multiple of 32) when there is less work.
inline unsigned elementwise_threads(std::int64_t work_items) {
  return static_cast<unsigned>(
      min<std::int64_t>(kElementwiseThreads, max<std::int64_t>(32, round_up<std::int64_t>(work_items, 32))));
}

inline unsigned elementwise_blocks(std::int64_t work_items) {
  return static_cast<unsigned>(max<std::int64_t>(
      1, min(ceil_div<std::int64_t>(work_items, kElementwiseThreads), kElementwiseMaxBlocks)));
}

// The kernels are instantiated with the arithmetic of Q only (the granularity is runtime data), so
// PerChannel, PerToken, PerTensor and every GroupWise<G> share one kernel per storage x scheme x element
// type.
template <class Q>
using KernelQuantizer = Quantizer<typename Q::storage_type, typename Q::scheme, PerTensor>;

template <class Q>
concept QuantizerType = requires {
  typename Q::storage_type;
  typename Q::scheme;
  typename Q::granularity;
}
&&std::is_same_v<Q, Quantizer<typename Q::storage_type, typename Q::scheme, typename Q::granularity>>;

}  // namespace detail

// ---- host launchers
// ------------------------------------------------------------------------------------------------

/// Quantizes x [rows, cols] (float, half or bfloat16, row stride ldx elements) into q (row stride ldq_bytes)
/// with the given scales (and zero points, Asymmetric only) laid out for Q's granularity.
///
/// Rules (each violation returns Status::invalid_argument naming the argument): rows, cols >= 0; ldx >= cols;
/// ldq_bytes >= storage_row_bytes<S>(cols); group-wise: group_size >= 1, divides cols, and equals G for
/// GroupWise<G > 0> (ignored for the other granularities); x, q, scales non-null (zero_points too when
/// Asymmetric) unless the tensor is empty; x aligned to its element size. 16-byte vectors when x, q, ldx *
/// sizeof(In) and ldq_bytes are 16-byte aligned, a scalar path otherwise. One launch.
///
///   using Q = llmk::quant::Quantizer<int8_t, llmk::quant::Symmetric, llmk::quant::PerChannel>;
///   // w: [out, in] floats on the device, scales: [out] floats on the device, q: [out, in] bytes
///   llmk::Status s = llmk::quant::quantize<Q>(w, in, q, in, out, in, scales, nullptr, 0, stream);
template <class Q, FloatTensorType In>
Status quantize(const In* x, std::int64_t ldx, void* q, std::int64_t ldq_bytes, int rows, int cols,
                const float* scales, const std::int32_t* zero_points, int group_size, cudaStream_t stream) {
  static_assert(detail::QuantizerType<Q>,
                "quantize<Q>: Q must be a llmk::quant::Quantizer<Storage, Scheme, Granularity>");
  using S = typename Q::storage_type;
  detail::Layout layout{};
  bool empty = false;
  LLMK_RETURN_IF_ERROR(detail::check_quantize_io<Q>(x, ldx, q, ldq_bytes, rows, cols, scales, "scales",
                                                    zero_points, "zero_points", group_size, &layout, &empty));
  if (empty) return {};
  detail::QuantizeArgs<In> a{x,
                             ldx,
                             static_cast<std::uint8_t*>(q),
                             ldq_bytes,
                             rows,
                             cols,
                             scales,
                             zero_points,
                             layout.params_per_row,
                             layout.group,
                             nullptr,
                             nullptr,
                             nullptr,
                             detail::vec_ok(x, ldx * static_cast<std::int64_t>(sizeof(In))),
                             detail::vec_ok(q, ldq_bytes)};
  const std::int64_t chunks =
      static_cast<std::int64_t>(rows) * ceil_div<std::int64_t>(cols, detail::kChunkElements<S>);
  return launch(detail::quantize_kernel<detail::KernelQuantizer<Q>, In>,
                dim3(detail::elementwise_blocks(chunks)), dim3(detail::elementwise_threads(chunks)), 0,
                stream, a);
}

/// Dequantizes q [rows, cols] (row stride ldq_bytes) into y (float, half or bfloat16, row stride ldy
/// elements): y = (code - zero_point) * scale (fp8: float(code) * scale), rounded to Out's precision (nearest
/// even).
///
/// Rules: as quantize (ldy >= cols; y aligned to its element size). One launch.
///
///   using Q = llmk::quant::Quantizer<llmk::int4_t, llmk::quant::Asymmetric, llmk::quant::GroupWise<128>>;
///   // q: [rows, (cols + 1) / 2] bytes; scales, zero_points: [rows][cols / 128]
///   llmk::Status s = llmk::quant::dequantize<Q>(q, (cols + 1) / 2, y_half, cols, rows, cols, scales,
///                                               zero_points, 128, stream);
template <class Q, FloatTensorType Out>
Status dequantize(const void* q, std::int64_t ldq_bytes, Out* y, std::int64_t ldy, int rows, int cols,
                  const float* scales, const std::int32_t* zero_points, int group_size, cudaStream_t stream) {
  static_assert(detail::QuantizerType<Q>,
                "dequantize<Q>: Q must be a llmk::quant::Quantizer<Storage, Scheme, Granularity>");
  using S = typename Q::storage_type;
  LLMK_RETURN_IF_ERROR(detail::check_shape(rows, cols));
  detail::Layout layout{};
  LLMK_RETURN_IF_ERROR(detail::resolve_layout<typename Q::granularity>(cols, group_size, &layout));
  LLMK_RETURN_IF_ERROR(detail::check_stride("ldq_bytes", ldq_bytes, storage_row_bytes<S>(cols), "bytes"));
  LLMK_RETURN_IF_ERROR(detail::check_stride("ldy", ldy, cols, "elements"));
  if (rows == 0 || cols == 0) return {};
  if (q == nullptr) return Status::invalid_argument("q", "must not be null");
  if (y == nullptr) return Status::invalid_argument("y", "must not be null");
  if (scales == nullptr) return Status::invalid_argument("scales", "must not be null");
  if (Q::kAsymmetric && zero_points == nullptr)
    return Status::invalid_argument("zero_points", "must not be null for an asymmetric quantizer");
  LLMK_RETURN_IF_ERROR(check_element_alignment<Out>("y", y));
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("scales", scales));
  LLMK_RETURN_IF_ERROR(check_element_alignment<std::int32_t>("zero_points", zero_points));
  detail::DequantizeArgs<Out> a{static_cast<const std::uint8_t*>(q),
                                ldq_bytes,
                                y,
                                ldy,
                                rows,
                                cols,
                                scales,
                                zero_points,
                                layout.params_per_row,
                                layout.group,
                                detail::vec_ok(q, ldq_bytes),
                                detail::vec_ok(y, ldy * static_cast<std::int64_t>(sizeof(Out)))};
  const std::int64_t chunks =
      static_cast<std::int64_t>(rows) * ceil_div<std::int64_t>(cols, detail::kChunkElements<S>);
  return launch(detail::dequantize_kernel<detail::KernelQuantizer<Q>, Out>,
                dim3(detail::elementwise_blocks(chunks)), dim3(detail::elementwise_threads(chunks)), 0,
                stream, a);
}

/// Bytes of workspace quantize_dynamic needs (the same for every granularity today: 16).
inline constexpr std::size_t kQuantizeDynamicWorkspaceBytes = 16;

/// Dynamic quantization: computes each group's parameters from the data (Symmetric and fp8: the finite
/// absolute maximum; Asymmetric: the finite min and max; NaN and +-Inf are skipped, an all-non-finite group
/// behaves like an all-zero one), writes them to scales_out (and zero_points_out, Asymmetric only) in Q's
/// layout, and quantizes.
///
/// Launch structure: PerChannel / PerToken / GroupWise: ONE fused launch, one block per row (the row is read
/// once into shared memory when it fits in 64 KiB, e.g. 16384 floats or 32768 halves; longer rows are read
/// twice). PerTensor: three launches (reset the accumulator in the workspace, reduce the whole tensor with
/// one atomic per block, quantize with the reduced range; block 0 writes scales_out[0]).
///
/// Workspace, CUB style: call once with workspace == nullptr to get the size in *workspace_bytes (nothing
/// else is read or launched), allocate it (4-byte aligned device memory, e.g. DeviceBuffer), call again with
/// it. The size is never 0, so the second call is never mistaken for a query; only PerTensor writes to it
/// (its range accumulator), so a PerTensor workspace serves one call at a time (two calls in flight on two
/// streams need two workspaces).
///
/// Rules: those of quantize, plus scales_out non-null (zero_points_out too when Asymmetric), workspace_bytes
/// non-null, *workspace_bytes >= the queried size, workspace 4-byte aligned.
///
///   using Q = llmk::quant::Quantizer<int8_t, llmk::quant::Symmetric, llmk::quant::PerToken>;
///   std::size_t ws_bytes = 0;
///   llmk::quant::quantize_dynamic<Q, llmk::half>(nullptr, hidden, nullptr, hidden, tokens, hidden,
///                                               nullptr, nullptr, 0, nullptr, &ws_bytes, stream);   // query
///   llmk::DeviceBuffer<unsigned char> ws(ws_bytes);
///   llmk::Status s = llmk::quant::quantize_dynamic<Q>(x, hidden, q, hidden, tokens, hidden, scales,
///                                                     nullptr, 0, ws.data(), &ws_bytes, stream);
template <class Q, FloatTensorType In>
Status quantize_dynamic(const In* x, std::int64_t ldx, void* q, std::int64_t ldq_bytes, int rows, int cols,
                        float* scales_out, std::int32_t* zero_points_out, int group_size, void* workspace,
                        std::size_t* workspace_bytes, cudaStream_t stream) {
  static_assert(detail::QuantizerType<Q>,
                "quantize_dynamic<Q>: Q must be a llmk::quant::Quantizer<Storage, Scheme, Granularity>");
  using S = typename Q::storage_type;
  if (workspace_bytes == nullptr) return Status::invalid_argument("workspace_bytes", "must not be null");
  if (workspace == nullptr) {
    *workspace_bytes = kQuantizeDynamicWorkspaceBytes;
    return {};
  }
  if (*workspace_bytes < kQuantizeDynamicWorkspaceBytes)
    return Status::invalid_argument("workspace_bytes",
                                    str_cat("must be >= ", kQuantizeDynamicWorkspaceBytes,
                                            " (query with workspace == nullptr), got ", *workspace_bytes));
  if (!is_aligned(workspace, 4)) return Status::invalid_argument("workspace", "must be 4-byte aligned");
  detail::Layout layout{};
  bool empty = false;
  LLMK_RETURN_IF_ERROR(detail::check_quantize_io<Q>(x, ldx, q, ldq_bytes, rows, cols, scales_out,
                                                    "scales_out", zero_points_out, "zero_points_out",
                                                    group_size, &layout, &empty));
  if (empty) return {};
  const bool in_vec = detail::vec_ok(x, ldx * static_cast<std::int64_t>(sizeof(In)));
  const bool out_vec = detail::vec_ok(q, ldq_bytes);
  auto* qb = static_cast<std::uint8_t*>(q);

  if constexpr (std::is_same_v<typename Q::granularity, PerTensor>) {
    auto* acc = static_cast<std::uint32_t*>(workspace);
    const std::uint32_t zero_key = detail::ordered_key(0.0f);
    LLMK_RETURN_IF_ERROR(launch(detail::range_init_kernel<>, dim3(1), dim3(32), 0, stream, acc,
                                Q::kAsymmetric ? zero_key : 0u, zero_key, Q::kAsymmetric ? 2 : 1));
    constexpr int kIn = 16 / static_cast<int>(sizeof(In));
    const std::int64_t vecs = static_cast<std::int64_t>(rows) * ceil_div<std::int64_t>(cols, kIn);
    const unsigned blocks = static_cast<unsigned>(
        max<std::int64_t>(1, min<std::int64_t>(ceil_div<std::int64_t>(vecs, detail::kElementwiseThreads),
                                               detail::kRangeMaxBlocks)));
    detail::RangeArgs<In> ra{x, ldx, rows, cols, acc, Q::kAsymmetric, in_vec};
    LLMK_RETURN_IF_ERROR(launch(detail::range_reduce_kernel<In>, dim3(blocks),
                                dim3(detail::elementwise_threads(vecs)), sizeof(detail::ReduceSmem), stream,
                                ra));
    detail::QuantizeArgs<In> a{};  // params come from the reduced range in `acc`, not from scales
    a.x = x;
    a.ldx = ldx;
    a.q = qb;
    a.ldq = ldq_bytes;
    a.rows = rows;
    a.cols = cols;
    a.group = cols;
    a.range = acc;
    a.scale_out = scales_out;
    a.zero_point_out = zero_points_out;
    a.in_vec = in_vec;
    a.out_vec = out_vec;
    const std::int64_t chunks =
        static_cast<std::int64_t>(rows) * ceil_div<std::int64_t>(cols, detail::kChunkElements<S>);
    return launch(detail::quantize_kernel<detail::KernelQuantizer<Q>, In>,
                  dim3(detail::elementwise_blocks(chunks)), dim3(detail::elementwise_threads(chunks)), 0,
                  stream, a);
  } else {
    constexpr int kIn = 16 / static_cast<int>(sizeof(In));
    const int threads = static_cast<int>(min<std::int64_t>(
        detail::kRowMaxThreads,
        max<std::int64_t>(32, round_up<std::int64_t>(ceil_div<std::int64_t>(cols, kIn), 32))));
    const std::size_t row_bytes = static_cast<std::size_t>(
        round_up<std::int64_t>(static_cast<std::int64_t>(cols) * static_cast<std::int64_t>(sizeof(In)), 16));
    const bool resident = row_bytes <= detail::kRowResidentBytes;
    detail::RowQuantizeArgs<In> a{};
    a.x = x;
    a.ldx = ldx;
    a.q = qb;
    a.ldq = ldq_bytes;
    a.rows = rows;
    a.cols = cols;
    a.scales = scales_out;
    a.zero_points = zero_points_out;
    a.group = layout.group;
    a.groups_per_row = static_cast<int>(layout.grouped ? layout.params_per_row : 1);
    a.grouped = layout.grouped;
    a.resident = resident;
    a.in_vec = in_vec;
    a.out_vec = out_vec;
    return launch(detail::quantize_rows_dynamic_kernel<detail::KernelQuantizer<Q>, In>,
                  dim3(static_cast<unsigned>(rows)), dim3(threads),
                  sizeof(detail::ReduceSmem) + (resident ? row_bytes : 0), stream, a);
  }
}

/// amax_out[r] = max |x[r][c]| over the finite elements of row r (0 when there are none): per-channel amax of
/// a weight [out, in], per-token amax of an activation. One launch, one warp per row.
///
/// Rules (each violation returns Status::invalid_argument naming the argument): rows, cols >= 0; ldx >= cols;
/// x, amax_out non-null unless empty; x aligned to its element size. A failed launch: Status::cuda_error.
///
///   llmk::DeviceBuffer<float> amax(out_channels);
///   llmk::Status s = llmk::quant::row_amax(w, in_features, out_channels, in_features, amax.data(), stream);
template <FloatTensorType In>
Status row_amax(const In* x, std::int64_t ldx, int rows, int cols, float* amax_out, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_shape(rows, cols));
  LLMK_RETURN_IF_ERROR(detail::check_stride("ldx", ldx, cols, "elements"));
  if (rows == 0 || cols == 0) return {};
  if (x == nullptr) return Status::invalid_argument("x", "must not be null");
  if (amax_out == nullptr) return Status::invalid_argument("amax_out", "must not be null");
  LLMK_RETURN_IF_ERROR(check_element_alignment<In>("x", x));
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("amax_out", amax_out));
  detail::RowAmaxArgs<In> a{x,    ldx,      rows,
                            cols, amax_out, detail::vec_ok(x, ldx * static_cast<std::int64_t>(sizeof(In)))};
  constexpr std::int64_t kRowsPerBlock = detail::kElementwiseThreads / 32;
  return launch(detail::row_amax_kernel<In>,
                dim3(static_cast<unsigned>(ceil_div<std::int64_t>(rows, kRowsPerBlock))),
                dim3(detail::elementwise_threads(static_cast<std::int64_t>(rows) * 32)), 0, stream, a);
}

/// amax_out[0] = max |x| over the finite elements of the tensor (0 when there are none). Two launches: reset
/// amax_out[0], then a grid-wide reduction that folds each block in with one atomicMax. No workspace:
/// amax_out is the accumulator (4-byte aligned device memory).
///
/// Rules (Status::invalid_argument naming the argument): as row_amax, plus amax_out 4-byte aligned.
///
///   llmk::DeviceBuffer<float> amax(1);
///   llmk::Status s = llmk::quant::tensor_amax(x, cols, rows, cols, amax.data(), stream);
template <FloatTensorType In>
Status tensor_amax(const In* x, std::int64_t ldx, int rows, int cols, float* amax_out, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(detail::check_shape(rows, cols));
  LLMK_RETURN_IF_ERROR(detail::check_stride("ldx", ldx, cols, "elements"));
  if (rows == 0 || cols == 0) return {};
  if (x == nullptr) return Status::invalid_argument("x", "must not be null");
  if (amax_out == nullptr) return Status::invalid_argument("amax_out", "must not be null");
  if (!is_aligned(amax_out, 4)) return Status::invalid_argument("amax_out", "must be 4-byte aligned");
  LLMK_RETURN_IF_ERROR(check_element_alignment<In>("x", x));
  auto* acc = reinterpret_cast<std::uint32_t*>(amax_out);
  LLMK_RETURN_IF_ERROR(launch(detail::range_init_kernel<>, dim3(1), dim3(32), 0, stream, acc, 0u, 0u, 1));
  constexpr int kIn = 16 / static_cast<int>(sizeof(In));
  const std::int64_t vecs = static_cast<std::int64_t>(rows) * ceil_div<std::int64_t>(cols, kIn);
  const unsigned blocks = static_cast<unsigned>(max<std::int64_t>(
      1,
      min<std::int64_t>(ceil_div<std::int64_t>(vecs, detail::kElementwiseThreads), detail::kRangeMaxBlocks)));
  detail::RangeArgs<In> a{
      x, ldx, rows, cols, acc, false, detail::vec_ok(x, ldx * static_cast<std::int64_t>(sizeof(In)))};
  return launch(detail::range_reduce_kernel<In>, dim3(blocks), dim3(detail::elementwise_threads(vecs)),
                sizeof(detail::ReduceSmem), stream, a);
}

namespace detail {
template <class S>
concept Int4Storage = std::is_same_v<S, int4_t> || std::is_same_v<S, uint4_t>;
template <class S>
using Int4Code = std::conditional_t<std::is_same_v<S, int4_t>, std::int8_t, std::uint8_t>;

template <class S>
Status int4_pack_common(bool pack, const void* src, std::int64_t ld_src, void* dst, std::int64_t ld_dst,
                        int rows, int cols, cudaStream_t stream) {
  LLMK_RETURN_IF_ERROR(check_shape(rows, cols));
  const char* src_name = pack ? "codes" : "packed";
  const char* dst_name = pack ? "packed" : "codes";
  const char* ld_src_name = pack ? "ld_codes" : "ld_packed_bytes";
  const char* ld_dst_name = pack ? "ld_packed_bytes" : "ld_codes";
  const std::int64_t packed_bytes = storage_row_bytes<S>(cols);
  LLMK_RETURN_IF_ERROR(
      check_stride(ld_src_name, ld_src, pack ? cols : packed_bytes, pack ? "elements" : "bytes"));
  LLMK_RETURN_IF_ERROR(
      check_stride(ld_dst_name, ld_dst, pack ? packed_bytes : cols, pack ? "bytes" : "elements"));
  if (rows == 0 || cols == 0) return {};
  if (src == nullptr) return Status::invalid_argument(src_name, "must not be null");
  if (dst == nullptr) return Status::invalid_argument(dst_name, "must not be null");
  Int4PackArgs a{static_cast<const std::uint8_t*>(src),
                 ld_src,
                 static_cast<std::uint8_t*>(dst),
                 ld_dst,
                 rows,
                 cols,
                 std::is_same_v<S, int4_t>,
                 vec_ok(src, ld_src) && vec_ok(dst, ld_dst)};
  const std::int64_t chunks = static_cast<std::int64_t>(rows) * ceil_div<std::int64_t>(cols, 32);
  return launch(pack ? pack_int4_kernel<> : unpack_int4_kernel<>, dim3(elementwise_blocks(chunks)),
                dim3(elementwise_threads(chunks)), 0, stream, a);
}
}  // namespace detail

/// Packs int8 codes [rows, cols] (row stride ld_codes) two per byte into packed [rows, ceil(cols / 2)] bytes
/// (row stride ld_packed_bytes), element 2i in the low nibble of byte i (llmk/core/int4.cuh); an odd row's
/// last high nibble is 0. S = llmk::int4_t takes int8_t codes and SATURATES them to [-8, 7]; S =
/// llmk::uint4_t takes uint8_t codes saturated to [0, 15] (never masked: 9 stays 7 for int4, not -7).
///
/// Rules (each violation returns Status::invalid_argument naming the argument): rows, cols >= 0; ld_codes >=
/// cols; ld_packed_bytes >= ceil(cols / 2); codes, packed non-null unless empty. 16-byte vectors (32 codes ->
/// 16 bytes) when both tensors are 16-byte aligned. One launch.
///
///   llmk::Status s =
///       llmk::quant::pack_int4<llmk::int4_t>(codes, cols, packed, (cols + 1) / 2, rows, cols, stream);
template <detail::Int4Storage S>
Status pack_int4(const detail::Int4Code<S>* codes, std::int64_t ld_codes, void* packed,
                 std::int64_t ld_packed_bytes, int rows, int cols, cudaStream_t stream) {
  return detail::int4_pack_common<S>(true, codes, ld_codes, packed, ld_packed_bytes, rows, cols, stream);
}

/// Unpacks [rows, ceil(cols / 2)] packed bytes into int8 codes [rows, cols] (int4: sign-extended to [-8, 7];
/// uint4: [0, 15]); the padding nibble of an odd row is ignored.
///
/// Rules: as pack_int4 (ld_packed_bytes >= ceil(cols / 2), ld_codes >= cols). One launch.
///
///   llmk::Status s = llmk::quant::unpack_int4<llmk::int4_t>(packed, (cols + 1) / 2, codes, cols, rows, cols,
///                                                           stream);
template <detail::Int4Storage S>
Status unpack_int4(const void* packed, std::int64_t ld_packed_bytes, detail::Int4Code<S>* codes,
                   std::int64_t ld_codes, int rows, int cols, cudaStream_t stream) {
  return detail::int4_pack_common<S>(false, packed, ld_packed_bytes, codes, ld_codes, rows, cols, stream);
}

}  // namespace llmk::quant
