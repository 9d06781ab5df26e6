// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/engine_controller.h"

#include <QMetaObject>

#include "app/gui/models/engine_worker.h"
#include "engine/model/model.h"

namespace sinkscope::gui {

EngineController::EngineController(BackendKind kind, int threads, GpuChoice gpu, QObject* parent)
    : QObject(parent) {
  qRegisterMetaType<RunResultPtr>("sinkscope::gui::RunResultPtr");
  m_thread.setObjectName(QStringLiteral("sinkscope-engine"));
  m_queue.setCancelFlag(&m_cancel);
  m_worker = new EngineWorker(this, &m_queue, &m_cancel, &m_busy, kind, threads, gpu);
  m_worker->moveToThread(&m_thread);
  m_thread.start();
}

EngineController::~EngineController() {
  m_worker->interruptIdle() = true;  // idle-time work stops at its next layer
  m_queue.clear();
  m_queue.cancelRunning();  // a run in flight stops at its next poll
  m_thread.quit();
  m_thread.wait();
  (void)m_worker->idleDone().load(std::memory_order_acquire);  // see EngineWorker::idleDone
  delete m_worker;  // its thread has stopped
}

uint64_t EngineController::post(const QString& tag, std::function<void(uint64_t)> work) {
  m_queue.cancelRunning(tag);  // the newest request wins
  const uint64_t id = m_queue.post(tag, std::move(work));
  // After the post: the worker resets this flag before it looks at the queue, so idle-time work
  // either never starts or sees the flag and gives way.
  m_worker->interruptIdle() = true;
  QMetaObject::invokeMethod(m_worker, &EngineWorker::drain, Qt::QueuedConnection);
  return id;
}

void EngineController::pushToGui(std::function<void()> fn) {
  m_outbox.push(std::move(fn));
  QMetaObject::invokeMethod(this, &EngineController::deliver, Qt::QueuedConnection);
}

void EngineController::deliver() { m_outbox.deliver(); }

uint64_t EngineController::loadModel(const QString& path) {
  EngineWorker* w = m_worker;
  return post(QStringLiteral("model"), [w, path](uint64_t id) { w->doLoad(id, path); });
}

uint64_t EngineController::setModel(std::shared_ptr<const Model> model) {
  EngineWorker* w = m_worker;
  return post(QStringLiteral("model"), [w, model](uint64_t id) { w->doSetModel(id, model); });
}

uint64_t EngineController::setGpuChoice(GpuChoice gpu) {
  EngineWorker* w = m_worker;
  return post(QStringLiteral("model"), [w, gpu](uint64_t id) { w->doSetGpu(id, gpu); });
}

uint64_t EngineController::run(const RunRequest& request, const QString& tag) {
  EngineWorker* w = m_worker;
  return post(tag, [w, request](uint64_t id) { w->doRun(id, request); });
}

void EngineController::cancel() {
  const uint64_t dropped = m_queue.removeTag(QStringLiteral("run"));
  m_queue.cancelRunning();
  if (dropped != 0) Q_EMIT cancelled(dropped);
}

}  // namespace sinkscope::gui
