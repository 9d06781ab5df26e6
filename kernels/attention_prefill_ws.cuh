// SPDX-License-Identifier: Apache-2.0
// Dense causal prefill attention over a paged bf16 KV cache for Hopper (sm_90a), FlashAttention-3
// style (https://arxiv.org/abs/2407.08608): warp-specialised, asynchronous, ping-ponged.
//
// One CTA = 128 query rows of one query head (kPrefillQueryTile, as attention_prefill.cuh), 384
// threads in three warpgroups:
//   WG0      producer: one thread issues TMA copies (cp.async.bulk.tensor, 128-byte swizzle) of
//            Q and of the K / V tiles (128 keys each) into a STAGES-deep shared ring; they
//            complete the tile's "full" mbarrier by their byte count, so the producer never waits
//            for its own copies, only for a free slot ("empty" mbarrier, released by the
//            consumers). Only a tile that holds the cache end (keys past kv_len) is copied with
//            cp.async and zero-filled by producer warp 0: TMA would bring the page's stale slots,
//            and 0 * NaN in P V would poison the row. Warps 1-3 of the producer exit at once.
//   WG1, WG2 consumers: 64 query rows each. S = Q K^T by wgmma SS, O += P V by wgmma RS (P from
//            the S registers, V MN-major), online softmax in the exp2 domain as the mma.sync /
//            wgmma kernel.
// Registers move to the consumers with setmaxnreg (producer 40, consumers 232 of the 168 per
// thread that 384 threads x 1 CTA/SM leave).
// Intra-warpgroup overlap: iteration t issues S(t) = Q K(t)^T and O += P(t-1) V(t-1) back to back,
// waits for S(t) only (wait_group 1), runs the softmax of t while P V is still on the tensor
// cores, then waits for P V and rescales O by t's alpha.
// Ping-pong: the two consumers take turns issuing their GEMM pairs (named barriers 1 and 2,
// 256 threads: one consumer syncs, the other arrives), so one warpgroup's softmax runs while the
// other's GEMMs occupy the tensor cores.
//
// KV tiles are 128 keys whatever the page size: with block_size 64 a tile is two pages, each
// looked up in the page table (the second only when it holds keys < kv_len). Key slots past
// kv_len are zero-filled (never read from the page) and masked.
// Probes (tiles_visited, skip_mask) count in block_size tiles exactly as the dense !LIST path of
// attention_prefill_kernel: visited tiles 0 .. last_key / block_size, mask entries 0.
#pragma once

#include "kernels/attention_common.cuh"
#include "kernels/attention_dispatch.h"
#include "kernels/attention_launch.h"
#include "kernels/attention_params.h"
#include "kernels/attention_prefill.cuh"
#include "kernels/attention_wgmma.cuh"
#include "kernels/cuda_check.h"

#include <cuda.h>  // CUtensorMap (types only: the encoder is reached through the runtime)
#include <cudaTypedefs.h>

#include <cstdint>
#include <string>

