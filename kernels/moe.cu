// SPDX-License-Identifier: Apache-2.0
// gpt-oss's mixture-of-experts FFN (kernels/moe.h): route, gate|up + clamped SwiGLU, down.
#include "kernels/moe.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda_check.h"

namespace sinkscope::kernels {
namespace {

constexpr int kWarps = 8;  // rows per block in the GEMV kernels (one warp per output row)

OpStatus check(const char* what, const char* file, int line) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return OpStatus::error(cuda_error_text(e, what, file, line));
  return {};
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// dot(x[0..n), bf16 w[0..n)) of one warp, n % 8 == 0: 16-byte weight loads, fp32 sums.
__device__ __forceinline__ float warp_dot_bf16(const float* __restrict__ x,
                                               const uint16_t* __restrict__ w, int n, int lane) {
  float acc = 0.f;
  for (int c = lane; c < n / 8; c += 32) {
    const uint4 wv = *reinterpret_cast<const uint4*>(w + c * 8);
    const float4 x0 = *reinterpret_cast<const float4*>(x + c * 8);
    const float4 x1 = *reinterpret_cast<const float4*>(x + c * 8 + 4);
    const uint32_t ww[4] = {wv.x, wv.y, wv.z, wv.w};
    const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc = fmaf(xs[2 * i], __uint_as_float(ww[i] << 16), acc);
      acc = fmaf(xs[2 * i + 1], __uint_as_float(ww[i] & 0xffff0000u), acc);
    }
  }
  return warp_sum(acc);
}

// MXFP4: the E2M1 codes doubled (ggml's kvalues_mxfp4); the scale byte e gives 2^(e - 128).
__constant__ int8_t kMxfp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// dot(x[0..n), MXFP4 w) of one warp, n % 32 == 0: lane b sums block b, 32 blocks apart.
__device__ __forceinline__ float warp_dot_mxfp4(const float* __restrict__ x,
                                                const uint8_t* __restrict__ w, int n, int lane) {
  float acc = 0.f;
  for (int b = lane; b < n / 32; b += 32) {
    const uint8_t* blk = w + b * 17;
    const float* xb = x + b * 32;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = blk[1 + j];
      s = fmaf(float(kMxfp4Doubled[q & 15]), xb[j], s);
      s = fmaf(float(kMxfp4Doubled[q >> 4]), xb[j + 16], s);
    }
    acc = fmaf(s, ldexpf(1.0f, int(blk[0]) - 128), acc);
  }
  return warp_sum(acc);
}

// One block per token: the fp32 RMSNorm (the CPU's rms_norm: double sum of squares, float scale),
// the router logits, top-K and the softmax over the chosen (double exp, as the CPU).
__global__ void moe_route_kernel(const MoeParams p) {
  extern __shared__ float sm[];  // [D] normed row, then [E] logits
  float* xs = sm;
  float* z = sm + p.D;
  __shared__ double red[kWarps];
  const int tok = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float* x = p.x + int64_t(tok) * p.D;
  double ss = 0.0;
  for (int i = tid; i < p.D; i += blockDim.x) ss += double(x[i]) * x[i];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  double tot = 0.0;
  for (int w = 0; w < kWarps; ++w) tot += red[w];
  const float scale = float(1.0 / sqrt(tot / double(p.D) + double(p.eps)));
  float* xn = p.xn + int64_t(tok) * p.D;
  for (int i = tid; i < p.D; i += blockDim.x) {
    const float v = x[i] * scale * p.norm_w[i];
    xs[i] = v;
    xn[i] = v;
  }
  __syncthreads();
  for (int e = warp; e < p.E; e += kWarps) {
    const float* r = p.router + int64_t(e) * p.D;
    float acc = 0.f;
    for (int i = lane; i < p.D; i += 32) acc = fmaf(xs[i], r[i], acc);
    acc = warp_sum(acc);
    if (lane == 0) z[e] = acc + p.router_b[e];
  }
  __syncthreads();
  if (tid != 0) return;
  int idx[kMoeMaxUsed];
  unsigned long long taken[kMoeMaxExperts / 64] = {};
  for (int k = 0; k < p.K; ++k) {
    int best = -1;
    for (int e = 0; e < p.E; ++e) {
      if (taken[e >> 6] >> (e & 63) & 1ull) continue;
      if (best < 0 || z[e] > z[best]) best = e;  // ties: the lower index stays
    }
    idx[k] = best;
    taken[best >> 6] |= 1ull << (best & 63);
  }
  const float zmax = z[idx[0]];
  double w[kMoeMaxUsed], sum = 0.0;
  for (int k = 0; k < p.K; ++k) sum += (w[k] = exp(double(z[idx[k]]) - zmax));
  for (int k = 0; k < p.K; ++k) {
    p.sel[int64_t(tok) * p.K + k] = idx[k];
    p.wts[int64_t(tok) * p.K + k] = float(w[k] / sum);
  }
}

