// SPDX-License-Identifier: Apache-2.0
// The main window: model picker and backend indicator, prompt editor with sample prompts, Run /
// Cancel, generation length, progress with time remaining, status; the controls and the five
// views as dock widgets plus the token strip and the sweep view (shown once a sweep is opened). All state lives in the Workbench.
#pragma once

#include <QMainWindow>

#include "app/gui/models/recent_files.h"
#include "app/gui/models/workbench.h"

class QComboBox;
class QDockWidget;
class QLabel;
class QMenu;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTimer;

namespace sinkscope::gui {

class AttentionMapPanel;
class ControlsPanel;
class SweepPanel;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(Workbench* workbench, QWidget* parent = nullptr);
  void setPromptText(const QString& text);
  QList<QDockWidget*> viewDocks() const { return m_views; }
  void restoreSettings();

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  QWidget* buildCentral();
  void buildDocks();
  void buildMenus();
  void chooseModel();
  void loadModelPath(const QString& path);
  void loadPromptFile(const QString& path);
  void importConfig();
  void exportConfig();
  void openSweep();
  void loadSweepPoint(int row);
  void refreshRecentMenus();
  void showError(const QString& title, const QString& message);
  void setStatus(const QString& text, bool error = false);

  Workbench* m_wb;
  RecentFiles m_recentModels{QStringLiteral("models")};
  RecentFiles m_recentPrompts{QStringLiteral("prompts")};
  RecentFiles m_recentConfigs{QStringLiteral("configs")};
  QComboBox* m_model = nullptr;
  QLabel* m_backend = nullptr;
  QPlainTextEdit* m_prompt = nullptr;
  QComboBox* m_samples = nullptr;
  QPushButton* m_run = nullptr;
  QPushButton* m_cancel = nullptr;
  QSpinBox* m_genLength = nullptr;
  QProgressBar* m_progress = nullptr;
  QLabel* m_status = nullptr;
  QTimer* m_promptTimer = nullptr;
  ControlsPanel* m_controls = nullptr;
  AttentionMapPanel* m_mapPanel = nullptr;
  QList<QDockWidget*> m_views;
  SweepPanel* m_sweepPanel = nullptr;
  QDockWidget* m_sweepDock = nullptr;
  QMenu* m_recentModelMenu = nullptr;
  QMenu* m_recentPromptMenu = nullptr;
  QMenu* m_recentConfigMenu = nullptr;
};

}  // namespace sinkscope::gui
