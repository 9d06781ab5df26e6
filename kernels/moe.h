// SPDX-License-Identifier: Apache-2.0
// gpt-oss's mixture-of-experts FFN on the device (ModelConfig::n_expert > 0), the CPU's
// CpuBackend::moe (engine/backend/cpu_backend.cpp) step for step:
//   route:   xn = RMSNorm(x) * ffn_norm in fp32 (sum of squares in double, as the CPU), router
//            logits z = R xn + b (fp32 router rows), the n_expert_used largest (ties: the lower
//            index first, as torch.topk) softmaxed among themselves;
//   gate_up: per (token, chosen expert) g = Wg xn + bg, u = Wu xn + bu, then the clamped SwiGLU
//            h = (clamp(u, -limit, limit) + 1) * g' * sigmoid(alpha g'), g' = min(g, limit);
//   down:    x += sum_k w_k (Wd h_k + bd) in the order of the chosen experts.
// Expert matrices are bf16 on the device (the CPU's MXFP4 values are exact in bf16). Two ways to
// run the experts after the route:
//   GEMV (launch_moe_gemv): one warp per output row per (token, expert); a decode step reads
//     its K experts' rows once, a pass of n tokens reads them once per token (through L2);
//   grouped (the backend, for passes of many tokens): the (token, expert) pairs sorted by expert
//     on the host, the normed rows gathered in that order as bf16 (launch_moe_gather), one GEMM
//     per expert for gate|up and one for down (cuBLAS), launch_moe_act between them and
//     launch_moe_combine after: each expert's rows are read once per pass.
// Plain C++ (no CUDA headers), like ops.h.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace sinkscope::kernels {

struct MoeParams {
  const float* x = nullptr;         // [n][D] fp32 residual stream (read, then += the FFN)
  float* x_out = nullptr;           // where the FFN is added ([n][D], usually x)
  const float* norm_w = nullptr;    // [D] ffn_norm gain
  float eps = 1e-5f;
  const float* router = nullptr;    // [E][D] fp32
  const float* router_b = nullptr;  // [E]
  const uint16_t* w_gu = nullptr;   // [E][2F][D] bf16: the expert's F gate rows, then F up rows
  const float* b_gu = nullptr;      // [E][2F]: gate biases, then up biases
  const uint16_t* w_down = nullptr; // [E][D][F] bf16
  const float* b_down = nullptr;    // [E][D]
  // Or the experts in their MXFP4 blocks (GpuWeights::kNative; w_gu / w_down then unused):
  // [E][2F][D / 32 blocks of 17 bytes] and [E][D][F / 32 blocks], engine/format/dequant.cpp's
  // layout; the GEMVs decode them in registers (value = doubled E2M1 code * 2^(e - 128)).
  const uint8_t* q_gu = nullptr;
  const uint8_t* q_down = nullptr;
  // Scratch: fp32 normed rows [n][D], the chosen experts [n][K] and their weights [n][K], the
  // SwiGLU outputs [n][K][F] fp32.
  float* xn = nullptr;
  int32_t* sel = nullptr;
  float* wts = nullptr;
  float* act = nullptr;
  int n = 0, D = 0, F = 0, E = 0, K = 0;
  float alpha = 1.702f, limit = 7.0f;
};

// Shape limits of these kernels: "" when supported, else why not (the backend refuses the model
// naming it): D and F multiples of 8, 1 <= K <= min(E, kMoeMaxUsed), E <= kMoeMaxExperts.
inline constexpr int kMoeMaxExperts = 256;
inline constexpr int kMoeMaxUsed = 16;
const char* moe_shape_error(int D, int F, int E, int K);

// The three kernels above, in stream order. Empty problem (n == 0): no launch.
OpStatus launch_moe_ffn(const MoeParams& p, void* stream);
// Its two halves: the route (norm, router, top-k: xn, sel, wts), then the GEMV experts.
OpStatus launch_moe_route(const MoeParams& p, void* stream);
OpStatus launch_moe_gemv(const MoeParams& p, void* stream);

// Grouped experts. xg[i][:] = bf16(xn[pair_tok[i]][:]) for i < n_pairs.
OpStatus launch_moe_gather(const float* xn, const int32_t* pair_tok, int n_pairs, int D,
                           uint16_t* xg, void* stream);
// act[i][j] = bf16(clamped SwiGLU of gu[i][j] + b_gu[e][j] (gate) and gu[i][F + j] + b_gu[e][F + j]
// (up)), e = pair_exp[i]; gu: [n_pairs][2F] fp32 (each expert's gate|up GEMM).
OpStatus launch_moe_act(const float* gu, const int32_t* pair_exp, const float* b_gu, int n_pairs,
                        int F, float alpha, float limit, uint16_t* act, void* stream);
// x_out[t][j] = x[t][j] + sum_k wts[t][k] (y[slot[t][k]][j] + b_down[sel[t][k]][j]), k in order;
// y: [pairs][D] fp32 (each expert's down GEMM), slot: the sorted index of pair (t, k).
OpStatus launch_moe_combine(const float* y, const int32_t* slot, const int32_t* sel,
                            const float* wts, const float* b_down, int n, int K, int D,
                            const float* x, float* x_out, void* stream);

// out[r][c] = bf16(MXFP4 W[r][c]) (exact) for r < rows; W rows of cols / 32 blocks of 17 bytes,
// cols % 32 == 0. The grouped experts' per-expert dequantization before its GEMM.
OpStatus launch_mxfp4_to_bf16(const uint8_t* w, int64_t rows, int cols, uint16_t* out,
                              void* stream);
inline constexpr int kMxfp4BlockBytes = 17;

// x[r][:] += b[:] for r < rows (the output-projection bias after its GEMM's residual add).
OpStatus launch_add_bias_rows(float* x, const float* b, int rows, int dim, void* stream);

}  // namespace sinkscope::kernels