namespace sinkscope::kernels::detail {

inline constexpr int kWsThreads = 384;  // producer + two consumer warpgroups
inline constexpr int kWsKeys = 128;     // keys per KV tile (one or two pages)

// Shared ring depth per head dim (Q tile + STAGES x (K + V) must fit the 227 KB opt-in).
template <int D>
constexpr int ws_stages() {
  // The producer can refill a slot only once both consumers' GEMMs on it completed, so each
  // stage hides about one iteration of latency. d = 128: as deep as the 227 KB allow at one CTA
  // per SM; d = 64: 4 (measured on the H200 against 3; 6 would fit).
  return D == 128 ? 3 : 4;
}
template <int D>
constexpr int ws_smem_bytes() {
  // + 1 KB to align the tiles to 1024 bytes (swizzle atoms), then the mbarriers:
  // full Q, STAGES x (full K, full V, empty K, empty V).
  return (kPrefillQueryTile * D + ws_stages<D>() * 2 * kWsKeys * D) * 2 + 1024 +
         8 * (1 + 4 * ws_stages<D>());
}
static_assert(ws_smem_bytes<128>() <= 227 * 1024 && ws_smem_bytes<64>() <= 227 * 1024,
              "the Q tile and the K/V ring must fit the shared-memory opt-in");

#if defined(SINKSCOPE_HAVE_WGMMA) || !defined(__CUDA_ARCH__)
// ---- mbarrier / named barrier / setmaxnreg wrappers (PTX ISA, "mbarrier", "bar", "setmaxnreg") ----
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// The arrive-on fires when all of this thread's earlier cp.async have landed; .noinc: it counts as
// one of the arrivals the barrier was initialised with (one per producer thread).
__device__ __forceinline__ void mbar_arrive_cp_async(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Returns once the phase with the given parity has completed (acquire at CTA scope).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
__device__ __forceinline__ void wgmma_wait1() {
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
// Arrive once and expect `bytes` more from asynchronous copies (PTX "mbarrier.expect_tx").
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// One TMA box (tensor map coordinates c0 innermost) into shared memory at dst; completes `bar`
// by its byte count (PTX "cp.async.bulk.tensor").
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1,
                                            int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
      "%5}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
      "%5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
__device__ __forceinline__ void tma_prefetch_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
#endif

// The three tensor maps of one launch (built on the host per launch, passed as __grid_constant__
// kernel parameters). Boxes are 64 columns (128 bytes: one swizzle atom row) x 64 rows, so a
// box lands as one [64][64] block of the swz<R>() layout below.
//   q:  {head_dim, n_q_heads, n_q_tokens}, box {64, 1, 64}: rows past n_q_tokens are zero-filled
//   k, v: {head_dim, block_size, n_kv_heads, pages}, box {64, 64, 1, 1}: one (page, kv head)
//         is contiguous (AttentionParams), a 128-key tile is two boxes per 64 columns.
struct WsTensorMaps {
  CUtensorMap q, k, v;
};

template <int D>
__global__ void __launch_bounds__(kWsThreads, 1)
    attention_prefill_ws_kernel(const AttentionParams p, const __grid_constant__ CUtensorMap tm_q,
                                const __grid_constant__ CUtensorMap tm_k,
                                const __grid_constant__ CUtensorMap tm_v) {
#ifdef SINKSCOPE_HAVE_WGMMA
  constexpr int BR = kPrefillQueryTile, BN = kWsKeys, ST = ws_stages<D>();
  constexpr int NB = BN / 8;  // n8 column groups of S
  constexpr int ND = D / 8;   // n8 column groups of O
  constexpr int CH = D / 8;   // 16-byte chunks per row
  // Named barrier ids of the ping-pong (0 is __syncthreads).
  constexpr int kBarTurn0 = 1;

  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem_base = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint16_t* sq = reinterpret_cast<uint16_t*>(smem_base);  // [BR][D]
  uint16_t* sk = sq + BR * D;                             // [ST][BN][D]
  uint16_t* sv = sk + ST * BN * D;                        // [ST][BN][D]
  const uint32_t bars = smem_u32(sv + ST * BN * D);       // 8-byte mbarriers
  const uint32_t full_q = bars;
  auto full_k = [&](int s) { return bars + 8 * (1 + s); };
  auto full_v = [&](int s) { return bars + 8 * (1 + ST + s); };
  auto empty_k = [&](int s) { return bars + 8 * (1 + 2 * ST + s); };
  auto empty_v = [&](int s) { return bars + 8 * (1 + 3 * ST + s); };

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wg = warp >> 2;  // 0 producer, 1 / 2 consumers
  const int head = blockIdx.x;
  const int n_qt = gridDim.y;
  const int qt = n_qt - 1 - blockIdx.y;  // longest causal rows first (tail balance)
  const int kvh = head / (p.n_q_heads / p.n_kv_heads);
  const int i0 = qt * BR;
  const int rows = min(BR, p.n_q_tokens - i0);
  const int64_t q_lo = p.q_start + i0;  // absolute position of row 0
  const int64_t last_key = q_lo + rows - 1 < p.kv_len - 1 ? q_lo + rows - 1 : p.kv_len - 1;
  const int n_t = static_cast<int>(last_key / BN) + 1;  // 128-key tiles visited

  if (tid == 0) {
    mbar_init(full_q, 1);
    for (int s = 0; s < ST; ++s) {
      mbar_init(full_k(s), 1);  // the issuing thread's arrive (+ the copies' bytes)
      mbar_init(full_v(s), 1);
      mbar_init(empty_k(s), 8);  // one arrival per consumer warp
      mbar_init(empty_v(s), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    // Probes, as the dense positional path of attention_prefill_kernel (block_size units).
    const int bs = p.block_size;
    const int n_t_bs = static_cast<int>(last_key / bs) + 1;
    if (p.skip_mask != nullptr && (p.mask_head < 0 || p.mask_head == head)) {
      const int n_kvt = static_cast<int>((p.kv_len + bs - 1) / bs);
      uint8_t* mask_row = p.skip_mask + (int64_t(p.mask_head < 0 ? head : 0) * n_qt + qt) * n_kvt;
      for (int t = 0; t < n_t_bs; ++t) mask_row[t] = 0;
    }
    if (p.tiles_visited)
      atomicAdd(reinterpret_cast<unsigned long long*>(p.tiles_visited + head),
                static_cast<unsigned long long>(n_t_bs));
  }
  __syncthreads();

  if (wg == 0) {
    // ================= producer =================
    setmaxnreg_dec<40>();
    if (warp != 0) return;  // one warp: lane 0 issues the TMA copies, all 32 the zero-filled tail
    const bool leader = lane == 0;
    const int bs = p.block_size;
    constexpr uint32_t kTileBytes = BN * D * 2;
    if (leader) {
      tma_prefetch_map(&tm_q);
      tma_prefetch_map(&tm_k);
      tma_prefetch_map(&tm_v);
      mbar_arrive_expect_tx(full_q, BR * D * 2);
#pragma unroll
      for (int cb = 0; cb < D / 64; ++cb)
#pragma unroll
        for (int h = 0; h < BR / 64; ++h)
          tma_load_3d(smem_u32(sq + (cb * BR + 64 * h) * 64), &tm_q, full_q, cb * 64, head, i0 + 64 * h);
    }
    // A whole tile (all 128 keys < kv_len): 2 x D/64 boxes, rows 0..63 from page half 0 and
    // 64..127 from half 1 (two pages at block_size 64, the two halves of one at 128).
    auto tma_tile = [&](uint16_t* dst, const CUtensorMap* map, uint32_t bar, int t) {
      const bool two_pages = bs != BN;
      const int page0 = p.page_table[two_pages ? 2 * t : t];
      const int page1 = two_pages ? p.page_table[2 * t + 1] : page0;
      const int row1 = two_pages ? 0 : 64;
      mbar_arrive_expect_tx(bar, kTileBytes);
#pragma unroll
      for (int cb = 0; cb < D / 64; ++cb) {
        tma_load_4d(smem_u32(dst + cb * BN * 64), map, bar, cb * 64, 0, kvh, page0);
        tma_load_4d(smem_u32(dst + (cb * BN + 64) * 64), map, bar, cb * 64, row1, kvh, page1);
      }
    };
    // The tile holding the cache end: cp.async by the 32 lanes, slots past kv_len zero-filled
    // (the second page-table entry read only when it holds keys < kv_len), then one arrive once
    // every lane's copies landed. At most one such tile per CTA.
    auto copy_tail_tile = [&](uint16_t* dst, const uint16_t* pool, uint32_t bar, int t) {
      const int64_t key0 = int64_t(t) * BN;
      const int64_t valid = p.kv_len - key0;  // 1 .. 127
      const uint16_t *base0, *base1;
      if (bs == BN) {
        base0 = pool + ((int64_t(p.page_table[t]) * p.n_kv_heads + kvh) * BN) * D;
        base1 = base0 + 64 * D;
      } else {
        base0 = pool + ((int64_t(p.page_table[2 * t]) * p.n_kv_heads + kvh) * 64) * D;
        base1 = valid > 64 ? pool + ((int64_t(p.page_table[2 * t + 1]) * p.n_kv_heads + kvh) * 64) * D
                           : base0;
      }
#pragma unroll 4
      for (int c = lane; c < BN * CH; c += 32) {
        const int r = c / CH, ch = c % CH;
        const bool ok = r < valid;
        const uint16_t* src = (r < 64 ? base0 : base1) + (r & 63) * D + ch * 8;
        cp_async16(smem_u32(dst + swz<BN>(r, ch)), ok ? src : pool, ok ? 16 : 0);
      }
      asm volatile("cp.async.wait_all;\n" ::: "memory");
      fence_proxy_async_smem();  // and the consumers fence again before their wgmma
      __syncwarp();
      if (leader) mbar_arrive(bar);
    };
    for (int t = 0; t < n_t; ++t) {
      const int s = t % ST;
      const uint32_t par = ((t / ST) & 1) ^ 1;  // a fresh barrier passes parity 1 at once
      const bool whole = int64_t(t) * BN + BN <= p.kv_len;
      mbar_wait(empty_k(s), par);
      if (whole) {
        if (leader) tma_tile(sk + s * BN * D, &tm_k, full_k(s), t);
      } else {
        copy_tail_tile(sk + s * BN * D, p.k_pages, full_k(s), t);
      }
      mbar_wait(empty_v(s), par);
      if (whole) {
        if (leader) tma_tile(sv + s * BN * D, &tm_v, full_v(s), t);
      } else {
        copy_tail_tile(sv + s * BN * D, p.v_pages, full_v(s), t);
      }
    }
    // Stay until the consumers released every slot, so no copy into this CTA's shared memory is
    // in flight when the producer's warp exits.
    for (int t = n_t; t < n_t + ST; ++t) {
      const int s = t % ST;
      const uint32_t par = ((t / ST) & 1) ^ 1;
      mbar_wait(empty_k(s), par);
      mbar_wait(empty_v(s), par);
    }
    return;
  }

  // ================= consumers =================
  setmaxnreg_inc<232>();
  const int c = wg - 1;             // consumer 0: rows 0..63, 1: rows 64..127
  const int cw = warp - 4;          // consumer warp 0..7: rows 16*cw ..
  const int g = lane >> 2, tq = lane & 3;
  const int my_turn = kBarTurn0 + c, other_turn = kBarTurn0 + (1 - c);
  const uint32_t qb = smem_u32(sq) + c * 64 * 128;
  const float sl2 = p.scale * kLog2e;

  float o[ND][4];
  float s[NB][4];
  uint32_t a[BN / 16][4];
  float m_run[2] = {kNegInf, kNegInf}, l_run[2] = {0.f, 0.f}, alpha[2] = {1.f, 1.f};
#pragma unroll
  for (int nd = 0; nd < ND; ++nd)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nd][e] = 0.f;
#pragma unroll
  for (int nb = 0; nb < NB; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nb][e] = 0.f;

  // S(t) = Q K(t)^T over D/16 k-steps (K-major operands, 32 bytes per k16 step inside the atom).
  auto issue_qk = [&](int st) {
    const uint32_t kb = smem_u32(sk + st * BN * D);
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t off = (ks & 3) * 32;
      wgmma_ss<BN>(s, wgmma_desc(qb + (ks >> 2) * BR * 128 + off, 16, 1024),
                   wgmma_desc(kb + (ks >> 2) * BN * 128 + off, 16, 1024), ks > 0);
    }
  };
  // O += P V(t): V MN-major, 8-key groups 1024 B apart, 64-column blocks BN*128 B apart.
  auto issue_pv = [&](int st) {
    const uint32_t vb = smem_u32(sv + st * BN * D);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) wgmma_rs<D>(o, a[kk], wgmma_desc(vb + kk * 2048, BN * 128, 1024));
  };
  // Consumer warps release a slot once their wgmma reading it has completed.
  auto release = [&](uint32_t bar) {
    if (lane == 0) mbar_arrive(bar);
  };
  // Causal / cache-end / padding-row mask, then the online softmax of tile t: s becomes P
  // (fp32), alpha the factor O must be scaled by once the previous P V has landed.
  auto softmax = [&](int t) {
    const int64_t key0 = int64_t(t) * BN;
    const int row_lo = 64 * c;  // first row of this consumer
    if (key0 + BN - 1 > q_lo + row_lo || key0 + BN > p.kv_len || rows < row_lo + 64) {
      // Column j of the tile is visible to a row iff j <= lim: the row's diagonal and the cache
      // end, relative to key0 (small ints: no 64-bit compares per element); padding rows: -1.
      const int64_t end_col = (p.kv_len - key0 < BN ? p.kv_len - key0 : BN) - 1;
      int lim[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = 16 * cw + g + 8 * h;
        const int64_t diag = q_lo + row - key0;
        lim[h] = row < rows ? static_cast<int>(diag < end_col ? diag : end_col) : -1;
      }
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (nb * 8 + tq * 2 + (e & 1) > lim[e >> 1]) s[nb][e] = kNegInf;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = kNegInf;
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) v = fmaxf(v, fmaxf(s[nb][2 * h], s[nb][2 * h + 1]));
      const float mx = quad_max(v);
      const float m_new = fmaxf(m_run[h], mx * sl2);
      const float m_use = safe_max(m_new);
      alpha[h] = fast_exp2(m_run[h] - m_use);
      m_run[h] = m_new;
      float l = l_run[h] * alpha[h];
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) {
        const float p0 = fast_exp2(fmaf(s[nb][2 * h], sl2, -m_use));
        const float p1 = fast_exp2(fmaf(s[nb][2 * h + 1], sl2, -m_use));
        s[nb][2 * h] = p0;
        s[nb][2 * h + 1] = p1;
        l += p0 + p1;
      }
      l_run[h] = l;
    }
  };
  auto pack_p = [&]() {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      a[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
      a[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
      a[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
  };
  auto rescale_o = [&]() {
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) {
      o[nd][0] *= alpha[0];
      o[nd][1] *= alpha[0];
      o[nd][2] *= alpha[1];
      o[nd][3] *= alpha[1];
    }
  };

  // Consumer 0 issues first: consumer 1 opens its turn barrier.
  if (c == 1) named_bar_arrive(other_turn, 256);
  mbar_wait(full_q, 0);

  // Only the last tile can hold the cache end; it alone is written by cp.async (generic proxy),
  // so it alone needs the proxy fence before wgmma reads it (TMA writes are async-proxy).
  const bool tail_last = int64_t(n_t) * BN > p.kv_len;

  // ---- tile 0: S only ----
  mbar_wait(full_k(0), 0);
  if (tail_last && n_t == 1) fence_proxy_async_smem();
  named_bar_sync(my_turn, 256);
  wgmma_fence();
  issue_qk(0);
  wgmma_commit();
  named_bar_arrive(other_turn, 256);
  wgmma_wait0();
  wgmma_fence_operands(s);
  release(empty_k(0));
  softmax(0);
  pack_p();

  // ---- tiles 1 .. n_t-1: S(t) and P(t-1) V(t-1) in flight together ----
#pragma unroll 1
  for (int t = 1; t < n_t; ++t) {
    const int st = t % ST, stp = (t - 1) % ST;
    mbar_wait(full_k(st), (t / ST) & 1);
    mbar_wait(full_v(stp), ((t - 1) / ST) & 1);
    if (tail_last && t == n_t - 1) fence_proxy_async_smem();
    named_bar_sync(my_turn, 256);
    wgmma_fence();  // a[] and o were last written by ordinary instructions
    issue_qk(st);
    wgmma_commit();
    issue_pv(stp);
    wgmma_commit();
    named_bar_arrive(other_turn, 256);
    wgmma_wait1();  // S(t) done, P V may still run
    wgmma_fence_operands(s);
    release(empty_k(st));
    softmax(t);  // touches s, m, l, alpha only: not a[] / o of the running P V
    wgmma_wait0();
    wgmma_fence_operands(o);
    release(empty_v(stp));
    rescale_o();
    pack_p();
  }

  // ---- last P V ----
  {
    const int stp = (n_t - 1) % ST;
    mbar_wait(full_v(stp), ((n_t - 1) / ST) & 1);
    if (tail_last) fence_proxy_async_smem();
    named_bar_sync(my_turn, 256);
    wgmma_fence();
    issue_pv(stp);
    wgmma_commit();
    named_bar_arrive(other_turn, 256);
    wgmma_wait0();
    wgmma_fence_operands(o);
    release(empty_v(stp));
  }
  // Consumer 1 arrived on consumer 0's barrier once more than consumer 0 synced on it (its
  // opening arrive): consume it so no barrier is left half-arrived at exit.
  if (c == 0) named_bar_sync(my_turn, 256);

  // ---- O / l -> bf16 ----
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = quad_sum(l_run[h]);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int row = 16 * cw + g + 8 * h;
    if (row < rows) {
      uint16_t* dst = p.o + (int64_t(i0 + row) * p.n_q_heads + head) * D + tq * 2;
#pragma unroll
      for (int nd = 0; nd < ND; ++nd)
        *reinterpret_cast<uint32_t*>(dst + nd * 8) = pack_bf16(o[nd][2 * h] * inv, o[nd][2 * h + 1] * inv);
    }
  }
#else
  __trap();
#endif
}

// Host side. cuTensorMapEncodeTiled is a driver function: reached through the runtime's
// entry-point query, so nothing links libcuda.
using TensorMapEncodeFn = PFN_cuTensorMapEncodeTiled_v12000;
inline TensorMapEncodeFn tensor_map_encoder() {
  static const TensorMapEncodeFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();  // do not leave the failed query as the sticky "last error"
      return TensorMapEncodeFn(nullptr);
    }
    return reinterpret_cast<TensorMapEncodeFn>(f);
  }();
  return fn;
}

