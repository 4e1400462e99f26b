// bench/support/cublas_anchor.hpp: the cuBLAS side of the benchmarks' anchors (CUDA builds that link cuBLAS).
//
// Every llmk GEMM benchmark is the "TN" linear layer D[M, N] = A[M, K] * W[N, K]^T with row-major operands;
// cublas_tn runs the same product through column-major cuBLAS so the anchor and llmk do identical work.
#pragma once

#include <cublas_v2.h>

#include "llmk/core/status.cuh"

namespace llmk::bench {

inline llmk::Status cublas_status(const char* call, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return {};
  return llmk::Status::cuda_error(call, cublasGetStatusString(s));
}

/// Owns a cuBLAS handle (created by the caller with cublasCreate).
struct CublasHandle {
  cublasHandle_t h = nullptr;
  ~CublasHandle() {
    if (h != nullptr) cublasDestroy(h);
  }
};

// Row-major TN GEMM through column-major cuBLAS. A row-major X [r, c] (ld c) is, read column-major, the
// matrix X^T [c, r] with the same ld. So cuBLAS sees our operands as A^T [K, M] (ld K) and W^T [K, N] (ld K),
// and our row-major C [M, N] as C^T [N, M] (ld N). We therefore ask cuBLAS for C^T = W * A^T:
//   cuBLAS A := W  (stored as W^T [K, N], ld K, op T -> W [N, K])
//   cuBLAS B := A  (stored as A^T [K, M], ld K, op N -> A^T [K, M])
//   cuBLAS C := C  ([N, M] column-major, ld N == our row-major [M, N])
//   m = N, n = M, k = K: op(A) = T, op(B) = N, which is also the "TN" form int8 GEMMs require.
inline llmk::Status cublas_tn(cublasHandle_t handle, int m, int n, int k, const void* alpha, const void* w,
                              cudaDataType_t in_type, const void* a, const void* beta, void* c,
                              cudaDataType_t out_type, cublasComputeType_t compute) {
  return cublas_status("cublasGemmEx",
                       cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, alpha, w, in_type, k, a,
                                    in_type, k, beta, c, out_type, n, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace llmk::bench
