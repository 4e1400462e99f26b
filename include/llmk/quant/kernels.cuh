// llmk/quant/kernels.cuh: quantization kernels and their host launchers.
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
#include "llmk/core/numeric.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"
#include "llmk/core/vector.cuh"
#include "llmk/quant/scheme.cuh"

namespace llmk::quant {

/// The element types quantization reads and dequantization writes.
template <class T>
concept FloatTensorType = std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

namespace detail {

inline constexpr int kElementwiseThreads = 256;
inline constexpr std::int64_t kElementwiseMaxBlocks = 4096;  // grid-stride beyond this
inline constexpr int kRowMaxThreads = 256;
inline constexpr int kRangeMaxBlocks = 1024;  // blocks of the per-tensor reduction (one atomic each)
/// quantize_dynamic keeps a row in shared memory when it fits in this many bytes; longer rows are read twice
/// (reduction pass, then quantization pass; the second read mostly hits L2).
inline constexpr std::size_t kRowResidentBytes = 64 * 1024;
inline constexpr unsigned kFullMask = 0xffffffffu;

// Codes per 16-byte chunk of quantized storage: 16 (8-bit) or 32 (4-bit).
template <class S>
inline constexpr int kChunkElements = StorageTraits<S>::kPacked ? 32 : 16;

// Storage bits of one code (an 8-bit pattern, or a 4-bit nibble for packed storage).
template <class Q>
LLMK_HOST_DEVICE std::uint32_t code_to_bits(typename Q::Code code) {
  if constexpr (Q::kIsFloat)
    return code.bits;
  else if constexpr (Q::traits::kPacked)
    return static_cast<std::uint32_t>(code) & 0xFu;
  else
    return static_cast<std::uint32_t>(code) & 0xFFu;
}

// The code stored in `bits` (the low 8 bits, or the low nibble for packed storage).
template <class Q>
LLMK_HOST_DEVICE typename Q::Code code_from_bits(std::uint32_t bits) {
  using S = typename Q::storage_type;
  if constexpr (Q::kIsFloat) {
    return S::from_bits(static_cast<std::uint8_t>(bits));
  } else if constexpr (Q::traits::kPacked) {
    const std::uint32_t nibble = bits & 0xFu;
    return Q::traits::kSigned ? static_cast<int>(nibble << 28) >> 28 : static_cast<int>(nibble);
  } else {
    return Q::traits::kSigned ? static_cast<int>(static_cast<std::int8_t>(bits & 0xFFu))
                              : static_cast<int>(bits & 0xFFu);
  }
}

// |x| by clearing the sign bit (so -0 becomes +0 and amax bit patterns order like unsigned integers).
LLMK_HOST_DEVICE float abs_bits(float x) {
  return llmk::detail::bits_to_float(llmk::detail::float_to_bits(x) & 0x7FFFFFFFu);
}

// Order-preserving map float -> uint32 (for atomicMin/atomicMax on signed floats) and its inverse.
LLMK_HOST_DEVICE std::uint32_t ordered_key(float x) {
  const std::uint32_t b = llmk::detail::float_to_bits(x);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
LLMK_HOST_DEVICE float from_ordered_key(std::uint32_t k) {
  return llmk::detail::bits_to_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}

// Running range of the finite values seen so far, starting from 0 (equivalent for the schemes: the asymmetric
// range always holds 0, and amax >= 0). kMinMax: min and max; otherwise only the absolute maximum (in `hi`).
template <bool kMinMax>
struct FiniteRange {
  float lo = 0.0f, hi = 0.0f;
  LLMK_HOST_DEVICE void add(float v) {
    if (!is_finite(v)) return;
    if constexpr (kMinMax) {
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    } else {
      const float a = abs_bits(v);
      hi = a > hi ? a : hi;
    }
  }
  LLMK_HOST_DEVICE void merge(float other_lo, float other_hi) {
    if constexpr (kMinMax) lo = other_lo < lo ? other_lo : lo;
    hi = other_hi > hi ? other_hi : hi;
  }
};

template <bool kMinMax>
LLMK_DEVICE void warp_reduce(FiniteRange<kMinMax>& r) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    float other_lo = 0.0f;
    if constexpr (kMinMax) other_lo = __shfl_xor_sync(kFullMask, r.lo, offset);
    const float other_hi = __shfl_xor_sync(kFullMask, r.hi, offset);
    r.merge(other_lo, other_hi);
  }
}

// Scratch of the block reductions (the row kernel keeps its resident row right after it).
struct alignas(16) ReduceSmem {
  float warp_lo[32];
  float warp_hi[32];
  QuantParams row_params;
  std::uint32_t pad[2];
};
static_assert(sizeof(ReduceSmem) % 16 == 0, "the resident row after ReduceSmem must stay 16-byte aligned");

// Block-wide reduction; every thread of the block must call it (blockDim.x a multiple of 32). The result is
// valid in thread 0. Ends without a barrier: callers synchronise before reusing `smem`.
template <bool kMinMax>
LLMK_DEVICE void block_reduce(FiniteRange<kMinMax>& r, ReduceSmem& smem) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  warp_reduce(r);
  if (lane == 0) {
    smem.warp_lo[warp] = r.lo;
    smem.warp_hi[warp] = r.hi;
  }
  __syncthreads();
  if (warp == 0) {
    r.lo = lane < warps ? smem.warp_lo[lane] : 0.0f;
    r.hi = lane < warps ? smem.warp_hi[lane] : 0.0f;
    warp_reduce(r);
  }
}

