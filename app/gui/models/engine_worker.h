// SPDX-License-Identifier: Apache-2.0
// The object living on the engine thread: drains the controller's queue one job at a time.
// Internal to EngineController.
#pragma once

#include <QElapsedTimer>
#include <QObject>

#include <atomic>
#include <functional>

#include "app/gui/models/request_queue.h"
#include "app/gui/models/run_executor.h"

namespace sinkscope::gui {

class EngineController;

class EngineWorker : public QObject {
  Q_OBJECT
 public:
  EngineWorker(EngineController* controller, RequestQueue* queue, std::atomic<bool>* cancel,
               std::atomic<bool>* busy, BackendKind kind, int threads, GpuChoice gpu = {});
  RunExecutor& executor() { return m_executor; }
  void drain();  // runs the oldest queued job, if any (invoked once per post)
  // Raised by EngineController::post: idle-time work (RunExecutor::warmViewCaches) stops at
  // its next layer so the new job starts.
  std::atomic<bool>& interruptIdle() { return m_interruptIdle; }
  // Counts finished idle-time work; released after it, acquired by the controller's destructor
  // after QThread::wait, so the order is visible to ThreadSanitizer (Qt is not instrumented).
  const std::atomic<int>& idleDone() const { return m_idleDone; }

  void doLoad(uint64_t id, const QString& path);
  void doSetModel(uint64_t id, std::shared_ptr<const Model> model);
  void doSetGpu(uint64_t id, GpuChoice gpu);
  void emitLoaded(uint64_t id, const QString& path);
  void doRun(uint64_t id, const RunRequest& request);

 private:
  // Emits a controller signal on the controller's (GUI) thread, through its outbox
  // (EngineController::pushToGui): every receiver -- also one connected directly, like
  // QSignalSpy -- runs there, and nothing is delivered after the controller is gone.
  void toController(std::function<void()> emit);

  EngineController* m_controller;
  RequestQueue* m_queue;
  std::atomic<bool>* m_cancel;
  std::atomic<bool>* m_busy;
  RunExecutor m_executor;
  std::atomic<bool> m_interruptIdle{false};
  std::atomic<int> m_idleDone{0};
};

}  // namespace sinkscope::gui
