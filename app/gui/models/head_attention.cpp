// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/head_attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/attention.h"
#include "engine/backend.h"
#include "engine/cpu_attention.h"
#include "engine/linalg.h"
#include "engine/rope.h"
#include "engine/thread_pool.h"

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
  return k <= q && (k < o.sinkCount || o.window == 0 || k > q - o.window);
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
  float mx = -INFINITY;
  for (int j = 0; j <= i; ++j) {
    if (!visible(j, i, o)) {
      p[size_t(j)] = -INFINITY;
      continue;
    }
    p[size_t(j)] = dot(q, k + size_t(j) * size_t(kvStride), d) * scale;
    mx = std::max(mx, p[size_t(j)]);
  }
  double sum = 0;
  for (int j = 0; j <= i; ++j) {
    const float e = std::isinf(p[size_t(j)]) ? 0.0f : std::exp(p[size_t(j)] - mx);
    p[size_t(j)] = e;
    sum += e;
  }
  const float inv = sum > 0 ? float(1.0 / sum) : 0.0f;
  for (int j = 0; j <= i; ++j) p[size_t(j)] *= inv;
}

}  // namespace

size_t HeadMapCache::bytes() const {
  size_t b = 0;
  for (const auto& x : m_x) b += x.size() * sizeof(float);
  return b;
}

AttentionMap headMapFromQK(const float* q, const float* k, int n, int d, float scale,
                          const HeadMapOptions& o, ThreadPool* pool) {
  AttentionMap m;
  m.layer = o.layer;
  m.head = o.head;
  m.nTokens = n;
  m.rowStart = binEdges(n, o.maxCells);
  m.colStart = m.rowStart;
  m.rows = int(m.rowStart.size()) - 1;
  m.cols = m.rows;
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
  std::vector<int> colQueries(static_cast<size_t>(n), 0);
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) colQueries[size_t(j)] += visible(j, i, o);
  m.alpha = alphaFromColumns(colSum, colQueries);
  return m;
}

