// llmk/quant/quantize_kernels.cuh: the device side of llmk/quant/kernels.cuh: the per-chunk quantize and
// dequantize steps, the finite-range reductions, the kernel arguments and the __global__ kernels. Users call
// the launchers in kernels.cuh (which includes this header); the layouts and rules are described there.
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

}  // namespace detail
}  // namespace llmk::quant
