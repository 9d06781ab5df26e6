// SPDX-License-Identifier: Apache-2.0
// The one parameter struct of the attention kernel family (dense + dynamic block-sparse,
// prefill + decode, paged KV). Plain C++: includers need no CUDA headers. Device pointers are
// typed as raw storage (bf16 is carried as uint16_t bit patterns).
//
// Skip rule (docs/architecture.md, "the skip rule"): KV tiles (= KV pages, block_size keys) are
// visited in position order; with m_r the running row max before tile t and m~_r the row's max
// inside t, t is skipped for a query tile iff for every row (m~_r - m_r) * scale * log2(e) <
// log2(lambda). A row with no causally visible key in t has m~_r = -inf and agrees to the skip. The
// first visited tile is never skipped; lambda = 0 (log2_lambda = -inf) is dense. lambda must be < 1
// (then a skipped tile can never raise the running max). A skipped tile never enters the P V
// product; skip_softmax_exp says whether its exp() still goes into the row sums (see below).
//
// Query tile: prefill = 64 consecutive query tokens of ONE query head (kPrefillQueryTile; a
// prefill CTA holds kPrefillCtaRows = 128 rows = two query tiles, each voting on its own);
// decode (one query token) = that token of one query head, so decode decisions are per head
// and the V page is loaded when any head of the KV group needs it.
#pragma once

#include <cstdint>
#include <limits>

namespace sinkscope::kernels {

// Rows of one prefill query tile; the skip vote and the mask granularity use it.
inline constexpr int kPrefillQueryTile = 64;
// Query rows of one prefill CTA: a whole number of query tiles (the halves of a CTA decide,
// count and write their mask rows separately).
inline constexpr int kPrefillCtaRows = 128;
inline constexpr int kPrefillTilesPerCta = kPrefillCtaRows / kPrefillQueryTile;
static_assert(kPrefillCtaRows % kPrefillQueryTile == 0, "a CTA holds whole query tiles");

// Value written into skip_mask for a (query tile, KV tile) that is not causally visible.
inline constexpr uint8_t kMaskNotVisible = 2;

struct AttentionParams {
  // ---- tensors (device memory, bf16 bit patterns) ----
  const uint16_t* q = nullptr;  // [n_q_tokens][n_q_heads][head_dim], token-major, contiguous
  uint16_t* o = nullptr;        // [n_q_tokens][n_q_heads][head_dim], same layout as q
  // Paged KV pool. One page holds block_size consecutive positions of every KV head:
  //   k_pages[page][kv_head][slot][head_dim]  (slot = position % block_size), same for v_pages.
  // So one (page, kv_head) is a contiguous block_size*head_dim tile: one KV tile = one page.
  const uint16_t* k_pages = nullptr;
  const uint16_t* v_pages = nullptr;
  // page_table[i] = pool index of the page holding positions [i*block_size, (i+1)*block_size).
  // Length >= ceil(kv_len / block_size). Slots past kv_len in the last page are never read.
  // The page table, kv_len_dev and the cache rows before the newest visible one (positions below
  // the visible length - 1, the row a decode step appends; with kv_len_dev the visible length is
  // *kv_len_dev, kv_len is then a bound) must not be written by the kernel launched just before a
  // decode launch on its stream: the dense and pass-1 decode kernels over a positional
  // bf16 cache read them before waiting for their PDL predecessor (host copies and memsets, as
  // the engine and the tests use, are not PDL predecessors and are fine).
  const int32_t* page_table = nullptr;
  // Quantized KV (kv_bits 8 or 4; engine/cache/kv_layout.h KvQuantFormat with groups of 32, the CPU
  // cache's format). Pages are then code + scale pages with the same page ids:
  //   k_codes[page][kv_head][slot][code_bytes]   (int8: head_dim bytes; int4: head_dim / 2,
  //                                               element 2i in the low nibble, stored c + 8)
  //   k_scales[page][kv_head][slot][head_dim/32]  fp16 bits;  value = c * scale
  // and a page-table entry e < 0 names page -1 - e of k_pages / v_pages: a bf16 page (pages
  // holding protected -- unquantized -- positions, engine/cache/kv_page_plan.h). The kernels are
  // compile-time variants per format, dequantising to bf16 in registers (decode) or into the
  // shared-memory tile (prefill) right before the tensor-core products.
  int kv_bits = 0;  // 0: bf16 pages
  const uint8_t* k_codes = nullptr;
  const uint8_t* v_codes = nullptr;
  const uint16_t* k_scales = nullptr;
  const uint16_t* v_scales = nullptr;

