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

template <int D, int STAGES>
__global__ void __launch_bounds__(kFloorThreads) split_stream_kernel(SplitStreamArgs a) {
  constexpr int kTile = 256 * D;                    // bytes of K + V per 64-key tile
  constexpr int kPer = kTile / 16 / kFloorThreads;  // 16-byte copies per thread and tile
  extern __shared__ __align__(128) uint8_t ring[];
  const int s = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int t0 = s * a.tiles_per_split;
  const int nt = max(0, min(a.tiles_per_split, a.n_tiles - t0));
  const uint8_t* src = static_cast<const uint8_t*>(a.kv) + (int64_t(h) * a.n_tiles + t0) * kTile;
  auto issue = [&](int i) {
    const uint32_t dst = smem_u32(ring + (i % STAGES) * kTile);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int c = j * kFloorThreads + tid;
      cp_async16(dst + c * 16, src + int64_t(i) * kTile + c * 16);
    }
  };
  const int n_pre = min(min(STAGES - 1, nt), max(0, (a.n_tiles - 1) - t0));
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
  if (acc == 0x9e3779b9u) *a.sink = acc;  // practically never: keeps the loads
  if (!a.part_o) return;
  // With the combine: this split's partial as the decode writes it (workspace layout of
  // kernels::decode_workspace_layout; G query heads of D floats, then (m, l) per head).
  for (int c = tid; c < a.group * D; c += kFloorThreads) {
    const int q = h * a.group + c / D;
    a.part_o[(int64_t(q) * a.n_splits + s) * D + c % D] = float(acc & 0xffu);
  }
  if (tid < a.group)
    reinterpret_cast<float2*>(a.part_ml)[int64_t(h * a.group + tid) * a.n_splits + s] =
        make_float2(0.f, 1.f);
}

template <int D, int STAGES>
cudaError_t launch_split_stream_t(const SplitStreamArgs& a, cudaStream_t stream) {
  constexpr int smem = STAGES * 256 * D;
  static bool attr = false;
  if (!attr) {
    const cudaError_t e = cudaFuncSetAttribute(split_stream_kernel<D, STAGES>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    attr = true;
  }
  return kernels::detail::launch_pdl(true, split_stream_kernel<D, STAGES>,
                                     dim3(a.n_splits, a.n_kv_heads), dim3(kFloorThreads), smem,
                                     stream, a);
}

}  // namespace

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
