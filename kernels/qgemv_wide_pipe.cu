// SPDX-License-Identifier: Apache-2.0
// The pipelined variants of the wide decode GEMV (kernels/qgemv_wide.h, launch_pipe): the same
// block products and activation quantization as kernels/qgemv_wide.cu (shared through
// kernels/qgemv_wide.cuh, so the results are the same up to the order of the fp32 sums), with
// the weight loads kept in flight while the lane computes:
//   - Each warp walks its rows (striding by the grid's warps) as a sequence of chunks (Q4_K:
//     4 D blocks, D 16-byte quant loads per lane; Q6_K / Q8_0: one staged run of blocks). The
//     loads of chunk i+1 are issued before the math of chunk i, so a warp never waits for a full
//     HBM round trip between chunks or between rows (the original kernel loads a row's chunk,
//     waits, computes, then loads the next).
//   - The first chunk's loads go out before the activation is quantized, so the quantization
//     (cols / 2048 passes of L2 reads and shuffles per CTA) runs under the first HBM round trip,
//     and the activation's loads are issued two passes at a time.
//   - With PDL (kernels/pdl.cuh), those first weight loads are issued before pdl_wait(): the
//     weights are never written by a kernel, so a GEMV's CTAs start streaming its matrix while
//     the previous kernel finishes. v and y are touched only after pdl_wait(); pdl_trigger()
//     follows the quantization.
// kMinCta is the CTAs per SM that __launch_bounds__ asks for and the grid is capped at (one
// wave): 4 (64 registers: D = 2, Q6_K runs of 8 blocks, Q8_0 of 64) or 2 (128 registers, half
// the warps with twice the bytes in flight each: D = 4, runs of 16 / 128 blocks).
#include <cuda_runtime.h>

#include <atomic>

#include "kernels/pdl.cuh"
#include "kernels/qblock.h"
#include "kernels/qgemv_wide.cuh"
#include "kernels/qgemv_wide.h"

namespace sinkscope::kernels::qwide {
namespace {

// Q4_K blocks per lane per chunk; a warp's chunk is 4 D blocks (8 lanes per block).
template <int kMinCta> constexpr int q4k_depth() { return kMinCta >= 4 ? 2 : 4; }

// Blocks per staged run (Q6_K / Q8_0).
template <int T, int kMinCta> constexpr int run_blocks() {
  return T == qblock::kQ6_K ? (kMinCta >= 4 ? 8 : 16) : (kMinCta >= 4 ? 64 : 128);
}
template <int T> constexpr int blk_bytes() { return T == qblock::kQ6_K ? 210 : 34; }
template <int T> constexpr int blk_elems() { return T == qblock::kQ6_K ? 256 : 32; }

// Per-warp staging chunks: the aligned 16-byte chunks a run can touch, ceil((15 + bytes) / 16),
// rounded up to whole passes of 32 lanes (Q6_K 8: 128, 16: 224; Q8_0 64: 160, 128: 288).
template <int T, int kMinCta> constexpr int pipe_chunks() {
  if constexpr (T == qblock::kQ4_K) {
    return 0;
  } else {
    constexpr int c = (15 + run_blocks<T, kMinCta>() * blk_bytes<T>() + 15) / 16;
    return (c + 31) / 32 * 32;
  }
}

template <int D>
struct Q4Chunk {
  uint4 hd[D], qv[D];
};

// Lane's loads of the Q4_K chunk whose first block for this lane is b0 (blocks b0 + 4 i); zeros
// (not read) past the row's nb blocks or for row >= rows.
template <int D>
__device__ __forceinline__ void q4k_load(Q4Chunk<D>& c, const uint8_t* w, int64_t row_bytes,
                                         int row, int rows, int b0, int nb, int t) {
  const uint4* wb = reinterpret_cast<const uint4*>(w + static_cast<int64_t>(row) * row_bytes);
#pragma unroll
  for (int i = 0; i < D; ++i) {
    const int b = b0 + 4 * i;
    c.hd[i] = c.qv[i] = make_uint4(0u, 0u, 0u, 0u);
    if (row < rows && b < nb) {
      c.hd[i] = __ldg(wb + 9 * b);
      c.qv[i] = __ldg(wb + 9 * b + 1 + t);
    }
  }
}

template <int P, int D>
__device__ __forceinline__ float q4k_compute(const Q4Chunk<D>& c, const int8_t* xq, int cols,
                                             const XScale* xd, int b0, int nb, int t) {
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < D; ++i) {
    const int b = b0 + 4 * i;
    if (b < nb) acc += q4k_part<P>(c.hd[i], c.qv[i], xq + 256 * b, cols, xd + 8 * b, t);
  }
  return acc;
}

// Loads of a staged run: the aligned 16-byte chunks covering [src, src + n) into registers
// (lane's chunks lane + 32 k); returns src & 15. Nothing is read when n == 0.
template <int kPasses>
__device__ __forceinline__ int run_load(const uint8_t* src, int n, uint4 (&r)[kPasses], int lane) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(src);
  const uint4* a0 = reinterpret_cast<const uint4*>(a & ~uintptr_t(15));
  const int off = static_cast<int>(a & 15);
  const int nc = n > 0 ? (off + n + 15) >> 4 : 0;
#pragma unroll
  for (int k = 0; k < kPasses; ++k) {
    const int i = lane + 32 * k;
    if (i < nc) r[k] = __ldg(a0 + i);
  }
  return off;
}

