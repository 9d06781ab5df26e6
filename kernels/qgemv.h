// SPDX-License-Identifier: Apache-2.0
// Kernels that read weights in their ggml block layout (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K) on the
// device: the batch-1 decode GEMV, and the dequantization into a bf16 scratch for the prefill's
// cuBLAS GEMM. The per-block decode is kernels/qblock.h (bit-exact against the CPU dequantizer).
// Plain C++ (no CUDA headers) like kernels/ops.h; nothing throws: failures are an OpStatus.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/ops.h"

namespace sinkscope::kernels {

// Bytes of one weight row of `cols` elements in ggml type `type`; 0 when the type has no device
// decode (qblock::supported) or cols is not a positive multiple of its block size.
int64_t qweight_row_bytes(int type, int64_t cols);

// The device-only row layout (qblock::kQ8_0R, kQ6_KR: the blocks' fields in separate 16-byte
// aligned arrays, same bytes per row) that a [rows][cols] matrix of ggml type `type` can be
// repacked into for 16-byte aligned decode loads, or `type` itself when it has none (other
// types; Q8_0 rows not a multiple of 256 elements, Q6_K rows not of 2048).
int qweight_repacked_type(int type, int64_t cols);

// Repacks a [rows][cols] matrix of ggml type `type` (src, its file layout) into
// qweight_repacked_type(type, cols) at dst (the same number of bytes; src and dst must not
// overlap). Every launcher below takes the repacked types as it takes the ggml ones, with the
// same values (qblock::decode8_in_row); their int8 GEMV needs w 16-byte aligned.
OpStatus launch_qrepack(int type, const void* src, int64_t rows, int64_t cols, void* dst,
                        void* stream);

// Empty when a [rows][cols] matrix of `type` can go through launch_qgemv; else why not (a type
// without a device decode, a row length off the block size or beyond the fp32 activation stage
// in shared memory, 58112 elements).
std::string qgemv_shape_error(int type, int64_t rows, int64_t cols);

// Raises the GEMV kernels' dynamic shared-memory limit for rows up to max_cols on the current
// device. launch_qgemv does so itself when a row needs more than has been set; a caller that
// captures launches into a CUDA graph calls this first, outside the capture.
OpStatus qgemv_prepare(int max_cols);

// y[r] = W[r] . v  (accumulate: y[r] += W[r] . v) for r < rows, fp32 accumulation.
// w: rows * qweight_row_bytes(type, cols) bytes (rows packed back to back, any alignment);
// v: [cols] bf16; y: [rows] fp32. v and y must not overlap w.
// Q4_K, Q6_K and Q8_0 go through the wide kernel (kernels/qgemv_wide.cu) when
// qgemv_int8_activation() holds: v is then quantized per run of 32 elements to two int8 planes
// (d = amax / 127, q = rint(v / d); d2 = d / 254, q2 = rint((v - d q) / d2)) before the
// products, i.e. y = W . v~ with |v~ - v| <= amax / 64516 per element (about 15 bits); otherwise,
// and for the other formats, the fp32-activation kernel of launch_qgemv_f32.
OpStatus launch_qgemv(int type, const void* w, int rows, int cols, const uint16_t* v, float* y,
                      bool accumulate, void* stream);

// True when launch_qgemv takes the int8-activation kernel for these arguments (Q4_K: w 16-byte
// aligned; Q6_K / Q8_0: w 2-byte aligned; v 16-byte aligned).
bool qgemv_int8_activation(int type, const void* w, int64_t cols, const void* v);

// The int8-activation kernel alone with 1 plane (plain int8, |v~ - v| <= amax / 254, half the
// __dp4a work) or 2 (launch_qgemv's choice); an error when qgemv_int8_activation() is false.
OpStatus launch_qgemv_int8(int type, const void* w, int rows, int cols, const uint16_t* v,
                           float* y, bool accumulate, int planes, void* stream);

// The int8-activation kernel with the activation quantized once ahead, for several matrices
// that multiply the same v (a projection stored as parts of different formats): quantize_x
// writes the planes and scales launch_qgemv_int8 would compute inside each CTA into xq
// (qgemv_x_bytes(cols, planes) bytes, 16-byte aligned; 0 for an unsupported cols / planes), and
// launch_qgemv_prequant reads them: the same y, bit for bit, as launch_qgemv_int8 with variant 0.
size_t qgemv_x_bytes(int cols, int planes);
OpStatus launch_qgemv_quantize_x(const uint16_t* v, int cols, int planes, void* xq, void* stream);
OpStatus launch_qgemv_prequant(int type, const void* w, int rows, int cols, const void* xq,
                               float* y, bool accumulate, int planes, void* stream);

// The int8-activation kernel (variant 0, or 7 or 8 when selected: the same products) with
// the op before or after the product folded in, for the decode step:
//   input:  v (bf16 [cols]), or with x set bf16(RMSNorm(x) * norm_w) (x, norm_w fp32 [cols]),
//           formed in every CTA with launch_rms_norm's sums and roundings, so the product sees
//           the very bf16 activation launch_rms_norm would write (no separate norm kernel);
//   output: y (+)= W . x~ as launch_qgemv_int8, or with act set the SwiGLU of a gate|up matrix:
//           act[j] = bf16(silu(g_j) * u_j), g_j = W[j] . x~, u_j = W[rows / 2 + j] . x~ for
//           j < rows / 2, launch_swiglu's formula (no fp32 gate|up vector, no SwiGLU kernel).
// Every product equals launch_qgemv_int8's with variant 0 bit for bit, so rms_norm + GEMV
// (+ swiglu) and the fused launch give the same numbers (tests/gpu/test_qgemv_gpu.cpp checks).
struct QgemvFusedArgs {
  int type = 0;
  const void* w = nullptr;
  int rows = 0, cols = 0;
  const uint16_t* v = nullptr;     // input without the norm (16-byte aligned)
  const float* x = nullptr;        // input with the norm (16-byte aligned) ...
  const float* norm_w = nullptr;   // ... and its gain (16-byte aligned)
  float eps = 1e-5f;
  float* y = nullptr;              // output without SwiGLU
  bool accumulate = false;
  uint16_t* act = nullptr;         // output with SwiGLU: [rows / 2] bf16 (rows even)
  int planes = 2;
};
// True when launch_qgemv_fused takes these arguments: qgemv_int8_activation() for the input
// pointer, and with the norm cols % 8 == 0 and cols <= 8192 (launch_rms_norm's register rows).
bool qgemv_fused_eligible(const QgemvFusedArgs& a);
OpStatus launch_qgemv_fused(const QgemvFusedArgs& a, void* stream);

// The kernel variants of the int8-activation GEMV (kernels/qgemv_wide.h: 0 the original, 1-4
// pipelined, with PDL or not, 4 or 2 CTAs per SM, 5-8 forms of 0), for the benchmark to time side
// by side and the tests to check; launch_qgemv and launch_qgemv_int8 use the selected one
// (process-wide). launch_qgemv_fused has the forms of variants 0, 7 and 8; under the others the
// backend keeps the norm and the SwiGLU as kernels of their own (qgemv_wide_variant_fuses).
int qgemv_wide_variants();
int qgemv_wide_variant();
bool set_qgemv_wide_variant(int which);  // false for an unknown variant
const char* qgemv_wide_variant_name(int which);
bool qgemv_wide_variant_fuses(int which);

// The fp32-activation GEMV for every format (the bf16 v exactly, each weight decoded by
// qblock::decode8, one warp per row): the reference path and the fallback.
OpStatus launch_qgemv_f32(int type, const void* w, int rows, int cols, const uint16_t* v, float* y,
                          bool accumulate, void* stream);

// out[r][c] = bf16(W[r][c]) for r < rows (round to nearest even of the exact dequantized value).
// out: [rows][cols] bf16, 16-byte aligned.
OpStatus launch_qdequant_bf16(int type, const void* w, int64_t rows, int64_t cols, uint16_t* out,
                              void* stream);

}  // namespace sinkscope::kernels
