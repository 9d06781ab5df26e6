// SPDX-License-Identifier: Apache-2.0
// The memory floor of a decode launch, for bench_attention: a kernel that only streams `bytes`
// from device memory (16-byte L2-cached loads, 4 CTAs of 256 threads per SM, grid-stride) and
// keeps the result alive with a conditional store. Launched with PDL like the decode kernels, so
// its graph-replayed time per launch is what reading the same K + V costs with no attention
// arithmetic, no page table and no combine.
#include "kernels/attention_common.cuh"
#include "kernels/attention_decode.cuh"
#include "kernels/pdl.cuh"
#include "tests/gpu/bench_floor.h"

#include <cooperative_groups.h>
#include <cstdio>

namespace sinkscope::bench {
namespace {

__global__ void __launch_bounds__(256) read_floor_kernel(const uint4* src, uint64_t n16, unsigned* sink) {
  kernels::detail::pdl_wait();
  kernels::detail::pdl_trigger();
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  uint32_t acc = 0;
  uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    const uint4 a = __ldcg(src + i), b = __ldcg(src + i + stride), c = __ldcg(src + i + 2 * stride),
                d = __ldcg(src + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n16; i += stride) {
    const uint4 a = __ldcg(src + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // practically never: keeps the loads
}

}  // namespace

cudaError_t launch_read_floor(const void* src, uint64_t bytes, unsigned* sink, int n_sms,
                              cudaStream_t stream) {
  return kernels::detail::launch_pdl(true, read_floor_kernel, dim3(4 * n_sms), dim3(256), 0, stream,
                                     static_cast<const uint4*>(src), bytes / 16, sink);
}

// ---- The stream floor of the split decode (bench_attention --decode-floors) ----
// The decode's data movement without its arithmetic: CTA (split s, KV head h) streams the K + V
// tiles [t0, t1) of its head (one tile = 64 keys of K and of V, 256 * D bytes) through a
// shared-memory ring of `STAGES` tiles with cp.async, 128 threads, the first STAGES - 1 tiles
// issued before griddepcontrol.wait except the tile holding the newest key -- the decode
// kernel's schedule (attention_decode.cuh, kEarly) on the decode's split plan -- and then does
// nothing but keep the bytes alive: no decode on this plan and schedule can be faster.
namespace {

using kernels::detail::cp_async16;
using kernels::detail::cp_async_commit;
using kernels::detail::smem_u32;

constexpr int kFloorThreads = 128;

// The dynamic shared-memory opt-in of one kernel (and, for clusters of 16, the non-portable
// cluster size), done once per process.
template <auto Kernel>
cudaError_t smem_opt_in(int smem, bool non_portable_cluster = false) {
  static const cudaError_t e = [&] {
    cudaError_t r = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (r == cudaSuccess && non_portable_cluster)
      r = cudaFuncSetAttribute(Kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return r;
  }();
  return e;
}

// The split's K + V stream (the decode's ring and early-load schedule); returns a value that
// depends on every byte. PART (SplitStreamArgs::part, a template parameter so that the copy
// loops unroll): 0 K and V of every tile; 1 K only (the sparse decode's pass 1); 2 V of the kept
// tiles only (its pass 2: tile t kept when 3 t % 10 < 3, i.e. 70 % skipped, spread so that no
// split keeps more than ceil(0.3 x its tiles)), all copies after griddepcontrol.wait (the
// decisions come from pass 1).
template <int D, int STAGES, int PART>
__device__ __forceinline__ uint32_t stream_split(const SplitStreamArgs& a, uint8_t* ring) {
  constexpr int kTile = 256 * D;  // bytes of K + V per 64-key tile (K first, then V)
  constexpr int kMaxKept = 256;
  __shared__ int kept[kMaxKept];  // part 2: the split's kept tiles
  __shared__ int n_kept;
  const int s = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int t0 = s * a.tiles_per_split;
  const int nt_all = max(0, min(a.tiles_per_split, a.n_tiles - t0));
  constexpr int kBytes = PART == 0 ? kTile : kTile / 2, kOff = PART == 2 ? kTile / 2 : 0;
  constexpr int kPer = kBytes / 16 / kFloorThreads;  // 16-byte copies per thread and tile
  int nt = nt_all;
  if constexpr (PART == 2) {
    if (tid == 0) {
      int k = 0;
      for (int i = 0; i < nt_all && k < kMaxKept; ++i)
        if ((3 * (t0 + i)) % 10 < 3) kept[k++] = i;
      n_kept = k;
    }
    __syncthreads();
    nt = n_kept;
  }
  const uint8_t* src = static_cast<const uint8_t*>(a.kv) + (int64_t(h) * a.n_tiles + t0) * kTile + kOff;
  auto issue = [&](int i) {
    const uint32_t dst = smem_u32(ring + (i % STAGES) * kTile);
    const int64_t ti = PART == 2 ? kept[i] : i;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int c = j * kFloorThreads + tid;
      cp_async16(dst + c * 16, src + ti * kTile + c * 16);
    }
  };
  const int n_pre =
      PART == 2 ? 0 : min(min(STAGES - 1, nt), max(0, (a.n_tiles - 1) - t0));
  for (int i = 0; i < n_pre; ++i) {
    issue(i);
    cp_async_commit();
  }
  kernels::detail::pdl_wait();
  kernels::detail::pdl_trigger();
  int issued = n_pre;
  for (; issued < min(nt, STAGES - 1); ++issued) {
    issue(issued);
    cp_async_commit();
  }
  for (int i = issued; i < STAGES - 1; ++i) cp_async_commit();  // a fixed group count
  uint32_t acc = 0;
  for (int i = 0; i < nt; ++i) {
    if (i + STAGES - 1 < nt) issue(i + STAGES - 1);
    cp_async_commit();
    kernels::detail::cp_async_wait<STAGES - 1>();
    __syncthreads();
    const uint4* t = reinterpret_cast<const uint4*>(ring + (i % STAGES) * kTile);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const uint4 v = t[j * kFloorThreads + tid];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __syncthreads();
  }
  return acc;
}

// This split's partial as the decode writes it (workspace layout of
// kernels::decode_workspace_layout; G query heads of D floats, then (m, l) per head).
template <int D>
__device__ __forceinline__ void write_partial(const SplitStreamArgs& a, uint32_t acc) {
  const int s = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  for (int c = tid; c < a.group * D; c += kFloorThreads) {
    const int q = h * a.group + c / D;
    a.part_o[(int64_t(q) * a.n_splits + s) * D + c % D] = float(acc & 0xffu);
  }
  if (tid < a.group)
    reinterpret_cast<float2*>(a.part_ml)[int64_t(h * a.group + tid) * a.n_splits + s] =
        make_float2(float(acc & 7u), 1.f);
}

template <int D, int STAGES, int PART>
__global__ void __launch_bounds__(kFloorThreads) split_stream_kernel(SplitStreamArgs a) {
  extern __shared__ __align__(128) uint8_t ring[];
  const uint32_t acc = stream_split<D, STAGES, PART>(a, ring);
  if (acc == 0x9e3779b9u) *a.sink = acc;  // practically never: keeps the loads
  if (a.part_o) write_partial<D>(a, acc);
}

// The one-kernel reduction structure (split_stream_ticket): the stream, the partial, then an
// arrival ticket per KV head (__threadfence + atomicAdd, monotonic across launches: launch e of
// a head owns tickets [e n, (e + 1) n)). The last `tail_ctas` arrivals of a head wait until all
// n partials are in, then each merges its slice of the
// head's G x D output columns the way the combine does (max of the split maxima, weights
// 2^(m - M), weighted sums of the partials through L2) and writes the output. tail_ctas = 1 is the
// classic last-block reduction; more spreads the merge's L2 reads over several SMs. The spin
// ends: at most tail_ctas x KV heads CTAs spin, far fewer than the grid's resident slots, so
// the CTAs they wait for still get an SM as others exit; and a successor's CTAs (PDL) take
// slots only once every CTA of this grid has executed launch_dependents, i.e. has started.
constexpr int kTicketMaxSplits = 256;
template <int D, int STAGES>
__global__ void __launch_bounds__(kFloorThreads) split_stream_ticket_kernel(SplitStreamArgs a) {
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ unsigned s_ticket;
  __shared__ float s_w[4][kTicketMaxSplits];  // G <= 4
  __shared__ float s_den[4];
  __shared__ float s_red[kFloorThreads];
  const uint32_t acc = stream_split<D, STAGES, 0>(a, ring);
  if (acc == 0x9e3779b9u) *a.sink = acc;
  write_partial<D>(a, acc);
  __syncthreads();
  const int h = blockIdx.y, tid = threadIdx.x, n = a.n_splits, G = a.group;
  if (tid == 0) {
    __threadfence();
    s_ticket = atomicAdd(a.tickets + h, 1u);
  }
  __syncthreads();
  const unsigned t = s_ticket;
  const int pos = int(t % unsigned(n)), tail = min(a.tail_ctas, n);
  if (pos < n - tail) return;
  if (tid == 0) {
    const unsigned target = (t / unsigned(n) + 1) * unsigned(n);
    unsigned v;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(a.tickets + h) : "memory");
    } while (int(v - target) < 0);
  }
  __syncthreads();
  // Weights: warp g < G reduces head g's split maxima and row sums.
  const int warp = tid >> 5, lane = tid & 31;
  const float2* ml = reinterpret_cast<const float2*>(a.part_ml);
  if (warp < G) {
    const int q = h * G + warp;
    float m = -INFINITY;
    for (int s = lane; s < n; s += 32) {
      const float2 v = __ldcg(ml + int64_t(q) * n + s);
      s_w[warp][s] = v.x;
      m = fmaxf(m, v.x);
    }
    for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float den = 0;
    for (int s = lane; s < n; s += 32) {
      const float w = exp2f(s_w[warp][s] - m);
      s_w[warp][s] = w;
      den += w * __ldcg(ml + int64_t(q) * n + s).y;
    }
    for (int o = 16; o; o >>= 1) den += __shfl_xor_sync(0xffffffffu, den, o);
    if (lane == 0) s_den[warp] = den;
  }
  __syncthreads();
  // This CTA's slice of the G * D columns; threads = (column, split group).
  const int ncol = G * D, k = pos - (n - tail);
  const int per = (ncol + tail - 1) / tail, c0 = k * per, c1 = min(ncol, c0 + per);
  const int cw = c1 - c0;
  if (cw <= 0) return;
  const int groups = max(1, kFloorThreads / cw);
  for (int cb = 0; cb < cw; cb += kFloorThreads) {
    const int cl = cb + tid % min(cw, kFloorThreads), sg = tid / min(cw, kFloorThreads);
    float num = 0;
    const bool act = sg < groups && cl < cw;
    if (act) {
      const int c = c0 + cl, g = c / D, q = h * G + g;
      const float* po = a.part_o + int64_t(q) * n * D + c % D;
      float x[8];
      for (int s0 = sg; s0 < n; s0 += 8 * groups) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int s = s0 + u * groups;
          x[u] = s < n ? __ldcg(po + int64_t(s) * D) : 0.f;
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int s = s0 + u * groups;
          if (s < n) num += x[u] * s_w[g][s];
        }
      }
    }
    s_red[tid] = num;
    __syncthreads();
    if (act && sg == 0) {
      float sum = 0;
      for (int j = 0; j < groups; ++j) sum += s_red[j * min(cw, kFloorThreads) + tid];
      const int c = c0 + cl, g = c / D;
      a.out[int64_t(h * G + g) * D + c % D] = sum / s_den[g];
    }
    __syncthreads();
  }
}

