// SPDX-License-Identifier: Apache-2.0
// View 1: the attention map of the chosen (layer, head). Magma on a log scale labelled over its
// whole range; cells no query of the cell may see (future keys, keys evicted by the window) in
// grey, apart from "about zero". Skipped KV tiles are outlined where they lie in the prompt,
// clipped to what is visible; the kept sinks and this head's own sinks are marked. Wheel zooms
// (bounded to the map), drag pans, double-click or right-click resets; hovering shows a
// tooltip, clicking picks a token for the token strip. Layer/head pickers choose the head.
#pragma once

#include <QWidget>

#include "app/gui/models/map_overlay.h"
#include "app/gui/models/view_models.h"

class QCustomPlot;
class QCPColorMap;
class QCPCurve;
class QLabel;
class QMouseEvent;
class QSpinBox;

namespace sinkscope::gui {

// At most this many skipped tiles are outlined (one plot item each); the rest are counted.
inline constexpr int kMaxSkipOutlines = 4000;
// The caption of the outlines: how many skipped tiles are drawn and, when the cap cut them
// short, that the rest (later query tiles) are not.
QString skippedOutlineCaption(int drawn, int total);

// The value a map cell shows: at full resolution P[q, k]; when binned, the attention mass a
// query of the row bin puts on the keys of the column bin (mean P x keys in the bin), so a sink
// column keeps its weight however many keys share its bin. NaN: no pair in the cell is visible.
double mapCellValue(const AttentionMap& a, int row, int col, const Visibility& vis);

class AttentionMapPanel : public QWidget {
  Q_OBJECT
 public:
  explicit AttentionMapPanel(AttentionMapView* view, QWidget* parent = nullptr);
  void setHeadRange(int layers, int heads);
  void setSelection(int layer, int head);
  void highlightToken(int position);  // from the token strip: a crosshair on row and column
  void resetZoom();
  // Whether a model is loaded: the empty map then asks for a run, not for a model.
  void setModelLoaded(bool loaded);
  // Steps the layer / head pickers (keyboard shortcuts); clamps at the ends.
  void stepLayer(int delta);
  void stepHead(int delta);

  // For tests: what the last rebuild drew.
  const std::vector<MapRect>& outlinedTiles() const { return m_outlined; }
  QCustomPlot* plot() const { return m_plot; }
  // The tooltip text for map coordinates (key, query); "" outside the map.
  QString describePoint(int key, int query) const;
  // The line above the map: size, skipped tiles, kept positions and the head's sinks.
  QString caption() const;

 Q_SIGNALS:
  void headChosen(int layer, int head);
  void positionChosen(int position);  // a click on the map: the query token

 protected:
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void rebuild();
  void onHover(QMouseEvent* e);
  void clampRanges();
  Visibility visibility() const;
  AttentionMapView* m_view;
  QCustomPlot* m_plot;
  QCPColorMap* m_map;
  QLabel* m_info;
  QSpinBox* m_layer;
  QSpinBox* m_head;
  int m_highlight = -1;
  bool m_clamping = false;
  bool m_modelLoaded = false;
  QPoint m_pressAt;  // where the last left press began (a click vs a drag)
  std::vector<MapRect> m_outlined;
  std::vector<QCPCurve*> m_outlines;  // one closed curve per visible part of a skipped tile
};

}  // namespace sinkscope::gui
