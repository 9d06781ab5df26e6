// SPDX-License-Identifier: Apache-2.0
// Tiled online-softmax attention on the CPU with the dynamic-sparse skip rule
// (docs/architecture.md, "Dynamic-sparse attention: the skip rule"). It is the reference the CUDA
// kernels are checked against, so the tile structure is explicit: query tiles of q_tile rows of one
// head, KV tiles of block_size keys, visited in increasing position order.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/attention.h"
#include "engine/cache/kv_layout.h"

namespace sinkscope {

class ThreadPool;

struct CpuAttentionArgs {
  // Queries of the new tokens, (n_q, n_head, d) row-major, already rotated.
  const float* q = nullptr;
  // Keys and values of every cached position, (n_kv, n_head_kv, d) row-major (position-major,
  // so the cache grows by appending). Cache index == causal position.
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;  // (n_q, n_head, d)
  int n_q = 0;
  int q_pos0 = 0;  // cache index of query 0; query i sees keys [0, q_pos0 + i]
  int n_kv = 0;    // keys present (>= q_pos0 + n_q)
  int n_head = 0, n_head_kv = 0, d = 0;
  float scale = 0;          // softmax scale, usually 1/sqrt(d)
  int block_size = 64;      // keys per KV tile
  int q_tile = 64;          // query rows per query tile
  float log_lambda = -INFINITY;  // ln(lambda); -inf: dense
  // Numeric switches (docs/config.md). A skipped tile never loads V and never
  // enters the PV product. skip_softmax_exp true (the contract): it also skips exp() and the
  // row-sum update. false: exp(s - m) of its keys, m the unchanged running max, is still added
  // to the row sum, so the denominator is the dense one. The CUDA kernels implement the same
  // meaning (kernels/attention_params.h). skip_value_load has no numeric effect; it is a
  // memory-traffic choice of the GPU kernels.
  bool skip_softmax_exp = true;

  // Probes. counts: n_head entries, accumulated (+=). mask_head >= 0 records that head's skip
  // mask into mask (n_qtiles x n_kvtiles, row-major; 0 not visited, 1 visited, 2 skipped).
  TileCounts* counts = nullptr;
  int mask_head = -1;
  std::vector<uint8_t>* mask = nullptr;
  int* mask_cols = nullptr;  // receives n_kvtiles of the mask
  // Debug probes, off by default (CPU-vs-GPU mask agreement, tests/gpu/test_skip_agreement.cpp).
  // mask_all: every head's mask, (n_head, n_qtiles, n_kvtiles), the cell codes of mask; assigned
  // here, n_kvtiles into *mask_cols when given. tile_stat (needs mask_all): the deciding
  // statistic of each cell, natural-log units: max over the query tile's rows that see a key of
  // the tile of (m~_r - m_r), so the tile is skipped iff stat < ln(lambda); NaN where the tile
  // is not visible or is the first visited one (never skipped), +inf where a row has no max yet.
  std::vector<uint8_t>* mask_all = nullptr;
  std::vector<float>* tile_stat = nullptr;

  // Paged KV cache (engine/cache/kv_layout.h). When set, k, v and n_kv are unused: the KV tiles are
  // the view's pages in order, key j of page t at position page_pos0[t] + j; q_pos0 is then the
  // original position of query 0. Dequantization of quantized pages happens in the tile loads.
  const KvLayerView* kv = nullptr;
  // Sink-retaining window (kv_layout.h): a key at position k is visible to the query at q iff
  // k <= q and (k < sink_count or window == 0 or k > q - window). Defaults: plain causal.
  int sink_count = 0;
  int window = 0;
  // The layer's own sliding window (a Gemma local layer): a key at position k is visible to the
  // query at q only if also k > q - own_window; 0: none. No sinks are kept from it: keys past
  // it are invisible like future keys (never scored, never counted as visited or skipped).
  int own_window = 0;
  // Attention logit soft-capping (Gemma 2), 0 = none: each score s = scale * q.k becomes
  // tanh(s / softcap) * softcap before the softmax and before the skip rule reads it (tile maxima
  // and running maxima are of capped scores).
  float softcap = 0.0f;
  // Learned attention sinks (gpt-oss), null = none: sink_logits[h] is a logit in score units
  // (after scale and soft-cap) that joins head h's softmax denominator with no value: every
  // row's softmax runs over [its visible keys, the sink], and the sink's probability is dropped.
  // It enters the online softmax as its starting state (running max = sink logit, row sum = 1),
  // so the skip rule compares tile maxima against a running max that already includes it
  // (docs/architecture.md, "Learned sinks and the skip rule").
  const float* sink_logits = nullptr;
  // Probe: sink_mass[h] += the sink's probability summed over this call's queries.
  double* sink_mass = nullptr;
  // Cache position mode: the queries rotated at their cache index (cache_position()), (n_q,
  // n_head, d) like q. Scores against sink keys use them whenever the cache index differs from
  // the position (kv_cache.h explains why this replaces re-rotating keys).
  const float* q_sink = nullptr;
  // Column-mass probe (sink detection): col_mass[h * col_n + k] += P[i, k] summed over this
  // call's queries i, for key positions k < col_n. P is the final softmax probability.
  double* col_mass = nullptr;
  int col_n = 0;
};

void cpu_attention(const CpuAttentionArgs& a, ThreadPool* pool);

}  // namespace sinkscope
