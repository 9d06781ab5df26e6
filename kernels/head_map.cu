// SPDX-License-Identifier: Apache-2.0
// The attention map's two passes (kernels/head_map.h). A block of 256 threads owns a 64 x 64
// score tile; thread (ty, tx) = (tid / 16, tid % 16) holds rows ty + 16 i and columns tx + 16 j
// (i, j < 4) so the shared-memory reads of Q and K are conflict-free. The dot products run over
// 32-wide chunks of d (any d).
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/head_map.h"
#include "kernels/visibility.h"

namespace sinkscope::kernels {
namespace {

constexpr int kTile = 64, kChunk = 32, kThreads = 256;
constexpr int kQkFloats = 2 * kTile * (kChunk + 1);  // Q and K chunks, padded rows
constexpr int kPStride = kTile + 1;
static_assert(kTile * kPStride <= kQkFloats, "the probability tile reuses the Q/K space");
// Pass 2's dynamic shared memory: Q/K chunks (later the probability tile), then the per (row
// bin, column) double sums of the tile.
constexpr size_t kPass2Smem = size_t(kQkFloats) * sizeof(float) + size_t(kTile) * kTile * sizeof(double);

// The tile's scaled (soft-capped) scores; -inf where the key is invisible or out of range.
__device__ __forceinline__ void tile_scores(const HeadMapProblem& p, int q0, int k0, float* qs,
                                            float* ks, float (&s)[4][4]) {
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  float acc[4][4] = {};
  for (int dc = 0; dc < p.d; dc += kChunk) {
#pragma unroll
    for (int t = 0; t < kTile * kChunk / kThreads; ++t) {
      const int e = tid + kThreads * t, r = e / kChunk, cc = e % kChunk;
      const bool in_d = dc + cc < p.d;
      qs[r * (kChunk + 1) + cc] =
          (in_d && q0 + r < p.n) ? p.q[size_t(q0 + r) * p.d + dc + cc] : 0.0f;
      ks[r * (kChunk + 1) + cc] =
          (in_d && k0 + r < p.n) ? p.k[size_t(k0 + r) * p.d + dc + cc] : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kChunk; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = qs[(ty + 16 * i) * (kChunk + 1) + kk];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = ks[(tx + 16 * j) * (kChunk + 1) + kk];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int qi = q0 + ty + 16 * i, kj = k0 + tx + 16 * j;
      float v = -INFINITY;
      if (qi < p.n && kj < p.n &&
          visibility::key_visible(kj, qi, p.sinks, p.window, p.own_window)) {
        v = acc[i][j] * p.scale;
        if (p.softcap > 0) v = tanhf(v / p.softcap) * p.softcap;
      }
      s[i][j] = v;
    }
}

// Whether the key tile at k0 can hold a key visible to some query of the tile at q0.
__device__ __forceinline__ bool tile_live(const HeadMapProblem& p, int q0, int k0) {
  const int q_last = min(q0 + kTile, p.n) - 1, k_last = min(k0 + kTile, p.n) - 1;
  return k0 <= q_last &&
         visibility::tile_in_windows(k0, k_last, q0, p.sinks, p.window, p.own_window);
}

// Pass 1: per row, the max logit (the sink logit included) and 1 / sum exp(s - max). One block
// per query tile, the longest (last) tiles first.
__global__ void __launch_bounds__(kThreads) head_map_rows(HeadMapProblem p) {
  __shared__ float sm[kQkFloats];
  const int nt = (p.n + kTile - 1) / kTile;
  const int qt = nt - 1 - int(blockIdx.x), q0 = qt * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const bool sink = !isinf(p.sink_logit);
  float m[4];
  double sum[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = sink ? p.sink_logit : -INFINITY;
    sum[i] = sink ? 1.0 : 0.0;
  }
  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kTile;
    if (!tile_live(p, q0, k0)) continue;  // uniform over the block
    float s[4][4];
    tile_scores(p, q0, k0, sm, sm + kTile * (kChunk + 1), s);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float tm = fmaxf(fmaxf(s[i][0], s[i][1]), fmaxf(s[i][2], s[i][3]));
      // The 16 lanes of a row share ty: lane bits 0..3 are tx.
#pragma unroll
      for (int o = 8; o >= 1; o /= 2) tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, o));
      // Every lane reaches the shuffles (the two rows of a warp may differ in visibility).
      const float mn = fmaxf(m[i], tm);
      double ts = 0.0;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (s[i][j] != -INFINITY) ts += double(expf(s[i][j] - mn));
#pragma unroll
      for (int o = 8; o >= 1; o /= 2) ts += __shfl_xor_sync(0xffffffffu, ts, o);
      if (tm != -INFINITY) {  // else no visible key of this tile for the row
        sum[i] = (m[i] == -INFINITY ? 0.0 : sum[i] * exp(double(m[i]) - double(mn))) + ts;
        m[i] = mn;
      }
    }
  }
  if (tx == 0)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int qi = q0 + ty + 16 * i;
      if (qi < p.n) {
        p.row_max[qi] = m[i];
        p.row_inv[qi] = sum[i] > 0 ? float(1.0 / sum[i]) : 0.0f;
      }
    }
}

