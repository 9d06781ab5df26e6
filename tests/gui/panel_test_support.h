// SPDX-License-Identifier: Apache-2.0
// Checks shared by the panel suites: a chart keeps a readable size inside the panel and lies
// wholly in what the panel shows (no scrolling needed at that size).
#pragma once

#include <QAbstractScrollArea>
#include <QScrollBar>
#include <QTest>
#include <QWidget>

#include <qcustomplot.h>

namespace sinkscope::gui::test {

// The dock sizes the views get: the bottom area of a 1280x720 window beside the controls dock
// (about 850x400) and the whole 1280x400 area.
inline const QSize kDockSizes[] = {QSize(1280, 400), QSize(850, 400)};

inline void checkReadable(QWidget* panel, QWidget* chart, QSize minimum) {
  QVERIFY2(chart->isVisible(), qPrintable(chart->objectName()));
  QVERIFY2(chart->width() >= minimum.width() && chart->height() >= minimum.height(),
           qPrintable(QStringLiteral("%1 is %2x%3 in a %4x%5 panel")
                          .arg(chart->objectName()).arg(chart->width()).arg(chart->height())
                          .arg(panel->width()).arg(panel->height())));
  const QRect inPanel(chart->mapTo(panel, QPoint(0, 0)), chart->size());
  QVERIFY2(panel->rect().contains(inPanel),
           qPrintable(QStringLiteral("%1 at (%2, %3) %4x%5 runs past the %6x%7 panel")
                          .arg(chart->objectName()).arg(inPanel.x()).arg(inPanel.y())
                          .arg(inPanel.width()).arg(inPanel.height())
                          .arg(panel->width()).arg(panel->height())));
}

// No scroll area of the panel needs its scroll bars at the panel's size.
inline void checkNoScrolling(QWidget* panel) {
  for (QAbstractScrollArea* a : panel->findChildren<QAbstractScrollArea*>()) {
    if (a->objectName() != QLatin1String("viewScroll")) continue;
    QVERIFY2(!a->horizontalScrollBar()->isVisible() && !a->verticalScrollBar()->isVisible(),
             qPrintable(QStringLiteral("the view scrolls at %1x%2").arg(panel->width()).arg(panel->height())));
  }
}

// The text a plot shows while it has nothing to plot (addEmptyPlotText in
// app/gui/panels/heatmap.h), or null when the plot has none.
inline QCPItemText* emptyPlotText(const QCustomPlot* plot) {
  for (int i = 0; i < plot->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(plot->item(i));
        t && t->objectName() == QLatin1String("emptyPlotText"))
      return t;
  return nullptr;
}

}  // namespace sinkscope::gui::test
