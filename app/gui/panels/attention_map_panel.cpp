// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/attention_map_panel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QSpinBox>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <limits>

#include "app/gui/panels/heatmap.h"
#include "app/gui/panels/palette.h"

namespace sinkscope::gui {

QString skippedOutlineCaption(int drawn, int total) {
  if (drawn >= total) return QObject::tr("%1 skipped tiles outlined").arg(total);
  return QObject::tr("%1 of %2 skipped tiles outlined (the first %1 in query order: more would "
                     "slow the plot)")
      .arg(drawn)
      .arg(total);
}

double mapCellValue(const AttentionMap& a, int row, int col, const Visibility& vis) {
  const int q0 = a.rowStart[size_t(row)], q1 = a.rowStart[size_t(row) + 1];
  const int k0 = a.colStart[size_t(col)], k1 = a.colStart[size_t(col) + 1];
  if (!vis.anyVisible(q0, q1, k0, k1)) return std::numeric_limits<double>::quiet_NaN();
  const double mean = a.cells[size_t(row) * a.cols + col];
  return a.cols < a.nTokens ? mean * double(k1 - k0) : mean;
}

AttentionMapPanel::AttentionMapPanel(AttentionMapView* view, QWidget* parent)
    : QWidget(parent), m_view(view) {
  auto* top = new QHBoxLayout;
  m_layer = new QSpinBox(this);
  m_head = new QSpinBox(this);
  m_layer->setObjectName(QStringLiteral("mapLayer"));
  m_head->setObjectName(QStringLiteral("mapHead"));
  m_layer->setPrefix(tr("layer "));
  m_head->setPrefix(tr("head "));
  m_layer->setToolTip(tr("Layer of the map (Alt+Up / Alt+Down)"));
  m_head->setToolTip(tr("Head of the map (Alt+Left / Alt+Right)"));
  auto* reset = new QToolButton(this);
  reset->setText(tr("Reset zoom"));
  reset->setToolTip(tr("Show the whole map (or double-click it)"));
  auto* legend = new QLabel(this);
  legend->setText(tr("<span style='color:%1'>&#9632;</span> not visible &nbsp;"
                     "<span style='color:%2'>&#9633;</span> skipped tile &nbsp;"
                     "<span style='color:%3'>&#9650;</span> sink of this head (edge ticks), kept S (bar on top)")
                      .arg(palette::notVisible().name(), palette::skippedTile().name(),
                           palette::sinkMark().name()));
  top->addWidget(m_layer);
  top->addWidget(m_head);
  top->addWidget(reset);
  top->addStretch(1);
  top->addWidget(legend);
  m_info = new QLabel(tr("Hover the map for tokens and probabilities; wheel zooms, drag pans, "
                         "double-click resets."),
                      this);
  m_info->setWordWrap(true);
  m_info->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_info->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  m_plot = new QCustomPlot(this);
  m_plot->setMinimumSize(240, 200);
  m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_map = makeColorMap(m_plot, tr("key position"), tr("query position"), tr("P (log)"));
  m_map->setDataScaleType(QCPAxis::stLogarithmic);
  QCPColorScale* scale = m_map->colorScale();
  scale->setDataScaleType(QCPAxis::stLogarithmic);
  QSharedPointer<QCPAxisTickerLog> ticker(new QCPAxisTickerLog);
  ticker->setLogBase(10);
  ticker->setSubTickCount(8);
  scale->axis()->setTicker(ticker);
  scale->axis()->setNumberFormat(QStringLiteral("eb"));
  scale->axis()->setNumberPrecision(0);
  scale->setBarWidth(12);
  m_plot->yAxis->setRangeReversed(true);
  m_plot->setMouseTracking(true);
  m_plot->installEventFilter(this);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(4, 4, 4, 4);
  lay->addLayout(top);
  lay->addWidget(m_info);
  lay->addWidget(m_plot, 1);
  connect(m_view, &AttentionMapView::changed, this, &AttentionMapPanel::rebuild);
  connect(m_plot, &QCustomPlot::mouseMove, this, &AttentionMapPanel::onHover);
  connect(m_plot, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent*) { resetZoom(); });
  connect(m_plot, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
    if (e->button() != Qt::RightButton) return;
    QMenu menu(this);
    menu.addAction(tr("Reset zoom"), this, &AttentionMapPanel::resetZoom);
    menu.exec(e->globalPosition().toPoint());
  });
  connect(reset, &QToolButton::clicked, this, &AttentionMapPanel::resetZoom);
  connect(m_plot->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          &AttentionMapPanel::clampRanges);
  connect(m_plot->yAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          &AttentionMapPanel::clampRanges);
  auto emitHead = [this] { Q_EMIT headChosen(m_layer->value(), m_head->value()); };
  connect(m_layer, &QSpinBox::valueChanged, this, emitHead);
  connect(m_head, &QSpinBox::valueChanged, this, emitHead);
  rebuild();  // the empty state until the first result
}

