// llmk/obs/linalg_cuda.cuh: the linear-algebra backend of llmk/obs/linalg.hpp on the GPU, cuSOLVER + cuBLAS
// (CudaLinalgBackend), and mirror_triangle, the kernel that fills the other triangle of a symmetric matrix.
//
// Same conventions as HostLapackBackend: row-major fp32 matrices with 64-bit sizes, mapped onto column-major
// cuSOLVER/cuBLAS exactly as the host backend maps them onto LAPACK/BLAS (a row-major matrix read
// column-major is its transpose: the Uplo flips, GEMM swaps its operands, the triangular solve works from the
// right). cuSOLVER's dense API takes 32-bit sizes: n, nrhs, m, k and every leading dimension must be < 2^31
// (as on the host). Every matrix pointer must be device (or managed) memory: checked with
// cudaPointerGetAttributes.
//
// Routines: cholesky = cusolverDnSpotrf (workspace from cusolverDnSpotrf_bufferSize), cholesky_inverse =
// a check for a zero pivot (LAPACK's info, which cusolverDnSpotri does not report) + cusolverDnSpotri +
// mirror_triangle, triangular_inverse = cusolverDnXtrtri (the 64-bit API; CUDA 13 has no
// cusolverDnStrtri), triangular_solve = cublasStrsm, gemm = cublasSgemm (CUBLAS_DEFAULT_MATH: plain fp32, no
// TF32, so results match the host backend to fp32 rounding).
//
// Building: only nvcc GPU builds get CudaLinalgBackend (link CUDA::cusolver CUDA::cublas); the simulator gets
// mirror_triangle alone (its tests run it on the CPU); a plain host compiler gets an #error.
//
//   llmk::obs::CudaLinalgBackend la(stream);          // handles created on first use, bound to `stream`
//   std::int64_t failed = 0;
//   llmk::Status s = la.cholesky(llmk::obs::Uplo::kLower, n, d_h, n, &failed);   // d_h: device memory
//   if (s.ok() && failed == 0) s = la.cholesky_inverse(llmk::obs::Uplo::kLower, n, d_h, n, &failed);
#pragma once

#include "llmk/config.cuh"

#if defined(LLMK_HOST_ONLY)
#error \
    "llmk/obs/linalg_cuda.cuh needs nvcc (CudaLinalgBackend, mirror_triangle) or the simulator (LLMK_SIM: mirror_triangle only); use llmk/obs/linalg.hpp's HostLapackBackend in host-only code"
#endif

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "llmk/core/launch.cuh"
#include "llmk/core/math.cuh"
#include "llmk/core/smem.cuh"
#include "llmk/core/status.cuh"
#include "llmk/core/tensor_view.cuh"
#include "llmk/obs/linalg.hpp"

#if defined(LLMK_CUDA) && !defined(LLMK_SIM)
#include <cublas_v2.h>
#include <cusolverDn.h>
#define LLMK_OBS_HAVE_CUDA_LINALG 1
#endif

