// SPDX-License-Identifier: Apache-2.0
// View 3: sparsity. Layers x heads heatmaps of the skipped-tile fraction in prefill and decode,
// per-layer bars of both, and the per-head table.
#pragma once

#include <QWidget>

#include "app/gui/models/view_models.h"

class QCustomPlot;
class QCPColorMap;
class QCPBars;
class QLabel;
class QAbstractItemModel;

namespace sinkscope::gui {

class SparsityPanel : public QWidget {
  Q_OBJECT
 public:
  SparsityPanel(SparsityView* view, QAbstractItemModel* headStats, QWidget* parent = nullptr);
 private:
  void rebuild();
  SparsityView* m_view;
  QCustomPlot* m_prefillPlot;
  QCustomPlot* m_decodePlot;
  QCPColorMap* m_prefill;
  QCPColorMap* m_decode;
  QCustomPlot* m_barsPlot;
  QCPBars* m_barsPrefill;
  QCPBars* m_barsDecode;
  QLabel* m_summary;
};

}  // namespace sinkscope::gui
