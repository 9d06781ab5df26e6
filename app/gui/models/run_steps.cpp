// SPDX-License-Identifier: Apache-2.0
// RunExecutor::run, step by step (RunExecutor::Run, app/gui/models/run_executor_internal.h).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "app/gui/models/run_executor_internal.h"
#include "engine/eval/logit_stats.h"
#include "engine/eval/rouge.h"
#include "engine/eval/sinks.h"

namespace sinkscope::gui {

using namespace run_detail;

void RunExecutor::Run::klPerPosition(ThreadPool* pool, const DenseCache& dc, const float* vLogits,
                                     const std::vector<double>& lseV, int n, int nv,
                                     std::vector<double>& out) {
  out.assign(size_t(n), 0.0);
  forRows(pool, n, [&](int64_t i) {
    const float* rd = dc.pass.promptLogits.data() + size_t(i) * nv;
    const float* rv = vLogits + size_t(i) * nv;
    const double lzd = dc.lse[size_t(i)], lzv = lseV[size_t(i)];
    const float* pd = dc.prob.empty() ? nullptr : dc.prob.data() + size_t(i) * nv;
    if (pd && dc.dot.size() == size_t(n)) {
      const double kl = (dc.dot[size_t(i)] - dot_f64(pd, rv, nv)) - (lzd - lzv) * dc.psum[size_t(i)];
      out[size_t(i)] = std::max(0.0, kl);
      return;
    }
    double kl = 0;
    for (int t = 0; t < nv; ++t) {
      const double lpd = double(rd[t]) - lzd;
      const double p = pd ? double(pd[t]) : std::exp(lpd);
      kl += p * (lpd - (double(rv[t]) - lzv));
    }
    out[size_t(i)] = std::max(0.0, kl);
  });
}

void RunExecutor::Run::prepare() {
  res->id = id;
  res->request = req;
  res->nLayer = c.n_layer;
  res->nHead = c.n_head;
  // With the chat template the user's text is the message content (Tokenizer::encode_chat: the
  // template's special tokens parsed, its own BOS only).
  res->promptTokens = req.chatTemplate ? tok.encode_chat({{"user", req.prompt}})
                                       : tok.encode(req.prompt);
  n = int(res->promptTokens.size());
  if (n < 2) throw std::invalid_argument("the prompt has fewer than 2 tokens; type some text");
  maxTokens = std::clamp(req.maxTokens, 1, 4096);
  if (n + maxTokens > c.n_ctx_train)
    throw std::invalid_argument("the prompt has " + std::to_string(n) + " tokens; with " +
                                std::to_string(maxTokens) + " generated tokens it exceeds the " +
                                "model's context of " + std::to_string(c.n_ctx_train));
  if (req.layer < 0 || req.layer >= c.n_layer || req.head < 0 || req.head >= c.n_head)
    throw std::invalid_argument("layer/head outside the model");
  for (TokenId t : res->promptTokens) res->promptPieces.push_back(tok.token_to_piece(t));
  nv = c.n_vocab;

  // A GPU variant (or the tests' setting) reduces the prompt's logits on the backend; the
  // baseline is kept in the same form, so one made the other way is made again.
  statsOnBackend = ex.m_rowStatsOnCpu ||
             (ex.m_kind != BackendKind::kCpu && ex.variantBackend(req).name() != "cpu");
  haveDense = req.compare && ex.m_denseCache && ex.m_denseCache->prompt == res->promptTokens &&
              ex.m_denseCache->maxTokens == maxTokens && ex.m_denseCache->rowStats == statsOnBackend;
  // The attention map depends on the prompt, the (layer, head), the map size and the cache's
  // visibility rule only: a change of lambda or of the attention type reuses it.
  ho.layer = req.layer;
  ho.head = req.head;
  ho.maxCells = std::clamp(req.mapSize, 8, 1024);
  if (req.cache.windowed()) {
    ho.sinkCount = int(req.cache.sink_keep_count);
    ho.window = int(req.cache.window_size);
  }
  setLayerAttention(ho, c, &ex.m_model->weights());
  haveMap = ex.m_mapCache && ex.m_mapCache->prompt == res->promptTokens &&
            sameMapOptions(ex.m_mapCache->options, ho);
  // Progress in token-forward units: variant prefill + decode, the map, the dense run.
  mapUnits = haveMap ? 0.0 : double(n) * (req.layer + 1) / c.n_layer;
  total = n + maxTokens + mapUnits + (req.compare && !haveDense ? n + maxTokens : 0);

  colN = std::min({n, std::max(1, req.sinkPositions), 4096});
  runKey = variantRunKey(req, maxTokens, colN);
  // A change of the map's (layer, head) or size alone leaves the variant's run as it was: its
  // tokens, logits-derived numbers, probes, timeline and comparison are reused, and the skip
  // mask of the new (layer, head) comes from the all-heads masks the run recorded.
  // Where the backend could record no mask for these settings (the last run's maskNote), the
  // new head has none either, and the run is reused all the same.
  reuseVariant = ex.m_lastRun && ex.m_lastRunKey == runKey &&
                 ex.m_lastRun->promptTokens == res->promptTokens &&
                 (hasHeadMask(ex.m_lastRun->allHeads, req.layer, req.head) ||
                  !ex.m_lastRun->maskNote.empty());
  // Sparse off (the baseline's own settings): the cached baseline run is the variant's run.
  fromDense = !reuseVariant && req.compare && haveDense && denseEquivalent(req) &&
              ex.m_denseCache->colN == colN && ex.m_denseCache->timeline &&
              hasHeadMask(ex.m_denseCache->allHeads, req.layer, req.head);
  if (!ex.m_pool) ex.m_pool = std::make_unique<ThreadPool>(ex.m_threads);
}

void RunExecutor::Run::startMapAhead() {
  // With a GPU variant, the map is made before the variant's run: its Q/K captured on the GPU
  // (a prefill up to the map's layer), then its probabilities on the pool while the GPU runs the
  // variant; without a capture, a windowed map's CPU capture runs alongside instead.
  // Joined before the pool is used again (its future also joins on every exit, cancel included).
  if (haveMap || reuseVariant || fromDense || ex.m_kind == BackendKind::kCpu) return;
  const Backend& vb = ex.variantBackend(req);
  if (ex.m_variantCreated) stage("variant backend made (new cache settings)");
  if (vb.name() == "cpu") return;
  ex.m_mapCache.reset();
  if (ex.gpuCaptureQK(res->promptTokens, ho, aheadQ, aheadK)) {
    stage("attention map: Q/K capture (GPU)");
    // On the GPU (its own stream, alongside the variant), on the pool where that fails.
    mapAheadSource = ex.gpuMapSource();
    mapAhead = std::async(std::launch::async, [this] {
      std::string how;
      AttentionMap m = ex.mapOfGpuQK(aheadQ, aheadK, n, ho, ex.m_pool.get(), &how);
      mapAheadSource += how + ", mapped alongside the variant's run";  // read after the join
      return m;
    }).share();
    return;
  }
  if (ho.window == 0) return;  // the map step maps it after the run
  // A windowed map the GPU could not capture: the CPU map backend's capture, alongside.
  mapAheadSource = std::string(kCpuMapSource) + ", alongside the GPU run";
  mapAhead = std::async(std::launch::async, [this] {
    ex.cpuCaptureQK(res->promptTokens, ho, aheadQ, aheadK, ex.m_cancel);
    return headMapFromQK(aheadQ.data(), aheadK.data(), n, c.head_dim, c.attention_scale(), ho,
                         ex.m_pool.get());
  }).share();
}

void RunExecutor::Run::reuseLastRun() {
  // The last run as it was, but for what belongs to this request: its id and settings (the
  // same run key), the map's (layer, head) mask from the all-heads masks, and the stages; the
  // map step replaces the map.
  const RunResult& last = *ex.m_lastRun;
  const uint64_t runId = res->id;
  RunRequest request = std::move(res->request);
  *res = last;
  res->id = runId;
  res->request = std::move(request);
  res->stagesMs.clear();
  // The probes hold no all-heads masks (last.allHeads, shared): copying them is cheap.
  takeProbes(*res, last.probesPrefill, last.probes, last.allHeads, req.layer, req.head);
  res->compare.baselineReused = res->compare.available;  // nothing was re-run
  res->variantReused = true;
  done = n + maxTokens;
  stage("variant run + sinks (reused)");
}

// The tile counts and skip mask of the layers a prefill has done so far.
std::shared_ptr<AttentionProbes> RunExecutor::Run::partialProbes(const Backend& b) const {
  auto p = std::make_shared<AttentionProbes>();
  const AttentionProbes& now = b.probes();
  p->n_layer = now.n_layer;
  p->n_head = now.n_head;
  p->prefill = now.prefill;
  p->decode = now.decode;
  p->mask = now.mask;
  return p;
}

// The variant's attention settings and the probes it records (this head's skip mask, every
// head's where the cache allows, the column mass); notes say what a backend cannot record.
void RunExecutor::Run::configureVariant(Backend& b) {
  b.set_attention(req.attention);
  // A backend may not record a mask for some settings (the CUDA backend with a sliding
  // window); the run goes on without the overlay and the map view says why.
  try {
    b.request_skip_mask(req.layer, req.head);
  } catch (const BackendError& e) {
    res->maskNote = e.what();
  }
  // Every (layer, head)'s skip mask too (a few bytes per tile), so that picking another map
  // head next time needs no re-run (where the backend records them).
  try {
    b.request_all_skip_masks(true);
  } catch (const BackendError&) {
  }
  try {
    b.request_column_mass(colN);
  } catch (const BackendError& e) {
    res->sinkNote = e.what();
  }
}

// Publishes a partial result at prefill fraction f, at most one per kPartialIntervalMs.
void RunExecutor::Run::publishPartial(const Backend& b, double f) {
  const int64_t now = prof::now_ns();
  if (lastPartialNs != 0 && now - lastPartialNs < int64_t(kPartialIntervalMs) * 1000000) return;
  lastPartialNs = now;
  auto p = std::make_shared<RunResult>();
  p->id = id;
  p->request = req;
  p->partial = true;
  p->partialFraction = f;
  p->nLayer = c.n_layer;
  p->nHead = c.n_head;
  p->promptTokens = res->promptTokens;
  p->promptPieces = res->promptPieces;
  p->backendName = res->backendName;
  p->probes = *partialProbes(b);
  p->probesPrefill = p->probes;
  p->sinkKeep = int(req.cache.windowed() ? req.cache.sink_keep_count : 0);
  partial(p);
}

// The job runVariant starts after the variant's prefill, run while it decodes: the map
// alongside first, then per-position log-sum-exp / argmax and the KL against the cache.
RunExecutor::AheadFn RunExecutor::Run::overlapJob() {
  return [this](const Pass& pass) {
    return std::async(std::launch::async, [this, &pass, logits = pass.promptLogits.data(),
                                           haveStats = pass.promptLse.size() == size_t(n),
                                           map = mapAhead] {
      if (map.valid()) map.wait();
      std::vector<double> lse;
      std::vector<int> top1;
      if (haveStats) {
        lse = pass.promptLse;
      } else {
        rowStats(ex.m_pool.get(), logits, n, nv, lse, top1);
        statsAheadTop1 = std::move(top1);
      }
      if (req.compare && haveDense)
        klPerPosition(ex.m_pool.get(), *ex.m_denseCache, logits, lse, n, nv, klAhead);
      if (!haveStats) statsAheadLse = std::move(lse);
    });
  };
}

void RunExecutor::Run::runVariant() {
  if (fromDense) {
    const DenseCache& dc = *ex.m_denseCache;
    static_cast<Generated&>(v) = dc.pass;
    res->backendName = dc.backendName;
    res->timeline = dc.timeline;
    takeProbes(*res, dc.probesPrefill, dc.probes, dc.allHeads, req.layer, req.head);
    res->variantReused = true;
    stage("variant = cached dense baseline");
    return;
  }
  Backend& b = ex.variantBackend(req);
  if (ex.m_variantCreated) stage("variant backend made (new cache settings)");
  klBackend = &b;
  res->backendName = b.name();
  // The last prefill on this backend is resumed when only decode settings changed; until this
  // run's prefill is done there is none to resume (a failure leaves the backend anywhere).
  const std::string prefillKey = prefillRunKey(req, colN);
  const bool resume = !ex.m_prefillKey.empty() && ex.m_prefillKey == prefillKey &&
                      ex.m_prefillPrompt == res->promptTokens;
  ex.m_prefillKey.clear();
  configureVariant(b);
  prof::ProfilerOptions po;
  po.gpu = b.name() != "cpu";
  po.device = b.name();
  prof::Profiler profiler(po);
  profiler.start();
  // With a GPU decoding, the host's cores are free: the variant's per-position log-sum-exp and
  // argmax, and its KL against a cached baseline, are computed on the pool meanwhile (not
  // while the pool serves the map alongside, nor on the CPU backend, whose decode uses the
  // cores).
  // A map computed alongside on the pool comes first (the statistics wait for it).
  // A row-statistics pass leaves nothing for the host to reduce.
  const bool overlapAhead =
      !statsOnBackend && (b.name() != "cpu" || ex.m_overlapOnCpu) && (!req.compare || haveDense);
  const AheadFn startAhead = overlapJob();
  report("prefill");
  stage("setup (tokenize, backend, probes)");
  try {
    v = ex.runPass(b, res->promptTokens, maxTokens,
                   [&](int step) {
                     done = step == 0 ? n : n + step;
                     report("decode");
                   },
                   profiler.spans(), &ex.m_logitsBuffer,
                   [&](double f) {
                     done = f * n;
                     report("prefill");
                     if (partial) publishPartial(b, f);
                   },
                   resume ? &ex.m_prefillProbes : nullptr, overlapAhead ? startAhead : AheadFn(),
                   statsOnBackend);
  } catch (...) {
    profiler.stop();
    b.set_span_recorder(nullptr);
    throw;
  }
  profiler.stop();
  res->stagesMs.emplace_back(v.prefillReused ? "variant prefill (resumed)" : "variant prefill",
                             v.prefillMs);
  res->stagesMs.emplace_back("variant decode", v.decodeMs);
  tStage = prof::now_ns();
  // The all-heads masks (hundreds of MB at 32K tokens): res->allHeads keeps them (a later
  // change of the map's head reads them there), the prefill snapshot for a resume takes the
  // run's own; res->probesPrefill goes without.
  {
    std::vector<uint8_t> masks;
    std::vector<std::vector<MaskTile>> tiles;
    masks.swap(v.afterPrefill.all_masks);
    tiles.swap(v.afterPrefill.all_tiles);
    res->probesPrefill = v.afterPrefill;
    masks.swap(v.afterPrefill.all_masks);
    tiles.swap(v.afterPrefill.all_tiles);
  }
  if (!v.prefillReused) ex.m_prefillProbes = std::move(v.afterPrefill);
  if (!req.cache.windowed()) nextPrefillKey = prefillKey;
  res->timeline = profiler.timeline();
  res->probes = b.probes();
  res->allHeads = splitAllHeads(res->probes);
  res->decodePath = b.decode_path_stats();
  // A resumed prefill's probes hold the mask of the (layer, head) it was recorded for.
  if (v.prefillReused && hasHeadMask(res->allHeads, req.layer, req.head))
    res->probes.mask = res->probesPrefill.mask = headMask(*res->allHeads, req.layer, req.head);
}

void RunExecutor::Run::variantStatistics() {
  if (mapAhead.valid()) {  // before the pool serves the rows below
    mapAheadResult = mapAhead.get();
    mapAheadDone = true;
    stage("attention map (alongside the GPU run)");
  }
  res->tokens = v.tokens;
  for (TokenId t : v.tokens) res->pieces.push_back(tok.token_to_piece(t));
  res->text = tok.decode(v.tokens, /*skip_special=*/true);
  res->stopReason = v.stopReason;
  res->prefillMs = v.prefillMs;
  res->decodeMs = v.decodeMs;
  // The all-heads masks are kept once (in allHeads, for a later change of the map's head); the
  // debug tile statistic is not needed here.
  res->probesPrefill.all_masks.clear();
  res->probesPrefill.all_tiles.clear();
  res->probesPrefill.all_stat.clear();
  res->probes.all_stat.clear();
  res->sinkKeep = int(req.cache.windowed() ? req.cache.sink_keep_count : 0);
  done = n + maxTokens;

  // Per prompt position of the variant: log-sum-exp and argmax (one pass over its logits, both
  // cores), shared by the prompt perplexity and the comparison.
  if (fromDense) {
    const DenseCache& dc = *ex.m_denseCache;
    vLogits = dc.rowStats ? nullptr : dc.pass.promptLogits.data();
    lseV = dc.lse;
    top1V = dc.top1;
    nextV = dc.next;
    hiddenV = dc.hidden;
  } else if (v.rowStats) {
    lseV = std::move(v.rows.lse);
    top1V = std::move(v.rows.top1);
    nextV = std::move(v.rows.next_logit);
    hiddenV = std::move(v.rows.hidden);
  } else if (v.promptLse.size() == size_t(n) && v.promptTop1.size() == size_t(n)) {
    vLogits = v.promptLogits.data();  // the backend computed them next to the logits
    lseV = std::move(v.promptLse);
    top1V = std::move(v.promptTop1);
  } else if (statsAheadLse.size() == size_t(n)) {
    vLogits = v.promptLogits.data();  // computed while the variant decoded
    lseV = std::move(statsAheadLse);
    top1V = std::move(statsAheadTop1);
  } else {
    vLogits = v.promptLogits.data();
    rowStats(ex.m_pool.get(), vLogits, n, nv, lseV, top1V);
  }
  if (vLogits && nextV.size() != size_t(n - 1)) {
    nextV.resize(size_t(n - 1));
    for (int i = 0; i + 1 < n; ++i)
      nextV[size_t(i)] = vLogits[size_t(i) * nv + size_t(res->promptTokens[size_t(i) + 1])];
  }
  if (lseV.size() != size_t(n) || top1V.size() != size_t(n) || nextV.size() != size_t(n - 1))
    throw BackendError("the variant's run returned statistics for " + std::to_string(lseV.size()) +
                       " of the prompt's " + std::to_string(n) + " positions");
  double nll = 0;
  for (int i = 0; i + 1 < n; ++i) nll += lseV[size_t(i)] - double(nextV[size_t(i)]);
  res->promptPerplexity = std::exp(nll / double(n - 1));
  stage("timeline, prompt lse + ppl");
}

void RunExecutor::Run::detectSinks() {
  const AttentionProbes& pr = res->probes;
  if (pr.col_n > 0 && !pr.col_mass.empty()) {
    const SinkReport sr =
        analyze_sinks(pr.n_layer, pr.n_head, pr.col_n, pr.col_mass, pr.alpha_queries());
    res->sinkPositions = sr.n_pos;
    res->sinkAlpha = sr.alpha;
    res->sinkQueries = sr.queries;
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
  if (!pr.sink_mass.empty() && pr.sink_queries > 0) {
    res->learnedSinkMass.resize(pr.sink_mass.size());
    for (size_t lh = 0; lh < pr.sink_mass.size(); ++lh)
      res->learnedSinkMass[lh] = pr.sink_mass[lh] / double(pr.sink_queries);
  }
  stage("sinks");
}

void RunExecutor::Run::attentionMap() {
  report("attention map");
  const int64_t tMap = prof::now_ns();
  if (haveMap) {
    res->map = ex.m_mapCache->map;
    res->mapSource = ex.m_mapCache->source;
  } else {
    ex.m_mapCache.reset();
    if (mapAheadDone) {
      res->map = std::move(mapAheadResult);
      res->mapSource = mapAheadSource;
    } else {
      res->map = ex.headMap(res->promptTokens, ho, &res->mapSource);
    }
    ex.m_mapCache = std::make_unique<MapCache>();
    ex.m_mapCache->prompt = res->promptTokens;
    ex.m_mapCache->options = ho;
    ex.m_mapCache->map = res->map;
    ex.m_mapCache->source = res->mapSource;
  }
  res->mapMs = double(prof::now_ns() - tMap) / 1e6;
  done += mapUnits;
  stage(haveMap ? "attention map (cached)" : "attention map");
}

void RunExecutor::Run::denseBaseline() {
  report("dense baseline");
  const double base = done;
  if (!haveDense) {
    ex.m_denseCache.reset();
    auto dc = std::make_unique<DenseCache>();
    Pass d;
    if (denseEquivalent(req)) {
      // The variant ran with the baseline's settings: it is the baseline.
      if (vLogits) d.promptLogits.assign(vLogits, vLogits + size_t(n) * nv);
      static_cast<Generated&>(d) = v;
      dc->backendName = res->backendName;
      dc->probesPrefill = res->probesPrefill;
      dc->probes = res->probes;
      dc->allHeads = res->allHeads;
      dc->timeline = res->timeline;
    } else {
      // Traced and probed like a variant run (the probes cost little next to the forward), so
      // that switching sparse off later reuses it.
      Backend& db = ex.denseBackend();
      db.request_skip_mask(req.layer, req.head);
      try {
        db.request_all_skip_masks(true);
      } catch (const BackendError&) {
      }
      try {
        db.request_column_mass(colN);
      } catch (const BackendError&) {
      }
      prof::ProfilerOptions dpo;
      dpo.gpu = db.name() != "cpu";
      dpo.device = db.name();
      prof::Profiler dprof(dpo);
      dprof.start();
      try {
        d = ex.runPass(db, res->promptTokens, maxTokens,
                       [&](int step) {
                         done = base + (step == 0 ? n : n + step);
                         report("dense baseline");
                       },
                       dprof.spans(), nullptr,
                       [&](double f) {
                         done = base + f * n;
                         report("dense baseline prefill");
                       },
                       nullptr, AheadFn(), statsOnBackend);
      } catch (...) {
        dprof.stop();
        db.set_span_recorder(nullptr);
        throw;
      }
      dprof.stop();
      dc->backendName = db.name();
      dc->timeline = dprof.timeline();
      dc->probesPrefill = d.afterPrefill;
      dc->probes = db.probes();
      dc->allHeads = splitAllHeads(dc->probes);
      dc->probesPrefill.all_masks.clear();
      dc->probesPrefill.all_tiles.clear();
      dc->probesPrefill.all_stat.clear();
      dc->probes.all_stat.clear();
    }
    dc->colN = colN;
    dc->prompt = res->promptTokens;
    dc->maxTokens = maxTokens;
    dc->rowStats = statsOnBackend;
    if (statsOnBackend) {
      if (d.rowStats) {  // the dense backend's pass (not the variant standing for it)
        dc->lse = std::move(d.rows.lse);
        dc->top1 = std::move(d.rows.top1);
        dc->next = std::move(d.rows.next_logit);
        dc->hidden = std::move(d.rows.hidden);
      } else {  // the variant's
        dc->lse = lseV;
        dc->top1 = top1V;
        dc->next = nextV;
        dc->hidden = hiddenV;
      }
      dc->pass = std::move(d);
      if (dc->lse.size() != size_t(n) || dc->next.size() != size_t(n - 1) || !dc->hidden)
        throw BackendError("the dense baseline's run returned statistics for " +
                           std::to_string(dc->lse.size()) + " of the prompt's " +
                           std::to_string(n) + " positions");
      ex.m_denseCache = std::move(dc);
      stage("dense baseline");
      return;
    }
    dc->pass = std::move(d);
    report(kComparing, true);  // the baseline's per-position statistics, then compare()
    dc->next.resize(size_t(n - 1));
    for (int i = 0; i + 1 < n; ++i)
      dc->next[size_t(i)] =
          dc->pass.promptLogits[size_t(i) * nv + size_t(res->promptTokens[size_t(i) + 1])];
    const bool keepProb = size_t(n) * size_t(nv) * sizeof(float) <= DenseCache::kMaxProbBytes;
    if (keepProb) dc->prob.resize(size_t(n) * size_t(nv));
    rowStats(ex.m_pool.get(), dc->pass.promptLogits.data(), n, nv, dc->lse, dc->top1,
             keepProb ? dc->prob.data() : nullptr);
    if (keepProb) {
      dc->dot.resize(size_t(n));
      dc->psum.resize(size_t(n));
      forRows(ex.m_pool.get(), n, [&](int64_t i) {
        const float* pr = dc->prob.data() + size_t(i) * nv;
        dc->dot[size_t(i)] = dot_f64(pr, dc->pass.promptLogits.data() + size_t(i) * nv, nv);
        double ps = 0;
        for (int t = 0; t < nv; ++t) ps += double(pr[t]);
        dc->psum[size_t(i)] = ps;
      });
    }
    ex.m_denseCache = std::move(dc);
  }
  stage(haveDense ? "dense baseline (cached)" : "dense baseline");
}

void RunExecutor::Run::compare() {
  report(kComparing, true);
  const DenseCache& dc = *ex.m_denseCache;
  const Pass& d = dc.pass;
  Comparison& cmp = res->compare;
  cmp.available = true;
  cmp.baselineReused = haveDense;
  const bool klWasAhead = klAhead.size() == size_t(n);
  if (klWasAhead) {
    cmp.klPerToken = std::move(klAhead);  // computed while the variant decoded
  } else if (statsOnBackend) {
    // From the two runs' final hidden states, on the variant's backend (the baseline served
    // as the variant: the same rows, KL 0).
    // A resumed prefill has the rows of the kept one: against the same baseline, its KL too.
    if (hiddenV == dc.hidden)
      cmp.klPerToken.assign(size_t(n), 0.0);
    else if (v.prefillReused && ex.m_keptKlOf == hiddenV && ex.m_keptKlDense == dc.hidden &&
             ex.m_keptKl.size() == size_t(n))
      cmp.klPerToken = ex.m_keptKl;
    else
      cmp.klPerToken = (klBackend ? *klBackend : ex.denseBackend()).kl_rows(*dc.hidden, *hiddenV);
  } else {
    klPerPosition(ex.m_pool.get(), dc, vLogits, lseV, n, nv, cmp.klPerToken);
  }
  double nllD = 0, nllV = 0, klSum = 0;
  int agree = 0;
  for (int i = 0; i < n; ++i) {
    klSum += cmp.klPerToken[size_t(i)];
    agree += dc.top1[size_t(i)] == top1V[size_t(i)];
    if (i + 1 < n) {
      nllD += dc.lse[size_t(i)] - double(dc.next[size_t(i)]);
      nllV += lseV[size_t(i)] - double(nextV[size_t(i)]);
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
  stage(klWasAhead ? "compare (top-1, ppl, ROUGE; KL during the decode)"
        : statsOnBackend ? "compare (KL from hidden states on the backend, top-1, ppl, ROUGE)"
                   : "compare (KL, top-1, ppl, ROUGE)");
}

void RunExecutor::Run::keepForNextRun() {
  // The logits buffer is kept up to 2 GiB: a fresh one costs a page fault per 4 KiB on every
  // run (about 0.4 s for the 1.6 GB of an 8K-token prompt).
  if (!reuseVariant && !fromDense && statsOnBackend) {
    // The rows (and the backend's cache) of this prefill, for a later decode-only change.
    ex.m_keptRows = RowStats{lseV, top1V, nextV, hiddenV};
    ex.m_keptLast = v.lastLogits;
    ex.m_keptKl = res->compare.available ? res->compare.klPerToken : std::vector<double>();
    ex.m_keptKlOf = hiddenV;
    ex.m_keptKlDense = res->compare.available && ex.m_denseCache ? ex.m_denseCache->hidden : nullptr;
    if (!nextPrefillKey.empty()) {
      ex.m_prefillKey = nextPrefillKey;
      ex.m_prefillPrompt = res->promptTokens;
    }
  }
  if (!reuseVariant && !fromDense && !statsOnBackend && v.promptLogits.capacity() * sizeof(float) <= (size_t(2) << 30)) {
    ex.m_logitsBuffer.swap(v.promptLogits);
    if (!nextPrefillKey.empty()) {  // the buffer and the backend hold this prefill
      ex.m_prefillKey = nextPrefillKey;
      ex.m_prefillPrompt = res->promptTokens;
    }
  }
  ex.m_lastRun = res;
  ex.m_lastRunKey = runKey;
}

RunResultPtr RunExecutor::run(const RunRequest& req, uint64_t id, const ProgressFn& progress,
                              const PartialFn& partial) {
  if (!m_model) throw BackendError("no model is loaded");
  Run r(*this, req, id, progress, partial);
  r.prepare();
  r.startMapAhead();
  if (r.reuseVariant) {
    r.reuseLastRun();
  } else {
    r.runVariant();
    r.variantStatistics();
    r.detectSinks();
  }
  r.attentionMap();
  if (req.compare && !r.reuseVariant) {
    r.denseBaseline();
    r.compare();
  }
  r.done = r.total;
  r.report("done");
  r.res->totalMs = double(prof::now_ns() - r.tStart) / 1e6;
  r.keepForNextRun();
  return r.res;
}

}  // namespace sinkscope::gui
