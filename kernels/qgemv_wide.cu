// SPDX-License-Identifier: Apache-2.0
// The decode GEMV for Q4_K, Q6_K and Q8_0 weights with 16-byte loads and int8 dot products
// (kernels/qgemv_wide.h). Weights stay in their ggml block layout.
//
// Each CTA first quantizes the bf16 activation to int8 in shared memory, per run of 32 elements:
// d = amax / 127, q = rint(x * (127 / amax)), with d and d * sum(q) kept (the scheme of the Q8_1
// activations of llama.cpp's mmvq). With two planes (the default) the rounding residual
// r = x - d q is quantized again, d2 = d / 254, q2 = rint(r * 254 / d) in [-127, 127], so that
// x~ = d q + d2 q2 is within d2 / 2 of x (about 15 bits, like the CPU backend's int16
// activations) for one more __dp4a per 4 weights. Then each warp computes whole rows,
// striding over rows (the grid is capped near one wave, so the quantization is paid a few times
// per SM, not once per 8 rows) with __dp4a on 4 weights at a time and fp32 scale products.
//
// Weight reads, 16 bytes per lane and coalesced across the warp:
//   Q4_K (144-byte blocks, 16-byte aligned when the matrix and its rows are): 8 lanes per block,
//        lane t reads the block's header (d, dmin, 12 scale bytes) and qs[16 t .. 16 t + 16), i.e.
//        16 elements of sub-block 2p and 16 of 2p+1 (p = t / 2). Direct global loads.
//   Q8_0 (34 bytes) and Q6_K (210 bytes) blocks sit at 2-byte alignment, so the warp first copies
//        a run of blocks (64 Q8_0 / 8 Q6_K) with aligned 16-byte loads, each byte once, into its
//        own shared-memory buffer, then each lane reads its 16-byte pieces there as 4-byte words
//        joined with funnel shifts. Q8_0: 2 lanes per block (16 elements each); Q6_K: 4 lanes
//        per block (16 elements of each of the 4 quarters of one half).
// The staging reads whole aligned 16-byte chunks that hold at least one byte of the run, so it
// never touches a page the matrix does not: a 16-byte aligned chunk lies in one page.
//   Q8_0R / Q6_KR (qblock.h: the same blocks with their fields in separate arrays of the row,
//        which the CUDA backend repacks at upload): every field 16-byte aligned, so the lanes
//        load straight from global memory as for Q4_K. Q8_0R: one 16-byte chunk of quants (half
//        a block) per lane and pass; Q6_KR: the 4-lane split of Q6_K.
//
// Fused forms (launch_fused): the CTA's prologue may form the activation as bf16(RMSNorm(x) *
// gain) itself (the sums and roundings of launch_rms_norm, norm_quantize_x), and a warp may take
// gate row j and up row rows / 2 + j together and write bf16(silu(g) * u), launch_swiglu's
// formula, instead of two fp32 results: the decode step's RMSNorm and SwiGLU kernels vanish.
//
// The pipelined variants of this kernel are in kernels/qgemv_wide_pipe.cu; the device helpers
// both use are in kernels/qgemv_wide.cuh.
#include "kernels/qgemv_wide.h"

#include <cuda_runtime.h>

#include <atomic>
#include <type_traits>

#include "kernels/pdl.cuh"
#include "kernels/qblock.h"
#include "kernels/qgemv_wide.cuh"
#include "kernels/tuning.h"

