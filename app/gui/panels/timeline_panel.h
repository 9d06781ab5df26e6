// SPDX-License-Identifier: Apache-2.0
// View 4: the run's timeline (CUPTI kernels and NVTX ranges, or CPU spans), the summary table
// and "export trace" (Chrome trace JSON, written atomically).
#pragma once

#include <QWidget>

#include "app/gui/models/view_models.h"

class QLabel;

namespace sinkscope::gui {

class TimelineCanvas;

class TimelinePanel : public QWidget {
  Q_OBJECT
 public:
  explicit TimelinePanel(TimelineView* view, QWidget* parent = nullptr);
  void exportTrace();  // asks for a file
 private:
  void rebuild();
  TimelineView* m_view;
  TimelineCanvas* m_canvas;
  QLabel* m_info;
};

}  // namespace sinkscope::gui
