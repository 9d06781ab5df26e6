// SPDX-License-Identifier: Apache-2.0
// The CPU backend: float32 Llama-family forward. Projections go through linear() (OpenBLAS),
// attention through cpu_attention() (tiled online softmax with the skip rule).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/backend/backend.h"
#include "engine/backend/cpu_attention.h"
#include "engine/backend/linalg.h"
#include "engine/backend/qgemv.h"
#include "engine/eval/logit_stats.h"
#include "engine/model/rope.h"
#include "engine/util/thread_pool.h"

namespace sinkscope {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const Model> model, const BackendOptions& opt)
      : m_model(std::move(model)), m_pool(opt.n_threads), m_attn(opt.attention),
        m_qmode(opt.decode_products) {
    const ModelConfig& c = m_model->config();
    m_max_context = opt.max_context > 0 ? opt.max_context : c.n_ctx_train;
    // LongRoPE (phi3): long factors for a context past the original one, as llama.cpp picks
    // them from n_ctx (HF switches per forward by the sequence length so far).
    m_rope = RopeTable(c, m_model->weights().rope_factors_for(m_max_context, c.rope_orig_ctx));
    if (c.rope_theta_local > 0) {
      // Local layers of their own RoPE (gemma3): base rope_theta_local, never scaled.
      ModelConfig lc = c;
      lc.rope_theta = c.rope_theta_local;
      lc.rope_scaling = RopeScalingType::kNone;
      m_rope_local = RopeTable(lc, {});
    }
    set_blas_threads(1);  // linear() parallelises over our pool
    validate_attention(opt.attention);
    m_cache_settings = opt.cache;
    make_cache();
    reset();
  }

  std::string name() const override { return "cpu"; }
  const Model& model() const override { return *m_model; }
  int n_past() const override { return m_n_past; }
  int capacity() const override { return m_capacity; }

  void reset() override {
    m_n_past = 0;
    if (m_cache->block_size() != m_attn.block_size) make_cache();
    m_cache->reset();
    const ModelConfig& c = m_model->config();
    m_probes.reset(c.n_layer, c.n_head);
    size_layer_counts();
  }

  void set_attention(const AttentionSettings& s) override {
    validate_attention(s);
    if (m_cache_settings.block_size != 0 && m_cache_settings.block_size != s.block_size)
      throw BackendError("attention block_size " + std::to_string(s.block_size) +
                         " differs from the cache block_size " +
                         std::to_string(m_cache_settings.block_size));
    m_attn = s;
    // Pages are tiles: a new tile size takes effect on an empty cache (now, or at reset()).
    if (m_n_past == 0 && m_cache->block_size() != s.block_size) make_cache();
  }
  KvCacheStats cache_stats() const override { return m_cache->stats(); }
  bool rewind(int n_past, const AttentionProbes& probes) override {
    const ModelConfig& c = m_model->config();
    if (n_past < 0 || n_past > m_n_past || probes.n_layer != c.n_layer ||
        probes.n_head != c.n_head || probes.col_n != m_probes.col_n)
      return false;
    if (!m_cache->truncate(n_past)) return false;
    m_n_past = n_past;
    m_probes = probes;
    return true;
  }
  void request_column_mass(int n) override {
    if (n < 0 || n > 4096)
      throw BackendError("column-mass probe: positions must be in [0, 4096], got " +
                         std::to_string(n));
    const ModelConfig& c = m_model->config();
    m_probes.col_n = n;
    m_probes.col_mass.assign(size_t(c.n_layer) * c.n_head * size_t(n), 0.0);
    m_probes.col_queries.assign(size_t(n), 0);
    size_layer_counts();
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
  void request_all_skip_masks(bool on, bool with_stat) override {
    if (on && with_stat && m_cache_settings.windowed())
      throw BackendError("all-heads tile statistics: recorded with the full cache only");
    m_all_masks = on;
    m_all_stat = on && with_stat;
    if (!m_all_stat) std::vector<float>().swap(m_stat_tmp);  // give a statistic run's memory back
  }

  void forward(std::span<const TokenId> tokens, LogitsMode mode,
               std::vector<float>& logits) override;
  bool last_row_stats(RowStats* out) const override {
    if (!m_row_stats) return false;
    if (out) *out = *m_row_stats;
    return true;
  }
  std::vector<double> kl_rows(const HiddenRows& p, const HiddenRows& q) override;

  // Captures come from a prefill that starts at an empty cache (position 0), float32.
  void request_qkv_capture(const QkvCaptureRequest& r) override {
    const ModelConfig& c = m_model->config();
    if (r.layer >= c.n_layer)
      throw BackendError("Q/K/V capture: layer " + std::to_string(r.layer) +
                         " is outside the model (" + std::to_string(c.n_layer) + " layers)");
    if (r.layer >= 0) {
      if (m_cache_settings.windowed())
        throw BackendError("Q/K/V capture: full cache only (the window rule is the request's)");
      if (r.sink_count < 0 || r.window < 0)
        throw BackendError("Q/K/V capture: sink_count and window must be >= 0");
      if (r.more_last >= c.n_layer || (r.more_last >= 0 && r.more_first < 0) ||
          (r.more_last >= 0 && r.more_first > r.more_last))
        throw BackendError("Q/K/V capture: the extra layers [" + std::to_string(r.more_first) +
                           ", " + std::to_string(r.more_last) + "] are not a range inside [0, " +
                           std::to_string(c.n_layer - 1) + "]");
    }
    m_cap = r.layer < 0 ? QkvCaptureRequest{} : r;
    // The last captures stay readable until a capture prefill completes (or capture stops).
    if (r.layer < 0) m_captures.clear();
  }
  const QkvCapture& qkv_capture() const override {
    static const QkvCapture none;
    return m_captures.empty() ? none : m_captures.front();
  }
  const QkvCapture* qkv_capture_of(int layer) const override {
    for (const QkvCapture& cap : m_captures)
      if (cap.layer == layer) return &cap;
    return nullptr;
  }

 private:
  // One piece of a forward that the cache takes at once; writes logits of every token (all)
  // or of the last one to out (nullptr: none).
  void forward_chunk(std::span<const TokenId> tokens, bool all, float* out);
  // Logits of `rows` final hidden states x (rows, D; the residual stream) into out (rows,
  // n_vocab): the output norm, the LM head, Gemma 2's final soft-cap.
  void lm_head_rows(const float* x, int rows, float* out);
  // gpt-oss mixture of experts: y (n, D) from the normed x (n, D).
  void moe(const LayerWeights& L, int n, const float* x, float* y);

  void make_cache() {
    const ModelConfig& c = m_model->config();
    m_cache = std::make_unique<KvCache>(c.n_layer, c.n_head_kv, c.head_dim, m_attn.block_size,
                                        m_max_context, m_cache_settings);
    m_capacity = m_cache_settings.windowed() ? kUnboundedStream
                                             : int(m_cache->stats().capacity_tokens);
  }
  // A windowed cache streams without end; positions stay within int.
  static constexpr int kUnboundedStream = 1 << 30;

  // Column-mass query counts per layer, where some layer has a window of its own.
  void size_layer_counts() {
    const ModelConfig& c = m_model->config();
    bool own = false;
    for (int l = 0; l < c.n_layer; ++l) own = own || c.layer_window(l) > 0;
    if (own) m_probes.col_queries_layer.assign(size_t(c.n_layer) * size_t(m_probes.col_n), 0);
  }

  static void validate_attention(const AttentionSettings& s) {
    if (s.block_size != 64 && s.block_size != 128)
      throw BackendError("attention block_size must be 64 or 128, got " +
                         std::to_string(s.block_size));
  }

  std::shared_ptr<const Model> m_model;
  ThreadPool m_pool;
  AttentionSettings m_attn;
  QgemvMode m_qmode;  // the single-token products' path (BackendOptions::decode_products)
  AttentionProbes m_probes;
  RopeTable m_rope;
  RopeTable m_rope_local;  // local layers' RoPE where it differs (rope_theta_local > 0)
  int m_max_context = 0;
  int m_capacity = 0;
  int m_n_past = 0;
  CacheSettings m_cache_settings;
  bool m_all_masks = false;  // debug probe: every (layer, head)'s mask
  bool m_all_stat = false;   // ... and its tile statistic
  std::vector<uint8_t> m_all_tmp;
  std::vector<float> m_stat_tmp;
  // Paged K/V of every layer (engine/cache/kv_cache.h): pages of block_size positions, each
  // (position, kv_head, d), keys rotated at their original positions.
  std::unique_ptr<KvCache> m_cache;
  QkvCaptureRequest m_cap;             // layer -1: no capture
  std::vector<QkvCapture> m_captures;  // of the last capture prefill, m_cap.layer first
  int m_chunk_done = 0, m_chunk_total = 0;  // tokens of the forward before this chunk, in all
  // Scratch, reused across calls.
  std::unique_ptr<RowStats> m_row_stats;  // of the last kLastRowStats forward
  std::vector<float> m_cos, m_sin, m_x, m_xn, m_q, m_kn, m_vn, m_att, m_tmp, m_gate, m_up;
  std::vector<float> m_qs, m_cos_c, m_sin_c;  // cache position mode: queries at cache indices
  std::vector<float> m_cos_l, m_sin_l, m_cos_lc, m_sin_lc;  // the same of m_rope_local
};

