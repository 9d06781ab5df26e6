// SPDX-License-Identifier: Apache-2.0
#include <QTest>

#include <atomic>
#include <numeric>

#include "app/gui/models/control_state.h"
#include "app/gui/models/head_attention.h"
#include "app/gui/models/run_executor.h"
#include "tests/gui/test_model.h"

using namespace sinkscope;
using namespace sinkscope::gui;

class TestRunExecutor : public QObject {
  Q_OBJECT
 private Q_SLOTS:
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
  void denseVariantMatchesBaseline() {
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(test::randomModel());
    ControlState s;
    s.sparse = false;
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
    const AttentionMap a = computeHeadAttention(*m, toks, o, nullptr);
    QCOMPARE(a.rows, int(toks.size()));
    for (int r = 0; r < a.rows; ++r) {
      const double s = std::accumulate(a.cells.begin() + r * a.cols, a.cells.begin() + (r + 1) * a.cols, 0.0);
      QVERIFY(std::abs(s - 1.0) < 1e-4);
    }
    QVERIFY(std::abs(a.alpha.back() - a.cells.back()) < 1e-6);  // only the last query sees the last key
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, computeHeadAttention(*m, toks, {.layer = 9}, nullptr));
  }
  void binEdgesCoverEverything() {
    const auto e = binEdges(1000, 256);
    QCOMPARE(e.size(), size_t(257));
    QCOMPARE(e.front(), 0);
    QCOMPARE(e.back(), 1000);
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
