// SPDX-License-Identifier: Apache-2.0
// Decode attention (one query token) over a paged bf16 KV cache: split-KV flash-decoding
// (https://crfm.stanford.edu/2023/10/12/flashdecoding.html). Grid = splits x KV heads; one CTA
// serves every query head of its KV group, so each K/V byte is read once.
//
// Tensor cores even here: S = Q K^T with the group's heads as the mma M rows (padded to 16) and
// keys as N; O = P V with P taken straight from the S accumulators. Shared memory holds, per
// lane, exactly the 16-byte K/V chunks its own mma fragments need (conflict-free 16-byte reads):
// the reduction dimension d is permuted consistently for Q and K (a dot product does not care
// about order), and V pairs of adjacent keys are interleaved with byte permutes. Each warp
// loads only its own key slice, so a __syncwarp (not a CTA barrier) guards the data.
//
// MODE 0 (dense): one pass. Sparse is two passes so that the decision for tile t compares with
// the max over ALL earlier tiles, exactly as the sequential contract, even across splits:
//   MODE 1: K only -> raw scores and per-tile maxima into the workspace;
//   MODE 2: per-head decisions from the tile maxima (prefix max), then V only for tiles that some
//           head of the group still needs, softmax from the stored scores. The max over the
//           tiles before the split comes from pass 1's per-split maxima (one load per earlier
//           split, 128 in flight per round).
// With lambda = 0, MODE 1+2 perform the same float operations in the same order as MODE 0.
// skip_softmax_exp = false (attention_params.h): a head's skipped tile still runs its exp() into
// the split's row sum (its P is then zeroed); a tile every head skipped stays in the work list
// for that, with its V zero-filled instead of loaded.
//
// Device-side length (AttentionParams::kv_len_dev, for CUDA graphs replayed at many positions):
// the grid and the workspace strides come from the bound `plan`; every CTA re-plans the actual
// length with decode_split_plan_tiles (the host formula), so the tile ranges, the summation
// order and the probes equal a host launch at that length. CTAs past the actual splits return
// before touching anything, and the combine reads only the actual splits.
#pragma once

#include "kernels/attention_decode_combine.cuh"  // the separate combine, launched after it
#include "kernels/attention_decode_common.cuh"
#include "kernels/visibility.h"

namespace sinkscope::kernels::detail {

// ---- quantized KV (KVB = 8 / 4, AttentionParams::kv_bits) ----
// A warp's slice of a quantized tile in its ring slot (the bf16 slot is larger, so it fits):
// [KPW keys][code bytes CB] with the 16-byte chunks of a row XOR-swizzled by the row, then
// [KPW keys][D/32] fp16 scales. Copied with 16-byte cp.async like the bf16 rows; keys that are
// not visible get zero codes (their scales are finite: written or zeroed pool memory), so a
// masked V row is exactly 0 as in the bf16 path.
template <int D, int KVB>
struct DecodeQ {
  static constexpr int CB = KVB == 8 ? D : D / 2;  // code bytes per key
  static constexpr int NCH = CB / 16;              // 16-byte code chunks per key
  static constexpr int SB = D / 32 * 2;            // scale bytes per key
};
template <int D, int KVB, int KPW, typename Ok>
__device__ __forceinline__ void decode_issue_q(uint8_t* dst, const uint8_t* codes,
                                               const uint16_t* scales, int64_t vec0, int lane,
                                               Ok ok) {
  using Q = DecodeQ<D, KVB>;
#pragma unroll
  for (int c = lane; c < KPW * Q::NCH; c += 32) {
    const int kk = c / Q::NCH, ch = c % Q::NCH;
    const bool v = ok(kk);
    cp_async16(smem_u32(dst + kk * Q::CB + ((ch ^ (kk & (Q::NCH - 1))) << 4)),
               v ? codes + (vec0 + kk) * Q::CB + ch * 16 : codes, v ? 16 : 0);
  }
  constexpr int KPC = 16 / Q::SB;  // keys per 16-byte scale chunk
#pragma unroll
  for (int c = lane; c < KPW * Q::SB / 16; c += 32) {
    bool v = false;
#pragma unroll
    for (int k = 0; k < KPC; ++k) v = v || ok(c * KPC + k);
    cp_async16(smem_u32(dst + KPW * Q::CB + c * 16),
               v ? reinterpret_cast<const uint8_t*>(scales) + (vec0 + c * KPC) * Q::SB
                 : reinterpret_cast<const uint8_t*>(scales),
               v ? 16 : 0);
  }
}
// Elements d0 .. d0+7 (d0 % 8 == 0) of key kk from a warp slice: bf16(c * scale) pairs, the
// lower element in the low half (the bf16 row's 16-byte chunk, bit for bit what the append
// kernel stores for a quantized row in a protected bf16 page).
template <int D, int KVB, int KPW>
__device__ __forceinline__ uint4 decode_deq8(const uint8_t* w, int kk, int d0) {
  using Q = DecodeQ<D, KVB>;
  const uint16_t sb = reinterpret_cast<const uint16_t*>(w + KPW * Q::CB)[kk * (D / 32) + d0 / 32];
  const float s = __half2float(__ushort_as_half(sb));
  const int byte = KVB == 8 ? d0 : d0 / 2;
  const uint8_t* row = w + kk * Q::CB + (((byte >> 4) ^ (kk & (Q::NCH - 1))) << 4) + (byte & 15);
  float f[8];
  if constexpr (KVB == 8) {
    const uint2 c = *reinterpret_cast<const uint2*>(row);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[i] = float(static_cast<int>(c.x << (24 - 8 * i)) >> 24);
      f[4 + i] = float(static_cast<int>(c.y << (24 - 8 * i)) >> 24);
    }
  } else {
    const uint32_t c = *reinterpret_cast<const uint32_t*>(row);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = float(static_cast<int>((c >> (4 * i)) & 15u) - 8);
  }
  return make_uint4(pack_bf16(f[0] * s, f[1] * s), pack_bf16(f[2] * s, f[3] * s),
                    pack_bf16(f[4] * s, f[5] * s), pack_bf16(f[6] * s, f[7] * s));
}

