// SPDX-License-Identifier: Apache-2.0
#include "profiler/spans.h"

#include <algorithm>
#include <atomic>

namespace sinkscope::prof {
namespace {

struct OpenSpan {
  const SpanRecorder* owner;
  const char* name;
  int64_t start;
};

uint32_t thread_index() {
  static std::atomic<uint32_t> next{0};
  thread_local uint32_t id = next.fetch_add(1);
  return id;
}

// Open spans are per thread, so begin/end need no lock.
thread_local std::vector<OpenSpan> t_open;

}  // namespace

void SpanRecorder::clear() {
  std::lock_guard lock(m_mutex);
  m_done.clear();
}

std::vector<Span> SpanRecorder::take() {
  std::vector<Span> out;
  {
    std::lock_guard lock(m_mutex);
    out.swap(m_done);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Span& a, const Span& b) { return a.start_ns < b.start_ns; });
  return out;
}

void SpanRecorder::begin(const char* name) { t_open.push_back({this, name, now_ns()}); }

void SpanRecorder::end() {
  if (t_open.empty()) return;
  OpenSpan o = t_open.back();
  t_open.pop_back();
  Span s{o.name, o.start, now_ns(), thread_index(), static_cast<uint16_t>(t_open.size())};
  std::lock_guard lock(m_mutex);
  m_done.push_back(std::move(s));
}

}  // namespace sinkscope::prof
