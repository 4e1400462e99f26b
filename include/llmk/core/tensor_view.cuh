// llmk/core/tensor_view.cuh: how tensors cross llmk's API: a pointer, a shape and strides in elements,
// all 64-bit. A view owns nothing; it is passed to kernels by value. Host launchers validate views with
// the check_* helpers, which return a Status whose message names the tensor and the rule.
#pragma once

#include "llmk/config.cuh"
#include "llmk/core/status.cuh"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace llmk {

namespace detail {

// Element access for std::array that also compiles in device code: nvcc treats std::array's
// constexpr members as host-only unless --expt-relaxed-constexpr is given. std::array<int64_t, N> is
// an aggregate whose only member is int64_t[N], so its address is that of its first element.
template <std::size_t N>
LLMK_HOST_DEVICE const int64_t* array_elements(const std::array<int64_t, N>& values) {
  return reinterpret_cast<const int64_t*>(&values);
}
template <std::size_t N>
LLMK_HOST_DEVICE int64_t* array_elements(std::array<int64_t, N>& values) {
  return reinterpret_cast<int64_t*>(&values);
}

// "[4, 8]"; with `negative_is_wildcard`, negative entries (kAnyExtent) print as "*".
template <std::size_t N>
std::string format_extents(const std::array<int64_t, N>& values, bool negative_is_wildcard = false) {
  std::string text = "[";
  for (std::size_t d = 0; d < N; ++d) {
    if (d) text += ", ";
    text += (negative_is_wildcard && values[d] < 0) ? std::string("*") : std::to_string(values[d]);
  }
  return text + "]";
}

}  // namespace detail

/// A strided view of a Rank-dimensional tensor; shape and stride are counted in elements.
///   llmk::TensorView<const llmk::half, 2> a{a_ptr, {m, k}, {lda, 1}};
///   llmk::half x = a(i, j);                       // a_ptr[i * lda + j], 64-bit offset
///   LLMK_RETURN_IF_ERROR(a.check_not_null("a"));
///   LLMK_RETURN_IF_ERROR(a.check_shape("a", {m, k}));
template <class T, int Rank>
struct TensorView {
  static_assert(Rank >= 1, "a TensorView has at least one dimension");
  using element_type = T;
  static constexpr int kRank = Rank;
  /// Entry of an expected shape that matches any extent (for check_shape).
  static constexpr int64_t kAnyExtent = -1;

  T* data = nullptr;
  std::array<int64_t, Rank> shape{};
  std::array<int64_t, Rank> stride{};

  /// Offset in elements of element (indices...):  sum of index[d] * stride[d], in 64 bits.
  template <class... Indices>
  requires(sizeof...(Indices) == Rank && (std::is_integral_v<Indices> && ...)) LLMK_HOST_DEVICE int64_t
      offset(Indices... indices)
  const {
    const int64_t index_values[Rank] = {int64_t(indices)...};
    const int64_t* strides = detail::array_elements(stride);
    int64_t element_offset = 0;
    for (int d = 0; d < Rank; ++d) element_offset += index_values[d] * strides[d];
    return element_offset;
  }
  /// Reference to element (indices...):  view(i, j) = value;
  template <class... Indices>
  requires(sizeof...(Indices) == Rank && (std::is_integral_v<Indices> && ...)) LLMK_HOST_DEVICE T& operator()(
      Indices... indices) const {
    return data[offset(indices...)];
  }
  /// Extent of dimension `dim`.
  LLMK_HOST_DEVICE int64_t extent(int dim) const { return detail::array_elements(shape)[dim]; }
  /// Stride of dimension `dim`, in elements.
  LLMK_HOST_DEVICE int64_t stride_of(int dim) const { return detail::array_elements(stride)[dim]; }
  /// Number of elements (product of the shape).
  LLMK_HOST_DEVICE int64_t numel() const {
    int64_t count = 1;
    for (int d = 0; d < Rank; ++d) count *= extent(d);
    return count;
  }
  /// A view of the same elements as const.
  template <class ConstT>
  requires(std::is_same_v<ConstT, const T> && !std::is_const_v<T>) LLMK_HOST_DEVICE
  operator TensorView<ConstT, Rank>() const {
    return {data, shape, stride};
  }

  // ---- host validation: each returns ok or an invalid_argument naming `name` ----

