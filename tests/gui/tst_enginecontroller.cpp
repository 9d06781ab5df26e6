// SPDX-License-Identifier: Apache-2.0
#include <QSignalSpy>
#include <QTest>

#include "app/gui/models/control_state.h"
#include "app/gui/models/engine_controller.h"
#include "tests/gui/test_model.h"

using namespace sinkscope;
using namespace sinkscope::gui;

class TestEngineController : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void runsAndCoalesces() {
    EngineController c(BackendKind::kCpu, 2);
    QSignalSpy loaded(&c, &EngineController::modelLoaded);
    c.setModel(test::randomModel());
    QTRY_COMPARE(loaded.count(), 1);
    QSignalSpy finished(&c, &EngineController::finished);
    QSignalSpy idle(&c, &EngineController::idle);
    ControlState s;
    s.maxTokens = 4;
    uint64_t last = 0;
    for (int i = 0; i < 20; ++i) {
      s.lambdaPrefill = 0.001 * (i + 1);
      last = c.run(s.toRequest(test::longPrompt().toStdString()));
    }
    // Wait until the newest request has been delivered and the engine is idle (an idle signal
    // left over from loading the model must not end the wait early).
    QTRY_VERIFY_WITH_TIMEOUT(!c.busy() && !finished.isEmpty() &&
                                 finished.last().at(0).value<RunResultPtr>()->id == last,
                             60000);
    // Far fewer than 20 runs completed, and the newest one is among them.
    QVERIFY(finished.count() >= 1);
    QVERIFY2(finished.count() < 20, qPrintable(QString::number(finished.count())));
    const auto r = finished.last().at(0).value<RunResultPtr>();
    QCOMPARE(r->id, last);
    QCOMPARE(r->request.attention.threshold_prefill, 0.001 * 20);
  }
  void cancelLeavesEngineUsable() {
    EngineController c(BackendKind::kCpu, 2);
    QSignalSpy loaded(&c, &EngineController::modelLoaded);
    c.setModel(test::randomModel());
    QTRY_COMPARE(loaded.count(), 1);
    QSignalSpy started(&c, &EngineController::started);
    QSignalSpy cancelled(&c, &EngineController::cancelled);
    QSignalSpy finished(&c, &EngineController::finished);
    ControlState s;
    s.maxTokens = 400;  // long enough to be cancelled mid-run
    c.run(s.toRequest(test::longPrompt().toStdString()));
    QTRY_COMPARE(started.count(), 1);
    c.cancel();
    QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 30000);
    QCOMPARE(finished.count(), 0);
    s.maxTokens = 3;
    c.run(s.toRequest(test::longPrompt().toStdString()));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
  }
  void progressIsThrottledWithEta() {
    EngineController c(BackendKind::kCpu, 2);
    QSignalSpy loaded(&c, &EngineController::modelLoaded);
    c.setModel(test::randomModel());
    QTRY_COMPARE(loaded.count(), 1);
    QSignalSpy progress(&c, &EngineController::progress);
    QSignalSpy finished(&c, &EngineController::finished);
    ControlState s;
    s.maxTokens = 200;
    c.run(s.toRequest(test::longPrompt().toStdString()));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    QVERIFY(progress.count() >= 2);
    QVERIFY(progress.count() < 200);  // not one per token
    QCOMPARE(progress.last().at(1).toDouble(), 1.0);
    bool eta = false;
    for (const auto& a : progress) eta = eta || a.at(2).toDouble() >= 0;
    QVERIFY(eta);
  }
  void badModelFileFails() {
    EngineController c(BackendKind::kCpu, 2);
    QSignalSpy failed(&c, &EngineController::modelFailed);
    c.loadModel(QStringLiteral(SINKSCOPE_SOURCE_DIR "/README.md"));  // not a GGUF file
    QTRY_COMPARE(failed.count(), 1);
    QVERIFY(!failed.first().at(2).toString().isEmpty());
    c.loadModel(QStringLiteral("/nonexistent/model.gguf"));
    QTRY_COMPARE(failed.count(), 2);
    QVERIFY(failed.last().at(2).toString().contains(QStringLiteral("not found")));
  }
};

QTEST_GUILESS_MAIN(TestEngineController)
#include "tst_enginecontroller.moc"
