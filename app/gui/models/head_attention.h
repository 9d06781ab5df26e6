// SPDX-License-Identifier: Apache-2.0
// The attention map of one (layer, head), computed on the engine thread: a dense float32
// reference forward of the prompt up to `layer` (from the model's own weights), then the softmax
// probabilities of that head's queries against its keys, mean-pooled into at most
// maxCells x maxCells cells. The backends keep no probability matrix (the online softmax never
// materialises one), so this re-derives it; memory stays O(n * width + n + maxCells^2).
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

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

// Reuse between calls (the engine thread owns one; not thread-safe): the residual stream entering
// each layer of the reference forward for the last (tokens, sinkCount, window). Picking another
// layer or head then resumes from the deepest stored layer at or below it instead of re-running
// the prompt from the embeddings (the result is bit-for-bit the same). Layers are stored while
// they fit in maxBytes (every k-th layer beyond that); another prompt or window drops them.
class HeadMapCache {
 public:
  explicit HeadMapCache(size_t maxBytes = size_t(256) << 20) : m_maxBytes(maxBytes) {}
  void clear() {
    m_tokens.clear();
    m_x.clear();
  }
  size_t bytes() const;

 private:
  friend AttentionMap computeHeadAttention(const Model&, const std::vector<TokenId>&,
                                           const HeadMapOptions&, ThreadPool*,
                                           const std::atomic<bool>*, HeadMapCache*);
  size_t m_maxBytes;
  std::vector<TokenId> m_tokens;
  int m_sinkCount = 0, m_window = 0;
  std::vector<std::vector<float>> m_x;  // m_x[l]: input of layer l, (n, n_embd); empty: not kept
};

// Throws std::invalid_argument for a (layer, head) outside the model or an empty prompt, and
// sinkscope::Cancelled when *cancel is raised (checked once per layer). The layers below the
// chosen one run their attention through the CPU backend's dense tiled kernel (cpu_attention,
// lambda = 0, the same visibility rule); the chosen head's probabilities are computed exactly,
// row by row (two-pass softmax).
AttentionMap computeHeadAttention(const Model& model, const std::vector<TokenId>& tokens,
                                  const HeadMapOptions& options, ThreadPool* pool,
                                  const std::atomic<bool>* cancel = nullptr,
                                  HeadMapCache* cache = nullptr);

// The map itself from one head's post-RoPE queries q (n, d) and keys k (n, d), row-major: the
// softmax probabilities under the options' visibility rule, mean-pooled (computeHeadAttention's
// last step; also used with Q/K captured from a GPU backend's dense prefill). Row bins run on the
// pool; the result does not depend on the number of threads.
AttentionMap headMapFromQK(const float* q, const float* k, int n, int d, float scale,
                          const HeadMapOptions& options, ThreadPool* pool);

// Bin edges splitting n items into min(n, maxBins) near-equal bins (bins + 1 edges).
std::vector<int> binEdges(int n, int maxBins);

// alpha_k from full attention rows: the mean over queries i >= k of P[i, k] (the contract's sink
// statistic), given column sums over i and the number of queries that could see k.
std::vector<double> alphaFromColumns(const std::vector<double>& colSum,
                                     const std::vector<int>& colQueries);

}  // namespace sinkscope::gui
