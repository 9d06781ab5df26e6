// SPDX-License-Identifier: Apache-2.0
// The main window at laptop sizes: it fits 1024x640 at the least, and at 1280x720 every dock,
// tab, button and chart lies inside the window; a failed model load keeps the good model
// selected and drops the bad file from the list; the model picker shows its whole entry, and
// elides a longer one in the middle; a head picked in the Sinks or Sparsity heatmap becomes the
// chosen head; the Sinks chart opens on the run's strongest sink until a head is picked; the
// banner marks stale views.
#include <QAction>
#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDockWidget>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QSignalSpy>
#include <QStyle>
#include <QStyleOptionComboBox>
#include <QTabBar>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <utility>

#include "app/gui/models/workbench.h"
#include "app/gui/panels/attention_map_panel.h"
#include "app/gui/panels/heatmap.h"
#include "app/gui/panels/main_window.h"
#include "app/gui/panels/sinks_panel.h"
#include "app/gui/panels/sparsity_panel.h"
#include "tests/gui/test_model.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {

// Whether a dock is on screen: not tabbed, or the current tab of its group (Qt parks the
// other tabs' docks outside the window).
bool dockShown(QMainWindow* mw, QDockWidget* d) {
  if (mw->tabifiedDockWidgets(d).isEmpty()) return true;
  for (QTabBar* tabs : mw->findChildren<QTabBar*>())
    if (tabs->isVisible() && tabs->currentIndex() >= 0 && tabs->tabText(tabs->currentIndex()) == d->windowTitle())
      return true;
  return false;
}

// Every visible widget below `root` whose rectangle leaves the window's.
QStringList outside(QMainWindow* root) {
  QStringList bad;
  const QRect win(QPoint(0, 0), root->size());
  for (QWidget* w : root->findChildren<QWidget*>()) {
    if (!w->isVisible() || w->isWindow()) continue;
    bool parked = false;
    for (QWidget* p = w; p && p != root; p = p->parentWidget())
      if (auto* d = qobject_cast<QDockWidget*>(p); d && !dockShown(root, d)) parked = true;
    if (parked) continue;
    if (w->width() <= 1 || w->height() <= 1) continue;
    const QRect r(w->mapTo(root, QPoint(0, 0)), w->size());
    // Children of scroll areas may extend past their viewport by design.
    bool scrolled = false;
    for (QWidget* p = w->parentWidget(); p && p != root; p = p->parentWidget())
      if (p->objectName() == QLatin1String("qt_scrollarea_viewport")) scrolled = true;
    if (!scrolled && !win.contains(r))
      bad << QStringLiteral("%1 (%2) at %3,%4 %5x%6")
                 .arg(QString::fromLatin1(w->metaObject()->className()), w->objectName())
                 .arg(r.x()).arg(r.y()).arg(r.width()).arg(r.height());
  }
  return bad;
}

// Shows w at 1280x720 with `prompt` and loads the random test model; false when the load does
// not arrive in time.
bool showWithModel(Workbench& wb, MainWindow& w, const QString& prompt) {
  w.resize(1280, 720);
  w.show();
  QSignalSpy loaded(&wb, &Workbench::modelLoaded);
  w.setPromptText(prompt);
  wb.setModel(test::randomModel());
  return QTest::qWaitFor([&] { return loaded.count() == 1; }, 5000);
}

// After showWithModel under auto-run: its first run has reported (`ready` counts resultReady)
// and the engine is idle again.
bool firstRunDone(const Workbench& wb, const QSignalSpy& ready) {
  return QTest::qWaitFor([&] { return ready.count() == 1; }, 30000) &&
         QTest::qWaitFor([&] { return !wb.running(); }, 5000);
}

// The rectangle a combo box draws its current text in (the style's edit field; the common
// style's label keeps one pixel free on either side).
QRect comboTextRect(const QComboBox* c) {
  QStyleOptionComboBox opt;
  opt.initFrom(c);
  opt.editable = c->isEditable();
  opt.frame = c->hasFrame();
  opt.currentText = c->currentText();
  opt.subControls = QStyle::SC_All;
  return c->style()
      ->subControlRect(QStyle::CC_ComboBox, &opt, QStyle::SC_ComboBoxEditField, c)
      .adjusted(1, 0, -1, 0);
}