namespace sinkscope::kernels::qwide {
namespace {

template <int P>
__device__ float dot_q4k(const uint8_t* wr, int cols, const int8_t* xq, const XScale* xd, int lane) {
  const uint4* wb = reinterpret_cast<const uint4*>(wr);
  const int nb = cols / 256;
  const int t = lane & 7;
  float acc = 0.f;
  // Four blocks per warp pass, four passes' loads in flight before their math.
  for (int b0 = lane >> 3; b0 < nb; b0 += 16) {
    uint4 hd[4], qv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int b = b0 + 4 * i;
      hd[i] = qv[i] = make_uint4(0u, 0u, 0u, 0u);
      if (b < nb) {
        hd[i] = __ldg(wb + 9 * b);
        qv[i] = __ldg(wb + 9 * b + 1 + t);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int b = b0 + 4 * i;
      if (b < nb) acc += q4k_part<P>(hd[i], qv[i], xq, cols, xd, b, t);
    }
  }
  return acc;
}

// Two Q4_K rows in one warp pass (R = 2): the lane layout of dot_q4k with two blocks per lane
// and row in flight, and each block's activation runs and scales read once for both rows
// (q4k_part inlined twice on the same shared addresses), so the shared-memory reads per weight
// byte halve. A lane adds its blocks b0, b0 + 4, b0 + 8, ... one at a time in that order, as
// dot_q4k does, so each row's result equals dot_q4k's bit for bit.
template <int P>
__device__ void dot2_q4k(const uint8_t* w0, const uint8_t* w1, int cols, const int8_t* xq,
                         const XScale* xd, int lane, float& acc0, float& acc1) {
  const uint4* wa = reinterpret_cast<const uint4*>(w0);
  const uint4* wb = reinterpret_cast<const uint4*>(w1);
  const int nb = cols / 256;
  const int t = lane & 7;
  float a0 = 0.f, a1 = 0.f;
  for (int b0 = lane >> 3; b0 < nb; b0 += 8) {
    uint4 h0[2], q0[2], h1[2], q1[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int b = b0 + 4 * i;
      h0[i] = q0[i] = h1[i] = q1[i] = make_uint4(0u, 0u, 0u, 0u);
      if (b < nb) {
        h0[i] = __ldg(wa + 9 * b);
        q0[i] = __ldg(wa + 9 * b + 1 + t);
        h1[i] = __ldg(wb + 9 * b);
        q1[i] = __ldg(wb + 9 * b + 1 + t);
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int b = b0 + 4 * i;
      if (b < nb) {
        a0 += q4k_part<P>(h0[i], q0[i], xq, cols, xd, b, t);
        a1 += q4k_part<P>(h1[i], q1[i], xq, cols, xd, b, t);
      }
    }
  }
  acc0 = a0;
  acc1 = a1;
}

template <int P>
__device__ float dot_q8_0(const uint8_t* wr, int cols, const int8_t* xq, const XScale* xd,
                          uint4* buf, int lane) {
  constexpr int kRun = 64;  // blocks per staged run
  const int nb = cols / 32;
  const uint8_t* sb = reinterpret_cast<const uint8_t*>(buf);
  const int t = lane & 1;
  float acc = 0.f;
  for (int s0 = 0; s0 < nb; s0 += kRun) {
    const int n = nb - s0 < kRun ? nb - s0 : kRun;
    const int off = stage_run<stage_chunks<qblock::kQ8_0>()>(wr + 34 * s0, 34 * n, buf, lane);
#pragma unroll
    for (int i = 0; i < kRun / 16; ++i) {
      const int bi = (lane >> 1) + 16 * i;
      if (bi < n) acc += q8_0_part<P>(sb, off + 34 * bi, xq, cols, xd, s0 + bi, t);
    }
    __syncwarp();  // the buffer is refilled next
  }
  return acc;
}

template <int P>
__device__ float dot_q6k(const uint8_t* wr, int cols, const int8_t* xq, const XScale* xd,
                         uint4* buf, int lane) {
  constexpr int kRun = 8;
  const int nb = cols / 256;
  const uint8_t* sb = reinterpret_cast<const uint8_t*>(buf);
  const int bi = lane >> 2, t = lane & 3;
  float acc = 0.f;
  for (int s0 = 0; s0 < nb; s0 += kRun) {
    const int n = nb - s0 < kRun ? nb - s0 : kRun;
    const int off = stage_run<stage_chunks<qblock::kQ6_K>()>(wr + 210 * s0, 210 * n, buf, lane);
    if (bi < n) acc += q6k_part<P>(sb, off + 210 * bi, xq, cols, xd, s0 + bi, t);
    __syncwarp();
  }
  return acc;
}

// The repacked layouts (qblock::kQ8_0R, kQ6_KR): every field 16-byte aligned in the row, so the
// lanes load their quants straight from global memory, no staging.
// Q8_0R: 16-byte chunk c of the row's quants (elements 16 c .. 16 c + 15, block c / 2) per lane
// and pass, four passes' loads in flight before their math; the block's fp16 scale from the
// row's scale array (a warp's 16 blocks share one 32-byte sector).
template <int P>
__device__ float dot_q8_0r(const uint8_t* wr, int cols, const int8_t* xq, const XScale* xd,
                           int lane) {
  constexpr int kAhead = 4;
  const uint4* wq = reinterpret_cast<const uint4*>(wr);
  const uint16_t* wd = reinterpret_cast<const uint16_t*>(wr + cols);  // 32 nb bytes of quants
  const int nc = cols / 16;
  float acc = 0.f;
  for (int c0 = lane; c0 < nc; c0 += 32 * kAhead) {
    uint4 q[kAhead];
    uint32_t d[kAhead];
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int c = c0 + 32 * i;
      q[i] = make_uint4(0u, 0u, 0u, 0u);
      d[i] = 0u;
      if (c < nc) {
        q[i] = __ldg(wq + c);
        d[i] = __ldg(wd + (c >> 1));
      }
    }
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int c = c0 + 32 * i;
      if (c < nc) acc += half_bits(d[i]) * dotx<P>(q[i], xq, 16 * c, cols, xd[dpos(c >> 1, cols)]);
    }
  }
  return acc;
}

// One Q6_KR block's loads for lane t (q6k_dot's split) and its share of the product.
struct Q6krLoad {
  uint4 qa, qb, qh;
  uint2 sv;
  uint32_t d;
};

__device__ __forceinline__ Q6krLoad load_q6kr(const uint8_t* wr, int nb, int b, int t) {
  const int h = t >> 1, l0 = 16 * (t & 1);
  Q6krLoad r;
  r.qa = __ldg(reinterpret_cast<const uint4*>(wr + 128 * b + 64 * h + l0));
  r.qb = __ldg(reinterpret_cast<const uint4*>(wr + 128 * b + 64 * h + 32 + l0));
  r.qh = __ldg(reinterpret_cast<const uint4*>(wr + 128 * nb + 64 * b + 32 * h + l0));
  r.sv = __ldg(reinterpret_cast<const uint2*>(wr + 192 * nb + 16 * b + 8 * h));
  r.d = __ldg(reinterpret_cast<const uint16_t*>(wr + 208 * nb) + b);
  return r;
}

// scales[8 h + (t & 1) + 2 k], k = 0..3, of lane t: bytes (t & 1), 2 + (t & 1), ... of the 8 at
// 8 h.
__device__ __forceinline__ void q6kr_scales(uint2 sv, int t, int (&sc)[4]) {
  const uint32_t sh = 8u * static_cast<uint32_t>(t & 1);
  sc[0] = static_cast<int8_t>(sv.x >> sh);
  sc[1] = static_cast<int8_t>(sv.x >> (16 + sh));
  sc[2] = static_cast<int8_t>(sv.y >> sh);
  sc[3] = static_cast<int8_t>(sv.y >> (16 + sh));
}

template <int P>
__device__ __forceinline__ float q6kr_part(const Q6krLoad& l, const int8_t* xq, int cols,
                                           const XScale* xd, int b, int t) {
  int sc[4];
  q6kr_scales(l.sv, t, sc);
  return q6k_dot<P>(l.qa, l.qb, l.qh, sc, half_bits(l.d), xq, cols, xd, b, t);
}

// Q6_KR: 4 lanes per block as in q6k_dot, 8 blocks per pass, two passes' loads in flight.
template <int P>
__device__ float dot_q6kr(const uint8_t* wr, int cols, const int8_t* xq, const XScale* xd,
                          int lane) {
  constexpr int kAhead = 2;
  const int nb = cols / 256;
  const int t = lane & 3;
  float acc = 0.f;
  for (int b0 = lane >> 2; b0 < nb; b0 += 8 * kAhead) {
    Q6krLoad l[kAhead];
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int b = b0 + 8 * i;
      l[i] = b < nb ? load_q6kr(wr, nb, b, t) : Q6krLoad{};
    }
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int b = b0 + 8 * i;
      if (b < nb) acc += q6kr_part<P>(l[i], xq, cols, xd, b, t);
    }
  }
  return acc;
}

