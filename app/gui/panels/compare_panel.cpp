// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/compare_panel.h"

#include <QGroupBox>
#include <QLabel>
#include <QSplitter>
#include <QTextBrowser>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include "app/gui/models/token_list_model.h"

namespace sinkscope::gui {

namespace {

// Tokens as HTML, from `divergence` on highlighted (-1: none).
QString tokensHtml(const std::vector<std::string>& pieces, int divergence) {
  QString html = QStringLiteral("<p style='font-family:monospace'>");
  for (size_t i = 0; i < pieces.size(); ++i) {
    QString t = TokenListModel::visiblePiece(pieces[i]).toHtmlEscaped();
    if (divergence >= 0 && int(i) >= divergence)
      t = QStringLiteral("<span style='background:%1'>%2</span>")
              .arg(int(i) == divergence ? QStringLiteral("#ff8080") : QStringLiteral("#ffd0d0"), t);
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
  m_metrics = new QLabel(this);
  m_metrics->setWordWrap(true);
  m_metrics->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_plot = new QCustomPlot(this);
  m_plot->addGraph();
  m_plot->graph(0)->setLineStyle(QCPGraph::lsStepCenter);
  m_plot->graph(0)->setBrush(QColor(200, 80, 80, 60));
  m_plot->graph(0)->setPen(QPen(QColor(200, 60, 60)));
  m_plot->xAxis->setLabel(tr("prompt position (predicting the next token)"));
  m_plot->yAxis->setLabel(tr("KL(dense || variant), nats"));
  m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_dense = new QTextBrowser(this);
  m_variant = new QTextBrowser(this);
  auto* gens = new QSplitter(Qt::Horizontal, this);
  gens->addWidget(boxed(tr("Dense baseline (greedy)"), m_dense));
  gens->addWidget(boxed(tr("Current settings (greedy)"), m_variant));
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_plot);
  split->addWidget(gens);
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(m_metrics);
  lay->addWidget(split, 1);
  connect(m_view, &CompareView::changed, this, &ComparePanel::rebuild);
}

void ComparePanel::rebuild() {
  m_metrics->setText(m_view->metricsText());
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
  m_plot->xAxis->setRange(-0.5, double(x.size()) - 0.5);
  m_plot->yAxis->setRange(0, mx * 1.1);
  m_plot->replot();
  m_dense->setHtml(tokensHtml(c.densePieces, c.firstDivergence));
  m_variant->setHtml(tokensHtml(m_view->result()->pieces, c.firstDivergence));
}

}  // namespace sinkscope::gui
