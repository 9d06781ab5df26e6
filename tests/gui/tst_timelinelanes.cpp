// SPDX-License-Identifier: Apache-2.0
// The Timeline view's logic (app/gui/models/timeline_lanes.h): lane order and heights, the
// ruler's steps and units, hit testing, hover text, layer colours, search, window bounds.
#include <QTest>

#include "app/gui/models/timeline_lanes.h"
#include "tests/gui/timeline_sample.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {
constexpr int64_t us = 1000;

prof::EventRef find(const prof::Timeline& t, const char* lane, const char* name, int64_t start_us) {
  for (uint32_t l = 0; l < t.lanes().size(); ++l) {
    if (t.lanes()[l].name != lane) continue;
    const auto ev = t.events(l);
    for (uint32_t i = 0; i < ev.size(); ++i)
      if (t.name(ev[i].name) == name && ev[i].start_ns == start_us * us) return {l, i};
  }
  return {};
}
}  // namespace

class TestTimelineLanes : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void lanesAreOrderedCpuThenGpuAndFillTheSpace() {
    const auto t = test::sampleTimeline();
    const LaneLayout l = layoutLanes(*t, 400);
    QCOMPARE(int(l.bands.size()), 4);
    // Thread 0 runs the prefill (the engine thread), thread 1 only layers (a pool worker).
    QCOMPARE(l.bands[0].label, QStringLiteral("CPU thread 0 (engine)"));
    QCOMPARE(l.bands[1].label, QStringLiteral("CPU thread 1 (worker)"));
    QCOMPARE(l.bands[2].label, QStringLiteral("GPU 0 stream 7"));
    QCOMPARE(l.bands[3].label, QStringLiteral("GPU 0 stream 9"));
    QCOMPARE(l.bands[0].rows, 3);  // prefill > layer > op
    QCOMPARE(l.bands[1].rows, 2);
    QCOMPARE(l.bands[2].rows, 1);
    // 7 rows and 3 gaps of 6 in 400 px: rows of min(30, 382 / 7) = 30 px.
    QCOMPARE(l.rowHeight, 30);
    QCOMPARE(l.bands[1].y, 3 * 30 + 6);
    QCOMPARE(l.height, 7 * 30 + 3 * 6);
    QVERIFY(l.height <= 400);
    QCOMPARE(layoutLanes(*t, 100).rowHeight, 16);  // too little room: the minimum, scrolling
    QCOMPARE(layoutLanes(*t, 200).rowHeight, (200 - 18) / 7);
  }
  void theEngineThreadComesFirst() {
    using namespace prof;
    TimelineBuilder b;
    const uint32_t worker = b.lane(LaneKind::kCpuThread, 0, 0, {}, "CPU thread 0", 5);
    const uint32_t engine = b.lane(LaneKind::kCpuThread, 1, 0, {}, "CPU thread 1", 6);
    auto range = [&](const char* name, int64_t s, int64_t e) {
      Event ev;
      ev.name = b.intern(name);
      ev.start_ns = s;
      ev.end_ns = e;
      return ev;
    };
    b.add(worker, range("mlp", 10, 20));
    b.add(engine, range("prefill", 0, 100));
    const auto t = b.build();
    const LaneLayout l = layoutLanes(*t, 200);
    QCOMPARE(l.bands[0].label, QStringLiteral("CPU thread 1 (engine)"));
    QCOMPARE(l.bands[1].label, QStringLiteral("CPU thread 0 (worker)"));
  }
  void rulerPicksAReadableStepAndUnit() {
    RulerTicks r = rulerTicks(0, 10 * 1000 * us, 1000);  // 10 ms over 1000 px
    QCOMPARE(r.step, 1000 * us);
    QCOMPARE(r.unit, QStringLiteral("ms"));
    QCOMPARE(int(r.ticks.size()), 11);
    QCOMPARE(tickLabel(r, 3000 * us), QStringLiteral("3 ms"));
    r = rulerTicks(0, 5 * us, 1000);  // 5 µs: 400 ns wanted -> 500 ns
    QCOMPARE(r.step, int64_t(500));
    QCOMPARE(r.unit, QStringLiteral("ns"));
    r = rulerTicks(0, 2000000 * us, 800);  // 2 s over 800 px: 200 ms
    QCOMPARE(r.step, 200000 * us);
    QCOMPARE(r.unit, QStringLiteral("ms"));
    r = rulerTicks(1500 * us, 4000 * us, 1000);  // 2.5 ms: 200 µs steps from 1.6 ms
    QCOMPARE(r.step, 200 * us);
    QCOMPARE(r.unit, QStringLiteral("µs"));
    QCOMPARE(r.ticks.front(), 1600 * us);
    r = rulerTicks(0, 4000 * us, 400);  // 0.8 ms wanted -> 1 ms; and a half-unit step labels
    QCOMPARE(r.step, 1000 * us);
    RulerTicks half = r;
    half.step = 500 * us;
    QCOMPARE(tickLabel(half, 1500 * us), QStringLiteral("1.5 ms"));
    for (int px : {200, 600, 1600})  // ticks never closer than the spacing asked for
      for (int64_t span : {int64_t(3), 7 * us, 333 * us, 9000 * us}) {
        const RulerTicks k = rulerTicks(0, span, px, 80);
        QVERIFY(double(k.step) / double(span) * px >= 80 - 1e-9);
      }
  }
  void hitTestFindsTheEventOfTheRow() {
    const auto t = test::sampleTimeline();
    const LaneLayout l = layoutLanes(*t, 400);
    const int row = l.rowHeight;
    // CPU thread 0, row 2 at 250 µs: mlp [200, 390); row 1: layer 0; row 0: prefill.
    prof::EventRef r = eventAt(*t, l, 250 * us, 2 * row + 1);
    QVERIFY(r.valid());
    QCOMPARE(t->name(t->event(r).name), std::string("mlp"));
    r = eventAt(*t, l, 250 * us, row + 1);
    QCOMPARE(t->display_name(t->event(r)), std::string("layer 0"));
    QCOMPARE(t->name(t->event(eventAt(*t, l, 250 * us, 1)).name), std::string("prefill"));
    // CPU thread 1 at 100 µs: nothing; with 150 µs of slack, its layer at 200.
    const int y1 = l.bands[1].y + 1;
    QVERIFY(!eventAt(*t, l, 100 * us, y1).valid());
    QCOMPARE(t->display_name(t->event(eventAt(*t, l, 100 * us, y1, 150 * us))), std::string("layer 0"));
    // Stream 9 (the fourth band) at 400 µs: the gemm kernel; the gap between bands: nothing.
    r = eventAt(*t, l, 400 * us, l.bands[3].y + 2);
    QCOMPARE(t->name(t->event(r).name), std::string("gemm"));
    QVERIFY(!eventAt(*t, l, 400 * us, l.bands[0].height + 3).valid());
  }
  void tooltipNamesDurationLaneLayerPhaseAndLaunch() {
    const auto t = test::sampleTimeline();
    const QString k = eventTooltip(*t, find(*t, "GPU 0 stream 9", "gemm", 300));
    QVERIFY2(k.contains(QStringLiteral("gemm")) && k.contains(QStringLiteral("kernel")), qPrintable(k));
    QVERIFY2(k.contains(QStringLiteral("duration 200.00 µs")), qPrintable(k));
    QVERIFY2(k.contains(QStringLiteral("starts at 300.00 µs")), qPrintable(k));
    QVERIFY2(k.contains(QStringLiteral("lane: GPU 0 stream 9")), qPrintable(k));
    QVERIFY2(k.contains(QStringLiteral("layer 0")), qPrintable(k));  // launched in layer 0's mlp
    QVERIFY2(k.contains(QStringLiteral("phase: prefill")), qPrintable(k));
    QVERIFY2(k.contains(QStringLiteral("grid (128, 1, 1), block (256, 1, 1)")), qPrintable(k));
    const QString m = eventTooltip(*t, find(*t, "CPU thread 0", "mlp", 410));
    QVERIFY2(m.contains(QStringLiteral("layer 1")), qPrintable(m));
    QVERIFY2(!m.contains(QStringLiteral("grid")), qPrintable(m));
    QCOMPARE(eventPhase(*t, find(*t, "CPU thread 1", "mlp", 210)), QString());  // no prefill there
    QVERIFY(eventTooltip(*t, {}).isEmpty());
  }
  void layersGetDistinctColoursAndTheRestGrey() {
    QVERIFY(layerColour(0) != layerColour(1));
    QCOMPARE(layerColour(0), layerColour(8));  // the palette repeats every 8 layers
    QCOMPARE(layerColour(-1), layerColour(-5));
    for (int l = 0; l < 8; ++l) QVERIFY(layerColour(l) != layerColour(-1));
  }
  void searchMatchesNamesCaseInsensitively() {
    const auto t = test::sampleTimeline();
    auto hits = searchEvents(*t, QStringLiteral("MLP"));
    QCOMPARE(int(hits.size()), 3);
    for (size_t i = 1; i < hits.size(); ++i)
      QVERIFY(t->event(hits[i - 1]).start_ns <= t->event(hits[i]).start_ns);
    QCOMPARE(int(searchEvents(*t, QStringLiteral("layer 1")).size()), 1);
    QCOMPARE(int(searchEvents(*t, QStringLiteral("layer")).size()), 3);
    QCOMPARE(int(searchEvents(*t, QStringLiteral("kernel")).size()), 1);  // attn_kernel
    QVERIFY(searchEvents(*t, QStringLiteral("  ")).empty());
    QVERIFY(searchEvents(*t, QStringLiteral("softmax")).empty());
  }
  void windowStaysInsideTheTrace() {
    int64_t a = -500, b = 300;  // before the start
    clampWindow(0, 1000, a, b, 10);
    QCOMPARE(a, int64_t(0));
    QCOMPARE(b, int64_t(800));
    a = 900, b = 1400;  // past the end
    clampWindow(0, 1000, a, b, 10);
    QCOMPARE(a, int64_t(500));
    QCOMPARE(b, int64_t(1000));
    a = -100, b = 5000;  // wider than the trace: the whole trace
    clampWindow(0, 1000, a, b, 10);
    QCOMPARE(a, int64_t(0));
    QCOMPARE(b, int64_t(1000));
    a = 400, b = 401;  // narrower than the minimum
    clampWindow(0, 1000, a, b, 10);
    QCOMPARE(b - a, int64_t(10));
  }
};

QTEST_APPLESS_MAIN(TestTimelineLanes)
#include "tst_timelinelanes.moc"