// Block (pair = token * K + k, row block): warp w computes row j of the chosen expert's gate and
// up projections and the clamped SwiGLU of the two.
__global__ void __launch_bounds__(kWarps * 32) moe_gate_up_kernel(const MoeParams p) {
  const int pair = blockIdx.x, lane = threadIdx.x & 31;
  const int j = blockIdx.y * kWarps + (threadIdx.x >> 5);
  if (j >= p.F) return;
  const int tok = pair / p.K, e = p.sel[pair];
  const float* x = p.xn + int64_t(tok) * p.D;
  float g, u;
  if (p.q_gu) {
    const int64_t rb = p.D / 32 * 17;
    const uint8_t* wg = p.q_gu + (int64_t(e) * 2 * p.F + j) * rb;
    g = warp_dot_mxfp4(x, wg, p.D, lane);
    u = warp_dot_mxfp4(x, wg + int64_t(p.F) * rb, p.D, lane);
  } else {
    const uint16_t* wg = p.w_gu + (int64_t(e) * 2 * p.F + j) * p.D;
    g = warp_dot_bf16(x, wg, p.D, lane);
    u = warp_dot_bf16(x, wg + int64_t(p.F) * p.D, p.D, lane);
  }
  if (lane != 0) return;
  const float* b = p.b_gu + int64_t(e) * 2 * p.F;
  const float gj = fminf(g + b[j], p.limit);
  const float uj = fminf(fmaxf(u + b[p.F + j], -p.limit), p.limit);
  p.act[int64_t(pair) * p.F + j] = (uj + 1.0f) * (gj / (1.0f + expf(-p.alpha * gj)));
}

// Block (token, row block): warp w computes output row j over the token's K experts in their
// order, y = sum_k w_k (Wd h_k + bd), then x_out = x + y.
__global__ void __launch_bounds__(kWarps * 32) moe_down_kernel(const MoeParams p) {
  const int tok = blockIdx.x, lane = threadIdx.x & 31;
  const int j = blockIdx.y * kWarps + (threadIdx.x >> 5);
  if (j >= p.D) return;
  float y = 0.f;
  for (int k = 0; k < p.K; ++k) {
    const int pair = tok * p.K + k, e = p.sel[pair];
    const float* a = p.act + int64_t(pair) * p.F;
    const float o = p.q_down ? warp_dot_mxfp4(a, p.q_down + (int64_t(e) * p.D + j) * (p.F / 32 * 17),
                                              p.F, lane)
                             : warp_dot_bf16(a, p.w_down + (int64_t(e) * p.D + j) * p.F, p.F, lane);
    y += p.wts[pair] * (o + p.b_down[int64_t(e) * p.D + j]);
  }
  if (lane == 0) p.x_out[int64_t(tok) * p.D + j] = p.x[int64_t(tok) * p.D + j] + y;
}

__device__ __forceinline__ uint16_t bf16_bits(float f) {
  const __nv_bfloat16 b = __float2bfloat16_rn(f);
  return *reinterpret_cast<const uint16_t*>(&b);
}

__global__ void moe_gather_kernel(const float* __restrict__ xn, const int32_t* __restrict__ pair_tok,
                                  int64_t total, int D, uint16_t* __restrict__ xg) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / D, c = i % D;
    xg[i] = bf16_bits(xn[int64_t(pair_tok[r]) * D + c]);
  }
}

__global__ void moe_act_kernel(const float* __restrict__ gu, const int32_t* __restrict__ pair_exp,
                               const float* __restrict__ b_gu, int64_t total, int F, float alpha,
                               float limit, uint16_t* __restrict__ act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / F;
    const int j = int(i % F);
    const float* b = b_gu + int64_t(pair_exp[r]) * 2 * F;
    const float gj = fminf(gu[r * 2 * F + j] + b[j], limit);
    const float uj = fminf(fmaxf(gu[r * 2 * F + F + j] + b[F + j], -limit), limit);
    act[i] = bf16_bits((uj + 1.0f) * (gj / (1.0f + expf(-alpha * gj))));
  }
}

__global__ void moe_combine_kernel(const float* __restrict__ y, const int32_t* __restrict__ slot,
                                   const int32_t* __restrict__ sel, const float* __restrict__ wts,
                                   const float* __restrict__ b_down, int64_t total, int K, int D,
                                   const float* x, float* x_out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / D;
    const int j = int(i % D);
    float acc = 0.f;
    for (int k = 0; k < K; ++k) {
      const int64_t pk = t * K + k;
      acc += wts[pk] * (y[int64_t(slot[pk]) * D + j] + b_down[int64_t(sel[pk]) * D + j]);
    }
    x_out[i] = x[i] + acc;
  }
}

__global__ void mxfp4_to_bf16_kernel(const uint8_t* __restrict__ w, int64_t total, int cols,
                                     uint16_t* __restrict__ out) {
  const int64_t rb = cols / 32 * 17;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols;
    const int c = int(i % cols), k = c % 32;
    const uint8_t* blk = w + r * rb + (c / 32) * 17;
    const int q = k < 16 ? (blk[1 + k] & 15) : (blk[1 + k - 16] >> 4);
    out[i] = bf16_bits(float(kMxfp4Doubled[q]) * ldexpf(1.0f, int(blk[0]) - 128));
  }
}

