// SPDX-License-Identifier: Apache-2.0
#include "engine/util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>

namespace sinkscope {

ThreadPool::ThreadPool(int n_threads) {
  m_n = n_threads > 0 ? n_threads : std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < m_n; ++i) m_threads.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
    m_stop_seen.store(true, std::memory_order_release);
  }
  m_wake.notify_all();
  for (auto& t : m_threads) t.join();
}

void ThreadPool::run_items() {
  for (;;) {
    const int64_t i = m_next.fetch_add(1, std::memory_order_relaxed);
    if (i >= m_count) return;
    try {
      (*m_fn)(i);
    } catch (...) {
      std::lock_guard lock(m_mutex);
      if (!m_error) m_error = std::current_exception();
      m_next.store(m_count, std::memory_order_relaxed);  // stop handing out work
    }
  }
}

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Spins until pred() or kSpinNs have passed; true when pred() held.
template <typename Pred>
bool spin_until(Pred pred, int64_t spin_ns) {
  const int64_t deadline = steady_ns() + spin_ns;
  for (int i = 0;; ++i) {
    if (pred()) return true;
    if ((i & 63) == 63 && steady_ns() > deadline) return false;
    cpu_relax();
  }
}

}  // namespace

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    const char* label = nullptr;
    int64_t arg = prof::kNoArg, layer = prof::kNoArg;
    bool work = false;
    // The next parallel_for usually follows within microseconds: spin a little before sleeping.
    (void)spin_until(
        [&] {
          return m_stop_seen.load(std::memory_order_acquire) ||
                 m_gen_seen.load(std::memory_order_acquire) != seen;
        },
        kSpinNs);
    {
      std::unique_lock lock(m_mutex);
      m_wake.wait(lock, [&] { return m_stop || m_generation != seen; });
      if (m_stop) return;
      seen = m_generation;
      ++m_active;
      m_active_seen.store(m_active, std::memory_order_relaxed);
      label = m_label;
      arg = m_labelArg;
      layer = m_layer;
      work = m_next.load(std::memory_order_relaxed) < m_count;
    }
    {
      prof::SpanRecorder* rec = work ? m_spans.load(std::memory_order_relaxed) : nullptr;
      const bool inLayer = layer != prof::kNoArg && !(label && std::strcmp(label, "layer") == 0);
      prof::ScopedSpan outer(inLayer ? rec : nullptr, "layer", layer);
      prof::ScopedSpan span(rec, label ? label : "parallel work", arg);
      run_items();
    }
    {
      std::lock_guard lock(m_mutex);
      --m_active;
      m_active_seen.store(m_active, std::memory_order_release);
    }
    m_done.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (m_n == 1 || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  int64_t labelArg = prof::kNoArg, layer = prof::kNoArg;
  const char* label = nullptr;
  if (m_spans.load(std::memory_order_relaxed)) {
    label = prof::current_span(&labelArg);
    layer = prof::current_span_arg("layer");
  }
  {
    std::unique_lock lock(m_mutex);
    // A worker that woke for the last parallel_for after it had ended may still be in
    // run_items (finding nothing): it reads m_fn / m_count without the lock, so they change
    // only once it is out.
    m_done.wait(lock, [&] { return m_active == 0; });
    m_label = label;
    m_labelArg = labelArg;
    m_layer = layer;
    m_fn = &fn;
    m_count = n;
    m_next.store(0, std::memory_order_relaxed);
    m_error = nullptr;
    ++m_generation;
    m_gen_seen.store(m_generation, std::memory_order_release);
  }
  m_wake.notify_all();
  run_items();
  std::exception_ptr err;
  // The workers finish their last items within microseconds: spin before sleeping.
  (void)spin_until([&] { return m_active_seen.load(std::memory_order_acquire) == 0; }, kSpinNs);
  {
    std::unique_lock lock(m_mutex);
    m_done.wait(lock, [&] { return m_active == 0; });
    m_fn = nullptr;
    err = m_error;
  }
  if (err) std::rethrow_exception(err);
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return "";
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

}  // namespace sinkscope
