// SPDX-License-Identifier: Apache-2.0
// Element-wise and fused kernels of the CUDA backend (see kernels/ops.h). All of them are
// memory-bound and tiny next to the GEMMs; they favour exactness (fp32 math, the CPU's
// formulas) over cleverness. Launchers check the launch with cudaGetLastError.
#include "kernels/ops.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda_check.h"
#include "kernels/pdl.cuh"
#include "kernels/rms_norm_math.cuh"
#include "kernels/rope_pair.cuh"
#include "kernels/tuning.h"

namespace sinkscope::kernels {

namespace {
std::atomic<int> g_pdl{-1};  // -1: not yet read from the environment
}  // namespace

bool pdl_enabled() {
  int v = g_pdl.load(std::memory_order_relaxed);
  if (v < 0) {
    const int from_env = gpu_tuning().pdl ? 1 : 0;
    int expected = -1;
    g_pdl.compare_exchange_strong(expected, from_env);
    v = g_pdl.load(std::memory_order_relaxed);
  }
  return v == 1;
}

void set_pdl_enabled(bool on) {
  (void)pdl_enabled();  // the tuning is read first, so a later read cannot undo this
  g_pdl.store(on ? 1 : 0, std::memory_order_relaxed);
}

namespace {

using detail::launch_pdl;
using detail::paged_kv_index;
using detail::pdl_trigger;
using detail::pdl_wait;
using detail::rope_rotate;

constexpr int kThreads = 256;

__device__ __forceinline__ uint16_t to_bf16_bits(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
__device__ __forceinline__ float from_bf16_bits(uint16_t b) {
  return __bfloat162float(__ushort_as_bfloat16(b));
}

// Grid for a grid-stride loop over n elements.
unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<int64_t>(blocks, int64_t(1) << 20));
}

OpStatus check_launch(const char* what, const char* file, int line) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return OpStatus::error(cuda_error_text(e, what, file, line));
  return {};
}
#define SINKSCOPE_OP_CHECK(what) check_launch(what, __FILE__, __LINE__)

__global__ void f32_to_bf16_kernel(const float* __restrict__ src, uint16_t* __restrict__ dst,
                                   int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = to_bf16_bits(src[i]);
}

// One block per token row.
__global__ void embed_gather_kernel(const uint16_t* __restrict__ table,
                                    const int32_t* __restrict__ tokens, float* __restrict__ x,
                                    int dim, float scale) {
  const int64_t row = blockIdx.x;
  const uint16_t* src = table + int64_t(tokens[row]) * dim;
  float* dst = x + row * dim;
  if (scale == 1.0f) {
    for (int d = threadIdx.x; d < dim; d += blockDim.x) dst[d] = from_bf16_bits(src[d]);
  } else {
    for (int d = threadIdx.x; d < dim; d += blockDim.x) dst[d] = from_bf16_bits(src[d]) * scale;
  }
}

// Gemma's post-norm + residual add, one block per row (as rms_norm_kernel).
__global__ void __launch_bounds__(kThreads)
    rms_norm_add_kernel(const float* __restrict__ y, const float* __restrict__ w,
                        float* __restrict__ x, int dim, float eps) {
  pdl_wait();
  pdl_trigger();
  const int64_t row = blockIdx.x;
  const float* yr = y + row * dim;
  double ss = 0.0;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) ss += double(yr[d]) * yr[d];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ double warp_sums[kThreads / 32];
  __shared__ float scale_s;
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int i = 0; i < kThreads / 32; ++i) total += warp_sums[i];
    scale_s = float(1.0 / sqrt(total / double(dim) + double(eps)));
  }
  __syncthreads();
  const float scale = scale_s;
  float* xr = x + row * dim;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) xr[d] += yr[d] * scale * w[d];
}

__global__ void geglu_kernel(const float* __restrict__ gu, uint16_t* __restrict__ out,
                             int64_t total, int n_ff) {
  pdl_wait();
  pdl_trigger();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t r = i / n_ff, j = i % n_ff;
  const float g = gu[r * 2 * n_ff + j], u = gu[r * 2 * n_ff + n_ff + j];
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  out[i] = to_bf16_bits(0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g))) * u);
}

__global__ void softcap_kernel(float* __restrict__ x, int64_t n, float cap, float inv) {
  pdl_wait();
  pdl_trigger();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = tanhf(x[i] * inv) * cap;
}

