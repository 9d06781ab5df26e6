// SPDX-License-Identifier: Apache-2.0
// The "what am I looking at" help (app/gui/panels/help_dialog.h): every view has a page, each
// page loads from the resources and names its key terms, the dialog switches pages, and the
// main window's Help menu and F1 open the right page.
#include <QAction>
#include <QComboBox>
#include <QDockWidget>
#include <QListWidget>
#include <QMenu>
#include <QMenuBar>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>

#include "app/gui/models/sample_prompts.h"
#include "app/gui/models/workbench.h"
#include "app/gui/panels/help_dialog.h"
#include "app/gui/panels/main_window.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {

// The terms each page must explain (the brief of the help: what the view shows and the numbers
// it is built on). Rendered text, so Markdown markup is gone.
QStringList keyTerms(const QString& id) {
  if (id == QLatin1String("sinks"))
    return {QStringLiteral("α_k"), QStringLiteral("ε = 0.3"), QStringLiteral("mass on the first S keys"),
            QStringLiteral("sink_keep_count"), QStringLiteral("10 %"), QStringLiteral("capped at 16")};
  if (id == QLatin1String("sparsity"))
    return {QStringLiteral("exp(m̃_r − m_r) < λ"), QStringLiteral("ln λ"), QStringLiteral("block size"),
            QStringLiteral("prefill"), QStringLiteral("decode"), QStringLiteral("never skipped"),
            QStringLiteral("λ = 0 is exactly dense"), QStringLiteral("Sparsity")};
  if (id == QLatin1String("windows"))
    return {QStringLiteral("S + W"), QStringLiteral("k < S"), QStringLiteral("k > q − W"),
            QStringLiteral("cache (re-rotated)"), QStringLiteral("original"), QStringLiteral("not visible"),
            QStringLiteral("skipped")};
  if (id == QLatin1String("timeline"))
    return {QStringLiteral("lane"), QStringLiteral("CPU spans"), QStringLiteral("CUPTI"),
            QStringLiteral("kernels"), QStringLiteral("attention"), QStringLiteral("Chrome trace")};
  if (id == QLatin1String("compare"))
    return {QStringLiteral("KL(dense ‖ variant)"), QStringLiteral("Top-1 agreement"),
            QStringLiteral("Perplexity Δ"), QStringLiteral("ROUGE-L"), QStringLiteral("First divergence"),
            QStringLiteral("dense baseline")};
  return {};
}

QMenu* helpMenu(QMainWindow& w) {
  for (QAction* a : w.menuBar()->actions())
    if (a->menu() && a->text().remove(QLatin1Char('&')) == QLatin1String("Help")) return a->menu();
  return nullptr;
}

}  // namespace