namespace llmk::obs {

namespace detail {

inline constexpr int kMirrorTile = 32;

struct MirrorSmem {
  float tile[kMirrorTile][kMirrorTile + 1];  // +1: the transposed read hits 32 different banks
};

// Copies the strict triangle `from_lower` (row > col) or upper (row < col) of the row-major a [n, n] into the
// other one. Block (bx, by), by >= bx, handles the source tile (R, C) = (by, bx) (lower) or (bx, by) (upper)
// and its transposed destination tile, through shared memory so that reads and writes are both coalesced.
// On a diagonal tile source and destination are the same tile but disjoint elements (strict triangles), and
// the barrier separates the reads from the writes. Blocks above the diagonal exit at once (whole block).
// A template only for inline linkage (a header's plain kernel would be defined in every translation unit).
template <int kUnused = 0>
__global__ void __launch_bounds__(256)
    mirror_triangle_kernel(float* a, std::int64_t n, std::int64_t lda, bool from_lower) {
  if (blockIdx.y < blockIdx.x) return;
  MirrorSmem& smem = shared_storage<MirrorSmem>();
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const std::int64_t R = from_lower ? blockIdx.y : blockIdx.x, C = from_lower ? blockIdx.x : blockIdx.y;
  const std::int64_t r0 = R * kMirrorTile, c0 = C * kMirrorTile;
  auto in_source = [&](std::int64_t row, std::int64_t col) {
    return row < n && col < n && (from_lower ? row > col : row < col);
  };
  for (int y = ty; y < kMirrorTile; y += static_cast<int>(blockDim.y)) {
    const std::int64_t row = r0 + y, col = c0 + tx;
    if (in_source(row, col)) smem.tile[y][tx] = a[row * lda + col];
  }
  __syncthreads();
  // Destination (c0 + y, r0 + tx) = source (r0 + tx, c0 + y) = tile[tx][y].
  for (int y = ty; y < kMirrorTile; y += static_cast<int>(blockDim.y)) {
    const std::int64_t src_row = r0 + tx, src_col = c0 + y;
    if (in_source(src_row, src_col)) a[src_col * lda + src_row] = smem.tile[tx][y];
  }
}

}  // namespace detail

/// Fills the other triangle of a symmetric row-major fp32 matrix a [n, n] (lda; device memory) from triangle
/// `uplo` (kLower: a[j, i] = a[i, j] for j < i; kUpper: a[i, j] = a[j, i]); the diagonal is not touched. One
/// launch on `stream` (asynchronous), ceil(n / 32)^2 blocks of 256 threads (those above the diagonal exit at
/// once). Errors: invalid_argument naming n, a or lda (n > 65535 * 32 is rejected as 'n').
///   llmk::Status s = llmk::obs::mirror_triangle(llmk::obs::Uplo::kLower, n, d_a, n, stream);
inline Status mirror_triangle(Uplo uplo, std::int64_t n, float* a, std::int64_t lda, cudaStream_t stream) {
  if (n < 0) return Status::invalid_argument("n", str_cat("must be >= 0, got ", n));
  if (a == nullptr && n > 0) return Status::invalid_argument("a", "must not be null");
  LLMK_RETURN_IF_ERROR(check_element_alignment<float>("a", a));
  if (lda < (n > 1 ? n : 1))
    return Status::invalid_argument("lda", str_cat("must be >= max(1, n) (n=", n, ", lda=", lda, ")"));
  if (n <= 1) return {};
  const std::int64_t tiles = ceil_div<std::int64_t>(n, detail::kMirrorTile);
  if (tiles > 65535)
    return Status::invalid_argument("n", str_cat("must be <= 65535 * ", detail::kMirrorTile, ", got ", n));
  return launch(
      detail::mirror_triangle_kernel<>, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(tiles)),
      dim3(detail::kMirrorTile, 8), sizeof(detail::MirrorSmem), stream, a, n, lda, uplo == Uplo::kLower);
}

#if defined(LLMK_OBS_HAVE_CUDA_LINALG)

