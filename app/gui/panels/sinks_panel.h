// SPDX-License-Identifier: Apache-2.0
// View 2: sinks. alpha_k by key position for one head (Qt Charts: the run's strongest sink until
// the user picks a head, then the picked head; SinksView) with the epsilon line and this head's
// sinks marked, a layers x heads heatmap of the attention mass on the first S keys (hover for
// values, click a cell to pick that head), and three lines of text: this head's sinks, the
// model-level verdict and the recommendation (docs/architecture.md, "Sink detection";
// docs/gui.md, "Views").
#pragma once

#include <QWidget>

#include "app/gui/models/view_models.h"

class QLabel;
class QChartView;
class QLineSeries;
class QScatterSeries;
class QValueAxis;

namespace sinkscope::gui {

class HeadHeatmap;

class SinksPanel : public QWidget {
  Q_OBJECT
 public:
  explicit SinksPanel(SinksView* view, QWidget* parent = nullptr);
  // For tests: the two charts and the text.
  QChartView* alphaChart() const { return m_chartView; }
  HeadHeatmap* heatmap() const { return m_heatmap; }
  QLabel* text() const { return m_text; }
 Q_SIGNALS:
  void headChosen(int layer, int head);  // a click on a heatmap cell
 private:
  void rebuild();
  SinksView* m_view;
  QChartView* m_chartView;
  QLineSeries* m_alpha;
  QLineSeries* m_eps;
  QScatterSeries* m_sinks;
  QValueAxis* m_x;
  QValueAxis* m_y;
  HeadHeatmap* m_heatmap;
  QLabel* m_text;
};

}  // namespace sinkscope::gui
