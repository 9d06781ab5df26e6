// SPDX-License-Identifier: Apache-2.0
#include <QAbstractItemModelTester>
#include <QTest>

#include "app/gui/models/head_stats_model.h"
#include "tests/gui/test_model.h"

using namespace sinkscope::gui;

class TestHeadStatsModel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void emptyAndFilled() {
    HeadStatsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    test::checkEmptyThenFilled(model, [this](HeadStatsModel& m) { fill(m); });
    if (QTest::currentTestFailed()) return;
    check(model);
  }
 private:
  void fill(HeadStatsModel& m);
  void check(HeadStatsModel& m);
};

void TestHeadStatsModel::fill(HeadStatsModel& m) { m.setResult(test::sampleResult()); }
void TestHeadStatsModel::check(HeadStatsModel& m) {
  const auto r = test::sampleResult();
  QCOMPARE(m.rowCount(), r->nLayer * r->nHead);
  QCOMPARE(m.columnCount(), int(HeadStatsModel::ColumnCount));
  const QModelIndex i = m.index(r->nHead + 1, HeadStatsModel::SparsityPrefill);
  QCOMPARE(m.index(r->nHead + 1, HeadStatsModel::Layer).data().toInt(), 1);
  QCOMPARE(i.data(Qt::UserRole).toDouble(), r->probesPrefill.prefill[size_t(r->nHead + 1)].sparsity());
  QVERIFY(!m.headerData(HeadStatsModel::FirstMass, Qt::Horizontal).toString().isEmpty());
}

QTEST_GUILESS_MAIN(TestHeadStatsModel)
#include "tst_headstatsmodel.moc"