unsigned grid_of(int64_t total) {
  return unsigned(std::min<int64_t>((total + 255) / 256, int64_t(1) << 20));
}

__global__ void add_bias_rows_kernel(float* x, const float* b, int64_t total, int dim) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] += b[i % dim];
}

}  // namespace

const char* moe_shape_error(int D, int F, int E, int K) {
  if (D <= 0 || D % 8 != 0) return "the MoE kernels need n_embd a positive multiple of 8";
  if (F <= 0 || F % 8 != 0) return "the MoE kernels need the expert width n_ff a positive multiple of 8";
  if (E < 1 || E > kMoeMaxExperts) return "the MoE kernels support 1..256 experts";
  if (K < 1 || K > E || K > kMoeMaxUsed)
    return "the MoE kernels support 1..16 experts per token (at most n_expert)";
  return "";
}

OpStatus launch_moe_ffn(const MoeParams& p, void* stream) {
  if (auto st = launch_moe_route(p, stream); !st.ok) return st;
  return launch_moe_gemv(p, stream);
}

OpStatus launch_moe_route(const MoeParams& p, void* stream) {
  if (p.n <= 0) return {};
  const char* why = moe_shape_error(p.D, p.F, p.E, p.K);
  if (why[0] != '\0') return OpStatus::error(std::string("launch_moe_route: ") + why);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const size_t smem = size_t(p.D + p.E) * 4;
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(moe_route_kernel,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess)
      return OpStatus::error(cuda_error_text(e, "moe_route_kernel smem", __FILE__, __LINE__));
  }
  moe_route_kernel<<<p.n, kWarps * 32, smem, s>>>(p);
  return check("moe_route_kernel", __FILE__, __LINE__);
}

OpStatus launch_moe_gemv(const MoeParams& p, void* stream) {
  if (p.n <= 0) return {};
  const char* why = moe_shape_error(p.D, p.F, p.E, p.K);
  if (why[0] != '\0') return OpStatus::error(std::string("launch_moe_gemv: ") + why);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  moe_gate_up_kernel<<<dim3(p.n * p.K, (p.F + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(p);
  if (auto st = check("moe_gate_up_kernel", __FILE__, __LINE__); !st.ok) return st;
  moe_down_kernel<<<dim3(p.n, (p.D + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(p);
  return check("moe_down_kernel", __FILE__, __LINE__);
}

OpStatus launch_moe_gather(const float* xn, const int32_t* pair_tok, int n_pairs, int D,
                           uint16_t* xg, void* stream) {
  const int64_t total = int64_t(n_pairs) * D;
  if (total <= 0) return {};
  moe_gather_kernel<<<grid_of(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(xn, pair_tok,
                                                                                   total, D, xg);
  return check("moe_gather_kernel", __FILE__, __LINE__);
}

OpStatus launch_moe_act(const float* gu, const int32_t* pair_exp, const float* b_gu, int n_pairs,
                        int F, float alpha, float limit, uint16_t* act, void* stream) {
  const int64_t total = int64_t(n_pairs) * F;
  if (total <= 0) return {};
  moe_act_kernel<<<grid_of(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      gu, pair_exp, b_gu, total, F, alpha, limit, act);
  return check("moe_act_kernel", __FILE__, __LINE__);
}

OpStatus launch_moe_combine(const float* y, const int32_t* slot, const int32_t* sel,
                            const float* wts, const float* b_down, int n, int K, int D,
                            const float* x, float* x_out, void* stream) {
  const int64_t total = int64_t(n) * D;
  if (total <= 0) return {};
  moe_combine_kernel<<<grid_of(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      y, slot, sel, wts, b_down, total, K, D, x, x_out);
  return check("moe_combine_kernel", __FILE__, __LINE__);
}

OpStatus launch_mxfp4_to_bf16(const uint8_t* w, int64_t rows, int cols, uint16_t* out,
                              void* stream) {
  const int64_t total = rows * cols;
  if (total <= 0) return {};
  if (cols % 32 != 0) return OpStatus::error("launch_mxfp4_to_bf16: cols must be a multiple of 32");
  mxfp4_to_bf16_kernel<<<grid_of(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(w, total, cols,
                                                                                      out);
  return check("mxfp4_to_bf16_kernel", __FILE__, __LINE__);
}

OpStatus launch_add_bias_rows(float* x, const float* b, int rows, int dim, void* stream) {
  const int64_t total = int64_t(rows) * dim;
  if (total <= 0) return {};
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, int64_t(1) << 20);
  add_bias_rows_kernel<<<unsigned(blocks), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, b, total, dim);
  return check("add_bias_rows_kernel", __FILE__, __LINE__);
}

}  // namespace sinkscope::kernels