template <int D, int STAGES, int PART>
cudaError_t launch_split_stream_p(const SplitStreamArgs& a, cudaStream_t stream) {
  constexpr int smem = STAGES * 256 * D;
  constexpr auto kernel = split_stream_kernel<D, STAGES, PART>;
  if (const cudaError_t e = smem_opt_in<kernel>(smem); e != cudaSuccess) return e;
  return kernels::detail::launch_pdl(true, kernel, dim3(a.n_splits, a.n_kv_heads),
                                     dim3(kFloorThreads), smem, stream, a);
}
template <int D, int STAGES>
cudaError_t launch_split_stream_t(const SplitStreamArgs& a, cudaStream_t stream) {
  if (a.part == 0) return launch_split_stream_p<D, STAGES, 0>(a, stream);
  if (a.part == 1) return launch_split_stream_p<D, STAGES, 1>(a, stream);
  if (a.part == 2) return launch_split_stream_p<D, STAGES, 2>(a, stream);
  return cudaErrorInvalidValue;
}

template <int D, int STAGES>
cudaError_t launch_split_stream_ticket_t(const SplitStreamArgs& a, cudaStream_t stream) {
  constexpr int smem = STAGES * 256 * D;
  constexpr auto kernel = split_stream_ticket_kernel<D, STAGES>;
  if (const cudaError_t e = smem_opt_in<kernel>(smem); e != cudaSuccess) return e;
  return kernels::detail::launch_pdl(true, kernel,
                                     dim3(a.n_splits, a.n_kv_heads), dim3(kFloorThreads), smem,
                                     stream, a);
}

}  // namespace

