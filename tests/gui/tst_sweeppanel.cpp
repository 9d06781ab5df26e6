// SPDX-License-Identifier: Apache-2.0
// The sweep view offscreen: a sweep's points are plotted with the front highlighted, choosing a
// point shows its metrics, and "Load this point" asks for exactly that point (invalid ones
// cannot be loaded).
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>

#include <qcustomplot.h>

#include "app/gui/panels/sweep_panel.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {

SweepPoint point(int i, double kl, double sparsity, bool front, bool valid = true) {
  SweepPoint p;
  p.index = i;
  p.label = QStringLiteral("lambda=0.0%1").arg(i + 1);
  p.valid = valid;
  p.passed = kl < 0.01;
  p.results.kl_mean = kl;
  p.results.sparsity_prefill = sparsity;
  p.results.peak_kv_mib = 2.0 - i * 0.25;
  p.paretoSparsity = front;
  p.paretoMemory = front;
  p.invalid = valid ? QString() : QStringLiteral("sinks > window");
  p.configYaml = QStringLiteral("sinkscope_config_version: 1\n");
  return p;
}

}  // namespace

class TestSweepPanel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void plotsTheFrontAndLoadsTheChosenPoint() {
    SweepPointsModel model;
    SweepPanel panel(&model);
    panel.resize(800, 600);
    SweepResults r;
    r.points = {point(0, 0.001, 0.1, true), point(1, 0.02, 0.2, false), point(2, 0.005, 0.4, true),
                point(3, 0, 0, false, false)};
    model.setResults(r, QStringLiteral("sweep.json"));

    auto* plot = panel.findChild<QCustomPlot*>(QStringLiteral("plot"));
    QVERIFY(plot);
    QCOMPARE(plot->graph(0)->dataCount(), 2);  // passing points
    QCOMPARE(plot->graph(1)->dataCount(), 1);  // failing points
    QCOMPARE(plot->graph(2)->dataCount(), 2);  // the front, connected in x order
    QCOMPARE(plot->graph(2)->data()->at(0)->key, 10.0);
    QCOMPARE(plot->graph(2)->data()->at(1)->key, 40.0);

    auto* load = panel.findChild<QPushButton*>(QStringLiteral("loadPoint"));
    QVERIFY(!load->isEnabled());
    QSignalSpy requested(&panel, &SweepPanel::loadPoint);
    panel.selectRow(2);
    QCOMPARE(panel.selectedRow(), 2);
    QCOMPARE(plot->graph(3)->dataCount(), 1);  // the selection ring
    QVERIFY(panel.findChild<QLabel*>(QStringLiteral("pointInfo"))
                ->text()
                .contains(QStringLiteral("lambda=0.03")));
    QVERIFY(load->isEnabled());
    QTest::mouseClick(load, Qt::LeftButton);
    QCOMPARE(requested.count(), 1);
    QCOMPARE(requested.first().first().toInt(), 2);
    panel.selectRow(3);  // not run: nothing to load
    QVERIFY(!load->isEnabled());
    QVERIFY(panel.findChild<QLabel*>(QStringLiteral("pointInfo"))
                ->text()
                .contains(QStringLiteral("not run")));

    // Clicking a point on the plot selects it.
    plot->replot();
    const QPoint at(int(plot->xAxis->coordToPixel(10.0)), int(plot->yAxis->coordToPixel(0.001)));
    QTest::mouseClick(plot, Qt::LeftButton, {}, at);
    QCOMPARE(panel.selectedRow(), 0);
  }
};

QTEST_MAIN(TestSweepPanel)
#include "tst_sweeppanel.moc"
