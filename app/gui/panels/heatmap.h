// SPDX-License-Identifier: Apache-2.0
// Helpers for QCustomPlot colour maps (layers x heads heatmaps, the attention map), and the
// layers x heads heatmap widget of the Sinks and Sparsity views: magma from palette.h, integer
// ticks, a tooltip per cell, a click on a cell picks that head (docs/gui.md, "Views").
#pragma once

#include <qcustomplot.h>

#include "app/gui/models/view_models.h"
#include "app/gui/panels/palette.h"

namespace sinkscope::gui {

// A plot with one colour map and a colour scale; returned map is owned by the plot.
QCPColorMap* makeColorMap(QCustomPlot* plot, const QString& xLabel, const QString& yLabel,
                          const QString& scaleLabel,
                          const QCPColorGradient& gradient = palette::magnitude());
// A text item centred in the plot's axis rect (object name "emptyPlotText"), for a plot with
// nothing to show yet; owned by the plot.
QCPItemText* addEmptyPlotText(QCustomPlot* plot, const QString& text);
// Shows or hides a colour map's scale (makeColorMap's, right of the axes): hidden, it also leaves
// the plot's layout, so the axes take its width.
void showColorScale(QCustomPlot* plot, QCPColorMap* map, bool shown);
// Fills a layers x heads grid (x = head, y = layer) with values in [0, 1].
void fillHeadGrid(QCPColorMap* map, const HeadGrid& g);

// The tick step (1, 2, 5, 10, 20, ...) that labels 0 .. count-1 with at most maxTicks ticks.
int integerTickStep(int count, int maxTicks);
// A ticker of whole numbers with that step, for axes of layers, heads or positions.
QSharedPointer<QCPAxisTickerFixed> integerTicker(int count, int maxTicks);

// A frameless scroll area (object name "viewScroll") that stretches `content` to the view and
// scrolls only below the content's minimum size, so a small dock never squashes the charts.
QScrollArea* viewScrollArea(QWidget* content);

// A cell of a layers x heads grid; layer < 0: none.
struct HeadCell {
  int layer = -1, head = -1;
  bool valid() const { return layer >= 0 && head >= 0; }
};
// The cell under the data coordinates (x = head, y = layer) of a heatmap filled by
// fillHeadGrid: cell (l, h) spans [h - 0.5, h + 0.5) x [l - 0.5, l + 0.5). None outside.
HeadCell headCellAt(double x, double y, int layers, int heads);
// The tooltip of a cell: "layer L head H: 0.87" (the value's name after it when given).
QString headCellTip(const HeadGrid& g, HeadCell c, const QString& what = {});

class HeadHeatmap : public QCustomPlot {
  Q_OBJECT
 public:
  // scaleLabel names the value (colour scale title and tooltip).
  explicit HeadHeatmap(const QString& scaleLabel, QWidget* parent = nullptr);
  void setGrid(const HeadGrid& g);
  void setScaleLabel(const QString& label);
  const HeadGrid& grid() const { return m_grid; }
  QCPColorMap* colorMap() const { return m_map; }
  // The cell under a widget pixel, through the colour map's data coordinates; none outside the
  // axis rect or the grid.
  HeadCell cellAtPixel(const QPointF& pixel) const;
  // The widget pixel at the centre of a cell (tests, keyboard-free picking).
  QPointF pixelOfCell(int layer, int head) const;
  // Outlines one cell (the head another chart shows); an invalid cell, or one outside the grid,
  // outlines none.
  void setMarkedCell(HeadCell c);
  HeadCell markedCell() const { return m_marked; }
 Q_SIGNALS:
  void headChosen(int layer, int head);  // a left click on a cell

 private:
  void onPress(QMouseEvent* e);
  void onMove(QMouseEvent* e);
  QCPColorMap* m_map;
  QCPItemText* m_empty;  // shown while the grid is empty (no run yet)
  QCPItemRect* m_mark;   // the marked cell's outline
  HeadCell m_marked;
  HeadGrid m_grid;
  QString m_label;
};

}  // namespace sinkscope::gui
