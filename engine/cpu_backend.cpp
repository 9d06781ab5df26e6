// SPDX-License-Identifier: Apache-2.0
// The CPU backend: float32 Llama-family forward. Projections go through linear() (OpenBLAS),
// attention through cpu_attention() (tiled online softmax with the skip rule).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/backend.h"
#include "engine/cpu_attention.h"
#include "engine/linalg.h"
#include "engine/qgemv.h"
#include "engine/rope.h"
#include "engine/thread_pool.h"

namespace sinkscope {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const Model> model, const BackendOptions& opt)
      : m_model(std::move(model)), m_pool(opt.n_threads), m_attn(opt.attention) {
    const ModelConfig& c = m_model->config();
    m_capacity = opt.max_context > 0 ? opt.max_context : c.n_ctx_train;
    m_rope = RopeTable(c, m_model->weights().rope_freqs);
    m_k.resize(size_t(c.n_layer));
    m_v.resize(size_t(c.n_layer));
    set_blas_threads(1);  // linear() parallelises over our pool
    validate_attention(opt.attention);
    reset();
  }

  std::string name() const override { return "cpu"; }
  const Model& model() const override { return *m_model; }
  int n_past() const override { return m_n_past; }
  int capacity() const override { return m_capacity; }

  void reset() override {
    m_n_past = 0;
    for (auto& k : m_k) k.clear();
    for (auto& v : m_v) v.clear();
    const ModelConfig& c = m_model->config();
    m_probes.reset(c.n_layer, c.n_head);
  }

  void set_attention(const AttentionSettings& s) override {
    validate_attention(s);
    m_attn = s;
  }
  const AttentionSettings& attention() const override { return m_attn; }
  const AttentionProbes& probes() const override { return m_probes; }
  void request_skip_mask(int layer, int head) override {
    const ModelConfig& c = m_model->config();
    if (layer >= c.n_layer || head >= c.n_head || (layer < 0) != (head < 0))
      throw BackendError("skip mask: (layer " + std::to_string(layer) + ", head " +
                         std::to_string(head) + ") is outside the model (" +
                         std::to_string(c.n_layer) + " layers, " + std::to_string(c.n_head) +
                         " heads)");
    m_probes.mask.layer = layer;
    m_probes.mask.head = head;
  }

  void forward(std::span<const TokenId> tokens, LogitsMode mode,
               std::vector<float>& logits) override;

 private:
  static void validate_attention(const AttentionSettings& s) {
    if (s.block_size != 64 && s.block_size != 128)
      throw BackendError("attention block_size must be 64 or 128, got " +
                         std::to_string(s.block_size));
  }

  std::shared_ptr<const Model> m_model;
  ThreadPool m_pool;
  AttentionSettings m_attn;
  AttentionProbes m_probes;
  RopeTable m_rope;
  int m_capacity = 0;
  int m_n_past = 0;
  // Per layer: (position, kv_head, d) — position-major so appending never moves old rows.
  std::vector<std::vector<float>> m_k, m_v;
  // Scratch, reused across calls.
  std::vector<float> m_cos, m_sin, m_x, m_xn, m_q, m_kn, m_vn, m_att, m_tmp, m_gate, m_up;
};

