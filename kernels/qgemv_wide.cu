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
#include "kernels/qgemv_wide.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>

#include "kernels/qblock.h"

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

__device__ __forceinline__ float half_bits(uint32_t h) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h & 0xffffu)));
}

// The int8 activation: plane p at xq + p * cols (P planes), xd[cols / 32]. Four lanes per run of
// 32 (8 elements each, one 16-byte load); every thread makes the same number of passes so the
// shuffles always run with the whole warp. Explicitly rounded operations (no contraction) so a
// host replay gets the same bits.
template <int P>
__device__ __forceinline__ void quantize_x(const uint16_t* __restrict__ v, int cols, int8_t* xq,
                                           XScale* xd) {
  const int n8 = cols / 8;
  for (int base = 0; base < n8; base += kThreads) {
    const int g = base + static_cast<int>(threadIdx.x);
    const bool on = g < n8;
    float f[8];
    float amax = 0.f;
    if (on) {
      const uint4 u = *reinterpret_cast<const uint4*>(v + 8 * static_cast<int64_t>(g));
      const uint32_t wd[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        f[2 * k] = __uint_as_float(wd[k] << 16);
        f[2 * k + 1] = __uint_as_float(wd[k] & 0xffff0000u);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(f[i]));
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = 0.f;
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
      *reinterpret_cast<uint2*>(xq + 8 * g) = make_uint2(packed[0], packed[1]);
      if constexpr (P == 2) {
        *reinterpret_cast<uint2*>(xq + cols + 8 * g) = make_uint2(packed2[0], packed2[1]);
      }
      if ((g & 3) == 0) {
        xd[g >> 2] = make_float4(d, __fmul_rn(d, static_cast<float>(s)), d2,
                                 __fmul_rn(d2, static_cast<float>(s2)));
      }
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

// 16 int8 weights q times the 16 activations at x (plane 0; plane 1 at x + cols), scaled by the
// activation steps of their run: d * sum(q x1) (+ d2 * sum(q x2)).
template <int P>
__device__ __forceinline__ float dotx(uint4 q, const int8_t* x, int cols, const XScale& s) {
  float r = s.x * static_cast<float>(dot16(q, *reinterpret_cast<const int4*>(x), 0));
  if constexpr (P == 2) {
    r += s.z * static_cast<float>(dot16(q, *reinterpret_cast<const int4*>(x + cols), 0));
  }
  return r;
}

// Q4_K's 6-bit scale and min of sub-block j from the scale bytes s0 (0..3), s1 (4..7), s2 (8..11)
// (qblock::k_scale_min on three words).
__device__ __forceinline__ void q4k_scale_min(int j, uint32_t s0, uint32_t s1, uint32_t s2, int* sc,
                                              int* m) {
  if (j < 4) {
    *sc = (s0 >> (8 * j)) & 63;
    *m = (s1 >> (8 * j)) & 63;
  } else {
    const int i = 8 * (j - 4);
    const uint32_t b2 = (s2 >> i) & 0xffu;
    *sc = static_cast<int>((b2 & 15u) | (((s0 >> i) & 0xc0u) >> 2));
    *m = static_cast<int>((b2 >> 4) | (((s1 >> i) & 0xc0u) >> 2));
  }
}

// One lane's share of a Q4_K block: hd = bytes 0..15, qv = qs[16 t .. 16 t + 16).
template <int P>
__device__ __forceinline__ float q4k_part(uint4 hd, uint4 qv, const int8_t* xb, int cols,
                                          const XScale* xdb, int t) {
  const int p = t >> 1, h = t & 1;
  int sc_lo, m_lo, sc_hi, m_hi;
  q4k_scale_min(2 * p, hd.y, hd.z, hd.w, &sc_lo, &m_lo);
  q4k_scale_min(2 * p + 1, hd.y, hd.z, hd.w, &sc_hi, &m_hi);
  constexpr uint32_t kLo = 0x0f0f0f0fu;
  const uint4 lo = make_uint4(qv.x & kLo, qv.y & kLo, qv.z & kLo, qv.w & kLo);
  const uint4 hi = make_uint4((qv.x >> 4) & kLo, (qv.y >> 4) & kLo, (qv.z >> 4) & kLo,
                              (qv.w >> 4) & kLo);
  const XScale al = xdb[2 * p], ah = xdb[2 * p + 1];
  float r = half_bits(hd.x) * (static_cast<float>(sc_lo) * dotx<P>(lo, xb + 64 * p + 16 * h, cols, al) +
                               static_cast<float>(sc_hi) * dotx<P>(hi, xb + 64 * p + 32 + 16 * h, cols, ah));
  // The min term covers the whole sub-block (d * sum(q) of all 32), so one lane of the pair.
  if (h == 0) {
    r -= half_bits(hd.x >> 16) * (static_cast<float>(m_lo) * (al.y + al.w) +
                                  static_cast<float>(m_hi) * (ah.y + ah.w));
  }
  return r;
}

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
      if (b < nb) acc += q4k_part<P>(hd[i], qv[i], xq + 256 * b, cols, xd + 8 * b, t);
    }
  }
  return acc;
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
      if (bi < n) {
        const int o = off + 34 * bi;
        const float d = half_bits(*reinterpret_cast<const uint16_t*>(sb + o));
        const uint4 q = load16_a2(sb, o + 2 + 16 * t);
        const int b = s0 + bi;
        acc += d * dotx<P>(q, xq + 32 * b + 16 * t, cols, xd[b]);
      }
    }
    __syncwarp();  // the buffer is refilled next
  }
  return acc;
}

