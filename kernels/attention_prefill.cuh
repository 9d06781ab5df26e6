// SPDX-License-Identifier: Apache-2.0
// Causal prefill attention over a paged bf16 KV cache, FlashAttention-2 style
// (https://arxiv.org/abs/2307.08691): one CTA = 128 query rows of one query head (kPrefillCtaRows:
// two 64-row query tiles, kPrefillQueryTile, each with its own skip vote); KV tiles
// (= pages) streamed through shared memory with cp.async; S = Q K^T and O += P V on tensor
// cores (mma.sync m16n8k16 bf16, operands via ldmatrix); online softmax in the exp2 domain.
//
// Variants are template constants chosen in one place (attention_dispatch.h):
//   SPARSE  - skip vote per (query tile, KV tile) (contract in attention_params.h): each half of
//             the CTA (64 rows) decides, counts and writes its mask row on its own;
//   LAZY_V  - V of tile t is fetched only after t's votes said "compute" for either half. Otherwise K and V of
//             tile t+1 are prefetched together while tile t is computed (the dense pipeline).
// GQA: query head h reads KV head h / (n_q_heads / n_kv_heads); CTAs of one KV group are
// adjacent in the grid (x = head), so their K/V tiles are served from L2.
#pragma once

#include <cuda_fp16.h>

#include "kernels/attention_common.cuh"
#include "kernels/attention_dispatch.h"
#include "kernels/attention_params.h"
#include "kernels/attention_wgmma.cuh"
#include "kernels/visibility.h"

namespace sinkscope::kernels::detail {

// Shared-memory tiles of R rows x D columns (bf16) are stored as D/64 column blocks of
// [R][64]: 128-byte rows whose 16-byte chunks are XOR-swizzled by (row & 7). That is the
// hardware's 128-byte swizzle atom (8 rows x 128 B), which wgmma descriptors read directly,
// and it keeps the 8 row addresses of one ldmatrix 8x8 in 8 different bank groups.
// https://docs.nvidia.com/cuda/parallel-thread-execution/#tensor-swizzling-modes
template <int R>
__device__ __forceinline__ int swz(int row, int chunk) {
  return ((chunk >> 3) * R + row) * 64 + (((chunk & 7) ^ (row & 7)) << 3);
}

// Quantized KV (KVB = 8 / 4, AttentionParams::kv_bits): one (page, kv head) tile of codes +
// fp16 scales dequantised into the swizzled bf16 tile, 16-byte chunk by chunk: element d of row
// r = bf16(c * scale), exactly the values the decode kernels feed their mma (and what the append
// kernel stores for a quantized row of a protected bf16 page). Plain loads and shared stores
// (not cp.async); the callers' barriers order them like the bf16 copies. Rows >= valid: zeros.
template <int D, int BC, int KVB, int NTHREADS>
__device__ __forceinline__ void prefill_dequant_tile(uint16_t* dst, const uint8_t* codes,
                                                     const uint16_t* scales, int64_t vec0,
                                                     int64_t valid, int tid) {
  constexpr int CH = D / 8;
  constexpr int CB = KVB == 8 ? D : D / 2;
  for (int c = tid; c < BC * CH; c += NTHREADS) {
    const int r = c / CH, ch = c % CH;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (r < valid) {
      const float s = __half2float(__ushort_as_half(scales[(vec0 + r) * (D / 32) + ch / 4]));
      const uint8_t* row = codes + (vec0 + r) * CB;
      float f[8];
      if constexpr (KVB == 8) {
        const uint2 q = *reinterpret_cast<const uint2*>(row + ch * 8);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          f[i] = float(static_cast<int>(q.x << (24 - 8 * i)) >> 24);
          f[4 + i] = float(static_cast<int>(q.y << (24 - 8 * i)) >> 24);
        }
      } else {
        const uint32_t q = *reinterpret_cast<const uint32_t*>(row + ch * 4);
#pragma unroll
        for (int i = 0; i < 8; ++i) f[i] = float(static_cast<int>((q >> (4 * i)) & 15u) - 8);
      }
      val = make_uint4(pack_bf16(f[0] * s, f[1] * s), pack_bf16(f[2] * s, f[3] * s),
                       pack_bf16(f[4] * s, f[5] * s), pack_bf16(f[6] * s, f[7] * s));
    }
    *reinterpret_cast<uint4*>(dst + swz<BC>(r, ch)) = val;
  }
}

