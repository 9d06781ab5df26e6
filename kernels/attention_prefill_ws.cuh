// SPDX-License-Identifier: Apache-2.0
// Causal prefill attention over a paged bf16 KV cache for Hopper (sm_90a), FlashAttention-3 style
// (https://arxiv.org/abs/2407.08608): warp-specialised, asynchronous. Dense, or (SPARSE) with the
// block-sparse skip rule of attention_params.h. Design: docs/architecture.md, "The
// warp-specialised prefill (sm_90)".
//
// Structure of one CTA (128 query rows of one query head, 384 threads; with three consumers,
// d = 64 only: 192 rows, 512 threads):
//   WG0       producer: one thread issues TMA copies of Q and of 128-key K / V tiles (one or two
//             pages) into a STAGES-deep shared ring; each copy completes its slot's "full"
//             mbarrier by byte count, and the producer waits only for "empty" slots. The tile
//             holding the cache end goes through cp.async with zero fill instead (TMA would bring
//             the page's stale slots, and 0 * NaN in P V would poison the row). Warps 1-3 exit.
//   WG1..NC   consumers, one 64-row query tile each (consumer c: rows 64c .. 64c+63, mask row
//             NC qt + c): iteration t issues S(t) = Q K(t)^T (wgmma SS) and O += P(t-1) V(t-1)
//             (wgmma RS, V MN-major) back to back, waits for S(t), runs the online softmax of t in
//             the exp2 domain while P V runs, then waits for P V and rescales O.
// Registers move to the consumers with setmaxnreg (two consumers: 40 / 232; three: 32 / 160).
// Ping-pong (dense kernel and sparse variant 0, two consumers): the consumers take turns issuing
// their GEMMs on named barriers 1 and 2. Ring slots, mbarrier parities and wgmma descriptors are
// carried from tile to tile, so the loops do no index division.
// Key slots past kv_len are zero-filled and masked. Probes (tiles_visited, skip_mask) count in
// block_size tiles exactly as the dense !LIST path of attention_prefill_kernel.
// SPARSE: right after the row maxima of S(t) each warp ANDs its rows' votes (__all_sync) and the
// warpgroup combines its four warps with one bar.red.popc on its own named barrier; a skipped
// block_size unit skips exp(), the row-sum update, the P conversion and its P V steps (issued at
// t + 1); a tile skipped whole leaves the running max, the row sums and O untouched.
// skip_softmax_exp = false keeps the skipped unit's exp() in the row sums. V is still loaded (the
// producer runs ahead of the votes). A unit no row of the warpgroup sees is skipped but neither
// visited nor counted, so lambda = 0 equals the dense kernel bit for bit. A consumer without rows
// (the padding of a windowed pass's last CTA) runs every tile all-masked and counts nothing.
#pragma once

#include <type_traits>

#include "kernels/attention_common.cuh"
#include "kernels/attention_dispatch.h"
#include "kernels/attention_launch.h"
#include "kernels/attention_params.h"
#include "kernels/attention_prefill.cuh"
#include "kernels/attention_wgmma.cuh"
#include "kernels/cuda_check.h"
#include "kernels/hopper_ptx.cuh"

#include <cuda.h>  // CUtensorMap (types only: the encoder is reached through the runtime)
#include <cudaTypedefs.h>

#include <cstdint>
#include <string>