void AttentionMapPanel::setHeadRange(int layers, int heads) {
  const QSignalBlocker a(m_layer), b(m_head);
  m_layer->setRange(0, std::max(0, layers - 1));
  m_head->setRange(0, std::max(0, heads - 1));
}

void AttentionMapPanel::setSelection(int layer, int head) {
  const QSignalBlocker a(m_layer), b(m_head);
  m_layer->setValue(layer);
  m_head->setValue(head);
}

void AttentionMapPanel::stepLayer(int delta) { m_layer->setValue(m_layer->value() + delta); }
void AttentionMapPanel::stepHead(int delta) { m_head->setValue(m_head->value() + delta); }

void AttentionMapPanel::highlightToken(int position) {
  m_highlight = position;
  rebuild();
}

Visibility AttentionMapPanel::visibility() const {
  Visibility v;
  if (const RunResultPtr& r = m_view->result(); r && r->request.cache.windowed()) {
    v.window = int(r->request.cache.window_size);
    v.sinks = int(r->request.cache.sink_keep_count);
  }
  if (m_view->hasData()) v.ownWindow = m_view->map().ownWindow;
  return v;
}

void AttentionMapPanel::resetZoom() {
  const int n = m_view->hasData() ? m_view->map().nTokens : 1;
  const double pad = std::max(0.5, n * 0.01);  // key 0 clear of the axis line
  m_plot->xAxis->setRange(-0.5 - pad, n - 0.5);
  m_plot->yAxis->setRange(-0.5, n - 0.5 + pad);
  m_plot->replot();
}

// Zoom and pan stay on the map: never past its edges, never closer than 4 tokens.
void AttentionMapPanel::clampRanges() {
  if (m_clamping || !m_view->hasData()) return;
  m_clamping = true;
  const int n = m_view->map().nTokens;
  const double pad = std::max(0.5, n * 0.01);
  auto clamp = [&](QCPAxis* ax, double lo, double hi) {
    QCPRange r = ax->range();
    const double span = std::clamp(r.size(), std::min(4.0, hi - lo), hi - lo);
    double a = r.center() - span / 2;
    a = std::clamp(a, lo, hi - span);
    if (std::abs(a - r.lower) > 1e-9 || std::abs(a + span - r.upper) > 1e-9) ax->setRange(a, a + span);
  };
  clamp(m_plot->xAxis, -0.5 - pad, n - 0.5);
  clamp(m_plot->yAxis, -0.5, n - 0.5 + pad);
  m_clamping = false;
}

void AttentionMapPanel::setModelLoaded(bool loaded) {
  if (loaded == m_modelLoaded) return;
  m_modelLoaded = loaded;
  if (!m_view->hasData()) rebuild();
}

