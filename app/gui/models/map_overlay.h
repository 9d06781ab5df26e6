// SPDX-License-Identifier: Apache-2.0
// What the attention map draws over its cells, in the prompt's original positions: which
// (query, key) pairs a cache policy lets attention see, and the skipped KV tiles of the skip
// mask clipped to what is visible, so that no outline ever sits on future or evicted keys.
// Plain C++, no Qt (tested in tests/gui/tst_mapoverlay.cpp).
#pragma once

#include <vector>

#include "engine/backend/attention.h"

namespace sinkscope::gui {

// The cache's visibility rule (docs/architecture.md, "Sink-retaining KV cache"): key k is
// visible to query q iff k <= q and (k < S or W == 0 or k > q - W). W = 0: full cache.
// A layer with a window of its own (Gemma's local layers, ownWindow > 0) also needs
// k > q - ownWindow, sinks included: past it a key is invisible, not skipped.
struct Visibility {
  int sinks = 0;      // S (only meaningful with a window)
  int window = 0;     // W; 0 = full cache
  int ownWindow = 0;  // the layer's own window; 0 = none (a global layer)
  bool visible(int q, int k) const {
    return k <= q && (window <= 0 || k < sinks || k > q - window) &&
           (ownWindow <= 0 || k > q - ownWindow);
  }
  // Whether the key is past the layer's own window (the reason it is not visible, if it is).
  bool outsideOwnWindow(int q, int k) const { return ownWindow > 0 && k <= q - ownWindow; }
  // Whether any pair of queries [q0, q1) x keys [k0, k1) is visible.
  bool anyVisible(int q0, int q1, int k0, int k1) const;
};

// A rectangle on the map, inclusive bounds in positions.
struct MapRect {
  int qFirst = 0, qLast = 0, kFirst = 0, kLast = 0;
};

// The skipped tiles of `mask` as rectangles on an nTokens x nTokens map, each shrunk to the
// bounding box of its visible pairs; tiles with no visible pair are dropped. Uses mask.tiles
// (positions recorded by the backend) when present, else places cell (r, t) at queries
// [r * kQueryTileRows, ...) and keys [t * blockSize, ...) (a full cache prefilled in one call).
// *totalSkipped receives the number of skipped tiles the mask holds (before clipping).
std::vector<MapRect> skippedMapRects(const SkipMask& mask, int blockSize, int nTokens,
                                     const Visibility& vis, int* totalSkipped = nullptr);

// The visible pairs of queries [qFirst, qLast] x keys [kFirst, kLast] as closed polygons in map
// coordinates (x = key, y = query, cells centred on integers): one for the part inside the
// window (or the causal triangle of a full cache) and one for the kept sinks, each with its
// first point repeated at the end. Straight edges: a diagonal side follows k = q or k = q - W + 1.
using MapPolygon = std::vector<std::pair<double, double>>;
std::vector<MapPolygon> visibleOutline(const MapRect& r, const Visibility& vis);

}  // namespace sinkscope::gui
