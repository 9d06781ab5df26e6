// SPDX-License-Identifier: Apache-2.0
// File > Export config as a person uses it, offscreen: the dialog validates on the generated
// dataset and random-weight model (tests/unit/validation_fixture.h), shows the gates and writes
// the validated config; a failed gate writes passed: false only when confirmed; Stop writes
// nothing; a missing default dataset says how to get it.
#include <QCheckBox>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include "app/gui/panels/validation_dialog.h"
#include "tests/unit/validation_fixture.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {

const sinkscope::test::Fixture& data() {
  return sinkscope::test::fixture();
}

std::unique_ptr<Workbench> makeWorkbench(const ControlState& s) {
  auto wb = std::make_unique<Workbench>(BackendKind::kCpu, 2);
  wb->setAutoRun(false);
  QSignalSpy loaded(wb.get(), &Workbench::modelLoaded);
  wb->setModel(data().model);
  if (!loaded.wait(30000)) return nullptr;
  wb->setControls(s);
  return wb;
}

template <typename T>
T* child(QObject* parent, const char* name) {
  return parent->findChild<T*>(QLatin1String(name));
}

QString statusOf(ValidationDialog& d) {
  return child<QLabel>(&d, "status")->text();
}

// Fills in the fixture's dataset (quick: one short text and one passkey task) and presses
// "Validate and export".
void startValidation(ValidationDialog& d, bool quick) {
  child<QLineEdit>(&d, "manifest")->setText(QString::fromStdString(data().manifest.string()));
  child<QCheckBox>(&d, "quick")->setChecked(quick);
  child<QSpinBox>(&d, "quickPerClass")->setValue(1);
  QTest::mouseClick(child<QPushButton>(&d, "validate"), Qt::LeftButton);
}

}  // namespace

