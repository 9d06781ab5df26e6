// SPDX-License-Identifier: Apache-2.0
// The model picker of the main window's top row: a combo box of model files (item text: the file
// name, item data: the path). It asks the layout for the width its current entry needs, so a row
// with room shows the whole name ("(default)" included); where it gets less, it draws the entry
// elided in the middle (the name's start and its extension or suffix stay) instead of cutting
// the last letters off, and its tooltip always holds the entry's full path.
#pragma once

#include <QComboBox>

namespace sinkscope::gui {

class ModelPicker : public QComboBox {
  Q_OBJECT
  Q_PROPERTY(QString shownText READ shownText)
 public:
  explicit ModelPicker(QWidget* parent = nullptr);
  // The width of the whole current entry (or the placeholder) plus the box's frame and arrow;
  // never below the minimum.
  QSize sizeHint() const override;
  // The entry as drawn at the current width: whole, or elided in the middle.
  QString shownText() const;

 protected:
  void paintEvent(QPaintEvent* e) override;
  void changeEvent(QEvent* e) override;

 private:
  QString entryText() const;  // the current item's text, or the placeholder without one
  QRect editField(const QRect& box = QRect()) const;
  int textWidth() const;      // the width the style leaves for the text
  void updateTip();
};

}  // namespace sinkscope::gui
