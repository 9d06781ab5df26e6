// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/map_overlay.h"

#include <algorithm>

namespace sinkscope::gui {

bool Visibility::anyVisible(int q0, int q1, int k0, int k1) const {
  if (q0 >= q1 || k0 >= k1 || k0 > q1 - 1) return false;  // empty, or every key in the future
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
    if (hi < k0) continue;
    int lo = k0, top = hi;
    if (vis.window > 0) {
      // Keys of this row: the sinks [0, S) and the window [q - W + 1, q].
      const int winLo = std::max(k0, q - vis.window + 1);
      const int sinkHi = std::min(hi, vis.sinks - 1);
      if (sinkHi >= k0) {
        lo = k0;
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

}  // namespace sinkscope::gui
