// SPDX-License-Identifier: Apache-2.0
// Helpers for QCustomPlot colour maps (layers x heads heatmaps, the attention map).
#pragma once

#include <qcustomplot.h>

#include "app/gui/models/view_models.h"

namespace sinkscope::gui {

// A plot with one colour map and a colour scale; returned map is owned by the plot.
QCPColorMap* makeColorMap(QCustomPlot* plot, const QString& xLabel, const QString& yLabel,
                          const QString& scaleLabel, QCPColorGradient::GradientPreset gradient);
// Fills a layers x heads grid (x = head, y = layer) with values in [0, 1].
void fillHeadGrid(QCPColorMap* map, const HeadGrid& g);

}  // namespace sinkscope::gui
