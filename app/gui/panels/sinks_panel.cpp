// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/sinks_panel.h"

#include <algorithm>

#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSplitter>
#include <QValueAxis>
#include <QVBoxLayout>

#include "app/gui/panels/heatmap.h"
#include "app/gui/panels/palette.h"

namespace sinkscope::gui {

namespace {
constexpr int kAlphaKeys = 64;  // the keys the alpha chart opens on (the detector's default)
}  // namespace

SinksPanel::SinksPanel(SinksView* view, QWidget* parent) : QWidget(parent), m_view(view) {
  auto* chart = new QChart;
  chart->setTitle(tr("alpha_k of one head"));
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setMargins(QMargins(4, 4, 4, 4));
  m_alpha = new QLineSeries;
  m_alpha->setName(tr("alpha_k"));
  m_alpha->setPen(QPen(palette::categorical(0), 2));
  m_eps = new QLineSeries;
  m_eps->setName(tr("epsilon = %1").arg(SinksView::kEpsilon));
  m_eps->setPen(QPen(palette::threshold(), 1.5, Qt::DashLine));
  m_sinks = new QScatterSeries;
  m_sinks->setName(tr("sinks of this head"));
  m_sinks->setMarkerSize(9);
  m_sinks->setColor(palette::sinkMark());
  m_sinks->setBorderColor(palette::sinkMark().darker(150));
  chart->addSeries(m_alpha);
  chart->addSeries(m_eps);
  chart->addSeries(m_sinks);
  m_x = new QValueAxis;
  m_x->setTitleText(tr("key position k"));
  m_x->setLabelFormat(QStringLiteral("%d"));
  m_x->setTickType(QValueAxis::TicksDynamic);
  m_x->setTickAnchor(0);
  m_y = new QValueAxis;
  // A little room past 0 and 1 (ticks stay at 0.0 .. 1.0), so a sink marker at alpha_k = 1, the
  // common case at position 0, is drawn whole instead of cut by the plot's edge.
  m_y->setRange(-0.03, 1.06);
  m_y->setTickType(QValueAxis::TicksDynamic);
  m_y->setTickAnchor(0);
  m_y->setTickInterval(0.2);
  m_y->setLabelFormat(QStringLiteral("%.1f"));
  m_y->setTitleText(tr("alpha_k"));
  chart->addAxis(m_x, Qt::AlignBottom);
  chart->addAxis(m_y, Qt::AlignLeft);
  for (QXYSeries* s : std::initializer_list<QXYSeries*>{m_alpha, m_eps, m_sinks}) {
    s->attachAxis(m_x);
    s->attachAxis(m_y);
  }
  m_chartView = new QChartView(chart);
  m_chartView->setObjectName(QStringLiteral("alphaChart"));
  m_chartView->setRenderHint(QPainter::Antialiasing);
  m_chartView->setRubberBand(QChartView::HorizontalRubberBand);
  m_chartView->setMinimumSize(360, 220);
  m_chartView->setToolTip(tr("alpha_k: mean attention on key k over the queries i >= k that see "
                             "it. Drag to zoom, right-click to zoom out."));
  m_heatmap = new HeadHeatmap(tr("mass on first S keys"));
  m_heatmap->setObjectName(QStringLiteral("firstMassMap"));
  connect(m_heatmap, &HeadHeatmap::headChosen, this, &SinksPanel::headChosen);
  m_text = new QLabel;
  m_text->setWordWrap(true);
  m_text->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* split = new QSplitter(Qt::Horizontal);
  split->setChildrenCollapsible(false);
  split->addWidget(m_chartView);
  split->addWidget(m_heatmap);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  split->setSizes({550, 450});  // scaled to the width the splitter gets
  // Below the charts' minimum sizes (a small dock) the charts scroll rather than squash; the text
  // stays outside the scroll area, wrapped to the view's width.
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(4, 4, 4, 4);
  lay->addWidget(viewScrollArea(split), 1);
  lay->addWidget(m_text);
  connect(m_view, &SinksView::changed, this, &SinksPanel::rebuild);
}

void SinksPanel::rebuild() {
  QList<QPointF> pts, sinks;
  const auto& a = m_view->alpha();
  for (size_t k = 0; k < a.size(); ++k) pts.append(QPointF(double(k), a[k]));
  for (int k : m_view->headSinks())
    if (size_t(k) < a.size()) sinks.append(QPointF(double(k), a[size_t(k)]));
  m_alpha->replace(pts);
  m_sinks->replace(sinks);
  // The title names the head shown, and why when no one picked it.
  const QString title = tr("alpha_k of layer %1 head %2").arg(m_view->layer()).arg(m_view->head());
  m_chartView->chart()->setTitle(m_view->headSource() == SinksView::HeadSource::kStrongest
                                     ? tr("%1 (strongest in this run)").arg(title)
                                     : title);
  // Sinks sit among the first keys: the chart opens on the first 64 (or up to this head's last
  // sink), where a long prompt's near-zero tail would squeeze them into the axis.
  const int total = int(a.size());
  const int lastSink = m_view->headSinks().isEmpty() ? 0 : m_view->headSinks().back();
  const int shown = std::min(total, std::max(kAlphaKeys, lastSink + 8));
  const double n = std::max<double>(1, double(shown) - 1);
  // Room left of k = 0 (2.5 % of the range, at least half a key, less than one tick step) so
  // the marker of a sink at k = 0 is drawn whole.
  const double left = -std::max(0.5, 0.025 * n);
  m_eps->replace(QList<QPointF>{{left, SinksView::kEpsilon}, {n, SinksView::kEpsilon}});
  m_x->setRange(left, n);
  m_x->setTickInterval(integerTickStep(shown, 8));
  // Another head than the map's has the detector's alpha, over the prompt's first keys only.
  if (m_view->detectorAlpha())
    m_x->setTitleText(tr("key position k (first %1 of %2, from the sink detector)")
                          .arg(shown)
                          .arg(std::max(total, m_view->promptKeys())));
  else
    m_x->setTitleText(shown < total ? tr("key position k (first %1 of %2)").arg(shown).arg(total)
                                    : tr("key position k"));
  const HeadGrid& g = m_view->firstMass();
  m_heatmap->setScaleLabel(tr("mass on first %1 keys").arg(m_view->firstMassKeys()));
  m_heatmap->setGrid(g);
  m_heatmap->setMarkedCell({m_view->layer(), m_view->head()});  // the chart's head
  QStringList lines;
  for (const QString& s : {m_view->headText(), m_view->verdict(), m_view->recommendation()})
    if (!s.isEmpty()) lines << s;
  m_text->setText(lines.join(QLatin1Char('\n')));
}

}  // namespace sinkscope::gui
