// SPDX-License-Identifier: Apache-2.0
// The pipelined variants of the wide decode GEMV (kernels/qgemv_wide.h, launch_pipe): the same
// block products and activation quantization as kernels/qgemv_wide.cu (shared through
// kernels/qgemv_wide.cuh, so the results are the same up to the order of the fp32 sums), with
// the weight loads kept in flight while the lanes compute:
//   - Each warp walks its rows (striding by the grid's warps) as a sequence of runs of blocks
//     (Q4_K 16, Q6_K 8, Q8_0 64 at 4 CTAs per SM; twice that at 2). A run is loaded as the
//     aligned 16-byte chunks that cover it into registers (each byte once, coalesced), stored
//     to the warp's shared buffer, and the loads of the next run are issued right after, before
//     the math on this one, so the next run's HBM round trip overlaps the math (the original
//     kernel loads, waits, computes, then loads again). Q4_K goes through the buffer as well:
//     its loads then take 20 registers per run instead of 2 per block, so a warp keeps a whole
//     run in flight within the 64-register budget of 4 CTAs per SM.
//   - The first run's loads go out before the activation is quantized, so the quantization
//     (cols / 2048 passes of L2 reads and shuffles per CTA) runs under the first HBM round trip,
//     and the activation's loads are issued two passes at a time.
//   - With PDL (kernels/pdl.cuh), those first weight loads are issued before pdl_wait(): the
//     weights are never written by a kernel, so a GEMV's CTAs start streaming its matrix while
//     the previous kernel finishes. v and y are touched only after pdl_wait(); pdl_trigger()
//     follows the quantization.
// kMinCta is the CTAs per SM that __launch_bounds__ asks for: 4 (64 registers) or 2 (128
// registers, half the warps with twice the bytes in flight each). The grid is one resident wave
// (fewer CTAs per SM where a long row's shared memory allows fewer).
#include <cuda_runtime.h>

#include <atomic>

#include "kernels/pdl.cuh"
#include "kernels/qblock.h"
#include "kernels/qgemv_wide.cuh"
#include "kernels/qgemv_wide.h"

