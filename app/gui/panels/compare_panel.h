// SPDX-License-Identifier: Apache-2.0
// View 5: the dense baseline against the current settings: the metrics, per-token KL over the
// prompt, and both greedy generations side by side with the first divergence highlighted.
#pragma once

#include <QWidget>

#include "app/gui/models/view_models.h"

class QCustomPlot;
class QLabel;
class QTextBrowser;

namespace sinkscope::gui {

class ComparePanel : public QWidget {
  Q_OBJECT
 public:
  explicit ComparePanel(CompareView* view, QWidget* parent = nullptr);
 private:
  void rebuild();
  CompareView* m_view;
  QLabel* m_metrics;
  QCustomPlot* m_plot;
  QTextBrowser* m_dense;
  QTextBrowser* m_variant;
};

}  // namespace sinkscope::gui
