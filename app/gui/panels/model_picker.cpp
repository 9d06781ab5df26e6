// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/model_picker.h"

#include <QEvent>
#include <QFontMetricsF>
#include <QStyleOptionComboBox>
#include <QStylePainter>
#include <QtMath>

#include <algorithm>

namespace sinkscope::gui {

ModelPicker::ModelPicker(QWidget* parent) : QComboBox(parent) {
  // Another entry needs another width: the layout asks again.
  connect(this, &QComboBox::currentIndexChanged, this, [this] {
    updateTip();
    updateGeometry();
  });
  updateTip();
}

QString ModelPicker::entryText() const {
  return currentIndex() < 0 ? placeholderText() : currentText();
}

// The style's text field of a box of this picker's options laid out in box (its own rect when
// box is empty).
QRect ModelPicker::editField(const QRect& box) const {
  QStyleOptionComboBox opt;
  initStyleOption(&opt);
  if (!box.isEmpty()) opt.rect = box;
  return style()->subControlRect(QStyle::CC_ComboBox, &opt, QStyle::SC_ComboBoxEditField, this);
}

// The common style draws the label one pixel inside the edit field on either side.
int ModelPicker::textWidth() const { return editField().width() - 2; }

QSize ModelPicker::sizeHint() const {
  const QSize base = QComboBox::sizeHint();
  // The frame and arrow around the text, measured on a wide box: the style's edit field is the
  // box less a fixed margin.
  const QRect wide(0, 0, 1000, base.height());
  const int chrome = wide.width() - editField(wide).width() + 2;
  // Rounded up from the exact advance: elidedText keeps the text whole only when its exact
  // width fits.
  const int whole = qCeil(QFontMetricsF(font()).horizontalAdvance(entryText())) + chrome;
  return QSize(std::max({whole, base.width(), minimumSizeHint().width()}), base.height());
}

QString ModelPicker::shownText() const {
  return fontMetrics().elidedText(entryText(), Qt::ElideMiddle, std::max(0, textWidth()));
}

// QComboBox::paintEvent with the label's text elided to the field.
void ModelPicker::paintEvent(QPaintEvent*) {
  QStylePainter p(this);
  p.setPen(palette().color(QPalette::Text));
  QStyleOptionComboBox opt;
  initStyleOption(&opt);
  p.drawComplexControl(QStyle::CC_ComboBox, opt);
  if (currentIndex() < 0 && !placeholderText().isEmpty())
    opt.palette.setBrush(QPalette::ButtonText, opt.palette.placeholderText());
  opt.currentText = shownText();
  p.drawControl(QStyle::CE_ComboBoxLabel, opt);
}

void ModelPicker::changeEvent(QEvent* e) {
  QComboBox::changeEvent(e);
  if (e->type() == QEvent::FontChange || e->type() == QEvent::StyleChange) updateGeometry();
}

void ModelPicker::updateTip() {
  const QString path = currentIndex() < 0 ? QString() : itemData(currentIndex()).toString();
  setToolTip(path.isEmpty() ? tr("No model is loaded: open a GGUF file or a checkpoint folder")
                            : tr("%1\n%2").arg(currentText(), path));
}

}  // namespace sinkscope::gui
