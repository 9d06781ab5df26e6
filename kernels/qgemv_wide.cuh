// SPDX-License-Identifier: Apache-2.0
// Device helpers of the wide decode GEMV (kernels/qgemv_wide.cu: the original kernel, and
// kernels/qgemv_wide_pipe.cu: the pipelined one): the int8 activation quantization, the staging
// of 2-byte aligned block runs through shared memory, and the per-lane block products of Q4_K,
// Q6_K and Q8_0. The layouts and the arithmetic are described in kernels/qgemv_wide.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/qblock.h"
#include "kernels/rms_norm_math.cuh"

namespace sinkscope::kernels::qwide {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr size_t kDefaultSmem = 48 * 1024;

// Per-warp staging buffer in 16-byte chunks: the most aligned chunks a run can cover is
// ceil((15 + run bytes) / 16), rounded up to whole passes of 32 lanes (Q8_0: 64 * 34 = 2176
// bytes -> 137 -> 160; Q6_K: 8 * 210 = 1680 -> 106 -> 128). 0: no staging (Q4_K).
template <int T> constexpr int stage_chunks() {
  return T == qblock::kQ8_0 ? 160 : T == qblock::kQ6_K ? 128 : 0;
}

// Per run of 32 activations: {d, d * sum(q), d2, d2 * sum(q2)} (d2 = 0 with one plane).
using XScale = float4;

// Where the quantized activation's pieces lie (shared or global memory, writer and readers
// alike). With cols % 256 == 0, the 16-byte chunk c of a plane is stored at chunk
// c ^ ((c >> 2) & 6) and the scale record i at i ^ ((i >> 3) & 1); otherwise in order.
// Why: a 16-byte shared-memory load is served 8 lanes at a time, and those 8 lanes must hit 8
// different 16-byte bank groups of a 128-byte row to take one pass. The 8 lanes of a Q4_K block
// read runs 128 elements apart (2 passes in order), the 2 x 4 lanes of two Q6_K blocks runs 128
// and 256 apart (4 passes), the Q6_K scale records 8 apart (2 passes). The XOR moves bits 7-8
// of the element offset into bits 5-6 (bit 3 of the record index into bit 0), so every such
// 8-lane group is one pass; consecutive reads (Q8_0) stay one pass. The maps only permute
// within 128 elements (2 records), so nothing moves past cols.
__device__ __forceinline__ int x_mask(int cols) { return (cols & 255) ? 0 : 0x60; }
__device__ __forceinline__ int xpos(int e, int cols) { return e ^ ((e >> 2) & x_mask(cols)); }
__device__ __forceinline__ int dpos(int i, int cols) {
  return i ^ ((i >> 3) & ((cols & 255) ? 0 : 1));
}

__device__ __forceinline__ float half_bits(uint32_t h) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h & 0xffffu)));
}

// The int8 activation: plane p at xq + p * cols (P planes), xd[cols / 32]. Four lanes per run of
// 32 (8 elements each, one 16-byte load); every thread makes the same number of passes so the
// shuffles always run with the whole warp. Explicitly rounded operations (no contraction) so a
// host replay gets the same bits.
template <int P>
__device__ __forceinline__ void quantize8(uint4 u, int g, bool on, int cols, int8_t* xq,
                                          XScale* xd) {
  float f[8];
  float amax = 0.f;
  {
    const uint32_t wd[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      f[2 * k] = __uint_as_float(wd[k] << 16);
      f[2 * k + 1] = __uint_as_float(wd[k] & 0xffff0000u);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(f[i]));
  }
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  const float id = amax > 0.f ? 127.f / amax : 0.f;
  const float d = amax / 127.f;
  const float id2 = __fmul_rn(id, 254.f);
  const float d2 = P == 2 ? d / 254.f : 0.f;
  int s = 0, s2 = 0;
  uint32_t packed[2] = {0u, 0u}, packed2[2] = {0u, 0u};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int q = __float2int_rn(__fmul_rn(f[i], id));
    s += q;
    packed[i >> 2] |= (static_cast<uint32_t>(q) & 0xffu) << (8 * (i & 3));
    if constexpr (P == 2) {
      const float r = __fsub_rn(f[i], __fmul_rn(d, static_cast<float>(q)));
      int q2 = __float2int_rn(__fmul_rn(r, id2));
      q2 = q2 > 127 ? 127 : q2 < -127 ? -127 : q2;
      s2 += q2;
      packed2[i >> 2] |= (static_cast<uint32_t>(q2) & 0xffu) << (8 * (i & 3));
    }
  }
  s += __shfl_xor_sync(0xffffffffu, s, 1);
  s += __shfl_xor_sync(0xffffffffu, s, 2);
  s2 += __shfl_xor_sync(0xffffffffu, s2, 1);
  s2 += __shfl_xor_sync(0xffffffffu, s2, 2);
  if (on) {
    const int e = xpos(8 * g, cols);
    *reinterpret_cast<uint2*>(xq + e) = make_uint2(packed[0], packed[1]);
    if constexpr (P == 2) {
      *reinterpret_cast<uint2*>(xq + cols + e) = make_uint2(packed2[0], packed2[1]);
    }
    if ((g & 3) == 0) {
      xd[dpos(g >> 2, cols)] = make_float4(d, __fmul_rn(d, static_cast<float>(s)), d2,
                               __fmul_rn(d2, static_cast<float>(s2)));
    }
  }
}

