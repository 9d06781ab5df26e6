// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/token_strip.h"

#include "app/gui/models/token_list_model.h"

namespace sinkscope::gui {

TokenStrip::TokenStrip(QWidget* parent) : QListView(parent) {
  setFlow(QListView::LeftToRight);
  setWrapping(true);
  setResizeMode(QListView::Adjust);
  setSpacing(1);
  setUniformItemSizes(false);
  setEditTriggers(NoEditTriggers);
  connect(this, &QListView::clicked, this, [this](const QModelIndex& i) {
    Q_EMIT tokenChosen(i.data(TokenListModel::PositionRole).toInt());
  });
}

void TokenStrip::showPosition(int position) {
  if (!model()) return;
  for (int r = 0; r < model()->rowCount(); ++r) {
    const QModelIndex i = model()->index(r, 0);
    if (i.data(TokenListModel::PositionRole).toInt() == position) {
      setCurrentIndex(i);
      scrollTo(i, QAbstractItemView::PositionAtCenter);
      return;
    }
  }
}

}  // namespace sinkscope::gui