// LIST: the KV tiles are a live-page list with the sink/window rule (AttentionParams::tile_pos0,
// a sliding-window cache). A compile-time switch, so the full-cache kernels carry none of its
// checks, registers or loads (a run-time switch costs the long d = 128 decode about a quarter).
// KVB: the KV page format, 0 = bf16 pages, 8 / 4 = quantized (AttentionParams::kv_bits), also
// compile-time: the bf16 kernels are unchanged. Quantized tiles are dequantised in registers as
// the mma fragments are read; a tile whose page-table entry is < 0 is a protected bf16 page
// (engine/cache/kv_page_plan.h) and runs the bf16 code (a warp-uniform branch per tile).
template <int D, int BC, int MODE, bool LIST, int KVB = 0>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    attention_decode_kernel(const AttentionParams p, const DecodeSplitPlan plan,
                            const DecodeWorkspaceLayout wl, const int launch_flags) {
  // launch_flags: bit 0 the fused combine, bit 1 no early cache loads
  // (GpuTuning::decode_early_loads off).
  // PDL (kernels/pdl.cuh). The dense / pass-1 kernels over a positional bf16 cache start early
  // (kEarly): before griddepcontrol.wait they read only what their predecessor does not write
  // (the length and the page table: host copies; the cache tiles before the newest row; see
  // AttentionParams::page_table): the page ids into shared memory, then the ring's first tiles
  // (below). Everything else, and every other variant, waits first. (An L2 prefetch of the first
  // K/V tiles before the wait gains nothing: docs/performance.md, "What we tried".)
  // The V pass (MODE 2) over a positional bf16 cache fetches only its page ids early: its
  // decisions and loads need pass 1's maxima.
  constexpr bool kEarly = MODE != 2 && !LIST && KVB == 0;
  constexpr bool kEarlyPages = !LIST && KVB == 0;
  if constexpr (!kEarlyPages) {
    pdl_wait();
    pdl_trigger();
  }
  using C = DecodeCfg<D, BC, MODE>;
  extern __shared__ __align__(128) uint8_t smem_raw[];
  uint4* ring = reinterpret_cast<uint4*>(smem_raw);  // [STAGES][warp][item][lane]
  float2* sring = reinterpret_cast<float2*>(smem_raw + C::STAGES * C::STAGE_BYTES);
  float* red = reinterpret_cast<float*>(smem_raw + C::UNION_BYTES);  // [2][warp][8]
  uint8_t* list_raw = smem_raw + C::UNION_BYTES + 2 * kDecodeWarps * 8 * 4;
  float* tms = reinterpret_cast<float*>(list_raw);                           // [tile][8]
  uint8_t* flags = list_raw + kDecodeMaxTilesPerSplit * 32;                  // [tile][8]
  uint16_t* work = reinterpret_cast<uint16_t*>(flags + kDecodeMaxTilesPerSplit * 8);
  uint8_t* bits = reinterpret_cast<uint8_t*>(work + kDecodeMaxTilesPerSplit);
  int* warp_cnt = reinterpret_cast<int*>(bits + kDecodeMaxTilesPerSplit);   // [4] + total
  int32_t* pages = reinterpret_cast<int32_t*>(list_raw + C::LIST_BYTES);    // [tile in split]
  int32_t* pos0s = pages + kDecodeMaxTilesPerSplit;  // live-page list: [tile in split] positions

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int split = blockIdx.x, kvh = blockIdx.y;
  const int G = p.n_q_heads / p.n_kv_heads;
  const int h = kvh * G + g;  // this lane's query head (valid when g < G)
  const bool hval = g < G;
  const int64_t vis = decode_visible(p);
  const DecodeSplitPlan ap = decode_actual_plan(p, plan, vis);  // `plan`: grid + strides only
  if (split >= ap.n_splits) {  // past the actual length (device-side length): no work
    // An early CTA still waits once, so that this grid never completes before its predecessor
    // (with a device length of 0 every CTA returns here).
    if constexpr (kEarlyPages) pdl_wait();
    return;
  }
  const int t0 = split * ap.tiles_per_split;
  const int t1 = min(ap.n_tiles, t0 + ap.tiles_per_split);
  const int nsplit_tiles = t1 - t0;
  const float sl2 = p.scale * kLog2e;
  // Soft-capping on raw scores (AttentionParams::softcap): tanh(q.k * scale / cap) * cap / scale.
  const float cap_in = p.softcap > 0.f ? p.scale / p.softcap : 0.f;
  const float cap_out = p.softcap > 0.f ? p.softcap / p.scale : 0.f;
  float* ws = static_cast<float*>(p.workspace);
  float* ws_scores = reinterpret_cast<float*>(static_cast<uint8_t*>(p.workspace) + wl.scores);
  float* ws_tmax = reinterpret_cast<float*>(static_cast<uint8_t*>(p.workspace) + wl.tmax);
  float* ws_smax = reinterpret_cast<float*>(static_cast<uint8_t*>(p.workspace) + wl.smax);
  const int64_t score_row = int64_t(plan.n_tiles) * BC;
  const int n_kvt = static_cast<int>((p.kv_len + BC - 1) / BC);
  const bool mask_group = p.skip_mask != nullptr &&
                          (p.mask_head < 0 || (p.mask_head >= kvh * G && p.mask_head < kvh * G + G));

  // The split's page ids, fetched once: a page-table load inside the loop put an L2 round trip
  // (slow while the kernel saturates memory) in front of every tile's copies.
  for (int i = tid; i < nsplit_tiles; i += kDecodeWarps * 32) {
    pages[i] = p.page_table[t0 + i];
    if constexpr (LIST) pos0s[i] = p.tile_pos0[t0 + i];
  }
  __syncthreads();
  if constexpr (kEarlyPages && !kEarly) {
    pdl_wait();
    pdl_trigger();
  }
  // Live-page list: the sink/window rule by position (kernels/visibility.h). Slot `off` of split
  // tile i; positional tiles need only the length test (done by the callers).
  const int64_t qpos = LIST ? (p.q_pos_dev ? int64_t(*p.q_pos_dev) : p.q_start) : 0;
  auto list_ok = [&](int i, int off) {
    if constexpr (!LIST) return true;
    const int64_t k = int64_t(pos0s[i]) + off;
    return visibility::key_visible(k, qpos, p.sink_count, p.window, p.own_window);
  };
  // A live-page tile all of whose keys left the window (its page is evicted after this step),
  // or lie past the layer's own window: neither visited nor skipped in the probes, as in the CPU
  // attention (its scores are all masked, so the rule below drops it from the work either way).
  auto list_gone = [&](int i) {
    if constexpr (!LIST) return false;
    const int64_t k0 = pos0s[i];
    return !visibility::tile_in_windows(k0, k0 + BC - 1, qpos, p.sink_count, p.window,
                                        p.own_window);
  };

  // ---- issue the loads of work item i into ring stage `st` (each lane: its own chunks) ----
  auto tile_of = [&](int i) {
    if constexpr (MODE == 2) return t0 + int(work[i]);
    return t0 + i;
  };
  // Index of item i in pages / pos0s / tms: its tile within the split.
  auto slot_of = [&](int i) { return tile_of(i) - t0; };
  // Each warp instruction copies 512 contiguous bytes (whole 128-byte lines) into 512 contiguous
  // shared bytes: the warp's K (and V) rows, [key][d] with the 16-byte chunks XOR-swizzled by
  // (row & 7). Scattering the chunks straight into per-lane fragment slots makes the copy engine
  // split the requests (about 1.2 sectors per L2 request), far from DRAM speed.
  auto issue = [&](int i, int st) {
    const int t = tile_of(i);
    const int sl = slot_of(i);
    const int64_t page = pages[sl];
    // Quantized formats: entry >= 0 a code page, < 0 the bf16 page -1 - entry (KVB = 0: false).
    const bool qtile = KVB != 0 && page >= 0;
    const int64_t base = ((KVB != 0 && page < 0 ? -1 - page : page) * p.n_kv_heads + kvh) * (BC * D);
    const int64_t key0 = int64_t(t) * BC + warp * C::KPW;
    constexpr int CPR = D / 8;          // 16-byte chunks per key row
    constexpr int KEYS_PER_OP = 32 / CPR;
    uint4* wbase = ring + (st * kDecodeWarps + warp) * C::ITEMS * 32;
    const int lk = lane / CPR, ch = lane % CPR;
    if (qtile) {
      if constexpr (KVB != 0) {
        const int64_t vec0 = (page * p.n_kv_heads + kvh) * BC + warp * C::KPW;
        if constexpr (MODE != 2)
          decode_issue_q<D, KVB, C::KPW>(
              reinterpret_cast<uint8_t*>(wbase), p.k_codes, p.k_scales, vec0, lane,
              [&](int kk) { return key0 + kk < vis && list_ok(sl, warp * C::KPW + kk); });
        if constexpr (MODE != 1)
          decode_issue_q<D, KVB, C::KPW>(
              reinterpret_cast<uint8_t*>(wbase + C::K_ITEMS * 32), p.v_codes, p.v_scales, vec0,
              lane, [&](int kk) {
                return key0 + kk < vis && list_ok(sl, warp * C::KPW + kk) &&
                       (MODE != 2 || bits[i] != static_cast<uint8_t>((1u << G) - 1u));
              });
      }
    } else {
    if constexpr (MODE != 2) {
#pragma unroll
      for (int op = 0; op < C::K_ITEMS; ++op) {
        const int kk = op * KEYS_PER_OP + lk;  // key within the warp's slice
        const bool ok = key0 + kk < vis && list_ok(sl, warp * C::KPW + kk);
        cp_async16(smem_u32(wbase + kk * CPR + dswz(ch, kk)),
                   ok ? p.k_pages + base + (warp * C::KPW + kk) * D + ch * 8 : p.k_pages,
                   ok ? 16 : 0);
      }
    }
    if constexpr (MODE != 1) {
#pragma unroll
      for (int op = 0; op < C::V_ITEMS; ++op) {
        const int kk = op * KEYS_PER_OP + lk;
        // masked keys must be 0, not undefined (P*NaN); a tile every head skipped (kept only
        // for its exp(), skip_softmax_exp = false) reads no V: zero-filled, its P is 0.
        const bool ok = key0 + kk < vis && list_ok(sl, warp * C::KPW + kk) &&
                        (MODE != 2 || bits[i] != static_cast<uint8_t>((1u << G) - 1u));
        cp_async16(smem_u32(wbase + C::K_ITEMS * 32 + kk * CPR + dswz(ch, kk)),
                   ok ? p.v_pages + base + (warp * C::KPW + kk) * D + ch * 8 : p.v_pages,
                   ok ? 16 : 0);
      }
    }
    }  // bf16 tile
    if constexpr (MODE == 2) {
      if (hval) {
        float2* sdst = sring + (st * kDecodeWarps + warp) * C::NTW * 32 + lane;
        const float* src = ws_scores + int64_t(h) * score_row + key0 + tq * 2;
#pragma unroll
        for (int j = 0; j < C::NTW; ++j) cp_async8(smem_u32(sdst + j * 32), src + 8 * j);
      }
    }
  };

  // kEarly: the ring's first tiles are loaded before griddepcontrol.wait, so that their DRAM
  // reads overlap the predecessor's tail (in the engine the kernel that appends this step's K / V
  // row; in a sequence of decode launches the previous launch's combine). The predecessor may
  // write only the newest cache row (position vis - 1, AttentionParams::page_table), so only the
  // tiles before the one holding it are loaded early; the rest, Q and every write wait.
  int n_pre = 0;
  if constexpr (kEarly) {
    if (vis > 0 && !(launch_flags & 2)) {
      const int t_new = static_cast<int>((vis - 1) / BC);
      n_pre = min(min(C::STAGES - 1, nsplit_tiles), max(0, t_new - t0));
    }
    for (int s = 0; s < n_pre; ++s) {
      issue(s, s);
      cp_async_commit();
    }
    pdl_wait();
    pdl_trigger();
  }

  if constexpr (MODE != 1) {  // visited: this split's own tiles (the probes' partition)
    if (tid < G && p.tiles_visited) {
      int n_vis = nsplit_tiles;
      if constexpr (LIST)
        for (int i = 0; i < nsplit_tiles; ++i) n_vis -= list_gone(i);
      atomicAdd(reinterpret_cast<unsigned long long*>(p.tiles_visited + kvh * G + tid),
                static_cast<unsigned long long>(n_vis));
    }
  }

  // ---- MODE 2: decisions from the maxima of pass 1, and this CTA's work list ----
  // Work item i is tile t0 + work[i] of the split.
  int n_work = nsplit_tiles;
  if constexpr (MODE == 2) {
    const float log2_lambda = p.log2_lambda_dev ? *p.log2_lambda_dev : p.log2_lambda;
    const uint8_t all = static_cast<uint8_t>((1u << G) - 1u);
    // max(a*c, b*c) == max(a, b)*c for c > 0, so comparing the raw maxima scaled by sl2 equals
    // the running-max compare of the sequential rule; max is exact, so any grouping of the
    // running max gives the same decisions.
    // A learned sink (AttentionParams::sinks) is part of every running max (the CPU starts its
    // online softmax from it).
    // The first visited tile is never skipped (the CPU's first_visit): the first tile with a
    // visible key, i.e. the one before which no tile has a finite maximum (pm = -inf; invisible
    // keys score -inf in pass 1). It is not always list tile 0: an own window hides the sink
    // tile and the tiles before q - OW (list_gone). Without a learned sink pm = -inf never
    // skips anyway; with one, the sink alone could push the first visible tile below ln lambda.
    auto decide = [&](float tm, float pm, float sink_l2) {
      return pm > kNegInf && (tm * sl2 - fmaxf(pm * sl2, sink_l2) < log2_lambda);
    };
    auto mask_out = [&](int gg, int t, bool sk) {
      if (p.skip_mask && (p.mask_head < 0 || p.mask_head == kvh * G + gg))
        p.skip_mask[int64_t(p.mask_head < 0 ? kvh * G + gg : 0) * n_kvt + t] = sk;
    };
    // One warp per head; lane i decides tile base + i with the running max made of the max
    // before t0 and an exclusive prefix max of the tiles before it in the split (shuffles).
    // Both replace serial loops of L2 loads (one round trip per tile, or per 32 tiles of the
    // history) that stood in front of the V pass.
    for (int gg = warp; gg < G; gg += kDecodeWarps) {
      const float sink_l2 = p.sinks != nullptr ? p.sinks[kvh * G + gg] * kLog2e : kNegInf;
      const float* tm_row = ws_tmax + int64_t(kvh * G + gg) * plan.n_tiles;
      // Max over all tiles before t0 = max of the earlier splits' maxima (pass 1): every
      // split sees the same history.
      const float* sm_row = ws_smax + int64_t(kvh * G + gg) * plan.n_splits;
      float pm = kNegInf;
#pragma unroll 4
      for (int ss = lane; ss < split; ss += 32) pm = fmaxf(pm, __ldcg(sm_row + ss));
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) pm = fmaxf(pm, __shfl_xor_sync(0xffffffffu, pm, off));
      uint32_t n_skip = 0;
      for (int base = 0; base < nsplit_tiles; base += 32) {
        const int i = base + lane;
        const bool in = i < nsplit_tiles;
        const float tm = in ? __ldcg(tm_row + t0 + i) : kNegInf;
        float inc = tm;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
          const float v = __shfl_up_sync(0xffffffffu, inc, off);
          if (lane >= off) inc = fmaxf(inc, v);
        }
        const float ex = __shfl_up_sync(0xffffffffu, inc, 1);
        const float run = lane == 0 ? pm : fmaxf(pm, ex);
        const bool sk = in && decide(tm, run, sink_l2);
        if (in) {
          tms[i * 8 + gg] = tm;
          flags[i * 8 + gg] = sk;
          n_skip += sk && !list_gone(i);
          mask_out(gg, t0 + i, sk);
        }
        pm = fmaxf(pm, __shfl_sync(0xffffffffu, inc, 31));
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) n_skip += __shfl_xor_sync(0xffffffffu, n_skip, off);
      if (lane == 0 && p.tiles_skipped && n_skip)
        atomicAdd(reinterpret_cast<unsigned long long*>(p.tiles_skipped + kvh * G + gg),
                  static_cast<unsigned long long>(n_skip));
    }
    __syncthreads();
    // Compact the tiles that some head still computes into a work list (block prefix sum).
    int base_out = 0;
    for (int base = 0; base < nsplit_tiles; base += kDecodeWarps * 32) {
      const int i = base + tid;
      uint8_t b = 0;
      if (i < nsplit_tiles)
        for (int gg = 0; gg < G; ++gg) b |= flags[i * 8 + gg] << gg;
      // skip_softmax_exp = false: a tile every head skipped still runs its exp() into the row
      // sums, so it stays in the list (its V is not loaded: see issue()).
      const bool keep = i < nsplit_tiles && (b != all || !p.skip_softmax_exp);
      const unsigned ballot = __ballot_sync(0xffffffffu, keep);
      if (lane == 0) warp_cnt[warp] = __popc(ballot);
      __syncthreads();
      int off = base_out;
      for (int w = 0; w < warp; ++w) off += warp_cnt[w];
      if (keep) {
        const int pos = off + __popc(ballot & ((1u << lane) - 1u));
        work[pos] = static_cast<uint16_t>(i);
        bits[pos] = b;
      }
      for (int w = 0; w < kDecodeWarps; ++w) base_out += warp_cnt[w];
      __syncthreads();
    }
    n_work = base_out;
  } else {
    if (mask_group && tid == 0) {  // dense: every visible tile is computed
      for (int gg = 0; gg < G; ++gg)
        if (p.mask_head < 0 || p.mask_head == kvh * G + gg)
          for (int i = 0; i < nsplit_tiles; ++i)
            p.skip_mask[int64_t(p.mask_head < 0 ? kvh * G + gg : 0) * n_kvt + t0 + i] = 0;
    }
  }

  // Q fragments of this lane's head, with d permuted as the K chunks are (see issue()).
  uint4 qa[C::DC];
