// llmk/obs/linalg.hpp: the dense linear algebra OBS, OBQ and GPTQ need, behind a small backend interface
// (Cholesky, inverse from a Cholesky factor, triangular inverse and solve, GEMM), so that the algorithms are
// written once and run over LAPACK/BLAS on the host (HostLapackBackend, here) and over cuSOLVER/cuBLAS on
// the GPU (CudaLinalgBackend, llmk/obs/linalg_cuda.cuh).
//
// Conventions: every matrix is ROW-MAJOR fp32 with a leading dimension (elements between rows) and 64-bit
// sizes. The host backend maps row-major onto column-major LAPACK/BLAS (a row-major matrix is its
// column-major transpose: Uplo flips, GEMM swaps its operands). LAPACK/BLAS take 32-bit sizes: larger
// problems are rejected with a Status naming the size.
//
// Linking: the host backend calls the Fortran symbols spotrf_, spotri_, strtri_, strsm_, sgemm_ (present in
// every LAPACK/BLAS: reference netlib, OpenBLAS, MKL), declared here, so no LAPACKE/CBLAS header is needed.
// Link LAPACK::LAPACK and BLAS::BLAS (CMake find_package(LAPACK), find_package(BLAS)); llmk's tests link them
// to the obs targets only (tests/obs/CMakeLists.txt).
//
//   llmk::obs::HostLapackBackend la;
//   std::int64_t minor = 0;
//   llmk::Status s = la.cholesky(llmk::obs::Uplo::kLower, n, a.data(), n, &minor);   // a = L L^T
//   if (s.ok() && minor != 0) { /* not positive definite: leading minor `minor` failed */ }
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "llmk/core/status.cuh"

// Fortran LAPACK/BLAS entry points (gfortran ABI: hidden string lengths after the arguments).
extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, std::size_t uplo_len);
void spotri_(const char* uplo, const int* n, float* a, const int* lda, int* info, std::size_t uplo_len);
void strtri_(const char* uplo, const char* diag, const int* n, float* a, const int* lda, int* info,
             std::size_t uplo_len, std::size_t diag_len);
void strsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m,
            const int* n, const float* alpha, const float* a, const int* lda, float* b, const int* ldb,
            std::size_t side_len, std::size_t uplo_len, std::size_t transa_len, std::size_t diag_len);
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
            const float* beta, float* c, const int* ldc, std::size_t transa_len, std::size_t transb_len);
}

namespace llmk::obs {

/// Which triangle of a (row-major) matrix a factorization reads and writes.
enum class Uplo { kLower, kUpper };
/// GEMM operand: as stored, or transposed.
enum class Op { kNone, kTranspose };

/// The linear-algebra operations the OBS family uses. All matrices row-major fp32 (see the file comment).
/// Numerical failure (a matrix that is not positive definite, a singular triangle) is NOT an error Status:
/// it is reported through `*failed` (0 = success, i > 0 = LAPACK's info, the 1-based failing index), so
/// callers can retry with more damping. Errors are argument errors (null pointers, sizes, leading dims).
///   void invert(llmk::obs::LinalgBackend& la, float* h, std::int64_t n) {
///     std::int64_t failed = 0;
///     llmk::throw_if_error(la.cholesky(llmk::obs::Uplo::kLower, n, h, n, &failed));
///     if (failed == 0) llmk::throw_if_error(la.cholesky_inverse(llmk::obs::Uplo::kLower, n, h, n, &failed));
///   }
class LinalgBackend {
 public:
  virtual ~LinalgBackend() = default;
  /// A short fixed name of the backend for logs and test names: "host-lapack", "cuda-cusolver-cublas".
  ///   std::cerr << "OBS linear algebra: " << la.name() << "\n";
  virtual std::string_view name() const = 0;
  /// True when the pointers given to this backend are device memory (cuSOLVER/cuBLAS). The GPU paths of the
  /// algorithms require it on a GPU build; in the simulator device memory is host memory, so the host
  /// backend serves the GPU path there.
  virtual bool uses_device_memory() const { return false; }
  /// The stream (a cudaStream_t) the backend queues its work on when uses_device_memory(); the GPU paths
  /// require it to be the stream they are given, so the kernels and the factorizations stay ordered.
  virtual const void* stream_handle() const { return nullptr; }

