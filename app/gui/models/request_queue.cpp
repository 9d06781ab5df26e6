// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/request_queue.h"

#include <algorithm>

namespace sinkscope::gui {

uint64_t RequestQueue::post(const QString& tag, std::function<void(uint64_t)> work, uint64_t* replaced) {
  std::lock_guard lock(m_mutex);
  const uint64_t id = m_nextId++;
  if (replaced) *replaced = 0;
  for (Job& j : m_jobs) {
    if (j.tag == tag) {
      if (replaced) *replaced = j.id;
      j.id = id;
      j.work = std::move(work);
      return id;
    }
  }
  m_jobs.push_back({id, tag, std::move(work)});
  return id;
}

std::optional<RequestQueue::Job> RequestQueue::take() {
  std::lock_guard lock(m_mutex);
  if (m_jobs.empty()) return std::nullopt;
  Job j = std::move(m_jobs.front());
  m_jobs.pop_front();
  m_running = j.tag;
  if (m_cancel) m_cancel->store(false);
  return j;
}

void RequestQueue::finish() {
  std::lock_guard lock(m_mutex);
  m_running.clear();
}

QString RequestQueue::runningTag() const {
  std::lock_guard lock(m_mutex);
  return m_running;
}

uint64_t RequestQueue::removeTag(const QString& tag) {
  std::lock_guard lock(m_mutex);
  const auto it = std::find_if(m_jobs.begin(), m_jobs.end(), [&](const Job& j) { return j.tag == tag; });
  if (it == m_jobs.end()) return 0;
  const uint64_t id = it->id;
  m_jobs.erase(it);
  return id;
}

void RequestQueue::clear() {
  std::lock_guard lock(m_mutex);
  m_jobs.clear();
}

size_t RequestQueue::size() const {
  std::lock_guard lock(m_mutex);
  return m_jobs.size();
}

bool RequestQueue::hasTag(const QString& tag) const {
  std::lock_guard lock(m_mutex);
  return std::any_of(m_jobs.begin(), m_jobs.end(), [&](const Job& j) { return j.tag == tag; });
}

void RequestQueue::setCancelFlag(std::atomic<bool>* flag) {
  std::lock_guard lock(m_mutex);
  m_cancel = flag;
}

bool RequestQueue::cancelRunning(const QString& tag) {
  std::lock_guard lock(m_mutex);
  // m_running is empty between finish() and the next take(): nothing to cancel then.
  if (!m_cancel || m_running.isEmpty() || (!tag.isEmpty() && m_running != tag)) return false;
  m_cancel->store(true);
  return true;
}

}  // namespace sinkscope::gui
