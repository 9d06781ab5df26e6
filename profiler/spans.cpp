// SPDX-License-Identifier: Apache-2.0
#include "profiler/spans.h"

#include <algorithm>
#include <cstring>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace sinkscope::prof {
namespace {

struct OpenSpan {
  const char* name;
  int64_t start;
  int64_t arg;
};

// Open spans are per thread, so begin/end need no lock.
thread_local std::vector<OpenSpan> t_open;

}  // namespace

uint32_t thread_index() {
  static std::atomic<uint32_t> next{0};
  thread_local uint32_t id = next.fetch_add(1);
  return id;
}

uint32_t os_thread_id() {
#if defined(__linux__)
  thread_local uint32_t tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return tid;
#else
  return thread_index();
#endif
}

const char* current_span(int64_t* arg) {
  if (t_open.empty()) return nullptr;
  if (arg) *arg = t_open.back().arg;
  return t_open.back().name;
}

int64_t current_span_arg(const char* name) {
  for (auto it = t_open.rbegin(); it != t_open.rend(); ++it)
    if (std::strcmp(it->name, name) == 0) return it->arg;
  return kNoArg;
}

void SpanRecorder::set_capacity(size_t max_spans) {
  std::lock_guard lock(m_mutex);
  m_capacity = max_spans;
}

size_t SpanRecorder::capacity() const {
  std::lock_guard lock(m_mutex);
  return m_capacity;
}

void SpanRecorder::clear() {
  std::lock_guard lock(m_mutex);
  m_done.clear();
  m_dropped = 0;
}

uint64_t SpanRecorder::dropped() const {
  std::lock_guard lock(m_mutex);
  return m_dropped;
}

std::vector<Span> SpanRecorder::take() {
  std::vector<Span> out;
  {
    std::lock_guard lock(m_mutex);
    out.swap(m_done);
  }
  // Spans are stored at close, children before parents; by start (parents first on ties).
  std::stable_sort(out.begin(), out.end(), [](const Span& a, const Span& b) {
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.depth < b.depth;
  });
  return out;
}

void SpanRecorder::begin(const char* name, int64_t arg) {
  if (m_hook) m_hook(name);
  t_open.push_back({name, now_ns(), arg});
}

void SpanRecorder::end() {
  if (t_open.empty()) return;
  const OpenSpan o = t_open.back();
  t_open.pop_back();
  const int64_t end = now_ns();
  std::lock_guard lock(m_mutex);
  if (m_done.size() >= m_capacity) {
    ++m_dropped;
    return;
  }
  Span& s = m_done.emplace_back();
  s.name = o.name;
  s.start_ns = o.start;
  s.end_ns = end;
  s.thread = thread_index();
  s.depth = static_cast<uint16_t>(t_open.size());
  s.arg = o.arg;
  s.os_thread = os_thread_id();
}

}  // namespace sinkscope::prof
