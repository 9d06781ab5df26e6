// SPDX-License-Identifier: Apache-2.0
// The sink parts of the view-models on a synthetic run: per-head sink columns, the kept S, the
// verdict and the recommendation naming what S keeps; the token strip's sink marks.
#include <QSignalSpy>
#include <QTest>

#include "app/gui/models/token_list_model.h"
#include "app/gui/models/view_models.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {

// 2 layers x 5 heads over 50 detector positions of a 60-token prompt: position 0 a sink of every
// head, 42 of head (1, 3) only (10 % of heads: flagged), 7 at epsilon exactly in head (0, 1) (no
// sink). The map shows head (0, 2), whose full-resolution alpha has sinks at 0 and 55 (beyond
// the detector's positions).
std::shared_ptr<RunResult> syntheticResult(bool windowed, int sinkKeep) {
  auto r = std::make_shared<RunResult>();
  r->nLayer = 2;
  r->nHead = 5;
  r->sinkPositions = 50;
  r->sinkAlpha.assign(size_t(2) * 5 * 50, 0.02);
  auto at = [&](int l, int h, int k) -> double& { return r->sinkAlpha[(size_t(l) * 5 + h) * 50 + k]; };
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 5; ++h) at(l, h, 0) = 0.7 + 0.02 * h;
  at(1, 3, 42) = 0.45;
  at(0, 1, 7) = 0.3;
  const SinkReport rep = analyze_alpha(2, 5, 50, r->sinkAlpha);
  r->flaggedSinks = rep.flagged;
  r->recommendedSinkKeep = rep.recommended_sink_keep;
  const int n = 60;
  r->promptTokens.assign(size_t(n), 1);
  for (int i = 0; i < n; ++i) r->promptPieces.push_back(std::string("t").append(std::to_string(i)));
  r->map.layer = 0;
  r->map.head = 2;
  r->map.nTokens = n;
  r->map.rows = r->map.cols = 1;
  r->map.cells = {1.0f};
  r->map.rowStart = r->map.colStart = {0, n};
  r->map.alpha.assign(size_t(n), 0.01);
  r->map.alpha[0] = 0.9;
  r->map.alpha[55] = 0.4;
  r->request.cache.strategy = windowed ? CacheStrategy::kSlidingWindow : CacheStrategy::kFull;
  r->request.cache.sink_keep_count = sinkKeep;
  r->sinkKeep = windowed ? sinkKeep : 0;
  r->firstMass.assign(10, 0.5);
  return r;
}

QVector<int> range(int n) {
  QVector<int> v;
  for (int i = 0; i < n; ++i) v << i;
  return v;
}

}  // namespace

