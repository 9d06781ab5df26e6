// SPDX-License-Identifier: Apache-2.0
// The controls panel offscreen: the hybrid-mode spin box and the threshold mode reach the
// emitted ControlState, follow setState(), and are disabled with sparse attention off.
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTest>

#include "app/gui/panels/controls_panel.h"

using namespace sinkscope;
using namespace sinkscope::gui;

class TestControlsPanel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  // The Sinks S box is enabled only where S acts, and the note under it says why when it is not.
  void sinksBoxFollowsWhereSinksAct() {
    ControlsPanel panel;
    panel.show();
    auto* note = panel.findChild<QLabel*>(QStringLiteral("sinksNote"));
    QVERIFY(note);
    ControlState s;
    panel.setState(s);
    auto* sinks = panel.findChild<QSpinBox*>(QStringLiteral("sinkCount"));
    QVERIFY(sinks);
    QVERIFY(!sinks->isEnabled());
    QVERIFY(note->isVisible());
    QVERIFY(note->text().contains(QStringLiteral("nothing to act on")));
    s.setKvQuant(KvQuantChoice::kInt8);
    panel.setState(s);
    QVERIFY(sinks->isEnabled());
    QVERIFY(!note->isVisible());
    s.setKvQuant(KvQuantChoice::kOff);
    s.setSlidingWindow(true);
    panel.setState(s);
    QVERIFY(sinks->isEnabled());
    QVERIFY(!note->isVisible());
  }
  void hybridAndThresholdModeAreEditable() {
    ControlsPanel panel;
    auto* minSeq = panel.findChild<QSpinBox*>(QStringLiteral("minSeqLength"));
    auto* mode = panel.findChild<QComboBox*>(QStringLiteral("thresholdMode"));
    QVERIFY(minSeq && mode);
    QCOMPARE(minSeq->value(), 0);
    QCOMPARE(minSeq->maximum(), kMaxMinSeqLength);
    QSignalSpy edited(&panel, &ControlsPanel::edited);
    minSeq->setValue(2048);
    QCOMPARE(edited.count(), 1);
    QCOMPARE(edited.last().first().value<ControlState>().inference.attention.min_sequence_length, 2048);
    mode->setCurrentIndex(1);
    QCOMPARE(edited.last().first().value<ControlState>().inference.attention.threshold_mode,
             ThresholdMode::kLengthScaled);
    QCOMPARE(panel.state().inference.attention.min_sequence_length, 2048);

    ControlState s;
    s.inference.attention.min_sequence_length = 777;
    s.setSparse(false);
    panel.setState(s);  // no signal
    QCOMPARE(edited.count(), 2);
    QCOMPARE(minSeq->value(), 777);
    QVERIFY(!minSeq->isEnabled());  // dense: no tiles to skip
    s.setSparse(true);
    panel.setState(s);
    QVERIFY(minSeq->isEnabled());
  }
};

QTEST_MAIN(TestControlsPanel)
#include "tst_controlspanel.moc"