namespace sinkscope::kernels::detail {

inline constexpr int kWsKeys = 128;  // keys per KV tile (one or two pages)

// Variants (VAR, bit flags). Dense: 0 (two consumers, ping-ponged) or kWsVarThreeConsumers.
// Sparse: the variant launch_prefill_ws_sparse_t() picks from ws_sparse_consumers(p)
// (attention.cu): 13 (three consumers) or 1 at d = 64, 9 at d = 128. All give the same outputs,
// masks and counters bit for bit.
//   kWsVarNoPingPong (1): no turn barriers (named barriers 1 / 2): both consumers issue their
//     GEMMs as soon as their operands are ready and the tensor cores arbitrate. The barriers only
//     order issue (no data passes through them), so dropping them changes no value.
//   kWsVarThreeConsumers (4): three consumer warpgroups (192 query rows per CTA, 512 threads),
//     for d = 64 only (ws_consumers()): more warps per SM to hide the latency of the S wait and
//     the max / vote chain. No ping-pong (the turn barriers are defined for two consumers).
//     d = 128 has no such kernel (registers: at 512 threads a consumer gets 160, the d = 128 O
//     and S alone take 128).
//   kWsVarNoEmptyGroup (8): no empty commit group, and each P V commit group is one straight
//     sequence of wgmma. Without it the P V of t-1 is issued as one branch per unit and
//     committed after both (an empty group when t-1 was skipped whole): ptxas 13.0 closes that
//     group with a dummy HGMMA.64x8x16 that runs on every iteration, kept or skipped, and ends
//     each unit's branch in a scoreboard group of its own (gsb0), so the WARPGROUP.DEPBAR.LE
//     gsb0, 1 of the wait_group 1 lets only the dummy run on: the softmax of t would start
//     after the kept P V of t-1, not beside it. Here the decision of t-1 picks one of three
//     straight sequences (both units, the first, the second; block_size 128: both), each closed
//     by its own commit and wait_group 1 (no dummy; S(t) and P V are the only two gsb0 groups,
//     so the wait is for S(t) alone); t-1 skipped whole commits nothing and waits with
//     wait_group 0 for S(t), the only group in flight. The last P V after the loop likewise.
//     The same wgmma in the same order on the same accumulators: the same bits. Sparse and
//     without ping-pong only (the turn barrier's arrive sits between the second commit and the
//     wait). At d = 64 the two-consumer sparse kernel runs without it (1, not 9): it was no
//     faster there, and each instantiation costs build time.
// Sparse kernels that lost their timing comparisons and left the tree are listed in
// docs/performance.md ("What we tried and why it lost").
inline constexpr int kWsVarNoPingPong = 1, kWsVarThreeConsumers = 4, kWsVarNoEmptyGroup = 8;
inline constexpr int kWsSparseD64Two = kWsVarNoPingPong;
inline constexpr int kWsSparseD64Three = kWsVarThreeConsumers | kWsVarNoPingPong | kWsVarNoEmptyGroup;
inline constexpr int kWsSparseD128 = kWsVarNoPingPong | kWsVarNoEmptyGroup;

// Consumer warpgroups (one 64-row query tile each) of the variant; the CTA has one producer
// warpgroup more, and kPrefillQueryTile * NC query rows.
constexpr int ws_consumers(int var) { return (var & kWsVarThreeConsumers) ? 3 : 2; }
constexpr int ws_threads(int var) { return 128 * (1 + ws_consumers(var)); }

// Shared ring depth per head dim and consumer count (Q tile + STAGES x (K + V) must fit the
// 227 KB opt-in).
template <int D, int NC = 2>
constexpr int ws_stages() {
  // The producer can refill a slot only once all consumers' GEMMs on it completed, so each
  // stage hides about one iteration of latency. d = 128: as deep as the 227 KB allow at one CTA
  // per SM; d = 64, two consumers: 4 (faster than 3); d = 64, three consumers: 6 (217 KB), since
  // their skipped tiles go by faster than a 4-deep ring refills (the consumers then wait on K / V
  // full barriers).
  return D == 128 ? 3 : (NC == 3 ? 6 : 4);
}
// Byte offset of the SPARSE probe slots behind the mbarriers (16-byte aligned): per consumer,
// 16 bytes = its skip-mask row pointer and its visited unit count, written and read by that
// consumer's probe thread only (kept out of the hot loop's registers).
template <int D, int NC = 2>
constexpr int ws_probe_offset() {
  return (8 * (1 + 4 * ws_stages<D, NC>()) + 15) / 16 * 16;
}
template <int D, int NC>
constexpr int ws_smem_bytes() {
  // + 1 KB to align the tiles to 1024 bytes (swizzle atoms), then the mbarriers:
  // full Q, STAGES x (full K, full V, empty K, empty V), then the NC consumers' probe slots.
  // The Q tile is the CTA's NC query tiles ([64 NC][D]).
  return (kPrefillQueryTile * NC * D + ws_stages<D, NC>() * 2 * kWsKeys * D) * 2 + 1024 +
         ws_probe_offset<D, NC>() + NC * 16;
}
static_assert(ws_smem_bytes<128, 2>() <= 227 * 1024 && ws_smem_bytes<64, 3>() <= 227 * 1024,
              "the Q tile and the K/V ring must fit the shared-memory opt-in");


// The three tensor maps of one launch (built on the host per launch, passed as __grid_constant__
// kernel parameters). Boxes are 64 columns (128 bytes: one swizzle atom row) x 64 rows, so a
// box lands as one [64][64] block of the swz<R>() layout below.
//   q:  {head_dim, n_q_heads, n_q_tokens}, box {64, 1, 64}: rows past n_q_tokens are zero-filled
//   k, v: {head_dim, block_size, n_kv_heads, pages}, box {64, 64, 1, 1}: one (page, kv head)
//         is contiguous (AttentionParams), a 128-key tile is two boxes per 64 columns.
struct WsTensorMaps {
  CUtensorMap q, k, v;
};

#if defined(SINKSCOPE_HAVE_WGMMA) || !defined(__CUDA_ARCH__)
// wgmma_desc() split in its two words: every descriptor of this kernel has sbo 1024 and the
// 128-byte swizzle, so its high word is the constant kWsDescHi, and the low word of a tile's
// k16 step is the tile's low word + byte offset / 16 (shared addresses stay below 2^18, so the
// 14-bit address field never carries into the lbo field). The hot loop then spends one add per
// wgmma on its descriptor instead of recomputing wgmma_desc() from the address.
inline constexpr uint32_t kWsDescHi = (1024u >> 4) | (1u << 30);
__device__ __forceinline__ uint32_t ws_desc_lo(uint32_t saddr, uint32_t lbo) {
  return ((saddr & 0x3ffff) >> 4) | (((lbo & 0x3ffff) >> 4) << 16);
}
__device__ __forceinline__ uint64_t ws_desc(uint32_t lo) { return (uint64_t(kWsDescHi) << 32) | lo; }
#endif

template <int D, bool SPARSE, int VAR = 0>
__global__ void __launch_bounds__(ws_threads(VAR), 1)
    attention_prefill_ws_kernel(const AttentionParams p, const __grid_constant__ CUtensorMap tm_q,
                                const __grid_constant__ CUtensorMap tm_k,
                                const __grid_constant__ CUtensorMap tm_v) {
#ifdef SINKSCOPE_HAVE_WGMMA
  constexpr int NC = ws_consumers(VAR);  // consumer warpgroups = query tiles of the CTA
  constexpr int BR = kPrefillQueryTile * NC, BN = kWsKeys, ST = ws_stages<D, NC>();
  static_assert(kPrefillQueryTile == 64, "one consumer warpgroup = one 64-row query tile");
  static_assert(NC == 2 || D == 64, "three consumers: d = 64 only (consumer registers)");
  constexpr int NB = BN / 8;  // n8 column groups of S
  constexpr int ND = D / 8;   // n8 column groups of O
  constexpr int CH = D / 8;   // 16-byte chunks per row
  // Named barrier ids of the ping-pong (0 is __syncthreads); SPARSE: each consumer's vote barrier
  // (kBarVote0 + c, c < NC; 16 ids per CTA).
  constexpr int kBarTurn0 = 1, kBarVote0 = 3;
  static_assert(kBarVote0 + NC <= 16, "named barrier ids");
  static_assert(SPARSE || VAR == 0 || VAR == kWsVarThreeConsumers,
                "the dense kernel: ping-ponged, or three consumers (ws_dense_consumers(p))");
  constexpr bool kPingPong = NC == 2 && !(VAR & kWsVarNoPingPong);
  constexpr bool kNoEmptyGroup = (VAR & kWsVarNoEmptyGroup) != 0;
  static_assert(!kNoEmptyGroup || (SPARSE && !kPingPong),
                "kWsVarNoEmptyGroup: sparse, without ping-pong (the turns sit between commits)");

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
  const int wg = warp >> 2;  // 0 producer, 1 .. NC consumers
  const PrefillCtaTile ct = prefill_cta_tile(p, BR);
  const int head = ct.head, kvh = ct.kvh, i0 = ct.i0, rows = ct.rows;
  const int64_t q_lo = ct.q_lo, last_key = ct.last_key;
  const int n_t = static_cast<int>(last_key / BN) + 1;  // 128-key tiles visited

  if (tid == 0) {
    mbar_init(full_q, 1);
    for (int s = 0; s < ST; ++s) {
      mbar_init(full_k(s), 1);  // the issuing thread's arrive (+ the copies' bytes)
      mbar_init(full_v(s), 1);
      mbar_init(empty_k(s), 4 * NC);  // one arrival per consumer warp
      mbar_init(empty_v(s), 4 * NC);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    // Probes, as the dense positional path of attention_prefill_kernel (block_size units), per
    // query tile (consumer): its visited units 0 .. its last key / block_size, mask entries 0.
    const int bs = p.block_size;
    const int n_kvt = static_cast<int>((p.kv_len + bs - 1) / bs);
    int n_vis = 0;
    for (int h = 0; h < NC; ++h) {
      const PrefillHalf hf = prefill_half(ct, p.kv_len, h);
      const int n_u = hf.rows == 0 ? 0 : static_cast<int>(hf.last_key / bs) + 1;
      n_vis += n_u;
      uint8_t* mask_row = prefill_mask_row(p, ct, h, hf.rows, n_kvt, NC);
      if (mask_row != nullptr)
        for (int t = 0; t < n_u; ++t) mask_row[t] = 0;
      if constexpr (SPARSE) {
        // The consumer's probe slot: mask row, visited units.
        uint8_t* slot = reinterpret_cast<uint8_t*>(sv + ST * BN * D) + ws_probe_offset<D, NC>() + 16 * h;
        *reinterpret_cast<uint8_t**>(slot) = mask_row;
        *reinterpret_cast<int*>(slot + 8) = n_u;
      }
    }
    if (p.tiles_visited && n_vis)
      atomicAdd(reinterpret_cast<unsigned long long*>(p.tiles_visited + head),
                static_cast<unsigned long long>(n_vis));
  }
  __syncthreads();

  if (wg == 0) {
    // ================= producer =================
    // NC = 3: 512 threads x 1 CTA leave 128 registers per thread; 32 + 3 x 160 = 4 x 128.
    setmaxnreg_dec<NC == 2 ? 40 : 32>();
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
    // every lane's copies landed. At most one such tile per CTA. NC = 3 unrolls by 2 only: by 4
    // the copy loop spills (4 bytes) in the producer's 32 registers.
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
#pragma unroll(NC == 2 ? 4 : 2)
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
  setmaxnreg_inc<NC == 2 ? 232 : 160>();
  const int c = wg - 1;             // consumer c: rows 64c .. 64c+63
  const int cw = warp - 4;          // consumer warp 0 .. 4NC-1: rows 16*cw ..
  const int g = lane >> 2, tq = lane & 3;
  const int my_turn = kBarTurn0 + c, other_turn = kBarTurn0 + (1 - c);  // kPingPong: NC = 2
  // Low descriptor words (ws_desc_lo) of this consumer's Q rows and of K / V stage 0, broadcast
  // from lane 0 so that ptxas sees warp-uniform values: the descriptors are then formed in
  // uniform registers (one add each), with no R2UR per wgmma (c comes from threadIdx).
  const uint32_t qd = __shfl_sync(0xffffffffu, ws_desc_lo(smem_u32(sq) + c * 64 * 128, 16), 0);
  const uint32_t kd = __shfl_sync(0xffffffffu, ws_desc_lo(smem_u32(sk), 16), 0);
  const uint32_t vd = __shfl_sync(0xffffffffu, ws_desc_lo(smem_u32(sv), BN * 128), 0);
  constexpr uint32_t kStageDesc = BN * D * 2 / 16;  // one K or V stage, in descriptor units
  const float sl2 = p.scale * kLog2e;

  float o[ND][4];
  float s[NB][4];
  // P in bf16 (the A operand of P V).
  uint32_t a[1][BN / 16][4];
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
    const uint32_t kb = kd + st * kStageDesc;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t off = (ks & 3) * 32 / 16;
      wgmma_ss<BN>(s, ws_desc(qd + (ks >> 2) * BR * 128 / 16 + off),
                   ws_desc(kb + (ks >> 2) * BN * 128 / 16 + off), ks > 0);
    }
  };
  // O += P V(t) over the k16 steps [kk0, kk1): V MN-major, 8-key groups 1024 B apart, 64-column
  // blocks BN*128 B apart. k16 steps 0 .. BN/32-1 are the first 64 keys.
  auto issue_pv = [&](const uint32_t(&pa)[BN / 16][4], int st, int kk0 = 0, int kk1 = kWsKeys / 16) {
    const uint32_t vb = vd + st * kStageDesc;
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      if (kk >= kk0 && kk < kk1) wgmma_rs<D>(o, pa[kk], ws_desc(vb + kk * 2048 / 16));
  };
  // Consumer warps release a slot once their wgmma reading it has completed.
  auto release = [&](uint32_t bar) {
    if (lane == 0) mbar_arrive(bar);
  };
  // Causal / cache-end / padding-row mask of tile t. Tile t needs it iff t >= t_mask: its last
  // key lies past this consumer's first row (t*BN + BN-1 > q_lo + 64c, i.e. t >= (q_lo + 64c +
  // 1) / BN), or past the cache end (t*BN + BN > kv_len, i.e. t >= kv_len / BN), or the consumer
  // has padding rows (every t). Clamped to n_t (t < n_t): one compare per tile.
  const int t_mask = [&] {
    const int row_lo = 64 * c;
    if (rows < row_lo + 64) return 0;
    const int64_t t1 = (q_lo + row_lo + 1) / BN, t2 = p.kv_len / BN;
    const int64_t tm = t1 < t2 ? t1 : t2;
    return tm < n_t ? static_cast<int>(tm) : n_t;
  }();
  auto mask_tile = [&](int t) {
    const int64_t key0 = int64_t(t) * BN;
    if (t >= t_mask) {
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
  };
  // Row h of the tile: s becomes P = exp2(s * sl2 - m_use), with the sums of the two 64-key halves
  // kept apart (a SPARSE half enters the row sums on its own; the dense variant sums the same way
  // so that lambda = 0 equals it bit for bit).
  auto exp_row = [&](int h, float m_use, float& r0, float& r1) {
    r0 = 0.f;
    r1 = 0.f;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
      const float p0 = fast_exp2(fmaf(s[nb][2 * h], sl2, -m_use));
      const float p1 = fast_exp2(fmaf(s[nb][2 * h + 1], sl2, -m_use));
      s[nb][2 * h] = p0;
      s[nb][2 * h + 1] = p1;
      if (nb < NB / 2) r0 += p0 + p1;
      else r1 += p0 + p1;
    }
  };
  // Mask, then the online softmax of tile t: s becomes P (fp32), alpha the factor O must be
  // scaled by once the previous P V has landed.
  auto softmax = [&](int t) {
    mask_tile(t);
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
      float r0, r1;
      exp_row(h, m_use, r0, r1);
      l_run[h] = fmaf(l_run[h], alpha[h], r0 + r1);
    }
  };
  auto pack_p = [&](uint32_t(&pa)[BN / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
      pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
      pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
  };
  auto rescale_o = [&](const float(&al)[2]) {
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) {
      o[nd][0] *= al[0];
      o[nd][1] *= al[0];
      o[nd][2] *= al[1];
      o[nd][3] *= al[1];
    }
  };