namespace detail {

inline const char* cusolver_status_name(cusolverStatus_t s) {
  switch (s) {
    case CUSOLVER_STATUS_SUCCESS:
      return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED:
      return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED:
      return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE:
      return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH:
      return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED:
      return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR:
      return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_NOT_SUPPORTED:
      return "CUSOLVER_STATUS_NOT_SUPPORTED";
    case CUSOLVER_STATUS_INVALID_WORKSPACE:
      return "CUSOLVER_STATUS_INVALID_WORKSPACE";
    default:
      return "cusolverStatus_t";
  }
}

inline Status check_cusolver(const char* call, cusolverStatus_t s) {
  if (s == CUSOLVER_STATUS_SUCCESS) return {};
  return Status::internal(
      str_cat(call, " failed: status ", static_cast<int>(s), " (", cusolver_status_name(s), ")"));
}

inline Status check_cublas(const char* call, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return {};
  return Status::internal(
      str_cat(call, " failed: status ", static_cast<int>(s), " (", cublasGetStatusString(s), ")"));
}

inline Status check_cuda(const char* call, cudaError_t e) {
  if (e == cudaSuccess) return {};
  return Status::cuda_error(call, cudaGetErrorString(e));
}

using llmk::check_device_pointer;  // llmk/core/memory.cuh

// Row-major triangle `uplo` is the column-major triangle of the other kind (as detail::lapack_uplo).
inline cublasFillMode_t cublas_fill(Uplo u) {
  return u == Uplo::kLower ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
}

inline cublasOperation_t cublas_op(Op op) {
  return op == Op::kNone ? CUBLAS_OP_N : CUBLAS_OP_T;
}

// *info = 1 + the first i with a[i, i] == 0, or 0: LAPACK's spotri reports a singular factor that way, and
// cusolverDnSpotri does not (an H100 run returned info 0 for a zero pivot). One block of 256 threads.
template <int kUnused = 0>  // inline linkage
__global__ void __launch_bounds__(256)
    first_zero_diagonal_kernel(const float* a, std::int64_t n, std::int64_t lda, int* info) {
  __shared__ int first;
  if (threadIdx.x == 0) first = static_cast<int>(n);
  __syncthreads();
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (a[i * lda + i] == 0.0f) {
      atomicMin(&first, static_cast<int>(i));
      break;
    }
  __syncthreads();
  if (threadIdx.x == 0) *info = first < n ? first + 1 : 0;
}

}  // namespace detail

/// cuSOLVER/cuBLAS on the GPU, the same contract as HostLapackBackend (linalg.hpp) on device memory. Bound to
/// the stream given at construction; owns its cuSOLVER and cuBLAS handles (created on first use, so the
/// constructor cannot fail; a failure is the first call's Status), a device workspace grown on demand (never
/// shrunk; growing it synchronizes the stream first) and one device int for cuSOLVER's info. Not copyable;
/// one object per stream and thread; destroy it before its stream (the destructor synchronizes the stream).
/// Synchronization: cholesky, cholesky_inverse and triangular_inverse read `failed` back from device memory,
/// a synchronous copy on the stream (the call returns after the factorization finished); triangular_solve
/// and gemm are asynchronous like any cuBLAS call.
///   llmk::obs::CudaLinalgBackend la(stream);
///   std::int64_t failed = 0;
///   llmk::throw_if_error(la.cholesky(llmk::obs::Uplo::kUpper, n, d_a, lda, &failed));
///   if (failed != 0) { /* leading minor `failed` is not positive definite */ }
class CudaLinalgBackend final : public LinalgBackend {
 public:
  explicit CudaLinalgBackend(cudaStream_t stream = nullptr) noexcept : stream_(stream) {}
  CudaLinalgBackend(const CudaLinalgBackend&) = delete;
  CudaLinalgBackend& operator=(const CudaLinalgBackend&) = delete;
  ~CudaLinalgBackend() override {
    if (workspace_ != nullptr || info_ != nullptr) (void)cudaStreamSynchronize(stream_);
    if (workspace_ != nullptr) (void)cudaFree(workspace_);
    if (info_ != nullptr) (void)cudaFree(info_);
    if (solver_ != nullptr) (void)cusolverDnDestroy(solver_);
    if (blas_ != nullptr) (void)cublasDestroy(blas_);
  }

  std::string_view name() const override { return "cuda-cusolver-cublas"; }
  bool uses_device_memory() const override { return true; }
  cudaStream_t stream() const { return stream_; }
  const void* stream_handle() const override { return static_cast<const void*>(stream_); }
  /// Bytes of device workspace held now (grows to the largest request seen).
  std::size_t workspace_bytes() const { return workspace_bytes_; }

