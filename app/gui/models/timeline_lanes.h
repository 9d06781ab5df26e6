// SPDX-License-Identifier: Apache-2.0
// The Timeline view's logic without painting (docs/gui.md, "Timeline"): which lanes are drawn in
// which order and how tall, the time ruler's ticks, hit testing, hover text, layer colours and
// search. TimelineCanvas only paints what these return.
#pragma once

#include <QColor>
#include <QString>
#include <QVector>

#include <cstdint>
#include <vector>

#include "profiler/timeline.h"

namespace sinkscope::gui {

// One drawn lane: CPU threads first (the engine thread, marked "(engine)", then its pool's
// workers, "(worker)"), then NVTX lanes, then GPU streams.
struct LaneBand {
  uint32_t lane = 0;  // index into Timeline::lanes()
  QString label;      // "CPU thread 0", "GPU 0 stream 7", ...
  int rows = 1;       // nesting depth + 1
  int y = 0;          // top, in pixels from the top of the lanes area
  int height = 0;     // rows * row height
};

struct LaneLayout {
  std::vector<LaneBand> bands;
  int rowHeight = 0;
  int height = 0;  // every band, with the gaps between them
};

// Lanes of t stacked from y = 0; rows are `available` / (all rows) high, within
// [minRow, maxRow] pixels, so a few lanes fill the panel and many scroll.
LaneLayout layoutLanes(const prof::Timeline& t, int available, int minRow = 16, int maxRow = 30,
                       int gap = 6);

// Time ruler over [t0, t1] (ns) drawn `pixels` wide: a 1-2-5 step with at least minSpacing
// pixels between ticks, the unit that step reads best in, and the tick times.
struct RulerTicks {
  int64_t step = 1;   // ns
  QString unit;       // "ns", "µs", "ms", "s"
  double unitNs = 1;  // ns per unit
  std::vector<int64_t> ticks;
};
RulerTicks rulerTicks(int64_t t0, int64_t t1, double pixels, double minSpacing = 80);
// "12.5 ms": a tick at `t` ns after the trace's start, in the ruler's unit.
QString tickLabel(const RulerTicks& r, int64_t t);

// The event drawn at (time t, y) in layout l: the deepest event of that row whose span holds t,
// or, when none, the nearest within `slackNs` (events narrower than a pixel); invalid when none.
prof::EventRef eventAt(const prof::Timeline& t, const LaneLayout& l, int64_t time, int y,
                       int64_t slackNs = 0);

// Hover text: name, kind, duration, start (from the trace's start), lane, layer, phase
// (prefill / decode step), grid and block of kernels, bytes of copies.
QString eventTooltip(const prof::Timeline& t, prof::EventRef r);

// The phase an event belongs to: the nearest enclosing range named "prefill" or "decode step"
// (or "run"); "" when none.
QString eventPhase(const prof::Timeline& t, prof::EventRef r);

// Colour of an event: layers get the categorical palette (cycling), everything outside a layer
// a neutral grey.
QColor layerColour(int64_t layer);

// Events whose shown name contains `text` (case-insensitive), by start time; empty text: none.
std::vector<prof::EventRef> searchEvents(const prof::Timeline& t, const QString& text);

// [t0, t1] kept inside the trace [begin, end] and at least minSpan ns wide; a window wider than
// the trace becomes the whole trace.
void clampWindow(int64_t begin, int64_t end, int64_t& t0, int64_t& t1, int64_t minSpan = 1000);

}  // namespace sinkscope::gui