// Cache position mode (AttentionParams::q_sink): the score of one query row against one key of a
// sink tile with the query rotated at its cache index; bf16 inputs, fp32 sum, like the mma.
// Out of line: a handful of calls per CTA (the sink keys of its first tile), not worth the
// registers and code of an unrolled copy in every (row, key) slot.
template <int D, int BC>
__device__ __noinline__ float sink_query_score(const uint16_t* q, const uint16_t* ktile, int r) {
  float acc = 0.f;
#pragma unroll 1
  for (int ch = 0; ch < D / 8; ++ch) {
    const uint4 qa = *reinterpret_cast<const uint4*>(q + ch * 8);
    const uint4 ka = *reinterpret_cast<const uint4*>(ktile + swz<BC>(r, ch));
    const uint32_t qw[4] = {qa.x, qa.y, qa.z, qa.w}, kw[4] = {ka.x, ka.y, ka.z, ka.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc = fmaf(__uint_as_float(qw[i] << 16), __uint_as_float(kw[i] << 16), acc);
      acc = fmaf(__uint_as_float(qw[i] & 0xffff0000u), __uint_as_float(kw[i] & 0xffff0000u), acc);
    }
  }
  return acc;
}

template <int D, int BC, bool LAZY_V>
constexpr int prefill_smem_bytes() {
  // + 1 KB so the tiles can start on a 1024-byte boundary (swizzle atoms must be aligned), + 16
  // bytes for the per-warp skip votes behind the V tiles.
  return (kPrefillCtaRows * D + (LAZY_V ? 3 : 2) * BC * D + (LAZY_V ? 1 : 2) * BC * D) * 2 +
         1024 + 16;
}