class TestValidationDialog : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void passingSettingsAreWrittenWithTheirGates() {
    ControlState dense;
    dense.setSparse(false);  // the variant is the baseline: every gate passes
    auto wb = makeWorkbench(dense);
    QVERIFY(wb);
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("validated.yaml"));
    ValidationDialog d(wb.get(), out);
    QSignalSpy written(&d, &ValidationDialog::written);
    startValidation(d, false);
    QVERIFY(wb->validation()->running());
    QVERIFY(!child<QPushButton>(&d, "validate")->isEnabled());
    QTRY_COMPARE_WITH_TIMEOUT(written.count(), 1, 120000);
    QCOMPARE(written.first().at(0).toString(), out);
    QVERIFY(written.first().at(1).toBool());
    QVERIFY2(statusOf(d).contains(QStringLiteral("PASSED")), qPrintable(statusOf(d)));
    QCOMPARE(child<QTableView>(&d, "gates")->model()->rowCount(), 4);
    const ConfigParseResult back = load_config_file(out.toStdString());
    QVERIFY(back.ok());
    QVERIFY(back.config == wb->validation()->outcome()->validated);
    QVERIFY(back.config.validation && back.config.validation->passed);
    QCOMPARE(back.config.validation->dataset.samples, int64_t(6));
    QVERIFY(child<QPushButton>(&d, "validate")->isEnabled());
  }

  void aFailedGateIsWrittenOnlyWhenConfirmed() {
    ControlState harsh;  // a tiny window and a high lambda: the random model's outputs change
    harsh.inference.attention.threshold_prefill = 0.5;
    harsh.inference.attention.threshold_decode = 0.5;
    harsh.setSlidingWindow(true);
    harsh.inference.cache.window_size = 8;
    harsh.inference.cache.sink_keep_count = 0;
    auto wb = makeWorkbench(harsh);
    QVERIFY(wb);
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("failed.yaml"));
    for (bool confirm : {false, true}) {
      ValidationDialog d(wb.get(), out);
      QStringList asked;
      d.setConfirmWrite([&](const QString& gates) {
        asked << gates;
        return confirm;
      });
      QSignalSpy finished(wb->validation(), &ValidationController::finished);
      startValidation(d, true);
      QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
      QVERIFY2(!wb->validation()->outcome()->run.gates.passed, "expected a gate to fail");
      QCOMPARE(asked.size(), 1);
      QVERIFY(!asked.first().isEmpty());
      QCOMPARE(QFileInfo::exists(out), confirm);
      QVERIFY(statusOf(d).contains(confirm ? QStringLiteral("passed: false")
                                           : QStringLiteral("nothing was written")));
    }
    const ConfigParseResult back = load_config_file(out.toStdString());
    QVERIFY(back.ok());
    QVERIFY(back.config.validation && !back.config.validation->passed);
    QVERIFY(QString::fromStdString(back.config.validation->dataset.name)
                .contains(QStringLiteral("subset")));
  }

  void exportWithoutValidationClearsTheOldGates() {
    ControlState dense;
    dense.setSparse(false);
    auto wb = makeWorkbench(dense);
    QVERIFY(wb);
    QTemporaryDir dir;
    ValidationDialog d(wb.get(), dir.filePath(QStringLiteral("validated.yaml")));
    QSignalSpy written(&d, &ValidationDialog::written);
    startValidation(d, true);
    QTRY_COMPARE_WITH_TIMEOUT(written.count(), 1, 120000);
    QVERIFY(child<QTableView>(&d, "gates")->model()->rowCount() > 0);
    child<QLineEdit>(&d, "out")->setText(dir.filePath(QStringLiteral("plain.yaml")));
    QTest::mouseClick(child<QPushButton>(&d, "unvalidated"), Qt::LeftButton);
    QCOMPARE(written.count(), 2);
    QCOMPARE(child<QTableView>(&d, "gates")->model()->rowCount(), 0);
    QVERIFY(statusOf(d).contains(QStringLiteral("not validated")));
  }

  void stopWritesNothing() {
    auto wb = makeWorkbench(ControlState{});
    QVERIFY(wb);
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("never.yaml"));
    ValidationDialog d(wb.get(), out);
    QSignalSpy cancelled(wb->validation(), &ValidationController::cancelled);
    QSignalSpy finished(wb->validation(), &ValidationController::finished);
    startValidation(d, false);
    QPushButton* stop = child<QPushButton>(&d, "cancel");
    QCOMPARE(stop->text(), QStringLiteral("Stop"));
    QTest::mouseClick(stop, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 60000);
    QCOMPARE(finished.count(), 0);
    QVERIFY(!QFileInfo::exists(out));
    QVERIFY(statusOf(d).contains(QStringLiteral("nothing was written")));
    QVERIFY(child<QPushButton>(&d, "validate")->isEnabled());
  }

  void missingDefaultDatasetSaysHowToGetIt() {
    QTemporaryDir dir;
    qputenv("SINKSCOPE_DATASET", dir.filePath(QStringLiteral("absent/manifest.json")).toUtf8());
    auto wb = makeWorkbench(ControlState{});
    QVERIFY(wb);
    ValidationDialog d(wb.get(), dir.filePath(QStringLiteral("x.yaml")));
    QLabel* hint = child<QLabel>(&d, "datasetHint");
    QVERIFY(hint->text().contains(QStringLiteral("bash scripts/setup.sh --eval-data")));
    QTest::mouseClick(child<QPushButton>(&d, "validate"), Qt::LeftButton);
    QVERIFY(!wb->validation()->running());  // nothing started
    QVERIFY(statusOf(d).contains(QStringLiteral("--eval-data")));
    // Choosing a manifest clears the hint and the error in the status line.
    child<QLineEdit>(&d, "manifest")->setText(QString::fromStdString(data().manifest.string()));
    QVERIFY(hint->text().isEmpty());
    QVERIFY2(!statusOf(d).contains(QStringLiteral("--eval-data")), qPrintable(statusOf(d)));
    qunsetenv("SINKSCOPE_DATASET");
  }

  void exportWithoutValidationStillWorks() {
    auto wb = makeWorkbench(ControlState{});
    QVERIFY(wb);
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("plain.yaml"));
    ValidationDialog d(wb.get(), out);
    QSignalSpy written(&d, &ValidationDialog::written);
    QTest::mouseClick(child<QPushButton>(&d, "unvalidated"), Qt::LeftButton);
    QCOMPARE(written.count(), 1);
    QVERIFY(!written.first().at(1).toBool());
    const ConfigParseResult back = load_config_file(out.toStdString());
    QVERIFY(back.ok());
    QVERIFY(!back.config.validation.has_value());
  }
};

QTEST_MAIN(TestValidationDialog)
#include "tst_validationdialog.moc"
