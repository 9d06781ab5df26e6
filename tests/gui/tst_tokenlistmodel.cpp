// SPDX-License-Identifier: Apache-2.0
#include <QAbstractItemModelTester>
#include <QTest>

#include "app/gui/models/token_list_model.h"
#include "tests/gui/test_model.h"

using namespace sinkscope::gui;

class TestTokenListModel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void emptyAndFilled() {
    TokenListModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    test::checkEmptyThenFilled(model, [this](TokenListModel& m) { fill(m); });
    if (QTest::currentTestFailed()) return;
    check(model);
  }
 private:
  void fill(TokenListModel& m);
  void check(TokenListModel& m);
};

void TestTokenListModel::fill(TokenListModel& m) { m.setResult(test::sampleResult()); }
void TestTokenListModel::check(TokenListModel& m) {
  const auto r = test::sampleResult();
  QCOMPARE(m.rowCount(), int(r->promptTokens.size() + r->tokens.size()));
  QCOMPARE(m.promptLength(), int(r->promptTokens.size()));
  const QModelIndex last = m.index(m.rowCount() - 1);
  QVERIFY(last.data(TokenListModel::GeneratedRole).toBool());
  QVERIFY(!m.index(0).data(TokenListModel::GeneratedRole).toBool());
  QCOMPARE(m.index(3).data(TokenListModel::PositionRole).toInt(), 3);
  QCOMPARE(TokenListModel::visiblePiece("a\nb"), QStringLiteral("a\u23CEb"));
}

QTEST_GUILESS_MAIN(TestTokenListModel)
#include "tst_tokenlistmodel.moc"