// Q6_K's 6-bit quants are unsigned (0..63) with an offset of 32: per byte q - 32 as int8,
// without borrows between bytes (bit 7 set first, then flipped back).
__device__ __forceinline__ int q6_signed(uint32_t q) {
  return static_cast<int>(((q | 0x80808080u) - 0x20202020u) ^ 0x80808080u);
}

template <int P>
__device__ float dot_q6k(const uint8_t* wr, int cols, const int8_t* xq, const XScale* xd,
                         uint4* buf, int lane) {
  constexpr int kRun = 8;
  const int nb = cols / 256;
  const uint8_t* sb = reinterpret_cast<const uint8_t*>(buf);
  const int bi = lane >> 2, t = lane & 3, h = t >> 1, l0 = 16 * (t & 1);
  float acc = 0.f;
  for (int s0 = 0; s0 < nb; s0 += kRun) {
    const int n = nb - s0 < kRun ? nb - s0 : kRun;
    const int off = stage_run<stage_chunks<qblock::kQ6_K>()>(wr + 210 * s0, 210 * n, buf, lane);
    if (bi < n) {
      const int o = off + 210 * bi;
      const uint4 qa = load16_a2(sb, o + 64 * h + l0);       // ql: quarters 0 (lo), 2 (hi)
      const uint4 qb = load16_a2(sb, o + 64 * h + 32 + l0);  // ql: quarters 1 (lo), 3 (hi)
      const uint4 qh = load16_a2(sb, o + 128 + 32 * h + l0);
      const int8_t* scp = reinterpret_cast<const int8_t*>(sb + o + 192 + 8 * h + (t & 1));
      const float d = half_bits(*reinterpret_cast<const uint16_t*>(sb + o + 208));
      const int b = s0 + bi;
      const int8_t* xb = xq + 256 * b + 128 * h + l0;
      const uint32_t A[4] = {qa.x, qa.y, qa.z, qa.w};
      const uint32_t B[4] = {qb.x, qb.y, qb.z, qb.w};
      const uint32_t H[4] = {qh.x, qh.y, qh.z, qh.w};
      float r = 0.f;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
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
        r += static_cast<float>(scp[2 * k]) *
             dotx<P>(make_uint4(q[0], q[1], q[2], q[3]), xb + 32 * k, cols, xd[8 * b + 4 * h + k]);
      }
      acc += d * r;
    }
    __syncwarp();
  }
  return acc;
}

// 4 CTAs (32 warps) per SM: at most 64 registers per thread.
template <int T, int P>
__global__ void __launch_bounds__(kThreads, 4)
    qgemv_wide_kernel(const uint8_t* __restrict__ w, int rows, int cols, int64_t row_bytes,
                      const uint16_t* __restrict__ v, float* __restrict__ y, int accumulate) {
  extern __shared__ uint4 smem[];
  constexpr int kStage = stage_chunks<T>();
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x & 31);
  uint4* buf = smem + warp * kStage;
  int8_t* xq = reinterpret_cast<int8_t*>(smem + kWarps * kStage);
  XScale* xd = reinterpret_cast<XScale*>(xq + P * cols);  // cols % 32 == 0: 16-byte aligned
  quantize_x<P>(v, cols, xq, xd);
  __syncthreads();
  // Rows depend on the warp only, so the shuffles below run with all 32 lanes.
  for (int row = blockIdx.x * kWarps + warp; row < rows; row += gridDim.x * kWarps) {
    const uint8_t* wr = w + static_cast<int64_t>(row) * row_bytes;
    float acc;
    if constexpr (T == qblock::kQ4_K) {
      acc = dot_q4k<P>(wr, cols, xq, xd, lane);
    } else if constexpr (T == qblock::kQ8_0) {
      acc = dot_q8_0<P>(wr, cols, xq, xd, buf, lane);
    } else {
      acc = dot_q6k<P>(wr, cols, xq, xd, buf, lane);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) y[row] = accumulate ? y[row] + acc : acc;
  }
}