void CpuBackend::forward(std::span<const TokenId> tokens, LogitsMode mode,
                         std::vector<float>& logits) {
  const ModelConfig& c = m_model->config();
  const ModelWeights& w = m_model->weights();
  const int n = int(tokens.size());
  if (n == 0) throw BackendError("forward: no tokens");
  if (int64_t(m_n_past) + n > m_capacity)
    throw BackendError("context full: " + std::to_string(m_n_past) + " cached + " +
                       std::to_string(n) + " new tokens exceed the capacity of " +
                       std::to_string(m_capacity) + " tokens");
  for (TokenId t : tokens)
    if (t < 0 || t >= c.n_vocab)
      throw BackendError("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                         std::to_string(c.n_vocab - 1) + ")");

  prof::ScopedSpan span_fwd(m_spans, n == 1 && m_n_past > 0 ? "decode step" : "prefill");
  const int64_t D = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff;
  const bool decode = n == 1 && m_n_past > 0;
  m_x.resize(size_t(n * D));
  m_xn.resize(size_t(n * D));
  m_q.resize(size_t(n * Q));
  m_kn.resize(size_t(n * KV));
  m_vn.resize(size_t(n * KV));
  m_att.resize(size_t(n * Q));
  m_tmp.resize(size_t(n * D));
  m_gate.resize(size_t(n * F));
  m_up.resize(size_t(n * F));

  for (int i = 0; i < n; ++i)
    std::memcpy(&m_x[size_t(i * D)], &w.tok_embd[size_t(tokens[size_t(i)]) * D],
                sizeof(float) * size_t(D));

  // One cos/sin table per forward, shared by every head and layer.
  const int half = m_rope.dim() / 2;
  m_cos.resize(size_t(n) * half);
  m_sin.resize(size_t(n) * half);
  for (int i = 0; i < n; ++i) m_rope.angles(m_n_past + i, &m_cos[size_t(i) * half], &m_sin[size_t(i) * half]);

  const int n_kv = m_n_past + n;
  const double lambda = effective_lambda(m_attn, decode, n_kv);
  // One token reads the quantized weights (memory-bound); a batch uses float32 sgemm.
  auto proj = [&](const std::vector<float>& wf, const QuantMatrix& wq, const float* x, float* y,
                  int64_t out, int64_t in) {
    if (n == 1 && !wq.empty()) {
      qgemv(wq, x, y, &m_pool);
    } else {
      linear(x, wf.data(), y, n, out, in, &m_pool);
    }
  };
  auto rows = [&](auto&& fn) {
    if (n >= 8) {
      m_pool.parallel_for(n, [&](int64_t i) { fn(int(i)); });
    } else {
      for (int i = 0; i < n; ++i) fn(i);
    }
  };

  // A failure or cancel part-way leaves some layers with the new K/V appended: roll them back
  // so the cache stays consistent and the backend usable for the next run.
  struct Rollback {
    CpuBackend* self;
    size_t keep;
    bool armed = true;
    ~Rollback() {
      if (!armed) return;
      for (auto& k : self->m_k) k.resize(std::min(k.size(), keep));
      for (auto& v : self->m_v) v.resize(std::min(v.size(), keep));
    }
  } rollback{this, size_t(m_n_past) * size_t(KV)};

  for (int l = 0; l < c.n_layer; ++l) {
    check_cancel();
    prof::ScopedSpan span_layer(m_spans, "layer");
    const LayerWeights& L = w.layers[size_t(l)];
    {
      prof::ScopedSpan s(m_spans, "norm");
      rows([&](int i) {
        rms_norm(&m_x[size_t(i * D)], L.attn_norm.data(), &m_xn[size_t(i * D)], D, c.rms_eps);
      });
    }
    {
      prof::ScopedSpan s(m_spans, "qkv");
      proj(L.wq, L.q.wq, m_xn.data(), m_q.data(), Q, D);
      proj(L.wk, L.q.wk, m_xn.data(), m_kn.data(), KV, D);
      proj(L.wv, L.q.wv, m_xn.data(), m_vn.data(), KV, D);
      if (c.qkv_bias) {
        for (int i = 0; i < n; ++i) {
          for (int64_t j = 0; j < Q; ++j) m_q[size_t(i * Q + j)] += L.bq[size_t(j)];
          for (int64_t j = 0; j < KV; ++j) {
            m_kn[size_t(i * KV + j)] += L.bk[size_t(j)];
            m_vn[size_t(i * KV + j)] += L.bv[size_t(j)];
          }
        }
      }
    }
    {
      prof::ScopedSpan s(m_spans, "rope");
      rows([&](int i) {
        const float* cs = &m_cos[size_t(i) * half];
        const float* sn = &m_sin[size_t(i) * half];
        for (int h = 0; h < c.n_head; ++h)
          m_rope.rotate(&m_q[size_t(i * Q + h * c.head_dim)], cs, sn);
        for (int h = 0; h < c.n_head_kv; ++h)
          m_rope.rotate(&m_kn[size_t(i * KV + h * c.head_dim)], cs, sn);
      });
    }
    // Append this batch's K/V to the cache.
    auto& kc = m_k[size_t(l)];
    auto& vc = m_v[size_t(l)];
    kc.insert(kc.end(), m_kn.begin(), m_kn.begin() + n * KV);
    vc.insert(vc.end(), m_vn.begin(), m_vn.begin() + n * KV);
    {
      prof::ScopedSpan s(m_spans, "attention");
      CpuAttentionArgs a;
      a.q = m_q.data();
      a.k = kc.data();
      a.v = vc.data();
      a.out = m_att.data();
      a.n_q = n;
      a.q_pos0 = m_n_past;
      a.n_kv = n_kv;
      a.n_head = c.n_head;
      a.n_head_kv = c.n_head_kv;
      a.d = c.head_dim;
      a.scale = float(1.0 / std::sqrt(double(c.head_dim)));
      a.block_size = m_attn.block_size;
      a.q_tile = kQueryTileRows;
      a.log_lambda = log_threshold(lambda);
      a.skip_softmax_exp = m_attn.skip_softmax_exp;
      auto& counts = decode ? m_probes.decode : m_probes.prefill;
      a.counts = &counts[size_t(l) * c.n_head];
      if (!decode && l == m_probes.mask.layer) {
        a.mask_head = m_probes.mask.head;
        a.mask = &m_probes.mask.cells;
        a.mask_cols = &m_probes.mask.cols;
      }
      cpu_attention(a, &m_pool);
      if (a.mask) m_probes.mask.rows = (n + a.q_tile - 1) / a.q_tile;
    }
    {
      prof::ScopedSpan s(m_spans, "o-proj");
      proj(L.wo, L.q.wo, m_att.data(), m_tmp.data(), D, Q);
      for (int64_t i = 0; i < n * D; ++i) m_x[size_t(i)] += m_tmp[size_t(i)];
    }
    {
      prof::ScopedSpan s(m_spans, "mlp");
      rows([&](int i) {
        rms_norm(&m_x[size_t(i * D)], L.ffn_norm.data(), &m_xn[size_t(i * D)], D, c.rms_eps);
      });
      proj(L.w_gate, L.q.w_gate, m_xn.data(), m_gate.data(), F, D);
      proj(L.w_up, L.q.w_up, m_xn.data(), m_up.data(), F, D);
      swiglu(m_gate.data(), m_up.data(), m_gate.data(), n * F);
      proj(L.w_down, L.q.w_down, m_gate.data(), m_tmp.data(), D, F);
      for (int64_t i = 0; i < n * D; ++i) m_x[size_t(i)] += m_tmp[size_t(i)];
    }
  }
  rollback.armed = false;
  m_n_past += n;

  prof::ScopedSpan span_head(m_spans, "lm-head");
  const int first = mode == LogitsMode::kAll ? 0 : n - 1;
  const int rows_out = n - first;
  for (int i = first; i < n; ++i)
    rms_norm(&m_x[size_t(i * D)], w.output_norm.data(), &m_xn[size_t((i - first) * D)], D,
             c.rms_eps);
  logits.resize(size_t(rows_out) * c.n_vocab);
  if (rows_out == 1 && !w.lm_head_q.empty()) {
    qgemv(w.lm_head_q, m_xn.data(), logits.data(), &m_pool);
  } else {
    linear(m_xn.data(), w.lm_head(), logits.data(), rows_out, c.n_vocab, D, &m_pool);
  }
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Model> model,
                                          const BackendOptions& options) {
  if (!model) throw BackendError("make_cpu_backend: no model");
  return std::make_unique<CpuBackend>(std::move(model), options);
}

}  // namespace sinkscope