// One block per row; kThreads threads. Sum of squares in fp32 per thread, then warp shuffles
// and one shared-memory step. The scale is formed in double like the CPU reference
// (engine/backend/linalg.cpp rms_norm), and the product keeps its order: (x * scale) * w.
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                    uint16_t* __restrict__ out, int dim, float eps) {
  pdl_wait();  // PDL: nothing is touched before the predecessor is complete (kernels/pdl.cuh)
  pdl_trigger();
  const int64_t row = blockIdx.x;
  const float* xr = x + row * dim;
  float ss = 0.f;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) ss += xr[d] * xr[d];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ float warp_sums[kThreads / 32];
  __shared__ float scale_s;
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int i = 0; i < kThreads / 32; ++i) total += warp_sums[i];
    scale_s = float(1.0 / sqrt(total / double(dim) + double(eps)));
  }
  __syncthreads();
  const float scale = scale_s;
  uint16_t* o = out + row * dim;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) o[d] = to_bf16_bits(xr[d] * scale * w[d]);
}

// add_squares, norm_pack4: kernels/rms_norm_math.cuh (the decode GEMV's norm uses them too).
using detail::add_squares;
using detail::norm_pack4;

// RMSNorm, one warp per row, the row held in registers as VPL float4 per lane (dim % 4 == 0,
// dim <= 128 * VPL; 16-byte aligned x and w, 8-byte aligned out). No shared memory, no block
// barrier: one load wave, a shuffle reduction, the scale in double (like the CPU reference:
// 1 / sqrt(mean + eps)), and (x * scale) * w in that order. For D = 576: 4.5 float4 per lane.
constexpr int kNormWarps = 4;  // rows per block
template <int VPL>
__global__ void __launch_bounds__(kNormWarps * 32)
    rms_norm_warp_kernel(const float4* __restrict__ x, const float4* __restrict__ w,
                         uint2* __restrict__ out, int rows, int n4, float eps) {
  pdl_wait();
  pdl_trigger();
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kNormWarps + (threadIdx.x >> 5);
  if (row >= rows) return;
  const float4* xr = x + row * n4;
  float4 v[VPL];
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < VPL; ++k) {
    const int i = lane + 32 * k;
    v[k] = i < n4 ? xr[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    ss = add_squares(ss, v[k]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float scale = float(1.0 / sqrt(double(ss) / double(4 * n4) + double(eps)));
  uint2* orow = out + row * n4;
#pragma unroll
  for (int k = 0; k < VPL; ++k) {
    const int i = lane + 32 * k;
    if (i < n4) orow[i] = norm_pack4(v[k], scale, w[i]);
  }
}

// RMSNorm of rows too wide for the one-warp kernel (D > 2048: 3584, 4096, 8192, ...), one CTA of
// kThreads per row, each thread holding VPT float4 of x and of the gain in registers: one load
// wave for each (the strided scalar loop of rms_norm_kernel issues a dependent chain of loads
// and reads x twice, which at batch 1 is a long single-CTA kernel between two GEMVs). The gain
// is a model weight, constant during a pass, so it is loaded before the PDL wait; x after it.
// Every thread sums the warp partials in the same order, in double (one scale per row, the
// formula of the CPU reference), then (x * scale) * w. Needs dim % 4 == 0, 16-byte aligned x
// and w, 8-byte aligned out, dim <= 4 * VPT * kThreads.
template <int VPT>
__global__ void __launch_bounds__(kThreads)
    rms_norm_row_kernel(const float4* __restrict__ x, const float4* __restrict__ w,
                        uint2* __restrict__ out, int n4, float eps) {
  float4 g[VPT], v[VPT];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    g[k] = i < n4 ? w[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  pdl_wait();
  pdl_trigger();
  const int64_t row = blockIdx.x;
  const float4* xr = x + row * n4;
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    v[k] = i < n4 ? xr[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int k = 0; k < VPT; ++k) ss = add_squares(ss, v[k]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ float warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  double total = 0.0;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) total += warp_sums[i];
  const float scale = float(1.0 / sqrt(total / double(4 * n4) + double(eps)));
  uint2* orow = out + row * n4;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    if (i < n4) orow[i] = norm_pack4(v[k], scale, g[k]);
  }
}

// Blocks (token, chunk): gridDim.y chunks of the q|k|v row per token, threads stride over the
// chunk's elements. Few tokens (a decode step) take one 256-element chunk per block, so the row
// is spread over many SMs instead of one block walking 6,144 elements (an 8B model's row) in a
// chain of dependent loads; many tokens (a prefill) one block per row. Pairs follow engine/model/rope.h:
// x[a] = x0*c - x1*s, x[b] = x0*s + x1*c with (a, b) = (2i, 2i+1) or (i, i + rope_dim/2).
__global__ void qkv_rope_append_kernel(QkvRopeParams p) {
  pdl_wait();
  pdl_trigger();
  const int row = blockIdx.x;
  const int q_dim = p.n_head * p.head_dim;
  const int kv_dim = p.n_head_kv * p.head_dim;
  const int width = q_dim + 2 * kv_dim;
  const float* in = p.qkv + int64_t(row) * width;
  const int pos = (p.pos0_dev ? *p.pos0_dev : p.pos0) + row;
  const int half = p.rope_dim / 2;
  const float* cs = p.rope_cos + int64_t(pos) * half;
  const float* sn = p.rope_sin + int64_t(pos) * half;
  // Quantized cache: fp32 K|V rows for launch_kv_quant_append instead of bf16 page writes.
  float* kv32 = p.kv_f32 ? p.kv_f32 + int64_t(row) * 2 * kv_dim : nullptr;
  const int64_t page = kv32 ? 0 : p.page_table[pos / p.block_size];
  const int slot = pos % p.block_size;
  auto value = [&](int j) { return p.bias ? in[j] + p.bias[j] : in[j]; };
  for (int e = blockIdx.y * blockDim.x + threadIdx.x; e < width; e += blockDim.x * gridDim.y) {
    if (e < q_dim + kv_dim) {
      const bool is_q = e < q_dim;
      const int local = is_q ? e : e - q_dim;
      const int h = local / p.head_dim;
      const int d = local - h * p.head_dim;
      float out;
      if (d < p.rope_dim) {
        bool first;
        int i, partner;
        if (p.neox) {
          first = d < half;
          i = first ? d : d - half;
          partner = first ? d + half : d - half;
        } else {
          first = (d & 1) == 0;
          i = d >> 1;
          partner = d ^ 1;
        }
        const float mine = value(e), other = value(e - d + partner);
        float ra, rb;  // the pair (x[a], x[b]) rotated (kernels/rope_pair.cuh)
        rope_rotate(first ? mine : other, first ? other : mine, cs[i], sn[i], &ra, &rb);
        out = first ? ra : rb;
      } else {
        out = value(e);
      }
      if (is_q) {
        p.q_out[int64_t(row) * q_dim + e] = to_bf16_bits(out);
      } else if (kv32) {
        kv32[local] = out;
      } else {
        p.k_pages[paged_kv_index(page, p.n_head_kv, h, p.block_size, slot, p.head_dim, d)] =
            to_bf16_bits(out);
      }
    } else {
      const int local = e - q_dim - kv_dim;
      const int h = local / p.head_dim;
      const int d = local - h * p.head_dim;
      if (kv32) {
        kv32[kv_dim + local] = value(e);
      } else {
        p.v_pages[paged_kv_index(page, p.n_head_kv, h, p.block_size, slot, p.head_dim, d)] =
            to_bf16_bits(value(e));
      }
    }
  }
}

// ---- quantized KV append (launch_kv_quant_append) ----
constexpr int kQuantWarpsPerBlock = 8;

// The CPU's quantize_kv_row (engine/cache/kv_quant.cpp) for one group of 32, lane i = element i,
// with correctly rounded operations so the codes equal the CPU's for the same fp32 input:
// want = amax / qmax (IEEE division), scale = the smallest fp16 >= want (__float2half_ru ==
// fp16_round_up), inv = 1 / s (IEEE), code = round-half-even(x * inv) clamped (== lrint).
// One warp per (token, head) of the q|k|v row: heads [0, n_head) are queries, then n_head_kv
// keys (normalised), then n_head_kv values (bias only).
constexpr int kHeadNormWarps = 4;
__global__ void __launch_bounds__(kHeadNormWarps * 32) qk_head_norm_kernel(QkHeadNormParams p) {
  pdl_wait();
  pdl_trigger();
  const int lane = threadIdx.x & 31;
  const int heads = p.n_head + 2 * p.n_head_kv;
  const int64_t item = int64_t(blockIdx.x) * kHeadNormWarps + (threadIdx.x >> 5);
  if (item >= int64_t(p.n_tokens) * heads) return;
  const int token = int(item / heads), h = int(item % heads);
  const int width = heads * p.head_dim;
  float* x = p.qkv + int64_t(token) * width + int64_t(h) * p.head_dim;
  const float* b = p.bias ? p.bias + int64_t(h) * p.head_dim : nullptr;
  const float* g = h < p.n_head ? p.q_norm : h < p.n_head + p.n_head_kv ? p.k_norm : nullptr;
  double ss = 0.0;
  for (int d = lane; d < p.head_dim; d += 32) {
    const float v = b ? x[d] + b[d] : x[d];
    if (b) x[d] = v;
    ss += double(v) * v;
  }
  if (!g) return;  // a value head: bias only
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float scale = float(1.0 / sqrt(ss / double(p.head_dim) + double(p.eps)));
  for (int d = lane; d < p.head_dim; d += 32) x[d] = x[d] * scale * g[d];
}

__global__ void kv_quant_append_kernel(KvQuantAppendParams p) {
  pdl_wait();
  pdl_trigger();
  const int lane = threadIdx.x & 31;
  const int64_t wid = int64_t(blockIdx.x) * kQuantWarpsPerBlock + (threadIdx.x >> 5);
  const int ng = p.head_dim / 32;
  const int64_t total = int64_t(p.n_tokens) * 2 * p.n_head_kv * ng;
  if (wid >= total) return;
  const int grp = int(wid % ng);
  const int h = int((wid / ng) % p.n_head_kv);
  const int is_v = int((wid / (int64_t(ng) * p.n_head_kv)) % 2);
  const int row = int(wid / (int64_t(ng) * p.n_head_kv * 2));
  const int kv_dim = p.n_head_kv * p.head_dim;
  const float x = p.kv_f32[int64_t(row) * 2 * kv_dim + is_v * kv_dim + h * p.head_dim +
                           grp * 32 + lane];
  float amax = fabsf(x);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const int qmax = p.bits == 8 ? 127 : 7;
  float want = __fdiv_rn(amax, float(qmax));
  if (!(want <= 65504.f)) want = 65504.f;  // the CPU throws here (ops.h)
  const __half hs = __float2half_ru(want);
  const float s = __half2float(hs);
  const float inv = s > 0.f ? __frcp_rn(s) : 0.f;
  int c = __float2int_rn(__fmul_rn(x, inv));
  c = max(-qmax, min(qmax, c));
  const int pos = (p.pos0_dev ? *p.pos0_dev : p.pos0) + row;
  const int32_t entry = p.page_table[pos / p.block_size];
  const int slot = pos % p.block_size;
  const int d = grp * 32 + lane;
  if (entry < 0) {  // protected bf16 page
    const int orig = (p.orig_pos0_dev ? *p.orig_pos0_dev : p.orig_pos0) + row;
    bool prot = orig < p.prot_sinks;
    for (int lo = 0, hi = p.n_prot_extra; !prot && lo < hi;) {  // binary search, sorted list
      const int mid = (lo + hi) / 2;
      const int v = p.prot_extra[mid];
      if (v == orig) prot = true;
      if (v < orig) lo = mid + 1; else hi = mid;
    }
    const float val = prot ? x : __fmul_rn(float(c), s);
    uint16_t* dst = is_v ? p.prot_v : p.prot_k;
    dst[paged_kv_index(-1 - int64_t(entry), p.n_head_kv, h, p.block_size, slot, p.head_dim, d)] =
        to_bf16_bits(val);
    return;
  }
  const int64_t vec = (int64_t(entry) * p.n_head_kv + h) * p.block_size + slot;
  if (p.bits == 8) {
    (is_v ? p.v_codes : p.k_codes)[vec * p.head_dim + d] = uint8_t(int8_t(c));
  } else {
    // Element 2i in the low nibble, stored as c + 8 (kv_layout.h).
    const int partner = __shfl_xor_sync(0xffffffffu, c, 1);
    if ((lane & 1) == 0)
      (is_v ? p.v_codes : p.k_codes)[vec * (p.head_dim / 2) + d / 2] =
          uint8_t((c + 8) | ((partner + 8) << 4));
  }
  if (lane == 0)
    (is_v ? p.v_scales : p.k_scales)[vec * ng + grp] = __half_as_ushort(hs);
}

__global__ void swiglu_kernel(const float* __restrict__ gu, uint16_t* __restrict__ out,
                              int64_t total, int n_ff) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / n_ff;
    const int64_t j = i - r * n_ff;
    const float g = gu[r * 2 * n_ff + j];
    const float u = gu[r * 2 * n_ff + n_ff + j];
    out[i] = to_bf16_bits(g / (1.0f + expf(-g)) * u);
  }
}

