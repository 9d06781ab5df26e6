// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/timeline_panel.h"

#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "app/gui/panels/timeline_canvas.h"

namespace sinkscope::gui {

TimelinePanel::TimelinePanel(TimelineView* view, QWidget* parent) : QWidget(parent), m_view(view) {
  m_canvas = new TimelineCanvas(this);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(m_canvas);
  scroll->setWidgetResizable(true);
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
  auto* exportButton = new QPushButton(tr("Export trace..."), this);
  exportButton->setToolTip(tr("Chrome trace JSON (opens in ui.perfetto.dev)"));
  auto* top = new QHBoxLayout;
  top->addWidget(m_info, 1);
  top->addWidget(exportButton);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(scroll);
  split->addWidget(table);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* lay = new QVBoxLayout(this);
  lay->addLayout(top);
  lay->addWidget(split, 1);
  connect(m_view, &TimelineView::changed, this, &TimelinePanel::rebuild);
  connect(m_canvas, &TimelineCanvas::eventSelected, m_info, &QLabel::setText);
  connect(exportButton, &QPushButton::clicked, this, &TimelinePanel::exportTrace);
}

void TimelinePanel::rebuild() {
  m_canvas->setTimeline(m_view->timeline());
  if (const auto& t = m_view->timeline())
    m_info->setText(tr("%1 events in %2 lanes, %3 ms (%4)")
                        .arg(t->event_count()).arg(t->lanes().size())
                        .arg(double(t->end_ns() - t->begin_ns()) / 1e6, 0, 'f', 2)
                        .arg(QString::fromStdString(t->info().source)));
}

void TimelinePanel::exportTrace() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export trace"), QStringLiteral("sinkscope-trace.json"),
                                                    tr("Chrome trace (*.json)"));
  if (path.isEmpty()) return;
  const QString err = m_view->exportTrace(path);
  if (!err.isEmpty()) QMessageBox::warning(this, tr("Export trace"), err);
}

}  // namespace sinkscope::gui
