// SPDX-License-Identifier: Apache-2.0
// The attention map of one (layer, head): the softmax probabilities of that head's post-RoPE
// queries against its keys, mean-pooled into at most maxCells x maxCells cells. The backends
// keep no probability matrix (the online softmax never materialises one); the Q/K come from a
// backend's capture prefill (Backend::request_qkv_capture, RunExecutor::headMap), so the map is
// of the engine's own forward. Memory stays O(n * d + maxCells^2).
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <vector>

#include "app/gui/models/run_types.h"
#include "engine/model/model.h"

namespace sinkscope {
class ThreadPool;
}

namespace sinkscope::gui {

struct HeadMapOptions {
  int layer = 0, head = 0;
  int maxCells = 256;
  // The cache's sink-retaining window and (below) the layer's own window: the visibility rule of
  // kernels/visibility.h.
  int sinkCount = 0;
  int window = 0;
  // The layer's own attention (ModelConfig): its window (0: none; keys k <= q - ownWindow are
  // invisible, sinks included) and its score soft-cap (0: none; s -> tanh(s / cap) * cap).
  int ownWindow = 0;
  float softcap = 0.0f;
  // The head's learned sink logit (gpt-oss; -inf: none): it joins every row's softmax
  // denominator and has no column, so a row's probabilities sum to 1 - p_sink.
  float sinkLogit = -INFINITY;
};

// The options' own-window, soft-cap and (with the weights) learned sink of `layer` of a model.
void setLayerAttention(HeadMapOptions& o, const ModelConfig& c, const ModelWeights* w = nullptr);

// The map from one head's post-RoPE queries q (n, d) and keys k (n, d), row-major: the softmax
// probabilities under the options' visibility rule, mean-pooled. Row bins run on the pool; the
// result does not depend on the number of threads.
AttentionMap headMapFromQK(const float* q, const float* k, int n, int d, float scale,
                          const HeadMapOptions& options, ThreadPool* pool);

#ifdef SINKSCOPE_HAVE_CUDA
// The same map computed on the current CUDA device (engine/cuda/head_map.h): the probabilities
// and their pooling on the GPU, alpha_k on the host. Agrees with headMapFromQK to float rounding
// (tests/gpu/test_head_map_kernel). Throws BackendError on a CUDA failure.
AttentionMap headMapOnGpu(const float* q, const float* k, int n, int d, float scale,
                          const HeadMapOptions& options);
#endif

// The number of queries i in [0, n) that see key j under the options' visibility rule, per j:
// those queries form the interval [j, min(n, j + W if j is no sink and W > 0, j + ownWindow if
// ownWindow > 0)), so this is O(n).
std::vector<int> visibleQueryCounts(int n, const HeadMapOptions& options);

// Bin edges splitting n items into min(n, maxBins) near-equal bins (bins + 1 edges).
std::vector<int> binEdges(int n, int maxBins);

// alpha_k from full attention rows: the mean over queries i >= k of P[i, k] (the contract's sink
// statistic), given column sums over i and the number of queries that could see k.
std::vector<double> alphaFromColumns(const std::vector<double>& colSum,
                                     const std::vector<int>& colQueries);

}  // namespace sinkscope::gui
