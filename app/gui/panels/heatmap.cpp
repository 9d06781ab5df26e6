// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/heatmap.h"

namespace sinkscope::gui {

QCPColorMap* makeColorMap(QCustomPlot* plot, const QString& xLabel, const QString& yLabel,
                          const QString& scaleLabel, QCPColorGradient::GradientPreset gradient) {
  plot->xAxis->setLabel(xLabel);
  plot->yAxis->setLabel(yLabel);
  auto* map = new QCPColorMap(plot->xAxis, plot->yAxis);
  auto* scale = new QCPColorScale(plot);
  plot->plotLayout()->addElement(0, 1, scale);
  scale->setType(QCPAxis::atRight);
  scale->axis()->setLabel(scaleLabel);
  map->setColorScale(scale);
  map->setGradient(QCPColorGradient(gradient));
  map->setInterpolate(false);
  auto* margins = new QCPMarginGroup(plot);
  plot->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  scale->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  return map;
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

}  // namespace sinkscope::gui
