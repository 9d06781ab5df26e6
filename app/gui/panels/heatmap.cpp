// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/heatmap.h"

#include <QScrollArea>
#include <QToolTip>

#include <cmath>

namespace sinkscope::gui {

QCPColorMap* makeColorMap(QCustomPlot* plot, const QString& xLabel, const QString& yLabel,
                          const QString& scaleLabel, const QCPColorGradient& gradient) {
  plot->xAxis->setLabel(xLabel);
  plot->yAxis->setLabel(yLabel);
  auto* map = new QCPColorMap(plot->xAxis, plot->yAxis);
  auto* scale = new QCPColorScale(plot);
  plot->plotLayout()->addElement(0, 1, scale);
  scale->setType(QCPAxis::atRight);
  scale->axis()->setLabel(scaleLabel);
  map->setColorScale(scale);
  map->setGradient(gradient);
  map->setInterpolate(false);
  auto* margins = new QCPMarginGroup(plot);
  plot->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  scale->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  return map;
}

void showColorScale(QCustomPlot* plot, QCPColorMap* map, bool shown) {
  QCPColorScale* scale = map->colorScale();
  if (!scale) return;
  QCPLayoutGrid* grid = plot->plotLayout();
  const bool inLayout = scale->layout() == grid;
  if (shown && !inLayout) {
    grid->addElement(0, 1, scale);
  } else if (!shown && inLayout) {
    grid->take(scale);
    grid->simplify();  // drops the empty column
  }
  scale->setVisible(shown);
}

QCPItemText* addEmptyPlotText(QCustomPlot* plot, const QString& text) {
  auto* t = new QCPItemText(plot);
  t->setObjectName(QStringLiteral("emptyPlotText"));
  t->position->setType(QCPItemPosition::ptAxisRectRatio);
  t->position->setCoords(0.5, 0.5);
  t->setText(text);
  return t;
}

void fillHeadGrid(QCPColorMap* map, const HeadGrid& g) {
  map->data()->setSize(std::max(1, g.heads), std::max(1, g.layers));
  map->data()->setRange(QCPRange(0, std::max(0, g.heads - 1)), QCPRange(0, std::max(0, g.layers - 1)));
  for (int l = 0; l < g.layers; ++l)
    for (int h = 0; h < g.heads; ++h) map->data()->setCell(h, l, g.at(l, h));
  map->setDataRange(QCPRange(0, 1));
  map->parentPlot()->xAxis->setRange(-0.5, g.heads - 0.5);
  map->parentPlot()->yAxis->setRange(-0.5, g.layers - 0.5);
}

int integerTickStep(int count, int maxTicks) {
  maxTicks = std::max(1, maxTicks);
  for (int decade = 1;; decade *= 10)
    for (int m : {1, 2, 5}) {
      const int step = m * decade;
      if ((count + step - 1) / step <= maxTicks || step >= count) return step;
    }
}

QSharedPointer<QCPAxisTickerFixed> integerTicker(int count, int maxTicks) {
  QSharedPointer<QCPAxisTickerFixed> t(new QCPAxisTickerFixed);
  t->setTickStep(integerTickStep(count, maxTicks));
  t->setScaleStrategy(QCPAxisTickerFixed::ssNone);
  return t;
}

QScrollArea* viewScrollArea(QWidget* content) {
  auto* scroll = new QScrollArea;
  scroll->setObjectName(QStringLiteral("viewScroll"));
  scroll->setWidget(content);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  return scroll;
}

HeadCell headCellAt(double x, double y, int layers, int heads) {
  if (!std::isfinite(x) || !std::isfinite(y)) return {};
  const int h = int(std::floor(x + 0.5)), l = int(std::floor(y + 0.5));
  if (h < 0 || l < 0 || h >= heads || l >= layers) return {};
  return {l, h};
}

QString headCellTip(const HeadGrid& g, HeadCell c, const QString& what) {
  if (!c.valid() || c.layer >= g.layers || c.head >= g.heads || g.empty()) return {};
  const double v = g.at(c.layer, c.head);
  if (std::isnan(v))  // a layer a partial result has not reached yet
    return QStringLiteral("layer %1 head %2: not computed yet").arg(c.layer).arg(c.head);
  QString t = QStringLiteral("layer %1 head %2: %3").arg(c.layer).arg(c.head).arg(v, 0, 'f', 2);
  if (!what.isEmpty()) t += QStringLiteral(" (%1)").arg(what);
  return t;
}

HeadHeatmap::HeadHeatmap(const QString& scaleLabel, QWidget* parent)
    : QCustomPlot(parent), m_label(scaleLabel) {
  setMinimumSize(320, 200);
  m_map = makeColorMap(this, tr("head"), tr("layer"), scaleLabel);
  m_empty = addEmptyPlotText(this, tr("No run yet"));
  // A light cyan, apart from every colour of magma, so it reads on its black and pale yellow.
  m_mark = new QCPItemRect(this);
  m_mark->setPen(QPen(QColor(0x3d, 0xd6, 0xf5), 2));
  m_mark->setBrush(Qt::NoBrush);
  m_mark->setClipToAxisRect(true);
  m_mark->setVisible(false);
  setMouseTracking(true);
  setToolTip(tr("Hover a cell for its value; click it to show that head in the attention map "
                "and the alpha_k chart"));
  connect(this, &QCustomPlot::mousePress, this, &HeadHeatmap::onPress);
  connect(this, &QCustomPlot::mouseMove, this, &HeadHeatmap::onMove);
  setGrid(HeadGrid{});
}

void HeadHeatmap::setScaleLabel(const QString& label) {
  m_label = label;
  m_map->colorScale()->axis()->setLabel(label);
}

void HeadHeatmap::setGrid(const HeadGrid& g) {
  m_grid = g;
  // Empty (no run yet): the text instead of a colour map and its scale.
  m_empty->setVisible(g.empty());
  m_map->setVisible(!g.empty());
  showColorScale(this, m_map, !g.empty());
  if (g.empty()) {
    m_map->data()->clear();
  } else {
    fillHeadGrid(m_map, g);
    xAxis->setTicker(integerTicker(g.heads, 10));
    yAxis->setTicker(integerTicker(g.layers, 8));
  }
  setMarkedCell(m_marked);  // shown only while the cell is inside the new grid; replots
}

void HeadHeatmap::setMarkedCell(HeadCell c) {
  m_marked = c;
  const bool shown =
      c.valid() && !m_grid.empty() && c.layer < m_grid.layers && c.head < m_grid.heads;
  m_mark->setVisible(shown);
  if (shown) {
    // Inset a little, so the pen stays inside an edge cell instead of being cut by the axes.
    constexpr double kHalf = 0.45;
    m_mark->topLeft->setCoords(c.head - kHalf, c.layer + kHalf);
    m_mark->bottomRight->setCoords(c.head + kHalf, c.layer - kHalf);
  }
  replot();
}

HeadCell HeadHeatmap::cellAtPixel(const QPointF& pixel) const {
  if (m_grid.empty() || !axisRect()->rect().contains(pixel.toPoint())) return {};
  double x = 0, y = 0;
  m_map->pixelsToCoords(pixel, x, y);
  return headCellAt(x, y, m_grid.layers, m_grid.heads);
}

QPointF HeadHeatmap::pixelOfCell(int layer, int head) const {
  return m_map->coordsToPixels(double(head), double(layer));
}

void HeadHeatmap::onPress(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  const HeadCell c = cellAtPixel(e->position());
  if (c.valid()) Q_EMIT headChosen(c.layer, c.head);
}

void HeadHeatmap::onMove(QMouseEvent* e) {
  const QString tip = headCellTip(m_grid, cellAtPixel(e->position()), m_label);
  if (tip.isEmpty())
    QToolTip::hideText();
  else
    QToolTip::showText(e->globalPosition().toPoint(), tip, this);
}

}  // namespace sinkscope::gui
