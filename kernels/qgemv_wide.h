// SPDX-License-Identifier: Apache-2.0
// Internal to kernels/qgemv.cu: the wide decode GEMV for Q4_K, Q6_K and Q8_0 (qgemv_wide.cu),
// which launch_qgemv takes whenever eligible() holds. It quantizes the activation to int8 (one or
// two planes) per 32 elements inside each CTA and reads the weight blocks 16 bytes at a time (see qgemv_wide.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sinkscope::kernels::qwide {

// Longest row the shared-memory stage (two int8 activation planes + their scales + per-warp
// buffers) takes.
constexpr int kMaxCols = 80 * 1024;

// Activation planes launch_qgemv uses: 2 (x ~ d q + d2 q2, about 15 bits) or 1 (plain int8).
constexpr int kDefaultPlanes = 2;

// True when launch() handles this matrix: a supported type and shape, v 16-byte aligned, and the
// weights aligned as the format's loads need (Q4_K: matrix and row stride 16 bytes; Q6_K and
// Q8_0: 2 bytes).
bool eligible(int type, const void* w, int64_t cols, int64_t row_bytes, const void* v);

// y[r] (+)= W[r] . v for r < rows; only for eligible() matrices, rows >= 1; planes 1 or 2; the
// kernel of variant(). The pipelined variants read w before waiting for the previous kernel in
// the stream (PDL): w must not be written by the kernel launched just before.
cudaError_t launch(int type, const void* w, int rows, int cols, int64_t row_bytes,
                   const uint16_t* v, float* y, bool accumulate, void* stream, int planes);

// The activation quantized once for several GEMVs over the same v (a projection's parts): xq
// holds planes * cols int8 codes, then cols / 32 scale records, x_bytes(cols, planes) in all,
// 16-byte aligned, in the kernels' own order (qgemv_wide.cuh xpos); the same numbers each CTA of
// launch() computes for itself. launch_pre then
// reads them instead of v (same results, bit for bit, as launch() with variant 0).
size_t x_bytes(int cols, int planes);
cudaError_t quantize(const uint16_t* v, int cols, int planes, int8_t* xq, void* stream);
cudaError_t launch_pre(int type, const void* w, int rows, int cols, int64_t row_bytes,
                       const int8_t* xq, float* y, bool accumulate, void* stream, int planes);

// The fused forms of variant 0, or of variant 7 or 8 when selected (kernels/qgemv.h
// launch_qgemv_fused): the input is v (bf16), or
// with x non-null bf16(RMSNorm(x) * norm_w) formed in every CTA as launch_rms_norm forms it; the
// output is y (+)= W . x~, or with act non-null act[j] = bf16(silu(g_j) * u_j) for the gate rows
// j < rows / 2 and the up rows after them. fused_eligible: eligible() for the input pointer, and
// with a norm cols % 8 == 0 and cols <= 4 * 2048.
bool fused_eligible(int type, const void* w, int64_t cols, int64_t row_bytes, const void* in,
                    bool norm);
cudaError_t launch_fused(int type, const void* w, int rows, int cols, int64_t row_bytes,
                         const uint16_t* v, const float* x, const float* norm_w, float eps,
                         float* y, bool accumulate, uint16_t* act, void* stream, int planes);

// Raises the kernels' shared-memory limit for rows up to max_cols (outside graph capture).
cudaError_t prepare(int max_cols);

// Kernel variants launch() chooses between (the benchmark times each; tests check each):
//   0: the original kernel (qgemv_wide.cu): load a row's chunk, wait, compute; 4 CTAs per SM.
//   1: the pipelined kernel (qgemv_wide_pipe.cu), 4 CTAs per SM, launched with PDL.
//   2: the pipelined kernel, 2 CTAs per SM (128 registers, twice the loads in flight per warp),
//      launched with PDL.
//   3: variant 1 without PDL.
//   4: variant 1 with its runs never shortened for long rows (fewer CTAs per SM there, each
//      warp with twice the bytes in flight).
//   5: variant 0 launched with PDL: scheduled while the previous kernel runs, it waits for it
//      before reading v or y, so launch latency overlaps the previous kernel's tail.
//   6: variant 5, each warp first asking L2 for its first row's weight bytes (prefetch) before
//      the wait, so the small projections' loads overlap the previous kernel too.
//   7: variant 0 (an ordinary launch, no PDL), each warp first asking L2 for its first row's
//      weight bytes before the CTA quantizes the activation, so the rows' DRAM latency overlaps
//      that prologue; launch_fused takes it too when selected.
//   8: variant 0 with two rows per warp pass for Q4_K and Q6_KR (rows 2o and 2o + 1, or gate j
//      and up j), each block's activation read from shared memory once for both; the same
//      results as 0, bit for bit. Other formats run variant 0's code. launch_fused takes it too
//      when selected.
constexpr int kVariants = 9;
// Two rows per pass: 3.4 % fewer ms for one decode step's GEMV launches and 3.3 % more decode
// tok/s on the 8B Q4_K_M shape than variant 0 (docs/performance.md), the same results.
constexpr int kDefaultVariant = 8;
int variant();                // kDefaultVariant until set_variant
bool set_variant(int which);  // false (and no change) outside 0 .. kVariants - 1
const char* variant_name(int which);

// SMs of the current device (132 when the query fails), read once.
int sm_count();

// The pipelined kernel (qgemv_wide_pipe.cu) with min_ctas 4 or 2 CTAs per SM, with or without the
// PDL launch attribute; halve: runs shortened for long rows so that min_ctas CTAs fit an SM;
// same contract as launch().
cudaError_t launch_pipe(int type, const void* w, int rows, int cols, int64_t row_bytes,
                        const uint16_t* v, float* y, bool accumulate, void* stream, int planes,
                        int min_ctas, bool pdl, bool halve);
cudaError_t prepare_pipe(int max_cols);

}  // namespace sinkscope::kernels::qwide
