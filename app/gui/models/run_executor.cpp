// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/run_executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <utility>

#include "app/gui/models/run_executor_internal.h"
#include "engine/eval/logit_stats.h"
#include "engine/model/session.h"

namespace sinkscope::gui {

namespace run_detail {

std::string cacheKey(const CacheSettings& s) {
  std::ostringstream o;
  o << int(s.strategy) << ' ' << s.window_size << ' ' << s.sink_keep_count << ' '
    << int(s.position_mode) << ' ' << s.per_request_limit_tokens << ' '
    << s.global_cache_limit_mib << ' ' << s.quantization.enabled << ' '
    << int(s.quantization.kv_dtype) << ' ' << s.quantization.group_size << ' '
    << s.quantization.protect_sink_positions;
  return o.str();
}

// fn(i) for every i in [0, n), on the pool when there is one.
void forRows(ThreadPool* pool, int n, const std::function<void(int64_t)>& fn) {
  if (pool && n > 1) {
    pool->parallel_for(n, fn);
  } else {
    for (int i = 0; i < n; ++i) fn(i);
  }
}

// Per row of (n, nv) logits: log-sum-exp and argmax, and (prob non-null) the probabilities
// exp(logit - lse) as floats; one pass over the rows on the pool.
void rowStats(ThreadPool* pool, const float* logits, int n, int nv, std::vector<double>& lse,
              std::vector<int>& top1, float* prob) {
  lse.resize(size_t(n));
  top1.resize(size_t(n));
  forRows(pool, n, [&](int64_t i) {
    const float* row = logits + size_t(i) * nv;
    lse[size_t(i)] = log_sum_exp(row, nv);
    top1[size_t(i)] = row_argmax(row, nv);
    if (prob) row_probabilities(row, nv, lse[size_t(i)], prob + size_t(i) * nv);
  });
}

// Everything the variant's run (generation, logits, probes, comparison) depends on, except the
// prompt tokens (compared apart) and the skip mask's (layer, head).
std::string variantRunKey(const RunRequest& r, int maxTokens, int colN) {
  const AttentionSettings& a = r.attention;
  std::ostringstream o;
  o.precision(17);
  o << cacheKey(r.cache) << ' ' << r.cache.block_size << " | " << int(a.type) << ' '
    << int(a.threshold_mode) << ' ' << a.threshold_prefill << ' ' << a.threshold_decode << ' '
    << a.min_sequence_length << ' ' << a.block_size << ' ' << a.skip_value_load << ' '
    << a.skip_softmax_exp << " | " << maxTokens << ' ' << colN << ' ' << r.compare;
  return o.str();
}

// What the variant's prefill depends on: its run key without what only the decode uses (the
// decode's lambda, the generation length).
std::string prefillRunKey(const RunRequest& r, int colN) {
  RunRequest p = r;
  p.attention.threshold_decode = 0;
  return variantRunKey(p, 0, colN);
}

// The skip mask of (layer, head) out of the all-heads probe; hasHeadMask() says whether it
// is there.
bool hasHeadMask(const AttentionProbes& p, int layer, int head) {
  if (layer < 0 || layer >= p.n_layer || head < 0 || head >= p.n_head) return false;
  if (p.all_tiles.size() == size_t(p.n_layer) * p.n_head) return true;  // a windowed cache's
  return p.all_rows > 0 && p.all_cols > 0 &&
         p.all_masks.size() == size_t(p.n_layer) * p.n_head * p.all_rows * p.all_cols;
}

SkipMask headMask(const AttentionProbes& p, int layer, int head) {
  SkipMask m;
  m.layer = layer;
  m.head = head;
  if (!hasHeadMask(p, layer, head)) return m;  // none recorded: no overlay
  if (!p.all_tiles.empty()) {
    m.tiles = p.all_tiles[size_t(layer) * p.n_head + head];
    return m;
  }
  m.rows = p.all_rows;
  m.cols = p.all_cols;
  const size_t cells = size_t(p.all_rows) * p.all_cols;
  const auto first = p.all_masks.begin() + ptrdiff_t((size_t(layer) * p.n_head + head) * cells);
  m.cells.assign(first, first + ptrdiff_t(cells));
  return m;
}

// The variant computes exactly what the dense baseline computes (lambda 0 everywhere, the full
// float cache, the same tile size), so one can stand for the other.
bool denseEquivalent(const RunRequest& r) {
  const CacheSettings def;
  return r.attention.type == AttentionType::kDense &&
         r.attention.block_size == AttentionSettings{}.block_size && !r.cache.windowed() &&
         !r.cache.quantization.enabled &&
         r.cache.per_request_limit_tokens == def.per_request_limit_tokens &&
         r.cache.global_cache_limit_mib == def.global_cache_limit_mib &&
         (r.cache.block_size == 0 || r.cache.block_size == r.attention.block_size);
}

bool sameMapOptions(const HeadMapOptions& a, const HeadMapOptions& b) {
  return a.layer == b.layer && a.head == b.head && a.maxCells == b.maxCells &&
         a.sinkCount == b.sinkCount && a.window == b.window && a.ownWindow == b.ownWindow &&
         a.softcap == b.softcap && a.sinkLogit == b.sinkLogit;
}

double elapsedSince(int64_t t0) { return double(prof::now_ns() - t0) / 1e9; }

// A recorded run's probes as this request's: the map's (layer, head) mask from the all-heads
// masks the run kept.
void takeProbes(RunResult& r, const AttentionProbes& prefill, const AttentionProbes& all,
                const std::shared_ptr<const AttentionProbes>& heads, int layer, int head) {
  r.probesPrefill = prefill;
  r.probes = all;
  r.allHeads = heads;
  r.probes.mask = heads ? headMask(*heads, layer, head) : headMask(AttentionProbes{}, layer, head);
  r.probesPrefill.mask = r.probes.mask;
}

std::shared_ptr<const AttentionProbes> splitAllHeads(AttentionProbes& p) {
  if (p.all_masks.empty() && p.all_tiles.empty()) return nullptr;
  auto h = std::make_shared<AttentionProbes>();
  h->n_layer = p.n_layer;
  h->n_head = p.n_head;
  h->all_rows = std::exchange(p.all_rows, 0);
  h->all_cols = std::exchange(p.all_cols, 0);
  h->all_masks = std::move(p.all_masks);
  h->all_tiles = std::move(p.all_tiles);
  p.all_masks.clear();
  p.all_tiles.clear();
  return h;
}

bool hasHeadMask(const std::shared_ptr<const AttentionProbes>& heads, int layer, int head) {
  return heads && hasHeadMask(*heads, layer, head);
}


}  // namespace run_detail

using namespace run_detail;

RunExecutor::RunExecutor(BackendKind kind, int threads, GpuChoice gpu)
    : m_kind(kind), m_threads(threads), m_gpu(gpu) {}
RunExecutor::~RunExecutor() = default;

void RunExecutor::loadModel(const std::string& path) {
  // Nothing changes until the new model and its backend exist: a bad file leaves the previous
  // model, its backends and caches usable.
  std::shared_ptr<const Model> next = Model::load(path);
  std::shared_ptr<const Model> prev = m_model;
  setModel(std::move(next));
  try {
    (void)backendName();
  } catch (...) {
    setModel(std::move(prev));
    throw;
  }
}

void RunExecutor::setGpuChoice(GpuChoice gpu) {
  if (gpu.weights == m_gpu.weights && gpu.activations == m_gpu.activations) return;
  const GpuChoice prev = m_gpu;
  m_gpu = gpu;
  setModel(m_model);  // drops every backend and cached result
  if (!m_model) return;
  try {
    (void)backendName();
  } catch (...) {
    m_gpu = prev;
    setModel(m_model);
    throw;
  }
}

void RunExecutor::setModel(std::shared_ptr<const Model> model) {
  m_prefillKey.clear();
  m_keptRows = RowStats{};  // its hidden states may hold device memory
  m_keptLast.clear();
  m_keptKl.clear();
  m_keptKlOf.reset();
  m_keptKlDense.reset();
  m_variant.reset();
  m_spare.reset();
  m_spareKey.clear();
  m_dense.reset();
  m_denseCache.reset();
  m_mapCache.reset();
  m_mapBackend.reset();
  m_mapPrompt.clear();
  m_lastRun.reset();
  m_variantKey.clear();
  m_model = std::move(model);
}

void RunExecutor::dropViewCaches() {
  m_prefillKey.clear();
  m_keptRows = RowStats{};
  m_keptLast.clear();
  m_keptKl.clear();
  m_keptKlOf.reset();
  m_keptKlDense.reset();
  m_lastRun.reset();
  m_lastRunKey.clear();
  m_mapCache.reset();
  if (m_mapBackend) m_mapBackend->request_qkv_capture({});
  m_mapPrompt.clear();
}

// The CPU map backend's capture prefill: Q/K of `layer` and of every layer below it (within
// kMapCaptureBytes) under the map's visibility rule, ending after `layer`.
QkvCaptureRequest RunExecutor::mapCaptureRequest(int layer, int sinks, int window) {
  QkvCaptureRequest r;
  r.layer = layer;
  r.more_first = 0;
  r.more_last = layer - 1;
  r.max_bytes = kMapCaptureBytes;
  r.sink_count = sinks;
  r.window = window;
  r.stop_after_layer = true;
  return r;
}

bool RunExecutor::warmViewCaches(const std::atomic<bool>* stop) {
  if (!m_model || !m_mapCache || m_mapCache->prompt.empty()) return false;
  // Only where the map is computed from the CPU's captures: a GPU backend captures the one
  // layer it is asked for, in milliseconds.
  if (m_mapCache->source.rfind("float32", 0) != 0) return false;
  const ModelConfig& c = m_model->config();
  const HeadMapOptions& o = m_mapCache->options;
  const int sinks = o.window > 0 ? o.sinkCount : 0;
  if (!m_mapBackend || m_mapPrompt != m_mapCache->prompt || m_mapSinks != sinks ||
      m_mapWindow != o.window)
    return false;  // the last map did not come from these captures
  bool all = true;
  for (int l = 0; l < c.n_layer && all; ++l) all = m_mapBackend->qkv_capture_of(l) != nullptr;
  if (all) return false;
  // The deepest layer is always kept; the others in order while they fit.
  const QkvCaptureRequest r = mapCaptureRequest(c.n_layer - 1, sinks, o.window);
  Backend& b = *m_mapBackend;
  b.set_cancel_flag(stop);
  try {
    b.reset();
    b.request_qkv_capture(r);
    std::vector<float> last;
    b.forward(m_mapCache->prompt, LogitsMode::kLast, last);
  } catch (const Cancelled&) {
    b.set_cancel_flag(m_cancel);
    return false;
  }
  b.set_cancel_flag(m_cancel);
  return true;
}

Backend& RunExecutor::mapBackend() {
  if (!m_mapBackend) {
    BackendOptions o;
    o.n_threads = m_threads;
    m_mapBackend = make_cpu_backend(m_model, o);
  }
  m_mapBackend->set_cancel_flag(m_cancel);
  return *m_mapBackend;
}

std::string RunExecutor::backendName() {
  if (!m_model) return {};
  return variantBackend(RunRequest{}).name();
}

Backend& RunExecutor::variantBackend(const RunRequest& r) {
  m_variantCreated = false;
  const std::string key = cacheKey(r.cache);
  if (!m_variant || key != m_variantKey) {
    m_prefillKey.clear();
    // A GPU backend costs tens of milliseconds to make (buffers, pinned memory, cuBLAS handles,
    // a warm-up step): the previous one stays as the spare while its cache is small (a full
    // cache of a long context is not held twice).
    std::unique_ptr<Backend> prev = std::move(m_variant);
    std::string prevKey = std::move(m_variantKey);
    m_variantKey.clear();
    if (prev) {
      const KvCacheStats st = prev->cache_stats();
      if (prev->name() == "cpu" || st.capacity_tokens * st.bytes_per_token > kMaxSpareCacheBytes)
        prev.reset();
    }
    if (m_spare && m_spareKey == key) {
      m_variant = std::move(m_spare);
    } else {
      m_spare.reset();  // free its cache first
      BackendOptions o;
      o.n_threads = m_threads;
      o.gpu_weights = m_gpu.weights;
      o.gpu_activations = m_gpu.activations;
      o.attention = r.attention;
      o.cache = r.cache;
      o.cache.block_size = 0;  // pages follow the attention tile
      try {
        m_variant = make_backend(m_model, o, m_kind, &m_note);
      } catch (const BackendError&) {
        if (!prev) throw;
        prev.reset();  // out of device memory, perhaps: try again without the spare
        m_variant = make_backend(m_model, o, m_kind, &m_note);
      }
      m_variantCreated = true;
    }
    m_variantKey = key;
    m_spare = std::move(prev);
    m_spareKey = m_spare ? std::move(prevKey) : std::string();
  }
  m_variant->set_cancel_flag(m_cancel);
  return *m_variant;
}

Backend& RunExecutor::denseBackend() {
  if (!m_dense) {
    BackendOptions o;
    o.n_threads = m_threads;
    o.gpu_weights = m_gpu.weights;
    o.gpu_activations = m_gpu.activations;
    m_dense = make_backend(m_model, o, m_kind);
  }
  m_dense->set_cancel_flag(m_cancel);
  return *m_dense;
}

RunExecutor::Pass RunExecutor::runPass(Backend& b, const std::vector<TokenId>& prompt,
                                       int maxTokens, const std::function<void(int)>& onStep,
                                       prof::SpanRecorder* spans, std::vector<float>* buffer,
                                       const std::function<void(double)>& onPrefill,
                                       const AttentionProbes* resume, const AheadFn& ahead,
                                       bool rowStats) {
  const int nv = m_model->config().n_vocab;
  Pass p;
  p.rowStats = rowStats;
  if (rowStats) buffer = nullptr;  // nothing of the (n, n_vocab) logits comes back
  // The (n, n_vocab) logits reuse a buffer kept across runs: a fresh 100 MB vector costs a page
  // fault per 4 KiB (tens of ms of kernel page clearing) on every run.
  if (buffer) p.promptLogits.swap(*buffer);
  b.set_span_recorder(spans);
  int64_t t0 = prof::now_ns();
  // Resuming: the buffer holds this prompt's logits from the last run on this backend, and the
  // backend goes back to the end of that run's prefill.
  // A row-statistics pass resumes from the kept rows and last row of logits instead.
  const bool kept = rowStats ? m_keptRows.lse.size() == prompt.size() && m_keptLast.size() == size_t(nv)
                             : buffer && p.promptLogits.size() == prompt.size() * size_t(nv);
  p.prefillReused = resume && kept && b.rewind(int(prompt.size()), *resume);
  if (p.prefillReused && rowStats) {
    p.rows = m_keptRows;
    p.lastLogits = m_keptLast;
  }
  // Work on the prompt's logits that runs while the decode does (joined below; declared after p
  // so that an exception joins it before p goes).
  std::future<void> aheadJob;
  GenerateOptions go;
  go.max_tokens = maxTokens;  // greedy (the sampler's default), stopping at end of generation
  if (rowStats) {
    go.prompt_row_stats = &p.rows;
    go.prompt_last_logits = &p.lastLogits;
  } else
    go.prompt_logits = &p.promptLogits;
  go.prompt_in_cache = p.prefillReused;
  go.on_prefill_done = [&] {
    b.set_progress_callback({});  // the prefill's progress only
    p.prefillMs = double(prof::now_ns() - t0) / 1e6;
    p.afterPrefill = p.prefillReused ? *resume : b.probes();
    RowStats rs;
    if (!rowStats && !p.prefillReused && b.last_row_stats(&rs) && rs.lse.size() == prompt.size() &&
        rs.top1.size() == prompt.size()) {
      p.promptLse = std::move(rs.lse);
      p.promptTop1 = std::move(rs.top1);
    }
    if (ahead) aheadJob = ahead(p);
  };
  int step = 0;
  GenerateResult g;
  {
    if (!p.prefillReused && onPrefill) b.set_progress_callback(onPrefill);
    struct Unhook {
      Backend& b;
      ~Unhook() { b.set_progress_callback({}); }
    } unhook{b};
    g = generate(b, prompt, go, [&](TokenId) {
      if (onStep) onStep(step);
      ++step;
    });
  }
  p.tokens = std::move(g.tokens);
  if (g.stop_reason != "max_tokens") p.stopReason = g.stop_reason;
  p.decodeMs = g.decode_ms;
  b.set_span_recorder(nullptr);
  if (aheadJob.valid()) aheadJob.get();
  return p;
}

// The map's inputs from a GPU backend: one prefill of the prompt on the dense backend (full
// cache) with the map's visibility rule applied in every layer and the chosen layer's post-RoPE
// Q/K of the map's head captured (bf16), ending at that layer (QkvCaptureRequest). False where this does not
// apply (a CPU backend, no capture); then the CPU map backend captures them (cpuCaptureQK).
bool RunExecutor::gpuCaptureQK(const std::vector<TokenId>& prompt, const HeadMapOptions& o,
                               std::vector<float>& q, std::vector<float>& k) {
  if (m_kind == BackendKind::kCpu) return false;
  Backend& b = denseBackend();
  if (b.name() == "cpu") return false;
  const ModelConfig& c = m_model->config();
  const int n = int(prompt.size()), d = c.head_dim;
  const int kvh = o.head / (c.n_head / c.n_head_kv);
  q.assign(size_t(n) * d, 0.0f);
  k.assign(size_t(n) * d, 0.0f);
  bool ok = false;
  try {
    b.reset();
    // Not the baseline's probes (denseBaseline asks for them again before its run).
    b.request_skip_mask(-1, -1);
    b.request_all_skip_masks(false);
    QkvCaptureRequest r;
    r.layer = o.layer;
    r.sink_count = o.window > 0 ? o.sinkCount : 0;
    r.window = o.window;
    r.stop_after_layer = true;
    r.head = o.head;  // only the map's head leaves the device
    b.request_qkv_capture(r);
    std::vector<float> last;
    b.forward(prompt, LogitsMode::kLast, last);
    // Read before stopping: request_qkv_capture({}) clears the capture. The backend may have
    // kept every head (cap.head -1) or only the map's (n_head = n_head_kv = 1).
    const QkvCapture& cap = b.qkv_capture();
    const bool one = cap.head == o.head;
    const int qh = one ? 0 : o.head, kh = one ? 0 : kvh;
    ok = cap.layer == o.layer && cap.n_q == n && cap.q_start == 0 && cap.n_kv >= n &&
         cap.head_dim == d && (one || cap.head == -1) &&
         cap.n_head == (one ? 1 : c.n_head) && cap.n_head_kv == (one ? 1 : c.n_head_kv) &&
         cap.q.size() >= size_t(n) * cap.n_head * d && cap.k.size() >= size_t(n) * cap.n_head_kv * d;
    if (ok)
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < d; ++j) {
          q[size_t(i) * d + j] = bf16_to_fp32(cap.q[(size_t(i) * cap.n_head + qh) * d + j]);
          k[size_t(i) * d + j] = bf16_to_fp32(cap.k[(size_t(i) * cap.n_head_kv + kh) * d + j]);
        }
    b.request_qkv_capture({});
    b.reset();  // the capture's prefill left layers past o.layer unfilled
  } catch (const Cancelled&) {
    b.request_qkv_capture({});
    throw;
  } catch (const BackendError&) {
    try {
      b.request_qkv_capture({});
    } catch (const BackendError&) {
    }
    return false;
  }
  return ok;
}