class TestViewModels : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void theSyntheticReportFlagsZeroAndFortyTwo() {
    const auto r = syntheticResult(true, 16);
    const SinkReport rep = sinkReportOf(*r);
    QCOMPARE(rep.flagged, (std::vector<int>{0, 42}));
    QCOMPARE(rep.recommended_sink_keep, 1);  // 42 lies beyond the cap: S = 1 keeps as much
  }

  void headSinkColumnsArePerHead() {
    AttentionMapView v;
    v.setResult(syntheticResult(true, 16));
    // The map's head reads the map's own alpha: every prompt key, 55 included.
    QCOMPARE(v.headSinkColumns(0, 2), (QVector<int>{0, 55}));
    // Other heads read the detector: 42 is a sink of (1, 3) only, 7 of nobody.
    QCOMPARE(v.headSinkColumns(1, 3), (QVector<int>{0, 42}));
    QCOMPARE(v.headSinkColumns(0, 1), (QVector<int>{0}));
    QCOMPARE(v.headSinkColumns(1, 4), (QVector<int>{0}));
    QVERIFY(v.headSinkColumns(5, 0).isEmpty());
  }

  void keptSinkColumnsOnlyWithAWindow() {
    AttentionMapView v;
    v.setResult(syntheticResult(true, 4));
    QCOMPARE(v.keptSinkColumns(), range(4));
    v.setResult(syntheticResult(false, 4));
    QVERIFY(v.keptSinkColumns().isEmpty());
    v.setResult(syntheticResult(true, 100));  // never past the prompt
    QCOMPARE(v.keptSinkColumns(), range(60));
  }

  void verdictGivesEachFlaggedPositionItsShare() {
    SinksView v;
    QSignalSpy changed(&v, &SinksView::changed);
    v.pickHead(0, 2);  // the map's head: the chart reads the map's full-resolution alpha
    QCOMPARE(changed.count(), 0);  // nothing to show yet
    v.setResult(syntheticResult(true, 16));
    QCOMPARE(changed.count(), 1);
    QVERIFY(!v.detectorAlpha());
    QVERIFY2(v.verdict().contains(QStringLiteral("position 0 in 100 % of heads; 42 in 10 %")),
             qPrintable(v.verdict()));
    QCOMPARE(v.headSinks(), (QVector<int>{0, 55}));
    QVERIFY2(v.headText().contains(QStringLiteral("L0 H2")) && v.headText().contains(QStringLiteral("0, 55")),
             qPrintable(v.headText()));
  }

  // With no head picked, the chart's head is the run's strongest sink: the largest alpha_k of
  // the detector over the positions it judges. A tie goes to the lowest layer, then the lowest
  // head; a position with too few queries after it (not judged) never wins. Its alpha comes from
  // the detector (the map's full-resolution alpha is another head's).
  void chartOpensOnTheStrongestSink() {
    auto r = syntheticResult(false, 0);
    auto at = [&](int l, int h, int k) -> double& {
      return r->sinkAlpha[(size_t(l) * 5 + h) * 50 + k];
    };
    at(1, 4, 9) = 0.95;
    at(1, 2, 5) = 0.95;   // the same score in the same layer: the lower head wins
    at(0, 0, 49) = 0.99;  // the last position: 3 queries, not judged
    r->sinkQueries.assign(50, 100);
    r->sinkQueries[49] = 3;
    SinksView v;
    QSignalSpy changed(&v, &SinksView::changed);
    v.setResult(r);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(v.layer(), 1);
    QCOMPARE(v.head(), 2);
    QCOMPARE(v.alpha().size(), size_t(50));
    QCOMPARE(v.alpha()[5], 0.95);
    QCOMPARE(v.headSinks(), (QVector<int>{0, 5}));
    QVERIFY2(v.headText().contains(QStringLiteral("L1 H2")) &&
                 v.headText().contains(QStringLiteral("strongest")),
             qPrintable(v.headText()));
    // The same score in a lower layer wins over the higher layer's lower head.
    at(0, 3, 20) = 0.95;
    v.setResult(r);
    QCOMPARE(v.layer(), 0);
    QCOMPARE(v.head(), 3);
    // Without the counts every position is judged: the last one now wins.
    r->sinkQueries.clear();
    v.setResult(r);
    QCOMPARE(v.layer(), 0);
    QCOMPARE(v.head(), 0);
    // A pick shows at once, and stays over a later run whose strongest sink is elsewhere.
    QVERIFY(!v.headPicked());
    v.pickHead(1, 3);
    QCOMPARE(changed.count(), 4);  // three runs, then the pick
    QVERIFY(v.headPicked());
    QCOMPARE(v.headSource(), SinksView::HeadSource::kPicked);
    QCOMPARE(v.layer(), 1);
    QCOMPARE(v.head(), 3);
    QCOMPARE(v.headSinks(), (QVector<int>{0, 42}));
    QVERIFY2(!v.headText().contains(QStringLiteral("strongest")), qPrintable(v.headText()));
    v.setResult(r);
    QCOMPARE(v.layer(), 1);
    QCOMPARE(v.head(), 3);
  }

  void recommendationSaysFortyTwoIsNotKept() {
    SinksView v;
    v.setResult(syntheticResult(true, 16));
    const QString t = v.recommendation();
    QVERIFY2(t.contains(QStringLiteral("sink_keep_count = 1:")), qPrintable(t));
    QVERIFY2(t.contains(QStringLiteral("keeps position(s) 0;")), qPrintable(t));
    QVERIFY2(t.contains(QStringLiteral("does not keep 42")), qPrintable(t));
    QVERIFY2(t.contains(QStringLiteral("cap of 16")), qPrintable(t));
    QVERIFY2(t.contains(QStringLiteral("larger window or accept the loss")), qPrintable(t));
  }

  void currentSIsDescribedOnlyWithAWindow() {
    SinksView v;
    v.setResult(syntheticResult(true, 1));
    QVERIFY2(v.recommendation().contains(QStringLiteral("Current: S = 1 keeps position(s) 0;")),
             qPrintable(v.recommendation()));
    v.setResult(syntheticResult(false, 1));
    QVERIFY2(!v.recommendation().contains(QStringLiteral("Current:")), qPrintable(v.recommendation()));
    QVERIFY2(v.recommendation().contains(QStringLiteral("window is off")), qPrintable(v.recommendation()));
  }

  void tokenStripMarksOnlyFlaggedPositionsWithTheirShare() {
    TokenListModel m;
    m.setResult(syntheticResult(true, 4));
    // Position 1 is kept (S = 4) but no sink: not marked, and the tooltip says kept.
    QVERIFY(!m.index(1).data(TokenListModel::SinkRole).toBool());
    QVERIFY(m.index(1).data(TokenListModel::KeptRole).toBool());
    QVERIFY(!m.index(1).data(Qt::BackgroundRole).isValid());
    QVERIFY(m.index(1).data(Qt::ToolTipRole).toString().contains(QStringLiteral("kept by the cache")));
    QVERIFY(!m.index(1).data(Qt::ToolTipRole).toString().contains(QStringLiteral("sink in")));
    // Position 42: flagged, with its share.
    QVERIFY(m.index(42).data(TokenListModel::SinkRole).toBool());
    QCOMPARE(m.index(42).data(TokenListModel::SinkShareRole).toDouble(), 0.1);
    QVERIFY(m.index(42).data(Qt::BackgroundRole).isValid());
    const QString tip = m.index(42).data(Qt::ToolTipRole).toString();
    QVERIFY2(tip.contains(QStringLiteral("sink in 10 % of heads (flagged")), qPrintable(tip));
    QVERIFY2(m.index(0).data(Qt::ToolTipRole).toString().contains(QStringLiteral("sink in 100 % of heads")),
             qPrintable(m.index(0).data(Qt::ToolTipRole).toString()));
    // Position 7: at epsilon in one head, so no sink anywhere.
    QVERIFY(!m.index(7).data(TokenListModel::SinkRole).toBool());
    QCOMPARE(m.index(7).data(TokenListModel::SinkShareRole).toDouble(), 0.0);
  }
};

QTEST_GUILESS_MAIN(TestViewModels)
#include "tst_viewmodels.moc"
