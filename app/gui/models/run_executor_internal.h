// SPDX-License-Identifier: Apache-2.0
// RunExecutor's inside, shared by its two source files: run_executor.cpp (the helpers, the
// backends and caches, one generation pass, the GPU map) and run_steps.cpp (one run, step by
// step). Not for use outside them.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "app/gui/models/head_attention.h"
#include "app/gui/models/run_executor.h"
#include "engine/util/thread_pool.h"
#include "profiler/profiler.h"

namespace sinkscope::gui {

namespace run_detail {

// The progress phase of the comparison with the dense baseline (after every forward).
inline constexpr const char* kComparing = "comparing with the dense baseline";

// Where a map's Q/K came from when the CPU map backend captured them.
inline constexpr const char* kCpuMapSource = "float32 Q/K captured from the CPU backend's prefill";

// The cache settings as a key (the variant backend is made anew when it changes).
std::string cacheKey(const CacheSettings& s);
// fn(i) for every i in [0, n), on the pool when there is one.
void forRows(ThreadPool* pool, int n, const std::function<void(int64_t)>& fn);
// Per row of (n, nv) logits: log-sum-exp and argmax, and (prob non-null) the probabilities
// exp(logit - lse) as floats; one pass over the rows on the pool.
void rowStats(ThreadPool* pool, const float* logits, int n, int nv, std::vector<double>& lse,
              std::vector<int>& top1, float* prob = nullptr);
// Everything the variant's run (generation, logits, probes, comparison) depends on, except the
// prompt tokens (compared apart) and the skip mask's (layer, head).
std::string variantRunKey(const RunRequest& r, int maxTokens, int colN);
// What the variant's prefill depends on: its run key without what only the decode uses (the
// decode's lambda, the generation length).
std::string prefillRunKey(const RunRequest& r, int colN);
// Whether the all-heads probe holds the skip mask of (layer, head); headMask() takes it out.
bool hasHeadMask(const AttentionProbes& p, int layer, int head);
SkipMask headMask(const AttentionProbes& p, int layer, int head);
// The variant computes exactly what the dense baseline computes (lambda 0 everywhere, the full
// float cache, the same tile size), so one can stand for the other.
bool denseEquivalent(const RunRequest& r);
bool sameMapOptions(const HeadMapOptions& a, const HeadMapOptions& b);
double elapsedSince(int64_t t0);  // seconds since a prof::now_ns() time
// A recorded run's probes as this request's: `prefill` and `all` as they are (they must hold no
// all-heads masks: splitAllHeads took them into `heads`, which may be null), `heads` shared,
// and the map's (layer, head) mask taken out of `heads`.
void takeProbes(RunResult& r, const AttentionProbes& prefill, const AttentionProbes& all,
                const std::shared_ptr<const AttentionProbes>& heads, int layer, int head);
// Moves the all-heads masks (all_masks, all_tiles and their shape) out of `p` into a shared
// holder (RunResult::allHeads); null when `p` holds none.
std::shared_ptr<const AttentionProbes> splitAllHeads(AttentionProbes& p);
// hasHeadMask on a holder that may be null.
bool hasHeadMask(const std::shared_ptr<const AttentionProbes>& heads, int layer, int head);

// What a generation produced, apart from its logits and probes.
struct Generated {
  std::vector<TokenId> tokens;
  std::string stopReason = "max_tokens";
  double prefillMs = 0, decodeMs = 0;
};

}  // namespace run_detail

struct RunExecutor::Pass : run_detail::Generated {
  std::vector<float> promptLogits;  // (n, n_vocab); empty for a row-statistics pass
  // A row-statistics pass (LogitsMode::kLastRowStats: the backend reduced every prompt row
  // where the logits are): log-sum-exp, argmax, next-token logit and final hidden states.
  bool rowStats = false;
  RowStats rows;
  std::vector<float> lastLogits;  // a row-statistics pass: the prompt's last row
  AttentionProbes afterPrefill;
  // Per prompt position: log-sum-exp and argmax of promptLogits, when the backend computed them
  // with the logits (Backend::last_row_stats; empty otherwise).
  std::vector<double> promptLse;
  std::vector<int> promptTop1;
  bool prefillReused = false;  // the backend was rewound to the last run's prefill
};

// The dense baseline of the current prompt, with what every comparison needs from it computed
// once: per prompt position the log-sum-exp, the argmax, the next prompt token's logit and
// either (a host-logits pass) the probabilities exp(logit - lse) as floats when they fit in
// kMaxProbBytes, so a control change costs one exp per variant logit, or (a row-statistics
// pass) the final hidden states, from which the backend computes the KL (Backend::kl_rows).
struct RunExecutor::DenseCache {
  std::vector<TokenId> prompt;
  int maxTokens = 0;
  Pass pass;
  bool rowStats = false;
  std::vector<double> lse;
  std::vector<int> top1;
  std::vector<float> next;  // n - 1: row i's logit of prompt token i + 1
  std::shared_ptr<const HiddenRows> hidden;  // row-statistics pass only
  std::vector<float> prob;  // (n, n_vocab); empty when too large (then exp() on the fly)
  // With prob, per row: sum_v p[v] * logit[v] and sum_v p[v], so that KL(dense || variant) =
  // (dot - dot(p, variant logits)) - (lse - variant lse) * psum reads two floats per entry.
  std::vector<double> dot, psum;
  // 2 GiB: an 8K-token prompt with a 49K vocabulary (1.6 GB) still gets the one-product KL.
  static constexpr size_t kMaxProbBytes = size_t(2) << 30;
  // The baseline run traced and probed like a variant run, so that a variant with the
  // baseline's settings (sparse off, full cache) is served from it instead of re-run.
  std::string backendName;
  int colN = 0;
  AttentionProbes probesPrefill, probes;  // without the all-heads masks (allHeads)
  std::shared_ptr<const AttentionProbes> allHeads;
  std::shared_ptr<const prof::Timeline> timeline;
};

struct RunExecutor::MapCache {
  std::vector<TokenId> prompt;
  HeadMapOptions options;
  AttentionMap map;
  std::string source;  // RunResult::mapSource
};

// One run's working state; run() calls its steps in order. A nested class, so the steps use the
// executor's backends and caches directly (ex.m_...).
struct RunExecutor::Run {
  Run(RunExecutor& executor, const RunRequest& request, uint64_t runId, const ProgressFn& onProgress,
      const PartialFn& onPartial)
      : ex(executor), req(request), id(runId), progress(onProgress), partial(onPartial),
        c(executor.m_model->config()), tok(executor.m_model->tokenizer()) {}