std::string RunExecutor::gpuMapSource() {
  return "bf16 Q/K captured from the " + denseBackend().name() + " dense prefill";
}

void RunExecutor::cpuCaptureQK(const std::vector<TokenId>& prompt, const HeadMapOptions& o,
                               std::vector<float>& q, std::vector<float>& k,
                               const std::atomic<bool>* cancel) {
  const ModelConfig& c = m_model->config();
  const int n = int(prompt.size()), d = c.head_dim;
  const int sinks = o.window > 0 ? o.sinkCount : 0;
  Backend& b = mapBackend();
  if (cancel) b.set_cancel_flag(cancel);
  const bool same = m_mapPrompt == prompt && m_mapSinks == sinks && m_mapWindow == o.window;
  if (!same || !b.qkv_capture_of(o.layer)) {
    // The prefill up to the map's layer computes every layer below it anyway: keep their Q/K
    // too (within the budget), so stepping down through the layers costs no prefill.
    const QkvCaptureRequest r = mapCaptureRequest(o.layer, sinks, o.window);
    m_mapPrompt.clear();
    b.reset();
    b.request_qkv_capture(r);
    std::vector<float> last;
    try {
      b.forward(prompt, LogitsMode::kLast, last);
    } catch (...) {
      b.set_cancel_flag(m_cancel);
      throw;
    }
    m_mapPrompt = prompt;
    m_mapSinks = sinks;
    m_mapWindow = o.window;
  }
  b.set_cancel_flag(m_cancel);
  const QkvCapture* cap = b.qkv_capture_of(o.layer);
  if (!cap || !cap->complete() || cap->n_q != n)
    throw BackendError("attention map: the CPU backend captured no Q/K of layer " +
                       std::to_string(o.layer));
  const int kvh = o.head / (c.n_head / c.n_head_kv);
  q.resize(size_t(n) * d);
  k.resize(size_t(n) * d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) {
      q[size_t(i) * d + j] = cap->q_at((size_t(i) * c.n_head + o.head) * d + j);
      k[size_t(i) * d + j] = cap->k_at((size_t(i) * c.n_head_kv + kvh) * d + j);
    }
}