// Pass 2: one block per live (query tile, key tile): the probabilities into a shared tile,
// summed per (row bin, column) in double, then per cell and per column into global memory.
__global__ void __launch_bounds__(kThreads) head_map_cells(HeadMapProblem p) {
  extern __shared__ double smem_d[];
  float* sm = reinterpret_cast<float*>(smem_d + kTile * kTile);  // Q/K chunks, then P
  double* rbc = smem_d;  // (local row bin, column) sums
  const int qt = int(blockIdx.y), kt = int(blockIdx.x);
  if (kt > qt) return;
  const int q0 = qt * kTile, k0 = kt * kTile;
  if (!tile_live(p, q0, k0)) return;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  float s[4][4];
  tile_scores(p, q0, k0, sm, sm + kTile * (kChunk + 1), s);  // ends with a barrier
  float* ps = sm;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = ty + 16 * i, qi = q0 + r;
    const float mx = qi < p.n ? p.row_max[qi] : 0.0f;
    const float inv = qi < p.n ? p.row_inv[qi] : 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      ps[r * kPStride + tx + 16 * j] = s[i][j] == -INFINITY ? 0.0f : expf(s[i][j] - mx) * inv;
  }
  const int q_last = min(q0 + kTile, p.n) - 1, k_last = min(k0 + kTile, p.n) - 1;
  const int rb0 = p.bin_of[q0], nrb = p.bin_of[q_last] - rb0 + 1;
  const int cb0 = p.bin_of[k0];
  for (int e = tid; e < nrb * kTile; e += kThreads) rbc[e] = 0.0;
  __syncthreads();
  // (row bin, column): thread (column c, quarter g) sums rows 16 g .. 16 g + 15, flushing at
  // each row-bin change (a bin split between quarters meets in the shared atomic).
  {
    const int c = tid % kTile, g = tid / kTile;
    const int r_end = min(16 * g + 16, q_last - q0 + 1);
    double acc = 0.0;
    int cur = -1;
    for (int r = 16 * g; r < r_end; ++r) {
      const int lr = p.bin_of[q0 + r] - rb0;
      if (lr != cur) {
        if (cur >= 0) atomicAdd(&rbc[cur * kTile + c], acc);
        cur = lr;
        acc = 0.0;
      }
      acc += double(ps[r * kPStride + c]);
    }
    if (cur >= 0) atomicAdd(&rbc[cur * kTile + c], acc);
  }
  __syncthreads();
  // Cells: thread (row bin lr, column quarter) sums its 16 columns per column bin.
  for (int e = tid; e < nrb * 4; e += kThreads) {
    const int lr = e / 4, part = e % 4;
    const int c_end = min(16 * part + 16, k_last - k0 + 1);
    double acc = 0.0;
    int cur = -1;
    for (int c = 16 * part; c < c_end; ++c) {
      const int lc = p.bin_of[k0 + c] - cb0;
      if (lc != cur) {
        if (cur >= 0 && acc != 0.0) atomicAdd(&p.cells[size_t(rb0 + lr) * p.bins + cb0 + cur], acc);
        cur = lc;
        acc = 0.0;
      }
      acc += rbc[lr * kTile + c];
    }
    if (cur >= 0 && acc != 0.0) atomicAdd(&p.cells[size_t(rb0 + lr) * p.bins + cb0 + cur], acc);
  }
  // Column sums.
  if (tid < kTile && k0 + tid <= k_last) {
    double acc = 0.0;
    for (int lr = 0; lr < nrb; ++lr) acc += rbc[lr * kTile + tid];
    if (acc != 0.0) atomicAdd(&p.col_sum[k0 + tid], acc);
  }
}

Status fail(const std::string& what) { return Status::error("launch_head_map: " + what); }

Status launched(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::success();
  return fail(std::string(kernel) + " failed to launch: " + cudaGetErrorString(e) + " (" +
              __FILE__ + ")");
}

}  // namespace

Status launch_head_map(const HeadMapProblem& p, void* stream) {
  if (p.n <= 0) return fail("n = " + std::to_string(p.n) + " (need >= 1 token)");
  if (p.n > (1 << 24)) return fail("n = " + std::to_string(p.n) + " exceeds 16777216 tokens");
  if (p.d <= 0) return fail("head dim d = " + std::to_string(p.d) + " (need >= 1)");
  if (p.bins <= 0 || p.bins > p.n)
    return fail("bins = " + std::to_string(p.bins) + " (need 1 .. n = " + std::to_string(p.n) + ")");
  if (p.sinks < 0 || p.window < 0 || p.own_window < 0)
    return fail("negative sinks / window / own window (" + std::to_string(p.sinks) + ", " +
                std::to_string(p.window) + ", " + std::to_string(p.own_window) + ")");
  if (!(p.softcap >= 0)) return fail("soft-cap must be >= 0 (0: none)");
  if (!p.q || !p.k || !p.bin_of || !p.row_max || !p.row_inv || !p.cells || !p.col_sum)
    return fail("a device pointer is null");
  const int nt = (p.n + kTile - 1) / kTile;
  if (nt > 65535) return fail("too many query tiles for the grid");
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaMemsetAsync(p.cells, 0, size_t(p.bins) * p.bins * sizeof(double), st);
  if (e == cudaSuccess) e = cudaMemsetAsync(p.col_sum, 0, size_t(p.n) * sizeof(double), st);
  if (e != cudaSuccess) return fail(std::string("cudaMemsetAsync: ") + cudaGetErrorString(e));
  const cudaError_t attr = cudaFuncSetAttribute(
      head_map_cells, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kPass2Smem));
  if (attr != cudaSuccess)
    return fail(std::string("head_map_cells shared memory attribute: ") + cudaGetErrorString(attr));
  head_map_rows<<<nt, kThreads, 0, st>>>(p);
  if (Status s = launched("head_map_rows"); !s) return s;
  head_map_cells<<<dim3(nt, nt), kThreads, kPass2Smem, st>>>(p);
  return launched("head_map_cells");
}

}  // namespace sinkscope::kernels
