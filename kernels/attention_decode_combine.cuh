// SPDX-License-Identifier: Apache-2.0
// The split decode's separate combine kernel: merges each query head's split partials from the
// decode workspace (attention_decode.cuh writes them), bit for bit as the fused merge.
#pragma once

#include "kernels/attention_decode_common.cuh"

namespace sinkscope::kernels::detail {

// Merges the splits of each query head: O = sum_s 2^(m_s - M) o_s / sum_s 2^(m_s - M) l_s, in
// the order of decode_combine_one (its output is the same bit for bit). One CTA per query head,
// kCombineThreads threads: thread (group g, column d) sums the splits s = g, g + groups, ...;
// the (m, l) pairs of all splits are loaded at once across the block and their weights
// 2^(m_s - M) computed once per split into shared memory; each thread's partial outputs are
// loaded kCombineBatch at a time before they are summed.
constexpr int kCombineMaxSplits = 1024;  // more (not seen: 2 CTAs per SM): decode_combine_one
constexpr int kCombineBatch = 32;
template <int D>
__global__ void __launch_bounds__(kCombineThreads) attention_decode_combine_kernel(
    const AttentionParams p, const DecodeSplitPlan plan, const DecodeWorkspaceLayout wl) {
  pdl_wait();
  pdl_trigger();
  constexpr int NG = kCombineGroups<D>;
  const int h = blockIdx.x, tid = threadIdx.x, d = tid % D, grp = tid / D;
  const float* ws = static_cast<const float*>(p.workspace);
  const float* ml = ws + wl.part_ml / 4 + int64_t(h) * plan.n_splits * 2;  // bound strides
  const float* po = ws + wl.part_o / 4 + int64_t(h) * plan.n_splits * D;
  const int n_splits = decode_actual_plan(p, plan, decode_visible(p)).n_splits;  // written ones
  // Learned sink (AttentionParams::sinks, log2 units; -inf none): in the max, and once in the
  // denominator (the splits start their softmax without it).
  const float sink_l2 = p.sinks != nullptr ? p.sinks[h] * kLog2e : kNegInf;
  if (n_splits > kCombineMaxSplits) {
    if (grp == 0) p.o[int64_t(h) * D + d] = decode_combine_one<D>(ml, po, n_splits, d, sink_l2);
    return;  // (no sink-mass probe on this path: more than 1024 splits are not seen)
  }
  __shared__ float sw[kCombineMaxSplits], sl[kCombineMaxSplits];
  __shared__ float red[kCombineThreads / 32];
  __shared__ float part[2][NG][D];
  // This thread's first batch of partial outputs is loaded before the (m, l) pass: the two L2
  // round trips overlap instead of following each other.
  float os[kCombineBatch];
  auto load_batch = [&](int s0) {
#pragma unroll
    for (int u = 0; u < kCombineBatch; ++u) {
      const int s = s0 + u * NG;
      os[u] = s < n_splits ? __ldcg(po + int64_t(s) * D + d) : 0.f;
    }
  };
  load_batch(grp);
  const float2* ml2 = reinterpret_cast<const float2*>(ml);
  float mx = kNegInf;
  for (int s = tid; s < n_splits; s += kCombineThreads) {
    const float2 v = __ldcg(ml2 + s);
    sw[s] = v.x;
    sl[s] = v.y;
    mx = fmaxf(mx, v.x);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  if ((tid & 31) == 0) red[tid >> 5] = mx;
  __syncthreads();
  float mmax = fmaxf(red[0], sink_l2);
#pragma unroll
  for (int w = 1; w < kCombineThreads / 32; ++w) mmax = fmaxf(mmax, red[w]);
  for (int s = tid; s < n_splits; s += kCombineThreads) {
    const float m = sw[s];
    sw[s] = m == kNegInf ? 0.f : fast_exp2(m - mmax);  // a split whose tiles all skipped
  }
  __syncthreads();
  float num = 0.f, den = 0.f;
  for (int s0 = grp; s0 < n_splits; s0 += NG * kCombineBatch) {
    if (s0 != grp) load_batch(s0);
#pragma unroll
    for (int u = 0; u < kCombineBatch; ++u) {
      const int s = s0 + u * NG;
      if (s < n_splits) {
        num = fmaf(sw[s], os[u], num);  // explicit: decode_combine_one's form
        den = fmaf(sw[s], sl[s], den);
      }
    }
  }
  if (grp > 0) {
    part[0][grp][d] = num;
    part[1][grp][d] = den;
  }
  __syncthreads();
  if (grp != 0) return;
#pragma unroll
  for (int g = 1; g < NG; ++g) {
    num += part[0][g][d];
    den += part[1][g][d];
  }
  if (sink_l2 != kNegInf) {
    const float ps = fast_exp2(sink_l2 - mmax);
    den += ps;
    if (d == 0 && p.sink_mass != nullptr) atomicAdd(p.sink_mass + h, double(ps / den));
  }
  p.o[int64_t(h) * D + d] = decode_normalise(num, den);
}

}  // namespace sinkscope::kernels::detail
