// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/timeline_canvas.h"

#include <QMouseEvent>
#include <QPainter>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace sinkscope::gui {

TimelineCanvas::TimelineCanvas(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(120);
  setMouseTracking(false);
}

void TimelineCanvas::setTimeline(std::shared_ptr<const prof::Timeline> t) {
  m_t = std::move(t);
  m_selected = {};
  resetZoom();
}

void TimelineCanvas::resetZoom() {
  m_t0 = m_t ? m_t->begin_ns() : 0;
  m_t1 = m_t ? std::max(m_t->end_ns(), m_t0 + 1) : 1;
  update();
}

double TimelineCanvas::xOf(int64_t t) const {
  return kLabelWidth + double(t - m_t0) / double(m_t1 - m_t0) * (width() - kLabelWidth);
}

int64_t TimelineCanvas::tOf(double x) const {
  return m_t0 + int64_t((x - kLabelWidth) / std::max(1, width() - kLabelWidth) * double(m_t1 - m_t0));
}

void TimelineCanvas::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  m_drawn = 0;
  if (!m_t || m_t->event_count() == 0) {
    p.drawText(rect(), Qt::AlignCenter, tr("No timeline yet"));
    return;
  }
  int y = 18;
  p.setPen(palette().text().color());
  p.drawText(kLabelWidth, 12, tr("%1 .. %2 ms (wheel: zoom, drag: pan, double-click: reset)")
                                  .arg(double(m_t0 - m_t->begin_ns()) / 1e6, 0, 'f', 3)
                                  .arg(double(m_t1 - m_t->begin_ns()) / 1e6, 0, 'f', 3));
  const auto& lanes = m_t->lanes();
  for (uint32_t lane = 0; lane < lanes.size(); ++lane) {
    const int depth = m_t->max_depth(lane) + 1;
    p.setPen(palette().text().color());
    p.drawText(QRect(2, y, kLabelWidth - 4, kRowHeight), Qt::AlignLeft | Qt::AlignVCenter,
               QString::fromStdString(lanes[lane].name));
    for (uint32_t idx : m_t->window(lane, m_t0, m_t1)) {
      const prof::Event& e = m_t->events(lane)[idx];
      const double x0 = std::max<double>(kLabelWidth, xOf(e.start_ns));
      const double x1 = std::min<double>(width(), xOf(std::max(e.end_ns, e.start_ns + 1)));
      const QRectF r(x0, y + e.depth * kRowHeight, std::max(1.0, x1 - x0), kRowHeight - 2);
      const uint32_t h = e.name * 2654435761u;
      QColor c = QColor::fromHsv(int(h % 360), 90, 230);
      if (m_selected.valid() && m_selected.lane == lane && m_selected.index == idx) c = QColor(255, 120, 120);
      p.fillRect(r, c);
      if (r.width() > 30) {
        p.setPen(Qt::black);
        p.drawText(r.adjusted(2, 0, -2, 0), Qt::AlignLeft | Qt::AlignVCenter,
                   QString::fromStdString(m_t->display_name(e)));
      }
      ++m_drawn;
    }
    y += depth * kRowHeight + 6;
    p.setPen(palette().mid().color());
    p.drawLine(0, y - 3, width(), y - 3);
  }
  setMinimumHeight(std::min(y + 4, 2000));
}

void TimelineCanvas::wheelEvent(QWheelEvent* e) {
  if (!m_t) return;
  const double f = e->angleDelta().y() > 0 ? 0.8 : 1.25;
  const int64_t c = tOf(e->position().x());
  m_t0 = c - int64_t(double(c - m_t0) * f);
  m_t1 = c + int64_t(double(m_t1 - c) * f);
  if (m_t1 - m_t0 < 1000) m_t1 = m_t0 + 1000;  // at most 1 us across
  update();
}

void TimelineCanvas::mousePressEvent(QMouseEvent* e) {
  m_dragStart = e->pos();
  m_dragT0 = m_t0;
  m_dragT1 = m_t1;
  if (!m_t) return;
  if (e->type() == QEvent::MouseButtonDblClick) {
    resetZoom();
    return;
  }
  // Select the deepest event under the cursor.
  const int64_t t = tOf(e->position().x());
  int y = 18;
  m_selected = {};
  for (uint32_t lane = 0; lane < m_t->lanes().size(); ++lane) {
    const int depth = m_t->max_depth(lane) + 1;
    const int row = (int(e->position().y()) - y) / kRowHeight;
    if (e->position().y() >= y && row < depth) {
      for (uint32_t idx : m_t->window(lane, t, t + 1))
        if (m_t->events(lane)[idx].depth == row) m_selected = {lane, idx};
    }
    y += depth * kRowHeight + 6;
  }
  if (m_selected.valid()) {
    const prof::Event& ev = m_t->event(m_selected);
    Q_EMIT eventSelected(tr("%1 (%2): %3 us at %4 ms%5")
                             .arg(QString::fromStdString(m_t->display_name(ev)))
                             .arg(QString::fromLatin1(prof::event_kind_name(ev.kind)))
                             .arg(double(ev.duration_ns()) / 1e3, 0, 'f', 1)
                             .arg(double(ev.start_ns - m_t->begin_ns()) / 1e6, 0, 'f', 3)
                             .arg(m_t->layer_of(m_selected) >= 0 ? tr(", layer %1").arg(m_t->layer_of(m_selected)) : QString()));
  }
  update();
}

void TimelineCanvas::mouseMoveEvent(QMouseEvent* e) {
  if (!(e->buttons() & Qt::LeftButton) || !m_t) return;
  const int64_t dt = int64_t(double(e->pos().x() - m_dragStart.x()) / std::max(1, width() - kLabelWidth) *
                             double(m_dragT1 - m_dragT0));
  m_t0 = m_dragT0 - dt;
  m_t1 = m_dragT1 - dt;
  update();
}

}  // namespace sinkscope::gui
