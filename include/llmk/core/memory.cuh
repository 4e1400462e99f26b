// llmk/core/memory.cuh: device memory that works in both backends.
//
// On the GPU these wrap cudaMalloc/cudaMemcpy; in the simulator "device" memory is host memory (exact-size
// heap blocks, so AddressSanitizer catches kernel overruns). Fresh allocations are poisoned with 0xFF bytes
// (NaN in every float type) in both backends, so an output a kernel forgot to write never looks right.
// llmk's kernels never allocate: these helpers are for tests, examples, benchmarks and engines that want
// them.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

#include "llmk/config.cuh"
#include "llmk/core/status.cuh"

namespace llmk {

/// The byte fresh allocations are filled with (NaN in every float type, -1 as an integer).
inline constexpr unsigned char kPoisonByte = 0xFF;

/// Number of usable CUDA devices (always 0 in the simulator):  if (llmk::cuda_device_count() == 0) return;
inline int cuda_device_count() {
#if defined(LLMK_CUDA)
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}

namespace detail {

// Allocates `bytes` of device memory (256-byte aligned), not yet poisoned.
inline Status device_allocate(void** ptr, std::size_t bytes) {
  if (ptr == nullptr) return Status::invalid_argument("ptr", "must not be null");
  *ptr = nullptr;
  if (bytes == 0) return {};
#if defined(LLMK_CUDA)
  const cudaError_t e = cudaMalloc(ptr, bytes);
  if (e != cudaSuccess) {
    *ptr = nullptr;
    return Status::out_of_memory(str_cat("cudaMalloc(", bytes, "): ", cudaGetErrorString(e)));
  }
#else
  *ptr = ::operator new (bytes, std::align_val_t{256}, std::nothrow);
  if (*ptr == nullptr) return Status::out_of_memory(str_cat("host allocation of ", bytes, " bytes"));
#endif
  return {};
}

#if defined(LLMK_CUDA)
// Waits for the default stream's work (where cudaMemcpy / cudaMemset run, legacy or per-thread): they may
// return before the device finished (a device-to-device copy, the DMA of a pageable host-to-device copy, a
// memset), and a kernel on a non-blocking stream is not ordered after them.
inline Status finish_default_stream(const char* call, cudaError_t e) {
  if (e == cudaSuccess) e = cudaStreamSynchronize(nullptr);
  return e == cudaSuccess ? Status{} : Status::cuda_error(call, cudaGetErrorString(e));
}
#endif

// Poisons [ptr, ptr + bytes) in stream order.
inline Status poison_on(void* ptr, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return {};
#if defined(LLMK_CUDA)
  const cudaError_t e = cudaMemsetAsync(ptr, kPoisonByte, bytes, stream);
  if (e != cudaSuccess) return Status::cuda_error("cudaMemsetAsync", cudaGetErrorString(e));
#else
  (void)stream;
  std::memset(ptr, kPoisonByte, bytes);
#endif
  return {};
}

}  // namespace detail

/// Allocates `bytes` of device memory (256-byte aligned), poisoned; the poison is in place when it returns,
/// so a kernel on any stream (non-blocking ones included) reads it, never the other way round. bytes 0:
/// *ptr = nullptr, ok. Release it with device_free (or let DeviceBuffer own it).
///   void* p = nullptr;
///   LLMK_RETURN_IF_ERROR(llmk::device_malloc(&p, n * sizeof(float)));
///   llmk::device_free(p);
///
/// Errors: ptr null (invalid_argument naming 'ptr'); the allocation failing: Status::out_of_memory (*ptr
/// null); the poisoning memset failing: Status::cuda_error (the memory is freed, *ptr null).
inline Status device_malloc(void** ptr, std::size_t bytes);

/// Frees memory from device_malloc; null is a no-op:  llmk::device_free(p);
inline void device_free(void* ptr) {
  if (ptr == nullptr) return;
#if defined(LLMK_CUDA)
  cudaFree(ptr);
#else
  ::operator delete (ptr, std::align_val_t{256});
#endif
}

/// The direction of a device_copy.
enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };

/// Synchronous copy between host and device memory: the copy is complete when it returns. bytes 0: nothing.
///   LLMK_RETURN_IF_ERROR(llmk::device_copy(d_x, x.data(), x.size() * sizeof(float),
///                                          llmk::CopyKind::kHostToDevice));
///
/// Errors: dst or src null when bytes > 0 (invalid_argument naming it); a failed copy: Status::cuda_error.
inline Status device_copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) {
  if (bytes == 0) return {};
  if (dst == nullptr) return Status::invalid_argument("dst", "must not be null");
  if (src == nullptr) return Status::invalid_argument("src", "must not be null");
#if defined(LLMK_CUDA)
  const cudaMemcpyKind k = kind == CopyKind::kHostToDevice   ? cudaMemcpyHostToDevice
                           : kind == CopyKind::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                             : cudaMemcpyDeviceToDevice;
  LLMK_RETURN_IF_ERROR(detail::finish_default_stream("cudaMemcpy", cudaMemcpy(dst, src, bytes, k)));
#else
  (void)kind;
  std::memmove(dst, src, bytes);
#endif
  return {};
}

