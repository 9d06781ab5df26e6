// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/timeline_lanes.h"

#include <algorithm>
#include <cmath>

#include "app/gui/models/colours.h"

namespace sinkscope::gui {

namespace {
int laneOrder(prof::LaneKind k) {
  switch (k) {
    case prof::LaneKind::kCpuThread: return 0;
    case prof::LaneKind::kNvtx: return 1;
    case prof::LaneKind::kCudaStream: return 2;
  }
  return 3;
}

QString durationText(int64_t ns) {
  if (ns < 1000) return QStringLiteral("%1 ns").arg(ns);
  if (ns < 1000000) return QStringLiteral("%1 µs").arg(double(ns) / 1e3, 0, 'f', 2);
  if (ns < 1000000000) return QStringLiteral("%1 ms").arg(double(ns) / 1e6, 0, 'f', 3);
  return QStringLiteral("%1 s").arg(double(ns) / 1e9, 0, 'f', 3);
}
}  // namespace

// A CPU lane that holds the engine's phases ("run", "prefill", "decode step") is the engine
// thread; the other CPU lanes are its pool's workers.
bool isEngineLane(const prof::Timeline& t, uint32_t lane) {
  if (t.lanes()[lane].kind != prof::LaneKind::kCpuThread) return false;
  for (const prof::Event& e : t.events(lane)) {
    if (e.depth != 0) continue;
    const std::string& n = t.name(e.name);
    if (n == "run" || n == "prefill" || n == "decode step") return true;
  }
  return false;
}

LaneLayout layoutLanes(const prof::Timeline& t, int available, int minRow, int maxRow, int gap) {
  LaneLayout l;
  std::vector<uint32_t> order(t.lanes().size());
  std::vector<char> engine(t.lanes().size());
  bool anyWorker = false;
  for (uint32_t i = 0; i < order.size(); ++i) {
    order[i] = i;
    engine[i] = isEngineLane(t, i);
  }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const prof::Lane &la = t.lanes()[a], &lb = t.lanes()[b];
    if (laneOrder(la.kind) != laneOrder(lb.kind)) return laneOrder(la.kind) < laneOrder(lb.kind);
    if (engine[a] != engine[b]) return engine[a] > engine[b];  // the engine thread first
    return la.id < lb.id;
  });
  for (uint32_t i = 0; i < order.size(); ++i)
    anyWorker = anyWorker || (t.lanes()[i].kind == prof::LaneKind::kCpuThread && !engine[i]);
  int rows = 0;
  for (uint32_t lane : order) {
    if (t.events(lane).empty()) continue;
    LaneBand b;
    b.lane = lane;
    b.label = QString::fromStdString(t.lanes()[lane].name);
    if (engine[lane] && anyWorker) b.label += QStringLiteral(" (engine)");
    else if (t.lanes()[lane].kind == prof::LaneKind::kCpuThread && !engine[lane] &&
             std::any_of(engine.begin(), engine.end(), [](char e) { return e != 0; }))
      b.label += QStringLiteral(" (worker)");
    b.rows = std::max(1, t.max_depth(lane) + 1);
    rows += b.rows;
    l.bands.push_back(b);
  }
  const int gaps = gap * std::max(0, int(l.bands.size()) - 1);
  l.rowHeight = rows > 0 ? std::clamp((available - gaps) / rows, minRow, maxRow) : minRow;
  int y = 0;
  for (LaneBand& b : l.bands) {
    b.y = y;
    b.height = b.rows * l.rowHeight;
    y += b.height + gap;
  }
  l.height = l.bands.empty() ? 0 : y - gap;
  return l;
}

RulerTicks rulerTicks(int64_t t0, int64_t t1, double pixels, double minSpacing) {
  RulerTicks r;
  const double span = double(std::max<int64_t>(1, t1 - t0));
  const double perPixel = span / std::max(1.0, pixels);
  const double want = perPixel * minSpacing;  // ns between ticks at least
  int64_t step = 1;
  for (int64_t decade = 1;; decade *= 10) {
    bool found = false;
    for (int m : {1, 2, 5})
      if (double(m * decade) >= want) {
        step = m * decade;
        found = true;
        break;
      }
    if (found || decade > int64_t(1e15)) break;
  }
  r.step = step;
  if (step >= 1000000000) r.unit = QStringLiteral("s"), r.unitNs = 1e9;
  else if (step >= 1000000) r.unit = QStringLiteral("ms"), r.unitNs = 1e6;
  else if (step >= 1000) r.unit = QStringLiteral("µs"), r.unitNs = 1e3;
  else r.unit = QStringLiteral("ns"), r.unitNs = 1;
  const int64_t first = (t0 >= 0 ? (t0 + step - 1) / step : t0 / step) * step;
  for (int64_t x = first; x <= t1; x += step) r.ticks.push_back(x);
  return r;
}

QString tickLabel(const RulerTicks& r, int64_t t) {
  const double v = double(t) / r.unitNs;
  // Enough decimals to tell neighbouring ticks apart (a step of 0.5 ms needs one).
  const double stepUnits = double(r.step) / r.unitNs;
  const int decimals = stepUnits >= 1 ? 0 : int(std::ceil(-std::log10(stepUnits) - 1e-9));
  return QStringLiteral("%1 %2").arg(v, 0, 'f', decimals).arg(r.unit);
}

