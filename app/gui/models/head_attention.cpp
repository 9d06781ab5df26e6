// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/head_attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/backend/attention.h"
#ifdef SINKSCOPE_HAVE_CUDA
#include "engine/cuda/head_map.h"
#endif
#include "engine/util/thread_pool.h"
#include "kernels/visibility.h"

namespace sinkscope::gui {

std::vector<int> binEdges(int n, int maxBins) {
  const int bins = std::max(1, std::min(n, maxBins));
  std::vector<int> e(size_t(bins) + 1);
  for (int b = 0; b <= bins; ++b) e[size_t(b)] = int(int64_t(b) * n / bins);
  return e;
}

std::vector<double> alphaFromColumns(const std::vector<double>& colSum,
                                     const std::vector<int>& colQueries) {
  std::vector<double> a(colSum.size(), 0.0);
  for (size_t k = 0; k < colSum.size(); ++k)
    a[k] = colQueries[k] > 0 ? colSum[k] / double(colQueries[k]) : 0.0;
  return a;
}

namespace {

bool visible(int k, int q, const HeadMapOptions& o) {
  return visibility::key_visible(k, q, o.sinkCount, o.window, std::max(o.ownWindow, 0));
}

// Eight partial sums let the compiler vectorise the 64-wide dot without reassociating.
inline float dot(const float* a, const float* b, int d) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int t = 0;
  for (; t + 8 <= d; t += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[t + l] * b[t + l];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; t < d; ++t) s += a[t] * b[t];
  return s;
}

// Softmax probabilities of query row i of one head against keys 0..i (invisible keys get 0).
// k: the head's keys, kvStride apart.
void probabilityRow(const float* q, const float* k, int i, int kvStride, int d, float scale,
                    const HeadMapOptions& o, std::vector<float>& p) {
  float mx = o.sinkLogit;  // -inf without a learned sink
  for (int j = 0; j <= i; ++j) {
    if (!visible(j, i, o)) {
      p[size_t(j)] = -INFINITY;
      continue;
    }
    p[size_t(j)] = dot(q, k + size_t(j) * size_t(kvStride), d) * scale;
    if (o.softcap > 0) p[size_t(j)] = std::tanh(p[size_t(j)] / o.softcap) * o.softcap;
    mx = std::max(mx, p[size_t(j)]);
  }
  double sum = std::isinf(o.sinkLogit) ? 0.0 : std::exp(double(o.sinkLogit) - mx);
  for (int j = 0; j <= i; ++j) {
    const float e = std::isinf(p[size_t(j)]) ? 0.0f : std::exp(p[size_t(j)] - mx);
    p[size_t(j)] = e;
    sum += e;
  }
  const float inv = sum > 0 ? float(1.0 / sum) : 0.0f;
  for (int j = 0; j <= i; ++j) p[size_t(j)] *= inv;
}

}  // namespace

void setLayerAttention(HeadMapOptions& o, const ModelConfig& c, const ModelWeights* w) {
  const bool in = o.layer >= 0 && o.layer < c.n_layer;
  o.ownWindow = in ? c.layer_window(o.layer) : 0;
  o.softcap = c.attn_softcap;
  o.sinkLogit = -INFINITY;
  if (w && in && size_t(o.layer) < w->layers.size()) {
    const std::vector<float>& s = w->layers[size_t(o.layer)].sinks;
    if (o.head >= 0 && size_t(o.head) < s.size()) o.sinkLogit = s[size_t(o.head)];
  }
}

namespace {

// A map of n tokens under the options, its bins laid out and no cells yet.
AttentionMap emptyMap(int n, const HeadMapOptions& o) {
  AttentionMap m;
  m.layer = o.layer;
  m.head = o.head;
  m.nTokens = n;
  m.ownWindow = o.ownWindow;
  m.rowStart = binEdges(n, o.maxCells);
  m.colStart = m.rowStart;
  m.rows = int(m.rowStart.size()) - 1;
  m.cols = m.rows;
  return m;
}

}  // namespace