// The (layer, head) whose alpha_k is largest over the positions the sink detector judges (at
// least 16 queries at or after them); ties go to the lowest layer, then the lowest head.
std::pair<int, int> strongestSinkHead(const RunResult& r) {
  std::pair<int, int> best{-1, -1};
  double top = -1;
  const bool counts = r.sinkQueries.size() == size_t(r.sinkPositions);
  for (int l = 0; l < r.nLayer; ++l)
    for (int h = 0; h < r.nHead; ++h)
      for (int k = 0; k < r.sinkPositions; ++k) {
        if (counts && r.sinkQueries[size_t(k)] < 16) continue;
        const double a = r.sinkAlpha[(size_t(l) * r.nHead + h) * r.sinkPositions + k];
        if (a > top) top = a, best = {l, h};
      }
  return best;
}

// The "size" column of a data-driven test, a row per window size named "WxH".
void windowSizeRows(std::initializer_list<QSize> sizes) {
  QTest::addColumn<QSize>("size");
  for (const QSize& s : sizes)
    QTest::newRow(qPrintable(QStringLiteral("%1x%2").arg(s.width()).arg(s.height()))) << s;
}

// A head of the run other than the ones given (the first in layer-major order).
std::pair<int, int> anotherHead(const RunResult& r,
                                std::initializer_list<std::pair<int, int>> not_these) {
  for (int l = 0; l < r.nLayer; ++l)
    for (int h = 0; h < r.nHead; ++h)
      if (std::find(not_these.begin(), not_these.end(), std::pair{l, h}) == not_these.end())
        return {l, h};
  return {-1, -1};
}

}  // namespace

