// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/recent_files.h"

#include <QSettings>

namespace sinkscope::gui {

QStringList RecentFiles::list() const {
  return QSettings().value(QStringLiteral("recent/") + m_key).toStringList();
}

void RecentFiles::add(const QString& path) {
  QStringList l = list();
  l.removeAll(path);
  l.prepend(path);
  while (l.size() > m_max) l.removeLast();
  QSettings().setValue(QStringLiteral("recent/") + m_key, l);
}

void RecentFiles::clear() { QSettings().remove(QStringLiteral("recent/") + m_key); }

}  // namespace sinkscope::gui