/// Fills device memory with a byte value; complete when it returns. bytes 0: nothing.
///   LLMK_RETURN_IF_ERROR(llmk::device_memset(d_counts, 0, n * sizeof(int)));
///
/// Errors: dst null when bytes > 0 (invalid_argument naming 'dst'); a failed memset: Status::cuda_error.
inline Status device_memset(void* dst, int value, std::size_t bytes) {
  if (bytes == 0) return {};
  if (dst == nullptr) return Status::invalid_argument("dst", "must not be null");
#if defined(LLMK_CUDA)
  LLMK_RETURN_IF_ERROR(detail::finish_default_stream("cudaMemset", cudaMemset(dst, value, bytes)));
#else
  std::memset(dst, value, bytes);
#endif
  return {};
}

inline Status device_malloc(void** ptr, std::size_t bytes) {
  LLMK_RETURN_IF_ERROR(detail::device_allocate(ptr, bytes));
  const Status poisoned = device_memset(*ptr, kPoisonByte, bytes);
  if (!poisoned.ok()) {
    device_free(*ptr);
    *ptr = nullptr;
  }
  return poisoned;
}

/// Waits for all device work and reports asynchronous errors (a no-op in the simulator, whose launches are
/// synchronous).
///   LLMK_RETURN_IF_ERROR(llmk::device_synchronize());
///
/// Errors: a failed cudaDeviceSynchronize, or an earlier asynchronous fault: Status::cuda_error.
inline Status device_synchronize() {
#if defined(LLMK_CUDA)
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return Status::cuda_error("cudaDeviceSynchronize", cudaGetErrorString(e));
#endif
  return {};
}

/// Runs work(scratch) with `bytes` of device memory allocated for the call (poisoned on `stream`) and
/// frees it after synchronizing `stream`, on which work queues its kernels: for the entries that take no
/// caller-owned storage (offline steps; an allocation and a synchronization per call). Returns the
/// allocation's error, else work's, else the synchronization's; *allocated (when not null) says whether the
/// allocation succeeded.
///   LLMK_RETURN_IF_ERROR(llmk::with_device_scratch(bytes, stream, [&](void* t) { return run(t, stream); }));
template <class Work>
Status with_device_scratch(std::size_t bytes, cudaStream_t stream, Work&& work, bool* allocated = nullptr) {
  void* scratch = nullptr;
  const Status got = detail::device_allocate(&scratch, bytes);
  // The poison goes on `stream`, ahead of work's kernels (a memset on the default stream would not be ordered
  // before them on a non-blocking stream).
  const Status poisoned = got.ok() ? detail::poison_on(scratch, bytes, stream) : got;
  if (allocated != nullptr) *allocated = poisoned.ok();
  if (!poisoned.ok()) {
    if (got.ok()) device_free(scratch);
    return poisoned;
  }
  const Status s = work(scratch);
#if defined(LLMK_CUDA)
  const cudaError_t e = cudaStreamSynchronize(stream);
  const Status synced =
      e == cudaSuccess ? Status{} : Status::cuda_error("cudaStreamSynchronize", cudaGetErrorString(e));
#else
  (void)stream;
  const Status synced{};
#endif
  device_free(scratch);  // after the synchronization: work's kernels may still use it
  return s.ok() ? synced : s;
}

/// Device (or managed) memory, or an invalid_argument naming `name`: a host pointer handed to a kernel or to
/// cuSOLVER would fault asynchronously (and poison the context), far from the call that caused it. Null
/// passes (the caller's shape checks decide whether null is allowed); in the simulator every pointer passes
/// (device memory is host memory).
///   LLMK_RETURN_IF_ERROR(llmk::check_device_pointer("w", w));
inline Status check_device_pointer(std::string_view name, const void* p) {
#if defined(LLMK_CUDA)
  if (p == nullptr) return {};
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // reported here; not left for the next cudaGetLastError
    return Status::invalid_argument(
        name, str_cat("must be device memory (cudaPointerGetAttributes: ", cudaGetErrorString(e), ")"));
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    return Status::invalid_argument(name, "must be device (or managed) memory, got a host pointer");
#else
  (void)name, (void)p;
#endif
  return {};
}

/// Owning, typed device allocation for tests, examples and benchmarks. Throws llmk::Error on failure.
///
///   llmk::DeviceBuffer<float> d_x(host_x);            // allocate and upload
///   llmk::DeviceBuffer<float> d_y(n);                 // allocate, poisoned
///   launch(..., d_x.data(), d_y.data());
///   std::vector<float> y = d_y.to_host();
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    void* p = nullptr;
    throw_if_error(device_malloc(&p, count * sizeof(T)));
    data_ = static_cast<T*>(p);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      device_free(data_);
      data_ = std::exchange(o.data_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { device_free(data_); }

  T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

  /// Copies host.size() elements (at most size()) to the start of the buffer.
  void upload(const std::vector<T>& host) {
    if (host.size() > count_) throw Error(Status::invalid_argument("host", "larger than the device buffer"));
    throw_if_error(device_copy(data_, host.data(), host.size() * sizeof(T), CopyKind::kHostToDevice));
  }
  std::vector<T> to_host() const {
    std::vector<T> host(count_);
    throw_if_error(device_copy(host.data(), data_, bytes(), CopyKind::kDeviceToHost));
    return host;
  }
  /// Refills the buffer with the poison pattern (0xFF bytes) before a kernel writes it.
  void poison() { throw_if_error(device_memset(data_, kPoisonByte, bytes())); }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace llmk
