// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/engine_worker.h"

#include <QFileInfo>
#include <QMetaObject>

#include "app/gui/models/engine_controller.h"
#include "engine/model.h"

namespace sinkscope::gui {

EngineWorker::EngineWorker(EngineController* controller, RequestQueue* queue,
                           std::atomic<bool>* cancel, std::atomic<bool>* busy, BackendKind kind,
                           int threads)
    : m_controller(controller), m_queue(queue), m_cancel(cancel), m_busy(busy),
      m_executor(kind, threads) {
  m_executor.setCancelFlag(cancel);
}

void EngineWorker::drain() {
  // Reset before taking the job: a cancel() that arrives after take() still hits this job.
  *m_cancel = false;
  auto job = m_queue->take();
  if (!job) return;
  *m_busy = true;
  job->work(job->id);
  m_queue->finish();
  *m_busy = false;
  if (m_queue->size() == 0)
    QMetaObject::invokeMethod(m_controller, &EngineController::idle, Qt::QueuedConnection);
}

void EngineWorker::doLoad(uint64_t id, const QString& path) {
  try {
    if (path.isEmpty()) throw std::runtime_error("no model file given");
    if (!QFileInfo::exists(path)) throw std::runtime_error("file not found: " + path.toStdString());
    m_executor.loadModel(path.toStdString());
    const ModelConfig& c = m_executor.model()->config();
    const QString backend = QString::fromStdString(m_executor.backendName());
    const QString info = QStringLiteral("%1 (%2): %3 layers x %4 heads, head dim %5, vocab %6")
                             .arg(QString::fromStdString(c.name), QString::fromStdString(c.architecture))
                             .arg(c.n_layer).arg(c.n_head).arg(c.head_dim).arg(c.n_vocab);
    // Hashed here, on the engine thread, so the exported config can name the exact file.
    const QString sha = QString::fromStdString(m_executor.model()->sha256());
    Q_EMIT m_controller->modelLoaded(id, path, backend, info, sha);
  } catch (const std::exception& e) {
    Q_EMIT m_controller->modelFailed(id, path, QString::fromStdString(e.what()));
  }
}

void EngineWorker::doSetModel(uint64_t id, std::shared_ptr<const Model> model) {
  try {
    m_executor.setModel(std::move(model));
    const ModelConfig& c = m_executor.model()->config();
    Q_EMIT m_controller->modelLoaded(
        id, QString::fromStdString(m_executor.model()->path().string()),
        QString::fromStdString(m_executor.backendName()),
        QStringLiteral("%1 layers x %2 heads").arg(c.n_layer).arg(c.n_head), QString());
  } catch (const std::exception& e) {
    Q_EMIT m_controller->modelFailed(id, QString(), QString::fromStdString(e.what()));
  }
}

void EngineWorker::doRun(uint64_t id, const RunRequest& request) {
  Q_EMIT m_controller->started(id);
  QElapsedTimer throttle;
  throttle.start();
  bool first = true;
  auto onProgress = [&](const RunProgress& p) {
    // Throttled: the bar needs ~10 updates a second, not one per token.
    if (!first && p.fraction < 1.0 && throttle.elapsed() < EngineController::kProgressIntervalMs)
      return;
    first = false;
    throttle.restart();
    Q_EMIT m_controller->progress(id, p.fraction, p.etaSeconds, QString::fromStdString(p.phase));
  };
  try {
    RunResultPtr r = m_executor.run(request, id, onProgress);
    Q_EMIT m_controller->finished(r);
  } catch (const Cancelled&) {
    Q_EMIT m_controller->cancelled(id);
  } catch (const std::exception& e) {
    Q_EMIT m_controller->failed(id, QString::fromStdString(e.what()));
  }
}

}  // namespace sinkscope::gui
