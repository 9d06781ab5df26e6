// SPDX-License-Identifier: Apache-2.0
// The attention map's overlay geometry: every outlined skipped tile lies where attention can
// look (causal, inside window + sinks), for masks recorded by the CPU backend in chunks (a
// sliding window, both position modes) and for masks shaped like the GPU's (cells by index).
#include <QTest>

#include <cmath>

#include "app/gui/models/control_state.h"
#include "app/gui/models/map_overlay.h"
#include "app/gui/models/run_executor.h"
#include "tests/gui/test_model.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {

// A prompt of several hundred tokens (the window below is far shorter).
std::string longText() {
  QString s;
  for (int i = 0; i < 5; ++i) s += test::longPrompt();
  return s.toStdString();
}

// Every rectangle is causal and has a visible pair at each of its extreme rows and columns.
void checkRects(const std::vector<MapRect>& rects, const Visibility& vis, int n) {
  for (const MapRect& r : rects) {
    QVERIFY(r.qFirst >= 0 && r.qLast < n && r.kFirst >= 0 && r.kLast < n);
    QVERIFY(r.qFirst <= r.qLast && r.kFirst <= r.kLast);
    QVERIFY2(r.kFirst <= r.qLast, "a tile wholly in the future of its queries");
    QVERIFY2(r.kLast <= r.qLast, "a tile reaching past the last query");
    bool firstKey = false, lastKey = false;
    for (int q = r.qFirst; q <= r.qLast; ++q) {
      firstKey = firstKey || vis.visible(q, r.kFirst);
      lastKey = lastKey || vis.visible(q, r.kLast);
    }
    QVERIFY2(firstKey && lastKey, "a tile edge no query of the tile can see");
  }
}

}  // namespace