AttentionMap RunExecutor::headMap(const std::vector<TokenId>& prompt, const HeadMapOptions& o,
                                  std::string* source) {
  if (!m_model) throw std::invalid_argument("attention map: no model");
  const ModelConfig& c = m_model->config();
  if (o.layer < 0 || o.layer >= c.n_layer || o.head < 0 || o.head >= c.n_head)
    throw std::invalid_argument("attention map: (layer " + std::to_string(o.layer) + ", head " +
                                std::to_string(o.head) + ") is outside the model (" +
                                std::to_string(c.n_layer) + " layers, " +
                                std::to_string(c.n_head) + " heads)");
  if (prompt.empty()) throw std::invalid_argument("attention map: the prompt is empty");
  if (!m_pool) m_pool = std::make_unique<ThreadPool>(m_threads);
  HeadMapOptions lo = o;
  setLayerAttention(lo, c, &m_model->weights());
  std::vector<float> q, k;
  if (gpuCaptureQK(prompt, o, q, k)) {
    std::string how;
    AttentionMap m = mapOfGpuQK(q, k, int(prompt.size()), lo, m_pool.get(), &how);
    if (source) *source = gpuMapSource() + how;
    return m;
  }
  cpuCaptureQK(prompt, o, q, k, nullptr);
  if (source) *source = kCpuMapSource;
  return headMapFromQK(q.data(), k.data(), int(prompt.size()), c.head_dim, c.attention_scale(),
                       lo, m_pool.get());
}

// The map of Q/K the GPU captured: its probabilities and pooling on the GPU too
// (headMapOnGpu: tens of milliseconds at 32K tokens where the host takes seconds); on the host
// where that fails. *how says which ("; mapped on the GPU" or why not).
AttentionMap RunExecutor::mapOfGpuQK(const std::vector<float>& q, const std::vector<float>& k,
                                     int n, const HeadMapOptions& o, ThreadPool* pool,
                                     std::string* how) {
  const ModelConfig& c = m_model->config();
#ifdef SINKSCOPE_HAVE_CUDA
  try {
    AttentionMap m = headMapOnGpu(q.data(), k.data(), n, c.head_dim, c.attention_scale(), o);
    if (how) *how = "; probabilities and pooling on the GPU";
    return m;
  } catch (const BackendError& e) {
    if (how) *how = std::string("; pooled on the host (the GPU map failed: ") + e.what() + ")";
  }
#else
  if (how) *how = "; pooled on the host";
#endif
  return headMapFromQK(q.data(), k.data(), n, c.head_dim, c.attention_scale(), o, pool);
}

}  // namespace sinkscope::gui