using detail::add_squares;  // kernels/rms_norm_math.cuh: launch_rms_norm's arithmetic
using detail::norm_pack4;

// Rows launch_rms_norm normalizes the way norm_scale does (at most kNormMaxN4 float4 values).
constexpr int kNormWarpN4 = 512;   // rms_norm_warp_kernel: up to 16 float4 per lane
constexpr int kNormMaxN4 = 2048;   // rms_norm_row_kernel: up to 8 float4 per thread of 256

// The RMSNorm scale 1 / sqrt(mean(x^2) + eps) of the row x (n4 float4, n4 <= kNormMaxN4) with
// the partition and the order of sums of launch_rms_norm (kernels/ops.cu), so the normalized
// activation has the same bf16 bits as that kernel's output:
//   n4 <= kNormWarpN4 (rms_norm_warp_kernel): one warp, lane l sums float4 l, l + 32, ... in
//     order, then xor shuffles; here every warp of the CTA forms it alone.
//   otherwise (rms_norm_row_kernel, 256 threads as here): thread t sums float4 t, t + 256, ...,
//     xor shuffles per warp, the 8 warp sums added in double in warp order.
// Zero padding of those kernels adds +0 and changes no sum. Every thread gets the scale; the
// second form ends with a block barrier (uniform: n4 is the same for the whole CTA).
__device__ __forceinline__ float norm_scale(const float4* __restrict__ x4, int n4, float eps,
                                            float* s_red) {
  static_assert(kThreads == 256, "rms_norm_row_kernel's partition is 256 threads");
  const int lane = static_cast<int>(threadIdx.x & 31);
  float ss = 0.f;
  if (n4 <= kNormWarpN4) {
    for (int i = lane; i < n4; i += 32) ss = add_squares(ss, x4[i]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    return static_cast<float>(1.0 / sqrt(static_cast<double>(ss) / static_cast<double>(4 * n4) +
                                         static_cast<double>(eps)));
  }
  for (int i = static_cast<int>(threadIdx.x); i < n4; i += kThreads) ss = add_squares(ss, x4[i]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) s_red[threadIdx.x >> 5] = ss;
  __syncthreads();
  double total = 0.0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += s_red[w];
  return static_cast<float>(1.0 / sqrt(total / static_cast<double>(4 * n4) + static_cast<double>(eps)));
}

// The activation bf16(RMSNorm(x) * gain) (as launch_rms_norm writes it) quantized like
// quantize_x: x and gain fp32 [cols], cols % 8 == 0, cols / 4 <= kNormMaxN4, 16-byte aligned.
template <int P>
__device__ __forceinline__ void norm_quantize_x(const float* __restrict__ x,
                                                const float* __restrict__ gain, float eps,
                                                int cols, int8_t* xq, XScale* xd) {
  __shared__ float s_red[kWarps];
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const float4* g4 = reinterpret_cast<const float4*>(gain);
  const float scale = norm_scale(x4, cols / 4, eps, s_red);
  const int n8 = cols / 8;
  for (int base = 0; base < n8; base += kThreads) {
    const int g = base + static_cast<int>(threadIdx.x);
    uint4 u = make_uint4(0u, 0u, 0u, 0u);
    if (g < n8) {
      const uint2 lo = norm_pack4(x4[2 * g], scale, g4[2 * g]);
      const uint2 hi = norm_pack4(x4[2 * g + 1], scale, g4[2 * g + 1]);
      u = make_uint4(lo.x, lo.y, hi.x, hi.y);
    }
    quantize8<P>(u, g, g < n8, cols, xq, xd);
  }
}

// kAhead passes' 16-byte loads of v go out before their quantization (1: one pass at a time;
// more hides the L2 latency of long rows, cols / 2048 passes).
template <int P, int kAhead = 1>
__device__ __forceinline__ void quantize_x(const uint16_t* __restrict__ v, int cols, int8_t* xq,
                                           XScale* xd) {
  const int n8 = cols / 8;
  for (int base = 0; base < n8; base += kAhead * kThreads) {
    uint4 u[kAhead];
#pragma unroll
    for (int k = 0; k < kAhead; ++k) {
      const int g = base + k * kThreads + static_cast<int>(threadIdx.x);
      u[k] = make_uint4(0u, 0u, 0u, 0u);
      if (g < n8) u[k] = *reinterpret_cast<const uint4*>(v + 8 * static_cast<int64_t>(g));
    }
#pragma unroll
    for (int k = 0; k < kAhead; ++k) {
      const int g = base + k * kThreads + static_cast<int>(threadIdx.x);
      quantize8<P>(u[k], g, g < n8, cols, xq, xd);
    }
  }
}

// Copies the bytes [src, src + n) of global memory, as the aligned 16-byte chunks that cover
// them, into buf; returns where src landed in buf (src & 15). All loads go out before any store.
template <int kChunks>
__device__ __forceinline__ int stage_run(const uint8_t* src, int n, uint4* buf, int lane) {
  constexpr int kPasses = kChunks / 32;
  const uintptr_t a = reinterpret_cast<uintptr_t>(src);
  const uint4* a0 = reinterpret_cast<const uint4*>(a & ~uintptr_t(15));
  const int off = static_cast<int>(a & 15);
  const int nc = (off + n + 15) >> 4;
  uint4 r[kPasses];
#pragma unroll
  for (int k = 0; k < kPasses; ++k) {
    const int i = lane + 32 * k;
    if (i < nc) r[k] = __ldg(a0 + i);
  }
#pragma unroll
  for (int k = 0; k < kPasses; ++k) {
    const int i = lane + 32 * k;
    if (i < nc) buf[i] = r[k];
  }
  __syncwarp();
  return off;
}

// 16 bytes at an even byte offset o of a 16-byte aligned shared buffer (reads up to 20 bytes).
__device__ __forceinline__ uint4 load16_a2(const uint8_t* sb, int o) {
  const uint32_t* p = reinterpret_cast<const uint32_t*>(sb + (o & ~3));
  const uint32_t sh = (o & 2) ? 16u : 0u;
  const uint32_t w0 = p[0], w1 = p[1], w2 = p[2], w3 = p[3], w4 = p[4];
  return make_uint4(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh),
                    __funnelshift_r(w2, w3, sh), __funnelshift_r(w3, w4, sh));
}

