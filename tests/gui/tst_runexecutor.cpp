// SPDX-License-Identifier: Apache-2.0
#include <QTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "app/gui/models/control_state.h"
#include "app/gui/models/head_attention.h"
#include "engine/util/thread_pool.h"
#include "kernels/visibility.h"
#include "app/gui/models/run_executor.h"
#include "app/gui/models/view_models.h"
#include "tests/gui/test_model.h"

using namespace sinkscope;
using namespace sinkscope::gui;

class TestRunExecutor : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  // A GPU choice whose backend cannot be made leaves the previous choice in force: here a CUDA
  // executor on a machine whose CUDA is unavailable (skipped where a GPU works); a CPU executor
  // takes any choice and still runs.
  void gpuChoiceFailureKeepsThePreviousChoice() {
    {
      RunExecutor cpu(BackendKind::kCpu, 2);
      cpu.setModel(test::randomModel());
      cpu.setGpuChoice({GpuWeights::kNative, GpuActivations::kInt8});
      QCOMPARE(cpu.gpuChoice().weights, GpuWeights::kNative);
      QCOMPARE(QString::fromStdString(cpu.backendName()), QStringLiteral("cpu"));
    }
    std::string why;
    if (cuda_available(&why)) QSKIP("a GPU is usable here: no CUDA failure to provoke");
    RunExecutor ex(BackendKind::kCuda, 2);
    ex.setModel(test::randomModel());
    bool threw = false;
    try {
      ex.setGpuChoice({GpuWeights::kBf16, GpuActivations::kInt16});
    } catch (const std::exception& e) {
      threw = true;
      QVERIFY(QString::fromUtf8(e.what()).contains(QStringLiteral("CUDA")));
    }
    QVERIFY(threw);
    QCOMPARE(ex.gpuChoice().weights, GpuWeights::kAuto);
    QCOMPARE(ex.gpuChoice().activations, GpuActivations::kInt8);
    QVERIFY(ex.hasModel());
  }
  void snapshotIsComplete() {
    const RunResultPtr r = test::sampleResult();
    QVERIFY(r->promptTokens.size() > 64);
    QCOMPARE(r->tokens.size(), r->pieces.size());
    QVERIFY(!r->tokens.empty());
    QCOMPARE(r->map.layer, 1);
    QCOMPARE(r->map.head, 2);
    QVERIFY(!r->map.cells.empty());
    QCOMPARE(r->map.alpha.size(), r->promptTokens.size());
    QCOMPARE(r->probes.mask.layer, 1);
    QVERIFY(r->probes.mask.rows > 0);
    QVERIFY(r->probesPrefill.total(false).visited > 0);
    QVERIFY(r->timeline && r->timeline->event_count() > 0);
    QVERIFY(!r->sinkAlpha.empty());
    QVERIFY(r->compare.available);
    QCOMPARE(r->compare.klPerToken.size(), r->promptTokens.size());
    QVERIFY(r->compare.rougeL >= 0 && r->compare.rougeL <= 1);
  }
  // The comparison's KL per position against a direct double-precision computation from the
  // two backends' logits (an independent path: no cached probabilities, no dot-product
  // rearrangement); 1e-9 nats absolute is far below any KL the view shows.
  void klMatchesADirectComputation() {
    ControlState s;
    s.maxTokens = 2;
    s.inference.attention.threshold_prefill = 0.3;
    s.setKvQuant(KvQuantChoice::kInt4);  // a variant whose logits surely differ from dense
    s.inference.quantization.protect_sink_positions = false;
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(test::randomModel());
    RunRequest req = s.toRequest(test::longPrompt().toStdString());
    req.cache.quantization.group_size = 16;  // the test model's head_dim
    const RunResultPtr r = ex.run(req, 1);
    auto model = test::randomModel();
    BackendOptions dense, sparse;
    dense.n_threads = sparse.n_threads = 2;  // as the executor's
    sparse.attention = req.attention;
    sparse.cache = req.cache;
    std::vector<float> zd, zv;
    make_backend(model, dense, BackendKind::kCpu)->forward(r->promptTokens, LogitsMode::kAll, zd);
    make_backend(model, sparse, BackendKind::kCpu)->forward(r->promptTokens, LogitsMode::kAll, zv);
    const int n = int(r->promptTokens.size()), nv = model->config().n_vocab;
    double worst = 0, total = 0;
    for (int i = 0; i < n; ++i) {
      const float* a = zd.data() + size_t(i) * nv;
      const float* b = zv.data() + size_t(i) * nv;
      double ma = -1e300, mb = -1e300, sa = 0, sb = 0;
      for (int t = 0; t < nv; ++t) ma = std::max(ma, double(a[t])), mb = std::max(mb, double(b[t]));
      for (int t = 0; t < nv; ++t) sa += std::exp(a[t] - ma), sb += std::exp(b[t] - mb);
      const double la = ma + std::log(sa), lb = mb + std::log(sb);
      double kl = 0;
      for (int t = 0; t < nv; ++t) kl += std::exp(a[t] - la) * ((a[t] - la) - (b[t] - lb));
      total += kl;
      worst = std::max(worst, std::abs(kl - r->compare.klPerToken[size_t(i)]));
    }
    QVERIFY2(total > 1e-6, "the test needs a variant that differs from dense");
    QVERIFY2(worst < 1e-9, qPrintable(QStringLiteral("KL off by %1").arg(worst)));
  }
  // Progress never goes back, and the comparison after the last forward says what it is doing
  // with no time left claimed (the forward units give it none).
  void progressEndsWithTheComparison() {
    ControlState s;
    s.maxTokens = 2;
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(test::randomModel());
    std::vector<RunProgress> seen;
    (void)ex.run(s.toRequest(test::longPrompt().toStdString()), 1,
                 [&](const RunProgress& p) { seen.push_back(p); });
    QVERIFY(seen.size() > 3);
    for (size_t i = 1; i < seen.size(); ++i)
      QVERIFY2(seen[i].fraction >= seen[i - 1].fraction,
               qPrintable(QStringLiteral("%1 after %2").arg(seen[i].fraction).arg(seen[i - 1].fraction)));
    QCOMPARE(QString::fromStdString(seen.back().phase), QStringLiteral("done"));
    const RunProgress& last = seen[seen.size() - 2];  // the last step's report
    QCOMPARE(QString::fromStdString(last.phase), QStringLiteral("comparing with the dense baseline"));
    QVERIFY(last.etaSeconds < 0);
    // Before the comparison, the time left was estimated.
    QVERIFY(std::any_of(seen.begin(), seen.end(), [](const RunProgress& p) {
      return p.phase.rfind("dense baseline", 0) == 0 && p.etaSeconds >= 0;
    }));
  }

  // The variant's statistics and KL computed during its decode (as on a GPU) equal the ones
  // computed after it.
  void overlappedStatisticsEqualSequentialOnes() {
    ControlState s;
    s.maxTokens = 6;
    s.inference.attention.threshold_prefill = 0.3;
    RunResultPtr out[2];
    for (int overlap = 0; overlap < 2; ++overlap) {
      RunExecutor ex(BackendKind::kCpu, 2);
      ex.setModel(test::randomModel());
      ex.setOverlapOnCpu(overlap == 1);
      s.setKvQuant(KvQuantChoice::kOff);
      (void)ex.run(s.toRequest(test::longPrompt().toStdString()), 1);  // caches the baseline
      s.setKvQuant(KvQuantChoice::kInt8);  // a variant that differs from dense
      s.inference.quantization.protect_sink_positions = false;
      RunRequest req = s.toRequest(test::longPrompt().toStdString());
      req.cache.quantization.group_size = 16;  // the test model's head_dim
      out[overlap] = ex.run(req, 2);
    }
    auto klAhead = [](const RunResultPtr& r) {
      return std::any_of(r->stagesMs.begin(), r->stagesMs.end(), [](const auto& st) {
        return st.first.find("KL during the decode") != std::string::npos;
      });
    };
    QVERIFY(!klAhead(out[0]));
    QVERIFY(klAhead(out[1]));
    QVERIFY(out[0]->compare.klMean > 0);
    QCOMPARE(out[1]->compare.klPerToken, out[0]->compare.klPerToken);
    QCOMPARE(out[1]->compare.top1Agreement, out[0]->compare.top1Agreement);
    QCOMPARE(out[1]->compare.pplVariant, out[0]->compare.pplVariant);
    QCOMPARE(out[1]->promptPerplexity, out[0]->promptPerplexity);
    QCOMPARE(out[1]->tokens, out[0]->tokens);
  }
  // The row-statistics path (GPU backends: per-row log-sum-exp, argmax and next-token logit
  // reduced on the backend, the KL from the two runs' final hidden states) gives the numbers
  // of the host-logits path: the same tokens, top-1 agreement and argmaxes, perplexities to
  // 1e-12 relative, KL per position to 1e-9 nats; the first run (baseline made after the
  // variant), a cached baseline and the baseline served as the variant (KL exactly 0).
  void rowStatisticsEqualHostLogits() {
    ControlState s;
    s.maxTokens = 4;
    s.inference.attention.threshold_prefill = 0.3;
    RunResultPtr first[2], cached[2], dense[2];
    for (int rows = 0; rows < 2; ++rows) {
      RunExecutor ex(BackendKind::kCpu, 2);
      ex.setModel(test::randomModel());
      ex.setRowStatsOnCpu(rows == 1);
      s.setKvQuant(KvQuantChoice::kInt4);
      s.inference.quantization.protect_sink_positions = false;
      RunRequest req = s.toRequest(test::longPrompt().toStdString());
      req.cache.quantization.group_size = 16;  // the test model's head_dim
      first[rows] = ex.run(req, 1);
      req.attention.threshold_prefill = 0.1;
      cached[rows] = ex.run(req, 2);
      s.setKvQuant(KvQuantChoice::kOff);
      s.setSparse(false);
      dense[rows] = ex.run(s.toRequest(test::longPrompt().toStdString()), 3);
      s.setSparse(true);
    }
    auto hasStage = [](const RunResultPtr& r, const char* what) {
      return std::any_of(r->stagesMs.begin(), r->stagesMs.end(), [&](const auto& st) {
        return st.first.find(what) != std::string::npos;
      });
    };
    QVERIFY(!hasStage(first[0], "hidden states"));
    QVERIFY(hasStage(first[1], "hidden states"));
    QVERIFY(cached[1]->compare.baselineReused);
    QVERIFY(dense[1]->compare.baselineReused);
    const RunResultPtr* pairs[] = {first, cached, dense};
    for (const RunResultPtr* r : pairs) {
      const Comparison& h = r[0]->compare;
      const Comparison& d = r[1]->compare;
      QCOMPARE(r[1]->tokens, r[0]->tokens);
      QCOMPARE(d.denseTokens, h.denseTokens);
      QCOMPARE(d.top1Agreement, h.top1Agreement);
      QVERIFY(std::abs(d.pplDense / h.pplDense - 1) < 1e-12);
      QVERIFY(std::abs(d.pplVariant / h.pplVariant - 1) < 1e-12);
      QVERIFY(std::abs(r[1]->promptPerplexity / r[0]->promptPerplexity - 1) < 1e-12);
      QCOMPARE(d.klPerToken.size(), h.klPerToken.size());
      double worst = 0;
      for (size_t i = 0; i < h.klPerToken.size(); ++i)
        worst = std::max(worst, std::abs(d.klPerToken[i] - h.klPerToken[i]));
      QVERIFY2(worst < 1e-9, qPrintable(QStringLiteral("KL off by %1").arg(worst)));
    }
    QVERIFY(first[1]->compare.klMean > 1e-6);  // the variant differs from dense
    for (double kl : dense[1]->compare.klPerToken) QCOMPARE(kl, 0.0);
  }
  void denseVariantMatchesBaseline() {
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(test::randomModel());
    ControlState s;
    s.setSparse(false);
    s.maxTokens = 4;
    const RunResultPtr r = ex.run(s.toRequest(test::longPrompt().toStdString()), 1);
    QVERIFY(r->compare.klMean < 1e-6);
    QCOMPARE(r->compare.top1Agreement, 1.0);
    QCOMPARE(r->compare.firstDivergence, -1);
    QCOMPARE(r->compare.rougeL, 1.0);
    QCOMPARE(r->probes.total(false).skipped, int64_t(0));
    // The second run with the same prompt reuses the dense baseline.
    const RunResultPtr again = ex.run(s.toRequest(test::longPrompt().toStdString()), 2);
    QVERIFY(again->compare.baselineReused);
  }
  void fullResolutionRowsSumToOne() {
    const auto m = test::randomModel();
    std::vector<TokenId> toks = m->tokenizer().encode("hello world, this is a test of rows");
    HeadMapOptions o;
    o.layer = 1;
    o.head = 3;
    o.maxCells = 1000;
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(m);
    std::string source;
    const AttentionMap a = ex.headMap(toks, o, &source);
    QVERIFY(source.find("CPU") != std::string::npos);
    QCOMPARE(a.rows, int(toks.size()));
    for (int r = 0; r < a.rows; ++r) {
      const double s = std::accumulate(a.cells.begin() + r * a.cols, a.cells.begin() + (r + 1) * a.cols, 0.0);
      QVERIFY(std::abs(s - 1.0) < 1e-4);
    }
    QVERIFY(std::abs(a.alpha.back() - a.cells.back()) < 1e-6);  // only the last query sees the last key
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, ex.headMap(toks, {.layer = 9}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, ex.headMap({}, o));
  }
  // The map from given Q/K (the GPU path feeds it captured bf16 Q/K): a hand-computed case, and
  // the same bits on one thread and on a pool.
  void mapFromQKMatchesHandComputedAndIsThreadIndependent() {
    // d = 2, scale 1: q = (1, 0) for every row, keys (0,0), (1,0), (2,0): row 2 sees scores 0, 1, 2.
    const std::vector<float> q = {1, 0, 1, 0, 1, 0}, k = {0, 0, 1, 0, 2, 0};
    HeadMapOptions o;
    o.maxCells = 8;
    const AttentionMap a = headMapFromQK(q.data(), k.data(), 3, 2, 1.0f, o, nullptr);
    QCOMPARE(a.rows, 3);
    const double z = 1 + std::exp(1.0) + std::exp(2.0);
    QVERIFY(std::abs(a.cells[2 * 3 + 0] - 1 / z) < 1e-6);
    QVERIFY(std::abs(a.cells[2 * 3 + 2] - std::exp(2.0) / z) < 1e-6);
    QVERIFY(std::abs(a.cells[1 * 3 + 1] - std::exp(1.0) / (1 + std::exp(1.0))) < 1e-6);
    QCOMPARE(a.cells[0 * 3 + 1], 0.0f);  // causal
    // alpha_0 = mean over queries 0..2 of P[i, 0]
    const double a0 = (1.0 + 1 / (1 + std::exp(1.0)) + 1 / z) / 3;
    QVERIFY(std::abs(a.alpha[0] - a0) < 1e-6);
    // A window of 1 with one sink: row 2 sees keys 0 and 2 only.
    o.window = 1;
    o.sinkCount = 1;
    const AttentionMap w = headMapFromQK(q.data(), k.data(), 3, 2, 1.0f, o, nullptr);
    QCOMPARE(w.cells[2 * 3 + 1], 0.0f);
    QVERIFY(std::abs(w.cells[2 * 3 + 2] - std::exp(2.0) / (1 + std::exp(2.0))) < 1e-6);
    // Random Q/K, pooled: a pool gives the same bits as one thread.
    std::vector<float> rq(300 * 16), rk(300 * 16);
    uint32_t st = 7;
    for (auto* v : {&rq, &rk})
      for (float& x : *v) x = float((st = st * 1664525u + 1013904223u) >> 8) / float(1 << 24) - 0.5f;
    HeadMapOptions p;
    p.maxCells = 37;
    ThreadPool pool(3);
    const AttentionMap one = headMapFromQK(rq.data(), rk.data(), 300, 16, 0.25f, p, nullptr);
    const AttentionMap many = headMapFromQK(rq.data(), rk.data(), 300, 16, 0.25f, p, &pool);
    QCOMPARE(many.cells, one.cells);
    QCOMPARE(many.alpha, one.alpha);
  }
  // The map's captured Q/K are kept: a map of a layer below the one first mapped comes from the
  // same capture prefill and equals what a fresh executor computes, for the full cache and a
  // sink-retaining window alike; the window changes the map.
  void headMapCapturesAreReusedBitIdentical() {
    const auto m = test::randomModel();
    const std::vector<TokenId> toks = m->tokenizer().encode(test::longPrompt().toStdString());
    std::vector<float> causalCells;
    for (int window : {0, 24}) {
      HeadMapOptions o;
      o.layer = m->config().n_layer - 1;
      o.head = 2;
      o.window = window;
      o.sinkCount = window ? 2 : 0;
      RunExecutor ex(BackendKind::kCpu, 2);
      ex.setModel(m);
      const AttentionMap first = ex.headMap(toks, o);
      o.layer = 0;
      o.head = 3;
      const AttentionMap reused = ex.headMap(toks, o);
      RunExecutor fresh(BackendKind::kCpu, 2);
      fresh.setModel(m);
      const AttentionMap again = fresh.headMap(toks, o);
      QCOMPARE(reused.cells, again.cells);
      QCOMPARE(reused.alpha, again.alpha);
      QVERIFY(first.cells != again.cells);
      o.layer = m->config().n_layer - 1;
      o.head = 2;
      if (window == 0) causalCells = ex.headMap(toks, o).cells;
      else QVERIFY(ex.headMap(toks, o).cells != causalCells);
    }
  }
  // A change of the map's (layer, head) alone reuses the variant's run; its skip mask must be the
  // one a fresh run records for that (layer, head).
  void mapChangeReusesRunWithRightMask_data() {
    QTest::addColumn<bool>("window");
    QTest::newRow("full cache") << false;
    QTest::newRow("sliding window") << true;
  }
  void mapChangeReusesRunWithRightMask() {
    QFETCH(bool, window);
    ControlState s;
    s.maxTokens = 4;
    s.layer = 0;
    s.head = 1;
    if (window) {
      // A window shorter than the prompt, so that keys are evicted during the prefill.
      s.setSlidingWindow(true);
      s.inference.cache.window_size = 32;
      s.inference.cache.sink_keep_count = 4;
    }
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(test::randomModel());
    const RunResultPtr a = ex.run(s.toRequest(test::longPrompt().toStdString()), 1);
    s.layer = 1;
    s.head = 3;
    const RunResultPtr b = ex.run(s.toRequest(test::longPrompt().toStdString()), 2);
    QVERIFY(std::any_of(b->stagesMs.begin(), b->stagesMs.end(),
                        [](const auto& st) { return st.first.find("reused") != std::string::npos; }));
    QVERIFY(!a->variantReused);
    QVERIFY(b->variantReused);  // the status line says its times are the earlier run's
    // The all-heads masks are shared, not copied into each result (hundreds of MB at 32K).
    QVERIFY(a->allHeads);
    QCOMPARE(b->allHeads.get(), a->allHeads.get());
    QVERIFY(b->probes.all_masks.empty() && b->probes.all_tiles.empty());
    QVERIFY(a->probes.all_masks.empty() && a->probes.all_tiles.empty());
    RunExecutor fresh(BackendKind::kCpu, 2);
    fresh.setModel(test::randomModel());
    const RunResultPtr c = fresh.run(s.toRequest(test::longPrompt().toStdString()), 3);
    QCOMPARE(b->probes.mask.layer, 1);
    QCOMPARE(b->probes.mask.head, 3);
    if (window) {
      // The windowed mask is its tiles in prompt positions (one per visited query tile x page).
      const auto& tb = b->probes.mask.tiles;
      const auto& tc = c->probes.mask.tiles;
      QVERIFY(!tc.empty());
      QCOMPARE(tb.size(), tc.size());
      for (size_t i = 0; i < tb.size(); ++i) {
        QCOMPARE(tb[i].q0, tc[i].q0);
        QCOMPARE(tb[i].q1, tc[i].q1);
        QCOMPARE(tb[i].k0, tc[i].k0);
        QCOMPARE(tb[i].k1, tc[i].k1);
        QCOMPARE(tb[i].state, tc[i].state);
      }
    } else {
      QCOMPARE(b->probes.mask.rows, c->probes.mask.rows);
      QCOMPARE(b->probes.mask.cols, c->probes.mask.cols);
      QCOMPARE(b->probes.mask.cells, c->probes.mask.cells);
    }
    QCOMPARE(b->tokens, c->tokens);
    QCOMPARE(b->compare.klPerToken, c->compare.klPerToken);
    QCOMPARE(b->sinkAlpha, c->sinkAlpha);
    QCOMPARE(b->map.cells, c->map.cells);
    QCOMPARE(a->compare.klPerToken, b->compare.klPerToken);
  }
  // Sparse off after a sparse run: the variant is the cached dense baseline, with the same data a
  // fresh dense run gives.
  void sparseOffServedFromBaseline() {
    ControlState s;
    s.maxTokens = 4;
    s.layer = 1;
    s.head = 2;
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(test::randomModel());
    (void)ex.run(s.toRequest(test::longPrompt().toStdString()), 1);
    s.setSparse(false);
    const RunResultPtr off = ex.run(s.toRequest(test::longPrompt().toStdString()), 2);
    QVERIFY(std::any_of(off->stagesMs.begin(), off->stagesMs.end(), [](const auto& st) {
      return st.first.find("dense baseline") != std::string::npos &&
             st.first.find("variant") != std::string::npos;
    }));
    RunExecutor fresh(BackendKind::kCpu, 2);
    fresh.setModel(test::randomModel());
    const RunResultPtr ref = fresh.run(s.toRequest(test::longPrompt().toStdString()), 3);
    QCOMPARE(off->compare.klMean, 0.0);
    QCOMPARE(off->compare.top1Agreement, 1.0);
    QCOMPARE(off->tokens, ref->tokens);
    QCOMPARE(off->promptPerplexity, ref->promptPerplexity);
    QCOMPARE(off->compare.klPerToken, ref->compare.klPerToken);
    QCOMPARE(off->sinkAlpha, ref->sinkAlpha);
    QCOMPARE(off->probes.mask.cells, ref->probes.mask.cells);
    QVERIFY(off->allHeads && off->probes.all_masks.empty());
    QCOMPARE(off->probes.total(false).visited, ref->probes.total(false).visited);
    QCOMPARE(off->probes.total(false).skipped, int64_t(0));
    QVERIFY(off->timeline && off->timeline->event_count() > 0);
  }
  // A change of the decode's lambda (or the generation length) leaves the prefill as it was:
  // the backend is rewound to it and only the decode runs, with the data a fresh run gives.
  // Both the host-logits path and the row-statistics path (the GPU's) resume.
  void decodeOnlyChangeResumesThePrefill_data() {
    QTest::addColumn<bool>("rowStats");
    QTest::newRow("host logits") << false;
    QTest::newRow("row statistics") << true;
  }
  void decodeOnlyChangeResumesThePrefill() {
    QFETCH(bool, rowStats);
    ControlState s;
    s.maxTokens = 6;
    s.layer = 1;
    s.head = 2;
    s.inference.attention.threshold_prefill = 0.3;
    s.inference.attention.threshold_decode = 0.3;
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(test::randomModel());
    ex.setRowStatsOnCpu(rowStats);
    (void)ex.run(s.toRequest(test::longPrompt().toStdString()), 1);
    s.inference.attention.threshold_decode = 0.01;
    s.maxTokens = 8;
    s.layer = 0;  // the map's head too: its mask comes from the all-heads masks
    s.head = 3;
    const RunResultPtr b = ex.run(s.toRequest(test::longPrompt().toStdString()), 2);
    auto hasStage = [](const RunResultPtr& r, const char* name) {
      return std::any_of(r->stagesMs.begin(), r->stagesMs.end(),
                         [name](const auto& st) { return st.first == name; });
    };
    QVERIFY(hasStage(b, "variant prefill (resumed)"));
    RunExecutor fresh(BackendKind::kCpu, 2);
    fresh.setModel(test::randomModel());
    fresh.setRowStatsOnCpu(rowStats);
    const RunResultPtr c = fresh.run(s.toRequest(test::longPrompt().toStdString()), 3);
    QVERIFY(hasStage(c, "variant prefill"));
    QCOMPARE(b->tokens, c->tokens);
    QCOMPARE(b->promptPerplexity, c->promptPerplexity);
    QCOMPARE(b->compare.klPerToken, c->compare.klPerToken);
    QCOMPARE(b->compare.rougeL, c->compare.rougeL);
    QCOMPARE(b->sinkAlpha, c->sinkAlpha);
    QCOMPARE(b->probes.mask.layer, 0);
    QCOMPARE(b->probes.mask.head, 3);
    QCOMPARE(b->probes.mask.cells, c->probes.mask.cells);
    QCOMPARE(b->probes.total(true).visited, c->probes.total(true).visited);
    QCOMPARE(b->probes.total(true).skipped, c->probes.total(true).skipped);
    QCOMPARE(b->probesPrefill.total(false).skipped, c->probesPrefill.total(false).skipped);
    // A prefill change runs the prefill again.
    s.inference.attention.threshold_prefill = 0.2;
    const RunResultPtr d = ex.run(s.toRequest(test::longPrompt().toStdString()), 4);
    QVERIFY(hasStage(d, "variant prefill"));
  }
  // Partial results stream during the variant's prefill: probes of the layers done so far, in
  // order, and the final result carries everything.
  void partialResultsStreamDuringThePrefill() {
    ControlState s;
    s.maxTokens = 2;
    s.inference.attention.threshold_prefill = 0.3;
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(test::randomModel());
    std::vector<RunResultPtr> parts;
    const RunResultPtr r = ex.run(s.toRequest(test::longPrompt().toStdString()), 7, {},
                                  [&](const RunResultPtr& p) { parts.push_back(p); });
    QVERIFY(!r->partial);
    QVERIFY(!parts.empty());  // the test model has 2 layers: one report before the second
    const RunResultPtr& p = parts.front();
    QVERIFY(p->partial);
    QCOMPARE(p->id, uint64_t(7));
    QVERIFY(p->partialFraction > 0 && p->partialFraction < 1);
    QVERIFY(p->tokens.empty());
    const int H = p->probes.n_head;
    QCOMPARE(p->probes.n_layer, 2);
    int64_t layer0 = 0, layer1 = 0;
    for (int h = 0; h < H; ++h) {
      layer0 += p->probesPrefill.prefill[size_t(h)].visited;
      layer1 += p->probesPrefill.prefill[size_t(H + h)].visited;
      QCOMPARE(p->probesPrefill.prefill[size_t(h)].visited, r->probesPrefill.prefill[size_t(h)].visited);
    }
    QVERIFY(layer0 > 0);
    QCOMPARE(layer1, int64_t(0));  // not reached when the report came
    SparsityView view;
    view.setResult(p);
    QVERIFY(view.isPartial());
    QCOMPARE(view.layersReached(), 1);
    QVERIFY(!std::isnan(view.layerPrefill()[0]));
    QVERIFY(std::isnan(view.layerPrefill()[1]));
    QVERIFY(std::isnan(view.prefill().at(1, 0)));
    QVERIFY(view.summary().startsWith(QStringLiteral("Updating")));
    view.setResult(r);
    QVERIFY(!view.isPartial());
    QVERIFY(!std::isnan(view.layerPrefill()[1]));
  }
  // Idle-time warming captures the Q/K of every layer of the last run's prompt (once: a second
  // warm finds nothing to do); a later change of the map's layer then gives the map a fresh run
  // gives, bit for bit.
  void warmedMapCacheServesALaterLayer() {
    ControlState s;
    s.maxTokens = 2;
    s.layer = 0;
    s.head = 1;
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(test::randomModel());
    std::atomic<bool> stop{true};
    QVERIFY(!ex.warmViewCaches(&stop));  // nothing run yet
    (void)ex.run(s.toRequest(test::longPrompt().toStdString()), 1);
    QVERIFY(!ex.warmViewCaches(&stop));  // stopped at once
    stop = false;
    QVERIFY(ex.warmViewCaches(&stop));
    QVERIFY(!ex.warmViewCaches(&stop));
    s.layer = 1;
    s.head = 3;
    const RunResultPtr b = ex.run(s.toRequest(test::longPrompt().toStdString()), 2);
    RunExecutor fresh(BackendKind::kCpu, 2);
    fresh.setModel(test::randomModel());
    const RunResultPtr c = fresh.run(s.toRequest(test::longPrompt().toStdString()), 3);
    QCOMPARE(b->map.layer, 1);
    QCOMPARE(b->map.cells, c->map.cells);
    QCOMPARE(b->map.alpha, c->map.alpha);
  }
  void binEdgesCoverEverything() {
    const auto e = binEdges(1000, 256);
    QCOMPARE(e.size(), size_t(257));
    QCOMPARE(e.front(), 0);
    QCOMPARE(e.back(), 1000);
  }
  // alpha_k's denominators in closed form (an interval of queries per key) against the
  // brute-force count of key_visible over every query, on windows x sinks x own windows.
  void visibleQueryCountsMatchBruteForce() {
    const int n = 97;
    int combos = 0;
    for (int window : {0, 1, 5, 16, 96, 97, 200})
      for (int sinks : {0, 1, 4, 97, 120})
        for (int own : {0, 1, 3, 16, 64, 150}) {
          HeadMapOptions o;
          o.window = window;
          o.sinkCount = sinks;
          o.ownWindow = own;
          const std::vector<int> got = visibleQueryCounts(n, o);
          QCOMPARE(got.size(), size_t(n));
          for (int j = 0; j < n; ++j) {
            int want = 0;
            for (int i = 0; i < n; ++i)
              want += visibility::key_visible(j, i, sinks, window, own) ? 1 : 0;
            if (got[size_t(j)] != want)
              QFAIL(qPrintable(QStringLiteral("W %1 S %2 OW %3 key %4: %5, brute force %6")
                                   .arg(window).arg(sinks).arg(own).arg(j)
                                   .arg(got[size_t(j)]).arg(want)));
          }
          ++combos;
        }
    QCOMPARE(combos, 7 * 5 * 6);
    QVERIFY(visibleQueryCounts(0, HeadMapOptions{}).empty());
  }
  void cancelThrowsAndLeavesUsable() {
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(test::randomModel());
    std::atomic<bool> cancel{true};
    ex.setCancelFlag(&cancel);
    ControlState s;
    QVERIFY_THROWS_EXCEPTION(Cancelled, ex.run(s.toRequest(test::longPrompt().toStdString()), 1));
    cancel = false;
    QVERIFY(ex.run(s.toRequest(test::longPrompt().toStdString()), 2));
  }
  void badRequestsThrow() {
    RunExecutor ex(BackendKind::kCpu, 2);
    ControlState s;
    QVERIFY_THROWS_EXCEPTION(BackendError, ex.run(s.toRequest("hi there"), 1));  // no model
    ex.setModel(test::randomModel());
    s.layer = 99;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, ex.run(s.toRequest("hi there"), 1));
  }
};

QTEST_GUILESS_MAIN(TestRunExecutor)
#include "tst_runexecutor.moc"