  // Consumer 0 issues first: consumer 1 opens its turn barrier.
  if (kPingPong && c == 1) named_bar_arrive(other_turn, 256);
  mbar_wait(full_q, 0);

  // Only the last tile can hold the cache end; it alone is written by cp.async (generic proxy),
  // so it alone needs the proxy fence before wgmma reads it (TMA writes are async-proxy).
  const bool tail_last = int64_t(n_t) * BN > p.kv_len;

  // ---- SPARSE: the vote and decision of one query tile (this consumer) ----
  const int bs = p.block_size;
  // The first thread of each consumer writes its query tile's probes (skipped units; the mask's
  // 1 entries). Its mask row and visited unit count wait in its shared probe slot.
  const bool probe = SPARSE && (tid & 127) == 0;
  uint32_t n_skipped = 0;
  // Mask, row maxima, votes, decision, then the online softmax of the kept units of tile t.
  // Returns the decision (warp-uniform): bit 0 the first 64-key unit skipped, bit 1 the second
  // (block_size 128: both bits or none, the tile is one unit). The vote of a unit compares each
  // row's max in it with the running max before it: at block_size 64 the second half's is the
  // max after the first half, the same whether or not the first half is skipped (lambda < 1). The
  // first unit (t = 0, compile-time `first`) is never skipped. The differences to the running max
  // are rounded as the kernel always did (explicit, so that no contraction choice can move a
  // vote): one unit fmaf(mx, sl2, -m); block_size 64: row 0's first half mh0 * sl2 - m in two
  // roundings, row 1's fmaf, each second half fmaf(mh1, sl2, -max(m, mh0 * sl2)).
  auto softmax_sparse = [&](int t, auto first_c) -> int {
    constexpr bool first = decltype(first_c)::value;
    mask_tile(t);
    const float thr = p.log2_lambda;
    const bool one = bs == BN;  // one unit per tile
    bool agree0 = true, agree1 = true;
    float mxs[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v0 = kNegInf, v1 = kNegInf;
#pragma unroll
      for (int nb = 0; nb < NB / 2; ++nb) {
        v0 = fmaxf(v0, fmaxf(s[nb][2 * h], s[nb][2 * h + 1]));
        v1 = fmaxf(v1, fmaxf(s[NB / 2 + nb][2 * h], s[NB / 2 + nb][2 * h + 1]));
      }
      const float mh0 = quad_max(v0), mh1 = quad_max(v1);
      const float mx = fmaxf(mh0, mh1);
      const float mh0s = __fmul_rn(mh0, sl2);
      const float d64 = h == 0 ? __fsub_rn(mh0s, m_run[h]) : fmaf(mh0, sl2, -m_run[h]);
      const float u0 = one ? mx : mh0;
      const float d0 = one ? fmaf(mx, sl2, -m_run[h]) : d64;
      agree0 &= (u0 == kNegInf) | (d0 < thr);
      agree1 &= (mh1 == kNegInf) | (fmaf(mh1, sl2, -fmaxf(m_run[h], mh0s)) < thr);
      mxs[h] = mx;
    }
    const bool w0 = first ? false : __all_sync(0xffffffffu, agree0);
    const bool v1 = __all_sync(0xffffffffu, agree1);
    const bool w1 = one ? w0 : v1;
    // The warpgroup's AND of both units' votes in one reduction: lane 0 of each warp counts 1
    // when its warp keeps unit 0, lanes 8..15 count 8 when it keeps unit 1, so the count is
    // n0 + 8 n1 with n0 <= 4 (the keeping warps of each unit).
    const bool keep_bit = lane == 0 ? !w0 : ((lane >> 3) == 1 ? !w1 : false);
    const uint32_t cnt = named_bar_red_popc(kBarVote0 + c, 128, keep_bit);
    const int sk_own = ((cnt & 7u) == 0 ? 1 : 0) | (cnt < 8u ? 2 : 0);
    // Lane 0's value broadcast, so that ptxas sees a warp-uniform value around the P V wgmma (a
    // branch it cannot prove uniform serialises every wgmma); every lane holds the same anyway.
    const int sk = __shfl_sync(0xffffffffu, sk_own, 0);
    const bool drop = p.skip_softmax_exp;
    if (drop && sk == 3) return sk;  // nothing moves: m, l and O stay (no rescale either)
    const bool e0 = !(drop && (sk & 1)), e1 = !(drop && (sk & 2));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m_new = fmaxf(m_run[h], mxs[h] * sl2);
      const float m_use = safe_max(m_new);
      alpha[h] = fast_exp2(m_run[h] - m_use);
      m_run[h] = m_new;
      // The sums of the two 64-key halves kept apart, in the dense kernel's order (exp_row).
      float r0 = 0.f, r1 = 0.f;
      if (e0) {
#pragma unroll
        for (int nb = 0; nb < NB / 2; ++nb) {
          const float p0 = fast_exp2(fmaf(s[nb][2 * h], sl2, -m_use));
          const float p1 = fast_exp2(fmaf(s[nb][2 * h + 1], sl2, -m_use));
          s[nb][2 * h] = p0;
          s[nb][2 * h + 1] = p1;
          r0 += p0 + p1;
        }
      }
      if (e1) {
#pragma unroll
        for (int nb = NB / 2; nb < NB; ++nb) {
          const float p0 = fast_exp2(fmaf(s[nb][2 * h], sl2, -m_use));
          const float p1 = fast_exp2(fmaf(s[nb][2 * h + 1], sl2, -m_use));
          s[nb][2 * h] = p0;
          s[nb][2 * h + 1] = p1;
          r1 += p0 + p1;
        }
      }
      l_run[h] = fmaf(l_run[h], alpha[h], r0 + r1);
    }
    return sk;
  };
  // Probe thread: the visited units of tile t that the decision sk skips (block_size 128: the
  // tile, unit t; 64: bit b, unit 2t + b) into the counter and the skip mask.
  auto mark_skipped = [&](int t, int sk) {
    const uint8_t* slot = reinterpret_cast<const uint8_t*>(sv + ST * BN * D) + ws_probe_offset<D, NC>() + 16 * c;
    uint8_t* const row = *reinterpret_cast<uint8_t* const*>(slot);
    const int n_u = *reinterpret_cast<const int*>(slot + 8);
    if (bs == BN) {
      if (t < n_u) {
        ++n_skipped;
        if (row != nullptr) row[t] = 1;
      }
    } else {
#pragma unroll
      for (int b = 0; b < 2; ++b)
        if ((sk >> b & 1) && 2 * t + b < n_u) {
          ++n_skipped;
          if (row != nullptr) row[2 * t + b] = 1;
        }
    }
  };
  // P of the kept units (SPARSE: the k16 steps of a skipped unit are never read).
  auto pack_kept = [&](int sk) {
    if constexpr (!SPARSE) {
      pack_p(a[0]);
    } else {
      // One uniform branch per unit (not per k16 step).
      auto pack_range = [&](int kk0, int kk1) {
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          if (kk < kk0 || kk >= kk1) continue;  // compile-time after unrolling
          a[0][kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
          a[0][kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
          a[0][kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
          a[0][kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
        }
      };
      if (!(sk & 1)) pack_range(0, BN / 32);
      if (!(sk & 2)) pack_range(BN / 32, BN / 16);
    }
  };
  // O += P V of the tile whose P is in a[0] (decision sk: only the kept units' k16 steps).
  auto issue_pv_kept = [&](int st, int sk) {
    if constexpr (!SPARSE) {
      issue_pv(a[0], st);
    } else {
      if (!(sk & 1)) issue_pv(a[0], st, 0, BN / 32);
      if (!(sk & 2)) issue_pv(a[0], st, BN / 32, BN / 16);
    }
  };
  // kNoEmptyGroup: O += P V of the tile whose P is in a[0] (decision sk) as one commit group,
  // then wgmma.wait_group kPending. Each decision gets its own straight sequence of wgmma and
  // its own commit and wait, so ptxas closes the group on a wgmma that always issues (no
  // dummy) and the wait counts this group alone; sk == 3 commits nothing and waits with
  // wait_group 0 (with kPending = 1 the group in flight before it, S(t), must be done after the
  // call as on the other paths; wait_group 1 would let it run on).
  auto pv_group_wait = [&](int st, int sk, auto pending_c) {
    constexpr int kPending = decltype(pending_c)::value;
    static_assert(kPending == 0 || kPending == 1, "wait_group 0 or 1");
    auto commit_wait = [&] {
      wgmma_commit();
      if constexpr (kPending == 1) wgmma_wait1();
      else wgmma_wait0();
    };
    if (sk == 0) {
      issue_pv(a[0], st);
      commit_wait();
    } else if (sk == 1) {  // block_size 64 only: the second unit
      issue_pv(a[0], st, BN / 32, BN / 16);
      commit_wait();
    } else if (sk == 2) {  // block_size 64 only: the first unit
      issue_pv(a[0], st, 0, BN / 32);
      commit_wait();
    } else {
      wgmma_wait0();
    }
  };
  // Softmax of tile t: the dense one, or the vote + decision (and the probe's marks).
  auto softmax_t = [&](int t, auto first_c) -> int {
    if constexpr (!SPARSE) {
      softmax(t);
      return 0;
    } else {
      const int sk = softmax_sparse(t, first_c);
      if (probe && sk != 0) mark_skipped(t, sk);
      return sk;
    }
  };
  // Whether O must be scaled by alpha(t): always, except a SPARSE tile skipped whole with its
  // exp() (alpha would be 1: the running max did not move).
  auto moved = [&](int sk) { return !SPARSE || sk != 3 || !p.skip_softmax_exp; };

  {
    // ---- tile 0: S only ----
    mbar_wait(full_k(0), 0);
    if (tail_last && n_t == 1) fence_proxy_async_smem();
    if (kPingPong) named_bar_sync(my_turn, 256);
    wgmma_fence();
    issue_qk(0);
    wgmma_commit();
    if (kPingPong) named_bar_arrive(other_turn, 256);
    wgmma_wait0();
    wgmma_fence_operands(s);
    release(empty_k(0));
    int skp = softmax_t(0, std::true_type{});  // decision of the tile whose P is in a[0]
    pack_kept(skp);

    // ---- tiles 1 .. n_t-1: S(t) and P(t-1) V(t-1) in flight together ----
    // Ring slot and phase parity of tile t (st, ph = t % ST, (t / ST) & 1) and of t-1 (stp, php),
    // carried from tile to tile. SPARSE: V(t-1) is waited for (and released) whether or not any
    // unit of t-1 is kept, so that the producer never refills a slot whose copy is in flight.
    int st = 1 % ST, stp = 0;
    uint32_t ph = 1 / ST, php = 0;
#pragma unroll 1
    for (int t = 1; t < n_t; ++t) {
      mbar_wait(full_k(st), ph);
      mbar_wait(full_v(stp), php);
      if (tail_last && t == n_t - 1) fence_proxy_async_smem();
      if (kPingPong) named_bar_sync(my_turn, 256);
      wgmma_fence();  // a[] and o were last written by ordinary instructions
      issue_qk(st);
      wgmma_commit();
      if constexpr (kNoEmptyGroup) {
        pv_group_wait(stp, skp, std::integral_constant<int, 1>{});  // S(t) done, P V may still run
      } else {
        issue_pv_kept(stp, skp);  // skp is warp-uniform
        wgmma_commit();  // (SPARSE: empty when t-1 is skipped whole; wait1 still means "S done")
        if (kPingPong) named_bar_arrive(other_turn, 256);
        wgmma_wait1();  // S(t) done, P V may still run
      }
      wgmma_fence_operands(s);
      release(empty_k(st));
      const int sk = softmax_t(t, std::false_type{});  // s, m, l, alpha only: not a[] / o
      wgmma_wait0();
      wgmma_fence_operands(o);
      release(empty_v(stp));
      if (moved(sk)) rescale_o(alpha);
      pack_kept(sk);
      skp = sk;
      stp = st;
      php = ph;
      if (++st == ST) {
        st = 0;
        ph ^= 1u;
      }
    }

    // ---- last P V (stp, php: tile n_t-1) ----
    {
      mbar_wait(full_v(stp), php);
      if (tail_last) fence_proxy_async_smem();
      if (kPingPong) named_bar_sync(my_turn, 256);
      wgmma_fence();
      if constexpr (kNoEmptyGroup) {
        pv_group_wait(stp, skp, std::integral_constant<int, 0>{});
      } else {
        issue_pv_kept(stp, skp);
        wgmma_commit();
        if (kPingPong) named_bar_arrive(other_turn, 256);
        wgmma_wait0();
      }
      wgmma_fence_operands(o);
      release(empty_v(stp));
    }
    // Consumer 1 arrived on consumer 0's barrier once more than consumer 0 synced on it (its
    // opening arrive): consume it so no barrier is left half-arrived at exit.
    if (kPingPong && c == 0) named_bar_sync(my_turn, 256);
  }
  if (probe && p.tiles_skipped && n_skipped)
    atomicAdd(reinterpret_cast<unsigned long long*>(p.tiles_skipped + head),
              static_cast<unsigned long long>(n_skipped));

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
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
      if (e != cudaSuccess) cudaGetLastError();  // the query's own error, once per process
      return TensorMapEncodeFn(nullptr);
    }
    return reinterpret_cast<TensorMapEncodeFn>(f);
  }();
  return fn;
}