AttentionMap headMapFromQK(const float* q, const float* k, int n, int d, float scale,
                          const HeadMapOptions& o, ThreadPool* pool) {
  AttentionMap m = emptyMap(n, o);
  m.cells.assign(size_t(m.rows) * m.cols, 0.0f);
  std::vector<int> colBin(static_cast<size_t>(n));
  for (int b = 0; b < m.cols; ++b)
    for (int j = m.colStart[size_t(b)]; j < m.colStart[size_t(b) + 1]; ++j) colBin[size_t(j)] = b;
  // Row bins in parallel: each task owns its cells row; the column sums (for alpha) go to one
  // partial per task and are added in bin order afterwards, so the result does not depend on
  // the number of threads.
  std::vector<std::vector<double>> colPart(size_t(m.rows));
  auto rowBin = [&](int64_t r) {
    std::vector<double> acc(size_t(m.cols), 0.0);
    std::vector<double>& cs = colPart[size_t(r)];
    const int i0 = m.rowStart[size_t(r)], i1 = m.rowStart[size_t(r) + 1];
    cs.assign(size_t(i1), 0.0);
    std::vector<float> p(static_cast<size_t>(i1));
    for (int i = i0; i < i1; ++i) {
      probabilityRow(&q[size_t(i) * size_t(d)], k, i, d, d, scale, o, p);
      for (int j = 0; j <= i; ++j) {
        acc[size_t(colBin[size_t(j)])] += p[size_t(j)];
        cs[size_t(j)] += p[size_t(j)];
      }
    }
    const int rowsIn = i1 - i0;
    for (int b = 0; b < m.cols; ++b) {
      const int colsIn = m.colStart[size_t(b) + 1] - m.colStart[size_t(b)];
      m.cells[size_t(r) * m.cols + b] = float(acc[size_t(b)] / double(rowsIn * colsIn));
    }
  };
  if (pool && m.rows > 1) {
    pool->parallel_for(m.rows, rowBin);
  } else {
    for (int r = 0; r < m.rows; ++r) rowBin(r);
  }
  std::vector<double> colSum(static_cast<size_t>(n), 0.0);
  for (const auto& cs : colPart)
    for (size_t j = 0; j < cs.size(); ++j) colSum[j] += cs[j];
  m.alpha = alphaFromColumns(colSum, visibleQueryCounts(n, o));
  return m;
}

std::vector<int> visibleQueryCounts(int n, const HeadMapOptions& o) {
  // visible(j, i) = i >= j && (j < S || W == 0 || i < j + W) && (OW == 0 || i < j + OW): the
  // conditions on i are a lower bound and upper bounds, so the queries form one interval.
  std::vector<int> counts(static_cast<size_t>(std::max(n, 0)), 0);
  const int64_t ow = std::max(o.ownWindow, 0);
  for (int j = 0; j < n; ++j) {
    int64_t end = n;
    if (!(j < o.sinkCount || o.window == 0)) end = std::min(end, int64_t(j) + o.window);
    if (ow > 0) end = std::min(end, int64_t(j) + ow);
    counts[size_t(j)] = int(std::max<int64_t>(0, end - j));
  }
  return counts;
}

#ifdef SINKSCOPE_HAVE_CUDA
AttentionMap headMapOnGpu(const float* q, const float* k, int n, int d, float scale,
                          const HeadMapOptions& o) {
  AttentionMap m = emptyMap(n, o);
  gpu::HeadMapRule rule;
  rule.sinks = o.sinkCount;
  rule.window = o.window;
  rule.own_window = std::max(o.ownWindow, 0);
  rule.softcap = o.softcap;
  rule.sink_logit = o.sinkLogit;
  gpu::HeadMapSums s = gpu::head_map_on_gpu(q, k, n, d, scale, rule, m.rowStart);
  m.cells = std::move(s.cells);
  m.alpha = alphaFromColumns(s.col_sum, visibleQueryCounts(n, o));
  return m;
}
#endif

}  // namespace sinkscope::gui

