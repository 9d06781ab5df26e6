// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/timeline_canvas.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace sinkscope::gui {

TimelineCanvas::TimelineCanvas(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(120);
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setToolTip(tr("Wheel: zoom, drag: pan, double-click or Ctrl+0: reset; hover an event for its "
                "details, click to select it."));
}

void TimelineCanvas::setTimeline(std::shared_ptr<const prof::Timeline> t) {
  m_t = std::move(t);
  m_selected = {};
  relayout();
  const QString search = m_search;
  m_search.clear();
  setSearch(search);  // the matches of the new trace
  resetZoom();
}

void TimelineCanvas::relayout() {
  m_layout = m_t ? layoutLanes(*m_t, std::max(60, height() - kRulerHeight - 4)) : LaneLayout{};
  setMinimumHeight(std::max(120, kRulerHeight + m_layout.height + 4));
}

void TimelineCanvas::resizeEvent(QResizeEvent*) {
  const int before = m_layout.rowHeight;
  relayout();
  if (m_layout.rowHeight != before) update();
}

void TimelineCanvas::resetZoom() {
  m_t0 = m_t ? m_t->begin_ns() : 0;
  m_t1 = m_t ? std::max(m_t->end_ns(), m_t0 + 1) : 1;
  update();
}

void TimelineCanvas::setWindow(int64_t t0, int64_t t1) {
  if (!m_t) return;
  clampWindow(m_t->begin_ns(), m_t->end_ns(), t0, t1);
  m_t0 = t0;
  m_t1 = t1;
  update();
}

double TimelineCanvas::xOf(int64_t t) const {
  return kLabelWidth + double(t - m_t0) / double(std::max<int64_t>(1, m_t1 - m_t0)) *
                           std::max(1, width() - kLabelWidth);
}

int64_t TimelineCanvas::tOf(double x) const {
  return m_t0 + int64_t((x - kLabelWidth) / std::max(1, width() - kLabelWidth) * double(m_t1 - m_t0));
}

int TimelineCanvas::setSearch(const QString& text) {
  if (text == m_search && (m_t || m_matches.empty())) return int(m_matches.size());
  m_search = text;
  m_matches = m_t ? searchEvents(*m_t, text) : std::vector<prof::EventRef>{};
  m_matchName.assign(m_t ? m_t->names().size() : 0, 0);
  for (prof::EventRef r : m_matches) m_matchName[m_t->event(r).name] = 1;
  m_matchIndex = -1;
  update();
  return int(m_matches.size());
}

bool TimelineCanvas::nextMatch() {
  if (m_matches.empty()) return false;
  m_matchIndex = (m_matchIndex + 1) % int(m_matches.size());
  const prof::EventRef r = m_matches[size_t(m_matchIndex)];
  const prof::Event& e = m_t->event(r);
  // Centre the match; zoom in when it would be under a few pixels wide.
  int64_t span = m_t1 - m_t0;
  span = std::min(span, std::max<int64_t>(e.duration_ns() * 20, 1000));
  const int64_t mid = e.start_ns + e.duration_ns() / 2;
  setWindow(mid - span / 2, mid + span / 2);
  select(r);
  return true;
}

prof::EventRef TimelineCanvas::eventAtPoint(QPointF p) const {
  if (!m_t || p.x() < kLabelWidth || p.y() < kRulerHeight) return {};
  const int64_t slack = int64_t(2.0 * double(m_t1 - m_t0) / std::max(1, width() - kLabelWidth));
  return eventAt(*m_t, m_layout, tOf(p.x()), int(p.y()) - kRulerHeight, slack);
}

QString TimelineCanvas::tooltipAt(QPointF p) const {
  return m_t ? eventTooltip(*m_t, eventAtPoint(p)) : QString();
}