template <class Q, bool kMinMax>
LLMK_HOST_DEVICE QuantParams params_of(const FiniteRange<kMinMax>& r) {
  if constexpr (Q::kAsymmetric)
    return Q::params_from_range(r.lo, r.hi);
  else
    return Q::params_from_absmax(r.hi);
}

// Where a chunk finds its parameters: fixed ones (group <= 0), or scales[base + c / group] (and zero points).
struct ParamCursor {
  const float* scales;
  const std::int32_t* zero_points;
  std::int64_t base;
  int group;
  QuantParams fixed;
};

template <class Q>
LLMK_DEVICE QuantParams load_params(const ParamCursor& pc, std::int64_t index) {
  QuantParams p{pc.scales[index], 0};
  if constexpr (Q::kAsymmetric) p.zero_point = pc.zero_points[index];
  return p;
}

// The parameters of element c0 of a row, and the column where the next group starts.
template <class Q>
LLMK_DEVICE QuantParams first_params(const ParamCursor& pc, int c0, std::int64_t& index, std::int64_t& next) {
  if (pc.group > 0) {
    const int g = c0 / pc.group;
    index = pc.base + g;
    next = static_cast<std::int64_t>(g + 1) * pc.group;
    return load_params<Q>(pc, index);
  }
  index = 0;
  next = LLONG_MAX;
  return pc.fixed;
}

// Quantizes elements [c0, c0 + n) (n <= kChunkElements) of one row: reads them from `src` (16-byte vectors
// when src_vec and the chunk is full), writes one 16-byte chunk of codes to `dst` (scalar bytes for a partial
// chunk or when !dst_vec; an odd packed tail gets a zero high nibble). One input vector is live at a time.
template <class Q, class In>
LLMK_DEVICE void quantize_chunk(const In* src, bool src_vec, std::uint8_t* dst, bool dst_vec, int c0, int n,
                                const ParamCursor& pc) {
  using S = typename Q::storage_type;
  constexpr int kE = kChunkElements<S>;
  constexpr int kIn = 16 / static_cast<int>(sizeof(In));
  constexpr bool kPacked = StorageTraits<S>::kPacked;
  const bool full = n == kE;
  std::int64_t index, next;
  QuantParams p = first_params<Q>(pc, c0, index, next);
  std::uint32_t words[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int i = 0; i < kE / kIn; ++i) {
    float v[kIn];
    if (src_vec && full) {
      const Vector16<In> w = load16(src + c0 + i * kIn);
#pragma unroll
      for (int k = 0; k < kIn; ++k) v[k] = load_as_float(w.elements[k]);
    } else {
#pragma unroll
      for (int k = 0; k < kIn; ++k) v[k] = i * kIn + k < n ? load_as_float(src[c0 + i * kIn + k]) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kIn; ++k) {
      const int j = i * kIn + k;
      if (j < n) {
        if (c0 + j == next) {  // entering the next group
          ++index;
          p = load_params<Q>(pc, index);
          next += pc.group;
        }
        const std::uint32_t bits = code_to_bits<Q>(Q::quantize(v[k], p));
        if constexpr (kPacked)
          words[j / 8] |= bits << (4 * (j % 8));
        else
          words[j / 4] |= bits << (8 * (j % 4));
      }
    }
  }
  const int offset = kPacked ? c0 / 2 : c0;
  if (dst_vec && full) {
    Vector16<std::uint32_t> w;
#pragma unroll
    for (int i = 0; i < 4; ++i) w.elements[i] = words[i];
    store16(reinterpret_cast<std::uint32_t*>(dst + offset), w);
  } else {
    const int bytes = kPacked ? (n + 1) / 2 : n;
#pragma unroll
    for (int b = 0; b < 16; ++b)
      if (b < bytes) dst[offset + b] = static_cast<std::uint8_t>(words[b / 4] >> (8 * (b % 4)));
  }
}

