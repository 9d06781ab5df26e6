// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/head_attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/backend.h"
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

void forEach(ThreadPool* pool, int64_t n, const std::function<void(int64_t)>& fn) {
  if (pool && n > 1) {
    pool->parallel_for(n, fn);
  } else {
    for (int64_t i = 0; i < n; ++i) fn(i);
  }
}

// Softmax probabilities of query row i of one head against keys 0..i (invisible keys get 0).
void probabilityRow(const float* q, const float* k, int i, int kvStride, int d, float scale,
                    const HeadMapOptions& o, std::vector<float>& p) {
  float mx = -INFINITY;
  for (int j = 0; j <= i; ++j) {
    if (!visible(j, i, o)) {
      p[size_t(j)] = -INFINITY;
      continue;
    }
    const float* kj = k + size_t(j) * size_t(kvStride);
    float s = 0;
    for (int t = 0; t < d; ++t) s += q[t] * kj[t];
    p[size_t(j)] = s * scale;
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

AttentionMap computeHeadAttention(const Model& model, const std::vector<TokenId>& tokens,
                                  const HeadMapOptions& o, ThreadPool* pool,
                                  const std::atomic<bool>* cancel) {
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

  std::vector<float> x(size_t(n * D)), xn(size_t(n * D)), q(size_t(n * Q)), k(size_t(n * KV)),
      v(size_t(n * KV)), att(size_t(n * Q)), tmp(size_t(n * D));
  for (int i = 0; i < n; ++i)
    std::copy_n(&w.tok_embd[size_t(tokens[size_t(i)]) * size_t(D)], D, &x[size_t(i * D)]);

  for (int l = 0; l <= o.layer; ++l) {
    if (cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled();
    const LayerWeights& L = w.layers[size_t(l)];
    const bool last = l == o.layer;
    for (int i = 0; i < n; ++i)
      rms_norm(&x[size_t(i * D)], L.attn_norm.data(), &xn[size_t(i * D)], D, c.rms_eps);
    linear(xn.data(), L.wq.data(), q.data(), n, Q, D, pool);
    linear(xn.data(), L.wk.data(), k.data(), n, KV, D, pool);
    if (!last) linear(xn.data(), L.wv.data(), v.data(), n, KV, D, pool);
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
    if (last) break;
    // Dense attention of every head (the layer's output feeds the next layer).
    forEach(pool, c.n_head, [&](int64_t h) {
      std::vector<float> p(static_cast<size_t>(n));
      const int kvh = int(h) / group;
      for (int i = 0; i < n; ++i) {
        probabilityRow(&q[size_t(i * Q + h * d)], &k[size_t(kvh * d)], i, int(KV), int(d), scale,
                       o, p);
        float* out = &att[size_t(i * Q + h * d)];
        std::fill_n(out, d, 0.0f);
        for (int j = 0; j <= i; ++j) {
          if (p[size_t(j)] == 0.0f) continue;
          const float* vj = &v[size_t(j * KV + kvh * d)];
          for (int t = 0; t < d; ++t) out[t] += p[size_t(j)] * vj[t];
        }
      }
    });
    linear(att.data(), L.wo.data(), tmp.data(), n, D, Q, pool);
    for (int64_t i = 0; i < n * D; ++i) x[size_t(i)] += tmp[size_t(i)];
    for (int i = 0; i < n; ++i)
      rms_norm(&x[size_t(i * D)], L.ffn_norm.data(), &xn[size_t(i * D)], D, c.rms_eps);
    std::vector<float> gate(size_t(n * F)), up(size_t(n * F));
    linear(xn.data(), L.w_gate.data(), gate.data(), n, F, D, pool);
    linear(xn.data(), L.w_up.data(), up.data(), n, F, D, pool);
    swiglu(gate.data(), up.data(), gate.data(), n * F);
    linear(gate.data(), L.w_down.data(), tmp.data(), n, D, F, pool);
    for (int64_t i = 0; i < n * D; ++i) x[size_t(i)] += tmp[size_t(i)];
  }

  AttentionMap m;
  m.layer = o.layer;
  m.head = o.head;
  m.nTokens = n;
  m.rowStart = binEdges(n, o.maxCells);
  m.colStart = m.rowStart;
  m.rows = int(m.rowStart.size()) - 1;
  m.cols = m.rows;
  m.cells.assign(size_t(m.rows) * m.cols, 0.0f);
  std::vector<double> colSum(static_cast<size_t>(n), 0.0);
  std::vector<int> colQueries(static_cast<size_t>(n), 0);
  std::vector<int> colBin(static_cast<size_t>(n));
  for (int b = 0; b < m.cols; ++b)
    for (int j = m.colStart[size_t(b)]; j < m.colStart[size_t(b) + 1]; ++j) colBin[size_t(j)] = b;
  const int kvh = o.head / group;
  std::vector<float> p(static_cast<size_t>(n));
  for (int r = 0; r < m.rows; ++r) {
    std::vector<double> acc(size_t(m.cols), 0.0);
    for (int i = m.rowStart[size_t(r)]; i < m.rowStart[size_t(r) + 1]; ++i) {
      probabilityRow(&q[size_t(i * Q + o.head * d)], &k[size_t(kvh * d)], i, int(KV), int(d),
                     scale, o, p);
      for (int j = 0; j <= i; ++j) {
        acc[size_t(colBin[size_t(j)])] += p[size_t(j)];
        colSum[size_t(j)] += p[size_t(j)];
        if (visible(j, i, o)) ++colQueries[size_t(j)];
      }
    }
    const int rowsIn = m.rowStart[size_t(r) + 1] - m.rowStart[size_t(r)];
    for (int b = 0; b < m.cols; ++b) {
      const int colsIn = m.colStart[size_t(b) + 1] - m.colStart[size_t(b)];
      m.cells[size_t(r) * m.cols + b] = float(acc[size_t(b)] / double(rowsIn * colsIn));
    }
  }
  m.alpha = alphaFromColumns(colSum, colQueries);
  return m;
}

}  // namespace sinkscope::gui