QPointF TimelineCanvas::pointOf(prof::EventRef r) const {
  if (!m_t || !r.valid()) return {-1, -1};
  for (const LaneBand& b : m_layout.bands)
    if (b.lane == r.lane) {
      const prof::Event& e = m_t->event(r);
      const double x0 = std::max<double>(kLabelWidth, xOf(e.start_ns));
      const double x1 = std::min<double>(width(), xOf(std::max(e.end_ns, e.start_ns + 1)));
      return {(x0 + x1) / 2, kRulerHeight + b.y + (e.depth + 0.5) * m_layout.rowHeight};
    }
  return {-1, -1};
}

void TimelineCanvas::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  m_drawn = 0;
  if (!m_t || m_t->event_count() == 0) {
    p.setPen(palette().text().color());
    p.drawText(rect(), Qt::AlignCenter, tr("No timeline yet: run the prompt."));
    return;
  }
  const QColor text = palette().text().color();
  const QColor grid = palette().mid().color();
  // Ruler: ticks relative to the trace's start, in the unit the zoom reads best in.
  const RulerTicks ticks = rulerTicks(m_t0 - m_t->begin_ns(), m_t1 - m_t->begin_ns(),
                                      width() - kLabelWidth);
  p.setPen(text);
  p.drawText(QRect(4, 0, kLabelWidth - 8, kRulerHeight), Qt::AlignLeft | Qt::AlignVCenter,
             tr("time (%1)").arg(ticks.unit));
  for (int64_t tick : ticks.ticks) {
    const double x = xOf(tick + m_t->begin_ns());
    p.setPen(grid);
    p.drawLine(QPointF(x, kRulerHeight - 6), QPointF(x, height()));
    p.setPen(text);
    p.drawText(QRectF(x + 3, 0, 100, kRulerHeight - 4), Qt::AlignLeft | Qt::AlignBottom,
               tickLabel(ticks, tick));
  }
  p.setPen(grid);
  p.drawLine(kLabelWidth, kRulerHeight - 1, width(), kRulerHeight - 1);

  const int rowH = m_layout.rowHeight;
  const bool searching = !m_matches.empty() || !m_search.trimmed().isEmpty();
  p.setClipRect(QRect(0, kRulerHeight, width(), height() - kRulerHeight));
  for (const LaneBand& b : m_layout.bands) {
    const int top = kRulerHeight + b.y;
    p.fillRect(QRect(0, top, kLabelWidth - 4, b.height), palette().alternateBase());
    p.setPen(text);
    p.drawText(QRect(4, top, kLabelWidth - 10, std::min(b.height, rowH * 2)),
               Qt::AlignLeft | Qt::AlignVCenter | Qt::TextWordWrap, b.label);
    p.setClipRect(QRect(kLabelWidth, kRulerHeight, width() - kLabelWidth, height() - kRulerHeight));
    for (uint32_t idx : m_t->window(b.lane, m_t0, m_t1)) {
      const prof::Event& e = m_t->events(b.lane)[idx];
      const prof::EventRef ref{b.lane, idx};
      const double x0 = std::max<double>(kLabelWidth, xOf(e.start_ns));
      const double x1 = std::min<double>(width(), xOf(std::max(e.end_ns, e.start_ns + 1)));
      const QRectF r(x0, top + e.depth * rowH + 1, std::max(1.0, x1 - x0), rowH - 2);
      QColor c = layerColour(m_t->layer_of(ref));
      if (searching && !(e.name < m_matchName.size() && m_matchName[e.name]))
        c = c.lighter(170), c.setAlpha(90);  // not a match: dimmed
      p.fillRect(r, c);
      if (ref == m_selected) {
        p.setPen(QPen(palette().highlight().color(), 2));
        p.drawRect(r.adjusted(1, 1, -1, -1));
      }
      if (r.width() > 36) {
        p.setPen(c.lightness() < 110 ? Qt::white : Qt::black);
        p.drawText(r.adjusted(3, 0, -2, 0), Qt::AlignLeft | Qt::AlignVCenter,
                   QString::fromStdString(m_t->display_name(e)));
      }
      ++m_drawn;
    }
    p.setClipRect(QRect(0, kRulerHeight, width(), height() - kRulerHeight));
    p.setPen(grid);
    p.drawLine(0, top + b.height + 2, width(), top + b.height + 2);
  }
}

