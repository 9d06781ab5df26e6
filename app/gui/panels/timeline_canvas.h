// SPDX-License-Identifier: Apache-2.0
// Paints a profiler::Timeline: one band per lane, one row per nesting depth. Only the visible
// time window is drawn, found by Timeline::window() (binary search per depth level, STYLE #4).
// Wheel zooms around the cursor, drag pans, click selects an event.
#pragma once

#include <QWidget>

#include <memory>

#include "profiler/timeline.h"

namespace sinkscope::gui {

class TimelineCanvas : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineCanvas(QWidget* parent = nullptr);
  void setTimeline(std::shared_ptr<const prof::Timeline> t);
  void resetZoom();
  int lastDrawnEvents() const { return m_drawn; }
 Q_SIGNALS:
  void eventSelected(const QString& description);
 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  QSize sizeHint() const override { return {600, 200}; }
 private:
  static constexpr int kRowHeight = 16;
  static constexpr int kLabelWidth = 110;
  double xOf(int64_t t) const;
  int64_t tOf(double x) const;
  std::shared_ptr<const prof::Timeline> m_t;
  int64_t m_t0 = 0, m_t1 = 1;
  QPoint m_dragStart;
  int64_t m_dragT0 = 0, m_dragT1 = 0;
  prof::EventRef m_selected;
  int m_drawn = 0;
};

}  // namespace sinkscope::gui