// LIST: the KV tiles are a live-page list with the sink/window rule (AttentionParams::tile_pos0,
// a sliding-window cache); compile-time, so the full-cache kernels carry none of its work.
// KVB: the KV page format (0 bf16; 8 / 4 quantized, AttentionParams::kv_bits), compile-time so
// the bf16 kernels are unchanged; a quantized tile is dequantised into shared memory as it is
// loaded, a page-table entry < 0 is a protected bf16 page (engine/cache/kv_page_plan.h).
// The query rows a prefill CTA owns (this kernel and attention_prefill_ws.cuh): blockIdx.x is
// the query head, blockIdx.y counts the CTA row blocks from the last (longest causal rows first,
// for tail balance); rows of br (kPrefillCtaRows; the three-consumer warp-specialised kernel:
// 192) queries, i.e. query tiles (br / kPrefillQueryTile) * qt + h (h < br / kPrefillQueryTile)
// of kPrefillQueryTile rows each.
struct PrefillCtaTile {
  // n_qt, qt: CTA row blocks (of br / kPrefillQueryTile query tiles each), not query tiles.
  int head, n_qt, qt, kvh, i0, rows;
  int64_t q_lo;      // absolute position of row 0
  int64_t last_key;  // the last key any row of the tile sees (causal, < kv_len)
};
// One query tile (half h of the CTA, kPrefillQueryTile rows; the three-consumer kernel: third
// h): its rows (0 for a tile that lies past n_q_tokens), its first position and the last key any
// of its rows sees (-1: no rows). Its skip-mask row is query tile kPrefillTilesPerCta * qt + h
// (prefill_mask_row's tiles_per_cta * qt + h) of ceil(n_q_tokens / kPrefillQueryTile).
struct PrefillHalf {
  int rows;
  int64_t q_lo, last_key;
};
__host__ __device__ __forceinline__ PrefillHalf prefill_half(const PrefillCtaTile& t, int64_t kv_len,
                                                             int h) {
  PrefillHalf r;
  const int lo = h * kPrefillQueryTile;
  r.rows = t.rows - lo < 0 ? 0 : (t.rows - lo > kPrefillQueryTile ? kPrefillQueryTile : t.rows - lo);
  r.q_lo = t.q_lo + lo;
  r.last_key = r.rows == 0 ? -1 : (r.q_lo + r.rows - 1 < kv_len - 1 ? r.q_lo + r.rows - 1 : kv_len - 1);
  return r;
}
// The skip-mask row of query tile (qt, h), or nullptr when the mask is off for this head or the
// half has no rows. Rows: ceil(n_q_tokens / kPrefillQueryTile) per head. tiles_per_cta: the
// query tiles of one CTA row block (3 for the three-consumer warp-specialised kernel).
__device__ __forceinline__ uint8_t* prefill_mask_row(const AttentionParams& p, const PrefillCtaTile& t,
                                                     int h, int half_rows, int n_kvt,
                                                     int tiles_per_cta = kPrefillTilesPerCta) {
  if (p.skip_mask == nullptr || (p.mask_head >= 0 && p.mask_head != t.head) || half_rows == 0)
    return nullptr;
  const int n_rows = (p.n_q_tokens + kPrefillQueryTile - 1) / kPrefillQueryTile;
  return p.skip_mask + (int64_t(p.mask_head < 0 ? t.head : 0) * n_rows +
                        tiles_per_cta * t.qt + h) * n_kvt;
}
__device__ __forceinline__ PrefillCtaTile prefill_cta_tile(const AttentionParams& p, int br) {
  PrefillCtaTile t;
  t.head = blockIdx.x;
  t.n_qt = gridDim.y;
  t.qt = t.n_qt - 1 - blockIdx.y;
  t.kvh = t.head / (p.n_q_heads / p.n_kv_heads);
  t.i0 = t.qt * br;
  t.rows = min(br, p.n_q_tokens - t.i0);
  t.q_lo = p.q_start + t.i0;
  t.last_key = t.q_lo + t.rows - 1 < p.kv_len - 1 ? t.q_lo + t.rows - 1 : p.kv_len - 1;
  return t;
}

