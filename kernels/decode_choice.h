// SPDX-License-Identifier: Apache-2.0
// Which attention kernels a dynamic-sparse decode step should run: the sparse decode reads every
// K tile (the skip decision needs the scores), then the V of the kept tiles, then combines its
// splits, so it only beats the dense decode where the context is long, the heads are wide and
// most tiles are skipped (docs/performance.md, "Decode, dynamic-sparse" and the decode floors).
// Host-only; the CUDA backend asks it before each sparse-asked step (BackendOptions::
// sparse_decode, engine/backend/backend.h).
#pragma once

#include <algorithm>
#include <cstdint>

namespace sinkscope::kernels {

// Predicted time of the sparse decode attention over the dense one's on the same cache
// (below 1: sparse is faster), for kv_len keys of which a share `skipped` (0..1) is skipped.
// A fit of ratio = a + b (1 - skipped) + c * 16384 / kv_len to the graph-replayed H200
// measurements at lambda 0.01 (d = 64: 1/0.76 at 16K, 1/0.88 at 64K, 70 % skipped; d = 128:
// 1/0.99 at 16K and 1/1.12 at 64K, 70 % skipped, 1/1.33 at 64K, 90 % skipped); the skipped
// share's slope b comes from the d = 128 pair and is taken for d = 64 too.
inline double sparse_decode_time_ratio(int head_dim, int64_t kv_len, double skipped) {
  const double s = std::clamp(skipped, 0.0, 1.0);
  const double len = double(std::max<int64_t>(kv_len, 1));
  const bool wide = head_dim >= 128;
  const double a = wide ? 0.6425 : 0.8645, b = 0.705, c = wide ? 0.156 : 0.24;
  return a + b * (1.0 - s) + c * 16384.0 / len;
}

// Sparse pays when predicted at least 3 % faster (repeated runs of the measurements above vary
// by a few percent), so a borderline step keeps the dense kernels.
inline constexpr double kSparseDecodeMargin = 0.97;
inline bool sparse_decode_pays(int head_dim, int64_t kv_len, double skipped) {
  return sparse_decode_time_ratio(head_dim, kv_len, skipped) < kSparseDecodeMargin;
}

// While the dense kernels run for sparse-asked steps, one step in this many runs the sparse
// kernels to measure the skipped share again (the decision's input).
inline constexpr int kSparseDecodeProbeEvery = 32;

}  // namespace sinkscope::kernels