  // ---- shape ----
  int n_q_tokens = 0;  // queries in this call (1 = decode)
  int n_q_heads = 0;
  int n_kv_heads = 0;  // n_q_heads % n_kv_heads == 0; query head h reads KV head h / group
  int head_dim = 0;    // 64 or 128
  int block_size = 0;  // 64 or 128: page size = KV tile size
  int64_t kv_len = 0;  // keys present in the cache (positions 0 .. kv_len-1)
  // Causal: query i sits at absolute position q_start + i and sees keys <= q_start + i
  // (and < kv_len). Plain prefill: q_start = 0, n_q_tokens = kv_len. Decode: q_start = kv_len-1.
  int64_t q_start = 0;

  // ---- device-side length (decode only; lets one captured CUDA graph serve many positions) ----
  // When set, the decode kernels read the cache length from device memory: L = *kv_len_dev
  // (clamped to [0, kv_len]), q_start = L - 1 (host q_start is ignored). kv_len is then an UPPER
  // BOUND: the grid, the workspace strides and the skip-mask row length (ceil(kv_len/block_size)
  // tiles; tiles at or past L stay kMaskNotVisible) come from it alone, while the split of the
  // L real tiles among the CTAs is recomputed on the device with the same formula as a host
  // launch at L (decode_split_plan_tiles), so the result and the probes equal, bit for bit, those
  // of a launch with kv_len = L. CTAs whose split lies past L exit at once.
  const int32_t* kv_len_dev = nullptr;
  // When set (decode only), log2(lambda) is read from here instead of log2_lambda (length-scaled
  // lambda changes every step). log2_lambda still selects dense vs sparse kernels (-inf = dense
  // unless force_sparse_kernel), so it must be finite exactly when *log2_lambda_dev may be.
  const float* log2_lambda_dev = nullptr;

  // ---- sink-retaining window over a list of live pages (engine/cache/kv_page_plan.h) ----
  // When tile_pos0 is set, the KV tiles are the n_tiles live pages listed in position order:
  // tile t is pool page page_table[t] and holds positions tile_pos0[t] + slot (sink pages first).
  // q_start is then the ORIGINAL position of query 0 and kv_len = q_start + n_q_tokens; a key at
  // position k is visible to the query at q iff k <= q and (k < sink_count or window == 0 or
  // k > q - window) (engine/cache/kv_layout.h). Decode with n_tiles_dev: the tile count is read from
  // device memory (n_tiles is then its upper bound: grid and workspace strides) and the query's
  // position from *q_pos_dev (kv_len / q_start are ignored by the kernels).
  const int32_t* tile_pos0 = nullptr;
  int n_tiles = 0;
  const int32_t* n_tiles_dev = nullptr;
  const int32_t* q_pos_dev = nullptr;
  int sink_count = 0;
  int window = 0;
  // The layer's own sliding window (a model's local layer, ModelConfig::layer_window), live-page
  // lists only: a key at k is visible to the query at q only if also k > q - own_window (sinks
  // included: the cache's sinks are not the model's). Keys past it are invisible like future
  // keys: never scored, never counted as visited or skipped (engine/backend/cpu_attention.h).
  // 0: none. A full cache takes it through an identity list (tile t at position t * block_size).
  int own_window = 0;
  // Cache position mode: the queries rotated at their cache index, same layout as q; scores
  // against keys at positions < sink_count use them (engine/cache/kv_cache.h). Decode and prefill
  // kernels with a live-page list.
  const uint16_t* q_sink = nullptr;