// Two Q6_KR rows in one warp pass (R = 2): dot_q6kr's lane split, one block per lane and row in
// flight (the same loads in flight as dot_q6kr's two), the activation read once for both rows.
// A lane adds its blocks in dot_q6kr's order: each row's result equals dot_q6kr's.
template <int P>
__device__ void dot2_q6kr(const uint8_t* w0, const uint8_t* w1, int cols, const int8_t* xq,
                          const XScale* xd, int lane, float& acc0, float& acc1) {
  const int nb = cols / 256;
  const int t = lane & 3;
  float a0 = 0.f, a1 = 0.f;
  for (int b = lane >> 2; b < nb; b += 8) {
    const Q6krLoad l0 = load_q6kr(w0, nb, b, t);
    const Q6krLoad l1 = load_q6kr(w1, nb, b, t);
    int sc0[4], sc1[4];
    q6kr_scales(l0.sv, t, sc0);
    q6kr_scales(l1.sv, t, sc1);
    q6k_dot2<P>(l0.qa, l0.qb, l0.qh, sc0, half_bits(l0.d), l1.qa, l1.qb, l1.qh, sc1,
                half_bits(l1.d), xq, cols, xd, b, t, a0, a1);
  }
  acc0 = a0;
  acc1 = a1;
}

// How a launch meets the kernel before it in the stream (variants 0, 5, 6 of qgemv_wide.h).
enum Chain : int {
  kPlain = 0,     // an ordinary launch: starts when the previous kernel has finished
  kPdl = 1,       // PDL: scheduled while the previous kernel runs, waits (griddepcontrol) first
  kPdlFetch = 2,  // kPdl, and each warp asks L2 for its first row's bytes before waiting
  kFetch = 3,     // an ordinary launch whose warps ask L2 for their first row's bytes before
                  // the prologue (the activation's quantization), so that the rows' DRAM
                  // latency overlaps it
};

