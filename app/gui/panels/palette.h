// SPDX-License-Identifier: Apache-2.0
// The workbench's one visual language: a perceptual map for magnitudes (magma; NaN = "not
// visible", drawn in a neutral grey that magma never reaches), a diverging map for differences,
// a categorical palette for phases / layers / lanes, and the overlay colours. Every panel takes
// its colours from here (docs/gui.md, "Colours").
#pragma once

#include <QColor>

#include <qcustomplot.h>

namespace sinkscope::gui::palette {

// Magnitudes (probabilities, masses, fractions): magma, dark = small, light = large.
inline QCPColorGradient magnitude() {
  QCPColorGradient g;
  g.clearColorStops();
  g.setColorStopAt(0.00, QColor(0, 0, 4));
  g.setColorStopAt(0.13, QColor(28, 16, 68));
  g.setColorStopAt(0.25, QColor(79, 18, 123));
  g.setColorStopAt(0.38, QColor(129, 37, 129));
  g.setColorStopAt(0.50, QColor(181, 54, 122));
  g.setColorStopAt(0.63, QColor(229, 80, 100));
  g.setColorStopAt(0.75, QColor(251, 135, 97));
  g.setColorStopAt(0.88, QColor(254, 194, 135));
  g.setColorStopAt(1.00, QColor(252, 253, 191));
  g.setColorInterpolation(QCPColorGradient::ciRGB);
  g.setNanHandling(QCPColorGradient::nhNanColor);
  g.setNanColor(QColor(150, 150, 150));  // "not visible" (masked, evicted), never "~0"
  return g;
}

// Differences around zero: blue (negative) - white - red (positive).
inline QCPColorGradient diverging() {
  QCPColorGradient g;
  g.clearColorStops();
  g.setColorStopAt(0.0, QColor(33, 102, 172));
  g.setColorStopAt(0.25, QColor(146, 197, 222));
  g.setColorStopAt(0.5, QColor(247, 247, 247));
  g.setColorStopAt(0.75, QColor(244, 165, 130));
  g.setColorStopAt(1.0, QColor(178, 24, 43));
  g.setColorInterpolation(QCPColorGradient::ciRGB);
  return g;
}

// Categories (phases, layers, lanes): Okabe-Ito, readable by colour-blind viewers.
inline QColor categorical(int i) {
  static const QColor c[] = {QColor(0, 114, 178),  QColor(230, 159, 0),  QColor(0, 158, 115),
                             QColor(204, 121, 167), QColor(86, 180, 233), QColor(213, 94, 0),
                             QColor(240, 228, 66),  QColor(80, 80, 80)};
  const int n = int(sizeof(c) / sizeof(c[0]));
  return c[((i % n) + n) % n];
}

inline QColor notVisible() { return QColor(150, 150, 150); }
inline QColor skippedTile() { return QColor(0, 200, 255); }    // outline of a skipped KV tile
inline QColor sinkMark() { return QColor(60, 230, 60); }       // a sink column / learned sink
inline QColor highlight() { return QColor(255, 255, 255); }    // crosshair, chosen token
inline QColor dense() { return categorical(0); }               // the dense baseline in charts
inline QColor variant() { return categorical(1); }             // the current settings
inline QColor prefill() { return categorical(2); }             // the prefill phase in charts
inline QColor decode() { return categorical(3); }              // the decode phase in charts
inline QColor threshold() { return categorical(5); }           // a threshold line (epsilon)
inline QColor divergence() { return QColor(255, 128, 128); }   // the first diverging token
inline QColor afterDivergence() { return QColor(255, 208, 208); }  // tokens after it

}  // namespace sinkscope::gui::palette