__device__ __forceinline__ int dot16(uint4 q, int4 x, int acc) {
  acc = __dp4a(static_cast<int>(q.x), x.x, acc);
  acc = __dp4a(static_cast<int>(q.y), x.y, acc);
  acc = __dp4a(static_cast<int>(q.z), x.z, acc);
  return __dp4a(static_cast<int>(q.w), x.w, acc);
}

// 16 int8 weights q times the 16 activations from element e (e % 16 == 0; plane 0 at xq, plane 1
// at xq + cols, placed by xpos), scaled by the activation steps of their run:
// d * sum(q x1) (+ d2 * sum(q x2)).
template <int P>
__device__ __forceinline__ float dotx(uint4 q, const int8_t* xq, int e, int cols, const XScale& s) {
  const int8_t* x = xq + xpos(e, cols);
  float r = s.x * static_cast<float>(dot16(q, *reinterpret_cast<const int4*>(x), 0));
  if constexpr (P == 2) {
    r += s.z * static_cast<float>(dot16(q, *reinterpret_cast<const int4*>(x + cols), 0));
  }
  return r;
}

// One lane's share of block b of a Q4_K row: hd = bytes 0..15, qv = qs[16 t .. 16 t + 16).
template <int P>
__device__ __forceinline__ float q4k_part(uint4 hd, uint4 qv, const int8_t* xq, int cols,
                                          const XScale* xd, int b, int t) {
  const int p = t >> 1, h = t & 1;
  // Scales and mins of sub-blocks 2p and 2p+1 at once, 8 bits each in a 16-bit pair, without a
  // branch on p (qblock::k_scale_min's values): p < 2 bytes 2p, 2p+1 of s0 / s1 masked to 6 bits;
  // p >= 2 the nibbles of s2's bytes 2(p-2), 2(p-2)+1 with s0's / s1's top two bits above.
  const uint32_t sh = 16u * static_cast<uint32_t>(p & 1);
  const uint32_t a0 = hd.y >> sh, a1 = hd.z >> sh, a2 = hd.w >> sh;
  const bool lowp = p < 2;
  const uint32_t scp = lowp ? a0 & 0x3f3fu : (a2 & 0x0f0fu) | ((a0 >> 2) & 0x3030u);
  const uint32_t mp = lowp ? a1 & 0x3f3fu : ((a2 >> 4) & 0x0f0fu) | ((a1 >> 2) & 0x3030u);
  const int sc_lo = static_cast<int>(scp & 0xffu), sc_hi = static_cast<int>((scp >> 8) & 0xffu);
  const int m_lo = static_cast<int>(mp & 0xffu), m_hi = static_cast<int>((mp >> 8) & 0xffu);
  constexpr uint32_t kLo = 0x0f0f0f0fu;
  const uint4 lo = make_uint4(qv.x & kLo, qv.y & kLo, qv.z & kLo, qv.w & kLo);
  const uint4 hi = make_uint4((qv.x >> 4) & kLo, (qv.y >> 4) & kLo, (qv.z >> 4) & kLo,
                              (qv.w >> 4) & kLo);
  const XScale al = xd[dpos(8 * b + 2 * p, cols)], ah = xd[dpos(8 * b + 2 * p + 1, cols)];
  const int e = 256 * b + 64 * p + 16 * h;
  float r = half_bits(hd.x) * (static_cast<float>(sc_lo) * dotx<P>(lo, xq, e, cols, al) +
                               static_cast<float>(sc_hi) * dotx<P>(hi, xq, e + 32, cols, ah));
  // The min term covers the whole sub-block (d * sum(q) of all 32), so one lane of the pair.
  if (h == 0) {
    r -= half_bits(hd.x >> 16) * (static_cast<float>(m_lo) * (al.y + al.w) +
                                  static_cast<float>(m_hi) * (ah.y + ah.w));
  }
  return r;
}

