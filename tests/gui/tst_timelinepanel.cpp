// SPDX-License-Identifier: Apache-2.0
// The Timeline view as a widget (offscreen): lanes, hover text, zoom bounds and reset, search
// with next-match, and the export confirmation or error.
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QTemporaryDir>
#include <QTest>
#include <QWheelEvent>

#include "app/gui/models/view_models.h"
#include "app/gui/panels/timeline_canvas.h"
#include "app/gui/panels/timeline_panel.h"
#include "tests/gui/timeline_sample.h"

using namespace sinkscope;
using namespace sinkscope::gui;

class TestTimelinePanel : public QObject {
  Q_OBJECT
 private:
  TimelineView m_view;
  std::unique_ptr<TimelinePanel> m_panel;
  TimelineCanvas* canvas() { return m_panel->canvas(); }

 private Q_SLOTS:
  void init() {
    auto r = std::make_shared<RunResult>();
    r->timeline = test::sampleTimeline();
    m_panel = std::make_unique<TimelinePanel>(&m_view);
    m_panel->resize(1200, 420);
    m_panel->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_panel.get()));
    m_view.setResult(r);
    QApplication::processEvents();
  }
  void cleanup() { m_panel.reset(); }

  void lanesFillTheCanvas() {
    const LaneLayout& l = canvas()->layout();
    QCOMPARE(int(l.bands.size()), 4);
    QCOMPARE(l.bands.front().label, QStringLiteral("CPU thread 0 (engine)"));
    QCOMPARE(l.bands.back().label, QStringLiteral("GPU 0 stream 9"));
    // Most of the canvas is lanes, not empty space.
    QVERIFY2(TimelineCanvas::kRulerHeight + l.height >= canvas()->height() * 6 / 10,
             qPrintable(QStringLiteral("lanes %1 px of %2").arg(l.height).arg(canvas()->height())));
    QVERIFY(canvas()->grab().width() > 0);  // paints without trouble
    QVERIFY(canvas()->lastDrawnEvents() >= 10);
  }
  void hoverTextDescribesTheEvent() {
    const auto t = m_view.timeline();
    prof::EventRef gemm;
    for (uint32_t l = 0; l < t->lanes().size(); ++l)
      for (uint32_t i = 0; i < t->events(l).size(); ++i)
        if (t->name(t->events(l)[i].name) == "gemm") gemm = {l, i};
    const QPointF p = canvas()->pointOf(gemm);
    QVERIFY(p.x() > TimelineCanvas::kLabelWidth);
    QCOMPARE(canvas()->eventAtPoint(p), gemm);
    const QString tip = canvas()->tooltipAt(p);
    QVERIFY2(tip.contains(QStringLiteral("gemm")) && tip.contains(QStringLiteral("grid (128, 1, 1)")),
             qPrintable(tip));
    QVERIFY(canvas()->tooltipAt(QPointF(5, 5)).isEmpty());  // the ruler's label
    // A click selects it and the panel names it.
    QTest::mouseClick(canvas(), Qt::LeftButton, {}, p.toPoint());
    QCOMPARE(canvas()->selected(), gemm);
  }
  void zoomStaysInsideTheTraceAndResets() {
    const auto t = m_view.timeline();
    const QPoint mid(canvas()->width() / 2, 40);
    for (int i = 0; i < 30; ++i) {  // zoom out far beyond the trace
      QWheelEvent out(mid, canvas()->mapToGlobal(mid), {}, QPoint(0, -120), Qt::NoButton, {},
                      Qt::NoScrollPhase, false);
      QApplication::sendEvent(canvas(), &out);
    }
    QCOMPARE(canvas()->windowStart(), t->begin_ns());
    QCOMPARE(canvas()->windowEnd(), t->end_ns());
    for (int i = 0; i < 60; ++i) {  // zoom in to the limit
      QWheelEvent in(mid, canvas()->mapToGlobal(mid), {}, QPoint(0, 120), Qt::NoButton, {},
                     Qt::NoScrollPhase, false);
      QApplication::sendEvent(canvas(), &in);
    }
    QVERIFY(canvas()->windowEnd() - canvas()->windowStart() >= 1000);
    QVERIFY(canvas()->windowEnd() - canvas()->windowStart() < t->end_ns() - t->begin_ns());
    QVERIFY(canvas()->windowStart() >= t->begin_ns() && canvas()->windowEnd() <= t->end_ns());
    canvas()->setWindow(t->end_ns() + 5000, t->end_ns() + 9000);  // panned past the end
    QVERIFY(canvas()->windowEnd() <= t->end_ns());
    QTest::mouseDClick(canvas(), Qt::LeftButton, {}, mid);
    QCOMPARE(canvas()->windowStart(), t->begin_ns());
    QCOMPARE(canvas()->windowEnd(), t->end_ns());
  }
  void searchCountsMatchesAndStepsThroughThem() {
    QTest::keyClicks(m_panel->searchField(), QStringLiteral("mlp"));
    QCOMPARE(int(canvas()->matches().size()), 3);
    bool shown = false;
    for (QLabel* l : m_panel->findChildren<QLabel*>()) shown = shown || l->text() == QStringLiteral("3 match(es)");
    QVERIFY(shown);
    QTest::keyClick(m_panel->searchField(), Qt::Key_Return);
    const auto t = m_view.timeline();
    QCOMPARE(t->name(t->event(canvas()->selected()).name), std::string("mlp"));
    const int64_t first = t->event(canvas()->selected()).start_ns;
    QTest::keyClick(m_panel->searchField(), Qt::Key_Return);
    QVERIFY(t->event(canvas()->selected()).start_ns > first);
    m_panel->searchField()->clear();
    QVERIFY(canvas()->matches().empty());
  }
  void exportSaysWhereTheTraceWent() {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("trace.json"));
    QCOMPARE(m_panel->exportTraceTo(path), QString());
    QVERIFY2(m_panel->statusLabel()->text().contains(QDir::toNativeSeparators(path)),
             qPrintable(m_panel->statusLabel()->text()));
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QVERIFY(!QJsonDocument::fromJson(f.readAll()).isNull());
    // A folder that does not exist: an error naming the path, and no file.
    const QString bad = dir.filePath(QStringLiteral("missing/trace.json"));
    QVERIFY(!m_panel->exportTraceTo(bad).isEmpty());
    QVERIFY2(m_panel->statusLabel()->text().startsWith(QStringLiteral("Could not write")),
             qPrintable(m_panel->statusLabel()->text()));
    QVERIFY(!QFile::exists(bad));
  }
};

QTEST_MAIN(TestTimelinePanel)
#include "tst_timelinepanel.moc"