__global__ void repage_kernel(const uint16_t* __restrict__ src, uint16_t* __restrict__ dst,
                              int64_t total, int n_kv_heads, int head_dim, int bs_src, int bs_dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int d = int(i % head_dim);
    const int64_t t = i / head_dim;
    const int h = int(t % n_kv_heads);
    const int64_t pos = t / n_kv_heads;
    const int64_t s = ((pos / bs_src * n_kv_heads + h) * bs_src + pos % bs_src) * head_dim + d;
    const int64_t o = ((pos / bs_dst * n_kv_heads + h) * bs_dst + pos % bs_dst) * head_dim + d;
    dst[o] = src[s];
  }
}

}  // namespace

OpStatus ops_device_check() {
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, f32_to_bf16_kernel);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return OpStatus::error(
        cuda_error_text(e, "cudaFuncGetAttributes(f32_to_bf16_kernel)", __FILE__, __LINE__) +
        " -- was the binary built for this GPU's architecture?");
  }
  return {};
}

OpStatus launch_f32_to_bf16(const float* src, uint16_t* dst, int64_t n, void* stream) {
  if (n <= 0) return {};
  f32_to_bf16_kernel<<<grid_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(src, dst, n);
  return SINKSCOPE_OP_CHECK("f32_to_bf16_kernel");
}

