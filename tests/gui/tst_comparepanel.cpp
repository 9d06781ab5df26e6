// SPDX-License-Identifier: Apache-2.0
// The Compare view: the KL plot keeps a readable size at the dock sizes of a 1280x720 window and
// its title fits (not clipped); with nothing to compare the plot says so.
#include <QTest>

#include "app/gui/panels/compare_panel.h"
#include "tests/gui/panel_test_support.h"
#include "tests/gui/test_model.h"

#include <qcustomplot.h>

using namespace sinkscope::gui;

class TestComparePanel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void klPlotIsReadableAndTitled() {
    CompareView view;
    ComparePanel panel(&view);
    const auto r = test::sampleResult();
    QVERIFY(r->compare.available);
    view.setResult(r);
    for (const QSize& s : test::kDockSizes) {
      panel.resize(s);
      panel.show();
      QVERIFY(QTest::qWaitForWindowExposed(&panel));
      QCoreApplication::processEvents();
      QCustomPlot* plot = panel.klPlot();
      test::checkReadable(&panel, plot, QSize(360, 220));
      if (QTest::currentTestFailed()) return;
      test::checkNoScrolling(&panel);
      if (QTest::currentTestFailed()) return;
      plot->replot();
      QCPTextElement* title = panel.klTitle();
      QVERIFY(title->text().contains(QStringLiteral("KL")));
      const int need = QFontMetrics(title->font()).horizontalAdvance(title->text());
      QVERIFY2(title->outerRect().width() >= need && title->outerRect().height() >= QFontMetrics(title->font()).height(),
               qPrintable(QStringLiteral("title needs %1 px, has %2x%3").arg(need)
                              .arg(title->outerRect().width()).arg(title->outerRect().height())));
      // The axis rect below the title keeps most of the plot's height.
      QVERIFY(plot->axisRect()->rect().height() >= 120);
      QVERIFY(plot->axisRect()->rect().top() >= title->outerRect().bottom());
    }
  }

  void emptyPlotSaysThereIsNoComparisonYet() {
    CompareView view;
    ComparePanel panel(&view);
    QCustomPlot* plot = panel.klPlot();
    const auto emptyText = [&] { return test::emptyPlotText(plot); };
    QVERIFY(emptyText());
    QVERIFY(emptyText()->visible());  // from the start
    QVERIFY(emptyText()->text().contains(QStringLiteral("No comparison yet")));
    for (const QSize& s : test::kDockSizes) {  // every line fits inside the axes at dock sizes
      panel.resize(s);
      panel.show();
      QVERIFY(QTest::qWaitForWindowExposed(&panel));
      QCoreApplication::processEvents();
      plot->replot();
      const QFontMetrics fm(emptyText()->font());
      for (const QString& line : emptyText()->text().split(QLatin1Char('\n')))
        QVERIFY2(fm.horizontalAdvance(line) <= plot->axisRect()->width(),
                 qPrintable(QStringLiteral("'%1' needs %2 px, the axes have %3 at %4x%5")
                                .arg(line).arg(fm.horizontalAdvance(line))
                                .arg(plot->axisRect()->width()).arg(s.width()).arg(s.height())));
    }
    view.setResult(test::sampleResult());
    QVERIFY(!emptyText()->visible());
    QVERIFY(plot->graph(0)->dataCount() > 0);
    view.setResult(nullptr);  // no result (the model went away): the text is back
    QVERIFY(emptyText()->visible());
  }
};

QTEST_MAIN(TestComparePanel)
#include "tst_comparepanel.moc"
