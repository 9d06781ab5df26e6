// SPDX-License-Identifier: Apache-2.0
// The token strip: prompt and generated tokens in reading order (sinks yellow, generated blue,
// tokens that diverge from the dense baseline red). Clicking one highlights its row and column
// in the attention map.
#pragma once

#include <QListView>

namespace sinkscope::gui {

class TokenStrip : public QListView {
  Q_OBJECT
 public:
  explicit TokenStrip(QWidget* parent = nullptr);
  void showPosition(int position);  // selects and scrolls to the token at a prompt position
 Q_SIGNALS:
  void tokenChosen(int position);
};

}  // namespace sinkscope::gui
