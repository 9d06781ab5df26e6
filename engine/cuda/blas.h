// SPDX-License-Identifier: Apache-2.0
// cuBLAS wrapper for the backend's projections: bf16 inputs, fp32 accumulation, fp32 output.
// One handle per stream, each with its own explicit workspace, so GEMMs can be captured into a
// CUDA Graph (cuBLAS then never allocates during capture).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/cuda/device_buffer.h"

namespace sinkscope::gpu {

class Blas {
 public:
  Blas(cudaStream_t stream, size_t workspace_bytes);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // y[rows][out] = x[rows][in] . W[out][in]^T + beta * y[rows][out]
  // x, W: bf16 row-major (W as stored: (out, in)); y: fp32 row-major. beta = 1 fuses the
  // residual add into the GEMM (the fp32 residual stream is y). ldy: y's row stride in floats
  // (0: out), so a slice of W's rows can fill its columns of a wider y.
  void linear(const uint16_t* x, const uint16_t* w, float* y, int rows, int out, int in,
              float beta = 0.0f, int ldy = 0);

 private:
  cublasHandle_t m_handle = nullptr;
  DeviceBuffer m_workspace;
};

}  // namespace sinkscope::gpu
