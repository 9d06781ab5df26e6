// SPDX-License-Identifier: Apache-2.0
#include <QSignalSpy>
#include <QLabel>
#include <QTest>

#include <qcustomplot.h>

#include "app/gui/panels/attention_map_panel.h"
#include "tests/gui/panel_test_support.h"
#include "tests/gui/test_model.h"

using namespace sinkscope::gui;

class TestAttentionMapPanel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void captionCountsEveryOutlinedTile() {
    QCOMPARE(skippedOutlineCaption(0, 0), QStringLiteral("0 skipped tiles outlined"));
    QCOMPARE(skippedOutlineCaption(17, 17), QStringLiteral("17 skipped tiles outlined"));
  }
  void captionSaysWhenTheCapCutTheOutlinesShort() {
    const QString c = skippedOutlineCaption(kMaxSkipOutlines, 9000);
    QVERIFY2(c.startsWith(QStringLiteral("%1 of 9000 skipped tiles outlined").arg(kMaxSkipOutlines)),
             qPrintable(c));
    QVERIFY2(c.contains(QStringLiteral("the first %1").arg(kMaxSkipOutlines)), qPrintable(c));
  }
  // Before any run the panel says there is no map yet instead of drawing an empty colour map
  // (and no colour scale); the first result hides that text and shows the map and its scale.
  void emptyPanelSaysThereIsNoMapYet() {
    AttentionMapView view;
    AttentionMapPanel panel(&view);
    auto* map = qobject_cast<QCPColorMap*>(panel.plot()->plottable(0));
    QVERIFY(map);
    const auto emptyText = [&] { return test::emptyPlotText(panel.plot()); };
    QVERIFY(emptyText());  // from the start
    QVERIFY(emptyText()->text().contains(QStringLiteral("No attention map yet")));
    QVERIFY(!map->visible());
    QVERIFY(!map->colorScale()->visible());
    QVERIFY(!map->colorScale()->layout());  // out of the layout: the axes take its width
    view.setResult(test::sampleResult());
    QVERIFY(!emptyText());
    QVERIFY(map->visible());
    QVERIFY(map->colorScale()->visible());
    QCOMPARE(map->colorScale()->layout(), panel.plot()->plotLayout());
    view.setResult(nullptr);  // a result taken away (no model) brings the text back
    QVERIFY(emptyText());
    QVERIFY(!map->visible());
    QVERIFY(!map->colorScale()->visible());
    QVERIFY(!map->colorScale()->layout());
  }
  // With a model loaded and no map (a run under way, cancelled, or not started) the text points
  // to a run, not to a model; without one it asks for both.
  void emptyTextPointsToWhatIsMissing() {
    AttentionMapView view;
    AttentionMapPanel panel(&view);
    const auto text = [&] {
      QCPItemText* t = test::emptyPlotText(panel.plot());
      return t ? t->text() : QString();
    };
    QVERIFY2(text().contains(QStringLiteral("load a model")), qPrintable(text()));
    panel.setModelLoaded(true);
    QVERIFY2(text().contains(QStringLiteral("next finished run")), qPrintable(text()));
    QVERIFY2(!text().contains(QStringLiteral("load a model")), qPrintable(text()));
    view.setResult(test::sampleResult());
    QVERIFY(text().isEmpty());
    view.setResult(nullptr);
    QVERIFY2(text().contains(QStringLiteral("next finished run")), qPrintable(text()));
    panel.setModelLoaded(false);
    QVERIFY2(text().contains(QStringLiteral("load a model")), qPrintable(text()));
  }
  // What a cell shows (finding 2): NaN where no pair of the cell is visible (drawn grey, never
  // as ~0); else P, or where binned the mass a query puts on the cell's keys, so each row's
  // values add up to 1 (every query's probabilities do); the log colour range spans five
  // decades.
  void cellValuesAreMassOrNotVisible() {
    AttentionMapView view;
    AttentionMapPanel panel(&view);
    const RunResultPtr r = test::sampleResult();
    auto binned = std::make_shared<RunResult>(*r);
    const AttentionMap& a = binned->map;
    QVERIFY(a.cols > 1);
    const Visibility full;
    for (int row = 0; row < a.rows; ++row) {
      double total = 0;
      for (int c = 0; c < a.cols; ++c) {
        const double v = mapCellValue(a, row, c, full);
        const bool anyVisible = full.anyVisible(a.rowStart[size_t(row)], a.rowStart[size_t(row) + 1],
                                                a.colStart[size_t(c)], a.colStart[size_t(c) + 1]);
        QCOMPARE(std::isnan(v), !anyVisible);
        if (!std::isnan(v)) {
          QVERIFY(v >= 0);
          total += v;
        }
      }
      QVERIFY2(std::abs(total - 1.0) < 2e-3, qPrintable(QStringLiteral("row %1: %2").arg(row).arg(total)));
    }
    view.setResult(binned);
    auto* map = qobject_cast<QCPColorMap*>(panel.plot()->plottable(0));
    QVERIFY(map);
    QCOMPARE(map->dataScaleType(), QCPAxis::stLogarithmic);
    QVERIFY(std::abs(map->dataRange().upper / map->dataRange().lower - 1e5) < 1);
  }
  // A map made on a layer with a window of its own (a Gemma local layer): the panel's rule adds
  // that window, so cells past it are grey (NaN), the hover text names the reason, and the
  // caption says keys beyond it are invisible rather than skipped.
  void ownWindowOfTheLayerIsPartOfTheRule() {
    AttentionMapView view;
    AttentionMapPanel panel(&view);
    auto r = std::make_shared<RunResult>(*test::sampleResult());
    r->map.ownWindow = 16;
    view.setResult(r);
    const AttentionMap& a = r->map;
    QVERIFY(a.nTokens > 40);
    const QString far = panel.describePoint(0, 40);  // key 0, query 40: 40 >= 16 back
    QVERIFY2(far.contains(QStringLiteral("outside this layer's own window (16 tokens)")), qPrintable(far));
    const QString near = panel.describePoint(30, 40);
    QVERIFY2(!near.contains(QStringLiteral("not visible")), qPrintable(near));
    const Visibility vis{0, 0, 16};
    int grey = 0;
    for (int row = 0; row < a.rows; ++row)
      for (int c = 0; c < a.cols; ++c) {
        const bool nan = std::isnan(mapCellValue(a, row, c, vis));
        QCOMPARE(nan, !vis.anyVisible(a.rowStart[size_t(row)], a.rowStart[size_t(row) + 1],
                                      a.colStart[size_t(c)], a.colStart[size_t(c) + 1]));
        grey += nan;
      }
    QVERIFY(grey > 0);
    const auto labels = panel.findChildren<QLabel*>();
    bool caption = false;
    for (const QLabel* l : labels) caption = caption || l->text().contains(QStringLiteral("own window: 16 tokens"));
    QVERIFY(caption);
  }
  // Navigation on a real run's map (finding 9): zoom stays on the map and resets, the hover
  // text names the tokens and what the cell is, a click picks the query token, the pickers step.
  void navigationStaysOnTheMapAndResets() {
    AttentionMapView view;
    AttentionMapPanel panel(&view);
    panel.resize(900, 640);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    const RunResultPtr r = test::sampleResult();
    panel.setHeadRange(r->nLayer, r->nHead);
    panel.setSelection(r->map.layer, r->map.head);
    view.setResult(r);
    const int n = r->map.nTokens;
    QVERIFY(n > 64);
    QCustomPlot* plot = panel.plot();
    // Zoomed far out and panned off the map: brought back inside it.
    plot->xAxis->setRange(-5000, 9000);
    plot->yAxis->setRange(n + 100, n + 400);
    QVERIFY(plot->xAxis->range().lower >= -0.5 - n * 0.01 - 1e-9);
    QVERIFY(plot->xAxis->range().upper <= n - 0.5 + 1e-9);
    QVERIFY(plot->yAxis->range().upper <= n - 0.5 + std::max(0.5, n * 0.01) + 1e-9);
    // Zoomed in past 4 tokens: held at 4.
    plot->xAxis->setRange(10, 10.5);
    QVERIFY(plot->xAxis->range().size() >= 4 - 1e-9);
    panel.resetZoom();
    QVERIFY(plot->xAxis->range().lower < 0 && plot->xAxis->range().upper >= n - 0.5 - 1e-9);
    // A double-click resets too.
    plot->xAxis->setRange(20, 40);
    QTest::mouseDClick(plot, Qt::LeftButton, {}, plot->axisRect()->center());
    QVERIFY(plot->xAxis->range().size() > n - 1);
    // Hover text: tokens, P or mass, and visibility.
    const QString seen = panel.describePoint(0, n - 1);
    QVERIFY2(seen.contains(QStringLiteral("query")) && seen.contains(QStringLiteral("key")), qPrintable(seen));
    QVERIFY2(seen.contains(QStringLiteral("mass")) || seen.contains(QStringLiteral("P = ")), qPrintable(seen));
    QVERIFY2(panel.describePoint(n - 1, 0).contains(QStringLiteral("future")),
             qPrintable(panel.describePoint(n - 1, 0)));
    QVERIFY(panel.describePoint(n + 3, 0).isEmpty());
    // A click on the map picks the query token of that row.
    QSignalSpy picked(&panel, &AttentionMapPanel::positionChosen);
    const int q = n / 2;
    const QPoint at(int(plot->xAxis->coordToPixel(1)), int(plot->yAxis->coordToPixel(q)));
    QTest::mouseClick(plot, Qt::LeftButton, {}, at);
    QCOMPARE(picked.count(), 1);
    QVERIFY(std::abs(picked.first().first().toInt() - q) <= 1);
    // Layer and head stepping, clamped at the ends.
    QSignalSpy head(&panel, &AttentionMapPanel::headChosen);
    panel.stepLayer(-1);
    QCOMPARE(head.count(), 1);
    QCOMPARE(head.last().at(0).toInt(), r->map.layer - 1);
    panel.stepLayer(-5);
    QCOMPARE(head.last().at(0).toInt(), 0);
    panel.stepHead(+100);
    QCOMPARE(head.last().at(1).toInt(), r->nHead - 1);
  }
  // The head's sinks are named as keys with their tokens: a bare "Sinks of this head: 0." read
  // as "no sinks".
  void captionNamesTheHeadsSinkKeys() {
    AttentionMapView view;
    AttentionMapPanel panel(&view);
    auto r = std::make_shared<RunResult>(*test::sampleResult());
    r->map.alpha.assign(size_t(r->map.nTokens), 0.0);
    r->map.alpha[0] = 0.6;
    r->map.alpha[3] = 0.35;
    panel.setHeadRange(r->nLayer, r->nHead);
    panel.setSelection(r->map.layer, r->map.head);
    view.setResult(r);
    const QString c = panel.caption();
    QVERIFY2(c.contains(QStringLiteral("Sinks of this head (alpha_k > 0.3): key 0 '")), qPrintable(c));
    QVERIFY2(c.contains(QStringLiteral(", key 3 '")), qPrintable(c));
    r->map.alpha.assign(size_t(r->map.nTokens), 0.0);
    view.setResult(std::make_shared<RunResult>(*r));
    QVERIFY2(panel.caption().contains(QStringLiteral("No key is a sink of this head")), qPrintable(panel.caption()));
  }
  // A windowed run's mask is tiles in prompt positions (no cell grid): the caption counts them
  // and does not say the mask is missing; with neither, it does.
  void tileMaskIsAMask() {
    AttentionMapView view;
    AttentionMapPanel panel(&view);
    auto r = std::make_shared<RunResult>(*test::sampleResult());
    r->request.attention.type = sinkscope::AttentionType::kDynamicSparse;
    sinkscope::SkipMask m;
    m.layer = r->map.layer;
    m.head = r->map.head;
    m.tiles.push_back({64, 128, 0, 64, 2});  // skipped: queries 64-127, keys 0-63
    m.tiles.push_back({64, 128, 64, 128, 1});
    r->probes.mask = r->probesPrefill.mask = m;
    view.setResult(r);
    QVERIFY2(!panel.caption().contains(QStringLiteral("no skip mask")), qPrintable(panel.caption()));
    QVERIFY2(panel.caption().contains(QStringLiteral("1 skipped tiles outlined")), qPrintable(panel.caption()));
    auto none = std::make_shared<RunResult>(*r);
    none->probes.mask = none->probesPrefill.mask = sinkscope::SkipMask{};
    view.setResult(none);
    QVERIFY2(panel.caption().contains(QStringLiteral("no skip mask")), qPrintable(panel.caption()));
  }
};

QTEST_MAIN(TestAttentionMapPanel)
#include "tst_attentionmappanel.moc"
