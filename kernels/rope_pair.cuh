// SPDX-License-Identifier: Apache-2.0
// RoPE and paged-KV device helpers shared by qkv_rope_append_kernel (kernels/ops.cu) and the
// fused decode QKV kernel (kernels/decode_fused.cu), so both rotate and place keys identically.
// Pairs follow engine/model/rope.h: (2i, 2i+1) (Llama, interleaved) or (i, i + rope_dim/2) (NeoX).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sinkscope::kernels::detail {

// The two dims of rotation pair i (0 <= i < rope_dim/2) inside a head.
__device__ __forceinline__ void rope_pair_dims(int i, int rope_dim, bool neox, int* a, int* b) {
  if (neox) {
    *a = i;
    *b = i + rope_dim / 2;
  } else {
    *a = 2 * i;
    *b = 2 * i + 1;
  }
}

// Rotates the pair (x0, x1) = (x[a], x[b]) by the angle with cosine c and sine s:
//   x[a] = x0*c - x1*s,  x[b] = x0*s + x1*c.
// __fmul_rn/__fadd_rn: no FMA contraction, the CPU reference's rounding order.
__device__ __forceinline__ void rope_rotate(float x0, float x1, float c, float s, float* a,
                                            float* b) {
  *a = __fadd_rn(__fmul_rn(x0, c), -__fmul_rn(x1, s));
  *b = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

// Element (kv_head h, dim d) of position slot `slot` in page `page` of one layer's paged cache
// pages[page][kv_head][slot][head_dim] (kernels/attention_params.h).
__device__ __forceinline__ int64_t paged_kv_index(int64_t page, int n_head_kv, int h,
                                                  int block_size, int slot, int head_dim, int d) {
  return ((page * n_head_kv + h) * block_size + slot) * head_dim + d;
}

}  // namespace sinkscope::kernels::detail
