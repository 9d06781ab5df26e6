// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/journal_watch.h"

#include <QDateTime>

#include <cmath>

namespace sinkscope::gui {

namespace {

double nowUnix() { return double(QDateTime::currentMSecsSinceEpoch()) / 1000.0; }

QString duration(double s) {
  if (s < 90) return QObject::tr("%1 s").arg(int(std::lround(s)));
  if (s < 5400) return QObject::tr("%1 min").arg(int(std::lround(s / 60)));
  return QObject::tr("%1 h %2 min").arg(int(s / 3600)).arg(int(std::fmod(s, 3600) / 60));
}

}  // namespace

JournalWatch::JournalWatch(QObject* parent) : QObject(parent) {
  m_timer.setInterval(kIntervalMs);
  connect(&m_timer, &QTimer::timeout, this, &JournalWatch::refresh);
}

QString JournalWatch::watch(const QString& file) {
  const std::filesystem::path base = journal_base(file.toStdString());
  if (base.empty())
    return tr("%1 is not a journal file: its name must end in .rank-<number> (the files "
              "`sinkscope-cli sweep` and `validate` write next to their outputs).")
        .arg(file);
  try {
    m_progress = journal_progress(base, nowUnix());
  } catch (const JournalError& e) {
    return QString::fromStdString(e.what());
  }
  m_base = base;
  m_state = State::kRunning;
  m_error.clear();
  m_timer.start();
  Q_EMIT changed();
  return {};
}

void JournalWatch::stop() {
  m_timer.stop();
  m_state = State::kIdle;
  Q_EMIT changed();
}

void JournalWatch::refresh() {
  if (m_state != State::kRunning) return;
  try {
    m_progress = journal_progress(m_base, nowUnix());
  } catch (const JournalError& e) {
    m_timer.stop();
    // The files are gone once the run has written its outputs.
    m_state = journal_files(m_base).empty() ? State::kFinished : State::kError;
    m_error = QString::fromStdString(e.what());
  }
  Q_EMIT changed();
}

double JournalWatch::fraction() const {
  const uint64_t units = m_progress.info.units;
  return units ? std::min(1.0, double(m_progress.done) / double(units)) : 0.0;
}

QString JournalWatch::text() const {
  const JournalProgress& p = m_progress;
  const QString what = QStringLiteral("%1 %2").arg(QString::fromStdString(p.info.command),
                                                   QString::fromStdString(p.info.label));
  switch (m_state) {
    case State::kIdle:
      return tr("Not watching a run: File > Watch a running sweep... opens a journal file "
                "(BASE.rank-R) of a sweep or validation that is still running.");
    case State::kFinished:
      return tr("%1 finished: its journal was removed once its outputs were written. Open "
                "them with File > Open sweep results...").arg(what);
    case State::kError:
      return tr("%1: %2").arg(what, m_error);
    case State::kRunning:
      break;
  }
  const QString processes = p.processes == 1 ? tr("1 process") : tr("%1 processes").arg(p.processes);
  const QString hosts = p.hosts.size() == 1 ? tr("1 host") : tr("%1 hosts").arg(p.hosts.size());
  QString s = tr("%1: %2 of %3 units (%4 %), %5 on %6")
                  .arg(what)
                  .arg(p.done)
                  .arg(p.info.units)
                  .arg(int(std::floor(100 * fraction())))
                  .arg(processes, hosts);
  if (p.done_at_start > 0) s += tr(", %1 from an earlier run").arg(p.done_at_start);
  if (!std::isnan(p.eta_s) && p.done < p.info.units)
    s += tr(", about %1 left").arg(duration(p.eta_s));
  else if (p.info.units > 0 && p.done >= p.info.units)
    s += tr(", writing the outputs");
  return s;
}

}  // namespace sinkscope::gui