void CpuBackend::forward(std::span<const TokenId> tokens, LogitsMode mode,
                         std::vector<float>& logits) {
  const ModelConfig& c = m_model->config();
  const int n = int(tokens.size());
  if (n == 0) throw BackendError("forward: no tokens");
  if (!m_cache_settings.windowed() && int64_t(m_n_past) + n > m_max_context)
    throw BackendError("context full: " + std::to_string(m_n_past) + " cached + " +
                       std::to_string(n) + " new tokens exceed the capacity of " +
                       std::to_string(m_max_context) + " tokens");
  for (TokenId t : tokens)
    if (t < 0 || t >= c.n_vocab)
      throw BackendError("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                         std::to_string(c.n_vocab - 1) + ")");
  m_pool.set_span_recorder(m_spans);  // the pool's workers get lanes of their own in a trace
  // A prefill starts a new skip mask; decode steps record none.
  if (n > 1 || m_n_past == 0) {
    m_probes.mask.tiles.clear();
    // A windowed cache's all-heads masks are tiles gathered chunk by chunk (AttentionProbes).
    if (m_all_masks && m_cache_settings.windowed()) {
      m_probes.all_tiles.assign(size_t(c.n_layer) * c.n_head, {});
      m_probes.all_rows = m_probes.all_cols = 0;
      m_probes.all_masks.clear();
    }
  }
  // A windowed cache takes the tokens in pieces, evicting as it goes; the full cache in one.
  const int step = std::min(n, m_cache->max_chunk());
  m_row_stats.reset();
  if (mode == LogitsMode::kLastRowStats) {
    // Every chunk's rows into a chunk-sized scratch, reduced to statistics right away.
    auto st = std::make_unique<RowStats>();
    auto hidden = std::make_shared<HiddenRows>();
    hidden->n = n;
    hidden->n_embd = c.n_embd;
    hidden->x.resize(size_t(n) * c.n_embd);
    st->lse.resize(size_t(n));
    st->top1.resize(size_t(n));
    st->next_logit.resize(size_t(n - 1));
    std::vector<float> rows;
    logits.resize(size_t(c.n_vocab));
    for (int off = 0; off < n; off += step) {
      const int m = std::min(step, n - off);
      rows.resize(size_t(m) * c.n_vocab);
      m_chunk_done = off;
      m_chunk_total = n;
      forward_chunk(tokens.subspan(size_t(off), size_t(m)), true, rows.data());
      std::copy_n(m_x.data(), size_t(m) * c.n_embd, hidden->x.data() + size_t(off) * c.n_embd);
      m_pool.parallel_for(m, [&](int64_t i) {
        const float* row = rows.data() + size_t(i) * c.n_vocab;
        const size_t r = size_t(off + i);
        st->lse[r] = log_sum_exp(row, c.n_vocab);
        st->top1[r] = row_argmax(row, c.n_vocab);
        if (r + 1 < size_t(n)) st->next_logit[r] = row[tokens[r + 1]];
      });
      if (off + m == n) std::copy_n(rows.data() + size_t(m - 1) * c.n_vocab, c.n_vocab, logits.data());
    }
    st->hidden = std::move(hidden);
    m_row_stats = std::move(st);
    return;
  }
  logits.resize(size_t(mode == LogitsMode::kAll ? n : 1) * c.n_vocab);
  for (int off = 0; off < n; off += step) {
    const int m = std::min(step, n - off);
    const bool last = off + m == n;
    float* out = mode == LogitsMode::kAll ? logits.data() + size_t(off) * c.n_vocab
                                          : (last ? logits.data() : nullptr);
    m_chunk_done = off;
    m_chunk_total = n;
    forward_chunk(tokens.subspan(size_t(off), size_t(m)), mode == LogitsMode::kAll, out);
  }
}

