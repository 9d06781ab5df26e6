// SPDX-License-Identifier: Apache-2.0
// The one visibility rule of attention, shared by the CPU attention (the reference) and every
// kernel family: a key at position k is visible to the query at position q iff
//     k <= q   and   (k < S  or  W == 0  or  k > q - W)   and   (OW == 0  or  k > q - OW)
// with S the cache's kept sinks and W its sliding window (engine/cache/kv_layout.h; W = 0: the
// full cache), OW the layer's own window (a model's local layer, ModelConfig::layer_window; 0:
// a global layer). The own window hides sinks too: its keys are invisible, not skipped.
// Usable from host C++ and from CUDA kernels.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SINKSCOPE_VIS_FN __host__ __device__ __forceinline__
#else
#define SINKSCOPE_VIS_FN inline
#endif

namespace sinkscope::visibility {

// The window part of the rule (causality is the caller's: k <= q).
SINKSCOPE_VIS_FN bool key_in_windows(int64_t k, int64_t q, int sinks, int window, int own_window) {
  return (k < sinks || window == 0 || k > q - window) && (own_window == 0 || k > q - own_window);
}

// The whole rule.
SINKSCOPE_VIS_FN bool key_visible(int64_t k, int64_t q, int sinks, int window, int own_window) {
  return k <= q && key_in_windows(k, q, sinks, window, own_window);
}

// Whether some key of the tile [k0, k_last] is within the windows of the query at q (exactly:
// key_in_windows holds for one of its keys); a tile for which this is false is dropped from the
// work (neither visited nor skipped). Causality is the caller's. For the earliest query of a
// query tile, false means false for every later one. The tile's sink keys [k0, S) and its other
// keys [S, k_last] are tested apart: a sink key escapes the cache window but not the own window,
// so a tile whose sinks lie past the own window and whose other keys lie past the cache window
// has no visible key, although each window alone would keep some key of it.
SINKSCOPE_VIS_FN bool tile_in_windows(int64_t k0, int64_t k_last, int64_t q, int sinks,
                                      int window, int own_window) {
  const int64_t sink_last = k_last < int64_t(sinks) - 1 ? k_last : int64_t(sinks) - 1;
  const bool sink_keys = k0 < sinks && (own_window == 0 || sink_last > q - own_window);
  const bool other_keys = k_last >= sinks && (window == 0 || k_last > q - window) &&
                          (own_window == 0 || k_last > q - own_window);
  return sink_keys || other_keys;
}

}  // namespace sinkscope::visibility
