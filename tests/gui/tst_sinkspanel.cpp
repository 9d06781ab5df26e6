// SPDX-License-Identifier: Apache-2.0
// The Sinks view: readable charts at the dock sizes of a 1280x720 window, a click on a heatmap
// cell picks that head, the cell mapping and tooltip text, and the three lines of text.
#include <QChart>
#include <QChartView>
#include <QScatterSeries>
#include <QLabel>
#include <QSignalSpy>
#include <QTest>

#include "app/gui/panels/heatmap.h"
#include "app/gui/panels/sinks_panel.h"
#include "tests/gui/panel_test_support.h"
#include "tests/gui/test_model.h"

using namespace sinkscope::gui;

class TestSinksPanel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void cellMappingCoversEachCellAndNothingElse() {
    QCOMPARE(headCellAt(0, 0, 3, 4).layer, 0);
    const HeadCell c = headCellAt(2.49, 1.4, 3, 4);
    QCOMPARE(c.layer, 1);
    QCOMPARE(c.head, 2);
    QCOMPARE(headCellAt(3.4, 2.4, 3, 4).head, 3);
    QVERIFY(!headCellAt(-0.51, 0, 3, 4).valid());
    QVERIFY(!headCellAt(3.5, 0, 3, 4).valid());  // past the last head
    QVERIFY(!headCellAt(0, 2.5, 3, 4).valid());  // past the last layer
    QVERIFY(!headCellAt(qQNaN(), 0, 3, 4).valid());
  }

  void tooltipNamesTheCellAndItsValue() {
    HeadGrid g;
    g.layers = 2;
    g.heads = 3;
    g.values = {0, 0.1, 0.2, 0.3, 0.4, 0.87};
    QCOMPARE(headCellTip(g, {1, 2}), QStringLiteral("layer 1 head 2: 0.87"));
    QCOMPARE(headCellTip(g, {0, 1}, QStringLiteral("mass")), QStringLiteral("layer 0 head 1: 0.10 (mass)"));
    QVERIFY(headCellTip(g, {2, 0}).isEmpty());
  }

  void integerTicksDoNotCrowd() {
    QCOMPARE(integerTickStep(9, 10), 1);
    QCOMPARE(integerTickStep(30, 8), 5);
    QCOMPARE(integerTickStep(30, 10), 5);
    QCOMPARE(integerTickStep(64, 8), 10);
    QCOMPARE(integerTickStep(607, 8), 100);
    QCOMPARE(integerTickStep(0, 8), 1);
  }

  void chartsAreReadableAtDockSizes() {
    SinksView view;
    SinksPanel panel(&view);
    view.setResult(test::sampleResult());
    for (const QSize& s : test::kDockSizes) {
      panel.resize(s);
      panel.show();
      QVERIFY(QTest::qWaitForWindowExposed(&panel));
      QCoreApplication::processEvents();
      test::checkReadable(&panel, panel.alphaChart(), QSize(320, 200));
      if (QTest::currentTestFailed()) return;
      test::checkReadable(&panel, panel.heatmap(), QSize(320, 200));
      if (QTest::currentTestFailed()) return;
      test::checkNoScrolling(&panel);
      if (QTest::currentTestFailed()) return;
    }
  }

  // The usual sink, alpha_k = 1 at position 0, sits in the plot's corner: its whole marker must
  // be inside the plot area, not cut in half by the axes' edges.
  void aSinkAtTheCornerIsDrawnWhole() {
    SinksView view;
    SinksPanel panel(&view);
    view.setResult(test::sampleResult());
    panel.resize(850, 400);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QCoreApplication::processEvents();
    QChart* chart = panel.alphaChart()->chart();
    QScatterSeries* marks = nullptr;
    for (QAbstractSeries* s : chart->series())
      if (auto* sc = qobject_cast<QScatterSeries*>(s)) marks = sc;
    QVERIFY(marks);
    const QPointF at = chart->mapToPosition(QPointF(0, 1.0), marks);
    const qreal r = marks->markerSize() / 2;
    const QRectF plot = chart->plotArea();
    QVERIFY2(plot.contains(QRectF(at.x() - r, at.y() - r, 2 * r, 2 * r)),
             qPrintable(QStringLiteral("marker at (%1, %2) r %3, plot (%4, %5) to (%6, %7)")
                            .arg(at.x()).arg(at.y()).arg(r).arg(plot.left()).arg(plot.top())
                            .arg(plot.right()).arg(plot.bottom())));
  }

  // The heatmap outlines the head the alpha_k chart shows, and follows a pick.
  void heatmapOutlinesTheChartsHead() {
    SinksView view;
    SinksPanel panel(&view);
    const auto r = test::sampleResult();
    view.setResult(r);
    HeadHeatmap* map = panel.heatmap();
    QCOMPARE(map->markedCell().layer, view.layer());
    QCOMPARE(map->markedCell().head, view.head());
    auto* mark = map->findChild<QCPItemRect*>();
    if (!mark) {
      for (int i = 0; i < map->itemCount(); ++i)
        if (auto* it = qobject_cast<QCPItemRect*>(map->item(i))) mark = it;
    }
    QVERIFY(mark);
    QVERIFY(mark->visible());
    view.pickHead(1, 2);
    QCOMPARE(map->markedCell().layer, 1);
    QCOMPARE(map->markedCell().head, 2);
    // The outline lies inside cell (1, 2): heads 1.5 .. 2.5, layers 0.5 .. 1.5.
    const QRectF cell(QPointF(1.5, 0.5), QPointF(2.5, 1.5));
    const QRectF drawn(QPointF(mark->topLeft->coords().x(), mark->bottomRight->coords().y()),
                       QPointF(mark->bottomRight->coords().x(), mark->topLeft->coords().y()));
    QVERIFY(cell.contains(drawn));
    QVERIFY(drawn.width() > 0.8 && drawn.height() > 0.8);
    map->setMarkedCell({r->nLayer, 0});  // outside the grid: no outline
    QVERIFY(!mark->visible());
  }

  void clickingAHeatmapCellChoosesThatHead() {
    SinksView view;
    SinksPanel panel(&view);
    const auto r = test::sampleResult();
    view.setResult(r);
    panel.resize(850, 400);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    HeadHeatmap* map = panel.heatmap();
    map->replot();
    QCOMPARE(map->grid().layers, r->nLayer);
    QSignalSpy chosen(&panel, &SinksPanel::headChosen);
    for (auto [l, h] : {std::pair{1, 2}, std::pair{0, 3}, std::pair{r->nLayer - 1, 0}}) {
      const QPoint at = map->pixelOfCell(l, h).toPoint();
      QTest::mouseClick(map, Qt::LeftButton, {}, at);
      QCOMPARE(chosen.count(), 1);
      QCOMPARE(chosen.takeFirst(), (QVariantList{l, h}));
      QVERIFY(headCellTip(map->grid(), map->cellAtPixel(at)).startsWith(
          QStringLiteral("layer %1 head %2: ").arg(l).arg(h)));
    }
    QTest::mouseClick(map, Qt::LeftButton, {}, QPoint(2, 2));  // the margin: no cell
    QTest::mouseClick(map, Qt::RightButton, {}, map->pixelOfCell(1, 1).toPoint());
    QCOMPARE(chosen.count(), 0);
  }

  void textSaysHeadVerdictAndRecommendation() {
    SinksView view;
    SinksPanel panel(&view);
    view.setResult(test::sampleResult());
    const QString t = panel.text()->text();
    QVERIFY2(t.contains(QStringLiteral("Head L%1 H%2").arg(view.layer()).arg(view.head())),
             qPrintable(t));
    QVERIFY2(t.contains(QStringLiteral("% of heads")) || t.contains(QStringLiteral("no position")), qPrintable(t));
    QVERIFY2(t.contains(QStringLiteral("recommended sink_keep_count"), Qt::CaseInsensitive), qPrintable(t));
  }
};

QTEST_MAIN(TestSinksPanel)
#include "tst_sinkspanel.moc"