  RunExecutor& ex;
  const RunRequest& req;
  const uint64_t id;
  const ProgressFn& progress;
  const PartialFn& partial;
  const ModelConfig& c;
  const Tokenizer& tok;
  const int64_t tStart = prof::now_ns();
  int64_t tStage = tStart;
  std::shared_ptr<RunResult> res = std::make_shared<RunResult>();
  int n = 0, maxTokens = 0, nv = 0, colN = 0;
  double done = 0, total = 0, mapUnits = 0;  // progress, in token-forward units
  HeadMapOptions ho;
  std::string runKey;
  bool haveDense = false, haveMap = false, reuseVariant = false, fromDense = false;
  // The passes reduce the prompt's logits on the backend (a GPU's, or RunExecutor's
  // setRowStatsOnCpu) instead of bringing them to the host (RunExecutor::Pass::rowStats).
  bool statsOnBackend = false;
  // The variant's generation and its per-position statistics (log-sum-exp, argmax, the next
  // prompt token's logit) over the prompt logits vLogits (n, n_vocab; null for a
  // row-statistics pass, whose final hidden states are hiddenV).
  Pass v;
  std::vector<double> lseV;
  std::vector<int> top1V;
  std::vector<float> nextV;
  const float* vLogits = nullptr;
  std::shared_ptr<const HiddenRows> hiddenV;
  Backend* klBackend = nullptr;  // the variant's backend (kl_rows in compare)
  std::string nextPrefillKey;  // set when this run's variant prefill can be resumed later
  int64_t lastPartialNs = 0;  // when publishPartial last published (0: never)
  // Filled while a GPU variant decodes (runVariant's overlapAhead), else empty.
  std::vector<double> statsAheadLse, klAhead;
  std::vector<int> statsAheadTop1;
  AttentionMap mapAheadResult;
  bool mapAheadDone = false;
  std::string mapAheadSource;
  // The map's captured Q/K (gpuCaptureQK), read by mapAhead.
  std::vector<float> aheadQ, aheadK;
  // A map the CPU computes alongside a GPU run (shared: the statistics computed during the
  // decode wait for it, runVariant); last, so that it is joined first on any exit.
  std::shared_future<AttentionMap> mapAhead;

  void stage(const char* name) {  // closes the stage that began at tStage
    const int64_t now = prof::now_ns();
    res->stagesMs.emplace_back(name, double(now - tStage) / 1e6);
    tStage = now;
  }
  // tail: work after every forward (the comparison): the forward units estimate no time
  // for it, so the time left is unknown rather than "0.0 s".
  void report(const char* phase, bool tail = false) const {
    if (!progress) return;
    const double el = run_detail::elapsedSince(tStart);
    RunProgress pr;
    pr.fraction = std::min(1.0, done / total);
    pr.etaSeconds = !tail && done > 0 ? el / done * (total - done) : -1;
    pr.phase = phase;
    progress(pr);
  }

  void prepare();           // tokens, checks, and what the caches can serve
  void startMapAhead();     // the map made alongside a GPU variant run (Q/K captured first)
  void reuseLastRun();      // only the map's head changed: the last run is this one
  void runVariant();        // the variant's generation: from the dense cache or a traced pass
  void configureVariant(Backend& b);  // runVariant: settings and the probes to record
  void publishPartial(const Backend& b, double f);  // runVariant: a throttled partial result
  AheadFn overlapJob();  // runVariant: statistics (and KL) computed while the variant decodes
  void variantStatistics(); // tokens, log-sum-exp / argmax per position, prompt perplexity
  void detectSinks();       // from the column-mass probe
  void attentionMap();
  void denseBaseline();     // cached per prompt and generation length
  void compare();           // KL, top-1, perplexity, ROUGE-L, first divergence
  void keepForNextRun();
  // KL(dense || variant) per prompt position into out (n), sum_t p_d (log p_d - log p_v) in
  // double; the dense probabilities come from the cache (or exp() when it kept none). With the
  // cache, sum_t p_d (z_d - lse_d - z_v + lse_v) = (dot_d - sum_t p_d z_v) - (lse_d - lse_v)
  // psum: one product per entry, and exactly 0 for identical logits.
  static void klPerPosition(ThreadPool* pool, const DenseCache& dc, const float* vLogits,
                            const std::vector<double>& lseV, int n, int nv,
                            std::vector<double>& out);
  std::shared_ptr<AttentionProbes> partialProbes(const Backend& b) const;
};

}  // namespace sinkscope::gui