  Status cholesky(Uplo uplo, std::int64_t n, float* a, std::int64_t lda, std::int64_t* failed) override {
    LLMK_RETURN_IF_ERROR(detail::check_square("a", a, n, lda, failed));
    LLMK_RETURN_IF_ERROR(detail::check_device_pointer("a", a));
    if (n == 0) return {};
    LLMK_RETURN_IF_ERROR(ensure_handles());
    const int nn = static_cast<int>(n), ld = static_cast<int>(lda);
    int lwork = 0;
    LLMK_RETURN_IF_ERROR(detail::check_cusolver(
        "cusolverDnSpotrf_bufferSize",
        cusolverDnSpotrf_bufferSize(solver_, detail::cublas_fill(uplo), nn, a, ld, &lwork)));
    LLMK_RETURN_IF_ERROR(ensure_workspace(static_cast<std::size_t>(lwork) * sizeof(float)));
    LLMK_RETURN_IF_ERROR(detail::check_cusolver(
        "cusolverDnSpotrf", cusolverDnSpotrf(solver_, detail::cublas_fill(uplo), nn, a, ld,
                                             static_cast<float*>(workspace_), lwork, info_)));
    return read_info("cusolverDnSpotrf", failed);
  }

  Status cholesky_inverse(Uplo uplo, std::int64_t n, float* a, std::int64_t lda,
                          std::int64_t* failed) override {
    LLMK_RETURN_IF_ERROR(detail::check_square("a", a, n, lda, failed));
    LLMK_RETURN_IF_ERROR(detail::check_device_pointer("a", a));
    if (n == 0) return {};
    LLMK_RETURN_IF_ERROR(ensure_handles());
    // A zero on the factor's diagonal: report it as LAPACK does (cuSOLVER's potri would divide by it).
    LLMK_RETURN_IF_ERROR(
        launch(detail::first_zero_diagonal_kernel<>, dim3(1), dim3(256), 0, stream_, a, n, lda, info_));
    LLMK_RETURN_IF_ERROR(read_info("first_zero_diagonal", failed));
    if (*failed != 0) return {};
    const int nn = static_cast<int>(n), ld = static_cast<int>(lda);
    int lwork = 0;
    LLMK_RETURN_IF_ERROR(detail::check_cusolver(
        "cusolverDnSpotri_bufferSize",
        cusolverDnSpotri_bufferSize(solver_, detail::cublas_fill(uplo), nn, a, ld, &lwork)));
    LLMK_RETURN_IF_ERROR(ensure_workspace(static_cast<std::size_t>(lwork) * sizeof(float)));
    LLMK_RETURN_IF_ERROR(detail::check_cusolver(
        "cusolverDnSpotri", cusolverDnSpotri(solver_, detail::cublas_fill(uplo), nn, a, ld,
                                             static_cast<float*>(workspace_), lwork, info_)));
    LLMK_RETURN_IF_ERROR(read_info("cusolverDnSpotri", failed));
    if (*failed != 0) return {};
    return mirror_triangle(uplo, n, a, lda, stream_);  // potri writes one triangle; the contract is both
  }

  Status triangular_inverse(Uplo uplo, std::int64_t n, float* a, std::int64_t lda,
                            std::int64_t* failed) override {
    LLMK_RETURN_IF_ERROR(detail::check_square("a", a, n, lda, failed));
    LLMK_RETURN_IF_ERROR(detail::check_device_pointer("a", a));
    if (n == 0) return {};
    LLMK_RETURN_IF_ERROR(ensure_handles());
    std::size_t device_bytes = 0, host_bytes = 0;
    LLMK_RETURN_IF_ERROR(detail::check_cusolver(
        "cusolverDnXtrtri_bufferSize",
        cusolverDnXtrtri_bufferSize(solver_, detail::cublas_fill(uplo), CUBLAS_DIAG_NON_UNIT, n, CUDA_R_32F,
                                    a, lda, &device_bytes, &host_bytes)));
    LLMK_RETURN_IF_ERROR(ensure_workspace(device_bytes));
    if (host_workspace_.size() < host_bytes) host_workspace_.resize(host_bytes);
    LLMK_RETURN_IF_ERROR(detail::check_cusolver(
        "cusolverDnXtrtri",
        cusolverDnXtrtri(solver_, detail::cublas_fill(uplo), CUBLAS_DIAG_NON_UNIT, n, CUDA_R_32F, a, lda,
                         workspace_, device_bytes, host_bytes > 0 ? host_workspace_.data() : nullptr,
                         host_bytes, info_)));
    return read_info("cusolverDnXtrtri", failed);  // also keeps host_workspace_ alive until it is done
  }

