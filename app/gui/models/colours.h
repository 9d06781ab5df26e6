// SPDX-License-Identifier: Apache-2.0
// The workbench's plain colours (the part of app/gui/panels/palette.h that needs no QCustomPlot,
// so the models can use it too): the categorical palette for phases / layers / lanes and the
// overlay and chart colours. docs/gui.md, "Colours".
#pragma once

#include <QColor>

namespace sinkscope::gui::palette {

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
