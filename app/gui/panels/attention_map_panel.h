// SPDX-License-Identifier: Apache-2.0
// View 1: the attention map of the chosen (layer, head): log colour scale, zoom and pan, hover
// shows the query and key tokens and the probability; skipped KV tiles are outlined and sink
// columns marked. Layer/head pickers choose the head (a change re-runs).
#pragma once

#include <QWidget>

#include "app/gui/models/view_models.h"

class QCustomPlot;
class QCPColorMap;
class QLabel;
class QSpinBox;

namespace sinkscope::gui {

// At most this many skipped tiles are outlined (one plot item each); the rest are counted.
inline constexpr int kMaxSkipOutlines = 4000;
// The caption of the outlines: how many skipped tiles are drawn and, when the cap cut them
// short, that the rest (later query tiles) are not.
QString skippedOutlineCaption(int drawn, int total);

class AttentionMapPanel : public QWidget {
  Q_OBJECT
 public:
  explicit AttentionMapPanel(AttentionMapView* view, QWidget* parent = nullptr);
  void setHeadRange(int layers, int heads);
  void setSelection(int layer, int head);
  void highlightToken(int position);  // from the token strip: a crosshair on row and column
 Q_SIGNALS:
  void headChosen(int layer, int head);
 private:
  void rebuild();
  void onHover(QMouseEvent* e);
  AttentionMapView* m_view;
  QCustomPlot* m_plot;
  QCPColorMap* m_map;
  QLabel* m_info;
  QSpinBox* m_layer;
  QSpinBox* m_head;
  int m_highlight = -1;
};

}  // namespace sinkscope::gui
