// SPDX-License-Identifier: Apache-2.0
// Matrix-vector products straight from quantized GGUF weights, for decode (one token): reading
// 4.5-bit Q4_1 blocks instead of float32 moves ~6x fewer bytes, and decode on the CPU is
// memory-bound. The weights' values are the dequantized ones; with float activations only the
// summation order differs from a float product, the integer modes also round x (QgemvMode).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/format/ggml_types.h"

namespace sinkscope {

class ThreadPool;

// A (rows, cols) weight matrix in its GGUF encoding; row r starts at data + r * row_bytes.
struct QuantMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
  bool empty() const { return data == nullptr; }
};

enum class QgemvMode {
  // Weights dequantized in registers and multiplied with float x (only float rounding): decode
  // equals the prefill's products. SINKSCOPE_QGEMV=float.
  kFloatActivations,
  // Q4_0 / Q4_1 / Q8_0 with AVX2: x is quantized to 8-bit blocks (32 values, d = max|x| / 127)
  // once per product and each weight block is multiplied in integers, as llama.cpp does; per
  // block of 32 an error of up to d_x / 2 * Σ|w_j| (x rounded to its step), which moves decode
  // logits by up to ~0.3 on small models and changes greedy continuations of the golden
  // prompts. Other types take the 16-bit path below. Opt-in: SINKSCOPE_QGEMV=int8.
  kInt8Activations,
  // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K (AVX2 and portable): x is quantized to
  // 16-bit blocks (d = max|x| / 32767) once per product and the weights' integer codes are
  // multiplied with it in int32 (engine/backend/qgemv_int.h); error at most d_x / 2 * Σ|w_j| per
  // block, ~260x below the 8-bit path's. Other types (F32, F16, BF16, ...) take the float path.
  // The default.
  kInt16Activations,
};

// y (rows) = W x. Integer paths as `mode` says (above), AVX2 float paths for Q4_0, Q4_1, Q8_0,
// F32, F16, BF16 (when the CPU has AVX2/FMA/F16C), a dequantize-then-dot path for every other
// dequantizable type. Each row's result does not depend on the pool or its size.
void qgemv(const QuantMatrix& w, const float* x, float* y, ThreadPool* pool,
           QgemvMode mode = QgemvMode::kInt16Activations);

// Several products with the same x (and width) in one fork-join: x is quantized once and the
// rows of all matrices are split over the pool together (a layer's Q, K, V; gate and up).
// Results equal qgemv's for each matrix.
struct QgemvJob {
  const QuantMatrix* w;
  float* y;
};
void qgemv_many(const QgemvJob* jobs, int n_jobs, const float* x, ThreadPool* pool,
                QgemvMode mode = QgemvMode::kInt16Activations);

// The 16-bit-activation path's portable (non-SIMD) code alone, for tests comparing the two.
void qgemv_int16_portable(const QuantMatrix& w, const float* x, float* y);

// The portable path alone (for tests comparing the two).
void qgemv_reference(const QuantMatrix& w, const float* x, float* y);

// Rows [r0, r0 + n) of w as float32 into dst (n, cols), and the whole matrix.
void dequantize_rows(const QuantMatrix& w, int64_t r0, int64_t n, float* dst);
std::vector<float> dequantize(const QuantMatrix& w);

// y (m, w.rows) = x (m, w.cols) * W^T for a batch of rows (prefill): the weights stay in their
// GGUF encoding; tiles of rows are dequantized into a per-task scratch of at most
// kLinearTileBytes and multiplied with sgemm, so memory stays bounded whatever the model's size.
// F32 weights are multiplied in place. Tiles run on the pool; each output element's sum does
// not depend on the pool's size.
void linear_q(const float* x, const QuantMatrix& w, float* y, int64_t m, ThreadPool* pool);
inline constexpr int64_t kLinearTileBytes = int64_t(4) << 20;

}  // namespace sinkscope
