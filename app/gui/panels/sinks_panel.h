// SPDX-License-Identifier: Apache-2.0
// View 2: sinks. alpha_k by key position for the map's head (Qt Charts) with the epsilon line, a
// layers x heads heatmap of the attention mass on the first S keys, and the recommendation.
#pragma once

#include <QWidget>

#include "app/gui/models/view_models.h"

class QCustomPlot;
class QCPColorMap;
class QLabel;
class QChartView;
class QLineSeries;
class QValueAxis;

namespace sinkscope::gui {

class SinksPanel : public QWidget {
  Q_OBJECT
 public:
  explicit SinksPanel(SinksView* view, QWidget* parent = nullptr);
 private:
  void rebuild();
  SinksView* m_view;
  QChartView* m_chartView;
  QLineSeries* m_alpha;
  QLineSeries* m_eps;
  QValueAxis* m_x;
  QValueAxis* m_y;
  QCustomPlot* m_plot;
  QCPColorMap* m_map;
  QLabel* m_text;
};

}  // namespace sinkscope::gui
