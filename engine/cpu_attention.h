// SPDX-License-Identifier: Apache-2.0
// Tiled online-softmax attention on the CPU with the dynamic-sparse skip rule (ARCHITECTURE.md,
// "the skip rule"). It is the reference the CUDA kernels are checked against, so the tile
// structure is explicit: query tiles of q_tile rows of one head, KV tiles of block_size keys,
// visited in increasing position order.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/attention.h"

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
  // Numeric switches (ARCHITECTURE.md config schema). With skip_softmax_exp off, a skipped tile
  // still adds exp() to the row sum (only the PV product is skipped). skip_value_load has no
  // numeric effect; it is a memory-traffic choice of the GPU kernels.
  bool skip_softmax_exp = true;

  // Probes. counts: n_head entries, accumulated (+=). mask_head >= 0 records that head's skip
  // mask into mask (n_qtiles x n_kvtiles, row-major; 0 not visited, 1 visited, 2 skipped).
  TileCounts* counts = nullptr;
  int mask_head = -1;
  std::vector<uint8_t>* mask = nullptr;
  int* mask_cols = nullptr;  // receives n_kvtiles of the mask
};

void cpu_attention(const CpuAttentionArgs& a, ThreadPool* pool);

}  // namespace sinkscope
