// SPDX-License-Identifier: Apache-2.0
// The main window: a compact bar on top (model picker and backend, Run / Cancel, generation
// length, progress; the prompt as one line that expands; a banner when the views are out of
// date), the controls docked on the left, the five views tabbed below the bar with the token
// strip, and the sweep view (shown once a sweep is opened); status in the status bar. All state
// lives in the Workbench.
#pragma once

#include <QMainWindow>

#include "app/gui/models/recent_files.h"
#include "app/gui/models/workbench.h"

class QActionGroup;
class QComboBox;
class QDockWidget;
class QLabel;
class QMenu;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTimer;
class QToolButton;

namespace sinkscope::gui {

class AttentionMapPanel;
class ControlsPanel;
class SweepPanel;
class TokenStrip;

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
  void setPromptExpanded(bool on);
  void updatePromptInfo();
  void updateBanner();
  void fitCentralHeight();  // the central strip's height for its current width
  void selectModelItem(const QString& path);
  void chooseHead(int layer, int head);
  void resetLayout();
  void buildDocks();
  void buildMenus();
  void chooseModel();
  void chooseCheckpointFolder();
  void loadModelPath(const QString& path);
  void loadPromptFile(const QString& path);
  void importConfig();
  void exportConfig();
  void openSweep();
  void watchSweep();
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
  QToolButton* m_expand = nullptr;
  QLabel* m_promptInfo = nullptr;
  QLabel* m_banner = nullptr;
  TokenStrip* m_strip = nullptr;
  QByteArray m_defaultState;
  QString m_goodModel;  // the model that loaded last (kept when another fails)
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
  // Engine > GPU weights / GPU activations (Workbench::setGpuChoice); enabled on a GPU backend.
  QMenu* m_gpuMenu = nullptr;
  QActionGroup* m_gpuWeights = nullptr;
  QActionGroup* m_gpuActivations = nullptr;
  void buildGpuMenu(QMenu* engine);
  void syncGpuMenu(const QString& backend);
  void syncGpuChecks();  // the checked items follow the workbench's choice
  QMenu* m_recentPromptMenu = nullptr;
  QMenu* m_recentConfigMenu = nullptr;
};

}  // namespace sinkscope::gui
