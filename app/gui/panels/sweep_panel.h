// SPDX-License-Identifier: Apache-2.0
// The sweep view (issue 8: "the GUI can show the front and load a point"): the points of a
// `sinkscope-cli sweep --json-out` file as a scatter of efficiency (prefill sparsity, or peak KV
// memory) against quality (mean KL to the dense baseline), the Pareto front highlighted and
// connected; hovering or clicking a point shows its label and metrics, the table lists every
// point, and "Load this point" applies the chosen point's config to the controls.
#pragma once

#include <QWidget>

#include <vector>

#include "app/gui/models/journal_watch.h"
#include "app/gui/models/sweep_model.h"

class QComboBox;
class QCustomPlot;
class QCPGraph;
class QLabel;
class QMouseEvent;
class QProgressBar;
class QPushButton;
class QTableView;

namespace sinkscope::gui {

class SweepPanel : public QWidget {
  Q_OBJECT
 public:
  explicit SweepPanel(SweepPointsModel* model, QWidget* parent = nullptr);
  int selectedRow() const { return m_selected; }
  void selectRow(int row);
  // Shows the progress of a running sweep / validation from one of its journal files (a bar
  // above the plot, re-read every 2 s). Returns "" or why not.
  QString watchJournal(const QString& file);
  JournalWatch* journalWatch() { return &m_watch; }

 Q_SIGNALS:
  void loadPoint(int row);

 private:
  struct Plotted {
    int row;
    double x, y;
  };
  void rebuild();
  void replotSelection();
  int pointAt(const QPoint& pixel) const;  // row of the nearest plotted point, or -1
  void onHover(QMouseEvent* e);
  void showWatch();
  QString describe(int row) const;

  SweepPointsModel* m_model;
  QComboBox* m_axis;
  QPushButton* m_load;
  QLabel* m_source;
  QLabel* m_info;
  QCustomPlot* m_plot;
  QCPGraph* m_passed;
  QCPGraph* m_failed;
  QCPGraph* m_front;
  QCPGraph* m_selection;
  QTableView* m_table;
  JournalWatch m_watch;
  QWidget* m_running;
  QProgressBar* m_runBar;
  QLabel* m_runText;
  QPushButton* m_stopWatch;
  std::vector<Plotted> m_points;
  int m_selected = -1;
};

}  // namespace sinkscope::gui