class TestMainWindow : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void fitsALaptopScreen_data() {
    windowSizeRows({QSize(1024, 640), QSize(1280, 720), QSize(1920, 1080)});
  }
  void fitsALaptopScreen() {
    QFETCH(QSize, size);
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    MainWindow w(&wb);
    const QSize min = w.minimumSizeHint().expandedTo(w.minimumSize());
    if (qEnvironmentVariableIsSet("SINKSCOPE_DEBUG_SIZES")) {
      qInfo() << "central" << w.centralWidget()->minimumSizeHint();
      for (QDockWidget* d : w.findChildren<QDockWidget*>()) qInfo() << d->objectName() << d->minimumSizeHint();
      for (QWidget* c : w.centralWidget()->findChildren<QWidget*>()) qInfo() << c->metaObject()->className() << c->objectName() << c->minimumSizeHint();
    }
    QVERIFY2(min.width() <= 1024 && min.height() <= 640,
             qPrintable(QStringLiteral("minimum %1x%2").arg(min.width()).arg(min.height())));
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCOMPARE(w.size(), size);
    const QStringList bad = outside(&w);
    QVERIFY2(bad.isEmpty(), qPrintable(bad.join(QLatin1Char('\n'))));
    // The views own the space: the map dock gets most of the window.
    QDockWidget* map = w.viewDocks().at(0);
    QVERIFY(map->isVisible());
    QVERIFY2(map->width() * map->height() > size.width() * size.height() / 3,
             qPrintable(QStringLiteral("map %1x%2").arg(map->width()).arg(map->height())));
    // Every view tab is on screen and reachable; a tab bar inside a view counts while that view
    // is the dock tab shown.
    for (QTabBar* tabs : w.findChildren<QTabBar*>()) {
      if (!tabs->isVisible()) continue;
      QWidget* dock = tabs->parentWidget();
      while (dock && !qobject_cast<QDockWidget*>(dock)) dock = dock->parentWidget();
      if (dock && !dockShown(&w, static_cast<QDockWidget*>(dock))) continue;
      for (int i = 0; i < tabs->count(); ++i) {
        const QRect r(tabs->mapTo(&w, tabs->tabRect(i).topLeft()), tabs->tabRect(i).size());
        QVERIFY2(QRect(QPoint(0, 0), w.size()).contains(r), qPrintable(tabs->tabText(i)));
      }
    }
    auto* run = w.findChild<QPushButton*>(QStringLiteral("run"));
    QVERIFY(run && run->isVisible());
  }

  void failedLoadKeepsTheGoodModelSelected() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    qApp->setProperty("sinkscopeNoDialogs", true);
    MainWindow w(&wb);
    auto* picker = w.findChild<QComboBox*>(QStringLiteral("modelPicker"));
    QVERIFY(picker);
    QSignalSpy loaded(&wb, &Workbench::modelLoaded);
    QSignalSpy failed(&wb, &Workbench::modelFailed);
    wb.loadModel(test::randomModelPath());
    QTRY_COMPARE(loaded.count(), 1);
    QCOMPARE(picker->currentData().toString(), test::randomModelPath());
    QTemporaryDir dir;
    const QString junk = dir.filePath(QStringLiteral("truncated.gguf"));
    QFile f(junk);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("GGUF\x03\0\0\0", 8);  // a header cut short
    f.close();
    w.findChild<QComboBox*>(QStringLiteral("modelPicker"));
    QMetaObject::invokeMethod(&w, [&] { wb.loadModel(junk); });
    QTRY_COMPARE(failed.count(), 1);
    QVERIFY(wb.modelReady());
    QCOMPARE(picker->findData(junk), -1);
    QCOMPARE(picker->currentData().toString(), test::randomModelPath());
    auto* status = w.findChild<QLabel*>(QStringLiteral("status"));
    QVERIFY(status->toolTip().contains(QStringLiteral("Still using")));
    // In a window narrower than the message the status line ends in "…" and fits its width;
    // the tooltip keeps the whole message.
    w.resize(640, 480);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QString full = status->toolTip();
    full.replace(QLatin1Char('\n'), QLatin1Char(' '));
    QTRY_VERIFY(status->contentsRect().width() < status->fontMetrics().horizontalAdvance(full));
    QTRY_VERIFY2(status->text().endsWith(QChar(0x2026)), qPrintable(status->text()));
    QVERIFY(status->fontMetrics().horizontalAdvance(status->text()) <= status->contentsRect().width());
    QVERIFY(full.startsWith(status->text().chopped(1)));
    w.resize(1920, 1080);  // wider again: more of the message comes back
    const int shown = int(status->text().size());
    QTRY_VERIFY(status->text().size() > shown || status->text() == full);
  }

  // Engine > GPU weights / GPU activations: one checked item each, the workbench's choice, and
  // all disabled (with the reason) on the CPU backend, before and after a model loads.
  void engineMenuOffersTheGpuChoices() {
    Workbench wb(BackendKind::kCpu, 2, GpuChoice{GpuWeights::kNative, GpuActivations::kInt16});
    wb.setAutoRun(false);
    MainWindow w(&wb);
    auto* weights = w.findChild<QMenu*>(QStringLiteral("gpuWeightsMenu"));
    auto* acts = w.findChild<QMenu*>(QStringLiteral("gpuActivationsMenu"));
    QVERIFY(weights && acts);
    QCOMPARE(weights->actions().size(), 3);
    QCOMPARE(acts->actions().size(), 2);
    auto checked = [](QMenu* m) {
      QAction* c = nullptr;
      int n = 0;
      for (QAction* a : m->actions())
        if (a->isChecked()) ++n, c = a;
      return n == 1 ? c : nullptr;
    };
    QVERIFY(checked(weights) && checked(acts));
    QCOMPARE(GpuWeights(checked(weights)->data().toInt()), GpuWeights::kNative);
    QCOMPARE(GpuActivations(checked(acts)->data().toInt()), GpuActivations::kInt16);
    QSignalSpy loaded(&wb, &Workbench::modelLoaded);
    wb.loadModel(test::randomModelPath());
    QTRY_COMPARE(loaded.count(), 1);
    auto* engine = w.findChild<QMenu*>(QStringLiteral("engineMenu"));
    QVERIFY(engine);
    for (QAction* a : engine->actions()) {
      QVERIFY(!a->isEnabled());
      QVERIFY(a->toolTip().contains(QStringLiteral("CUDA")));
    }
  }

  // A first load that fails leaves no model: the picker says so instead of showing the default
  // model's name, and picking a model from it afterwards loads that model.
  void failedFirstLoadLeavesThePickerEmpty() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    qApp->setProperty("sinkscopeNoDialogs", true);
    MainWindow w(&wb);
    auto* picker = w.findChild<QComboBox*>(QStringLiteral("modelPicker"));
    QVERIFY(picker);
    QTemporaryDir dir;
    const QString junk = dir.filePath(QStringLiteral("junk.gguf"));
    QFile f(junk);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("not a gguf file at all");
    f.close();
    QSignalSpy loaded(&wb, &Workbench::modelLoaded);
    QSignalSpy failed(&wb, &Workbench::modelFailed);
    wb.loadModel(junk);
    QTRY_COMPARE(failed.count(), 1);
    QVERIFY(!wb.modelReady());
    QCOMPARE(picker->currentIndex(), -1);
    QCOMPARE(picker->placeholderText(), QStringLiteral("no model loaded"));
    QCOMPARE(picker->findData(junk), -1);
    wb.loadModel(test::randomModelPath());
    QTRY_COMPARE(loaded.count(), 1);
    QCOMPARE(picker->currentData().toString(), test::randomModelPath());
  }

  // File > Open checkpoint folder exists, and a checkpoint folder becomes the picker's model.
  void checkpointFolderIsAModel() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    qApp->setProperty("sinkscopeNoDialogs", true);
    MainWindow w(&wb);
    QVERIFY(w.findChild<QAction*>(QStringLiteral("openCheckpointFolder")));
    auto* picker = w.findChild<QComboBox*>(QStringLiteral("modelPicker"));
    QVERIFY(picker);
    QSignalSpy loaded(&wb, &Workbench::modelLoaded);
    const QString dir = QStringLiteral(SINKSCOPE_SOURCE_DIR "/tests/data/hf/qwen3_f32");
    wb.loadModel(dir);
    QTRY_COMPARE(loaded.count(), 1);
    QCOMPARE(picker->currentData().toString(), dir);
    QVERIFY(wb.modelReady());
  }

  // The picker shows the whole default entry, "(default)" included, in the window the app
  // opens on a 1280x720 screen (95 % of it), at 1280x720 and at 1920x1080; the text never runs
  // past the part of the box the style draws it in.
  void modelPickerShowsTheWholeName_data() {
    windowSizeRows({QSize(1216, 684), QSize(1280, 720), QSize(1920, 1080)});
  }
  void modelPickerShowsTheWholeName() {
    QFETCH(QSize, size);
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    MainWindow w(&wb);
    auto* picker = w.findChild<QComboBox*>(QStringLiteral("modelPicker"));
    QVERIFY(picker);
    picker->setCurrentIndex(0);  // the default model's entry, selected as its load does
    QVERIFY(picker->currentText().endsWith(QStringLiteral(" (default)")));
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const QRect text = comboTextRect(picker);
    const int need = picker->fontMetrics().horizontalAdvance(picker->currentText());
    QVERIFY2(need <= text.width(),
             qPrintable(QStringLiteral("'%1' needs %2 px, the picker draws text in %3 px")
                            .arg(picker->currentText())
                            .arg(need)
                            .arg(text.width())));
    QCOMPARE(picker->property("shownText").toString(), picker->currentText());
    QVERIFY(picker->toolTip().contains(picker->currentData().toString()));
    const QStringList bad = outside(&w);
    QVERIFY2(bad.isEmpty(), qPrintable(bad.join(QLatin1Char('\n'))));
  }

  // A model file name longer than the room the bar has: the picker shows its start and its
  // end around an ellipsis, within the box; the tooltip holds the whole path; Run and the rest
  // of the bar stay in a 1024x640 window.
  void longModelNameIsElidedInTheMiddle() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    MainWindow w(&wb);
    auto* picker = w.findChild<QComboBox*>(QStringLiteral("modelPicker"));
    QVERIFY(picker);
    QTemporaryDir dir;
    const QString name = QStringLiteral(
        "a-random-test-model-with-a-file-name-far-longer-than-"
        "any-toolbar-has-room-for.Q4_1.gguf");
    const QString path = dir.filePath(name);
    QVERIFY(QFile::copy(test::randomModelPath(), path));
    QSignalSpy loaded(&wb, &Workbench::modelLoaded);
    wb.loadModel(path);
    QTRY_COMPARE(loaded.count(), 1);
    QCOMPARE(picker->currentData().toString(), path);
    w.resize(1024, 640);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const QString shown = picker->property("shownText").toString();
    QVERIFY2(shown.contains(QChar(0x2026)), qPrintable(shown));
    QVERIFY2(shown.startsWith(name.left(3)) && shown.endsWith(QStringLiteral(".gguf")),
             qPrintable(shown));
    QVERIFY2(picker->fontMetrics().horizontalAdvance(shown) <= comboTextRect(picker).width(),
             qPrintable(shown));
    QVERIFY2(picker->toolTip().contains(path), qPrintable(picker->toolTip()));
    const QStringList bad = outside(&w);
    QVERIFY2(bad.isEmpty(), qPrintable(bad.join(QLatin1Char('\n'))));
    auto* run = w.findChild<QPushButton*>(QStringLiteral("run"));
    QVERIFY(run && run->isVisible());
    // Wider, the whole name comes back.
    w.resize(1920, 1080);
    QTRY_COMPARE(picker->property("shownText").toString(), name);
  }

  void heatmapClicksChooseTheHead() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    MainWindow w(&wb);
    SinksPanel* sinks = w.findChild<SinksPanel*>();
    SparsityPanel* sparsity = w.findChild<SparsityPanel*>();
    QVERIFY(sinks && sparsity);
    Q_EMIT sinks->headChosen(3, 5);
    QCOMPARE(wb.controls().layer, 3);
    QCOMPARE(wb.controls().head, 5);
    Q_EMIT sparsity->headChosen(7, 1);
    QCOMPARE(wb.controls().layer, 7);
    QCOMPARE(wb.controls().head, 1);
    // The Sparsity heatmaps outline the map's head, wherever it was picked.
    for (HeadHeatmap* m : {sparsity->prefillMap(), sparsity->decodeMap()}) {
      QCOMPARE(m->markedCell().layer, 7);
      QCOMPARE(m->markedCell().head, 1);
    }
  }

  // Before any head is picked, the Sinks chart shows the run's strongest sink (not the map's
  // head, which the command line or a program may have set) and says so; a head picked in a
  // heatmap or in the map is the chart's from then on, kept across runs with other settings.
  void sinksChartOpensOnTheStrongestSinkUntilAHeadIsPicked() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    MainWindow w(&wb);
    SinksPanel* sinks = w.findChild<SinksPanel*>();
    AttentionMapPanel* map = w.findChild<AttentionMapPanel*>();
    QVERIFY(sinks && map);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    QVERIFY(showWithModel(wb, w, test::longPrompt()));
    auto runAndWait = [&] {
      const int before = int(ready.count());
      wb.runNow();
      return QTest::qWaitFor([&] { return ready.count() > before && !wb.running(); }, 30000);
    };
    auto chartTitle = [&] { return sinks->alphaChart()->chart()->title(); };
    auto shows = [&](std::pair<int, int> lh) {
      const QString head = QStringLiteral("layer %1 head %2").arg(lh.first).arg(lh.second);
      return wb.sinks()->layer() == lh.first && wb.sinks()->head() == lh.second &&
             chartTitle().contains(head) &&
             sinks->text()->text().contains(
                 QStringLiteral("Head L%1 H%2").arg(lh.first).arg(lh.second));
    };
    QVERIFY(runAndWait());
    const RunResultPtr first = wb.lastResult();
    QVERIFY(first && first->nLayer > 1 && first->nHead > 1 && !first->sinkAlpha.empty());
    const auto strongest = strongestSinkHead(*first);
    QVERIFY(strongest.first >= 0);
    QVERIFY2(shows(strongest), qPrintable(chartTitle()));
    QVERIFY2(chartTitle().contains(QStringLiteral("strongest")), qPrintable(chartTitle()));
    QVERIFY2(sinks->text()->text().contains(QStringLiteral("strongest")),
             qPrintable(sinks->text()->text()));

    // The map on another head, set as --layer / --head or a program would: the chart stays.
    const auto other = anotherHead(*first, {strongest});
    ControlState s = wb.controls();
    s.layer = other.first;
    s.head = other.second;
    wb.setControls(s);
    QVERIFY(runAndWait());
    QCOMPARE(wb.lastResult()->map.layer, other.first);
    QCOMPARE(wb.lastResult()->map.head, other.second);
    QVERIFY2(shows(strongest), qPrintable(chartTitle()));

    // A click in the Sinks heatmap picks a head for the map and the chart.
    const auto picked = anotherHead(*first, {strongest, other});
    Q_EMIT sinks->headChosen(picked.first, picked.second);
    QVERIFY(runAndWait());
    QVERIFY2(shows(picked), qPrintable(chartTitle()));
    QVERIFY2(!chartTitle().contains(QStringLiteral("strongest")), qPrintable(chartTitle()));
    // Kept across a run with other settings.
    s = wb.controls();
    s.inference.attention.threshold_prefill = 0.3;
    wb.setControls(s);
    QVERIFY(runAndWait());
    QVERIFY2(shows(picked), qPrintable(chartTitle()));
    // A head picked in the map is the chart's too.
    Q_EMIT map->headChosen(strongest.first, strongest.second);
    QVERIFY(runAndWait());
    QVERIFY2(shows(strongest), qPrintable(chartTitle()));
    QVERIFY2(!chartTitle().contains(QStringLiteral("strongest")), qPrintable(chartTitle()));
  }

  void bannerMarksStaleViews() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    MainWindow w(&wb);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    QVERIFY(showWithModel(wb, w, test::longPrompt()));
    wb.runNow();
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
    auto* banner = w.findChild<QLabel*>(QStringLiteral("staleBanner"));
    QVERIFY(banner && !banner->isVisible());
    ControlState s = wb.controls();
    s.inference.attention.threshold_prefill = 0.4;
    wb.setControls(s);
    QVERIFY(banner->isVisible());
    QVERIFY(banner->text().contains(QStringLiteral("controls changed")));
    QVERIFY(w.viewDocks().at(0)->windowTitle().contains(QStringLiteral("out of date")));
    wb.runNow();
    // The run that will update the views is on its way: the titles say so, the banner goes.
    QVERIFY(!banner->isVisible());
    QVERIFY(w.viewDocks().at(0)->windowTitle().contains(QStringLiteral("updating")));
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 2, 30000);
    QVERIFY(!banner->isVisible());
    QVERIFY(!w.viewDocks().at(0)->windowTitle().contains(QStringLiteral("out of date")));
    QVERIFY(!w.viewDocks().at(0)->windowTitle().contains(QStringLiteral("updating")));
  }

  // During a run the status bar has the whole progress line (phase, percentage, time left), which
  // a narrow progress bar shortens.
  void statusBarHasTheWholeProgressLine() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    MainWindow w(&wb);
    QVERIFY(showWithModel(wb, w, test::longPrompt()));
    auto* status = w.findChild<QLabel*>(QStringLiteral("status"));
    QVERIFY(status);
    QStringList lines;
    connect(&wb, &Workbench::runProgress, &w, [&] { lines << status->toolTip(); });
    QSignalSpy ready(&wb, &Workbench::resultReady);
    wb.runNow();
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
    QVERIFY(!lines.isEmpty());
    for (const QString& l : lines) {
      QVERIFY2(l.startsWith(QStringLiteral("Running: ")) && l.contains(QLatin1Char('%')), qPrintable(l));
    }
    QVERIFY2(std::any_of(lines.begin(), lines.end(),
                         [](const QString& l) { return l.contains(QStringLiteral("prefill")); }),
             qPrintable(lines.join(QLatin1Char('|'))));
    QVERIFY(!status->toolTip().startsWith(QStringLiteral("Running")));  // the run's summary now
  }

  // Under auto-run every control change is followed by a run: no banner comes and goes (it
  // would move the views down and up on each change); the titles say the views are updating.
  void autoRunChangesDoNotMoveTheViews() {
    Workbench wb(BackendKind::kCpu, 2);
    MainWindow w(&wb);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    QVERIFY(showWithModel(wb, w, test::longPrompt()));
    QVERIFY(firstRunDone(wb, ready));
    QCoreApplication::processEvents();
    QDockWidget* first = w.viewDocks().at(0);
    const int top = first->mapTo(&w, QPoint(0, 0)).y();
    auto* banner = w.findChild<QLabel*>(QStringLiteral("staleBanner"));
    QVERIFY(banner);
    ControlState s = wb.controls();
    s.inference.attention.threshold_prefill = 0.05;
    wb.setControls(s);
    QCoreApplication::processEvents();
    QVERIFY(wb.viewsStale());
    QVERIFY(!banner->isVisible());
    QVERIFY2(first->windowTitle().contains(QStringLiteral("updating")), qPrintable(first->windowTitle()));
    QCOMPARE(first->mapTo(&w, QPoint(0, 0)).y(), top);
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 2, 30000);
    QTRY_VERIFY(!wb.running());
    QVERIFY(!first->windowTitle().contains(QStringLiteral("updating")));
    QCOMPARE(first->mapTo(&w, QPoint(0, 0)).y(), top);
  }

  // Cancel with the keyboard focus on the Cancel button: once the run stops, the focus is on
  // Run, not passed down the chain to the "gen" box (where one key would change the length).
  void cancelLeavesTheFocusOnRun() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    MainWindow w(&wb);
    QString longer;
    for (int i = 0; i < 8; ++i) longer += test::longPrompt();
    QVERIFY(showWithModel(wb, w, longer));
    QVERIFY(QTest::qWaitForWindowActive(&w));
    auto* cancel = w.findChild<QPushButton*>(QStringLiteral("cancel"));
    auto* run = w.findChild<QPushButton*>(QStringLiteral("run"));
    QVERIFY(cancel && run);
    wb.runNow();  // enables Cancel at once
    QVERIFY(cancel->isEnabled());
    cancel->setFocus(Qt::TabFocusReason);
    QVERIFY(cancel->hasFocus());
    QTest::mouseClick(cancel, Qt::LeftButton);
    // Cancelled, or finished first on a fast machine: either way Cancel is disabled while it
    // holds the focus.
    QTRY_VERIFY_WITH_TIMEOUT(!wb.running(), 30000);
    QVERIFY(!cancel->isEnabled());
    QVERIFY2(run->hasFocus(), qPrintable(QApplication::focusWidget()
                                             ? QApplication::focusWidget()->metaObject()->className()
                                             : QStringLiteral("none")));
  }

  // With auto-run on, an edit's banner says a run follows, not "press Run".
  void bannerSaysAnAutoRunFollows() {
    Workbench wb(BackendKind::kCpu, 2);
    MainWindow w(&wb);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    QVERIFY(showWithModel(wb, w, test::longPrompt()));
    QVERIFY(firstRunDone(wb, ready));
    wb.setPrompt(test::longPrompt() + QStringLiteral(" More."));
    const QString reason = wb.staleReason();
    QVERIFY2(reason.contains(QStringLiteral("updating")), qPrintable(reason));
    QVERIFY2(!reason.contains(QStringLiteral("press Run")), qPrintable(reason));
  }
};

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
