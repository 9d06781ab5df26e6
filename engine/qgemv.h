// SPDX-License-Identifier: Apache-2.0
// Matrix-vector products straight from quantized GGUF weights, for decode (one token): reading
// 4.5-bit Q4_1 blocks instead of float32 moves ~6x fewer bytes, and decode on the CPU is
// memory-bound. Values equal the dequantized float weights; only the summation order differs.
#pragma once

#include <cstdint>

#include "engine/ggml_types.h"

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

// y (rows) = W x. Fused AVX2 paths for Q4_0, Q4_1, Q8_0 and F32 (when the CPU has AVX2/FMA/F16C),
// a dequantize-then-dot path for every other dequantizable type.
void qgemv(const QuantMatrix& w, const float* x, float* y, ThreadPool* pool);

// The portable path alone (for tests comparing the two).
void qgemv_reference(const QuantMatrix& w, const float* x, float* y);

}  // namespace sinkscope
