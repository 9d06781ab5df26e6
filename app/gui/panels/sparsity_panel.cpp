// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/sparsity_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "app/gui/panels/heatmap.h"

namespace sinkscope::gui {

SparsityPanel::SparsityPanel(SparsityView* view, QAbstractItemModel* headStats, QWidget* parent)
    : QWidget(parent), m_view(view) {
  m_prefillPlot = new QCustomPlot(this);
  m_prefill = makeColorMap(m_prefillPlot, tr("head"), tr("layer"), tr("skipped (prefill)"),
                           QCPColorGradient::gpJet);
  m_decodePlot = new QCustomPlot(this);
  m_decode = makeColorMap(m_decodePlot, tr("head"), tr("layer"), tr("skipped (decode)"),
                          QCPColorGradient::gpJet);
  m_barsPlot = new QCustomPlot(this);
  m_barsPrefill = new QCPBars(m_barsPlot->xAxis, m_barsPlot->yAxis);
  m_barsDecode = new QCPBars(m_barsPlot->xAxis, m_barsPlot->yAxis);
  m_barsPrefill->setName(tr("prefill"));
  m_barsDecode->setName(tr("decode"));
  m_barsPrefill->setBrush(QColor(70, 130, 200));
  m_barsDecode->setBrush(QColor(230, 140, 50));
  m_barsPrefill->setWidth(0.4);
  m_barsDecode->setWidth(0.4);
  m_barsPlot->xAxis->setLabel(tr("layer"));
  m_barsPlot->yAxis->setLabel(tr("skipped tiles"));
  m_barsPlot->yAxis->setRange(0, 1);
  m_barsPlot->legend->setVisible(true);
  m_barsPlot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_barsPlot->axisRect()->setRangeZoom(Qt::Horizontal);
  m_barsPlot->axisRect()->setRangeDrag(Qt::Horizontal);
  auto* table = new QTableView(this);
  table->setModel(headStats);
  table->verticalHeader()->hide();
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_summary = new QLabel(this);
  m_summary->setWordWrap(true);
  auto* maps = new QSplitter(Qt::Horizontal, this);
  maps->addWidget(m_prefillPlot);
  maps->addWidget(m_decodePlot);
  auto* lower = new QSplitter(Qt::Horizontal, this);
  lower->addWidget(m_barsPlot);
  lower->addWidget(table);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(maps);
  split->addWidget(lower);
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(m_summary);
  lay->addWidget(split, 1);
  connect(m_view, &SparsityView::changed, this, &SparsityPanel::rebuild);
}

void SparsityPanel::rebuild() {
  if (m_view->hasData()) {
    fillHeadGrid(m_prefill, m_view->prefill());
    fillHeadGrid(m_decode, m_view->decode());
    QVector<double> x, p, d;
    for (size_t l = 0; l < m_view->layerPrefill().size(); ++l) {
      x << double(l);
      p << m_view->layerPrefill()[l];
      d << m_view->layerDecode()[l];
    }
    QVector<double> xp = x, xd = x;
    for (auto& v : xp) v -= 0.2;
    for (auto& v : xd) v += 0.2;
    m_barsPrefill->setData(xp, p);
    m_barsDecode->setData(xd, d);
    m_barsPlot->xAxis->setRange(-0.7, double(x.size()) - 0.3);
  }
  m_prefillPlot->replot();
  m_decodePlot->replot();
  m_barsPlot->replot();
  m_summary->setText(m_view->summary());
}

}  // namespace sinkscope::gui
