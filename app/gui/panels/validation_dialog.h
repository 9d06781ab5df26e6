// SPDX-License-Identifier: Apache-2.0
// File > Export config: validates the current settings against the dense baseline on a dataset
// (the default one, a chosen manifest, or a quick subset) on the Workbench's validation worker,
// with progress, time remaining and Cancel; shows every gate PASS / FAIL with its reason and
// writes the validated config atomically -- after a confirmation when a gate failed (the file
// then says passed: false). Writing the settings without validation stays available.
#pragma once

#include <QDialog>

#include <functional>

#include "app/gui/models/gate_report_model.h"
#include "app/gui/models/workbench.h"

class QCheckBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;

namespace sinkscope::gui {

class ValidationDialog : public QDialog {
  Q_OBJECT
 public:
  ValidationDialog(Workbench* workbench, const QString& outPath, QWidget* parent = nullptr);
  // Asked when a gate failed, with the failed gates' reasons: true writes the file (passed:
  // false). Default: a message box (no file when the application runs without dialogs).
  using Confirm = std::function<bool(const QString& failedGates)>;
  void setConfirmWrite(Confirm confirm) { m_confirm = std::move(confirm); }

 Q_SIGNALS:
  void written(const QString& path, bool validated);

 protected:
  void reject() override;  // also cancels a running validation

 private:
  void startValidation();
  void exportUnvalidated();
  void onFinished(const ValidationOutcomePtr& outcome);
  void writeOutcome(const ValidationOutcome& outcome);
  void setBusy(bool busy);
  void setStatus(const QString& text, bool error = false);
  void refreshDatasetHint();
  QString chosenManifest() const;

  Workbench* m_wb;
  GateReportModel m_gates;
  QLineEdit* m_out;
  QLineEdit* m_manifest;
  QCheckBox* m_quick;
  QSpinBox* m_quickN;
  QLabel* m_datasetHint;
  QProgressBar* m_progress;
  QLabel* m_status;
  QTableView* m_gateView;
  QLabel* m_results;
  QPushButton* m_validate;
  QPushButton* m_unvalidated;
  QPushButton* m_cancel;
  QList<QWidget*> m_inputs;  // disabled while a validation runs
  Confirm m_confirm;
  bool m_statusIsDatasetError = false;  // the status line holds the "dataset missing" error
};

}  // namespace sinkscope::gui
