// SPDX-License-Identifier: Apache-2.0
// Paints a profiler::Timeline: a time ruler on top, then one band per lane (CPU threads, NVTX,
// GPU streams) with one row per nesting depth, coloured by layer. Only the visible time window
// is drawn, found by Timeline::window() (binary search per depth level; docs/architecture.md,
// design principle 4). Wheel zooms around the cursor and drag pans, both kept inside the trace;
// double-click or Ctrl+0 resets; hovering shows the event's details; click selects. The logic
// lives in app/gui/models/timeline_lanes.h.
#pragma once

#include <QWidget>

#include <memory>
#include <vector>

#include "app/gui/models/timeline_lanes.h"
#include "profiler/timeline.h"

namespace sinkscope::gui {

class TimelineCanvas : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineCanvas(QWidget* parent = nullptr);
  void setTimeline(std::shared_ptr<const prof::Timeline> t);
  void resetZoom();
  // Visible time window, ns on the profiler's clock.
  int64_t windowStart() const { return m_t0; }
  int64_t windowEnd() const { return m_t1; }
  void setWindow(int64_t t0, int64_t t1);  // clamped to the trace
  // Highlights the events whose name contains text (others dimmed); returns the match count.
  int setSearch(const QString& text);
  const std::vector<prof::EventRef>& matches() const { return m_matches; }
  // Selects the next match after the current one, centring the window on it; false when none.
  bool nextMatch();
  prof::EventRef selected() const { return m_selected; }
  // The event under a point of the canvas and its hover text (what the tooltip shows).
  prof::EventRef eventAtPoint(QPointF p) const;
  QString tooltipAt(QPointF p) const;
  // Pixel position of an event's centre (tests, keyboard navigation); (-1, -1) when not drawn.
  QPointF pointOf(prof::EventRef r) const;
  const LaneLayout& layout() const { return m_layout; }
  int lastDrawnEvents() const { return m_drawn; }
  static constexpr int kRulerHeight = 24;
  static constexpr int kLabelWidth = 120;
 Q_SIGNALS:
  void eventSelected(const QString& description);
 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  bool event(QEvent* e) override;
  QSize sizeHint() const override { return {600, 240}; }
 private:
  void relayout();
  void select(prof::EventRef r);
  double xOf(int64_t t) const;
  int64_t tOf(double x) const;
  std::shared_ptr<const prof::Timeline> m_t;
  LaneLayout m_layout;
  int64_t m_t0 = 0, m_t1 = 1;
  QPoint m_dragStart;
  bool m_dragging = false;
  int64_t m_dragT0 = 0, m_dragT1 = 0;
  prof::EventRef m_selected;
  std::vector<prof::EventRef> m_matches;
  std::vector<char> m_matchName;  // per name id: matches the search
  QString m_search;
  int m_matchIndex = -1;
  int m_drawn = 0;
};

}  // namespace sinkscope::gui
