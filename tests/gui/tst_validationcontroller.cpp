// SPDX-License-Identifier: Apache-2.0
// The validated export without widgets: ValidationController on the small generated dataset and
// random-weight model of the engine's validation tests (tests/unit/validation_fixture.h), driven
// through the Workbench as the dialog drives it; GateReportModel under QAbstractItemModelTester.
#include <QAbstractItemModelTester>
#include <QFileInfo>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "app/gui/models/gate_report_model.h"
#include "app/gui/models/workbench.h"
#include "tests/unit/validation_fixture.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {

const sinkscope::test::Fixture& data() {
  return sinkscope::test::fixture();
}

// A workbench holding the fixture's model, with sparse settings that skip tiles on it.
std::unique_ptr<Workbench> makeWorkbench() {
  auto wb = std::make_unique<Workbench>(BackendKind::kCpu, 2);
  wb->setAutoRun(false);
  QSignalSpy loaded(wb.get(), &Workbench::modelLoaded);
  wb->setModel(data().model);
  if (!loaded.wait(30000)) return nullptr;
  ControlState s;
  s.inference.attention.threshold_prefill = 0.05;
  s.inference.attention.threshold_decode = 0.01;
  s.inference.attention.min_sequence_length = 32;
  wb->setControls(s);
  return wb;
}

ValidationJob fastJob(const Workbench& wb, int quick = 0) {
  ValidationJob job = wb.validationJob(QString::fromStdString(data().manifest.string()), quick);
  job.options.gen_tokens = 6;
  job.options.stream_chunk = 64;
  job.options.passkey_tokens = 4;
  return job;
}

}  // namespace

