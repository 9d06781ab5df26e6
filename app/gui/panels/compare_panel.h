// SPDX-License-Identifier: Apache-2.0
// View 5: the dense baseline against the current settings: the metrics, per-token KL over the
// prompt (titled, at least 220 px tall), and both greedy generations beside it with the first
// divergence highlighted (docs/gui.md, "Views").
#pragma once

#include <QWidget>

#include "app/gui/models/view_models.h"

class QCustomPlot;
class QCPTextElement;
class QCPItemText;
class QLabel;
class QTextBrowser;

namespace sinkscope::gui {

class ComparePanel : public QWidget {
  Q_OBJECT
 public:
  explicit ComparePanel(CompareView* view, QWidget* parent = nullptr);
  // For tests.
  QCustomPlot* klPlot() const { return m_plot; }
  QCPTextElement* klTitle() const { return m_title; }
 private:
  void rebuild();
  CompareView* m_view;
  QLabel* m_metrics;
  QCustomPlot* m_plot;
  QCPTextElement* m_title;
  QCPItemText* m_empty;  // shown while there is no comparison to plot
  QTextBrowser* m_dense;
  QTextBrowser* m_variant;
};

}  // namespace sinkscope::gui
