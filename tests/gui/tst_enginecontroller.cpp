// SPDX-License-Identifier: Apache-2.0
#include <QElapsedTimer>
#include <QSet>
#include <QSignalSpy>
#include <QTest>
#include <QThread>

#include <algorithm>
#include <atomic>
#include <memory>

#include "app/gui/models/control_state.h"
#include "app/gui/models/engine_controller.h"
#include "tests/gui/test_model.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {

// Gives c the random test model and waits for it to be loaded.
bool loadTestModel(EngineController& c) {
  QSignalSpy loaded(&c, &EngineController::modelLoaded);
  c.setModel(test::randomModel());
  return loaded.count() == 1 || (loaded.wait(30000) && loaded.count() == 1);
}

}  // namespace

class TestEngineController : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void runsAndCoalesces() {
    EngineController c(BackendKind::kCpu, 2);
    QVERIFY(loadTestModel(c));
    QSignalSpy finished(&c, &EngineController::finished);
    QSignalSpy idle(&c, &EngineController::idle);
    ControlState s;
    s.maxTokens = 4;
    uint64_t last = 0;
    for (int i = 0; i < 20; ++i) {
      s.inference.attention.threshold_prefill = 0.001 * (i + 1);
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
  // Cancel stops the running job and drops the queued run. The dropped run says so at once (the
  // workbench waits for a run's end, finished, failed or cancelled, to leave the running state)
  // and never starts; the engine takes the next run as usual.
  void cancelEndsTheRunningAndTheQueuedRun() {
    EngineController c(BackendKind::kCpu, 2);
    QVERIFY(loadTestModel(c));
    QSignalSpy started(&c, &EngineController::started);
    QSignalSpy cancelled(&c, &EngineController::cancelled);
    QSignalSpy finished(&c, &EngineController::finished);
    ControlState s;
    s.maxTokens = 400;  // long enough to be cancelled mid-run
    // Cancel stops a running job of any tag and drops the queued job of tag "run".
    const uint64_t running = c.run(s.toRequest(test::longPrompt().toStdString()),
                                   QStringLiteral("other"));
    QTRY_COMPARE(started.count(), 1);
    s.maxTokens = 2;
    const uint64_t queued = c.run(s.toRequest(test::longPrompt().toStdString()));
    QCOMPARE(c.queuedJobs(), 1);
    c.cancel();
    QCOMPARE(c.queuedJobs(), 0);
    QCOMPARE(cancelled.count(), 1);  // at once, not when the worker gets to it
    QCOMPARE(cancelled.at(0).at(0).value<quint64>(), quint64(queued));
    QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 2, 30000);
    QCOMPARE(cancelled.at(1).at(0).value<quint64>(), quint64(running));
    QTest::qWait(50);
    QCOMPARE(started.count(), 1);
    QCOMPARE(finished.count(), 0);
    s.maxTokens = 3;
    c.run(s.toRequest(test::longPrompt().toStdString()));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
  }
  void progressIsThrottledWithEta() {
    EngineController c(BackendKind::kCpu, 2);
    QVERIFY(loadTestModel(c));
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
  // A Hugging Face checkpoint folder loads like a GGUF file; the info names the format, and a
  // run on it finishes.
  void loadsACheckpointFolder() {
    EngineController c(BackendKind::kCpu, 2);
    QSignalSpy loaded(&c, &EngineController::modelLoaded);
    QSignalSpy failed(&c, &EngineController::modelFailed);
    c.loadModel(QStringLiteral(SINKSCOPE_SOURCE_DIR "/tests/data/hf/qwen2_f16"));
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count() + failed.count(), 1, 30000);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(2).toString()));
    QVERIFY2(loaded.first().at(3).toString().contains(QStringLiteral("qwen2, safetensors")),
             qPrintable(loaded.first().at(3).toString()));
    QCOMPARE(loaded.first().at(4).toString().size(), 64);  // the checkpoint's digest
    QSignalSpy finished(&c, &EngineController::finished);
    ControlState s;
    s.maxTokens = 3;
    c.run(s.toRequest("The quick brown fox"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
    // A folder that is not a checkpoint names the missing config.json.
    c.loadModel(QStringLiteral(SINKSCOPE_SOURCE_DIR "/tests/data/hf/tokenizers"));
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
    QVERIFY2(failed.first().at(2).toString().contains(QStringLiteral("config.json: missing")),
             qPrintable(failed.first().at(2).toString()));
  }
  // Regression: the worker emitted the controller's signals on the engine thread, so receivers
  // connected directly (QSignalSpy, lambdas without a context) ran there and raced with the GUI
  // thread (TSan found it). Every signal must arrive on the controller's thread.
  void signalsArriveOnTheControllerThread() {
    EngineController c(BackendKind::kCpu, 2);
    std::atomic<int> wrongThread{0};
    std::atomic<int> calls{0};
    auto check = [&] {
      calls.fetch_add(1);
      if (QThread::currentThread() != c.thread()) wrongThread.fetch_add(1);
    };
    connect(&c, &EngineController::modelLoaded, check);
    connect(&c, &EngineController::modelFailed, check);
    connect(&c, &EngineController::started, check);
    connect(&c, &EngineController::progress, check);
    connect(&c, &EngineController::finished, check);
    connect(&c, &EngineController::cancelled, check);
    connect(&c, &EngineController::failed, check);
    QSignalSpy finished(&c, &EngineController::finished);
    QSignalSpy failed(&c, &EngineController::failed);
    c.loadModel(QStringLiteral("/nonexistent/model.gguf"));
    c.setModel(test::randomModel());
    ControlState s;
    s.maxTokens = 3;
    c.run(s.toRequest(test::longPrompt().toStdString()));
    ControlState bad = s;
    bad.layer = 999;  // outside the model: the run fails
    c.run(bad.toRequest(test::longPrompt().toStdString()), QStringLiteral("bad"));
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1 && failed.count() == 1, 60000);
    QVERIFY(calls.load() >= 5);
    QCOMPARE(wrongThread.load(), 0);
  }
  // Many requests under two tags with cancels, while runs are in flight: each started id ends
  // exactly once (finished, failed or cancelled), a run dropped before it started ends with
  // cancelled only, none fails, the newest of each tag finishes.
  void stressCoalesceAndCancel() {
    EngineController c(BackendKind::kCpu, 2);
    QVERIFY(loadTestModel(c));
    QSet<quint64> startedIds, endedIds;
    int duplicates = 0;
    QStringList failures;
    auto end = [&](quint64 id, bool viaCancel) {
      if (endedIds.contains(id) || (!viaCancel && !startedIds.contains(id))) ++duplicates;
      endedIds.insert(id);
    };
    connect(&c, &EngineController::started, [&](quint64 id) {
      if (endedIds.contains(id)) ++duplicates;  // dropped, then started after all
      startedIds.insert(id);
    });
    connect(&c, &EngineController::finished, [&](const RunResultPtr& r) { end(r->id, false); });
    connect(&c, &EngineController::cancelled, [&](quint64 id) { end(id, true); });
    connect(&c, &EngineController::failed, [&](quint64 id, const QString& m) {
      end(id, false);
      failures << m;
    });
    const std::string prompt = test::longPrompt().toStdString();
    const QString other = QStringLiteral("other");
    ControlState s;
    int cancels = 0;
    for (int i = 0; i < 80; ++i) {
      s.maxTokens = (i % 3 == 0) ? 24 : 2;  // short and long runs
      s.inference.attention.threshold_prefill = 0.001 * (i + 1);
      c.run(s.toRequest(prompt), i % 4 == 0 ? other : QStringLiteral("run"));
      if (i % 6 == 5) {
        c.cancel();
        ++cancels;
      }
      if (i % 8 == 0) QTest::qWait(2);  // let some of them start
    }
    s.maxTokens = 2;
    const uint64_t lastRun = c.run(s.toRequest(prompt));
    const uint64_t lastOther = c.run(s.toRequest(prompt), other);
    QTRY_VERIFY_WITH_TIMEOUT(endedIds.contains(lastRun) && endedIds.contains(lastOther) &&
                                 !c.busy() && c.queuedJobs() == 0,
                             180000);
    QTRY_VERIFY(std::all_of(startedIds.begin(), startedIds.end(),
                            [&](quint64 id) { return endedIds.contains(id); }));
    QCOMPARE(duplicates, 0);
    QVERIFY2(failures.isEmpty(), qPrintable(failures.join(QStringLiteral("; "))));
    QVERIFY2(startedIds.size() < 82, qPrintable(QString::number(startedIds.size())));  // coalesced
    QVERIFY(cancels > 0);
  }
  // Destroying the controller with a run in flight and more queued cancels the run, joins the
  // engine thread promptly and calls nobody back afterwards; also right after posting.
  void destroyWhileRunning() {
    const auto model = test::randomModel();
    const std::string prompt = test::longPrompt().toStdString();
    QObject receiver;
    int calls = 0;
    for (int round = 0; round < 3; ++round) {
      auto c = std::make_unique<EngineController>(BackendKind::kCpu, 2);
      QSignalSpy started(c.get(), &EngineController::started);
      connect(c.get(), &EngineController::progress, &receiver, [&] { ++calls; });
      connect(c.get(), &EngineController::cancelled, &receiver, [&] { ++calls; });
      c->setModel(model);
      ControlState s;
      s.maxTokens = 400;  // long enough to be cut short
      c->run(s.toRequest(prompt));
      c->run(s.toRequest(prompt), QStringLiteral("other"));
      if (round == 1) QTRY_COMPARE_WITH_TIMEOUT(started.count(), 1, 30000);  // mid-run
      if (round == 2) QTest::qWait(20);
      QElapsedTimer timer;
      timer.start();
      c.reset();
      QVERIFY2(timer.elapsed() < 30000, qPrintable(QString::number(timer.elapsed())));
      const int before = calls;
      QTest::qWait(50);
      QCOMPARE(calls, before);
    }
  }
};

QTEST_GUILESS_MAIN(TestEngineController)
#include "tst_enginecontroller.moc"
