// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/sparsity_panel.h"

#include <cmath>

#include <QHeaderView>
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include "app/gui/models/head_stats_model.h"
#include "app/gui/panels/heatmap.h"
#include "app/gui/panels/palette.h"

namespace sinkscope::gui {

SparsityPanel::SparsityPanel(SparsityView* view, QAbstractItemModel* headStats, QWidget* parent)
    : QWidget(parent), m_view(view) {
  m_prefill = new HeadHeatmap(tr("skipped in prefill"));
  m_decode = new HeadHeatmap(tr("skipped in decode"));
  m_prefill->setObjectName(QStringLiteral("prefillMap"));
  m_decode->setObjectName(QStringLiteral("decodeMap"));
  m_tabs = new QTabWidget;
  m_tabs->setDocumentMode(true);
  m_tabs->addTab(m_prefill, tr("Prefill by head"));
  m_tabs->addTab(m_decode, tr("Decode by head"));
  m_tabs->setTabToolTip(0, tr("Share of visible KV tiles skipped per (layer, head) in the prefill"));
  m_tabs->setTabToolTip(1, tr("Share of visible KV tiles skipped per (layer, head) in decode"));
  for (HeadHeatmap* m : {m_prefill, m_decode})
    connect(m, &HeadHeatmap::headChosen, this, &SparsityPanel::headChosen);

  m_barsPlot = new QCustomPlot;
  m_barsPlot->setObjectName(QStringLiteral("layerBars"));
  m_barsPlot->setMinimumSize(320, 200);
  m_barsPrefill = new QCPBars(m_barsPlot->xAxis, m_barsPlot->yAxis);
  m_barsDecode = new QCPBars(m_barsPlot->xAxis, m_barsPlot->yAxis);
  m_barsPrefill->setName(tr("prefill"));
  m_barsDecode->setName(tr("decode"));
  m_barsPrefill->setBrush(palette::prefill());
  m_barsDecode->setBrush(palette::decode());
  m_barsPrefill->setPen(Qt::NoPen);
  m_barsDecode->setPen(Qt::NoPen);
  m_barsPrefill->setWidth(0.4);
  m_barsDecode->setWidth(0.4);
  m_barsPlot->xAxis->setLabel(tr("layer"));
  m_barsPlot->yAxis->setLabel(tr("skipped tiles"));
  m_barsPlot->yAxis->setRange(0, 1);
  m_barsPlot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_barsPlot->axisRect()->setRangeZoom(Qt::Horizontal);
  m_barsPlot->axisRect()->setRangeDrag(Qt::Horizontal);
  // The legend in a row of its own above the axis rect, never over the bars.
  m_barsPlot->legend->setVisible(true);
  m_barsPlot->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  m_barsPlot->legend->setBorderPen(Qt::NoPen);
  m_barsPlot->plotLayout()->insertRow(0);
  m_barsPlot->plotLayout()->addElement(0, 0, m_barsPlot->legend);
  m_barsPlot->plotLayout()->setRowStretchFactor(0, 0.001);
  m_barsPlot->legend->setMargins(QMargins(4, 2, 4, 0));
  m_tabs->addTab(m_barsPlot, tr("By layer"));
  m_tabs->setTabToolTip(2, tr("Share of visible KV tiles skipped per layer, prefill and decode"));

  m_sorted = new QSortFilterProxyModel(this);
  m_sorted->setSourceModel(headStats);
  m_sorted->setSortRole(HeadStatsModel::SortRole);
  m_table = new QTableView;
  m_table->setObjectName(QStringLiteral("headTable"));
  m_table->setModel(m_sorted);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(-1, Qt::AscendingOrder);  // the model's order until a header is clicked
  m_table->verticalHeader()->hide();
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setMinimumWidth(240);
  m_table->setToolTip(tr("Click a header to sort; double-click a row to show that head"));
  connect(m_table, &QTableView::doubleClicked, this, [this](const QModelIndex& i) {
    const QModelIndex src = m_sorted->mapToSource(i);
    const QAbstractItemModel* m = src.model();
    Q_EMIT headChosen(m->index(src.row(), HeadStatsModel::Layer).data(HeadStatsModel::SortRole).toInt(),
                      m->index(src.row(), HeadStatsModel::Head).data(HeadStatsModel::SortRole).toInt());
  });

  m_summary = new QLabel;
  m_summary->setWordWrap(true);
  auto* split = new QSplitter(Qt::Horizontal);
  split->setChildrenCollapsible(false);
  split->addWidget(m_tabs);
  split->addWidget(m_table);
  split->setSizes({500, 400});  // scaled to the width the splitter gets
  // Below the charts' minimum sizes (a small dock) the charts scroll rather than squash; the
  // summary stays outside the scroll area, wrapped to the view's width.
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(4, 4, 4, 4);
  lay->addWidget(m_summary);
  lay->addWidget(viewScrollArea(split), 1);
  connect(m_view, &SparsityView::changed, this, &SparsityPanel::rebuild);
}

void SparsityPanel::setMarkedHead(int layer, int head) {
  for (HeadHeatmap* m : {m_prefill, m_decode}) m->setMarkedCell({layer, head});
}

void SparsityPanel::rebuild() {
  m_prefill->setGrid(m_view->prefill());
  m_decode->setGrid(m_view->decode());
  QVector<double> xp, xd, p, d;
  const int layers = int(m_view->layerPrefill().size());
  for (int l = 0; l < layers; ++l) {
    if (std::isnan(m_view->layerPrefill()[size_t(l)])) continue;  // not reached yet (partial)
    xp << l - 0.2;
    xd << l + 0.2;
    p << m_view->layerPrefill()[size_t(l)];
    d << m_view->layerDecode()[size_t(l)];
  }
  m_barsPrefill->setData(xp, p);
  m_barsDecode->setData(xd, d);
  m_barsPlot->xAxis->setTicker(integerTicker(layers, 8));
  m_barsPlot->xAxis->setRange(-0.7, std::max(1, layers) - 0.3);
  m_barsPlot->replot();
  m_summary->setText(m_view->summary());
}

}  // namespace sinkscope::gui
