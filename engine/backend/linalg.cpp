// SPDX-License-Identifier: Apache-2.0
#include "engine/backend/linalg.h"

#include <algorithm>
#include <cmath>

#include "engine/util/thread_pool.h"

#ifdef SINKSCOPE_HAVE_BLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

namespace sinkscope {

bool have_blas() {
#ifdef SINKSCOPE_HAVE_BLAS
  return true;
#else
  return false;
#endif
}

void set_blas_threads(int n) {
#ifdef SINKSCOPE_HAVE_BLAS
  openblas_set_num_threads(std::max(1, n));
#else
  (void)n;
#endif
}

namespace {

// Fallback: each task owns a block of output columns (rows of W), so W is streamed once per
// block of x rows and every output element is written by one task.
[[maybe_unused]] void linear_fallback(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
                     ThreadPool* pool) {
  constexpr int64_t kColBlock = 64;
  const int64_t n_blocks = (n + kColBlock - 1) / kColBlock;
  auto task = [&](int64_t b) {
    const int64_t j0 = b * kColBlock, j1 = std::min(n, j0 + kColBlock);
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      for (int64_t j = j0; j < j1; ++j) {
        const float* wj = w + j * k;
        float acc = 0.0f;
        for (int64_t t = 0; t < k; ++t) acc += xi[t] * wj[t];
        y[i * n + j] = acc;
      }
    }
  };
  if (pool) {
    pool->parallel_for(n_blocks, task);
  } else {
    for (int64_t b = 0; b < n_blocks; ++b) task(b);
  }
}

}  // namespace

void linear(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
            ThreadPool* pool) {
#ifdef SINKSCOPE_HAVE_BLAS
  // OpenBLAS runs single-threaded (set_blas_threads(1) by the backend); we split the output
  // columns over our own pool instead, so its spinning workers never compete with ours.
  const int parts = pool ? pool->size() : 1;
  const int64_t step = ((n + parts - 1) / parts + 15) / 16 * 16;
  const int64_t n_parts = (n + step - 1) / step;
  auto part = [&](int64_t p) {
    const int64_t j0 = p * step, nj = std::min(n, j0 + step) - j0;
    if (nj <= 0) return;
    if (m == 1) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, int(nj), int(k), 1.0f, w + j0 * k, int(k), x, 1,
                  0.0f, y + j0, 1);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(nj), int(k), 1.0f, x,
                  int(k), w + j0 * k, int(k), 0.0f, y + j0, int(n));
    }
  };
  if (pool && n_parts > 1) {
    pool->parallel_for(n_parts, part);
  } else {
    for (int64_t p = 0; p < n_parts; ++p) part(p);
  }
#else
  linear_fallback(x, w, y, m, n, k, pool);
#endif
}

void gemm_nt(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
             int64_t ldy) {
  if (m <= 0 || n <= 0) return;
#ifdef SINKSCOPE_HAVE_BLAS
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0f, x, int(k), w,
              int(k), 0.0f, y, int(ldy));
#else
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float* xi = x + i * k;
      const float* wj = w + j * k;
      float acc = 0.0f;
      for (int64_t t = 0; t < k; ++t) acc += xi[t] * wj[t];
      y[i * ldy + j] = acc;
    }
#endif
}

void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps) {
  // Accumulate in double: a 576-wide sum of squares in float drifts by ~1e-7 relative, which is
  // harmless, but double costs nothing here and keeps us closest to the float32 oracle.
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float scale = float(1.0 / std::sqrt(ss / double(n) + double(eps)));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void geglu(const float* gate, const float* up, float* out, int64_t n) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(k * (g + 0.044715f * g * g * g))) * up[i];
  }
}

}  // namespace sinkscope