AttentionMap computeHeadAttention(const Model& model, const std::vector<TokenId>& tokens,
                                  const HeadMapOptions& o, ThreadPool* pool,
                                  const std::atomic<bool>* cancel, HeadMapCache* cache) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  if (o.layer < 0 || o.layer >= c.n_layer || o.head < 0 || o.head >= c.n_head)
    throw std::invalid_argument("attention map: (layer " + std::to_string(o.layer) + ", head " +
                                std::to_string(o.head) + ") is outside the model (" +
                                std::to_string(c.n_layer) + " layers, " +
                                std::to_string(c.n_head) + " heads)");
  const int n = int(tokens.size());
  if (n == 0) throw std::invalid_argument("attention map: the prompt is empty");
  const int64_t D = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, d = c.head_dim;
  const int group = c.n_head / c.n_head_kv;
  const float scale = float(1.0 / std::sqrt(double(d)));
  RopeTable rope(c, w.rope_freqs);
  const int half = rope.dim() / 2;
  std::vector<float> cs(static_cast<size_t>(n) * half), sn(size_t(n) * half);
  for (int i = 0; i < n; ++i) rope.angles(i, &cs[size_t(i) * half], &sn[size_t(i) * half]);

  // The stored residual streams: valid for this prompt and visibility rule only.
  if (cache && (cache->m_tokens != tokens || cache->m_sinkCount != o.sinkCount ||
                cache->m_window != o.window || int(cache->m_x.size()) != c.n_layer)) {
    cache->m_tokens = tokens;
    cache->m_sinkCount = o.sinkCount;
    cache->m_window = o.window;
    cache->m_x.assign(size_t(c.n_layer), {});
  }
  const size_t layerBytes = size_t(n) * size_t(D) * sizeof(float);
  const int keepEvery =
      cache ? int(std::max<size_t>(1, (layerBytes * size_t(c.n_layer) + cache->m_maxBytes - 1) /
                                          std::max<size_t>(1, cache->m_maxBytes)))
            : 0;

  std::vector<float> x(size_t(n * D)), xn(size_t(n * D)), q(size_t(n * Q)), k(size_t(n * KV)),
      v(size_t(n * KV)), att(size_t(n * Q)), tmp(size_t(n * D));
  int l0 = 0;  // the first layer to run
  if (cache) {
    for (int l = o.layer; l > 0; --l)
      if (!cache->m_x[size_t(l)].empty()) {
        l0 = l;
        x = cache->m_x[size_t(l)];
        break;
      }
  }
  if (l0 == 0)
    for (int i = 0; i < n; ++i)
      std::copy_n(&w.tok_embd[size_t(tokens[size_t(i)]) * size_t(D)], D, &x[size_t(i * D)]);

  std::vector<float> gate, up;
  for (int l = l0; l < o.layer; ++l) {
    if (cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled();
    if (cache && l > 0 && l % keepEvery == 0 && cache->m_x[size_t(l)].empty())
      cache->m_x[size_t(l)] = x;
    const LayerWeights& L = w.layers[size_t(l)];
    for (int i = 0; i < n; ++i)
      rms_norm(&x[size_t(i * D)], L.attn_norm.data(), &xn[size_t(i * D)], D, c.rms_eps);
    linear(xn.data(), L.wq.data(), q.data(), n, Q, D, pool);
    linear(xn.data(), L.wk.data(), k.data(), n, KV, D, pool);
    linear(xn.data(), L.wv.data(), v.data(), n, KV, D, pool);
    for (int i = 0; i < n; ++i) {
      if (c.qkv_bias) {
        for (int64_t j = 0; j < Q; ++j) q[size_t(i * Q + j)] += L.bq[size_t(j)];
        for (int64_t j = 0; j < KV; ++j) {
          k[size_t(i * KV + j)] += L.bk[size_t(j)];
          v[size_t(i * KV + j)] += L.bv[size_t(j)];
        }
      }
      for (int h = 0; h < c.n_head; ++h)
        rope.rotate(&q[size_t(i * Q + h * d)], &cs[size_t(i) * half], &sn[size_t(i) * half]);
      for (int h = 0; h < c.n_head_kv; ++h)
        rope.rotate(&k[size_t(i * KV + h * d)], &cs[size_t(i) * half], &sn[size_t(i) * half]);
    }
    // Dense attention of every head (the layer's output feeds the next layer): the backend's
    // tiled online-softmax kernel with lambda = 0 (nothing skipped) and the map's visibility.
    CpuAttentionArgs a;
    a.q = q.data();
    a.k = k.data();
    a.v = v.data();
    a.out = att.data();
    a.n_q = n;
    a.q_pos0 = 0;
    a.n_kv = n;
    a.n_head = c.n_head;
    a.n_head_kv = c.n_head_kv;
    a.d = int(d);
    a.scale = scale;
    a.block_size = 64;
    a.q_tile = kQueryTileRows;
    a.log_lambda = -INFINITY;
    a.sink_count = o.window > 0 ? o.sinkCount : 0;
    a.window = o.window;
    cpu_attention(a, pool);
    linear(att.data(), L.wo.data(), tmp.data(), n, D, Q, pool);
    for (int64_t i = 0; i < n * D; ++i) x[size_t(i)] += tmp[size_t(i)];
    for (int i = 0; i < n; ++i)
      rms_norm(&x[size_t(i * D)], L.ffn_norm.data(), &xn[size_t(i * D)], D, c.rms_eps);
    gate.resize(size_t(n * F));
    up.resize(size_t(n * F));
    linear(xn.data(), L.w_gate.data(), gate.data(), n, F, D, pool);
    linear(xn.data(), L.w_up.data(), up.data(), n, F, D, pool);
    swiglu(gate.data(), up.data(), gate.data(), n * F);
    linear(gate.data(), L.w_down.data(), tmp.data(), n, D, F, pool);
    for (int64_t i = 0; i < n * D; ++i) x[size_t(i)] += tmp[size_t(i)];
  }
  if (cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled();
  if (cache && o.layer > 0 && o.layer % keepEvery == 0 && cache->m_x[size_t(o.layer)].empty())
    cache->m_x[size_t(o.layer)] = x;

  // The chosen layer: only the chosen head's query and its KV head's key are needed (rows
  // [head * d, head * d + d) of wq and [kvh * d, kvh * d + d) of wk).
  const int kvh = o.head / group;
  {
    const LayerWeights& L = w.layers[size_t(o.layer)];
    for (int i = 0; i < n; ++i)
      rms_norm(&x[size_t(i * D)], L.attn_norm.data(), &xn[size_t(i * D)], D, c.rms_eps);
    linear(xn.data(), L.wq.data() + size_t(o.head * d) * size_t(D), q.data(), n, d, D, pool);
    linear(xn.data(), L.wk.data() + size_t(kvh * d) * size_t(D), k.data(), n, d, D, pool);
    for (int i = 0; i < n; ++i) {
      if (c.qkv_bias) {
        for (int64_t j = 0; j < d; ++j) {
          q[size_t(i * d + j)] += L.bq[size_t(o.head * d + j)];
          k[size_t(i * d + j)] += L.bk[size_t(kvh * d + j)];
        }
      }
      rope.rotate(&q[size_t(i * d)], &cs[size_t(i) * half], &sn[size_t(i) * half]);
      rope.rotate(&k[size_t(i * d)], &cs[size_t(i) * half], &sn[size_t(i) * half]);
    }
  }

  return headMapFromQK(q.data(), k.data(), n, int(d), scale, o, pool);
}

}  // namespace sinkscope::gui
