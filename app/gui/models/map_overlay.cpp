// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/map_overlay.h"

#include <algorithm>
#include <cmath>

namespace sinkscope::gui {

bool Visibility::anyVisible(int q0, int q1, int k0, int k1) const {
  if (q0 >= q1 || k0 >= k1 || k0 > q1 - 1) return false;  // empty, or every key in the future
  if (ownWindow > 0) {
    // Row by row: the keys of row q are [max(k0, q - ownWindow + 1), min(k1 - 1, q)], cut by
    // the cache's rule (the sinks, then [q - W + 1, q]).
    for (int q = q0; q < q1; ++q) {
      const int lo = std::max(k0, q - ownWindow + 1), hi = std::min(k1 - 1, q);
      if (lo > hi) continue;
      if (window <= 0 || lo < sinks || hi > q - window) return true;
    }
    return false;
  }
  if (window <= 0 || k0 < sinks) return true;              // key k0 is visible to query q1 - 1
  return k1 - 1 > q0 - window;  // the largest key inside the smallest query's window
}

namespace {

// Shrinks queries [q0, q1) x keys [k0, k1) to the bounding box of its visible pairs.
bool clipToVisible(int q0, int q1, int k0, int k1, const Visibility& vis, MapRect* out) {
  bool any = false;
  MapRect r{q1, q0 - 1, k1, k0 - 1};
  for (int q = q0; q < q1; ++q) {
    const int hi = std::min(k1 - 1, q);  // causal
    // The layer's own window cuts every key of the row below q - ownWindow + 1, sinks too.
    const int first = vis.ownWindow > 0 ? std::max(k0, q - vis.ownWindow + 1) : k0;
    if (hi < first) continue;
    int lo = first, top = hi;
    if (vis.window > 0) {
      // Keys of this row: the sinks [0, S) and the window [q - W + 1, q].
      const int winLo = std::max(first, q - vis.window + 1);
      const int sinkHi = std::min(hi, vis.sinks - 1);
      if (sinkHi >= first) {
        lo = first;
        top = winLo <= hi ? hi : sinkHi;
      } else if (winLo <= hi) {
        lo = winLo;
      } else {
        continue;
      }
    }
    any = true;
    r.qFirst = std::min(r.qFirst, q);
    r.qLast = std::max(r.qLast, q);
    r.kFirst = std::min(r.kFirst, lo);
    r.kLast = std::max(r.kLast, top);
  }
  if (any) *out = r;
  return any;
}

}  // namespace

std::vector<MapRect> skippedMapRects(const SkipMask& mask, int blockSize, int nTokens,
                                     const Visibility& vis, int* totalSkipped) {
  std::vector<MapRect> out;
  int total = 0;
  auto add = [&](int q0, int q1, int k0, int k1) {
    ++total;
    q0 = std::max(q0, 0);
    k0 = std::max(k0, 0);
    q1 = std::min(q1, nTokens);
    k1 = std::min(k1, nTokens);
    MapRect r;
    if (q0 < q1 && k0 < k1 && clipToVisible(q0, q1, k0, k1, vis, &r)) out.push_back(r);
  };
  if (!mask.tiles.empty()) {
    for (const MaskTile& t : mask.tiles)
      if (t.state == 2) add(t.q0, t.q1, t.k0, t.k1);
  } else if (blockSize > 0) {
    for (int r = 0; r < mask.rows; ++r)
      for (int t = 0; t < mask.cols; ++t)
        if (mask.cells[size_t(r) * mask.cols + t] == 2)
          add(r * kQueryTileRows, (r + 1) * kQueryTileRows, t * blockSize, (t + 1) * blockSize);
  }
  if (totalSkipped) *totalSkipped = total;
  return out;
}

namespace {

// Drops the points that lie on the straight line through their neighbours.
MapPolygon simplify(const MapPolygon& in) {
  MapPolygon out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!out.empty() && i + 1 < in.size()) {
      const auto& a = out.back();
      const auto& b = in[i];
      const auto& c = in[i + 1];
      const double cross = (b.first - a.first) * (c.second - a.second) - (b.second - a.second) * (c.first - a.first);
      if (std::abs(cross) < 1e-9) continue;
    }
    out.push_back(in[i]);
  }
  return out;
}

// One polygon around rows [q0, q1] with key intervals lo(q)..hi(q) (non-empty on every row).
template <class Lo, class Hi>
MapPolygon rowsPolygon(int q0, int q1, Lo lo, Hi hi) {
  MapPolygon p;
  p.emplace_back(lo(q0) - 0.5, q0 - 0.5);
  p.emplace_back(hi(q0) + 0.5, q0 - 0.5);
  for (int q = q0; q <= q1; ++q) p.emplace_back(hi(q) + 0.5, q);
  p.emplace_back(hi(q1) + 0.5, q1 + 0.5);
  p.emplace_back(lo(q1) - 0.5, q1 + 0.5);
  for (int q = q1; q >= q0; --q) p.emplace_back(lo(q) - 0.5, q);
  p.push_back(p.front());
  return simplify(p);
}

}  // namespace

std::vector<MapPolygon> visibleOutline(const MapRect& r, const Visibility& vis) {
  std::vector<MapPolygon> out;
  const bool win = vis.window > 0;
  // Window (or causal) part: keys max(kFirst, S if windowed, q - W + 1) .. min(kLast, q).
  // The layer's own window: no key below q - ownWindow + 1 in either part.
  auto own = [&](int q) { return vis.ownWindow > 0 ? q - vis.ownWindow + 1 : r.kFirst; };
  auto lo = [&](int q) {
    int v = std::max(r.kFirst, own(q));
    if (win) v = std::max({v, vis.sinks, q - vis.window + 1});
    return v;
  };
  auto hi = [&](int q) { return std::min(r.kLast, q); };
  // Sink part (windowed only): keys max(kFirst, own window) .. min(kLast, S - 1, q).
  auto slo = [&](int q) { return std::max(r.kFirst, own(q)); };
  auto shi = [&](int q) { return std::min({r.kLast, vis.sinks - 1, q}); };
  auto runs = [&](auto l, auto h) {
    int start = -1;
    for (int q = r.qFirst; q <= r.qLast + 1; ++q) {
      const bool ok = q <= r.qLast && l(q) <= h(q);
      if (ok && start < 0) start = q;
      if (!ok && start >= 0) {
        out.push_back(rowsPolygon(start, q - 1, l, h));
        start = -1;
      }
    }
  };
  runs(lo, hi);
  if (win && r.kFirst < vis.sinks) runs(slo, shi);
  return out;
}

}  // namespace sinkscope::gui