// Q6_K's 6-bit quants are unsigned (0..63) with an offset of 32: per byte q - 32 as int8,
// without borrows between bytes (bit 7 set first, then flipped back).
__device__ __forceinline__ int q6_signed(uint32_t q) {
  return static_cast<int>(((q | 0x80808080u) - 0x20202020u) ^ 0x80808080u);
}

// The 16 int8 weights of quarter k (0..3) of q6k_dot's lane share: qa / qb low or high
// nibbles with two bits of qh above, offset by -32 (k a constant after unrolling).
__device__ __forceinline__ uint4 q6k_quarter(int k, uint4 qa, uint4 qb, uint4 qh) {
  const uint32_t A[4] = {qa.x, qa.y, qa.z, qa.w};
  const uint32_t B[4] = {qb.x, qb.y, qb.z, qb.w};
  const uint32_t H[4] = {qh.x, qh.y, qh.z, qh.w};
  uint32_t q[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    constexpr uint32_t kLo = 0x0f0f0f0fu, kHi = 0x30303030u;
    uint32_t u;
    if (k == 0) u = (A[j] & kLo) | ((H[j] << 4) & kHi);
    else if (k == 1) u = (B[j] & kLo) | ((H[j] << 2) & kHi);
    else if (k == 2) u = ((A[j] >> 4) & kLo) | (H[j] & kHi);
    else u = ((B[j] >> 4) & kLo) | ((H[j] >> 2) & kHi);
    q[j] = static_cast<uint32_t>(q6_signed(u));
  }
  return make_uint4(q[0], q[1], q[2], q[3]);
}