  /// In place: A = L L^T (kLower: L in the lower triangle) or A = U^T U (kUpper: U in the upper triangle).
  /// Reads only that triangle of A; the other triangle is left as it was.
  virtual Status cholesky(Uplo uplo, std::int64_t n, float* a, std::int64_t lda, std::int64_t* failed) = 0;
  /// In place: from the Cholesky factor in triangle `uplo` (as cholesky() left it) to A^-1, written to BOTH
  /// triangles (a full symmetric matrix).
  virtual Status cholesky_inverse(Uplo uplo, std::int64_t n, float* a, std::int64_t lda,
                                  std::int64_t* failed) = 0;
  /// In place: the triangle `uplo` of A (non-unit diagonal) becomes its inverse; the other is left alone.
  /// A zero diagonal element is reported through *failed (its 1-based index), not as an error. Errors
  /// (invalid_argument): n outside [0, 2^31), a null with n > 0, lda below max(1, n) or >= 2^31, failed null
  /// (CudaLinalgBackend: also a host pointer).
  ///   std::int64_t failed = 0;   // h: the factor L that cholesky(Uplo::kLower, ...) left
  ///   llmk::throw_if_error(la.triangular_inverse(llmk::obs::Uplo::kLower, n, h, n, &failed));   // h: L^-1
  virtual Status triangular_inverse(Uplo uplo, std::int64_t n, float* a, std::int64_t lda,
                                    std::int64_t* failed) = 0;
  /// Solves op(T) X = B in place of B [n, nrhs] (ldb), T the triangle `uplo` of a [n, n] (non-unit diagonal).
  /// A singular T is not detected (the caller's contract: a factor cholesky() reported as successful).
  /// Errors (invalid_argument): n or nrhs outside [0, 2^31); t null with n > 0; b null with n, nrhs > 0; ldt
  /// below max(1, n), ldb below max(1, nrhs), or either >= 2^31 (CudaLinalgBackend: also host pointers).
  ///   // L L^T x = b, L the Cholesky factor in l [n, n], b [n, 1] (ldb 1): x = L^-T (L^-1 b), in place of b
  ///   using llmk::obs::Uplo, llmk::obs::Op;
  ///   llmk::throw_if_error(la.triangular_solve(Uplo::kLower, Op::kNone, n, 1, l, n, b, 1));
  ///   llmk::throw_if_error(la.triangular_solve(Uplo::kLower, Op::kTranspose, n, 1, l, n, b, 1));
  virtual Status triangular_solve(Uplo uplo, Op op, std::int64_t n, std::int64_t nrhs, const float* t,
                                  std::int64_t ldt, float* b, std::int64_t ldb) = 0;
  /// C[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta C (beta = 0: C is not read).
  virtual Status gemm(Op op_a, Op op_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                      const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
                      float* c, std::int64_t ldc) = 0;
};

namespace detail {

inline Status check_int32(std::string_view name, std::int64_t v) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    return Status::invalid_argument(name, str_cat("must be in [0, 2^31) for LAPACK/BLAS, got ", v));
  return {};
}

inline Status check_square(std::string_view a_name, const float* a, std::int64_t n, std::int64_t lda,
                           std::int64_t* failed) {
  LLMK_RETURN_IF_ERROR(check_int32("n", n));
  if (a == nullptr && n > 0) return Status::invalid_argument(a_name, "must not be null");
  if (lda < (n > 1 ? n : 1) || lda > std::numeric_limits<int>::max())
    return Status::invalid_argument("lda",
                                    str_cat("must be >= max(1, n) and < 2^31 (n=", n, ", lda=", lda, ")"));
  if (failed == nullptr) return Status::invalid_argument("failed", "must not be null");
  *failed = 0;
  return {};
}

// Row-major triangle `uplo` is the column-major triangle of the other kind.
inline char lapack_uplo(Uplo u) {
  return u == Uplo::kLower ? 'U' : 'L';
}

}  // namespace detail

