// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/run_executor.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "app/gui/models/head_attention.h"
#include "engine/rouge.h"
#include "engine/sinks.h"
#include "engine/thread_pool.h"
#include "profiler/profiler.h"

namespace sinkscope::gui {

namespace {

std::string cacheKey(const CacheSettings& s) {
  std::ostringstream o;
  o << int(s.strategy) << ' ' << s.window_size << ' ' << s.sink_keep_count << ' '
    << int(s.position_mode) << ' ' << s.per_request_limit_tokens << ' '
    << s.global_cache_limit_mib << ' ' << s.quantization.enabled << ' '
    << int(s.quantization.kv_dtype) << ' ' << s.quantization.group_size << ' '
    << s.quantization.protect_sink_positions;
  return o.str();
}

// log-sum-exp of one logits row.
double logSumExp(const float* row, int n) {
  const float mx = *std::max_element(row, row + n);
  double s = 0;
  for (int v = 0; v < n; ++v) s += std::exp(double(row[v]) - mx);
  return double(mx) + std::log(s);
}

int argmax(const float* row, int n) { return int(std::max_element(row, row + n) - row); }

double elapsedSince(int64_t t0) { return double(prof::now_ns() - t0) / 1e9; }

}  // namespace

struct RunExecutor::Pass {
  std::vector<float> promptLogits;  // (n, n_vocab)
  std::vector<TokenId> tokens;
  std::string stopReason = "max_tokens";
  double prefillMs = 0, decodeMs = 0;
  AttentionProbes afterPrefill;
};

struct RunExecutor::DenseCache {
  std::vector<TokenId> prompt;
  int maxTokens = 0;
  Pass pass;
};

RunExecutor::RunExecutor(BackendKind kind, int threads) : m_kind(kind), m_threads(threads) {}
RunExecutor::~RunExecutor() = default;

void RunExecutor::loadModel(const std::string& path) {
  setModel(Model::load(path));
}

void RunExecutor::setModel(std::shared_ptr<const Model> model) {
  m_variant.reset();
  m_dense.reset();
  m_denseCache.reset();
  m_variantKey.clear();
  m_model = std::move(model);
}

std::string RunExecutor::backendName() {
  if (!m_model) return {};
  return variantBackend(RunRequest{}).name();
}

Backend& RunExecutor::variantBackend(const RunRequest& r) {
  const std::string key = m_variant ? cacheKey(r.cache) : std::string();
  if (!m_variant || key != m_variantKey) {
    m_variant.reset();  // free the old cache first
    BackendOptions o;
    o.n_threads = m_threads;
    o.attention = r.attention;
    o.cache = r.cache;
    o.cache.block_size = 0;  // pages follow the attention tile
    m_variant = make_backend(m_model, o, m_kind, &m_note);
    m_variantKey = cacheKey(r.cache);
  }
  m_variant->set_cancel_flag(m_cancel);
  return *m_variant;
}

Backend& RunExecutor::denseBackend() {
  if (!m_dense) {
    BackendOptions o;
    o.n_threads = m_threads;
    m_dense = make_backend(m_model, o, m_kind);
  }
  m_dense->set_cancel_flag(m_cancel);
  return *m_dense;
}

RunExecutor::Pass RunExecutor::runPass(Backend& b, const std::vector<TokenId>& prompt,
                                       int maxTokens, const std::function<void(int)>& onStep,
                                       prof::SpanRecorder* spans) {
  const Tokenizer& tok = m_model->tokenizer();
  const int nv = m_model->config().n_vocab;
  Pass p;
  b.set_span_recorder(spans);
  b.reset();
  int64_t t0 = prof::now_ns();
  b.forward(prompt, LogitsMode::kAll, p.promptLogits);
  p.prefillMs = double(prof::now_ns() - t0) / 1e6;
  p.afterPrefill = b.probes();
  if (onStep) onStep(0);
  t0 = prof::now_ns();
  std::vector<float> logits;
  const float* row = p.promptLogits.data() + (prompt.size() - 1) * size_t(nv);
  for (int i = 0; i < maxTokens; ++i) {
    const TokenId next = argmax(row, nv);
    p.tokens.push_back(next);
    if (tok.is_eog(next)) {
      p.stopReason = "eog";
      break;
    }
    if (i + 1 == maxTokens) break;
    if (b.n_past() >= b.capacity()) {
      p.stopReason = "context_full";
      break;
    }
    const TokenId one[1] = {next};
    b.forward(one, LogitsMode::kLast, logits);
    row = logits.data();
    if (onStep) onStep(i + 1);
  }
  p.decodeMs = double(prof::now_ns() - t0) / 1e6;
  b.set_span_recorder(nullptr);
  return p;
}

RunResultPtr RunExecutor::run(const RunRequest& req, uint64_t id, const ProgressFn& progress) {
  if (!m_model) throw BackendError("no model is loaded");
  const int64_t tStart = prof::now_ns();
  const ModelConfig& c = m_model->config();
  const Tokenizer& tok = m_model->tokenizer();
  auto res = std::make_shared<RunResult>();
  res->id = id;
  res->request = req;
  res->nLayer = c.n_layer;
  res->nHead = c.n_head;
  // The chat template's special tokens are parsed; the user's text is the message content.
  res->promptTokens = req.chatTemplate
                          ? tok.encode(tok.apply_chat_template({{"user", req.prompt}}), /*parse_special=*/true)
                          : tok.encode(req.prompt);
  const int n = int(res->promptTokens.size());
  if (n < 2) throw std::invalid_argument("the prompt has fewer than 2 tokens; type some text");
  const int maxTokens = std::clamp(req.maxTokens, 1, 4096);
  if (n + maxTokens > c.n_ctx_train)
    throw std::invalid_argument("the prompt has " + std::to_string(n) + " tokens; with " +
                                std::to_string(maxTokens) + " generated tokens it exceeds the " +
                                "model's context of " + std::to_string(c.n_ctx_train));
  if (req.layer < 0 || req.layer >= c.n_layer || req.head < 0 || req.head >= c.n_head)
    throw std::invalid_argument("layer/head outside the model");
  for (TokenId t : res->promptTokens) res->promptPieces.push_back(tok.token_to_piece(t));

  const bool haveDense = req.compare && m_denseCache && m_denseCache->prompt == res->promptTokens &&
                         m_denseCache->maxTokens == maxTokens;
  // Progress in token-forward units: variant prefill + decode, the map, the dense run.
  const double mapUnits = double(n) * (req.layer + 1) / c.n_layer;
  const double total = n + maxTokens + mapUnits + (req.compare && !haveDense ? n + maxTokens : 0);
  double done = 0;
  auto report = [&](const char* phase) {
    if (!progress) return;
    const double el = elapsedSince(tStart);
    RunProgress pr;
    pr.fraction = std::min(1.0, done / total);
    pr.etaSeconds = done > 0 ? el / done * (total - done) : -1;
    pr.phase = phase;
    progress(pr);
  };

  // --- the variant (current settings), traced --------------------------------------------
  Backend& b = variantBackend(req);
  res->backendName = b.name();
  b.set_attention(req.attention);
  b.request_skip_mask(req.layer, req.head);
  const int colN = std::min({n, std::max(1, req.sinkPositions), 4096});
  try {
    b.request_column_mass(colN);
  } catch (const BackendError& e) {
    res->sinkNote = e.what();
  }
  prof::ProfilerOptions po;
  po.gpu = b.name() != "cpu";
  po.device = b.name();
  prof::Profiler profiler(po);
  profiler.start();
  report("prefill");
  Pass v;
  try {
    v = runPass(b, res->promptTokens, maxTokens,
                [&](int step) {
                  done = step == 0 ? n : n + step;
                  report(step == 0 ? "decode" : "decode");
                },
                profiler.spans());
  } catch (...) {
    profiler.stop();
    b.set_span_recorder(nullptr);
    throw;
  }
  profiler.stop();
  res->timeline = profiler.timeline();
  res->tokens = v.tokens;
  for (TokenId t : v.tokens) res->pieces.push_back(tok.token_to_piece(t));
  res->text = tok.decode(v.tokens, /*skip_special=*/true);
  res->stopReason = v.stopReason;
  res->prefillMs = v.prefillMs;
  res->decodeMs = v.decodeMs;
  res->probesPrefill = v.afterPrefill;
  res->probes = b.probes();
  res->sinkKeep = int(req.cache.windowed() ? req.cache.sink_keep_count : 0);
  done = n + maxTokens;

  const int nv = c.n_vocab;
  {
    double nll = 0;
    for (int i = 1; i < n; ++i) {
      const float* row = v.promptLogits.data() + size_t(i - 1) * nv;
      nll += logSumExp(row, nv) - row[res->promptTokens[size_t(i)]];
    }
    res->promptPerplexity = std::exp(nll / double(n - 1));
  }

  // --- sinks from the column-mass probe -------------------------------------------------------
  const AttentionProbes& pr = res->probes;
  if (pr.col_n > 0 && !pr.col_mass.empty()) {
    const SinkReport sr = analyze_sinks(pr.n_layer, pr.n_head, pr.col_n, pr.col_mass,
                                        pr.col_queries);
    res->sinkPositions = sr.n_pos;
    res->sinkAlpha = sr.alpha;
    res->flaggedSinks = sr.flagged;
    res->recommendedSinkKeep = sr.recommended_sink_keep;
    const int s = std::clamp(res->sinkKeep > 0 ? res->sinkKeep : 4, 1, pr.col_n);
    const double queries = double(n + std::max<int>(0, int(v.tokens.size()) - 1));
    res->firstMass.assign(size_t(pr.n_layer) * pr.n_head, 0.0);
    for (size_t lh = 0; lh < res->firstMass.size(); ++lh) {
      double m = 0;
      for (int k = 0; k < s; ++k) m += pr.col_mass[lh * size_t(pr.col_n) + size_t(k)];
      res->firstMass[lh] = m / queries;
    }
  } else if (res->sinkNote.empty()) {
    res->sinkNote = "the backend recorded no column mass";
  }

  // --- the attention map of the selected head ----------------------------------------------------
  report("attention map");
  if (!m_pool) m_pool = std::make_unique<ThreadPool>(m_threads);
  HeadMapOptions ho;
  ho.layer = req.layer;
  ho.head = req.head;
  ho.maxCells = std::clamp(req.mapSize, 8, 1024);
  if (req.cache.windowed()) {
    ho.sinkCount = int(req.cache.sink_keep_count);
    ho.window = int(req.cache.window_size);
  }
  const int64_t tMap = prof::now_ns();
  res->map = computeHeadAttention(*m_model, res->promptTokens, ho, m_pool.get(), m_cancel);
  res->mapMs = double(prof::now_ns() - tMap) / 1e6;
  done += mapUnits;

  // --- the dense baseline ------------------------------------------------------------------------
  if (req.compare) {
    report("dense baseline");
    const double base = done;
    if (!haveDense) {
      m_denseCache.reset();
      Pass d = runPass(denseBackend(), res->promptTokens, maxTokens,
                       [&](int step) {
                         done = base + (step == 0 ? n : n + step);
                         report("dense baseline");
                       },
                       nullptr);
      m_denseCache = std::make_unique<DenseCache>();
      m_denseCache->prompt = res->promptTokens;
      m_denseCache->maxTokens = maxTokens;
      m_denseCache->pass = std::move(d);
    }
    const Pass& d = m_denseCache->pass;
    Comparison& cmp = res->compare;
    cmp.available = true;
    cmp.baselineReused = haveDense;
    double nllD = 0, nllV = 0, klSum = 0;
    int agree = 0;
    for (int i = 0; i < n; ++i) {
      const float* rd = d.promptLogits.data() + size_t(i) * nv;
      const float* rv = v.promptLogits.data() + size_t(i) * nv;
      const double lzd = logSumExp(rd, nv), lzv = logSumExp(rv, nv);
      double kl = 0;
      for (int t = 0; t < nv; ++t) {
        const double lpd = double(rd[t]) - lzd;
        kl += std::exp(lpd) * (lpd - (double(rv[t]) - lzv));
      }
      kl = std::max(0.0, kl);
      cmp.klPerToken.push_back(kl);
      klSum += kl;
      agree += argmax(rd, nv) == argmax(rv, nv);
      if (i + 1 < n) {
        const TokenId next = res->promptTokens[size_t(i) + 1];
        nllD += lzd - rd[next];
        nllV += lzv - rv[next];
      }
    }
    cmp.klMean = klSum / n;
    cmp.top1Agreement = double(agree) / n;
    cmp.pplDense = std::exp(nllD / (n - 1));
    cmp.pplVariant = std::exp(nllV / (n - 1));
    cmp.pplDeltaPct = (cmp.pplVariant / cmp.pplDense - 1.0) * 100.0;
    cmp.denseTokens = d.tokens;
    for (TokenId t : d.tokens) cmp.densePieces.push_back(tok.token_to_piece(t));
    cmp.rougeL = rougeLF1(d.tokens, v.tokens);
    const size_t common = std::min(d.tokens.size(), v.tokens.size());
    for (size_t i = 0; i < common; ++i)
      if (d.tokens[i] != v.tokens[i]) {
        cmp.firstDivergence = int(i);
        break;
      }
    if (cmp.firstDivergence < 0 && d.tokens.size() != v.tokens.size())
      cmp.firstDivergence = int(common);
  }
  done = total;
  report("done");
  res->totalMs = double(prof::now_ns() - tStart) / 1e6;
  return res;
}

}  // namespace sinkscope::gui