OpStatus launch_embed_gather(const uint16_t* table, const int32_t* tokens, float* x, int n, int dim,
                             void* stream, float scale) {
  if (n <= 0 || dim <= 0) return {};
  embed_gather_kernel<<<n, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(table, tokens, x, dim,
                                                                             scale);
  return SINKSCOPE_OP_CHECK("embed_gather_kernel");
}

OpStatus launch_rms_norm_add(const float* y, const float* w, float* x, int rows, int dim, float eps,
                             void* stream) {
  if (rows <= 0 || dim <= 0) return {};
  const cudaError_t e = launch_pdl(true, rms_norm_add_kernel, dim3(rows), dim3(kThreads), 0,
                                   static_cast<cudaStream_t>(stream), y, w, x, dim, eps);
  if (e != cudaSuccess)
    return OpStatus::error(cuda_error_text(e, "rms_norm_add_kernel", __FILE__, __LINE__));
  return {};
}

OpStatus launch_geglu(const float* gate_up, uint16_t* out, int rows, int n_ff, void* stream) {
  const int64_t total = int64_t(rows) * n_ff;
  if (total <= 0) return {};
  const cudaError_t e = launch_pdl(true, geglu_kernel, dim3(grid_for(total)), dim3(kThreads), 0,
                                   static_cast<cudaStream_t>(stream), gate_up, out, total, n_ff);
  if (e != cudaSuccess)
    return OpStatus::error(cuda_error_text(e, "geglu_kernel", __FILE__, __LINE__));
  return {};
}

