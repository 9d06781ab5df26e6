// SPDX-License-Identifier: Apache-2.0
// The GUI's handle on the engine thread (docs/architecture.md, "Threading (GUI)"): one QThread whose
// worker owns the model and backends (RunExecutor). Requests are posted with a tag into a
// RequestQueue; a newer request with the tag of a queued one replaces it, and one with the tag
// of the running one also cancels that run (newest wins). Cancellation is an atomic flag the
// backend polls between layers. Results come back as std::shared_ptr<const RunResult> through
// queued signals whose receiver is this object, so a destroyed GUI is never called back: every
// signal below is emitted on the controller's own thread, never on the engine thread.
// Nothing here blocks the GUI thread.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "app/gui/models/gui_outbox.h"
#include "app/gui/models/request_queue.h"
#include "app/gui/models/run_types.h"
#include "engine/backend/backend_factory.h"

Q_DECLARE_METATYPE(sinkscope::gui::RunResultPtr)

namespace sinkscope {
class Model;
}

namespace sinkscope::gui {

class EngineWorker;

class EngineController : public QObject {
  Q_OBJECT
 public:
  explicit EngineController(BackendKind kind = BackendKind::kAuto, int threads = 0,
                            GpuChoice gpu = {}, QObject* parent = nullptr);
  ~EngineController() override;

  // Loads a GGUF file on the engine thread (tag "model"): modelLoaded or modelFailed.
  uint64_t loadModel(const QString& path);
  uint64_t setModel(std::shared_ptr<const Model> model);  // an already loaded model (tests)
  // Another GPU weight mode / activation precision for the backends (tag "model"): modelLoaded
  // again with the new backend's description, or modelFailed (the previous choice kept).
  uint64_t setGpuChoice(GpuChoice gpu);
  // Runs a request (default tag "run"): started, progress..., then finished, failed or cancelled.
  // A run dropped before it started (cancel()) ends with cancelled alone; one replaced in the
  // queue by a newer run of its tag ends with no signal.
  uint64_t run(const RunRequest& request, const QString& tag = QStringLiteral("run"));
  // Cancels the running job and drops the queued run (cancelled for it at once, before this
  // returns: whoever waits for that run's end is not left waiting).
  void cancel();
  bool busy() const { return m_busy.load(); }
  int queuedJobs() const { return int(m_queue.size()); }

  // Progress signals are throttled to one per this many milliseconds (the last always comes).
  static constexpr int kProgressIntervalMs = 100;

 Q_SIGNALS:
  void modelLoaded(quint64 id, const QString& path, const QString& backend, const QString& info,
                   const QString& sha256);
  void modelFailed(quint64 id, const QString& path, const QString& message);
  void started(quint64 id);
  void progress(quint64 id, double fraction, double etaSeconds, const QString& phase);
  void finished(sinkscope::gui::RunResultPtr result);
  // A partial result of a run still going (RunResult::partial): the prefill's layers so far.
  void partial(sinkscope::gui::RunResultPtr result);
  void failed(quint64 id, const QString& message);
  void cancelled(quint64 id);
  void idle();  // the queue is empty and nothing runs

 private:
  uint64_t post(const QString& tag, std::function<void(uint64_t)> work);
  // The engine -> GUI hand-off (GuiOutbox): the worker's emissions run here, in order.
  void pushToGui(std::function<void()> fn);
  void deliver();
  friend class EngineWorker;
  GuiOutbox m_outbox;
  RequestQueue m_queue;
  std::atomic<bool> m_cancel{false};
  std::atomic<bool> m_busy{false};
  QThread m_thread;
  EngineWorker* m_worker = nullptr;
};

}  // namespace sinkscope::gui
