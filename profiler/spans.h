// SPDX-License-Identifier: Apache-2.0
// CPU span recorder: named, nested time ranges per thread. The CPU backend records its phases
// here (run, prefill, decode step, layer, ops); the CUDA path records NVTX ranges instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace sinkscope::prof {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Span {
  std::string name;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t thread = 0;  // small per-process thread index
  uint16_t depth = 0;   // nesting depth at open
};

// Thread-safe; disabled recorders cost one branch per span.
class SpanRecorder {
 public:
  void set_enabled(bool on) { m_enabled = on; }
  bool enabled() const { return m_enabled; }
  void clear();
  std::vector<Span> take();  // moves the recorded spans out (sorted by start)

  void begin(const char* name);
  void end();

 private:
  bool m_enabled = false;
  std::mutex m_mutex;
  std::vector<Span> m_done;
};

// RAII range on a recorder (null recorder: no-op).
class ScopedSpan {
 public:
  ScopedSpan(SpanRecorder* r, const char* name) : m_r(r && r->enabled() ? r : nullptr) {
    if (m_r) m_r->begin(name);
  }
  ~ScopedSpan() {
    if (m_r) m_r->end();
  }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  SpanRecorder* m_r;
};

}  // namespace sinkscope::prof