  // ---- softmax and skip rule ----
  float scale = 0.f;                 // softmax scale, usually 1/sqrt(head_dim)
  // Attention logit soft-capping (Gemma 2), 0 = none: each score s = scale * q.k becomes
  // tanh(s / softcap) * softcap before the masks, the softmax and the skip rule (tile maxima and
  // running maxima are of capped scores), as engine/backend/cpu_attention.h. The decode and the
  // mma.sync / wgmma prefill kernels apply it right after Q K^T (a run-time branch); the
  // warp-specialised prefill does not, so the dispatch passes it over.
  float softcap = 0.f;
  // Learned attention sinks (gpt-oss), null = none: sinks[h] is query head h's sink logit in
  // score units (after scale and soft-cap) that joins the head's softmax denominator with no
  // value, as engine/backend/cpu_attention.h. Prefill: it starts every row's online softmax
  // (running max = sink, row sum = 1), so the skip rule compares tile maxima against a running
  // max that includes it, as the CPU. Decode: the split passes start from -inf (each split would
  // otherwise count it once) and the skip decisions take max(sink, prefix max); the combine adds
  // exp(sink - M) once to the denominator (the fused combine is not used then). The
  // warp-specialised prefill does not apply it, so the dispatch passes it over.
  const float* sinks = nullptr;  // [n_q_heads]
  // Probe, with sinks: sink_mass[h] += the sink's probability summed over this launch's queries
  // (atomics, not zeroed here).
  double* sink_mass = nullptr;  // [n_q_heads]
  // log2(lambda); -inf = dense (see log2_of_lambda() in attention_dispatch.h).
  float log2_lambda = -std::numeric_limits<float>::infinity();
  bool skip_value_load = true;       // do not load V for skipped tiles (decode: always possible)
  // true: a skipped tile skips exp(), the row-sum update and P V (the contract). false: its
  // exp() (against the unchanged running max) is still added to the row sums, only P V and the
  // V load are skipped: the softmax denominator stays exact. Same meaning on the CPU
  // (engine/backend/cpu_attention.h). Masks and counters are the same either way.
  bool skip_softmax_exp = true;
  // Tests: run the sparse kernels even when lambda = 0 (they must then equal dense bit for bit).
  bool force_sparse_kernel = false;
  // Prefill on sm_90: use the Hopper wgmma kernels (default). false = the portable mma.sync
  // kernels (tests compare both).
  bool prefer_wgmma = true;
  // Positional bf16 prefill on sm_90, dense or sparse: the warp-specialised kernel (producer
  // warpgroup, ping-ponged consumers; attention_prefill_ws.cuh) (default). false = the wgmma
  // kernels above (sparse: lazy or eager V as skip_value_load says; the warp-specialised sparse
  // kernel always loads V).
  // GpuTuning::prefill_ws = false (kernels/tuning.h) turns it off process-wide.
  bool prefer_ws = true;
  // Sparse prefill only: false = the wgmma sparse kernels (lazy or eager V as skip_value_load
  // says) even where the warp-specialised sparse kernel would be chosen (benchmarks compare
  // both; select_attention_kernel has the rule). GpuTuning::prefill_ws_sparse = false turns it
  // off process-wide.
  bool prefer_ws_sparse = true;

  // ---- probes (optional, device memory) ----
  // Per query head: += causally visible tiles, += skipped tiles (atomics). Not zeroed here.
  uint64_t* tiles_visited = nullptr;  // [n_q_heads]
  uint64_t* tiles_skipped = nullptr;  // [n_q_heads]
  // skip_mask[head][q_tile][kv_tile] (uint8): 1 skipped, 0 computed, kMaskNotVisible otherwise.
  // q tiles = ceil(n_q_tokens / kPrefillQueryTile) (1 for decode); kv tiles =
  // ceil(kv_len / block_size). Holds one head (mask_head >= 0) or all heads (mask_head = -1).
  uint8_t* skip_mask = nullptr;
  int mask_head = 0;

  // ---- scratch (device memory) for the decode splits; attention_workspace_bytes() says how
  // much. Not needed by prefill.
  void* workspace = nullptr;
  uint64_t workspace_bytes = 0;
};

}  // namespace sinkscope::kernels
