// SPDX-License-Identifier: Apache-2.0
// The workbench's one visual language: a perceptual map for magnitudes (magma; NaN = "not
// visible", drawn in a neutral grey that magma never reaches), a diverging map for differences,
// a categorical palette for phases / layers / lanes, and the overlay colours. Every panel takes
// its colours from here (docs/gui.md, "Colours"); the plain colours are in
// app/gui/models/colours.h, which the models use without QCustomPlot.
#pragma once

#include <QColor>

#include <qcustomplot.h>

#include "app/gui/models/colours.h"

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

}  // namespace sinkscope::gui::palette
