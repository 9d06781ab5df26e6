// SPDX-License-Identifier: Apache-2.0
// Most-recently-used file lists kept in QSettings (models, prompts, configs).
#pragma once

#include <QString>
#include <QStringList>

namespace sinkscope::gui {

class RecentFiles {
 public:
  explicit RecentFiles(QString key, int max = 8) : m_key(std::move(key)), m_max(max) {}
  QStringList list() const;
  void add(const QString& path);  // moves it to the front
  void clear();

 private:
  QString m_key;
  int m_max;
};

}  // namespace sinkscope::gui
