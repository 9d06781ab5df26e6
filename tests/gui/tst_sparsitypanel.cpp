// SPDX-License-Identifier: Apache-2.0
// The Sparsity view: readable charts at the dock sizes of a 1280x720 window, integer layer ticks,
// a click on a heatmap cell picks that head, the per-head table sorts by number, and the summary
// says when the decode ran the dense kernels for speed.
#include <QHeaderView>
#include <QSignalSpy>
#include <QStandardItemModel>
#include <QTabWidget>
#include <QTableView>
#include <QTest>

#include "app/gui/models/head_stats_model.h"
#include "app/gui/panels/heatmap.h"
#include "app/gui/panels/sparsity_panel.h"
#include "tests/gui/panel_test_support.h"
#include "tests/gui/test_model.h"

using namespace sinkscope::gui;

class TestSparsityPanel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void chartsAreReadableAtDockSizes() {
    SparsityView view;
    HeadStatsModel stats;
    SparsityPanel panel(&view, &stats);
    view.setResult(test::sampleResult());
    stats.setResult(test::sampleResult());
    for (const QSize& s : test::kDockSizes) {
      panel.resize(s);
      panel.show();
      QVERIFY(QTest::qWaitForWindowExposed(&panel));
      for (int tab = 0; tab < panel.mapTabs()->count(); ++tab) {
        panel.mapTabs()->setCurrentIndex(tab);
        QCoreApplication::processEvents();
        QWidget* chart = panel.mapTabs()->currentWidget();
        test::checkReadable(&panel, chart, QSize(320, 200));
        if (QTest::currentTestFailed()) return;
      }
      test::checkReadable(&panel, panel.table(), QSize(240, 150));
      if (QTest::currentTestFailed()) return;
      test::checkNoScrolling(&panel);
      if (QTest::currentTestFailed()) return;
    }
    // The per-layer bars tick whole layers (2 here: step 1), the legend above the bars.
    QCustomPlot* bars = panel.barsPlot();
    auto ticker = bars->xAxis->ticker().dynamicCast<QCPAxisTickerFixed>();
    QVERIFY(ticker);
    QCOMPARE(ticker->tickStep(), 1.0);
    QVERIFY(bars->legend->outerRect().bottom() <= bars->axisRect()->outerRect().top());
  }

  void clickingAHeatmapCellChoosesThatHead() {
    SparsityView view;
    HeadStatsModel stats;
    SparsityPanel panel(&view, &stats);
    const auto r = test::sampleResult();
    view.setResult(r);
    panel.resize(850, 400);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QSignalSpy chosen(&panel, &SparsityPanel::headChosen);
    for (HeadHeatmap* map : {panel.prefillMap(), panel.decodeMap()}) {
      panel.mapTabs()->setCurrentWidget(map);
      QCoreApplication::processEvents();
      map->replot();
      QCOMPARE(map->grid().heads, r->nHead);
      QTest::mouseClick(map, Qt::LeftButton, {}, map->pixelOfCell(1, 3).toPoint());
      QCOMPARE(chosen.count(), 1);
      QCOMPARE(chosen.takeFirst(), (QVariantList{1, 3}));
      QTest::mouseClick(map, Qt::LeftButton, {}, map->pixelOfCell(0, 0).toPoint());
      QCOMPARE(chosen.takeFirst(), (QVariantList{0, 0}));
      QTest::mouseClick(map, Qt::LeftButton, {}, QPoint(map->width() - 2, 2));  // the colour scale
      QCOMPARE(chosen.count(), 0);
    }
  }

  // The map's head is outlined in both heatmaps, and stays outlined over a new result.
  void mapHeadIsOutlined() {
    SparsityView view;
    HeadStatsModel stats;
    SparsityPanel panel(&view, &stats);
    panel.setMarkedHead(1, 3);
    view.setResult(test::sampleResult());
    for (HeadHeatmap* m : {panel.prefillMap(), panel.decodeMap()}) {
      QCOMPARE(m->markedCell().layer, 1);
      QCOMPARE(m->markedCell().head, 3);
      QCPItemRect* mark = nullptr;
      for (int i = 0; i < m->itemCount(); ++i)
        if (auto* it = qobject_cast<QCPItemRect*>(m->item(i))) mark = it;
      QVERIFY(mark && mark->visible());
    }
  }

  // Before a run the heatmaps say so (no black grid, no colour scale); a result shows them.
  void emptyHeatmapsSayThereIsNoRunYet() {
    SparsityView view;
    HeadStatsModel stats;
    SparsityPanel panel(&view, &stats);
    const auto emptyText = [](HeadHeatmap* m) { return test::emptyPlotText(m); };
    for (HeadHeatmap* m : {panel.prefillMap(), panel.decodeMap()}) {
      QVERIFY(emptyText(m) && emptyText(m)->visible());
      QVERIFY(!m->colorMap()->visible());
      QVERIFY(!m->colorMap()->colorScale()->visible());
    }
    view.setResult(test::sampleResult());
    for (HeadHeatmap* m : {panel.prefillMap(), panel.decodeMap()}) {
      QVERIFY(!emptyText(m)->visible());
      QVERIFY(m->colorMap()->visible());
      QVERIFY(m->colorMap()->colorScale()->visible());
    }
  }

  void tableSortsByNumberNotText() {
    // "9.5%" < "10.0%" by number, the other way round as text.
    QStandardItemModel m(3, 1);
    const double v[] = {0.10, 0.095, 0.5};
    for (int i = 0; i < 3; ++i) {
      auto* it = new QStandardItem(QString::number(v[i] * 100, 'f', 1) + QLatin1Char('%'));
      it->setData(v[i], HeadStatsModel::SortRole);
      m.setItem(i, 0, it);
    }
    SparsityView view;
    SparsityPanel panel(&view, &m);
    QTableView* t = panel.table();
    QVERIFY(t->isSortingEnabled());
    QCOMPARE(t->model()->index(0, 0).data().toString(), QStringLiteral("10.0%"));  // unsorted
    t->horizontalHeader()->setSortIndicator(0, Qt::AscendingOrder);  // a click on the header
    QCOMPARE(t->model()->index(0, 0).data().toString(), QStringLiteral("9.5%"));
    QCOMPARE(t->model()->index(1, 0).data().toString(), QStringLiteral("10.0%"));
    QCOMPARE(t->model()->index(2, 0).data().toString(), QStringLiteral("50.0%"));
  }

  void headStatsTableSortsEveryColumnAndPicksARow() {
    SparsityView view;
    HeadStatsModel stats;
    SparsityPanel panel(&view, &stats);
    stats.setResult(test::sampleResult());
    QTableView* t = panel.table();
    for (int c = 0; c < HeadStatsModel::ColumnCount; ++c) {
      t->sortByColumn(c, Qt::DescendingOrder);
      for (int row = 1; row < t->model()->rowCount(); ++row) {
        const QVariant a = t->model()->index(row - 1, c).data(HeadStatsModel::SortRole);
        const QVariant b = t->model()->index(row, c).data(HeadStatsModel::SortRole);
        if (a.isValid() && b.isValid()) QVERIFY2(a.toDouble() >= b.toDouble(), qPrintable(QString::number(c)));
      }
    }
    t->sortByColumn(HeadStatsModel::Head, Qt::DescendingOrder);
    const QModelIndex first = t->model()->index(0, HeadStatsModel::Layer);
    QCOMPARE(t->model()->index(0, HeadStatsModel::Head).data().toInt(), test::sampleResult()->nHead - 1);
    QSignalSpy chosen(&panel, &SparsityPanel::headChosen);
    Q_EMIT t->doubleClicked(first);
    QCOMPARE(chosen.count(), 1);
    QCOMPARE(chosen.first().at(1).toInt(), test::sampleResult()->nHead - 1);
    QCOMPARE(chosen.first().at(0).toInt(), first.data().toInt());
  }

  void summarySaysWhenDecodeRanDense() {
    // The CPU runs what is asked: no word about the decode's kernels.
    SparsityView view;
    view.setResult(test::sampleResult());
    QVERIFY(!view.summary().contains("dense kernels"));
    // A CUDA run whose sparse-asked decode steps mostly ran the dense kernels says so, with the
    // prediction behind it.
    auto r = std::make_shared<RunResult>(*test::sampleResult());
    r->decodePath.chooses = true;
    r->decodePath.sparse_steps = 1;
    r->decodePath.probe_steps = 1;
    r->decodePath.dense_steps = 5;
    r->decodePath.predicted_ratio = 1.87;
    r->decodePath.skipped_estimate = 0.4;
    r->decodePath.last_kv_len = 700;
    view.setResult(r);
    const QString s = view.summary();
    QVERIFY2(s.contains("5 of 6 steps ran the dense kernels"), qPrintable(s));
    QVERIFY2(s.contains("1.87x"), qPrintable(s));
    QVERIFY2(s.contains("700 cached tokens with 40% skipped"), qPrintable(s));
  }
};

QTEST_MAIN(TestSparsityPanel)
#include "tst_sparsitypanel.moc"
