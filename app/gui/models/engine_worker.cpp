// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/engine_worker.h"

#include <QFileInfo>

#include "app/gui/models/engine_controller.h"
#include "engine/model/model.h"

namespace sinkscope::gui {

EngineWorker::EngineWorker(EngineController* controller, RequestQueue* queue,
                           std::atomic<bool>* cancel, std::atomic<bool>* busy, BackendKind kind,
                           int threads, GpuChoice gpu)
    : m_controller(controller), m_queue(queue), m_cancel(cancel), m_busy(busy),
      m_executor(kind, threads, gpu) {
  m_executor.setCancelFlag(cancel);
}

void EngineWorker::drain() {
  // take() lowers the cancel flag under the queue's lock: a cancel() that arrives after it still
  // hits this job, and one aimed at the previous job cannot.
  auto job = m_queue->take();
  if (!job) return;
  *m_busy = true;
  job->work(job->id);
  m_queue->finish();
  *m_busy = false;
  if (m_queue->size() != 0) return;
  toController([c = m_controller] { Q_EMIT c->idle(); });
  // Nothing queued: prepare what the next control change is likely to need. A post raises
  // m_interruptIdle, which stops this within a layer; the posted job's drain runs next.
  m_interruptIdle = false;
  if (m_queue->size() == 0) m_executor.warmViewCaches(&m_interruptIdle);
  m_idleDone.fetch_add(1, std::memory_order_release);
}

void EngineWorker::toController(std::function<void()> emit) {
  m_controller->pushToGui(std::move(emit));
}

// modelLoaded for the executor's model and backend: the description with the backend's note on
// a GPU (where the weights went and why), and the file's hash (on the engine thread, so the
// exported config can name the exact file).
void EngineWorker::emitLoaded(uint64_t id, const QString& path) {
  const ModelConfig& c = m_executor.model()->config();
  const QString backend = QString::fromStdString(m_executor.backendName());
  // The weights are mapped as the files store them; the KV cache grows with the context.
  const uint64_t weightBytes = m_executor.model()->weight_summary().bytes;
  const QString info =
      QStringLiteral("%1 (%2, %9): %3 layers x %4 heads, head dim %5, vocab %6; weights %7 MiB "
                     "(mapped), KV cache %8 KiB per token on the CPU")
          .arg(QString::fromStdString(c.name), QString::fromStdString(c.architecture))
          .arg(c.n_layer).arg(c.n_head).arg(c.head_dim).arg(c.n_vocab)
          .arg(double(weightBytes) / (1024.0 * 1024.0), 0, 'f', 1)
          .arg(2.0 * c.n_layer * c.kv_dim() * sizeof(float) / 1024.0, 0, 'f', 1)
          .arg(QString::fromLatin1(model_format_name(m_executor.model()->format()))) +
      (backend == QLatin1String("cpu") || m_executor.backendNote().empty()
           ? QString()
           : QStringLiteral("; ") + QString::fromStdString(m_executor.backendNote()));
  const QString sha = QString::fromStdString(m_executor.model()->sha256());
  toController([c = m_controller, id, path, backend, info, sha] {
    Q_EMIT c->modelLoaded(id, path, backend, info, sha);
  });
}

void EngineWorker::doLoad(uint64_t id, const QString& path) {
  try {
    if (path.isEmpty()) throw std::runtime_error("no model given");
    if (!QFileInfo::exists(path)) throw std::runtime_error("file not found: " + path.toStdString());
    m_executor.loadModel(path.toStdString());
    emitLoaded(id, path);
  } catch (const std::exception& e) {
    toController([c = m_controller, id, path, msg = QString::fromStdString(e.what())] {
      Q_EMIT c->modelFailed(id, path, msg);
    });
  }
}

void EngineWorker::doSetGpu(uint64_t id, GpuChoice gpu) {
  const QString path = m_executor.model()
                           ? QString::fromStdString(m_executor.model()->path().string())
                           : QString();
  try {
    m_executor.setGpuChoice(gpu);
    if (m_executor.model()) emitLoaded(id, path);
  } catch (const std::exception& e) {
    toController([c = m_controller, id, path, msg = QString::fromStdString(e.what())] {
      Q_EMIT c->modelFailed(id, path, msg);
    });
  }
}

void EngineWorker::doSetModel(uint64_t id, std::shared_ptr<const Model> model) {
  try {
    m_executor.setModel(std::move(model));
    const ModelConfig& c = m_executor.model()->config();
    toController([c = m_controller, id,
                  path = QString::fromStdString(m_executor.model()->path().string()),
                  backend = QString::fromStdString(m_executor.backendName()),
                  info = QStringLiteral("%1 layers x %2 heads").arg(c.n_layer).arg(c.n_head)] {
      Q_EMIT c->modelLoaded(id, path, backend, info, QString());
    });
  } catch (const std::exception& e) {
    toController([c = m_controller, id, msg = QString::fromStdString(e.what())] {
      Q_EMIT c->modelFailed(id, QString(), msg);
    });
  }
}

void EngineWorker::doRun(uint64_t id, const RunRequest& request) {
  toController([c = m_controller, id] { Q_EMIT c->started(id); });
  QElapsedTimer throttle;
  throttle.start();
  bool first = true;
  auto onProgress = [&](const RunProgress& p) {
    // Throttled: the bar needs ~10 updates a second, not one per token.
    if (!first && p.fraction < 1.0 && throttle.elapsed() < EngineController::kProgressIntervalMs)
      return;
    first = false;
    throttle.restart();
    toController([c = m_controller, id, f = p.fraction, eta = p.etaSeconds,
                  phase = QString::fromStdString(p.phase)] { Q_EMIT c->progress(id, f, eta, phase); });
  };
  try {
    auto onPartial = [&](const RunResultPtr& p) {
      toController([c = m_controller, p] { Q_EMIT c->partial(p); });
    };
    RunResultPtr r = m_executor.run(request, id, onProgress, onPartial);
    toController([c = m_controller, r] { Q_EMIT c->finished(r); });
  } catch (const Cancelled&) {
    toController([c = m_controller, id] { Q_EMIT c->cancelled(id); });
  } catch (const std::exception& e) {
    toController([c = m_controller, id, msg = QString::fromStdString(e.what())] {
      Q_EMIT c->failed(id, msg);
    });
  }
}

}  // namespace sinkscope::gui
