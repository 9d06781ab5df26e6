// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/timeline_panel.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>

#include "app/gui/panels/timeline_canvas.h"

namespace sinkscope::gui {

TimelinePanel::TimelinePanel(TimelineView* view, QWidget* parent) : QWidget(parent), m_view(view) {
  m_canvas = new TimelineCanvas(this);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(m_canvas);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(m_view->summary());
  proxy->setSortRole(Qt::UserRole);
  auto* table = new QTableView(this);
  table->setModel(proxy);
  table->setSortingEnabled(true);
  table->sortByColumn(KernelSummaryModel::TotalMs, Qt::DescendingOrder);
  table->verticalHeader()->hide();
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_info = new QLabel(this);
  m_info->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_search = new QLineEdit(this);
  m_search->setPlaceholderText(tr("Search events (Enter: next)"));
  m_search->setClearButtonEnabled(true);
  m_search->setMinimumWidth(220);
  m_search->setMaximumWidth(320);
  m_matches = new QLabel(this);
  auto* reset = new QPushButton(tr("Reset zoom"), this);
  reset->setToolTip(tr("Show the whole run (double-click the timeline, or Ctrl+0 there)"));
  auto* exportButton = new QPushButton(tr("Export trace..."), this);
  exportButton->setToolTip(tr("Chrome trace JSON (opens in ui.perfetto.dev)"));
  m_status = new QLabel(this);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_status->setWordWrap(true);
  auto* legend = new QLabel(tr("Colour = layer (8 colours, repeating); grey: outside a layer. "
                               "Wheel: zoom, drag: pan, hover: details."),
                            this);
  legend->setWordWrap(true);
  auto* top = new QHBoxLayout;
  top->addWidget(m_info, 1);
  top->addWidget(m_search);
  top->addWidget(m_matches);
  top->addWidget(reset);
  top->addWidget(exportButton);
  auto* split = m_split = new QSplitter(Qt::Vertical, this);
  split->addWidget(scroll);
  split->addWidget(table);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* lay = new QVBoxLayout(this);
  lay->addLayout(top);
  lay->addWidget(legend);
  lay->addWidget(split, 1);
  lay->addWidget(m_status);
  connect(m_view, &TimelineView::changed, this, &TimelinePanel::rebuild);
  connect(m_canvas, &TimelineCanvas::eventSelected, m_info, &QLabel::setText);
  connect(exportButton, &QPushButton::clicked, this, &TimelinePanel::exportTrace);
  connect(reset, &QPushButton::clicked, m_canvas, &TimelineCanvas::resetZoom);
  connect(m_search, &QLineEdit::textChanged, this, &TimelinePanel::searchChanged);
  connect(m_search, &QLineEdit::returnPressed, m_canvas, [this] { m_canvas->nextMatch(); });
}

void TimelinePanel::rebuild() {
  m_canvas->setTimeline(m_view->timeline());
  searchChanged(m_search->text());
  fitLanes();
  if (const auto& t = m_view->timeline())
    m_info->setText(tr("%1 events in %2 lanes, %3 ms (%4)")
                        .arg(t->event_count()).arg(t->lanes().size())
                        .arg(double(t->end_ns() - t->begin_ns()) / 1e6, 0, 'f', 2)
                        .arg(QString::fromStdString(t->info().source)));
  else
    m_info->clear();
}

void TimelinePanel::fitLanes() {
  // The lanes get the room they read well in (rows of ~28 px), the table the rest, so a run with
  // few lanes leaves no empty band; many lanes keep at most 60 % and scroll.
  const auto& t = m_view->timeline();
  const int total = m_split->height();
  if (!t || total <= 200) return;
  const int lanes = TimelineCanvas::kRulerHeight + layoutLanes(*t, 0, 28, 28).height + 16;
  const int top = std::clamp(lanes, 160, total * 6 / 10);
  m_split->setSizes({top, total - top});
}

void TimelinePanel::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  fitLanes();  // the layout has given the splitter its new height by now
}

void TimelinePanel::searchChanged(const QString& text) {
  const int n = m_canvas->setSearch(text);
  m_matches->setText(text.trimmed().isEmpty() ? QString() : tr("%n match(es)", nullptr, n));
}

void TimelinePanel::exportTrace() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export trace"), QStringLiteral("sinkscope-trace.json"),
                                                    tr("Chrome trace (*.json)"));
  if (path.isEmpty()) return;
  exportTraceTo(path);
}

QString TimelinePanel::exportTraceTo(const QString& path) {
  const QString err = m_view->exportTrace(path);
  const QString shown = QDir::toNativeSeparators(QFileInfo(path).absoluteFilePath());
  if (err.isEmpty()) {
    m_status->setStyleSheet(QString());
    m_status->setText(tr("Trace written to %1 (%2 events; open it in ui.perfetto.dev or "
                         "chrome://tracing).")
                          .arg(shown)
                          .arg(m_view->timeline() ? qulonglong(m_view->timeline()->event_count()) : 0));
  } else {
    m_status->setStyleSheet(QStringLiteral("color: #b00020;"));
    m_status->setText(tr("Could not write the trace to %1: %2").arg(shown, err));
  }
  return err;
}

}  // namespace sinkscope::gui
