// SPDX-License-Identifier: Apache-2.0
// Decode attention, what the split decode kernel (attention_decode.cuh) and the split combine
// (attention_decode_combine.cuh) share: the CTA shape, the fused combine's arrival counters, the
// bit-exact normalisation and merge of split partials, the decode configuration per head dim /
// tile / mode, and the device-side replanning of a graph-replayed length.
#pragma once


#include <cuda_fp16.h>

#include "kernels/attention_common.cuh"
#include "kernels/attention_dispatch.h"
#include "kernels/attention_params.h"
#include "kernels/pdl.cuh"

namespace sinkscope::kernels::detail {

constexpr int kDecodeWarps = 4;

// Fused combine (opt-in, GpuTuning::decode_fused_combine; the separate combine kernel is the default):
// after writing its partials each split CTA bumps an arrival counter of its KV head; the last
// CTA to arrive (of the ACTUAL splits) merges the group's heads with exactly the arithmetic and
// order of attention_decode_combine_kernel, then resets the counter to 0 for the next launch.
// The counters are module globals (zero at load). Launches that run decode kernels concurrently
// on several streams must use the separate combine (launches on one stream, as the backend's,
// are serialised; a PDL successor does nothing before griddepcontrol.wait).
constexpr int kDecodeCounterSlots = 1024;  // KV heads per launch with the fused combine
__device__ unsigned int g_decode_arrivals[kDecodeCounterSlots];

// O = num / den as bf16 bits, one expression for the combine kernel and both fused merges (so
// the three stay equal bit for bit). den == 0: no visible key (a device length of 0; only the
// separate combine writes zeros then: with the fused combine no split CTA runs, and the output
// keeps what it held). A NaN row sum (a NaN in the cache) stays NaN: `den > 0 ? num / den : 0`
// turned it into zeros, which hid corrupt input.
__device__ __forceinline__ uint16_t decode_normalise(float num, float den) {
  const __nv_bfloat16 v = __float2bfloat16_rn(den == 0.f ? 0.f : num / den);
  return *reinterpret_cast<const uint16_t*>(&v);
}

// O[h][d] from the splits' partials: O = sum_s 2^(m_s - M) o_s / sum_s 2^(m_s - M) l_s.
// Summation order (shared by the combine kernel and the fused tail, so they are equal bit for
// bit): kCombineGroups<D> interleaved groups (split s in group s % groups), each summed in split
// order from 0, then the groups' sums added in group order. The combine kernel runs the groups
// on separate threads, so a head's partials are loaded in one or two rounds instead of one L2
// round trip per 16-32 splits (which made the combine of 86 splits as long as the d = 64 decode
// kernel itself).
// Loads bypass L1 (__ldcg): in the fused tail the partials were written by other CTAs.
constexpr int kCombineThreads = 256;
template <int D>
inline constexpr int kCombineGroups = kCombineThreads / D;  // 4 (d = 64), 2 (d = 128)
constexpr int kCombineUnroll = 16;
template <int D>
__device__ __forceinline__ uint16_t decode_combine_one(const float* ml, const float* po,
                                                       int n_splits, int d,
                                                       float sink_l2 = kNegInf) {
  constexpr int U = kCombineUnroll, NG = kCombineGroups<D>;
  const float2* ml2 = reinterpret_cast<const float2*>(ml);  // (m, l) pairs, 8-byte aligned
  // A learned sink (log2 units; -inf none) joins the max and, once, the denominator.
  float mmax = sink_l2;
  int s = 0;
  for (; s + U <= n_splits; s += U) {
    float m[U];
#pragma unroll
    for (int u = 0; u < U; ++u) m[u] = __ldcg(ml + 2 * (s + u));
#pragma unroll
    for (int u = 0; u < U; ++u) mmax = fmaxf(mmax, m[u]);
  }
  for (; s < n_splits; ++s) mmax = fmaxf(mmax, __ldcg(ml + 2 * s));
  float num = 0.f, den = 0.f;
#pragma unroll 1
  for (int grp = 0; grp < NG; ++grp) {
    float gn = 0.f, gd = 0.f;
    for (s = grp; s < n_splits; s += NG) {
      const float2 ml_s = __ldcg(ml2 + s);
      const float w = ml_s.x == kNegInf ? 0.f : fast_exp2(ml_s.x - mmax);  // all tiles skipped
      gn = fmaf(w, __ldcg(po + int64_t(s) * D + d), gn);  // explicit: the combine kernel's form
      gd = fmaf(w, ml_s.y, gd);
    }
    if (grp == 0) {
      num = gn;
      den = gd;
    } else {
      num += gn;
      den += gd;
    }
  }
  if (sink_l2 != kNegInf) den += fast_exp2(sink_l2 - mmax);
  return decode_normalise(num, den);
}

// The fused combine's merge, run with all kDecodeWarps * 32 threads of the last split CTA of KV
// head kvh: the outputs of the group's G query heads from the n actual splits' partials, with
// exactly the arithmetic and order of attention_decode_combine_kernel (so the outputs are equal
// bit for bit), but with the loads issued together instead of one dependent L2 round trip per
// split (decode_combine_one, the serial form, whose round trips cost more than a separate
// kernel): the (m, l) pairs of all G x n (head, split) into shared memory, then per
// task (head, split group, 4 columns) one thread loads the group's partials as float4 in
// batches of kMergeBatch. `sm` needs decode_merge_smem_bytes<D>(G, n) bytes (its last 8 floats
// are the per-head maxima: G <= 8, as everywhere in this kernel, where lane / 4 is the head).
constexpr int kMergeBatch = 12;
template <int D>
__host__ __device__ constexpr int decode_merge_smem_bytes(int G, int n) {
  return (2 * G * n + G * kCombineGroups<D> * (D + 1) + 8) * 4;
}
template <int D>
__device__ __forceinline__ void decode_fused_merge(const float* ws, uint16_t* out, uint64_t part_o,
                                                uint64_t part_ml, int stride_splits, int kvh, int G,
                                                int n, float* sm) {
  constexpr int NG = kCombineGroups<D>, NT = kDecodeWarps * 32, B = kMergeBatch;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float2* ml2 = reinterpret_cast<const float2*>(ws + part_ml / 4);  // [head][split]
  const float* po = ws + part_o / 4;                                       // [head][split][D]
  float* sw = sm;                    // [G][n] m, then the weights 2^(m - M)
  float* sl = sw + G * n;            // [G][n] l
  float* pn = sl + G * n;            // [G][NG][D] group sums of the outputs
  float* pd = pn + G * NG * D;       // [G][NG] group sums of the weighted l
  float* mx = pd + G * NG;           // [G] (<= 8) per-head max
  for (int i = tid; i < G * n; i += NT) {
    const int gg = i / n, sp = i - gg * n;
    const float2 v = __ldcg(ml2 + int64_t(kvh * G + gg) * stride_splits + sp);
    sw[i] = v.x;
    sl[i] = v.y;
  }
  __syncthreads();
  for (int gg = warp; gg < G; gg += kDecodeWarps) {
    float m = kNegInf;
    for (int sp = lane; sp < n; sp += 32) m = fmaxf(m, sw[gg * n + sp]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) mx[gg] = m;
  }
  __syncthreads();
  for (int i = tid; i < G * n; i += NT) {
    const float m = sw[i];
    sw[i] = m == kNegInf ? 0.f : fast_exp2(m - mx[i / n]);  // a split whose tiles all skipped
  }
  __syncthreads();
  constexpr int C4 = D / 4;
  for (int task = tid; task < G * NG * C4; task += NT) {
    const int gg = task / (NG * C4), grp = (task / C4) % NG, c4 = task % C4;
    const float4* src = reinterpret_cast<const float4*>(po + int64_t(kvh * G + gg) * stride_splits * D) + c4;
    float4 num = make_float4(0.f, 0.f, 0.f, 0.f);
    float den = 0.f;
    for (int s0 = grp; s0 < n; s0 += NG * B) {
      float4 os[B];
#pragma unroll
      for (int u = 0; u < B; ++u) {
        const int sp = s0 + u * NG;
        os[u] = sp < n ? __ldcg(src + int64_t(sp) * C4) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int u = 0; u < B; ++u) {
        const int sp = s0 + u * NG;
        if (sp < n) {
          const float w = sw[gg * n + sp];
          num.x = fmaf(w, os[u].x, num.x);  // explicit: the combine kernel's form
          num.y = fmaf(w, os[u].y, num.y);
          num.z = fmaf(w, os[u].z, num.z);
          num.w = fmaf(w, os[u].w, num.w);
          den = fmaf(w, sl[gg * n + sp], den);
        }
      }
    }
    float* dst = pn + (gg * NG + grp) * D + 4 * c4;
    dst[0] = num.x;
    dst[1] = num.y;
    dst[2] = num.z;
    dst[3] = num.w;
    if (c4 == 0) pd[gg * NG + grp] = den;
  }
  __syncthreads();
  for (int i = tid; i < G * D; i += NT) {
    const int gg = i / D, d = i - gg * D;
    float num = pn[gg * NG * D + d], den = pd[gg * NG];
#pragma unroll
    for (int grp = 1; grp < NG; ++grp) {
      num += pn[(gg * NG + grp) * D + d];
      den += pd[gg * NG + grp];
    }
    out[int64_t(kvh * G + gg) * D + d] = decode_normalise(num, den);
  }
}

template <int D, int BC, int MODE>
struct DecodeCfg {
  static constexpr int KPW = BC / kDecodeWarps;  // keys per warp per tile (16 or 32)
  static constexpr int NTW = KPW / 8;            // n8 key tiles per warp
  static constexpr int KSV = KPW / 16;           // k16 steps of P V per warp
  static constexpr int DC = D / 32;              // 16-byte K chunks per key per lane
  static constexpr int VC = D / 64;              // 16-byte V chunks per key per lane
  static constexpr int K_ITEMS = MODE == 2 ? 0 : NTW * DC;
  static constexpr int V_ITEMS = MODE == 1 ? 0 : KSV * 4 * VC;
  static constexpr int ITEMS = K_ITEMS + V_ITEMS;
  // d = 64, dense / pass 1, block 64: 4, so that a split of 3 tiles (16K keys, 3 KV heads) has
  // all of them in flight before griddepcontrol.wait (the ring's first STAGES - 1 tiles go out
  // early). (6 stages, so that 5 tiles of a split go out early, is slower at every length.)
  static constexpr int STAGES = (D == 128 && BC == 128 && MODE == 0) ? 2
                                : (D == 64 && BC == 64 && MODE != 2) ? 4
                                                                     : 3;
  static constexpr int STAGE_BYTES = kDecodeWarps * ITEMS * 32 * 16;
  static constexpr int SCORE_BYTES = MODE == 2 ? kDecodeWarps * NTW * 32 * 8 : 0;  // per stage
  static constexpr int RING_BYTES = STAGES * (STAGE_BYTES + SCORE_BYTES);
  static constexpr int FINAL_BYTES = kDecodeWarps * 8 * D * 4 + kDecodeWarps * 8 * 4;
  static constexpr int UNION_BYTES = RING_BYTES > FINAL_BYTES ? RING_BYTES : FINAL_BYTES;
  // MODE 2 bookkeeping: tile maxima + per-head skip flags + work list for up to
  // kDecodeMaxTilesPerSplit tiles.
  static constexpr int LIST_BYTES =
      MODE == 2 ? kDecodeMaxTilesPerSplit * (8 * 4 + 8 + 2 + 1) + 64 : 0;
  // + the split's page ids and, for a live-page list, their first positions
  // (kDecodeMaxTilesPerSplit int32 each), read once up front.
  static constexpr int SMEM = UNION_BYTES + 2 * kDecodeWarps * 8 * 4 + LIST_BYTES +
                              2 * kDecodeMaxTilesPerSplit * 4;
};

// Tiles of a live-page list (AttentionParams::tile_pos0): host count, or *n_tiles_dev clamped
// to [0, bound].
__device__ __forceinline__ int decode_list_tiles(const AttentionParams& p) {
  if (!p.n_tiles_dev) return p.n_tiles;
  const int n = *p.n_tiles_dev;
  return n < 0 ? 0 : (n > p.n_tiles ? p.n_tiles : n);
}
// Keys the decode query sees: host length, or *kv_len_dev clamped to [0, bound]. A live-page
// list: every slot of the listed tiles (the position rule masks inside them).
__device__ __forceinline__ int64_t decode_visible(const AttentionParams& p) {
  if (p.tile_pos0) return int64_t(decode_list_tiles(p)) * p.block_size;
  if (p.kv_len_dev) {
    const int64_t l = *p.kv_len_dev;
    return l < 0 ? 0 : (l > p.kv_len ? p.kv_len : l);
  }
  return p.kv_len < p.q_start + 1 ? p.kv_len : p.q_start + 1;
}
// The split of the visible tiles this launch runs: the launch plan itself for a host length,
// else the host formula re-evaluated for the actual length (within the bound's grid).
__device__ __forceinline__ DecodeSplitPlan decode_actual_plan(const AttentionParams& p,
                                                              const DecodeSplitPlan& plan,
                                                              int64_t vis) {
  if (!p.kv_len_dev && !p.n_tiles_dev) return plan;
  return decode_split_plan_tiles(static_cast<int>((vis + p.block_size - 1) / p.block_size),
                                 plan.target, plan.target_hi, plan.min_tiles);
}

// 16-byte chunk index within a [key][D] row after the XOR swizzle (low 3 bits ^= row & 7).
__device__ __forceinline__ int dswz(int chunk, int row) {
  return (chunk & ~7) | ((chunk ^ row) & 7);
}

}  // namespace sinkscope::kernels::detail