  Status triangular_solve(Uplo uplo, Op op, std::int64_t n, std::int64_t nrhs, const float* t,
                          std::int64_t ldt, float* b, std::int64_t ldb) override {
    std::int64_t unused = 0;
    LLMK_RETURN_IF_ERROR(detail::check_square("t", t, n, ldt, &unused));
    LLMK_RETURN_IF_ERROR(detail::check_int32("nrhs", nrhs));
    if (b == nullptr && n > 0 && nrhs > 0) return Status::invalid_argument("b", "must not be null");
    if (ldb < (nrhs > 1 ? nrhs : 1) || ldb > std::numeric_limits<int>::max())
      return Status::invalid_argument(
          "ldb", str_cat("must be >= max(1, nrhs) and < 2^31 (nrhs=", nrhs, ", ldb=", ldb, ")"));
    if (n == 0 || nrhs == 0) return {};
    LLMK_RETURN_IF_ERROR(detail::check_device_pointer("t", t));
    LLMK_RETURN_IF_ERROR(detail::check_device_pointer("b", b));
    LLMK_RETURN_IF_ERROR(ensure_handles());
    // Row-major op(T) X = B  <=>  column-major X^T op(T)^T = B^T: side right, the flipped triangle, the same
    // op (see HostLapackBackend::triangular_solve).
    const float one = 1.0f;
    return detail::check_cublas(
        "cublasStrsm", cublasStrsm(blas_, CUBLAS_SIDE_RIGHT, detail::cublas_fill(uplo), detail::cublas_op(op),
                                   CUBLAS_DIAG_NON_UNIT, static_cast<int>(nrhs), static_cast<int>(n), &one, t,
                                   static_cast<int>(ldt), b, static_cast<int>(ldb)));
  }

  Status gemm(Op op_a, Op op_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
              std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
              std::int64_t ldc) override {
    LLMK_RETURN_IF_ERROR(detail::check_int32("m", m));
    LLMK_RETURN_IF_ERROR(detail::check_int32("n", n));
    LLMK_RETURN_IF_ERROR(detail::check_int32("k", k));
    if (m == 0 || n == 0) return {};
    if (c == nullptr) return Status::invalid_argument("c", "must not be null");
    if (k > 0 && (a == nullptr || b == nullptr))
      return Status::invalid_argument(a == nullptr ? "a" : "b", "must not be null");
    const std::int64_t a_cols = op_a == Op::kNone ? k : m, b_cols = op_b == Op::kNone ? n : k;
    if (lda < (a_cols > 1 ? a_cols : 1) || lda > std::numeric_limits<int>::max())
      return Status::invalid_argument(
          "lda", str_cat("must be >= the columns of A as stored (", a_cols, ") and < 2^31, got ", lda));
    if (ldb < (b_cols > 1 ? b_cols : 1) || ldb > std::numeric_limits<int>::max())
      return Status::invalid_argument(
          "ldb", str_cat("must be >= the columns of B as stored (", b_cols, ") and < 2^31, got ", ldb));
    if (ldc < (n > 1 ? n : 1) || ldc > std::numeric_limits<int>::max())
      return Status::invalid_argument("ldc", str_cat("must be >= n (n=", n, ") and < 2^31, got ", ldc));
    LLMK_RETURN_IF_ERROR(detail::check_device_pointer("a", a));
    LLMK_RETURN_IF_ERROR(detail::check_device_pointer("b", b));
    LLMK_RETURN_IF_ERROR(detail::check_device_pointer("c", c));
    LLMK_RETURN_IF_ERROR(ensure_handles());
    // Row-major C = op(A) op(B)  <=>  column-major C^T = op(B)^T op(A)^T: swap the operands.
    return detail::check_cublas(
        "cublasSgemm",
        cublasSgemm(blas_, detail::cublas_op(op_b), detail::cublas_op(op_a), static_cast<int>(n),
                    static_cast<int>(m), static_cast<int>(k), &alpha, b, static_cast<int>(ldb), a,
                    static_cast<int>(lda), &beta, c, static_cast<int>(ldc)));
  }