class TestValidationController : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void runsShowsGatesAndWritesAConfigThatLoadsBack() {
    auto wb = makeWorkbench();
    QVERIFY(wb);
    ValidationController* v = wb->validation();
    QSignalSpy finished(v, &ValidationController::finished);
    QSignalSpy failed(v, &ValidationController::failed);
    QSignalSpy progress(v, &ValidationController::progress);
    QVERIFY(v->start(fastJob(*wb)));
    QVERIFY(v->running());
    QVERIFY(!v->start(fastJob(*wb)));  // one at a time
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty() || !failed.isEmpty(), 120000);
    QVERIFY2(failed.isEmpty(),
             failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
    QVERIFY(!v->running());
    QVERIFY(!progress.isEmpty());
    const auto last = progress.last().first().value<ValidationStatus>();
    QCOMPARE(last.sample, last.samples);
    QCOMPARE(last.samples, 6);

    const ValidationOutcomePtr out = v->outcome();
    QVERIFY(out);
    QCOMPARE(finished.first().first().value<ValidationOutcomePtr>(), out);
    QCOMPARE(out->run.samples.size(), size_t(6));
    QVERIFY(out->run.total.positions > 0);
    QVERIFY(std::isfinite(out->run.results.kl_mean));
    QVERIFY(std::isfinite(out->run.results.passkey_accuracy));
    GateReportModel gates;
    QAbstractItemModelTester tester(&gates, QAbstractItemModelTester::FailureReportingMode::QtTest);
    gates.setReport(out->run.gates);
    QCOMPARE(gates.rowCount(), 4);  // perplexity, ROUGE-L, top-1, passkey
    for (int row = 0; row < gates.rowCount(); ++row) {
      const bool passed =
          gates.data(gates.index(row, GateReportModel::Result), Qt::UserRole).toBool();
      QCOMPARE(gates.data(gates.index(row, GateReportModel::Result)).toString(),
               passed ? QStringLiteral("PASS") : QStringLiteral("FAIL"));
      QVERIFY(!gates.data(gates.index(row, GateReportModel::Reason)).toString().isEmpty());
    }

    // The validated config: the settings, the evidence, provenance; written atomically.
    const SinkScopeConfig& c = out->validated;
    QVERIFY(c.validation.has_value());
    QCOMPARE(c.validation->passed, out->run.gates.passed);
    QCOMPARE(c.validation->dataset.name, std::string("unit"));
    QCOMPARE(c.validation->dataset.samples, int64_t(6));
    QCOMPARE(c.validation->dataset.sha256, out->dataset.sha256);
    QCOMPARE(c.model.sha256, data().model->sha256());
    QCOMPARE(c.inference.attention.min_sequence_length, int64_t(32));
    QVERIFY(!c.provenance.device.empty());
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("validated.yaml"));
    QCOMPARE(ValidationController::write(*out, path), QString());
    const ConfigParseResult back = load_config_file(path.toStdString());
    QVERIFY(back.ok());
    QVERIFY(back.config == c);
    // Importing it restores the controls it was made from.
    Workbench other(BackendKind::kCpu, 2);
    other.setAutoRun(false);
    QCOMPARE(other.importConfig(path), QString());
    QCOMPARE(other.controls(), wb->controls());
    // An unwritable target is an error, not a crash.
    QVERIFY(!ValidationController::write(*out, dir.filePath(QStringLiteral("no/such/dir/x.yaml")))
                 .isEmpty());
  }

  void quickCheckIsLabelledASubset() {
    auto wb = makeWorkbench();
    QVERIFY(wb);
    QSignalSpy finished(wb->validation(), &ValidationController::finished);
    QSignalSpy failed(wb->validation(), &ValidationController::failed);
    QVERIFY(wb->validation()->start(fastJob(*wb, 1)));
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty() || !failed.isEmpty(), 120000);
    QVERIFY(failed.isEmpty());
    const ValidationOutcomePtr out = wb->validation()->outcome();
    QCOMPARE(out->dataset.samples.size(), size_t(2));  // one short text, one passkey task
    const DatasetInfo& info = out->validated.validation->dataset;
    QVERIFY2(QString::fromStdString(info.name).contains(QStringLiteral("subset")),
             info.name.c_str());
    QCOMPARE(info.samples, int64_t(2));
  }

  void cancelWritesNothingAndTheControllerStaysUsable() {
    auto wb = makeWorkbench();
    QVERIFY(wb);
    ValidationController* v = wb->validation();
    QSignalSpy finished(v, &ValidationController::finished);
    QSignalSpy cancelled(v, &ValidationController::cancelled);
    QSignalSpy failed(v, &ValidationController::failed);
    QVERIFY(v->start(fastJob(*wb)));
    v->cancel();
    QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 60000);
    QCOMPARE(finished.count(), 0);
    QCOMPARE(failed.count(), 0);
    QVERIFY(!v->running());
    QVERIFY(!v->outcome());  // nothing to write
    // The next validation runs to the end.
    QVERIFY(v->start(fastJob(*wb, 1)));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
    QCOMPARE(cancelled.count(), 1);
    QVERIFY(v->outcome());
  }

  void destroyedWhileRunningDoesNotCallBack() {
    auto wb = makeWorkbench();
    QVERIFY(wb);
    QVERIFY(wb->validation()->start(fastJob(*wb)));
    QTest::qWait(50);
    wb.reset();         // cancels and joins the worker
    QTest::qWait(100);  // any emission still queued would land here
  }

  void missingDatasetSaysHowToGetIt() {
    QTemporaryDir dir;
    const QByteArray missing = dir.filePath(QStringLiteral("nowhere/manifest.json")).toUtf8();
    qputenv("SINKSCOPE_DATASET", missing);
    const QString msg = ValidationController::missingDatasetMessage({});
    QVERIFY(msg.contains(QStringLiteral("bash scripts/setup.sh --eval-data")));
    QVERIFY(msg.contains(QString::fromUtf8(missing)));
    auto wb = makeWorkbench();
    QVERIFY(wb);
    QSignalSpy failed(wb->validation(), &ValidationController::failed);
    QVERIFY(wb->validation()->start(wb->validationJob()));
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
    QVERIFY(failed.first().first().toString().contains(QStringLiteral("--eval-data")));
    qunsetenv("SINKSCOPE_DATASET");
    // A chosen manifest that does not exist, and one that is not a manifest: messages.
    QVERIFY(ValidationController::missingDatasetMessage(QString::fromUtf8(missing))
                .contains(QStringLiteral("does not exist")));
    const QString bad = dir.filePath(QStringLiteral("bad.json"));
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{\"format\": \"sinkscope-dataset-1\", \"samples\": 3}");
    f.close();
    QVERIFY(wb->validation()->start(wb->validationJob(bad)));
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 2, 30000);
    QVERIFY(!failed.last().first().toString().isEmpty());
  }
};

QTEST_GUILESS_MAIN(TestValidationController)
#include "tst_validationcontroller.moc"
