// SPDX-License-Identifier: Apache-2.0
// The engine thread's inbox (docs/architecture.md, design principle 2): jobs posted with a tag; posting a job whose tag is
// already queued replaces that job in place (slider drags do not pile up). Thread-safe.
// It also owns the hand-over of the cancel flag: take() lowers it for the job it hands out and
// cancelRunning() raises it only while a job runs, both under the queue's lock, so a cancel aimed
// at one job can never land on the job that follows it.
#pragma once

#include <QString>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

namespace sinkscope::gui {

class RequestQueue {
 public:
  struct Job {
    uint64_t id = 0;
    QString tag;
    std::function<void(uint64_t)> work;
  };

  // Queues work under tag and returns its id (increasing). A queued job with the same tag is
  // replaced (it keeps its place in line, takes the new id and work); returns the replaced job's
  // id in *replaced (0 when none).
  uint64_t post(const QString& tag, std::function<void(uint64_t)> work, uint64_t* replaced = nullptr);
  // The oldest job, or nothing; it becomes the running job (runningTag()) until finish(), and
  // the cancel flag (if set) is lowered for it.
  std::optional<Job> take();
  void finish();
  QString runningTag() const;  // "" when no job runs
  uint64_t removeTag(const QString& tag);  // drops a queued job: its id, 0 when none was queued
  void clear();
  size_t size() const;
  bool hasTag(const QString& tag) const;

  // The flag the running job polls (nullptr: none). Set it before the first take().
  void setCancelFlag(std::atomic<bool>* flag);
  // Raises the cancel flag if a job runs whose tag is tag (any job when tag is empty); true when
  // it did. Checked and raised under the lock, so it cannot hit the next job instead.
  bool cancelRunning(const QString& tag = QString());

 private:
  mutable std::mutex m_mutex;
  std::deque<Job> m_jobs;
  uint64_t m_nextId = 1;
  QString m_running;
  std::atomic<bool>* m_cancel = nullptr;
};

}  // namespace sinkscope::gui