 private:
  // The handles and the info word, on first use (a constructor cannot return a Status).
  Status ensure_handles() {
    // A handle is kept only once fully set up, so a failed call is retried whole by the next one.
    if (solver_ == nullptr) {
      cusolverDnHandle_t h = nullptr;
      LLMK_RETURN_IF_ERROR(detail::check_cusolver("cusolverDnCreate", cusolverDnCreate(&h)));
      const Status s = detail::check_cusolver("cusolverDnSetStream", cusolverDnSetStream(h, stream_));
      if (!s.ok()) {
        (void)cusolverDnDestroy(h);
        return s;
      }
      solver_ = h;
    }
    if (blas_ == nullptr) {
      cublasHandle_t h = nullptr;
      LLMK_RETURN_IF_ERROR(detail::check_cublas("cublasCreate", cublasCreate(&h)));
      // alpha / beta live on the host; plain fp32 (no TF32) to match the host backend.
      const Status s = [&]() -> Status {
        LLMK_RETURN_IF_ERROR(detail::check_cublas("cublasSetStream", cublasSetStream(h, stream_)));
        LLMK_RETURN_IF_ERROR(
            detail::check_cublas("cublasSetPointerMode", cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST)));
        return detail::check_cublas("cublasSetMathMode", cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
      }();
      if (!s.ok()) {
        (void)cublasDestroy(h);
        return s;
      }
      blas_ = h;
    }
    if (info_ == nullptr) {
      void* p = nullptr;
      const cudaError_t e = cudaMalloc(&p, sizeof(int));
      if (e != cudaSuccess)
        return Status::out_of_memory(str_cat("cudaMalloc(4) for cuSOLVER's info: ", cudaGetErrorString(e)));
      info_ = static_cast<int*>(p);
    }
    return {};
  }

  // At least `bytes` of device workspace. Growing frees the old buffer, which queued work may still use:
  // synchronize the stream first.
  Status ensure_workspace(std::size_t bytes) {
    if (bytes <= workspace_bytes_) return {};
    if (workspace_ != nullptr) {
      LLMK_RETURN_IF_ERROR(detail::check_cuda("cudaStreamSynchronize", cudaStreamSynchronize(stream_)));
      LLMK_RETURN_IF_ERROR(detail::check_cuda("cudaFree", cudaFree(workspace_)));
      workspace_ = nullptr;
      workspace_bytes_ = 0;
    }
    const cudaError_t e = cudaMalloc(&workspace_, bytes);
    if (e != cudaSuccess) {
      workspace_ = nullptr;
      return Status::out_of_memory(
          str_cat("cudaMalloc(", bytes, ") for the cuSOLVER workspace: ", cudaGetErrorString(e)));
    }
    workspace_bytes_ = bytes;
    return {};
  }

  // cuSOLVER's info, read back synchronously: < 0 is an argument cuSOLVER rejected (a bug: the arguments
  // were validated), > 0 the 1-based failing pivot / zero diagonal (-> *failed, not an error).
  Status read_info(const char* call, std::int64_t* failed) {
    int info = 0;
    LLMK_RETURN_IF_ERROR(
        detail::check_cuda("cudaMemcpyAsync(info)",
                           cudaMemcpyAsync(&info, info_, sizeof(int), cudaMemcpyDeviceToHost, stream_)));
    LLMK_RETURN_IF_ERROR(detail::check_cuda("cudaStreamSynchronize", cudaStreamSynchronize(stream_)));
    if (info < 0) return Status::internal(str_cat(call, " rejected argument ", -info));
    *failed = info;
    return {};
  }

  cudaStream_t stream_;
  cusolverDnHandle_t solver_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  int* info_ = nullptr;
  std::vector<unsigned char> host_workspace_;  // cusolverDnXtrtri's host workspace
};

#endif  // LLMK_OBS_HAVE_CUDA_LINALG

}  // namespace llmk::obs