class TestMapOverlay : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void visibilityRule() {
    const Visibility full;
    QVERIFY(full.visible(5, 5));
    QVERIFY(!full.visible(5, 6));
    const Visibility win{2, 4};  // S = 2, W = 4
    QVERIFY(win.visible(10, 0) && win.visible(10, 1));
    QVERIFY(!win.visible(10, 2) && !win.visible(10, 6));
    QVERIFY(win.visible(10, 7) && win.visible(10, 10));
    QVERIFY(win.anyVisible(8, 12, 0, 2));
    QVERIFY(!win.anyVisible(20, 24, 3, 10));   // evicted for every query
    QVERIFY(!win.anyVisible(0, 4, 5, 9));      // future
    QVERIFY(!win.anyVisible(20, 24, 3, 17));   // key 16 is just out of query 20's window
    QVERIFY(win.anyVisible(20, 24, 3, 18));    // key 17 is in it
  }

  void ownWindowRule() {
    // A local layer's own window (8) keeps no sinks, with or without the cache's window.
    const Visibility own{0, 0, 8};
    QVERIFY(own.visible(20, 13) && own.visible(20, 20));
    QVERIFY(!own.visible(20, 12) && !own.visible(20, 0));
    QVERIFY(own.outsideOwnWindow(20, 12) && !own.outsideOwnWindow(20, 13));
    const Visibility both{4, 16, 8};  // S = 4, W = 16, own 8
    QVERIFY(!both.visible(30, 0) && !both.visible(30, 3));  // sinks kept by the cache, past 8
    QVERIFY(both.visible(5, 0));                           // a sink inside the own window
    QVERIFY(both.visible(30, 23) && !both.visible(30, 22));
    // Tiles: queries 64-127 reach back to key 57 (query 64's window), 128-191 not into 0-63.
    QVERIFY(own.anyVisible(64, 128, 0, 64));
    QVERIFY(!own.anyVisible(128, 192, 0, 64));
    QVERIFY(!both.anyVisible(128, 192, 0, 64));  // the cache's sinks do not bring it back
    QVERIFY(!own.anyVisible(64, 128, 0, 57));
    // A skipped tile's outline stays inside the own window: [q - 7, q] on every row.
    MapRect r{64, 127, 64, 127};
    const auto poly = visibleOutline(r, own);
    QCOMPARE(int(poly.size()), 1);
    for (const auto& [k, q] : poly[0]) QVERIFY2(k >= q - 8 - 1e-9, "outline outside the own window");
    // Clipping a tile drops what only the own window hides.
    SkipMask m;
    m.rows = m.cols = 3;
    m.cells.assign(9, 1);
    m.cells[2 * 3 + 0] = 2;  // queries 128-191 x keys 0-63: past every row's own window
    m.cells[1 * 3 + 0] = 2;  // queries 64-127 x keys 0-63: keys 57-63 for queries 64-70
    int total = 0;
    const auto rects = skippedMapRects(m, 64, 192, own, &total);
    QCOMPARE(total, 2);
    QCOMPARE(int(rects.size()), 1);
    QCOMPARE(rects[0].qFirst, 64);
    QCOMPARE(rects[0].qLast, 70);
    QCOMPARE(rects[0].kFirst, 57);
    QCOMPARE(rects[0].kLast, 63);
  }

  // A Gemma 2 model (the family oracle, local layers windowed to 8 tokens): the run's map says
  // which window it was made under, its probabilities and alpha respect it, and the sparsity
  // counts of a local layer hold only the tiles its window reaches (none of them "skipped" for
  // being out of reach).
  void gemmaLocalLayerMapAndCounts() {
    const std::string path = std::string(SINKSCOPE_SOURCE_DIR) + "/tests/data/oracles/gemma2_tied_f32.gguf";
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.loadModel(path);
    ControlState s;
    s.inference.attention.threshold_prefill = 0.5;
    s.maxTokens = 1;
    s.layer = 0;
    s.head = 1;
    s.compare = false;
    std::string text;
    for (int i = 0; i < 3; ++i) text += "The garden was quiet in the morning and the tomatoes were ripe. ";
    RunRequest req = s.toRequest(text);
    req.mapSize = 256;
    RunResultPtr r;
    try {
      r = ex.run(req, 1);
    } catch (const std::exception& e) {
      QFAIL(e.what());
    }
    const int n = int(r->promptTokens.size());
    QVERIFY2(n > 128 && n <= 256, "the prompt must span three query tiles");
    const AttentionMap& a = r->map;
    QCOMPARE(a.ownWindow, 8);
    QCOMPARE(a.cols, n);  // one cell per pair
    const Visibility vis{0, 0, a.ownWindow};
    for (int q = 0; q < n; ++q) {
      double sum = 0;
      for (int k = 0; k <= q; ++k) {
        const float p = a.cells[size_t(q) * a.cols + k];
        if (!vis.visible(q, k)) QCOMPARE(p, 0.0f);
        sum += p;
      }
      QVERIFY(std::abs(sum - 1.0) < 1e-4);
    }
    // alpha_0 is the mean over the 8 queries that see key 0, not over all n.
    double col0 = 0;
    for (int q = 0; q < 8; ++q) col0 += a.cells[size_t(q) * a.cols];
    QVERIFY(std::abs(a.alpha[0] - col0 / 8.0) < 1e-5);
    // Visited tiles: the diagonal and, for every query tile after the first, the tile its first
    // rows' windows reach back into; a global layer: the causal triangle.
    const int tiles = (n + 63) / 64;
    for (int l = 0; l < r->nLayer; ++l)
      for (int h = 0; h < r->nHead; ++h) {
        const TileCounts& c = r->probesPrefill.prefill[size_t(l) * r->nHead + h];
        QCOMPARE(c.visited, int64_t(l % 2 == 0 ? 2 * tiles - 1 : tiles * (tiles + 1) / 2));
      }
    int total = 0;
    const auto rects = skippedMapRects(r->probes.mask, 64, n, vis, &total);
    QCOMPARE(int64_t(total), r->probesPrefill.prefill[size_t(s.head)].skipped);
    QCOMPARE(int(rects.size()), total);  // every skipped tile has pairs the layer can see
    checkRects(rects, vis, n);
  }

  void gpuShapedMaskDropsImpossibleTiles() {
    // Cells by index (query tile r = 64 r.., KV tile t = 64 t..): a skipped cell above the
    // diagonal and one outside the window are not drawn; the visible ones are clipped.
    SkipMask m;
    m.rows = 4;
    m.cols = 4;
    m.cells.assign(16, 1);
    m.cells[0 * 4 + 2] = 2;  // queries 0-63, keys 128-191: future
    m.cells[3 * 4 + 0] = 2;  // queries 192-255, keys 0-63: sinks only
    m.cells[3 * 4 + 1] = 2;  // keys 64-127: evicted with W = 64
    m.cells[2 * 4 + 2] = 2;  // the diagonal tile
    const Visibility vis{4, 64};
    int total = 0;
    const auto rects = skippedMapRects(m, 64, 256, vis, &total);
    QCOMPARE(total, 4);
    QCOMPARE(int(rects.size()), 2);
    checkRects(rects, vis, 256);
    QCOMPARE(rects[0].kFirst, 128);  // diagonal: keys up to each row's own position
    QCOMPARE(rects[0].kLast, 191);
    QCOMPARE(rects[1].kFirst, 0);  // the sink page: only the 4 sinks are visible
    QCOMPARE(rects[1].kLast, 3);
    // The diagonal tile's outline is the band between k = q - W + 1 and k = q.
    const auto diag = visibleOutline(rects[0], vis);
    QCOMPARE(int(diag.size()), 1);
    for (const auto& [k, q] : diag[0]) {
      QVERIFY2(k <= q + 1 + 1e-9, "an outline point in the future");  // cell edges: +-0.5
      QVERIFY2(k >= q - 64 - 1e-9, "an outline point outside the window");
    }
    QVERIFY(diag[0].size() <= 10);  // straight edges, not a staircase
    QCOMPARE(diag[0].front(), diag[0].back());
    // The sink tile: one rectangle over keys 0-3.
    const auto sink = visibleOutline(rects[1], vis);
    QCOMPARE(int(sink.size()), 1);
    for (const auto& [k, q] : sink[0]) QVERIFY(k >= -0.5 && k <= 3.5);
  }

  void cpuMasksAreCausalAndInsideTheWindow_data() {
    QTest::addColumn<bool>("window");
    QTest::addColumn<int>("positionMode");
    QTest::newRow("full cache") << false << int(PositionMode::kCache);
    QTest::newRow("window, cache positions") << true << int(PositionMode::kCache);
    QTest::newRow("window, original positions") << true << int(PositionMode::kOriginal);
  }
  void cpuMasksAreCausalAndInsideTheWindow() {
    QFETCH(bool, window);
    QFETCH(int, positionMode);
    // Random weights give near-uniform scores (nothing to skip): the real model is needed.
    const QString path = test::defaultModelPath();
    if (path.isEmpty()) {
      if (qEnvironmentVariableIntValue("SINKSCOPE_REQUIRE_MODEL"))
        QFAIL("the default model is missing (bash scripts/setup.sh fetches it)");
      QSKIP("the default model is not present (bash scripts/setup.sh fetches it)");
    }
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.loadModel(path.toStdString());
    ControlState s;
    s.inference.attention.threshold_prefill = 0.05;
    s.maxTokens = 2;
    s.layer = 1;
    s.head = 2;
    s.compare = false;
    s.setSlidingWindow(window);
    s.inference.cache.window_size = 192;
    s.inference.cache.sink_keep_count = 4;
    s.inference.cache.position_mode = PositionMode(positionMode);
    RunResultPtr r;
    try {
      // The skip mask is recorded for the map's head: take the head that skips most.
      r = ex.run(s.toRequest(longText()), 1);
      int64_t most = -1;
      for (int l = 0; l < r->nLayer; ++l)
        for (int h = 0; h < r->nHead; ++h)
          if (r->probesPrefill.prefill[size_t(l) * r->nHead + h].skipped > most) {
            most = r->probesPrefill.prefill[size_t(l) * r->nHead + h].skipped;
            s.layer = l;
            s.head = h;
          }
      r = ex.run(s.toRequest(longText()), 2);
    } catch (const std::exception& e) {
      QFAIL(e.what());
    }
    const int n = int(r->promptTokens.size());
    QVERIFY2(n > 3 * 192, "the prompt must be several windows long");
    Visibility vis;
    if (window) vis = {4, 192};
    int total = 0;
    const auto rects = skippedMapRects(r->probes.mask, 64, n, vis, &total);
    // Every skipped tile of every chunk is placed: the head's skipped prefill tiles.
    const TileCounts& c = r->probesPrefill.prefill[size_t(s.layer) * r->nHead + s.head];
    QVERIFY(c.skipped > 0);
    QCOMPARE(int64_t(total), c.skipped);
    QCOMPARE(int64_t(rects.size()), c.skipped);  // recorded tiles are all visible somewhere
    checkRects(rects, vis, n);
    if (window) {
      // The chunks reached the end of the prompt: the last query tile has outlined tiles.
      bool late = false;
      for (const MapRect& t : rects) late = late || t.qLast >= n - 64;
      QVERIFY(late);
    }
  }
};

QTEST_GUILESS_MAIN(TestMapOverlay)
#include "tst_mapoverlay.moc"
