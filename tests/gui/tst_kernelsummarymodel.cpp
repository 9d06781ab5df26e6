// SPDX-License-Identifier: Apache-2.0
#include <QAbstractItemModelTester>
#include <QTest>

#include "app/gui/models/kernel_summary_model.h"
#include "tests/gui/test_model.h"

using namespace sinkscope::gui;

class TestKernelSummaryModel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void emptyAndFilled() {
    KernelSummaryModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    test::checkEmptyThenFilled(model, [this](KernelSummaryModel& m) { fill(m); });
    if (QTest::currentTestFailed()) return;
    check(model);
  }
 private:
  void fill(KernelSummaryModel& m);
  void check(KernelSummaryModel& m);
};

void TestKernelSummaryModel::fill(KernelSummaryModel& m) { m.setTimeline(test::sampleResult()->timeline); }
void TestKernelSummaryModel::check(KernelSummaryModel& m) {
  // CPU spans: one row per range name, "layer" and "attention" among them.
  QStringList names;
  for (int r = 0; r < m.rowCount(); ++r) names << m.index(r, KernelSummaryModel::Name).data().toString();
  QVERIFY2(names.contains(QStringLiteral("layer")), qPrintable(names.join(QLatin1Char(','))));
  double share = 0;
  for (int r = 0; r < m.rowCount(); ++r) share += m.index(r, KernelSummaryModel::Share).data(Qt::UserRole).toDouble();
  QVERIFY(std::abs(share - 1.0) < 1e-6);
  m.setTimeline(nullptr);
  QCOMPARE(m.rowCount(), 0);
}

QTEST_GUILESS_MAIN(TestKernelSummaryModel)
#include "tst_kernelsummarymodel.moc"
