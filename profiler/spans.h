// SPDX-License-Identifier: Apache-2.0
// CPU span recorder: named, nested time ranges per thread. The backends record their phases
// here (run, prefill, decode step, layer i, ops); profiler/span_timeline.h turns the spans into a
// Timeline. With NVTX mirroring on (profiler/nvtx.h), every ScopedSpan also pushes an NVTX
// range of the same name, so one RAII object serves both the CPU and the CUDA path.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

namespace sinkscope::prof {

// "No integer argument" (a span's optional arg, e.g. the layer index).
inline constexpr int64_t kNoArg = std::numeric_limits<int64_t>::min();

// The profiler's clock: std::chrono::steady_clock (CLOCK_MONOTONIC) in nanoseconds. GPU
// timestamps are shifted onto it (profiler/cupti_collector.h).
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Small per-process index of the calling thread (0, 1, 2, ... in first-use order).
uint32_t thread_index();
// The calling thread's OS id (gettid on Linux): the id CUPTI reports with the SYSTEM thread-id
// type, which links GPU work to the spans of the thread that launched it.
uint32_t os_thread_id();

// The name (and arg) of the calling thread's innermost open span; nullptr when none is open.
// Lets work handed to other threads be recorded under the name of the op that handed it out.
const char* current_span(int64_t* arg = nullptr);
// The arg of the calling thread's innermost open span named `name` (e.g. "layer"); kNoArg when
// none is open.
int64_t current_span_arg(const char* name);

struct Span {
  std::string name;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t thread = 0;     // small per-process thread index
  uint16_t depth = 0;      // nesting depth at open
  int64_t arg = kNoArg;    // optional integer argument (layer index); kNoArg when absent
  uint32_t os_thread = 0;  // OS thread id of `thread`
};

// Thread-safe; a disabled recorder costs one relaxed load per span. Memory is bounded: past
// capacity() spans are counted in dropped() instead of stored. clear() starts a new run.
class SpanRecorder {
 public:
  static constexpr size_t kDefaultCapacity = size_t(1) << 19;

  void set_enabled(bool on) { m_enabled.store(on, std::memory_order_relaxed); }
  bool enabled() const { return m_enabled.load(std::memory_order_relaxed); }
  void set_capacity(size_t max_spans);
  size_t capacity() const;
  void clear();             // drops the recorded spans and resets dropped()
  std::vector<Span> take();  // moves the recorded spans out (sorted by start)
  uint64_t dropped() const;  // spans not stored since the last clear() because of the cap

  void begin(const char* name, int64_t arg = kNoArg);  // `name` must live until end()
  void end();
  // Called with the name at every begin() (Profiler: CUPTI sampling per decode step). Set it
  // while no span is being recorded.
  void set_begin_hook(void (*hook)(const char* name)) { m_hook = hook; }

 private:
  void (*m_hook)(const char*) = nullptr;
  std::atomic<bool> m_enabled{false};
  mutable std::mutex m_mutex;
  std::vector<Span> m_done;
  size_t m_capacity = kDefaultCapacity;
  uint64_t m_dropped = 0;
};

namespace detail {
// NVTX mirroring of ScopedSpan (profiler/nvtx.h switches it; no-ops in builds without CUDA).
extern std::atomic<bool> g_nvtx_mirror;
void nvtx_push(const char* name, int64_t arg);
void nvtx_pop();
}  // namespace detail

// RAII range: a span on the recorder (null or disabled recorder: none) and, while NVTX
// mirroring is on, an NVTX range "name" or "name arg" (e.g. "layer 3").
class ScopedSpan {
 public:
  ScopedSpan(SpanRecorder* r, const char* name, int64_t arg = kNoArg)
      : m_r(r && r->enabled() ? r : nullptr),
        m_nvtx(detail::g_nvtx_mirror.load(std::memory_order_relaxed)) {
    if (m_r) m_r->begin(name, arg);
    if (m_nvtx) detail::nvtx_push(name, arg);
  }
  ~ScopedSpan() {
    if (m_nvtx) detail::nvtx_pop();
    if (m_r) m_r->end();
  }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  SpanRecorder* m_r;
  bool m_nvtx;
};

}  // namespace sinkscope::prof
