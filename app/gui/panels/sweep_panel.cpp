// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/sweep_panel.h"

#include <QComboBox>
#include <QGridLayout>
#include <QProgressBar>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QToolTip>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace sinkscope::gui {

namespace {

enum Axis { kSparsity, kMemory };

QString num(double v, double scale, int prec) {
  return std::isnan(v) ? QStringLiteral("-") : QString::number(v * scale, 'f', prec);
}

QCPGraph* scatter(QCustomPlot* plot, const QString& name, QCPScatterStyle style) {
  QCPGraph* g = plot->addGraph();
  g->setName(name);
  g->setLineStyle(QCPGraph::lsNone);
  g->setScatterStyle(style);
  return g;
}

}  // namespace

SweepPanel::SweepPanel(SweepPointsModel* model, QWidget* parent) : QWidget(parent), m_model(model) {
  m_axis = new QComboBox(this);
  m_axis->addItems({tr("prefill sparsity vs mean KL"), tr("peak KV memory vs mean KL")});
  m_axis->setToolTip(
      tr("Which Pareto front to show: more sparsity (or less memory) for less KL is better"));
  m_load = new QPushButton(tr("Load this point"), this);
  m_load->setToolTip(tr("Apply the selected point's settings to the controls and run"));
  m_load->setEnabled(false);
  m_load->setObjectName(QStringLiteral("loadPoint"));
  m_source = new QLabel(tr("No sweep loaded: File > Open sweep results... reads the JSON of "
                           "`sinkscope-cli sweep --json-out FILE`."),
                        this);
  m_source->setWordWrap(true);
  m_info = new QLabel(tr("Hover or click a point for its settings and metrics."), this);
  m_info->setWordWrap(true);
  m_info->setObjectName(QStringLiteral("pointInfo"));
  m_info->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* top = new QHBoxLayout;
  top->addWidget(m_axis);
  top->addStretch(1);
  top->addWidget(m_load);

  m_plot = new QCustomPlot(this);
  m_plot->setObjectName(QStringLiteral("plot"));
  m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_plot->setMouseTracking(true);
  // Short: the plot may be a hundred pixels tall on a 720-pixel screen (the tooltip and the
  // table say which KL).
  m_plot->yAxis->setLabel(tr("mean KL, nats"));
  m_passed = scatter(m_plot, tr("passes the gates"),
                     QCPScatterStyle(QCPScatterStyle::ssCircle, QColor(70, 130, 200), 7));
  m_failed = scatter(m_plot, tr("fails a gate"),
                     QCPScatterStyle(QCPScatterStyle::ssCross, QColor(230, 140, 50), 8));
  m_front = scatter(m_plot, tr("Pareto front"),
                    QCPScatterStyle(QCPScatterStyle::ssDisc, QColor(200, 30, 45), 9));
  m_front->setLineStyle(QCPGraph::lsLine);
  m_front->setPen(QPen(QColor(200, 30, 45), 1.5));
  m_selection =
      scatter(m_plot, tr("selected"),
              QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(Qt::black, 2), Qt::NoBrush, 15));
  m_plot->legend->setVisible(true);
  m_selection->removeFromLegend();
  m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);

  m_table = new QTableView(this);
  m_table->setModel(m_model);
  m_table->verticalHeader()->hide();
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);

  // A running sweep's progress (File > Watch a running sweep...), hidden until one is watched.
  m_running = new QWidget(this);
  m_running->setObjectName(QStringLiteral("runningSweep"));
  m_runBar = new QProgressBar(m_running);
  m_runBar->setRange(0, 1000);
  m_runBar->setTextVisible(false);
  m_runBar->setMaximumHeight(12);
  m_runText = new QLabel(m_running);
  m_runText->setWordWrap(true);
  m_runText->setObjectName(QStringLiteral("runningText"));
  m_stopWatch = new QPushButton(tr("Stop watching"), m_running);
  auto* stopWatch = m_stopWatch;
  auto* runLay = new QGridLayout(m_running);
  runLay->setContentsMargins(0, 0, 0, 0);
  runLay->addWidget(m_runText, 0, 0);
  runLay->addWidget(stopWatch, 0, 1);
  runLay->addWidget(m_runBar, 1, 0, 1, 2);
  runLay->setColumnStretch(0, 1);
  m_running->hide();
  connect(stopWatch, &QPushButton::clicked, &m_watch, &JournalWatch::stop);
  connect(&m_watch, &JournalWatch::changed, this, &SweepPanel::showWatch);

  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_plot);
  split->addWidget(m_table);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(m_source);
  lay->addWidget(m_running);
  lay->addLayout(top);
  lay->addWidget(split, 1);
  lay->addWidget(m_info);

  connect(m_model, &QAbstractItemModel::modelReset, this, &SweepPanel::rebuild);
  connect(m_axis, &QComboBox::currentIndexChanged, this, &SweepPanel::rebuild);
  connect(m_plot, &QCustomPlot::mouseMove, this, &SweepPanel::onHover);
  connect(m_plot, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
    const int row = pointAt(e->pos());
    if (row >= 0) selectRow(row);
  });
  connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            m_selected = current.isValid() ? current.row() : -1;
            const SweepPoint* p = m_model->point(m_selected);
            m_load->setEnabled(p && p->valid);
            if (p) m_info->setText(describe(m_selected));
            replotSelection();
          });
  connect(m_load, &QPushButton::clicked, this, [this] {
    if (m_selected >= 0) Q_EMIT loadPoint(m_selected);
  });
  rebuild();
}

