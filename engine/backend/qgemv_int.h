// SPDX-License-Identifier: Apache-2.0
// Single-token products in integers with 16-bit activations (engine/backend/qgemv.h's default
// mode): the activation row is quantized once per product to blocks of 32 int16 values with a
// float step (d = max|x| / 32767, q = round-to-nearest-even(x / d)); each weight block's integer
// codes are multiplied with it in int32 (AVX2: vpmaddwd; AVX-512: vpmaddwd on 32 values, or
// VNNI's vpdpwssd, which multiplies and accumulates in one instruction) and scaled once per
// block or sub-block in float. Every ISA path gives the same int32 sums; only the float
// summation order differs. The error against the float product of the dequantized weights is at
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

// The instruction sets of the products, chosen at run time (the binary runs on any x86-64).
enum class Isa {
  kPortable,    // scalar C++
  kAvx2,        // AVX2 + FMA + F16C
  kAvx512,      // AVX-512 F/BW/VL (+ AVX2, FMA, F16C)
  kAvx512Vnni,  // the above with AVX512_VNNI
};
const char* isa_name(Isa isa);
// Every ISA this CPU runs, portable first (tests run each of them).
std::vector<Isa> isas_available();
// The products' ISA: the best this CPU runs, or SINKSCOPE_QGEMV_ISA (portable, avx2, avx512,
// avx512vnni). Throws std::invalid_argument naming the variable when it names an unknown ISA
// or one this CPU does not run. Read once.
Isa default_isa();

// True for the types with an integer path (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) when
// cols is a multiple of their block size.
bool supported(const QuantMatrix& w);

// x (n, a multiple of 32) into out with `isa`'s code (every ISA gives the same values; the
// AVX-512 ISAs use the AVX2 code, x is small next to the weights).
void quantize_x(const float* x, int64_t n, XQ16& out, Isa isa);

// y[r] for rows [r0, r1) of w with `isa`'s code (tests compare them; the results differ only in
// float summation order). `isa` must be one of isas_available().
void rows(const QuantMatrix& w, const XQ16& x, float* y, int64_t r0, int64_t r1, Isa isa);

// The AVX-512 kernels (engine/backend/qgemv_int_avx512.cpp), one namespace per variant.
namespace avx512 {
void rows(const QuantMatrix& w, const XQ16& x, float* y, int64_t r0, int64_t r1);
}
namespace avx512vnni {
void rows(const QuantMatrix& w, const XQ16& x, float* y, int64_t r0, int64_t r1);
}

}  // namespace sinkscope::qint