template <int kPasses>
__device__ __forceinline__ void run_store(const uint4 (&r)[kPasses], int off, int n, uint4* buf,
                                          int lane) {
  const int nc = n > 0 ? (off + n + 15) >> 4 : 0;
#pragma unroll
  for (int k = 0; k < kPasses; ++k) {
    const int i = lane + 32 * k;
    if (i < nc) buf[i] = r[k];
  }
}

__device__ __forceinline__ float warp_sum(float acc) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  return acc;
}

template <int T, int P, int kMinCta>
__global__ void __launch_bounds__(kThreads, kMinCta)
    qgemv_pipe_kernel(const uint8_t* __restrict__ w, int rows, int cols, int64_t row_bytes,
                      const uint16_t* __restrict__ v, float* __restrict__ y, int accumulate) {
  extern __shared__ uint4 smem[];
  constexpr int kStage = pipe_chunks<T, kMinCta>();
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x & 31);
  uint4* buf = smem + warp * kStage;
  int8_t* xq = reinterpret_cast<int8_t*>(smem + kWarps * kStage);
  XScale* xd = reinterpret_cast<XScale*>(xq + P * cols);  // cols % 32 == 0: 16-byte aligned
  const int stride = static_cast<int>(gridDim.x) * kWarps;
  // Warp-uniform: the shuffles run with all 32 lanes.
  int row = static_cast<int>(blockIdx.x) * kWarps + warp;
  float acc = 0.f;
  if constexpr (T == qblock::kQ4_K) {
    constexpr int D = q4k_depth<kMinCta>(), kSpan = 4 * D;
    const int nb = cols / 256, nc = (nb + kSpan - 1) / kSpan;
    const int t = lane & 7, lb = lane >> 3;
    Q4Chunk<D> ca, cb;
    q4k_load(ca, w, row_bytes, row, rows, lb, nb, t);
    detail::pdl_wait();
    quantize_x<P, 2>(v, cols, xq, xd);
    __syncthreads();
    detail::pdl_trigger();
    int c = 0;
    // Issues the loads of the chunk after (row, c) into nxt, then computes cur.
    auto step = [&](const Q4Chunk<D>& cur, Q4Chunk<D>& nxt) {
      int rn = row, cn = c + 1;
      if (cn == nc) {
        cn = 0;
        rn += stride;
      }
      q4k_load(nxt, w, row_bytes, rn, rows, kSpan * cn + lb, nb, t);
      acc += q4k_compute<P, D>(cur, xq, cols, xd, kSpan * c + lb, nb, t);
      if (cn == 0) {
        acc = warp_sum(acc);
        if (lane == 0) y[row] = accumulate ? y[row] + acc : acc;
        acc = 0.f;
      }
      row = rn;
      c = cn;
    };
    while (row < rows) {
      step(ca, cb);
      if (row >= rows) break;
      step(cb, ca);
    }
  } else {
    constexpr int kRun = run_blocks<T, kMinCta>(), kPasses = kStage / 32;
    constexpr int kBB = blk_bytes<T>();
    const int nb = cols / blk_elems<T>(), nr = (nb + kRun - 1) / kRun;
    const uint8_t* sb = reinterpret_cast<const uint8_t*>(buf);
    uint4 r[kPasses];
    // Bytes of run s of a row (0 past the last row).
    auto run_n = [&](int rw, int s) {
      return rw < rows ? kBB * (nb - kRun * s < kRun ? nb - kRun * s : kRun) : 0;
    };
    auto run_src = [&](int rw, int s) {
      return w + static_cast<int64_t>(rw < rows ? rw : 0) * row_bytes + kBB * kRun * s;
    };
    int s = 0;
    int n_cur = run_n(row, 0);
    int off_cur = run_load<kPasses>(run_src(row, 0), n_cur, r, lane);
    detail::pdl_wait();
    quantize_x<P, 2>(v, cols, xq, xd);
    __syncthreads();
    detail::pdl_trigger();
    while (row < rows) {
      run_store<kPasses>(r, off_cur, n_cur, buf, lane);
      __syncwarp();
      int rn = row, sn = s + 1;
      if (sn == nr) {
        sn = 0;
        rn += stride;
      }
      const int n_next = run_n(rn, sn);
      const int off_next = run_load<kPasses>(run_src(rn, sn), n_next, r, lane);
      const int nblk = n_cur / kBB, b0 = kRun * s;
      if constexpr (T == qblock::kQ6_K) {
#pragma unroll
        for (int i = 0; i < kRun / 8; ++i) {
          const int bi = (lane >> 2) + 8 * i;
          if (bi < nblk) acc += q6k_part<P>(sb, off_cur + 210 * bi, xq, cols, xd, b0 + bi, lane & 3);
        }
      } else {
#pragma unroll
        for (int i = 0; i < kRun / 16; ++i) {
          const int bi = (lane >> 1) + 16 * i;
          if (bi < nblk) acc += q8_0_part<P>(sb, off_cur + 34 * bi, xq, cols, xd, b0 + bi, lane & 1);
        }
      }
      if (sn == 0) {
        acc = warp_sum(acc);
        if (lane == 0) y[row] = accumulate ? y[row] + acc : acc;
        acc = 0.f;
      }
      __syncwarp();  // the buffer is refilled next
      row = rn;
      s = sn;
      n_cur = n_next;
      off_cur = off_next;
    }
  }
}

