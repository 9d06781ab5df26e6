// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/engine_controller.h"

#include <QMetaObject>

#include "app/gui/models/engine_worker.h"
#include "engine/model.h"

namespace sinkscope::gui {

EngineController::EngineController(BackendKind kind, int threads, QObject* parent)
    : QObject(parent) {
  qRegisterMetaType<RunResultPtr>("sinkscope::gui::RunResultPtr");
  m_thread.setObjectName(QStringLiteral("sinkscope-engine"));
  m_worker = new EngineWorker(this, &m_queue, &m_cancel, &m_busy, kind, threads);
  m_worker->moveToThread(&m_thread);
  m_thread.start();
}

EngineController::~EngineController() {
  m_queue.clear();
  m_cancel = true;
  m_thread.quit();
  m_thread.wait();
  delete m_worker;  // its thread has stopped
}

uint64_t EngineController::post(const QString& tag, std::function<void(uint64_t)> work) {
  if (m_queue.runningTag() == tag) m_cancel = true;  // the newest request wins
  const uint64_t id = m_queue.post(tag, std::move(work));
  QMetaObject::invokeMethod(m_worker, &EngineWorker::drain, Qt::QueuedConnection);
  return id;
}

uint64_t EngineController::loadModel(const QString& path) {
  EngineWorker* w = m_worker;
  return post(QStringLiteral("model"), [w, path](uint64_t id) { w->doLoad(id, path); });
}

uint64_t EngineController::setModel(std::shared_ptr<const Model> model) {
  EngineWorker* w = m_worker;
  return post(QStringLiteral("model"), [w, model](uint64_t id) { w->doSetModel(id, model); });
}

uint64_t EngineController::run(const RunRequest& request, const QString& tag) {
  EngineWorker* w = m_worker;
  return post(tag, [w, request](uint64_t id) { w->doRun(id, request); });
}

void EngineController::cancel() {
  m_queue.removeTag(QStringLiteral("run"));
  if (!m_queue.runningTag().isEmpty()) m_cancel = true;
}

}  // namespace sinkscope::gui