// Where the kernel's activation comes from.
enum Input : int {
  kInBf16 = 0,  // v (bf16 [cols]), quantized by every CTA into shared memory
  kInPre = 1,   // xg: the planes and scales of quantize_x_kernel, in global memory (read
                // through L1 by every warp)
  kInNorm = 2,  // x and norm_w (fp32 [cols]): bf16(RMSNorm(x) * norm_w) as launch_rms_norm
                // makes it (norm_quantize_x), quantized by every CTA into shared memory
};

// A launch's arguments on the host side (the kernel takes them as scalars: a struct parameter
// cost the Q4_K kernel spilled registers).
struct Args {
  const uint8_t* w;
  int rows, cols;  // rows of w (kSwiglu: gate rows, then as many up rows)
  int64_t row_bytes;
  const uint16_t* v;         // kInBf16
  const int8_t* xg;          // kInPre
  const float* x;            // kInNorm
  const float* norm_w;       // kInNorm
  float eps;                 // kInNorm
  float* y;                  // !kSwiglu: y[r] (+)= w[r] . x~
  int accumulate;            // !kSwiglu
  uint16_t* act;             // kSwiglu: act[j] = bf16(silu(g_j) * u_j), j < rows / 2
};

// One lane's share of a row's product with the quantized activation.
template <int T, int P>
__device__ __forceinline__ float row_dot(const uint8_t* wr, int cols, const int8_t* xq,
                                         const XScale* xd, uint4* buf, int lane) {
  float acc;
  if constexpr (T == qblock::kQ4_K) {
    acc = dot_q4k<P>(wr, cols, xq, xd, lane);
  } else if constexpr (T == qblock::kQ8_0) {
    acc = dot_q8_0<P>(wr, cols, xq, xd, buf, lane);
  } else if constexpr (T == qblock::kQ8_0R) {
    acc = dot_q8_0r<P>(wr, cols, xq, xd, lane);
  } else if constexpr (T == qblock::kQ6_KR) {
    acc = dot_q6kr<P>(wr, cols, xq, xd, lane);
  } else {
    acc = dot_q6k<P>(wr, cols, xq, xd, buf, lane);
  }
  return acc;
}

// Variant 8's pairs of rows per warp pass apply to these formats.
constexpr bool two_rows(int type, int r) {
  return r == 2 && (type == qblock::kQ4_K || type == qblock::kQ6_KR);
}

// Resident CTAs per SM the kernel is built for (its __launch_bounds__) and launched with at most.
constexpr int ctas_per_sm(int type, int r) {
  return two_rows(type, r) && type == qblock::kQ6_KR ? 2 : 4;
}

template <int T, int P>
__device__ __forceinline__ void row2_dot(const uint8_t* w0, const uint8_t* w1, int cols,
                                         const int8_t* xq, const XScale* xd, int lane,
                                         float& acc0, float& acc1) {
  if constexpr (T == qblock::kQ4_K) {
    dot2_q4k<P>(w0, w1, cols, xq, xd, lane, acc0, acc1);
  } else {
    dot2_q6kr<P>(w0, w1, cols, xq, xd, lane, acc0, acc1);
  }
}

__device__ __forceinline__ float warp_sum(float acc) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  return acc;
}