QString SweepPanel::watchJournal(const QString& file) { return m_watch.watch(file); }

void SweepPanel::showWatch() {
  m_running->setVisible(m_watch.state() != JournalWatch::State::kIdle);
  m_runBar->setValue(int(std::lround(1000 * m_watch.fraction())));
  m_runBar->setVisible(m_watch.state() == JournalWatch::State::kRunning);
  m_runText->setText(m_watch.text());
  m_stopWatch->setText(m_watch.state() == JournalWatch::State::kRunning ? tr("Stop watching")
                                                                        : tr("Dismiss"));
}

void SweepPanel::selectRow(int row) {
  m_table->setCurrentIndex(m_model->index(row, 0));
  m_table->scrollTo(m_model->index(row, 0));
}

QString SweepPanel::describe(int row) const {
  const SweepPoint* p = m_model->point(row);
  if (!p) return {};
  if (!p->valid) return tr("#%1 %2: not run (%3)").arg(p->index).arg(p->label, p->invalid);
  const ValidationResults& r = p->results;
  QString front;
  if (p->paretoSparsity) front += tr(", on the sparsity front");
  if (p->paretoMemory) front += tr(", on the memory front");
  return tr("#%1 %2: KL %3, sparsity prefill %4 % / decode %5 %, peak KV %6 MiB, perplexity "
            "change %7 %, top-1 %8 %, ROUGE-L %9, passkey %10 %; gates %11%12")
      .arg(p->index)
      .arg(p->label, num(r.kl_mean, 1, 5), num(r.sparsity_prefill, 100, 1),
           num(r.sparsity_decode, 100, 1), num(r.peak_kv_mib, 1, 2), num(r.ppl_delta_pct, 1, 3),
           num(r.top1_agreement, 100, 2), num(r.rouge_l, 1, 3), num(r.passkey_accuracy, 100, 0))
      .arg(p->passed ? tr("passed") : tr("FAILED (%1)").arg(p->gates), front);
}

void SweepPanel::rebuild() {
  const SweepResults& s = m_model->results();
  const bool memory = m_axis->currentIndex() == kMemory;
  if (!m_model->source().isEmpty())
    m_source->setText(tr("%1: %2 points, dataset %3 (%4 samples), %5")
                          .arg(QFileInfo(m_model->source()).fileName())
                          .arg(s.points.size())
                          .arg(s.dataset)
                          .arg(s.samples)
                          .arg(s.device));
  m_plot->xAxis->setLabel(memory ? tr("peak KV cache, MiB")
                                 : tr("prefill sparsity, % of tiles skipped"));
  m_points.clear();
  QVector<double> px, py, fx, fy, front_x, front_y;
  std::vector<std::pair<double, double>> front;
  for (size_t i = 0; i < s.points.size(); ++i) {
    const SweepPoint& p = s.points[i];
    const double x = memory ? p.results.peak_kv_mib : p.results.sparsity_prefill * 100;
    const double y = p.results.kl_mean;
    if (!p.valid || !std::isfinite(x) || !std::isfinite(y)) continue;
    m_points.push_back({int(i), x, y});
    (p.passed ? px : fx) << x;
    (p.passed ? py : fy) << y;
    if (memory ? p.paretoMemory : p.paretoSparsity) front.emplace_back(x, y);
  }
  std::sort(front.begin(), front.end());
  for (const auto& [x, y] : front) {
    front_x << x;
    front_y << y;
  }
  m_passed->setData(px, py);
  m_failed->setData(fx, fy);
  m_front->setData(front_x, front_y, true);
  if (!m_points.empty()) {
    m_plot->rescaleAxes();
    auto pad = [](QCPAxis* a) {
      const QCPRange r = a->range();
      const double d = r.size() > 0 ? r.size() * 0.08 : std::max(1e-3, std::abs(r.center()) * 0.1);
      a->setRange(r.lower - d, r.upper + d);
    };
    pad(m_plot->xAxis);
    pad(m_plot->yAxis);
  }
  m_table->resizeColumnsToContents();
  m_selected = -1;
  m_load->setEnabled(false);
  replotSelection();
}

void SweepPanel::replotSelection() {
  QVector<double> x, y;
  for (const Plotted& p : m_points)
    if (p.row == m_selected) {
      x << p.x;
      y << p.y;
    }
  m_selection->setData(x, y);
  m_plot->replot();
}

int SweepPanel::pointAt(const QPoint& pixel) const {
  constexpr double kPickRadius = 10;  // pixels
  int best = -1;
  double bestDist = kPickRadius * kPickRadius;
  for (const Plotted& p : m_points) {
    const double dx = m_plot->xAxis->coordToPixel(p.x) - pixel.x();
    const double dy = m_plot->yAxis->coordToPixel(p.y) - pixel.y();
    if (dx * dx + dy * dy <= bestDist) {
      bestDist = dx * dx + dy * dy;
      best = p.row;
    }
  }
  return best;
}

void SweepPanel::onHover(QMouseEvent* e) {
  const int row = pointAt(e->pos());
  if (row < 0) {
    QToolTip::hideText();
    return;
  }
  const QString text = describe(row);
  m_info->setText(text);
  QToolTip::showText(m_plot->mapToGlobal(e->pos()), text, m_plot);
}

}  // namespace sinkscope::gui