// One lane's share of a Q6_K block: lane t (0..3) of the block takes half h = t / 2 and the 16
// elements l0 = 16 (t & 1) .. +16 of each of its 4 quarters. qa / qb: ql bytes
// [64 h + l0, +16) (quarters 0 low, 2 high nibbles) and [64 h + 32 + l0, +16) (quarters 1, 3);
// qh: qh bytes [32 h + l0, +16); sc[k]: scales[8 h + (t & 1) + 2 k]; d the block's scale.
// xq / xd: the activation planes and scales; b: the block's index in the row.
template <int P>
__device__ __forceinline__ float q6k_dot(uint4 qa, uint4 qb, uint4 qh, const int (&sc)[4], float d,
                                         const int8_t* xq, int cols, const XScale* xd, int b,
                                         int t) {
  const int h = t >> 1, l0 = 16 * (t & 1);
  const int e = 256 * b + 128 * h + l0;
  float r = 0.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    r += static_cast<float>(sc[k]) * dotx<P>(q6k_quarter(k, qa, qb, qh), xq, e + 32 * k, cols,
                                             xd[dpos(8 * b + 4 * h + k, cols)]);
  }
  return d * r;
}

// q6k_dot for the same block of two rows (weights qa0.. and qa1..), each quarter's activation
// read once for both; each result is q6k_dot's, bit for bit.
template <int P>
__device__ __forceinline__ void q6k_dot2(uint4 qa0, uint4 qb0, uint4 qh0, const int (&sc0)[4],
                                         float d0, uint4 qa1, uint4 qb1, uint4 qh1,
                                         const int (&sc1)[4], float d1, const int8_t* xq,
                                         int cols, const XScale* xd, int b, int t, float& acc0,
                                         float& acc1) {
  const int h = t >> 1, l0 = 16 * (t & 1);
  const int e = 256 * b + 128 * h + l0;
  float r0 = 0.f, r1 = 0.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int8_t* x = xq + xpos(e + 32 * k, cols);
    const XScale s = xd[dpos(8 * b + 4 * h + k, cols)];
    const int4 x1 = *reinterpret_cast<const int4*>(x);
    const uint4 w0 = q6k_quarter(k, qa0, qb0, qh0), w1 = q6k_quarter(k, qa1, qb1, qh1);
    float p0 = s.x * static_cast<float>(dot16(w0, x1, 0));
    float p1 = s.x * static_cast<float>(dot16(w1, x1, 0));
    if constexpr (P == 2) {
      const int4 x2 = *reinterpret_cast<const int4*>(x + cols);
      p0 += s.z * static_cast<float>(dot16(w0, x2, 0));
      p1 += s.z * static_cast<float>(dot16(w1, x2, 0));
    }
    r0 += static_cast<float>(sc0[k]) * p0;
    r1 += static_cast<float>(sc1[k]) * p1;
  }
  acc0 += d0 * r0;
  acc1 += d1 * r1;
}

// One lane's share (q6k_dot) of a Q6_K block staged at byte o of sb.
template <int P>
__device__ __forceinline__ float q6k_part(const uint8_t* sb, int o, const int8_t* xq, int cols,
                                          const XScale* xd, int b, int t) {
  const int h = t >> 1, l0 = 16 * (t & 1);
  const uint4 qa = load16_a2(sb, o + 64 * h + l0);
  const uint4 qb = load16_a2(sb, o + 64 * h + 32 + l0);
  const uint4 qh = load16_a2(sb, o + 128 + 32 * h + l0);
  const int8_t* scp = reinterpret_cast<const int8_t*>(sb + o + 192 + 8 * h + (t & 1));
  const int sc[4] = {scp[0], scp[2], scp[4], scp[6]};
  const float d = half_bits(*reinterpret_cast<const uint16_t*>(sb + o + 208));
  return q6k_dot<P>(qa, qb, qh, sc, d, xq, cols, xd, b, t);
}

// One lane's share of a Q8_0 block staged at byte o of sb: 16 elements from 16 t (t = 0, 1).
template <int P>
__device__ __forceinline__ float q8_0_part(const uint8_t* sb, int o, const int8_t* xq, int cols,
                                           const XScale* xd, int b, int t) {
  const float d = half_bits(*reinterpret_cast<const uint16_t*>(sb + o));
  const uint4 q = load16_a2(sb, o + 2 + 16 * t);
  return d * dotx<P>(q, xq, 32 * b + 16 * t, cols, xd[dpos(b, cols)]);
}

}  // namespace
}  // namespace sinkscope::kernels::qwide