  /// "invalid argument 'a': data must not be null"
  Status check_not_null(std::string_view name) const {
    if (data == nullptr) return Status::invalid_argument(name, "data must not be null");
    return {};
  }
  /// Shape equals `expected`; entries equal to kAnyExtent match anything.
  /// "invalid argument 'a': shape must be [128, 64] (got [128, 63])"
  Status check_shape(std::string_view name, const std::array<int64_t, Rank>& expected) const {
    for (int d = 0; d < Rank; ++d) {
      if (expected[d] != kAnyExtent && expected[d] != shape[d]) {
        return Status::invalid_argument(
            name, str_cat("shape must be ", detail::format_extents(expected, true), " (got ",
                          detail::format_extents(shape), ")"));
      }
    }
    return {};
  }
  /// Every extent and stride is >= 0 (llmk kernels do not walk backwards).
  Status check_non_negative(std::string_view name) const {
    for (int d = 0; d < Rank; ++d) {
      if (shape[d] < 0 || stride[d] < 0) {
        return Status::invalid_argument(
            name, str_cat("extents and strides must be >= 0 (shape=", detail::format_extents(shape),
                          ", stride=", detail::format_extents(stride), ")"));
      }
    }
    return {};
  }
  /// The last dimension is contiguous (stride 1), which vectorized kernels need.
  Status check_contiguous_last_dim(std::string_view name) const {
    if (stride[Rank - 1] != 1) {
      return Status::invalid_argument(name, str_cat("last dimension must be contiguous (stride[", Rank - 1,
                                                    "] must be 1, got ", stride[Rank - 1], ")"));
    }
    return {};
  }
  /// Densely packed row-major: stride[last] == 1 and stride[d] == stride[d+1] * shape[d+1].
  Status check_row_major(std::string_view name) const {
    int64_t expected_stride = 1;
    for (int d = Rank - 1; d >= 0; --d) {
      if (stride[d] != expected_stride) {
        return Status::invalid_argument(name, str_cat("must be packed row-major (stride[", d, "] must be ",
                                                      expected_stride, ", got ", stride[d], ")"));
      }
      expected_stride *= shape[d];
    }
    return {};
  }
  /// The data pointer and every stride except the last, in bytes, are multiples of `bytes`, so every
  /// row start admits `bytes`-wide vector accesses.
  /// "invalid argument 'a': stride[0] (100 elements of 2 bytes) must be a multiple of 16 bytes"
  Status check_aligned(std::string_view name, std::size_t bytes) const {
    if (reinterpret_cast<std::uintptr_t>(data) % bytes != 0) {
      return Status::invalid_argument(name, str_cat("data pointer must be ", bytes, "-byte aligned (address ",
                                                    static_cast<const void*>(data), ")"));
    }
    for (int d = 0; d + 1 < Rank; ++d) {
      const int64_t stride_bytes = stride[d] * int64_t(sizeof(T));
      if (stride_bytes % int64_t(bytes) != 0) {
        return Status::invalid_argument(name,
                                        str_cat("stride[", d, "] (", stride[d], " elements of ", sizeof(T),
                                                " bytes) must be a multiple of ", bytes, " bytes"));
      }
    }
    return {};
  }
};

/// A packed row-major view over `data` with the given extents.
///   auto a = llmk::make_row_major(ptr, m, k);     // TensorView<T, 2>{ptr, {m, k}, {k, 1}}
template <class T, class... Extents>
requires(sizeof...(Extents) >= 1 && (std::is_integral_v<Extents> && ...))
    LLMK_HOST_DEVICE TensorView<T, int(sizeof...(Extents))> make_row_major(T* data, Extents... extents) {
  constexpr int kRank = int(sizeof...(Extents));
  TensorView<T, kRank> view;
  view.data = data;
  int64_t* shape = detail::array_elements(view.shape);
  int64_t* stride = detail::array_elements(view.stride);
  const int64_t extent_values[kRank] = {int64_t(extents)...};
  int64_t next_stride = 1;
  for (int d = kRank - 1; d >= 0; --d) {
    shape[d] = extent_values[d];
    stride[d] = next_stride;
    next_stride *= extent_values[d];
  }
  return view;
}
/// Same, from a std::array shape:  auto v = llmk::make_row_major(ptr, std::array<int64_t, 3>{b, m, n});
template <class T, std::size_t Rank>
LLMK_HOST_DEVICE TensorView<T, int(Rank)> make_row_major(T* data, const std::array<int64_t, Rank>& shape) {
  const int64_t* extents = detail::array_elements(shape);
  TensorView<T, int(Rank)> view;
  view.data = data;
  int64_t* shape_out = detail::array_elements(view.shape);
  int64_t* stride_out = detail::array_elements(view.stride);
  int64_t next_stride = 1;
  for (int d = int(Rank) - 1; d >= 0; --d) {
    shape_out[d] = extents[d];
    stride_out[d] = next_stride;
    next_stride *= extents[d];
  }
  return view;
}

/// Host check that a typed pointer is aligned to its element type (a misaligned pointer is a fault on the
/// GPU). A null pointer passes: null checks are separate.
///   LLMK_RETURN_IF_ERROR(llmk::check_element_alignment<float>("scales", scales));
///
/// Errors: p not a multiple of alignof(T) (invalid_argument naming `name`).
template <class T>
Status check_element_alignment(std::string_view name, const void* p) {
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0)
    return Status::invalid_argument(name,
                                    str_cat("must be aligned to its element size (", alignof(T), " bytes)"));
  return {};
}

/// Whether the byte ranges [p, p + bytes) and [q, q + bytes_q) overlap (host arithmetic on addresses: the
/// launchers' aliasing checks).
///   if (llmk::ranges_overlap(out, out_bytes, in, in_bytes))
///     return llmk::Status::invalid_argument("out", "must not overlap in");
inline bool ranges_overlap(const void* p, std::int64_t bytes, const void* q, std::int64_t bytes_q) {
  const auto a = reinterpret_cast<std::uintptr_t>(p), b = reinterpret_cast<std::uintptr_t>(q);
  return a < b + static_cast<std::uintptr_t>(bytes_q) && b < a + static_cast<std::uintptr_t>(bytes);
}

}  // namespace llmk