// Dequantizes elements [c0, c0 + n) of one row (the inverse layout of quantize_chunk). One output vector is
// live at a time.
template <class Q, class Out>
LLMK_DEVICE void dequantize_chunk(const std::uint8_t* src, bool src_vec, Out* dst, bool dst_vec, int c0,
                                  int n, const ParamCursor& pc) {
  using S = typename Q::storage_type;
  constexpr int kE = kChunkElements<S>;
  constexpr int kOut = 16 / static_cast<int>(sizeof(Out));
  constexpr bool kPacked = StorageTraits<S>::kPacked;
  const bool full = n == kE;
  const int offset = kPacked ? c0 / 2 : c0;
  std::uint32_t words[4] = {0u, 0u, 0u, 0u};
  if (src_vec && full) {
    const Vector16<std::uint32_t> w = load16(reinterpret_cast<const std::uint32_t*>(src + offset));
#pragma unroll
    for (int i = 0; i < 4; ++i) words[i] = w.elements[i];
  } else {
    const int bytes = kPacked ? (n + 1) / 2 : n;
#pragma unroll
    for (int b = 0; b < 16; ++b)
      if (b < bytes) words[b / 4] |= static_cast<std::uint32_t>(src[offset + b]) << (8 * (b % 4));
  }
  std::int64_t index, next;
  QuantParams p = first_params<Q>(pc, c0, index, next);
#pragma unroll
  for (int i = 0; i < kE / kOut; ++i) {
    Vector16<Out> o;
#pragma unroll
    for (int k = 0; k < kOut; ++k) {
      const int j = i * kOut + k;
      float value = 0.0f;
      if (j < n) {
        if (c0 + j == next) {
          ++index;
          p = load_params<Q>(pc, index);
          next += pc.group;
        }
        const std::uint32_t bits =
            kPacked ? (words[j / 8] >> (4 * (j % 8))) : (words[j / 4] >> (8 * (j % 4)));
        value = Q::dequantize(code_from_bits<Q>(bits), p);
      }
      o.elements[k] = convert_output<Out>(value);
    }
    if (dst_vec && full) {
      store16(dst + c0 + i * kOut, o);
    } else {
#pragma unroll
      for (int k = 0; k < kOut; ++k)
        if (i * kOut + k < n) dst[c0 + i * kOut + k] = o.elements[k];
    }
  }
}

// ---- kernel arguments
// ------------------------------------------------------------------------------------------

template <class In>
struct QuantizeArgs {
  const In* x;
  std::int64_t ldx;
  std::uint8_t* q;
  std::int64_t ldq;
  int rows, cols;
  const float* scales;
  const std::int32_t* zero_points;
  std::int64_t params_per_row;  // 0 per-tensor, 1 per-row, cols / group for group-wise
  int group;                    // elements sharing one parameter set along a row (cols unless group-wise)
  // Dynamic per-tensor: the reduced range (amax bits, or ordered min/max keys); block 0 writes the
  // parameters.
  const std::uint32_t* range;
  float* scale_out;
  std::int32_t* zero_point_out;
  bool in_vec, out_vec;
};

template <class Out>
struct DequantizeArgs {
  const std::uint8_t* q;
  std::int64_t ldq;
  Out* y;
  std::int64_t ldy;
  int rows, cols;
  const float* scales;
  const std::int32_t* zero_points;
  std::int64_t params_per_row;
  int group;
  bool in_vec, out_vec;
};

