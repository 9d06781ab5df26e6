// SPDX-License-Identifier: Apache-2.0
// The attention map of one (layer, head), computed on the engine thread: a dense float32
// reference forward of the prompt up to `layer` (from the model's own weights), then the softmax
// probabilities of that head's queries against its keys, mean-pooled into at most
// maxCells x maxCells cells. The backends keep no probability matrix (the online softmax never
// materialises one), so this re-derives it; memory stays O(n * width + n + maxCells^2).
#pragma once

#include <atomic>

#include "app/gui/models/run_types.h"
#include "engine/model.h"

namespace sinkscope {
class ThreadPool;
}

namespace sinkscope::gui {

struct HeadMapOptions {
  int layer = 0, head = 0;
  int maxCells = 256;
  // The cache's visibility rule (sink-retaining window): key k is visible to query q iff k <= q
  // and (k < sinkCount or window == 0 or k > q - window).
  int sinkCount = 0;
  int window = 0;
};

// Throws std::invalid_argument for a (layer, head) outside the model or an empty prompt, and
// sinkscope::Cancelled when *cancel is raised (checked once per layer).
AttentionMap computeHeadAttention(const Model& model, const std::vector<TokenId>& tokens,
                                  const HeadMapOptions& options, ThreadPool* pool,
                                  const std::atomic<bool>* cancel = nullptr);

// Bin edges splitting n items into min(n, maxBins) near-equal bins (bins + 1 edges).
std::vector<int> binEdges(int n, int maxBins);

// alpha_k from full attention rows: the mean over queries i >= k of P[i, k] (the contract's sink
// statistic), given column sums over i and the number of queries that could see k.
std::vector<double> alphaFromColumns(const std::vector<double>& colSum,
                                     const std::vector<int>& colQueries);

}  // namespace sinkscope::gui
