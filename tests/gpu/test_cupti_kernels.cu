// SPDX-License-Identifier: Apache-2.0
// Two small named kernels for tests/gpu/test_cupti.cpp.
#include <cuda_runtime.h>

__global__ void ss_test_scale(float* x, int n, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

__global__ void ss_test_add(float* y, const float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

// Host launchers so the test itself stays plain C++.
cudaError_t ss_launch_scale(float* x, int n, float a, cudaStream_t s) {
  ss_test_scale<<<(n + 255) / 256, 256, 0, s>>>(x, n, a);
  return cudaGetLastError();
}

cudaError_t ss_launch_add(float* y, const float* x, int n, cudaStream_t s) {
  ss_test_add<<<(n + 255) / 256, 256, 0, s>>>(y, x, n);
  return cudaGetLastError();
}