void AttentionMapPanel::rebuild() {
  m_plot->clearItems();
  for (QCPCurve* c : m_outlines) m_plot->removePlottable(c);
  m_outlines.clear();
  m_outlined.clear();
  if (!m_view->hasData()) {
    // No run yet (or no model): say so instead of drawing an empty colour map.
    m_map->data()->clear();
    m_map->setVisible(false);
    showColorScale(m_plot, m_map, false);  // no scale without values
    addEmptyPlotText(m_plot, m_modelLoaded
                                 ? tr("No attention map yet: it comes with the next finished run (Run, Ctrl+Return).")
                                 : tr("No attention map yet: load a model and run a prompt."));
    m_plot->replot();
    return;
  }
  m_map->setVisible(true);
  showColorScale(m_plot, m_map, true);
  const AttentionMap& a = m_view->map();
  const int n = a.nTokens;
  const Visibility vis = visibility();
  const bool binned = a.cols < n;
  // Cells are placed at token coordinates: cell (r, c) spans its bin's positions.
  m_map->data()->setSize(a.cols, a.rows);
  const double cw = double(n) / a.cols, rh = double(n) / a.rows;
  m_map->data()->setRange(QCPRange(cw / 2 - 0.5, n - cw / 2 - 0.5), QCPRange(rh / 2 - 0.5, n - rh / 2 - 0.5));
  double mx = 0;
  std::vector<double> values(size_t(a.rows) * a.cols);
  for (int r = 0; r < a.rows; ++r)
    for (int c = 0; c < a.cols; ++c) {
      const double v = mapCellValue(a, r, c, vis);
      values[size_t(r) * a.cols + c] = v;
      if (!std::isnan(v)) mx = std::max(mx, v);
    }
  // Five decades below the largest value; smaller values take the darkest colour.
  const double top = std::max(mx, 1e-6);
  const double floor = top * 1e-5;
  for (int r = 0; r < a.rows; ++r)
    for (int c = 0; c < a.cols; ++c) {
      const double v = values[size_t(r) * a.cols + c];
      m_map->data()->setCell(c, r, std::isnan(v) ? v : std::max(floor, v));
    }
  m_map->setDataRange(QCPRange(floor, top));
  m_map->colorScale()->axis()->setLabel(binned ? tr("attention mass per cell (log)") : tr("P (log)"));
  resetZoom();

  // Skipped tiles where they lie in the prompt, clipped to their visible pairs.
  int total = 0;
  const std::vector<MapRect> rects = skippedMapRects(m_view->skipMask(), m_view->blockSize(), n, vis, &total);
  const QColor sk = palette::skippedTile();
  for (const MapRect& t : rects) {
    if (int(m_outlined.size()) >= kMaxSkipOutlines) break;
    // The tile's visible part only (a window cuts tiles along its diagonal edges).
    for (const MapPolygon& poly : visibleOutline(t, vis)) {
      QVector<QCPCurveData> pts;
      pts.reserve(int(poly.size()));
      for (size_t i = 0; i < poly.size(); ++i) pts.append(QCPCurveData(double(i), poly[i].first, poly[i].second));
      auto* curve = new QCPCurve(m_plot->xAxis, m_plot->yAxis);
      curve->data()->set(pts, true);
      curve->setPen(QPen(sk, 1, Qt::DashLine));
      curve->setBrush(QColor(sk.red(), sk.green(), sk.blue(), 50));
      curve->setSelectable(QCP::stNone);
      m_outlines.push_back(curve);
    }
    m_outlined.push_back(t);
  }
  const int drawn = int(m_outlined.size());
  const int hidden = total - int(rects.size());  // tiles with no visible pair: never drawn

  // Sinks, drawn beside the data so the column's own colour stays readable: the kept S as a
  // bracket along the top edge, each sink of this head as a tick at the top and bottom edges.
  // The kept S shows only while a window makes it matter; the ticks are this head's own sinks
  // (alpha_k > epsilon), never the detector's model-wide flags (docs/architecture.md).
  const RunResultPtr& res = m_view->result();
  const int kept = int(m_view->keptSinkColumns().size());
  const QColor sm = palette::sinkMark();
  auto edgeMark = [&](double k0, double k1, double y0, double y1, double width) {
    auto* r = new QCPItemRect(m_plot);
    r->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
    r->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
    r->topLeft->setCoords(k0, y0);
    r->bottomRight->setCoords(k1, y1);
    r->setPen(QPen(sm, width));
    r->setBrush(sm);
    r->setClipToAxisRect(false);
  };
  if (kept > 0) edgeMark(-0.5, kept - 0.5, -0.025, -0.012, 1);
  const QVector<int> sinks = m_view->headSinkColumns(a.layer, a.head);
  for (int k : sinks) {
    edgeMark(k - 0.5, k + 0.5, 0.0, 0.02, 2);
    edgeMark(k - 0.5, k + 0.5, 0.98, 1.0, 2);
  }
  if (m_highlight >= 0 && m_highlight < n) {
    for (int i = 0; i < 2; ++i) {
      auto* line = new QCPItemStraightLine(m_plot);
      line->point1->setCoords(i ? 0 : m_highlight, i ? m_highlight : 0);
      line->point2->setCoords(i ? 1 : m_highlight, i ? m_highlight : 1);
      line->setPen(QPen(palette::highlight(), 1, Qt::DotLine));
    }
  }
  m_plot->replot();

  QStringList sinkText;  // "key 0 <|im_start|>": a bare "0" read as a count of sinks
  for (int k : sinks) {
    const QString label = m_view->tokenLabel(k);
    sinkText << tr("key %1").arg(label.isEmpty() ? QString::number(k) : label);
  }
  QString info = tr("Layer %1, head %2: %3 tokens").arg(a.layer).arg(a.head).arg(n);
  if (binned) info += tr(" in %1x%2 cells (each ~%3 tokens)").arg(a.rows).arg(a.cols).arg(cw, 0, 'f', 1);
  info += QStringLiteral(". ") + skippedOutlineCaption(drawn, int(rects.size()));
  if (hidden > 0) info += tr(" (%1 more lie wholly outside what the window lets queries see)").arg(hidden);
  // A mask is cells (a full cache) or tiles in prompt positions (a windowed cache).
  if (m_view->skipMask().rows == 0 && m_view->skipMask().tiles.empty())
    info += res && res->request.attention.type == AttentionType::kDynamicSparse ? tr(" (no skip mask)")
                                                                                  : tr(" (sparse attention off)");
  info += QStringLiteral(". ");
  if (kept > 0) info += tr("Kept by the cache (S = %1): positions 0-%2. ").arg(kept).arg(kept - 1);
  info += sinkText.isEmpty() ? tr("No key is a sink of this head (alpha_k > 0.3).")
                             : tr("Sinks of this head (alpha_k > 0.3): %1.").arg(sinkText.mid(0, 8).join(QStringLiteral(", ")));
  if (vis.window > 0) info += tr(" Window W = %1: grey cells are not visible.").arg(vis.window);
  if (vis.ownWindow > 0)
    info += tr(" This layer's own window: %1 tokens; keys beyond it are not visible (never skipped).")
                .arg(vis.ownWindow);
  if (res) {  // how the map was made; why a mask is missing
    if (!res->mapSource.empty()) info += QLatin1Char(' ') + tr("Map: %1.").arg(QString::fromStdString(res->mapSource));
    if (!res->maskNote.empty()) info += QLatin1Char(' ') + tr("No skip mask: %1").arg(QString::fromStdString(res->maskNote));
  }
  m_info->setText(info);
}

