// SPDX-License-Identifier: Apache-2.0
// View 3: sparsity. Tabs of layers x heads heatmaps of the skipped-tile fraction in prefill and
// decode (hover for values, click a cell to pick that head) and of per-layer bars of both, beside
// the per-head table, sortable by any column (docs/gui.md, "Views").
#pragma once

#include <QWidget>

#include "app/gui/models/view_models.h"

class QCustomPlot;
class QCPBars;
class QLabel;
class QAbstractItemModel;
class QSortFilterProxyModel;
class QTabWidget;
class QTableView;

namespace sinkscope::gui {

class HeadHeatmap;

class SparsityPanel : public QWidget {
  Q_OBJECT
 public:
  // headStats: a per-head table whose Qt::UserRole holds each cell's number (HeadStatsModel);
  // the table sorts by it.
  SparsityPanel(SparsityView* view, QAbstractItemModel* headStats, QWidget* parent = nullptr);
  // For tests.
  HeadHeatmap* prefillMap() const { return m_prefill; }
  HeadHeatmap* decodeMap() const { return m_decode; }
  QTabWidget* mapTabs() const { return m_tabs; }
  QCustomPlot* barsPlot() const { return m_barsPlot; }
  QTableView* table() const { return m_table; }
  // Outlines the head the attention map shows (whose skip mask it draws) in both heatmaps.
  void setMarkedHead(int layer, int head);
 Q_SIGNALS:
  void headChosen(int layer, int head);  // a click on a heatmap cell, a double-click on a row
 private:
  void rebuild();
  SparsityView* m_view;
  QTabWidget* m_tabs;
  HeadHeatmap* m_prefill;
  HeadHeatmap* m_decode;
  QCustomPlot* m_barsPlot;
  QCPBars* m_barsPrefill;
  QCPBars* m_barsDecode;
  QTableView* m_table;
  QSortFilterProxyModel* m_sorted;
  QLabel* m_summary;
};

}  // namespace sinkscope::gui