template <int D, int BC, bool SPARSE, bool LAZY_V, bool WG, bool LIST, int KVB = 0>
__global__ void __launch_bounds__(prefill_tile_config(D, BC, WG).warps * 32, BC == 128 ? 1 : 2)
    attention_prefill_kernel(const AttentionParams p) {
  constexpr PrefillTileConfig cfg = prefill_tile_config(D, BC, WG);
  constexpr int MT = cfg.m_tiles, NTHREADS = cfg.warps * 32, BR = kPrefillCtaRows;
  static_assert(kPrefillTilesPerCta == 2, "two query tiles (halves) per CTA");
  constexpr int WPH = cfg.warps / 2;  // warps per half (query tile)
  constexpr int NB = BC / 8;  // n8 column tiles of S
  constexpr int ND = D / 8;   // n8 column tiles of O
  constexpr int CH = D / 8;   // 16-byte chunks per row
  static_assert(cfg.warps * 16 * MT == BR, "tile config must cover the query tile");

  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem_base = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint16_t* sq = reinterpret_cast<uint16_t*>(smem_base);  // [BR][D]
  constexpr int KBUF = LAZY_V ? 3 : 2;                    // lazy: K runs two tiles ahead
  uint16_t* sk = sq + BR * D;                             // [KBUF][BC][D]
  uint16_t* sv = sk + KBUF * BC * D;                      // [LAZY_V ? 1 : 2][BC][D]
  // Per-warp skip votes of the current tile (byte w = warp w). Written after the loop-top barrier
  // of tile t, read after the vote barrier of t: every read precedes the next loop-top barrier.
  uint8_t* svote = reinterpret_cast<uint8_t*>(sv + (LAZY_V ? 1 : 2) * BC * D);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tq = lane & 3;  // mma fragment row group / column pair
  const PrefillCtaTile ct = prefill_cta_tile(p, BR);
  const int head = ct.head, kvh = ct.kvh, i0 = ct.i0, rows = ct.rows;
  const int64_t q_lo = ct.q_lo, last_key = ct.last_key;
  // Tiles visited, in position order. Positional tiles: 0 .. the last causal one. A live-page
  // list (AttentionParams::tile_pos0): its sink tiles, then the tiles from the first that
  // reaches into row 0's window to the last that starts at or before the last row (tiles in
  // between are invisible to every row and not visited). Iteration i reads list entry
  // tile_of(i).
  // The layer's own window (own_window) drops the leading tiles, sink tiles included, all of
  // whose keys lie at or below row 0's own-window floor (sink_begin: the first sink tile kept).
  int n_t = static_cast<int>(last_key / BC) + 1;
  int n_sink_it = 0, win_begin = 0, sink_begin = 0;
  if constexpr (LIST) {
    const int64_t q_hi = q_lo + rows - 1;
    int win_end = 0, sink_end = 0;
    win_begin = -1;
    for (int t = 0; t < p.n_tiles; ++t) {
      const int64_t a = p.tile_pos0[t];
      const bool in = visibility::tile_in_windows(a, a + BC - 1, q_lo, p.sink_count, p.window,
                                                  p.own_window);
      if (a < p.sink_count) {
        sink_end = t + 1;
        if (!in) sink_begin = t + 1;  // below row 0's own-window floor
      }
      if (win_begin < 0 && a >= p.sink_count && in) win_begin = t;
      if (a <= q_hi) win_end = t + 1;
    }
    if (win_begin < 0 || win_begin > win_end) win_begin = win_end;
    n_sink_it = max(min(sink_end, win_end) - sink_begin, 0);
    n_t = n_sink_it + (win_end - win_begin);
  }
  auto tile_of = [&](int i) {
    return i < n_sink_it ? sink_begin + i : win_begin + (i - n_sink_it);
  };
  const int n_kvt = static_cast<int>((p.kv_len + BC - 1) / BC);
  const int row_base = warp * 16 * MT;
  const int half = warp / WPH;  // the query tile (of the two) this warp's rows belong to
  // Both halves' geometry in every thread (scalars): whether a tile is visible to a half decides
  // whether it is counted, whether the half's first visit has happened, and (lazy V) whether V is
  // needed by either half. A KV tile with no key visible to any row of a half (the causal
  // diagonal of the upper half, a window floor) is not visited by that half: not counted, not in
  // its mask row, and its rows (all -inf there) skip it.
  // Positional tiles: a half sees tiles 0 .. its last key / BC (nv0 / nv1 tiles; tile 0 is its
  // first). Live-page list: the window rule per half, and the half's first visited tile tracked.
  const PrefillHalf hf0 = prefill_half(ct, p.kv_len, 0), hf1 = prefill_half(ct, p.kv_len, 1);
  const int nv0 = hf0.rows == 0 ? 0 : static_cast<int>(hf0.last_key / BC) + 1;
  const int nv1 = hf1.rows == 0 ? 0 : static_cast<int>(hf1.last_key / BC) + 1;
  auto half_sees = [&](const PrefillHalf& hf, int64_t key0) {
    return hf.rows != 0 && key0 <= hf.q_lo + hf.rows - 1 &&
           visibility::tile_in_windows(key0, key0 + BC - 1, hf.q_lo, p.sink_count, p.window,
                                       p.own_window);
  };
  bool seen0 = false, seen1 = false;  // LIST: the half visited a tile already (its first is never skipped)

  // ---- async loads ----
  {
    const int64_t stride = int64_t(p.n_q_heads) * D;
    const uint16_t* qg = p.q + (int64_t(i0) * p.n_q_heads + head) * D;
    for (int c = tid; c < BR * CH; c += NTHREADS) {
      const int r = c / CH, ch = c % CH;
      const bool ok = r < rows;  // rows past the end are zero-filled (and masked below)
      cp_async16(smem_u32(sq + swz<BR>(r, ch)), ok ? qg + r * stride + ch * 8 : p.q, ok ? 16 : 0);
    }
  }
  auto load_tile = [&](uint16_t* dst, const uint16_t* pool, int it) {
    const int t = tile_of(it);
    const int64_t entry = p.page_table[t];
    // Quantized formats: entry >= 0 a code page, < 0 the bf16 page -1 - entry (KVB = 0: entry).
    const int64_t page = KVB != 0 && entry < 0 ? -1 - entry : entry;
    const uint16_t* src = pool + (page * p.n_kv_heads + kvh) * (BC * D);
    const int64_t first = LIST ? int64_t(p.tile_pos0[t]) : int64_t(t) * BC;
    const int64_t valid = p.kv_len - first;  // slots past the cache end: zeros
    if constexpr (KVB != 0) {
      if (entry >= 0) {
        const bool is_v = pool == p.v_pages;  // which tensor this call loads
        prefill_dequant_tile<D, BC, KVB, NTHREADS>(dst, is_v ? p.v_codes : p.k_codes,
                                                   is_v ? p.v_scales : p.k_scales,
                                                   (entry * p.n_kv_heads + kvh) * BC, valid, tid);
        return;
      }
    }
    for (int c = tid; c < BC * CH; c += NTHREADS) {
      const int r = c / CH, ch = c % CH;
      const bool ok = r < valid;
      cp_async16(smem_u32(dst + swz<BC>(r, ch)), ok ? src + c * 8 : pool, ok ? 16 : 0);
    }
  };
  // n_t >= 1: the query tile's own (last) tile is always listed.
  load_tile(sk, p.k_pages, 0);
  if constexpr (!LAZY_V) load_tile(sv, p.v_pages, 0);
  cp_async_commit();
  if constexpr (LAZY_V) {
    if (n_t > 1) load_tile(sk + BC * D, p.k_pages, 1);
    cp_async_commit();
  }

  float o[MT][ND][4];
  float m_run[MT][2], l_run[MT][2];  // running max (log2 units), per-thread partial row sums
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nd = 0; nd < ND; ++nd)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][nd][e] = 0.f;
    m_run[mt][0] = m_run[mt][1] = kNegInf;
    l_run[mt][0] = l_run[mt][1] = 0.f;
  }
  // Learned sink (AttentionParams::sinks): the online softmax starts from it, running max = the
  // sink logit (log2 units), row sum = exp2(0) = 1 held by one thread of the row's quad
  // (quad_sum adds the four partial sums).
  const float sink_l2 = p.sinks != nullptr ? p.sinks[head] * kLog2e : kNegInf;
  if (p.sinks != nullptr) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      m_run[mt][0] = m_run[mt][1] = sink_l2;
      l_run[mt][0] = l_run[mt][1] = tq == 0 ? 1.f : 0.f;
    }
  }
  const float sl2 = p.scale * kLog2e;
  const float thr = p.log2_lambda;
  uint32_t n_skipped = 0, n_visited = 0;  // this thread's half (the probe threads report them)
  // Probe thread of each half: its first thread (tid 0 and NTHREADS / 2).
  const bool probe = (tid & (NTHREADS / 2 - 1)) == 0;
  uint8_t* mask_row =
      probe && !LIST ? prefill_mask_row(p, ct, half, half ? hf1.rows : hf0.rows, n_kvt) : nullptr;

  for (int t = 0; t < n_t; ++t) {
    const uint16_t* kbuf = sk + (LAZY_V ? t % 3 : (t & 1)) * BC * D;
    const uint16_t* vbuf = sv + (LAZY_V ? 0 : (t & 1) * BC * D);
    if constexpr (!LAZY_V) {
      __syncthreads();  // everyone is done with tile t-1's buffers, which t+1 now overwrites
      if (t + 1 < n_t) {
        load_tile(sk + ((t + 1) & 1) * BC * D, p.k_pages, t + 1);
        load_tile(sv + ((t + 1) & 1) * BC * D, p.v_pages, t + 1);
      }
      cp_async_commit();
      cp_async_wait<1>();  // tile t (and Q) landed
      if constexpr (WG) fence_proxy_async_smem();
      __syncthreads();
    } else {
      // Commit order: ..., K(t+1), [V(t) if computed], K(t+2): all but the newest group done
      // means K(t) (and K(t+1)) landed.
      cp_async_wait<1>();
      if constexpr (WG) fence_proxy_async_smem();
      __syncthreads();
    }

    // ---- S = Q K^T (raw scores, fp32) ----
    float s[MT][NB][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nb][e] = 0.f;
    if constexpr (WG) {
#ifdef SINKSCOPE_HAVE_WGMMA
      // Warpgroup w4 = warp / 4 owns query rows [64*w4, 64*w4 + 64): S(64 x BC) over D/16 k-steps.
      // K-major operands; a k16 step advances 32 bytes inside the 128-byte swizzle atom.
      const uint32_t qb = smem_u32(sq) + (warp >> 2) * 64 * 128;
      const uint32_t kb = smem_u32(kbuf);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        const uint32_t off = (ks & 3) * 32;
        wgmma_ss<BC>(s[0], wgmma_desc(qb + (ks >> 2) * BR * 128 + off, 16, 1024),
                     wgmma_desc(kb + (ks >> 2) * BC * 128 + off, 16, 1024), ks > 0);
      }
      wgmma_commit();
      wgmma_wait0();
      wgmma_fence_operands(s[0]);
#else
      __trap();
#endif
    } else {
  #pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        uint32_t a[MT][4];
  #pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          ldmatrix_x4(a[mt], smem_u32(sq + swz<BR>(row_base + mt * 16 + (lane & 15), ks * 2 + (lane >> 4))));
  #pragma unroll
        for (int nb = 0; nb < BC / 16; ++nb) {
          uint32_t b[4];
          ldmatrix_x4(b, smem_u32(kbuf + swz<BC>(nb * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                ks * 2 + ((lane >> 3) & 1))));
  #pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(s[mt][2 * nb], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b[0], b[1]);
            mma_bf16(s[mt][2 * nb + 1], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b[2], b[3]);
          }
        }
      }
    }

    const int64_t key0 = LIST ? int64_t(p.tile_pos0[tile_of(t)]) : int64_t(t) * BC;
    // ---- cache position mode: sink keys scored with the re-rotated queries ----
    // (engine/cache/kv_cache.h: window keys keep their relative distance, sink keys sit at cache
    // indices 0..S-1 while the query sits at its cache index; the sink tiles come first.)
    if constexpr (LIST) {
      if (p.q_sink != nullptr && t < n_sink_it) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int row = row_base + mt * 16 + g + ((e >> 1) << 3);
              const int kk = nb * 8 + tq * 2 + (e & 1);
              // Rows before S + W sit at their own cache index: their MMA score stands (the
              // same rotation; a pass may start before S + W and reach past it).
              if (key0 + kk < p.sink_count && row < rows &&
                  q_lo + row >= int64_t(p.sink_count) + p.window)
                s[mt][nb][e] = sink_query_score<D, BC>(
                    p.q_sink + (int64_t(i0 + row) * p.n_q_heads + head) * D, kbuf, kk);
            }
      }
    }

    // ---- soft-capping (Gemma 2) of the raw q.k, before the masks: scale * result =
    // tanh(scale q.k / cap) * cap (AttentionParams::softcap) ----
    if (p.softcap > 0.f) {
      const float cap_in = p.scale / p.softcap, cap_out = p.softcap / p.scale;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nb][e] = tanhf(s[mt][nb][e] * cap_in) * cap_out;
    }

    // ---- causal / cache-end / padding-row mask: only tiles that cross a boundary ----
    // Window rule: keys below the last row's window floor may be out of some row's window.
    const bool win_mask = LIST && p.window > 0 && key0 <= q_lo + rows - 1 - p.window;
    const bool own_mask = LIST && p.own_window > 0 && key0 <= q_lo + rows - 1 - p.own_window;
    if (key0 + BC - 1 > q_lo || key0 + BC > p.kv_len || rows < BR || win_mask || own_mask) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row = row_base + mt * 16 + g + ((e >> 1) << 3);
            const int64_t key = key0 + nb * 8 + tq * 2 + (e & 1);
            if (row >= rows || key > q_lo + row || key >= p.kv_len ||
                ((win_mask || own_mask) &&
                 !visibility::key_in_windows(key, q_lo + row, p.sink_count, p.window,
                                             p.own_window)))
              s[mt][nb][e] = kNegInf;
          }
    }

    // ---- per-row tile max ----
    float mx[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v = kNegInf;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) v = fmaxf(v, fmaxf(s[mt][nb][2 * h], s[mt][nb][2 * h + 1]));
        mx[mt][h] = quad_max(v);
      }

    // ---- visibility per half (query tile) ----
    const bool vis0 = LIST ? half_sees(hf0, key0) : t < nv0;
    const bool vis1 = LIST ? half_sees(hf1, key0) : t < nv1;
    if constexpr (!LIST) seen0 = seen1 = t > 0;
    const bool my_vis = half ? vis1 : vis0;
    if constexpr (LIST) n_visited += my_vis;  // positional: nv0 / nv1, after the loop

    // ---- skip vote per half: every row of the half must agree; a row without visible keys
    // agrees. A half skips a tile it does not see (all its rows are -inf there: no-op work), and
    // never the first tile it sees. ----
    bool skip = false, keep_any = true;
    if constexpr (SPARSE) {
      bool agree = true;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          agree &= (mx[mt][h] == kNegInf) || (mx[mt][h] * sl2 - m_run[mt][h] < thr);
      const bool wv = __all_sync(0xffffffffu, agree);
      if (lane == 0) svote[warp] = wv ? 1 : 0;
      __syncthreads();
      constexpr uint64_t kOnes = WPH == 4 ? 0x01010101ull : (WPH == 2 ? 0x0101ull : 0x01ull);
      constexpr uint64_t kMask = (uint64_t(1) << (8 * WPH)) - 1;
      const uint64_t v = *reinterpret_cast<const uint64_t*>(svote);
      const bool skip0 = !vis0 || (seen0 && (v & kMask) == kOnes);
      const bool skip1 = !vis1 || (seen1 && ((v >> (8 * WPH)) & kMask) == kOnes);
      skip = half ? skip1 : skip0;
      keep_any = !(skip0 && skip1);
      n_skipped += skip && my_vis;
    }
    if constexpr (LIST) {
      seen0 |= vis0;
      seen1 |= vis1;
    }
    if (!LIST && mask_row && my_vis) mask_row[t] = skip ? 1 : 0;
    // A skipped tile never enters P V (and, lazy, V is loaded only when a half keeps the tile).
    // skip_softmax_exp = false still runs its exp() into the row sums below (same meaning as
    // engine/backend/cpu_attention.h).
    if (!LAZY_V && skip && p.skip_softmax_exp) continue;
    if constexpr (LAZY_V) {
      // V only for tiles that either half computes; then K two tiles ahead (its buffer (t+2)%3
      // was last read by S(t-1), before this iteration's barrier).
      if (keep_any) {
        load_tile(sv, p.v_pages, t);
        cp_async_commit();
      }
      if (t + 2 < n_t) load_tile(sk + ((t + 2) % 3) * BC * D, p.k_pages, t + 2);
      cp_async_commit();
    }

    // ---- online softmax (exp2 domain); lazy V: a half that skips the tile (exp included) goes
    // straight to the V barrier, which the other half may need ----
    if (!(skip && p.skip_softmax_exp)) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m_new = fmaxf(m_run[mt][h], mx[mt][h] * sl2);
        const float m_use = safe_max(m_new);
        const float alpha = fast_exp2(m_run[mt][h] - m_use);
        m_run[mt][h] = m_new;
        float l = l_run[mt][h] * alpha;