QString AttentionMapPanel::describePoint(int k, int q) const {
  if (!m_view->hasData()) return {};
  const AttentionMap& a = m_view->map();
  if (k < 0 || q < 0 || k >= a.nTokens || q >= a.nTokens) return {};
  const Visibility vis = visibility();
  const int r = int(std::upper_bound(a.rowStart.begin(), a.rowStart.end(), q) - a.rowStart.begin()) - 1;
  const int c = int(std::upper_bound(a.colStart.begin(), a.colStart.end(), k) - a.colStart.begin()) - 1;
  QStringList lines;
  lines << tr("query %1").arg(m_view->tokenLabel(q)) << tr("key %1").arg(m_view->tokenLabel(k));
  if (!vis.visible(q, k)) {
    lines << (k > q                        ? tr("not visible: the key is in the query's future")
              : vis.outsideOwnWindow(q, k) ? tr("not visible: outside this layer's own window (%1 tokens)").arg(vis.ownWindow)
                                           : tr("not visible: evicted by the window (W = %1, S = %2)").arg(vis.window).arg(vis.sinks));
  } else if (a.cols < a.nTokens) {
    lines << tr("cell of queries %1-%2 x keys %3-%4: mean P %5, mass %6")
                 .arg(a.rowStart[size_t(r)]).arg(a.rowStart[size_t(r) + 1] - 1)
                 .arg(a.colStart[size_t(c)]).arg(a.colStart[size_t(c) + 1] - 1)
                 .arg(a.cells[size_t(r) * a.cols + c], 0, 'g', 3)
                 .arg(mapCellValue(a, r, c, vis), 0, 'g', 3);
  } else {
    lines << tr("P = %1").arg(a.cells[size_t(r) * a.cols + c], 0, 'g', 4);
  }
  if (size_t(k) < a.alpha.size()) {
    const bool sink = a.alpha[size_t(k)] > SinksView::kEpsilon;
    lines << tr("alpha_k = %1%2").arg(a.alpha[size_t(k)], 0, 'g', 3).arg(sink ? tr(" (a sink of this head)") : QString());
  }
  bool skipped = false;
  for (const MapRect& t : m_outlined)
    if (q >= t.qFirst && q <= t.qLast && k >= t.kFirst && k <= t.kLast) skipped = true;
  if (vis.visible(q, k)) lines << (skipped ? tr("in a skipped KV tile") : tr("computed (not skipped)"));
  return lines.join(QLatin1Char('\n'));
}

void AttentionMapPanel::onHover(QMouseEvent* e) {
  const int k = int(std::lround(m_plot->xAxis->pixelToCoord(e->pos().x())));
  const int q = int(std::lround(m_plot->yAxis->pixelToCoord(e->pos().y())));
  const QString text = describePoint(k, q);
  if (text.isEmpty()) {
    QToolTip::hideText();
    return;
  }
  QToolTip::showText(e->globalPosition().toPoint(), text, m_plot);
}

bool AttentionMapPanel::eventFilter(QObject* o, QEvent* e) {
  // A click that did not drag picks the query token for the token strip.
  if (o == m_plot && e->type() == QEvent::MouseButtonPress) {
    m_pressAt = static_cast<QMouseEvent*>(e)->pos();
  } else if (o == m_plot && e->type() == QEvent::MouseButtonRelease) {
    auto* me = static_cast<QMouseEvent*>(e);
    if (me->button() == Qt::LeftButton && (me->pos() - m_pressAt).manhattanLength() < 4 && m_view->hasData()) {
      const int q = int(std::lround(m_plot->yAxis->pixelToCoord(me->pos().y())));
      if (q >= 0 && q < m_view->map().nTokens) Q_EMIT positionChosen(q);
    }
  } else if (o == m_plot && e->type() == QEvent::Leave) {
    QToolTip::hideText();
  }
  return QWidget::eventFilter(o, e);
}

QString AttentionMapPanel::caption() const { return m_info->text(); }

}  // namespace sinkscope::gui
