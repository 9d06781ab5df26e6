// SPDX-License-Identifier: Apache-2.0
// Fused batch-1 (one token) kernels of the CUDA backend's decode step. Per layer they replace
//   rms_norm -> QKV GEMM -> qkv_rope_append   by  launch_fused_norm_qkv_rope
//   O GEMM (+ residual)                       by  launch_fused_gemv_residual
//   rms_norm -> gate|up GEMM -> swiglu        by  launch_fused_norm_gate_up_swiglu
//   down GEMM (+ residual)                    by  launch_fused_gemv_residual
// so a layer is 4 kernels plus the attention instead of 9-10. Numerics follow the unfused path:
// the normed activation is rounded to bf16 exactly like launch_rms_norm's output, the products
// accumulate in fp32 (in another order than cuBLAS), bias, RoPE, SwiGLU and the bf16 roundings
// of q/k/v and the SwiGLU output are the same formulas. Shapes: kernels/decode_fused_plan.h.
// Plain C++ (no CUDA headers) like kernels/ops.h; launches are PDL-chained (kernels/pdl.cuh);
// nothing throws or exits: failures come back as an OpStatus.
#pragma once

#include <cstdint>

#include "kernels/decode_fused_plan.h"
#include "kernels/ops.h"

namespace sinkscope::kernels {

// RMSNorm(x) * norm_w folded into the QKV projection, + bias, RoPE, q out, K/V appended to the
// paged cache at one position. rope describes everything after the projection exactly as for
// launch_qkv_rope_append (rope.qkv is not read; n_tokens must be 1).
struct FusedQkvParams {
  const float* x = nullptr;       // [n_embd] fp32 residual stream (16-byte aligned)
  const float* norm_w = nullptr;  // [n_embd] fp32 attention RMSNorm gain (16-byte aligned)
  float eps = 1e-5f;
  const uint16_t* w_qkv = nullptr;  // [q_dim + 2 kv_dim][n_embd] bf16 rows: wq | wk | wv
  int n_embd = 0;
  QkvRopeParams rope;  // bias, cos/sin tables, q_out, pages, page table, position, head shape
};
OpStatus launch_fused_norm_qkv_rope(const FusedQkvParams& p, void* stream);

// act[j] = bf16(silu(g) * u) with g = w_gu[j] . xn, u = w_gu[n_ff + j] . xn and
// xn = bf16(RMSNorm(x) * norm_w).
struct FusedGateUpParams {
  const float* x = nullptr;       // [n_embd] fp32 residual stream (16-byte aligned)
  const float* norm_w = nullptr;  // [n_embd] fp32 FFN RMSNorm gain (16-byte aligned)
  float eps = 1e-5f;
  const uint16_t* w_gu = nullptr;  // [2 n_ff][n_embd] bf16 rows: w_gate | w_up
  uint16_t* act = nullptr;         // [n_ff] bf16 SwiGLU output
  int n_embd = 0, n_ff = 0;
};
OpStatus launch_fused_norm_gate_up_swiglu(const FusedGateUpParams& p, void* stream);

// x[r] += w[r] . v for r < n_out (the O and down projections with the residual add).
// v: [n_in] bf16 (16-byte aligned), w: [n_out][n_in] bf16, x: [n_out] fp32. n_in % 8 == 0.
// x and v must not overlap.
OpStatus launch_fused_gemv_residual(const uint16_t* v, const uint16_t* w, float* x, int n_out,
                                    int n_in, void* stream);

}  // namespace sinkscope::kernels