// bf16 tensor map with 128-byte swizzle; dims / box innermost first, strides in bytes (rank-1).
inline const char* encode_bf16_map(CUtensorMap* map, const void* base, cuuint32_t rank,
                                   const cuuint64_t* dims, const cuuint64_t* strides,
                                   const cuuint32_t* box) {
  const TensorMapEncodeFn encode = tensor_map_encoder();
  if (!encode) return "cuTensorMapEncodeTiled is not available from this driver";
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base), dims,
                            strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? nullptr : "cuTensorMapEncodeTiled rejected the layout";
}

// Q, K and V maps of one launch. The page count of the pool is not known here: the pages
// dimension is set to the largest page id a page table can hold (the box never leaves a page).
inline AttentionStatus make_ws_tensor_maps(const AttentionParams& p, WsTensorMaps& m) {
  const cuuint64_t d = static_cast<cuuint64_t>(p.head_dim), e = 2;
  const cuuint64_t q_dims[3] = {d, cuuint64_t(p.n_q_heads), cuuint64_t(p.n_q_tokens)};
  const cuuint64_t q_strides[2] = {d * e, cuuint64_t(p.n_q_heads) * d * e};
  const cuuint32_t q_box[3] = {64, 1, 64};
  const cuuint64_t bs = static_cast<cuuint64_t>(p.block_size), hkv = cuuint64_t(p.n_kv_heads);
  const cuuint64_t kv_dims[4] = {d, bs, hkv, cuuint64_t(INT32_MAX)};
  const cuuint64_t kv_strides[3] = {d * e, bs * d * e, hkv * bs * d * e};
  const cuuint32_t kv_box[4] = {64, 64, 1, 1};
  const char* err = encode_bf16_map(&m.q, p.q, 3, q_dims, q_strides, q_box);
  if (!err) err = encode_bf16_map(&m.k, p.k_pages, 4, kv_dims, kv_strides, kv_box);
  if (!err) err = encode_bf16_map(&m.v, p.v_pages, 4, kv_dims, kv_strides, kv_box);
  if (err) return AttentionStatus::error(std::string("warp-specialised prefill: ") + err);
  return {};
}

// One launch of the kernel above (instantiated in attention_prefill_ws_d*.cu).
template <int D>
AttentionStatus launch_prefill_ws_t(const AttentionParams& p, cudaStream_t stream) {
  constexpr int smem = ws_smem_bytes<D>();
  auto kernel = attention_prefill_ws_kernel<D>;
  // Once per instantiation (and process): the attribute call costs host time on every launch.
  static const cudaError_t attr_err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  SINKSCOPE_CUDA_TRY(AttentionStatus, attr_err);
  WsTensorMaps maps;
  if (auto st = make_ws_tensor_maps(p, maps); !st.ok) return st;
  const dim3 grid(p.n_q_heads, (p.n_q_tokens + kPrefillQueryTile - 1) / kPrefillQueryTile);
  kernel<<<grid, kWsThreads, smem, stream>>>(p, maps.q, maps.k, maps.v);
  SINKSCOPE_CUDA_TRY(AttentionStatus, cudaGetLastError());
  return {};
}

}  // namespace sinkscope::kernels::detail