template <class In>
struct RowQuantizeArgs {
  const In* x;
  std::int64_t ldx;
  std::uint8_t* q;
  std::int64_t ldq;
  int rows, cols;
  float* scales;
  std::int32_t* zero_points;
  int group;           // group-wise: the group size; per-row: cols
  int groups_per_row;  // 1 for per-row
  bool grouped, resident, in_vec, out_vec;
};

template <class In>
struct RangeArgs {
  const In* x;
  std::int64_t ldx;
  int rows, cols;
  std::uint32_t* out;  // min/max: ordered keys out[0], out[1]; amax: float bits out[0]
  bool min_max, in_vec;
};

template <class In>
struct RowAmaxArgs {
  const In* x;
  std::int64_t ldx;
  int rows, cols;
  float* amax;
  bool in_vec;
};

struct Int4PackArgs {
  const std::uint8_t* src;
  std::int64_t ld_src;  // bytes
  std::uint8_t* dst;
  std::int64_t ld_dst;  // bytes
  int rows, cols;
  bool is_signed, vec;
};

// ---- kernels
// ---------------------------------------------------------------------------------------------------

/// Static quantization (and the last step of dynamic per-tensor): a grid-stride loop over 16-byte chunks of
/// codes.
// Grid-stride loop over the kE-element chunks of a [rows, cols] tensor: f(row, first column, element count).
template <int kE, class F>
LLMK_DEVICE void for_each_chunk(int rows, int cols, F&& f) {
  const std::int64_t chunks_per_row = ceil_div<std::int64_t>(cols, kE);
  const std::int64_t total = static_cast<std::int64_t>(rows) * chunks_per_row;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int c0 = static_cast<int>(i % chunks_per_row) * kE;
    f(i / chunks_per_row, c0, min(kE, cols - c0));
  }
}

template <class Q, class In>
__global__ void __launch_bounds__(kElementwiseThreads) quantize_kernel(QuantizeArgs<In> a) {
  constexpr int kE = kChunkElements<typename Q::storage_type>;
  ParamCursor pc{a.scales, a.zero_points, 0, a.group, QuantParams{1.0f, 0}};
  if (a.range != nullptr) {
    FiniteRange<Q::kAsymmetric> r;
    if constexpr (Q::kAsymmetric) {
      r.lo = from_ordered_key(a.range[0]);
      r.hi = from_ordered_key(a.range[1]);
    } else {
      r.hi = llmk::detail::bits_to_float(a.range[0]);
    }
    pc.fixed = params_of<Q>(r);
    pc.group = 0;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      a.scale_out[0] = pc.fixed.scale;
      if constexpr (Q::kAsymmetric) a.zero_point_out[0] = pc.fixed.zero_point;
    }
  }
  for_each_chunk<kE>(a.rows, a.cols, [&](std::int64_t row, int c0, int count) {
    pc.base = row * a.params_per_row;
    quantize_chunk<Q, In>(a.x + row * a.ldx, a.in_vec, a.q + row * a.ldq, a.out_vec, c0, count, pc);
  });
}

/// Dequantization: a grid-stride loop over 16-byte chunks of codes.
template <class Q, class Out>
__global__ void __launch_bounds__(kElementwiseThreads) dequantize_kernel(DequantizeArgs<Out> a) {
  constexpr int kE = kChunkElements<typename Q::storage_type>;
  ParamCursor pc{a.scales, a.zero_points, 0, a.group, QuantParams{1.0f, 0}};
  for_each_chunk<kE>(a.rows, a.cols, [&](std::int64_t row, int c0, int count) {
    pc.base = row * a.params_per_row;
    dequantize_chunk<Q, Out>(a.q + row * a.ldq, a.in_vec, a.y + row * a.ldy, a.out_vec, c0, count, pc);
  });
}