namespace sinkscope::kernels::qwide {
namespace {

// Blocks per staged run: Q4_K 16 / 32 (2304 / 4608 bytes), Q6_K 8 / 16 (1680 / 3360), Q8_0
// 64 / 128 (2176 / 4352) at 4 / 2 CTAs per SM.
template <int T, int kMinCta>
constexpr int run_blocks() {
  constexpr int k = kMinCta >= 4 ? 1 : 2;
  return k * (T == qblock::kQ4_K ? 16 : T == qblock::kQ6_K ? 8 : 64);
}
template <int T>
constexpr int blk_bytes() {
  return T == qblock::kQ4_K ? 144 : T == qblock::kQ6_K ? 210 : 34;
}
template <int T>
constexpr int blk_elems() {
  return T == qblock::kQ8_0 ? 32 : 256;
}

// Per-warp staging chunks for runs of `run` blocks: the aligned 16-byte chunks a run can touch,
// ceil((15 + bytes) / 16), rounded up to whole passes of 32 lanes (Q4_K 16: 160, 32: 320; Q6_K
// 8: 128, 16: 224; Q8_0 64: 160, 128: 288), which also leaves the 4 bytes load16_a2 may read past
// a run's end.
template <int T>
__host__ __device__ constexpr int stage_chunks_for(int run) {
  return ((15 + run * blk_bytes<T>() + 15) / 16 + 31) / 32 * 32;
}
template <int T, int kMinCta>
constexpr int pipe_chunks() {
  return stage_chunks_for<T>(run_blocks<T, kMinCta>());
}
// Blocks one pass of the warp's lanes covers (a run is a multiple of it).
template <int T>
constexpr int pass_blocks() {
  return T == qblock::kQ4_K ? 4 : T == qblock::kQ6_K ? 8 : 16;
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
                      const uint16_t* __restrict__ v, float* __restrict__ y, int accumulate,
                      int run) {
  // run: blocks per staged run, a multiple of pass_blocks<T>() up to run_blocks<T, kMinCta>()
  // (the launcher halves it where the shared memory of long rows would cost CTAs per SM).
  extern __shared__ uint4 smem[];
  constexpr int kStage = pipe_chunks<T, kMinCta>();  // registers are sized for the longest run
  const int stage = stage_chunks_for<T>(run);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x & 31);
  uint4* buf = smem + warp * stage;
  int8_t* xq = reinterpret_cast<int8_t*>(smem + kWarps * stage);
  XScale* xd = reinterpret_cast<XScale*>(xq + P * cols);  // cols % 32 == 0: 16-byte aligned
  const int stride = static_cast<int>(gridDim.x) * kWarps;
  // Warp-uniform: the shuffles run with all 32 lanes.
  int row = static_cast<int>(blockIdx.x) * kWarps + warp;
  float acc = 0.f;
  {
    constexpr int kRun = run_blocks<T, kMinCta>(), kPasses = kStage / 32;
    constexpr int kBB = blk_bytes<T>();
    const int nb = cols / blk_elems<T>(), nr = (nb + run - 1) / run;
    const uint8_t* sb = reinterpret_cast<const uint8_t*>(buf);
    uint4 r[kPasses];
    // Bytes of run s of a row (0 past the last row).
    auto run_n = [&](int rw, int s) {
      return rw < rows ? kBB * (nb - run * s < run ? nb - run * s : run) : 0;
    };
    auto run_src = [&](int rw, int s) {
      return w + static_cast<int64_t>(rw < rows ? rw : 0) * row_bytes + kBB * run * s;
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
      const int nblk = n_cur / kBB, b0 = run * s;  // nblk <= run <= kRun
      if constexpr (T == qblock::kQ4_K) {
        // Rows are 16-byte aligned (eligible()), so off_cur == 0 and blocks sit at 9-chunk steps.
        const uint4* bq = buf;
        const int t = lane & 7;
#pragma unroll
        for (int i = 0; i < kRun / 4; ++i) {
          const int bi = (lane >> 3) + 4 * i;
          if (bi < nblk) {
            const int b = b0 + bi;
            acc += q4k_part<P>(bq[9 * bi], bq[9 * bi + 1 + t], xq, cols, xd, b, t);
          }
        }
      } else if constexpr (T == qblock::kQ6_K) {
#pragma unroll
        for (int i = 0; i < kRun / 8; ++i) {
          const int bi = (lane >> 2) + 8 * i;
          if (bi < nblk)
            acc += q6k_part<P>(sb, off_cur + 210 * bi, xq, cols, xd, b0 + bi, lane & 3);
        }
      } else {
#pragma unroll
        for (int i = 0; i < kRun / 16; ++i) {
          const int bi = (lane >> 1) + 16 * i;
          if (bi < nblk)
            acc += q8_0_part<P>(sb, off_cur + 34 * bi, xq, cols, xd, b0 + bi, lane & 1);
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
size_t pipe_smem_bytes(int cols, int run) {
  return static_cast<size_t>(kWarps) * stage_chunks_for<T>(run) * 16 +
         static_cast<size_t>(P) * cols + static_cast<size_t>(cols / 32) * sizeof(XScale);
}

template <int T, int P, int kMinCta>
cudaError_t pipe_raise_smem(size_t smem) {
  static std::atomic<size_t> limit{48 * 1024};
  if (smem <= limit.load()) return cudaSuccess;
  const cudaError_t e =
      cudaFuncSetAttribute(qgemv_pipe_kernel<T, P, kMinCta>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e == cudaSuccess) limit.store(smem);
  return e;
}

// CTAs per SM of the kernel with `smem` bytes (occupancy calculator, at most kMinCta); cached
// in 8 slots by size (a decode step alternates a few row lengths).
template <int T, int P, int kMinCta>
int ctas_per_sm(size_t smem) {
  static std::atomic<uint64_t> slots[8];  // smem << 8 | CTAs per SM; 0: empty
  std::atomic<uint64_t>& last = slots[(smem >> 4) & 7];
  const uint64_t l = last.load();
  if (l != 0 && (l >> 8) == smem) return static_cast<int>(l & 0xffu);
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, qgemv_pipe_kernel<T, P, kMinCta>, kThreads,
                                                    smem) != cudaSuccess) {
    (void)cudaGetLastError();
    n = kMinCta;
  }
  n = n < 1 ? 1 : n > kMinCta ? kMinCta : n;
  last.store((static_cast<uint64_t>(smem) << 8) | static_cast<uint64_t>(n));
  return n;
}

// The run length for rows of `cols`: with halve, the longest that keeps kMinCta CTAs per SM by
// shared memory (halved down to one pass of blocks), else (and without halve) the longest.
template <int T, int P, int kMinCta>
int pick_run(int cols, bool halve) {
  constexpr int kMax = run_blocks<T, kMinCta>();
  if (!halve) return kMax;
  for (int run = kMax; run >= pass_blocks<T>(); run /= 2) {
    const size_t smem = pipe_smem_bytes<T, P, kMinCta>(cols, run);
    if (smem > 227 * 1024) continue;
    if (pipe_raise_smem<T, P, kMinCta>(smem) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if (ctas_per_sm<T, P, kMinCta>(smem) >= kMinCta) return run;
  }
  return kMax;
}

template <int T, int P, int kMinCta>
cudaError_t pipe_launch_t(const void* w, int rows, int cols, int64_t row_bytes, const uint16_t* v,
                          float* y, bool accumulate, bool pdl, bool halve, cudaStream_t st) {
  static std::atomic<int64_t> slots[8];  // cols << 17 | halve << 16 | run; 0: empty
  std::atomic<int64_t>& picked = slots[((cols >> 8) ^ (halve ? 5 : 0)) & 7];
  const int64_t key = (static_cast<int64_t>(cols) << 1) | (halve ? 1 : 0);
  const int64_t pk = picked.load();
  int run = static_cast<int>(pk & 0xffff);
  if (pk == 0 || (pk >> 16) != key) {
    run = pick_run<T, P, kMinCta>(cols, halve);
    picked.store((key << 16) | run);
  }
  const size_t smem = pipe_smem_bytes<T, P, kMinCta>(cols, run);
  if (const cudaError_t e = pipe_raise_smem<T, P, kMinCta>(smem); e != cudaSuccess) return e;
  // One resident wave.
  const int want = (rows + kWarps - 1) / kWarps;
  const int cap = ctas_per_sm<T, P, kMinCta>(smem) * sm_count();
  return detail::launch_pdl(pdl, qgemv_pipe_kernel<T, P, kMinCta>, dim3(want < cap ? want : cap),
                            dim3(kThreads), smem, st, static_cast<const uint8_t*>(w), rows, cols,
                            row_bytes, v, y, accumulate ? 1 : 0, run);
}

template <int P, int kMinCta>
cudaError_t pipe_launch_p(int type, const void* w, int rows, int cols, int64_t row_bytes,
                          const uint16_t* v, float* y, bool accumulate, bool pdl, bool halve,
                          cudaStream_t st) {
  switch (type) {
    case qblock::kQ4_K:
      return pipe_launch_t<qblock::kQ4_K, P, kMinCta>(w, rows, cols, row_bytes, v, y, accumulate,
                                                      pdl, halve, st);
    case qblock::kQ6_K:
      return pipe_launch_t<qblock::kQ6_K, P, kMinCta>(w, rows, cols, row_bytes, v, y, accumulate,
                                                      pdl, halve, st);
    case qblock::kQ8_0:
      return pipe_launch_t<qblock::kQ8_0, P, kMinCta>(w, rows, cols, row_bytes, v, y, accumulate,
                                                      pdl, halve, st);
    default:
      return cudaErrorInvalidValue;
  }
}

template <int P, int kMinCta>
cudaError_t pipe_prepare_p(int max_cols) {
  constexpr int kQ4 = qblock::kQ4_K, kQ6 = qblock::kQ6_K, kQ8 = qblock::kQ8_0;
  for (const cudaError_t e : {pipe_raise_smem<kQ4, P, kMinCta>(pipe_smem_bytes<kQ4, P, kMinCta>(
                                  max_cols, run_blocks<kQ4, kMinCta>())),
                              pipe_raise_smem<kQ6, P, kMinCta>(pipe_smem_bytes<kQ6, P, kMinCta>(
                                  max_cols, run_blocks<kQ6, kMinCta>())),
                              pipe_raise_smem<kQ8, P, kMinCta>(pipe_smem_bytes<kQ8, P, kMinCta>(
                                  max_cols, run_blocks<kQ8, kMinCta>()))}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t launch_pipe(int type, const void* w, int rows, int cols, int64_t row_bytes,
                        const uint16_t* v, float* y, bool accumulate, void* stream, int planes,
                        int min_ctas, bool pdl, bool halve) {
  const auto st = static_cast<cudaStream_t>(stream);
  if (min_ctas == 4) {
    if (planes == 1)
      return pipe_launch_p<1, 4>(type, w, rows, cols, row_bytes, v, y, accumulate, pdl, halve, st);
    if (planes == 2)
      return pipe_launch_p<2, 4>(type, w, rows, cols, row_bytes, v, y, accumulate, pdl, halve, st);
  } else if (min_ctas == 2) {
    if (planes == 1)
      return pipe_launch_p<1, 2>(type, w, rows, cols, row_bytes, v, y, accumulate, pdl, halve, st);
    if (planes == 2)
      return pipe_launch_p<2, 2>(type, w, rows, cols, row_bytes, v, y, accumulate, pdl, halve, st);
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
