// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/validation_dialog.h"

#include <QApplication>
#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTableView>
#include <QVBoxLayout>

#include <cmath>

namespace sinkscope::gui {

namespace {

QString duration(double s) {
  if (s < 90) return QObject::tr("%1 s").arg(std::max(1, int(std::lround(s))));
  if (s < 5400) return QObject::tr("%1 min").arg(int(std::lround(s / 60)));
  return QObject::tr("%1 h %2 min").arg(int(s / 3600)).arg(int(std::fmod(s, 3600) / 60));
}

QString num(double v, double scale, int prec) {
  return std::isnan(v) ? QStringLiteral("-") : QString::number(v * scale, 'f', prec);
}

// A line edit with a "Browse..." button.
QHBoxLayout* withBrowse(QLineEdit* edit, QPushButton* browse) {
  auto* row = new QHBoxLayout;
  row->addWidget(edit, 1);
  row->addWidget(browse);
  return row;
}

}  // namespace

ValidationDialog::ValidationDialog(Workbench* wb, const QString& outPath, QWidget* parent)
    : QDialog(parent), m_wb(wb) {
  setWindowTitle(tr("Export config"));
  auto* intro = new QLabel(
      tr("Validation runs the dense baseline (same model, dense attention, full cache) and the "
         "current settings on a dataset, applies the quality gates and writes the config with "
         "the evidence. It runs in the background on the CPU reference backend; Stop ends it "
         "and writes nothing."),
      this);
  intro->setWordWrap(true);

  m_out = new QLineEdit(outPath, this);
  auto* browseOut = new QPushButton(tr("Browse..."), this);
  m_manifest = new QLineEdit(this);
  m_manifest->setPlaceholderText(
      tr("default dataset (%1)").arg(ValidationController::manifestFor({})));
  m_manifest->setClearButtonEnabled(true);
  auto* browseManifest = new QPushButton(tr("Browse..."), this);
  m_quick = new QCheckBox(tr("Quick check: short texts and passkey tasks only, at most"), this);
  m_quick->setToolTip(
      tr("A fast subset; the written file names the dataset as a subset, so it "
         "is not mistaken for a full validation"));
  m_quickN = new QSpinBox(this);
  m_quickN->setRange(1, 1000);
  m_quickN->setValue(4);
  m_quickN->setSuffix(tr(" per class"));
  auto* quickRow = new QHBoxLayout;
  quickRow->addWidget(m_quick);
  quickRow->addWidget(m_quickN);
  quickRow->addStretch(1);
  m_datasetHint = new QLabel(this);
  m_datasetHint->setWordWrap(true);
  m_datasetHint->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_datasetHint->setStyleSheet(QStringLiteral("color: #b00020"));
  auto* form = new QFormLayout;
  form->addRow(tr("Write to"), withBrowse(m_out, browseOut));
  form->addRow(tr("Dataset"), withBrowse(m_manifest, browseManifest));
  form->addRow(QString(), quickRow);
  form->addRow(QString(), m_datasetHint);

  m_progress = new QProgressBar(this);
  m_progress->setRange(0, 1000);
  m_progress->setValue(0);
  m_progress->setFormat(tr("not started"));
  m_status = new QLabel(this);
  m_status->setWordWrap(true);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_gateView = new QTableView(this);
  m_gateView->setModel(&m_gates);
  m_gateView->verticalHeader()->hide();
  m_gateView->horizontalHeader()->setStretchLastSection(true);
  m_gateView->setSelectionMode(QAbstractItemView::NoSelection);
  m_gateView->setMinimumHeight(130);
  m_results = new QLabel(this);
  m_results->setWordWrap(true);
  m_results->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* buttons = new QDialogButtonBox(this);
  m_validate = buttons->addButton(tr("Validate and export"), QDialogButtonBox::AcceptRole);
  m_unvalidated = buttons->addButton(tr("Export without validation"), QDialogButtonBox::ActionRole);
  m_cancel = buttons->addButton(QDialogButtonBox::Cancel);
  m_validate->setDefault(true);

  auto* lay = new QVBoxLayout(this);
  lay->addWidget(intro);
  lay->addLayout(form);
  lay->addWidget(m_progress);
  lay->addWidget(m_status);
  lay->addWidget(m_gateView, 1);
  lay->addWidget(m_results);
  lay->addWidget(buttons);
  resize(720, 520);
  m_inputs = {m_out,   browseOut, m_manifest, browseManifest,
              m_quick, m_quickN,  m_validate, m_unvalidated};

  connect(browseOut, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getSaveFileName(this, tr("Export config"), m_out->text(),
                                                   tr("SinkScope config (*.yaml)"));
    if (!f.isEmpty()) m_out->setText(f);
  });
  connect(browseManifest, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Dataset manifest"), m_manifest->text(),
                                                   tr("Dataset manifest (*.json);;All files (*)"));
    if (!f.isEmpty()) m_manifest->setText(f);
  });
  connect(m_manifest, &QLineEdit::textChanged, this, &ValidationDialog::refreshDatasetHint);
  connect(m_quick, &QCheckBox::toggled, m_quickN, &QWidget::setEnabled);
  connect(m_validate, &QPushButton::clicked, this, &ValidationDialog::startValidation);
  connect(m_unvalidated, &QPushButton::clicked, this, &ValidationDialog::exportUnvalidated);
  connect(m_cancel, &QPushButton::clicked, this, &ValidationDialog::reject);

  ValidationController* v = m_wb->validation();
  connect(v, &ValidationController::progress, this, [this](const ValidationStatus& s) {
    m_progress->setValue(int(s.fraction * 1000));
    QString text = tr("sample %1 of %2").arg(std::min(s.sample + 1, s.samples)).arg(s.samples);
    if (!s.current.isEmpty() && s.sample < s.samples)
      text += QStringLiteral(" (%1)").arg(s.current);
    text += QStringLiteral(" -- %p%");
    if (s.etaSeconds >= 0) text += tr(" -- about %1 left").arg(duration(s.etaSeconds));
    m_progress->setFormat(text);
  });
  connect(v, &ValidationController::finished, this, &ValidationDialog::onFinished);
  connect(v, &ValidationController::failed, this, [this](const QString& msg) {
    setBusy(false);
    m_progress->setFormat(tr("failed"));
    setStatus(tr("Validation failed; nothing was written.\n%1").arg(msg), true);
  });
  connect(v, &ValidationController::cancelled, this, [this] {
    setBusy(false);
    m_progress->setValue(0);
    m_progress->setFormat(tr("cancelled"));
    setStatus(tr("Cancelled; nothing was written."));
  });
  m_confirm = [this](const QString& summary) {
    if (qApp->property("sinkscopeNoDialogs").toBool()) return false;
    return QMessageBox::question(this, tr("A quality gate failed"),
                                 tr("These settings fail a quality gate:\n%1\n\nWrite the config "
                                    "anyway? It records the evidence and says passed: false.")
                                     .arg(summary),
                                 QMessageBox::Yes | QMessageBox::No,
                                 QMessageBox::No) == QMessageBox::Yes;
  };
  for (auto [w, name] : {std::pair<QWidget*, const char*>{m_out, "out"},
                         {m_manifest, "manifest"},
                         {m_quick, "quick"},
                         {m_quickN, "quickPerClass"},
                         {m_datasetHint, "datasetHint"},
                         {m_progress, "progress"},
                         {m_status, "status"},
                         {m_gateView, "gates"},
                         {m_validate, "validate"},
                         {m_unvalidated, "unvalidated"},
                         {m_cancel, "cancel"}})
    w->setObjectName(QLatin1String(name));
  m_quickN->setEnabled(false);
  refreshDatasetHint();
  setBusy(v->running());
  if (v->running()) setStatus(tr("A validation is still stopping; wait a moment."));
}

