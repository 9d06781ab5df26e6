// SPDX-License-Identifier: Apache-2.0
// Single-token products in integers with 16-bit activations (engine/backend/qgemv.h's default
// mode): the activation row is quantized once per product to blocks of 32 int16 values with a
// float step (d = max|x| / 32767, q = round-to-nearest-even(x / d)); each weight block's integer
// codes are multiplied with it in int32 (AVX2: vpmaddwd) and scaled once per block or
// sub-block in float. The error against the float product of the dequantized weights is at
// most Σ_j |w_j| d_b / 2 (x rounded to its step), ~260x smaller than with 8-bit activations,
// which keeps decode on the golden models' greedy continuations.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/qgemv.h"

namespace sinkscope::qint {

struct XQ16 {
  std::vector<int16_t> q;  // n values
  std::vector<float> d;    // per block of 32: the step
  std::vector<float> s;    // per block of 32: d * Σ q (for the weights' offsets)
};

// True for the types with an integer path (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) when
// cols is a multiple of their block size.
bool supported(const QuantMatrix& w);

// x (n, a multiple of 32) into out; `portable` picks the scalar code (same values as AVX2).
void quantize_x(const float* x, int64_t n, XQ16& out, bool portable);

// y[r] for rows [r0, r1) of w; `portable` picks the scalar code (tests compare the two; the
// results differ only in float summation order).
void rows(const QuantMatrix& w, const XQ16& x, float* y, int64_t r0, int64_t r1, bool portable);

}  // namespace sinkscope::qint