template <int T, int P>
size_t smem_bytes(int cols) {
  return static_cast<size_t>(kWarps) * stage_chunks<T>() * 16 + static_cast<size_t>(P) * cols +
         static_cast<size_t>(cols / 32) * sizeof(XScale);
}

template <int T, int P>
std::atomic<size_t>& smem_limit() {
  static std::atomic<size_t> v{kDefaultSmem};
  return v;
}

template <int T, int P>
cudaError_t raise_smem(int cols) {
  const size_t smem = smem_bytes<T, P>(cols);
  if (smem <= smem_limit<T, P>().load()) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(
      qgemv_wide_kernel<T, P>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e == cudaSuccess) smem_limit<T, P>().store(smem);
  return e;
}

// CTAs in one launch: enough for every row, at most 4 per SM (one resident wave, as
// __launch_bounds__ asks; the activation is then quantized at most 4 times per SM).
int grid_cap() {
  static std::atomic<int> cap{0};
  int c = cap.load();
  if (c == 0) {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      sms = 132;
    }
    c = 4 * (sms > 0 ? sms : 132);
    cap.store(c);
  }
  return c;
}

template <int T, int P>
cudaError_t launch_t(const void* w, int rows, int cols, int64_t row_bytes, const uint16_t* v,
                     float* y, bool accumulate, cudaStream_t st) {
  if (const cudaError_t e = raise_smem<T, P>(cols); e != cudaSuccess) return e;
  const int want = (rows + kWarps - 1) / kWarps;
  const int cap = grid_cap();
  qgemv_wide_kernel<T, P><<<want < cap ? want : cap, kThreads, smem_bytes<T, P>(cols), st>>>(
      static_cast<const uint8_t*>(w), rows, cols, row_bytes, v, y, accumulate ? 1 : 0);
  return cudaGetLastError();
}

template <int P>
cudaError_t launch_p(int type, const void* w, int rows, int cols, int64_t row_bytes,
                     const uint16_t* v, float* y, bool accumulate, cudaStream_t st) {
  switch (type) {
    case qblock::kQ4_K: return launch_t<qblock::kQ4_K, P>(w, rows, cols, row_bytes, v, y, accumulate, st);
    case qblock::kQ6_K: return launch_t<qblock::kQ6_K, P>(w, rows, cols, row_bytes, v, y, accumulate, st);
    case qblock::kQ8_0: return launch_t<qblock::kQ8_0, P>(w, rows, cols, row_bytes, v, y, accumulate, st);
    default: return cudaErrorInvalidValue;
  }
}

template <int P>
cudaError_t prepare_p(int max_cols) {
  for (const cudaError_t e : {raise_smem<qblock::kQ4_K, P>(max_cols),
                              raise_smem<qblock::kQ6_K, P>(max_cols),
                              raise_smem<qblock::kQ8_0, P>(max_cols)}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

bool eligible(int type, const void* w, int64_t cols, int64_t row_bytes, const void* v) {
  const auto a = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  if (a(v) % 16 != 0 || cols <= 0 || cols > kMaxCols) return false;
  switch (type) {
    case qblock::kQ4_K: return cols % 256 == 0 && a(w) % 16 == 0 && row_bytes % 16 == 0;
    case qblock::kQ6_K: return cols % 256 == 0 && a(w) % 2 == 0;
    case qblock::kQ8_0: return cols % 32 == 0 && a(w) % 2 == 0;
    default: return false;
  }
}

cudaError_t launch(int type, const void* w, int rows, int cols, int64_t row_bytes,
                   const uint16_t* v, float* y, bool accumulate, void* stream, int planes) {
  const auto st = static_cast<cudaStream_t>(stream);
  if (planes == 1) return launch_p<1>(type, w, rows, cols, row_bytes, v, y, accumulate, st);
  if (planes == 2) return launch_p<2>(type, w, rows, cols, row_bytes, v, y, accumulate, st);
  return cudaErrorInvalidValue;
}

cudaError_t prepare(int max_cols) {
  if (const cudaError_t e = prepare_p<1>(max_cols); e != cudaSuccess) return e;
  if (const cudaError_t e = prepare_p<2>(max_cols); e != cudaSuccess) return e;
  return grid_cap() > 0 ? cudaSuccess : cudaErrorUnknown;
}

}  // namespace sinkscope::kernels::qwide
