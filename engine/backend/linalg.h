// SPDX-License-Identifier: Apache-2.0
// Dense float32 kernels for the CPU backend.
#pragma once

#include <cstdint>

namespace sinkscope {

class ThreadPool;

// y (m, n) = x (m, k) * W^T, W stored (n, k) row-major — a linear layer over m rows.
// OpenBLAS sgemm when available, else a blocked multithreaded fallback on `pool`.
void linear(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
            ThreadPool* pool);

// y (m, n), row stride ldy, = x (m, k) * W^T, W (n, k) row-major, on the calling thread (a tile
// of a larger product: linear_q in engine/backend/qgemv.h).
void gemm_nt(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
             int64_t ldy);

// Sets the BLAS library's own thread count (no-op without OpenBLAS).
void set_blas_threads(int n);
bool have_blas();

// out = x * rsqrt(mean(x^2) + eps) * w over n elements.
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);

// out = silu(gate) * up, element-wise.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// out = gelu(gate) * up, element-wise, gelu with the tanh approximation (Gemma's
// gelu_pytorch_tanh): 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
void geglu(const float* gate, const float* up, float* out, int64_t n);

}  // namespace sinkscope