#pragma unroll
        for (int nd = 0; nd < ND; ++nd) {
          o[mt][nd][2 * h] *= alpha;
          o[mt][nd][2 * h + 1] *= alpha;
        }
#pragma unroll
        for (int nb = 0; nb < NB; ++nb) {
          const float p0 = fast_exp2(fmaf(s[mt][nb][2 * h], sl2, -m_use));
          const float p1 = fast_exp2(fmaf(s[mt][nb][2 * h + 1], sl2, -m_use));
          s[mt][nb][2 * h] = p0;
          s[mt][nb][2 * h + 1] = p1;
          l += p0 + p1;
        }
        l_run[mt][h] = l;
      }
    }
    // skip_softmax_exp = false: the skipped tile's exp() is in the row sums (its max lies below
    // the running max, lambda < 1, so m_run and the O scale did not move); no V, no P V.
    if constexpr (LAZY_V) {
      if (keep_any) {  // CTA-uniform: every thread reaches this barrier or none
        cp_async_wait<1>();  // V(t); K(t+2) may still be in flight
        if constexpr (WG) fence_proxy_async_smem();
        __syncthreads();
      }
    }
    if (skip) continue;

    // ---- O += P V: P straight from the S accumulators (the C layout of two n8 tiles is the
    // A layout of one k16 step), V through ldmatrix.trans ----
    if constexpr (WG) {
#ifdef SINKSCOPE_HAVE_WGMMA
      // O(64 x D) += P(64 x 16) V(16 x D) per k16 step; V is MN-major: 8-key groups 1024 B
      // apart (stride offset), 64-column blocks BC*128 B apart (leading offset).
      const uint32_t vb = smem_u32(vbuf);
      uint32_t a[BC / 16][4];
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) {
        a[kk][0] = pack_bf16(s[0][2 * kk][0], s[0][2 * kk][1]);
        a[kk][1] = pack_bf16(s[0][2 * kk][2], s[0][2 * kk][3]);
        a[kk][2] = pack_bf16(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
        a[kk][3] = pack_bf16(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
      }
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk)
        wgmma_rs<D>(o[0], a[kk], wgmma_desc(vb + kk * 2048, BC * 128, 1024));
      wgmma_commit();
      wgmma_wait0();
      wgmma_fence_operands(o[0]);
#else
      __trap();
#endif
    } else {
  #pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) {
        uint32_t a[MT][4];
  #pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          a[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          a[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          a[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          a[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
  #pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, smem_u32(vbuf + swz<BC>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                                      dp * 2 + (lane >> 4))));
  #pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(o[mt][2 * dp], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b[0], b[1]);
            mma_bf16(o[mt][2 * dp + 1], a[mt][0], a[mt][1], a[mt][2], a[mt][3], b[2], b[3]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();

  // ---- O / l -> bf16 ----
  float sink_p = 0.f;  // this thread's rows' learned-sink probabilities (tq == 0 lanes)
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float l = quad_sum(l_run[mt][h]);
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const int row = row_base + mt * 16 + g + 8 * h;
      if (p.sink_mass != nullptr && row < rows && tq == 0)
        sink_p += fast_exp2(sink_l2 - safe_max(m_run[mt][h])) * inv;
      if (row < rows) {
        uint16_t* dst = p.o + (int64_t(i0 + row) * p.n_q_heads + head) * D + tq * 2;
#pragma unroll
        for (int nd = 0; nd < ND; ++nd)
          *reinterpret_cast<uint32_t*>(dst + nd * 8) =
              pack_bf16(o[mt][nd][2 * h] * inv, o[mt][nd][2 * h + 1] * inv);
      }
    }
  if (p.sink_mass != nullptr) {  // one double atomic per warp
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sink_p += __shfl_xor_sync(0xffffffffu, sink_p, off);
    if (lane == 0 && sink_p > 0.f) atomicAdd(p.sink_mass + head, double(sink_p));
  }
  if constexpr (!LIST) n_visited = half ? nv1 : nv0;
  if (probe) {
    if (p.tiles_visited && n_visited)
      atomicAdd(reinterpret_cast<unsigned long long*>(p.tiles_visited + head),
                static_cast<unsigned long long>(n_visited));
    if (p.tiles_skipped && n_skipped)
      atomicAdd(reinterpret_cast<unsigned long long*>(p.tiles_skipped + head),
                static_cast<unsigned long long>(n_skipped));
  }
}

}  // namespace sinkscope::kernels::detail
