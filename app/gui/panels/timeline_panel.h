// SPDX-License-Identifier: Apache-2.0
// View 4: the run's timeline (CUPTI kernels and NVTX ranges, or CPU spans: a lane per thread
// and per GPU stream), a search by event name, the kernel / range summary table (sortable) and
// "export trace" (Chrome trace JSON, written atomically; the panel says where it went).
#pragma once

#include <QWidget>

#include "app/gui/models/view_models.h"

class QLabel;
class QLineEdit;
class QSplitter;

namespace sinkscope::gui {

class TimelineCanvas;

class TimelinePanel : public QWidget {
  Q_OBJECT
 public:
  explicit TimelinePanel(TimelineView* view, QWidget* parent = nullptr);
  void exportTrace();  // asks for a file
  // Writes the trace to path; "" or the error. Either way the panel's status line says so.
  QString exportTraceTo(const QString& path);
  TimelineCanvas* canvas() const { return m_canvas; }
  QLineEdit* searchField() const { return m_search; }
  QLabel* statusLabel() const { return m_status; }
 protected:
  void resizeEvent(QResizeEvent* e) override;
 private:
  void rebuild();
  void fitLanes();  // splitter: the lanes' room, the table the rest
  void searchChanged(const QString& text);
  TimelineView* m_view;
  TimelineCanvas* m_canvas;
  QLabel* m_info;
  QLabel* m_status;
  QLabel* m_matches;
  QLineEdit* m_search;
  QSplitter* m_split;
};

}  // namespace sinkscope::gui
