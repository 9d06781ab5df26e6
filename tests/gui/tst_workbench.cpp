// SPDX-License-Identifier: Apache-2.0
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "app/gui/models/workbench.h"
#include "tests/gui/test_model.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {

void expectAllViewsFilled(Workbench& wb) {
  QVERIFY(wb.tokens()->rowCount() > 0);
  QVERIFY(wb.headStats()->rowCount() > 0);
  QVERIFY(wb.attentionMap()->hasData());
  QVERIFY(wb.sinks()->hasData());
  QVERIFY(!wb.sinks()->firstMass().empty());
  QVERIFY(!wb.sinks()->recommendation().isEmpty());
  QVERIFY(wb.sparsity()->hasData());
  QVERIFY(wb.timeline()->hasData());
  QVERIFY(wb.timeline()->summary()->rowCount() > 0);
  QVERIFY(wb.compare()->hasData());
  QVERIFY(!wb.compare()->comparison().klPerToken.empty());
}

}  // namespace

class TestWorkbench : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  // The prefill's partial results reach the Sparsity view before the run ends; the final result
  // replaces them, and the other views only ever see final results.
  void partialResultsFillTheSparsityViewFirst() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setDebounceMs(20);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    QSignalSpy partial(&wb, &Workbench::partialResult);
    bool sparsityWasPartial = false, mapSawPartial = false;
    connect(wb.sparsity(), &SparsityView::changed, this,
            [&] { sparsityWasPartial = sparsityWasPartial || wb.sparsity()->isPartial(); });
    connect(wb.attentionMap(), &AttentionMapView::changed, this, [&] {
      mapSawPartial = mapSawPartial || (wb.attentionMap()->result() && wb.attentionMap()->result()->partial);
    });
    wb.setPrompt(test::longPrompt());
    wb.setModel(test::randomModel());
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
    QVERIFY(partial.count() >= 1);
    const auto first = partial.first().first().value<RunResultPtr>();
    QVERIFY(first->partial);
    QCOMPARE(first->id, wb.lastResult()->id);
    QVERIFY(sparsityWasPartial);
    QVERIFY(!mapSawPartial);
    QVERIFY(!wb.sparsity()->isPartial());  // the final result replaced the partial one
    QCOMPARE(wb.sparsity()->layersReached(), wb.lastResult()->nLayer);
  }
  void controlChangeRerunsAndFillsEveryView() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setDebounceMs(50);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    wb.setPrompt(test::longPrompt());
    wb.setModel(test::randomModel());
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);  // the first run follows the load
    expectAllViewsFilled(wb);
    QSignalSpy mapChanged(wb.attentionMap(), &AttentionMapView::changed);
    ControlState s = wb.controls();
    s.inference.attention.threshold_prefill = 0.25;
    s.layer = 1;
    s.head = 1;
    wb.setControls(s);
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 2, 30000);
    QCOMPARE(mapChanged.count(), 1);
    QCOMPARE(wb.lastResult()->request.attention.threshold_prefill, 0.25);
    QCOMPARE(wb.attentionMap()->map().layer, 1);
    expectAllViewsFilled(wb);
    // A burst of changes within the debounce runs once, with the newest settings.
    for (int i = 0; i < 5; ++i) {
      s.inference.cache.window_size = 100 + i;
      s.setSlidingWindow(true);
      wb.setControls(s);
    }
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 3, 30000);
    QTest::qWait(300);
    QCOMPARE(ready.count(), 3);
    QCOMPARE(wb.lastResult()->request.cache.window_size, int64_t(104));
  }
  void configExportLoadsBackIdentically() {
    Workbench wb(BackendKind::kCpu, 2);
    ControlState s;
    s.inference.attention.threshold_prefill = 0.0375;
    s.inference.attention.threshold_decode = 0.001;
    s.setSlidingWindow(true);
    s.inference.cache.window_size = 300;
    s.inference.cache.sink_keep_count = 6;
    s.setKvQuant(KvQuantChoice::kInt8);
    wb.setControls(s);
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("c.yaml"));
    QString note;
    QCOMPARE(wb.exportConfig(path, &note), QString());
    QVERIFY(note.contains(QStringLiteral("not validated")));
    const ConfigParseResult r = load_config_file(path.toStdString());
    QVERIFY(r.ok());
    QVERIFY(!r.config.validation.has_value());
    SinkScopeConfig expected = wb.currentConfig();
    expected.provenance.created = r.config.provenance.created;  // the clock moved on
    QVERIFY(r.config == expected);
    // Import into a fresh workbench restores the same controls.
    Workbench other(BackendKind::kCpu, 2);
    QCOMPARE(other.importConfig(path), QString());
    QCOMPARE(other.controls(), s);
  }
  void hybridControlChangesTheRunAndTheExport() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setDebounceMs(20);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    wb.setPrompt(test::longPrompt());
    wb.setModel(test::randomModel());
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
    QCOMPARE(wb.lastResult()->request.attention.min_sequence_length, 0);
    ControlState s = wb.controls();
    s.inference.attention.min_sequence_length = 100000;  // longer than the prompt: attention stays dense
    wb.setControls(s);
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 2, 30000);
    QCOMPARE(wb.lastResult()->request.attention.min_sequence_length, 100000);
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("hybrid.yaml"));
    QCOMPARE(wb.exportConfig(path), QString());
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QVERIFY(f.readAll().contains("min_sequence_length: 100000"));
    Workbench other(BackendKind::kCpu, 2);
    QCOMPARE(other.importConfig(path), QString());
    QCOMPARE(other.controls().inference.attention.min_sequence_length, 100000);
  }
  void badConfigNamesTheKey() {
    Workbench wb(BackendKind::kCpu, 2);
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("bad.yaml"));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("sinkscope_config_version: 1\ninference:\n  cache:\n    window_size: 0\n    bogus_key: 3\n");
    f.close();
    const ControlState before = wb.controls();
    const QString err = wb.importConfig(path);
    QVERIFY(err.contains(QStringLiteral("inference.cache.window_size")));
    QVERIFY(err.contains(QStringLiteral("bogus_key")));
    QCOMPARE(wb.controls(), before);  // nothing applied
    QVERIFY(!wb.importConfig(dir.filePath(QStringLiteral("missing.yaml"))).isEmpty());
  }
  void badModelShowsError() {
    Workbench wb(BackendKind::kCpu, 2);
    QSignalSpy failed(&wb, &Workbench::modelFailed);
    wb.loadModel(QStringLiteral(SINKSCOPE_SOURCE_DIR "/README.md"));
    QTRY_COMPARE(failed.count(), 1);
    QVERIFY(!wb.modelReady());
    wb.runNow();  // no model: nothing happens, nothing crashes
    QVERIFY(!wb.running());
  }
  void failedLoadKeepsThePreviousModel() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setDebounceMs(20);
    QSignalSpy loaded(&wb, &Workbench::modelLoaded);
    QSignalSpy failed(&wb, &Workbench::modelFailed);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    wb.setPrompt(test::longPrompt());
    wb.loadModel(test::randomModelPath());
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
    QTemporaryDir dir;
    const QString junk = dir.filePath(QStringLiteral("junk.gguf"));
    {
      QFile f(junk);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QByteArray(4096, '\x5a'));
    }
    wb.loadModel(junk);
    QTRY_COMPARE(failed.count(), 1);
    QVERIFY(failed.at(0).at(1).toString().size() > 10);  // the engine's reason
    QVERIFY(wb.modelReady());
    QCOMPARE(wb.modelPath(), test::randomModelPath());
    wb.runNow();  // the previous model still runs
    QVERIFY(wb.running());
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 2, 30000);
    QCOMPARE(loaded.count(), 1);
  }
  // Another GPU weight mode remakes the backends: the model stays, modelLoaded comes again and a
  // run follows (on the CPU backend the choice itself changes nothing else); the same choice
  // again does nothing.
  void gpuChoiceRemakesTheBackends() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setDebounceMs(20);
    QSignalSpy loaded(&wb, &Workbench::modelLoaded);
    QSignalSpy failed(&wb, &Workbench::modelFailed);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    wb.setPrompt(test::longPrompt());
    wb.loadModel(test::randomModelPath());
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
    QCOMPARE(wb.gpuChoice().weights, GpuWeights::kAuto);
    wb.setGpuChoice({GpuWeights::kNative, GpuActivations::kInt8});
    QCOMPARE(wb.gpuChoice().weights, GpuWeights::kNative);
    QCOMPARE(wb.gpuChoice().activations, GpuActivations::kInt8);
    QVERIFY(!wb.modelReady());  // until the new backends are made
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 2, 30000);
    QCOMPARE(loaded.at(1).at(0).toString(), test::randomModelPath());
    QVERIFY(wb.modelReady());
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 2, 30000);
    wb.setGpuChoice({GpuWeights::kNative, GpuActivations::kInt8});
    QTest::qWait(300);
    QCOMPARE(loaded.count(), 2);
    QCOMPARE(ready.count(), 2);
    QCOMPARE(failed.count(), 0);
  }
  void staleStateIsMarkedWithItsReason() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    QSignalSpy failedRun(&wb, &Workbench::runFailed);
    QSignalSpy refused(&wb, &Workbench::runRefused);
    QSignalSpy loaded(&wb, &Workbench::modelLoaded);
    wb.setPrompt(test::longPrompt());
    wb.setModel(test::randomModel());
    QTRY_COMPARE(loaded.count(), 1);
    wb.runNow();
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
    QVERIFY(!wb.viewsStale());
    ControlState s = wb.controls();
    s.inference.attention.threshold_prefill = 0.5;
    wb.setControls(s);  // not run (auto-run is off)
    QVERIFY(wb.viewsStale());
    QVERIFY2(wb.staleReason().contains(QStringLiteral("controls changed")), qPrintable(wb.staleReason()));
    s.layer = 999;  // outside the model: the run fails
    wb.setControls(s);
    wb.runNow();
    QTRY_COMPARE_WITH_TIMEOUT(failedRun.count(), 1, 30000);
    QVERIFY(wb.viewsStale());
    QVERIFY2(wb.staleReason().contains(QStringLiteral("failed")), qPrintable(wb.staleReason()));
    s.layer = 0;
    wb.setControls(s);
    wb.runNow();
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 2, 30000);
    QVERIFY(!wb.viewsStale());
    // An empty prompt is refused with a message, and the views say they are stale.
    wb.setPrompt(QStringLiteral("   "));
    wb.runNow();
    QCOMPARE(refused.count(), 1);
    QVERIFY(refused.at(0).at(0).toString().contains(QStringLiteral("empty")));
    QVERIFY(!wb.running());
    QVERIFY(wb.staleReason().contains(QStringLiteral("prompt changed")));
  }
  void defaultModelRun() {
    const QString path = test::defaultModelPath();
    if (path.isEmpty()) QSKIP("the default model is not present (bash scripts/setup.sh fetches it)");
    Workbench wb(BackendKind::kCpu, 2);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    QSignalSpy failed(&wb, &Workbench::runFailed);
    wb.setPrompt(QStringLiteral("Why do language models attend to the first token?"));
    ControlState s;
    s.maxTokens = 4;
    wb.setControls(s);
    wb.loadModel(path);
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 120000);
    QCOMPARE(failed.count(), 0);
    expectAllViewsFilled(wb);
    QCOMPARE(wb.lastResult()->nLayer, 30);
  }
};

QTEST_GUILESS_MAIN(TestWorkbench)
#include "tst_workbench.moc"