/// LAPACK/BLAS on the host (the simulator and host-only builds use it too).
///   llmk::obs::HostLapackBackend la;
///   llmk::Status s = la.gemm(llmk::obs::Op::kNone, llmk::obs::Op::kNone, m, n, k, 1.0f, a, k, b, n, 0.0f,
///                            c, n);
class HostLapackBackend final : public LinalgBackend {
 public:
  std::string_view name() const override { return "host-lapack"; }

  Status cholesky(Uplo uplo, std::int64_t n, float* a, std::int64_t lda, std::int64_t* failed) override {
    LLMK_RETURN_IF_ERROR(detail::check_square("a", a, n, lda, failed));
    if (n == 0) return {};
    const char u = detail::lapack_uplo(uplo);
    const int nn = static_cast<int>(n), ld = static_cast<int>(lda);
    int info = 0;
    spotrf_(&u, &nn, a, &ld, &info, 1);
    if (info < 0) return Status::internal(str_cat("spotrf rejected argument ", -info));
    *failed = info;
    return {};
  }

  Status cholesky_inverse(Uplo uplo, std::int64_t n, float* a, std::int64_t lda,
                          std::int64_t* failed) override {
    LLMK_RETURN_IF_ERROR(detail::check_square("a", a, n, lda, failed));
    if (n == 0) return {};
    const char u = detail::lapack_uplo(uplo);
    const int nn = static_cast<int>(n), ld = static_cast<int>(lda);
    int info = 0;
    spotri_(&u, &nn, a, &ld, &info, 1);
    if (info < 0) return Status::internal(str_cat("spotri rejected argument ", -info));
    *failed = info;
    if (info != 0) return {};
    for (std::int64_t i = 0; i < n; ++i)  // mirror the computed triangle into the other one
      for (std::int64_t j = 0; j < i; ++j) {
        if (uplo == Uplo::kLower)
          a[j * lda + i] = a[i * lda + j];
        else
          a[i * lda + j] = a[j * lda + i];
      }
    return {};
  }

  Status triangular_inverse(Uplo uplo, std::int64_t n, float* a, std::int64_t lda,
                            std::int64_t* failed) override {
    LLMK_RETURN_IF_ERROR(detail::check_square("a", a, n, lda, failed));
    if (n == 0) return {};
    const char u = detail::lapack_uplo(uplo), d = 'N';
    const int nn = static_cast<int>(n), ld = static_cast<int>(lda);
    int info = 0;
    strtri_(&u, &d, &nn, a, &ld, &info, 1, 1);
    if (info < 0) return Status::internal(str_cat("strtri rejected argument ", -info));
    *failed = info;
    return {};
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
    // Row-major op(T) X = B  <=>  column-major X^T op(T)^T = B^T (side R). T's storage read column-major is
    // T^T (the flipped triangle), so op(T)^T is that matrix as stored for op = kNone, transposed otherwise.
    const char side = 'R', u = detail::lapack_uplo(uplo), tr = op == Op::kNone ? 'N' : 'T', d = 'N';
    const int m = static_cast<int>(nrhs), nn = static_cast<int>(n), lt = static_cast<int>(ldt),
              lb = static_cast<int>(ldb);
    const float one = 1.0f;
    strsm_(&side, &u, &tr, &d, &m, &nn, &one, t, &lt, b, &lb, 1, 1, 1, 1);
    return {};
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
    // Row-major C = op(A) op(B)  <=>  column-major C^T = op(B)^T op(A)^T: swap the operands.
    const char ta = op_a == Op::kNone ? 'N' : 'T', tb = op_b == Op::kNone ? 'N' : 'T';
    const int mm = static_cast<int>(m), nn = static_cast<int>(n), kk = static_cast<int>(k),
              la = static_cast<int>(lda), lb = static_cast<int>(ldb), lc = static_cast<int>(ldc);
    sgemm_(&tb, &ta, &nn, &mm, &kk, &alpha, b, &lb, a, &la, &beta, c, &lc, 1, 1);
    return {};
  }
};

}  // namespace llmk::obs
