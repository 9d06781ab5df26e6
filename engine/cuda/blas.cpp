// SPDX-License-Identifier: Apache-2.0
#include "engine/cuda/blas.h"

#include "engine/cuda/cuda_errors.h"

namespace sinkscope::gpu {

Blas::Blas(cudaStream_t stream, size_t workspace_bytes)
    : m_workspace(workspace_bytes, "cuBLAS workspace") {
  SS_CUBLAS(cublasCreate(&m_handle));
  try {
    // cublasSetStream resets the workspace to cuBLAS's own pool, so the workspace comes after.
    SS_CUBLAS(cublasSetStream(m_handle, stream));
    SS_CUBLAS(cublasSetWorkspace(m_handle, m_workspace.get(), m_workspace.bytes()));
    SS_CUBLAS(cublasSetPointerMode(m_handle, CUBLAS_POINTER_MODE_HOST));
  } catch (...) {
    cublasDestroy(m_handle);
    throw;
  }
}

Blas::~Blas() {
  if (m_handle) cublasDestroy(m_handle);
}

void Blas::linear(const uint16_t* x, const uint16_t* w, float* y, int rows, int out, int in,
                  float beta, int ldy) {
  if (rows <= 0) return;
  const float alpha = 1.0f;
  // cuBLAS is column-major. Row-major y (rows, out) is column-major y^T (out, rows) with
  // ld = out (or ldy), and y^T = W . x^T: W row-major (out, in) is column-major (in, out) -> op T;
  // x row-major (rows, in) is column-major (in, rows) -> op N.
  SS_CUBLAS(cublasGemmEx(m_handle, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, w, CUDA_R_16BF,
                         in, x, CUDA_R_16BF, in, &beta, y, CUDA_R_32F, ldy > 0 ? ldy : out, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
}

}  // namespace sinkscope::gpu