// ctas_per_sm(T, R) CTAs per SM: 4 (32 warps, at most 64 registers per thread), or 2 for two
// Q6_KR rows per pass, whose two rows' loads and quarters need up to 128 registers.
// I (Input): where the activation comes from. kSwiglu: warp j's rows are gate row j and up row
// rows / 2 + j, and it writes bf16(silu(g) * u) with launch_swiglu's formula (kernels/ops.cu)
// instead of two fp32 results; each row's product is the one the plain form computes.
// C (Chain): with PDL nothing the previous kernel writes (v, x, y) is touched before pdl_wait();
// the weights are constant during a decode step, so kPdlFetch may prefetch them before it.
// R: rows per warp pass, 1 or 2 (variant 8: Q4_K and Q6_KR, two_rows(); other formats run
// R = 1's code).
template <int T, int P, int I, bool kSwiglu, int C = kPlain, int R = 1>
__global__ void __launch_bounds__(kThreads, ctas_per_sm(T, R)) qgemv_wide_kernel(const uint8_t* __restrict__ w, int rows, int cols, int64_t row_bytes,
                      const uint16_t* __restrict__ v, const int8_t* __restrict__ xg,
                      float* __restrict__ y, int accumulate, const float* __restrict__ x,
                      const float* __restrict__ norm_w, float eps, uint16_t* __restrict__ act) {
  extern __shared__ uint4 smem[];
  constexpr int kStage = stage_chunks<T>();
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x & 31);
  if constexpr (C == kPdlFetch || C == kFetch) {
    // The warp's first output: one row, or its gate and up rows.
    const int first = blockIdx.x * kWarps + warp;
    const int outs = kSwiglu ? rows / 2 : rows;
    if (first < outs) {
#pragma unroll
      for (int k = 0; k < (kSwiglu ? 2 : 1); ++k) {
        const uint8_t* wr = w + static_cast<int64_t>(first + k * outs) * row_bytes;
        for (int64_t off = int64_t(lane) * 128; off < row_bytes; off += 32 * 128)
          asm volatile("prefetch.L2 [%0];" ::"l"(wr + off));  // generic address
      }
    }
  }
  if constexpr (C == kPdl || C == kPdlFetch) {
    detail::pdl_wait();
    detail::pdl_trigger();
  }
  uint4* buf = smem + warp * kStage;
  const int8_t* xq;
  const XScale* xd;
  if constexpr (I == kInPre) {
    xq = xg;
    xd = reinterpret_cast<const XScale*>(xg + P * cols);
  } else {
    int8_t* sq = reinterpret_cast<int8_t*>(smem + kWarps * kStage);
    XScale* sd = reinterpret_cast<XScale*>(sq + P * cols);  // cols % 32 == 0: 16-byte aligned
    if constexpr (I == kInNorm) {
      norm_quantize_x<P>(x, norm_w, eps, cols, sq, sd);
    } else {
      quantize_x<P>(v, cols, sq, sd);
    }
    __syncthreads();
    xq = sq;
    xd = sd;
  }
  // Outputs depend on the warp only, so the shuffles run with all 32 lanes.
  const int outs = kSwiglu ? rows / 2 : rows;
  if constexpr (two_rows(T, R)) {
    // Pairs: (gate j, up j) for the SwiGLU, else rows (2 o, 2 o + 1); an odd last row is
    // computed twice and stored once.
    const int pairs = kSwiglu ? outs : (rows + 1) / 2;
    for (int o = blockIdx.x * kWarps + warp; o < pairs; o += gridDim.x * kWarps) {
      const int r0 = kSwiglu ? o : 2 * o;
      const int r1 = kSwiglu ? outs + o : (2 * o + 1 < rows ? 2 * o + 1 : 2 * o);
      float a0, a1;
      row2_dot<T, P>(w + static_cast<int64_t>(r0) * row_bytes,
                     w + static_cast<int64_t>(r1) * row_bytes, cols, xq, xd, lane, a0, a1);
      a0 = warp_sum(a0);
      a1 = warp_sum(a1);
      if (lane == 0) {
        if constexpr (kSwiglu) {
          act[o] = __bfloat16_as_ushort(__float2bfloat16_rn(a0 / (1.0f + expf(-a0)) * a1));
        } else {
          y[r0] = accumulate ? y[r0] + a0 : a0;
          if (r1 != r0) y[r1] = accumulate ? y[r1] + a1 : a1;
        }
      }
    }
  } else {
    for (int r = blockIdx.x * kWarps + warp; r < outs; r += gridDim.x * kWarps) {
      const float acc =
          warp_sum(row_dot<T, P>(w + static_cast<int64_t>(r) * row_bytes, cols, xq, xd, buf, lane));
      if constexpr (kSwiglu) {
        const float u = warp_sum(
            row_dot<T, P>(w + static_cast<int64_t>(outs + r) * row_bytes, cols, xq, xd, buf, lane));
        if (lane == 0) {
          act[r] = __bfloat16_as_ushort(__float2bfloat16_rn(acc / (1.0f + expf(-acc)) * u));
        }
      } else {
        if (lane == 0) y[r] = accumulate ? y[r] + acc : acc;
      }
    }
  }
}