QString ValidationDialog::chosenManifest() const {
  return m_manifest->text().trimmed();
}

void ValidationDialog::refreshDatasetHint() {
  const QString missing = ValidationController::missingDatasetMessage(chosenManifest());
  m_datasetHint->setText(missing);
  m_datasetHint->setVisible(!missing.isEmpty());
  // A "dataset missing" error in the status line goes once another dataset is chosen.
  if (m_statusIsDatasetError && missing.isEmpty()) setStatus(QString());
}

void ValidationDialog::setBusy(bool busy) {
  for (QWidget* w : m_inputs) w->setEnabled(!busy);
  m_quickN->setEnabled(!busy && m_quick->isChecked());
  m_cancel->setEnabled(true);
  m_cancel->setText(busy ? tr("Stop") : tr("Close"));
  m_cancel->setToolTip(busy ? tr("Stop the validation; nothing is written") : QString());
}

void ValidationDialog::setStatus(const QString& text, bool error) {
  m_status->setStyleSheet(error ? QStringLiteral("color: #b00020") : QString());
  m_status->setText(text);
  m_statusIsDatasetError = false;
}

void ValidationDialog::startValidation() {
  if (m_out->text().trimmed().isEmpty()) {
    setStatus(tr("Choose where to write the config first."), true);
    return;
  }
  if (const QString missing = ValidationController::missingDatasetMessage(chosenManifest());
      !missing.isEmpty()) {
    setStatus(missing, true);
    m_statusIsDatasetError = true;
    return;
  }
  if (!m_wb->modelReady()) {
    setStatus(tr("No model is loaded; load one first (File > Open model)."), true);
    return;
  }
  m_gates.clear();
  m_results->clear();
  if (!m_wb->validation()->start(
          m_wb->validationJob(chosenManifest(), m_quick->isChecked() ? m_quickN->value() : 0))) {
    setStatus(tr("A validation is still stopping; try again in a moment."), true);
    return;
  }
  setBusy(true);
  m_progress->setValue(0);
  m_progress->setFormat(tr("loading the dataset"));
  setStatus(tr("Validating against the dense baseline..."));
}