prof::EventRef eventAt(const prof::Timeline& t, const LaneLayout& l, int64_t time, int y,
                       int64_t slackNs) {
  for (const LaneBand& b : l.bands) {
    if (y < b.y || y >= b.y + b.height) continue;
    const int row = (y - b.y) / std::max(1, l.rowHeight);
    prof::EventRef best;
    int64_t bestDist = slackNs + 1;
    for (uint32_t idx : t.window(b.lane, time - slackNs, time + slackNs + 1)) {
      const prof::Event& e = t.events(b.lane)[idx];
      if (e.depth != row) continue;
      const int64_t end = std::max(e.end_ns, e.start_ns + 1);
      const int64_t dist = time < e.start_ns ? e.start_ns - time : (time >= end ? time - end + 1 : 0);
      if (dist < bestDist) {
        bestDist = dist;
        best = {b.lane, idx};
      }
    }
    return best;
  }
  return {};
}

QString eventPhase(const prof::Timeline& t, prof::EventRef r) {
  for (prof::EventRef p = r; p.valid(); p = t.event(p).parent) {
    const std::string& n = t.name(t.event(p).name);
    if (n == "prefill" || n == "decode step") return QString::fromStdString(n);
  }
  for (prof::EventRef p = r; p.valid(); p = t.event(p).parent)
    if (t.name(t.event(p).name) == "run") return QStringLiteral("run");
  return {};
}

QString eventTooltip(const prof::Timeline& t, prof::EventRef r) {
  if (!r.valid()) return {};
  const prof::Event& e = t.event(r);
  QStringList lines;
  lines << QStringLiteral("<b>%1</b> (%2)")
               .arg(QString::fromStdString(t.display_name(e)).toHtmlEscaped(),
                    QString::fromLatin1(prof::event_kind_name(e.kind)));
  lines << QStringLiteral("duration %1, starts at %2")
               .arg(durationText(e.duration_ns()), durationText(e.start_ns - t.begin_ns()));
  lines << QStringLiteral("lane: %1").arg(QString::fromStdString(t.lanes()[r.lane].name));
  const int64_t layer = t.layer_of(r);
  const QString phase = eventPhase(t, r);
  if (layer >= 0 || !phase.isEmpty())
    lines << QStringLiteral("%1%2%3")
                 .arg(layer >= 0 ? QStringLiteral("layer %1").arg(layer) : QString(),
                      layer >= 0 && !phase.isEmpty() ? QStringLiteral(", ") : QString(),
                      phase.isEmpty() ? QString() : QStringLiteral("phase: %1").arg(phase));
  if (e.kind == prof::EventKind::kKernel)
    lines << QStringLiteral("grid (%1, %2, %3), block (%4, %5, %6)")
                 .arg(e.grid[0]).arg(e.grid[1]).arg(e.grid[2])
                 .arg(e.block[0]).arg(e.block[1]).arg(e.block[2]);
  if (e.bytes > 0)
    lines << QStringLiteral("%1 bytes%2").arg(e.bytes).arg(
        e.kind == prof::EventKind::kMemcpy
            ? QStringLiteral(" (%1)").arg(QString::fromLatin1(prof::copy_kind_name(e.copy_kind)))
            : QString());
  if (e.achieved_tflops() > 0) lines << QStringLiteral("%1 TFLOP/s").arg(e.achieved_tflops(), 0, 'f', 1);
  return lines.join(QStringLiteral("<br>"));
}

QColor layerColour(int64_t layer) {
  if (layer < 0) return QColor(190, 190, 190);
  return palette::categorical(int(layer));
}

std::vector<prof::EventRef> searchEvents(const prof::Timeline& t, const QString& text) {
  std::vector<prof::EventRef> out;
  const QString needle = text.trimmed();
  if (needle.isEmpty()) return out;
  // Names are shared: test each name once, then collect the events that use a matching one.
  std::vector<char> nameHit(t.names().size(), 0);
  for (size_t i = 0; i < t.names().size(); ++i)
    nameHit[i] = QString::fromStdString(t.names()[i]).contains(needle, Qt::CaseInsensitive);
  for (uint32_t lane = 0; lane < t.lanes().size(); ++lane) {
    const auto ev = t.events(lane);
    for (uint32_t i = 0; i < ev.size(); ++i) {
      bool hit = nameHit[ev[i].name];
      if (!hit && ev[i].arg != prof::kNoArg)  // "layer 3" matches "layer 3"
        hit = QString::fromStdString(t.display_name(ev[i])).contains(needle, Qt::CaseInsensitive);
      if (hit) out.push_back({lane, i});
    }
  }
  std::sort(out.begin(), out.end(), [&](prof::EventRef a, prof::EventRef b) {
    return t.event(a).start_ns < t.event(b).start_ns;
  });
  return out;
}

void clampWindow(int64_t begin, int64_t end, int64_t& t0, int64_t& t1, int64_t minSpan) {
  const int64_t full = std::max<int64_t>(1, end - begin);
  int64_t span = std::clamp<int64_t>(t1 - t0, std::min(minSpan, full), full);
  t0 = std::clamp<int64_t>(t0, begin, end - span);
  t1 = t0 + span;
}

}  // namespace sinkscope::gui