template <int T, int P, int I = kInBf16>
size_t smem_bytes(int cols) {
  const size_t stage = static_cast<size_t>(kWarps) * stage_chunks<T>() * 16;
  if constexpr (I == kInPre) return stage;
  return stage + static_cast<size_t>(P) * cols + static_cast<size_t>(cols / 32) * sizeof(XScale);
}

template <int T, int P, int I, bool S, int C, int R>
std::atomic<size_t>& smem_limit() {
  static std::atomic<size_t> v{kDefaultSmem};
  return v;
}

template <int T, int P, int I = kInBf16, bool S = false, int C = kPlain, int R = 1>
cudaError_t raise_smem(int cols) {
  const size_t smem = smem_bytes<T, P, I>(cols);
  if (smem <= smem_limit<T, P, I, S, C, R>().load()) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(qgemv_wide_kernel<T, P, I, S, C, R>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
  if (e == cudaSuccess) smem_limit<T, P, I, S, C, R>().store(smem);
  return e;
}

// CTAs in one launch: enough for every row, at most per_sm (ctas_per_sm) per SM: one resident
// wave, as __launch_bounds__ asks; the activation is then quantized at most per_sm times per SM.
int grid_cap(int per_sm) { return per_sm * sm_count(); }

std::atomic<int> g_variant{-1};  // -1: not yet read from the tuning

// kInPre: a.xg holds the quantized activation and the shared memory is the per-warp staging
// buffers only (at most 8 * 160 * 16 = 20 KiB: no opt-in needed).
template <int T, int P, int I, bool S = false, int C = kPlain, int R = 1>
cudaError_t launch_t(const Args& a, cudaStream_t st) {
  if constexpr (I != kInPre) {
    if (const cudaError_t e = raise_smem<T, P, I, S, C, R>(a.cols); e != cudaSuccess) return e;
  }
  // Warps' outputs: rows, SwiGLU pairs, or with two rows per pass pairs of rows.
  const int outs = S ? a.rows / 2 : two_rows(T, R) ? (a.rows + 1) / 2 : a.rows;
  const int want = (outs + kWarps - 1) / kWarps;
  const int cap = grid_cap(ctas_per_sm(T, R));
  const cudaError_t e = detail::launch_pdl(C == kPdl || C == kPdlFetch, qgemv_wide_kernel<T, P, I, S, C, R>,
                                           dim3(want < cap ? want : cap), dim3(kThreads),
                                           smem_bytes<T, P, I>(a.cols), st, a.w, a.rows, a.cols,
                                           a.row_bytes, a.v, a.xg, a.y, a.accumulate, a.x,
                                           a.norm_w, a.eps, a.act);
  return e != cudaSuccess ? e : cudaGetLastError();
}

// f(std::integral_constant<int, T>) for the kernel's formats T; cudaErrorInvalidValue for others.
template <typename F>
cudaError_t by_type(int type, F&& f) {
  switch (type) {
    case qblock::kQ4_K: return f(std::integral_constant<int, qblock::kQ4_K>{});
    case qblock::kQ6_K: return f(std::integral_constant<int, qblock::kQ6_K>{});
    case qblock::kQ8_0: return f(std::integral_constant<int, qblock::kQ8_0>{});
    case qblock::kQ8_0R: return f(std::integral_constant<int, qblock::kQ8_0R>{});
    case qblock::kQ6_KR: return f(std::integral_constant<int, qblock::kQ6_KR>{});
    default: return cudaErrorInvalidValue;
  }
}


// One thread per 8 activations (4 per run of 32), whole warps: quantize8's shuffles need them.
template <int P>
__global__ void __launch_bounds__(kThreads)
    quantize_x_kernel(const uint16_t* __restrict__ v, int cols, int8_t* __restrict__ xq) {
  const int n8 = cols / 8;
  const int g = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  uint4 u = make_uint4(0u, 0u, 0u, 0u);
  if (g < n8) u = *reinterpret_cast<const uint4*>(v + 8 * static_cast<int64_t>(g));
  quantize8<P>(u, g, g < n8, cols, xq, reinterpret_cast<XScale*>(xq + P * cols));
}

template <int P, int I, bool S = false, int C = kPlain, int R = 1>
cudaError_t launch_p(int type, const Args& a, cudaStream_t st) {
  return by_type(type, [&](auto t) { return launch_t<decltype(t)::value, P, I, S, C, R>(a, st); });
}

// One (input, output, chain, rows per pass) combination for planes 1 or 2.
template <int I, bool S = false, int C = kPlain, int R = 1>
cudaError_t launch_planes(int type, const Args& a, cudaStream_t st, int planes) {
  if (planes == 1) return launch_p<1, I, S, C, R>(type, a, st);
  if (planes == 2) return launch_p<2, I, S, C, R>(type, a, st);
  return cudaErrorInvalidValue;
}

// launch_fused's four forms under one chain and rows per pass: input bf16 or norm (a.x set),
// output rows or SwiGLU (a.act set).
template <int C, int R = 1>
cudaError_t launch_forms(int type, const Args& a, cudaStream_t st, int planes) {
  if (a.x) {
    return a.act ? launch_planes<kInNorm, true, C, R>(type, a, st, planes)
                 : launch_planes<kInNorm, false, C, R>(type, a, st, planes);
  }
  return a.act ? launch_planes<kInBf16, true, C, R>(type, a, st, planes)
               : launch_planes<kInBf16, false, C, R>(type, a, st, planes);
}

// Every instantiation that may need more than the default 48 KiB of shared memory.
template <int P, int T>
cudaError_t prepare_t(int max_cols) {
  for (const cudaError_t e :
       {raise_smem<T, P>(max_cols), raise_smem<T, P, kInBf16, false, kPdl>(max_cols),
        raise_smem<T, P, kInBf16, false, kPdlFetch>(max_cols),
        raise_smem<T, P, kInBf16, true>(max_cols), raise_smem<T, P, kInNorm>(max_cols),
        raise_smem<T, P, kInNorm, true>(max_cols),
        raise_smem<T, P, kInBf16, false, kFetch>(max_cols),
        raise_smem<T, P, kInBf16, true, kFetch>(max_cols),
        raise_smem<T, P, kInNorm, false, kFetch>(max_cols),
        raise_smem<T, P, kInNorm, true, kFetch>(max_cols),
        raise_smem<T, P, kInBf16, false, kPlain, 2>(max_cols),
        raise_smem<T, P, kInBf16, true, kPlain, 2>(max_cols),
        raise_smem<T, P, kInNorm, false, kPlain, 2>(max_cols),
        raise_smem<T, P, kInNorm, true, kPlain, 2>(max_cols)}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <int P>
cudaError_t prepare_p(int max_cols) {
  for (const cudaError_t e :
       {prepare_t<P, qblock::kQ4_K>(max_cols), prepare_t<P, qblock::kQ6_K>(max_cols),
        prepare_t<P, qblock::kQ8_0>(max_cols), prepare_t<P, qblock::kQ8_0R>(max_cols),
        prepare_t<P, qblock::kQ6_KR>(max_cols)}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

Args plain_args(const void* w, int rows, int cols, int64_t row_bytes, float* y, bool accumulate) {
  Args a{};
  a.w = static_cast<const uint8_t*>(w);
  a.rows = rows;
  a.cols = cols;
  a.row_bytes = row_bytes;
  a.y = y;
  a.accumulate = accumulate ? 1 : 0;
  return a;
}

}  // namespace

bool eligible(int type, const void* w, int64_t cols, int64_t row_bytes, const void* v) {
  const auto a = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  if (a(v) % 16 != 0 || cols <= 0 || cols > kMaxCols) return false;
  switch (type) {
    case qblock::kQ4_K: return cols % 256 == 0 && a(w) % 16 == 0 && row_bytes % 16 == 0;
    case qblock::kQ6_K: return cols % 256 == 0 && a(w) % 2 == 0;
    case qblock::kQ8_0: return cols % 32 == 0 && a(w) % 2 == 0;
    case qblock::kQ8_0R:
    case qblock::kQ6_KR:
      return qblock::repack_fits(qblock::file_type(type), cols) && a(w) % 16 == 0;
    default: return false;
  }
}

int sm_count() {
  static std::atomic<int> count{0};
  int c = count.load();
  if (c == 0) {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      sms = 132;
    }
    c = sms > 0 ? sms : 132;
    count.store(c);
  }
  return c;
}

int variant() {
  int v = g_variant.load(std::memory_order_relaxed);
  if (v < 0) {
    const int t = gpu_tuning().qgemv_variant;
    int expected = -1;
    g_variant.compare_exchange_strong(expected, t >= 0 && t < kVariants ? t : kDefaultVariant);
    v = g_variant.load(std::memory_order_relaxed);
  }
  return v;
}

bool set_variant(int which) {
  if (which < 0 || which >= kVariants) return false;
  g_variant.store(which, std::memory_order_relaxed);
  return true;
}

const char* variant_name(int which) {
  switch (which) {
    case 0: return "v0";
    case 1: return "v1";
    case 2: return "v2";
    case 3: return "v3";
    case 4: return "v4";
    case 5: return "v5";
    case 6: return "v6";
    case 7: return "v7";
    case 8: return "v8";
    default: return "?";
  }
}

cudaError_t launch(int type, const void* w, int rows, int cols, int64_t row_bytes,
                   const uint16_t* v, float* y, bool accumulate, void* stream, int planes) {
  // The pipelined variants stage runs of blocks; the repacked layouts need no staging and take
  // the original kernel and its forms (5-8) only.
  switch (qblock::repacked(type) ? 0 : variant()) {
    // {CTAs per SM, PDL, shorter runs on long rows}
    case 1: return launch_pipe(type, w, rows, cols, row_bytes, v, y, accumulate, stream, planes,
                               4, true, true);
    case 2: return launch_pipe(type, w, rows, cols, row_bytes, v, y, accumulate, stream, planes,
                               2, true, true);
    case 3: return launch_pipe(type, w, rows, cols, row_bytes, v, y, accumulate, stream, planes,
                               4, false, true);
    case 4: return launch_pipe(type, w, rows, cols, row_bytes, v, y, accumulate, stream, planes,
                               4, true, false);
    default: break;
  }
  const auto st = static_cast<cudaStream_t>(stream);
  Args a = plain_args(w, rows, cols, row_bytes, y, accumulate);
  a.v = v;
  switch (variant()) {
    case 5: return launch_planes<kInBf16, false, kPdl>(type, a, st, planes);
    case 6: return launch_planes<kInBf16, false, kPdlFetch>(type, a, st, planes);
    case 7: return launch_planes<kInBf16, false, kFetch>(type, a, st, planes);
    case 8: return launch_planes<kInBf16, false, kPlain, 2>(type, a, st, planes);
    default: return launch_planes<kInBf16>(type, a, st, planes);
  }
}

bool fused_eligible(int type, const void* w, int64_t cols, int64_t row_bytes, const void* in,
                    bool norm) {
  if (!eligible(type, w, cols, row_bytes, in)) return false;
  return !norm || (cols % 8 == 0 && cols / 4 <= kNormMaxN4);
}

cudaError_t launch_fused(int type, const void* w, int rows, int cols, int64_t row_bytes,
                         const uint16_t* v, const float* x, const float* norm_w, float eps,
                         float* y, bool accumulate, uint16_t* act, void* stream, int planes) {
  const auto st = static_cast<cudaStream_t>(stream);
  Args a = plain_args(w, rows, cols, row_bytes, y, accumulate);
  a.v = v;
  a.x = x;
  a.norm_w = norm_w;
  a.eps = eps;
  a.act = act;
  switch (variant()) {
    case 7: return launch_forms<kFetch>(type, a, st, planes);
    case 8: return launch_forms<kPlain, 2>(type, a, st, planes);
    default: return launch_forms<kPlain>(type, a, st, planes);
  }
}

size_t x_bytes(int cols, int planes) {
  return static_cast<size_t>(planes) * cols + static_cast<size_t>(cols / 32) * sizeof(XScale);
}

cudaError_t quantize(const uint16_t* v, int cols, int planes, int8_t* xq, void* stream) {
  const auto st = static_cast<cudaStream_t>(stream);
  const int blocks = (cols / 8 + kThreads - 1) / kThreads;
  if (planes == 1) quantize_x_kernel<1><<<blocks, kThreads, 0, st>>>(v, cols, xq);
  else if (planes == 2) quantize_x_kernel<2><<<blocks, kThreads, 0, st>>>(v, cols, xq);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_pre(int type, const void* w, int rows, int cols, int64_t row_bytes,
                       const int8_t* xq, float* y, bool accumulate, void* stream, int planes) {
  Args a = plain_args(w, rows, cols, row_bytes, y, accumulate);
  a.xg = xq;
  return launch_planes<kInPre>(type, a, static_cast<cudaStream_t>(stream), planes);
}

cudaError_t prepare(int max_cols) {
  if (const cudaError_t e = prepare_p<1>(max_cols); e != cudaSuccess) return e;
  if (const cudaError_t e = prepare_p<2>(max_cols); e != cudaSuccess) return e;
  if (const cudaError_t e = prepare_pipe(max_cols); e != cudaSuccess) return e;
  return grid_cap(4) > 0 ? cudaSuccess : cudaErrorUnknown;
}

}  // namespace sinkscope::kernels::qwide