void ValidationDialog::onFinished(const ValidationOutcomePtr& outcome) {
  setBusy(false);
  m_progress->setValue(m_progress->maximum());
  m_progress->setFormat(tr("done in %1").arg(duration(outcome->run.seconds)));
  m_gates.setReport(outcome->run.gates);
  m_gateView->resizeColumnsToContents();
  const ValidationResults& r = outcome->run.results;
  m_results->setText(
      tr("%1 samples of %2 on %3. Perplexity change %4 %, mean KL %5, top-1 agreement %6 %, "
         "ROUGE-L %7, passkey %8 % (dense %9 %), sparsity prefill %10 % / decode %11 %, peak KV "
         "%12 MiB.")
          .arg(outcome->dataset.samples.size())
          .arg(QString::fromStdString(outcome->dataset.name),
               QString::fromStdString(outcome->run.backend))
          .arg(num(r.ppl_delta_pct, 1, 3), num(r.kl_mean, 1, 5), num(r.top1_agreement, 100, 2),
               num(r.rouge_l, 1, 3), num(r.passkey_accuracy, 100, 0),
               num(r.baseline_passkey_accuracy, 100, 0), num(r.sparsity_prefill, 100, 1),
               num(r.sparsity_decode, 100, 1), num(r.peak_kv_mib, 1, 2)));
  if (outcome->run.gates.passed) {
    writeOutcome(*outcome);
    return;
  }
  const QString summary = QString::fromStdString(outcome->run.gates.summary());
  setStatus(tr("A quality gate failed: %1").arg(summary), true);
  if (m_confirm(summary))
    writeOutcome(*outcome);
  else
    setStatus(tr("A quality gate failed (%1); nothing was written.").arg(summary), true);
}

void ValidationDialog::writeOutcome(const ValidationOutcome& outcome) {
  const QString path = m_out->text().trimmed();
  if (const QString err = ValidationController::write(outcome, path); !err.isEmpty()) {
    setStatus(tr("Could not write %1: %2").arg(path, err), true);
    return;
  }
  const bool passed = outcome.run.gates.passed;
  setStatus(passed ? tr("PASSED. Wrote the validated config to %1.").arg(path)
                   : tr("FAILED a gate. Wrote %1 with passed: false.").arg(path),
            !passed);
  Q_EMIT written(path, true);
}

void ValidationDialog::exportUnvalidated() {
  const QString path = m_out->text().trimmed();
  if (path.isEmpty()) {
    setStatus(tr("Choose where to write the config first."), true);
    return;
  }
  QString note;
  if (const QString err = m_wb->exportConfig(path, &note); !err.isEmpty()) {
    setStatus(tr("Could not export the config: %1").arg(err), true);
    return;
  }
  // The gates and results shown belonged to an earlier validation, not to this file.
  m_gates.clear();
  m_results->clear();
  m_progress->setValue(0);
  m_progress->setFormat(tr("not validated"));
  setStatus(tr("Wrote %1 (not validated). %2").arg(path, note));
  Q_EMIT written(path, false);
}

void ValidationDialog::reject() {
  if (m_wb->validation()->running()) {
    // Stop first; the dialog stays until the run has stopped, so nothing is left half done.
    m_wb->validation()->cancel();
    m_cancel->setEnabled(false);
    setStatus(tr("Stopping..."));
    return;
  }
  QDialog::reject();
}

}  // namespace sinkscope::gui