class TestHelpDialog : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_settingsDir;

 private Q_SLOTS:
  void initTestCase() {
    // The main window reads and writes QSettings (recent files): keep them out of the user's.
    QCoreApplication::setOrganizationName(QStringLiteral("SinkScopeTest"));
    QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, m_settingsDir.path());
    QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_settingsDir.path());
  }

  void everyViewHasAPage() {
    const QStringList ids = [] {
      QStringList l;
      for (const HelpDialog::Page& p : HelpDialog::pages()) l << p.id;
      return l;
    }();
    QCOMPARE(ids, (QStringList{QStringLiteral("sinks"), QStringLiteral("sparsity"), QStringLiteral("windows"),
                               QStringLiteral("timeline"), QStringLiteral("compare")}));
    // The five view docks of the main window (MainWindow::viewDocks' object names).
    for (const char* view : {"map", "sinks", "sparsity", "timeline", "compare"}) {
      const QString page = HelpDialog::pageForView(QLatin1String(view));
      QVERIFY2(ids.contains(page), view);
    }
    QCOMPARE(HelpDialog::pageForView(QStringLiteral("map")), QStringLiteral("windows"));
    QVERIFY(HelpDialog::pageForView(QStringLiteral("tokens")).isEmpty());
    QVERIFY(HelpDialog::pageText(QStringLiteral("no-such-page")).isEmpty());
  }

  void pagesLoadFromTheResourcesAndNameTheirTerms_data() {
    QTest::addColumn<QString>("id");
    for (const HelpDialog::Page& p : HelpDialog::pages()) QTest::newRow(qPrintable(p.id)) << p.id;
  }
  void pagesLoadFromTheResourcesAndNameTheirTerms() {
    QFETCH(QString, id);
    const QString md = HelpDialog::pageText(id);
    QVERIFY2(md.size() > 800, qPrintable(QStringLiteral("%1: %2 characters").arg(id).arg(md.size())));
    QVERIFY(md.startsWith(QStringLiteral("# What am I looking at: ")));

    HelpDialog d;
    QVERIFY(d.showPage(id));
    QCOMPARE(d.currentPage(), id);
    const QString shown = d.browser()->toPlainText();
    QVERIFY(shown.startsWith(QStringLiteral("What am I looking at: ")));  // the heading, rendered
    QVERIFY(!shown.contains(QStringLiteral("**")));                        // markup rendered, not shown
    for (const QString& term : keyTerms(id))
      QVERIFY2(shown.contains(term), qPrintable(QStringLiteral("page %1 lacks \"%2\"").arg(id, term)));
  }

  void dialogSwitchesPages() {
    HelpDialog d;
    QCOMPARE(d.currentPage(), QStringLiteral("sinks"));
    auto* list = d.findChild<QListWidget*>();
    QVERIFY(list);
    QCOMPARE(list->count(), HelpDialog::pages().size());
    list->setCurrentRow(4);  // as a click does
    QCOMPARE(d.currentPage(), QStringLiteral("compare"));
    QVERIFY(d.browser()->toPlainText().contains(QStringLiteral("ROUGE-L")));
    QVERIFY(!d.showPage(QStringLiteral("no-such-page")));
    QCOMPARE(d.currentPage(), QStringLiteral("compare"));
    QCOMPARE(list->currentRow(), 4);
    QVERIFY(d.showPage(QStringLiteral("windows")));
    QCOMPARE(list->currentRow(), 2);
  }

  void helpMenuAndF1OpenThePages() {
    Workbench wb(BackendKind::kCpu, 1);
    MainWindow w(&wb);
    w.resize(1280, 720);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QMenu* help = helpMenu(w);
    QVERIFY(help);
    QList<QAction*> pageActions;
    QAction* f1 = nullptr;
    for (QAction* a : help->actions()) {
      if (a->text().startsWith(QStringLiteral("What am I looking at: "))) pageActions << a;
      if (a->shortcut() == QKeySequence(QKeySequence::HelpContents)) f1 = a;
    }
    const QList<HelpDialog::Page> pages = HelpDialog::pages();
    QCOMPARE(pageActions.size(), pages.size());
    for (int i = 0; i < pages.size(); ++i) {
      QCOMPARE(pageActions[i]->text(), QStringLiteral("What am I looking at: ") + pages[i].title);
      pageActions[i]->trigger();
      auto* d = w.findChild<HelpDialog*>();
      QVERIFY(d);
      QVERIFY(d->isVisible());
      QCOMPARE(d->currentPage(), pages[i].id);
    }
    QCOMPARE(w.findChildren<HelpDialog*>().size(), 1);  // one dialog, reused

    // F1: the page of the view in front.
    QVERIFY(f1);
    for (QDockWidget* dock : w.viewDocks()) {
      dock->raise();
      QCoreApplication::processEvents();
      f1->trigger();
      QCOMPARE(w.findChild<HelpDialog*>()->currentPage(), HelpDialog::pageForView(dock->objectName()));
    }
  }

  // The window's sample list: a placeholder, then samplePrompts() in order, long ones first.
  void mainWindowOffersTheLongDocumentsFirst() {
    Workbench wb(BackendKind::kCpu, 1);
    MainWindow w(&wb);
    QComboBox* samples = nullptr;
    for (QComboBox* c : w.findChildren<QComboBox*>())
      if (c->count() > 0 && c->itemText(0) == QStringLiteral("Sample prompts...")) samples = c;
    QVERIFY(samples);
    const QList<SamplePrompt> list = samplePrompts();
    QCOMPARE(samples->count(), list.size() + 1);
    for (int i = 0; i < list.size(); ++i) {
      QCOMPARE(samples->itemData(i + 1).toString(), list[i].resource);
      QCOMPARE(samples->itemText(i + 1), list[i].displayName());
    }
    QVERIFY(list.first().isLong());
  }
};

QTEST_MAIN(TestHelpDialog)
#include "tst_helpdialog.moc"
