// SPDX-License-Identifier: Apache-2.0
// A running sweep or validation seen through its journal (engine/util/work_journal.h): the sweep view
// opens any BASE.rank-R file of a `sinkscope-cli sweep` / `validate` that is still running, on
// one host or under MPI, and shows the units finished by all its processes and the time left,
// re-read every couple of seconds until the run removes its journal (its outputs are written).
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include <filesystem>

#include "engine/util/work_journal.h"

namespace sinkscope::gui {

class JournalWatch : public QObject {
  Q_OBJECT
 public:
  enum class State { kIdle, kRunning, kFinished, kError };
  explicit JournalWatch(QObject* parent = nullptr);

  // Starts watching the run one of whose journal files is `file`. Returns "" or why not (the
  // name is not BASE.rank-R, or the file is not a SinkScope journal); the previous watch stays
  // then.
  QString watch(const QString& file);
  void stop();
  // Reads the journal again now (the timer does every intervalMs).
  void refresh();

  State state() const { return m_state; }
  const JournalProgress& progress() const { return m_progress; }
  // 0..1; 0 while the total is unknown.
  double fraction() const;
  // One line for the view: "sweep lambda=...: 212 of 1616 units (13 %), 4 processes on 2
  // hosts, about 41 min left", or what happened.
  QString text() const;
  QString base() const { return QString::fromStdString(m_base.string()); }

  static constexpr int kIntervalMs = 2000;

 Q_SIGNALS:
  void changed();

 private:
  std::filesystem::path m_base;
  JournalProgress m_progress;
  State m_state = State::kIdle;
  QString m_error;
  QTimer m_timer;
};

}  // namespace sinkscope::gui