std::vector<double> CpuBackend::kl_rows(const HiddenRows& p, const HiddenRows& q) {
  const ModelConfig& c = m_model->config();
  check_kl_rows(p, q, c.n_embd);
  if (p.on_device() || q.on_device())
    throw BackendError("kl_rows: the hidden states are held in GPU memory; the CPU backend reads "
                       "only host rows");
  m_pool.set_span_recorder(m_spans);  // the current recorder (a forward's may be gone)
  std::vector<double> kl(size_t(p.n));
  constexpr int kRows = 64;  // rows per LM-head product (bounds the two logit blocks)
  std::vector<float> lp(size_t(kRows) * c.n_vocab), lq(lp.size());
  for (int r0 = 0; r0 < p.n; r0 += kRows) {
    check_cancel();
    const int m = std::min(kRows, p.n - r0);
    lm_head_rows(p.x.data() + size_t(r0) * c.n_embd, m, lp.data());
    lm_head_rows(q.x.data() + size_t(r0) * c.n_embd, m, lq.data());
    m_pool.parallel_for(m, [&](int64_t i) {
      const float* a = lp.data() + size_t(i) * c.n_vocab;
      const float* b = lq.data() + size_t(i) * c.n_vocab;
      kl[size_t(r0 + i)] =
          row_kl(a, log_sum_exp(a, c.n_vocab), b, log_sum_exp(b, c.n_vocab), c.n_vocab);
    });
  }
  return kl;
}

