// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/attention_map_panel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "app/gui/panels/heatmap.h"

namespace sinkscope::gui {

QString skippedOutlineCaption(int drawn, int total) {
  if (drawn >= total) return QObject::tr("%1 skipped tiles outlined").arg(total);
  return QObject::tr("%1 of %2 skipped tiles outlined (the first %1 in query order: more would "
                     "slow the plot)")
      .arg(drawn)
      .arg(total);
}

AttentionMapPanel::AttentionMapPanel(AttentionMapView* view, QWidget* parent)
    : QWidget(parent), m_view(view) {
  auto* top = new QHBoxLayout;
  m_layer = new QSpinBox(this);
  m_head = new QSpinBox(this);
  m_layer->setPrefix(tr("layer "));
  m_head->setPrefix(tr("head "));
  top->addWidget(m_layer);
  top->addWidget(m_head);
  m_info = new QLabel(tr("Hover the map for tokens and probabilities; wheel zooms, drag pans."), this);
  m_info->setTextInteractionFlags(Qt::TextSelectableByMouse);
  top->addWidget(m_info, 1);
  m_plot = new QCustomPlot(this);
  m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_map = makeColorMap(m_plot, tr("key position"), tr("query position"), tr("P (log)"),
                       QCPColorGradient::gpThermal);
  m_map->setDataScaleType(QCPAxis::stLogarithmic);
  m_map->colorScale()->setDataScaleType(QCPAxis::stLogarithmic);
  m_plot->yAxis->setRangeReversed(true);
  m_plot->setMouseTracking(true);
  auto* lay = new QVBoxLayout(this);
  lay->addLayout(top);
  lay->addWidget(m_plot, 1);
  connect(m_view, &AttentionMapView::changed, this, &AttentionMapPanel::rebuild);
  connect(m_plot, &QCustomPlot::mouseMove, this, &AttentionMapPanel::onHover);
  auto emitHead = [this] { Q_EMIT headChosen(m_layer->value(), m_head->value()); };
  connect(m_layer, &QSpinBox::valueChanged, this, emitHead);
  connect(m_head, &QSpinBox::valueChanged, this, emitHead);
}

void AttentionMapPanel::setHeadRange(int layers, int heads) {
  const QSignalBlocker a(m_layer), b(m_head);
  m_layer->setRange(0, std::max(0, layers - 1));
  m_head->setRange(0, std::max(0, heads - 1));
}

void AttentionMapPanel::setSelection(int layer, int head) {
  const QSignalBlocker a(m_layer), b(m_head);
  m_layer->setValue(layer);
  m_head->setValue(head);
}

void AttentionMapPanel::highlightToken(int position) {
  m_highlight = position;
  rebuild();
}

void AttentionMapPanel::rebuild() {
  m_plot->clearItems();
  if (!m_view->hasData()) {
    m_plot->replot();
    return;
  }
  const AttentionMap& a = m_view->map();
  const int n = a.nTokens;
  // Cells are placed at token coordinates: cell (r, c) spans its bin's positions.
  m_map->data()->setSize(a.cols, a.rows);
  const double cw = double(n) / a.cols, rh = double(n) / a.rows;
  m_map->data()->setRange(QCPRange(cw / 2 - 0.5, n - cw / 2 - 0.5), QCPRange(rh / 2 - 0.5, n - rh / 2 - 0.5));
  float mx = 0;
  for (float v : a.cells) mx = std::max(mx, v);
  const double floor = std::max(1e-6, double(mx) * 1e-5);
  for (int r = 0; r < a.rows; ++r)
    for (int c = 0; c < a.cols; ++c)
      m_map->data()->setCell(c, r, std::max(floor, double(a.cells[size_t(r) * a.cols + c])));
  m_map->setDataRange(QCPRange(floor, std::max(floor * 10, double(mx))));
  m_plot->xAxis->setRange(-0.5, n - 0.5);
  m_plot->yAxis->setRange(-0.5, n - 0.5);

  // Skipped tiles of the skip mask: outlined rectangles (query tile x KV tile).
  const SkipMask& mask = m_view->skipMask();
  const int bs = m_view->blockSize();
  int drawn = 0, total = 0;
  for (int qt = 0; qt < mask.rows; ++qt)
    for (int kt = 0; kt < mask.cols; ++kt) {
      if (mask.cells[size_t(qt) * mask.cols + kt] != 2) continue;
      if (++total > kMaxSkipOutlines) continue;
      auto* rect = new QCPItemRect(m_plot);
      rect->topLeft->setCoords(kt * bs - 0.5, qt * kQueryTileRows - 0.5);
      rect->bottomRight->setCoords(std::min(n, (kt + 1) * bs) - 0.5, std::min(n, (qt + 1) * kQueryTileRows) - 0.5);
      rect->setPen(QPen(QColor(0, 200, 255), 1.5, Qt::DashLine));
      rect->setBrush(QColor(0, 200, 255, 40));
      ++drawn;
    }
  // Sink columns: a marker line along each.
  for (int k : m_view->sinkColumns()) {
    auto* line = new QCPItemStraightLine(m_plot);
    line->point1->setCoords(k, 0);
    line->point2->setCoords(k, 1);
    line->setPen(QPen(QColor(80, 255, 80, 160), 1));
  }
  if (m_highlight >= 0 && m_highlight < n) {
    for (int i = 0; i < 2; ++i) {
      auto* line = new QCPItemStraightLine(m_plot);
      line->point1->setCoords(i ? 0 : m_highlight, i ? m_highlight : 0);
      line->point2->setCoords(i ? 1 : m_highlight, i ? m_highlight : 1);
      line->setPen(QPen(Qt::white, 1, Qt::DotLine));
    }
  }
  m_plot->replot();
  m_info->setText(tr("Layer %1, head %2: %3 tokens in %4x%5 cells; %6%7, sink columns in green.")
                      .arg(a.layer).arg(a.head).arg(n).arg(a.rows).arg(a.cols)
                      .arg(skippedOutlineCaption(drawn, total))
                      .arg(mask.rows ? QString() : tr(" (no skip mask)")));
  if (const RunResultPtr& r = m_view->result()) {  // how the map was made; why a mask is missing
    QString more;
    if (!r->mapSource.empty()) more += tr("Map: %1.").arg(QString::fromStdString(r->mapSource));
    if (!r->maskNote.empty())
      more += (more.isEmpty() ? QString() : QStringLiteral(" ")) +
              tr("No skip mask: %1").arg(QString::fromStdString(r->maskNote));
    if (!more.isEmpty()) m_info->setText(m_info->text() + QLatin1Char('\n') + more);
  }
}

void AttentionMapPanel::onHover(QMouseEvent* e) {
  if (!m_view->hasData()) return;
  const AttentionMap& a = m_view->map();
  const int k = int(std::lround(m_plot->xAxis->pixelToCoord(e->pos().x())));
  const int q = int(std::lround(m_plot->yAxis->pixelToCoord(e->pos().y())));
  if (k < 0 || q < 0 || k >= a.nTokens || q >= a.nTokens) return;
  const int r = int(std::upper_bound(a.rowStart.begin(), a.rowStart.end(), q) - a.rowStart.begin()) - 1;
  const int c = int(std::upper_bound(a.colStart.begin(), a.colStart.end(), k) - a.colStart.begin()) - 1;
  const double p = a.cells[size_t(r) * a.cols + c];
  const bool binned = a.rows < a.nTokens;
  m_info->setText(tr("query %1  key %2  P %3%4  alpha_k %5")
                      .arg(m_view->tokenLabel(q), m_view->tokenLabel(k))
                      .arg(k > q ? tr("(future: masked)") : QString::number(p, 'g', 4))
                      .arg(binned ? tr(" (cell mean)") : QString())
                      .arg(size_t(k) < a.alpha.size() ? a.alpha[size_t(k)] : 0.0, 0, 'g', 3));
}

}  // namespace sinkscope::gui