#pragma unroll
  for (int pc = 0; pc < C::DC; ++pc)
    qa[pc] = hval ? *reinterpret_cast<const uint4*>(p.q + int64_t(h) * D + pc * 32 + tq * 8)
                  : make_uint4(0, 0, 0, 0);

  // Cache position mode: the same fragments of the query rotated at its cache index.
  uint4 qsa[LIST ? C::DC : 1];
#pragma unroll
  for (int pc = 0; pc < (LIST ? C::DC : 0); ++pc)
    qsa[pc] = hval && p.q_sink
                  ? *reinterpret_cast<const uint4*>(p.q_sink + int64_t(h) * D + pc * 32 + tq * 8)
                  : make_uint4(0, 0, 0, 0);

  constexpr int ND = D / 8;
  float o[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
  float m_run = kNegInf, l_run = 0.f;

#pragma unroll
  for (int s = n_pre; s < C::STAGES - 1; ++s) {  // (kEarly: after the tiles issued early)
    if (s < n_work) issue(s, s);
    cp_async_commit();
  }

  for (int i = 0; i < n_work; ++i) {
    const int st = i % C::STAGES;
    __syncwarp();  // the stage refilled below was read by other lanes last iteration
    if (i + C::STAGES - 1 < n_work) issue(i + C::STAGES - 1, (i + C::STAGES - 1) % C::STAGES);
    cp_async_commit();
    cp_async_wait<C::STAGES - 1>();  // item i landed (this lane's copies) ...
    __syncwarp();                    // ... and every lane's: slots are filled across the warp
    const int t = tile_of(i);
    const int64_t key0 = int64_t(t) * BC + warp * C::KPW;
    const uint4* src = ring + (st * kDecodeWarps + warp) * C::ITEMS * 32;  // this warp's rows
    constexpr int CPR = D / 8;
    // This lane's 16-byte fragment chunks: bf16 rows, or a quantized slice dequantised here.
    const int sl = slot_of(i);
    const bool qtile = KVB != 0 && pages[sl] >= 0;
    auto kfrag = [&](int kk, int pc) -> uint4 {
      if constexpr (KVB != 0)
        if (qtile)
          return decode_deq8<D, KVB, C::KPW>(reinterpret_cast<const uint8_t*>(src), kk,
                                            32 * pc + 8 * tq);
      return src[kk * CPR + dswz(4 * pc + tq, kk)];
    };
    auto vfrag = [&](int kk, int c) -> uint4 {
      if constexpr (KVB != 0)
        if (qtile)
          return decode_deq8<D, KVB, C::KPW>(reinterpret_cast<const uint8_t*>(src + C::K_ITEMS * 32),
                                            kk, 64 * c + 8 * g);
      return src[C::K_ITEMS * 32 + kk * CPR + dswz(8 * c + g, kk)];
    };

    float s[C::NTW][4];
    float tm;
    if constexpr (MODE != 2) {
#pragma unroll
      for (int j = 0; j < C::NTW; ++j) {
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
        for (int pc = 0; pc < C::DC; ++pc) {
          const int kk = 8 * j + g;  // this lane's key; chunk 4pc+tq = d 32pc+8tq (see issue)
          const uint4 kv = kfrag(kk, pc);
          mma_bf16(s[j], qa[pc].x, 0u, qa[pc].y, 0u, kv.x, kv.y);
          mma_bf16(s[j], qa[pc].z, 0u, qa[pc].w, 0u, kv.z, kv.w);
        }
        // Scores against sink keys with the cache-index query (tile-uniform branch).
        if constexpr (LIST) {
          if (p.q_sink && pos0s[sl] < p.sink_count) {
            float ss[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int pc = 0; pc < C::DC; ++pc) {
              const int kk = 8 * j + g;
              const uint4 kv = kfrag(kk, pc);
              mma_bf16(ss, qsa[pc].x, 0u, qsa[pc].y, 0u, kv.x, kv.y);
              mma_bf16(ss, qsa[pc].z, 0u, qsa[pc].w, 0u, kv.z, kv.w);
            }
#pragma unroll
            for (int e = 0; e < 2; ++e)
              if (pos0s[sl] + warp * C::KPW + 8 * j + tq * 2 + e < p.sink_count) s[j][e] = ss[e];
          }
        }
        // Soft-capping (Gemma 2) of the raw q.k: scale * result = tanh(scale q.k / cap) * cap.
        if (p.softcap > 0.f) {
#pragma unroll
          for (int e = 0; e < 2; ++e) s[j][e] = tanhf(s[j][e] * cap_in) * cap_out;
        }
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (!hval || key0 + 8 * j + tq * 2 + e >= vis ||
              !list_ok(sl, warp * C::KPW + 8 * j + tq * 2 + e))
            s[j][e] = kNegInf;
      }
      float v = kNegInf;
#pragma unroll
      for (int j = 0; j < C::NTW; ++j) v = fmaxf(v, fmaxf(s[j][0], s[j][1]));
      v = quad_max(v);
      float* rb = red + (i & 1) * kDecodeWarps * 8;
      if (tq == 0) rb[warp * 8 + g] = v;
      __syncthreads();
      tm = fmaxf(fmaxf(rb[g], rb[8 + g]), fmaxf(rb[16 + g], rb[24 + g]));
      if constexpr (MODE == 1) {
        if (hval) {
          float* dst = ws_scores + int64_t(h) * score_row + key0 + tq * 2;
#pragma unroll
          for (int j = 0; j < C::NTW; ++j)
            *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(s[j][0], s[j][1]);
          if (warp == 0 && tq == 0) ws_tmax[int64_t(h) * plan.n_tiles + t] = tm;
        }
        m_run = fmaxf(m_run, tm);  // pass 1: the split's max (raw scores), written below
        continue;
      }
    } else {
      const float2* ssrc = sring + (st * kDecodeWarps + warp) * C::NTW * 32 + lane;
#pragma unroll
      for (int j = 0; j < C::NTW; ++j) {
        const float2 v = hval ? ssrc[j * 32] : make_float2(kNegInf, kNegInf);
        s[j][0] = v.x;
        s[j][1] = v.y;
      }
      tm = hval ? tms[sl * 8 + g] : kNegInf;
    }

    if constexpr (MODE != 1) {
      const bool hskip = MODE == 2 && ((bits[i] >> g) & 1);
      if (!hskip || !p.skip_softmax_exp) {
        const float m_new = fmaxf(m_run, tm * sl2);
        const float m_use = safe_max(m_new);
        const float alpha = fast_exp2(m_run - m_use);
        m_run = m_new;
        l_run *= alpha;
#pragma unroll
        for (int nd = 0; nd < ND; ++nd) {
          o[nd][0] *= alpha;
          o[nd][1] *= alpha;
        }
#pragma unroll
        for (int j = 0; j < C::NTW; ++j) {
          s[j][0] = fast_exp2(fmaf(s[j][0], sl2, -m_use));
          s[j][1] = fast_exp2(fmaf(s[j][1], sl2, -m_use));
          l_run += s[j][0] + s[j][1];
        }
        if (hskip)  // skip_softmax_exp = false: exp() in the row sum, no P V
#pragma unroll
          for (int j = 0; j < C::NTW; ++j) s[j][0] = s[j][1] = 0.f;
      } else {
#pragma unroll
        for (int j = 0; j < C::NTW; ++j) s[j][0] = s[j][1] = 0.f;
      }
      // O += P V. V chunk layout per lane: [ks][r: keys 2tq, 2tq+1, 8+2tq, 9+2tq][c].
#pragma unroll
      for (int ks = 0; ks < C::KSV; ++ks) {
        const uint32_t a0 = pack_bf16(s[2 * ks][0], s[2 * ks][1]);
        const uint32_t a2 = pack_bf16(s[2 * ks + 1][0], s[2 * ks + 1][1]);
#pragma unroll
        for (int c = 0; c < C::VC; ++c) {
          uint4 vr[4];
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int kk = ks * 16 + (r >> 1) * 8 + tq * 2 + (r & 1);
            vr[r] = vfrag(kk, c);
          }
          const uint32_t* w0 = reinterpret_cast<const uint32_t*>(&vr[0]);
          const uint32_t* w1 = reinterpret_cast<const uint32_t*>(&vr[1]);
          const uint32_t* w2 = reinterpret_cast<const uint32_t*>(&vr[2]);
          const uint32_t* w3 = reinterpret_cast<const uint32_t*>(&vr[3]);
#pragma unroll
          for (int jj = 0; jj < 8; ++jj) {
            const uint32_t sel = (jj & 1) ? 0x7632u : 0x5410u;
            const uint32_t b0 = __byte_perm(w0[jj >> 1], w1[jj >> 1], sel);
            const uint32_t b1 = __byte_perm(w2[jj >> 1], w3[jj >> 1], sel);
            mma_bf16(o[c * 8 + jj], a0, 0u, a2, 0u, b0, b1);
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the ring is reused below
  if constexpr (MODE == 1) {
    if (warp == 0 && tq == 0 && hval) ws_smax[int64_t(h) * plan.n_splits + split] = m_run;
    return;
  }

  // ---- combine the 4 warps (same running max, so plain sums) and write this split ----
  float* fo = reinterpret_cast<float*>(smem_raw);  // [warp][8][D]
  float* fl = fo + kDecodeWarps * 8 * D;           // [warp][8]
  const float l = quad_sum(l_run);
  if (hval) {
#pragma unroll
    for (int c = 0; c < C::VC; ++c)
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        // o[n-tile c*8+jj][0/1] = O[head g][n = 2tq / 2tq+1] with n <-> d = 64c + 8n + jj
        fo[(warp * 8 + g) * D + c * 64 + 16 * tq + jj] = o[c * 8 + jj][0];
        fo[(warp * 8 + g) * D + c * 64 + 16 * tq + 8 + jj] = o[c * 8 + jj][1];
      }
    if (tq == 0) fl[warp * 8 + g] = l;
  }
  __syncthreads();
  for (int idx = tid; idx < G * D; idx += kDecodeWarps * 32) {
    const int gg = idx / D, d = idx % D;
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) acc += fo[(w * 8 + gg) * D + d];
    ws[wl.part_o / 4 + (int64_t(kvh * G + gg) * plan.n_splits + split) * D + d] = acc;
  }
  if (warp == 0 && tq == 0 && hval) {
    float* ml = ws + wl.part_ml / 4 + (int64_t(h) * plan.n_splits + split) * 2;
    ml[0] = m_run;
    ml[1] = fl[g] + fl[8 + g] + fl[16 + g] + fl[24 + g];
  }
  if (!(launch_flags & 1)) return;  // the separate combine kernel merges

  // ---- fused combine: the last split CTA of this KV head merges the group's heads ----
  __shared__ int last_cta;
  __threadfence();  // this thread's partials are visible device-wide before the arrival
  __syncthreads();
  if (tid == 0) {
    const unsigned prev = atomicAdd(&g_decode_arrivals[kvh], 1u);
    last_cta = prev == static_cast<unsigned>(ap.n_splits - 1);
  }
  __syncthreads();
  if (!last_cta) return;
  __threadfence();  // acquire side: the other CTAs' partials are read after their arrivals
  if (tid == 0) atomicExch(&g_decode_arrivals[kvh], 0u);  // ready for the next launch
  // The parallel merge in the positional bf16 kernels (the ones the engine's decode steps run);
  // the list / quantized variants keep the serial form and their register allocation.
  if constexpr (kEarlyPages) {
    if (decode_merge_smem_bytes<D>(G, ap.n_splits) <= C::UNION_BYTES) {
      decode_fused_merge<D>(ws, p.o, wl.part_o, wl.part_ml, plan.n_splits, kvh, G, ap.n_splits,
                            reinterpret_cast<float*>(smem_raw));
      return;
    }
  }
  for (int idx = tid; idx < G * D; idx += kDecodeWarps * 32) {  // (more splits than fit)
    const int gg = idx / D, d = idx % D;
    const int hh = kvh * G + gg;
    const float* ml = ws + wl.part_ml / 4 + int64_t(hh) * plan.n_splits * 2;  // bound strides
    const float* po = ws + wl.part_o / 4 + int64_t(hh) * plan.n_splits * D;
    p.o[int64_t(hh) * D + d] = decode_combine_one<D>(ml, po, ap.n_splits, d);  // (no sinks)
  }
}

}  // namespace sinkscope::kernels::detail
