// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/help_dialog.h"

#include <QDialogButtonBox>
#include <QFile>
#include <QHBoxLayout>
#include <QHash>
#include <QListWidget>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace sinkscope::gui {

QList<HelpDialog::Page> HelpDialog::pages() {
  const auto page = [](const char* id, const QString& title) {
    return Page{QString::fromLatin1(id), title, QStringLiteral(":/help/%1.md").arg(QLatin1String(id))};
  };
  return {page("sinks", tr("Sinks")),
          page("sparsity", tr("\u03bb and skipped tiles")),
          page("windows", tr("Windows")),
          page("timeline", tr("Timeline")),
          page("compare", tr("Compare metrics"))};
}

QString HelpDialog::pageForView(const QString& viewName) {
  // The view docks' object names (MainWindow::buildDocks) and the page explaining each.
  static const QHash<QString, QString> kPages = {
      {QStringLiteral("map"), QStringLiteral("windows")},
      {QStringLiteral("sinks"), QStringLiteral("sinks")},
      {QStringLiteral("sparsity"), QStringLiteral("sparsity")},
      {QStringLiteral("timeline"), QStringLiteral("timeline")},
      {QStringLiteral("compare"), QStringLiteral("compare")}};
  return kPages.value(viewName);
}

QString HelpDialog::pageText(const QString& id) {
  for (const Page& p : pages()) {
    if (p.id != id) continue;
    QFile f(p.resource);
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
  }
  return {};
}

HelpDialog* HelpDialog::open(QWidget* parent, const QString& id) {
  auto* d = parent ? parent->findChild<HelpDialog*>(QString(), Qt::FindDirectChildrenOnly) : nullptr;
  if (!d) d = new HelpDialog(parent);
  if (!d->showPage(id)) d->showPage(pages().constFirst().id);
  d->show();
  d->raise();
  d->activateWindow();
  return d;
}

HelpDialog::HelpDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("SinkScope help: what am I looking at"));
  setModal(false);
  m_list = new QListWidget(this);
  for (const Page& p : pages()) {
    auto* item = new QListWidgetItem(p.title, m_list);
    item->setData(Qt::UserRole, p.id);
  }
  // Wide enough for the longest title, no wider: the page gets the space.
  m_list->setFixedWidth(m_list->sizeHintForColumn(0) + 2 * m_list->frameWidth() + 16);
  m_browser = new QTextBrowser(this);
  m_browser->setOpenExternalLinks(true);
  m_browser->setMinimumWidth(360);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::close);

  auto* row = new QHBoxLayout;
  row->addWidget(m_list);
  row->addWidget(m_browser, 1);
  auto* lay = new QVBoxLayout(this);
  lay->addLayout(row, 1);
  lay->addWidget(buttons);
  // Fits a 1280x720 screen with room to keep the view it explains in sight.
  resize(760, 560);

  connect(m_list, &QListWidget::currentRowChanged, this, [this](int row) {
    if (row >= 0) showPage(m_list->item(row)->data(Qt::UserRole).toString());
  });
  showPage(pages().constFirst().id);
}

bool HelpDialog::showPage(const QString& id) {
  const QList<Page> all = pages();
  int row = -1;
  for (int i = 0; i < all.size(); ++i)
    if (all[i].id == id) row = i;
  if (row < 0) return false;
  if (id == m_current) return true;
  m_current = id;
  const QString text = pageText(id);
  if (text.isEmpty())
    m_browser->setPlainText(tr("The help page %1 is missing from the resources.").arg(all[row].resource));
  else
    m_browser->setMarkdown(text);
  m_list->setCurrentRow(row);  // re-enters showPage through currentRowChanged: m_current is set
  return true;
}

}  // namespace sinkscope::gui