void CpuBackend::lm_head_rows(const float* x, int rows, float* out) {
  const ModelConfig& c = m_model->config();
  const ModelWeights& w = m_model->weights();
  const int64_t D = c.n_embd;
  m_xn.resize(std::max(m_xn.size(), size_t(rows * D)));
  for (int i = 0; i < rows; ++i)
    rms_norm(x + size_t(i * D), w.output_norm.data(), &m_xn[size_t(i * D)], D, c.rms_eps);
  if (rows == 1) {
    qgemv(w.lm_head(), m_xn.data(), out, &m_pool, m_qmode);
  } else {
    linear_q(m_xn.data(), w.lm_head(), out, rows, &m_pool);
  }
  if (c.final_softcap > 0) {  // Gemma 2: logits tanh(z / cap) * cap
    const float cap = c.final_softcap, inv = 1.0f / cap;
    for (int64_t i = 0; i < int64_t(rows) * c.n_vocab; ++i) out[i] = std::tanh(out[i] * inv) * cap;
  }
}

void CpuBackend::forward_chunk(std::span<const TokenId> tokens, bool all, float* out) {
  const ModelConfig& c = m_model->config();
  const ModelWeights& w = m_model->weights();
  const int n = int(tokens.size());
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
    dequantize_rows(w.tok_embd, tokens[size_t(i)], 1, &m_x[size_t(i * D)]);
  if (c.gemma) {  // Gemma scales the embeddings by sqrt(D) (rounded to float32 as HF does)
    const float e = float(std::sqrt(double(D)));
    for (int64_t i = 0; i < n * D; ++i) m_x[size_t(i)] *= e;
  }

  // One cos/sin table per forward, shared by every head and layer.
  const int half = m_rope.dim() / 2;
  m_cos.resize(size_t(n) * half);
  m_sin.resize(size_t(n) * half);
  for (int i = 0; i < n; ++i) m_rope.angles(m_n_past + i, &m_cos[size_t(i) * half], &m_sin[size_t(i) * half]);
  const bool two_ropes = c.rope_theta_local > 0;
  if (two_ropes) {
    m_cos_l.resize(size_t(n) * half);
    m_sin_l.resize(size_t(n) * half);
    for (int i = 0; i < n; ++i)
      m_rope_local.angles(m_n_past + i, &m_cos_l[size_t(i) * half], &m_sin_l[size_t(i) * half]);
  }

  // The sink-retaining window: each query sees at most S + W keys.
  const int n_sinks = m_cache->sinks(), window = m_cache->window();
  int64_t n_kv = m_n_past + n;
  if (window > 0) n_kv = std::min<int64_t>(n_kv, cache_position(m_n_past + n - 1, n_sinks, window) + 1);
  const double lambda = effective_lambda(m_attn, decode, n_kv);
  // A capture prefill (request_qkv_capture): the whole prompt from position 0 in one chunk, its
  // attention under the request's visibility rule, its layers' Q/K copied after RoPE. One that
  // stops after its last layer never completes a forward, so it runs on flat K/V buffers and
  // leaves the cache untouched (no pages for a prompt only mapped).
  const bool capturing = m_cap.layer >= 0 && !decode && m_n_past == 0 && m_chunk_total == n;
  const bool flat_kv = capturing && m_cap.stop_after_layer;
  const int cap_last = std::max(m_cap.layer, m_cap.more_last);
  const int vis_sinks = capturing && m_cap.window > 0 ? m_cap.sink_count : n_sinks;
  const int vis_window = capturing && m_cap.window > 0 ? m_cap.window : window;
  // Built apart and swapped in at the end: a cancelled or failed capture keeps the last one.
  std::vector<QkvCapture> fresh;
  size_t captured_bytes = 0;
  if (capturing) {
    // The request's own layer first (qkv_capture()), with its V.
    captured_bytes = sizeof(float) * size_t(n) * size_t(Q + 2 * KV);
  }
  // Cache position mode: a second rotation of the queries at their cache indices, used against
  // the sink keys once eviction has begun (kv_cache.h).
  const bool sink_queries = m_cache->cache_positions() &&
                            cache_position(m_n_past + n - 1, n_sinks, window) != m_n_past + n - 1;
  if (sink_queries) {
    m_qs.resize(size_t(n * Q));
    m_cos_c.resize(size_t(n) * half);
    m_sin_c.resize(size_t(n) * half);
    for (int i = 0; i < n; ++i)
      m_rope.angles(int(cache_position(m_n_past + i, n_sinks, window)), &m_cos_c[size_t(i) * half],
                    &m_sin_c[size_t(i) * half]);
    if (two_ropes) {
      m_cos_lc.resize(size_t(n) * half);
      m_sin_lc.resize(size_t(n) * half);
      for (int i = 0; i < n; ++i)
        m_rope_local.angles(int(cache_position(m_n_past + i, n_sinks, window)),
                            &m_cos_lc[size_t(i) * half], &m_sin_lc[size_t(i) * half]);
    }
  }
  // One token: a GEMV over the quantized blocks (memory-bound); a batch: sgemm over tiles
  // dequantized on the fly (engine/backend/qgemv.h).
  auto proj = [&](const QuantMatrix& wq, const float* x, float* y) {
    if (n == 1) {
      qgemv(wq, x, y, &m_pool, m_qmode);
    } else {
      linear_q(x, wq, y, n, &m_pool);
    }
  };
  auto rows = [&](auto&& fn) {
    if (n >= 8) {
      m_pool.parallel_for(n, [&](int64_t i) { fn(int(i)); });
    } else {
      for (int i = 0; i < n; ++i) fn(i);
    }
  };

  // Budgets are checked (and pages allocated) before anything changes. A failure or cancel
  // part-way leaves some layers with the new K/V written: roll the reservation back so the cache
  // stays consistent and the backend usable for the next run.
  if (!flat_kv) m_cache->reserve(n);
  struct Rollback {
    KvCache* cache;
    bool armed = true;
    ~Rollback() {
      if (armed) cache->rollback();
    }
  } rollback{m_cache.get(), !flat_kv};

  for (int l = 0; l < c.n_layer; ++l) {
    check_cancel();
    if (n > 1 && l > 0 && m_chunk_total > 0)
      report_progress((m_chunk_done + double(n) * l / c.n_layer) / m_chunk_total);
    prof::ScopedSpan span_layer(m_spans, "layer", l);
    const LayerWeights& L = w.layers[size_t(l)];
    {
      prof::ScopedSpan s(m_spans, "norm");
      rows([&](int i) {
        rms_norm(&m_x[size_t(i * D)], L.attn_norm.data(), &m_xn[size_t(i * D)], D, c.rms_eps);
      });
    }
    {
      prof::ScopedSpan s(m_spans, "qkv");
      if (n == 1) {  // one fork-join for the three products (x quantized once)
        const QgemvJob jobs[3] = {{&L.wq, m_q.data()}, {&L.wk, m_kn.data()}, {&L.wv, m_vn.data()}};
        qgemv_many(jobs, 3, m_xn.data(), &m_pool, m_qmode);
      } else {
        proj(L.wq, m_xn.data(), m_q.data());
        proj(L.wk, m_xn.data(), m_kn.data());
        proj(L.wv, m_xn.data(), m_vn.data());
      }
      if (c.qkv_bias) {
        for (int i = 0; i < n; ++i) {
          for (int64_t j = 0; j < Q; ++j) m_q[size_t(i * Q + j)] += L.bq[size_t(j)];
          for (int64_t j = 0; j < KV; ++j) {
            m_kn[size_t(i * KV + j)] += L.bk[size_t(j)];
            m_vn[size_t(i * KV + j)] += L.bv[size_t(j)];
          }
        }
      }
      if (c.qk_norm) {
        // Qwen3, Gemma 3: each head's Q and K RMS-normalised over head_dim (one gain vector per
        // layer shared by the heads) before RoPE; the captures below see them normalised too.
        rows([&](int i) {
          for (int h = 0; h < c.n_head; ++h) {
            float* q = &m_q[size_t(i * Q + h * c.head_dim)];
            rms_norm(q, L.q_norm.data(), q, c.head_dim, c.rms_eps);
          }
          for (int h = 0; h < c.n_head_kv; ++h) {
            float* k = &m_kn[size_t(i * KV + h * c.head_dim)];
            rms_norm(k, L.k_norm.data(), k, c.head_dim, c.rms_eps);
          }
        });
      }
    }
    {
      prof::ScopedSpan s(m_spans, "rope");
      // Local layers of a model with two RoPE bases use the local tables (same pairing).
      const bool lr = two_ropes && c.layer_local(l);
      const std::vector<float>& cos_p = lr ? m_cos_l : m_cos;
      const std::vector<float>& sin_p = lr ? m_sin_l : m_sin;
      if (sink_queries) {
        const std::vector<float>& cos_c = lr ? m_cos_lc : m_cos_c;
        const std::vector<float>& sin_c = lr ? m_sin_lc : m_sin_c;
        std::copy_n(m_q.begin(), size_t(n * Q), m_qs.begin());
        rows([&](int i) {
          for (int h = 0; h < c.n_head; ++h)
            m_rope.rotate(&m_qs[size_t(i * Q + h * c.head_dim)], &cos_c[size_t(i) * half],
                          &sin_c[size_t(i) * half]);
        });
      }
      rows([&](int i) {
        const float* cs = &cos_p[size_t(i) * half];
        const float* sn = &sin_p[size_t(i) * half];
        for (int h = 0; h < c.n_head; ++h)
          m_rope.rotate(&m_q[size_t(i * Q + h * c.head_dim)], cs, sn);
        for (int h = 0; h < c.n_head_kv; ++h)
          m_rope.rotate(&m_kn[size_t(i * KV + h * c.head_dim)], cs, sn);
      });
    }
    if (capturing) {
      const bool own = l == m_cap.layer;
      const bool more = !own && l >= m_cap.more_first && l <= m_cap.more_last;
      const size_t bytes = sizeof(float) * size_t(n) * size_t(Q + KV);
      if (own || (more && (m_cap.max_bytes == 0 || captured_bytes + bytes <= m_cap.max_bytes))) {
        QkvCapture cap;
        cap.layer = l;
        cap.n_q = cap.n_kv = n;
        cap.n_head = c.n_head;
        cap.n_head_kv = c.n_head_kv;
        cap.head_dim = c.head_dim;
        cap.qf.assign(m_q.begin(), m_q.begin() + ptrdiff_t(n * Q));
        cap.kf.assign(m_kn.begin(), m_kn.begin() + ptrdiff_t(n * KV));
        if (own) {
          cap.vf.assign(m_vn.begin(), m_vn.begin() + ptrdiff_t(n * KV));
          fresh.insert(fresh.begin(), std::move(cap));
        } else {
          captured_bytes += bytes;
          fresh.push_back(std::move(cap));
        }
      }
      if (m_cap.stop_after_layer && l == cap_last) {
        // Nothing after this layer runs (an empty cache: nothing was written).
        m_captures.swap(fresh);
        if (out) std::fill_n(out, size_t(all ? n : 1) * c.n_vocab, NAN);
        return;
      }
    }
    // Store this batch's K/V in the cache (quantizing when enabled).
    if (!flat_kv) m_cache->write(l, n, m_kn.data(), m_vn.data());
    {
      prof::ScopedSpan s(m_spans, "attention");
      const KvLayerView view = flat_kv ? KvLayerView{} : m_cache->view(l);
      CpuAttentionArgs a;
      a.q = m_q.data();
      if (flat_kv) {
        a.k = m_kn.data();
        a.v = m_vn.data();
      } else {
        a.kv = &view;
      }
      a.sink_count = vis_sinks;
      a.window = vis_window;
      a.q_sink = sink_queries ? m_qs.data() : nullptr;
      a.out = m_att.data();
      a.n_q = n;
      a.q_pos0 = m_n_past;
      a.n_kv = int(n_kv);
      a.n_head = c.n_head;
      a.n_head_kv = c.n_head_kv;
      a.d = c.head_dim;
      a.scale = c.attention_scale();
      a.own_window = c.layer_window(l);
      a.softcap = c.attn_softcap;
      if (!L.sinks.empty()) {
        a.sink_logits = L.sinks.data();
        if (m_probes.sink_mass.size() != size_t(c.n_layer) * c.n_head)
          m_probes.sink_mass.assign(size_t(c.n_layer) * c.n_head, 0.0);
        a.sink_mass = &m_probes.sink_mass[size_t(l) * c.n_head];
      }
      a.block_size = m_cache->block_size();
      if (m_probes.col_n > 0 &&
          m_probes.col_mass.size() == size_t(c.n_layer) * c.n_head * size_t(m_probes.col_n)) {
        a.col_mass = &m_probes.col_mass[size_t(l) * c.n_head * size_t(m_probes.col_n)];
        a.col_n = m_probes.col_n;
      }
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
      int all_cols = 0;
      if (!decode && m_all_masks) {
        a.mask_all = &m_all_tmp;
        a.tile_stat = m_all_stat ? &m_stat_tmp : nullptr;
        if (!a.mask) a.mask_cols = &all_cols;
      }
      cpu_attention(a, &m_pool);
      // A (rows, cols) block of mask cells in prompt positions, appended chunk by chunk (the
      // columns are this chunk's cache pages; unvisited cells are left out).
      const auto append_tiles = [&](const uint8_t* cells, int rows, int cols,
                                    std::vector<MaskTile>& out) {
        for (int r = 0; r < rows; ++r)
          for (int t = 0; t < cols && t < view.n_pages; ++t) {
            const uint8_t st = cells[size_t(r) * cols + t];
            if (st == 0) continue;
            MaskTile mt;
            mt.q0 = m_n_past + r * a.q_tile;
            mt.q1 = m_n_past + std::min(n, (r + 1) * a.q_tile);
            mt.k0 = view.page_pos0[t];
            mt.k1 = view.page_pos0[t] + view.page_rows[t];
            mt.state = st;
            out.push_back(mt);
          }
      };
      const int q_rows = (n + a.q_tile - 1) / a.q_tile;
      if (a.mask) {
        SkipMask& mk = m_probes.mask;
        mk.rows = q_rows;
        append_tiles(mk.cells.data(), mk.rows, mk.cols, mk.tiles);
      }
      if (a.mask_all && m_cache_settings.windowed()) {
        // Every head's block of this chunk, as for the requested head's mask above.
        const int cols = a.mask ? m_probes.mask.cols : all_cols;
        for (int h = 0; h < c.n_head; ++h)
          append_tiles(m_all_tmp.data() + size_t(h) * q_rows * cols, q_rows, cols,
                       m_probes.all_tiles[size_t(l) * c.n_head + h]);
      } else if (a.mask_all) {  // the debug probe: this layer's block of every head's mask
        AttentionProbes& pr = m_probes;
        const size_t per_layer = m_all_tmp.size();
        if (l == 0) {
          pr.all_rows = q_rows;
          pr.all_cols = a.mask ? m_probes.mask.cols : all_cols;
          pr.all_masks.assign(per_layer * size_t(c.n_layer), 0);
          if (m_all_stat) pr.all_stat.assign(per_layer * size_t(c.n_layer), NAN);
          else pr.all_stat.clear();
        }
        std::copy(m_all_tmp.begin(), m_all_tmp.end(), pr.all_masks.begin() + ptrdiff_t(per_layer * l));
        if (m_all_stat)
          std::copy(m_stat_tmp.begin(), m_stat_tmp.end(), pr.all_stat.begin() + ptrdiff_t(per_layer * l));
      }
    }
    {
      prof::ScopedSpan s(m_spans, "o-proj");
      proj(L.wo, m_att.data(), m_tmp.data());
      if (!L.bo.empty())
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < D; ++j) m_tmp[size_t(i * D + j)] += L.bo[size_t(j)];
      if (!L.attn_post_norm.empty())
        rows([&](int i) {
          float* t = &m_tmp[size_t(i * D)];
          rms_norm(t, L.attn_post_norm.data(), t, D, c.rms_eps);
        });
      for (int64_t i = 0; i < n * D; ++i) m_x[size_t(i)] += m_tmp[size_t(i)];
    }
    {
      prof::ScopedSpan s(m_spans, "mlp");
      rows([&](int i) {
        rms_norm(&m_x[size_t(i * D)], L.ffn_norm.data(), &m_xn[size_t(i * D)], D, c.rms_eps);
      });
      if (c.n_expert > 0) {
        moe(L, n, m_xn.data(), m_tmp.data());
        for (int64_t i = 0; i < n * D; ++i) m_x[size_t(i)] += m_tmp[size_t(i)];
        continue;
      }
      if (n == 1) {
        const QgemvJob jobs[2] = {{&L.w_gate, m_gate.data()}, {&L.w_up, m_up.data()}};
        qgemv_many(jobs, 2, m_xn.data(), &m_pool, m_qmode);
      } else {
        proj(L.w_gate, m_xn.data(), m_gate.data());
        proj(L.w_up, m_xn.data(), m_up.data());
      }
      if (c.gemma) {
        geglu(m_gate.data(), m_up.data(), m_gate.data(), n * F);
      } else {
        swiglu(m_gate.data(), m_up.data(), m_gate.data(), n * F);
      }
      proj(L.w_down, m_gate.data(), m_tmp.data());
      if (!L.ffn_post_norm.empty())
        rows([&](int i) {
          float* t = &m_tmp[size_t(i * D)];
          rms_norm(t, L.ffn_post_norm.data(), t, D, c.rms_eps);
        });
      for (int64_t i = 0; i < n * D; ++i) m_x[size_t(i)] += m_tmp[size_t(i)];
    }
  }
  rollback.armed = false;
  if (!m_probes.sink_mass.empty()) m_probes.sink_queries += n;
  if (capturing) m_captures.swap(fresh);
  // Queries i >= k that could see key k, for the column-mass probe's means.
  for (int k = 0; k < m_probes.col_n && size_t(k) < m_probes.col_queries.size(); ++k)
    for (int i = 0; i < n; ++i) {
      const int64_t q = m_n_past + i;
      if (!(k <= q && (k < n_sinks || window == 0 || k > q - window))) continue;
      ++m_probes.col_queries[size_t(k)];
      if (!m_probes.col_queries_layer.empty())
        for (int l = 0; l < c.n_layer; ++l) {
          const int ow = c.layer_window(l);
          if (ow == 0 || k > q - ow) ++m_probes.col_queries_layer[size_t(l) * m_probes.col_n + k];
        }
    }
  m_cache->commit(n);
  m_n_past += n;

  if (!out) return;
  prof::ScopedSpan span_head(m_spans, "lm-head");
  const int first = all ? 0 : n - 1;
  lm_head_rows(&m_x[size_t(first * D)], n - first, out);
}