template <int T, int P, int kMinCta>
size_t pipe_smem_bytes(int cols) {
  return static_cast<size_t>(kWarps) * pipe_chunks<T, kMinCta>() * 16 +
         static_cast<size_t>(P) * cols + static_cast<size_t>(cols / 32) * sizeof(XScale);
}

template <int T, int P, int kMinCta>
cudaError_t pipe_raise_smem(int cols) {
  static std::atomic<size_t> limit{48 * 1024};
  const size_t smem = pipe_smem_bytes<T, P, kMinCta>(cols);
  if (smem <= limit.load()) return cudaSuccess;
  const cudaError_t e =
      cudaFuncSetAttribute(qgemv_pipe_kernel<T, P, kMinCta>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e == cudaSuccess) limit.store(smem);
  return e;
}

template <int T, int P, int kMinCta>
cudaError_t pipe_launch_t(const void* w, int rows, int cols, int64_t row_bytes, const uint16_t* v,
                          float* y, bool accumulate, bool pdl, cudaStream_t st) {
  if (const cudaError_t e = pipe_raise_smem<T, P, kMinCta>(cols); e != cudaSuccess) return e;
  const int want = (rows + kWarps - 1) / kWarps;
  const int cap = kMinCta * sm_count();
  return detail::launch_pdl(pdl, qgemv_pipe_kernel<T, P, kMinCta>, dim3(want < cap ? want : cap),
                            dim3(kThreads), pipe_smem_bytes<T, P, kMinCta>(cols), st,
                            static_cast<const uint8_t*>(w), rows, cols, row_bytes, v, y,
                            accumulate ? 1 : 0);
}

template <int P, int kMinCta>
cudaError_t pipe_launch_p(int type, const void* w, int rows, int cols, int64_t row_bytes,
                          const uint16_t* v, float* y, bool accumulate, bool pdl, cudaStream_t st) {
  switch (type) {
    case qblock::kQ4_K:
      return pipe_launch_t<qblock::kQ4_K, P, kMinCta>(w, rows, cols, row_bytes, v, y, accumulate, pdl, st);
    case qblock::kQ6_K:
      return pipe_launch_t<qblock::kQ6_K, P, kMinCta>(w, rows, cols, row_bytes, v, y, accumulate, pdl, st);
    case qblock::kQ8_0:
      return pipe_launch_t<qblock::kQ8_0, P, kMinCta>(w, rows, cols, row_bytes, v, y, accumulate, pdl, st);
    default: return cudaErrorInvalidValue;
  }
}

template <int P, int kMinCta>
cudaError_t pipe_prepare_p(int max_cols) {
  for (const cudaError_t e : {pipe_raise_smem<qblock::kQ4_K, P, kMinCta>(max_cols),
                              pipe_raise_smem<qblock::kQ6_K, P, kMinCta>(max_cols),
                              pipe_raise_smem<qblock::kQ8_0, P, kMinCta>(max_cols)}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t launch_pipe(int type, const void* w, int rows, int cols, int64_t row_bytes,
                        const uint16_t* v, float* y, bool accumulate, void* stream, int planes,
                        int min_ctas, bool pdl) {
  const auto st = static_cast<cudaStream_t>(stream);
  if (min_ctas == 4) {
    if (planes == 1) return pipe_launch_p<1, 4>(type, w, rows, cols, row_bytes, v, y, accumulate, pdl, st);
    if (planes == 2) return pipe_launch_p<2, 4>(type, w, rows, cols, row_bytes, v, y, accumulate, pdl, st);
  } else if (min_ctas == 2) {
    if (planes == 1) return pipe_launch_p<1, 2>(type, w, rows, cols, row_bytes, v, y, accumulate, pdl, st);
    if (planes == 2) return pipe_launch_p<2, 2>(type, w, rows, cols, row_bytes, v, y, accumulate, pdl, st);
  }
  return cudaErrorInvalidValue;
}

cudaError_t prepare_pipe(int max_cols) {
  for (const cudaError_t e : {pipe_prepare_p<1, 4>(max_cols), pipe_prepare_p<2, 4>(max_cols),
                              pipe_prepare_p<1, 2>(max_cols), pipe_prepare_p<2, 2>(max_cols)}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace sinkscope::kernels::qwide