/// Fused dynamic quantization of one row per block: (1) read the row once (16-byte vectors) into shared
/// memory and reduce its finite range, (2) per-row: one block reduction -> parameters; group-wise: one warp
/// per group over the resident row, (3) write the parameters and quantize the row from shared memory. Rows
/// longer than kRowResidentBytes are not kept: steps 2 and 3 read global memory again.
template <class Q, class In>
__global__ void __launch_bounds__(kRowMaxThreads) quantize_rows_dynamic_kernel(RowQuantizeArgs<In> a) {
  constexpr int kE = kChunkElements<typename Q::storage_type>;
  constexpr int kIn = 16 / static_cast<int>(sizeof(In));
  constexpr bool kMinMax = Q::kAsymmetric;
  ReduceSmem& smem = shared_storage<ReduceSmem>();
  // The resident row follows the reduction scratch in the same dynamic arena (the launcher sizes it).
  In* resident = reinterpret_cast<In*>(reinterpret_cast<unsigned char*>(&smem) + sizeof(ReduceSmem));
  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  const int lane = tid % 32, warp = tid / 32, warps = threads / 32;
  const std::int64_t row = blockIdx.x;
  const In* x = a.x + row * a.ldx;
  std::uint8_t* q = a.q + row * a.ldq;

  // (1) read the row once
  FiniteRange<kMinMax> range;
  if (a.resident || !a.grouped) {
    const int full = a.in_vec ? a.cols / kIn : 0;
    for (int i = tid; i < full; i += threads) {
      const Vector16<In> w = load16(x + i * kIn);
      if (a.resident) store16(resident + i * kIn, w);
      if (!a.grouped) {
#pragma unroll
        for (int k = 0; k < kIn; ++k) range.add(load_as_float(w.elements[k]));
      }
    }
    for (int c = full * kIn + tid; c < a.cols; c += threads) {
      const In v = x[c];
      if (a.resident) resident[c] = v;
      if (!a.grouped) range.add(load_as_float(v));
    }
  }
  const In* src = a.resident ? resident : x;
  const bool src_vec = a.resident || a.in_vec;

  // (2) parameters
  ParamCursor pc{a.scales, a.zero_points, row * a.groups_per_row, 0, QuantParams{1.0f, 0}};
  if (!a.grouped) {
    block_reduce(range, smem);
    if (tid == 0) {
      const QuantParams p = params_of<Q>(range);
      smem.row_params = p;
      a.scales[row] = p.scale;
      if constexpr (Q::kAsymmetric) a.zero_points[row] = p.zero_point;
    }
    __syncthreads();
    pc.fixed = smem.row_params;
  } else {
    __syncthreads();  // the resident row is complete
    for (int g = warp; g < a.groups_per_row; g += warps) {
      FiniteRange<kMinMax> gr;
      const int begin = g * a.group, end = begin + a.group;
      for (int c = begin + lane; c < end; c += 32) gr.add(load_as_float(src[c]));
      warp_reduce(gr);
      if (lane == 0) {
        const QuantParams p = params_of<Q>(gr);
        a.scales[pc.base + g] = p.scale;
        if constexpr (Q::kAsymmetric) a.zero_points[pc.base + g] = p.zero_point;
      }
    }
    __syncthreads();  // every group's parameters are written (and visible to the block)
    pc.group = a.group;
  }

  // (3) quantize
  const std::int64_t chunks = ceil_div<std::int64_t>(a.cols, kE);
  for (int k = tid; k < chunks; k += threads)
    quantize_chunk<Q, In>(src, src_vec, q, a.out_vec, k * kE, min(kE, a.cols - k * kE), pc);
}

/// Per-tensor range: each block reduces a grid-stride share, thread 0 folds it in with one atomic per value.
/// Kept by hand next to llmk::device::reduce_max_abs (CUB) on static evidence (docs/architecture.md): CUB's
/// reduce kernel for llmk::half reads 2 bytes per load (LDG.E.U16, sm_90a SASS), this one 16 (LDG.E.128);
/// it also gives min / max in one pass and needs no workspace. BM_TensorAmax / BM_TensorAmaxCub time the
/// pair.
template <class In>
__global__ void __launch_bounds__(kElementwiseThreads) range_reduce_kernel(RangeArgs<In> a) {
  constexpr int kIn = 16 / static_cast<int>(sizeof(In));
  ReduceSmem& smem = shared_storage<ReduceSmem>();
  const std::int64_t vecs_per_row = ceil_div<std::int64_t>(a.cols, kIn);
  const std::int64_t total = static_cast<std::int64_t>(a.rows) * vecs_per_row;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  FiniteRange<true> r;  // min/max; amax is max(-min, max)
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const std::int64_t row = i / vecs_per_row;
    const int c0 = static_cast<int>(i % vecs_per_row) * kIn;
    const In* x = a.x + row * a.ldx + c0;
    if (a.in_vec && c0 + kIn <= a.cols) {
      const Vector16<In> w = load16(x);
#pragma unroll
      for (int k = 0; k < kIn; ++k) r.add(load_as_float(w.elements[k]));
    } else {
      for (int k = 0; k < kIn && c0 + k < a.cols; ++k) r.add(load_as_float(x[k]));
    }
  }
  block_reduce(r, smem);
  if (threadIdx.x == 0) {
    if (a.min_max) {
      atomicMin(&a.out[0], ordered_key(r.lo));
      atomicMax(&a.out[1], ordered_key(r.hi));
    } else {
      const float amax = max(abs_bits(r.lo), abs_bits(r.hi));
      atomicMax(&a.out[0], llmk::detail::float_to_bits(amax));  // amax >= +0: its bits order like the values
    }
  }
}