// Per token: router logits z = R x + b; the n_expert_used largest (ties: the lower index first,
// as torch.topk returns them) are softmaxed among themselves; each chosen expert e gives
// W_down,e h + b_down,e with h the clamped SwiGLU of its gate and up projections (model.h), and
// y is the weighted sum.
void CpuBackend::moe(const LayerWeights& L, int n, const float* x, float* y) {
  const ModelConfig& c = m_model->config();
  const int D = c.n_embd, F = c.n_ff, E = c.n_expert, K = c.n_expert_used;
  std::vector<float> z(static_cast<size_t>(E)), g(static_cast<size_t>(F)), u(static_cast<size_t>(F)),
      o(static_cast<size_t>(D));
  std::vector<int> idx(static_cast<size_t>(E));
  const float alpha = c.swiglu_alpha, limit = c.swiglu_limit;
  for (int i = 0; i < n; ++i) {
    const float* xi = x + int64_t(i) * D;
    float* yi = y + int64_t(i) * D;
    std::fill_n(yi, D, 0.0f);
    qgemv(L.router, xi, z.data(), &m_pool);
    for (int e = 0; e < E; ++e) z[size_t(e)] += L.router_bias[size_t(e)];
    for (int e = 0; e < E; ++e) idx[size_t(e)] = e;
    std::partial_sort(idx.begin(), idx.begin() + K, idx.end(), [&](int p, int q) {
      return z[size_t(p)] > z[size_t(q)] || (z[size_t(p)] == z[size_t(q)] && p < q);
    });
    const float zmax = z[size_t(idx[0])];
    double sum = 0.0;
    std::vector<double> wts(static_cast<size_t>(K));
    for (int k = 0; k < K; ++k) sum += (wts[size_t(k)] = std::exp(double(z[size_t(idx[size_t(k)])]) - zmax));
    for (int k = 0; k < K; ++k) {
      const int e = idx[size_t(k)];
      qgemv(L.exp_gate[size_t(e)], xi, g.data(), &m_pool);
      qgemv(L.exp_up[size_t(e)], xi, u.data(), &m_pool);
      const float* bg = &L.exp_gate_b[size_t(e) * F];
      const float* bu = &L.exp_up_b[size_t(e) * F];
      for (int j = 0; j < F; ++j) {
        const float gj = std::min(g[size_t(j)] + bg[j], limit);
        const float uj = std::clamp(u[size_t(j)] + bu[j], -limit, limit);
        g[size_t(j)] = (uj + 1.0f) * (gj / (1.0f + std::exp(-alpha * gj)));
      }
      qgemv(L.exp_down[size_t(e)], g.data(), o.data(), &m_pool);
      const float w = float(wts[size_t(k)] / sum);
      const float* bd = &L.exp_down_b[size_t(e) * D];
      for (int j = 0; j < D; ++j) yi[j] += w * (o[size_t(j)] + bd[j]);
    }
  }
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Model> model,
                                          const BackendOptions& options) {
  if (!model) throw BackendError("make_cpu_backend: no model");
  return std::make_unique<CpuBackend>(std::move(model), options);
}

}  // namespace sinkscope
