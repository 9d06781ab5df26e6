// SPDX-License-Identifier: Apache-2.0
// gpt-oss's mixture-of-experts FFN on the device (ModelConfig::n_expert > 0), the CPU's
// CpuBackend::moe (engine/backend/cpu_backend.cpp) step for step:
//   route:   xn = RMSNorm(x) * ffn_norm in fp32 (sum of squares in double, as the CPU), router
//            logits z = R xn + b (fp32 router rows), the n_expert_used largest (ties: the lower
//            index first, as torch.topk) softmaxed among themselves;
//   gate_up: per (token, chosen expert) g = Wg xn + bg, u = Wu xn + bu, then the clamped SwiGLU
//            h = (clamp(u, -limit, limit) + 1) * g' * sigmoid(alpha g'), g' = min(g, limit);
//   down:    x += sum_k w_k (Wd h_k + bd) in the order of the chosen experts.
// Expert matrices are bf16 on the device (the CPU's MXFP4 values are exact in bf16), one GEMV
// per (token, expert): a decode step reads K experts' rows once; a prefill reads each chosen
// expert once per token (through L2). Plain C++ (no CUDA headers), like ops.h.
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

// x[r][:] += b[:] for r < rows (the output-projection bias after its GEMM's residual add).
OpStatus launch_add_bias_rows(float* x, const float* b, int rows, int dim, void* stream);

}  // namespace sinkscope::kernels
