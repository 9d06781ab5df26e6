// SPDX-License-Identifier: Apache-2.0
// Host-side kernel selection for the attention family: ONE pure function picks the variant, used by
// attention_supported() and by the launcher alike (docs/architecture.md, design principle 6). Plain
// C++, no CUDA, so CI tests it without a GPU (tests/unit/test_attention_dispatch.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/attention_params.h"

namespace sinkscope::kernels {

enum class AttentionVariant : uint8_t {
  kUnsupported,
  kPrefillDense,        // tensor-core FA2-style kernel, no vote
  kPrefillSparse,       // + block-wide skip vote; V prefetched with K (best when few tiles skip)
  kPrefillSparseLazyV,  // + V of tile t loaded only after t's vote said "compute"
  kDecodeDense,         // one query token: split-KV, one pass, then combine
  kDecodeSparse,        // two passes (scores + tile maxima, then V of non-skipped tiles), combine
};

inline const char* variant_name(AttentionVariant v) {
  switch (v) {
    case AttentionVariant::kUnsupported: return "unsupported";
    case AttentionVariant::kPrefillDense: return "prefill_dense";
    case AttentionVariant::kPrefillSparse: return "prefill_sparse";
    case AttentionVariant::kPrefillSparseLazyV: return "prefill_sparse_lazy_v";
    case AttentionVariant::kDecodeDense: return "decode_dense";
    case AttentionVariant::kDecodeSparse: return "decode_sparse";
  }
  return "?";
}

// What the choice depends on (a subset of AttentionParams, so tests can build it directly).
struct AttentionShape {
  int n_q_tokens = 0, n_q_heads = 0, n_kv_heads = 0, head_dim = 0, block_size = 0;
  int64_t kv_len = 0, q_start = 0;
  float log2_lambda = -std::numeric_limits<float>::infinity();
  bool skip_value_load = true;
  bool force_sparse_kernel = false;
  // Hopper path allowed: the device is sm_90, the build has sm_90a code, and the caller did not
  // ask for the portable path (AttentionParams::prefer_wgmma).
  bool wgmma_ok = false;
  // Length / lambda read from device memory (AttentionParams::kv_len_dev, log2_lambda_dev):
  // decode only; kv_len is then the upper bound and q_start = kv_len - 1.
  bool device_len = false;
  bool device_lambda = false;
  // Live-page list (AttentionParams::tile_pos0): tiles listed (0 = positional tiles).
  int list_tiles = 0;
  int own_window = 0;  // AttentionParams::own_window
  bool softcap = false;  // AttentionParams::softcap > 0
  bool learned_sinks = false;  // AttentionParams::sinks
  bool sink_queries = false;  // AttentionParams::q_sink
  int kv_bits = 0;            // AttentionParams::kv_bits: 0 bf16, 8 / 4 quantized pages
  // Warp-specialised prefill (dense and sparse) allowed (AttentionParams::prefer_ws, and on the
  // device launcher's side GpuTuning::prefill_ws); it also needs wgmma_ok.
  bool prefer_ws = true;
  // Sparse prefill: the warp-specialised sparse kernel allowed (AttentionParams::
  // prefer_ws_sparse, and on the device side GpuTuning::prefill_ws_sparse).
  bool prefer_ws_sparse = true;
};

inline AttentionShape shape_of(const AttentionParams& p) {
  AttentionShape s{p.n_q_tokens, p.n_q_heads,   p.n_kv_heads,      p.head_dim,
                   p.block_size, p.kv_len,      p.q_start,         p.log2_lambda,
                   p.skip_value_load, p.force_sparse_kernel, false};
  s.device_len = p.kv_len_dev != nullptr || p.n_tiles_dev != nullptr;
  s.device_lambda = p.log2_lambda_dev != nullptr;
  s.list_tiles = p.tile_pos0 != nullptr ? (p.n_tiles > 0 ? p.n_tiles : -1) : 0;
  s.own_window = p.own_window;
  s.softcap = p.softcap > 0;
  s.learned_sinks = p.sinks != nullptr;
  s.sink_queries = p.q_sink != nullptr;
  s.kv_bits = p.kv_bits;
  s.prefer_ws = p.prefer_ws;
  s.prefer_ws_sparse = p.prefer_ws_sparse;
  if (s.device_len) s.q_start = s.kv_len - 1;
  return s;
}

struct AttentionChoice {
  AttentionVariant variant = AttentionVariant::kUnsupported;
  const char* reason = "";  // why unsupported; empty otherwise
  bool wgmma = false;       // prefill: Hopper wgmma GEMMs instead of mma.sync
  // Prefill (wgmma too): the warp-specialised kernel (attention_prefill_ws.cuh) instead of
  // attention_prefill_kernel, dense or sparse (one sparse kernel for both sparse variants: it
  // loads V whatever the vote; the variant says what prefer_ws = false runs). Positional bf16
  // tiles only.
  bool warp_specialized = false;
  bool ok() const { return variant != AttentionVariant::kUnsupported; }
};

// Head dims at which sparse prefill runs the warp-specialised sparse kernel (where it is allowed:
// positional bf16 tiles, wgmma, prefer_ws, prefer_ws_sparse). With 64-row query tiles each
// consumer warpgroup decides alone right after its row maxima and skips exp(), the P conversion
// and P V of a skipped unit at once, so it beats the wgmma lazy-V kernel at both head dims
// (bench_attention rows ours_ws_sparse vs ours_sparse_lazyV; docs/performance.md). The lazy-V
// kernel stays reachable through prefer_ws_sparse = false.
inline constexpr bool ws_sparse_prefill_head_dim(int head_dim) {
  return head_dim == 64 || head_dim == 128;
}

// log2(lambda) as the kernels compare it; -inf for lambda <= 0 (dense).
inline float log2_of_lambda(double lambda) {
  return lambda > 0.0 ? static_cast<float>(std::log2(lambda))
                      : -std::numeric_limits<float>::infinity();
}

// The one selection function.
inline AttentionChoice select_attention_kernel(const AttentionShape& s) {
  auto no = [](const char* why) { return AttentionChoice{AttentionVariant::kUnsupported, why}; };
  if (s.head_dim != 64 && s.head_dim != 128) return no("head_dim must be 64 or 128");
  if (s.block_size != 64 && s.block_size != 128) return no("block_size must be 64 or 128");
  if (s.n_q_tokens < 1) return no("n_q_tokens must be >= 1");
  if (s.n_q_heads < 1 || s.n_kv_heads < 1 || s.n_q_heads % s.n_kv_heads != 0)
    return no("n_q_heads must be a positive multiple of n_kv_heads");
  const int group = s.n_q_heads / s.n_kv_heads;
  if (s.kv_len < 1) return no("kv_len must be >= 1");
  if (s.q_start < 0 || s.q_start + s.n_q_tokens > s.kv_len)
    return no("queries must lie inside the cache: 0 <= q_start, q_start + n_q_tokens <= kv_len");
  if (std::isnan(s.log2_lambda) || s.log2_lambda >= 0.f)
    return no("lambda must be in [0, 1)");
  const bool sparse = s.log2_lambda > -std::numeric_limits<float>::infinity() ||
                      s.force_sparse_kernel;
  if (s.list_tiles < 0) return no("a live-page list (tile_pos0) needs n_tiles >= 1");
  if (s.own_window < 0) return no("own_window must be >= 0");
  if (s.own_window > 0 && s.list_tiles == 0)
    return no("own_window (a layer's own sliding window) needs a live-page list (tile_pos0)");
  if (s.kv_bits != 0 && s.kv_bits != 8 && s.kv_bits != 4) return no("kv_bits must be 0, 8 or 4");
  if (s.sink_queries && s.list_tiles == 0)
    return no("q_sink (cache position mode) needs a live-page list (tile_pos0)");
  if (s.n_q_tokens == 1 && group <= 8) {
    return {sparse ? AttentionVariant::kDecodeSparse : AttentionVariant::kDecodeDense, ""};
  }
  if (s.device_len || s.device_lambda)
    return no("kv_len_dev / log2_lambda_dev need the decode kernels (one query, group <= 8)");
  // Quantized KV: the mma.sync prefill kernels with V loaded with K (dequantised into the
  // shared tile; the only quantized prefill instantiations, to bound the build time).
  const bool wg = s.wgmma_ok && s.kv_bits == 0;
  const bool ws = wg && s.prefer_ws && s.list_tiles == 0 && !s.sink_queries && !s.softcap &&
                  !s.learned_sinks;
  if (!sparse) return {AttentionVariant::kPrefillDense, "", wg, ws};
  // Sparse: the warp-specialised sparse kernel where ws_sparse_prefill_head_dim() says so and
  // prefer_ws_sparse allows it; else the wgmma (or mma.sync) sparse kernels, lazy V when
  // skip_value_load (bf16 pages), eager V otherwise. The variant says what those would run.
  return {s.skip_value_load && s.kv_bits == 0 ? AttentionVariant::kPrefillSparseLazyV
                                              : AttentionVariant::kPrefillSparse,
          "", wg, ws && s.prefer_ws_sparse && ws_sparse_prefill_head_dim(s.head_dim)};
}

// Prefill tile shape per (head_dim, block_size, wgmma): query rows per CTA are always
// kPrefillCtaRows (two query tiles of kPrefillQueryTile rows); each warp owns m_tiles*16 rows, so
// the first half of the warps holds query tile 0 and the second half query tile 1. mma.sync: two 16-row tiles per warp halve
// the shared-memory reads of K and V per FLOP, but with 128-key tiles the score and output
// accumulators would no longer fit in registers, so those use one 16-row tile per warp.
// wgmma: two warpgroups of 64 rows (8 warps x 16 rows); operands stream from shared memory.
struct PrefillTileConfig {
  int m_tiles;  // 16-row mma tiles per warp
  int warps;    // kPrefillCtaRows / (16 * m_tiles)
};
inline constexpr PrefillTileConfig prefill_tile_config(int /*head_dim*/, int block_size,
                                                       bool wgmma) {
  return (block_size == 64 && !wgmma) ? PrefillTileConfig{2, kPrefillCtaRows / 32}
                                      : PrefillTileConfig{1, kPrefillCtaRows / 16};
}

// Decode split-KV plan: tiles of the one query are cut into n_splits contiguous ranges so that
// n_splits * n_kv_heads CTAs fill the GPU (ctas_per_sm resident per SM) with whole tiles each.
// A host launch runs exactly n_splits CTAs per KV head. A launch with a device-side length
// (AttentionParams::kv_len_dev) runs decode_bound_plan(bound) CTAs and each CTA recomputes the
// plan of the actual length with decode_split_plan_tiles (constexpr: also compiled for the
// device), so the tiles -> split assignment, and with it every rounding, equals the host launch.
//
// Longer sequences may take more CTAs (DecodeSplitPolicy): with min_tiles > 0 the splits grow
// from the base target toward target_hi (max_ctas_per_sm per SM) as long as each split keeps at
// least min_tiles tiles. A split spends a fixed cost (page ids, the first DRAM round trip, its
// partial, one more partial for the combine), so few-tile splits stay at the base target, and a
// long sequence gets the extra CTAs that keep more loads in flight (`bench_attention
// --decode-split` compares the policies; up to 32K keys at d = 64 the plan is the base one).
struct DecodeSplitPlan {
  int n_tiles = 0;          // visible KV tiles of the query (of the bound: workspace row stride)
  int n_splits = 0;         // CTAs per KV head (of the bound: grid and workspace split stride)
  int tiles_per_split = 0;  // the last split may hold fewer
  // Inputs of the device-side re-plan: splits wanted for a full GPU, the most splits a long
  // sequence may take (0: target) and the fewest tiles each of those extra splits must keep.
  int target = 1;
  int target_hi = 0;
  int min_tiles = 0;
};
// How a decode launch cuts its tiles: the CTAs per SM its grid aims at, and up to how many per SM
// (max_ctas_per_sm, 0: the same) while every split keeps >= min_tiles tiles (0: never more).
// Converts from a plain CTAs-per-SM count.
struct DecodeSplitPolicy {
  int ctas_per_sm = 2;
  int max_ctas_per_sm = 0;
  int min_tiles = 0;
  constexpr DecodeSplitPolicy(int ctas = 2, int max_ctas = 0, int tiles = 0)
      : ctas_per_sm(ctas), max_ctas_per_sm(max_ctas), min_tiles(tiles) {}
};
inline constexpr int kDecodeMaxTilesPerSplit = 512;  // bounds the per-CTA shared skip list

inline constexpr int decode_target_splits(int n_kv_heads, int n_sms, int ctas_per_sm = 2) {
  const int kv = n_kv_heads < 1 ? 1 : n_kv_heads;
  const int t = (n_sms * ctas_per_sm + kv - 1) / kv;
  return t < 1 ? 1 : t;
}
// Splits before removing empty ones: max(target, min(target_hi, n_tiles / min_tiles)) (the
// second term only with min_tiles > 0), at most n_tiles, at least ceil(n_tiles / 512).
// Non-decreasing in n_tiles, and >= the n_splits of the plan, so the value at a bound is a grid
// that covers every shorter length.
inline constexpr int decode_max_splits(int n_tiles, int target, int target_hi = 0,
                                       int min_tiles = 0) {
  if (n_tiles <= 0) return 0;
  int splits = target < 1 ? 1 : target;
  if (min_tiles > 0 && target_hi > splits) {
    const int more = n_tiles / min_tiles;
    const int grow = more < target_hi ? more : target_hi;
    splits = grow > splits ? grow : splits;
  }
  splits = splits > n_tiles ? n_tiles : splits;
  const int min_splits = (n_tiles + kDecodeMaxTilesPerSplit - 1) / kDecodeMaxTilesPerSplit;
  return splits < min_splits ? min_splits : splits;
}
inline constexpr DecodeSplitPlan decode_split_plan_tiles(int n_tiles, int target, int target_hi = 0,
                                                         int min_tiles = 0) {
  DecodeSplitPlan p;
  p.target = target;
  p.target_hi = target_hi > target ? target_hi : 0;
  p.min_tiles = p.target_hi > 0 && min_tiles > 0 ? min_tiles : 0;
  p.n_tiles = n_tiles > 0 ? n_tiles : 0;
  if (n_tiles <= 0) return p;
  const int splits = decode_max_splits(n_tiles, target, p.target_hi, p.min_tiles);
  p.tiles_per_split = (n_tiles + splits - 1) / splits;
  p.n_splits = (n_tiles + p.tiles_per_split - 1) / p.tiles_per_split;  // no empty split
  return p;
}
inline DecodeSplitPlan decode_split_plan(int64_t visible_keys, int block_size, int n_kv_heads,
                                         int n_sms, DecodeSplitPolicy pol = {}) {
  const int n_tiles = static_cast<int>((visible_keys + block_size - 1) / block_size);
  const int hi = pol.max_ctas_per_sm > pol.ctas_per_sm
                     ? decode_target_splits(n_kv_heads, n_sms, pol.max_ctas_per_sm)
                     : 0;
  return decode_split_plan_tiles(n_tiles, decode_target_splits(n_kv_heads, n_sms, pol.ctas_per_sm),
                                 hi, pol.min_tiles);
}
// Geometry of a launch whose length is read on the device and is at most bound_keys: a pure
// function of the bound (so a captured graph stays valid for every shorter length). n_splits is
// the grid (decode_max_splits), n_tiles the workspace row stride; tiles_per_split is unused.
inline DecodeSplitPlan decode_bound_plan(int64_t bound_keys, int block_size, int n_kv_heads,
                                         int n_sms, DecodeSplitPolicy pol = {}) {
  DecodeSplitPlan p = decode_split_plan(bound_keys, block_size, n_kv_heads, n_sms, pol);
  p.n_splits = decode_max_splits(p.n_tiles, p.target, p.target_hi, p.min_tiles);
  return p;
}

// Byte layout of the decode workspace (all fp32, each part 256-byte aligned):
//   part_o  [n_q_heads][n_splits][head_dim]  partial outputs (unnormalised)
//   part_ml [n_q_heads][n_splits][2]         partial (running max in log2 units, row sum)
//   scores  [n_q_heads][n_tiles*block_size]  sparse pass 1: raw q.k (decode_sparse only)
//   tmax    [n_q_heads][n_tiles]             sparse pass 1: per-tile raw max (decode_sparse)
//   smax    [n_q_heads][n_splits]            sparse pass 1: per-split raw max (decode_sparse)
struct DecodeWorkspaceLayout {
  uint64_t part_o = 0, part_ml = 0, scores = 0, tmax = 0, smax = 0, total = 0;
};
inline DecodeWorkspaceLayout decode_workspace_layout(const AttentionShape& s,
                                                     const DecodeSplitPlan& plan, bool sparse) {
  auto align = [](uint64_t x) { return (x + 255) & ~uint64_t(255); };
  DecodeWorkspaceLayout w;
  const uint64_t h = static_cast<uint64_t>(s.n_q_heads);
  uint64_t off = 0;
  w.part_o = off;
  off = align(off + h * plan.n_splits * s.head_dim * 4);
  w.part_ml = off;
  off = align(off + h * plan.n_splits * 2 * 4);
  if (sparse) {
    w.scores = off;
    off = align(off + h * uint64_t(plan.n_tiles) * s.block_size * 4);
    w.tmax = off;
    off = align(off + h * uint64_t(plan.n_tiles) * 4);
    w.smax = off;
    off = align(off + h * uint64_t(plan.n_splits) * 4);
  }
  w.total = off;
  return w;
}

// Keys the decode query sees: positions 0 .. min(kv_len-1, q_start) (the bound when the length
// is read on the device).
inline int64_t decode_visible_keys(const AttentionShape& s) {
  if (s.list_tiles > 0) return int64_t(s.list_tiles) * s.block_size;  // the listed tiles' slots
  return std::min<int64_t>(s.kv_len, s.q_start + 1);
}

// The plan a decode launch sizes its grid and workspace with: exact for a host length, the
// bound's geometry (decode_bound_plan) for a device-side length. pol: how the tiles are cut
// (kernels::decode_split_policy(): decode_default_policy() unless overridden).
inline DecodeSplitPlan decode_launch_plan(const AttentionShape& s, int n_sms,
                                          DecodeSplitPolicy pol = {}) {
  return s.device_len
             ? decode_bound_plan(decode_visible_keys(s), s.block_size, s.n_kv_heads, n_sms, pol)
             : decode_split_plan(decode_visible_keys(s), s.block_size, s.n_kv_heads, n_sms, pol);
}

// The split policy a decode launch uses unless overridden (kernels::decode_split_policy()):
// 2 CTAs per SM; d = 64 over 64-key pages up to 3 (the dense kernel's 4-stage ring of 16 KB
// tiles lets 3 share an SM; the d = 128 and 128-key rings hold 2) while every split keeps
// kDecodeMinTilesD64 tiles.
inline constexpr int kDecodeMinTilesD64 = 6;
inline constexpr DecodeSplitPolicy decode_default_policy(int head_dim, int block_size) {
  if (head_dim == 64 && block_size == 64) return {2, 3, kDecodeMinTilesD64};
  return {2, 0, 0};
}

}  // namespace sinkscope::kernels