// bf16 tensor map with 128-byte swizzle; dims / box innermost first, strides in bytes (rank-1).
// Returns an empty string, or what went wrong.
inline std::string encode_bf16_map(CUtensorMap* map, const char* what, const void* base, cuuint32_t rank,
                                   const cuuint64_t* dims, const cuuint64_t* strides,
                                   const cuuint32_t* box) {
  const TensorMapEncodeFn encode = tensor_map_encoder();
  if (!encode) return "cuTensorMapEncodeTiled is not available from this driver";
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base), dims,
                            strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r == CUDA_SUCCESS) return {};
  return std::string("cuTensorMapEncodeTiled rejected the ") + what + " layout (CUresult " +
         std::to_string(static_cast<int>(r)) + ")";
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
  std::string err = encode_bf16_map(&m.q, "Q", p.q, 3, q_dims, q_strides, q_box);
  if (err.empty()) err = encode_bf16_map(&m.k, "K pool", p.k_pages, 4, kv_dims, kv_strides, kv_box);
  if (err.empty()) err = encode_bf16_map(&m.v, "V pool", p.v_pages, 4, kv_dims, kv_strides, kv_box);
  if (!err.empty()) return AttentionStatus::error("warp-specialised prefill: " + err);
  return {};
}

// One launch of the kernel above (instantiated in attention_prefill_ws_d*.cu).
template <int D, bool SPARSE, int VAR = 0>
AttentionStatus launch_prefill_ws_t(const AttentionParams& p, cudaStream_t stream) {
  constexpr int NC = ws_consumers(VAR), BR = kPrefillQueryTile * NC;
  constexpr int smem = ws_smem_bytes<D, NC>();
  auto kernel = attention_prefill_ws_kernel<D, SPARSE, VAR>;
  // Once per instantiation (and process): the attribute call costs host time on every launch.
  static const cudaError_t attr_err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  SINKSCOPE_CUDA_TRY(AttentionStatus, attr_err);
  WsTensorMaps maps;
  if (auto st = make_ws_tensor_maps(p, maps); !st.ok) return st;
  const dim3 grid(p.n_q_heads, (p.n_q_tokens + BR - 1) / BR);
  kernel<<<grid, ws_threads(VAR), smem, stream>>>(p, maps.q, maps.k, maps.v);
  SINKSCOPE_CUDA_TRY(AttentionStatus, cudaGetLastError());
  return {};
}

// The sparse kernel with three consumer warpgroups (d = 64 only) or two.
template <int D>
AttentionStatus launch_prefill_ws_sparse_t(const AttentionParams& p, bool three_consumers,
                                           cudaStream_t stream) {
  if constexpr (D == 64) {
    return three_consumers ? launch_prefill_ws_t<D, true, kWsSparseD64Three>(p, stream)
                           : launch_prefill_ws_t<D, true, kWsSparseD64Two>(p, stream);
  } else {
    (void)three_consumers;
    return launch_prefill_ws_t<D, true, kWsSparseD128>(p, stream);
  }
}

}  // namespace sinkscope::kernels::detail
