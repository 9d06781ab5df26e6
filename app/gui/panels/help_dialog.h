// SPDX-License-Identifier: Apache-2.0
// "What am I looking at": one short help page per view (sinks, lambda and skipped tiles,
// windows, the timeline, the compare metrics), Markdown in resources/help/*.md, shown in a
// QTextBrowser beside the list of pages. Non-modal: the main window keeps one and raises it from
// the Help menu (and F1 opens the page of the view in front).
#pragma once

#include <QDialog>
#include <QList>
#include <QString>

class QListWidget;
class QTextBrowser;

namespace sinkscope::gui {

class HelpDialog : public QDialog {
  Q_OBJECT
 public:
  struct Page {
    QString id;        // "sinks", "sparsity", "windows", "timeline", "compare"
    QString title;     // menu text after "What am I looking at: "
    QString resource;  // ":/help/<id>.md"
  };
  // The pages in menu order.
  static QList<Page> pages();
  // The page that explains a view dock, by its objectName (MainWindow::viewDocks(): "map",
  // "sinks", "sparsity", "timeline", "compare"); "" for anything else. The attention map's page
  // is "windows", which explains computed, not visible and skipped cells.
  static QString pageForView(const QString& viewName);
  // A page's Markdown from the resources; "" for an unknown id or an unreadable resource.
  static QString pageText(const QString& id);
  // The parent's help dialog (made on first use, then reused), showing `id` (the first page
  // when `id` is unknown), shown and raised.
  static HelpDialog* open(QWidget* parent, const QString& id);

  explicit HelpDialog(QWidget* parent = nullptr);
  // Shows the page; false (and nothing changes) for an unknown id.
  bool showPage(const QString& id);
  QString currentPage() const { return m_current; }
  QTextBrowser* browser() const { return m_browser; }

 private:
  QListWidget* m_list = nullptr;
  QTextBrowser* m_browser = nullptr;
  QString m_current;
};

}  // namespace sinkscope::gui