/// Sets the per-tensor reduction's accumulators before range_reduce_kernel folds blocks into them. (The
/// template parameter only gives the header-defined kernel template linkage.)
template <int kUnused = 0>
__global__ void range_init_kernel(std::uint32_t* out, std::uint32_t first, std::uint32_t second, int count) {
  if (threadIdx.x == 0) {
    out[0] = first;
    if (count > 1) out[1] = second;
  }
}

/// Per-row amax: one warp per row, 8 rows per block.
template <class In>
__global__ void __launch_bounds__(kElementwiseThreads) row_amax_kernel(RowAmaxArgs<In> a) {
  constexpr int kIn = 16 / static_cast<int>(sizeof(In));
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * (kElementwiseThreads / 32) + threadIdx.x / 32;
  if (row >= a.rows) return;  // whole warps leave together; no block barrier follows
  const In* x = a.x + row * a.ldx;
  FiniteRange<false> r;
  const int full = a.in_vec ? a.cols / kIn : 0;
  for (int i = lane; i < full; i += 32) {
    const Vector16<In> w = load16(x + i * kIn);
#pragma unroll
    for (int k = 0; k < kIn; ++k) r.add(load_as_float(w.elements[k]));
  }
  for (int c = full * kIn + lane; c < a.cols; c += 32) r.add(load_as_float(x[c]));
  warp_reduce(r);
  if (lane == 0) a.amax[row] = r.hi;
}

/// int8 codes -> packed nibbles, 32 codes (two 16-byte loads) -> one 16-byte store per thread and step.
template <int kUnused = 0>
__global__ void __launch_bounds__(kElementwiseThreads) pack_int4_kernel(Int4PackArgs a) {
  const std::int64_t chunks_per_row = ceil_div<std::int64_t>(a.cols, 32);
  const std::int64_t total = static_cast<std::int64_t>(a.rows) * chunks_per_row;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const int lo = a.is_signed ? -8 : 0, hi = a.is_signed ? 7 : 15;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const std::int64_t row = i / chunks_per_row;
    const int c0 = static_cast<int>(i % chunks_per_row) * 32;
    const int n = min(32, a.cols - c0);
    const std::uint8_t* src = a.src + row * a.ld_src + c0;
    std::uint8_t* dst = a.dst + row * a.ld_dst + c0 / 2;
    std::uint32_t in[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
    if (a.vec && n == 32) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const Vector16<std::uint32_t> w = load16(reinterpret_cast<const std::uint32_t*>(src + 16 * h));
#pragma unroll
        for (int k = 0; k < 4; ++k) in[4 * h + k] = w.elements[k];
      }
    } else {
#pragma unroll
      for (int j = 0; j < 32; ++j)
        if (j < n) in[j / 4] |= static_cast<std::uint32_t>(src[j]) << (8 * (j % 4));
    }
    std::uint32_t out[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      if (j < n) {
        const std::uint32_t byte = (in[j / 4] >> (8 * (j % 4))) & 0xFFu;
        int v = a.is_signed ? static_cast<int>(static_cast<std::int8_t>(byte)) : static_cast<int>(byte);
        v = v < lo ? lo : (v > hi ? hi : v);  // saturate
        out[j / 8] |= (static_cast<std::uint32_t>(v) & 0xFu) << (4 * (j % 8));
      }
    }
    if (a.vec && n == 32) {
      Vector16<std::uint32_t> w;
#pragma unroll
      for (int k = 0; k < 4; ++k) w.elements[k] = out[k];
      store16(reinterpret_cast<std::uint32_t*>(dst), w);
    } else {
      const int bytes = (n + 1) / 2;
#pragma unroll
      for (int b = 0; b < 16; ++b)
        if (b < bytes) dst[b] = static_cast<std::uint8_t>(out[b / 4] >> (8 * (b % 4)));
    }
  }
}

