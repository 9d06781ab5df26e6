// SPDX-License-Identifier: Apache-2.0
#include <QTest>

#include "engine/eval/rouge.h"

using namespace sinkscope;

class TestRouge : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void lcs() {
    QCOMPARE(lcsLength({1, 2, 3, 4}, {1, 3, 4}), size_t(3));
    QCOMPARE(lcsLength({1, 2, 3}, {4, 5}), size_t(0));
    QCOMPARE(lcsLength({}, {1}), size_t(0));
    QCOMPARE(lcsLength({5, 1, 2, 5, 3}, {1, 5, 2, 3}), size_t(3));
  }
  void f1() {
    QCOMPARE(rougeLF1({1, 2, 3}, {1, 2, 3}), 1.0);
    QCOMPARE(rougeLF1({}, {}), 1.0);
    QCOMPARE(rougeLF1({1}, {}), 0.0);
    QCOMPARE(rougeLF1({1, 2}, {3, 4}), 0.0);
    // lcs 3, precision 3/3, recall 3/4 -> F1 = 2 * 1 * 0.75 / 1.75
    QVERIFY(qFuzzyCompare(rougeLF1({1, 2, 3, 4}, {1, 3, 4}), 2 * 0.75 / 1.75));
  }
  void words() {
    // The classic example: "police killed the gunman" vs "police kill the gunman": lcs 3 of 4.
    QVERIFY(qFuzzyCompare(rougeLF1Words("police killed the gunman", "police kill the gunman"), 0.75));
    QCOMPARE(rougeLF1Words("a  b\nc", "a b c"), 1.0);
  }
};

QTEST_GUILESS_MAIN(TestRouge)
#include "tst_rouge.moc"