void TimelineCanvas::wheelEvent(QWheelEvent* e) {
  if (!m_t) return;
  const double f = e->angleDelta().y() > 0 ? 0.8 : 1.25;
  const int64_t c = tOf(e->position().x());
  setWindow(c - int64_t(double(c - m_t0) * f), c + int64_t(double(m_t1 - c) * f));
  e->accept();
}

void TimelineCanvas::select(prof::EventRef r) {
  m_selected = r;
  if (m_selected.valid()) {
    const prof::Event& ev = m_t->event(m_selected);
    const int64_t layer = m_t->layer_of(m_selected);
    Q_EMIT eventSelected(tr("%1 (%2): %3 µs at %4 ms%5")
                             .arg(QString::fromStdString(m_t->display_name(ev)))
                             .arg(QString::fromLatin1(prof::event_kind_name(ev.kind)))
                             .arg(double(ev.duration_ns()) / 1e3, 0, 'f', 1)
                             .arg(double(ev.start_ns - m_t->begin_ns()) / 1e6, 0, 'f', 3)
                             .arg(layer >= 0 ? tr(", layer %1").arg(layer) : QString()));
  }
  update();
}

void TimelineCanvas::mousePressEvent(QMouseEvent* e) {
  setFocus();
  m_dragStart = e->pos();
  m_dragging = false;
  m_dragT0 = m_t0;
  m_dragT1 = m_t1;
}

void TimelineCanvas::mouseDoubleClickEvent(QMouseEvent*) { resetZoom(); }

void TimelineCanvas::mouseMoveEvent(QMouseEvent* e) {
  if (!m_t) return;
  if (e->buttons() & Qt::LeftButton) {
    if (std::abs(e->pos().x() - m_dragStart.x()) > 3) m_dragging = true;
    if (!m_dragging) return;
    const int64_t dt = int64_t(double(e->pos().x() - m_dragStart.x()) /
                               std::max(1, width() - kLabelWidth) * double(m_dragT1 - m_dragT0));
    setWindow(m_dragT0 - dt, m_dragT1 - dt);
    return;
  }
}

bool TimelineCanvas::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    const auto* he = static_cast<QHelpEvent*>(e);
    const QString tip = tooltipAt(he->pos());
    if (tip.isEmpty()) {
      QToolTip::hideText();
      if (!m_t || he->pos().x() >= kLabelWidth) {
        e->ignore();
        return true;
      }
      return QWidget::event(e);  // the canvas's own help text over the lane labels
    }
    QToolTip::showText(he->globalPos(), tip, this);
    return true;
  }
  return QWidget::event(e);
}

void TimelineCanvas::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton && !m_dragging && m_t) select(eventAtPoint(e->position()));
  m_dragging = false;
}

void TimelineCanvas::keyPressEvent(QKeyEvent* e) {
  if (e->matches(QKeySequence::ZoomIn) || e->key() == Qt::Key_Plus) {
    const int64_t c = (m_t0 + m_t1) / 2, half = (m_t1 - m_t0) * 4 / 10;
    setWindow(c - half, c + half);
  } else if (e->matches(QKeySequence::ZoomOut) || e->key() == Qt::Key_Minus) {
    const int64_t c = (m_t0 + m_t1) / 2, half = (m_t1 - m_t0) * 6 / 10;
    setWindow(c - half, c + half);
  } else if (e->key() == Qt::Key_0 && (e->modifiers() & Qt::ControlModifier)) {
    resetZoom();
  } else if (e->key() == Qt::Key_Left || e->key() == Qt::Key_Right) {
    const int64_t d = (m_t1 - m_t0) / 5 * (e->key() == Qt::Key_Left ? -1 : 1);
    setWindow(m_t0 + d, m_t1 + d);
  } else {
    QWidget::keyPressEvent(e);
  }
}

}  // namespace sinkscope::gui