/// Packed nibbles -> int8 codes (sign-extended for int4, zero-extended for uint4); an odd row's padding
/// nibble is ignored.
template <int kUnused = 0>
__global__ void __launch_bounds__(kElementwiseThreads) unpack_int4_kernel(Int4PackArgs a) {
  const std::int64_t chunks_per_row = ceil_div<std::int64_t>(a.cols, 32);
  const std::int64_t total = static_cast<std::int64_t>(a.rows) * chunks_per_row;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const std::int64_t row = i / chunks_per_row;
    const int c0 = static_cast<int>(i % chunks_per_row) * 32;
    const int n = min(32, a.cols - c0);
    const std::uint8_t* src = a.src + row * a.ld_src + c0 / 2;
    std::uint8_t* dst = a.dst + row * a.ld_dst + c0;
    std::uint32_t in[4] = {0u, 0u, 0u, 0u};
    if (a.vec && n == 32) {
      const Vector16<std::uint32_t> w = load16(reinterpret_cast<const std::uint32_t*>(src));
#pragma unroll
      for (int k = 0; k < 4; ++k) in[k] = w.elements[k];
    } else {
      const int bytes = (n + 1) / 2;
#pragma unroll
      for (int b = 0; b < 16; ++b)
        if (b < bytes) in[b / 4] |= static_cast<std::uint32_t>(src[b]) << (8 * (b % 4));
    }
    std::uint32_t out[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const std::uint32_t nibble = (in[j / 8] >> (4 * (j % 8))) & 0xFu;
      const std::uint32_t code =
          a.is_signed ? (static_cast<std::uint32_t>(static_cast<int>(nibble << 28) >> 28) & 0xFFu) : nibble;
      out[j / 4] |= code << (8 * (j % 4));
    }
    if (a.vec && n == 32) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        Vector16<std::uint32_t> w;
#pragma unroll
        for (int k = 0; k < 4; ++k) w.elements[k] = out[4 * h + k];
        store16(reinterpret_cast<std::uint32_t*>(dst + 16 * h), w);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 32; ++j)
        if (j < n) dst[j] = static_cast<std::uint8_t>(out[j / 4] >> (8 * (j % 4)));
    }
  }
}

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
/// it. The size is never 0, so the second call is never mistaken for a query; only PerTensor writes to it.
///
/// Rules: those of quantize, plus scales_out non-null (zero_points_out too when Asymmetric), workspace_bytes
/// non-null, *workspace_bytes >= the queried size, workspace 4-byte aligned.
///
///   using Q = llmk::quant::Quantizer<int8_t, llmk::quant::Symmetric, llmk::quant::PerToken>;
///   std::size_t ws_bytes = 0;
///   llmk::quant::quantize_dynamic<Q, llmk::half>(nullptr, hidden, nullptr, hidden, tokens, hidden, nullptr,
///   nullptr,
///                                               0, nullptr, &ws_bytes, stream);          // size query
///   llmk::DeviceBuffer<unsigned char> ws(ws_bytes);
///   llmk::Status s = llmk::quant::quantize_dynamic<Q>(x, hidden, q, hidden, tokens, hidden, scales, nullptr,
///   0,
///                                                     ws.data(), &ws_bytes, stream);
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
/// Rules: rows, cols >= 0; ldx >= cols; x, amax_out non-null unless empty; x aligned to its element size.
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
/// Rules: as row_amax, plus amax_out 4-byte aligned.
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
/// Rules: rows, cols >= 0; ld_codes >= cols; ld_packed_bytes >= ceil(cols / 2); codes, packed non-null unless
/// empty. 16-byte vectors (32 codes -> 16 bytes) when both tensors are 16-byte aligned. One launch.
///
///   llmk::Status s = llmk::quant::pack_int4<llmk::int4_t>(codes, cols, packed, (cols + 1) / 2, rows, cols,
///   stream);
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
