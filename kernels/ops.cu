// SPDX-License-Identifier: Apache-2.0
// Element-wise and fused kernels of the CUDA backend (see kernels/ops.h). All of them are
// memory-bound and tiny next to the GEMMs; they favour exactness (fp32 math, the CPU's
// formulas) over cleverness. Launchers check the launch with cudaGetLastError.
#include "kernels/ops.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda_check.h"

namespace sinkscope::kernels {
namespace {

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
                                    int dim) {
  const int64_t row = blockIdx.x;
  const uint16_t* src = table + int64_t(tokens[row]) * dim;
  float* dst = x + row * dim;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) dst[d] = from_bf16_bits(src[d]);
}

// One block per row; kThreads threads. Sum of squares in fp32 per thread, then warp shuffles
// and one shared-memory step. The scale is formed in double like the CPU reference
// (engine/linalg.cpp rms_norm), and the product keeps its order: (x * scale) * w.
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                    uint16_t* __restrict__ out, int dim, float eps) {
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

// One block per token; threads stride over the q|k|v row. Pairs follow engine/rope.h:
// x[a] = x0*c - x1*s, x[b] = x0*s + x1*c with (a, b) = (2i, 2i+1) or (i, i + rope_dim/2).
__global__ void qkv_rope_append_kernel(QkvRopeParams p) {
  const int row = blockIdx.x;
  const int q_dim = p.n_head * p.head_dim;
  const int kv_dim = p.n_head_kv * p.head_dim;
  const int width = q_dim + 2 * kv_dim;
  const float* in = p.qkv + int64_t(row) * width;
  const int pos = (p.pos0_dev ? *p.pos0_dev : p.pos0) + row;
  const int half = p.rope_dim / 2;
  const float* cs = p.rope_cos + int64_t(pos) * half;
  const float* sn = p.rope_sin + int64_t(pos) * half;
  const int64_t page = p.page_table[pos / p.block_size];
  const int slot = pos % p.block_size;
  auto value = [&](int j) { return p.bias ? in[j] + p.bias[j] : in[j]; };
  for (int e = threadIdx.x; e < width; e += blockDim.x) {
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
        const float c = cs[i], s = sn[i];
        // __fmul_rn/__fadd_rn: no FMA contraction, the CPU's rounding order.
        out = first ? __fadd_rn(__fmul_rn(mine, c), -__fmul_rn(other, s))
                    : __fadd_rn(__fmul_rn(other, s), __fmul_rn(mine, c));
      } else {
        out = value(e);
      }
      if (is_q) {
        p.q_out[int64_t(row) * q_dim + e] = to_bf16_bits(out);
      } else {
        const int64_t idx = ((page * p.n_head_kv + h) * p.block_size + slot) * p.head_dim + d;
        p.k_pages[idx] = to_bf16_bits(out);
      }
    } else {
      const int local = e - q_dim - kv_dim;
      const int h = local / p.head_dim;
      const int d = local - h * p.head_dim;
      const int64_t idx = ((page * p.n_head_kv + h) * p.block_size + slot) * p.head_dim + d;
      p.v_pages[idx] = to_bf16_bits(value(e));
    }
  }
}

__global__ void swiglu_kernel(const float* __restrict__ gu, uint16_t* __restrict__ out,
                              int64_t total, int n_ff) {
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
                             void* stream) {
  if (n <= 0 || dim <= 0) return {};
  embed_gather_kernel<<<n, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(table, tokens, x, dim);
  return SINKSCOPE_OP_CHECK("embed_gather_kernel");
}

OpStatus launch_rms_norm(const float* x, const float* w, uint16_t* out, int rows, int dim,
                         float eps, void* stream) {
  if (rows <= 0 || dim <= 0) return {};
  rms_norm_kernel<<<rows, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, w, out, dim, eps);
  return SINKSCOPE_OP_CHECK("rms_norm_kernel");
}

OpStatus launch_qkv_rope_append(const QkvRopeParams& p, void* stream) {
  if (p.n_tokens <= 0) return {};
  if (!p.qkv || !p.rope_cos || !p.rope_sin || !p.q_out || !p.k_pages || !p.v_pages || !p.page_table)
    return OpStatus::error("launch_qkv_rope_append: a required pointer is null");
  if (p.rope_dim < 0 || p.rope_dim > p.head_dim || p.rope_dim % 2 != 0 || p.block_size <= 0)
    return OpStatus::error("launch_qkv_rope_append: bad rope_dim/head_dim/block_size");
  qkv_rope_append_kernel<<<p.n_tokens, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return SINKSCOPE_OP_CHECK("qkv_rope_append_kernel");
}

OpStatus launch_swiglu(const float* gate_up, uint16_t* out, int rows, int n_ff, void* stream) {
  const int64_t total = int64_t(rows) * n_ff;
  if (total <= 0) return {};
  swiglu_kernel<<<grid_for(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(gate_up, out,
                                                                                     total, n_ff);
  return SINKSCOPE_OP_CHECK("swiglu_kernel");
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

}  // namespace sinkscope::kernels
