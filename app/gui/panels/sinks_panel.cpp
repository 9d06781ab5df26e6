// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/sinks_panel.h"

#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLineSeries>
#include <QSplitter>
#include <QValueAxis>
#include <QVBoxLayout>

#include "app/gui/panels/heatmap.h"

namespace sinkscope::gui {

SinksPanel::SinksPanel(SinksView* view, QWidget* parent) : QWidget(parent), m_view(view) {
  auto* chart = new QChart;
  chart->setTitle(tr("alpha_k: mean attention on key k over queries i >= k"));
  chart->legend()->setAlignment(Qt::AlignBottom);
  m_alpha = new QLineSeries;
  m_alpha->setName(tr("alpha_k"));
  m_eps = new QLineSeries;
  m_eps->setName(tr("sink threshold epsilon = %1").arg(SinksView::kEpsilon));
  m_eps->setPen(QPen(Qt::red, 1, Qt::DashLine));
  chart->addSeries(m_alpha);
  chart->addSeries(m_eps);
  m_x = new QValueAxis;
  m_x->setTitleText(tr("key position"));
  m_x->setLabelFormat(QStringLiteral("%d"));
  m_y = new QValueAxis;
  m_y->setRange(0, 1);
  m_y->setTitleText(tr("alpha"));
  chart->addAxis(m_x, Qt::AlignBottom);
  chart->addAxis(m_y, Qt::AlignLeft);
  for (QLineSeries* s : {m_alpha, m_eps}) {
    s->attachAxis(m_x);
    s->attachAxis(m_y);
  }
  m_chartView = new QChartView(chart, this);
  m_chartView->setRenderHint(QPainter::Antialiasing);
  m_chartView->setRubberBand(QChartView::HorizontalRubberBand);
  m_plot = new QCustomPlot(this);
  m_map = makeColorMap(m_plot, tr("head"), tr("layer"), tr("mass on first S keys"),
                       QCPColorGradient::gpHot);
  m_text = new QLabel(this);
  m_text->setWordWrap(true);
  m_text->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(m_chartView);
  split->addWidget(m_plot);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(split, 1);
  lay->addWidget(m_text);
  connect(m_view, &SinksView::changed, this, &SinksPanel::rebuild);
}

void SinksPanel::rebuild() {
  QList<QPointF> pts;
  const auto& a = m_view->alpha();
  for (size_t k = 0; k < a.size(); ++k) pts.append(QPointF(double(k), a[k]));
  m_alpha->replace(pts);
  m_alpha->setName(tr("alpha_k, layer %1 head %2").arg(m_view->layer()).arg(m_view->head()));
  const double n = std::max<double>(1, double(a.size()) - 1);
  m_eps->replace(QList<QPointF>{{0, SinksView::kEpsilon}, {n, SinksView::kEpsilon}});
  m_x->setRange(0, n);
  const HeadGrid& g = m_view->firstMass();
  if (!g.empty()) {
    fillHeadGrid(m_map, g);
    m_map->colorScale()->axis()->setLabel(tr("mass on first %1 keys").arg(m_view->firstMassKeys()));
  }
  m_plot->replot();
  m_text->setText(m_view->recommendation());
}

}  // namespace sinkscope::gui
