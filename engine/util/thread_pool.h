// SPDX-License-Identifier: Apache-2.0
// A small fork-join pool. Idle workers sleep on a condition variable (no spinning), so they do
// not steal cores from OpenBLAS's own threads between our parallel sections.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "profiler/spans.h"

namespace sinkscope {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads <= 0: hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return m_n; }
  // Calls fn(i) for i in [0, n), spread over the pool (the caller works too). Items are handed
  // out dynamically, so uneven items balance. The first exception thrown is rethrown here.
  void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);
  // Workers record their share of each parallel_for as a span on `r` (null: none), named after
  // the caller's innermost open span (e.g. "mlp") inside a "layer" span like the caller's, so a
  // trace has a lane per thread with the layers marked.
  void set_span_recorder(prof::SpanRecorder* r) { m_spans.store(r, std::memory_order_relaxed); }

 private:
  void worker_loop();
  void run_items();

  int m_n;
  std::vector<std::thread> m_threads;
  std::mutex m_mutex;
  std::condition_variable m_wake, m_done;
  const std::function<void(int64_t)>* m_fn = nullptr;
  int64_t m_count = 0;
  std::atomic<int64_t> m_next{0};  // the next item to hand out (>= m_count: none left)
  int m_active = 0;
  std::atomic<int> m_active_seen{0};  // m_active, for the caller's spin
  uint64_t m_generation = 0;
  bool m_stop = false;
  // Mirrors of m_generation / m_stop and of "a parallel_for is still running", written under
  // m_mutex and read without it: a worker that just finished, and the caller waiting for the
  // workers, spin on them for up to kSpinNs before sleeping on the condition variables, so
  // back-to-back small parallel_fors (a decode step's products) do not pay a wake-up each.
  std::atomic<uint64_t> m_gen_seen{0};
  std::atomic<bool> m_stop_seen{false};
  static constexpr int64_t kSpinNs = 200000;
  std::exception_ptr m_error;
  std::atomic<prof::SpanRecorder*> m_spans{nullptr};
  const char* m_label = nullptr;  // the caller's innermost open span at parallel_for
  int64_t m_labelArg = 0, m_layer = 0;  // its arg; the arg of the caller's open "layer" span
};

// The CPU's model name from /proc/cpuinfo ("" when it cannot be read), for benchmark and
// provenance lines.
std::string cpu_model_name();

}  // namespace sinkscope
