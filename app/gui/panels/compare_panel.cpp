// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/compare_panel.h"

#include <QGroupBox>
#include <QLabel>
#include <QSplitter>
#include <QTextBrowser>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include "app/gui/models/token_list_model.h"
#include "app/gui/panels/heatmap.h"
#include "app/gui/panels/palette.h"

namespace sinkscope::gui {

namespace {

// Tokens as HTML, from `divergence` on highlighted (-1: none).
QString tokensHtml(const std::vector<std::string>& pieces, int divergence) {
  QString html = QStringLiteral("<p style='font-family:monospace'>");
  for (size_t i = 0; i < pieces.size(); ++i) {
    QString t = TokenListModel::visiblePiece(pieces[i]).toHtmlEscaped();
    if (divergence >= 0 && int(i) >= divergence)
      t = QStringLiteral("<span style='background:%1'>%2</span>")
              .arg(int(i) == divergence ? palette::divergence().name() : palette::afterDivergence().name(), t);
    html += t;
  }
  return html + QStringLiteral("</p>");
}

QGroupBox* boxed(const QString& title, QWidget* w) {
  auto* box = new QGroupBox(title);
  auto* l = new QVBoxLayout(box);
  l->setContentsMargins(2, 2, 2, 2);
  l->addWidget(w);
  return box;
}

}  // namespace

ComparePanel::ComparePanel(CompareView* view, QWidget* parent) : QWidget(parent), m_view(view) {
  m_metrics = new QLabel;
  m_metrics->setWordWrap(true);
  m_metrics->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_plot = new QCustomPlot;
  m_plot->setObjectName(QStringLiteral("klPlot"));
  m_plot->setMinimumSize(360, 220);
  m_plot->addGraph();
  const QColor c = palette::variant();
  m_plot->graph(0)->setLineStyle(QCPGraph::lsStepCenter);
  m_plot->graph(0)->setBrush(QColor(c.red(), c.green(), c.blue(), 70));
  m_plot->graph(0)->setPen(QPen(c, 1.5));
  // The title in a row of its own above the axis rect: it takes the plot's full width.
  m_plot->plotLayout()->insertRow(0);
  m_title = new QCPTextElement(m_plot, tr("KL(dense || variant) per prompt position"),
                               QFont(font().family(), font().pointSize() + 1, QFont::Bold));
  m_plot->plotLayout()->addElement(0, 0, m_title);
  m_plot->xAxis->setLabel(tr("prompt position"));
  m_plot->yAxis->setLabel(tr("KL, nats"));
  m_plot->setToolTip(tr("KL divergence of the next-token distribution, dense baseline against "
                        "the current settings; wheel zooms, drag pans"));
  m_empty = addEmptyPlotText(
      m_plot, tr("No comparison yet\n(run with \"compare with the dense baseline\")"));
  m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_plot->axisRect()->setRangeZoom(Qt::Horizontal);
  m_plot->axisRect()->setRangeDrag(Qt::Horizontal);
  m_dense = new QTextBrowser;
  m_variant = new QTextBrowser;
  auto* gens = new QSplitter(Qt::Vertical);
  gens->setChildrenCollapsible(false);
  gens->addWidget(boxed(tr("Dense baseline (greedy)"), m_dense));
  gens->addWidget(boxed(tr("Current settings (greedy)"), m_variant));
  gens->setMinimumWidth(240);
  auto* split = new QSplitter(Qt::Horizontal);
  split->setChildrenCollapsible(false);
  split->addWidget(m_plot);
  split->addWidget(gens);
  split->setSizes({600, 400});  // scaled to the width the splitter gets
  // Below the plot's minimum size (a small dock) the plot scrolls rather than squashes; the
  // metrics stay outside the scroll area, wrapped to the view's width.
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(4, 4, 4, 4);
  lay->addWidget(m_metrics);
  lay->addWidget(viewScrollArea(split), 1);
  connect(m_view, &CompareView::changed, this, &ComparePanel::rebuild);
}

void ComparePanel::rebuild() {
  m_metrics->setText(m_view->metricsText());
  m_empty->setVisible(!m_view->hasData());
  if (!m_view->hasData()) {
    m_plot->graph(0)->data()->clear();
    m_plot->replot();
    return;
  }
  const Comparison& c = m_view->comparison();
  QVector<double> x, y;
  double mx = 1e-6;
  for (size_t i = 0; i < c.klPerToken.size(); ++i) {
    x << double(i);
    y << c.klPerToken[i];
    mx = std::max(mx, c.klPerToken[i]);
  }
  m_plot->graph(0)->setData(x, y);
  m_plot->xAxis->setTicker(integerTicker(int(x.size()), 8));
  m_plot->xAxis->setRange(-0.5, double(x.size()) - 0.5);
  m_plot->yAxis->setRange(0, mx * 1.1);
  m_plot->replot();
  m_dense->setHtml(tokensHtml(c.densePieces, c.firstDivergence));
  m_variant->setHtml(tokensHtml(m_view->result()->pieces, c.firstDivergence));
}

}  // namespace sinkscope::gui