cudaError_t launch_split_stream_ticket(SplitStreamArgs a, const kernels::AttentionParams& p,
                                       const kernels::DecodeWorkspaceLayout& wl, cudaStream_t stream) {
  a.part_o = reinterpret_cast<float*>(static_cast<uint8_t*>(p.workspace) + wl.part_o);
  a.part_ml = reinterpret_cast<float*>(static_cast<uint8_t*>(p.workspace) + wl.part_ml);
  a.group = p.n_q_heads / p.n_kv_heads;
  if (!a.tickets || !a.out || a.tail_ctas < 1 || a.group > 4 || a.n_splits > kTicketMaxSplits)
    return cudaErrorInvalidValue;
  if (a.head_dim == 64) return launch_split_stream_ticket_t<64, 4>(a, stream);
  if (a.head_dim == 128) return launch_split_stream_ticket_t<128, 3>(a, stream);
  return cudaErrorInvalidValue;
}

// ---- The cluster floor (cluster_stream): one thread-block cluster per KV head ----
// Cluster (C CTAs, one per SM) h streams all tiles of KV head h: CTA rank r takes the r-th
// contiguous 1/C of them through a deep ring of STAGES tiles filled by one thread with 1-D bulk
// copies (cp.async.bulk, one per tile, completing a per-slot mbarrier); the whole ring (STAGES
// tiles, 192 KB: deeper than the decode's STAGES - 1 early tiles, which favours this floor) is
// issued before griddepcontrol.wait, except the tile holding the newest key. Then each CTA puts a
// partial (G x D values, G maxima and row sums) in its shared memory, the cluster syncs, rank 0
// merges the C partials over distributed shared memory the way the combine does and writes the
// output, and the cluster syncs again (a CTA's shared memory lives only as long as the CTA).
// No L2 round trip, no atomic and no second kernel in the reduction: how fast one kernel per
// decode could be if a head's splits all fit one cluster.
namespace {

__device__ __forceinline__ void fl_mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fl_mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void fl_bulk_load(uint32_t dst, const void* src, uint32_t bytes,
                                             uint32_t bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

template <int D, int STAGES>
__global__ void __launch_bounds__(kFloorThreads) cluster_stream_kernel(SplitStreamArgs a) {
  constexpr int kTile = 256 * D;
  constexpr int kPer = kTile / 16 / kFloorThreads;
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ __align__(8) uint64_t full[STAGES];
  __shared__ float part[4 * D + 8];  // [G][D] values, then G maxima, G row sums (G <= 4)
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int r = int(cluster.block_rank()), C = int(cluster.num_blocks());
  const int h = blockIdx.y, tid = threadIdx.x, G = a.group;
  const int per = (a.n_tiles + C - 1) / C, t0 = r * per;
  const int nt = max(0, min(per, a.n_tiles - t0));
  const uint8_t* src = static_cast<const uint8_t*>(a.kv) + (int64_t(h) * a.n_tiles + t0) * kTile;
  if (tid == 0) {
    for (int i = 0; i < STAGES; ++i) fl_mbar_init(smem_u32(&full[i]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  auto issue = [&](int i) {
    fl_bulk_load(smem_u32(ring + (i % STAGES) * kTile), src + int64_t(i) * kTile, kTile,
                 smem_u32(&full[i % STAGES]));
  };
  const int n_pre = min(min(STAGES, nt), max(0, (a.n_tiles - 1) - t0));
  if (tid == 0)
    for (int i = 0; i < n_pre; ++i) issue(i);
  kernels::detail::pdl_wait();
  kernels::detail::pdl_trigger();
  if (tid == 0)
    for (int i = n_pre; i < min(STAGES, nt); ++i) issue(i);
  uint32_t acc = 0;
  for (int i = 0; i < nt; ++i) {
    fl_mbar_wait(smem_u32(&full[i % STAGES]), (i / STAGES) & 1);
    const uint4* t = reinterpret_cast<const uint4*>(ring + (i % STAGES) * kTile);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const uint4 v = t[j * kFloorThreads + tid];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __syncthreads();  // slot i consumed by every thread
    if (tid == 0 && i + STAGES < nt) issue(i + STAGES);
  }
  if (acc == 0x9e3779b9u) *a.sink = acc;
  for (int c = tid; c < G * D; c += kFloorThreads) part[c] = float(acc & 0xffu);
  if (tid < G) {
    part[G * D + tid] = float(acc & 7u);
    part[G * D + G + tid] = 1.f;
  }
  cluster.sync();
  if (r == 0) {
    for (int c = tid; c < G * D; c += kFloorThreads) {
      const int g = c / D;
      float m = -INFINITY;
      for (int q = 0; q < C; ++q) m = fmaxf(m, cluster.map_shared_rank(part, q)[G * D + g]);
      float num = 0, den = 0;
      for (int q = 0; q < C; ++q) {
        const float* rp = cluster.map_shared_rank(part, q);
        const float w = exp2f(rp[G * D + g] - m);
        num += w * rp[c];
        den += w * rp[G * D + G + g];
      }
      a.out[int64_t(h * G + g) * D + c % D] = num / den;
    }
  }
  cluster.sync();
}

template <int D, int STAGES>
cudaError_t launch_cluster_stream_t(const SplitStreamArgs& a, int cluster_ctas, cudaStream_t stream) {
  constexpr int smem = STAGES * 256 * D;
  constexpr auto kernel = cluster_stream_kernel<D, STAGES>;
  if (const cudaError_t e = smem_opt_in<kernel>(smem, true); e != cudaSuccess) return e;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(cluster_ctas, a.n_kv_heads);
  cfg.blockDim = dim3(kFloorThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute at[2];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = cluster_ctas;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  const int n_attrs = kernels::pdl_enabled() ? 2 : 1;  // SINKSCOPE_PDL=0: clusters, no PDL
  cfg.numAttrs = n_attrs;
  static bool told[2] = {false, false};
  if (!told[cluster_ctas == 16]) {  // how many such clusters the GPU runs at once
    int n = -1;
    cfg.numAttrs = 1;
    if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) (void)cudaGetLastError();
    cfg.numAttrs = n_attrs;
    std::printf("# cluster_stream d=%d: %d CTAs per cluster, %d KB shared each, %d clusters "
                "resident at once (%d needed)\n",
                D, cluster_ctas, smem / 1024, n, a.n_kv_heads);
    told[cluster_ctas == 16] = true;
  }
  return cudaLaunchKernelEx(&cfg, kernel, a);
}

}  // namespace

cudaError_t launch_cluster_stream(SplitStreamArgs a, int cluster_ctas, int group, cudaStream_t stream) {
  a.group = group;
  if (!a.out || group > 4 || (cluster_ctas != 8 && cluster_ctas != 16)) return cudaErrorInvalidValue;
  if (a.head_dim == 64) return launch_cluster_stream_t<64, 12>(a, cluster_ctas, stream);   // 192 KB
  if (a.head_dim == 128) return launch_cluster_stream_t<128, 6>(a, cluster_ctas, stream);  // 192 KB
  return cudaErrorInvalidValue;
}

cudaError_t launch_sparse_stream_combine(SplitStreamArgs a, const kernels::AttentionParams& p,
                                         const kernels::DecodeSplitPlan& plan,
                                         const kernels::DecodeWorkspaceLayout& wl,
                                         cudaStream_t stream) {
  SplitStreamArgs k = a;  // pass 1: every K, no partial
  k.part = 1;
  k.part_o = k.part_ml = nullptr;
  if (const cudaError_t e = launch_split_stream(k, stream); e != cudaSuccess) return e;
  a.part = 2;  // pass 2: V of the kept tiles, the partials, then the decode's combine
  return launch_split_stream_combine(a, p, plan, wl, stream);
}

cudaError_t launch_split_stream(const SplitStreamArgs& a, cudaStream_t stream) {
  if (a.head_dim == 64) return launch_split_stream_t<64, 4>(a, stream);    // the decode's rings
  if (a.head_dim == 128) return launch_split_stream_t<128, 3>(a, stream);  // (DecodeCfg::STAGES)
  return cudaErrorInvalidValue;
}

cudaError_t launch_split_stream_combine(SplitStreamArgs a, const kernels::AttentionParams& p,
                                        const kernels::DecodeSplitPlan& plan,
                                        const kernels::DecodeWorkspaceLayout& wl,
                                        cudaStream_t stream) {
  a.part_o = reinterpret_cast<float*>(static_cast<uint8_t*>(p.workspace) + wl.part_o);
  a.part_ml = reinterpret_cast<float*>(static_cast<uint8_t*>(p.workspace) + wl.part_ml);
  a.group = p.n_q_heads / p.n_kv_heads;
  if (const cudaError_t e = launch_split_stream(a, stream); e != cudaSuccess) return e;
  auto combine = a.head_dim == 64 ? kernels::detail::attention_decode_combine_kernel<64>
                                  : kernels::detail::attention_decode_combine_kernel<128>;
  return kernels::detail::launch_pdl(true, combine, dim3(p.n_q_heads),
                                     dim3(kernels::detail::kCombineThreads), 0, stream, p, plan, wl);
}

}  // namespace sinkscope::bench
