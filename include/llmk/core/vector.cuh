// llmk/core/vector.cuh: aligned 4/8/16-byte vector loads and stores.
//
// On the device each load/store is ONE memory instruction (ld/st .v4.u32, .v2.u32, .u32): that is why
// the pointer must be aligned to the access width; a misaligned vector access faults on the GPU. The
// simulator checks the alignment and fails the launch with the caller's source line; plain host builds
// check it with assert().
#pragma once

#include "llmk/config.cuh"

#include <cstdint>
#include <cstring>

#if defined(LLMK_SIM) && __has_include("llmk/sim/runtime.hpp")
#include <string>
#include "llmk/sim/runtime.hpp"
#define LLMK_VECTOR_SIM_CHECK 1
#elif !LLMK_DEVICE_PASS
#include <cassert>
#endif

// Forwards the caller's source location (simulator only) as a trailing argument.
#if defined(LLMK_SIM)
#define LLMK_VECTOR_LOC_ARG , LLMK_LOC_FWD
#else
#define LLMK_VECTOR_LOC_ARG
#endif

namespace llmk {

/// `kBytes / sizeof(T)` elements of T moved as one aligned unit.
///   llmk::Vector16<llmk::half> v = llmk::load16(src);   // 8 halves
///   v.elements[0] = llmk::half(0.f);
///   llmk::store16(dst, v);
template <class T, int kBytes>
struct alignas(kBytes) AlignedVector {
  static_assert(kBytes % sizeof(T) == 0, "the element size must divide the vector width");
  static constexpr int kSize = int(kBytes / sizeof(T));
  T elements[kSize];
};

/// AlignedVector of 16, 8 and 4 bytes: what load16/load8/load4 return (example: AlignedVector).
template <class T>
using Vector16 = AlignedVector<T, 16>;
template <class T>
using Vector8 = AlignedVector<T, 8>;
template <class T>
using Vector4 = AlignedVector<T, 4>;

/// True when `pointer` is a multiple of `bytes` (a power of two or not).
///   if (!llmk::is_aligned(ptr, 16)) { /* take the scalar path */ }
LLMK_HOST_DEVICE bool is_aligned(const void* pointer, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

namespace detail {

// The device-side word type that makes one access of kBytes.
template <int kBytes>
struct AccessWord;
#if LLMK_DEVICE_PASS
template <>
struct AccessWord<16> {
  using type = ::uint4;
};
template <>
struct AccessWord<8> {
  using type = ::uint2;
};
template <>
struct AccessWord<4> {
  using type = uint32_t;
};
#endif

template <int kBytes>
LLMK_HOST_DEVICE void check_vector_alignment(const void* pointer, const char* operation LLMK_LOC_TAIL) {
#if defined(LLMK_VECTOR_SIM_CHECK)
  if (!is_aligned(pointer, kBytes)) {
    ::llmk::sim::fail(std::string(operation) + std::to_string(kBytes) + ": pointer is not " +
                          std::to_string(kBytes) +
                          "-byte aligned (a misaligned vector access faults on the GPU)",
                      LLMK_LOC_FWD);
  }
#elif !LLMK_DEVICE_PASS
  (void)operation;
  assert(is_aligned(pointer, kBytes) && "vector access needs a pointer aligned to its width");
#else
  (void)pointer;
  (void)operation;
#endif
}

template <int kBytes, class T>
LLMK_HOST_DEVICE AlignedVector<T, kBytes> load_vector(const T* source LLMK_LOC_TAIL) {
  check_vector_alignment<kBytes>(source, "llmk::load" LLMK_VECTOR_LOC_ARG);
  AlignedVector<T, kBytes> loaded;
#if LLMK_DEVICE_PASS
  using Word = typename AccessWord<kBytes>::type;
  *reinterpret_cast<Word*>(&loaded) = *reinterpret_cast<const Word*>(source);
#else
  std::memcpy(&loaded, source, kBytes);
#endif
  return loaded;
}

template <int kBytes, class T>
LLMK_HOST_DEVICE void store_vector(T* destination, const AlignedVector<T, kBytes>& value LLMK_LOC_TAIL) {
  check_vector_alignment<kBytes>(destination, "llmk::store" LLMK_VECTOR_LOC_ARG);
#if LLMK_DEVICE_PASS
  using Word = typename AccessWord<kBytes>::type;
  *reinterpret_cast<Word*>(destination) = *reinterpret_cast<const Word*>(&value);
#else
  std::memcpy(destination, &value, kBytes);
#endif
}

}  // namespace detail

/// Loads 16 bytes from a 16-byte-aligned address (one 128-bit access on the device).
///   const llmk::half* row = ...;                 // 16-byte aligned
///   llmk::Vector16<llmk::half> x = llmk::load16(row + 8 * i);
template <class T>
LLMK_HOST_DEVICE Vector16<T> load16(const T* source LLMK_LOC_TAIL) {
  return detail::load_vector<16>(source LLMK_VECTOR_LOC_ARG);
}
/// Loads 8 bytes from an 8-byte-aligned address:  llmk::Vector8<float> x = llmk::load8(p);
template <class T>
LLMK_HOST_DEVICE Vector8<T> load8(const T* source LLMK_LOC_TAIL) {
  return detail::load_vector<8>(source LLMK_VECTOR_LOC_ARG);
}
/// Loads 4 bytes from a 4-byte-aligned address:  llmk::Vector4<int8_t> x = llmk::load4(p);
template <class T>
LLMK_HOST_DEVICE Vector4<T> load4(const T* source LLMK_LOC_TAIL) {
  return detail::load_vector<4>(source LLMK_VECTOR_LOC_ARG);
}

/// Stores 16 bytes to a 16-byte-aligned address:  llmk::store16(dst, x);
template <class T>
LLMK_HOST_DEVICE void store16(T* destination, const Vector16<T>& value LLMK_LOC_TAIL) {
  detail::store_vector<16>(destination, value LLMK_VECTOR_LOC_ARG);
}
/// Stores 8 bytes to an 8-byte-aligned address:  llmk::store8(dst, x);
template <class T>
LLMK_HOST_DEVICE void store8(T* destination, const Vector8<T>& value LLMK_LOC_TAIL) {
  detail::store_vector<8>(destination, value LLMK_VECTOR_LOC_ARG);
}
/// Stores 4 bytes to a 4-byte-aligned address:  llmk::store4(dst, x);
template <class T>
LLMK_HOST_DEVICE void store4(T* destination, const Vector4<T>& value LLMK_LOC_TAIL) {
  detail::store_vector<4>(destination, value LLMK_VECTOR_LOC_ARG);
}

}  // namespace llmk

#undef LLMK_VECTOR_LOC_ARG