OpStatus launch_softcap(float* x, int64_t n, float cap, void* stream) {
  if (n <= 0) return {};
  if (!(cap > 0)) return OpStatus::error("launch_softcap: cap must be > 0");
  const cudaError_t e = launch_pdl(true, softcap_kernel, dim3(grid_for(n)), dim3(kThreads), 0,
                                   static_cast<cudaStream_t>(stream), x, n, cap, 1.0f / cap);
  if (e != cudaSuccess)
    return OpStatus::error(cuda_error_text(e, "softcap_kernel", __FILE__, __LINE__));
  return {};
}

OpStatus launch_rms_norm(const float* x, const float* w, uint16_t* out, int rows, int dim,
                         float eps, void* stream) {
  if (rows <= 0 || dim <= 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  const bool aligned = dim % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(out) % 8 == 0;
  const int n4 = dim / 4, vpl = (n4 + 31) / 32;
  if (aligned && vpl <= 16) {
    const int warps = rows < kNormWarps ? rows : kNormWarps;
    const dim3 grid(static_cast<unsigned>((rows + kNormWarps - 1) / kNormWarps));
    const dim3 block(static_cast<unsigned>(warps * 32));
    const auto* x4 = reinterpret_cast<const float4*>(x);
    const auto* w4 = reinterpret_cast<const float4*>(w);
    auto* o2 = reinterpret_cast<uint2*>(out);
    cudaError_t e;
#define SS_NORM_CASE(V) \
  e = launch_pdl(true, rms_norm_warp_kernel<V>, grid, block, 0, st, x4, w4, o2, rows, n4, eps)
    if (vpl <= 1) SS_NORM_CASE(1);
    else if (vpl <= 2) SS_NORM_CASE(2);
    else if (vpl <= 3) SS_NORM_CASE(3);
    else if (vpl <= 4) SS_NORM_CASE(4);
    else if (vpl <= 5) SS_NORM_CASE(5);
    else if (vpl <= 6) SS_NORM_CASE(6);
    else if (vpl <= 8) SS_NORM_CASE(8);
    else if (vpl <= 12) SS_NORM_CASE(12);
    else SS_NORM_CASE(16);
#undef SS_NORM_CASE
    if (e != cudaSuccess)
      return OpStatus::error(cuda_error_text(e, "rms_norm_warp_kernel", __FILE__, __LINE__));
    return {};
  }
  if (aligned && n4 <= 8 * kThreads) {
    const auto* x4 = reinterpret_cast<const float4*>(x);
    const auto* w4 = reinterpret_cast<const float4*>(w);
    auto* o2 = reinterpret_cast<uint2*>(out);
    const cudaError_t e =
        n4 <= 4 * kThreads
            ? launch_pdl(true, rms_norm_row_kernel<4>, dim3(rows), dim3(kThreads), 0, st, x4, w4, o2, n4, eps)
            : launch_pdl(true, rms_norm_row_kernel<8>, dim3(rows), dim3(kThreads), 0, st, x4, w4, o2, n4, eps);
    if (e != cudaSuccess)
      return OpStatus::error(cuda_error_text(e, "rms_norm_row_kernel", __FILE__, __LINE__));
    return {};
  }
  const cudaError_t e = launch_pdl(true, rms_norm_kernel, dim3(rows), dim3(kThreads), 0, st, x, w,
                                   out, dim, eps);
  if (e != cudaSuccess)
    return OpStatus::error(cuda_error_text(e, "rms_norm_kernel", __FILE__, __LINE__));
  return {};
}

OpStatus launch_qkv_rope_append(const QkvRopeParams& p, void* stream) {
  if (p.n_tokens <= 0) return {};
  if (!p.qkv || !p.rope_cos || !p.rope_sin || !p.q_out ||
      (!p.kv_f32 && (!p.k_pages || !p.v_pages || !p.page_table)))
    return OpStatus::error("launch_qkv_rope_append: a required pointer is null");
  if (p.rope_dim < 0 || p.rope_dim > p.head_dim || p.rope_dim % 2 != 0 || p.block_size <= 0)
    return OpStatus::error("launch_qkv_rope_append: bad rope_dim/head_dim/block_size");
  const int width = (p.n_head + 2 * p.n_head_kv) * p.head_dim;
  const unsigned chunks = p.n_tokens < 32 ? unsigned((width + kThreads - 1) / kThreads) : 1u;
  const cudaError_t e = launch_pdl(true, qkv_rope_append_kernel, dim3(p.n_tokens, chunks),
                                   dim3(kThreads), 0, static_cast<cudaStream_t>(stream), p);
  if (e != cudaSuccess)
    return OpStatus::error(cuda_error_text(e, "qkv_rope_append_kernel", __FILE__, __LINE__));
  return {};
}

OpStatus launch_qk_head_norm(const QkHeadNormParams& p, void* stream) {
  if (p.n_tokens <= 0) return {};
  if (!p.qkv || !p.q_norm || !p.k_norm)
    return OpStatus::error("launch_qk_head_norm: a required pointer is null");
  if (p.n_head <= 0 || p.n_head_kv <= 0 || p.head_dim <= 0)
    return OpStatus::error("launch_qk_head_norm: empty head shape");
  const int64_t warps = int64_t(p.n_tokens) * (p.n_head + 2 * p.n_head_kv);
  const int64_t blocks = (warps + kHeadNormWarps - 1) / kHeadNormWarps;
  const cudaError_t e = launch_pdl(true, qk_head_norm_kernel, dim3(unsigned(blocks)),
                                   dim3(kHeadNormWarps * 32), 0, static_cast<cudaStream_t>(stream), p);
  if (e != cudaSuccess)
    return OpStatus::error(cuda_error_text(e, "qk_head_norm_kernel", __FILE__, __LINE__));
  return {};
}

OpStatus launch_kv_quant_append(const KvQuantAppendParams& p, void* stream) {
  if (p.n_tokens <= 0) return {};
  if (!p.kv_f32 || !p.k_codes || !p.v_codes || !p.k_scales || !p.v_scales || !p.page_table ||
      (p.n_prot_extra > 0 && !p.prot_extra))
    return OpStatus::error("launch_kv_quant_append: a required pointer is null");
  if ((p.bits != 8 && p.bits != 4) || p.head_dim <= 0 || p.head_dim % 32 != 0 ||
      p.block_size <= 0 || p.n_head_kv <= 0)
    return OpStatus::error("launch_kv_quant_append: bits must be 8 or 4, head_dim a multiple of 32");
  // One warp per (token, K|V, kv head, group of 32).
  const int64_t warps = int64_t(p.n_tokens) * 2 * p.n_head_kv * (p.head_dim / 32);
  const int64_t blocks = (warps + kQuantWarpsPerBlock - 1) / kQuantWarpsPerBlock;
  const cudaError_t e = launch_pdl(true, kv_quant_append_kernel, dim3(unsigned(blocks)),
                                   dim3(kQuantWarpsPerBlock * 32), 0,
                                   static_cast<cudaStream_t>(stream), p);
  if (e != cudaSuccess)
    return OpStatus::error(cuda_error_text(e, "kv_quant_append_kernel", __FILE__, __LINE__));
  return {};
}

OpStatus launch_swiglu(const float* gate_up, uint16_t* out, int rows, int n_ff, void* stream) {
  const int64_t total = int64_t(rows) * n_ff;
  if (total <= 0) return {};
  const cudaError_t e = launch_pdl(true, swiglu_kernel, dim3(grid_for(total)), dim3(kThreads), 0,
                                   static_cast<cudaStream_t>(stream), gate_up, out, total, n_ff);
  if (e != cudaSuccess)
    return OpStatus::error(cuda_error_text(e, "swiglu_kernel", __FILE__, __LINE__));
  return {};
}

OpStatus launch_repage_kv(const uint16_t* src, uint16_t* dst, int64_t n_positions, int n_kv_heads,
                          int head_dim, int bs_src, int bs_dst, void* stream) {
  const int64_t total = n_positions * n_kv_heads * head_dim;
  if (total <= 0) return {};
  if (bs_src <= 0 || bs_dst <= 0) return OpStatus::error("launch_repage_kv: bad block sizes");
  repage_kernel<<<grid_for(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      src, dst, total, n_kv_heads, head_dim, bs_src, bs_dst);
  return SINKSCOPE_OP_CHECK("repage_kernel");
}

namespace {

// One block per token over its q_dim query elements; pairs and rounding as in
// qkv_rope_append_kernel (kernels/rope_pair.cuh).
__global__ void rope_queries_kernel(RopeQueriesParams p) {
  detail::pdl_wait();
  detail::pdl_trigger();
  const int row = blockIdx.x;
  const int q_dim = p.n_head * p.head_dim;
  const int width = q_dim + 2 * p.n_head_kv * p.head_dim;
  const float* in = p.qkv + int64_t(row) * width;
  const int64_t pos = int64_t(p.pos0_dev ? *p.pos0_dev : p.pos0) + row;
  // cache_position() of engine/cache/kv_layout.h.
  int64_t c = pos;
  if (p.window > 0 && pos >= p.sinks) {
    const int64_t past = pos - p.sinks;
    c = p.sinks + (past < p.window - 1 ? past : p.window - 1);
  }
  const int half = p.rope_dim / 2;
  const float* cs = p.rope_cos + c * half;
  const float* sn = p.rope_sin + c * half;
  auto value = [&](int j) { return p.bias ? in[j] + p.bias[j] : in[j]; };
  for (int e = threadIdx.x; e < q_dim; e += blockDim.x) {
    const int d = e % p.head_dim;
    float out;
    if (d < p.rope_dim) {
      bool first;
      int i, partner;
      if (p.neox) {
        first = d < half;
        i = first ? d : d - half;
        partner = first ? d + half : d - half;
      } else {
        first = (d & 1) == 0;
        i = d >> 1;
        partner = d ^ 1;
      }
      const float mine = value(e), other = value(e - d + partner);
      float ra, rb;
      detail::rope_rotate(first ? mine : other, first ? other : mine, cs[i], sn[i], &ra, &rb);
      out = first ? ra : rb;
    } else {
      out = value(e);
    }
    p.q_out[int64_t(row) * q_dim + e] = to_bf16_bits(out);
  }
}

}  // namespace

OpStatus launch_rope_queries_at_cache_index(const RopeQueriesParams& p, void* stream) {
  if (p.n_tokens <= 0) return {};
  if (!p.qkv || !p.rope_cos || !p.rope_sin || !p.q_out)
    return OpStatus::error("launch_rope_queries_at_cache_index: a required pointer is null");
  if (p.rope_dim < 0 || p.rope_dim > p.head_dim || p.rope_dim % 2 != 0 || p.window < 1 ||
      p.sinks < 0)
    return OpStatus::error("launch_rope_queries_at_cache_index: bad rope_dim/window/sinks");
  const cudaError_t e = detail::launch_pdl(true, rope_queries_kernel, dim3(p.n_tokens),
                                           dim3(kThreads), 0, static_cast<cudaStream_t>(stream), p);
  if (e != cudaSuccess)
    return OpStatus::error(cuda_error_text(e, "rope_queries_kernel", __FILE__, __LINE__));
  return {};
}

namespace {

// (max, first index) of two candidates: the larger value, the smaller index on a tie.
__device__ __forceinline__ void max_first(float& m, int& a, float m2, int a2) {
  if (m2 > m || (m2 == m && a2 < a)) {
    m = m2;
    a = a2;
  }
}

__global__ void __launch_bounds__(kThreads)
    row_lse_argmax_kernel(const float* __restrict__ logits, int n_vocab, double* __restrict__ lse,
                          int* __restrict__ top1, const int* __restrict__ next,
                          float* __restrict__ next_logit) {
  __shared__ float s_m[kThreads / 32];
  __shared__ int s_a[kThreads / 32];
  __shared__ double s_sum[kThreads / 32];
  const float* x = logits + int64_t(blockIdx.x) * n_vocab;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float m = -INFINITY;
  int a = n_vocab;
  for (int v = threadIdx.x; v < n_vocab; v += blockDim.x) max_first(m, a, x[v], v);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    max_first(m, a, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, a, o));
  if (lane == 0) {
    s_m[warp] = m;
    s_a[warp] = a;
  }
  __syncthreads();
  m = s_m[0];
  a = s_a[0];
  for (int w = 1; w < kThreads / 32; ++w) max_first(m, a, s_m[w], s_a[w]);
  const double mx = double(m);
  double sum = 0.0;
  for (int v = threadIdx.x; v < n_vocab; v += blockDim.x) sum += exp(double(x[v]) - mx);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) s_sum[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) t += s_sum[w];
    lse[blockIdx.x] = mx + log(t);
    top1[blockIdx.x] = a < n_vocab ? a : 0;
    if (next) {
      const int tok = next[blockIdx.x];
      if (tok >= 0 && tok < n_vocab) next_logit[blockIdx.x] = x[tok];
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    row_kl_kernel(const float* __restrict__ p, const float* __restrict__ q, int n_vocab,
                  const double* __restrict__ lse_p, const double* __restrict__ lse_q,
                  double* __restrict__ kl) {
  __shared__ double s_sum[kThreads / 32];
  const int64_t off = int64_t(blockIdx.x) * n_vocab;
  const double lp = lse_p[blockIdx.x], lq = lse_q[blockIdx.x];
  double sum = 0.0;
  for (int v = threadIdx.x; v < n_vocab; v += blockDim.x) {
    const double logp = double(p[off + v]) - lp;
    sum += exp(logp) * (logp - (double(q[off + v]) - lq));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) s_sum[threadIdx.x >> 5] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) t += s_sum[w];
    kl[blockIdx.x] = t > 0.0 ? t : 0.0;
  }
}

}  // namespace

OpStatus launch_row_lse_argmax(const float* logits, int rows, int n_vocab, double* lse, int* top1,
                               void* stream, const int* next, float* next_logit) {
  if (rows <= 0 || n_vocab <= 0) return {};
  if (!logits || !lse || !top1 || (next && !next_logit))
    return OpStatus::error("launch_row_lse_argmax: null pointer");
  row_lse_argmax_kernel<<<rows, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, n_vocab, lse, top1, next, next_logit);
  return SINKSCOPE_OP_CHECK("row_lse_argmax_kernel");
}

OpStatus launch_row_kl(const float* p, const float* q, int rows, int n_vocab, const double* lse_p,
                       const double* lse_q, double* kl, void* stream) {
  if (rows <= 0 || n_vocab <= 0) return {};
  if (!p || !q || !lse_p || !lse_q || !kl) return OpStatus::error("launch_row_kl: null pointer");
  row_kl_kernel<<<rows, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p, q, n_vocab, lse_p,
                                                                         lse_q, kl);
  return SINKSCOPE_OP_CHECK("row_kl_kernel");
}

}  // namespace sinkscope::kernels
