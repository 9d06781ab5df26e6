// SPDX-License-Identifier: Apache-2.0
#include <QTest>

#include "app/gui/panels/attention_map_panel.h"

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
};

QTEST_GUILESS_MAIN(TestAttentionMapPanel)
#include "tst_attentionmappanel.moc"
